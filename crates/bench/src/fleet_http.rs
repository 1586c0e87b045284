//! `fleet --over-http`: the node simulator's nodes reach a real server agent process (the
//! release `drover agent -server`, client disabled) through `HttpServerConn`, the same
//! connection a client-only agent uses; the job goes in and its progress is read over the
//! agent's HTTP API (the job summary, so polling stays cheap at any alloc count).
//!
//! Not here: the in-process fleet (`in_process::fleet`), whose figures this one is compared
//! with.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use drover_client::http_conn::{HttpServerConn, HttpServerConnConfig};
use drover_client::node_sim::SimRunnerTiming;
use drover_scheduler::testing::JobBuilder;
use serde_json::{Value, json};

use crate::agent::AgentProcess;
use crate::in_process::start_fleet_on;
use crate::process::Bench;
use crate::procfs;
use crate::stats::Report;

/// The job summary's counts for group `g`: (running, complete, placed in any state).
async fn summary_counts(
    agent: &Arc<AgentProcess>,
    job_id: &str,
) -> anyhow::Result<(i64, i64, i64)> {
    let agent = Arc::clone(agent);
    let path = format!("/v1/job/{job_id}/summary");
    let summary: Value = tokio::task::spawn_blocking(move || agent.get_json(&path))
        .await
        .map_err(|error| anyhow!("summary poll: {error}"))??;
    let group = &summary["Summary"]["g"];
    let count = |key: &str| group[key].as_i64().unwrap_or(0);
    let placed =
        count("Starting") + count("Running") + count("Complete") + count("Failed") + count("Lost");
    Ok((count("Running"), count("Complete"), placed))
}

