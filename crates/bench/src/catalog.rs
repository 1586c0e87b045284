//! `catalog-read`: read latency of the built-in service catalog with N registrations. A server
//! agent process runs one job of N tiny allocations on simulated nodes over HTTP; every
//! allocation gets one registration (spread over `--names` service names) through the same
//! internal route a client-only agent uses; then `GET /v1/services`, `GET /v1/service/<name>`
//! and the same with `choose` are timed, 100 requests each, one connection each.
//!
//! Not here: the write path's cost (each registration batch is one write; not measured).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};
use drover_client::server_conn::ServerConn;
use drover_scheduler::testing::JobBuilder;
use drover_structs::ServiceRegistration;
use serde_json::{Value, json};

use crate::agent::{AgentProcess, http};
use crate::fleet_http::{server_agent_for_simulated_nodes, wait_summary};
use crate::in_process::start_fleet_on;
use crate::process::{Bench, ms};
use crate::stats::{Report, percentile};

/// Registrations sent per upsert.
const UPSERT_BATCH: usize = 500;

/// Times `requests` GETs of `path`, adding p50 and p99 under `label`.
fn latency(
    agent: &AgentProcess,
    label: &str,
    path: &str,
    requests: usize,
    report: &mut Report,
) -> anyhow::Result<()> {
    let mut samples = Vec::with_capacity(requests);
    let mut bytes = 0;
    for _ in 0..requests {
        let started = Instant::now();
        let (status, body) = http("GET", &agent.address, path, None)?;
        samples.push(ms(started.elapsed()));
        if status != 200 {
            bail!("GET {path}: {status}");
        }
        bytes = body.len();
    }
    for (name, percent) in [("p50", 50.0), ("p99", 99.0)] {
        if let Some(value) = percentile(&samples, percent) {
            report.add(&format!("{label} {name}"), "ms", value);
        }
    }
    report.note(format!("{label}: {bytes} bytes per answer"));
    Ok(())
}

pub async fn catalog_read(
    bench: &Bench,
    registrations: usize,
    names: usize,
    nodes: usize,
) -> anyhow::Result<Report> {
    let names = names.max(1);
    let mut report = Report::default();
    let temp = tempfile::tempdir()?;
    let (agent, conn, timing) = server_agent_for_simulated_nodes(bench, temp.path())?;
    let setup = Instant::now();
    let clients = start_fleet_on(Arc::clone(&conn), nodes, timing).await?;
    let job_id = "catalog";
    let job = JobBuilder::service(job_id)
        .group("g", i64::try_from(registrations)?)
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
    let wanted = i64::try_from(registrations)?;
    wait_summary(
        &agent,
        job_id,
        Duration::from_secs(600),
        "allocs running",
        |running, _, _| running >= wanted,
    )
    .await?;
    let allocs: Value = {
        let agent = Arc::clone(&agent);
        tokio::task::spawn_blocking(move || agent.get_json("/v1/job/catalog/allocations"))
            .await
            .map_err(|error| anyhow!("alloc list: {error}"))??
    };
    let allocs = allocs.as_array().cloned().unwrap_or_default();
    if allocs.len() < registrations {
        bail!("{} allocations, wanted {registrations}", allocs.len());
    }
    let services: Vec<ServiceRegistration> = allocs
        .iter()
        .take(registrations)
        .enumerate()
        .map(|(index, alloc)| {
            let alloc_id = alloc["ID"].as_str().unwrap_or_default().to_owned();
            let name = format!("svc-{}", index % names);
            ServiceRegistration {
                id: drover_structs::service_registration::service_registration_id(
                    &alloc_id, "t", &name, "http",
                ),
                service_name: name,
                namespace: "default".to_owned(),
                node_id: alloc["NodeID"].as_str().unwrap_or_default().to_owned(),
                datacenter: "dc1".to_owned(),
                job_id: job_id.to_owned(),
                alloc_id,
                tags: vec!["http".to_owned(), format!("v{}", index % 3)],
                address: "127.0.0.1".to_owned(),
                port: 20_000 + i64::try_from(index % 10_000).unwrap_or(0),
                ..ServiceRegistration::default()
            }
        })
        .collect();
    for batch in services.chunks(UPSERT_BATCH) {
        conn.upsert_services(batch.to_vec())
            .await
            .map_err(|error| anyhow!("registering services: {error}"))?;
    }
    report.note(format!(
        "setup: {registrations} registrations ({names} names, {} each) of running allocs on {nodes} simulated nodes in {:.1} s",
        registrations / names,
        setup.elapsed().as_secs_f64()
    ));
    for _ in 0..bench.runs {
        let measured = Arc::clone(&agent);
        report = tokio::task::spawn_blocking(move || {
            let mut report = report;
            latency(
                &measured,
                "GET /v1/services",
                "/v1/services",
                100,
                &mut report,
            )?;
            latency(
                &measured,
                "GET /v1/service/<name>",
                "/v1/service/svc-0",
                100,
                &mut report,
            )?;
            latency(
                &measured,
                "GET /v1/service/<name>?choose=3|key",
                "/v1/service/svc-0?choose=3%7Cbench-caller",
                100,
                &mut report,
            )?;
            report.record_load();
            anyhow::Ok(report)
        })
        .await
        .map_err(|error| anyhow!("catalog reads: {error}"))??;
    }
    for client in clients {
        client.shutdown().await;
    }
    Ok(report)
}
