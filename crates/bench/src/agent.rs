//! The real `drover agent -dev` as a child process on port 0 in a data dir, and a minimal
//! blocking HTTP/1.1 client for its API (one connection per request, as the CLI does).
//!
//! Not here: what a scenario measures; clean-up of tasks is `procfs::clean_up_after`, called
//! when an [`AgentProcess`] is dropped.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use serde_json::Value;

use crate::procfs;

/// A running agent; stopped (SIGTERM, then SIGKILL) and its data dir cleaned when dropped.
pub struct AgentProcess {
    child: Option<Child>,
    pub address: String,
    pub data_dir: PathBuf,
    /// When the process was spawned.
    pub spawned_at: Instant,
}

/// The client config every scenario uses: enough memory and CPU on the node for 1000 tiny tasks
/// whatever the machine (the scheduler checks the node's advertised resources, not real use).
const CONFIG: &str = r#"client {
  memory_total_mb   = 200000
  cpu_total_compute = 200000
}
"#;

/// A server agent without a client: the simulated nodes are its only nodes.
const SERVER_ONLY_CONFIG: &str = r#"client {
  enabled = false
}
"#;

/// `--etcd`: the etcd client URLs every spawned agent keeps its server state in (each agent
/// under a prefix of its own, so runs do not see each other's jobs); unset: the embedded store.
pub static ETCD_ENDPOINTS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();

/// Where the spawned servers keep their state, for the reports' notes.
pub fn backend_note() -> &'static str {
    if ETCD_ENDPOINTS.get().is_some() {
        "server state in etcd (--etcd)"
    } else {
        "server state in the embedded store"
    }
}

/// `etcd { … }` for the next spawned agent, if `--etcd` was given.
fn etcd_block() -> String {
    static SPAWNED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let Some(endpoints) = ETCD_ENDPOINTS.get() else {
        return String::new();
    };
    let number = SPAWNED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let endpoints: Vec<String> = endpoints.iter().map(|url| format!("{url:?}")).collect();
    format!(
        "etcd {{\n  endpoints = [{}]\n  prefix = \"bench-{}-{number}/\"\n}}\n",
        endpoints.join(", "),
        std::process::id()
    )
}

impl AgentProcess {
    /// Spawns `drover agent -dev -data-dir DIR -http-port=0` and waits for the line naming its
    /// HTTP address.
    pub fn spawn(drover: &Path, data_dir: &Path) -> anyhow::Result<AgentProcess> {
        Self::spawn_with(drover, data_dir, &[], &format!("{CONFIG}{}", etcd_block()))
    }

    /// Spawns a server-only agent (`-dev -server`, `client { enabled = false }`).
    pub fn spawn_server(drover: &Path, data_dir: &Path) -> anyhow::Result<AgentProcess> {
        Self::spawn_with(
            drover,
            data_dir,
            &["-server"],
            &format!("{SERVER_ONLY_CONFIG}{}", etcd_block()),
        )
    }

    /// Spawns a client-only agent named `name` (`-dev -client`) of the server at `server`
    /// (`host:port`), with [`CONFIG`]'s resources.
    pub fn spawn_client(
        drover: &Path,
        data_dir: &Path,
        server: &str,
        name: &str,
    ) -> anyhow::Result<AgentProcess> {
        Self::spawn_with(
            drover,
            data_dir,
            &["-client", &format!("-servers={server}")],
            &format!("name = \"{name}\"\nserver {{\n  enabled = false\n}}\n{CONFIG}"),
        )
    }

