//! End to end: Nomad's deprecated task-level network (`resources { network { … } }`) through
//! the real agent and CLI — `job run` prints Nomad's deprecation warning, the scheduler gives the
//! task a port on the node's network (in the allocation where Nomad puts it, and in
//! `alloc status`), the task serves HTTP on its `NOMAD_PORT_<label>`, a sibling task sees it as
//! `NOMAD_ADDR_<task>_<label>`, and a service naming the label is registered there.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod support;

use std::time::Duration;

use serde_json::Value;
use support::{Agent, http, wait_for, write_jobspec};

const LIMIT: Duration = Duration::from_secs(60);

/// Whether an HTTP server answers `GET /` on `address` with a 200.
fn answers(address: &str) -> bool {
    use std::io::{Read, Write};
    let Ok(socket) = address.parse() else {
        return false;
    };
    let Ok(mut stream) = std::net::TcpStream::connect_timeout(&socket, Duration::from_secs(2))
    else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    if write!(stream, "GET / HTTP/1.0\r\nHost: {address}\r\n\r\n").is_err() {
        return false;
    }
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response.starts_with("HTTP/1.0 200") || response.starts_with("HTTP/1.1 200")
}

#[test]
fn a_raw_exec_task_serves_on_its_task_network_port_and_job_run_warns() {
    let agent = Agent::start_dev();
    let service = format!("e2e-tasknet-{}", std::process::id());
    let jobspec = format!(
        r#"
job "tasknet" {{
  group "web" {{
    task "server" {{
      driver = "raw_exec"
      config {{
        command = "python3"
        args    = ["-m", "http.server", "${{NOMAD_PORT_http}}", "--bind", "${{NOMAD_IP_http}}"]
      }}
      resources {{
        network {{
          mbits = 10
          port "http" {{}}
        }}
      }}
      service {{
        name     = "{service}"
        port     = "http"
        provider = "nomad"
      }}
    }}
    task "probe" {{
      driver = "raw_exec"
      config {{
        command = "/bin/sh"
        args    = ["-c", "echo \"$NOMAD_ADDR_server_http\" > \"$NOMAD_ALLOC_DIR/sibling\"; exec sleep 3600"]
      }}
    }}
  }}
}}
"#
    );
    let (_dir, path) = write_jobspec("tasknet.hcl", &jobspec);
    let output = agent.cli_ok(&["job", "run", "-detach", &path.to_string_lossy()]);
    assert!(
        output.contains(
            "Job Warnings:\n1 warning:\n\n* Group \"web\" has warnings: 1 error occurred:\n\t* \
             Task \"server\" has warnings: 1 error occurred:\n\t* task network resources have \
             been deprecated as of Nomad 0.12.0. Please configure networking via group network \
             block.\n"
        ),
        "{output}"
    );

    let alloc_id = wait_for("a running alloc of tasknet", LIMIT, || {
        let allocs = agent.get_json("/v1/job/tasknet/allocations");
        let first = allocs.as_array()?.first()?.clone();
        (first["ClientStatus"] == "running").then(|| first["ID"].as_str().unwrap().to_owned())
    });
    let alloc = agent.get_json(&format!("/v1/allocation/{alloc_id}"));
    let network = &alloc["AllocatedResources"]["Tasks"]["server"]["Networks"][0];
    assert_eq!(network["Device"], "lo", "{network}");
    assert_eq!(network["IP"], "127.0.0.1", "{network}");
    assert_eq!(network["MBits"], 10, "{network}");
    let port = &network["DynamicPorts"][0];
    assert_eq!(port["Label"], "http");
    let host_port = port["Value"].as_i64().unwrap();
    assert!((20_000..=32_000).contains(&host_port), "{port}");
    assert_eq!(
        alloc["TaskResources"]["server"]["Networks"][0], *network,
        "the legacy task resources carry the same network"
    );
    let probe_networks = &alloc["AllocatedResources"]["Tasks"]["probe"]["Networks"];
    assert!(
        probe_networks.as_array().is_none_or(Vec::is_empty),
        "a task without a network of its own got one: {probe_networks}"
    );

    let address = format!("127.0.0.1:{host_port}");
    wait_for("the task to answer on its task network port", LIMIT, || {
        answers(&address).then_some(())
    });

    let status = agent.cli_ok(&["alloc", "status", &alloc_id]);
    assert!(status.contains(&format!("http: {address}")), "{status}");

    // The sibling task was given the server's address.
    let sibling = wait_for("the sibling's env file", LIMIT, || {
        let (code, body) = http(
            "GET",
            &agent.url(&format!("/v1/client/fs/cat/{alloc_id}?path=alloc/sibling")),
            None,
        );
        (code == 200 && !body.trim().is_empty()).then_some(body)
    });
    assert_eq!(sibling.trim(), address);

    // A service naming the task network's label is registered on it.
    let registration = wait_for("the service in the catalog", LIMIT, || {
        let (code, body) = http("GET", &agent.url(&format!("/v1/service/{service}")), None);
        let found: Value = serde_json::from_str(&body).ok()?;
        (code == 200 && found.as_array()?.len() == 1).then(|| found[0].clone())
    });
    assert_eq!(registration["Address"], "127.0.0.1");
    assert_eq!(registration["Port"], host_port);

    agent.cli_ok(&["job", "stop", "-purge", "tasknet"]);
}
