//! The cluster reconciler for service and batch jobs: compares what the job wants (a count per
//! task group, at the current version) with the allocations that exist, and says what to stop,
//! what to place, and what to update in place or destructively. After Nomad's
//! `scheduler/reconciler`.
//!
//! Per group, allocations are sorted into buckets:
//! - **ignore**: finished and told to stop; nothing to do.
//! - **lost**: on a node that is down, disconnected or gone; stopped (client status `lost`) and
//!   replaced up to the count.
//! - **migrate**: marked with `DesiredTransition.Migrate` (`alloc stop`, a drain); stopped and
//!   replaced.
//! - **untainted**: everything else. Failed ones are rescheduled now or later by the reschedule
//!   policy; batch allocations that completed successfully keep counting, so they are not run
//!   again; extras above the count are stopped, highest index first.
//!
//! Then missing indexes are placed (lowest free first) and untainted allocations of an older
//! job version are updated in place or destructively, as the caller's [`UpdateFn`] decides.
//! Deployments, canaries and disconnected-client handling are not implemented: every change is
//! applied at once, as Nomad does for a group without an `update` block.
//!
//! System and sysbatch jobs use the per-node reconciliation in `system`, which shares the stop
//! descriptions and the update decision defined here.
//!
//! Not here: choosing nodes, building allocations (`generic`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use drover_structs::{Allocation, Evaluation, Job, Node, TaskGroup};

use crate::ids::IdSource;
use crate::names::{AllocNameIndex, alloc_index_from_name};
use crate::plan::DesiredUpdates;
use crate::reschedule::{
    BATCHED_FAILED_ALLOC_WINDOW_NANOS, RESCHEDULE_WINDOW_NANOS, last_reschedule_failed,
    next_reschedule_time, ran_successfully,
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
    pub desired_tg_updates: BTreeMap<String, DesiredUpdates>,
    pub follow_up_evals: Vec<Evaluation>,
    pub name_indexes: BTreeMap<String, AllocNameIndex>,
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
    };
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
            for (group_name, allocs) in matrix {
                reconciler.compute_group(job, &group_name, allocs, update_fn, ids);
            }
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
}

