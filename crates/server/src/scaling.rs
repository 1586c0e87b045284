//! Job scaling as Nomad's `Job.Scale` does it: a request names a group and a new count (or
//! only reports an event), the count is held within the group's `scaling` policy, refused
//! while a deployment of the job runs, registered as the job's next version with an
//! evaluation, and recorded as a scaling event. Also the policy IDs a registration gives
//! (`propagateScalingPolicyIDs`).
//!
//! Not here: where events and policies are kept (the state store) or the HTTP answer shapes.

use drover_state::Change;
use drover_structs::{
    EVAL_TRIGGER_JOB_SCALING, Job, JobRegisterResponse, SCALING_TARGET_GROUP, SCALING_TARGET_JOB,
    SCALING_TARGET_NAMESPACE, ScalingEvent, ScalingRequest,
};
use serde_json::{Map, Value};

use crate::error::ServerError;
use crate::{Server, new_id};

/// Gives every group policy of `job` the ID of the policy with the same type and group in
/// `existing`, or a new one (IDs sent with the job are not kept, as in Nomad).
pub(crate) fn assign_policy_ids(existing: Option<&Job>, job: &mut Job) {
    let existing_ids: Vec<((String, String, String), String)> = existing
        .into_iter()
        .flat_map(|existing| existing.task_groups.iter())
        .filter_map(|group| group.scaling.as_ref())
        .map(|policy| (policy.job_key(), policy.id.clone()))
        .collect();
    for group in &mut job.task_groups {
        let Some(policy) = &mut group.scaling else {
            continue;
        };
        policy
            .target
            .insert(SCALING_TARGET_GROUP.to_owned(), group.name.clone());
        let key = policy.job_key();
        policy.id = existing_ids
            .iter()
            .find(|(existing_key, _)| *existing_key == key)
            .map_or_else(new_id, |(_, id)| id.clone());
    }
}

/// Nomad's checks of a scale request before the job is read (`JobScaleRequest.Validate`).
fn validate_request(
    namespace: &str,
    job_id: &str,
    request: &ScalingRequest,
) -> Result<(), ServerError> {
    let target = |key: &str| request.target.get(key).map_or("", String::as_str);
    if !target(SCALING_TARGET_NAMESPACE).is_empty() && target(SCALING_TARGET_NAMESPACE) != namespace
    {
        return Err(ServerError::BadRequest(
            "namespace in payload did not match header".into(),
        ));
    }
    if !target(SCALING_TARGET_JOB).is_empty() && target(SCALING_TARGET_JOB) != job_id {
        return Err(ServerError::BadRequest(
            "job ID in payload did not match URL".into(),
        ));
    }
    if target(SCALING_TARGET_GROUP).is_empty() {
        return Err(ServerError::BadRequest(
            "missing task group name for scaling action".into(),
        ));
    }
    if let Some(count) = request.count {
        if count < 0 {
            return Err(ServerError::BadRequest(
                "scaling action count can't be negative".into(),
            ));
        }
        if request.error {
            return Err(ServerError::BadRequest(
                "scaling action should not contain count if error is true".into(),
            ));
        }
        if i32::try_from(count).is_err() {
            return Err(ServerError::BadRequest(format!(
                "new scaling count is too large for TaskGroup.Count (int): {count}"
            )));
        }
    }
    Ok(())
}

