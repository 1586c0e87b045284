//! The deployments table: every deployment by ID, indexed by job, with the `Deployment` events
//! its writes publish (Nomad's `deployment` table and `Deployment` topic).
//!
//! The store keeps what the scheduler and the server decide about a deployment; it decides
//! nothing itself (no status changes of its own, no counts derived from allocations).

use std::sync::Arc;

use std::collections::BTreeSet;

use drover_structs::{
    Allocation, DEFAULT_NAMESPACE, DEPLOYMENT_STATUS_SUCCESSFUL, Deployment,
    DeploymentStatusUpdate, Evaluation, Job, Timestamp,
};

use crate::deployments_table::write_deployment;
use crate::engine::WriteContext;
use crate::error::StateError;
use crate::events::EventType;
use crate::store::StateStore;
use crate::tables::{JobKey, StateSnapshot, StateTables, triples_under};

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

/// Writes a deployment's status change; a successful deployment makes its job version stable
/// (Nomad's store). An unknown deployment is `NotFound`.
fn write_status_update(
    tables: &mut StateTables,
    context: &mut WriteContext,
    update: DeploymentStatusUpdate,
    affected_jobs: &mut BTreeSet<JobKey>,
    now_unix_ns: i64,
) -> Result<(), StateError> {
    let Some(existing) = tables.deployments.get(&update.deployment_id).cloned() else {
        return Err(StateError::NotFound {
            kind: "deployment",
            id: update.deployment_id,
        });
    };
    let mut changed = Deployment::clone(&existing);
    changed.status = update.status;
    changed.status_description = update.status_description;
    affected_jobs.insert((changed.namespace.clone(), changed.job_id.clone()));
    let version_key = (
        changed.namespace.clone(),
        changed.job_id.clone(),
        changed.job_version,
    );
    let successful = changed.status == DEPLOYMENT_STATUS_SUCCESSFUL;
    write_deployment(
        tables,
        context,
        changed,
        EventType::DeploymentStatusUpdate,
        now_unix_ns,
    )?;
    if successful && tables.job_versions.contains_key(&version_key) {
        crate::store::write_job_stability(tables, context, version_key, true)?;
    }
    Ok(())
}

/// Canaries to promote (Nomad's `DeploymentPromoteRequest`): every group, or the named ones.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Promotion {
    pub all: bool,
    pub groups: Vec<String>,
}

/// Allocation health set by an operator (`health_check = "manual"`) or on their behalf.
#[derive(Debug, Clone, Default)]
pub struct AllocHealth {
    pub healthy: Vec<String>,
    pub unhealthy: Vec<String>,
    pub timestamp: Timestamp,
}

/// One change to a deployment, committed in one write with what acts on it (Nomad's
/// deployment status update, promotion, alloc health and desired-transition requests).
#[derive(Debug, Clone, Default)]
pub struct DeploymentChange {
    pub deployment_id: String,
    /// A new status and description.
    pub status: Option<DeploymentStatusUpdate>,
    /// Canaries promoted; refused unless every canary concerned is healthy.
    pub promotion: Option<Promotion>,
    /// Allocation health; each allocation must belong to the deployment.
    pub alloc_health: Option<AllocHealth>,
    /// Failed allocations of the deployment the scheduler may replace now
    /// (`DesiredTransition.Reschedule`).
    pub reschedule: Vec<String>,
    /// A job registered again in the same write (an auto revert).
    pub job: Option<Job>,
    /// Evaluations created with the change; one made for `job` names its new version.
    pub evals: Vec<Evaluation>,
}

fn refused(message: String) -> StateError {
    StateError::Refused(message)
}

