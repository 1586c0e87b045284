//! Scheduler workers: take an evaluation from the broker, plan it on a fresh snapshot with the
//! pure scheduler, hand the plan to the applier, and record the outcome on the evaluation.
//!
//! A plan the applier only partly committed (the state moved under it) is planned again on a
//! fresh snapshot, a bounded number of times. The evaluation then completes with what could not
//! be placed in `FailedTGAllocs`, and a blocked evaluation is tracked to retry once capacity
//! changes.
//!
//! Not here: placement decisions (the scheduler) or the only writer of allocations (the plan
//! applier).

use std::sync::Arc;

use drover_scheduler::{Plan, SchedulerOptions};
use drover_structs::{EVAL_STATUS_BLOCKED, EVAL_STATUS_CANCELLED, EVAL_STATUS_FAILED, Evaluation};
use rand::Rng;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::broker::NackOutcome;
use crate::plan_apply::{Commit, PlanRequest, PlanResult};
use crate::snapshot::SnapshotView;
use crate::{ServerError, ServerInner};

/// How often a plan is redone when the applier refused part of it.
const MAX_PLAN_ATTEMPTS: usize = 5;

pub(crate) async fn run(server: Arc<ServerInner>, shutdown: CancellationToken) {
    loop {
        let (eval, token) = tokio::select! {
            () = shutdown.cancelled() => return,
            next = server.broker.dequeue() => next,
        };
        let eval_id = eval.id.clone();
        // An evaluation cancelled while it waited (a `lost_after` follow-up whose allocations
        // reconnected) has nothing left to do.
        let cancelled = server
            .state
            .eval(&eval_id)
            .is_some_and(|stored| stored.status == EVAL_STATUS_CANCELLED);
        if cancelled {
            if let Ok(outcome) = server.broker.ack(&eval_id, token) {
                server.cancel_superseded(outcome.superseded).await;
            }
            continue;
        }
        match process(&server, eval).await {
            Ok(()) => {
                if let Ok(outcome) = server.broker.ack(&eval_id, token) {
                    server.cancel_superseded(outcome.superseded).await;
                }
            }
            Err(error) => {
                // Nomad's nack delays: an evaluation that failed (the store did not answer, the
                // leadership moved) is handed out again only after a while, so a short outage
                // does not use up its deliveries at once and leave it failed for good.
                let delay = nack_delay(server.broker.deliveries(&eval_id));
                tracing::warn!(eval_id, %error, ?delay, "evaluation failed; will retry");
                let (server, shutdown) = (server.clone(), shutdown.clone());
                tokio::spawn(async move {
                    tokio::select! {
                        () = shutdown.cancelled() => {}
                        () = tokio::time::sleep(delay) => {
                            nack(&server, &eval_id, token, &error).await;
                        }
                    }
                });
            }
        }
    }
}

/// Nomad's `EvalNackInitialReenqueueDelay`: the wait before a first failed delivery is retried.
pub(crate) const NACK_FIRST_DELAY: std::time::Duration = std::time::Duration::from_secs(1);
/// Nomad's `EvalNackSubsequentReenqueueDelay`: the wait before a later one is.
pub(crate) const NACK_LATER_DELAY: std::time::Duration = std::time::Duration::from_secs(20);

/// The wait before a failed evaluation, handed out `deliveries` times, is returned.
fn nack_delay(deliveries: u32) -> std::time::Duration {
    if deliveries <= 1 {
        NACK_FIRST_DELAY
    } else {
        NACK_LATER_DELAY
    }
}

/// Returns a failed evaluation to the broker; past its delivery limit it is recorded failed.
async fn nack(
    server: &Arc<ServerInner>,
    eval_id: &str,
    token: crate::broker::DeliveryToken,
    error: &ServerError,
) {
    match server.broker.nack(eval_id, token) {
        Ok(NackOutcome::DeliveryLimitReached { failed, superseded }) => {
            let mut failed = *failed;
            failed.status = EVAL_STATUS_FAILED.to_owned();
            failed.status_description = format!("evaluation reached its delivery limit: {error}");
            if let Err(error) = server.store_evals(vec![failed]).await {
                tracing::error!(eval_id, %error, "could not record the failed evaluation");
            }
            server.cancel_superseded(superseded).await;
        }
        Ok(NackOutcome::Requeued) => {}
        Err(error) => tracing::error!(eval_id, %error, "nack refused"),
    }
}

