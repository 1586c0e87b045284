//! The alloc runner: runs one allocation's task runners in lifecycle order (see
//! [`coordinator`]), reacts to their state changes the way Nomad does, derives the alloc's
//! client status, and reports it through an [`AllocStatusSink`].
//!
//! Reactions to a task reaching `dead` (non-poststop tasks; poststop tasks run afterwards):
//! - it failed for good → every other live task gets "Sibling Task Failed" and is killed;
//! - it was the group's `leader` → the others get "Leader Task Dead" and are killed;
//! - only sidecars remain alive → they are killed ("Main Tasks Dead").
//!
//! Operations: [`AllocRunner::restart_task`], [`AllocRunner::restart_running_tasks`],
//! [`AllocRunner::restart_all_tasks`] (dead ones too, in lifecycle order), [`AllocRunner::signal`],
//! [`AllocRunner::stop`] (kill in reverse lifecycle order, leader first, then poststop tasks
//! run), [`AllocRunner::destroy`] (GC: everything killed, dir and state removed),
//! [`AllocRunner::update`] (a new version from the server; desired `stop` stops it),
//! [`AllocRunner::shutdown`] (agent shutdown: tasks keep running, state stays for
//! [`AllocRunner::restore`]), [`AllocRunner::stats`] (resource usage through the driver).
//!
//! The alloc record is persisted before any task runs (and each update before it is applied).
//!
//! A replacement (`PreviousAllocation` set) starts no task until the allocation it replaces is
//! terminal ([`upstream`]); a sticky `ephemeral_disk` then takes over that allocation's data
//! when it ran on this node.
//!
//! The group's services ([`group_services`]) are registered while its tasks run, registered
//! again after a task restarts, and deregistered when the allocation stops — with every task's
//! services, before the group's `shutdown_delay` is waited — when it is destroyed, and when all
//! its tasks are dead.
//!
//! A batch or sysbatch allocation whose group sets `max_run_duration` is stopped once it has
//! run that long since it was created (`CreateTime`, so neither a task restart nor an agent
//! restart moves the deadline): that it timed out is persisted first, then every task gets a
//! "Killing" event saying so (poststop tasks that have not started never do) and the
//! allocation is reported `complete`, "allocation exceeded max_run_duration", as Nomad's
//! `max_run_duration` hook does. A restored runner past its deadline enforces it at once.
//!
//! A service allocation's health ([`health`]: its deployment's `update` block, or its
//! `migrate` block) is watched while it runs; once decided it is persisted, then reported as
//! the allocation's `DeploymentStatus` with every later status. A new `DeploymentID` clears it
//! and the watch starts over.
//!
//! **Not** here: fetching allocs from the server or batching status updates (the node part of
//! the client implements [`AllocStatusSink`] with its status buffer).

mod client_update;
pub mod coordinator;
pub mod group_services;
pub mod health;
pub mod snapshot;
#[cfg(test)]
mod tests;
pub mod upstream;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use drover_structs::{
    ALLOC_CLIENT_STATUS_COMPLETE, ALLOC_TIMEOUT_REASON_MAX_RUN_DURATION, AllocDeploymentStatus,
    Allocation, TASK_KILLING, TASK_LEADER_DEAD, TASK_MAIN_DEAD, TASK_RESTART_SIGNAL,
    TASK_SIBLING_FAILED, TASK_SIGNALING, TASK_SKIPPING_SHUTDOWN_DELAY, TASK_STATE_PENDING,
    TASK_WAITING_SHUTDOWN_DELAY, TaskEvent, TaskState, derive_client_status,
    is_terminal_client_status,
};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::allocdir::{AllocDir, AllocDirError};
use crate::state_db::StateDbError;
use crate::taskrunner::{
    TaskPhase, TaskRunner, TaskRunnerArgs, TaskRunnerDeps, TaskRunnerError, lock,
};
pub use client_update::AllocClientUpdate;
use coordinator::{Coordinator, TaskRole};

/// Where alloc runners report status. Implementations must not block (buffer and return).
pub trait AllocStatusSink: Send + Sync + std::fmt::Debug {
    fn alloc_updated(&self, update: AllocClientUpdate);
}

