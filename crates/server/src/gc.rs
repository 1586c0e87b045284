//! Server-side garbage collection, as Nomad's core scheduler does it on `PUT /v1/system/gc`
//! (`System.GarbageCollect`, a forced GC): terminal evaluations whose allocations are all
//! terminal (with their allocations), jobs that are done (stopped, or batch and dead, or a
//! stopped periodic or parameterized job) whose every evaluation can go, terminal deployments
//! no live allocation refers to, then down nodes without live allocations. A failed allocation
//! the reschedule policy may still replace is kept, since its replacement carries its tracker.
//!
//! `plan` is pure over a snapshot; [`Server::garbage_collect`] applies it.
//!
//! Not here: the client's collection of allocation directories (`drover_client`), and the
//! periodic, threshold-based GC Nomad runs between forced ones.

use std::collections::BTreeSet;

use drover_state::StateSnapshot;
use drover_structs::{
    ALLOC_CLIENT_STATUS_FAILED, ALLOC_CLIENT_STATUS_RUNNING, ALLOC_DESIRED_STATUS_STOP, Allocation,
    Evaluation, JOB_STATUS_DEAD, JOB_TYPE_BATCH, Job, NODE_STATUS_DOWN,
};

use crate::{Server, ServerError};

/// What one GC pass removes.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct GcPlan {
    /// `(namespace, job ID)` of purged jobs.
    pub jobs: Vec<(String, String)>,
    pub evals: Vec<String>,
    pub allocs: Vec<String>,
    pub deployments: Vec<String>,
    pub nodes: Vec<String>,
}

/// Nomad's `jobIsGCable`: a stopped periodic or parameterized job; otherwise a dead job that
/// was stopped or is a batch job.
fn job_collectable(job: &Job) -> bool {
    if job.is_periodic() || job.is_parameterized() {
        return job.stop;
    }
    job.status == JOB_STATUS_DEAD && (job.stop || job.r#type == JOB_TYPE_BATCH)
}

/// Nomad's `allocGCEligible` for a forced GC: terminal, not running on its client, and not a
/// failed allocation whose reschedule policy may still replace it (at `now`).
pub fn alloc_collectable(alloc: &Allocation, job: Option<&Job>, now_unix_nanos: i64) -> bool {
    if !alloc.terminal_status() || alloc.client_status == ALLOC_CLIENT_STATUS_RUNNING {
        return false;
    }
    let Some(job) = job else {
        return true;
    };
    if job.stop || job.status == JOB_STATUS_DEAD {
        return true;
    }
    if alloc.desired_status == ALLOC_DESIRED_STATUS_STOP
        || alloc.client_status != ALLOC_CLIENT_STATUS_FAILED
    {
        return true;
    }
    let Some(policy) = job
        .lookup_task_group(&alloc.task_group)
        .and_then(|group| group.reschedule_policy.as_ref())
    else {
        return true;
    };
    if !policy.unlimited && policy.attempts == 0 {
        return true;
    }
    if !alloc.next_allocation.is_empty() {
        return true;
    }
    if policy.unlimited {
        return false;
    }
    let Some(last) = alloc
        .reschedule_tracker
        .as_ref()
        .and_then(|tracker| tracker.events.last())
    else {
        return false;
    };
    now_unix_nanos.saturating_sub(last.reschedule_time) > policy.interval.as_nanos()
}

/// Nomad's `gcEval`: whether the evaluation can go, and which of its allocations can.
fn eval_collectable(
    snapshot: &StateSnapshot,
    eval: &Evaluation,
    allow_batch: bool,
    now_unix_nanos: i64,
) -> (bool, Vec<String>) {
    if !eval.terminal_status() {
        return (false, Vec::new());
    }
    let job = snapshot.job(&eval.namespace, &eval.job_id);
    let allocs = snapshot.allocs_by_eval(&eval.id);
    if eval.r#type == JOB_TYPE_BATCH {
        let collect = match job.as_deref() {
            None => true,
            Some(job) if job.status != JOB_STATUS_DEAD => false,
            Some(job) => job.stop || allow_batch,
        };
        if !collect {
            // A live batch job keeps its allocations, but those of older versions can go.
            let older = job
                .as_deref()
                .map(|job| {
                    allocs
                        .iter()
                        .filter(|alloc| {
                            alloc.create_index < job.job_modify_index && alloc.terminal_status()
                        })
                        .map(|alloc| alloc.id.clone())
                        .collect()
                })
                .unwrap_or_default();
            return (false, older);
        }
    }
    let mut all = true;
    let mut collectable = Vec::new();
    for alloc in &allocs {
        if alloc_collectable(alloc, job.as_deref(), now_unix_nanos) {
            collectable.push(alloc.id.clone());
        } else {
            all = false;
        }
    }
    (all, collectable)
}

