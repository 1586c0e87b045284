//! [`ApiBackend`]: everything the HTTP layer needs from the agent, in two narrow traits.
//! [`StateReads`] are the state store's answers (synchronous snapshot reads plus a blocking
//! wait on table indexes); [`AgentOperations`] are what the server does (job
//! register/deregister/evaluate, alloc stop) and what the local client node does (restart,
//! signal, GC, stats, the alloc dir for logs and files), and what the server does for remote
//! client nodes (register, heartbeat, client status updates; see [`crate::client_rpc`]).
//!
//! `drover_state::StateStore` implements [`StateReads`] (see [`crate::state_store`]); the agent
//! implements [`AgentOperations`] over `drover_server::Server` and `drover_client::Client` and
//! serves `app(Arc::new(Composed { reads: store, operations }))`. Error mapping in that
//! adapter: `ServerError::{NotFound, BadRequest, Internal}` and `ClientErrorKind::{NotFound,
//! BadRequest, Unavailable, Internal}` → the [`ApiError`] variant of the same name; the alloc
//! dir is `<data dir>/alloc/<alloc id>`. Tests use the in-memory backend (the `memory`
//! module, feature `memory-backend`), which implements both. Not here: HTTP details.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use drover_state::{EventFilter, EventSubscription};
use drover_structs::{
    AllocResourceUsage, AllocStopResponse, Allocation, Deployment, Evaluation, HostStats, Job,
    JobDeregisterResponse, JobPlanRequest, JobPlanResponse, JobRegisterRequest,
    JobRegisterResponse, JobScalingEvents, JobSubmission, JobSummary, Node, ScalingPolicy,
    ServiceRegistration,
};

use crate::error::ApiError;

/// The tables a read watches; a blocking query wakes when any of them changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Table {
    Jobs,
    JobVersions,
    JobSummaries,
    Evals,
    Allocs,
    Nodes,
    Deployments,
    ServiceRegistrations,
    ScalingEvents,
    ScalingPolicies,
    JobSubmissions,
}

/// Who this agent is, for `/v1/agent/self`, `/v1/agent/members`, `/v1/status/*`, `/v1/regions`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentInfo {
    pub region: String,
    pub datacenter: String,
    /// The agent's name (`node1`); members are listed as `<name>.<region>`.
    pub node_name: String,
    /// drover's version.
    pub version: String,
    /// The HTTP API address (`127.0.0.1:4646`).
    pub http_addr: String,
    /// The address this agent's server is reached at, reported as the leader and the only
    /// peer: servers talk HTTP, so it is the HTTP address. Empty without a server.
    pub server_addr: String,
    /// The servers the local client talks to (`/v1/agent/servers`): the configured addresses,
    /// or this agent's own when the server runs in process. Empty without a client.
    pub client_servers: Vec<String>,
    pub server_enabled: bool,
    pub client_enabled: bool,
    /// The local client node's ID, empty without a client.
    pub node_id: String,
}

/// The health of one part of the agent, in Nomad's `/v1/agent/health` shape.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PartHealth {
    pub ok: bool,
    pub message: String,
}

impl PartHealth {
    pub fn healthy() -> Self {
        PartHealth {
            ok: true,
            message: "ok".to_string(),
        }
    }

    pub fn unhealthy(message: impl Into<String>) -> Self {
        PartHealth {
            ok: false,
            message: message.into(),
        }
    }
}

/// `/v1/agent/health`: a part the agent does not run is left out.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct AgentHealth {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client: Option<PartHealth>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<PartHealth>,
}

/// The agent as the HTTP layer sees it: what the state store answers ([`StateReads`]) and
/// what the server and the local client do ([`AgentOperations`]). Anything that is both is an
/// `ApiBackend`; [`Composed`] makes one out of two parts.
pub trait ApiBackend: StateReads + AgentOperations {}

impl<T: StateReads + AgentOperations> ApiBackend for T {}

