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
use support::{Agent, http, http_as, wait_for, write_jobspec};

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

/// A job (in `namespace`) whose group declares a scaling policy and is never placed.
fn scaled_job_in(namespace: &str, job: &str) -> String {
    json!({"Job": {
        "ID": job, "Name": job, "Namespace": namespace, "Type": "service",
        "Datacenters": ["dc1"],
        "TaskGroups": [{
            "Name": "web", "Count": 1,
            "Scaling": {"Min": 1, "Max": 3, "Enabled": true, "Policy": {"cooldown": "1m"}},
            "Constraints": [{
                "LTarget": "${node.unique.name}", "RTarget": "nowhere", "Operand": "="
            }],
            "Tasks": [{
                "Name": "server", "Driver": "raw_exec",
                "Config": {"command": "/bin/sleep", "args": ["3600"]},
                "Resources": {"CPU": 20, "MemoryMB": 16}
            }]
        }]
    }})
    .to_string()
}

/// The namespaces of the policies a `namespace=*` list shows `token`.
fn policy_namespaces(agent: &Agent, token: &str) -> Vec<String> {
    let (status, body) = http_as(
        "GET",
        &agent.url("/v1/scaling/policies?namespace=*"),
        Some(token),
        None,
    );
    assert_eq!(status, 200, "{body}");
    let policies: Vec<Value> = serde_json::from_str(&body).unwrap();
    let mut namespaces: Vec<String> = policies
        .iter()
        .map(|policy| policy["Target"]["Namespace"].as_str().unwrap().to_owned())
        .collect();
    namespaces.sort();
    namespaces
}

#[test]
fn scaling_policies_are_listed_by_the_cli_and_filtered_by_acls_across_namespaces() {
    let temp = tempfile::tempdir().unwrap();
    let config = temp.path().join("acl.hcl");
    std::fs::write(&config, "acl {\n  enabled = true\n}\n").unwrap();
    let agent = Agent::start_with(
        &temp.path().join("data"),
        &[&format!("-config={}", config.display())],
    );
    let (status, body) = http("POST", &agent.url("/v1/acl/bootstrap"), None);
    assert_eq!(status, 200, "{body}");
    let root: Value = serde_json::from_str(&body).unwrap();
    let root = root["SecretID"].as_str().unwrap().to_owned();
    let as_root = |method: &str, path: &str, body: &str| {
        let (status, answer) = http_as(method, &agent.url(path), Some(&root), Some(body));
        assert_eq!(status, 200, "{method} {path}: {answer}");
        answer
    };
    as_root("PUT", "/v1/namespace/other", r#"{"Name": "other"}"#);
    as_root("PUT", "/v1/jobs", &scaled_job_in("default", "api"));
    as_root("PUT", "/v1/jobs", &scaled_job_in("other", "web"));

    // The CLI, as Nomad prints it: sorted by target, full IDs with -verbose.
    let cli = |args: &[&str]| {
        let mut all = vec!["scaling", "policy"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["-token", &root]);
        agent.cli(&all)
    };
    let stdout =
        |output: &std::process::Output| String::from_utf8_lossy(&output.stdout).into_owned();
    let listed = cli(&["list", "-namespace", "*"]);
    assert!(listed.status.success(), "{listed:?}");
    let text = stdout(&listed);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(
        lines[0].starts_with("ID ") && lines[0].ends_with("Enabled  Type        Target"),
        "{text}"
    );
    assert!(
        lines[1].ends_with("true     horizontal  Namespace:default,Job:api,Group:web"),
        "{text}"
    );
    assert!(
        lines[2].ends_with("true     horizontal  Namespace:other,Job:web,Group:web"),
        "{text}"
    );
    let short = lines[1].split_whitespace().next().unwrap().to_owned();
    assert_eq!(short.len(), 8);
    let only_api = stdout(&cli(&["list", "-job", "api"]));
    assert_eq!(only_api.lines().count(), 2, "{only_api}");
    let none = stdout(&cli(&["list", "-type", "vertical_cpu"]));
    assert_eq!(none.trim(), "No policies found");
    let json_list = stdout(&cli(&["list", "-json"]));
    assert!(
        json_list.starts_with("[\n    {\n        \"ID\": "),
        "{json_list}"
    );
    let templated = stdout(&cli(&["list", "-t", "{{range .}}{{.Type}}{{end}}"]));
    assert_eq!(templated.trim(), "horizontal");

    let info = cli(&["info", &short]);
    assert!(info.status.success(), "{info:?}");
    let info = stdout(&info);
    assert_eq!(
        info,
        format!(
            "ID      = {short}\nEnabled = true\nTarget  = Namespace:default,Job:api,Group:web\n\
             Min     = 1\nMax     = 3\n\nPolicy:\n{{\n    \"cooldown\": \"1m\"\n}}\n"
        )
    );
    let missing = cli(&["info", "ffff"]);
    assert_eq!(missing.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&missing.stderr).trim(),
        r#"No scaling policies with prefix or id "ffff" found"#
    );
    let both = cli(&["info", "-json", "-t", "{{.ID}}", &short]);
    assert_eq!(both.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&both.stderr).contains("Both json and template"));

    // Across namespaces each token sees the namespaces where it may read policies: the scaling
    // capability, or list-jobs with read-job; a token with neither sees an empty list.
    let token_with = |name: &str, rules: &str| {
        as_root(
            "PUT",
            &format!("/v1/acl/policy/{name}"),
            &json!({"Name": name, "Rules": rules}).to_string(),
        );
        let answer = as_root(
            "POST",
            "/v1/acl/token",
            &json!({"Name": name, "Type": "client", "Policies": [name]}).to_string(),
        );
        let token: Value = serde_json::from_str(&answer).unwrap();
        token["SecretID"].as_str().unwrap().to_owned()
    };
    let jobs_reader = token_with(
        "jobs-reader",
        r#"namespace "default" { capabilities = ["list-jobs", "read-job"] }"#,
    );
    let policy_lister = token_with(
        "policy-lister",
        r#"namespace "other" { capabilities = ["list-scaling-policies"] }"#,
    );
    let job_lister = token_with(
        "job-lister",
        r#"namespace "default" { capabilities = ["list-jobs"] }"#,
    );
    assert_eq!(policy_namespaces(&agent, &root), ["default", "other"]);
    assert_eq!(policy_namespaces(&agent, &jobs_reader), ["default"]);
    assert_eq!(policy_namespaces(&agent, &policy_lister), ["other"]);
    assert!(policy_namespaces(&agent, &job_lister).is_empty());
    // In one namespace the same rule decides, and reading one policy too.
    let status_of = |path: &str, token: &str| http_as("GET", &agent.url(path), Some(token), None).0;
    assert_eq!(status_of("/v1/scaling/policies", &jobs_reader), 200);
    assert_eq!(status_of("/v1/scaling/policies", &job_lister), 403);
    assert_eq!(
        status_of("/v1/scaling/policies?namespace=other", &jobs_reader),
        403
    );
    let full_id = json_list
        .split("\"ID\": \"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .to_owned();
    assert_eq!(
        status_of(&format!("/v1/scaling/policy/{full_id}"), &jobs_reader),
        200
    );
    assert_eq!(
        status_of(&format!("/v1/scaling/policy/{full_id}"), &job_lister),
        403
    );
}
