//! One run of one check: an HTTP request, a TCP connect, or a script run inside its task, each
//! bounded by the check's timeout, answering an [`Outcome`], a status code and Nomad's output.
//!
//! - `http`: 2xx succeeds (output `nomad: http ok` for a 200, else the body), 429 warns (as
//!   Consul does), anything else fails with the body as output; at most [`OUTPUT_LIMIT`] bytes
//!   of it are kept. Errors read `nomad: <error>`.
//! - `tcp`: a connect within the timeout succeeds (`nomad: tcp ok`).
//! - `script`: the command runs through `drover-shim exec` in the task's cgroup, namespaces,
//!   root, user and environment (the path of `alloc exec`); exit 0 succeeds, 1 warns, anything
//!   else fails; stdout and stderr together, of which the last [`OUTPUT_LIMIT`] bytes are kept.
//!
//! Not here: timers, counters, or where the address comes from (see `observer`).

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt;

use super::status::Outcome;
use crate::taskrunner::TaskExecContext;

/// How much check output is kept (Nomad's `CheckBufSize` and HTTP output limit are 3–4 KiB).
pub const OUTPUT_LIMIT: usize = 4 * 1024;

/// What one run found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeResult {
    pub outcome: Outcome,
    pub status_code: i64,
    pub output: String,
}

impl ProbeResult {
    fn failure(output: String) -> Self {
        ProbeResult {
            outcome: Outcome::Failure,
            status_code: 0,
            output,
        }
    }
}

/// An HTTP check, interpolated and with its URL resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpProbe {
    pub url: String,
    pub method: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

/// Runs an HTTP check with the agent's shared client (connections are kept and reused).
pub async fn http(client: &reqwest::Client, probe: &HttpProbe, timeout: Duration) -> ProbeResult {
    let method = if probe.method.is_empty() {
        reqwest::Method::GET
    } else {
        match reqwest::Method::from_bytes(probe.method.to_ascii_uppercase().as_bytes()) {
            Ok(method) => method,
            Err(error) => return ProbeResult::failure(format!("nomad: {error}")),
        }
    };
    let mut request = client.request(method, &probe.url).timeout(timeout);
    for (name, value) in &probe.headers {
        request = request.header(name.as_str(), value.as_str());
    }
    if !probe.body.is_empty() {
        request = request.body(probe.body.clone());
    }
    let response = match request.send().await {
        Ok(response) => response,
        Err(error) => return ProbeResult::failure(format!("nomad: {}", error_chain(&error))),
    };
    let code = response.status().as_u16();
    let outcome = match code {
        200..=299 => Outcome::Success,
        429 => Outcome::Warning,
        _ => Outcome::Failure,
    };
    let output = if code == 200 {
        "nomad: http ok".to_string()
    } else {
        read_limited(response, timeout).await
    };
    ProbeResult {
        outcome,
        status_code: i64::from(code),
        output,
    }
}

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

async fn read_limited(mut response: reqwest::Response, timeout: Duration) -> String {
    let mut body = Vec::new();
    let reading = async {
        while body.len() < OUTPUT_LIMIT {
            match response.chunk().await {
                Ok(Some(chunk)) => body.extend_from_slice(&chunk),
                Ok(None) => break,
                Err(error) => return Err(format!("nomad: {error}")),
            }
        }
        Ok(())
    };
    match tokio::time::timeout(timeout, reading).await {
        Ok(Ok(())) | Err(_) => {
            body.truncate(OUTPUT_LIMIT);
            String::from_utf8_lossy(&body).into_owned()
        }
        Ok(Err(message)) => message,
    }
}

/// Runs a TCP check: a connection to `address` (`host:port`) within `timeout`.
pub async fn tcp(address: &str, timeout: Duration) -> ProbeResult {
    match tokio::time::timeout(timeout, tokio::net::TcpStream::connect(address)).await {
        Ok(Ok(_)) => ProbeResult {
            outcome: Outcome::Success,
            status_code: 0,
            output: "nomad: tcp ok".to_string(),
        },
        Ok(Err(error)) => ProbeResult::failure(format!("dial tcp {address}: {error}")),
        Err(_) => ProbeResult::failure(format!("dial tcp {address}: i/o timeout")),
    }
}

