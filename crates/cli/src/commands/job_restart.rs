//! `drover job restart` and `drover job start`, as Nomad's CLI (1.6 and 1.10.2) does them.
//!
//! `job restart` restarts a job's running allocations in place
//! (`PUT /v1/client/allocation/<id>/restart`), or with `-reschedule` stops them
//! (`PUT /v1/allocation/<id>/stop`) and waits for each replacement to run, in batches of
//! `-batch-size` (a count or a percentage, rounded up), waiting `-batch-wait` (or asking) between
//! batches. A batch with errors stops the restart (`-on-error=fail`) or asks; `-yes` answers
//! every question. Ctrl-C never stops a batch midway: the batch finishes, then the command asks
//! whether to stop (standard input closed or not a terminal: it stops), and carries on with the
//! next batch when told not to. Not here: any retry of a failed restart (the user reruns it).
//!
//! `job start` registers a stopped job's latest version again with `Stop` false and monitors
//! the evaluation.

use std::collections::{BTreeMap, BTreeSet};
use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use clap::Args;
use drover_api::client::{ApiClient, ClientError, escape_path_segment};
use drover_structs::{AllocListStub, Allocation, Evaluation, Job};

use crate::commands::describe;
use crate::commands::lookup::resolve_job;
use crate::commands::monitor::{MonitorOptions, monitor_evaluation};
use crate::format::{now_date, placement_failure_lines, short_id};
use crate::{ApiFlags, Io};

/// The width of `==> 2026-01-02T15:04:05Z: `, which continuation lines are indented by.
const PREFIX_WIDTH: usize = 31;

#[derive(Debug, Args)]
pub struct RestartArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// Restart every task of the allocations, even those that already ran.
    #[arg(long = "all-tasks")]
    pub all_tasks: bool,
    /// Allocations restarted at once: a number, or a percentage of the eligible ones.
    #[arg(long = "batch-size", default_value = "1")]
    pub batch_size: String,
    /// Time to wait between batches, or `ask`.
    #[arg(long = "batch-wait", default_value = "0s")]
    pub batch_wait: String,
    /// Only allocations of this group (repeatable).
    #[arg(long = "group")]
    pub groups: Vec<String>,
    /// Skip the tasks' shutdown_delay when stopping allocations.
    #[arg(long = "no-shutdown-delay")]
    pub no_shutdown_delay: bool,
    /// What to do when a batch has errors: `ask` or `fail`.
    #[arg(long = "on-error", default_value = "ask")]
    pub on_error: String,
    /// Stop the allocations and wait for their replacements instead of restarting in place.
    #[arg(long)]
    pub reschedule: bool,
    /// Only this task (repeatable).
    #[arg(long = "task")]
    pub tasks: Vec<String>,
    /// Answer yes to every question.
    #[arg(long)]
    pub yes: bool,
    /// Show full IDs and skipped allocations.
    #[arg(long)]
    pub verbose: bool,
    /// The job ID or ID prefix.
    pub job: String,
}

#[derive(Debug, Args)]
pub struct StartArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// Return right after starting, without watching the evaluation.
    #[arg(long)]
    pub detach: bool,
    /// Show full IDs.
    #[arg(long)]
    pub verbose: bool,
    /// The job ID or ID prefix.
    pub job: String,
}

/// Validated `job restart` flags.
#[derive(Debug, Clone)]
struct Plan {
    all_tasks: bool,
    yes: bool,
    batch_size: usize,
    batch_size_percent: bool,
    batch_wait: Duration,
    batch_wait_ask: bool,
    fail_on_error: bool,
    groups: BTreeSet<String>,
    tasks: BTreeSet<String>,
    no_shutdown_delay: bool,
    reschedule: bool,
    verbose: bool,
}

