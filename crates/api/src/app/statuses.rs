//! `GET|POST /v1/jobs/statuses`: Nomad 1.8's jobs index (`Job.Statuses`), each job with its
//! allocations' states, the sum of its group counts, its children's statuses and its latest
//! deployment, most recently modified first.
//!
//! As Nomad: pages are walked by `ModifyIndex` (the `next_token` is the modify index of the
//! first job of the next page; `reverse=true` lists oldest first), `filter` sees the whole job,
//! children are left out unless `include_children=true`, and a body `{"Jobs": [{"ID",
//! "Namespace"}]}` asks for those jobs only (across namespaces when the query names none).
//! A blocking query (`index=N`) answers once the highest modify index among the page's jobs,
//! allocations and deployments passes N, or the page's set of jobs changed, so a change off
//! the page wakes nobody.

use std::collections::BTreeSet;

use axum::body::Bytes;
use axum::response::Response;
use drover_structs::namespace::ALL_NAMESPACES;
use drover_structs::{DEFAULT_NAMESPACE, Job};
use serde::{Deserialize, Serialize};

use super::respond::{decode_value, page_response};
use crate::backend::{ApiBackend, Table};
use crate::error::ApiError;
use crate::paginate::{ListOptions, TokenKind, TokenParts, page, to_datum};
use crate::params::QueryParams;

