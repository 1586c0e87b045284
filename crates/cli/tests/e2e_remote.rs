//! End-to-end tests of the client↔server interface over the network: a client-only agent
//! (`drover agent -client -servers=ADDR`) running a job for a server agent in another process,
//! and the node simulator's nodes reaching a server agent over HTTP (`HttpServerConn`).

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use drover_client::clock::{SharedClock, SystemClock};
use drover_client::http_conn::{HttpServerConn, HttpServerConnConfig};
use drover_client::node_sim::{SimRunnerTiming, start_simulated_node};
use serde_json::{Value, json};
use support::{Agent, http, kill_tasks_of_allocs, pids_with_cmdline, wait_for, write_jobspec};

const LIMIT: Duration = Duration::from_secs(60);

/// Writes an agent config file next to `data_dir` and returns its path.
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

#[test]
fn a_client_only_agent_runs_a_job_for_a_server_in_another_process() {
    let temp = tempfile::tempdir().expect("temp dir");
    // The server agent also runs a client, so both nodes are listed side by side; the first
    // server address the client is given has nothing listening.
    let (server, client, remote_node_id) = server_and_remote_client(temp.path(), true);
    let server_data = temp.path().join("server").join("data");
    let client_data = temp.path().join("client").join("data");
    assert!(
        client
            .stdout_lines()
            .iter()
            .any(|line| line.contains("server false")),
        "the client agent runs no server: {:?}",
        client.stdout_lines()
    );
    let nodes = server.get_json("/v1/nodes");
    let nodes = nodes.as_array().cloned().unwrap_or_default();
    assert!(nodes.iter().any(|node| node["Name"] == "server-node"));
    let remote_self = client.get_json("/v1/agent/self");
    assert_eq!(
        remote_self["stats"]["client"]["node_id"], remote_node_id,
        "the remote agent's own node is the one the server lists"
    );

    // A job that can only run on the remote node.
    let marker = format!("remote-marker-{}", std::process::id());
    let (_dir, path) = write_jobspec(
        "remote.hcl",
        &format!(
            r#"
job "remote" {{
  datacenters = ["dc1"]
  type        = "service"

  group "app" {{
    count = 1

    constraint {{
      attribute = "${{node.unique.name}}"
      value     = "remote-node"
    }}

    task "server" {{
      driver = "raw_exec"

      config {{
        command = "/bin/sh"
        args    = ["-c", "echo started {marker}; sleep 3600; echo {marker}"]
      }}

      resources {{
        cpu    = 50
        memory = 32
      }}

      service {{
        name = "remote-svc"

        check {{
          type     = "script"
          command  = "/bin/sh"
          args     = ["-c", "echo remote check answers"]
          interval = "1s"
          timeout  = "2s"
        }}
      }}
    }}
  }}
}}
"#
        ),
    );
    server.cli_ok(&["job", "run", "-detach", path.to_str().expect("utf-8 path")]);
    let alloc = wait_for("the alloc to run on the remote node", LIMIT, || {
        job_allocs(&server, "remote")
            .into_iter()
            .find(|alloc| alloc["ClientStatus"] == "running")
    });
    let alloc_id = alloc["ID"].as_str().expect("alloc ID").to_owned();
    assert_eq!(alloc["NodeID"], remote_node_id.as_str());
    assert_eq!(alloc["NodeName"], "remote-node");
    assert_eq!(alloc["TaskStates"]["server"]["State"], "running");
    assert!(
        !pids_with_cmdline(&marker).is_empty(),
        "the task's process runs"
    );
    assert!(
        client_data.join("alloc").join(&alloc_id).is_dir(),
        "the alloc dir is in the remote agent's data dir"
    );
    assert!(
        !server_data.join("alloc").join(&alloc_id).exists(),
        "and not in the server agent's"
    );

    // The remote agent serves its alloc's client endpoints; the server agent, which does not
    // hold the alloc, passes them on to the remote node, as Nomad's servers do.
    for agent in [&client, &server] {
        let (status, body) = http(
            "GET",
            &agent.url(&format!("/v1/client/allocation/{alloc_id}/stats")),
            None,
        );
        assert_eq!(status, 200, "stats through {}: {body}", agent.address);
        let logs = wait_for("the task's stdout", LIMIT, || {
            let (status, body) = http(
                "GET",
                &agent.url(&format!(
                    "/v1/client/fs/logs/{alloc_id}?task=server&type=stdout&plain=true&follow=false"
                )),
                None,
            );
            (status == 200 && body.contains(&marker)).then_some(body)
        });
        assert!(
            logs.contains(&format!("started {marker}")),
            "logs through {}: {logs}",
            agent.address
        );
    }
    // The remote node registered the task's service with the server over HTTP, and its check
    // results are served by the node that runs them: through the server too, which passes
    // the request on.
    let services = wait_for("the remote task's service registration", LIMIT, || {
        let services = server.get_json(&format!("/v1/allocation/{alloc_id}/services"));
        (services.as_array().map(Vec::len) == Some(1)).then_some(services)
    });
    assert_eq!(services[0]["ServiceName"], "remote-svc", "{services}");
    assert_eq!(services[0]["NodeID"], remote_node_id.as_str(), "{services}");
    for agent in [&client, &server] {
        let check = wait_for("the script check's result", LIMIT, || {
            let checks = agent.get_json(&format!("/v1/client/allocation/{alloc_id}/checks"));
            let check = checks.as_object()?.values().next()?.clone();
            (check["Status"] == "success").then_some(check)
        });
        assert_eq!(check["Service"], "remote-svc", "{check}");
        assert_eq!(check["Task"], "server", "{check}");
        assert!(
            check["Output"]
                .as_str()
                .is_some_and(|output| output.contains("remote check answers")),
            "the output is the script's, through {}: {check}",
            agent.address
        );
    }
    let checks = server.cli_ok(&["alloc", "checks", &alloc_id]);
    assert!(checks.contains("success"), "{checks}");

    // The CLI pointed at the server reads the remote task's logs too.
    let logs = server.cli_ok(&["alloc", "logs", &alloc_id, "server"]);
    assert!(logs.contains(&format!("started {marker}")), "{logs}");

    // The client-only agent keeps no cluster state: it passes cluster reads to its server,
    // so the CLI pointed at it sees the job and its allocation as the server does.
    let through_client = client.get_json("/v1/job/remote/allocations");
    assert_eq!(
        through_client[0]["ID"],
        alloc_id.as_str(),
        "{through_client}"
    );
    let status = client.cli_ok(&["job", "status", "remote"]);
    assert!(status.contains("running"), "{status}");

    // Its own client endpoints know the allocation from its client, not from a store: exec
    // pointed at the client agent runs in the task, and a log follow there lasts as long as
    // the task does and ends when it dies.
    let echoed = client.cli_ok(&[
        "alloc",
        "exec",
        "-task",
        "server",
        &alloc_id,
        "/bin/echo",
        "hi",
    ]);
    assert_eq!(echoed.trim(), "hi");
    let follow_url = client.url(&format!(
        "/v1/client/fs/logs/{alloc_id}?task=server&type=stdout&plain=true&follow=true"
    ));
    let (follow_done, follow_ended) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = follow_done.send(http("GET", &follow_url, None));
    });
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        follow_ended.try_recv().is_err(),
        "a follow of a running task's log stays open"
    );

    server.cli_ok(&["job", "stop", "remote"]);
    let (status, followed) = follow_ended
        .recv_timeout(LIMIT)
        .expect("the log follow ends once the task is dead");
    assert_eq!(status, 200, "{followed}");
    assert!(
        followed.contains(&format!("started {marker}")),
        "{followed}"
    );
    wait_for("the remote alloc to complete", LIMIT, || {
        job_allocs(&server, "remote")
            .into_iter()
            .find(|alloc| alloc["ID"] == alloc_id.as_str() && alloc["ClientStatus"] == "complete")
    });
    wait_for("the task's process to end", LIMIT, || {
        pids_with_cmdline(&marker).is_empty().then_some(())
    });

    drop(client);
    kill_tasks_of_allocs(&[alloc_id]);
}

