//! The typed store end to end: job versioning, derived job status and summary counters, the
//! split between server- and client-owned allocation fields, prefix lookups, indexes, blocking
//! queries, events, reload from disk and group commit under a burst of client updates.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use drover_state::{EventFilter, EventType, StateError, StateStore, Table, Topic};
use drover_structs::{Allocation, Evaluation, Job, Node, TaskState};

mod fixtures;
use fixtures::{NOW, job};

fn eval(id: &str, job_id: &str, status: &str) -> Evaluation {
    Evaluation {
        id: id.to_owned(),
        namespace: "default".to_owned(),
        job_id: job_id.to_owned(),
        status: status.to_owned(),
        triggered_by: "job-register".to_owned(),
        ..Evaluation::default()
    }
}

fn alloc(id: &str, job_id: &str, node_id: &str, eval_id: &str) -> Allocation {
    Allocation {
        id: id.to_owned(),
        namespace: "default".to_owned(),
        job_id: job_id.to_owned(),
        node_id: node_id.to_owned(),
        eval_id: eval_id.to_owned(),
        task_group: "g".to_owned(),
        name: format!("{job_id}.g[0]"),
        desired_status: "run".to_owned(),
        ..Allocation::default()
    }
}

fn client_update(id: &str, client_status: &str) -> Allocation {
    let mut task_states = BTreeMap::new();
    task_states.insert(
        "t".to_owned(),
        TaskState {
            state: if client_status == "running" {
                "running".to_owned()
            } else {
                "dead".to_owned()
            },
            ..TaskState::default()
        },
    );
    Allocation {
        id: id.to_owned(),
        client_status: client_status.to_owned(),
        client_description: format!("now {client_status}"),
        task_states,
        // A client must not be able to move server-owned fields.
        desired_status: "evict".to_owned(),
        node_id: "some-other-node".to_owned(),
        ..Allocation::default()
    }
}

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

fn counters(store: &StateStore, job_id: &str) -> (i64, i64, i64, i64, i64, i64) {
    let summary = store.job_summary("default", job_id).unwrap();
    let group = &summary.summary["g"];
    (
        group.queued,
        group.starting,
        group.running,
        group.complete,
        group.failed,
        group.lost,
    )
}

#[tokio::test]
async fn job_versions_grow_only_when_the_spec_changes() {
    let store = StateStore::in_memory().await.unwrap();
    let first = store.upsert_job(job("web", 1), NOW).await.unwrap();
    assert!(first.spec_changed);
    assert_eq!(first.job.version, 0);
    assert_eq!(first.job.create_index, first.job_modify_index);
    assert_eq!(first.job.submit_time, NOW);
    assert_eq!(first.job.status, "pending");

    // The same spec again: no new version, no write.
    let index_before = store.latest_index();
    let again = store.upsert_job(job("web", 1), NOW + 1).await.unwrap();
    assert!(!again.spec_changed);
    assert_eq!(again.job.version, 0);
    assert_eq!(again.job_modify_index, first.job_modify_index);
    assert_eq!(store.latest_index(), index_before);

    // A changed count is a new version with a new JobModifyIndex and SubmitTime.
    let second = store.upsert_job(job("web", 3), NOW + 2).await.unwrap();
    assert!(second.spec_changed);
    assert_eq!(second.job.version, 1);
    assert_eq!(second.job.create_index, first.job.create_index);
    assert!(second.job_modify_index > first.job_modify_index);
    assert_eq!(second.job.submit_time, NOW + 2);
    let versions: Vec<u64> = store
        .job_versions("default", "web")
        .iter()
        .map(|job| job.version)
        .collect();
    assert_eq!(versions, vec![1, 0]);

    // Stopping is a spec change too.
    let stopped = store
        .upsert_job(
            Job {
                stop: true,
                ..job("web", 3)
            },
            NOW + 3,
        )
        .await
        .unwrap();
    assert_eq!(stopped.job.version, 2);
    assert_eq!(stopped.job.status, "dead");

    // Only the newest six versions are kept.
    for count in 10..16 {
        store.upsert_job(job("web", count), NOW + 4).await.unwrap();
    }
    let versions: Vec<u64> = store
        .job_versions("default", "web")
        .iter()
        .map(|job| job.version)
        .collect();
    assert_eq!(versions, vec![8, 7, 6, 5, 4, 3]);
    assert_eq!(store.job("default", "web").unwrap().version, 8);

    // An empty ID is refused before anything is written.
    let error = store.upsert_job(job("", 1), NOW).await.unwrap_err();
    assert!(matches!(error, StateError::Invalid { .. }), "{error}");
}

