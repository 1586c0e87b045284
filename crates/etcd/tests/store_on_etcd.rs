//! The state store on a real 3-member etcd cluster: a second store on the same prefix follows
//! the first through the watch (tables, indexes, blocking queries), a store that lost a race is
//! refused and catches up, and member failures: one member down changes nothing, two down makes
//! writes fail as "state store unavailable" while reads answer, and nothing is lost after.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use drover_etcd::{EtcdConfig, EtcdKv, follow};
use drover_state::{EngineOptions, StateStore, Table};
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

async fn open(cluster: &common::EtcdCluster, prefix: &str) -> (Arc<EtcdKv>, StateStore) {
    let config = EtcdConfig {
        request_timeout: Duration::from_secs(2),
        ..EtcdConfig::new(cluster.endpoints(), prefix)
    };
    let kv = Arc::new(EtcdKv::connect(&config).await.unwrap());
    let store = StateStore::open_with_kv(kv.clone(), EngineOptions::default())
        .await
        .unwrap();
    (kv, store)
}

async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !check() {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_store_on_the_same_prefix_follows_the_first() {
    if !common::etcd_available() {
        return;
    }
    let cluster = common::EtcdCluster::start(3).await;
    let (kv_a, store_a) = open(&cluster, "drover-follow/").await;
    let (kv_b, store_b) = open(&cluster, "drover-follow/").await;
    let _follower = follow(&kv_b, store_b.clone());
    // The follower publishes the events of writes made once its watch runs (it reloads only
    // from the watch): a first write it has seen says the watch runs.
    store_a.upsert_node(node("n0"), NOW).await.unwrap();
    eventually("the follower to see n0", || store_b.node("n0").is_some()).await;
    let mut events_b = store_b.subscribe_events(0, drover_state::EventFilter::default());

    // A blocking query on the follower wakes on the other store's write.
    let waiter = {
        let store_b = store_b.clone();
        let from = store_b.indexes().table(Table::Nodes);
        tokio::spawn(async move {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
            store_b
                .wait_for_change(&[Table::Nodes], from, deadline)
                .await
        })
    };
    let index = store_a.upsert_node(node("n1"), NOW).await.unwrap();
    let outcome = waiter.await.unwrap();
    assert!(outcome.changed);
    assert_eq!(outcome.index, index);
    assert_eq!(store_b.node("n1").unwrap().modify_index, index);
    assert_eq!(store_b.latest_index(), store_a.latest_index());
    // The other store's events are on the follower's event stream, as that store made them.
    // (n0's batch may come first, published just after the reload that showed n0.)
    let batch = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let batch = events_b.next_batch().await.unwrap();
            if batch.index >= index {
                return batch;
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(batch.index, index);
    assert_eq!(batch.events[0].key, "n1");
    assert_eq!(batch.events[0].topic, drover_state::Topic::Node);
    assert_eq!(
        batch.events[0].payload.to_value()["Node"]["ID"],
        serde_json::json!("n1")
    );

    // The follower writes too, and its indexes continue the same sequence.
    let index_b = store_b.upsert_node(node("n2"), NOW).await.unwrap();
    assert!(index_b > index);
    let follower_a = follow(&kv_a, store_a.clone());
    eventually("store A sees n2", || store_a.node("n2").is_some()).await;
    assert_eq!(store_a.latest_index(), index_b);
    follower_a.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_lost_a_race_is_refused_then_catches_up() {
    if !common::etcd_available() {
        return;
    }
    let cluster = common::EtcdCluster::start(3).await;
    let (_kv_a, store_a) = open(&cluster, "drover-race/").await;
    // B does not follow: it learns of A's write only when its own write loses.
    let (_kv_b, store_b) = open(&cluster, "drover-race/").await;
    let index_a = store_a.upsert_node(node("from-a"), NOW).await.unwrap();
    let error = store_b.upsert_node(node("from-b"), NOW).await.unwrap_err();
    assert!(error.to_string().contains("revision mismatch"), "{error}");
    assert!(store_b.node("from-b").is_none());
    // The lost race made B reload: it has A's node, and its next write succeeds after A's.
    assert!(store_b.node("from-a").is_some());
    let index_b = store_b.upsert_node(node("from-b"), NOW).await.unwrap();
    assert_eq!(index_b, index_a + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn member_failures_one_is_absorbed_two_stop_writes_and_nothing_is_lost() {
    if !common::etcd_available() {
        return;
    }
    let mut cluster = common::EtcdCluster::start(3).await;
    let (_kv, store) = open(&cluster, "drover-failures/").await;
    store.upsert_node(node("before"), NOW).await.unwrap();

    // One member down: a quorum of two remains (writes may need a retry while a new leader is
    // elected, as etcd's own clients do).
    cluster.kill(0);
    let mut written = None;
    for _ in 0..20 {
        match store.upsert_node(node("one-down"), NOW).await {
            Ok(index) => {
                written = Some(index);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
    let one_down_index = written.expect("a write with one member down");

    // Two down: no quorum. Writes fail as unavailable; reads answer from the store's tables.
    cluster.kill(1);
    let error = store.upsert_node(node("two-down"), NOW).await.unwrap_err();
    assert!(error.is_unavailable(), "{error}");
    assert!(
        error.to_string().contains("state store unavailable"),
        "{error}"
    );
    assert!(store.node("before").is_some());
    assert_eq!(store.latest_index(), one_down_index);

    // Members back: writes work again, and a fresh store on the prefix has everything.
    cluster.restart(0);
    cluster.restart(1);
    cluster.wait_writable().await;
    let mut after = None;
    for _ in 0..20 {
        match store.upsert_node(node("after"), NOW).await {
            Ok(index) => {
                after = Some(index);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
    assert!(after.is_some());
    let (_kv, reopened) = open(&cluster, "drover-failures/").await;
    for id in ["before", "one-down", "after"] {
        assert!(reopened.node(id).is_some(), "{id} lost");
    }
    // ("two-down" may or may not be there: a write that timed out without quorum can still
    // commit once the members return, which is why the store reloads after a lost race.)
    assert_eq!(reopened.latest_index(), store.latest_index());
}

async fn leading(
    election: &drover_etcd::election::Election,
    what: &str,
) -> drover_etcd::election::Leadership {
    let mut view = election.watch();
    tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let known = view.borrow_and_update().clone();
            if known.is_leader {
                return known;
            }
            view.changed().await.unwrap();
        }
    })
    .await
    .unwrap_or_else(|_| panic!("timed out: {what}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_server_leads_followers_cannot_write_and_a_lapsed_leader_is_fenced() {
    if !common::etcd_available() {
        return;
    }
    let cluster = common::EtcdCluster::start(3).await;
    let candidate = |name: &str| drover_etcd::election::Candidate {
        ttl: Duration::from_secs(3),
        ..drover_etcd::election::Candidate::new(name, name.as_bytes().to_vec())
    };
    let (kv_a, store_a) = open(&cluster, "drover-lead/").await;
    let election_a = kv_a.campaign(candidate("server-a")).await.unwrap();
    let view = leading(&election_a, "server-a leads").await;
    assert_eq!(view.term, 1);
    assert_eq!(view.leader.as_deref(), Some(&b"server-a"[..]));
    store_a.upsert_node(node("a1"), NOW).await.unwrap();

    // A second server follows: it knows the leader, and its store refuses every write.
    let (kv_b, store_b) = open(&cluster, "drover-lead/").await;
    let _follower = follow(&kv_b, store_b.clone());
    let election_b = kv_b.campaign(candidate("server-b")).await.unwrap();
    let mut view_b = election_b.watch();
    tokio::time::timeout(Duration::from_secs(10), async {
        while view_b.borrow_and_update().leader.is_none() {
            view_b.changed().await.unwrap();
        }
    })
    .await
    .unwrap();
    assert!(!view_b.borrow().is_leader);
    assert_eq!(view_b.borrow().leader.as_deref(), Some(&b"server-a"[..]));
    let error = store_b.upsert_node(node("b0"), NOW).await.unwrap_err();
    assert!(error.is_unavailable(), "{error}");
    assert!(
        error.to_string().contains("not the cluster's leader"),
        "{error}"
    );
    store_a.upsert_node(node("a2"), NOW).await.unwrap();
    eventually("b follows a's writes", || store_b.node("a2").is_some()).await;

    // Both are members, alive.
    let members = kv_b.members().await.unwrap();
    let alive: Vec<(&str, bool)> = members
        .iter()
        .map(|member| (member.name.as_str(), member.alive))
        .collect();
    assert_eq!(alive, [("server-a", true), ("server-b", true)]);

    // The leader stops renewing its session (as a killed agent): the follower takes over
    // after the TTL, and the old leader's store cannot write, even with the revision right.
    election_a.abort();
    let view = leading(&election_b, "server-b takes over").await;
    assert_eq!(view.leader.as_deref(), Some(&b"server-b"[..]));
    let error = store_a.upsert_node(node("a3"), NOW).await.unwrap_err();
    assert!(error.is_unavailable(), "{error}");
    store_b.reload_from_backend().await.unwrap();
    store_b.upsert_node(node("b1"), NOW).await.unwrap();
    assert!(store_b.node("a2").is_some());
    assert!(store_b.node("a3").is_none());
    let members = kv_b.members().await.unwrap();
    let alive: Vec<(&str, bool)> = members
        .iter()
        .map(|member| (member.name.as_str(), member.alive))
        .collect();
    assert_eq!(alive, [("server-a", false), ("server-b", true)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_keeps_its_leadership_and_its_writes_while_any_one_member_is_killed() {
    if !common::etcd_available() {
        return;
    }
    let mut cluster = common::EtcdCluster::start(3).await;
    // The agent's settings: a 4 s session, 5 s per request.
    let open_default = |prefix: &'static str| {
        let config = EtcdConfig::new(cluster.endpoints(), prefix);
        async move {
            let kv = Arc::new(EtcdKv::connect(&config).await.unwrap());
            let store = StateStore::open_with_kv(kv.clone(), EngineOptions::default())
                .await
                .unwrap();
            (kv, store)
        }
    };
    let (kv_a, store_a) = open_default("drover-member-loss/").await;
    let election_a = kv_a
        .campaign(drover_etcd::election::Candidate::new(
            "server-a",
            b"server-a".to_vec(),
        ))
        .await
        .unwrap();
    leading(&election_a, "server-a leads").await;
    let mut view_a = election_a.watch();
    view_a.borrow_and_update();
    let (kv_b, store_b) = open_default("drover-member-loss/").await;
    let _follower = follow(&kv_b, store_b.clone());
    let election_b = kv_b
        .campaign(drover_etcd::election::Candidate::new(
            "server-b",
            b"server-b".to_vec(),
        ))
        .await
        .unwrap();
    let mut view_b = election_b.watch();
    tokio::time::timeout(Duration::from_secs(10), async {
        while view_b.borrow_and_update().leader.is_none() {
            view_b.changed().await.unwrap();
        }
    })
    .await
    .unwrap();

    for member in 0..3 {
        cluster.kill(member);
        // Longer than the session's TTL: every write succeeds (etcd electing a new leader of
        // its own delays them, fails none), and the leadership never moves.
        let until = tokio::time::Instant::now() + Duration::from_secs(7);
        let mut writes = 0;
        while tokio::time::Instant::now() < until {
            let id = format!("member-{member}-down-{writes}");
            if let Err(error) = store_a.upsert_node(node(&id), NOW).await {
                panic!("write {id} with member {member} down: {error}");
            }
            writes += 1;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(
            !view_a.has_changed().unwrap(),
            "server-a's leadership changed with member {member} down: {:?}",
            *view_a.borrow()
        );
        let known = view_a.borrow().clone();
        assert!(known.is_leader && known.term == 1, "{known:?}");
        let known_b = view_b.borrow().clone();
        assert!(!known_b.is_leader, "{known_b:?}");
        assert_eq!(known_b.leader.as_deref(), Some(&b"server-a"[..]));
        let last = format!("member-{member}-down-{}", writes - 1);
        eventually("the follower has the leader's writes", || {
            store_b.node(&last).is_some()
        })
        .await;
        cluster.restart(member);
        cluster.wait_member_ready(member).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_value_is_made_once_for_the_cluster() {
    if !common::etcd_available() {
        return;
    }
    let cluster = common::EtcdCluster::start(3).await;
    let (kv_a, _store_a) = open(&cluster, "drover-shared/").await;
    let (kv_b, _store_b) = open(&cluster, "drover-shared/").await;
    let first = kv_a.shared_value("id", || b"one".to_vec()).await.unwrap();
    let second = kv_b.shared_value("id", || b"two".to_vec()).await.unwrap();
    assert_eq!(
        (first.as_slice(), second.as_slice()),
        (&b"one"[..], &b"one"[..])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_named_as_a_live_server_is_refused_and_the_name_is_free_once_that_session_ends() {
    if !common::etcd_available() {
        return;
    }
    use drover_etcd::election::{CampaignError, Candidate};
    let cluster = common::EtcdCluster::start(1).await;
    let candidate = |record: &str| Candidate {
        ttl: Duration::from_secs(3),
        ..Candidate::new("server", record.as_bytes().to_vec())
    };
    let (kv_a, _store_a) = open(&cluster, "drover-names/").await;
    let election_a = kv_a.campaign(candidate("first at 10.0.0.1")).await.unwrap();
    leading(&election_a, "the first server leads").await;

    // A second and a third server of the same name, another record each: refused once the
    // name has stayed held past a TTL (its holder renews it: it lives), naming the name and
    // handing back the live server's record.
    for record in ["second at 10.0.0.2", "third at 10.0.0.3"] {
        let (kv, _store) = open(&cluster, "drover-names/").await;
        let asked = tokio::time::Instant::now();
        match kv.campaign(candidate(record)).await {
            Err(CampaignError::NameTaken { name, holder }) => {
                assert_eq!(name, "server");
                assert_eq!(holder, b"first at 10.0.0.1");
            }
            Err(other) => panic!("{record}: {other}"),
            Ok(_) => panic!("{record} campaigns under a live server's name"),
        }
        assert!(
            asked.elapsed() < Duration::from_secs(8),
            "not refused within a TTL and a few seconds"
        );
    }
    // The first server still leads and is the name's one live member.
    assert!(election_a.watch().borrow().is_leader);
    let members = kv_a.members().await.unwrap();
    assert_eq!(members.len(), 1);
    assert_eq!(members[0].record, b"first at 10.0.0.1");
    assert!(members[0].alive);

    // The first server dies (its session is no longer renewed): another server of the name,
    // started at once, waits for etcd to let the session lapse and takes the name.
    election_a.abort();
    let (kv_b, _store_b) = open(&cluster, "drover-names/").await;
    let election_b = kv_b
        .campaign(candidate("second at 10.0.0.2"))
        .await
        .unwrap();
    leading(&election_b, "the second server leads").await;
    let members = kv_b.members().await.unwrap();
    assert_eq!(members[0].record, b"second at 10.0.0.2");
    assert!(members[0].alive);

    // The same server killed and restarted before its last session lapsed (its record, which
    // names its address, is its own) takes its name back at once rather than waiting for the
    // dead session (etcd may keep that lease past its TTL) or refusing.
    election_b.abort();
    let (kv_again, _store_again) = open(&cluster, "drover-names/").await;
    let asked = tokio::time::Instant::now();
    let election_again = kv_again
        .campaign(candidate("second at 10.0.0.2"))
        .await
        .unwrap();
    assert!(
        asked.elapsed() < Duration::from_secs(2),
        "the restarted server waited {:?} for its own earlier session",
        asked.elapsed()
    );
    leading(&election_again, "the restarted server leads").await;
}

fn scaled_job(id: &str, count: i64) -> drover_structs::Job {
    drover_structs::Job {
        id: id.to_owned(),
        name: id.to_owned(),
        namespace: "default".to_owned(),
        r#type: "service".to_owned(),
        priority: 50,
        datacenters: vec!["dc1".to_owned()],
        task_groups: vec![drover_structs::TaskGroup {
            name: "g".to_owned(),
            count,
            ..drover_structs::TaskGroup::default()
        }],
        ..drover_structs::Job::default()
    }
}

/// A scale's changes: the job at `count`, its evaluation, an event for `group`.
fn scale(job_id: &str, group: &str, count: i64, eval_id: &str) -> Vec<drover_state::Change> {
    use drover_state::Change;
    vec![
        Change::Job {
            job: Box::new(scaled_job(job_id, count)),
            submission: None,
        },
        Change::Evals(vec![drover_structs::Evaluation {
            id: eval_id.to_owned(),
            namespace: "default".to_owned(),
            job_id: job_id.to_owned(),
            status: "pending".to_owned(),
            triggered_by: "job-scaling".to_owned(),
            ..drover_structs::Evaluation::default()
        }]),
        Change::ScalingEvent {
            namespace: "default".to_owned(),
            job_id: job_id.to_owned(),
            group: group.to_owned(),
            event: Box::new(drover_structs::ScalingEvent {
                time: NOW,
                count: Some(count),
                message: "scaled".to_owned(),
                ..drover_structs::ScalingEvent::default()
            }),
        },
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_of_several_records_is_one_etcd_transaction_and_a_refused_one_writes_nothing() {
    if !common::etcd_available() {
        return;
    }
    let cluster = common::EtcdCluster::start(1).await;
    let prefix = "drover-together/";
    let (_kv, store) = open(&cluster, prefix).await;
    let (kv_b, second) = open(&cluster, prefix).await;
    let _follower = follow(&kv_b, second.clone());
    let mut operator = etcd_client::Client::connect(cluster.endpoints(), None)
        .await
        .unwrap();
    // etcd's own revision: one more per transaction, whatever it writes.
    let mut etcd_revision = async || {
        operator
            .get(
                prefix,
                Some(
                    etcd_client::GetOptions::new()
                        .with_prefix()
                        .with_count_only(),
                ),
            )
            .await
            .unwrap()
            .header()
            .unwrap()
            .revision()
    };
    store.upsert_job(scaled_job("web", 1), NOW).await.unwrap();

    // The job version, its evaluation and the scaling event: one transaction, one index.
    let before = etcd_revision().await;
    let written = store
        .write_together(scale("web", "g", 3, "e1"), NOW)
        .await
        .unwrap();
    assert_eq!(
        etcd_revision().await,
        before + 1,
        "more than one transaction"
    );
    assert_eq!(written.jobs[0].job_modify_index, written.index);
    assert_eq!(store.eval("e1").unwrap().job_modify_index, written.index);
    // The follower has all of it (it reloads whole revisions).
    eventually("the follower has the scale", || {
        second.latest_index() == written.index
    })
    .await;
    assert_eq!(
        second.job("default", "web").unwrap().task_groups[0].count,
        3
    );
    assert!(second.eval("e1").is_some());
    assert_eq!(
        second
            .scaling_events("default", "web")
            .unwrap()
            .modify_index,
        written.index
    );

    // Refused part-way (an event for a group the job does not have): nothing reaches etcd,
    // nothing stays in the writer's memory.
    let at = etcd_revision().await;
    let mut changes = vec![drover_state::Change::Job {
        job: Box::new(scaled_job("api", 2)),
        submission: None,
    }];
    changes.extend(scale("web", "missing", 5, "e2"));
    let refused = store.write_together(changes, NOW).await.unwrap_err();
    assert!(
        matches!(refused, drover_state::StateError::NotFound { .. }),
        "{refused}"
    );
    assert_eq!(etcd_revision().await, at, "a refused write reached etcd");
    assert!(store.job("default", "api").is_none());
    assert!(store.eval("e2").is_none());
    assert_eq!(store.job("default", "web").unwrap().task_groups[0].count, 3);
    assert_eq!(store.latest_index(), written.index);
    // A store opened afresh on the prefix finds the state as the last good write left it.
    let (_kv_c, third) = open(&cluster, prefix).await;
    assert_eq!(third.latest_index(), written.index);
    assert!(third.job("default", "api").is_none() && third.eval("e2").is_none());
    // The writer goes on from there.
    let next = store
        .write_together(scale("web", "g", 2, "e3"), NOW)
        .await
        .unwrap();
    assert_eq!(next.index, written.index + 1);
}
