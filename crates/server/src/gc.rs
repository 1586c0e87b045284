//! Server-side garbage collection, as Nomad's core scheduler does it: terminal evaluations
//! whose allocations are all terminal (with their allocations), jobs that are done (stopped, or
//! batch and dead, or a stopped periodic or parameterized job) whose every evaluation can go,
//! terminal deployments no live allocation refers to, then down nodes without live
//! allocations. A failed allocation the reschedule policy may still replace is kept, since its
//! replacement carries its tracker.
//!
//! Two ways in: `PUT /v1/system/gc` (`System.GarbageCollect`, a forced GC: every age
//! threshold is zero) and the leader's periodic passes ([`run`]), each on its interval and
//! each collecting only what has been unchanged longer than its threshold
//! (`job_gc_threshold`, `eval_gc_threshold`, `batch_eval_gc_threshold`,
//! `deployment_gc_threshold`, `node_gc_threshold`), aged by the objects' modify times on the
//! server's clock as Nomad does: an evaluation's and an allocation's `ModifyTime`, a job's
//! `SubmitTime`, a deployment's `ModifyTime`, a node's `StatusUpdatedAt`.
//!
//! The passes are pure over a snapshot; [`ServerInner::apply_gc`] applies one.
//!
//! Expired one-time tokens go too, in a forced GC and every 10 minutes, as Nomad's
//! `OneTimeTokenGC` core job. With ACLs on, so do expired ACL tokens (Nomad's
//! `expiredACLTokenGC`), every 5 minutes and in a forced GC: a token goes once it has expired
//! *and* was created longer ago than `acl_token_gc_threshold` (1 hour unless set; a forced GC
//! takes every expired token), at most 4096 per pass, the earliest to expire first. Nomad
//! ages the token by its `CreateTime`, not by how long ago it expired, and so does drover.
//! drover has one region, the authoritative one, so its local and global tokens both go.
//!
//! Not here: the client's collection of allocation directories (`drover_client`), and CSI and
//! key GC (drover has no CSI volumes).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use drover_state::StateSnapshot;
use drover_structs::acl::AclToken;
use drover_structs::{
    ALLOC_CLIENT_STATUS_FAILED, ALLOC_CLIENT_STATUS_RUNNING, ALLOC_DESIRED_STATUS_STOP, Allocation,
    Evaluation, JOB_STATUS_DEAD, JOB_TYPE_BATCH, Job, NODE_STATUS_DOWN, Timestamp,
};
use tokio_util::sync::CancellationToken;

use crate::{Server, ServerError, ServerInner};

/// The leader's GC schedule and age thresholds, with Nomad's defaults. The agent config sets
/// `job_gc_interval` and the thresholds; the other intervals are Nomad's fixed 5 minutes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GcConfig {
    pub job_gc_interval: Duration,
    pub job_gc_threshold: Duration,
    pub eval_gc_interval: Duration,
    pub eval_gc_threshold: Duration,
    /// Evaluations of batch jobs are kept longer (Nomad 1.4+).
    pub batch_eval_gc_threshold: Duration,
    pub deployment_gc_interval: Duration,
    pub deployment_gc_threshold: Duration,
    pub node_gc_interval: Duration,
    pub node_gc_threshold: Duration,
    /// How often expired one-time tokens are removed (Nomad's fixed 10 minutes).
    pub one_time_token_gc_interval: Duration,
    /// Whether ACLs are on (`acl { enabled = true }`): only then are expired ACL tokens
    /// collected, as Nomad's core scheduler.
    pub acl_enabled: bool,
    /// How often expired ACL tokens are looked for (Nomad's fixed
    /// `ACLTokenExpirationGCInterval`, 5 minutes).
    pub acl_token_gc_interval: Duration,
    /// How long ago an expired ACL token must have been created to be collected (Nomad's
    /// `acl_token_gc_threshold`, 1 hour).
    pub acl_token_gc_threshold: Duration,
}

