//! End to end: failover between servers that share no state. A client given `-servers A,B`
//! joins A's cluster; when A dies, B (another cluster) answers, and the client refuses to
//! follow it: its tasks keep running (same processes), B never hears of the node, and the
//! client says why on its log.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{Agent, drover_bin, http, kill_tasks_of_allocs, pids_with_cmdline, wait_for};

const LIMIT: Duration = Duration::from_secs(60);

/// A server-only agent (`-server`, its client disabled) on its own data dir.
fn server_agent(dir: &std::path::Path, name: &str) -> Agent {
    let data = dir.join(name).join("data");
    std::fs::create_dir_all(dir.join(name)).unwrap();
    let config = dir.join(name).join("server.hcl");
    std::fs::write(
        &config,
        format!("name = \"{name}\"\nclient {{\n  enabled = false\n}}\n"),
    )
    .unwrap();
    Agent::start_server(&data, &[&format!("-config={}", config.display())])
}

/// `drover monitor` on an agent; its stdout lines arrive on the channel.
fn monitor(agent: &Agent, level: &str) -> (Child, mpsc::Receiver<String>) {
    let mut child = Command::new(drover_bin())
        .args(["monitor", &format!("-log-level={level}")])
        .env("NOMAD_ADDR", &agent.address)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("monitor starts");
    let stdout = child.stdout.take().unwrap();
    let (sender, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    (child, lines)
}

fn nodes(agent: &Agent) -> Vec<Value> {
    agent
        .get_json("/v1/nodes")
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[test]
fn a_client_switched_to_a_server_of_another_cluster_keeps_its_tasks_and_says_why() {
    let temp = tempfile::tempdir().expect("temp dir");
    let mut server_a = server_agent(temp.path(), "server-a");
    let server_b = server_agent(temp.path(), "server-b");
    let address = |agent: &Agent| agent.address.trim_start_matches("http://").to_owned();
    let client_data = temp.path().join("client").join("data");
    let client = Agent::start_with(
        &client_data,
        &[
            "-client",
            &format!("-servers={},{}", address(&server_a), address(&server_b)),
        ],
    );
    wait_for("the node to be ready on server A", LIMIT, || {
        nodes(&server_a)
            .iter()
            .any(|node| node["Status"] == "ready")
            .then_some(())
    });

    let marker = format!("failover-marker-{}", std::process::id());
    let job = json!({"Job": {
        "ID": "steady", "Name": "steady", "Type": "service", "Datacenters": ["dc1"],
        "TaskGroups": [{"Name": "app", "Count": 2, "Tasks": [{
            "Name": "server", "Driver": "raw_exec",
            "Config": {"command": "/bin/sh", "args": ["-c", format!("sleep 3600; echo {marker}")]},
            "Resources": {"CPU": 50, "MemoryMB": 32}
        }]}]
    }});
    let (status, body) = http("PUT", &server_a.url("/v1/jobs"), Some(&job.to_string()));
    assert_eq!(status, 200, "{body}");
    let alloc_ids: Vec<String> = wait_for("both allocs to run", LIMIT, || {
        let allocs = server_a.get_json("/v1/job/steady/allocations");
        let running: Vec<String> = allocs
            .as_array()?
            .iter()
            .filter(|alloc| alloc["ClientStatus"] == "running")
            .filter_map(|alloc| alloc["ID"].as_str().map(str::to_owned))
            .collect();
        (running.len() == 2).then_some(running)
    });
    let pids_before = wait_for("the tasks' processes", LIMIT, || {
        Some(pids_with_cmdline(&marker)).filter(|pids| pids.len() >= 2)
    });

    // The client keeps saying why while it retries, so a monitor attached a little late
    // still sees it.
    let (mut watching, lines) = monitor(&client, "WARN");
    server_a.kill9();

    // The client tries B, which belongs to another cluster: it says so, twice (a heartbeat
    // retry and another), while its tasks run on.
    let deadline = Instant::now() + LIMIT;
    let mut refusals = Vec::new();
    while refusals.len() < 2 {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = lines.recv_timeout(left).unwrap_or_else(|_| {
            panic!("the client never said why it refused server B: {refusals:?}")
        });
        if line.contains("belongs to cluster") && line.contains("not following it") {
            refusals.push(line);
        }
    }
    assert!(
        refusals[0].contains(&server_b.address),
        "the refusal names server B: {}",
        refusals[0]
    );
    assert!(
        pids_before.iter().all(|pid| support::process_alive(*pid)),
        "every task ran on through the failover"
    );
    let mut pids_now = pids_with_cmdline(&marker);
    let mut expected = pids_before.clone();
    pids_now.sort_unstable();
    expected.sort_unstable();
    assert_eq!(pids_now, expected, "no task was stopped or started again");
    assert!(
        nodes(&server_b).is_empty(),
        "the node never registered with the stranger"
    );
    for alloc_id in &alloc_ids {
        let (status, body) = http(
            "GET",
            &client.url(&format!("/v1/client/allocation/{alloc_id}/stats")),
            None,
        );
        assert_eq!(
            status, 200,
            "the runner of {alloc_id} is still there: {body}"
        );
    }
    let cluster_file = client_data.join("client").join("cluster_id");
    let joined = std::fs::read_to_string(&cluster_file).expect("the joined cluster is kept");
    assert!(!joined.trim().is_empty());

    let _ = watching.kill();
    let _ = watching.wait();
    drop(client);
    drop(server_b);
    kill_tasks_of_allocs(&alloc_ids);
}
