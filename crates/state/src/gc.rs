//! Garbage collection's removals that have no other writer: deployments by ID. Jobs, evaluations,
//! allocations and nodes are removed by their own store calls (`delete_job`,
//! `delete_evals_and_allocs`, `delete_node`).
//!
//! Not here: deciding what is old and terminal enough to collect (`drover_server`'s `gc`).

use crate::engine::Table;
use crate::error::StateError;
use crate::store::StateStore;

impl StateStore {
    /// Removes deployments by ID (unknown IDs are skipped). Returns the index of the write,
    /// or the latest index when nothing was removed.
    pub async fn delete_deployments(&self, ids: Vec<String>) -> Result<u64, StateError> {
        self.engine
            .write(move |tables, context| {
                let mut removed = false;
                for id in ids {
                    let Some(existing) = tables.deployments.get(&id).cloned() else {
                        continue;
                    };
                    context.delete(Table::Deployments, id.as_bytes());
                    tables.unindex_deployment(&existing);
                    tables.deployments.remove(&id);
                    removed = true;
                }
                Ok(if removed {
                    context.index()
                } else {
                    context.latest_committed_index()
                })
            })
            .await
    }
}