impl Default for GcConfig {
    fn default() -> Self {
        const MINUTE: u64 = 60;
        const HOUR: u64 = 60 * MINUTE;
        Self {
            job_gc_interval: Duration::from_secs(5 * MINUTE),
            job_gc_threshold: Duration::from_secs(4 * HOUR),
            eval_gc_interval: Duration::from_secs(5 * MINUTE),
            eval_gc_threshold: Duration::from_secs(HOUR),
            batch_eval_gc_threshold: Duration::from_secs(24 * HOUR),
            deployment_gc_interval: Duration::from_secs(5 * MINUTE),
            deployment_gc_threshold: Duration::from_secs(HOUR),
            node_gc_interval: Duration::from_secs(5 * MINUTE),
            node_gc_threshold: Duration::from_secs(24 * HOUR),
            one_time_token_gc_interval: Duration::from_secs(10 * MINUTE),
            acl_enabled: false,
            acl_token_gc_interval: Duration::from_secs(5 * MINUTE),
            acl_token_gc_threshold: Duration::from_secs(HOUR),
        }
    }
}

/// `now` less `threshold`, in Unix nanoseconds: what changed after it is too new to collect.
fn cutoff(now_unix_nanos: i64, threshold: Duration) -> i64 {
    now_unix_nanos.saturating_sub(i64::try_from(threshold.as_nanos()).unwrap_or(i64::MAX))
}

/// What one GC pass removes.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct GcPlan {
    /// `(namespace, job ID)` of purged jobs.
    pub jobs: Vec<(String, String)>,
    pub evals: Vec<String>,
    pub allocs: Vec<String>,
    pub deployments: Vec<String>,
    pub nodes: Vec<String>,
    /// Secret IDs of expired one-time tokens.
    pub one_time_tokens: Vec<String>,
    /// Accessor IDs of expired ACL tokens.
    pub acl_tokens: Vec<String>,
}

impl GcPlan {
    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
            && self.evals.is_empty()
            && self.allocs.is_empty()
            && self.deployments.is_empty()
            && self.nodes.is_empty()
            && self.one_time_tokens.is_empty()
            && self.acl_tokens.is_empty()
    }
}

