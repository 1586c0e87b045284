//! How a task runner has its workload identities signed: [`IdentitySigner`], an object-safe
//! seam over [`ServerConn::sign_identities`] (Nomad's `Alloc.SignIdentities`), carrying the
//! node's ID and secret so the servers sign only for allocations placed on this node; and
//! what a task reads with its identity (its templates' Nomad Variables and services).
//!
//! Not here: what is done with the tokens (the task runner's identity hook).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use drover_structs::client_rpc::{SignIdentitiesResponse, WorkloadIdentityRequest};
use drover_structs::service_catalog::ServiceRegistrationListStub;
use drover_structs::{ServiceRegistration, Variable, VariableMetadata};

use crate::server_conn::{Blocking, Indexed, ServerConn, ServerConnError};

/// A boxed signing future (the trait is object safe).
pub type SignFuture<'a> =
    Pin<Box<dyn Future<Output = Result<SignIdentitiesResponse, ServerConnError>> + Send + 'a>>;

/// A boxed variable read.
pub type VariableFuture<'a> = IndexedFuture<'a, Option<Variable>>;
/// A boxed variable listing.
pub type VariableListFuture<'a> = IndexedFuture<'a, Vec<VariableMetadata>>;
/// A boxed service read.
pub type ServiceFuture<'a> = IndexedFuture<'a, Vec<ServiceRegistration>>;
/// A boxed service listing.
pub type ServiceListFuture<'a> = IndexedFuture<'a, Vec<ServiceRegistrationListStub>>;

/// A boxed read answering a `T` with the index it was read at.
pub type IndexedFuture<'a, T> =
    Pin<Box<dyn Future<Output = Result<Indexed<T>, ServerConnError>> + Send + 'a>>;

/// Signs workload identities of this node's tasks, and reads variables and services with them.
pub trait IdentitySigner: Send + Sync + std::fmt::Debug {
    fn sign(&self, requests: Vec<WorkloadIdentityRequest>) -> SignFuture<'_>;
    /// [`ServerConn::read_variable`].
    fn read_variable<'a>(
        &'a self,
        token: &'a str,
        namespace: &'a str,
        path: &'a str,
        blocking: Blocking,
    ) -> VariableFuture<'a>;
    /// [`ServerConn::list_variables`].
    fn list_variables<'a>(
        &'a self,
        token: &'a str,
        namespace: &'a str,
        prefix: &'a str,
        blocking: Blocking,
    ) -> VariableListFuture<'a>;
    /// [`ServerConn::read_service`]; refused unless the signer reads services.
    fn read_service<'a>(
        &'a self,
        token: &'a str,
        namespace: &'a str,
        name: &'a str,
        choose: Option<&'a str>,
        blocking: Blocking,
    ) -> ServiceFuture<'a> {
        let _ = (token, namespace, name, choose, blocking);
        Box::pin(async {
            Err(ServerConnError::Rejected {
                message: "no servers to read services from".to_owned(),
            })
        })
    }
    /// [`ServerConn::list_services`]; refused unless the signer reads services.
    fn list_services<'a>(
        &'a self,
        token: &'a str,
        namespace: &'a str,
        blocking: Blocking,
    ) -> ServiceListFuture<'a> {
        let _ = (token, namespace, blocking);
        Box::pin(async {
            Err(ServerConnError::Rejected {
                message: "no servers to read services from".to_owned(),
            })
        })
    }
}

/// An [`IdentitySigner`] over a client↔server connection, as the node `node_id`.
pub struct ConnSigner<S: ServerConn> {
    conn: Arc<S>,
    node_id: String,
    node_secret_id: String,
}

impl<S: ServerConn> ConnSigner<S> {
    pub fn new(conn: Arc<S>, node_id: String, node_secret_id: String) -> Self {
        ConnSigner {
            conn,
            node_id,
            node_secret_id,
        }
    }
}

impl<S: ServerConn> std::fmt::Debug for ConnSigner<S> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("ConnSigner")
            .field("node_id", &self.node_id)
            .finish_non_exhaustive()
    }
}

impl<S: ServerConn> IdentitySigner for ConnSigner<S> {
    fn sign(&self, requests: Vec<WorkloadIdentityRequest>) -> SignFuture<'_> {
        Box::pin(
            self.conn
                .sign_identities(&self.node_id, &self.node_secret_id, requests),
        )
    }

    fn read_variable<'a>(
        &'a self,
        token: &'a str,
        namespace: &'a str,
        path: &'a str,
        blocking: Blocking,
    ) -> VariableFuture<'a> {
        Box::pin(self.conn.read_variable(token, namespace, path, blocking))
    }

    fn list_variables<'a>(
        &'a self,
        token: &'a str,
        namespace: &'a str,
        prefix: &'a str,
        blocking: Blocking,
    ) -> VariableListFuture<'a> {
        Box::pin(self.conn.list_variables(token, namespace, prefix, blocking))
    }

    fn read_service<'a>(
        &'a self,
        token: &'a str,
        namespace: &'a str,
        name: &'a str,
        choose: Option<&'a str>,
        blocking: Blocking,
    ) -> ServiceFuture<'a> {
        Box::pin(
            self.conn
                .read_service(token, namespace, name, choose, blocking),
        )
    }

    fn list_services<'a>(
        &'a self,
        token: &'a str,
        namespace: &'a str,
        blocking: Blocking,
    ) -> ServiceListFuture<'a> {
        Box::pin(self.conn.list_services(token, namespace, blocking))
    }
}

/// A signer for runners that have no servers (the crate's own tests): every request is
/// refused, so a task that asks for an identity fails its hook with that message.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoServersSigner;

impl IdentitySigner for NoServersSigner {
    fn sign(&self, _requests: Vec<WorkloadIdentityRequest>) -> SignFuture<'_> {
        Box::pin(async {
            Err(ServerConnError::Rejected {
                message: "no servers to sign workload identities".to_owned(),
            })
        })
    }

    fn read_variable<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
        _: &'a str,
        _: Blocking,
    ) -> VariableFuture<'a> {
        Box::pin(async {
            Err(ServerConnError::Rejected {
                message: "no servers to read variables from".to_owned(),
            })
        })
    }

    fn list_variables<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
        _: &'a str,
        _: Blocking,
    ) -> VariableListFuture<'a> {
        Box::pin(async {
            Err(ServerConnError::Rejected {
                message: "no servers to read variables from".to_owned(),
            })
        })
    }
}
