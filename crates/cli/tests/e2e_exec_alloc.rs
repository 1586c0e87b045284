//! End to end: `drover alloc exec` and the exec websocket against the real agent, running
//! commands in a raw_exec task's cgroup and environment through `drover-shim exec`.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod support;

use std::time::Duration;

use base64::Engine;
use serde_json::json;
use support::{Agent, exec_websocket_session, pids_with_cmdline, wait_for, write_jobspec};

const LIMIT: Duration = Duration::from_secs(60);

fn sleeper_job(job_id: &str, marker: &str) -> String {
    format!(
        r#"
job "{job_id}" {{
  datacenters = ["dc1"]
  type        = "service"

  group "app" {{
    task "server" {{
      driver = "raw_exec"

      config {{
        command = "/bin/sh"
        args    = ["-c", "sleep 3600; echo {marker}"]
      }}

      resources {{
        cpu    = 50
        memory = 64
      }}
    }}
  }}
}}
"#
    )
}

/// Runs the job and answers its running allocation's id and the task's main pid.
fn run_sleeper(agent: &Agent, job_id: &str) -> (String, i32) {
    let marker = format!("exec-task-{job_id}-{}", std::process::id());
    let (_dir, path) = write_jobspec("sleeper.hcl", &sleeper_job(job_id, &marker));
    agent.cli_ok(&["job", "run", "-detach", &path.to_string_lossy()]);
    let alloc_id = wait_for("a running allocation", LIMIT, || {
        let allocs = agent.get_json(&format!("/v1/job/{job_id}/allocations"));
        allocs.as_array()?.iter().find_map(|alloc| {
            (alloc["ClientStatus"] == "running")
                .then(|| alloc["ID"].as_str().map(str::to_string))
                .flatten()
        })
    });
    let task_pid = wait_for("the task process", LIMIT, || {
        pids_with_cmdline(&marker).first().copied()
    });
    (alloc_id, task_pid)
}

fn exec_output(agent: &Agent, args: &[&str]) -> (String, i32) {
    let output = agent.cli(args);
    eprintln!("{args:?}: {}", String::from_utf8_lossy(&output.stderr));
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        output.status.code().unwrap_or(-1),
    )
}

#[test]
fn alloc_exec_runs_commands_in_the_task_context() {
    let agent = Agent::start_dev();
    let (alloc_id, task_pid) = run_sleeper(&agent, "exec-basic");

    let (stdout, code) = exec_output(&agent, &["alloc", "exec", &alloc_id, "/bin/echo", "hi"]);
    assert_eq!((stdout.as_str(), code), ("hi\n", 0));

    let (_, code) = exec_output(
        &agent,
        &["alloc", "exec", &alloc_id, "/bin/sh", "-c", "exit 7"],
    );
    assert_eq!(code, 7);

    // The exec'd command is in the task's cgroup, not the agent's.
    let (inside, code) = exec_output(
        &agent,
        &["alloc", "exec", &alloc_id, "cat", "/proc/self/cgroup"],
    );
    assert_eq!(code, 0);
    let task_cgroup = std::fs::read_to_string(format!("/proc/{task_pid}/cgroup")).unwrap();
    let agent_cgroup = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    assert_eq!(inside, task_cgroup);
    assert_ne!(inside, agent_cgroup, "the task has a cgroup of its own");

    // It sees the task's environment and starts in the task dir.
    let (env_line, code) = exec_output(
        &agent,
        &[
            "alloc",
            "exec",
            "-task",
            "server",
            &alloc_id,
            "/bin/sh",
            "-c",
            "echo $NOMAD_ALLOC_ID; pwd",
        ],
    );
    assert_eq!(code, 0);
    let mut lines = env_line.lines();
    assert_eq!(lines.next(), Some(alloc_id.as_str()));
    assert!(
        lines
            .next()
            .unwrap()
            .ends_with(&format!("{alloc_id}/server"))
    );

    // Standard input reaches the command.
    let output = std::process::Command::new(support::drover_bin())
        .args(["alloc", "exec", &alloc_id, "/bin/cat"])
        .env("NOMAD_ADDR", &agent.address)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(b"through stdin\n")?;
            child.wait_with_output()
        })
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&output.stdout), "through stdin\n");
    assert!(output.status.success());

    // An unknown task is refused.
    let refused = agent.cli(&["alloc", "exec", "-task", "nope", &alloc_id, "/bin/true"]);
    assert!(!refused.status.success());

    // 20 sessions at once each get their own output and exit code.
    let results = std::thread::scope(|scope| {
        let handles = (0..20)
            .map(|index| {
                let agent = &agent;
                let alloc_id = alloc_id.as_str();
                scope.spawn(move || {
                    let script = format!("echo session-{index}; exit {}", index % 5);
                    exec_output(
                        agent,
                        &["alloc", "exec", alloc_id, "/bin/sh", "-c", &script],
                    )
                })
            })
            .collect::<Vec<_>>();
        handles
            .into_iter()
            .map(|handle| handle.join().unwrap())
            .collect::<Vec<_>>()
    });
    for (index, (stdout, code)) in results.into_iter().enumerate() {
        assert_eq!(stdout, format!("session-{index}\n"));
        assert_eq!(code, i32::try_from(index % 5).unwrap());
    }

    // A client that goes away takes its remote process with it.
    let marker = format!("exec-dropped-{}", std::process::id());
    let script = format!("sleep 300; echo {marker}");
    let mut client = std::process::Command::new(support::drover_bin())
        .args(["alloc", "exec", &alloc_id, "/bin/sh", "-c", &script])
        .env("NOMAD_ADDR", &agent.address)
        .stdin(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_for("the exec'd process", LIMIT, || {
        (!pids_with_cmdline(&marker).is_empty()).then_some(())
    });
    client.kill().unwrap();
    client.wait().unwrap();
    wait_for("the exec'd process to be killed", LIMIT, || {
        pids_with_cmdline(&marker).is_empty().then_some(())
    });
    // The task itself lives on.
    assert!(support::process_alive(task_pid));
}

