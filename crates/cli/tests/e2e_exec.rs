//! End to end for the `exec` driver: the real agent runs exec tasks whose command is a shell
//! probe reporting what it sees from inside (processes, mounts, capabilities, uid,
//! no_new_privs), a task that outgrows its memory limit, and busy tasks whose usage the stats
//! endpoint reports. Needs root and cgroups, like the driver itself.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod support;

use std::collections::BTreeMap;
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

fn events_of(alloc: &Value, task: &str) -> Vec<Value> {
    alloc["TaskStates"][task]["Events"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// `key=value` lines of the probe's report.
fn report(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|line| line.split_once('='))
        .map(|(key, value)| (key.trim().to_string(), value.trim().to_string()))
        .collect()
}

#[test]
fn an_exec_task_sees_only_itself_read_only_system_dirs_and_the_default_capabilities() {
    let agent = Agent::start_dev();
    let alloc_root = agent.data_dir.join("alloc");
    let probe = format!(
        r#"exec > /local/probe.txt 2>&1
echo "procs=$(for p in /proc/[0-9]*; do cat $p/comm; done | sort | tr '\n' ' ')"
echo "has_pid_1=$(test -d /proc/1 && echo yes || echo no)"
for d in /usr /bin /etc /sbin; do
  if touch $d/.drover-probe 2>/dev/null; then echo "writable_system_dir=$d"; fi
done
echo "kcore_bytes=$(cat /proc/kcore 2>/dev/null | head -c 16 | wc -c)"
echo "cwd=$(pwd -P)"
echo "cwd_holds=$(ls -d local secrets tmp alloc 2>/dev/null | tr '\n' ' ')"
echo "host_root=$(ls -A /root 2>/dev/null | wc -l)"
echo "host_alloc_root=$(test -e {alloc_root} && echo visible || echo invisible)"
echo "alloc_dir=$(test -d /alloc/logs && echo yes || echo no)"
echo "local_writable=$(touch /local/w && echo yes || echo no)"
echo "tmp_writable=$(touch /tmp/w && echo yes || echo no)"
echo "proc_sys_writable=$(echo 1 > /proc/sys/kernel/ns_last_pid 2>/dev/null && echo yes || echo no)"
echo "sys_writable=$(touch /sys/drover 2>/dev/null && echo yes || echo no)"
echo "dev=$(ls /dev | sort | tr '\n' ' ')"
echo "uid=$(id -u)"
echo "user=$(id -un)"
grep -E '^(CapEff|CapBnd|NoNewPrivs):' /proc/self/status | tr -d '\t' | sed 's/:/=/'
echo "done=yes"
"#,
        alloc_root = alloc_root.display()
    );
    let job = format!(
        r#"
job "probe" {{
  datacenters = ["dc1"]
  type        = "batch"
  group "g" {{
    restart {{
      attempts = 0
      mode     = "fail"
    }}
    task "probe" {{
      driver = "exec"
      config {{
        command = "/bin/sh"
        args    = ["-c", {probe:?}]
      }}
      resources {{
        cpu    = 50
        memory = 64
      }}
    }}
  }}
}}
"#
    );
    run_job(&agent, "probe.hcl", &job);
    let alloc = wait_for("the probe to finish", LIMIT, || {
        allocs(&agent, "probe")
            .into_iter()
            .find(|alloc| alloc["ClientStatus"] == "complete" || alloc["ClientStatus"] == "failed")
    });
    let alloc_id = alloc["ID"].as_str().unwrap();
    let text = std::fs::read_to_string(alloc_root.join(alloc_id).join("probe/local/probe.txt"))
        .unwrap_or_else(|error| {
            panic!(
                "no probe report ({error}); events {:?}",
                events_of(&alloc, "probe")
            )
        });
    let seen = report(&text);
    assert_eq!(seen.get("done").map(String::as_str), Some("yes"), "{text}");
    assert_eq!(alloc["ClientStatus"], "complete", "{text}");
    // Only the probe's own shell and its helpers: nothing of the host (no agent, no shim).
    let procs = &seen["procs"];
    for process in procs.split_whitespace() {
        assert!(
            ["sh", "cat", "sort", "tr"].contains(&process),
            "unexpected process {process:?} visible: {procs}"
        );
    }
    assert_eq!(seen["has_pid_1"], "yes", "{text}");
    assert!(!seen.contains_key("writable_system_dir"), "{text}");
    assert_eq!(seen["kcore_bytes"], "0", "{text}");
    // The task starts in its own root (the task dir), entered through the pinned root.
    assert_eq!(seen["cwd"], "/", "{text}");
    assert_eq!(seen["cwd_holds"], "alloc local secrets tmp", "{text}");
    assert_eq!(seen["host_root"], "0", "{text}");
    assert_eq!(seen["host_alloc_root"], "invisible", "{text}");
    assert_eq!(seen["alloc_dir"], "yes", "{text}");
    assert_eq!(seen["local_writable"], "yes", "{text}");
    assert_eq!(seen["tmp_writable"], "yes", "{text}");
    assert_eq!(seen["proc_sys_writable"], "no", "{text}");
    assert_eq!(seen["sys_writable"], "no", "{text}");
    for node in [
        "null", "zero", "full", "random", "urandom", "tty", "ptmx", "pts", "shm", "mqueue",
    ] {
        assert!(
            seen["dev"].split_whitespace().any(|name| name == node),
            "/dev lacks {node}: {text}"
        );
    }
    assert_eq!(seen["uid"], "65534", "{text}");
    assert_eq!(seen["user"], "nobody", "{text}");
    // The container-runtime default set, and nothing more even in the bounding set.
    assert_eq!(seen["CapEff"], "00000000a80425fb", "{text}");
    assert_eq!(seen["CapBnd"], "00000000a80425fb", "{text}");
    assert_eq!(seen["NoNewPrivs"], "1", "{text}");
    // The probe's writes to the system dirs did not reach the host either.
    assert!(!Path::new("/usr/.drover-probe").exists());
}

#[test]
fn network_mode_none_leaves_only_loopback_and_the_task_dirs_are_in_its_environment() {
    let agent = Agent::start_dev();
    let probe = r#"exec > /local/probe.txt 2>&1
echo "interfaces=$(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | sort | tr '\n' ' ')"
echo "task_dir=$NOMAD_TASK_DIR"
echo "alloc_dir=$NOMAD_ALLOC_DIR"
echo "done=yes"
"#;
    let job = format!(
        r#"
job "offline" {{
  datacenters = ["dc1"]
  type        = "batch"
  group "g" {{
    task "probe" {{
      driver = "exec"
      config {{
        command      = "/bin/sh"
        args         = ["-c", {probe:?}]
        network_mode = "none"
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
    run_job(&agent, "offline.hcl", &job);
    let alloc = wait_for("the probe to finish", LIMIT, || {
        allocs(&agent, "offline")
            .into_iter()
            .find(|alloc| alloc["ClientStatus"] == "complete" || alloc["ClientStatus"] == "failed")
    });
    let alloc_id = alloc["ID"].as_str().unwrap();
    let path = agent
        .data_dir
        .join("alloc")
        .join(alloc_id)
        .join("probe/local/probe.txt");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|error| {
        panic!(
            "no probe report ({error}); events {:?}",
            events_of(&alloc, "probe")
        )
    });
    let seen = report(&text);
    assert_eq!(seen.get("done").map(String::as_str), Some("yes"), "{text}");
    assert_eq!(seen["interfaces"], "lo", "{text}");
    assert_eq!(seen["task_dir"], "/local", "{text}");
    assert_eq!(seen["alloc_dir"], "/alloc", "{text}");
}

#[test]
fn the_clients_chroot_env_and_allow_caps_shape_the_task() {
    let temp = tempfile::tempdir().unwrap();
    let config = temp.path().join("agent.hcl");
    std::fs::write(
        &config,
        r#"
client {
  chroot_env = {
    "/bin"   = "/bin"
    "/etc"   = "/etc"
    "/lib"   = "/lib"
    "/lib64" = "/lib64"
    "/usr"   = "/usr"
  }
}
plugin "exec" {
  config {
    allow_caps = ["chown", "kill", "sys_time"]
  }
}
"#,
    )
    .unwrap();
    let agent = Agent::start_with(
        &temp.path().join("data"),
        &[&format!("-config={}", config.display())],
    );
    let probe = r#"exec > /local/probe.txt 2>&1
echo "sbin=$(test -e /sbin && echo present || echo absent)"
echo "usr=$(test -d /usr/bin && echo present || echo absent)"
grep -E '^CapEff:' /proc/self/status | tr -d '\t' | sed 's/:/=/'
echo "done=yes"
"#;
    let job = format!(
        r#"
job "shaped" {{
  datacenters = ["dc1"]
  type        = "batch"
  group "g" {{
    task "probe" {{
      driver = "exec"
      config {{
        command = "/bin/sh"
        args    = ["-c", {probe:?}]
        cap_add = ["sys_time"]
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
    run_job(&agent, "shaped.hcl", &job);
    let alloc = wait_for("the probe to finish", LIMIT, || {
        allocs(&agent, "shaped")
            .into_iter()
            .find(|alloc| alloc["ClientStatus"] == "complete" || alloc["ClientStatus"] == "failed")
    });
    let alloc_id = alloc["ID"].as_str().unwrap();
    let path = agent
        .data_dir
        .join("alloc")
        .join(alloc_id)
        .join("probe/local/probe.txt");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|error| {
        panic!(
            "no probe report ({error}); events {:?}",
            events_of(&alloc, "probe")
        )
    });
    let seen = report(&text);
    assert_eq!(seen.get("done").map(String::as_str), Some("yes"), "{text}");
    assert_eq!(seen["sbin"], "absent", "{text}");
    assert_eq!(seen["usr"], "present", "{text}");
    // The default set within allow_caps (chown, kill) plus the allowed cap_add (sys_time).
    assert_eq!(seen["CapEff"], "0000000002000021", "{text}");
}

#[test]
fn unknown_config_keys_and_refused_capabilities_fail_the_task_with_a_clear_reason() {
    let agent = Agent::start_dev();
    // One group per bad task: a task that fails takes its siblings down with it.
    let group = |task: &str, body: &str| {
        format!(
            r#"
  group "{task}" {{
    restart {{
      attempts = 0
      mode     = "fail"
    }}
    task "{task}" {{
      driver = "exec"
{body}
      resources {{
        cpu    = 50
        memory = 32
      }}
    }}
  }}
"#
        )
    };
    let jobspec = format!(
        "job \"bad\" {{\n  datacenters = [\"dc1\"]\n  type = \"batch\"\n{}{}{}}}\n",
        group(
            "typo",
            "      config {\n        command = \"/bin/true\"\n        volumes = [\"/:/host\"]\n      }"
        ),
        group(
            "admin",
            "      config {\n        command = \"/bin/true\"\n        cap_add = [\"sys_admin\"]\n      }"
        ),
        group(
            "rooted",
            "      user = \"root\"\n      config {\n        command = \"/bin/true\"\n      }"
        ),
    );
    run_job(&agent, "bad.hcl", &jobspec);
    let by_task = wait_for("the three tasks to fail", LIMIT, || {
        let allocs = allocs(&agent, "bad");
        let dead: Vec<(String, Value)> = ["typo", "admin", "rooted"]
            .iter()
            .filter_map(|task| {
                allocs
                    .iter()
                    .find(|alloc| alloc["TaskStates"][task]["State"] == "dead")
                    .map(|alloc| (task.to_string(), alloc.clone()))
            })
            .collect();
        (dead.len() == 3).then_some(dead)
    });
    let alloc_of = |task: &str| -> &Value {
        &by_task
            .iter()
            .find(|(name, _)| name == task)
            .expect("task found")
            .1
    };
    let messages = |task: &str| -> String {
        events_of(alloc_of(task), task)
            .iter()
            .map(|event| {
                event["DisplayMessage"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
                    + " "
                    + event["Details"].to_string().as_str()
            })
            .collect::<Vec<_>>()
            .join(" | ")
    };
    let typo_events = events_of(alloc_of("typo"), "typo");
    assert!(
        typo_events
            .iter()
            .any(|event| event["Type"] == "Failed Validation"),
        "an unknown config key fails validation before any start: {typo_events:?}"
    );
    assert!(
        typo_events.iter().all(|event| event["Type"] != "Started"),
        "{typo_events:?}"
    );
    let typo = messages("typo");
    assert!(
        typo.contains("unknown task config key \\\"volumes\\\"")
            || typo.contains("unknown task config key \"volumes\""),
        "{typo}"
    );
    let admin = messages("admin");
    assert!(
        admin.contains("CAP_SYS_ADMIN") && admin.contains("allow_caps"),
        "{admin}"
    );
    assert_eq!(alloc_of("typo")["TaskStates"]["typo"]["Failed"], true);
    // The client's user denylist (root by default) applies to exec.
    let rooted = events_of(alloc_of("rooted"), "rooted");
    let refused = rooted
        .iter()
        .find(|event| event["Type"] == "Failed Validation")
        .unwrap_or_else(|| panic!("no Failed Validation event: {rooted:?}"));
    assert!(
        refused["ValidationError"]
            .as_str()
            .unwrap_or_default()
            .contains("\"root\" is disallowed"),
        "{refused}"
    );
}

#[test]
fn a_task_past_its_memory_limit_is_oom_killed_and_reported_while_its_neighbour_runs_on() {
    let agent = Agent::start_dev();
    run_job(
        &agent,
        "neighbour.hcl",
        r#"
job "neighbour" {
  datacenters = ["dc1"]
  type        = "service"
  group "g" {
    task "sleeper" {
      driver = "exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "sleep 3600"]
      }
      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}
"#,
    );
    wait_for("the neighbour to run", LIMIT, || {
        allocs(&agent, "neighbour")
            .into_iter()
            .find(|alloc| alloc["ClientStatus"] == "running")
    });
    run_job(
        &agent,
        "oom.hcl",
        r#"
job "oom" {
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
    task "hog" {
      driver = "exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "head -c 300M /dev/zero | tail"]
      }
      resources {
        cpu    = 50
        memory = 64
      }
    }
  }
}
"#,
    );
    let alloc = wait_for("the hog to be OOM killed", LIMIT, || {
        allocs(&agent, "oom").into_iter().find(|alloc| {
            events_of(alloc, "hog")
                .iter()
                .any(|event| event["Type"] == "Terminated")
        })
    });
    let terminated = events_of(&alloc, "hog")
        .into_iter()
        .find(|event| event["Type"] == "Terminated")
        .unwrap();
    assert_eq!(terminated["Details"]["oom_killed"], "true", "{terminated}");
    assert_eq!(
        terminated["Details"]["exit_message"], "OOM Killed",
        "{terminated}"
    );
    // The agent still answers, and the neighbour, in its own cgroup, was not touched.
    let neighbour = allocs(&agent, "neighbour");
    assert_eq!(neighbour.len(), 1);
    assert_eq!(neighbour[0]["ClientStatus"], "running", "{neighbour:?}");
    let events = events_of(&neighbour[0], "sleeper");
    assert!(
        events.iter().all(|event| event["Type"] != "Terminated"),
        "{events:?}"
    );
}

#[test]
fn the_stats_endpoint_shows_live_memory_and_cpu_of_exec_and_raw_exec_tasks() {
    let agent = Agent::start_dev();
    // Light but steady cpu use (the machine is shared): bursts of shell arithmetic.
    let busy = "x=$(head -c 8000000 /dev/zero | tr '\\\\0' a); while :; do i=0; while [ $i -lt 3000 ]; do i=$((i+1)); done; sleep 0.05; done";
    let job = format!(
        r#"
job "busy" {{
  datacenters = ["dc1"]
  type        = "service"
  group "g" {{
    task "isolated" {{
      driver = "exec"
      config {{
        command = "/bin/sh"
        args    = ["-c", {busy:?}]
      }}
      resources {{
        cpu    = 100
        memory = 64
      }}
    }}
    task "raw" {{
      driver = "raw_exec"
      config {{
        command = "/bin/sh"
        args    = ["-c", {busy:?}]
      }}
      resources {{
        cpu    = 100
        memory = 64
      }}
    }}
  }}
}}
"#
    );
    run_job(&agent, "busy.hcl", &job);
    let alloc_id = wait_for("the busy alloc to run", LIMIT, || {
        allocs(&agent, "busy")
            .into_iter()
            .find(|alloc| alloc["ClientStatus"] == "running")
            .and_then(|alloc| alloc["ID"].as_str().map(str::to_string))
    });
    let stats = wait_for("live cpu and memory figures for both tasks", LIMIT, || {
        let stats = agent.get_json(&format!("/v1/client/allocation/{alloc_id}/stats"));
        let live = ["isolated", "raw"].iter().all(|task| {
            let usage = &stats["Tasks"][task]["ResourceUsage"];
            usage["MemoryStats"]["RSS"].as_u64().unwrap_or(0) > 0
                && usage["MemoryStats"]["Usage"].as_u64().unwrap_or(0) > 0
                && usage["CpuStats"]["Percent"].as_f64().unwrap_or(0.0) > 0.0
                && usage["CpuStats"]["TotalTicks"].as_f64().unwrap_or(0.0) > 0.0
        });
        live.then_some(stats)
    });
    let total = &stats["ResourceUsage"]["MemoryStats"]["RSS"];
    let sum: u64 = ["isolated", "raw"]
        .iter()
        .map(|task| {
            stats["Tasks"][task]["ResourceUsage"]["MemoryStats"]["RSS"]
                .as_u64()
                .unwrap()
        })
        .sum();
    assert!(total.as_u64().unwrap() > 0, "{stats}");
    assert!(sum > 0);
    let measured = &stats["Tasks"]["isolated"]["ResourceUsage"]["MemoryStats"]["Measured"];
    assert!(measured.to_string().contains("RSS"), "{stats}");
    let one = agent.get_json(&format!("/v1/client/allocation/{alloc_id}/stats?task=raw"));
    assert!(one["Tasks"]["raw"].is_object(), "{one}");
    assert!(one["Tasks"]["isolated"].is_null(), "{one}");
}

/// A task for the exec driver used directly, with its task dir and alloc dir under `root`.
fn exec_launch(root: &Path, name: &str, script: &str) -> drover_driver::TaskLaunch {
    let task_dir = root.join(name);
    for dir in ["local", "secrets", "tmp"] {
        std::fs::create_dir_all(task_dir.join(dir)).unwrap();
    }
    std::fs::create_dir_all(root.join("alloc/logs")).unwrap();
    drover_driver::TaskLaunch {
        task_id: format!("direct/{name}"),
        alloc_id: format!("direct-{}", std::process::id()),
        task_name: name.to_string(),
        command: "sh".to_string(),
        args: vec!["-c".to_string(), script.to_string()],
        env: vec![("PATH".to_string(), "/usr/bin:/bin".to_string())],
        state_dir: root.join(format!("state-{name}")),
        logs: drover_driver::LogSettings {
            dir: root.join("alloc/logs"),
            ..drover_driver::LogSettings::default()
        },
        kill_signal: Some("SIGTERM".to_string()),
        task_dir: Some(task_dir),
        shared_alloc_dir: Some(root.join("alloc")),
        ..drover_driver::TaskLaunch::default()
    }
}

fn direct_exec_driver(cgroup_parent: &str) -> drover_driver::shim_engine::ShimEngine {
    drover_driver::exec::exec_driver(
        drover_driver::raw_exec::RawExecConfig {
            shim_binary: Some(env!("CARGO_BIN_EXE_drover-shim").into()),
            cgroup_parent: cgroup_parent.to_string(),
            ..drover_driver::raw_exec::RawExecConfig::default()
        },
        drover_driver::exec::ExecConfig::default(),
    )
}

/// The exec driver, straight through the driver API, passes the suite every driver passes.
#[tokio::test]
async fn exec_passes_the_conformance_suite() {
    use drover_driver::conformance::{Scenario, run_conformance_suite};

    let scratch = tempfile::tempdir().unwrap();
    let driver = direct_exec_driver("drover-e2e-exec");
    let root = scratch.path().to_path_buf();
    let make_task = |scenario: Scenario, name: &str| {
        let script = match scenario {
            Scenario::ExitWith(code) => format!("exit {code}"),
            // The task is pid 1 of its namespace, which ignores signals it has no handler for:
            // the kill's SIGTERM does nothing and the SIGKILL after the grace period ends it.
            Scenario::RunUntilKilled => "exec sleep 600".to_string(),
        };
        exec_launch(&root, name, &script)
    };
    run_conformance_suite(&driver, &make_task).await.unwrap();
}

/// Two cpu-bound exec tasks on the same cpu: the one with ten times the shares gets clearly
/// more cpu time. (Three seconds of one busy core.)
#[tokio::test]
async fn under_contention_fewer_cpu_shares_get_less_cpu() {
    use drover_driver::Driver;

    let scratch = tempfile::tempdir().unwrap();
    let driver = direct_exec_driver("drover-e2e-exec-cpu");
    let mut handles = Vec::new();
    for (name, shares) in [("low", 100), ("high", 1000)] {
        let mut launch = exec_launch(scratch.path(), name, "while :; do :; done");
        launch.resources.cpu_shares = Some(shares);
        launch.resources.cpuset_cpus = Some("0".to_string());
        handles.push(driver.start(&launch).await.unwrap());
    }
    let usage = |handle| {
        let driver = &driver;
        async move { driver.stats(handle).await.unwrap().cpu.total_ns }
    };
    let before = (usage(&handles[0]).await, usage(&handles[1]).await);
    // Bounded polling: wait until the pair has used three cpu-seconds between them.
    let started = std::time::Instant::now();
    let (low, high) = loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let low = usage(&handles[0]).await - before.0;
        let high = usage(&handles[1]).await - before.1;
        if low + high >= 3_000_000_000 || started.elapsed() > LIMIT {
            break (low, high);
        }
    };
    for handle in &handles {
        driver
            .kill(handle, Some("SIGKILL"), Duration::ZERO)
            .await
            .unwrap();
        driver.destroy(handle).await.unwrap();
    }
    assert!(low + high >= 3_000_000_000, "only {low} + {high} ns of cpu");
    assert!(
        high > 2 * low,
        "high shares got {high} ns, low shares {low} ns"
    );
}

/// A program that does not exist inside the task root fails the start with the reason, and
/// leaves no process and no cgroup behind.
#[tokio::test]
async fn a_command_missing_from_the_task_root_is_a_start_error() {
    use drover_driver::Driver;

    let scratch = tempfile::tempdir().unwrap();
    let driver = direct_exec_driver("drover-e2e-exec-missing");
    // /opt is not in the chroot env, so a program there is not in the task's root.
    let mut launch = exec_launch(scratch.path(), "missing", "");
    launch.command = "/opt/drover-no-such-program".to_string();
    launch.args.clear();
    let error = driver.start(&launch).await.unwrap_err();
    let chain = format!("{error} {error:?}");
    assert!(
        chain.contains("drover-no-such-program"),
        "the error names the program: {chain}"
    );
    let cgroup_parent = Path::new("/sys/fs/cgroup/memory/drover-e2e-exec-missing");
    if cgroup_parent.is_dir() {
        let leftovers: Vec<_> = std::fs::read_dir(cgroup_parent)
            .unwrap()
            .filter_map(|entry| entry.ok())
            .filter(|entry| entry.path().is_dir())
            .map(|entry| entry.file_name())
            .collect();
        assert!(leftovers.is_empty(), "cgroups left behind: {leftovers:?}");
    }
}

/// What a long-running probe task reports about its cpus, cgroup and host name before it
/// sleeps; the report appears whole (written aside, then renamed).
const PLACEMENT_PROBE: &str = r#"{
echo "cpus=$(grep Cpus_allowed_list /proc/self/status | cut -f2)"
echo "cores_env=$NOMAD_CPU_CORES"
echo "cpuset_cgroup=$(grep ':cpuset:' /proc/self/cgroup | cut -d: -f3)"
echo "hostname=$(hostname)"
echo "kernel_hostname=$(cat /proc/sys/kernel/hostname)"
echo "done=yes"
} > /local/probe.tmp 2>&1
mv /local/probe.tmp /local/probe.txt
exec sleep 3600
"#;

/// A service job of one group whose exec task runs [`PLACEMENT_PROBE`] with `resources` and
/// the group-level `extra` (a network block, for instance).
fn probe_job(job: &str, group: &str, resources: &str, extra: &str) -> String {
    format!(
        r#"
job "{job}" {{
  datacenters = ["dc1"]
  group "{group}" {{
{extra}
    task "t" {{
      driver = "exec"
      config {{
        command = "/bin/sh"
        args    = ["-c", {PLACEMENT_PROBE:?}]
      }}
      resources {{
{resources}
      }}
    }}
  }}
}}
"#
    )
}

/// Waits for the job's running allocation to have written its probe report; returns the full
/// allocation and the report.
fn running_probe(agent: &Agent, job_id: &str) -> (Value, BTreeMap<String, String>) {
    let alloc_id = wait_for(&format!("{job_id} to run its probe"), LIMIT, || {
        allocs(agent, job_id).into_iter().find_map(|alloc| {
            let id = alloc["ID"].as_str()?.to_string();
            let report = agent
                .data_dir
                .join("alloc")
                .join(&id)
                .join("t/local/probe.txt");
            (alloc["ClientStatus"] == "running" && report.is_file()).then_some(id)
        })
    });
    let alloc = agent.get_json(&format!("/v1/allocation/{alloc_id}"));
    let text = std::fs::read_to_string(
        agent
            .data_dir
            .join("alloc")
            .join(&alloc_id)
            .join("t/local/probe.txt"),
    )
    .unwrap();
    let seen = report(&text);
    assert_eq!(seen.get("done").map(String::as_str), Some("yes"), "{text}");
    (alloc, seen)
}

fn reserved_cores(alloc: &Value) -> Vec<u16> {
    alloc["AllocatedResources"]["Tasks"]["t"]["Cpu"]["ReservedCores"]
        .as_array()
        .map(|cores| {
            cores
                .iter()
                .map(|core| u16::try_from(core.as_u64().unwrap()).unwrap())
                .collect()
        })
        .unwrap_or_default()
}

fn host_cpuset_file(cgroup: &str, file: &str) -> String {
    std::fs::read_to_string(
        Path::new("/sys/fs/cgroup/cpuset")
            .join(cgroup.trim_start_matches('/'))
            .join(file),
    )
    .unwrap_or_else(|error| panic!("reading {file} of cpuset cgroup {cgroup}: {error}"))
    .trim()
    .to_string()
}

/// Held by the tests that reserve cores. Which cpus the tasks without cores share is worked out
/// by the agent from every task cgroup on the host, so two agents of concurrent tests would
/// re-balance the same cgroups under each other; on a real host one agent owns them.
static CORE_RESERVATIONS: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn reserving_cores() -> std::sync::MutexGuard<'static, ()> {
    CORE_RESERVATIONS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The cpus the processes of a cpuset cgroup may run on, as the kernel reports them.
fn cpus_of_processes_in(cgroup: &str) -> Vec<String> {
    host_cpuset_file(cgroup, "cgroup.procs")
        .lines()
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{}/status", pid.trim())).ok())
        .filter_map(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("Cpus_allowed_list:"))
                .map(|cpus| cpus.trim().to_string())
        })
        .collect()
}

/// `resources { cores = 1 }`: the scheduler reserves a core ID and the task's cgroup is
/// confined to it (seen from inside as its allowed cpus); a task without cores runs on the
/// cpus nobody reserved, and gets a core back when its reservation ends; a job wanting more
/// cores than are free fails placement on "cores"; two live reservations never share a core.
/// The machine these run on has two cores.
#[test]
fn a_task_with_cores_runs_on_exactly_its_reserved_core_and_no_core_is_given_twice() {
    if !drover_isolate::root_tests::root_test_may_run(
        "a cgroup v1 cpuset hierarchy (the cpuset files are read from it)",
        Path::new("/sys/fs/cgroup/cpuset/cpuset.cpus").is_file(),
    ) {
        return;
    }
    let _reserving = reserving_cores();
    let agent = Agent::start_dev();
    let node_id = wait_for("the node to register", LIMIT, || {
        agent.get_json("/v1/nodes")[0]["ID"]
            .as_str()
            .map(str::to_string)
    });
    let node = agent.get_json(&format!("/v1/node/{node_id}"));
    let reservable: Vec<u16> = node["NodeResources"]["Cpu"]["ReservableCpuCores"]
        .as_array()
        .unwrap()
        .iter()
        .map(|core| u16::try_from(core.as_u64().unwrap()).unwrap())
        .collect();
    assert!(reservable.len() >= 2, "needs two reservable cores: {node}");
    let total_mhz = node["NodeResources"]["Cpu"]["CpuShares"].as_i64().unwrap();
    let total_cores = node["NodeResources"]["Cpu"]["TotalCpuCores"]
        .as_i64()
        .unwrap();
    let all_cpus = host_cpuset_file("/", "cpuset.cpus");
    let all_but = |core: u16| {
        let rest: Vec<u16> = drover_driver::parse_cpu_list(&all_cpus)
            .unwrap()
            .into_iter()
            .filter(|cpu| *cpu != core)
            .collect();
        drover_driver::format_cpu_list(&rest)
    };

    run_job(
        &agent,
        "pinned.hcl",
        &probe_job("pinned", "g", "cores = 1\nmemory = 32", ""),
    );
    let (pinned, pinned_seen) = running_probe(&agent, "pinned");
    run_job(
        &agent,
        "shared.hcl",
        &probe_job("shared", "g", "cpu = 50\nmemory = 32", ""),
    );
    let (_, shared_seen) = running_probe(&agent, "shared");

    let pinned_cores = reserved_cores(&pinned);
    assert_eq!(pinned_cores.len(), 1, "{pinned}");
    let core = pinned_cores[0];
    // Nomad charges a task with cores the MHz of its cores.
    assert_eq!(
        pinned["AllocatedResources"]["Tasks"]["t"]["Cpu"]["CpuShares"].as_i64(),
        Some(total_mhz / total_cores),
        "{pinned}"
    );
    assert_eq!(pinned_seen["cpus"], core.to_string(), "{pinned_seen:?}");
    assert_eq!(
        pinned_seen["cores_env"],
        core.to_string(),
        "{pinned_seen:?}"
    );
    let pinned_cgroup = &pinned_seen["cpuset_cgroup"];
    assert!(
        pinned_cgroup.contains(pinned["ID"].as_str().unwrap()),
        "{pinned_cgroup}"
    );
    assert_eq!(
        host_cpuset_file(pinned_cgroup, "cpuset.cpus"),
        core.to_string()
    );
    assert_eq!(
        host_cpuset_file(pinned_cgroup, "cpuset.mems"),
        host_cpuset_file("/", "cpuset.mems"),
        "cpuset.mems copied from the parent"
    );
    // A task without cores runs on the cpus nobody reserved.
    assert_eq!(shared_seen["cpus"], all_but(core), "{shared_seen:?}");
    assert_eq!(shared_seen["cores_env"], "", "{shared_seen:?}");
    let shared_cgroup = shared_seen["cpuset_cgroup"].clone();

    // Two cores while one is held: placement fails, naming the exhausted dimension.
    run_job(
        &agent,
        "greedy.hcl",
        &probe_job("greedy", "g", "cores = 2\nmemory = 32", ""),
    );
    let failed = wait_for("the greedy placement to fail", LIMIT, || {
        agent
            .get_json("/v1/job/greedy/evaluations")
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .find_map(|eval| eval["FailedTGAllocs"]["g"].as_object().cloned())
    });
    assert_eq!(
        failed["DimensionExhausted"]["cores"].as_i64(),
        Some(1),
        "{failed:?}"
    );
    assert!(allocs(&agent, "greedy").is_empty());
    agent.cli_ok(&["job", "stop", "greedy"]);

    // The reservation ends: the shared task (still running) gets the core back.
    agent.cli_ok(&["job", "stop", "pinned"]);
    wait_for("the shared task to get every cpu back", LIMIT, || {
        let processes = cpus_of_processes_in(&shared_cgroup);
        (host_cpuset_file(&shared_cgroup, "cpuset.cpus") == all_cpus
            && !processes.is_empty()
            && processes.iter().all(|cpus| *cpus == all_cpus))
        .then_some(())
    });

    // A new reservation takes its core away from the shared task again.
    run_job(
        &agent,
        "second.hcl",
        &probe_job("second", "g", "cores = 1\nmemory = 32", ""),
    );
    let (second, second_seen) = running_probe(&agent, "second");
    let second_core = reserved_cores(&second)[0];
    assert_eq!(
        second_seen["cpus"],
        second_core.to_string(),
        "{second_seen:?}"
    );
    wait_for("the shared task to leave the reserved core", LIMIT, || {
        (host_cpuset_file(&shared_cgroup, "cpuset.cpus") == all_but(second_core)
            && cpus_of_processes_in(&shared_cgroup)
                .iter()
                .all(|cpus| *cpus == all_but(second_core)))
        .then_some(())
    });

    // Room for one more reserved core once the shared task is gone: never the held one.
    agent.cli_ok(&["job", "stop", "shared"]);
    wait_for("the shared task to stop", LIMIT, || {
        allocs(&agent, "shared")
            .iter()
            .all(|alloc| alloc["ClientStatus"] != "running")
            .then_some(())
    });
    run_job(
        &agent,
        "third.hcl",
        &probe_job("third", "g", "cores = 1\nmemory = 32", ""),
    );
    let (third, third_seen) = running_probe(&agent, "third");
    let third_cores = reserved_cores(&third);
    assert_eq!(third_cores.len(), 1, "{third}");
    assert_ne!(third_cores[0], second_core, "a core given twice");
    assert_eq!(
        third_seen["cpus"],
        third_cores[0].to_string(),
        "{third_seen:?}"
    );
    assert_eq!(
        host_cpuset_file(&third_seen["cpuset_cgroup"], "cpuset.cpus"),
        third_cores[0].to_string()
    );
}

/// The group network's `hostname` (interpolated) names an exec task in its own uts namespace;
/// without one the task sees the host's name, and the host's name is never changed.
#[test]
fn the_network_hostname_names_the_task_and_the_host_keeps_its_own() {
    let host_name = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_string();
    let agent = Agent::start_dev();
    run_job(
        &agent,
        "named.hcl",
        &probe_job(
            "named",
            "web",
            "cpu = 50\nmemory = 32",
            "    network {\n      hostname = \"${NOMAD_GROUP_NAME}-${NOMAD_ALLOC_INDEX}\"\n    }",
        ),
    );
    run_job(
        &agent,
        "unnamed.hcl",
        &probe_job("unnamed", "g", "cpu = 50\nmemory = 32", ""),
    );
    let (_, named) = running_probe(&agent, "named");
    let (_, unnamed) = running_probe(&agent, "unnamed");
    assert_eq!(named["hostname"], "web-0", "{named:?}");
    assert_eq!(named["kernel_hostname"], "web-0", "{named:?}");
    assert_eq!(unnamed["kernel_hostname"], host_name, "{unnamed:?}");
    assert_eq!(
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .unwrap()
            .trim(),
        host_name,
        "the host's own name is untouched"
    );
}

/// `pids_limit` caps the task's processes: a fork loop inside it gets EAGAIN ("Cannot fork")
/// at the limit instead of filling the host, the cgroup's `pids.max` holds it, and a limit
/// that is not a positive integer fails the task with the reason.
#[test]
fn a_fork_loop_under_pids_limit_fails_to_fork_at_the_limit() {
    let agent = Agent::start_dev();
    let fork_loop = r#"(
  i=0
  while [ $i -lt 200 ]; do
    sleep 600 &
    i=$((i+1))
    echo $i > /local/started
  done
  echo all > /local/started
) 2> /local/fork_errors
echo "loop_exit=$?" > /local/report.txt
exec sleep 600
"#;
    let job = format!(
        r#"
job "forky" {{
  datacenters = ["dc1"]
  type        = "batch"
  group "g" {{
    restart {{
      attempts = 0
      mode     = "fail"
    }}
    task "t" {{
      driver = "exec"
      config {{
        command    = "/bin/sh"
        args       = ["-c", {fork_loop:?}]
        pids_limit = 16
      }}
      resources {{
        cpu    = 50
        memory = 64
      }}
    }}
  }}
  group "zero" {{
    restart {{
      attempts = 0
      mode     = "fail"
    }}
    task "zero" {{
      driver = "raw_exec"
      config {{
        command    = "/bin/true"
        pids_limit = 0
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
    run_job(&agent, "forky.hcl", &job);
    let alloc_id = wait_for("the fork loop to end", LIMIT, || {
        allocs(&agent, "forky").into_iter().find_map(|alloc| {
            let id = alloc["ID"].as_str()?.to_string();
            let report = agent
                .data_dir
                .join("alloc")
                .join(&id)
                .join("t/local/report.txt");
            report.is_file().then_some(id)
        })
    });
    let local = agent.data_dir.join("alloc").join(&alloc_id).join("t/local");
    let read = |name: &str| std::fs::read_to_string(local.join(name)).unwrap_or_default();
    let started = read("started");
    let errors = read("fork_errors");
    let loop_report = read("report.txt");
    let started_count: u64 = started.trim().parse().unwrap_or_else(|_| {
        panic!("the loop was never stopped: started={started:?} errors={errors:?}")
    });
    // The task's shell, the loop's subshell and its sleeps: at most 16 processes.
    assert!(
        started_count < 16,
        "{started_count} sleeps started under a limit of 16"
    );
    assert!(
        errors.contains("fork"),
        "no fork failure reported: {errors:?}"
    );
    assert!(!loop_report.contains("loop_exit=0"), "{loop_report}");
    // The host side: the task's cgroup holds the limit and has refused forks at it.
    // The task lives on after the refused forks (its shell exec'd the last sleep).
    wait_for("the task to be reported running", LIMIT, || {
        let alloc = agent.get_json(&format!("/v1/allocation/{alloc_id}"));
        (alloc["TaskStates"]["t"]["State"] == "running").then_some(())
    });
    // v1 keeps pids files in the pids hierarchy, v2 in the one tree.
    let pids_dir = ["/sys/fs/cgroup/pids/drover", "/sys/fs/cgroup/drover"]
        .iter()
        .filter_map(|parent| std::fs::read_dir(parent).ok())
        .flat_map(|entries| entries.filter_map(Result::ok).map(|entry| entry.path()))
        .find(|path| path.to_string_lossy().contains(&alloc_id))
        .expect("the task's pids cgroup");
    let file = |name: &str| std::fs::read_to_string(pids_dir.join(name)).unwrap_or_default();
    assert_eq!(file("pids.max").trim(), "16");
    let current: u64 = file("pids.current").trim().parse().unwrap();
    assert!(current <= 16, "pids.current {current}");
    if let Some(max_events) = file("pids.events")
        .lines()
        .find_map(|line| line.strip_prefix("max "))
    {
        assert!(
            max_events.trim().parse::<u64>().unwrap() > 0,
            "no fork refused"
        );
    }
    // The agent is still well and answers.
    let zero = wait_for("the zero limit to fail its task", LIMIT, || {
        allocs(&agent, "forky")
            .into_iter()
            .find(|alloc| alloc["TaskStates"]["zero"]["State"] == "dead")
    });
    let messages: String = events_of(&zero, "zero")
        .iter()
        .map(|event| format!("{} {} ", event["DisplayMessage"], event["Details"]))
        .collect();
    assert!(
        messages.contains("pids_limit must be a positive integer"),
        "{messages}"
    );
}

/// The client's `reserved { … }` keeps resources back from allocations: the node reports them
/// as its `ReservedResources`, a reserved core is never handed to a task, and the cores left
/// are all there is to reserve.
#[test]
fn cores_and_resources_reserved_by_the_client_config_are_never_handed_out() {
    if !drover_isolate::root_tests::root_test_may_run(
        "a cgroup v1 cpuset hierarchy (the cpuset files are read from it)",
        Path::new("/sys/fs/cgroup/cpuset/cpuset.cpus").is_file(),
    ) {
        return;
    }
    let _reserving = reserving_cores();
    let all_cpus = drover_driver::parse_cpu_list(&host_cpuset_file("/", "cpuset.cpus")).unwrap();
    assert!(all_cpus.len() >= 2, "needs two cores: {all_cpus:?}");
    let kept_back = all_cpus[0];
    let temp = tempfile::tempdir().unwrap();
    let config = temp.path().join("client.hcl");
    std::fs::write(
        &config,
        format!(
            "client {{\n  reserved {{\n    cpu            = 300\n    memory         = 256\n    disk           = 1024\n    cores          = \"{kept_back}\"\n    reserved_ports = \"22,8000-8100\"\n  }}\n}}\n"
        ),
    )
    .unwrap();
    let agent = Agent::start_with(
        &temp.path().join("data"),
        &[&format!("-config={}", config.display())],
    );
    let node_id = wait_for("the node to register", LIMIT, || {
        agent.get_json("/v1/nodes")[0]["ID"]
            .as_str()
            .map(str::to_string)
    });
    let node = agent.get_json(&format!("/v1/node/{node_id}"));
    let reserved = &node["ReservedResources"];
    assert_eq!(reserved["Cpu"]["CpuShares"], 300, "{reserved}");
    assert_eq!(
        reserved["Cpu"]["ReservedCpuCores"],
        serde_json::json!([kept_back])
    );
    assert_eq!(reserved["Memory"]["MemoryMB"], 256, "{reserved}");
    assert_eq!(reserved["Disk"]["DiskMB"], 1024, "{reserved}");
    assert_eq!(
        reserved["Networks"]["ReservedHostPorts"], "22,8000-8100",
        "{reserved}"
    );

    run_job(
        &agent,
        "pinned.hcl",
        &probe_job("pinned", "g", "cores = 1\nmemory = 32", ""),
    );
    let (pinned, seen) = running_probe(&agent, "pinned");
    let cores = reserved_cores(&pinned);
    assert_eq!(cores.len(), 1, "{pinned}");
    assert_ne!(cores[0], kept_back, "the kept-back core was handed out");
    assert_eq!(seen["cpus"], cores[0].to_string(), "{seen:?}");

    // On a two-core machine nothing is left to reserve now.
    if all_cpus.len() == 2 {
        run_job(
            &agent,
            "more.hcl",
            &probe_job("more", "g", "cores = 1\nmemory = 32", ""),
        );
        let failed = wait_for("the second reservation to fail", LIMIT, || {
            agent
                .get_json("/v1/job/more/evaluations")
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .find_map(|eval| eval["FailedTGAllocs"]["g"].as_object().cloned())
        });
        assert_eq!(
            failed["DimensionExhausted"]["cores"].as_i64(),
            Some(1),
            "{failed:?}"
        );
        agent.cli_ok(&["job", "stop", "more"]);
    }
    agent.cli_ok(&["job", "stop", "pinned"]);
}

#[test]
fn an_exec_task_reaches_the_task_api_from_inside_its_mount_namespace() {
    let agent = Agent::start_dev();
    let (status, answer) = support::http(
        "PUT",
        &agent.url("/v1/var/nomad/jobs/execapi"),
        Some(r#"{"Items": {"value": "from-inside-9c2"}}"#),
    );
    assert_eq!(status, 200, "{answer}");
    let probe = r#"exec > /local/probe.txt 2>&1
echo "unix_addr=$NOMAD_UNIX_ADDR"
echo "socket=$(test -S /secrets/api.sock && echo yes || echo no)"
echo "own=$(curl -s --unix-socket /secrets/api.sock -H "X-Nomad-Token: $NOMAD_TOKEN" http://localhost/v1/var/nomad/jobs/execapi)"
echo "anonymous=$(curl -s -o /dev/null -w '%%{http_code}' --unix-socket /secrets/api.sock http://localhost/v1/jobs)"
echo done=yes
exec sleep 3600
"#;
    let hcl = format!(
        r#"
job "execapi" {{
  group "g" {{
    task "probe" {{
      driver = "exec"
      identity {{
        env = true
      }}
      config {{
        command = "/bin/sh"
        args    = ["-c", {probe:?}]
      }}
    }}
  }}
}}
"#
    );
    run_job(&agent, "execapi.hcl", &hcl);
    let alloc_id = wait_for("a running exec alloc", LIMIT, || {
        let alloc = allocs(&agent, "execapi").first()?.clone();
        assert_ne!(alloc["ClientStatus"], "failed", "{alloc}");
        (alloc["ClientStatus"] == "running").then(|| alloc["ID"].as_str().unwrap().to_owned())
    });
    let path = agent
        .data_dir
        .join("alloc")
        .join(&alloc_id)
        .join("probe/local/probe.txt");
    let text = wait_for("the probe's report", LIMIT, || {
        std::fs::read_to_string(&path)
            .ok()
            .filter(|text| text.contains("done=yes"))
    });
    let seen = report(&text);
    assert_eq!(seen["unix_addr"], "unix:///secrets/api.sock", "{text}");
    assert_eq!(seen["socket"], "yes", "{text}");
    let own: Value = serde_json::from_str(&seen["own"]).unwrap_or_else(|_| panic!("{text}"));
    assert_eq!(own["Items"]["value"], "from-inside-9c2", "{text}");
    assert_eq!(seen["anonymous"], "401", "{text}");
}