#[test]
fn a_client_without_a_server_address_refuses_to_start() {
    let output = std::process::Command::new(support::drover_bin())
        .args(["agent", "-client", "-data-dir=/nonexistent/drover-test"])
        .output()
        .expect("drover runs");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("client.servers"), "{stderr}");
}

/// A job of `count` tiny raw_exec allocations, as JSON for `PUT /v1/jobs`.
fn fleet_job(job_id: &str, count: u32) -> String {
    json!({
        "Job": {
            "ID": job_id,
            "Name": job_id,
            "Type": "service",
            "Datacenters": ["dc1"],
            "TaskGroups": [{
                "Name": "g",
                "Count": count,
                "Tasks": [{
                    "Name": "t",
                    "Driver": "raw_exec",
                    "Config": {"command": "/bin/true"},
                    "Resources": {"CPU": 10, "MemoryMB": 10}
                }]
            }]
        }
    })
    .to_string()
}

fn status_counts(allocs: &[Value]) -> (usize, usize) {
    let running = allocs
        .iter()
        .filter(|alloc| alloc["ClientStatus"] == "running")
        .count();
    let complete = allocs
        .iter()
        .filter(|alloc| alloc["ClientStatus"] == "complete")
        .count();
    (running, complete)
}

#[test]
fn simulated_nodes_over_http_run_every_alloc_and_stop_them() {
    const NODES: usize = 20;
    const ALLOCS: u32 = 40;
    let temp = tempfile::tempdir().expect("temp dir");
    let data = temp.path().join("server").join("data");
    let config = agent_config(&data, "server.hcl", "client {\n  enabled = false\n}\n");
    let server = Agent::start_server(&data, &[&format!("-config={config}")]);
    let server_addr = server.address.trim_start_matches("http://").to_owned();

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let clients = runtime.block_on(async {
        let conn = Arc::new(
            HttpServerConn::new(HttpServerConnConfig::new(vec![server_addr.clone()]))
                .expect("connection"),
        );
        let clock: SharedClock = Arc::new(SystemClock);
        let mut clients = Vec::new();
        for number in 0..NODES {
            let timing = SimRunnerTiming {
                start_delay: Duration::from_millis(10),
                run_for: None,
            };
            let client = start_simulated_node(
                Arc::clone(&conn),
                number,
                timing,
                Arc::clone(&clock),
                |_| {},
            )
            .await
            .expect("simulated node starts");
            clients.push(client);
        }
        for client in &clients {
            tokio::time::timeout(LIMIT, client.wait_registered())
                .await
                .expect("every simulated node registers over HTTP");
        }
        clients
    });
    let nodes = server.get_json("/v1/nodes");
    let nodes = nodes.as_array().expect("node list");
    assert_eq!(
        nodes.len(),
        NODES,
        "only the simulated nodes: the server runs no client"
    );
    assert!(nodes.iter().all(|node| node["Status"] == "ready"));

    let (status, body) = http(
        "PUT",
        &server.url("/v1/jobs"),
        Some(&fleet_job("fleet", ALLOCS)),
    );
    assert_eq!(status, 200, "{body}");
    let allocs = wait_for("every alloc to run on a simulated node", LIMIT, || {
        let allocs = job_allocs(&server, "fleet");
        (allocs.len() == ALLOCS as usize && status_counts(&allocs).0 == ALLOCS as usize)
            .then_some(allocs)
    });
    let node_ids: std::collections::BTreeSet<&str> = nodes
        .iter()
        .filter_map(|node| node["ID"].as_str())
        .collect();
    assert!(
        allocs
            .iter()
            .all(|alloc| node_ids.contains(alloc["NodeID"].as_str().unwrap_or_default())),
        "every alloc is on a simulated node"
    );
    let held: usize = clients.iter().map(|client| client.alloc_ids().len()).sum();
    assert_eq!(
        held, ALLOCS as usize,
        "the simulated nodes hold every alloc"
    );

    let (status, body) = http("DELETE", &server.url("/v1/job/fleet"), None);
    assert_eq!(status, 200, "{body}");
    wait_for("every alloc to complete", LIMIT, || {
        let allocs = job_allocs(&server, "fleet");
        (status_counts(&allocs).1 == ALLOCS as usize).then_some(())
    });

    runtime.block_on(async {
        for client in clients {
            client.shutdown().await;
        }
    });
}

