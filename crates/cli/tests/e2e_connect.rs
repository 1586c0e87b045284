//! End to end: a Connect job in a bridge group, with real CNI plugins, namespaces and
//! iptables. At register the job gets the sidecar task `connect-proxy-count-api` (kind,
//! lifecycle, driver, resources as Nomad injects them) and the port `connect-proxy-count-api`;
//! on the client the sidecar's task dir holds its proxy config (`secrets/connect-proxy.json`,
//! naming the ports inside the namespace, the upstream, the task API socket and the identity
//! file) and its workload identity (`secrets/nomad_token`); its logs come through `alloc logs`
//! from the agent's own binary run as `connect-proxy -config <file>`; every task of the group
//! has `NOMAD_UPSTREAM_*`; the catalog holds `count-api-sidecar-proxy` at the node's address
//! and the host port of the sidecar's listener until the job stops, and nothing of the
//! allocation's network is left after it.
//! The sidecar process (`drover connect-proxy`, crates/mesh) runs in the group's namespace
//! with the task API socket as its agent socket.
//!
//! Root only. Under `CI=true` a missing plugin or iptables fails the tests instead of skipping
//! them. The tests run one at a time on a bridge of their own (`drvconn0`, 10.252.41.0/24, the
//! client's `bridge_network_name` and `bridge_network_subnet`), so another test file counting
//! the ports of the default `nomad` bridge never sees theirs.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod support;

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use serde_json::Value;
use support::{Agent, wait_for, write_jobspec};

const LIMIT: Duration = Duration::from_secs(120);
const NETNS_DIR: &str = "/var/run/netns";

static SERIAL: Mutex<()> = Mutex::new(());

/// Whether the test can run: root, the plugins and iptables. Under CI a missing one fails.
fn prerequisites() -> bool {
    support::group_network_prerequisites("connect tests", &[])
}

const JOB: &str = r#"
job "countdash" {
  datacenters = ["dc1"]

  group "api" {
    network {
      mode = "bridge"
      port "http" {
        to = 9001
      }
    }

    service {
      name = "count-api"
      port = "http"

      connect {
        sidecar_service {
          proxy {
            upstreams {
              destination_name = "count-db"
              local_bind_port  = 8080
            }
          }
        }

        sidecar_task {
          env {
            PROXY_LOG = "debug"
          }
          resources {
            memory = 64
          }
        }
      }
    }

    task "server" {
      driver       = "raw_exec"
      kill_timeout = "2s"

      config {
        command = "/bin/sh"
        args    = ["-c", "env > $NOMAD_TASK_DIR/env && readlink /proc/self/ns/net > $NOMAD_TASK_DIR/netns && exec sleep 600"]
      }

      resources {
        cpu    = 10
        memory = 32
      }
    }
  }
}
"#;

/// The bridge the tests' agents put their groups on; removed when the test ends.
const BRIDGE: &str = "drvconn0";

struct BridgeCleanup;

impl Drop for BridgeCleanup {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["link", "del", BRIDGE])
            .output();
    }
}

/// A dev agent whose bridge groups go on [`BRIDGE`]; its temp dir and the bridge's cleanup.
/// Declared in this order, the agent stops first, then the dir and the bridge go.
fn connect_agent() -> (Agent, tempfile::TempDir, BridgeCleanup) {
    let temp = tempfile::tempdir().unwrap();
    let config = support::agent_config(
        temp.path(),
        "client.hcl",
        &format!(
            "client {{\n  bridge_network_name   = \"{BRIDGE}\"\n  bridge_network_subnet = \"10.252.41.0/24\"\n}}\n"
        ),
    );
    let agent = Agent::start_with(&temp.path().join("data"), &[&format!("-config={config}")]);
    (agent, temp, BridgeCleanup)
}

fn run_job(agent: &Agent) {
    let (_dir, path) = write_jobspec("countdash.hcl", JOB);
    agent.cli_ok(&["job", "run", "-detach", path.to_str().unwrap()]);
}

