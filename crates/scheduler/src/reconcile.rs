//! The cluster reconciler for service and batch jobs: compares what the job wants (a count per
//! task group, at the current version) with the allocations that exist, and says what to stop,
//! what to place, and what to update in place or destructively. After Nomad's
//! `scheduler/reconciler`.
//!
//! Per group, allocations are sorted into buckets:
//! - **ignore**: finished and told to stop; nothing to do.
//! - **lost**: on a node that is down or gone, or disconnected when the group does not wait
//!   for it (no `disconnect { lost_after }` / `max_client_disconnect`), or `unknown` for longer
//!   than `lost_after` (**expiring**); stopped (client status `lost`) and replaced up to the
//!   count — unless the group has the client stop it (`stop_on_client_after`): then a
//!   `failed-follow-up` evaluation comes when the client surely has, and the group places
//!   nothing before it.
//! - **disconnecting**: on a disconnected node whose group waits for it: marked `unknown`
//!   ("alloc is unknown since its node is disconnected") with a `max-disconnect-timeout`
//!   follow-up evaluation at `lost_after`, and replaced by the reschedule policy unless the
//!   group says `replace = false`; an `unknown` one waits untainted.
//! - **reconnecting**: `unknown` in `AllocStates` and back on a ready node: kept or stopped
//!   against its replacements as `disconnect { reconcile }` chooses, a kept one recorded as
//!   running again.
//! - **migrate**: marked with `DesiredTransition.Migrate` (`alloc stop`, a drain); stopped and
//!   replaced.
//! - **untainted**: everything else. Failed ones are rescheduled now or later by the reschedule
//!   policy; batch allocations that completed successfully keep counting, so they are not run
//!   again; extras above the count are stopped, highest index first.
//!
//! Then missing indexes are placed (lowest free first) and untainted allocations of an older
//! job version are updated in place or destructively, as the caller's [`UpdateFn`] decides.
//!
//! **Deployments** (when the caller turns them on with [`ReconcileInput::deployments`]): a
//! group whose `update` has `max_parallel > 0` rolls a new job version out through a
//! deployment, as Nomad's reconciler does. The latest deployment of the job is cancelled when
//! the job stopped or a newer version was registered ("Cancelled because job is stopped",
//! "Cancelled due to newer version of job"); a new one is created when a group's spec changed
//! (or nothing of the version runs yet). Destructive updates are limited to `max_parallel`
//! minus the deployment's allocations whose health is not yet known (none while one is
//! unhealthy, none while the deployment is paused or failed); with `canary = N` N canaries are
//! placed first and no destructive update happens until the deployment is promoted, after
//! which the old allocation of each canary's name is stopped. When nothing is left to place
//! or update and every group is healthy (and promoted), the deployment is marked successful.
//! Without deployments every change is applied at once, as Nomad does for a group without an
//! `update` block.
//!
//! System and sysbatch jobs use the per-node reconciliation in `system`, which shares the stop
//! descriptions and the update decision defined here.
//!
//! Not here: choosing nodes, building allocations (`generic`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use drover_structs::{
    Allocation, Deployment, DeploymentState, DeploymentStatusUpdate, Evaluation, Job, Node,
    TaskGroup,
};

use crate::ids::IdSource;
use crate::names::{AllocNameIndex, alloc_index_from_name};
use crate::plan::DesiredUpdates;
use crate::reschedule::{
    BATCHED_FAILED_ALLOC_WINDOW_NANOS, RESCHEDULE_WINDOW_NANOS, last_reschedule_failed,
    next_reschedule_time, next_reschedule_time_at, ran_successfully,
};

/// `DesiredDescription` of an allocation the job no longer needs.
pub const STATUS_ALLOC_NOT_NEEDED: &str = "alloc not needed due to job update";
/// `DesiredDescription` of an allocation being migrated.
pub const STATUS_ALLOC_MIGRATING: &str = "alloc is being migrated";
/// `DesiredDescription` of an allocation replaced by a destructive update.
pub const STATUS_ALLOC_UPDATING: &str = "alloc is being updated due to job update";
/// `DesiredDescription` of an allocation on a lost node.
pub const STATUS_ALLOC_LOST: &str = "alloc is lost since its node is down";
/// `DesiredDescription` of an allocation updated in place (used while checking the fit).
pub const STATUS_ALLOC_IN_PLACE: &str = "alloc updating in-place";
/// `DesiredDescription` of a failed allocation that was replaced.
pub const STATUS_ALLOC_RESCHEDULED: &str = "alloc was rescheduled because it failed";
/// `StatusDescription` of an evaluation created to reschedule failed allocations later.
pub const DESC_RESCHEDULING_FOLLOWUP_EVAL: &str = "created for delayed rescheduling";
/// `ClientDescription` of an allocation whose node is disconnected.
pub const STATUS_ALLOC_UNKNOWN: &str = "alloc is unknown since its node is disconnected";
/// `DesiredDescription` of a replacement stopped because the original reconnected.
pub const STATUS_ALLOC_RECONNECTED: &str = "alloc not needed due to disconnected client reconnect";
/// `StatusDescription` of an evaluation that marks allocations lost once their node has been
/// disconnected for the group's `lost_after`.
pub const DESC_DISCONNECT_TIMEOUT_FOLLOWUP_EVAL: &str = "created for delayed disconnect timeout";

type AllocSet = BTreeMap<String, Arc<Allocation>>;

/// How an untainted allocation of an older job version is brought up to date.
#[derive(Debug, Clone)]
pub enum UpdateDecision {
    /// Nothing to do (same job version, or finished).
    Ignore,
    /// Stop it and place a replacement.
    Destructive,
    /// Replace it with this updated copy (same ID and node).
    InPlace(Box<Allocation>),
}

/// Decides, for an existing allocation and the job's group, how to update it.
pub type UpdateFn<'a> = dyn FnMut(&Allocation, &Job, &TaskGroup) -> UpdateDecision + 'a;

/// An allocation to stop.
#[derive(Debug, Clone)]
pub struct StopResult {
    pub alloc: Arc<Allocation>,
    /// A client status to set (`lost`), if any.
    pub client_status: Option<&'static str>,
    pub description: &'static str,
    pub followup_eval_id: String,
}

/// An allocation to place.
#[derive(Debug, Clone)]
pub struct PlaceResult {
    pub name: String,
    pub group: String,
    /// The allocation this one replaces, if any.
    pub previous: Option<Arc<Allocation>>,
    /// Replacing a failed allocation: carry its reschedule tracker, and if no node is found,
    /// note the failure on it instead of stopping it.
    pub reschedule: bool,
    /// Stop `previous` when this placement succeeds (a destructive update), with this reason.
    pub stop_previous: Option<&'static str>,
    /// A canary of the deployment.
    pub canary: bool,
}

/// What the reconciler decided for the whole job.
#[derive(Debug, Default)]
pub struct ReconcileResult {
    pub stop: Vec<StopResult>,
    pub place: Vec<PlaceResult>,
    /// Destructive updates: placed before `place`, stopping the old allocation on success.
    pub destructive: Vec<PlaceResult>,
    pub inplace: Vec<Allocation>,
    /// Copies of allocations with only bookkeeping changed (`FollowupEvalID`).
    pub attribute_updates: Vec<Allocation>,
    /// Allocations on a disconnected node, now `unknown` (with their `lost_after` follow-up
    /// evaluation, or the reschedule one when they are replaced later).
    pub disconnect_updates: Vec<Allocation>,
    /// Allocations whose node came back and which keep running (`AllocStates` says so).
    pub reconnect_updates: Vec<Allocation>,
    pub desired_tg_updates: BTreeMap<String, DesiredUpdates>,
    pub follow_up_evals: Vec<Evaluation>,
    pub name_indexes: BTreeMap<String, AllocNameIndex>,
    /// A deployment to create.
    pub deployment: Option<Deployment>,
    /// Status changes of existing deployments (cancelled, successful).
    pub deployment_updates: Vec<DeploymentStatusUpdate>,
    /// The deployment new placements belong to (created or existing, active), if any.
    pub deployment_id: Option<String>,
}

