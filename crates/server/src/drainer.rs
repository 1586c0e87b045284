//! The node drainer (leader work, started with the broker and the periodic dispatcher): moves
//! allocations off draining nodes as Nomad's drainer does, and marks each drain complete.
//!
//! On every change of the allocation or node tables (and at the earliest force deadline), one
//! pass over the stored state:
//! - a node whose drain is forced (`Deadline < 0`) or whose `ForceDeadline` has passed: every
//!   allocation still running there is marked for migration (system jobs' too, unless
//!   `IgnoreSystemJobs`);
//! - otherwise, per group of each service job with allocations on a draining node: as many as
//!   `migrate { max_parallel }` allows — the group's allocations with health reported (the
//!   client reports it under the group's `migrate` block) minus `count - max_parallel` — are
//!   marked; an allocation already marked counts as leaving, not as healthy. Batch
//!   allocations are left to finish until the deadline;
//! - a node where nothing but system allocations still runs: those (unless ignored) are
//!   marked, then the drain is complete — `DrainStrategy` cleared, `LastDrain.Status`
//!   `complete`, the node left ineligible.
//!
//! Marking is `DesiredTransition.Migrate`, committed through the plan applier with one
//! `node-drain` evaluation per job; the scheduler stops each marked allocation ("alloc is being
//! migrated") and places its replacement on another node. The strategy lives in the state
//! store, so a restarted server carries a drain on where it was.
//!
//! Not here: the drain request itself (`nodes`), placement (the scheduler).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use drover_state::{StateSnapshot, Table};
use drover_structs::{
    Allocation, EVAL_TRIGGER_NODE_DRAIN, JOB_TYPE_BATCH, JOB_TYPE_SYSTEM, Job, TaskGroup,
};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::plan_apply::{Commit, PlanRequest};
use crate::{ServerError, ServerInner};

/// How long the drainer waits for a change when no deadline is near.
const IDLE_WAIT: Duration = Duration::from_secs(60);

/// A wake-up for the drainer loop (a drain was set or a node removed).
#[derive(Debug, Default)]
pub(crate) struct Drainer {
    changed: Notify,
}

impl ServerInner {
    pub(crate) fn drainer_wake(&self) {
        self.drainer.changed.notify_one();
    }
}

/// What one pass decided.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct DrainDecision {
    /// Allocations to mark for migration, by job (namespace, ID).
    pub migrate: BTreeMap<(String, String), Vec<String>>,
    /// Nodes whose drain is complete (after `migrate` is committed).
    pub complete: Vec<String>,
    /// The earliest force deadline still ahead (Unix ns).
    pub next_deadline: Option<i64>,
}

fn is_system(alloc: &Allocation) -> bool {
    alloc.job_type() == JOB_TYPE_SYSTEM
}

/// Decides one pass over `snapshot` at `now_unix_ns` (pure: no writes, no clock).
pub(crate) fn decide(snapshot: &StateSnapshot, now_unix_ns: i64) -> DrainDecision {
    let mut decision = DrainDecision::default();
    let mut marked: BTreeSet<String> = BTreeSet::new();
    let mut mark = |decision: &mut DrainDecision, alloc: &Allocation| {
        if marked.insert(alloc.id.clone()) {
            decision
                .migrate
                .entry((alloc.namespace.clone(), alloc.job_id.clone()))
                .or_default()
                .push(alloc.id.clone());
        }
    };
    let draining: BTreeMap<String, _> = snapshot
        .nodes("")
        .into_iter()
        .filter_map(|node| {
            let strategy = node.drain_strategy.clone()?;
            Some((node.id.clone(), strategy))
        })
        .collect();
    let mut jobs: BTreeSet<(String, String)> = BTreeSet::new();
    for (node_id, strategy) in &draining {
        let allocs = snapshot.allocs_by_node(node_id);
        let live: Vec<&Arc<Allocation>> = allocs
            .iter()
            .filter(|alloc| !alloc.terminal_status())
            .collect();
        let keep = |alloc: &Allocation| {
            alloc.desired_transition.should_migrate()
                || (is_system(alloc) && strategy.ignore_system_jobs)
        };
        if strategy.forced_at(now_unix_ns) {
            for alloc in &live {
                if !keep(alloc) {
                    mark(&mut decision, alloc);
                }
            }
        } else if strategy.deadline.as_nanos() > 0
            && let Some(deadline) = strategy.force_deadline.unix_nanos()
        {
            decision.next_deadline = Some(
                decision
                    .next_deadline
                    .map_or(deadline, |next| next.min(deadline)),
            );
        }
        if live.iter().all(|alloc| is_system(alloc)) {
            // Everything else is gone: system jobs go last, then the drain is done.
            for alloc in &live {
                if !keep(alloc) {
                    mark(&mut decision, alloc);
                }
            }
            decision.complete.push(node_id.clone());
        } else {
            for alloc in live.iter().filter(|alloc| !is_system(alloc)) {
                jobs.insert((alloc.namespace.clone(), alloc.job_id.clone()));
            }
        }
    }
    for (namespace, job_id) in jobs {
        let Some(job) = snapshot.job(&namespace, &job_id) else {
            continue;
        };
        if job.r#type == JOB_TYPE_BATCH {
            continue;
        }
        let allocs = snapshot.allocs_by_job(&namespace, &job_id);
        for group in &job.task_groups {
            for alloc in drainable_in_group(&job, group, &allocs, &draining) {
                mark(&mut decision, alloc);
            }
        }
    }
    decision
}

