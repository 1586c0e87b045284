//! Watching an evaluation after a job is registered or stopped, as Nomad's `monitor.go` does:
//! poll the evaluation once a second until it is terminal, report the allocations it created
//! and any failed placements with their reasons, follow its `NextEval` chain (each evaluation
//! watched in turn, as a rolling system job's waves are), then watch the deployment the evaluation
//! belongs to until it is done, or (for `job run` of a service job without one) wait until the
//! new allocations have left `pending`.
//!
//! Exit codes as Nomad's: 0 done, 1 error or failed evaluation, 2 placement failures.

use std::collections::BTreeMap;
use std::time::Duration;

use drover_api::client::ApiClient;

use crate::Io;
use crate::commands::describe;
use crate::format::{now_date, placement_failure_lines, short_id};

/// How the monitor polls.
#[derive(Debug, Clone, Copy)]
pub struct MonitorOptions {
    pub poll_interval: Duration,
    /// Wait for the evaluation's allocations to leave `pending`, up to this long.
    pub wait_for_allocations: Option<Duration>,
    pub verbose: bool,
}

impl MonitorOptions {
    pub fn new(verbose: bool) -> Self {
        let poll_interval = std::env::var("DROVER_MONITOR_INTERVAL_MS")
            .ok()
            .and_then(|text| text.parse::<u64>().ok())
            .map_or(Duration::from_secs(1), Duration::from_millis);
        MonitorOptions {
            poll_interval,
            wait_for_allocations: None,
            verbose,
        }
    }
}

/// Watches `eval_id`, then each evaluation it chains to through `NextEval` (a system job's
/// rolling-update waves, a delayed reschedule), as Nomad's monitor does; the exit code is the
/// last one's.
pub async fn monitor_evaluation(
    client: &ApiClient,
    io: &mut Io<'_>,
    eval_id: &str,
    options: MonitorOptions,
) -> i32 {
    let mut eval_id = eval_id.to_owned();
    loop {
        match monitor_one_evaluation(client, io, &eval_id, options).await {
            Step::Done(code) => return code,
            Step::Next {
                eval_id: next,
                wait,
            } => {
                if !wait.is_zero() {
                    io.say(format!(
                        "==> {}: Monitoring next evaluation \"{}\" in {}",
                        now_date(),
                        short_id(&next, options.verbose),
                        wait.to_go_string()
                    ));
                    tokio::time::sleep(wait.to_std()).await;
                }
                eval_id = next;
            }
        }
    }
}

/// What comes after one evaluation finished.
enum Step {
    /// Nothing more to watch: exit with this code.
    Done(i32),
    /// Watch the evaluation it chains to, after its own `Wait`.
    Next {
        eval_id: String,
        wait: drover_structs::DurationNs,
    },
}

