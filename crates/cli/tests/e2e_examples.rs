//! End to end: every file in `examples/` runs as its opening comment says, registered through
//! the real CLI on a real agent and followed through the API to the state the comment
//! promises (complete with the output it names, running, a canary waiting for promotion, a
//! periodic child launched, a variable read into a task's environment).
//!
//! `web.hcl` is run by `e2e_services` and `parameterized.hcl` by `e2e_periodic`; a new example
//! without a test here or there fails `every_example_has_a_test_that_runs_it`.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use support::{Agent, http, wait_for};

const LIMIT: Duration = Duration::from_secs(90);

/// The examples this file runs, and those another test runs.
const RUN_HERE: &[&str] = &[
    "artifact.hcl",
    "batch.hcl",
    "exec.hcl",
    "lifecycle.hcl",
    "periodic.hcl",
    "rolling-update.hcl",
    "system-rolling.hcl",
    "variables-secret.hcl",
];
const RUN_ELSEWHERE: &[(&str, &str)] = &[
    ("web.hcl", "e2e_services"),
    ("parameterized.hcl", "e2e_periodic"),
    ("bridge.hcl", "e2e_bridge"),
    (
        "resize-input.txt",
        "e2e_periodic (parameterized.hcl's payload)",
    ),
];

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name)
}

fn run_example(agent: &Agent, name: &str) {
    let output = agent.cli_ok(&["job", "run", "-detach", example(name).to_str().unwrap()]);
    assert!(output.contains("Job registration successful"), "{output}");
}

