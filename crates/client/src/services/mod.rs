//! Service registration from the client: what the task and group service hooks register in the
//! built-in catalog (Nomad's native service discovery), and how it gets there.
//!
//! - [`ServiceRegistrar`]: the narrow, object-safe seam to the catalog (upsert and delete by ID),
//!   implemented over any [`ServerConn`] by [`ConnRegistrar`].
//! - [`workload`]: one workload's services (a task's, or a group's) turned into
//!   [`ServiceRegistration`]s — `${…}` interpolated, `canary_tags` for canaries, addresses by
//!   Nomad's `address_mode` rules.
//! - [`sync`]: one workload's registrations kept in line with what is wanted, retried with backoff
//!   while the server cannot be reached.
//!
//! Both providers register here: `provider = "nomad"`, and `provider = "consul"` (Nomad's default)
//! because this agent has no Consul; the server is the one to warn about the latter.
//!
//! **Not** here: when a workload is registered (the task hook in
//! `taskrunner::hooks::services`, the group hook in `allocrunner::group_services`), the catalog
//! itself (the server), health checks.

pub mod sync;
pub mod workload;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use drover_structs::ServiceRegistration;

use crate::server_conn::{ServerConn, ServerConnError};

/// A boxed, sendable future of a registrar call.
pub type RegistrarFuture<'a> =
    Pin<Box<dyn Future<Output = Result<(), ServerConnError>> + Send + 'a>>;

/// Where service registrations go: the two catalog calls of the client↔server interface, object
/// safe so hooks can hold one without knowing the connection's type.
pub trait ServiceRegistrar: Send + Sync + std::fmt::Debug {
    /// Adds or replaces registrations, keyed by their ID.
    fn upsert(&self, registrations: Vec<ServiceRegistration>) -> RegistrarFuture<'_>;
    /// Removes registrations by ID; unknown IDs are not an error.
    fn delete(&self, ids: Vec<String>) -> RegistrarFuture<'_>;
}

/// A [`ServiceRegistrar`] over a client↔server connection.
pub struct ConnRegistrar<S: ServerConn> {
    conn: Arc<S>,
}

impl<S: ServerConn> ConnRegistrar<S> {
    pub fn new(conn: Arc<S>) -> Self {
        ConnRegistrar { conn }
    }
}

impl<S: ServerConn> std::fmt::Debug for ConnRegistrar<S> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("ConnRegistrar")
    }
}

impl<S: ServerConn> ServiceRegistrar for ConnRegistrar<S> {
    fn upsert(&self, registrations: Vec<ServiceRegistration>) -> RegistrarFuture<'_> {
        Box::pin(self.conn.upsert_services(registrations))
    }

    fn delete(&self, ids: Vec<String>) -> RegistrarFuture<'_> {
        Box::pin(self.conn.delete_services(ids))
    }
}

/// Test fakes shared by the hooks' tests.
#[cfg(test)]
pub(crate) mod testing {
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    use super::*;

    /// One call a [`RecordingRegistrar`] received.
    #[derive(Debug, Clone, PartialEq)]
    pub(crate) enum Call {
        Upsert(Vec<String>),
        Delete(Vec<String>),
    }

    /// A catalog in memory that records every call and can be made unreachable.
    #[derive(Debug, Default)]
    pub(crate) struct RecordingRegistrar {
        inner: Mutex<RecordingInner>,
    }

    #[derive(Debug, Default)]
    struct RecordingInner {
        catalog: BTreeMap<String, ServiceRegistration>,
        calls: Vec<Call>,
        unreachable: bool,
    }

    impl RecordingRegistrar {
        fn with<T>(&self, action: impl FnOnce(&mut RecordingInner) -> T) -> T {
            action(&mut self.inner.lock().unwrap())
        }

        pub(crate) fn set_unreachable(&self, unreachable: bool) {
            self.with(|inner| inner.unreachable = unreachable);
        }

        pub(crate) fn catalog(&self) -> BTreeMap<String, ServiceRegistration> {
            self.with(|inner| inner.catalog.clone())
        }

        pub(crate) fn calls(&self) -> Vec<Call> {
            self.with(|inner| inner.calls.clone())
        }

        fn unreachable_error() -> ServerConnError {
            ServerConnError::Unavailable {
                message: "connection refused".into(),
            }
        }
    }

    impl ServiceRegistrar for RecordingRegistrar {
        fn upsert(&self, registrations: Vec<ServiceRegistration>) -> RegistrarFuture<'_> {
            let result = self.with(|inner| {
                inner.calls.push(Call::Upsert(
                    registrations.iter().map(|r| r.id.clone()).collect(),
                ));
                if inner.unreachable {
                    return Err(Self::unreachable_error());
                }
                for registration in registrations {
                    inner.catalog.insert(registration.id.clone(), registration);
                }
                Ok(())
            });
            Box::pin(async move { result })
        }

        fn delete(&self, ids: Vec<String>) -> RegistrarFuture<'_> {
            let result = self.with(|inner| {
                inner.calls.push(Call::Delete(ids.clone()));
                if inner.unreachable {
                    return Err(Self::unreachable_error());
                }
                for id in &ids {
                    inner.catalog.remove(id);
                }
                Ok(())
            });
            Box::pin(async move { result })
        }
    }
}
