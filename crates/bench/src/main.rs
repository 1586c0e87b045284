//! `drover-bench`: named benchmark scenarios, each printing min/median/max over repeated runs
//! with the load average of the (shared) machine after each run.
//!
//! Process scenarios drive the release `drover` binary (next to this one, or `--drover PATH`)
//! as a real agent on port 0 in a temporary data dir, over HTTP; in-process scenarios link the
//! server, scheduler and node simulator. Figures are measured here and recorded in
//! BENCHMARKS.md; nothing asserts them.
//!
//! Not here: tests (CI runs tests, not benchmarks).
//!
//! # Layers
//!
//! Each module directly under `src/` uses only modules on the lines below its own (`error`
//! modules aside), as `crates/structs/tests/module_cycles.rs` checks; top first:
//!
//! - `table`
//! - `catalog`
//! - `artifact`, `checks`, `clients`, `exec_attach`, `fleet_http`
//! - `process`
//! - `agent`, `in_process`
//! - `procfs`, `stats`
//!
//! # Design notes
//!
//! `drover-bench`: named benchmark scenarios against the release binary (and the
//! scheduler, server and node simulator in process); figures go to BENCHMARKS.md, never into
//! tests. `table` is the regression guard `scripts/bench` runs: one table of medians, and with
//! `--compare` each figure's ratio to `crates/bench/baseline`, failing on one > 25 % worse.
//! **Boundary**: measures, changes nothing in the other crates.

mod agent;
mod artifact;
mod catalog;
mod checks;
mod clients;
mod exec_attach;
mod fleet_http;
mod in_process;
mod process;
mod procfs;
mod stats;
mod table;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::process::Bench;

#[derive(Debug, Parser)]
#[command(name = "drover-bench", about = "Benchmark scenarios for drover")]
struct Cli {
    /// Repeated runs per scenario.
    #[arg(long, global = true, default_value_t = 5)]
    runs: usize,
    /// The `drover` binary to run (default: next to this binary).
    #[arg(long, global = true)]
    drover: Option<PathBuf>,
    /// Keep the spawned agents' server state in this etcd cluster (client URLs, comma
    /// separated) instead of the embedded store.
    #[arg(long, global = true, value_delimiter = ',')]
    etcd: Vec<String>,
    #[command(subcommand)]
    scenario: Scenario,
}

