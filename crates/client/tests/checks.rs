//! End-to-end: service checks of alloc runners driving real tasks under `drover-shim`, probing
//! real sockets: an HTTP check that passes, fails, restarts its task through `check_restart`
//! (twice: the check is re-armed after a restart), check results that survive a runner restore,
//! and a script check that runs inside an `exec` task's namespaces (root only).
//!
//! Needs the `drover-shim` binary (`DROVER_SHIM_PATH`, or `target/debug/drover-shim`, built on
//! demand) and `python3`. Waits are bounded polls with generous limits.

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
use drover_client::state_db::StateDb;
use drover_client::taskrunner::TaskRunnerDeps;
use drover_client::taskrunner::drivers::default_driver_catalog;
use drover_structs::{
    Allocation, CheckQueryResult, CheckRestart, DurationNs, Job, RestartPolicy, Service,
    ServiceCheck, Task, TaskGroup, TaskState,
};
use serde_json::json;

#[derive(Debug, Default)]
struct NullSink {
    updates: Mutex<Vec<AllocClientUpdate>>,
}

impl AllocStatusSink for NullSink {
    fn alloc_updated(&self, update: AllocClientUpdate) {
        if let Ok(mut updates) = self.updates.lock() {
            updates.clear();
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

fn deps(data_dir: &Path) -> AllocRunnerDeps {
    let mut config = ClientConfig::new(data_dir);
    config.shim_binary = Some(shim_binary());
    let state_db = StateDb::open(&config.state_db_path()).unwrap();
    let raw_exec = drover_driver::raw_exec::RawExecConfig {
        shim_binary: Some(shim_binary()),
        ..drover_driver::raw_exec::RawExecConfig::default()
    };
    AllocRunnerDeps {
        task: TaskRunnerDeps {
            config: Arc::new(config),
            clock: Arc::new(SystemClock),
            state_db: Arc::new(state_db),
            drivers: Arc::new(default_driver_catalog(raw_exec)),
            node: Arc::new(drover_structs::Node {
                id: "node-1".into(),
                name: "box".into(),
                datacenter: "dc1".into(),
                attributes: BTreeMap::from([(
                    "unique.network.ip-address".to_string(),
                    "127.0.0.1".to_string(),
                )]),
                ..drover_structs::Node::default()
            }),
            region: "global".into(),
            jitter_seed: 1,
            services: Arc::new(drover_client::services::ConnRegistrar::new(Arc::new(
                drover_client::node_sim::InMemoryServer::new(std::time::Duration::from_secs(30)),
            ))),
            identities: Arc::new(drover_client::identity::NoServersSigner),
            task_api: None,
            task_counters: None,
        },
        sink: Arc::new(NullSink::default()),
        upstream: drover_client::allocrunner::upstream::UpstreamAllocs::default(),
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A python3 HTTP server on `port` answering 500 while `flag` exists; it removes `flag` when
/// it starts, so a restarted server answers 200 again.
const SERVER: &str = r#"
import http.server, os, sys
port, flag = int(sys.argv[1]), sys.argv[2]
try:
    os.remove(flag)
except FileNotFoundError:
    pass
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        code, body = (500, b"broken") if os.path.exists(flag) else (200, b"fine")
        self.send_response(code)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()
"#;

fn http_check(port: u16, check_restart: Option<CheckRestart>) -> ServiceCheck {
    ServiceCheck {
        name: "alive".into(),
        r#type: "http".into(),
        path: "/health?alloc=${NOMAD_ALLOC_ID}".into(),
        port_label: port.to_string(),
        interval: DurationNs::from_millis(500),
        timeout: DurationNs::from_secs(2),
        check_restart,
        ..ServiceCheck::default()
    }
}

fn alloc(task: Task) -> Allocation {
    Allocation {
        id: uuid::Uuid::new_v4().to_string(),
        name: "checks.web[0]".into(),
        namespace: "default".into(),
        job_id: "checks".into(),
        task_group: "web".into(),
        desired_status: "run".into(),
        job: Some(Arc::new(Job {
            id: "checks".into(),
            name: "checks".into(),
            r#type: "service".into(),
            region: "global".into(),
            task_groups: vec![TaskGroup {
                name: "web".into(),
                tasks: vec![task],
                restart_policy: Some(RestartPolicy {
                    attempts: 5,
                    delay: DurationNs::from_millis(200),
                    interval: DurationNs::from_secs(1800),
                    mode: "fail".into(),
                    ..RestartPolicy::default()
                }),
                ..TaskGroup::default()
            }],
            ..Job::default()
        })),
        ..Allocation::default()
    }
}

fn server_task(port: u16, flag: &Path, check: ServiceCheck) -> Task {
    Task {
        name: "server".into(),
        driver: "raw_exec".into(),
        config: json!({
            "command": "python3",
            "args": ["-c", SERVER, port.to_string(), flag.display().to_string()],
        })
        .as_object()
        .cloned()
        .unwrap(),
        kill_timeout: DurationNs::from_secs(5),
        services: vec![Service {
            name: "web".into(),
            provider: "nomad".into(),
            checks: vec![check],
            ..Service::default()
        }],
        ..Task::default()
    }
}

async fn wait_for(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn only_check(runner: &AllocRunner) -> Option<CheckQueryResult> {
    let checks = runner.checks();
    assert!(checks.len() <= 1, "{checks:?}");
    checks.into_values().next()
}

fn restart_signals(state: &TaskState) -> Vec<String> {
    state
        .events
        .iter()
        .filter(|event| event.r#type == "Restart Signaled")
        .map(|event| event.restart_reason.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_check_fails_restarts_its_task_and_passes_again_twice() {
    let data_dir = tempfile::tempdir().unwrap();
    let deps = deps(data_dir.path());
    let port = free_port();
    let flag = data_dir.path().join("fail");
    let check_restart = CheckRestart {
        limit: 2,
        ..CheckRestart::default()
    };
    let allocation = alloc(server_task(
        port,
        &flag,
        http_check(port, Some(check_restart.clone())),
    ));
    let runner = AllocRunner::new(deps, allocation.clone()).unwrap();
    runner.run();

    wait_for("the check to pass", || {
        only_check(&runner).is_some_and(|check| check.status == "success")
    })
    .await;
    let check = only_check(&runner).unwrap();
    assert_eq!(
        check.id,
        drover_structs::check_id(
            &allocation.id,
            "web",
            &http_check(port, Some(check_restart))
        )
    );
    assert_eq!(
        (
            check.group.as_str(),
            check.task.as_str(),
            check.service.as_str()
        ),
        ("checks.web[0]", "server", "web")
    );
    assert_eq!(
        (check.mode.as_str(), check.status_code),
        ("healthiness", 200)
    );
    assert_eq!(check.output, "nomad: http ok");

    // Ten events are kept per task, so rounds are counted by the task's restarts.
    let restarts = |runner: &AllocRunner| runner.task_states()["server"].restarts;
    for round in 1..=2 {
        std::fs::write(&flag, b"").unwrap();
        wait_for("the check to restart the task", || {
            restarts(&runner) == round
        })
        .await;
        let state = runner.task_states().remove("server").unwrap();
        assert_eq!(
            restart_signals(&state).last().map(String::as_str),
            Some(r#"healthcheck: check "alive" unhealthy"#)
        );
        // The restarted server removed the flag: the check passes again.
        wait_for("the check to pass after the restart", || {
            !flag.exists() && only_check(&runner).is_some_and(|check| check.status == "success")
        })
        .await;
    }
    let state = runner.task_states().remove("server").unwrap();
    // Each restart counted against the restart policy, and the task runs.
    assert_eq!((state.restarts, state.state.as_str()), (2, "running"));
    runner.destroy().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restored_runner_keeps_check_results_until_the_first_new_one() {
    let data_dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let flag = data_dir.path().join("fail");
    let mut check = http_check(port, None);
    check.interval = DurationNs::from_secs(4);
    let allocation = alloc(server_task(port, &flag, check));
    let deps = deps(data_dir.path());
    let runner = AllocRunner::new(deps.clone(), allocation.clone()).unwrap();
    runner.run();
    wait_for("the check to pass", || {
        only_check(&runner).is_some_and(|check| check.status == "success")
    })
    .await;
    let before = only_check(&runner).unwrap();
    runner.shutdown().await;
    drop(runner);

    // A new runner on the same state (as a restarted agent): the result is there at once,
    // not pending or failing.
    let restored = AllocRunner::restore(deps, &allocation.id).unwrap().unwrap();
    restored.run();
    assert_eq!(only_check(&restored).unwrap(), before);
    wait_for("a new result", || {
        only_check(&restored).is_some_and(|check| check.timestamp > before.timestamp)
    })
    .await;
    assert_eq!(only_check(&restored).unwrap().status, "success");
    restored.destroy().await.unwrap();
}

fn exec_may_run() -> bool {
    let cgroupfs = ["cgroup.controllers", "memory/cgroup.procs"]
        .iter()
        .any(|file| Path::new("/sys/fs/cgroup").join(file).exists());
    drover_isolate::root_tests::root_test_may_run("a cgroup filesystem at /sys/fs/cgroup", cgroupfs)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_check_runs_inside_an_exec_task() {
    if !exec_may_run() {
        return;
    }
    let data_dir = tempfile::tempdir().unwrap();
    let task = Task {
        name: "box".into(),
        driver: "exec".into(),
        config: json!({
            "command": "/bin/sh",
            "args": ["-c", "echo inside-the-task > /local/marker; exec sleep 600"],
        })
        .as_object()
        .cloned()
        .unwrap(),
        kill_timeout: DurationNs::from_secs(5),
        services: vec![Service {
            name: "box".into(),
            provider: "nomad".into(),
            checks: vec![ServiceCheck {
                name: "marker".into(),
                r#type: "script".into(),
                command: "/bin/sh".into(),
                args: vec![
                    "-c".into(),
                    "cat /local/marker && echo task=${NOMAD_TASK_NAME} && test ! -e /local/../../alloc/../client".into(),
                ],
                interval: DurationNs::from_millis(500),
                timeout: DurationNs::from_secs(5),
                ..ServiceCheck::default()
            }],
            ..Service::default()
        }],
        ..Task::default()
    };
    assert!(
        !Path::new("/local/marker").exists(),
        "the host has no /local/marker"
    );
    let runner = AllocRunner::new(deps(data_dir.path()), alloc(task)).unwrap();
    runner.run();
    wait_for("the script check to pass", || {
        only_check(&runner).is_some_and(|check| check.status == "success")
    })
    .await;
    let check = only_check(&runner).unwrap();
    assert_eq!(check.output, "inside-the-task\ntask=box\n");
    runner.destroy().await.unwrap();
}

/// The agent-side CPU cost of many HTTP checks (a figure for BENCHMARKS.md, not an assertion):
/// one task serving HTTP, `DROVER_BENCH_CHECKS` checks (default 1 000) at a 10 s interval,
/// measured over `DROVER_BENCH_SECONDS` (default 60) after they have all run once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run by hand, see BENCHMARKS.md"]
async fn cpu_of_many_http_checks() {
    let checks: usize = std::env::var("DROVER_BENCH_CHECKS")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(1000);
    let seconds: u64 = std::env::var("DROVER_BENCH_SECONDS")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(60);
    let data_dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let flag = data_dir.path().join("fail");
    // By default the service closes every connection after its answer (HTTP/1.0), so every
    // probe opens a new one: the costly case. `DROVER_BENCH_KEEPALIVE=1` makes it an HTTP/1.1
    // server that keeps connections open, as most services are.
    let keep_alive = std::env::var("DROVER_BENCH_KEEPALIVE").is_ok_and(|value| value == "1");
    // A thread per connection and a listen backlog that holds a burst of probes (Python's
    // default of 5 refuses some of them, and the failures would be measured too).
    let mut server = SERVER.replace(
        "http.server.HTTPServer(",
        "type('S', (http.server.ThreadingHTTPServer,), {'request_queue_size': 1024})(",
    );
    if keep_alive {
        server = server.replace(
            "    def do_GET(self):",
            "    protocol_version = \"HTTP/1.1\"\n    def do_GET(self):",
        );
    }
    let mut task = server_task(port, &flag, http_check(port, None));
    task.config = json!({
        "command": "python3",
        "args": ["-c", server, port.to_string(), flag.display().to_string()],
    })
    .as_object()
    .cloned()
    .unwrap();
    task.services[0].checks = (0..checks)
        .map(|index| ServiceCheck {
            name: format!("check-{index}"),
            interval: DurationNs::from_secs(10),
            ..http_check(port, None)
        })
        .collect();
    let runner = AllocRunner::new(deps(data_dir.path()), alloc(task)).unwrap();
    runner.run();
    wait_for("every check to pass once", || {
        let results = runner.checks();
        results.len() == checks && results.values().all(|check| check.status == "success")
    })
    .await;
    // Steady state: the allocation's health (for migrations) is decided.
    wait_for("the allocation's health to be decided", || {
        runner
            .deployment_health()
            .is_some_and(|health| health.healthy.is_some())
    })
    .await;
    let cpu = || {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .unwrap()
            .1
            .split_whitespace()
            .collect();
        // utime and stime, in clock ticks (fields 14 and 15 of stat).
        fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
    };
    let ticks_per_second = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .unwrap()
        .unwrap() as f64;
    let before = cpu();
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    let used = (cpu() - before) as f64 / ticks_per_second;
    println!(
        "{checks} http checks at 10s ({}): {:.2}% of one core over {seconds}s",
        if keep_alive {
            "keep-alive"
        } else {
            "a connection per probe"
        },
        100.0 * used / seconds as f64
    );
    runner.destroy().await.unwrap();
}

fn in_deployment(
    mut allocation: Allocation,
    min_healthy: Duration,
    deadline: Duration,
) -> Allocation {
    let mut job = allocation.job.as_deref().cloned().unwrap();
    job.task_groups[0].update = Some(drover_structs::UpdateStrategy {
        max_parallel: 1,
        health_check: "checks".into(),
        min_healthy_time: DurationNs::from_std(min_healthy),
        healthy_deadline: DurationNs::from_std(deadline),
        ..drover_structs::UpdateStrategy::default()
    });
    allocation.job = Some(Arc::new(job));
    allocation.deployment_id = "deploy-1".into();
    allocation
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployment_health_waits_for_passing_checks_and_names_failing_services_at_the_deadline() {
    // A passing check: healthy once it has passed for min_healthy_time.
    let data_dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let flag = data_dir.path().join("fail");
    let allocation = in_deployment(
        alloc(server_task(port, &flag, http_check(port, None))),
        Duration::from_secs(1),
        Duration::from_secs(30),
    );
    let runner = AllocRunner::new(deps(data_dir.path()), allocation).unwrap();
    runner.run();
    wait_for("the check to pass", || {
        only_check(&runner).is_some_and(|check| check.status == "success")
    })
    .await;
    let passed_at = Instant::now();
    wait_for("the allocation to turn healthy", || {
        runner.deployment_health().is_some()
    })
    .await;
    assert!(passed_at.elapsed() >= Duration::from_millis(400));
    assert_eq!(runner.deployment_health().unwrap().healthy, Some(true));
    runner.destroy().await.unwrap();

    // A check against a port nobody listens on: unhealthy at the deadline, and why.
    let data_dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let flag = data_dir.path().join("fail");
    let allocation = in_deployment(
        alloc(server_task(port, &flag, http_check(free_port(), None))),
        Duration::from_secs(1),
        Duration::from_secs(3),
    );
    let runner = AllocRunner::new(deps(data_dir.path()), allocation).unwrap();
    let began = Instant::now();
    runner.run();
    wait_for("the allocation to turn unhealthy", || {
        runner.deployment_health().is_some()
    })
    .await;
    assert!(began.elapsed() >= Duration::from_secs(3));
    assert_eq!(runner.deployment_health().unwrap().healthy, Some(false));
    wait_for("the reason", || {
        runner.task_states()["server"]
            .events
            .iter()
            .any(|event| event.r#type == "Alloc Unhealthy")
    })
    .await;
    let state = runner.task_states().remove("server").unwrap();
    let event = state
        .events
        .iter()
        .find(|event| event.r#type == "Alloc Unhealthy")
        .unwrap();
    assert_eq!(event.message, "Services not healthy by deadline: web");
    runner.destroy().await.unwrap();
}
