//! [`ApiBackend`]: everything the HTTP layer needs from the agent, as one narrow trait. Reads go
//! straight to the state store (synchronous snapshots plus a blocking wait on table indexes);
//! writes go to the server (job register/deregister/evaluate, alloc stop) and to the local
//! client node (restart, signal, GC, stats, the alloc dir for logs and files).
//!
//! The real agent implements it with an adapter over `drover_server::Server` and
//! `drover_client::Client`; tests implement it in memory (the `memory` module, feature `memory-backend`). Not here: HTTP
//! details.
//!
//! The adapter is thin by design:
//! - reads: `StateStore::{jobs (namespace "*" → None), job, job_versions, job_summary,
//!   allocs_by_job, evals_by_job, allocs, alloc, evals, eval, allocs_by_eval, nodes, node,
//!   allocs_by_node}` (cloning out of the `Arc`s), filtering list reads by namespace;
//! - `table_index` / `wait_for_change`: `StateStore::indexes().max_of(..)` and
//!   `StateStore::wait_for_change`, with [`Table::Deployments`] mapped to no table (it never
//!   changes, so a blocking read of it waits out its time);
//! - writes: `Server::{register_job, deregister_job, evaluate_job, stop_alloc}` with
//!   `ServerError::{NotFound, BadRequest, Internal}` → [`ApiError::{NotFound, BadRequest,
//!   Internal}`](ApiError);
//! - client-node operations: `Client::{restart, signal, gc}` with `ClientErrorKind::{NotFound,
//!   BadRequest, Unavailable, Internal}` → the [`ApiError`] variant of the same name; the alloc
//!   dir is `<data dir>/alloc/<alloc id>`.

use std::future::Future;
use std::path::PathBuf;

use drover_structs::{
    AllocResourceUsage, AllocStopResponse, Allocation, Evaluation, Job, JobDeregisterResponse,
    JobRegisterRequest, JobRegisterResponse, JobSummary, Node,
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
    /// The address reported as the leader and the only peer (`127.0.0.1:4647`).
    pub server_addr: String,
    pub server_enabled: bool,
    pub client_enabled: bool,
    /// The local client node's ID, empty without a client.
    pub node_id: String,
}

/// The agent as the HTTP layer sees it. A namespace of `*` means every namespace.
pub trait ApiBackend: Send + Sync + 'static {
    fn agent_info(&self) -> AgentInfo;

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
    fn jobs(&self, namespace: &str, prefix: &str) -> Result<Vec<Job>, ApiError>;
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

    // Server writes (`drover_server::Server`).

    /// Registers a canonicalized, validated job.
    fn register_job(
        &self,
        request: JobRegisterRequest,
    ) -> impl Future<Output = Result<JobRegisterResponse, ApiError>> + Send;
    fn deregister_job(
        &self,
        namespace: &str,
        job_id: &str,
        purge: bool,
    ) -> impl Future<Output = Result<JobDeregisterResponse, ApiError>> + Send;
    fn evaluate_job(
        &self,
        namespace: &str,
        job_id: &str,
    ) -> impl Future<Output = Result<JobRegisterResponse, ApiError>> + Send;
    fn stop_alloc(
        &self,
        alloc_id: &str,
    ) -> impl Future<Output = Result<AllocStopResponse, ApiError>> + Send;

    // Client-node operations (`drover_client::Client`). Unknown allocations are
    // `NotFound("Unknown allocation \"<id>\"")`; unknown tasks or signals are `BadRequest`.

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
}
