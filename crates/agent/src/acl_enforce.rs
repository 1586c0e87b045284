//! ACL enforcement for every HTTP endpoint, in one place: [`required`] maps a request (method,
//! path, namespace) to the [`Permission`] Nomad asks of it, and the [`enforce`] layer resolves
//! the caller's token (`X-Nomad-Token` or `Authorization: Bearer`) and answers 403
//! `Permission denied` (or `ACL token not found` / `ACL token expired`) before any handler
//! runs. A request without a token is held to the `anonymous` policy; a management token may
//! do everything. The layer is installed only when `acl { enabled = true }`: with ACLs off
//! every request behaves as before.
//!
//! Workload identities reach the variables endpoints, whose handler applies Nomad's implicit
//! job paths, and the service catalog's reads in their own namespace (a template's
//! `nomadService`); elsewhere a workload identity holds the policies attached to its job,
//! group or task (Nomad's `JobACL`), and nothing without any.
//!
//! Not here: what a capability means (`drover_server::acl`), the `/v1/acl` endpoints' own
//! filtering of what a non-management token sees (`acl_http`).

use std::sync::{Arc, Mutex, PoisonError};

use axum::body::{Body, to_bytes};
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use drover_api::params::QueryParams;
use drover_api::routes::{Route, route};
use drover_server::Clock;
use drover_server::acl::policy::{capability, node_pool_capability, variables_capability};
use drover_server::acl::{Acl, anonymous_acl, token_acl, workload_acl};
use drover_server::identity::{RequestIdentity, request_token, resolve_token_at};
use drover_server::keyring::Keyring;
use drover_state::{Event, EventAccess, StateStore, Table, Topic};
use drover_structs::namespace::ALL_NAMESPACES;

/// What a request needs of the caller's ACL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Permission {
    /// Anyone, token or not (health, leader, bootstrap, the ACL endpoints that filter).
    Anyone,
    /// A namespace capability in a namespace.
    Namespace {
        namespace: String,
        capability: &'static str,
    },
    /// A variables capability on a path in a namespace (workload identities: their handler).
    Variable {
        namespace: String,
        path: String,
        operation: &'static str,
    },
    /// Reading the service catalog in a namespace: `read-job` for ACL tokens, and any
    /// workload identity of that namespace (Nomad's mixed-auth service endpoints).
    ServiceRead {
        namespace: String,
    },
    /// A node pool capability on a pool (Nomad's `AllowNodePoolOperation`).
    NodePool {
        pool: String,
        capability: &'static str,
    },
    /// A pool's nodes: node read and the pool's `read`.
    NodePoolNodes {
        pool: String,
    },
    /// The pool list: anyone may ask; the answer keeps the pools the caller may read.
    NodePoolList,
    /// Reading scaling policies in a namespace: the scaling capability (`list-scaling-policies`
    /// or `read-scaling-policy`), or both `list-jobs` and `read-job` (Nomad's scaling
    /// endpoint).
    ScalingPolicyRead {
        namespace: String,
        capability: &'static str,
    },
    NodeRead,
    NodeWrite,
    AgentRead,
    AgentWrite,
    OperatorRead,
    OperatorWrite,
    /// Only a management token.
    Management,
    /// The event stream: each topic asked for (by name; `*` when none is) needs what Nomad's
    /// `validateNsOp` asks of it in each namespace (`namespace=*`: every namespace there is, as
    /// Nomad's `validateACL`, where the store is at hand).
    EventStream {
        namespaces: Vec<String>,
        topics: Vec<String>,
    },
}

/// The topic names an event stream request asks for, as Nomad's `parseEventTopics` reads them:
/// the part before `:` of each `topic`, and `*` (every topic) when there is none. `None` when
/// a topic does not parse: the handler answers its 400 before any ACL check, as Nomad's HTTP
/// layer does.
fn event_topics(params: &QueryParams) -> Option<Vec<String>> {
    let mut topics = Vec::new();
    for query in params.get_all("topic") {
        let mut parts = query.split(':');
        let name = parts.next().unwrap_or_default();
        if parts.count() > 1 {
            return None;
        }
        topics.push(name.to_owned());
    }
    if topics.is_empty() {
        topics.push("*".to_owned());
    }
    Some(topics)
}

/// Whether `acl` may read `topic` in `namespace` (Nomad's `validateNsOp`): the job topics need
/// `read-job`, nodes node read, the operator topic operator read, variables any variables
/// rule in the namespace (each event is then filtered by path); node pools, `*`, the ACL
/// topics and any topic Nomad does not know need a management token.
fn allows_event_topic(acl: &Acl, namespace: &str, topic: &str) -> bool {
    match topic {
        "Deployment" | "Evaluation" | "Allocation" | "Job" | "Service" | "CSIPlugin" => {
            acl.allow_namespace_operation(namespace, capability::READ_JOB)
        }
        "HostVolume" => acl.allow_namespace_operation(namespace, "host-volume-read"),
        "CSIVolume" => acl.allow_namespace_operation(namespace, capability::CSI_READ_VOLUME),
        "Node" => acl.allow_node_read(),
        "Operator" => acl.allow_operator_read(),
        "Variable" => acl.allow_variable_search(namespace),
        _ => acl.is_management(),
    }
}

/// Where a request's namespace comes from: the query's `namespace`, else `default`.
fn query_namespace(params: &QueryParams) -> String {
    params.namespace().to_owned()
}

