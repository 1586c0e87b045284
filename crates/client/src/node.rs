//! The node: the [`Client`] that registers this machine with the servers, keeps it alive with
//! heartbeats, watches the allocations placed on it, and owns one alloc runner per allocation.
//!
//! ```text
//!  start ─▶ node id (data dir) ─▶ fingerprint ─▶ restore runners ─▶ register ─┬─▶ heartbeat loop
//!                                                                           ├─▶ alloc watcher
//!                                                                           └─▶ status sender
//!  alloc watcher, one round:
//!    node_allocs(min_index) ── blocking query ──▶ { alloc id → AllocModifyIndex }
//!      index newer than the runner's (or no runner)  → pull
//!      runner without a server entry                 → destroy + forget   (server GC'd it)
//!    get_allocs(pull) ─▶ runner exists  → runner.update(alloc)
//!                        new, live      → factory.spawn(alloc)
//!                        new, terminal  → remembered, never run
//! ```
//!
//! A terminal allocation keeps its runner (and alloc dir, for logs) until the server drops it or
//! someone asks for [`Client::gc`]. Shutting down comes in two kinds that must not be confused:
//! [`Client::shutdown`] leaves every task running for the next agent to re-attach to, while
//! [`Client::shutdown_and_stop_all`] (dev mode without a data dir) destroys every allocation.
//!
//! The client does not know what runs an allocation: it drives runners through the small
//! [`AllocRunnerHandle`] / [`AllocRunnerFactory`] pair, which the real alloc runner and the node
//! simulator's fake both implement.
//!
//! **Not here**: HTTP routes (the API crate maps [`ClientError::kind`] to a status), running
//! tasks (the alloc runner), the wire format (the [`ServerConn`] implementation).

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::Duration;

use drover_structs::{
    ALLOC_CLIENT_STATUS_COMPLETE, Allocation, DurationNs, NODE_SCHEDULING_ELIGIBLE,
    NODE_STATUS_READY, Node, NodeReservedResources, NodeResources, TASK_STATE_DEAD, TaskState,
    Timestamp,
};
use rand::Rng;
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

use crate::clock::SharedClock;
use crate::fingerprint::{FingerprintInput, fingerprint_host};
use crate::server_conn::{AllocClientUpdate, NodeAllocations, ServerConn, ServerConnError};
use crate::status_buffer::{StatusBuffer, StatusBufferTiming};

/// How long one blocking query on the node's allocations may wait (Nomad's default
/// `MaxQueryTime`).
pub const DEFAULT_ALLOC_QUERY_WAIT: Duration = Duration::from_secs(300);

/// How many runners the watcher starts or updates at the same time. Each start waits mostly on
/// a group commit of the client state db, which all of them share, so more at once means
/// bigger groups, not more fsyncs.
const MAX_CONCURRENT_RUNNER_CHANGES: usize = 128;

/// Nomad's default `gc_max_allocs`.
pub const DEFAULT_GC_MAX_ALLOCS: usize = 50;

/// Errors of the client's operations, each with the HTTP-ish [`ClientErrorKind`] it maps to.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The message is Nomad's, word for word; clients match on it.
    #[error("Unknown allocation \"{alloc_id}\"")]
    UnknownAlloc { alloc_id: String },
    #[error("unknown task {task:?} in allocation {alloc_id}")]
    UnknownTask { alloc_id: String, task: String },
    #[error("invalid request for allocation {alloc_id}: {message}")]
    InvalidRequest { alloc_id: String, message: String },
    #[error("allocation {alloc_id} is not terminal; stop it before garbage collecting it")]
    NotTerminal { alloc_id: String },
    #[error("alloc runner for {alloc_id} failed: {message}")]
    Runner { alloc_id: String, message: String },
    #[error("restoring allocations from the client state failed: {message}")]
    Restore { message: String },
    #[error("node identity file {path} could not be read or written")]
    NodeIdentity {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the client is shutting down")]
    ShuttingDown,
}

/// What an error means to a caller of the API: which status code it deserves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientErrorKind {
    NotFound,
    BadRequest,
    Unavailable,
    Internal,
}

impl ClientError {
    pub fn kind(&self) -> ClientErrorKind {
        match self {
            Self::UnknownAlloc { .. } => ClientErrorKind::NotFound,
            Self::UnknownTask { .. } | Self::InvalidRequest { .. } | Self::NotTerminal { .. } => {
                ClientErrorKind::BadRequest
            }
            Self::ShuttingDown => ClientErrorKind::Unavailable,
            Self::Runner { .. } | Self::Restore { .. } | Self::NodeIdentity { .. } => {
                ClientErrorKind::Internal
            }
        }
    }
}

/// The handle the node keeps for each allocation: what the client needs from an alloc runner,
/// and no more. The real alloc runner implements it, and so does the node simulator's fake
/// (`node_sim`), which is the proof that this is all a runner must offer.
pub trait AllocRunnerHandle: Send + Sync + 'static {
    /// The allocation as the runner knows it: the server's fields as last received, with the
    /// runner's own client status and task states.
    fn alloc(&self) -> Allocation;

    /// The `AllocModifyIndex` of the allocation last given to the runner (cheaper than
    /// [`alloc`](Self::alloc) for the watcher's diff).
    fn alloc_modify_index(&self) -> u64;

    /// Whether every task has finished for good (client status complete, failed or lost), so
    /// the allocation may be garbage collected.
    fn is_client_terminal(&self) -> bool;

    /// Hands the runner a newer version of its allocation (a changed job, or a desired status
    /// of `stop`, which the runner answers by stopping its tasks).
    fn update(&self, alloc: Allocation) -> impl Future<Output = ()> + Send;

    /// Restarts one task, the running tasks, or (`all_tasks`) every task in lifecycle order.
    fn restart(
        &self,
        task: Option<&str>,
        all_tasks: bool,
    ) -> impl Future<Output = Result<(), ClientError>> + Send;

    /// Sends a signal to one task, or to every running task.
    fn signal(
        &self,
        task: Option<&str>,
        signal: &str,
    ) -> impl Future<Output = Result<(), ClientError>> + Send;

    /// Resource usage of one task, or of every running task when `task` is `None`. A runner
    /// that measures nothing reports no tasks.
    fn stats(
        &self,
        task: Option<&str>,
    ) -> impl Future<
        Output = Result<BTreeMap<String, drover_driver::TaskResourceUsage>, ClientError>,
    > + Send {
        let _ = task;
        async { Ok(BTreeMap::new()) }
    }

    /// The agent is going away: stop watching, leave the tasks running, keep the state.
    fn shutdown(&self) -> impl Future<Output = ()> + Send;

    /// Kills the tasks, runs their stop hooks, removes the alloc dir and the persisted state.
    fn destroy(&self) -> impl Future<Output = ()> + Send;
}

/// What the node hands a factory for every runner it makes.
#[derive(Debug, Clone)]
pub struct RunnerContext {
    /// The node record as registered (task environments read its attributes and meta).
    pub node: Arc<Node>,
    /// Where runners report their status.
    pub status: Arc<StatusBuffer>,
}

/// Makes alloc runners: new ones for allocations the server placed here, and the ones found in
/// the client state at start. The runners it returns are already running.
pub trait AllocRunnerFactory: Send + Sync + 'static {
    type Runner: AllocRunnerHandle;

    /// Starts a runner for a new allocation.
    fn spawn(
        &self,
        alloc: Allocation,
        context: &RunnerContext,
    ) -> impl Future<Output = Result<Self::Runner, ClientError>> + Send;

    /// Rebuilds (and runs) the runners of every allocation in the persisted client state,
    /// re-attaching to their running tasks.
    fn restore(
        &self,
        context: &RunnerContext,
    ) -> impl Future<Output = Result<Vec<Self::Runner>, ClientError>> + Send;
}