/// What the reconciler works from.
pub struct ReconcileInput<'a> {
    /// The job, or `None` once it was purged (everything stops).
    pub job: Option<&'a Job>,
    pub batch: bool,
    pub existing: &'a [Arc<Allocation>],
    /// Nodes allocations must move off: node ID → the node, or `None` when it no longer exists.
    pub tainted_nodes: &'a BTreeMap<String, Option<Arc<Node>>>,
    pub eval: &'a Evaluation,
    pub now_unix_nanos: i64,
    /// The job's latest deployment (highest `CreateIndex`), if any.
    pub deployment: Option<&'a Deployment>,
    /// Whether groups with an update strategy roll out through deployments.
    pub deployments: bool,
}

/// Reconciles the job's allocations.
pub fn reconcile(
    input: &ReconcileInput<'_>,
    update_fn: &mut UpdateFn<'_>,
    ids: &mut dyn IdSource,
) -> ReconcileResult {
    let mut reconciler = Reconciler {
        input,
        result: ReconcileResult::default(),
        deployment: None,
        old_deployment: None,
    };
    if input.deployments {
        reconciler.cancel_deployments();
    }
    let mut matrix: BTreeMap<String, AllocSet> = BTreeMap::new();
    if let Some(job) = input.job {
        for group in &job.task_groups {
            matrix.entry(group.name.clone()).or_default();
        }
    }
    for alloc in input.existing {
        matrix
            .entry(alloc.task_group.clone())
            .or_default()
            .insert(alloc.id.clone(), alloc.clone());
    }
    match input.job {
        Some(job) if !job.stop => {
            let mut complete = true;
            for (group_name, allocs) in matrix {
                complete &= reconciler.compute_group(job, &group_name, allocs, update_fn, ids);
            }
            reconciler.finish_deployment(complete);
        }
        _ => {
            for (group_name, allocs) in matrix {
                let non_terminal: AllocSet = allocs
                    .into_iter()
                    .filter(|(_, alloc)| !alloc.terminal_status())
                    .collect();
                let stopped = reconciler.stop_all(&non_terminal);
                reconciler.desired(&group_name).stop += stopped;
            }
        }
    }
    reconciler.result
}

struct Reconciler<'a> {
    input: &'a ReconcileInput<'a>,
    result: ReconcileResult,
    /// The deployment of the job's current version (existing and not cancelled, or created by
    /// this pass).
    deployment: Option<Deployment>,
    /// A deployment of an earlier version (or a finished one), whose unpromoted canaries stop.
    old_deployment: Option<&'a Deployment>,
}

/// The buckets an allocation can fall into.
#[derive(Default)]
struct Buckets {
    untainted: AllocSet,
    migrate: AllocSet,
    lost: AllocSet,
    /// On a disconnected node, to be marked `unknown`.
    disconnecting: AllocSet,
    /// `unknown` (or failed while so) and back on a ready node.
    reconnecting: AllocSet,
    ignore: AllocSet,
    /// `unknown` for longer than the group's `lost_after`: lost.
    expiring: AllocSet,
}

