//! `drover eval status ID`: one evaluation, with its placement failures.

use clap::{Args, Subcommand};

use crate::commands::describe;
use crate::format::{now_unix_nanos, or_none, placement_failure_lines, pretty_age, short_id};
use crate::{ApiFlags, Io, columnize};

#[derive(Debug, Subcommand)]
pub enum EvalCommand {
    /// Show an evaluation and why it could not place allocations
    Status(StatusArgs),
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Show full IDs.
    #[arg(long)]
    pub verbose: bool,
    /// The evaluation ID or ID prefix.
    pub eval: String,
}

pub async fn run(command: EvalCommand, io: &mut Io<'_>) -> i32 {
    match command {
        EvalCommand::Status(arguments) => eval_status(arguments, io).await,
    }
}

async fn eval_status(arguments: StatusArgs, io: &mut Io<'_>) -> i32 {
    let client = match arguments.api.client() {
        Ok(client) => client,
        Err(error) => {
            io.error(format!("Error initializing client: {error}"));
            return 1;
        }
    };
    let candidates = match client.evaluations(&arguments.eval).await {
        Ok(candidates) => candidates,
        Err(error) => {
            io.error(describe("querying evaluation", &error));
            return 1;
        }
    };
    let evaluation = match candidates.as_slice() {
        [] => {
            io.error(format!(
                "No evaluation(s) with prefix or id \"{}\" found",
                arguments.eval
            ));
            return 1;
        }
        [only] => only.clone(),
        many => match many.iter().find(|candidate| candidate.id == arguments.eval) {
            Some(exact) => exact.clone(),
            None => {
                let mut rows = vec![
                    ["ID", "Priority", "Triggered By", "Job ID", "Status"]
                        .iter()
                        .map(|cell| (*cell).to_string())
                        .collect::<Vec<_>>(),
                ];
                for candidate in many {
                    rows.push(vec![
                        short_id(&candidate.id, arguments.verbose),
                        candidate.priority.to_string(),
                        candidate.triggered_by.clone(),
                        candidate.job_id.clone(),
                        candidate.status.clone(),
                    ]);
                }
                io.error(format!(
                    "Prefix matched multiple evaluations\n\n{}",
                    columnize::columns(&rows)
                ));
                return 1;
            }
        },
    };
    if arguments.json {
        io.say(serde_json::to_string_pretty(&evaluation).unwrap_or_default());
        return 0;
    }
    let now = now_unix_nanos();
    let verbose = arguments.verbose;
    io.say(columnize::key_values(&[
        ("ID", short_id(&evaluation.id, verbose)),
        ("Create Time", pretty_age(evaluation.create_time, now)),
        ("Modify Time", pretty_age(evaluation.modify_time, now)),
        ("Status", evaluation.status.clone()),
        (
            "Status Description",
            or_none(&evaluation.status_description),
        ),
        ("Type", evaluation.r#type.clone()),
        ("TriggeredBy", evaluation.triggered_by.clone()),
        ("Job ID", evaluation.job_id.clone()),
        ("Namespace", evaluation.namespace.clone()),
        ("Priority", evaluation.priority.to_string()),
        (
            "Placement Failures",
            (!evaluation.failed_tg_allocs.is_empty()).to_string(),
        ),
    ]));
    if !evaluation.failed_tg_allocs.is_empty() {
        io.say("");
        io.say("Failed Placements");
        for (group, metric) in &evaluation.failed_tg_allocs {
            let failed = metric.coalesced_failures + 1;
            let plural = if failed == 1 { "" } else { "s" };
            io.say(format!(
                "Task Group \"{group}\" (failed to place {failed} allocation{plural}):"
            ));
            io.say(placement_failure_lines(metric, "  ").trim_end());
        }
        if !evaluation.blocked_eval.is_empty() {
            io.say("");
            io.say(format!(
                "Evaluation \"{}\" waiting for additional capacity to place remainder",
                short_id(&evaluation.blocked_eval, verbose)
            ));
        }
    }
    0
}