/// Retry timing of the client's loops; the defaults suit a real agent, tests shrink them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryTiming {
    /// First wait after a failed call; doubles per failure, with up to 50% random added.
    pub first_backoff: Duration,
    /// Longest wait between attempts.
    pub max_backoff: Duration,
}

impl Default for RetryTiming {
    fn default() -> Self {
        Self {
            first_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(15),
        }
    }
}

impl RetryTiming {
    fn delay(&self, failures: u32) -> Duration {
        let doubled = self
            .first_backoff
            .saturating_mul(1u32 << failures.min(16))
            .min(self.max_backoff);
        let jitter = rand::thread_rng().gen_range(0.0..0.5);
        doubled.mul_f64(1.0 + jitter).min(self.max_backoff)
    }
}

/// How the node presents itself and where it keeps its identity.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// The agent's data dir; the node ID lives in `<data_dir>/client/node-id`.
    pub data_dir: PathBuf,
    /// Dev mode without a data dir: a fresh node ID each start, nothing restored.
    pub ephemeral: bool,
    /// The node's name (Nomad defaults it to the hostname).
    pub name: String,
    pub datacenter: String,
    pub node_pool: String,
    pub node_class: String,
    pub meta: BTreeMap<String, String>,
    /// The agent's own HTTP API address (`127.0.0.1:4646`); the CLI connects there directly.
    pub http_addr: String,
    /// The Nomad version the agent presents (`nomad.version`).
    pub agent_version: String,
    /// Longest wait of one blocking query on the node's allocations.
    pub alloc_query_wait: Duration,
    /// Past this many allocations, the oldest terminal ones are garbage collected (Nomad's
    /// `gc_max_allocs`).
    pub gc_max_allocs: usize,
    pub retry: RetryTiming,
    pub status_timing: StatusBufferTiming,
    /// What the agent's config says about the node's resources, over the fingerprint.
    pub resources: NodeResourceSettings,
    /// Wall-clock time for the node's timestamps.
    pub clock: SharedClock,
}

/// The client config's word on the node's resources (Nomad's `cpu_total_compute`,
/// `memory_total_mb`, `reservable_cores` and `reserved { … }`): what the fingerprint found is
/// replaced where the operator says otherwise, and what is reserved for the host is never
/// offered to allocations.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeResourceSettings {
    /// Total compute in MHz, instead of the fingerprinted frequency × cores.
    pub cpu_total_compute: Option<i64>,
    /// Total memory in MB, instead of `/proc/meminfo`'s.
    pub memory_total_mb: Option<i64>,
    /// The cores tasks may reserve, instead of the agent's allowed cpus.
    pub reservable_cores: Option<Vec<u16>>,
    /// Kept back for the host: CPU MHz, memory and disk MB, cores and host ports.
    pub reserved: NodeReservedResources,
}

impl NodeResourceSettings {
    /// Applies the overrides to the fingerprinted `resources` (and the attributes that describe
    /// them), and returns the node's reserved resources.
    pub fn apply(
        &self,
        resources: &mut NodeResources,
        attributes: &mut BTreeMap<String, String>,
    ) -> Option<NodeReservedResources> {
        if let Some(compute) = self.cpu_total_compute {
            resources.cpu.cpu_shares = compute;
            for key in ["cpu.totalcompute", "cpu.usablecompute"] {
                attributes.insert(key.to_string(), compute.to_string());
            }
        }
        if let Some(memory_mb) = self.memory_total_mb {
            resources.memory.memory_mb = memory_mb;
            attributes.insert(
                "memory.totalbytes".to_string(),
                memory_mb.saturating_mul(1024 * 1024).to_string(),
            );
        }
        if let Some(cores) = &self.reservable_cores {
            resources.cpu.reservable_cpu_cores = cores.clone();
            attributes.insert("cpu.reservablecores".to_string(), cores.len().to_string());
        }
        (self.reserved != NodeReservedResources::default()).then(|| self.reserved.clone())
    }
}

impl NodeConfig {
    /// A config with Nomad's defaults for a node named `name` in `dc1`.
    pub fn new(data_dir: impl Into<PathBuf>, name: impl Into<String>, clock: SharedClock) -> Self {
        Self {
            data_dir: data_dir.into(),
            ephemeral: false,
            name: name.into(),
            datacenter: "dc1".to_string(),
            node_pool: "default".to_string(),
            node_class: String::new(),
            meta: BTreeMap::new(),
            http_addr: String::new(),
            agent_version: String::new(),
            alloc_query_wait: DEFAULT_ALLOC_QUERY_WAIT,
            gc_max_allocs: DEFAULT_GC_MAX_ALLOCS,
            retry: RetryTiming::default(),
            status_timing: StatusBufferTiming::default(),
            resources: NodeResourceSettings::default(),
            clock,
        }
    }