/// A server agent started directly (the harness always picks port 0; a restarted server must
/// come back on the port its clients know).
struct ServerProcess {
    child: std::process::Child,
}

impl ServerProcess {
    fn start(data_dir: &std::path::Path, config: &str, port: u16) -> ServerProcess {
        use std::io::{BufRead, BufReader};
        let mut child = std::process::Command::new(support::drover_bin())
            .args(["agent", "-server", "-bind=127.0.0.1"])
            .arg(format!("-data-dir={}", data_dir.display()))
            .arg(format!("-config={config}"))
            .arg(format!("-http-port={port}"))
            .env("RUST_LOG", "warn")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .expect("server agent starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line.contains("HTTP API listening") {
                    let _ = started_tx.send(());
                }
            }
        });
        started_rx
            .recv_timeout(LIMIT)
            .expect("the server agent starts listening");
        ServerProcess { child }
    }

    fn terminate(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        wait_for("the server agent to exit", LIMIT, || {
            self.child.try_wait().ok().flatten()
        });
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.terminate();
        }
    }
}

#[test]
fn a_remote_client_rides_out_a_server_restart_and_reports_to_the_new_server() {
    let temp = tempfile::tempdir().expect("temp dir");
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("address").port()
    };
    let server_addr = format!("127.0.0.1:{port}");
    let server_url = format!("http://{server_addr}");
    let server_data = temp.path().join("server").join("data");
    let server_config = agent_config(
        &server_data,
        "server.hcl",
        "client {\n  enabled = false\n}\n",
    );
    let mut server = ServerProcess::start(&server_data, &server_config, port);

    let client_data = temp.path().join("client").join("data");
    let client_config = agent_config(&client_data, "client.hcl", "name = \"remote-node\"\n");
    let client = Agent::start_with(
        &client_data,
        &[
            "-client",
            &format!("-servers={server_addr}"),
            &format!("-config={client_config}"),
        ],
    );
    let get = |path: &str| -> Option<Value> {
        let (status, body) = http("GET", &format!("{server_url}{path}"), None);
        (status == 200)
            .then(|| serde_json::from_str(&body).ok())
            .flatten()
    };
    wait_for("the remote node to be ready", LIMIT, || {
        get("/v1/nodes")?
            .as_array()?
            .iter()
            .any(|node| node["Status"] == "ready")
            .then_some(())
    });

    let marker = format!("restart-marker-{}", std::process::id());
    let job = json!({"Job": {
        "ID": "steady", "Name": "steady", "Type": "service", "Datacenters": ["dc1"],
        "TaskGroups": [{"Name": "app", "Count": 1, "Tasks": [{
            "Name": "server", "Driver": "raw_exec",
            "Config": {"command": "/bin/sh", "args": ["-c", format!("echo {marker}; sleep 3600")]},
            "Resources": {"CPU": 50, "MemoryMB": 32}
        }]}]
    }});
    let (status, body) = http(
        "PUT",
        &format!("{server_url}/v1/jobs"),
        Some(&job.to_string()),
    );
    assert_eq!(status, 200, "{body}");
    let running_alloc = || {
        get("/v1/job/steady/allocations")?
            .as_array()?
            .iter()
            .find(|alloc| alloc["ClientStatus"] == "running")
            .and_then(|alloc| alloc["ID"].as_str().map(str::to_owned))
    };
    let alloc_id = wait_for("the alloc to run", LIMIT, running_alloc);
    let pids_before = wait_for("the task's process", LIMIT, || {
        Some(pids_with_cmdline(&marker)).filter(|pids| !pids.is_empty())
    });

    // The server goes away and comes back on the same data dir and port.
    server.terminate();
    let mut server = ServerProcess::start(&server_data, &server_config, port);

    wait_for(
        "the node to beat again on the restarted server",
        LIMIT,
        || {
            get("/v1/nodes")?
                .as_array()?
                .iter()
                .any(|node| node["Status"] == "ready")
                .then_some(())
        },
    );
    assert!(
        pids_before.iter().all(|pid| support::process_alive(*pid)),
        "the task ran on through the server's restart"
    );
    // A status report after the restart reaches the new server process: restart the task
    // through the remote agent and see the restart recorded on the server.
    let (status, body) = http(
        "PUT",
        &client.url(&format!("/v1/client/allocation/{alloc_id}/restart")),
        Some("{}"),
    );
    assert_eq!(status, 200, "{body}");
    wait_for(
        "the restart to be reported to the new server",
        LIMIT,
        || {
            let alloc = get(&format!("/v1/allocation/{alloc_id}"))?;
            let restarts = alloc["TaskStates"]["server"]["Restarts"].as_u64()?;
            (restarts >= 1 && alloc["ClientStatus"] == "running").then_some(())
        },
    );
    assert_eq!(
        running_alloc().as_deref(),
        Some(alloc_id.as_str()),
        "the same alloc runs; nothing was rescheduled"
    );
    let allocs = get("/v1/job/steady/allocations").expect("alloc list");
    assert_eq!(allocs.as_array().map(Vec::len), Some(1), "{allocs}");
    assert!(
        pids_before.iter().all(|pid| !support::process_alive(*pid)),
        "the user restart replaced the task's process"
    );

    let (status, body) = http("DELETE", &format!("{server_url}/v1/job/steady"), None);
    assert_eq!(status, 200, "{body}");
    wait_for("the alloc to complete", LIMIT, || {
        let alloc = get(&format!("/v1/allocation/{alloc_id}"))?;
        (alloc["ClientStatus"] == "complete").then_some(())
    });
    wait_for("the task's process to end", LIMIT, || {
        pids_with_cmdline(&marker).is_empty().then_some(())
    });
    drop(client);
    server.terminate();
    kill_tasks_of_allocs(&[alloc_id]);
}

