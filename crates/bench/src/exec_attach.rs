//! `exec-attach`: `alloc exec` of `/bin/echo hi` into a running `raw_exec` task over the
//! websocket, as Nomad's clients speak it: connect → first stdout frame, and connect → the
//! `exited` frame (the whole attach + echo round trip), one session after another.
//!
//! Not here: the CLI's own start-up (a whole `drover alloc exec` process is timed apart, as a
//! second figure, because it is what a user waits for).

use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use futures_util::{SinkExt as _, StreamExt as _};
use serde_json::Value;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;

use crate::agent::AgentProcess;
use crate::process::{Bench, START_LIMIT, fresh_dir, ms, run_sleeps};
use crate::stats::Report;

/// Times of one exec session.
struct Session {
    first_output: Duration,
    exited: Duration,
}

async fn one_session(host: &str, alloc_id: &str) -> anyhow::Result<Session> {
    let command = serde_json::to_string(&["/bin/echo", "hi"])?;
    let url = format!(
        "ws://{host}/v1/client/allocation/{alloc_id}/exec?task=t&tty=false&command={}",
        percent_encode(&command)
    );
    let request = url.as_str().into_client_request()?;
    let started = Instant::now();
    let stream = tokio::net::TcpStream::connect(host).await?;
    stream.set_nodelay(true)?;
    let (mut socket, _) = tokio_tungstenite::client_async(request, stream)
        .await
        .context("websocket handshake")?;
    socket
        .send(Message::Text(r#"{"stdin":{"close":true}}"#.into()))
        .await?;
    let mut first_output = None;
    while let Some(message) = socket.next().await {
        let Message::Text(text) = message? else {
            continue;
        };
        let frame: Value = serde_json::from_str(text.as_str())?;
        if frame.pointer("/stdout/data").is_some() && first_output.is_none() {
            first_output = Some(started.elapsed());
        }
        if frame.pointer("/exited").and_then(Value::as_bool) == Some(true) {
            let exited = started.elapsed();
            let code = frame.pointer("/result/exit_code").and_then(Value::as_i64);
            if code.unwrap_or(0) != 0 {
                bail!("echo exited with {code:?}");
            }
            return Ok(Session {
                first_output: first_output.unwrap_or(exited),
                exited,
            });
        }
    }
    bail!("the session ended without an exited frame")
}

fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (byte as char).to_string()
            }
            _ => format!("%{byte:02X}"),
        })
        .collect()
}

/// `exec-attach --sessions N`: N sequential websocket sessions per run, then N whole
/// `drover alloc exec` CLI processes.
pub fn exec_attach(bench: &Bench, sessions: usize) -> anyhow::Result<Report> {
    exec_attach_sessions(bench, sessions, true)
}

/// The websocket sessions, and with `with_cli` the whole CLI processes too.
pub fn exec_attach_sessions(
    bench: &Bench,
    sessions: usize,
    with_cli: bool,
) -> anyhow::Result<Report> {
    let mut report = Report::default();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    for run in 0..bench.runs {
        let temp = fresh_dir()?;
        let agent = AgentProcess::spawn(&bench.drover, &temp.path().join("data"))?;
        agent.wait_node_ready(START_LIMIT)?;
        let job_id = format!("exec-{run}");
        let (_, allocs) = run_sleeps(&agent, &job_id, 1)?;
        let alloc_id = allocs
            .first()
            .and_then(|alloc| alloc["ID"].as_str())
            .context("the running alloc")?
            .to_string();
        let host = agent.address.trim_start_matches("http://").to_string();
        let mut first = Vec::with_capacity(sessions);
        let mut round_trip = Vec::with_capacity(sessions);
        for _ in 0..sessions {
            let session = runtime.block_on(one_session(&host, &alloc_id))?;
            first.push(ms(session.first_output));
            round_trip.push(ms(session.exited));
        }
        let mut cli = Vec::with_capacity(sessions);
        for _ in 0..if with_cli { sessions } else { 0 } {
            let started = Instant::now();
            let output = std::process::Command::new(&bench.drover)
                .args(["alloc", "exec"])
                .arg(format!("-address={}", agent.address))
                .args([alloc_id.as_str(), "/bin/echo", "hi"])
                .output()?;
            if !output.status.success() || output.stdout != b"hi\n" {
                bail!(
                    "drover alloc exec: {:?}: {}",
                    output.status,
                    String::from_utf8_lossy(&output.stderr)
                );
            }
            cli.push(ms(started.elapsed()));
        }
        for (figure, samples) in [
            (
                "websocket connect -> first stdout frame (median of run)",
                &first,
            ),
            (
                "websocket connect -> exited frame (median of run)",
                &round_trip,
            ),
            (
                "whole `drover alloc exec ID /bin/echo hi` (median of run)",
                &cli,
            ),
        ] {
            if let Some(median) = crate::stats::percentile(samples, 50.0) {
                report.add(figure, "ms", median);
            }
        }
        drop(agent);
        report.record_load();
    }
    report.note(format!(
        "{sessions} sequential sessions per run into a raw_exec `sleep` task"
    ));
    Ok(report)
}