#[derive(Debug, Subcommand)]
enum Scenario {
    /// The regression guard: one table of the figures that matter (start, idle PSS, 100 and
    /// 1 000 tasks, per-task PSS, stop, exec, catalog read, check CPU), medians over `--runs`
    /// alternating rounds; with `--compare FILE` each against a baseline, failing when one is
    /// more than 25 % worse.
    Table {
        /// Leave out the 1 000-task figures.
        #[arg(long)]
        quick: bool,
        /// Compare each median with this baseline file.
        #[arg(long)]
        compare: Option<PathBuf>,
        /// Write the medians to this baseline file.
        #[arg(long)]
        write_baseline: Option<PathBuf>,
    },
    /// The agent's CPU with N `http` checks at a 10 s interval, all passing.
    CheckCpu {
        #[arg(long, default_value_t = 1000)]
        checks: usize,
    },
    /// Spawn → `/v1/agent/self` answers.
    AgentStart,
    /// Idle agent RSS and PSS.
    IdleRss,
    /// Register N `sleep` tasks → all running; per alloc p50/p99; stop → processes gone.
    RunSleep {
        #[arg(long, default_value_t = 100)]
        count: usize,
        /// The group's network mode (`host`, or `bridge`: a namespace per allocation through
        /// the CNI plugins, root only).
        #[arg(long, default_value = "host")]
        network: String,
    },
    /// Register N `sleep` tasks → all running across client agents of their own (separate
    /// processes) of a server-only agent (its state on etcd with `--etcd`).
    RunClients {
        #[arg(long, default_value_t = 1000)]
        count: usize,
        #[arg(long, default_value_t = 2)]
        clients: usize,
    },
    /// Register N `sleep` tasks that each fetch a tar.gz artifact → all running: cache cold,
    /// cache warm, and without an artifact.
    RunArtifact {
        #[arg(long, default_value_t = 10)]
        count: usize,
    },
    /// Parse and render a 100-line task template, in process.
    RenderTemplate {
        #[arg(long, default_value_t = 1000)]
        renders: usize,
    },
    /// Per-task overhead as PSS with N `sleep` tasks.
    Overhead {
        #[arg(long, default_value_t = 100)]
        count: usize,
    },
    /// Restore after `kill -9` with N running tasks or N terminal allocs.
    Restore {
        #[arg(long, conflicts_with = "terminal")]
        running: Option<usize>,
        #[arg(long)]
        terminal: Option<usize>,
        /// Terminal allocs are created by batch jobs of this many `/bin/true` tasks.
        #[arg(long, default_value_t = 1000)]
        chunk: usize,
    },
    /// `GET /v1/allocations` latency (p50/p99 over 100 requests) with N allocs.
    AllocList {
        #[arg(long, default_value_t = 10_000)]
        allocs: usize,
        #[arg(long, default_value_t = 1000)]
        chunk: usize,
        /// Set the allocs up as running allocs on this many simulated nodes over HTTP (a
        /// server-only agent) instead of terminal allocs of real `/bin/true` tasks.
        #[arg(long)]
        simulated_nodes: Option<usize>,
        /// Also time the list with this `filter` expression (simulated nodes only), e.g.
        /// `ClientStatus == "running" and Name matches "\\[1"`.
        #[arg(long)]
        filter: Option<String>,
    },
    /// Service catalog reads (`/v1/services`, `/v1/service/<name>`, with `choose`), p50/p99
    /// over 100 requests, with N registrations of running allocs on simulated nodes.
    CatalogRead {
        #[arg(long, default_value_t = 10_000)]
        registrations: usize,
        /// Service names the registrations are spread over.
        #[arg(long, default_value_t = 100)]
        names: usize,
        #[arg(long, default_value_t = 200)]
        simulated_nodes: usize,
    },
    /// Scheduler placements per second on simulated nodes, one thread.
    Scheduler {
        #[arg(long, default_value_t = 10_000)]
        nodes: usize,
        #[arg(long, default_value_t = 10)]
        jobs: usize,
        #[arg(long, default_value_t = 1000)]
        per_job: usize,
    },
    /// `job plan` latency (in process, with the diff) for a job of N running allocations.
    Plan {
        #[arg(long, default_value_t = 1000)]
        allocs: usize,
        #[arg(long, default_value_t = 100)]
        nodes: usize,
        /// Plans timed per figure and run.
        #[arg(long, default_value_t = 20)]
        samples: usize,
    },
    /// Server state-store transactions and writes per alloc lifecycle.
    ServerWrites {
        #[arg(long, default_value_t = 1000)]
        count: usize,
        #[arg(long, default_value_t = 10)]
        nodes: usize,
    },
    /// `alloc exec` of `/bin/echo hi` into a running task: websocket attach and round trip,
    /// and the whole CLI command.
    ExecAttach {
        #[arg(long, default_value_t = 20)]
        sessions: usize,
    },
    /// Simulated nodes at fleet scale against an in-process server, or with `--over-http`
    /// against a server agent process through the HTTP client↔server connection.
    Fleet {
        #[arg(long, default_value_t = 5000)]
        nodes: usize,
        #[arg(long, default_value_t = 10_000)]
        allocs: usize,
        /// Reach a release `drover agent -server` process over HTTP instead of linking the
        /// server.
        #[arg(long)]
        over_http: bool,
    },
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let runs = cli.runs.max(1);
    if !cli.etcd.is_empty() {
        let _ = agent::ETCD_ENDPOINTS.set(cli.etcd.clone());
    }
    let command_line = std::env::args().collect::<Vec<_>>().join(" ");
    println!("# {command_line}");
    println!(
        "# {} ; load average before: {}",
        machine(),
        stats::load_average()
    );
    let bench = || -> anyhow::Result<Bench> {
        Ok(Bench {
            drover: process::locate_drover(cli.drover.as_deref())?,
            runs,
        })
    };
    let runtime = || {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
    };
    let (name, report) = match cli.scenario {
        Scenario::Table {
            quick,
            compare,
            write_baseline,
        } => {
            return table::table(
                &bench()?,
                runs,
                &table::TableOptions {
                    quick,
                    compare,
                    write_baseline,
                },
            );
        }
        Scenario::CheckCpu { checks } => (
            format!("check-cpu --checks {checks}"),
            checks::check_cpu(&bench()?, checks)?,
        ),
        Scenario::AgentStart => ("agent-start".to_string(), process::agent_start(&bench()?)?),
        Scenario::IdleRss => ("idle-rss".to_string(), process::idle_rss(&bench()?)?),
        Scenario::ExecAttach { sessions } => (
            format!("exec-attach --sessions {sessions}"),
            exec_attach::exec_attach(&bench()?, sessions)?,
        ),
        Scenario::RunSleep { count, network } => (
            if network == "host" {
                format!("run-sleep --count {count}")
            } else {
                format!("run-sleep --count {count} --network {network}")
            },
            process::run_sleep(&bench()?, count, &network)?,
        ),
        Scenario::RunClients { count, clients } => (
            format!("run-clients --count {count} --clients {clients}"),
            clients::run_clients(&bench()?, count, clients)?,
        ),
        Scenario::RunArtifact { count } => (
            format!("run-artifact --count {count}"),
            artifact::run_artifact(&bench()?, count)?,
        ),
        Scenario::RenderTemplate { renders } => (
            format!("render-template --renders {renders}"),
            in_process::render_template(runs, renders)?,
        ),
        Scenario::Overhead { count } => (
            format!("overhead --count {count}"),
            process::overhead(&bench()?, count)?,
        ),
        Scenario::Restore {
            running,
            terminal,
            chunk,
        } => match (running, terminal) {
            (_, Some(terminal)) => (
                format!("restore --terminal {terminal}"),
                process::restore_terminal(&bench()?, terminal, chunk)?,
            ),
            (running, None) => {
                let running = running.unwrap_or(1000);
                (
                    format!("restore --running {running}"),
                    process::restore_running(&bench()?, running)?,
                )
            }
        },
        Scenario::AllocList {
            allocs,
            chunk,
            simulated_nodes: None,
            ..
        } => (
            format!("alloc-list --allocs {allocs}"),
            process::alloc_list(&bench()?, allocs, chunk)?,
        ),
        Scenario::AllocList {
            allocs,
            simulated_nodes: Some(nodes),
            filter,
            ..
        } => {
            let bench = bench()?;
            (
                format!("alloc-list --allocs {allocs} --simulated-nodes {nodes}"),
                runtime()?.block_on(fleet_http::alloc_list_with_simulated_nodes(
                    &bench, allocs, nodes, filter,
                ))?,
            )
        }
        Scenario::CatalogRead {
            registrations,
            names,
            simulated_nodes,
        } => {
            let bench = bench()?;
            (
                format!("catalog-read --registrations {registrations} --names {names}"),
                runtime()?.block_on(catalog::catalog_read(
                    &bench,
                    registrations,
                    names,
                    simulated_nodes,
                ))?,
            )
        }
        Scenario::Scheduler {
            nodes,
            jobs,
            per_job,
        } => (
            format!("scheduler --nodes {nodes}"),
            in_process::scheduler(runs, nodes, jobs, per_job)?,
        ),
        Scenario::Plan {
            allocs,
            nodes,
            samples,
        } => (
            format!("plan --allocs {allocs} --nodes {nodes}"),
            runtime()?.block_on(in_process::plan(runs, allocs, nodes, samples))?,
        ),
        Scenario::ServerWrites { count, nodes } => (
            format!("server-writes --count {count}"),
            runtime()?.block_on(in_process::server_writes(runs, count, nodes))?,
        ),
        Scenario::Fleet {
            nodes,
            allocs,
            over_http: false,
        } => (
            format!("fleet --nodes {nodes} --allocs {allocs}"),
            runtime()?.block_on(in_process::fleet(runs, nodes, allocs))?,
        ),
        Scenario::Fleet {
            nodes,
            allocs,
            over_http: true,
        } => {
            let bench = bench()?;
            (
                format!("fleet --over-http --nodes {nodes} --allocs {allocs}"),
                runtime()?.block_on(fleet_http::fleet_over_http(&bench, nodes, allocs))?,
            )
        }
    };
    report.print(&name);
    Ok(())
}

/// CPU count, kernel and memory, for the record.
fn machine() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|text| text.trim().to_string())
        .unwrap_or_default();
    let memory = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|line| line.strip_prefix("MemTotal:"))
                .map(|rest| rest.trim().to_string())
        })
        .unwrap_or_default();
    format!("{cpus} CPUs, kernel {kernel}, memory {memory}")
}
