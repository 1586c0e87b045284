//! Request and response bodies of the HTTP API that are not themselves domain objects: job
//! register/deregister/dispatch/plan/revert, alloc stop/restart/signal, parse, and the generic
//! `{"Index":N}` answer.
//!
//! Query metadata (`Index`, `LastContact`, `KnownLeader`, `NextToken`) is repeated in the bodies
//! that carry it in Nomad. Not here: routing or query-string parsing.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::bytes::Bytes;
use crate::job::Job;
use crate::lenient::wire_struct;

wire_struct! {
    /// `PUT|POST /v1/jobs` and `/v1/job/:id`.
    pub struct JobRegisterRequest {
        pub job: Option<Job>,
        pub enforce_index: bool,
        pub job_modify_index: u64,
        pub policy_override: bool,
        /// Keep the stored job's group counts (Nomad's `PreserveCounts`).
        pub preserve_counts: bool,
        /// Keep the stored job's task resources (Nomad's `PreserveResources`).
        pub preserve_resources: bool,
        pub eval_priority: i64,
        /// The jobspec source the job was read from (Nomad 1.6+), kept per job version.
        pub submission: Option<crate::job_submission::JobSubmission>,
    }
}

wire_struct! {
    /// The answer to register and to `POST /v1/job/:id/evaluate`.
    pub struct JobRegisterResponse {
        #[serde(rename = "EvalID")]
        pub eval_id: String,
        pub eval_create_index: u64,
        pub job_modify_index: u64,
        pub warnings: String,
        pub index: u64,
        pub last_contact: u64,
        pub known_leader: bool,
        pub next_token: String,
    }
}

wire_struct! {
    /// The answer to `DELETE /v1/job/:id`.
    pub struct JobDeregisterResponse {
        #[serde(rename = "EvalID")]
        pub eval_id: String,
        pub eval_create_index: u64,
        pub job_modify_index: u64,
        #[serde(rename = "VolumeEvalID")]
        pub volume_eval_id: String,
        pub volume_eval_index: u64,
        pub index: u64,
        pub last_contact: u64,
        pub known_leader: bool,
        pub next_token: String,
    }
}

wire_struct! {
    /// `GET /v1/job/:id/versions`: versions newest first.
    pub struct JobVersionsResponse {
        pub versions: Vec<Job>,
        /// With `?diffs=true`: each version's difference from the one before it, newest first
        /// (one fewer than the versions).
        pub diffs: Option<Vec<crate::job_diff::JobDiff>>,
        pub index: u64,
        pub last_contact: u64,
        pub known_leader: bool,
        pub next_token: String,
    }
}

wire_struct! {
    /// `{"Index":N}`, the answer to restart and signal.
    pub struct GenericResponse {
        pub index: u64,
    }
}

wire_struct! {
    /// The answer to `POST /v1/allocation/:id/stop`.
    pub struct AllocStopResponse {
        #[serde(rename = "EvalID")]
        pub eval_id: String,
        pub index: u64,
    }
}

wire_struct! {
    /// `POST /v1/client/allocation/:id/restart`; an empty body restarts the running tasks.
    pub struct AllocRestartRequest {
        pub task_name: String,
        pub all_tasks: bool,
    }
}

wire_struct! {
    /// `POST /v1/client/allocation/:id/signal`; an empty `Task` means every task.
    pub struct AllocSignalRequest {
        pub signal: String,
        pub task: String,
    }
}

wire_struct! {
    /// `POST /v1/jobs/parse`.
    pub struct JobsParseRequest {
        #[serde(rename = "JobHCL")]
        pub job_hcl: String,
        #[serde(rename = "HCLv1")]
        pub hcl_v1: bool,
        pub canonicalize: bool,
        /// Variable values; Nomad has taken both a string of HCL assignments and a map here.
        pub variables: Option<Value>,
    }
}

wire_struct! {
    /// `POST /v1/job/:id/dispatch`.
    pub struct JobDispatchRequest {
        #[serde(rename = "JobID")]
        pub job_id: String,
        pub payload: Bytes,
        pub meta: BTreeMap<String, String>,
        pub id_prefix_template: String,
    }
}

wire_struct! {
    pub struct JobDispatchResponse {
        #[serde(rename = "DispatchedJobID")]
        pub dispatched_job_id: String,
        #[serde(rename = "EvalID")]
        pub eval_id: String,
        pub eval_create_index: u64,
        pub job_create_index: u64,
        pub index: u64,
    }
}

wire_struct! {
    /// `POST /v1/job/:id/plan`.
    pub struct JobPlanRequest {
        pub job: Option<Job>,
        pub diff: bool,
        pub policy_override: bool,
    }
}

wire_struct! {
    /// Per task group, what a planning pass would do (Nomad's `DesiredUpdates`).
    pub struct DesiredTgUpdates {
        pub ignore: u64,
        pub place: u64,
        pub migrate: u64,
        pub stop: u64,
        pub in_place_update: u64,
        pub destructive_update: u64,
        pub canary: u64,
        pub preemptions: u64,
    }
}

