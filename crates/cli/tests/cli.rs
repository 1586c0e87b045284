//! The CLI driven through `drover::run` against the real HTTP layer on 127.0.0.1:0, backed by
//! the in-memory backend: argument syntax, output shapes, exit codes and error messages.

#![allow(clippy::expect_used, clippy::unwrap_used)] // a failed expectation is a failed test

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use drover_api::StateReads;
use drover_api::memory::{ClientCall, MemoryBackend};
use drover_structs::{
    AllocMetric, Allocation, Evaluation, Job, Node, TaskEvent, TaskGroupSummary, TaskState,
};

struct Outcome {
    code: i32,
    stdout: String,
    stderr: String,
}

async fn drover(arguments: &[&str]) -> Outcome {
    let mut argv: Vec<OsString> = vec!["drover".into()];
    argv.extend(arguments.iter().map(OsString::from));
    let mut out = Vec::new();
    let mut err = Vec::new();
    let code = drover::run(argv, &mut out, &mut err).await;
    Outcome {
        code,
        stdout: String::from_utf8(out).unwrap(),
        stderr: String::from_utf8(err).unwrap(),
    }
}

struct Agent {
    backend: Arc<MemoryBackend>,
    address: String,
}

async fn start_agent() -> Agent {
    let backend = Arc::new(MemoryBackend::dev());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    let router = drover_api::app(Arc::clone(&backend));
    tokio::spawn(async move {
        axum::serve(listener, router).await.unwrap();
    });
    Agent { backend, address }
}

fn example(name: &str) -> String {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    root.join(name).display().to_string()
}

fn job_with_events(backend: &MemoryBackend) -> (Job, Allocation) {
    let hcl = std::fs::read_to_string(example("batch.hcl")).unwrap();
    let job = drover_jobspec::parse_hcl(&hcl, "batch.hcl", &Default::default()).unwrap();
    let job = backend.put_job(job);
    let mut state = TaskState {
        state: "running".into(),
        ..TaskState::default()
    };
    state.push_event(TaskEvent::new("Received", 1_700_000_000_000_000_000));
    state.push_event(TaskEvent::new("Started", 1_700_000_001_000_000_000));
    state.populate_display_messages();
    let allocation = Allocation {
        id: "8e3a5f1c-1111-2222-3333-444455556666".into(),
        namespace: "default".into(),
        eval_id: "2f4c0000-aaaa-bbbb-cccc-ddddeeeeffff".into(),
        name: "report.work[0]".into(),
        node_id: "f1d90000-0000-0000-0000-000000000000".into(),
        node_name: "node1".into(),
        job_id: job.id.clone(),
        job: Some(std::sync::Arc::new(job.clone())),
        task_group: "work".into(),
        desired_status: "run".into(),
        client_status: "running".into(),
        client_description: "Tasks are running".into(),
        task_states: [("count".to_string(), state)].into_iter().collect(),
        create_time: 1_700_000_000_000_000_000,
        modify_time: 1_700_000_001_000_000_000,
        ..Allocation::default()
    };
    backend.put_allocation(allocation.clone());
    (job, allocation)
}

#[tokio::test]
async fn version_prints_the_version() {
    let outcome = drover(&["version"]).await;
    assert_eq!(outcome.code, 0);
    assert!(outcome.stdout.starts_with("drover v"));
}

