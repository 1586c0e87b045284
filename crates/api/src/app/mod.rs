//! The axum application: [`app`] builds the `/v1` router over an [`ApiBackend`]. One dispatch
//! handler routes the request ([`crate::routes::route`]), runs it, and writes Nomad's response
//! shape: JSON (indented with `?pretty`), the `X-Nomad-Index` / `X-Nomad-KnownLeader` /
//! `X-Nomad-LastContact` headers on reads, `X-Nomad-Index` on writes, plain-text errors.
//!
//! Not here: the meaning of any operation (the backend owns it).

use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use drover_structs::{
    AllocListStub, AllocRestartRequest, AllocSignalRequest, Allocation, GenericResponse,
    JobVersionsResponse,
};
use serde_json::json;

pub mod agent;
mod events;
pub(crate) mod exec;
mod fuzzy;
mod node_rpc;
mod respond;
mod scaling;
mod search;
mod services;
mod statuses;
mod submit;

use agent::{agent_health, agent_members, agent_self};

use respond::{
    Meta, blocking_read, blocking_read_object, decode_body, json_response, object_response,
    page_response,
};
use submit::{parse_job, plan, register, validate_job};

use crate::backend::{ApiBackend, DeploymentOperation, NodeOperation, Table};
use crate::error::ApiError;
use crate::logs::{
    FileSet, FollowTiming, LogRequest, Origin, StreamPosition, WriterFinished, stream_body,
};
use crate::paginate::{ListOptions, TokenKind, TokenParts, page, to_datum};
use crate::params::QueryParams;
use crate::routes::{Route, route};

/// Knobs of the HTTP layer that tests turn.
#[derive(Debug, Clone, Copy)]
pub struct ApiOptions {
    pub follow_timing: FollowTiming,
    /// How long an event stream stays quiet before a `{}` heartbeat (Nomad: 30 s).
    pub event_heartbeat: std::time::Duration,
}

impl Default for ApiOptions {
    fn default() -> Self {
        ApiOptions {
            follow_timing: FollowTiming::default(),
            event_heartbeat: std::time::Duration::from_secs(30),
        }
    }
}

struct AppState<B> {
    backend: Arc<B>,
    options: ApiOptions,
}

impl<B> Clone for AppState<B> {
    fn clone(&self) -> Self {
        AppState {
            backend: Arc::clone(&self.backend),
            options: self.options,
        }
    }
}

/// The `/v1` API over `backend`.
pub fn app<B: ApiBackend>(backend: Arc<B>) -> Router {
    app_with_options(backend, ApiOptions::default())
}

/// The `/v1` API over `backend`, with explicit options.
pub fn app_with_options<B: ApiBackend>(backend: Arc<B>, options: ApiOptions) -> Router {
    Router::new()
        .route(
            "/v1/client/allocation/{alloc_id}/exec",
            axum::routing::any(exec::exec_endpoint::<B>),
        )
        .fallback(dispatch::<B>)
        .layer(axum::middleware::from_fn_with_state(
            AppState {
                backend: Arc::clone(&backend),
                options,
            },
            job_action::<B>,
        ))
        // The one body limit is applied around the whole agent (see `body_limit`); the
        // extractor's own default must not be a second, different one.
        .layer(axum::extract::DefaultBodyLimit::max(
            crate::MAX_REQUEST_BODY,
        ))
        .with_state(AppState { backend, options })
}

/// `/v1/job/<job>/action` is a websocket (a job ID may hold `/`, so it is matched here rather
/// than by a router pattern); every other request goes on.
async fn job_action<B: ApiBackend>(
    State(state): State<AppState<B>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let Some(job_id) = crate::routes::job_action_path(request.uri().path()) else {
        return next.run(request).await;
    };
    let job_id = job_id.to_owned();
    let (mut parts, _body) = request.into_parts();
    let upgrade = <axum::extract::ws::WebSocketUpgrade as axum::extract::FromRequestParts<()>>::from_request_parts(&mut parts, &()).await;
    exec::action_endpoint(state, parts.method, job_id, parts.uri, upgrade).await
}

async fn dispatch<B: ApiBackend>(
    State(state): State<AppState<B>>,
    method: Method,
    uri: Uri,
    event_access: Option<axum::Extension<drover_state::EventAccess>>,
    body: Bytes,
) -> Response {
    let params = QueryParams::parse(uri.query());
    let outcome = match route(&method, uri.path()) {
        Ok(route) => match params.non_empty("region") {
            // One agent serves one region; Nomad answers this for a region it cannot reach.
            Some(region) if region != state.backend.agent_info().region => {
                // Nomad answers it with a 500; the caller named a region this agent does not
                // serve: 400, in Nomad's words.
                Err(ApiError::bad_request("No path to region"))
            }
            _ => {
                let event_access = event_access.map(|axum::Extension(access)| access);
                handle(&state, route, &params, body, event_access).await
            }
        },
        Err(error) => Err(error),
    };
    let response = outcome.unwrap_or_else(IntoResponse::into_response);
    tracing::debug!(%method, path = uri.path(), status = response.status().as_u16(), "http request");
    response
}

/// A node write's answer, with its `Index` as `X-Nomad-Index`.
fn node_write_response(
    response: &serde_json::Value,
    params: &QueryParams,
) -> Result<Response, ApiError> {
    let index = response
        .get("Index")
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(0);
    json_response(response, params, Meta::Write(index))
}

