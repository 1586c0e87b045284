//! What a task runner's parts share: [`TaskRunnerShared`] (the task's state, lifecycle, local
//! state and channels, held by the runner handle, the run loop, the kill procedure and the
//! hooks' handles), the runner's inputs and errors, and the commands the handle sends the run
//! loop.
//!
//! Not here: driving the task (the run loop) or the handle's operations (the task runner).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::mutex::lock;

use drover_structs::{Allocation, Node, Task, TaskEvent};
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

use crate::allocdir::{AllocDir, AllocDirError, TaskDir};
use crate::clock::SharedClock;
use crate::config::ClientConfig;
use crate::state_db::{StateDb, StateDbError, TaskRecordPart};
use crate::taskrunner::driver::{DriverCatalog, PersistedTaskHandle};
use crate::taskrunner::hooks::{self, PersistedHookState};
use crate::taskrunner::restarts::{RestartTracker, RestartTrackerState};
use crate::taskrunner::state::{IllegalTransition, TaskLifecycle, TaskPhase};

/// Errors of task runner operations.
#[derive(Debug, thiserror::Error)]
pub enum TaskRunnerError {
    #[error("task {task:?} is not running")]
    TaskNotRunning { task: String },
    #[error("task {task:?} has finished and cannot run again")]
    TaskFinished { task: String },
    #[error("task {task:?} not found in task group {group:?}")]
    TaskNotInGroup { task: String, group: String },
    #[error("allocation {alloc_id} has no job")]
    MissingJob { alloc_id: String },
    #[error("stats of task {task:?} unavailable: {message}")]
    StatsUnavailable { task: String, message: String },
    #[error("signal to task {task:?} failed: {message}")]
    SignalFailed { task: String, message: String },
    #[error(transparent)]
    AllocDir(#[from] AllocDirError),
    #[error(transparent)]
    State(#[from] StateDbError),
    #[error(transparent)]
    Transition(#[from] IllegalTransition),
}

/// What a task runner persists besides its `TaskState` (record part `local`). Fields are only
/// ever added, with defaults, so older records still read.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TaskLocalState {
    /// Prestart hook state and `done` flags, by hook name.
    pub hooks: BTreeMap<String, PersistedHookState>,
    /// Restart tracker counters.
    pub restart_tracker: Option<RestartTrackerState>,
    /// The running task's driver handle; present from the moment start returned until the exit
    /// has been recorded and the driver cleaned up.
    pub handle: Option<PersistedTaskHandle>,
    /// The runner was destroyed (alloc GC); it never runs again.
    pub destroyed: bool,
    /// When a pending restart is due (wall clock, Unix nanoseconds), so an agent restarted
    /// during a restart delay waits out the rest of it instead of starting at once.
    pub restart_due_unix_nanos: Option<i64>,
}

/// What every task runner of a client shares.
#[derive(Debug, Clone)]
pub struct TaskRunnerDeps {
    pub config: Arc<ClientConfig>,
    pub clock: SharedClock,
    pub state_db: Arc<StateDb>,
    pub drivers: Arc<dyn DriverCatalog>,
    pub node: Arc<Node>,
    /// The agent's region (NOMAD_REGION when the job has none).
    pub region: String,
    /// Seed for restart jitter; each task mixes in its name.
    pub jitter_seed: u64,
    /// The service catalog the task and group service hooks register in.
    pub services: Arc<dyn crate::services::ServiceRegistrar>,
    /// Where the identity hook has the task's workload identities signed.
    pub identities: Arc<dyn crate::identity::IdentitySigner>,
    /// Serves the agent's API inside each task (`None`: tasks get no `secrets/api.sock`).
    pub task_api: Option<Arc<dyn hooks::api::TaskApiServer>>,
    /// Where Nomad's task counters (`nomad.client.allocs.running`, …) are counted (`None`:
    /// not counted).
    pub task_counters: Option<Arc<dyn crate::task_metrics::TaskCounters>>,
}

pub(crate) enum TaskCommand {
    Restart {
        event: TaskEvent,
        failure: bool,
        reply: oneshot::Sender<Result<(), TaskRunnerError>>,
    },
    ForceRestart {
        event: TaskEvent,
        reply: oneshot::Sender<Result<(), TaskRunnerError>>,
    },
    Signal {
        event: TaskEvent,
        signal: String,
        reply: oneshot::Sender<Result<(), TaskRunnerError>>,
    },
}

/// State shared by the run loop, the handle and the hooks' handles.
pub(crate) struct TaskRunnerShared {
    pub(crate) alloc_id: String,
    pub(crate) task_name: String,
    pub(crate) deps: TaskRunnerDeps,
    pub(crate) alloc: Mutex<Arc<Allocation>>,
    pub(crate) task: Mutex<Arc<Task>>,
    pub(crate) task_dir: TaskDir,
    pub(crate) alloc_dir: AllocDir,
    pub(crate) lifecycle: Mutex<TaskLifecycle>,
    pub(crate) local: Mutex<TaskLocalState>,
    pub(crate) tracker: Mutex<RestartTracker>,
    pub(crate) state_changed: mpsc::UnboundedSender<String>,
    /// Cancelled to kill the current life of the task; replaced when a dead task runs again.
    pub(crate) kill_token: Mutex<CancellationToken>,
    /// Cancelled when the runner is destroyed (after its task was killed).
    pub(crate) destroy_token: CancellationToken,
    pub(crate) agent_shutdown: CancellationToken,
    pub(crate) phase_watch: watch::Sender<TaskPhase>,
    pub(crate) commands: mpsc::UnboundedSender<TaskCommand>,
    pub(crate) run_loop_exited: watch::Sender<bool>,
    pub(crate) env_cell: hooks::TaskEnvCell,
    pub(crate) hooks: std::sync::OnceLock<Vec<Arc<dyn hooks::TaskHook>>>,
    pub(crate) services_hook: std::sync::OnceLock<Arc<hooks::services::TaskServiceHook>>,
    /// The group's network, when it has one of its own.
    pub(crate) network: Option<Arc<crate::network::AllocNetwork>>,
}

impl std::fmt::Debug for TaskRunnerShared {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("TaskRunnerShared")
            .field("alloc_id", &self.alloc_id)
            .field("task_name", &self.task_name)
            .finish_non_exhaustive()
    }
}

impl TaskRunnerShared {
    pub(crate) fn now(&self) -> i64 {
        self.deps.clock.now_unix_nanos()
    }

