//! Job scaling handlers: `GET /v1/job/<id>/scale` (Nomad's `JobScaleStatus`: each group's
//! count, its live non-canary allocations by state and health, its scaling events),
//! `PUT|POST /v1/job/<id>/scale` (a scaling action, answered as a job register is), and the
//! scaling policy reads `GET /v1/scaling/policies` (`job`, `type`, `prefix`; `namespace=*`
//! across namespaces, which the ACL layer filters) and `GET /v1/scaling/policy/<id>`.
//!
//! Not here: whether a scale is allowed (the backend's server).

use axum::body::Bytes;
use axum::response::Response;
use drover_structs::{
    ALLOC_CLIENT_STATUS_RUNNING, Allocation, Job, JobScaleStatus, SCALING_TARGET_JOB,
    ScalingPolicyListStub, ScalingRequest, TaskGroupScaleStatus,
};

use super::respond::{
    Meta, blocking_read, blocking_read_object, decode_body, json_response, object_response,
};
use crate::backend::{ApiBackend, Table};
use crate::error::ApiError;
use crate::params::QueryParams;

/// The scale status of `job` over its allocations and events (Nomad's `Job.ScaleStatus`).
fn scale_status(
    job: &Job,
    allocations: &[Allocation],
    events: Option<drover_structs::JobScalingEvents>,
) -> JobScaleStatus {
    let mut events = events
        .map(|events| events.scaling_events)
        .unwrap_or_default();
    let mut task_groups: std::collections::BTreeMap<String, TaskGroupScaleStatus> = job
        .task_groups
        .iter()
        .map(|group| {
            let status = TaskGroupScaleStatus {
                desired: group.count,
                events: events.remove(&group.name),
                ..TaskGroupScaleStatus::default()
            };
            (group.name.clone(), status)
        })
        .collect();
    for allocation in allocations {
        let deployment_status = allocation.deployment_status.as_ref();
        if deployment_status.is_some_and(|status| status.canary) || allocation.terminal_status() {
            continue;
        }
        let Some(group) = task_groups.get_mut(&allocation.task_group) else {
            continue;
        };
        group.placed += 1;
        if allocation.client_status == ALLOC_CLIENT_STATUS_RUNNING {
            group.running += 1;
        }
        match deployment_status.and_then(|status| status.healthy) {
            Some(true) => group.healthy += 1,
            Some(false) => group.unhealthy += 1,
            None => {}
        }
    }
    JobScaleStatus {
        job_id: job.id.clone(),
        namespace: job.namespace.clone(),
        job_create_index: job.create_index,
        job_modify_index: job.modify_index,
        job_stopped: job.stop,
        task_groups,
    }
}

pub(super) async fn job_scale_status<B: ApiBackend>(
    backend: &B,
    params: &QueryParams,
    job_id: &str,
) -> Result<Response, ApiError> {
    let namespace = params.namespace().to_string();
    let (index, status) = blocking_read(
        backend,
        params,
        &[Table::Jobs, Table::Allocs, Table::ScalingEvents],
        |backend| {
            let events = backend.job_scaling_events(&namespace, job_id)?;
            let Some(job) = backend.job(&namespace, job_id)? else {
                return Ok(None);
            };
            let allocations: Vec<Allocation> = backend
                .job_allocations(&namespace, job_id)?
                .into_iter()
                .filter(|allocation| {
                    allocation
                        .job
                        .as_ref()
                        .is_none_or(|alloc_job| alloc_job.create_index == job.create_index)
                })
                .collect();
            Ok(Some(scale_status(&job, &allocations, events)))
        },
    )
    .await?;
    let status = status.ok_or_else(|| ApiError::not_found("job not found"))?;
    json_response(&status, params, Meta::Read(index))
}

pub(super) async fn job_scale<B: ApiBackend>(
    backend: &B,
    params: &QueryParams,
    body: Bytes,
    job_id: &str,
) -> Result<Response, ApiError> {
    let namespace = params.namespace().to_string();
    let request: ScalingRequest = decode_body(&body)?;
    if let Some(target_job) = request.target.get(SCALING_TARGET_JOB)
        && !target_job.is_empty()
        && target_job != job_id
    {
        return Err(ApiError::bad_request("job ID in payload did not match URL"));
    }
    let response = backend.scale_job(&namespace, job_id, request).await?;
    json_response(&response, params, Meta::Write(response.index))
}

pub(super) async fn scaling_policies<B: ApiBackend>(
    backend: &B,
    params: &QueryParams,
) -> Result<Response, ApiError> {
    let namespace = params.namespace().to_string();
    let prefix = params.prefix().to_string();
    // As Nomad's `Scaling.ListPolicies` picks its index: an ID prefix alone, else the job with
    // the type, else the type; across namespaces (`*`) the ID prefix and the type.
    let mut job = params.get("job").unwrap_or("").to_owned();
    let mut policy_type = params.get("type").unwrap_or("").to_owned();
    if namespace == drover_structs::namespace::ALL_NAMESPACES {
        job.clear();
    } else if !prefix.is_empty() {
        job.clear();
        policy_type.clear();
    }
    let (index, list) = blocking_read(backend, params, &[Table::ScalingPolicies], |backend| {
        let policies = backend.scaling_policies(&namespace, &prefix, &job, &policy_type)?;
        Ok(policies
            .iter()
            .map(drover_structs::ScalingPolicy::stub)
            .collect::<Vec<ScalingPolicyListStub>>())
    })
    .await?;
    // Nomad's `Scaling.ListPolicies` and `GetPolicy` floor their index at 1.
    json_response(&list, params, Meta::Read(index.max(1)))
}

/// `GET /v1/scaling/policy/<id>` as Nomad's `Scaling.GetPolicy`: the policy's own
/// ModifyIndex, or the table's (floored at 1) while it does not exist, on the 404 too; a
/// blocking query answers when this policy changes.
pub(super) async fn scaling_policy<B: ApiBackend>(
    backend: &B,
    params: &QueryParams,
    policy_id: &str,
) -> Result<Response, ApiError> {
    let (index, policy) = blocking_read_object(
        backend,
        params,
        &[Table::ScalingPolicies],
        |backend| backend.scaling_policy(policy_id),
        |policy| policy.modify_index,
    )
    .await?;
    object_response(policy.as_ref(), params, index.max(1), "policy not found")
}