/// Nomad's `handleTaskGroup`: the group's allocations on draining nodes that may be marked now.
fn drainable_in_group<'a, S>(
    job: &Job,
    group: &TaskGroup,
    allocs: &'a [Arc<Allocation>],
    draining: &BTreeMap<String, S>,
) -> Vec<&'a Allocation> {
    let Some(migrate) = &group.migrate else {
        return Vec::new();
    };
    let _ = job;
    let mut healthy: i64 = 0;
    let mut drainable = Vec::new();
    for alloc in allocs.iter().filter(|alloc| alloc.task_group == group.name) {
        if alloc.terminal_status() {
            continue;
        }
        let marked = alloc.desired_transition.should_migrate();
        let has_health = alloc
            .deployment_status
            .as_ref()
            .is_some_and(|status| status.healthy.is_some());
        if has_health && !marked {
            healthy += 1;
        }
        if draining.contains_key(&alloc.node_id) && !marked {
            drainable.push(alloc.as_ref());
        }
    }
    let threshold = group.count - migrate.max_parallel;
    let allowed = usize::try_from(healthy - threshold).unwrap_or(0);
    drainable.truncate(allowed);
    drainable
}

/// Runs the drainer until shutdown.
pub(crate) async fn run(inner: Arc<ServerInner>, shutdown: CancellationToken) {
    let mut seen = 0;
    loop {
        let woken = inner.drainer.changed.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        let snapshot = inner.state.snapshot();
        let index = snapshot
            .table_index(Table::Allocs)
            .max(snapshot.table_index(Table::Nodes));
        let now = inner.clock.now_unix_ns();
        let decision = decide(&snapshot, now);
        drop(snapshot);
        let next_deadline = decision.next_deadline;
        if let Err(error) = inner.apply_drain(decision).await {
            tracing::error!(%error, "node drainer pass failed");
        }
        seen = seen.max(index);
        let wait = next_deadline.map_or(IDLE_WAIT, |deadline| {
            Duration::from_nanos(u64::try_from(deadline.saturating_sub(now)).unwrap_or(0))
                .min(IDLE_WAIT)
                // The clock may lag tokio time by a rounding: never wake just before.
                .saturating_add(Duration::from_millis(1))
        });
        let until = tokio::time::Instant::now() + wait;
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = &mut woken => {}
            outcome = inner.state.wait_for_change(&[Table::Allocs, Table::Nodes], seen, until) => {
                seen = seen.max(outcome.index);
            }
        }
    }
}