/// A server agent that also runs a client (`server-node`, data dir `<temp>/server/data`) and
/// a client-only agent (`remote-node`, `<temp>/client/data`) registered with it; answers both
/// and the remote node's ID. With `dead_server_first`, the client's first server address has
/// nothing listening: its calls must pass to the next one.
fn server_and_remote_client(
    temp: &std::path::Path,
    dead_server_first: bool,
) -> (Agent, Agent, String) {
    let server_data = temp.join("server").join("data");
    let server_config = agent_config(
        &server_data,
        "server.hcl",
        "name = \"server-node\"\ntelemetry {\n  prometheus_metrics = true\n}\n",
    );
    let server = Agent::start_with(&server_data, &[&format!("-config={server_config}")]);
    let mut server_addr = server.address.trim_start_matches("http://").to_owned();
    if dead_server_first {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let dead_addr = listener.local_addr().expect("address").to_string();
        drop(listener);
        server_addr = format!("{dead_addr},{server_addr}");
    }
    let client_data = temp.join("client").join("data");
    let client_config = agent_config(
        &client_data,
        "client.hcl",
        "name = \"remote-node\"\nserver {\n  enabled = false\n}\n",
    );
    let client = Agent::start_with(
        &client_data,
        &[
            "-client",
            &format!("-servers={server_addr}"),
            &format!("-config={client_config}"),
        ],
    );
    let remote_node_id = wait_for("both nodes to be ready on the server", LIMIT, || {
        let nodes = server.get_json("/v1/nodes");
        let nodes = nodes.as_array().cloned().unwrap_or_default();
        let ready = nodes
            .iter()
            .filter(|node| node["Status"] == "ready")
            .count();
        let remote = nodes.iter().find(|node| node["Name"] == "remote-node")?;
        (ready == 2).then(|| remote["ID"].as_str().map(str::to_owned))?
    });
    (server, client, remote_node_id)
}

