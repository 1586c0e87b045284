//! The in-process client↔server connection: the local client reaches the server through the
//! same [`ServerConn`] trait a remote client uses, implemented here by direct calls.
//!
//! Not here: any behaviour of its own; it maps types and errors.

use std::time::Duration;

use drover_client::server_conn::{
    AllocClientUpdate, Blocking, Indexed, NodeAllocations, ServerConn, ServerConnError,
};
use drover_state::{StateStore, Table};
use std::sync::Arc;

use drover_server::identity::{IdentityError, sign_for_node};
use drover_server::keyring::Keyring;
use drover_server::{Clock, Server, ServerError};
use drover_structs::client_rpc::{SignIdentitiesResponse, WorkloadIdentityRequest};
use drover_structs::service_catalog::ServiceRegistrationListStub;
use drover_structs::{Allocation, Node, ServiceRegistration, Variable, VariableMetadata};

/// The server, as the local client sees it, with the keyring that signs its identities
/// (`None` only for a simulated fleet, whose tasks ask for none).
pub struct InProcessServer {
    pub server: Server,
    pub keyring: Option<Arc<Keyring>>,
    pub clock: Arc<dyn Clock>,
    /// Called for each of the client's blocking allocation watches (the agent counts them as
    /// `nomad.nomad.rpc.query`).
    pub on_query: Option<Arc<dyn Fn() + Send + Sync>>,
}

impl InProcessServer {
    /// A server whose clients get no workload identities signed.
    pub fn without_keyring(server: Server) -> Self {
        InProcessServer {
            server,
            keyring: None,
            clock: Arc::new(drover_server::SystemClock),
            on_query: None,
        }
    }
}

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
        self.server.register_node(node).await.map_err(conn_error)
    }

    async fn heartbeat(&self, node_id: &str, _status: &str) -> Result<Duration, ServerConnError> {
        match self.server.heartbeat_node(node_id).await {
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
        if let Some(on_query) = &self.on_query {
            on_query();
        }
        let (alloc_modify_indexes, index) = self
            .server
            .node_allocs(node_id, min_index, max_wait)
            .await
            .map_err(conn_error)?;
        Ok(NodeAllocations {
            alloc_modify_indexes,
            index,
        })
    }

    async fn get_allocs(&self, alloc_ids: Vec<String>) -> Result<Vec<Allocation>, ServerConnError> {
        Ok(self.server.allocs(&alloc_ids))
    }

    async fn update_allocs(&self, updates: Vec<AllocClientUpdate>) -> Result<(), ServerConnError> {
        let allocs = updates.into_iter().map(Allocation::from).collect();
        self.server
            .update_allocs_from_client(allocs)
            .await
            .map(|_| ())
            .map_err(conn_error)
    }

    async fn upsert_services(
        &self,
        registrations: Vec<ServiceRegistration>,
    ) -> Result<(), ServerConnError> {
        self.server
            .upsert_service_registrations(registrations)
            .await
            .map(|_| ())
            .map_err(conn_error)
    }

    async fn delete_services(&self, service_ids: Vec<String>) -> Result<(), ServerConnError> {
        self.server
            .delete_service_registrations(service_ids)
            .await
            .map(|_| ())
            .map_err(conn_error)
    }

    async fn sign_identities(
        &self,
        node_id: &str,
        node_secret_id: &str,
        requests: Vec<WorkloadIdentityRequest>,
    ) -> Result<SignIdentitiesResponse, ServerConnError> {
        let Some(keyring) = &self.keyring else {
            return Err(ServerConnError::Rejected {
                message: "this server has no keyring to sign workload identities".to_owned(),
            });
        };
        sign_for_node(
            keyring,
            self.server.state(),
            node_id,
            node_secret_id,
            requests,
            self.clock.now_unix_ns(),
        )
        .map_err(|error| match error {
            IdentityError::NodeNotAuthenticated(_) => ServerConnError::Rejected {
                message: error.to_string(),
            },
            error => ServerConnError::Internal {
                message: error.to_string(),
            },
        })
    }

    async fn read_variable(
        &self,
        token: &str,
        namespace: &str,
        path: &str,
        blocking: Blocking,
    ) -> Result<Indexed<Option<Variable>>, ServerConnError> {
        let keyring = self.keyring_for_variables()?;
        let workload = self.workload(keyring, token)?;
        if !crate::variables_http::workload_may_read(&workload, namespace, path) {
            return Err(ServerConnError::Rejected {
                message: "Permission denied".to_owned(),
            });
        }
        let index = block_on_table(self.server.state(), Table::Variables, blocking).await;
        let value =
            drover_server::variables::read_variable(keyring, self.server.state(), namespace, path)
                .map_err(|error| ServerConnError::Internal {
                    message: error.to_string(),
                })?;
        Ok(Indexed { value, index })
    }

    async fn list_variables(
        &self,
        token: &str,
        namespace: &str,
        prefix: &str,
        blocking: Blocking,
    ) -> Result<Indexed<Vec<VariableMetadata>>, ServerConnError> {
        let keyring = self.keyring_for_variables()?;
        let workload = self.workload(keyring, token)?;
        let index = block_on_table(self.server.state(), Table::Variables, blocking).await;
        let value = self
            .server
            .state()
            .variables(Some(namespace), prefix)
            .iter()
            .filter(|stored| {
                crate::variables_http::workload_may_read(
                    &workload,
                    &stored.meta.namespace,
                    &stored.meta.path,
                )
            })
            .map(|stored| stored.meta.clone())
            .collect();
        Ok(Indexed { value, index })
    }

    async fn read_service(
        &self,
        token: &str,
        namespace: &str,
        name: &str,
        choose: Option<&str>,
        blocking: Blocking,
    ) -> Result<Indexed<Vec<ServiceRegistration>>, ServerConnError> {
        self.workload_in(token, namespace)?;
        let index =
            block_on_table(self.server.state(), Table::ServiceRegistrations, blocking).await;
        let mut services: Vec<ServiceRegistration> = self
            .server
            .state()
            .service_registrations_by_name(namespace, name)
            .iter()
            .map(|service| ServiceRegistration::clone(service))
            .collect();
        services.sort_by(|a, b| a.id.cmp(&b.id));
        let value = match choose {
            Some(parameter) => drover_structs::service_catalog::choose_services(
                services, parameter,
            )
            .map_err(|error| ServerConnError::Rejected {
                message: format!("failed to choose services: {error}"),
            })?,
            None => services,
        };
        Ok(Indexed { value, index })
    }

    async fn list_services(
        &self,
        token: &str,
        namespace: &str,
        blocking: Blocking,
    ) -> Result<Indexed<Vec<ServiceRegistrationListStub>>, ServerConnError> {
        self.workload_in(token, namespace)?;
        let index =
            block_on_table(self.server.state(), Table::ServiceRegistrations, blocking).await;
        let registrations = self.server.state().service_registrations(Some(namespace));
        Ok(Indexed {
            value: drover_structs::service_catalog::service_list(
                registrations.iter().map(std::convert::AsRef::as_ref),
            ),
            index,
        })
    }
}

