//! End to end: crash-safe restore. The real `drover agent` is killed with SIGKILL while it runs
//! real tasks under their shims; the tasks must keep running (and logging) with no agent, and the
//! next agent on the same data dir must re-attach to them without starting anything twice,
//! collect what exited meanwhile, and leave no process behind once the jobs are stopped.
//!
//! Not here: the restore logic itself (crates `client`, `driver`, `shim`); these tests only drive
//! the binary and look at processes, log files and the HTTP API.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use serde_json::Value;
use support::{Agent, pids_with_cmdline, process_alive, wait_for, write_jobspec};

/// Generous: 50 tasks on a loaded 2-core machine take a while to start.
const LIMIT: Duration = Duration::from_secs(180);

/// A service job whose task prints `<marker> <n>` every 100 ms (the marker is in the command
/// line, so the task's shell is found in /proc by it).
fn counter_job(job_id: &str, count: u32, marker: &str) -> String {
    format!(
        r#"
job "{job_id}" {{
  datacenters = ["dc1"]
  type        = "service"

  group "app" {{
    count = {count}

    # Nomad's default asks 300 MB of the node's disk per allocation; a hundred of them would
    # need 30 GB free under the data dir, which says nothing about what is tested here.
    ephemeral_disk {{
      size = 10
    }}

    task "server" {{
      driver       = "raw_exec"
      kill_timeout = "2s"

      # Its logs must fit in the small ephemeral disk (Nomad's rule).
      logs {{
        max_files     = 2
        max_file_size = 2
      }}

      config {{
        command = "/bin/sh"
        args    = ["-c", "i=0; while true; do echo \"{marker} $i\"; i=$((i+1)); sleep 0.1; done"]
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

/// A job whose task waits for `flag` to exist, then exits with code 3; never restarted.
fn exit_three_job(job_id: &str, marker: &str, flag: &Path) -> String {
    format!(
        r#"
job "{job_id}" {{
  datacenters = ["dc1"]
  type        = "service"

  group "once" {{
    restart {{
      attempts = 0
      mode     = "fail"
    }}

    reschedule {{
      attempts  = 0
      unlimited = false
    }}

    task "exiter" {{
      driver = "raw_exec"

      config {{
        command = "/bin/sh"
        args    = ["-c", "echo {marker}; while [ ! -e {flag} ]; do sleep 0.1; done; exit 3"]
      }}

      resources {{
        cpu    = 10
        memory = 16
      }}
    }}
  }}
}}
"#,
        flag = flag.display()
    )
}

/// A job whose task waits for `flag`, removes it and exits with code 3; restarted once.
fn restart_once_job(job_id: &str, marker: &str, flag: &Path) -> String {
    format!(
        r#"
job "{job_id}" {{
  datacenters = ["dc1"]
  type        = "service"

  group "again" {{
    restart {{
      attempts = 1
      delay    = "1s"
      interval = "10m"
      mode     = "fail"
    }}

    task "exiter" {{
      driver = "raw_exec"

      config {{
        command = "/bin/sh"
        args    = ["-c", "echo {marker}; while [ ! -e {flag} ]; do sleep 0.1; done; rm -f {flag}; exit 3"]
      }}

      resources {{
        cpu    = 10
        memory = 16
      }}
    }}
  }}
}}
"#,
        flag = flag.display()
    )
}

fn allocs(agent: &Agent, job_id: &str) -> Vec<Value> {
    agent
        .get_json(&format!("/v1/job/{job_id}/allocations"))
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn running_allocs(allocs: &[Value]) -> Vec<&Value> {
    allocs
        .iter()
        .filter(|alloc| alloc["DesiredStatus"] == "run" && alloc["ClientStatus"] == "running")
        .collect()
}

fn alloc_id(alloc: &Value) -> String {
    alloc["ID"].as_str().expect("alloc id").to_owned()
}

fn event_count(alloc: &Value, task: &str, event_type: &str) -> usize {
    alloc["TaskStates"][task]["Events"]
        .as_array()
        .map(|events| {
            events
                .iter()
                .filter(|event| event["Type"] == event_type)
                .count()
        })
        .unwrap_or(0)
}

fn parent_pid(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ")?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Live (non-zombie) task processes whose command line holds `marker`, grouped by the
/// `NOMAD_ALLOC_ID` of their environment. A process whose parent also holds the marker is the
/// task's shell forked for a command (`sleep`), not yet exec'd: part of the task, not a task.
fn marker_pids_by_alloc(marker: &str) -> BTreeMap<String, Vec<i32>> {
    let mut by_alloc: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    let all = pids_with_cmdline(marker);
    for pid in all.iter().copied() {
        if parent_pid(pid).is_some_and(|parent| all.contains(&parent)) {
            continue;
        }
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        let alloc_id = String::from_utf8_lossy(&environ)
            .split('\0')
            .find_map(|var| var.strip_prefix("NOMAD_ALLOC_ID=").map(str::to_owned))
            .unwrap_or_default();
        // A process on its way out has released its memory: both its environment and its
        // command line then read empty. Gone between the reads: not alive.
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if process_alive(pid) && String::from_utf8_lossy(&cmdline).contains(marker) {
            by_alloc.entry(alloc_id).or_default().push(pid);
        }
    }
    for pids in by_alloc.values_mut() {
        pids.sort_unstable();
    }
    by_alloc
}

/// Every live `drover-shim` process whose state (command line) lies in `data_dir`.
fn shims_of(data_dir: &Path) -> Vec<i32> {
    pids_with_cmdline(&data_dir.to_string_lossy())
        .into_iter()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|cmdline| String::from_utf8_lossy(&cmdline).contains("drover-shim"))
                .unwrap_or(false)
        })
        .collect()
}

fn stdout_log(data_dir: &Path, alloc_id: &str, task: &str) -> PathBuf {
    data_dir
        .join("alloc")
        .join(alloc_id)
        .join("alloc/logs")
        .join(format!("{task}.stdout.0"))
}

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).map(|meta| meta.len()).unwrap_or(0)
}

/// Forgets a killed agent without the cleanup its `Drop` would do (which kills every process
/// of the data dir): the next agent takes over those tasks.
fn forget_killed(mut agent: Agent) {
    agent.kill9();
    agent.data_dir = PathBuf::new();
    drop(agent);
}

#[test]
fn fifty_tasks_survive_kill_9_and_are_re_attached_without_a_second_start() {
    let mut first = Agent::start_dev();
    let data_dir = first.data_dir.clone();
    let marker = format!("restore50-{}", std::process::id());
    let exit_marker = format!("exit3-{}", std::process::id());
    let flag_dir = tempfile::tempdir().expect("flag dir");
    let flag = flag_dir.path().join("exit-now");

    let (_dir, path) = write_jobspec("counter.hcl", &counter_job("counter", 50, &marker));
    first.cli_ok(&["job", "run", "-detach", &path.to_string_lossy()]);
    let (_dir3, path3) =
        write_jobspec("exiter.hcl", &exit_three_job("exiter", &exit_marker, &flag));
    first.cli_ok(&["job", "run", "-detach", &path3.to_string_lossy()]);
    let again_marker = format!("again3-{}", std::process::id());
    let again_flag = flag_dir.path().join("exit-again");
    let (_dir4, path4) = write_jobspec(
        "again.hcl",
        &restart_once_job("again", &again_marker, &again_flag),
    );
    first.cli_ok(&["job", "run", "-detach", &path4.to_string_lossy()]);

    let before = wait_for("50 running counter allocs", LIMIT, || {
        let allocs = allocs(&first, "counter");
        (running_allocs(&allocs).len() == 50).then_some(allocs)
    });
    wait_for("the exiter to run", LIMIT, || {
        (running_allocs(&allocs(&first, "exiter")).len() == 1).then_some(())
    });
    // One live process per alloc, and the server has heard of each start.
    let pids_before = wait_for("one counter process per alloc", LIMIT, || {
        let by_alloc = marker_pids_by_alloc(&marker);
        (by_alloc.len() == 50 && by_alloc.values().all(|pids| pids.len() == 1)).then_some(by_alloc)
    });
    for alloc in &before {
        assert!(pids_before.contains_key(&alloc_id(alloc)), "{alloc}");
    }
    wait_for("the exiters' processes", LIMIT, || {
        (pids_with_cmdline(&exit_marker).len() == 1
            && pids_with_cmdline(&again_marker).len() == 1
            && running_allocs(&allocs(&first, "again")).len() == 1)
            .then_some(())
    });
    let modify_before: BTreeMap<String, u64> = allocs(&first, "counter")
        .iter()
        .map(|alloc| (alloc_id(alloc), alloc["ModifyIndex"].as_u64().unwrap_or(0)))
        .collect();

    // The agent dies without a word.
    first.kill9();
    let sizes_at_kill: BTreeMap<String, u64> = pids_before
        .keys()
        .map(|id| (id.clone(), file_len(&stdout_log(&data_dir, id, "server"))))
        .collect();
    // The exiter exits (code 3) while no agent runs.
    std::fs::write(&flag, b"").expect("flag");
    std::fs::write(&again_flag, b"").expect("flag");
    wait_for("the exiters to exit with no agent", LIMIT, || {
        (pids_with_cmdline(&exit_marker).is_empty() && pids_with_cmdline(&again_marker).is_empty())
            .then_some(())
    });
    // Every task keeps running and keeps writing its log with no agent at all.
    wait_for("every log to grow with no agent", LIMIT, || {
        sizes_at_kill
            .iter()
            .all(|(id, size)| file_len(&stdout_log(&data_dir, id, "server")) > *size + 20)
            .then_some(())
    });
    assert_eq!(
        marker_pids_by_alloc(&marker),
        pids_before,
        "the same 50 task processes, and only they, live on without an agent"
    );

    // A new agent on the same data dir.
    let restart_began = Instant::now();
    let mut second = Agent::start_with(&data_dir, &[]);
    let listening_after = restart_began.elapsed();
    let after = wait_for("50 allocs reported running by the new agent", LIMIT, || {
        let allocs = allocs(&second, "counter");
        let reported = allocs.iter().all(|alloc| {
            alloc["ModifyIndex"].as_u64().unwrap_or(0)
                > modify_before.get(&alloc_id(alloc)).copied().unwrap_or(0)
        });
        (reported && running_allocs(&allocs).len() == 50).then_some(allocs)
    });
    let restored_after = restart_began.elapsed();
    println!(
        "restore of 50 running tasks: HTTP API up after {listening_after:?}, all 50 allocs reported running after {restored_after:?}"
    );
    for alloc in &after {
        assert_eq!(
            event_count(alloc, "server", "Started"),
            1,
            "exactly one Started per task: {}",
            alloc["TaskStates"]["server"]["Events"]
        );
        assert_eq!(alloc["TaskStates"]["server"]["Restarts"], 0, "{alloc}");
    }
    assert_eq!(
        marker_pids_by_alloc(&marker),
        pids_before,
        "the new agent re-attached to the same processes and started none"
    );

    // The new agent really waits on the re-attached tasks: one that dies now is noticed.
    let (victim_alloc, victim_pids) = pids_before.iter().next().expect("a task");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(victim_pids[0]),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill a task");
    let victim = wait_for("the killed task reported Terminated", LIMIT, || {
        allocs(&second, "counter").into_iter().find(|alloc| {
            alloc_id(alloc) == *victim_alloc && event_count(alloc, "server", "Terminated") == 1
        })
    });
    let terminated = victim["TaskStates"]["server"]["Events"]
        .as_array()
        .and_then(|events| events.iter().find(|event| event["Type"] == "Terminated"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(terminated["Signal"], 9, "{terminated}");

    // The task that exited while no agent ran: Terminated with code 3, then its restart policy
    // (no attempts, mode fail) says Not Restarting and the alloc fails.
    let exited = wait_for("the exiter reported failed", LIMIT, || {
        allocs(&second, "exiter")
            .into_iter()
            .find(|alloc| alloc["ClientStatus"] == "failed")
    });
    let events = exited["TaskStates"]["exiter"]["Events"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let terminated = events
        .iter()
        .find(|event| event["Type"] == "Terminated")
        .unwrap_or_else(|| panic!("a Terminated event: {events:?}"));
    assert_eq!(terminated["ExitCode"], 3, "{terminated}");
    assert!(
        events.iter().any(|event| event["Type"] == "Not Restarting"),
        "{events:?}"
    );
    assert_eq!(event_count(&exited, "exiter", "Started"), 1, "{events:?}");
    assert_eq!(exited["TaskStates"]["exiter"]["Failed"], true);
    assert_eq!(exited["TaskStates"]["exiter"]["State"], "dead");

    // The one with a restart left: Terminated with code 3, Restarting, a new Started, and
    // it runs again (waiting for its flag, which it removed).
    let restarted = wait_for("the restarted task to run again", LIMIT, || {
        allocs(&second, "again").into_iter().find(|alloc| {
            alloc["ClientStatus"] == "running"
                && event_count(alloc, "exiter", "Started") == 2
                && pids_with_cmdline(&again_marker).len() == 1
        })
    });
    let events: Vec<Value> = restarted["TaskStates"]["exiter"]["Events"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let types: Vec<&str> = events
        .iter()
        .filter_map(|event| event["Type"].as_str())
        .collect();
    let terminated = types
        .iter()
        .position(|kind| *kind == "Terminated")
        .unwrap_or_else(|| panic!("a Terminated event: {types:?}"));
    assert_eq!(events[terminated]["ExitCode"], 3, "{events:?}");
    assert_eq!(
        types[terminated..]
            .iter()
            .take(3)
            .copied()
            .collect::<Vec<_>>(),
        ["Terminated", "Restarting", "Started"],
        "{types:?}"
    );
    assert_eq!(restarted["TaskStates"]["exiter"]["Restarts"], 1);

    // Stopping the jobs leaves no task and no shim of this data dir.
    second.cli_ok(&["job", "stop", "-detach", "counter"]);
    second.cli_ok(&["job", "stop", "-detach", "exiter"]);
    second.cli_ok(&["job", "stop", "-detach", "again"]);
    wait_for("every task process to exit", LIMIT, || {
        (marker_pids_by_alloc(&marker).is_empty() && pids_with_cmdline(&again_marker).is_empty())
            .then_some(())
    });
    wait_for("every shim of the data dir to exit", LIMIT, || {
        shims_of(&data_dir).is_empty().then_some(())
    });
    second.terminate();
    drop(first);
}

/// Picks a count and an env version, registers the job (sometimes stops it), in a CLI process
/// that the agent may be killed under.
fn chaos_job(marker: &str, count: u32, version: u32) -> String {
    format!(
        r#"
job "chaos" {{
  datacenters = ["dc1"]
  type        = "service"

  group "app" {{
    count = {count}

    task "server" {{
      driver       = "raw_exec"
      kill_timeout = "1s"

      env {{
        VERSION = "v{version}"
      }}

      config {{
        command = "/bin/sh"
        args    = ["-c", "echo {marker}; while true; do sleep 0.2; done"]
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

/// No alloc has more than one live task process: a task is never started twice concurrently.
fn assert_at_most_one_process_per_alloc(marker: &str, seed: u64, cycle: usize) {
    let by_alloc = marker_pids_by_alloc(marker);
    for (alloc_id, pids) in &by_alloc {
        assert!(
            pids.len() <= 1,
            "seed {seed}, cycle {cycle}: alloc {alloc_id} has {} live processes {pids:?}",
            pids.len()
        );
    }
}

#[test]
fn thirty_kill_9_cycles_start_nothing_twice_and_leave_no_orphan() {
    let seed: u64 = std::env::var("DROVER_CHAOS_SEED")
        .ok()
        .and_then(|seed| seed.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|elapsed| elapsed.as_nanos() as u64)
                .unwrap_or(1)
        });
    println!("chaos seed {seed} (rerun with DROVER_CHAOS_SEED={seed})");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let started = Instant::now();
    let marker = format!("chaos-{}-{seed}", std::process::id());
    let temp = tempfile::tempdir().expect("temp dir");
    let data_dir = temp.path().join("data");
    let specs_dir = tempfile::tempdir().expect("specs dir");

    let mut version = 0;
    // 30 cycles end in `kill -9`; every sixth cycle besides ends in a graceful SIGTERM, which
    // must leave the tasks running just the same.
    for cycle in 0..36 {
        let graceful = cycle % 6 == 5;
        // The store opens every time: an agent that cannot open it exits before listening,
        // and `start_with` fails the test.
        let agent = Agent::start_with(&data_dir, &[]);
        assert_at_most_one_process_per_alloc(&marker, seed, cycle);
        let operation = rng.gen_range(0..4);
        let count = rng.gen_range(1..=6);
        if operation == 2 {
            version += 1;
        }
        let args: Vec<String> = if operation == 3 {
            vec![
                "job".into(),
                "stop".into(),
                "-detach".into(),
                "chaos".into(),
            ]
        } else {
            let path = specs_dir.path().join(format!("chaos-{cycle}.hcl"));
            std::fs::write(&path, chaos_job(&marker, count, version)).expect("spec");
            vec![
                "job".into(),
                "run".into(),
                "-detach".into(),
                path.to_string_lossy().into_owned(),
            ]
        };
        let mut cli = std::process::Command::new(support::drover_bin())
            .args(&args)
            .env("NOMAD_ADDR", &agent.address)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("cli runs");
        // Kill at a random moment: during the request, the scheduling, the starts or kills.
        // One cycle in three aims at the narrowest window instead: the moment a new shim
        // appears, before the agent has had time to record it.
        if operation != 3 && rng.gen_ratio(1, 3) {
            let known = shims_of(&data_dir);
            let deadline = Instant::now() + Duration::from_secs(3);
            while Instant::now() < deadline
                && shims_of(&data_dir).iter().all(|pid| known.contains(pid))
            {
                std::thread::yield_now();
            }
        } else {
            std::thread::sleep(Duration::from_millis(rng.gen_range(0..1200)));
        }
        assert_at_most_one_process_per_alloc(&marker, seed, cycle);
        if graceful {
            let mut agent = agent;
            let status = agent.terminate();
            assert!(status.success(), "seed {seed}, cycle {cycle}: {status}");
            forget_killed(agent);
        } else {
            forget_killed(agent);
        }
        let _ = cli.wait();
        assert_at_most_one_process_per_alloc(&marker, seed, cycle);
        println!(
            "cycle {cycle}: {args:?} then {}; {} live task processes",
            if graceful { "SIGTERM" } else { "kill -9" },
            marker_pids_by_alloc(&marker).len()
        );
    }

    // Settle: a last agent and a known job; every running alloc has its one process, and no
    // marker process belongs to anything else.
    let agent = Agent::start_with(&data_dir, &[]);
    let path = specs_dir.path().join("chaos-final.hcl");
    std::fs::write(&path, chaos_job(&marker, 3, version + 1)).expect("spec");
    agent.cli_ok(&["job", "run", "-detach", &path.to_string_lossy()]);
    let settle_began = Instant::now();
    let (running, processes) = wait_for("the job to settle", LIMIT, || {
        let allocs = allocs(&agent, "chaos");
        if settle_began.elapsed() > LIMIT - Duration::from_secs(1) {
            // About to time out: say what the job looks like.
            for alloc in &allocs {
                println!(
                    "seed {seed}: alloc {} desired {} client {} events {}",
                    alloc_id(alloc),
                    alloc["DesiredStatus"],
                    alloc["ClientStatus"],
                    alloc["TaskStates"]["server"]["Events"]
                        .as_array()
                        .map(|events| events
                            .iter()
                            .map(|event| format!("{}: {}", event["Type"], event["DisplayMessage"]))
                            .collect::<Vec<_>>()
                            .join(" | "))
                        .unwrap_or_default()
                );
            }
            println!("seed {seed}: processes {:?}", marker_pids_by_alloc(&marker));
        }
        let running: BTreeMap<String, Value> = running_allocs(&allocs)
            .into_iter()
            .map(|alloc| (alloc_id(alloc), alloc.clone()))
            .collect();
        let desired_run = allocs
            .iter()
            .filter(|alloc| alloc["DesiredStatus"] == "run")
            .count();
        let processes = marker_pids_by_alloc(&marker);
        let settled = running.len() == 3
            && desired_run == 3
            && processes.len() == 3
            && processes.keys().all(|id| running.contains_key(id));
        settled.then_some((running, processes))
    });
    for (alloc_id, pids) in &processes {
        assert_eq!(pids.len(), 1, "seed {seed}: alloc {alloc_id} runs {pids:?}");
        let alloc = &running[alloc_id];
        assert_eq!(
            event_count(alloc, "server", "Started"),
            1,
            "seed {seed}: alloc {alloc_id} was started more than once: {}",
            alloc["TaskStates"]["server"]["Events"]
        );
    }
    // Tasks of this job never exit by themselves: no alloc, running or stopped, was ever
    // started twice.
    for alloc in allocs(&agent, "chaos") {
        assert!(
            event_count(&alloc, "server", "Started") <= 1,
            "seed {seed}: alloc {} was started more than once: {}",
            alloc_id(&alloc),
            alloc["TaskStates"]["server"]["Events"]
        );
    }
    // No orphan: every live marker process is one of the running allocs' tasks.
    assert_eq!(
        processes.values().map(Vec::len).sum::<usize>(),
        running.len(),
        "seed {seed}"
    );

    agent.cli_ok(&["job", "stop", "-detach", "chaos"]);
    wait_for("every chaos task to exit", LIMIT, || {
        marker_pids_by_alloc(&marker).is_empty().then_some(())
    });
    wait_for("every shim of the data dir to exit", LIMIT, || {
        shims_of(&data_dir).is_empty().then_some(())
    });
    println!("chaos: 36 cycles and settling took {:?}", started.elapsed());
    drop(agent);
    drop(temp);
}

#[test]
fn a_shim_killed_while_no_agent_runs_is_reclaimed_and_its_task_restarted() {
    let mut first = Agent::start_dev();
    let data_dir = first.data_dir.clone();
    let marker = format!("orphaned-{}", std::process::id());
    // The task writes its count to /dev/null, not to its log: with its shim gone nobody reads
    // the log pipe, and a write to it would end the task with SIGPIPE before the next agent
    // could show that it reclaims a task left running.
    let counter = counter_job("orphaned", 1, &marker);
    let quiet = counter.replace(r#"\"; i=$((i+1))"#, r#"\" >/dev/null; i=$((i+1))"#);
    assert_ne!(quiet, counter, "the counter's echo is redirected");
    let spec = quiet.replace(
        "    task \"server\" {",
        "    restart {\n      attempts = 2\n      delay    = \"1s\"\n      interval = \"10m\"\n      mode     = \"fail\"\n    }\n\n    task \"server\" {",
    );
    let (_dir, path) = write_jobspec("orphaned.hcl", &spec);
    first.cli_ok(&["job", "run", "-detach", &path.to_string_lossy()]);
    let (orphan_alloc, task_pid) = wait_for("the task to run", LIMIT, || {
        let running = running_allocs(&allocs(&first, "orphaned"))
            .first()
            .map(|alloc| alloc_id(alloc))?;
        let by_alloc = marker_pids_by_alloc(&marker);
        let pid = *by_alloc.get(&running)?.first()?;
        Some((running, pid))
    });
    let shim_pid = wait_for("the task's shim", LIMIT, || {
        shims_of(&data_dir).into_iter().find(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|cmdline| String::from_utf8_lossy(&cmdline).contains(&orphan_alloc))
                .unwrap_or(false)
        })
    });

    // Both the agent and the task's shim die; the task itself lives on, supervised by nobody.
    first.kill9();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(shim_pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill the shim");
    wait_for("the shim to die", LIMIT, || {
        (!process_alive(shim_pid)).then_some(())
    });
    assert!(process_alive(task_pid), "the task outlives its shim");

    // The next agent finds the shim gone: what is left of the task is killed through its
    // cgroup, an event says so, and the restart policy starts it again.
    let second = Agent::start_with(&data_dir, &[]);
    wait_for("the orphaned task to be killed", LIMIT, || {
        (!process_alive(task_pid)).then_some(())
    });
    let alloc = wait_for("the task to run again", LIMIT, || {
        let alloc = allocs(&second, "orphaned")
            .into_iter()
            .find(|alloc| alloc_id(alloc) == orphan_alloc)?;
        let pids = marker_pids_by_alloc(&marker);
        (alloc["ClientStatus"] == "running"
            && event_count(&alloc, "server", "Started") == 2
            && pids.get(&orphan_alloc).is_some_and(|pids| pids.len() == 1))
        .then_some(alloc)
    });
    let types: Vec<&str> = alloc["TaskStates"]["server"]["Events"]
        .as_array()
        .map(|events| {
            events
                .iter()
                .filter_map(|event| event["Type"].as_str())
                .collect()
        })
        .unwrap_or_default();
    assert!(types.contains(&"Failed Restoring Task"), "{types:?}");
    assert!(types.contains(&"Restarting"), "{types:?}");
    let pids = marker_pids_by_alloc(&marker);
    assert_eq!(pids.len(), 1, "only the new task runs: {pids:?}");
    assert_ne!(pids[&orphan_alloc], vec![task_pid]);

    second.cli_ok(&["job", "stop", "-detach", "orphaned"]);
    wait_for("every task process to exit", LIMIT, || {
        marker_pids_by_alloc(&marker).is_empty().then_some(())
    });
    wait_for("every shim of the data dir to exit", LIMIT, || {
        shims_of(&data_dir).is_empty().then_some(())
    });
    drop(second);
    drop(first);
}

/// A deep data dir and a long task name put the shim's socket path past what a unix socket
/// address holds (107 bytes): the task still starts, is re-attached after `kill -9` of the
/// agent, and is stopped.
#[test]
fn a_deep_data_dir_and_a_long_task_name_start_restore_and_stop() {
    let temp = tempfile::tempdir().expect("temp dir");
    let data_dir = temp
        .path()
        .join("a-data-dir-nested-rather-deeply-under-the-operators-home")
        .join("data");
    let marker = format!("deep-{}", std::process::id());
    let task = "a-task-whose-name-is-long-enough-to-matter";
    let jobspec =
        counter_job("deep", 1, &marker).replace("task \"server\"", &format!("task \"{task}\""));
    let (_dir, path) = write_jobspec("deep.hcl", &jobspec);

    let mut first = Agent::start_with(&data_dir, &[]);
    first.cli_ok(&["job", "run", "-detach", &path.to_string_lossy()]);
    let alloc = wait_for("the task to run", LIMIT, || {
        running_allocs(&allocs(&first, "deep"))
            .first()
            .map(|alloc| (*alloc).clone())
    });
    let id = alloc_id(&alloc);
    let socket_dir = data_dir.join("client").join("tasks").join(&id).join(task);
    let run = std::fs::read_dir(&socket_dir)
        .expect("the task's run dirs")
        .flatten()
        .next()
        .expect("one run dir")
        .path();
    assert!(
        run.join("shim.sock").as_os_str().len() > 107,
        "the socket path is longer than an address holds: {}",
        run.display()
    );
    let pids = wait_for("the task's process", LIMIT, || {
        let pids = pids_with_cmdline(&marker);
        (!pids.is_empty()).then_some(pids)
    });

    // The next agent reaches the shim through the long path: same process, nothing restarted.
    first.kill9();
    let second = Agent::start_with(&data_dir, &[]);
    let logs = wait_for("the task's logs through the new agent", LIMIT, || {
        let logs = second.cli_ok(&["alloc", "logs", &id, task]);
        logs.contains(&marker).then_some(logs)
    });
    assert!(logs.contains(&marker), "{logs}");
    let status = second.cli_ok(&["alloc", "status", &id]);
    assert!(status.contains("running"), "{status}");
    assert_eq!(pids_with_cmdline(&marker), pids, "the same process runs on");
    let restored = allocs(&second, "deep");
    assert_eq!(
        event_count(&restored[0], task, "Started"),
        1,
        "{}",
        restored[0]
    );

    second.cli_ok(&["job", "stop", "deep"]);
    wait_for("the task's process to end", LIMIT, || {
        pids_with_cmdline(&marker).is_empty().then_some(())
    });
}
