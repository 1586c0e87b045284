//! Scenarios that drive the real release `drover` binary as a process over its HTTP API: agent
//! start, idle memory, `sleep` tasks from register to running and from stop to gone, per-task
//! overhead as PSS, restore after `kill -9`, and the alloc list with many allocations.
//!
//! Each run starts a fresh agent in a temporary data dir and leaves nothing behind: the agent is
//! stopped and every shim and task of the data dir is killed and its mounts unmounted.
//! Not here: in-process scenarios (`in_process`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};

use crate::agent::{AgentProcess, http, poll};
use crate::procfs;
use crate::stats::{Report, percentile};

pub(crate) const START_LIMIT: Duration = Duration::from_secs(60);

/// Where the scenario runs: the binary, and a temp dir that holds the data dirs.
pub struct Bench {
    pub drover: PathBuf,
    pub runs: usize,
}

pub(crate) fn fresh_dir() -> anyhow::Result<tempfile::TempDir> {
    Ok(tempfile::Builder::new().prefix("drover-bench-").tempdir()?)
}

pub(crate) fn job_hcl(
    job_id: &str,
    job_type: &str,
    count: usize,
    command: &str,
    args: &[&str],
) -> String {
    let args = args
        .iter()
        .map(|arg| format!("\"{arg}\""))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        r#"job "{job_id}" {{
  datacenters = ["dc1"]
  type        = "{job_type}"
  group "g" {{
    count = {count}
    ephemeral_disk {{
      size = 10
    }}
    task "t" {{
      driver = "raw_exec"
      config {{
        command = "{command}"
        args    = [{args}]
      }}
      logs {{
        max_files     = 1
        max_file_size = 1
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

/// Parses a jobspec with the agent (outside any timing) and returns the register body.
pub(crate) fn register_body(agent: &AgentProcess, hcl: &str) -> anyhow::Result<Value> {
    let job = agent.send_json(
        "POST",
        "/v1/jobs/parse",
        &json!({"JobHCL": hcl, "Canonicalize": true}),
    )?;
    Ok(json!({ "Job": job }))
}

fn job_allocs(agent: &AgentProcess, job_id: &str) -> anyhow::Result<Vec<Value>> {
    let allocs = agent.get_json(&format!("/v1/job/{job_id}/allocations"))?;
    Ok(allocs.as_array().cloned().unwrap_or_default())
}

fn count_status(allocs: &[Value], status: &str) -> usize {
    allocs
        .iter()
        .filter(|alloc| alloc["ClientStatus"] == status)
        .count()
}

/// Polls the job's allocations until `count` have ClientStatus `status`; returns the last list.
pub(crate) fn wait_allocs_status(
    agent: &AgentProcess,
    job_id: &str,
    count: usize,
    status: &str,
    every: Duration,
    limit: Duration,
) -> anyhow::Result<Vec<Value>> {
    // An allocation that failed on the way will never reach `status`: said at once, with the
    // events that say why (a missing shim, a driver error), instead of a timeout.
    let mut failed = None;
    let allocs = poll(limit, every, &format!("{count} allocs {status}"), || {
        let allocs = job_allocs(agent, job_id).ok()?;
        if let Some(alloc) = allocs
            .iter()
            .find(|alloc| status != "failed" && alloc["ClientStatus"] == "failed")
        {
            failed = Some(failure_events(alloc));
            return Some(allocs);
        }
        (count_status(&allocs, status) >= count).then_some(allocs)
    })?;
    match failed {
        Some(events) => {
            anyhow::bail!("an allocation of {job_id} failed before {count} were {status}: {events}")
        }
        None => Ok(allocs),
    }
}

/// An allocation's task events, `task: type: message` each, for a failure report.
fn failure_events(alloc: &Value) -> String {
    let Some(states) = alloc["TaskStates"].as_object() else {
        return format!("allocation {} (no task events)", alloc["ID"]);
    };
    states
        .iter()
        .flat_map(|(task, state)| {
            state["Events"]
                .as_array()
                .into_iter()
                .flatten()
                .map(move |event| {
                    format!(
                        "{task}: {}: {}",
                        event["Type"].as_str().unwrap_or_default(),
                        event["DisplayMessage"].as_str().unwrap_or_default()
                    )
                })
        })
        .collect::<Vec<_>>()
        .join("; ")
}

pub(crate) fn poll_interval(count: usize) -> Duration {
    if count >= 1000 {
        Duration::from_millis(50)
    } else {
        Duration::from_millis(5)
    }
}

fn started_event_time(alloc: &Value) -> Option<i64> {
    event_time(alloc, "Started")
}

fn started_event_count(alloc: &Value) -> usize {
    alloc["TaskStates"]
        .as_object()
        .map(|states| {
            states
                .values()
                .filter_map(|state| state["Events"].as_array())
                .flatten()
                .filter(|event| event["Type"] == "Started")
                .count()
        })
        .unwrap_or(0)
}

pub(crate) fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// `agent-start`: spawn → `/v1/agent/self` answers.
pub fn agent_start(bench: &Bench) -> anyhow::Result<Report> {
    let mut report = Report::default();
    for _ in 0..bench.runs {
        let temp = fresh_dir()?;
        let agent = AgentProcess::spawn(&bench.drover, &temp.path().join("data"))?;
        let ready = agent.wait_api_ready(START_LIMIT)?;
        report.add("spawn -> /v1/agent/self answers", "ms", ms(ready));
        report.add(
            "agent CPU time (on-CPU) until then",
            "ms",
            procfs::cpu_ms(agent.pid()),
        );
        let node_ready = agent.wait_node_ready(START_LIMIT)?;
        let _ = node_ready;
        report.add(
            "spawn -> node registered and ready",
            "ms",
            ms(agent.spawned_at.elapsed()),
        );
        drop(agent);
        report.record_load();
    }
    Ok(report)
}

/// `idle-rss`: the idle agent's RSS and PSS, 2 s after its node is ready.
pub fn idle_rss(bench: &Bench) -> anyhow::Result<Report> {
    let mut report = Report::default();
    for _ in 0..bench.runs {
        let temp = fresh_dir()?;
        let agent = AgentProcess::spawn(&bench.drover, &temp.path().join("data"))?;
        agent.wait_node_ready(START_LIMIT)?;
        std::thread::sleep(Duration::from_secs(2));
        let pid = agent.pid();
        report.add(
            "idle agent RSS",
            "MiB",
            mib(procfs::rss_kib(pid).unwrap_or(0)),
        );
        report.add(
            "idle agent PSS",
            "MiB",
            mib(procfs::pss_kib(pid).unwrap_or(0)),
        );
        drop(agent);
        report.record_load();
    }
    report.note("measured 2 s after the node is ready; RUST_LOG=warn");
    Ok(report)
}

/// Registers N `sleep` tasks and waits for them to run; returns (elapsed, last alloc list).
pub(crate) fn run_sleeps(
    agent: &AgentProcess,
    job_id: &str,
    count: usize,
) -> anyhow::Result<(Duration, Vec<Value>)> {
    run_sleeps_in(agent, job_id, count, "host")
}

/// [`run_sleeps`] with the group in network mode `network` (`host` adds no network block).
pub(crate) fn run_sleeps_in(
    agent: &AgentProcess,
    job_id: &str,
    count: usize,
    network: &str,
) -> anyhow::Result<(Duration, Vec<Value>)> {
    let hcl = sleep_hcl(job_id, count, network);
    let run = run_sleeps_registered(agent, job_id, count, &hcl)?;
    Ok((run.elapsed, run.allocs))
}

/// The `sleep` job of N tasks, its group in network mode `network` (`host` adds no block).
fn sleep_hcl(job_id: &str, count: usize, network: &str) -> String {
    let mut hcl = job_hcl(job_id, "service", count, "/bin/sleep", &["3600"]);
    if network != "host" {
        hcl = hcl.replacen(
            "    task \"t\" {",
            &format!("    network {{\n      mode = \"{network}\"\n    }}\n    task \"t\" {{"),
            1,
        );
    }
    hcl
}

/// One registration of N `sleep` tasks, with what the step breakdown needs.
pub(crate) struct RegisteredRun {
    /// Register sent → every alloc seen running.
    pub elapsed: Duration,
    /// The last alloc list.
    pub allocs: Vec<Value>,
    /// When the register request was sent, on the wall clock (Unix ns: the agent's clock).
    pub registered_unix_ns: i64,
    /// How long the register request took to answer.
    pub register_answered: Duration,
    /// The evaluation the registration created.
    pub eval_id: String,
}

fn run_sleeps_registered(
    agent: &AgentProcess,
    job_id: &str,
    count: usize,
    hcl: &str,
) -> anyhow::Result<RegisteredRun> {
    let body = register_body(agent, hcl)?;
    let registered_unix_ns = unix_ns_now();
    let started = Instant::now();
    let answer = agent.send_json("PUT", "/v1/jobs", &body)?;
    let register_answered = started.elapsed();
    let allocs = wait_allocs_status(
        agent,
        job_id,
        count,
        "running",
        poll_interval(count),
        Duration::from_secs(600),
    )?;
    Ok(RegisteredRun {
        elapsed: started.elapsed(),
        allocs,
        registered_unix_ns,
        register_answered,
        eval_id: answer["EvalID"].as_str().unwrap_or_default().to_owned(),
    })
}

fn unix_ns_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos() as i64)
}

/// The time of the first event of `kind` among an alloc's tasks (the latest over its tasks).
fn event_time(alloc: &Value, kind: &str) -> Option<i64> {
    alloc["TaskStates"]
        .as_object()?
        .values()
        .filter_map(|state| {
            state["Events"]
                .as_array()?
                .iter()
                .find(|event| event["Type"] == kind)?["Time"]
                .as_i64()
        })
        .max()
}

/// The step breakdown of one register → N running, from what the agent records (the times of
/// the evaluation, the allocations and their task events, all on the agent's wall clock),
/// each milestone as the time from the register request to the *last* alloc reaching it:
///
/// ```text
/// register sent ─API─▶ eval CreateTime ─broker─▶ alloc CreateTime (the scheduler's `now`)
///   ─scheduler + plan apply─▶ eval ModifyTime (plan committed, eval complete)
///   ─client watch─▶ "Received" ─alloc hooks─▶ "Task Setup" ─task hooks + shim spawn─▶ "Started"
///   ─status update─▶ ClientStatus running seen by the poll
/// ```
fn add_steps(report: &mut Report, agent: &AgentProcess, count: usize, run: &RegisteredRun) {
    let since = |unix_ns: i64| (unix_ns - run.registered_unix_ns) as f64 / 1e6;
    let last = |kind: &str| {
        run.allocs
            .iter()
            .filter_map(|alloc| event_time(alloc, kind))
            .max()
    };
    let prefix = format!("step (register -> last of {count})");
    report.add(
        &format!("{prefix}: register answered"),
        "ms",
        ms(run.register_answered),
    );
    if let Ok(eval) = agent.get_json(&format!("/v1/evaluation/{}", run.eval_id)) {
        if let Some(created) = eval["CreateTime"].as_i64() {
            report.add(&format!("{prefix}: eval created"), "ms", since(created));
        }
        if let Some(scheduled) = run
            .allocs
            .iter()
            .filter_map(|alloc| alloc["CreateTime"].as_i64())
            .min()
        {
            report.add(
                &format!("{prefix}: scheduler started (alloc CreateTime)"),
                "ms",
                since(scheduled),
            );
        }
        if let Some(completed) = eval["ModifyTime"].as_i64() {
            report.add(
                &format!("{prefix}: plan committed (eval complete)"),
                "ms",
                since(completed),
            );
        }
    }
    for (kind, what) in [
        ("Received", "client received"),
        ("Task Setup", "task setup (alloc hooks done)"),
        ("Started", "task started (task hooks, shim spawn)"),
    ] {
        if let Some(time) = last(kind) {
            report.add(&format!("{prefix}: {what}"), "ms", since(time));
        }
    }
    report.add(
        &format!("{prefix}: running seen (status update)"),
        "ms",
        ms(run.elapsed),
    );
}

/// Stops a job and waits until every listed pid is gone; returns the elapsed time and when the
/// stop was sent.
pub(crate) fn stop_and_wait_gone(
    agent: &AgentProcess,
    job_id: &str,
    pids: &[i32],
) -> anyhow::Result<(Duration, Instant)> {
    let started = Instant::now();
    let (status, text) = http("DELETE", &agent.address, &format!("/v1/job/{job_id}"), None)?;
    if status != 200 {
        bail!("DELETE /v1/job/{job_id}: {status}: {text}");
    }
    poll(
        Duration::from_secs(600),
        Duration::from_millis(5),
        "task processes to be gone",
        || (!pids.iter().any(|pid| procfs::alive(*pid))).then_some(()),
    )?;
    Ok((started.elapsed(), started))
}

/// `run-sleep --count N`: register → all N allocs running; per alloc create → Started; stop →
/// all task processes gone.
pub fn run_sleep(bench: &Bench, count: usize, network: &str) -> anyhow::Result<Report> {
    let mut report = Report::default();
    for run in 0..bench.runs {
        let temp = fresh_dir()?;
        let agent = AgentProcess::spawn(&bench.drover, &temp.path().join("data"))?;
        agent.wait_node_ready(START_LIMIT)?;
        let job_id = format!("sleep-{count}-{run}");
        let cpu_before = procfs::cpu_ms(agent.pid());
        let registered =
            run_sleeps_registered(&agent, &job_id, count, &sleep_hcl(&job_id, count, network))?;
        add_steps(&mut report, &agent, count, &registered);
        let (elapsed, allocs) = (registered.elapsed, registered.allocs);
        report.add(
            "agent on-CPU time, register -> running",
            "ms",
            procfs::cpu_ms(agent.pid()) - cpu_before,
        );
        report.add(
            &format!("register -> {count} allocs running"),
            "ms",
            ms(elapsed),
        );
        let per_alloc: Vec<f64> = allocs
            .iter()
            .filter_map(|alloc| {
                let created = alloc["CreateTime"].as_i64()?;
                Some((started_event_time(alloc)? - created) as f64 / 1e6)
            })
            .collect();
        if let Some(p50) = percentile(&per_alloc, 50.0) {
            report.add("per alloc CreateTime -> Started p50", "ms", p50);
        }
        if let Some(p99) = percentile(&per_alloc, 99.0) {
            report.add("per alloc CreateTime -> Started p99", "ms", p99);
        }
        let processes = procfs::data_dir_processes(&agent.data_dir, &[agent.pid()]);
        if processes.tasks.len() != count {
            report.note(format!(
                "run {}: found {} task processes for {count} allocs",
                run + 1,
                processes.tasks.len()
            ));
        }
        let (gone, stop_sent) = stop_and_wait_gone(&agent, &job_id, &processes.tasks)?;
        report.add("stop -> all task processes gone", "ms", ms(gone));
        let shims_gone = poll(
            Duration::from_secs(120),
            Duration::from_millis(5),
            "shims to exit",
            || (!processes.shims.iter().any(|pid| procfs::alive(*pid))).then_some(()),
        );
        if shims_gone.is_ok() {
            report.add("stop -> all shims gone too", "ms", ms(stop_sent.elapsed()));
        }
        if network != "host" {
            // The client tears a group network down after the allocation's last task died:
            // the agent is stopped only once every namespace is gone, or it would leave their
            // addresses, port rules and veths behind.
            let namespaces: Vec<std::path::PathBuf> = allocs
                .iter()
                .filter_map(|alloc| alloc["ID"].as_str())
                .map(|id| std::path::Path::new(NETNS_DIR).join(id))
                .collect();
            poll(
                Duration::from_secs(120),
                Duration::from_millis(5),
                "group networks to be torn down",
                || (!namespaces.iter().any(|path| path.exists())).then_some(()),
            )?;
            report.add(
                "stop -> all networks torn down",
                "ms",
                ms(stop_sent.elapsed()),
            );
        }
        drop(agent);
        report.record_load();
    }
    Ok(report)
}

/// Where the client binds the group networks' namespaces (its default `netns_dir`).
const NETNS_DIR: &str = "/var/run/netns";

/// Sums PSS over pids, in KiB.
fn pss_sum(pids: &[i32]) -> u64 {
    pids.iter().filter_map(|pid| procfs::pss_kib(*pid)).sum()
}

/// `overhead --count N`: (agent PSS + shims' PSS − idle agent PSS) / N.
pub fn overhead(bench: &Bench, count: usize) -> anyhow::Result<Report> {
    let mut report = Report::default();
    for run in 0..bench.runs {
        let temp = fresh_dir()?;
        let agent = AgentProcess::spawn(&bench.drover, &temp.path().join("data"))?;
        agent.wait_node_ready(START_LIMIT)?;
        std::thread::sleep(Duration::from_secs(2));
        let pid = agent.pid();
        let idle_pss = procfs::pss_kib(pid).unwrap_or(0);
        let idle_rss = procfs::rss_kib(pid).unwrap_or(0);
        let job_id = format!("overhead-{count}-{run}");
        run_sleeps(&agent, &job_id, count)?;
        std::thread::sleep(Duration::from_secs(2));
        let processes = procfs::data_dir_processes(&agent.data_dir, &[pid]);
        let agent_pss = procfs::pss_kib(pid).unwrap_or(0);
        let agent_rss = procfs::rss_kib(pid).unwrap_or(0);
        let shims_pss = pss_sum(&processes.shims);
        let tasks_pss = pss_sum(&processes.tasks);
        let per_task = (agent_pss + shims_pss).saturating_sub(idle_pss) as f64 / count as f64;
        report.add(
            "per-task overhead (agent + shims - idle)",
            "MiB",
            per_task / 1024.0,
        );
        report.add(
            "shim PSS per task",
            "MiB",
            shims_pss as f64 / processes.shims.len().max(1) as f64 / 1024.0,
        );
        report.add(
            "agent PSS growth per task",
            "KiB",
            agent_pss.saturating_sub(idle_pss) as f64 / count as f64,
        );
        report.add(
            "agent RSS growth (total)",
            "MiB",
            mib(agent_rss.saturating_sub(idle_rss)),
        );
        report.add("agent RSS with the tasks", "MiB", mib(agent_rss));
        report.add(
            "sleep task PSS each (not overhead)",
            "KiB",
            tasks_pss as f64 / processes.tasks.len().max(1) as f64,
        );
        report.note(format!(
            "run {}: {} shims, {} task processes",
            run + 1,
            processes.shims.len(),
            processes.tasks.len()
        ));
        let _ = stop_and_wait_gone(&agent, &job_id, &processes.tasks)?;
        drop(agent);
        report.record_load();
    }
    Ok(report)
}

/// `restore --running N`: N `sleep` tasks, then repeatedly `kill -9` the agent and start it on
/// the same data dir: time until the API answers, and until the client has re-attached every
/// alloc and the server lists them all running.
pub fn restore_running(bench: &Bench, count: usize) -> anyhow::Result<Report> {
    let mut report = Report::default();
    let temp = fresh_dir()?;
    let data_dir = temp.path().join("data");
    let mut agent = AgentProcess::spawn(&bench.drover, &data_dir)?;
    agent.wait_node_ready(START_LIMIT)?;
    let job_id = format!("restore-{count}");
    run_sleeps(&agent, &job_id, count)?;
    // Let the last status batches and the client's state writes land before the kill.
    std::thread::sleep(Duration::from_secs(2));
    let before = procfs::data_dir_processes(&data_dir, &[agent.pid()]);
    let tasks_before: BTreeSet<i32> = before.tasks.iter().copied().collect();
    for run in 0..bench.runs {
        agent.kill9();
        // The old agent is gone; its Drop must not clean the data dir.
        std::mem::forget(agent);
        agent = AgentProcess::spawn(&bench.drover, &data_dir)?;
        let api = agent.wait_api_ready(START_LIMIT)?;
        report.add("kill -9, spawn -> API answers", "ms", ms(api));
        poll(
            Duration::from_secs(300),
            Duration::from_millis(5),
            "every alloc listed running",
            || (count_status(&job_allocs(&agent, &job_id).ok()?, "running") >= count).then_some(()),
        )?;
        agent.wait_node_ready(START_LIMIT)?;
        report.add(
            &format!("spawn -> {count} listed running, node ready"),
            "ms",
            ms(agent.spawned_at.elapsed()),
        );
        let after = procfs::data_dir_processes(&data_dir, &[agent.pid()]);
        let tasks_after: BTreeSet<i32> = after.tasks.iter().copied().collect();
        let allocs = job_allocs(&agent, &job_id)?;
        let restarted = allocs
            .iter()
            .filter(|alloc| started_event_count(alloc) != 1)
            .count();
        report.note(format!(
            "run {}: same task pids: {}; allocs with more than one Started event: {restarted}",
            run + 1,
            tasks_after == tasks_before
        ));
        report.record_load();
    }
    let _ = stop_and_wait_gone(&agent, &job_id, &before.tasks);
    drop(agent);
    procfs::clean_up_after(&data_dir);
    Ok(report)
}

/// Creates `count` terminal allocations with batch jobs of `/bin/true`, `chunk` at a time.
fn create_terminal_allocs(
    agent: &AgentProcess,
    count: usize,
    chunk: usize,
    report: &mut Report,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut created = 0;
    let mut job_number = 0;
    while created < count {
        let this_chunk = chunk.min(count - created);
        let job_id = format!("true-{job_number}");
        let body = register_body(
            agent,
            &job_hcl(&job_id, "batch", this_chunk, "/bin/true", &[]),
        )?;
        agent.send_json("PUT", "/v1/jobs", &body)?;
        wait_allocs_status(
            agent,
            &job_id,
            this_chunk,
            "complete",
            Duration::from_millis(200),
            Duration::from_secs(1200),
        )
        .with_context(|| format!("job {job_id}"))?;
        created += this_chunk;
        job_number += 1;
        eprintln!(
            "  {created}/{count} terminal allocs after {:.1} s",
            started.elapsed().as_secs_f64()
        );
    }
    report.note(format!(
        "setup: {count} terminal allocs (batch /bin/true, {chunk} per job) in {:.1} s",
        started.elapsed().as_secs_f64()
    ));
    Ok(())
}

fn all_allocs_count(agent: &AgentProcess) -> Option<usize> {
    Some(agent.get_json("/v1/allocations").ok()?.as_array()?.len())
}

/// Latency of `GET /v1/allocations`, `requests` times.
pub(crate) fn alloc_list_latency(
    agent: &AgentProcess,
    requests: usize,
    report: &mut Report,
) -> anyhow::Result<()> {
    list_latency(agent, "/v1/allocations", requests, report)
}

/// Latency of one `GET` of a list (`path` with its query), `requests` times.
pub(crate) fn list_latency(
    agent: &AgentProcess,
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
            report.add(&format!("GET {path} {name}"), "ms", value);
        }
    }
    report.note(format!(
        "GET {path}: {requests} requests, one connection each, {bytes} bytes per answer"
    ));
    Ok(())
}

/// `restore --terminal N`: N terminal allocs; `kill -9`, start again: time until the API
/// answers and until the server lists every alloc again; then the alloc list latency.
pub fn restore_terminal(bench: &Bench, count: usize, chunk: usize) -> anyhow::Result<Report> {
    let mut report = Report::default();
    let temp = fresh_dir()?;
    let data_dir = temp.path().join("data");
    let mut agent = AgentProcess::spawn(&bench.drover, &data_dir)?;
    agent.wait_node_ready(START_LIMIT)?;
    create_terminal_allocs(&agent, count, chunk, &mut report)?;
    for _ in 0..bench.runs {
        agent.kill9();
        std::mem::forget(agent);
        agent = AgentProcess::spawn(&bench.drover, &data_dir)?;
        let api = agent.wait_api_ready(START_LIMIT)?;
        report.add("kill -9, spawn -> API answers", "ms", ms(api));
        // The agent serves its API only once the server's state is loaded and the client has
        // rebuilt its runners, so "API answers" is the restore time. Node ready is polled with
        // a cheap request; the full alloc list (hundreds of ms for 10 000 allocs by itself) is
        // checked afterwards.
        agent.wait_node_ready(START_LIMIT)?;
        report.add(
            "spawn -> node listed ready",
            "ms",
            ms(agent.spawned_at.elapsed()),
        );
        poll(
            Duration::from_secs(300),
            Duration::from_millis(5),
            "every alloc listed",
            || (all_allocs_count(&agent)? >= count).then_some(()),
        )?;
        report.add(
            &format!("spawn -> a list of all {count} allocs returned"),
            "ms",
            ms(agent.spawned_at.elapsed()),
        );
        report.record_load();
    }
    alloc_list_latency(&agent, 100, &mut report)?;
    drop(agent);
    procfs::clean_up_after(&data_dir);
    Ok(report)
}

/// `alloc-list --allocs N`: latency of `GET /v1/allocations` with N terminal allocs.
pub fn alloc_list(bench: &Bench, count: usize, chunk: usize) -> anyhow::Result<Report> {
    let mut report = Report::default();
    let temp = fresh_dir()?;
    let agent = AgentProcess::spawn(&bench.drover, &temp.path().join("data"))?;
    agent.wait_node_ready(START_LIMIT)?;
    create_terminal_allocs(&agent, count, chunk, &mut report)?;
    for _ in 0..bench.runs {
        alloc_list_latency(&agent, 100, &mut report)?;
        report.record_load();
    }
    Ok(report)
}

/// The release `drover` next to this binary, unless `--drover` names one.
pub fn locate_drover(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(path) = explicit {
        return Ok(path.to_path_buf());
    }
    let exe = std::env::current_exe()?;
    let candidate = exe.with_file_name("drover");
    if candidate.is_file() {
        return Ok(candidate);
    }
    bail!(
        "no drover binary next to {}; build it with `cargo build --release --bins` or pass --drover PATH",
        exe.display()
    )
}