/// One job of the index (Nomad's `JobStatusesJob`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
struct StatusesJob {
    #[serde(rename = "ID")]
    id: String,
    namespace: String,
    name: String,
    r#type: String,
    node_pool: String,
    datacenters: Vec<String>,
    priority: i64,
    version: u64,
    submit_time: i64,
    modify_index: u64,
    allocs: Option<Vec<StatusesAlloc>>,
    group_count_sum: i64,
    child_statuses: Option<Vec<String>>,
    #[serde(rename = "ParentID")]
    parent_id: String,
    latest_deployment: Option<StatusesDeployment>,
    stop: bool,
    is_pack: bool,
    status: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
struct StatusesAlloc {
    #[serde(rename = "ID")]
    id: String,
    group: String,
    client_status: String,
    #[serde(rename = "NodeID")]
    node_id: String,
    deployment_status: StatusesAllocDeployment,
    job_version: u64,
    #[serde(rename = "FollowupEvalID")]
    followup_eval_id: String,
    has_paused_task: bool,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
struct StatusesAllocDeployment {
    canary: bool,
    healthy: Option<bool>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
struct StatusesDeployment {
    #[serde(rename = "ID")]
    id: String,
    is_active: bool,
    job_version: u64,
    status: String,
    status_description: String,
    all_auto_promote: bool,
    requires_promotion: bool,
}

/// The optional body: the jobs asked for.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "PascalCase")]
struct StatusesRequest {
    jobs: Vec<NamespacedId>,
    include_children: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "PascalCase")]
struct NamespacedId {
    #[serde(rename = "ID")]
    id: String,
    namespace: String,
}

/// A job's entry and the highest modify index among it, its allocations, children and latest
/// deployment.
fn status_of<B: ApiBackend>(backend: &B, job: &Job) -> Result<(StatusesJob, u64), ApiError> {
    let mut highest = job.modify_index;
    let mut entry = StatusesJob {
        id: job.id.clone(),
        namespace: job.namespace.clone(),
        name: job.name.clone(),
        r#type: job.r#type.clone(),
        node_pool: job.node_pool.clone(),
        datacenters: job.datacenters.clone(),
        priority: job.priority,
        version: job.version,
        submit_time: job.submit_time,
        modify_index: job.modify_index,
        allocs: None,
        group_count_sum: job.task_groups.iter().map(|group| group.count).sum(),
        child_statuses: None,
        parent_id: job.parent_id.clone(),
        latest_deployment: None,
        stop: job.stop,
        is_pack: job.meta.contains_key("pack.name"),
        status: job.status.clone(),
    };
    if job.is_parameterized() || job.is_periodic() {
        let mut statuses = Vec::new();
        for child in backend.jobs(&job.namespace, &job.id)? {
            if child.parent_id != job.id {
                continue;
            }
            highest = highest.max(child.modify_index);
            statuses.push(child.status.clone());
        }
        entry.child_statuses = Some(statuses);
        return Ok((entry, highest));
    }
    let mut allocations = backend.job_allocations(&job.namespace, &job.id)?;
    allocations.sort_by_key(|allocation| std::cmp::Reverse(allocation.create_index));
    let mut allocs = Vec::new();
    for allocation in allocations {
        highest = highest.max(allocation.modify_index);
        let status = allocation.deployment_status.as_ref();
        allocs.push(StatusesAlloc {
            id: allocation.id.clone(),
            group: allocation.task_group.clone(),
            client_status: allocation.client_status.clone(),
            node_id: allocation.node_id.clone(),
            deployment_status: StatusesAllocDeployment {
                canary: status.is_some_and(|status| status.canary),
                healthy: status.and_then(|status| status.healthy),
            },
            job_version: allocation.job.as_ref().map_or(0, |job| job.version),
            followup_eval_id: allocation.followup_eval_id.clone(),
            // Pausing tasks is an Enterprise feature: never paused here.
            has_paused_task: false,
        });
    }
    entry.allocs = (!allocs.is_empty()).then_some(allocs);
    let latest = backend
        .job_deployments(&job.namespace, &job.id)?
        .into_iter()
        .max_by_key(|deployment| deployment.create_index);
    if let Some(deployment) = latest {
        highest = highest.max(deployment.modify_index);
        entry.latest_deployment = Some(StatusesDeployment {
            is_active: deployment.active(),
            all_auto_promote: deployment.has_auto_promote(),
            requires_promotion: deployment.requires_promotion(),
            id: deployment.id,
            job_version: deployment.job_version,
            status: deployment.status,
            status_description: deployment.status_description,
        });
    }
    Ok((entry, highest))
}

/// One read of the index: the page, its index and next token, and the set of jobs on it.
type Read = (Vec<StatusesJob>, u64, String, BTreeSet<(String, String)>);

fn read_page<B: ApiBackend>(
    backend: &B,
    namespace: &str,
    wanted: &Option<BTreeSet<(String, String)>>,
    include_children: bool,
    oldest_first: bool,
    options: &ListOptions,
) -> Result<Read, ApiError> {
    let mut jobs = backend.jobs(namespace, "")?;
    // Newest change first unless `reverse` (Nomad inverts the table's order).
    jobs.sort_by_key(|job| job.modify_index);
    if !oldest_first {
        jobs.reverse();
    }
    let selected = jobs.into_iter().filter(|job| {
        (include_children || job.parent_id.is_empty())
            && wanted
                .as_ref()
                .is_none_or(|wanted| wanted.contains(&(job.namespace.clone(), job.id.clone())))
    });
    let mut highest = 0u64;
    let mut on_page = BTreeSet::new();
    let (list, next_token) = page(
        selected,
        options,
        TokenKind::ModifyIndex,
        |job| TokenParts {
            namespace: &job.namespace,
            id: &job.id,
            create_index: job.modify_index,
        },
        to_datum,
        |job| {
            let (entry, job_highest) = status_of(backend, &job)?;
            highest = highest.max(job_highest);
            on_page.insert((job.namespace.clone(), job.id.clone()));
            Ok(entry)
        },
    )?;
    Ok((list, highest, next_token, on_page))
}

pub(super) async fn job_statuses<B: ApiBackend>(
    backend: &B,
    params: &QueryParams,
    body: Bytes,
) -> Result<Response, ApiError> {
    let mut include_children = match params.non_empty("include_children") {
        None => false,
        Some("true") | Some("1") | Some("t") | Some("T") | Some("TRUE") | Some("True") => true,
        Some("false") | Some("0") | Some("f") | Some("F") | Some("FALSE") | Some("False") => false,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "strconv.ParseBool: parsing {other:?}: invalid syntax"
            )));
        }
    };
    let mut namespace = params.namespace().to_string();
    let mut wanted = None;
    if !body.iter().all(u8::is_ascii_whitespace) {
        let value: serde_json::Value = serde_json::from_slice(&body)
            .map_err(|error| ApiError::bad_request(format!("error decoding request: {error}")))?;
        let request: StatusesRequest = decode_value(value)
            .map_err(|error| ApiError::bad_request(format!("error decoding request: {error}")))?;
        if request.jobs.is_empty() {
            return Err(ApiError::bad_request("no jobs in request"));
        }
        let set: BTreeSet<(String, String)> = request
            .jobs
            .into_iter()
            .map(|job| {
                let namespace = if job.namespace.is_empty() {
                    DEFAULT_NAMESPACE.to_owned()
                } else {
                    job.namespace
                };
                (namespace, job.id)
            })
            .collect();
        let namespaces: BTreeSet<&String> = set.iter().map(|(namespace, _)| namespace).collect();
        namespace = match namespaces.into_iter().collect::<Vec<_>>().as_slice() {
            [only] => (*only).clone(),
            _ => ALL_NAMESPACES.to_owned(),
        };
        wanted = Some(set);
        include_children |= request.include_children;
    }
    let mut options = ListOptions::from_params(params)?;
    let oldest_first = options.reverse;
    // The walk compares tokens in the list's own direction: newest first is Nomad's reversed
    // walk. With named jobs, the page holds them all (Nomad sets per_page to their number).
    options.reverse = !oldest_first;
    if let Some(wanted) = &wanted {
        options.per_page = i32::try_from(wanted.len()).unwrap_or(i32::MAX);
    }
    let blocking = params.blocking()?;
    let tables = [Table::Jobs, Table::Allocs, Table::Deployments];
    let deadline = tokio::time::Instant::now() + blocking.wait_with_jitter(rand::random::<f64>());
    let mut previous: Option<BTreeSet<(String, String)>> = None;
    loop {
        let seen = backend.table_index(&tables);
        let (list, mut index, next_token, on_page) = read_page(
            backend,
            &namespace,
            &wanted,
            include_children,
            oldest_first,
            &options,
        )?;
        if previous
            .as_ref()
            .is_some_and(|previous| *previous != on_page)
        {
            // The page's jobs changed (a job came or went): answer at the jobs' index.
            index = backend.table_index(&[Table::Jobs]);
        }
        let index = index.max(1);
        if blocking.min_index == 0
            || index > blocking.min_index
            || tokio::time::Instant::now() >= deadline
        {
            return page_response(&list, params, index, &next_token);
        }
        previous = Some(on_page);
        backend.wait_for_change(&tables, seen, deadline).await;
    }
}