/// `no_shutdown_delay=true` on a job or allocation stop asks the client to skip the tasks'
/// `shutdown_delay`, which drover's client does not do: refused, naming it, rather than
/// ignored (`false` asks for nothing and is accepted).
fn refuse_no_shutdown_delay(params: &QueryParams) -> Result<(), ApiError> {
    if params.bool("no_shutdown_delay", false)? {
        return Err(ApiError::bad_request(
            "no_shutdown_delay is not supported: drover's client always waits out a task's shutdown_delay; stop without it",
        ));
    }
    Ok(())
}

/// `reschedule=true` on an allocation stop marks a stopped batch allocation for Nomad's
/// reschedule tracker instead of an ordinary replacement; drover's scheduler has no such path,
/// so it is refused by name rather than ignored (`false`, the default, is accepted).
fn refuse_reschedule_on_stop(params: &QueryParams) -> Result<(), ApiError> {
    if params.bool("reschedule", false)? {
        return Err(ApiError::bad_request(
            "reschedule is not supported on an allocation stop: drover replaces a stopped allocation as a migration; stop without it",
        ));
    }
    Ok(())
}

/// Nomad's checks of the `JobID` in a revert or stability body against the job in the path.
fn check_job_id_of_body(in_body: &str, in_path: &str) -> Result<(), ApiError> {
    if in_body.is_empty() {
        return Err(ApiError::bad_request("JobID must be specified"));
    }
    if in_body != in_path {
        return Err(ApiError::bad_request("Job ID does not match"));
    }
    Ok(())
}

fn check_deployment_id_of_body(in_body: &str, in_path: &str) -> Result<(), ApiError> {
    if in_body.is_empty() {
        return Err(ApiError::bad_request("DeploymentID must be specified"));
    }
    if in_body != in_path {
        return Err(ApiError::bad_request("Deployment ID does not match"));
    }
    Ok(())
}

fn stubs(allocations: Vec<Allocation>, task_states: bool, resources: bool) -> Vec<AllocListStub> {
    allocations
        .into_iter()
        .map(|mut allocation| {
            allocation.populate_display_messages();
            allocation.stub_with(task_states, resources)
        })
        .collect()
}

/// A page of allocations or evaluations in Nomad's order: by create index then ID (tokens
/// `<index>.<id>`), or by ID (tokens `<id>`) when read by ID prefix; `reverse` walks backwards.
fn page_by_create_index<T: serde::Serialize, S>(
    mut items: Vec<T>,
    options: &ListOptions,
    prefix: &str,
    parts: impl Fn(&T) -> TokenParts<'_>,
    stub: impl FnMut(T) -> Result<S, ApiError>,
) -> Result<(Vec<S>, String), ApiError> {
    let kind = if prefix.is_empty() {
        items.sort_by(|a, b| {
            let (a, b) = (parts(a), parts(b));
            (a.create_index, a.id).cmp(&(b.create_index, b.id))
        });
        TokenKind::CreateIndexId
    } else {
        items.sort_by(|a, b| parts(a).id.cmp(parts(b).id));
        TokenKind::Id
    };
    if options.reverse {
        items.reverse();
    }
    page(items, options, kind, parts, to_datum, stub)
}

/// The deployments of the job's current incarnation (of every incarnation with `all`), newest
/// first; none when the job does not exist, as Nomad answers.
fn job_deployments<B: ApiBackend>(
    backend: &B,
    namespace: &str,
    job_id: &str,
    all: bool,
) -> Result<Vec<drover_structs::Deployment>, ApiError> {
    let Some(job) = backend.job(namespace, job_id)? else {
        return Ok(Vec::new());
    };
    Ok(backend
        .job_deployments(namespace, job_id)?
        .into_iter()
        .filter(|deployment| all || deployment.job_create_index == job.create_index)
        .collect())
}

