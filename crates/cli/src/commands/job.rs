//! `drover job run|validate|status|stop|inspect|allocs|dispatch|periodic force|revert`; `job plan`
//! is in `job_plan`, `job history` in `job_history`, `job promote` in `deployment`, `job scale`
//! and `job scaling-events` in `job_scale`.
//!
//! Jobspecs are parsed locally (so errors point at `file:line:col`) and sent as JSON. The
//! support table (`drover_jobspec::support`) is checked locally too: `job validate` reports
//! what a register would refuse as validation errors, located in the file, and `job run` stops
//! before submitting such a job; the agent refuses it anyway. Features that run differently
//! from Nomad are printed as "Job Warnings", as Nomad's CLI prints the agent's warnings.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};
use drover_api::client::ApiClient;
use drover_structs::{Job, JobListStub};

use crate::commands::describe;
pub use crate::commands::job_input::VariableFlags;
use crate::commands::job_input::{parse_jobspec, read_jobspec_for_submit, refusal_lines};
use crate::commands::lookup::job_list_table;
pub use crate::commands::lookup::resolve_job;
use crate::commands::monitor::{MonitorOptions, monitor_evaluation};
use crate::format::{
    allocation_table, date_from_unix_nanos, now_unix_nanos, placement_failure_lines,
    pretty_from_now, short_id,
};
use crate::{ApiFlags, Io, columnize};

#[derive(Debug, Subcommand)]
pub enum JobCommand {
    /// Submit a job from a jobspec file and watch it being placed
    Run(RunArgs),
    /// Check a jobspec file for errors without submitting it
    Validate(ValidateArgs),
    /// Show what submitting a jobspec would change, without changing anything
    Plan(crate::commands::job_plan::PlanArgs),
    /// Show a job's versions, and with -p what changed between them
    History(crate::commands::job_history::HistoryArgs),
    /// Show the status of all jobs, or of one job
    Status(StatusArgs),
    /// Stop a job (and with -purge, forget it)
    Stop(StopArgs),
    /// Print a job's definition as JSON
    Inspect(InspectArgs),
    /// List a job's allocations
    Allocs(AllocsArgs),
    /// Dispatch an instance of a parameterized job
    Dispatch(DispatchArgs),
    /// Interact with periodic jobs
    #[command(subcommand)]
    Periodic(PeriodicCommand),
    /// Register an earlier version of a job again
    Revert(RevertArgs),
    /// Promote the canaries of a job's latest deployment
    Promote(crate::commands::deployment::PromoteArgs),
    /// Change the count of a job's group
    Scale(crate::commands::job_scale::ScaleArgs),
    /// List a job's recent scaling events
    ScalingEvents(crate::commands::job_scale::ScalingEventsArgs),
    /// Run a task's predefined action inside one of the job's allocations
    Action(crate::commands::exec::JobActionArgs),
    /// Restart or reschedule a job's allocations, in batches
    Restart(crate::commands::job_restart::RestartArgs),
    /// Start a stopped job at its latest version
    Start(crate::commands::job_restart::StartArgs),
    /// Tag a job version, or remove a version's tag
    #[command(subcommand)]
    Tag(crate::commands::job_tag::TagCommand),
}

#[derive(Debug, Args)]
pub struct RevertArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// Return right after reverting, without watching the evaluation.
    #[arg(long)]
    pub detach: bool,
    /// Show full IDs.
    #[arg(long)]
    pub verbose: bool,
    /// The job ID or ID prefix.
    pub job: String,
    /// The version, or the name of a version's tag, to revert to.
    pub version: String,
}

#[derive(Debug, Subcommand)]
pub enum PeriodicCommand {
    /// Launch a periodic job now, whatever its schedule
    Force(PeriodicForceArgs),
}

#[derive(Debug, Args)]
pub struct PeriodicForceArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// Return right after launching, without watching the evaluation.
    #[arg(long)]
    pub detach: bool,
    /// Show full IDs.
    #[arg(long)]
    pub verbose: bool,
    /// The periodic job's ID or ID prefix.
    pub job: String,
}