/// Reads Go's `time.ParseDuration` forms: `0`, `90s`, `1m30s`, `1.5h`, `250ms`.
fn parse_go_duration(text: &str) -> Result<Duration, String> {
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    if text.is_empty() {
        return Err("time: invalid duration \"\"".to_owned());
    }
    let invalid = || format!("time: invalid duration {text:?}");
    let mut rest = text;
    let mut total = 0f64;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| format!("time: missing unit in duration {text:?}"))?;
        if number_end == 0 {
            return Err(invalid());
        }
        let number: f64 = rest[..number_end].parse().map_err(|_| invalid())?;
        rest = &rest[number_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds = match &rest[..unit_end] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            unit => return Err(format!("time: unknown unit {unit:?} in duration {text:?}")),
        };
        total += number * seconds;
        rest = &rest[unit_end..];
    }
    Ok(Duration::from_secs_f64(total))
}

/// Go's `Duration.String` for the waits the command prints (`5s`, `1m30s`, `250ms`).
fn go_duration_text(duration: Duration) -> String {
    let seconds = duration.as_secs();
    let millis = duration.subsec_millis();
    if seconds == 0 {
        return if millis == 0 {
            "0s".to_owned()
        } else {
            format!("{millis}ms")
        };
    }
    let (hours, minutes, whole) = (seconds / 3600, (seconds % 3600) / 60, seconds % 60);
    let fraction = if millis == 0 {
        String::new()
    } else {
        format!(".{millis:03}").trim_end_matches('0').to_owned()
    };
    let mut text = String::new();
    if hours > 0 {
        text.push_str(&format!("{hours}h"));
    }
    if hours > 0 || minutes > 0 {
        text.push_str(&format!("{minutes}m"));
    }
    text.push_str(&format!("{whole}{fraction}s"));
    text
}

fn validate(arguments: &RestartArgs) -> Result<Plan, String> {
    let interactive = std::io::stdin().is_terminal();
    let size_text = arguments.batch_size.as_str();
    let digits = size_text.strip_suffix('%').unwrap_or(size_text);
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
        return Err(format!(
            "Invalid -batch-size value {size_text:?}: batch size must be an integer or a percentage"
        ));
    }
    let batch_size: usize = digits
        .parse()
        .map_err(|error| format!("Invalid -batch-size value {size_text:?}: {error}"))?;
    if batch_size == 0 {
        return Err(format!(
            "Invalid -batch-size value {size_text:?}: number value must be greater than zero"
        ));
    }
    let (batch_wait, batch_wait_ask) = if arguments.batch_wait.eq_ignore_ascii_case("ask") {
        if !interactive && !arguments.yes {
            return Err(
                "Invalid -batch-wait value \"ask\": \"ask\" cannot be used when terminal is not interactive"
                    .to_owned(),
            );
        }
        (Duration::ZERO, true)
    } else {
        let wait = parse_go_duration(&arguments.batch_wait).map_err(|error| {
            format!(
                "Invalid -batch-wait value {:?}: {error}",
                arguments.batch_wait
            )
        })?;
        (wait, false)
    };
    let fail_on_error = match arguments.on_error.as_str() {
        "ask" => {
            if !interactive && !arguments.yes {
                return Err(
                    "Invalid -on-error value \"ask\": \"ask\" cannot be used when terminal is not interactive"
                        .to_owned(),
                );
            }
            false
        }
        "fail" => true,
        other => {
            return Err(format!(
                "Invalid -on-error value {other:?}: valid options are \"ask\" and \"fail\""
            ));
        }
    };
    if arguments.all_tasks && !arguments.tasks.is_empty() {
        return Err("The -all-tasks option cannot be used with -task".to_owned());
    }
    if arguments.reschedule && !arguments.tasks.is_empty() {
        return Err("The -reschedule option cannot be used with -task".to_owned());
    }
    Ok(Plan {
        all_tasks: arguments.all_tasks,
        yes: arguments.yes,
        batch_size,
        batch_size_percent: size_text.ends_with('%'),
        batch_wait,
        batch_wait_ask,
        fail_on_error,
        groups: arguments.groups.iter().cloned().collect(),
        tasks: arguments.tasks.iter().cloned().collect(),
        no_shutdown_delay: arguments.no_shutdown_delay,
        reschedule: arguments.reschedule,
        verbose: arguments.verbose,
    })
}