    fn spawn_with(
        drover: &Path,
        data_dir: &Path,
        extra: &[&str],
        config: &str,
    ) -> anyhow::Result<AgentProcess> {
        std::fs::create_dir_all(data_dir)?;
        let config_path = data_dir
            .parent()
            .unwrap_or(data_dir)
            .join("bench-agent.hcl");
        std::fs::write(&config_path, config)?;
        let spawned_at = Instant::now();
        let mut child = Command::new(drover)
            .arg("agent")
            .arg("-dev")
            .args(extra)
            .arg(format!("-data-dir={}", data_dir.display()))
            .arg(format!("-config={}", config_path.display()))
            .arg("-http-port=0")
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("spawning {}", drover.display()))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| anyhow!("the agent's stdout is not piped"))?;
        let (address_tx, address_rx) = std::sync::mpsc::channel();
        // Drains stdout for the agent's whole life so it never blocks on a full pipe.
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if !sent && let Some(start) = line.find("http://") {
                    let address = line[start..]
                        .split_whitespace()
                        .next()
                        .unwrap_or_default()
                        .trim_end_matches([',', '.', ';'])
                        .to_owned();
                    let _ = address_tx.send(address);
                    sent = true;
                }
            }
        });
        let mut agent = AgentProcess {
            child: Some(child),
            address: String::new(),
            data_dir: data_dir.to_path_buf(),
            spawned_at,
        };
        agent.address = address_rx
            .recv_timeout(Duration::from_secs(60))
            .map_err(|_| anyhow!("the agent did not print its HTTP address within 60 s"))?;
        Ok(agent)
    }

    pub fn pid(&self) -> i32 {
        self.child
            .as_ref()
            .and_then(|child| i32::try_from(child.id()).ok())
            .unwrap_or(0)
    }

    /// Polls `/v1/agent/self` every millisecond until it answers 200; returns the time since
    /// the spawn.
    pub fn wait_api_ready(&self, limit: Duration) -> anyhow::Result<Duration> {
        let deadline = Instant::now() + limit;
        loop {
            if let Ok((200, _)) = http("GET", &self.address, "/v1/agent/self", None) {
                return Ok(self.spawned_at.elapsed());
            }
            if Instant::now() > deadline {
                bail!("/v1/agent/self did not answer within {limit:?}");
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Waits until the node is registered and ready; returns its ID.
    pub fn wait_node_ready(&self, limit: Duration) -> anyhow::Result<String> {
        poll(
            limit,
            Duration::from_millis(5),
            "the node to be ready",
            || {
                let nodes = self.get_json("/v1/nodes").ok()?;
                nodes.as_array()?.iter().find_map(|node| {
                    (node["Status"] == "ready")
                        .then(|| node["ID"].as_str().map(str::to_string))
                        .flatten()
                })
            },
        )
    }

    /// GET a JSON document.
    pub fn get_json(&self, path: &str) -> anyhow::Result<Value> {
        let (status, body) = http("GET", &self.address, path, None)?;
        if status != 200 {
            bail!("GET {path}: {status}: {body}");
        }
        Ok(serde_json::from_str(&body)?)
    }

    /// Sends a request with a JSON body, expecting 200.
    pub fn send_json(&self, method: &str, path: &str, body: &Value) -> anyhow::Result<Value> {
        let (status, text) = http(method, &self.address, path, Some(&body.to_string()))?;
        if status != 200 {
            bail!("{method} {path}: {status}: {text}");
        }
        Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// Kills the agent with SIGKILL (its shims and tasks keep running).
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops the agent gracefully (SIGTERM, SIGKILL after 30 s).
    pub fn terminate(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap_or(0));
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for AgentProcess {
    fn drop(&mut self) {
        self.terminate();
        procfs::clean_up_after(&self.data_dir);
    }
}

/// Polls `probe` every `every` until it returns `Some`, failing after `limit`.
pub fn poll<T>(
    limit: Duration,
    every: Duration,
    what: &str,
    mut probe: impl FnMut() -> Option<T>,
) -> anyhow::Result<T> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = probe() {
            return Ok(value);
        }
        if Instant::now() > deadline {
            bail!("timed out after {limit:?} waiting for {what}");
        }
        std::thread::sleep(every);
    }
}

/// One blocking HTTP/1.1 request to `address` (`http://host:port`); returns (status, body).
pub fn http(
    method: &str,
    address: &str,
    path: &str,
    body: Option<&str>,
) -> anyhow::Result<(u16, String)> {
    let host = address.strip_prefix("http://").unwrap_or(address);
    let mut stream = TcpStream::connect(host)?;
    stream.set_read_timeout(Some(Duration::from_secs(120)))?;
    stream.set_nodelay(true)?;
    let body = body.unwrap_or("");
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw);
    let (head, rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| anyhow!("no status line in the answer to {method} {path}"))?;
    let chunked = head
        .lines()
        .any(|line| line.eq_ignore_ascii_case("transfer-encoding: chunked"));
    let body = if chunked {
        dechunk(rest)
    } else {
        rest.to_owned()
    };
    Ok((status, body))
}

fn dechunk(mut rest: &str) -> String {
    let mut out = String::new();
    while let Some((size_line, after)) = rest.split_once("\r\n") {
        let size = usize::from_str_radix(size_line.trim(), 16).unwrap_or(0);
        if size == 0 || after.len() < size {
            break;
        }
        out.push_str(&after[..size]);
        rest = after[size..].trim_start_matches("\r\n");
    }
    out
}
