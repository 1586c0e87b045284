//! The service mesh's data plane end to end, on a real dev agent bound to 127.0.0.1: two
//! `drover connect-proxy` processes (the sidecars of `web` and `api`, each with the workload
//! identity of a real task named `connect-proxy-<service>`, reaching the agent through that
//! task's API socket) carry HTTP from a client, through web's upstream listener and api's
//! public mTLS listener, to a real HTTP server. A plain TCP client and a TLS client without a
//! mesh certificate get nothing from api's sidecar; an intention `web → api` deny makes new
//! connections fail within a second and allow restores them; leaves of a 4-second TTL renew
//! (and a keyring rotation changes the roots) while requests keep succeeding; the sidecar's
//! counters reach `/v1/metrics`. (Inside group namespaces, as the client runs them, is the
//! jobspec's side of the mesh.)

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{Agent, agent_config, drover_bin, http, wait_for, write_jobspec};

const LIMIT: Duration = Duration::from_secs(90);

/// A port free on 127.0.0.1 now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A real server: an HTTP/1.1 request (one that starts `GET `) is answered `hello from api`;
/// any other connection is echoed back byte for byte (the benchmark's load).
fn http_backend() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let _ = stream.set_nodelay(true);
            std::thread::spawn(move || {
                let mut request = Vec::new();
                let mut buffer = vec![0u8; 64 * 1024];
                while request.len() < 4
                    || (request.starts_with(b"GET ")
                        && !request.windows(4).any(|window| window == b"\r\n\r\n"))
                {
                    match stream.read(&mut buffer) {
                        Ok(0) | Err(_) => return,
                        Ok(read) => request.extend_from_slice(&buffer[..read]),
                    }
                }
                if !request.starts_with(b"GET ") {
                    if stream.write_all(&request).is_err() {
                        return;
                    }
                    loop {
                        match stream.read(&mut buffer) {
                            Ok(0) | Err(_) => return,
                            Ok(read) => {
                                if stream.write_all(&buffer[..read]).is_err() {
                                    return;
                                }
                            }
                        }
                    }
                }
                let body = "hello from api";
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            });
        }
    });
    port
}

/// One HTTP request to `port`; the whole answer, or what went wrong.
fn get(port: u16) -> Result<String, String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).map_err(|error| error.to_string())?;
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: api\r\nConnection: close\r\n\r\n")
        .map_err(|error| error.to_string())?;
    let mut answer = String::new();
    stream
        .read_to_string(&mut answer)
        .map_err(|error| error.to_string())?;
    if answer.ends_with("hello from api") {
        Ok(answer)
    } else {
        Err(format!("answered {answer:?}"))
    }
}

/// A `drover connect-proxy` process, stopped when dropped; its stderr goes to `log`.
struct Sidecar {
    child: Child,
    log: PathBuf,
}

