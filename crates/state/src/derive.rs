//! Data derived inside the same write as the change that causes it: a job's `Status` from its
//! allocations and evaluations, and the per-group `JobSummary` counters from allocation client
//! statuses (nomad-api.md §14).
//!
//! **Boundary**: pure functions over structs; no I/O, no indexes, no clock.

use std::sync::Arc;

use drover_structs::{
    ALLOC_CLIENT_STATUS_COMPLETE, ALLOC_CLIENT_STATUS_FAILED, ALLOC_CLIENT_STATUS_LOST,
    ALLOC_CLIENT_STATUS_PENDING, ALLOC_CLIENT_STATUS_RUNNING, ALLOC_CLIENT_STATUS_UNKNOWN,
    Allocation, Evaluation, JOB_STATUS_DEAD, JOB_STATUS_PENDING, JOB_STATUS_RUNNING,
    JOB_TYPE_SYSTEM, Job, JobSummary, TaskGroupSummary,
};

/// A job's status (Nomad's `getJobStatus`), given its allocations and evaluations:
///
/// - system, periodic and parameterized jobs are `running` until stopped, then `dead`;
/// - any non-terminal allocation makes the job `running`;
/// - otherwise any non-terminal evaluation makes it `pending`;
/// - otherwise it is `dead` if it has any evaluation or is stopped, and `pending` if not.
///
/// Deployments do not count, as in Nomad 1.1.2's `getJobStatus`.
pub fn derive_job_status<'a>(
    job: &Job,
    allocs: impl IntoIterator<Item = &'a Arc<Allocation>>,
    evals: impl IntoIterator<Item = &'a Arc<Evaluation>>,
) -> &'static str {
    if job.r#type == JOB_TYPE_SYSTEM || job.is_periodic() || job.is_parameterized() {
        return if job.stop {
            JOB_STATUS_DEAD
        } else {
            JOB_STATUS_RUNNING
        };
    }
    if allocs.into_iter().any(|alloc| !alloc.terminal_status()) {
        return JOB_STATUS_RUNNING;
    }
    let mut any_eval = false;
    for eval in evals {
        if !eval.terminal_status() {
            return JOB_STATUS_PENDING;
        }
        any_eval = true;
    }
    if any_eval || job.stop {
        JOB_STATUS_DEAD
    } else {
        JOB_STATUS_PENDING
    }
}

/// Moves one child from the `old` status counter to the `new` one of a parent's `Children`
/// summary (Nomad's `setJobStatus`); returns whether anything changed.
pub fn count_child(summary: &mut JobSummary, old: Option<&str>, new: Option<&str>) -> bool {
    if old == new {
        return false;
    }
    let children = summary.children.get_or_insert_with(Default::default);
    adjust(children, old, -1);
    adjust(children, new, 1);
    true
}

/// Adds `by` to the counter of `status` (none for an absent or unknown status), never below 0.
fn adjust(children: &mut drover_structs::JobChildrenSummary, status: Option<&str>, by: i64) {
    let count = match status {
        Some(JOB_STATUS_PENDING) => &mut children.pending,
        Some(JOB_STATUS_RUNNING) => &mut children.running,
        Some(JOB_STATUS_DEAD) => &mut children.dead,
        _ => return,
    };
    *count = (*count + by).max(0);
}

/// The counter of `summary` that counts allocations with `client_status`.
fn counter_for<'a>(summary: &'a mut TaskGroupSummary, client_status: &str) -> Option<&'a mut i64> {
    match client_status {
        ALLOC_CLIENT_STATUS_PENDING => Some(&mut summary.starting),
        ALLOC_CLIENT_STATUS_RUNNING => Some(&mut summary.running),
        ALLOC_CLIENT_STATUS_COMPLETE => Some(&mut summary.complete),
        ALLOC_CLIENT_STATUS_FAILED => Some(&mut summary.failed),
        ALLOC_CLIENT_STATUS_LOST => Some(&mut summary.lost),
        ALLOC_CLIENT_STATUS_UNKNOWN => Some(&mut summary.unknown),
        _ => None,
    }
}

