//! The node (`crate::node`) against the simulator's in-memory server and fake runners: the
//! simulator is built on the node, so the node's own tests that need it live here.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use drover_structs::{
    ALLOC_CLIENT_STATUS_COMPLETE, Allocation, NODE_STATUS_READY, NodeReservedResources,
    NodeResources, TASK_STATE_DEAD,
};

use crate::clock::SharedClock;
use crate::clock::TokioFollowingClock;
use crate::node::*;
use crate::node_sim::{
    InMemoryServer, SimAllocRunner, SimAllocRunnerFactory, SimRunnerTiming, simulated_node,
};
use drover_structs::{
    ALLOC_CLIENT_STATUS_PENDING, ALLOC_CLIENT_STATUS_RUNNING, ALLOC_DESIRED_STATUS_RUN,
    ALLOC_DESIRED_STATUS_STOP, Job, TASK_STATE_RUNNING, Task, TaskGroup,
};

type SimClient = Client<InMemoryServer, SimAllocRunnerFactory>;

#[test]
fn contact_is_lost_once_the_last_answered_heartbeat_is_older_than_the_ttl() {
    let beat = tokio::time::Instant::now();
    let ttl = Duration::from_secs(10);
    assert_eq!(
        HeartbeatStatus::default().contact_at(beat),
        ServerContact::NotRegistered
    );
    let status = HeartbeatStatus {
        registered: true,
        ttl,
        last_heartbeat: Some(beat),
    };
    assert_eq!(status.contact_at(beat + ttl), ServerContact::Ok);
    assert_eq!(
        status.contact_at(beat + ttl + Duration::from_secs(1)),
        ServerContact::HeartbeatOverdue {
            since: ttl + Duration::from_secs(1)
        }
    );
}

#[test]
fn resource_settings_override_the_fingerprint_and_give_the_reserved_resources() {
    let mut resources = NodeResources::default();
    resources.cpu.cpu_shares = 4000;
    resources.cpu.reservable_cpu_cores = vec![0, 1, 2, 3];
    resources.memory.memory_mb = 8192;
    let mut attributes = BTreeMap::new();
    assert_eq!(
        NodeResourceSettings::default().apply(&mut resources.clone(), &mut attributes),
        Some(NodeReservedResources::default()),
        "nothing reserved: zero reserved resources, as Nomad's client registers them"
    );

    let mut settings = NodeResourceSettings {
        cpu_total_compute: Some(2000),
        memory_total_mb: Some(1024),
        reservable_cores: Some(vec![2, 3]),
        ..NodeResourceSettings::default()
    };
    settings.reserved.cpu.reserved_cpu_cores = vec![3];
    settings.reserved.memory.memory_mb = 128;
    let reserved = settings.apply(&mut resources, &mut attributes);
    assert_eq!(resources.cpu.cpu_shares, 2000);
    assert_eq!(resources.memory.memory_mb, 1024);
    assert_eq!(resources.cpu.reservable_cpu_cores, vec![2, 3]);
    assert_eq!(attributes["cpu.totalcompute"], "2000");
    assert_eq!(attributes["memory.totalbytes"], (1024u64 << 20).to_string());
    assert_eq!(attributes["cpu.reservablecores"], "2");
    assert_eq!(reserved, Some(settings.reserved.clone()));
}

const LIMIT: Duration = Duration::from_secs(60);

