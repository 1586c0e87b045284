//! The deployment watcher (leader work, started with the broker, the periodic dispatcher and
//! the drainer): carries every active deployment on as Nomad's deployment watcher does, and the
//! operator's deployment writes (promote, pause/resume, fail, allocation health).
//!
//! On every change of the allocation or deployment tables (and at the earliest progress
//! deadline), one pass over the stored state; per active deployment:
//! - an allocation that turned healthy after the job's latest evaluation saw the state: an
//!   evaluation (`deployment-watcher`) so the scheduler places the next batch (or marks the
//!   deployment successful once everything is healthy);
//! - an unhealthy allocation: in a group with a `progress_deadline` it may be replaced
//!   (`DesiredTransition.Reschedule`, with an evaluation); without one the deployment fails at
//!   once ("Failed due to unhealthy allocations");
//! - every group with `auto_promote` and all its canaries placed and healthy: promoted;
//! - a group not done by its `RequireProgressBy` and short of healthy allocations: the
//!   deployment fails ("Failed due to progress deadline").
//!
//! A failure with `auto_revert` registers the latest stable version again in the same write
//! ("… - rolling back to job version N"), unless it has the current spec. Everything lives in
//! the state store, so a restarted server picks the deployments up where they were.
//!
//! Not here: creating deployments, placing their allocations and marking them successful (the
//! scheduler's reconciler), counting allocations in them (the state store), judging an
//! allocation's health (the client).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use drover_state::deployments::{AllocHealth, DeploymentChange, Promotion};
use drover_state::{StateSnapshot, Table};
use drover_structs::{
    DEPLOYMENT_DESC_FAILED_ALLOCATIONS, DEPLOYMENT_DESC_FAILED_BY_USER, DEPLOYMENT_DESC_PAUSED,
    DEPLOYMENT_DESC_PROGRESS_DEADLINE, DEPLOYMENT_DESC_RUNNING, DEPLOYMENT_STATUS_FAILED,
    DEPLOYMENT_STATUS_PAUSED, DEPLOYMENT_STATUS_RUNNING, Deployment, DeploymentStatusUpdate,
    DeploymentUpdateResponse, EVAL_STATUS_CANCELLED, EVAL_TRIGGER_DEPLOYMENT_WATCHER, Evaluation,
    Job, Timestamp, deployment_desc_no_rollback_target, deployment_desc_rollback,
    deployment_desc_rollback_noop,
};
use tokio_util::sync::CancellationToken;

use crate::plan_apply::{Commit, PlanRequest};
use crate::{ServerError, ServerInner};

/// How long the watcher waits for a change when no deadline is near.
const IDLE_WAIT: Duration = Duration::from_secs(60);

/// What one pass decided for one deployment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Action {
    /// Create an evaluation, marking these failed allocations replaceable.
    Evaluate {
        deployment_id: String,
        reschedule: Vec<String>,
    },
    /// Promote every group's canaries.
    AutoPromote { deployment_id: String },
    /// Fail the deployment; roll back when asked and a stable version exists.
    Fail {
        deployment_id: String,
        description: &'static str,
        rollback: bool,
    },
}

/// What one pass decided.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct WatchDecision {
    pub actions: Vec<Action>,
    /// The earliest progress deadline still ahead (Unix ns).
    pub next_deadline: Option<i64>,
}

/// The index of the latest state the job's evaluations were planned on (Nomad's
/// `jobEvalStatus`): cancelled evaluations saw nothing.
fn latest_eval_index(snapshot: &StateSnapshot, namespace: &str, job_id: &str) -> u64 {
    snapshot
        .evals_by_job(namespace, job_id)
        .iter()
        .filter(|eval| eval.status != EVAL_STATUS_CANCELLED)
        .map(|eval| {
            if eval.snapshot_index != 0 {
                eval.snapshot_index
            } else {
                eval.create_index
            }
        })
        .max()
        .unwrap_or(0)
}