/// The job's allocation once its main task runs.
fn running_alloc(agent: &Agent) -> Value {
    let alloc = wait_for("a running countdash allocation", LIMIT, || {
        let allocs = agent.get_json("/v1/job/countdash/allocations");
        allocs
            .as_array()?
            .iter()
            .find(|alloc| alloc["TaskStates"]["server"]["State"] == "running")
            .cloned()
    });
    agent.get_json(&format!("/v1/allocation/{}", alloc["ID"].as_str().unwrap()))
}

fn task_dir(agent: &Agent, alloc_id: &str, task: &str) -> PathBuf {
    agent.data_dir.join("alloc").join(alloc_id).join(task)
}

fn wait_file(path: &Path) -> String {
    wait_for(&format!("{}", path.display()), LIMIT, || {
        std::fs::read_to_string(path)
            .ok()
            .filter(|text| !text.is_empty())
    })
}

fn sidecar_registrations(agent: &Agent) -> Vec<Value> {
    agent
        .get_json("/v1/service/count-api-sidecar-proxy")
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[test]
fn connect_job_gets_its_sidecar_config_identity_upstreams_and_registration() {
    if !prerequisites() {
        return;
    }
    let _serial = SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let (agent, _temp, _bridge) = connect_agent();
    run_job(&agent);

    // The job as registered: the injected sidecar task and port, as Nomad shows them.
    let job = agent.get_json("/v1/job/countdash");
    let group = &job["TaskGroups"][0];
    let sidecar = group["Tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|task| task["Name"] == "connect-proxy-count-api")
        .unwrap_or_else(|| panic!("no sidecar task in {group}"))
        .clone();
    assert_eq!(sidecar["Kind"], "connect-proxy:count-api");
    assert_eq!(sidecar["Driver"], "connect_proxy");
    assert_eq!(sidecar["Lifecycle"]["Hook"], "prestart");
    assert_eq!(sidecar["Lifecycle"]["Sidecar"], true);
    assert_eq!(sidecar["Resources"]["CPU"], 250);
    assert_eq!(sidecar["Resources"]["MemoryMB"], 64);
    assert_eq!(sidecar["Env"]["PROXY_LOG"], "debug");
    let ports = group["Networks"][0]["DynamicPorts"].as_array().unwrap();
    assert!(
        ports
            .iter()
            .any(|port| port["Label"] == "connect-proxy-count-api" && port["To"] == -1),
        "{ports:?}"
    );

    let alloc = running_alloc(&agent);
    let alloc_id = alloc["ID"].as_str().unwrap().to_string();
    let shared_ports = alloc["AllocatedResources"]["Shared"]["Ports"]
        .as_array()
        .unwrap()
        .clone();
    let proxy_port = shared_ports
        .iter()
        .find(|port| port["Label"] == "connect-proxy-count-api")
        .unwrap_or_else(|| panic!("no proxy port in {shared_ports:?}"))
        .clone();
    // Mapped to the same port inside the namespace.
    assert_eq!(proxy_port["To"], proxy_port["Value"], "{proxy_port}");
    let host_port = proxy_port["Value"].as_u64().unwrap();

    // Every task of the group has the upstream's address.
    let server_dir = task_dir(&agent, &alloc_id, "server");
    let env = wait_file(&server_dir.join("local/env"));
    assert!(
        env.lines()
            .any(|line| line == "NOMAD_UPSTREAM_ADDR_count_db=127.0.0.1:8080"),
        "{env}"
    );
    assert!(
        env.lines()
            .any(|line| line == "NOMAD_UPSTREAM_PORT_count_db=8080"),
        "{env}"
    );

    // The sidecar's config and identity, in its secrets dir.
    let sidecar_dir = task_dir(&agent, &alloc_id, "connect-proxy-count-api");
    let config: Value =
        serde_json::from_str(&wait_file(&sidecar_dir.join("secrets/connect-proxy.json"))).unwrap();
    assert_eq!(config["alloc_id"], alloc_id.as_str());
    assert_eq!(config["service"], "count-api");
    assert_eq!(config["namespace"], "default");
    assert_eq!(config["datacenter"], "dc1");
    assert_eq!(
        config["public_listener"],
        format!("0.0.0.0:{host_port}").as_str()
    );
    assert_eq!(config["local_service"], "127.0.0.1:9001");
    assert_eq!(config["upstreams"][0]["destination_name"], "count-db");
    assert_eq!(config["upstreams"][0]["local_bind_port"], 8080);
    assert_eq!(
        config["agent_socket"],
        sidecar_dir.join("secrets/api.sock").to_str().unwrap()
    );
    assert_eq!(
        config["identity_token_file"],
        sidecar_dir.join("secrets/nomad_token").to_str().unwrap()
    );
    let gateway = config["host_gateway"].as_str().unwrap_or_default();
    assert!(gateway.starts_with("10.252.41."), "{config}");
    let token = wait_file(&sidecar_dir.join("secrets/nomad_token"));
    assert_eq!(token.trim().split('.').count(), 3, "not a JWT: {token}");

    // The sidecar was started: the agent's own binary with `connect-proxy -config <file>`,
    // whose output comes through `alloc logs` like any task's.
    wait_for("the sidecar's first start", LIMIT, || {
        let state = &agent.get_json(&format!("/v1/allocation/{alloc_id}"))["TaskStates"]["connect-proxy-count-api"];
        state["Events"]
            .as_array()?
            .iter()
            .any(|event| event["Type"] == "Started")
            .then_some(())
    });

    let stderr_log = agent
        .data_dir
        .join("alloc")
        .join(&alloc_id)
        .join("alloc/logs/connect-proxy-count-api.stderr.0");
    wait_for("the sidecar's log file", LIMIT, || {
        stderr_log.exists().then_some(())
    });

    // The sidecar's catalog entry: the node's address and the host port of its listener.
    let registration = wait_for("count-api-sidecar-proxy in the catalog", LIMIT, || {
        sidecar_registrations(&agent).into_iter().next()
    });
    assert_eq!(registration["AllocID"], alloc_id.as_str());
    assert_eq!(registration["Port"], host_port);
    assert_eq!(registration["Address"], proxy_port["HostIP"]);

    // Stopped: the registration goes, and the namespace with it.
    agent.cli_ok(&["job", "stop", "-purge", "countdash"]);
    wait_for("the sidecar's registration removed", LIMIT, || {
        sidecar_registrations(&agent).is_empty().then_some(())
    });
    let netns = Path::new(NETNS_DIR).join(&alloc_id);
    wait_for("the allocation's namespace removed", LIMIT, || {
        (!netns.exists()).then_some(())
    });
}

#[test]
fn connect_sidecar_runs_in_the_groups_namespace_with_its_agent_socket() {
    if !prerequisites() {
        return;
    }
    let _serial = SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let (agent, _temp, _bridge) = connect_agent();
    run_job(&agent);
    let alloc = running_alloc(&agent);
    let alloc_id = alloc["ID"].as_str().unwrap().to_string();
    let server_netns = wait_file(&task_dir(&agent, &alloc_id, "server").join("local/netns"));
    let sidecar_dir = task_dir(&agent, &alloc_id, "connect-proxy-count-api");
    let config_path = sidecar_dir.join("secrets/connect-proxy.json");
    let pid = wait_for("the sidecar process", LIMIT, || {
        support::pids_with_cmdline(config_path.to_str().unwrap())
            .into_iter()
            .next()
    });
    let sidecar_netns = std::fs::read_link(format!("/proc/{pid}/ns/net")).unwrap();
    assert_eq!(sidecar_netns.to_str().unwrap(), server_netns.trim());
    assert!(sidecar_dir.join("secrets/api.sock").exists());
    let state = &agent.get_json(&format!("/v1/allocation/{alloc_id}"))["TaskStates"]["connect-proxy-count-api"];
    assert_eq!(state["State"], "running", "{state}");
    agent.cli_ok(&["job", "stop", "-purge", "countdash"]);
    // The agent is stopped when the test ends, and a stopped agent leaves its allocations be:
    // wait for the network to be torn down first.
    let netns = Path::new(NETNS_DIR).join(&alloc_id);
    wait_for("the allocation's namespace removed", LIMIT, || {
        (!netns.exists()).then_some(())
    });
}
