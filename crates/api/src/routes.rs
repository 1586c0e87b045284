//! The `/v1` route table: a request's method and decoded path become a typed [`Route`], or the
//! error Nomad answers (404 with an empty body for an unknown path, 405 `Invalid method`).
//!
//! Job IDs may contain `/`: everything after `/v1/job/` up to a known suffix is the ID, after
//! percent-decoding (so `batch%2Fdispatch-1` and `batch/dispatch-1` name the same job).
//! Allocation, evaluation and node IDs are one segment. Not here: what a route does.

use axum::http::Method;

use crate::error::ApiError;

/// What a request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    JobList,
    /// `GET|POST /v1/jobs/statuses`: Nomad 1.8's jobs index.
    JobStatuses,
    JobRegister,
    JobParse,
    JobValidate,
    JobRead {
        job_id: String,
    },
    JobRegisterAt {
        job_id: String,
    },
    JobDeregister {
        job_id: String,
    },
    JobAllocations {
        job_id: String,
    },
    JobEvaluations {
        job_id: String,
    },
    JobVersions {
        job_id: String,
    },
    JobRevert {
        job_id: String,
    },
    JobStable {
        job_id: String,
    },
    /// `PUT|POST|DELETE /v1/job/<id>/versions/<name>/tag`: a version's tag applied or removed.
    JobVersionTag {
        job_id: String,
        name: String,
        apply: bool,
    },
    JobSummary {
        job_id: String,
    },
    JobDeployment {
        job_id: String,
    },
    JobDeployments {
        job_id: String,
    },
    /// `PUT|POST /v1/job/<id>/plan`: what registering the job would do.
    JobPlan {
        job_id: String,
    },
    JobEvaluate {
        job_id: String,
    },
    /// `POST /v1/job/<id>/periodic/force`.
    JobPeriodicForce {
        job_id: String,
    },
    /// `GET /v1/job/<id>/actions`: the task actions of the job's groups, flattened.
    JobActions {
        job_id: String,
    },
    /// `POST /v1/job/<id>/dispatch`.
    JobDispatch {
        job_id: String,
    },
    /// `/v1/job/<id>/submission?version=N`: the jobspec source of a version. Any method is
    /// routed (Nomad checks `version` before the method); `read` is whether it is a GET.
    JobSubmission {
        job_id: String,
        read: bool,
    },
    AllocationList,
    AllocationRead {
        alloc_id: String,
    },
    AllocationStop {
        alloc_id: String,
    },
    EvaluationList,
    EvaluationRead {
        eval_id: String,
    },
    EvaluationAllocations {
        eval_id: String,
    },
    NodeList,
    NodeRead {
        node_id: String,
    },
    NodeAllocations {
        node_id: String,
    },
    /// `POST /v1/node/<id>/drain|eligibility|purge|evaluate`.
    NodeDrain {
        node_id: String,
    },
    NodeEligibility {
        node_id: String,
    },
    NodePurge {
        node_id: String,
    },
    NodeEvaluate {
        node_id: String,
    },
    AgentSelf,
    AgentMembers,
    /// `PUT|POST /v1/agent/force-leave`.
    AgentForceLeave,
    AgentHealth,
    AgentServers,
    /// `PUT /v1/agent/servers?address=…`: sets the local client's servers.
    AgentServersUpdate,
    EventStream,
    DeploymentList,
    DeploymentRead {
        deployment_id: String,
    },
    DeploymentAllocations {
        deployment_id: String,
    },
    /// `PUT|POST /v1/deployment/promote|fail|pause|allocation-health/<id>`.
    DeploymentPromote {
        deployment_id: String,
    },
    DeploymentFail {
        deployment_id: String,
    },
    DeploymentPause {
        deployment_id: String,
    },
    DeploymentAllocHealth {
        deployment_id: String,
    },
    StatusLeader,
    StatusPeers,
    Regions,
    ClientAllocRestart {
        alloc_id: String,
    },
    ClientAllocSignal {
        alloc_id: String,
    },
    ClientAllocGc {
        alloc_id: String,
    },
    ClientAllocStats {
        alloc_id: String,
    },
    /// `/v1/client/stats`: the node's own usage.
    ClientStats,
    ClientAllocChecks {
        alloc_id: String,
    },
    FsLogs {
        alloc_id: String,
    },
    FsStream {
        alloc_id: String,
    },
    FsList {
        alloc_id: String,
    },
    FsStat {
        alloc_id: String,
    },
    FsCat {
        alloc_id: String,
    },
    FsReadAt {
        alloc_id: String,
    },
    /// The client↔server calls a remote client node makes (`crate::client_rpc`), named after
    /// Nomad's RPCs. `/v1/internal/node/register`: `Node.Register`.
    NodeRegister,
    /// `/v1/internal/node/<id>/update-status`: `Node.UpdateStatus`, the heartbeat.
    NodeUpdateStatus {
        node_id: String,
    },
    /// `/v1/internal/node/<id>/client-allocs`: `Node.GetClientAllocs`, a blocking query.
    NodeGetClientAllocs {
        node_id: String,
    },
    /// `/v1/internal/allocs/get`: `Alloc.GetAllocs`.
    AllocGetAllocs,
    /// `/v1/internal/node/update-alloc`: `Node.UpdateAlloc`, a batch of client statuses.
    NodeUpdateAlloc,
    /// `/v1/internal/services/upsert`: `ServiceRegistration.Upsert`, a client's registrations.
    ServiceRegistrationUpsert,
    /// `/v1/internal/services/delete`: a client's deregistrations, by ID.
    ServiceRegistrationDeleteIds,
    /// `/v1/services`: service names per namespace, with their tags.
    ServiceList,
    /// `GET /v1/service/<name>`: the registrations of one service.
    ServiceRead {
        service_name: String,
    },
    /// `DELETE /v1/service/<name>/<id>`: removes one registration.
    ServiceDelete {
        service_name: String,
        service_id: String,
    },
    AllocationServices {
        alloc_id: String,
    },
    JobServices {
        job_id: String,
    },
    /// `GET /v1/job/<id>/scale`: the scale status.
    JobScaleStatus {
        job_id: String,
    },
    /// `PUT|POST /v1/job/<id>/scale`: a scaling action.
    JobScale {
        job_id: String,
    },
    /// `GET /v1/scaling/policies`.
    ScalingPolicies,
    /// `GET /v1/scaling/policy/<id>`.
    ScalingPolicy {
        policy_id: String,
    },
    /// `PUT /v1/search`: prefix search over IDs.
    Search,
    /// `PUT /v1/search/fuzzy`: fuzzy search over names.
    SearchFuzzy,
}