#[test]
fn a_tty_session_has_a_terminal_of_the_size_sent() {
    let agent = Agent::start_dev();
    let (alloc_id, _) = run_sleeper(&agent, "exec-tty");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (stdout, code) = runtime.block_on(exec_websocket_session(
        &agent.address,
        &alloc_id,
        &["/bin/sh", "-c", "stty size; test -t 0 && echo is-a-tty"],
        true,
        vec![json!({"tty_size": {"height": 33, "width": 101}})],
    ));
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.contains("33 101"), "{stdout:?}");
    assert!(stdout.contains("is-a-tty"), "{stdout:?}");

    // A resize reaches the running command (it reads a line, then reports its size).
    let (stdout, code) = runtime.block_on(exec_websocket_session(
        &agent.address,
        &alloc_id,
        &["/bin/sh", "-c", "read line; stty size"],
        true,
        vec![
            json!({"tty_size": {"height": 20, "width": 70}}),
            json!({"tty_size": {"height": 44, "width": 132}}),
            json!({"stdin": {"data": base64::engine::general_purpose::STANDARD.encode("go\n")}}),
        ],
    ));
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.contains("44 132"), "{stdout:?}");

    // Without a terminal, output still comes back and the exit code too.
    let (stdout, code) = runtime.block_on(exec_websocket_session(
        &agent.address,
        &alloc_id,
        &["/bin/sh", "-c", "test -t 1 || echo no-tty; exit 3"],
        false,
        vec![],
    ));
    assert_eq!((stdout.as_str(), code), ("no-tty\n", 3));
}

#[test]
fn exec_into_a_task_re_attached_by_a_restarted_agent_keeps_its_context() {
    let mut agent = Agent::start_dev();
    let (alloc_id, task_pid) = run_sleeper(&agent, "exec-restored");
    assert!(agent.terminate().success());
    assert!(support::process_alive(task_pid));
    let next = Agent::start_with(&agent.data_dir, &[]);
    let (stdout, code) = wait_for("exec after the restart", LIMIT, || {
        let (stdout, code) = exec_output(
            &next,
            &[
                "alloc",
                "exec",
                &alloc_id,
                "/bin/sh",
                "-c",
                "echo $NOMAD_ALLOC_ID; cat /proc/self/cgroup",
            ],
        );
        (code == 0).then_some((stdout, code))
    });
    assert_eq!(code, 0);
    let task_cgroup = std::fs::read_to_string(format!("/proc/{task_pid}/cgroup")).unwrap();
    assert_eq!(stdout, format!("{alloc_id}\n{task_cgroup}"));
    next.cli_ok(&["job", "stop", "-purge", "exec-restored"]);
    wait_for("the task to exit", LIMIT, || {
        (!support::process_alive(task_pid)).then_some(())
    });
}

