//! The node simulator's parts: a minimal alloc runner that pretends to run an allocation
//! (pending → running → complete on timers, stop on request) and reports through the same
//! [`StatusBuffer`] as the real runner; and [`InMemoryServer`], a real in-memory implementation
//! of [`ServerConn`] (it holds nodes and allocations, bumps indexes, and answers blocking
//! queries) for tests and client-side benchmarks.
//!
//! [`SimAllocRunner`] is the proof that [`AllocRunnerHandle`] is small: everything a node needs
//! from an alloc runner fits in this file. The benchmark crate starts thousands of
//! [`Client`]s with it (through `Client::start_with_node` and
//! [`simulated_node`]) to drive a server at fleet scale.
//!
//! **Not here**: processes, alloc dirs, persisted state — a simulated runner has none, and its
//! restore finds nothing.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use drover_structs::{
    ALLOC_CLIENT_STATUS_PENDING, ALLOC_DESIRED_STATUS_STOP, Allocation, DriverInfo,
    NODE_SCHEDULING_ELIGIBLE, NODE_STATUS_READY, Node, NodeCpuResources, NodeDiskResources,
    NodeMemoryResources, NodeResources, ServiceRegistration, TASK_KILLED, TASK_KILLING,
    TASK_RECEIVED, TASK_RESTART_SIGNAL, TASK_RESTARTING, TASK_SIGNALING, TASK_STARTED,
    TASK_STATE_DEAD, TASK_STATE_PENDING, TASK_STATE_RUNNING, TASK_TERMINATED, TaskEvent, TaskState,
    Timestamp, derive_client_status,
};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::clock::SharedClock;
use crate::node::{
    AllocRunnerFactory, AllocRunnerHandle, Client, ClientError, NodeConfig, RunnerContext,
};
use crate::server_conn::{AllocClientUpdate, NodeAllocations, ServerConn, ServerConnError};
use crate::status_buffer::StatusBuffer;

/// The task name a simulated allocation uses when its job names no tasks.
pub const SIMULATED_TASK_NAME: &str = "sim";

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Each critical section is a field update that leaves the data consistent; a poisoned lock
    // is still usable.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// How long a simulated allocation takes to start and to finish.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimRunnerTiming {
    /// From spawn to `running`.
    pub start_delay: Duration,
    /// From `running` to `complete`; `None` runs until stopped, like a service.
    pub run_for: Option<Duration>,
}

impl Default for SimRunnerTiming {
    fn default() -> Self {
        Self {
            start_delay: Duration::from_millis(50),
            run_for: None,
        }
    }
}

/// Makes [`SimAllocRunner`]s; counts them for the benchmark's reports.
#[derive(Debug)]
pub struct SimAllocRunnerFactory {
    timing: SimRunnerTiming,
    clock: SharedClock,
    spawned: AtomicUsize,
}

impl SimAllocRunnerFactory {
    pub fn new(timing: SimRunnerTiming, clock: SharedClock) -> Self {
        Self {
            timing,
            clock,
            spawned: AtomicUsize::new(0),
        }
    }

    /// How many runners this factory has started.
    pub fn spawned_count(&self) -> usize {
        self.spawned.load(Ordering::Relaxed)
    }
}

impl AllocRunnerFactory for SimAllocRunnerFactory {
    type Runner = SimAllocRunner;

    async fn spawn(
        &self,
        alloc: Allocation,
        context: &RunnerContext,
    ) -> Result<SimAllocRunner, ClientError> {
        self.spawned.fetch_add(1, Ordering::Relaxed);
        Ok(SimAllocRunner::start(
            alloc,
            Arc::clone(&context.status),
            self.timing,
            Arc::clone(&self.clock),
        ))
    }

    async fn restore(&self, _context: &RunnerContext) -> Result<Vec<SimAllocRunner>, ClientError> {
        Ok(Vec::new())
    }
}

