//! Jobspecs → [`drover_structs::Job`]: Nomad's HCL2 jobspec language and JSON jobs, with
//! defaults applied per job type and validation that reports every error at once, located as
//! `file:line:col`.
//!
//! **Boundary**: knows nothing about the server; input is text, output is a `Job` or diagnostics.
//!
//! The pipeline: `hcl_parse` (syntax, spans) → `decode` (schema walk, `eval` of variables and
//! expressions; Nomad JSON plus a field path → source offset map) → `drover_structs::Job` →
//! `Job::canonicalize_as_parsed` (the defaults of a parse, not the server's) → `validate`
//! (each problem located through the offset map).
//! A field the decoder produced that does not survive the `Job` round trip is reported as
//! unsupported, so nothing in a jobspec is ever dropped silently.
//!
//! Decoded blocks: Nomad's jobspec language as Nomad's own parser decodes it, into Nomad's job
//! JSON: `job`, `group`, `task`, `config`, `env`, `meta`, `resources` (with `device`, `numa`,
//! `network`), `restart`, `reschedule`, `migrate`, `lifecycle`, `template`, `artifact`,
//! `service` (with `check`, `connect` and its sidecars, gateways, upstreams and expose paths,
//! `identity`, `weights`), `constraint`, `affinity`, `spread`, `network` (with `port`, `dns`,
//! `cni`), `logs`, `dispatch_payload`, `parameterized`, `periodic`, `update`, `ephemeral_disk`,
//! `identity`, `vault` (job, group and task; copied into tasks as Nomad does), `consul`,
//! `volume` (host and CSI), `volume_mount`, `csi_plugin`, `scaling` (group, and task `cpu` and
//! `mem`), `disconnect`, `multiregion`, `action`, `ui`, and the top-level `variable`,
//! `variables` and `locals` (variables may carry `validation` blocks). `dynamic` blocks expand
//! in the jobspec's own blocks (not inside free-form bodies such as a driver `config`, which
//! Nomad keeps as written), and Nomad's HCL2 functions are declared by `functions`. The few names Nomad has that the decoder refuses with a reason
//! (`secret`, a task's `schedule`, ...) are listed by [`refused_blocks`].
//!
//! Decoding is not running: which decoded features run here, which run differently from Nomad
//! and which a register refuses is the support table in [`support`] (`docs/jobspec.md` is
//! generated from it).
//!
//! # Layers
//!
//! Each module directly under `src/` uses only modules on the lines below its own (`error`
//! modules aside), as `crates/structs/tests/module_cycles.rs` checks; top first:
//!
//! - `decode`
//! - `eval`, `validate`
//! - `cron`, `functions`, `hcl_parse`, `support`
//! - `cron_syntax`, `diagnostic`, `nomad_warnings`, `schema`, `suggest`, `value_text`
//!
//! # Design notes
//!
//! Nomad's HCL2 jobspec language and JSON jobs → `Job`; variables (with
//! `validation` blocks) and locals; `dynamic` blocks; Nomad's HCL2 functions (`functions`, with
//! `can`/`try` resolved on the expression before it is evaluated); runtime `${…}` kept as text;
//! validation that reports every error with `file:line:col`. The decoder walks one schema table
//! (`schema`) covering Nomad's jobspec (Vault, Consul, Connect, volumes, CSI, scaling, devices,
//! multiregion, ...) into Nomad's job JSON; `tests/nomad_parse.rs` compares it field by field
//! with answers recorded from Nomad's own `/v1/jobs/parse`, for jobspecs written for the corpus
//! and for real public ones (`tests/corpus/public`, each with its source in `SOURCES.md`);
//! `tests/upstream_parser.rs` ports Nomad's current parser tests for what 1.1.2 lacks.
//! Validation (`validate`) reads the typed `Job` (the user's explicit values laid over the
//! defaulted job, decoded back into a `Job`).
//! The hash functions (`md5`, `sha1`, `sha256`, `sha512`, and `uuidv5`'s SHA-1) use the small
//! RustCrypto digest crates (`md-5`, `sha1`, `sha2`, sharing one `digest` core already in the
//! tree) rather than a general crypto library; `uuidv4` uses the workspace's `uuid`.
//! `support` is the one support table of jobspec features (runs / runs differently from Nomad,
//! a warning / refused: not yet, or needs a system drover lacks), each row with how to find the
//! feature in a `Job`: register (`api`), `drover job run` and `drover job validate` read it, and
//! `docs/jobspec.md` is generated from it. Parsing refuses nothing the decoder decodes, as Nomad.
//! `cron` reads periodic schedules as Nomad's `cronexpr` does (5/6/7 fields, `@` aliases,
//! years 1970–2099, `?`, names, `L`/`W`/`#`: `cron_syntax` spells every value out for croner),
//! walks wall-clock times with croner and maps them to instants in the job's
//! IANA zone with jiff's bundled tz database (a skipped hour does not fire, a repeated one fires
//! twice, as in Nomad); the server and the CLI's "Next Periodic Launch" share it.
//! **Boundary**: text in, `Job` or diagnostics out; knows nothing of the server.
//! **Invariant**: no decoded feature is accepted at register and then ignored; it has a row that
//! runs it, warns about it or refuses it.