impl ServerInner {
    /// Commits a pass: marks the allocations with one evaluation per job, then completes the
    /// finished drains.
    async fn apply_drain(&self, decision: DrainDecision) -> Result<(), ServerError> {
        if !decision.migrate.is_empty() {
            let mut alloc_ids = Vec::new();
            let mut evals = Vec::new();
            for ((namespace, job_id), ids) in decision.migrate {
                let job = self.state.job(&namespace, &job_id).map_or_else(
                    || {
                        // A job purged under its allocations: the eval still stops them.
                        let alloc = ids.first().and_then(|id| self.state.alloc(id));
                        alloc
                            .and_then(|alloc| alloc.job.as_deref().cloned())
                            .unwrap_or_default()
                    },
                    |job| Job::clone(&job),
                );
                tracing::info!(job_id, count = ids.len(), "draining allocations");
                let mut eval = self.new_eval(&job, EVAL_TRIGGER_NODE_DRAIN, job.job_modify_index);
                eval.namespace.clone_from(&namespace);
                eval.job_id.clone_from(&job_id);
                evals.push(eval);
                alloc_ids.extend(ids);
            }
            let eval_ids: Vec<String> = evals.iter().map(|eval| eval.id.clone()).collect();
            let (reply, response) = tokio::sync::oneshot::channel();
            self.plans
                .send(PlanRequest {
                    commit: Commit::MigrateAllocs { alloc_ids, evals },
                    reply,
                })
                .await
                .map_err(|_| ServerError::Internal("the plan applier has stopped".into()))?;
            response.await.map_err(|_| {
                ServerError::Internal("the plan applier dropped the request".into())
            })??;
            for id in eval_ids {
                if let Some(stored) = self.state.eval(&id) {
                    self.enqueue_when_due((*stored).clone());
                }
            }
        }
        for node_id in decision.complete {
            let index = self.complete_drain(&node_id).await?;
            tracing::info!(node_id, index, "node completed draining");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used, clippy::unwrap_used)]

    use drover_scheduler::testing::{JobBuilder, NodeBuilder};
    use drover_state::StateStore;
    use drover_structs::{
        AllocDeploymentStatus, DrainStrategy, DurationNs, MigrateStrategy, Node, Timestamp,
    };

    use super::*;

    const NOW: i64 = 1_000_000_000_000;

    fn draining(node_id: &str, strategy: DrainStrategy) -> Node {
        let mut node = NodeBuilder::new(node_id).ineligible().build();
        node.drain_strategy = Some(strategy);
        node
    }

    fn with_deadline(seconds: i64) -> DrainStrategy {
        DrainStrategy {
            deadline: DurationNs::from_secs(seconds),
            force_deadline: Timestamp::from_unix_nanos(NOW + seconds * 1_000_000_000),
            ..DrainStrategy::default()
        }
    }

    fn job(id: &str, kind: &str, count: i64, max_parallel: i64) -> Job {
        let mut job = JobBuilder::service(id)
            .group("app", count)
            .task("t", "raw_exec")
            .build();
        job.r#type = kind.to_owned();
        job.task_groups[0].migrate = (kind == "service").then_some(MigrateStrategy {
            max_parallel,
            ..MigrateStrategy::default()
        });
        job
    }

    fn alloc(id: &str, job: &Job, node_id: &str, healthy: Option<bool>) -> Allocation {
        Allocation {
            id: id.to_owned(),
            namespace: "default".to_owned(),
            job_id: job.id.clone(),
            task_group: "app".to_owned(),
            node_id: node_id.to_owned(),
            desired_status: "run".to_owned(),
            client_status: "running".to_owned(),
            job: Some(Arc::new(job.clone())),
            deployment_status: healthy.map(|healthy| AllocDeploymentStatus {
                healthy: Some(healthy),
                ..AllocDeploymentStatus::default()
            }),
            ..Allocation::default()
        }
    }

    async fn store(nodes: Vec<Node>, jobs: Vec<Job>, allocs: Vec<Allocation>) -> StateStore {
        let state = StateStore::in_memory().await.expect("store");
        for node in nodes {
            state.upsert_node(node, NOW).await.expect("node");
        }
        for job in jobs {
            state.upsert_job(job, NOW).await.expect("job");
        }
        state.upsert_allocs(allocs, NOW).await.expect("allocs");
        state
    }

    fn marked(decision: &DrainDecision) -> Vec<String> {
        let mut ids: Vec<String> = decision.migrate.values().flatten().cloned().collect();
        ids.sort();
        ids
    }

