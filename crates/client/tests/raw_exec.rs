//! End-to-end: alloc runners driving real processes through `raw_exec` under `drover-shim`.
//!
//! Needs the `drover-shim` binary (`DROVER_SHIM_PATH`, or `target/<profile>/drover-shim`; built
//! on demand with cargo) and root for task cgroups, as CI has. Waits are bounded polls with
//! generous limits; durations are asserted with wide margins.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use drover_client::allocrunner::{
    AllocClientUpdate, AllocRunner, AllocRunnerDeps, AllocStatusSink,
};
use drover_client::clock::SystemClock;
use drover_client::config::ClientConfig;
use drover_client::node_sim::InMemoryServer;
use drover_client::services::ConnRegistrar;
use drover_client::state_db::StateDb;
use drover_client::taskrunner::TaskRunnerDeps;
use drover_client::taskrunner::drivers::default_driver_catalog;
use drover_structs::{Allocation, DurationNs, Job, RestartPolicy, Task, TaskGroup, TaskState};
use serde_json::json;

#[derive(Debug, Default)]
struct CollectingSink {
    updates: Mutex<Vec<AllocClientUpdate>>,
}

impl AllocStatusSink for CollectingSink {
    fn alloc_updated(&self, update: AllocClientUpdate) {
        if let Ok(mut updates) = self.updates.lock() {
            updates.push(update);
        }
    }
}

fn shim_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("DROVER_SHIM_PATH") {
        return PathBuf::from(path);
    }
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| manifest.join("../../target"));
    let binary = target.join("debug").join("drover-shim");
    if !binary.is_file() {
        let status = std::process::Command::new(env!("CARGO"))
            .args(["build", "-p", "drover", "--bin", "drover-shim"])
            .current_dir(manifest)
            .status()
            .expect("cargo build of drover-shim runs");
        assert!(status.success(), "building drover-shim failed");
    }
    assert!(binary.is_file(), "no drover-shim at {}", binary.display());
    binary
}

struct Agent {
    deps: AllocRunnerDeps,
    data_dir: tempfile::TempDir,
    /// The catalog the runners register services in.
    server: Arc<InMemoryServer>,
}

fn agent() -> Agent {
    let data_dir = tempfile::tempdir().unwrap();
    let config = ClientConfig::new(data_dir.path());
    let state_db = StateDb::open(&config.state_db_path()).unwrap();
    let raw_exec = drover_driver::raw_exec::RawExecConfig {
        shim_binary: Some(shim_binary()),
        ..drover_driver::raw_exec::RawExecConfig::default()
    };
    let server = Arc::new(InMemoryServer::new(Duration::from_secs(30)));
    let deps = AllocRunnerDeps {
        task: TaskRunnerDeps {
            config: Arc::new(config),
            clock: Arc::new(SystemClock),
            state_db: Arc::new(state_db),
            drivers: Arc::new(default_driver_catalog(raw_exec)),
            node: Arc::new(drover_structs::Node {
                id: "node-1".into(),
                name: "box".into(),
                datacenter: "dc1".into(),
                ..drover_structs::Node::default()
            }),
            region: "global".into(),
            jitter_seed: 1,
            services: Arc::new(ConnRegistrar::new(server.clone())),
            identities: Arc::new(drover_client::identity::NoServersSigner),
            task_api: None,
            task_counters: None,
        },
        sink: Arc::new(CollectingSink::default()),
        upstream: drover_client::allocrunner::upstream::UpstreamAllocs::default(),
    };
    Agent {
        deps,
        data_dir,
        server,
    }
}

fn shell_task(name: &str, script: &str) -> Task {
    Task {
        name: name.into(),
        driver: "raw_exec".into(),
        config: json!({"command": "/bin/sh", "args": ["-c", script]})
            .as_object()
            .cloned()
            .unwrap(),
        kill_timeout: DurationNs::from_secs(5),
        ..Task::default()
    }
}

