//! The `raw_exec` driver and the real `drover-shim` binary, end to end: real processes, real
//! cgroups (as root), real files. Tests that need a cgroup filesystem say so and return early
//! when there is none or they are not root.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use drover_driver::conformance::{Scenario, run_conformance_suite};
use drover_driver::raw_exec::raw_exec_driver;
use drover_driver::shim_client::ShimClient;
use drover_driver::shim_engine::{RawExecConfig, ShimEngine, read_exit_status};
use drover_driver::{Driver, DriverError, LogSettings, TaskHandle, TaskLaunch};
use drover_shim::proto::process_start_time;

const SHIM: &str = env!("CARGO_BIN_EXE_drover-shim");

/// A scratch directory removed on drop (no tempfile dev-dependency in this crate).
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Self {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let path = std::env::temp_dir().join(format!(
            "dshim-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&path).unwrap();
        Self(path)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Whether this runs as root with a cgroup filesystem; otherwise says why the test did
/// nothing (or, under `CI=true`, fails it).
fn cgroups_available() -> bool {
    let cgroupfs = [
        "cgroup.controllers",
        "memory/cgroup.procs",
        "freezer/cgroup.procs",
    ]
    .iter()
    .any(|file| Path::new("/sys/fs/cgroup").join(file).exists());
    drover_isolate::root_tests::root_test_may_run("a cgroup filesystem at /sys/fs/cgroup", cgroupfs)
}

fn driver() -> ShimEngine {
    raw_exec_driver(RawExecConfig {
        shim_binary: Some(PathBuf::from(SHIM)),
        cgroup_parent: "drover-test".to_string(),
        ..RawExecConfig::default()
    })
}

fn launch(scratch: &Scratch, name: &str, script: &str) -> TaskLaunch {
    let alloc_id = format!(
        "{}-{}",
        std::process::id(),
        scratch.0.file_name().unwrap().to_string_lossy()
    );
    TaskLaunch {
        task_id: format!("{alloc_id}/{name}"),
        alloc_id,
        task_name: name.to_string(),
        command: "sh".to_string(),
        args: vec!["-c".to_string(), script.to_string()],
        env: vec![("PATH".to_string(), "/usr/bin:/bin".to_string())],
        cwd: Some(scratch.0.clone()),
        state_dir: scratch.0.join("state"),
        logs: LogSettings {
            dir: scratch.0.join("logs"),
            ..LogSettings::default()
        },
        kill_signal: Some("SIGTERM".to_string()),
        ..TaskLaunch::default()
    }
}

/// The directories of a task cgroup that exist, over every hierarchy under /sys/fs/cgroup.
fn cgroup_dirs(name: &str) -> Vec<PathBuf> {
    let root = Path::new("/sys/fs/cgroup");
    let mut found: Vec<PathBuf> = std::fs::read_dir(root)
        .unwrap()
        .map(|entry| entry.unwrap().path().join(name))
        .filter(|path| path.is_dir())
        .collect();
    if root.join(name).is_dir() {
        found.push(root.join(name));
    }
    found
}

fn cgroup_procs(name: &str) -> Vec<String> {
    cgroup_dirs(name)
        .iter()
        .flat_map(|dir| {
            std::fs::read_to_string(dir.join("cgroup.procs"))
                .unwrap_or_default()
                .lines()
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Polls `condition` every 10 ms for up to 20 s.
fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let started = Instant::now();
    while !condition() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "timed out: {what}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `(ppid, session id)` of a process, from `/proc/<pid>/stat`.
fn parent_and_session(pid: i32) -> (i32, i32) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    (fields[1].parse().unwrap(), fields[3].parse().unwrap())
}

fn alive(pid: i32) -> bool {
    process_start_time(pid).is_some()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

#[tokio::test]
async fn output_goes_to_the_log_and_the_exit_code_is_recorded_until_destroy() {
    if !cgroups_available() {
        return;
    }
    let scratch = Scratch::new();
    let driver = driver();
    let task = launch(&scratch, "web", "echo hi; echo oops >&2; exit 3");
    let handle = driver.start(&task).await.unwrap();
    let shim = handle.shim.clone().unwrap();
    assert_ne!(shim.shim_pid, std::process::id() as i32);

    let exit = driver.wait(&handle).await.unwrap();
    assert_eq!(
        (exit.exit_code, exit.signal, exit.oom_killed),
        (3, 0, false)
    );
    assert_eq!(
        std::fs::read_to_string(scratch.0.join("logs/web.stdout.0")).unwrap(),
        "hi\n"
    );
    assert_eq!(
        std::fs::read_to_string(scratch.0.join("logs/web.stderr.0")).unwrap(),
        "oops\n"
    );
    assert_eq!(read_exit_status(&shim.state_dir), Some(exit));
    assert_eq!(driver.exit_status(&handle).await.unwrap(), Some(exit));

    driver.destroy(&handle).await.unwrap();
    assert!(!shim.state_dir.exists());
    let cgroup = shim.cgroup.unwrap();
    assert_eq!(cgroup_dirs(&cgroup.name), Vec::<PathBuf>::new());
    eventually("shim exits after cleanup", || !alive(shim.shim_pid));
}

#[tokio::test]
async fn kill_with_grace_takes_down_a_tree_that_ignores_the_signal() {
    if !cgroups_available() {
        return;
    }
    let scratch = Scratch::new();
    let driver = driver();
    let script = "trap '' TERM; sh -c \"trap '' TERM; sleep 600\" & sleep 600 & wait";
    let handle = driver
        .start(&launch(&scratch, "stubborn", script))
        .await
        .unwrap();
    let mut pids = Vec::new();
    for _ in 0..2000 {
        pids = driver.stats(&handle).await.unwrap().pids;
        if pids.len() >= 4 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(pids.len() >= 4, "sh, sh, sleep, sleep: {pids:?}");

    let grace = Duration::from_millis(800);
    let started = Instant::now();
    let exit = driver.kill(&handle, None, grace).await.unwrap();
    assert!(
        started.elapsed() >= grace,
        "TERM was ignored, so the grace ran out"
    );
    assert_eq!((exit.signal, exit.exit_code), (9, 137));
    for pid in &pids {
        assert!(!alive(*pid), "pid {pid} survived the kill");
    }
    driver.destroy(&handle).await.unwrap();
}

#[tokio::test]
async fn a_signal_reaches_a_task_that_traps_it() {
    if !cgroups_available() {
        return;
    }
    let scratch = Scratch::new();
    let driver = driver();
    let script = "trap 'echo got-usr1; exit 0' USR1; echo ready; while :; do sleep 0.05; done";
    let handle = driver
        .start(&launch(&scratch, "trap", script))
        .await
        .unwrap();
    let log = scratch.0.join("logs/trap.stdout.0");
    eventually("task ready", || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("ready")
    });
    driver.signal(&handle, "usr1").await.unwrap();
    let exit = driver.wait(&handle).await.unwrap();
    assert_eq!(exit.exit_code, 0);
    assert!(std::fs::read_to_string(&log).unwrap().contains("got-usr1"));
    assert!(matches!(
        driver.signal(&handle, "SIGNOPE").await,
        Err(DriverError::UnknownSignal(_))
    ));
    driver.destroy(&handle).await.unwrap();
}

#[test]
fn a_new_runtime_reattaches_from_the_persisted_handle_and_kills_the_same_task() {
    if !cgroups_available() {
        return;
    }
    let scratch = Scratch::new();
    let task = launch(&scratch, "long", "exec sleep 600");
    let persisted: String = {
        let agent = runtime();
        let handle = agent.block_on(driver().start(&task)).unwrap();
        serde_json::to_string(&handle).unwrap()
        // The runtime and the driver are dropped here, as in an agent crash.
    };
    let handle: TaskHandle = serde_json::from_str(&persisted).unwrap();
    let shim = handle.shim.clone().unwrap();
    assert!(alive(shim.task_pid) && alive(shim.shim_pid));
    // Neither the shim nor the task is a child of the agent, and each leads its own session.
    let me = std::process::id() as i32;
    let (shim_parent, shim_session) = parent_and_session(shim.shim_pid);
    let (task_parent, task_session) = parent_and_session(shim.task_pid);
    assert_ne!(shim_parent, me);
    assert_eq!(task_parent, shim.shim_pid, "the shim is the task's parent");
    assert_eq!(shim_session, shim.shim_pid);
    assert_eq!(task_session, shim.task_pid);

    let agent = runtime();
    let driver = driver();
    agent.block_on(driver.recover(&handle)).unwrap();
    let identity = agent
        .block_on(ShimClient::new(&shim.socket_path, &handle.task_id).hello())
        .unwrap();
    assert_eq!(identity.task_pid, shim.task_pid);
    assert_eq!(agent.block_on(driver.exit_status(&handle)).unwrap(), None);
    let stats = agent.block_on(driver.stats(&handle)).unwrap();
    assert_eq!(stats.pids, vec![shim.task_pid]);

    let exit = agent
        .block_on(driver.kill(&handle, None, Duration::from_secs(5)))
        .unwrap();
    assert_eq!(exit.signal, 15, "SIGTERM, the task's kill_signal");
    assert!(!alive(shim.task_pid));
    agent.block_on(driver.destroy(&handle)).unwrap();
}

#[tokio::test]
async fn a_handle_whose_identity_does_not_match_is_refused() {
    if !cgroups_available() {
        return;
    }
    let scratch = Scratch::new();
    let driver = driver();
    let handle = driver
        .start(&launch(&scratch, "ident", "exec sleep 600"))
        .await
        .unwrap();
    driver.recover(&handle).await.unwrap();

    let mut wrong_start = handle.clone();
    if let Some(shim) = wrong_start.shim.as_mut() {
        shim.shim_start_time += 1;
    }
    assert!(matches!(
        driver.recover(&wrong_start).await,
        Err(DriverError::IdentityMismatch { .. })
    ));

    // A live process that is not the shim (this test), with its real start time.
    let mut wrong_pid = handle.clone();
    if let Some(shim) = wrong_pid.shim.as_mut() {
        shim.shim_pid = std::process::id() as i32;
        shim.shim_start_time = process_start_time(shim.shim_pid).unwrap();
    }
    assert!(matches!(
        driver.recover(&wrong_pid).await,
        Err(DriverError::IdentityMismatch { .. })
    ));

    let mut wrong_task = handle.clone();
    wrong_task.task_id = "someone/else".to_string();
    assert!(matches!(
        driver.recover(&wrong_task).await,
        Err(DriverError::IdentityMismatch { .. })
    ));
    driver.destroy(&handle).await.unwrap();
}

#[tokio::test]
async fn rotation_keeps_max_files_and_never_splits_short_lines() {
    if !cgroups_available() {
        return;
    }
    let scratch = Scratch::new();
    let driver = driver();
    let mut task = launch(
        &scratch,
        "chatty",
        "i=1; while [ $i -le 300 ]; do echo \"line $i\"; i=$((i+1)); done",
    );
    task.logs.max_files = 3;
    task.logs.max_file_size_bytes = 100;
    let handle = driver.start(&task).await.unwrap();
    assert_eq!(driver.wait(&handle).await.unwrap().exit_code, 0);
    let mut files: Vec<(u64, String)> = std::fs::read_dir(scratch.0.join("logs"))
        .unwrap()
        .filter_map(|entry| {
            let entry = entry.unwrap();
            let name = entry.file_name().to_string_lossy().into_owned();
            let index = name.strip_prefix("chatty.stdout.")?.parse().ok()?;
            Some((index, std::fs::read_to_string(entry.path()).unwrap()))
        })
        .collect();
    files.sort();
    assert_eq!(files.len(), 3, "{files:?}");
    assert_eq!(files[1].0, files[0].0 + 1);
    assert_eq!(files[2].0, files[1].0 + 1);
    let mut expected_next: Option<u32> = None;
    for (index, content) in &files {
        assert!(
            content.len() <= 100,
            "file {index} has {} bytes",
            content.len()
        );
        assert!(content.ends_with('\n'));
        for line in content.lines() {
            let number: u32 = line
                .strip_prefix("line ")
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("split line {line:?} in file {index}"));
            if let Some(expected) = expected_next {
                assert_eq!(number, expected, "lines in order without gaps");
            }
            expected_next = Some(number + 1);
        }
    }
    assert_eq!(expected_next, Some(301), "the newest lines are kept");
    driver.destroy(&handle).await.unwrap();
}

#[tokio::test]
async fn stats_show_memory_of_a_running_task() {
    if !cgroups_available() {
        return;
    }
    let scratch = Scratch::new();
    let driver = driver();
    // A shell holding ~8 MB in a variable, then waiting.
    let script = "x=$(head -c 8000000 /dev/zero | tr '\\0' a); echo held; exec sleep 600";
    let handle = driver
        .start(&launch(&scratch, "mem", script))
        .await
        .unwrap();
    let mut usage = driver.stats(&handle).await.unwrap();
    for _ in 0..2000 {
        if usage.memory.rss > 0 && usage.memory.usage > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        usage = driver.stats(&handle).await.unwrap();
    }
    assert!(usage.memory.rss > 0, "{usage:?}");
    assert!(usage.memory.usage >= usage.memory.rss, "{usage:?}");
    assert!(usage.memory.max_usage > 0);
    assert!(usage.memory.measured.iter().any(|name| name == "RSS"));
    assert!(usage.pids.contains(&handle.shim.as_ref().unwrap().task_pid));
    driver.destroy(&handle).await.unwrap();
}

#[test]
fn an_exit_while_no_agent_is_attached_is_kept_until_cleanup() {
    if !cgroups_available() {
        return;
    }
    let scratch = Scratch::new();
    let task = launch(&scratch, "short", "sleep 0.2; exit 7");
    let persisted = {
        let agent = runtime();
        let handle = agent.block_on(driver().start(&task)).unwrap();
        serde_json::to_string(&handle).unwrap()
    };
    let handle: TaskHandle = serde_json::from_str(&persisted).unwrap();
    let shim = handle.shim.clone().unwrap();
    eventually("exit recorded on disk", || {
        read_exit_status(&shim.state_dir).is_some()
    });
    assert_eq!(read_exit_status(&shim.state_dir).unwrap().exit_code, 7);
    assert!(alive(shim.shim_pid), "the shim waits for the agent");

    let agent = runtime();
    let driver = driver();
    agent.block_on(driver.recover(&handle)).unwrap();
    let exit = agent
        .block_on(driver.exit_status(&handle))
        .unwrap()
        .unwrap();
    assert_eq!(exit.exit_code, 7);
    assert_eq!(agent.block_on(driver.wait(&handle)).unwrap(), exit);
    agent.block_on(driver.destroy(&handle)).unwrap();
    assert!(!shim.state_dir.exists());
}

#[tokio::test]
async fn a_command_that_cannot_start_is_a_start_error_and_leaves_nothing() {
    if !cgroups_available() {
        return;
    }
    let scratch = Scratch::new();
    let driver = driver();
    let mut task = launch(&scratch, "missing", "");
    task.command = "no-such-command-anywhere".to_string();
    task.args.clear();
    let error = driver.start(&task).await.unwrap_err();
    assert!(
        matches!(&error, DriverError::Start { message, .. } if message.contains("not found")),
        "{error}"
    );
    let cgroup_name = format!("drover-test/{}.missing", task.alloc_id.replace('.', "_"));
    assert!(cgroup_procs(&cgroup_name).is_empty());
    assert_eq!(cgroup_dirs(&cgroup_name), Vec::<PathBuf>::new());
}

/// Starts `sleep 600` as task `name` and kills its shim with SIGKILL; the task lives on.
async fn start_and_kill_the_shim(
    driver: &ShimEngine,
    scratch: &Scratch,
    name: &str,
) -> (TaskHandle, drover_driver::ShimHandle) {
    let handle = driver
        .start(&launch(scratch, name, "exec sleep 600"))
        .await
        .unwrap();
    let shim = handle.shim.clone().unwrap();
    let killed = std::process::Command::new("kill")
        .args(["-9", &shim.shim_pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    eventually("shim dead", || !alive(shim.shim_pid));
    assert!(alive(shim.task_pid), "the task outlives its shim");
    (handle, shim)
}

#[tokio::test]
async fn when_the_shim_dies_the_task_lives_on_and_reclaim_kills_it_through_the_cgroup() {
    if !cgroups_available() {
        return;
    }
    let scratch = Scratch::new();
    let driver = driver();
    let (handle, shim) = start_and_kill_the_shim(&driver, &scratch, "orphan").await;
    assert!(matches!(
        driver.recover(&handle).await,
        Err(DriverError::ShimGone { .. })
    ));
    assert_eq!(driver.reclaim(&handle).await.unwrap(), None);
    eventually("task killed", || !alive(shim.task_pid));
    assert!(!shim.state_dir.exists());
    assert_eq!(
        cgroup_dirs(&shim.cgroup.unwrap().name),
        Vec::<PathBuf>::new()
    );
}

/// A kill of a task whose shim died was refused ("the shim … is gone") and retried by the
/// client for minutes; the kill now kills the task through its cgroup and reports an exit.
#[tokio::test]
async fn a_kill_after_the_shim_died_kills_the_task_through_its_cgroup() {
    if !cgroups_available() {
        return;
    }
    let scratch = Scratch::new();
    let driver = driver();
    let (handle, shim) = start_and_kill_the_shim(&driver, &scratch, "shimless").await;
    let exit = driver
        .kill(&handle, Some("SIGTERM"), Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(exit.signal, nix::sys::signal::Signal::SIGKILL as i32);
    eventually("task killed", || !alive(shim.task_pid));
    driver.destroy(&handle).await.unwrap();
    assert_eq!(
        cgroup_dirs(&shim.cgroup.unwrap().name),
        Vec::<PathBuf>::new()
    );
}

#[tokio::test]
async fn the_task_runs_as_the_given_user_with_its_environment_and_cwd() {
    if !cgroups_available() {
        return;
    }
    let scratch = Scratch::new();
    let driver = driver();
    let mut task = launch(
        &scratch,
        "whoami",
        "echo \"$(id -u) $(id -g) $GREETING $(pwd)\"",
    );
    task.user = Some("nobody".to_string());
    task.env.push(("GREETING".to_string(), "hello".to_string()));
    task.cwd = Some(PathBuf::from("/"));
    let handle = driver.start(&task).await.unwrap();
    assert_eq!(driver.wait(&handle).await.unwrap().exit_code, 0);
    let status = std::fs::read_to_string("/etc/passwd").unwrap();
    let nobody: Vec<&str> = status
        .lines()
        .find(|line| line.starts_with("nobody:"))
        .unwrap()
        .split(':')
        .collect();
    assert_eq!(
        std::fs::read_to_string(scratch.0.join("logs/whoami.stdout.0")).unwrap(),
        format!("{} {} hello /\n", nobody[2], nobody[3])
    );
    driver.destroy(&handle).await.unwrap();
}

#[tokio::test]
async fn several_waiters_all_see_the_exit() {
    if !cgroups_available() {
        return;
    }
    let scratch = Scratch::new();
    let driver = driver();
    let handle = driver
        .start(&launch(&scratch, "waited", "sleep 0.3; exit 4"))
        .await
        .unwrap();
    let (first, second, third) = tokio::join!(
        driver.wait(&handle),
        driver.wait(&handle),
        driver.wait(&handle)
    );
    let codes = [first, second, third].map(|exit| exit.unwrap().exit_code);
    assert_eq!(codes, [4, 4, 4]);
    driver.destroy(&handle).await.unwrap();
}

#[tokio::test]
async fn an_oom_kill_is_reported_from_the_kernel_counter() {
    if !cgroups_available() {
        return;
    }
    let scratch = Scratch::new();
    let driver = driver();
    // The shell accumulates 200 MB in a variable under a 32 MiB limit.
    let mut task = launch(
        &scratch,
        "hungry",
        "x=$(head -c 200000000 /dev/zero | tr '\\0' a); echo survived",
    );
    task.resources.memory_bytes = Some(32 << 20);
    let handle = driver.start(&task).await.unwrap();
    let exit = driver.wait(&handle).await.unwrap();
    assert!(exit.oom_killed, "{exit:?}");
    assert!(
        !std::fs::read_to_string(scratch.0.join("logs/hungry.stdout.0"))
            .unwrap()
            .contains("survived")
    );
    driver.destroy(&handle).await.unwrap();
}

#[tokio::test]
async fn raw_exec_passes_the_conformance_suite() {
    if !cgroups_available() {
        return;
    }
    let scratch = Scratch::new();
    let make_task = |scenario: Scenario, name: &str| {
        let script = match scenario {
            Scenario::ExitWith(code) => format!("exit {code}"),
            Scenario::RunUntilKilled => "exec sleep 600".to_string(),
        };
        let mut task = launch(&scratch, name, &script);
        task.state_dir = scratch.0.join(format!("state-{name}"));
        task
    };
    run_conformance_suite(&driver(), &make_task).await.unwrap();
}

#[tokio::test]
async fn without_cgroups_the_process_group_is_signalled_and_killed() {
    let scratch = Scratch::new();
    let driver = raw_exec_driver(RawExecConfig {
        shim_binary: Some(PathBuf::from(SHIM)),
        disable_cgroups: true,
        ..RawExecConfig::default()
    });
    let script = "trap '' TERM; sh -c \"trap '' TERM; exec sleep 600\" & echo $! > child.pid; wait";
    let handle = driver
        .start(&launch(&scratch, "nocg", script))
        .await
        .unwrap();
    assert_eq!(handle.shim.as_ref().unwrap().cgroup, None);
    let child_pid_file = scratch.0.join("child.pid");
    eventually("child started", || {
        std::fs::read_to_string(&child_pid_file).is_ok_and(|text| text.ends_with('\n'))
    });
    let child: i32 = std::fs::read_to_string(&child_pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let stats = driver.stats(&handle).await.unwrap();
    assert_eq!(stats.pids, vec![handle.shim.as_ref().unwrap().task_pid]);
    assert!(stats.memory.measured.is_empty());

    let exit = driver
        .kill(&handle, None, Duration::from_millis(300))
        .await
        .unwrap();
    assert_eq!(exit.signal, 9);
    eventually("child killed with its group", || !alive(child));
    driver.destroy(&handle).await.unwrap();
}
