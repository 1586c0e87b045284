//! Every operation that writes more than one record commits them together: a server whose
//! backend stops committing after a given number of writes (a leader that dies between two of
//! them) leaves, in what it persisted, the whole operation or none of it. What a new leader
//! would load is read back from the backend (the embedded store on disk), and checked: a job
//! version has its evaluation, a stopped job its deregistration evaluation, a node marked
//! down, made eligible or purged the evaluations of its jobs, a failed allocation the
//! evaluation that replaces it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use drover_scheduler::testing::{JobBuilder, NodeBuilder};
use drover_server::{Server, ServerConfig, SystemClock};
use drover_state::{
    EmbeddedKv, EngineOptions, KeyRange, Kv, KvError, KvFuture, KvPair, Revision, StateStore,
    WriteBatch,
};
use drover_structs::{
    ALLOC_CLIENT_STATUS_FAILED, ALLOC_CLIENT_STATUS_RUNNING, ALLOC_DESIRED_STATUS_RUN,
    EVAL_STATUS_PENDING, EVAL_TRIGGER_ALLOC_FAILURE, EVAL_TRIGGER_JOB_DEREGISTER,
    EVAL_TRIGGER_JOB_REGISTER, EVAL_TRIGGER_NODE_UPDATE, JobRegisterRequest, NODE_STATUS_DOWN,
};

/// A backend that commits `left` more batches, then refuses every one (`left` < 0: no limit):
/// the server using it dies, as far as what it persisted goes, after that many writes.
struct DyingKv {
    inner: Arc<EmbeddedKv>,
    left: AtomicI64,
    /// A cap on operations per batch, as etcd's `--max-txn-ops` (`None`: the embedded
    /// store's none).
    cap: Option<usize>,
}

impl DyingKv {
    fn dies_after(&self, writes: i64) {
        self.left.store(writes, Ordering::SeqCst);
    }
}

impl Kv for DyingKv {
    fn get<'a>(&'a self, key: &'a [u8]) -> KvFuture<'a, Option<Vec<u8>>> {
        self.inner.get(key)
    }
    fn scan(&self, range: KeyRange) -> KvFuture<'_, Vec<KvPair>> {
        self.inner.scan(range)
    }
    fn apply(&self, batch: WriteBatch) -> KvFuture<'_, Revision> {
        let allowed = self
            .left
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| match left {
                0 => None,
                left if left < 0 => Some(left),
                left => Some(left - 1),
            })
            .is_ok();
        if allowed {
            return self.inner.apply(batch);
        }
        Box::pin(async {
            Err(KvError::Unavailable {
                reason: "this leader died".to_owned(),
            })
        })
    }
    fn revision(&self) -> KvFuture<'_, Revision> {
        self.inner.revision()
    }
    fn max_ops_per_batch(&self) -> Option<usize> {
        self.cap
    }
}

struct Cluster {
    _directory: tempfile::TempDir,
    disk: Arc<EmbeddedKv>,
    kv: Arc<DyingKv>,
    server: Server,
}

impl Cluster {
    async fn start() -> Self {
        Self::start_capped(None).await
    }

    async fn start_capped(cap: Option<usize>) -> Self {
        let directory = tempfile::tempdir().unwrap();
        let disk = Arc::new(EmbeddedKv::open_in_dir(directory.path()).await.unwrap());
        let kv = Arc::new(DyingKv {
            inner: Arc::clone(&disk),
            left: AtomicI64::new(-1),
            cap,
        });
        let state = StateStore::open_with_kv(kv.clone(), EngineOptions::default())
            .await
            .unwrap();
        let server = Server::start(ServerConfig::default(), state, Arc::new(SystemClock));
        Self {
            _directory: directory,
            disk,
            kv,
            server,
        }
    }

    /// What the next leader loads: the backend's contents, read afresh.
    async fn persisted(&self) -> StateStore {
        StateStore::open_with_kv(self.disk.clone(), EngineOptions::default())
            .await
            .unwrap()
    }

    /// A node with a service job of `count` allocations running on it, every evaluation done.
    async fn with_running_job(&self, job_id: &str, count: i64) {
        self.server
            .register_node(NodeBuilder::new("node-1").build())
            .await
            .unwrap();
        let job = JobBuilder::service(job_id)
            .group("app", count)
            .task("server", "raw_exec")
            .resources(100, 64)
            .build();
        self.server.register_job(register(job)).await.unwrap();
        self.settle().await;
        let running: Vec<_> = self
            .server
            .state()
            .allocs_by_job("default", job_id)
            .iter()
            .map(|alloc| {
                let mut update = drover_structs::Allocation::clone(alloc);
                update.client_status = ALLOC_CLIENT_STATUS_RUNNING.to_owned();
                update
            })
            .collect();
        assert_eq!(running.len(), usize::try_from(count).unwrap());
        self.server
            .update_allocs_from_client(running)
            .await
            .unwrap();
        self.settle().await;
    }