#[test]
fn exec_into_an_isolated_task_enters_its_namespaces_root_and_user() {
    let agent = Agent::start_dev();
    let marker = format!("exec-isolated-{}", std::process::id());
    let job = sleeper_job("exec-isolated", &marker).replace("\"raw_exec\"", "\"exec\"");
    let (_dir, path) = write_jobspec("isolated.hcl", &job);
    agent.cli_ok(&["job", "run", "-detach", &path.to_string_lossy()]);
    let alloc_id = wait_for("a running allocation", LIMIT, || {
        let allocs = agent.get_json("/v1/job/exec-isolated/allocations");
        allocs.as_array()?.iter().find_map(|alloc| {
            (alloc["ClientStatus"] == "running")
                .then(|| alloc["ID"].as_str().map(str::to_string))
                .flatten()
        })
    });
    let (stdout, code) = exec_output(
        &agent,
        &[
            "alloc",
            "exec",
            &alloc_id,
            "/bin/sh",
            "-c",
            "tr '\\0' ' ' < /proc/1/cmdline; echo; id -u; pwd; test -d local && echo has-local; grep -E '^(NoNewPrivs|CapBnd)' /proc/self/status",
        ],
    );
    assert_eq!(code, 0, "{stdout}");
    let lines: Vec<&str> = stdout.lines().collect();
    // The task's pid namespace: its pid 1 is the task's own shell, not the host's init.
    assert!(lines[0].contains(&marker), "{stdout}");
    // Its user (nobody) and its root (the task dir, holding local/).
    assert_ne!(lines[1], "0", "{stdout}");
    assert_eq!(&lines[2..4], ["/", "has-local"], "{stdout}");
    // No more privileges than the task: no_new_privs and the default capability bound.
    assert!(stdout.contains("NoNewPrivs:\t1"), "{stdout}");
    assert!(stdout.contains("CapBnd:\t00000000a80425fb"), "{stdout}");
    agent.cli_ok(&["job", "stop", "-purge", "exec-isolated"]);
}

/// The resident memory of process `pid`, in bytes.
fn rss_of(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|number| number.parse().ok())
        .unwrap();
    kib * 1024
}

/// A caller pours 100 MiB into the stdin of a command that never reads it, through pipes and
/// through a terminal: the agent pushes back (the caller cannot send it all) instead of holding
/// it, and its memory stays flat.
#[test]
fn stdin_to_a_command_that_never_reads_pushes_back_instead_of_growing_the_agent() {
    use futures_util::SinkExt;
    use tokio_tungstenite::tungstenite::Message;

    const MIB: usize = 1024 * 1024;
    const FRAME: usize = 64 * 1024;
    const TOTAL: usize = 100 * MIB;
    let agent = Agent::start_dev();
    let agent_pid = agent.child.as_ref().unwrap().id();
    let (alloc_id, _) = run_sleeper(&agent, "exec-stdin-flood");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for tty in [false, true] {
        let marker_seconds = format!("1000.{}", std::process::id());
        let url = support::exec_url(
            &agent.address,
            &alloc_id,
            &["/bin/sleep", &marker_seconds],
            false,
        );
        let frame = json!({"stdin": {"data": base64::engine::general_purpose::STANDARD.encode(vec![b'x'; FRAME])}})
        .to_string();

        let (before, sent, after) = runtime.block_on(async {
            let (mut socket, _) = tokio_tungstenite::connect_async(&url).await.unwrap();
            // One frame through, and the command up, before the baseline.
            socket
                .send(Message::Text(frame.clone().into()))
                .await
                .unwrap();
            wait_for("the exec'd command", LIMIT, || {
                pids_with_cmdline(&marker_seconds).first().copied()
            });
            let before = rss_of(agent_pid);
            let mut sent = FRAME;
            let _ = tokio::time::timeout(Duration::from_secs(20), async {
                while sent < TOTAL {
                    if socket
                        .send(Message::Text(frame.clone().into()))
                        .await
                        .is_err()
                    {
                        break;
                    }
                    sent += FRAME;
                }
            })
            .await;
            let after = rss_of(agent_pid);
            drop(socket);
            (before, sent, after)
        });
        let growth = after.saturating_sub(before);
        eprintln!(
            "tty={tty}: sent {} MiB of stdin; agent RSS {} -> {} KiB (growth {} KiB)",
            sent / MIB,
            before / 1024,
            after / 1024,
            growth / 1024
        );
        assert!(
            sent < TOTAL,
            "tty={tty}: all {TOTAL} bytes were taken: nothing pushed back"
        );
        assert!(
            growth < 16 * MIB as u64,
            "tty={tty}: the agent grew by {growth} bytes"
        );
    }
}