impl Reconciler<'_> {
    fn desired(&mut self, group_name: &str) -> &mut DesiredUpdates {
        self.result
            .desired_tg_updates
            .entry(group_name.to_string())
            .or_default()
    }

    fn mark_stop(
        &mut self,
        alloc: &Arc<Allocation>,
        client_status: Option<&'static str>,
        description: &'static str,
    ) {
        self.result.stop.push(StopResult {
            alloc: alloc.clone(),
            client_status,
            description,
            followup_eval_id: String::new(),
        });
    }

    /// Stops every allocation of a stopped job or of a removed group; returns how many were
    /// considered (Nomad counts them all as stopped).
    fn stop_all(&mut self, set: &AllocSet) -> u64 {
        let buckets = self.classify(set);
        let unknown = |alloc: &&Arc<Allocation>| {
            alloc.client_status == drover_structs::ALLOC_CLIENT_STATUS_UNKNOWN
        };
        let not_needed: Vec<Arc<Allocation>> = buckets
            .untainted
            .values()
            .chain(buckets.migrate.values())
            .chain(buckets.disconnecting.values())
            .chain(buckets.reconnecting.values())
            .chain(buckets.ignore.values().filter(unknown))
            .chain(buckets.expiring.values().filter(unknown))
            .cloned()
            .collect();
        for alloc in &not_needed {
            self.mark_stop(alloc, None, STATUS_ALLOC_NOT_NEEDED);
        }
        for alloc in buckets.lost.values() {
            self.mark_stop(
                alloc,
                Some(drover_structs::ALLOC_CLIENT_STATUS_LOST),
                STATUS_ALLOC_LOST,
            );
        }
        set.len() as u64
    }

    /// Sorts allocations into buckets by Nomad's classification rules, first match wins.
    fn classify(&self, set: &AllocSet) -> Buckets {
        use drover_structs::{
            ALLOC_CLIENT_STATUS_FAILED, ALLOC_CLIENT_STATUS_PENDING, ALLOC_CLIENT_STATUS_RUNNING,
            ALLOC_CLIENT_STATUS_UNKNOWN, ALLOC_DESIRED_STATUS_RUN, ALLOC_DESIRED_STATUS_STOP,
            NODE_STATUS_DISCONNECTED, NODE_STATUS_DOWN, NODE_STATUS_READY,
        };
        let now = self.input.now_unix_nanos;
        let mut buckets = Buckets::default();
        for (id, alloc) in set {
            let should_reconnect = matches!(
                alloc.client_status.as_str(),
                ALLOC_CLIENT_STATUS_UNKNOWN
                    | ALLOC_CLIENT_STATUS_RUNNING
                    | ALLOC_CLIENT_STATUS_FAILED
            ) && alloc.needs_to_reconnect();
            let tainted = self.input.tainted_nodes.get(&alloc.node_id);
            let node_is_tainted = tainted.is_some();
            let tainted_node = tainted.and_then(|node| node.as_deref());
            let node_status = tainted_node.map(|node| node.status.as_str());
            let disconnected = node_status == Some(NODE_STATUS_DISCONNECTED);
            let node_usable = !node_is_tainted || node_status == Some(NODE_STATUS_READY);
            let client = alloc.client_status.as_str();
            let bucket = if should_reconnect
                && alloc.desired_status == ALLOC_DESIRED_STATUS_RUN
                && client == ALLOC_CLIENT_STATUS_FAILED
            {
                &mut buckets.reconnecting
            } else if alloc.server_terminal_status()
                && !should_reconnect
                && alloc.desired_transition.migrate_disable_placement == Some(true)
            {
                &mut buckets.untainted
            } else if alloc.server_terminal_status() && !should_reconnect {
                &mut buckets.ignore
            } else if alloc.terminal_status()
                && !should_reconnect
                && alloc
                    .deployment_status
                    .as_ref()
                    .is_some_and(|status| status.canary)
                && alloc.desired_transition.should_migrate()
            {
                &mut buckets.migrate
            } else if alloc.terminal_status() && !should_reconnect {
                &mut buckets.untainted
            } else if alloc.disconnect_expired(now) {
                &mut buckets.expiring
            } else if should_reconnect
                && client == ALLOC_CLIENT_STATUS_FAILED
                && alloc.desired_status == ALLOC_DESIRED_STATUS_STOP
            {
                &mut buckets.ignore
            } else if disconnected && client == ALLOC_CLIENT_STATUS_UNKNOWN {
                &mut buckets.untainted
            } else if disconnected
                && (client == ALLOC_CLIENT_STATUS_PENDING || alloc.disconnect_timeout(now) == now)
            {
                // Not started yet, or the group does not wait for a disconnected client.
                &mut buckets.lost
            } else if disconnected {
                &mut buckets.disconnecting
            } else if alloc.desired_transition.should_migrate() {
                &mut buckets.migrate
            } else if node_usable && should_reconnect {
                &mut buckets.reconnecting
            } else if node_usable {
                &mut buckets.untainted
            } else if tainted_node.is_none() {
                // The node is gone.
                &mut buckets.lost
            } else if node_status == Some(NODE_STATUS_DOWN)
                && !alloc.replace_on_disconnect()
                && client == ALLOC_CLIENT_STATUS_UNKNOWN
            {
                &mut buckets.untainted
            } else if node_status == Some(NODE_STATUS_DOWN)
                && !alloc.replace_on_disconnect()
                && client == ALLOC_CLIENT_STATUS_RUNNING
            {
                &mut buckets.disconnecting
            } else if node_status == Some(NODE_STATUS_DOWN) {
                &mut buckets.lost
            } else {
                &mut buckets.untainted
            };
            bucket.insert(id.clone(), alloc.clone());
        }
        buckets
    }

    fn compute_group(
        &mut self,
        job: &Job,
        group_name: &str,
        all: AllocSet,
        update_fn: &mut UpdateFn<'_>,
        ids: &mut dyn IdSource,
    ) -> bool {
        self.desired(group_name);
        let batch = self.input.batch;
        // Server-terminal allocations are done with, except batch ones that keep the count
        // (completed work is not run again) unless they were stopped to be rescheduled.
        let all: AllocSet = all
            .into_iter()
            .filter(|(_, alloc)| {
                !alloc.server_terminal_status()
                    || (alloc.job_type() == drover_structs::JOB_TYPE_BATCH
                        && !alloc.desired_transition.should_reschedule())
            })
            .collect();

        let group = match job.lookup_task_group(group_name) {
            Some(group) if group.count > 0 => group,
            _ => {
                let stopped = self.stop_all(&all);
                self.desired(group_name).stop += stopped;
                return true;
            }
        };
        let count = group.count.max(0) as u64;

        // The group's part of the current deployment, or a fresh one.
        let strategy = group
            .update
            .as_ref()
            .filter(|update| self.input.deployments && update.max_parallel > 0);
        let existing_state = self
            .deployment
            .as_ref()
            .and_then(|deployment| deployment.task_groups.get(group_name))
            .cloned();
        let has_existing_state = existing_state.is_some();
        let mut dstate = existing_state.unwrap_or_else(|| DeploymentState {
            auto_revert: strategy.is_some_and(|update| update.auto_revert),
            auto_promote: strategy.is_some_and(|update| update.auto_promote),
            progress_deadline: strategy
                .and_then(|update| update.progress_deadline)
                .unwrap_or_default(),
            ..DeploymentState::default()
        });
        let (paused, failed) = match self.deployment.as_ref() {
            Some(deployment) => (
                deployment.status == drover_structs::DEPLOYMENT_STATUS_PAUSED,
                deployment.status == drover_structs::DEPLOYMENT_STATUS_FAILED,
            ),
            None => (false, false),
        };
        let (canaries, all) = self.handle_group_canaries(group_name, all);
        let had_running = all.values().any(|alloc| {
            alloc.job.as_deref().is_some_and(|alloc_job| {
                alloc_job.version == job.version && alloc_job.create_index == job.create_index
            })
        });

        // Terminal batch allocations of an older job version no longer count.
        let mut all = all;
        if batch {
            let older: Vec<String> = all
                .iter()
                .filter(|(_, alloc)| {
                    let alloc_job = alloc.job.as_deref();
                    let is_older = alloc_job.is_none_or(|alloc_job| {
                        alloc_job.version < job.version || alloc_job.create_index < job.create_index
                    });
                    is_older && alloc.terminal_status()
                })
                .map(|(id, _)| id.clone())
                .collect();
            for id in &older {
                all.remove(id);
            }
            self.desired(group_name).ignore += older.len() as u64;
        }

        let Buckets {
            untainted,
            mut migrate,
            mut lost,
            mut disconnecting,
            reconnecting,
            ignore,
            expiring,
        } = self.classify(&all);
        self.desired(group_name).ignore += ignore.len() as u64;

        let (mut untainted, mut reschedule_now, mut reschedule_later) =
            self.filter_by_rescheduleable(&untainted, batch, false);
        let (_, migrate_now, migrate_later) = self.filter_by_rescheduleable(&migrate, batch, false);
        reschedule_now.extend(migrate_now);
        reschedule_later.extend(migrate_later);

        // Allocations back from a disconnected node, and their replacements, are settled
        // first: which of them keeps running depends on the group's `reconcile` choice.
        if !reconnecting.is_empty() {
            self.compute_reconnecting(
                job,
                group,
                &mut untainted,
                &mut migrate,
                &mut lost,
                &mut disconnecting,
                &reconnecting,
                &all,
            );
        }
        lost.extend(expiring);

        // Allocations of a disconnected node turn `unknown`, to be lost after `lost_after`
        // and replaced now, later or never as the group says.
        let mut disconnect_updates = AllocSet::new();
        if !disconnecting.is_empty() {
            disconnect_updates = self.compute_disconnecting(
                job,
                group_name,
                &disconnecting,
                &mut untainted,
                &mut reschedule_now,
                &mut reschedule_later,
                ids,
            );
        }

        // Lost allocations whose client stops them on its own (`stop_on_client_after`) are
        // replaced only once it surely has: a follow-up evaluation then, and no placement for
        // the group until it runs (Nomad's `delayByStopAfter`).
        let lost_followups = self.create_lost_later_evals(job, &lost, ids);

        let mut migrate_followups: BTreeMap<String, String> = BTreeMap::new();
        if !reschedule_later.is_empty() {
            migrate_followups = self.create_reschedule_later_evals(
                job,
                group_name,
                &mut reschedule_later,
                &all,
                &migrate,
                &mut disconnect_updates,
                ids,
            );
        }
        self.result.disconnect_updates.extend(
            disconnect_updates
                .values()
                .map(|alloc| Allocation::clone(alloc)),
        );

        // Names held, one per allocation (an allocation can be both migrating and rescheduled).
        let holders: BTreeMap<&String, &Arc<Allocation>> = untainted
            .iter()
            .chain(migrate.iter())
            .chain(reschedule_now.iter())
            .chain(lost.iter())
            .collect();
        let taken: Vec<u64> = holders
            .values()
            .map(|alloc| alloc_index_from_name(&alloc.name, &job.id, group_name))
            .collect();
        let mut name_index = AllocNameIndex::new(&job.id, group_name, count, taken);

        // Unpromoted canaries neither count toward the group nor are stopped as extras; once
        // promoted, the old allocation of each canary's name is stopped first.
        let mut is_canarying = dstate.desired_canaries != 0 && !dstate.promoted;
        let mut held_canaries = AllocSet::new();
        if is_canarying {
            for id in canaries.keys() {
                if let Some(alloc) = untainted.remove(id) {
                    held_canaries.insert(id.clone(), alloc);
                }
            }
        } else if !canaries.is_empty() {
            let mut remove = (untainted.len() + migrate.len()) as i64 - count as i64;
            let canary_names: BTreeSet<&String> =
                canaries.values().map(|alloc| &alloc.name).collect();
            let replaced: Vec<Arc<Allocation>> = by_name(&untainted)
                .into_iter()
                .filter(|alloc| {
                    !canaries.contains_key(&alloc.id) && canary_names.contains(&alloc.name)
                })
                .cloned()
                .collect();
            for alloc in replaced {
                if remove <= 0 {
                    break;
                }
                self.mark_stop(&alloc, None, STATUS_ALLOC_NOT_NEEDED);
                untainted.remove(&alloc.id);
                self.desired(group_name).stop += 1;
                remove -= 1;
            }
        }

        self.compute_stop(
            job,
            group_name,
            count,
            &mut name_index,
            &mut untainted,
            &mut migrate,
            &mut reschedule_now,
            &lost,
            &lost_followups,
        );

        // In-place or destructive updates of untainted allocations (canaries included: they
        // run the current version).
        let mut destructive: Vec<Arc<Allocation>> = Vec::new();
        let mut inplace_count = 0usize;
        for alloc in untainted.values().chain(held_canaries.values()) {
            match update_fn(alloc, job, group) {
                UpdateDecision::Ignore => self.desired(group_name).ignore += 1,
                UpdateDecision::Destructive => destructive.push(alloc.clone()),
                UpdateDecision::InPlace(updated) => {
                    self.desired(group_name).in_place_update += 1;
                    inplace_count += 1;
                    self.result.inplace.push(*updated);
                }
            }
        }
        if !has_existing_state {
            dstate.desired_total += (destructive.len() + inplace_count) as i64;
        }

        // Canaries to place before any destructive update.
        let canary_wanted = strategy.map_or(0, |update| update.canary.max(0) as usize);
        let require_canary =
            !destructive.is_empty() && canaries.len() < canary_wanted && !dstate.promoted;
        if require_canary {
            dstate.desired_canaries = canary_wanted as i64;
        }
        let mut canary_places: Vec<PlaceResult> = Vec::new();
        if require_canary && !paused && !failed {
            let number = canary_wanted - canaries.len();
            self.desired(group_name).canary += number as u64;
            for name in next_canary_names(number, &canaries, &destructive, &mut name_index) {
                canary_places.push(PlaceResult {
                    name,
                    group: group_name.to_string(),
                    previous: None,
                    reschedule: false,
                    stop_previous: None,
                    canary: true,
                });
            }
        }
        is_canarying = dstate.desired_canaries != 0 && !dstate.promoted;
        let mut limit = self.compute_limit(
            group,
            strategy.is_some(),
            &untainted,
            destructive.len() + migrate.len(),
            is_canarying || paused || failed,
        );

        // Placements: replacements of failed and lost allocations, then missing indexes; none
        // while a lost allocation's client may still be stopping it. Failed allocations then
        // wait too (unlike Nomad, which stops them without a replacement), so their
        // replacement keeps the reschedule history.
        let wait_for_client_stop = !lost_followups.is_empty();
        if wait_for_client_stop {
            reschedule_now.clear();
        }
        let mut place: Vec<PlaceResult> = Vec::new();
        for alloc in by_name(&reschedule_now) {
            place.push(PlaceResult {
                name: alloc.name.clone(),
                group: group_name.to_string(),
                previous: Some(alloc.clone()),
                reschedule: true,
                stop_previous: None,
                canary: false,
            });
        }
        let mut existing = (untainted.len() + migrate.len() + reschedule_now.len()) as u64;
        if wait_for_client_stop {
            existing = count;
        }
        for alloc in by_name(&lost) {
            if existing >= count {
                break;
            }
            existing += 1;
            place.push(PlaceResult {
                name: alloc.name.clone(),
                group: group_name.to_string(),
                previous: Some(alloc.clone()),
                reschedule: false,
                stop_previous: None,
                canary: false,
            });
        }
        if existing < count {
            for name in name_index.next((count - existing) as usize) {
                place.push(PlaceResult {
                    name,
                    group: group_name.to_string(),
                    previous: None,
                    reschedule: false,
                    stop_previous: None,
                    canary: false,
                });
            }
        }

        let computed_places = place.len();
        if !has_existing_state {
            dstate.desired_total += place.len() as i64;
        }
        let place_ready = !paused && !failed && !is_canarying;
        if place_ready {
            limit = limit.saturating_sub(place.len());
        } else {
            // While the deployment waits, only lost and failed allocations are replaced.
            place.retain(|placement| placement.previous.is_some());
        }
        self.desired(group_name).place += place.len() as u64;
        // Failed allocations being replaced are stopped (migrating ones are stopped below, and
        // those of a disconnected node stay until they reconnect or are lost).
        let failed: Vec<Arc<Allocation>> = by_name(&reschedule_now)
            .into_iter()
            .filter(|alloc| {
                !migrate.contains_key(&alloc.id)
                    && !disconnect_updates.contains_key(&alloc.id)
                    && alloc.client_status != drover_structs::ALLOC_CLIENT_STATUS_UNKNOWN
            })
            .cloned()
            .collect();
        for alloc in &failed {
            self.mark_stop(alloc, None, STATUS_ALLOC_RESCHEDULED);
        }
        self.desired(group_name).stop += failed.len() as u64;
        self.desired(group_name).reschedule_now += reschedule_now.len() as u64;

        // Destructive updates, as many as the limit allows (all of them without a deployment).
        destructive.sort_by(|a, b| name_order(a, b));
        let destructive_total = destructive.len();
        let allowed = if place_ready {
            destructive_total.min(limit)
        } else {
            0
        };
        self.desired(group_name).destructive_update += allowed as u64;
        self.desired(group_name).ignore += (destructive_total - allowed) as u64;
        for alloc in destructive.into_iter().take(allowed) {
            self.result.destructive.push(PlaceResult {
                name: alloc.name.clone(),
                group: group_name.to_string(),
                previous: Some(alloc),
                reschedule: false,
                stop_previous: Some(STATUS_ALLOC_UPDATING),
                canary: false,
            });
        }

        // Migrations: stop, and place a replacement unless a batch allocation is being
        // rescheduled (handled above) or must not be replaced.
        let migrate_count = migrate.len();
        self.desired(group_name).migrate += migrate.len() as u64;
        for alloc in by_name(&migrate) {
            let followup_eval_id = migrate_followups
                .get(&alloc.id)
                .cloned()
                .unwrap_or_default();
            self.result.stop.push(StopResult {
                alloc: alloc.clone(),
                client_status: None,
                description: STATUS_ALLOC_MIGRATING,
                followup_eval_id,
            });
            let is_batch = alloc.job_type() == drover_structs::JOB_TYPE_BATCH;
            if is_batch
                && (alloc.desired_transition.should_reschedule()
                    || alloc.desired_transition.migrate_disable_placement == Some(true))
            {
                continue;
            }
            place.push(PlaceResult {
                name: alloc.name.clone(),
                group: group_name.to_string(),
                previous: Some(alloc.clone()),
                reschedule: false,
                stop_previous: None,
                canary: false,
            });
        }

        // Never more placements than the count.
        if place.len() as u64 > count {
            place.truncate(count as usize);
            self.desired(group_name).place = count;
        }
        self.result.place.extend(canary_places);
        self.result.place.extend(place);
        self.result
            .name_indexes
            .insert(group_name.to_string(), name_index);

        // A deployment is created when the group's spec changed or nothing of this version
        // runs yet; an existing deployment takes the group's new state (desired canaries).
        let updating_spec = destructive_total != 0 || inplace_count != 0;
        if has_existing_state {
            if let Some(deployment) = self.deployment.as_mut()
                && deployment.task_groups.get(group_name) != Some(&dstate)
            {
                deployment
                    .task_groups
                    .insert(group_name.to_string(), dstate.clone());
                self.result.deployment = Some(deployment.clone());
            }
        } else if strategy.is_some() && dstate.desired_total != 0 && (!had_running || updating_spec)
        {
            let deployment = self.deployment.get_or_insert_with(|| {
                let mut created =
                    Deployment::new_for_job(ids.next_id(), job, self.input.eval.priority);
                created.create_index = 0;
                created
            });
            deployment
                .task_groups
                .insert(group_name.to_string(), dstate.clone());
            self.result.deployment = Some(deployment.clone());
        }

        let mut complete = destructive_total
            + inplace_count
            + computed_places
            + migrate_count
            + reschedule_now.len()
            + reschedule_later.len()
            == 0
            && !require_canary;
        if complete
            && let Some(state) = self
                .deployment
                .as_ref()
                .and_then(|deployment| deployment.task_groups.get(group_name))
            && (state.healthy_allocs < state.desired_total.max(state.desired_canaries)
                || (state.desired_canaries > 0 && !state.promoted))
        {
            complete = false;
        }
        complete
    }

    /// Cancels the job's latest deployment when the job stopped or a newer version (or a new
    /// incarnation) was registered; a finished deployment is no longer the current one.
    fn cancel_deployments(&mut self) {
        let Some(latest) = self.input.deployment else {
            return;
        };
        let job = self.input.job.filter(|job| !job.stop);
        let Some(job) = job else {
            if latest.active() {
                self.result.deployment_updates.push(DeploymentStatusUpdate {
                    deployment_id: latest.id.clone(),
                    status: drover_structs::DEPLOYMENT_STATUS_CANCELLED.to_string(),
                    status_description: drover_structs::DEPLOYMENT_DESC_STOPPED_JOB.to_string(),
                });
            }
            self.old_deployment = Some(latest);
            return;
        };
        if latest.job_create_index != job.create_index || latest.job_version != job.version {
            if latest.active() {
                self.result.deployment_updates.push(DeploymentStatusUpdate {
                    deployment_id: latest.id.clone(),
                    status: drover_structs::DEPLOYMENT_STATUS_CANCELLED.to_string(),
                    status_description: drover_structs::DEPLOYMENT_DESC_NEWER_JOB.to_string(),
                });
            }
            self.old_deployment = Some(latest);
            return;
        }
        if latest.status == drover_structs::DEPLOYMENT_STATUS_SUCCESSFUL {
            self.old_deployment = Some(latest);
            return;
        }
        self.deployment = Some(latest.clone());
    }

    /// Marks the current deployment successful when every group is done and healthy; gives a
    /// created deployment Nomad's running description; names the deployment placements join.
    fn finish_deployment(&mut self, complete: bool) {
        let Some(deployment) = self.deployment.as_ref() else {
            return;
        };
        if complete && deployment.active() && !deployment.task_groups.is_empty() {
            self.result.deployment_updates.push(DeploymentStatusUpdate {
                deployment_id: deployment.id.clone(),
                status: drover_structs::DEPLOYMENT_STATUS_SUCCESSFUL.to_string(),
                status_description: drover_structs::DEPLOYMENT_DESC_SUCCESSFUL.to_string(),
            });
        }
        if let Some(created) = self.result.deployment.as_mut()
            && created.create_index == 0
        {
            created.status_description = created.running_description().to_string();
        }
        if deployment.active() {
            self.result.deployment_id = Some(deployment.id.clone());
        }
    }

    /// Stops the unpromoted canaries of an earlier (or failed) deployment and answers the
    /// current deployment's canaries among `all`, and `all` without the stopped ones.
    fn handle_group_canaries(
        &mut self,
        group_name: &str,
        mut all: AllocSet,
    ) -> (AllocSet, AllocSet) {
        let mut stop: BTreeSet<String> = BTreeSet::new();
        let unpromoted = |deployment: &Deployment| -> Vec<String> {
            deployment
                .task_groups
                .values()
                .filter(|state| !state.promoted)
                .flat_map(|state| state.placed_canaries.iter().cloned())
                .collect()
        };
        if let Some(old) = self.old_deployment {
            stop.extend(unpromoted(old));
        }
        if let Some(current) = self.deployment.as_ref()
            && current.status == drover_structs::DEPLOYMENT_STATUS_FAILED
        {
            stop.extend(unpromoted(current));
        }
        let mut stopped = 0;
        for id in &stop {
            if let Some(alloc) = all.remove(id) {
                if !alloc.terminal_status() {
                    self.mark_stop(&alloc, None, STATUS_ALLOC_NOT_NEEDED);
                }
                stopped += 1;
            }
        }
        self.desired(group_name).stop += stopped;
        let mut canaries = AllocSet::new();
        if let Some(current) = self.deployment.as_ref() {
            for state in current.task_groups.values() {
                for id in &state.placed_canaries {
                    if let Some(alloc) = all.get(id) {
                        canaries.insert(id.clone(), alloc.clone());
                    }
                }
            }
        }
        (canaries, all)
    }

    /// How many destructive updates (and placements) may happen now (Nomad's `computeLimit`):
    /// unlimited without a rolling update or with nothing to replace, none while the deployment
    /// waits (canaries, paused, failed), else `max_parallel` minus the deployment's allocations
    /// whose health is not known yet, and none while one of them is unhealthy.
    fn compute_limit(
        &self,
        group: &TaskGroup,
        rolling: bool,
        untainted: &AllocSet,
        to_replace: usize,
        waiting: bool,
    ) -> usize {
        let Some(update) = group.update.as_ref().filter(|_| rolling) else {
            return usize::MAX;
        };
        if to_replace == 0 {
            return usize::MAX;
        }
        if waiting {
            return 0;
        }
        let mut limit = update.max_parallel;
        if let Some(deployment) = self.deployment.as_ref() {
            for alloc in untainted
                .values()
                .filter(|alloc| alloc.deployment_id == deployment.id)
            {
                match alloc
                    .deployment_status
                    .as_ref()
                    .and_then(|status| status.healthy)
                {
                    Some(false) => return 0,
                    Some(true) => {}
                    None => limit -= 1,
                }
            }
        }
        limit.max(0) as usize
    }

    /// Splits a set into allocations that keep counting, failed ones to replace now, and failed
    /// ones to replace later (with the time they become due).
    ///
    /// `disconnecting`: the allocations of a disconnected node, replaced (when their group
    /// replaces them at all) by their reschedule policy as if they failed now.
    fn filter_by_rescheduleable(
        &self,
        set: &AllocSet,
        batch: bool,
        disconnecting: bool,
    ) -> (AllocSet, AllocSet, Vec<(Arc<Allocation>, i64)>) {
        let mut untainted = AllocSet::new();
        let mut now = AllocSet::new();
        let mut later = Vec::new();
        for (id, alloc) in set {
            if disconnecting && alloc.client_status == drover_structs::ALLOC_CLIENT_STATUS_UNKNOWN {
                continue;
            }
            // Already replaced.
            if !alloc.next_allocation.is_empty() && alloc.terminal_status() {
                continue;
            }
            let (is_untainted, ignore) = should_filter(alloc, batch);
            if is_untainted && !disconnecting {
                untainted.insert(id.clone(), alloc.clone());
                continue;
            }
            if ignore {
                continue;
            }
            // A failed allocation of the active deployment is replaced only once the deployment
            // watcher allowed it (Nomad's `updateByReschedulable`).
            if self.deployment.as_ref().is_some_and(|deployment| {
                alloc.deployment_id == deployment.id
                    && deployment.active()
                    && !alloc.desired_transition.should_reschedule()
            }) {
                untainted.insert(id.clone(), alloc.clone());
                continue;
            }
            let mut reschedule_now = alloc.desired_transition.should_force_reschedule()
                && alloc.client_terminal_status();
            let mut reschedule_at = None;
            if disconnecting && !alloc.replace_on_disconnect() {
                untainted.insert(id.clone(), alloc.clone());
                continue;
            }
            let due = if disconnecting {
                next_reschedule_time_at(alloc, self.input.now_unix_nanos)
            } else if alloc.client_status == drover_structs::ALLOC_CLIENT_STATUS_UNKNOWN
                && alloc.followup_eval_id == self.input.eval.id
            {
                next_reschedule_time_at(alloc, alloc.last_unknown_unix_nanos().unwrap_or(0))
            } else {
                next_reschedule_time(alloc)
            };
            if let Some(due) = due {
                if alloc.followup_eval_id == self.input.eval.id
                    || due.saturating_sub(self.input.now_unix_nanos) <= RESCHEDULE_WINDOW_NANOS
                {
                    reschedule_now = true;
                } else if alloc.followup_eval_id.is_empty() {
                    reschedule_at = Some(due);
                }
            }
            if reschedule_now {
                now.insert(id.clone(), alloc.clone());
                continue;
            }
            untainted.insert(id.clone(), alloc.clone());
            if let Some(due) = reschedule_at {
                later.push((alloc.clone(), due));
            }
        }
        (untainted, now, later)
    }

    /// Creates delayed evaluations for failed allocations not yet due (one per five-second
    /// window) and records each allocation's `FollowupEvalID`. Returns the follow-up IDs of
    /// migrating allocations, which travel on their stop instead.
    #[allow(clippy::too_many_arguments)]
    fn create_reschedule_later_evals(
        &mut self,
        job: &Job,
        group_name: &str,
        later: &mut [(Arc<Allocation>, i64)],
        all: &AllocSet,
        migrate: &AllocSet,
        disconnect_updates: &mut AllocSet,
        ids: &mut dyn IdSource,
    ) -> BTreeMap<String, String> {
        // In time order, as the updates below are recorded.
        later.sort_by(|(a, a_due), (b, b_due)| a_due.cmp(b_due).then_with(|| a.id.cmp(&b.id)));
        let due: Vec<(i64, &Arc<Allocation>)> =
            later.iter().map(|(alloc, due)| (*due, alloc)).collect();
        let followup_by_alloc = self.batch_followup_evals(
            job,
            due,
            drover_structs::EVAL_TRIGGER_ALLOC_RESCHEDULE,
            DESC_RESCHEDULING_FOLLOWUP_EVAL,
            ids,
        );
        let mut migrate_followups = BTreeMap::new();
        for (alloc, _) in later.iter() {
            let Some(followup) = followup_by_alloc.get(&alloc.id) else {
                continue;
            };
            if let Some(update) = disconnect_updates.get_mut(&alloc.id) {
                Arc::make_mut(update).followup_eval_id = followup.clone();
            } else if migrate.contains_key(&alloc.id) {
                migrate_followups.insert(alloc.id.clone(), followup.clone());
            } else if let Some(existing) = all.get(&alloc.id) {
                let mut updated = Allocation::clone(existing);
                updated.followup_eval_id = followup.clone();
                self.result.attribute_updates.push(updated);
            }
        }
        self.desired(group_name).reschedule_later += later.len() as u64;
        migrate_followups
    }

    /// One `failed-follow-up` evaluation per five-second window of the times at which lost
    /// allocations with `stop_on_client_after` are surely stopped by their clients (Nomad's
    /// `createLaterEvals` over `delayByStopAfter`); answers each allocation's. Empty when no
    /// lost allocation still waits.
    fn create_lost_later_evals(
        &mut self,
        job: &Job,
        lost: &AllocSet,
        ids: &mut dyn IdSource,
    ) -> BTreeMap<String, String> {
        let now = self.input.now_unix_nanos;
        let later: Vec<(i64, &Arc<Allocation>)> = lost
            .values()
            .filter_map(|alloc| Some((alloc.wait_client_stop(now)?, alloc)))
            .filter(|(due, _)| *due > now)
            .collect();
        self.batch_followup_evals(
            job,
            later,
            drover_structs::EVAL_TRIGGER_FAILED_FOLLOW_UP,
            DESC_RESCHEDULING_FOLLOWUP_EVAL,
            ids,
        )
    }

    /// Settles allocations back from a disconnected node (Nomad's `computeReconnecting`):
    /// those that failed meanwhile, are no longer wanted or lose to a replacement are stopped,
    /// as are the replacements that lose to them; the rest run on (a reconnect update records
    /// it for those the client reports running) and count as untainted.
    #[allow(clippy::too_many_arguments)]
    fn compute_reconnecting(
        &mut self,
        job: &Job,
        group: &TaskGroup,
        untainted: &mut AllocSet,
        migrate: &mut AllocSet,
        lost: &mut AllocSet,
        disconnecting: &mut AllocSet,
        reconnecting: &AllocSet,
        all: &AllocSet,
    ) {
        let stopped = self.reconcile_reconnecting(job, group, reconnecting, all);
        self.desired(&group.name).stop += stopped.len() as u64;
        for id in &stopped {
            untainted.remove(id);
            migrate.remove(id);
            lost.remove(id);
            disconnecting.remove(id);
        }
        let reconnect: AllocSet = reconnecting
            .iter()
            .filter(|(id, _)| !stopped.contains(*id))
            .map(|(id, alloc)| (id.clone(), alloc.clone()))
            .collect();
        if reconnect.is_empty() {
            return;
        }
        let mut updates = Vec::new();
        for alloc in by_name(&reconnect) {
            let keeps_running = alloc.desired_status == drover_structs::ALLOC_DESIRED_STATUS_RUN
                && !transitions_away(alloc)
                && !older_than(alloc, job)
                && alloc.client_status == drover_structs::ALLOC_CLIENT_STATUS_RUNNING;
            if keeps_running {
                let mut reconnected = Allocation::clone(alloc);
                reconnected
                    .append_client_status_state(&alloc.client_status, self.input.now_unix_nanos);
                updates.push(reconnected);
            }
        }
        self.desired(&group.name).reconnect = updates.len() as u64;
        self.result.reconnect_updates.extend(updates);
        untainted.extend(reconnect);
    }

    /// Which reconnecting allocations and replacements stop (Nomad's
    /// `reconcileReconnecting`); the stops are added to the result.
    fn reconcile_reconnecting(
        &mut self,
        job: &Job,
        group: &TaskGroup,
        reconnecting: &AllocSet,
        all: &AllocSet,
    ) -> BTreeSet<String> {
        let mut stopped: BTreeSet<String> = BTreeSet::new();
        for original in by_name(reconnecting) {
            if !original.server_terminal_status()
                && original.client_status == drover_structs::ALLOC_CLIENT_STATUS_FAILED
            {
                stopped.insert(original.id.clone());
                self.mark_stop(
                    original,
                    Some(drover_structs::ALLOC_CLIENT_STATUS_FAILED),
                    STATUS_ALLOC_RESCHEDULED,
                );
                continue;
            }
            if original.desired_status != drover_structs::ALLOC_DESIRED_STATUS_RUN
                || transitions_away(original)
                || older_than(original, job)
            {
                stopped.insert(original.id.clone());
                self.mark_stop(original, None, STATUS_ALLOC_NOT_NEEDED);
                continue;
            }
            // A replacement may itself have been replaced: follow the chain.
            let mut replacements: Vec<&Arc<Allocation>> = Vec::new();
            let mut next = &original.next_allocation;
            while let Some(replacement) = all.get(next) {
                if replacements.iter().any(|seen| seen.id == replacement.id) {
                    break;
                }
                replacements.push(replacement);
                next = &replacement.next_allocation;
            }
            for replacement in replacements {
                if replacement.id == original.id || replacement.server_terminal_status() {
                    continue;
                }
                if pick_reconnecting(group, original, replacement).id == replacement.id {
                    if stopped.insert(original.id.clone()) {
                        self.mark_stop(original, None, STATUS_ALLOC_NOT_NEEDED);
                    }
                } else if stopped.insert(replacement.id.clone()) {
                    self.mark_stop(replacement, None, STATUS_ALLOC_RECONNECTED);
                }
            }
        }
        stopped
    }

    /// Marks the allocations of a disconnected node `unknown` (Nomad's
    /// `computeDisconnecting`): each gets a follow-up evaluation at its `lost_after`, and a
    /// replacement now or later by its reschedule policy unless the group says `replace =
    /// false`. Answers the updated copies by ID; those replaced now are swapped into
    /// `reschedule_now`, so their replacement names them as the previous allocation.
    #[allow(clippy::too_many_arguments)]
    fn compute_disconnecting(
        &mut self,
        job: &Job,
        group_name: &str,
        disconnecting: &AllocSet,
        untainted: &mut AllocSet,
        reschedule_now: &mut AllocSet,
        reschedule_later: &mut Vec<(Arc<Allocation>, i64)>,
        ids: &mut dyn IdSource,
    ) -> AllocSet {
        let (keep, now, later) =
            self.filter_by_rescheduleable(disconnecting, self.input.batch, true);
        reschedule_now.extend(now);
        untainted.extend(keep);
        reschedule_later.extend(later);

        let timeouts = self.create_timeout_later_evals(job, disconnecting, ids);
        let mut updates = AllocSet::new();
        for (id, alloc) in disconnecting {
            let mut updated = Allocation::clone(alloc);
            updated.client_status = drover_structs::ALLOC_CLIENT_STATUS_UNKNOWN.to_string();
            updated.append_client_status_state(
                drover_structs::ALLOC_CLIENT_STATUS_UNKNOWN,
                self.input.now_unix_nanos,
            );
            updated.client_description = STATUS_ALLOC_UNKNOWN.to_string();
            updated.followup_eval_id = timeouts.get(id).cloned().unwrap_or_default();
            updated.modify_time = self.input.now_unix_nanos;
            let updated = Arc::new(updated);
            if let Some(entry) = reschedule_now.get_mut(id) {
                *entry = updated.clone();
            }
            updates.insert(id.clone(), updated);
        }
        self.desired(group_name).disconnect = updates.len() as u64;
        updates
    }

    /// One `max-disconnect-timeout` evaluation per five-second window of `lost_after`
    /// deadlines; answers each allocation's.
    fn create_timeout_later_evals(
        &mut self,
        job: &Job,
        disconnecting: &AllocSet,
        ids: &mut dyn IdSource,
    ) -> BTreeMap<String, String> {
        let now = self.input.now_unix_nanos;
        let deadlines: Vec<(i64, &Arc<Allocation>)> = disconnecting
            .values()
            .map(|alloc| (alloc.disconnect_timeout(now), alloc))
            .collect();
        self.batch_followup_evals(
            job,
            deadlines,
            drover_structs::EVAL_TRIGGER_MAX_DISCONNECT_TIMEOUT,
            DESC_DISCONNECT_TIMEOUT_FOLLOWUP_EVAL,
            ids,
        )
    }

    /// One pending evaluation, `triggered_by`, waiting until its time, per five-second window
    /// of the times in `due` (Nomad's `createLaterEvals` batching), in order of time then
    /// allocation ID; answers each allocation's evaluation ID.
    fn batch_followup_evals(
        &mut self,
        job: &Job,
        mut due: Vec<(i64, &Arc<Allocation>)>,
        triggered_by: &str,
        description: &str,
        ids: &mut dyn IdSource,
    ) -> BTreeMap<String, String> {
        let now = self.input.now_unix_nanos;
        due.sort_by(|(a_due, a), (b_due, b)| a_due.cmp(b_due).then_with(|| a.id.cmp(&b.id)));
        let mut followups = BTreeMap::new();
        let mut batch_start: Option<i64> = None;
        let mut eval_id = String::new();
        for (due, alloc) in due {
            if batch_start
                .is_none_or(|start| due.saturating_sub(start) >= BATCHED_FAILED_ALLOC_WINDOW_NANOS)
            {
                batch_start = Some(due);
                eval_id = ids.next_id();
                self.result.follow_up_evals.push(Evaluation {
                    id: eval_id.clone(),
                    namespace: job.namespace.clone(),
                    priority: self.input.eval.priority,
                    r#type: job.r#type.clone(),
                    triggered_by: triggered_by.to_string(),
                    job_id: job.id.clone(),
                    job_modify_index: job.modify_index,
                    status: drover_structs::EVAL_STATUS_PENDING.to_string(),
                    status_description: description.to_string(),
                    wait_until: drover_structs::Timestamp::from_unix_nanos(due),
                    previous_eval: self.input.eval.id.clone(),
                    create_time: now,
                    modify_time: now,
                    ..Evaluation::default()
                });
            }
            followups.insert(alloc.id.clone(), eval_id.clone());
        }
        followups
    }

    /// Stops lost allocations and, beyond the count, the highest indexes: failed allocations
    /// first (they are then not rescheduled, so a failure never pushes the group above its
    /// count), then migrating ones, then running ones.
    #[allow(clippy::too_many_arguments)]
    fn compute_stop(
        &mut self,
        job: &Job,
        group_name: &str,
        count: u64,
        name_index: &mut AllocNameIndex,
        untainted: &mut AllocSet,
        migrate: &mut AllocSet,
        reschedule_now: &mut AllocSet,
        lost: &AllocSet,
        lost_followups: &BTreeMap<String, String>,
    ) {
        let mut stopped: BTreeSet<String> = BTreeSet::new();
        for alloc in by_name(lost) {
            self.result.stop.push(StopResult {
                alloc: alloc.clone(),
                client_status: Some(drover_structs::ALLOC_CLIENT_STATUS_LOST),
                description: STATUS_ALLOC_LOST,
                followup_eval_id: lost_followups.get(&alloc.id).cloned().unwrap_or_default(),
            });
            stopped.insert(alloc.id.clone());
        }
        let known_untainted = untainted
            .values()
            .filter(|alloc| alloc.client_status != drover_structs::ALLOC_CLIENT_STATUS_UNKNOWN)
            .count() as i64;
        // Failed allocations to replace count toward the group (migrating ones, rescheduled
        // through `alloc stop`, are already counted as migrating).
        let mut failed_highest_first: Vec<Arc<Allocation>> = reschedule_now
            .values()
            .filter(|alloc| !migrate.contains_key(&alloc.id))
            .cloned()
            .collect();
        failed_highest_first.sort_by(|a, b| name_order(b, a));
        let mut remove = known_untainted + migrate.len() as i64 + failed_highest_first.len() as i64
            - count as i64;
        if remove > 0 {
            for alloc in failed_highest_first {
                if remove == 0 {
                    break;
                }
                self.mark_stop(&alloc, None, STATUS_ALLOC_NOT_NEEDED);
                reschedule_now.remove(&alloc.id);
                stopped.insert(alloc.id.clone());
                name_index.unset(alloc_index_from_name(&alloc.name, &job.id, group_name));
                remove -= 1;
            }
        }
        if remove > 0 {
            let mut working: AllocSet = untainted
                .iter()
                .filter(|(_, alloc)| !alloc.server_terminal_status())
                .map(|(id, alloc)| (id.clone(), alloc.clone()))
                .collect();
            if !migrate.is_empty() {
                let mut migrating_names = AllocNameIndex::new(
                    &job.id,
                    group_name,
                    count,
                    migrate
                        .values()
                        .map(|alloc| alloc_index_from_name(&alloc.name, &job.id, group_name))
                        .collect::<Vec<_>>(),
                );
                let remove_names = migrating_names.highest(remove as usize);
                let matching: Vec<Arc<Allocation>> = by_name(migrate)
                    .into_iter()
                    .filter(|alloc| remove_names.contains(&alloc.name))
                    .cloned()
                    .collect();
                for alloc in matching {
                    if remove == 0 {
                        break;
                    }
                    self.mark_stop(&alloc, None, STATUS_ALLOC_NOT_NEEDED);
                    migrate.remove(&alloc.id);
                    reschedule_now.remove(&alloc.id);
                    stopped.insert(alloc.id.clone());
                    name_index.unset(alloc_index_from_name(&alloc.name, &job.id, group_name));
                    remove -= 1;
                }
            }
            if remove > 0 {
                let remove_names = name_index.highest(remove as usize);
                let mut highest_first: Vec<Arc<Allocation>> = working
                    .values()
                    .filter(|alloc| remove_names.contains(&alloc.name))
                    .cloned()
                    .collect();
                highest_first.sort_by(|a, b| name_order(b, a));
                for alloc in highest_first {
                    if remove == 0 {
                        break;
                    }
                    self.mark_stop(&alloc, None, STATUS_ALLOC_NOT_NEEDED);
                    working.remove(&alloc.id);
                    stopped.insert(alloc.id.clone());
                    remove -= 1;
                }
            }
            // Duplicated names can leave extras: stop the highest remaining.
            if remove > 0 {
                let mut rest: Vec<Arc<Allocation>> = working.values().cloned().collect();
                rest.sort_by(|a, b| name_order(b, a));
                for alloc in rest {
                    if remove == 0 {
                        break;
                    }
                    self.mark_stop(&alloc, None, STATUS_ALLOC_NOT_NEEDED);
                    stopped.insert(alloc.id.clone());
                    remove -= 1;
                }
            }
        }
        self.desired(group_name).stop += stopped.len() as u64;
        untainted.retain(|id, _| !stopped.contains(id));
    }
}