/// Job `job_id`, one raw_exec task `server` running `sleep 3600` (with `marker` in its
/// command line), placed on the node named `remote-node` only.
fn remote_sleeper_job(job_id: &str, marker: &str) -> String {
    json!({"Job": {
        "ID": job_id, "Name": job_id, "Type": "service", "Datacenters": ["dc1"],
        "TaskGroups": [{
            "Name": "app", "Count": 1,
            "Constraints": [{
                "LTarget": "${node.unique.name}", "RTarget": "remote-node", "Operand": "="
            }],
            "Tasks": [{
                "Name": "server", "Driver": "raw_exec",
                "Config": {"command": "/bin/sh", "args": ["-c", format!("sleep 3600; echo {marker}")]},
                "Resources": {"CPU": 50, "MemoryMB": 32}
            }]
        }]
    }})
    .to_string()
}

#[test]
fn a_server_forwards_alloc_exec_to_the_node_holding_the_allocation() {
    use support::{
        exec_url, exec_websocket_close, exec_websocket_outcome, exec_websocket_refusal,
        exec_websocket_session,
    };
    let temp = tempfile::tempdir().expect("temp dir");
    let (server, client, remote_node_id) = server_and_remote_client(temp.path(), false);
    let marker = format!("exec-forward-task-{}", std::process::id());
    let (status, body) = http(
        "PUT",
        &server.url("/v1/jobs"),
        Some(&remote_sleeper_job("remote-exec", &marker)),
    );
    assert_eq!(status, 200, "{body}");
    let alloc = wait_for("the alloc to run on the remote node", LIMIT, || {
        job_allocs(&server, "remote-exec")
            .into_iter()
            .find(|alloc| alloc["ClientStatus"] == "running")
    });
    let alloc_id = alloc["ID"].as_str().expect("alloc ID").to_owned();
    assert_eq!(alloc["NodeID"], remote_node_id.as_str());
    let task_pid = wait_for("the task's process", LIMIT, || {
        pids_with_cmdline(&marker).first().copied()
    });

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    // The websocket goes to the server agent, which does not hold the allocation.
    let echoed = runtime.block_on(exec_websocket_outcome(
        &exec_url(&server.address, &alloc_id, &["/bin/echo", "hi"], false),
        vec![],
    ));
    assert_eq!(echoed.stdout, "hi\n", "{echoed:?}");
    assert_eq!(echoed.exit_code, 0, "{echoed:?}");
    assert_eq!(
        echoed.close_code,
        Some(1000),
        "the node's close frame comes through"
    );
    let (_, exit_code) = runtime.block_on(exec_websocket_session(
        &server.address,
        &alloc_id,
        &["/bin/sh", "-c", "exit 7"],
        false,
        vec![],
    ));
    assert_eq!(exit_code, 7);
    // Input goes the other way, and the command runs on the remote node, in its alloc dir.
    let stdin = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, "through\n");
    let (stdout, exit_code) = runtime.block_on(exec_websocket_session(
        &server.address,
        &alloc_id,
        &["/bin/sh", "-c", "read line; echo $line; pwd"],
        false,
        vec![
            json!({"stdin": {"data": stdin}}),
            json!({"stdin": {"close": true}}),
        ],
    ));
    assert_eq!(exit_code, 0, "{stdout}");
    let mut lines = stdout.lines();
    assert_eq!(lines.next(), Some("through"), "{stdout}");
    let task_dir = client.data_dir.join("alloc").join(&alloc_id).join("server");
    assert_eq!(
        lines.next().map(std::path::PathBuf::from),
        Some(task_dir),
        "{stdout}"
    );

    // An unknown allocation is refused inside the websocket, as Nomad's; the remote node's own
    // refusal of a request without a command comes back as an HTTP answer without an upgrade.
    let unknown = "00000000-0000-0000-0000-000000000000";
    let (code, reason) = runtime.block_on(exec_websocket_close(&exec_url(
        &server.address,
        unknown,
        &["/bin/true"],
        false,
    )));
    assert_eq!(code, 1008, "{reason}");
    assert!(reason.contains("Unknown allocation"), "{reason}");
    let (status, body) = runtime.block_on(exec_websocket_refusal(&exec_url(
        &server.address,
        &alloc_id,
        &[],
        false,
    )));
    assert_eq!((status, body.as_str()), (400, "command is not present"));
    // A plain request (no upgrade) is passed on as one, and the node refuses it.
    let (status, body) = http(
        "GET",
        &exec_url(&server.address, &alloc_id, &["/bin/true"], false).replacen("ws", "http", 1),
        None,
    );
    assert_eq!(
        (status, body.as_str()),
        (400, "exec needs a websocket connection")
    );
    // An error after the upgrade is the node's close frame, code and reason as they were.
    let unknown_task = exec_url(&server.address, &alloc_id, &["/bin/true"], false)
        .replace("task=server", "task=nope");
    let (close_code, reason) = runtime.block_on(exec_websocket_close(&unknown_task));
    assert_eq!(close_code, 1008, "{reason}");
    assert!(reason.contains("nope"), "{reason}");

    // The CLI pointed at the server runs commands in the remote task too.
    let output = server.cli(&["alloc", "exec", &alloc_id, "/bin/echo", "hi"]);
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "hi\n",
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(output.status.code(), Some(0));
    let output = server.cli(&["alloc", "exec", &alloc_id, "/bin/sh", "-c", "exit 7"]);
    assert_eq!(output.status.code(), Some(7));

    // A caller that goes away takes the remote command with it; the task lives on.
    let dropped_marker = format!("exec-forward-dropped-{}", std::process::id());
    let script = format!("sleep 300; echo {dropped_marker}");
    let mut caller = std::process::Command::new(support::drover_bin())
        .args(["alloc", "exec", &alloc_id, "/bin/sh", "-c", &script])
        .env("NOMAD_ADDR", &server.address)
        .stdin(std::process::Stdio::null())
        .spawn()
        .expect("the CLI starts");
    wait_for("the exec'd command on the remote node", LIMIT, || {
        (!pids_with_cmdline(&dropped_marker).is_empty()).then_some(())
    });
    caller.kill().expect("kill the CLI");
    caller.wait().expect("reap the CLI");
    wait_for("the exec'd command to be ended", LIMIT, || {
        pids_with_cmdline(&dropped_marker).is_empty().then_some(())
    });
    assert!(support::process_alive(task_pid), "the task runs on");

    // Once the job is stopped and the remote node is gone, the server names the node it
    // cannot reach.
    let (status, body) = http("DELETE", &server.url("/v1/job/remote-exec"), None);
    assert_eq!(status, 200, "{body}");
    wait_for("the task's process to end", LIMIT, || {
        pids_with_cmdline(&marker).is_empty().then_some(())
    });
    let client_addr = client.address.trim_start_matches("http://").to_owned();
    drop(client);
    let (status, body) = runtime.block_on(exec_websocket_refusal(&exec_url(
        &server.address,
        &alloc_id,
        &["/bin/true"],
        false,
    )));
    assert_eq!(status, 502, "{body}");
    assert!(body.contains(&client_addr), "{body}");
    kill_tasks_of_allocs(&[alloc_id]);
}

