//! The periodic dispatcher (leader work): tracks every active periodic job with its next launch
//! and, when one is due, registers a child `<job>/periodic-<unix seconds>` (the parent without
//! its periodic block, with `ParentID`) together with its evaluation. A job with
//! `prohibit_overlap` skips a launch while a child has a non-terminal evaluation or allocation.
//! Each child's register records its launch time on the parent in the state store's periodic
//! launch table, so a restarted server launches once at start when a launch fell due while it
//! was down, as Nomad's leader does, and never twice: a child whose ID exists is not launched
//! again.
//!
//! Launch times come from `drover_jobspec::cron` on the server's [`Clock`]; the wait until the
//! next launch is a tokio sleep, so tests run it on paused time.
//!
//! Not here: parameterized dispatch (an HTTP request, [`crate::Server::dispatch_job`]).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use drover_jobspec::cron::CronSchedule;
use drover_structs::{Job, PERIODIC_LAUNCH_SUFFIX};
use tokio::sync::Notify;

/// A job's identity: namespace and ID.
type JobKey = (String, String);

const NANOS_PER_SECOND: i64 = 1_000_000_000;

/// One tracked periodic job.
#[derive(Debug, Clone)]
pub(crate) struct Tracked {
    pub(crate) job: Arc<Job>,
    pub(crate) schedule: CronSchedule,
    /// The next launch, Unix seconds (`None`: the schedule never fires again).
    pub(crate) next: Option<i64>,
}

/// The tracked periodic jobs and a wake-up for the launch loop when they change.
#[derive(Debug, Default)]
pub(crate) struct PeriodicDispatcher {
    tracked: Mutex<BTreeMap<JobKey, Tracked>>,
    changed: Notify,
}

impl PeriodicDispatcher {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<JobKey, Tracked>> {
        match self.tracked.lock() {
            Ok(tracked) => tracked,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Tracks `job` (or updates it) when it is an active periodic job, and stops tracking it
    /// otherwise. The next launch is computed from `now_unix_ns`.
    pub(crate) fn add(&self, job: Arc<Job>, now_unix_ns: i64) {
        let key = (job.namespace.clone(), job.id.clone());
        let entry = job
            .periodic
            .as_ref()
            .filter(|_| job.is_periodic_active())
            .and_then(|periodic| match CronSchedule::of(periodic) {
                Ok(schedule) => Some(schedule),
                Err(error) => {
                    tracing::error!(job_id = job.id, %error, "periodic job has no usable schedule");
                    None
                }
            })
            .map(|schedule| Tracked {
                next: schedule.next_after(now_unix_ns),
                schedule,
                job,
            });
        let mut tracked = self.lock();
        match entry {
            Some(entry) => {
                tracked.insert(key, entry);
            }
            None => {
                tracked.remove(&key);
            }
        }
        drop(tracked);
        self.changed.notify_one();
    }

    /// Stops tracking every job (leadership lost).
    pub(crate) fn flush(&self) {
        self.lock().clear();
        self.changed.notify_one();
    }

    /// Stops tracking a job.
    pub(crate) fn remove(&self, namespace: &str, job_id: &str) {
        let removed = self
            .lock()
            .remove(&(namespace.to_owned(), job_id.to_owned()))
            .is_some();
        if removed {
            self.changed.notify_one();
        }
    }

    /// The tracked job, if it is.
    pub(crate) fn get(&self, namespace: &str, job_id: &str) -> Option<Tracked> {
        self.lock()
            .get(&(namespace.to_owned(), job_id.to_owned()))
            .cloned()
    }

    /// The job launched next and when (Unix seconds).
    fn earliest(&self) -> Option<(Arc<Job>, i64)> {
        self.lock()
            .values()
            .filter_map(|tracked| tracked.next.map(|next| (tracked.job.clone(), next)))
            .min_by_key(|(job, next)| (*next, job.namespace.clone(), job.id.clone()))
    }

    /// Moves a job's next launch past `launched` (Unix seconds), unless the job was replaced
    /// meanwhile.
    fn advance(&self, job: &Job, launched: i64) {
        let mut tracked = self.lock();
        if let Some(entry) = tracked.get_mut(&(job.namespace.clone(), job.id.clone()))
            && entry.job.job_modify_index == job.job_modify_index
        {
            entry.next = entry
                .schedule
                .next_after(launched.saturating_mul(NANOS_PER_SECOND));
        }
    }
}

/// The child of `parent` launched at `launch` (Unix seconds), as Nomad derives it: the parent
/// with a derived ID and name, `ParentID`, no periodic block and no status.
pub(crate) fn derive_child(parent: &Job, launch: i64) -> Job {
    let mut child = parent.clone();
    child.id = child_id(parent, launch);
    child.name.clone_from(&child.id);
    child.parent_id.clone_from(&parent.id);
    child.periodic = None;
    child.status.clear();
    child.status_description.clear();
    child.stop = false;
    child.version = 0;
    child.create_index = 0;
    child.modify_index = 0;
    child.job_modify_index = 0;
    child
}

/// `<parent>/periodic-<unix seconds>`.
pub(crate) fn child_id(parent: &Job, launch: i64) -> String {
    format!("{}{PERIODIC_LAUNCH_SUFFIX}{launch}", parent.id)
}

/// The launch loop: sleeps until the earliest launch, launches it, and starts over when the
/// tracked jobs change.
pub(crate) async fn run(
    inner: Arc<crate::ServerInner>,
    shutdown: tokio_util::sync::CancellationToken,
) {
    loop {
        let changed = inner.periodic.changed.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        let Some((job, launch)) = inner.periodic.earliest() else {
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = &mut changed => continue,
            }
        };
        let now = inner.clock.now_unix_ns();
        let due = launch.saturating_mul(NANOS_PER_SECOND);
        let delay = Duration::from_nanos(u64::try_from(due.saturating_sub(now)).unwrap_or(0));
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = &mut changed => continue,
            () = tokio::time::sleep(delay) => {}
        }
        // The clock may lag tokio time by a rounding; never launch before the instant.
        if inner.clock.now_unix_ns() < due {
            tokio::time::sleep(Duration::from_millis(1)).await;
            continue;
        }
        inner.periodic.advance(&job, launch);
        if job
            .periodic
            .as_ref()
            .is_some_and(|periodic| periodic.prohibit_overlap)
            && inner.running_children(&job)
        {
            tracing::debug!(
                job_id = job.id,
                "skipping launch of periodic job because job prohibits overlap"
            );
            continue;
        }
        if let Err(error) = inner.launch_periodic_child(&job, launch, false).await {
            tracing::error!(job_id = job.id, %error, "could not launch periodic job");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_is_the_parent_without_its_periodic_block() {
        let parent = Job {
            id: "report".into(),
            name: "report".into(),
            periodic: Some(drover_structs::PeriodicConfig {
                spec: "* * * * *".into(),
                ..drover_structs::PeriodicConfig::default()
            }),
            status: "running".into(),
            version: 3,
            ..Job::default()
        };
        let child = derive_child(&parent, 1_700_000_000);
        assert_eq!(child.id, "report/periodic-1700000000");
        assert_eq!(child.name, child.id);
        assert_eq!(child.parent_id, "report");
        assert!(child.periodic.is_none());
        assert!(child.status.is_empty());
        assert_eq!(
            drover_structs::periodic_launch_time(&child.id),
            Some(1_700_000_000)
        );
    }
}