/// Builds a deployment write's route from the deployment ID.
type DeploymentWrite = fn(String) -> Route;

/// `deployment/<write>/<id>`: the write's route and the rest of the path.
fn deployment_write(path: &str) -> Option<(DeploymentWrite, &str)> {
    let writes: [(&str, DeploymentWrite); 4] = [
        ("deployment/promote/", |deployment_id| {
            Route::DeploymentPromote { deployment_id }
        }),
        ("deployment/fail/", |deployment_id| Route::DeploymentFail {
            deployment_id,
        }),
        ("deployment/pause/", |deployment_id| {
            Route::DeploymentPause { deployment_id }
        }),
        ("deployment/allocation-health/", |deployment_id| {
            Route::DeploymentAllocHealth { deployment_id }
        }),
    ];
    writes
        .into_iter()
        .find_map(|(prefix, route)| path.strip_prefix(prefix).map(|rest| (route, rest)))
}

/// Job sub-resources, longest first so `/deployments` wins over `/deployment`. Suffixes Nomad
/// has but drover does not serve yet are listed too, so they are never read as part of an ID.
const JOB_SUFFIXES: &[&str] = &[
    "/periodic/force",
    "/allocations",
    "/actions",
    "/evaluations",
    "/deployments",
    "/deployment",
    "/submission",
    "/versions",
    "/evaluate",
    "/dispatch",
    "/services",
    "/summary",
    "/revert",
    "/stable",
    "/scale",
    "/tag",
    "/plan",
];

/// Which methods a route family takes.
#[derive(Clone, Copy)]
enum Allowed {
    Read,
    Write,
    ReadOrWrite,
}

fn check(method: &Method, allowed: Allowed) -> Result<(), ApiError> {
    let is_read = method == Method::GET;
    let is_write = method == Method::PUT || method == Method::POST;
    let accepted = match allowed {
        Allowed::Read => is_read,
        Allowed::Write => is_write,
        Allowed::ReadOrWrite => is_read || is_write,
    };
    if accepted {
        Ok(())
    } else {
        Err(ApiError::MethodNotAllowed)
    }
}