    /// Waits until no evaluation is pending.
    async fn settle(&self) {
        for _ in 0..500 {
            let pending = self
                .server
                .state()
                .evals("")
                .iter()
                .any(|eval| eval.status == EVAL_STATUS_PENDING);
            if !pending {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("evaluations still pending");
    }
}

fn register(job: drover_structs::Job) -> JobRegisterRequest {
    JobRegisterRequest {
        job: Some(job),
        ..JobRegisterRequest::default()
    }
}

/// Whether `store` holds an evaluation of `job_id` triggered by `trigger` created at or after
/// `index`.
fn has_eval(store: &StateStore, job_id: &str, trigger: &str, index: u64) -> bool {
    store
        .evals_by_job("default", job_id)
        .iter()
        .any(|eval| eval.triggered_by == trigger && eval.create_index >= index)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_dying_after_a_job_register_leaves_no_job_version_without_its_evaluation() {
    for writes in [0, 1] {
        let cluster = Cluster::start().await;
        cluster
            .server
            .register_node(NodeBuilder::new("node-1").build())
            .await
            .unwrap();
        cluster.settle().await;
        cluster.kv.dies_after(writes);
        let job = JobBuilder::service("web")
            .group("app", 1)
            .task("server", "raw_exec")
            .resources(100, 64)
            .build();
        let _ = cluster.server.register_job(register(job)).await;
        let next = cluster.persisted().await;
        match next.job("default", "web") {
            None => {}
            Some(job) => assert!(
                next.evals_by_job("default", "web").iter().any(|eval| {
                    eval.triggered_by == EVAL_TRIGGER_JOB_REGISTER
                        && eval.job_modify_index == job.job_modify_index
                }),
                "after {writes} write(s): job version {} stored without its evaluation",
                job.version
            ),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_dying_after_a_job_stop_or_purge_leaves_no_stopped_job_without_its_evaluation() {
    for (writes, purge) in [(0, false), (1, false), (0, true), (1, true)] {
        let cluster = Cluster::start().await;
        cluster.with_running_job("web", 2).await;
        let before = cluster.server.state().latest_index();
        cluster.kv.dies_after(writes);
        let _ = cluster.server.deregister_job("default", "web", purge).await;
        let next = cluster.persisted().await;
        let stopped = match next.job("default", "web") {
            None => true,
            Some(job) => job.stop,
        };
        if stopped {
            assert!(
                has_eval(&next, "web", EVAL_TRIGGER_JOB_DEREGISTER, before + 1),
                "after {writes} write(s) (purge: {purge}): the job stopped without the \
                 evaluation that stops its allocations"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_dying_after_a_node_turns_eligible_or_is_purged_leaves_it_with_its_evaluations() {
    for (writes, purge) in [(0, false), (1, false), (0, true), (1, true)] {
        let cluster = Cluster::start().await;
        cluster.with_running_job("web", 1).await;
        if !purge {
            cluster
                .server
                .update_node_eligibility("node-1", "ineligible")
                .await
                .unwrap();
        }
        let before = cluster.server.state().latest_index();
        cluster.kv.dies_after(writes);
        let _ = if purge {
            cluster.server.purge_node("node-1").await.map(|_| ())
        } else {
            cluster
                .server
                .update_node_eligibility("node-1", "eligible")
                .await
                .map(|_| ())
        };
        let next = cluster.persisted().await;
        let changed = match next.node("node-1") {
            None => true,
            Some(node) => node.scheduling_eligibility == "eligible" && node.modify_index > before,
        };
        if changed {
            assert!(
                has_eval(&next, "web", EVAL_TRIGGER_NODE_UPDATE, before + 1),
                "after {writes} write(s) (purge: {purge}): the node changed without the \
                 evaluations of its jobs"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_dying_after_marking_a_silent_node_down_leaves_it_with_its_evaluations() {
    for writes in [0, 1] {
        let directory = tempfile::tempdir().unwrap();
        let disk = Arc::new(EmbeddedKv::open_in_dir(directory.path()).await.unwrap());
        let kv = Arc::new(DyingKv {
            inner: Arc::clone(&disk),
            left: AtomicI64::new(-1),
            cap: None,
        });
        let state = StateStore::open_with_kv(kv.clone(), EngineOptions::default())
            .await
            .unwrap();
        // Heartbeats due within seconds: a node that stops heartbeating is soon down.
        let config = ServerConfig {
            heartbeat: drover_server::heartbeat::HeartbeatConfig {
                min_ttl: Duration::from_secs(2),
                grace: Duration::from_secs(1),
                ..drover_server::heartbeat::HeartbeatConfig::default()
            },
            ..ServerConfig::default()
        };
        let server = Server::start(config, state, Arc::new(SystemClock));
        let cluster = Cluster {
            _directory: directory,
            disk,
            kv,
            server,
        };
        cluster.with_running_job("web", 1).await;
        cluster.server.heartbeat_node("node-1").await.unwrap();
        cluster.settle().await;
        assert_ne!(
            cluster.server.state().node("node-1").unwrap().status,
            NODE_STATUS_DOWN
        );
        let before = cluster.server.state().latest_index();
        cluster.kv.dies_after(writes);
        // The node never heartbeats: the leader marks it down (and would replace its
        // allocation) once its deadline passes.
        for _ in 0..100 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let next = cluster.persisted().await;
            if next.node("node-1").unwrap().status == NODE_STATUS_DOWN {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        let next = cluster.persisted().await;
        if writes == 0 {
            assert_ne!(next.node("node-1").unwrap().status, NODE_STATUS_DOWN);
            continue;
        }
        assert_eq!(next.node("node-1").unwrap().status, NODE_STATUS_DOWN);
        assert!(
            has_eval(&next, "web", EVAL_TRIGGER_NODE_UPDATE, before + 1),
            "the node went down without the evaluations that replace its allocations"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_dying_after_a_client_reports_a_failed_allocation_leaves_its_evaluation() {
    for writes in [0, 1] {
        let cluster = Cluster::start().await;
        cluster.with_running_job("web", 1).await;
        let before = cluster.server.state().latest_index();
        cluster.kv.dies_after(writes);
        let mut failed = drover_structs::Allocation::clone(
            &cluster.server.state().allocs_by_job("default", "web")[0],
        );
        failed.client_status = ALLOC_CLIENT_STATUS_FAILED.to_owned();
        let _ = cluster.server.update_allocs_from_client(vec![failed]).await;
        let next = cluster.persisted().await;
        let alloc = next.allocs_by_job("default", "web")[0].clone();
        assert_eq!(alloc.desired_status, ALLOC_DESIRED_STATUS_RUN);
        if alloc.client_status == ALLOC_CLIENT_STATUS_FAILED {
            assert!(
                has_eval(&next, "web", EVAL_TRIGGER_ALLOC_FAILURE, before + 1),
                "after {writes} write(s): the allocation failed without the evaluation \
                 that replaces it"
            );
        }
    }
}

/// On a backend with a cap on operations per transaction (etcd), clients' updates of many
/// allocations commit in parts: each part carries the evaluations its own allocations call
/// for, so a leader dying between two parts leaves no failed allocation without one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_dying_between_the_parts_of_a_client_update_on_etcds_cap_leaves_each_failure_its_evaluation()
 {
    // 20 operations: one allocation per write.
    let cluster = Cluster::start_capped(Some(20)).await;
    cluster.with_running_job("web", 2).await;
    let before = cluster.server.state().latest_index();
    cluster.kv.dies_after(1);
    let failed: Vec<_> = cluster
        .server
        .state()
        .allocs_by_job("default", "web")
        .iter()
        .map(|alloc| {
            let mut update = drover_structs::Allocation::clone(alloc);
            update.client_status = ALLOC_CLIENT_STATUS_FAILED.to_owned();
            update
        })
        .collect();
    let _ = cluster.server.update_allocs_from_client(failed).await;
    let next = cluster.persisted().await;
    let failed = next
        .allocs_by_job("default", "web")
        .iter()
        .filter(|alloc| alloc.client_status == ALLOC_CLIENT_STATUS_FAILED)
        .count();
    assert_eq!(failed, 1, "the first part committed, the second did not");
    assert!(
        has_eval(&next, "web", EVAL_TRIGGER_ALLOC_FAILURE, before + 1),
        "the part that committed left its failed allocation without the evaluation that \
         replaces it"
    );
}
