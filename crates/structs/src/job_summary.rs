//! Job summaries (per-group allocation counters) and the job list stub.
//!
//! Not here: keeping the counters current (the state store does that).

use std::collections::BTreeMap;

use crate::job::{JOB_STATUS_DEAD, JOB_STATUS_PENDING, JOB_STATUS_RUNNING, JOB_TYPE_SYSTEM, Job};
use crate::lenient::wire_struct;
use crate::task_state::{
    ALLOC_CLIENT_STATUS_COMPLETE, ALLOC_CLIENT_STATUS_FAILED, ALLOC_CLIENT_STATUS_LOST,
    ALLOC_CLIENT_STATUS_PENDING, ALLOC_CLIENT_STATUS_RUNNING, ALLOC_CLIENT_STATUS_UNKNOWN,
};

wire_struct! {
    /// Allocation counters of a job, per task group.
    pub struct JobSummary {
        #[serde(rename = "JobID")]
        pub job_id: String,
        pub namespace: String,
        pub summary: BTreeMap<String, TaskGroupSummary>,
        pub children: Option<JobChildrenSummary>,
        pub create_index: u64,
        pub modify_index: u64,
    }
}

wire_struct! {
    /// `Starting` counts `pending` allocs; the others count allocs of the same client status.
    pub struct TaskGroupSummary {
        pub queued: i64,
        pub complete: i64,
        pub failed: i64,
        pub running: i64,
        pub starting: i64,
        pub lost: i64,
        pub unknown: i64,
    }
}

wire_struct! {
    /// Children of a periodic or parameterized job, by status.
    pub struct JobChildrenSummary {
        pub pending: i64,
        pub running: i64,
        pub dead: i64,
    }
}

wire_struct! {
    /// A job in list responses.
    pub struct JobListStub {
        #[serde(rename = "ID")]
        pub id: String,
        #[serde(rename = "ParentID")]
        pub parent_id: String,
        pub name: String,
        /// Omitted when empty.
        #[serde(skip_serializing_if = "String::is_empty")]
        pub namespace: String,
        pub datacenters: Vec<String>,
        pub node_pool: String,
        pub multiregion: Option<crate::job_blocks::Multiregion>,
        pub r#type: String,
        pub priority: i64,
        pub periodic: bool,
        pub parameterized_job: bool,
        pub stop: bool,
        pub status: String,
        pub status_description: String,
        pub job_summary: Option<JobSummary>,
        pub create_index: u64,
        pub modify_index: u64,
        pub job_modify_index: u64,
        pub submit_time: i64,
        /// Present only when asked for (`meta=true`).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub meta: Option<BTreeMap<String, String>>,
    }
}

impl Job {
    /// The list form; `include_meta` is the API's `meta=true`.
    pub fn stub(&self, summary: Option<JobSummary>, include_meta: bool) -> JobListStub {
        JobListStub {
            id: self.id.clone(),
            parent_id: self.parent_id.clone(),
            name: self.name.clone(),
            namespace: self.namespace.clone(),
            datacenters: self.datacenters.clone(),
            node_pool: self.node_pool.clone(),
            multiregion: self.multiregion.clone(),
            r#type: self.r#type.clone(),
            priority: self.priority,
            periodic: self.periodic.is_some(),
            parameterized_job: self.parameterized_job.is_some(),
            stop: self.stop,
            status: self.status.clone(),
            status_description: self.status_description.clone(),
            job_summary: summary,
            create_index: self.create_index,
            modify_index: self.modify_index,
            job_modify_index: self.job_modify_index,
            submit_time: self.submit_time,
            meta: include_meta.then(|| self.meta.clone()),
        }
    }
}

impl JobSummary {
    /// A summary with zeroed counters for each of the job's groups (and children counters for a
    /// periodic or parameterized job).
    pub fn new_for_job(job: &Job) -> JobSummary {
        JobSummary {
            job_id: job.id.clone(),
            namespace: job.namespace.clone(),
            summary: job
                .task_groups
                .iter()
                .map(|group| (group.name.clone(), TaskGroupSummary::default()))
                .collect(),
            children: (job.periodic.is_some() || job.parameterized_job.is_some())
                .then(JobChildrenSummary::default),
            create_index: job.create_index,
            modify_index: job.modify_index,
        }
    }
}

impl TaskGroupSummary {
    /// The counter an allocation with `client_status` counts in (`pending` counts as
    /// `Starting`); `None` for an unknown status.
    pub fn counter_for_client_status(&mut self, client_status: &str) -> Option<&mut i64> {
        match client_status {
            ALLOC_CLIENT_STATUS_PENDING => Some(&mut self.starting),
            ALLOC_CLIENT_STATUS_RUNNING => Some(&mut self.running),
            ALLOC_CLIENT_STATUS_COMPLETE => Some(&mut self.complete),
            ALLOC_CLIENT_STATUS_FAILED => Some(&mut self.failed),
            ALLOC_CLIENT_STATUS_LOST => Some(&mut self.lost),
            ALLOC_CLIENT_STATUS_UNKNOWN => Some(&mut self.unknown),
            _ => None,
        }
    }
}

/// What the job's status depends on besides the job itself.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JobStatusInputs {
    pub any_alloc: bool,
    pub any_non_terminal_alloc: bool,
    pub any_non_terminal_deployment: bool,
    pub any_non_terminal_eval: bool,
    pub any_eval: bool,
}

/// A job's `Status` by Nomad's rules: system, periodic and parameterized jobs are `running` until
/// stopped, then `dead`; otherwise a live alloc or deployment means `running`, a live eval
/// `pending`, any alloc or eval (all terminal) or a stop `dead`, and a job just registered
/// `pending`.
pub fn derive_job_status(job: &Job, inputs: JobStatusInputs) -> &'static str {
    if job.r#type == JOB_TYPE_SYSTEM || job.is_periodic() || job.is_parameterized() {
        return if job.stop {
            JOB_STATUS_DEAD
        } else {
            JOB_STATUS_RUNNING
        };
    }
    if inputs.any_non_terminal_alloc || inputs.any_non_terminal_deployment {
        JOB_STATUS_RUNNING
    } else if inputs.any_non_terminal_eval {
        JOB_STATUS_PENDING
    } else if inputs.any_eval || inputs.any_alloc || job.stop {
        JOB_STATUS_DEAD
    } else {
        JOB_STATUS_PENDING
    }
}