/// Where [`required`] finds the namespace of an allocation or an evaluation a request names:
/// a server's state store, or a client-only agent's own allocations.
pub trait NamespaceLookup {
    fn alloc_namespace(&self, alloc_id: &str) -> Option<String>;
    fn eval_namespace(&self, eval_id: &str) -> Option<String>;
    /// Every namespace's name, where the namespaces are known (a server's store); `None`
    /// elsewhere, where `*` is checked as it is.
    fn namespace_names(&self) -> Option<Vec<String>> {
        None
    }
}

impl NamespaceLookup for StateStore {
    fn alloc_namespace(&self, alloc_id: &str) -> Option<String> {
        self.alloc(alloc_id).map(|alloc| alloc.namespace.clone())
    }

    fn eval_namespace(&self, eval_id: &str) -> Option<String> {
        self.eval(eval_id).map(|eval| eval.namespace.clone())
    }

    fn namespace_names(&self) -> Option<Vec<String>> {
        Some(
            self.namespaces("")
                .iter()
                .map(|namespace| namespace.name.clone())
                .collect(),
        )
    }
}

/// The namespace of the allocation `alloc_id`, else the query's (the handler answers 404).
fn alloc_namespace(lookup: &dyn NamespaceLookup, alloc_id: &str, params: &QueryParams) -> String {
    lookup
        .alloc_namespace(alloc_id)
        .unwrap_or_else(|| query_namespace(params))
}

fn eval_namespace(lookup: &dyn NamespaceLookup, eval_id: &str, params: &QueryParams) -> String {
    lookup
        .eval_namespace(eval_id)
        .unwrap_or_else(|| query_namespace(params))
}

/// The pool a node pool upsert names in its body (`Name`); "" when it names none (the
/// handler answers the bad body).
fn upserted_pool(body: &[u8]) -> String {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|value| {
            value
                .get("Name")
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_default()
}

/// The namespace a job registration names in its body (`Job.Namespace`), else the query's.
fn registered_namespace(body: &[u8], params: &QueryParams) -> String {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|value| {
            value
                .get("Job")
                .and_then(|job| job.get("Namespace"))
                .and_then(|namespace| namespace.as_str())
                .filter(|namespace| !namespace.is_empty())
                .map(str::to_owned)
        })
        .unwrap_or_else(|| query_namespace(params))
}

/// The namespace `/v1/jobs/statuses` reads, as Nomad's endpoint picks it: with a body naming
/// jobs, their one namespace, or every namespace when they name several and the query names
/// none (or `default`); otherwise the query's.
fn statuses_namespace(body: &[u8], params: &QueryParams) -> String {
    let query = query_namespace(params);
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(body) else {
        return query;
    };
    let Some(jobs) = value
        .as_object()
        .and_then(|object| {
            object
                .iter()
                .find(|(key, _)| key.eq_ignore_ascii_case("jobs"))
        })
        .and_then(|(_, jobs)| jobs.as_array())
    else {
        return query;
    };
    let namespaces: std::collections::BTreeSet<String> = jobs
        .iter()
        .map(|job| {
            job.as_object()
                .and_then(|object| {
                    object
                        .iter()
                        .find(|(key, _)| key.eq_ignore_ascii_case("namespace"))
                })
                .and_then(|(_, namespace)| namespace.as_str())
                .filter(|namespace| !namespace.is_empty())
                .unwrap_or(drover_structs::DEFAULT_NAMESPACE)
                .to_owned()
        })
        .collect();
    match namespaces.len() {
        1 => namespaces.into_iter().next().unwrap_or(query),
        _ if query == drover_structs::DEFAULT_NAMESPACE => ALL_NAMESPACES.to_owned(),
        _ => query,
    }
}