/// Reads of the state store, with blocking-query support. A namespace of `*` means every
/// namespace.
pub trait StateReads: Send + Sync + 'static {
    /// The highest modify index among `tables` (0 for an empty store).
    fn table_index(&self, tables: &[Table]) -> u64;

    /// Resolves once one of `tables` has an index above `min_index`, or at `deadline`,
    /// whichever comes first. No polling: the store wakes it.
    fn wait_for_change(
        &self,
        tables: &[Table],
        min_index: u64,
        deadline: tokio::time::Instant,
    ) -> impl Future<Output = ()> + Send;

    // Store reads.

    /// Jobs whose ID starts with `prefix`.
    /// The jobs (shared, as the store keeps them: a list of many jobs copies none).
    fn jobs(&self, namespace: &str, prefix: &str) -> Result<Vec<std::sync::Arc<Job>>, ApiError>;
    fn job(&self, namespace: &str, job_id: &str) -> Result<Option<Job>, ApiError>;
    /// Every stored version of a job, newest first.
    fn job_versions(&self, namespace: &str, job_id: &str) -> Result<Vec<Job>, ApiError>;
    fn job_summary(&self, namespace: &str, job_id: &str) -> Result<Option<JobSummary>, ApiError>;
    /// The allocations of every version of a job (and of earlier jobs with the same ID).
    fn job_allocations(&self, namespace: &str, job_id: &str) -> Result<Vec<Allocation>, ApiError>;
    fn job_evaluations(&self, namespace: &str, job_id: &str) -> Result<Vec<Evaluation>, ApiError>;
    /// Allocations whose ID starts with `prefix`.
    fn allocations(&self, namespace: &str, prefix: &str) -> Result<Vec<Allocation>, ApiError>;
    fn allocation(&self, alloc_id: &str) -> Result<Option<Allocation>, ApiError>;
    /// Evaluations whose ID starts with `prefix`.
    fn evaluations(&self, namespace: &str, prefix: &str) -> Result<Vec<Evaluation>, ApiError>;
    fn evaluation(&self, eval_id: &str) -> Result<Option<Evaluation>, ApiError>;
    fn evaluation_allocations(&self, eval_id: &str) -> Result<Vec<Allocation>, ApiError>;
    /// Nodes whose ID starts with `prefix`.
    fn nodes(&self, prefix: &str) -> Result<Vec<Node>, ApiError>;
    fn node(&self, node_id: &str) -> Result<Option<Node>, ApiError>;
    fn node_allocations(&self, node_id: &str) -> Result<Vec<Allocation>, ApiError>;
    /// Deployments whose ID starts with `prefix`.
    fn deployments(&self, namespace: &str, prefix: &str) -> Result<Vec<Deployment>, ApiError>;
    fn deployment(&self, deployment_id: &str) -> Result<Option<Deployment>, ApiError>;
    /// Every deployment of a job (of every incarnation of it), newest first.
    fn job_deployments(&self, namespace: &str, job_id: &str) -> Result<Vec<Deployment>, ApiError>;
    /// `alloc ID → AllocModifyIndex` of every allocation on a node: what a remote client's
    /// watcher needs (`Node.GetClientAllocs`). Readers that hold allocations shared should
    /// answer it without copying them; this default copies.
    fn node_alloc_modify_indexes(&self, node_id: &str) -> Result<BTreeMap<String, u64>, ApiError> {
        Ok(self
            .node_allocations(node_id)?
            .into_iter()
            .map(|allocation| (allocation.id, allocation.alloc_modify_index))
            .collect())
    }

    /// The event stream from `from_index` (0: the newest batches still buffered, then new ones), filtered.
    fn subscribe_events(&self, from_index: u64, filter: EventFilter) -> EventSubscription;

    /// Every service registration in `namespace` (`*`: every namespace).
    fn service_registrations(&self, namespace: &str) -> Result<Vec<ServiceRegistration>, ApiError>;
    /// The registrations of service `name` in `namespace`, by ID.
    fn service_registrations_by_name(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Vec<ServiceRegistration>, ApiError>;
    /// The registrations of one allocation.
    fn service_registrations_by_alloc(
        &self,
        alloc_id: &str,
    ) -> Result<Vec<ServiceRegistration>, ApiError>;
    /// The registrations of a job's allocations.
    fn service_registrations_by_job(
        &self,
        namespace: &str,
        job_id: &str,
    ) -> Result<Vec<ServiceRegistration>, ApiError>;

    /// A job's scaling events. A backend that keeps none has no scaling endpoints (404).
    fn job_scaling_events(
        &self,
        namespace: &str,
        job_id: &str,
    ) -> Result<Option<JobScalingEvents>, ApiError> {
        let _ = (namespace, job_id);
        Err(ApiError::NoRoute)
    }

    /// The scaling policies of a namespace (see `StateSnapshot::scaling_policies`). A
    /// backend that keeps none has no scaling endpoints (404).
    fn scaling_policies(
        &self,
        namespace: &str,
        id_prefix: &str,
        job: &str,
        policy_type: &str,
    ) -> Result<Vec<ScalingPolicy>, ApiError> {
        let _ = (namespace, id_prefix, job, policy_type);
        Err(ApiError::NoRoute)
    }

    /// One scaling policy by ID.
    fn scaling_policy(&self, policy_id: &str) -> Result<Option<ScalingPolicy>, ApiError> {
        let _ = policy_id;
        Err(ApiError::NoRoute)
    }

    /// The jobspec source version `version` of a job was registered from, as stored (flag
    /// values escaped). A backend that keeps none has no submission endpoint (404).
    fn job_submission(
        &self,
        namespace: &str,
        job_id: &str,
        version: u64,
    ) -> Result<Option<JobSubmission>, ApiError> {
        let _ = (namespace, job_id, version);
        Err(ApiError::NoRoute)
    }
}