#[test]
fn a_client_only_agent_has_its_tasks_identities_signed_by_its_server() {
    let temp = tempfile::tempdir().expect("temp dir");
    let (server, client, _node_id) = server_and_remote_client(temp.path(), false);
    let mut job: Value =
        serde_json::from_str(&remote_sleeper_job("remoteid", "remote-id")).unwrap();
    job["Job"]["TaskGroups"][0]["Tasks"][0]["Identity"] = json!({"File": true});
    let (status, answer) = http("PUT", &server.url("/v1/jobs"), Some(&job.to_string()));
    assert_eq!(status, 200, "{answer}");
    let alloc_id = wait_for("the remote alloc to run", LIMIT, || {
        let alloc = job_allocs(&server, "remoteid").first()?.clone();
        assert_ne!(alloc["ClientStatus"], "failed", "{alloc}");
        (alloc["ClientStatus"] == "running").then(|| alloc["ID"].as_str().unwrap().to_owned())
    });
    let token_file = client
        .data_dir
        .join("alloc")
        .join(&alloc_id)
        .join("server/secrets/nomad_token");
    let token = wait_for("the token file", LIMIT, || {
        std::fs::read_to_string(&token_file).ok()
    });
    // The server takes it as the task's identity: its own job's variables path answers 404
    // (no such variable yet), another job's is refused.
    let request = |path: &str| {
        use std::io::{Read, Write};
        let host = server.address.trim_start_matches("http://").to_owned();
        let mut stream = std::net::TcpStream::connect(&host).unwrap();
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nX-Nomad-Token: {token}\r\n\r\n"
        )
        .unwrap();
        let mut raw = String::new();
        stream.read_to_string(&mut raw).unwrap();
        raw.split_whitespace()
            .nth(1)
            .unwrap()
            .parse::<u16>()
            .unwrap()
    };
    assert_eq!(request("/v1/var/nomad/jobs/remoteid"), 404);
    assert_eq!(request("/v1/var/nomad/jobs/other"), 403);
    // A wrong node secret has nothing signed.
    let node_id = client.get_json("/v1/agent/self")["stats"]["client"]["node_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let body = json!({"NodeSecretID": "not-the-secret", "Identities": [
        {"AllocID": alloc_id, "TaskName": "server", "IdentityName": "default"}
    ]});
    let (status, _) = http(
        "PUT",
        &server.url(&format!("/v1/internal/node/{node_id}/sign-identities")),
        Some(&body.to_string()),
    );
    assert_eq!(status, 403);
    let (status, _) = http("DELETE", &server.url("/v1/job/remoteid?purge=true"), None);
    assert_eq!(status, 200);
    wait_for("the remote task to stop", LIMIT, || {
        pids_with_cmdline("remote-id").is_empty().then_some(())
    });
}