/// A forced GC pass over `snapshot`, in Nomad's order: jobs, evaluations, deployments, nodes
/// (nodes last, so allocations collected in this pass no longer hold them).
pub fn plan(snapshot: &StateSnapshot, now_unix_nanos: i64) -> GcPlan {
    let mut result = GcPlan::default();
    let mut evals: BTreeSet<String> = BTreeSet::new();
    let mut allocs: BTreeSet<String> = BTreeSet::new();

    for job in snapshot.jobs(None, "") {
        if !job_collectable(&job) {
            continue;
        }
        let mut job_evals = Vec::new();
        let mut job_allocs = Vec::new();
        let mut every_eval = true;
        for eval in snapshot.evals_by_job(&job.namespace, &job.id) {
            let (collect, collectable) = eval_collectable(snapshot, &eval, true, now_unix_nanos);
            if !collect {
                every_eval = false;
                break;
            }
            job_evals.push(eval.id.clone());
            job_allocs.extend(collectable);
        }
        if every_eval {
            result.jobs.push((job.namespace.clone(), job.id.clone()));
            evals.extend(job_evals);
            allocs.extend(job_allocs);
        }
    }

    for eval in snapshot.evals("") {
        let (collect, collectable) = eval_collectable(snapshot, &eval, false, now_unix_nanos);
        if collect {
            evals.insert(eval.id.clone());
        }
        allocs.extend(collectable);
    }

    let live_deployments: BTreeSet<String> = snapshot
        .allocs("")
        .iter()
        .filter(|alloc| !alloc.deployment_id.is_empty() && !alloc.terminal_status())
        .map(|alloc| alloc.deployment_id.clone())
        .collect();
    result.deployments = snapshot
        .deployments("")
        .iter()
        .filter(|deployment| !deployment.active() && !live_deployments.contains(&deployment.id))
        .map(|deployment| deployment.id.clone())
        .collect();

    result.nodes = snapshot
        .nodes("")
        .iter()
        .filter(|node| node.status == NODE_STATUS_DOWN)
        .filter(|node| {
            snapshot
                .allocs_by_node(&node.id)
                .iter()
                .all(|alloc| alloc.terminal_status())
        })
        .map(|node| node.id.clone())
        .collect();

    result.evals = evals.into_iter().collect();
    result.allocs = allocs.into_iter().collect();
    result
}

