//! The scaling tables' load and the in-write helpers a job's registration and purge call: the
//! part of `crate::scaling` the store itself uses, kept apart so the store does not import the
//! module that extends it.
//!
//! A group's `scaling` block is kept twice, as in Nomad: inside the job, and as a policy record
//! (by ID) that `/v1/scaling/policies` lists. A registration writes the job's policies (a
//! policy's `CreateIndex` stays while its ID does, its `ModifyIndex` moves when it changes) and
//! removes the job's policies it no longer has; a purge removes the policies and the events.
//! Policy IDs come from the server; a policy without one is kept in the job only.

use std::collections::BTreeSet;
use std::sync::Arc;

use drover_structs::{
    JobScalingEvents, SCALING_TARGET_GROUP, SCALING_TARGET_JOB, SCALING_TARGET_NAMESPACE,
    ScalingEvent, ScalingPolicy,
};

use crate::engine::{Table, WriteContext, load_table};
use crate::error::StateError;
use crate::kv::Kv;
use crate::tables::{JobKey, StateTables};

/// The record key of a job's scaling events (as a job's: namespace, NUL, ID).
pub(crate) fn scaling_events_record_key(namespace: &str, job_id: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(namespace.len() + job_id.len() + 1);
    key.extend_from_slice(namespace.as_bytes());
    key.push(0);
    key.extend_from_slice(job_id.as_bytes());
    key
}

/// Records `event` against `group` of the job `key` within a write (Nomad's
/// `UpsertScalingEvent`): it gets the write's index as its `CreateIndex`, goes first, and the
/// oldest beyond the cap are dropped. Answers the write's index.
pub(crate) fn record_scaling_event(
    tables: &mut StateTables,
    context: &mut WriteContext,
    key: JobKey,
    group: &str,
    mut event: ScalingEvent,
) -> Result<u64, StateError> {
    let index = context.index();
    let mut events = tables
        .scaling_events
        .get(&key)
        .map(|events| JobScalingEvents::clone(events))
        .unwrap_or_else(|| JobScalingEvents {
            namespace: key.0.clone(),
            job_id: key.1.clone(),
            ..JobScalingEvents::default()
        });
    event.create_index = index;
    events.modify_index = index;
    events.record(group, event);
    context.put(
        Table::ScalingEvents,
        &scaling_events_record_key(&key.0, &key.1),
        &events,
    )?;
    tables.scaling_events.insert(key, Arc::new(events));
    Ok(index)
}

/// Loads the persisted events and policies into `tables`.
pub(crate) async fn load_scaling(kv: &dyn Kv, tables: &mut StateTables) -> Result<(), StateError> {
    for (_, events) in load_table::<JobScalingEvents>(kv, Table::ScalingEvents).await? {
        tables.scaling_events.insert(
            (events.namespace.clone(), events.job_id.clone()),
            Arc::new(events),
        );
    }
    for (_, policy) in load_table::<ScalingPolicy>(kv, Table::ScalingPolicies).await? {
        tables
            .scaling_policies
            .insert(policy.id.clone(), Arc::new(policy));
    }
    Ok(())
}

fn targets_job(policy: &ScalingPolicy, namespace: &str, job_id: &str) -> bool {
    policy
        .target
        .get(SCALING_TARGET_NAMESPACE)
        .map(String::as_str)
        == Some(namespace)
        && policy.target.get(SCALING_TARGET_JOB).map(String::as_str) == Some(job_id)
}

/// The same policy but for its indexes.
fn same_policy(stored: &ScalingPolicy, candidate: &ScalingPolicy) -> bool {
    let mut normalized = candidate.clone();
    normalized.create_index = stored.create_index;
    normalized.modify_index = stored.modify_index;
    &normalized == stored
}

/// Before a registration is compared with the stored job: every group policy targets its job
/// and group, and one that matches its stored record takes that record's indexes, so an
/// unchanged job stays unchanged.
pub(crate) fn adopt_policy_indexes(tables: &StateTables, job: &mut drover_structs::Job) {
    for group in &mut job.task_groups {
        let Some(policy) = &mut group.scaling else {
            continue;
        };
        policy
            .target
            .insert(SCALING_TARGET_NAMESPACE.to_owned(), job.namespace.clone());
        policy
            .target
            .insert(SCALING_TARGET_JOB.to_owned(), job.id.clone());
        policy
            .target
            .insert(SCALING_TARGET_GROUP.to_owned(), group.name.clone());
        policy.namespace.clone_from(&job.namespace);
        if let Some(stored) = tables.scaling_policies.get(&policy.id)
            && same_policy(stored, policy)
        {
            policy.create_index = stored.create_index;
            policy.modify_index = stored.modify_index;
        }
    }
}

/// Inside a registration's write: stores the job's changed policies (their indexes set in
/// `job` too) and removes the job's policies it no longer has.
pub(crate) fn write_job_scaling_policies(
    tables: &mut StateTables,
    context: &mut WriteContext,
    job: &mut drover_structs::Job,
) -> Result<(), StateError> {
    let index = context.index();
    let mut kept = BTreeSet::new();
    for group in &mut job.task_groups {
        let Some(policy) = &mut group.scaling else {
            continue;
        };
        if policy.id.is_empty() {
            continue;
        }
        let stored = tables.scaling_policies.get(&policy.id).cloned();
        if let Some(stored) = &stored
            && !targets_job(stored, &job.namespace, &job.id)
        {
            // Another job's policy (a derived job copied it): kept in this job only.
            continue;
        }
        kept.insert(policy.id.clone());
        if stored.as_deref() == Some(&*policy) {
            continue;
        }
        policy.create_index = stored.map_or(index, |stored| stored.create_index);
        policy.modify_index = index;
        context.put(Table::ScalingPolicies, policy.id.as_bytes(), &*policy)?;
        tables
            .scaling_policies
            .insert(policy.id.clone(), Arc::new(policy.clone()));
    }
    let removed: Vec<String> = tables
        .scaling_policies
        .values()
        .filter(|policy| targets_job(policy, &job.namespace, &job.id))
        .filter(|policy| !kept.contains(&policy.id))
        .map(|policy| policy.id.clone())
        .collect();
    for id in removed {
        context.delete(Table::ScalingPolicies, id.as_bytes());
        tables.scaling_policies.remove(&id);
    }
    Ok(())
}

/// Inside a purge: removes the job's policies and scaling events.
pub(crate) fn remove_job_scaling(
    tables: &mut StateTables,
    context: &mut WriteContext,
    key: &JobKey,
) {
    let removed: Vec<String> = tables
        .scaling_policies
        .values()
        .filter(|policy| targets_job(policy, &key.0, &key.1))
        .map(|policy| policy.id.clone())
        .collect();
    for id in removed {
        context.delete(Table::ScalingPolicies, id.as_bytes());
        tables.scaling_policies.remove(&id);
    }
    if tables.scaling_events.contains_key(key) {
        context.delete(
            Table::ScalingEvents,
            &scaling_events_record_key(&key.0, &key.1),
        );
        tables.scaling_events.remove(key);
    }
}
