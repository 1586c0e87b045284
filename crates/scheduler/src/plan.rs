//! What a scheduling pass produces: the [`Plan`] the server's plan applier commits, and the
//! options a pass takes.
//!
//! Not here: applying the plan (the server) or deciding its contents (`generic`).

use std::collections::BTreeMap;

use drover_structs::{
    AllocMetric, Allocation, Deployment, DeploymentStatusUpdate, Evaluation, Job,
};
use serde::{Deserialize, Serialize};

/// How nodes are ranked among those that fit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ScoringAlgorithm {
    /// Prefer fuller nodes (Nomad's default `binpack`): fewer nodes run more work.
    #[default]
    Binpack,
    /// Prefer emptier nodes (`spread`): load is spread across the cluster.
    Spread,
}

impl ScoringAlgorithm {
    /// From Nomad's scheduler configuration names: `binpack` or `spread`.
    pub fn from_nomad_name(name: &str) -> Option<ScoringAlgorithm> {
        match name {
            "binpack" => Some(ScoringAlgorithm::Binpack),
            "spread" => Some(ScoringAlgorithm::Spread),
            _ => None,
        }
    }
}

/// The inputs of a pass besides the snapshot and the evaluation. Everything that would otherwise
/// come from a clock or a random generator is here, so a pass can be replayed exactly.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SchedulerOptions {
    /// Seeds the shuffle of candidate nodes.
    pub seed: u64,
    /// "Now" in Unix nanoseconds: creation times, reschedule delays.
    pub now_unix_nanos: i64,
    pub scoring: ScoringAlgorithm,
    /// Whether groups with an update strategy (`max_parallel > 0`) roll out through
    /// deployments. Off, every change is applied at once; the server keeps it off until it
    /// commits and watches deployments.
    pub deployments: bool,
}

/// Per task group, what the pass decided (Nomad's `DesiredUpdates`, shown by `job plan`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct DesiredUpdates {
    pub ignore: u64,
    pub place: u64,
    pub migrate: u64,
    pub stop: u64,
    pub in_place_update: u64,
    pub destructive_update: u64,
    pub canary: u64,
    pub preemptions: u64,
    pub disconnect: u64,
    pub reconnect: u64,
    pub reschedule_now: u64,
    pub reschedule_later: u64,
}

/// Annotations attached to a plan (`job plan` prints them).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct PlanAnnotations {
    #[serde(rename = "DesiredTGUpdates")]
    pub desired_tg_updates: BTreeMap<String, DesiredUpdates>,
    pub preempted_allocs: Option<Vec<Allocation>>,
}

/// The outcome of one pass over one evaluation.
///
/// The applier commits `node_update` (allocations to stop, as full copies with `DesiredStatus`
/// `stop`, their `DesiredDescription`, and `ClientStatus` `lost` where the node is gone) and
/// `node_allocation` (new allocations, in-place updates of existing ones — same ID, new job —
/// and attribute updates such as a `FollowupEvalID`). Every allocation carries its `Job`.
///
/// After committing, the server stores [`Plan::finished_eval`] (the evaluation completed with
/// `failed_tg_allocs`, `queued_allocations`, `BlockedEval` and `NextEval`) and, when
/// `blocked_eval` is set, that evaluation (status `blocked`). `follow_up_evals` are
/// delayed evaluations (their `WaitUntil` set) for allocations that will be rescheduled later;
/// the first one's ID is the evaluation's `NextEval`. When the evaluation was itself a blocked
/// one and placements still failed, no new blocked evaluation is made: the server re-blocks
/// the same evaluation (Nomad's `ReblockEval`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    #[doc = "The evaluation this plan answers."]
    pub eval_id: String,
    pub priority: i64,
    /// The job the plan was made for (`None` when it was purged).
    pub job: Option<Job>,
    /// Node ID → allocations to stop on it.
    pub node_update: BTreeMap<String, Vec<Allocation>>,
    /// Node ID → allocations to create or update on it.
    pub node_allocation: BTreeMap<String, Vec<Allocation>>,
    pub annotations: PlanAnnotations,
    /// Task group → why it could not be placed (the evaluation's `FailedTGAllocs`).
    pub failed_tg_allocs: BTreeMap<String, AllocMetric>,
    /// Task group → allocations still waiting to be placed once this plan commits.
    pub queued_allocations: BTreeMap<String, i64>,
    /// A blocked evaluation to create, because some placements failed.
    pub blocked_eval: Option<Evaluation>,
    /// Evaluations to create that will reschedule failed allocations after a delay.
    pub follow_up_evals: Vec<Evaluation>,
    /// A deployment to create or update (new canaries wanted), committed with the plan.
    pub deployment: Option<Deployment>,
    /// Status changes of deployments (cancelled, successful), committed with the plan.
    pub deployment_updates: Vec<DeploymentStatusUpdate>,
    /// The job's latest deployment once the plan commits (created or existing, whatever its
    /// status), recorded as the evaluation's `DeploymentID` as Nomad's `setStatus` does.
    pub deployment_id: String,
}