#[tokio::test]
async fn job_status_and_summary_follow_evals_and_allocs() {
    let store = StateStore::in_memory().await.unwrap();
    store.upsert_job(job("web", 3), NOW).await.unwrap();
    assert_eq!(counters(&store, "web"), (0, 0, 0, 0, 0, 0));

    store
        .upsert_evals(vec![eval("e1", "web", "pending")], NOW)
        .await
        .unwrap();
    assert_eq!(store.job("default", "web").unwrap().status, "pending");

    // The scheduler finishes the eval with 3 queued, then the plan places 3 allocs.
    let mut finished = eval("e1", "web", "complete");
    finished.queued_allocations.insert("g".to_owned(), 3);
    store.upsert_evals(vec![finished], NOW + 1).await.unwrap();
    assert_eq!(counters(&store, "web"), (3, 0, 0, 0, 0, 0));
    assert_eq!(store.job("default", "web").unwrap().status, "dead");

    store
        .upsert_allocs(
            vec![
                alloc("a1", "web", "n1", "e1"),
                alloc("a2", "web", "n1", "e1"),
                alloc("a3", "web", "n2", "e1"),
            ],
            NOW + 2,
        )
        .await
        .unwrap();
    assert_eq!(counters(&store, "web"), (0, 3, 0, 0, 0, 0));
    assert_eq!(store.job("default", "web").unwrap().status, "running");
    let placed = store.alloc("a1").unwrap();
    assert_eq!(placed.client_status, "pending");
    assert_eq!(placed.job.as_ref().unwrap().id, "web");
    assert_eq!(placed.create_time, NOW + 2);

    let outcome = store
        .update_allocs_from_client(
            vec![
                client_update("a1", "running"),
                client_update("a2", "running"),
                client_update("a3", "failed"),
                client_update("nope", "running"),
            ],
            NOW + 3,
        )
        .await
        .unwrap();
    assert_eq!(outcome.unknown_alloc_ids, vec!["nope".to_owned()]);
    assert_eq!(counters(&store, "web"), (0, 0, 2, 0, 1, 0));

    // Server-owned fields are kept; the client's fields are taken.
    let updated = store.alloc("a1").unwrap();
    assert_eq!(updated.desired_status, "run");
    assert_eq!(updated.node_id, "n1");
    assert!(updated.job.is_some());
    assert_eq!(updated.client_description, "now running");
    assert_eq!(updated.modify_index, outcome.index);
    assert!(updated.alloc_modify_index < outcome.index);
    // A terminal alloc's tasks get a FinishedAt.
    let failed = store.alloc("a3").unwrap();
    assert_eq!(
        failed.task_states["t"].finished_at.unix_nanos(),
        Some(NOW + 3)
    );

    // The server may mark an alloc lost, but not overwrite a client status otherwise.
    let mut stop = alloc("a2", "web", "n1", "e1");
    stop.desired_status = "stop".to_owned();
    stop.client_status = "complete".to_owned();
    let mut lost = alloc("a1", "web", "n1", "e1");
    lost.client_status = "lost".to_owned();
    store
        .upsert_allocs(vec![stop, lost], NOW + 4)
        .await
        .unwrap();
    assert_eq!(store.alloc("a2").unwrap().client_status, "running");
    assert_eq!(store.alloc("a2").unwrap().desired_status, "stop");
    assert_eq!(store.alloc("a1").unwrap().client_status, "lost");
    assert_eq!(counters(&store, "web"), (0, 0, 1, 0, 1, 1));
    // a2 is still running on the client but the server wants it stopped: terminal, so dead.
    assert_eq!(store.job("default", "web").unwrap().status, "dead");

    store
        .update_allocs_from_client(vec![client_update("a2", "complete")], NOW + 5)
        .await
        .unwrap();
    assert_eq!(counters(&store, "web"), (0, 0, 0, 1, 1, 1));
}

#[tokio::test]
async fn a_purged_job_is_gone_and_its_old_allocs_do_not_count_for_a_new_one() {
    let store = StateStore::in_memory().await.unwrap();
    store.upsert_job(job("web", 1), NOW).await.unwrap();
    store
        .upsert_allocs(vec![alloc("old", "web", "n1", "e1")], NOW)
        .await
        .unwrap();
    assert_eq!(store.job("default", "web").unwrap().status, "running");

    let index = store.delete_job("default", "web").await.unwrap();
    assert!(store.job("default", "web").is_none());
    assert!(store.job_versions("default", "web").is_empty());
    assert!(store.job_summary("default", "web").is_none());
    assert_eq!(store.indexes().table(Table::Jobs), index);
    assert!(matches!(
        store.delete_job("default", "web").await,
        Err(StateError::NotFound { kind: "job", .. })
    ));
    // The allocation stays until garbage collection.
    assert_eq!(store.allocs_by_job("default", "web").len(), 1);

    let again = store.upsert_job(job("web", 1), NOW + 1).await.unwrap();
    assert_eq!(again.job.version, 0);
    assert_eq!(again.job.status, "pending");
}

#[tokio::test]
async fn lookups_by_prefix_and_by_secondary_index() {
    let store = StateStore::in_memory().await.unwrap();
    for id in ["web", "web-api", "db", "batch/dispatch-1-abcd"] {
        store.upsert_job(job(id, 1), NOW).await.unwrap();
    }
    let mut other_namespace = job("web-other", 1);
    other_namespace.namespace = "prod".to_owned();
    store.upsert_job(other_namespace, NOW).await.unwrap();

    let ids = |jobs: Vec<Arc<Job>>| jobs.iter().map(|job| job.id.clone()).collect::<Vec<_>>();
    assert_eq!(
        ids(store.jobs(Some("default"), "we")),
        vec!["web", "web-api"]
    );
    assert_eq!(
        ids(store.jobs(None, "web")),
        vec!["web", "web-api", "web-other"]
    );
    assert_eq!(
        ids(store.jobs(Some("default"), "batch/")),
        vec!["batch/dispatch-1-abcd"]
    );
    assert_eq!(store.jobs(Some("default"), "").len(), 4);
    assert!(store.jobs(Some("default"), "x").is_empty());

    store
        .upsert_evals(
            vec![
                eval("ab12", "web", "pending"),
                eval("ab34", "db", "pending"),
            ],
            NOW,
        )
        .await
        .unwrap();
    store
        .upsert_allocs(
            vec![
                alloc("f00d-1", "web", "node-a", "ab12"),
                alloc("f00d-2", "web", "node-b", "ab12"),
                alloc("beef-1", "db", "node-a", "ab34"),
            ],
            NOW,
        )
        .await
        .unwrap();
    store.upsert_node(node("node-a"), NOW).await.unwrap();
    store.upsert_node(node("node-b"), NOW).await.unwrap();

    let alloc_ids =
        |allocs: Vec<Arc<Allocation>>| allocs.iter().map(|a| a.id.clone()).collect::<Vec<_>>();
    assert_eq!(alloc_ids(store.allocs("f00d")), vec!["f00d-1", "f00d-2"]);
    assert_eq!(alloc_ids(store.allocs("beef-1")), vec!["beef-1"]);
    assert_eq!(store.allocs("").len(), 3);
    assert_eq!(
        alloc_ids(store.allocs_by_node("node-a")),
        vec!["beef-1", "f00d-1"]
    );
    assert_eq!(
        alloc_ids(store.allocs_by_job("default", "web")),
        vec!["f00d-1", "f00d-2"]
    );
    assert_eq!(alloc_ids(store.allocs_by_eval("ab34")), vec!["beef-1"]);
    assert_eq!(store.evals("ab").len(), 2);
    assert_eq!(store.evals_by_job("default", "db")[0].id, "ab34");
    assert_eq!(store.nodes("node-").len(), 2);
    assert_eq!(store.nodes("node-b")[0].id, "node-b");
}