/// Runs a script check's `command` inside the task of `context` through the shim at
/// `shim_binary`. The command's process group is killed when the timeout passes.
pub async fn script(
    shim_binary: PathBuf,
    context: TaskExecContext,
    command: Vec<String>,
    timeout: Duration,
) -> ProbeResult {
    let spec = context.exec_spec(command, false);
    let text = match serde_json::to_string(&spec) {
        Ok(text) => text,
        Err(error) => return ProbeResult::failure(format!("encoding the exec spec: {error}")),
    };
    let mut child = match tokio::process::Command::new(&shim_binary)
        .arg(drover_shim::exec_mode::EXEC_MODE_ARGUMENT)
        .arg(text)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
    {
        Ok(child) => child,
        Err(error) => {
            return ProbeResult::failure(format!("starting {}: {error}", shim_binary.display()));
        }
    };
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let output = std::sync::Arc::new(std::sync::Mutex::new(TailBuffer::default()));
    let pumps: Vec<_> = [
        stdout.map(|pipe| Box::new(pipe) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
        stderr.map(|pipe| Box::new(pipe) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
    ]
    .into_iter()
    .flatten()
    .map(|mut pipe| {
        let output = std::sync::Arc::clone(&output);
        tokio::spawn(async move {
            let mut chunk = [0u8; 4096];
            while let Ok(read) = pipe.read(&mut chunk).await {
                if read == 0 {
                    break;
                }
                if let Ok(mut tail) = output.lock() {
                    tail.push(&chunk[..read]);
                }
            }
        })
    })
    .collect();
    let waited = tokio::time::timeout(timeout, child.wait()).await;
    let code = match waited {
        Ok(Ok(status)) => {
            use std::os::unix::process::ExitStatusExt;
            status
                .code()
                .or_else(|| status.signal().map(|signal| 128 + signal))
                .unwrap_or(2)
        }
        Ok(Err(error)) => return ProbeResult::failure(format!("waiting for the script: {error}")),
        Err(_) => {
            // The shim starts a new session: its pid is the command's process group.
            if let Some(pid) = child.id().and_then(|pid| i32::try_from(pid).ok()) {
                let group = nix::unistd::Pid::from_raw(pid);
                let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
            }
            let _ = child.kill().await;
            pumps.iter().for_each(tokio::task::JoinHandle::abort);
            return ProbeResult::failure(format!(
                "script check timed out after {}",
                humanize(timeout)
            ));
        }
    };
    // A background process holding the pipes must not hold the check.
    for pump in pumps {
        let _ = tokio::time::timeout(Duration::from_secs(1), pump).await;
    }
    let text = output
        .lock()
        .map(|tail| String::from_utf8_lossy(&tail.bytes).into_owned())
        .unwrap_or_default();
    ProbeResult {
        outcome: match code {
            0 => Outcome::Success,
            1 => Outcome::Warning,
            _ => Outcome::Failure,
        },
        status_code: 0,
        output: text,
    }
}

fn humanize(duration: Duration) -> String {
    format!("{}s", duration.as_secs_f64())
}

/// Keeps the last [`OUTPUT_LIMIT`] bytes written to it (a circular buffer, as Nomad's).
#[derive(Debug, Default)]
struct TailBuffer {
    bytes: Vec<u8>,
}

impl TailBuffer {
    fn push(&mut self, data: &[u8]) {
        self.bytes.extend_from_slice(data);
        if self.bytes.len() > OUTPUT_LIMIT {
            let excess = self.bytes.len() - OUTPUT_LIMIT;
            self.bytes.drain(..excess);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    async fn serve_once(status_line: &'static str, body: &'static str) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            if let Ok((mut stream, _)) = listener.accept().await {
                let mut request = [0u8; 2048];
                let _ = stream.read(&mut request).await;
                let response = format!(
                    "HTTP/1.1 {status_line}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(response.as_bytes()).await;
            }
        });
        format!("http://{address}/health")
    }

    fn probe(url: String) -> HttpProbe {
        HttpProbe {
            url,
            method: String::new(),
            headers: Vec::new(),
            body: String::new(),
        }
    }

    #[tokio::test]
    async fn http_maps_status_codes_as_nomad_and_consul_do() {
        let client = reqwest::Client::new();
        let timeout = Duration::from_secs(5);
        let ok = http(&client, &probe(serve_once("200 OK", "fine").await), timeout).await;
        assert_eq!(ok.outcome, Outcome::Success);
        assert_eq!(ok.output, "nomad: http ok");
        assert_eq!(ok.status_code, 200);
        let created = http(
            &client,
            &probe(serve_once("201 Created", "made").await),
            timeout,
        )
        .await;
        assert_eq!(
            (created.outcome, created.output.as_str()),
            (Outcome::Success, "made")
        );
        let busy = http(
            &client,
            &probe(serve_once("429 Too Many Requests", "slow down").await),
            timeout,
        )
        .await;
        assert_eq!(
            (busy.outcome, busy.output.as_str()),
            (Outcome::Warning, "slow down")
        );
        let broken = http(
            &client,
            &probe(serve_once("500 Internal Server Error", "boom").await),
            timeout,
        )
        .await;
        assert_eq!(broken.outcome, Outcome::Failure);
        assert_eq!((broken.status_code, broken.output.as_str()), (500, "boom"));
    }

    #[tokio::test]
    async fn http_and_tcp_fail_on_a_closed_port() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap().to_string();
        drop(listener);
        let timeout = Duration::from_secs(5);
        let failed = tcp(&address, timeout).await;
        assert_eq!(failed.outcome, Outcome::Failure);
        assert!(failed.output.contains(&address), "{}", failed.output);
        let client = reqwest::Client::new();
        let failed = http(&client, &probe(format!("http://{address}/")), timeout).await;
        assert_eq!(failed.outcome, Outcome::Failure);
        assert!(failed.output.starts_with("nomad: "), "{}", failed.output);
    }

    #[tokio::test]
    async fn tcp_succeeds_on_a_listening_port() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let ok = tcp(&address, Duration::from_secs(5)).await;
        assert_eq!(
            (ok.outcome, ok.output.as_str()),
            (Outcome::Success, "nomad: tcp ok")
        );
    }

    #[test]
    fn the_tail_buffer_keeps_the_last_bytes() {
        let mut tail = TailBuffer::default();
        tail.push(&[b'a'; OUTPUT_LIMIT]);
        tail.push(b"end");
        assert_eq!(tail.bytes.len(), OUTPUT_LIMIT);
        assert!(tail.bytes.ends_with(b"aend"));
    }
}