/// Nomad's `jobIsGCable`: a stopped periodic or parameterized job; otherwise a dead job that
/// was stopped or is a batch job.
fn job_collectable(job: &Job) -> bool {
    if job.is_periodic() || job.is_parameterized() {
        return job.stop;
    }
    job.status == JOB_STATUS_DEAD && (job.stop || job.r#type == JOB_TYPE_BATCH)
}

/// Nomad's `allocGCEligible` for a forced GC (every allocation old enough): terminal, not
/// running on its client, and not a failed allocation whose reschedule policy may still
/// replace it (at `now`).
pub fn alloc_collectable(alloc: &Allocation, job: Option<&Job>, now_unix_nanos: i64) -> bool {
    alloc_collectable_before(alloc, job, now_unix_nanos, now_unix_nanos)
}

/// Nomad's `allocGCEligible`: [`alloc_collectable`], and unchanged since `cutoff`.
fn alloc_collectable_before(
    alloc: &Allocation,
    job: Option<&Job>,
    now_unix_nanos: i64,
    cutoff: i64,
) -> bool {
    if !alloc.terminal_status()
        || alloc.modify_time > cutoff
        || alloc.client_status == ALLOC_CLIENT_STATUS_RUNNING
    {
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

/// Nomad's `gcEval`: whether the evaluation can go, and which of its allocations can. Both
/// must be terminal and unchanged since `cutoff`.
fn eval_collectable(
    snapshot: &StateSnapshot,
    eval: &Evaluation,
    allow_batch: bool,
    now_unix_nanos: i64,
    cutoff: i64,
) -> (bool, Vec<String>) {
    if !eval.terminal_status() || eval.modify_time > cutoff {
        return (false, Vec::new());
    }
    let job = snapshot.job(&eval.namespace, &eval.job_id);
    let allocs = snapshot.allocs_by_eval(&eval.id);
    if eval.r#type == JOB_TYPE_BATCH {
        let collect = match job.as_deref() {
            None => true,
            Some(job) => job.status == JOB_STATUS_DEAD && (job.stop || allow_batch),
        };
        if !collect {
            // A live batch job keeps its allocations, but old terminal ones of older versions
            // can go, and the evaluation with them when they were all it had.
            let older: Vec<String> = job
                .as_deref()
                .map(|job| {
                    allocs
                        .iter()
                        .filter(|alloc| {
                            alloc.create_index < job.job_modify_index
                                && alloc.modify_time < cutoff
                                && alloc.terminal_status()
                        })
                        .map(|alloc| alloc.id.clone())
                        .collect()
                })
                .unwrap_or_default();
            return (older.len() == allocs.len(), older);
        }
    }
    let mut all = true;
    let mut collectable = Vec::new();
    for alloc in &allocs {
        if alloc_collectable_before(alloc, job.as_deref(), now_unix_nanos, cutoff) {
            collectable.push(alloc.id.clone());
        } else {
            all = false;
        }
    }
    (all, collectable)
}

/// Nomad's `jobGC`: done jobs submitted before `cutoff` whose every evaluation (and its
/// allocations) can go, with them.
fn plan_jobs(snapshot: &StateSnapshot, now_unix_nanos: i64, cutoff: i64, into: &mut GcPlan) {
    for job in snapshot.jobs(None, "") {
        if !job_collectable(&job) || job.submit_time > cutoff {
            continue;
        }
        let mut job_evals = Vec::new();
        let mut job_allocs = Vec::new();
        let mut every_eval = true;
        for eval in snapshot.evals_by_job(&job.namespace, &job.id) {
            let (collect, collectable) =
                eval_collectable(snapshot, &eval, true, now_unix_nanos, cutoff);
            if !collect {
                every_eval = false;
                break;
            }
            job_evals.push(eval.id.clone());
            job_allocs.extend(collectable);
        }
        if every_eval {
            into.jobs.push((job.namespace.clone(), job.id.clone()));
            into.evals.extend(job_evals);
            into.allocs.extend(job_allocs);
        }
    }
}

/// Nomad's `evalGC`: terminal evaluations (and their allocations) unchanged since `cutoff`,
/// or since `batch_cutoff` for a batch job's; batch jobs themselves go only with `plan_jobs`.
fn plan_evals(
    snapshot: &StateSnapshot,
    now_unix_nanos: i64,
    cutoff: i64,
    batch_cutoff: i64,
    into: &mut GcPlan,
) {
    for eval in snapshot.evals("") {
        let cutoff = if eval.r#type == JOB_TYPE_BATCH {
            batch_cutoff
        } else {
            cutoff
        };
        let (collect, collectable) =
            eval_collectable(snapshot, &eval, false, now_unix_nanos, cutoff);
        if collect {
            into.evals.push(eval.id.clone());
        }
        into.allocs.extend(collectable);
    }
}

/// Nomad's `deploymentGC`: terminal deployments unchanged since `cutoff` that no live
/// allocation refers to.
fn plan_deployments(snapshot: &StateSnapshot, cutoff: i64, into: &mut GcPlan) {
    let live_deployments: BTreeSet<String> = snapshot
        .allocs("")
        .iter()
        .filter(|alloc| !alloc.deployment_id.is_empty() && !alloc.terminal_status())
        .map(|alloc| alloc.deployment_id.clone())
        .collect();
    into.deployments.extend(
        snapshot
            .deployments("")
            .iter()
            .filter(|deployment| {
                !deployment.active()
                    && deployment.modify_time <= cutoff
                    && !live_deployments.contains(&deployment.id)
            })
            .map(|deployment| deployment.id.clone()),
    );
}

/// Nomad's `nodeGC`: nodes down since before `cutoff` without live allocations.
fn plan_nodes(snapshot: &StateSnapshot, cutoff: i64, into: &mut GcPlan) {
    into.nodes.extend(
        snapshot
            .nodes("")
            .iter()
            .filter(|node| {
                node.status == NODE_STATUS_DOWN
                    && node.status_updated_at.saturating_mul(1_000_000_000) <= cutoff
            })
            .filter(|node| {
                snapshot
                    .allocs_by_node(&node.id)
                    .iter()
                    .all(|alloc| alloc.terminal_status())
            })
            .map(|node| node.id.clone()),
    );
}

/// One-time tokens whose `ExpiresAt` is before `now` (Nomad's `ExpireOneTimeTokens`).
fn plan_one_time_tokens(snapshot: &StateSnapshot, now_unix_nanos: i64, into: &mut GcPlan) {
    into.one_time_tokens.extend(
        snapshot
            .acl()
            .one_time_tokens
            .values()
            .filter(|token| {
                token
                    .expires_at
                    .unix_nanos()
                    .is_none_or(|expires| expires < now_unix_nanos)
            })
            .map(|token| token.one_time_secret_id.clone()),
    );
}

/// The most expired ACL tokens one pass removes (Nomad's `ACLMaxExpiredBatchSize`): the rest
/// wait for the next pass.
pub const ACL_MAX_EXPIRED_BATCH_SIZE: usize = 4096;

/// Nomad's `expiredACLTokenGC` over `tokens`: those with an expiration time, the earliest to
/// expire first, up to the first one not expired at `now`; of these, those created at or
/// before `cutoff`, at most [`ACL_MAX_EXPIRED_BATCH_SIZE`]. Nothing with ACLs off.
fn plan_expired_acl_tokens<'a>(
    tokens: impl IntoIterator<Item = &'a AclToken>,
    acl_enabled: bool,
    now_unix_nanos: i64,
    cutoff: i64,
    into: &mut GcPlan,
) {
    if !acl_enabled {
        return;
    }
    let mut expiring: Vec<(i64, &AclToken)> = tokens
        .into_iter()
        .filter_map(|token| {
            let expiry = token.expiration_time.and_then(Timestamp::unix_nanos)?;
            Some((expiry, token))
        })
        .collect();
    expiring.sort_by(|(left, left_token), (right, right_token)| {
        left.cmp(right)
            .then_with(|| left_token.accessor_id.cmp(&right_token.accessor_id))
    });
    into.acl_tokens.extend(
        expiring
            .into_iter()
            .take_while(|(_, token)| token.is_expired(now_unix_nanos))
            .filter(|(_, token)| {
                token
                    .create_time
                    .unix_nanos()
                    .is_none_or(|created| created <= cutoff)
            })
            .take(ACL_MAX_EXPIRED_BATCH_SIZE)
            .map(|(_, token)| token.accessor_id.clone()),
    );
}