#[tokio::test]
async fn indexes_are_set_by_the_store_and_only_grow() {
    let store = StateStore::in_memory().await.unwrap();
    let node_index = store.upsert_node(node("n1"), NOW).await.unwrap();
    let stored = store.node("n1").unwrap();
    assert_eq!(
        (stored.create_index, stored.modify_index),
        (node_index, node_index)
    );
    assert_eq!(stored.status_updated_at, NOW / 1_000_000_000);

    let down_index = store
        .update_node_status("n1", "down", NOW + 5_000_000_000)
        .await
        .unwrap();
    assert!(down_index > node_index);
    let stored = store.node("n1").unwrap();
    assert_eq!(
        (stored.create_index, stored.modify_index),
        (node_index, down_index)
    );
    assert_eq!(stored.status_updated_at, NOW / 1_000_000_000 + 5);
    // An unchanged status writes nothing.
    let same = store.update_node_status("n1", "down", NOW).await.unwrap();
    assert_eq!(same, down_index);
    assert_eq!(store.latest_index(), down_index);
    assert!(matches!(
        store.update_node_status("missing", "down", NOW).await,
        Err(StateError::NotFound { kind: "node", .. })
    ));

    let registration = store.upsert_job(job("web", 1), NOW).await.unwrap();
    let indexes = store.indexes();
    assert_eq!(indexes.table(Table::Nodes), down_index);
    assert_eq!(indexes.table(Table::Jobs), registration.job_modify_index);
    assert_eq!(
        indexes.table(Table::JobSummaries),
        registration.job_modify_index
    );
    assert_eq!(indexes.table(Table::Allocs), 0);
    assert_eq!(indexes.latest(), registration.job_modify_index);

    let mut previous = indexes.latest();
    for number in 0..10 {
        let index = store
            .upsert_evals(vec![eval(&format!("e{number}"), "web", "pending")], NOW)
            .await
            .unwrap();
        assert!(index > previous);
        previous = index;
        let stored = store.eval(&format!("e{number}")).unwrap();
        assert_eq!((stored.create_index, stored.modify_index), (index, index));
    }
}

#[tokio::test(start_paused = true)]
async fn a_blocking_query_on_allocs_wakes_on_a_client_update_and_times_out_on_paused_time() {
    let store = StateStore::in_memory().await.unwrap();
    store.upsert_job(job("web", 1), NOW).await.unwrap();
    store
        .upsert_allocs(vec![alloc("a1", "web", "n1", "e1")], NOW)
        .await
        .unwrap();
    let seen = store.indexes().table(Table::Allocs);

    let started = tokio::time::Instant::now();
    let outcome = store
        .wait_for_change(&[Table::Allocs], seen, started + Duration::from_secs(300))
        .await;
    assert!(!outcome.changed);
    assert_eq!(outcome.index, seen);
    assert_eq!(started.elapsed(), Duration::from_secs(300));

    let waiter = {
        let store = store.clone();
        tokio::spawn(async move {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(300);
            store
                .wait_for_change(&[Table::Allocs], seen, deadline)
                .await
        })
    };
    // A node write does not wake an allocation query.
    store.upsert_node(node("n1"), NOW).await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!waiter.is_finished());
    let update = store
        .update_allocs_from_client(vec![client_update("a1", "running")], NOW)
        .await
        .unwrap();
    let outcome = waiter.await.unwrap();
    assert!(outcome.changed);
    assert_eq!(outcome.index, update.index);
}

#[tokio::test]
async fn writes_produce_nomad_events() {
    let store = StateStore::in_memory().await.unwrap();
    let mut all = store.subscribe_events(0, EventFilter::default());
    let registration = store.upsert_job(job("web", 1), NOW).await.unwrap();
    store
        .upsert_allocs(vec![alloc("a1", "web", "n1", "e1")], NOW)
        .await
        .unwrap();
    store
        .update_allocs_from_client(vec![client_update("a1", "running")], NOW)
        .await
        .unwrap();

    let batch = all.next_batch().await.unwrap();
    assert_eq!(batch.index, registration.job_modify_index);
    let event = &batch.events[0];
    assert_eq!(
        (event.topic, event.event_type),
        (Topic::Job, EventType::JobRegistered)
    );
    assert_eq!(event.payload.to_value()["Job"]["ID"], "web");
    assert_eq!(event.payload.to_value()["Job"]["Version"], 0);

    let created = all.next_batch().await.unwrap();
    let event = &created.events[0];
    assert_eq!(event.event_type, EventType::AllocationCreated);
    assert_eq!(event.key, "a1");
    assert_eq!(event.filter_keys, vec!["web".to_owned()]);
    assert!(event.payload.to_value()["Allocation"]["Job"].is_null());
    assert_eq!(
        event.payload.to_value()["Allocation"]["ClientStatus"],
        "pending"
    );
    // The stored alloc keeps its job even though the event strips it.
    assert!(store.alloc("a1").unwrap().job.is_some());

    let updated = all.next_batch().await.unwrap();
    assert_eq!(updated.events[0].event_type, EventType::AllocationUpdated);
    assert_eq!(
        updated.events[0].payload.to_value()["Allocation"]["ClientStatus"],
        "running"
    );

    // Replay from an index, filtered to one topic and key.
    let filter = EventFilter {
        topics: vec![(Some(Topic::Allocation), Some("web".to_owned()))],
        namespace: Some("default".to_owned()),
        unknown_topics: Vec::new(),
        access: None,
    };
    let mut replay = store.subscribe_events(1, filter);
    let first = replay.try_next_batch().unwrap();
    assert_eq!(first.events[0].event_type, EventType::AllocationCreated);
    assert_eq!(
        replay.try_next_batch().unwrap().events[0].event_type,
        EventType::AllocationUpdated
    );
    assert!(replay.try_next_batch().is_none());
}

