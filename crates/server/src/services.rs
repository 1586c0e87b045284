//! The server's side of the built-in service catalog (Nomad's native service discovery): a
//! client registers the services of the allocations it runs and deregisters them, an operator
//! may remove one by hand. Registrations are validated here, then stored in one write.
//!
//! Not here: reads (the API reads the store directly), removal with a terminal allocation or a
//! down node (the state store does that in the same write), deciding what to register (the
//! client's service hook).

use drover_structs::{DEFAULT_NAMESPACE, ServiceRegistration};

use crate::{Server, ServerError};

/// Why a registration is refused, naming the field; `None` when it is acceptable.
fn invalid_registration(service: &ServiceRegistration) -> Option<String> {
    if service.id.is_empty() {
        return Some("service registration is missing its ID".to_owned());
    }
    if service.service_name.is_empty() {
        return Some(format!(
            "service registration {:?} is missing its ServiceName",
            service.id
        ));
    }
    if service.alloc_id.is_empty() {
        return Some(format!(
            "service registration {:?} is missing its AllocID",
            service.id
        ));
    }
    // Nomad refuses an address that means "any": nobody can reach a service there.
    if matches!(service.address.as_str(), "0.0.0.0" | "::" | "[::]") {
        return Some(format!(
            "service registration {:?} has an invalid Address {:?}",
            service.id, service.address
        ));
    }
    None
}

impl Server {
    /// Creates or replaces service registrations (Nomad's `ServiceRegistration.Upsert`). Every
    /// registration needs an ID, a ServiceName and the AllocID of an allocation the server
    /// knows; one bad registration refuses the whole batch, with every problem named. Returns
    /// the index of the write.
    pub async fn upsert_service_registrations(
        &self,
        mut services: Vec<ServiceRegistration>,
    ) -> Result<u64, ServerError> {
        let snapshot = self.inner.state.snapshot();
        let mut problems = Vec::new();
        for service in &mut services {
            if service.namespace.is_empty() {
                service.namespace = DEFAULT_NAMESPACE.to_owned();
            }
            if let Some(problem) = invalid_registration(service) {
                problems.push(problem);
            } else if snapshot.alloc(&service.alloc_id).is_none() {
                problems.push(format!(
                    "service registration {:?} names AllocID {:?}, which does not exist",
                    service.id, service.alloc_id
                ));
            }
        }
        if !problems.is_empty() {
            return Err(ServerError::BadRequest(problems.join("; ")));
        }
        Ok(self
            .inner
            .state
            .upsert_service_registrations(services)
            .await?)
    }

    /// Removes registrations by ID, in whatever namespace (what a client sends when a service
    /// stops); unknown IDs are skipped, as a retried deregistration may find them gone.
    pub async fn delete_service_registrations(&self, ids: Vec<String>) -> Result<u64, ServerError> {
        if ids.iter().any(String::is_empty) {
            return Err(ServerError::BadRequest(
                "service deregistration names an empty ID".to_owned(),
            ));
        }
        Ok(self
            .inner
            .state
            .delete_service_registrations_by_id(ids)
            .await?)
    }

    /// Removes one registration (`DELETE /v1/service/<name>/<id>`, Nomad's
    /// `ServiceRegistration.DeleteByID`). An unknown one is `NotFound`.
    pub async fn delete_service_registration(
        &self,
        namespace: &str,
        id: &str,
    ) -> Result<u64, ServerError> {
        if id.is_empty() {
            return Err(ServerError::BadRequest("missing service id".to_owned()));
        }
        if self
            .inner
            .state
            .service_registration(namespace, id)
            .is_none()
        {
            // Nomad's state store refuses it inside the raft apply (its HTTP answer is the RPC
            // error's 500); the caller named a registration that is not there: 404, in
            // Nomad's words.
            return Err(ServerError::NotFound(
                "service registration not found".to_owned(),
            ));
        }
        match self
            .inner
            .state
            .delete_service_registration(namespace, id)
            .await
        {
            Ok(index) => Ok(index),
            // Removed between the check and the write.
            Err(drover_state::StateError::NotFound { .. }) => Err(ServerError::NotFound(
                "service registration not found".to_owned(),
            )),
            Err(error) => Err(error.into()),
        }
    }
}
