//! Alloc and task runner behaviour on paused tokio time with the fake driver.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use drover_structs::{
    ALLOC_CLIENT_STATUS_COMPLETE, ALLOC_CLIENT_STATUS_FAILED, ALLOC_CLIENT_STATUS_RUNNING,
    Allocation, DispatchPayloadConfig, DurationNs, TASK_STATE_RUNNING, TaskEvent, TaskState,
};
use serde_json::json;

use super::*;
use crate::clock::TokioFollowingClock;
use crate::config::ClientConfig;
use crate::state_db::StateDb;
use crate::taskrunner::driver::StaticDriverCatalog;
use crate::testing::{FakeDriver, alloc_with_tasks, fake_task, restart_policy, with_lifecycle};

#[derive(Debug, Default)]
struct RecordingSink {
    updates: Mutex<Vec<AllocClientUpdate>>,
}

impl AllocStatusSink for RecordingSink {
    fn alloc_updated(&self, update: AllocClientUpdate) {
        lock(&self.updates).push(update);
    }
}

struct Harness {
    deps: AllocRunnerDeps,
    driver: Arc<FakeDriver>,
    sink: Arc<RecordingSink>,
    services: Arc<crate::services::testing::RecordingRegistrar>,
    _data_dir: tempfile::TempDir,
}

fn harness() -> Harness {
    let data_dir = tempfile::tempdir().unwrap();
    let mut config = ClientConfig::new(data_dir.path());
    config.secrets_tmpfs = false;
    config.max_task_events = 100;
    let driver = FakeDriver::new();
    let catalog = StaticDriverCatalog::new()
        .with("fake", driver.clone())
        .with("exec", driver.clone());
    let sink = Arc::new(RecordingSink::default());
    let state_db = StateDb::open(&config.state_db_path()).unwrap();
    let services = Arc::new(crate::services::testing::RecordingRegistrar::default());
    let deps = AllocRunnerDeps {
        task: TaskRunnerDeps {
            config: Arc::new(config),
            clock: Arc::new(TokioFollowingClock::starting_at(1_700_000_000_000_000_000)),
            state_db: Arc::new(state_db),
            drivers: Arc::new(catalog),
            node: Arc::new(drover_structs::Node {
                id: "node-1".into(),
                name: "box".into(),
                datacenter: "dc1".into(),
                ..drover_structs::Node::default()
            }),
            region: "global".into(),
            jitter_seed: 7,
            services: services.clone(),
            identities: Arc::new(crate::identity::NoServersSigner),
            task_api: None,
            task_counters: None,
        },
        sink: sink.clone(),
        upstream: crate::allocrunner::upstream::UpstreamAllocs::default(),
    };
    Harness {
        deps,
        driver,
        sink,
        services,
        _data_dir: data_dir,
    }
}