    #[tokio::test]
    async fn a_group_leaves_max_parallel_at_a_time_counting_reported_health() {
        let web = job("web", "service", 3, 1);
        let state = store(
            vec![
                draining("a", with_deadline(60)),
                NodeBuilder::new("b").build(),
            ],
            vec![web.clone()],
            vec![
                alloc("a1", &web, "a", Some(true)),
                alloc("a2", &web, "a", Some(true)),
                alloc("a3", &web, "a", Some(true)),
            ],
        )
        .await;
        let decision = decide(&state.snapshot(), NOW);
        assert_eq!(marked(&decision), ["a1"]);
        assert!(decision.complete.is_empty());
        assert_eq!(decision.next_deadline, Some(NOW + 60_000_000_000));

        // a1 marked, its replacement placed but not yet healthy: nothing more leaves.
        let mut a1 = alloc("a1", &web, "a", Some(true));
        a1.desired_transition.migrate = Some(true);
        state
            .upsert_allocs(vec![a1, alloc("b1", &web, "b", None)], NOW)
            .await
            .unwrap();
        assert!(decide(&state.snapshot(), NOW).migrate.is_empty());

        // The replacement reports health: the next one goes.
        state
            .upsert_allocs(vec![alloc("b1", &web, "b", Some(true))], NOW)
            .await
            .unwrap();
        assert_eq!(marked(&decide(&state.snapshot(), NOW)), ["a2"]);
    }

    #[tokio::test]
    async fn batch_waits_for_the_deadline_and_system_goes_last() {
        let batch = job("nightly", "batch", 1, 0);
        let system = job("agent", "system", 1, 0);
        let state = store(
            vec![draining("a", with_deadline(60))],
            vec![batch.clone(), system.clone()],
            vec![
                alloc("b1", &batch, "a", None),
                alloc("s1", &system, "a", None),
            ],
        )
        .await;
        // Before the deadline: the batch allocation runs on, the system one waits for it.
        let decision = decide(&state.snapshot(), NOW);
        assert!(decision.migrate.is_empty());
        assert!(decision.complete.is_empty());
        // At the deadline everything is forced.
        let decision = decide(&state.snapshot(), NOW + 60_000_000_000);
        assert_eq!(marked(&decision), ["b1", "s1"]);

        // Once the batch allocation is gone, the system one is marked and the drain is done.
        let mut done = alloc("b1", &batch, "a", None);
        done.desired_status = "stop".to_owned();
        state.upsert_allocs(vec![done], NOW).await.unwrap();
        let decision = decide(&state.snapshot(), NOW);
        assert_eq!(marked(&decision), ["s1"]);
        assert_eq!(decision.complete, ["a"]);
    }

    #[tokio::test]
    async fn ignored_system_jobs_stay_and_a_forced_drain_takes_the_rest_now() {
        let web = job("web", "service", 2, 1);
        let system = job("agent", "system", 1, 0);
        let strategy = DrainStrategy {
            deadline: DurationNs::from_secs(-1),
            ignore_system_jobs: true,
            ..DrainStrategy::default()
        };
        let state = store(
            vec![draining("a", strategy)],
            vec![web.clone(), system.clone()],
            vec![
                alloc("w1", &web, "a", None),
                alloc("w2", &web, "a", None),
                alloc("s1", &system, "a", None),
            ],
        )
        .await;
        let decision = decide(&state.snapshot(), NOW);
        assert_eq!(marked(&decision), ["w1", "w2"]);
        assert!(decision.complete.is_empty());
        assert_eq!(decision.next_deadline, None);
    }

    #[tokio::test]
    async fn an_empty_node_completes_at_once() {
        let state = store(
            vec![draining("a", DrainStrategy::default())],
            vec![],
            vec![],
        )
        .await;
        let decision = decide(&state.snapshot(), NOW);
        assert_eq!(decision.complete, ["a"]);
        assert!(decision.migrate.is_empty());
    }

    #[tokio::test]
    async fn a_restarted_server_carries_a_stored_drain_to_completion() {
        // The drain is in the store before the server starts, as after a restart.
        let state = store(vec![draining("a", with_deadline(60))], vec![], vec![]).await;
        let server = crate::Server::start(
            crate::ServerConfig::default(),
            state.clone(),
            Arc::new(crate::SystemClock),
        );
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let node = state.node("a").expect("node");
            if node.drain_strategy.is_none() {
                let last = node.last_drain.clone().expect("last drain");
                assert_eq!(last.status, drover_structs::DRAIN_STATUS_COMPLETE);
                assert_eq!(node.scheduling_eligibility, "ineligible");
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the drain never completed"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        server.shutdown().await;
    }
}
