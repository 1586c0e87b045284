//! Children of template jobs: periodic launches (scheduled, forced, and caught up at start) and
//! parameterized dispatch. A child is registered together with its evaluation in one write, so
//! it is never stored without the evaluation that schedules it.
//!
//! Dispatch follows Nomad: the payload (at most 16 KiB) is checked against the job's
//! `payload = required|optional|forbidden`, the metadata against `meta_required` and
//! `meta_optional`; the child `<job>/dispatch-[<prefix>-]<unix seconds>-<8 hex>` carries the
//! merged meta and the payload snappy-compressed (raw block format), which the client's
//! dispatch payload hook decompresses into the task's `local/`. A dispatch with an idempotency
//! token that an existing child of the job carries answers that child and creates nothing.
//!
//! Not here: the launch loop and the tracked schedules (`periodic`).

use std::sync::Arc;

use drover_structs::{
    DISPATCH_LAUNCH_SUFFIX, DISPATCH_PAYLOAD_FORBIDDEN, DISPATCH_PAYLOAD_REQUIRED,
    DISPATCH_PAYLOAD_SIZE_LIMIT, EVAL_TRIGGER_JOB_REGISTER, EVAL_TRIGGER_PERIODIC_JOB, Job,
    JobDispatchRequest, JobDispatchResponse, JobRegisterResponse, PERIODIC_LAUNCH_SUFFIX,
};
use tokio_util::sync::CancellationToken;

use crate::periodic::{self, derive_child};
use crate::{Server, ServerError, ServerInner, new_id};

const NANOS_PER_SECOND: i64 = 1_000_000_000;

impl Server {
    /// Launches a child of a periodic job now (`POST /v1/job/:id/periodic/force`).
    pub async fn force_periodic(
        &self,
        namespace: &str,
        job_id: &str,
    ) -> Result<JobRegisterResponse, ServerError> {
        let Some(job) = self.inner.state.job(namespace, job_id) else {
            return Err(ServerError::NotFound("job not found".into()));
        };
        if !job.is_periodic() {
            return Err(ServerError::BadRequest(
                "can't force launch non-periodic job".into(),
            ));
        }
        let Some(tracked) = self.inner.periodic.get(&job.namespace, &job.id) else {
            return Err(ServerError::BadRequest(format!(
                "force launch for job {:?} failed: can't force run non-tracked job {:?} ({})",
                job.id, job.id, job.namespace
            )));
        };
        let now = self.inner.clock.now_unix_ns().div_euclid(NANOS_PER_SECOND);
        let (eval_id, index) = self
            .inner
            .launch_periodic_child(&tracked.job, now, true)
            .await?
            .ok_or_else(|| {
                ServerError::BadRequest(format!(
                    "force launch for job {:?} failed: a child launched at {now} exists",
                    job.id
                ))
            })?;
        Ok(JobRegisterResponse {
            eval_id,
            eval_create_index: index,
            index,
            ..JobRegisterResponse::default()
        })
    }