/// Polls `condition` on (paused) time until it holds; fails the test after `LIMIT`.
async fn eventually(what: &str, condition: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + LIMIT;
    while !condition() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn clock() -> SharedClock {
    Arc::new(TokioFollowingClock::starting_at(1_700_000_000_000_000_000))
}

fn config(data_dir: &Path) -> NodeConfig {
    let mut config = NodeConfig::new(data_dir, "sim-node-1", clock());
    config.ephemeral = true;
    config.alloc_query_wait = Duration::from_secs(30);
    config
}

fn alloc_for(node_id: &str, tasks: &[&str]) -> Allocation {
    let job = Job {
        id: "web".to_string(),
        name: "web".to_string(),
        r#type: "service".to_string(),
        task_groups: vec![TaskGroup {
            name: "web".to_string(),
            tasks: tasks
                .iter()
                .map(|name| Task {
                    name: name.to_string(),
                    ..Task::default()
                })
                .collect(),
            ..TaskGroup::default()
        }],
        ..Job::default()
    };
    Allocation {
        id: uuid::Uuid::new_v4().to_string(),
        node_id: node_id.to_string(),
        name: "web.web[0]".to_string(),
        job_id: "web".to_string(),
        task_group: "web".to_string(),
        job: Some(std::sync::Arc::new(job)),
        desired_status: ALLOC_DESIRED_STATUS_RUN.to_string(),
        ..Allocation::default()
    }
}

struct Harness {
    server: Arc<InMemoryServer>,
    client: Arc<SimClient>,
    node_id: String,
    _data_dir: tempfile::TempDir,
}

async fn start(timing: SimRunnerTiming) -> Harness {
    start_with(timing, |_| {}).await
}

async fn start_with(timing: SimRunnerTiming, adjust: impl FnOnce(&mut NodeConfig)) -> Harness {
    let data_dir = tempfile::tempdir().unwrap_or_else(|error| panic!("tempdir: {error}"));
    let server = Arc::new(InMemoryServer::new(Duration::from_secs(10)));
    let node_id = uuid::Uuid::new_v4().to_string();
    let node = simulated_node(&node_id, "sim-node-1", "dc1");
    let mut node_config = config(data_dir.path());
    adjust(&mut node_config);
    let client = Client::start_with_node(
        node_config,
        node,
        Arc::clone(&server),
        SimAllocRunnerFactory::new(timing, clock()),
    )
    .await
    .unwrap_or_else(|error| panic!("client start: {error}"));
    client.wait_registered().await;
    Harness {
        server,
        client,
        node_id,
        _data_dir: data_dir,
    }
}

fn server_status(server: &InMemoryServer, alloc_id: &str) -> String {
    server
        .alloc(alloc_id)
        .map(|alloc| alloc.client_status)
        .unwrap_or_default()
}

#[tokio::test(start_paused = true)]
async fn a_new_alloc_gets_a_runner_and_its_status_reaches_the_server() {
    let harness = start(SimRunnerTiming::default()).await;
    assert!(
        harness.server.node(&harness.node_id).is_some(),
        "node registered"
    );

    let alloc = alloc_for(&harness.node_id, &["server", "sidecar"]);
    let alloc_id = alloc.id.clone();
    harness.server.place_alloc(alloc);

    eventually("the alloc runs on the server's books", || {
        server_status(&harness.server, &alloc_id) == ALLOC_CLIENT_STATUS_RUNNING
    })
    .await;
    let on_server = harness.server.alloc(&alloc_id).unwrap_or_default();
    assert_eq!(on_server.client_description, "Tasks are running");
    assert_eq!(on_server.task_states.len(), 2);
    assert!(
        on_server
            .task_states
            .values()
            .all(|task| task.state == TASK_STATE_RUNNING)
    );
    assert_eq!(harness.client.alloc_ids(), vec![alloc_id.clone()]);
    let local = harness.client.alloc(&alloc_id).unwrap_or_default();
    assert_eq!(local.client_status, ALLOC_CLIENT_STATUS_RUNNING);
    assert_eq!(local.alloc_modify_index, on_server.alloc_modify_index);

    // The client's own update bumped ModifyIndex, not AllocModifyIndex: no refetch loop,
    // no second runner.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(harness.client.alloc_ids().len(), 1);
    harness.client.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_server_stop_is_delivered_and_the_terminal_alloc_is_kept_until_gc() {
    let harness = start(SimRunnerTiming::default()).await;
    let alloc = alloc_for(&harness.node_id, &["server"]);
    let alloc_id = alloc.id.clone();
    harness.server.place_alloc(alloc);
    eventually("running", || {
        server_status(&harness.server, &alloc_id) == ALLOC_CLIENT_STATUS_RUNNING
    })
    .await;

    assert!(harness.server.stop_alloc(&alloc_id));
    eventually("complete after the stop", || {
        server_status(&harness.server, &alloc_id) == ALLOC_CLIENT_STATUS_COMPLETE
    })
    .await;
    let local = harness.client.alloc(&alloc_id).unwrap_or_default();
    assert_eq!(local.desired_status, ALLOC_DESIRED_STATUS_STOP);
    let events: Vec<String> = local.task_states["server"]
        .events
        .iter()
        .map(|event| event.r#type.clone())
        .collect();
    assert_eq!(events, ["Received", "Started", "Killing", "Killed"]);
    // Terminal, but kept (logs stay readable) until collected.
    assert_eq!(harness.client.alloc_ids(), vec![alloc_id.clone()]);

    harness
        .client
        .gc(&alloc_id)
        .await
        .unwrap_or_else(|error| panic!("gc: {error}"));
    assert!(matches!(
        harness.client.alloc(&alloc_id),
        Err(ClientError::UnknownAlloc { .. })
    ));
    // Later writes wake the watcher; the collected alloc is not fetched and run again.
    harness
        .server
        .place_alloc(alloc_for("some-other-node", &["x"]));
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(harness.client.alloc_ids().is_empty());
    harness.client.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn an_alloc_removed_by_the_server_is_destroyed_and_forgotten() {
    let harness = start(SimRunnerTiming::default()).await;
    let alloc = alloc_for(&harness.node_id, &["server"]);
    let alloc_id = alloc.id.clone();
    harness.server.place_alloc(alloc);
    eventually("running", || {
        server_status(&harness.server, &alloc_id) == ALLOC_CLIENT_STATUS_RUNNING
    })
    .await;
    let runner: Arc<SimAllocRunner> = harness
        .client
        .runner(&alloc_id)
        .unwrap_or_else(|error| panic!("runner: {error}"));

    assert!(harness.server.remove_alloc(&alloc_id));
    eventually("the runner is gone", || {
        harness.client.runner(&alloc_id).is_err()
    })
    .await;
    assert!(runner.is_destroyed());
    assert!(
        runner
            .task_states()
            .values()
            .all(|task| task.state == TASK_STATE_DEAD)
    );
    // Its last update still goes out, then the buffer forgets it.
    eventually("the last update to be sent and forgotten", || {
        harness
            .client
            .status_buffer()
            .pending_update(&alloc_id)
            .is_none()
    })
    .await;
    harness.client.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_running_alloc_a_re_registered_server_never_listed_keeps_running() {
    let harness = start(SimRunnerTiming::default()).await;
    let alloc = alloc_for(&harness.node_id, &["server"]);
    let alloc_id = alloc.id.clone();
    harness.server.place_alloc(alloc);
    eventually("running", || {
        server_status(&harness.server, &alloc_id) == ALLOC_CLIENT_STATUS_RUNNING
    })
    .await;
    let runner: Arc<SimAllocRunner> = harness
        .client
        .runner(&alloc_id)
        .unwrap_or_else(|error| panic!("runner: {error}"));
    let registrations = harness.server.register_calls();

    // The server loses the node and the allocation together, as one that lost its state.
    assert!(harness.server.remove_alloc(&alloc_id));
    assert!(harness.server.forget_node(&harness.node_id));
    eventually("registered again", || {
        harness.server.register_calls() > registrations
    })
    .await;
    // A listing after the re-registration: another allocation placed here starts.
    let other = alloc_for(&harness.node_id, &["server"]);
    let other_id = other.id.clone();
    harness.server.place_alloc(other);
    eventually("the new alloc running", || {
        server_status(&harness.server, &other_id) == ALLOC_CLIENT_STATUS_RUNNING
    })
    .await;
    assert!(
        harness.client.runner(&alloc_id).is_ok(),
        "the runner the server never listed is kept"
    );
    assert!(!runner.is_destroyed());
    assert!(
        runner
            .task_states()
            .values()
            .all(|task| task.state == TASK_STATE_RUNNING)
    );

    // Once this registration has listed it, a removal is a removal.
    harness.server.remove_alloc(&other_id);
    eventually("the listed-then-removed runner is gone", || {
        harness.client.runner(&other_id).is_err()
    })
    .await;
    assert!(harness.client.runner(&alloc_id).is_ok());
    harness.client.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn an_alloc_stopped_before_it_ran_is_reported_complete_without_a_runner() {
    let harness = start(SimRunnerTiming::default()).await;
    let mut alloc = alloc_for(&harness.node_id, &["server"]);
    alloc.desired_status = ALLOC_DESIRED_STATUS_STOP.to_string();
    alloc.client_status = ALLOC_CLIENT_STATUS_PENDING.to_string();
    let alloc_id = alloc.id.clone();
    harness.server.place_alloc(alloc);
    eventually("complete", || {
        server_status(&harness.server, &alloc_id) == ALLOC_CLIENT_STATUS_COMPLETE
    })
    .await;
    assert!(harness.client.alloc_ids().is_empty());
    let on_server = harness.server.alloc(&alloc_id).unwrap_or_default();
    assert_eq!(on_server.task_states["server"].state, TASK_STATE_DEAD);
    harness.client.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn api_operations_answer_typed_errors() {
    let harness = start(SimRunnerTiming::default()).await;
    let unknown = harness.client.alloc("nope");
    let Err(error) = unknown else {
        panic!("an unknown alloc was found")
    };
    assert_eq!(error.kind(), ClientErrorKind::NotFound);
    assert_eq!(error.to_string(), "Unknown allocation \"nope\"");

    let alloc = alloc_for(&harness.node_id, &["server"]);
    let alloc_id = alloc.id.clone();
    harness.server.place_alloc(alloc);
    eventually("running", || {
        server_status(&harness.server, &alloc_id) == ALLOC_CLIENT_STATUS_RUNNING
    })
    .await;

    let bad_task = harness
        .client
        .restart(&alloc_id, Some("nosuch"), false)
        .await;
    assert!(matches!(bad_task, Err(ref error) if error.kind() == ClientErrorKind::BadRequest));
    let bad_signal = harness
        .client
        .signal(&alloc_id, Some("nosuch"), "SIGUSR1")
        .await;
    assert!(matches!(bad_signal, Err(ref error) if error.kind() == ClientErrorKind::BadRequest));
    let live_gc = harness.client.gc(&alloc_id).await;
    assert!(matches!(live_gc, Err(ClientError::NotTerminal { .. })));

    harness
        .client
        .restart(&alloc_id, Some("server"), false)
        .await
        .unwrap_or_else(|error| panic!("restart: {error}"));
    harness
        .client
        .signal(&alloc_id, None, "SIGUSR1")
        .await
        .unwrap_or_else(|error| panic!("signal: {error}"));
    let task = harness
        .client
        .alloc(&alloc_id)
        .unwrap_or_default()
        .task_states["server"]
        .clone();
    assert_eq!(task.restarts, 1);
    let last = task.events.last().map(|event| event.r#type.clone());
    assert_eq!(last.as_deref(), Some("Signaling"));

    harness
        .client
        .stop(&alloc_id)
        .await
        .unwrap_or_else(|error| panic!("stop: {error}"));
    eventually("complete after a local stop", || {
        server_status(&harness.server, &alloc_id) == ALLOC_CLIENT_STATUS_COMPLETE
    })
    .await;
    harness.client.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn heartbeats_keep_going_and_a_forgotten_node_registers_again() {
    let harness = start(SimRunnerTiming::default()).await;
    eventually("two heartbeats", || {
        harness.server.heartbeat_count(&harness.node_id) >= 2
    })
    .await;
    assert!(harness.client.heartbeat_status().registered);
    assert_eq!(
        harness.client.heartbeat_status().ttl,
        Duration::from_secs(10)
    );

    assert!(harness.server.forget_node(&harness.node_id));
    eventually("registered again", || {
        harness.server.node(&harness.node_id).is_some()
    })
    .await;
    harness.client.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_changed_node_record_registers_again_at_once_and_an_unchanged_one_does_not() {
    let harness = start(SimRunnerTiming::default()).await;
    harness.client.wait_registered().await;
    let registrations = harness.server.register_calls();
    assert!(!harness.client.update_node(|_| false));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(harness.server.register_calls(), registrations);

    assert!(harness.client.update_node(|node| {
        node.attributes
            .insert("driver.docker".to_string(), "1".to_string());
        true
    }));
    // Well before the next heartbeat (half the 10 s TTL).
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(harness.server.register_calls(), registrations + 1);
    let registered = harness
        .server
        .node(&harness.node_id)
        .unwrap_or_else(|| panic!("node registered"));
    assert_eq!(registered.attributes["driver.docker"], "1");
    assert_eq!(harness.client.node().attributes["driver.docker"], "1");
    harness.client.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn registration_is_retried_with_backoff_until_the_server_answers() {
    let data_dir = tempfile::tempdir().unwrap_or_else(|error| panic!("tempdir: {error}"));
    let server = Arc::new(InMemoryServer::new(Duration::from_secs(10)));
    server.fail_next_registrations(3);
    let node_id = uuid::Uuid::new_v4().to_string();
    let started = tokio::time::Instant::now();
    let client = Client::start_with_node(
        config(data_dir.path()),
        simulated_node(&node_id, "sim-node-1", "dc1"),
        Arc::clone(&server),
        SimAllocRunnerFactory::new(SimRunnerTiming::default(), clock()),
    )
    .await
    .unwrap_or_else(|error| panic!("client start: {error}"));
    client.wait_registered().await;
    assert_eq!(server.register_calls(), 4);
    assert!(server.node(&node_id).is_some());
    // Backoff 1 s, 2 s, 4 s (plus jitter) before the fourth attempt; never a busy loop.
    let waited = tokio::time::Instant::now() - started;
    assert!(waited >= Duration::from_secs(7), "retried after {waited:?}");
    assert!(
        waited <= Duration::from_secs(11),
        "retried after {waited:?}"
    );
    client.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn status_survives_a_server_outage() {
    let harness = start(SimRunnerTiming::default()).await;
    harness.server.fail_next_updates(3);
    let alloc = alloc_for(&harness.node_id, &["server"]);
    let alloc_id = alloc.id.clone();
    harness.server.place_alloc(alloc);
    eventually("running despite failed sends", || {
        server_status(&harness.server, &alloc_id) == ALLOC_CLIENT_STATUS_RUNNING
    })
    .await;
    assert!(harness.server.update_calls() >= 4);
    harness.client.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn batch_allocs_complete_on_their_own() {
    let harness = start(SimRunnerTiming {
        start_delay: Duration::from_millis(10),
        run_for: Some(Duration::from_secs(3)),
    })
    .await;
    let alloc = alloc_for(&harness.node_id, &["job"]);
    let alloc_id = alloc.id.clone();
    harness.server.place_alloc(alloc);
    eventually("complete", || {
        server_status(&harness.server, &alloc_id) == ALLOC_CLIENT_STATUS_COMPLETE
    })
    .await;
    assert_eq!(harness.client.gc_all().await, 1);
    assert!(harness.client.alloc_ids().is_empty());
    harness.client.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn past_gc_max_allocs_the_oldest_terminal_allocs_are_collected() {
    let harness = start_with(
        SimRunnerTiming {
            start_delay: Duration::from_millis(10),
            run_for: Some(Duration::from_secs(1)),
        },
        |config| config.gc_max_allocs = 2,
    )
    .await;
    let mut ids = Vec::new();
    for _ in 0..4 {
        let alloc = alloc_for(&harness.node_id, &["job"]);
        ids.push(alloc.id.clone());
        harness.server.place_alloc(alloc);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eventually("all complete", || {
        ids.iter()
            .all(|id| server_status(&harness.server, id) == ALLOC_CLIENT_STATUS_COMPLETE)
    })
    .await;
    eventually("two collected", || harness.client.alloc_ids().len() == 2).await;
    let mut newest = ids[2..].to_vec();
    newest.sort();
    assert_eq!(harness.client.alloc_ids(), newest, "the oldest go first");
    harness.client.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn past_the_disk_usage_threshold_terminal_allocs_are_collected_every_gc_interval() {
    // Any filesystem in use is past a 0% threshold; none is past 100%.
    let harness = start_with(SimRunnerTiming::default(), |config| {
        config.gc_interval = Duration::from_secs(30);
        config.gc_disk_usage_threshold = 0.0;
        config.gc_inode_usage_threshold = 100.0;
    })
    .await;
    let stopped = alloc_for(&harness.node_id, &["server"]);
    let stopped_id = stopped.id.clone();
    let running = alloc_for(&harness.node_id, &["server"]);
    let running_id = running.id.clone();
    harness.server.place_alloc(stopped);
    harness.server.place_alloc(running);
    eventually("both running", || {
        [&stopped_id, &running_id]
            .iter()
            .all(|id| server_status(&harness.server, id) == ALLOC_CLIENT_STATUS_RUNNING)
    })
    .await;
    assert!(harness.server.stop_alloc(&stopped_id));
    eventually("complete after the stop", || {
        server_status(&harness.server, &stopped_id) == ALLOC_CLIENT_STATUS_COMPLETE
    })
    .await;
    eventually("the terminal one collected at the interval", || {
        harness.client.alloc_ids() == vec![running_id.clone()]
    })
    .await;
    // Nothing terminal is left: the live allocation stays however full the disk is.
    assert_eq!(harness.client.keep_usage_below_threshold().await, 0);
    assert_eq!(harness.client.alloc_ids(), vec![running_id.clone()]);
    harness.client.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn below_the_thresholds_nothing_is_collected() {
    let harness = start_with(
        SimRunnerTiming {
            start_delay: Duration::from_millis(10),
            run_for: Some(Duration::from_secs(1)),
        },
        |config| {
            config.gc_disk_usage_threshold = 100.0;
            config.gc_inode_usage_threshold = 100.0;
        },
    )
    .await;
    let done = alloc_for(&harness.node_id, &["job"]);
    let done_id = done.id.clone();
    harness.server.place_alloc(done);
    eventually("complete", || {
        server_status(&harness.server, &done_id) == ALLOC_CLIENT_STATUS_COMPLETE
    })
    .await;
    assert_eq!(harness.client.keep_usage_below_threshold().await, 0);
    assert_eq!(harness.client.alloc_ids(), vec![done_id]);
    harness.client.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn shutdown_leaves_allocs_running_and_stop_all_kills_them() {
    let harness = start(SimRunnerTiming::default()).await;
    let first = alloc_for(&harness.node_id, &["server"]);
    let second = alloc_for(&harness.node_id, &["server"]);
    let ids = [first.id.clone(), second.id.clone()];
    harness.server.place_alloc(first);
    harness.server.place_alloc(second);
    eventually("both running", || {
        ids.iter()
            .all(|id| server_status(&harness.server, id) == ALLOC_CLIENT_STATUS_RUNNING)
    })
    .await;

    harness.client.shutdown_and_stop_all().await;
    for id in &ids {
        assert_eq!(
            server_status(&harness.server, id),
            ALLOC_CLIENT_STATUS_COMPLETE
        );
    }
    assert!(harness.client.alloc_ids().is_empty());

    let kept = start(SimRunnerTiming::default()).await;
    let alloc = alloc_for(&kept.node_id, &["server"]);
    let alloc_id = alloc.id.clone();
    kept.server.place_alloc(alloc);
    eventually("running", || {
        server_status(&kept.server, &alloc_id) == ALLOC_CLIENT_STATUS_RUNNING
    })
    .await;
    let runner = kept
        .client
        .runner(&alloc_id)
        .unwrap_or_else(|error| panic!("{error}"));
    kept.client.shutdown().await;
    assert!(!runner.is_destroyed());
    assert_eq!(
        server_status(&kept.server, &alloc_id),
        ALLOC_CLIENT_STATUS_RUNNING
    );
    assert!(
        runner
            .task_states()
            .values()
            .all(|task| task.state == TASK_STATE_RUNNING),
        "a plain shutdown leaves the tasks running"
    );
}

#[tokio::test(start_paused = true)]
async fn a_real_node_fingerprints_and_keeps_its_id_across_starts() {
    let data_dir = tempfile::tempdir().unwrap_or_else(|error| panic!("tempdir: {error}"));
    let server = Arc::new(InMemoryServer::new(Duration::from_secs(10)));
    let mut node_config = NodeConfig::new(data_dir.path(), "real-node", clock());
    node_config.http_addr = "127.0.0.1:4646".to_string();
    node_config.agent_version = "1.7.0".to_string();

    let first = SimClient::start(
        node_config.clone(),
        Arc::clone(&server),
        SimAllocRunnerFactory::new(SimRunnerTiming::default(), clock()),
    )
    .await
    .unwrap_or_else(|error| panic!("start: {error}"));
    first.wait_registered().await;
    let node_id = first.node_id();
    let registered = server.node(&node_id).unwrap_or_default();
    assert_eq!(registered.http_addr, "127.0.0.1:4646");
    assert_eq!(registered.status, NODE_STATUS_READY);
    let resources = registered.node_resources.clone().unwrap_or_default();
    assert!(resources.memory.memory_mb > 0 && resources.cpu.cpu_shares > 0);
    assert_eq!(
        registered
            .attributes
            .get("nomad.version")
            .map(String::as_str),
        Some("1.7.0")
    );
    let on_disk =
        std::fs::read_to_string(data_dir.path().join("client/node-id")).unwrap_or_default();
    assert_eq!(on_disk, node_id);
    first.shutdown().await;

    let second = SimClient::start(
        node_config,
        Arc::clone(&server),
        SimAllocRunnerFactory::new(SimRunnerTiming::default(), clock()),
    )
    .await
    .unwrap_or_else(|error| panic!("start: {error}"));
    assert_eq!(second.node_id(), node_id, "the node ID survives a restart");
    second.shutdown().await;
}

#[test]
fn a_corrupt_node_id_file_is_replaced() {
    let dir = tempfile::tempdir().unwrap_or_else(|error| panic!("tempdir: {error}"));
    std::fs::write(dir.path().join("node-id"), "not a uuid\n")
        .unwrap_or_else(|error| panic!("write: {error}"));
    let identity = NodeIdentity::load_or_create(dir.path())
        .unwrap_or_else(|error| panic!("identity: {error}"));
    assert!(drover_structs::ids::is_uuid(&identity.node_id));
    assert_ne!(identity.node_id, identity.secret_id);
    let again = NodeIdentity::load_or_create(dir.path())
        .unwrap_or_else(|error| panic!("identity: {error}"));
    assert_eq!(again, identity);
}

#[test]
fn alloc_usage_sums_its_tasks_and_scales_ticks_by_the_node() {
    let task = |rss: u64, percent: f64, timestamp: u64| drover_driver::TaskResourceUsage {
        timestamp_unix_ns: timestamp,
        memory: drover_driver::MemoryUsage {
            rss,
            usage: rss * 2,
            measured: vec!["RSS".to_string()],
            ..Default::default()
        },
        cpu: drover_driver::CpuUsage {
            percent,
            measured: vec!["Percent".to_string()],
            ..Default::default()
        },
        pids: vec![1],
    };
    let usage = BTreeMap::from([
        ("web".to_string(), task(100, 50.0, 7)),
        ("sidecar".to_string(), task(20, 25.0, 9)),
    ]);
    // Two cores of 2000 MHz: half a core is 1000 MHz of ticks.
    let alloc = alloc_resource_usage(&usage, 4000.0, 2);
    assert_eq!(
        alloc.tasks["web"].resource_usage.cpu_stats.total_ticks,
        1000.0
    );
    assert_eq!(alloc.resource_usage.memory_stats.rss, 120);
    assert_eq!(alloc.resource_usage.memory_stats.usage, 240);
    assert_eq!(alloc.resource_usage.cpu_stats.total_ticks, 1500.0);
    assert_eq!(
        alloc.resource_usage.memory_stats.measured,
        vec!["RSS".to_string()]
    );
    assert_eq!(alloc.timestamp, 9);
}

/// An allocation of a group that stops on the client after `stop_after` without a server.
fn alloc_stopping_after(node_id: &str, stop_after: Option<Duration>) -> Allocation {
    let mut alloc = alloc_for(node_id, &["server"]);
    let mut job = Job::clone(alloc.job.as_deref().unwrap_or(&Job::default()));
    job.task_groups[0].disconnect = stop_after.map(|delay| drover_structs::DisconnectStrategy {
        stop_on_client_after: Some(drover_structs::DurationNs::from_std(delay)),
        replace: true,
        ..drover_structs::DisconnectStrategy::default()
    });
    alloc.job = Some(Arc::new(job));
    alloc
}

#[tokio::test(start_paused = true)]
async fn a_client_without_servers_stops_allocations_after_stop_on_client_after() {
    let harness = start(SimRunnerTiming::default()).await;
    let stopping = alloc_stopping_after(&harness.node_id, Some(Duration::from_secs(60)));
    let stopping_id = stopping.id.clone();
    let staying = alloc_stopping_after(&harness.node_id, None);
    let staying_id = staying.id.clone();
    harness.server.place_alloc(stopping);
    harness.server.place_alloc(staying);
    eventually("both run", || {
        server_status(&harness.server, &stopping_id) == ALLOC_CLIENT_STATUS_RUNNING
            && server_status(&harness.server, &staying_id) == ALLOC_CLIENT_STATUS_RUNNING
    })
    .await;
    let stopping_runner = harness.client.runner(&stopping_id).expect("runner");
    let staying_runner = harness.client.runner(&staying_id).expect("runner");

    // Answered heartbeats keep it running well past the delay.
    tokio::time::sleep(Duration::from_secs(120)).await;
    assert!(!stopping_runner.is_destroyed());

    // The servers are out of reach: it is stopped once the last answer is 60 s old.
    harness.server.set_unreachable(true);
    let lost_at = harness
        .client
        .heartbeat_status()
        .last_heartbeat
        .expect("answered heartbeats");
    let deadline = lost_at + Duration::from_secs(60);
    tokio::time::sleep_until(deadline - Duration::from_secs(1)).await;
    assert!(!stopping_runner.is_destroyed(), "not before the delay");
    eventually("the allocation to be stopped", || {
        stopping_runner.is_destroyed()
    })
    .await;
    assert!(tokio::time::Instant::now() >= deadline);
    assert!(
        !staying_runner.is_destroyed(),
        "a group without the delay keeps running"
    );
    assert!(
        harness.client.runner(&stopping_id).is_ok(),
        "kept to report"
    );

    // The servers answer again and hear that it finished.
    harness.server.set_unreachable(false);
    eventually("the final status to reach the server", || {
        server_status(&harness.server, &stopping_id) == ALLOC_CLIENT_STATUS_COMPLETE
    })
    .await;
    assert_eq!(
        server_status(&harness.server, &staying_id),
        ALLOC_CLIENT_STATUS_RUNNING
    );
    harness.client.shutdown().await;
}