/// A pretend alloc runner: its tasks are names and states, its life two timers.
#[derive(Debug)]
pub struct SimAllocRunner {
    shared: Arc<SimShared>,
    timers: JoinHandle<()>,
}

#[derive(Debug)]
struct SimShared {
    state: Mutex<SimState>,
    status: Arc<StatusBuffer>,
    clock: SharedClock,
    /// Cancelled when the tasks are killed or the runner shuts down: the timers stop.
    stop_timers: CancellationToken,
    /// Set once the runner is destroyed; no more reports.
    destroyed: watch::Sender<bool>,
}

#[derive(Debug)]
struct SimState {
    alloc: Allocation,
    task_states: BTreeMap<String, TaskState>,
}

impl SimShared {
    fn event(&self, event_type: &str) -> TaskEvent {
        TaskEvent::new(event_type, self.clock.now_unix_nanos())
    }

    /// Applies a change to every task, derives the client status, and reports it.
    fn change_tasks(&self, change: impl Fn(&str, &mut TaskState, &Self)) {
        if *self.destroyed.borrow() {
            return;
        }
        let update = {
            let mut state = lock(&self.state);
            for (task_name, task_state) in state.task_states.iter_mut() {
                change(task_name, task_state, self);
            }
            let (client_status, description) = derive_client_status(&state.task_states);
            state.alloc.client_status = client_status.to_string();
            state.alloc.client_description = description.to_string();
            state.alloc.task_states = state.task_states.clone();
            AllocClientUpdate {
                alloc_id: state.alloc.id.clone(),
                client_status: state.alloc.client_status.clone(),
                client_description: state.alloc.client_description.clone(),
                task_states: state.task_states.clone(),
                ..AllocClientUpdate::default()
            }
        };
        self.status.report(update);
    }

    fn start_tasks(&self) {
        self.change_tasks(|_, task, shared| {
            if task.state == TASK_STATE_PENDING {
                task.state = TASK_STATE_RUNNING.to_string();
                task.started_at = Timestamp::from_unix_nanos(shared.clock.now_unix_nanos());
                task.push_event(shared.event(TASK_STARTED));
            }
        });
    }

    fn finish_tasks(&self) {
        self.change_tasks(|_, task, shared| {
            if task.state != TASK_STATE_DEAD {
                task.push_event(shared.event(TASK_TERMINATED).with_exit_code(0));
                task.state = TASK_STATE_DEAD.to_string();
                task.finished_at = Timestamp::from_unix_nanos(shared.clock.now_unix_nanos());
            }
        });
    }

    fn kill_tasks(&self) {
        self.stop_timers.cancel();
        self.change_tasks(|_, task, shared| {
            if task.state != TASK_STATE_DEAD {
                task.push_event(shared.event(TASK_KILLING));
                task.push_event(shared.event(TASK_KILLED));
                task.state = TASK_STATE_DEAD.to_string();
                task.finished_at = Timestamp::from_unix_nanos(shared.clock.now_unix_nanos());
            }
        });
    }

    fn check_task(&self, task: Option<&str>) -> Result<(), ClientError> {
        let state = lock(&self.state);
        match task {
            Some(name) if !state.task_states.contains_key(name) => Err(ClientError::UnknownTask {
                alloc_id: state.alloc.id.clone(),
                task: name.to_string(),
            }),
            _ => Ok(()),
        }
    }
}

fn task_names(alloc: &Allocation) -> Vec<String> {
    let names: Vec<String> = alloc
        .job
        .as_deref()
        .and_then(|job| job.lookup_task_group(&alloc.task_group))
        .map(|group| group.tasks.iter().map(|task| task.name.clone()).collect())
        .unwrap_or_default();
    if names.is_empty() {
        vec![SIMULATED_TASK_NAME.to_string()]
    } else {
        names
    }
}