/// Whether an untainted allocation keeps counting as it is (`untainted`), or is dropped from
/// consideration (`ignore`); neither means it failed and may be rescheduled.
fn should_filter(alloc: &Allocation, batch: bool) -> (bool, bool) {
    if batch {
        if alloc.desired_transition.migrate_disable_placement == Some(true) {
            return (true, false);
        }
        if alloc.desired_transition.should_reschedule() {
            return (false, false);
        }
        match alloc.desired_status.as_str() {
            drover_structs::ALLOC_DESIRED_STATUS_STOP => {
                if ran_successfully(alloc) {
                    return (true, false);
                }
                if last_reschedule_failed(alloc) {
                    return (false, false);
                }
                return (false, true);
            }
            drover_structs::ALLOC_DESIRED_STATUS_EVICT => return (false, true),
            _ => {}
        }
        if alloc.client_status == drover_structs::ALLOC_CLIENT_STATUS_FAILED {
            return (false, false);
        }
        return (true, false);
    }
    if alloc.server_terminal_status() {
        return (false, !last_reschedule_failed(alloc));
    }
    if alloc.client_status == drover_structs::ALLOC_CLIENT_STATUS_COMPLETE
        || alloc.client_status == drover_structs::ALLOC_CLIENT_STATUS_LOST
    {
        return (false, true);
    }
    (false, false)
}