#[derive(Debug, Args)]
pub struct DispatchArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// Metadata for the dispatched job: -meta key=value (repeatable).
    #[arg(long = "meta", value_name = "KEY=VALUE")]
    pub meta: Vec<String>,
    /// A prefix for the dispatched job's ID (after `<job>/dispatch-`).
    #[arg(long = "id-prefix-template", default_value = "")]
    pub id_prefix_template: String,
    /// A token that makes retried dispatches create one job.
    #[arg(long = "idempotency-token", default_value = "")]
    pub idempotency_token: String,
    /// Return right after dispatching, without watching the evaluation.
    #[arg(long)]
    pub detach: bool,
    /// Show full IDs.
    #[arg(long)]
    pub verbose: bool,
    /// The parameterized job's ID.
    pub job: String,
    /// The payload: a file, or `-` for standard input.
    pub input: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct AllocsArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// Include allocations of earlier jobs with the same ID.
    #[arg(long)]
    pub all: bool,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Show full IDs.
    #[arg(long)]
    pub verbose: bool,
    /// The job ID or ID prefix.
    pub job: String,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    #[command(flatten)]
    pub variables: VariableFlags,
    /// Return right after submitting, without watching the evaluation.
    #[arg(long)]
    pub detach: bool,
    /// Show full IDs.
    #[arg(long)]
    pub verbose: bool,
    /// Submit only if the registered job's modify index is this one (0: only if the job
    /// does not exist yet), as `job plan` suggests.
    #[arg(long = "check-index", value_name = "INDEX")]
    pub check_index: Option<u64>,
    /// Keep the current group counts when updating a job.
    #[arg(long = "preserve-counts")]
    pub preserve_counts: bool,
    /// Keep the current task resources when updating a job.
    #[arg(long = "preserve-resources")]
    pub preserve_resources: bool,
    /// The jobspec (HCL2, or JSON); `-` reads standard input.
    pub file: PathBuf,
}

#[derive(Debug, Args)]
pub struct ValidateArgs {
    #[command(flatten)]
    pub variables: VariableFlags,
    /// The jobspec (HCL2, or JSON).
    pub file: PathBuf,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// Print JSON instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Show full IDs.
    #[arg(long)]
    pub verbose: bool,
    /// A job ID or ID prefix; all jobs when absent.
    pub job: Option<String>,
}

#[derive(Debug, Args)]
pub struct StopArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// Remove the job from the state once stopped.
    #[arg(long)]
    pub purge: bool,
    /// Return right after stopping, without watching the evaluation.
    #[arg(long)]
    pub detach: bool,
    /// Show full IDs.
    #[arg(long)]
    pub verbose: bool,
    /// The job ID or ID prefix.
    pub job: String,
}

#[derive(Debug, Args)]
pub struct InspectArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// Display the job at the given job version. Defaults to current version.
    #[arg(long = "version", value_name = "VERSION")]
    pub version: Option<String>,
    /// Output the job in its JSON format. Cannot be used with -hcl.
    #[arg(long)]
    pub json: bool,
    /// Output the original HCL submitted with the job. Cannot be used with -json.
    #[arg(long)]
    pub hcl: bool,
    /// Include the original HCL2 variables submitted with the job. Can only be used with -hcl.
    #[arg(long = "with-vars")]
    pub with_vars: bool,
    /// Format and display job using a Go template.
    #[arg(short = 't', value_name = "TEMPLATE")]
    pub template: Option<String>,
    /// The job ID or ID prefix (without one, -json or -t list every job).
    pub job: Option<String>,
}

pub async fn run(command: JobCommand, io: &mut Io<'_>) -> i32 {
    match command {
        JobCommand::Run(arguments) => job_run(arguments, io).await,
        JobCommand::Validate(arguments) => job_validate(arguments, io),
        JobCommand::Plan(arguments) => crate::commands::job_plan::job_plan(arguments, io).await,
        JobCommand::History(arguments) => {
            crate::commands::job_history::job_history(arguments, io).await
        }
        JobCommand::Status(arguments) => job_status(arguments, io).await,
        JobCommand::Stop(arguments) => job_stop(arguments, io).await,
        JobCommand::Inspect(arguments) => job_inspect(arguments, io).await,
        JobCommand::Allocs(arguments) => job_allocs(arguments, io).await,
        JobCommand::Dispatch(arguments) => job_dispatch(arguments, io).await,
        JobCommand::Periodic(PeriodicCommand::Force(arguments)) => {
            periodic_force(arguments, io).await
        }
        JobCommand::Revert(arguments) => job_revert(arguments, io).await,
        JobCommand::Promote(arguments) => {
            crate::commands::deployment::job_promote(arguments, io).await
        }
        JobCommand::Scale(arguments) => crate::commands::job_scale::job_scale(arguments, io).await,
        JobCommand::Restart(arguments) => {
            crate::commands::job_restart::job_restart(arguments, io).await
        }
        JobCommand::Start(arguments) => {
            crate::commands::job_restart::job_start(arguments, io).await
        }
        JobCommand::Tag(command) => crate::commands::job_tag::run(command, io).await,
        JobCommand::ScalingEvents(arguments) => {
            crate::commands::job_scale::job_scaling_events(arguments, io).await
        }
        JobCommand::Action(arguments) => crate::commands::exec::job_action(arguments, io).await,
    }
}

