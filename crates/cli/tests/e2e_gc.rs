//! End to end: garbage collection through real agents. A dev agent configured with short
//! `job_gc_interval`/`job_gc_threshold` purges a finished batch job with its evaluation and
//! allocation on its own; a GC setting Nomad refuses is refused. In a cluster of a server-only
//! agent and two client-only agents, `/v1/client/gc?node_id=` and
//! `/v1/client/allocation/<id>/gc` reach the node that holds the allocations (from the server,
//! and from the other client through the server), with Nomad's refusals for a missing or
//! unknown node; node pool reads block until the pools change.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod support;

use std::time::Duration;

use serde_json::Value;
use support::{Agent, agent_config, http, server_and_two_clients, wait_for, write_jobspec};

const LIMIT: Duration = Duration::from_secs(120);

fn batch_job(job_id: &str, node_id: Option<&str>) -> String {
    let constraint = node_id.map_or(String::new(), |node_id| {
        format!(
            "constraint {{\n    attribute = \"${{node.unique.id}}\"\n    value = \"{node_id}\"\n  }}\n"
        )
    });
    format!(
        r#"
job "{job_id}" {{
  datacenters = ["dc1"]
  type        = "batch"
  {constraint}
  group "g" {{
    task "t" {{
      driver = "raw_exec"

      config {{
        command = "/bin/true"
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

fn job_allocs(agent: &Agent, job_id: &str) -> Vec<Value> {
    agent
        .get_json(&format!("/v1/job/{job_id}/allocations"))
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[test]
fn a_finished_batch_job_is_purged_after_the_configured_threshold() {
    let temp = tempfile::tempdir().unwrap();
    let config = agent_config(
        temp.path(),
        "gc.hcl",
        "server {\n  job_gc_interval = \"1s\"\n  job_gc_threshold = \"4s\"\n}\n",
    );
    let agent = Agent::start_with(&temp.path().join("data"), &[&format!("-config={config}")]);
    let (_dir, spec) = write_jobspec("once.hcl", &batch_job("once", None));
    agent.cli_ok(&["job", "run", "-detach", spec.to_str().unwrap()]);
    let (alloc_id, eval_id) = wait_for("the batch job to finish", LIMIT, || {
        let job = agent.get_json("/v1/job/once");
        let alloc = job_allocs(&agent, "once").first()?.clone();
        (job["Status"] == "dead" && alloc["ClientStatus"] == "complete").then(|| {
            (
                alloc["ID"].as_str().unwrap().to_owned(),
                alloc["EvalID"].as_str().unwrap().to_owned(),
            )
        })
    });
    wait_for("the job to be collected", LIMIT, || {
        let (status, _) = http("GET", &agent.url("/v1/job/once"), None);
        (status == 404).then_some(())
    });
    let (status, _) = http(
        "GET",
        &agent.url(&format!("/v1/allocation/{alloc_id}")),
        None,
    );
    assert_eq!(status, 404, "the allocation went with its job");
    let (status, _) = http(
        "GET",
        &agent.url(&format!("/v1/evaluation/{eval_id}")),
        None,
    );
    assert_eq!(status, 404, "the evaluation went with its job");
}

#[test]
fn a_gc_setting_nomad_refuses_is_refused() {
    let temp = tempfile::tempdir().unwrap();
    let config = agent_config(
        temp.path(),
        "gc.hcl",
        "server {\n  job_gc_interval = \"0s\"\n}\n",
    );
    let output = std::process::Command::new(support::drover_bin())
        .args(["agent", "-dev", "-http-port=0"])
        .arg(format!("-config={config}"))
        .arg(format!("-data-dir={}", temp.path().join("data").display()))
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("job_gc_interval should be greater than 0s"),
        "{stderr}"
    );
}

/// Runs a batch job on `node_id` to completion; answers its allocation's ID.
fn finished_alloc_on(server: &Agent, job_id: &str, node_id: &str) -> String {
    let (_dir, spec) = write_jobspec(&format!("{job_id}.hcl"), &batch_job(job_id, Some(node_id)));
    server.cli_ok(&["job", "run", "-detach", spec.to_str().unwrap()]);
    wait_for("the batch job to finish", LIMIT, || {
        let alloc = job_allocs(server, job_id).first()?.clone();
        (alloc["ClientStatus"] == "complete" && alloc["NodeID"] == node_id)
            .then(|| alloc["ID"].as_str().unwrap().to_owned())
    })
}

/// Whether the client agent at `client` still keeps the allocation (its directory).
fn kept_by(client: &Agent, alloc_id: &str) -> bool {
    client.data_dir.join("alloc").join(alloc_id).exists()
}

#[test]
fn client_gc_reaches_the_node_that_holds_the_allocations() {
    let temp = tempfile::tempdir().unwrap();
    let (server, clients, node_a, node_b) = server_and_two_clients(temp.path(), LIMIT);
    let (client_a, client_b) = (&clients[0], &clients[1]);

    // Nomad's refusals: a server without a client needs a node, and the node must exist.
    let (status, body) = http("PUT", &server.url("/v1/client/gc"), None);
    assert_eq!(status, 400, "{body}");
    assert_eq!(body, "No local Node and node_id not provided");
    let (status, body) = http("PUT", &server.url("/v1/client/gc?node_id=nope"), None);
    assert_eq!(status, 404, "{body}");
    assert_eq!(body, "Unknown node nope");

    // From the server to node-b.
    let first = finished_alloc_on(&server, "first", &node_b);
    assert!(kept_by(client_b, &first));
    let (status, body) = http(
        "PUT",
        &server.url(&format!("/v1/client/gc?node_id={node_b}")),
        None,
    );
    assert_eq!(status, 200, "{body}");
    assert!(!kept_by(client_b, &first), "collected on node-b");

    // From node-a's agent, through the server, to node-b.
    let second = finished_alloc_on(&server, "second", &node_b);
    assert!(kept_by(client_b, &second));
    let (status, body) = http(
        "PUT",
        &client_a.url(&format!("/v1/client/gc?node_id={node_b}")),
        None,
    );
    assert_eq!(status, 200, "{body}");
    assert!(!kept_by(client_b, &second), "collected on node-b");

    // One allocation, asked of the server, collected where it ran.
    let third = finished_alloc_on(&server, "third", &node_a);
    assert!(kept_by(client_a, &third));
    let (status, body) = http(
        "PUT",
        &server.url(&format!("/v1/client/allocation/{third}/gc")),
        None,
    );
    assert_eq!(status, 200, "{body}");
    assert!(!kept_by(client_a, &third), "collected on node-a");
}

/// `GET` answering the status, the `X-Nomad-Index` header and the body.
fn get_with_index(url: &str) -> (u16, u64, String) {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").expect("http url");
    let (host, path) = rest.split_at(rest.find('/').expect("a path"));
    let mut stream = std::net::TcpStream::connect(host).expect("connect to agent");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .expect("write request");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("read response");
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .expect("status code");
    let index = head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("x-nomad-index")
                .then(|| value.trim().parse().ok())?
        })
        .expect("X-Nomad-Index");
    (status, index, body.to_owned())
}

#[test]
fn node_pool_reads_block_until_the_pools_change() {
    let agent = Agent::start_dev();
    let (_, index, _) = get_with_index(&agent.url("/v1/node/pools"));
    let list_url = agent.url(&format!("/v1/node/pools?index={index}&wait=60s"));
    let pool_url = agent.url(&format!("/v1/node/pool/gpu?index={index}&wait=60s"));
    let waiting_list = std::thread::spawn(move || get_with_index(&list_url));
    let waiting_pool = std::thread::spawn(move || get_with_index(&pool_url));
    // Both requests are parked on the table before the write (a blocking query that missed
    // it would still answer, but only after its 60 s).
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        !waiting_list.is_finished(),
        "the list answered without a change"
    );
    let (status, body) = http(
        "PUT",
        &agent.url("/v1/node/pools"),
        Some(r#"{"Name":"gpu","Description":"GPUs"}"#),
    );
    assert_eq!(status, 200, "{body}");

    let (status, new_index, body) = waiting_list.join().unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(new_index > index);
    assert!(body.contains("\"gpu\""), "{body}");
    let (status, pool_index, body) = waiting_pool.join().unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(pool_index, new_index);
    assert!(body.contains("\"GPUs\""), "{body}");
}

#[test]
fn the_system_commands_collect_and_reconcile_through_the_server() {
    let temp = tempfile::tempdir().unwrap();
    let agent = Agent::start_with(&temp.path().join("data"), &[]);
    let (_dir, spec) = write_jobspec("tally.hcl", &batch_job("tally", None));
    agent.cli_ok(&["job", "run", "-detach", spec.to_str().unwrap()]);
    wait_for("the batch job to finish", LIMIT, || {
        (agent.get_json("/v1/job/tally")["Status"] == "dead").then_some(())
    });
    let before = agent.get_json("/v1/job/tally/summary");

    // Silent on success, as Nomad's CLI.
    let output = agent.cli_ok(&["system", "reconcile", "summaries"]);
    assert_eq!(output, "");
    let after = agent.get_json("/v1/job/tally/summary");
    assert_eq!(after["Summary"], before["Summary"]);
    assert!(
        after["ModifyIndex"].as_u64() > before["ModifyIndex"].as_u64(),
        "{after}"
    );
    // Only PUT, as Nomad's handler.
    let (status, _) = http("GET", &agent.url("/v1/system/reconcile/summaries"), None);
    assert_eq!(status, 405);

    assert_eq!(agent.cli_ok(&["system", "gc"]), "");
    let (status, _) = http("GET", &agent.url("/v1/job/tally"), None);
    assert_eq!(status, 404, "the dead batch job was collected");

    // A failure names what was being done.
    let stopped = Agent::start_with(&temp.path().join("second"), &[]);
    let address = stopped.address.clone();
    drop(stopped);
    let output = std::process::Command::new(support::drover_bin())
        .args(["system", "gc", &format!("-address={address}")])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&output.stderr)
            .starts_with("Error running system garbage-collection: "),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