/// The server's count of `GET /v1/service/<name>` answers (Nomad's
/// `nomad.nomad.service_registration.get_service` timing), 0 before the first.
fn service_reads(server: &Agent) -> u64 {
    let (status, text) = http("GET", &server.url("/v1/metrics?format=prometheus"), None);
    assert_eq!(status, 200, "{text}");
    text.lines()
        .find_map(|line| {
            line.strip_prefix("nomad_nomad_service_registration_get_service_count")
                .filter(|rest| rest.starts_with(['{', ' ']))
                .and_then(|rest| rest.split_whitespace().last()?.parse::<f64>().ok())
        })
        .map_or(0, |count| count as u64)
}

#[test]
fn a_remote_clients_template_follows_the_catalog_through_blocking_queries() {
    let temp = tempfile::tempdir().expect("temp dir");
    let (server, client, _node_id) = server_and_remote_client(temp.path(), false);
    let name = format!("blocking-{}", std::process::id());
    // A template on the remote node reads a service nothing has registered yet; its own
    // `wait` of zero writes changes at once (the client's default would hold them 5s).
    let (_dir, consumer) = write_jobspec(
        "consumer.hcl",
        &r#"
job "consumer" {
  group "g" {
    constraint {
      attribute = "${node.unique.name}"
      value     = "remote-node"
    }
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/sleep"
        args    = ["3600"]
      }
      template {
        data        = "{{ range nomadService \"NAME\" }}{{ .Address }}:{{ .Port }}\n{{ end }}"
        destination = "local/out"
        change_mode = "noop"
        wait {
          min = "0s"
          max = "0s"
        }
      }
    }
  }
}
"#
        .replace("NAME", &name),
    );
    server.cli_ok(&["job", "run", "-detach", &consumer.to_string_lossy()]);
    let alloc_id = wait_for("the consumer to run", LIMIT, || {
        job_allocs(&server, "consumer")
            .into_iter()
            .find(|alloc| alloc["ClientStatus"] == "running")
            .and_then(|alloc| alloc["ID"].as_str().map(str::to_owned))
    });
    let out = client
        .data_dir
        .join("alloc")
        .join(&alloc_id)
        .join("t/local/out");
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        "",
        "nothing registered yet"
    );

    // While nothing changes, the template's query waits on the server: no reads complete.
    let before = service_reads(&server);
    assert!(before >= 1, "the template's first read is counted");
    std::thread::sleep(Duration::from_secs(3));
    let quiet = service_reads(&server);
    assert_eq!(
        quiet, before,
        "no per-second reads while the catalog is unchanged"
    );

    let (_dir2, provider) = write_jobspec(
        "provider.hcl",
        &r#"
job "provider" {
  group "web" {
    network {
      port "http" {}
    }
    service {
      name     = "NAME"
      port     = "http"
      provider = "nomad"
    }
    task "server" {
      driver = "raw_exec"
      config {
        command = "/bin/sleep"
        args    = ["3600"]
      }
    }
  }
}
"#
        .replace("NAME", &name),
    );
    server.cli_ok(&["job", "run", "-detach", &provider.to_string_lossy()]);
    let registered = wait_for("the registration", LIMIT, || {
        // Read through the job's services: this test's reads are not the template's.
        let services = server.get_json("/v1/job/provider/services");
        let service = services.as_array()?.first()?.clone();
        Some(format!(
            "{}:{}\n",
            service["Address"].as_str()?,
            service["Port"]
        ))
    });
    let seen = std::time::Instant::now();
    wait_for("the template to render the registration", LIMIT, || {
        (std::fs::read_to_string(&out).ok()? == registered).then_some(())
    });
    let followed = seen.elapsed();
    eprintln!("registration to rendered file: {followed:?}");
    assert!(followed < Duration::from_secs(5), "{followed:?}");
    // The change answered the one waiting query; the next one waits again.
    let after = service_reads(&server);
    assert!(
        after > quiet && after <= quiet + 3,
        "one answer per change, not polling: {quiet} then {after}"
    );
    kill_tasks_of_allocs(
        &job_allocs(&server, "consumer")
            .iter()
            .chain(job_allocs(&server, "provider").iter())
            .filter_map(|alloc| alloc["ID"].as_str().map(str::to_owned))
            .collect::<Vec<_>>(),
    );
}