/// Sorts and de-duplicates the IDs a plan collected from several passes.
fn settle(mut gc: GcPlan) -> GcPlan {
    for ids in [
        &mut gc.evals,
        &mut gc.allocs,
        &mut gc.deployments,
        &mut gc.nodes,
    ] {
        ids.sort();
        ids.dedup();
    }
    gc
}

/// A forced GC pass over `snapshot`, in Nomad's order: jobs, evaluations, deployments,
/// one-time and expired ACL tokens, nodes (nodes last, so allocations collected in this pass
/// no longer hold them). Every age threshold of `config` is zero here; only whether ACLs are
/// on is read from it.
pub fn plan(snapshot: &StateSnapshot, config: &GcConfig, now_unix_nanos: i64) -> GcPlan {
    let mut gc = GcPlan::default();
    plan_jobs(snapshot, now_unix_nanos, now_unix_nanos, &mut gc);
    plan_evals(
        snapshot,
        now_unix_nanos,
        now_unix_nanos,
        now_unix_nanos,
        &mut gc,
    );
    plan_deployments(snapshot, now_unix_nanos, &mut gc);
    plan_one_time_tokens(snapshot, now_unix_nanos, &mut gc);
    plan_expired_acl_tokens(
        snapshot.acl().tokens.values().map(AsRef::as_ref),
        config.acl_enabled,
        now_unix_nanos,
        now_unix_nanos,
        &mut gc,
    );
    plan_nodes(snapshot, now_unix_nanos, &mut gc);
    settle(gc)
}

/// One of the leader's periodic passes, each on its own interval as Nomad's core jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    Jobs,
    Evals,
    Deployments,
    Nodes,
    /// Expired one-time tokens (every 10 minutes, Nomad's `OneTimeTokenGCInterval`).
    OneTimeTokens,
    /// Expired ACL tokens (every 5 minutes, Nomad's `ACLTokenExpirationGCInterval`).
    ExpiredAclTokens,
}

