//! End to end, the mesh across nodes: a server agent and two client agents (`node-a`,
//! `node-b`) on one host, all bound to 127.0.0.1 (each its own process, data dir and port),
//! both clients putting their bridge groups on one shared bridge. A countdash-like job runs
//! its two `count-api` instances (a real HTTP server that listens on the namespace's
//! loopback only) on `node-a` and its dashboard on `node-b`:
//!
//! - the dashboard's task reaches `count-api` through its upstream, its own sidecar and the
//!   api's sidecar on the other node, and the answers show in its logs; new connections are
//!   balanced over both instances;
//! - the api sidecar's public port answers on the host (its default TCP check passes), but a
//!   plain TCP client gets nothing;
//! - an intention `count-dashboard → count-api` deny makes new connections fail within a
//!   second; allow restores them within a second;
//! - one of the two api instances stopped (`job scale`) while requests go on one after
//!   another: none fails but the one that may be in flight on it, and the rest go to the
//!   remaining instance;
//! - every allocation's network namespace is gone once the job stops, whichever client ran it.
//!
//! The test makes its own requests from inside the dashboard's network namespace (a thread
//! that joins it), as the dashboard's task does.
//!
//! Root only. Under `CI=true` a missing plugin, iptables or python3 fails the test instead of
//! skipping it. Its bridge (`drvmesh0`, 10.252.43.0/24) is its own, so tests on other bridges
//! run beside it.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use support::{Agent, agent_config, wait_for, write_jobspec};

const LIMIT: Duration = Duration::from_secs(120);
const NETNS_DIR: &str = "/var/run/netns";
const PYTHON: &str = "/usr/bin/python3";
/// The bridge both clients put their groups on, and its subnet.
const BRIDGE: &str = "drvmesh0";
const SUBNET: &str = "10.252.43.0/24";

/// Whether the test can run: root, the plugins, iptables and python3. Under CI a missing one
/// fails.
fn prerequisites() -> bool {
    support::group_network_prerequisites("connect cluster tests", &[(PYTHON, "python3")])
}

/// `count-api` answers its allocation's ID on 127.0.0.1:9001 inside its namespace (so only
/// its sidecar reaches it); the dashboard asks it through the upstream twice a second and
/// prints each answer.
const JOB: &str = r#"
job "countdash" {
  datacenters = ["dc1"]

  group "api" {
    count = 2

    constraint {
      attribute = "${node.unique.name}"
      value     = "node-a"
    }

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
        sidecar_service {}
      }
    }

    task "api" {
      driver       = "raw_exec"
      kill_timeout = "2s"

      config {
        command = "/bin/sh"
        args    = ["-c", "mkdir -p $NOMAD_TASK_DIR/www && cd $NOMAD_TASK_DIR/www && printf %s $NOMAD_ALLOC_ID > index.html && exec /usr/bin/python3 -m http.server 9001 --bind 127.0.0.1"]
      }

      resources {
        cpu    = 10
        memory = 64
      }
    }
  }

  group "dashboard" {
    constraint {
      attribute = "${node.unique.name}"
      value     = "node-b"
    }

    network {
      mode = "bridge"
      port "http" {
        to = 9002
      }
    }

    service {
      name = "count-dashboard"
      port = "http"

      connect {
        sidecar_service {
          proxy {
            upstreams {
              destination_name = "count-api"
              local_bind_port  = 8080
            }
          }
        }
      }
    }

    task "dashboard" {
      driver       = "raw_exec"
      kill_timeout = "2s"

      config {
        command = "/usr/bin/python3"
        args    = ["-u", "-c", <<EOF
import os, time, urllib.request
url = "http://" + os.environ["NOMAD_UPSTREAM_ADDR_count_api"] + "/"
while True:
    try:
        print("answer: " + urllib.request.urlopen(url, timeout=5).read().decode())
    except Exception as error:
        print("error: " + str(error))
    time.sleep(0.5)
EOF
        ]
      }

      resources {
        cpu    = 10
        memory = 64
      }
    }
  }
}
"#;

