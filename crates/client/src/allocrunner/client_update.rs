//! [`AllocClientUpdate`]: what an alloc runner reports of its allocation, to its status sink and
//! to its health watcher.
//!
//! Not here: deriving the status (the alloc runner) or sending it to the server (the node's
//! status buffer, in the client↔server link's own shape).

use std::collections::BTreeMap;

use drover_structs::{AllocDeploymentStatus, TaskState};

/// An allocation's client-side status, as the server wants it.
#[derive(Debug, Clone, PartialEq)]
pub struct AllocClientUpdate {
    pub alloc_id: String,
    pub client_status: String,
    pub client_description: String,
    pub task_states: BTreeMap<String, TaskState>,
    /// `client_status` differs from the previous update (send on the next tick).
    pub client_status_changed: bool,
    /// The allocation's deployment health, once the client decided it (`Healthy`,
    /// `Timestamp`; `Canary` and `ModifyIndex` are the server's).
    pub deployment_status: Option<AllocDeploymentStatus>,
    /// Nomad's `NetworkStatus` of the group's own network, once set up.
    pub network_status: Option<serde_json::Value>,
}
