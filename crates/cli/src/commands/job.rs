//! `drover job run|validate|status|stop|inspect|allocs|revert`.
//!
//! Jobspecs are parsed locally (so errors point at `file:line:col`) and sent as JSON. The
//! support table (`drover_jobspec::support`) is checked locally too: `job validate` reports
//! what a register would refuse as validation errors, located in the file, and `job run` stops
//! before submitting such a job; the agent refuses it anyway. Features that run differently
//! from Nomad are printed as "Job Warnings", as Nomad's CLI prints the agent's warnings.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, Subcommand};
use drover_api::client::ApiClient;
use drover_structs::{Job, JobListStub};

use crate::commands::describe;
use crate::commands::monitor::{MonitorOptions, monitor_evaluation};
use crate::format::{
    allocation_table, date_from_unix_nanos, now_unix_nanos, placement_failure_lines,
};
use crate::{ApiFlags, Io, columnize};

#[derive(Debug, Subcommand)]
pub enum JobCommand {
    /// Submit a job from a jobspec file and watch it being placed
    Run(RunArgs),
    /// Check a jobspec file for errors without submitting it
    Validate(ValidateArgs),
    /// Show the status of all jobs, or of one job
    Status(StatusArgs),
    /// Stop a job (and with -purge, forget it)
    Stop(StopArgs),
    /// Print a job's definition as JSON
    Inspect(InspectArgs),
    /// List a job's allocations
    Allocs(AllocsArgs),
    /// Register an earlier version of a job again
    Revert(RevertArgs),
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
    /// The version to revert to.
    pub version: String,
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

/// `-var` and `-var-file`, shared by `run` and `validate`.
#[derive(Debug, Clone, Default, Args)]
pub struct VariableFlags {
    /// Set an input variable: -var name=value (repeatable).
    #[arg(long = "var", value_name = "NAME=VALUE")]
    pub variables: Vec<String>,
    /// Read input variables from an HCL file (repeatable).
    #[arg(long = "var-file", value_name = "FILE")]
    pub variable_files: Vec<PathBuf>,
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
    /// Accepted for compatibility: the output is always JSON.
    #[arg(long)]
    pub json: bool,
    /// The job ID or ID prefix.
    pub job: String,
}

pub async fn run(command: JobCommand, io: &mut Io<'_>) -> i32 {
    match command {
        JobCommand::Run(arguments) => job_run(arguments, io).await,
        JobCommand::Validate(arguments) => job_validate(arguments, io),
        JobCommand::Status(arguments) => job_status(arguments, io).await,
        JobCommand::Stop(arguments) => job_stop(arguments, io).await,
        JobCommand::Inspect(arguments) => job_inspect(arguments, io).await,
        JobCommand::Allocs(arguments) => job_allocs(arguments, io).await,
        JobCommand::Revert(arguments) => job_revert(arguments, io).await,
    }
}

/// Parses a jobspec file with its variables; the error text lists every problem. Also answers
/// where each field is in the file, to locate the support table's refusals.
fn parse_jobspec(
    file: &Path,
    variables: &VariableFlags,
) -> Result<(Job, drover_jobspec::JobLocations), String> {
    let mut values = drover_jobspec::VarValues::new();
    for path in &variables.variable_files {
        let source = std::fs::read_to_string(path)
            .map_err(|error| format!("Error reading variable file {}: {error}", path.display()))?;
        values
            .add_var_file(&source, &path.display().to_string())
            .map_err(|diagnostics| {
                format!(
                    "Error parsing variable file {}:\n{diagnostics}",
                    path.display()
                )
            })?;
    }
    for assignment in &variables.variables {
        values
            .set_assignment(assignment)
            .map_err(|message| format!("Error parsing -var: {message}"))?;
    }
    if file == Path::new("-") {
        // Nomad reads the jobspec from standard input when the file is `-`.
        let mut source = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut source)
            .map_err(|error| format!("Error reading job from standard input: {error}"))?;
        let parsed = if source.trim_start().starts_with('{') {
            drover_jobspec::parse_json(&source, "<stdin>")
                .map(|job| (job, drover_jobspec::JobLocations::without_source("<stdin>")))
        } else {
            // As the Nomad CLI: file functions of a jobspec on stdin read from the working
            // directory.
            drover_jobspec::parse_hcl_located_reading_files(
                &source,
                "<stdin>",
                &values,
                Some(std::path::Path::new(".")),
            )
        };
        return parsed.map_err(|diagnostics| {
            let lines: Vec<String> = diagnostics.iter().map(ToString::to_string).collect();
            format!("Error parsing job file from <stdin>:\n{}", lines.join("\n"))
        });
    }
    drover_jobspec::parse_any_located(file, &values).map_err(|error| match error {
        drover_jobspec::JobspecError::Read { path, source } => {
            format!("Error reading job file {}: {source}", path.display())
        }
        drover_jobspec::JobspecError::Invalid(diagnostics) => {
            let lines: Vec<String> = diagnostics.iter().map(ToString::to_string).collect();
            format!(
                "Error parsing job file from {}:\n{}",
                file.display(),
                lines.join("\n")
            )
        }
    })
}