impl SimAllocRunner {
    /// Starts pretending: every task `pending` with a `Received` event (reported at once), then
    /// `running` after `start_delay`, then `complete` after `run_for` if set.
    pub fn start(
        alloc: Allocation,
        status: Arc<StatusBuffer>,
        timing: SimRunnerTiming,
        clock: SharedClock,
    ) -> Self {
        let received_at = clock.now_unix_nanos();
        let task_states = task_names(&alloc)
            .into_iter()
            .map(|name| {
                let mut task_state = TaskState::default();
                task_state.push_event(TaskEvent::new(TASK_RECEIVED, received_at));
                (name, task_state)
            })
            .collect();
        let (destroyed, _) = watch::channel(false);
        let shared = Arc::new(SimShared {
            state: Mutex::new(SimState { alloc, task_states }),
            status,
            clock,
            stop_timers: CancellationToken::new(),
            destroyed,
        });
        shared.change_tasks(|_, _, _| {});
        let timer_shared = Arc::clone(&shared);
        let timers = tokio::spawn(async move {
            let shared = timer_shared;
            tokio::select! {
                _ = shared.stop_timers.cancelled() => return,
                _ = tokio::time::sleep(timing.start_delay) => shared.start_tasks(),
            }
            if let Some(run_for) = timing.run_for {
                tokio::select! {
                    _ = shared.stop_timers.cancelled() => {}
                    _ = tokio::time::sleep(run_for) => shared.finish_tasks(),
                }
            }
        });
        let runner = Self { shared, timers };
        if lock(&runner.shared.state).alloc.server_terminal_status() {
            runner.shared.kill_tasks();
        }
        runner
    }

    /// The simulated task states.
    pub fn task_states(&self) -> BTreeMap<String, TaskState> {
        lock(&self.shared.state).task_states.clone()
    }

    /// Whether [`destroy`](AllocRunnerHandle::destroy) has run.
    pub fn is_destroyed(&self) -> bool {
        *self.shared.destroyed.borrow()
    }
}

impl Drop for SimAllocRunner {
    fn drop(&mut self) {
        self.timers.abort();
    }
}

impl AllocRunnerHandle for SimAllocRunner {
    fn alloc(&self) -> Allocation {
        lock(&self.shared.state).alloc.clone()
    }

    fn alloc_modify_index(&self) -> u64 {
        lock(&self.shared.state).alloc.alloc_modify_index
    }

    fn is_client_terminal(&self) -> bool {
        lock(&self.shared.state).alloc.client_terminal_status()
    }

    async fn update(&self, alloc: Allocation) {
        let stop = alloc.server_terminal_status();
        {
            let mut state = lock(&self.shared.state);
            // The runner owns the client fields; the server's copy may lag behind them.
            let client_status = std::mem::take(&mut state.alloc.client_status);
            let client_description = std::mem::take(&mut state.alloc.client_description);
            state.alloc = Allocation {
                client_status,
                client_description,
                task_states: state.task_states.clone(),
                ..alloc
            };
        }
        if stop {
            self.shared.kill_tasks();
        }
    }

    async fn restart(&self, task: Option<&str>, all_tasks: bool) -> Result<(), ClientError> {
        self.shared.check_task(task)?;
        if self.is_client_terminal() && !all_tasks {
            return Err(ClientError::InvalidRequest {
                alloc_id: self.alloc().id,
                message: "allocation is not running".to_string(),
            });
        }
        let restarted_at = self.shared.clock.now_unix_nanos();
        self.shared.change_tasks(|task_name, state, shared| {
            // A simulated restart is instant: the task is running again at once.
            let selected = task.is_none_or(|wanted| wanted == task_name);
            if selected && (all_tasks || state.state == TASK_STATE_RUNNING) {
                state.push_event(shared.event(TASK_RESTART_SIGNAL));
                state.push_event(shared.event(TASK_RESTARTING));
                state.restarts += 1;
                state.last_restart = Timestamp::from_unix_nanos(restarted_at);
                state.state = TASK_STATE_RUNNING.to_string();
                state.push_event(shared.event(TASK_STARTED));
            }
        });
        Ok(())
    }