fn event_types(state: &TaskState) -> Vec<String> {
    state
        .events
        .iter()
        .map(|event| event.r#type.clone())
        .collect()
}

fn count(state: &TaskState, event_type: &str) -> usize {
    state
        .events
        .iter()
        .filter(|event| event.r#type == event_type)
        .count()
}

fn events_of<'a>(state: &'a TaskState, event_type: &str) -> Vec<&'a TaskEvent> {
    state
        .events
        .iter()
        .filter(|event| event.r#type == event_type)
        .collect()
}

/// Waits (on paused time, bounded) until `predicate` holds for the runner.
async fn wait_until(runner: &AllocRunner, predicate: impl Fn(&AllocRunner) -> bool) {
    let mut status = runner.subscribe_status();
    let waited = tokio::time::timeout(Duration::from_secs(24 * 3600), async {
        while !predicate(runner) {
            if status.changed().await.is_err() {
                return;
            }
        }
    })
    .await;
    assert!(
        waited.is_ok(),
        "condition not reached; states: {:#?}",
        runner.task_states()
    );
}

fn state_of(runner: &AllocRunner, task: &str) -> TaskState {
    runner.task_states().remove(task).unwrap_or_default()
}

fn start(harness: &Harness, alloc: Allocation) -> AllocRunner {
    let runner = AllocRunner::new(harness.deps.clone(), alloc).unwrap();
    runner.run();
    runner
}

#[tokio::test(start_paused = true)]
async fn attempts_two_mode_fail_gives_three_starts_and_fails_the_alloc() {
    let harness = harness();
    let task = fake_task("web", json!({"run_for": "100ms", "exit_code": 1}));
    let alloc = alloc_with_tasks(
        "service",
        vec![task],
        restart_policy(2, Duration::from_secs(1), Duration::from_secs(1800), "fail"),
    );
    let runner = start(&harness, alloc);
    runner.wait_all_tasks_dead().await;

    let state = state_of(&runner, "web");
    assert_eq!(count(&state, "Started"), 3, "{:?}", event_types(&state));
    assert_eq!(count(&state, "Restarting"), 2);
    assert_eq!(count(&state, "Not Restarting"), 1);
    assert_eq!(count(&state, "Terminated"), 3);
    let not_restarting = events_of(&state, "Not Restarting")[0];
    assert_eq!(
        not_restarting.restart_reason,
        "Exceeded allowed attempts 2 in interval 30m0s and mode is \"fail\""
    );
    assert!(not_restarting.fails_task);
    assert!(state.failed);
    assert_eq!(state.restarts, 2);
    let restarting = events_of(&state, "Restarting")[0];
    assert_eq!(restarting.restart_reason, "Restart within policy");
    assert!(restarting.start_delay >= 1_000_000_000 && restarting.start_delay <= 1_250_000_000);
    assert_eq!(runner.status().client_status, ALLOC_CLIENT_STATUS_FAILED);
    assert_eq!(harness.driver.log().starts.len(), 3);
    // The sink saw the alloc go pending/running then failed.
    let updates = lock(&harness.sink.updates);
    assert_eq!(
        updates.last().map(|update| update.client_status.as_str()),
        Some(ALLOC_CLIENT_STATUS_FAILED)
    );
    assert!(updates.iter().any(|update| update.client_status_changed));
}

#[tokio::test(start_paused = true)]
async fn mode_delay_keeps_restarting_after_the_interval() {
    let harness = harness();
    let task = fake_task("web", json!({"run_for": "100ms", "exit_code": 1}));
    let alloc = alloc_with_tasks(
        "service",
        vec![task],
        restart_policy(1, Duration::from_secs(1), Duration::from_secs(10), "delay"),
    );
    let runner = start(&harness, alloc);
    wait_until(&runner, |runner| state_of(runner, "web").restarts >= 5).await;
    let state = state_of(&runner, "web");
    assert_eq!(count(&state, "Not Restarting"), 0);
    assert!(
        events_of(&state, "Restarting")
            .iter()
            .any(|event| event.restart_reason == "Exceeded allowed attempts, applying a delay")
    );
    assert!(!state.failed);
    runner.stop().await;
    assert!(runner.all_tasks_dead());
}

#[tokio::test(start_paused = true)]
async fn lifecycle_runs_in_order_and_leaves_nothing_running() {
    let harness = harness();
    let tasks = vec![
        with_lifecycle(
            fake_task("post", json!({"run_for": "1s"})),
            "poststop",
            false,
        ),
        with_lifecycle(
            fake_task("after", json!({"run_for": "1s"})),
            "poststart",
            false,
        ),
        fake_task("main", json!({"run_for": "5s"})),
        with_lifecycle(fake_task("side", json!({})), "prestart", true),
        with_lifecycle(
            fake_task("init", json!({"run_for": "2s"})),
            "prestart",
            false,
        ),
    ];
    let alloc = alloc_with_tasks(
        "batch",
        tasks,
        restart_policy(0, Duration::from_secs(1), Duration::from_secs(60), "fail"),
    );
    let runner = start(&harness, alloc);
    assert_eq!(
        runner.task_names(),
        vec!["side", "init", "main", "after", "post"]
    );
    runner.wait_all_tasks_dead().await;

    let states = runner.task_states();
    let started = |task: &str| events_of(&states[task], "Started")[0].time;
    let finished = |task: &str| states[task].finished_at.unix_nanos().unwrap_or(i64::MAX);
    assert!(started("init") <= started("main"));
    assert!(finished("init") <= started("main"));
    assert!(started("side") <= started("main"));
    assert!(started("main") <= started("after"));
    assert!(finished("main") <= started("post"));
    assert!(finished("side") <= started("post"));
    assert!(finished("after") <= started("post"));
    // The sidecar was stopped because the main tasks were done.
    assert_eq!(count(&states["side"], "Main Tasks Dead"), 1);
    assert_eq!(count(&states["side"], "Killed"), 1);
    for (name, state) in &states {
        assert!(!state.failed, "{name} failed: {:?}", event_types(state));
        assert_eq!(count(state, "Started"), 1, "{name}");
    }
    assert_eq!(runner.status().client_status, ALLOC_CLIENT_STATUS_COMPLETE);
    assert!(harness.driver.live_pids().is_empty());

    // An AllTasks restart runs the whole lifecycle again, the killed sidecar included.
    runner
        .restart_all_tasks("User requested restart")
        .await
        .unwrap();
    wait_until(&runner, |runner| {
        runner.all_tasks_dead() && count(&state_of(runner, "post"), "Started") == 2
    })
    .await;
    let states = runner.task_states();
    for (name, state) in &states {
        assert_eq!(
            count(state, "Started"),
            2,
            "{name}: {:?}",
            event_types(state)
        );
        assert!(!state.failed, "{name}");
    }
    let second_start = |task: &str| events_of(&states[task], "Started")[1].time;
    assert!(second_start("init") < second_start("main"));
    assert!(second_start("main") <= second_start("after"));
    assert!(second_start("after") < second_start("post"));
    assert!(harness.driver.live_pids().is_empty());
    assert_eq!(runner.status().client_status, ALLOC_CLIENT_STATUS_COMPLETE);

    // A stopped alloc is not rerun.
    let mut stopped = runner.alloc().as_ref().clone();
    stopped.desired_status = drover_structs::ALLOC_DESIRED_STATUS_STOP.into();
    runner.update(stopped).await.unwrap();
    assert!(matches!(
        runner.restart_all_tasks("again").await,
        Err(AllocRunnerError::Stopped { .. })
    ));
}

#[tokio::test(start_paused = true)]
async fn a_task_failing_for_good_kills_its_siblings() {
    let harness = harness();
    let tasks = vec![
        fake_task("bad", json!({"run_for": "1s", "exit_code": 2})),
        fake_task("good", json!({})),
    ];
    let alloc = alloc_with_tasks(
        "service",
        tasks,
        restart_policy(0, Duration::from_secs(1), Duration::from_secs(60), "fail"),
    );
    let runner = start(&harness, alloc);
    runner.wait_all_tasks_dead().await;
    let states = runner.task_states();
    let sibling = events_of(&states["good"], "Sibling Task Failed");
    assert_eq!(sibling.len(), 1);
    assert_eq!(sibling[0].failed_sibling, "bad");
    assert_eq!(sibling[0].display_message, "Task's sibling \"bad\" failed");
    assert_eq!(count(&states["good"], "Killed"), 1);
    assert!(states["bad"].failed);
    assert_eq!(runner.status().client_status, ALLOC_CLIENT_STATUS_FAILED);
    assert!(harness.driver.live_pids().is_empty());
}

#[tokio::test(start_paused = true)]
async fn leader_death_stops_the_group() {
    let harness = harness();
    let mut leader = fake_task("leader", json!({"run_for": "1s"}));
    leader.leader = true;
    let tasks = vec![leader, fake_task("follower", json!({}))];
    let alloc = alloc_with_tasks(
        "batch",
        tasks,
        restart_policy(0, Duration::from_secs(1), Duration::from_secs(60), "fail"),
    );
    let runner = start(&harness, alloc);
    runner.wait_all_tasks_dead().await;
    let states = runner.task_states();
    assert_eq!(count(&states["follower"], "Leader Task Dead"), 1);
    assert_eq!(count(&states["follower"], "Killed"), 1);
    assert_eq!(runner.status().client_status, ALLOC_CLIENT_STATUS_COMPLETE);
}

#[tokio::test(start_paused = true)]
async fn restart_all_tasks_reruns_dead_tasks_in_lifecycle_order() {
    let harness = harness();
    let tasks = vec![
        with_lifecycle(
            fake_task("init", json!({"run_for": "2s"})),
            "prestart",
            false,
        ),
        fake_task("main", json!({"run_for": "1s"})),
    ];
    let alloc = alloc_with_tasks(
        "batch",
        tasks,
        restart_policy(0, Duration::from_secs(1), Duration::from_secs(60), "fail"),
    );
    let runner = start(&harness, alloc);
    runner.wait_all_tasks_dead().await;
    assert_eq!(runner.status().client_status, ALLOC_CLIENT_STATUS_COMPLETE);

    // Restarting only running tasks does nothing to dead ones.
    runner
        .restart_running_tasks("User requested restart")
        .await
        .unwrap();
    assert_eq!(harness.driver.log().starts.len(), 2);

    runner
        .restart_all_tasks("User requested restart")
        .await
        .unwrap();
    wait_until(&runner, |runner| {
        runner.all_tasks_dead() && count(&state_of(runner, "main"), "Started") == 2
    })
    .await;
    let starts = harness.driver.log().starts;
    assert_eq!(starts, vec!["init", "main", "init", "main"]);
    let states = runner.task_states();
    let init_second_start = events_of(&states["init"], "Started")[1].time;
    let main_second_start = events_of(&states["main"], "Started")[1].time;
    assert!(main_second_start >= init_second_start + 2_000_000_000);
    assert_eq!(count(&states["main"], "Restart Signaled"), 1);
    assert_eq!(runner.status().client_status, ALLOC_CLIENT_STATUS_COMPLETE);
}

#[tokio::test(start_paused = true)]
async fn restart_of_a_running_task_does_not_count_against_the_policy() {
    let harness = harness();
    let task = fake_task("web", json!({}));
    let alloc = alloc_with_tasks(
        "service",
        vec![task],
        restart_policy(0, Duration::from_secs(1), Duration::from_secs(60), "fail"),
    );
    let runner = start(&harness, alloc);
    wait_until(&runner, |runner| {
        state_of(runner, "web").state == TASK_STATE_RUNNING
    })
    .await;
    for _ in 0..3 {
        runner
            .restart_task("web", "User requested restart")
            .await
            .unwrap();
        wait_until(&runner, |runner| {
            state_of(runner, "web").state == TASK_STATE_RUNNING
        })
        .await;
    }
    let state = state_of(&runner, "web");
    assert_eq!(count(&state, "Started"), 4);
    assert_eq!(count(&state, "Restart Signaled"), 3);
    assert_eq!(count(&state, "Restarting"), 3);
    assert!(!state.failed);
    assert!(matches!(
        runner.restart_task("nope", "x").await,
        Err(AllocRunnerError::UnknownTask { .. })
    ));
    runner.stop().await;
}

#[tokio::test(start_paused = true)]
async fn signals_reach_running_tasks_and_unknown_names_are_refused() {
    let harness = harness();
    let alloc = alloc_with_tasks(
        "service",
        vec![fake_task("web", json!({}))],
        restart_policy(0, Duration::from_secs(1), Duration::from_secs(60), "fail"),
    );
    let runner = start(&harness, alloc);
    wait_until(&runner, |runner| {
        state_of(runner, "web").state == TASK_STATE_RUNNING
    })
    .await;

    runner.signal(Some("web"), "SIGUSR1").await.unwrap();
    runner.signal(None, "usr2").await.unwrap();
    assert_eq!(
        harness.driver.log().signals,
        vec![
            ("web".to_string(), "SIGUSR1".to_string()),
            ("web".to_string(), "SIGUSR2".to_string())
        ]
    );
    let signaling = events_of(&state_of(&runner, "web"), "Signaling")
        .into_iter()
        .map(|event| {
            event
                .details
                .get("task_signal")
                .cloned()
                .unwrap_or_default()
        })
        .collect::<Vec<_>>();
    assert_eq!(signaling, vec!["SIGUSR1", "SIGUSR2"]);

    let unknown_task = runner.signal(Some("nope"), "SIGUSR1").await.unwrap_err();
    assert!(matches!(unknown_task, AllocRunnerError::UnknownTask { .. }));
    assert!(unknown_task.is_bad_request());
    let unknown_signal = runner.signal(Some("web"), "SIGNOPE").await.unwrap_err();
    assert!(matches!(
        unknown_signal,
        AllocRunnerError::UnknownSignal { .. }
    ));
    assert!(unknown_signal.is_bad_request());
    runner.stop().await;
}

#[tokio::test(start_paused = true)]
async fn kill_waits_kill_timeout_then_sigkills_a_task_ignoring_its_signal() {
    let harness = harness();
    let mut task = fake_task("stubborn", json!({"ignore_signals": true}));
    task.kill_timeout = DurationNs::from_secs(2);
    task.kill_signal = "SIGTERM".into();
    let alloc = alloc_with_tasks(
        "service",
        vec![task],
        restart_policy(0, Duration::from_secs(1), Duration::from_secs(60), "fail"),
    );
    let runner = start(&harness, alloc);
    wait_until(&runner, |runner| {
        state_of(runner, "stubborn").state == TASK_STATE_RUNNING
    })
    .await;
    let began = tokio::time::Instant::now();
    runner.stop().await;
    let took = began.elapsed();
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(3),
        "{took:?}"
    );

    let state = state_of(&runner, "stubborn");
    let types = event_types(&state);
    let tail: Vec<&str> = types
        .iter()
        .rev()
        .take(3)
        .rev()
        .map(String::as_str)
        .collect();
    assert_eq!(tail, vec!["Killing", "Terminated", "Killed"]);
    let killing = events_of(&state, "Killing")[0];
    assert_eq!(killing.kill_timeout, DurationNs::from_secs(2));
    assert_eq!(
        killing.display_message,
        "Sent interrupt. Waiting 2s before force killing"
    );
    assert_eq!(events_of(&state, "Terminated")[0].signal, 9);
    assert_eq!(
        harness.driver.log().kills,
        vec![(
            "stubborn".to_string(),
            "SIGTERM".to_string(),
            Duration::from_secs(2)
        )]
    );
    assert!(!state.failed);
    assert_eq!(runner.status().client_status, ALLOC_CLIENT_STATUS_COMPLETE);
}

#[tokio::test(start_paused = true)]
async fn kill_timeout_is_capped_by_max_kill_timeout_and_shutdown_delay_is_waited() {
    let mut harness = harness();
    let mut config = (*harness.deps.task.config).clone();
    config.max_kill_timeout = Duration::from_secs(3);
    harness.deps.task.config = Arc::new(config);
    let mut task = fake_task("web", json!({"ignore_signals": true}));
    task.kill_timeout = DurationNs::from_secs(60);
    task.shutdown_delay = DurationNs::from_secs(4);
    let alloc = alloc_with_tasks(
        "service",
        vec![task],
        restart_policy(0, Duration::from_secs(1), Duration::from_secs(60), "fail"),
    );
    let runner = start(&harness, alloc);
    wait_until(&runner, |runner| {
        state_of(runner, "web").state == TASK_STATE_RUNNING
    })
    .await;
    let began = tokio::time::Instant::now();
    runner.stop().await;
    let took = began.elapsed();
    assert!(
        took >= Duration::from_secs(7) && took < Duration::from_secs(8),
        "{took:?}"
    );
    let state = state_of(&runner, "web");
    assert_eq!(count(&state, "Waiting for shutdown delay"), 1);
    assert_eq!(
        events_of(&state, "Killing")[0].kill_timeout,
        DurationNs::from_secs(3)
    );
    assert_eq!(harness.driver.log().kills[0].1, "SIGINT");
}

#[tokio::test(start_paused = true)]
async fn start_errors_follow_recoverability() {
    let harness = harness();
    let tasks = vec![
        fake_task("fatal", json!({"start_error": "no such binary"})),
        fake_task(
            "flaky",
            json!({"start_error": "try again", "start_error_recoverable": true}),
        ),
    ];
    let alloc = alloc_with_tasks(
        "service",
        tasks,
        restart_policy(1, Duration::from_secs(1), Duration::from_secs(60), "fail"),
    );
    let runner = start(&harness, alloc);
    runner.wait_all_tasks_dead().await;
    let states = runner.task_states();
    let fatal = &states["fatal"];
    assert_eq!(
        events_of(fatal, "Driver Failure")[0].driver_error,
        "no such binary"
    );
    assert_eq!(
        events_of(fatal, "Not Restarting")[0].restart_reason,
        "Error was unrecoverable"
    );
    assert!(fatal.failed);
    // "flaky" was either retried within policy or killed as a sibling of "fatal" (its task
    // dir is built on a blocking thread, so "fatal" may fail before "flaky" first tries).
    let flaky = &states["flaky"];
    assert!(
        count(flaky, "Driver Failure") >= 1 || count(flaky, "Sibling Task Failed") == 1,
        "{:?}",
        flaky.events
    );
}