/// Decides one pass over `snapshot` at `now_unix_ns` (pure: no writes, no clock).
pub(crate) fn decide(snapshot: &StateSnapshot, now_unix_ns: i64) -> WatchDecision {
    let mut decision = WatchDecision::default();
    for deployment in snapshot.deployments("") {
        if !deployment.active() {
            continue;
        }
        let Some(job) = snapshot.job(&deployment.namespace, &deployment.job_id) else {
            continue;
        };
        if job.create_index != deployment.job_create_index {
            continue;
        }
        let (action, deadline) = decide_one(snapshot, &deployment, &job, now_unix_ns);
        decision.actions.extend(action);
        if let Some(deadline) = deadline {
            decision.next_deadline = Some(
                decision
                    .next_deadline
                    .map_or(deadline, |next| next.min(deadline)),
            );
        }
    }
    decision
}

fn is_healthy(alloc: &drover_structs::Allocation) -> bool {
    alloc
        .deployment_status
        .as_ref()
        .is_some_and(|status| status.healthy == Some(true))
}

fn is_unhealthy(alloc: &drover_structs::Allocation) -> bool {
    alloc
        .deployment_status
        .as_ref()
        .is_some_and(|status| status.healthy == Some(false))
}

/// One deployment: at most one action, and its progress deadline if still ahead.
fn decide_one(
    snapshot: &StateSnapshot,
    deployment: &Deployment,
    job: &Job,
    now_unix_ns: i64,
) -> (Option<Action>, Option<i64>) {
    let allocs: Vec<_> = snapshot
        .allocs_by_job(&deployment.namespace, &deployment.job_id)
        .into_iter()
        .filter(|alloc| alloc.deployment_id == deployment.id)
        .collect();
    let latest_eval = latest_eval_index(snapshot, &deployment.namespace, &deployment.job_id);

    // Nomad's handleAllocUpdate.
    let mut create_eval = false;
    let mut reschedule = Vec::new();
    let mut fail = false;
    let mut rollback = false;
    for alloc in &allocs {
        let Some(state) = deployment.task_groups.get(&alloc.task_group) else {
            continue;
        };
        let progress_based = state.progress_deadline.0 != 0;
        if progress_based && is_unhealthy(alloc) && !alloc.desired_transition.should_reschedule() {
            reschedule.push(alloc.id.clone());
            continue;
        }
        let health_index = alloc
            .deployment_status
            .as_ref()
            .map_or(0, |status| status.modify_index);
        if is_healthy(alloc) && health_index > latest_eval {
            create_eval = true;
        }
        if !progress_based && is_unhealthy(alloc) {
            rollback |= state.auto_revert;
            fail = true;
        }
    }
    if fail {
        return (
            Some(Action::Fail {
                deployment_id: deployment.id.clone(),
                description: DEPLOYMENT_DESC_FAILED_ALLOCATIONS,
                rollback,
            }),
            None,
        );
    }

    // The progress deadline: the earliest of the groups not yet done.
    let cutoff = progress_cutoff(deployment, &allocs);
    if let Some(cutoff) = cutoff
        && cutoff <= now_unix_ns
        && let Some(rollback) = should_fail(deployment, job)
    {
        return (
            Some(Action::Fail {
                deployment_id: deployment.id.clone(),
                description: DEPLOYMENT_DESC_PROGRESS_DEADLINE,
                rollback,
            }),
            None,
        );
    }
    let ahead = cutoff.filter(|cutoff| *cutoff > now_unix_ns);

    if auto_promotable(deployment, &allocs) {
        return (
            Some(Action::AutoPromote {
                deployment_id: deployment.id.clone(),
            }),
            ahead,
        );
    }
    if create_eval || !reschedule.is_empty() {
        return (
            Some(Action::Evaluate {
                deployment_id: deployment.id.clone(),
                reschedule,
            }),
            ahead,
        );
    }
    (None, ahead)
}

/// Nomad's `getDeploymentProgressCutoff`: the earliest `RequireProgressBy` of the groups that
/// are not done (waiting for promotion, or fewer healthy running allocations than desired).
fn progress_cutoff(
    deployment: &Deployment,
    allocs: &[Arc<drover_structs::Allocation>],
) -> Option<i64> {
    deployment
        .task_groups
        .iter()
        .filter(|(name, state)| {
            if state.desired_canaries != 0 && !state.promoted {
                return true;
            }
            let healthy = allocs
                .iter()
                .filter(|alloc| {
                    &alloc.task_group == *name && !alloc.terminal_status() && is_healthy(alloc)
                })
                .count();
            (healthy as i64) < state.desired_total
        })
        .filter_map(|(_, state)| state.require_progress_by.unix_nanos())
        .filter(|by| *by != 0)
        .min()
}

