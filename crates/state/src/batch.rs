//! Writes of several records that commit together: [`StateStore::write_together`] applies a
//! list of [`Change`]s as one write of the engine, so one transaction of the backend (one redb
//! transaction, one etcd transaction): a reader, a follower or the next leader sees all of
//! them or none. A change that is refused part-way (a scaling event for a group the job does
//! not have) leaves nothing, in memory or in the backend.
//!
//! Not here: which operation needs which records together (the server), nor the writes of many
//! allocations, which split on a backend with a cap on operations per transaction (see
//! `StateStore::allocs_per_write`).

use std::collections::BTreeSet;
use std::sync::Arc;

use drover_structs::{Evaluation, Job, JobSubmission, ScalingEvent};

use crate::engine::WriteContext;
use crate::error::StateError;
use crate::scaling_table::record_scaling_event;
use crate::store::{
    JobRegistration, StateStore, namespace_or_default, refresh_job_status, require_id,
    validate_evals, write_evals, write_job,
};
use crate::tables::{JobKey, StateTables};

/// One record change of a write made together with others.
#[derive(Debug, Clone)]
pub enum Change {
    /// A job registered or updated, as [`StateStore::upsert_job_with_submission`] does.
    Job {
        job: Box<Job>,
        submission: Option<Box<JobSubmission>>,
    },
    /// Evaluations created or updated. One with no `JobModifyIndex` for a job an earlier
    /// [`Change::Job`] of the write registered names the version that change made.
    Evals(Vec<Evaluation>),
    /// A scaling event recorded against a group of a job (as the write's earlier changes leave
    /// it): refused when the job or the group is not there.
    ScalingEvent {
        namespace: String,
        job_id: String,
        group: String,
        event: Box<ScalingEvent>,
    },
}

/// What a [`StateStore::write_together`] wrote.
#[derive(Debug, Clone, Default)]
pub struct Written {
    /// The index of the write (the latest index when it changed nothing).
    pub index: u64,
    /// The registration of each [`Change::Job`], in order.
    pub jobs: Vec<JobRegistration>,
}

impl StateStore {
    /// Applies `changes` in order as one write: all are committed, at one index, in one
    /// transaction of the backend, or none is (the first refusal is the answer, and the state
    /// is as it was).
    pub async fn write_together(
        &self,
        mut changes: Vec<Change>,
        now_unix_ns: i64,
    ) -> Result<Written, StateError> {
        for change in &mut changes {
            match change {
                Change::Job { job, .. } => {
                    require_id("Job.ID", &job.id)?;
                    namespace_or_default(&mut job.namespace);
                }
                Change::Evals(evals) => validate_evals(evals)?,
                Change::ScalingEvent {
                    namespace, job_id, ..
                } => {
                    require_id("Job.ID", job_id)?;
                    namespace_or_default(namespace);
                }
            }
        }
        self.engine
            .write(move |tables, context| {
                // Every table is a persistent map sharing its nodes: the copy is cheap, and it is what the state
                // goes back to when a later change is refused after earlier ones applied (the
                // records they queued are dropped with the refused write).
                let before = tables.clone();
                apply_changes(tables, context, changes, now_unix_ns).inspect_err(|_| {
                    *tables = before;
                })
            })
            .await
    }
}

/// Applies `changes` in order within one write.
fn apply_changes(
    tables: &mut StateTables,
    context: &mut WriteContext,
    changes: Vec<Change>,
    now_unix_ns: i64,
) -> Result<Written, StateError> {
    let mut written = Written::default();
    let mut affected_jobs: BTreeSet<JobKey> = BTreeSet::new();
    let mut changed = false;
    for change in changes {
        match change {
            Change::Job { job, submission } => {
                let key: JobKey = (job.namespace.clone(), job.id.clone());
                let registration = write_job(
                    tables,
                    context,
                    *job,
                    submission.map(|source| *source),
                    now_unix_ns,
                )?;
                changed |= registration.spec_changed;
                affected_jobs.insert(key);
                written.jobs.push(registration);
            }
            Change::Evals(mut evals) => {
                for eval in &mut evals {
                    if eval.job_modify_index != 0 {
                        continue;
                    }
                    if let Some(registration) = written.jobs.iter().find(|registration| {
                        registration.job.namespace == eval.namespace
                            && registration.job.id == eval.job_id
                    }) {
                        eval.job_modify_index = registration.job_modify_index;
                    }
                }
                changed |= !evals.is_empty();
                write_evals(tables, context, evals, now_unix_ns, &mut affected_jobs)?;
            }
            Change::ScalingEvent {
                namespace,
                job_id,
                group,
                event,
            } => {
                let key: JobKey = (namespace, job_id);
                let has_group = tables
                    .jobs
                    .get(&key)
                    .map(|job| job.task_groups.iter().any(|known| known.name == group));
                match has_group {
                    None => {
                        return Err(StateError::NotFound {
                            kind: "job",
                            id: key.1,
                        });
                    }
                    Some(false) => {
                        return Err(StateError::NotFound {
                            kind: "task group",
                            id: format!("{}/{group}", key.1),
                        });
                    }
                    Some(true) => {}
                }
                record_scaling_event(tables, context, key, &group, *event)?;
                changed = true;
            }
        }
    }
    for key in &affected_jobs {
        refresh_job_status(tables, context, key)?;
    }
    for registration in &mut written.jobs {
        let key = (
            registration.job.namespace.clone(),
            registration.job.id.clone(),
        );
        if let Some(job) = tables.jobs.get(&key) {
            registration.job = Arc::clone(job);
        }
    }
    written.index = if changed {
        context.index()
    } else {
        context.latest_committed_index()
    };
    Ok(written)
}
