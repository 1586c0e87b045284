//! The client↔server interface: the calls a node makes to the servers, and nothing else.
//!
//! A node registers itself, heartbeats, watches the set of allocations placed on it with a
//! blocking query, fetches the allocations that changed, reports the client-side status of
//! its allocations in batches, and registers and deregisters its allocations' services in the
//! built-in catalog. Both the in-process server adapter (`drover agent -dev`) and the
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

use drover_structs::client_rpc::{SignIdentitiesResponse, WorkloadIdentityRequest};
use drover_structs::service_catalog::ServiceRegistrationListStub;
use drover_structs::{
    AllocDeploymentStatus, Allocation, Node, ServiceRegistration, TaskState, Variable,
    VariableMetadata,
};

/// A blocking query's terms (Nomad's `?index=&wait=`): the read answers once the data's
/// index has moved past `min_index`, or after `max_wait` with what it has; a `min_index` of 0
/// answers at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Blocking {
    pub min_index: u64,
    pub max_wait: Duration,
}

/// An answer and the index it was read at (`X-Nomad-Index`), for the next blocking query.
#[derive(Debug, Clone, PartialEq)]
pub struct Indexed<T> {
    pub value: T,
    pub index: u64,
}

/// What a client reports about one of its allocations: the fields the client owns.
///
/// The server merges these into its copy of the allocation without touching the fields the
/// scheduler owns (`DesiredStatus`, `AllocModifyIndex`, …). The optional fields are left out
/// (and left alone by the server) until the client produces them.
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
    /// Deployment health of the allocation, once the client watches health.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deployment_status: Option<AllocDeploymentStatus>,
    /// The allocation's network status (bridge/CNI address), once the client sets networks up.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network_status: Option<serde_json::Value>,
}

/// A report as the server merges it: an allocation carrying only the client-owned fields
/// ([`Allocation::merge_client_update`]).
impl From<AllocClientUpdate> for Allocation {
    fn from(update: AllocClientUpdate) -> Self {
        Allocation {
            id: update.alloc_id,
            client_status: update.client_status,
            client_description: update.client_description,
            task_states: update.task_states,
            deployment_status: update.deployment_status,
            network_status: update.network_status,
            ..Allocation::default()
        }
    }
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
    /// The only servers that answered belong to another cluster than the one this node
    /// joined: their state knows nothing of this node's work, so they are not followed.
    #[error(
        "server {server} belongs to cluster {found}, not to cluster {joined} that this node \
         joined; not following it (the node keeps its allocations running)"
    )]
    ForeignCluster {
        server: String,
        joined: String,
        found: String,
    },
    /// The server refused the request as invalid; sending it again cannot help.
    #[error("request rejected: {message}")]
    Rejected { message: String },
}