/// Waits as a blocking query on `table` (until its index passes `blocking.min_index`, or
/// `max_wait`, which is held to the HTTP API's ten minutes), and answers the table's index.
async fn block_on_table(state: &StateStore, table: Table, blocking: Blocking) -> u64 {
    if blocking.min_index > 0 {
        let deadline =
            tokio::time::Instant::now() + blocking.max_wait.min(Duration::from_secs(10 * 60));
        while state.indexes().table(table) <= blocking.min_index
            && tokio::time::Instant::now() < deadline
        {
            state
                .wait_for_change(&[table], blocking.min_index, deadline)
                .await;
        }
    }
    state.indexes().table(table).max(1)
}

impl InProcessServer {
    fn keyring_for_variables(&self) -> Result<&Arc<Keyring>, ServerConnError> {
        self.keyring
            .as_ref()
            .ok_or_else(|| ServerConnError::Rejected {
                message: "this server has no keyring to open variables".to_owned(),
            })
    }

    /// Refuses `token` unless it is a workload identity of `namespace`: a task reads the
    /// service catalog of its own namespace, as Nomad's service endpoints allow.
    fn workload_in(&self, token: &str, namespace: &str) -> Result<(), ServerConnError> {
        let keyring = self.keyring_for_variables()?;
        let workload = self.workload(keyring, token)?;
        if workload.namespace != namespace {
            return Err(ServerConnError::Rejected {
                message: "Permission denied".to_owned(),
            });
        }
        Ok(())
    }

    /// The workload `token` names, or the refusal a remote caller would get (403).
    fn workload(
        &self,
        keyring: &Keyring,
        token: &str,
    ) -> Result<drover_server::identity::WorkloadIdentity, ServerConnError> {
        drover_server::identity::verify_workload_identity(keyring, self.server.state(), token)
            .map_err(|_| ServerConnError::Rejected {
                message: "Permission denied".to_owned(),
            })
    }
}
