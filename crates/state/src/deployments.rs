//! The deployments table: every deployment by ID, indexed by job, with the `Deployment` events
//! its writes publish (Nomad's `deployment` table and `Deployment` topic).
//!
//! The store keeps what the scheduler and the server decide about a deployment; it decides
//! nothing itself (no status changes of its own, no counts derived from allocations).

use std::sync::Arc;

use drover_structs::{DEFAULT_NAMESPACE, Deployment};

use crate::engine::{Table, WriteContext, load_table};
use crate::error::StateError;
use crate::events::{Event, EventType, Topic};
use crate::kv::Kv;
use crate::store::{StateStore, payload};
use crate::tables::{StateSnapshot, StateTables, triples_under};

/// Loads the persisted deployments into `tables`, with their job index.
pub(crate) async fn load_deployments(
    kv: &dyn Kv,
    tables: &mut StateTables,
) -> Result<(), StateError> {
    for (_, deployment) in load_table::<Deployment>(kv, Table::Deployments).await? {
        tables.index_deployment(&deployment);
        Arc::make_mut(&mut tables.deployments).insert(deployment.id.clone(), Arc::new(deployment));
    }
    Ok(())
}

fn deployment_event(
    event_type: EventType,
    deployment: &Deployment,
) -> Result<Event, StateError> {
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

/// Checks a deployment before it is written: an ID and a job, the default namespace when none.
pub(crate) fn validate_deployment(deployment: &mut Deployment) -> Result<(), StateError> {
    for (field, value) in [
        ("Deployment.ID", &deployment.id),
        ("Deployment.JobID", &deployment.job_id),
    ] {
        if value.is_empty() || value.contains('\0') {
            return Err(StateError::Invalid {
                field,
                reason: "must be non-empty and without NUL".to_owned(),
            });
        }
    }
    if deployment.namespace.is_empty() {
        deployment.namespace = DEFAULT_NAMESPACE.to_owned();
    }
    Ok(())
}

/// Writes one deployment inside a write: `CreateIndex` is kept from the stored one (or is this
/// write's), `ModifyIndex` is this write's; publishes `event_type`.
pub(crate) fn write_deployment(
    tables: &mut StateTables,
    context: &mut WriteContext,
    mut deployment: Deployment,
    event_type: EventType,
) -> Result<Arc<Deployment>, StateError> {
    let index = context.index();
    match tables.deployments.get(&deployment.id).cloned() {
        Some(existing) => {
            deployment.create_index = existing.create_index;
            tables.unindex_deployment(&existing);
        }
        None => deployment.create_index = index,
    }
    deployment.modify_index = index;
    context.put(Table::Deployments, deployment.id.as_bytes(), &deployment)?;
    context.emit(deployment_event(event_type, &deployment)?);
    tables.index_deployment(&deployment);
    let deployment = Arc::new(deployment);
    Arc::make_mut(&mut tables.deployments).insert(deployment.id.clone(), Arc::clone(&deployment));
    Ok(deployment)
}

impl StateTables {
    pub(crate) fn index_deployment(&mut self, deployment: &Deployment) {
        Arc::make_mut(&mut self.deployments_by_job).insert((
            deployment.namespace.clone(),
            deployment.job_id.clone(),
            deployment.id.clone(),
        ));
    }

    pub(crate) fn unindex_deployment(&mut self, deployment: &Deployment) {
        Arc::make_mut(&mut self.deployments_by_job).remove(&(
            deployment.namespace.clone(),
            deployment.job_id.clone(),
            deployment.id.clone(),
        ));
    }
}

impl StateSnapshot {
    /// The deployment `id`.
    pub fn deployment(&self, id: &str) -> Option<Arc<Deployment>> {
        self.tables().deployments.get(id).cloned()
    }

    /// Deployments whose ID starts with `id_prefix`, by ID.
    pub fn deployments(&self, id_prefix: &str) -> Vec<Arc<Deployment>> {
        self.tables()
            .deployments
            .range(id_prefix.to_owned()..)
            .take_while(|(id, _)| id.starts_with(id_prefix))
            .map(|(_, deployment)| Arc::clone(deployment))
            .collect()
    }

    /// Every deployment of a job (of every incarnation of it), newest first (highest
    /// `CreateIndex`), as Nomad lists a job's deployments.
    pub fn deployments_by_job(&self, namespace: &str, job_id: &str) -> Vec<Arc<Deployment>> {
        let tables = self.tables();
        let mut found: Vec<Arc<Deployment>> =
            triples_under(&tables.deployments_by_job, namespace, job_id)
                .filter_map(|id| tables.deployments.get(id).cloned())
                .collect();
        found.sort_by(|a, b| b.create_index.cmp(&a.create_index).then(a.id.cmp(&b.id)));
        found
    }

    /// The newest deployment of a job's incarnation created at `job_create_index`, if any
    /// (Nomad's `LatestDeploymentByJobID` on the current job).
    pub fn latest_deployment_of_job(
        &self,
        namespace: &str,
        job_id: &str,
        job_create_index: u64,
    ) -> Option<Arc<Deployment>> {
        self.deployments_by_job(namespace, job_id)
            .into_iter()
            .find(|deployment| deployment.job_create_index == job_create_index)
    }
}

impl StateStore {
    /// Creates or updates a deployment (one write, one index); publishes a
    /// `DeploymentStatusUpdate` event. Returns the stored deployment.
    pub async fn upsert_deployment(
        &self,
        mut deployment: Deployment,
    ) -> Result<Arc<Deployment>, StateError> {
        validate_deployment(&mut deployment)?;
        self.engine
            .write(move |tables, context| {
                write_deployment(
                    tables,
                    context,
                    deployment,
                    EventType::DeploymentStatusUpdate,
                )
            })
            .await
    }

    /// The deployment `id`.
    pub fn deployment(&self, id: &str) -> Option<Arc<Deployment>> {
        self.snapshot().deployment(id)
    }

    /// Deployments whose ID starts with `id_prefix`, by ID.
    pub fn deployments(&self, id_prefix: &str) -> Vec<Arc<Deployment>> {
        self.snapshot().deployments(id_prefix)
    }

    /// Every deployment of a job, newest first.
    pub fn deployments_by_job(&self, namespace: &str, job_id: &str) -> Vec<Arc<Deployment>> {
        self.snapshot().deployments_by_job(namespace, job_id)
    }
}

#[cfg(test)]
mod tests {
    use drover_structs::{DEPLOYMENT_STATUS_SUCCESSFUL, DeploymentState};

    use super::*;
    use crate::events::EventFilter;

    fn deployment(id: &str, job_id: &str, job_create_index: u64) -> Deployment {
        let mut deployment = Deployment {
            id: id.to_owned(),
            job_id: job_id.to_owned(),
            job_create_index,
            status: drover_structs::DEPLOYMENT_STATUS_RUNNING.to_owned(),
            ..Deployment::default()
        };
        deployment.task_groups.insert(
            "web".to_owned(),
            DeploymentState {
                desired_total: 4,
                ..DeploymentState::default()
            },
        );
        deployment
    }

    #[tokio::test]
    async fn a_deployment_is_stored_indexed_by_job_and_published() {
        let store = StateStore::in_memory().await.unwrap();
        let mut events = store.subscribe_events(0, EventFilter::default());
        let first = store
            .upsert_deployment(deployment("d1", "web", 5))
            .await
            .unwrap();
        assert_eq!(first.namespace, "default");
        assert_eq!(first.create_index, first.modify_index);
        let second = store
            .upsert_deployment(deployment("d2", "web", 5))
            .await
            .unwrap();
        store
            .upsert_deployment(deployment("e1", "api", 5))
            .await
            .unwrap();

        let mut done = Deployment::clone(&first);
        done.status = DEPLOYMENT_STATUS_SUCCESSFUL.to_owned();
        let done = store.upsert_deployment(done).await.unwrap();
        assert_eq!(done.create_index, first.create_index);
        assert!(done.modify_index > second.modify_index);

        let of_job: Vec<String> = store
            .deployments_by_job("default", "web")
            .iter()
            .map(|deployment| deployment.id.clone())
            .collect();
        assert_eq!(of_job, ["d2", "d1"]);
        assert_eq!(store.deployments("d").len(), 2);
        assert_eq!(
            store
                .snapshot()
                .latest_deployment_of_job("default", "web", 5)
                .map(|deployment| deployment.id.clone()),
            Some("d2".to_owned())
        );
        assert!(
            store
                .snapshot()
                .latest_deployment_of_job("default", "web", 9)
                .is_none()
        );
        assert_eq!(
            store.indexes().table(Table::Deployments),
            done.modify_index
        );

        let event = events.next_batch().await.unwrap();
        let event = &event.events[0];
        assert_eq!(event.topic, Topic::Deployment);
        assert_eq!(event.event_type, EventType::DeploymentStatusUpdate);
        assert_eq!(event.key, "d1");
        assert_eq!(event.filter_keys, ["web"]);
    }

    #[tokio::test]
    async fn deployments_survive_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = StateStore::open(dir.path()).await.unwrap();
            store
                .upsert_deployment(deployment("d1", "web", 5))
                .await
                .unwrap();
            store.close().await;
        }
        let store = StateStore::open(dir.path()).await.unwrap();
        let reopened = store.deployment("d1").unwrap();
        assert_eq!(reopened.task_groups["web"].desired_total, 4);
        assert_eq!(store.deployments_by_job("default", "web").len(), 1);
    }

    #[tokio::test]
    async fn a_deployment_without_an_id_is_refused_by_field() {
        let store = StateStore::in_memory().await.unwrap();
        let error = store
            .upsert_deployment(deployment("", "web", 5))
            .await
            .unwrap_err();
        assert!(error.to_string().contains("Deployment.ID"), "{error}");
    }
}