pub mod cron;
mod cron_syntax;
mod decode;
mod diagnostic;
mod eval;
mod functions;
mod hcl_parse;
pub mod nomad_warnings;
mod schema;
mod suggest;
pub mod support;
mod validate;
mod value_text;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use drover_structs::Job;
use serde_json::{Map as JsonMap, Value as JsonValue};

pub use diagnostic::{Diagnostic, Diagnostics, Position, SourceMap};
pub use drover_structs::go_duration::{DurationError, parse_go_duration};
pub use eval::VarValues;
pub use schema::refused_blocks;
pub use support::{Refusal, SupportReport};

/// Why a jobspec file could not be turned into a job.
#[derive(Debug, thiserror::Error)]
pub enum JobspecError {
    #[error("cannot read jobspec {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Invalid(Diagnostics),
}

/// Parses an HCL2 jobspec, applies defaults and validates it. Every problem is reported, each
/// located as `filename:line:column`.
pub fn parse_hcl(
    source: &str,
    filename: &str,
    variable_values: &VarValues,
) -> Result<Job, Diagnostics> {
    parse_hcl_located(source, filename, variable_values).map(|(job, _)| job)
}

/// Where the fields of a parsed jobspec are in its source, to locate problems found later (the
/// refusals of [`support::check`]). Empty for JSON jobs, whose messages name the field path.
#[derive(Debug, Clone, Default)]
pub struct JobLocations {
    file: String,
    positions: BTreeMap<String, Position>,
}

impl JobLocations {
    /// No positions: a job read from JSON (messages then name the field path).
    pub fn without_source(file: &str) -> Self {
        JobLocations {
            file: file.to_string(),
            positions: BTreeMap::new(),
        }
    }

    /// The position of a JSON field path, or of its nearest located ancestor.
    pub fn locate(&self, field_path: &str) -> Option<Position> {
        let mut path = field_path;
        loop {
            if let Some(position) = self.positions.get(path) {
                return Some(*position);
            }
            if path.is_empty() {
                return None;
            }
            let cut = path.rfind(['.', '[']).unwrap_or(0);
            path = &path[..cut];
        }
    }

    /// The refusals of `report` as diagnostics of this file, located where the source is known.
    pub fn refusal_diagnostics(&self, report: &SupportReport) -> Diagnostics {
        let mut diagnostics = Diagnostics(
            report
                .refusals
                .iter()
                .map(|refusal| refusal.to_diagnostic(&self.file, &|path| self.locate(path)))
                .collect(),
        );
        diagnostics.sort_and_dedup();
        diagnostics
    }
}

/// [`parse_hcl`], also answering where each field is in the source.
pub fn parse_hcl_located(
    source: &str,
    filename: &str,
    variable_values: &VarValues,
) -> Result<(Job, JobLocations), Diagnostics> {
    parse_hcl_located_reading_files(source, filename, variable_values, None)
}

