//! End to end: the task runner's operations through the real agent, CLI and HTTP API —
//! lifecycle ordering, restarts (one task, all tasks including dead ones), signals, unknown
//! signals and tasks, kill of a tree that ignores SIGTERM, and log rotation followed live.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{Agent, drover_bin, http, pids_with_cmdline, wait_for, write_jobspec};

const LIMIT: Duration = Duration::from_secs(60);

fn only_alloc(agent: &Agent, job_id: &str) -> Value {
    wait_for(&format!("an alloc of {job_id}"), LIMIT, || {
        agent
            .get_json(&format!("/v1/job/{job_id}/allocations"))
            .as_array()
            .and_then(|allocs| allocs.first().cloned())
    })
}

fn alloc(agent: &Agent, alloc_id: &str) -> Value {
    agent.get_json(&format!("/v1/allocation/{alloc_id}"))
}

fn event_types(alloc: &Value, task: &str) -> Vec<String> {
    alloc["TaskStates"][task]["Events"]
        .as_array()
        .map(|events| {
            events
                .iter()
                .filter_map(|event| event["Type"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn count(events: &[String], kind: &str) -> usize {
    events.iter().filter(|event| *event == kind).count()
}

fn first_event_time(alloc: &Value, task: &str, kind: &str) -> i64 {
    alloc["TaskStates"][task]["Events"]
        .as_array()
        .and_then(|events| {
            events
                .iter()
                .find(|event| event["Type"] == kind)
                .and_then(|event| event["Time"].as_i64())
        })
        .unwrap_or_else(|| panic!("task {task} has a {kind} event: {alloc}"))
}

#[test]
fn lifecycle_tasks_run_in_order_and_all_tasks_restart_reruns_them() {
    let agent = Agent::start_dev();
    let marker = format!("lc-{}", std::process::id());
    let jobspec = format!(
        r#"
job "lc" {{
  type = "batch"
  group "g" {{
    task "pre" {{
      driver = "raw_exec"
      lifecycle {{
        hook = "prestart"
      }}
      config {{
        command = "/bin/sh"
        args    = ["-c", "echo pre >> $NOMAD_ALLOC_DIR/order"]
      }}
    }}
    task "side" {{
      driver = "raw_exec"
      lifecycle {{
        hook    = "prestart"
        sidecar = true
      }}
      config {{
        command = "/bin/sh"
        args    = ["-c", "echo side >> $NOMAD_ALLOC_DIR/order; sleep 3600; echo {marker}"]
      }}
    }}
    task "main" {{
      driver = "raw_exec"
      config {{
        command = "/bin/sh"
        args    = ["-c", "sleep 1; echo main >> $NOMAD_ALLOC_DIR/order"]
      }}
    }}
    task "post" {{
      driver = "raw_exec"
      lifecycle {{
        hook = "poststart"
      }}
      config {{
        command = "/bin/sh"
        args    = ["-c", "echo post >> $NOMAD_ALLOC_DIR/order"]
      }}
    }}
    task "stop" {{
      driver = "raw_exec"
      lifecycle {{
        hook = "poststop"
      }}
      config {{
        command = "/bin/sh"
        args    = ["-c", "echo stop >> $NOMAD_ALLOC_DIR/order"]
      }}
    }}
  }}
}}
"#
    );
    let (_dir, path) = write_jobspec("lc.hcl", &jobspec);
    agent.cli_ok(&["job", "run", "-detach", &path.to_string_lossy()]);
    let alloc_id = only_alloc(&agent, "lc")["ID"].as_str().unwrap().to_owned();
    let done = wait_for("the lifecycle alloc to complete", LIMIT, || {
        let alloc = alloc(&agent, &alloc_id);
        (alloc["ClientStatus"] == "complete").then_some(alloc)
    });
    assert!(
        pids_with_cmdline(&marker).is_empty(),
        "the sidecar is stopped when main is done"
    );

    let order_file = agent
        .data_dir
        .join("alloc")
        .join(&alloc_id)
        .join("alloc/order");
    let order = std::fs::read_to_string(&order_file).expect("order file");
    let lines: Vec<&str> = order.lines().collect();
    let position = |name: &str| lines.iter().position(|line| *line == name).unwrap();
    // Prestart tasks (ephemeral and sidecar) start together, before main.
    assert!(position("pre") < position("main"), "{order}");
    assert!(position("side") < position("main"), "{order}");
    assert!(position("main") < position("stop"), "{order}");
    assert!(position("post") < position("stop"), "{order}");
    assert_eq!(
        *lines.last().unwrap(),
        "stop",
        "poststop runs last: {order}"
    );

    // The event times tell the same story.
    let pre_started = first_event_time(&done, "pre", "Started");
    let main_started = first_event_time(&done, "main", "Started");
    let stop_started = first_event_time(&done, "stop", "Started");
    assert!(pre_started <= main_started && main_started <= stop_started);

    // Every task is dead: an AllTasks restart runs them all again, in lifecycle order.
    std::fs::remove_file(&order_file).expect("reset order");
    agent.cli_ok(&["alloc", "restart", "-all-tasks", &alloc_id]);
    wait_for("the rerun to finish", LIMIT, || {
        let alloc = alloc(&agent, &alloc_id);
        let order = std::fs::read_to_string(&order_file).unwrap_or_default();
        (alloc["ClientStatus"] == "complete" && order.lines().last() == Some("stop")).then_some(())
    });
    let rerun = std::fs::read_to_string(&order_file).expect("order file");
    let rerun_lines: Vec<&str> = rerun.lines().collect();
    let rerun_position = |name: &str| rerun_lines.iter().position(|line| *line == name).unwrap();
    assert!(rerun_position("pre") < rerun_position("main"), "{rerun}");
    assert!(rerun_position("main") < rerun_position("stop"), "{rerun}");
    let done = alloc(&agent, &alloc_id);
    assert_eq!(count(&event_types(&done, "main"), "Started"), 2);
}

#[test]
fn signals_reach_the_task_and_bad_names_are_refused() {
    let agent = Agent::start_dev();
    let marker = format!("sig-{}", std::process::id());
    let (_dir, path) = write_jobspec(
        "sig.hcl",
        &format!(
            r#"
job "sig" {{
  group "g" {{
    task "t" {{
      driver = "raw_exec"
      config {{
        command = "/bin/sh"
        args    = ["-c", "trap 'echo got-usr1' USR1; while true; do sleep 0.1; done; echo {marker}"]
      }}
    }}
  }}
}}
"#
        ),
    );
    agent.cli_ok(&["job", "run", "-detach", &path.to_string_lossy()]);
    let alloc_id = wait_for("a running alloc", LIMIT, || {
        let alloc = only_alloc(&agent, "sig");
        (alloc["ClientStatus"] == "running").then(|| alloc["ID"].as_str().unwrap().to_owned())
    });

    agent.cli_ok(&["alloc", "signal", "-s", "SIGUSR1", &alloc_id, "t"]);
    wait_for("the trap to fire", LIMIT, || {
        agent
            .cli_ok(&["alloc", "logs", &alloc_id, "t"])
            .contains("got-usr1")
            .then_some(())
    });
    // Non-urgent updates reach the server on the status buffer's slower tick.
    wait_for("the Signaling event on the server", LIMIT, || {
        event_types(&alloc(&agent, &alloc_id), "t")
            .iter()
            .any(|event| event == "Signaling")
            .then_some(())
    });

    let url = agent.url(&format!("/v1/client/allocation/{alloc_id}/signal"));
    let (status, body) = http("POST", &url, Some(r#"{"Signal":"SIGNOPE","Task":"t"}"#));
    assert_eq!(status, 400, "unknown signal: {body}");
    // An unknown task is the alloc runner's error, which Nomad answers as an RPC error (500).
    let (status, body) = http("POST", &url, Some(r#"{"Signal":"SIGUSR1","Task":"nope"}"#));
    assert_eq!((status, body.as_str()), (500, "Task not found"));
    let (status, body) = http(
        "POST",
        &agent.url(&format!("/v1/client/allocation/{alloc_id}/restart")),
        Some(r#"{"TaskName":"nope"}"#),
    );
    assert_eq!(
        (status, body.as_str()),
        (500, "Could not find task runner for task: nope")
    );
    let (status, _) = http(
        "POST",
        &agent.url("/v1/client/allocation/00000000-0000-0000-0000-000000000000/signal"),
        Some(r#"{"Signal":"SIGUSR1"}"#),
    );
    assert_eq!(status, 404);

    // A user restart is not a failure and does not count against the policy.
    agent.cli_ok(&["alloc", "restart", &alloc_id, "t"]);
    wait_for("the restarted task to run", LIMIT, || {
        let alloc = alloc(&agent, &alloc_id);
        let events = event_types(&alloc, "t");
        (count(&events, "Started") == 2 && alloc["TaskStates"]["t"]["State"] == "running")
            .then_some(())
    });
    wait_for("the Restart Signaled event on the server", LIMIT, || {
        event_types(&alloc(&agent, &alloc_id), "t")
            .iter()
            .any(|event| event == "Restart Signaled")
            .then_some(())
    });
}

#[test]
fn a_tree_that_ignores_sigterm_is_killed_after_kill_timeout() {
    let agent = Agent::start_dev();
    let marker = format!("stubborn-{}", std::process::id());
    let (_dir, path) = write_jobspec(
        "stubborn.hcl",
        &format!(
            r#"
job "stubborn" {{
  group "g" {{
    task "t" {{
      driver       = "raw_exec"
      kill_signal  = "SIGTERM"
      kill_timeout = "2s"
      config {{
        command = "/bin/sh"
        args    = ["-c", "trap '' TERM; sh -c \"trap '' TERM; sleep 3600; echo {marker}\" & sleep 3600; echo {marker}"]
      }}
    }}
  }}
}}
"#
        ),
    );
    agent.cli_ok(&["job", "run", "-detach", &path.to_string_lossy()]);
    wait_for("parent and child running", LIMIT, || {
        (pids_with_cmdline(&marker).len() >= 2).then_some(())
    });
    let started = Instant::now();
    agent.cli_ok(&["job", "stop", "-detach", "stubborn"]);
    wait_for("the whole tree to die", LIMIT, || {
        pids_with_cmdline(&marker).is_empty().then_some(())
    });
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(1500),
        "SIGTERM was ignored, so only the SIGKILL after kill_timeout ends it (took {took:?})"
    );
    let alloc = only_alloc(&agent, "stubborn");
    let alloc = wait_for("the task to be killed", LIMIT, || {
        let alloc = agent.get_json(&format!("/v1/allocation/{}", alloc["ID"].as_str().unwrap()));
        event_types(&alloc, "t")
            .iter()
            .any(|event| event == "Killed")
            .then_some(alloc)
    });
    let killing = alloc["TaskStates"]["t"]["Events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|event| event["Type"] == "Killing")
        .cloned()
        .expect("a Killing event");
    assert_eq!(killing["KillTimeout"], 2_000_000_000_i64, "{killing}");
}

#[test]
fn logs_rotate_without_splitting_lines_and_follow_crosses_rotations() {
    let agent = Agent::start_dev();
    // 195-byte lines, 1 MB files, 3 files kept: about 12 files' worth of output.
    let (_dir, path) = write_jobspec(
        "chatty.hcl",
        r#"
job "chatty" {
  group "g" {
    task "t" {
      driver = "raw_exec"
      logs {
        max_files     = 3
        max_file_size = 1
      }
      config {
        command = "/bin/sh"
        args    = ["-c", "sleep 1; i=0; while [ $i -lt 60000 ]; do printf 'line-%08d-%0180d\n' $i 0; i=$((i+1)); done; sleep 3600"]
      }
    }
  }
}
"#,
    );
    agent.cli_ok(&["job", "run", "-detach", &path.to_string_lossy()]);
    let alloc_id = wait_for("a running alloc", LIMIT, || {
        let alloc = only_alloc(&agent, "chatty");
        (alloc["ClientStatus"] == "running").then(|| alloc["ID"].as_str().unwrap().to_owned())
    });

    // Follow from the start while the task writes; the follower must cross every rotation.
    let mut follower = Command::new(drover_bin())
        .args(["alloc", "logs", "-f", &alloc_id, "t"])
        .env("NOMAD_ADDR", &agent.address)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("follower starts");
    let stdout = follower.stdout.take().unwrap();
    let (lines_tx, lines_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut seen = 0u64;
    let mut last_number: Option<u64> = None;
    while last_number != Some(59_999) {
        let line = lines_rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .unwrap_or_else(|_| {
                panic!("followed {seen} lines (last {last_number:?}) before timing out")
            });
        // A follower that falls behind a rotated file that is then deleted loses the rest of
        // that file: its partial last line runs into the next file's data (Nomad's follower
        // does the same). Anywhere else a line is whole.
        let markers = line.matches("line-").count();
        assert!(
            line.len() == 194 || markers > 1,
            "a whole line, never a split one: {line:?}"
        );
        let last_marker = line.rfind("line-").expect("a line marker");
        let number: u64 = line[last_marker + 5..last_marker + 13]
            .parse()
            .expect("line number");
        if let Some(last) = last_number {
            assert!(number > last, "lines in order ({last} then {number})");
        }
        last_number = Some(number);
        seen += 1;
    }
    let _ = follower.kill();
    let _ = follower.wait();
    // A follower that kept up sees every line; one that fell behind a deleted file may skip
    // some, but never sees one twice or out of order, and always reaches the last.
    assert!(seen > 1000, "followed {seen} lines");

    let logs_dir = agent
        .data_dir
        .join("alloc")
        .join(&alloc_id)
        .join("alloc/logs");
    let files: Vec<String> = std::fs::read_dir(&logs_dir)
        .expect("logs dir")
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.starts_with("t.stdout."))
        .collect();
    assert!(files.len() <= 3, "at most max_files kept: {files:?}");
    for name in &files {
        let text = std::fs::read_to_string(logs_dir.join(name)).expect("log file");
        assert!(text.len() <= 1024 * 1024, "{name} within max_file_size");
        assert!(
            text.lines().all(|line| line.len() == 194),
            "{name} has no split line"
        );
    }
}
