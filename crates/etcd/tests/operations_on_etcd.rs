//! Operations on a real 3-member etcd cluster: a snapshot read at one revision and restored
//! (on etcd, in fenced batches within etcd's request limits, across backends, seen by a
//! following store through its watch); a follower whose link to etcd was cut replays the
//! writes it missed, events included, or reloads when etcd compacted them; a write whose
//! answer was lost is answered as done when its retry finds it committed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{LinkMode, LinkProxy};
use drover_etcd::{EtcdConfig, EtcdKv, follow};
use drover_state::{EngineOptions, EventFilter, Kv, StateStore, WriteBatch};
use drover_structs::Node;

const NOW: i64 = 1_700_000_000_000_000_000;

fn node(id: &str) -> Node {
    Node {
        id: id.to_owned(),
        secret_id: "secret".to_owned(),
        name: format!("node-{id}"),
        datacenter: "dc1".to_owned(),
        status: "ready".to_owned(),
        scheduling_eligibility: "eligible".to_owned(),
        ..Node::default()
    }
}

/// A node with `bytes` of text that does not compress (so byte limits, not only operation
/// counts, split a restore).
fn heavy_node(id: &str, bytes: usize, seed: u64) -> Node {
    let mut state = seed | 1;
    let noise: String = (0..bytes)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            char::from(b"0123456789abcdefghijklmnopqrstuvwxyz"[(state % 36) as usize])
        })
        .collect();
    let mut node = node(id);
    node.attributes.insert("noise".to_owned(), noise);
    node
}

async fn connect(endpoints: Vec<String>, prefix: &str) -> Arc<EtcdKv> {
    let config = EtcdConfig {
        request_timeout: Duration::from_secs(2),
        ..EtcdConfig::new(endpoints, prefix)
    };
    Arc::new(EtcdKv::connect(&config).await.unwrap())
}

async fn open(endpoints: Vec<String>, prefix: &str) -> (Arc<EtcdKv>, StateStore) {
    let kv = connect(endpoints, prefix).await;
    let store = StateStore::open_with_kv(kv.clone(), EngineOptions::default())
        .await
        .unwrap();
    (kv, store)
}