/// [`parse_hcl_located`] for a jobspec read from disk: its filesystem functions (`file`,
/// `filebase64`, `fileexists`, ...) read relative to `files_base`, as the Nomad CLI lets them
/// read relative to the jobspec's directory. Without a base they are disabled, as in Nomad's
/// API.
pub fn parse_hcl_located_reading_files(
    source: &str,
    filename: &str,
    variable_values: &VarValues,
    files_base: Option<&Path>,
) -> Result<(Job, JobLocations), Diagnostics> {
    let source_map = SourceMap::new(source);
    let body = hcl_parse::parse_body(source, filename, &source_map)?;
    let decoded =
        decode::decode_job_file(&body, filename, &source_map, variable_values, files_base)
            .map_err(finish_diagnostics)?;
    let mut locations = decoded.locations;
    let mut user_json = decoded.job;
    move_job_blocks_into_groups(&mut user_json, &mut locations);
    let locate = |field_path: &str| {
        nearest_location(&locations, field_path).map(|offset| source_map.position(offset))
    };
    let built = build_and_validate(user_json, filename, &locate, FieldCheck::ReportDropped);
    let job = match (built, decoded.errors) {
        (Ok(job), errors) if errors.is_empty() => job,
        (Ok(_), errors) => return Err(finish_diagnostics(errors)),
        // A decode error does not hide the validation errors of what did decode.
        (Err(validation), mut errors) => {
            errors.extend(without_cascades(validation, &errors));
            return Err(finish_diagnostics(errors));
        }
    };
    let positions = locations
        .iter()
        .map(|(path, offset)| (path.clone(), source_map.position(*offset)))
        .collect();
    Ok((
        job,
        JobLocations {
            file: filename.to_string(),
            positions,
        },
    ))
}

/// Parses a JSON job, either `{"Job": {...}}` (the API's register body) or the bare job object,
/// decoded leniently (unknown keys ignored, key case not significant), then applies defaults and
/// validates it. Diagnostics name the JSON field path.
pub fn parse_json(source: &str, filename: &str) -> Result<Job, Diagnostics> {
    let parsed: JsonValue = serde_json::from_str(source).map_err(|error| {
        Diagnostics(vec![Diagnostic::new(
            filename,
            Some(Position {
                line: error.line(),
                column: error.column(),
            }),
            format!("invalid JSON: {error}"),
        )])
    })?;
    let job_json = match parsed {
        JsonValue::Object(mut object) => {
            let wrapped_key = object
                .keys()
                .find(|key| key.eq_ignore_ascii_case("job"))
                .cloned();
            match wrapped_key {
                Some(key)
                    if object.len() == 1 || object.get(&key).is_some_and(JsonValue::is_object) =>
                {
                    object.remove(&key).unwrap_or(JsonValue::Null)
                }
                _ => JsonValue::Object(object),
            }
        }
        other => other,
    };
    if !job_json.is_object() {
        return Err(Diagnostics(vec![Diagnostic::new(
            filename,
            None,
            "a JSON job must be an object, either {\"Job\": {...}} or the job itself",
        )]));
    }
    build_and_validate(job_json, filename, &|_| None, FieldCheck::IgnoreUnknown)
}

/// Reads a jobspec file: `.json` files (or text starting with `{`) as JSON, anything else as
/// HCL2.
pub fn parse_any(path: &Path, variable_values: &VarValues) -> Result<Job, JobspecError> {
    parse_any_located(path, variable_values).map(|(job, _)| job)
}