impl ServerConnError {
    /// Whether the same call may succeed later. The client retries these with backoff and
    /// drops (after logging) the ones that are not.
    pub fn is_retryable(&self) -> bool {
        match self {
            // A server of this node's cluster may come back.
            Self::Unavailable { .. } | Self::Internal { .. } | Self::ForeignCluster { .. } => true,
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

    /// Adds or replaces service registrations in the catalog (Nomad's
    /// `ServiceRegistration.Upsert`), keyed by their `ID`; the server sets the indexes.
    fn upsert_services(
        &self,
        registrations: Vec<ServiceRegistration>,
    ) -> impl Future<Output = Result<(), ServerConnError>> + Send;

    /// Removes the service registrations with these IDs (Nomad's
    /// `ServiceRegistration.DeleteByID`); IDs the catalog does not hold are not an error.
    fn delete_services(
        &self,
        service_ids: Vec<String>,
    ) -> impl Future<Output = Result<(), ServerConnError>> + Send;

    /// Has the servers sign workload identities of tasks of allocations placed on this node
    /// (Nomad's `Alloc.SignIdentities`), authenticated by the node's secret ID. A connection
    /// to servers that hold no keyring (the node simulator's in-memory fake) refuses.
    fn sign_identities(
        &self,
        node_id: &str,
        node_secret_id: &str,
        requests: Vec<WorkloadIdentityRequest>,
    ) -> impl Future<Output = Result<SignIdentitiesResponse, ServerConnError>> + Send {
        let _ = (node_id, node_secret_id, requests);
        async {
            Err(ServerConnError::Rejected {
                message: "these servers do not sign workload identities".to_owned(),
            })
        }
    }

    /// The variable at `path` in `namespace`, read with a task's workload identity `token`
    /// (Nomad's implicit access applies); `None` when there is none. A template's `nomadVar`.
    fn read_variable(
        &self,
        token: &str,
        namespace: &str,
        path: &str,
        blocking: Blocking,
    ) -> impl Future<Output = Result<Indexed<Option<Variable>>, ServerConnError>> + Send {
        let _ = (token, namespace, path, blocking);
        async {
            Err(ServerConnError::Rejected {
                message: "these servers hold no variables".to_owned(),
            })
        }
    }

    /// The variables under `prefix` in `namespace` that `token` may read (`nomadVarList`).
    fn list_variables(
        &self,
        token: &str,
        namespace: &str,
        prefix: &str,
        blocking: Blocking,
    ) -> impl Future<Output = Result<Indexed<Vec<VariableMetadata>>, ServerConnError>> + Send {
        let _ = (token, namespace, prefix, blocking);
        async {
            Err(ServerConnError::Rejected {
                message: "these servers hold no variables".to_owned(),
            })
        }
    }

    /// The registrations of service `name` in `namespace` in the built-in catalog, read with a
    /// task's workload identity `token` (a template's `nomadService`); `choose` (`<n>|<key>`)
    /// has the servers pick `n` of them by rendezvous hashing, as `GET /v1/service/<name>`.
    fn read_service(
        &self,
        token: &str,
        namespace: &str,
        name: &str,
        choose: Option<&str>,
        blocking: Blocking,
    ) -> impl Future<Output = Result<Indexed<Vec<ServiceRegistration>>, ServerConnError>> + Send
    {
        let _ = (token, namespace, name, choose, blocking);
        async {
            Err(ServerConnError::Rejected {
                message: "these servers hold no service catalog".to_owned(),
            })
        }
    }

    /// The service names of `namespace` with their tags (`GET /v1/services`), read with a
    /// task's workload identity `token` (a template's `nomadServices`).
    fn list_services(
        &self,
        token: &str,
        namespace: &str,
        blocking: Blocking,
    ) -> impl Future<Output = Result<Indexed<Vec<ServiceRegistrationListStub>>, ServerConnError>> + Send
    {
        let _ = (token, namespace, blocking);
        async {
            Err(ServerConnError::Rejected {
                message: "these servers hold no service catalog".to_owned(),
            })
        }
    }
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

    fn upsert_services(
        &self,
        registrations: Vec<ServiceRegistration>,
    ) -> impl Future<Output = Result<(), ServerConnError>> + Send {
        S::upsert_services(self, registrations)
    }

    fn delete_services(
        &self,
        service_ids: Vec<String>,
    ) -> impl Future<Output = Result<(), ServerConnError>> + Send {
        S::delete_services(self, service_ids)
    }

    fn sign_identities(
        &self,
        node_id: &str,
        node_secret_id: &str,
        requests: Vec<WorkloadIdentityRequest>,
    ) -> impl Future<Output = Result<SignIdentitiesResponse, ServerConnError>> + Send {
        S::sign_identities(self, node_id, node_secret_id, requests)
    }

    fn read_variable(
        &self,
        token: &str,
        namespace: &str,
        path: &str,
        blocking: Blocking,
    ) -> impl Future<Output = Result<Indexed<Option<Variable>>, ServerConnError>> + Send {
        S::read_variable(self, token, namespace, path, blocking)
    }

    fn list_variables(
        &self,
        token: &str,
        namespace: &str,
        prefix: &str,
        blocking: Blocking,
    ) -> impl Future<Output = Result<Indexed<Vec<VariableMetadata>>, ServerConnError>> + Send {
        S::list_variables(self, token, namespace, prefix, blocking)
    }

    fn read_service(
        &self,
        token: &str,
        namespace: &str,
        name: &str,
        choose: Option<&str>,
        blocking: Blocking,
    ) -> impl Future<Output = Result<Indexed<Vec<ServiceRegistration>>, ServerConnError>> + Send
    {
        S::read_service(self, token, namespace, name, choose, blocking)
    }

    fn list_services(
        &self,
        token: &str,
        namespace: &str,
        blocking: Blocking,
    ) -> impl Future<Output = Result<Indexed<Vec<ServiceRegistrationListStub>>, ServerConnError>> + Send
    {
        S::list_services(self, token, namespace, blocking)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_update_travels_with_nomads_keys() {
        let update = AllocClientUpdate {
            alloc_id: "8e3a1f0c-0b1d-4c1e-9f0a-1b2c3d4e5f60".to_string(),
            client_status: "running".to_string(),
            client_description: "Tasks are running".to_string(),
            task_states: BTreeMap::from([("web".to_string(), TaskState::default())]),
            ..AllocClientUpdate::default()
        };
        let encoded = serde_json::to_value(&update).unwrap_or_default();
        let keys: Vec<&str> = encoded
            .as_object()
            .map(|object| object.keys().map(String::as_str).collect())
            .unwrap_or_default();
        assert_eq!(
            keys,
            ["ID", "ClientStatus", "ClientDescription", "TaskStates"]
        );
        assert_eq!(encoded["TaskStates"]["web"]["State"], "pending");
        let decoded: AllocClientUpdate =
            serde_json::from_value(encoded).unwrap_or_else(|error| panic!("decode: {error}"));
        assert_eq!(decoded, update);
    }

    #[test]
    fn only_a_rejected_request_is_final() {
        let unavailable = ServerConnError::Unavailable {
            message: "connection refused".to_string(),
        };
        let rejected = ServerConnError::Rejected {
            message: "bad node".to_string(),
        };
        assert!(unavailable.is_retryable());
        assert!(!rejected.is_retryable());
        assert_eq!(rejected.to_string(), "request rejected: bad node");
    }
}