/// A single path segment: non-empty and without `/`.
fn one_segment(rest: &str) -> Result<String, ApiError> {
    if rest.is_empty() || rest.contains('/') {
        Err(ApiError::NoRoute)
    } else {
        Ok(rest.to_string())
    }
}

/// Splits `<id>/<suffix>` for objects whose ID is one segment.
fn segment_and_suffix(rest: &str) -> (&str, &str) {
    match rest.split_once('/') {
        Some((id, suffix)) => (id, suffix),
        None => (rest, ""),
    }
}

/// Routes a request. `raw_path` is the path as sent (percent-encoded); it is decoded here.
pub fn route(method: &Method, raw_path: &str) -> Result<Route, ApiError> {
    let decoded = percent_encoding::percent_decode_str(raw_path).decode_utf8_lossy();
    let Some(path) = decoded.strip_prefix("/v1/") else {
        return Err(ApiError::NoRoute);
    };
    use Allowed::*;
    let (route, allowed) = match path {
        "jobs" => {
            if method == Method::GET {
                (Route::JobList, Read)
            } else {
                (Route::JobRegister, Write)
            }
        }
        "jobs/parse" => (Route::JobParse, Write),
        "jobs/statuses" => {
            if method == Method::GET || method == Method::POST {
                (Route::JobStatuses, ReadOrWrite)
            } else {
                return Err(ApiError::MethodNotAllowed);
            }
        }
        "validate/job" => (Route::JobValidate, Write),
        "allocations" => (Route::AllocationList, Read),
        "evaluations" => (Route::EvaluationList, Read),
        "nodes" => (Route::NodeList, Read),
        "agent/self" => (Route::AgentSelf, Read),
        "agent/members" => (Route::AgentMembers, Read),
        "agent/force-leave" => (Route::AgentForceLeave, Write),
        "agent/health" => (Route::AgentHealth, Read),
        "agent/servers" => {
            if method == Method::GET {
                (Route::AgentServers, Read)
            } else {
                (Route::AgentServersUpdate, Write)
            }
        }
        "deployments" => (Route::DeploymentList, Read),
        "event/stream" => (Route::EventStream, Read),
        "status/leader" => (Route::StatusLeader, Read),
        "status/peers" => (Route::StatusPeers, Read),
        "regions" => (Route::Regions, Read),
        "client/stats" => (Route::ClientStats, Read),
        "internal/node/register" => (Route::NodeRegister, Write),
        "internal/node/update-alloc" => (Route::NodeUpdateAlloc, Write),
        "internal/allocs/get" => (Route::AllocGetAllocs, Write),
        "internal/services/upsert" => (Route::ServiceRegistrationUpsert, Write),
        "internal/services/delete" => (Route::ServiceRegistrationDeleteIds, Write),
        "services" => (Route::ServiceList, Read),
        "search" => (Route::Search, Write),
        "search/fuzzy" => (Route::SearchFuzzy, Write),
        "scaling/policies" => (Route::ScalingPolicies, Read),
        _ => {
            if let Some(rest) = path.strip_prefix("job/") {
                return job_route(method, rest);
            } else if let Some(rest) = path.strip_prefix("allocation/") {
                let (id, suffix) = segment_and_suffix(rest);
                let alloc_id = one_segment(id)?;
                match suffix {
                    "" => (Route::AllocationRead { alloc_id }, Read),
                    "stop" => (Route::AllocationStop { alloc_id }, Write),
                    "services" => (Route::AllocationServices { alloc_id }, Read),
                    _ => return Err(ApiError::NoRoute),
                }
            } else if let Some(rest) = path.strip_prefix("service/") {
                return service_route(method, rest);
            } else if let Some(rest) = path.strip_prefix("deployment/allocations/") {
                (
                    Route::DeploymentAllocations {
                        deployment_id: one_segment(rest)?,
                    },
                    Read,
                )
            } else if let Some((deployment_route, rest)) = deployment_write(path) {
                (deployment_route(one_segment(rest)?), Write)
            } else if let Some(rest) = path.strip_prefix("deployment/") {
                (
                    Route::DeploymentRead {
                        deployment_id: one_segment(rest)?,
                    },
                    Read,
                )
            } else if let Some(rest) = path.strip_prefix("scaling/policy/") {
                (
                    Route::ScalingPolicy {
                        policy_id: one_segment(rest)?,
                    },
                    Read,
                )
            } else if let Some(rest) = path.strip_prefix("evaluation/") {
                let (id, suffix) = segment_and_suffix(rest);
                let eval_id = one_segment(id)?;
                match suffix {
                    "" => (Route::EvaluationRead { eval_id }, Read),
                    "allocations" => (Route::EvaluationAllocations { eval_id }, Read),
                    _ => return Err(ApiError::NoRoute),
                }
            } else if let Some(rest) = path.strip_prefix("node/") {
                let (id, suffix) = segment_and_suffix(rest);
                let node_id = one_segment(id)?;
                match suffix {
                    "" => (Route::NodeRead { node_id }, Read),
                    "allocations" => (Route::NodeAllocations { node_id }, Read),
                    "drain" => (Route::NodeDrain { node_id }, Write),
                    "eligibility" => (Route::NodeEligibility { node_id }, Write),
                    "purge" => (Route::NodePurge { node_id }, Write),
                    "evaluate" => (Route::NodeEvaluate { node_id }, Write),
                    _ => return Err(ApiError::NoRoute),
                }
            } else if let Some(rest) = path.strip_prefix("internal/node/") {
                let (id, suffix) = segment_and_suffix(rest);
                let node_id = one_segment(id)?;
                match suffix {
                    "update-status" => (Route::NodeUpdateStatus { node_id }, Write),
                    "client-allocs" => (Route::NodeGetClientAllocs { node_id }, Read),
                    _ => return Err(ApiError::NoRoute),
                }
            } else if let Some(rest) = path.strip_prefix("client/allocation/") {
                let (id, suffix) = segment_and_suffix(rest);
                let alloc_id = one_segment(id)?;
                match suffix {
                    "restart" => (Route::ClientAllocRestart { alloc_id }, Write),
                    "signal" => (Route::ClientAllocSignal { alloc_id }, Write),
                    "gc" => (Route::ClientAllocGc { alloc_id }, ReadOrWrite),
                    "stats" => (Route::ClientAllocStats { alloc_id }, Read),
                    "checks" => (Route::ClientAllocChecks { alloc_id }, Read),
                    _ => return Err(ApiError::NoRoute),
                }
            } else if let Some(rest) = path.strip_prefix("client/fs/") {
                let (operation, alloc) = segment_and_suffix(rest);
                let alloc_id = one_segment(alloc)?;
                let route = match operation {
                    "logs" => Route::FsLogs { alloc_id },
                    "stream" => Route::FsStream { alloc_id },
                    "ls" => Route::FsList { alloc_id },
                    "stat" => Route::FsStat { alloc_id },
                    "cat" => Route::FsCat { alloc_id },
                    "readat" => Route::FsReadAt { alloc_id },
                    _ => return Err(ApiError::NoRoute),
                };
                (route, Read)
            } else {
                return Err(ApiError::NoRoute);
            }
        }
    };
    check(method, allowed)?;
    Ok(route)
}