/// The buckets an allocation can fall into.
#[derive(Default)]
struct Buckets {
    untainted: AllocSet,
    migrate: AllocSet,
    lost: AllocSet,
    ignore: AllocSet,
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
        for alloc in buckets.untainted.values().chain(buckets.migrate.values()) {
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

    fn classify(&self, set: &AllocSet) -> Buckets {
        let mut buckets = Buckets::default();
        for (id, alloc) in set {
            let tainted = self.input.tainted_nodes.get(&alloc.node_id);
            let bucket = if alloc.server_terminal_status()
                && alloc.desired_transition.migrate_disable_placement == Some(true)
            {
                &mut buckets.untainted
            } else if alloc.server_terminal_status() {
                &mut buckets.ignore
            } else if alloc.terminal_status() {
                &mut buckets.untainted
            } else if matches!(tainted, Some(Some(node)) if node.status == drover_structs::NODE_STATUS_DISCONNECTED)
            {
                // Without disconnect handling, a disconnected node's allocations are lost.
                &mut buckets.lost
            } else if alloc.desired_transition.should_migrate() {
                &mut buckets.migrate
            } else {
                match tainted {
                    None => &mut buckets.untainted,
                    Some(Some(node)) if node.status == drover_structs::NODE_STATUS_READY => {
                        &mut buckets.untainted
                    }
                    Some(None) => &mut buckets.lost,
                    Some(Some(node)) if node.status == drover_structs::NODE_STATUS_DOWN => {
                        &mut buckets.lost
                    }
                    Some(Some(_)) => &mut buckets.untainted,
                }
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
    ) {
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
                return;
            }
        };
        let count = group.count.max(0) as u64;

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
            lost,
            ignore,
        } = self.classify(&all);
        self.desired(group_name).ignore += ignore.len() as u64;

        let (mut untainted, mut reschedule_now, mut reschedule_later) =
            self.filter_by_rescheduleable(&untainted, batch);
        let (_, migrate_now, migrate_later) = self.filter_by_rescheduleable(&migrate, batch);
        reschedule_now.extend(migrate_now);
        reschedule_later.extend(migrate_later);

        let mut migrate_followups: BTreeMap<String, String> = BTreeMap::new();
        if !reschedule_later.is_empty() {
            migrate_followups = self.create_reschedule_later_evals(
                job,
                group_name,
                &mut reschedule_later,
                &all,
                &migrate,
                ids,
            );
        }

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

        self.compute_stop(
            job,
            group_name,
            count,
            &mut name_index,
            &mut untainted,
            &mut migrate,
            &mut reschedule_now,
            &lost,
        );

        // In-place or destructive updates of untainted allocations.
        let mut destructive: Vec<Arc<Allocation>> = Vec::new();
        for alloc in untainted.values() {
            match update_fn(alloc, job, group) {
                UpdateDecision::Ignore => self.desired(group_name).ignore += 1,
                UpdateDecision::Destructive => destructive.push(alloc.clone()),
                UpdateDecision::InPlace(updated) => {
                    self.desired(group_name).in_place_update += 1;
                    self.result.inplace.push(*updated);
                }
            }
        }

        // Placements: replacements of failed and lost allocations, then missing indexes.
        let mut place: Vec<PlaceResult> = Vec::new();
        for alloc in by_name(&reschedule_now) {
            place.push(PlaceResult {
                name: alloc.name.clone(),
                group: group_name.to_string(),
                previous: Some(alloc.clone()),
                reschedule: true,
                stop_previous: None,
            });
        }
        let mut existing = (untainted.len() + migrate.len() + reschedule_now.len()) as u64;
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
                });
            }
        }

        self.desired(group_name).place += place.len() as u64;
        // Failed allocations being replaced are stopped (migrating ones are stopped below).
        let failed: Vec<Arc<Allocation>> = by_name(&reschedule_now)
            .into_iter()
            .filter(|alloc| !migrate.contains_key(&alloc.id))
            .cloned()
            .collect();
        for alloc in &failed {
            self.mark_stop(alloc, None, STATUS_ALLOC_RESCHEDULED);
        }
        self.desired(group_name).stop += failed.len() as u64;
        self.desired(group_name).reschedule_now += reschedule_now.len() as u64;

        // Without deployments every destructive update happens now.
        destructive.sort_by(|a, b| name_order(a, b));
        self.desired(group_name).destructive_update += destructive.len() as u64;
        for alloc in destructive {
            self.result.destructive.push(PlaceResult {
                name: alloc.name.clone(),
                group: group_name.to_string(),
                previous: Some(alloc),
                reschedule: false,
                stop_previous: Some(STATUS_ALLOC_UPDATING),
            });
        }

        // Migrations: stop, and place a replacement unless a batch allocation is being
        // rescheduled (handled above) or must not be replaced.
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
            });
        }

        // Never more placements than the count.
        if place.len() as u64 > count {
            place.truncate(count as usize);
            self.desired(group_name).place = count;
        }
        self.result.place.extend(place);
        self.result
            .name_indexes
            .insert(group_name.to_string(), name_index);
    }

    /// Splits a set into allocations that keep counting, failed ones to replace now, and failed
    /// ones to replace later (with the time they become due).
    fn filter_by_rescheduleable(
        &self,
        set: &AllocSet,
        batch: bool,
    ) -> (AllocSet, AllocSet, Vec<(Arc<Allocation>, i64)>) {
        let mut untainted = AllocSet::new();
        let mut now = AllocSet::new();
        let mut later = Vec::new();
        for (id, alloc) in set {
            // Already replaced.
            if !alloc.next_allocation.is_empty() && alloc.terminal_status() {
                continue;
            }
            let (is_untainted, ignore) = should_filter(alloc, batch);
            if is_untainted {
                untainted.insert(id.clone(), alloc.clone());
                continue;
            }
            if ignore {
                continue;
            }
            let mut reschedule_now = alloc.desired_transition.should_force_reschedule()
                && alloc.client_terminal_status();
            let mut reschedule_at = None;
            if let Some(due) = next_reschedule_time(alloc) {
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
    fn create_reschedule_later_evals(
        &mut self,
        job: &Job,
        group_name: &str,
        later: &mut [(Arc<Allocation>, i64)],
        all: &AllocSet,
        migrate: &AllocSet,
        ids: &mut dyn IdSource,
    ) -> BTreeMap<String, String> {
        later.sort_by(|(a, a_due), (b, b_due)| a_due.cmp(b_due).then_with(|| a.id.cmp(&b.id)));
        let mut followup_by_alloc: BTreeMap<String, String> = BTreeMap::new();
        let mut batch_start: Option<i64> = None;
        let mut eval_id = String::new();
        for (alloc, due) in later.iter() {
            if batch_start
                .is_none_or(|start| due.saturating_sub(start) >= BATCHED_FAILED_ALLOC_WINDOW_NANOS)
            {
                batch_start = Some(*due);
                eval_id = ids.next_id();
                self.result.follow_up_evals.push(Evaluation {
                    id: eval_id.clone(),
                    namespace: job.namespace.clone(),
                    priority: self.input.eval.priority,
                    r#type: job.r#type.clone(),
                    triggered_by: drover_structs::EVAL_TRIGGER_ALLOC_RESCHEDULE.to_string(),
                    job_id: job.id.clone(),
                    job_modify_index: job.modify_index,
                    status: drover_structs::EVAL_STATUS_PENDING.to_string(),
                    status_description: DESC_RESCHEDULING_FOLLOWUP_EVAL.to_string(),
                    wait_until: drover_structs::Timestamp::from_unix_nanos(*due),
                    previous_eval: self.input.eval.id.clone(),
                    create_time: self.input.now_unix_nanos,
                    modify_time: self.input.now_unix_nanos,
                    ..Evaluation::default()
                });
            }
            followup_by_alloc.insert(alloc.id.clone(), eval_id.clone());
        }
        let mut migrate_followups = BTreeMap::new();
        for (alloc, _) in later.iter() {
            let Some(followup) = followup_by_alloc.get(&alloc.id) else {
                continue;
            };
            if migrate.contains_key(&alloc.id) {
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
    ) {
        let mut stopped: BTreeSet<String> = BTreeSet::new();
        for alloc in by_name(lost) {
            self.mark_stop(
                alloc,
                Some(drover_structs::ALLOC_CLIENT_STATUS_LOST),
                STATUS_ALLOC_LOST,
            );
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
