//! Who the node is: its persistent ID and secret, and the node record built from them and the
//! machine's fingerprint.

use std::path::Path;

use drover_shim::atomic_file::{Durability, write_atomically};
use drover_structs::{NODE_SCHEDULING_ELIGIBLE, NODE_STATUS_READY, Node, Timestamp};

use super::config::NodeConfig;
use super::error::ClientError;
use crate::fingerprint::{FingerprintInput, fingerprint_host};

/// The node record [`Client::start`](super::Client::start) registers: the identity (loaded, or created and
/// persisted on first start) and the machine's fingerprint. Blocking file I/O; callers that
/// want to overlap it with other start-up work run it on a blocking thread and hand the
/// result to [`Client::start_with_node`](super::Client::start_with_node).
pub fn build_node(config: &NodeConfig) -> Result<Node, ClientError> {
    let identity = if config.ephemeral {
        NodeIdentity::generate()
    } else {
        NodeIdentity::load_or_create(&config.client_state_dir())?
    };
    let fingerprint = fingerprint_host(&FingerprintInput {
        data_dir: config.data_dir.clone(),
        agent_version: config.agent_version.clone(),
        update_time: Timestamp::from_unix_nanos(config.clock.now_unix_nanos()),
    });
    let mut attributes = fingerprint.attributes;
    let mut resources = fingerprint.resources;
    let reserved_resources = config.resources.apply(&mut resources, &mut attributes);
    if let Some(address) = advertised_ip(&config.http_addr) {
        // The interface of the advertised address is the node's network for task-level
        // network asks, as Nomad's network fingerprint gives it.
        resources
            .networks
            .extend(crate::fingerprint::host_network(&address));
        attributes.insert("unique.network.ip-address".to_string(), address);
    }
    Ok(Node {
        id: identity.node_id,
        secret_id: identity.secret_id,
        datacenter: config.datacenter.clone(),
        name: config.name.clone(),
        http_addr: config.http_addr.clone(),
        node_pool: config.node_pool.clone(),
        node_class: config.node_class.clone(),
        attributes,
        meta: config.meta.clone(),
        node_resources: Some(resources),
        reserved_resources,
        drivers: fingerprint.drivers,
        scheduling_eligibility: if config.default_ineligible {
            drover_structs::NODE_SCHEDULING_INELIGIBLE.to_string()
        } else {
            NODE_SCHEDULING_ELIGIBLE.to_string()
        },
        status: NODE_STATUS_READY.to_string(),
        status_updated_at: config.clock.now_unix_nanos() / 1_000_000_000,
        ..Node::default()
    })
}

/// The IP address part of an HTTP address (`127.0.0.1:4646`, `[::1]:4646`), which Nomad
/// publishes as `unique.network.ip-address` (the node list's `Address`).
fn advertised_ip(http_addr: &str) -> Option<String> {
    let socket: std::net::SocketAddr = http_addr.parse().ok()?;
    Some(socket.ip().to_string())
}

/// The node's persistent identity: its ID and its secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeIdentity {
    pub node_id: String,
    pub secret_id: String,
}

impl NodeIdentity {
    /// A fresh identity, not persisted (dev mode without a data dir).
    pub fn generate() -> Self {
        Self {
            node_id: uuid::Uuid::new_v4().to_string(),
            secret_id: uuid::Uuid::new_v4().to_string(),
        }
    }

    /// Reads `node-id` and `secret-id` from the client state dir, creating and persisting them
    /// (atomically) on first start. A file holding something other than a UUID is replaced.
    pub fn load_or_create(client_state_dir: &Path) -> Result<Self, ClientError> {
        std::fs::create_dir_all(client_state_dir).map_err(|source| ClientError::NodeIdentity {
            path: client_state_dir.to_path_buf(),
            source,
        })?;
        Ok(Self {
            node_id: load_or_create_uuid(&client_state_dir.join("node-id"))?,
            secret_id: load_or_create_uuid(&client_state_dir.join("secret-id"))?,
        })
    }
}

fn load_or_create_uuid(path: &Path) -> Result<String, ClientError> {
    let identity_error = |source| ClientError::NodeIdentity {
        path: path.to_path_buf(),
        source,
    };
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let existing = text.trim();
            if drover_structs::ids::is_uuid(existing) {
                return Ok(existing.to_string());
            }
            tracing::warn!(path = %path.display(), "node identity file does not hold a UUID; replacing it");
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => return Err(identity_error(error)),
    }
    let fresh = uuid::Uuid::new_v4().to_string();
    write_atomically(path, fresh.as_bytes(), Durability::Flushed).map_err(identity_error)?;
    Ok(fresh)
}