/// The permission table: what each request needs, as Nomad's endpoints check it.
pub fn required(
    state: &dyn NamespaceLookup,
    method: &Method,
    path: &str,
    params: &QueryParams,
    body: &[u8],
) -> Permission {
    use Permission::*;
    let namespace = |capability: &'static str| Namespace {
        namespace: query_namespace(params),
        capability,
    };
    let in_alloc = |alloc_id: &str, capability: &'static str| Namespace {
        namespace: alloc_namespace(state, alloc_id, params),
        capability,
    };
    // Endpoints outside the `/v1` route table.
    if !path.starts_with("/v1/") || path.starts_with("/v1/acl/") {
        // `/.well-known/*` is public; `/v1/acl/*` handlers check and filter themselves, but
        // writing policies and roles and listing, writing or deleting other tokens is for
        // management only. A method the endpoint does not take is its handler's 405, as
        // Nomad's HTTP handlers answer it before any ACL check.
        return if acl_route_needs_management(method, path) {
            Management
        } else {
            Anyone
        };
    }
    if path.starts_with("/v1/internal/acl/") {
        // A bearer asks who it is and what it holds; the handlers resolve it themselves.
        return Anyone;
    }
    if path == "/v1/namespaces" || path == "/v1/namespace" || path.starts_with("/v1/namespace/") {
        // Reading checks and filters in the handler (any capability in the namespace);
        // writing and deleting are for management only, as Nomad.
        return if method == Method::GET {
            Anyone
        } else {
            Management
        };
    }
    if path == "/v1/vars" {
        return Variable {
            namespace: query_namespace(params),
            path: params.prefix().to_owned(),
            operation: "list",
        };
    }
    if let Some(variable) = path.strip_prefix("/v1/var/") {
        let operation = match *method {
            Method::GET => "read",
            Method::DELETE => "destroy",
            _ => "write",
        };
        return Variable {
            namespace: query_namespace(params),
            path: variable.to_owned(),
            operation,
        };
    }
    if path.starts_with("/v1/operator/") {
        // The keyring: management only, as Nomad.
        return Management;
    }
    // Node pools, as Nomad's node pool endpoints check them; a method an endpoint does not
    // take is its handler's 405.
    if path == "/v1/node/pools" {
        return match *method {
            Method::GET => NodePoolList,
            Method::PUT | Method::POST => NodePool {
                pool: upserted_pool(body),
                capability: node_pool_capability::WRITE,
            },
            _ => Anyone,
        };
    }
    if let Some(rest) = path.strip_prefix("/v1/node/pool/") {
        let (pool, tail) = rest.split_once('/').unwrap_or((rest, ""));
        let pool = pool.to_owned();
        return match (tail, method.clone()) {
            ("", Method::GET) | ("jobs", Method::GET) => NodePool {
                pool,
                capability: node_pool_capability::READ,
            },
            ("", Method::PUT | Method::POST) => NodePool {
                pool,
                capability: node_pool_capability::WRITE,
            },
            ("", Method::DELETE) => NodePool {
                pool,
                capability: node_pool_capability::DELETE,
            },
            ("nodes", Method::GET) => NodePoolNodes { pool },
            _ => Anyone,
        };
    }
    if path == "/v1/system/gc" || path == "/v1/system/reconcile/summaries" {
        return Management;
    }
    if path == "/v1/client/gc" {
        return NodeWrite;
    }
    if path == crate::node_meta_http::NODE_META_PATH {
        return if method == Method::GET {
            NodeRead
        } else {
            NodeWrite
        };
    }
    if path == "/v1/metrics" || path == "/v1/agent/health" {
        return Anyone;
    }
    if path == "/v1/agent/monitor" {
        return AgentRead;
    }
    if path == "/v1/agent/join" || path == "/v1/agent/reload" {
        return AgentWrite;
    }
    // Nomad's `Agent.Profile` wants agent:write (its debug check then passes for any token
    // with agent read or write).
    if path.starts_with("/v1/agent/pprof/") {
        return AgentWrite;
    }
    // The mesh CA's roots are public; a leaf's handler checks the workload identity itself
    // (its allocation must run the service's sidecar); proxy counters come from the local
    // sidecars over their allocation's socket.
    if path.starts_with("/v1/agent/connect/") {
        return Anyone;
    }
    // Intentions: read as the catalog is (`read-job`, or a workload identity of the
    // namespace: sidecars follow them); written with `submit-job` in the destination's
    // namespace, Nomad's closest rule to Consul's `service:write` on the destination.
    if path == "/v1/connect/intentions" || path.starts_with("/v1/connect/intentions/") {
        let destination_namespace = params
            .get("destination")
            .or_else(|| params.get("name"))
            .and_then(|destination| destination.split_once('/'))
            .map(|(namespace, _)| namespace.to_owned())
            .unwrap_or_else(|| query_namespace(params));
        return if *method == Method::GET {
            ServiceRead {
                namespace: destination_namespace,
            }
        } else {
            Namespace {
                namespace: destination_namespace,
                capability: capability::SUBMIT_JOB,
            }
        };
    }
    if path.starts_with("/v1/client/allocation/") && path.ends_with("/exec") {
        let alloc_id = path
            .trim_start_matches("/v1/client/allocation/")
            .trim_end_matches("/exec");
        return in_alloc(alloc_id, capability::ALLOC_EXEC);
    }
    if drover_api::routes::job_action_path(path).is_some() {
        // A task action is an exec in the allocation the query names.
        return in_alloc(params.get("allocID").unwrap_or(""), capability::ALLOC_EXEC);
    }
    let Ok(route) = route(method, path) else {
        // Unknown routes answer their 404 or 405 whoever asks.
        return Anyone;
    };
    match route {
        Route::JobList => namespace(capability::LIST_JOBS),
        Route::JobStatuses => Namespace {
            namespace: statuses_namespace(body, params),
            capability: capability::READ_JOB,
        },
        Route::JobRegister | Route::JobRegisterAt { .. } => Namespace {
            namespace: registered_namespace(body, params),
            capability: capability::SUBMIT_JOB,
        },
        Route::JobPlan { .. } => Namespace {
            namespace: registered_namespace(body, params),
            capability: capability::SUBMIT_JOB,
        },
        Route::JobParse => namespace(capability::PARSE_JOB),
        Route::JobValidate => namespace(capability::READ_JOB),
        Route::JobRead { .. }
        | Route::JobAllocations { .. }
        | Route::JobEvaluations { .. }
        | Route::JobVersions { .. }
        | Route::JobSummary { .. }
        | Route::JobDeployment { .. }
        | Route::JobDeployments { .. }
        | Route::JobServices { .. }
        | Route::JobSubmission { .. }
        | Route::JobActions { .. } => namespace(capability::READ_JOB),
        Route::JobVersionTag { .. } => namespace(capability::SUBMIT_JOB),
        Route::JobDeregister { .. }
        | Route::JobRevert { .. }
        | Route::JobStable { .. }
        | Route::JobEvaluate { .. }
        | Route::JobPeriodicForce { .. } => namespace(capability::SUBMIT_JOB),
        Route::JobDispatch { .. } => namespace(capability::DISPATCH_JOB),
        // Nomad also lets submit-job scale and read-job read scaling; the policy language
        // grants both capabilities to `write` and `read` alike.
        Route::JobScale { .. } => namespace(capability::SCALE_JOB),
        Route::JobScaleStatus { .. } => namespace(capability::READ_JOB_SCALING),
        Route::ScalingPolicies => ScalingPolicyRead {
            namespace: query_namespace(params),
            capability: capability::LIST_SCALING_POLICIES,
        },
        // The query's namespace, not the policy's, as Nomad's `Scaling.GetPolicy` checks it.
        Route::ScalingPolicy { .. } => ScalingPolicyRead {
            namespace: query_namespace(params),
            capability: capability::READ_SCALING_POLICY,
        },
        Route::AllocationList | Route::EvaluationList | Route::DeploymentList => {
            namespace(capability::READ_JOB)
        }
        Route::AllocationRead { alloc_id }
        | Route::ClientAllocStats { alloc_id }
        | Route::ClientAllocChecks { alloc_id }
        | Route::AllocationServices { alloc_id } => in_alloc(&alloc_id, capability::READ_JOB),
        Route::AllocationStop { alloc_id }
        | Route::ClientAllocRestart { alloc_id }
        | Route::ClientAllocSignal { alloc_id } => in_alloc(&alloc_id, capability::ALLOC_LIFECYCLE),
        Route::ClientAllocGc { alloc_id } => in_alloc(&alloc_id, capability::SUBMIT_JOB),
        Route::FsLogs { alloc_id } | Route::FsStream { alloc_id } => {
            in_alloc(&alloc_id, capability::READ_LOGS)
        }
        Route::FsList { alloc_id }
        | Route::FsStat { alloc_id }
        | Route::FsCat { alloc_id }
        | Route::FsReadAt { alloc_id } => in_alloc(&alloc_id, capability::READ_FS),
        Route::EvaluationRead { eval_id } | Route::EvaluationAllocations { eval_id } => Namespace {
            namespace: eval_namespace(state, &eval_id, params),
            capability: capability::READ_JOB,
        },
        Route::DeploymentRead { .. } | Route::DeploymentAllocations { .. } => {
            namespace(capability::READ_JOB)
        }
        Route::DeploymentPromote { .. }
        | Route::DeploymentFail { .. }
        | Route::DeploymentPause { .. }
        | Route::DeploymentAllocHealth { .. } => namespace(capability::SUBMIT_JOB),
        Route::NodeDrain { .. }
        | Route::NodeEligibility { .. }
        | Route::NodePurge { .. }
        | Route::NodeEvaluate { .. } => NodeWrite,
        Route::NodeList
        | Route::NodeRead { .. }
        | Route::NodeAllocations { .. }
        | Route::ClientStats
        | Route::AgentMembers => NodeRead,
        Route::AgentSelf | Route::AgentServers => AgentRead,
        Route::AgentServersUpdate | Route::AgentForceLeave => AgentWrite,
        Route::AgentHealth | Route::StatusLeader | Route::StatusPeers | Route::Regions => Anyone,
        Route::EventStream => match event_topics(params) {
            Some(topics) => {
                let namespace = query_namespace(params);
                let every = (namespace == ALL_NAMESPACES)
                    .then(|| state.namespace_names())
                    .flatten();
                EventStream {
                    namespaces: every.unwrap_or_else(|| vec![namespace]),
                    topics,
                }
            }
            None => Anyone,
        },
        Route::Search | Route::SearchFuzzy => namespace(capability::READ_JOB),
        Route::ServiceList | Route::ServiceRead { .. } => ServiceRead {
            namespace: query_namespace(params),
        },
        Route::ServiceDelete { .. } => namespace(capability::SUBMIT_JOB),
        // A client node's calls: authenticated by the node's secret ID ([`guard_node_calls`]).
        Route::NodeRegister
        | Route::NodeUpdateStatus { .. }
        | Route::NodeGetClientAllocs { .. }
        | Route::AllocGetAllocs
        | Route::NodeUpdateAlloc
        | Route::ServiceRegistrationUpsert
        | Route::ServiceRegistrationDeleteIds => Anyone,
    }
}

