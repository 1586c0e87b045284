//! End to end: a cluster of three server agents on one real 3-member etcd cluster, and a
//! client agent that knows all three. One server leads; a job registered through a follower
//! runs; every server answers `/v1/status/leader`, `/v1/status/peers` and `/v1/agent/members`
//! alike. `kill -9` of the leader (the client's first server): another server leads within a
//! bounded time (measured and printed), the client goes on with another server, its tasks keep
//! running (same processes), and a job registered after the failover runs. `drover server
//! members` shows the dead server failed and one leader.
//!
//! Needs `etcd` (Debian's etcd-server); skipped without it, failed under `CI=true`.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

#[path = "../../etcd/tests/common/mod.rs"]
mod etcd_cluster;
mod support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{Agent, http, kill_tasks_of_allocs, pids_with_cmdline, wait_for};

const LIMIT: Duration = Duration::from_secs(90);

/// A server-only agent on the cluster's etcd prefix.
fn server_agent(dir: &std::path::Path, name: &str, endpoints: &[String]) -> Agent {
    std::fs::create_dir_all(dir.join(name)).unwrap();
    let config = dir.join(name).join("server.hcl");
    let endpoints: Vec<String> = endpoints.iter().map(|e| format!("\"{e}\"")).collect();
    std::fs::write(
        &config,
        format!(
            "name = \"{name}\"\nclient {{\n  enabled = false\n}}\netcd {{\n  endpoints = [{}]\n  prefix    = \"cluster/\"\n}}\n",
            endpoints.join(", ")
        ),
    )
    .unwrap();
    Agent::start_server(
        &dir.join(name).join("data"),
        &[&format!("-config={}", config.display())],
    )
}

fn host_port(agent: &Agent) -> String {
    agent.address.trim_start_matches("http://").to_owned()
}

/// What a server says the leader is ("" when it knows none).
fn leader_of(agent: &Agent) -> Option<String> {
    let (status, body) = http("GET", &agent.url("/v1/status/leader"), None);
    (status == 200).then(|| serde_json::from_str::<String>(&body).unwrap_or_default())
}

/// The leader every given server names, once they agree on one of them.
fn agreed_leader(servers: &[&Agent]) -> String {
    let addresses: BTreeSet<String> = servers.iter().map(|agent| host_port(agent)).collect();
    wait_for("the servers to agree on a leader", LIMIT, || {
        let named: BTreeSet<String> = servers
            .iter()
            .filter_map(|agent| leader_of(agent))
            .collect();
        let leader = named.iter().next()?.clone();
        (named.len() == 1 && addresses.contains(&leader)).then_some(leader)
    })
}

fn job(job_id: &str, marker: &str, count: u32) -> String {
    json!({"Job": {
        "ID": job_id, "Name": job_id, "Type": "service", "Datacenters": ["dc1"],
        "TaskGroups": [{"Name": "app", "Count": count, "Tasks": [{
            "Name": "server", "Driver": "raw_exec",
            "Config": {"command": "/bin/sh", "args": ["-c", format!("sleep 3600; echo {marker}")]},
            "Resources": {"CPU": 20, "MemoryMB": 16}
        }]}]
    }})
    .to_string()
}

fn running_allocs(agent: &Agent, job_id: &str, count: usize) -> Vec<String> {
    wait_for(
        &format!("{count} allocations of {job_id} running"),
        LIMIT,
        || {
            let (status, body) = http(
                "GET",
                &agent.url(&format!("/v1/job/{job_id}/allocations")),
                None,
            );
            let allocs: Value = serde_json::from_str(&body).ok().filter(|_| status == 200)?;
            let running: Vec<String> = allocs
                .as_array()?
                .iter()
                .filter(|alloc| alloc["ClientStatus"] == "running")
                .filter_map(|alloc| alloc["ID"].as_str().map(str::to_owned))
                .collect();
            (running.len() == count).then_some(running)
        },
    )
}