/// `service/<name>` (GET) and `service/<name>/<id>` (DELETE), with Nomad's answers to the
/// rest: 400 for a missing name or ID or more segments, 405 for another method.
fn service_route(method: &Method, rest: &str) -> Result<Route, ApiError> {
    let parts: Vec<&str> = rest.split('/').collect();
    match parts.as_slice() {
        [name] => {
            if method != Method::GET {
                return Err(ApiError::MethodNotAllowed);
            }
            if name.is_empty() {
                return Err(ApiError::bad_request("missing service name"));
            }
            Ok(Route::ServiceRead {
                service_name: (*name).to_string(),
            })
        }
        [name, id] => {
            if method != Method::DELETE {
                return Err(ApiError::MethodNotAllowed);
            }
            if id.is_empty() {
                return Err(ApiError::bad_request("missing service id"));
            }
            Ok(Route::ServiceDelete {
                service_name: (*name).to_string(),
                service_id: (*id).to_string(),
            })
        }
        _ => Err(ApiError::bad_request("invalid URI")),
    }
}

/// The job of a task action websocket, `/v1/job/<job>/action` (not a [`Route`]: the websocket
/// is upgraded outside the dispatch).
pub fn job_action_path(path: &str) -> Option<&str> {
    let job_id = path.strip_prefix("/v1/job/")?.strip_suffix("/action")?;
    (!job_id.is_empty()).then_some(job_id)
}

