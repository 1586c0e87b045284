//! End to end through the real agent: `drover job scale` up and down within the group's
//! `scaling` block (allocations placed and stopped for real), counts outside it refused with
//! Nomad's texts, a scale while the job's deployment runs refused and recorded as an error
//! event, the events listed by `GET /v1/job/<id>/scale` and `drover job scaling-events`, and
//! the policy the jobspec declared served at `/v1/scaling/policies` and
//! `/v1/scaling/policy/<id>` until the job is purged.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::{Agent, http, wait_for, write_jobspec};

const LIMIT: Duration = Duration::from_secs(60);

fn jobspec(job: &str) -> String {
    format!(
        r#"
job "{job}" {{
  group "web" {{
    count = 2
    scaling {{
      min = 1
      max = 4
      policy {{
        cooldown = "1m"
      }}
    }}
    update {{
      min_healthy_time = "1s"
      healthy_deadline = "20s"
    }}
    task "server" {{
      driver = "raw_exec"
      config {{
        command = "/bin/sh"
        args    = ["-c", "sleep 300"]
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

fn running(agent: &Agent, job: &str) -> usize {
    let allocations = agent.get_json(&format!("/v1/job/{job}/allocations"));
    allocations
        .as_array()
        .unwrap()
        .iter()
        .filter(|allocation| {
            allocation["ClientStatus"] == "running" && allocation["DesiredStatus"] == "run"
        })
        .count()
}

fn wait_for_running(agent: &Agent, job: &str, count: usize) {
    wait_for(&format!("{count} running allocations"), LIMIT, || {
        let status = agent.get_json(&format!("/v1/job/{job}/scale"));
        let group = &status["TaskGroups"]["web"];
        (running(agent, job) == count
            && group["Running"] == json!(count)
            && group["Placed"] == json!(count))
        .then_some(())
    });
}

fn wait_for_successful_deployment(agent: &Agent, job: &str) {
    wait_for("the deployment to succeed", LIMIT, || {
        let deployment = agent.get_json(&format!("/v1/job/{job}/deployment"));
        (deployment["Status"] == "successful").then_some(())
    });
}

fn scale(agent: &Agent, job: &str, body: &Value) -> (u16, Value) {
    let (status, text) = http(
        "PUT",
        &agent.url(&format!("/v1/job/{job}/scale")),
        Some(&body.to_string()),
    );
    let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, value)
}

#[test]
fn a_group_scales_within_its_policy_and_its_events_are_kept() {
    let agent = Agent::start_dev();
    let job = format!("scale-{}", std::process::id());
    let (_dir, spec) = write_jobspec("scale.hcl", &jobspec(&job));
    agent.cli_ok(&["job", "run", "-detach", spec.to_str().unwrap()]);
    wait_for_running(&agent, &job, 2);

    // The jobspec's policy is stored and served.
    let policies = agent.get_json(&format!("/v1/scaling/policies?job={job}"));
    let policies = policies.as_array().unwrap();
    assert_eq!(policies.len(), 1, "{policies:?}");
    let stub = &policies[0];
    assert_eq!(stub["Type"], "horizontal");
    assert_eq!(stub["Enabled"], true);
    assert_eq!(
        stub["Target"],
        json!({"Namespace": "default", "Job": job, "Group": "web"})
    );
    let policy_id = stub["ID"].as_str().unwrap().to_owned();
    let policy = agent.get_json(&format!("/v1/scaling/policy/{policy_id}"));
    assert_eq!(
        (policy["Min"].as_i64(), policy["Max"].as_i64()),
        (Some(1), Some(4))
    );
    assert_eq!(policy["Policy"], json!({"cooldown": "1m"}));
    let (status, _) = http("GET", &agent.url("/v1/scaling/policy/nope"), None);
    assert_eq!(status, 404);

    // While the first deployment runs, a scale is refused and recorded as an error event.
    let deployment = agent.get_json(&format!("/v1/job/{job}/deployment"));
    if deployment["Status"] == "running" {
        let (status, answer) = scale(
            &agent,
            &job,
            &json!({"Count": 3, "Target": {"Group": "web"}, "Message": "too early"}),
        );
        if status == 400 {
            assert_eq!(answer, "job scaling blocked due to active deployment");
            let events = agent.get_json(&format!("/v1/job/{job}/scale"));
            let event = &events["TaskGroups"]["web"]["Events"][0];
            assert_eq!(event["Error"], true);
            assert_eq!(event["Meta"]["OriginalCount"], 3);
            assert_eq!(event["Meta"]["OriginalMessage"], "too early");
        }
    }
    wait_for_successful_deployment(&agent, &job);

    // Up: through the CLI, which names the only group itself and follows the evaluation and
    // the deployment it made, as Nomad's monitor prints them (a frame opens with a line holding
    // only the prefix; its lines are not indented).
    let output = agent.cli_ok(&["job", "scale", &job, "3"]);
    assert!(
        output.contains("Evaluation within deployment: \""),
        "{output}"
    );
    assert!(output.contains("Monitoring deployment"), "{output}");
    assert!(output.contains("\n    \n20"), "{output}");
    assert!(output.contains("\nID          = "), "{output}");
    assert!(
        output.contains("Deployment completed successfully"),
        "{output}"
    );
    wait_for_running(&agent, &job, 3);
    let current = agent.get_json(&format!("/v1/job/{job}"));
    assert_eq!(current["TaskGroups"][0]["Count"], 3);
    assert_eq!(current["Version"], 1);
    wait_for_successful_deployment(&agent, &job);

    // Down, through the API, with a message and meta.
    let (status, answer) = scale(
        &agent,
        &job,
        &json!({"Count": 1, "Target": {"Group": "web"}, "Message": "quiet hours",
                "Meta": {"by": "test"}}),
    );
    assert_eq!(status, 200, "{answer}");
    let eval_id = answer["EvalID"].as_str().unwrap().to_owned();
    assert!(answer["EvalCreateIndex"].as_u64().unwrap() > 0);
    assert!(answer["JobModifyIndex"].as_u64().unwrap() > 0);
    let evaluation = agent.get_json(&format!("/v1/evaluation/{eval_id}"));
    assert_eq!(evaluation["TriggeredBy"], "job-scaling");
    wait_for_running(&agent, &job, 1);

    // Outside the policy: Nomad's refusals, nothing changes.
    let output = agent.cli(&["job", "scale", &job, "web", "5"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains(
            "Unexpected response code: 400 (group count was greater than scaling policy maximum: 5 > 4)"
        ),
        "{output:?}"
    );
    let (status, answer) = scale(
        &agent,
        &job,
        &json!({"Count": 0, "Target": {"Group": "web"}}),
    );
    assert_eq!(
        (status, answer),
        (
            400,
            json!("group count was less than scaling policy minimum: 0 < 1")
        )
    );
    let (status, answer) = scale(
        &agent,
        &job,
        &json!({"Count": 2, "Target": {"Group": "db"}}),
    );
    assert_eq!(
        (status, answer),
        (
            400,
            json!("task group \"db\" specified for scaling does not exist in job")
        )
    );
    let (status, answer) = scale(&agent, &job, &json!({"Count": 2, "Target": {}}));
    assert_eq!(
        (status, answer),
        (400, json!("missing task group name for scaling action"))
    );
    let (status, _) = scale(
        &agent,
        "nope",
        &json!({"Count": 2, "Target": {"Group": "web"}}),
    );
    assert_eq!(status, 404);
    assert_eq!(
        agent.get_json(&format!("/v1/job/{job}"))["TaskGroups"][0]["Count"],
        1
    );

    // An event without a count changes nothing but is recorded.
    let (status, answer) = scale(
        &agent,
        &job,
        &json!({"Target": {"Group": "web"}, "Message": "autoscaler failed", "Error": true}),
    );
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["EvalID"], "");

    // The events, newest first.
    let status = agent.get_json(&format!("/v1/job/{job}/scale"));
    assert_eq!(status["JobID"], job.as_str());
    assert_eq!(status["TaskGroups"]["web"]["Desired"], 1);
    let events = status["TaskGroups"]["web"]["Events"].as_array().unwrap();
    let summary: Vec<(Value, Value, Value)> = events
        .iter()
        .filter(|event| event["Message"] != "job scaling blocked due to active deployment")
        .map(|event| {
            (
                event["Count"].clone(),
                event["PreviousCount"].clone(),
                event["Message"].clone(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            (Value::Null, json!(1), json!("autoscaler failed")),
            (json!(1), json!(3), json!("quiet hours")),
            (json!(3), json!(2), json!("submitted using the Nomad CLI")),
        ]
    );
    assert_eq!(events[1]["EvalID"], eval_id.as_str());
    assert_eq!(events[1]["Meta"], json!({"by": "test"}));
    let listed = agent.cli_ok(&["job", "scaling-events", &job]);
    let lines: Vec<&str> = listed.lines().collect();
    assert!(
        lines[0].starts_with("Task Group  Count  PrevCount  Date"),
        "{listed}"
    );
    assert!(
        lines[2].starts_with("web         1      3          "),
        "{listed}"
    );

    // Detached, the CLI prints the evaluation.
    wait_for_successful_deployment(&agent, &job);
    let output = agent.cli_ok(&["job", "scale", "-detach", &job, "web", "2"]);
    assert!(output.starts_with("Evaluation ID: "), "{output}");
    wait_for_running(&agent, &job, 2);

    // A purge forgets the policy and the events.
    agent.cli_ok(&["job", "stop", "-purge", "-detach", &job]);
    let policies = agent.get_json(&format!("/v1/scaling/policies?job={job}"));
    assert_eq!(policies, json!([]));
    let (status, _) = http(
        "GET",
        &agent.url(&format!("/v1/scaling/policy/{policy_id}")),
        None,
    );
    assert_eq!(status, 404);
}

#[test]
fn a_scaling_block_is_judged_at_register() {
    let agent = Agent::start_dev();
    let bad = r#"
job "bad-scaling" {
  group "web" {
    count = 5
    scaling {
      max = 3
    }
    task "server" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
      }
    }
  }
}
"#;
    let (_dir, spec) = write_jobspec("bad.hcl", bad);
    let output = agent.cli(&["job", "run", "-detach", spec.to_str().unwrap()]);
    assert_ne!(output.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("maximum count must not be less than minimum count")
            && stderr.contains("task group count must not be greater than maximum count"),
        "{stderr}"
    );
}
