//! The in-process client↔server connection: the local client reaches the server through the
//! same [`ServerConn`] trait a remote client uses, implemented here by direct calls.
//!
//! Not here: any behaviour of its own; it maps types and errors.

use std::time::Duration;

use drover_client::server_conn::{AllocClientUpdate, NodeAllocations, ServerConn, ServerConnError};
use drover_server::{Server, ServerError};
use drover_structs::{Allocation, Node, ServiceRegistration};

/// The server, as the local client sees it.
pub struct InProcessServer(pub Server);

fn conn_error(error: ServerError) -> ServerConnError {
    match error {
        ServerError::NotFound(message) | ServerError::BadRequest(message) => {
            ServerConnError::Rejected { message }
        }
        error => ServerConnError::Internal {
            message: error.to_string(),
        },
    }
}

impl ServerConn for InProcessServer {
    async fn register_node(&self, node: Node) -> Result<Duration, ServerConnError> {
        self.0.register_node(node).await.map_err(conn_error)
    }

    async fn heartbeat(&self, node_id: &str, _status: &str) -> Result<Duration, ServerConnError> {
        match self.0.heartbeat_node(node_id).await {
            Ok(ttl) => Ok(ttl),
            Err(ServerError::NotFound(_)) => Err(ServerConnError::UnknownNode {
                node_id: node_id.to_owned(),
            }),
            Err(error) => Err(conn_error(error)),
        }
    }

    async fn node_allocs(
        &self,
        node_id: &str,
        min_index: u64,
        max_wait: Duration,
    ) -> Result<NodeAllocations, ServerConnError> {
        let (alloc_modify_indexes, index) = self
            .0
            .node_allocs(node_id, min_index, max_wait)
            .await
            .map_err(conn_error)?;
        Ok(NodeAllocations {
            alloc_modify_indexes,
            index,
        })
    }

    async fn get_allocs(&self, alloc_ids: Vec<String>) -> Result<Vec<Allocation>, ServerConnError> {
        Ok(self.0.allocs(&alloc_ids))
    }

    async fn update_allocs(&self, updates: Vec<AllocClientUpdate>) -> Result<(), ServerConnError> {
        let allocs = updates.into_iter().map(Allocation::from).collect();
        self.0
            .update_allocs_from_client(allocs)
            .await
            .map(|_| ())
            .map_err(conn_error)
    }

    async fn upsert_services(
        &self,
        registrations: Vec<ServiceRegistration>,
    ) -> Result<(), ServerConnError> {
        self.0
            .upsert_service_registrations(registrations)
            .await
            .map(|_| ())
            .map_err(conn_error)
    }

    async fn delete_services(&self, service_ids: Vec<String>) -> Result<(), ServerConnError> {
        self.0
            .delete_service_registrations(service_ids)
            .await
            .map(|_| ())
            .map_err(conn_error)
    }
}