async fn monitor_one_evaluation(
    client: &ApiClient,
    io: &mut Io<'_>,
    eval_id: &str,
    options: MonitorOptions,
) -> Step {
    let verbose = options.verbose;
    io.say(format!(
        "==> {}: Monitoring evaluation \"{}\"",
        now_date(),
        short_id(eval_id, verbose)
    ));
    let mut last_status = String::new();
    let mut reported_allocations: BTreeMap<String, String> = BTreeMap::new();
    let mut first = true;
    let mut deployment_reported = false;
    let evaluation = loop {
        let evaluation = match client.evaluation(eval_id).await {
            Ok(evaluation) => evaluation,
            Err(error) => {
                io.error(describe("reading evaluation", &error));
                return Step::Done(1);
            }
        };
        if first {
            if !evaluation.job_id.is_empty() {
                io.say(format!(
                    "    {}: Evaluation triggered by job \"{}\"",
                    now_date(),
                    evaluation.job_id
                ));
            }
            first = false;
        }
        if !deployment_reported && !evaluation.deployment_id.is_empty() {
            io.say(format!(
                "    {}: Evaluation within deployment: \"{}\"",
                now_date(),
                short_id(&evaluation.deployment_id, verbose)
            ));
            deployment_reported = true;
        }
        match client.evaluation_allocations(eval_id).await {
            Ok(allocations) => {
                for allocation in allocations {
                    if reported_allocations.contains_key(&allocation.id) {
                        continue;
                    }
                    // An allocation older than the evaluation was changed by it, not made.
                    let verb = if allocation.create_index < evaluation.create_index {
                        "modified"
                    } else {
                        "created"
                    };
                    io.say(format!(
                        "    {}: Allocation \"{}\" {verb}: node \"{}\", group \"{}\"",
                        now_date(),
                        short_id(&allocation.id, verbose),
                        short_id(&allocation.node_id, verbose),
                        allocation.task_group
                    ));
                    reported_allocations.insert(allocation.id.clone(), allocation.client_status);
                }
            }
            Err(error) => {
                io.error(describe("reading allocations", &error));
                return Step::Done(1);
            }
        }
        // Placements first, then the status they led to, as Nomad's monitor reports them.
        if evaluation.status != last_status {
            if !last_status.is_empty() {
                io.say(format!(
                    "    {}: Evaluation status changed: \"{}\" -> \"{}\"",
                    now_date(),
                    last_status,
                    evaluation.status
                ));
            }
            last_status = evaluation.status.clone();
        }
        if evaluation.terminal_status() {
            break evaluation;
        }
        tokio::time::sleep(options.poll_interval).await;
    };

    if !evaluation.failed_tg_allocs.is_empty() {
        io.say(format!(
            "==> {}: Evaluation \"{}\" finished with status \"{}\" but failed to place all allocations:",
            now_date(),
            short_id(eval_id, verbose),
            evaluation.status
        ));
        for (group, metric) in &evaluation.failed_tg_allocs {
            let failed = metric.coalesced_failures + 1;
            let plural = if failed == 1 { "" } else { "s" };
            io.say(format!(
                "    {}: Task Group \"{group}\" (failed to place {failed} allocation{plural}):",
                now_date()
            ));
            let lines = placement_failure_lines(metric, "      ");
            let _ = write!(io.out, "{lines}");
        }
        if !evaluation.blocked_eval.is_empty() {
            io.say(format!(
                "    {}: Evaluation \"{}\" waiting for additional capacity to place remainder",
                now_date(),
                short_id(&evaluation.blocked_eval, verbose)
            ));
        }
        return next_step(&evaluation).unwrap_or(Step::Done(2));
    }
    io.say(format!(
        "==> {}: Evaluation \"{}\" finished with status \"{}\"",
        now_date(),
        short_id(eval_id, verbose),
        evaluation.status
    ));
    if let Some(next) = next_step(&evaluation) {
        return next;
    }
    if evaluation.status == "failed" {
        return Step::Done(1);
    }
    // A rollout: watch the deployment, as Nomad's monitor does, instead of the allocations.
    if !evaluation.deployment_id.is_empty() {
        io.say(format!(
            "==> {}: Monitoring deployment \"{}\"",
            now_date(),
            short_id(&evaluation.deployment_id, verbose)
        ));
        crate::commands::deployment_view::monitor_deployment(
            client,
            io,
            &evaluation.deployment_id,
            verbose,
            "    ",
        )
        .await;
        return Step::Done(0);
    }
    if let Some(limit) = options.wait_for_allocations
        && !reported_allocations.is_empty()
    {
        return Step::Done(
            wait_for_allocations(client, io, eval_id, reported_allocations, limit, options).await,
        );
    }
    Step::Done(0)
}

/// The evaluation a finished one chains to, if any.
fn next_step(evaluation: &drover_structs::Evaluation) -> Option<Step> {
    (!evaluation.next_eval.is_empty()).then(|| Step::Next {
        eval_id: evaluation.next_eval.clone(),
        wait: evaluation.wait,
    })
}

async fn wait_for_allocations(
    client: &ApiClient,
    io: &mut Io<'_>,
    eval_id: &str,
    mut statuses: BTreeMap<String, String>,
    limit: Duration,
    options: MonitorOptions,
) -> i32 {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let allocations = match client.evaluation_allocations(eval_id).await {
            Ok(allocations) => allocations,
            Err(error) => {
                io.error(describe("reading allocations", &error));
                return 1;
            }
        };
        let mut pending = false;
        let mut failed = false;
        for allocation in &allocations {
            let previous = statuses
                .insert(allocation.id.clone(), allocation.client_status.clone())
                .unwrap_or_default();
            if !previous.is_empty() && previous != allocation.client_status {
                io.say(format!(
                    "    {}: Allocation \"{}\" status changed: \"{}\" -> \"{}\" ({})",
                    now_date(),
                    short_id(&allocation.id, options.verbose),
                    previous,
                    allocation.client_status,
                    allocation.client_description
                ));
            }
            pending |= allocation.client_status == "pending";
            failed |= allocation.client_status == "failed";
        }
        if !pending {
            if failed {
                io.say(format!("==> {}: Some allocations failed", now_date()));
                return 2;
            }
            io.say(format!(
                "==> {}: All allocations placed by the evaluation have started",
                now_date()
            ));
            return 0;
        }
        if tokio::time::Instant::now() >= deadline {
            io.say(format!(
                "==> {}: Allocations are still pending; see \"drover job status\"",
                now_date()
            ));
            return 0;
        }
        tokio::time::sleep(options.poll_interval).await;
    }
}