/// Whether an `/v1/acl/…` request is one only a management token may make: writing a
/// policy or a role, deleting one, listing tokens, creating, updating or deleting one by
/// accessor (not `self`).
fn acl_route_needs_management(method: &Method, path: &str) -> bool {
    let write = *method == Method::PUT || *method == Method::POST;
    let write_or_delete = write || *method == Method::DELETE;
    match path {
        "/v1/acl/tokens" => *method == Method::GET,
        "/v1/acl/token" | "/v1/acl/role" => write,
        // Single sign-on: writing methods and rules, and reading one, is management's; the
        // method list and the logins are anyone's, as in Nomad.
        "/v1/acl/auth-method" | "/v1/acl/binding-rule" => write,
        "/v1/acl/binding-rules" => true,
        "/v1/acl/auth-methods" | "/v1/acl/login" => false,
        "/v1/acl/token/self" | "/v1/acl/policy/self" => false,
        // A one-time token is asked for with the caller's own token and exchanged with its
        // secret alone: the handlers check.
        "/v1/acl/token/onetime" | "/v1/acl/token/onetime/exchange" => false,
        _ => {
            if let Some(role) = path.strip_prefix("/v1/acl/role/") {
                // `/v1/acl/role/name/<name>` is a read.
                write_or_delete && !role.is_empty() && !role.contains('/')
            } else if let Some(name) = path
                .strip_prefix("/v1/acl/auth-method/")
                .or_else(|| path.strip_prefix("/v1/acl/binding-rule/"))
            {
                !name.is_empty()
            } else if let Some(name) = path.strip_prefix("/v1/acl/policy/") {
                write_or_delete && !name.is_empty()
            } else if let Some(accessor) = path.strip_prefix("/v1/acl/token/") {
                write_or_delete && !accessor.is_empty()
            } else {
                false
            }
        }
    }
}