/// The environment a process started with, as `NAME=value` lines, sorted.
fn process_environment(pid: i32) -> Vec<String> {
    let bytes = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    let mut lines: Vec<String> = bytes
        .split(|byte| *byte == 0)
        .filter(|entry| !entry.is_empty())
        .map(|entry| String::from_utf8_lossy(entry).into_owned())
        .collect();
    lines.sort();
    lines
}

#[test]
fn raw_exec_denied_envvars_of_the_client_and_the_task_leave_the_tasks_environment() {
    let temp = tempfile::tempdir().unwrap();
    let config = support::agent_config(
        temp.path(),
        "agent.hcl",
        "plugin \"raw_exec\" {\n  config {\n    enabled = true\n    denied_envvars = [\"*_TOKEN\", \"NOMAD_ALLOC_NAME\"]\n  }\n}\n",
    );
    let agent = Agent::start_with(&temp.path().join("data"), &[&format!("-config={config}")]);
    let marker = format!("denied-envvars-{}", std::process::id());
    let job = format!(
        r#"
job "denied-env" {{
  datacenters = ["dc1"]
  group "app" {{
    task "server" {{
      driver = "raw_exec"
      env {{
        GITHUB_TOKEN   = "from-the-job"
        AWS_SECRET_KEY = "secret"
        AWS_REGION     = "eu-west-1"
        KEEP_ME        = "kept"
      }}
      config {{
        command        = "/bin/sh"
        args           = ["-c", "sleep 3600; echo {marker}"]
        denied_envvars = ["AWS_SECRET*"]
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
    let (_dir, path) = write_jobspec("denied.hcl", &job);
    agent.cli_ok(&["job", "run", "-detach", &path.to_string_lossy()]);
    let alloc_id = wait_for("a running allocation", LIMIT, || {
        let allocs = agent.get_json("/v1/job/denied-env/allocations");
        allocs.as_array()?.iter().find_map(|alloc| {
            (alloc["ClientStatus"] == "running")
                .then(|| alloc["ID"].as_str().map(str::to_string))
                .flatten()
        })
    });
    let task_pid = wait_for("the task process", LIMIT, || {
        pids_with_cmdline(&marker).first().copied()
    });

    let started_with = process_environment(task_pid);
    let (exec_env, code) = exec_output(&agent, &["alloc", "exec", &alloc_id, "/usr/bin/env"]);
    assert_eq!(code, 0);
    let mut exec_env: Vec<String> = exec_env.lines().map(str::to_owned).collect();
    exec_env.sort();
    for environment in [&started_with, &exec_env] {
        let has = |name: &str| {
            environment
                .iter()
                .any(|line| line.starts_with(&format!("{name}=")))
        };
        // The client's patterns and the task's both apply; what matches neither stays.
        for denied in ["GITHUB_TOKEN", "AWS_SECRET_KEY", "NOMAD_ALLOC_NAME"] {
            assert!(!has(denied), "{denied} left in {environment:?}");
        }
        for kept in ["AWS_REGION", "KEEP_ME", "NOMAD_ALLOC_ID", "NOMAD_TASK_DIR"] {
            assert!(has(kept), "{kept} missing from {environment:?}");
        }
    }

    // A task asking for a malformed list fails to start, naming the key.
    let bad = job
        .replace("denied-env", "denied-env-bad")
        .replace("[\"AWS_SECRET*\"]", "\"AWS_SECRET*\"");
    let (_dir, path) = write_jobspec("bad.hcl", &bad);
    agent.cli_ok(&["job", "run", "-detach", &path.to_string_lossy()]);
    wait_for("the bad task's driver failure", LIMIT, || {
        let allocs = agent.get_json("/v1/job/denied-env-bad/allocations");
        let events = allocs.as_array()?.first()?["TaskStates"]["server"]["Events"].clone();
        events.as_array()?.iter().find_map(|event| {
            let text = event["DisplayMessage"].as_str()?;
            text.contains("denied_envvars must be a list of strings")
                .then_some(())
        })
    });
}

#[test]
fn alloc_exec_logs_and_fs_with_job_and_group_pick_an_allocation_of_that_group() {
    let agent = Agent::start_dev();
    let group = |name: &str| {
        format!(
            r#"
  group "{name}" {{
    task "main" {{
      driver = "raw_exec"
      config {{
        command = "/bin/sh"
        args    = ["-c", "echo in-$NOMAD_GROUP_NAME; echo file-$NOMAD_GROUP_NAME > local/which; exec sleep 3600"]
      }}
      resources {{
        cpu    = 50
        memory = 64
      }}
    }}
  }}"#
        )
    };
    let job = format!(
        "job \"pick-group\" {{\n  datacenters = [\"dc1\"]\n{}\n{}\n}}\n",
        group("web"),
        group("db")
    );
    let (_dir, path) = write_jobspec("groups.hcl", &job);
    agent.cli_ok(&["job", "run", "-detach", &path.to_string_lossy()]);
    wait_for("both groups running, their files written", LIMIT, || {
        let allocs = agent.get_json("/v1/job/pick-group/allocations");
        let allocs = allocs.as_array()?;
        let running = allocs
            .iter()
            .filter(|alloc| alloc["ClientStatus"] == "running")
            .count();
        let written = allocs.iter().all(|alloc| {
            let (_, body) = support::http(
                "GET",
                &agent.url(&format!(
                    "/v1/client/fs/cat/{}?path=main/local/which",
                    alloc["ID"].as_str().unwrap_or_default()
                )),
                None,
            );
            body.starts_with("file-")
        });
        (running == 2 && written).then_some(())
    });

    for name in ["web", "db"] {
        // Each pick is one allocation of the group asked for (the job named by a prefix).
        for _ in 0..3 {
            let (stdout, code) = exec_output(
                &agent,
                &[
                    "alloc",
                    "exec",
                    "-job",
                    "-group",
                    name,
                    "pick-gr",
                    "/bin/sh",
                    "-c",
                    "echo $NOMAD_GROUP_NAME",
                ],
            );
            assert_eq!((stdout.as_str(), code), (format!("{name}\n").as_str(), 0));
        }
        let logs = agent.cli_ok(&["alloc", "logs", "-job", "-group", name, "pick-group"]);
        assert_eq!(logs, format!("in-{name}\n"));
        let file = agent.cli_ok(&[
            "alloc",
            "fs",
            "-job",
            "-group",
            name,
            "pick-group",
            "main/local/which",
        ]);
        assert_eq!(file, format!("file-{name}\n"));
    }
    // Without -group, -job picks any of the job's allocations.
    let (stdout, code) = exec_output(
        &agent,
        &[
            "alloc",
            "exec",
            "-job",
            "pick-group",
            "/bin/sh",
            "-c",
            "echo $NOMAD_GROUP_NAME",
        ],
    );
    assert_eq!(code, 0);
    assert!(stdout == "web\n" || stdout == "db\n", "{stdout:?}");

    // A group without allocations, and -group without -job, are refused with what is wrong.
    for args in [
        &[
            "alloc",
            "exec",
            "-job",
            "-group",
            "cache",
            "pick-group",
            "/bin/true",
        ][..],
        &["alloc", "logs", "-job", "-group", "cache", "pick-group"][..],
        &["alloc", "fs", "-job", "-group", "cache", "pick-group"][..],
    ] {
        let refused = agent.cli(args);
        assert_eq!(refused.status.code(), Some(1), "{args:?}");
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(
            stderr.contains(
                "Error fetching allocations: task group \"cache\" doesn't exist or it has no allocations"
            ),
            "{args:?}: {stderr}"
        );
    }
    let alloc_id = agent.get_json("/v1/job/pick-group/allocations")[0]["ID"]
        .as_str()
        .unwrap()
        .to_owned();
    let refused = agent.cli(&["alloc", "logs", "-group", "web", &alloc_id]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("it needs -job"));
    let missing = agent.cli(&["alloc", "logs", "-job", "no-such-job"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&missing.stderr)
            .contains("No job(s) with prefix or id \"no-such-job\" found")
    );
}
