//! The client↔server interface: the five calls a node makes to the servers, and nothing else.
//!
//! A node registers itself, heartbeats, watches the set of allocations placed on it with a
//! blocking query, fetches the allocations that changed, and reports the client-side status of
//! its allocations in batches. Both the in-process server adapter (`drover agent -dev`) and the
//! remote HTTP client implement [`ServerConn`]; so does the node simulator's in-memory fake.
//!
//! **Design choice**: the trait uses native `async fn` in traits (edition 2024), spelled as
//! `fn … -> impl Future<Output = …> + Send` so the futures can be driven from spawned tokio
//! tasks. The client is generic over its connection (`Client<S: ServerConn, …>`), so no boxing
//! is paid per call. An agent that chooses its connection at run time wraps the two
//! implementations in an enum that forwards each call; that stays cheaper and simpler than
//! `dyn` with boxed futures.
//!
//! **Boundary**: no HTTP routes, no server internals. Shapes only; the wire encoding of the
//! remote implementation is its own business.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use drover_structs::{Allocation, Node, TaskState};

/// What a client reports about one of its allocations: the fields the client owns.
///
/// The server merges these into its copy of the allocation without touching the fields the
/// scheduler owns (`DesiredStatus`, `AllocModifyIndex`, …). Deployment health and network
/// status will join as further optional fields when the client produces them.
///
/// It travels as Nomad's JSON keys (`ID`, `ClientStatus`, `ClientDescription`, `TaskStates`), so
/// the remote implementation can send it as is.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct AllocClientUpdate {
    /// The allocation's ID.
    #[serde(rename = "ID")]
    pub alloc_id: String,
    /// The status derived from the task states (`pending`, `running`, `complete`, …; the
    /// `ALLOC_CLIENT_STATUS_*` constants).
    pub client_status: String,
    /// The human description that goes with `client_status` ("Tasks are running").
    pub client_description: String,
    /// The full state of every task, by task name.
    pub task_states: BTreeMap<String, TaskState>,
}

/// The answer to the blocking query on a node's allocations.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeAllocations {
    /// Every allocation placed on the node, with its `AllocModifyIndex` (bumped only by server
    /// side changes, so the node's own status reports do not wake its watcher).
    pub alloc_modify_indexes: BTreeMap<String, u64>,
    /// The state index the answer reflects; the next query passes it as `min_index`.
    pub index: u64,
}

/// Why a call to the servers failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServerConnError {
    /// The servers do not know this node (it was never registered, or was garbage collected);
    /// the client registers again.
    #[error("node {node_id} is not registered")]
    UnknownNode { node_id: String },
    /// No server could be reached, or it timed out.
    #[error("no server reachable: {message}")]
    Unavailable { message: String },
    /// A server answered with an internal failure (no leader yet, a write that failed).
    #[error("server error: {message}")]
    Internal { message: String },
    /// The server refused the request as invalid; sending it again cannot help.
    #[error("request rejected: {message}")]
    Rejected { message: String },
}

impl ServerConnError {
    /// Whether the same call may succeed later. The client retries these with backoff and
    /// drops (after logging) the ones that are not.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Unavailable { .. } | Self::Internal { .. } => true,
            // Retryable only after registering again, which the caller handles first.
            Self::UnknownNode { .. } => true,
            Self::Rejected { .. } => false,
        }
    }
}

/// The calls a node makes to the servers. Implementations are cheap to share (`Arc`) and are
/// called concurrently from the heartbeat loop, the allocation watcher and the status sender.
pub trait ServerConn: Send + Sync + 'static {
    /// Registers (or re-registers, replacing the previous record) the node; answers the
    /// heartbeat TTL the node must beat within.
    fn register_node(
        &self,
        node: Node,
    ) -> impl Future<Output = Result<Duration, ServerConnError>> + Send;

    /// Reports the node alive with the given status (`NODE_STATUS_READY`, …); answers the next
    /// heartbeat TTL.
    fn heartbeat(
        &self,
        node_id: &str,
        status: &str,
    ) -> impl Future<Output = Result<Duration, ServerConnError>> + Send;

    /// A blocking query: answers at once if the node's allocations changed after `min_index`,
    /// otherwise waits up to `max_wait` for a change and then answers the current set anyway.
    fn node_allocs(
        &self,
        node_id: &str,
        min_index: u64,
        max_wait: Duration,
    ) -> impl Future<Output = Result<NodeAllocations, ServerConnError>> + Send;

    /// The full allocations with these IDs; IDs the server does not know are left out.
    fn get_allocs(
        &self,
        alloc_ids: Vec<String>,
    ) -> impl Future<Output = Result<Vec<Allocation>, ServerConnError>> + Send;

    /// Applies a batch of client-side status updates.
    fn update_allocs(
        &self,
        updates: Vec<AllocClientUpdate>,
    ) -> impl Future<Output = Result<(), ServerConnError>> + Send;
}

/// A shared connection is a connection: lets callers hand out `Arc<S>` where an `S` is wanted.
impl<S: ServerConn> ServerConn for Arc<S> {
    fn register_node(
        &self,
        node: Node,
    ) -> impl Future<Output = Result<Duration, ServerConnError>> + Send {
        S::register_node(self, node)
    }

    fn heartbeat(
        &self,
        node_id: &str,
        status: &str,
    ) -> impl Future<Output = Result<Duration, ServerConnError>> + Send {
        S::heartbeat(self, node_id, status)
    }

    fn node_allocs(
        &self,
        node_id: &str,
        min_index: u64,
        max_wait: Duration,
    ) -> impl Future<Output = Result<NodeAllocations, ServerConnError>> + Send {
        S::node_allocs(self, node_id, min_index, max_wait)
    }

    fn get_allocs(
        &self,
        alloc_ids: Vec<String>,
    ) -> impl Future<Output = Result<Vec<Allocation>, ServerConnError>> + Send {
        S::get_allocs(self, alloc_ids)
    }

    fn update_allocs(
        &self,
        updates: Vec<AllocClientUpdate>,
    ) -> impl Future<Output = Result<(), ServerConnError>> + Send {
        S::update_allocs(self, updates)
    }
}