/// A line of the command's log: `==> <time>: <text>`, continuation lines indented under it.
fn headline(text: &str) -> String {
    let indented = text.replace('\n', &format!("\n{}", " ".repeat(PREFIX_WIDTH)));
    format!("==> {}: {indented}", now_date())
}

/// A detail line: `    <time>: <text>`.
fn detail(text: &str) -> String {
    format!("    {}: {text}", now_date())
}

fn plural(count: usize, one: &str, many: &str) -> String {
    if count == 1 {
        format!("1 {one}")
    } else {
        format!("{count} {many}")
    }
}

/// English ordinals as go-humanize writes them: 1st, 2nd, 3rd, 4th, 11th, 21st.
fn ordinal(number: usize) -> String {
    let suffix = match (number % 10, number % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{number}{suffix}")
}

/// One failed restart, and whether the next batch would likely fail the same way.
#[derive(Debug)]
struct RestartError {
    text: String,
    recoverable: bool,
}

/// The errors of a batch (or of the whole run) as Nomad's multierror prints them.
fn errors_text(errors: &[RestartError], indent: usize) -> String {
    let points: Vec<String> = errors
        .iter()
        .map(|error| format!("* {}", error.text.trim()))
        .collect();
    let text = format!(
        "{} occurred while restarting job:\n{}",
        plural(errors.len(), "error", "errors"),
        points.join("\n")
    );
    text.replace('\n', &format!("\n{}", " ".repeat(indent)))
}

/// Reads one answer from standard input; `None` when it is closed (the question then takes
/// its default for an interrupted prompt).
async fn read_answer() -> Option<String> {
    tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        match std::io::stdin().read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(line.trim().to_owned()),
        }
    })
    .await
    .ok()
    .flatten()
}

/// Asks until an answer the callback accepts; `on_closed` when standard input has nothing more.
async fn ask(
    io: &mut Io<'_>,
    question: &str,
    on_closed: bool,
    mut answer: impl FnMut(&str, &mut Io<'_>) -> Result<bool, String>,
) -> bool {
    loop {
        io.say(headline(question));
        let Some(text) = read_answer().await else {
            return on_closed;
        };
        match answer(&text, io) {
            Ok(decision) => return decision,
            Err(error) => io.say(format!("{}{error}", " ".repeat(PREFIX_WIDTH))),
        }
    }
}

/// `job restart` with its API client and job.
struct Restart<'a> {
    client: ApiClient,
    job_id: String,
    plan: Plan,
    versions: BTreeMap<u64, Job>,
    interrupted: &'a AtomicBool,
}