fn allocs(agent: &Agent, job_id: &str) -> Vec<Value> {
    let encoded = support::percent_encode(job_id);
    agent
        .get_json(&format!("/v1/job/{encoded}/allocations"))
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The ID of an allocation of `job_id` whose client status is `status`.
fn alloc_in(agent: &Agent, job_id: &str, status: &str) -> String {
    wait_for(
        &format!("an allocation of {job_id} {status}"),
        LIMIT,
        || {
            allocs(agent, job_id).iter().find_map(|alloc| {
                if alloc["ClientStatus"] == "failed" {
                    panic!("{job_id}'s allocation failed: {alloc}");
                }
                (alloc["ClientStatus"] == status).then(|| alloc["ID"].as_str().unwrap().to_owned())
            })
        },
    )
}

fn logs(agent: &Agent, alloc_id: &str, task: &str) -> String {
    agent.cli_ok(&["alloc", "logs", alloc_id, task])
}

/// Waits until the task's stdout holds `text`, and returns it.
fn logs_with(agent: &Agent, alloc_id: &str, task: &str, text: &str) -> String {
    wait_for(&format!("{task}'s output to show {text:?}"), LIMIT, || {
        let output = logs(agent, alloc_id, task);
        output.contains(text).then_some(output)
    })
}

#[test]
fn every_example_has_a_test_that_runs_it() {
    let mut untested = Vec::new();
    for entry in std::fs::read_dir(example("")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if !RUN_HERE.contains(&name.as_str())
            && !RUN_ELSEWHERE.iter().any(|(file, _)| *file == name)
        {
            untested.push(name);
        }
    }
    assert!(untested.is_empty(), "examples no test runs: {untested:?}");
}

#[test]
fn the_batch_artifact_and_lifecycle_examples_complete_with_the_output_their_comments_name() {
    let agent = Agent::start_dev();
    run_example(&agent, "artifact.hcl");
    run_example(&agent, "batch.hcl");
    run_example(&agent, "lifecycle.hcl");

    // artifact.hcl: the task prints the machine's os-release, fetched into local/.
    let fetched = alloc_in(&agent, "fetch", "complete");
    let os_release = std::fs::read_to_string("/etc/os-release").unwrap();
    let first_line = os_release.lines().next().unwrap();
    assert!(
        logs(&agent, &fetched, "show").contains(first_line),
        "the artifact example did not print {first_line:?}"
    );

    // batch.hcl: counts to ten, writes a report into the shared alloc directory, exits 0.
    let report = alloc_in(&agent, "report", "complete");
    let output = logs(&agent, &report, "count");
    assert!(
        output.contains("step 1\n") && output.contains("step 10\n"),
        "{output}"
    );
    let (status, written) = http(
        "GET",
        &agent.url(&format!(
            "/v1/client/fs/cat/{report}?path=alloc/data/report.txt"
        )),
        None,
    );
    assert_eq!(status, 200, "{written}");
    assert!(!written.trim().is_empty(), "the report is empty");

    // lifecycle.hcl: prestart prepares the input, main upper-cases it, poststart announces
    // the allocation, poststop cleans up; the sidecar runs meanwhile and is stopped.
    let pipeline = alloc_in(&agent, "lifecycle", "complete");
    assert!(logs(&agent, &pipeline, "main").contains("INPUT"));
    assert!(
        logs(&agent, &pipeline, "announce")
            .contains(&format!("main task started in allocation {pipeline}"))
    );
    assert!(logs(&agent, &pipeline, "cleanup").contains("cleaned up"));
    let alloc = agent.get_json(&format!("/v1/allocation/{pipeline}"));
    for task in ["prepare", "main", "announce", "cleanup"] {
        assert_eq!(
            alloc["TaskStates"][task]["Failed"], false,
            "{task}: {}",
            alloc["TaskStates"][task]
        );
    }
    assert_eq!(alloc["TaskStates"]["heartbeat"]["State"], "dead");
}

#[test]
fn the_exec_example_runs_isolated_as_nobody() {
    let agent = Agent::start_dev();
    run_example(&agent, "exec.hcl");
    let probe = alloc_in(&agent, "isolated", "running");
    // pid 1 of its own pid namespace, as the unprivileged user.
    let output = logs_with(&agent, &probe, "probe", "uid=");
    assert!(output.contains("pid 1 on "), "{output}");
    assert!(output.contains("uid=65534(nobody)"), "{output}");
    agent.cli_ok(&["job", "stop", "-purge", "isolated"]);
}

#[test]
fn the_periodic_example_schedules_launches_and_forces_a_child() {
    let agent = Agent::start_dev();
    run_example(&agent, "periodic.hcl");
    let status = agent.cli_ok(&["job", "status", "cleanup-tmp"]);
    assert!(status.contains("Next Periodic Launch"), "{status}");
    let launch = status
        .lines()
        .find(|line| line.starts_with("Next Periodic Launch"))
        .unwrap();
    // Every quarter hour (UTC).
    assert!(
        [":00:00", ":15:00", ":30:00", ":45:00"]
            .iter()
            .any(|minute| launch.contains(minute)),
        "{launch}"
    );
    let forced = agent.cli_ok(&["job", "periodic", "force", "cleanup-tmp"]);
    assert!(forced.contains("cleanup-tmp/periodic-"), "{forced}");
    let children = agent.get_json("/v1/jobs?prefix=cleanup-tmp/periodic-");
    let child = children[0]["ID"].as_str().unwrap().to_owned();
    alloc_in(&agent, &child, "complete");
}

#[test]
fn the_rolling_update_example_waits_for_promotion_then_replaces_the_old_allocations() {
    let agent = Agent::start_dev();
    run_example(&agent, "rolling-update.hcl");
    wait_for("two allocations running", LIMIT, || {
        let running = allocs(&agent, "rolling")
            .iter()
            .filter(|alloc| alloc["ClientStatus"] == "running")
            .count();
        (running == 2).then_some(())
    });
    // Change the task and run it again: one canary beside the two old allocations.
    let source = std::fs::read_to_string(example("rolling-update.hcl")).unwrap();
    let changed = source.replace("sleep 60", "sleep 61");
    assert_ne!(source, changed);
    let (_dir, path) = support::write_jobspec("rolling-update.hcl", &changed);
    agent.cli_ok(&["job", "run", "-detach", path.to_str().unwrap()]);
    let deployment = wait_for("the canary to wait for promotion", LIMIT, || {
        let deployment = agent.get_json("/v1/job/rolling/deployment");
        (deployment["JobVersion"] == 1
            && deployment["StatusDescription"]
                == "Deployment is running but requires manual promotion")
            .then_some(deployment)
    });
    let version_of = |alloc: &Value| alloc["JobVersion"].as_u64().unwrap_or_default();
    let live: Vec<Value> = allocs(&agent, "rolling")
        .into_iter()
        .filter(|alloc| alloc["DesiredStatus"] == "run")
        .collect();
    assert_eq!(live.len(), 3, "{live:?}");
    assert_eq!(
        live.iter().filter(|alloc| version_of(alloc) == 1).count(),
        1
    );
    let deployment_id = deployment["ID"].as_str().unwrap();
    // Promotion takes a healthy canary (running for the default min_healthy_time, 10s).
    wait_for("the canary to turn healthy", LIMIT, || {
        let deployment = agent.get_json(&format!("/v1/deployment/{deployment_id}"));
        (deployment["TaskGroups"]["web"]["HealthyAllocs"].as_u64() >= Some(1)).then_some(())
    });
    agent.cli_ok(&["deployment", "promote", "-detach", deployment_id]);
    wait_for(
        "the deployment to succeed",
        Duration::from_secs(150),
        || {
            (agent.get_json(&format!("/v1/deployment/{deployment_id}"))["Status"] == "successful")
                .then_some(())
        },
    );
    let running: Vec<u64> = allocs(&agent, "rolling")
        .iter()
        .filter(|alloc| alloc["ClientStatus"] == "running")
        .map(version_of)
        .collect();
    assert_eq!(running, vec![1, 1]);
    agent.cli_ok(&["job", "stop", "-purge", "rolling"]);
}

#[test]
fn the_system_rolling_example_runs_on_the_node_and_rolls_a_change_out() {
    let agent = Agent::start_dev();
    run_example(&agent, "system-rolling.hcl");
    let first = alloc_in(&agent, "node-agent", "running");
    let source = std::fs::read_to_string(example("system-rolling.hcl")).unwrap();
    let changed = source.replace("sleep 60", "sleep 61");
    let (_dir, path) = support::write_jobspec("system-rolling.hcl", &changed);
    agent.cli_ok(&["job", "run", "-detach", path.to_str().unwrap()]);
    // One node: the first two of a rolling update are all there is.
    wait_for("the new version to run on the node", LIMIT, || {
        allocs(&agent, "node-agent")
            .iter()
            .find(|alloc| alloc["ClientStatus"] == "running" && alloc["JobVersion"] == 1)
            .map(|alloc| assert_ne!(alloc["ID"], first.as_str()))
    });
    agent.cli_ok(&["job", "stop", "-purge", "node-agent"]);
}

#[test]
fn the_variables_example_reads_its_password_from_a_variable() {
    let agent = Agent::start_dev();
    agent.cli_ok(&["var", "put", "nomad/jobs/secret-web", "password=s3cret"]);
    run_example(&agent, "variables-secret.hcl");
    let server = alloc_in(&agent, "secret-web", "running");
    logs_with(&agent, &server, "server", "the password has 6 characters");
    // The password is in the task's private secrets directory.
    let rendered = agent
        .data_dir
        .join("alloc")
        .join(&server)
        .join("server/secrets/web.env");
    assert_eq!(
        std::fs::read_to_string(rendered).unwrap(),
        "PASSWORD=s3cret"
    );
    agent.cli_ok(&["job", "stop", "-purge", "secret-web"]);
}
