//! End to end through the real agent: a job's versions marked stable and reverted —
//! `PUT /v1/job/<id>/stable` and `PUT /v1/job/<id>/revert` as Nomad answers them, with their
//! refusals (a body naming another job, the current version, a stale `EnforcePriorVersion`, a
//! version that does not exist), and the reverted spec running again.

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
