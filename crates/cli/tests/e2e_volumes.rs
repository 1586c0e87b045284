//! End to end for host volumes: the real agent with `host_volume` blocks in its client config
//! runs exec tasks that mount them (per_alloc with count 2, a replacement reading what the
//! allocation it replaced wrote, a read-only volume the task cannot write), and refuses to place
//! a job asking for a volume no node declares, saying why in `job status`. Needs root (the exec
//! driver), like the driver itself.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod support;

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use support::{Agent, wait_for, write_jobspec};

const LIMIT: Duration = Duration::from_secs(90);

fn allocs(agent: &Agent, job_id: &str) -> Vec<Value> {
    agent
        .get_json(&format!("/v1/job/{job_id}/allocations"))
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn run_job(agent: &Agent, name: &str, hcl: &str) {
    let (_dir, path) = write_jobspec(name, hcl);
    agent.cli_ok(&["job", "run", "-detach", &path.to_string_lossy()]);
}

fn events_of(alloc: &Value, task: &str) -> Vec<String> {
    alloc["TaskStates"][task]["Events"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|event| {
            format!(
                "{}: {}",
                event["Type"].as_str().unwrap_or_default(),
                event["DisplayMessage"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

fn running_with_name(agent: &Agent, job_id: &str, name: &str) -> Option<Value> {
    allocs(agent, job_id).into_iter().find(|alloc| {
        alloc["Name"] == name
            && alloc["ClientStatus"] == "running"
            && alloc["DesiredStatus"] == "run"
    })
}

fn file_text(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// An agent whose client declares `data[0]`, `data[1]` and a read-only `ro`, each a directory
/// of `volumes`.
fn agent_with_volumes(volumes: &Path) -> (tempfile::TempDir, Agent) {
    let temp = tempfile::tempdir().expect("temp dir");
    let mut blocks = String::new();
    for (name, dir, read_only) in [
        ("data[0]", "data0", false),
        ("data[1]", "data1", false),
        ("ro", "ro", true),
    ] {
        let path = volumes.join(dir);
        std::fs::create_dir_all(&path).expect("volume dir");
        blocks.push_str(&format!(
            "  host_volume {name:?} {{\n    path      = {:?}\n    read_only = {read_only}\n  }}\n",
            path.display().to_string()
        ));
    }
    let config = temp.path().join("client.hcl");
    std::fs::write(&config, format!("client {{\n{blocks}}}\n")).expect("config");
    let agent = Agent::start_with(
        &temp.path().join("data"),
        &[&format!("-config={}", config.display())],
    );
    (temp, agent)
}

#[test]
fn per_alloc_host_volumes_keep_state_for_the_replacement_and_read_only_is_enforced() {
    if !drover_isolate::root_tests::root_test_may_run("root (the exec driver)", true) {
        return;
    }
    let volumes = tempfile::tempdir().expect("volumes dir");
    let (_temp, agent) = agent_with_volumes(volumes.path());

    // The node advertises the volumes as Nomad does.
    let node_id = wait_for("the node to register", LIMIT, || {
        agent.get_json("/v1/nodes")[0]["ID"]
            .as_str()
            .map(str::to_string)
    });
    let node = agent.get_json(&format!("/v1/node/{node_id}"));
    assert_eq!(node["HostVolumes"]["ro"]["ReadOnly"], true, "{node}");
    assert_eq!(node["HostVolumes"]["data[1]"]["Name"], "data[1]", "{node}");
    assert_eq!(
        node["HostVolumes"]["data[0]"]["Path"],
        volumes.path().join("data0").display().to_string()
    );

    let script = "cat /data/owner > /local/seen 2>/dev/null; \
                  echo $NOMAD_ALLOC_ID > /data/owner; \
                  if touch /config/x 2>/dev/null; then echo yes; else echo no; fi > /local/ro_write; \
                  cat /config/marker > /local/ro_read; \
                  exec sleep 3600";
    std::fs::write(volumes.path().join("ro/marker"), "from the host\n").expect("marker");
    let job = format!(
        r#"
job "vols" {{
  datacenters = ["dc1"]
  group "g" {{
    count = 2
    volume "data" {{
      type      = "host"
      source    = "data"
      per_alloc = true
    }}
    volume "config" {{
      type      = "host"
      source    = "ro"
      read_only = true
    }}
    task "t" {{
      driver = "exec"
      config {{
        command = "/bin/sh"
        args    = ["-c", {script:?}]
      }}
      volume_mount {{
        volume      = "data"
        destination = "/data"
      }}
      volume_mount {{
        volume      = "config"
        destination = "/config"
      }}
      resources {{
        cpu    = 50
        memory = 32
      }}
    }}
  }}
}}
"#
    );
    run_job(&agent, "vols.hcl", &job);
    let alloc_root = agent.data_dir.join("alloc");
    let mut first = Vec::new();
    for index in 0..2 {
        let name = format!("vols.g[{index}]");
        let alloc = wait_for(&format!("{name} to run"), LIMIT, || {
            running_with_name(&agent, "vols", &name)
        });
        let id = alloc["ID"].as_str().unwrap().to_string();
        let owner = volumes.path().join(format!("data{index}/owner"));
        let written = wait_for(&format!("{name} to write its volume"), LIMIT, || {
            file_text(&owner).filter(|text| !text.is_empty())
        });
        assert_eq!(
            written.trim(),
            id,
            "data[{index}] holds its own allocation's ID"
        );
        let local = alloc_root.join(&id).join("t/local");
        let ro_write = wait_for("the read-only probe", LIMIT, || {
            file_text(&local.join("ro_write"))
        });
        assert_eq!(
            ro_write.trim(),
            "no",
            "a read-only volume refused the write"
        );
        assert_eq!(
            file_text(&local.join("ro_read")).unwrap_or_default(),
            "from the host\n"
        );
        first.push(id);
    }
    assert!(!volumes.path().join("ro/x").exists());

    // Allocation 0 stopped: its replacement (index 0 again) mounts data[0] and finds the file.
    agent.cli_ok(&["alloc", "stop", "-detach", &first[0]]);
    let replacement = wait_for("the replacement of vols.g[0]", LIMIT, || {
        running_with_name(&agent, "vols", "vols.g[0]").filter(|alloc| alloc["ID"] != first[0])
    });
    let replacement_id = replacement["ID"].as_str().unwrap().to_string();
    let seen = wait_for("the replacement to read its volume", LIMIT, || {
        file_text(&alloc_root.join(&replacement_id).join("t/local/seen"))
            .filter(|text| !text.is_empty())
    });
    assert_eq!(
        seen.trim(),
        first[0],
        "events {:?}",
        events_of(&replacement, "t")
    );
    agent.cli_ok(&["job", "stop", "-purge", "vols"]);
}

#[test]
fn a_job_asking_for_a_volume_no_node_has_is_not_placed_and_job_status_says_why() {
    if !drover_isolate::root_tests::root_test_may_run("root (the exec driver)", true) {
        return;
    }
    let volumes = tempfile::tempdir().expect("volumes dir");
    let (_temp, agent) = agent_with_volumes(volumes.path());
    let job = |id: &str, volume: &str| {
        format!(
            r#"
job "{id}" {{
  datacenters = ["dc1"]
  group "g" {{
    volume "v" {{
      type   = "host"
      source = "{volume}"
    }}
    task "t" {{
      driver = "exec"
      config {{
        command = "/bin/sleep"
        args    = ["3600"]
      }}
      volume_mount {{
        volume      = "v"
        destination = "/v"
      }}
    }}
  }}
}}
"#
        )
    };
    // No node declares the volume; a read-only one does not take a read-write request.
    for (id, volume) in [("missing", "nothere"), ("rw-on-ro", "ro")] {
        run_job(&agent, &format!("{id}.hcl"), &job(id, volume));
        let status = wait_for(&format!("{id}: the placement failure"), LIMIT, || {
            let out = agent.cli_ok(&["job", "status", id]);
            out.contains("Placement Failure").then_some(out)
        });
        assert!(
            status.contains(
                "Constraint \"missing compatible host volumes\": 1 nodes excluded by filter"
            ),
            "{status}"
        );
        assert!(allocs(&agent, id).is_empty());
    }
}

#[test]
fn a_raw_exec_task_mounting_a_volume_fails_as_in_nomad() {
    let volumes = tempfile::tempdir().expect("volumes dir");
    let (_temp, agent) = agent_with_volumes(volumes.path());
    let job = r#"
job "raw" {
  datacenters = ["dc1"]
  type        = "batch"
  group "g" {
    restart {
      attempts = 0
      mode     = "fail"
    }
    reschedule {
      attempts  = 0
      unlimited = false
    }
    volume "v" {
      type   = "host"
      source = "ro"
      read_only = true
    }
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
      volume_mount {
        volume      = "v"
        destination = "/v"
      }
    }
  }
}
"#;
    run_job(&agent, "raw.hcl", job);
    let alloc = wait_for("the raw_exec task to fail", LIMIT, || {
        allocs(&agent, "raw")
            .into_iter()
            .find(|alloc| alloc["ClientStatus"] == "failed")
    });
    let events = events_of(&alloc, "t");
    assert!(
        events.iter().any(|event| event
            .contains("task driver \"raw_exec\" for \"t\" does not support host volumes")),
        "{events:?}"
    );
}
