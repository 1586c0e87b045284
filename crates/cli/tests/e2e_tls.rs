//! End to end: TLS towards the outside. A real HTTPS server (`openssl s_server -WWW`, with a
//! certificate made here for `localhost` and 127.0.0.1) serves a file; the real agent, told to
//! trust that certificate through `SSL_CERT_FILE` as OpenSSL reads it, fetches the file as an
//! https artifact before the task starts, and runs an https check against the same server that
//! verifies it under `tls_server_name = "localhost"` while connecting to the node's address.
//! A second server whose certificate nothing trusts fails the artifact, naming the certificate,
//! until the artifact says `insecure = true`.
//!
//! Not here: status-code rules and `tls_skip_verify` (unit tests of the client's checks), the
//! artifact cache (unit tests of `drover_client::artifact`).

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod support;

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use support::{Agent, wait_for, write_jobspec};

const LIMIT: Duration = Duration::from_secs(120);

/// An `openssl s_server -WWW` serving `dir` with its own certificate; killed on drop.
struct HttpsServer {
    child: Child,
    port: u16,
}

impl Drop for HttpsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn make_certificate(dir: &Path, name: &str) {
    let made = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
        .arg("ec_paramgen_curve:prime256v1")
        .args(["-nodes", "-days", "1", "-subj", "/CN=localhost", "-addext"])
        .arg("subjectAltName=DNS:localhost,IP:127.0.0.1")
        .arg("-keyout")
        .arg(dir.join(format!("{name}.key")))
        .arg("-out")
        .arg(dir.join(format!("{name}.pem")))
        .output()
        .expect("the openssl command (package openssl)");
    assert!(
        made.status.success(),
        "openssl req: {}",
        String::from_utf8_lossy(&made.stderr)
    );
}

fn serve(dir: &Path, name: &str) -> HttpsServer {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new("openssl")
        .args(["s_server", "-quiet", "-WWW", "-accept"])
        .arg(port.to_string())
        .arg("-cert")
        .arg(dir.join(format!("{name}.pem")))
        .arg("-key")
        .arg(dir.join(format!("{name}.key")))
        .current_dir(dir.join("www"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("openssl s_server");
    wait_for("the https server to listen", LIMIT, || {
        std::net::TcpStream::connect(("127.0.0.1", port))
            .ok()
            .map(|_| ())
    });
    HttpsServer { child, port }
}

fn allocs(agent: &Agent, job_id: &str) -> Vec<Value> {
    agent
        .get_json(&format!("/v1/job/{job_id}/allocations"))
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn events(alloc: &Value) -> Vec<Value> {
    alloc["TaskStates"]
        .as_object()
        .into_iter()
        .flat_map(|states| states.values())
        .flat_map(|state| state["Events"].as_array().cloned().unwrap_or_default())
        .collect()
}

#[test]
fn https_artifacts_and_checks_verify_the_server_against_the_trusted_roots() {
    let temp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(temp.path().join("www")).unwrap();
    std::fs::write(temp.path().join("www/tool.txt"), "fetched over tls\n").unwrap();
    make_certificate(temp.path(), "trusted");
    make_certificate(temp.path(), "stranger");
    let trusted = serve(temp.path(), "trusted");
    let stranger = serve(temp.path(), "stranger");
    let roots = temp.path().join("trusted.pem");
    let agent = Agent::start_dev_with_env(&[("SSL_CERT_FILE", roots.to_str().unwrap())]);

    let (_dir, spec) = write_jobspec(
        "tls.hcl",
        &format!(
            r#"job "tls" {{
  datacenters = ["dc1"]
  group "g" {{
    network {{
      port "tls" {{
        static = {port}
      }}
    }}
    service {{
      name     = "tls-check"
      provider = "nomad"
      port     = "tls"
      check {{
        type            = "http"
        protocol        = "https"
        path            = "/tool.txt"
        tls_server_name = "localhost"
        interval        = "1s"
        timeout         = "5s"
      }}
    }}
    task "t" {{
      driver = "raw_exec"
      artifact {{
        source      = "https://127.0.0.1:{port}/tool.txt"
        destination = "local/tool.txt"
        mode        = "file"
      }}
      config {{
        command = "/bin/sh"
        args    = ["-c", "cat local/tool.txt; exec sleep 600"]
      }}
    }}
  }}
}}
"#,
            port = trusted.port
        ),
    );
    agent.cli_ok(&["job", "run", "-detach", spec.to_str().unwrap()]);
    let alloc_id = wait_for("the task to run", LIMIT, || {
        allocs(&agent, "tls")
            .iter()
            .find(|alloc| alloc["ClientStatus"] == "running")
            .map(|alloc| alloc["ID"].as_str().unwrap().to_owned())
    });
    let logs = wait_for("the artifact's content in the task's output", LIMIT, || {
        let out = agent.cli(&["alloc", "logs", &alloc_id, "t"]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.contains("fetched over tls").then_some(text)
    });
    assert_eq!(logs.trim(), "fetched over tls");
    wait_for("the https check to pass", LIMIT, || {
        let checks = agent.get_json(&format!("/v1/client/allocation/{alloc_id}/checks"));
        let results: Vec<&Value> = checks.as_object()?.values().collect();
        (results.len() == 1 && results[0]["Status"] == "success").then_some(())
    });

    // A server nothing vouches for: the download fails and names the certificate.
    let untrusted = |insecure: bool| {
        format!(
            r#"job "stranger" {{
  datacenters = ["dc1"]
  group "g" {{
    restart {{
      attempts = 0
      mode     = "fail"
    }}
    reschedule {{
      attempts  = 0
      unlimited = false
    }}
    task "t" {{
      driver = "raw_exec"
      artifact {{
        source      = "https://127.0.0.1:{port}/tool.txt"
        destination = "local/tool.txt"
        mode        = "file"
        insecure    = {insecure}
      }}
      config {{
        command = "/bin/sh"
        args    = ["-c", "cat local/tool.txt; exec sleep 600"]
      }}
    }}
  }}
}}
"#,
            port = stranger.port
        )
    };
    let (_dir, spec) = write_jobspec("stranger.hcl", &untrusted(false));
    agent.cli_ok(&["job", "run", "-detach", spec.to_str().unwrap()]);
    let message = wait_for("the download to fail", LIMIT, || {
        allocs(&agent, "stranger").iter().find_map(|alloc| {
            events(alloc)
                .iter()
                .find(|event| event["Type"] == "Failed Artifact Download")
                .map(|event| event["DisplayMessage"].as_str().unwrap_or("").to_owned())
        })
    });
    assert!(message.to_lowercase().contains("certificate"), "{message}");
    agent.cli_ok(&["job", "stop", "-purge", "stranger"]);
    let (_dir, spec) = write_jobspec("stranger.hcl", &untrusted(true));
    agent.cli_ok(&["job", "run", "-detach", spec.to_str().unwrap()]);
    wait_for("the insecure download to run the task", LIMIT, || {
        allocs(&agent, "stranger")
            .iter()
            .any(|alloc| alloc["ClientStatus"] == "running")
            .then_some(())
    });
    agent.cli_ok(&["job", "stop", "-purge", "tls"]);
    agent.cli_ok(&["job", "stop", "-purge", "stranger"]);
}