fn alloc(job_type: &str, tasks: Vec<Task>, restart: RestartPolicy) -> Allocation {
    Allocation {
        id: uuid::Uuid::new_v4().to_string(),
        name: "e2e.group[0]".into(),
        namespace: "default".into(),
        job_id: "e2e".into(),
        task_group: "group".into(),
        desired_status: "run".into(),
        job: Some(std::sync::Arc::new(Job {
            id: "e2e".into(),
            name: "e2e".into(),
            r#type: job_type.into(),
            region: "global".into(),
            task_groups: vec![TaskGroup {
                name: "group".into(),
                tasks,
                restart_policy: Some(restart),
                ..TaskGroup::default()
            }],
            ..Job::default()
        })),
        ..Allocation::default()
    }
}

fn policy(attempts: i64, delay: Duration, mode: &str) -> RestartPolicy {
    RestartPolicy {
        attempts,
        delay: DurationNs::from_std(delay),
        interval: DurationNs::from_secs(1800),
        mode: mode.into(),
        render_templates: false,
        ..RestartPolicy::default()
    }
}

fn count(state: &TaskState, event_type: &str) -> usize {
    state
        .events
        .iter()
        .filter(|event| event.r#type == event_type)
        .count()
}

async fn wait_for(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn process_alive(pid: i32) -> bool {
    // A zombie is dead for our purposes.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

fn task_pid(runner: &AllocRunner, task: &str) -> Option<i32> {
    let local = runner.task_runner(task)?.local_state();
    local
        .handle?
        .handle
        .get("shim")?
        .get("task_pid")?
        .as_i64()
        .and_then(|pid| i32::try_from(pid).ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_task_with_attempts_two_starts_three_times_and_fails() {
    let agent = agent();
    let task = shell_task("fail", "echo attempt; exit 1");
    let runner = AllocRunner::new(
        agent.deps.clone(),
        alloc(
            "service",
            vec![task],
            policy(2, Duration::from_millis(200), "fail"),
        ),
    )
    .unwrap();
    runner.run();
    tokio::time::timeout(Duration::from_secs(60), runner.wait_all_tasks_dead())
        .await
        .expect("task dies for good");
    let state = runner.task_states().remove("fail").unwrap();
    assert_eq!(count(&state, "Started"), 3);
    assert_eq!(count(&state, "Restarting"), 2);
    assert_eq!(count(&state, "Not Restarting"), 1);
    let terminated: Vec<i64> = state
        .events
        .iter()
        .filter(|event| event.r#type == "Terminated")
        .map(|event| event.exit_code)
        .collect();
    // Ten events are kept, the first three pinned: the oldest "Terminated" is the one that
    // rolled out of the list.
    assert_eq!(state.events.len(), 10);
    assert_eq!(terminated.len(), 2);
    assert!(terminated.iter().all(|code| *code == 1), "{terminated:?}");
    assert_eq!(runner.status().client_status, "failed");
    let stdout = runner.alloc_dir().logs_dir.join("fail.stdout.0");
    let logged = std::fs::read_to_string(&stdout).unwrap();
    assert!(logged.contains("attempt"), "{logged:?}");
    runner.destroy().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tree_ignoring_sigterm_is_killed_after_kill_timeout() {
    let agent = agent();
    let pids_file = agent.data_dir.path().join("pids");
    let script = format!(
        "trap '' TERM; sleep 1000 & echo $! >> {pids}; sh -c 'sleep 1000' & echo $! >> {pids}; echo $$ >> {pids}; wait",
        pids = pids_file.display()
    );
    let mut task = shell_task("stubborn", &script);
    task.kill_signal = "SIGTERM".into();
    task.kill_timeout = DurationNs::from_secs(2);
    let runner = AllocRunner::new(
        agent.deps.clone(),
        alloc(
            "service",
            vec![task],
            policy(0, Duration::from_secs(1), "fail"),
        ),
    )
    .unwrap();
    runner.run();
    wait_for("three pids", || {
        std::fs::read_to_string(&pids_file)
            .map(|text| text.lines().count() >= 3)
            .unwrap_or(false)
    })
    .await;
    let pids: Vec<i32> = std::fs::read_to_string(&pids_file)
        .unwrap()
        .lines()
        .filter_map(|line| line.trim().parse().ok())
        .collect();
    assert!(pids.iter().all(|pid| process_alive(*pid)));
    // The tree can be up before the runner has recorded the task as started; stop it only
    // once it has, so the events read Started … Killing → Terminated → Killed.
    wait_for("the task to be running", || {
        runner
            .task_states()
            .get("stubborn")
            .is_some_and(|state| state.state == "running")
    })
    .await;

    let began = Instant::now();
    tokio::time::timeout(Duration::from_secs(60), runner.stop())
        .await
        .expect("stop finishes");
    let took = began.elapsed();
    assert!(
        took >= Duration::from_millis(1900) && took < Duration::from_secs(15),
        "{took:?}"
    );
    for pid in &pids {
        assert!(!process_alive(*pid), "process {pid} survived the kill");
    }
    let state = runner.task_states().remove("stubborn").unwrap();
    let kinds: Vec<&str> = state
        .events
        .iter()
        .map(|event| event.r#type.as_str())
        .collect();
    assert_eq!(
        &kinds[kinds.len() - 3..],
        ["Killing", "Terminated", "Killed"]
    );
    let killing = state
        .events
        .iter()
        .find(|event| event.r#type == "Killing")
        .unwrap();
    assert_eq!(
        killing.display_message,
        "Sent interrupt. Waiting 2s before force killing"
    );
    runner.destroy().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restored_runner_reattaches_to_the_same_process() {
    let agent = agent();
    let mut task = shell_task("web", "echo $NOMAD_ALLOC_ID; exec sleep 1000");
    task.env = BTreeMap::from([("FOO".to_string(), "bar".to_string())]);
    let first_alloc = alloc(
        "service",
        vec![task],
        policy(2, Duration::from_secs(1), "fail"),
    );
    let alloc_id = first_alloc.id.clone();
    let first = AllocRunner::new(agent.deps.clone(), first_alloc).unwrap();
    first.run();
    wait_for("running", || first.status().client_status == "running").await;
    let pid = task_pid(&first, "web").expect("a task pid in the persisted handle");
    assert!(process_alive(pid));

    // Agent shutdown: the task keeps running.
    first.shutdown().await;
    assert!(process_alive(pid));

    let second = AllocRunner::restore(agent.deps.clone(), &alloc_id)
        .unwrap()
        .expect("alloc record restored");
    second.run();
    wait_for("running after restore", || {
        second.status().client_status == "running"
    })
    .await;
    let state = second.task_states().remove("web").unwrap();
    assert_eq!(count(&state, "Started"), 1, "{:?}", state.events);
    assert_eq!(task_pid(&second, "web"), Some(pid));
    assert!(process_alive(pid));
    let logged = std::fs::read_to_string(second.alloc_dir().logs_dir.join("web.stdout.0")).unwrap();
    assert_eq!(logged.trim(), alloc_id);

    tokio::time::timeout(Duration::from_secs(60), second.stop())
        .await
        .expect("stop finishes");
    assert!(!process_alive(pid));
    second.destroy().await.unwrap();
    assert!(!second.alloc_dir().root.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_that_exits_while_the_agent_is_down_is_reported_with_its_exit_code() {
    let agent = agent();
    let flag = agent.data_dir.path().join("go");
    let script = format!(
        "while [ ! -e {flag} ]; do sleep 0.05; done; exit 3",
        flag = flag.display()
    );
    let first_alloc = alloc(
        "batch",
        vec![shell_task("job", &script)],
        policy(0, Duration::from_secs(1), "fail"),
    );
    let alloc_id = first_alloc.id.clone();
    let first = AllocRunner::new(agent.deps.clone(), first_alloc).unwrap();
    first.run();
    wait_for("running", || first.status().client_status == "running").await;
    let pid = task_pid(&first, "job").unwrap();
    first.shutdown().await;
    std::fs::write(&flag, b"").unwrap();
    wait_for("the task to exit", || !process_alive(pid)).await;

    let second = AllocRunner::restore(agent.deps.clone(), &alloc_id)
        .unwrap()
        .unwrap();
    second.run();
    tokio::time::timeout(Duration::from_secs(60), second.wait_all_tasks_dead())
        .await
        .expect("task reported dead");
    let state = second.task_states().remove("job").unwrap();
    let terminated: Vec<i64> = state
        .events
        .iter()
        .filter(|event| event.r#type == "Terminated")
        .map(|event| event.exit_code)
        .collect();
    assert_eq!(terminated, vec![3]);
    assert_eq!(count(&state, "Started"), 1);
    assert_eq!(second.status().client_status, "failed");
    second.destroy().await.unwrap();
    assert!(!second.alloc_dir().root.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trapped_signal_reaches_the_task() {
    let agent = agent();
    let task = shell_task(
        "trapper",
        "trap 'echo got-usr1' USR1; echo ready; while true; do sleep 0.1; done",
    );
    let runner = AllocRunner::new(
        agent.deps.clone(),
        alloc(
            "service",
            vec![task],
            policy(0, Duration::from_secs(1), "fail"),
        ),
    )
    .unwrap();
    runner.run();
    let stdout = runner.alloc_dir().logs_dir.join("trapper.stdout.0");
    wait_for("the trap to be set", || {
        std::fs::read_to_string(&stdout)
            .map(|text| text.contains("ready"))
            .unwrap_or(false)
    })
    .await;
    // The task can print before its runner has recorded it as running; a signal before that
    // is refused (TaskNotRunning), so wait for the state too.
    wait_for("the task to be running", || {
        runner
            .task_states()
            .get("trapper")
            .is_some_and(|state| state.state == "running")
    })
    .await;
    runner.signal(Some("trapper"), "SIGUSR1").await.unwrap();
    wait_for("the trap to fire", || {
        std::fs::read_to_string(&stdout)
            .map(|text| text.contains("got-usr1"))
            .unwrap_or(false)
    })
    .await;
    assert!(runner.signal(Some("trapper"), "SIGBOGUS").await.is_err());
    let usage = runner.stats(Some("trapper")).await.unwrap();
    assert!(!usage["trapper"].pids.is_empty(), "{usage:?}");
    let state = runner.task_states().remove("trapper").unwrap();
    assert_eq!(count(&state, "Signaling"), 1);
    assert_eq!(state.state, "running");
    tokio::time::timeout(Duration::from_secs(60), runner.stop())
        .await
        .expect("stop finishes");
    runner.destroy().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_shim_is_reclaimed_and_the_task_restarted_by_policy() {
    let agent = agent();
    let first_alloc = alloc(
        "service",
        vec![shell_task("web", "exec sleep 1000")],
        policy(2, Duration::from_millis(100), "fail"),
    );
    let alloc_id = first_alloc.id.clone();
    let first = AllocRunner::new(agent.deps.clone(), first_alloc).unwrap();
    first.run();
    wait_for("running", || first.status().client_status == "running").await;
    let old_pid = task_pid(&first, "web").unwrap();
    let shim_pid = first
        .task_runner("web")
        .unwrap()
        .local_state()
        .handle
        .unwrap()
        .handle["shim"]["shim_pid"]
        .as_i64()
        .unwrap();
    first.shutdown().await;
    // The shim dies with the agent down (the task itself stays until reclaimed).
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(shim_pid).unwrap()),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    wait_for("the shim to die", || {
        !process_alive(i32::try_from(shim_pid).unwrap())
    })
    .await;

    let second = AllocRunner::restore(agent.deps.clone(), &alloc_id)
        .unwrap()
        .unwrap();
    second.run();
    wait_for("a second start", || {
        second
            .task_states()
            .get("web")
            .is_some_and(|state| count(state, "Started") == 2 && state.state == "running")
    })
    .await;
    let state = second.task_states().remove("web").unwrap();
    assert_eq!(
        count(&state, "Failed Restoring Task"),
        1,
        "{:?}",
        state.events
    );
    assert_eq!(count(&state, "Restarting"), 1);
    assert!(
        !process_alive(old_pid),
        "the orphaned task was not reclaimed"
    );
    let new_pid = task_pid(&second, "web").unwrap();
    assert_ne!(new_pid, old_pid);
    tokio::time::timeout(Duration::from_secs(60), second.stop())
        .await
        .expect("stop finishes");
    assert!(!process_alive(new_pid));
    second.destroy().await.unwrap();
}

fn lifecycle(mut task: Task, hook: &str, sidecar: bool) -> Task {
    task.lifecycle = Some(drover_structs::TaskLifecycleConfig {
        hook: hook.into(),
        sidecar,
    });
    task
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lifecycle_tasks_run_in_order_and_leave_nothing_running() {
    let agent = agent();
    let record = |name: &str, then: &str| {
        format!("echo \"{name} $$\" >> \"$NOMAD_ALLOC_DIR/data/order\"; {then}")
    };
    let tasks = vec![
        lifecycle(
            shell_task("post", &record("post", "true")),
            "poststop",
            false,
        ),
        lifecycle(
            shell_task("after", &record("after", "sleep 0.2")),
            "poststart",
            false,
        ),
        shell_task("main", &record("main", "sleep 1")),
        lifecycle(
            shell_task("side", &record("side", "exec sleep 1000")),
            "prestart",
            true,
        ),
        lifecycle(
            shell_task("init", &record("init", "sleep 0.3")),
            "prestart",
            false,
        ),
    ];
    let runner = AllocRunner::new(
        agent.deps.clone(),
        alloc("batch", tasks, policy(0, Duration::from_secs(1), "fail")),
    )
    .unwrap();
    runner.run();
    tokio::time::timeout(Duration::from_secs(60), runner.wait_all_tasks_dead())
        .await
        .expect("the whole lifecycle finishes");

    let order = std::fs::read_to_string(runner.alloc_dir().shared_data_dir.join("order")).unwrap();
    let lines: Vec<(&str, i32)> = order
        .lines()
        .filter_map(|line| {
            let (name, pid) = line.split_once(' ')?;
            Some((name, pid.parse().ok()?))
        })
        .collect();
    let names: Vec<&str> = lines.iter().map(|(name, _)| *name).collect();
    assert_eq!(names.len(), 5, "{order}");
    let position = |task: &str| names.iter().position(|name| *name == task).unwrap();
    assert!(position("init") < position("main"), "{names:?}");
    assert!(position("side") < position("main"), "{names:?}");
    assert!(position("main") < position("after"), "{names:?}");
    assert_eq!(position("post"), 4, "{names:?}");
    for (name, pid) in &lines {
        assert!(!process_alive(*pid), "{name} ({pid}) is still running");
    }
    let states = runner.task_states();
    for (name, state) in &states {
        assert!(!state.failed, "{name}: {:?}", state.events);
        assert_eq!(count(state, "Started"), 1, "{name}");
    }
    assert_eq!(count(&states["side"], "Main Tasks Dead"), 1);
    // The allocation's status follows its tasks' phases on the runner's own task: wait for it.
    let mut status = runner.subscribe_status();
    tokio::time::timeout(
        Duration::from_secs(10),
        status.wait_for(|update| update.client_status != "running"),
    )
    .await
    .expect("the allocation's status follows its dead tasks")
    .expect("the runner is alive");
    assert_eq!(runner.status().client_status, "complete");

    // `alloc restart -all-tasks` on the finished alloc runs the lifecycle again, in order.
    runner
        .restart_all_tasks("User requested restart")
        .await
        .unwrap();
    let order_file = runner.alloc_dir().shared_data_dir.join("order");
    wait_for("the second lifecycle", || {
        runner.all_tasks_dead()
            && std::fs::read_to_string(&order_file)
                .map(|text| text.lines().count() == 10)
                .unwrap_or(false)
    })
    .await;
    let again = std::fs::read_to_string(&order_file).unwrap();
    let second: Vec<&str> = again
        .lines()
        .skip(5)
        .filter_map(|line| line.split_once(' ').map(|(name, _)| name))
        .collect();
    let position = |task: &str| second.iter().position(|name| *name == task).unwrap();
    assert!(position("init") < position("main"), "{second:?}");
    assert!(position("side") < position("main"), "{second:?}");
    assert!(position("main") < position("after"), "{second:?}");
    assert_eq!(position("post"), 4, "{second:?}");
    for line in again.lines() {
        let pid: i32 = line.split_once(' ').unwrap().1.parse().unwrap();
        assert!(!process_alive(pid), "{line} is still running");
    }
    // As after the first run, the status follows the dead tasks on the runner's own task.
    tokio::time::timeout(
        Duration::from_secs(10),
        status.wait_for(|update| update.client_status == "complete"),
    )
    .await
    .expect("the allocation completes again after its tasks")
    .expect("the runner is alive");
    assert_eq!(runner.status().client_status, "complete");
    runner.destroy().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_whose_handle_was_never_recorded_is_reclaimed_before_the_next_start() {
    use drover_client::allocdir::AllocDir;
    use drover_client::taskrunner::driver::{LogRotation, TaskLaunchSpec};

    let agent = agent();
    let task = shell_task("web", "exec sleep 1000");
    let the_alloc = alloc(
        "service",
        vec![task],
        policy(0, Duration::from_secs(1), "fail"),
    );
    let config = agent.deps.task.config.clone();

    // What a crashed agent left: a task started by the driver, its handle never persisted.
    let alloc_dir = AllocDir::new(&config.alloc_root_dir(), &the_alloc.id).unwrap();
    alloc_dir.build().unwrap();
    let task_dir = alloc_dir.task_dir("web").unwrap();
    task_dir.build(false, 0).unwrap();
    let driver = agent.deps.task.drivers.driver("raw_exec").unwrap();
    let orphan = driver
        .start(TaskLaunchSpec {
            alloc_id: the_alloc.id.clone(),
            task_name: "web".into(),
            driver_name: "raw_exec".into(),
            config: json!({"command": "/bin/sleep", "args": ["1000"]})
                .as_object()
                .cloned()
                .unwrap(),
            env: BTreeMap::new(),
            user: String::new(),
            task_dir: task_dir.clone(),
            supervisor_state_dir: config
                .client_state_dir()
                .join("tasks")
                .join(&the_alloc.id)
                .join("web")
                .join("0rphan00"),
            logs_dir: alloc_dir.logs_dir.clone(),
            log_rotation: LogRotation::default(),
            cpu_shares: 0,
            memory_mb: 0,
            memory_max_mb: 0,
            reserved_cores: Vec::new(),
            hostname: None,
            mounts: Vec::new(),
            task_network: None,
            network: None,
            events: Default::default(),
        })
        .await
        .unwrap();
    let orphan_pid = i32::try_from(orphan.pid.unwrap()).unwrap();
    let orphan_shim_pid =
        i32::try_from(orphan.handle.handle["shim"]["shim_pid"].as_i64().unwrap()).unwrap();
    assert!(process_alive(orphan_pid));
    assert!(process_alive(orphan_shim_pid));

    let runner = AllocRunner::new(agent.deps.clone(), the_alloc).unwrap();
    runner.run();
    wait_for("running", || runner.status().client_status == "running").await;
    wait_for("the orphan to be reclaimed", || {
        !process_alive(orphan_pid) && !process_alive(orphan_shim_pid)
    })
    .await;
    let pid = task_pid(&runner, "web").unwrap();
    assert_ne!(pid, orphan_pid);
    assert!(process_alive(pid));
    tokio::time::timeout(Duration::from_secs(60), runner.stop())
        .await
        .expect("stop finishes");
    assert!(!process_alive(pid));
    runner.destroy().await.unwrap();
}

/// The agent died between a shim's start and persisting its handle, and the allocation was
/// stopped before the next agent could start the task again: the unrecorded run must still be
/// reclaimed (it used to be reclaimed only before a start, so it lived on as an orphan while the
/// task was reported killed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unrecorded_run_of_a_stopped_alloc_is_reclaimed() {
    use drover_client::allocdir::AllocDir;
    use drover_client::taskrunner::driver::{LogRotation, TaskLaunchSpec};

    let agent = agent();
    let task = shell_task("web", "exec sleep 1000");
    let mut the_alloc = alloc(
        "service",
        vec![task],
        policy(0, Duration::from_secs(1), "fail"),
    );
    the_alloc.desired_status = "stop".into();
    let config = agent.deps.task.config.clone();

    let alloc_dir = AllocDir::new(&config.alloc_root_dir(), &the_alloc.id).unwrap();
    alloc_dir.build().unwrap();
    let task_dir = alloc_dir.task_dir("web").unwrap();
    task_dir.build(false, 0).unwrap();
    let driver = agent.deps.task.drivers.driver("raw_exec").unwrap();
    let orphan = driver
        .start(TaskLaunchSpec {
            alloc_id: the_alloc.id.clone(),
            task_name: "web".into(),
            driver_name: "raw_exec".into(),
            config: json!({"command": "/bin/sleep", "args": ["1000"]})
                .as_object()
                .cloned()
                .unwrap(),
            env: BTreeMap::new(),
            user: String::new(),
            task_dir: task_dir.clone(),
            supervisor_state_dir: config
                .client_state_dir()
                .join("tasks")
                .join(&the_alloc.id)
                .join("web")
                .join("0rphan01"),
            logs_dir: alloc_dir.logs_dir.clone(),
            log_rotation: LogRotation::default(),
            cpu_shares: 0,
            memory_mb: 0,
            memory_max_mb: 0,
            reserved_cores: Vec::new(),
            hostname: None,
            mounts: Vec::new(),
            task_network: None,
            network: None,
            events: Default::default(),
        })
        .await
        .unwrap();
    let orphan_pid = i32::try_from(orphan.pid.unwrap()).unwrap();
    let orphan_shim_pid =
        i32::try_from(orphan.handle.handle["shim"]["shim_pid"].as_i64().unwrap()).unwrap();
    assert!(process_alive(orphan_pid));

    let runner = AllocRunner::new(agent.deps.clone(), the_alloc).unwrap();
    runner.run();
    wait_for("complete", || runner.status().client_status == "complete").await;
    wait_for("the orphan to be reclaimed", || {
        !process_alive(orphan_pid) && !process_alive(orphan_shim_pid)
    })
    .await;
    let state = runner.task_states()["web"].clone();
    // Stopped on arrival: never started, the orphan reclaimed all the same.
    assert_eq!(count(&state, "Started"), 0, "{:?}", state.events);
    assert_eq!(state.state, "dead");
    assert_eq!(task_pid(&runner, "web"), None, "nothing of the task runs");
    runner.destroy().await.unwrap();
}

/// Crash-safety: the agent's runtime is torn down abruptly (every task of the runtime dropped
/// at whatever await point it was, as a `kill -9` would leave the persisted state) at random
/// moments while the task starts, restarts or is updated; each time a new runner restores
/// from the same state db. At no point do two copies of the task run.
#[test]
fn abrupt_agent_deaths_never_run_a_task_twice() {
    use rand::{Rng, SeedableRng};

    let agent = agent();
    let task = shell_task(
        "web",
        "echo $$ >> \"$NOMAD_ALLOC_DIR/data/pids\"; exec sleep 1000",
    );
    let the_alloc = alloc(
        "service",
        vec![task],
        policy(100, Duration::from_millis(50), "delay"),
    );
    let alloc_id = the_alloc.id.clone();
    let pids_file = agent
        .deps
        .task
        .config
        .alloc_root_dir()
        .join(&alloc_id)
        .join("alloc/data/pids");
    let live_pids = || -> Vec<i32> {
        std::fs::read_to_string(&pids_file)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| line.trim().parse().ok())
            .filter(|pid| process_alive(*pid))
            .collect()
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(20261121);

    for cycle in 0..12 {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let action: u8 = rng.gen_range(0..3);
        let lifetime = Duration::from_millis(rng.gen_range(0..300));
        let deps = agent.deps.clone();
        let alloc_copy = the_alloc.clone();
        let first = cycle == 0;
        runtime.block_on(async move {
            let runner = if first {
                AllocRunner::new(deps, alloc_copy.clone()).unwrap()
            } else {
                AllocRunner::restore(deps, &alloc_copy.id).unwrap().unwrap()
            };
            runner.run();
            let acting = runner.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(20)).await;
                match action {
                    1 => {
                        let _ = acting.restart_task("web", "chaos").await;
                    }
                    2 => {
                        let _ = acting.update(alloc_copy).await;
                    }
                    _ => {}
                }
            });
            tokio::time::sleep(lifetime).await;
        });
        runtime.shutdown_background();
        std::thread::sleep(Duration::from_millis(100));
        let live = live_pids();
        assert!(
            live.len() <= 1,
            "cycle {cycle}: two copies running: {live:?}"
        );
    }

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let deps = agent.deps.clone();
    runtime.block_on(async move {
        let runner = AllocRunner::restore(deps, &alloc_id).unwrap().unwrap();
        runner.run();
        wait_for("running after the last restore", || {
            runner.status().client_status == "running"
        })
        .await;
        let live = live_pids();
        assert_eq!(live.len(), 1, "{live:?}");
        assert_eq!(task_pid(&runner, "web"), Some(live[0]));
        tokio::time::timeout(Duration::from_secs(60), runner.stop())
            .await
            .expect("stop finishes");
        assert!(live_pids().is_empty());
        runner.destroy().await.unwrap();
    });
}

/// Whether an HTTP server answers `GET /` on `address` with a 200.
fn answers(address: &str) -> bool {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(address) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    if write!(stream, "GET / HTTP/1.0\r\n\r\n").is_err() {
        return false;
    }
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response.starts_with("HTTP/1.0 200")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_carry_the_real_address_and_leave_the_catalog_before_the_shutdown_delay() {
    let agent = agent();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut task = shell_task(
        "server",
        "exec python3 -m http.server $NOMAD_PORT_http --bind $NOMAD_IP_http",
    );
    task.services = vec![drover_structs::Service {
        name: "e2e-api".into(),
        port_label: "http".into(),
        ..drover_structs::Service::default()
    }];
    let mut alloc = alloc(
        "service",
        vec![task],
        policy(0, Duration::from_secs(1), "fail"),
    );
    let mut resources = drover_structs::AllocatedResources::default();
    resources
        .shared
        .ports
        .push(drover_structs::AllocatedPortMapping {
            label: "http".into(),
            value: i64::from(port),
            to: 0,
            host_ip: "127.0.0.1".into(),
        });
    alloc.allocated_resources = Some(resources);
    if let Some(job) = alloc.job.as_mut().map(Arc::make_mut) {
        let group = &mut job.task_groups[0];
        group.shutdown_delay = Some(DurationNs::from_secs(4));
        group.services = vec![drover_structs::Service {
            name: "e2e-front".into(),
            port_label: "http".into(),
            provider: "nomad".into(),
            ..drover_structs::Service::default()
        }];
    }
    let runner = AllocRunner::new(agent.deps.clone(), alloc).unwrap();
    runner.run();

    wait_for("both services in the catalog", || {
        agent.server.services().len() == 2
    })
    .await;
    for registration in agent.server.services().values() {
        assert_eq!(registration.address, "127.0.0.1");
        assert_eq!(registration.port, i64::from(port));
        assert_eq!(registration.alloc_id, runner.alloc_id());
    }
    let address = format!("127.0.0.1:{port}");
    wait_for("the task to answer on its service address", || {
        answers(&address)
    })
    .await;

    let began = Instant::now();
    let stopping = tokio::spawn({
        let runner = runner.clone();
        async move { runner.stop().await }
    });
    wait_for("the catalog to be empty", || {
        agent.server.services().is_empty()
    })
    .await;
    assert!(
        began.elapsed() < Duration::from_secs(4),
        "{:?}",
        began.elapsed()
    );
    assert!(answers(&address), "the task runs during the shutdown delay");
    stopping.await.unwrap();
    assert!(began.elapsed() >= Duration::from_secs(4));
    assert!(!answers(&address));
    runner.destroy().await.unwrap();
}