#[tokio::test]
async fn everything_is_reloaded_from_the_data_dir() {
    let directory = tempfile::tempdir().unwrap();
    let (registration, latest) = {
        let store = StateStore::open(directory.path()).await.unwrap();
        let registration = store.upsert_job(job("web", 2), NOW).await.unwrap();
        store.upsert_job(job("web", 3), NOW + 1).await.unwrap();
        store.upsert_node(node("n1"), NOW).await.unwrap();
        let mut finished = eval("e1", "web", "complete");
        finished.queued_allocations.insert("g".to_owned(), 1);
        store.upsert_evals(vec![finished], NOW).await.unwrap();
        store
            .upsert_allocs(
                vec![
                    alloc("a1", "web", "n1", "e1"),
                    alloc("a2", "web", "n1", "e1"),
                ],
                NOW,
            )
            .await
            .unwrap();
        store
            .update_allocs_from_client(vec![client_update("a1", "running")], NOW)
            .await
            .unwrap();
        let latest = store.indexes();
        store.close().await;
        (registration, latest)
    };
    let store = StateStore::open(directory.path()).await.unwrap();
    assert_eq!(store.indexes(), latest);
    let job = store.job("default", "web").unwrap();
    assert_eq!(job.version, 1);
    assert_eq!(job.create_index, registration.job.create_index);
    assert_eq!(job.status, "running");
    assert_eq!(store.job_versions("default", "web").len(), 2);
    assert_eq!(counters(&store, "web"), (0, 1, 1, 0, 0, 0));
    assert_eq!(store.allocs_by_node("n1").len(), 2);
    assert_eq!(store.allocs_by_eval("e1").len(), 2);
    assert_eq!(store.evals_by_job("default", "web").len(), 1);
    assert_eq!(store.alloc("a1").unwrap().client_status, "running");
    // Allocations get their job copy back (stored once per job version, not per allocation).
    let reloaded_job = store.alloc("a2").unwrap().job.clone().unwrap();
    assert_eq!(reloaded_job.id, "web");
    assert_eq!(reloaded_job.version, 1);
    assert_eq!(store.node("n1").unwrap().secret_id, "secret");
    // Writing continues from the stored index.
    let next = store.upsert_node(node("n2"), NOW).await.unwrap();
    assert_eq!(next, latest.latest() + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_concurrent_client_updates_are_a_handful_of_fsyncs() {
    let directory = tempfile::tempdir().unwrap();
    let store = StateStore::open(directory.path()).await.unwrap();
    store.upsert_job(job("web", 1000), NOW).await.unwrap();
    let placements: Vec<Allocation> = (0..1000)
        .map(|number| alloc(&format!("alloc-{number:04}"), "web", "n1", "e1"))
        .collect();
    store.upsert_allocs(placements, NOW).await.unwrap();
    let before = store.commit_stats();

    let started = std::time::Instant::now();
    let updates: Vec<_> = (0..1000)
        .map(|number| {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .update_allocs_from_client(
                        vec![client_update(&format!("alloc-{number:04}"), "running")],
                        NOW + 1,
                    )
                    .await
            })
        })
        .collect();
    let mut indexes = Vec::new();
    for update in updates {
        let outcome = update.await.unwrap().unwrap();
        assert!(outcome.unknown_alloc_ids.is_empty());
        indexes.push(outcome.index);
    }
    let elapsed = started.elapsed();
    let after = store.commit_stats();
    let transactions = after.transactions - before.transactions;
    println!(
        "1000 concurrent client alloc updates: {transactions} transactions, largest group {}, {elapsed:?}",
        after.largest_group
    );
    indexes.sort_unstable();
    indexes.dedup();
    assert_eq!(indexes.len(), 1000, "each update has its own index");
    assert!(
        transactions <= 100,
        "{transactions} transactions for 1000 updates"
    );
    assert_eq!(counters(&store, "web"), (0, 0, 1000, 0, 0, 0));
}

#[tokio::test]
async fn a_corrupt_state_file_is_an_error_that_says_how_to_recover() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join(drover_state::STATE_FILE_NAME);
    std::fs::write(
        &path,
        b"this is not a database, it is a text file".repeat(100),
    )
    .unwrap();
    let error = StateStore::open(directory.path()).await.unwrap_err();
    let message = error.to_string();
    assert!(message.contains(&path.display().to_string()), "{message}");
    assert!(message.contains("move it aside"), "{message}");
    // The file is left as it was, for inspection.
    assert!(
        std::fs::read(&path)
            .unwrap()
            .starts_with(b"this is not a database")
    );
}

#[tokio::test]
async fn a_re_registered_node_keeps_what_the_server_decided() {
    let store = StateStore::in_memory().await.unwrap();
    let mut first = node("n1");
    first.scheduling_eligibility = "ineligible".to_owned();
    store.upsert_node(first, NOW).await.unwrap();
    let mut again = node("n1");
    again.scheduling_eligibility = String::new();
    let index = store.upsert_node(again, NOW + 1).await.unwrap();
    let stored = store.node("n1").unwrap();
    assert_eq!(stored.scheduling_eligibility, "ineligible");
    assert_eq!(stored.modify_index, index);
    assert!(stored.create_index < index);
    let removed = store.delete_node("n1").await.unwrap();
    assert!(removed > index);
    assert!(store.node("n1").is_none());
}