/// What the agent does: the server's writes (`drover_server::Server`) and the local client
/// node's operations (`drover_client::Client`).
pub trait AgentOperations: Send + Sync + 'static {
    fn agent_info(&self) -> AgentInfo;

    /// `PUT /v1/agent/servers`: replaces the servers the local client talks to (Nomad's
    /// `SetServers`); an address that is not one is a `BadRequest` and changes nothing.
    fn set_client_servers(&self, addresses: Vec<String>) -> Result<(), ApiError>;

    /// `/v1/agent/health`: whether the server part and the client part work, `None` for a
    /// part this agent does not run.
    fn agent_health(&self) -> impl Future<Output = AgentHealth> + Send;

    // Server writes.

    /// Registers a canonicalized, validated job.
    fn register_job(
        &self,
        request: JobRegisterRequest,
    ) -> impl Future<Output = Result<JobRegisterResponse, ApiError>> + Send;
    /// Stops or purges a job; a positive `eval_priority` is its evaluation's priority.
    fn deregister_job(
        &self,
        namespace: &str,
        job_id: &str,
        purge: bool,
        eval_priority: i64,
    ) -> impl Future<Output = Result<JobDeregisterResponse, ApiError>> + Send;
    /// Plans a canonicalized, validated job without committing anything. An agent without a
    /// server has no plan to offer: 404, as for any route it does not serve.
    fn plan_job(
        &self,
        request: JobPlanRequest,
    ) -> impl Future<Output = Result<JobPlanResponse, ApiError>> + Send {
        let _ = request;
        std::future::ready(Err(ApiError::NoRoute))
    }
    fn evaluate_job(
        &self,
        namespace: &str,
        job_id: &str,
    ) -> impl Future<Output = Result<JobRegisterResponse, ApiError>> + Send;
    /// Registers an earlier version of a job again (`/v1/job/<id>/revert`).
    fn revert_job(
        &self,
        namespace: &str,
        request: drover_structs::JobRevertRequest,
    ) -> impl Future<Output = Result<JobRegisterResponse, ApiError>> + Send;
    /// Marks a version of a job stable or not (`/v1/job/<id>/stable`); the write's index.
    fn set_job_stability(
        &self,
        namespace: &str,
        request: drover_structs::JobStabilityRequest,
    ) -> impl Future<Output = Result<u64, ApiError>> + Send;
    fn stop_alloc(
        &self,
        alloc_id: &str,
    ) -> impl Future<Output = Result<AllocStopResponse, ApiError>> + Send;
    /// Applies or removes a job version's tag (`/v1/job/<id>/versions/<name>/tag`). A backend
    /// without job versions of its own has no such endpoint (404).
    fn tag_job_version(
        &self,
        namespace: &str,
        request: drover_structs::JobApplyTagRequest,
    ) -> impl Future<Output = Result<drover_structs::JobTagResponse, ApiError>> + Send {
        let _ = (namespace, request);
        async { Err(ApiError::NoRoute) }
    }
    /// Launches a periodic job's child now. A backend without a periodic dispatcher has no
    /// such endpoint (404).
    fn force_periodic(
        &self,
        namespace: &str,
        job_id: &str,
    ) -> impl Future<Output = Result<JobRegisterResponse, ApiError>> + Send {
        let _ = (namespace, job_id);
        async { Err(ApiError::NoRoute) }
    }
    /// Dispatches a parameterized job. A backend that cannot dispatch has no such endpoint
    /// (404).
    fn dispatch_job(
        &self,
        namespace: &str,
        job_id: &str,
        request: drover_structs::JobDispatchRequest,
        idempotency_token: &str,
    ) -> impl Future<Output = Result<drover_structs::JobDispatchResponse, ApiError>> + Send {
        let _ = (namespace, job_id, request, idempotency_token);
        async { Err(ApiError::NoRoute) }
    }

    /// Scales a job's group or records a scaling event (`/v1/job/<id>/scale`). A backend
    /// without a server has no such endpoint (404).
    fn scale_job(
        &self,
        namespace: &str,
        job_id: &str,
        request: drover_structs::ScalingRequest,
    ) -> impl Future<Output = Result<JobRegisterResponse, ApiError>> + Send {
        let _ = (namespace, job_id, request);
        async { Err(ApiError::NoRoute) }
    }

    /// An operator's node write (`/v1/node/<id>/drain|eligibility|purge|evaluate`). A backend
    /// without a server has no such endpoint (404).
    fn update_node(
        &self,
        request: NodeOperation,
    ) -> impl Future<Output = Result<serde_json::Value, ApiError>> + Send {
        let _ = request;
        async { Err(ApiError::NoRoute) }
    }

    /// An operator's deployment write (`/v1/deployment/promote|fail|pause|allocation-health/
    /// <id>`). A backend without a server has no such endpoint (404).
    fn update_deployment(
        &self,
        request: DeploymentOperation,
    ) -> impl Future<Output = Result<drover_structs::DeploymentUpdateResponse, ApiError>> + Send
    {
        let _ = request;
        async { Err(ApiError::NoRoute) }
    }

    // Client-node operations. Unknown allocations are
    // `NotFound("Unknown allocation \"<id>\"")`; unknown signals are `BadRequest`; an unknown
    // task to restart or signal is Nomad's RPC error (`Internal`), in its alloc runner's words.

    /// Restarts one task (`task`), the running tasks (`None`), or with `all_tasks` every task
    /// in lifecycle order.
    fn restart_alloc(
        &self,
        alloc_id: &str,
        task: Option<String>,
        all_tasks: bool,
    ) -> impl Future<Output = Result<(), ApiError>> + Send;
    /// Sends `signal` (`SIGUSR1`) to one task, or to every task with `None`.
    fn signal_alloc(
        &self,
        alloc_id: &str,
        task: Option<String>,
        signal: String,
    ) -> impl Future<Output = Result<(), ApiError>> + Send;
    /// Destroys a terminal allocation's directory.
    fn gc_alloc(&self, alloc_id: &str) -> impl Future<Output = Result<(), ApiError>> + Send;
    fn alloc_stats(
        &self,
        alloc_id: &str,
        task: Option<String>,
    ) -> impl Future<Output = Result<AllocResourceUsage, ApiError>> + Send;
    /// The allocation's directory on this node (holding `alloc/logs/…` and the task dirs).
    fn alloc_dir(&self, alloc_id: &str) -> Result<PathBuf, ApiError>;

    /// The allocation as this agent's own client runs it, with its live task states; `None`
    /// when this agent runs no client or its client does not hold the allocation. Client
    /// endpoints look here before the state store: a client-only agent's store is empty, and
    /// the client's view is the newer one.
    fn client_allocation(&self, alloc_id: &str) -> Result<Option<Allocation>, ApiError> {
        let _ = alloc_id;
        Ok(None)
    }

    /// The latest result of each service check of an allocation this agent's client runs, by
    /// check ID; `None` when this agent runs no client or its client does not hold it.
    fn alloc_checks(
        &self,
        alloc_id: &str,
    ) -> Result<Option<BTreeMap<String, drover_structs::CheckQueryResult>>, ApiError> {
        let _ = alloc_id;
        Ok(None)
    }

    /// Starts a command inside a task (`alloc exec`). Dropping the session's input sender and
    /// output receiver ends it and its process. An agent without exec support refuses.
    fn exec(
        &self,
        request: ExecRequest,
    ) -> impl Future<Output = Result<ExecSession, ApiError>> + Send {
        let _ = request;
        async { Err(ApiError::bad_request("exec is not supported by this agent")) }
    }

    /// The node's own usage (`GET /v1/client/stats`). An agent without a client refuses.
    fn host_stats(&self) -> impl Future<Output = Result<HostStats, ApiError>> + Send {
        async { Err(ApiError::bad_request("this agent runs no client")) }
    }

    // Server calls of remote client nodes (`crate::client_rpc`). An agent without a server
    // refuses them. Reading a node's allocations needs no operation: it is a blocking read of
    // the store.

    /// Registers (or re-registers) a client node; answers its heartbeat TTL. A node without an
    /// ID is `BadRequest`.
    fn register_node(&self, node: Node) -> impl Future<Output = Result<Duration, ApiError>> + Send {
        let _ = node;
        async { Err(ApiError::bad_request(NO_SERVER)) }
    }

    /// Records a node's heartbeat; answers the next TTL. An unknown node is `NotFound` (the
    /// client then registers again).
    fn update_node_status(
        &self,
        node_id: &str,
        status: &str,
    ) -> impl Future<Output = Result<Duration, ApiError>> + Send {
        let _ = (node_id, status);
        async { Err(ApiError::bad_request(NO_SERVER)) }
    }

    /// Merges a batch of client status updates (partial allocations: the client-owned fields)
    /// into the server's allocations; answers the allocation table's index after the write.
    fn update_allocs_from_client(
        &self,
        updates: Vec<Allocation>,
    ) -> impl Future<Output = Result<u64, ApiError>> + Send {
        let _ = updates;
        async { Err(ApiError::bad_request(NO_SERVER)) }
    }

    /// Creates or replaces service registrations (a client registering its services); an
    /// invalid one is `BadRequest` naming the field. Answers the index of the write.
    fn upsert_service_registrations(
        &self,
        services: Vec<ServiceRegistration>,
    ) -> impl Future<Output = Result<u64, ApiError>> + Send {
        let _ = services;
        async { Err(ApiError::bad_request(NO_SERVER)) }
    }

    /// Removes service registrations by ID (a client deregistering); unknown IDs are skipped.
    fn delete_service_registrations(
        &self,
        ids: Vec<String>,
    ) -> impl Future<Output = Result<u64, ApiError>> + Send {
        let _ = ids;
        async { Err(ApiError::bad_request(NO_SERVER)) }
    }

    /// Removes one registration by hand (`DELETE /v1/service/<name>/<id>`); an unknown one is
    /// `NotFound`.
    fn delete_service_registration(
        &self,
        namespace: &str,
        id: &str,
    ) -> impl Future<Output = Result<u64, ApiError>> + Send {
        let _ = (namespace, id);
        async { Err(ApiError::bad_request(NO_SERVER)) }
    }
}