/// Nomad's `shouldFail` at the deadline: `Some(rollback)` when a group has too few healthy
/// allocations (canaries while unpromoted), rolling back if such a group has `auto_revert`.
fn should_fail(deployment: &Deployment, job: &Job) -> Option<bool> {
    let mut fail = false;
    for (name, state) in &deployment.task_groups {
        let enough = if state.desired_canaries > 0 && !state.promoted {
            state.healthy_allocs >= state.desired_canaries
        } else {
            state.healthy_allocs >= state.desired_total
        };
        if enough {
            continue;
        }
        fail = true;
        let auto_revert = job
            .lookup_task_group(name)
            .and_then(|group| group.update.as_ref())
            .is_some_and(|update| update.auto_revert);
        if auto_revert {
            return Some(true);
        }
    }
    fail.then_some(false)
}

/// Nomad's `autoPromoteDeployment`: canaries placed, promotion still needed, and every group
/// auto-promotes with all its canaries placed and healthy.
fn auto_promotable(deployment: &Deployment, allocs: &[Arc<drover_structs::Allocation>]) -> bool {
    let placed = deployment
        .task_groups
        .values()
        .any(|state| !state.placed_canaries.is_empty());
    if !placed || !deployment.requires_promotion() {
        return false;
    }
    deployment.task_groups.values().all(|state| {
        state.auto_promote
            && state.desired_canaries == state.placed_canaries.len() as i64
            && state.placed_canaries.iter().all(|id| {
                allocs
                    .iter()
                    .find(|alloc| &alloc.id == id)
                    .is_none_or(|alloc| is_healthy(alloc))
            })
    })
}

/// Runs the watcher until shutdown.
pub(crate) async fn run(inner: Arc<ServerInner>, shutdown: CancellationToken) {
    let mut seen = 0;
    loop {
        let snapshot = inner.state.snapshot();
        let index = snapshot
            .table_index(Table::Allocs)
            .max(snapshot.table_index(Table::Deployments));
        let now = inner.clock.now_unix_ns();
        let decision = decide(&snapshot, now);
        drop(snapshot);
        for action in decision.actions {
            if let Err(error) = inner.apply_watch_action(action).await {
                tracing::error!(%error, "deployment watcher action failed");
            }
        }
        seen = seen.max(index);
        let wait = decision.next_deadline.map_or(IDLE_WAIT, |deadline| {
            Duration::from_nanos(u64::try_from(deadline.saturating_sub(now)).unwrap_or(0))
                .min(IDLE_WAIT)
                // The clock may lag tokio time by a rounding: never wake just before.
                .saturating_add(Duration::from_millis(1))
        });
        let until = tokio::time::Instant::now() + wait;
        tokio::select! {
            () = shutdown.cancelled() => return,
            outcome = inner.state.wait_for_change(&[Table::Allocs, Table::Deployments], seen, until) => {
                seen = seen.max(outcome.index);
            }
        }
    }
}

impl ServerInner {
    /// An evaluation on behalf of a deployment (Nomad's watcher `getEval`).
    fn deployment_eval(&self, job: &Job, deployment_id: &str) -> Evaluation {
        let mut eval = self.new_eval(job, EVAL_TRIGGER_DEPLOYMENT_WATCHER, job.job_modify_index);
        eval.deployment_id = deployment_id.to_owned();
        eval
    }

    /// The deployment and its current job, or Nomad's refusal.
    fn deployment_and_job(
        &self,
        deployment_id: &str,
    ) -> Result<(Arc<Deployment>, Arc<Job>), ServerError> {
        if deployment_id.is_empty() {
            return Err(ServerError::BadRequest("missing deployment ID".into()));
        }
        let Some(deployment) = self.state.deployment(deployment_id) else {
            return Err(ServerError::NotFound("deployment not found".into()));
        };
        let Some(job) = self.state.job(&deployment.namespace, &deployment.job_id) else {
            return Err(ServerError::NotFound(format!(
                "job {:?} of deployment {:?} not found",
                deployment.job_id, deployment.id
            )));
        };
        Ok((deployment, job))
    }

