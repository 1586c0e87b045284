//! End to end: `drover monitor` streams the agent's log live (`/v1/agent/monitor`), at the
//! level it asks for whatever the agent's own, as text or JSON lines; a bad level is refused.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use support::{Agent, drover_bin, http, write_jobspec};

const LIMIT: Duration = Duration::from_secs(60);

/// A running `drover monitor` whose stdout lines arrive on a channel.
struct Monitor {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Monitor {
    fn start(agent: &Agent, args: &[&str]) -> Monitor {
        let mut child = Command::new(drover_bin())
            .arg("monitor")
            .args(args)
            .env("NOMAD_ADDR", &agent.address)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("monitor starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        Monitor { child, lines }
    }

    /// The first line `matches` accepts, within the limit.
    fn wait_for_line(&self, what: &str, matches: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + LIMIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if matches(&line) => return line,
                Ok(_) => {}
                Err(_) => panic!("timed out waiting for {what} on the monitor stream"),
            }
        }
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn monitor_streams_the_log_line_of_a_job_registration_as_text_and_json() {
    let agent = Agent::start_ephemeral();
    let text = Monitor::start(&agent, &["-log-level=DEBUG"]);
    let json = Monitor::start(&agent, &["-log-level=debug", "-json"]);
    // Both streams are open once each shows a request made after it started.
    let deadline = Instant::now() + LIMIT;
    let mut text_ready = false;
    let mut json_ready = false;
    while !(text_ready && json_ready) {
        assert!(
            Instant::now() < deadline,
            "the monitors never showed a line"
        );
        let (status, _) = http("GET", &agent.url("/v1/jobs"), None);
        assert_eq!(status, 200);
        text_ready |= text.lines.recv_timeout(Duration::from_millis(200)).is_ok();
        json_ready |= json.lines.recv_timeout(Duration::from_millis(200)).is_ok();
    }

    let (_dir, path) = write_jobspec(
        "monitored.hcl",
        r#"job "monitored" {
  type = "batch"
  group "g" {
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
    }
  }
}
"#,
    );
    agent.cli_ok(&["job", "run", "-detach", &path.to_string_lossy()]);

    let line = text.wait_for_line("the job registration in text", |line| {
        line.contains("job registered") && line.contains("job_id=monitored")
    });
    assert!(line.contains("[DEBUG]"), "{line}");
    let line = json.wait_for_line("the job registration as JSON", |line| {
        line.contains("job registered")
    });
    let record: serde_json::Value = serde_json::from_str(&line).expect("a JSON line");
    assert_eq!(record["@level"], "debug");
    assert_eq!(record["@message"], "job registered");
    assert_eq!(record["job_id"], "monitored");
}

#[test]
fn an_unknown_log_level_is_refused_with_400() {
    let agent = Agent::start_ephemeral();
    let (status, body) = http("GET", &agent.url("/v1/agent/monitor?log_level=loud"), None);
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("Unknown log level: loud"), "{body}");
    let output = agent.cli(&["monitor", "-log-level=loud"]);
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("Unknown log level"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