/// Removes the bridge when the test ends, and on a failure the namespaces the test saw
/// (the agents are gone by then and leave their allocations' networks be).
struct Cleanup {
    allocs: Vec<String>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if std::thread::panicking() {
            for alloc in &self.allocs {
                let _ = std::process::Command::new("ip")
                    .args(["netns", "del", alloc])
                    .output();
            }
        }
        let _ = std::process::Command::new("ip")
            .args(["link", "del", BRIDGE])
            .output();
    }
}

/// A server-only agent and the two client agents on [`BRIDGE`].
fn start_cluster(temp: &Path) -> (Agent, Agent, Agent) {
    let server_config = agent_config(
        &temp.join("server"),
        "server.hcl",
        "client {\n  enabled = false\n}\n",
    );
    let server = Agent::start_server(
        &temp.join("server").join("data"),
        &[&format!("-config={server_config}")],
    );
    let server_addr = server.address.trim_start_matches("http://").to_owned();
    let client = |name: &str| {
        let dir = temp.join(name);
        let config = agent_config(
            &dir,
            "client.hcl",
            &format!(
                "name = \"{name}\"\nserver {{\n  enabled = false\n}}\nclient {{\n  bridge_network_name   = \"{BRIDGE}\"\n  bridge_network_subnet = \"{SUBNET}\"\n}}\n"
            ),
        );
        Agent::start_with(
            &dir.join("data"),
            &[
                "-client",
                &format!("-servers={server_addr}"),
                &format!("-config={config}"),
            ],
        )
    };
    let node_a = client("node-a");
    let node_b = client("node-b");
    wait_for("both client nodes ready", LIMIT, || {
        let nodes = server.get_json("/v1/nodes");
        let ready = nodes
            .as_array()?
            .iter()
            .filter(|node| node["Status"] == "ready")
            .count();
        (ready == 2).then_some(())
    });
    (server, node_a, node_b)
}

