//! One run of one check: an HTTP request, a TCP connect, or a script run inside its task, each
//! bounded by the check's timeout, answering an [`Outcome`], a status code and Nomad's output.
//!
//! - `http` (plain or over TLS): by Nomad's rules for a `nomad` service, 200 succeeds with the
//!   output `nomad: http ok`, any other status below 400 succeeds with the body as output, 400 and
//!   above fail; by Consul's for a `consul` service, 2xx succeeds, 429 warns, anything else
//!   fails. At most [`OUTPUT_LIMIT`] bytes of a body are kept. Errors read `nomad: <error>`.
//! - `tcp`: a connect within the timeout succeeds (`nomad: tcp ok`).
//! - `script`: the command runs through `drover-shim exec` in the task's cgroup, namespaces,
//!   root, user and environment (the path of `alloc exec`); exit 0 succeeds, 1 warns, anything
//!   else fails; stdout and stderr together, of which the last [`OUTPUT_LIMIT`] bytes are kept.
//!
//! Not here: timers, counters, or where the address comes from (see `observer`).

use std::path::PathBuf;
use std::time::Duration;

use super::status::Outcome;
use crate::error_text::error_chain;
use crate::taskrunner::TaskExecContext;
use crate::taskrunner::exec_context::{ScriptError, ScriptRun, run_in_task};

/// How much check output is kept (Nomad's `CheckBufSize` and HTTP output limit are 3–4 KiB).
pub use crate::taskrunner::exec_context::OUTPUT_LIMIT;

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

/// An HTTP check, interpolated, with its URL resolved and its request parts parsed once (a
/// check sends the same request every interval).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpProbe {
    url: reqwest::Url,
    method: reqwest::Method,
    headers: reqwest::header::HeaderMap,
    body: bytes::Bytes,
}

impl HttpProbe {
    /// The request to `url` with `method` (GET when empty, any case), `headers` and `body`;
    /// the output of the check's failure when a part does not parse.
    pub fn new(
        url: &str,
        method: &str,
        headers: &[(String, String)],
        body: &str,
    ) -> Result<HttpProbe, String> {
        let method = if method.is_empty() {
            reqwest::Method::GET
        } else {
            reqwest::Method::from_bytes(method.to_ascii_uppercase().as_bytes())
                .map_err(|error| format!("nomad: {error}"))?
        };
        let url = reqwest::Url::parse(url).map_err(|error| format!("nomad: {url}: {error}"))?;
        let mut map = reqwest::header::HeaderMap::new();
        for (name, value) in headers {
            let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                .map_err(|error| format!("nomad: header {name:?}: {error}"))?;
            let value = reqwest::header::HeaderValue::from_str(value)
                .map_err(|error| format!("nomad: header {name}: {error}"))?;
            map.append(name, value);
        }
        Ok(HttpProbe {
            url,
            method,
            headers: map,
            body: bytes::Bytes::copy_from_slice(body.as_bytes()),
        })
    }
}

/// Whose rules turn an HTTP status into an outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpRules {
    /// Nomad's built-in checks: below 400 passes.
    Nomad,
    /// Consul's agent checks: 2xx passes, 429 warns.
    Consul,
}

impl HttpRules {
    fn outcome(self, code: u16) -> Outcome {
        match (self, code) {
            (HttpRules::Nomad, 0..=399) | (HttpRules::Consul, 200..=299) => Outcome::Success,
            (HttpRules::Consul, 429) => Outcome::Warning,
            _ => Outcome::Failure,
        }
    }
}

/// Runs an HTTP check with `client` (the agent's shared ones keep connections for reuse).
pub async fn http(
    client: &reqwest::Client,
    probe: &HttpProbe,
    timeout: Duration,
    rules: HttpRules,
) -> ProbeResult {
    let mut request = client
        .request(probe.method.clone(), probe.url.clone())
        .headers(probe.headers.clone())
        .timeout(timeout);
    if !probe.body.is_empty() {
        request = request.body(probe.body.clone());
    }
    let response = match request.send().await {
        Ok(response) => response,
        Err(error) => return ProbeResult::failure(format!("nomad: {}", error_chain(&error))),
    };
    let code = response.status().as_u16();
    let outcome = rules.outcome(code);
    // The body is read either way: a response read to its end leaves its connection open for
    // the next probe, where a dropped one closes it (a new TCP connection every interval).
    let body = read_limited(response, timeout).await;
    let output = if code == 200 {
        "nomad: http ok".to_string()
    } else {
        body
    };
    ProbeResult {
        outcome,
        status_code: i64::from(code),
        output,
    }
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
    match run_in_task(shim_binary, context, command, timeout).await {
        Ok(ScriptRun { code, output }) => ProbeResult {
            outcome: match code {
                0 => Outcome::Success,
                1 => Outcome::Warning,
                _ => Outcome::Failure,
            },
            status_code: 0,
            output,
        },
        Err(ScriptError::TimedOut) => ProbeResult::failure(format!(
            "script check timed out after {}",
            humanize(timeout)
        )),
        Err(ScriptError::Failed(message)) => ProbeResult::failure(message),
    }
}

