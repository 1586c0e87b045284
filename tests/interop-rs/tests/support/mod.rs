//! Starting a real drover dev agent ($DROVER_BIN) on a free port for the tests, a
//! `nomad-client-rs` client for it, and bounded waiting.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use nomad_client_rs::{Config, Connection, Credential, NomadClient};

/// How long anything a test waits for may take.
pub const LIMIT: Duration = Duration::from_secs(60);

/// A running `drover agent -dev`, stopped (its tasks with it) when dropped.
pub struct Agent {
    child: Child,
    pub address: String,
    _config_dir: tempfile_dir::TempDir,
}

impl Agent {
    /// Starts an agent; `config` is an agent configuration file's text (empty for none).
    pub fn start(config: &str) -> Agent {
        let binary = std::env::var("DROVER_BIN").unwrap_or_else(|_| "drover".to_owned());
        let config_dir = tempfile_dir::TempDir::new();
        let mut command = Command::new(&binary);
        command.args(["agent", "-dev", "-http-port=0"]);
        if !config.is_empty() {
            let path = config_dir.path().join("agent.hcl");
            std::fs::write(&path, config).expect("write the agent config");
            command.arg(format!("-config={}", path.display()));
        }
        // Tasks inherit the agent's environment: nothing of the caller's Nomad settings.
        let mut child = command
            .env_remove("NOMAD_ADDR")
            .env_remove("NOMAD_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|error| panic!("starting {binary}: {error}"));
        let stdout = child.stdout.take().expect("piped stdout");
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if !sent && let Some(start) = line.find("http://") {
                    let address = line[start..]
                        .split_whitespace()
                        .next()
                        .unwrap_or_default()
                        .to_owned();
                    let _ = sender.send(address);
                    sent = true;
                }
            }
        });
        let address = receiver
            .recv_timeout(LIMIT)
            .expect("the agent prints its HTTP address");
        Agent {
            child,
            address,
            _config_dir: config_dir,
        }
    }

    /// A client of this agent's HTTP API, with an ACL token if given.
    pub fn client(&self, token: Option<&str>) -> NomadClient {
        drover_interop_rs::install_crypto_provider();
        NomadClient::new(Config {
            connection: Connection::HttpApi {
                address: self.address.clone(),
                credential: token.map(|token| Credential::AclToken(token.to_owned())),
            },
            ..Config::default()
        })
        .expect("a client for the agent")
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        // SIGTERM: a dev agent without a data dir stops its tasks and removes their dirs.
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        for _ in 0..600 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `probe` every 100 ms until it answers `Some`, failing the test after [`LIMIT`].
pub async fn wait_for<T, F, P>(what: &str, mut probe: P) -> T
where
    P: FnMut() -> F,
    F: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + LIMIT;
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {LIMIT:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A directory removed when dropped (no dependency for so little).
pub mod tempfile_dir {
    use std::path::{Path, PathBuf};

    pub struct TempDir(PathBuf);

    impl TempDir {
        pub fn new() -> TempDir {
            use std::sync::atomic::{AtomicU64, Ordering};
            static NEXT: AtomicU64 = AtomicU64::new(0);
            let path = std::env::temp_dir().join(format!(
                "drover-interop-rs-{}-{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::create_dir_all(&path).expect("temp dir");
            TempDir(path)
        }

        pub fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// A plain HTTP request, for what the client has no call for (the ACL bootstrap, a job with
/// blocks its typed `Job` does not carry): (status, body).
pub fn request(address: &str, method: &str, path: &str, body: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let host = address.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(host).expect("connect to the agent");
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("send the request");
    let mut raw = String::new();
    stream.read_to_string(&mut raw).expect("read the answer");
    let status = raw
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .expect("a status code");
    let body = raw
        .split_once("\r\n\r\n")
        .map(|(_, body)| body)
        .unwrap_or("");
    (status, body.to_owned())
}