impl Server {
    /// `PUT /v1/system/gc`: a forced garbage collection of everything terminal, applied at
    /// once (Nomad queues a core evaluation that does the same). Answers what was removed.
    pub async fn garbage_collect(&self) -> Result<GcPlan, ServerError> {
        let inner = &self.inner;
        let now = inner.clock.now_unix_ns();
        let gc = plan(&inner.state.snapshot(), now);
        for (namespace, job_id) in &gc.jobs {
            inner.state.delete_job(namespace, job_id).await?;
        }
        if !gc.evals.is_empty() || !gc.allocs.is_empty() {
            inner
                .state
                .delete_evals_and_allocs(gc.evals.clone(), gc.allocs.clone())
                .await?;
        }
        if !gc.deployments.is_empty() {
            inner
                .state
                .delete_deployments(gc.deployments.clone())
                .await?;
        }
        for node_id in &gc.nodes {
            // A node may have come back since the snapshot; only a node still down goes.
            let still_down = inner
                .state
                .node(node_id)
                .is_some_and(|node| node.status == NODE_STATUS_DOWN);
            if still_down {
                inner.state.delete_node(node_id).await?;
                inner.heartbeats.clear(node_id);
            }
        }
        tracing::debug!(
            jobs = gc.jobs.len(),
            evals = gc.evals.len(),
            allocs = gc.allocs.len(),
            deployments = gc.deployments.len(),
            nodes = gc.nodes.len(),
            "forced garbage collection"
        );
        Ok(gc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use drover_state::StateStore;
    use drover_structs::{RescheduleEvent, ReschedulePolicy, RescheduleTracker, TaskGroup};

    const SECOND: i64 = 1_000_000_000;

    fn failed_alloc(policy: Option<ReschedulePolicy>) -> (Allocation, Job) {
        let job = Job {
            id: "web".into(),
            status: "running".into(),
            task_groups: vec![TaskGroup {
                name: "g".into(),
                reschedule_policy: policy,
                ..TaskGroup::default()
            }],
            ..Job::default()
        };
        let alloc = Allocation {
            id: "a".into(),
            task_group: "g".into(),
            client_status: ALLOC_CLIENT_STATUS_FAILED.into(),
            desired_status: "run".into(),
            job: Some(Arc::new(job.clone())),
            ..Allocation::default()
        };
        (alloc, job)
    }

    #[test]
    fn a_failed_alloc_the_policy_may_still_replace_is_kept() {
        let limited = ReschedulePolicy {
            attempts: 2,
            interval: drover_structs::DurationNs::from_secs(3600),
            ..ReschedulePolicy::default()
        };
        let (mut alloc, job) = failed_alloc(Some(limited.clone()));
        assert!(!alloc_collectable(&alloc, Some(&job), 0), "no attempt yet");
        alloc.reschedule_tracker = Some(RescheduleTracker {
            events: vec![RescheduleEvent {
                reschedule_time: 100 * SECOND,
                ..RescheduleEvent::default()
            }],
            ..RescheduleTracker::default()
        });
        assert!(
            !alloc_collectable(&alloc, Some(&job), 200 * SECOND),
            "inside the interval"
        );
        assert!(
            alloc_collectable(&alloc, Some(&job), 4000 * SECOND),
            "interval passed"
        );
        alloc.next_allocation = "b".into();
        assert!(
            alloc_collectable(&alloc, Some(&job), 200 * SECOND),
            "replaced"
        );

        let unlimited = ReschedulePolicy {
            unlimited: true,
            ..ReschedulePolicy::default()
        };
        let (alloc, job) = failed_alloc(Some(unlimited));
        assert!(!alloc_collectable(&alloc, Some(&job), 0));
        let (alloc, job) = failed_alloc(None);
        assert!(alloc_collectable(&alloc, Some(&job), 0), "no policy");
        assert!(alloc_collectable(&alloc, None, 0), "job gone");
    }

    #[test]
    fn running_allocs_are_never_collected() {
        let (mut alloc, job) = failed_alloc(None);
        alloc.client_status = ALLOC_CLIENT_STATUS_RUNNING.into();
        alloc.desired_status = ALLOC_DESIRED_STATUS_STOP.into();
        assert!(!alloc_collectable(&alloc, Some(&job), 0));
    }

    #[test]
    fn a_stopped_periodic_job_is_collectable_and_a_running_service_is_not() {
        let mut job = Job {
            r#type: "service".into(),
            status: JOB_STATUS_DEAD.into(),
            ..Job::default()
        };
        assert!(!job_collectable(&job), "a dead service job not stopped");
        job.stop = true;
        assert!(job_collectable(&job));
        job.r#type = JOB_TYPE_BATCH.into();
        job.stop = false;
        assert!(job_collectable(&job), "a finished batch job");
        job.status = "running".into();
        assert!(!job_collectable(&job));
    }

    #[tokio::test]
    async fn an_empty_store_plans_nothing() {
        let store = StateStore::in_memory().await.expect("store");
        assert_eq!(plan(&store.snapshot(), 0), GcPlan::default());
    }
}
