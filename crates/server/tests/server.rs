//! The server end to end over a real (in-memory) state store and the real scheduler: register →
//! evaluation → plan → allocations; failed placements and blocked evaluations; deregister; lost
//! nodes; restart of the server on the same store.

use std::sync::Arc;
use std::time::Duration;

use drover_scheduler::testing::{JobBuilder, NodeBuilder};
use drover_server::{Server, ServerConfig, SystemClock};
use drover_state::StateStore;
use drover_structs::{
    ALLOC_CLIENT_STATUS_FAILED, ALLOC_CLIENT_STATUS_LOST, ALLOC_CLIENT_STATUS_RUNNING,
    ALLOC_DESIRED_STATUS_RUN, ALLOC_DESIRED_STATUS_STOP, Allocation, EVAL_STATUS_BLOCKED,
    EVAL_STATUS_COMPLETE, Evaluation, Job, JobRegisterRequest, NODE_STATUS_DOWN,
};

fn start(state: StateStore) -> Server {
    Server::start(ServerConfig::default(), state, Arc::new(SystemClock))
}

fn register(job: Job) -> JobRegisterRequest {
    JobRegisterRequest {
        job: Some(job),
        ..JobRegisterRequest::default()
    }
}

/// Waits (on tokio time, so paused-time tests advance) until `probe` holds.
async fn eventually<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    for _ in 0..2000 {
        if let Some(value) = probe() {
            return value;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for {what}");
}

async fn terminal_eval(server: &Server, eval_id: &str) -> Arc<Evaluation> {
    eventually("the evaluation to finish", || {
        server
            .state()
            .eval(eval_id)
            .filter(|eval| eval.status != drover_structs::EVAL_STATUS_PENDING)
    })
    .await
}

fn running_allocs(server: &Server, job_id: &str) -> usize {
    server
        .state()
        .allocs_by_job("default", job_id)
        .iter()
        .filter(|alloc| alloc.desired_status == ALLOC_DESIRED_STATUS_RUN)
        .count()
}

#[tokio::test]
async fn a_registered_service_job_gets_its_allocations() {
    let server = start(StateStore::in_memory().await.expect("store"));
    server
        .register_node(NodeBuilder::new("node-1").build())
        .await
        .expect("node registers");
    let job = JobBuilder::service("web")
        .group("app", 3)
        .task("server", "raw_exec")
        .resources(100, 64)
        .build();
    let response = server
        .register_job(register(job))
        .await
        .expect("registered");
    assert!(response.index >= 1);
    let eval = terminal_eval(&server, &response.eval_id).await;
    assert_eq!(eval.status, EVAL_STATUS_COMPLETE);
    assert!(eval.failed_tg_allocs.is_empty());
    assert_eq!(running_allocs(&server, "web"), 3);

    let allocs = server.state().allocs_by_job("default", "web");
    let mut names: Vec<String> = allocs.iter().map(|alloc| alloc.name.clone()).collect();
    names.sort();
    assert_eq!(names, ["web.app[0]", "web.app[1]", "web.app[2]"]);
    assert!(allocs.iter().all(|alloc| alloc.job.is_some()));

    let (by_node, index) = server
        .node_allocs("node-1", 0, Duration::from_secs(1))
        .await
        .expect("node allocs");
    assert_eq!(by_node.len(), 3);
    assert!(index >= 1);
    server.shutdown().await;
}

#[tokio::test]
async fn scaling_up_and_down_adjusts_allocations() {
    let server = start(StateStore::in_memory().await.expect("store"));
    server
        .register_node(NodeBuilder::new("node-1").build())
        .await
        .expect("node");
    for count in [3, 5, 2] {
        let job = JobBuilder::service("web")
            .group("app", count)
            .task("server", "raw_exec")
            .resources(100, 64)
            .build();
        let response = server
            .register_job(register(job))
            .await
            .expect("registered");
        terminal_eval(&server, &response.eval_id).await;
        assert_eq!(
            running_allocs(&server, "web"),
            count as usize,
            "count {count}"
        );
    }
    server.shutdown().await;
}

#[tokio::test]
async fn a_job_that_does_not_fit_blocks_until_capacity_appears() {
    let server = start(StateStore::in_memory().await.expect("store"));
    server
        .register_node(NodeBuilder::new("small").resources(1000, 256).build())
        .await
        .expect("node");
    let job = JobBuilder::service("big")
        .group("app", 1)
        .task("server", "raw_exec")
        .resources(500, 1024)
        .build();
    let response = server
        .register_job(register(job))
        .await
        .expect("registered");
    let eval = terminal_eval(&server, &response.eval_id).await;
    assert_eq!(eval.status, EVAL_STATUS_COMPLETE);
    let metric = eval
        .failed_tg_allocs
        .get("app")
        .expect("failed placement for app");
    assert_eq!(metric.nodes_evaluated, 1);
    assert!(
        !eval.blocked_eval.is_empty(),
        "a blocked evaluation is created"
    );
    let blocked = server
        .state()
        .eval(&eval.blocked_eval)
        .expect("blocked eval stored");
    assert_eq!(blocked.status, EVAL_STATUS_BLOCKED);
    assert_eq!(running_allocs(&server, "big"), 0);

    // A big enough node joins: the blocked evaluation is retried and places the alloc.
    server
        .register_node(NodeBuilder::new("large").build())
        .await
        .expect("node");
    eventually("the blocked job to be placed", || {
        (running_allocs(&server, "big") == 1).then_some(())
    })
    .await;
    let alloc = server.state().allocs_by_job("default", "big")[0].clone();
    assert_eq!(alloc.node_id, "large");
    server.shutdown().await;
}

#[tokio::test]
async fn deregister_stops_and_purge_removes() {
    let server = start(StateStore::in_memory().await.expect("store"));
    server
        .register_node(NodeBuilder::new("node-1").build())
        .await
        .expect("node");
    let job = JobBuilder::service("web")
        .group("app", 2)
        .task("server", "raw_exec")
        .resources(100, 64)
        .build();
    let registered = server
        .register_job(register(job))
        .await
        .expect("registered");
    terminal_eval(&server, &registered.eval_id).await;

    let stopped = server
        .deregister_job("default", "web", false)
        .await
        .expect("stopped");
    terminal_eval(&server, &stopped.eval_id).await;
    let job = server.state().job("default", "web").expect("job kept");
    assert!(job.stop);
    assert!(
        server
            .state()
            .allocs_by_job("default", "web")
            .iter()
            .all(|alloc| alloc.desired_status == ALLOC_DESIRED_STATUS_STOP)
    );

    server
        .deregister_job("default", "web", true)
        .await
        .expect("purged");
    assert!(server.state().job("default", "web").is_none());
    // A job that is not there is nothing to do: an empty answer, as Nomad's.
    let missing = server
        .deregister_job("default", "web", true)
        .await
        .expect("nothing to do");
    assert_eq!(missing.eval_id, "");
    assert_eq!(missing.index, 0);
    server.shutdown().await;
}

#[tokio::test]
async fn a_failed_allocation_is_rescheduled_by_a_new_evaluation() {
    let server = start(StateStore::in_memory().await.expect("store"));
    server
        .register_node(NodeBuilder::new("node-1").build())
        .await
        .expect("node");
    let job = JobBuilder::batch("work")
        .group("g", 1)
        .task("t", "raw_exec")
        .resources(100, 64)
        .reschedule_attempts(1)
        .build();
    let registered = server
        .register_job(register(job))
        .await
        .expect("registered");
    terminal_eval(&server, &registered.eval_id).await;
    let first = server.state().allocs_by_job("default", "work")[0].clone();

    let mut failed = drover_structs::Allocation::clone(&first);
    failed.client_status = ALLOC_CLIENT_STATUS_FAILED.to_owned();
    server
        .update_allocs_from_client(vec![failed])
        .await
        .expect("client update");
    let evals = eventually("an alloc-failure evaluation", || {
        let evals = server.state().evals_by_job("default", "work");
        evals
            .iter()
            .any(|eval| eval.triggered_by == drover_structs::EVAL_TRIGGER_ALLOC_FAILURE)
            .then_some(evals)
    })
    .await;
    assert!(evals.len() >= 2);
    server.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_node_that_misses_heartbeats_goes_down_and_its_allocs_move() {
    let server = start(StateStore::in_memory().await.expect("store"));
    server
        .register_node(NodeBuilder::new("doomed").build())
        .await
        .expect("node");
    let job = JobBuilder::service("web")
        .group("app", 1)
        .task("server", "raw_exec")
        .resources(100, 64)
        .build();
    let registered = server
        .register_job(register(job))
        .await
        .expect("registered");
    terminal_eval(&server, &registered.eval_id).await;
    let original = server.state().allocs_by_job("default", "web")[0].clone();
    assert_eq!(original.node_id, "doomed");

    let mut running = drover_structs::Allocation::clone(&original);
    running.client_status = ALLOC_CLIENT_STATUS_RUNNING.to_owned();
    server
        .update_allocs_from_client(vec![running])
        .await
        .expect("client update");

    // Another node keeps heartbeating while "doomed" stays silent past TTL + grace.
    server
        .register_node(NodeBuilder::new("healthy").build())
        .await
        .expect("node");
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_secs(8)).await;
        server.heartbeat_node("healthy").await.expect("heartbeat");
    }
    eventually("the silent node to be down", || {
        server
            .state()
            .node("doomed")
            .filter(|node| node.status == NODE_STATUS_DOWN)
    })
    .await;
    eventually("the alloc to be replaced on the healthy node", || {
        let allocs = server.state().allocs_by_job("default", "web");
        let lost = allocs.iter().any(|alloc| {
            alloc.id == original.id && alloc.client_status == ALLOC_CLIENT_STATUS_LOST
        });
        let replaced = allocs.iter().any(|alloc| {
            alloc.node_id == "healthy" && alloc.desired_status == ALLOC_DESIRED_STATUS_RUN
        });
        (lost && replaced).then_some(())
    })
    .await;
    server.shutdown().await;
}