#[tokio::test]
async fn validate_accepts_every_example_and_reports_located_errors() {
    for name in [
        "web.hcl",
        "batch.hcl",
        "lifecycle.hcl",
        "exec.hcl",
        "parameterized.hcl",
        "periodic.hcl",
    ] {
        let outcome = drover(&["job", "validate", &example(name)]).await;
        assert_eq!(outcome.code, 0, "{name}: {}", outcome.stderr);
        // A service group gets Nomad's default update and migrate strategies, which drover
        // runs: the only warnings an example may have are about the migrate block.
        let warnings: Vec<&str> = outcome
            .stdout
            .lines()
            .filter(|line| line.starts_with("* "))
            .collect();
        assert!(
            warnings
                .iter()
                .all(|warning| warning.starts_with("* migrate (Nomad's default) in group ")),
            "{name}: {}",
            outcome.stdout
        );
        assert!(
            outcome
                .stdout
                .trim_end()
                .ends_with("Job validation successful"),
            "{name}: {}",
            outcome.stdout
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let defaults = dir.path().join("defaults.hcl");
    std::fs::write(
        &defaults,
        "job \"x\" {\n  type = \"batch\"\n  all_at_once = true\n  group \"g\" {\n    task \"t\" {\n      driver = \"raw_exec\"\n      config {\n        command = \"/bin/true\"\n      }\n    }\n  }\n}\n",
    )
    .unwrap();
    let outcome = drover(&["job", "validate", defaults.to_str().unwrap()]).await;
    assert_eq!(outcome.code, 0, "{}", outcome.stderr);
    assert_eq!(
        outcome.stdout,
        "Job Warnings:\n1 warning:\n\n* job > all_at_once in job (AllAtOnce): drover's plan applier commits the placements that fit; all_at_once does not make a partial plan fail\n\nJob validation successful\n"
    );
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("broken.hcl");
    std::fs::write(
        &broken,
        "job \"x\" {\n  group \"g\" {\n    task \"t\" {\n      drivr = \"raw_exec\"\n    }\n  }\n}\n",
    )
    .unwrap();
    let outcome = drover(&["job", "validate", broken.to_str().unwrap()]).await;
    assert_eq!(outcome.code, 1);
    assert!(
        outcome.stderr.contains("broken.hcl:4:7"),
        "{}",
        outcome.stderr
    );
    let missing = drover(&["job", "validate", "/nonexistent/job.hcl"]).await;
    assert_eq!(missing.code, 1);
    assert!(missing.stderr.contains("Error reading job file"));
}

#[tokio::test]
async fn run_with_variables_and_detach_registers_the_job() {
    let agent = start_agent().await;
    let outcome = drover(&[
        "job",
        "run",
        "-detach",
        &format!("-address={}", agent.address),
        "-var",
        "replicas=5",
        &example("web.hcl"),
    ])
    .await;
    assert_eq!(outcome.code, 0, "{}", outcome.stderr);
    assert!(outcome.stdout.contains("Job registration successful"));
    assert!(outcome.stdout.contains("Evaluation ID: "));
    let job = agent.backend.job("default", "web").unwrap().unwrap();
    assert_eq!(job.task_groups[0].count, 5);
}

#[tokio::test]
async fn double_dash_flags_work_too() {
    let agent = start_agent().await;
    let outcome = drover(&[
        "job",
        "run",
        "--detach",
        "--address",
        &agent.address,
        &example("batch.hcl"),
    ])
    .await;
    assert_eq!(outcome.code, 0, "{}", outcome.stderr);
    assert!(agent.backend.job("default", "report").unwrap().is_some());
}

#[tokio::test]
async fn run_monitors_the_evaluation_and_reports_failed_placements() {
    let agent = start_agent().await;
    let backend = Arc::clone(&agent.backend);
    // Play the scheduler: once the evaluation appears, fail its placement.
    let scheduler = tokio::spawn(async move {
        for _ in 0..200 {
            let evaluations = backend.evaluations("*", "").unwrap();
            if let Some(evaluation) = evaluations.into_iter().next() {
                backend.put_evaluation(Evaluation {
                    status: "complete".into(),
                    blocked_eval: "b10c0000-0000-0000-0000-000000000000".into(),
                    failed_tg_allocs: [(
                        "work".to_string(),
                        AllocMetric {
                            nodes_evaluated: 1,
                            nodes_exhausted: 1,
                            dimension_exhausted: [("memory".to_string(), 1)].into_iter().collect(),
                            ..AllocMetric::default()
                        },
                    )]
                    .into_iter()
                    .collect(),
                    ..evaluation
                });
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    let outcome = drover(&[
        "job",
        "run",
        "-address",
        &agent.address,
        &example("batch.hcl"),
    ])
    .await;
    scheduler.await.unwrap();
    assert_eq!(outcome.code, 2, "{}{}", outcome.stdout, outcome.stderr);
    assert!(
        outcome.stdout.contains("Monitoring evaluation"),
        "{}",
        outcome.stdout
    );
    assert!(
        outcome
            .stdout
            .contains("Evaluation triggered by job \"report\"")
    );
    assert!(
        outcome
            .stdout
            .contains("but failed to place all allocations")
    );
    assert!(
        outcome
            .stdout
            .contains("Task Group \"work\" (failed to place 1 allocation)")
    );
    assert!(
        outcome
            .stdout
            .contains("* Dimension \"memory\" exhausted on 1 nodes")
    );
    assert!(
        outcome
            .stdout
            .contains("Evaluation \"b10c0000\" waiting for additional capacity")
    );
}

#[tokio::test]
async fn run_refuses_a_bad_jobspec_before_contacting_the_agent() {
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("bad.hcl");
    std::fs::write(
        &broken,
        "job \"x\" {\n  group \"g\" {\n    count = \"many\"\n  }\n}\n",
    )
    .unwrap();
    let outcome = drover(&[
        "job",
        "run",
        "-address=http://127.0.0.1:1",
        broken.to_str().unwrap(),
    ])
    .await;
    assert_eq!(outcome.code, 1);
    assert!(
        outcome.stderr.contains("Error parsing job file"),
        "{}",
        outcome.stderr
    );
    assert!(outcome.stderr.contains("bad.hcl:"), "{}", outcome.stderr);
}

#[tokio::test]
async fn an_unreachable_agent_is_named_in_the_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let outcome = drover(&["job", "status", "-address", &address]).await;
    assert_eq!(outcome.code, 1);
    assert!(
        outcome.stderr.contains(&format!(
            "Error querying jobs: is the agent running at {address}?"
        )),
        "{}",
        outcome.stderr
    );
}

#[tokio::test]
async fn job_status_lists_jobs_and_shows_one_with_its_sections() {
    let agent = start_agent().await;
    let empty = drover(&["job", "status", "-address", &agent.address]).await;
    assert_eq!(empty.stdout.trim(), "No running jobs");
    let (job, _allocation) = job_with_events(&agent.backend);
    let mut summary = drover_structs::JobSummary::new_for_job(&job);
    summary.summary.insert(
        "work".into(),
        TaskGroupSummary {
            running: 1,
            ..Default::default()
        },
    );
    agent.backend.put_summary(summary);
    agent.backend.put_evaluation(Evaluation {
        id: "e1".into(),
        namespace: "default".into(),
        job_id: "report".into(),
        status: "blocked".into(),
        failed_tg_allocs: [(
            "work".to_string(),
            AllocMetric {
                nodes_evaluated: 1,
                nodes_exhausted: 1,
                ..Default::default()
            },
        )]
        .into_iter()
        .collect(),
        ..Evaluation::default()
    });

    let list = drover(&["status", "-address", &agent.address]).await;
    assert_eq!(list.code, 0);
    let header = list.stdout.lines().next().unwrap();
    assert_eq!(header, "ID      Type   Priority  Status   Submit Date");
    assert!(
        list.stdout
            .lines()
            .nth(1)
            .unwrap()
            .starts_with("report  batch  50")
    );

    let one = drover(&["job", "status", "-address", &agent.address, "rep"]).await;
    assert_eq!(one.code, 0, "{}", one.stderr);
    let text = one.stdout;
    assert!(text.contains("ID            = report\n"), "{text}");
    assert!(text.contains("Type          = batch\n"));
    assert!(text.contains("\nSummary\nTask Group  Queued  Starting  Running  Failed  Complete  Lost  Unknown\nwork        0       0         1        0       0         0     0\n"), "{text}");
    assert!(
        text.contains(
            "\nPlacement Failure\nTask Group \"work\":\n  * Resources exhausted on 1 nodes\n"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "\nAllocations\nID        Node ID   Task Group  Version  Desired  Status   Created"
        ),
        "{text}"
    );
    assert!(
        text.contains("8e3a5f1c  f1d90000  work        0        run      running"),
        "{text}"
    );

    let json = drover(&[
        "job",
        "status",
        "-json",
        "-address",
        &agent.address,
        "report",
    ])
    .await;
    let parsed: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(parsed["ID"], "report");
    let missing = drover(&["job", "status", "-address", &agent.address, "zzz"]).await;
    assert_eq!(missing.code, 1);
    assert!(
        missing
            .stderr
            .contains("No job(s) with prefix or id \"zzz\" found")
    );
}

#[tokio::test]
async fn alloc_status_resolves_short_ids_and_shows_task_events() {
    let agent = start_agent().await;
    job_with_events(&agent.backend);
    let outcome = drover(&["alloc", "status", "-address", &agent.address, "8e3a"]).await;
    assert_eq!(outcome.code, 0, "{}", outcome.stderr);
    let text = outcome.stdout;
    assert!(text.contains("ID                  = 8e3a5f1c\n"), "{text}");
    assert!(text.contains("Client Status       = running\n"));
    assert!(text.contains("Desired Description = <none>\n"));
    assert!(text.contains("Task \"count\" is \"running\""));
    assert!(text.contains("Total Restarts = 0"));
    let events = text.split("Recent Events:\n").nth(1).unwrap();
    let lines: Vec<&str> = events.lines().collect();
    assert_eq!(lines[0], "Time                  Type      Description");
    assert_eq!(
        lines[1],
        "2023-11-14T22:13:21Z  Started   Task started by client"
    );
    assert_eq!(
        lines[2],
        "2023-11-14T22:13:20Z  Received  Task received by client"
    );

    let too_short = drover(&["alloc", "status", "-address", &agent.address, "8"]).await;
    assert_eq!(too_short.code, 1);
    let unknown = drover(&["alloc", "status", "-address", &agent.address, "ffff"]).await;
    assert!(
        unknown
            .stderr
            .contains("No allocation(s) with prefix or id \"ffff\" found")
    );
}

#[tokio::test]
async fn alloc_logs_prints_whole_logs_tails_and_stderr() {
    let agent = start_agent().await;
    let (_job, allocation) = job_with_events(&agent.backend);
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("alloc/logs");
    std::fs::create_dir_all(&logs).unwrap();
    let lines: String = (1..=30).map(|number| format!("line {number}\n")).collect();
    std::fs::write(logs.join("count.stdout.0"), &lines[..100]).unwrap();
    std::fs::write(logs.join("count.stdout.1"), &lines[100..]).unwrap();
    std::fs::write(logs.join("count.stderr.0"), "warning\n").unwrap();
    agent
        .backend
        .set_alloc_dir(&allocation.id, dir.path().to_path_buf());

    let whole = drover(&["alloc", "logs", "-address", &agent.address, "8e3a"]).await;
    assert_eq!(whole.code, 0, "{}", whole.stderr);
    assert_eq!(whole.stdout, lines);
    let tail = drover(&[
        "alloc",
        "logs",
        "-address",
        &agent.address,
        "-tail",
        "-n",
        "3",
        "8e3a",
        "count",
    ])
    .await;
    assert_eq!(tail.stdout, "line 28\nline 29\nline 30\n");
    let stderr = drover(&[
        "alloc",
        "logs",
        "-stderr",
        "-address",
        &agent.address,
        "8e3a",
    ])
    .await;
    assert_eq!(stderr.stdout, "warning\n");
    let unknown = drover(&["alloc", "logs", "-address", &agent.address, "8e3a", "nope"]).await;
    assert_eq!(unknown.code, 1);
    assert!(
        unknown.stderr.contains("unknown task name"),
        "{}",
        unknown.stderr
    );
}

#[tokio::test]
async fn alloc_restart_signal_and_stop_reach_the_agent() {
    let agent = start_agent().await;
    let (_job, allocation) = job_with_events(&agent.backend);
    let restart = drover(&[
        "alloc",
        "restart",
        "-address",
        &agent.address,
        "8e3a",
        "count",
    ])
    .await;
    assert_eq!(restart.code, 0, "{}", restart.stderr);
    let all = drover(&[
        "alloc",
        "restart",
        "-all-tasks",
        "-address",
        &agent.address,
        "8e3a",
    ])
    .await;
    assert_eq!(all.code, 0, "{}", all.stderr);
    let conflicting = drover(&[
        "alloc",
        "restart",
        "-all-tasks",
        "-task",
        "count",
        "-address",
        &agent.address,
        "8e3a",
    ])
    .await;
    assert_eq!(conflicting.code, 1);
    assert!(conflicting.stderr.contains("-all-tasks"));
    let signal = drover(&[
        "alloc",
        "signal",
        "-s",
        "SIGUSR1",
        "-address",
        &agent.address,
        "8e3a",
    ])
    .await;
    assert_eq!(signal.code, 0, "{}", signal.stderr);
    let bad_task = drover(&[
        "alloc",
        "signal",
        "-s",
        "SIGUSR1",
        "-task",
        "nope",
        "-address",
        &agent.address,
        "8e3a",
    ])
    .await;
    assert_eq!(bad_task.code, 1);
    assert!(
        bad_task.stderr.contains("Error signalling allocation"),
        "{}",
        bad_task.stderr
    );
    assert_eq!(
        agent.backend.client_calls(),
        vec![
            ClientCall::Restart {
                alloc_id: allocation.id.clone(),
                task: Some("count".into()),
                all_tasks: false
            },
            ClientCall::Restart {
                alloc_id: allocation.id.clone(),
                task: None,
                all_tasks: true
            },
            ClientCall::Signal {
                alloc_id: allocation.id.clone(),
                task: None,
                signal: "SIGUSR1".into()
            },
        ]
    );
    let stop = drover(&[
        "alloc",
        "stop",
        "-detach",
        "-address",
        &agent.address,
        "8e3a",
    ])
    .await;
    assert_eq!(stop.code, 0, "{}", stop.stderr);
    assert!(
        agent
            .backend
            .evaluation(stop.stdout.trim())
            .unwrap()
            .is_some()
    );
}

#[tokio::test]
async fn job_stop_purge_and_inspect() {
    let agent = start_agent().await;
    job_with_events(&agent.backend);
    let inspect = drover(&["job", "inspect", "-address", &agent.address, "report"]).await;
    assert_eq!(inspect.code, 0);
    let parsed: serde_json::Value = serde_json::from_str(&inspect.stdout).unwrap();
    assert_eq!(parsed["Job"]["ID"], "report");
    let stop = drover(&[
        "job",
        "stop",
        "-purge",
        "-detach",
        "-address",
        &agent.address,
        "report",
    ])
    .await;
    assert_eq!(stop.code, 0, "{}", stop.stderr);
    assert!(agent.backend.job("default", "report").unwrap().is_none());
}

#[tokio::test]
async fn node_status_lists_and_shows_nodes() {
    let agent = start_agent().await;
    agent.backend.put_node(Node {
        id: "f1d90000-0000-0000-0000-000000000000".into(),
        name: "node1".into(),
        datacenter: "dc1".into(),
        node_pool: "default".into(),
        scheduling_eligibility: "eligible".into(),
        status: "ready".into(),
        http_addr: "127.0.0.1:4646".into(),
        drivers: [(
            "docker".to_owned(),
            drover_structs::DriverInfo {
                detected: true,
                healthy: false,
                health_description: "Failed to connect to docker daemon".into(),
                update_time: drover_structs::Timestamp::from_unix_nanos(1_795_000_000_000_000_000),
                ..Default::default()
            },
        )]
        .into(),
        events: vec![
            drover_structs::NodeEvent {
                message: "Node registered".into(),
                subsystem: "Cluster".into(),
                timestamp: drover_structs::Timestamp::from_unix_nanos(1_795_000_000_000_000_000),
                ..Default::default()
            },
            drover_structs::NodeEvent {
                message: "Driver docker is not healthy".into(),
                subsystem: "Driver".into(),
                details: [("driver".to_owned(), "docker".to_owned())].into(),
                timestamp: drover_structs::Timestamp::from_unix_nanos(1_795_000_060_000_000_000),
                ..Default::default()
            },
        ],
        ..Node::default()
    });
    let list = drover(&["node", "status", "-address", &agent.address]).await;
    assert_eq!(list.code, 0);
    assert_eq!(
        list.stdout,
        "ID        Node Pool  DC   Name   Class   Drain  Eligibility  Status\nf1d90000  default    dc1  node1  <none>  false  eligible     ready\n"
    );
    let one = drover(&["node", "status", "-address", &agent.address, "f1d9"]).await;
    assert_eq!(one.code, 0, "{}", one.stderr);
    assert!(
        one.stdout.contains("Name         = node1"),
        "{}",
        one.stdout
    );
    assert!(one.stdout.contains("No allocations placed"));
    // Nomad's `Node Events`, newest first, a driver's named as its subsystem.
    assert!(
        one.stdout.contains(
            "\nNode Events\nTime                  Subsystem       Message\n\
             2026-11-18T11:07:40Z  Driver: docker  Driver docker is not healthy\n\
             2026-11-18T11:06:40Z  Cluster         Node registered\n"
        ),
        "{}",
        one.stdout
    );
    assert!(!one.stdout.contains("\nDrivers\n"), "{}", one.stdout);
    let verbose = drover(&[
        "node",
        "status",
        "-verbose",
        "-address",
        &agent.address,
        "f1d9",
    ])
    .await;
    assert_eq!(verbose.code, 0, "{}", verbose.stderr);
    assert!(
        verbose.stdout.contains(
            "\nDrivers\nDriver  Detected  Healthy  Message                             Time\n\
             docker  true      false    Failed to connect to docker daemon  2026-11-18T11:06:40Z\n"
        ),
        "{}",
        verbose.stdout
    );
    assert!(
        verbose
            .stdout
            .contains("Driver: docker  Driver docker is not healthy  driver: docker\n"),
        "{}",
        verbose.stdout
    );
}

#[tokio::test]
async fn usage_errors_exit_1_and_help_exits_0() {
    let unknown = drover(&["job", "explode"]).await;
    assert_eq!(unknown.code, 1);
    let help = drover(&["job", "-help"]).await;
    assert_eq!(help.code, 0, "{}", help.stderr);
    assert!(help.stdout.contains("run"));
}

/// A writer the test can read while the command is still writing.
#[derive(Clone, Default)]
struct SharedBuffer(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for SharedBuffer {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(data);
        Ok(data.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl SharedBuffer {
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }

    async fn wait_for(&self, expected: &str) {
        for _ in 0..500 {
            if self.text() == expected {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("never saw {expected:?}; saw {:?}", self.text());
    }
}

#[tokio::test]
async fn alloc_logs_follow_keeps_printing_across_rotation() {
    let agent = start_agent().await;
    let (_job, allocation) = job_with_events(&agent.backend);
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("alloc/logs");
    std::fs::create_dir_all(&logs).unwrap();
    std::fs::write(logs.join("count.stdout.0"), "first\n").unwrap();
    agent
        .backend
        .set_alloc_dir(&allocation.id, dir.path().to_path_buf());

    let output = SharedBuffer::default();
    let mut writer = output.clone();
    let mut errors = Vec::new();
    let argv: Vec<OsString> = [
        "drover",
        "alloc",
        "logs",
        "-f",
        "-address",
        &agent.address,
        "8e3a",
    ]
    .iter()
    .map(OsString::from)
    .collect();
    let follow = drover::run(argv, &mut writer, &mut errors);
    let script = async {
        output.wait_for("first\n").await;
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(logs.join("count.stdout.0"))
            .unwrap();
        std::io::Write::write_all(&mut file, b"second\n").unwrap();
        std::fs::write(logs.join("count.stdout.1"), "third\n").unwrap();
        output.wait_for("first\nsecond\nthird\n").await;
    };
    tokio::select! {
        code = follow => panic!("follow ended by itself with {code}"),
        () = script => {}
    }
}

#[tokio::test]
async fn run_of_a_service_job_waits_for_its_allocations_to_start() {
    let agent = start_agent().await;
    let backend = Arc::clone(&agent.backend);
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("svc.hcl");
    std::fs::write(
        &spec,
        "job \"svc\" {\n  datacenters = [\"dc1\"]\n  group \"g\" {\n    task \"t\" {\n      driver = \"raw_exec\"\n      config {\n        command = \"/bin/sleep\"\n      }\n    }\n  }\n}\n",
    )
    .unwrap();
    let scheduler = tokio::spawn(async move {
        let evaluation = loop {
            if let Some(evaluation) = backend.evaluations("*", "").unwrap().into_iter().next() {
                break evaluation;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let job = backend.job("default", "svc").unwrap().unwrap();
        let mut allocation = Allocation {
            id: "a110c000-0000-0000-0000-000000000000".into(),
            namespace: "default".into(),
            eval_id: evaluation.id.clone(),
            node_id: "f1d90000".into(),
            job_id: "svc".into(),
            job: Some(std::sync::Arc::new(job)),
            task_group: "g".into(),
            desired_status: "run".into(),
            client_status: "pending".into(),
            ..Allocation::default()
        };
        backend.put_allocation(allocation.clone());
        backend.put_evaluation(Evaluation {
            status: "complete".into(),
            ..evaluation
        });
        tokio::time::sleep(Duration::from_millis(1500)).await;
        allocation.client_status = "running".into();
        allocation.client_description = "Tasks are running".into();
        backend.put_allocation(allocation);
    });
    let outcome = drover(&[
        "job",
        "run",
        "-address",
        &agent.address,
        spec.to_str().unwrap(),
    ])
    .await;
    scheduler.await.unwrap();
    assert_eq!(outcome.code, 0, "{}{}", outcome.stdout, outcome.stderr);
    let text = outcome.stdout;
    assert!(
        text.contains("Allocation \"a110c000\" created: node \"f1d90000\", group \"g\""),
        "{text}"
    );
    assert!(text.contains("finished with status \"complete\""), "{text}");
    assert!(
        text.contains("Allocation \"a110c000\" status changed: \"pending\" -> \"running\""),
        "{text}"
    );
}

#[tokio::test]
async fn status_finds_jobs_allocations_and_nodes_by_prefix() {
    let agent = start_agent().await;
    job_with_events(&agent.backend);
    agent.backend.put_node(Node {
        id: "c0ffee00-0000-0000-0000-000000000000".into(),
        name: "node9".into(),
        status: "ready".into(),
        ..Node::default()
    });
    let job = drover(&["status", "-address", &agent.address, "rep"]).await;
    assert!(
        job.stdout.contains("ID            = report"),
        "{}",
        job.stdout
    );
    let allocation = drover(&["status", "-address", &agent.address, "8e3a5f"]).await;
    assert!(
        allocation
            .stdout
            .contains("Name                = report.work[0]"),
        "{}",
        allocation.stdout
    );
    let node = drover(&["status", "-address", &agent.address, "c0ffee"]).await;
    assert!(
        node.stdout.contains("Name         = node9"),
        "{}",
        node.stdout
    );
    let nothing = drover(&["status", "-address", &agent.address, "zzzz"]).await;
    assert_eq!(nothing.code, 1);
    assert!(
        nothing
            .stderr
            .contains("No matches returned for query \"zzzz\"")
    );
    let as_json = drover(&[
        "alloc",
        "status",
        "-json",
        "-address",
        &agent.address,
        "8e3a",
    ])
    .await;
    let parsed: serde_json::Value = serde_json::from_str(&as_json.stdout).unwrap();
    assert_eq!(parsed["TaskStates"]["count"]["State"], "running");
}

#[tokio::test]
async fn an_ambiguous_allocation_prefix_lists_the_candidates() {
    let agent = start_agent().await;
    let (_job, allocation) = job_with_events(&agent.backend);
    agent.backend.put_allocation(Allocation {
        id: "8e3a9999-0000-0000-0000-000000000000".into(),
        ..allocation
    });
    let outcome = drover(&["alloc", "status", "-address", &agent.address, "8e3a"]).await;
    assert_eq!(outcome.code, 1);
    assert!(
        outcome
            .stderr
            .starts_with("Prefix matched multiple allocations\n\nID "),
        "{}",
        outcome.stderr
    );
    assert!(outcome.stderr.contains("8e3a5f1c") && outcome.stderr.contains("8e3a9999"));
}

#[tokio::test]
async fn alloc_fs_lists_directories_prints_files_and_refuses_escapes() {
    let agent = start_agent().await;
    let (_job, allocation) = job_with_events(&agent.backend);
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("alloc/data")).unwrap();
    std::fs::create_dir_all(dir.path().join("count/local")).unwrap();
    std::fs::write(dir.path().join("alloc/data/report.txt"), "all done\n").unwrap();
    agent
        .backend
        .set_alloc_dir(&allocation.id, dir.path().to_path_buf());

    let root = drover(&["alloc", "fs", "-address", &agent.address, "8e3a"]).await;
    assert_eq!(root.code, 0, "{}", root.stderr);
    let lines: Vec<&str> = root.stdout.lines().collect();
    assert!(lines[0].starts_with("Mode"), "{}", root.stdout);
    assert!(
        lines[1].starts_with("drwx") && lines[1].ends_with("alloc/"),
        "{}",
        root.stdout
    );
    assert!(lines[2].ends_with("count/"));
    let file = drover(&[
        "alloc",
        "fs",
        "-address",
        &agent.address,
        "8e3a",
        "alloc/data/report.txt",
    ])
    .await;
    assert_eq!(file.stdout, "all done\n");
    let stat = drover(&[
        "alloc",
        "fs",
        "-stat",
        "-json",
        "-address",
        &agent.address,
        "8e3a",
        "alloc/data/report.txt",
    ])
    .await;
    let parsed: serde_json::Value = serde_json::from_str(&stat.stdout).unwrap();
    assert_eq!(parsed["Size"], 9);
    let escape = drover(&[
        "alloc",
        "fs",
        "-address",
        &agent.address,
        "8e3a",
        "../../etc/passwd",
    ])
    .await;
    assert_eq!(escape.code, 1);
    assert!(
        escape.stderr.contains("path escapes the alloc directory"),
        "{}",
        escape.stderr
    );
}

#[tokio::test]
async fn every_example_registers_through_the_api() {
    let agent = start_agent().await;
    for name in [
        "web.hcl",
        "batch.hcl",
        "lifecycle.hcl",
        "exec.hcl",
        "parameterized.hcl",
        "periodic.hcl",
    ] {
        let outcome = drover(&[
            "job",
            "run",
            "-detach",
            "-address",
            &agent.address,
            &example(name),
        ])
        .await;
        assert_eq!(outcome.code, 0, "{name}: {}", outcome.stderr);
        // Nomad's CLI prints the job's warnings first, then the registration.
        assert!(
            outcome.stdout.contains("Job registration successful"),
            "{name}: {}",
            outcome.stdout
        );
    }
    assert_eq!(agent.backend.jobs("*", "").unwrap().len(), 6);
    // A periodic job shows its next launch and its (no) children as Nomad shows them.
    let periodic_id = "cleanup-tmp";
    let status = drover(&["job", "status", "-address", &agent.address, periodic_id]).await;
    assert!(
        status.stdout.contains("Periodic             = true")
            && status.stdout.contains("Next Periodic Launch = ")
            && status.stdout.contains("No instances of periodic job found"),
        "{}",
        status.stdout
    );
    assert!(
        status
            .stdout
            .contains("\nChildren Job Summary\nPending  Running  Dead\n0        0        0\n"),
        "{}",
        status.stdout
    );
}

#[tokio::test]
async fn alloc_logs_follow_with_tail_prints_the_last_lines_then_new_ones() {
    let agent = start_agent().await;
    let (_job, allocation) = job_with_events(&agent.backend);
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("alloc/logs");
    std::fs::create_dir_all(&logs).unwrap();
    std::fs::write(logs.join("count.stdout.0"), "one\ntwo\nthree\nfour\n").unwrap();
    agent
        .backend
        .set_alloc_dir(&allocation.id, dir.path().to_path_buf());

    let output = SharedBuffer::default();
    let mut writer = output.clone();
    let mut errors = Vec::new();
    let argv: Vec<OsString> = [
        "drover",
        "alloc",
        "logs",
        "-f",
        "-tail",
        "-n",
        "2",
        "-address",
        &agent.address,
        "8e3a",
    ]
    .iter()
    .map(OsString::from)
    .collect();
    let follow = drover::run(argv, &mut writer, &mut errors);
    let script = async {
        output.wait_for("three\nfour\n").await;
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(logs.join("count.stdout.0"))
            .unwrap();
        std::io::Write::write_all(&mut file, b"five\n").unwrap();
        output.wait_for("three\nfour\nfive\n").await;
    };
    tokio::select! {
        code = follow => panic!("follow ended by itself with {code}"),
        () = script => {}
    }
}

#[tokio::test]
async fn job_allocs_eval_status_and_server_members() {
    let agent = start_agent().await;
    job_with_events(&agent.backend);
    let allocs = drover(&["job", "allocs", "-address", &agent.address, "report"]).await;
    assert_eq!(allocs.code, 0, "{}", allocs.stderr);
    assert!(
        allocs
            .stdout
            .starts_with("ID        Node ID   Task Group  Version  Desired  Status   Created"),
        "{}",
        allocs.stdout
    );
    assert!(allocs.stdout.contains("8e3a5f1c  f1d90000  work"));

    agent.backend.put_evaluation(Evaluation {
        id: "b10cfeed-0000-0000-0000-000000000000".into(),
        namespace: "default".into(),
        job_id: "report".into(),
        r#type: "batch".into(),
        triggered_by: "job-register".into(),
        priority: 50,
        status: "complete".into(),
        blocked_eval: "b10cbeef-0000-0000-0000-000000000000".into(),
        failed_tg_allocs: [(
            "work".to_string(),
            AllocMetric {
                nodes_evaluated: 1,
                coalesced_failures: 2,
                constraint_filtered: [("${attr.kernel.name} = windows".to_string(), 1)]
                    .into_iter()
                    .collect(),
                ..AllocMetric::default()
            },
        )]
        .into_iter()
        .collect(),
        ..Evaluation::default()
    });
    let eval = drover(&["eval", "status", "-address", &agent.address, "b10cf"]).await;
    assert_eq!(eval.code, 0, "{}", eval.stderr);
    assert!(
        eval.stdout.contains("ID                 = b10cfeed\n"),
        "{}",
        eval.stdout
    );
    assert!(eval.stdout.contains("TriggeredBy        = job-register\n"));
    assert!(eval.stdout.contains("Placement Failures = true\n"));
    assert!(eval.stdout.contains("Task Group \"work\" (failed to place 3 allocations):\n  * Constraint \"${attr.kernel.name} = windows\": 1 nodes excluded by filter\n"), "{}", eval.stdout);
    assert!(
        eval.stdout
            .contains("Evaluation \"b10cbeef\" waiting for additional capacity")
    );

    let members = drover(&["server", "members", "-address", &agent.address]).await;
    assert_eq!(members.code, 0, "{}", members.stderr);
    let rows: Vec<Vec<&str>> = members
        .stdout
        .lines()
        .map(|line| line.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows[0],
        vec![
            "Name",
            "Address",
            "Port",
            "Status",
            "Leader",
            "Protocol",
            "Build",
            "Datacenter",
            "Region"
        ]
    );
    assert_eq!(
        rows[1],
        vec![
            "node1.global",
            "127.0.0.1",
            "4646",
            "alive",
            "true",
            "2",
            env!("CARGO_PKG_VERSION"),
            "dc1",
            "global"
        ]
    );
}

#[tokio::test]
async fn alloc_exec_prints_output_and_passes_the_exit_code_through() {
    let agent = start_agent().await;
    job_with_events(&agent.backend);
    let hello = drover(&[
        "alloc",
        "exec",
        "-i=false",
        "-t=false",
        "-address",
        &agent.address,
        "8e3a",
        "/bin/echo",
        "hi",
    ])
    .await;
    assert_eq!(hello.code, 0, "{}", hello.stderr);
    assert_eq!(hello.stdout, "hi\n");
    let seven = drover(&[
        "alloc",
        "exec",
        "-i=false",
        "-t=false",
        "-address",
        &agent.address,
        "8e3a",
        "/bin/sh",
        "-c",
        "echo err >&2; exit 7",
    ])
    .await;
    assert_eq!(seven.code, 7);
    assert_eq!(seven.stderr, "err\n");
    let flags = drover(&[
        "alloc",
        "exec",
        "-i=false",
        "-t=false",
        "-address",
        &agent.address,
        "8e3a",
        "/bin/ls",
        "-la",
        "/",
    ])
    .await;
    assert_eq!(flags.code, 0, "{}", flags.stderr);
    assert!(flags.stdout.contains(".."), "{}", flags.stdout);
    let bad_task = drover(&[
        "alloc",
        "exec",
        "-i=false",
        "-t=false",
        "-task",
        "nope",
        "-address",
        &agent.address,
        "8e3a",
        "/bin/true",
    ])
    .await;
    assert_eq!(bad_task.code, 1);
    assert!(bad_task.stderr.contains("nope"), "{}", bad_task.stderr);
}
