//! Dynamic node metadata on the node (Nomad's client `NodeMeta.Read` / `NodeMeta.Apply`): an
//! apply is checked, laid over the stored dynamic metadata, persisted, put into the node
//! record, and the node registers again at once, so the servers schedule on it (Nomad batches
//! these updates for up to 10 seconds; drover registers right away, as for any node change).
//!
//! Not here: storage (`meta_store`), how a request reaches this node (the agent).

use drover_structs::node_meta::{
    NodeMetaApplyRequest, NodeMetaResponse, apply_dynamic, merged_meta,
};

use super::client::Client;
use super::error::ClientError;
use super::meta_store::persist;
use super::runner::AllocRunnerFactory;
use crate::server_conn::ServerConn;

impl<S: ServerConn, F: AllocRunnerFactory> Client<S, F> {
    /// The node's metadata: merged, dynamic and static.
    pub async fn node_meta(&self) -> NodeMetaResponse {
        let dynamic = self.meta.dynamic.lock().await.clone();
        NodeMetaResponse {
            meta: self.node().meta.clone(),
            dynamic,
            r#static: self.meta.static_meta.clone(),
        }
    }

    /// Applies `request.meta` (a `null` unsets a key): checked as Nomad checks it (an
    /// invalid request is `InvalidNodeMeta`, a 400), persisted before anything else changes,
    /// then registered with the servers. Answers the metadata as it now is.
    pub async fn apply_node_meta(
        &self,
        request: &NodeMetaApplyRequest,
    ) -> Result<NodeMetaResponse, ClientError> {
        request.validate().map_err(ClientError::InvalidNodeMeta)?;
        let mut dynamic = self.meta.dynamic.lock().await;
        let next = apply_dynamic(&self.meta.static_meta, &dynamic, &request.meta);
        if let Some(path) = self.meta.path.clone() {
            let to_write = next.clone();
            tokio::task::spawn_blocking(move || persist(&path, &to_write))
                .await
                .map_err(|error| ClientError::NodeMeta {
                    path: self.meta.path.clone().unwrap_or_default(),
                    message: error.to_string(),
                })??;
        }
        *dynamic = next.clone();
        let merged = merged_meta(&self.meta.static_meta, &next);
        self.update_node(|node| {
            if node.meta == merged {
                return false;
            }
            node.meta = merged.clone();
            true
        });
        Ok(NodeMetaResponse {
            meta: merged,
            dynamic: next,
            r#static: self.meta.static_meta.clone(),
        })
    }
}