    pub(crate) fn event(&self, event_type: &str) -> TaskEvent {
        TaskEvent::new(event_type, self.now())
    }

    pub(crate) fn phase(&self) -> TaskPhase {
        lock(&self.lifecycle).phase
    }

    pub(crate) fn kill_token(&self) -> CancellationToken {
        lock(&self.kill_token).clone()
    }

    pub(crate) fn task(&self) -> Arc<Task> {
        lock(&self.task).clone()
    }

    pub(crate) fn alloc(&self) -> Arc<Allocation> {
        lock(&self.alloc).clone()
    }

    /// Applies a phase change and/or an event, persists the task state, then reports it.
    pub(crate) fn record(
        &self,
        to: Option<TaskPhase>,
        event: Option<TaskEvent>,
    ) -> Result<(), IllegalTransition> {
        let counters = self.deps.task_counters.as_ref();
        let (snapshot, counted) = {
            let mut lifecycle = lock(&self.lifecycle);
            let previous_state = lifecycle.task_state.state.clone();
            if let Some(to) = to {
                lifecycle.move_to(to, self.now())?;
            }
            let counted_event = counters.and(event.clone());
            if let Some(event) = event {
                lifecycle.push_event(event);
            }
            let counted = match counters {
                Some(_) => crate::task_metrics::counted(
                    &previous_state,
                    &lifecycle.task_state,
                    counted_event.as_ref(),
                ),
                None => Vec::new(),
            };
            (lifecycle.clone(), counted)
        };
        if let (Some(counters), false) = (counters, counted.is_empty()) {
            let labels = crate::task_metrics::task_labels(&self.alloc(), &self.task_name);
            let labels: Vec<(&'static str, &str)> = labels
                .iter()
                .map(|(label, value)| (*label, value.as_str()))
                .collect();
            for name in counted {
                counters.increment(name, &labels);
            }
        }
        self.phase_watch.send_if_modified(|phase| {
            let changed = *phase != snapshot.phase;
            *phase = snapshot.phase;
            changed
        });
        // A phase change is what restore resumes from: flushed before anyone acts on it. An
        // event alone is informational: it rides along with the next flush.
        let db = &self.deps.state_db;
        let persisted = if to.is_some() {
            db.put_task(
                &self.alloc_id,
                &self.task_name,
                TaskRecordPart::State,
                &snapshot,
            )
        } else {
            db.put_task_relaxed(
                &self.alloc_id,
                &self.task_name,
                TaskRecordPart::State,
                &snapshot,
            )
        };
        if let Err(error) = persisted {
            tracing::error!(alloc_id = %self.alloc_id, task = %self.task_name, %error, "failed to persist task state");
        }
        // The alloc runner may be gone (shutting down); nothing to report to then.
        let _ = self.state_changed.send(self.task_name.clone());
        Ok(())
    }

    /// Emits an event without a phase change.
    pub(crate) fn emit(&self, event: TaskEvent) {
        // No phase change: cannot be an illegal transition.
        let _ = self.record(None, Some(event));
    }

    fn local_snapshot(&self) -> TaskLocalState {
        let mut local = lock(&self.local);
        local.restart_tracker = Some(lock(&self.tracker).state());
        local.clone()
    }

    /// Persists the local state, flushed to disk before it returns.
    pub(crate) fn persist_local(&self) -> Result<(), StateDbError> {
        self.deps.state_db.put_task(
            &self.alloc_id,
            &self.task_name,
            TaskRecordPart::Local,
            &self.local_snapshot(),
        )
    }

    /// Persists the local state without a flush of its own: for records whose loss in a crash
    /// only repeats idempotent work (a prestart hook's `done` flag, the initial empty record).
    /// They become durable with the next durable write of the task, which always comes before
    /// the task is started (the "Starting" phase change).
    pub(crate) fn persist_local_relaxed(&self) -> Result<(), StateDbError> {
        self.deps.state_db.put_task_relaxed(
            &self.alloc_id,
            &self.task_name,
            TaskRecordPart::Local,
            &self.local_snapshot(),
        )
    }

    pub(crate) fn persist_local_relaxed_logged(&self) {
        if let Err(error) = self.persist_local_relaxed() {
            tracing::error!(alloc_id = %self.alloc_id, task = %self.task_name, %error, "failed to persist task local state");
        }
    }

    pub(crate) fn persist_local_logged(&self) {
        if let Err(error) = self.persist_local() {
            tracing::error!(alloc_id = %self.alloc_id, task = %self.task_name, %error, "failed to persist task local state");
        }
    }
}
