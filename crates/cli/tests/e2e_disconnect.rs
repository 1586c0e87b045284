//! End to end: a client-only agent that stops heartbeating (SIGSTOP) while it runs an
//! allocation of a group with `disconnect { lost_after }`. The server marks the node
//! `disconnected` (not down) and the allocation `unknown`, places a replacement on the other
//! node by the reschedule policy (a system job's allocation just waits on its node), and when
//! the agent resumes (SIGCONT) the original reconnects and the replacement is stopped, as
//! `reconcile = "keep_original"` says. And a client cut off from its server by a partition
//! (a relay the test cuts) stops an allocation with `stop_on_client_after` on its own, while
//! the server marks it lost and replaces it only once that stop is sure.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod support;

use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::Signal;
use serde_json::{Value, json};
use support::{Agent, http, kill_tasks_of_allocs, pids_with_cmdline, process_alive, wait_for};

const LIMIT: Duration = Duration::from_secs(90);

fn agent_config(data_dir: &std::path::Path, name: &str, text: &str) -> String {
    let parent = data_dir.parent().expect("data dir has a parent");
    std::fs::create_dir_all(parent).expect("config dir");
    let path = parent.join(name);
    std::fs::write(&path, text).expect("write agent config");
    path.display().to_string()
}

fn job_allocs(agent: &Agent, job_id: &str) -> Vec<Value> {
    agent
        .get_json(&format!("/v1/job/{job_id}/allocations"))
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn node_status(agent: &Agent, node_id: &str) -> String {
    agent.get_json(&format!("/v1/node/{node_id}"))["Status"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn set_eligibility(agent: &Agent, node_id: &str, eligibility: &str) {
    let (status, body) = http(
        "POST",
        &agent.url(&format!("/v1/node/{node_id}/eligibility")),
        Some(&json!({"NodeID": node_id, "Eligibility": eligibility}).to_string()),
    );
    assert_eq!(status, 200, "eligibility {eligibility}: {body}");
}

/// Thaws the client agent even when an assertion fails, so the test never leaves a stopped
/// process behind.
struct Frozen<'a>(&'a Agent);

impl Drop for Frozen<'_> {
    fn drop(&mut self) {
        self.0.signal(Signal::SIGCONT);
    }
}

#[test]
fn a_frozen_client_is_disconnected_replaced_and_reconnects_keeping_its_original() {
    let temp = tempfile::tempdir().expect("temp dir");
    // Short heartbeats: a node is missed 2 s after its last one.
    let server_data = temp.path().join("server").join("data");
    let server_config = agent_config(
        &server_data,
        "server.hcl",
        "name = \"server-node\"\nserver {\n  heartbeat_grace = \"1s\"\n  min_heartbeat_ttl = \"1s\"\n}\n",
    );
    let server = Agent::start_with(&server_data, &[&format!("-config={server_config}")]);
    let client_data = temp.path().join("client").join("data");
    let client_config = agent_config(
        &client_data,
        "client.hcl",
        "name = \"remote-node\"\nserver {\n  enabled = false\n}\n",
    );
    let client = Agent::start_with(
        &client_data,
        &[
            "-client",
            &format!("-servers={}", server.address.trim_start_matches("http://")),
            &format!("-config={client_config}"),
        ],
    );
    let (server_node, remote_node) = wait_for("both nodes ready", LIMIT, || {
        let nodes = server.get_json("/v1/nodes");
        let nodes = nodes.as_array().cloned().unwrap_or_default();
        let id_of = |name: &str| {
            nodes
                .iter()
                .find(|node| node["Name"] == name && node["Status"] == "ready")
                .and_then(|node| node["ID"].as_str().map(str::to_owned))
        };
        Some((id_of("server-node")?, id_of("remote-node")?))
    });

    // The original lands on the remote node (the server's own is ineligible for now).
    set_eligibility(&server, &server_node, "ineligible");
    let marker = format!("disconnect-marker-{}", std::process::id());
    let job = json!({"Job": {
        "ID": "web", "Name": "web", "Type": "service", "Datacenters": ["dc1"],
        "TaskGroups": [{
            "Name": "app", "Count": 1,
            "Disconnect": {"LostAfter": 3_600_000_000_000u64, "Reconcile": "keep_original"},
            "ReschedulePolicy": {
                "Delay": 5_000_000_000u64, "DelayFunction": "constant", "Unlimited": true
            },
            "Tasks": [{
                "Name": "server", "Driver": "raw_exec",
                "Config": {"command": "/bin/sh", "args": ["-c", format!("sleep 3600; echo {marker}")]},
                "Resources": {"CPU": 50, "MemoryMB": 32}
            }]
        }]
    }});
    let (status, body) = http("PUT", &server.url("/v1/jobs"), Some(&job.to_string()));
    assert_eq!(status, 200, "register: {body}");
    let original = wait_for("the original to run on the remote node", LIMIT, || {
        job_allocs(&server, "web").into_iter().find(|alloc| {
            alloc["ClientStatus"] == "running" && alloc["NodeID"] == remote_node.as_str()
        })
    });
    let original_id = original["ID"].as_str().expect("alloc ID").to_owned();
    // An allocation of an active deployment is only replaced when the deployment allows it
    // (Nomad's rule too): let Nomad's default update block finish first.
    wait_for("the deployment to succeed", LIMIT, || {
        let deployment = server.get_json("/v1/job/web/deployment");
        (deployment["Status"] == "successful").then_some(())
    });
    let task_pids = pids_with_cmdline(&marker);
    assert!(!task_pids.is_empty(), "the task runs");
    set_eligibility(&server, &server_node, "eligible");

    // The client agent stops answering; its task runs on under its shim.
    client.signal(Signal::SIGSTOP);
    let frozen = Frozen(&client);
    wait_for("the remote node to be disconnected", LIMIT, || {
        (node_status(&server, &remote_node) == "disconnected").then_some(())
    });
    let unknown = wait_for("the original to turn unknown", LIMIT, || {
        let alloc = server.get_json(&format!("/v1/allocation/{original_id}"));
        (alloc["ClientStatus"] == "unknown").then_some(alloc)
    });
    assert_eq!(
        unknown["ClientDescription"],
        "alloc is unknown since its node is disconnected"
    );
    assert_eq!(unknown["DesiredStatus"], "run");
    let replacement = wait_for("a replacement to run on the server's node", LIMIT, || {
        let original = server.get_json(&format!("/v1/allocation/{original_id}"));
        let next = original["NextAllocation"]
            .as_str()
            .filter(|id| !id.is_empty())?;
        let alloc = server.get_json(&format!("/v1/allocation/{next}"));
        (alloc["ClientStatus"] == "running").then_some(alloc)
    });
    assert_eq!(replacement["PreviousAllocation"], original_id.as_str());
    assert_eq!(replacement["NodeID"], server_node.as_str());
    let replacement_id = replacement["ID"].as_str().expect("alloc ID").to_owned();
    assert_eq!(
        node_status(&server, &remote_node),
        "disconnected",
        "within lost_after the node is never marked down"
    );
    assert!(task_pids.iter().all(|pid| process_alive(*pid)));

    // The agent resumes: the original reconnects and keeps running; its replacement stops.
    drop(frozen);
    wait_for("the remote node to be ready again", LIMIT, || {
        (node_status(&server, &remote_node) == "ready").then_some(())
    });
    let stopped = wait_for("the replacement to be stopped", LIMIT, || {
        let alloc = server.get_json(&format!("/v1/allocation/{replacement_id}"));
        (alloc["DesiredStatus"] == "stop").then_some(alloc)
    });
    assert_eq!(
        stopped["DesiredDescription"],
        "alloc not needed due to disconnected client reconnect"
    );
    // The client reports it running with a "Reconnected" event on its task, and the
    // `reconnect` evaluation records it running again in `AllocStates`.
    let reconnected = wait_for("the original to be reconnected", LIMIT, || {
        let alloc = server.get_json(&format!("/v1/allocation/{original_id}"));
        let events = alloc["TaskStates"]["server"]["Events"]
            .as_array()
            .cloned()?;
        let event = events.iter().any(|event| event["Type"] == "Reconnected");
        let states = alloc["AllocStates"].as_array().cloned()?;
        let recorded = states.last()?["Value"] == "running";
        (alloc["ClientStatus"] == "running" && event && recorded).then_some(alloc)
    });
    assert_eq!(reconnected["DesiredStatus"], "run");
    let evals = server.get_json("/v1/job/web/evaluations");
    assert!(
        evals
            .as_array()
            .is_some_and(|evals| evals.iter().any(|eval| eval["TriggeredBy"] == "reconnect")),
        "a reconnect evaluation: {evals}"
    );
    assert!(
        task_pids.iter().all(|pid| process_alive(*pid)),
        "the original's task never restarted"
    );

    kill_tasks_of_allocs(&[original_id, replacement_id]);
}

#[test]
fn a_frozen_clients_system_allocation_turns_unknown_stays_on_its_node_and_reconnects() {
    let temp = tempfile::tempdir().expect("temp dir");
    let server_data = temp.path().join("server").join("data");
    let server_config = agent_config(
        &server_data,
        "server.hcl",
        "name = \"server-node\"\nserver {\n  heartbeat_grace = \"1s\"\n  min_heartbeat_ttl = \"1s\"\n}\n",
    );
    let server = Agent::start_with(&server_data, &[&format!("-config={server_config}")]);
    let client_data = temp.path().join("client").join("data");
    let client_config = agent_config(
        &client_data,
        "client.hcl",
        "name = \"remote-node\"\nserver {\n  enabled = false\n}\n",
    );
    let client = Agent::start_with(
        &client_data,
        &[
            "-client",
            &format!("-servers={}", server.address.trim_start_matches("http://")),
            &format!("-config={client_config}"),
        ],
    );
    let (server_node, remote_node) = wait_for("both nodes ready", LIMIT, || {
        let nodes = server.get_json("/v1/nodes");
        let nodes = nodes.as_array().cloned().unwrap_or_default();
        let id_of = |name: &str| {
            nodes
                .iter()
                .find(|node| node["Name"] == name && node["Status"] == "ready")
                .and_then(|node| node["ID"].as_str().map(str::to_owned))
        };
        Some((id_of("server-node")?, id_of("remote-node")?))
    });

    let marker = format!("system-disconnect-marker-{}", std::process::id());
    let job = json!({"Job": {
        "ID": "node-agent", "Name": "node-agent", "Type": "system", "Datacenters": ["dc1"],
        "TaskGroups": [{
            "Name": "agent", "Count": 1,
            "Disconnect": {"LostAfter": 3_600_000_000_000u64},
            "Tasks": [{
                "Name": "agent", "Driver": "raw_exec",
                "Config": {"command": "/bin/sh", "args": ["-c", format!("sleep 3600; echo {marker}")]},
                "Resources": {"CPU": 50, "MemoryMB": 32}
            }]
        }]
    }});
    let (status, body) = http("PUT", &server.url("/v1/jobs"), Some(&job.to_string()));
    assert_eq!(status, 200, "register: {body}");
    let running_on = |node_id: &str| {
        job_allocs(&server, "node-agent")
            .into_iter()
            .find(|alloc| alloc["ClientStatus"] == "running" && alloc["NodeID"] == node_id)
    };
    let remote = wait_for("the allocation to run on the remote node", LIMIT, || {
        running_on(&remote_node)
    });
    let local = wait_for("the allocation to run on the server's node", LIMIT, || {
        running_on(&server_node)
    });
    let remote_id = remote["ID"].as_str().expect("alloc ID").to_owned();
    let local_id = local["ID"].as_str().expect("alloc ID").to_owned();
    let task_pids = pids_with_cmdline(&marker);
    assert_eq!(task_pids.len(), 2, "one task per node: {task_pids:?}");

    // The client agent stops answering; its task runs on under its shim.
    client.signal(Signal::SIGSTOP);
    let frozen = Frozen(&client);
    wait_for("the remote node to be disconnected", LIMIT, || {
        (node_status(&server, &remote_node) == "disconnected").then_some(())
    });
    let unknown = wait_for("the remote allocation to turn unknown", LIMIT, || {
        let alloc = server.get_json(&format!("/v1/allocation/{remote_id}"));
        (alloc["ClientStatus"] == "unknown").then_some(alloc)
    });
    assert_eq!(
        unknown["ClientDescription"],
        "alloc is unknown since its node is disconnected"
    );
    assert_eq!(unknown["DesiredStatus"], "run");
    // The disconnection's evaluation has run to its end: nothing was placed anywhere, the
    // node is not down, the other node's allocation is untouched.
    wait_for("the node-update evaluation to complete", LIMIT, || {
        let evals = server.get_json("/v1/job/node-agent/evaluations");
        let evals = evals.as_array().cloned()?;
        let disconnection = evals.iter().any(|eval| {
            eval["TriggeredBy"] == "node-update" && eval["NodeID"] == remote_node.as_str()
        });
        let settled = evals.iter().all(|eval| eval["Status"] == "complete");
        (disconnection && settled).then_some(())
    });
    assert_eq!(node_status(&server, &remote_node), "disconnected");
    let allocs = job_allocs(&server, "node-agent");
    assert_eq!(allocs.len(), 2, "nothing placed: {allocs:?}");
    let local_now = server.get_json(&format!("/v1/allocation/{local_id}"));
    assert_eq!(local_now["ClientStatus"], "running");
    assert!(task_pids.iter().all(|pid| process_alive(*pid)));

    // The agent resumes: the node comes back and the allocation reconnects where it ran.
    drop(frozen);
    wait_for("the remote node to be ready again", LIMIT, || {
        (node_status(&server, &remote_node) == "ready").then_some(())
    });
    let reconnected = wait_for("the allocation to be reconnected", LIMIT, || {
        let alloc = server.get_json(&format!("/v1/allocation/{remote_id}"));
        let events = alloc["TaskStates"]["agent"]["Events"].as_array().cloned()?;
        let event = events.iter().any(|event| event["Type"] == "Reconnected");
        let states = alloc["AllocStates"].as_array().cloned()?;
        let recorded = states.last()?["Value"] == "running";
        (alloc["ClientStatus"] == "running" && event && recorded).then_some(alloc)
    });
    assert_eq!(reconnected["DesiredStatus"], "run");
    let allocs = job_allocs(&server, "node-agent");
    assert_eq!(
        allocs.len(),
        2,
        "still the same two allocations: {allocs:?}"
    );
    let evals = server.get_json("/v1/job/node-agent/evaluations");
    assert!(
        evals
            .as_array()
            .is_some_and(|evals| evals.iter().any(|eval| eval["TriggeredBy"] == "reconnect")),
        "a reconnect evaluation: {evals}"
    );
    assert!(
        task_pids.iter().all(|pid| process_alive(*pid)),
        "neither task restarted"
    );

    kill_tasks_of_allocs(&[remote_id, local_id]);
}

/// A TCP relay between a client agent and its server: `cut` closes every relayed connection
/// and refuses new ones (a network partition between the two, while the test still reaches
/// the server directly); `heal` relays again.
struct Relay {
    address: String,
    cut: Arc<AtomicBool>,
    open: Arc<Mutex<Vec<TcpStream>>>,
}

impl Relay {
    fn to(target: &str) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").expect("relay listens");
        let address = listener.local_addr().expect("relay address").to_string();
        let target = target.to_owned();
        let cut = Arc::new(AtomicBool::new(false));
        let open: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let (relay_cut, relay_open) = (Arc::clone(&cut), Arc::clone(&open));
        std::thread::spawn(move || {
            for inbound in listener.incoming() {
                let Ok(inbound) = inbound else { continue };
                if relay_cut.load(Ordering::SeqCst) {
                    drop(inbound);
                    continue;
                }
                let Ok(outbound) = TcpStream::connect(&target) else {
                    continue;
                };
                let mut open = relay_open.lock().unwrap();
                for stream in [&inbound, &outbound] {
                    open.push(stream.try_clone().expect("clone stream"));
                }
                for (mut from, mut to) in [
                    (inbound.try_clone().unwrap(), outbound.try_clone().unwrap()),
                    (outbound, inbound),
                ] {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(Shutdown::Both);
                    });
                }
            }
        });
        Relay { address, cut, open }
    }

    fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for stream in self.open.lock().unwrap().drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }

    fn heal(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

#[test]
fn a_client_cut_off_from_its_server_stops_its_allocation_and_the_server_replaces_it_later() {
    let temp = tempfile::tempdir().expect("temp dir");
    let server_data = temp.path().join("server").join("data");
    let server_config = agent_config(
        &server_data,
        "server.hcl",
        "name = \"server-node\"\nserver {\n  heartbeat_grace = \"1s\"\n  min_heartbeat_ttl = \"1s\"\n}\n",
    );
    let server = Agent::start_with(&server_data, &[&format!("-config={server_config}")]);
    let relay = Relay::to(server.address.trim_start_matches("http://"));
    let client_data = temp.path().join("client").join("data");
    let client_config = agent_config(
        &client_data,
        "client.hcl",
        "name = \"remote-node\"\nserver {\n  enabled = false\n}\n",
    );
    let _client = Agent::start_with(
        &client_data,
        &[
            "-client",
            &format!("-servers={}", relay.address),
            &format!("-config={client_config}"),
        ],
    );
    let (server_node, remote_node) = wait_for("both nodes ready", LIMIT, || {
        let nodes = server.get_json("/v1/nodes");
        let nodes = nodes.as_array().cloned().unwrap_or_default();
        let id_of = |name: &str| {
            nodes
                .iter()
                .find(|node| node["Name"] == name && node["Status"] == "ready")
                .and_then(|node| node["ID"].as_str().map(str::to_owned))
        };
        Some((id_of("server-node")?, id_of("remote-node")?))
    });

    set_eligibility(&server, &server_node, "ineligible");
    let marker = format!("stop-on-client-after-marker-{}", std::process::id());
    let job = json!({"Job": {
        "ID": "web", "Name": "web", "Type": "service", "Datacenters": ["dc1"],
        "TaskGroups": [{
            "Name": "app", "Count": 1,
            "Disconnect": {"StopOnClientAfter": 3_000_000_000u64},
            "Tasks": [{
                "Name": "server", "Driver": "raw_exec",
                "Config": {"command": "/bin/sh", "args": ["-c", format!("sleep 3600; echo {marker}")]},
                "KillTimeout": 2_000_000_000u64,
                "Resources": {"CPU": 50, "MemoryMB": 32}
            }]
        }]
    }});
    let (status, body) = http("PUT", &server.url("/v1/jobs"), Some(&job.to_string()));
    assert_eq!(status, 200, "register: {body}");
    let original = wait_for("the original to run on the remote node", LIMIT, || {
        job_allocs(&server, "web").into_iter().find(|alloc| {
            alloc["ClientStatus"] == "running" && alloc["NodeID"] == remote_node.as_str()
        })
    });
    let original_id = original["ID"].as_str().expect("alloc ID").to_owned();
    wait_for("the deployment to succeed", LIMIT, || {
        let deployment = server.get_json("/v1/job/web/deployment");
        (deployment["Status"] == "successful").then_some(())
    });
    let task_pids = pids_with_cmdline(&marker);
    assert!(!task_pids.is_empty(), "the task runs");
    set_eligibility(&server, &server_node, "eligible");

    // The partition: the client hears nothing from its server and stops the allocation itself
    // 3 s later; the server marks the node down and the allocation lost.
    relay.cut();
    wait_for("the client to stop the task on its own", LIMIT, || {
        task_pids
            .iter()
            .all(|pid| !process_alive(*pid))
            .then_some(())
    });
    let lost = wait_for("the original to be lost", LIMIT, || {
        let alloc = server.get_json(&format!("/v1/allocation/{original_id}"));
        (alloc["ClientStatus"] == "lost").then_some(alloc)
    });
    assert_eq!(lost["DesiredStatus"], "stop");
    assert_eq!(node_status(&server, &remote_node), "down");
    // Its replacement waits for the client's stop: the follow-up evaluation is due at the
    // lost time plus stop_on_client_after plus the longest kill_timeout, at least Nomad's
    // default 5 s (the task's own is 2 s).
    let followup_id = lost["FollowupEvalID"]
        .as_str()
        .expect("follow-up")
        .to_owned();
    assert!(!followup_id.is_empty(), "a follow-up evaluation: {lost}");
    let followup = server.get_json(&format!("/v1/evaluation/{followup_id}"));
    assert_eq!(followup["TriggeredBy"], "failed-follow-up");
    let wait_until = unix_nanos(&followup["WaitUntil"]);
    let lost_at = lost["AllocStates"]
        .as_array()
        .and_then(|states| states.iter().find(|state| state["Value"] == "lost"))
        .map(|state| unix_nanos(&state["Time"]))
        .expect("a lost transition");
    assert_eq!(wait_until - lost_at, 8_000_000_000, "3 s + 5 s");
    let replacement = wait_for("the replacement on the server's node", LIMIT, || {
        job_allocs(&server, "web")
            .into_iter()
            .find(|alloc| alloc["ID"] != original_id.as_str())
    });
    assert_eq!(replacement["NodeID"], server_node.as_str());
    assert!(
        replacement["CreateTime"].as_i64().expect("create time") >= wait_until,
        "placed only once the client surely stopped the original"
    );
    let replacement_id = replacement["ID"].as_str().expect("alloc ID").to_owned();

    // The partition heals: the client reports the allocation it stopped as complete.
    relay.heal();
    wait_for("the remote node to be ready again", LIMIT, || {
        (node_status(&server, &remote_node) == "ready").then_some(())
    });
    wait_for("the client's final status", LIMIT, || {
        let alloc = server.get_json(&format!("/v1/allocation/{original_id}"));
        (alloc["ClientStatus"] == "complete").then_some(())
    });
    kill_tasks_of_allocs(&[original_id, replacement_id]);
}

/// Nanoseconds since the epoch of an RFC 3339 timestamp in the API's JSON.
fn unix_nanos(value: &Value) -> i64 {
    serde_json::from_value::<drover_structs::Timestamp>(value.clone())
        .ok()
        .and_then(drover_structs::Timestamp::unix_nanos)
        .unwrap_or_else(|| panic!("not a timestamp: {value}"))
}