    async fn signal(&self, task: Option<&str>, signal: &str) -> Result<(), ClientError> {
        self.shared.check_task(task)?;
        let signal = signal.to_string();
        self.shared.change_tasks(move |task_name, state, shared| {
            let selected = task.is_none_or(|wanted| wanted == task_name);
            if selected && state.state == TASK_STATE_RUNNING {
                state.push_event(shared.event(TASK_SIGNALING).with_task_signal(&signal));
            }
        });
        Ok(())
    }

    async fn shutdown(&self) {
        self.shared.stop_timers.cancel();
    }

    async fn destroy(&self) {
        self.shared.kill_tasks();
        self.shared.destroyed.send_replace(true);
    }
}

/// A made-up node with fixed resources and a healthy `raw_exec` driver, for simulated fleets.
pub fn simulated_node(node_id: &str, name: &str, datacenter: &str) -> Node {
    let driver = DriverInfo {
        attributes: BTreeMap::from([("driver.raw_exec".to_string(), "1".to_string())]),
        detected: true,
        healthy: true,
        health_description: "Healthy".to_string(),
        update_time: Timestamp::ZERO,
    };
    Node {
        id: node_id.to_string(),
        secret_id: node_id.to_string(),
        datacenter: datacenter.to_string(),
        name: name.to_string(),
        node_pool: "default".to_string(),
        attributes: BTreeMap::from([
            ("kernel.name".to_string(), "linux".to_string()),
            ("cpu.arch".to_string(), "amd64".to_string()),
            ("unique.hostname".to_string(), name.to_string()),
            ("driver.raw_exec".to_string(), "1".to_string()),
        ]),
        node_resources: Some(NodeResources {
            cpu: NodeCpuResources {
                cpu_shares: 4000,
                total_cpu_cores: 4,
                reservable_cpu_cores: vec![0, 1, 2, 3],
            },
            memory: NodeMemoryResources { memory_mb: 8192 },
            disk: NodeDiskResources { disk_mb: 100_000 },
            ..NodeResources::default()
        }),
        drivers: BTreeMap::from([("raw_exec".to_string(), driver)]),
        scheduling_eligibility: NODE_SCHEDULING_ELIGIBLE.to_string(),
        status: NODE_STATUS_READY.to_string(),
        ..Node::default()
    }
}

/// A simulated node's client: what the node simulator starts thousands of.
pub type SimClient<S> = Client<S, SimAllocRunnerFactory>;

/// Starts one simulated node against `conn`: a made-up node record (`sim-node-<number>`, a
/// fresh UUID), no fingerprint, no data dir, nothing restored, and [`SimAllocRunner`]s for its
/// allocations. `adjust` may change the node config (timings, datacenter) before the start.
pub async fn start_simulated_node<S: ServerConn>(
    conn: Arc<S>,
    number: usize,
    timing: SimRunnerTiming,
    clock: SharedClock,
    adjust: impl FnOnce(&mut NodeConfig),
) -> Result<Arc<SimClient<S>>, ClientError> {
    let name = format!("sim-node-{number}");
    let mut config = NodeConfig::new(std::path::PathBuf::new(), name.clone(), Arc::clone(&clock));
    config.ephemeral = true;
    adjust(&mut config);
    let node = simulated_node(&uuid::Uuid::new_v4().to_string(), &name, &config.datacenter);
    Client::start_with_node(
        config,
        node,
        conn,
        SimAllocRunnerFactory::new(timing, clock),
    )
    .await
}

/// An in-memory server for one or many nodes: enough of the server side of [`ServerConn`] to
/// exercise a client for real (blocking queries wake on change, indexes move as Nomad's do:
/// `AllocModifyIndex` only on server-side changes, `ModifyIndex` on every write).
#[derive(Debug)]
pub struct InMemoryServer {
    state: Mutex<ServerState>,
    changed: watch::Sender<u64>,
    heartbeat_ttl: Duration,
}