/// Whether the operator asked the allocation to move or be replaced.
fn transitions_away(alloc: &Allocation) -> bool {
    alloc.desired_transition.should_migrate()
        || alloc.desired_transition.should_reschedule()
        || alloc.desired_transition.should_force_reschedule()
}

/// Whether the allocation runs an older version (or incarnation) of `job`.
fn older_than(alloc: &Allocation, job: &Job) -> bool {
    alloc.job.as_deref().is_some_and(|alloc_job| {
        alloc_job.version < job.version || alloc_job.create_index < job.create_index
    })
}

/// Which of a reconnecting allocation and one of its replacements keeps running (Nomad's
/// reconnecting picker): a replacement of a newer job version always; otherwise as the
/// group's `disconnect { reconcile }` says — `best_score` (the replacement only with a better
/// placement score and not trading a running allocation for one that is not),
/// `keep_original`, `keep_replacement`, or `longest_running` (the one whose leader task, else
/// oldest task, started first; `best_score` when neither started).
fn pick_reconnecting<'a>(
    group: &TaskGroup,
    original: &'a Arc<Allocation>,
    replacement: &'a Arc<Allocation>,
) -> &'a Arc<Allocation> {
    let (original_job, replacement_job) = (original.job.as_deref(), replacement.job.as_deref());
    if let (Some(original_job), Some(replacement_job)) = (original_job, replacement_job)
        && (replacement_job.version > original_job.version
            || replacement_job.create_index > original_job.create_index)
    {
        return replacement;
    }
    match group.disconnect_reconcile() {
        drover_structs::disconnect::RECONCILE_KEEP_ORIGINAL => original,
        drover_structs::disconnect::RECONCILE_KEEP_REPLACEMENT => replacement,
        drover_structs::disconnect::RECONCILE_LONGEST_RUNNING => {
            let tasks_group = original
                .job
                .as_deref()
                .and_then(|job| job.lookup_task_group(&original.task_group))
                .unwrap_or(group);
            match (
                first_start(original, tasks_group),
                first_start(replacement, tasks_group),
            ) {
                (None, Some(_)) => replacement,
                (Some(_), None) => original,
                (None, None) => pick_best_score(original, replacement),
                (Some(original_start), Some(replacement_start)) => {
                    if original_start < replacement_start {
                        original
                    } else {
                        replacement
                    }
                }
            }
        }
        _ => pick_best_score(original, replacement),
    }
}