wire_struct! {
    /// The scheduler's explanation of a plan (Nomad's `PlanAnnotations`).
    pub struct PlanAnnotations {
        #[serde(rename = "DesiredTGUpdates")]
        pub desired_tg_updates: BTreeMap<String, DesiredTgUpdates>,
        pub preempted_allocs: Option<Vec<crate::alloc::AllocListStub>>,
    }
}

wire_struct! {
    /// The answer to `POST /v1/job/:id/plan`: what registering the job would do, nothing
    /// committed. `JobModifyIndex` is the stored job's (0 for a new job), the index `job run
    /// -check-index` expects.
    pub struct JobPlanResponse {
        pub annotations: Option<PlanAnnotations>,
        #[serde(rename = "FailedTGAllocs")]
        pub failed_tg_allocs: Option<BTreeMap<String, crate::alloc::AllocMetric>>,
        pub job_modify_index: u64,
        pub created_evals: Option<Vec<crate::eval::Evaluation>>,
        pub diff: Option<crate::job_diff::JobDiff>,
        /// When an enabled periodic job submitted now would launch next (`null` for any
        /// other job, as Nomad's recorded answers): `nomad job plan` prints it.
        pub next_periodic_launch: Option<crate::time::Timestamp>,
        pub warnings: String,
        pub index: u64,
    }
}

wire_struct! {
    /// `POST /v1/job/:id/revert`.
    pub struct JobRevertRequest {
        #[serde(rename = "JobID")]
        pub job_id: String,
        pub job_version: u64,
        pub enforce_prior_version: Option<u64>,
    }
}

wire_struct! {
    /// The body of `PUT /v1/job/<id>/versions/<name>/tag` (Nomad's `api.TagVersionRequest`).
    pub struct TagVersionRequest {
        pub version: u64,
        pub latest: bool,
        pub description: String,
    }
}

wire_struct! {
    /// A tag applied to (`Tag` set) or removed from (`Tag` absent, found by `Name`) a job
    /// version (Nomad's `JobApplyTagRequest`).
    pub struct JobApplyTagRequest {
        #[serde(rename = "JobID")]
        pub job_id: String,
        pub name: String,
        pub tag: Option<crate::job_blocks::JobVersionTag>,
        pub version: u64,
        pub latest: bool,
    }
}

wire_struct! {
    /// The answer to a tag write (Nomad's `JobTagResponse` with its query meta).
    pub struct JobTagResponse {
        pub name: String,
        pub description: String,
        pub tagged_time: i64,
        pub index: u64,
        pub last_contact: u64,
        pub known_leader: bool,
        pub next_token: String,
    }
}

wire_struct! {
    /// `POST /v1/job/:id/stable`.
    pub struct JobStabilityRequest {
        #[serde(rename = "JobID")]
        pub job_id: String,
        pub job_version: u64,
        pub stable: bool,
    }
}

wire_struct! {
    pub struct JobStabilityResponse {
        pub index: u64,
    }
}

wire_struct! {
    /// `POST /v1/node/:id/eligibility`.
    pub struct NodeEligibilityRequest {
        #[serde(rename = "NodeID")]
        pub node_id: String,
        pub eligibility: String,
    }
}

wire_struct! {
    /// `POST /v1/node/:id/drain`.
    pub struct NodeDrainRequest {
        #[serde(rename = "NodeID")]
        pub node_id: String,
        pub drain_spec: Option<crate::node::DrainSpec>,
        pub mark_eligible: bool,
        pub meta: BTreeMap<String, String>,
    }
}

wire_struct! {
    /// The answer to a drain or eligibility update (`NodeDrainUpdateResponse`,
    /// `NodeEligibilityUpdateResponse`): evaluations made when the node turned eligible.
    pub struct NodeDrainUpdateResponse {
        pub node_modify_index: u64,
        #[serde(rename = "EvalIDs")]
        pub eval_ids: Option<Vec<String>>,
        pub eval_create_index: u64,
        pub index: u64,
    }
}

wire_struct! {
    /// The answer to `node purge` and `node evaluate` (`NodeUpdateResponse`).
    pub struct NodeUpdateResponse {
        #[serde(rename = "HeartbeatTTL")]
        pub heartbeat_ttl: i64,
        #[serde(rename = "EvalIDs")]
        pub eval_ids: Option<Vec<String>>,
        pub eval_create_index: u64,
        pub node_modify_index: u64,
        pub features: u64,
        #[serde(rename = "LeaderRPCAddr")]
        pub leader_rpc_addr: String,
        pub num_nodes: i32,
        pub servers: Option<Vec<Value>>,
        pub index: u64,
        pub last_contact: i64,
        pub known_leader: bool,
    }
}