    /// The latest stable version to roll back to and the failure description that says so
    /// (Nomad's `latestStableJob` and `handleRollbackValidity`); `None` without a stable
    /// version. A stable version with the current spec is not registered again.
    fn rollback_target(&self, job: &Job, description: &str) -> Option<(Option<Job>, String)> {
        let stable = self
            .state
            .job_versions(&job.namespace, &job.id)
            .into_iter()
            .find(|version| version.stable)?;
        Some(if drover_state::derive::same_job_spec(job, &stable) {
            (
                None,
                deployment_desc_rollback_noop(description, stable.version),
            )
        } else {
            (
                Some(Job::clone(&stable)),
                deployment_desc_rollback(description, stable.version),
            )
        })
    }

    /// Commits a change with its evaluation through the plan applier (the one writer of
    /// allocations) and hands the evaluation to the broker.
    async fn commit_deployment_change(
        &self,
        change: DeploymentChange,
    ) -> Result<DeploymentUpdateResponse, ServerError> {
        let eval_ids: Vec<String> = change.evals.iter().map(|eval| eval.id.clone()).collect();
        let reverted_job_version = change.job.is_some();
        let job_key = change
            .job
            .as_ref()
            .map(|job| (job.namespace.clone(), job.id.clone()));
        let (reply, response) = tokio::sync::oneshot::channel();
        self.plans
            .send(PlanRequest {
                commit: Commit::Deployment(Box::new(change)),
                reply,
            })
            .await
            .map_err(|_| ServerError::Internal("the plan applier has stopped".into()))?;
        let index = response
            .await
            .map_err(|_| ServerError::Internal("the plan applier dropped the request".into()))??
            .index;
        for id in &eval_ids {
            if let Some(stored) = self.state.eval(id) {
                self.enqueue_when_due((*stored).clone());
            }
        }
        let reverted_job_version = if reverted_job_version {
            job_key
                .and_then(|(namespace, job_id)| self.state.job(&namespace, &job_id))
                .map(|job| job.version)
        } else {
            None
        };
        Ok(DeploymentUpdateResponse {
            eval_id: eval_ids.first().cloned().unwrap_or_default(),
            eval_create_index: if eval_ids.is_empty() { 0 } else { index },
            deployment_modify_index: index,
            reverted_job_version,
            index,
        })
    }

    /// Fails a deployment with `description`, rolling back when asked.
    async fn fail_deployment(
        &self,
        deployment: &Deployment,
        job: &Job,
        description: &str,
        rollback: bool,
    ) -> Result<DeploymentUpdateResponse, ServerError> {
        let (revert, description) = if rollback {
            self.rollback_target(job, description)
                .unwrap_or_else(|| (None, deployment_desc_no_rollback_target(description)))
        } else {
            (None, description.to_owned())
        };
        tracing::info!(
            deployment_id = deployment.id,
            description,
            "deployment failed"
        );
        self.commit_deployment_change(DeploymentChange {
            deployment_id: deployment.id.clone(),
            status: Some(DeploymentStatusUpdate {
                deployment_id: deployment.id.clone(),
                status: DEPLOYMENT_STATUS_FAILED.to_owned(),
                status_description: description,
            }),
            job: revert,
            evals: vec![self.deployment_eval(job, &deployment.id)],
            ..DeploymentChange::default()
        })
        .await
    }

    async fn apply_watch_action(&self, action: Action) -> Result<(), ServerError> {
        let deployment_id = match &action {
            Action::Evaluate { deployment_id, .. }
            | Action::AutoPromote { deployment_id }
            | Action::Fail { deployment_id, .. } => deployment_id.clone(),
        };
        let (deployment, job) = self.deployment_and_job(&deployment_id)?;
        match action {
            Action::Evaluate { reschedule, .. } => {
                self.commit_deployment_change(DeploymentChange {
                    deployment_id: deployment.id.clone(),
                    reschedule,
                    evals: vec![self.deployment_eval(&job, &deployment.id)],
                    ..DeploymentChange::default()
                })
                .await?;
            }
            Action::AutoPromote { .. } => {
                tracing::info!(deployment_id, "promoting the deployment's healthy canaries");
                self.commit_deployment_change(DeploymentChange {
                    deployment_id: deployment.id.clone(),
                    promotion: Some(Promotion {
                        all: true,
                        groups: Vec::new(),
                    }),
                    evals: vec![self.deployment_eval(&job, &deployment.id)],
                    ..DeploymentChange::default()
                })
                .await?;
            }
            Action::Fail {
                description,
                rollback,
                ..
            } => {
                self.fail_deployment(&deployment, &job, description, rollback)
                    .await?;
            }
        }
        Ok(())
    }