/// `job`'s summary counted afresh from its allocations, as Nomad's `ReconcileJobSummaries`
/// counts it: one entry per group (and per group an allocation names that the job no longer
/// has), each allocation counted by its client status, queued counts at zero, no children.
/// An allocation of an earlier job of the same ID (another `CreateIndex`: purged and
/// registered again) is not counted.
pub fn recount_job_summary<'a>(
    job: &Job,
    allocs: impl IntoIterator<Item = &'a Arc<Allocation>>,
) -> JobSummary {
    let mut summary = JobSummary {
        job_id: job.id.clone(),
        namespace: job.namespace.clone(),
        ..JobSummary::default()
    };
    add_missing_groups(&mut summary, job);
    for alloc in allocs {
        let same_job = alloc
            .job
            .as_ref()
            .is_some_and(|alloc_job| alloc_job.create_index == job.create_index);
        if !same_job {
            continue;
        }
        let group = summary.summary.entry(alloc.task_group.clone()).or_default();
        if let Some(count) = counter_for(group, &alloc.client_status) {
            *count += 1;
        }
    }
    summary
}

/// A new summary for `job`: one zeroed entry per task group, and zeroed children counters for
/// a periodic or parameterized job.
pub fn new_job_summary(job: &Job) -> JobSummary {
    let mut summary = JobSummary {
        job_id: job.id.clone(),
        namespace: job.namespace.clone(),
        children: (job.is_periodic() || job.is_parameterized())
            .then(drover_structs::JobChildrenSummary::default),
        ..JobSummary::default()
    };
    add_missing_groups(&mut summary, job);
    summary
}

/// Adds a zeroed entry for every group of `job` the summary does not have yet; returns whether
/// it added any. Entries of groups the job no longer has are kept, as Nomad does, so their
/// allocations stay counted.
pub fn add_missing_groups(summary: &mut JobSummary, job: &Job) -> bool {
    let mut added = false;
    for group in &job.task_groups {
        if !summary.summary.contains_key(&group.name) {
            summary
                .summary
                .insert(group.name.clone(), TaskGroupSummary::default());
            added = true;
        }
    }
    added
}

/// Moves the counters of `summary` for an allocation going from `before` (None: new) to
/// `after`; returns whether anything changed.
///
/// A new allocation counts under its client status unless the server already wants it stopped,
/// and a new `pending` one takes one off `Queued`. A status change moves one count from the old
/// status to the new one. Counters never go below zero.
pub fn apply_alloc_to_summary(
    summary: &mut JobSummary,
    before: Option<&Allocation>,
    after: &Allocation,
) -> bool {
    let group = summary.summary.entry(after.task_group.clone()).or_default();
    match before {
        None => {
            if after.server_terminal_status() {
                return false;
            }
            let Some(counter) = counter_for(group, &after.client_status) else {
                return false;
            };
            *counter += 1;
            if after.client_status == ALLOC_CLIENT_STATUS_PENDING && group.queued > 0 {
                group.queued -= 1;
            }
            true
        }
        Some(before) => {
            if before.client_status == after.client_status {
                return false;
            }
            if let Some(counter) = counter_for(group, &before.client_status)
                && *counter > 0
            {
                *counter -= 1;
            }
            if let Some(counter) = counter_for(group, &after.client_status) {
                *counter += 1;
            }
            true
        }
    }
}

/// Sets the `Queued` counters from an evaluation's `QueuedAllocations`; returns whether any
/// changed.
pub fn apply_queued_to_summary(summary: &mut JobSummary, eval: &Evaluation) -> bool {
    let mut changed = false;
    for (group_name, queued) in &eval.queued_allocations {
        let group = summary.summary.entry(group_name.clone()).or_default();
        if group.queued != *queued {
            group.queued = *queued;
            changed = true;
        }
    }
    changed
}

/// Whether two versions of a job have the same user-given spec, ignoring what the server sets
/// (status, version, stability, submit time and indexes).
pub fn same_job_spec(existing: &Job, candidate: &Job) -> bool {
    let mut normalized = candidate.clone();
    normalized.status.clone_from(&existing.status);
    normalized
        .status_description
        .clone_from(&existing.status_description);
    normalized.stable = existing.stable;
    normalized.version = existing.version;
    normalized.submit_time = existing.submit_time;
    normalized.create_index = existing.create_index;
    normalized.modify_index = existing.modify_index;
    normalized.job_modify_index = existing.job_modify_index;
    &normalized == existing
}

#[cfg(test)]
mod tests {
    use drover_structs::{
        ALLOC_DESIRED_STATUS_RUN, ALLOC_DESIRED_STATUS_STOP, EVAL_STATUS_COMPLETE,
        EVAL_STATUS_PENDING, JOB_TYPE_BATCH, PeriodicConfig, TaskGroup,
    };

    use super::*;

