//! End to end: node pools through the real agent and CLI. A dev agent whose client config puts
//! its node in pool `gpu` creates that pool by registering; a job in `gpu` runs on it while a
//! job in `default` finds no node; a job naming an unknown pool is refused as Nomad refuses it;
//! `node pool apply/list/info/nodes/jobs/delete` print Nomad's lines; the built-in pools can be
//! neither changed nor deleted, and a pool in use is not deleted.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod support;

use std::time::Duration;

use support::{Agent, http, wait_for, write_jobspec};

/// Generous: tasks start slowly on a loaded 2-core machine.
const LIMIT: Duration = Duration::from_secs(120);

fn job(job_id: &str, pool: &str) -> String {
    format!(
        r#"
job "{job_id}" {{
  datacenters = ["dc1"]
  node_pool   = "{pool}"

  group "g" {{
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

#[test]
fn jobs_place_only_within_their_pool_and_pools_are_managed_as_nomads() {
    let temp = tempfile::tempdir().unwrap();
    let config = temp.path().join("client.hcl");
    std::fs::write(&config, "client {\n  node_pool = \"gpu\"\n}\n").unwrap();
    let agent = Agent::start_with(
        &temp.path().join("data"),
        &[&format!("-config={}", config.display())],
    );
    let node_id = wait_for("the node registers", LIMIT, || {
        let nodes = agent.get_json("/v1/nodes");
        nodes.as_array()?.first()?["ID"].as_str().map(str::to_owned)
    });

    // The node's pool was created by its registration; the built-in ones are always there.
    let list = agent.cli_ok(&["node", "pool", "list"]);
    let names: Vec<&str> = list
        .lines()
        .skip(1)
        .filter_map(|line| line.split_whitespace().next())
        .collect();
    assert_eq!(names, ["all", "default", "gpu"], "{list}");
    assert!(list.starts_with("Name"), "{list}");

    // A job in the node's pool runs; one in `default` finds no node.
    let (_dir, gpu_job) = write_jobspec("train.hcl", &job("train", "gpu"));
    agent.cli_ok(&["job", "run", "-detach", gpu_job.to_str().unwrap()]);
    let (_dir, default_job) = write_jobspec("web.hcl", &job("web", "default"));
    agent.cli_ok(&["job", "run", "-detach", default_job.to_str().unwrap()]);
    wait_for("the gpu job runs on the gpu node", LIMIT, || {
        let allocs = agent.get_json("/v1/job/train/allocations");
        let alloc = allocs.as_array()?.first()?.clone();
        (alloc["ClientStatus"] == "running" && alloc["NodeID"] == node_id.as_str()).then_some(())
    });
    wait_for("the default job's placement fails", LIMIT, || {
        let evals = agent.get_json("/v1/job/web/evaluations");
        evals
            .as_array()?
            .iter()
            .any(|eval| eval["FailedTGAllocs"].is_object())
            .then_some(())
    });
    assert_eq!(
        agent.get_json("/v1/job/web/allocations"),
        serde_json::json!([])
    );

    // A job naming a pool nobody created is refused.
    let (status, body) = http(
        "PUT",
        &agent.url("/v1/jobs"),
        Some(
            r#"{"Job": {"ID": "lost", "Name": "lost", "NodePool": "nope", "Datacenters": ["dc1"], "TaskGroups": [{"Name": "g", "Tasks": [{"Name": "t", "Driver": "raw_exec", "Config": {"command": "/bin/true"}}]}]}}"#,
        ),
    );
    assert_eq!(status, 400, "{body}");
    assert!(
        body.contains(r#"job "lost" is in nonexistent node pool "nope""#),
        "{body}"
    );

    // apply, info, nodes, jobs.
    let spec = temp.path().join("batch.hcl");
    std::fs::write(
        &spec,
        "node_pool \"batch\" {\n  description = \"Batch nodes\"\n  meta {\n    team = \"data\"\n  }\n}\n",
    )
    .unwrap();
    let applied = agent.cli_ok(&["node", "pool", "apply", spec.to_str().unwrap()]);
    assert_eq!(applied.trim(), r#"Successfully applied node pool "batch"!"#);
    let pool = agent.get_json("/v1/node/pool/batch");
    assert_eq!(pool["Description"], "Batch nodes");
    assert_eq!(pool["Meta"]["team"], "data");
    let info = agent.cli_ok(&["node", "pool", "info", "bat"]);
    assert!(info.contains("Batch nodes"), "{info}");
    assert!(info.contains("team = data"), "{info}");
    let nodes = agent.cli_ok(&["node", "pool", "nodes", "gpu"]);
    assert!(nodes.contains(&node_id[..8]), "{nodes}");
    assert_eq!(
        agent.cli_ok(&["node", "pool", "nodes", "batch"]).trim(),
        "No nodes"
    );
    let all_nodes = agent.get_json("/v1/node/pool/all/nodes");
    assert_eq!(all_nodes.as_array().unwrap().len(), 1);
    let jobs = agent.cli_ok(&["node", "pool", "jobs", "gpu"]);
    assert!(jobs.contains("train") && !jobs.contains("web"), "{jobs}");

    // Built-in pools stay; a pool in use stays; an unused one goes.
    let (status, body) = http(
        "PUT",
        &agent.url("/v1/node/pools"),
        Some(r#"{"Name": "default", "Description": "mine"}"#),
    );
    assert_eq!(status, 400, "{body}");
    assert!(
        body.contains(r#"modifying node pool "default" is not allowed"#),
        "{body}"
    );
    let refused = agent.cli(&["node", "pool", "delete", "all"]);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr)
            .contains(r#"deleting node pool "all" is not allowed"#),
        "{refused:?}"
    );
    let refused = agent.cli(&["node", "pool", "delete", "gpu"]);
    let stderr = String::from_utf8_lossy(&refused.stderr).into_owned();
    assert!(!refused.status.success());
    assert!(
        stderr.contains(r#"node pool "gpu" has non-terminal jobs in regions: [global]"#),
        "{stderr}"
    );
    assert!(
        stderr.contains(r#"node pool "gpu" has nodes in regions: [global]"#),
        "{stderr}"
    );
    let deleted = agent.cli_ok(&["node", "pool", "delete", "batch"]);
    assert_eq!(deleted.trim(), r#"Successfully deleted node pool "batch"!"#);
    let (status, body) = http("GET", &agent.url("/v1/node/pool/batch"), None);
    assert_eq!((status, body.trim()), (404, "node pool not found"));
}