/// Nomad's "Job Warnings" paragraph, when there are warnings.
fn say_warnings(io: &mut Io<'_>, warnings: &str) {
    if !warnings.is_empty() {
        io.say(format!("Job Warnings:\n{warnings}\n"));
    }
}

fn job_validate(arguments: ValidateArgs, io: &mut Io<'_>) -> i32 {
    let (job, locations) = match parse_jobspec(&arguments.file, &arguments.variables) {
        Ok(parsed) => parsed,
        Err(message) => {
            io.error(message);
            return 1;
        }
    };
    let report = drover_jobspec::support::check(&job);
    if let Some(refusals) = refusal_lines(&report, &locations) {
        io.error(format!(
            "Job validation errors:\n{refusals}\n(these parse as in Nomad, but drover cannot run them; see docs/jobspec.md)"
        ));
        return 1;
    }
    say_warnings(io, &report.warnings_text());
    io.say("Job validation successful");
    0
}

async fn job_run(arguments: RunArgs, io: &mut Io<'_>) -> i32 {
    let (job, submission) =
        match read_jobspec_for_submit(&arguments.file, &arguments.variables, "submitting job") {
            Ok((job, submission)) => (
                crate::commands::job_input::with_namespace_flag(job, &arguments.api),
                submission,
            ),
            Err(message) => {
                io.error(message);
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
    // As Nomad's CLI (1.6+), the jobspec's source goes along, for `job inspect -hcl`.
    let registered = client
        .register(&drover_structs::JobRegisterRequest {
            job: Some(job.clone()),
            enforce_index: arguments.check_index.is_some(),
            job_modify_index: arguments.check_index.unwrap_or_default(),
            submission: Some(submission),
            preserve_counts: arguments.preserve_counts,
            preserve_resources: arguments.preserve_resources,
            ..drover_structs::JobRegisterRequest::default()
        })
        .await;
    let response = match registered {
        Ok(response) => response,
        Err(drover_api::client::ClientError::Status { message, .. })
            if message.starts_with("Enforcing job modify index") =>
        {
            // Nomad's CLI prints the index error alone, then says nothing was changed.
            io.error(message);
            io.error("Job not updated");
            return 1;
        }
        Err(error) => {
            io.error(describe("submitting job", &error));
            return 1;
        }
    };
    say_warnings(io, &response.warnings);
    let periodic_or_parameterized = job.periodic.is_some() || job.parameterized_job.is_some();
    if arguments.detach || periodic_or_parameterized || response.eval_id.is_empty() {
        io.say("Job registration successful");
        if let Some((_, next)) = next_periodic_launch(&job, now_unix_nanos()) {
            io.say(format!("Approximate next launch time: {next}"));
        }
        if !response.eval_id.is_empty() {
            io.say(format!("Evaluation ID: {}", response.eval_id));
        }
        return 0;
    }
    let mut options = MonitorOptions::new(arguments.verbose);
    if job.r#type == "service" || job.r#type == "system" {
        options.wait_for_allocations = Some(Duration::from_secs(120));
    }
    monitor_evaluation(&client, io, &response.eval_id, options).await
}

fn json_text<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string_pretty(value)
        .unwrap_or_else(|error| format!("{{\"error\": {:?}}}", error.to_string()))
}

pub async fn list_jobs(client: &ApiClient, io: &mut Io<'_>, json: bool) -> i32 {
    match client.jobs("").await {
        Ok(jobs) if json => {
            io.say(json_text(&jobs));
            0
        }
        Ok(jobs) if jobs.is_empty() => {
            io.say("No running jobs");
            0
        }
        Ok(jobs) => {
            io.say(job_list_table(&jobs));
            0
        }
        Err(error) => {
            io.error(describe("querying jobs", &error));
            1
        }
    }
}