/// Whether `acl` grants `permission`. `*` as a namespace asks whether any namespace the
/// request could reach is allowed: the handlers then answer across namespaces.
pub fn allows(acl: &Acl, permission: &Permission) -> bool {
    match permission {
        Permission::Anyone => true,
        Permission::Namespace {
            namespace,
            capability,
        } => acl.allow_namespace_operation(namespace, capability),
        Permission::Variable {
            namespace,
            path,
            operation,
        } => {
            if *operation == "list" {
                // The list answers only what the caller may list; any access lets it ask,
                // and across namespaces (`*`) anyone may ask.
                namespace == ALL_NAMESPACES
                    || acl.allow_namespace(namespace)
                    || acl.allow_variable_operation(namespace, path, operation)
            } else {
                acl.allow_variable_operation(namespace, path, operation)
            }
        }
        Permission::ServiceRead { namespace } => {
            acl.allow_namespace_operation(namespace, capability::READ_JOB)
        }
        Permission::NodePool { pool, capability } => {
            acl.allow_node_pool_operation(pool, capability)
        }
        Permission::NodePoolNodes { pool } => {
            acl.allow_node_read() && acl.allow_node_pool_operation(pool, node_pool_capability::READ)
        }
        Permission::NodePoolList => true,
        Permission::ScalingPolicyRead {
            namespace,
            capability,
        } => allows_scaling_policy_read(acl, namespace, capability),
        Permission::NodeRead => acl.allow_node_read(),
        Permission::NodeWrite => acl.allow_node_write(),
        Permission::AgentRead => acl.allow_agent_read(),
        Permission::AgentWrite => acl.allow_agent_write(),
        Permission::OperatorRead => acl.allow_operator_read(),
        Permission::OperatorWrite => acl.allow_operator_write(),
        Permission::Management => acl.is_management(),
        Permission::EventStream { namespaces, topics } => namespaces.iter().all(|namespace| {
            topics
                .iter()
                .all(|topic| allows_event_topic(acl, namespace, topic))
        }),
    }
}

/// Whether a caller whose policies compile to `acl` may make a request that needs
/// `permission`. A workload identity also has its implicit rights: the variables endpoints
/// (whose handler applies its job's paths) and the service catalog of its own namespace.
pub fn permits(identity: &RequestIdentity, acl: &Acl, permission: &Permission) -> bool {
    match (identity, permission) {
        (RequestIdentity::Workload(_), Permission::Variable { .. } | Permission::Anyone) => true,
        (RequestIdentity::Workload(workload), Permission::ServiceRead { namespace })
            if *namespace == workload.namespace =>
        {
            true
        }
        _ => allows(acl, permission),
    }
}

/// Whether `acl` may read scaling policies in `namespace`: `capability`, or `list-jobs` with
/// `read-job`.
fn allows_scaling_policy_read(acl: &Acl, namespace: &str, capability: &str) -> bool {
    acl.allow_namespace_operation(namespace, capability)
        || (acl.allow_namespace_operation(namespace, capability::LIST_JOBS)
            && acl.allow_namespace_operation(namespace, capability::READ_JOB))
}

/// What the enforcement layer needs.
#[derive(Clone)]
pub struct AclEnforcer {
    pub keyring: Arc<Keyring>,
    pub state: StateStore,
    pub clock: Arc<dyn Clock>,
}

fn forbidden(message: &str) -> Response {
    (
        StatusCode::FORBIDDEN,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        message.to_owned(),
    )
        .into_response()
}

