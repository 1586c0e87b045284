//! Node pool writes as Nomad's `NodePool.UpsertNodePools` and `NodePool.DeleteNodePools`
//! answer them (community edition): a pool is validated (name, description, no scheduler
//! configuration), the built-in `all` and `default` are never changed or deleted, and a pool
//! still holding nodes or non-terminal jobs is not deleted. Also the register-time check that a
//! job's pool exists (Nomad's node pool validating admission hook).
//!
//! Errors are Nomad's words and status codes: its coded errors are 400, the rest 500.
//!
//! Not here: keeping pools (the state store) or placing within one (the scheduler).

use drover_state::{StateError, StateSnapshot};
use drover_structs::{JOB_STATUS_DEAD, Job, NodePool, is_built_in_node_pool};

use crate::{Server, ServerError};

/// Nomad's `jobNodePoolValidatingHook`: a job names an existing pool. Answered as Nomad's
/// admission validators answer (a one-error multierror; HTTP 400 where Nomad answers 500).
pub(crate) fn check_job_node_pool(snapshot: &StateSnapshot, job: &Job) -> Result<(), ServerError> {
    if snapshot.node_pool(&job.node_pool).is_some() {
        return Ok(());
    }
    Err(ServerError::BadRequest(format!(
        "1 error occurred:\n\t* job {:?} is in nonexistent node pool {:?}\n\n",
        job.id, job.node_pool
    )))
}

impl Server {
    /// `PUT /v1/node/pools` (or `/v1/node/pool/<name>`): creates or replaces one pool.
    pub async fn upsert_node_pool(&self, pool: NodePool) -> Result<u64, ServerError> {
        if let Err(error) = pool.validate() {
            return Err(ServerError::BadRequest(format!(
                "invalid node pool {:?}: {error}",
                pool.name
            )));
        }
        if pool.is_built_in() {
            return Err(ServerError::BadRequest(format!(
                "modifying node pool {:?} is not allowed",
                pool.name
            )));
        }
        Ok(self.inner.state.upsert_node_pools(vec![pool]).await?)
    }

    /// `DELETE /v1/node/pool/<name>`: deletes a pool that no node and no non-terminal job
    /// uses.
    pub async fn delete_node_pool(&self, name: &str) -> Result<u64, ServerError> {
        if name.is_empty() {
            return Err(ServerError::BadRequest("node pool name is empty".into()));
        }
        let snapshot = self.inner.state.snapshot();
        let region = self.inner.config.region.clone();
        let mut problems = Vec::new();
        if !is_built_in_node_pool(name) {
            let live_jobs = snapshot
                .jobs(None, "")
                .iter()
                .any(|job| job.node_pool == name && job.status != JOB_STATUS_DEAD);
            if live_jobs {
                problems.push(format!(
                    "node pool {name:?} has non-terminal jobs in regions: [{region}]"
                ));
            }
            let nodes = snapshot.nodes("").iter().any(|node| node.node_pool == name);
            if nodes {
                problems.push(format!(
                    "node pool {name:?} has nodes in regions: [{region}]"
                ));
            }
        }
        if !problems.is_empty() {
            let count = problems.len();
            let noun = if count == 1 { "error" } else { "errors" };
            return Err(ServerError::BadRequest(format!(
                "{count} {noun} occurred:\n{}\n\n",
                problems
                    .iter()
                    .map(|problem| format!("\t* {problem}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            )));
        }
        match self
            .inner
            .state
            .delete_node_pools(vec![name.to_string()])
            .await
        {
            Ok(index) => Ok(index),
            Err(StateError::NotFound { .. }) => {
                Err(ServerError::NotFound(format!("node pool {name} not found")))
            }
            Err(StateError::Invalid { reason, .. }) => Err(ServerError::BadRequest(reason)),
            Err(error) => Err(error.into()),
        }
    }
}