/// An operator's node write, decoded by the HTTP layer.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeOperation {
    /// `drain`: `spec` `None` cancels the drain.
    Drain {
        node_id: String,
        spec: Option<drover_structs::DrainSpec>,
        mark_eligible: bool,
        meta: BTreeMap<String, String>,
    },
    Eligibility {
        node_id: String,
        eligibility: String,
    },
    Purge {
        node_id: String,
    },
    Evaluate {
        node_id: String,
    },
}

/// An operator's deployment write, decoded by the HTTP layer.
#[derive(Debug, Clone, PartialEq)]
pub enum DeploymentOperation {
    Promote(drover_structs::DeploymentPromoteRequest),
    Fail { deployment_id: String },
    Pause(drover_structs::DeploymentPauseRequest),
    AllocHealth(drover_structs::DeploymentAllocHealthRequest),
}

/// What an agent without a server answers to the calls only a server serves.
pub const NO_SERVER: &str = "this agent runs no server";

/// A command to run inside a task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecRequest {
    pub alloc_id: String,
    pub task: String,
    /// The program and its arguments.
    pub command: Vec<String>,
    /// Whether the command gets a terminal.
    pub tty: bool,
}

pub use drover_structs::exec::{ExecInput, ExecOutput};

/// A running exec: input goes in, output comes out until `Exited`.
#[derive(Debug)]
pub struct ExecSession {
    pub input: tokio::sync::mpsc::Sender<ExecInput>,
    pub output: tokio::sync::mpsc::Receiver<ExecOutput>,
}