/// [`parse_any`], also answering where each field is in the source (nothing for JSON).
pub fn parse_any_located(
    path: &Path,
    variable_values: &VarValues,
) -> Result<(Job, JobLocations), JobspecError> {
    let source = std::fs::read_to_string(path).map_err(|source| JobspecError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let filename = path.display().to_string();
    let is_json = path
        .extension()
        .is_some_and(|extension| extension.eq_ignore_ascii_case("json"))
        || source.trim_start().starts_with('{');
    if is_json {
        let job = parse_json(&source, &filename).map_err(JobspecError::Invalid)?;
        Ok((
            job,
            JobLocations {
                file: filename,
                positions: BTreeMap::new(),
            },
        ))
    } else {
        let base = path
            .parent()
            .filter(|parent| !parent.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        parse_hcl_located_reading_files(&source, &filename, variable_values, Some(base))
            .map_err(JobspecError::Invalid)
    }
}

/// Validates a job (defaults already applied). Diagnostics carry the JSON field path but no
/// file or position.
pub fn validate(job: &Job) -> Vec<Diagnostic> {
    validate::validate_job(job)
        .into_iter()
        .map(|issue| Diagnostic {
            file: String::new(),
            position: None,
            field_path: Some(issue.field_path),
            message: issue.message,
        })
        .collect()
}

/// Decodes HCL into Nomad's job JSON as written (no defaults, no validation), with the field
/// path → byte offset map. For tooling and tests.
pub fn decode_hcl_to_json(
    source: &str,
    filename: &str,
    variable_values: &VarValues,
) -> Result<(JsonValue, BTreeMap<String, usize>), Diagnostics> {
    let source_map = SourceMap::new(source);
    let body = hcl_parse::parse_body(source, filename, &source_map)?;
    let decoded = decode::decode_job_file(&body, filename, &source_map, variable_values, None)
        .map_err(finish_diagnostics)?;
    if decoded.errors.is_empty() {
        Ok((decoded.job, decoded.locations))
    } else {
        Err(finish_diagnostics(decoded.errors))
    }
}

/// Validation errors of a partly decoded job, minus the echoes of its decode errors: those on a
/// line a decode error already names, and "missing" errors in a group or task whose body had a
/// decode error (a misspelt or mistyped `driver`, an unlabelled `task`: its absence is no
/// second problem).
fn without_cascades(validation: Diagnostics, decode_errors: &[Diagnostic]) -> Vec<Diagnostic> {
    let context = |diagnostic: &Diagnostic| -> String {
        diagnostic
            .message
            .split_once(": ")
            .map_or(String::new(), |(context, _)| context.to_string())
    };
    let error_lines: std::collections::BTreeSet<usize> = decode_errors
        .iter()
        .filter_map(|diagnostic| diagnostic.position.map(|position| position.line))
        .collect();
    let error_contexts: std::collections::BTreeSet<String> =
        decode_errors.iter().map(context).collect();
    validation
        .into_iter()
        .filter(|diagnostic| {
            let same_line = diagnostic
                .position
                .is_some_and(|position| error_lines.contains(&position.line));
            let says_missing = diagnostic.message.contains(" is missing")
                || diagnostic.message.contains(" needs at least one ");
            let echoes_missing = says_missing && error_contexts.contains(&context(diagnostic));
            !(same_line || echoes_missing)
        })
        .collect()
}

fn finish_diagnostics(diagnostics: Vec<Diagnostic>) -> Diagnostics {
    let mut diagnostics = Diagnostics(diagnostics);
    diagnostics.sort_and_dedup();
    diagnostics
}

/// `Job` from user JSON, then defaults, then validation of the defaulted job with the user's
/// explicit values laid over it (so an explicit `memory = 0` is judged as written, as Nomad
/// does, instead of being replaced by the default).
/// What to do with fields of the input that the `Job` type does not hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FieldCheck {
    /// HCL: the decoder only produces fields it knows, so a lost one is a feature drover lacks.
    ReportDropped,
    /// JSON: ignored, like Go's `encoding/json` (Nomad's own output carries many extra keys).
    IgnoreUnknown,
}

fn build_and_validate(
    user_json: JsonValue,
    filename: &str,
    locate: &dyn Fn(&str) -> Option<Position>,
    field_check: FieldCheck,
) -> Result<Job, Diagnostics> {
    let diagnostic = |field_path: String, message: String| Diagnostic {
        file: filename.to_string(),
        position: locate(&field_path),
        field_path: Some(field_path),
        message,
    };
    let mut user_json = user_json;
    drover_structs::canonicalize::merge_job_update_into_groups(&mut user_json);
    let mut job: Job = drover_structs::lenient::from_value_ignoring_key_case(user_json.clone())
        .map_err(|error| {
            Diagnostics(vec![diagnostic(
                String::new(),
                format!("the job does not have Nomad's shape: {error}"),
            )])
        })?;
    job.canonicalize_as_parsed();
    let canonical_json = serde_json::to_value(&job).map_err(|error| {
        Diagnostics(vec![diagnostic(
            String::new(),
            format!("cannot encode the job: {error}"),
        )])
    })?;

    let mut diagnostics = Vec::new();
    let mut unsupported = Vec::new();
    if field_check == FieldCheck::ReportDropped {
        collect_dropped_fields(&user_json, &canonical_json, String::new(), &mut unsupported);
    }
    for field_path in unsupported {
        let message = format!(
            "{} is not supported by drover",
            describe_field_path(&user_json, &field_path)
        );
        diagnostics.push(diagnostic(field_path, message));
    }

    let mut effective_json = canonical_json;
    overlay_explicit_values(&mut effective_json, &user_json);
    // The overlay holds only values the first decode accepted, so it decodes again; should it
    // not, the defaulted job itself is judged.
    let effective: Option<Job> =
        drover_structs::lenient::from_value_ignoring_key_case(effective_json).ok();
    for issue in validate::validate_job(effective.as_ref().unwrap_or(&job)) {
        diagnostics.push(diagnostic(issue.field_path, issue.message));
    }
    if diagnostics.is_empty() {
        Ok(job)
    } else {
        Err(finish_diagnostics(diagnostics))
    }
}

fn find_key_ignoring_case<'map>(
    map: &'map JsonMap<String, JsonValue>,
    key: &str,
) -> Option<&'map String> {
    if map.contains_key(key) {
        return map.keys().find(|candidate| *candidate == key);
    }
    map.keys()
        .find(|candidate| candidate.eq_ignore_ascii_case(key))
}

