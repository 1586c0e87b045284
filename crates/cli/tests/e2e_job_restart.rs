//! End to end through the real agent and the real CLI: `drover job restart` restarts a job's
//! running allocations in place in batches (`-batch-size`, `-group`, `-task`, `-all-tasks`),
//! reschedules them (`-reschedule`: each stopped and its replacement waited for), refuses
//! Nomad's flag mistakes in Nomad's words, stops between batches on Ctrl-C, and
//! `drover job start` registers a stopped job again at its latest version.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use support::{Agent, drover_bin, wait_for, write_jobspec};

const LIMIT: Duration = Duration::from_secs(60);

const JOBSPEC: &str = r#"
job "restartable" {
  update {
    min_healthy_time = "1s"
    healthy_deadline = "20s"
  }
  group "web" {
    count = 3
    task "server" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "sleep 300"]
      }
      resources {
        cpu    = 20
        memory = 16
      }
    }
  }
  group "other" {
    task "worker" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "sleep 300"]
      }
      resources {
        cpu    = 20
        memory = 16
      }
    }
  }
}
"#;

fn live_allocations(agent: &Agent, group: &str) -> Vec<Value> {
    agent
        .get_json("/v1/job/restartable/allocations")
        .as_array()
        .unwrap()
        .iter()
        .filter(|allocation| {
            allocation["TaskGroup"] == group && allocation["DesiredStatus"] == "run"
        })
        .cloned()
        .collect()
}

fn running(agent: &Agent, group: &str, count: usize) -> bool {
    let allocations = live_allocations(agent, group);
    allocations.len() == count
        && allocations.iter().all(|allocation| {
            allocation["ClientStatus"] == "running"
                && allocation["TaskStates"]
                    .as_object()
                    .is_some_and(|states| states.values().all(|state| state["State"] == "running"))
        })
}

/// Each live allocation of the group with its task's restart count.
fn restarts(agent: &Agent, group: &str, task: &str) -> Vec<(String, u64)> {
    let mut counts: Vec<(String, u64)> = live_allocations(agent, group)
        .iter()
        .map(|allocation| {
            (
                allocation["ID"].as_str().unwrap().to_owned(),
                allocation["TaskStates"][task]["Restarts"]
                    .as_u64()
                    .unwrap_or(0),
            )
        })
        .collect();
    counts.sort();
    counts
}

