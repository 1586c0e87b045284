//! End to end: `ignore_collision` on a group's static port through the real agent. Two jobs
//! that both ask one static port and ignore collisions both run on the one node; a third that
//! asks the same port without it is not placed, the port being in use.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod support;

use std::time::Duration;

use serde_json::Value;
use support::{Agent, wait_for, write_jobspec};

/// Generous: tasks start slowly on a loaded 2-core machine.
const LIMIT: Duration = Duration::from_secs(120);

fn port_job(job_id: &str, port: u16, ignore_collision: bool) -> String {
    let ignore = if ignore_collision {
        "ignore_collision = true"
    } else {
        ""
    };
    format!(
        r#"
job "{job_id}" {{
  datacenters = ["dc1"]

  group "g" {{
    network {{
      port "shared" {{
        static = {port}
        {ignore}
      }}
    }}

    task "t" {{
      driver = "raw_exec"

      config {{
        command = "/bin/sleep"
        args    = ["300"]
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

fn run_job(agent: &Agent, name: &str, text: &str) {
    let (_dir, path) = write_jobspec(name, text);
    let output = agent.cli_ok(&["job", "run", "-detach", path.to_str().unwrap()]);
    assert!(output.contains("Job registration successful"), "{output}");
}

fn running_alloc(agent: &Agent, job_id: &str) -> Value {
    wait_for(&format!("{job_id} to run"), LIMIT, || {
        let stubs = agent.get_json(&format!("/v1/job/{job_id}/allocations"));
        stubs
            .as_array()
            .unwrap()
            .iter()
            .find(|stub| stub["ClientStatus"] == "running")
            .map(|stub| agent.get_json(&format!("/v1/allocation/{}", stub["ID"].as_str().unwrap())))
    })
}

#[test]
fn two_jobs_ignoring_collisions_share_a_static_port_and_a_third_is_not_placed() {
    let agent = Agent::start_dev();
    let port = 41_000 + (std::process::id() % 2_000) as u16;
    run_job(&agent, "first.hcl", &port_job("first", port, true));
    run_job(&agent, "second.hcl", &port_job("second", port, true));
    for job_id in ["first", "second"] {
        let alloc = running_alloc(&agent, job_id);
        let ports = &alloc["AllocatedResources"]["Shared"]["Ports"];
        assert_eq!(ports[0]["Value"], port, "{job_id}: {ports}");
    }

    run_job(&agent, "third.hcl", &port_job("third", port, false));
    let eval = wait_for("the third job's placement to fail", LIMIT, || {
        let evals = agent.get_json("/v1/job/third/evaluations");
        evals
            .as_array()
            .unwrap()
            .iter()
            .find(|eval| eval["FailedTGAllocs"]["g"].is_object())
            .cloned()
    });
    let failed = eval["FailedTGAllocs"]["g"].to_string();
    assert!(
        failed.contains("reserved port collision shared="),
        "{failed}"
    );
    assert_eq!(
        agent.get_json("/v1/job/third/allocations"),
        serde_json::json!([])
    );
}