/// `<job>/versions/<name>/tag`, split on `/` into exactly four parts as Nomad's agent does (a
/// job ID with a `/` cannot be tagged there either).
fn version_tag_route(method: &Method, rest: &str) -> Result<Route, ApiError> {
    let parts: Vec<&str> = rest.split('/').collect();
    let [job_id, _, name, _] = parts.as_slice() else {
        return Err(ApiError::not_found("invalid job tag endpoint"));
    };
    let apply = match *method {
        Method::PUT | Method::POST => true,
        Method::DELETE => false,
        _ => return Err(ApiError::MethodNotAllowed),
    };
    Ok(Route::JobVersionTag {
        job_id: (*job_id).to_owned(),
        name: (*name).to_owned(),
        apply,
    })
}

fn job_route(method: &Method, rest: &str) -> Result<Route, ApiError> {
    for suffix in JOB_SUFFIXES {
        if let Some(id) = rest.strip_suffix(suffix)
            && !id.is_empty()
        {
            if *suffix == "/tag" {
                return version_tag_route(method, rest);
            }
            let job_id = id.to_string();
            let (route, allowed) = match *suffix {
                "/allocations" => (Route::JobAllocations { job_id }, Allowed::Read),
                "/evaluations" => (Route::JobEvaluations { job_id }, Allowed::Read),
                "/versions" => (Route::JobVersions { job_id }, Allowed::Read),
                "/summary" => (Route::JobSummary { job_id }, Allowed::Read),
                "/deployment" => (Route::JobDeployment { job_id }, Allowed::Read),
                "/deployments" => (Route::JobDeployments { job_id }, Allowed::Read),
                "/evaluate" => (Route::JobEvaluate { job_id }, Allowed::Write),
                "/plan" => (Route::JobPlan { job_id }, Allowed::Write),
                "/periodic/force" => (Route::JobPeriodicForce { job_id }, Allowed::Write),
                "/dispatch" => (Route::JobDispatch { job_id }, Allowed::Write),
                "/revert" => (Route::JobRevert { job_id }, Allowed::Write),
                "/stable" => (Route::JobStable { job_id }, Allowed::Write),
                "/services" => (Route::JobServices { job_id }, Allowed::Read),
                "/actions" => (Route::JobActions { job_id }, Allowed::Read),
                "/submission" => {
                    return Ok(Route::JobSubmission {
                        job_id,
                        read: method == Method::GET,
                    });
                }
                "/scale" if method == Method::GET => {
                    (Route::JobScaleStatus { job_id }, Allowed::Read)
                }
                "/scale" => (Route::JobScale { job_id }, Allowed::Write),
                _ => return Err(ApiError::NoRoute),
            };
            check(method, allowed)?;
            return Ok(route);
        }
    }
    if rest.is_empty() {
        return Err(ApiError::NoRoute);
    }
    let job_id = rest.to_string();
    match *method {
        Method::GET => Ok(Route::JobRead { job_id }),
        Method::PUT | Method::POST => Ok(Route::JobRegisterAt { job_id }),
        Method::DELETE => Ok(Route::JobDeregister { job_id }),
        _ => Err(ApiError::MethodNotAllowed),
    }
}

#[cfg(test)]
#[allow(clippy::expect_used, clippy::unwrap_used)] // a failed expectation is a failed test
mod tests {
    use super::*;

    fn job(id: &str) -> String {
        id.to_string()
    }

    #[test]
    fn job_ids_with_slashes_run_up_to_the_known_suffix() {
        assert_eq!(
            route(
                &Method::GET,
                "/v1/job/batch/dispatch-1700000000-abcd1234/allocations"
            ),
            Ok(Route::JobAllocations {
                job_id: job("batch/dispatch-1700000000-abcd1234")
            })
        );
        assert_eq!(
            route(&Method::GET, "/v1/job/cron%2Fperiodic-1700000000"),
            Ok(Route::JobRead {
                job_id: job("cron/periodic-1700000000")
            })
        );
        assert_eq!(
            route(&Method::GET, "/v1/job/a%2Fb/deployments"),
            Ok(Route::JobDeployments { job_id: job("a/b") })
        );
        assert_eq!(
            route(&Method::GET, "/v1/job/a/b/deployment"),
            Ok(Route::JobDeployment { job_id: job("a/b") })
        );
        assert_eq!(
            route(&Method::DELETE, "/v1/job/web%20app"),
            Ok(Route::JobDeregister {
                job_id: job("web app")
            })
        );
    }

