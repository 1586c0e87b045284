//! `check-cpu --checks N`: the agent's CPU while it runs N `http` service checks at a 10 s
//! interval against one task's HTTP server (python3's threaded server answering HTTP/1.0, so
//! every probe opens a TCP connection: the costly case). Measured over 10 s once every check has passed, as a percentage of one
//! core; the figure is the whole agent's (its idle work included), not the server's.
//!
//! Not here: the in-process measurement of the checks hook alone (the client's
//! `cpu_of_many_http_checks` test).

use std::time::Duration;

use anyhow::Context as _;

use crate::agent::{AgentProcess, poll};
use crate::process::{Bench, START_LIMIT, fresh_dir, register_body};
use crate::procfs;
use crate::stats::Report;

/// The figure's name in the report.
pub const CPU_FIGURE: &str = "agent CPU, checks passing";

/// How long the CPU is measured, once every check has passed.
const WINDOW: Duration = Duration::from_secs(10);

/// A threaded HTTP/1.0 server answering `ok` to every GET on the port in argv[1], with a listen
/// backlog that holds a burst of probes. (Python's HTTP/1.1 mode reset some kept-alive
/// connections under 1 000 checks, and the failures would be measured too.)
const SERVER: &str = r#"import http.server, sys
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")
    def log_message(self, *args):
        pass
class Server(http.server.ThreadingHTTPServer):
    request_queue_size = 1024
Server(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"#;

fn job_hcl(server: &str, checks: usize) -> String {
    let mut blocks = String::new();
    for index in 0..checks {
        blocks.push_str(&format!(
            "      check {{\n        name     = \"c{index}\"\n        type     = \"http\"\n        path     = \"/\"\n        interval = \"10s\"\n        timeout  = \"2s\"\n      }}\n"
        ));
    }
    format!(
        r#"job "checks" {{
  datacenters = ["dc1"]
  group "g" {{
    network {{
      port "http" {{}}
    }}
    service {{
      name     = "checked"
      provider = "nomad"
      port     = "http"
{blocks}    }}
    task "t" {{
      driver = "raw_exec"
      config {{
        command = "/usr/bin/python3"
        args    = ["{server}", "${{NOMAD_PORT_http}}"]
      }}
      resources {{
        cpu    = 1
        memory = 10
      }}
    }}
  }}
}}
"#
    )
}

/// `check-cpu --checks N`.
pub fn check_cpu(bench: &Bench, checks: usize) -> anyhow::Result<Report> {
    let mut report = Report::default();
    for _ in 0..bench.runs {
        let temp = fresh_dir()?;
        let server = temp.path().join("server.py");
        std::fs::write(&server, SERVER)?;
        let agent = AgentProcess::spawn(&bench.drover, &temp.path().join("data"))?;
        agent.wait_node_ready(START_LIMIT)?;
        let body = register_body(&agent, &job_hcl(&server.display().to_string(), checks))?;
        agent.send_json("PUT", "/v1/jobs", &body)?;
        let alloc_id = poll(
            Duration::from_secs(60),
            Duration::from_millis(50),
            "the checks' allocation to run",
            || {
                let allocs = agent.get_json("/v1/job/checks/allocations").ok()?;
                allocs.as_array()?.iter().find_map(|alloc| {
                    (alloc["ClientStatus"] == "running")
                        .then(|| alloc["ID"].as_str().map(str::to_owned))
                        .flatten()
                })
            },
        )?;
        let passed = poll(
            Duration::from_secs(60),
            Duration::from_millis(200),
            "every check to pass once",
            || {
                let results = agent
                    .get_json(&format!("/v1/client/allocation/{alloc_id}/checks"))
                    .ok()?;
                let results = results.as_object()?;
                (results.len() == checks
                    && results.values().all(|result| result["Status"] == "success"))
                .then_some(())
            },
        );
        if let Err(error) = passed {
            let seen = agent.get_json(&format!("/v1/client/allocation/{alloc_id}/checks"))?;
            let results = seen.as_object().map(|map| map.values().collect::<Vec<_>>());
            let passing = results
                .iter()
                .flatten()
                .filter(|r| r["Status"] == "success")
                .count();
            return Err(error).context(format!(
                "{passing} of {checks} checks passing, {} reported (is python3 installed?); one: {}",
                results.as_ref().map_or(0, Vec::len),
                results.iter().flatten().next().map(|r| r.to_string()).unwrap_or_default()
            ));
        }
        let before = procfs::cpu_ms(agent.pid());
        std::thread::sleep(WINDOW);
        let used = procfs::cpu_ms(agent.pid()) - before;
        report.add(
            CPU_FIGURE,
            "% of a core",
            used / WINDOW.as_secs_f64() / 10.0,
        );
        drop(agent);
        report.record_load();
    }
    report.note(format!(
        "{checks} http checks at 10 s against a python3 server closing each connection, agent CPU over {} s",
        WINDOW.as_secs()
    ));
    Ok(report)
}