#[derive(Debug, Default)]
struct ServerState {
    index: u64,
    nodes: HashMap<String, Node>,
    heartbeats: HashMap<String, u64>,
    allocs: HashMap<String, Allocation>,
    services: HashMap<String, ServiceRegistration>,
    update_calls: u64,
    updates_to_fail: u32,
    registrations_to_fail: u32,
    register_calls: u64,
    /// Every call fails as if no server could be reached.
    unreachable: bool,
}

impl InMemoryServer {
    pub fn new(heartbeat_ttl: Duration) -> Self {
        let (changed, _) = watch::channel(0);
        Self {
            state: Mutex::new(ServerState::default()),
            changed,
            heartbeat_ttl,
        }
    }

    /// Runs `write` on the state with the next index, then wakes the blocking queries.
    fn write<T>(&self, write: impl FnOnce(&mut ServerState, u64) -> T) -> T {
        let (result, index) = {
            let mut state = lock(&self.state);
            state.index += 1;
            let index = state.index;
            (write(&mut state, index), index)
        };
        self.changed.send_replace(index);
        result
    }

    /// Places an allocation (its `NodeID` says where); answers the write's index.
    pub fn place_alloc(&self, mut alloc: Allocation) -> u64 {
        self.write(|state, index| {
            alloc.create_index = index;
            alloc.modify_index = index;
            alloc.alloc_modify_index = index;
            if alloc.client_status.is_empty() {
                alloc.client_status = ALLOC_CLIENT_STATUS_PENDING.to_string();
            }
            state.allocs.insert(alloc.id.clone(), alloc);
            index
        })
    }

    /// Sets an allocation's desired status to `stop`, as the scheduler does.
    pub fn stop_alloc(&self, alloc_id: &str) -> bool {
        self.write(|state, index| match state.allocs.get_mut(alloc_id) {
            Some(alloc) => {
                alloc.desired_status = ALLOC_DESIRED_STATUS_STOP.to_string();
                alloc.desired_description = "alloc is being stopped".to_string();
                alloc.modify_index = index;
                alloc.alloc_modify_index = index;
                true
            }
            None => false,
        })
    }

    /// Drops an allocation, as the server's garbage collector does.
    pub fn remove_alloc(&self, alloc_id: &str) -> bool {
        self.write(|state, _| state.allocs.remove(alloc_id).is_some())
    }

    /// Forgets a node, so its next heartbeat is told to register again.
    pub fn forget_node(&self, node_id: &str) -> bool {
        self.write(|state, _| state.nodes.remove(node_id).is_some())
    }

    /// The server's copy of an allocation.
    pub fn alloc(&self, alloc_id: &str) -> Option<Allocation> {
        lock(&self.state).allocs.get(alloc_id).cloned()
    }

    /// The registered node.
    pub fn node(&self, node_id: &str) -> Option<Node> {
        lock(&self.state).nodes.get(node_id).cloned()
    }

    /// The service registrations the catalog holds, by ID.
    pub fn services(&self) -> BTreeMap<String, ServiceRegistration> {
        lock(&self.state)
            .services
            .iter()
            .map(|(id, registration)| (id.clone(), registration.clone()))
            .collect()
    }

    /// How many heartbeats a node has sent.
    pub fn heartbeat_count(&self, node_id: &str) -> u64 {
        lock(&self.state)
            .heartbeats
            .get(node_id)
            .copied()
            .unwrap_or(0)
    }

    /// How many `update_allocs` calls were answered (successfully or not).
    pub fn update_calls(&self) -> u64 {
        lock(&self.state).update_calls
    }

    /// Makes the next `count` `register_node` calls fail as if the server had no leader yet.
    pub fn fail_next_registrations(&self, count: u32) {
        lock(&self.state).registrations_to_fail = count;
    }

    /// How many `register_node` calls were answered (successfully or not).
    pub fn register_calls(&self) -> u64 {
        lock(&self.state).register_calls
    }