#[tokio::test]
async fn a_restarted_server_processes_evaluations_left_pending() {
    let state = StateStore::in_memory().await.expect("store");
    let node = NodeBuilder::new("node-1").build();
    state.upsert_node(node, 1).await.expect("node stored");
    let job = JobBuilder::service("web")
        .group("app", 2)
        .task("server", "raw_exec")
        .resources(100, 64)
        .build();
    let registration = state.upsert_job(job, 1).await.expect("job stored");
    // An evaluation stored by a server that died before processing it.
    let eval = Evaluation {
        id: "0b8c7a51-5f6e-4b1e-9d56-7b7e1a6a0001".into(),
        namespace: "default".into(),
        priority: 50,
        r#type: "service".into(),
        triggered_by: "job-register".into(),
        job_id: "web".into(),
        job_modify_index: registration.job_modify_index,
        status: "pending".into(),
        ..Evaluation::default()
    };
    state
        .upsert_evals(vec![eval.clone()], 1)
        .await
        .expect("eval stored");

    let server = start(state);
    let done = terminal_eval(&server, &eval.id).await;
    assert_eq!(done.status, EVAL_STATUS_COMPLETE);
    assert_eq!(running_allocs(&server, "web"), 2);
    server.shutdown().await;
}

/// A node's alloc watch answers when one of *its* allocations changes on the server, not for
/// every status report of every node (which would wake a whole fleet for each write).
#[tokio::test]
async fn a_nodes_alloc_watch_wakes_for_its_own_allocations_only() {
    let server = start(StateStore::in_memory().await.expect("store"));
    server
        .register_node(NodeBuilder::new("busy").build())
        .await
        .expect("node registers");
    let job = JobBuilder::service("web")
        .group("app", 1)
        .task("server", "raw_exec")
        .resources(100, 64)
        .build();
    let response = server
        .register_job(register(job))
        .await
        .expect("registered");
    terminal_eval(&server, &response.eval_id).await;
    // A second node joins once the alloc is placed, so it has none.
    server
        .register_node(NodeBuilder::new("idle").build())
        .await
        .expect("node registers");
    let (busy_view, busy_index) = server
        .node_allocs("busy", 0, Duration::ZERO)
        .await
        .expect("busy allocs");
    let (idle_view, idle_index) = server
        .node_allocs("idle", 0, Duration::ZERO)
        .await
        .expect("idle allocs");
    assert_eq!(busy_view.len(), 1);
    assert!(idle_view.is_empty());

    let wait = Duration::from_secs(600);
    let idle_watch = {
        let server = server.clone();
        tokio::spawn(async move { server.node_allocs("idle", idle_index, wait).await })
    };
    let busy_watch = {
        let server = server.clone();
        tokio::spawn(async move { server.node_allocs("busy", busy_index, wait).await })
    };

    // The busy node reports its alloc running: the allocation table moves, but no node's
    // allocations changed on the server side.
    let mut report = Allocation::clone(&server.state().allocs_by_node("busy")[0]);
    report.client_status = ALLOC_CLIENT_STATUS_RUNNING.to_string();
    let report_index = server
        .update_allocs_from_client(vec![report])
        .await
        .expect("status update");
    assert!(report_index > busy_index);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !idle_watch.is_finished(),
        "the idle node was woken by another's report"
    );
    assert!(
        !busy_watch.is_finished(),
        "a client's own report woke its watch"
    );

    // The server stops the alloc: the busy node's watch answers with the new modify index;
    // the idle node's stays parked.
    server
        .deregister_job("default", "web", false)
        .await
        .expect("deregistered");
    let (changed, index) = busy_watch.await.expect("joined").expect("busy allocs");
    let alloc_id = busy_view.keys().next().expect("one alloc");
    assert!(changed[alloc_id] > busy_view[alloc_id], "{changed:?}");
    assert!(index > report_index);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!idle_watch.is_finished());
    idle_watch.abort();
    server.shutdown().await;
}

