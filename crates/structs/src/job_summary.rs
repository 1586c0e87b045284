//! Job summaries (per-group allocation counters) and the job list stub.
//!
//! Not here: keeping the counters current (the state store does that).

use std::collections::BTreeMap;

use crate::job::Job;
use crate::lenient::wire_struct;

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
        pub multiregion: Option<serde_json::Value>,
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
