//! The scheduler's read-only view of the state store: [`drover_scheduler::SchedulerState`] over a
//! [`drover_state::StateSnapshot`].
//!
//! Not here: any decision; this only forwards reads of one consistent snapshot.

use std::sync::Arc;

use drover_scheduler::SchedulerState;
use drover_state::StateSnapshot;
use drover_structs::{Allocation, Deployment, Job, Node};

/// One consistent snapshot of the store, as the scheduler reads it.
pub struct SnapshotView(pub StateSnapshot);

impl SchedulerState for SnapshotView {
    fn job(&self, namespace: &str, job_id: &str) -> Option<Arc<Job>> {
        self.0.job(namespace, job_id)
    }

    fn allocs_by_job(&self, namespace: &str, job_id: &str) -> Vec<Arc<Allocation>> {
        self.0.allocs_by_job(namespace, job_id)
    }

    fn node(&self, node_id: &str) -> Option<Arc<Node>> {
        self.0.node(node_id)
    }

    fn nodes(&self) -> Vec<Arc<Node>> {
        self.0.nodes("")
    }

    fn allocs_by_node(&self, node_id: &str) -> Vec<Arc<Allocation>> {
        self.0.allocs_by_node(node_id)
    }

    fn latest_deployment(&self, namespace: &str, job_id: &str) -> Option<Arc<Deployment>> {
        self.0
            .deployments_by_job(namespace, job_id)
            .into_iter()
            .next()
    }
}
