//! The scheduler for system and sysbatch jobs: one allocation of each task group on every ready,
//! feasible node of the job's datacenters and pool (Nomad's system scheduler with its node
//! reconciler).
//!
//! Per node, each live allocation is stopped (its group is gone, or the node left the job's
//! datacenters), stopped as tainted (`DesiredTransition.Migrate`), marked lost (node down or
//! gone), left alone (a draining node, or a not-ready node at the same job version), or updated
//! (in place or destructively, on the same node) when the job changed. A group missing on a
//! ready node is placed there. A node that does not satisfy the job's constraints or drivers is
//! simply skipped (an allocation a changed job replaces there is stopped, as in Nomad) — that
//! is not a failure, unless no node at all runs the group, in which case the filtering is
//! reported in `FailedTGAllocs` so users can see why. A node that fits the constraints but
//! lacks CPU, memory or ports is a failure and yields a blocked evaluation (an allocation being
//! replaced there keeps running, where Nomad would have stopped it).
//! Sysbatch allocations that finished are not run again on their node unless the job changes;
//! system allocations that finished or failed are replaced on the next evaluation.
//!
//! Disconnected clients, as Nomad 1.8+'s node reconciler: a running allocation on a
//! `disconnected` node turns `unknown` ("alloc is unknown since its node is disconnected") and
//! is left alone while it stays so; once `unknown` for its group's `lost_after` (or
//! `max_client_disconnect`) it is lost. When its client is back and reports it, the allocation
//! is recorded as reconnected (its `AllocStates` gain the reported status). A system job has one
//! allocation per node and so no replacement elsewhere: `disconnect { replace, reconcile }` have
//! nothing to choose between, and the original always stays. The server times the
//! disconnected node and marks it down once every such allocation expired.
//!
//! A destructive update of a job whose job-level `update` block sets `max_parallel` and
//! `stagger` rolls: one evaluation replaces at most `max_parallel` allocations (in-place updates
//! are not limited), and when some are left it asks for a `rolling-update` evaluation whose
//! `Wait` is the stagger, which does the next wave — Nomad's system scheduler up to 1.10
//! (`evictAndPlace` with a limit, `NextRollingEval`). `job plan` counts every destructive update,
//! as Nomad's annotations are made before the limit applies.
//!
//! Not here: deployments and canaries for system jobs (Nomad 1.11 rolls system jobs through
//! deployments gated on health; drover follows the earlier, stagger-paced behaviour).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use drover_structs::{
    ALLOC_CLIENT_STATUS_LOST, ALLOC_CLIENT_STATUS_RUNNING, ALLOC_CLIENT_STATUS_UNKNOWN,
    AllocMetric, Allocation, DurationNs, Evaluation, Node, TaskGroup,
};

use crate::generic::Pass;
use crate::ids::IdSource;
use crate::names::alloc_name;
use crate::plan::{DesiredUpdates, PlanAnnotations};
use crate::reconcile::{
    STATUS_ALLOC_LOST, STATUS_ALLOC_NOT_NEEDED, STATUS_ALLOC_UNKNOWN, STATUS_ALLOC_UPDATING,
    UpdateDecision,
};
use crate::reschedule::ran_successfully;
use crate::select::{SelectOptions, exhaust_resources};
use crate::state::{node_in_any_datacenter, node_in_pool};

/// `DesiredDescription` of a system allocation moved off a node being drained.
pub const STATUS_ALLOC_NODE_TAINTED: &str = "alloc not needed as node is tainted";

/// A group that should run on a node, and the allocation it replaces there, if any.
struct NodePlacement {
    node: Arc<Node>,
    group_name: String,
    name: String,
    previous: Option<Arc<Allocation>>,
    /// Stop `previous` when the placement succeeds (a destructive update).
    stop_previous: bool,
}