/// What a register of `job` would refuse, one located line each (`None` when nothing is).
fn refusal_lines(
    report: &drover_jobspec::SupportReport,
    locations: &drover_jobspec::JobLocations,
) -> Option<String> {
    if report.refusals.is_empty() {
        return None;
    }
    let lines: Vec<String> = locations
        .refusal_diagnostics(report)
        .iter()
        .map(ToString::to_string)
        .collect();
    Some(lines.join("\n"))
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
    let (job, locations) = match parse_jobspec(&arguments.file, &arguments.variables) {
        Ok(parsed) => parsed,
        Err(message) => {
            io.error(message);
            return 1;
        }
    };
    if let Some(refusals) = refusal_lines(&drover_jobspec::support::check(&job), &locations) {
        io.error(format!(
            "Error submitting job: drover cannot run what {} asks for:\n{refusals}",
            arguments.file.display()
        ));
        return 1;
    }
    let client = match arguments.api.client() {
        Ok(client) => client,
        Err(error) => {
            io.error(format!("Error initializing client: {error}"));
            return 1;
        }
    };
    let response = match client.register_job(&job).await {
        Ok(response) => response,
        Err(error) => {
            io.error(describe("submitting job", &error));
            return 1;
        }
    };
    say_warnings(io, &response.warnings);
    let periodic_or_parameterized = job.periodic.is_some() || job.parameterized_job.is_some();
    if arguments.detach || periodic_or_parameterized || response.eval_id.is_empty() {
        io.say("Job registration successful");
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

/// Finds the one job an ID or prefix names; prints Nomad's messages otherwise.
pub async fn resolve_job(client: &ApiClient, io: &mut Io<'_>, prefix: &str) -> Option<String> {
    let jobs = match client.jobs(prefix).await {
        Ok(jobs) => jobs,
        Err(error) => {
            io.error(describe("querying jobs", &error));
            return None;
        }
    };
    if let Some(exact) = jobs.iter().find(|job| job.id == prefix) {
        return Some(exact.id.clone());
    }
    match jobs.as_slice() {
        [] => {
            io.error(format!("No job(s) with prefix or id \"{prefix}\" found"));
            None
        }
        [only] => Some(only.id.clone()),
        many => {
            io.error(format!(
                "Prefix matched multiple jobs\n\n{}",
                job_list_table(many)
            ));
            None
        }
    }
}

fn job_list_table(jobs: &[JobListStub]) -> String {
    let mut rows = vec![
        ["ID", "Type", "Priority", "Status", "Submit Date"]
            .iter()
            .map(|cell| (*cell).to_string())
            .collect::<Vec<_>>(),
    ];
    for job in jobs {
        rows.push(vec![
            job.id.clone(),
            job.r#type.clone(),
            job.priority.to_string(),
            job.status.clone(),
            date_from_unix_nanos(job.submit_time),
        ]);
    }
    columnize::columns(&rows)
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
    io.say(columnize::key_values(&[
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
        ("Parameterized", job.parameterized_job.is_some().to_string()),
    ]));

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

    io.say("");
    io.say("Allocations");
    if allocations.is_empty() {
        io.say("No allocations placed");
    } else {
        io.say(allocation_table(&allocations, verbose, now));
    }
    0
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
    let Ok(version) = arguments.version.parse::<u64>() else {
        io.error(format!(
            "Failed to parse job-version flag: strconv.ParseUint: parsing {:?}: invalid syntax",
            arguments.version
        ));
        return 1;
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
    match client.job(&job_id).await {
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