/// Nomad's promotion rules: the deployment is active, every canary of the promoted groups is
/// healthy and there is at least one; the groups are promoted with their progress deadline
/// started again, and a deployment that no longer waits says it is running.
fn write_promotion(
    tables: &mut StateTables,
    context: &mut WriteContext,
    deployment_id: &str,
    promotion: &Promotion,
    now_unix_ns: i64,
) -> Result<(), StateError> {
    let Some(deployment) = tables.deployments.get(deployment_id).cloned() else {
        return Err(refused(format!(
            "Deployment ID {deployment_id:?} couldn't be updated as it does not exist"
        )));
    };
    if !deployment.active() {
        return Err(refused(format!(
            "Deployment {:?} has terminal status {:?}:",
            deployment.id, deployment.status
        )));
    }
    let chosen = |group: &str| promotion.all || promotion.groups.iter().any(|name| name == group);
    let mut unhealthy = Vec::new();
    let mut have_canaries = false;
    for (group, state) in &deployment.task_groups {
        if !chosen(group) {
            continue;
        }
        for id in &state.placed_canaries {
            let Some(alloc) = tables.allocs.get(id) else {
                continue;
            };
            let healthy = alloc
                .deployment_status
                .as_ref()
                .is_some_and(|status| status.healthy == Some(true));
            if alloc.terminal_status() || !healthy {
                unhealthy.push(format!(
                    "Canary allocation {:?} for group {:?} is not healthy",
                    alloc.id, alloc.task_group
                ));
                continue;
            }
            have_canaries = true;
        }
    }
    if !unhealthy.is_empty() {
        // Go's multierror list, as Nomad answers it.
        let points: Vec<String> = unhealthy.iter().map(|line| format!("* {line}")).collect();
        let message = if points.len() == 1 {
            format!("1 error occurred:\n\t{}\n\n", points[0])
        } else {
            format!(
                "{} errors occurred:\n\t{}\n\n",
                points.len(),
                points.join("\n\t")
            )
        };
        return Err(refused(message));
    }
    if !have_canaries {
        return Err(refused("no canaries to promote".to_owned()));
    }
    let mut updated = Deployment::clone(&deployment);
    for (group, state) in &mut updated.task_groups {
        if !chosen(group) {
            continue;
        }
        if state.progress_deadline.0 > 0 && !state.require_progress_by.is_zero() {
            state.require_progress_by =
                Timestamp::from_unix_nanos(now_unix_ns.saturating_add(state.progress_deadline.0));
        }
        state.promoted = true;
    }
    if !updated.requires_promotion() && updated.status == drover_structs::DEPLOYMENT_STATUS_RUNNING
    {
        updated.status_description = drover_structs::DEPLOYMENT_DESC_RUNNING.to_owned();
    }
    write_deployment(
        tables,
        context,
        updated,
        EventType::DeploymentPromotion,
        now_unix_ns,
    )?;
    Ok(())
}

