//! The deployments table below the store's API: loading it, writing one deployment inside a
//! store write (with its job index and `Deployment` event), and counting an allocation's change
//! in its deployment, which every allocation write of the store does.
//!
//! Not here: the store's deployment API and reads ([`deployments`](crate::deployments)).

use std::sync::Arc;

use drover_structs::{Allocation, Deployment, Timestamp};

use crate::engine::{Table, WriteContext, load_table};
use crate::error::StateError;
use crate::events::{Event, EventType, Topic, payload};
use crate::kv::Kv;
use crate::tables::StateTables;

/// Loads the persisted deployments into `tables`, with their job index.
pub(crate) async fn load_deployments(
    kv: &dyn Kv,
    tables: &mut StateTables,
) -> Result<(), StateError> {
    for (_, deployment) in load_table::<Deployment>(kv, Table::Deployments).await? {
        tables.index_deployment(&deployment);
        tables
            .deployments
            .insert(deployment.id.clone(), Arc::new(deployment));
    }
    Ok(())
}

fn deployment_event(event_type: EventType, deployment: &Deployment) -> Result<Event, StateError> {
    Ok(Event {
        topic: Topic::Deployment,
        event_type,
        key: deployment.id.clone(),
        namespace: deployment.namespace.clone(),
        filter_keys: vec![deployment.job_id.clone()],
        index: 0,
        payload: payload("deployments", "Deployment", deployment)?,
    })
}

/// Writes one deployment inside a write: `CreateIndex`/`CreateTime` are kept from the stored
/// one (or are this write's), `ModifyIndex`/`ModifyTime` are this write's; publishes
/// `event_type`.
pub(crate) fn write_deployment(
    tables: &mut StateTables,
    context: &mut WriteContext,
    mut deployment: Deployment,
    event_type: EventType,
    now_unix_ns: i64,
) -> Result<Arc<Deployment>, StateError> {
    let index = context.index();
    match tables.deployments.get(&deployment.id).cloned() {
        Some(existing) => {
            deployment.create_index = existing.create_index;
            deployment.create_time = existing.create_time;
            tables.unindex_deployment(&existing);
        }
        None => {
            deployment.create_index = index;
            deployment.create_time = now_unix_ns;
        }
    }
    deployment.modify_index = index;
    deployment.modify_time = now_unix_ns;
    context.put(Table::Deployments, deployment.id.as_bytes(), &deployment)?;
    context.emit(deployment_event(event_type, &deployment)?);
    tables.index_deployment(&deployment);
    let deployment = Arc::new(deployment);
    tables
        .deployments
        .insert(deployment.id.clone(), Arc::clone(&deployment));
    Ok(deployment)
}

/// Counts an allocation's change in its deployment, as Nomad's state store does on every
/// allocation write: placed when it joins the deployment, healthy or unhealthy when its health
/// is first reported, a canary recorded in `PlacedCanaries`, and the group's
/// `RequireProgressBy` started at the first placement and pushed on by each healthy report.
pub(crate) fn count_alloc_in_deployment(
    tables: &mut StateTables,
    context: &mut WriteContext,
    existing: Option<&Allocation>,
    alloc: &Allocation,
) -> Result<(), StateError> {
    if alloc.deployment_id.is_empty() {
        return Ok(());
    }
    let Some(deployment) = tables.deployments.get(&alloc.deployment_id).cloned() else {
        return Ok(());
    };
    let Some(state) = deployment.task_groups.get(&alloc.task_group) else {
        return Ok(());
    };
    let placed = existing.is_none_or(|existing| existing.deployment_id != alloc.deployment_id);
    let health_of = |alloc: &Allocation| {
        alloc
            .deployment_status
            .as_ref()
            .and_then(|status| status.healthy)
    };
    let (mut healthy, mut unhealthy) = (0, 0);
    let previous_health = existing
        .filter(|existing| existing.deployment_id == alloc.deployment_id)
        .and_then(health_of);
    match (previous_health, health_of(alloc)) {
        (None, Some(true)) => healthy = 1,
        (None, Some(false)) => unhealthy = 1,
        _ => {}
    }
    let canary = alloc
        .deployment_status
        .as_ref()
        .is_some_and(|status| status.canary);
    let new_canary = canary && !state.placed_canaries.contains(&alloc.id);
    if !placed && healthy == 0 && unhealthy == 0 && !new_canary {
        return Ok(());
    }
    let mut updated = Deployment::clone(&deployment);
    let Some(state) = updated.task_groups.get_mut(&alloc.task_group) else {
        return Ok(());
    };
    state.placed_allocs += i64::from(placed);
    state.healthy_allocs += healthy;
    state.unhealthy_allocs += unhealthy;
    if new_canary {
        state.placed_canaries.push(alloc.id.clone());
    }
    let deadline = state.progress_deadline.0;
    if deadline != 0 {
        if placed && state.require_progress_by.is_zero() {
            state.require_progress_by =
                Timestamp::from_unix_nanos(alloc.modify_time.saturating_add(deadline));
        } else if healthy != 0
            && let Some(reported) = alloc
                .deployment_status
                .as_ref()
                .and_then(|status| status.timestamp.unix_nanos())
        {
            let by = reported.saturating_add(deadline);
            if state
                .require_progress_by
                .unix_nanos()
                .is_none_or(|current| by > current)
            {
                state.require_progress_by = Timestamp::from_unix_nanos(by);
            }
        }
    }
    let event_type = if healthy != 0 || unhealthy != 0 {
        EventType::DeploymentAllocHealth
    } else {
        EventType::DeploymentStatusUpdate
    };
    write_deployment(tables, context, updated, event_type, alloc.modify_time)?;
    Ok(())
}

impl StateTables {
    pub(crate) fn index_deployment(&mut self, deployment: &Deployment) {
        self.deployments_by_job.insert((
            deployment.namespace.clone(),
            deployment.job_id.clone(),
            deployment.id.clone(),
        ));
    }

    pub(crate) fn unindex_deployment(&mut self, deployment: &Deployment) {
        self.deployments_by_job.remove(&(
            deployment.namespace.clone(),
            deployment.job_id.clone(),
            deployment.id.clone(),
        ));
    }
}
