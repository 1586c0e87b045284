//! The plan applier: the only writer of allocations (DESIGN invariant 3).
//!
//! Workers plan concurrently on snapshots that may be stale by the time their plan arrives, so
//! the applier re-checks every node the plan places work on against the *current* state, one
//! plan at a time: the node must still be ready for new placements, and everything that would
//! run there must fit its capacity. Nodes that fail the check are dropped from the plan (a
//! partial commit, as Nomad does) and the worker is told to refresh and plan again; the rest
//! commits in one atomic write.
//!
//! The applier also takes the allocation changes that do not come from a scheduler pass:
//! `alloc stop` marks an allocation for migration, and the deployment watcher's changes
//! (allocation health, reschedule marks) commit with their deployment. It is read and written in one step of the
//! applier, in the same write as the evaluation that acts on it, so a plan that commits just
//! before is built upon rather than overwritten.
//!
//! Not here: deciding placements (the scheduler) or evaluation bookkeeping (the worker).

use std::collections::{BTreeMap, HashSet};

use drover_scheduler::Plan;
use drover_scheduler::select::{
    Usage, alloc_reserved_cores, allocated_usage, node_capacity, node_reservable_cores,
    reserved_core_conflict,
};
use drover_state::{StateSnapshot, StateStore};
use drover_structs::{Allocation, Evaluation};
use tokio::sync::{mpsc, oneshot};

use crate::{Clock, ServerError};

/// What committing a plan achieved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanResult {
    /// The index the plan was committed at (the latest index when nothing was written).
    pub index: u64,
    /// Nodes whose placements were refused because the state moved under the plan.
    pub rejected_nodes: Vec<String>,
}

impl PlanResult {
    pub fn fully_committed(&self) -> bool {
        self.rejected_nodes.is_empty()
    }
}

/// What the applier is asked to commit.
pub(crate) enum Commit {
    /// A worker's plan (boxed, as the evaluation below: queued requests stay small).
    Plan(Box<Plan>),
    /// `alloc stop` and the drainer: mark the allocations for migration and store the
    /// evaluations that act on them, in one write. An allocation that no longer exists is
    /// `NotFound` when it is the only one (`alloc stop`), and skipped otherwise.
    MigrateAllocs {
        alloc_ids: Vec<String>,
        evals: Vec<Evaluation>,
    },
    /// A deployment watcher's or operator's change (allocation health, reschedule marks,
    /// promotion, status, a job rolled back), read and written in one write.
    Deployment(Box<drover_state::deployments::DeploymentChange>),
}

pub(crate) struct PlanRequest {
    pub commit: Commit,
    pub reply: oneshot::Sender<Result<PlanResult, ServerError>>,
}

/// Runs the applier loop until every sender is dropped.
pub(crate) async fn run(
    state: StateStore,
    clock: std::sync::Arc<dyn Clock>,
    mut requests: mpsc::Receiver<PlanRequest>,
) {
    while let Some(request) = requests.recv().await {
        let result = match request.commit {
            Commit::Plan(plan) => {
                let eval_id = plan.eval_id.clone();
                let applied = apply(&state, clock.as_ref(), *plan).await;
                if let Err(error) = &applied {
                    tracing::warn!(eval_id, %error, "plan not applied");
                }
                applied
            }
            Commit::MigrateAllocs { alloc_ids, evals } => {
                migrate_allocs(&state, clock.as_ref(), &alloc_ids, evals).await
            }
            Commit::Deployment(change) => state
                .update_deployment(*change, clock.now_unix_ns())
                .await
                .map(|index| PlanResult {
                    index,
                    rejected_nodes: Vec::new(),
                })
                .map_err(ServerError::from),
        };
        // The worker may have given up (shutdown); the commit stands either way.
        let _ = request.reply.send(result);
    }
}

/// Checks a plan against the current state and commits what still fits.
pub(crate) async fn apply(
    state: &StateStore,
    clock: &dyn Clock,
    plan: Plan,
) -> Result<PlanResult, ServerError> {
    let snapshot = state.snapshot();
    let mut rejected_nodes = Vec::new();
    let mut writes: Vec<Allocation> = Vec::new();

    // Stops always commit: stopping never overcommits a node.
    let stopping: HashSet<&str> = plan.stops().map(|alloc| alloc.id.as_str()).collect();
    writes.extend(plan.stops().cloned());

    for (node_id, allocs) in &plan.node_allocation {
        match node_accepts(&snapshot, node_id, allocs, &stopping) {
            Ok(()) => writes.extend(allocs.iter().cloned()),
            Err(reason) => {
                tracing::debug!(node_id, reason, eval_id = %plan.eval_id, "plan rejected on node");
                rejected_nodes.push(node_id.clone());
            }
        }
    }

    let index =
        if writes.is_empty() && plan.deployment.is_none() && plan.deployment_updates.is_empty() {
            state.latest_index()
        } else {
            let stopped = stopping.len();
            let placed = writes.len().saturating_sub(stopped);
            // The deployment, its status changes and the allocations commit in one write, so an
            // allocation is counted in its deployment as it is placed.
            let index = state
                .upsert_plan_results(
                    plan.deployment,
                    plan.deployment_updates,
                    writes,
                    Vec::new(),
                    clock.now_unix_ns(),
                )
                .await?;
            // Which server applied which plan, at which index: a cluster's tests check from
            // these lines that no two leaders ever applied plans at once.
            tracing::info!(
                index,
                eval_id = %plan.eval_id,
                job_id = plan.job.as_ref().map_or("", |job| job.id.as_str()),
                placed,
                stopped,
                "plan applied"
            );
            index
        };
    Ok(PlanResult {
        index,
        rejected_nodes,
    })
}