    /// Dispatches a parameterized job (`POST /v1/job/:id/dispatch`).
    pub async fn dispatch_job(
        &self,
        namespace: &str,
        job_id: &str,
        request: JobDispatchRequest,
        idempotency_token: &str,
    ) -> Result<JobDispatchResponse, ServerError> {
        if job_id.is_empty() {
            return Err(ServerError::BadRequest(
                "missing parameterized job ID".into(),
            ));
        }
        let Some(parent) = self.inner.state.job(namespace, job_id) else {
            return Err(ServerError::NotFound("parameterized job not found".into()));
        };
        if !parent.is_parameterized() {
            return Err(ServerError::BadRequest(format!(
                "Specified job {job_id:?} is not a parameterized job"
            )));
        }
        if parent.stop {
            return Err(ServerError::BadRequest(format!(
                "Specified job {job_id:?} is stopped"
            )));
        }
        check_dispatch(&parent, &request)?;

        if !idempotency_token.is_empty() {
            let prefix = format!("{}{DISPATCH_LAUNCH_SUFFIX}", parent.id);
            let existing = self
                .inner
                .state
                .jobs(Some(&parent.namespace), &prefix)
                .into_iter()
                .find(|child| {
                    child.parent_id == parent.id
                        && child.dispatch_idempotency_token == idempotency_token
                });
            if let Some(existing) = existing {
                return Ok(JobDispatchResponse {
                    dispatched_job_id: existing.id.clone(),
                    job_create_index: existing.create_index,
                    index: existing.modify_index,
                    ..JobDispatchResponse::default()
                });
            }
        }

        let now = self.inner.clock.now_unix_ns();
        let mut child = Job::clone(&parent);
        let unique = new_id();
        let unique = unique.get(..8).unwrap_or(&unique);
        let seconds = now.div_euclid(NANOS_PER_SECOND);
        child.id = if request.id_prefix_template.is_empty() {
            format!("{}{DISPATCH_LAUNCH_SUFFIX}{seconds}-{unique}", parent.id)
        } else {
            format!(
                "{}{DISPATCH_LAUNCH_SUFFIX}{}-{seconds}-{unique}",
                parent.id, request.id_prefix_template
            )
        };
        child.name.clone_from(&child.id);
        child.parent_id.clone_from(&parent.id);
        child.dispatched = true;
        child.dispatch_idempotency_token = idempotency_token.to_owned();
        child.status.clear();
        child.status_description.clear();
        child.version = 0;
        child.create_index = 0;
        child.modify_index = 0;
        child.job_modify_index = 0;
        child.meta.extend(request.meta);
        child.payload = drover_structs::Bytes(
            snap::raw::Encoder::new()
                .compress_vec(&request.payload.0)
                .map_err(|error| {
                    ServerError::Internal(format!("could not compress the payload: {error}"))
                })?,
        );

        // A dispatched child of a periodic parameterized job is a periodic job itself: the
        // periodic dispatcher launches it, no evaluation schedules it.
        if child.is_periodic() {
            let registration = self.inner.state.upsert_job(child, now).await?;
            self.inner.periodic.add(registration.job.clone(), now);
            return Ok(JobDispatchResponse {
                dispatched_job_id: registration.job.id.clone(),
                job_create_index: registration.job.create_index,
                index: registration.job_modify_index,
                ..JobDispatchResponse::default()
            });
        }
        let eval = self.inner.new_eval(&child, EVAL_TRIGGER_JOB_REGISTER, 0);
        let eval_id = eval.id.clone();
        let (registration, index) = self
            .inner
            .state
            .upsert_job_with_evals(child, vec![eval], now)
            .await?;
        if let Some(stored) = self.inner.state.eval(&eval_id) {
            self.inner.enqueue_when_due((*stored).clone());
        }
        Ok(JobDispatchResponse {
            dispatched_job_id: registration.job.id.clone(),
            eval_id,
            eval_create_index: index,
            job_create_index: registration.job.create_index,
            index,
        })
    }
}

/// Nomad's checks of a dispatch against its parameterized job; each error names the problem.
fn check_dispatch(parent: &Job, request: &JobDispatchRequest) -> Result<(), ServerError> {
    let Some(config) = parent.parameterized_job.as_ref() else {
        return Ok(());
    };
    let has_payload = !request.payload.0.is_empty();
    if config.payload == DISPATCH_PAYLOAD_REQUIRED && !has_payload {
        return Err(ServerError::BadRequest(
            "Payload is not provided but required by parameterized job".into(),
        ));
    }
    if config.payload == DISPATCH_PAYLOAD_FORBIDDEN && has_payload {
        return Err(ServerError::BadRequest(
            "Payload provided but forbidden by parameterized job".into(),
        ));
    }
    let size = request.payload.0.len();
    if size > DISPATCH_PAYLOAD_SIZE_LIMIT {
        return Err(ServerError::BadRequest(format!(
            "Payload exceeds maximum size; {size} > {DISPATCH_PAYLOAD_SIZE_LIMIT}"
        )));
    }
    let allowed =
        |key: &String| config.meta_required.contains(key) || config.meta_optional.contains(key);
    let unpermitted: Vec<&str> = request
        .meta
        .keys()
        .filter(|key| !allowed(key))
        .map(String::as_str)
        .collect();
    if !unpermitted.is_empty() {
        return Err(ServerError::BadRequest(format!(
            "Dispatch request included unpermitted metadata keys: [{}]",
            unpermitted.join(" ")
        )));
    }
    let missing: Vec<&str> = config
        .meta_required
        .iter()
        .filter(|key| !request.meta.contains_key(*key))
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        return Err(ServerError::BadRequest(format!(
            "Dispatch did not provide required meta keys: [{}]",
            missing.join(" ")
        )));
    }
    Ok(())
}

impl ServerInner {
    /// Tracks every active periodic job, launches once those whose launch fell due while no
    /// server ran (Nomad's leader restore), then runs the launch loop.
    pub(crate) async fn restore_periodic(self: Arc<Self>, shutdown: CancellationToken) {
        let now = self.clock.now_unix_ns();
        for job in self.state.snapshot().jobs(None, "") {
            if !job.is_periodic_active() {
                continue;
            }
            self.periodic.add(job.clone(), now);
            let Some(tracked) = self.periodic.get(&job.namespace, &job.id) else {
                continue;
            };
            let Some(last) = self
                .state
                .periodic_launch(&job.namespace, &job.id)
                .and_then(|launch| launch.launch.unix_nanos())
            else {
                continue;
            };
            let missed = tracked
                .schedule
                .next_after(last)
                .is_some_and(|next| next.saturating_mul(NANOS_PER_SECOND) < now);
            if missed {
                let launch = now.div_euclid(NANOS_PER_SECOND);
                match self.launch_periodic_child(&job, launch, false).await {
                    Ok(_) => tracing::debug!(job_id = job.id, "periodic job caught up at start"),
                    Err(error) => {
                        tracing::error!(job_id = job.id, %error, "force run of periodic job failed");
                    }
                }
            }
        }
        periodic::run(self, shutdown).await;
    }