/// The job's allocations of `group` whose every task runs, with the node each is on.
fn running_allocs(server: &Agent, group: &str) -> Vec<(String, String)> {
    let allocs = server.get_json("/v1/job/countdash/allocations");
    allocs
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter(|alloc| {
            assert_ne!(alloc["ClientStatus"], "failed", "{alloc}");
            alloc["TaskGroup"] == group
                && alloc["ClientStatus"] == "running"
                && alloc["TaskStates"].as_object().is_some_and(|states| {
                    states.len() == 2 && states.values().all(|state| state["State"] == "running")
                })
        })
        .map(|alloc| {
            (
                alloc["ID"].as_str().unwrap().to_owned(),
                alloc["NodeName"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// HTTP requests made from inside a network namespace, by a thread that joined it.
struct Prober {
    ask: mpsc::Sender<String>,
    answers: mpsc::Receiver<Result<String, String>>,
}

impl Prober {
    fn new(netns: PathBuf) -> Prober {
        let (ask, asks) = mpsc::channel::<String>();
        let (answer, answers) = mpsc::channel();
        let namespace = std::fs::File::open(&netns)
            .unwrap_or_else(|error| panic!("{}: {error}", netns.display()));
        std::thread::spawn(move || {
            nix::sched::setns(&namespace, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
            for address in asks {
                if answer.send(http_get(&address)).is_err() {
                    break;
                }
            }
        });
        Prober { ask, answers }
    }

    /// The body of a GET of `address` (`ip:port`), or what went wrong.
    fn get(&self, address: &str) -> Result<String, String> {
        self.ask.send(address.to_owned()).unwrap();
        self.answers.recv().unwrap()
    }
}

fn http_get(address: &str) -> Result<String, String> {
    let address = address.parse().map_err(|error| format!("{error}"))?;
    let mut stream = TcpStream::connect_timeout(&address, Duration::from_secs(5))
        .map_err(|error| format!("connect: {error}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    stream
        .write_all(b"GET / HTTP/1.0\r\nHost: count-api\r\n\r\n")
        .map_err(|error| format!("write: {error}"))?;
    let mut answer = Vec::new();
    stream
        .read_to_end(&mut answer)
        .map_err(|error| format!("read: {error}"))?;
    let answer = String::from_utf8_lossy(&answer);
    match answer.split_once("\r\n\r\n") {
        Some((head, body)) if head.starts_with("HTTP/1.0 200") => Ok(body.to_owned()),
        _ => Err(format!("answered {answer:?}")),
    }
}

/// How long until `probe` (tried every 20 ms) holds, at most `limit`.
fn time_until(limit: Duration, mut probe: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !probe() {
        assert!(start.elapsed() < limit, "not within {limit:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    start.elapsed()
}

#[test]
fn dashboard_reaches_api_on_another_node_through_the_mesh_follows_intentions_and_survives_a_stopped_instance()
 {
    if !prerequisites() {
        return;
    }
    let temp = tempfile::tempdir().unwrap();
    let mut cleanup = Cleanup { allocs: Vec::new() };
    let (server, node_a, node_b) = start_cluster(temp.path());
    let (_dir, path) = write_jobspec("countdash.hcl", JOB);
    server.cli_ok(&["job", "run", "-detach", path.to_str().unwrap()]);

    let apis = wait_for("two running count-api allocations", LIMIT, || {
        let apis = running_allocs(&server, "api");
        (apis.len() == 2).then_some(apis)
    });
    let (dashboard, dashboard_node) = wait_for("a running dashboard", LIMIT, || {
        running_allocs(&server, "dashboard").into_iter().next()
    });
    cleanup.allocs = apis.iter().map(|(id, _)| id.clone()).collect();
    cleanup.allocs.push(dashboard.clone());
    assert!(apis.iter().all(|(_, node)| node == "node-a"), "{apis:?}");
    assert_eq!(dashboard_node, "node-b");
    let api_ids: Vec<&str> = apis.iter().map(|(id, _)| id.as_str()).collect();

    // The api sidecars' registrations: at the node's loopback address (the agents are bound
    // to 127.0.0.1), at the host port of each sidecar's public listener.
    let registrations = wait_for("both count-api-sidecar-proxy registrations", LIMIT, || {
        let list = server.get_json("/v1/service/count-api-sidecar-proxy");
        let list = list.as_array()?.clone();
        (list.len() == 2).then_some(list)
    });
    for registration in &registrations {
        assert_eq!(registration["Address"], "127.0.0.1", "{registration}");
    }

    // Each api sidecar's default check (Nomad's "Connect Sidecar Listening", TCP on its
    // host port) passes.
    for (api, _) in &apis {
        wait_for(&format!("{api}'s sidecar check passing"), LIMIT, || {
            let checks = node_a.get_json(&format!("/v1/client/allocation/{api}/checks"));
            checks
                .as_object()?
                .values()
                .any(|check| {
                    check["Check"] == "Connect Sidecar Listening"
                        && check["Service"] == "count-api-sidecar-proxy"
                        && check["Status"] == "success"
                })
                .then_some(())
        });
    }

    // The dashboard's own task gets answers from both instances across the nodes.
    let log = node_b
        .data_dir
        .join("alloc")
        .join(&dashboard)
        .join("alloc/logs/dashboard.stdout.0");
    wait_for(
        "answers from count-api in the dashboard's log",
        LIMIT,
        || {
            let text = std::fs::read_to_string(&log).ok()?;
            text.lines()
                .any(|line| {
                    line.strip_prefix("answer: ")
                        .is_some_and(|id| api_ids.contains(&id))
                })
                .then_some(())
        },
    );
    let logs = node_b.cli_ok(&["alloc", "logs", &dashboard, "dashboard"]);
    assert!(
        logs.lines()
            .any(|line| line.starts_with("answer: ") && api_ids.contains(&&line[8..])),
        "{logs}"
    );

    // The test's own requests, from the dashboard's namespace, are balanced over both.
    let prober = Prober::new(Path::new(NETNS_DIR).join(&dashboard));
    let upstream = "127.0.0.1:8080";
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..10 {
        let id = prober.get(upstream).expect("a request through the mesh");
        assert!(api_ids.contains(&id.as_str()), "{id}");
        seen.insert(id);
    }
    assert_eq!(seen.len(), 2, "not balanced over both instances: {seen:?}");

    // A sidecar's public port answers on the host, but a plain TCP client gets nothing.
    let port = registrations[0]["Port"].as_u64().unwrap();
    let mut plain = TcpStream::connect(("127.0.0.1", u16::try_from(port).unwrap()))
        .expect("the api sidecar's port answers on the host");
    plain
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    plain
        .write_all(b"GET / HTTP/1.0\r\nHost: count-api\r\n\r\n")
        .unwrap();
    let mut got = Vec::new();
    let _ = plain.read_to_end(&mut got);
    let got = String::from_utf8_lossy(&got);
    assert!(
        !api_ids.iter().any(|id| got.contains(id)),
        "plain TCP got through: {got:?}"
    );

    // Intentions: deny stops new connections within a second, allow restores them.
    server.cli_ok(&[
        "intention",
        "create",
        "-deny",
        "count-dashboard",
        "count-api",
    ]);
    let took = time_until(Duration::from_secs(10), || prober.get(upstream).is_err());
    assert!(took < Duration::from_secs(1), "deny took {took:?}");
    for _ in 0..5 {
        assert!(
            prober.get(upstream).is_err(),
            "a request got through a deny"
        );
    }
    server.cli_ok(&[
        "intention",
        "create",
        "-allow",
        "count-dashboard",
        "count-api",
    ]);
    let took = time_until(Duration::from_secs(10), || prober.get(upstream).is_ok());
    assert!(took < Duration::from_secs(1), "allow took {took:?}");

    // One instance stopped while requests go on, one after another: at most the one in
    // flight on it fails, and the rest are answered by the other. (A job is scaled once its
    // deployment is done.)
    wait_for("the job's deployment successful", LIMIT, || {
        let deployment = server.get_json("/v1/job/countdash/deployment");
        (deployment["Status"] == "successful").then_some(())
    });
    let (requests, prober) = std::thread::scope(|scope| {
        let (stop, stopped) = mpsc::channel::<()>();
        let traffic = scope.spawn(move || {
            let mut outcomes = Vec::new();
            // Until told to stop, or the test has failed (the sender dropped).
            while matches!(stopped.try_recv(), Err(mpsc::TryRecvError::Empty)) {
                outcomes.push((Instant::now(), prober.get(upstream)));
                std::thread::sleep(Duration::from_millis(10));
            }
            (outcomes, prober)
        });
        std::thread::sleep(Duration::from_secs(1));
        server.cli_ok(&["job", "scale", "-detach", "countdash", "api", "1"]);
        wait_for("one count-api registration left", LIMIT, || {
            let list = server.get_json("/v1/service/count-api-sidecar-proxy");
            (list.as_array()?.len() == 1).then_some(())
        });
        wait_for("the stopped instance's tasks dead", LIMIT, || {
            let allocs = server.get_json("/v1/job/countdash/allocations");
            allocs
                .as_array()?
                .iter()
                .any(|alloc| {
                    alloc["TaskGroup"] == "api"
                        && alloc["ClientStatus"] == "complete"
                        && alloc["TaskStates"]
                            .as_object()
                            .is_some_and(|states| states.values().all(|s| s["State"] == "dead"))
                })
                .then_some(())
        });
        std::thread::sleep(Duration::from_secs(2));
        stop.send(()).unwrap();
        traffic.join().unwrap()
    });
    let failed: Vec<_> = requests
        .iter()
        .filter_map(|(at, outcome)| outcome.as_ref().err().map(|error| (at, error)))
        .collect();
    assert!(
        failed.len() <= 1,
        "{} of {} requests failed while an instance stopped: {failed:?}",
        failed.len(),
        requests.len()
    );
    let remaining = running_allocs(&server, "api");
    assert_eq!(remaining.len(), 1, "{remaining:?}");
    let last: Vec<&String> = requests
        .iter()
        .rev()
        .take(20)
        .filter_map(|(_, outcome)| outcome.as_ref().ok())
        .collect();
    assert!(
        last.iter().all(|id| **id == remaining[0].0),
        "requests after the stop went elsewhere than {}: {last:?}",
        remaining[0].0
    );
    eprintln!(
        "{} requests while an instance stopped, {} failed",
        requests.len(),
        failed.len()
    );

    // Stopped: every allocation's namespace goes, on both nodes.
    drop(prober);
    server.cli_ok(&["job", "stop", "-purge", "countdash"]);
    for alloc in &cleanup.allocs {
        let netns = Path::new(NETNS_DIR).join(alloc);
        wait_for(&format!("{alloc}'s namespace removed"), LIMIT, || {
            (!netns.exists()).then_some(())
        });
    }
    drop((node_a, node_b, server));
}
