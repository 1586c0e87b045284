//! Where a node keeps its dynamic metadata (`/v1/client/metadata`): the static metadata of
//! the agent configuration, and what the API applied over it, in memory and — unless the node
//! is ephemeral — in `<client state dir>/node-meta.json`, written atomically and durably before
//! an apply is answered or registered, so a restarted node registers what it last answered.
//!
//! Not here: the apply itself (`meta`), what the keys mean (`drover_structs::node_meta`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use drover_shim::atomic_file::{Durability, write_atomically};
use drover_structs::node_meta::restored_dynamic;

use super::error::ClientError;

/// The file the dynamic metadata is kept in, under the client state dir.
pub const NODE_META_FILE: &str = "node-meta.json";

/// The node's metadata: static (configuration) and dynamic (applied through the API).
#[derive(Debug)]
pub struct NodeMetaStore {
    pub(super) static_meta: BTreeMap<String, String>,
    /// Serializes applies; holds the dynamic metadata as last persisted.
    pub(super) dynamic: tokio::sync::Mutex<BTreeMap<String, Option<String>>>,
    /// `None` for an ephemeral node (dev mode without a data dir): kept in memory only.
    pub(super) path: Option<PathBuf>,
}

impl NodeMetaStore {
    /// Loads the dynamic metadata of `client_state_dir` (none yet: empty) over `static_meta`;
    /// a remembered unset of a key that is no longer static is forgotten and the file written
    /// back. An unreadable file stops the node with its path.
    pub fn load(
        static_meta: BTreeMap<String, String>,
        client_state_dir: Option<&Path>,
    ) -> Result<Self, ClientError> {
        let Some(dir) = client_state_dir else {
            return Ok(Self {
                static_meta,
                dynamic: tokio::sync::Mutex::new(BTreeMap::new()),
                path: None,
            });
        };
        let path = dir.join(NODE_META_FILE);
        let stored: BTreeMap<String, Option<String>> = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|error| ClientError::NodeMeta {
                path: path.clone(),
                message: format!(
                    "{error}; remove the file to start the node without its dynamic metadata"
                ),
            })?,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(error) => {
                return Err(ClientError::NodeMeta {
                    path,
                    message: error.to_string(),
                });
            }
        };
        let dynamic = restored_dynamic(&static_meta, stored.clone());
        if dynamic != stored {
            persist(&path, &dynamic)?;
        }
        Ok(Self {
            static_meta,
            dynamic: tokio::sync::Mutex::new(dynamic),
            path: Some(path),
        })
    }
}

/// Writes `dynamic` to `path` atomically and durably.
pub(super) fn persist(
    path: &Path,
    dynamic: &BTreeMap<String, Option<String>>,
) -> Result<(), ClientError> {
    let bytes = serde_json::to_vec(dynamic).map_err(|error| ClientError::NodeMeta {
        path: path.to_path_buf(),
        message: error.to_string(),
    })?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|error| ClientError::NodeMeta {
            path: path.to_path_buf(),
            message: error.to_string(),
        })?;
    }
    write_atomically(path, &bytes, Durability::Flushed).map_err(|error| ClientError::NodeMeta {
        path: path.to_path_buf(),
        message: error.to_string(),
    })
}
