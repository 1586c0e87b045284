//! `drover job plan`: a dry run of the scheduler for a jobspec, printed as Nomad's CLI prints it
//! — the annotated diff against the registered job (`-diff`, on by default; `-verbose` expands
//! added and deleted groups and tasks), the scheduler's dry-run lines, the job's warnings, and
//! the `Job Modify Index` with the `job run -check-index` command that submits exactly what was
//! planned. Exit codes are Nomad's: 0 when no allocation would be created or destroyed, 1 when
//! some would, 255 on an error. `-json-output` (Nomad 2.0.5) prints the plan response as JSON
//! instead, and `-t` renders it with a Go template; the exit code stays the plan's.
//!
//! Colours are Nomad's (its `colorstring` tags turned into ANSI codes) when standard output is a
//! terminal and `-no-color` is not given; otherwise the tags are dropped.
//!
//! Not here: planning (the server) or the diff itself (`drover_structs::job_diff`).

use std::io::IsTerminal;
use std::path::PathBuf;

use clap::Args;
use drover_structs::JobPlanResponse;
use drover_structs::job_diff::{DiffType, FieldDiff, JobDiff, ObjectDiff, TaskDiff, TaskGroupDiff};

use crate::commands::describe;
use crate::commands::job_input::{VariableFlags, parse_jobspec_for_submit};
use crate::format::{format_data, placement_failure_lines};
use crate::{ApiFlags, Io};

#[derive(Debug, Args)]
pub struct PlanArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    #[command(flatten)]
    pub variables: VariableFlags,
    /// Show the diff between the registered job and the planned one (default true).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub diff: bool,
    /// Expand added and deleted groups and tasks in the diff.
    #[arg(long)]
    pub verbose: bool,
    /// Print without colours.
    #[arg(long = "no-color")]
    pub no_color: bool,
    /// Print the plan response as JSON instead of the plan text (the exit code is the plan's).
    #[arg(long = "json-output")]
    pub json_output: bool,
    /// Render the plan response with a Go template instead of the plan text.
    #[arg(short = 't', value_name = "TEMPLATE", default_value = "")]
    pub template: String,
    /// The jobspec (HCL2, or JSON); `-` reads standard input.
    pub file: PathBuf,
}

/// Nomad's help after the index.
const JOB_MODIFY_INDEX_HELP: &str = "To submit the job with version verification run:

drover job run -check-index {index} {file}

When running the job with the check-index flag, the job will only be run if the
job modify index given matches the server-side version. If the index has
changed, another user has modified the job and the plan's results are
potentially invalid.";