#[tokio::test(start_paused = true)]
async fn a_denied_user_fails_validation() {
    let harness = harness();
    let mut task = fake_task("web", json!({}));
    task.driver = "exec".into();
    task.user = "root".into();
    let alloc = alloc_with_tasks(
        "service",
        vec![task],
        restart_policy(2, Duration::from_secs(1), Duration::from_secs(60), "fail"),
    );
    let runner = start(&harness, alloc);
    runner.wait_all_tasks_dead().await;
    let state = state_of(&runner, "web");
    let failed = events_of(&state, "Failed Validation");
    assert_eq!(failed.len(), 1);
    assert!(failed[0].validation_error.contains("\"root\""));
    assert!(state.failed);
    assert!(harness.driver.log().starts.is_empty());
}

#[tokio::test(start_paused = true)]
async fn env_dirs_payload_and_interpolated_config_reach_the_driver() {
    let harness = harness();
    let mut task = fake_task(
        "web",
        json!({"run_for": "1s", "args": ["${NOMAD_ALLOC_INDEX}", "${node.unique.name}"]}),
    );
    task.dispatch_payload = Some(DispatchPayloadConfig {
        file: "input/data.txt".into(),
    });
    task.env
        .insert("GREETING".into(), "hi ${NOMAD_TASK_NAME}".into());
    let mut alloc = alloc_with_tasks(
        "batch",
        vec![task],
        restart_policy(0, Duration::from_secs(1), Duration::from_secs(60), "fail"),
    );
    let payload = snap::raw::Encoder::new()
        .compress_vec(b"dispatched payload")
        .unwrap();
    if let Some(job) = alloc.job.as_mut().map(std::sync::Arc::make_mut) {
        job.payload = drover_structs::Bytes(payload);
    }
    let runner = start(&harness, alloc.clone());
    runner.wait_all_tasks_dead().await;
    let spec = harness.driver.log().specs.remove(0);
    assert_eq!(spec.env.get("NOMAD_ALLOC_ID"), Some(&alloc.id));
    assert_eq!(spec.env.get("GREETING").map(String::as_str), Some("hi web"));
    assert_eq!(spec.config["args"], json!(["0", "box"]));
    let payload_file = spec.task_dir.local_dir.join("input/data.txt");
    assert_eq!(std::fs::read(&payload_file).unwrap(), b"dispatched payload");
    assert!(spec.task_dir.secrets_dir.is_dir());
    assert!(runner.alloc_dir().logs_dir.is_dir());
    let local = runner.task_runner("web").unwrap().local_state();
    assert!(local.hooks["dispatch_payload"].done);
    assert_eq!(
        state_of(&runner, "web").events[1].display_message,
        "Building Task Directory"
    );

    runner.destroy().await.unwrap();
    assert!(!runner.alloc_dir().root.exists());
    assert!(harness.deps.task.state_db.alloc_ids().unwrap().is_empty());
}

#[tokio::test(start_paused = true)]
async fn restore_reattaches_without_starting_twice() {
    let harness = harness();
    let alloc = alloc_with_tasks(
        "service",
        vec![fake_task("web", json!({}))],
        restart_policy(2, Duration::from_secs(1), Duration::from_secs(60), "fail"),
    );
    let alloc_id = alloc.id.clone();
    let first = start(&harness, alloc);
    wait_until(&first, |runner| {
        state_of(runner, "web").state == TASK_STATE_RUNNING
    })
    .await;
    let pid_before = harness.driver.live_pids();
    assert_eq!(pid_before.len(), 1);

    // Agent shutdown: the task keeps running.
    first.shutdown().await;
    assert_eq!(harness.driver.live_pids(), pid_before);

    let second = AllocRunner::restore(harness.deps.clone(), &alloc_id)
        .unwrap()
        .unwrap();
    second.run();
    wait_until(&second, |runner| {
        runner.status().client_status == ALLOC_CLIENT_STATUS_RUNNING
    })
    .await;
    let state = state_of(&second, "web");
    assert_eq!(count(&state, "Started"), 1, "{:?}", event_types(&state));
    assert_eq!(count(&state, "Received"), 1);
    assert_eq!(harness.driver.log().starts.len(), 1);
    assert_eq!(harness.driver.live_pids(), pid_before);

    // The restored runner still controls the task.
    second.stop().await;
    assert!(harness.driver.live_pids().is_empty());
    assert_eq!(count(&state_of(&second, "web"), "Killed"), 1);
}