    /// `<data_dir>/client`.
    pub fn client_state_dir(&self) -> PathBuf {
        self.data_dir.join("client")
    }
}

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
    config: NodeConfig,
    conn: Arc<S>,
    factory: F,
    node_id: String,
    status: Arc<StatusBuffer>,
    runner_context: RunnerContext,
    runners: RwLock<HashMap<String, Arc<F::Runner>>>,
    /// Allocations the server lists for this node that have no runner: terminal when first
    /// seen, or garbage collected here. Keyed to the AllocModifyIndex seen, so they are not
    /// fetched again until the server changes them.
    runnerless_allocs: Mutex<HashMap<String, u64>>,
    heartbeat: Mutex<HeartbeatStatus>,
    registered: watch::Sender<bool>,
    /// Stops the heartbeat loop and the allocation watcher.
    loops_shutdown: CancellationToken,
    /// Stops the status sender, after a last flush; cancelled after the runners are done.
    sender_shutdown: CancellationToken,
    loops: Mutex<Vec<JoinHandle<()>>>,
    sender: Mutex<Option<JoinHandle<()>>>,
    /// Runners being destroyed in the background.
    destroying: Mutex<Vec<JoinHandle<()>>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
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
        node: Node,
        conn: Arc<S>,
        factory: F,
    ) -> Result<Arc<Self>, ClientError> {
        let (registered, _) = watch::channel(false);
        let status = Arc::new(StatusBuffer::new());
        let node_id = node.id.clone();
        let runner_context = RunnerContext {
            node: Arc::new(node),
            status: Arc::clone(&status),
        };
        let client = Arc::new(Self {
            status,
            runner_context,
            node_id,
            runners: RwLock::new(HashMap::new()),
            runnerless_allocs: Mutex::new(HashMap::new()),
            heartbeat: Mutex::new(HeartbeatStatus::default()),
            registered,
            loops_shutdown: CancellationToken::new(),
            sender_shutdown: CancellationToken::new(),
            loops: Mutex::new(Vec::new()),
            sender: Mutex::new(None),
            destroying: Mutex::new(Vec::new()),
            config,
            conn,
            factory,
        });
        if !client.config.ephemeral {
            let restored = client.factory.restore(&client.runner_context).await?;
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
        lock(&client.loops).extend([heartbeat, watcher]);
        Ok(client)
    }

    fn read_runners(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, Arc<F::Runner>>> {
        self.runners.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write_runners(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<String, Arc<F::Runner>>> {
        self.runners.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// This node's ID.
    pub fn node_id(&self) -> String {
        self.node_id.clone()
    }

    /// The node record as registered.
    pub fn node(&self) -> Arc<Node> {
        Arc::clone(&self.runner_context.node)
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

    /// The runner of an allocation.
    pub fn runner(&self, alloc_id: &str) -> Result<Arc<F::Runner>, ClientError> {
        self.read_runners()
            .get(alloc_id)
            .cloned()
            .ok_or_else(|| ClientError::UnknownAlloc {
                alloc_id: alloc_id.to_string(),
            })
    }

    /// The allocation as this node runs it.
    pub fn alloc(&self, alloc_id: &str) -> Result<Allocation, ClientError> {
        Ok(self.runner(alloc_id)?.alloc())
    }

    /// Nomad's `AllocResourceUsage` of an allocation: each running task's usage (or only
    /// `task`'s) and their sum. Cpu ticks are scaled by the node's total compute per core.
    pub async fn alloc_stats(
        &self,
        alloc_id: &str,
        task: Option<&str>,
    ) -> Result<drover_structs::AllocResourceUsage, ClientError> {
        let runner = self.runner(alloc_id)?;
        let usage = runner.stats(task).await?;
        let node = self.node();
        let cores = node
            .attributes
            .get("cpu.numcores")
            .and_then(|cores| cores.parse::<u32>().ok())
            .unwrap_or(1);
        let total_mhz = node
            .node_resources
            .as_ref()
            .map_or(0.0, |resources| resources.cpu.cpu_shares as f64);
        Ok(alloc_resource_usage(&usage, total_mhz, cores))
    }

    /// The IDs of every allocation with a runner here, sorted.
    pub fn alloc_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.read_runners().keys().cloned().collect();
        ids.sort();
        ids
    }

    /// Restarts one task, the running tasks, or every task (`all_tasks`) of an allocation.
    pub async fn restart(
        &self,
        alloc_id: &str,
        task: Option<&str>,
        all_tasks: bool,
    ) -> Result<(), ClientError> {
        if task.is_some() && all_tasks {
            return Err(ClientError::InvalidRequest {
                alloc_id: alloc_id.to_string(),
                message: "task name and all tasks cannot both be given".to_string(),
            });
        }
        self.runner(alloc_id)?.restart(task, all_tasks).await
    }

    /// Sends a signal to one task or every task of an allocation.
    pub async fn signal(
        &self,
        alloc_id: &str,
        task: Option<&str>,
        signal: &str,
    ) -> Result<(), ClientError> {
        self.runner(alloc_id)?.signal(task, signal).await
    }

    /// Stops an allocation here, as the server does by setting its desired status to `stop`.
    /// The API's `/v1/allocation/<id>/stop` goes through the server instead (which also
    /// reschedules); this is the node-local form, for draining and tests.
    pub async fn stop(&self, alloc_id: &str) -> Result<(), ClientError> {
        let runner = self.runner(alloc_id)?;
        let mut alloc = runner.alloc();
        alloc.desired_status = drover_structs::ALLOC_DESIRED_STATUS_STOP.to_string();
        alloc.desired_description = "stopped on the node".to_string();
        runner.update(alloc).await;
        Ok(())
    }

    /// Garbage collects a terminal allocation: its runner is destroyed (alloc dir and state
    /// removed) and forgotten. A live allocation is refused.
    pub async fn gc(&self, alloc_id: &str) -> Result<(), ClientError> {
        let runner = self.runner(alloc_id)?;
        if !runner.is_client_terminal() {
            return Err(ClientError::NotTerminal {
                alloc_id: alloc_id.to_string(),
            });
        }
        let alloc_modify_index = runner.alloc_modify_index();
        // Remembered so the watcher does not fetch it again while the server still lists it.
        lock(&self.runnerless_allocs).insert(alloc_id.to_string(), alloc_modify_index);
        self.write_runners().remove(alloc_id);
        runner.destroy().await;
        self.status.forget(alloc_id);
        Ok(())
    }

    /// Garbage collects every terminal allocation; answers how many were collected.
    pub async fn gc_all(&self) -> usize {
        let terminal: Vec<String> = self
            .read_runners()
            .iter()
            .filter(|(_, runner)| runner.is_client_terminal())
            .map(|(id, _)| id.clone())
            .collect();
        let mut collected = 0;
        for alloc_id in terminal {
            if self.gc(&alloc_id).await.is_ok() {
                collected += 1;
            }
        }
        collected
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

    /// Registers (retrying with backoff), then heartbeats at half the TTL the server gives, so
    /// one lost beat never marks the node down. A server that forgot the node gets it
    /// registered again.
    async fn register_and_heartbeat(self: Arc<Self>) {
        let mut failures: u32 = 0;
        let mut must_register = true;
        let mut next_beat = Duration::ZERO;
        loop {
            tokio::select! {
                _ = self.loops_shutdown.cancelled() => return,
                _ = tokio::time::sleep(next_beat) => {}
            }
            let result = if must_register {
                self.conn
                    .register_node(Node::clone(&self.runner_context.node))
                    .await
            } else {
                self.conn.heartbeat(&self.node_id, NODE_STATUS_READY).await
            };
            match result {
                Ok(ttl) => {
                    if must_register {
                        tracing::info!(node_id = %self.node_id, "node registered");
                    }
                    must_register = false;
                    failures = 0;
                    {
                        let mut heartbeat = lock(&self.heartbeat);
                        heartbeat.registered = true;
                        heartbeat.ttl = ttl;
                        heartbeat.last_heartbeat = Some(tokio::time::Instant::now());
                    }
                    self.registered.send_replace(true);
                    next_beat = (ttl / 2).max(Duration::from_millis(10));
                }
                Err(ServerConnError::UnknownNode { .. }) => {
                    tracing::warn!(node_id = %self.node_id, "servers do not know this node; registering again");
                    must_register = true;
                    next_beat = if failures == 0 {
                        Duration::ZERO
                    } else {
                        self.config.retry.delay(failures)
                    };
                    failures = failures.saturating_add(1);
                }
                Err(error) => {
                    next_beat = self.config.retry.delay(failures);
                    failures = failures.saturating_add(1);
                    tracing::warn!(%error, retry_in = ?next_beat, registering = must_register, "heartbeat failed");
                }
            }
        }
    }

    /// The allocation watcher: blocking queries on the node's allocations, then the diff.
    async fn watch_allocations(self: Arc<Self>) {
        self.wait_registered().await;
        let node_id = self.node_id.clone();
        let mut min_index: u64 = 0;
        let mut failures: u32 = 0;
        loop {
            if self.loops_shutdown.is_cancelled() {
                return;
            }
            let answer = tokio::select! {
                _ = self.loops_shutdown.cancelled() => return,
                answer = self.conn.node_allocs(&node_id, min_index, self.config.alloc_query_wait) => answer,
            };
            let listed = match answer {
                Ok(listed) => listed,
                Err(error) => {
                    let delay = self.config.retry.delay(failures);
                    failures = failures.saturating_add(1);
                    tracing::warn!(%error, retry_in = ?delay, "querying the node's allocations failed");
                    if self.sleep_or_shutdown(delay).await {
                        return;
                    }
                    continue;
                }
            };
            if listed.index <= min_index && min_index > 0 {
                // The wait ran out with nothing new.
                continue;
            }
            match self.apply_listing(&listed).await {
                Ok(()) => {
                    failures = 0;
                    // Never 0 again: a query at index 0 answers at once, which would spin.
                    min_index = listed.index.max(1);
                }
                Err(error) => {
                    let delay = self.config.retry.delay(failures);
                    failures = failures.saturating_add(1);
                    tracing::warn!(%error, retry_in = ?delay, "fetching changed allocations failed");
                    if self.sleep_or_shutdown(delay).await {
                        return;
                    }
                }
            }
        }
    }

    /// Sleeps, or answers true at once if the client shuts down meanwhile.
    async fn sleep_or_shutdown(&self, delay: Duration) -> bool {
        tokio::select! {
            _ = self.loops_shutdown.cancelled() => true,
            _ = tokio::time::sleep(delay) => false,
        }
    }

    /// Brings the runners in line with one answer of the blocking query.
    async fn apply_listing(
        self: &Arc<Self>,
        listed: &NodeAllocations,
    ) -> Result<(), ServerConnError> {
        let mut to_pull = Vec::new();
        {
            let runners = self.read_runners();
            let runnerless = lock(&self.runnerless_allocs);
            for (alloc_id, server_index) in &listed.alloc_modify_indexes {
                let known_index = runners
                    .get(alloc_id)
                    .map(|runner| runner.alloc_modify_index())
                    .or_else(|| runnerless.get(alloc_id).copied());
                if known_index.is_none_or(|known| *server_index > known) {
                    to_pull.push(alloc_id.clone());
                }
            }
        }

        let pulled = if to_pull.is_empty() {
            Vec::new()
        } else {
            let wanted = to_pull.len();
            let pulled = self.conn.get_allocs(to_pull).await?;
            if pulled.len() < wanted {
                // Listed a moment ago but gone now: the next query will tell the truth.
                return Err(ServerConnError::Internal {
                    message: format!(
                        "asked for {wanted} allocations, the server returned {}",
                        pulled.len()
                    ),
                });
            }
            pulled
        };

        self.remove_unlisted(&listed.alloc_modify_indexes);
        // Each allocation appears once per listing, so they are independent: start and update
        // them side by side (a runner's start persists state first, which takes a while).
        let mut applying = JoinSet::new();
        for alloc in pulled {
            if applying.len() >= MAX_CONCURRENT_RUNNER_CHANGES {
                applying.join_next().await;
            }
            let client = Arc::clone(self);
            applying.spawn(async move { client.apply_pulled(alloc).await });
        }
        while applying.join_next().await.is_some() {}
        self.collect_excess_terminal_allocs();
        Ok(())
    }

    /// Destroys the runners of allocations the server no longer lists (it garbage collected
    /// them) and forgets the runner-less ones.
    fn remove_unlisted(&self, listed: &BTreeMap<String, u64>) {
        lock(&self.runnerless_allocs).retain(|alloc_id, _| listed.contains_key(alloc_id));
        let removed: Vec<(String, Arc<F::Runner>)> = {
            let mut runners = self.write_runners();
            let gone: Vec<String> = runners
                .keys()
                .filter(|alloc_id| !listed.contains_key(*alloc_id))
                .cloned()
                .collect();
            gone.into_iter()
                .filter_map(|alloc_id| runners.remove(&alloc_id).map(|runner| (alloc_id, runner)))
                .collect()
        };
        for (alloc_id, runner) in removed {
            tracing::info!(
                alloc_id,
                "allocation removed by the server; destroying its runner"
            );
            self.destroy_in_background(alloc_id, runner);
        }
    }

    /// Destroys a runner that is already out of the map, without holding up the watcher (a
    /// kill may wait out a long `kill_timeout`).
    fn destroy_in_background(&self, alloc_id: String, runner: Arc<F::Runner>) {
        let status = Arc::clone(&self.status);
        let handle = tokio::spawn(async move {
            runner.destroy().await;
            status.forget(&alloc_id);
        });
        let mut destroying = lock(&self.destroying);
        destroying.retain(|handle| !handle.is_finished());
        destroying.push(handle);
    }

    async fn wait_for_background_destroys(&self) {
        let handles: Vec<JoinHandle<()>> = lock(&self.destroying).drain(..).collect();
        for handle in handles {
            let _ = handle.await;
        }
    }

    /// Nomad's `gc_max_allocs`: past that many allocations, the oldest terminal ones are
    /// collected.
    fn collect_excess_terminal_allocs(&self) {
        let max_allocs = self.config.gc_max_allocs;
        let excess: Vec<(String, Arc<F::Runner>)> = {
            let mut runners = self.write_runners();
            if runners.len() <= max_allocs {
                return;
            }
            let mut terminal: Vec<(u64, String)> = runners
                .iter()
                .filter(|(_, runner)| runner.is_client_terminal())
                .map(|(alloc_id, runner)| (runner.alloc_modify_index(), alloc_id.clone()))
                .collect();
            terminal.sort();
            terminal.truncate(runners.len() - max_allocs);
            let mut runnerless = lock(&self.runnerless_allocs);
            terminal
                .into_iter()
                .filter_map(|(alloc_modify_index, alloc_id)| {
                    runnerless.insert(alloc_id.clone(), alloc_modify_index);
                    runners.remove(&alloc_id).map(|runner| (alloc_id, runner))
                })
                .collect()
        };
        for (alloc_id, runner) in excess {
            tracing::info!(
                alloc_id,
                max_allocs,
                "garbage collecting a terminal allocation"
            );
            self.destroy_in_background(alloc_id, runner);
        }
    }

    async fn apply_pulled(&self, alloc: Allocation) {
        let existing = self.read_runners().get(&alloc.id).cloned();
        if let Some(runner) = existing {
            runner.update(alloc).await;
            return;
        }
        if alloc.terminal_status() {
            if alloc.server_terminal_status() && !alloc.client_terminal_status() {
                // Stopped before it ever ran here: nothing to kill, but the server must hear
                // that it is finished.
                self.status.report(never_ran_update(&alloc));
            }
            lock(&self.runnerless_allocs).insert(alloc.id.clone(), alloc.alloc_modify_index);
            return;
        }
        let alloc_id = alloc.id.clone();
        let alloc_modify_index = alloc.alloc_modify_index;
        match self.factory.spawn(alloc, &self.runner_context).await {
            Ok(runner) => {
                tracing::debug!(alloc_id, "started alloc runner");
                self.write_runners().insert(alloc_id, Arc::new(runner));
            }
            Err(error) => {
                // Remembered at this index so it is not retried in a loop; a newer version
                // from the server gets another try.
                tracing::error!(alloc_id, %error, "could not start an alloc runner");
                lock(&self.runnerless_allocs).insert(alloc_id, alloc_modify_index);
            }
        }
    }
}

/// The node record [`Client::start`] registers: the identity (loaded, or created and
/// persisted on first start) and the machine's fingerprint. Blocking file I/O; callers that
/// want to overlap it with other start-up work run it on a blocking thread and hand the
/// result to [`Client::start_with_node`].
pub fn build_node(config: &NodeConfig) -> Result<Node, ClientError> {
    let identity = if config.ephemeral {
        NodeIdentity::generate()
    } else {
        NodeIdentity::load_or_create(&config.client_state_dir())?
    };
    let fingerprint = fingerprint_host(&FingerprintInput {
        data_dir: config.data_dir.clone(),
        agent_version: config.agent_version.clone(),
        update_time: Timestamp::from_unix_nanos(config.clock.now_unix_nanos()),
    });
    let mut attributes = fingerprint.attributes;
    let mut resources = fingerprint.resources;
    let reserved_resources = config.resources.apply(&mut resources, &mut attributes);
    if let Some(address) = advertised_ip(&config.http_addr) {
        attributes.insert("unique.network.ip-address".to_string(), address);
    }
    Ok(Node {
        id: identity.node_id,
        secret_id: identity.secret_id,
        datacenter: config.datacenter.clone(),
        name: config.name.clone(),
        http_addr: config.http_addr.clone(),
        node_pool: config.node_pool.clone(),
        node_class: config.node_class.clone(),
        attributes,
        meta: config.meta.clone(),
        node_resources: Some(resources),
        reserved_resources,
        drivers: fingerprint.drivers,
        scheduling_eligibility: NODE_SCHEDULING_ELIGIBLE.to_string(),
        status: NODE_STATUS_READY.to_string(),
        status_updated_at: config.clock.now_unix_nanos() / 1_000_000_000,
        ..Node::default()
    })
}

/// The IP address part of an HTTP address (`127.0.0.1:4646`, `[::1]:4646`), which Nomad
/// publishes as `unique.network.ip-address` (the node list's `Address`).
fn advertised_ip(http_addr: &str) -> Option<String> {
    let socket: std::net::SocketAddr = http_addr.parse().ok()?;
    Some(socket.ip().to_string())
}

/// The status of an allocation stopped by the server before this node ran any of it: every
/// task dead, not failed, the allocation complete.
fn never_ran_update(alloc: &Allocation) -> AllocClientUpdate {
    let task_names: Vec<String> = alloc
        .job
        .as_deref()
        .and_then(|job| job.lookup_task_group(&alloc.task_group))
        .map(|group| group.tasks.iter().map(|task| task.name.clone()).collect())
        .unwrap_or_default();
    let task_states = task_names
        .into_iter()
        .map(|name| {
            (
                name,
                TaskState {
                    state: TASK_STATE_DEAD.to_string(),
                    ..TaskState::default()
                },
            )
        })
        .collect();
    AllocClientUpdate {
        alloc_id: alloc.id.clone(),
        client_status: ALLOC_CLIENT_STATUS_COMPLETE.to_string(),
        client_description: "Stopped before it started on the node".to_string(),
        task_states,
        ..AllocClientUpdate::default()
    }
}

/// The node's persistent identity: its ID and its secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeIdentity {
    pub node_id: String,
    pub secret_id: String,
}

impl NodeIdentity {
    /// A fresh identity, not persisted (dev mode without a data dir).
    pub fn generate() -> Self {
        Self {
            node_id: uuid::Uuid::new_v4().to_string(),
            secret_id: uuid::Uuid::new_v4().to_string(),
        }
    }

    /// Reads `node-id` and `secret-id` from the client state dir, creating and persisting them
    /// (atomically) on first start. A file holding something other than a UUID is replaced.
    pub fn load_or_create(client_state_dir: &Path) -> Result<Self, ClientError> {
        std::fs::create_dir_all(client_state_dir).map_err(|source| ClientError::NodeIdentity {
            path: client_state_dir.to_path_buf(),
            source,
        })?;
        Ok(Self {
            node_id: load_or_create_uuid(&client_state_dir.join("node-id"))?,
            secret_id: load_or_create_uuid(&client_state_dir.join("secret-id"))?,
        })
    }
}

fn load_or_create_uuid(path: &Path) -> Result<String, ClientError> {
    let identity_error = |source| ClientError::NodeIdentity {
        path: path.to_path_buf(),
        source,
    };
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let existing = text.trim();
            if drover_structs::ids::is_uuid(existing) {
                return Ok(existing.to_string());
            }
            tracing::warn!(path = %path.display(), "node identity file does not hold a UUID; replacing it");
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => return Err(identity_error(error)),
    }
    let fresh = uuid::Uuid::new_v4().to_string();
    write_atomically(path, fresh.as_bytes()).map_err(identity_error)?;
    Ok(fresh)
}

/// Writes a temporary file beside `path`, syncs it, renames it over `path`, syncs the dir.
fn write_atomically(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let parent = path.parent().unwrap_or(Path::new("."));
    let file_name = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temporary = parent.join(format!(".{file_name}.tmp"));
    {
        let mut file = std::fs::File::create(&temporary)?;
        file.write_all(contents)?;
        file.sync_all()?;
    }
    std::fs::rename(&temporary, path)?;
    std::fs::File::open(parent)?.sync_all()
}

/// Converts the drivers' task usage into Nomad's wire form, with the allocation's sum.
pub fn alloc_resource_usage(
    usage: &BTreeMap<String, drover_driver::TaskResourceUsage>,
    node_total_mhz: f64,
    node_cores: u32,
) -> drover_structs::AllocResourceUsage {
    let mut total = drover_structs::ResourceUsage::default();
    let mut tasks = BTreeMap::new();
    let mut latest = 0i64;
    for (name, task) in usage {
        let resource_usage = drover_structs::ResourceUsage {
            memory_stats: drover_structs::MemoryStats {
                rss: task.memory.rss,
                cache: task.memory.cache,
                swap: task.memory.swap,
                usage: task.memory.usage,
                max_usage: task.memory.max_usage,
                kernel_usage: task.memory.kernel_usage,
                kernel_max_usage: task.memory.kernel_max_usage,
                measured: task.memory.measured.clone(),
                ..Default::default()
            },
            cpu_stats: drover_structs::CpuStats {
                system_mode: task.cpu.system_mode_percent,
                user_mode: task.cpu.user_mode_percent,
                total_ticks: task.cpu.total_ticks(node_total_mhz, node_cores),
                throttled_periods: task.cpu.throttled_periods,
                throttled_time: task.cpu.throttled_time_ns,
                percent: task.cpu.percent,
                measured: task.cpu.measured.clone(),
            },
            device_stats: None,
        };
        total.add(&resource_usage);
        let timestamp = i64::try_from(task.timestamp_unix_ns).unwrap_or(i64::MAX);
        latest = latest.max(timestamp);
        tasks.insert(
            name.clone(),
            drover_structs::TaskResourceUsage {
                resource_usage,
                timestamp,
                pids: None,
            },
        );
    }
    drover_structs::AllocResourceUsage {
        resource_usage: total,
        tasks,
        timestamp: latest,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::TokioFollowingClock;
    use crate::node_sim::{
        InMemoryServer, SimAllocRunner, SimAllocRunnerFactory, SimRunnerTiming, simulated_node,
    };
    use drover_structs::{
        ALLOC_CLIENT_STATUS_PENDING, ALLOC_CLIENT_STATUS_RUNNING, ALLOC_DESIRED_STATUS_RUN,
        ALLOC_DESIRED_STATUS_STOP, Job, TASK_STATE_RUNNING, Task, TaskGroup,
    };

    type SimClient = Client<InMemoryServer, SimAllocRunnerFactory>;

    #[test]
    fn contact_is_lost_once_the_last_answered_heartbeat_is_older_than_the_ttl() {
        let beat = tokio::time::Instant::now();
        let ttl = Duration::from_secs(10);
        assert_eq!(
            HeartbeatStatus::default().contact_at(beat),
            ServerContact::NotRegistered
        );
        let status = HeartbeatStatus {
            registered: true,
            ttl,
            last_heartbeat: Some(beat),
        };
        assert_eq!(status.contact_at(beat + ttl), ServerContact::Ok);
        assert_eq!(
            status.contact_at(beat + ttl + Duration::from_secs(1)),
            ServerContact::HeartbeatOverdue {
                since: ttl + Duration::from_secs(1)
            }
        );
    }

    #[test]
    fn resource_settings_override_the_fingerprint_and_give_the_reserved_resources() {
        let mut resources = NodeResources::default();
        resources.cpu.cpu_shares = 4000;
        resources.cpu.reservable_cpu_cores = vec![0, 1, 2, 3];
        resources.memory.memory_mb = 8192;
        let mut attributes = BTreeMap::new();
        assert_eq!(
            NodeResourceSettings::default().apply(&mut resources.clone(), &mut attributes),
            None,
            "nothing reserved, no reserved resources"
        );

        let mut settings = NodeResourceSettings {
            cpu_total_compute: Some(2000),
            memory_total_mb: Some(1024),
            reservable_cores: Some(vec![2, 3]),
            ..NodeResourceSettings::default()
        };
        settings.reserved.cpu.reserved_cpu_cores = vec![3];
        settings.reserved.memory.memory_mb = 128;
        let reserved = settings.apply(&mut resources, &mut attributes);
        assert_eq!(resources.cpu.cpu_shares, 2000);
        assert_eq!(resources.memory.memory_mb, 1024);
        assert_eq!(resources.cpu.reservable_cpu_cores, vec![2, 3]);
        assert_eq!(attributes["cpu.totalcompute"], "2000");
        assert_eq!(attributes["memory.totalbytes"], (1024u64 << 20).to_string());
        assert_eq!(attributes["cpu.reservablecores"], "2");
        assert_eq!(reserved, Some(settings.reserved.clone()));
    }

    const LIMIT: Duration = Duration::from_secs(60);

    /// Polls `condition` on (paused) time until it holds; fails the test after `LIMIT`.
    async fn eventually(what: &str, condition: impl Fn() -> bool) {
        let deadline = tokio::time::Instant::now() + LIMIT;
        while !condition() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for: {what}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn clock() -> SharedClock {
        Arc::new(TokioFollowingClock::starting_at(1_700_000_000_000_000_000))
    }

    fn config(data_dir: &Path) -> NodeConfig {
        let mut config = NodeConfig::new(data_dir, "sim-node-1", clock());
        config.ephemeral = true;
        config.alloc_query_wait = Duration::from_secs(30);
        config
    }

    fn alloc_for(node_id: &str, tasks: &[&str]) -> Allocation {
        let job = Job {
            id: "web".to_string(),
            name: "web".to_string(),
            r#type: "service".to_string(),
            task_groups: vec![TaskGroup {
                name: "web".to_string(),
                tasks: tasks
                    .iter()
                    .map(|name| Task {
                        name: name.to_string(),
                        ..Task::default()
                    })
                    .collect(),
                ..TaskGroup::default()
            }],
            ..Job::default()
        };
        Allocation {
            id: uuid::Uuid::new_v4().to_string(),
            node_id: node_id.to_string(),
            name: "web.web[0]".to_string(),
            job_id: "web".to_string(),
            task_group: "web".to_string(),
            job: Some(std::sync::Arc::new(job)),
            desired_status: ALLOC_DESIRED_STATUS_RUN.to_string(),
            ..Allocation::default()
        }
    }

    struct Harness {
        server: Arc<InMemoryServer>,
        client: Arc<SimClient>,
        node_id: String,
        _data_dir: tempfile::TempDir,
    }

    async fn start(timing: SimRunnerTiming) -> Harness {
        start_with(timing, |_| {}).await
    }

    async fn start_with(timing: SimRunnerTiming, adjust: impl FnOnce(&mut NodeConfig)) -> Harness {
        let data_dir = tempfile::tempdir().unwrap_or_else(|error| panic!("tempdir: {error}"));
        let server = Arc::new(InMemoryServer::new(Duration::from_secs(10)));
        let node_id = uuid::Uuid::new_v4().to_string();
        let node = simulated_node(&node_id, "sim-node-1", "dc1");
        let mut node_config = config(data_dir.path());
        adjust(&mut node_config);
        let client = Client::start_with_node(
            node_config,
            node,
            Arc::clone(&server),
            SimAllocRunnerFactory::new(timing, clock()),
        )
        .await
        .unwrap_or_else(|error| panic!("client start: {error}"));
        client.wait_registered().await;
        Harness {
            server,
            client,
            node_id,
            _data_dir: data_dir,
        }
    }

    fn server_status(server: &InMemoryServer, alloc_id: &str) -> String {
        server
            .alloc(alloc_id)
            .map(|alloc| alloc.client_status)
            .unwrap_or_default()
    }

    #[tokio::test(start_paused = true)]
    async fn a_new_alloc_gets_a_runner_and_its_status_reaches_the_server() {
        let harness = start(SimRunnerTiming::default()).await;
        assert!(
            harness.server.node(&harness.node_id).is_some(),
            "node registered"
        );

        let alloc = alloc_for(&harness.node_id, &["server", "sidecar"]);
        let alloc_id = alloc.id.clone();
        harness.server.place_alloc(alloc);

        eventually("the alloc runs on the server's books", || {
            server_status(&harness.server, &alloc_id) == ALLOC_CLIENT_STATUS_RUNNING
        })
        .await;
        let on_server = harness.server.alloc(&alloc_id).unwrap_or_default();
        assert_eq!(on_server.client_description, "Tasks are running");
        assert_eq!(on_server.task_states.len(), 2);
        assert!(
            on_server
                .task_states
                .values()
                .all(|task| task.state == TASK_STATE_RUNNING)
        );
        assert_eq!(harness.client.alloc_ids(), vec![alloc_id.clone()]);
        let local = harness.client.alloc(&alloc_id).unwrap_or_default();
        assert_eq!(local.client_status, ALLOC_CLIENT_STATUS_RUNNING);
        assert_eq!(local.alloc_modify_index, on_server.alloc_modify_index);

        // The client's own update bumped ModifyIndex, not AllocModifyIndex: no refetch loop,
        // no second runner.
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(harness.client.alloc_ids().len(), 1);
        harness.client.shutdown().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_server_stop_is_delivered_and_the_terminal_alloc_is_kept_until_gc() {
        let harness = start(SimRunnerTiming::default()).await;
        let alloc = alloc_for(&harness.node_id, &["server"]);
        let alloc_id = alloc.id.clone();
        harness.server.place_alloc(alloc);
        eventually("running", || {
            server_status(&harness.server, &alloc_id) == ALLOC_CLIENT_STATUS_RUNNING
        })
        .await;

        assert!(harness.server.stop_alloc(&alloc_id));
        eventually("complete after the stop", || {
            server_status(&harness.server, &alloc_id) == ALLOC_CLIENT_STATUS_COMPLETE
        })
        .await;
        let local = harness.client.alloc(&alloc_id).unwrap_or_default();
        assert_eq!(local.desired_status, ALLOC_DESIRED_STATUS_STOP);
        let events: Vec<String> = local.task_states["server"]
            .events
            .iter()
            .map(|event| event.r#type.clone())
            .collect();
        assert_eq!(events, ["Received", "Started", "Killing", "Killed"]);
        // Terminal, but kept (logs stay readable) until collected.
        assert_eq!(harness.client.alloc_ids(), vec![alloc_id.clone()]);

        harness
            .client
            .gc(&alloc_id)
            .await
            .unwrap_or_else(|error| panic!("gc: {error}"));
        assert!(matches!(
            harness.client.alloc(&alloc_id),
            Err(ClientError::UnknownAlloc { .. })
        ));
        // Later writes wake the watcher; the collected alloc is not fetched and run again.
        harness
            .server
            .place_alloc(alloc_for("some-other-node", &["x"]));
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(harness.client.alloc_ids().is_empty());
        harness.client.shutdown().await;
    }

    #[tokio::test(start_paused = true)]
    async fn an_alloc_removed_by_the_server_is_destroyed_and_forgotten() {
        let harness = start(SimRunnerTiming::default()).await;
        let alloc = alloc_for(&harness.node_id, &["server"]);
        let alloc_id = alloc.id.clone();
        harness.server.place_alloc(alloc);
        eventually("running", || {
            server_status(&harness.server, &alloc_id) == ALLOC_CLIENT_STATUS_RUNNING
        })
        .await;
        let runner: Arc<SimAllocRunner> = harness
            .client
            .runner(&alloc_id)
            .unwrap_or_else(|error| panic!("runner: {error}"));

        assert!(harness.server.remove_alloc(&alloc_id));
        eventually("the runner is gone", || {
            harness.client.runner(&alloc_id).is_err()
        })
        .await;
        assert!(runner.is_destroyed());
        assert!(
            runner
                .task_states()
                .values()
                .all(|task| task.state == TASK_STATE_DEAD)
        );
        // Its last update still goes out, then the buffer forgets it.
        eventually("the last update to be sent and forgotten", || {
            harness
                .client
                .status_buffer()
                .pending_update(&alloc_id)
                .is_none()
        })
        .await;
        harness.client.shutdown().await;
    }

    #[tokio::test(start_paused = true)]
    async fn an_alloc_stopped_before_it_ran_is_reported_complete_without_a_runner() {
        let harness = start(SimRunnerTiming::default()).await;
        let mut alloc = alloc_for(&harness.node_id, &["server"]);
        alloc.desired_status = ALLOC_DESIRED_STATUS_STOP.to_string();
        alloc.client_status = ALLOC_CLIENT_STATUS_PENDING.to_string();
        let alloc_id = alloc.id.clone();
        harness.server.place_alloc(alloc);
        eventually("complete", || {
            server_status(&harness.server, &alloc_id) == ALLOC_CLIENT_STATUS_COMPLETE
        })
        .await;
        assert!(harness.client.alloc_ids().is_empty());
        let on_server = harness.server.alloc(&alloc_id).unwrap_or_default();
        assert_eq!(on_server.task_states["server"].state, TASK_STATE_DEAD);
        harness.client.shutdown().await;
    }

    #[tokio::test(start_paused = true)]
    async fn api_operations_answer_typed_errors() {
        let harness = start(SimRunnerTiming::default()).await;
        let unknown = harness.client.alloc("nope");
        let Err(error) = unknown else {
            panic!("an unknown alloc was found")
        };
        assert_eq!(error.kind(), ClientErrorKind::NotFound);
        assert_eq!(error.to_string(), "Unknown allocation \"nope\"");

        let alloc = alloc_for(&harness.node_id, &["server"]);
        let alloc_id = alloc.id.clone();
        harness.server.place_alloc(alloc);
        eventually("running", || {
            server_status(&harness.server, &alloc_id) == ALLOC_CLIENT_STATUS_RUNNING
        })
        .await;

        let bad_task = harness
            .client
            .restart(&alloc_id, Some("nosuch"), false)
            .await;
        assert!(matches!(bad_task, Err(ref error) if error.kind() == ClientErrorKind::BadRequest));
        let bad_signal = harness
            .client
            .signal(&alloc_id, Some("nosuch"), "SIGUSR1")
            .await;
        assert!(
            matches!(bad_signal, Err(ref error) if error.kind() == ClientErrorKind::BadRequest)
        );
        let live_gc = harness.client.gc(&alloc_id).await;
        assert!(matches!(live_gc, Err(ClientError::NotTerminal { .. })));

        harness
            .client
            .restart(&alloc_id, Some("server"), false)
            .await
            .unwrap_or_else(|error| panic!("restart: {error}"));
        harness
            .client
            .signal(&alloc_id, None, "SIGUSR1")
            .await
            .unwrap_or_else(|error| panic!("signal: {error}"));
        let task = harness
            .client
            .alloc(&alloc_id)
            .unwrap_or_default()
            .task_states["server"]
            .clone();
        assert_eq!(task.restarts, 1);
        let last = task.events.last().map(|event| event.r#type.clone());
        assert_eq!(last.as_deref(), Some("Signaling"));

        harness
            .client
            .stop(&alloc_id)
            .await
            .unwrap_or_else(|error| panic!("stop: {error}"));
        eventually("complete after a local stop", || {
            server_status(&harness.server, &alloc_id) == ALLOC_CLIENT_STATUS_COMPLETE
        })
        .await;
        harness.client.shutdown().await;
    }

    #[tokio::test(start_paused = true)]
    async fn heartbeats_keep_going_and_a_forgotten_node_registers_again() {
        let harness = start(SimRunnerTiming::default()).await;
        eventually("two heartbeats", || {
            harness.server.heartbeat_count(&harness.node_id) >= 2
        })
        .await;
        assert!(harness.client.heartbeat_status().registered);
        assert_eq!(
            harness.client.heartbeat_status().ttl,
            Duration::from_secs(10)
        );

        assert!(harness.server.forget_node(&harness.node_id));
        eventually("registered again", || {
            harness.server.node(&harness.node_id).is_some()
        })
        .await;
        harness.client.shutdown().await;
    }

    #[tokio::test(start_paused = true)]
    async fn registration_is_retried_with_backoff_until_the_server_answers() {
        let data_dir = tempfile::tempdir().unwrap_or_else(|error| panic!("tempdir: {error}"));
        let server = Arc::new(InMemoryServer::new(Duration::from_secs(10)));
        server.fail_next_registrations(3);
        let node_id = uuid::Uuid::new_v4().to_string();
        let started = tokio::time::Instant::now();
        let client = Client::start_with_node(
            config(data_dir.path()),
            simulated_node(&node_id, "sim-node-1", "dc1"),
            Arc::clone(&server),
            SimAllocRunnerFactory::new(SimRunnerTiming::default(), clock()),
        )
        .await
        .unwrap_or_else(|error| panic!("client start: {error}"));
        client.wait_registered().await;
        assert_eq!(server.register_calls(), 4);
        assert!(server.node(&node_id).is_some());
        // Backoff 1 s, 2 s, 4 s (plus jitter) before the fourth attempt; never a busy loop.
        let waited = tokio::time::Instant::now() - started;
        assert!(waited >= Duration::from_secs(7), "retried after {waited:?}");
        assert!(
            waited <= Duration::from_secs(11),
            "retried after {waited:?}"
        );
        client.shutdown().await;
    }

    #[tokio::test(start_paused = true)]
    async fn status_survives_a_server_outage() {
        let harness = start(SimRunnerTiming::default()).await;
        harness.server.fail_next_updates(3);
        let alloc = alloc_for(&harness.node_id, &["server"]);
        let alloc_id = alloc.id.clone();
        harness.server.place_alloc(alloc);
        eventually("running despite failed sends", || {
            server_status(&harness.server, &alloc_id) == ALLOC_CLIENT_STATUS_RUNNING
        })
        .await;
        assert!(harness.server.update_calls() >= 4);
        harness.client.shutdown().await;
    }

    #[tokio::test(start_paused = true)]
    async fn batch_allocs_complete_on_their_own() {
        let harness = start(SimRunnerTiming {
            start_delay: Duration::from_millis(10),
            run_for: Some(Duration::from_secs(3)),
        })
        .await;
        let alloc = alloc_for(&harness.node_id, &["job"]);
        let alloc_id = alloc.id.clone();
        harness.server.place_alloc(alloc);
        eventually("complete", || {
            server_status(&harness.server, &alloc_id) == ALLOC_CLIENT_STATUS_COMPLETE
        })
        .await;
        assert_eq!(harness.client.gc_all().await, 1);
        assert!(harness.client.alloc_ids().is_empty());
        harness.client.shutdown().await;
    }

    #[tokio::test(start_paused = true)]
    async fn past_gc_max_allocs_the_oldest_terminal_allocs_are_collected() {
        let harness = start_with(
            SimRunnerTiming {
                start_delay: Duration::from_millis(10),
                run_for: Some(Duration::from_secs(1)),
            },
            |config| config.gc_max_allocs = 2,
        )
        .await;
        let mut ids = Vec::new();
        for _ in 0..4 {
            let alloc = alloc_for(&harness.node_id, &["job"]);
            ids.push(alloc.id.clone());
            harness.server.place_alloc(alloc);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        eventually("all complete", || {
            ids.iter()
                .all(|id| server_status(&harness.server, id) == ALLOC_CLIENT_STATUS_COMPLETE)
        })
        .await;
        eventually("two collected", || harness.client.alloc_ids().len() == 2).await;
        let mut newest = ids[2..].to_vec();
        newest.sort();
        assert_eq!(harness.client.alloc_ids(), newest, "the oldest go first");
        harness.client.shutdown().await;
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_leaves_allocs_running_and_stop_all_kills_them() {
        let harness = start(SimRunnerTiming::default()).await;
        let first = alloc_for(&harness.node_id, &["server"]);
        let second = alloc_for(&harness.node_id, &["server"]);
        let ids = [first.id.clone(), second.id.clone()];
        harness.server.place_alloc(first);
        harness.server.place_alloc(second);
        eventually("both running", || {
            ids.iter()
                .all(|id| server_status(&harness.server, id) == ALLOC_CLIENT_STATUS_RUNNING)
        })
        .await;

        harness.client.shutdown_and_stop_all().await;
        for id in &ids {
            assert_eq!(
                server_status(&harness.server, id),
                ALLOC_CLIENT_STATUS_COMPLETE
            );
        }
        assert!(harness.client.alloc_ids().is_empty());

        let kept = start(SimRunnerTiming::default()).await;
        let alloc = alloc_for(&kept.node_id, &["server"]);
        let alloc_id = alloc.id.clone();
        kept.server.place_alloc(alloc);
        eventually("running", || {
            server_status(&kept.server, &alloc_id) == ALLOC_CLIENT_STATUS_RUNNING
        })
        .await;
        let runner = kept
            .client
            .runner(&alloc_id)
            .unwrap_or_else(|error| panic!("{error}"));
        kept.client.shutdown().await;
        assert!(!runner.is_destroyed());
        assert_eq!(
            server_status(&kept.server, &alloc_id),
            ALLOC_CLIENT_STATUS_RUNNING
        );
        assert!(
            runner
                .task_states()
                .values()
                .all(|task| task.state == TASK_STATE_RUNNING),
            "a plain shutdown leaves the tasks running"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_real_node_fingerprints_and_keeps_its_id_across_starts() {
        let data_dir = tempfile::tempdir().unwrap_or_else(|error| panic!("tempdir: {error}"));
        let server = Arc::new(InMemoryServer::new(Duration::from_secs(10)));
        let mut node_config = NodeConfig::new(data_dir.path(), "real-node", clock());
        node_config.http_addr = "127.0.0.1:4646".to_string();
        node_config.agent_version = "1.7.0".to_string();

        let first = SimClient::start(
            node_config.clone(),
            Arc::clone(&server),
            SimAllocRunnerFactory::new(SimRunnerTiming::default(), clock()),
        )
        .await
        .unwrap_or_else(|error| panic!("start: {error}"));
        first.wait_registered().await;
        let node_id = first.node_id();
        let registered = server.node(&node_id).unwrap_or_default();
        assert_eq!(registered.http_addr, "127.0.0.1:4646");
        assert_eq!(registered.status, NODE_STATUS_READY);
        let resources = registered.node_resources.clone().unwrap_or_default();
        assert!(resources.memory.memory_mb > 0 && resources.cpu.cpu_shares > 0);
        assert_eq!(
            registered
                .attributes
                .get("nomad.version")
                .map(String::as_str),
            Some("1.7.0")
        );
        let on_disk =
            std::fs::read_to_string(data_dir.path().join("client/node-id")).unwrap_or_default();
        assert_eq!(on_disk, node_id);
        first.shutdown().await;

        let second = SimClient::start(
            node_config,
            Arc::clone(&server),
            SimAllocRunnerFactory::new(SimRunnerTiming::default(), clock()),
        )
        .await
        .unwrap_or_else(|error| panic!("start: {error}"));
        assert_eq!(second.node_id(), node_id, "the node ID survives a restart");
        second.shutdown().await;
    }

    #[test]
    fn a_corrupt_node_id_file_is_replaced() {
        let dir = tempfile::tempdir().unwrap_or_else(|error| panic!("tempdir: {error}"));
        std::fs::write(dir.path().join("node-id"), "not a uuid\n")
            .unwrap_or_else(|error| panic!("write: {error}"));
        let identity = NodeIdentity::load_or_create(dir.path())
            .unwrap_or_else(|error| panic!("identity: {error}"));
        assert!(drover_structs::ids::is_uuid(&identity.node_id));
        assert_ne!(identity.node_id, identity.secret_id);
        let again = NodeIdentity::load_or_create(dir.path())
            .unwrap_or_else(|error| panic!("identity: {error}"));
        assert_eq!(again, identity);
    }

    #[test]
    fn alloc_usage_sums_its_tasks_and_scales_ticks_by_the_node() {
        let task = |rss: u64, percent: f64, timestamp: u64| drover_driver::TaskResourceUsage {
            timestamp_unix_ns: timestamp,
            memory: drover_driver::MemoryUsage {
                rss,
                usage: rss * 2,
                measured: vec!["RSS".to_string()],
                ..Default::default()
            },
            cpu: drover_driver::CpuUsage {
                percent,
                measured: vec!["Percent".to_string()],
                ..Default::default()
            },
            pids: vec![1],
        };
        let usage = BTreeMap::from([
            ("web".to_string(), task(100, 50.0, 7)),
            ("sidecar".to_string(), task(20, 25.0, 9)),
        ]);
        // Two cores of 2000 MHz: half a core is 1000 MHz of ticks.
        let alloc = alloc_resource_usage(&usage, 4000.0, 2);
        assert_eq!(
            alloc.tasks["web"].resource_usage.cpu_stats.total_ticks,
            1000.0
        );
        assert_eq!(alloc.resource_usage.memory_stats.rss, 120);
        assert_eq!(alloc.resource_usage.memory_stats.usage, 240);
        assert_eq!(alloc.resource_usage.cpu_stats.total_ticks, 1500.0);
        assert_eq!(
            alloc.resource_usage.memory_stats.measured,
            vec!["RSS".to_string()]
        );
        assert_eq!(alloc.timestamp, 9);
    }
}