/// An [`ApiBackend`] made of a state reader (normally `drover_state::StateStore`) and the
/// agent's operations.
pub struct Composed<R, O> {
    pub reads: R,
    pub operations: O,
}

impl<R: StateReads, O: Send + Sync + 'static> StateReads for Composed<R, O> {
    fn table_index(&self, tables: &[Table]) -> u64 {
        self.reads.table_index(tables)
    }

    fn wait_for_change(
        &self,
        tables: &[Table],
        min_index: u64,
        deadline: tokio::time::Instant,
    ) -> impl Future<Output = ()> + Send {
        self.reads.wait_for_change(tables, min_index, deadline)
    }

    fn jobs(&self, namespace: &str, prefix: &str) -> Result<Vec<std::sync::Arc<Job>>, ApiError> {
        self.reads.jobs(namespace, prefix)
    }

    fn job(&self, namespace: &str, job_id: &str) -> Result<Option<Job>, ApiError> {
        self.reads.job(namespace, job_id)
    }

    fn job_versions(&self, namespace: &str, job_id: &str) -> Result<Vec<Job>, ApiError> {
        self.reads.job_versions(namespace, job_id)
    }

    fn job_summary(&self, namespace: &str, job_id: &str) -> Result<Option<JobSummary>, ApiError> {
        self.reads.job_summary(namespace, job_id)
    }

    fn job_allocations(&self, namespace: &str, job_id: &str) -> Result<Vec<Allocation>, ApiError> {
        self.reads.job_allocations(namespace, job_id)
    }

    fn job_evaluations(&self, namespace: &str, job_id: &str) -> Result<Vec<Evaluation>, ApiError> {
        self.reads.job_evaluations(namespace, job_id)
    }

    fn allocations(&self, namespace: &str, prefix: &str) -> Result<Vec<Allocation>, ApiError> {
        self.reads.allocations(namespace, prefix)
    }

    fn allocation(&self, alloc_id: &str) -> Result<Option<Allocation>, ApiError> {
        self.reads.allocation(alloc_id)
    }

    fn evaluations(&self, namespace: &str, prefix: &str) -> Result<Vec<Evaluation>, ApiError> {
        self.reads.evaluations(namespace, prefix)
    }

    fn evaluation(&self, eval_id: &str) -> Result<Option<Evaluation>, ApiError> {
        self.reads.evaluation(eval_id)
    }

    fn evaluation_allocations(&self, eval_id: &str) -> Result<Vec<Allocation>, ApiError> {
        self.reads.evaluation_allocations(eval_id)
    }

    fn nodes(&self, prefix: &str) -> Result<Vec<Node>, ApiError> {
        self.reads.nodes(prefix)
    }

    fn node(&self, node_id: &str) -> Result<Option<Node>, ApiError> {
        self.reads.node(node_id)
    }

    fn node_allocations(&self, node_id: &str) -> Result<Vec<Allocation>, ApiError> {
        self.reads.node_allocations(node_id)
    }

    fn node_alloc_modify_indexes(&self, node_id: &str) -> Result<BTreeMap<String, u64>, ApiError> {
        self.reads.node_alloc_modify_indexes(node_id)
    }

    fn deployments(&self, namespace: &str, prefix: &str) -> Result<Vec<Deployment>, ApiError> {
        self.reads.deployments(namespace, prefix)
    }

    fn deployment(&self, deployment_id: &str) -> Result<Option<Deployment>, ApiError> {
        self.reads.deployment(deployment_id)
    }

    fn job_deployments(&self, namespace: &str, job_id: &str) -> Result<Vec<Deployment>, ApiError> {
        self.reads.job_deployments(namespace, job_id)
    }

    fn subscribe_events(&self, from_index: u64, filter: EventFilter) -> EventSubscription {
        self.reads.subscribe_events(from_index, filter)
    }

    fn service_registrations(&self, namespace: &str) -> Result<Vec<ServiceRegistration>, ApiError> {
        self.reads.service_registrations(namespace)
    }

    fn service_registrations_by_name(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Vec<ServiceRegistration>, ApiError> {
        self.reads.service_registrations_by_name(namespace, name)
    }

    fn service_registrations_by_alloc(
        &self,
        alloc_id: &str,
    ) -> Result<Vec<ServiceRegistration>, ApiError> {
        self.reads.service_registrations_by_alloc(alloc_id)
    }

    fn service_registrations_by_job(
        &self,
        namespace: &str,
        job_id: &str,
    ) -> Result<Vec<ServiceRegistration>, ApiError> {
        self.reads.service_registrations_by_job(namespace, job_id)
    }

    fn job_scaling_events(
        &self,
        namespace: &str,
        job_id: &str,
    ) -> Result<Option<JobScalingEvents>, ApiError> {
        self.reads.job_scaling_events(namespace, job_id)
    }

    fn scaling_policies(
        &self,
        namespace: &str,
        id_prefix: &str,
        job: &str,
        policy_type: &str,
    ) -> Result<Vec<ScalingPolicy>, ApiError> {
        self.reads
            .scaling_policies(namespace, id_prefix, job, policy_type)
    }

    fn scaling_policy(&self, policy_id: &str) -> Result<Option<ScalingPolicy>, ApiError> {
        self.reads.scaling_policy(policy_id)
    }

    fn job_submission(
        &self,
        namespace: &str,
        job_id: &str,
        version: u64,
    ) -> Result<Option<JobSubmission>, ApiError> {
        self.reads.job_submission(namespace, job_id, version)
    }
}