async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !check() {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_restores_on_etcd_in_batches_across_backends_and_followers_reload() {
    if !common::etcd_available() {
        return;
    }
    let cluster = common::EtcdCluster::start(3).await;
    // 300 records of 12 kB each: over etcd's 128 operations and 1.5 MiB per transaction.
    let (_, source) = open(cluster.endpoints(), "drover-snap-source/").await;
    let nodes: Vec<Node> = (0..300_u64)
        .map(|number| heavy_node(&format!("n{number:03}"), 12_000, number + 1))
        .collect();
    for node in &nodes {
        source.upsert_node(node.clone(), NOW).await.unwrap();
    }
    let contents = source.read_all(false).await.unwrap();
    assert_eq!(contents.backend, "etcd");
    assert!(contents.term > 0, "etcd's raft term");
    let source_index = source.latest_index();
    assert_eq!(
        contents
            .pairs
            .iter()
            .filter(|pair| pair.key.starts_with(b"t/nodes/"))
            .count(),
        300
    );
    // A stale (serializable) read sees the same keyspace here: nothing is writing.
    assert_eq!(source.read_all(true).await.unwrap().pairs, contents.pairs);

    // The target has a history of its own, and a second store following it.
    let (target_kv, target) = open(cluster.endpoints(), "drover-snap-target/").await;
    target.upsert_node(node("old"), NOW).await.unwrap();
    let (follower_kv, follower) = open(cluster.endpoints(), "drover-snap-target/").await;
    let _following = follow(&follower_kv, follower.clone());
    eventually("the follower has the target's node", || {
        follower.node("old").is_some()
    })
    .await;

    let index = target.restore(contents.pairs.clone()).await.unwrap();
    assert_eq!(
        index, source_index,
        "a fresh-enough target keeps the snapshot's index"
    );
    assert!(target.node("old").is_none());
    assert_eq!(target.nodes("").len(), 300);
    assert_eq!(
        target.node("n123").unwrap().attributes["noise"],
        nodes[123].attributes["noise"]
    );
    eventually("the follower reloads the restored state", || {
        follower.nodes("").len() == 300 && follower.node("old").is_none()
    })
    .await;
    assert_eq!(follower.latest_index(), index);
    // Writes go on after the restore, on the new records, and the follower follows them.
    let after = target.upsert_node(node("after"), NOW).await.unwrap();
    assert!(after > index);
    eventually("the follower sees a write after the restore", || {
        follower.node("after").is_some()
    })
    .await;
    // What etcd holds is the restored keyspace and that write, nothing of before.
    let held = target_kv.read_all(false).await.unwrap();
    let held_nodes = held
        .pairs
        .iter()
        .filter(|pair| pair.key.starts_with(b"t/nodes/"))
        .count();
    assert_eq!(held_nodes, 301);

    // The same snapshot restores into the embedded store.
    let directory = tempfile::tempdir().unwrap();
    let embedded = StateStore::open(directory.path()).await.unwrap();
    embedded.restore(contents.pairs).await.unwrap();
    assert_eq!(embedded.nodes("").len(), 300);
    assert_eq!(embedded.latest_index(), source_index);
    let back = embedded.read_all(false).await.unwrap();
    assert_eq!(back.backend, "embedded");

    // And a snapshot of the embedded store restores on etcd again (a second restore on the
    // same prefix: the generation moves on once more).
    embedded
        .upsert_node(node("from-embedded"), NOW)
        .await
        .unwrap();
    let round_trip = embedded.read_all(false).await.unwrap();
    target.restore(round_trip.pairs).await.unwrap();
    assert!(target.node("from-embedded").is_some());
    assert!(target.node("after").is_none());
    eventually("the follower reloads the second restore", || {
        follower.node("from-embedded").is_some() && follower.node("after").is_none()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_whose_link_was_cut_replays_the_missed_writes_with_their_events() {
    if !common::etcd_available() {
        return;
    }
    let cluster = common::EtcdCluster::start(3).await;
    let (_, leader) = open(cluster.endpoints(), "drover-replay/").await;
    // The follower reaches etcd only through a link the test can cut.
    let link = LinkProxy::start(&cluster.endpoints()[0]).await;
    let (follower_kv, follower) = open(vec![link.endpoint()], "drover-replay/").await;
    let following = follow(&follower_kv, follower.clone());
    let first = leader.upsert_node(node("n0"), NOW).await.unwrap();
    eventually("the follower's watch runs", || {
        follower.node("n0").is_some()
    })
    .await;
    let mut events = follower.subscribe_events(first + 1, EventFilter::default());

    link.set(LinkMode::Cut);
    let mut written = Vec::new();
    for number in 1..=5 {
        let id = format!("n{number}");
        written.push((
            id.clone(),
            leader.upsert_node(node(&id), NOW).await.unwrap(),
        ));
    }
    // A blocking query on the follower waits through the cut.
    let waiting = {
        let follower = follower.clone();
        let last = written[4].1;
        tokio::spawn(async move {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
            follower
                .wait_for_change(&[drover_state::Table::Nodes], last - 1, deadline)
                .await
        })
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(follower.node("n5").is_none(), "the link is cut");
    link.set(LinkMode::Pass);

    // Every missed write arrives, with its event, in order, and the blocking query wakes.
    for (id, index) in &written {
        let batch = tokio::time::timeout(Duration::from_secs(20), events.next_batch())
            .await
            .unwrap_or_else(|_| panic!("no event for {id}"))
            .unwrap();
        assert_eq!(
            (batch.index, batch.events[0].key.as_str()),
            (*index, id.as_str())
        );
    }
    assert_eq!(waiting.await.unwrap().index, written[4].1);
    assert!(follower.node("n5").is_some());
    let stats = following.stats();
    assert!(stats.resumed >= 1, "{stats:?}");
    assert_eq!(stats.compacted, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_whose_missed_revisions_were_compacted_reloads_and_says_so() {
    if !common::etcd_available() {
        return;
    }
    let cluster = common::EtcdCluster::start(3).await;
    let (_, leader) = open(cluster.endpoints(), "drover-compacted/").await;
    let link = LinkProxy::start(&cluster.endpoints()[0]).await;
    let (follower_kv, follower) = open(vec![link.endpoint()], "drover-compacted/").await;
    let following = follow(&follower_kv, follower.clone());
    leader.upsert_node(node("n0"), NOW).await.unwrap();
    eventually("the follower's watch runs", || {
        follower.node("n0").is_some()
    })
    .await;

    link.set(LinkMode::Cut);
    for number in 1..=3 {
        leader
            .upsert_node(node(&format!("n{number}")), NOW)
            .await
            .unwrap();
    }
    let mut admin = etcd_client::Client::connect([cluster.endpoints()[1].as_str()], None)
        .await
        .unwrap();
    let revision = admin
        .get("probe", None)
        .await
        .unwrap()
        .header()
        .unwrap()
        .revision();
    admin.compact(revision, None).await.unwrap();
    link.set(LinkMode::Pass);

    // A reload the follower had queued before the cut may read the new writes on its retry,
    // so the writes' arrival alone does not show the watch's resumption: the count does.
    eventually("the follower's watch meets the compaction", || {
        following.stats().compacted == 1
    })
    .await;
    eventually("the follower reloads past the compaction", || {
        follower.node("n3").is_some()
    })
    .await;
    assert_eq!(follower.latest_index(), leader.latest_index());
    let stats = following.stats();
    assert!(stats.resumed >= 1 && stats.compacted == 1, "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_whose_answer_was_lost_is_answered_as_done_when_its_retry_finds_it_committed() {
    if !common::etcd_available() {
        return;
    }
    let cluster = common::EtcdCluster::start(3).await;
    let link = LinkProxy::start(&cluster.endpoints()[0]).await;
    let mut endpoints = cluster.endpoints();
    endpoints[0] = link.endpoint();
    let config = EtcdConfig {
        request_timeout: Duration::from_secs(1),
        ..EtcdConfig::new(endpoints, "drover-retry/")
    };
    let kv = EtcdKv::connect(&config).await.unwrap();
    let mut first = WriteBatch::new();
    first.put(b"a".to_vec(), b"1".to_vec());
    let revision = kv.apply(first).await.unwrap();

    // The member behind the link commits the next batch, but its answer never comes back: the
    // call times out there and sends the batch to the next member, where its guard fails.
    link.set(LinkMode::SwallowReplies);
    let mut second = WriteBatch::new();
    second.put(b"b".to_vec(), b"2".to_vec());
    second.expected_revision = Some(revision);
    assert_eq!(kv.apply(second).await.unwrap(), revision + 1);
    assert_eq!(kv.revision().await.unwrap(), revision + 1);
    assert_eq!(kv.get(b"b").await.unwrap(), Some(b"2".to_vec()));

    // A batch that truly lost the race is still refused as one.
    let mut stale = WriteBatch::new();
    stale.put(b"c".to_vec(), b"3".to_vec());
    stale.expected_revision = Some(revision);
    let error = kv.apply(stale).await.unwrap_err();
    assert!(error.to_string().contains("revision mismatch"), "{error}");
    assert_eq!(kv.get(b"c").await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_and_client_updates_of_a_thousand_allocations_fit_etcds_limits() {
    if !common::etcd_available() {
        return;
    }
    let cluster = common::EtcdCluster::start(3).await;
    let (_, store) = open(cluster.endpoints(), "drover-big-plan/").await;
    let (follower_kv, follower) = open(cluster.endpoints(), "drover-big-plan/").await;
    let _following = follow(&follower_kv, follower.clone());
    store.upsert_node(node("n1"), NOW).await.unwrap();
    let job = drover_structs::Job {
        id: "big".to_owned(),
        name: "big".to_owned(),
        namespace: "default".to_owned(),
        r#type: "service".to_owned(),
        priority: 50,
        datacenters: vec!["dc1".to_owned()],
        task_groups: vec![drover_structs::TaskGroup {
            name: "g".to_owned(),
            count: 1000,
            ..drover_structs::TaskGroup::default()
        }],
        ..drover_structs::Job::default()
    };
    store.upsert_job(job, NOW).await.unwrap();
    let allocs: Vec<drover_structs::Allocation> = (0..1000)
        .map(|number| drover_structs::Allocation {
            id: format!("alloc-{number:04}"),
            namespace: "default".to_owned(),
            job_id: "big".to_owned(),
            node_id: "n1".to_owned(),
            task_group: "g".to_owned(),
            name: format!("big.g[{number}]"),
            desired_status: "run".to_owned(),
            ..drover_structs::Allocation::default()
        })
        .collect();
    // One plan of 1 000 placements: over etcd's 128 operations per transaction as one write.
    let placed = store
        .upsert_plan_results(None, Vec::new(), allocs, Vec::new(), NOW)
        .await
        .unwrap();
    assert_eq!(store.allocs_by_job("default", "big").len(), 1000);
    assert_eq!(store.latest_index(), placed);
    // The client reports them all running in one update.
    let updates: Vec<drover_structs::Allocation> = (0..1000)
        .map(|number| drover_structs::Allocation {
            id: format!("alloc-{number:04}"),
            client_status: "running".to_owned(),
            ..drover_structs::Allocation::default()
        })
        .collect();
    let answer = store.update_allocs_from_client(updates, NOW).await.unwrap();
    assert!(answer.unknown_alloc_ids.is_empty());
    let summary = store.job_summary("default", "big").unwrap();
    assert_eq!(summary.summary["g"].running, 1000);
    eventually("the follower has every allocation running", || {
        follower
            .job_summary("default", "big")
            .is_some_and(|summary| {
                summary
                    .summary
                    .get("g")
                    .is_some_and(|group| group.running == 1000)
            })
    })
    .await;
}