/// One periodic pass over `snapshot` with `config`'s thresholds at `now`.
pub fn plan_pass(
    snapshot: &StateSnapshot,
    pass: Pass,
    config: &GcConfig,
    now_unix_nanos: i64,
) -> GcPlan {
    let mut gc = GcPlan::default();
    match pass {
        Pass::Jobs => plan_jobs(
            snapshot,
            now_unix_nanos,
            cutoff(now_unix_nanos, config.job_gc_threshold),
            &mut gc,
        ),
        Pass::Evals => plan_evals(
            snapshot,
            now_unix_nanos,
            cutoff(now_unix_nanos, config.eval_gc_threshold),
            cutoff(now_unix_nanos, config.batch_eval_gc_threshold),
            &mut gc,
        ),
        Pass::Deployments => plan_deployments(
            snapshot,
            cutoff(now_unix_nanos, config.deployment_gc_threshold),
            &mut gc,
        ),
        Pass::Nodes => plan_nodes(
            snapshot,
            cutoff(now_unix_nanos, config.node_gc_threshold),
            &mut gc,
        ),
        Pass::OneTimeTokens => plan_one_time_tokens(snapshot, now_unix_nanos, &mut gc),
        Pass::ExpiredAclTokens => plan_expired_acl_tokens(
            snapshot.acl().tokens.values().map(AsRef::as_ref),
            config.acl_enabled,
            now_unix_nanos,
            cutoff(now_unix_nanos, config.acl_token_gc_threshold),
            &mut gc,
        ),
    }
    settle(gc)
}

impl ServerInner {
    /// Removes what `gc` names: evaluations and allocations, then jobs (purged), deployments,
    /// then nodes that are still down. A job goes after its evaluations and allocations (as
    /// Nomad's job GC reaps them first), so no reader sees them left behind by a purged job.
    pub(crate) async fn apply_gc(&self, gc: &GcPlan) -> Result<(), ServerError> {
        if !gc.evals.is_empty() || !gc.allocs.is_empty() {
            self.state
                .delete_evals_and_allocs(gc.evals.clone(), gc.allocs.clone())
                .await?;
        }
        for (namespace, job_id) in &gc.jobs {
            self.state.delete_job(namespace, job_id).await?;
        }
        if !gc.deployments.is_empty() {
            self.state
                .delete_deployments(gc.deployments.clone())
                .await?;
        }
        for node_id in &gc.nodes {
            // A node may have come back since the snapshot; only a node still down goes.
            let still_down = self
                .state
                .node(node_id)
                .is_some_and(|node| node.status == NODE_STATUS_DOWN);
            if still_down {
                self.state.delete_node(node_id).await?;
                self.heartbeats.clear(node_id);
            }
        }
        if !gc.one_time_tokens.is_empty() {
            self.state
                .delete_one_time_tokens_by_secret(gc.one_time_tokens.clone())
                .await?;
        }
        if !gc.acl_tokens.is_empty() {
            self.state
                .delete_acl_tokens_still_stored(gc.acl_tokens.clone())
                .await?;
        }
        Ok(())
    }
}

/// The leader's periodic GC for one leadership term: each pass on its interval (the first one
/// interval after the term starts, as Nomad's tickers), until `term` ends.
pub(crate) async fn run(inner: Arc<ServerInner>, term: CancellationToken) {
    let config = inner.config.gc.clone();
    let ticker = |period: Duration| {
        let period = period.max(Duration::from_millis(1));
        let mut interval = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        interval
    };
    let mut jobs = ticker(config.job_gc_interval);
    let mut evals = ticker(config.eval_gc_interval);
    let mut deployments = ticker(config.deployment_gc_interval);
    let mut nodes = ticker(config.node_gc_interval);
    let mut one_time_tokens = ticker(config.one_time_token_gc_interval);
    let mut acl_tokens = ticker(config.acl_token_gc_interval);
    loop {
        let pass = tokio::select! {
            () = term.cancelled() => return,
            _ = jobs.tick() => Pass::Jobs,
            _ = evals.tick() => Pass::Evals,
            _ = deployments.tick() => Pass::Deployments,
            _ = nodes.tick() => Pass::Nodes,
            _ = one_time_tokens.tick() => Pass::OneTimeTokens,
            _ = acl_tokens.tick() => Pass::ExpiredAclTokens,
        };
        let now = inner.clock.now_unix_ns();
        let gc = plan_pass(&inner.state.snapshot(), pass, &config, now);
        if gc.is_empty() {
            continue;
        }
        match inner.apply_gc(&gc).await {
            Ok(()) => tracing::debug!(
                ?pass,
                jobs = gc.jobs.len(),
                evals = gc.evals.len(),
                allocs = gc.allocs.len(),
                deployments = gc.deployments.len(),
                nodes = gc.nodes.len(),
                acl_tokens = gc.acl_tokens.len(),
                "garbage collection"
            ),
            Err(error) => tracing::warn!(?pass, %error, "garbage collection failed"),
        }
    }
}