/// Marks the allocation, as it is now, for migration, and stores `eval` in the same write.
pub(crate) async fn migrate_allocs(
    state: &StateStore,
    clock: &dyn Clock,
    alloc_ids: &[String],
    evals: Vec<Evaluation>,
) -> Result<PlanResult, ServerError> {
    let mut marked = Vec::new();
    for alloc_id in alloc_ids {
        let Some(current) = state.alloc(alloc_id) else {
            if alloc_ids.len() == 1 {
                return Err(ServerError::NotFound("allocation not found".into()));
            }
            continue;
        };
        let mut alloc = Allocation::clone(&current);
        alloc.desired_transition.migrate = Some(true);
        marked.push(alloc);
    }
    let index = state
        .upsert_allocs_and_evals(marked, evals, clock.now_unix_ns())
        .await?;
    Ok(PlanResult {
        index,
        rejected_nodes: Vec::new(),
    })
}

/// Whether `node_id` can take `allocs` now. Allocations the plan stops, and earlier versions of
/// allocations it updates in place, no longer count against the node.
fn node_accepts(
    snapshot: &StateSnapshot,
    node_id: &str,
    allocs: &[Allocation],
    stopping: &HashSet<&str>,
) -> Result<(), &'static str> {
    let Some(node) = snapshot.node(node_id) else {
        return Err("node no longer exists");
    };
    let existing: BTreeMap<String, std::sync::Arc<Allocation>> = snapshot
        .allocs_by_node(node_id)
        .into_iter()
        .map(|alloc| (alloc.id.clone(), alloc))
        .collect();
    let places_new = allocs.iter().any(|alloc| !existing.contains_key(&alloc.id));
    if places_new && !node.ready_for_scheduling() {
        return Err("node is not ready for placements");
    }

    let updated: HashSet<&str> = allocs.iter().map(|alloc| alloc.id.as_str()).collect();
    let staying = existing.values().map(AsRef::as_ref).filter(|alloc| {
        !alloc.terminal_status()
            && !stopping.contains(alloc.id.as_str())
            && !updated.contains(alloc.id.as_str())
    });
    let live: Vec<&Allocation> = staying
        .chain(allocs.iter().filter(|alloc| !alloc.terminal_status()))
        .collect();

    let mut used = Usage::default();
    for alloc in &live {
        let usage = allocated_usage(alloc);
        used.cpu += usage.cpu;
        used.memory_mb += usage.memory_mb;
    }
    let capacity = node_capacity(&node);
    if used.cpu > capacity.cpu {
        return Err("cpu exhausted");
    }
    if used.memory_mb > capacity.memory_mb {
        return Err("memory exhausted");
    }

    // Reserved cores are exclusive: two plans made on the same snapshot may have picked the
    // same free core, and a core the node no longer offers cannot be handed out.
    if reserved_core_conflict(live.iter().copied()).is_some() {
        return Err("cores exhausted");
    }
    let reservable = node_reservable_cores(&node);
    let asks_unoffered_core = allocs
        .iter()
        .filter(|alloc| !alloc.terminal_status())
        .flat_map(alloc_reserved_cores)
        .any(|core| !reservable.contains(&core));
    if asks_unoffered_core {
        return Err("cores exhausted");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use drover_scheduler::testing::{JobBuilder, NodeBuilder, running_alloc};

    use super::*;
    use crate::SystemClock;

    fn holding_cores(mut alloc: Allocation, cores: &[u16]) -> Allocation {
        if let Some(resources) = alloc.allocated_resources.as_mut() {
            for task in resources.tasks.values_mut() {
                task.cpu.reserved_cores = Some(cores.to_vec());
            }
        }
        alloc
    }

    fn plan_placing(node_id: &str, alloc: Allocation) -> Plan {
        let mut plan = Plan {
            eval_id: "eval-1".to_string(),
            ..Plan::default()
        };
        plan.node_allocation
            .insert(node_id.to_string(), vec![alloc]);
        plan
    }

    #[tokio::test]
    async fn a_core_already_held_or_not_offered_is_refused_and_a_free_one_commits() {
        let state = StateStore::in_memory().await.expect("store");
        let node = NodeBuilder::new("node-1")
            .resources(4000, 8192)
            .cores(2, &[0, 1])
            .build();
        state.upsert_node(node.clone(), 1).await.expect("node");
        let job = JobBuilder::service("pinned")
            .group("app", 3)
            .task("server", "raw_exec")
            .resources(100, 64)
            .cores(1)
            .build();
        let holder = holding_cores(running_alloc("alloc-0", &job, "app", 0, &node), &[1]);
        state
            .upsert_allocs_and_evals(vec![holder], Vec::new(), 1)
            .await
            .expect("holder");

        for (alloc_id, core) in [("alloc-same", 1), ("alloc-absent", 5)] {
            let alloc = holding_cores(running_alloc(alloc_id, &job, "app", 1, &node), &[core]);
            let result = apply(&state, &SystemClock, plan_placing("node-1", alloc))
                .await
                .expect("apply");
            assert_eq!(
                result.rejected_nodes,
                vec!["node-1".to_string()],
                "core {core}"
            );
            assert!(state.snapshot().alloc(alloc_id).is_none(), "core {core}");
        }

        let free = holding_cores(running_alloc("alloc-free", &job, "app", 1, &node), &[0]);
        let result = apply(&state, &SystemClock, plan_placing("node-1", free))
            .await
            .expect("apply");
        assert!(result.fully_committed());
        assert!(state.snapshot().alloc("alloc-free").is_some());
    }

    /// A plan that stops an allocation commits between `alloc stop` reading the allocation and
    /// writing it. Both go through the applier, one after the other: the stop's write starts
    /// from what the plan committed (the allocation stays stopped) and carries its evaluation.
    #[tokio::test]
    async fn a_plan_committed_just_before_an_alloc_stop_is_not_overwritten() {
        let state = StateStore::in_memory().await.expect("store");
        let node = NodeBuilder::new("node-1").resources(4000, 8192).build();
        state.upsert_node(node.clone(), 1).await.expect("node");
        let job = JobBuilder::service("web")
            .group("app", 1)
            .task("server", "raw_exec")
            .resources(100, 64)
            .build();
        let running = running_alloc("alloc-0", &job, "app", 0, &node);
        state
            .upsert_allocs_and_evals(vec![running.clone()], Vec::new(), 1)
            .await
            .expect("running alloc");

        let mut stopped = running.clone();
        stopped.desired_status = drover_structs::ALLOC_DESIRED_STATUS_STOP.to_string();
        stopped.desired_description = "alloc not needed due to job update".to_string();
        let mut plan = Plan {
            eval_id: "eval-plan".to_string(),
            ..Plan::default()
        };
        plan.node_update.insert("node-1".to_string(), vec![stopped]);
        let stop_eval = Evaluation {
            id: "eval-stop".to_string(),
            namespace: "default".to_string(),
            job_id: "web".to_string(),
            r#type: "service".to_string(),
            triggered_by: "alloc-stop".to_string(),
            status: "pending".to_string(),
            ..Evaluation::default()
        };

        // Both are queued before the applier runs: the plan first, as in the race.
        let (requests, queue) = mpsc::channel(4);
        let (plan_reply, plan_done) = oneshot::channel();
        let (stop_reply, stop_done) = oneshot::channel();
        requests
            .send(PlanRequest {
                commit: Commit::Plan(Box::new(plan)),
                reply: plan_reply,
            })
            .await
            .expect("queue plan");
        requests
            .send(PlanRequest {
                commit: Commit::MigrateAllocs {
                    alloc_ids: vec!["alloc-0".to_string()],
                    evals: vec![stop_eval],
                },
                reply: stop_reply,
            })
            .await
            .expect("queue stop");
        drop(requests);
        run(state.clone(), std::sync::Arc::new(SystemClock), queue).await;
        plan_done.await.expect("plan reply").expect("plan");
        let stop = stop_done.await.expect("stop reply").expect("stop");

        let alloc = state.snapshot().alloc("alloc-0").expect("alloc");
        assert_eq!(
            alloc.desired_status, "stop",
            "the plan's stop was overwritten"
        );
        assert_eq!(
            alloc.desired_description,
            "alloc not needed due to job update"
        );
        assert_eq!(alloc.desired_transition.migrate, Some(true));
        let eval = state.eval("eval-stop").expect("the stop's eval is stored");
        assert_eq!(eval.modify_index, stop.index);
        assert_eq!(
            alloc.modify_index, stop.index,
            "alloc and eval in one write"
        );
    }

    #[tokio::test]
    async fn stopping_an_unknown_alloc_is_not_found_and_stores_nothing() {
        let state = StateStore::in_memory().await.expect("store");
        let eval = Evaluation {
            id: "eval-stop".to_string(),
            namespace: "default".to_string(),
            job_id: "web".to_string(),
            status: "pending".to_string(),
            ..Evaluation::default()
        };
        let outcome = migrate_allocs(&state, &SystemClock, &["nope".to_string()], vec![eval]).await;
        assert!(matches!(outcome, Err(ServerError::NotFound(_))));
        assert!(state.eval("eval-stop").is_none());
    }
}