    /// The deployment, refused as Nomad refuses a write to a finished one.
    fn active_deployment(
        &self,
        deployment_id: &str,
        terminal: &str,
    ) -> Result<(Arc<Deployment>, Arc<Job>), ServerError> {
        let (deployment, job) = self.deployment_and_job(deployment_id)?;
        if !deployment.active() {
            return Err(ServerError::BadRequest(terminal.to_owned()));
        }
        Ok((deployment, job))
    }
}

impl crate::Server {
    /// Promotes a deployment's canaries, all or the named groups' (`Deployment.Promote`).
    pub async fn promote_deployment(
        &self,
        request: drover_structs::DeploymentPromoteRequest,
    ) -> Result<DeploymentUpdateResponse, ServerError> {
        let inner = &self.inner;
        let (deployment, job) =
            inner.active_deployment(&request.deployment_id, "can't promote terminal deployment")?;
        inner
            .commit_deployment_change(DeploymentChange {
                deployment_id: deployment.id.clone(),
                promotion: Some(Promotion {
                    all: request.all,
                    groups: request.groups,
                }),
                evals: vec![inner.deployment_eval(&job, &deployment.id)],
                ..DeploymentChange::default()
            })
            .await
    }

    /// Pauses or resumes a deployment (`Deployment.Pause`); resuming creates an evaluation.
    pub async fn pause_deployment(
        &self,
        request: drover_structs::DeploymentPauseRequest,
    ) -> Result<DeploymentUpdateResponse, ServerError> {
        let inner = &self.inner;
        let terminal = if request.pause {
            "can't pause terminal deployment"
        } else {
            "can't resume terminal deployment"
        };
        let (deployment, job) = inner.active_deployment(&request.deployment_id, terminal)?;
        let (status, description, evals) = if request.pause {
            (DEPLOYMENT_STATUS_PAUSED, DEPLOYMENT_DESC_PAUSED, Vec::new())
        } else {
            (
                DEPLOYMENT_STATUS_RUNNING,
                DEPLOYMENT_DESC_RUNNING,
                vec![inner.deployment_eval(&job, &deployment.id)],
            )
        };
        inner
            .commit_deployment_change(DeploymentChange {
                deployment_id: deployment.id.clone(),
                status: Some(DeploymentStatusUpdate {
                    deployment_id: deployment.id.clone(),
                    status: status.to_owned(),
                    status_description: description.to_owned(),
                }),
                evals,
                ..DeploymentChange::default()
            })
            .await
    }

    /// Fails a deployment by hand (`Deployment.Fail`), rolling back when a group has
    /// `auto_revert`.
    pub async fn fail_deployment(
        &self,
        deployment_id: &str,
    ) -> Result<DeploymentUpdateResponse, ServerError> {
        let inner = &self.inner;
        let (deployment, job) =
            inner.active_deployment(deployment_id, "can't fail terminal deployment")?;
        let rollback = deployment
            .task_groups
            .values()
            .any(|state| state.auto_revert);
        inner
            .fail_deployment(&deployment, &job, DEPLOYMENT_DESC_FAILED_BY_USER, rollback)
            .await
    }

