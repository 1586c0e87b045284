//! The job submission table (Nomad's `job_submission`): the jobspec source each job version
//! was registered from, keyed by (namespace, job ID, version), as Nomad's state store keeps it.
//!
//! - A registration that makes a new version stores the submission it carried, with the
//!   version and `JobModifyIndex` of that write; the first submission of a version wins.
//! - A registration without one whose job names a version the job already has (a revert, a
//!   stop, a scale: the job as stored, sent again) takes that version's submission along to
//!   the new version, as Nomad's `upsertJobImpl` does.
//! - Only the newest [`JOB_TRACKED_VERSIONS`] submissions of a job are kept (newest by
//!   `JobModifyIndex`), and a purge or garbage collection of the job removes them all.
//!
//! The in-write helpers are the store's (`crate::store` calls them from the job writes); the
//! reads are the snapshot's. Not here: the size limit (the server drops an oversized
//! submission before it gets here) or the escaping of `VariableFlags` (the API).

use std::sync::Arc;

use drover_structs::JobSubmission;

use crate::engine::{Table, WriteContext, load_table};
use crate::error::StateError;
use crate::kv::Kv;
use crate::tables::{JOB_TRACKED_VERSIONS, JobKey, StateSnapshot, StateTables};

/// A submission's identity: namespace, job ID, version.
pub(crate) type SubmissionKey = (String, String, u64);

/// The record key: namespace, NUL, job ID, NUL, version (big-endian), so a job's submissions
/// sit together in version order.
fn record_key(key: &SubmissionKey) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(key.0.len() + key.1.len() + 10);
    bytes.extend_from_slice(key.0.as_bytes());
    bytes.push(0);
    bytes.extend_from_slice(key.1.as_bytes());
    bytes.push(0);
    bytes.extend_from_slice(&key.2.to_be_bytes());
    bytes
}

/// Loads the persisted submissions into `tables`.
pub(crate) async fn load_job_submissions(
    kv: &dyn Kv,
    tables: &mut StateTables,
) -> Result<(), StateError> {
    for (_, submission) in load_table::<JobSubmission>(kv, Table::JobSubmissions).await? {
        tables.job_submissions.insert(
            (
                submission.namespace.clone(),
                submission.job_id.clone(),
                submission.version,
            ),
            Arc::new(submission),
        );
    }
    Ok(())
}

/// The keys of every stored submission of job `key`, in version order.
fn keys_of_job(tables: &StateTables, key: &JobKey) -> Vec<SubmissionKey> {
    let start: SubmissionKey = (key.0.clone(), key.1.clone(), 0);
    tables
        .job_submissions
        .range(start..)
        .take_while(|((namespace, job_id, _), _)| namespace == &key.0 && job_id == &key.1)
        .map(|(submission_key, _)| submission_key.clone())
        .collect()
}

/// The submission a registration of a new version keeps: the one it carried, else — when the
/// job it sent names a version the stored job already passed (`sent_version` at most
/// `stored_version`) — that version's stored submission.
pub(crate) fn submission_for_new_version(
    tables: &StateTables,
    key: &JobKey,
    carried: Option<JobSubmission>,
    sent_version: u64,
    stored_version: Option<u64>,
) -> Option<JobSubmission> {
    if carried.is_some() {
        return carried;
    }
    let stored_version = stored_version?;
    if sent_version > stored_version {
        return None;
    }
    tables
        .job_submissions
        .get(&(key.0.clone(), key.1.clone(), sent_version))
        .map(|stored| JobSubmission::clone(stored))
}

/// Inside a registration's write: stores `submission` for version `version` of job `key`
/// (made at this write's index) unless that version has one, then drops the oldest beyond
/// [`JOB_TRACKED_VERSIONS`].
pub(crate) fn write_job_submission(
    tables: &mut StateTables,
    context: &mut WriteContext,
    key: &JobKey,
    version: u64,
    mut submission: JobSubmission,
) -> Result<(), StateError> {
    let submission_key: SubmissionKey = (key.0.clone(), key.1.clone(), version);
    if tables.job_submissions.contains_key(&submission_key) {
        return Ok(());
    }
    submission.namespace.clone_from(&key.0);
    submission.job_id.clone_from(&key.1);
    submission.version = version;
    submission.job_modify_index = context.index();
    context.put(
        Table::JobSubmissions,
        &record_key(&submission_key),
        &submission,
    )?;
    tables
        .job_submissions
        .insert(submission_key, Arc::new(submission));

    let mut kept: Vec<(u64, SubmissionKey)> = keys_of_job(tables, key)
        .into_iter()
        .filter_map(|submission_key| {
            let index = tables
                .job_submissions
                .get(&submission_key)?
                .job_modify_index;
            Some((index, submission_key))
        })
        .collect();
    if kept.len() <= JOB_TRACKED_VERSIONS {
        return Ok(());
    }
    kept.sort_by_key(|(index, _)| std::cmp::Reverse(*index));
    for (_, outdated) in kept.split_off(JOB_TRACKED_VERSIONS) {
        context.delete(Table::JobSubmissions, &record_key(&outdated));
        tables.job_submissions.remove(&outdated);
    }
    Ok(())
}

/// Inside a purge (or a garbage collection of the job): removes every submission of job `key`.
pub(crate) fn remove_job_submissions(
    tables: &mut StateTables,
    context: &mut WriteContext,
    key: &JobKey,
) {
    for submission_key in keys_of_job(tables, key) {
        context.delete(Table::JobSubmissions, &record_key(&submission_key));
        tables.job_submissions.remove(&submission_key);
    }
}

impl StateSnapshot {
    /// The submission of version `version` of job `job_id` in `namespace`, as stored (flag
    /// values still escaped).
    pub fn job_submission(
        &self,
        namespace: &str,
        job_id: &str,
        version: u64,
    ) -> Option<Arc<JobSubmission>> {
        self.tables()
            .job_submissions
            .get(&(namespace.to_owned(), job_id.to_owned(), version))
            .cloned()
    }

    /// The versions of job `job_id` in `namespace` that have a stored submission, oldest first.
    pub fn job_submission_versions(&self, namespace: &str, job_id: &str) -> Vec<u64> {
        keys_of_job(self.tables(), &(namespace.to_owned(), job_id.to_owned()))
            .into_iter()
            .map(|(_, _, version)| version)
            .collect()
    }
}
