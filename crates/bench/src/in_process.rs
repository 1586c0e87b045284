//! In-process scenarios: the scheduler alone on 10 000 simulated nodes (one thread), the
//! server's state-store writes per alloc lifecycle, and a fleet of simulated nodes
//! (`drover_client::node_sim`) registering with a real server and running its allocations
//! through the same client↔server interface and status batching as the real client.
//!
//! The server here is the agent's: a `drover_server::Server` on an on-disk `StateStore` (one
//! fsync per transaction), reached through the agent's `InProcessServer` connection.
//! Not here: the fleet over HTTP (`fleet_http`), which reuses [`start_fleet_on`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use drover_agent::in_process::InProcessServer;
use drover_client::clock::{SharedClock, SystemClock};
use drover_client::node_sim::{SimClient, SimRunnerTiming, start_simulated_node};
use drover_client::server_conn::ServerConn;
use drover_scheduler::testing::{JobBuilder, NodeBuilder};
use drover_scheduler::{InMemoryState, SchedulerOptions, SeededIds, schedule};
use drover_server::{Server, ServerConfig};
use drover_state::{CommitStats, StateStore};
use drover_structs::{Evaluation, Job, JobRegisterRequest};

use crate::procfs;
use crate::stats::Report;

/// `scheduler`: placements per second with `nodes` simulated nodes, one thread: `jobs`
/// service jobs of `per_job` allocations each, scheduled one after the other, every plan
/// applied to the in-memory state before the next job (as the plan applier would).
pub fn scheduler(runs: usize, nodes: usize, jobs: usize, per_job: usize) -> anyhow::Result<Report> {
    let mut report = Report::default();
    for run in 0..runs {
        let mut state = InMemoryState::new();
        for node in 0..nodes {
            state.upsert_node(NodeBuilder::new(&format!("node-{node}")).build());
        }
        let mut scheduling = Duration::ZERO;
        let mut scheduling_cpu_ns = 0u64;
        let mut placed = 0usize;
        let mut failed = 0usize;
        let wall = Instant::now();
        for job_number in 0..jobs {
            let job = JobBuilder::service(&format!("job-{run}-{job_number}"))
                .group("g", i64::try_from(per_job)?)
                .task("t", "raw_exec")
                .resources(100, 256)
                .build();
            state.upsert_job(job.clone());
            let eval = Evaluation {
                id: format!("eval-{run}-{job_number}"),
                namespace: job.namespace.clone(),
                job_id: job.id.clone(),
                r#type: job.r#type.clone(),
                ..Evaluation::default()
            };
            let seed = u64::try_from(run * jobs + job_number)?;
            let options = SchedulerOptions {
                seed,
                now_unix_nanos: 1_700_000_000_000_000_000,
                ..SchedulerOptions::default()
            };
            let started = Instant::now();
            let cpu_before = procfs::thread_cpu_ns();
            let plan = schedule(&state, &eval, &options, &mut SeededIds::new(seed))
                .map_err(|error| anyhow!("schedule: {error}"))?;
            scheduling_cpu_ns += procfs::thread_cpu_ns().saturating_sub(cpu_before);
            scheduling += started.elapsed();
            placed += plan.allocations().count();
            failed += plan.failed_tg_allocs.len();
            state.apply_plan(&plan);
        }
        if failed > 0 {
            report.note(format!("run {}: {failed} groups failed to place", run + 1));
        }
        report.add(
            "placements/s (schedule() time only)",
            "/s",
            placed as f64 / scheduling.as_secs_f64(),
        );
        report.add(
            "placements per on-CPU second of schedule()",
            "/s",
            placed as f64 / (scheduling_cpu_ns.max(1) as f64 / 1e9),
        );
        report.add(
            "placements/s (with applying each plan)",
            "/s",
            placed as f64 / wall.elapsed().as_secs_f64(),
        );
        report.add(
            "time per job of the given count",
            "ms",
            scheduling.as_secs_f64() * 1000.0 / jobs as f64,
        );
        report.record_load();
    }
    report.note(format!(
        "{nodes} nodes (4000 MHz, 8 GiB), {jobs} jobs x {per_job} allocs (100 MHz, 256 MB), one thread"
    ));
    Ok(report)
}

fn tiny_job(job_id: &str, count: usize) -> anyhow::Result<Job> {
    Ok(JobBuilder::service(job_id)
        .group("g", i64::try_from(count)?)
        .task("t", "raw_exec")
        .resources(1, 10)
        .build())
}

