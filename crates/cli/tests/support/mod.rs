//! Test support for end-to-end tests: starts the real `drover agent` binary on port 0 in a
//! temporary data dir, runs the real `drover` CLI against it, and talks to its HTTP API.
//!
//! Waiting is bounded polling with generous limits, never a fixed sleep.

#![allow(dead_code, clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub fn drover_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_drover"))
}

/// A running agent, killed (and its tasks stopped) when dropped.
pub struct Agent {
    pub child: Option<Child>,
    pub address: String,
    pub data_dir: PathBuf,
    _temp: Option<tempfile::TempDir>,
    stdout_log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Agent {
    /// Starts `drover agent -dev` with a fresh data dir.
    pub fn start_dev() -> Agent {
        let temp = tempfile::tempdir().expect("temp dir");
        let data_dir = temp.path().join("data");
        let mut agent = Agent::start_with(&data_dir, &[]);
        agent._temp = Some(temp);
        agent
    }

    /// Starts `drover agent -dev` without a data dir: state in a temporary dir, tasks stopped
    /// when the agent exits.
    pub fn start_ephemeral() -> Agent {
        Agent::spawn(None, &[])
    }

    /// Starts `drover agent -dev -data-dir DIR` with extra flags.
    pub fn start_with(data_dir: &Path, extra: &[&str]) -> Agent {
        Agent::spawn(Some(data_dir), extra)
    }

    /// Starts `drover agent -dev` with a fresh data dir and extra environment variables.
    pub fn start_dev_with_env(env: &[(&str, &str)]) -> Agent {
        let temp = tempfile::tempdir().expect("temp dir");
        let data_dir = temp.path().join("data");
        let mut agent = Agent::spawn_with_env(Some(&data_dir), &[], env);
        agent._temp = Some(temp);
        agent
    }

    /// Starts a server-only agent, as Nomad starts one: `drover agent -server -bind=127.0.0.1
    /// -data-dir DIR` with extra flags (not `-dev`, which always runs a client as well, whatever
    /// a config file's `client { enabled = false }` says).
    pub fn start_server(data_dir: &Path, extra: &[&str]) -> Agent {
        let mut args = vec!["-server", "-bind=127.0.0.1"];
        args.extend_from_slice(extra);
        Agent::spawn_as(false, Some(data_dir), &args, &[])
    }

    fn spawn(data_dir: Option<&Path>, extra: &[&str]) -> Agent {
        Agent::spawn_with_env(data_dir, extra, &[])
    }

    fn spawn_with_env(data_dir: Option<&Path>, extra: &[&str], env: &[(&str, &str)]) -> Agent {
        Agent::spawn_as(true, data_dir, extra, env)
    }

    fn spawn_as(dev: bool, data_dir: Option<&Path>, extra: &[&str], env: &[(&str, &str)]) -> Agent {
        let mut command = Command::new(drover_bin());
        command.envs(env.iter().copied());
        command.arg("agent");
        if dev {
            command.arg("-dev");
        }
        if let Some(data_dir) = data_dir {
            command.arg(format!("-data-dir={}", data_dir.display()));
        }
        command
            .arg("-http-port=0")
            .args(extra)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = command.spawn().expect("agent starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let (address_tx, address_rx) = std::sync::mpsc::channel();
        let stdout_log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = stdout_log.clone();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                // Logged before the address is handed over, so a test that has the address
                // also sees the line that carried it.
                log.lock().expect("log lock").push(line.clone());
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
        let address = address_rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the agent prints its HTTP address within 60s");
        Agent {
            child: Some(child),
            address,
            data_dir: data_dir.map(Path::to_owned).unwrap_or_default(),
            _temp: None,
            stdout_log,
        }
    }

    /// Runs the `drover` CLI against this agent.
    pub fn cli(&self, args: &[&str]) -> Output {
        Command::new(drover_bin())
            .args(args)
            .env("NOMAD_ADDR", &self.address)
            .stdin(Stdio::null())
            .output()
            .expect("cli runs")
    }

    /// Runs the CLI and returns stdout, failing the test with both streams if it failed.
    pub fn cli_ok(&self, args: &[&str]) -> String {
        let output = self.cli(args);
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(
            output.status.success(),
            "drover {args:?} failed ({}):\nstdout:\n{stdout}\nstderr:\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        stdout
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.address, path)
    }

    /// GET a JSON document from the API.
    pub fn get_json(&self, path: &str) -> serde_json::Value {
        let (status, body) = http("GET", &self.url(path), None);
        assert_eq!(status, 200, "GET {path}: {body}");
        serde_json::from_str(&body).unwrap_or_else(|err| panic!("GET {path}: {err}: {body}"))
    }

    /// Sends SIGKILL to the agent (its tasks keep running under their shims).
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Sends `signal` to the agent process (SIGSTOP / SIGCONT to freeze and resume it).
    pub fn signal(&self, signal: nix::sys::signal::Signal) {
        let child = self.child.as_ref().expect("agent running");
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        nix::sys::signal::kill(pid, signal).expect("signal agent");
    }

    /// Sends SIGTERM and waits for a graceful exit.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("agent running");
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("signal agent");
        wait_for("agent exits after SIGTERM", Duration::from_secs(60), || {
            child.try_wait().ok().flatten()
        })
    }

    pub fn stdout_lines(&self) -> Vec<String> {
        self.stdout_log.lock().expect("log lock").clone()
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        // Ask the agent which allocations it has while it still answers: isolated tasks are
        // found by their cgroup, named after the allocation.
        let alloc_ids: Vec<String> = if self.child.is_some() {
            let (status, body) = http("GET", &self.url("/v1/allocations"), None);
            serde_json::from_str::<serde_json::Value>(&body)
                .ok()
                .filter(|_| status == 200)
                .and_then(|list| list.as_array().cloned())
                .unwrap_or_default()
                .iter()
                .filter_map(|alloc| alloc["ID"].as_str().map(str::to_owned))
                .collect()
        } else {
            Vec::new()
        };
        self.stop_process();
        kill_tasks_of_allocs(&alloc_ids);
        remove_task_cgroups(&alloc_ids);
        if !self.data_dir.as_os_str().is_empty() {
            clean_up_after(&self.data_dir);
        }
    }
}

/// Kills every process in a cgroup named after one of these allocations.
pub fn kill_tasks_of_allocs(alloc_ids: &[String]) {
    if alloc_ids.is_empty() {
        return;
    }
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
        if alloc_ids
            .iter()
            .any(|alloc_id| cgroup.contains(&format!("/{alloc_id}.")))
        {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// Kills every process that belongs to a data dir (shims and tasks) and unmounts what the
/// client mounted there, so a failed test leaves nothing behind.
pub fn clean_up_after(data_dir: &Path) {
    let needle = data_dir.to_string_lossy().into_owned();
    let alloc_dir_var = format!("NOMAD_ALLOC_DIR={needle}");
    // Tasks of isolated drivers see their alloc dir as `/alloc`; find them by their cgroup,
    // which is named after their allocation.
    let alloc_ids: Vec<String> = std::fs::read_dir(data_dir.join("alloc"))
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|entry| entry.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<i32>().ok())
            else {
                continue;
            };
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
            let owned = String::from_utf8_lossy(&cmdline).contains(&needle)
                || String::from_utf8_lossy(&environ)
                    .split('\0')
                    .any(|var| var.starts_with(&alloc_dir_var))
                || alloc_ids
                    .iter()
                    .any(|alloc_id| cgroup.contains(&format!("/{alloc_id}.")));
            if owned {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }
    remove_task_cgroups(&alloc_ids);
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut targets: Vec<&str> = mounts
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .filter(|target| target.starts_with(needle.as_str()))
        .collect();
    targets.sort_by_key(|target| std::cmp::Reverse(target.len()));
    for target in targets {
        let _ = nix::mount::umount2(target, nix::mount::MntFlags::MNT_DETACH);
    }
}

/// Removes the task cgroups of these allocations (`<alloc>.<task>` under every controller's
/// `drover` parent and its `reserved` dir) once the processes killed in them are gone: an agent
/// killed by a test never gets to remove them itself.
pub fn remove_task_cgroups(alloc_ids: &[String]) {
    if alloc_ids.is_empty() {
        return;
    }
    let mut parents = vec![PathBuf::from("/sys/fs/cgroup/drover")];
    if let Ok(controllers) = std::fs::read_dir("/sys/fs/cgroup") {
        parents.extend(
            controllers
                .flatten()
                .map(|entry| entry.path().join("drover")),
        );
    }
    let mut left: Vec<PathBuf> = parents
        .iter()
        .flat_map(|parent| [parent.clone(), parent.join("reserved")])
        .filter_map(|dir| std::fs::read_dir(dir).ok())
        .flat_map(|entries| entries.flatten().map(|entry| entry.path()))
        .filter(|path| {
            path.file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| {
                    alloc_ids
                        .iter()
                        .any(|alloc_id| name.starts_with(&format!("{alloc_id}.")))
                })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !left.is_empty() && Instant::now() < deadline {
        left.retain(|dir| std::fs::remove_dir(dir).is_err() && dir.exists());
        if !left.is_empty() {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Agent {
    fn stop_process(&mut self) {
        if let Some(child) = self.child.as_ref() {
            let pid = nix::unistd::Pid::from_raw(child.id() as i32);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
            let deadline = Instant::now() + Duration::from_secs(30);
            if let Some(mut child) = self.child.take() {
                while Instant::now() < deadline {
                    if let Ok(Some(_)) = child.try_wait() {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// Polls `probe` every 50 ms until it returns `Some`, or panics after `limit`.
pub fn wait_for<T>(what: &str, limit: Duration, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = probe() {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A minimal blocking HTTP/1.1 client for tests: returns (status, body).
pub fn http(method: &str, url: &str, body: Option<&str>) -> (u16, String) {
    http_as(method, url, None, body)
}

/// [`http`] with an ACL token (`X-Nomad-Token`) when one is given.
pub fn http_as(method: &str, url: &str, token: Option<&str>, body: Option<&str>) -> (u16, String) {
    let (status, _, body) = http_with_head(method, url, token, body);
    (status, body)
}

/// A GET's status, its `X-Nomad-Index` (the header must be there) and its body.
pub fn get_indexed(url: &str, token: Option<&str>) -> (u16, u64, String) {
    let (status, head, body) = http_with_head("GET", url, token, None);
    let index = head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("x-nomad-index").then(|| {
                value
                    .trim()
                    .parse::<u64>()
                    .expect("a numeric X-Nomad-Index")
            })
        })
        .unwrap_or_else(|| panic!("GET {url} answered no X-Nomad-Index:\n{head}"));
    (status, index, body)
}

/// [`http_as`] that also answers the response's status line and headers.
pub fn http_with_head(
    method: &str,
    url: &str,
    token: Option<&str>,
    body: Option<&str>,
) -> (u16, String, String) {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").expect("http url");
    let (host, path) = match rest.find('/') {
        Some(slash) => (&rest[..slash], &rest[slash..]),
        None => (rest, "/"),
    };
    let mut stream = std::net::TcpStream::connect(host).expect("connect to agent");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    let body = body.unwrap_or("");
    let token_header = token
        .map(|token| format!("X-Nomad-Token: {token}\r\n"))
        .unwrap_or_default();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n{token_header}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("write request");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("read response");
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .expect("status code");
    let chunked = head
        .lines()
        .any(|line| line.eq_ignore_ascii_case("transfer-encoding: chunked"));
    let body = if chunked {
        dechunk(rest)
    } else {
        rest.to_owned()
    };
    (status, head.to_owned(), body)
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

/// Whether a process with this pid exists (and is not a zombie).
pub fn process_alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(") ")
            .map(|(_, rest)| !rest.starts_with('Z'))
            .unwrap_or(false),
        Err(_) => false,
    }
}

/// Pids of every process whose command line contains `needle`.
pub fn pids_with_cmdline(needle: &str) -> Vec<i32> {
    let mut pids = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<i32>().ok())
            else {
                continue;
            };
            if let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) {
                let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
                if cmdline.contains(needle) && process_alive(pid) {
                    pids.push(pid);
                }
            }
        }
    }
    pids
}

/// Writes a jobspec into a temp file and returns its path (kept alive by the returned dir).
pub fn write_jobspec(name: &str, text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join(name);
    std::fs::write(&path, text).expect("write jobspec");
    (dir, path)
}

/// `text` with everything but ASCII letters and digits percent-encoded (a query value).
pub fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|byte| {
            if byte.is_ascii_alphanumeric() {
                (byte as char).to_string()
            } else {
                format!("%{byte:02X}")
            }
        })
        .collect()
}

/// The exec websocket URL of `command` in task `server` of `alloc_id`, on the agent at
/// `address` (`http://host:port`).
pub fn exec_url(address: &str, alloc_id: &str, command: &[&str], tty: bool) -> String {
    format!(
        "{}/v1/client/allocation/{alloc_id}/exec?task=server&tty={tty}&command={}",
        address.replacen("http", "ws", 1),
        percent_encode(&serde_json::json!(command).to_string())
    )
}

/// How an exec websocket session ended.
#[derive(Debug)]
pub struct ExecOutcome {
    pub stdout: String,
    pub exit_code: i64,
    /// The code of the close frame that followed the exit (none if the connection just ended).
    pub close_code: Option<u16>,
}

/// Runs one exec websocket session at `url`: sends `frames` first, then collects stdout until
/// `exited` and the close frame after it.
pub async fn exec_websocket_outcome(url: &str, frames: Vec<serde_json::Value>) -> ExecOutcome {
    use base64::Engine;
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let (mut socket, _) = tokio_tungstenite::connect_async(url)
        .await
        .unwrap_or_else(|error| panic!("exec websocket {url}: {error}"));
    for frame in frames {
        socket
            .send(Message::Text(frame.to_string().into()))
            .await
            .unwrap();
    }
    let mut stdout = Vec::new();
    let mut exit_code = None;
    while let Some(message) = socket.next().await {
        match message {
            Ok(Message::Text(text)) => {
                let value: serde_json::Value = serde_json::from_str(text.as_str()).unwrap();
                if let Some(data) = value["stdout"]["data"].as_str() {
                    stdout.extend(
                        base64::engine::general_purpose::STANDARD
                            .decode(data)
                            .unwrap(),
                    );
                }
                if value["exited"] == true {
                    exit_code = Some(value["result"]["exit_code"].as_i64().unwrap_or(0));
                }
            }
            Ok(Message::Close(frame)) => {
                let exit_code = exit_code.expect("an exit frame before the close frame");
                return ExecOutcome {
                    stdout: String::from_utf8_lossy(&stdout).into_owned(),
                    exit_code,
                    close_code: frame.map(|frame| u16::from(frame.code)),
                };
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    ExecOutcome {
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        exit_code: exit_code.expect("the session ended without an exit frame"),
        close_code: None,
    }
}

/// Runs one exec websocket session (see [`exec_websocket_outcome`]): its stdout and exit code.
pub async fn exec_websocket_session(
    address: &str,
    alloc_id: &str,
    command: &[&str],
    tty: bool,
    frames: Vec<serde_json::Value>,
) -> (String, i64) {
    let outcome = exec_websocket_outcome(&exec_url(address, alloc_id, command, tty), frames).await;
    (outcome.stdout, outcome.exit_code)
}

/// The HTTP status and body with which an exec websocket request at `url` is refused before
/// any upgrade.
pub async fn exec_websocket_refusal(url: &str) -> (u16, String) {
    match tokio_tungstenite::connect_async(url).await {
        Ok(_) => panic!("exec websocket {url} was accepted"),
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            let body = response
                .body()
                .as_ref()
                .map(|body| String::from_utf8_lossy(body).into_owned())
                .unwrap_or_default();
            (response.status().as_u16(), body)
        }
        Err(error) => panic!("exec websocket {url}: {error}"),
    }
}

/// The close code and reason with which an exec websocket session at `url` is ended by the
/// agent before any exit (an error after the upgrade).
pub async fn exec_websocket_close(url: &str) -> (u16, String) {
    use futures_util::StreamExt;
    use tokio_tungstenite::tungstenite::Message;
    let (mut socket, _) = tokio_tungstenite::connect_async(url)
        .await
        .unwrap_or_else(|error| panic!("exec websocket {url}: {error}"));
    while let Some(message) = socket.next().await {
        match message {
            Ok(Message::Close(Some(frame))) => {
                return (u16::from(frame.code), frame.reason.as_str().to_owned());
            }
            Ok(Message::Close(None)) | Err(_) => break,
            Ok(_) => {}
        }
    }
    panic!("exec websocket {url} ended without a close frame");
}

/// Writes an agent config file `name` into `dir` (made if missing); answers its path.
pub fn agent_config(dir: &Path, name: &str, text: &str) -> String {
    std::fs::create_dir_all(dir).expect("config dir");
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write agent config");
    path.display().to_string()
}

/// A server-only agent and two client-only agents (`node-a`, `node-b`) under `temp`, each its
/// own process; answers them and the two nodes' IDs once both are ready (within `limit`).
pub fn server_and_two_clients(temp: &Path, limit: Duration) -> (Agent, Vec<Agent>, String, String) {
    let server_data = temp.join("server").join("data");
    let config = agent_config(
        &temp.join("server"),
        "server.hcl",
        "client {\n  enabled = false\n}\n",
    );
    let server = Agent::start_server(&server_data, &[&format!("-config={config}")]);
    let server_addr = server.address.trim_start_matches("http://").to_owned();
    let mut clients = Vec::new();
    for name in ["node-a", "node-b"] {
        let dir = temp.join(name);
        let config = agent_config(
            &dir,
            "client.hcl",
            &format!("name = \"{name}\"\nserver {{\n  enabled = false\n}}\n"),
        );
        clients.push(Agent::start_with(
            &dir.join("data"),
            &[
                "-client",
                &format!("-servers={server_addr}"),
                &format!("-config={config}"),
            ],
        ));
    }
    let (a, b) = wait_for("both client nodes to be ready", limit, || {
        let nodes = server.get_json("/v1/nodes");
        let nodes = nodes.as_array().cloned().unwrap_or_default();
        let id = |name: &str| {
            nodes
                .iter()
                .find(|node| node["Name"] == name && node["Status"] == "ready")
                .and_then(|node| node["ID"].as_str().map(str::to_owned))
        };
        Some((id("node-a")?, id("node-b")?))
    });
    (server, clients, a, b)
}

/// Where the group network tests find the CNI reference plugins (Debian's
/// containernetworking-plugins).
pub const CNI_PLUGIN_DIR: &str = "/usr/lib/cni";

/// Whether the group network tests named `what` can run: root, the CNI reference plugins,
/// iptables, and each of `files` (a path and the package that installs it). Under CI a missing
/// one fails the test, naming it; elsewhere it is skipped.
pub fn group_network_prerequisites(what: &str, files: &[(&str, &str)]) -> bool {
    let mut missing = Vec::new();
    if !nix::unistd::Uid::effective().is_root() {
        missing.push("root".to_string());
    }
    for plugin in ["bridge", "host-local", "loopback", "firewall", "portmap"] {
        if !Path::new(CNI_PLUGIN_DIR).join(plugin).is_file() {
            missing.push(format!(
                "{CNI_PLUGIN_DIR}/{plugin} (apt-get install containernetworking-plugins)"
            ));
        }
    }
    if Command::new("iptables")
        .arg("--version")
        .output()
        .map(|output| !output.status.success())
        .unwrap_or(true)
    {
        missing.push("iptables (apt-get install iptables)".to_string());
    }
    for (path, package) in files {
        if !Path::new(path).is_file() {
            missing.push(format!("{path} (apt-get install {package})"));
        }
    }
    if missing.is_empty() {
        return true;
    }
    assert!(
        std::env::var("CI").is_err(),
        "{what} need {}",
        missing.join(", ")
    );
    eprintln!("skipping: {what} need {}", missing.join(", "));
    false
}
