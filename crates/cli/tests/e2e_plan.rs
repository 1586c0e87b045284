//! End to end: `drover job plan` on an edited jobspec against the real agent prints Nomad's
//! annotated diff, the update counts and the `job run -check-index N` to use; that command
//! succeeds, and the same command with the now stale index is refused with Nomad's text;
//! `job history -p` shows the versions and their diff.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod support;

use std::time::Duration;

use support::{Agent, wait_for, write_jobspec};

const LIMIT: Duration = Duration::from_secs(60);

fn jobspec(count: u32, env_value: &str) -> String {
    format!(
        r#"job "planned" {{
  datacenters = ["dc1"]
  group "app" {{
    count = {count}
    task "sleeper" {{
      driver = "raw_exec"
      config {{
        command = "/bin/sleep"
        args    = ["300"]
      }}
      env {{
        VERSION = "{env_value}"
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

fn running_allocs(agent: &Agent, version: u64) -> usize {
    agent
        .get_json("/v1/job/planned/allocations")
        .as_array()
        .unwrap()
        .iter()
        .filter(|alloc| alloc["ClientStatus"] == "running" && alloc["JobVersion"] == version)
        .count()
}

#[test]
fn plan_shows_the_diff_and_its_check_index_runs_once() {
    let agent = Agent::start_dev();
    let (_dir, v1) = write_jobspec("v1.hcl", &jobspec(2, "one"));
    let v1 = v1.to_str().unwrap().to_string();

    // A new job: everything created, index 0, exit code 1.
    let fresh = agent.cli(&["job", "plan", &v1]);
    let fresh_out = String::from_utf8_lossy(&fresh.stdout);
    assert_eq!(fresh.status.code(), Some(1), "{fresh_out}");
    assert!(
        fresh_out.starts_with(
            "+ Job: \"planned\"\n+ Task Group: \"app\" (2 create)\n  + Task: \"sleeper\" (forces create)\n"
        ),
        "{fresh_out}"
    );
    assert!(fresh_out.contains("Job Modify Index: 0\n"), "{fresh_out}");
    assert!(
        agent.get_json("/v1/jobs").as_array().unwrap().is_empty(),
        "plan registered nothing"
    );

    agent.cli_ok(&["job", "run", "-detach", &v1]);
    wait_for("two running allocations", LIMIT, || {
        (running_allocs(&agent, 0) == 2).then_some(())
    });

    // Planning the registered spec again changes nothing: exit 0.
    let same = agent.cli(&["job", "plan", &v1]);
    assert_eq!(
        same.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&same.stdout)
    );

    let (_dir2, v2) = write_jobspec("v2.hcl", &jobspec(3, "two"));
    let v2 = v2.to_str().unwrap().to_string();
    let plan = agent.cli(&["job", "plan", &v2]);
    let out = String::from_utf8_lossy(&plan.stdout).into_owned();
    assert_eq!(plan.status.code(), Some(1), "{out}");
    let job_modify_index = agent.get_json("/v1/job/planned")["JobModifyIndex"]
        .as_u64()
        .unwrap();
    let expected = r#"+/- Job: "planned"
+/- Task Group: "app" (1 create, 2 ignore)
  +/- Count: "2" => "3" (forces create)
  +/- Task: "sleeper" (forces create/destroy update)
    +/- Env[VERSION]: "one" => "two"

Scheduler dry-run:
- All tasks successfully allocated.

"#;
    assert!(out.starts_with(expected), "{out}");
    let check_index = format!("drover job run -check-index {job_modify_index} {v2}");
    assert!(
        out.contains(&format!(
            "Job Modify Index: {job_modify_index}\nTo submit the job with version verification run:\n\n{check_index}\n"
        )),
        "{out}"
    );

    // The suggested command submits the plan.
    agent.cli_ok(&[
        "job",
        "run",
        "-detach",
        "-check-index",
        &job_modify_index.to_string(),
        &v2,
    ]);
    wait_for("three allocations of version 1", LIMIT, || {
        (running_allocs(&agent, 1) == 3).then_some(())
    });

    // `job history -p` shows the two versions and what changed between them.
    let history = agent.cli_ok(&["job", "history", "-p", "planned"]);
    assert!(
        history.starts_with("Version     = 1\nStable      = false\nSubmit Date = "),
        "{history}"
    );
    assert!(
        history.contains(
            "Diff        = \n+/- Job: \"planned\"\n+/- Task Group: \"app\"\n  +/- Count: \"2\" => \"3\"\n  +/- Task: \"sleeper\"\n    +/- Env[VERSION]: \"one\" => \"two\"\n\nVersion     = 0\n"
        ),
        "{history}"
    );
    let only_first = agent.cli_ok(&["job", "history", "-version", "0", "planned"]);
    assert!(only_first.starts_with("Version     = 0\n"), "{only_first}");
    assert!(!only_first.contains("Version     = 1"), "{only_first}");

    // The same index again is stale now.
    let current = agent.get_json("/v1/job/planned")["JobModifyIndex"]
        .as_u64()
        .unwrap();
    let (_dir3, v3) = write_jobspec("v3.hcl", &jobspec(3, "three"));
    let stale = agent.cli(&[
        "job",
        "run",
        "-detach",
        "-check-index",
        &job_modify_index.to_string(),
        v3.to_str().unwrap(),
    ]);
    assert_eq!(stale.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&stale.stderr),
        format!(
            "Enforcing job modify index {job_modify_index}: job exists with conflicting job modify index: {current}\nJob not updated\n"
        )
    );
    assert_eq!(
        agent.get_json("/v1/job/planned")["Version"],
        1,
        "the refused run changed nothing"
    );
}

#[test]
fn plan_json_output_prints_the_plan_response_with_the_plans_exit_code() {
    let agent = Agent::start_dev();
    let (_dir, v1) = write_jobspec("v1.hcl", &jobspec(2, "one"));
    let v1 = v1.to_str().unwrap().to_string();

    // A new job: the response as JSON (indented by four spaces, as Nomad's CLI formats it),
    // with the diff even under -diff=false, and the plan's exit code 1.
    let fresh = agent.cli(&["job", "plan", "-json-output", "-diff=false", &v1]);
    let text = String::from_utf8_lossy(&fresh.stdout).into_owned();
    assert_eq!(fresh.status.code(), Some(1), "{text}");
    assert!(text.starts_with("{\n    \""), "{text}");
    let response: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(response["JobModifyIndex"], 0, "{text}");
    assert_eq!(
        response["Annotations"]["DesiredTGUpdates"]["app"]["Place"],
        2
    );
    assert_eq!(response["Diff"]["Type"], "Added");
    assert_eq!(response["Diff"]["ID"], "planned");
    assert!(response.get("FailedTGAllocs").is_some(), "{text}");
    assert!(!text.contains("Job Modify Index"), "no plan text: {text}");

    agent.cli_ok(&["job", "run", "-detach", &v1]);
    wait_for("two running allocations", LIMIT, || {
        (running_allocs(&agent, 0) == 2).then_some(())
    });
    let job_modify_index = agent.get_json("/v1/job/planned")["JobModifyIndex"]
        .as_u64()
        .unwrap();

    // The registered spec again: nothing changes, exit 0, and the index to check is there.
    let same = agent.cli(&["job", "plan", "-json-output", &v1]);
    let text = String::from_utf8_lossy(&same.stdout).into_owned();
    assert_eq!(same.status.code(), Some(0), "{text}");
    let response: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(response["JobModifyIndex"], job_modify_index);
    assert_eq!(response["Diff"]["Type"], "None");

    // -t renders the same response with a template.
    let templated = agent.cli_ok(&["job", "plan", "-t", "{{.JobModifyIndex}}", &v1]);
    assert_eq!(templated.trim(), job_modify_index.to_string());

    // Both at once is refused with Nomad's words and exit code.
    let both = agent.cli(&["job", "plan", "-json-output", "-t", "{{.Diff}}", &v1]);
    assert_eq!(both.status.code(), Some(255));
    assert!(
        String::from_utf8_lossy(&both.stderr)
            .contains("Both -json-output and -t formatting are not allowed")
    );
}
