//! The [`Client`] itself: its state, start-up (restore, then the background loops) and the two
//! kinds of shutdown. The loops and operations live beside it, one concern per module.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::Duration;

use drover_structs::node_meta::merged_meta;
use drover_structs::{DurationNs, Node};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

use super::config::NodeConfig;
use super::error::ClientError;
use super::identity::build_node;
use super::meta_store::NodeMetaStore;
use super::runner::{AllocRunnerFactory, AllocRunnerHandle, RunnerContext};
use crate::server_conn::ServerConn;
use crate::status_buffer::StatusBuffer;

/// Heartbeat bookkeeping, readable for `/v1/agent/self` stats.
#[derive(Debug, Clone, Copy, Default)]
pub struct HeartbeatStatus {
    pub registered: bool,
    pub ttl: Duration,
    pub last_heartbeat: Option<tokio::time::Instant>,
}

/// Whether a node is in touch with its servers (for `/v1/agent/health`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerContact {
    /// Registered, and the last heartbeat was answered within the TTL.
    Ok,
    /// No server has accepted the node's registration yet.
    NotRegistered,
    /// The last answered heartbeat is older than the TTL the server gave.
    HeartbeatOverdue { since: Duration },
}

impl HeartbeatStatus {
    /// The node's contact with its servers at `now` (tokio time).
    pub fn contact_at(&self, now: tokio::time::Instant) -> ServerContact {
        let Some(last) = self.last_heartbeat.filter(|_| self.registered) else {
            return ServerContact::NotRegistered;
        };
        let since = now.saturating_duration_since(last);
        if since > self.ttl {
            ServerContact::HeartbeatOverdue { since }
        } else {
            ServerContact::Ok
        }
    }
}

/// The node agent's client half. Cheap to share: every operation takes `&self`.
pub struct Client<S: ServerConn, F: AllocRunnerFactory> {
    pub(super) config: NodeConfig,
    pub(super) conn: Arc<S>,
    pub(super) factory: F,
    pub(super) node_id: String,
    pub(super) status: Arc<StatusBuffer>,
    /// What new runners are given; its node record is replaced when [`Client::update_node`]
    /// changes the node.
    pub(super) runner_context: RwLock<RunnerContext>,
    /// Wakes the heartbeat loop to register the changed node record again.
    pub(super) node_changed: tokio::sync::Notify,
    /// Wakes the watch of `stop_on_client_after` deadlines: a server answered, or a runner
    /// was added.
    pub(super) contact_changed: tokio::sync::Notify,
    pub(super) runners: RwLock<HashMap<String, Arc<F::Runner>>>,
    /// Allocations the server lists for this node that have no runner: terminal when first
    /// seen, or garbage collected here. Keyed to the AllocModifyIndex seen, so they are not
    /// fetched again until the server changes them.
    pub(super) runnerless_allocs: Mutex<HashMap<String, u64>>,
    pub(super) heartbeat: Mutex<HeartbeatStatus>,
    pub(super) registered: watch::Sender<bool>,
    /// How many times the node has (re-)registered; the watcher starts over its record of
    /// what the servers list with each registration.
    pub(super) registrations: std::sync::atomic::AtomicU64,
    /// The registration the last listing belongs to, and the allocations it listed: only an
    /// allocation listed since the node last registered can be "removed by the server".
    pub(super) last_listing: Mutex<(u64, std::collections::HashSet<String>)>,
    /// Stops the heartbeat loop and the allocation watcher.
    pub(super) loops_shutdown: CancellationToken,
    /// Stops the status sender, after a last flush; cancelled after the runners are done.
    pub(super) sender_shutdown: CancellationToken,
    pub(super) loops: Mutex<Vec<JoinHandle<()>>>,
    pub(super) sender: Mutex<Option<JoinHandle<()>>>,
    /// Runners being destroyed in the background.
    pub(super) destroying: Mutex<Vec<JoinHandle<()>>>,
    /// One permit per destroy that may run at once (`gc_parallel_destroys`).
    pub(super) destroy_slots: Arc<tokio::sync::Semaphore>,
    /// The node's static and dynamic metadata (`/v1/client/metadata`).
    pub(super) meta: NodeMetaStore,
}

pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section here is a plain map or field update that leaves the data
    // consistent, so a poisoned lock is still safe to use.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<S: ServerConn, F: AllocRunnerFactory> Client<S, F> {
    /// Starts the node: loads (or creates) its ID, fingerprints the machine, restores the alloc
    /// runners of the persisted state, then registers with the servers and starts heartbeats,
    /// the allocation watcher and the status sender in the background.
    pub async fn start(
        config: NodeConfig,
        conn: Arc<S>,
        factory: F,
    ) -> Result<Arc<Self>, ClientError> {
        let node = build_node(&config)?;
        Self::start_with_node(config, node, conn, factory).await
    }

    /// Starts the node with a node record built by the caller (the node simulator registers
    /// thousands of made-up nodes this way, without fingerprinting the machine each time).
    pub async fn start_with_node(
        config: NodeConfig,
        mut node: Node,
        conn: Arc<S>,
        factory: F,
    ) -> Result<Arc<Self>, ClientError> {
        // The node registers its configuration's metadata with what the API applied over it.
        let meta = NodeMetaStore::load(
            node.meta.clone(),
            (!config.ephemeral)
                .then(|| config.client_state_dir())
                .as_deref(),
        )?;
        node.meta = merged_meta(&meta.static_meta, &*meta.dynamic.lock().await);
        let (registered, _) = watch::channel(false);
        let status = Arc::new(StatusBuffer::new());
        let node_id = node.id.clone();
        let identities = Arc::new(crate::identity::ConnSigner::new(
            Arc::clone(&conn),
            node.id.clone(),
            node.secret_id.clone(),
        ));
        let runner_context = RunnerContext {
            node: Arc::new(node),
            status: Arc::clone(&status),
            services: Arc::new(crate::services::ConnRegistrar::new(Arc::clone(&conn))),
            identities,
            upstream: crate::allocrunner::upstream::UpstreamAllocs {
                local: Arc::default(),
                remote: Arc::new(crate::allocrunner::upstream::ConnAllocReader::new(
                    Arc::clone(&conn),
                )),
            },
        };
        let client = Arc::new(Self {
            status,
            runner_context: RwLock::new(runner_context),
            node_changed: tokio::sync::Notify::new(),
            contact_changed: tokio::sync::Notify::new(),
            node_id,
            runners: RwLock::new(HashMap::new()),
            runnerless_allocs: Mutex::new(HashMap::new()),
            heartbeat: Mutex::new(HeartbeatStatus::default()),
            registered,
            registrations: std::sync::atomic::AtomicU64::new(0),
            last_listing: Mutex::new((0, std::collections::HashSet::new())),
            loops_shutdown: CancellationToken::new(),
            sender_shutdown: CancellationToken::new(),
            loops: Mutex::new(Vec::new()),
            sender: Mutex::new(None),
            destroying: Mutex::new(Vec::new()),
            destroy_slots: Arc::new(tokio::sync::Semaphore::new(
                config.gc_parallel_destroys.max(1),
            )),
            config,
            conn,
            factory,
            meta,
        });
        if !client.config.ephemeral {
            let context = client.runner_context();
            let restored = client.factory.restore(&context).await?;
            let mut runners = client.write_runners();
            for runner in restored {
                runners.insert(runner.alloc().id.clone(), Arc::new(runner));
            }
            tracing::info!(count = runners.len(), "restored allocations");
        }
        let sender = client.status.spawn_sender(
            Arc::clone(&client.conn),
            client.config.status_timing,
            client.sender_shutdown.clone(),
        );
        *lock(&client.sender) = Some(sender);
        let heartbeat = tokio::spawn(Arc::clone(&client).register_and_heartbeat());
        let watcher = tokio::spawn(Arc::clone(&client).watch_allocations());
        let collector = tokio::spawn(Arc::clone(&client).collect_by_usage());
        let heartbeat_stop = tokio::spawn(Arc::clone(&client).stop_allocs_without_servers());
        lock(&client.loops).extend([heartbeat, watcher, collector, heartbeat_stop]);
        Ok(client)
    }

    pub(super) fn read_runners(
        &self,
    ) -> std::sync::RwLockReadGuard<'_, HashMap<String, Arc<F::Runner>>> {
        self.runners.read().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn write_runners(
        &self,
    ) -> std::sync::RwLockWriteGuard<'_, HashMap<String, Arc<F::Runner>>> {
        self.runners.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// This node's ID.
    pub fn node_id(&self) -> String {
        self.node_id.clone()
    }

    /// The node record as registered.
    pub fn node(&self) -> Arc<Node> {
        Arc::clone(&self.runner_context().node)
    }

    /// What a new runner is given (the node record as it is now).
    pub(super) fn runner_context(&self) -> RunnerContext {
        self.runner_context
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Changes the node record (a driver's health or attributes found by a later fingerprint,
    /// as Nomad's client updates its node): `change` edits a copy and says whether anything
    /// changed. A changed record is given to runners started from then on and registered with
    /// the servers again at once, as Nomad's client re-registers an updated node, so the
    /// servers schedule on what the node has now. Returns whether it changed.
    pub fn update_node(&self, change: impl FnOnce(&mut Node) -> bool) -> bool {
        {
            let mut context = self
                .runner_context
                .write()
                .unwrap_or_else(PoisonError::into_inner);
            let mut node = Node::clone(&context.node);
            if !change(&mut node) {
                return false;
            }
            context.node = Arc::new(node);
        }
        // A permit is kept when the loop is not waiting, so no change is missed.
        self.node_changed.notify_one();
        true
    }

    /// The status buffer the runners report into.
    pub fn status_buffer(&self) -> &Arc<StatusBuffer> {
        &self.status
    }

    /// Registration and heartbeat state.
    pub fn heartbeat_status(&self) -> HeartbeatStatus {
        *lock(&self.heartbeat)
    }

    /// The `client` section of `/v1/agent/self` stats, with Nomad's keys (all values strings).
    pub fn stats(&self) -> BTreeMap<String, String> {
        let heartbeat = self.heartbeat_status();
        let since_last = heartbeat
            .last_heartbeat
            .map(|at| tokio::time::Instant::now().saturating_duration_since(at))
            .unwrap_or_default();
        BTreeMap::from([
            ("node_id".to_string(), self.node_id.clone()),
            (
                "known_servers".to_string(),
                u8::from(heartbeat.registered).to_string(),
            ),
            (
                "num_allocations".to_string(),
                self.read_runners().len().to_string(),
            ),
            (
                "last_heartbeat".to_string(),
                DurationNs::from_std(since_last).to_go_string(),
            ),
            (
                "heartbeat_ttl".to_string(),
                DurationNs::from_std(heartbeat.ttl).to_go_string(),
            ),
        ])
    }

    /// Waits until the node has registered with the servers (or the client shuts down).
    pub async fn wait_registered(&self) {
        let mut receiver = self.registered.subscribe();
        tokio::select! {
            _ = receiver.wait_for(|registered| *registered) => {}
            _ = self.loops_shutdown.cancelled() => {}
        }
    }

    /// Stops the background loops and the runners, leaving every task running and the state in
    /// place for the next agent; the last status updates are flushed.
    pub async fn shutdown(&self) {
        self.stop_loops().await;
        let runners: Vec<Arc<F::Runner>> = self.read_runners().values().cloned().collect();
        let mut shutting_down = JoinSet::new();
        for runner in runners {
            shutting_down.spawn(async move { runner.shutdown().await });
        }
        while shutting_down.join_next().await.is_some() {}
        self.wait_for_background_destroys().await;
        self.stop_sender().await;
    }

    /// Dev mode without a data dir: destroys every allocation (tasks killed, dirs removed),
    /// then stops. The status updates of the kills are flushed to the server before returning.
    pub async fn shutdown_and_stop_all(&self) {
        self.stop_loops().await;
        let runners: Vec<Arc<F::Runner>> = self
            .write_runners()
            .drain()
            .map(|(_, runner)| runner)
            .collect();
        let mut destroying = JoinSet::new();
        for runner in runners {
            destroying.spawn(async move { runner.destroy().await });
        }
        while destroying.join_next().await.is_some() {}
        self.wait_for_background_destroys().await;
        self.stop_sender().await;
    }

    async fn stop_loops(&self) {
        self.loops_shutdown.cancel();
        let handles: Vec<JoinHandle<()>> = lock(&self.loops).drain(..).collect();
        for handle in handles {
            let _ = handle.await;
        }
    }

    async fn stop_sender(&self) {
        self.sender_shutdown.cancel();
        let sender = lock(&self.sender).take();
        if let Some(handle) = sender {
            let _ = handle.await;
        }
    }
}