/// A server on an on-disk store in `dir`, as the agent runs it.
async fn start_server(dir: &std::path::Path) -> anyhow::Result<Server> {
    let state = StateStore::open(dir)
        .await
        .map_err(|error| anyhow!("opening the state store: {error}"))?;
    Ok(Server::start(
        ServerConfig::default(),
        state,
        Arc::new(drover_server::SystemClock),
    ))
}

/// Starts `count` simulated nodes against the server; returns them once all are registered.
async fn start_fleet(
    server: &Server,
    count: usize,
    timing: SimRunnerTiming,
) -> anyhow::Result<Vec<Arc<SimClient<InProcessServer>>>> {
    start_fleet_on(
        Arc::new(InProcessServer::without_keyring(server.clone())),
        count,
        timing,
    )
    .await
}

/// Starts `count` simulated nodes sharing one connection to the servers; returns them once
/// all are registered.
pub async fn start_fleet_on<S: ServerConn>(
    conn: Arc<S>,
    count: usize,
    timing: SimRunnerTiming,
) -> anyhow::Result<Vec<Arc<SimClient<S>>>> {
    let clock: SharedClock = Arc::new(SystemClock);
    let mut clients = Vec::with_capacity(count);
    for number in 0..count {
        let client = start_simulated_node(
            Arc::clone(&conn),
            number,
            timing,
            Arc::clone(&clock),
            |_| {},
        )
        .await
        .map_err(|error| anyhow!("starting simulated node {number}: {error}"))?;
        clients.push(client);
    }
    for client in &clients {
        client.wait_registered().await;
    }
    Ok(clients)
}

