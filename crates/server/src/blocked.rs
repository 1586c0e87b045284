//! Blocked evaluations: evaluations whose placements failed for want of capacity, waiting for
//! capacity to change.
//!
//! One blocked evaluation is kept per job; a newer one supersedes the older, which the caller
//! marks `canceled`. When capacity may have grown — a node became ready, an allocation stopped or
//! finished — every blocked evaluation is released to be retried. Nomad narrows this by computed
//! node class; drover releases them all, which costs a scheduler pass per blocked job and never
//! misses a chance to place.
//!
//! Not here: persistence (blocked evaluations are stored with status `blocked` and re-tracked
//! on start) or the broker.

use std::collections::HashMap;
use std::sync::Mutex;

use drover_structs::Evaluation;

#[derive(Default)]
pub struct BlockedEvals {
    by_job: Mutex<HashMap<(String, String), Evaluation>>,
}

impl BlockedEvals {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Evaluation>> {
        // Every method leaves the map consistent before it can panic, so a poisoned lock still
        // guards valid data.
        self.by_job
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Tracks a blocked evaluation. Returns the evaluation it supersedes, if any.
    pub fn block(&self, eval: Evaluation) -> Option<Evaluation> {
        let key = (eval.namespace.clone(), eval.job_id.clone());
        let mut by_job = self.lock();
        match by_job.get(&key) {
            Some(existing) if existing.modify_index > eval.modify_index => Some(eval),
            _ => by_job.insert(key, eval),
        }
    }

    /// Stops tracking a job's blocked evaluation (the job was deregistered or placed fully).
    pub fn untrack(&self, namespace: &str, job_id: &str) -> Option<Evaluation> {
        self.lock()
            .remove(&(namespace.to_owned(), job_id.to_owned()))
    }

    /// Releases every blocked evaluation because capacity changed.
    pub fn unblock_all(&self) -> Vec<Evaluation> {
        let mut by_job = self.lock();
        let mut released: Vec<Evaluation> = by_job.drain().map(|(_, eval)| eval).collect();
        released.sort_by_key(|eval| eval.create_index);
        released
    }

    /// Forgets every blocked evaluation (leadership lost).
    pub fn flush(&self) {
        self.lock().clear();
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(id: &str, job: &str, index: u64) -> Evaluation {
        Evaluation {
            id: id.into(),
            namespace: "default".into(),
            job_id: job.into(),
            create_index: index,
            modify_index: index,
            ..Evaluation::default()
        }
    }

    #[test]
    fn newer_blocked_eval_supersedes_older_one() {
        let blocked = BlockedEvals::default();
        assert!(blocked.block(eval("old", "web", 1)).is_none());
        let superseded = blocked
            .block(eval("new", "web", 2))
            .expect("old superseded");
        assert_eq!(superseded.id, "old");
        let stale = blocked
            .block(eval("older", "web", 0))
            .expect("stale refused");
        assert_eq!(stale.id, "older");
        assert_eq!(blocked.len(), 1);
    }

    #[test]
    fn unblock_releases_everything_in_creation_order() {
        let blocked = BlockedEvals::default();
        blocked.block(eval("b", "job-b", 5));
        blocked.block(eval("a", "job-a", 3));
        let ids: Vec<String> = blocked.unblock_all().into_iter().map(|e| e.id).collect();
        assert_eq!(ids, ["a", "b"]);
        assert!(blocked.is_empty());
    }
}