impl Sidecar {
    fn start(dir: &Path, name: &str, config: &Value) -> Sidecar {
        let path = dir.join(format!("{name}.json"));
        std::fs::write(&path, serde_json::to_vec_pretty(config).unwrap()).unwrap();
        let log = dir.join(format!("{name}.log"));
        let child = Command::new(drover_bin())
            .args(["connect-proxy", "-config"])
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Sidecar { child, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Sidecar {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The running allocation of `group` in job `mesh`.
fn running_alloc(agent: &Agent, group: &str) -> String {
    wait_for(&format!("a running alloc of group {group}"), LIMIT, || {
        let allocs = agent.get_json("/v1/job/mesh/allocations");
        allocs.as_array()?.iter().find_map(|alloc| {
            assert_ne!(alloc["ClientStatus"], "failed", "{alloc}");
            (alloc["TaskGroup"] == group && alloc["ClientStatus"] == "running")
                .then(|| alloc["ID"].as_str().unwrap().to_owned())
        })
    })
}

/// The JSON config the client would write for a sidecar of `service` in `alloc_id`.
fn proxy_config(
    agent: &Agent,
    alloc_id: &str,
    service: &str,
    public: u16,
    local: u16,
    upstreams: Value,
) -> Value {
    let secrets = agent
        .data_dir
        .join("alloc")
        .join(alloc_id)
        .join(format!("connect-proxy-{service}"))
        .join("secrets");
    json!({
        "alloc_id": alloc_id,
        "namespace": "default",
        "datacenter": "dc1",
        "service": service,
        "public_listener": format!("127.0.0.1:{public}"),
        "local_service": format!("127.0.0.1:{local}"),
        "upstreams": upstreams,
        "agent_socket": secrets.join("api.sock"),
        "identity_token_file": secrets.join("nomad_token"),
        "host_gateway": null,
    })
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

/// A dev agent running job `mesh` (its sidecar tasks), a backend, and the two sidecars.
struct Mesh {
    // Dropped in this order: sidecars, then the agent, then its directory.
    api: Sidecar,
    web: Sidecar,
    agent: Agent,
    temp: tempfile::TempDir,
    api_alloc: String,
    web_alloc: String,
    api_public: u16,
    web_upstream: u16,
    backend: u16,
}

fn start_mesh(server_block: &str) -> Mesh {
    let temp = tempfile::tempdir().unwrap();
    let config = agent_config(temp.path(), "agent.hcl", server_block);
    let agent = Agent::start_with(&temp.path().join("data"), &[&format!("-config={config}")]);
    let backend = http_backend();
    let api_public = free_port();
    let jobspec = format!(
        r#"
job "mesh" {{
  group "api" {{
    network {{
      port "sidecar" {{
        static = {api_public}
      }}
    }}
    service {{
      name     = "api-sidecar-proxy"
      port     = "sidecar"
      provider = "nomad"
    }}
    task "connect-proxy-api" {{
      driver = "raw_exec"
      identity {{
        file = true
      }}
      config {{
        command = "sleep"
        args    = ["3600"]
      }}
    }}
  }}
  group "web" {{
    task "connect-proxy-web" {{
      driver = "raw_exec"
      identity {{
        file = true
      }}
      config {{
        command = "sleep"
        args    = ["3600"]
      }}
    }}
    task "not-a-sidecar" {{
      driver = "raw_exec"
      identity {{
        file = true
      }}
      config {{
        command = "sleep"
        args    = ["3600"]
      }}
    }}
  }}
}}
"#
    );
    let (_jobdir, path) = write_jobspec("mesh.hcl", &jobspec);
    agent.cli_ok(&["job", "run", "-detach", &path.to_string_lossy()]);
    let api_alloc = running_alloc(&agent, "api");
    let web_alloc = running_alloc(&agent, "web");

    let web_upstream = free_port();
    let api = Sidecar::start(
        temp.path(),
        "api",
        &proxy_config(&agent, &api_alloc, "api", api_public, backend, json!([])),
    );
    let web = Sidecar::start(
        temp.path(),
        "web",
        &proxy_config(
            &agent,
            &web_alloc,
            "web",
            free_port(),
            free_port(),
            json!([{
                "destination_name": "api",
                "destination_namespace": "default",
                "datacenter": "",
                "local_bind_address": "127.0.0.1",
                "local_bind_port": web_upstream,
            }]),
        ),
    );
    Mesh {
        api,
        web,
        agent,
        temp,
        api_alloc,
        web_alloc,
        api_public,
        web_upstream,
        backend,
    }
}

#[test]
fn sidecars_carry_http_over_mtls_refuse_strangers_follow_intentions_and_rotate_certificates() {
    let mesh = start_mesh("server {\n  mesh_leaf_cert_ttl = \"4s\"\n}\n");
    let Mesh {
        agent,
        web,
        web_alloc,
        api_public,
        web_upstream,
        ..
    } = &mesh;
    let (agent, web, web_alloc, api_public, web_upstream) =
        (agent, web, web_alloc.as_str(), *api_public, *web_upstream);
    // A leaf only for the service's own sidecar task.
    let token_of = |alloc: &str, task: &str| {
        let file = agent
            .data_dir
            .join("alloc")
            .join(alloc)
            .join(task)
            .join("secrets")
            .join("nomad_token");
        wait_for("the task's identity file", LIMIT, || {
            std::fs::read_to_string(&file).ok()
        })
    };
    let (status, body) = support::http_as(
        "GET",
        &agent.url("/v1/agent/connect/ca/leaf/api"),
        Some(&token_of(web_alloc, "connect-proxy-web")),
        None,
    );
    assert_eq!(status, 403, "web's sidecar may not have api's leaf: {body}");
    let (status, body) = support::http_as(
        "GET",
        &agent.url("/v1/agent/connect/ca/leaf/web"),
        Some(&token_of(web_alloc, "not-a-sidecar")),
        None,
    );
    assert_eq!(status, 403, "a task that is not the sidecar: {body}");
    let (status, body) = support::http_as(
        "GET",
        &agent.url("/v1/agent/connect/ca/leaf/web"),
        Some(&token_of(web_alloc, "connect-proxy-web")),
        None,
    );
    assert_eq!(status, 200, "{body}");
    let leaf: Value = serde_json::from_str(&body).unwrap();
    let roots = agent.get_json("/v1/agent/connect/ca/roots");
    let trust_domain = roots["TrustDomain"].as_str().unwrap().to_owned();
    assert!(trust_domain.ends_with(".consul"), "{roots}");
    assert_eq!(
        leaf["ServiceURI"],
        format!("spiffe://{trust_domain}/ns/default/dc/dc1/svc/web")
    );

    let answer = wait_for("HTTP through both sidecars", LIMIT, || {
        get(web_upstream).ok()
    });
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");

    // Strangers get nothing from api's sidecar: plain TCP, and TLS without a mesh
    // certificate (openssl's client presents none).
    let mut plain = TcpStream::connect(("127.0.0.1", api_public)).unwrap();
    plain
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    plain
        .write_all(b"GET / HTTP/1.1\r\nHost: api\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut got = Vec::new();
    let _ = plain.read_to_end(&mut got);
    assert!(
        !String::from_utf8_lossy(&got).contains("hello"),
        "plain TCP got through: {got:?}"
    );
    let mut openssl = Command::new("openssl")
        .args(["s_client", "-quiet", "-connect"])
        .arg(format!("127.0.0.1:{api_public}"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("openssl (the openssl package) is installed");
    openssl
        .stdin
        .take()
        .unwrap()
        .write_all(b"GET / HTTP/1.1\r\nHost: api\r\nConnection: close\r\n\r\n")
        .unwrap();
    let output = openssl.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !stdout.contains("hello"),
        "TLS without a certificate got through: {stdout}"
    );
    assert!(
        stderr.contains("certificate required") || stderr.contains("alert"),
        "the sidecar did not refuse the TLS client by its certificate: {stderr}"
    );

    // An intention web → api deny: new connections fail within a second; allow restores them.
    agent.cli_ok(&["intention", "create", "-deny", "web", "api"]);
    let took = time_until(Duration::from_secs(5), || get(web_upstream).is_err());
    assert!(took < Duration::from_secs(1), "deny took {took:?}");
    let check = agent.cli(&["intention", "check", "web", "api"]);
    assert_eq!(check.status.code(), Some(2), "{check:?}");
    agent.cli_ok(&["intention", "create", "-allow", "web", "api"]);
    let took = time_until(Duration::from_secs(5), || get(web_upstream).is_ok());
    assert!(took < Duration::from_secs(1), "allow took {took:?}");
    let listed = agent.cli_ok(&["intention", "list"]);
    assert!(
        listed.contains("default/web") && listed.contains("allow"),
        "{listed}"
    );

    // Leaves of 4 s renew, and a keyring rotation brings a new root, while requests go on.
    let loaded = |sidecar: &Sidecar| sidecar.log().matches("mesh certificate loaded").count();
    let before = loaded(web);
    let (status, body) = http("PUT", &agent.url("/v1/operator/keyring/rotate"), None);
    assert_eq!(status, 200, "{body}");
    let start = Instant::now();
    let mut requests = 0;
    while start.elapsed() < Duration::from_secs(25) {
        if let Err(error) = get(web_upstream) {
            panic!("request {requests} failed while certificates rotated: {error}");
        }
        requests += 1;
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        loaded(web) >= before + 4,
        "web's leaf was not renewed: {}",
        web.log()
    );
    let roots_after = agent.get_json("/v1/agent/connect/ca/roots");
    assert_eq!(
        roots_after["Roots"].as_array().unwrap().len(),
        2,
        "{roots_after}"
    );

    // The counters reach the agent's metrics.
    wait_for("web's upstream counters in /v1/metrics", LIMIT, || {
        let metrics = agent.get_json("/v1/metrics");
        metrics["Gauges"]
            .as_array()?
            .iter()
            .find(|gauge| {
                gauge["Name"] == "nomad.client.mesh.upstream.connections"
                    && gauge["Labels"]["service"] == "web"
                    && gauge["Labels"]["upstream"] == "api"
                    && gauge["Value"].as_f64().unwrap_or(0.0) >= f64::from(requests)
            })
            .cloned()
    });
}

/// Round trips of 64 bytes on one connection to `port`: each one's time.
fn ping_pong(port: u16, rounds: usize) -> Vec<Duration> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_nodelay(true).unwrap();
    let message = [7u8; 64];
    let mut answer = [0u8; 64];
    let mut times = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let start = Instant::now();
        stream.write_all(&message).unwrap();
        stream.read_exact(&mut answer).unwrap();
        times.push(start.elapsed());
    }
    times
}

/// Each request's time, one new connection per request (the handshakes included).
fn new_connections(port: u16, requests: usize) -> Vec<Duration> {
    (0..requests)
        .map(|_| {
            let start = Instant::now();
            get(port).unwrap();
            start.elapsed()
        })
        .collect()
}

/// MiB/s of `total` bytes sent through one connection to `port` and echoed back.
fn throughput(port: u16, total: usize) -> f64 {
    let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut writer = stream.try_clone().unwrap();
    let mut reader = stream;
    let start = Instant::now();
    let sending = std::thread::spawn(move || {
        let chunk = vec![1u8; 64 * 1024];
        let mut sent = 0;
        while sent < total {
            writer.write_all(&chunk).unwrap();
            sent += chunk.len();
        }
    });
    let mut buffer = vec![0u8; 64 * 1024];
    let mut received = 0;
    while received < total {
        let read = reader.read(&mut buffer).unwrap();
        assert!(read > 0, "the connection closed after {received} bytes");
        received += read;
    }
    sending.join().unwrap();
    #[allow(clippy::cast_precision_loss)]
    let mib = total as f64 / (1024.0 * 1024.0);
    mib / start.elapsed().as_secs_f64()
}

fn percentile(times: &[Duration], percent: usize) -> Duration {
    let mut sorted = times.to_vec();
    sorted.sort();
    sorted[(sorted.len() * percent / 100).min(sorted.len() - 1)]
}

/// A process's proportional set size, in KiB.
fn pss_kib(pid: u32) -> u64 {
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap();
    rollup
        .lines()
        .find_map(|line| line.strip_prefix("Pss:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// The figures of BENCHMARKS.md's service mesh section: `cargo test -p drover --test
/// e2e_mesh -- --ignored --nocapture mesh_benchmark`.
#[test]
#[ignore = "a benchmark: run it by name"]
fn mesh_benchmark() {
    let mesh = start_mesh("");
    wait_for("HTTP through both sidecars", LIMIT, || {
        get(mesh.web_upstream).ok()
    });
    let rounds = 2000;
    let direct = ping_pong(mesh.backend, rounds);
    let meshed = ping_pong(mesh.web_upstream, rounds);
    let direct_new = new_connections(mesh.backend, 300);
    let meshed_new = new_connections(mesh.web_upstream, 300);
    let total = 256 * 1024 * 1024;
    let direct_throughput = throughput(mesh.backend, total);
    let meshed_throughput = throughput(mesh.web_upstream, total);
    println!("| measure | direct | through two sidecars |");
    println!("|---|---|---|");
    for (name, direct, meshed) in [
        (
            "64 B round trip, one connection (p50 / p99)",
            &direct,
            &meshed,
        ),
        (
            "HTTP request on a new connection (p50 / p99)",
            &direct_new,
            &meshed_new,
        ),
    ] {
        println!(
            "| {name} | {:?} / {:?} | {:?} / {:?} |",
            percentile(direct, 50),
            percentile(direct, 99),
            percentile(meshed, 50),
            percentile(meshed, 99)
        );
    }
    println!(
        "| one connection, 256 MiB echoed | {direct_throughput:.0} MiB/s | {meshed_throughput:.0} MiB/s |"
    );
    println!(
        "| sidecar PSS after the run (web / api) | | {} KiB / {} KiB |",
        pss_kib(mesh.web.child.id()),
        pss_kib(mesh.api.child.id())
    );
    let _ = (
        &mesh.temp,
        &mesh.api_alloc,
        &mesh.web_alloc,
        mesh.api_public,
        &mesh.agent,
    );
}
