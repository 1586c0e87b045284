//! Deployments (`nomad/structs.Deployment`): the rollout of one job version, with per task
//! group counts of what was placed and how healthy it is, and its list of statuses and the
//! descriptions Nomad gives them.
//!
//! Not here: deciding when a deployment is created, advanced, failed or promoted (the
//! scheduler's reconciler and the server's deployment watcher do), or how an allocation's
//! health is judged (the client does).

use std::collections::BTreeMap;

use crate::job::Job;
use crate::lenient::wire_struct;
use crate::time::{DurationNs, Timestamp};

/// Deployment statuses.
pub const DEPLOYMENT_STATUS_RUNNING: &str = "running";
pub const DEPLOYMENT_STATUS_PAUSED: &str = "paused";
pub const DEPLOYMENT_STATUS_FAILED: &str = "failed";
pub const DEPLOYMENT_STATUS_SUCCESSFUL: &str = "successful";
pub const DEPLOYMENT_STATUS_CANCELLED: &str = "cancelled";

/// Deployment status descriptions, as Nomad words them.
pub const DEPLOYMENT_DESC_RUNNING: &str = "Deployment is running";
pub const DEPLOYMENT_DESC_RUNNING_NEEDS_PROMOTION: &str =
    "Deployment is running but requires manual promotion";
pub const DEPLOYMENT_DESC_RUNNING_AUTO_PROMOTION: &str =
    "Deployment is running pending automatic promotion";
pub const DEPLOYMENT_DESC_PAUSED: &str = "Deployment is paused";
pub const DEPLOYMENT_DESC_SUCCESSFUL: &str = "Deployment completed successfully";
pub const DEPLOYMENT_DESC_STOPPED_JOB: &str = "Cancelled because job is stopped";
pub const DEPLOYMENT_DESC_NEWER_JOB: &str = "Cancelled due to newer version of job";
pub const DEPLOYMENT_DESC_FAILED_ALLOCATIONS: &str = "Failed due to unhealthy allocations";
pub const DEPLOYMENT_DESC_PROGRESS_DEADLINE: &str = "Failed due to progress deadline";
pub const DEPLOYMENT_DESC_FAILED_BY_USER: &str = "Deployment marked as failed";

/// A failed deployment's description when the job is rolled back (Nomad's
/// `DeploymentStatusDescriptionRollback`).
pub fn deployment_desc_rollback(description: &str, version: u64) -> String {
    format!("{description} - rolling back to job version {version}")
}

/// A failed deployment's description when no stable version exists to roll back to.
pub fn deployment_desc_no_rollback_target(description: &str) -> String {
    format!("{description} - no stable job version to auto revert to")
}

wire_struct! {
    /// The rollout of one job version.
    pub struct Deployment {
        #[serde(rename = "ID")]
        pub id: String,
        pub namespace: String,
        #[serde(rename = "JobID")]
        pub job_id: String,
        pub job_version: u64,
        pub job_modify_index: u64,
        pub job_spec_modify_index: u64,
        pub job_create_index: u64,
        pub is_multiregion: bool,
        /// Per task group.
        pub task_groups: BTreeMap<String, DeploymentState>,
        pub status: String,
        pub status_description: String,
        pub eval_priority: i64,
        pub create_index: u64,
        pub modify_index: u64,
        /// When the deployment was created and last changed (Unix nanoseconds, set by the
        /// store); the server's GC ages terminal deployments by `ModifyTime`.
        pub create_time: i64,
        pub modify_time: i64,
    }
}

wire_struct! {
    /// One task group's part of a deployment.
    pub struct DeploymentState {
        pub auto_revert: bool,
        pub auto_promote: bool,
        pub progress_deadline: DurationNs,
        /// When the group must next make progress (zero until its first allocation is placed).
        pub require_progress_by: Timestamp,
        pub promoted: bool,
        /// IDs of the canaries placed.
        pub placed_canaries: Vec<String>,
        pub desired_canaries: i64,
        pub desired_total: i64,
        pub placed_allocs: i64,
        pub healthy_allocs: i64,
        pub unhealthy_allocs: i64,
    }
}

