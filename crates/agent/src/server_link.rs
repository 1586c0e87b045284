//! How the agent's client reaches its servers, chosen at start: the server in this process
//! (`-dev`, or `-server -client`), or server agents elsewhere over HTTP (`-client
//! -servers=ADDR[,ADDR]`, or `client { servers = [...] }`).
//!
//! [`AgentServerConn`] is the enum the [`ServerConn`] module docs call for: each call forwards
//! to the chosen implementation, so the client stays generic without boxing its futures.
//! Not here: the behaviour of either connection.

use std::sync::Arc;
use std::time::Duration;

use drover_client::http_conn::HttpServerConn;
use drover_client::server_conn::{
    AllocClientUpdate, Blocking, Indexed, NodeAllocations, ServerConn, ServerConnError,
};
use drover_structs::client_rpc::{SignIdentitiesResponse, WorkloadIdentityRequest};
use drover_structs::service_catalog::ServiceRegistrationListStub;
use drover_structs::{Allocation, Node, ServiceRegistration, Variable, VariableMetadata};

use super::in_process::InProcessServer;

/// The agent's connection to its servers.
pub enum AgentServerConn {
    /// The server runs in this agent.
    InProcess(InProcessServer),
    /// The servers are other agents, reached over their HTTP API (shared with the agent's
    /// token resolver, `client_acl`).
    Remote(Arc<HttpServerConn>),
}

impl ServerConn for AgentServerConn {
    async fn register_node(&self, node: Node) -> Result<Duration, ServerConnError> {
        match self {
            AgentServerConn::InProcess(conn) => conn.register_node(node).await,
            AgentServerConn::Remote(conn) => conn.register_node(node).await,
        }
    }

    async fn heartbeat(&self, node_id: &str, status: &str) -> Result<Duration, ServerConnError> {
        match self {
            AgentServerConn::InProcess(conn) => conn.heartbeat(node_id, status).await,
            AgentServerConn::Remote(conn) => conn.heartbeat(node_id, status).await,
        }
    }

    async fn node_allocs(
        &self,
        node_id: &str,
        min_index: u64,
        max_wait: Duration,
    ) -> Result<NodeAllocations, ServerConnError> {
        match self {
            AgentServerConn::InProcess(conn) => {
                conn.node_allocs(node_id, min_index, max_wait).await
            }
            AgentServerConn::Remote(conn) => conn.node_allocs(node_id, min_index, max_wait).await,
        }
    }

    async fn get_allocs(&self, alloc_ids: Vec<String>) -> Result<Vec<Allocation>, ServerConnError> {
        match self {
            AgentServerConn::InProcess(conn) => conn.get_allocs(alloc_ids).await,
            AgentServerConn::Remote(conn) => conn.get_allocs(alloc_ids).await,
        }
    }

    async fn update_allocs(&self, updates: Vec<AllocClientUpdate>) -> Result<(), ServerConnError> {
        match self {
            AgentServerConn::InProcess(conn) => conn.update_allocs(updates).await,
            AgentServerConn::Remote(conn) => conn.update_allocs(updates).await,
        }
    }

    async fn upsert_services(
        &self,
        registrations: Vec<ServiceRegistration>,
    ) -> Result<(), ServerConnError> {
        match self {
            AgentServerConn::InProcess(conn) => conn.upsert_services(registrations).await,
            AgentServerConn::Remote(conn) => conn.upsert_services(registrations).await,
        }
    }

    async fn delete_services(&self, service_ids: Vec<String>) -> Result<(), ServerConnError> {
        match self {
            AgentServerConn::InProcess(conn) => conn.delete_services(service_ids).await,
            AgentServerConn::Remote(conn) => conn.delete_services(service_ids).await,
        }
    }

    async fn sign_identities(
        &self,
        node_id: &str,
        node_secret_id: &str,
        requests: Vec<WorkloadIdentityRequest>,
    ) -> Result<SignIdentitiesResponse, ServerConnError> {
        match self {
            AgentServerConn::InProcess(conn) => {
                conn.sign_identities(node_id, node_secret_id, requests)
                    .await
            }
            AgentServerConn::Remote(conn) => {
                conn.sign_identities(node_id, node_secret_id, requests)
                    .await
            }
        }
    }

    async fn read_variable(
        &self,
        token: &str,
        namespace: &str,
        path: &str,
        blocking: Blocking,
    ) -> Result<Indexed<Option<Variable>>, ServerConnError> {
        match self {
            AgentServerConn::InProcess(conn) => {
                conn.read_variable(token, namespace, path, blocking).await
            }
            AgentServerConn::Remote(conn) => {
                conn.read_variable(token, namespace, path, blocking).await
            }
        }
    }

    async fn list_variables(
        &self,
        token: &str,
        namespace: &str,
        prefix: &str,
        blocking: Blocking,
    ) -> Result<Indexed<Vec<VariableMetadata>>, ServerConnError> {
        match self {
            AgentServerConn::InProcess(conn) => {
                conn.list_variables(token, namespace, prefix, blocking)
                    .await
            }
            AgentServerConn::Remote(conn) => {
                conn.list_variables(token, namespace, prefix, blocking)
                    .await
            }
        }
    }

    async fn read_service(
        &self,
        token: &str,
        namespace: &str,
        name: &str,
        choose: Option<&str>,
        blocking: Blocking,
    ) -> Result<Indexed<Vec<ServiceRegistration>>, ServerConnError> {
        match self {
            AgentServerConn::InProcess(conn) => {
                conn.read_service(token, namespace, name, choose, blocking)
                    .await
            }
            AgentServerConn::Remote(conn) => {
                conn.read_service(token, namespace, name, choose, blocking)
                    .await
            }
        }
    }

    async fn list_services(
        &self,
        token: &str,
        namespace: &str,
        blocking: Blocking,
    ) -> Result<Indexed<Vec<ServiceRegistrationListStub>>, ServerConnError> {
        match self {
            AgentServerConn::InProcess(conn) => {
                conn.list_services(token, namespace, blocking).await
            }
            AgentServerConn::Remote(conn) => conn.list_services(token, namespace, blocking).await,
        }
    }
}