/// Polls the store until `done` holds for the job's allocations.
async fn wait_job_allocs(
    server: &Server,
    job: &Job,
    limit: Duration,
    what: &str,
    done: impl Fn(&[Arc<drover_structs::Allocation>]) -> bool,
) -> anyhow::Result<Duration> {
    let started = Instant::now();
    loop {
        let allocs = server.state().allocs_by_job(&job.namespace, &job.id);
        if done(&allocs) {
            return Ok(started.elapsed());
        }
        if started.elapsed() > limit {
            bail!("timed out after {limit:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn all_with_status(allocs: &[Arc<drover_structs::Allocation>], count: usize, status: &str) -> bool {
    allocs.len() >= count
        && allocs
            .iter()
            .filter(|alloc| alloc.client_status == status)
            .count()
            >= count
}

fn delta(after: CommitStats, before: CommitStats) -> (u64, u64) {
    (
        after.transactions.saturating_sub(before.transactions),
        after.writes.saturating_sub(before.writes),
    )
}

async fn register(server: &Server, job: &Job) -> anyhow::Result<()> {
    server
        .register_job(JobRegisterRequest {
            job: Some(job.clone()),
            ..JobRegisterRequest::default()
        })
        .await
        .map_err(|error| anyhow!("register: {error}"))?;
    Ok(())
}

/// `server-writes`: state-store transactions and writes per alloc over register → running →
/// stop → complete, with `nodes` simulated nodes and `count` allocations.
pub async fn server_writes(runs: usize, count: usize, nodes: usize) -> anyhow::Result<Report> {
    let mut report = Report::default();
    let limit = Duration::from_secs(300);
    for run in 0..runs {
        let temp = tempfile::tempdir()?;
        let server = start_server(temp.path()).await?;
        let timing = SimRunnerTiming {
            start_delay: Duration::from_millis(10),
            run_for: None,
        };
        let clients = start_fleet(&server, nodes, timing).await?;
        let job = tiny_job(&format!("writes-{run}"), count)?;
        let idle = server.state().commit_stats();
        register(&server, &job).await?;
        wait_job_allocs(&server, &job, limit, "allocs running", |allocs| {
            all_with_status(allocs, count, "running")
        })
        .await?;
        let running = server.state().commit_stats();
        server
            .deregister_job(&job.namespace, &job.id, false)
            .await
            .map_err(|error| anyhow!("deregister: {error}"))?;
        wait_job_allocs(&server, &job, limit, "allocs complete", |allocs| {
            all_with_status(allocs, count, "complete")
        })
        .await?;
        // Let trailing writes (eval completion, the last status batch) land.
        tokio::time::sleep(Duration::from_millis(600)).await;
        let dead = server.state().commit_stats();
        let per = |value: u64| value as f64 / count as f64;
        let (start_tx, start_writes) = delta(running, idle);
        let (stop_tx, stop_writes) = delta(dead, running);
        let (all_tx, all_writes) = delta(dead, idle);
        report.add(
            "transactions per alloc, register -> running",
            "tx",
            per(start_tx),
        );
        report.add(
            "transactions per alloc, stop -> complete",
            "tx",
            per(stop_tx),
        );
        report.add("transactions per alloc, whole lifecycle", "tx", per(all_tx));
        report.add(
            "writes per alloc, register -> running",
            "writes",
            per(start_writes),
        );
        report.add(
            "writes per alloc, stop -> complete",
            "writes",
            per(stop_writes),
        );
        report.add(
            "writes per alloc, whole lifecycle",
            "writes",
            per(all_writes),
        );
        report.add("transactions in total", "tx", all_tx as f64);
        report.add("writes in total", "writes", all_writes as f64);
        report.add(
            "largest group (writes in one tx)",
            "writes",
            dead.largest_group as f64,
        );
        for client in clients {
            client.shutdown().await;
        }
        server.shutdown().await;
        report.record_load();
    }
    report.note(format!(
        "{count} allocs on {nodes} simulated nodes, on-disk store; includes heartbeats during the run"
    ));
    Ok(report)
}

/// The node simulator at fleet scale: `nodes` simulated nodes register with an in-process
/// server; a job of `allocs` allocations is placed across them and reported running.
pub async fn fleet(runs: usize, nodes: usize, allocs: usize) -> anyhow::Result<Report> {
    let mut report = Report::default();
    let limit = Duration::from_secs(600);
    for run in 0..runs {
        let temp = tempfile::tempdir()?;
        let server = start_server(temp.path()).await?;
        let timing = SimRunnerTiming {
            start_delay: Duration::from_millis(10),
            run_for: None,
        };
        let started = Instant::now();
        let clients = start_fleet(&server, nodes, timing).await?;
        report.add(
            &format!("{nodes} nodes start and register"),
            "ms",
            started.elapsed().as_secs_f64() * 1000.0,
        );
        let job = JobBuilder::service(&format!("fleet-{run}"))
            .group("g", i64::try_from(allocs)?)
            .task("t", "raw_exec")
            .resources(100, 256)
            .build();
        let registered = Instant::now();
        register(&server, &job).await?;
        wait_job_allocs(&server, &job, limit, "allocs placed", |placed| {
            placed.len() >= allocs
        })
        .await?;
        let placed = registered.elapsed();
        wait_job_allocs(&server, &job, limit, "allocs running", |listed| {
            all_with_status(listed, allocs, "running")
        })
        .await?;
        let running = registered.elapsed();
        report.add(
            &format!("register -> {allocs} allocs placed"),
            "ms",
            placed.as_secs_f64() * 1000.0,
        );
        report.add(
            &format!("register -> {allocs} allocs reported running"),
            "ms",
            running.as_secs_f64() * 1000.0,
        );
        report.add(
            "placements/s (register -> placed)",
            "/s",
            allocs as f64 / placed.as_secs_f64(),
        );
        let spawned: usize = clients.iter().map(|client| client.alloc_ids().len()).sum();
        if spawned < allocs {
            report.note(format!(
                "run {}: the nodes hold only {spawned} allocs",
                run + 1
            ));
        }
        server
            .deregister_job(&job.namespace, &job.id, false)
            .await
            .context("deregister")?;
        let stopped = Instant::now();
        wait_job_allocs(&server, &job, limit, "allocs complete", |listed| {
            all_with_status(listed, allocs, "complete")
        })
        .await?;
        report.add(
            &format!("stop -> {allocs} allocs reported complete"),
            "ms",
            stopped.elapsed().as_secs_f64() * 1000.0,
        );
        report.add(
            "bench process RSS (server and nodes) at the end",
            "MiB",
            procfs::rss_kib(i32::try_from(std::process::id())?).unwrap_or(0) as f64 / 1024.0,
        );
        for client in clients {
            client.shutdown().await;
        }
        server.shutdown().await;
        report.record_load();
    }
    report.note(format!(
        "{nodes} simulated nodes in process (status batching every 200 ms), on-disk store, 10 ms simulated start"
    ));
    Ok(report)
}

/// The 100-line template `render-template` renders: every line an action — `env`, a pipeline of
/// string functions, a `range` over a split list, arithmetic, a `with`, JSON.
pub fn hundred_line_template() -> String {
    let mut lines = Vec::new();
    for line in 0..100 {
        lines.push(match line % 5 {
            0 => format!("KEY_{line}={{{{ env \"NOMAD_TASK_NAME\" | toUpper }}}}"),
            1 => format!(
                "list_{line} = {{{{ range $i, $v := split \",\" \"a,b,c,d\" }}}}{{{{ $i }}}}:{{{{ $v }}}} {{{{ end }}}}"
            ),
            2 => format!("sum_{line} = {{{{ {line} | add 7 | multiply 3 }}}}"),
            3 => format!(
                "{{{{ with env \"NOMAD_ALLOC_ID\" }}}}alloc_{line} = {{{{ . | sha256Hex | printf \"%.8s\" }}}}{{{{ end }}}}"
            ),
            _ => format!("json_{line} = {{{{ split \",\" \"x,y\" | toJSON }}}}"),
        });
    }
    lines.join("\n")
}

/// Parses and renders [`hundred_line_template`] `renders` times per run.
pub fn render_template(runs: usize, renders: usize) -> anyhow::Result<Report> {
    let renders = renders.max(1);
    use drover_client::template::{RenderScope, TemplateText, render};
    let text = hundred_line_template();
    let scope = RenderScope {
        env: [
            ("NOMAD_TASK_NAME", "web"),
            ("NOMAD_ALLOC_ID", "5d1c7a8e-0000-4000-8000-000000000001"),
        ]
        .into_iter()
        .map(|(key, value)| (key.to_string(), value.to_string()))
        .collect(),
        ..RenderScope::default()
    };
    let template = TemplateText {
        destination: "local/app.conf",
        text: &text,
        left_delimiter: "",
        right_delimiter: "",
        error_on_missing_key: false,
    };
    let mut report = Report::default();
    for _ in 0..runs {
        let mut samples = Vec::with_capacity(renders);
        for _ in 0..renders {
            let started = Instant::now();
            let (output, _) = render(template, scope.clone());
            let output = output.map_err(|error| anyhow!("{error}"))?;
            samples.push(started.elapsed().as_secs_f64() * 1e6);
            if output.lines().count() != 100 {
                bail!("rendered {} lines, not 100", output.lines().count());
            }
        }
        samples.sort_by(f64::total_cmp);
        let median = samples[samples.len() / 2];
        report.add(
            "parse + render of a 100-line template (median)",
            "µs",
            median,
        );
        report.record_load();
    }
    report.note(format!("{renders} renders per run"));
    Ok(report)
}

/// `plan`: `job plan` latency (`Server::plan_job`, with the diff) for a job of `allocs`
/// running allocations on `nodes` simulated nodes: the registered spec again (nothing to
/// change) and an edited one (every allocation replaced), `samples` plans each per run.
pub async fn plan(
    runs: usize,
    allocs: usize,
    nodes: usize,
    samples: usize,
) -> anyhow::Result<Report> {
    let mut report = Report::default();
    let limit = Duration::from_secs(600);
    for run in 0..runs {
        let temp = tempfile::tempdir()?;
        let server = start_server(temp.path()).await?;
        let timing = SimRunnerTiming {
            start_delay: Duration::from_millis(10),
            run_for: None,
        };
        let clients = start_fleet(&server, nodes, timing).await?;
        let job = tiny_job(&format!("plan-{run}"), allocs)?;
        register(&server, &job).await?;
        wait_job_allocs(&server, &job, limit, "allocs running", |found| {
            all_with_status(found, allocs, "running")
        })
        .await?;
        let mut edited = job.clone();
        if let Some(task) = edited
            .task_groups
            .first_mut()
            .and_then(|group| group.tasks.first_mut())
        {
            task.env.insert("VERSION".into(), "2".into());
        }
        for (figure, planned) in [
            ("plan, unchanged job (all ignored)", &job),
            ("plan, edited job (all replaced)", &edited),
        ] {
            for _ in 0..samples {
                let started = Instant::now();
                let answer = server
                    .plan_job(drover_structs::JobPlanRequest {
                        job: Some(planned.clone()),
                        diff: true,
                        ..drover_structs::JobPlanRequest::default()
                    })
                    .await
                    .map_err(|error| anyhow!("plan: {error}"))?;
                report.add(figure, "ms", started.elapsed().as_secs_f64() * 1000.0);
                if answer.annotations.is_none() {
                    bail!("the plan has no annotations");
                }
            }
        }
        for client in clients {
            client.shutdown().await;
        }
        server.shutdown().await;
        report.record_load();
    }
    report.note(format!(
        "{allocs} running allocs on {nodes} simulated nodes, on-disk store; {samples} plans per figure and run, each with the diff"
    ));
    Ok(report)
}