async fn job_status(arguments: StatusArgs, io: &mut Io<'_>) -> i32 {
    let client = match arguments.api.client() {
        Ok(client) => client,
        Err(error) => {
            io.error(format!("Error initializing client: {error}"));
            return 1;
        }
    };
    let Some(prefix) = arguments.job else {
        return list_jobs(&client, io, arguments.json).await;
    };
    let Some(job_id) = resolve_job(&client, io, &prefix).await else {
        return 1;
    };
    show_job(&client, io, &job_id, arguments.json, arguments.verbose).await
}

/// The detailed status of one job.
pub async fn show_job(
    client: &ApiClient,
    io: &mut Io<'_>,
    job_id: &str,
    json: bool,
    verbose: bool,
) -> i32 {
    let job = match client.job(job_id).await {
        Ok(job) => job,
        Err(error) => {
            io.error(describe("querying job information", &error));
            return 1;
        }
    };
    if json {
        io.say(json_text(&job));
        return 0;
    }
    let summary = client.job_summary(job_id).await.ok();
    let evaluations = client.job_evaluations(job_id).await.unwrap_or_default();
    let allocations = match client.job_allocations(job_id, false).await {
        Ok(allocations) => allocations,
        Err(error) => {
            io.error(describe("querying job allocations", &error));
            return 1;
        }
    };
    let now = now_unix_nanos();
    io.say(columnize::key_values(
        &[
            ("ID", job.id.clone()),
            ("Name", job.name.clone()),
            ("Submit Date", date_from_unix_nanos(job.submit_time)),
            ("Type", job.r#type.clone()),
            ("Priority", job.priority.to_string()),
            ("Datacenters", job.datacenters.join(",")),
            ("Namespace", job.namespace.clone()),
            ("Node Pool", job.node_pool.clone()),
            ("Status", job_status_text(&job)),
            ("Periodic", job.periodic.is_some().to_string()),
            ("Parameterized", job.is_parameterized().to_string()),
        ]
        .into_iter()
        .chain(next_periodic_launch(&job, now))
        .collect::<Vec<_>>(),
    ));

    if job.is_periodic() || job.is_parameterized() {
        return show_template_job(client, io, &job, summary.as_ref()).await;
    }

    if let Some(summary) = summary {
        let mut rows = vec![
            [
                "Task Group",
                "Queued",
                "Starting",
                "Running",
                "Failed",
                "Complete",
                "Lost",
                "Unknown",
            ]
            .iter()
            .map(|cell| (*cell).to_string())
            .collect::<Vec<_>>(),
        ];
        for (group, counts) in &summary.summary {
            rows.push(vec![
                group.clone(),
                counts.queued.to_string(),
                counts.starting.to_string(),
                counts.running.to_string(),
                counts.failed.to_string(),
                counts.complete.to_string(),
                counts.lost.to_string(),
                counts.unknown.to_string(),
            ]);
        }
        io.say("");
        io.say("Summary");
        io.say(columnize::columns(&rows));
        if let Some(children) = &summary.children {
            io.say("");
            io.say("Children Job Summary");
            io.say(columnize::columns(&[
                vec!["Pending".into(), "Running".into(), "Dead".into()],
                vec![
                    children.pending.to_string(),
                    children.running.to_string(),
                    children.dead.to_string(),
                ],
            ]));
        }
    }

    // The newest evaluation that failed to place something, shown while its blocked
    // follow-up is still waiting for capacity.
    let mut latest: Vec<_> = evaluations.iter().collect();
    latest.sort_by_key(|evaluation| std::cmp::Reverse(evaluation.create_index));
    let still_failing = latest
        .iter()
        .find(|evaluation| !evaluation.failed_tg_allocs.is_empty())
        .filter(|failed| {
            failed.blocked_eval.is_empty()
                || evaluations.iter().any(|evaluation| {
                    evaluation.id == failed.blocked_eval && evaluation.status == "blocked"
                })
        });
    if let Some(failed) = still_failing {
        io.say("");
        io.say("Placement Failure");
        for (group, metric) in &failed.failed_tg_allocs {
            io.say(format!("Task Group \"{group}\":"));
            let lines = placement_failure_lines(metric, "  ");
            io.say(lines.trim_end());
        }
    }

    if let Some(section) = future_rescheduling(&job, &allocations, &evaluations, verbose, now) {
        io.say("");
        io.say("Future Rescheduling Attempts");
        io.say(section);
    }

    if let Ok(Some(deployment)) = client.job_latest_deployment(job_id).await {
        io.say("");
        io.say("Latest Deployment");
        io.say(crate::commands::deployment_view::deployment_text(
            &deployment,
            verbose,
            false,
        ));
    }

    io.say("");
    io.say("Allocations");
    if allocations.is_empty() {
        io.say("No allocations placed");
    } else {
        io.say(allocation_table(&allocations, verbose, now));
    }
    0
}

/// Nomad's "Future Rescheduling Attempts" of `job status`: per group, the follow-up evaluation
/// of its most recently modified allocation while that evaluation is still ahead.
fn future_rescheduling(
    job: &Job,
    allocations: &[drover_structs::AllocListStub],
    evaluations: &[drover_structs::Evaluation],
    verbose: bool,
    now: i64,
) -> Option<String> {
    let mut latest: BTreeMap<&str, &drover_structs::AllocListStub> = BTreeMap::new();
    for alloc in allocations {
        let entry = latest.entry(alloc.task_group.as_str()).or_insert(alloc);
        if alloc.modify_time > entry.modify_time {
            *entry = alloc;
        }
    }
    let mut rows = Vec::new();
    for (group, alloc) in latest {
        if alloc.followup_eval_id.is_empty() {
            continue;
        }
        let Some(wait_until) = evaluations
            .iter()
            .find(|evaluation| evaluation.id == alloc.followup_eval_id)
            .and_then(|evaluation| evaluation.wait_until.unix_nanos())
            .filter(|wait_until| *wait_until > now)
        else {
            continue;
        };
        let mut row = vec![group.to_string()];
        if verbose {
            let policy = job
                .lookup_task_group(group)
                .and_then(|group| group.reschedule_policy.as_ref());
            row.push(policy.map(reschedule_policy_text).unwrap_or_default());
        }
        row.push(short_id(&alloc.followup_eval_id, verbose));
        row.push(pretty_from_now(wait_until, now));
        rows.push(row);
    }
    if rows.is_empty() {
        return None;
    }
    let header: &[&str] = if verbose {
        &["Task Group", "Reschedule Policy", "Eval ID", "Eval Time"]
    } else {
        &["Task Group", "Eval ID", "Eval Time"]
    };
    rows.insert(0, header.iter().map(|cell| (*cell).to_string()).collect());
    Some(columnize::columns(&rows))
}

/// Nomad's `api.ReschedulePolicy.String`.
fn reschedule_policy_text(policy: &drover_structs::ReschedulePolicy) -> String {
    if policy.unlimited {
        format!(
            "unlimited with {} delay, max_delay = {}",
            policy.delay_function, policy.max_delay
        )
    } else {
        format!(
            "{} in {} with {} delay, max_delay = {}",
            policy.attempts, policy.interval, policy.delay_function, policy.max_delay
        )
    }
}

/// Nomad's "Next Periodic Launch" row of a periodic job, in the job's time zone.
fn next_periodic_launch(job: &Job, now_unix_ns: i64) -> Option<(&'static str, String)> {
    let periodic = job.periodic.as_ref().filter(|_| !job.is_parameterized())?;
    if job.stop {
        return Some(("Next Periodic Launch", "none (job stopped)".to_owned()));
    }
    let schedule = drover_jobspec::cron::CronSchedule::of(periodic).ok()?;
    let next = schedule.next_after(now_unix_ns)?;
    // Go's `Truncate(time.Second)` on both ends, then `Duration.String()`.
    let from_now = next - now_unix_ns.div_euclid(1_000_000_000);
    Some((
        "Next Periodic Launch",
        format!(
            "{} ({} from now)",
            schedule.format_in_zone(next),
            drover_structs::DurationNs(from_now.saturating_mul(1_000_000_000))
        ),
    ))
}

/// The rest of `job status` for a periodic or parameterized job: its children, as Nomad
/// shows them.
async fn show_template_job(
    client: &ApiClient,
    io: &mut Io<'_>,
    job: &Job,
    summary: Option<&drover_structs::JobSummary>,
) -> i32 {
    let parameterized = job.is_parameterized();
    if let (true, Some(config)) = (parameterized, job.parameterized_job.as_ref()) {
        io.say("");
        io.say("Parameterized Job");
        // Nomad's `formatKV` shows an empty value as `<none>`.
        let or_none = |text: String| {
            if text.is_empty() {
                "<none>".to_owned()
            } else {
                text
            }
        };
        io.say(columnize::key_values(&[
            ("Payload", or_none(config.payload.clone())),
            (
                "Required Metadata",
                or_none(config.meta_required.join(", ")),
            ),
            (
                "Optional Metadata",
                or_none(config.meta_optional.join(", ")),
            ),
        ]));
    }
    if let Some(children) = summary.and_then(|summary| summary.children.as_ref()) {
        io.say("");
        io.say(if parameterized {
            "Parameterized Job Summary"
        } else {
            "Children Job Summary"
        });
        io.say(columnize::columns(&[
            vec!["Pending".into(), "Running".into(), "Dead".into()],
            vec![
                children.pending.to_string(),
                children.running.to_string(),
                children.dead.to_string(),
            ],
        ]));
    }
    let suffix = if parameterized {
        drover_structs::DISPATCH_LAUNCH_SUFFIX
    } else {
        drover_structs::PERIODIC_LAUNCH_SUFFIX
    };
    let children = match client.jobs(&format!("{}{suffix}", job.id)).await {
        Ok(children) => children,
        Err(error) => {
            io.error(describe("querying job", &error));
            return 1;
        }
    };
    if children.is_empty() {
        io.say("");
        io.say(if parameterized {
            "No dispatched instances of parameterized job found"
        } else {
            "No instances of periodic job found"
        });
        return 0;
    }
    let mut rows = vec![vec!["ID".to_owned(), "Status".to_owned()]];
    rows.extend(
        children
            .iter()
            .filter(|child| child.parent_id == job.id)
            .map(|child| vec![child.id.clone(), child.status.clone()]),
    );
    io.say("");
    io.say(if parameterized {
        "Dispatched Jobs"
    } else {
        "Previously Launched Jobs"
    });
    io.say(columnize::columns(&rows));
    0
}

/// `job periodic force`: launches a periodic job now and watches its evaluation.
async fn periodic_force(arguments: PeriodicForceArgs, io: &mut Io<'_>) -> i32 {
    let client = match arguments.api.client() {
        Ok(client) => client,
        Err(error) => {
            io.error(format!("Error initializing client: {error}"));
            return 1;
        }
    };
    let jobs = match client.jobs(&arguments.job).await {
        Ok(jobs) => jobs,
        Err(error) => {
            io.error(describe("forcing periodic job", &error));
            return 1;
        }
    };
    let periodic: Vec<&JobListStub> = jobs
        .iter()
        .filter(|job| job.periodic && !job.parameterized_job)
        .collect();
    let job_id = match periodic.as_slice() {
        [] => {
            io.error(format!(
                "No periodic job(s) with prefix or id {:?} found",
                arguments.job
            ));
            return 1;
        }
        [only] => only.id.clone(),
        many => match many.iter().find(|job| job.id == arguments.job) {
            Some(exact) => exact.id.clone(),
            None => {
                let owned: Vec<JobListStub> = many.iter().map(|job| (*job).clone()).collect();
                io.error(format!(
                    "Prefix matched multiple periodic jobs\n\n{}",
                    job_list_table(&owned)
                ));
                return 1;
            }
        },
    };
    let response = match client.force_periodic(&job_id).await {
        Ok(response) => response,
        Err(error) => {
            io.error(format!("Error forcing periodic job {job_id:?}: {error}"));
            return 1;
        }
    };
    if arguments.detach {
        io.say("Force periodic successful");
        io.say(format!("Evaluation ID: {}", response.eval_id));
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

/// `job dispatch`: dispatches a parameterized job with metadata and a payload.
async fn job_dispatch(arguments: DispatchArgs, io: &mut Io<'_>) -> i32 {
    let payload = match &arguments.input {
        None => Vec::new(),
        Some(path) if path.as_os_str() == "-" => {
            let mut bytes = Vec::new();
            if let Err(error) = std::io::Read::read_to_end(&mut std::io::stdin(), &mut bytes) {
                io.error(format!("Error reading input data: {error}"));
                return 1;
            }
            bytes
        }
        Some(path) => match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(error) => {
                io.error(format!("Error reading input data: {error}"));
                return 1;
            }
        },
    };
    let mut meta = std::collections::BTreeMap::new();
    for pair in &arguments.meta {
        let Some((key, value)) = pair.split_once('=') else {
            io.error(format!("Error parsing meta value: {pair}"));
            return 1;
        };
        meta.insert(key.to_owned(), value.to_owned());
    }
    let client = match arguments.api.client() {
        Ok(client) => client,
        Err(error) => {
            io.error(format!("Error initializing client: {error}"));
            return 1;
        }
    };
    let request = drover_structs::JobDispatchRequest {
        job_id: arguments.job.clone(),
        payload: drover_structs::Bytes(payload),
        meta,
        id_prefix_template: arguments.id_prefix_template.clone(),
    };
    let response = match client
        .dispatch_job(&arguments.job, &request, &arguments.idempotency_token)
        .await
    {
        Ok(response) => response,
        Err(error) => {
            io.error(format!("Failed to dispatch job: {error}"));
            return 1;
        }
    };
    let mut rows = vec![("Dispatched Job ID", response.dispatched_job_id.clone())];
    if !response.eval_id.is_empty() {
        let shown = if arguments.verbose {
            response.eval_id.clone()
        } else {
            response.eval_id.chars().take(8).collect()
        };
        rows.push(("Evaluation ID", shown));
    }
    io.say(columnize::key_values(&rows));
    if arguments.detach || response.eval_id.is_empty() {
        return 0;
    }
    io.say("");
    monitor_evaluation(
        &client,
        io,
        &response.eval_id,
        MonitorOptions::new(arguments.verbose),
    )
    .await
}

fn job_status_text(job: &Job) -> String {
    if job.stop {
        format!("{} (stopped)", job.status)
    } else {
        job.status.clone()
    }
}

async fn job_stop(arguments: StopArgs, io: &mut Io<'_>) -> i32 {
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
    let response = match client.deregister_job(&job_id, arguments.purge).await {
        Ok(response) => response,
        Err(error) => {
            io.error(describe("deregistering job", &error));
            return 1;
        }
    };
    if response.eval_id.is_empty() {
        return 0;
    }
    if arguments.detach {
        io.say(response.eval_id);
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

/// Nomad's `job revert`: silent with `-detach`, else the evaluation monitored.
async fn job_revert(arguments: RevertArgs, io: &mut Io<'_>) -> i32 {
    let client = match arguments.api.client() {
        Ok(client) => client,
        Err(error) => {
            io.error(format!("Error initializing client: {error}"));
            return 1;
        }
    };
    // A number is a version; anything else names a version's tag (Nomad 1.9).
    let version = match arguments.version.parse::<u64>() {
        Ok(version) => version,
        Err(_) => {
            let versions = match client.job_versions(&arguments.job, false).await {
                Ok(response) => response.versions,
                Err(error) => {
                    io.error(describe("retrieving job versions", &error));
                    return 1;
                }
            };
            let tagged = versions.iter().find(|job| {
                job.version_tag
                    .as_ref()
                    .is_some_and(|tag| tag.name == arguments.version)
            });
            match tagged {
                Some(job) => job.version,
                None => {
                    io.error(format!(
                        "Error retrieving job versions: version tag {} not found for job {}",
                        arguments.version, arguments.job
                    ));
                    return 1;
                }
            }
        }
    };
    let Some(job_id) = resolve_job(&client, io, &arguments.job).await else {
        return 1;
    };
    let response = match client.revert_job(&job_id, version).await {
        Ok(response) => response,
        Err(error) => {
            io.error(describe("retrieving job versions", &error));
            return 1;
        }
    };
    if arguments.detach || response.eval_id.is_empty() {
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

async fn job_inspect(arguments: InspectArgs, io: &mut Io<'_>) -> i32 {
    if arguments.hcl && arguments.json {
        io.error("can only use one of -hcl or -json");
        return 1;
    }
    if arguments.with_vars && !arguments.hcl {
        io.error("can only use -with-vars with -hcl");
        return 1;
    }
    let template = arguments.template.clone().unwrap_or_default();
    let client = match arguments.api.client() {
        Ok(client) => client,
        Err(error) => {
            io.error(format!("Error initializing client: {error}"));
            return 1;
        }
    };
    let Some(prefix) = arguments.job.as_deref() else {
        if !arguments.json && template.is_empty() {
            io.error("This command takes one argument: <job>");
            return 1;
        }
        return match client.jobs("").await {
            Ok(jobs) => formatted(io, arguments.json, &template, &jobs),
            Err(error) => {
                io.error(describe("querying jobs", &error));
                1
            }
        };
    };
    let Some(job_id) = resolve_job(&client, io, prefix.trim()).await else {
        return 1;
    };
    let version = match arguments.version.as_deref().filter(|text| !text.is_empty()) {
        None => None,
        Some(text) => match text.parse::<u64>() {
            Ok(version) => Some(version),
            Err(_) => {
                io.error(format!(
                    "Error parsing version value {text:?}: strconv.ParseUint: parsing {text:?}: invalid syntax"
                ));
                return 1;
            }
        },
    };
    if arguments.hcl {
        let version = match version {
            Some(version) => version,
            None => match client.job(&job_id).await {
                Ok(job) => job.version,
                Err(error) => {
                    io.error(describe("inspecting job", &error));
                    return 1;
                }
            },
        };
        let submission = match client.job_submission(&job_id, version).await {
            Ok(submission) => submission,
            Err(_) => {
                io.error(format!(
                    "Error inspecting job: job {job_id:?} with version {version} couldn't be found"
                ));
                return 1;
            }
        };
        io.say(&submission.source);
        if arguments.with_vars {
            io.error(with_vars_text(&submission.namespace, &job_id, &submission));
        }
        return 0;
    }
    let job = match version {
        None => client.job(&job_id).await,
        Some(version) => match client.job_versions(&job_id, false).await {
            Ok(versions) => match versions
                .versions
                .into_iter()
                .find(|job| job.version == version)
            {
                Some(job) => Ok(job),
                None => {
                    io.error(format!(
                        "Error inspecting job: job {job_id:?} with version {version} couldn't be found"
                    ));
                    return 1;
                }
            },
            Err(error) => Err(error),
        },
    };
    match job {
        Ok(job) if arguments.json || !template.is_empty() => {
            formatted(io, arguments.json, &template, &job)
        }
        Ok(job) => {
            io.say(json_text(&serde_json::json!({ "Job": job })));
            0
        }
        Err(error) => {
            io.error(describe("inspecting job", &error));
            1
        }
    }
}

/// Nomad's `Format(json, template, data)`: the data as JSON, or rendered with a Go template.
fn formatted(io: &mut Io<'_>, json: bool, template: &str, data: &impl serde::Serialize) -> i32 {
    if json && !template.is_empty() {
        io.error("Both json and template formatting are not allowed");
        return 1;
    }
    if json {
        io.say(json_text(data));
        return 0;
    }
    let rendered = serde_json::to_value(data)
        .map_err(|error| error.to_string())
        .and_then(|value| {
            drover_template::render("", template, &drover_template::Value::from_json(&value))
                .map_err(|error| error.to_string())
        });
    match rendered {
        Ok(text) => {
            io.say(text);
            0
        }
        Err(error) => {
            io.error(format!("Error executing template: {error}"));
            1
        }
    }
}

/// What `job inspect -hcl -with-vars` adds: the command that runs the job again as submitted,
/// its `-var` flags sorted, then each line of the variable files as one more `-var`. Nomad
/// ends the `job run` line with the job's ID, which `job run` would read as a file; the source
/// comes from standard input here, so it ends with `-`.
fn with_vars_text(
    namespace: &str,
    job_id: &str,
    submission: &drover_structs::JobSubmission,
) -> String {
    let mut run_arguments: Vec<String> = Vec::new();
    if !namespace.is_empty() {
        run_arguments.push("-namespace".to_owned());
        run_arguments.push(namespace.to_owned());
    }
    let mut flags: Vec<String> = submission
        .variable_flags
        .iter()
        .flatten()
        .map(|(name, value)| format!("{name}={value}"))
        .collect();
    flags.sort();
    for flag in flags {
        run_arguments.push("-var".to_owned());
        run_arguments.push(flag);
    }
    for line in submission.variables.split('\n') {
        let line = line.trim();
        if !line.is_empty() {
            run_arguments.push("-var".to_owned());
            run_arguments.push(line.to_owned());
        }
    }
    run_arguments.push("-".to_owned());
    format!(
        "\nTo run this job as originally submitted:\n\n$ drover job inspect -namespace {namespace} -hcl {job_id} |\n    drover job run {}\n",
        run_arguments.join(" ")
    )
}

async fn job_allocs(arguments: AllocsArgs, io: &mut Io<'_>) -> i32 {
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
    match client.job_allocations(&job_id, arguments.all).await {
        Ok(allocations) if arguments.json => {
            io.say(json_text(&allocations));
            0
        }
        Ok(allocations) if allocations.is_empty() => 0,
        Ok(allocations) => {
            io.say(allocation_table(
                &allocations,
                arguments.verbose,
                now_unix_nanos(),
            ));
            0
        }
        Err(error) => {
            io.error(describe("retrieving job allocations", &error));
            1
        }
    }
}
