//! Reading a jobspec to submit, shared by `job run`, `job validate` and `job plan`: the `-var`
//! and `-var-file` flags, parsing with `file:line:col` errors (a file, or standard input with
//! `-`), and the support table's refusals located in the file.
//!
//! Not here: sending the job (the commands).

use std::path::{Path, PathBuf};

use clap::Args;
use drover_structs::Job;

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

/// Parses a jobspec file with its variables; the error text lists every problem. Also answers
/// where each field is in the file, to locate the support table's refusals.
pub(crate) fn parse_jobspec(
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
    let (job, locations) = parse_jobspec(file, variables)?;
    if let Some(refusals) = refusal_lines(&drover_jobspec::support::check(&job), &locations) {
        return Err(format!(
            "Error {doing}: drover cannot run what {} asks for:\n{refusals}",
            file.display()
        ));
    }
    Ok(job)
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