async fn handle<B: ApiBackend>(
    state: &AppState<B>,
    route: Route,
    params: &QueryParams,
    body: Bytes,
    event_access: Option<drover_state::EventAccess>,
) -> Result<Response, ApiError> {
    let backend = state.backend.as_ref();
    let namespace = params.namespace().to_string();
    if matches!(
        route,
        Route::FsList { .. }
            | Route::FsStat { .. }
            | Route::FsCat { .. }
            | Route::FsReadAt { .. }
            | Route::FsStream { .. }
    ) && params.get("path").is_some_and(|path| path.contains('\0'))
    {
        // No file name holds a NUL: the kernel would refuse it as an invalid argument.
        return Err(ApiError::bad_request(
            "file path must not contain a NUL byte",
        ));
    }
    match route {
        Route::JobList => {
            let include_meta = params.bool("meta", false)?;
            let prefix = params.prefix().to_string();
            let options = ListOptions::from_params(params)?;
            let (index, (list, next_token)) = blocking_read(
                backend,
                params,
                &[Table::Jobs, Table::JobSummaries],
                |backend| {
                    let mut jobs = backend.jobs(&namespace, &prefix)?;
                    jobs.sort_by(|a, b| (&a.namespace, &a.id).cmp(&(&b.namespace, &b.id)));
                    if options.reverse {
                        jobs.reverse();
                    }
                    page(
                        jobs,
                        &options,
                        TokenKind::NamespaceId,
                        |job| TokenParts {
                            namespace: &job.namespace,
                            id: &job.id,
                            create_index: job.create_index,
                        },
                        to_datum,
                        |job| {
                            let summary = backend.job_summary(&job.namespace, &job.id)?;
                            Ok(job.stub(summary, include_meta))
                        },
                    )
                },
            )
            .await?;
            page_response(&list, params, index, &next_token)
        }
        Route::JobStatuses => statuses::job_statuses(backend, params, body).await,
        Route::JobRegister => register(backend, params, body, None).await,
        Route::JobRegisterAt { job_id } => register(backend, params, body, Some(job_id)).await,
        Route::JobPlan { job_id } => plan(backend, params, body, &job_id).await,
        Route::JobParse => parse_job(params, body),
        Route::JobValidate => validate_job(params, body),
        Route::JobRead { job_id } => {
            // Nomad's `Job.GetJob`: the job's ModifyIndex, the jobs table's while it is absent.
            let (index, job) = blocking_read_object(
                backend,
                params,
                &[Table::Jobs],
                |backend| backend.job(&namespace, &job_id),
                |job| job.modify_index,
            )
            .await?;
            object_response(job.as_ref(), params, index, "job not found")
        }
        Route::JobDeregister { job_id } => {
            let purge = params.bool("purge", false)?;
            refuse_no_shutdown_delay(params)?;
            // Nomad's `eval_priority`: an integer, checked only when positive.
            let eval_priority = match params.non_empty("eval_priority") {
                None => 0,
                Some(text) => text.parse::<i64>().map_err(|_| {
                    ApiError::bad_request(format!(
                        "Failed to parse value of \"eval_priority\" ({text}) as a int: strconv.Atoi: parsing {text:?}: invalid syntax"
                    ))
                })?,
            };
            if eval_priority > 100 {
                return Err(ApiError::bad_request(
                    "Eval priority must be between 1 and 100 inclusively",
                ));
            }
            let response = backend
                .deregister_job(&namespace, &job_id, purge, eval_priority)
                .await?;
            json_response(&response, params, Meta::Write(response.index))
        }
        Route::JobAllocations { job_id } => {
            let all = params.bool("all", false)?;
            // The allocations table's index alone, as Nomad's `Job.Allocations`: 0 until an
            // allocation was ever written.
            let (index, list) = blocking_read(backend, params, &[Table::Allocs], |backend| {
                let job = backend.job(&namespace, &job_id)?;
                let allocations = backend
                    .job_allocations(&namespace, &job_id)?
                    .into_iter()
                    .filter(|allocation| {
                        all || match (&job, &allocation.job) {
                            (Some(job), Some(alloc_job)) => {
                                alloc_job.create_index == job.create_index
                            }
                            _ => true,
                        }
                    })
                    .collect();
                Ok(stubs(allocations, true, false))
            })
            .await?;
            json_response(&list, params, Meta::Read(index))
        }
        Route::JobEvaluations { job_id } => {
            let (index, list) = blocking_read(backend, params, &[Table::Evals], |backend| {
                backend.job_evaluations(&namespace, &job_id)
            })
            .await?;
            json_response(&list, params, Meta::Read(index))
        }
        Route::JobVersions { job_id } => {
            let (index, versions) =
                blocking_read(backend, params, &[Table::JobVersions], |backend| {
                    backend.job_versions(&namespace, &job_id)
                })
                .await?;
            if versions.is_empty() {
                return Err(ApiError::not_found("job versions not found"));
            }
            let diff_tag = params.non_empty("diff_tag");
            let diff_version = match params.non_empty("diff_version") {
                None => None,
                Some(text) => Some(text.parse::<u64>().map_err(|error| {
                    ApiError::bad_request(format!(
                        "Failed to parse value of \"diff_version\" ({text}) as a uint64: {error}"
                    ))
                })?),
            };
            let diffs = if params.bool("diffs", false)? {
                let diff = |old: &drover_structs::Job, new: &drover_structs::Job| {
                    drover_structs::job_diff::diff_jobs(Some(old), Some(new), true).map_err(
                        |error| ApiError::internal(format!("failed to create job diff: {error}")),
                    )
                };
                // `diff_tag` (first) or `diff_version` names the version every version is
                // compared with; Nomad answers a missing one with a plain error, a 500.
                let compared = match (diff_tag, diff_version) {
                    (Some(tag), _) => Some(
                        versions
                            .iter()
                            .find(|job| job.version_tag.as_ref().is_some_and(|t| t.name == tag))
                            .ok_or_else(|| ApiError::internal(format!("tag {tag:?} not found")))?,
                    ),
                    (None, Some(number)) => Some(
                        versions
                            .iter()
                            .find(|job| job.version == number)
                            .ok_or_else(|| {
                                ApiError::internal(format!("version {number} not found"))
                            })?,
                    ),
                    (None, None) => None,
                };
                let diffs = match compared {
                    Some(compared) => versions
                        .iter()
                        .map(|job| diff(compared, job))
                        .collect::<Result<Vec<_>, _>>()?,
                    // Newest first: each version against the one before it, as Nomad answers.
                    None => versions
                        .windows(2)
                        .map(|pair| diff(&pair[1], &pair[0]))
                        .collect::<Result<Vec<_>, _>>()?,
                };
                (!diffs.is_empty()).then_some(diffs)
            } else {
                None
            };
            let response = JobVersionsResponse {
                versions,
                diffs,
                index,
                last_contact: 0,
                known_leader: true,
                next_token: String::new(),
            };
            json_response(&response, params, Meta::Read(index))
        }
        Route::JobActions { job_id } => {
            let (index, job) = blocking_read(backend, params, &[Table::Jobs], |backend| {
                backend.job(&namespace, &job_id)
            })
            .await?;
            let job = job.ok_or_else(|| ApiError::not_found(format!("Unknown job {job_id:?}")))?;
            let actions: Vec<serde_json::Value> = job
                .task_groups
                .iter()
                .flat_map(|group| {
                    group.tasks.iter().flat_map(move |task| {
                        task.actions.iter().map(move |action| {
                            json!({
                                "Name": action.name,
                                "Command": action.command,
                                "Args": action.args,
                                "TaskName": task.name,
                                "TaskGroupName": group.name,
                            })
                        })
                    })
                })
                .collect();
            json_response(&actions, params, Meta::Read(index))
        }
        Route::JobSummary { job_id } => {
            // Nomad's `Job.Summary`: the summary's own ModifyIndex, as a job's read.
            let (index, summary) = blocking_read_object(
                backend,
                params,
                &[Table::JobSummaries],
                |backend| backend.job_summary(&namespace, &job_id),
                |summary| summary.modify_index,
            )
            .await?;
            object_response(summary.as_ref(), params, index, "job not found")
        }
        Route::JobDeployment { job_id } => {
            let (index, latest) =
                blocking_read(backend, params, &[Table::Deployments], |backend| {
                    let deployments = job_deployments(backend, &namespace, &job_id, false)?;
                    Ok(deployments.into_iter().next())
                })
                .await?;
            json_response(&latest, params, Meta::Read(index))
        }
        Route::JobDeployments { job_id } => {
            let all = params.bool("all", false)?;
            let (index, list) = blocking_read(backend, params, &[Table::Deployments], |backend| {
                job_deployments(backend, &namespace, &job_id, all)
            })
            .await?;
            json_response(&list, params, Meta::Read(index))
        }
        Route::JobRevert { job_id } => {
            let request: drover_structs::JobRevertRequest = decode_body(&body)?;
            check_job_id_of_body(&request.job_id, &job_id)?;
            let response = backend.revert_job(&namespace, request).await?;
            json_response(&response, params, Meta::Write(response.index))
        }
        Route::JobStable { job_id } => {
            let request: drover_structs::JobStabilityRequest = decode_body(&body)?;
            check_job_id_of_body(&request.job_id, &job_id)?;
            let index = backend.set_job_stability(&namespace, request).await?;
            json_response(
                &drover_structs::JobStabilityResponse { index },
                params,
                Meta::Write(index),
            )
        }
        Route::JobVersionTag {
            job_id,
            name,
            apply,
        } => {
            let request = if apply {
                let body: drover_structs::TagVersionRequest = decode_body(&body)?;
                drover_structs::JobApplyTagRequest {
                    job_id,
                    tag: Some(drover_structs::JobVersionTag {
                        name: name.clone(),
                        description: body.description,
                        tagged_time: 0,
                    }),
                    name,
                    version: body.version,
                    latest: body.latest,
                }
            } else {
                drover_structs::JobApplyTagRequest {
                    job_id,
                    name,
                    ..Default::default()
                }
            };
            let response = backend.tag_job_version(&namespace, request).await?;
            json_response(&response, params, Meta::Write(response.index))
        }
        Route::JobScaleStatus { job_id } => {
            scaling::job_scale_status(backend, params, &job_id).await
        }
        Route::JobScale { job_id } => scaling::job_scale(backend, params, body, &job_id).await,
        Route::ScalingPolicies => scaling::scaling_policies(backend, params).await,
        Route::ScalingPolicy { policy_id } => {
            scaling::scaling_policy(backend, params, &policy_id).await
        }
        Route::JobEvaluate { job_id } => {
            let response = backend.evaluate_job(&namespace, &job_id).await?;
            json_response(&response, params, Meta::Write(response.index))
        }
        Route::JobPeriodicForce { job_id } => {
            let response = backend.force_periodic(&namespace, &job_id).await?;
            // Nomad answers `PeriodicForceResponse`: the evaluation and the index.
            let body = json!({
                "EvalID": response.eval_id,
                "EvalCreateIndex": response.eval_create_index,
                "Index": response.index,
            });
            json_response(&body, params, Meta::Write(response.index))
        }
        Route::JobDispatch { job_id } => {
            let mut request: drover_structs::JobDispatchRequest = decode_body(&body)?;
            if !request.job_id.is_empty() && request.job_id != job_id {
                return Err(ApiError::bad_request("Job ID does not match"));
            }
            request.job_id.clone_from(&job_id);
            let token = params.get("idempotency_token").unwrap_or("").to_owned();
            let response = backend
                .dispatch_job(&namespace, &job_id, request, &token)
                .await?;
            json_response(&response, params, Meta::Write(response.index))
        }
        Route::JobSubmission { job_id, read } => {
            submit::job_submission(backend, params, &namespace, &job_id, read).await
        }
        Route::AllocationList => {
            let task_states = params.bool("task_states", true)?;
            let resources = params.bool("resources", false)?;
            let prefix = params.prefix().to_string();
            let options = ListOptions::from_params(params)?;
            let (index, (list, next_token)) =
                blocking_read(backend, params, &[Table::Allocs], |backend| {
                    let allocations = backend.allocations(&namespace, &prefix)?;
                    page_by_create_index(
                        allocations,
                        &options,
                        &prefix,
                        |allocation| TokenParts {
                            namespace: &allocation.namespace,
                            id: &allocation.id,
                            create_index: allocation.create_index,
                        },
                        |mut allocation| {
                            allocation.populate_display_messages();
                            Ok(allocation.stub_with(task_states, resources))
                        },
                    )
                })
                .await?;
            page_response(&list, params, index, &next_token)
        }
        Route::AllocationRead { alloc_id } => {
            // Nomad's `Alloc.GetAlloc`: the allocation's ModifyIndex, else the table's.
            let (index, mut allocation) = blocking_read_object(
                backend,
                params,
                &[Table::Allocs],
                |backend| backend.allocation(&alloc_id),
                |allocation| allocation.modify_index,
            )
            .await?;
            if let Some(allocation) = allocation.as_mut() {
                allocation.populate_display_messages();
            }
            object_response(allocation.as_ref(), params, index, "alloc not found")
        }
        Route::AllocationStop { alloc_id } => {
            refuse_no_shutdown_delay(params)?;
            refuse_reschedule_on_stop(params)?;
            let response = backend.stop_alloc(&alloc_id).await?;
            json_response(&response, params, Meta::Write(response.index))
        }
        Route::EvaluationList => {
            let prefix = params.prefix().to_string();
            let status = params.non_empty("status").map(str::to_string);
            let job = params.non_empty("job").map(str::to_string);
            let options = ListOptions::from_params(params)?;
            if options.filter.is_some() && (status.is_some() || job.is_some()) {
                return Err(ApiError::bad_request(
                    "Filter expression cannot be used with other filter parameters",
                ));
            }
            let (index, (list, next_token)) =
                blocking_read(backend, params, &[Table::Evals], |backend| {
                    let evaluations = backend
                        .evaluations(&namespace, &prefix)?
                        .into_iter()
                        .filter(|eval| status.as_ref().is_none_or(|status| &eval.status == status))
                        .filter(|eval| job.as_ref().is_none_or(|job| &eval.job_id == job))
                        .collect();
                    page_by_create_index(
                        evaluations,
                        &options,
                        &prefix,
                        |eval| TokenParts {
                            namespace: &eval.namespace,
                            id: &eval.id,
                            create_index: eval.create_index,
                        },
                        Ok,
                    )
                })
                .await?;
            page_response(&list, params, index, &next_token)
        }
        Route::EvaluationRead { eval_id } => {
            // Nomad's `Eval.GetEval`: the evaluation's ModifyIndex, else the table's.
            let (index, eval) = blocking_read_object(
                backend,
                params,
                &[Table::Evals],
                |backend| backend.evaluation(&eval_id),
                |eval| eval.modify_index,
            )
            .await?;
            object_response(eval.as_ref(), params, index, "eval not found")
        }
        Route::EvaluationAllocations { eval_id } => {
            let (index, list) = blocking_read(backend, params, &[Table::Allocs], |backend| {
                Ok(stubs(
                    backend.evaluation_allocations(&eval_id)?,
                    true,
                    false,
                ))
            })
            .await?;
            json_response(&list, params, Meta::Read(index))
        }
        Route::NodeList => {
            let include_attributes = params.bool("os", false)?;
            let include_resources = params.bool("resources", false)?;
            let prefix = params.prefix().to_string();
            let options = ListOptions::from_params(params)?;
            let (index, (list, next_token)) =
                blocking_read(backend, params, &[Table::Nodes], |backend| {
                    let mut nodes = backend.nodes(&prefix)?;
                    // Nomad walks nodes by ID whatever `reverse` says (its paginator still
                    // compares tokens the reversed way).
                    nodes.sort_by(|a, b| a.id.cmp(&b.id));
                    page(
                        nodes,
                        &options,
                        TokenKind::Id,
                        |node| TokenParts {
                            namespace: "",
                            id: &node.id,
                            create_index: node.create_index,
                        },
                        // The filter sees the node without its secret.
                        |node| to_datum(&node.sanitized()),
                        |node| Ok(node.stub_with(include_attributes, include_resources)),
                    )
                })
                .await?;
            page_response(&list, params, index, &next_token)
        }
        Route::NodeRead { node_id } => {
            // Nomad's `Node.GetNode`: the node's ModifyIndex, else the table's.
            let (index, node) = blocking_read_object(
                backend,
                params,
                &[Table::Nodes],
                |backend| backend.node(&node_id),
                |node| node.modify_index,
            )
            .await?;
            let node = node.map(|node| node.sanitized());
            object_response(node.as_ref(), params, index, "node not found")
        }
        Route::NodeAllocations { node_id } => {
            let (index, list) = blocking_read(backend, params, &[Table::Allocs], |backend| {
                let mut allocations = backend.node_allocations(&node_id)?;
                allocations
                    .iter_mut()
                    .for_each(Allocation::populate_display_messages);
                Ok(allocations)
            })
            .await?;
            // Nomad's `Node.GetAllocs` floors the allocations' index at 1.
            json_response(&list, params, Meta::Read(index.max(1)))
        }
        Route::NodeDrain { node_id } => {
            let request: drover_structs::NodeDrainRequest = decode_body(&body)?;
            let response = backend
                .update_node(NodeOperation::Drain {
                    node_id,
                    spec: request.drain_spec,
                    mark_eligible: request.mark_eligible,
                    meta: request.meta,
                })
                .await?;
            node_write_response(&response, params)
        }
        Route::NodeEligibility { node_id } => {
            let request: drover_structs::NodeEligibilityRequest = decode_body(&body)?;
            // As Nomad: the body's NodeID, else the path's.
            let node_id = if request.node_id.is_empty() {
                node_id
            } else {
                request.node_id
            };
            let response = backend
                .update_node(NodeOperation::Eligibility {
                    node_id,
                    eligibility: request.eligibility,
                })
                .await?;
            node_write_response(&response, params)
        }
        Route::NodePurge { node_id } => {
            let response = backend
                .update_node(NodeOperation::Purge { node_id })
                .await?;
            node_write_response(&response, params)
        }
        Route::NodeEvaluate { node_id } => {
            let response = backend
                .update_node(NodeOperation::Evaluate { node_id })
                .await?;
            node_write_response(&response, params)
        }
        Route::AgentSelf => json_response(&agent_self(backend), params, Meta::Read(1)),
        Route::AgentMembers => json_response(&agent_members(backend), params, Meta::Read(1)),
        Route::AgentForceLeave => {
            if !backend.agent_info().server_enabled {
                return Err(ApiError::not_implemented("Invalid method"));
            }
            agent::force_leave_request(params)?;
            // A server outside a cluster is its region's only member, alive: there is no
            // failed member to force out, and Nomad answers such a request with a 200. A
            // server of a cluster answers it before this (the agent's cluster layer).
            Ok(StatusCode::OK.into_response())
        }
        Route::AgentHealth => agent_health(backend, params).await,
        Route::EventStream => {
            let mut filter = events::event_filter(params)?;
            // The caller's right to each event, when the agent's ACL layer set one.
            filter.access = event_access;
            let from_index = params.u64("index", 0)?;
            let subscription = backend.subscribe_events(from_index, filter);
            let body = events::event_stream_body(subscription, state.options.event_heartbeat);
            Ok((
                [
                    (header::CONTENT_TYPE, "application/json"),
                    (header::CACHE_CONTROL, "no-cache"),
                ],
                body,
            )
                .into_response())
        }
        Route::AgentServers => {
            let info = backend.agent_info();
            if !info.client_enabled {
                return Err(ApiError::not_implemented("Invalid method"));
            }
            let mut servers = info.client_servers;
            servers.sort();
            json_response(&servers, params, Meta::Read(1))
        }
        Route::AgentServersUpdate => {
            if !backend.agent_info().client_enabled {
                return Err(ApiError::not_implemented("Invalid method"));
            }
            let addresses: Vec<String> = params.get_all("address").map(str::to_owned).collect();
            if addresses.is_empty() {
                return Err(ApiError::bad_request("missing server address"));
            }
            backend.set_client_servers(addresses)?;
            Ok(StatusCode::OK.into_response())
        }
        Route::DeploymentList => {
            let prefix = params.prefix().to_string();
            let options = ListOptions::from_params(params)?;
            let (index, (list, next_token)) =
                blocking_read(backend, params, &[Table::Deployments], |backend| {
                    page_by_create_index(
                        backend.deployments(&namespace, &prefix)?,
                        &options,
                        &prefix,
                        |deployment| TokenParts {
                            namespace: &deployment.namespace,
                            id: &deployment.id,
                            create_index: deployment.create_index,
                        },
                        Ok,
                    )
                })
                .await?;
            page_response(&list, params, index, &next_token)
        }
        Route::DeploymentRead { deployment_id } => {
            // Nomad's `Deployment.GetDeployment`: the deployment's ModifyIndex, else the
            // table's.
            let (index, deployment) = blocking_read_object(
                backend,
                params,
                &[Table::Deployments],
                |backend| backend.deployment(&deployment_id),
                |deployment| deployment.modify_index,
            )
            .await?;
            object_response(deployment.as_ref(), params, index, "deployment not found")
        }
        Route::DeploymentAllocations { deployment_id } => {
            let (index, list) = blocking_read(
                backend,
                params,
                &[Table::Deployments, Table::Allocs],
                |backend| {
                    let Some(deployment) = backend.deployment(&deployment_id)? else {
                        return Ok(Vec::new());
                    };
                    let allocations = backend
                        .job_allocations(&deployment.namespace, &deployment.job_id)?
                        .into_iter()
                        .filter(|allocation| allocation.deployment_id == deployment.id)
                        .collect();
                    Ok(stubs(allocations, true, false))
                },
            )
            .await?;
            json_response(&list, params, Meta::Read(index))
        }
        Route::DeploymentPromote { deployment_id } => {
            let request: drover_structs::DeploymentPromoteRequest = decode_body(&body)?;
            check_deployment_id_of_body(&request.deployment_id, &deployment_id)?;
            let response = backend
                .update_deployment(DeploymentOperation::Promote(request))
                .await?;
            json_response(&response, params, Meta::Write(response.index))
        }
        Route::DeploymentFail { deployment_id } => {
            let response = backend
                .update_deployment(DeploymentOperation::Fail { deployment_id })
                .await?;
            json_response(&response, params, Meta::Write(response.index))
        }
        Route::DeploymentPause { deployment_id } => {
            let request: drover_structs::DeploymentPauseRequest = decode_body(&body)?;
            check_deployment_id_of_body(&request.deployment_id, &deployment_id)?;
            let response = backend
                .update_deployment(DeploymentOperation::Pause(request))
                .await?;
            json_response(&response, params, Meta::Write(response.index))
        }
        Route::DeploymentAllocHealth { deployment_id } => {
            let request: drover_structs::DeploymentAllocHealthRequest = decode_body(&body)?;
            check_deployment_id_of_body(&request.deployment_id, &deployment_id)?;
            let response = backend
                .update_deployment(DeploymentOperation::AllocHealth(request))
                .await?;
            json_response(&response, params, Meta::Write(response.index))
        }
        Route::StatusLeader => {
            json_response(&backend.agent_info().server_addr, params, Meta::Read(1))
        }
        Route::StatusPeers => {
            let info = backend.agent_info();
            let peers: Vec<String> = Some(info.server_addr)
                .filter(|address| !address.is_empty())
                .into_iter()
                .collect();
            json_response(&peers, params, Meta::Read(1))
        }
        Route::Regions => json_response(&[backend.agent_info().region], params, Meta::Read(1)),
        Route::ClientAllocRestart { alloc_id } => {
            let request: AllocRestartRequest = decode_body(&body)?;
            let task = Some(request.task_name).filter(|task| !task.is_empty());
            backend
                .restart_alloc(&alloc_id, task, request.all_tasks)
                .await?;
            json_response(&GenericResponse { index: 0 }, params, Meta::None)
        }
        Route::ClientAllocSignal { alloc_id } => {
            let request: AllocSignalRequest = decode_body(&body)?;
            let task = Some(request.task).filter(|task| !task.is_empty());
            let signal = if request.signal.is_empty() {
                "SIGKILL".to_string()
            } else {
                request.signal
            };
            backend.signal_alloc(&alloc_id, task, signal).await?;
            json_response(&GenericResponse { index: 0 }, params, Meta::None)
        }
        Route::ClientAllocGc { alloc_id } => {
            backend.gc_alloc(&alloc_id).await?;
            Ok(StatusCode::OK.into_response())
        }
        Route::ClientStats => {
            let stats = backend.host_stats().await?;
            json_response(&stats, params, Meta::None)
        }
        Route::ClientAllocStats { alloc_id } => {
            let task = params.non_empty("task").map(str::to_string);
            let usage = backend.alloc_stats(&alloc_id, task).await?;
            json_response(&usage, params, Meta::None)
        }
        Route::FsLogs { alloc_id } => {
            let request = LogRequest::from_params(params)?;
            let alloc_dir = backend.alloc_dir(&alloc_id)?;
            if let Some(allocation) = client_view(backend, &alloc_id)? {
                check_task_in_alloc(&allocation, &request.task)?;
            }
            let content_type = if request.plain {
                "text/plain; charset=utf-8"
            } else {
                "application/json"
            };
            let finished =
                task_finished(Arc::clone(&state.backend), alloc_id, request.task.clone());
            let body: Body = stream_body(
                request.file_set(&alloc_dir),
                request.position(),
                state.options.follow_timing,
                Some(finished),
            );
            Ok(([(header::CONTENT_TYPE, content_type)], body).into_response())
        }
        Route::FsStream { alloc_id } => {
            let alloc_dir = backend.alloc_dir(&alloc_id)?;
            let requested = params
                .non_empty("path")
                .ok_or_else(|| ApiError::bad_request("must provide a file path"))?
                .to_string();
            let origin = match params.non_empty("origin") {
                None | Some("start") => Origin::Start,
                Some("end") => Origin::End,
                Some(_) => return Err(ApiError::bad_request("origin must be start or end")),
            };
            let position = StreamPosition {
                origin,
                offset: params.u64("offset", 0)?,
                follow: params.bool("follow", true)?,
                plain: params.bool("plain", false)?,
            };
            let lookup = requested.clone();
            let file = run_blocking(move || {
                crate::fs::open_regular_file(&alloc_dir, &lookup, crate::fs::Resolver::Openat2)
            })
            .await?;
            let files = FileSet::SingleFile {
                file: Arc::new(file),
                name: requested.trim_start_matches('/').to_string(),
            };
            let content_type = if position.plain {
                "text/plain; charset=utf-8"
            } else {
                "application/json"
            };
            let finished = alloc_finished(Arc::clone(&state.backend), alloc_id);
            let body = stream_body(files, position, state.options.follow_timing, Some(finished));
            Ok(([(header::CONTENT_TYPE, content_type)], body).into_response())
        }
        Route::ClientAllocChecks { alloc_id } => {
            if client_view(backend, &alloc_id)?.is_none() {
                return Err(ApiError::not_found(format!(
                    "Unknown allocation {alloc_id:?}"
                )));
            }
            let checks = backend.alloc_checks(&alloc_id)?.unwrap_or_default();
            json_response(&checks, params, Meta::None)
        }
        Route::FsList { alloc_id } => {
            let alloc_dir = backend.alloc_dir(&alloc_id)?;
            let path = params.non_empty("path").unwrap_or("/").to_string();
            let entries = run_blocking(move || crate::fs::list(&alloc_dir, &path)).await?;
            json_response(&entries, params, Meta::None)
        }
        Route::FsStat { alloc_id } => {
            let alloc_dir = backend.alloc_dir(&alloc_id)?;
            let path = params.get("path").unwrap_or("").to_string();
            let info = run_blocking(move || crate::fs::stat(&alloc_dir, &path)).await?;
            json_response(&info, params, Meta::None)
        }
        Route::FsCat { alloc_id } => {
            let alloc_dir = backend.alloc_dir(&alloc_id)?;
            let path = params.get("path").unwrap_or("").to_string();
            let range =
                run_blocking(move || crate::fs::read_at(&alloc_dir, &path, 0, None)).await?;
            Ok(streamed_file(range))
        }
        Route::NodeRegister => node_rpc::register(backend, params, body).await,
        Route::NodeUpdateStatus { node_id } => {
            node_rpc::update_status(backend, params, &node_id, body).await
        }
        Route::NodeGetClientAllocs { node_id } => {
            node_rpc::client_allocs(backend, params, &node_id).await
        }
        Route::AllocGetAllocs => node_rpc::get_allocs(backend, params, body).await,
        Route::NodeUpdateAlloc => node_rpc::update_alloc(backend, params, body).await,
        Route::ServiceRegistrationUpsert => services::upsert(backend, params, body).await,
        Route::ServiceRegistrationDeleteIds => services::delete_by_ids(backend, params, body).await,
        Route::ServiceList => services::list(backend, params).await,
        Route::ServiceRead { service_name } => services::read(backend, params, &service_name).await,
        Route::ServiceDelete { service_id, .. } => {
            services::delete(backend, params, &service_id).await
        }
        Route::AllocationServices { alloc_id } => {
            services::of_allocation(backend, params, &alloc_id).await
        }
        Route::JobServices { job_id } => services::of_job(backend, params, &job_id).await,
        Route::Search => search::prefix_search(backend, params, body).await,
        Route::SearchFuzzy => fuzzy::fuzzy_search(backend, params, body).await,
        Route::FsReadAt { alloc_id } => {
            let alloc_dir = backend.alloc_dir(&alloc_id)?;
            let path = params.get("path").unwrap_or("").to_string();
            let offset = params.u64("offset", 0)?;
            // Signed, as Nomad parses it: zero or below reads to the end (the CLI's
            // `alloc fs -tail` asks for `limit=-1`).
            let limit = u64::try_from(params.i64("limit", 0)?).unwrap_or(0);
            let range =
                run_blocking(move || crate::fs::read_at(&alloc_dir, &path, offset, Some(limit)))
                    .await?;
            Ok(streamed_file(range))
        }
    }
}

