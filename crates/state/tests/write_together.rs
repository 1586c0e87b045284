//! Writes of several records commit together on the embedded store: a scale's job version,
//! evaluation and scaling event land at one index and are all there after a reopen; a write
//! refused part-way (its last change names a group the job does not have) leaves nothing, in
//! memory or in the file, and moves no index.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use drover_state::{Change, StateError, StateStore};
use drover_structs::{Evaluation, ScalingEvent};

mod fixtures;
use fixtures::{NOW, job};

fn eval(id: &str, job_id: &str) -> Evaluation {
    Evaluation {
        id: id.to_owned(),
        namespace: "default".to_owned(),
        job_id: job_id.to_owned(),
        status: "pending".to_owned(),
        triggered_by: "job-scaling".to_owned(),
        ..Evaluation::default()
    }
}

fn scale(job_id: &str, group: &str, count: i64, eval_id: &str) -> Vec<Change> {
    vec![
        Change::Job {
            job: Box::new(job(job_id, count)),
            submission: None,
        },
        Change::Evals(vec![eval(eval_id, job_id)]),
        Change::ScalingEvent {
            namespace: "default".to_owned(),
            job_id: job_id.to_owned(),
            group: group.to_owned(),
            event: Box::new(ScalingEvent {
                time: NOW,
                count: Some(count),
                eval_id: Some(eval_id.to_owned()),
                message: "scaled".to_owned(),
                ..ScalingEvent::default()
            }),
        },
    ]
}

#[tokio::test]
async fn a_scale_commits_its_job_version_evaluation_and_event_at_one_index_and_keeps_them() {
    let directory = tempfile::tempdir().unwrap();
    let index = {
        let store = StateStore::open(directory.path()).await.unwrap();
        store.upsert_job(job("web", 1), NOW).await.unwrap();
        let written = store
            .write_together(scale("web", "g", 3, "e1"), NOW)
            .await
            .unwrap();
        let registration = &written.jobs[0];
        assert!(registration.spec_changed);
        assert_eq!(registration.job_modify_index, written.index);
        assert_eq!(registration.job.task_groups[0].count, 3);
        assert_eq!(store.latest_index(), written.index);
        let stored = store.eval("e1").unwrap();
        assert_eq!(stored.create_index, written.index);
        // The evaluation names the version the same write made.
        assert_eq!(stored.job_modify_index, written.index);
        let events = store.scaling_events("default", "web").unwrap();
        assert_eq!(events.modify_index, written.index);
        store.close().await;
        written.index
    };
    let store = StateStore::open(directory.path()).await.unwrap();
    assert_eq!(store.latest_index(), index);
    assert_eq!(store.job("default", "web").unwrap().task_groups[0].count, 3);
    assert_eq!(store.eval("e1").unwrap().job_modify_index, index);
    assert_eq!(
        store.scaling_events("default", "web").unwrap().modify_index,
        index
    );
}

#[tokio::test]
async fn a_write_refused_part_way_leaves_nothing_in_memory_or_in_the_file() {
    let directory = tempfile::tempdir().unwrap();
    let before = {
        let store = StateStore::open(directory.path()).await.unwrap();
        store.upsert_job(job("web", 1), NOW).await.unwrap();
        let before = store.latest_index();
        // A new job and an update of an existing one, each with its evaluation, then an event
        // for a group the job does not have: the whole write is refused.
        let mut changes = vec![
            Change::Job {
                job: Box::new(job("api", 2)),
                submission: None,
            },
            Change::Evals(vec![eval("e-api", "api")]),
        ];
        changes.extend(scale("web", "missing", 5, "e-web"));
        let refused = store.write_together(changes, NOW).await.unwrap_err();
        assert!(
            matches!(&refused, StateError::NotFound { kind: "task group", id } if id == "web/missing"),
            "{refused}"
        );
        assert!(store.job("default", "api").is_none());
        assert!(store.eval("e-api").is_none());
        assert!(store.eval("e-web").is_none());
        assert_eq!(store.job("default", "web").unwrap().task_groups[0].count, 1);
        assert_eq!(store.job_versions("default", "web").len(), 1);
        assert!(store.scaling_events("default", "web").is_none());
        assert_eq!(store.latest_index(), before);
        // The next write is computed on the state as it was, and commits.
        let written = store
            .write_together(scale("web", "g", 2, "e-next"), NOW)
            .await
            .unwrap();
        assert_eq!(written.index, before + 1);
        store.close().await;
        before
    };
    let store = StateStore::open(directory.path()).await.unwrap();
    assert!(store.job("default", "api").is_none());
    assert!(store.eval("e-api").is_none() && store.eval("e-web").is_none());
    assert!(store.eval("e-next").is_some());
    assert_eq!(store.latest_index(), before + 1);
}