#[test]
fn three_servers_on_etcd_elect_a_leader_forward_writes_and_survive_its_death() {
    if !etcd_cluster::etcd_available() {
        return;
    }
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let etcd = runtime.block_on(etcd_cluster::EtcdCluster::start(3));
    let endpoints = etcd.endpoints();
    let temp = tempfile::tempdir().unwrap();
    let mut servers: Vec<Option<Agent>> = ["server-a", "server-b", "server-c"]
        .iter()
        .map(|name| Some(server_agent(temp.path(), name, &endpoints)))
        .collect();
    let all: Vec<&Agent> = servers.iter().flatten().collect();
    let leader = agreed_leader(&all);
    let leader_index = all
        .iter()
        .position(|agent| host_port(agent) == leader)
        .unwrap();
    let follower_index = (leader_index + 1) % 3;
    let other_index = (leader_index + 2) % 3;

    // Every server lists the same three alive members and peers, and reads say a leader is
    // known.
    let mut expected_peers: Vec<String> = all.iter().map(|agent| host_port(agent)).collect();
    expected_peers.sort();
    for agent in &all {
        let peers: Vec<String> =
            serde_json::from_value(agent.get_json("/v1/status/peers")).unwrap();
        assert_eq!(peers, expected_peers, "peers from {}", agent.address);
        let members = agent.get_json("/v1/agent/members");
        let statuses: Vec<(&str, &str)> = members["Members"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| (m["Name"].as_str().unwrap(), m["Status"].as_str().unwrap()))
            .collect();
        assert_eq!(
            statuses,
            [
                ("server-a.global", "alive"),
                ("server-b.global", "alive"),
                ("server-c.global", "alive")
            ]
        );
        let (_, headers) = head_of(agent, "/v1/jobs");
        assert!(headers.contains("x-nomad-knownleader: true"), "{headers}");
    }

    // One keyring for the cluster: every server publishes the same signing keys, so what one
    // signs verifies on the others.
    wait_for("one keyring on every server", LIMIT, || {
        let answers: Vec<(u16, String)> = all
            .iter()
            .map(|agent| http("GET", &agent.url("/.well-known/jwks.json"), None))
            .collect();
        if answers.iter().any(|(status, _)| *status != 200) {
            return None;
        }
        let sets: BTreeSet<String> = answers.into_iter().map(|(_, body)| body).collect();
        let keys: Value = serde_json::from_str(sets.iter().next()?).ok()?;
        (sets.len() == 1 && !keys["keys"].as_array()?.is_empty()).then_some(())
    });

    // A client that knows every server, the leader first.
    let client_servers = format!(
        "-servers={},{},{}",
        leader,
        host_port(all[follower_index]),
        host_port(all[other_index])
    );
    let client_data = temp.path().join("client").join("data");
    let client = Agent::start_with(&client_data, &["-client", &client_servers]);
    wait_for("the node to be ready", LIMIT, || {
        let nodes = all[follower_index].get_json("/v1/nodes");
        nodes
            .as_array()?
            .iter()
            .any(|node| node["Status"] == "ready")
            .then_some(())
    });

    // Registered through a follower: the leader schedules it, the client runs it.
    let marker = format!("cluster-marker-{}", std::process::id());
    let (status, body) = http(
        "PUT",
        &all[follower_index].url("/v1/jobs"),
        Some(&job("steady", &marker, 2)),
    );
    assert_eq!(status, 200, "{body}");
    // Read-your-writes on that follower: it answered once its own copy had the write, so the
    // job and its evaluation are there at once, at least at the write's index.
    let written: Value = serde_json::from_str(&body).unwrap();
    let (status, text) = http("GET", &all[follower_index].url("/v1/job/steady"), None);
    assert_eq!(
        status, 200,
        "the follower does not have the job it forwarded: {text}"
    );
    let eval_id = written["EvalID"].as_str().unwrap();
    let (status, text) = http(
        "GET",
        &all[follower_index].url(&format!("/v1/evaluation/{eval_id}")),
        None,
    );
    assert_eq!(status, 200, "{text}");
    let first_allocs = running_allocs(all[other_index], "steady", 2);
    // One `sh` per task carries the marker; wait until both are there and nothing else is
    // (a task's process is briefly forked before it execs).
    let pids_before = wait_for("the tasks' processes", LIMIT, || {
        let first = pids_with_cmdline(&marker);
        std::thread::sleep(Duration::from_millis(300));
        let second = pids_with_cmdline(&marker);
        (first.len() == 2 && first == second).then_some(first)
    });

    // The leader dies.
    drop(all);
    let killed_at = Instant::now();
    servers[leader_index].as_mut().unwrap().kill9();
    let dead = servers[leader_index].take().unwrap();
    let survivors: Vec<&Agent> = servers.iter().flatten().collect();
    let new_leader = agreed_leader(&survivors);
    assert_ne!(new_leader, leader);
    // The new leader answers writes: through a follower, so forwarding is part of it.
    let probe = survivors
        .iter()
        .find(|agent| host_port(agent) != new_leader)
        .unwrap();
    wait_for("a write answered after the failover", LIMIT, || {
        let (status, _) = http(
            "PUT",
            &probe.url("/v1/jobs"),
            Some(&job("probe", "probe-marker-never-runs", 0)),
        );
        (status == 200).then_some(())
    });
    let failover = killed_at.elapsed();
    println!("failover: leader killed -> new leader answering writes in {failover:?}");
    assert!(
        failover < Duration::from_secs(20),
        "failover took {failover:?}"
    );

    // The client carries on with another server: a job registered now runs on it, and the
    // first job's tasks are the same processes.
    let later_marker = format!("cluster-later-{}", std::process::id());
    let (status, body) = http(
        "PUT",
        &probe.url("/v1/jobs"),
        Some(&job("later", &later_marker, 1)),
    );
    assert_eq!(status, 200, "{body}");
    let later_allocs = running_allocs(survivors[0], "later", 1);
    let mut pids_now = pids_with_cmdline(&marker);
    let mut expected = pids_before.clone();
    pids_now.sort_unstable();
    expected.sort_unstable();
    assert_eq!(pids_now, expected, "no task was stopped or started again");
    let still = running_allocs(survivors[1], "steady", 2);
    assert_eq!(
        still.iter().collect::<BTreeSet<_>>(),
        first_allocs.iter().collect::<BTreeSet<_>>()
    );
    let nodes = survivors[0].get_json("/v1/nodes");
    assert_eq!(nodes[0]["Status"], "ready", "{nodes}");

    // Status from each survivor: the new leader, two alive peers, the dead server failed.
    let mut alive_peers: Vec<String> = survivors.iter().map(|agent| host_port(agent)).collect();
    alive_peers.sort();
    for agent in &survivors {
        assert_eq!(leader_of(agent).as_deref(), Some(new_leader.as_str()));
        let peers: Vec<String> = wait_for("the dead server out of the peers", LIMIT, || {
            let peers: Vec<String> =
                serde_json::from_value(agent.get_json("/v1/status/peers")).ok()?;
            (peers == alive_peers).then_some(peers)
        });
        assert_eq!(peers.len(), 2);
        let output = agent.cli_ok(&["server", "members"]);
        let rows: Vec<Vec<&str>> = output
            .lines()
            .skip(1)
            .map(|line| line.split_whitespace().collect())
            .collect();
        assert_eq!(rows.len(), 3, "{output}");
        let dead_name = rows
            .iter()
            .find(|row| format!("{}:{}", row[1], row[2]) == leader)
            .unwrap();
        assert_eq!(dead_name[3], "failed", "{output}");
        let leaders: Vec<&Vec<&str>> = rows.iter().filter(|row| row[4] == "true").collect();
        assert_eq!(leaders.len(), 1, "{output}");
        assert_eq!(format!("{}:{}", leaders[0][1], leaders[0][2]), new_leader);
    }

    // The dead server forced out, as `nomad server force-leave`: listed `left`, then with
    // -prune not at all. An alive server named is left alone; a request without a name is
    // Nomad's 400.
    let member_rows = |agent: &Agent| -> Vec<(String, String)> {
        agent.get_json("/v1/agent/members")["Members"]
            .as_array()
            .unwrap()
            .iter()
            .map(|member| {
                let address = format!("{}:{}", member["Addr"].as_str().unwrap(), member["Port"]);
                (address, member["Status"].as_str().unwrap().to_owned())
            })
            .collect()
    };
    let dead_member = survivors[0].get_json("/v1/agent/members")["Members"]
        .as_array()
        .unwrap()
        .iter()
        .find(|member| member["Status"] == "failed")
        .unwrap()["Name"]
        .as_str()
        .unwrap()
        .to_owned();
    let alive_member = survivors[0].get_json("/v1/agent/members")["Members"]
        .as_array()
        .unwrap()
        .iter()
        .find(|member| member["Status"] == "alive")
        .unwrap()["Name"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        support::http("PUT", &survivors[0].url("/v1/agent/force-leave"), None),
        (400, "missing node to force leave".to_owned())
    );
    survivors[0].cli_ok(&["server", "force-leave", &alive_member]);
    survivors[0].cli_ok(&["server", "force-leave", &dead_member]);
    let statuses = member_rows(survivors[1]);
    assert_eq!(statuses.len(), 3, "{statuses:?}");
    assert!(
        statuses
            .iter()
            .any(|(address, status)| *address == leader && status == "left"),
        "{statuses:?}"
    );
    assert_eq!(
        statuses
            .iter()
            .filter(|(_, status)| status == "alive")
            .count(),
        2,
        "{statuses:?}"
    );
    survivors[1].cli_ok(&["server", "force-leave", "-prune", &dead_member]);
    let statuses = member_rows(survivors[0]);
    assert_eq!(statuses.len(), 2, "{statuses:?}");
    assert!(
        statuses.iter().all(|(_, status)| status == "alive"),
        "{statuses:?}"
    );

    drop(client);
    drop(dead);
    kill_tasks_of_allocs(&first_allocs);
    kill_tasks_of_allocs(&later_allocs);
}