#[tokio::test(start_paused = true)]
async fn a_task_that_exited_while_the_agent_was_down_is_handled_by_its_policy() {
    let harness = harness();
    let alloc = alloc_with_tasks(
        "service",
        vec![fake_task("web", json!({}))],
        restart_policy(2, Duration::from_secs(1), Duration::from_secs(60), "fail"),
    );
    let alloc_id = alloc.id.clone();
    let first = start(&harness, alloc);
    wait_until(&first, |runner| {
        state_of(runner, "web").state == TASK_STATE_RUNNING
    })
    .await;
    first.shutdown().await;
    harness.driver.make_exit("web", 3);

    let second = AllocRunner::restore(harness.deps.clone(), &alloc_id)
        .unwrap()
        .unwrap();
    second.run();
    wait_until(&second, |runner| {
        count(&state_of(runner, "web"), "Started") == 2
    })
    .await;
    let state = state_of(&second, "web");
    let terminated = events_of(&state, "Terminated");
    assert_eq!(terminated.len(), 1);
    assert_eq!(terminated[0].exit_code, 3);
    assert_eq!(count(&state, "Restarting"), 1);
    second.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_stopped_task_is_not_restarted_after_restore() {
    let harness = harness();
    let alloc = alloc_with_tasks(
        "service",
        vec![fake_task("web", json!({}))],
        restart_policy(2, Duration::from_secs(1), Duration::from_secs(60), "fail"),
    );
    let alloc_id = alloc.id.clone();
    let first = start(&harness, alloc);
    wait_until(&first, |runner| {
        state_of(runner, "web").state == TASK_STATE_RUNNING
    })
    .await;
    first.stop().await;
    first.shutdown().await;

    let second = AllocRunner::restore(harness.deps.clone(), &alloc_id)
        .unwrap()
        .unwrap();
    second.run();
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert!(second.all_tasks_dead());
    assert_eq!(harness.driver.log().starts.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_server_stop_update_stops_the_alloc() {
    let harness = harness();
    let alloc = alloc_with_tasks(
        "service",
        vec![fake_task("web", json!({}))],
        restart_policy(2, Duration::from_secs(1), Duration::from_secs(60), "fail"),
    );
    let runner = start(&harness, alloc.clone());
    wait_until(&runner, |runner| {
        state_of(runner, "web").state == TASK_STATE_RUNNING
    })
    .await;
    let mut stopped = alloc;
    stopped.desired_status = drover_structs::ALLOC_DESIRED_STATUS_STOP.into();
    runner.update(stopped).await.unwrap();
    runner.wait_all_tasks_dead().await;
    assert_eq!(runner.status().client_status, ALLOC_CLIENT_STATUS_COMPLETE);
    let persisted: Allocation = harness
        .deps
        .task
        .state_db
        .get_alloc(runner.alloc_id())
        .unwrap()
        .unwrap();
    assert_eq!(persisted.desired_status, "stop");
}

#[tokio::test(start_paused = true)]
async fn failed_kills_are_retried_with_backoff() {
    let harness = harness();
    let alloc = alloc_with_tasks(
        "service",
        vec![fake_task("web", json!({"kill_fail_times": 2}))],
        restart_policy(0, Duration::from_secs(1), Duration::from_secs(60), "fail"),
    );
    let runner = start(&harness, alloc);
    wait_until(&runner, |runner| {
        state_of(runner, "web").state == TASK_STATE_RUNNING
    })
    .await;
    let began = tokio::time::Instant::now();
    runner.stop().await;
    let took = began.elapsed();
    // 5 s then 20 s of backoff between the three attempts.
    assert!(
        took >= Duration::from_secs(25) && took < Duration::from_secs(26),
        "{took:?}"
    );
    assert_eq!(harness.driver.log().kills.len(), 3);
    let state = state_of(&runner, "web");
    let killed = events_of(&state, "Killed");
    assert_eq!(killed.len(), 1);
    assert!(killed[0].kill_error.is_empty());
    assert!(harness.driver.live_pids().is_empty());
}

#[tokio::test(start_paused = true)]
async fn destinations_escaping_the_task_dir_fail_validation() {
    let harness = harness();
    let mut task = fake_task("web", json!({}));
    task.artifacts.push(drover_structs::TaskArtifact {
        getter_source: "https://example.com/x.tgz".into(),
        relative_dest: "local/../../../etc".into(),
        ..drover_structs::TaskArtifact::default()
    });
    let alloc = alloc_with_tasks(
        "service",
        vec![task],
        restart_policy(2, Duration::from_secs(1), Duration::from_secs(60), "fail"),
    );
    let runner = start(&harness, alloc);
    runner.wait_all_tasks_dead().await;
    let state = state_of(&runner, "web");
    let failed = events_of(&state, "Failed Validation");
    assert_eq!(failed.len(), 1);
    assert!(
        failed[0].validation_error.contains("artifact (0)"),
        "{}",
        failed[0].validation_error
    );
    assert!(harness.driver.log().starts.is_empty());
    assert_eq!(runner.status().client_status, ALLOC_CLIENT_STATUS_FAILED);
}

fn with_artifact(source: &str, destination: &str, mode: &str) -> drover_structs::Task {
    let mut task = fake_task("web", json!({}));
    task.artifacts.push(drover_structs::TaskArtifact {
        getter_source: source.into(),
        relative_dest: destination.into(),
        getter_mode: mode.into(),
        ..drover_structs::TaskArtifact::default()
    });
    task
}

#[tokio::test(start_paused = true)]
async fn an_artifact_is_in_place_before_the_task_starts() {
    let harness = harness();
    let source_dir = tempfile::tempdir().unwrap();
    let source = source_dir.path().join("tool.sh");
    std::fs::write(&source, "#!/bin/sh\n").unwrap();
    let task = with_artifact(&source.to_string_lossy(), "local/bin/tool.sh", "file");
    let alloc = alloc_with_tasks(
        "service",
        vec![task],
        restart_policy(2, Duration::from_secs(1), Duration::from_secs(60), "fail"),
    );
    let placed = harness
        .deps
        .task
        .config
        .alloc_root_dir()
        .join(&alloc.id)
        .join("web/local/bin/tool.sh");
    let runner = start(&harness, alloc);
    wait_until(&runner, |runner| {
        runner.status().client_status == ALLOC_CLIENT_STATUS_RUNNING
    })
    .await;
    assert_eq!(std::fs::read(&placed).unwrap(), b"#!/bin/sh\n");
    let state = state_of(&runner, "web");
    let types = event_types(&state);
    let downloading = types
        .iter()
        .position(|kind| kind == "Downloading Artifacts");
    let started = types.iter().position(|kind| kind == "Started");
    assert!(downloading.is_some() && downloading < started, "{types:?}");
    assert_eq!(harness.driver.log().starts.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_failed_artifact_download_is_its_own_event_and_the_task_never_starts() {
    let harness = harness();
    let task = with_artifact("/nonexistent/drover/artifact.tgz", "local/", "any");
    let alloc = alloc_with_tasks(
        "service",
        vec![task],
        restart_policy(1, Duration::from_secs(1), Duration::from_secs(60), "fail"),
    );
    let runner = start(&harness, alloc);
    runner.wait_all_tasks_dead().await;
    let state = state_of(&runner, "web");
    let failed = events_of(&state, "Failed Artifact Download");
    // Recoverable: the restart policy's one attempt tries again.
    assert_eq!(failed.len(), 2, "{:?}", event_types(&state));
    assert!(
        failed[0]
            .download_error
            .contains("failed to download artifact \"/nonexistent/drover/artifact.tgz\""),
        "{}",
        failed[0].download_error
    );
    assert_eq!(failed[0].display_message, failed[0].download_error);
    assert_eq!(count(&state, "Task hook failed"), 0);
    assert!(harness.driver.log().starts.is_empty());
    assert_eq!(runner.status().client_status, ALLOC_CLIENT_STATUS_FAILED);
}

#[tokio::test(start_paused = true)]
async fn an_unsupported_getter_fails_at_once_naming_it() {
    let harness = harness();
    let task = with_artifact(
        "s3::https://s3.amazonaws.com/bucket/app.tgz",
        "local/",
        "any",
    );
    let alloc = alloc_with_tasks(
        "service",
        vec![task],
        restart_policy(3, Duration::from_secs(1), Duration::from_secs(60), "fail"),
    );
    let runner = start(&harness, alloc);
    runner.wait_all_tasks_dead().await;
    let state = state_of(&runner, "web");
    let failed = events_of(&state, "Failed Artifact Download");
    assert_eq!(failed.len(), 1, "not retried: {:?}", event_types(&state));
    assert!(
        failed[0].download_error.contains("\"s3\""),
        "{}",
        failed[0].download_error
    );
    assert!(harness.driver.log().starts.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_kill_interrupted_by_an_agent_crash_is_finished_on_restore() {
    let harness = harness();
    let alloc = alloc_with_tasks(
        "service",
        vec![fake_task("web", json!({"ignore_signals": true}))],
        restart_policy(2, Duration::from_secs(1), Duration::from_secs(60), "fail"),
    );
    let alloc_id = alloc.id.clone();
    let first = start(&harness, alloc);
    wait_until(&first, |runner| {
        state_of(runner, "web").state == TASK_STATE_RUNNING
    })
    .await;
    // The kill intent is persisted, then the agent goes away before the kill completes.
    let killing = first.clone();
    let kill = tokio::spawn(async move { killing.stop().await });
    wait_until(&first, |runner| {
        runner.task_runner("web").map(|task| task.phase()) == Some(TaskPhase::Killing)
    })
    .await;
    first.shutdown().await;
    kill.abort();

    let second = AllocRunner::restore(harness.deps.clone(), &alloc_id)
        .unwrap()
        .unwrap();
    second.run();
    second.wait_all_tasks_dead().await;
    let state = state_of(&second, "web");
    assert_eq!(count(&state, "Killed"), 1, "{:?}", event_types(&state));
    assert_eq!(count(&state, "Started"), 1);
    assert_eq!(harness.driver.log().starts.len(), 1);
    // One kill from each agent: the second finished what the first began.
    assert_eq!(harness.driver.log().kills.len(), 2);
    assert!(harness.driver.live_pids().is_empty());
}

#[test]
fn restart_backoff_is_read_from_meta() {
    let mut task = fake_task("web", json!({}));
    task.meta.insert(
        crate::taskrunner::META_RESTART_BACKOFF_FACTOR.into(),
        "2".into(),
    );
    task.meta.insert(
        crate::taskrunner::META_RESTART_MAX_DELAY.into(),
        "1m".into(),
    );
    let alloc = alloc_with_tasks(
        "service",
        vec![task.clone()],
        restart_policy(3, Duration::from_secs(5), Duration::from_secs(600), "delay"),
    );
    let settings = crate::taskrunner::restart_policy_settings(&alloc, &task);
    assert_eq!(settings.attempts, 3);
    assert_eq!(settings.delay, Duration::from_secs(5));
    assert_eq!(
        settings.mode,
        crate::taskrunner::restarts::RestartMode::Delay
    );
    assert_eq!(
        settings.backoff,
        Some(crate::taskrunner::restarts::RestartBackoff {
            factor: 2.0,
            max_delay: Duration::from_secs(60)
        })
    );
    let plain = fake_task("plain", json!({}));
    assert_eq!(
        crate::taskrunner::restart_policy_settings(&alloc, &plain).backoff,
        None
    );
}

#[test]
fn restart_backoff_is_read_from_the_restart_block_before_meta() {
    let mut policy = restart_policy(3, Duration::from_secs(5), Duration::from_secs(600), "delay");
    policy.backoff_factor = 3.0;
    policy.max_delay = drover_structs::DurationNs::from_secs(90);
    let mut task = fake_task("web", json!({}));
    // The block wins over the older meta spelling.
    task.meta.insert(
        crate::taskrunner::META_RESTART_BACKOFF_FACTOR.into(),
        "2".into(),
    );
    task.restart_policy = Some(policy.clone());
    let alloc = alloc_with_tasks("service", vec![task.clone()], policy);
    let settings = crate::taskrunner::restart_policy_settings(&alloc, &task);
    assert_eq!(
        settings.backoff,
        Some(crate::taskrunner::restarts::RestartBackoff {
            factor: 3.0,
            max_delay: Duration::from_secs(90)
        })
    );
}

#[tokio::test(start_paused = true)]
async fn an_in_place_update_reaches_the_next_start() {
    let harness = harness();
    let mut task = fake_task("web", json!({}));
    task.env.insert("VERSION".into(), "1".into());
    let alloc = alloc_with_tasks(
        "service",
        vec![task],
        restart_policy(0, Duration::from_secs(1), Duration::from_secs(60), "fail"),
    );
    let runner = start(&harness, alloc.clone());
    wait_until(&runner, |runner| {
        state_of(runner, "web").state == TASK_STATE_RUNNING
    })
    .await;

    let mut updated = alloc;
    if let Some(job) = updated.job.as_mut().map(std::sync::Arc::make_mut) {
        job.version = 1;
        job.task_groups[0].tasks[0]
            .env
            .insert("VERSION".into(), "2".into());
    }
    runner.update(updated).await.unwrap();
    runner
        .restart_task("web", "User requested restart")
        .await
        .unwrap();
    wait_until(&runner, |runner| {
        count(&state_of(runner, "web"), "Started") == 2
    })
    .await;
    let specs = harness.driver.log().specs;
    assert_eq!(specs[0].env.get("VERSION").map(String::as_str), Some("1"));
    assert_eq!(specs[1].env.get("VERSION").map(String::as_str), Some("2"));
    runner.stop().await;
}

#[tokio::test(start_paused = true)]
async fn group_shutdown_delay_is_waited_before_killing() {
    let harness = harness();
    let mut alloc = alloc_with_tasks(
        "service",
        vec![fake_task("web", json!({}))],
        restart_policy(0, Duration::from_secs(1), Duration::from_secs(60), "fail"),
    );
    if let Some(job) = alloc.job.as_mut().map(std::sync::Arc::make_mut) {
        job.task_groups[0].shutdown_delay = Some(DurationNs::from_secs(10));
    }
    let runner = start(&harness, alloc);
    wait_until(&runner, |runner| {
        state_of(runner, "web").state == TASK_STATE_RUNNING
    })
    .await;
    let began = tokio::time::Instant::now();
    runner.stop().await;
    let took = began.elapsed();
    assert!(
        took >= Duration::from_secs(10) && took < Duration::from_secs(11),
        "{took:?}"
    );
    let state = state_of(&runner, "web");
    let types = event_types(&state);
    let waiting = types
        .iter()
        .position(|kind| kind == "Waiting for shutdown delay");
    let killing = types.iter().position(|kind| kind == "Killing");
    assert!(waiting.is_some() && waiting < killing, "{types:?}");
}

#[tokio::test(start_paused = true)]
async fn restart_all_tasks_does_not_wait_on_tasks_that_have_not_started() {
    let harness = harness();
    let tasks = vec![
        with_lifecycle(
            fake_task("init", json!({"run_for": "1h"})),
            "prestart",
            false,
        ),
        fake_task("main", json!({"run_for": "1s"})),
    ];
    let alloc = alloc_with_tasks(
        "batch",
        tasks,
        restart_policy(0, Duration::from_secs(1), Duration::from_secs(60), "fail"),
    );
    let runner = start(&harness, alloc);
    wait_until(&runner, |runner| {
        state_of(runner, "init").state == TASK_STATE_RUNNING
    })
    .await;
    let restarted = tokio::time::timeout(
        Duration::from_secs(60),
        runner.restart_all_tasks("User requested restart"),
    )
    .await;
    assert!(matches!(restarted, Ok(Ok(()))), "{restarted:?}");
    wait_until(&runner, |runner| {
        count(&state_of(runner, "init"), "Started") == 2
    })
    .await;
    assert_eq!(count(&state_of(&runner, "main"), "Started"), 0);
    runner.stop().await;
    assert!(harness.driver.live_pids().is_empty());
}

#[tokio::test(start_paused = true)]
async fn done_prestart_hooks_are_not_rerun_by_a_restored_runner() {
    let harness = harness();
    let mut task = fake_task("web", json!({"run_for": "1s"}));
    task.dispatch_payload = Some(DispatchPayloadConfig {
        file: "payload.bin".into(),
    });
    let mut alloc = alloc_with_tasks(
        "batch",
        vec![task],
        restart_policy(0, Duration::from_secs(1), Duration::from_secs(60), "fail"),
    );
    if let Some(job) = alloc.job.as_mut().map(std::sync::Arc::make_mut) {
        job.payload = drover_structs::Bytes(snap::raw::Encoder::new().compress_vec(b"x").unwrap());
    }
    let alloc_id = alloc.id.clone();
    let first = start(&harness, alloc);
    first.wait_all_tasks_dead().await;
    let payload_file = harness.driver.log().specs[0]
        .task_dir
        .local_dir
        .join("payload.bin");
    assert!(payload_file.is_file());
    first.shutdown().await;
    std::fs::remove_file(&payload_file).unwrap();

    let second = AllocRunner::restore(harness.deps.clone(), &alloc_id)
        .unwrap()
        .unwrap();
    second.run();
    second
        .restart_all_tasks("User requested restart")
        .await
        .unwrap();
    wait_until(&second, |runner| {
        runner.all_tasks_dead() && count(&state_of(runner, "web"), "Started") == 2
    })
    .await;
    assert!(
        !payload_file.exists(),
        "the done dispatch payload hook ran again"
    );
    // The task dir hook is not done (it re-checks the layout) but does not announce a rebuild.
    assert_eq!(count(&state_of(&second, "web"), "Task Setup"), 1);
}

/// The same policy test against `drover-driver`'s mock driver, through the real adapter.
#[tokio::test(start_paused = true)]
async fn the_mock_driver_through_the_adapter_follows_the_restart_policy() {
    let mut harness = harness();
    harness.deps.task.drivers = Arc::new(crate::taskrunner::drivers::default_driver_catalog(
        drover_driver::raw_exec::RawExecConfig::default(),
    ));
    let mut task = fake_task("web", json!({"run_for": "100ms", "exit_code": 1}));
    task.driver = "mock_driver".into();
    let alloc = alloc_with_tasks(
        "service",
        vec![task],
        restart_policy(2, Duration::from_secs(1), Duration::from_secs(1800), "fail"),
    );
    let runner = start(&harness, alloc);
    runner.wait_all_tasks_dead().await;
    let state = state_of(&runner, "web");
    assert_eq!(count(&state, "Started"), 3, "{:?}", event_types(&state));
    assert_eq!(count(&state, "Restarting"), 2);
    assert_eq!(count(&state, "Not Restarting"), 1);
    assert_eq!(events_of(&state, "Terminated")[0].exit_code, 1);
    assert_eq!(runner.status().client_status, ALLOC_CLIENT_STATUS_FAILED);
}

#[tokio::test(start_paused = true)]
async fn the_mock_driver_is_killed_within_its_kill_timeout() {
    let mut harness = harness();
    harness.deps.task.drivers = Arc::new(crate::taskrunner::drivers::default_driver_catalog(
        drover_driver::raw_exec::RawExecConfig::default(),
    ));
    let mut task = fake_task("web", json!({"run_for": "1h", "kill_after": "10s"}));
    task.driver = "mock_driver".into();
    task.kill_timeout = DurationNs::from_secs(3);
    let alloc = alloc_with_tasks(
        "service",
        vec![task],
        restart_policy(0, Duration::from_secs(1), Duration::from_secs(60), "fail"),
    );
    let runner = start(&harness, alloc);
    wait_until(&runner, |runner| {
        state_of(runner, "web").state == TASK_STATE_RUNNING
    })
    .await;
    let began = tokio::time::Instant::now();
    runner.stop().await;
    let took = began.elapsed();
    assert!(
        took >= Duration::from_secs(3) && took < Duration::from_secs(4),
        "{took:?}"
    );
    let state = state_of(&runner, "web");
    assert_eq!(events_of(&state, "Terminated")[0].signal, 9);
    assert_eq!(count(&state, "Killed"), 1);
}

#[tokio::test(start_paused = true)]
async fn creating_a_runner_twice_for_the_same_alloc_does_not_start_twice() {
    let harness = harness();
    let alloc = alloc_with_tasks(
        "service",
        vec![fake_task("web", json!({}))],
        restart_policy(2, Duration::from_secs(1), Duration::from_secs(60), "fail"),
    );
    let first = start(&harness, alloc.clone());
    wait_until(&first, |runner| {
        state_of(runner, "web").state == TASK_STATE_RUNNING
    })
    .await;
    first.shutdown().await;
    let second = start(&harness, alloc);
    wait_until(&second, |runner| {
        runner.status().client_status == ALLOC_CLIENT_STATUS_RUNNING
    })
    .await;
    assert_eq!(harness.driver.log().starts.len(), 1);
    assert_eq!(count(&state_of(&second, "web"), "Received"), 1);
    second.stop().await;
}

#[tokio::test(start_paused = true)]
async fn the_sink_sees_each_client_status_change_flagged_once() {
    let harness = harness();
    let mut task = fake_task("web", json!({"run_for": "2s"}));
    task.log_config = Some(drover_structs::LogConfig {
        max_files: 3,
        max_file_size_mb: 1,
        disabled: false,
    });
    let alloc = alloc_with_tasks(
        "batch",
        vec![task],
        restart_policy(0, Duration::from_secs(1), Duration::from_secs(60), "fail"),
    );
    let runner = start(&harness, alloc);
    runner.wait_all_tasks_dead().await;
    let updates = lock(&harness.sink.updates).clone();
    let changes: Vec<&str> = updates
        .iter()
        .filter(|update| update.client_status_changed)
        .map(|update| update.client_status.as_str())
        .collect();
    assert_eq!(changes, vec!["pending", "running", "complete"]);
    assert!(
        updates.len() > changes.len(),
        "non-urgent updates are sent too"
    );
    assert!(
        updates
            .iter()
            .all(|update| update.alloc_id == runner.alloc_id())
    );
    let spec = &harness.driver.log().specs[0];
    assert_eq!(spec.log_rotation.max_files, 3);
    assert_eq!(spec.log_rotation.max_file_size_bytes, 1024 * 1024);
}

#[tokio::test(start_paused = true)]
async fn a_runner_that_never_ran_can_be_destroyed() {
    let harness = harness();
    let alloc = alloc_with_tasks(
        "service",
        vec![fake_task("web", json!({}))],
        restart_policy(0, Duration::from_secs(1), Duration::from_secs(60), "fail"),
    );
    let runner = AllocRunner::new(harness.deps.clone(), alloc).unwrap();
    tokio::time::timeout(Duration::from_secs(60), runner.destroy())
        .await
        .expect("destroy does not hang")
        .unwrap();
    assert!(harness.driver.log().starts.is_empty());
    assert!(harness.deps.task.state_db.alloc_ids().unwrap().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_restart_delay_interrupted_by_an_agent_restart_is_waited_out() {
    let harness = harness();
    let alloc = alloc_with_tasks(
        "service",
        vec![fake_task("web", json!({"run_for": "1s", "exit_code": 1}))],
        restart_policy(3, Duration::from_secs(20), Duration::from_secs(600), "fail"),
    );
    let alloc_id = alloc.id.clone();
    let first = start(&harness, alloc);
    wait_until(&first, |runner| {
        count(&state_of(runner, "web"), "Restarting") == 1
    })
    .await;
    let restarting_at = tokio::time::Instant::now();
    tokio::time::sleep(Duration::from_secs(5)).await;
    first.shutdown().await;

    let second = AllocRunner::restore(harness.deps.clone(), &alloc_id)
        .unwrap()
        .unwrap();
    second.run();
    wait_until(&second, |runner| {
        count(&state_of(runner, "web"), "Started") == 2
    })
    .await;
    let waited = restarting_at.elapsed();
    assert!(
        waited >= Duration::from_secs(20),
        "restarted after only {waited:?}"
    );
    assert!(waited < Duration::from_secs(26), "{waited:?}");
    assert_eq!(harness.driver.log().starts.len(), 2);
    second.stop().await;
}

/// Task and group service registration through the runners (the catalog is a recording fake).
mod services {
    use drover_structs::{
        AllocDeploymentStatus, AllocatedPortMapping, AllocatedResources, Service,
        ServiceRegistration,
    };

    use super::*;
    use crate::services::testing::Call;

    const GROUP_ID_SUFFIX: &str = "-group-group-frontend-http";

    fn service(name: &str, tags: &[&str]) -> Service {
        Service {
            name: name.into(),
            port_label: "http".into(),
            provider: "nomad".into(),
            tags: tags.iter().map(|tag| (*tag).to_owned()).collect(),
            ..Service::default()
        }
    }

    /// A service job: group service `frontend` and task service `api` on port `http`.
    fn alloc_with_services(task_config: serde_json::Value) -> Allocation {
        let mut task = fake_task("web", task_config);
        // Nomad's default provider, with no Consul on this agent: the built-in catalog too.
        task.services = vec![Service {
            provider: "consul".into(),
            ..service("api", &["v1", "idx-${NOMAD_ALLOC_INDEX}"])
        }];
        let mut alloc = alloc_with_tasks(
            "service",
            vec![task],
            restart_policy(0, Duration::from_secs(1), Duration::from_secs(60), "fail"),
        );
        let mut resources = AllocatedResources::default();
        resources.shared.ports.push(AllocatedPortMapping {
            label: "http".into(),
            value: 25123,
            to: 0,
            host_ip: "127.0.0.1".into(),
        });
        alloc.allocated_resources = Some(resources);
        if let Some(job) = alloc.job.as_mut().map(Arc::make_mut) {
            job.task_groups[0].services = vec![service("frontend", &["edge"])];
        }
        alloc
    }

    fn set_group_shutdown_delay(alloc: &mut Allocation, delay: DurationNs) {
        if let Some(job) = alloc.job.as_mut().map(Arc::make_mut) {
            job.task_groups[0].shutdown_delay = Some(delay);
        }
    }

    /// Waits (paused time, bounded) until the catalog satisfies `predicate`.
    async fn wait_catalog(
        harness: &Harness,
        predicate: impl Fn(&BTreeMap<String, ServiceRegistration>) -> bool,
    ) {
        let waited = tokio::time::timeout(Duration::from_secs(600), async {
            while !predicate(&harness.services.catalog()) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
        assert!(
            waited.is_ok(),
            "catalog never matched: {:#?}",
            harness.services.catalog()
        );
    }

    fn upserts_of(calls: &[Call], id: &str) -> usize {
        calls
            .iter()
            .filter(|call| matches!(call, Call::Upsert(ids) if ids.iter().any(|i| i == id)))
            .count()
    }

    #[tokio::test(start_paused = true)]
    async fn task_and_group_services_are_registered_and_gone_before_the_shutdown_delay() {
        let harness = harness();
        let mut alloc = alloc_with_services(json!({}));
        set_group_shutdown_delay(&mut alloc, DurationNs::from_secs(10));
        let alloc_id = alloc.id.clone();
        let runner = start(&harness, alloc);
        wait_catalog(&harness, |catalog| catalog.len() == 2).await;

        let catalog = harness.services.catalog();
        let task_service = &catalog[&format!("_nomad-task-{alloc_id}-web-api-http")];
        assert_eq!(
            task_service,
            &ServiceRegistration {
                id: format!("_nomad-task-{alloc_id}-web-api-http"),
                service_name: "api".into(),
                namespace: "default".into(),
                node_id: "node-1".into(),
                datacenter: "dc1".into(),
                job_id: "example".into(),
                alloc_id: alloc_id.clone(),
                tags: vec!["v1".into(), "idx-0".into()],
                address: "127.0.0.1".into(),
                port: 25123,
                ..ServiceRegistration::default()
            }
        );
        let group_service = &catalog[&format!("_nomad-task-{alloc_id}{GROUP_ID_SUFFIX}")];
        assert_eq!(group_service.service_name, "frontend");
        assert_eq!(group_service.tags, vec!["edge".to_owned()]);
        assert_eq!(
            (group_service.address.as_str(), group_service.port),
            ("127.0.0.1", 25123)
        );

        let began = tokio::time::Instant::now();
        let stopping = tokio::spawn({
            let runner = runner.clone();
            async move { runner.stop().await }
        });
        // Both are out of the catalog long before the 10 s delay is over.
        wait_catalog(&harness, BTreeMap::is_empty).await;
        assert!(began.elapsed() < Duration::from_secs(1));
        assert!(!stopping.is_finished());
        stopping.await.unwrap();
        assert!(began.elapsed() >= Duration::from_secs(10));
        assert!(harness.services.catalog().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn the_task_service_is_deregistered_before_the_task_shutdown_delay() {
        let harness = harness();
        let mut alloc = alloc_with_services(json!({}));
        if let Some(job) = alloc.job.as_mut().map(Arc::make_mut) {
            job.task_groups[0].services.clear();
            job.task_groups[0].tasks[0].shutdown_delay = DurationNs::from_secs(5);
        }
        let runner = start(&harness, alloc);
        wait_catalog(&harness, |catalog| catalog.len() == 1).await;
        let began = tokio::time::Instant::now();
        let stopping = tokio::spawn({
            let runner = runner.clone();
            async move { runner.stop().await }
        });
        wait_catalog(&harness, BTreeMap::is_empty).await;
        assert!(began.elapsed() < Duration::from_secs(1));
        stopping.await.unwrap();
        assert!(began.elapsed() >= Duration::from_secs(5));
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_task_is_deregistered_with_its_group() {
        let harness = harness();
        let runner = start(
            &harness,
            alloc_with_services(json!({"run_for": "5s", "exit_code": 1})),
        );
        wait_catalog(&harness, |catalog| catalog.len() == 2).await;
        runner.wait_all_tasks_dead().await;
        wait_catalog(&harness, BTreeMap::is_empty).await;
        assert_eq!(runner.status().client_status, ALLOC_CLIENT_STATUS_FAILED);
    }

    #[tokio::test(start_paused = true)]
    async fn a_restart_registers_the_group_services_again() {
        let harness = harness();
        let runner = start(&harness, alloc_with_services(json!({})));
        let alloc_id = runner.alloc_id().to_owned();
        let group_id = format!("_nomad-task-{alloc_id}{GROUP_ID_SUFFIX}");
        let task_id = format!("_nomad-task-{alloc_id}-web-api-http");
        wait_catalog(&harness, |catalog| catalog.len() == 2).await;
        assert_eq!(upserts_of(&harness.services.calls(), &group_id), 1);

        for round in 2..=3 {
            runner
                .restart_task("web", "check \"alive\" unhealthy")
                .await
                .unwrap();
            wait_until(&runner, |runner| {
                count(&state_of(runner, "web"), "Started") == round
            })
            .await;
            wait_catalog(&harness, |_| {
                upserts_of(&harness.services.calls(), &group_id) == round
            })
            .await;
        }
        // The task's own registration went away during each restart and came back.
        let calls = harness.services.calls();
        assert_eq!(upserts_of(&calls, &task_id), 3);
        assert_eq!(
            calls
                .iter()
                .filter(|call| matches!(call, Call::Delete(ids) if ids.contains(&task_id)))
                .count(),
            2
        );
        assert_eq!(harness.services.catalog().len(), 2);
        runner.stop().await;
        assert!(harness.services.catalog().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn an_unreachable_server_is_retried_until_the_registration_lands() {
        let harness = harness();
        harness.services.set_unreachable(true);
        let runner = start(&harness, alloc_with_services(json!({})));
        wait_until(&runner, |runner| {
            state_of(runner, "web").state == TASK_STATE_RUNNING
        })
        .await;
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(harness.services.catalog().is_empty());
        assert!(harness.services.calls().len() >= 4, "retried meanwhile");
        harness.services.set_unreachable(false);
        wait_catalog(&harness, |catalog| catalog.len() == 2).await;
        runner.stop().await;
        assert!(harness.services.catalog().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_restored_agent_registers_again_without_deleting_first() {
        let harness = harness();
        let alloc = alloc_with_services(json!({}));
        let alloc_id = alloc.id.clone();
        let first = start(&harness, alloc);
        wait_catalog(&harness, |catalog| catalog.len() == 2).await;
        let before = harness.services.catalog();
        first.shutdown().await;
        // The agent's shutdown leaves the registrations in place.
        assert_eq!(harness.services.catalog(), before);
        let calls_before = harness.services.calls().len();

        let second = AllocRunner::restore(harness.deps.clone(), &alloc_id)
            .unwrap()
            .unwrap();
        second.run();
        wait_catalog(&harness, |_| {
            harness.services.calls().len() >= calls_before + 2
        })
        .await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        let after_restore = &harness.services.calls()[calls_before..];
        assert!(
            after_restore
                .iter()
                .all(|call| matches!(call, Call::Upsert(_))),
            "{after_restore:?}"
        );
        assert_eq!(harness.services.catalog(), before);
        assert_eq!(count(&state_of(&second, "web"), "Started"), 1);
        second.stop().await;
        assert!(harness.services.catalog().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn an_update_registers_changed_tags_and_a_canary_uses_its_canary_tags() {
        let harness = harness();
        let mut alloc = alloc_with_services(json!({}));
        if let Some(job) = alloc.job.as_mut().map(Arc::make_mut) {
            job.task_groups[0].services[0].canary_tags = vec!["canary".into()];
        }
        alloc.deployment_status = Some(AllocDeploymentStatus {
            canary: true,
            ..AllocDeploymentStatus::default()
        });
        let runner = start(&harness, alloc.clone());
        let group_id = format!("_nomad-task-{}{GROUP_ID_SUFFIX}", alloc.id);
        let task_id = format!("_nomad-task-{}-web-api-http", alloc.id);
        wait_catalog(&harness, |catalog| catalog.len() == 2).await;
        assert_eq!(harness.services.catalog()[&group_id].tags, vec!["canary"]);

        // Promoted, and the task's tags changed in place.
        let mut promoted = alloc.clone();
        promoted.deployment_status = Some(AllocDeploymentStatus::default());
        if let Some(job) = promoted.job.as_mut().map(Arc::make_mut) {
            job.task_groups[0].tasks[0].services[0].tags = vec!["v2".into()];
        }
        runner.update(promoted).await.unwrap();
        wait_catalog(&harness, |catalog| {
            catalog.get(&group_id).map(|r| r.tags.clone()) == Some(vec!["edge".into()])
                && catalog.get(&task_id).map(|r| r.tags.clone()) == Some(vec!["v2".into()])
        })
        .await;
        runner.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_task_without_services_sends_nothing() {
        let harness = harness();
        let alloc = alloc_with_tasks(
            "service",
            vec![fake_task("web", json!({}))],
            restart_policy(0, Duration::from_secs(1), Duration::from_secs(60), "fail"),
        );
        let runner = start(&harness, alloc);
        wait_until(&runner, |runner| {
            state_of(runner, "web").state == TASK_STATE_RUNNING
        })
        .await;
        runner.restart_task("web", "test").await.unwrap();
        runner.stop().await;
        runner.destroy().await.unwrap();
        assert_eq!(harness.services.calls(), Vec::<Call>::new());
    }
}

fn in_deployment(mut alloc: Allocation, health_check: &str, deadline: Duration) -> Allocation {
    let mut job = alloc.job.as_deref().cloned().unwrap();
    job.task_groups[0].update = Some(drover_structs::UpdateStrategy {
        max_parallel: 1,
        health_check: health_check.into(),
        min_healthy_time: DurationNs::from_secs(3),
        healthy_deadline: DurationNs::from_std(deadline),
        ..drover_structs::UpdateStrategy::default()
    });
    alloc.job = Some(Arc::new(job));
    alloc.deployment_id = "deploy-1".into();
    alloc.deployment_status = Some(drover_structs::AllocDeploymentStatus {
        canary: true,
        ..drover_structs::AllocDeploymentStatus::default()
    });
    alloc
}

fn last_reported_health(harness: &Harness) -> Option<drover_structs::AllocDeploymentStatus> {
    lock(&harness.sink.updates)
        .last()
        .and_then(|update| update.deployment_status.clone())
}

#[tokio::test(start_paused = true)]
async fn a_deployment_alloc_turns_healthy_after_min_healthy_time_and_reports_it() {
    let harness = harness();
    let alloc = in_deployment(
        alloc_with_tasks(
            "service",
            vec![fake_task("web", json!({}))],
            restart_policy(0, Duration::from_secs(1), Duration::from_secs(60), "fail"),
        ),
        "task_states",
        Duration::from_secs(60),
    );
    let runner = start(&harness, alloc);
    wait_until(&runner, |runner| {
        state_of(runner, "web").state == TASK_STATE_RUNNING
    })
    .await;
    let running_at = tokio::time::Instant::now();
    assert_eq!(runner.deployment_health(), None);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        runner.deployment_health(),
        None,
        "min_healthy_time not over"
    );
    wait_until(&runner, |runner| runner.deployment_health().is_some()).await;
    assert!(running_at.elapsed() >= Duration::from_secs(3));
    assert!(running_at.elapsed() < Duration::from_secs(4));
    let health = runner.deployment_health().unwrap();
    assert_eq!(health.healthy, Some(true));
    assert!(health.canary, "the server's canary flag is kept");
    assert!(!health.timestamp.is_zero());
    assert_eq!(last_reported_health(&harness), Some(health.clone()));
    let persisted: Option<drover_structs::AllocDeploymentStatus> = harness
        .deps
        .task
        .state_db
        .get_deployment_status(runner.alloc_id())
        .unwrap();
    assert_eq!(persisted, Some(health.clone()));

    // A restored runner knows its health and does not watch again.
    runner.shutdown().await;
    let restored = AllocRunner::restore(harness.deps.clone(), runner.alloc_id())
        .unwrap()
        .unwrap();
    assert_eq!(restored.deployment_health(), Some(health));
}

#[tokio::test(start_paused = true)]
async fn a_deployment_alloc_whose_task_dies_is_unhealthy_at_once() {
    let harness = harness();
    let alloc = in_deployment(
        alloc_with_tasks(
            "service",
            vec![fake_task(
                "web",
                json!({"run_for": "500ms", "exit_code": 1}),
            )],
            restart_policy(0, Duration::from_secs(1), Duration::from_secs(60), "fail"),
        ),
        "task_states",
        Duration::from_secs(60),
    );
    let runner = start(&harness, alloc);
    wait_until(&runner, |runner| runner.deployment_health().is_some()).await;
    assert_eq!(runner.deployment_health().unwrap().healthy, Some(false));
    runner.wait_all_tasks_dead().await;
    assert_eq!(
        last_reported_health(&harness).and_then(|status| status.healthy),
        Some(false)
    );
    assert_eq!(
        count(&state_of(&runner, "web"), health::ALLOC_UNHEALTHY_EVENT),
        0,
        "the task's own events say why"
    );
}

#[tokio::test(start_paused = true)]
async fn a_task_not_running_by_the_healthy_deadline_is_unhealthy_with_the_reason() {
    let harness = harness();
    let alloc = in_deployment(
        alloc_with_tasks(
            "service",
            vec![fake_task(
                "web",
                json!({"start_error": "not yet", "start_error_recoverable": true}),
            )],
            restart_policy(
                100,
                Duration::from_secs(5),
                Duration::from_secs(3600),
                "delay",
            ),
        ),
        "task_states",
        Duration::from_secs(20),
    );
    let began = tokio::time::Instant::now();
    let runner = start(&harness, alloc);
    wait_until(&runner, |runner| runner.deployment_health().is_some()).await;
    assert!(began.elapsed() >= Duration::from_secs(20));
    assert_eq!(runner.deployment_health().unwrap().healthy, Some(false));
    wait_until(&runner, |runner| {
        count(&state_of(runner, "web"), health::ALLOC_UNHEALTHY_EVENT) == 1
    })
    .await;
    let state = state_of(&runner, "web");
    let event = events_of(&state, health::ALLOC_UNHEALTHY_EVENT)[0];
    assert_eq!(event.message, "Task not running by deadline");
    runner.destroy().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_new_deployment_clears_the_health_and_watches_again_and_manual_is_left_alone() {
    let harness = harness();
    let alloc = in_deployment(
        alloc_with_tasks(
            "service",
            vec![fake_task("web", json!({}))],
            restart_policy(0, Duration::from_secs(1), Duration::from_secs(60), "fail"),
        ),
        "task_states",
        Duration::from_secs(60),
    );
    let runner = start(&harness, alloc.clone());
    wait_until(&runner, |runner| runner.deployment_health().is_some()).await;

    let mut next = alloc.clone();
    next.deployment_id = "deploy-2".into();
    runner.update(next.clone()).await.unwrap();
    assert_eq!(runner.deployment_health(), None);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(runner.deployment_health(), None);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(runner.deployment_health().unwrap().healthy, Some(true));

    // health_check = "manual": the client does not decide.
    let mut manual = in_deployment(next, "manual", Duration::from_secs(60));
    manual.deployment_id = "deploy-3".into();
    runner.update(manual).await.unwrap();
    tokio::time::sleep(Duration::from_secs(120)).await;
    assert_eq!(runner.deployment_health(), None);
    runner.destroy().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn an_alloc_outside_a_deployment_gets_migration_health_and_batch_none() {
    let harness = harness();
    let service = alloc_with_tasks(
        "service",
        vec![fake_task("web", json!({}))],
        restart_policy(0, Duration::from_secs(1), Duration::from_secs(60), "fail"),
    );
    let runner = start(&harness, service);
    wait_until(&runner, |runner| {
        state_of(runner, "web").state == TASK_STATE_RUNNING
    })
    .await;
    tokio::time::sleep(Duration::from_secs(9)).await;
    assert_eq!(runner.deployment_health(), None, "migrate's 10 s not over");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(runner.deployment_health().unwrap().healthy, Some(true));
    runner.destroy().await.unwrap();

    let batch = alloc_with_tasks(
        "batch",
        vec![fake_task("job", json!({}))],
        restart_policy(0, Duration::from_secs(1), Duration::from_secs(60), "fail"),
    );
    let runner = start(&harness, batch);
    tokio::time::sleep(Duration::from_secs(600)).await;
    assert_eq!(runner.deployment_health(), None);
    runner.destroy().await.unwrap();
}

/// A replacement for `previous` (same job, a new ID, `PreviousAllocation` set).
fn replacement_of(previous: &Allocation) -> Allocation {
    Allocation {
        id: uuid::Uuid::new_v4().to_string(),
        previous_allocation: previous.id.clone(),
        ..previous.clone()
    }
}

#[tokio::test(start_paused = true)]
async fn a_replacement_starts_only_once_the_local_previous_alloc_is_terminal() {
    let harness = harness();
    let task = fake_task("web", json!({}));
    let policy = restart_policy(0, Duration::from_secs(1), Duration::from_secs(60), "fail");
    let old_alloc = alloc_with_tasks("service", vec![task.clone()], policy.clone());
    let new_alloc = replacement_of(&old_alloc);
    let old = start(&harness, old_alloc);
    wait_until(&old, |runner| {
        state_of(runner, "web").state == TASK_STATE_RUNNING
    })
    .await;

    let new = start(&harness, new_alloc);
    // Long past any start delay, the replacement is pending and its task never started.
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(new.status().client_status, "pending");
    assert_eq!(harness.driver.log().starts.len(), 1);
    assert_eq!(count(&state_of(&new, "web"), "Started"), 0);

    old.stop().await;
    wait_until(&new, |runner| {
        state_of(runner, "web").state == TASK_STATE_RUNNING
    })
    .await;
    let old_finished = state_of(&old, "web").finished_at;
    let new_started = state_of(&new, "web").started_at;
    assert!(
        new_started >= old_finished,
        "started {new_started:?} before the old task finished {old_finished:?}"
    );
    assert_eq!(harness.driver.log().starts.len(), 2);
    new.stop().await;
}

#[tokio::test(start_paused = true)]
async fn stopping_a_waiting_replacement_ends_the_wait_and_runs_nothing() {
    let harness = harness();
    let policy = restart_policy(0, Duration::from_secs(1), Duration::from_secs(60), "fail");
    let tasks = vec![
        fake_task("web", json!({})),
        with_lifecycle(
            fake_task("post", json!({"run_for": "1s"})),
            "poststop",
            false,
        ),
    ];
    let old_alloc = alloc_with_tasks("service", tasks, policy);
    let new_alloc = replacement_of(&old_alloc);
    let old = start(&harness, old_alloc);
    wait_until(&old, |runner| {
        state_of(runner, "web").state == TASK_STATE_RUNNING
    })
    .await;
    let new = start(&harness, new_alloc);
    tokio::time::sleep(Duration::from_secs(5)).await;
    // The stop returns although the previous allocation still runs.
    tokio::time::timeout(Duration::from_secs(60), new.stop())
        .await
        .expect("the stop of a waiting replacement returned");
    assert!(new.all_tasks_dead());
    for task in ["web", "post"] {
        assert_eq!(count(&state_of(&new, task), "Started"), 0, "{task}");
    }
    // Only the old allocation's main task ever started.
    assert_eq!(harness.driver.log().starts.len(), 1);
    old.stop().await;
}

#[derive(Debug, Default)]
struct ScriptedServers {
    allocs: Mutex<std::collections::HashMap<String, Allocation>>,
    reads: std::sync::atomic::AtomicUsize,
}

impl upstream::AllocReader for ScriptedServers {
    fn read_alloc<'a>(&'a self, alloc_id: &'a str) -> upstream::ReadAllocFuture<'a> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        let alloc = lock(&self.allocs).get(alloc_id).cloned();
        Box::pin(async move { Ok(alloc) })
    }
}

#[tokio::test(start_paused = true)]
async fn a_replacement_of_a_remote_alloc_asks_the_servers_until_it_is_terminal() {
    let mut harness = harness();
    let servers = Arc::new(ScriptedServers::default());
    harness.deps.upstream.remote = servers.clone();
    let policy = restart_policy(0, Duration::from_secs(1), Duration::from_secs(60), "fail");
    let mut old_alloc = alloc_with_tasks("service", vec![fake_task("web", json!({}))], policy);
    old_alloc.node_id = "node-2".into();
    old_alloc.client_status = ALLOC_CLIENT_STATUS_RUNNING.into();
    lock(&servers.allocs).insert(old_alloc.id.clone(), old_alloc.clone());
    let new = start(&harness, replacement_of(&old_alloc));
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(harness.driver.log().starts.len(), 0);
    assert!(servers.reads.load(Ordering::SeqCst) >= 5);

    lock(&servers.allocs)
        .get_mut(&old_alloc.id)
        .unwrap()
        .client_status = ALLOC_CLIENT_STATUS_COMPLETE.into();
    wait_until(&new, |runner| {
        state_of(runner, "web").state == TASK_STATE_RUNNING
    })
    .await;
    new.stop().await;

    // An allocation the servers do not know (collected) is not waited for.
    let gone = start(&harness, replacement_of(&new.alloc()));
    let mut unknown = (*gone.alloc()).clone();
    unknown.id = uuid::Uuid::new_v4().to_string();
    unknown.previous_allocation = "never-heard-of".into();
    let fresh = start(&harness, unknown);
    wait_until(&fresh, |runner| {
        state_of(runner, "web").state == TASK_STATE_RUNNING
    })
    .await;
    wait_until(&gone, |runner| {
        state_of(runner, "web").state == TASK_STATE_RUNNING
    })
    .await;
    gone.stop().await;
    fresh.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_restored_replacement_waits_again_only_if_nothing_had_started() {
    let harness = harness();
    // The servers would say the previous allocation still runs: only a runner that had not
    // started would wait on it.
    let policy = restart_policy(0, Duration::from_secs(1), Duration::from_secs(60), "fail");
    let old_alloc = alloc_with_tasks("service", vec![fake_task("web", json!({}))], policy);
    let new_alloc = replacement_of(&old_alloc);
    let new_id = new_alloc.id.clone();
    let old = start(&harness, old_alloc);
    wait_until(&old, |runner| {
        state_of(runner, "web").state == TASK_STATE_RUNNING
    })
    .await;
    let new = start(&harness, new_alloc);
    tokio::time::sleep(Duration::from_secs(5)).await;
    // Agent restart while waiting: the restored runner waits again.
    new.shutdown().await;
    let restored = AllocRunner::restore(harness.deps.clone(), &new_id)
        .unwrap()
        .unwrap();
    restored.run();
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(harness.driver.log().starts.len(), 1);
    old.stop().await;
    wait_until(&restored, |runner| {
        state_of(runner, "web").state == TASK_STATE_RUNNING
    })
    .await;

    // Agent restart once its task runs: the restored runner re-attaches without waiting,
    // though its previous allocation's runner is gone from this node.
    restored.shutdown().await;
    let mut still_running = (*old.alloc()).clone();
    still_running.client_status = ALLOC_CLIENT_STATUS_RUNNING.into();
    old.destroy().await.unwrap();
    let servers = Arc::new(ScriptedServers::default());
    lock(&servers.allocs).insert(still_running.id.clone(), still_running);
    let mut deps = harness.deps.clone();
    deps.upstream.remote = servers;
    let again = AllocRunner::restore(deps, &new_id).unwrap().unwrap();
    again.run();
    wait_until(&again, |runner| {
        runner.status().client_status == ALLOC_CLIENT_STATUS_RUNNING
    })
    .await;
    assert_eq!(count(&state_of(&again, "web"), "Started"), 1);
    assert_eq!(harness.driver.log().starts.len(), 2);
    again.stop().await;
}

fn with_ephemeral_disk(mut alloc: Allocation, sticky: bool) -> Allocation {
    let mut job = drover_structs::Job::clone(alloc.job.as_deref().unwrap());
    job.task_groups[0].ephemeral_disk = Some(drover_structs::EphemeralDisk {
        sticky,
        size_mb: 10,
        migrate: false,
    });
    alloc.job = Some(Arc::new(job));
    alloc
}

#[tokio::test(start_paused = true)]
async fn a_sticky_replacement_on_the_same_node_takes_the_previous_data_before_starting() {
    for sticky in [true, false] {
        let harness = harness();
        let policy = restart_policy(0, Duration::from_secs(1), Duration::from_secs(60), "fail");
        let old_alloc = with_ephemeral_disk(
            alloc_with_tasks("service", vec![fake_task("web", json!({}))], policy),
            sticky,
        );
        let new_alloc = replacement_of(&old_alloc);
        let old = start(&harness, old_alloc);
        wait_until(&old, |runner| {
            state_of(runner, "web").state == TASK_STATE_RUNNING
        })
        .await;
        let old_dirs = old.alloc_dir().clone();
        std::fs::write(old_dirs.shared_data_dir.join("db"), "rows").unwrap();
        let old_local = old_dirs.task_dir("web").unwrap().local_dir;
        std::fs::write(old_local.join("cache"), "warm").unwrap();

        let new = start(&harness, new_alloc);
        old.stop().await;
        wait_until(&new, |runner| {
            state_of(runner, "web").state == TASK_STATE_RUNNING
        })
        .await;
        let new_dirs = new.alloc_dir().clone();
        let new_local = new_dirs.task_dir("web").unwrap().local_dir;
        let data = std::fs::read_to_string(new_dirs.shared_data_dir.join("db")).ok();
        let cache = std::fs::read_to_string(new_local.join("cache")).ok();
        if sticky {
            assert_eq!(data.as_deref(), Some("rows"));
            assert_eq!(cache.as_deref(), Some("warm"));
            assert!(
                !old_dirs.shared_data_dir.join("db").exists(),
                "moved, not copied"
            );
        } else {
            assert_eq!((data, cache), (None, None));
            assert!(old_dirs.shared_data_dir.join("db").exists());
        }
        new.stop().await;
    }
}

/// A batch allocation whose group allows it `limit` of running, created now (on the harness's
/// clock), with a main task that runs for an hour and a poststop task.
fn time_limited_alloc(harness: &Harness, limit: Duration) -> Allocation {
    let tasks = vec![
        fake_task("main", json!({"run_for": "1h"})),
        with_lifecycle(
            fake_task("post", json!({"run_for": "1s"})),
            "poststop",
            false,
        ),
    ];
    let mut alloc = alloc_with_tasks(
        "batch",
        tasks,
        restart_policy(0, Duration::from_secs(1), Duration::from_secs(60), "fail"),
    );
    alloc.create_time = harness.deps.task.clock.now_unix_nanos();
    let mut job = (**alloc.job.as_ref().unwrap()).clone();
    job.task_groups[0].max_run_duration = Some(DurationNs::from_std(limit));
    alloc.job = Some(Arc::new(job));
    alloc
}

fn timed_out(runner: &AllocRunner) -> bool {
    let status = runner.status();
    status.client_status == ALLOC_CLIENT_STATUS_COMPLETE
        && status.client_description == drover_structs::ALLOC_TIMEOUT_REASON_MAX_RUN_DURATION
}

#[tokio::test(start_paused = true)]
async fn a_batch_alloc_running_past_its_max_run_duration_is_killed_and_complete() {
    let harness = harness();
    let alloc = time_limited_alloc(&harness, Duration::from_secs(10));
    let deadline = alloc.create_time + 10_000_000_000;
    let runner = start(&harness, alloc);
    wait_until(&runner, |runner| {
        state_of(runner, "main").state == TASK_STATE_RUNNING
    })
    .await;
    assert_eq!(runner.status().client_status, ALLOC_CLIENT_STATUS_RUNNING);

    wait_until(&runner, timed_out).await;
    runner.wait_all_tasks_dead().await;
    assert!(timed_out(&runner), "{:?}", runner.status());
    let main = state_of(&runner, "main");
    assert!(!main.failed);
    let killing = events_of(&main, "Killing");
    assert_eq!(killing.len(), 1, "{:?}", event_types(&main));
    assert!(killing[0].time >= deadline, "killed before the deadline");
    assert!(killing[0].time < deadline + 1_000_000_000);
    assert_eq!(
        killing[0].display_message,
        drover_structs::ALLOC_TIMEOUT_REASON_MAX_RUN_DURATION
    );
    // The poststop task never ran.
    let post = state_of(&runner, "post");
    assert_eq!(count(&post, "Started"), 0, "{:?}", event_types(&post));
    assert!(harness.driver.live_pids().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_restored_runner_keeps_the_max_run_duration_deadline_of_the_first() {
    let harness = harness();
    let alloc = time_limited_alloc(&harness, Duration::from_secs(10));
    let alloc_id = alloc.id.clone();
    let first = start(&harness, alloc);
    wait_until(&first, |runner| {
        state_of(runner, "main").state == TASK_STATE_RUNNING
    })
    .await;
    // The agent is down from 4s to 30s: its restart does not reset the deadline.
    tokio::time::sleep(Duration::from_secs(4)).await;
    first.shutdown().await;
    tokio::time::sleep(Duration::from_secs(26)).await;
    assert_eq!(harness.driver.live_pids().len(), 1);

    let restored_at = harness.deps.task.clock.now_unix_nanos();
    let second = AllocRunner::restore(harness.deps.clone(), &alloc_id)
        .unwrap()
        .unwrap();
    second.run();
    wait_until(&second, timed_out).await;
    second.wait_all_tasks_dead().await;
    let main = state_of(&second, "main");
    assert_eq!(count(&main, "Started"), 1, "{:?}", event_types(&main));
    let killing = events_of(&main, "Killing");
    assert_eq!(killing.len(), 1);
    assert!(
        killing[0].time < restored_at + 1_000_000_000,
        "not enforced at once"
    );
    second.shutdown().await;

    // The timeout is persisted: a third runner reports it and starts nothing.
    let third = AllocRunner::restore(harness.deps.clone(), &alloc_id)
        .unwrap()
        .unwrap();
    third.run();
    wait_until(&third, timed_out).await;
    assert_eq!(harness.driver.log().starts.len(), 1);
    third.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_batch_alloc_done_before_its_max_run_duration_completes_as_usual() {
    let harness = harness();
    let mut alloc = time_limited_alloc(&harness, Duration::from_secs(10));
    let mut job = (**alloc.job.as_ref().unwrap()).clone();
    job.task_groups[0].tasks[0].config = json!({"run_for": "2s"}).as_object().cloned().unwrap();
    alloc.job = Some(Arc::new(job));
    let runner = start(&harness, alloc);
    runner.wait_all_tasks_dead().await;
    tokio::time::sleep(Duration::from_secs(20)).await;
    let status = runner.status();
    assert_eq!(status.client_status, ALLOC_CLIENT_STATUS_COMPLETE);
    assert_eq!(status.client_description, "All tasks have completed");
    assert_eq!(count(&state_of(&runner, "main"), "Killing"), 0);
    assert_eq!(count(&state_of(&runner, "post"), "Started"), 1);
}