impl Deployment {
    /// A running deployment of `job`'s current version (groups are added by the reconciler).
    pub fn new_for_job(id: String, job: &Job, eval_priority: i64) -> Self {
        Self {
            id,
            namespace: job.namespace.clone(),
            job_id: job.id.clone(),
            job_version: job.version,
            job_modify_index: job.modify_index,
            job_spec_modify_index: job.job_modify_index,
            job_create_index: job.create_index,
            is_multiregion: job.multiregion.is_some(),
            task_groups: BTreeMap::new(),
            status: DEPLOYMENT_STATUS_RUNNING.to_owned(),
            status_description: DEPLOYMENT_DESC_RUNNING.to_owned(),
            eval_priority,
            create_index: 0,
            modify_index: 0,
            create_time: 0,
            modify_time: 0,
        }
    }

    /// Whether the deployment still runs (running or paused), as Nomad's `Active`.
    pub fn active(&self) -> bool {
        matches!(
            self.status.as_str(),
            DEPLOYMENT_STATUS_RUNNING | DEPLOYMENT_STATUS_PAUSED
        )
    }

    /// Whether the deployment tracks this version of this incarnation of `job`.
    pub fn tracks(&self, job: &Job) -> bool {
        self.job_create_index == job.create_index
            && self.job_version == job.version
            && self.job_modify_index == job.modify_index
    }

    /// Whether some group waits for its canaries to be promoted.
    pub fn requires_promotion(&self) -> bool {
        self.task_groups
            .values()
            .any(|group| group.desired_canaries > 0 && !group.promoted)
    }

    /// Whether every group that waits for promotion promotes itself.
    pub fn has_auto_promote(&self) -> bool {
        let waiting: Vec<&DeploymentState> = self
            .task_groups
            .values()
            .filter(|group| group.desired_canaries > 0)
            .collect();
        !waiting.is_empty() && waiting.iter().all(|group| group.auto_promote)
    }

    /// Nomad's description of a running deployment (needs promotion, auto promotion, running).
    pub fn running_description(&self) -> &'static str {
        if self.requires_promotion() {
            if self.has_auto_promote() {
                DEPLOYMENT_DESC_RUNNING_AUTO_PROMOTION
            } else {
                DEPLOYMENT_DESC_RUNNING_NEEDS_PROMOTION
            }
        } else {
            DEPLOYMENT_DESC_RUNNING
        }
    }
}

wire_struct! {
    /// A change of a deployment's status that a plan or the watcher commits
    /// (`nomad/structs.DeploymentStatusUpdate`).
    pub struct DeploymentStatusUpdate {
        #[serde(rename = "DeploymentID")]
        pub deployment_id: String,
        pub status: String,
        pub status_description: String,
    }
}

wire_struct! {
    /// `POST /v1/deployment/promote/<id>`: promote every group's canaries or the named groups'.
    pub struct DeploymentPromoteRequest {
        #[serde(rename = "DeploymentID")]
        pub deployment_id: String,
        pub all: bool,
        pub groups: Vec<String>,
    }
}

wire_struct! {
    /// `POST /v1/deployment/pause/<id>`: pause (`true`) or resume (`false`).
    pub struct DeploymentPauseRequest {
        #[serde(rename = "DeploymentID")]
        pub deployment_id: String,
        pub pause: bool,
    }
}

wire_struct! {
    /// `POST /v1/deployment/allocation-health/<id>`: health set by hand (`health_check =
    /// "manual"`).
    pub struct DeploymentAllocHealthRequest {
        #[serde(rename = "DeploymentID")]
        pub deployment_id: String,
        #[serde(rename = "HealthyAllocationIDs")]
        pub healthy_allocation_ids: Vec<String>,
        #[serde(rename = "UnhealthyAllocationIDs")]
        pub unhealthy_allocation_ids: Vec<String>,
    }
}

wire_struct! {
    /// The answer to a deployment write (Nomad's `DeploymentUpdateResponse`).
    pub struct DeploymentUpdateResponse {
        #[serde(rename = "EvalID")]
        pub eval_id: String,
        pub eval_create_index: u64,
        pub deployment_modify_index: u64,
        /// The job version registered again when the deployment was rolled back.
        pub reverted_job_version: Option<u64>,
        pub index: u64,
    }
}

/// A failed deployment's description when the stable version has the current spec (Nomad's
/// `DeploymentStatusDescriptionRollbackNoop`).
pub fn deployment_desc_rollback_noop(description: &str, version: u64) -> String {
    format!(
        "{description} - not rolling back to stable job version {version} as current job has same specification"
    )
}