impl Server {
    /// `PUT|POST /v1/job/<id>/scale`: see the module docs. Answers the evaluation (none for a
    /// periodic or parameterized job, or without a count), the job's modify index and the
    /// index of the event's write.
    pub async fn scale_job(
        &self,
        namespace: &str,
        job_id: &str,
        request: ScalingRequest,
    ) -> Result<JobRegisterResponse, ServerError> {
        validate_request(namespace, job_id, &request)?;
        let state = &self.inner.state;
        let Some(current) = state.job(namespace, job_id) else {
            return Err(ServerError::NotFound(format!("job {job_id:?} not found")));
        };
        let group_name = request
            .target
            .get(SCALING_TARGET_GROUP)
            .cloned()
            .unwrap_or_default();
        let Some(group) = current
            .task_groups
            .iter()
            .find(|group| group.name == group_name)
        else {
            return Err(ServerError::BadRequest(format!(
                "task group {group_name:?} specified for scaling does not exist in job"
            )));
        };
        let now = self.inner.clock.now_unix_ns();
        let previous_count = group.count;
        let mut event = ScalingEvent {
            time: now,
            count: request.count,
            previous_count,
            message: request.message.clone(),
            error: request.error,
            meta: request.meta.clone(),
            ..ScalingEvent::default()
        };
        let mut response = JobRegisterResponse::default();
        if let Some(count) = request.count {
            if let Some(policy) = &group.scaling {
                let min = policy.min.unwrap_or(0);
                let max = policy.max.unwrap_or(-1);
                if count < min {
                    return Err(ServerError::BadRequest(format!(
                        "group count was less than scaling policy minimum: {count} < {min}"
                    )));
                }
                if max < count {
                    return Err(ServerError::BadRequest(format!(
                        "group count was greater than scaling policy maximum: {count} > {max}"
                    )));
                }
            }
            // Nomad's `job_max_count`: the job's total count after the scale.
            let max_count = self.inner.config.job_max_count;
            let total: i64 = current
                .task_groups
                .iter()
                .map(|other| other.count)
                .sum::<i64>()
                - group.count
                + count;
            if max_count > 0 && total > max_count {
                return Err(ServerError::BadRequest(format!(
                    "total count was greater than configured job_max_count: {total} > {max_count}"
                )));
            }
            let deployment =
                state
                    .snapshot()
                    .latest_deployment_of_job(namespace, job_id, current.create_index);
            if deployment.is_some_and(|deployment| deployment.active()) {
                let message = "job scaling blocked due to active deployment";
                let mut meta = Map::new();
                meta.insert(
                    "OriginalMessage".into(),
                    Value::String(request.message.clone()),
                );
                meta.insert("OriginalCount".into(), Value::from(count));
                meta.insert(
                    "OriginalMeta".into(),
                    request.meta.clone().map_or(Value::Null, Value::Object),
                );
                let blocked = ScalingEvent {
                    time: now,
                    previous_count,
                    message: message.into(),
                    error: true,
                    meta: Some(meta),
                    ..ScalingEvent::default()
                };
                // Best effort, as in Nomad: the refusal is the answer either way.
                if let Err(error) = state
                    .upsert_scaling_event(namespace, job_id, &group_name, blocked)
                    .await
                {
                    tracing::warn!(%error, job_id, "recording a blocked scaling event failed");
                }
                return Err(ServerError::BadRequest(message.into()));
            }

            let mut job = Job::clone(&current);
            if let Some(group) = job
                .task_groups
                .iter_mut()
                .find(|group| group.name == group_name)
            {
                group.count = count;
            }
            let launchable = !(job.is_periodic() || job.is_parameterized());
            let evals = if launchable {
                vec![self.inner.new_eval(&job, EVAL_TRIGGER_JOB_SCALING, 0)]
            } else {
                Vec::new()
            };
            let eval_id = evals.first().map(|eval| eval.id.clone());
            event.eval_id.clone_from(&eval_id);
            // The job's new count, its evaluation and the scaling event commit in one write:
            // a leader that dies after it leaves the scale evaluated and its event recorded,
            // never a scaled job without either.
            let written = state
                .write_together(
                    vec![
                        Change::Job {
                            job: Box::new(job),
                            submission: None,
                        },
                        Change::Evals(evals),
                        Change::ScalingEvent {
                            namespace: namespace.to_owned(),
                            job_id: job_id.to_owned(),
                            group: group_name.clone(),
                            event: Box::new(event),
                        },
                    ],
                    now,
                )
                .await?;
            let registration =
                written.jobs.into_iter().next().ok_or_else(|| {
                    ServerError::Internal("the scale's write answered no job".into())
                })?;
            response.job_modify_index = registration.job_modify_index;
            response.index = written.index;
            if !launchable {
                self.inner.periodic.add(registration.job.clone(), now);
            }
            if let Some(eval_id) = eval_id {
                if let Some(stored) = state.eval(&eval_id) {
                    self.inner.enqueue_when_due((*stored).clone());
                }
                response.eval_create_index = written.index;
                response.eval_id = eval_id;
            }
            return Ok(response);
        }
        response.job_modify_index = current.job_modify_index;
        response.index = state
            .upsert_scaling_event(namespace, job_id, &group_name, event)
            .await?;
        Ok(response)
    }
}