#[tokio::test]
async fn a_node_registration_is_its_first_event_and_a_return_from_down_another() {
    let store = StateStore::in_memory().await.unwrap();
    let index = store.upsert_node(node("n1"), NOW).await.unwrap();
    let stored = store.node("n1").unwrap();
    let events: Vec<(&str, &str, u64)> = stored
        .events
        .iter()
        .map(|event| {
            (
                event.subsystem.as_str(),
                event.message.as_str(),
                event.create_index,
            )
        })
        .collect();
    assert_eq!(
        events,
        [("Cluster", drover_state::NODE_EVENT_REGISTERED, index)]
    );
    assert_eq!(
        stored.events[0].timestamp.unix_nanos(),
        Some(NOW / 1_000_000_000 * 1_000_000_000)
    );
    // Registering again while ready adds nothing; after `down` it is a re-registration.
    store.upsert_node(node("n1"), NOW + 1).await.unwrap();
    assert_eq!(store.node("n1").unwrap().events.len(), 1);
    store
        .update_node_status("n1", "down", NOW + 2)
        .await
        .unwrap();
    store.upsert_node(node("n1"), NOW + 3).await.unwrap();
    let messages: Vec<String> = store
        .node("n1")
        .unwrap()
        .events
        .iter()
        .map(|event| event.message.clone())
        .collect();
    assert_eq!(
        messages,
        [
            drover_state::NODE_EVENT_REGISTERED,
            drover_state::NODE_EVENT_REREGISTERED
        ]
    );
}

#[tokio::test]
async fn a_job_and_its_eval_are_registered_in_one_write() {
    let store = StateStore::in_memory().await.unwrap();
    let (registration, eval_index) = store
        .upsert_job_with_evals(job("web", 1), vec![eval("e1", "web", "pending")], NOW)
        .await
        .unwrap();
    assert_eq!(eval_index, registration.job_modify_index);
    assert_eq!(store.latest_index(), eval_index);
    assert_eq!(store.eval("e1").unwrap().create_index, eval_index);
    assert_eq!(registration.job.status, "pending");

    // Re-registering the same spec makes only a new eval.
    let (again, second_eval_index) = store
        .upsert_job_with_evals(job("web", 1), vec![eval("e2", "web", "pending")], NOW)
        .await
        .unwrap();
    assert!(!again.spec_changed);
    assert_eq!(again.job_modify_index, registration.job_modify_index);
    assert!(second_eval_index > eval_index);
    assert_eq!(store.job_versions("default", "web").len(), 1);

    // Purge with its deregistration eval, at one index.
    let purge_index = store
        .delete_job_with_evals("default", "web", vec![eval("e3", "web", "pending")], NOW)
        .await
        .unwrap();
    assert!(store.job("default", "web").is_none());
    assert_eq!(store.eval("e3").unwrap().create_index, purge_index);
    assert_eq!(store.latest_index(), purge_index);
}

/// Counters always equal a recount of the allocations by client status, whatever order the
/// client and server updates come in (a seeded pseudo-random walk; no placement is stopped at
/// creation, so every allocation is counted).
#[tokio::test]
async fn summary_counters_equal_a_recount_after_random_updates() {
    let store = StateStore::in_memory().await.unwrap();
    store.upsert_job(job("web", 40), NOW).await.unwrap();
    let statuses = [
        "pending", "running", "complete", "failed", "lost", "unknown",
    ];
    let mut seed: u64 = 0x5eed_1234_abcd_0001;
    let mut next_random = move |bound: u64| {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (seed >> 33) % bound
    };
    let mut created = 0_u64;
    for step in 0..400 {
        match next_random(4) {
            0 if created < 40 => {
                let id = format!("a{created:02}");
                created += 1;
                store
                    .upsert_allocs(vec![alloc(&id, "web", "n1", "e1")], NOW + step)
                    .await
                    .unwrap();
            }
            1 if created > 0 => {
                let id = format!("a{:02}", next_random(created));
                let mut marked = alloc(&id, "web", "n1", "e1");
                marked.client_status = if next_random(2) == 0 {
                    "lost".to_owned()
                } else {
                    "unknown".to_owned()
                };
                store.upsert_allocs(vec![marked], NOW + step).await.unwrap();
            }
            _ if created > 0 => {
                let id = format!("a{:02}", next_random(created));
                let status = statuses[next_random(statuses.len() as u64) as usize];
                store
                    .update_allocs_from_client(vec![client_update(&id, status)], NOW + step)
                    .await
                    .unwrap();
            }
            _ => {}
        }
    }
    let allocs = store.allocs_by_job("default", "web");
    assert_eq!(allocs.len() as u64, created);
    let count = |status: &str| {
        allocs
            .iter()
            .filter(|alloc| alloc.client_status == status)
            .count() as i64
    };
    let summary = store.job_summary("default", "web").unwrap();
    let group = &summary.summary["g"];
    assert_eq!(group.starting, count("pending"));
    assert_eq!(group.running, count("running"));
    assert_eq!(group.complete, count("complete"));
    assert_eq!(group.failed, count("failed"));
    assert_eq!(group.lost, count("lost"));
    assert_eq!(group.unknown, count("unknown"));
    let expected_status = if allocs.iter().any(|alloc| !alloc.terminal_status()) {
        "running"
    } else {
        "pending"
    };
    assert_eq!(store.job("default", "web").unwrap().status, expected_status);
}

