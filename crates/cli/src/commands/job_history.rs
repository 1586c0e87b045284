//! `drover job history [-p [-diff-tag T | -diff-version N]] [-full] [-json] [-t] [-version N]
//! <job>`: a job's kept versions as Nomad's CLI prints them — `Version`, `Stable`, `Submit
//! Date`, with `-p` each version's diff from the one before it, or from the version tagged T or
//! numbered N (from `/v1/job/<id>/versions?diffs=true`), with `-full` the job as
//! JSON; `-json` and `-t` as Nomad's `Format`.
//!
//! Not here: the diff's layout (shared with `job plan`, in `job_plan`).

use std::io::IsTerminal;

use clap::Args;
use drover_structs::Job;
use drover_structs::job_diff::JobDiff;

use crate::commands::describe;
use crate::commands::job_plan::{Colorize, format_job_diff};
use crate::commands::lookup::resolve_job;
use crate::format::{date_from_unix_nanos, format_data};
use crate::{ApiFlags, Io};

#[derive(Debug, Args)]
pub struct HistoryArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// Show each version's difference from the one before it (or from -diff-tag or
    /// -diff-version).
    #[arg(short = 'p')]
    pub diff: bool,
    /// With -p: compare every version with the one of this tag.
    #[arg(long = "diff-tag", value_name = "TAG")]
    pub diff_tag: Option<String>,
    /// With -p: compare every version with this version.
    #[arg(long = "diff-version", value_name = "VERSION")]
    pub diff_version: Option<String>,
    /// Show each version's full job, as JSON.
    #[arg(long)]
    pub full: bool,
    /// Print the versions as JSON.
    #[arg(long)]
    pub json: bool,
    /// Format the versions with a Go template.
    #[arg(short = 't', value_name = "TEMPLATE")]
    pub template: Option<String>,
    /// Show only this version.
    #[arg(long)]
    pub version: Option<u64>,
    /// Print without colours.
    #[arg(long = "no-color")]
    pub no_color: bool,
    /// The job ID or ID prefix.
    pub job: String,
}

pub async fn job_history(arguments: HistoryArgs, io: &mut Io<'_>) -> i32 {
    let template = arguments.template.clone().unwrap_or_default();
    let formatted = arguments.json || !template.is_empty();
    if formatted && (arguments.diff || arguments.full) {
        io.error("-json and -t are exclusive with -p and -full");
        return 1;
    }
    let diff_tag = arguments.diff_tag.as_deref().filter(|tag| !tag.is_empty());
    let diff_version_text = arguments
        .diff_version
        .as_deref()
        .filter(|text| !text.is_empty());
    if (diff_tag.is_some() || diff_version_text.is_some()) && !arguments.diff {
        io.error("-diff-tag and -diff-version can only be used with -p");
        return 1;
    }
    if diff_tag.is_some() && diff_version_text.is_some() {
        io.error("-diff-tag and -diff-version are mutually exclusive");
        return 1;
    }
    let diff_version = match diff_version_text.map(str::parse::<u64>) {
        None => None,
        Some(Ok(version)) => Some(version),
        Some(Err(error)) => {
            io.error(format!("Error parsing -diff-version: {error}"));
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
    let Some(job_id) = resolve_job(&client, io, arguments.job.trim()).await else {
        return 1;
    };
    let answer = if diff_tag.is_some() || diff_version.is_some() {
        client
            .job_versions_against(&job_id, diff_tag, diff_version)
            .await
    } else {
        client.job_versions(&job_id, arguments.diff).await
    };
    let answer = match answer {
        Ok(answer) => answer,
        Err(error) => {
            io.error(describe("retrieving job versions", &error));
            return 1;
        }
    };
    let versions = answer.versions;
    let diffs = answer.diffs.unwrap_or_default();
    let color = Colorize {
        enabled: !arguments.no_color && std::io::stdout().is_terminal(),
    };
    let selected: Vec<usize> = match arguments.version {
        Some(wanted) => {
            let found: Vec<usize> = (0..versions.len())
                .filter(|&index| versions[index].version == wanted)
                .collect();
            if found.is_empty() && !formatted {
                io.error("Error printing job history for non-existing job or job version");
                return 1;
            }
            found
        }
        None => (0..versions.len()).collect(),
    };
    if formatted {
        let chosen: Vec<&Job> = selected.iter().map(|&index| &versions[index]).collect();
        let text = match arguments.version {
            Some(_) => format_data(arguments.json, &template, &chosen.first()),
            None => format_data(arguments.json, &template, &chosen),
        };
        match text {
            Ok(text) => io.say(text),
            Err(error) => {
                io.error(error);
                return 1;
            }
        }
        return 0;
    }
    for (position, &index) in selected.iter().enumerate() {
        let text = format_version(&versions[index], diffs.get(index), arguments.full);
        io.say(color.apply(&text));
        if position + 1 != selected.len() {
            io.say("");
        }
    }
    0
}

/// One version as Nomad's key/value block (keys padded, ` = `, trailing spaces kept).
fn format_version(job: &Job, diff: Option<&JobDiff>, full: bool) -> String {
    let mut rows = vec![
        ("Version", job.version.to_string()),
        ("Stable", job.stable.to_string()),
        ("Submit Date", date_from_unix_nanos(job.submit_time)),
    ];
    if let Some(tag) = &job.version_tag {
        rows.push(("Tag Name", tag.name.clone()));
        if !tag.description.is_empty() {
            rows.push(("Tag Description", tag.description.clone()));
        }
    }
    // A version compared with itself (under -diff-tag or -diff-version) shows no diff.
    if let Some(diff) = diff.filter(|diff| diff.r#type != drover_structs::job_diff::DiffType::None)
    {
        rows.push(("Diff", format!("\n{}", format_job_diff(diff, false).trim())));
    }
    if full {
        let json = format_data(true, "", job).unwrap_or_default();
        rows.push(("Full", format!("JSON Job:\n{json}")));
    }
    let width = rows.iter().map(|(key, _)| key.len()).max().unwrap_or(0);
    rows.iter()
        .map(|(key, value)| format!("{key:width$} = {value}"))
        .collect::<Vec<_>>()
        .join("\n")
}