    fn job(job_type: &str) -> Job {
        Job {
            id: "web".to_owned(),
            namespace: "default".to_owned(),
            r#type: job_type.to_owned(),
            task_groups: vec![TaskGroup {
                name: "g".to_owned(),
                ..TaskGroup::default()
            }],
            ..Job::default()
        }
    }

    fn alloc(desired: &str, client: &str) -> Arc<Allocation> {
        Arc::new(Allocation {
            id: "a".to_owned(),
            task_group: "g".to_owned(),
            desired_status: desired.to_owned(),
            client_status: client.to_owned(),
            ..Allocation::default()
        })
    }

    fn eval(status: &str) -> Arc<Evaluation> {
        Arc::new(Evaluation {
            status: status.to_owned(),
            ..Evaluation::default()
        })
    }

    #[test]
    fn job_status_follows_allocs_then_evals() {
        let service = job("service");
        let none: [Arc<Allocation>; 0] = [];
        let no_evals: [Arc<Evaluation>; 0] = [];
        assert_eq!(derive_job_status(&service, &none, &no_evals), "pending");
        assert_eq!(
            derive_job_status(&service, &none, &[eval(EVAL_STATUS_PENDING)]),
            "pending"
        );
        assert_eq!(
            derive_job_status(&service, &none, &[eval(EVAL_STATUS_COMPLETE)]),
            "dead"
        );
        assert_eq!(
            derive_job_status(
                &service,
                &[alloc(ALLOC_DESIRED_STATUS_RUN, "running")],
                &[eval(EVAL_STATUS_COMPLETE)]
            ),
            "running"
        );
        assert_eq!(
            derive_job_status(
                &service,
                &[alloc(ALLOC_DESIRED_STATUS_RUN, "complete")],
                &[eval(EVAL_STATUS_COMPLETE)]
            ),
            "dead"
        );
        assert_eq!(
            derive_job_status(
                &service,
                &[alloc(ALLOC_DESIRED_STATUS_STOP, "running")],
                &no_evals
            ),
            "pending"
        );
        let stopped = Job {
            stop: true,
            ..job(JOB_TYPE_BATCH)
        };
        assert_eq!(derive_job_status(&stopped, &none, &no_evals), "dead");
        let periodic = Job {
            periodic: Some(PeriodicConfig {
                enabled: true,
                ..PeriodicConfig::default()
            }),
            ..job(JOB_TYPE_BATCH)
        };
        assert_eq!(derive_job_status(&periodic, &none, &no_evals), "running");
        let system = job("system");
        assert_eq!(derive_job_status(&system, &none, &no_evals), "running");
    }

    #[test]
    fn summary_counters_move_with_client_status() {
        let mut summary = new_job_summary(&job("service"));
        summary.summary.get_mut("g").unwrap().queued = 2;
        let pending = alloc(ALLOC_DESIRED_STATUS_RUN, "pending");
        assert!(apply_alloc_to_summary(&mut summary, None, &pending));
        let running = alloc(ALLOC_DESIRED_STATUS_RUN, "running");
        assert!(apply_alloc_to_summary(
            &mut summary,
            Some(&pending),
            &running
        ));
        assert!(!apply_alloc_to_summary(
            &mut summary,
            Some(&running),
            &running
        ));
        let failed = alloc(ALLOC_DESIRED_STATUS_RUN, "failed");
        assert!(apply_alloc_to_summary(
            &mut summary,
            Some(&running),
            &failed
        ));
        let group = &summary.summary["g"];
        assert_eq!(
            (group.queued, group.starting, group.running, group.failed),
            (1, 0, 0, 1)
        );
        // A placement the server already stopped is not counted.
        let stopped = alloc(ALLOC_DESIRED_STATUS_STOP, "pending");
        assert!(!apply_alloc_to_summary(&mut summary, None, &stopped));
        assert_eq!(summary.summary["g"].starting, 0);
    }

    #[test]
    fn spec_comparison_ignores_server_fields_only() {
        let original = job("service");
        let mut resubmitted = original.clone();
        resubmitted.version = 9;
        resubmitted.status = "dead".to_owned();
        resubmitted.job_modify_index = 77;
        resubmitted.submit_time = 123;
        assert!(same_job_spec(&original, &resubmitted));
        resubmitted.task_groups[0].count = 3;
        assert!(!same_job_spec(&original, &resubmitted));
        let stopped = Job {
            stop: true,
            ..original.clone()
        };
        assert!(!same_job_spec(&original, &stopped));
    }
}