/// The middleware: checks the request against [`required`] before passing it on.
pub async fn enforce(
    State(enforcer): State<AclEnforcer>,
    request: Request,
    next: Next,
) -> Response {
    let (parts, body) = request.into_parts();
    let params = QueryParams::parse(parts.uri.query());
    let path = percent_encoding::percent_decode_str(parts.uri.path())
        .decode_utf8_lossy()
        .into_owned();
    // Only a job registration's namespace lives in its body; other bodies pass untouched.
    let reads_body = (parts.method == Method::PUT || parts.method == Method::POST)
        && (path == "/v1/jobs"
            || path == "/v1/node/pools"
            || (path.starts_with("/v1/job/")
                && !path.contains("/dispatch")
                && !path.contains("/evaluate")
                && !path.contains("/revert")
                && !path.contains("/stable")));
    let (body, bytes) = if reads_body {
        match to_bytes(body, drover_api::MAX_REQUEST_BODY).await {
            Ok(bytes) => (Body::from(bytes.clone()), bytes),
            Err(error) => {
                return (
                    StatusCode::BAD_REQUEST,
                    format!("failed to read body: {error}"),
                )
                    .into_response();
            }
        }
    } else {
        (body, axum::body::Bytes::new())
    };
    let permission = required(&enforcer.state, &parts.method, &path, &params, &bytes);
    let header_token = request_token(
        parts
            .headers
            .get("X-Nomad-Token")
            .and_then(|value| value.to_str().ok()),
        parts
            .headers
            .get("Authorization")
            .and_then(|value| value.to_str().ok()),
    )
    .is_some();
    // A browser's exec websocket carries its token in the first message (`ws_handshake`), as
    // Nomad's UI sends it: the exec handler checks it with this before the session starts.
    if !header_token
        && path.starts_with("/v1/client/allocation/")
        && path.ends_with("/exec")
        && params.bool("ws_handshake", false).unwrap_or(false)
    {
        let (keyring, state, clock) = (
            enforcer.keyring.clone(),
            enforcer.state.clone(),
            enforcer.clock.clone(),
        );
        let check = move |token: String| {
            let token = Some(token.as_str()).filter(|token| !token.is_empty());
            let identity = resolve_token_at(&keyring, &state, token, clock.now_unix_ns()).map_err(
                |error| match error {
                    drover_server::identity::IdentityError::AclTokenExpired => {
                        "ACL token expired".to_owned()
                    }
                    drover_server::identity::IdentityError::AclTokenNotFound => {
                        "ACL token not found".to_owned()
                    }
                    _ => "Permission denied".to_owned(),
                },
            )?;
            let acl = match &identity {
                RequestIdentity::AclToken(token) => token_acl(&state, token),
                RequestIdentity::Anonymous => anonymous_acl(&state),
                RequestIdentity::Workload(workload) => workload_acl(&state, workload),
            };
            if permits(&identity, &acl, &permission) {
                Ok(())
            } else {
                Err("Permission denied".to_owned())
            }
        };
        let check = move |token: String| -> std::pin::Pin<
            Box<dyn std::future::Future<Output = Result<(), String>> + Send>,
        > {
            let answer = check(token);
            Box::pin(async move { answer })
        };
        let mut parts = parts;
        parts
            .extensions
            .insert(drover_api::HandshakeTokenCheck(Arc::new(check)));
        return next.run(Request::from_parts(parts, body)).await;
    }
    // Nothing to check (a node's calls carry its secret, not an ACL token; the `/v1/acl`
    // handlers resolve the token themselves).
    if permission == Permission::Anyone {
        return next.run(Request::from_parts(parts, body)).await;
    }
    let header_str = |name: &str| {
        parts
            .headers
            .get(name)
            .and_then(|value| value.to_str().ok())
    };
    let token = request_token(header_str("X-Nomad-Token"), header_str("Authorization"));
    let identity = match resolve_token_at(
        &enforcer.keyring,
        &enforcer.state,
        token,
        enforcer.clock.now_unix_ns(),
    ) {
        Ok(identity) => identity,
        Err(error) => {
            tracing::debug!(%error, path, "refused a request's credential");
            let message = match error {
                drover_server::identity::IdentityError::AclTokenExpired => "ACL token expired",
                drover_server::identity::IdentityError::AclTokenNotFound => "ACL token not found",
                _ => "Permission denied",
            };
            return forbidden(message);
        }
    };
    // The caller's policies: an ACL token's, the anonymous policy, or those attached to a
    // workload's job (Nomad's `JobACL`; its implicit rights are [`permits`]'s).
    let acl = match &identity {
        RequestIdentity::AclToken(token) => token_acl(&enforcer.state, token),
        RequestIdentity::Anonymous => anonymous_acl(&enforcer.state),
        RequestIdentity::Workload(workload) => workload_acl(&enforcer.state, workload),
    };
    // A list across namespaces answers what the caller may see in each namespace.
    let across = match &permission {
        Permission::Namespace {
            namespace,
            capability,
        }
        | Permission::ScalingPolicyRead {
            namespace,
            capability,
        } => Some((namespace.as_str(), *capability)),
        Permission::ServiceRead { namespace } => Some((namespace.as_str(), capability::READ_JOB)),
        _ => None,
    };
    if let Some((namespace, capability)) = across
        && namespace == ALL_NAMESPACES
        && lists_across_namespaces(&parts.method, &path)
    {
        let response = next.run(Request::from_parts(parts, body)).await;
        if acl.is_management() {
            return response;
        }
        let scaling = matches!(permission, Permission::ScalingPolicyRead { .. });
        let allowed = |namespace: &str| {
            if scaling {
                allows_scaling_policy_read(&acl, namespace, capability)
            } else {
                acl.allow_namespace_operation(namespace, capability)
            }
        };
        return keep_allowed_items(response, &allowed).await;
    }
    if !permits(&identity, &acl, &permission) {
        tracing::debug!(path, ?permission, "ACL refused a request");
        return forbidden("Permission denied");
    }
    // The variables topic (by name, or `*`) shows only the variables the caller may list:
    // each event is checked as Nomad's subscription filter checks it.
    if !acl.is_management()
        && let Permission::EventStream { topics, .. } = &permission
        && topics
            .iter()
            .any(|topic| topic == "Variable" || topic == "*")
    {
        let mut parts = parts;
        parts
            .extensions
            .insert(variable_event_access(&enforcer.state, identity));
        return next.run(Request::from_parts(parts, body)).await;
    }
    if !acl.is_management() {
        // The pool list keeps the pools the caller may read; a pool's jobs those in
        // namespaces where it may list jobs (Nomad's node pool endpoints).
        if permission == Permission::NodePoolList {
            let response = next.run(Request::from_parts(parts, body)).await;
            return keep_items(response, |item| {
                item.get("Name")
                    .and_then(serde_json::Value::as_str)
                    .is_some_and(|pool| {
                        acl.allow_node_pool_operation(pool, node_pool_capability::READ)
                    })
            })
            .await;
        }
        if path.starts_with("/v1/node/pool/") && path.ends_with("/jobs") {
            let response = next.run(Request::from_parts(parts, body)).await;
            let allowed =
                |namespace: &str| acl.allow_namespace_operation(namespace, capability::LIST_JOBS);
            return keep_allowed_items(response, &allowed).await;
        }
    }
    next.run(Request::from_parts(parts, body)).await
}

