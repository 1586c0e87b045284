//! Evaluations (`nomad/structs.Evaluation`): a request for the scheduler to reconcile a job, with
//! its status and trigger constants.
//!
//! Not here: the broker or the scheduler.

use std::collections::BTreeMap;

use crate::alloc::AllocMetric;
use crate::lenient::wire_struct;
use crate::time::{DurationNs, Timestamp};

/// Evaluation statuses (note `canceled` with one l).
pub const EVAL_STATUS_PENDING: &str = "pending";
pub const EVAL_STATUS_BLOCKED: &str = "blocked";
pub const EVAL_STATUS_COMPLETE: &str = "complete";
pub const EVAL_STATUS_FAILED: &str = "failed";
pub const EVAL_STATUS_CANCELLED: &str = "canceled";

/// What triggered an evaluation (`TriggeredBy`).
pub const EVAL_TRIGGER_JOB_REGISTER: &str = "job-register";
pub const EVAL_TRIGGER_JOB_DEREGISTER: &str = "job-deregister";
pub const EVAL_TRIGGER_PERIODIC_JOB: &str = "periodic-job";
pub const EVAL_TRIGGER_NODE_UPDATE: &str = "node-update";
pub const EVAL_TRIGGER_NODE_DRAIN: &str = "node-drain";
pub const EVAL_TRIGGER_ALLOC_STOP: &str = "alloc-stop";
pub const EVAL_TRIGGER_ALLOC_FAILURE: &str = "alloc-failure";
pub const EVAL_TRIGGER_SCHEDULED: &str = "scheduled";
pub const EVAL_TRIGGER_ROLLING_UPDATE: &str = "rolling-update";
pub const EVAL_TRIGGER_DEPLOYMENT_WATCHER: &str = "deployment-watcher";
pub const EVAL_TRIGGER_FAILED_FOLLOW_UP: &str = "failed-follow-up";
pub const EVAL_TRIGGER_QUEUED_ALLOCS: &str = "queued-allocs";
pub const EVAL_TRIGGER_PREEMPTION: &str = "preemption";
pub const EVAL_TRIGGER_JOB_SCALING: &str = "job-scaling";
pub const EVAL_TRIGGER_MAX_PLAN_ATTEMPTS: &str = "max-plan-attempts";
pub const EVAL_TRIGGER_MAX_DISCONNECT_TIMEOUT: &str = "max-disconnect-timeout";
pub const EVAL_TRIGGER_RECONNECT: &str = "reconnect";
pub const EVAL_TRIGGER_ALLOC_RESCHEDULE: &str = "alloc-reschedule";

wire_struct! {
    /// A unit of scheduling work for one job.
    pub struct Evaluation {
        #[serde(rename = "ID")]
        pub id: String,
        pub namespace: String,
        pub priority: i64,
        pub r#type: String,
        pub triggered_by: String,
        #[serde(rename = "JobID")]
        pub job_id: String,
        pub job_modify_index: u64,
        #[serde(rename = "NodeID")]
        pub node_id: String,
        pub node_modify_index: u64,
        #[serde(rename = "DeploymentID")]
        pub deployment_id: String,
        pub status: String,
        pub status_description: String,
        pub wait: DurationNs,
        pub wait_until: Timestamp,
        pub next_eval: String,
        pub previous_eval: String,
        pub blocked_eval: String,
        pub related_evals: Option<Vec<serde_json::Value>>,
        #[serde(rename = "FailedTGAllocs")]
        pub failed_tg_allocs: BTreeMap<String, AllocMetric>,
        pub class_eligibility: BTreeMap<String, bool>,
        pub quota_limit_reached: String,
        pub escaped_computed_class: bool,
        pub annotate_plan: bool,
        pub queued_allocations: BTreeMap<String, i64>,
        #[serde(rename = "LeaderACL", skip_serializing)]
        pub leader_acl: String,
        pub snapshot_index: u64,
        pub create_index: u64,
        pub modify_index: u64,
        /// Unix nanoseconds.
        pub create_time: i64,
        /// Unix nanoseconds.
        pub modify_time: i64,
    }
}

/// Whether an evaluation status is terminal (`complete`, `failed` or `canceled`).
pub fn is_terminal_eval_status(status: &str) -> bool {
    matches!(
        status,
        EVAL_STATUS_COMPLETE | EVAL_STATUS_FAILED | EVAL_STATUS_CANCELLED
    )
}

impl Evaluation {
    pub fn terminal_status(&self) -> bool {
        is_terminal_eval_status(&self.status)
    }
}
