//! End to end: a `drover agent` whose server keeps its state in a real 3-member etcd cluster
//! (`etcd { endpoints = [...] }`). A job runs; with any one etcd member killed (each in turn)
//! every write succeeds at once and the server keeps leading; with two killed, writes answer
//! 503 "state store unavailable" while reads still answer; with the members back nothing is
//! lost, and an agent restarted on the same config finds its jobs in etcd (its embedded state
//! file is never written).
//!
//! Needs `etcd` (Debian's etcd-server); skipped without it, failed under `CI=true`.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

#[path = "../../etcd/tests/common/mod.rs"]
mod etcd_cluster;
mod support;

use std::time::Duration;

use serde_json::Value;
use support::{Agent, http, wait_for};

const LIMIT: Duration = Duration::from_secs(120);

fn sleep_job(job_id: &str) -> String {
    format!(
        r#"job "{job_id}" {{
  datacenters = ["dc1"]
  group "g" {{
    task "t" {{
      driver = "raw_exec"
      config {{
        command = "/bin/sleep"
        args    = ["600"]
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

/// The job's JSON, as `/v1/jobs/parse` answers it.
fn job_json(agent: &Agent, job_id: &str) -> Value {
    let body = serde_json::json!({ "JobHCL": sleep_job(job_id), "Canonicalize": true });
    let (status, text) = http(
        "POST",
        &agent.url("/v1/jobs/parse"),
        Some(&body.to_string()),
    );
    assert_eq!(status, 200, "{text}");
    serde_json::from_str(&text).unwrap()
}

fn register(agent: &Agent, job_id: &str) -> (u16, String) {
    let body = serde_json::json!({ "Job": job_json(agent, job_id) });
    http("PUT", &agent.url("/v1/jobs"), Some(&body.to_string()))
}

/// Registers, retrying while etcd elects a new leader (its own clients retry the same way).
fn register_with_retry(agent: &Agent, job_id: &str) {
    wait_for(&format!("job {job_id} registered"), LIMIT, || {
        let (status, text) = register(agent, job_id);
        if status != 200 {
            eprintln!("register {job_id}: {status} {text}");
            std::thread::sleep(Duration::from_millis(500));
        }
        (status == 200).then_some(())
    });
}

fn wait_running(agent: &Agent, job_id: &str) {
    wait_for(&format!("{job_id} running"), LIMIT, || {
        let (status, text) = http(
            "GET",
            &agent.url(&format!("/v1/job/{job_id}/allocations")),
            None,
        );
        let allocs: Value = serde_json::from_str(&text).ok()?;
        (status == 200
            && allocs
                .as_array()?
                .iter()
                .any(|alloc| alloc["ClientStatus"] == "running"))
        .then_some(())
    });
}

#[test]
fn a_server_on_etcd_runs_jobs_survives_a_member_loss_and_refuses_writes_without_quorum() {
    if !etcd_cluster::etcd_available() {
        return;
    }
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut cluster = runtime.block_on(etcd_cluster::EtcdCluster::start(3));
    let temp = tempfile::tempdir().unwrap();
    let config = temp.path().join("etcd.hcl");
    let endpoints: Vec<String> = cluster
        .endpoints()
        .iter()
        .map(|endpoint| format!("\"{endpoint}\""))
        .collect();
    std::fs::write(
        &config,
        format!(
            "etcd {{\n  endpoints = [{}]\n  prefix    = \"e2e/\"\n}}\n",
            endpoints.join(", ")
        ),
    )
    .unwrap();
    let config_flag = format!("-config={}", config.display());
    let data_dir = temp.path().join("data");
    let mut agent = Agent::start_with(&data_dir, &[&config_flag]);

    register_with_retry(&agent, "first");
    wait_running(&agent, "first");

    // Any one member down, in turn: a quorum remains, and for longer than the server's etcd
    // session TTL (4 s) every write succeeds at the first try: the server keeps its
    // leadership whichever member its session's keep-alives and its requests used.
    let leader = agent.get_json("/v1/status/leader");
    for member in 0..3 {
        cluster.kill(member);
        let until = std::time::Instant::now() + Duration::from_secs(7);
        let mut writes = 0;
        while std::time::Instant::now() < until {
            let (status, text) = register(&agent, "second");
            assert_eq!(
                status, 200,
                "write {writes} with etcd member {member} down: {text}"
            );
            writes += 1;
            std::thread::sleep(Duration::from_millis(250));
        }
        assert_eq!(agent.get_json("/v1/status/leader"), leader);
        cluster.restart(member);
        runtime.block_on(cluster.wait_member_ready(member));
    }
    wait_running(&agent, "second");

    // Two down: writes are refused as unavailable, reads answer from the server's tables.
    cluster.kill(0);
    cluster.kill(1);
    let (status, text) = wait_for("a write refused without quorum", LIMIT, || {
        let (status, text) = register(&agent, "third");
        (status != 200).then_some((status, text))
    });
    assert_eq!(status, 503, "{text}");
    assert!(text.contains("state store unavailable"), "{text}");
    let jobs = agent.get_json("/v1/jobs");
    let ids: Vec<&str> = jobs
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|job| job["ID"].as_str())
        .collect();
    assert!(ids.contains(&"first") && ids.contains(&"second"), "{ids:?}");

    // Members back: writes work again.
    cluster.restart(0);
    cluster.restart(1);
    runtime.block_on(cluster.wait_writable());
    register_with_retry(&agent, "third");
    wait_running(&agent, "third");

    // A restarted agent on the same config finds every job in etcd, and its tasks running.
    agent.kill9();
    assert!(
        !data_dir.join("server").join("state.redb").exists(),
        "the embedded state file is not used with etcd"
    );
    let agent = Agent::start_with(&data_dir, &[&config_flag]);
    for job_id in ["first", "second", "third"] {
        let job = agent.get_json(&format!("/v1/job/{job_id}"));
        assert_eq!(job["ID"], job_id);
        wait_running(&agent, job_id);
    }
}