/// Read size of a streamed file body.
const FILE_CHUNK: usize = 64 * 1024;

/// A range of an open file as a body streamed in [`FILE_CHUNK`] pieces: memory stays flat
/// however large the range.
fn streamed_file(range: std::io::Take<std::fs::File>) -> Response {
    let limit = range.limit();
    let file = tokio::fs::File::from_std(range.into_inner());
    let chunks = tokio_util::io::ReaderStream::with_capacity(
        tokio::io::AsyncReadExt::take(file, limit),
        FILE_CHUNK,
    );
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        Body::from_stream(chunks),
    )
        .into_response()
}

async fn run_blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|error| ApiError::internal(format!("file access failed: {error}")))?
}

/// An allocation as a client endpoint sees it: as this agent's client runs it when it holds
/// it (live task states; the only view a client-only agent has), else as the store has it.
pub(crate) fn client_view<B: ApiBackend>(
    backend: &B,
    alloc_id: &str,
) -> Result<Option<Allocation>, ApiError> {
    match backend.client_allocation(alloc_id)? {
        Some(allocation) => Ok(Some(allocation)),
        None => backend.allocation(alloc_id),
    }
}

/// Whether a task has finished: it is `dead` (a task between restarts is `pending`), or its
/// allocation is gone.
fn task_finished<B: ApiBackend>(backend: Arc<B>, alloc_id: String, task: String) -> WriterFinished {
    Box::new(move || match client_view(&*backend, &alloc_id) {
        Ok(Some(allocation)) => allocation
            .task_states
            .get(&task)
            .is_some_and(|state| state.state == "dead"),
        Ok(None) => true,
        Err(_) => false,
    })
}

/// Whether an allocation has finished on its client (or is gone): its files stop growing.
fn alloc_finished<B: ApiBackend>(backend: Arc<B>, alloc_id: String) -> WriterFinished {
    Box::new(move || match client_view(&*backend, &alloc_id) {
        Ok(Some(allocation)) => allocation.client_terminal_status(),
        Ok(None) => true,
        Err(_) => false,
    })
}

fn check_task_in_alloc(allocation: &Allocation, task: &str) -> Result<(), ApiError> {
    let Some(job) = allocation.job.as_deref() else {
        return Ok(());
    };
    let known = job
        .task_groups
        .iter()
        .filter(|group| group.name == allocation.task_group)
        .flat_map(|group| group.tasks.iter())
        .any(|candidate| candidate.name == task);
    if known {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!("unknown task name {task:?}")))
    }
}