    /// Registers the child of `parent` launched at `launch` (Unix seconds) with its evaluation.
    /// Returns the evaluation's ID and the index of the write, or `None` when that child
    /// exists already (a launch is never made twice); when `force`d, an existing child gets a
    /// new evaluation instead.
    pub(crate) async fn launch_periodic_child(
        &self,
        parent: &Job,
        launch: i64,
        force: bool,
    ) -> Result<Option<(String, u64)>, ServerError> {
        let child = derive_child(parent, launch);
        if let Some(existing) = self.state.job(&child.namespace, &child.id) {
            if !force {
                return Ok(None);
            }
            // Forced twice within one second: the child exists, so it is evaluated again.
            let eval = self.new_eval(
                &existing,
                EVAL_TRIGGER_PERIODIC_JOB,
                existing.job_modify_index,
            );
            let eval_id = eval.id.clone();
            let index = self.store_and_enqueue(vec![eval]).await?;
            return Ok(Some((eval_id, index)));
        }
        let eval = self.new_eval(&child, EVAL_TRIGGER_PERIODIC_JOB, 0);
        let eval_id = eval.id.clone();
        let now = self.clock.now_unix_ns();
        let (_, index) = self
            .state
            .upsert_job_with_evals(child, vec![eval], now)
            .await?;
        if let Some(stored) = self.state.eval(&eval_id) {
            self.enqueue_when_due((*stored).clone());
        }
        tracing::debug!(job_id = parent.id, launch, "launched periodic job");
        Ok(Some((eval_id, index)))
    }

    /// Whether a periodic child of `parent` has a non-terminal evaluation or allocation.
    pub(crate) fn running_children(&self, parent: &Job) -> bool {
        let snapshot = self.state.snapshot();
        let prefix = format!("{}{PERIODIC_LAUNCH_SUFFIX}", parent.id);
        snapshot
            .jobs(Some(&parent.namespace), &prefix)
            .into_iter()
            .filter(|child| child.parent_id == parent.id)
            .any(|child| {
                snapshot
                    .evals_by_job(&child.namespace, &child.id)
                    .iter()
                    .any(|eval| !eval.terminal_status())
                    || snapshot
                        .allocs_by_job(&child.namespace, &child.id)
                        .iter()
                        .any(|alloc| !alloc.terminal_status())
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_structs::{Bytes, ParameterizedJobConfig};
    use std::collections::BTreeMap;

    fn meta(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
            .collect()
    }

    fn parent(payload: &str) -> Job {
        Job {
            id: "resize".into(),
            parameterized_job: Some(ParameterizedJobConfig {
                payload: payload.into(),
                meta_required: vec!["customer".into()],
                meta_optional: vec!["priority".into()],
            }),
            ..Job::default()
        }
    }

    fn request(payload: &[u8], pairs: &[(&str, &str)]) -> JobDispatchRequest {
        JobDispatchRequest {
            payload: Bytes(payload.to_vec()),
            meta: meta(pairs),
            ..JobDispatchRequest::default()
        }
    }

    fn refusal(parent: &Job, request: &JobDispatchRequest) -> String {
        match check_dispatch(parent, request) {
            Err(ServerError::BadRequest(message)) => message,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn dispatches_are_checked_as_nomad_checks_them() {
        let required = parent("required");
        assert!(check_dispatch(&required, &request(b"x", &[("customer", "acme")])).is_ok());
        assert_eq!(
            refusal(&required, &request(b"", &[("customer", "acme")])),
            "Payload is not provided but required by parameterized job"
        );
        assert_eq!(
            refusal(
                &parent("forbidden"),
                &request(b"x", &[("customer", "acme")])
            ),
            "Payload provided but forbidden by parameterized job"
        );
        assert_eq!(
            refusal(
                &required,
                &request(&[0; 17 * 1024], &[("customer", "acme")])
            ),
            "Payload exceeds maximum size; 17408 > 16384"
        );
        assert_eq!(
            refusal(&required, &request(b"x", &[])),
            "Dispatch did not provide required meta keys: [customer]"
        );
        assert_eq!(
            refusal(
                &required,
                &request(b"x", &[("customer", "a"), ("color", "red")])
            ),
            "Dispatch request included unpermitted metadata keys: [color]"
        );
    }
}