/// Errors of alloc runner operations.
#[derive(Debug, thiserror::Error)]
pub enum AllocRunnerError {
    #[error("allocation {alloc_id} has no job")]
    MissingJob { alloc_id: String },
    #[error("task group {group:?} not found in the job of allocation {alloc_id}")]
    MissingTaskGroup { alloc_id: String, group: String },
    #[error("unknown task {task:?} in allocation {alloc_id}")]
    UnknownTask { alloc_id: String, task: String },
    #[error("unknown signal {signal:?}")]
    UnknownSignal { signal: String },
    #[error("allocation {alloc_id} was destroyed")]
    Destroyed { alloc_id: String },
    #[error("allocation {alloc_id} is stopped")]
    Stopped { alloc_id: String },
    #[error(transparent)]
    Task(#[from] TaskRunnerError),
    #[error(transparent)]
    AllocDir(#[from] AllocDirError),
    #[error(transparent)]
    State(#[from] StateDbError),
    #[error(transparent)]
    Network(#[from] crate::network::NetworkError),
}

impl AllocRunnerError {
    /// Whether the error is the caller's fault (unknown task or signal, task not running):
    /// the API answers 400 to these.
    pub fn is_bad_request(&self) -> bool {
        matches!(
            self,
            AllocRunnerError::UnknownTask { .. }
                | AllocRunnerError::UnknownSignal { .. }
                | AllocRunnerError::Stopped { .. }
                | AllocRunnerError::Task(TaskRunnerError::TaskNotRunning { .. })
                | AllocRunnerError::Task(TaskRunnerError::TaskFinished { .. })
        )
    }
}

/// Signal names tasks may be sent (Nomad accepts the names, with the `SIG` prefix): the same
/// table the node advertises as `os.signals`.
pub use drover_driver::SIGNAL_NAMES as KNOWN_SIGNALS;

/// Normalizes a signal name (`usr1`, `SIGUSR1` → `SIGUSR1`) or refuses it.
pub fn normalize_signal(signal: &str) -> Result<String, AllocRunnerError> {
    let upper = signal.trim().to_ascii_uppercase();
    let named = if upper.starts_with("SIG") {
        upper
    } else {
        format!("SIG{upper}")
    };
    if KNOWN_SIGNALS.contains(&named.as_str()) {
        Ok(named)
    } else {
        Err(AllocRunnerError::UnknownSignal {
            signal: signal.to_string(),
        })
    }
}

/// What every alloc runner of a client shares.
#[derive(Debug, Clone)]
pub struct AllocRunnerDeps {
    pub task: TaskRunnerDeps,
    pub sink: Arc<dyn AllocStatusSink>,
    /// Where a replacement finds the allocation it replaces ([`upstream`]).
    pub upstream: upstream::UpstreamAllocs,
}

struct TaskEntry {
    runner: TaskRunner,
    role: TaskRole,
    leader: bool,
    gate: watch::Sender<bool>,
}

struct AllocRunnerInner {
    alloc_id: String,
    deps: AllocRunnerDeps,
    alloc: Mutex<Arc<Allocation>>,
    alloc_dir: AllocDir,
    /// In lifecycle order.
    tasks: Vec<TaskEntry>,
    coordinator: Mutex<Coordinator>,
    agent_shutdown: CancellationToken,
    watcher_stop: CancellationToken,
    killing_all: AtomicBool,
    destroyed: AtomicBool,
    /// Ends the wait for the previous allocation (the allocation is stopped or destroyed).
    upstream_cancel: CancellationToken,
    /// The client status last derived from the task states (what ends the allocation's
    /// resources once terminal).
    last_client_status: Mutex<String>,
    /// The client status last reported (a timed-out allocation reports `complete` at once).
    last_reported_status: Mutex<String>,
    /// The allocation ran past its `max_run_duration` (persisted before it is acted on).
    timed_out: AtomicBool,
    /// The `max_run_duration` deadline armed, if any, and how to disarm it.
    run_deadline: Mutex<(Option<i64>, CancellationToken)>,
    state_changed: Mutex<Option<mpsc::UnboundedReceiver<String>>>,
    run_loops: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    pending_run_loops: Mutex<Vec<crate::taskrunner::TaskRunLoop>>,
    status: watch::Sender<AllocClientUpdate>,
    group_services: Arc<group_services::GroupServiceHook>,
    /// The allocation's service checks, once it runs (none when it has no checks).
    checks: Mutex<Option<crate::checks::ChecksHook>>,
    /// The deployment health decided here (persisted), if any.
    health: Mutex<Option<AllocDeploymentStatus>>,
    /// The group's network, when it has one of its own (bridge, none, CNI).
    network: Option<Arc<crate::network::AllocNetwork>>,
    /// The running health watch: its generation and how to cancel it. A watch only sets the
    /// health while its generation is the current one.
    health_watch: Mutex<(u64, CancellationToken)>,
}

/// A handle on one allocation's runner. Cheap to clone.
#[derive(Clone)]
pub struct AllocRunner {
    inner: Arc<AllocRunnerInner>,
}

impl std::fmt::Debug for AllocRunner {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("AllocRunner")
            .field("alloc_id", &self.inner.alloc_id)
            .finish_non_exhaustive()
    }
}

impl AllocRunner {
    /// A runner for an allocation new to this client. Persists the alloc record and each task's
    /// initial state ("Received"); [`AllocRunner::run`] starts it.
    ///
    /// When the state db already holds this allocation (a runner for it existed before), its
    /// task records are kept and re-attached to, exactly as [`AllocRunner::restore`] does: a
    /// task is never started twice because a runner was created twice.
    pub fn new(deps: AllocRunnerDeps, alloc: Allocation) -> Result<AllocRunner, AllocRunnerError> {
        let known = deps
            .task
            .state_db
            .get_alloc::<serde_json::Value>(&alloc.id)?
            .is_some();
        deps.task.state_db.put_alloc(&alloc.id, &alloc)?;
        Self::build(deps, alloc, known)
    }

    /// Rebuilds the runner of `alloc_id` from the state db. `None` when there is no record.
    /// Tasks re-attach to their live shims when run; nothing is started twice.
    pub fn restore(
        deps: AllocRunnerDeps,
        alloc_id: &str,
    ) -> Result<Option<AllocRunner>, AllocRunnerError> {
        let Some(alloc) = deps.task.state_db.get_alloc::<Allocation>(alloc_id)? else {
            return Ok(None);
        };
        Self::build(deps, alloc, true).map(Some)
    }

    /// Restores every allocation in the state db.
    pub fn restore_all(deps: AllocRunnerDeps) -> Result<Vec<AllocRunner>, AllocRunnerError> {
        let mut runners = Vec::new();
        for alloc_id in deps.task.state_db.alloc_ids()? {
            if let Some(runner) = Self::restore(deps.clone(), &alloc_id)? {
                runners.push(runner);
            }
        }
        Ok(runners)
    }

    fn build(
        deps: AllocRunnerDeps,
        alloc: Allocation,
        restoring: bool,
    ) -> Result<AllocRunner, AllocRunnerError> {
        let alloc_id = alloc.id.clone();
        let group = alloc
            .job
            .as_deref()
            .ok_or_else(|| AllocRunnerError::MissingJob {
                alloc_id: alloc_id.clone(),
            })?
            .lookup_task_group(&alloc.task_group)
            .ok_or_else(|| AllocRunnerError::MissingTaskGroup {
                alloc_id: alloc_id.clone(),
                group: alloc.task_group.clone(),
            })?
            .clone();
        let alloc_dir = AllocDir::new(&deps.task.config.alloc_root_dir(), &alloc_id)?;
        // A driver that must own the namespace (docker) makes it, as Nomad's network
        // manager picks the first task whose driver must.
        let sandbox = group.tasks.iter().find_map(|task| {
            deps.task
                .drivers
                .network_manager(&task.driver)
                .map(|manager| crate::network::SandboxDriver {
                    driver: task.driver.clone(),
                    manager,
                })
        });
        let network = crate::network::AllocNetwork::for_alloc(
            deps.task.config.network.clone(),
            deps.task.state_db.clone(),
            &alloc,
            &alloc_dir.root,
            sandbox,
        )?;
        let alloc = Arc::new(alloc);
        let agent_shutdown = CancellationToken::new();
        let (state_tx, state_rx) = mpsc::unbounded_channel();

        // A replacement waits for the allocation it replaces before any task starts; a restored
        // one waits again only if none of its tasks had started.
        let hold_for_previous =
            !alloc.previous_allocation.is_empty() && !alloc.server_terminal_status();
        let mut ordered: Vec<_> = group.tasks.iter().collect();
        ordered.sort_by_key(|task| TaskRole::of(task).order());
        let mut tasks = Vec::new();
        let mut run_loops = Vec::new();
        for task in ordered {
            let role = TaskRole::of(task);
            let (gate, gate_rx) =
                watch::channel(!hold_for_previous && matches!(role, TaskRole::Prestart { .. }));
            let args = || TaskRunnerArgs {
                deps: deps.task.clone(),
                alloc: alloc.clone(),
                task: task.clone(),
                alloc_dir: alloc_dir.clone(),
                start_gate: gate_rx.clone(),
                state_changed: state_tx.clone(),
                agent_shutdown: agent_shutdown.clone(),
                network: network.clone(),
            };
            let restored = if restoring {
                TaskRunner::restore(args())?
            } else {
                None
            };
            let (runner, run_loop) = match restored {
                Some(restored) => restored,
                None => TaskRunner::new(args())?,
            };
            tasks.push(TaskEntry {
                runner,
                role,
                leader: task.leader,
                gate,
            });
            run_loops.push(run_loop);
        }

        let initial = AllocClientUpdate {
            alloc_id: alloc_id.clone(),
            client_status: String::new(),
            client_description: String::new(),
            task_states: BTreeMap::new(),
            client_status_changed: false,
            deployment_status: None,
            network_status: None,
        };
        let (status, _) = watch::channel(initial);
        let mut coordinator = Coordinator::default();
        if hold_for_previous
            && tasks
                .iter()
                .all(|entry| entry.runner.task_state().state == TASK_STATE_PENDING)
        {
            coordinator.hold();
        } else if hold_for_previous {
            // Already past the wait: open the prestart gates the hold had kept shut.
            for entry in &tasks {
                if matches!(entry.role, TaskRole::Prestart { .. }) {
                    entry.gate.send_replace(true);
                }
            }
        }
        let health = if restoring {
            deps.task
                .state_db
                .get_deployment_status::<Option<AllocDeploymentStatus>>(&alloc_id)?
                .flatten()
        } else {
            None
        };
        let timed_out = restoring
            && deps
                .task
                .state_db
                .get_run_timeout::<i64>(&alloc_id)?
                .is_some();
        let region = alloc
            .job
            .as_deref()
            .map(|job| job.region.clone())
            .filter(|region| !region.is_empty())
            .unwrap_or_else(|| deps.task.region.clone());
        let group_services = group_services::GroupServiceHook::new(
            deps.task.services.clone(),
            alloc.clone(),
            deps.task.node.clone(),
            region,
            alloc_dir.clone(),
        );
        let runner = AllocRunner {
            inner: Arc::new(AllocRunnerInner {
                alloc_id,
                deps,
                alloc: Mutex::new(alloc),
                alloc_dir,
                tasks,
                coordinator: Mutex::new(coordinator),
                agent_shutdown,
                watcher_stop: CancellationToken::new(),
                killing_all: AtomicBool::new(false),
                destroyed: AtomicBool::new(false),
                upstream_cancel: CancellationToken::new(),
                last_client_status: Mutex::new(String::new()),
                last_reported_status: Mutex::new(String::new()),
                timed_out: AtomicBool::new(timed_out),
                run_deadline: Mutex::new((None, CancellationToken::new())),
                state_changed: Mutex::new(Some(state_rx)),
                run_loops: Mutex::new(Vec::new()),
                pending_run_loops: Mutex::new(run_loops),
                status,
                group_services,
                checks: Mutex::new(None),
                health: Mutex::new(health),
                network,
                health_watch: Mutex::new((0, CancellationToken::new())),
            }),
        };
        runner
            .inner
            .deps
            .upstream
            .local
            .insert(&runner.inner.alloc_id, &runner.inner);
        Ok(runner)
    }

    /// Starts the task runners and the watcher. Calling it again does nothing. A restored
    /// allocation the server wants stopped is stopped.
    pub fn run(&self) {
        let Some(mut state_rx) = lock(&self.inner.state_changed).take() else {
            return;
        };
        let loops: Vec<_> = lock(&self.inner.pending_run_loops).drain(..).collect();
        {
            let mut handles = lock(&self.inner.run_loops);
            for run_loop in loops {
                handles.push(TaskRunner::spawn(run_loop));
            }
        }
        if !self.alloc().server_terminal_status() {
            let hook = crate::checks::ChecksHook::start(
                self.checks_deps(),
                &self.alloc(),
                &self.checked_tasks(),
            );
            *lock(&self.inner.checks) = hook;
            self.start_health_watch();
        }
        self.arm_run_deadline();
        if lock(&self.inner.coordinator).is_held() {
            let waiter = self.clone();
            tokio::spawn(async move { waiter.wait_previous_alloc().await });
        }
        if let Some(network) = self.inner.network.clone() {
            let follower = self.clone();
            tokio::spawn(async move { follower.follow_network_status(network).await });
        }
        if let Some(network) = &self.inner.network
            && network.is_lost()
            && !self.alloc().server_terminal_status()
        {
            let repairing = self.clone();
            let network = network.clone();
            tokio::spawn(async move { repairing.repair_network(network).await });
        }
        let watcher = self.clone();
        tokio::spawn(async move {
            watcher.on_task_state_changed();
            loop {
                tokio::select! {
                    () = watcher.inner.watcher_stop.cancelled() => break,
                    () = watcher.inner.agent_shutdown.cancelled() => break,
                    changed = state_rx.recv() => {
                        if changed.is_none() {
                            break;
                        }
                        // Coalesce a burst of changes into one pass.
                        while state_rx.try_recv().is_ok() {}
                        watcher.on_task_state_changed();
                    }
                }
            }
        });
        if self.alloc().server_terminal_status() {
            let stopping = self.clone();
            tokio::spawn(async move { stopping.stop().await });
        }
    }

    /// Waits for the previous allocation ([`upstream`]), then lets the tasks start. A stop,
    /// a destroy or the agent's shutdown ends the wait and starts nothing.
    async fn wait_previous_alloc(&self) {
        let cancel = self.inner.upstream_cancel.clone();
        let previous = self.alloc().previous_allocation.clone();
        let waited = tokio::select! {
            waited = upstream::wait_previous(&self.inner.deps.upstream, &previous, &cancel) => waited,
            () = self.inner.agent_shutdown.cancelled() => upstream::Upstream::Cancelled,
        };
        if waited == upstream::Upstream::Cancelled {
            return;
        }
        if let upstream::Upstream::Local(previous) = &waited {
            self.move_previous_data(previous).await;
        }
        {
            let mut coordinator = lock(&self.inner.coordinator);
            // Checked under the lock a stop reads the hold with (see `stop`).
            if cancel.is_cancelled() || self.inner.agent_shutdown.is_cancelled() {
                return;
            }
            coordinator.release();
        }
        tracing::debug!(alloc_id = %self.inner.alloc_id, previous_alloc = %previous, "previous allocation terminal; starting tasks");
        self.on_task_state_changed();
    }

    /// A sticky `ephemeral_disk` whose previous allocation ran on this node: its `alloc/data`
    /// and each same-named task's `local/` are moved here ([`AllocDir::move_from`]) before any
    /// task starts. A move that fails leaves the data where it was, says so in a task event,
    /// and the tasks start without it.
    async fn move_previous_data(&self, previous: &AllocRunner) {
        let alloc = self.alloc();
        let sticky = alloc
            .job
            .as_deref()
            .and_then(|job| job.lookup_task_group(&alloc.task_group))
            .and_then(|group| group.ephemeral_disk.as_ref())
            .is_some_and(|disk| disk.sticky || disk.migrate);
        if !sticky {
            return;
        }
        let from = previous.alloc_dir().clone();
        let to = self.inner.alloc_dir.clone();
        let tasks = self.task_names();
        let moved = tokio::task::spawn_blocking(move || to.move_from(&from, &tasks)).await;
        let failure = match moved {
            Ok(Ok(moved)) => {
                tracing::debug!(alloc_id = %self.inner.alloc_id, previous_alloc = %previous.alloc_id(), ?moved, "moved the previous allocation's data");
                return;
            }
            Ok(Err(error)) => crate::error_text::error_chain(&error),
            Err(join_error) => join_error.to_string(),
        };
        tracing::warn!(alloc_id = %self.inner.alloc_id, previous_alloc = %previous.alloc_id(), error = %failure, "failed to move the previous allocation's data");
        self.emit_to_all(&format!(
            "Failed to move the data of previous allocation {}: {failure}",
            previous.alloc_id()
        ));
    }

    /// The group's namespace is gone while its tasks may run (deleted by hand, or a reboot):
    /// it is made again, then the running tasks restart into it (the tasks that were not
    /// running join it when they start).
    async fn repair_network(&self, network: Arc<crate::network::AllocNetwork>) {
        tracing::warn!(alloc_id = %self.inner.alloc_id, "the group's network namespace is gone; making it again");
        match network.ensure(self.alloc(), None).await {
            Ok(_) => {
                self.on_task_state_changed();
                if let Err(error) = self
                    .restart_running_tasks("the group's network namespace was lost and made again")
                    .await
                {
                    tracing::warn!(alloc_id = %self.inner.alloc_id, %error, "restarting tasks into the repaired network failed");
                }
            }
            Err(error) => {
                let message = format!(
                    "failed to set up the group network again: {}",
                    crate::error_text::error_chain(&error)
                );
                tracing::error!(alloc_id = %self.inner.alloc_id, %message);
                self.emit_to_all(&message);
            }
        }
    }

    /// Gives the group network's status to the allocation the group's services and checks
    /// read (`address_mode = "alloc"` takes its address), whenever it is set up.
    async fn follow_network_status(&self, network: Arc<crate::network::AllocNetwork>) {
        let mut statuses = network.subscribe_status();
        loop {
            let status = statuses.borrow_and_update().clone();
            if let Some(status) = status {
                self.apply_network_status(status).await;
            }
            tokio::select! {
                changed = statuses.changed() => if changed.is_err() { return },
                () = self.inner.agent_shutdown.cancelled() => return,
                () = self.inner.watcher_stop.cancelled() => return,
            }
        }
    }

    async fn apply_network_status(&self, status: serde_json::Value) {
        let alloc = {
            let mut current = lock(&self.inner.alloc);
            if current.network_status.as_ref() == Some(&status) {
                return;
            }
            let mut updated = (**current).clone();
            updated.network_status = Some(status);
            let updated = Arc::new(updated);
            *current = updated.clone();
            updated
        };
        if alloc.server_terminal_status() {
            return;
        }
        let tasks = self.checked_tasks();
        if let Some(hook) = lock(&self.inner.checks).as_ref() {
            hook.update(&alloc, &tasks);
        }
        self.inner.group_services.update(alloc).await;
    }

    /// A "Task Setup" event with `message` on every task.
    fn emit_to_all(&self, message: &str) {
        let now = self.inner.deps.task.clock.now_unix_nanos();
        for entry in &self.inner.tasks {
            entry
                .runner
                .emit_event(TaskEvent::new(drover_structs::TASK_SETUP, now).with_message(message));
        }
    }

    fn checks_deps(&self) -> crate::checks::ChecksDeps {
        let task = &self.inner.deps.task;
        crate::checks::ChecksDeps {
            config: Arc::clone(&task.config),
            clock: Arc::clone(&task.clock),
            state_db: Arc::clone(&task.state_db),
            node: Arc::clone(&task.node),
        }
    }

    fn checked_tasks(&self) -> Vec<Arc<dyn crate::checks::CheckedTask>> {
        self.inner
            .tasks
            .iter()
            .map(|entry| Arc::new(entry.runner.clone()) as Arc<dyn crate::checks::CheckedTask>)
            .collect()
    }

    fn stop_checks(&self) {
        if let Some(hook) = lock(&self.inner.checks).as_ref() {
            hook.stop();
        }
        self.cancel_health_watch();
    }

    /// Cancels the running health watch, if any; a result it is about to give is dropped.
    fn cancel_health_watch(&self) -> u64 {
        let mut watch = lock(&self.inner.health_watch);
        watch.1.cancel();
        watch.0 += 1;
        watch.0
    }

    /// Starts watching the allocation's health (module docs of [`health`]) unless it is
    /// already known or not watched for this allocation. Replaces any running watch.
    fn start_health_watch(&self) {
        let generation = self.cancel_health_watch();
        let alloc = self.alloc();
        if alloc.server_terminal_status()
            || lock(&self.inner.health)
                .as_ref()
                .is_some_and(|status| status.healthy.is_some())
        {
            return;
        }
        let Some(params) = health::health_params(&alloc) else {
            return;
        };
        let Some(group) = alloc
            .job
            .as_deref()
            .and_then(|job| job.lookup_task_group(&alloc.task_group))
            .cloned()
        else {
            return;
        };
        let cancel = CancellationToken::new();
        lock(&self.inner.health_watch).1 = cancel.clone();
        let watched = crate::checks::hook::watched_checks(&alloc);
        let status = self.subscribe_status();
        let runner = self.clone();
        tokio::spawn(async move {
            let is_deploy = params.is_deploy;
            let outcome =
                health::watch_health(params, group, watched, status, &runner, cancel).await;
            if let Some(outcome) = outcome {
                runner.set_health(generation, outcome, is_deploy);
            }
        });
    }

    /// Records the health a watch decided (persisted first), adds the reasons of an unhealthy
    /// deployment allocation as "Alloc Unhealthy" task events, and reports it.
    fn set_health(&self, generation: u64, outcome: health::HealthOutcome, is_deploy: bool) {
        let now = self.inner.deps.task.clock.now_unix_nanos();
        {
            let watch = lock(&self.inner.health_watch);
            if watch.0 != generation {
                return;
            }
            let mut health = lock(&self.inner.health);
            let mut status = health
                .clone()
                .or_else(|| self.alloc().deployment_status.clone())
                .unwrap_or_default();
            status.healthy = Some(outcome == health::HealthOutcome::Healthy);
            status.timestamp = drover_structs::Timestamp::from_unix_nanos(now);
            if let Err(error) = self
                .inner
                .deps
                .task
                .state_db
                .put_deployment_status(&self.inner.alloc_id, &Some(&status))
            {
                tracing::warn!(alloc_id = %self.inner.alloc_id, %error, "persisting deployment health failed");
            }
            *health = Some(status);
        }
        tracing::debug!(alloc_id = %self.inner.alloc_id, ?outcome, "allocation health decided");
        if let health::HealthOutcome::Unhealthy(reasons) = outcome
            && is_deploy
            && !self.alloc().server_terminal_status()
        {
            for (task, reason) in reasons {
                if let Some(entry) = self.entry(&task) {
                    entry.runner.emit_event(
                        TaskEvent::new(health::ALLOC_UNHEALTHY_EVENT, now).with_message(&reason),
                    );
                }
            }
        }
        self.on_task_state_changed();
    }

    /// The deployment health decided here, if any.
    pub fn deployment_health(&self) -> Option<AllocDeploymentStatus> {
        lock(&self.inner.health).clone()
    }

    /// The latest result of each of the allocation's service checks, by check ID (Nomad's
    /// `/v1/client/allocation/<id>/checks`).
    pub fn checks(&self) -> BTreeMap<String, drover_structs::CheckQueryResult> {
        lock(&self.inner.checks)
            .as_ref()
            .map(crate::checks::ChecksHook::results)
            .unwrap_or_default()
    }

    /// The allocation's id.
    pub fn alloc_id(&self) -> &str {
        &self.inner.alloc_id
    }

    /// The allocation as last received from the server.
    pub fn alloc(&self) -> Arc<Allocation> {
        lock(&self.inner.alloc).clone()
    }

    /// The allocation's dir.
    pub fn alloc_dir(&self) -> &AllocDir {
        &self.inner.alloc_dir
    }

    /// Task names in lifecycle order.
    pub fn task_names(&self) -> Vec<String> {
        self.inner
            .tasks
            .iter()
            .map(|entry| entry.runner.name().to_string())
            .collect()
    }

    /// The task runner of `task`.
    pub fn task_runner(&self, task: &str) -> Option<TaskRunner> {
        self.entry(task).map(|entry| entry.runner.clone())
    }

    fn entry(&self, task: &str) -> Option<&TaskEntry> {
        self.inner
            .tasks
            .iter()
            .find(|entry| entry.runner.name() == task)
    }

    fn entry_or_error(&self, task: &str) -> Result<&TaskEntry, AllocRunnerError> {
        self.entry(task)
            .ok_or_else(|| AllocRunnerError::UnknownTask {
                alloc_id: self.inner.alloc_id.clone(),
                task: task.to_string(),
            })
    }

    /// Every task's state (display messages filled in).
    pub fn task_states(&self) -> BTreeMap<String, TaskState> {
        self.inner
            .tasks
            .iter()
            .map(|entry| (entry.runner.name().to_string(), entry.runner.task_state()))
            .collect()
    }

    /// The latest status (client status, description, task states).
    pub fn status(&self) -> AllocClientUpdate {
        self.inner.status.borrow().clone()
    }

    /// A receiver of status changes (tests, the node's alloc watcher).
    pub fn subscribe_status(&self) -> watch::Receiver<AllocClientUpdate> {
        self.inner.status.subscribe()
    }

    /// Whether every task is dead.
    pub fn all_tasks_dead(&self) -> bool {
        self.inner
            .tasks
            .iter()
            .all(|entry| entry.runner.phase() == TaskPhase::Dead)
    }

    /// Waits until every task is dead.
    pub async fn wait_all_tasks_dead(&self) {
        let mut status = self.subscribe_status();
        while !self.all_tasks_dead() {
            if status.changed().await.is_err() {
                return;
            }
        }
    }

    fn on_task_state_changed(&self) {
        let inner = &self.inner;
        let states: Vec<(TaskRole, TaskState)> = inner
            .tasks
            .iter()
            .map(|entry| (entry.role, entry.runner.task_state()))
            .collect();

        let gates = lock(&inner.coordinator).gates(&states);
        for (entry, open) in inner.tasks.iter().zip(gates) {
            entry.gate.send_if_modified(|current| {
                let changed = *current != open;
                *current = open;
                changed
            });
        }

        self.react_to_dead_tasks(&states);

        let task_states: BTreeMap<String, TaskState> = inner
            .tasks
            .iter()
            .zip(states)
            .map(|(entry, (_, state))| (entry.runner.name().to_string(), state))
            .collect();
        inner.group_services.on_task_states(&task_states);
        let (derived_status, derived_description) = derive_client_status(&task_states);
        let derived_status_changed = {
            let mut last = lock(&inner.last_client_status);
            let changed = *last != derived_status;
            *last = derived_status.to_string();
            changed
        };
        let (client_status, client_description) = if inner.timed_out.load(Ordering::SeqCst) {
            (
                ALLOC_CLIENT_STATUS_COMPLETE,
                ALLOC_TIMEOUT_REASON_MAX_RUN_DURATION,
            )
        } else {
            (derived_status, derived_description)
        };
        let client_status_changed = {
            let mut last = lock(&inner.last_reported_status);
            let changed = *last != client_status;
            *last = client_status.to_string();
            changed
        };
        if derived_status_changed
            && is_terminal_client_status(derived_status)
            && self.all_tasks_dead()
        {
            // Done for good: no task runs here again, so the secrets need no memory. The
            // dirs stay for logs and files until the allocation is collected.
            let alloc_dir = inner.alloc_dir.clone();
            tokio::task::spawn_blocking(move || alloc_dir.unmount_secrets());
            // Nothing runs in the group's network any more.
            if let Some(network) = inner.network.clone() {
                let alloc_id = inner.alloc_id.clone();
                tokio::spawn(async move {
                    if let Err(error) = network.teardown().await {
                        tracing::warn!(%alloc_id, error = %crate::error_text::error_chain(&error), "tearing the group network down failed; retried on GC");
                    }
                });
            }
        }
        let mut deployment_status = lock(&inner.health).clone();
        if client_status == drover_structs::ALLOC_CLIENT_STATUS_FAILED
            && !self.alloc().deployment_id.is_empty()
            && deployment_status
                .as_ref()
                .is_none_or(|status| status.healthy.is_none())
        {
            // A failed allocation of a deployment is unhealthy even if no watch decided it.
            deployment_status = Some(AllocDeploymentStatus {
                healthy: Some(false),
                ..AllocDeploymentStatus::default()
            });
        }
        let update = AllocClientUpdate {
            alloc_id: inner.alloc_id.clone(),
            client_status: client_status.to_string(),
            client_description: client_description.to_string(),
            task_states,
            client_status_changed,
            deployment_status,
            network_status: inner.network.as_ref().and_then(|network| network.status()),
        };
        inner.status.send_replace(update.clone());
        inner.deps.sink.alloc_updated(update);
    }

    /// Nomad's reactions to dead tasks (module docs).
    fn react_to_dead_tasks(&self, states: &[(TaskRole, TaskState)]) {
        let inner = &self.inner;
        if inner.killing_all.load(Ordering::SeqCst) || lock(&inner.coordinator).is_frozen() {
            return;
        }
        let mut kill_event: Option<TaskEvent> = None;
        let now = inner.deps.task.clock.now_unix_nanos();
        let mut any_live_non_sidecar = false;
        let mut any_live_sidecar = false;
        for (entry, (role, state)) in inner.tasks.iter().zip(states) {
            if *role == TaskRole::Poststop {
                continue;
            }
            if state.is_dead() {
                if state.failed && kill_event.is_none() {
                    kill_event = Some(
                        TaskEvent::new(TASK_SIBLING_FAILED, now)
                            .with_failed_sibling(entry.runner.name()),
                    );
                } else if entry.leader && !state.failed && kill_event.is_none() {
                    kill_event = Some(TaskEvent::new(TASK_LEADER_DEAD, now));
                }
            } else if role.is_sidecar() {
                any_live_sidecar = true;
            } else {
                any_live_non_sidecar = true;
            }
        }
        if kill_event.is_none() && any_live_sidecar && !any_live_non_sidecar {
            kill_event = Some(TaskEvent::new(TASK_MAIN_DEAD, now));
        }
        let Some(event) = kill_event else {
            return;
        };
        if !any_live_sidecar && !any_live_non_sidecar {
            return;
        }
        if inner.killing_all.swap(true, Ordering::SeqCst) {
            return;
        }
        let runner = self.clone();
        tokio::spawn(async move {
            for entry in &runner.inner.tasks {
                if entry.role != TaskRole::Poststop && entry.runner.phase() != TaskPhase::Dead {
                    entry.runner.emit_event(event.clone());
                }
            }
            runner.kill_tasks(false).await;
        });
    }

    /// Kills tasks in reverse lifecycle order, the leader first; poststop tasks only when
    /// `include_poststop`.
    async fn kill_tasks(&self, include_poststop: bool) {
        self.kill_tasks_saying(include_poststop, None).await;
    }

    /// [`AllocRunner::kill_tasks`], the "Killing" events showing `display_message` when given.
    async fn kill_tasks_saying(&self, include_poststop: bool, display_message: Option<&str>) {
        let inner = &self.inner;
        let killing = || {
            let event = TaskEvent::new(TASK_KILLING, inner.deps.task.clock.now_unix_nanos());
            match display_message {
                Some(message) => event.with_display_message(message),
                None => event,
            }
        };
        if let Some(leader) = inner.tasks.iter().find(|entry| entry.leader) {
            leader.runner.kill(killing()).await;
        }
        let tiers: [&[u8]; 3] = [&[2], &[1], &[0]];
        for tier in tiers {
            let kills: Vec<_> = inner
                .tasks
                .iter()
                .filter(|entry| tier.contains(&entry.role.order()))
                .map(|entry| {
                    let runner = entry.runner.clone();
                    let event = killing();
                    tokio::spawn(async move { runner.kill(event).await })
                })
                .collect();
            for kill in kills {
                let _ = kill.await;
            }
        }
        if include_poststop {
            for entry in inner
                .tasks
                .iter()
                .filter(|entry| entry.role == TaskRole::Poststop)
            {
                entry.runner.kill(killing()).await;
            }
        }
    }

    /// Arms (or re-arms, when the group's `max_run_duration` changed) the timer that stops the
    /// allocation at its deadline ([`Allocation::max_run_deadline_unix_nanos`]); disarms it
    /// when the allocation no longer has one.
    fn arm_run_deadline(&self) {
        let alloc = self.alloc();
        let deadline = alloc
            .max_run_deadline_unix_nanos()
            .filter(|_| !alloc.server_terminal_status());
        let cancel = {
            let mut armed = lock(&self.inner.run_deadline);
            if armed.0 == deadline {
                return;
            }
            armed.1.cancel();
            armed.0 = deadline;
            let Some(_) = deadline else {
                return;
            };
            armed.1 = CancellationToken::new();
            armed.1.clone()
        };
        let Some(deadline) = deadline else {
            return;
        };
        let runner = self.clone();
        tokio::spawn(async move {
            // The wall clock is read again after each wait: the deadline is a time of day, and
            // the timer only says when to look.
            loop {
                let remaining =
                    deadline.saturating_sub(runner.inner.deps.task.clock.now_unix_nanos());
                if remaining <= 0 {
                    break;
                }
                tokio::select! {
                    () = tokio::time::sleep(drover_structs::DurationNs::from_nanos(remaining).to_std()) => {}
                    () = cancel.cancelled() => return,
                    () = runner.inner.agent_shutdown.cancelled() => return,
                    () = runner.inner.watcher_stop.cancelled() => return,
                }
            }
            runner.enforce_max_run_duration().await;
        });
    }

    /// The allocation ran past its `max_run_duration`: persisted, reported `complete`, and
    /// every task killed with Nomad's reason (module docs). Nothing when its tasks are all
    /// dead already, it is being stopped, or the agent is shutting down.
    async fn enforce_max_run_duration(&self) {
        let inner = &self.inner;
        if inner.agent_shutdown.is_cancelled()
            || inner.destroyed.load(Ordering::SeqCst)
            || self.alloc().server_terminal_status()
            || self.all_tasks_dead()
        {
            return;
        }
        // A restored runner may find the timeout persisted and a task still alive (the agent
        // stopped in between): it kills again, without recording it twice.
        if !inner.timed_out.swap(true, Ordering::SeqCst) {
            let now = inner.deps.task.clock.now_unix_nanos();
            if let Err(error) = inner
                .deps
                .task
                .state_db
                .put_run_timeout(&inner.alloc_id, &now)
            {
                tracing::warn!(alloc_id = %inner.alloc_id, %error, "persisting the max_run_duration timeout failed");
            }
        }
        tracing::info!(alloc_id = %inner.alloc_id, "allocation exceeded max_run_duration, killing tasks");
        inner.killing_all.store(true, Ordering::SeqCst);
        self.stop_checks();
        self.on_task_state_changed();
        // Poststop tasks that have not started never will: they go first, before the main
        // tasks' deaths would open their gate.
        let message = ALLOC_TIMEOUT_REASON_MAX_RUN_DURATION;
        for entry in inner
            .tasks
            .iter()
            .filter(|entry| entry.role == TaskRole::Poststop)
        {
            entry
                .runner
                .kill(
                    TaskEvent::new(TASK_KILLING, inner.deps.task.clock.now_unix_nanos())
                        .with_display_message(message),
                )
                .await;
        }
        self.deregister_all_services().await;
        self.kill_tasks_saying(false, Some(message)).await;
        self.on_task_state_changed();
    }

    /// Restarts one running task ("Restart Signaled"). Does not count against the policy.
    pub async fn restart_task(&self, task: &str, reason: &str) -> Result<(), AllocRunnerError> {
        let entry = self.entry_or_error(task)?;
        let event = self.restart_event(reason);
        entry.runner.restart(event, false).await?;
        Ok(())
    }

    fn restart_event(&self, reason: &str) -> TaskEvent {
        TaskEvent::new(
            TASK_RESTART_SIGNAL,
            self.inner.deps.task.clock.now_unix_nanos(),
        )
        .with_restart_reason(reason)
    }

    /// Restarts every running task (dead ones stay dead).
    pub async fn restart_running_tasks(&self, reason: &str) -> Result<(), AllocRunnerError> {
        let restarts: Vec<_> = self
            .inner
            .tasks
            .iter()
            .map(|entry| {
                let runner = entry.runner.clone();
                let event = self.restart_event(reason);
                tokio::spawn(async move { runner.restart(event, false).await })
            })
            .collect();
        for restart in restarts {
            match restart.await {
                Ok(Ok(())) | Ok(Err(TaskRunnerError::TaskNotRunning { .. })) | Err(_) => {}
                Ok(Err(error)) => return Err(error.into()),
            }
        }
        Ok(())
    }

    /// Restarts every task, dead ones included, in lifecycle order (Nomad's `AllTasks`).
    pub async fn restart_all_tasks(&self, reason: &str) -> Result<(), AllocRunnerError> {
        if self.inner.destroyed.load(Ordering::SeqCst) {
            return Err(AllocRunnerError::Destroyed {
                alloc_id: self.inner.alloc_id.clone(),
            });
        }
        if self.alloc().server_terminal_status() {
            return Err(AllocRunnerError::Stopped {
                alloc_id: self.inner.alloc_id.clone(),
            });
        }
        self.run();
        lock(&self.inner.coordinator).freeze();
        self.on_task_state_changed();
        self.inner.killing_all.store(false, Ordering::SeqCst);
        let restarts: Vec<_> = self
            .inner
            .tasks
            .iter()
            .map(|entry| {
                let runner = entry.runner.clone();
                let event = self.restart_event(reason);
                tokio::spawn(async move { runner.force_restart(event).await })
            })
            .collect();
        let mut first_error = None;
        for restart in restarts {
            if let Ok(Err(error)) = restart.await {
                first_error.get_or_insert(error);
            }
        }
        lock(&self.inner.coordinator).thaw();
        self.on_task_state_changed();
        match first_error {
            Some(error) => Err(error.into()),
            None => Ok(()),
        }
    }

    /// Registers the group's services again, if they are registered: for whoever restarts tasks
    /// without going through a task runner's restart (a task runner's restart re-registers them
    /// by itself).
    pub async fn reregister_group_services(&self) {
        self.inner.group_services.reregister().await;
    }

    /// The group service registrations currently wanted (for inspection and tests).
    pub fn group_service_registrations(&self) -> Vec<drover_structs::ServiceRegistration> {
        self.inner.group_services.wanted()
    }

    /// Sends `signal` to one task, or to every running task when `task` is `None`.
    pub async fn signal(&self, task: Option<&str>, signal: &str) -> Result<(), AllocRunnerError> {
        let signal = normalize_signal(signal)?;
        let now = self.inner.deps.task.clock.now_unix_nanos();
        let event = || {
            TaskEvent::new(TASK_SIGNALING, now)
                .with_task_signal(&signal)
                .with_task_signal_reason("User requested signal")
        };
        match task {
            Some(name) => {
                let entry = self.entry_or_error(name)?;
                entry.runner.signal(event(), &signal).await?;
            }
            None => {
                for entry in &self.inner.tasks {
                    match entry.runner.signal(event(), &signal).await {
                        Ok(()) | Err(TaskRunnerError::TaskNotRunning { .. }) => {}
                        Err(error) => return Err(error.into()),
                    }
                }
            }
        }
        Ok(())
    }

    /// The context of one running task, for `alloc exec`.
    pub fn exec_context(
        &self,
        task: &str,
    ) -> Result<crate::taskrunner::TaskExecContext, AllocRunnerError> {
        Ok(self.entry_or_error(task)?.runner.exec_context()?)
    }

    /// Resource usage of one task, or of every running task when `task` is `None` (tasks that
    /// are not running are left out).
    pub async fn stats(
        &self,
        task: Option<&str>,
    ) -> Result<BTreeMap<String, drover_driver::TaskResourceUsage>, AllocRunnerError> {
        let mut usage = BTreeMap::new();
        match task {
            Some(name) => {
                let entry = self.entry_or_error(name)?;
                usage.insert(name.to_string(), entry.runner.stats().await?);
            }
            None => {
                // Side by side: a task's figure may wait out a cpu window (see the driver).
                let mut measuring = tokio::task::JoinSet::new();
                for entry in &self.inner.tasks {
                    let runner = entry.runner.clone();
                    measuring
                        .spawn(async move { (runner.name().to_string(), runner.stats().await) });
                }
                while let Some(measured) = measuring.join_next().await {
                    if let Ok((name, Ok(task_usage))) = measured {
                        usage.insert(name, task_usage);
                    }
                }
            }
        }
        Ok(usage)
    }

    /// Stops the allocation: kills tasks in reverse lifecycle order (leader first), lets
    /// poststop tasks run, and returns once every task is dead.
    pub async fn stop(&self) {
        // Task runners must be running to be killed.
        self.run();
        self.stop_checks();
        self.inner.killing_all.store(true, Ordering::SeqCst);
        // Still waiting for the previous allocation: nothing ran, so nothing runs, poststop
        // tasks included (the waiter reads the cancellation under the same lock).
        self.inner.upstream_cancel.cancel();
        let never_started = lock(&self.inner.coordinator).is_held();
        // Out of the catalog first — the group's services and its tasks' — so that traffic
        // drains during the delay.
        self.deregister_all_services().await;
        if !never_started {
            self.group_shutdown_delay().await;
        }
        self.kill_tasks(never_started).await;
        self.on_task_state_changed();
        self.wait_all_tasks_dead().await;
    }

    /// Deregisters the group's services, then every task's (a task without services returns
    /// at once).
    async fn deregister_all_services(&self) {
        self.inner.group_services.deregister().await;
        for entry in &self.inner.tasks {
            entry.runner.deregister_services().await;
        }
    }

    /// The group's `shutdown_delay`: running tasks get "Waiting for shutdown delay" and the stop
    /// waits (or "Skipping shutdown delay" when the stop asked for none).
    async fn group_shutdown_delay(&self) {
        let alloc = self.alloc();
        let delay = alloc
            .job
            .as_deref()
            .and_then(|job| job.lookup_task_group(&alloc.task_group))
            .and_then(|group| group.shutdown_delay)
            .unwrap_or_default();
        if delay.is_zero() {
            return;
        }
        let skip = alloc.desired_transition.should_ignore_shutdown_delay();
        let now = self.inner.deps.task.clock.now_unix_nanos();
        let event = if skip {
            TaskEvent::new(TASK_SKIPPING_SHUTDOWN_DELAY, now).with_message(&format!(
                "Skipping group shutdown_delay of {delay} before killing the tasks."
            ))
        } else {
            TaskEvent::new(TASK_WAITING_SHUTDOWN_DELAY, now).with_message(&format!(
                "Waiting for group shutdown_delay of {delay} before killing the tasks."
            ))
        };
        for entry in &self.inner.tasks {
            if entry.runner.phase() == TaskPhase::Running {
                entry.runner.emit_event(event.clone());
            }
        }
        if !skip {
            tokio::time::sleep(delay.to_std()).await;
        }
    }

    /// Applies a new version of the allocation from the server (persisted first). A desired
    /// `stop`/`evict` stops the allocation (in the background); otherwise update hooks run.
    pub async fn update(&self, alloc: Allocation) -> Result<(), AllocRunnerError> {
        // A destroyed allocation (stopped by its client while no server answered) keeps its
        // runner only to report its final status: nothing is persisted or run again.
        if self.inner.destroyed.load(Ordering::SeqCst) {
            return Ok(());
        }
        // The server marked the allocation `unknown` while this node could not reach it, and
        // it runs on: every task records "Reconnected" and the status goes out again, so the
        // server settles it against its replacements (Nomad's `allocRunner.Reconnect`).
        let reconnect = alloc.client_status == drover_structs::ALLOC_CLIENT_STATUS_UNKNOWN
            && alloc.alloc_modify_index > self.alloc().alloc_modify_index
            && !alloc.server_terminal_status();
        self.inner.deps.task.state_db.put_alloc(&alloc.id, &alloc)?;
        if reconnect {
            tracing::info!(alloc_id = %alloc.id, "allocation reconnected");
            *lock(&self.inner.alloc) = Arc::new(alloc);
            let now = self.inner.deps.task.clock.now_unix_nanos();
            for entry in &self.inner.tasks {
                entry
                    .runner
                    .emit_event(TaskEvent::new(drover_structs::TASK_CLIENT_RECONNECTED, now));
            }
            return Ok(());
        }
        let new_deployment = self.alloc().deployment_id != alloc.deployment_id;
        let mut alloc = alloc;
        // The server's copy has the group network's status only once the client reported it.
        if alloc.network_status.is_none() {
            alloc.network_status = self
                .inner
                .network
                .as_ref()
                .and_then(|network| network.status());
        }
        let alloc = Arc::new(alloc);
        *lock(&self.inner.alloc) = alloc.clone();
        if new_deployment {
            self.cancel_health_watch();
            let mut health = lock(&self.inner.health);
            if health.is_some() {
                self.inner
                    .deps
                    .task
                    .state_db
                    .put_deployment_status::<Option<AllocDeploymentStatus>>(
                        &self.inner.alloc_id,
                        &None,
                    )?;
                *health = None;
            }
        }
        if alloc.server_terminal_status() {
            self.stop_checks();
            let stopping = self.clone();
            tokio::spawn(async move { stopping.stop().await });
            return Ok(());
        }
        for entry in &self.inner.tasks {
            entry.runner.update(alloc.clone()).await;
        }
        {
            let tasks = self.checked_tasks();
            let mut checks = lock(&self.inner.checks);
            match checks.as_ref() {
                Some(hook) => hook.update(&alloc, &tasks),
                None if lock(&self.inner.state_changed).is_none() => {
                    *checks = crate::checks::ChecksHook::start(self.checks_deps(), &alloc, &tasks);
                }
                None => {}
            }
        }
        self.inner.group_services.update(alloc).await;
        if lock(&self.inner.state_changed).is_none() {
            self.start_health_watch();
            self.arm_run_deadline();
        }
        Ok(())
    }

    /// Destroys the allocation (GC): kills every task (poststop included), removes the alloc
    /// dir and the persisted state.
    pub async fn destroy(&self) -> Result<(), AllocRunnerError> {
        // Task runners must be running to be killed and destroyed.
        self.run();
        self.stop_checks();
        self.inner.destroyed.store(true, Ordering::SeqCst);
        self.inner.killing_all.store(true, Ordering::SeqCst);
        self.inner.upstream_cancel.cancel();
        self.deregister_all_services().await;
        self.kill_tasks(true).await;
        for entry in &self.inner.tasks {
            entry.runner.destroy().await;
        }
        self.inner.watcher_stop.cancel();
        self.join_run_loops().await;
        if let Some(network) = &self.inner.network {
            network.teardown().await?;
        }
        self.inner.alloc_dir.destroy()?;
        let supervisor_dirs = self
            .inner
            .deps
            .task
            .config
            .client_state_dir()
            .join("tasks")
            .join(&self.inner.alloc_id);
        if let Err(error) = std::fs::remove_dir_all(&supervisor_dirs)
            && error.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(path = %supervisor_dirs.display(), %error, "failed to remove task supervisor dirs");
        }
        self.inner
            .deps
            .task
            .state_db
            .delete_alloc(&self.inner.alloc_id)?;
        self.inner.deps.upstream.local.remove(&self.inner.alloc_id);
        Ok(())
    }

    /// Agent shutdown: stops driving the tasks and leaves them running; the persisted state
    /// lets the next agent's [`AllocRunner::restore`] re-attach.
    pub async fn shutdown(&self) {
        self.stop_checks();
        self.inner.agent_shutdown.cancel();
        self.join_run_loops().await;
    }

    async fn join_run_loops(&self) {
        let handles: Vec<_> = lock(&self.inner.run_loops).drain(..).collect();
        for handle in handles {
            let _ = handle.await;
        }
    }
}

impl health::HealthSource for AllocRunner {
    fn checks_pass(&self, watched: &[health::WatchedCheck]) -> bool {
        match lock(&self.inner.checks).as_ref() {
            Some(hook) => hook.with_results(|results| health::checks_pass(watched, results)),
            None => health::checks_pass(watched, &BTreeMap::new()),
        }
    }

    fn check_results(&self) -> BTreeMap<String, drover_structs::CheckQueryResult> {
        self.checks()
    }

    fn now_unix_nanos(&self) -> i64 {
        self.inner.deps.task.clock.now_unix_nanos()
    }
}