/// Polls the job summary every 50 ms until `done(running, complete, placed)` holds.
pub(crate) async fn wait_summary(
    agent: &Arc<AgentProcess>,
    job_id: &str,
    limit: Duration,
    what: &str,
    done: impl Fn(i64, i64, i64) -> bool,
) -> anyhow::Result<Duration> {
    let started = Instant::now();
    loop {
        let (running, complete, placed) = summary_counts(agent, job_id).await?;
        if done(running, complete, placed) {
            return Ok(started.elapsed());
        }
        if started.elapsed() > limit {
            bail!(
                "timed out after {limit:?} waiting for {what} (running {running}, complete {complete}, placed {placed})"
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `fleet --over-http`: `nodes` simulated nodes register with a server agent process over
/// HTTP; a job of `allocs` allocations is placed across them, reported running, then stopped.
/// A server-only agent on a data dir under `temp`, ready to answer; a connection to it for
/// simulated nodes; and the simulated runners' timing (start after 10 ms, run until stopped).
pub(crate) fn server_agent_for_simulated_nodes(
    bench: &Bench,
    temp: &std::path::Path,
) -> anyhow::Result<(Arc<AgentProcess>, Arc<HttpServerConn>, SimRunnerTiming)> {
    let agent = Arc::new(AgentProcess::spawn_server(
        &bench.drover,
        &temp.join("data"),
    )?);
    agent.wait_api_ready(Duration::from_secs(60))?;
    let address = agent.address.trim_start_matches("http://").to_owned();
    let conn = Arc::new(
        HttpServerConn::new(HttpServerConnConfig::new(vec![address]))
            .context("connecting to the server agent")?,
    );
    let timing = SimRunnerTiming {
        start_delay: Duration::from_millis(10),
        run_for: None,
    };
    Ok((agent, conn, timing))
}

pub async fn fleet_over_http(bench: &Bench, nodes: usize, allocs: usize) -> anyhow::Result<Report> {
    let mut report = Report::default();
    let limit = Duration::from_secs(600);
    let wanted = i64::try_from(allocs)?;
    for run in 0..bench.runs {
        let temp = tempfile::tempdir()?;
        let (agent, conn, timing) = server_agent_for_simulated_nodes(bench, temp.path())?;
        let cpu_before = procfs::cpu_ms(agent.pid());
        let started = Instant::now();
        let clients = start_fleet_on(conn, nodes, timing).await?;
        report.add(
            &format!("{nodes} nodes start and register over HTTP"),
            "ms",
            started.elapsed().as_secs_f64() * 1000.0,
        );
        report.add(
            "server agent RSS with the nodes registered",
            "MiB",
            procfs::rss_kib(agent.pid()).unwrap_or(0) as f64 / 1024.0,
        );
        let job_id = format!("fleet-http-{run}");
        let job = JobBuilder::service(&job_id)
            .group("g", wanted)
            .task("t", "raw_exec")
            .resources(100, 256)
            .build();
        let registered = Instant::now();
        {
            let agent = Arc::clone(&agent);
            let body = json!({ "Job": job });
            tokio::task::spawn_blocking(move || agent.send_json("PUT", "/v1/jobs", &body))
                .await
                .map_err(|error| anyhow!("register: {error}"))??;
        }
        let placed = wait_summary(&agent, &job_id, limit, "allocs placed", |_, _, placed| {
            placed >= wanted
        })
        .await?;
        wait_summary(&agent, &job_id, limit, "allocs running", |running, _, _| {
            running >= wanted
        })
        .await?;
        let running_total = registered.elapsed();
        report.add(
            &format!("register -> {allocs} allocs placed"),
            "ms",
            placed.as_secs_f64() * 1000.0,
        );
        report.add(
            "placements/s (register -> all placed)",
            "/s",
            allocs as f64 / placed.as_secs_f64(),
        );
        report.add(
            &format!("register -> {allocs} allocs reported running"),
            "ms",
            running_total.as_secs_f64() * 1000.0,
        );
        {
            let agent = Arc::clone(&agent);
            let path = format!("/v1/job/{job_id}");
            tokio::task::spawn_blocking(move || {
                let (status, body) = crate::agent::http("DELETE", &agent.address, &path, None)?;
                if status != 200 {
                    bail!("DELETE {path}: {status}: {body}");
                }
                Ok(())
            })
            .await
            .map_err(|error| anyhow!("deregister: {error}"))??;
        }
        let stopped = wait_summary(
            &agent,
            &job_id,
            limit,
            "allocs complete",
            |_, complete, _| complete >= wanted,
        )
        .await?;
        report.add(
            &format!("stop -> {allocs} allocs reported complete"),
            "ms",
            stopped.as_secs_f64() * 1000.0,
        );
        report.add(
            "server agent CPU over the run",
            "ms",
            procfs::cpu_ms(agent.pid()) - cpu_before,
        );
        report.add(
            "server agent RSS at the end",
            "MiB",
            procfs::rss_kib(agent.pid()).unwrap_or(0) as f64 / 1024.0,
        );
        for client in clients {
            client.shutdown().await;
        }
        drop(agent);
        report.record_load();
    }
    report.note(format!(
        "{nodes} simulated nodes in the bench process over HTTP (one shared HttpServerConn, status batching every 200 ms) against a release server agent process ({}); progress read from the job summary every 50 ms",
        crate::agent::backend_note()
    ));
    Ok(report)
}

/// `alloc-list --simulated-nodes N`: the alloc list latency with `allocs` allocations set up
/// in seconds rather than minutes: a server agent process, `nodes` simulated nodes over HTTP
/// running one service job of `allocs` tiny allocations (running, with their task states and
/// events), then 100 `GET /v1/allocations` per run.
pub async fn alloc_list_with_simulated_nodes(
    bench: &Bench,
    allocs: usize,
    nodes: usize,
    filter: Option<String>,
) -> anyhow::Result<Report> {
    let mut report = Report::default();
    let temp = tempfile::tempdir()?;
    let (agent, conn, timing) = server_agent_for_simulated_nodes(bench, temp.path())?;
    let filtered_path = filter.map(|filter| {
        let encoded: String = filter
            .bytes()
            .map(|byte| {
                if byte.is_ascii_alphanumeric() {
                    char::from(byte).to_string()
                } else {
                    format!("%{byte:02X}")
                }
            })
            .collect();
        format!("/v1/allocations?filter={encoded}")
    });
    let setup = Instant::now();
    let clients = start_fleet_on(conn, nodes, timing).await?;
    let job_id = "alloc-list";
    let job = JobBuilder::service(job_id)
        .group("g", i64::try_from(allocs)?)
        .task("t", "raw_exec")
        .resources(1, 10)
        .build();
    {
        let agent = Arc::clone(&agent);
        let body = json!({ "Job": job });
        tokio::task::spawn_blocking(move || agent.send_json("PUT", "/v1/jobs", &body))
            .await
            .map_err(|error| anyhow!("register: {error}"))??;
    }
    let wanted = i64::try_from(allocs)?;
    wait_summary(
        &agent,
        job_id,
        Duration::from_secs(600),
        "allocs running",
        |running, _, _| running >= wanted,
    )
    .await?;
    report.note(format!(
        "setup: {allocs} running allocs on {nodes} simulated nodes over HTTP in {:.1} s",
        setup.elapsed().as_secs_f64()
    ));
    for _ in 0..bench.runs {
        let measured = Arc::clone(&agent);
        let filtered_path = filtered_path.clone();
        report = tokio::task::spawn_blocking(move || {
            let mut report = report;
            crate::process::alloc_list_latency(&measured, 100, &mut report)?;
            if let Some(path) = &filtered_path {
                crate::process::list_latency(&measured, path, 100, &mut report)?;
            }
            report.record_load();
            anyhow::Ok(report)
        })
        .await
        .map_err(|error| anyhow!("alloc list: {error}"))??;
    }
    for client in clients {
        client.shutdown().await;
    }
    Ok(report)
}
