//! End-to-end node drain: a server agent and two client agents on 127.0.0.1, each its own
//! process. `drover node drain` moves a service job's allocations to the other node at most
//! `migrate { max_parallel }` at a time, the drain completes and the node stays ineligible;
//! eligibility toggling, a forced drain and purge through the same agents.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::{Value, json};
use support::{Agent, http, server_and_two_clients, wait_for};

const LIMIT: Duration = Duration::from_secs(90);

fn allocs(server: &Agent, job_id: &str) -> Vec<Value> {
    server
        .get_json(&format!("/v1/job/{job_id}/allocations"))
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn running_on(server: &Agent, job_id: &str, node_id: &str) -> usize {
    allocs(server, job_id)
        .iter()
        .filter(|alloc| {
            alloc["NodeID"] == node_id
                && alloc["ClientStatus"] == "running"
                && alloc["DesiredStatus"] == "run"
        })
        .count()
}

/// A service job of `count` sleepers whose health counts after 1 s, migrated one at a time.
fn sleeper_job(job_id: &str, count: u64) -> String {
    json!({"Job": {
        "ID": job_id, "Name": job_id, "Type": "service", "Datacenters": ["dc1"],
        "TaskGroups": [{
            "Name": "app", "Count": count,
            "Migrate": {
                "MaxParallel": 1, "HealthCheck": "task_states",
                "MinHealthyTime": 1_000_000_000_u64, "HealthyDeadline": 60_000_000_000_u64
            },
            "Tasks": [{
                "Name": "server", "Driver": "raw_exec",
                "Config": {"command": "/bin/sh", "args": ["-c", "sleep 3600"]},
                "Resources": {"CPU": 20, "MemoryMB": 16}
            }]
        }]
    }})
    .to_string()
}

fn put(server: &Agent, path: &str, body: &str) -> Value {
    let (status, text) = http("PUT", &server.url(path), Some(body));
    assert_eq!(status, 200, "PUT {path}: {text}");
    serde_json::from_str(&text).unwrap_or_else(|error| panic!("{path}: {error}: {text}"))
}

#[test]
fn a_drain_moves_service_allocations_max_parallel_at_a_time_and_completes() {
    let temp = tempfile::tempdir().expect("temp dir");
    let (server, mut clients, node_a, node_b) = server_and_two_clients(temp.path(), LIMIT);

    // Everything starts on node-a: node-b is ineligible while the job is placed.
    let out = server.cli_ok(&["node", "eligibility", "-disable", &node_b]);
    assert_eq!(
        out.trim(),
        format!("Node {node_b:?} scheduling eligibility set: ineligible for scheduling")
    );
    put(&server, "/v1/jobs", &sleeper_job("web", 3));
    wait_for("three allocations running on node-a", LIMIT, || {
        (running_on(&server, "web", &node_a) == 3).then_some(())
    });
    let out = server.cli_ok(&["node", "eligibility", "-enable", &node_b[..8]]);
    assert!(out.contains("eligible for scheduling"), "{out}");

    // Each original allocation reports its migration health before the drain starts.
    wait_for("health on the first allocations", LIMIT, || {
        allocs(&server, "web")
            .iter()
            .all(|alloc| alloc["DeploymentStatus"]["Healthy"] == true)
            .then_some(())
    });

    // Watch the drain from another thread: never more than max_parallel (1) allocation of
    // the group may be away at once, i.e. at least count - 1 healthy ones always run.
    let server_url = server.address.clone();
    let watching = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let watcher = {
        let watching = watching.clone();
        std::thread::spawn(move || {
            let mut fewest = usize::MAX;
            while watching.load(std::sync::atomic::Ordering::SeqCst) {
                let (_, body) = http("GET", &format!("{server_url}/v1/job/web/allocations"), None);
                let list: Vec<Value> = serde_json::from_str(&body).unwrap_or_default();
                let healthy_running = list
                    .iter()
                    .filter(|alloc| {
                        alloc["ClientStatus"] == "running"
                            && alloc["DesiredStatus"] == "run"
                            && alloc["DesiredTransition"]["Migrate"] != true
                            && alloc["DeploymentStatus"]["Healthy"] == true
                    })
                    .count();
                fewest = fewest.min(healthy_running);
                std::thread::sleep(Duration::from_millis(50));
            }
            fewest
        })
    };

    let output = server.cli(&[
        "node",
        "drain",
        "-enable",
        "-deadline",
        "30s",
        "-yes",
        &node_a,
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "node drain: {stdout}");
    // The command monitors the drain until it is done, as Nomad's does.
    assert!(
        stdout.contains(&format!("Node {node_a:?} drain strategy set")),
        "{stdout}"
    );
    assert!(stdout.contains("marked for migration"), "{stdout}");
    assert!(
        stdout.contains(&format!("Drain complete for node {node_a}")),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("All allocations on node {node_a:?} have stopped")),
        "{stdout}"
    );

    watching.store(false, std::sync::atomic::Ordering::SeqCst);
    let fewest = watcher.join().expect("watcher");
    assert!(
        fewest >= 2,
        "at most one allocation away at a time, saw {fewest} healthy"
    );

    // The drain is complete once the old allocations are stopped; the last replacement may
    // still be starting.
    wait_for("three allocations running on node-b", LIMIT, || {
        (running_on(&server, "web", &node_b) == 3).then_some(())
    });
    assert_eq!(running_on(&server, "web", &node_a), 0);
    let stopped: Vec<Value> = allocs(&server, "web")
        .into_iter()
        .filter(|alloc| alloc["NodeID"] == node_a.as_str())
        .collect();
    assert_eq!(stopped.len(), 3);
    for alloc in &stopped {
        assert_eq!(alloc["DesiredStatus"], "stop");
        assert_eq!(alloc["DesiredTransition"]["Migrate"], true);
        let full = server.get_json(&format!("/v1/allocation/{}", alloc["ID"].as_str().unwrap()));
        assert_eq!(full["DesiredDescription"], "alloc is being migrated");
    }
    let drain_evals: BTreeSet<String> = server
        .get_json("/v1/job/web/evaluations")
        .as_array()
        .unwrap()
        .iter()
        .filter(|eval| eval["TriggeredBy"] == "node-drain")
        .map(|eval| eval["ID"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(drain_evals.len(), 3, "one node-drain evaluation per step");

    let node = server.get_json(&format!("/v1/node/{node_a}"));
    assert_eq!(node["DrainStrategy"], Value::Null);
    assert_eq!(node["Drain"], false);
    assert_eq!(node["SchedulingEligibility"], "ineligible");
    assert_eq!(node["LastDrain"]["Status"], "complete");
    let messages: Vec<&str> = node["Events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|event| event["Message"].as_str())
        .collect();
    assert!(
        messages.contains(&"Node drain strategy set"),
        "{messages:?}"
    );
    assert!(messages.contains(&"Node drain complete"), "{messages:?}");
    let status = server.cli_ok(&["node", "status", &node_a]);
    assert!(
        status.contains("Drain") && status.contains("false"),
        "{status}"
    );
    assert!(status.contains("ineligible"), "{status}");

    // While draining, eligibility cannot be turned on; a forced drain stops at once.
    let response = put(
        &server,
        &format!("/v1/node/{node_b}/drain"),
        &json!({"DrainSpec": {"Deadline": -1, "IgnoreSystemJobs": false}, "Meta": {"why": "test"}})
            .to_string(),
    );
    assert!(
        response["NodeModifyIndex"].as_u64().unwrap() > 0,
        "{response}"
    );
    let node = server.get_json(&format!("/v1/node/{node_b}"));
    assert_eq!(node["Drain"], true);
    assert_eq!(node["DrainStrategy"]["Deadline"], -1);
    assert_eq!(node["LastDrain"]["Meta"]["why"], "test");
    let (code, text) = http(
        "PUT",
        &server.url(&format!("/v1/node/{node_b}/eligibility")),
        Some(r#"{"Eligibility": "eligible"}"#),
    );
    assert_eq!(code, 400);
    assert_eq!(
        text.trim(),
        "can not set node's scheduling eligibility to eligible while it is draining"
    );
    wait_for("the forced drain to stop every allocation", LIMIT, || {
        let node = server.get_json(&format!("/v1/node/{node_b}"));
        (running_on(&server, "web", &node_b) == 0 && node["LastDrain"]["Status"] == "complete")
            .then_some(())
    });

    // Cancelling with MarkEligible after a drain: node-a eligible again and evaluated.
    let out = server.cli_ok(&["node", "drain", "-disable", "-yes", &node_a]);
    assert_eq!(out.trim(), format!("Node {node_a:?} drain strategy unset"));
    let node = server.get_json(&format!("/v1/node/{node_a}"));
    assert_eq!(node["SchedulingEligibility"], "eligible");
    wait_for("the job back on node-a", LIMIT, || {
        (running_on(&server, "web", &node_a) == 3).then_some(())
    });

    // Evaluate and purge answer Nomad's NodeUpdateResponse.
    let evaluated = put(&server, &format!("/v1/node/{node_a}/evaluate"), "");
    assert!(
        !evaluated["EvalIDs"].as_array().unwrap().is_empty(),
        "{evaluated}"
    );
    // node-b's agent is stopped first, or it would register itself again.
    clients[1].terminate();
    let purged = put(&server, &format!("/v1/node/{node_b}/purge"), "");
    assert!(purged["NodeModifyIndex"].as_u64().unwrap() > 0, "{purged}");
    let (code, _) = http("GET", &server.url(&format!("/v1/node/{node_b}")), None);
    assert_eq!(code, 404);
    let (code, text) = http("PUT", &server.url("/v1/node/nope/purge"), Some(""));
    assert_eq!((code, text.trim()), (404, "node not found"));
}
