//! The scaling tables (Nomad's `scaling_event` and `scaling_policy`): each job's scaling
//! events per group, newest first and capped at `JOB_TRACKED_SCALING_EVENTS`, and the group
//! policies its registrations stored (see `crate::scaling_table` for how a registration keeps
//! them). Reads over a snapshot and the one write of an event.
//!
//! Not here: whether a scale is allowed (the server).

use std::sync::Arc;

use drover_structs::{
    JobScalingEvents, SCALING_TARGET_JOB, SCALING_TARGET_NAMESPACE, ScalingEvent, ScalingPolicy,
};

use crate::error::StateError;
use crate::store::StateStore;
use crate::tables::StateSnapshot;

fn target<'a>(policy: &'a ScalingPolicy, key: &str) -> &'a str {
    policy.target.get(key).map_or("", String::as_str)
}

/// Nomad's order of policies in a namespace: by target (namespace, job, group, task).
fn by_target(policies: &mut [Arc<ScalingPolicy>]) {
    policies.sort_by(|a, b| {
        let key = |policy: &ScalingPolicy| {
            (
                target(policy, SCALING_TARGET_NAMESPACE).to_owned(),
                target(policy, SCALING_TARGET_JOB).to_owned(),
                target(policy, drover_structs::SCALING_TARGET_GROUP).to_owned(),
                target(policy, drover_structs::SCALING_TARGET_TASK).to_owned(),
                policy.id.clone(),
            )
        };
        key(a).cmp(&key(b))
    });
}

impl StateSnapshot {
    /// Gives `job`'s group policies their targets and, where they equal their stored records,
    /// the records' indexes, as a registration does before comparing the job with the stored
    /// one (a plan uses this to see an unchanged job as unchanged).
    pub fn adopt_scaling_policies(&self, job: &mut drover_structs::Job) {
        crate::scaling_table::adopt_policy_indexes(self.tables(), job);
    }

    /// The scaling events of one job.
    pub fn scaling_events(&self, namespace: &str, job_id: &str) -> Option<Arc<JobScalingEvents>> {
        self.tables()
            .scaling_events
            .get(&(namespace.to_owned(), job_id.to_owned()))
            .cloned()
    }

    /// The policy `id`.
    pub fn scaling_policy(&self, id: &str) -> Option<Arc<ScalingPolicy>> {
        self.tables().scaling_policies.get(id).cloned()
    }

    /// The policies of `namespace` (every namespace with `None`): those whose ID starts with
    /// `id_prefix` (by ID), else those of `job` when given, else all (by target); with
    /// `policy_type`, only those whose type starts with it.
    pub fn scaling_policies(
        &self,
        namespace: Option<&str>,
        id_prefix: &str,
        job: &str,
        policy_type: &str,
    ) -> Vec<Arc<ScalingPolicy>> {
        let mut policies: Vec<Arc<ScalingPolicy>> = self
            .tables()
            .scaling_policies
            .range(id_prefix.to_owned()..)
            .take_while(|(id, _)| id.starts_with(id_prefix))
            .map(|(_, policy)| Arc::clone(policy))
            .filter(|policy| {
                namespace
                    .is_none_or(|namespace| target(policy, SCALING_TARGET_NAMESPACE) == namespace)
            })
            .filter(|policy| job.is_empty() || target(policy, SCALING_TARGET_JOB) == job)
            .filter(|policy| policy.r#type.starts_with(policy_type))
            .collect();
        if id_prefix.is_empty() {
            by_target(&mut policies);
        }
        policies
    }
}

impl StateStore {
    /// See [`StateSnapshot::scaling_events`].
    pub fn scaling_events(&self, namespace: &str, job_id: &str) -> Option<Arc<JobScalingEvents>> {
        self.snapshot().scaling_events(namespace, job_id)
    }

    /// Records a scaling event against a job's group (Nomad's `UpsertScalingEvent`): the event
    /// gets this write's index as its `CreateIndex`, goes first, and the oldest beyond the cap
    /// are dropped. Returns the index of the write.
    pub async fn upsert_scaling_event(
        &self,
        namespace: &str,
        job_id: &str,
        group: &str,
        event: ScalingEvent,
    ) -> Result<u64, StateError> {
        let key = (namespace.to_owned(), job_id.to_owned());
        let group = group.to_owned();
        self.engine
            .write(move |tables, context| {
                crate::scaling_table::record_scaling_event(tables, context, key, &group, event)
            })
            .await
    }
}
