//! Job scaling on the wire: the `/v1/job/<id>/scale` request (`ScalingRequest`), the scaling
//! events kept per job and group (`ScalingEvent`, `JobScalingEvents`), the scale status
//! (`JobScaleStatus`) and the scaling policy list stub, with Nomad's shapes. The policy itself
//! is [`crate::job_blocks::ScalingPolicy`], kept in the group's `scaling` block.
//!
//! Not here: the rules of a scale (the server) or where events are kept (the state store).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::job_blocks::ScalingPolicy;
use crate::lenient::wire_struct;

/// How many scaling events are kept per group, newest first (Nomad's
/// `JobTrackedScalingEvents`).
pub const JOB_TRACKED_SCALING_EVENTS: usize = 20;

/// `ScalingPolicy.Target` keys.
pub const SCALING_TARGET_NAMESPACE: &str = "Namespace";
pub const SCALING_TARGET_JOB: &str = "Job";
pub const SCALING_TARGET_GROUP: &str = "Group";
pub const SCALING_TARGET_TASK: &str = "Task";

wire_struct! {
    /// The body of `PUT|POST /v1/job/<id>/scale` (Nomad's `api.ScalingRequest`).
    pub struct ScalingRequest {
        pub count: Option<i64>,
        pub target: BTreeMap<String, String>,
        pub message: String,
        pub error: bool,
        pub meta: Option<Map<String, Value>>,
        pub policy_override: bool,
        pub namespace: String,
        pub region: String,
        pub secret_id: String,
    }
}

wire_struct! {
    /// One scaling action or error reported against a group.
    pub struct ScalingEvent {
        /// Unix nanoseconds.
        pub time: i64,
        pub count: Option<i64>,
        pub previous_count: i64,
        pub message: String,
        pub error: bool,
        pub meta: Option<Map<String, Value>>,
        #[serde(rename = "EvalID")]
        pub eval_id: Option<String>,
        pub create_index: u64,
    }
}

wire_struct! {
    /// The scaling events of one job, per group, newest first, at most
    /// [`JOB_TRACKED_SCALING_EVENTS`] each.
    pub struct JobScalingEvents {
        pub namespace: String,
        #[serde(rename = "JobID")]
        pub job_id: String,
        pub scaling_events: BTreeMap<String, Vec<ScalingEvent>>,
        pub modify_index: u64,
    }
}

impl JobScalingEvents {
    /// Adds `event` as the newest of `group`'s, dropping the oldest beyond the cap.
    pub fn record(&mut self, group: &str, event: ScalingEvent) {
        let events = self.scaling_events.entry(group.to_owned()).or_default();
        events.insert(0, event);
        events.truncate(JOB_TRACKED_SCALING_EVENTS);
    }
}

wire_struct! {
    /// `GET /v1/job/<id>/scale`.
    pub struct JobScaleStatus {
        #[serde(rename = "JobID")]
        pub job_id: String,
        pub namespace: String,
        pub job_create_index: u64,
        pub job_modify_index: u64,
        pub job_stopped: bool,
        pub task_groups: BTreeMap<String, TaskGroupScaleStatus>,
    }
}

wire_struct! {
    /// One group of a [`JobScaleStatus`]: its count and its live, non-canary allocations.
    pub struct TaskGroupScaleStatus {
        pub desired: i64,
        pub placed: i64,
        pub running: i64,
        pub healthy: i64,
        pub unhealthy: i64,
        /// `null` when the group never had an event, as Nomad answers.
        pub events: Option<Vec<ScalingEvent>>,
    }
}

wire_struct! {
    /// An item of `GET /v1/scaling/policies`.
    pub struct ScalingPolicyListStub {
        #[serde(rename = "ID")]
        pub id: String,
        pub enabled: bool,
        pub r#type: String,
        pub target: BTreeMap<String, String>,
        pub create_index: u64,
        pub modify_index: u64,
    }
}

impl ScalingPolicy {
    /// The policy's list stub.
    pub fn stub(&self) -> ScalingPolicyListStub {
        ScalingPolicyListStub {
            id: self.id.clone(),
            enabled: self.enabled,
            r#type: self.r#type.clone(),
            target: self.target.clone(),
            create_index: self.create_index,
            modify_index: self.modify_index,
        }
    }

    /// What makes a policy one of its job's: type, group and task (Nomad's `JobKey`).
    pub fn job_key(&self) -> (String, String, String) {
        let target = |key: &str| self.target.get(key).cloned().unwrap_or_default();
        (
            self.r#type.clone(),
            target(SCALING_TARGET_GROUP),
            target(SCALING_TARGET_TASK),
        )
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed expectation is a failed test
mod tests {
    use super::*;

    #[test]
    fn events_are_kept_newest_first_and_capped() {
        let mut events = JobScalingEvents::default();
        for count in 0..25 {
            events.record(
                "g",
                ScalingEvent {
                    count: Some(count),
                    ..ScalingEvent::default()
                },
            );
        }
        let kept = &events.scaling_events["g"];
        assert_eq!(kept.len(), JOB_TRACKED_SCALING_EVENTS);
        assert_eq!(kept[0].count, Some(24));
        assert_eq!(kept[19].count, Some(5));
    }

    #[test]
    fn an_event_has_nomads_keys() {
        let event = ScalingEvent {
            time: 1,
            count: Some(3),
            previous_count: 2,
            eval_id: Some("e".into()),
            ..ScalingEvent::default()
        };
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"Time": 1, "Count": 3, "PreviousCount": 2, "Message": "",
                "Error": false, "Meta": null, "EvalID": "e", "CreateIndex": 0})
        );
    }
}