    #[test]
    fn writes_take_put_and_post_and_wrong_methods_get_405() {
        for method in [Method::PUT, Method::POST] {
            assert_eq!(route(&method, "/v1/jobs"), Ok(Route::JobRegister));
            assert_eq!(
                route(&method, "/v1/allocation/abc/stop"),
                Ok(Route::AllocationStop {
                    alloc_id: "abc".into()
                })
            );
        }
        assert_eq!(
            route(&Method::DELETE, "/v1/jobs"),
            Err(ApiError::MethodNotAllowed)
        );
        assert_eq!(
            route(&Method::GET, "/v1/job/x/evaluate"),
            Err(ApiError::MethodNotAllowed)
        );
        assert_eq!(
            route(&Method::POST, "/v1/nodes"),
            Err(ApiError::MethodNotAllowed)
        );
        assert_eq!(
            route(&Method::PATCH, "/v1/job/x"),
            Err(ApiError::MethodNotAllowed)
        );
        assert_eq!(
            route(&Method::GET, "/v1/client/allocation/abc/gc"),
            Ok(Route::ClientAllocGc {
                alloc_id: "abc".into()
            })
        );
    }

    #[test]
    fn job_submissions_take_any_method_and_say_which() {
        assert_eq!(
            route(&Method::GET, "/v1/job/a%2Fb/submission"),
            Ok(Route::JobSubmission {
                job_id: job("a/b"),
                read: true
            })
        );
        assert_eq!(
            route(&Method::DELETE, "/v1/job/web/submission"),
            Ok(Route::JobSubmission {
                job_id: job("web"),
                read: false
            })
        );
    }

    #[test]
    fn the_client_rpcs_are_named_after_nomads() {
        assert_eq!(
            route(&Method::PUT, "/v1/internal/node/register"),
            Ok(Route::NodeRegister)
        );
        assert_eq!(
            route(&Method::PUT, "/v1/internal/node/n1/update-status"),
            Ok(Route::NodeUpdateStatus {
                node_id: "n1".into()
            })
        );
        assert_eq!(
            route(&Method::GET, "/v1/internal/node/n1/client-allocs"),
            Ok(Route::NodeGetClientAllocs {
                node_id: "n1".into()
            })
        );
        assert_eq!(
            route(&Method::POST, "/v1/internal/allocs/get"),
            Ok(Route::AllocGetAllocs)
        );
        assert_eq!(
            route(&Method::PUT, "/v1/internal/node/update-alloc"),
            Ok(Route::NodeUpdateAlloc)
        );
        assert_eq!(
            route(&Method::GET, "/v1/internal/node/register"),
            Err(ApiError::MethodNotAllowed)
        );
        assert_eq!(
            route(&Method::GET, "/v1/internal/node/n1/nope"),
            Err(ApiError::NoRoute)
        );
    }

    #[test]
    fn node_writes_are_routed_for_put_and_post_only() {
        assert_eq!(
            route(&Method::POST, "/v1/node/n1/drain"),
            Ok(Route::NodeDrain {
                node_id: "n1".into()
            })
        );
        assert_eq!(
            route(&Method::PUT, "/v1/node/n1/purge"),
            Ok(Route::NodePurge {
                node_id: "n1".into()
            })
        );
        assert_eq!(
            route(&Method::GET, "/v1/node/n1/eligibility"),
            Err(ApiError::MethodNotAllowed)
        );
    }

    #[test]
    fn unknown_paths_and_unserved_suffixes_are_no_route() {
        for path in [
            "/",
            "/v2/jobs",
            "/v1/nope",
            "/v1/job/",
            "/v1/allocation/a/b/stop",
            "/v1/client/fs/nope/abc",
            "/v1/node/n/nope",
        ] {
            assert_eq!(route(&Method::GET, path), Err(ApiError::NoRoute), "{path}");
        }
    }
}