fn pick_best_score<'a>(
    original: &'a Arc<Allocation>,
    replacement: &'a Arc<Allocation>,
) -> &'a Arc<Allocation> {
    let max_norm_score = |alloc: &Allocation| {
        alloc
            .metrics
            .as_ref()?
            .score_meta_data
            .iter()
            .map(|meta| meta.norm_score)
            .reduce(f64::max)
    };
    let better = match (max_norm_score(original), max_norm_score(replacement)) {
        (None, Some(_)) => true,
        (Some(original_score), Some(replacement_score)) => replacement_score > original_score,
        _ => false,
    };
    let running = drover_structs::ALLOC_CLIENT_STATUS_RUNNING;
    if better && (replacement.client_status == running || original.client_status != running) {
        replacement
    } else {
        original
    }
}

/// When the group's leader task started, else its earliest-started task (Nomad's
/// `startOfLeaderOrOldestTaskInMain`).
fn first_start(alloc: &Allocation, group: &TaskGroup) -> Option<i64> {
    let mut oldest: Option<i64> = None;
    for task in &group.tasks {
        let started = alloc.last_start_of_task(&task.name);
        if task.leader {
            return started;
        }
        if let Some(started) = started {
            oldest = Some(oldest.map_or(started, |oldest| oldest.min(started)));
        }
    }
    oldest
}

