//! Reading a jobspec to submit, shared by `job run`, `job validate` and `job plan`: the `-var`
//! and `-var-file` flags (and `NOMAD_VAR_*` values), parsing with `file:line:col` errors (a
//! file, or standard input with `-`), the support table's refusals located in the file, and
//! the job submission `job run` sends (Nomad 1.6+: the source as read).
//!
//! Not here: sending the job (the commands).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::Args;
use drover_structs::Job;
use drover_structs::JobSubmission;
use drover_structs::job_submission::{JOB_SUBMISSION_FORMAT_HCL2, JOB_SUBMISSION_FORMAT_JSON};

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

/// A jobspec as read for submission: the job, where each field is in the file, and the
/// submission Nomad's CLI sends with it (the source text as read, its format, the `-var`
/// flags and `NOMAD_VAR_*` values, the variable files' contents).
pub(crate) struct ReadJobspec {
    pub job: Job,
    pub locations: drover_jobspec::JobLocations,
    pub submission: JobSubmission,
}

/// The `NOMAD_VAR_<name>` values of the environment, name → value.
fn environment_variables() -> BTreeMap<String, String> {
    std::env::vars()
        .filter_map(|(key, value)| {
            key.strip_prefix("NOMAD_VAR_")
                .filter(|name| !name.is_empty())
                .map(|name| (name.to_owned(), value))
        })
        .collect()
}

/// Parses a jobspec file with its variables; the error text lists every problem. Also answers
/// where each field is in the file, to locate the support table's refusals, and the
/// submission. Input variables come from `-var-file`s, then `-var`s, over `NOMAD_VAR_*`
/// values, as in Nomad's CLI.
pub(crate) fn read_jobspec(file: &Path, variables: &VariableFlags) -> Result<ReadJobspec, String> {
    let mut values = drover_jobspec::VarValues::new();
    let environment = environment_variables();
    for (name, text) in &environment {
        values.set_environment_text(name.clone(), text.clone());
    }
    let mut variable_files = String::new();
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
        variable_files.push_str(&source);
        variable_files.push('\n');
    }
    let mut flags = environment;
    for assignment in &variables.variables {
        values
            .set_assignment(assignment)
            .map_err(|message| format!("Error parsing -var: {message}"))?;
        let (name, value) = assignment.split_once('=').unwrap_or((assignment, ""));
        flags.insert(name.to_owned(), value.to_owned());
    }
    let reading_stdin = file == Path::new("-");
    let (source, filename) = if reading_stdin {
        // Nomad reads the jobspec from standard input when the file is `-`.
        let mut source = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut source)
            .map_err(|error| format!("Error reading job from standard input: {error}"))?;
        (source, "<stdin>".to_owned())
    } else {
        let source = std::fs::read_to_string(file)
            .map_err(|error| format!("Error reading job file {}: {error}", file.display()))?;
        (source, file.display().to_string())
    };
    let is_json = source.trim_start().starts_with('{')
        || (!reading_stdin
            && file
                .extension()
                .is_some_and(|extension| extension.eq_ignore_ascii_case("json")));
    let parsed = if is_json {
        drover_jobspec::parse_json(&source, &filename)
            .map(|job| (job, drover_jobspec::JobLocations::without_source(&filename)))
    } else {
        // File functions of a jobspec read from its directory (standard input: the working
        // directory), as the Nomad CLI.
        let base = if reading_stdin {
            Path::new(".")
        } else {
            file.parent()
                .filter(|parent| !parent.as_os_str().is_empty())
                .unwrap_or(Path::new("."))
        };
        drover_jobspec::parse_hcl_located_reading_files(&source, &filename, &values, Some(base))
    };
    let (job, locations) = parsed.map_err(|diagnostics| {
        let lines: Vec<String> = diagnostics.iter().map(ToString::to_string).collect();
        format!(
            "Error parsing job file from {}:\n{}",
            if reading_stdin {
                "<stdin>".to_owned()
            } else {
                file.display().to_string()
            },
            lines.join("\n")
        )
    })?;
    // A JSON jobspec takes no variables; its submission is the source alone, as Nomad's.
    let submission = if is_json {
        JobSubmission {
            source,
            format: JOB_SUBMISSION_FORMAT_JSON.to_owned(),
            ..JobSubmission::default()
        }
    } else {
        JobSubmission {
            source,
            format: JOB_SUBMISSION_FORMAT_HCL2.to_owned(),
            variable_flags: Some(flags),
            variables: variable_files,
            ..JobSubmission::default()
        }
    };
    Ok(ReadJobspec {
        job,
        locations,
        submission,
    })
}

/// [`read_jobspec`] without the submission.
pub(crate) fn parse_jobspec(
    file: &Path,
    variables: &VariableFlags,
) -> Result<(Job, drover_jobspec::JobLocations), String> {
    read_jobspec(file, variables).map(|read| (read.job, read.locations))
}

/// What a register of `job` would refuse, one located line each (`None` when nothing is).
pub(crate) fn refusal_lines(
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

/// Parses a jobspec to submit (run or plan) and refuses, before anything is sent, a job that
/// uses what drover cannot run; the error names what was being done.
pub(crate) fn parse_jobspec_for_submit(
    file: &Path,
    variables: &VariableFlags,
    doing: &str,
) -> Result<Job, String> {
    read_jobspec_for_submit(file, variables, doing).map(|(job, _)| job)
}

/// [`parse_jobspec_for_submit`], with the submission `job run` sends along.
pub(crate) fn read_jobspec_for_submit(
    file: &Path,
    variables: &VariableFlags,
    doing: &str,
) -> Result<(Job, JobSubmission), String> {
    let read = read_jobspec(file, variables)?;
    if let Some(refusals) =
        refusal_lines(&drover_jobspec::support::check(&read.job), &read.locations)
    {
        return Err(format!(
            "Error {doing}: drover cannot run what {} asks for:\n{refusals}",
            file.display()
        ));
    }
    Ok((read.job, read.submission))
}

/// The job in the namespace `-namespace` (else `NOMAD_NAMESPACE`) names, when its jobspec left
/// it in `default`, as Nomad's CLI submits a job without a namespace of its own into the
/// request's. (A jobspec that writes `namespace = "default"` is moved too: the parsed job does
/// not tell an explicit `default` from none.)
pub(crate) fn with_namespace_flag(mut job: Job, api: &crate::ApiFlags) -> Job {
    let flag = api
        .namespace
        .clone()
        .or_else(|| std::env::var("NOMAD_NAMESPACE").ok())
        .filter(|namespace| !namespace.is_empty() && namespace != "*");
    if let Some(namespace) = flag
        && job.namespace == drover_structs::DEFAULT_NAMESPACE
    {
        job.namespace = namespace;
    }
    job
}