fn humanize(duration: Duration) -> String {
    format!("{}s", duration.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

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
        HttpProbe::new(&url, "", &[], "").unwrap()
    }

    #[tokio::test]
    async fn http_maps_status_codes_by_nomads_and_consuls_rules() {
        let timeout = Duration::from_secs(5);
        let cases = [
            (
                "200 OK",
                "fine",
                HttpRules::Nomad,
                Outcome::Success,
                "nomad: http ok",
            ),
            (
                "200 OK",
                "fine",
                HttpRules::Consul,
                Outcome::Success,
                "nomad: http ok",
            ),
            (
                "201 Created",
                "made",
                HttpRules::Nomad,
                Outcome::Success,
                "made",
            ),
            (
                "201 Created",
                "made",
                HttpRules::Consul,
                Outcome::Success,
                "made",
            ),
            (
                "302 Found",
                "moved",
                HttpRules::Nomad,
                Outcome::Success,
                "moved",
            ),
            (
                "302 Found",
                "moved",
                HttpRules::Consul,
                Outcome::Failure,
                "moved",
            ),
            (
                "429 Too Many Requests",
                "slow",
                HttpRules::Nomad,
                Outcome::Failure,
                "slow",
            ),
            (
                "429 Too Many Requests",
                "slow",
                HttpRules::Consul,
                Outcome::Warning,
                "slow",
            ),
            (
                "500 Internal Server Error",
                "boom",
                HttpRules::Nomad,
                Outcome::Failure,
                "boom",
            ),
            (
                "500 Internal Server Error",
                "boom",
                HttpRules::Consul,
                Outcome::Failure,
                "boom",
            ),
        ];
        for (status_line, body, rules, outcome, output) in cases {
            // A 3xx is answered, not followed: the check sees the status itself.
            let result = http(
                &client_no_redirects(),
                &probe(serve_once(status_line, body).await),
                timeout,
                rules,
            )
            .await;
            assert_eq!(
                (result.outcome, result.output.as_str()),
                (outcome, output),
                "{status_line} under {rules:?}"
            );
            let code: i64 = status_line[..3].parse().unwrap();
            assert_eq!(result.status_code, code);
        }
    }

    fn client_no_redirects() -> reqwest::Client {
        reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap()
    }

    #[tokio::test]
    async fn https_checks_verify_the_certificate_unless_told_to_skip() {
        let server = crate::testing_tls::serve("checks.test", "200 OK", b"fine".to_vec()).await;
        let timeout = Duration::from_secs(5);
        let url = format!("https://{}/health", server.address);
        let verifying = reqwest::Client::new();
        let refused = http(&verifying, &probe(url.clone()), timeout, HttpRules::Nomad).await;
        assert_eq!(refused.outcome, Outcome::Failure);
        assert!(refused.output.starts_with("nomad: "), "{}", refused.output);
        assert!(
            refused.output.to_lowercase().contains("certificate"),
            "{}",
            refused.output
        );
        let skipping = reqwest::Client::builder()
            .tls_danger_accept_invalid_certs(true)
            .build()
            .unwrap();
        let passed = http(&skipping, &probe(url), timeout, HttpRules::Nomad).await;
        assert_eq!(
            (passed.outcome, passed.output.as_str()),
            (Outcome::Success, "nomad: http ok")
        );
        // Trusting the certificate, the server name is what the handshake verifies: by IP
        // it fails, by the certificate's name (resolved to the server) it passes.
        let cert =
            reqwest::Certificate::from_pem(&std::fs::read(&server.cert_pem).unwrap()).unwrap();
        let trusting = reqwest::Client::builder()
            .add_root_certificate(cert)
            .resolve("checks.test", server.address)
            .build()
            .unwrap();
        let by_ip = format!("https://{}/health", server.address);
        let mismatch = http(&trusting, &probe(by_ip), timeout, HttpRules::Nomad).await;
        assert_eq!(mismatch.outcome, Outcome::Failure, "{}", mismatch.output);
        let by_name = format!("https://checks.test:{}/health", server.address.port());
        let named = http(&trusting, &probe(by_name), timeout, HttpRules::Nomad).await;
        assert_eq!(named.outcome, Outcome::Success, "{}", named.output);
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
        let failed = http(
            &client,
            &probe(format!("http://{address}/")),
            timeout,
            HttpRules::Nomad,
        )
        .await;
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
}