#[tokio::test]
async fn garbage_collection_removes_evals_and_allocs_from_every_index() {
    let store = StateStore::in_memory().await.unwrap();
    store.upsert_job(job("web", 1), NOW).await.unwrap();
    store
        .upsert_allocs_and_evals(
            vec![
                alloc("a1", "web", "n1", "e1"),
                alloc("a2", "web", "n1", "e1"),
            ],
            vec![eval("e1", "web", "complete")],
            NOW,
        )
        .await
        .unwrap();
    assert_eq!(store.job("default", "web").unwrap().status, "running");

    let index = store
        .delete_evals_and_allocs(
            vec!["e1".to_owned(), "missing".to_owned()],
            vec!["a1".to_owned(), "a2".to_owned()],
        )
        .await
        .unwrap();
    assert!(store.alloc("a1").is_none());
    assert!(store.allocs_by_node("n1").is_empty());
    assert!(store.allocs_by_eval("e1").is_empty());
    assert!(store.allocs_by_job("default", "web").is_empty());
    assert!(store.evals_by_job("default", "web").is_empty());
    assert_eq!(store.indexes().table(Table::Allocs), index);
    assert_eq!(store.indexes().table(Table::Evals), index);
    // With nothing left, the job is back to pending.
    assert_eq!(store.job("default", "web").unwrap().status, "pending");
    // Nothing to remove: no write.
    let again = store
        .delete_evals_and_allocs(vec!["e1".to_owned()], Vec::new())
        .await
        .unwrap();
    assert_eq!(again, index);
    assert_eq!(store.latest_index(), index);

    store.upsert_node(node("n1"), NOW).await.unwrap();
    let ineligible = store
        .update_node_eligibility("n1", "ineligible")
        .await
        .unwrap();
    assert_eq!(
        store.node("n1").unwrap().scheduling_eligibility,
        "ineligible"
    );
    assert_eq!(
        store
            .update_node_eligibility("n1", "ineligible")
            .await
            .unwrap(),
        ineligible
    );
}

#[tokio::test]
async fn allocations_share_one_stored_copy_per_job_version_until_collected() {
    let kv = Arc::new(drover_state::MemoryKv::new());
    let store = StateStore::open_with_kv(kv.clone(), drover_state::EngineOptions::default())
        .await
        .unwrap();
    let stored_job_copies = || async {
        drover_state::Kv::scan(
            kv.as_ref(),
            drover_state::KeyRange::prefix(b"t/alloc_jobs/"),
        )
        .await
        .unwrap()
        .len()
    };
    store.upsert_job(job("web", 3), NOW).await.unwrap();
    store
        .upsert_allocs(
            vec![
                alloc("a1", "web", "n1", "e1"),
                alloc("a2", "web", "n1", "e1"),
                alloc("a3", "web", "n1", "e1"),
            ],
            NOW,
        )
        .await
        .unwrap();
    store
        .update_allocs_from_client(vec![client_update("a1", "running")], NOW)
        .await
        .unwrap();
    assert_eq!(stored_job_copies().await, 1);
    store.upsert_job(job("web", 4), NOW).await.unwrap();
    store
        .upsert_allocs(vec![alloc("a4", "web", "n1", "e2")], NOW)
        .await
        .unwrap();
    assert_eq!(stored_job_copies().await, 2);
    assert_eq!(store.alloc("a4").unwrap().job.as_ref().unwrap().version, 1);
    assert_eq!(store.alloc("a1").unwrap().job.as_ref().unwrap().version, 0);

    store
        .delete_evals_and_allocs(Vec::new(), vec!["a1".to_owned(), "a2".to_owned()])
        .await
        .unwrap();
    assert_eq!(stored_job_copies().await, 2, "a3 still uses version 0");
    store
        .delete_evals_and_allocs(Vec::new(), vec!["a3".to_owned()])
        .await
        .unwrap();
    assert_eq!(stored_job_copies().await, 1);
    store
        .delete_evals_and_allocs(Vec::new(), vec!["a4".to_owned()])
        .await
        .unwrap();
    assert_eq!(stored_job_copies().await, 0);
}

#[tokio::test]
async fn a_driver_whose_health_changed_on_registration_leaves_a_driver_event() {
    let store = StateStore::in_memory().await.unwrap();
    let with_docker = |healthy: bool, description: &str| {
        let mut node = node("node-a");
        node.drivers.insert(
            "docker".to_owned(),
            drover_structs::DriverInfo {
                detected: true,
                healthy,
                health_description: description.to_owned(),
                ..Default::default()
            },
        );
        node
    };
    // The node's "Driver" events (its first event is its registration).
    let driver_events = |store: &StateStore| -> Vec<drover_structs::NodeEvent> {
        store
            .node("node-a")
            .unwrap()
            .events
            .iter()
            .filter(|event| event.subsystem == "Driver")
            .cloned()
            .collect()
    };
    // First registration: no event for a driver the node did not have before (Nomad's rule).
    store
        .upsert_node(with_docker(true, "Healthy"), NOW)
        .await
        .unwrap();
    assert!(driver_events(&store).is_empty());
    // The same health again: nothing.
    store
        .upsert_node(with_docker(true, "Healthy"), NOW)
        .await
        .unwrap();
    assert!(driver_events(&store).is_empty());
    // Unhealthy: one event with the new description and the driver's name.
    let index = store
        .upsert_node(with_docker(false, "Docker is unavailable"), NOW + 1)
        .await
        .unwrap();
    let events = driver_events(&store);
    assert_eq!(events.len(), 1, "{events:?}");
    let event = &events[0];
    assert_eq!(event.subsystem, "Driver");
    assert_eq!(event.message, "Docker is unavailable");
    assert_eq!(
        event.details,
        BTreeMap::from([("driver".to_owned(), "docker".to_owned())])
    );
    assert_eq!(event.create_index, index);
    // Healthy again: a second one; at most ten are kept.
    for round in 0..12 {
        let healthy = round % 2 == 0;
        let description = if healthy {
            "Healthy"
        } else {
            "Docker is unavailable"
        };
        store
            .upsert_node(with_docker(healthy, description), NOW + 2 + round)
            .await
            .unwrap();
    }
    let node = store.node("node-a").unwrap();
    assert_eq!(node.events.len(), 10);
    assert_eq!(driver_events(&store).len(), 10, "the registration aged out");
    assert_eq!(node.events.last().unwrap().message, "Docker is unavailable");
}