/// A [`MemoryKv`] with a cap on operations per batch (as etcd's) that fails every batch once
/// `commits_left` reaches 0 (a leader that died, or lost etcd, between two writes).
struct FailingKv {
    inner: drover_state::MemoryKv,
    cap: usize,
    commits_left: std::sync::atomic::AtomicUsize,
}

impl drover_state::Kv for FailingKv {
    fn get<'a>(&'a self, key: &'a [u8]) -> drover_state::KvFuture<'a, Option<Vec<u8>>> {
        self.inner.get(key)
    }
    fn scan(
        &self,
        range: drover_state::KeyRange,
    ) -> drover_state::KvFuture<'_, Vec<drover_state::KvPair>> {
        self.inner.scan(range)
    }
    fn apply(
        &self,
        batch: drover_state::WriteBatch,
    ) -> drover_state::KvFuture<'_, drover_state::Revision> {
        use std::sync::atomic::Ordering;
        let allowed = self
            .commits_left
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| {
                left.checked_sub(1)
            })
            .is_ok();
        if !allowed {
            return Box::pin(async {
                Err(drover_state::KvError::Unavailable {
                    reason: "the server lost etcd".to_owned(),
                })
            });
        }
        self.inner.apply(batch)
    }
    fn revision(&self) -> drover_state::KvFuture<'_, drover_state::Revision> {
        self.inner.revision()
    }
    fn max_ops_per_batch(&self) -> Option<usize> {
        Some(self.cap)
    }
}

fn alloc(id: &str) -> drover_structs::Allocation {
    drover_structs::Allocation {
        id: id.to_owned(),
        namespace: "default".to_owned(),
        job_id: "web".to_owned(),
        task_group: "g".to_owned(),
        name: format!("web.g[{id}]"),
        node_id: "n1".to_owned(),
        eval_id: "e0".to_owned(),
        desired_status: "run".to_owned(),
        client_status: "running".to_owned(),
        job: Some(std::sync::Arc::new(job("web", 30))),
        ..drover_structs::Allocation::default()
    }
}

/// Regression: a migration of more allocations than one etcd transaction holds was written in
/// parts with its evaluations in the last, so a leader that died between the parts left
/// allocations marked to migrate that no evaluation would move (and the drainer, counting them
/// as leaving, never marked them again).
#[tokio::test]
async fn a_migration_written_in_parts_never_leaves_a_marked_allocation_without_its_evaluation() {
    use std::sync::Arc;
    use std::sync::atomic::Ordering;
    let kv = Arc::new(FailingKv {
        inner: drover_state::MemoryKv::new(),
        // Six allocations a write.
        cap: 40,
        commits_left: std::sync::atomic::AtomicUsize::new(usize::MAX),
    });
    let store = StateStore::open_with_kv(kv.clone(), drover_state::EngineOptions::default())
        .await
        .unwrap();
    store.upsert_job(job("web", 30), NOW).await.unwrap();
    let ids: Vec<String> = (0..30).map(|number| format!("a{number:02}")).collect();
    store
        .upsert_allocs(ids.iter().map(|id| alloc(id)).collect(), NOW)
        .await
        .unwrap();

    // The migration's first write commits, the second fails.
    kv.commits_left.store(1, Ordering::SeqCst);
    let marked: Vec<drover_structs::Allocation> = ids
        .iter()
        .map(|id| {
            let mut alloc = drover_structs::Allocation::clone(&store.alloc(id).unwrap());
            alloc.desired_transition.migrate = Some(true);
            alloc
        })
        .collect();
    let mut drain = eval("e-drain", "web");
    drain.triggered_by = "node-drain".to_owned();
    store
        .upsert_allocs_and_evals(marked, vec![drain], NOW)
        .await
        .unwrap_err();

    // What the next leader reads: some allocations marked, and the evaluation that moves them.
    kv.commits_left.store(usize::MAX, Ordering::SeqCst);
    let next = StateStore::open_with_kv(kv, drover_state::EngineOptions::default())
        .await
        .unwrap();
    let marked_now = ids
        .iter()
        .filter(|id| next.alloc(id).unwrap().desired_transition.migrate == Some(true))
        .count();
    assert!(
        (1..30).contains(&marked_now),
        "the migration was not written in parts: {marked_now} marked"
    );
    let pending = next.eval("e-drain");
    assert!(
        pending.is_some_and(|eval| eval.status == "pending"),
        "{marked_now} allocations are marked to migrate and no evaluation moves them"
    );
}