/// The allocations of `change` as they will be written: health set, or marked for
/// rescheduling. Each must exist and belong to the deployment.
fn changed_allocs(
    tables: &StateTables,
    change: &DeploymentChange,
) -> Result<Vec<Allocation>, StateError> {
    let mut allocs: Vec<Allocation> = Vec::new();
    let lookup = |id: &str| -> Result<Allocation, StateError> {
        let Some(alloc) = tables.allocs.get(id) else {
            return Err(refused(format!("unknown alloc {id:?}")));
        };
        if alloc.deployment_id != change.deployment_id {
            return Err(refused(format!(
                "alloc {id:?} is not part of deployment {:?}",
                change.deployment_id
            )));
        }
        Ok(Allocation::clone(alloc))
    };
    if let Some(health) = &change.alloc_health {
        let marked = health
            .healthy
            .iter()
            .map(|id| (id, true))
            .chain(health.unhealthy.iter().map(|id| (id, false)));
        for (id, healthy) in marked {
            let mut alloc = lookup(id)?;
            let status = alloc.deployment_status.get_or_insert_with(Default::default);
            status.healthy = Some(healthy);
            status.timestamp = health.timestamp;
            status.modify_index = 0;
            allocs.push(alloc);
        }
    }
    for id in &change.reschedule {
        let Some(alloc) = tables.allocs.get(id) else {
            continue;
        };
        let mut alloc = Allocation::clone(alloc);
        alloc.desired_transition.reschedule = Some(true);
        allocs.push(alloc);
    }
    Ok(allocs)
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
        now_unix_ns: i64,
    ) -> Result<Arc<Deployment>, StateError> {
        validate_deployment(&mut deployment)?;
        self.engine
            .write(move |tables, context| {
                write_deployment(
                    tables,
                    context,
                    deployment,
                    EventType::DeploymentStatusUpdate,
                    now_unix_ns,
                )
            })
            .await
    }

    /// Commits a plan's results in one write (in consecutive ones of a share of the allocations
    /// each on a backend with a cap on operations per transaction): the deployment it creates or updates, the
    /// status changes of deployments, its allocations (each counted in its deployment) and
    /// evaluations. A status update of an unknown deployment is `NotFound`.
    pub async fn upsert_plan_results(
        &self,
        deployment: Option<Deployment>,
        deployment_updates: Vec<DeploymentStatusUpdate>,
        mut allocs: Vec<Allocation>,
        mut evals: Vec<Evaluation>,
        now_unix_ns: i64,
    ) -> Result<u64, StateError> {
        let mut deployment = deployment;
        if let Some(deployment) = deployment.as_mut() {
            validate_deployment(deployment)?;
        }
        crate::store::validate_allocs(&mut allocs)?;
        crate::store::validate_evals(&mut evals)?;
        // On a backend with a cap on operations per transaction, a large plan commits in
        // consecutive writes (each a plan committed in part, as the applier may do anyway):
        // the deployment with the first allocations, the evaluations with the last.
        let parts = crate::store::split_allocs(allocs, self.allocs_per_write());
        let count = parts.len();
        let (mut deployment, mut deployment_updates, mut evals) =
            (deployment, Some(deployment_updates), Some(evals));
        let mut index = 0;
        for (number, allocs) in parts.into_iter().enumerate() {
            let evals = if number + 1 == count {
                evals.take().unwrap_or_default()
            } else {
                Vec::new()
            };
            index = self
                .write_plan_results(
                    deployment.take(),
                    deployment_updates.take().unwrap_or_default(),
                    allocs,
                    evals,
                    now_unix_ns,
                )
                .await?;
        }
        Ok(index)
    }

    async fn write_plan_results(
        &self,
        deployment: Option<Deployment>,
        deployment_updates: Vec<DeploymentStatusUpdate>,
        allocs: Vec<Allocation>,
        evals: Vec<Evaluation>,
        now_unix_ns: i64,
    ) -> Result<u64, StateError> {
        self.engine
            .write(move |tables, context| {
                if deployment.is_none()
                    && deployment_updates.is_empty()
                    && allocs.is_empty()
                    && evals.is_empty()
                {
                    return Ok(context.latest_committed_index());
                }
                let mut affected_jobs = BTreeSet::new();
                if let Some(deployment) = deployment {
                    affected_jobs.insert((deployment.namespace.clone(), deployment.job_id.clone()));
                    write_deployment(
                        tables,
                        context,
                        deployment,
                        EventType::DeploymentStatusUpdate,
                        now_unix_ns,
                    )?;
                }
                for update in deployment_updates {
                    write_status_update(tables, context, update, &mut affected_jobs, now_unix_ns)?;
                }
                crate::store::write_server_allocs(
                    tables,
                    context,
                    allocs,
                    now_unix_ns,
                    &mut affected_jobs,
                )?;
                crate::store::write_evals(tables, context, evals, now_unix_ns, &mut affected_jobs)?;
                for key in &affected_jobs {
                    crate::store::refresh_job_status(tables, context, key)?;
                }
                Ok(context.index())
            })
            .await
    }

    /// Commits a [`DeploymentChange`] in one write: the promotion, the allocations' health
    /// (counted in the deployment) or reschedule marks, the status, the job registered again
    /// and the evaluations. Nomad's refusals are [`StateError::Refused`] with Nomad's words.
    pub async fn update_deployment(
        &self,
        mut change: DeploymentChange,
        now_unix_ns: i64,
    ) -> Result<u64, StateError> {
        crate::store::validate_evals(&mut change.evals)?;
        self.engine
            .write(move |tables, context| {
                let mut affected_jobs = BTreeSet::new();
                if let Some(promotion) = &change.promotion {
                    write_promotion(
                        tables,
                        context,
                        &change.deployment_id,
                        promotion,
                        now_unix_ns,
                    )?;
                }
                let mut allocs = changed_allocs(tables, &change)?;
                for alloc in &mut allocs {
                    if let Some(status) = alloc.deployment_status.as_mut()
                        && status.modify_index == 0
                    {
                        status.modify_index = context.index();
                    }
                }
                crate::store::write_server_allocs(
                    tables,
                    context,
                    allocs,
                    now_unix_ns,
                    &mut affected_jobs,
                )?;
                if let Some(update) = change.status {
                    write_status_update(tables, context, update, &mut affected_jobs, now_unix_ns)?;
                }
                let mut evals = change.evals;
                if let Some(job) = change.job {
                    let registration =
                        crate::store::write_job(tables, context, job, None, now_unix_ns)?;
                    for eval in &mut evals {
                        if eval.job_id == registration.job.id {
                            eval.job_modify_index = registration.job_modify_index;
                        }
                    }
                }
                crate::store::write_evals(tables, context, evals, now_unix_ns, &mut affected_jobs)?;
                for key in &affected_jobs {
                    crate::store::refresh_job_status(tables, context, key)?;
                }
                Ok(context.index())
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
    use drover_structs::DeploymentState;

    use super::*;
    use crate::engine::Table;
    use crate::events::{EventFilter, Topic};

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
            .upsert_deployment(deployment("d1", "web", 5), 1_000)
            .await
            .unwrap();
        assert_eq!(first.namespace, "default");
        assert_eq!(first.create_index, first.modify_index);
        let second = store
            .upsert_deployment(deployment("d2", "web", 5), 1_000)
            .await
            .unwrap();
        store
            .upsert_deployment(deployment("e1", "api", 5), 1_000)
            .await
            .unwrap();

        let mut done = Deployment::clone(&first);
        done.status = DEPLOYMENT_STATUS_SUCCESSFUL.to_owned();
        let done = store.upsert_deployment(done, 1_000).await.unwrap();
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
        assert_eq!(store.indexes().table(Table::Deployments), done.modify_index);

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
                .upsert_deployment(deployment("d1", "web", 5), 1_000)
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
            .upsert_deployment(deployment("", "web", 5), 1_000)
            .await
            .unwrap_err();
        assert!(error.to_string().contains("Deployment.ID"), "{error}");
    }

    fn alloc_of(id: &str, deployment_id: &str, canary: bool) -> Allocation {
        Allocation {
            id: id.to_owned(),
            job_id: "web".to_owned(),
            task_group: "web".to_owned(),
            name: "web.web[0]".to_owned(),
            node_id: "node-1".to_owned(),
            desired_status: "run".to_owned(),
            deployment_id: deployment_id.to_owned(),
            deployment_status: canary.then(|| drover_structs::AllocDeploymentStatus {
                canary: true,
                ..Default::default()
            }),
            modify_time: 1_000,
            ..Allocation::default()
        }
    }

    #[tokio::test]
    async fn a_plan_commits_its_deployment_and_allocations_are_counted_in_it() {
        let store = StateStore::in_memory().await.unwrap();
        let mut created = deployment("d1", "web", 5);
        created
            .task_groups
            .get_mut("web")
            .unwrap()
            .progress_deadline = drover_structs::DurationNs(600);
        store
            .upsert_plan_results(
                Some(created),
                Vec::new(),
                vec![alloc_of("a1", "d1", false), alloc_of("a2", "d1", true)],
                Vec::new(),
                1_000,
            )
            .await
            .unwrap();
        let stored = store.deployment("d1").unwrap();
        let group = &stored.task_groups["web"];
        assert_eq!(group.placed_allocs, 2);
        assert_eq!(group.placed_canaries, ["a2"]);
        // The first placement starts the progress deadline (the store sets ModifyTime).
        assert_eq!(group.require_progress_by.unix_nanos(), Some(1_600));

        let mut healthy = alloc_of("a1", "d1", false);
        healthy.client_status = "running".to_owned();
        healthy.deployment_status = Some(drover_structs::AllocDeploymentStatus {
            healthy: Some(true),
            timestamp: Timestamp::from_unix_nanos(5_000),
            ..Default::default()
        });
        let mut unhealthy = alloc_of("a2", "d1", true);
        unhealthy.client_status = "failed".to_owned();
        unhealthy.deployment_status = Some(drover_structs::AllocDeploymentStatus {
            healthy: Some(false),
            timestamp: Timestamp::from_unix_nanos(6_000),
            ..Default::default()
        });
        store
            .update_allocs_from_client(vec![healthy.clone(), unhealthy], 7_000)
            .await
            .unwrap();
        let group = store.deployment("d1").unwrap().task_groups["web"].clone();
        assert_eq!((group.healthy_allocs, group.unhealthy_allocs), (1, 1));
        assert_eq!(group.placed_allocs, 2);
        assert_eq!(group.require_progress_by.unix_nanos(), Some(5_600));
        // The canary flag stays the server's.
        assert!(
            store
                .alloc("a2")
                .unwrap()
                .deployment_status
                .as_ref()
                .unwrap()
                .canary
        );

        // The same health reported again is not counted twice.
        store
            .update_allocs_from_client(vec![healthy], 8_000)
            .await
            .unwrap();
        assert_eq!(
            store.deployment("d1").unwrap().task_groups["web"].healthy_allocs,
            1
        );

        store
            .upsert_plan_results(
                None,
                vec![DeploymentStatusUpdate {
                    deployment_id: "d1".to_owned(),
                    status: drover_structs::DEPLOYMENT_STATUS_CANCELLED.to_owned(),
                    status_description: drover_structs::DEPLOYMENT_DESC_NEWER_JOB.to_owned(),
                }],
                Vec::new(),
                Vec::new(),
                9_000,
            )
            .await
            .unwrap();
        let cancelled = store.deployment("d1").unwrap();
        assert_eq!(cancelled.status, "cancelled");
        assert_eq!(
            cancelled.status_description,
            "Cancelled due to newer version of job"
        );
        let unknown = store
            .upsert_plan_results(
                None,
                vec![DeploymentStatusUpdate {
                    deployment_id: "nope".to_owned(),
                    ..Default::default()
                }],
                Vec::new(),
                Vec::new(),
                9_000,
            )
            .await;
        assert!(unknown.is_err());
    }

    #[tokio::test]
    async fn a_successful_deployment_makes_its_job_version_stable() {
        let store = StateStore::in_memory().await.unwrap();
        let job = drover_structs::Job {
            id: "web".to_owned(),
            namespace: "default".to_owned(),
            r#type: "service".to_owned(),
            ..drover_structs::Job::default()
        };
        let registered = store.upsert_job(job, 1).await.unwrap();
        assert!(!registered.job.stable);
        let mut tracked = deployment("d1", "web", registered.job.create_index);
        tracked.job_version = registered.job.version;
        store.upsert_deployment(tracked, 1_000).await.unwrap();
        store
            .upsert_plan_results(
                None,
                vec![DeploymentStatusUpdate {
                    deployment_id: "d1".to_owned(),
                    status: DEPLOYMENT_STATUS_SUCCESSFUL.to_owned(),
                    status_description: drover_structs::DEPLOYMENT_DESC_SUCCESSFUL.to_owned(),
                }],
                Vec::new(),
                Vec::new(),
                2,
            )
            .await
            .unwrap();
        assert!(store.job("default", "web").unwrap().stable);
        assert!(store.job_versions("default", "web")[0].stable);
    }
}