impl Server {
    /// `PUT /v1/system/gc`: a forced garbage collection of everything terminal, applied at
    /// once (Nomad queues a core evaluation that does the same). Answers what was removed.
    pub async fn garbage_collect(&self) -> Result<GcPlan, ServerError> {
        let inner = &self.inner;
        let now = inner.clock.now_unix_ns();
        let gc = plan(&inner.state.snapshot(), &inner.config.gc, now);
        inner.apply_gc(&gc).await?;
        tracing::debug!(
            jobs = gc.jobs.len(),
            evals = gc.evals.len(),
            allocs = gc.allocs.len(),
            deployments = gc.deployments.len(),
            nodes = gc.nodes.len(),
            acl_tokens = gc.acl_tokens.len(),
            "forced garbage collection"
        );
        Ok(gc)
    }

    /// `PUT /v1/system/reconcile/summaries`: every job's summary counted again from its
    /// allocations, as Nomad's `System.ReconcileJobSummaries` (see
    /// `StateStore::reconcile_job_summaries`). Answers the index of the write.
    pub async fn reconcile_job_summaries(&self) -> Result<u64, ServerError> {
        Ok(self.inner.state.reconcile_job_summaries().await?)
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

    fn expiring_token(accessor: &str, created: i64, expires: Option<i64>) -> AclToken {
        AclToken {
            accessor_id: accessor.into(),
            create_time: Timestamp::from_unix_nanos(created * SECOND),
            expiration_time: expires.map(|at| Timestamp::from_unix_nanos(at * SECOND)),
            ..AclToken::default()
        }
    }

    #[test]
    fn expired_acl_tokens_go_by_creation_age_earliest_expiry_first_at_most_a_batch() {
        let mut tokens: Vec<AclToken> = (0..ACL_MAX_EXPIRED_BATCH_SIZE + 2)
            .map(|n| {
                let n = i64::try_from(n).unwrap();
                expiring_token(&format!("old-{n:05}"), 0, Some(100 + n))
            })
            .collect();
        tokens.push(expiring_token("young", 9_000, Some(9_100)));
        tokens.push(expiring_token("not-yet", 0, Some(20_000)));
        tokens.push(expiring_token("forever", 0, None));
        let mut gc = GcPlan::default();
        // At 10 000 s with a cutoff at 5 000 s: every "old" token and "young" expired, "young"
        // was created after the cutoff.
        plan_expired_acl_tokens(&tokens, true, 10_000 * SECOND, 5_000 * SECOND, &mut gc);
        assert_eq!(gc.acl_tokens.len(), ACL_MAX_EXPIRED_BATCH_SIZE);
        assert_eq!(gc.acl_tokens.first().unwrap(), "old-00000");
        assert_eq!(
            gc.acl_tokens.last().unwrap(),
            &format!("old-{:05}", ACL_MAX_EXPIRED_BATCH_SIZE - 1)
        );
        assert!(
            !gc.acl_tokens
                .iter()
                .any(|id| ["young", "not-yet", "forever"].contains(&id.as_str()))
        );

        let mut off = GcPlan::default();
        plan_expired_acl_tokens(&tokens, false, 10_000 * SECOND, 10_000 * SECOND, &mut off);
        assert!(off.acl_tokens.is_empty(), "ACLs off: nothing");
    }

    #[tokio::test]
    async fn an_empty_store_plans_nothing() {
        let store = StateStore::in_memory().await.expect("store");
        assert_eq!(
            plan(&store.snapshot(), &GcConfig::default(), 0),
            GcPlan::default()
        );
    }
}
