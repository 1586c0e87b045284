//! What a client agent hands to a Connect sidecar proxy: the JSON file the proxy task reads at
//! start (`drover connect-proxy -config <path>`).

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// One sidecar proxy's configuration, written by the client into the task's secrets dir.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectProxyConfig {
    /// The allocation the sidecar belongs to.
    pub alloc_id: String,
    /// The job's namespace (the SPIFFE id's `ns`).
    pub namespace: String,
    /// The node's datacenter (the SPIFFE id's `dc`).
    pub datacenter: String,
    /// The service this sidecar fronts (the `svc` of its SPIFFE id).
    pub service: String,
    /// Where the sidecar accepts mesh (mTLS) connections, inside the group's namespace:
    /// `0.0.0.0:<to>` of the `connect-proxy-<service>` port.
    pub public_listener: SocketAddr,
    /// Where accepted connections go: `127.0.0.1:<the service's port inside the namespace>`.
    pub local_service: SocketAddr,
    /// One listener each, inside the group's namespace.
    pub upstreams: Vec<ConnectUpstream>,
    /// A Unix socket in the allocation directory that carries HTTP to the local agent's API
    /// (the namespace cannot reach the host's loopback). The proxy fetches roots, its leaf
    /// certificate, the catalog and intentions through it.
    pub agent_socket: PathBuf,
    /// The file holding the sidecar task's workload identity (a JWT), sent as
    /// `X-Nomad-Token` on every call to the agent.
    pub identity_token_file: PathBuf,
    /// The host's address on the group's bridge. A destination registered at a loopback
    /// address (agents bound to 127.0.0.1) is dialled here instead, at the same port: the
    /// host's port mappings answer on it.
    pub host_gateway: Option<IpAddr>,
}

/// An upstream: a local listener whose connections go to a healthy instance of a mesh service.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectUpstream {
    pub destination_name: String,
    pub destination_namespace: String,
    /// Empty: the local datacenter.
    pub datacenter: String,
    pub local_bind_address: IpAddr,
    pub local_bind_port: u16,
}