impl Restart<'_> {
    fn id(&self, id: &str) -> String {
        short_id(id, self.plan.verbose)
    }

    /// Whether the allocation has the task: in its task states, else in its job version.
    fn has_task(&self, stub: &AllocListStub, task: &str) -> bool {
        if stub
            .task_states
            .as_ref()
            .is_some_and(|states| states.contains_key(task))
        {
            return true;
        }
        self.versions.get(&stub.job_version).is_some_and(|job| {
            job.task_groups
                .iter()
                .filter(|group| group.name == stub.task_group)
                .any(|group| group.tasks.iter().any(|candidate| candidate.name == task))
        })
    }

    fn filter(&self, stubs: Vec<AllocListStub>, io: &mut Io<'_>) -> Vec<AllocListStub> {
        let mut kept = Vec::new();
        for stub in stubs {
            let short = self.id(&stub.id);
            if stub.client_status != "running" && stub.desired_status != "run" {
                if self.plan.verbose {
                    io.say(detail(&format!(
                        "Skipping allocation {short:?} because desired status is {:?} and client status is {:?}",
                        stub.client_status, stub.desired_status
                    )));
                }
                continue;
            }
            if !stub.next_allocation.is_empty() {
                if self.plan.verbose {
                    io.say(detail(&format!(
                        "Skipping allocation {short:?} because it has already been replaced by {:?}",
                        self.id(&stub.next_allocation)
                    )));
                }
                continue;
            }
            if !self.plan.groups.is_empty() && !self.plan.groups.contains(&stub.task_group) {
                if self.plan.verbose {
                    io.say(detail(&format!(
                        "Skipping allocation {short:?} because it doesn't have any of requested groups"
                    )));
                }
                continue;
            }
            if !self.plan.tasks.is_empty()
                && !self
                    .plan
                    .tasks
                    .iter()
                    .any(|task| self.has_task(&stub, task))
            {
                if self.plan.verbose {
                    io.say(detail(&format!(
                        "Skipping allocation {short:?} because it doesn't have any of requested tasks"
                    )));
                }
                continue;
            }
            kept.push(stub);
        }
        kept
    }

    async fn ensure_no_active_deployment(&self) -> Result<(), RestartError> {
        let deployments = self
            .client
            .job_deployments(&self.job_id, true)
            .await
            .map_err(|error| RestartError {
                text: format!(
                    "Error retrieving deployments for job {:?}: {error}",
                    self.job_id
                ),
                recoverable: true,
            })?;
        for deployment in deployments {
            if !matches!(
                deployment.status.as_str(),
                "failed" | "successful" | "cancelled"
            ) {
                return Err(RestartError {
                    text: format!(
                        "Deployment {:?} is {:?}",
                        self.id(&deployment.id),
                        deployment.status
                    ),
                    recoverable: true,
                });
            }
        }
        Ok(())
    }

    /// Restarts or stops one allocation; the lines it prints are returned with the result so
    /// a batch's allocations can run at once.
    async fn handle(&self, stub: &AllocListStub) -> (Vec<String>, Result<(), RestartError>) {
        let mut lines = Vec::new();
        let result = if self.plan.reschedule {
            self.stop_and_wait(stub, &mut lines).await
        } else {
            self.restart_in_place(stub, &mut lines).await
        };
        let result = result.map_err(|error| RestartError {
            text: format!(
                "Error restarting allocation {:?}: {}",
                self.id(&stub.id),
                error.text
            ),
            recoverable: error.recoverable,
        });
        (lines, result)
    }

    async fn restart_in_place(
        &self,
        stub: &AllocListStub,
        lines: &mut Vec<String>,
    ) -> Result<(), RestartError> {
        let short = self.id(&stub.id);
        let failed = |error: ClientError| RestartError {
            recoverable: error.status() != Some(403),
            text: error.to_string(),
        };
        if self.plan.all_tasks {
            lines.push(detail(&format!(
                "Restarting all tasks in allocation {short:?} for group {:?}",
                stub.task_group
            )));
            return self
                .client
                .restart_allocation(&stub.id, None, true)
                .await
                .map(drop)
                .map_err(failed);
        }
        if self.plan.tasks.is_empty() {
            lines.push(detail(&format!(
                "Restarting running tasks in allocation {short:?} for group {:?}",
                stub.task_group
            )));
            return self
                .client
                .restart_allocation(&stub.id, None, false)
                .await
                .map(drop)
                .map_err(failed);
        }
        let mut restarts = Vec::new();
        for task in self
            .plan
            .tasks
            .iter()
            .filter(|task| self.has_task(stub, task))
        {
            lines.push(detail(&format!(
                "Restarting task {task:?} in allocation {short:?} for group {:?}",
                stub.task_group
            )));
            restarts.push(async move {
                self.client
                    .restart_allocation(&stub.id, Some(task), false)
                    .await
                    .map_err(|error| RestartError {
                        recoverable: error.status() != Some(403),
                        text: format!("Failed to restart task {task:?}: {error}"),
                    })
            });
        }
        let errors: Vec<RestartError> = futures_join_all(restarts)
            .await
            .into_iter()
            .filter_map(Result::err)
            .collect();
        match errors.len() {
            0 => Ok(()),
            1 => Err(errors.into_iter().next().unwrap_or(RestartError {
                text: String::new(),
                recoverable: true,
            })),
            _ => Err(RestartError {
                recoverable: errors.iter().all(|error| error.recoverable),
                text: errors
                    .iter()
                    .map(|error| error.text.clone())
                    .collect::<Vec<_>>()
                    .join("; "),
            }),
        }
    }

    /// Stops the allocation and waits until its replacement runs, or an evaluation made after
    /// the stop is blocked with placement failures for its group.
    async fn stop_and_wait(
        &self,
        stub: &AllocListStub,
        lines: &mut Vec<String>,
    ) -> Result<(), RestartError> {
        let short = self.id(&stub.id);
        lines.push(detail(&format!(
            "Rescheduling allocation {short:?} for group {:?}",
            stub.task_group
        )));
        let query: Vec<(&str, String)> = if self.plan.no_shutdown_delay {
            vec![("no_shutdown_delay", "true".to_owned())]
        } else {
            Vec::new()
        };
        let stopped = self
            .client
            .call_json_query(
                "PUT",
                &format!("/v1/allocation/{}/stop", escape_path_segment(&stub.id)),
                &query,
                None,
            )
            .await
            .map_err(|error| RestartError {
                recoverable: error.status() != Some(403),
                text: format!("Failed to stop allocation: {error}"),
            })?;
        let stop_index = stopped
            .as_ref()
            .and_then(|body| body.get("Index"))
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(0);
        if stub.job_type == "system" {
            self.client
                .evaluate_job(&stub.job_id, true)
                .await
                .map_err(|error| RestartError {
                    recoverable: true,
                    text: format!("Failed evaluate job: {error}"),
                })?;
        }
        let mut current = stub.id.clone();
        let mut index = 1u64;
        let mut last_ping = tokio::time::Instant::now();
        loop {
            if let Some(failure) = self.placement_failure(stub, stop_index).await? {
                return Err(failure);
            }
            let path = format!("/v1/allocation/{}", escape_path_segment(&current));
            let (body, meta) = self
                .client
                .call_json_with_meta(
                    "GET",
                    &path,
                    &[("index", index.to_string()), ("wait", "1s".to_owned())],
                )
                .await
                .map_err(|error| RestartError {
                    recoverable: true,
                    text: format!(
                        "Failed to retrieve allocation {:?}: {error}",
                        self.id(&current)
                    ),
                })?;
            let allocation: Allocation = body
                .map(serde_json::from_value)
                .transpose()
                .map_err(|error| RestartError {
                    recoverable: true,
                    text: format!(
                        "Failed to retrieve allocation {:?}: {error}",
                        self.id(&current)
                    ),
                })?
                .ok_or_else(|| RestartError {
                    recoverable: true,
                    text: format!(
                        "Failed to retrieve allocation {:?}: not found",
                        self.id(&current)
                    ),
                })?;
            if !allocation.next_allocation.is_empty() {
                lines.push(detail(&format!(
                    "Allocation {:?} replaced by {next:?}, waiting for {next:?} to start running",
                    self.id(&allocation.id),
                    next = self.id(&allocation.next_allocation)
                )));
                current = allocation.next_allocation.clone();
                index = 1;
                continue;
            }
            if allocation.client_status == "running" && allocation.id != stub.id {
                lines.push(detail(&format!(
                    "Allocation {:?} is {:?}",
                    self.id(&allocation.id),
                    allocation.client_status
                )));
                return Ok(());
            }
            if last_ping.elapsed() >= Duration::from_secs(60) {
                lines.push(detail(&format!(
                    "Still waiting for allocation {short:?} to be replaced"
                )));
                last_ping = tokio::time::Instant::now();
            }
            index = meta.last_index.max(1);
        }
    }

    /// A blocked evaluation made at or after the stop with failures for the group.
    async fn placement_failure(
        &self,
        stub: &AllocListStub,
        stop_index: u64,
    ) -> Result<Option<RestartError>, RestartError> {
        let evaluations: Vec<Evaluation> = self
            .client
            .job_evaluations(&stub.job_id)
            .await
            .map_err(|error| RestartError {
                recoverable: true,
                text: format!(
                    "Failed to retrieve evaluations for job {:?}: {error}",
                    stub.job_id
                ),
            })?;
        for evaluation in evaluations {
            if evaluation.create_index < stop_index || evaluation.status != "blocked" {
                continue;
            }
            if let Some(metric) = evaluation.failed_tg_allocs.get(&stub.task_group) {
                return Ok(Some(RestartError {
                    recoverable: false,
                    text: format!(
                        "Evaluation {:?} has placement failures for group {:?}:\n{}",
                        self.id(&evaluation.id),
                        stub.task_group,
                        placement_failure_lines(metric, "    ").trim_end()
                    ),
                }));
            }
        }
        Ok(None)
    }

    /// Waits `duration`, or less when Ctrl-C comes.
    async fn wait(&self, duration: Duration) {
        let deadline = tokio::time::Instant::now() + duration;
        while tokio::time::Instant::now() < deadline && !self.interrupted.load(Ordering::SeqCst) {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            tokio::time::sleep(left.min(Duration::from_millis(100))).await;
        }
    }

    /// After Ctrl-C: asks whether to stop; true to stop.
    async fn should_exit(&self, io: &mut Io<'_>) -> bool {
        self.interrupted.store(false, Ordering::SeqCst);
        ask(
            io,
            "Restart interrupted, no more allocations will be restarted.\nAre you sure you want to stop the restart process? [y/N]",
            true,
            |answer, _| match answer.to_ascii_lowercase().as_str() {
                "n" | "no" | "" => Ok(false),
                "y" | "yes" => Ok(true),
                _ => Err(format!("Invalid answer {answer:?}")),
            },
        )
        .await
    }

    /// Asks how to go on after a batch; true to proceed. A duration answer to `-batch-wait
    /// ask` becomes the wait for the remaining batches.
    async fn should_proceed(&mut self, io: &mut Io<'_>, batch_error: Option<bool>) -> bool {
        let (question, mut options) = match batch_error {
            None => ("Proceed with the next batch?", "Y/n".to_owned()),
            Some(true) => (
                "Ignore the errors above and proceed with the next batch?",
                "y/N".to_owned(),
            ),
            Some(false) => (
                "The errors above are likely to happen again.\nIgnore them anyway and proceed with the next batch?",
                "y/N".to_owned(),
            ),
        };
        if self.plan.batch_wait_ask {
            options.push_str("/<wait duration>");
        }
        let wait_ask = self.plan.batch_wait_ask;
        let mut new_wait = None;
        let proceed = ask(
            io,
            &format!("{question} [{options}]"),
            false,
            |answer, _| match answer.to_ascii_lowercase().as_str() {
                "" => Ok(batch_error.is_none()),
                "y" | "yes" => Ok(true),
                "n" | "no" => Ok(false),
                _ if wait_ask => match parse_go_duration(answer) {
                    Ok(wait) => {
                        new_wait = Some(wait);
                        Ok(true)
                    }
                    Err(_) => Err(format!("Invalid answer {answer:?}")),
                },
                _ => Err(format!("Invalid answer {answer:?}")),
            },
        )
        .await;
        if let Some(wait) = new_wait {
            self.plan.batch_wait_ask = false;
            self.plan.batch_wait = wait;
            io.say(headline(&format!(
                "Proceeding restarts with new wait time of {}",
                go_duration_text(wait)
            )));
        }
        proceed
    }
}