impl Plan {
    /// Whether the plan changes nothing (no stops, no placements, no updates).
    pub fn is_no_op(&self) -> bool {
        self.node_update.values().all(Vec::is_empty)
            && self.node_allocation.values().all(Vec::is_empty)
    }

    /// The evaluation as it should be stored once this plan committed (Nomad's `setStatus`):
    /// `complete` with the failed and queued placements, its blocked and next evaluations, and
    /// the modify time — or, for a blocked evaluation whose placements still fail, `blocked`
    /// again so the server parks it until capacity changes.
    pub fn finished_eval(&self, eval: &Evaluation, now_unix_nanos: i64) -> Evaluation {
        let mut finished = eval.clone();
        let still_blocked =
            eval.status == drover_structs::EVAL_STATUS_BLOCKED && !self.failed_tg_allocs.is_empty();
        finished.status = if still_blocked {
            drover_structs::EVAL_STATUS_BLOCKED.to_string()
        } else {
            drover_structs::EVAL_STATUS_COMPLETE.to_string()
        };
        finished.failed_tg_allocs = self.failed_tg_allocs.clone();
        finished.queued_allocations = self.queued_allocations.clone();
        if let Some(blocked) = self.blocked_eval.as_ref() {
            finished.blocked_eval = blocked.id.clone();
        }
        if let Some(next) = self.follow_up_evals.first() {
            finished.next_eval = next.id.clone();
        }
        if !self.deployment_id.is_empty() {
            finished.deployment_id.clone_from(&self.deployment_id);
        }
        finished.modify_time = now_unix_nanos;
        finished
    }

    /// Every allocation the plan creates or updates.
    pub fn allocations(&self) -> impl Iterator<Item = &Allocation> {
        self.node_allocation.values().flatten()
    }

    /// Every allocation the plan stops.
    pub fn stops(&self) -> impl Iterator<Item = &Allocation> {
        self.node_update.values().flatten()
    }

    pub(crate) fn append_alloc(&mut self, alloc: Allocation) {
        self.node_allocation
            .entry(alloc.node_id.clone())
            .or_default()
            .push(alloc);
    }

    pub(crate) fn append_stop(&mut self, alloc: Allocation) {
        self.node_update
            .entry(alloc.node_id.clone())
            .or_default()
            .push(alloc);
    }

    /// Removes a stop of this allocation (when the placement that needed it failed).
    pub(crate) fn pop_stop(&mut self, node_id: &str, alloc_id: &str) -> Option<Allocation> {
        let stops = self.node_update.get_mut(node_id)?;
        let position = stops.iter().rposition(|alloc| alloc.id == alloc_id)?;
        let removed = stops.remove(position);
        if stops.is_empty() {
            self.node_update.remove(node_id);
        }
        Some(removed)
    }

    /// The update of this allocation the plan makes, if it has one.
    pub(crate) fn alloc_mut(&mut self, node_id: &str, alloc_id: &str) -> Option<&mut Allocation> {
        self.node_allocation
            .get_mut(node_id)?
            .iter_mut()
            .find(|alloc| alloc.id == alloc_id)
    }

    /// The stop of this allocation, if the plan has one.
    pub(crate) fn stop_mut(&mut self, node_id: &str, alloc_id: &str) -> Option<&mut Allocation> {
        self.node_update
            .get_mut(node_id)?
            .iter_mut()
            .find(|alloc| alloc.id == alloc_id)
    }
}