/// Paths of user fields (non-null) that have no counterpart in the job's own encoding.
fn is_zero_json(value: &JsonValue) -> bool {
    match value {
        JsonValue::Bool(flag) => !flag,
        JsonValue::Number(number) => number.as_f64() == Some(0.0),
        JsonValue::String(text) => text.is_empty(),
        _ => false,
    }
}

fn collect_dropped_fields(
    user: &JsonValue,
    canonical: &JsonValue,
    path: String,
    dropped: &mut Vec<String>,
) {
    match (user, canonical) {
        (JsonValue::Object(user_map), JsonValue::Object(canonical_map)) => {
            for (key, user_value) in user_map {
                if user_value.is_null() {
                    continue;
                }
                let child_path = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                match find_key_ignoring_case(canonical_map, key) {
                    Some(canonical_key) => {
                        if let Some(canonical_value) = canonical_map.get(canonical_key) {
                            collect_dropped_fields(
                                user_value,
                                canonical_value,
                                child_path,
                                dropped,
                            );
                        }
                    }
                    // A zero value the canonical job leaves out (an explicit `false`, `0` or
                    // `""`) says the same as leaving the key unset: nothing is lost.
                    None if is_zero_json(user_value) => {}
                    None => dropped.push(child_path),
                }
            }
        }
        (JsonValue::Array(user_items), JsonValue::Array(canonical_items)) => {
            for (index, (user_item, canonical_item)) in
                user_items.iter().zip(canonical_items).enumerate()
            {
                collect_dropped_fields(
                    user_item,
                    canonical_item,
                    format!("{path}[{index}]"),
                    dropped,
                );
            }
        }
        _ => {}
    }
}

/// Lays the user's explicit (non-null) scalar values over the defaulted job, matching keys
/// without regard to case and arrays by index.
fn overlay_explicit_values(effective: &mut JsonValue, user: &JsonValue) {
    match (effective, user) {
        (JsonValue::Object(effective_map), JsonValue::Object(user_map)) => {
            for (key, user_value) in user_map {
                if user_value.is_null() {
                    continue;
                }
                let Some(effective_key) = find_key_ignoring_case(effective_map, key).cloned()
                else {
                    continue;
                };
                if let Some(effective_value) = effective_map.get_mut(&effective_key) {
                    if effective_value.is_null()
                        && (user_value.is_object() || user_value.is_array())
                    {
                        *effective_value = user_value.clone();
                    } else {
                        overlay_explicit_values(effective_value, user_value);
                    }
                }
            }
        }
        (JsonValue::Array(effective_items), JsonValue::Array(user_items)) => {
            for (effective_item, user_item) in effective_items.iter_mut().zip(user_items) {
                overlay_explicit_values(effective_item, user_item);
            }
        }
        (effective_value, user_value) if !user_value.is_object() && !user_value.is_array() => {
            *effective_value = user_value.clone();
        }
        _ => {}
    }
}