/// Runs futures at once and collects their results in order (a batch's allocations).
async fn futures_join_all<F: std::future::Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut pinned: Vec<std::pin::Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut results: Vec<Option<F::Output>> = (0..pinned.len()).map(|_| None).collect();
    std::future::poll_fn(|context| {
        let mut pending = false;
        for (slot, future) in results.iter_mut().zip(pinned.iter_mut()) {
            if slot.is_none() {
                match future.as_mut().poll(context) {
                    std::task::Poll::Ready(output) => *slot = Some(output),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    results.into_iter().flatten().collect()
}

pub async fn job_restart(arguments: RestartArgs, io: &mut Io<'_>) -> i32 {
    let plan = match validate(&arguments) {
        Ok(plan) => plan,
        Err(error) => {
            io.error(error);
            io.error("For additional help try 'drover job restart -help'");
            return 1;
        }
    };
    let client = match arguments.api.client() {
        Ok(client) => client,
        Err(error) => {
            io.error(format!("Error initializing client: {error}"));
            return 1;
        }
    };
    let Some(job_id) = resolve_job(&client, io, &arguments.job).await else {
        return 1;
    };
    let job = match client.job(&job_id).await {
        Ok(job) => job,
        Err(error) => {
            io.error(describe("querying job", &error));
            return 1;
        }
    };
    let client = client.in_namespace(&job.namespace);

    // Ctrl-C is noted here and acted on between batches.
    let interrupted = Arc::new(AtomicBool::new(false));
    let listener = {
        let interrupted = Arc::clone(&interrupted);
        tokio::spawn(async move {
            while tokio::signal::ctrl_c().await.is_ok() {
                interrupted.store(true, Ordering::SeqCst);
            }
        })
    };
    let code = restart_job(client, job, plan, &interrupted, io).await;
    listener.abort();
    code
}

async fn restart_job(
    client: ApiClient,
    job: Job,
    plan: Plan,
    interrupted: &AtomicBool,
    io: &mut Io<'_>,
) -> i32 {
    if plan.reschedule && !matches!(job.r#type.as_str(), "batch" | "service" | "system") {
        io.error(format!(
            "Jobs of type {:?} are not allowed to be rescheduled.",
            job.r#type
        ));
        return 1;
    }
    if job.multiregion.is_some() && !plan.yes {
        io.say(format!(
            "Are you sure you want to restart multi-region job {:?} in a single region? [y/N]",
            job.id
        ));
        let proceed = matches!(
            read_answer()
                .await
                .map(|answer| answer.to_ascii_lowercase())
                .as_deref(),
            Some("y" | "yes")
        );
        if !proceed {
            io.say("\nJob restart canceled.");
            return 0;
        }
    }
    let job_id = job.id.clone();
    let versions = match client.job_versions(&job_id, false).await {
        Ok(response) => response
            .versions
            .into_iter()
            .map(|version| (version.version, version))
            .collect(),
        Err(error) => {
            io.error(format!(
                "Error retrieving versions of job {job_id:?}: {error}"
            ));
            return 1;
        }
    };
    let stubs = match client.job_allocations(&job_id, true).await {
        Ok(stubs) => stubs,
        Err(error) => {
            io.error(format!(
                "Error retrieving allocations for job {job_id:?}: {error}"
            ));
            return 1;
        }
    };
    let mut restart = Restart {
        client,
        job_id,
        plan,
        versions,
        interrupted,
    };
    let allocations = restart.filter(stubs, io);
    if allocations.is_empty() {
        io.say("No allocations to restart");
        return 0;
    }
    let batch_size = if restart.plan.batch_size_percent {
        (allocations.len() * restart.plan.batch_size)
            .div_ceil(100)
            .max(1)
    } else {
        restart.plan.batch_size
    };
    io.say(headline(&format!(
        "Restarting {}",
        plural(allocations.len(), "allocation", "allocations")
    )));

    let mut all_errors: Vec<RestartError> = Vec::new();
    let mut canceled = false;
    let batches: Vec<&[AllocListStub]> = allocations.chunks(batch_size).collect();
    for (number, batch) in batches.iter().enumerate() {
        if let Err(error) = restart.ensure_no_active_deployment().await {
            all_errors.push(error);
            break;
        }
        if batch_size > 1 {
            io.say(headline(&format!(
                "Restarting {} batch of {} allocations",
                ordinal(number + 1),
                batch.len()
            )));
        }
        let results =
            futures_join_all(batch.iter().map(|stub| restart.handle(stub)).collect()).await;
        let mut batch_errors = Vec::new();
        for (lines, result) in results {
            for line in lines {
                io.say(line);
            }
            if let Err(error) = result {
                batch_errors.push(error);
            }
        }
        let last = number + 1 == batches.len();
        let batch_error =
            (!batch_errors.is_empty()).then(|| batch_errors.iter().all(|error| error.recoverable));
        let batch_text =
            (!batch_errors.is_empty()).then(|| errors_text(&batch_errors, PREFIX_WIDTH));
        all_errors.extend(batch_errors);
        if last {
            break;
        }
        if restart.interrupted.load(Ordering::SeqCst) && restart.should_exit(io).await {
            io.say("\nCanceling job restart process");
            return 0;
        }
        if let Some(recoverable) = batch_error {
            if restart.plan.fail_on_error {
                io.say(headline("Stopping job restart due to error"));
                break;
            }
            if restart.plan.yes && !recoverable {
                io.say(headline("Stopping job restart due to unrecoverable error"));
                break;
            }
        }
        let ask_user = !restart.plan.yes
            && (restart.plan.batch_wait_ask
                || (!restart.plan.fail_on_error && batch_error.is_some()));
        if ask_user {
            if let Some(text) = &batch_text {
                io.error(headline(text));
            }
            if !restart.should_proceed(io, batch_error).await {
                io.say(headline("Job restart canceled"));
                canceled = true;
                break;
            }
        }
        if restart.plan.batch_wait > Duration::ZERO {
            io.say(headline(&format!(
                "Waiting {} before restarting the next batch",
                go_duration_text(restart.plan.batch_wait)
            )));
            restart.wait(restart.plan.batch_wait).await;
            if restart.interrupted.load(Ordering::SeqCst) && restart.should_exit(io).await {
                io.say("\nCanceling job restart process");
                return 0;
            }
        }
    }

    if !all_errors.is_empty() {
        if !canceled {
            io.say(headline("Job restart finished with errors"));
        }
        io.error(format!("\n{}", errors_text(&all_errors, 0)));
        return 1;
    }
    if !canceled {
        io.say(headline("Job restart finished"));
        io.say("\nJob restarted successfully!");
    }
    0
}

/// Nomad's `job start`: a stopped job's latest version registered again, not stopped.
pub async fn job_start(arguments: StartArgs, io: &mut Io<'_>) -> i32 {
    let client = match arguments.api.client() {
        Ok(client) => client,
        Err(error) => {
            io.error(format!("Error initializing client: {error}"));
            return 1;
        }
    };
    let Some(job_id) = resolve_job(&client, io, &arguments.job).await else {
        return 1;
    };
    let mut job = match client.job(&job_id).await {
        Ok(job) => job,
        Err(error) => {
            io.error(describe("querying job", &error));
            return 1;
        }
    };
    if !job.stop {
        io.error(format!("Job {:?} has not been stopped", job.name));
        return 1;
    }
    job.stop = false;
    // The new version is not the tagged one.
    job.version_tag = None;
    let client = client.in_namespace(&job.namespace);
    let response = match client.register_job(&job).await {
        Ok(response) => response,
        Err(error) => {
            io.error(describe("starting job", &error));
            return 1;
        }
    };
    let periodic = job
        .periodic
        .as_ref()
        .is_some_and(|periodic| periodic.enabled);
    let parameterized = job.parameterized_job.is_some();
    if arguments.detach || periodic || parameterized || job.multiregion.is_some() {
        io.say("Job start successful");
        if !parameterized && !periodic {
            io.say(format!("Evaluation ID: {}", response.eval_id));
        }
        return 0;
    }
    monitor_evaluation(
        &client,
        io,
        &response.eval_id,
        MonitorOptions::new(arguments.verbose),
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_read_and_print_as_go_does() {
        assert_eq!(parse_go_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_go_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_go_duration("250ms"), Ok(Duration::from_millis(250)));
        assert!(parse_go_duration("5").is_err());
        assert!(parse_go_duration("5x").is_err());
        assert_eq!(go_duration_text(Duration::from_secs(90)), "1m30s");
        assert_eq!(go_duration_text(Duration::from_secs(3)), "3s");
        assert_eq!(go_duration_text(Duration::from_millis(1500)), "1.5s");
        assert_eq!(go_duration_text(Duration::from_secs(3600)), "1h0m0s");
    }

    #[test]
    fn ordinals_read_as_humanize_writes_them() {
        let texts: Vec<String> = [1, 2, 3, 4, 11, 12, 21, 22, 113].map(ordinal).to_vec();
        assert_eq!(
            texts,
            [
                "1st", "2nd", "3rd", "4th", "11th", "12th", "21st", "22nd", "113th"
            ]
        );
    }
}