/// Plans one evaluation to completion.
async fn process(server: &Arc<ServerInner>, mut eval: Evaluation) -> Result<(), ServerError> {
    let mut last_plan = None;
    // Follow-up evaluations already written; all of them are handed to the broker at the end,
    // a replanned attempt's included, so none is left pending with nothing to run it.
    let mut follow_ups = Vec::new();
    for _attempt in 0..MAX_PLAN_ATTEMPTS {
        let snapshot = server.state.snapshot();
        let snapshot_index = snapshot.latest_index();
        let options = SchedulerOptions {
            seed: rand::thread_rng().r#gen(),
            now_unix_nanos: server.clock.now_unix_ns(),
            scoring: server.config.scoring,
            deployments: true,
        };
        let mut ids = || uuid::Uuid::new_v4().to_string();
        let view = SnapshotView(snapshot);
        let plan = match drover_scheduler::schedule(&view, &eval, &options, &mut ids) {
            Ok(plan) => plan,
            Err(error) => {
                // The scheduler refused the evaluation for good (an unsupported job type, a
                // malformed job): record why instead of retrying.
                eval.status = EVAL_STATUS_FAILED.to_owned();
                eval.status_description = error.to_string();
                eval.snapshot_index = snapshot_index;
                server.store_evals(vec![eval]).await?;
                return Ok(());
            }
        };
        eval.snapshot_index = snapshot_index;
        // As Nomad does, the delayed follow-up evaluations exist before the plan that names
        // them in its allocations' FollowupEvalID commits: a reader never finds an allocation
        // pointing at an evaluation that is not there yet.
        if !plan.follow_up_evals.is_empty() {
            server.store_evals(plan.follow_up_evals.clone()).await?;
            follow_ups.extend(plan.follow_up_evals.iter().map(|eval| eval.id.clone()));
        }
        // A plan that only changes a deployment (marks it successful) still commits.
        let result =
            if plan.is_no_op() && plan.deployment.is_none() && plan.deployment_updates.is_empty() {
                PlanResult {
                    index: server.state.latest_index(),
                    rejected_nodes: Vec::new(),
                }
            } else {
                submit(server, plan.clone()).await?
            };
        let done = result.fully_committed();
        last_plan = Some(plan);
        if done {
            break;
        }
        tracing::debug!(eval_id = %eval.id, rejected = ?result.rejected_nodes, "plan partly refused; replanning");
    }
    let Some(plan) = last_plan else {
        return Err(ServerError::Internal("no plan was made".into()));
    };
    complete(server, eval, plan, &follow_ups).await
}

async fn submit(server: &ServerInner, plan: Plan) -> Result<PlanResult, ServerError> {
    let (reply, response) = oneshot::channel();
    server
        .plans
        .send(PlanRequest {
            commit: Commit::Plan(Box::new(plan)),
            reply,
        })
        .await
        .map_err(|_| ServerError::Internal("the plan applier has stopped".into()))?;
    response
        .await
        .map_err(|_| ServerError::Internal("the plan applier dropped the plan".into()))?
}

/// Records the outcome of the final plan on the evaluation, creates the blocked evaluation it
/// asks for (for failed placements) and hands the follow-up evaluations stored before the plan
/// (`follow_ups`, delayed reschedules) to the broker. A blocked evaluation that still cannot
/// place stays blocked and is parked again.
async fn complete(
    server: &Arc<ServerInner>,
    eval: Evaluation,
    plan: Plan,
    follow_ups: &[String],
) -> Result<(), ServerError> {
    let now = server.clock.now_unix_ns();
    let finished = plan.finished_eval(&eval, now);
    let blocked = plan.blocked_eval.clone().map(|mut blocked| {
        blocked.status = EVAL_STATUS_BLOCKED.to_owned();
        if blocked.previous_eval.is_empty() {
            blocked.previous_eval = eval.id.clone();
        }
        if blocked.create_time == 0 {
            blocked.create_time = now;
        }
        blocked
    });
    let mut writes = vec![finished.clone()];
    writes.extend(blocked.iter().cloned());
    server.store_evals(writes).await?;

    let stored = |fallback: Evaluation| {
        server
            .state
            .eval(&fallback.id)
            .map(|eval| (*eval).clone())
            .unwrap_or(fallback)
    };
    let mut parked = Vec::new();
    if finished.status == EVAL_STATUS_BLOCKED {
        parked.push(stored(finished.clone()));
    }
    if let Some(blocked) = blocked {
        parked.push(stored(blocked));
    }
    for eval in parked {
        if let Some(superseded) = server.blocked.block(eval) {
            server.cancel_superseded(vec![superseded]).await;
        }
    }
    server.enqueue_stored(follow_ups);
    Ok(())
}
