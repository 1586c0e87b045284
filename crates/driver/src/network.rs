//! Drivers that make a group's network namespace themselves (Nomad's `DriverNetworkManager`):
//! the docker driver's tasks cannot enter a namespace by path, so for a group with a docker
//! task the driver makes a pause container, the namespace's owner, which the client then
//! sets up through CNI and which every task of the group joins (docker tasks through the
//! engine's `container:<id>` network mode, the others by its namespace path).
//!
//! **Not** here: the CNI setup inside the namespace, or when to make and remove it (the
//! client's `network` module decides).

use std::path::PathBuf;

use crate::future::DriverFuture;

/// The namespace a driver made for an allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkSandbox {
    /// What owns the namespace (the pause container's ID); tasks of the same driver join it.
    pub sandbox_id: String,
    /// The namespace as a path another process can enter or bind (`/proc/<pid>/ns/net`).
    pub namespace: PathBuf,
}

/// A driver that makes (and removes) the network namespace of an allocation's group.
pub trait NetworkManager: Send + Sync {
    /// Makes the allocation's namespace owner, or finds the running one (never a second one).
    /// `hostname` is the group network's host name, given to the namespace's owner.
    fn create_network<'a>(
        &'a self,
        alloc_id: &'a str,
        hostname: Option<&'a str>,
    ) -> DriverFuture<'a, NetworkSandbox>;

    /// Removes the allocation's namespace owner, if there is one. Safe to repeat.
    fn destroy_network<'a>(&'a self, alloc_id: &'a str) -> DriverFuture<'a, ()>;
}
