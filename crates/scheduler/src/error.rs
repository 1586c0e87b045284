//! The scheduler's errors. A pass fails only when it is asked to do what it cannot; everything
//! about the cluster (no nodes, no capacity) is an outcome in the plan, not an error.

/// Why a scheduling pass could not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchedulerError {
    #[error("job {job_id:?} has type {job_type:?}, which no scheduler handles")]
    UnsupportedJobType { job_type: String, job_id: String },
}