/// Allocations sorted by index, then ID.
fn by_name(set: &AllocSet) -> Vec<&Arc<Allocation>> {
    let mut allocs: Vec<&Arc<Allocation>> = set.values().collect();
    allocs.sort_by(|a, b| name_order(a, b));
    allocs
}

fn name_order(a: &Allocation, b: &Allocation) -> std::cmp::Ordering {
    let index = |alloc: &Allocation| alloc.index().unwrap_or(0);
    index(a)
        .cmp(&index(b))
        .then_with(|| a.name.cmp(&b.name))
        .then_with(|| a.id.cmp(&b.id))
}

/// Names for `number` new canaries (Nomad's `NextCanaries`): the names of allocations being
/// replaced first (lowest first), skipping those a canary already holds, then free names.
fn next_canary_names(
    number: usize,
    canaries: &AllocSet,
    destructive: &[Arc<Allocation>],
    name_index: &mut AllocNameIndex,
) -> Vec<String> {
    let held: BTreeSet<&String> = canaries.values().map(|alloc| &alloc.name).collect();
    let mut replaced: Vec<&Arc<Allocation>> = destructive.iter().collect();
    replaced.sort_by(|a, b| name_order(a, b));
    let mut names: Vec<String> = Vec::new();
    for alloc in replaced {
        if names.len() == number {
            break;
        }
        if !held.contains(&alloc.name) && !names.contains(&alloc.name) {
            names.push(alloc.name.clone());
        }
    }
    if names.len() < number {
        names.extend(name_index.next(number - names.len()));
    }
    names
}