/// The source offset of a field, or of its nearest recorded ancestor.
fn nearest_location(locations: &BTreeMap<String, usize>, field_path: &str) -> Option<usize> {
    let mut path = field_path;
    loop {
        if let Some(offset) = locations.get(path) {
            return Some(*offset);
        }
        if path.is_empty() {
            return None;
        }
        let cut = path.rfind(['.', '[']).unwrap_or(0);
        path = &path[..cut];
    }
}

/// Nomad lets a job-level `reschedule` block set the default for every group; the group's own
/// block wins field by field (the API's `TaskGroup.Canonicalize`).
fn move_job_blocks_into_groups(job: &mut JsonValue, locations: &mut BTreeMap<String, usize>) {
    move_job_block_into_groups(job, locations, "Reschedule", "ReschedulePolicy");
    move_job_block_into_groups(job, locations, "Migrate", "Migrate");
    count_groups_from_scaling_min(job);
}

/// A group without a count starts at its scaling policy's minimum, as the API does (the `Job`
/// model cannot tell an absent count from one, so this happens before it is built).
fn count_groups_from_scaling_min(job: &mut JsonValue) {
    let Some(JsonValue::Array(groups)) = job.get_mut("TaskGroups") else {
        return;
    };
    for group in groups.iter_mut().filter_map(JsonValue::as_object_mut) {
        let scaling_min = group
            .get("Scaling")
            .and_then(|scaling| scaling.get("Min"))
            .cloned();
        if let Some(min) = scaling_min
            && !group.contains_key("Count")
        {
            group.insert("Count".into(), min);
        }
    }
}

/// Lays a job-level block (`reschedule`, `migrate`) under each group's own, as the API does.
fn move_job_block_into_groups(
    job: &mut JsonValue,
    locations: &mut BTreeMap<String, usize>,
    job_field: &str,
    group_field: &str,
) {
    let Some(job_object) = job.as_object_mut() else {
        return;
    };
    let Some(JsonValue::Object(job_reschedule)) = job_object.remove(job_field) else {
        return;
    };
    let job_reschedule_location = locations.get(job_field).copied();
    let Some(JsonValue::Array(groups)) = job_object.get_mut("TaskGroups") else {
        return;
    };
    for (index, group) in groups.iter_mut().enumerate() {
        let Some(group_object) = group.as_object_mut() else {
            continue;
        };
        let group_path = format!("TaskGroups[{index}].{group_field}");
        let entry = group_object
            .entry(group_field)
            .or_insert_with(|| JsonValue::Object(JsonMap::new()));
        if let JsonValue::Object(group_reschedule) = entry {
            for (field, value) in &job_reschedule {
                if !group_reschedule.contains_key(field) {
                    group_reschedule.insert(field.clone(), value.clone());
                    if let Some(offset) = locations.get(&format!("{job_field}.{field}")).copied() {
                        locations.insert(format!("{group_path}.{field}"), offset);
                    }
                }
            }
        }
        if let Some(offset) = job_reschedule_location {
            locations.entry(group_path).or_insert(offset);
        }
    }
}

/// Reads a JSON field path as the jobspec would name it:
/// `TaskGroups[0].Tasks[1].Identities[0].Filepath` → `group "app" task "web": identity.filepath`.
fn describe_field_path(job: &JsonValue, field_path: &str) -> String {
    let mut context = Vec::new();
    let mut names = Vec::new();
    let mut current = Some(job);
    for segment in field_path.split('.') {
        let (field, index) = match segment.split_once('[') {
            Some((field, rest)) => (field, rest.trim_end_matches(']').parse::<usize>().ok()),
            None => (segment, None),
        };
        current = current.and_then(|value| value.get(field));
        if let Some(index) = index {
            current = current.and_then(|value| value.get(index));
        }
        let label = current
            .and_then(|value| value.get("Name"))
            .and_then(JsonValue::as_str)
            .unwrap_or("");
        match field {
            "TaskGroups" => {
                context.push(format!("group {label:?}"));
                names.clear();
            }
            "Tasks" => {
                context.push(format!("task {label:?}"));
                names.clear();
            }
            other => names.push(
                schema::hcl_name_for_json_field(other)
                    .unwrap_or(other)
                    .to_string(),
            ),
        }
    }
    if context.is_empty() {
        names.join(".")
    } else {
        format!("{}: {}", context.join(" "), names.join("."))
    }
}