/// A server that follows runs no leader work: an evaluation in the store waits until the server
/// takes up the leadership, which rebuilds its broker from the store; losing the leadership
/// stops the workers and forgets the heartbeat timers, so a silent node is not marked down by a
/// server that no longer leads, while the next leader gives it the failover deadline.
#[tokio::test(start_paused = true)]
async fn leader_work_runs_only_while_leading_and_is_rebuilt_from_the_store() {
    let state = StateStore::in_memory().await.expect("store");
    let leader = start(state.clone());
    leader
        .register_node(NodeBuilder::new("node-1").build())
        .await
        .expect("node");
    leader.shutdown().await;

    let config = ServerConfig {
        heartbeat: drover_server::heartbeat::HeartbeatConfig {
            min_ttl: Duration::from_secs(10),
            grace: Duration::from_secs(10),
            failover_ttl: Duration::from_secs(300),
            ..drover_server::heartbeat::HeartbeatConfig::default()
        },
        ..ServerConfig::default()
    };
    let server = Server::start_follower(config, state.clone(), Arc::new(SystemClock));
    assert!(!server.is_leader());
    // The evaluation is stored (as the previous leader would have): nobody schedules it.
    let job = JobBuilder::service("web")
        .group("app", 2)
        .task("server", "raw_exec")
        .resources(100, 64)
        .build();
    state.upsert_job(job.clone(), 1).await.expect("job");
    let eval = Evaluation {
        id: "e-web".to_owned(),
        namespace: "default".to_owned(),
        priority: 50,
        r#type: "service".to_owned(),
        triggered_by: "job-register".to_owned(),
        job_id: "web".to_owned(),
        status: drover_structs::EVAL_STATUS_PENDING.to_owned(),
        ..Evaluation::default()
    };
    state.upsert_evals(vec![eval], 1).await.expect("eval");
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(running_allocs(&server, "web"), 0);
    assert_eq!(server.queue_stats().broker_ready, 0);

    // Elected: the broker is rebuilt from the store and the evaluation placed.
    server.establish_leadership(drover_server::Takeover::Failover);
    assert!(server.is_leader());
    terminal_eval(&server, "e-web").await;
    assert_eq!(running_allocs(&server, "web"), 2);

    // Leadership lost: no node is marked down by this server, however long the silence.
    server.revoke_leadership();
    assert!(!server.is_leader());
    tokio::time::sleep(Duration::from_secs(400)).await;
    assert_ne!(state.node("node-1").expect("node").status, NODE_STATUS_DOWN);

    // Elected again: the silent node gets the failover deadline (300 s), not the usual 20 s.
    server.establish_leadership(drover_server::Takeover::Failover);
    tokio::time::sleep(Duration::from_secs(200)).await;
    assert_ne!(state.node("node-1").expect("node").status, NODE_STATUS_DOWN);
    tokio::time::sleep(Duration::from_secs(110)).await;
    eventually("the silent node to be marked down", || {
        (state.node("node-1")?.status == NODE_STATUS_DOWN).then_some(())
    })
    .await;
    server.shutdown().await;
}

