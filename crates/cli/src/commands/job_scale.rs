//! `drover job scale [<group>] <count>` and `drover job scaling-events`, as Nomad's CLI: the
//! scale reads the job's scale status to find the group (the only one may go unnamed), sends
//! the count with "submitted using the Nomad CLI" and watches the evaluation (and its
//! deployment); the events are listed newest first across groups.
//!
//! Not here: the scaling policy commands (`scaling`).

use clap::Args;
use drover_structs::JobScaleStatus;

use crate::commands::describe;
use crate::commands::monitor::{MonitorOptions, monitor_evaluation};
use crate::format::date_from_unix_nanos;
use crate::{ApiFlags, Io, columnize};

/// The message Nomad's CLI sends with a scale.
const CLI_MESSAGE: &str = "submitted using the Nomad CLI";

#[derive(Debug, Args)]
pub struct ScaleArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// Return right after scaling, without watching the evaluation.
    #[arg(long)]
    pub detach: bool,
    /// Show full IDs.
    #[arg(long)]
    pub verbose: bool,
    /// `<job> [<group>] <count>`.
    #[arg(num_args = 0..)]
    pub args: Vec<String>,
}

#[derive(Debug, Args)]
pub struct ScalingEventsArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// Show the error flag, message and evaluation of each event.
    #[arg(long)]
    pub verbose: bool,
    /// `<job>`.
    #[arg(num_args = 0..)]
    pub args: Vec<String>,
}

/// The group to scale: the one named, or the job's only group (Nomad's `performGroupCheck`).
fn pick_group(status: &JobScaleStatus, named: Option<&str>) -> Result<String, String> {
    match named {
        None if status.task_groups.len() > 1 => Err("Group name required".into()),
        None => status
            .task_groups
            .keys()
            .next()
            .cloned()
            .ok_or_else(|| "Group  not found within job".into()),
        Some(group) if status.task_groups.contains_key(group) => Ok(group.to_owned()),
        Some(group) => Err(format!("Group {group} not found within job")),
    }
}

pub async fn job_scale(arguments: ScaleArgs, io: &mut Io<'_>) -> i32 {
    let (job_id, group, count) = match arguments.args.as_slice() {
        [job, count] => (job, None, count),
        [job, group, count] => (job, Some(group.as_str()), count),
        _ => {
            io.error("Command requires at least two arguments and no more than three");
            return 1;
        }
    };
    let count: i64 = match count.parse::<i32>() {
        Ok(count) => i64::from(count),
        Err(_) => {
            io.error(format!(
                "Failed to convert count string to int: strconv.Atoi: parsing {count:?}: invalid syntax"
            ));
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
    let status = match client.job_scale_status(job_id).await {
        Ok(status) => status,
        Err(error) => {
            io.error(describe("querying job", &error));
            return 1;
        }
    };
    let group = match pick_group(&status, group) {
        Ok(group) => group,
        Err(message) => {
            io.error(message);
            return 1;
        }
    };
    let response = match client.scale_job(job_id, &group, count, CLI_MESSAGE).await {
        Ok(response) => response,
        Err(error) => {
            io.error(describe("submitting scaling request", &error));
            return 1;
        }
    };
    if !response.warnings.is_empty() {
        io.say(format!("Job Warnings:\n{}\n", response.warnings));
    }
    if arguments.detach {
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

pub async fn job_scaling_events(arguments: ScalingEventsArgs, io: &mut Io<'_>) -> i32 {
    let [job_id] = arguments.args.as_slice() else {
        io.error("This command takes one argument: <job_id>");
        io.error("For additional help try 'drover job scaling-events -help'");
        return 1;
    };
    let client = match arguments.api.client() {
        Ok(client) => client,
        Err(error) => {
            io.error(format!("Error initializing client: {error}"));
            return 1;
        }
    };
    let status = match client.job_scale_status(job_id).await {
        Ok(status) => status,
        Err(error) => {
            io.error(describe("listing scaling events", &error));
            return 1;
        }
    };
    io.say(scaling_events_text(&status, arguments.verbose));
    0
}

/// Nomad's event table, newest first across groups, or "No events found".
pub fn scaling_events_text(status: &JobScaleStatus, verbose: bool) -> String {
    let mut events: Vec<(&str, &drover_structs::ScalingEvent)> = status
        .task_groups
        .iter()
        .flat_map(|(group, status)| {
            status
                .events
                .iter()
                .flatten()
                .map(move |event| (group.as_str(), event))
        })
        .collect();
    if status
        .task_groups
        .values()
        .all(|group| group.events.is_none())
    {
        return "No events found".into();
    }
    events.sort_by_key(|(_, event)| std::cmp::Reverse(event.time));
    let mut header = vec!["Task Group", "Count", "PrevCount"];
    if verbose {
        header.extend(["Error", "Message", "Eval ID"]);
    }
    header.push("Date");
    let mut rows = vec![header.into_iter().map(String::from).collect::<Vec<_>>()];
    for (group, event) in events {
        let mut row = vec![
            group.to_owned(),
            event
                .count
                .map(|count| count.to_string())
                .unwrap_or_default(),
            event.previous_count.to_string(),
        ];
        if verbose {
            row.extend([
                event.error.to_string(),
                event.message.clone(),
                event.eval_id.clone().unwrap_or_default(),
            ]);
        }
        row.push(date_from_unix_nanos(event.time));
        rows.push(row);
    }
    columnize::columns(&rows)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed expectation is a failed test
mod tests {
    use std::collections::BTreeMap;

    use drover_structs::{ScalingEvent, TaskGroupScaleStatus};

    use super::*;

    fn status(groups: &[&str]) -> JobScaleStatus {
        JobScaleStatus {
            task_groups: groups
                .iter()
                .map(|group| (group.to_string(), TaskGroupScaleStatus::default()))
                .collect::<BTreeMap<_, _>>(),
            ..JobScaleStatus::default()
        }
    }

    #[test]
    fn the_group_is_named_unless_it_is_the_only_one() {
        assert_eq!(pick_group(&status(&["web"]), None), Ok("web".into()));
        assert_eq!(
            pick_group(&status(&["a", "b"]), None),
            Err("Group name required".into())
        );
        assert_eq!(
            pick_group(&status(&["a", "b"]), Some("c")),
            Err("Group c not found within job".into())
        );
        assert_eq!(pick_group(&status(&["a", "b"]), Some("b")), Ok("b".into()));
    }

    #[test]
    fn events_are_listed_newest_first() {
        let mut status = status(&["web"]);
        assert_eq!(scaling_events_text(&status, false), "No events found");
        let event = |time: i64, count: i64| ScalingEvent {
            time: time * 1_000_000_000,
            count: Some(count),
            previous_count: count - 1,
            message: "submitted using the Nomad CLI".into(),
            ..ScalingEvent::default()
        };
        status.task_groups.get_mut("web").unwrap().events =
            Some(vec![event(1_700_000_100, 3), event(1_700_000_000, 2)]);
        let text = scaling_events_text(&status, false);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0].split_whitespace().collect::<Vec<_>>(),
            ["Task", "Group", "Count", "PrevCount", "Date"]
        );
        assert!(
            lines[1].starts_with("web         3      2          2023-11-14T22:15:00Z"),
            "{text}"
        );
        assert!(lines[2].contains("  2  "), "{text}");
    }
}