fn stderr_of(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn job_restart_restarts_in_batches_reschedules_and_job_start_starts_a_stopped_job() {
    let agent = Agent::start_dev();
    let (_dir, path) = write_jobspec("restartable.hcl", JOBSPEC);
    agent.cli_ok(&["job", "run", "-detach", path.to_str().unwrap()]);
    wait_for("every allocation running", LIMIT, || {
        (running(&agent, "web", 3) && running(&agent, "other", 1)).then_some(())
    });
    // A restart waits out the job's deployment, as Nomad's does: that refusal first.
    let output = agent.cli(&["job", "restart", "-yes", "restartable"]);
    let deployment = agent.get_json("/v1/job/restartable/deployment");
    if deployment["Status"] == "running" {
        assert_eq!(output.status.code(), Some(1));
        assert!(
            stderr_of(&output).contains(&format!(
                "Deployment \"{}\" is \"running\"",
                &deployment["ID"].as_str().unwrap()[..8]
            )),
            "{}",
            stderr_of(&output)
        );
    }
    wait_for("the deployment to succeed", LIMIT, || {
        (agent.get_json("/v1/job/restartable/deployment")["Status"] == "successful").then_some(())
    });

    // Flag mistakes, in Nomad's words, before anything is restarted.
    let output = agent.cli(&["job", "restart", "restartable"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr_of(&output).contains(
            "Invalid -on-error value \"ask\": \"ask\" cannot be used when terminal is not interactive"
        ),
        "{}",
        stderr_of(&output)
    );
    let output = agent.cli(&["job", "restart", "-yes", "-batch-size=0", "restartable"]);
    assert!(
        stderr_of(&output)
            .contains("Invalid -batch-size value \"0\": number value must be greater than zero")
    );
    let output = agent.cli(&["job", "restart", "-yes", "-batch-size=1%%", "restartable"]);
    assert!(stderr_of(&output).contains("batch size must be an integer or a percentage"));
    let output = agent.cli(&[
        "job",
        "restart",
        "-yes",
        "-reschedule",
        "-task=server",
        "restartable",
    ]);
    assert!(stderr_of(&output).contains("The -reschedule option cannot be used with -task"));
    let output = agent.cli(&[
        "job",
        "restart",
        "-yes",
        "-all-tasks",
        "-task=server",
        "restartable",
    ]);
    assert!(stderr_of(&output).contains("The -all-tasks option cannot be used with -task"));
    let output = agent.cli(&["job", "restart", "-yes", "-on-error=never", "restartable"]);
    assert!(
        stderr_of(&output)
            .contains("Invalid -on-error value \"never\": valid options are \"ask\" and \"fail\"")
    );

    // No allocation has the task: nothing to do.
    let text = agent.cli_ok(&["job", "restart", "-yes", "-task=absent", "restartable"]);
    assert!(text.contains("No allocations to restart"), "{text}");

    // In place, one group, two at a time: three restarts in two batches, the other group
    // left alone.
    let before = restarts(&agent, "web", "server");
    assert!(before.iter().all(|(_, count)| *count == 0), "{before:?}");
    let text = agent.cli_ok(&[
        "job",
        "restart",
        "-yes",
        "-batch-size=2",
        "-group=web",
        "restartable",
    ]);
    assert!(text.contains(": Restarting 3 allocations"), "{text}");
    assert!(
        text.contains(": Restarting 1st batch of 2 allocations"),
        "{text}"
    );
    assert!(
        text.contains(": Restarting 2nd batch of 1 allocations"),
        "{text}"
    );
    assert_eq!(
        text.matches("Restarting running tasks in allocation")
            .count(),
        3,
        "{text}"
    );
    assert!(text.contains("Job restarted successfully!"), "{text}");
    // The client reports the restarts in its next status batch.
    let after = wait_for("every web task restarted once", LIMIT, || {
        let after = restarts(&agent, "web", "server");
        after.iter().all(|(_, count)| *count == 1).then_some(after)
    });
    assert_eq!(
        after.iter().map(|(id, _)| id).collect::<Vec<_>>(),
        before.iter().map(|(id, _)| id).collect::<Vec<_>>(),
        "restarted in place, not replaced"
    );
    assert_eq!(restarts(&agent, "other", "worker")[0].1, 0);

    // One task by name, a percentage batch (34% of the one allocation that has it rounds up to 1).
    let text = agent.cli_ok(&[
        "job",
        "restart",
        "-yes",
        "-batch-size=34%",
        "-task=worker",
        "restartable",
    ]);
    assert!(text.contains("Restarting 1 allocation"), "{text}");
    assert!(
        text.contains("Restarting task \"worker\" in allocation"),
        "{text}"
    );
    wait_for("the worker restarted", LIMIT, || {
        (restarts(&agent, "other", "worker")[0].1 == 1).then_some(())
    });
    assert!(
        restarts(&agent, "web", "server")
            .iter()
            .all(|(_, count)| *count == 1)
    );

    // Rescheduled: the allocation stopped and its replacement waited for until it runs.
    let old = live_allocations(&agent, "other")[0]["ID"]
        .as_str()
        .unwrap()
        .to_owned();
    let text = agent.cli_ok(&[
        "job",
        "restart",
        "-yes",
        "-reschedule",
        "-group=other",
        "-verbose",
        "restartable",
    ]);
    assert!(
        text.contains(&format!(
            "Rescheduling allocation \"{old}\" for group \"other\""
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!("Allocation \"{old}\" replaced by")),
        "{text}"
    );
    assert!(text.contains("is \"running\""), "{text}");
    let replacement = live_allocations(&agent, "other");
    assert_eq!(replacement.len(), 1);
    assert_ne!(replacement[0]["ID"].as_str().unwrap(), old);
    assert_eq!(replacement[0]["ClientStatus"], "running");
    let previous = agent.get_json(&format!("/v1/allocation/{old}"));
    assert_eq!(previous["DesiredStatus"], "stop");

    // Ctrl-C during the wait between batches: the restart stops there (standard input is
    // closed, so the question is answered with a stop) and no further batch runs.
    let mut child = Command::new(drover_bin())
        .args([
            "job",
            "restart",
            "-yes",
            "-batch-wait=30s",
            "-group=web",
            "restartable",
        ])
        .env("NOMAD_ADDR", &agent.address)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (lines_tx, lines_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = lines_tx.send(line);
        }
    });
    let mut seen = Vec::new();
    loop {
        let line = lines_rx
            .recv_timeout(LIMIT)
            .expect("the restart waits between batches");
        let waiting = line.contains("Waiting 30s before restarting the next batch");
        seen.push(line);
        if waiting {
            break;
        }
    }
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let status = wait_for(
        "the restart to stop after Ctrl-C",
        Duration::from_secs(10),
        || child.try_wait().ok().flatten(),
    );
    seen.extend(lines_rx.try_iter());
    let text = seen.join("\n");
    assert!(status.success(), "{text}");
    assert!(
        text.contains("Are you sure you want to stop the restart process? [y/N]"),
        "{text}"
    );
    assert!(text.contains("Canceling job restart process"), "{text}");
    wait_for("the first batch's restart reported", LIMIT, || {
        restarts(&agent, "web", "server")
            .iter()
            .any(|(_, count)| *count == 2)
            .then_some(())
    });
    let counts: Vec<u64> = restarts(&agent, "web", "server")
        .into_iter()
        .map(|(_, count)| count)
        .collect();
    assert_eq!(
        counts.iter().filter(|count| **count == 2).count(),
        1,
        "{counts:?}"
    );
    assert_eq!(
        counts.iter().filter(|count| **count == 1).count(),
        2,
        "{counts:?}"
    );

    // job start: refused while the job runs, then after a stop it runs again at a new version.
    let output = agent.cli(&["job", "start", "restartable"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr_of(&output).contains("Job \"restartable\" has not been stopped"));
    agent.cli_ok(&["job", "stop", "-detach", "restartable"]);
    wait_for("every allocation stopped", LIMIT, || {
        (live_allocations(&agent, "web").is_empty() && live_allocations(&agent, "other").is_empty())
            .then_some(())
    });
    let stopped_version = agent.get_json("/v1/job/restartable")["Version"]
        .as_u64()
        .unwrap();
    let text = agent.cli_ok(&["job", "start", "restartable"]);
    assert!(text.contains("Monitoring evaluation"), "{text}");
    let job = agent.get_json("/v1/job/restartable");
    assert_eq!(job["Stop"], false);
    assert_eq!(job["Version"].as_u64().unwrap(), stopped_version + 1);
    wait_for("the started job's allocations running", LIMIT, || {
        (running(&agent, "web", 3) && running(&agent, "other", 1)).then_some(())
    });
}

/// `server { job_max_count }`: a register or a scale past the total is refused in Nomad's
/// words; within it both run. A negative limit stops the agent at start.
#[test]
fn job_max_count_refuses_registers_and_scales_past_the_total() {
    let temp = tempfile::tempdir().unwrap();
    let config = support::agent_config(
        temp.path(),
        "server.hcl",
        "server {\n  job_max_count = 4\n}\n",
    );
    let agent = Agent::start_with(&temp.path().join("data"), &[&format!("-config={config}")]);
    let (_dir, path) = write_jobspec("restartable.hcl", JOBSPEC);
    // web 3 + other 1 = 4: at the limit, registered.
    agent.cli_ok(&["job", "run", "-detach", path.to_str().unwrap()]);
    let (_dir, bigger) = write_jobspec("bigger.hcl", &JOBSPEC.replace("count = 3", "count = 4"));
    let output = agent.cli(&["job", "run", "-detach", bigger.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr_of(&output).contains("total count was greater than configured job_max_count: 5 > 4"),
        "{}",
        stderr_of(&output)
    );
    let (status, body) = support::http(
        "POST",
        &agent.url("/v1/job/restartable/scale"),
        Some(r#"{"Count":4,"Target":{"Group":"web"}}"#),
    );
    assert_eq!(
        (status, body.as_str()),
        (
            400,
            "total count was greater than configured job_max_count: 5 > 4"
        )
    );
    // Within the limit it scales, once the job's deployment is done (a scale waits for it).
    wait_for("the deployment to succeed", LIMIT, || {
        (agent.get_json("/v1/job/restartable/deployment")["Status"] == "successful").then_some(())
    });
    let (status, body) = support::http(
        "POST",
        &agent.url("/v1/job/restartable/scale"),
        Some(r#"{"Count":2,"Target":{"Group":"web"}}"#),
    );
    assert_eq!(status, 200, "{body}");

    let bad = support::agent_config(
        temp.path(),
        "bad.hcl",
        "server {\n  job_max_count = -1\n}\n",
    );
    let output = Command::new(drover_bin())
        .args(["agent", "-dev", "-http-port=0", &format!("-config={bad}")])
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("job_max_count (-1) cannot be negative"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// `client { default_ineligible = true }`: the node registers ineligible, so a job waits
/// blocked until an operator makes it eligible; then it is placed.
#[test]
fn default_ineligible_nodes_take_no_work_until_made_eligible() {
    let temp = tempfile::tempdir().unwrap();
    let config = support::agent_config(
        temp.path(),
        "client.hcl",
        "client {\n  default_ineligible = true\n}\n",
    );
    let agent = Agent::start_with(&temp.path().join("data"), &[&format!("-config={config}")]);
    let node = wait_for("the node registered", LIMIT, || {
        let nodes = agent.get_json("/v1/nodes");
        nodes.as_array().unwrap().first().cloned()
    });
    assert_eq!(node["SchedulingEligibility"], "ineligible");
    let (_dir, path) = write_jobspec("restartable.hcl", JOBSPEC);
    agent.cli_ok(&["job", "run", "-detach", path.to_str().unwrap()]);
    wait_for("a blocked evaluation", LIMIT, || {
        let evaluations = agent.get_json("/v1/job/restartable/evaluations");
        evaluations
            .as_array()
            .unwrap()
            .iter()
            .any(|evaluation| evaluation["Status"] == "blocked")
            .then_some(())
    });
    assert!(live_allocations(&agent, "web").is_empty());
    let node_id = node["ID"].as_str().unwrap();
    agent.cli_ok(&["node", "eligibility", "-enable", node_id]);
    wait_for("the job placed once the node is eligible", LIMIT, || {
        (running(&agent, "web", 3) && running(&agent, "other", 1)).then_some(())
    });
}