#[tokio::test]
async fn reconciling_summaries_counts_each_jobs_allocations_afresh() {
    let store = StateStore::in_memory().await.unwrap();
    store.upsert_job(job("web", 3), NOW).await.unwrap();
    let mut finished = eval("e1", "web", "complete");
    finished.queued_allocations.insert("g".to_owned(), 3);
    store.upsert_evals(vec![finished], NOW).await.unwrap();
    store
        .upsert_allocs(
            vec![
                alloc("a1", "web", "n1", "e1"),
                alloc("a2", "web", "n1", "e1"),
            ],
            NOW + 1,
        )
        .await
        .unwrap();
    store
        .update_allocs_from_client(
            vec![
                client_update("a1", "running"),
                client_update("a2", "failed"),
            ],
            NOW + 2,
        )
        .await
        .unwrap();
    // One queued left from the scheduler's count beside the two allocations.
    assert_eq!(counters(&store, "web"), (1, 0, 1, 0, 1, 0));

    let index = store.reconcile_job_summaries().await.unwrap();
    // Counted from the allocations alone: the queued count starts again at zero, as Nomad's.
    assert_eq!(counters(&store, "web"), (0, 0, 1, 0, 1, 0));
    let summary = store.job_summary("default", "web").unwrap();
    assert_eq!(summary.modify_index, index);
    assert_eq!(
        summary.create_index,
        store.job("default", "web").unwrap().create_index
    );

    // Purged and registered again: the first job's allocations (kept until collected) are not
    // the new job's, so only the new one's allocation counts.
    store.delete_job("default", "web").await.unwrap();
    store.upsert_job(job("web", 1), NOW + 3).await.unwrap();
    store
        .upsert_allocs(vec![alloc("a3", "web", "n2", "e2")], NOW + 4)
        .await
        .unwrap();
    store
        .update_allocs_from_client(
            vec![
                client_update("a3", "running"),
                client_update("a1", "complete"),
            ],
            NOW + 5,
        )
        .await
        .unwrap();
    store.reconcile_job_summaries().await.unwrap();
    assert_eq!(counters(&store, "web"), (0, 0, 1, 0, 0, 0));
}

fn submission(source: &str) -> drover_structs::JobSubmission {
    drover_structs::JobSubmission {
        source: source.to_owned(),
        format: "hcl2".to_owned(),
        variable_flags: Some(BTreeMap::from([("dc".to_owned(), "dc1".to_owned())])),
        variables: "count = 3\n".to_owned(),
        ..drover_structs::JobSubmission::default()
    }
}

#[tokio::test]
async fn job_submissions_are_kept_per_version_follow_reverts_and_go_with_the_job() {
    let directory = tempfile::tempdir().unwrap();
    let store = StateStore::open(directory.path()).await.unwrap();
    let first = store
        .upsert_job_with_submission(job("web", 1), Some(submission("v0")), NOW)
        .await
        .unwrap();
    let stored = store.job_submission("default", "web", 0).unwrap();
    assert_eq!(stored.source, "v0");
    assert_eq!(stored.namespace, "default");
    assert_eq!(stored.job_id, "web");
    assert_eq!(stored.version, 0);
    assert_eq!(stored.job_modify_index, first.job_modify_index);
    assert_eq!(stored.variables, "count = 3\n");

    // The same spec again writes nothing, so its submission is not kept either.
    store
        .upsert_job_with_submission(job("web", 1), Some(submission("ignored")), NOW)
        .await
        .unwrap();
    assert_eq!(
        store.job_submission("default", "web", 0).unwrap().source,
        "v0"
    );
    assert!(store.job_submission("default", "web", 1).is_none());

    // A new version without a submission has none, unless the job it sends names a version
    // the job has reached (a revert, a stop, the stored job sent again): that version's
    // submission comes along, as in Nomad.
    let second = store
        .upsert_job(
            Job {
                version: 7,
                ..job("web", 2)
            },
            NOW,
        )
        .await
        .unwrap();
    assert_eq!(second.job.version, 1);
    assert!(store.job_submission("default", "web", 1).is_none());
    let reverted = store
        .upsert_job(
            Job {
                version: 0,
                ..job("web", 1)
            },
            NOW,
        )
        .await
        .unwrap();
    assert_eq!(reverted.job.version, 2);
    let copied = store.job_submission("default", "web", 2).unwrap();
    assert_eq!(copied.source, "v0");
    assert_eq!(copied.version, 2);
    assert_eq!(copied.job_modify_index, reverted.job_modify_index);

    // Only the newest six are kept, by JobModifyIndex.
    for count in 10..16 {
        store
            .upsert_job_with_submission(
                job("web", count),
                Some(submission(&format!("count {count}"))),
                NOW,
            )
            .await
            .unwrap();
    }
    let snapshot = store.snapshot();
    assert_eq!(
        snapshot.job_submission_versions("default", "web"),
        vec![3, 4, 5, 6, 7, 8]
    );
    assert_eq!(
        store.job_submission("default", "web", 8).unwrap().source,
        "count 15"
    );
    let index = store.indexes().table(Table::JobSubmissions);
    assert!(index >= store.job("default", "web").unwrap().job_modify_index);

    // They survive a restart, and a purge removes them.
    store.close().await;
    let store = StateStore::open(directory.path()).await.unwrap();
    assert_eq!(
        store.snapshot().job_submission_versions("default", "web"),
        vec![3, 4, 5, 6, 7, 8]
    );
    assert_eq!(
        store
            .job_submission("default", "web", 3)
            .unwrap()
            .variable_flags
            .as_ref()
            .unwrap()["dc"],
        "dc1"
    );
    store.delete_job("default", "web").await.unwrap();
    assert!(
        store
            .snapshot()
            .job_submission_versions("default", "web")
            .is_empty()
    );
    store.close().await;
    let store = StateStore::open(directory.path()).await.unwrap();
    assert!(store.job_submission("default", "web", 8).is_none());
}