    /// Makes every registration, heartbeat, allocation query and status update fail (a
    /// network partition) until called again with `false`.
    pub fn set_unreachable(&self, unreachable: bool) {
        lock(&self.state).unreachable = unreachable;
    }

    fn check_reachable(&self) -> Result<(), ServerConnError> {
        if lock(&self.state).unreachable {
            return Err(ServerConnError::Unavailable {
                message: "simulated partition".to_string(),
            });
        }
        Ok(())
    }

    /// Makes the next `count` `update_allocs` calls fail as if the server were unreachable.
    pub fn fail_next_updates(&self, count: u32) {
        lock(&self.state).updates_to_fail = count;
    }

    fn snapshot_for_node(&self, node_id: &str) -> NodeAllocations {
        let state = lock(&self.state);
        NodeAllocations {
            alloc_modify_indexes: state
                .allocs
                .values()
                .filter(|alloc| alloc.node_id == node_id)
                .map(|alloc| (alloc.id.clone(), alloc.alloc_modify_index))
                .collect(),
            index: state.index,
        }
    }
}

impl ServerConn for InMemoryServer {
    async fn register_node(&self, node: Node) -> Result<Duration, ServerConnError> {
        self.check_reachable()?;
        if node.id.is_empty() {
            return Err(ServerConnError::Rejected {
                message: "missing node ID for client registration".to_string(),
            });
        }
        {
            let mut state = lock(&self.state);
            state.register_calls += 1;
            if state.registrations_to_fail > 0 {
                state.registrations_to_fail -= 1;
                return Err(ServerConnError::Internal {
                    message: "no cluster leader".to_string(),
                });
            }
        }
        self.write(|state, index| {
            let mut node = node;
            node.create_index = state
                .nodes
                .get(&node.id)
                .map_or(index, |previous| previous.create_index);
            node.modify_index = index;
            state.nodes.insert(node.id.clone(), node);
        });
        Ok(self.heartbeat_ttl)
    }

    async fn heartbeat(&self, node_id: &str, status: &str) -> Result<Duration, ServerConnError> {
        self.check_reachable()?;
        let mut state = lock(&self.state);
        let Some(node) = state.nodes.get_mut(node_id) else {
            return Err(ServerConnError::UnknownNode {
                node_id: node_id.to_string(),
            });
        };
        node.status = status.to_string();
        *state.heartbeats.entry(node_id.to_string()).or_default() += 1;
        Ok(self.heartbeat_ttl)
    }

    async fn node_allocs(
        &self,
        node_id: &str,
        min_index: u64,
        max_wait: Duration,
    ) -> Result<NodeAllocations, ServerConnError> {
        self.check_reachable()?;
        if !lock(&self.state).nodes.contains_key(node_id) {
            return Err(ServerConnError::UnknownNode {
                node_id: node_id.to_string(),
            });
        }
        let mut changes = self.changed.subscribe();
        let deadline = tokio::time::Instant::now() + max_wait;
        loop {
            // A server that forgot the node while the query waited no longer answers for it.
            if !lock(&self.state).nodes.contains_key(node_id) {
                return Err(ServerConnError::UnknownNode {
                    node_id: node_id.to_string(),
                });
            }
            let snapshot = self.snapshot_for_node(node_id);
            if snapshot.index > min_index {
                return Ok(snapshot);
            }
            match tokio::time::timeout_at(deadline, changes.changed()).await {
                Ok(Ok(())) => continue,
                // Timed out (or the server is gone): answer what there is.
                Ok(Err(_)) | Err(_) => return Ok(self.snapshot_for_node(node_id)),
            }
        }
    }

    async fn get_allocs(&self, alloc_ids: Vec<String>) -> Result<Vec<Allocation>, ServerConnError> {
        let state = lock(&self.state);
        Ok(alloc_ids
            .iter()
            .filter_map(|alloc_id| state.allocs.get(alloc_id).cloned())
            .collect())
    }

