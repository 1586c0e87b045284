//! Job submission handlers: register (with validation against the jobspec rules and the
//! support table: a job using what this agent cannot run is refused with a 400 naming each
//! use), `/v1/jobs/parse` (parses as Nomad does, refusing nothing it decodes) and
//! `/v1/validate/job` (validation errors and the support table's refusals, as a register would
//! answer), and Nomad's multi-error text for their failures. Features that run differently
//! from Nomad go to the response's `Warnings`.
//!
//! Not here: storing or scheduling the job (the backend does that).

use axum::body::Bytes;
use axum::response::Response;
use drover_structs::{Job, JobPlanRequest, JobRegisterRequest, JobsParseRequest};
use serde_json::json;

use super::respond::{Meta, decode_body, decode_value, json_response};
use crate::backend::ApiBackend;
use crate::error::ApiError;
use crate::params::QueryParams;

/// Nomad's multi-error text: `2 errors occurred:\n\t* first\n\t* second\n\n`.
fn multi_error(messages: &[String]) -> String {
    let count = messages.len();
    let mut text = if count == 1 {
        "1 error occurred:\n".to_string()
    } else {
        format!("{count} errors occurred:\n")
    };
    for message in messages {
        text.push_str("\t* ");
        text.push_str(message);
        text.push('\n');
    }
    text.push('\n');
    text
}

/// A request carrying a `Job`, decoded after the job's `Update` is laid under its groups' own,
/// as Nomad's API merges them (see [`drover_structs::canonicalize::merge_job_update_into_groups`]).
fn decode_job_request<T: serde::de::DeserializeOwned + Default>(
    body: &Bytes,
) -> Result<T, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    let mut value: serde_json::Value = serde_json::from_slice(body)
        .map_err(|error| ApiError::bad_request(format!("Request decode failed: {error}")))?;
    if let Some(object) = value.as_object_mut()
        && let Some(key) = object
            .keys()
            .find(|key| key.eq_ignore_ascii_case("Job"))
            .cloned()
        && let Some(job) = object.get_mut(&key)
    {
        drover_structs::canonicalize::merge_job_update_into_groups(job);
    }
    decode_value(value)
}

pub(super) async fn register<B: ApiBackend>(
    backend: &B,
    params: &QueryParams,
    body: Bytes,
    path_job_id: Option<String>,
) -> Result<Response, ApiError> {
    let mut request: JobRegisterRequest = decode_job_request(&body)?;
    let Some(mut job) = request.job.take() else {
        return Err(ApiError::bad_request("Job must be specified"));
    };
    if job.id.is_empty() {
        return Err(ApiError::bad_request("Job ID hasn't been provided"));
    }
    if let Some(path_job_id) = path_job_id
        && path_job_id != job.id
    {
        return Err(ApiError::bad_request("Job ID does not match name"));
    }
    if job.namespace.is_empty()
        && let Some(namespace) = params.non_empty("namespace")
    {
        job.namespace = namespace.to_string();
    }
    job.canonicalize();
    let (problems, support) = problems_and_support(&job);
    if !problems.is_empty() {
        return Err(ApiError::bad_request(multi_error(&problems)));
    }
    request.job = Some(job);
    let mut response = backend.register_job(request).await?;
    response.warnings = support.warnings_text();
    json_response(&response, params, Meta::Write(response.index))
}

/// `PUT|POST /v1/job/<id>/plan`: the job is checked as a register checks it (a job this agent
/// would refuse is refused here too), then planned without committing anything.
pub(super) async fn plan<B: ApiBackend>(
    backend: &B,
    params: &QueryParams,
    body: Bytes,
    path_job_id: &str,
) -> Result<Response, ApiError> {
    let mut request: JobPlanRequest = decode_job_request(&body)?;
    let Some(mut job) = request.job.take() else {
        return Err(ApiError::bad_request("Job must be specified"));
    };
    if job.id.is_empty() {
        return Err(ApiError::bad_request("Job must have a valid ID"));
    }
    if job.id != path_job_id {
        return Err(ApiError::bad_request("Job ID does not match"));
    }
    if job.namespace.is_empty()
        && let Some(namespace) = params.non_empty("namespace")
    {
        job.namespace = namespace.to_string();
    }
    job.canonicalize();
    let (problems, support) = problems_and_support(&job);
    if !problems.is_empty() {
        return Err(ApiError::bad_request(multi_error(&problems)));
    }
    request.job = Some(job);
    let mut response = backend.plan_job(request).await?;
    response.warnings = support.warnings_text();
    json_response(&response, params, Meta::Write(response.index))
}