#[test]
fn a_client_given_no_live_server_joins_the_one_set_through_agent_servers() {
    let temp = tempfile::tempdir().expect("temp dir");
    let server_data = temp.path().join("server").join("data");
    let server_config = agent_config(
        &server_data,
        "server.hcl",
        "client {\n  enabled = false\n}\n",
    );
    let server = Agent::start_server(&server_data, &[&format!("-config={server_config}")]);
    let server_addr = server.address.trim_start_matches("http://").to_owned();
    let dead_addr = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("address").to_string()
    };
    let client_data = temp.path().join("client").join("data");
    let client_config = agent_config(
        &client_data,
        "client.hcl",
        "name = \"lost-node\"\nserver {\n  enabled = false\n}\n",
    );
    let client = Agent::start_with(
        &client_data,
        &[
            "-client",
            &format!("-servers={dead_addr}"),
            &format!("-config={client_config}"),
        ],
    );
    assert_eq!(client.get_json("/v1/agent/servers"), json!([dead_addr]));
    assert_eq!(
        client.cli_ok(&["node", "config", "-servers"]),
        format!("{dead_addr}\n")
    );
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        server.get_json("/v1/nodes"),
        json!([]),
        "nothing reached the server"
    );

    // A list with an address the client cannot use is refused whole, naming the address.
    let (status, body) = http(
        "PUT",
        &client.url(&format!(
            "/v1/agent/servers?address={server_addr}&address=https://{server_addr}"
        )),
        None,
    );
    assert_eq!(status, 400, "{body}");
    assert!(body.contains(&format!("https://{server_addr}")), "{body}");
    assert_eq!(client.get_json("/v1/agent/servers"), json!([dead_addr]));
    let (status, body) = http("PUT", &client.url("/v1/agent/servers"), None);
    assert_eq!((status, body.as_str()), (400, "missing server address"));

    let refused = client.cli(&["node", "config", "-update-servers"]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("at least one server argument"),
        "{refused:?}"
    );

    // Nomad's `node config -update-servers`: the client registers with the server it is given.
    assert_eq!(
        client.cli_ok(&["node", "config", "-update-servers", &server_addr]),
        "Updated server list\n"
    );
    assert_eq!(client.get_json("/v1/agent/servers"), json!([server_addr]));
    wait_for(
        "the node to register with the server it was given",
        LIMIT,
        || {
            server
                .get_json("/v1/nodes")
                .as_array()?
                .iter()
                .any(|node| node["Name"] == "lost-node" && node["Status"] == "ready")
                .then_some(())
        },
    );
    // The server agent runs no client: there is no list of its own to set.
    let (status, _) = http(
        "PUT",
        &server.url(&format!("/v1/agent/servers?address={server_addr}")),
        None,
    );
    assert_eq!(status, 501);
}