impl Pass<'_> {
    pub(crate) fn run_system(&mut self, sysbatch: bool, ids: &mut dyn IdSource) {
        let existing = self
            .state
            .allocs_by_job(&self.eval.namespace, &self.eval.job_id);
        let tainted = self.tainted_nodes(&existing);
        self.mark_lost_stops(&existing, &tainted);
        let now = self.options.now_unix_nanos;

        let job = self.job.clone();
        let mut desired: BTreeMap<String, DesiredUpdates> = BTreeMap::new();
        let live: Vec<&Arc<Allocation>> = existing
            .iter()
            .filter(|alloc| !alloc.terminal_status())
            .collect();

        let Some(job) = job.as_deref().filter(|job| !job.stop) else {
            // Stopped or purged: everything goes.
            for alloc in sorted(live) {
                desired.entry(alloc.task_group.clone()).or_default().stop += 1;
                let stopped = self.stopped_copy(alloc, STATUS_ALLOC_NOT_NEEDED, None, "");
                self.plan.append_stop(stopped);
            }
            if let Some(job) = self.job.as_deref() {
                for group in &job.task_groups {
                    desired.entry(group.name.clone()).or_default();
                    self.plan.queued_allocations.insert(group.name.clone(), 0);
                }
            }
            self.plan.annotations = PlanAnnotations {
                desired_tg_updates: desired,
                preempted_allocs: None,
            };
            return;
        };

        let required: BTreeMap<String, &TaskGroup> = job
            .task_groups
            .iter()
            .map(|group| (alloc_name(&job.id, &group.name, 0), group))
            .collect();
        for group in &job.task_groups {
            desired.entry(group.name.clone()).or_default();
            self.plan.queued_allocations.insert(group.name.clone(), 0);
        }

        let ready: BTreeMap<String, Arc<Node>> = self
            .state
            .ready_nodes(&job.datacenters, &job.node_pool)
            .into_iter()
            .map(|node| (node.id.clone(), node))
            .collect();
        let not_ready: BTreeSet<String> = self
            .state
            .nodes()
            .into_iter()
            .filter(|node| {
                !node.ready_for_scheduling()
                    && node_in_any_datacenter(node, &job.datacenters)
                    && node_in_pool(node, &job.node_pool)
            })
            .map(|node| node.id.clone())
            .collect();

        let mut live_by_node: BTreeMap<String, Vec<&Arc<Allocation>>> = BTreeMap::new();
        for alloc in &live {
            live_by_node
                .entry(alloc.node_id.clone())
                .or_default()
                .push(alloc);
        }
        for node_id in ready.keys() {
            live_by_node.entry(node_id.clone()).or_default();
        }
        // The latest finished allocation per (node, name).
        let mut terminal: BTreeMap<(String, String), &Arc<Allocation>> = BTreeMap::new();
        for alloc in existing.iter().filter(|alloc| alloc.terminal_status()) {
            let key = (alloc.node_id.clone(), alloc.name.clone());
            let newer = terminal.get(&key).is_none_or(|current| {
                (alloc.create_index, alloc.create_time)
                    > (current.create_index, current.create_time)
            });
            if newer {
                terminal.insert(key, alloc);
            }
        }

        let mut placements: Vec<NodePlacement> = Vec::new();
        let mut updates: Vec<(Arc<Allocation>, Arc<Node>)> = Vec::new();
        let mut groups_with_allocs: BTreeSet<String> = BTreeSet::new();

        for (node_id, allocs) in &live_by_node {
            let mut present: BTreeSet<&str> = BTreeSet::new();
            let node_tainted = tainted.get(node_id);
            for alloc in sorted(allocs.clone()) {
                present.insert(alloc.name.as_str());
                let group_entry = desired.entry(alloc.task_group.clone()).or_default();
                let Some(group) = required.get(&alloc.name) else {
                    group_entry.stop += 1;
                    let stopped = self.stopped_copy(alloc, STATUS_ALLOC_NOT_NEEDED, None, "");
                    self.plan.append_stop(stopped);
                    continue;
                };
                // Only `unknown` and `running` allocations go through the reconnect process.
                let reconnect = (alloc.client_status == ALLOC_CLIENT_STATUS_UNKNOWN
                    || alloc.client_status == ALLOC_CLIENT_STATUS_RUNNING)
                    && alloc.needs_to_reconnect();
                let expired = reconnect && alloc.disconnect_expired(now);
                if alloc.desired_transition.should_migrate() {
                    group_entry.migrate += 1;
                    let stopped = self.stopped_copy(alloc, STATUS_ALLOC_NODE_TAINTED, None, "");
                    self.plan.append_stop(stopped);
                    continue;
                }
                if expired {
                    // `unknown` for the group's whole `lost_after`: lost, and not counted in
                    // the desired updates (Nomad leaves lost allocations out of them).
                    let stopped = self.stopped_copy(
                        alloc,
                        STATUS_ALLOC_LOST,
                        Some(ALLOC_CLIENT_STATUS_LOST),
                        "",
                    );
                    self.plan.append_stop(stopped);
                    continue;
                }
                if alloc.client_status == ALLOC_CLIENT_STATUS_UNKNOWN
                    && alloc.desired_status == drover_structs::ALLOC_DESIRED_STATUS_RUN
                {
                    // Waits for its client to come back (or for `lost_after` to pass).
                    group_entry.ignore += 1;
                    groups_with_allocs.insert(group.name.clone());
                    continue;
                }
                if node_tainted.is_none() && reconnect {
                    // Its client is back and reports it: record it known again, so later
                    // evaluations no longer treat it as reconnecting.
                    group_entry.reconnect += 1;
                    groups_with_allocs.insert(group.name.clone());
                    let mut reconnected = Allocation::clone(alloc);
                    reconnected.append_client_status_state(&alloc.client_status, now);
                    reconnected.modify_time = now;
                    self.plan.append_alloc(reconnected);
                    continue;
                }
                if let Some(tainted_node) = node_tainted {
                    let status = tainted_node.as_ref().map(|node| node.status.as_str());
                    if sysbatch && ran_successfully(alloc) {
                        group_entry.ignore += 1;
                        groups_with_allocs.insert(group.name.clone());
                    } else if status == Some(drover_structs::NODE_STATUS_DISCONNECTED)
                        && alloc.client_status == ALLOC_CLIENT_STATUS_RUNNING
                    {
                        // Its node stopped heartbeating but may come back: `unknown` until
                        // it does or the node goes down. One allocation per node, so there is
                        // no replacement to place elsewhere.
                        group_entry.disconnect += 1;
                        groups_with_allocs.insert(group.name.clone());
                        let mut unknown = Allocation::clone(alloc);
                        unknown.client_status = ALLOC_CLIENT_STATUS_UNKNOWN.to_string();
                        unknown.append_client_status_state(ALLOC_CLIENT_STATUS_UNKNOWN, now);
                        unknown.client_description = STATUS_ALLOC_UNKNOWN.to_string();
                        unknown.modify_time = now;
                        self.plan.append_alloc(unknown);
                    } else if status.is_none() || status == Some(drover_structs::NODE_STATUS_DOWN) {
                        let stopped = self.stopped_copy(
                            alloc,
                            STATUS_ALLOC_LOST,
                            Some(ALLOC_CLIENT_STATUS_LOST),
                            "",
                        );
                        self.plan.append_stop(stopped);
                    } else {
                        // Draining, or disconnected before it ran.
                        group_entry.ignore += 1;
                        groups_with_allocs.insert(group.name.clone());
                    }
                    continue;
                }
                let changed = alloc
                    .job
                    .as_deref()
                    .is_none_or(|alloc_job| alloc_job.job_modify_index != job.job_modify_index);
                if not_ready.contains(node_id) {
                    if changed {
                        group_entry.stop += 1;
                        let stopped = self.stopped_copy(alloc, STATUS_ALLOC_NOT_NEEDED, None, "");
                        self.plan.append_stop(stopped);
                    } else {
                        group_entry.ignore += 1;
                        groups_with_allocs.insert(group.name.clone());
                    }
                    continue;
                }
                let Some(node) = ready.get(node_id) else {
                    group_entry.stop += 1;
                    let stopped = self.stopped_copy(alloc, STATUS_ALLOC_NOT_NEEDED, None, "");
                    self.plan.append_stop(stopped);
                    continue;
                };
                if changed {
                    updates.push((Arc::clone(alloc), node.clone()));
                } else {
                    group_entry.ignore += 1;
                    groups_with_allocs.insert(group.name.clone());
                }
            }

            for (name, group) in &required {
                if present.contains(name.as_str()) {
                    continue;
                }
                let finished = terminal.get(&(node_id.clone(), name.clone())).copied();
                if sysbatch && let Some(finished) = finished {
                    let changed = finished
                        .job
                        .as_deref()
                        .is_none_or(|alloc_job| alloc_job.job_modify_index != job.job_modify_index);
                    if changed {
                        if let Some(node) = ready.get(node_id) {
                            updates.push((Arc::clone(finished), node.clone()));
                        }
                    } else {
                        desired.entry(group.name.clone()).or_default().ignore += 1;
                        groups_with_allocs.insert(group.name.clone());
                    }
                    continue;
                }
                if tainted.contains_key(node_id) {
                    continue;
                }
                let Some(node) = ready.get(node_id) else {
                    continue;
                };
                placements.push(NodePlacement {
                    node: node.clone(),
                    group_name: group.name.clone(),
                    name: name.clone(),
                    previous: finished.cloned(),
                    stop_previous: false,
                });
            }
        }

        // Updates: in place when possible, else replaced on the same node. A rolling job
        // replaces at most `max_parallel` allocations per evaluation; the rest wait for the
        // rolling-update evaluation made below.
        let mut rolling_budget = rolling_limit(job);
        let mut deferred = false;
        for (alloc, node) in updates {
            let Some(group) = job.lookup_task_group(&alloc.task_group) else {
                continue;
            };
            match self.update_decision(&alloc, job, group) {
                UpdateDecision::Ignore => {
                    desired.entry(group.name.clone()).or_default().ignore += 1;
                    groups_with_allocs.insert(group.name.clone());
                }
                UpdateDecision::InPlace(updated) => {
                    desired
                        .entry(group.name.clone())
                        .or_default()
                        .in_place_update += 1;
                    groups_with_allocs.insert(group.name.clone());
                    self.plan.append_alloc(*updated);
                }
                UpdateDecision::Destructive => {
                    desired
                        .entry(group.name.clone())
                        .or_default()
                        .destructive_update += 1;
                    if let Some(budget) = rolling_budget.as_mut() {
                        if *budget == 0 {
                            // Keeps running its old version until a later wave.
                            deferred = true;
                            groups_with_allocs.insert(group.name.clone());
                            continue;
                        }
                        *budget -= 1;
                    }
                    let stop_previous = !alloc.terminal_status();
                    placements.push(NodePlacement {
                        node,
                        group_name: group.name.clone(),
                        name: alloc.name.clone(),
                        previous: Some(alloc),
                        stop_previous,
                    });
                }
            }
        }

        // Destructive replacements first, so the stopped allocations free their resources.
        placements.sort_by_key(|placement| !placement.stop_previous);
        let mut filtered: BTreeMap<String, AllocMetric> = BTreeMap::new();
        let mut exhausted = false;
        for placement in placements {
            let Some(group) = job.lookup_task_group(&placement.group_name) else {
                continue;
            };
            let previous = placement.previous.clone();
            if let (true, Some(previous)) = (placement.stop_previous, previous.as_ref()) {
                let stopped = self.stopped_copy(previous, STATUS_ALLOC_UPDATING, None, "");
                self.plan.append_stop(stopped);
            }
            let state = self.state;
            let plan = std::mem::take(&mut self.plan);
            let (choice, mut metric) = self.stack().select_on_node(
                state,
                &plan,
                job,
                group,
                placement.node.clone(),
                &SelectOptions {
                    alloc_name: placement.name.clone(),
                    ..SelectOptions::default()
                },
            );
            self.plan = plan;
            let Some(choice) = choice else {
                if metric.nodes_filtered > 0 {
                    // The node does not suit the group: skipped, not a failure. An allocation
                    // being replaced there stays stopped, as in Nomad: the new version may not
                    // run on the node, so the old one may not either.
                    merge_filtered(filtered.entry(group.name.clone()).or_default(), &metric);
                    continue;
                }
                // No room: the allocation being replaced keeps running.
                if let (true, Some(previous)) = (placement.stop_previous, previous.as_ref()) {
                    self.plan.pop_stop(&previous.node_id, &previous.id);
                }
                exhausted = true;
                if !placement.stop_previous {
                    // Nomad counts a placement that found no room among the desired ones
                    // (only a node that does not suit the group is taken back out).
                    desired.entry(group.name.clone()).or_default().place += 1;
                }
                *self
                    .plan
                    .queued_allocations
                    .entry(group.name.clone())
                    .or_insert(0) += 1;
                if let Some(failed) = self.plan.failed_tg_allocs.get_mut(&group.name) {
                    failed.coalesced_failures += 1;
                    exhaust_resources(failed, group);
                } else {
                    exhaust_resources(&mut metric, group);
                    self.plan
                        .failed_tg_allocs
                        .insert(group.name.clone(), metric);
                }
                continue;
            };
            if !placement.stop_previous {
                desired.entry(group.name.clone()).or_default().place += 1;
            }
            groups_with_allocs.insert(group.name.clone());
            let mut alloc = self.new_allocation(job, group, placement.name, &choice, metric, ids);
            if let Some(previous) = previous {
                alloc.previous_allocation = previous.id.clone();
            }
            self.plan.append_alloc(alloc);
        }

        // A group that runs nowhere because every node was filtered out says why.
        for (group_name, metric) in filtered {
            if !groups_with_allocs.contains(&group_name)
                && !self.plan.failed_tg_allocs.contains_key(&group_name)
            {
                self.plan.failed_tg_allocs.insert(group_name, metric);
            }
        }
        self.plan.annotations = PlanAnnotations {
            desired_tg_updates: desired,
            preempted_allocs: None,
        };
        if exhausted && self.eval.status != drover_structs::EVAL_STATUS_BLOCKED {
            self.plan.blocked_eval = Some(self.blocked_eval(ids));
        }
        if deferred && let Some(update) = job.update.as_ref() {
            let next = self.next_rolling_eval(update.stagger, ids);
            self.plan.follow_up_evals.push(next);
        }
    }

    /// The evaluation that carries a rolling update on after `stagger` (Nomad's
    /// `NextRollingEval`): pending, with `Wait` set, so the server enqueues it once the wait
    /// has passed.
    fn next_rolling_eval(&self, stagger: DurationNs, ids: &mut dyn IdSource) -> Evaluation {
        let now = self.options.now_unix_nanos;
        Evaluation {
            id: ids.next_id(),
            namespace: self.eval.namespace.clone(),
            priority: self.eval.priority,
            r#type: self.eval.r#type.clone(),
            triggered_by: drover_structs::EVAL_TRIGGER_ROLLING_UPDATE.to_string(),
            job_id: self.eval.job_id.clone(),
            job_modify_index: self.eval.job_modify_index,
            status: drover_structs::EVAL_STATUS_PENDING.to_string(),
            wait: stagger,
            previous_eval: self.eval.id.clone(),
            create_time: now,
            modify_time: now,
            ..Evaluation::default()
        }
    }
}