/// The job's validation errors followed by the support table's refusals (each naming its
/// field path), and the support report for its warnings.
fn problems_and_support(job: &Job) -> (Vec<String>, drover_jobspec::SupportReport) {
    let support = drover_jobspec::support::check(job);
    let located = drover_jobspec::JobLocations::without_source("");
    let problems = drover_jobspec::validate(job)
        .iter()
        .chain(located.refusal_diagnostics(&support).iter())
        .map(ToString::to_string)
        .collect();
    (problems, support)
}

/// `/v1/validate/job`: the problems of a job, answered with 200 as Nomad does
/// (`ValidationErrors` lists them, `Error` joins them). `DriverConfigValidated` is true
/// whenever a server answered, problems or not, as in Nomad: a CLI reads false as "the agent
/// could not be reached" and says so.
pub(super) fn validate_job(params: &QueryParams, body: Bytes) -> Result<Response, ApiError> {
    let mut request: JobRegisterRequest = decode_job_request(&body)?;
    let Some(mut job) = request.job.take() else {
        return Err(ApiError::bad_request("Job must be specified"));
    };
    job.canonicalize();
    let (problems, support) = problems_and_support(&job);
    let error = if problems.is_empty() {
        String::new()
    } else {
        multi_error(&problems)
    };
    let response = json!({
        "DriverConfigValidated": true,
        "ValidationErrors": problems,
        "Error": error,
        "Warnings": support.warnings_text(),
    });
    json_response(&response, params, Meta::None)
}

pub(super) fn parse_job(params: &QueryParams, body: Bytes) -> Result<Response, ApiError> {
    let request: JobsParseRequest = decode_body(&body)?;
    if request.job_hcl.trim().is_empty() {
        return Err(ApiError::bad_request("Job HCL must be specified"));
    }
    if request.hcl_v1 {
        return Err(ApiError::bad_request(
            "HCL version 1 jobspecs are not supported",
        ));
    }
    let mut variables = drover_jobspec::VarValues::new();
    match &request.variables {
        None | Some(serde_json::Value::Null) => {}
        Some(serde_json::Value::String(assignments)) => {
            if !assignments.trim().is_empty() {
                variables
                    .add_var_file(assignments, "variables.hcl")
                    .map_err(|diagnostics| ApiError::bad_request(diagnostics_text(&diagnostics)))?;
            }
        }
        Some(serde_json::Value::Object(values)) => {
            for (name, value) in values {
                match value {
                    serde_json::Value::String(text) => variables.set_text(name, text),
                    other => variables.set_text(name, other.to_string()),
                }
            }
        }
        Some(_) => {
            return Err(ApiError::bad_request(
                "Variables must be HCL assignments or an object of values",
            ));
        }
    }
    let job: Job = if request.canonicalize {
        drover_jobspec::parse_hcl(&request.job_hcl, "input.hcl", &variables)
            .map_err(|diagnostics| ApiError::bad_request(diagnostics_text(&diagnostics)))?
    } else {
        let (as_written, _) =
            drover_jobspec::decode_hcl_to_json(&request.job_hcl, "input.hcl", &variables)
                .map_err(|diagnostics| ApiError::bad_request(diagnostics_text(&diagnostics)))?;
        drover_structs::lenient::from_value_ignoring_key_case(as_written).map_err(|error| {
            ApiError::bad_request(format!("the job does not have Nomad's shape: {error}"))
        })?
    };
    json_response(&job, params, Meta::None)
}

fn diagnostics_text(diagnostics: &drover_jobspec::Diagnostics) -> String {
    let messages: Vec<String> = diagnostics.iter().map(ToString::to_string).collect();
    multi_error(&messages)
}