#[tokio::test]
async fn one_time_tokens_are_one_per_accessor_found_by_secret_and_survive_a_restart() {
    use drover_structs::acl::OneTimeToken;
    let token = |accessor: &str, secret: &str| OneTimeToken {
        one_time_secret_id: secret.to_owned(),
        accessor_id: accessor.to_owned(),
        expires_at: drover_structs::Timestamp::from_unix_nanos(NOW),
        ..OneTimeToken::default()
    };
    let directory = tempfile::tempdir().unwrap();
    let store = StateStore::open(directory.path()).await.unwrap();
    let first = store
        .upsert_one_time_token(token("a1", "s1"))
        .await
        .unwrap();
    assert_eq!(first.create_index, first.modify_index);
    assert_eq!(first.create_index, store.indexes().table(Table::Acl));
    store
        .upsert_one_time_token(token("a2", "s2"))
        .await
        .unwrap();
    // A second one for a1 replaces its first: s1 no longer finds anything.
    store
        .upsert_one_time_token(token("a1", "s3"))
        .await
        .unwrap();
    let acl = store.acl();
    assert!(acl.one_time_token_by_secret("s1").is_none());
    assert_eq!(
        acl.one_time_token_by_secret("s3").unwrap().accessor_id,
        "a1"
    );
    assert_eq!(acl.one_time_tokens.len(), 2);
    store.close().await;

    let store = StateStore::open(directory.path()).await.unwrap();
    assert_eq!(
        store
            .acl()
            .one_time_token_by_secret("s2")
            .unwrap()
            .accessor_id,
        "a2"
    );
    let before = store.latest_index();
    // An exchange deletes by accessor; deleting what is not there writes nothing.
    let index = store
        .delete_one_time_tokens(vec!["a2".to_owned()])
        .await
        .unwrap();
    assert_eq!(index, before + 1);
    assert_eq!(
        store
            .delete_one_time_tokens(vec!["a2".to_owned()])
            .await
            .unwrap(),
        before + 1
    );
    assert_eq!(store.latest_index(), before + 1);
    assert_eq!(
        store
            .delete_one_time_tokens_by_secret(vec!["s3".to_owned(), "nope".to_owned()])
            .await
            .unwrap(),
        1
    );
    store.close().await;
    let store = StateStore::open(directory.path()).await.unwrap();
    assert!(store.acl().one_time_tokens.is_empty());
    assert!(store.acl().one_time_tokens_by_secret.is_empty());
}

#[tokio::test]
async fn a_node_is_found_by_its_secret_through_writes_removal_and_a_reload() {
    let directory = tempfile::tempdir().unwrap();
    let with_secret = |id: &str, secret: &str| Node {
        secret_id: secret.to_owned(),
        ..node(id)
    };
    {
        let store = StateStore::open(directory.path()).await.unwrap();
        store
            .upsert_node(with_secret("n1", "s1"), NOW)
            .await
            .unwrap();
        store
            .upsert_node(with_secret("n2", "s2"), NOW)
            .await
            .unwrap();
        store
            .upsert_node(with_secret("n3", "s3"), NOW)
            .await
            .unwrap();
        assert_eq!(store.node_by_secret("s1").unwrap().id, "n1");
        assert_eq!(store.node_by_secret("s2").unwrap().id, "n2");
        assert!(store.node_by_secret("").is_none());
        assert!(store.node_by_secret("nobody").is_none());
        // A status write keeps the node where its secret finds it.
        store
            .update_node_status("n2", "down", NOW + 1)
            .await
            .unwrap();
        assert_eq!(store.node_by_secret("s2").unwrap().status, "down");
        store.delete_node("n3").await.unwrap();
        assert!(store.node_by_secret("s3").is_none());
        store.close().await;
    }
    // Loaded from the data dir, the index is built again.
    let store = StateStore::open(directory.path()).await.unwrap();
    assert_eq!(store.node_by_secret("s1").unwrap().id, "n1");
    assert_eq!(store.node_by_secret("s2").unwrap().id, "n2");
    assert!(store.node_by_secret("s3").is_none());
}

#[tokio::test]
async fn job_summary_changes_name_only_the_summaries_that_changed_or_went() {
    let store = StateStore::in_memory().await.unwrap();
    for id in ["api", "batch", "web"] {
        store.upsert_job(job(id, 1), NOW).await.unwrap();
    }
    let first = store.snapshot();
    let all = first.job_summary_changes(None);
    let added: Vec<&str> = all
        .iter()
        .map(|change| {
            assert!(change.before.is_none(), "{change:?}");
            change.after.as_ref().unwrap().job_id.as_str()
        })
        .collect();
    assert_eq!(added, ["api", "batch", "web"]);
    assert!(first.job_summary_changes(Some(&first)).is_empty());

    // One summary's counters move, another job is purged, the third is untouched.
    store
        .upsert_allocs(vec![alloc("a1", "web", "n1", "e1")], NOW + 1)
        .await
        .unwrap();
    store.delete_job("default", "api").await.unwrap();
    let second = store.snapshot();
    let changes = second.job_summary_changes(Some(&first));
    assert_eq!(changes.len(), 2, "{changes:?}");
    let purged = &changes[0];
    assert_eq!(purged.before.as_ref().unwrap().job_id, "api");
    assert!(purged.after.is_none());
    let moved = &changes[1];
    assert_eq!(moved.before.as_ref().unwrap().summary["g"].starting, 0);
    assert_eq!(moved.after.as_ref().unwrap().summary["g"].starting, 1);
    assert_eq!(moved.after.as_ref().unwrap().job_id, "web");
}