/// How many allocations one evaluation may replace destructively: the job-level
/// `update.max_parallel` when the job rolls (a positive `max_parallel` and `stagger`, Nomad's
/// `UpdateStrategy.Rolling`), otherwise no limit. Only the job-level block counts, as in Nomad's
/// system scheduler before system deployments (1.11).
fn rolling_limit(job: &drover_structs::Job) -> Option<u64> {
    let update = job.update.as_ref()?;
    if update.max_parallel > 0 && update.stagger.as_nanos() > 0 {
        u64::try_from(update.max_parallel).ok()
    } else {
        None
    }
}

/// Allocations by name, then ID.
fn sorted(mut allocs: Vec<&Arc<Allocation>>) -> Vec<&Arc<Allocation>> {
    allocs.sort_by(|a, b| a.name.cmp(&b.name).then_with(|| a.id.cmp(&b.id)));
    allocs
}

/// Adds one node's filtering to a group's running total (Nomad's `mergeNodeFiltered`).
fn merge_filtered(total: &mut AllocMetric, metric: &AllocMetric) {
    total.nodes_evaluated += metric.nodes_evaluated;
    total.nodes_filtered += metric.nodes_filtered;
    total.nodes_in_pool = metric.nodes_in_pool;
    total.nodes_available = metric.nodes_available.clone();
    for (class, count) in &metric.class_filtered {
        *total.class_filtered.entry(class.clone()).or_insert(0) += count;
    }
    for (constraint, count) in &metric.constraint_filtered {
        *total
            .constraint_filtered
            .entry(constraint.clone())
            .or_insert(0) += count;
    }
}