/// Which events of the `Variable` topic `identity` receives: those of variables it may list
/// in their namespace (Nomad's `AllowVariableOperation(namespace, path, "list")`), with its
/// policies as they stand when the event is sent (re-read after any ACL write, as Nomad
/// re-resolves a subscriber's ACL); a token deleted since sees none. Other topics pass.
fn variable_event_access(state: &StateStore, identity: RequestIdentity) -> EventAccess {
    let state = state.clone();
    let current: Mutex<Option<(u64, Arc<Acl>)>> = Mutex::new(None);
    EventAccess(Arc::new(move |event: &Event| {
        if event.topic != Topic::Variable {
            return true;
        }
        let acl_index = state.indexes().table(Table::Acl);
        let acl = {
            let mut current = current.lock().unwrap_or_else(PoisonError::into_inner);
            match &*current {
                Some((index, acl)) if *index == acl_index => Arc::clone(acl),
                _ => {
                    let acl = Arc::new(current_acl(&state, &identity));
                    *current = Some((acl_index, Arc::clone(&acl)));
                    acl
                }
            }
        };
        acl.allow_variable_operation(&event.namespace, &event.key, variables_capability::LIST)
    }))
}

/// The ACL `identity` holds in the store now.
fn current_acl(state: &StateStore, identity: &RequestIdentity) -> Acl {
    match identity {
        RequestIdentity::AclToken(token) => match state.acl().tokens.get(&token.accessor_id) {
            Some(current) => token_acl(state, current),
            None => Acl::new(&[]),
        },
        RequestIdentity::Anonymous => anonymous_acl(state),
        RequestIdentity::Workload(workload) => workload_acl(state, workload),
    }
}

/// The list endpoints that take `namespace=*` and answer objects with a `Namespace` field (a
/// scaling policy's is its `Target`'s).
fn lists_across_namespaces(method: &Method, path: &str) -> bool {
    matches!(
        route(method, path),
        Ok(Route::JobList
            | Route::JobStatuses
            | Route::AllocationList
            | Route::EvaluationList
            | Route::DeploymentList
            | Route::ServiceList
            | Route::ScalingPolicies)
    )
}

/// The namespace of an item of a list answer: its `Namespace`, or its `Target`'s (scaling
/// policy stubs).
fn item_namespace(item: &serde_json::Value) -> Option<&str> {
    item.get("Namespace")
        .or_else(|| {
            item.get("Target")
                .and_then(|target| target.get("Namespace"))
        })
        .and_then(serde_json::Value::as_str)
}

/// Drops from a successful JSON list answer the items in namespaces that `allowed` refuses
/// (Nomad filters `*` lists by the caller's namespaces).
async fn keep_allowed_items(
    response: Response,
    allowed: &(dyn Fn(&str) -> bool + Sync),
) -> Response {
    keep_items(response, |item| item_namespace(item).is_some_and(allowed)).await
}

/// Keeps in a successful JSON list answer the items `keep` says yes to.
async fn keep_items(response: Response, keep: impl Fn(&serde_json::Value) -> bool) -> Response {
    if response.status() != StatusCode::OK {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let bytes = match to_bytes(body, usize::MAX).await {
        Ok(bytes) => bytes,
        Err(error) => {
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("failed to read the answer: {error}"),
            )
                .into_response();
        }
    };
    let Ok(serde_json::Value::Array(items)) = serde_json::from_slice(&bytes) else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    let kept: Vec<serde_json::Value> = items.into_iter().filter(|item| keep(item)).collect();
    match serde_json::to_vec(&kept) {
        Ok(filtered) => {
            parts.headers.remove(header::CONTENT_LENGTH);
            Response::from_parts(parts, Body::from(filtered))
        }
        Err(error) => (StatusCode::INTERNAL_SERVER_ERROR, error.to_string()).into_response(),
    }
}

/// Whether `route` is one of a client node's calls to its servers.
fn is_node_call(route: &Route) -> bool {
    matches!(
        route,
        Route::NodeRegister
            | Route::NodeUpdateStatus { .. }
            | Route::NodeGetClientAllocs { .. }
            | Route::AllocGetAllocs
            | Route::NodeUpdateAlloc
            | Route::ServiceRegistrationUpsert
            | Route::ServiceRegistrationDeleteIds
    )
}