pub async fn job_plan(arguments: PlanArgs, io: &mut Io<'_>) -> i32 {
    if arguments.json_output && !arguments.template.is_empty() {
        io.error("Both -json-output and -t formatting are not allowed");
        return 255;
    }
    let structured = arguments.json_output || !arguments.template.is_empty();
    let job = match parse_jobspec_for_submit(&arguments.file, &arguments.variables, "planning job")
    {
        Ok(job) => crate::commands::job_input::with_namespace_flag(job, &arguments.api),
        Err(message) => {
            io.error(message);
            return 255;
        }
    };
    let client = match arguments.api.client() {
        Ok(client) => client,
        Err(error) => {
            io.error(format!("Error initializing client: {error}"));
            return 255;
        }
    };
    // Structured output carries the diff whatever -diff says, as Nomad always asks for it.
    let response = match client.plan_job(&job, arguments.diff || structured).await {
        Ok(response) => response,
        Err(error) => {
            io.error(describe("during plan", &error));
            return 255;
        }
    };
    // The response alone, without the plan text or the check-index help: its JobModifyIndex
    // is in it.
    if structured {
        return match format_data(arguments.json_output, &arguments.template, &response) {
            Ok(text) => {
                io.say(text);
                exit_code(&response)
            }
            Err(message) => {
                io.error(message);
                255
            }
        };
    }
    let color = Colorize {
        enabled: !arguments.no_color && std::io::stdout().is_terminal(),
    };
    if arguments.diff
        && let Some(diff) = &response.diff
    {
        io.say(format!(
            "{}\n",
            color.apply(format_job_diff(diff, arguments.verbose).trim())
        ));
    }
    io.say(color.apply("[bold]Scheduler dry-run:[reset]"));
    io.say(color.apply(&format_dry_run(&response, &job.r#type)));
    io.say("");
    if !response.warnings.is_empty() {
        io.say(color.apply(&format!(
            "[bold][yellow]Job Warnings:\n{}[reset]\n",
            response.warnings
        )));
    }
    let file = arguments.file.display().to_string();
    io.say(color.apply(&format!(
        "[reset][bold]Job Modify Index: {}[reset]\n{}",
        response.job_modify_index,
        JOB_MODIFY_INDEX_HELP
            .replace("{index}", &response.job_modify_index.to_string())
            .replace("{file}", &file)
    )));
    exit_code(&response)
}

/// 1 when the plan creates, stops, migrates or replaces allocations, else 0.
fn exit_code(response: &JobPlanResponse) -> i32 {
    let changes = response.annotations.as_ref().is_some_and(|annotations| {
        annotations.desired_tg_updates.values().any(|updates| {
            updates.stop
                + updates.place
                + updates.migrate
                + updates.destructive_update
                + updates.canary
                > 0
        })
    });
    i32::from(changes)
}

/// The scheduler's dry-run lines.
fn format_dry_run(response: &JobPlanResponse, job_type: &str) -> String {
    let mut out = String::new();
    match &response.failed_tg_allocs {
        Some(failed) if !failed.is_empty() => {
            out.push_str(if job_type == "system" {
                "[bold][yellow]- WARNING: Failed to place allocations on all nodes.[reset]\n"
            } else {
                "[bold][yellow]- WARNING: Failed to place all allocations.[reset]\n"
            });
            for (group, metric) in failed {
                let noun = if metric.coalesced_failures > 0 {
                    "allocations"
                } else {
                    "allocation"
                };
                out.push_str(&format!(
                    "  [yellow]Task Group {group:?} (failed to place {} {noun}):\n[reset]",
                    metric.coalesced_failures + 1
                ));
                let reasons = placement_failure_lines(metric, "    ");
                out.push_str(&format!(
                    "[yellow]{}[reset]\n\n",
                    reasons.trim_end_matches('\n')
                ));
            }
            out = out.trim_end_matches('\n').to_string();
        }
        _ => out.push_str("[bold][green]- All tasks successfully allocated.[reset]\n"),
    }
    out.trim_end_matches('\n').to_string()
}

/// The marker of a change and its printed width.
fn marker(diff_type: DiffType) -> (&'static str, usize) {
    match diff_type {
        DiffType::Added => ("[green]+[reset] ", 2),
        DiffType::Deleted => ("[red]-[reset] ", 2),
        DiffType::Edited => ("[light_yellow]+/-[reset] ", 4),
        DiffType::None => ("", 0),
    }
}

pub(crate) fn format_job_diff(job: &JobDiff, verbose: bool) -> String {
    let (mark, _) = marker(job.r#type);
    let mut out = format!("{mark}[bold]Job: {:?}\n", job.id);
    let (longest_field, mut longest_marker) = longest_prefixes(&job.fields, &job.objects);
    for group in &job.task_groups {
        longest_marker = longest_marker.max(marker(group.r#type).1);
    }
    if job.r#type == DiffType::Edited || verbose {
        let fields_and_objects =
            aligned_fields_and_objects(&job.fields, &job.objects, 0, longest_field, longest_marker);
        if !fields_and_objects.is_empty() {
            out.push_str(&fields_and_objects);
            out.push('\n');
        }
    }
    for group in &job.task_groups {
        let prefix = longest_marker - marker(group.r#type).1;
        out.push_str(&format_group_diff(group, prefix, verbose));
        out.push('\n');
    }
    out
}

fn format_group_diff(group: &TaskGroupDiff, group_prefix: usize, verbose: bool) -> String {
    let (mark, _) = marker(group.r#type);
    let mut out = format!(
        "{mark}{}[bold]Task Group: {:?}[reset]",
        " ".repeat(group_prefix),
        group.name
    );
    match &group.updates {
        Some(updates) if !updates.is_empty() => {
            // Sorted by name, as Nomad sorts them.
            let listed: Vec<String> = updates
                .iter()
                .map(|(update, count)| {
                    let color = match update.as_str() {
                        "create" => "[green]",
                        "destroy" => "[red]",
                        "migrate" => "[blue]",
                        "in-place update" => "[cyan]",
                        "create/destroy update" => "[yellow]",
                        "canary" => "[light_yellow]",
                        _ => "",
                    };
                    format!("[reset]{color}{count} {update}")
                })
                .collect();
            out.push_str(&format!(" ({}[reset])\n", listed.join(", ")));
        }
        _ => out.push_str("[reset]\n"),
    }
    let (longest_field, mut longest_marker) = longest_prefixes(&group.fields, &group.objects);
    for task in &group.tasks {
        longest_marker = longest_marker.max(marker(task.r#type).1);
    }
    let sub_prefix = group_prefix + 2;
    if group.r#type == DiffType::Edited || verbose {
        let fields_and_objects = aligned_fields_and_objects(
            &group.fields,
            &group.objects,
            sub_prefix,
            longest_field,
            longest_marker,
        );
        if !fields_and_objects.is_empty() {
            out.push_str(&fields_and_objects);
            out.push('\n');
        }
    }
    for task in &group.tasks {
        let prefix = longest_marker - marker(task.r#type).1;
        out.push_str(&format_task_diff(task, sub_prefix, prefix, verbose));
        out.push('\n');
    }
    out
}

fn format_task_diff(
    task: &TaskDiff,
    start_prefix: usize,
    task_prefix: usize,
    verbose: bool,
) -> String {
    let (mark, _) = marker(task.r#type);
    let mut out = format!(
        "{}{mark}{}[bold]Task: {:?}",
        " ".repeat(start_prefix),
        " ".repeat(task_prefix),
        task.name
    );
    if !task.annotations.is_empty() {
        out.push_str(&format!(
            " [reset]({})",
            color_annotations(&task.annotations)
        ));
    }
    match task.r#type {
        DiffType::None => return out,
        DiffType::Added | DiffType::Deleted if !verbose => return out,
        _ => out.push('\n'),
    }
    let (longest_field, longest_marker) = longest_prefixes(&task.fields, &task.objects);
    out.push_str(&aligned_fields_and_objects(
        &task.fields,
        &task.objects,
        start_prefix + 2,
        longest_field,
        longest_marker,
    ));
    out
}

fn format_object_diff(object: &ObjectDiff, start_prefix: usize, key_prefix: usize) -> String {
    let (mark, mark_length) = marker(object.r#type);
    let mut out = format!(
        "{}{mark}{}{} {{\n",
        " ".repeat(start_prefix),
        " ".repeat(key_prefix),
        object.name
    );
    let (longest_field, longest_marker) = longest_prefixes(&object.fields, &object.objects);
    out.push_str(&aligned_fields_and_objects(
        &object.fields,
        &object.objects,
        start_prefix + key_prefix + 2,
        longest_field,
        longest_marker,
    ));
    format!(
        "{out}\n{}}}",
        " ".repeat(start_prefix + mark_length + key_prefix)
    )
}

fn format_field_diff(
    field: &FieldDiff,
    start_prefix: usize,
    key_prefix: usize,
    value_prefix: usize,
) -> String {
    let (mark, _) = marker(field.r#type);
    let mut out = format!(
        "{}{mark}{}{}: {}",
        " ".repeat(start_prefix),
        " ".repeat(key_prefix),
        field.name,
        " ".repeat(value_prefix)
    );
    match field.r#type {
        DiffType::Added => out.push_str(&go_quote(&field.new)),
        DiffType::Deleted => out.push_str(&go_quote(&field.old)),
        DiffType::Edited => {
            out.push_str(&format!(
                "{} => {}",
                go_quote(&field.old),
                go_quote(&field.new)
            ));
        }
        DiffType::None => out.push_str(&go_quote(&field.new)),
    }
    if !field.annotations.is_empty() {
        out.push_str(&format!(" ({})", color_annotations(&field.annotations)));
    }
    out
}

fn aligned_fields_and_objects(
    fields: &[FieldDiff],
    objects: &[ObjectDiff],
    start_prefix: usize,
    longest_field: usize,
    longest_marker: usize,
) -> String {
    let mut out = String::new();
    for (index, field) in fields.iter().enumerate() {
        let key_prefix = longest_marker - marker(field.r#type).1;
        let value_prefix = longest_field - field.name.len();
        out.push_str(&format_field_diff(
            field,
            start_prefix,
            key_prefix,
            value_prefix,
        ));
        if index + 1 != fields.len() || !objects.is_empty() {
            out.push('\n');
        }
    }
    for (index, object) in objects.iter().enumerate() {
        let key_prefix = longest_marker - marker(object.r#type).1;
        out.push_str(&format_object_diff(object, start_prefix, key_prefix));
        if index + 1 != objects.len() {
            out.push('\n');
        }
    }
    out
}

fn longest_prefixes(fields: &[FieldDiff], objects: &[ObjectDiff]) -> (usize, usize) {
    let longest_field = fields
        .iter()
        .map(|field| field.name.len())
        .max()
        .unwrap_or(0);
    let longest_marker = fields
        .iter()
        .map(|field| marker(field.r#type).1)
        .chain(objects.iter().map(|object| marker(object.r#type).1))
        .max()
        .unwrap_or(0);
    (longest_field, longest_marker)
}

fn color_annotations(annotations: &[String]) -> String {
    annotations
        .iter()
        .map(|annotation| match annotation.as_str() {
            "forces create" => format!("[green]{annotation}[reset]"),
            "forces destroy" => format!("[red]{annotation}[reset]"),
            "forces in-place update" => format!("[cyan]{annotation}[reset]"),
            "forces create/destroy update" => format!("[yellow]{annotation}[reset]"),
            _ => annotation.clone(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A string quoted as Go's `%q` quotes it (the values here are printable text; control
/// characters and quotes are escaped).
fn go_quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for character in text.chars() {
        match character {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            character if character.is_control() => {
                out.push_str(&format!("\\x{:02x}", u32::from(character)));
            }
            character => out.push(character),
        }
    }
    out.push('"');
    out
}

/// Nomad's `colorstring` tags: ANSI codes when enabled (with a reset after each coloured
/// string, as Nomad's `Colorize` adds one), dropped otherwise.
pub(crate) struct Colorize {
    pub(crate) enabled: bool,
}

impl Colorize {
    const TAGS: [(&'static str, &'static str); 8] = [
        ("[reset]", "0"),
        ("[bold]", "1"),
        ("[red]", "31"),
        ("[green]", "32"),
        ("[yellow]", "33"),
        ("[blue]", "34"),
        ("[cyan]", "36"),
        ("[light_yellow]", "93"),
    ];

    pub(crate) fn apply(&self, text: &str) -> String {
        let mut out = text.to_string();
        for (tag, code) in Self::TAGS {
            let replacement = if self.enabled {
                format!("\x1b[{code}m")
            } else {
                String::new()
            };
            out = out.replace(tag, &replacement);
        }
        if self.enabled {
            out.push_str("\x1b[0m");
        }
        out
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)] // a failed expectation is a failed test
mod tests {
    use super::*;

    /// Nomad 1.1.2's `job plan` of `v2.hcl` over a registered `v1.hcl`, from the answer it gave
    /// (`crates/structs/tests/fixtures/job_diff/nomad-plan-upd-v2.json`), printed without colour.
    #[test]
    fn the_diff_prints_as_nomads_cli_prints_it() {
        let answer: JobPlanResponse = serde_json::from_str(include_str!(
            "../../../structs/tests/fixtures/job_diff/nomad-plan-upd-v2.json"
        ))
        .unwrap();
        let plain = Colorize { enabled: false };
        let text = plain.apply(format_job_diff(answer.diff.as_ref().unwrap(), false).trim());
        let expected = r#"+/- Job: "web"
+/- Meta[owner]: "a" => "b"
+   Datacenters {
    + Datacenters: "dc2"
      Datacenters: "dc1"
    }
+/- Task Group: "g" (1 create, 2 ignore)
  +/- Count: "2" => "3" (forces create)
  +/- Task: "t" (forces create/destroy update)
    +/- Env[A]: "1" => "2"
    +   Env[B]: "x"
    +/- Resources {
      +/- CPU:         "100" => "120"
          Cores:       "0"
          DiskMB:      "0"
          IOPS:        "0"
          MemoryMB:    "64"
          MemoryMaxMB: "0"
        }"#;
        assert_eq!(text, expected);
        assert_eq!(
            plain.apply(&format_dry_run(&answer, "service")),
            "- All tasks successfully allocated."
        );
        assert_eq!(exit_code(&answer), 1);
    }

    #[test]
    fn a_new_job_prints_only_its_groups_and_tasks_unless_verbose() {
        let answer: JobPlanResponse = serde_json::from_str(include_str!(
            "../../../structs/tests/fixtures/job_diff/nomad-plan-new-v1.json"
        ))
        .unwrap();
        let plain = Colorize { enabled: false };
        let text = plain.apply(format_job_diff(answer.diff.as_ref().unwrap(), false).trim());
        assert_eq!(
            text,
            "+ Job: \"web\"\n+ Task Group: \"g\" (2 create)\n  + Task: \"t\" (forces create)"
        );
        let verbose = plain.apply(format_job_diff(answer.diff.as_ref().unwrap(), true).trim());
        assert!(verbose.contains("+ AllAtOnce:   \"false\""), "{verbose}");
    }

    #[test]
    fn colours_are_nomads_ansi_codes() {
        let colored = Colorize { enabled: true }.apply("[green]+[reset] x");
        assert_eq!(colored, "\x1b[32m+\x1b[0m x\x1b[0m");
    }
}