/// A system job with a job-level `update { max_parallel = 1, stagger = "30s" }`: a new version
/// replaces one node's allocation per evaluation, each next wave a `rolling-update` evaluation
/// enqueued once its `Wait` (the stagger) has passed. Paused time: the waits are exact.
#[tokio::test(start_paused = true)]
async fn a_system_job_rolls_one_node_per_stagger() {
    let server = start(StateStore::in_memory().await.expect("store"));
    let nodes = ["node-a", "node-b", "node-c"];
    for node in nodes {
        server
            .register_node(NodeBuilder::new(node).build())
            .await
            .expect("node");
    }
    let mut job = JobBuilder::service("logs")
        .group("agent", 1)
        .task("collector", "raw_exec")
        .resources(100, 64)
        .build();
    job.r#type = drover_structs::JOB_TYPE_SYSTEM.to_owned();
    job.update = Some(drover_structs::UpdateStrategy {
        max_parallel: 1,
        stagger: drover_structs::DurationNs::from_secs(30),
        ..drover_structs::UpdateStrategy::default()
    });
    let registered = server
        .register_job(register(job.clone()))
        .await
        .expect("registered");
    let first = terminal_eval(&server, &registered.eval_id).await;
    assert!(first.next_eval.is_empty(), "placing is not rolling");
    assert_eq!(running_allocs(&server, "logs"), 3);

    job.task_groups[0].tasks[0]
        .env
        .insert("LEVEL".into(), "debug".into());
    let updated = server.register_job(register(job)).await.expect("updated");
    let started = tokio::time::Instant::now();
    let version_of = |alloc: &Allocation| alloc.job.as_ref().map_or(0, |job| job.version);
    let new_version_nodes = || {
        server
            .state()
            .allocs_by_job("default", "logs")
            .iter()
            .filter(|alloc| alloc.desired_status == ALLOC_DESIRED_STATUS_RUN)
            .filter(|alloc| version_of(alloc) == 1)
            .count()
    };
    let mut chain = vec![terminal_eval(&server, &updated.eval_id).await];
    assert_eq!(new_version_nodes(), 1, "one node per wave");
    assert_eq!(running_allocs(&server, "logs"), 3);
    // Each wave waits out its stagger; the nodes keep heartbeating meanwhile.
    let mut waves = vec![(started.elapsed(), new_version_nodes())];
    while let Some(next_id) = chain.last().map(|eval| eval.next_eval.clone())
        && !next_id.is_empty()
    {
        let next = server.state().eval(&next_id).expect("next eval stored");
        assert_eq!(
            (
                next.triggered_by.as_str(),
                next.wait,
                next.previous_eval.as_str()
            ),
            (
                drover_structs::EVAL_TRIGGER_ROLLING_UPDATE,
                drover_structs::DurationNs::from_secs(30),
                chain.last().map_or("", |eval| eval.id.as_str())
            )
        );
        let finished = loop {
            if let Some(done) = server
                .state()
                .eval(&next_id)
                .filter(|eval| eval.status != drover_structs::EVAL_STATUS_PENDING)
            {
                break done;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
            for node in nodes {
                server.heartbeat_node(node).await.expect("heartbeat");
            }
        };
        waves.push((started.elapsed(), new_version_nodes()));
        chain.push(finished);
    }
    let counts: Vec<usize> = waves.iter().map(|(_, count)| *count).collect();
    assert_eq!(counts, [1, 2, 3], "one more node per wave");
    for pair in waves.windows(2) {
        let gap = pair[1].0 - pair[0].0;
        assert!(
            gap >= Duration::from_secs(30) && gap < Duration::from_secs(32),
            "a wave {gap:?} after the last; the stagger is 30s"
        );
    }
    assert_eq!(running_allocs(&server, "logs"), 3);
    server.shutdown().await;
}

#[test]
fn sizes_are_written_as_go_humanize_writes_them() {
    use drover_server::humanize_bytes;
    assert_eq!(humanize_bytes(0), "0 B");
    assert_eq!(humanize_bytes(9), "9 B");
    assert_eq!(humanize_bytes(10), "10 B");
    assert_eq!(humanize_bytes(999), "999 B");
    assert_eq!(humanize_bytes(1_000), "1.0 kB");
    assert_eq!(humanize_bytes(2_883), "2.9 kB");
    assert_eq!(humanize_bytes(12_345), "12 kB");
    assert_eq!(humanize_bytes(1_000_000), "1.0 MB");
    assert_eq!(humanize_bytes(1_048_576), "1.0 MB");
    assert_eq!(humanize_bytes(82_854_982), "83 MB");
}

#[tokio::test]
async fn a_submission_over_the_limit_is_dropped_with_nomads_warning() {
    let state = StateStore::in_memory().await.unwrap();
    let server = Server::start(
        ServerConfig {
            job_max_source_size: 100,
            ..ServerConfig::default()
        },
        state.clone(),
        Arc::new(SystemClock),
    );
    let submission = |source: String| drover_structs::JobSubmission {
        source,
        format: "hcl2".to_owned(),
        variable_flags: Some([("k".to_owned(), "vv".to_owned())].into()),
        ..drover_structs::JobSubmission::default()
    };
    let job = |count: i64| {
        let mut job = JobBuilder::service("web")
            .group("g", count)
            .task("t", "raw_exec")
            .build();
        // A version above the stored one: nothing to carry over from an earlier version.
        job.version = 7;
        job
    };
    let small = server
        .register_job(JobRegisterRequest {
            submission: Some(submission("s".repeat(97))),
            ..register(job(1))
        })
        .await
        .unwrap();
    assert_eq!(small.warnings, "");
    assert_eq!(
        state
            .job_submission("default", "web", 0)
            .unwrap()
            .source
            .len(),
        97
    );
    let large = server
        .register_job(JobRegisterRequest {
            submission: Some(submission("s".repeat(98))),
            ..register(job(2))
        })
        .await
        .unwrap();
    assert_eq!(
        large.warnings,
        "1 warning:\n\n* job source size of 101 B exceeds maximum of 100 B and will be discarded"
    );
    assert!(state.job_submission("default", "web", 1).is_none());
    server.shutdown().await;
}

#[tokio::test]
async fn preserve_counts_and_resources_keep_the_stored_values() {
    let state = StateStore::in_memory().await.unwrap();
    let server = start(state.clone());
    let job = |count: i64, memory: i64| {
        JobBuilder::service("web")
            .group("g", count)
            .task("t", "raw_exec")
            .resources(100, memory)
            .build()
    };
    server.register_job(register(job(3, 256))).await.unwrap();
    // Without the flags, the request's values win.
    let plain = server.register_job(register(job(1, 128))).await.unwrap();
    assert!(plain.job_modify_index > 0);
    let stored = state.job("default", "web").unwrap();
    assert_eq!(stored.task_groups[0].count, 1);
    // With them, the stored ones stay while the rest changes.
    let mut changed = job(5, 512);
    changed.meta.insert("release".into(), "2".into());
    server
        .register_job(JobRegisterRequest {
            preserve_counts: true,
            preserve_resources: true,
            ..register(changed)
        })
        .await
        .unwrap();
    let stored = state.job("default", "web").unwrap();
    assert_eq!(stored.meta["release"], "2");
    assert_eq!(stored.task_groups[0].count, 1);
    assert_eq!(
        stored.task_groups[0].tasks[0]
            .resources
            .as_ref()
            .unwrap()
            .memory_mb,
        128
    );
    server.shutdown().await;
}

#[tokio::test]
async fn eval_priority_sets_the_registers_evaluation_priority() {
    let state = StateStore::in_memory().await.unwrap();
    let server = start(state.clone());
    let job = JobBuilder::service("web")
        .group("g", 1)
        .task("t", "raw_exec")
        .build();
    let registered = server
        .register_job(JobRegisterRequest {
            eval_priority: 90,
            ..register(job.clone())
        })
        .await
        .unwrap();
    assert_eq!(state.eval(&registered.eval_id).unwrap().priority, 90);
    let mut changed = job;
    changed.meta.insert("v".into(), "2".into());
    let again = server.register_job(register(changed)).await.unwrap();
    assert_eq!(state.eval(&again.eval_id).unwrap().priority, 50);
    server.shutdown().await;
}

#[tokio::test]
async fn stopping_a_parameterized_job_makes_no_evaluation() {
    let state = StateStore::in_memory().await.unwrap();
    let server = start(state.clone());
    let mut job = JobBuilder::batch("template")
        .group("g", 1)
        .task("t", "raw_exec")
        .build();
    job.parameterized_job = Some(drover_structs::ParameterizedJobConfig::default());
    server.register_job(register(job)).await.unwrap();
    let evaluations_before = state.evals_by_job("default", "template").len();
    let stopped = server
        .deregister_job("default", "template", false)
        .await
        .unwrap();
    assert_eq!(stopped.eval_id, "");
    assert!(stopped.job_modify_index > 0);
    assert_eq!(stopped.index, stopped.job_modify_index);
    assert!(state.job("default", "template").unwrap().stop);
    assert_eq!(
        state.evals_by_job("default", "template").len(),
        evaluations_before
    );
    server.shutdown().await;
}