/// A client node's calls authenticate with the node's secret ID (`X-Nomad-Token`), with ACLs
/// on or off: a node may re-register only with its own secret, heartbeat and read only as
/// itself, and report the status of allocations placed on it only. Installed on every server
/// agent; other requests pass untouched.
pub async fn guard_node_calls(
    State(state): State<StateStore>,
    request: Request,
    next: Next,
) -> Response {
    let path = percent_encoding::percent_decode_str(request.uri().path())
        .decode_utf8_lossy()
        .into_owned();
    if !path.starts_with("/v1/internal/") {
        return next.run(request).await;
    }
    let Ok(route) = route(request.method(), &path) else {
        return next.run(request).await;
    };
    if !is_node_call(&route) {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let token = parts
        .headers
        .get("X-Nomad-Token")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let caller = (!token.is_empty())
        .then(|| state.node_by_secret(&token))
        .flatten();
    let bytes = match to_bytes(body, drover_api::MAX_REQUEST_BODY).await {
        Ok(bytes) => bytes,
        Err(error) => {
            return (
                StatusCode::BAD_REQUEST,
                format!("failed to read body: {error}"),
            )
                .into_response();
        }
    };
    let refusal = match &route {
        Route::NodeRegister => {
            let registering =
                serde_json::from_slice::<drover_structs::client_rpc::NodeRegisterRequest>(&bytes)
                    .ok()
                    .map(|request| request.node);
            match registering {
                Some(node) => match state.node(&node.id) {
                    Some(existing) if existing.secret_id != node.secret_id => Some((
                        StatusCode::BAD_REQUEST,
                        "node secret ID does not match. Not registering node.",
                    )),
                    _ => None,
                },
                // The handler answers a body it cannot decode.
                None => None,
            }
        }
        Route::NodeUpdateStatus { node_id } | Route::NodeGetClientAllocs { node_id } => {
            match state.node(node_id) {
                Some(node) if node.secret_id != token => {
                    Some((StatusCode::FORBIDDEN, "Permission denied"))
                }
                _ => None,
            }
        }
        Route::NodeUpdateAlloc => match &caller {
            None => Some((StatusCode::FORBIDDEN, "Permission denied")),
            Some(node) => {
                let updates = serde_json::from_slice::<
                    drover_structs::client_rpc::AllocUpdateRequest,
                >(&bytes)
                .map(|request| request.alloc)
                .unwrap_or_default();
                // An allocation this server does not know is no other node's: the write skips
                // it (as Nomad's `Node.UpdateAlloc` does), or, on a leader that has not yet
                // read the previous leader's last writes, fails on the store's revision and is
                // sent again. Refusing it made the client drop the whole report.
                let foreign = updates.iter().any(|update| {
                    state
                        .alloc(&update.id)
                        .is_some_and(|alloc| alloc.node_id != node.id)
                });
                foreign.then_some((StatusCode::FORBIDDEN, "Permission denied"))
            }
        },
        _ => caller
            .is_none()
            .then_some((StatusCode::FORBIDDEN, "Permission denied")),
    };
    if let Some((status, message)) = refusal {
        tracing::debug!(path, "refused a node call");
        return (
            status,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            message,
        )
            .into_response();
    }
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // a failed expectation is a failed test

    use super::*;
    use drover_server::acl::policy::parse;

    fn stream_permission(query: &str) -> Permission {
        required(
            &StateNamespaces,
            &Method::GET,
            "/v1/event/stream",
            &QueryParams::parse(Some(query)),
            b"",
        )
    }

    struct StateNamespaces;

    impl NamespaceLookup for StateNamespaces {
        fn alloc_namespace(&self, _alloc_id: &str) -> Option<String> {
            None
        }
        fn eval_namespace(&self, _eval_id: &str) -> Option<String> {
            None
        }
    }

    /// A store holding these namespaces.
    struct KnownNamespaces(Vec<String>);

    impl NamespaceLookup for KnownNamespaces {
        fn alloc_namespace(&self, _alloc_id: &str) -> Option<String> {
            None
        }
        fn eval_namespace(&self, _eval_id: &str) -> Option<String> {
            None
        }
        fn namespace_names(&self) -> Option<Vec<String>> {
            Some(self.0.clone())
        }
    }

    #[test]
    fn the_event_stream_needs_management_for_every_topic_and_unknown_topics() {
        let reader = Acl::new(&[parse(
            r#"namespace "default" { policy = "read" }
               node { policy = "read" }
               operator { policy = "read" }"#,
        )
        .unwrap()]);
        let management = Acl::management();
        // No topic is every topic (`*`): management only, as Nomad's `validateNsOp`.
        for query in [
            "",
            "topic=*",
            "topic=*:*",
            "topic=Job&topic=*",
            "topic=NoSuchTopic",
            "topic=ACLToken",
            "topic=NodePool",
        ] {
            let permission = stream_permission(query);
            assert!(
                !allows(&reader, &permission),
                "{query}: a read token may stream"
            );
            assert!(allows(&management, &permission), "{query}");
        }
        for query in [
            "topic=Job",
            "topic=Allocation:web",
            "topic=Evaluation&topic=Deployment",
            "topic=Node",
            "topic=Operator",
            "topic=Service",
        ] {
            assert!(allows(&reader, &stream_permission(query)), "{query}");
        }
        // Another namespace's job topics need read-job there.
        assert!(!allows(
            &reader,
            &stream_permission("topic=Job&namespace=other")
        ));
        // Variables: any variables rule in the namespace.
        assert!(!allows(&reader, &stream_permission("topic=Variable")));
        let variables = Acl::new(&[parse(
            r#"namespace "default" {
                 variables {
                   path "app/*" { capabilities = ["read"] }
                 }
               }"#,
        )
        .unwrap()]);
        assert!(allows(&variables, &stream_permission("topic=Variable")));
        // `namespace=*` is every namespace there is, each checked (Nomad's `validateACL`):
        // variables rules in `default` alone do not stream `*` once `other` exists.
        let every = |names: &[&str]| {
            required(
                &KnownNamespaces(names.iter().map(|name| (*name).to_owned()).collect()),
                &Method::GET,
                "/v1/event/stream",
                &QueryParams::parse(Some("topic=Variable&namespace=*")),
                b"",
            )
        };
        assert!(allows(&variables, &every(&["default"])));
        assert!(!allows(&variables, &every(&["default", "other"])));
        assert!(allows(&Acl::management(), &every(&["default", "other"])));
        // A topic that does not parse is the handler's 400, whoever asks.
        assert_eq!(
            stream_permission("topic=Evaluation:::*"),
            Permission::Anyone
        );
    }
}