    async fn update_allocs(&self, updates: Vec<AllocClientUpdate>) -> Result<(), ServerConnError> {
        self.check_reachable()?;
        {
            let mut state = lock(&self.state);
            state.update_calls += 1;
            if state.updates_to_fail > 0 {
                state.updates_to_fail -= 1;
                return Err(ServerConnError::Unavailable {
                    message: "simulated outage".to_string(),
                });
            }
        }
        self.write(|state, index| {
            for update in updates {
                if let Some(alloc) = state.allocs.get_mut(&update.alloc_id) {
                    alloc.merge_client_update(Allocation::from(update), index);
                    alloc.modify_index = index;
                }
            }
        });
        Ok(())
    }

    async fn upsert_services(
        &self,
        registrations: Vec<ServiceRegistration>,
    ) -> Result<(), ServerConnError> {
        self.write(|state, index| {
            for mut registration in registrations {
                registration.modify_index = index;
                registration.create_index = state
                    .services
                    .get(&registration.id)
                    .map_or(index, |existing| existing.create_index);
                state.services.insert(registration.id.clone(), registration);
            }
        });
        Ok(())
    }

    async fn delete_services(&self, service_ids: Vec<String>) -> Result<(), ServerConnError> {
        self.write(|state, _| {
            for id in &service_ids {
                state.services.remove(id);
            }
        });
        Ok(())
    }
}

#[cfg(test)]
mod node_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::TokioFollowingClock;
    use drover_structs::{ALLOC_CLIENT_STATUS_RUNNING, ALLOC_DESIRED_STATUS_RUN};

    #[tokio::test(start_paused = true)]
    async fn a_fleet_of_simulated_nodes_runs_its_allocs_with_few_status_calls() {
        const NODES: usize = 100;
        const ALLOCS_PER_NODE: usize = 10;
        let clock: SharedClock =
            Arc::new(TokioFollowingClock::starting_at(1_700_000_000_000_000_000));
        let server = Arc::new(InMemoryServer::new(Duration::from_secs(10)));
        let mut fleet = Vec::new();
        for number in 0..NODES {
            let client = start_simulated_node(
                Arc::clone(&server),
                number,
                SimRunnerTiming::default(),
                Arc::clone(&clock),
                |_| {},
            )
            .await
            .unwrap_or_else(|error| panic!("start: {error}"));
            fleet.push(client);
        }
        for client in &fleet {
            client.wait_registered().await;
        }
        let mut alloc_ids = Vec::new();
        for client in &fleet {
            for index in 0..ALLOCS_PER_NODE {
                let alloc = Allocation {
                    id: uuid::Uuid::new_v4().to_string(),
                    node_id: client.node_id(),
                    name: format!("fleet.sim[{index}]"),
                    task_group: "sim".to_string(),
                    desired_status: ALLOC_DESIRED_STATUS_RUN.to_string(),
                    ..Allocation::default()
                };
                alloc_ids.push(alloc.id.clone());
                server.place_alloc(alloc);
            }
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        loop {
            let running = alloc_ids
                .iter()
                .filter(|id| {
                    server
                        .alloc(id)
                        .is_some_and(|alloc| alloc.client_status == ALLOC_CLIENT_STATUS_RUNNING)
                })
                .count();
            if running == alloc_ids.len() {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "only {running} of {} allocs running",
                alloc_ids.len()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // Each alloc went through two ClientStatus values (pending, running): without batching
        // that is 2 000 calls; batched per node per tick it is a small multiple of the nodes.
        let calls = server.update_calls();
        assert!(
            calls <= (NODES * 4) as u64,
            "{calls} status calls for {} allocs on {NODES} nodes",
            alloc_ids.len()
        );
        for client in &fleet {
            assert_eq!(client.alloc_ids().len(), ALLOCS_PER_NODE);
            client.shutdown().await;
        }
    }
}
