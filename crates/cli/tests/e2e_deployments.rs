//! End to end through the real agent: a job's versions marked stable and reverted —
//! `PUT /v1/job/<id>/stable` and `PUT /v1/job/<id>/revert` as Nomad answers them, with their
//! refusals (a body naming another job, the current version, a stale `EnforcePriorVersion`, a
//! version that does not exist), and the reverted spec running again; rolling updates through
//! deployments: one allocation at a time by reported health, canaries until
//! `deployment promote`, and a failing version rolled back by `auto_revert`.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::{Agent, http, wait_for, write_jobspec};

const LIMIT: Duration = Duration::from_secs(60);

fn jobspec(job: &str, color: &str) -> String {
    format!(
        r#"
job "{job}" {{
  group "web" {{
    task "server" {{
      driver = "raw_exec"
      config {{
        command = "/bin/sh"
        args    = ["-c", "sleep 300"]
      }}
      env {{
        COLOR = "{color}"
      }}
      resources {{
        cpu    = 20
        memory = 16
      }}
    }}
  }}
}}
"#
    )
}

fn put(agent: &Agent, path: &str, body: Value) -> (u16, Value) {
    let (status, text) = http("PUT", &agent.url(path), Some(&body.to_string()));
    let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, value)
}

fn color_of(job: &Value) -> String {
    job["TaskGroups"][0]["Tasks"][0]["Env"]["COLOR"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn versions_are_marked_stable_and_reverted_as_nomad_does() {
    let agent = Agent::start_dev();
    let job = format!("revert-{}", std::process::id());
    let (_dir, blue) = write_jobspec("blue.hcl", &jobspec(&job, "blue"));
    let (_dir2, green) = write_jobspec("green.hcl", &jobspec(&job, "green"));
    agent.cli_ok(&["job", "run", "-detach", blue.to_str().unwrap()]);
    agent.cli_ok(&["job", "run", "-detach", green.to_str().unwrap()]);
    let current = agent.get_json(&format!("/v1/job/{job}"));
    assert_eq!(
        (current["Version"].as_u64(), color_of(&current).as_str()),
        (Some(1), "green")
    );

    // Stable: version 0 marked, the current job untouched; then the current version.
    let (status, answer) = put(
        &agent,
        &format!("/v1/job/{job}/stable"),
        json!({"JobID": job, "JobVersion": 0, "Stable": true}),
    );
    assert_eq!(status, 200, "{answer}");
    assert!(answer["Index"].as_u64().unwrap() > 0);
    let versions = agent.get_json(&format!("/v1/job/{job}/versions"));
    let stable: Vec<(u64, bool)> = versions["Versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["Version"].as_u64().unwrap(),
                v["Stable"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(stable, vec![(1, false), (0, true)]);
    assert_eq!(agent.get_json(&format!("/v1/job/{job}"))["Stable"], false);
    let (status, _) = put(
        &agent,
        &format!("/v1/job/{job}/stable"),
        json!({"JobID": job, "JobVersion": 1, "Stable": true}),
    );
    assert_eq!(status, 200);
    let current = agent.get_json(&format!("/v1/job/{job}"));
    assert_eq!(
        (current["Stable"].as_bool(), current["Version"].as_u64()),
        (Some(true), Some(1))
    );

    // Refusals.
    for (body, want_status, want_text) in [
        (json!({"JobVersion": 0}), 400, "JobID must be specified"),
        (
            json!({"JobID": "other", "JobVersion": 0}),
            400,
            "Job ID does not match",
        ),
        (
            json!({"JobID": job, "JobVersion": 1}),
            400,
            "can't revert to current version",
        ),
        (
            json!({"JobID": job, "JobVersion": 0, "EnforcePriorVersion": 7}),
            400,
            "Current job has version 1; enforcing version 7",
        ),
        (
            json!({"JobID": job, "JobVersion": 9}),
            404,
            "at version 9 not found",
        ),
    ] {
        let (status, answer) = put(&agent, &format!("/v1/job/{job}/revert"), body.clone());
        assert_eq!(status, want_status, "{body} → {answer}");
        assert!(answer.to_string().contains(want_text), "{body} → {answer}");
    }
    let (status, answer) = put(
        &agent,
        &format!("/v1/job/{job}/stable"),
        json!({"JobID": job, "JobVersion": 9, "Stable": true}),
    );
    assert_eq!(status, 404, "{answer}");

    // Revert to version 0: a new version 2 with version 0's spec, evaluated and running.
    let (status, answer) = put(
        &agent,
        &format!("/v1/job/{job}/revert"),
        json!({"JobID": job, "JobVersion": 0, "EnforcePriorVersion": 1}),
    );
    assert_eq!(status, 200, "{answer}");
    assert!(!answer["EvalID"].as_str().unwrap().is_empty());
    let current = agent.get_json(&format!("/v1/job/{job}"));
    assert_eq!(
        (current["Version"].as_u64(), color_of(&current).as_str()),
        (Some(2), "blue")
    );
    assert_eq!(current["Stable"], false);
    wait_for("an allocation of version 2 running", LIMIT, || {
        let allocs = agent.get_json(&format!("/v1/job/{job}/allocations"));
        allocs.as_array().unwrap().iter().find_map(|alloc| {
            (alloc["JobVersion"] == 2 && alloc["ClientStatus"] == "running").then_some(())
        })
    });
    agent.cli_ok(&["job", "stop", "-purge", &job]);
}

#[test]
fn job_revert_on_the_command_line_monitors_the_evaluation() {
    let agent = Agent::start_dev();
    let job = format!("cli-revert-{}", std::process::id());
    let (_dir, blue) = write_jobspec("blue.hcl", &jobspec(&job, "blue"));
    let (_dir2, green) = write_jobspec("green.hcl", &jobspec(&job, "green"));
    agent.cli_ok(&["job", "run", "-detach", blue.to_str().unwrap()]);
    agent.cli_ok(&["job", "run", "-detach", green.to_str().unwrap()]);

    let output = agent.cli_ok(&["job", "revert", &job, "0"]);
    assert!(output.contains("Monitoring evaluation"), "{output}");
    let current = agent.get_json(&format!("/v1/job/{job}"));
    assert_eq!(
        (current["Version"].as_u64(), color_of(&current).as_str()),
        (Some(2), "blue")
    );

    let refused = agent.cli(&["job", "revert", &job, "2"]);
    assert_eq!(refused.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("Error retrieving job versions"), "{stderr}");
    assert!(
        stderr.contains("can't revert to current version"),
        "{stderr}"
    );
    let bad = agent.cli(&["job", "revert", &job, "x"]);
    assert_eq!(bad.status.code(), Some(1));
    agent.cli_ok(&["job", "stop", "-purge", &job]);
}

/// A service of `count` allocations whose task sleeps (or, with `exit`, exits at once), with
/// `update` as given.
fn rolling_jobspec(job: &str, count: u32, color: &str, update: &str, exit: bool) -> String {
    let script = if exit { "exit 1" } else { "sleep 300" };
    format!(
        r#"
job "{job}" {{
  update {{
{update}
  }}
  group "web" {{
    count = {count}
    restart {{
      attempts = 0
      mode     = "fail"
    }}
    task "server" {{
      driver       = "raw_exec"
      kill_timeout = "1s"
      config {{
        command = "/bin/sh"
        args    = ["-c", "{script}"]
      }}
      env {{
        COLOR = "{color}"
      }}
      resources {{
        cpu    = 20
        memory = 16
      }}
    }}
  }}
}}
"#
    )
}

/// The job's allocations that should run and run, as (job version, healthy).
fn running(agent: &Agent, job: &str) -> Vec<(u64, bool)> {
    let allocs = agent.get_json(&format!("/v1/job/{job}/allocations"));
    allocs
        .as_array()
        .unwrap()
        .iter()
        .filter(|alloc| alloc["DesiredStatus"] == "run" && alloc["ClientStatus"] == "running")
        .map(|alloc| {
            (
                alloc["JobVersion"].as_u64().unwrap(),
                alloc["DeploymentStatus"]["Healthy"] == true,
            )
        })
        .collect()
}

/// The job's latest deployment once it reached `status`.
fn deployment_with_status(agent: &Agent, job: &str, version: u64, status: &str) -> Value {
    wait_for(
        &format!("the deployment of {job} version {version} {status}"),
        LIMIT,
        || {
            let deployments = agent.get_json(&format!("/v1/job/{job}/deployments"));
            deployments.as_array()?.iter().find_map(|deployment| {
                (deployment["JobVersion"] == version && deployment["Status"] == status)
                    .then(|| deployment.clone())
            })
        },
    )
}

fn stable_versions(agent: &Agent, job: &str) -> Vec<u64> {
    let versions = agent.get_json(&format!("/v1/job/{job}/versions"));
    versions["Versions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|version| version["Stable"] == true)
        .map(|version| version["Version"].as_u64().unwrap())
        .collect()
}

#[test]
fn a_changed_job_rolls_out_one_allocation_at_a_time_and_becomes_stable() {
    let agent = Agent::start_dev();
    let job = format!("rolling-{}", std::process::id());
    let update = r#"    max_parallel     = 1
    min_healthy_time = "1s""#;
    let (_dir, blue) = write_jobspec("blue.hcl", &rolling_jobspec(&job, 4, "blue", update, false));
    let (_dir2, green) = write_jobspec(
        "green.hcl",
        &rolling_jobspec(&job, 4, "green", update, false),
    );

    // The first version: `job run` watches its evaluation, then its deployment to the end.
    let output = agent.cli_ok(&["job", "run", blue.to_str().unwrap()]);
    assert!(output.contains("Monitoring deployment"), "{output}");
    assert!(
        output.contains("Deployment completed successfully"),
        "{output}"
    );
    deployment_with_status(&agent, &job, 0, "successful");
    assert_eq!(stable_versions(&agent, &job), [0]);

    // The second version replaces one allocation at a time: never fewer than three healthy.
    agent.cli_ok(&["job", "run", "-detach", green.to_str().unwrap()]);
    let mut fewest = usize::MAX;
    let mut seen_mixed = false;
    let deployment = wait_for("the rollout of version 1", LIMIT, || {
        let now = running(&agent, &job);
        let healthy = now.iter().filter(|(_, healthy)| *healthy).count();
        fewest = fewest.min(healthy);
        seen_mixed |= now.iter().any(|(version, _)| *version == 0)
            && now.iter().any(|(version, _)| *version == 1);
        let deployments = agent.get_json(&format!("/v1/job/{job}/deployment"));
        (deployments["JobVersion"] == 1 && deployments["Status"] == "successful")
            .then_some(deployments)
    });
    assert!(
        fewest >= 3,
        "only {fewest} healthy allocations at one point"
    );
    assert!(seen_mixed, "both versions never ran side by side");
    assert_eq!(
        deployment["StatusDescription"],
        "Deployment completed successfully"
    );
    assert_eq!(deployment["TaskGroups"]["web"]["DesiredTotal"], 4);
    assert_eq!(deployment["TaskGroups"]["web"]["HealthyAllocs"], 4);
    let mut now = running(&agent, &job);
    now.sort_unstable();
    assert_eq!(now, [(1, true), (1, true), (1, true), (1, true)]);
    assert_eq!(stable_versions(&agent, &job), [1, 0]);

    // `deployment list` and `deployment status` show it as Nomad does.
    let id = deployment["ID"].as_str().unwrap();
    let list = agent.cli_ok(&["deployment", "list"]);
    assert!(list.starts_with("ID"), "{list}");
    assert!(list.contains(&id[..8]), "{list}");
    let status = agent.cli_ok(&["deployment", "status", &id[..8]]);
    assert!(status.contains(&format!("Job ID      = {job}")), "{status}");
    assert!(status.contains("Deployed"), "{status}");
    assert!(
        status.contains("Task Group  Desired  Placed  Healthy  Unhealthy  Progress Deadline"),
        "{status}"
    );
    let job_status = agent.cli_ok(&["job", "status", &job]);
    assert!(job_status.contains("Latest Deployment"), "{job_status}");
    // -json and -t as Nomad's Format: four-space JSON, or a Go template.
    let listed = agent.cli_ok(&["deployment", "list", "-json"]);
    assert!(listed.starts_with("[\n    {\n        \"ID\": "), "{listed}");
    let templated = agent.cli_ok(&["deployment", "status", "-t", "{{.Status}}", &id[..8]]);
    assert_eq!(templated.trim(), "successful");
    let history = agent.cli_ok(&[
        "job",
        "history",
        "-t",
        "{{range .}}{{.Version}} {{end}}",
        &job,
    ]);
    assert_eq!(history.trim(), "1 0");
    agent.cli_ok(&["job", "stop", "-purge", &job]);
}

#[test]
fn a_canary_waits_for_promotion_then_the_rest_roll() {
    let agent = Agent::start_dev();
    let job = format!("canary-{}", std::process::id());
    let update = r#"    max_parallel     = 1
    canary           = 1
    min_healthy_time = "1s""#;
    let (_dir, blue) = write_jobspec("blue.hcl", &rolling_jobspec(&job, 4, "blue", update, false));
    let (_dir2, green) = write_jobspec(
        "green.hcl",
        &rolling_jobspec(&job, 4, "green", update, false),
    );
    agent.cli_ok(&["job", "run", "-detach", blue.to_str().unwrap()]);
    deployment_with_status(&agent, &job, 0, "successful");

    agent.cli_ok(&["job", "run", "-detach", green.to_str().unwrap()]);
    let waiting = wait_for("a healthy canary", LIMIT, || {
        let deployment = agent.get_json(&format!("/v1/job/{job}/deployment"));
        (deployment["JobVersion"] == 1 && deployment["TaskGroups"]["web"]["HealthyAllocs"] == 1)
            .then_some(deployment)
    });
    assert_eq!(
        waiting["StatusDescription"],
        "Deployment is running but requires manual promotion"
    );
    // Nothing more happens until the promotion: one canary beside the four old ones.
    std::thread::sleep(Duration::from_secs(3));
    let mut now = running(&agent, &job);
    now.sort_unstable();
    assert_eq!(now, [(0, true), (0, true), (0, true), (0, true), (1, true)]);
    assert_eq!(
        agent.get_json(&format!("/v1/job/{job}/deployment"))["Status"],
        "running"
    );

    let id = waiting["ID"].as_str().unwrap();
    let output = agent.cli_ok(&["deployment", "promote", &id[..8]]);
    assert!(output.contains("Monitoring evaluation"), "{output}");
    assert!(
        output.contains("Deployment completed successfully"),
        "{output}"
    );
    let done = deployment_with_status(&agent, &job, 1, "successful");
    assert_eq!(done["TaskGroups"]["web"]["Promoted"], true);
    wait_for("four allocations of version 1 only", LIMIT, || {
        let mut now = running(&agent, &job);
        now.sort_unstable();
        (now == [(1, true), (1, true), (1, true), (1, true)]).then_some(())
    });
    agent.cli_ok(&["job", "stop", "-purge", &job]);
}

#[test]
fn a_failing_version_is_rolled_back_by_auto_revert() {
    let agent = Agent::start_dev();
    let job = format!("autorevert-{}", std::process::id());
    let update = r#"    max_parallel      = 1
    min_healthy_time  = "1s"
    healthy_deadline  = "2s"
    progress_deadline = "4s"
    auto_revert       = true"#;
    let (_dir, good) = write_jobspec("good.hcl", &rolling_jobspec(&job, 2, "blue", update, false));
    let (_dir2, bad) = write_jobspec("bad.hcl", &rolling_jobspec(&job, 2, "red", update, true));
    agent.cli_ok(&["job", "run", "-detach", good.to_str().unwrap()]);
    deployment_with_status(&agent, &job, 0, "successful");
    assert_eq!(stable_versions(&agent, &job), [0]);

    // The new version's task exits at once: its deployment fails and version 0 runs again.
    let output = agent.cli(&["job", "run", bad.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let failed = deployment_with_status(&agent, &job, 1, "failed");
    assert_eq!(
        failed["StatusDescription"],
        "Failed due to progress deadline - rolling back to job version 0"
    );
    assert!(stdout.contains("rolling back to job version 0"), "{stdout}");
    let current = agent.get_json(&format!("/v1/job/{job}"));
    assert_eq!(
        (current["Version"].as_u64(), color_of(&current).as_str()),
        (Some(2), "blue")
    );
    deployment_with_status(&agent, &job, 2, "successful");
    wait_for("two healthy allocations of version 2", LIMIT, || {
        let now = running(&agent, &job);
        (now.len() == 2
            && now
                .iter()
                .all(|(version, healthy)| *version == 2 && *healthy))
        .then_some(())
    });
    agent.cli_ok(&["job", "stop", "-purge", &job]);
}

/// A system job rolled with a job-level `update { max_parallel = 1, stagger }`.
fn system_rolling_jobspec(job: &str, color: &str) -> String {
    format!(
        r#"
job "{job}" {{
  type = "system"
  update {{
    max_parallel = 1
    stagger      = "{SYSTEM_STAGGER_SECS}s"
  }}
  group "agent" {{
    task "collector" {{
      driver       = "raw_exec"
      kill_timeout = "1s"
      config {{
        command = "/bin/sh"
        args    = ["-c", "sleep 300"]
      }}
      env {{
        COLOR = "{color}"
      }}
      resources {{
        cpu    = 20
        memory = 16
      }}
    }}
  }}
}}
"#
    )
}

const SYSTEM_STAGGER_SECS: u64 = 5;

/// The job's allocations as (node, job version, desired status, client status, create time,
/// modify time, ID), oldest first.
type SystemAlloc = (String, u64, String, String, i64, i64, String);

fn system_allocs(server: &Agent, job: &str) -> Vec<SystemAlloc> {
    let mut allocs: Vec<_> = server
        .get_json(&format!("/v1/job/{job}/allocations"))
        .as_array()
        .unwrap()
        .iter()
        .map(|alloc| {
            (
                alloc["NodeID"].as_str().unwrap().to_owned(),
                alloc["JobVersion"].as_u64().unwrap(),
                alloc["DesiredStatus"].as_str().unwrap().to_owned(),
                alloc["ClientStatus"].as_str().unwrap().to_owned(),
                alloc["CreateTime"].as_i64().unwrap(),
                alloc["ModifyTime"].as_i64().unwrap(),
                alloc["ID"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    allocs.sort_by_key(|alloc| alloc.4);
    allocs
}

#[test]
fn a_system_job_rolls_max_parallel_nodes_at_a_time_with_stagger_between_waves() {
    let temp = tempfile::tempdir().expect("temp dir");
    let (server, _clients, node_a, node_b) =
        support::server_and_two_clients(temp.path(), Duration::from_secs(90));
    let job = format!("sysroll-{}", std::process::id());
    let (_dir, blue) = write_jobspec("blue.hcl", &system_rolling_jobspec(&job, "blue"));
    let (_dir2, green) = write_jobspec("green.hcl", &system_rolling_jobspec(&job, "green"));

    server.cli_ok(&["job", "run", blue.to_str().unwrap()]);
    wait_for("the first version running on both nodes", LIMIT, || {
        let allocs = system_allocs(&server, &job);
        let nodes: std::collections::BTreeSet<&str> = allocs
            .iter()
            .filter(|alloc| alloc.2 == "run" && alloc.3 == "running")
            .map(|alloc| alloc.0.as_str())
            .collect();
        (nodes.len() == 2).then_some(())
    });

    // `job plan` counts both replacements, as Nomad's annotations do.
    let plan = server.cli(&["job", "plan", "-no-color", green.to_str().unwrap()]);
    let plan_text = String::from_utf8_lossy(&plan.stdout);
    assert_eq!(plan.status.code(), Some(1), "{plan_text}");
    assert!(
        plan_text.contains(r#"Task Group: "agent" (2 create/destroy update)"#),
        "{plan_text}"
    );

    // `job run` follows the evaluation chain: the register evaluation replaces one node, the
    // rolling-update evaluation a stagger later the other.
    let output = server.cli_ok(&["job", "run", green.to_str().unwrap()]);
    assert_eq!(
        output.matches("Monitoring evaluation").count(),
        2,
        "{output}"
    );
    assert_eq!(
        output.matches("finished with status \"complete\"").count(),
        2,
        "{output}"
    );
    let evals = server.get_json(&format!("/v1/job/{job}/evaluations"));
    let evals = evals.as_array().unwrap();
    let rolling: Vec<&Value> = evals
        .iter()
        .filter(|eval| eval["TriggeredBy"] == "rolling-update")
        .collect();
    assert_eq!(rolling.len(), 1, "{evals:?}");
    let rolling = rolling[0];
    assert_eq!(rolling["Status"], "complete");
    assert_eq!(rolling["Wait"], SYSTEM_STAGGER_SECS * 1_000_000_000);
    assert_eq!(rolling["NextEval"], "");
    let register = evals
        .iter()
        .find(|eval| eval["ID"] == rolling["PreviousEval"])
        .expect("the rolling evaluation follows the register evaluation");
    assert_eq!(register["TriggeredBy"], "job-register");
    assert_eq!(register["NextEval"], rolling["ID"]);

    // The new version reached the nodes a stagger apart; the second node ran the old version
    // until its wave.
    let allocs = system_allocs(&server, &job);
    let new: Vec<_> = allocs.iter().filter(|alloc| alloc.1 == 1).collect();
    let old: Vec<_> = allocs.iter().filter(|alloc| alloc.1 == 0).collect();
    assert_eq!(new.len(), 2, "{allocs:?}");
    assert!(new.iter().all(|alloc| alloc.2 == "run"), "{allocs:?}");
    assert!(old.iter().all(|alloc| alloc.2 == "stop"), "{allocs:?}");
    let nodes: std::collections::BTreeSet<&str> =
        new.iter().map(|alloc| alloc.0.as_str()).collect();
    assert_eq!(
        nodes,
        std::collections::BTreeSet::from([node_a.as_str(), node_b.as_str()])
    );
    let stagger_nanos = i64::try_from(SYSTEM_STAGGER_SECS * 1_000_000_000).unwrap();
    assert!(
        new[1].4 - new[0].4 >= stagger_nanos,
        "the second wave came {} ns after the first",
        new[1].4 - new[0].4
    );
    let second_old = old
        .iter()
        .find(|alloc| alloc.0 == new[1].0)
        .expect("the second node's old allocation");
    let killed_at = wait_for("the second node's old task to be killed", LIMIT, || {
        let alloc = server.get_json(&format!("/v1/allocation/{}", second_old.6));
        alloc["TaskStates"]["collector"]["Events"]
            .as_array()?
            .iter()
            .find(|event| event["Type"] == "Killing")
            .and_then(|event| event["Time"].as_i64())
    });
    assert!(
        killed_at >= new[0].4 + stagger_nanos,
        "the second node's old allocation was killed {} ns after the first wave",
        killed_at - new[0].4
    );
    wait_for("the new version running on both nodes", LIMIT, || {
        let allocs = system_allocs(&server, &job);
        (allocs
            .iter()
            .filter(|alloc| alloc.1 == 1 && alloc.3 == "running")
            .count()
            == 2)
            .then_some(())
    });
    server.cli_ok(&["job", "stop", "-purge", &job]);
}