/// The status and headers of a GET, headers as lowercase `name: value` lines.
fn head_of(agent: &Agent, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let host = host_port(agent);
    let mut stream = std::net::TcpStream::connect(&host).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let head = text
        .split_once("\r\n\r\n")
        .map_or(text.as_str(), |(head, _)| head);
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap();
    (status, head.to_lowercase())
}

/// Three server agents on one etcd prefix, none given a `name` (so each takes the host name,
/// the default): the first runs; the second and third refuse to start, naming the name and
/// the live server's address, rather than each listing only itself as the cluster's peers.
#[test]
fn three_servers_with_the_same_name_the_second_and_third_refuse_to_start_naming_it() {
    if !etcd_cluster::etcd_available() {
        return;
    }
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let etcd = runtime.block_on(etcd_cluster::EtcdCluster::start(1));
    let endpoints: Vec<String> = etcd
        .endpoints()
        .iter()
        .map(|e| format!("\"{e}\""))
        .collect();
    let temp = tempfile::tempdir().unwrap();
    let config = temp.path().join("server.hcl");
    std::fs::write(
        &config,
        format!(
            "client {{\n  enabled = false\n}}\netcd {{\n  endpoints = [{}]\n  prefix    = \"same-name/\"\n}}\n",
            endpoints.join(", ")
        ),
    )
    .unwrap();
    let config_flag = format!("-config={}", config.display());
    let first = Agent::start_with(&temp.path().join("first"), &[&config_flag]);
    let host_name = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_owned();
    let members = first.get_json("/v1/agent/members");
    assert_eq!(
        members["Members"][0]["Name"],
        format!("{host_name}.global"),
        "{members}"
    );

    for which in ["second", "third"] {
        let data_dir = temp.path().join(which);
        let mut agent = std::process::Command::new(support::drover_bin())
            .args(["agent", "-dev", "-http-port=0"])
            .arg(format!("-data-dir={}", data_dir.display()))
            .arg(&config_flag)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let exited = wait_for(&format!("the {which} server to exit"), LIMIT, || {
            agent.try_wait().unwrap()
        });
        let output = agent.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!exited.success(), "the {which} server started: {stderr}");
        let expected = format!(
            "another server named {host_name:?} is alive in this cluster (its HTTP API at {})",
            host_port(&first)
        );
        assert!(
            stderr.contains(&expected),
            "the {which} server's error does not say {expected:?}:\n{stderr}"
        );
        assert!(stderr.contains("set `name`"), "{stderr}");
    }
    // The first server is untouched: the one peer, and leading.
    let peers: Vec<String> = serde_json::from_value(first.get_json("/v1/status/peers")).unwrap();
    assert_eq!(peers, [host_port(&first)]);
    assert_eq!(leader_of(&first), Some(host_port(&first)));
}