    /// Sets allocations' health by hand (`Deployment.SetAllocHealth`); an unhealthy one fails
    /// the deployment, rolling back when its group has `auto_revert`.
    pub async fn set_deployment_alloc_health(
        &self,
        request: drover_structs::DeploymentAllocHealthRequest,
    ) -> Result<DeploymentUpdateResponse, ServerError> {
        let inner = &self.inner;
        if request.deployment_id.is_empty() {
            return Err(ServerError::BadRequest("missing deployment ID".into()));
        }
        if request.healthy_allocation_ids.is_empty() && request.unhealthy_allocation_ids.is_empty()
        {
            return Err(ServerError::BadRequest(
                "must specify at least one healthy/unhealthy allocation ID".into(),
            ));
        }
        let (deployment, job) = inner.active_deployment(
            &request.deployment_id,
            "can't set health of allocations for a terminal deployment",
        )?;
        let mut status = None;
        let mut revert = None;
        if !request.unhealthy_allocation_ids.is_empty() {
            let unhealthy: BTreeSet<&String> = request.unhealthy_allocation_ids.iter().collect();
            let auto_revert = inner
                .state
                .allocs_by_job(&deployment.namespace, &deployment.job_id)
                .iter()
                .filter(|alloc| {
                    alloc.deployment_id == deployment.id && unhealthy.contains(&alloc.id)
                })
                .any(|alloc| {
                    deployment
                        .task_groups
                        .get(&alloc.task_group)
                        .is_some_and(|state| state.auto_revert)
                });
            let mut description = DEPLOYMENT_DESC_FAILED_ALLOCATIONS.to_owned();
            if auto_revert
                && let Some((target, with_rollback)) =
                    inner.rollback_target(&job, DEPLOYMENT_DESC_FAILED_ALLOCATIONS)
            {
                description = with_rollback;
                revert = target;
            }
            status = Some(DeploymentStatusUpdate {
                deployment_id: deployment.id.clone(),
                status: DEPLOYMENT_STATUS_FAILED.to_owned(),
                status_description: description,
            });
        }
        inner
            .commit_deployment_change(DeploymentChange {
                deployment_id: deployment.id.clone(),
                status,
                alloc_health: Some(AllocHealth {
                    healthy: request.healthy_allocation_ids,
                    unhealthy: request.unhealthy_allocation_ids,
                    timestamp: Timestamp::from_unix_nanos(inner.clock.now_unix_ns()),
                }),
                job: revert,
                evals: vec![inner.deployment_eval(&job, &deployment.id)],
                ..DeploymentChange::default()
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used, clippy::unwrap_used)]

    use drover_scheduler::testing::JobBuilder;
    use drover_state::StateStore;
    use drover_structs::{
        AllocDeploymentStatus, Allocation, DeploymentState, DurationNs, UpdateStrategy,
    };

    use super::*;
    use crate::Clock;

    const NOW: i64 = 1_000_000_000_000;
    const SECOND: i64 = 1_000_000_000;

    fn job(auto_revert: bool, command: &str) -> Job {
        let mut job = JobBuilder::service("web")
            .group("app", 2)
            .task("t", "raw_exec")
            .build();
        job.task_groups[0].update = Some(UpdateStrategy {
            max_parallel: 1,
            auto_revert,
            progress_deadline: Some(DurationNs::from_secs(10)),
            ..UpdateStrategy::default()
        });
        job.task_groups[0].tasks[0]
            .config
            .insert("command".to_owned(), serde_json::json!(command));
        job
    }

    fn alloc(id: &str, job: &Job, deployment_id: &str, healthy: Option<bool>) -> Allocation {
        Allocation {
            id: id.to_owned(),
            namespace: "default".to_owned(),
            job_id: job.id.clone(),
            task_group: "app".to_owned(),
            name: format!("web.app[{}]", id.len()),
            node_id: "n1".to_owned(),
            desired_status: "run".to_owned(),
            client_status: "running".to_owned(),
            deployment_id: deployment_id.to_owned(),
            job: Some(Arc::new(job.clone())),
            deployment_status: healthy.map(|healthy| AllocDeploymentStatus {
                healthy: Some(healthy),
                // As a client's report would: after every evaluation of the job.
                modify_index: 1_000_000,
                ..AllocDeploymentStatus::default()
            }),
            ..Allocation::default()
        }
    }

    /// A stable version 0, a version 1 being deployed with `state` for its group.
    async fn rollout(auto_revert: bool, state: DeploymentState) -> (StateStore, Job) {
        let store = StateStore::in_memory().await.expect("store");
        store
            .upsert_job(job(auto_revert, "/bin/true"), NOW)
            .await
            .expect("v0");
        store
            .update_job_stability("default", "web", 0, true)
            .await
            .expect("stable");
        let current = store
            .upsert_job(job(auto_revert, "/bin/false"), NOW)
            .await
            .expect("v1")
            .job;
        let mut deployment = Deployment::new_for_job("d1".to_owned(), &current, 50);
        deployment.task_groups.insert("app".to_owned(), state);
        store
            .upsert_deployment(deployment, NOW)
            .await
            .expect("deployment");
        (store, Job::clone(&current))
    }

    fn group(desired_total: i64, require_progress_by: i64) -> DeploymentState {
        DeploymentState {
            desired_total,
            auto_revert: true,
            progress_deadline: DurationNs::from_secs(10),
            require_progress_by: Timestamp::from_unix_nanos(require_progress_by),
            ..DeploymentState::default()
        }
    }

    #[tokio::test]
    async fn the_progress_deadline_fails_a_deployment_short_of_healthy_allocations() {
        let (store, _) = rollout(true, group(2, NOW + 10 * SECOND)).await;
        let before = decide(&store.snapshot(), NOW);
        assert!(before.actions.is_empty(), "{before:?}");
        assert_eq!(before.next_deadline, Some(NOW + 10 * SECOND));

        let at = decide(&store.snapshot(), NOW + 10 * SECOND);
        assert_eq!(
            at.actions,
            [Action::Fail {
                deployment_id: "d1".to_owned(),
                description: DEPLOYMENT_DESC_PROGRESS_DEADLINE,
                rollback: true,
            }]
        );
        assert_eq!(at.next_deadline, None);
    }

    #[tokio::test]
    async fn a_group_with_enough_healthy_allocations_is_past_its_deadline() {
        let mut state = group(1, NOW + 10 * SECOND);
        state.healthy_allocs = 1;
        let (store, current) = rollout(false, state).await;
        store
            .upsert_allocs(vec![alloc("a1", &current, "d1", Some(true))], NOW)
            .await
            .unwrap();
        let later = decide(&store.snapshot(), NOW + 60 * SECOND);
        assert!(
            !later
                .actions
                .iter()
                .any(|action| matches!(action, Action::Fail { .. })),
            "{later:?}"
        );
        assert_eq!(later.next_deadline, None);
    }

    #[tokio::test]
    async fn health_turns_into_evaluations_replacements_and_failures() {
        // A healthy allocation the job's evaluations have not seen: evaluate.
        let (store, current) = rollout(false, group(2, NOW + 10 * SECOND)).await;
        store
            .upsert_allocs(vec![alloc("a1", &current, "d1", Some(true))], NOW)
            .await
            .unwrap();
        assert_eq!(
            decide(&store.snapshot(), NOW).actions,
            [Action::Evaluate {
                deployment_id: "d1".to_owned(),
                reschedule: Vec::new(),
            }]
        );

        // An unhealthy one in a group with a progress deadline may be replaced.
        store
            .upsert_allocs(vec![alloc("a2", &current, "d1", Some(false))], NOW)
            .await
            .unwrap();
        assert_eq!(
            decide(&store.snapshot(), NOW).actions,
            [Action::Evaluate {
                deployment_id: "d1".to_owned(),
                reschedule: vec!["a2".to_owned()],
            }]
        );

        // Without a progress deadline it fails the deployment at once.
        let mut state = group(2, 0);
        state.progress_deadline = DurationNs::ZERO;
        let (store, current) = rollout(true, state).await;
        store
            .upsert_allocs(vec![alloc("a2", &current, "d1", Some(false))], NOW)
            .await
            .unwrap();
        assert_eq!(
            decide(&store.snapshot(), NOW).actions,
            [Action::Fail {
                deployment_id: "d1".to_owned(),
                description: DEPLOYMENT_DESC_FAILED_ALLOCATIONS,
                rollback: true,
            }]
        );
    }

    #[tokio::test]
    async fn healthy_canaries_of_an_auto_promoting_group_are_promoted() {
        let mut state = group(2, NOW + 10 * SECOND);
        state.desired_canaries = 1;
        state.auto_promote = true;
        state.placed_canaries = vec!["c1".to_owned()];
        let (store, current) = rollout(false, state).await;
        let mut canary = alloc("c1", &current, "d1", None);
        canary.deployment_status = Some(AllocDeploymentStatus {
            canary: true,
            ..AllocDeploymentStatus::default()
        });
        store
            .upsert_allocs(vec![canary.clone()], NOW)
            .await
            .unwrap();
        assert!(decide(&store.snapshot(), NOW).actions.is_empty());

        canary.deployment_status = Some(AllocDeploymentStatus {
            canary: true,
            healthy: Some(true),
            ..AllocDeploymentStatus::default()
        });
        store.upsert_allocs(vec![canary], NOW).await.unwrap();
        assert_eq!(
            decide(&store.snapshot(), NOW).actions,
            [Action::AutoPromote {
                deployment_id: "d1".to_owned()
            }]
        );
    }

    /// A server started on a store whose deployment is past its deadline fails it and rolls
    /// the job back to its stable version, as after a restart.
    #[tokio::test]
    async fn a_restarted_server_fails_an_overdue_deployment_and_rolls_back() {
        let now = crate::SystemClock.now_unix_ns();
        let (store, _) = rollout(true, group(2, now - SECOND)).await;
        let server = crate::Server::start(
            crate::ServerConfig::default(),
            store.clone(),
            Arc::new(crate::SystemClock),
        );
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let deployment = store.deployment("d1").expect("deployment");
            if deployment.status == DEPLOYMENT_STATUS_FAILED {
                assert_eq!(
                    deployment.status_description,
                    "Failed due to progress deadline - rolling back to job version 0"
                );
                break;
            }
            assert!(tokio::time::Instant::now() < deadline, "never failed");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let job = store.job("default", "web").expect("job");
        assert_eq!(job.version, 2);
        assert!(drover_state::derive::same_job_spec(
            &job,
            &store.job_versions("default", "web")[2]
        ));
        server.shutdown().await;
    }

    #[tokio::test]
    async fn operator_writes_answer_as_nomad() {
        let now = crate::SystemClock.now_unix_ns();
        let mut state = group(2, now + 600 * SECOND);
        state.desired_canaries = 1;
        let (store, current) = rollout(true, state).await;
        let server = crate::Server::start(
            crate::ServerConfig::default(),
            store.clone(),
            Arc::new(crate::SystemClock),
        );
        let refused = server
            .promote_deployment(drover_structs::DeploymentPromoteRequest {
                deployment_id: "d1".to_owned(),
                all: true,
                groups: Vec::new(),
            })
            .await
            .unwrap_err();
        assert_eq!(refused.to_string(), "no canaries to promote");
        let missing = server.fail_deployment("nope").await.unwrap_err();
        assert_eq!(missing.to_string(), "deployment not found");

        let paused = server
            .pause_deployment(drover_structs::DeploymentPauseRequest {
                deployment_id: "d1".to_owned(),
                pause: true,
            })
            .await
            .unwrap();
        assert!(paused.eval_id.is_empty());
        assert_eq!(
            store.deployment("d1").unwrap().status,
            DEPLOYMENT_STATUS_PAUSED
        );

        store
            .upsert_allocs(vec![alloc("a1", &current, "d1", None)], NOW)
            .await
            .unwrap();
        let answer = server
            .set_deployment_alloc_health(drover_structs::DeploymentAllocHealthRequest {
                deployment_id: "d1".to_owned(),
                healthy_allocation_ids: Vec::new(),
                unhealthy_allocation_ids: vec!["a1".to_owned()],
            })
            .await
            .unwrap();
        assert_eq!(answer.reverted_job_version, Some(2));
        assert!(!answer.eval_id.is_empty());
        let failed = store.deployment("d1").unwrap();
        assert_eq!(failed.status, DEPLOYMENT_STATUS_FAILED);
        assert_eq!(
            failed.status_description,
            "Failed due to unhealthy allocations - rolling back to job version 0"
        );
        assert_eq!(failed.task_groups["app"].unhealthy_allocs, 1);
        let terminal = server.fail_deployment("d1").await.unwrap_err();
        assert_eq!(terminal.to_string(), "can't fail terminal deployment");
        server.shutdown().await;
    }
}