impl<R: Send + Sync + 'static, O: AgentOperations> AgentOperations for Composed<R, O> {
    fn agent_info(&self) -> AgentInfo {
        self.operations.agent_info()
    }

    fn set_client_servers(&self, addresses: Vec<String>) -> Result<(), ApiError> {
        self.operations.set_client_servers(addresses)
    }

    fn agent_health(&self) -> impl Future<Output = AgentHealth> + Send {
        self.operations.agent_health()
    }

    fn register_job(
        &self,
        request: JobRegisterRequest,
    ) -> impl Future<Output = Result<JobRegisterResponse, ApiError>> + Send {
        self.operations.register_job(request)
    }

    fn plan_job(
        &self,
        request: JobPlanRequest,
    ) -> impl Future<Output = Result<JobPlanResponse, ApiError>> + Send {
        self.operations.plan_job(request)
    }

    fn deregister_job(
        &self,
        namespace: &str,
        job_id: &str,
        purge: bool,
        eval_priority: i64,
    ) -> impl Future<Output = Result<JobDeregisterResponse, ApiError>> + Send {
        self.operations
            .deregister_job(namespace, job_id, purge, eval_priority)
    }

    fn evaluate_job(
        &self,
        namespace: &str,
        job_id: &str,
    ) -> impl Future<Output = Result<JobRegisterResponse, ApiError>> + Send {
        self.operations.evaluate_job(namespace, job_id)
    }

    fn revert_job(
        &self,
        namespace: &str,
        request: drover_structs::JobRevertRequest,
    ) -> impl Future<Output = Result<JobRegisterResponse, ApiError>> + Send {
        self.operations.revert_job(namespace, request)
    }

    fn set_job_stability(
        &self,
        namespace: &str,
        request: drover_structs::JobStabilityRequest,
    ) -> impl Future<Output = Result<u64, ApiError>> + Send {
        self.operations.set_job_stability(namespace, request)
    }

    fn tag_job_version(
        &self,
        namespace: &str,
        request: drover_structs::JobApplyTagRequest,
    ) -> impl Future<Output = Result<drover_structs::JobTagResponse, ApiError>> + Send {
        self.operations.tag_job_version(namespace, request)
    }

    fn stop_alloc(
        &self,
        alloc_id: &str,
    ) -> impl Future<Output = Result<AllocStopResponse, ApiError>> + Send {
        self.operations.stop_alloc(alloc_id)
    }

    fn force_periodic(
        &self,
        namespace: &str,
        job_id: &str,
    ) -> impl Future<Output = Result<JobRegisterResponse, ApiError>> + Send {
        self.operations.force_periodic(namespace, job_id)
    }

    fn dispatch_job(
        &self,
        namespace: &str,
        job_id: &str,
        request: drover_structs::JobDispatchRequest,
        idempotency_token: &str,
    ) -> impl Future<Output = Result<drover_structs::JobDispatchResponse, ApiError>> + Send {
        self.operations
            .dispatch_job(namespace, job_id, request, idempotency_token)
    }

    fn scale_job(
        &self,
        namespace: &str,
        job_id: &str,
        request: drover_structs::ScalingRequest,
    ) -> impl Future<Output = Result<JobRegisterResponse, ApiError>> + Send {
        self.operations.scale_job(namespace, job_id, request)
    }

    fn update_node(
        &self,
        request: NodeOperation,
    ) -> impl Future<Output = Result<serde_json::Value, ApiError>> + Send {
        self.operations.update_node(request)
    }

    fn update_deployment(
        &self,
        request: DeploymentOperation,
    ) -> impl Future<Output = Result<drover_structs::DeploymentUpdateResponse, ApiError>> + Send
    {
        self.operations.update_deployment(request)
    }

    fn restart_alloc(
        &self,
        alloc_id: &str,
        task: Option<String>,
        all_tasks: bool,
    ) -> impl Future<Output = Result<(), ApiError>> + Send {
        self.operations.restart_alloc(alloc_id, task, all_tasks)
    }

    fn signal_alloc(
        &self,
        alloc_id: &str,
        task: Option<String>,
        signal: String,
    ) -> impl Future<Output = Result<(), ApiError>> + Send {
        self.operations.signal_alloc(alloc_id, task, signal)
    }

    fn gc_alloc(&self, alloc_id: &str) -> impl Future<Output = Result<(), ApiError>> + Send {
        self.operations.gc_alloc(alloc_id)
    }

    fn alloc_stats(
        &self,
        alloc_id: &str,
        task: Option<String>,
    ) -> impl Future<Output = Result<AllocResourceUsage, ApiError>> + Send {
        self.operations.alloc_stats(alloc_id, task)
    }

    fn alloc_dir(&self, alloc_id: &str) -> Result<PathBuf, ApiError> {
        self.operations.alloc_dir(alloc_id)
    }

    fn client_allocation(&self, alloc_id: &str) -> Result<Option<Allocation>, ApiError> {
        self.operations.client_allocation(alloc_id)
    }

    fn alloc_checks(
        &self,
        alloc_id: &str,
    ) -> Result<Option<BTreeMap<String, drover_structs::CheckQueryResult>>, ApiError> {
        self.operations.alloc_checks(alloc_id)
    }

    fn exec(
        &self,
        request: ExecRequest,
    ) -> impl Future<Output = Result<ExecSession, ApiError>> + Send {
        self.operations.exec(request)
    }

    fn host_stats(&self) -> impl Future<Output = Result<HostStats, ApiError>> + Send {
        self.operations.host_stats()
    }

    fn register_node(&self, node: Node) -> impl Future<Output = Result<Duration, ApiError>> + Send {
        self.operations.register_node(node)
    }

    fn update_node_status(
        &self,
        node_id: &str,
        status: &str,
    ) -> impl Future<Output = Result<Duration, ApiError>> + Send {
        self.operations.update_node_status(node_id, status)
    }

    fn update_allocs_from_client(
        &self,
        updates: Vec<Allocation>,
    ) -> impl Future<Output = Result<u64, ApiError>> + Send {
        self.operations.update_allocs_from_client(updates)
    }

    fn upsert_service_registrations(
        &self,
        services: Vec<ServiceRegistration>,
    ) -> impl Future<Output = Result<u64, ApiError>> + Send {
        self.operations.upsert_service_registrations(services)
    }

    fn delete_service_registrations(
        &self,
        ids: Vec<String>,
    ) -> impl Future<Output = Result<u64, ApiError>> + Send {
        self.operations.delete_service_registrations(ids)
    }

    fn delete_service_registration(
        &self,
        namespace: &str,
        id: &str,
    ) -> impl Future<Output = Result<u64, ApiError>> + Send {
        self.operations.delete_service_registration(namespace, id)
    }
}
