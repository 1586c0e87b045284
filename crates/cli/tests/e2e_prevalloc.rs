//! End to end: a replacement allocation waits for the allocation it replaces. A destructive
//! update on one node starts the new version only once the old one has finished, so the new
//! task finds the old one's static port free.
//!
//! Not here: the wait itself (crate `client`, `allocrunner::upstream`); these tests drive the
//! real binary and read task states through the HTTP API.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod support;

use std::time::Duration;

use drover_structs::Timestamp;
use serde_json::Value;
use support::{Agent, wait_for, write_jobspec};

const LIMIT: Duration = Duration::from_secs(90);

fn python() -> String {
    let out = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3 runs");
    assert!(out.status.success(), "python3 -c failed");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A service whose task listens on the static port `port` (exiting 1 if it is taken) and,
/// told to stop, holds it 3 s more before exiting; never restarted. `version` only makes the
/// update destructive.
fn port_holder_job(port: u16, version: u32) -> String {
    let script = format!(
        "import signal, socket, sys, time\n\
         s = socket.socket()\n\
         s.bind(('127.0.0.1', {port}))\n\
         s.listen()\n\
         def stop(*_):\n    time.sleep(3)\n    sys.exit(0)\n\
         signal.signal(signal.SIGINT, stop)\n\
         signal.signal(signal.SIGTERM, stop)\n\
         print('listening', flush=True)\n\
         while True:\n    signal.pause()\n"
    );
    let script = serde_json::to_string(&script).unwrap();
    format!(
        r#"
job "holder" {{
  datacenters = ["dc1"]
  type        = "service"

  group "g" {{
    network {{
      port "http" {{
        static = {port}
      }}
    }}

    restart {{
      attempts = 0
      mode     = "fail"
    }}

    reschedule {{
      attempts  = 0
      unlimited = false
    }}

    ephemeral_disk {{
      size = 10
    }}

    task "server" {{
      driver       = "raw_exec"
      kill_timeout = "20s"

      logs {{
        max_files     = 2
        max_file_size = 2
      }}

      env {{
        VERSION = "{version}"
      }}

      config {{
        command = "{python}"
        args    = ["-c", {script}]
      }}

      resources {{
        cpu    = 10
        memory = 32
      }}
    }}
  }}
}}
"#,
        python = python(),
    )
}

fn allocs(agent: &Agent, job_id: &str) -> Vec<Value> {
    agent
        .get_json(&format!("/v1/job/{job_id}/allocations"))
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn alloc(agent: &Agent, alloc_id: &str) -> Value {
    agent.get_json(&format!("/v1/allocation/{alloc_id}"))
}

fn timestamp(value: &Value) -> Timestamp {
    serde_json::from_value(value.clone()).unwrap_or_else(|error| panic!("{value}: {error}"))
}

#[test]
fn a_destructive_update_starts_the_new_task_once_the_old_one_let_go_of_its_port() {
    let agent = Agent::start_dev();
    let port = free_port();
    let (_dir, v1) = write_jobspec("v1.hcl", &port_holder_job(port, 1));
    agent.cli_ok(&["job", "run", "-detach", &v1.to_string_lossy()]);
    let old_id = wait_for("the first version running", LIMIT, || {
        allocs(&agent, "holder")
            .iter()
            .find(|alloc| alloc["ClientStatus"] == "running")
            .and_then(|alloc| alloc["ID"].as_str().map(str::to_owned))
    });

    let (_dir2, v2) = write_jobspec("v2.hcl", &port_holder_job(port, 2));
    agent.cli_ok(&["job", "run", "-detach", &v2.to_string_lossy()]);
    let new_id = wait_for("the replacement placed", LIMIT, || {
        allocs(&agent, "holder")
            .iter()
            .find(|alloc| alloc["ID"] != old_id.as_str() && alloc["DesiredStatus"] == "run")
            .and_then(|alloc| alloc["ID"].as_str().map(str::to_owned))
    });
    assert_eq!(
        alloc(&agent, &new_id)["PreviousAllocation"],
        old_id.as_str()
    );
    // While the old task holds the port (3 s after it was told to stop), the new one is
    // pending and has not started.
    let pending = alloc(&agent, &new_id);
    if alloc(&agent, &old_id)["ClientStatus"] == "running" {
        assert_eq!(pending["ClientStatus"], "pending", "{pending:#}");
        assert_eq!(
            pending["TaskStates"]["server"]["StartedAt"]
                .as_str()
                .unwrap_or("0001-01-01T00:00:00Z"),
            "0001-01-01T00:00:00Z",
            "{pending:#}"
        );
    }
    let new = wait_for("the replacement running", LIMIT, || {
        let new = alloc(&agent, &new_id);
        assert_ne!(new["ClientStatus"], "failed", "{new:#}");
        (new["ClientStatus"] == "running").then_some(new)
    });
    let old = alloc(&agent, &old_id);
    assert_eq!(old["ClientStatus"], "complete", "{old:#}");
    let old_finished = timestamp(&old["TaskStates"]["server"]["FinishedAt"]);
    let new_started = timestamp(&new["TaskStates"]["server"]["StartedAt"]);
    assert!(
        new_started >= old_finished,
        "the new task started at {new_started:?}, before the old one finished at {old_finished:?}"
    );
    let state = &new["TaskStates"]["server"];
    assert_eq!(state["Failed"], false, "{state:#}");
    assert_eq!(state["Restarts"], 0, "{state:#}");
    // The old task held the port until its stop handler ended, seconds after its kill.
    let killing = old["TaskStates"]["server"]["Events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|event| event["Type"] == "Killing")
        .map(|event| event["Time"].as_i64().unwrap())
        .expect("a Killing event");
    assert!(
        new_started.unix_nanos().unwrap_or_default() - killing >= 2_000_000_000,
        "the new task started less than 2 s after the old one was told to stop"
    );
    agent.cli_ok(&["job", "stop", "-purge", "holder"]);
}

/// A service with a sticky ephemeral disk whose task writes what version wrote first into
/// `alloc/data` and its `local/` (keeping what is there), then sleeps.
fn sticky_job(version: u32) -> String {
    format!(
        r#"
job "sticky" {{
  datacenters = ["dc1"]
  type        = "service"

  group "g" {{
    ephemeral_disk {{
      size   = 10
      sticky = true
    }}

    task "keeper" {{
      driver = "raw_exec"

      logs {{
        max_files     = 2
        max_file_size = 2
      }}

      env {{
        VERSION = "{version}"
      }}

      config {{
        command = "/bin/sh"
        args    = ["-c", "[ -e $NOMAD_ALLOC_DIR/data/first ] || echo v$VERSION > $NOMAD_ALLOC_DIR/data/first; [ -e $NOMAD_TASK_DIR/first ] || echo v$VERSION > $NOMAD_TASK_DIR/first; echo v$VERSION > $NOMAD_ALLOC_DIR/data/last; exec sleep 3600"]
      }}

      resources {{
        cpu    = 10
        memory = 16
      }}
    }}
  }}
}}
"#
    )
}

fn cat(agent: &Agent, alloc_id: &str, path: &str) -> String {
    let (status, body) = support::http(
        "GET",
        &agent.url(&format!("/v1/client/fs/cat/{alloc_id}?path={path}")),
        None,
    );
    assert_eq!(status, 200, "{path}: {body}");
    body
}

#[test]
fn a_sticky_disk_hands_its_data_to_the_replacement_on_the_same_node() {
    let agent = Agent::start_dev();
    let (_dir, v1) = write_jobspec("v1.hcl", &sticky_job(1));
    agent.cli_ok(&["job", "run", "-detach", &v1.to_string_lossy()]);
    let old_id = wait_for("the first version running", LIMIT, || {
        allocs(&agent, "sticky")
            .iter()
            .find(|alloc| alloc["ClientStatus"] == "running")
            .and_then(|alloc| alloc["ID"].as_str().map(str::to_owned))
    });
    wait_for("the first version's files", LIMIT, || {
        (cat(&agent, &old_id, "alloc/data/last") == "v1\n").then_some(())
    });

    let (_dir2, v2) = write_jobspec("v2.hcl", &sticky_job(2));
    agent.cli_ok(&["job", "run", "-detach", &v2.to_string_lossy()]);
    let new_id = wait_for("the replacement running", LIMIT, || {
        allocs(&agent, "sticky")
            .iter()
            .find(|alloc| {
                alloc["ID"] != old_id.as_str()
                    && alloc["DesiredStatus"] == "run"
                    && alloc["ClientStatus"] == "running"
            })
            .and_then(|alloc| alloc["ID"].as_str().map(str::to_owned))
    });
    wait_for("the second version's write", LIMIT, || {
        (cat(&agent, &new_id, "alloc/data/last") == "v2\n").then_some(())
    });
    // What the first version wrote came over, moved: the old alloc dir has it no more.
    assert_eq!(cat(&agent, &new_id, "alloc/data/first"), "v1\n");
    assert_eq!(cat(&agent, &new_id, "keeper/local/first"), "v1\n");
    let (status, _) = support::http(
        "GET",
        &agent.url(&format!("/v1/client/fs/cat/{old_id}?path=alloc/data/first")),
        None,
    );
    assert_ne!(status, 200);
    agent.cli_ok(&["job", "stop", "-purge", "sticky"]);
}
