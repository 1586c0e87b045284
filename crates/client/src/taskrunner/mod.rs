//! The task runner: drives one task of an allocation through its lifecycle — start gate,
//! prestart hooks, driver start, poststart hooks, wait, exit handling with the restart tracker,
//! kill — persisting every transition in the client state db before acting on or reporting it.
//!
//! The lifecycle is the state machine of [`state`] (diagram there): an illegal transition is an
//! [`IllegalTransition`] error, never a silent no-op. The run loop lives in `run_loop.rs`, the kill
//! procedure in `kill.rs`, what they and the handle share in `shared.rs`, the restart rules in
//! [`restarts`], and the hook pipeline in [`hooks`].
//!
//! Two cancellations, never confused:
//! - **kill** ([`TaskRunner::kill`]): stop the task — pre-kill hooks, shutdown delay, kill
//!   signal to the whole tree, `kill_timeout` (capped by `max_kill_timeout`), SIGKILL; the task
//!   is dead and runs again only on an AllTasks restart ([`TaskRunner::destroy`] ends the
//!   runner);
//! - **agent shutdown** (the alloc's shutdown token): stop driving the task and leave it running;
//!   the persisted handle lets the next agent re-attach ([`TaskRunner::restore`]).
//!
//! **Not** here: ordering between tasks (the alloc runner's coordinator) or how tasks run (the
//! driver, behind [`driver::TaskDriver`]).

pub mod driver;
pub mod drivers;
pub mod exec_context;
pub mod hooks;
mod kill;
pub mod restarts;
mod run_loop;
mod shared;
pub mod state;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use drover_structs::{Allocation, Task, TaskEvent, TaskState};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

use crate::allocdir::AllocDir;
pub(crate) use crate::mutex::lock;
use crate::state_db::TaskRecordPart;
pub use crate::taskrunner::exec_context::TaskExecContext;
use crate::taskrunner::restarts::{
    RestartBackoff, RestartMode, RestartPolicySettings, RestartTracker, RestartTrackerState,
};
pub(crate) use crate::taskrunner::shared::{TaskCommand, TaskRunnerShared};
pub use crate::taskrunner::shared::{TaskLocalState, TaskRunnerDeps, TaskRunnerError};
pub use crate::taskrunner::state::{IllegalTransition, TaskLifecycle, TaskPhase};

/// Task meta key (task, then group, then job meta) enabling drover's exponential restart
/// backoff: the factor, for example `"2"`.
pub const META_RESTART_BACKOFF_FACTOR: &str = "drover.restart.backoff_factor";
/// Task meta key: the cap of the backed-off delay, a Go duration such as `"5m"`.
pub const META_RESTART_MAX_DELAY: &str = "drover.restart.max_delay";

/// Drivers whose tasks run in their own namespaces and root, which `alloc exec` enters.
pub const ISOLATING_DRIVERS: &[&str] = &["exec", "docker"];

/// A docker task's main process (the handle's `driver_state.pid`) and the cgroup the engine
/// put it in (read from `/proc/<pid>/cgroup`), for `alloc exec` into the container.
fn container_process(
    driver_state: &serde_json::Value,
) -> (Option<i32>, Option<drover_driver::CgroupRef>) {
    let pid = driver_state
        .get("pid")
        .and_then(serde_json::Value::as_i64)
        .and_then(|pid| i32::try_from(pid).ok())
        .filter(|pid| *pid > 0);
    let cgroup = pid.and_then(|pid| {
        let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
        let path = text.lines().find_map(|line| {
            let mut fields = line.splitn(3, ':');
            let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
            (controllers.split(',').any(|name| name == "memory") || controllers.is_empty())
                .then(|| path.trim_start_matches('/').to_string())
        })?;
        (!path.is_empty()).then(|| drover_driver::CgroupRef {
            root: std::path::PathBuf::from("/sys/fs/cgroup"),
            name: path,
        })
    });
    (pid, cgroup)
}

/// The user an isolated task without a `user` runs as (the exec driver's default).
pub const ISOLATED_DEFAULT_USER: &str = "nobody";

/// The environment a process was started with (`/proc/<pid>/environ`); empty when unreadable.
fn process_environment(pid: i32) -> BTreeMap<String, String> {
    std::fs::read(format!("/proc/{pid}/environ"))
        .map(|bytes| {
            bytes
                .split(|byte| *byte == 0)
                .filter_map(|entry| {
                    let text = String::from_utf8_lossy(entry);
                    let (key, value) = text.split_once('=')?;
                    (!key.is_empty()).then(|| (key.to_string(), value.to_string()))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The per-task inputs of [`TaskRunner::new`] and [`TaskRunner::restore`].
#[derive(Debug)]
pub struct TaskRunnerArgs {
    pub deps: TaskRunnerDeps,
    pub alloc: Arc<Allocation>,
    pub task: Task,
    pub alloc_dir: AllocDir,
    /// Opened by the alloc runner's coordinator when this task may start.
    pub start_gate: watch::Receiver<bool>,
    /// Receives the task name whenever its state changes.
    pub state_changed: mpsc::UnboundedSender<String>,
    /// Cancelled when the agent shuts down (tasks are left running).
    pub agent_shutdown: CancellationToken,
    /// The group's network, when the group has one of its own (bridge, none, CNI).
    pub network: Option<Arc<crate::network::AllocNetwork>>,
}

/// Lifecycle requests from hooks, routed to the run loop without holding the runner alive.
#[derive(Debug)]
struct RunnerLifecycleRequests {
    shared: std::sync::Weak<TaskRunnerShared>,
}

impl hooks::TaskLifecycleRequests for RunnerLifecycleRequests {
    fn request_restart(&self, source: &str, reason: &str, failure: bool) {
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        let event = shared
            .event(drover_structs::TASK_RESTART_SIGNAL)
            .with_restart_reason(&format!("{source}: {reason}"));
        let (reply, _ignored) = oneshot::channel();
        let _ = shared.commands.send(TaskCommand::Restart {
            event,
            failure,
            reply,
        });
    }

    fn request_signal(&self, source: &str, reason: &str, signal: &str) {
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        let event = shared
            .event(drover_structs::TASK_SIGNALING)
            .with_task_signal(signal)
            .with_task_signal_reason(&format!("{source}: {reason}"));
        let (reply, _ignored) = oneshot::channel();
        let _ = shared.commands.send(TaskCommand::Signal {
            event,
            signal: signal.to_string(),
            reply,
        });
    }

    fn request_kill(&self, source: &str, reason: &str, fail: bool) {
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        let mut event = shared
            .event(drover_structs::TASK_KILLING)
            .with_kill_reason(&format!("{source}: {reason}"));
        if fail {
            event = event.with_fails_task();
        }
        if shared.phase() != TaskPhase::Dead {
            shared.emit(event);
            shared.kill_token().cancel();
        }
    }

    fn exec_context(&self) -> Option<TaskExecContext> {
        let shared = self.shared.upgrade()?;
        exec_context_of(&shared).ok()
    }

    fn persist_hook_state(&self, hook: &str, state: BTreeMap<String, String>) {
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        {
            let mut local = lock(&shared.local);
            let entry = local.hooks.entry(hook.to_string()).or_default();
            if entry.data == state {
                return;
            }
            entry.data = state;
        }
        shared.persist_local_logged();
    }
}

/// [`TaskRunner::exec_context`] of the runner whose shared state is `shared`.
fn exec_context_of(shared: &TaskRunnerShared) -> Result<TaskExecContext, TaskRunnerError> {
    let not_running = || TaskRunnerError::TaskNotRunning {
        task: shared.task_name.clone(),
    };
    if shared.phase() != TaskPhase::Running {
        return Err(not_running());
    }
    let handle = lock(&shared.local).handle.clone().ok_or_else(not_running)?;
    // Handles of drivers that run tasks under a shim name the task's pid and cgroup; other
    // drivers' handles (the mock's) simply give neither.
    let decoded = serde_json::from_value::<drover_driver::TaskHandle>(handle.handle).ok();
    let docker = handle.driver_name == "docker";
    let (container_pid, container_cgroup) = match (&decoded, docker) {
        (Some(decoded), true) => container_process(&decoded.driver_state),
        _ => (None, None),
    };
    let removed_env = decoded
        .as_ref()
        .map(drover_driver::TaskHandle::removed_env)
        .unwrap_or_default();
    let shim = decoded.and_then(|handle| handle.shim);
    let task = shared.task();
    let task_pid = shim.as_ref().map(|shim| shim.task_pid).or(container_pid);
    let mut env = shared.env_cell.get().env;
    // A task re-attached by a restarted agent has not run its prestart hooks in this
    // process, so the environment is taken from the task's process itself.
    if env.is_empty()
        && let Some(pid) = task_pid
    {
        env = process_environment(pid);
    }
    // What the driver kept from the task (raw_exec's `denied_envvars`) stays out here too.
    env.retain(|name, _| !removed_env.contains(name));
    let isolated = ISOLATING_DRIVERS.contains(&handle.driver_name.as_str());
    let user = Some(task.user.clone()).filter(|user| !user.is_empty());
    Ok(TaskExecContext {
        env,
        // An isolated task's root is its task dir, where it starts.
        cwd: if isolated {
            std::path::PathBuf::from("/")
        } else {
            shared.task_dir.dir.clone()
        },
        // A container's default user is the image's (the engine's concern), not `nobody`.
        user: if isolated && !docker {
            user.or_else(|| Some(ISOLATED_DEFAULT_USER.to_string()))
        } else {
            user
        },
        task_pid,
        cgroup: shim.and_then(|shim| shim.cgroup).or(container_cgroup),
        isolated,
    })
}

fn hook_context(shared: &Arc<TaskRunnerShared>) -> hooks::TaskHookContext {
    let weak = Arc::downgrade(shared);
    let emit_target = weak.clone();
    let emit: Arc<dyn Fn(TaskEvent) + Send + Sync> = Arc::new(move |event| {
        if let Some(shared) = emit_target.upgrade() {
            shared.emit(event);
        }
    });
    let task = shared.task();
    let alloc = shared.alloc();
    let namespace = alloc.namespace.clone();
    let region = alloc
        .job
        .as_deref()
        .map(|job| job.region.clone())
        .filter(|region| !region.is_empty())
        .unwrap_or_else(|| shared.deps.region.clone());
    let path_view = if shared.deps.drivers.isolates_filesystem(&task.driver) {
        crate::taskenv::TaskPathView::Chroot
    } else {
        crate::taskenv::TaskPathView::Host
    };
    let env_inputs = hooks::env::EnvHookInputs {
        node: shared.deps.node.clone(),
        region,
        path_view,
        task_dir: shared.task_dir.clone(),
        task_name: task.name.clone(),
        network: shared.network.clone(),
    };
    let services_hook = Arc::new(hooks::services::TaskServiceHook::new(
        shared.deps.services.clone(),
        alloc,
        task.clone(),
        env_inputs.clone(),
    ));
    hooks::TaskHookContext {
        config: shared.deps.config.clone(),
        alloc_dir: shared.alloc_dir.clone(),
        task_dir: shared.task_dir.clone(),
        events: hooks::TaskEventEmitter::new(emit, shared.deps.clock.clone()),
        lifecycle: Arc::new(RunnerLifecycleRequests { shared: weak }),
        env_cell: shared.env_cell.clone(),
        env_inputs,
        services_hook,
        alloc_id: shared.alloc_id.clone(),
        namespace,
        identities: shared.deps.identities.clone(),
        identity_tokens: hooks::identity::TaskTokens::default(),
        identity_state: lock(&shared.local)
            .hooks
            .get("identity")
            .map(|state| state.data.clone())
            .unwrap_or_default(),
        clock: shared.deps.clock.clone(),
        task_api: shared.deps.task_api.clone(),
    }
}

/// Reads the restart policy of `task` (task level, else group level, else Nomad's defaults for
/// the job type) plus drover's backoff knobs from meta.
pub fn restart_policy_settings(alloc: &Allocation, task: &Task) -> RestartPolicySettings {
    let job = alloc.job.as_deref();
    let group = job.and_then(|job| job.lookup_task_group(&alloc.task_group));
    let policy = task
        .restart_policy
        .clone()
        .or_else(|| group.and_then(|group| group.restart_policy.clone()));
    let is_batch = matches!(alloc.job_type(), "batch" | "sysbatch");
    let settings = match policy {
        Some(policy) => RestartPolicySettings {
            attempts: u32::try_from(policy.attempts).unwrap_or(0),
            interval: policy.interval.to_std(),
            delay: policy.delay.to_std(),
            mode: if policy.mode == drover_structs::RESTART_POLICY_MODE_DELAY {
                RestartMode::Delay
            } else {
                RestartMode::Fail
            },
            backoff: None,
        },
        // Nomad's defaults (service: 2 in 30m, delay 15s; batch: 3 in 24h, delay 15s; fail).
        None => RestartPolicySettings {
            attempts: if is_batch { 3 } else { 2 },
            interval: std::time::Duration::from_secs(if is_batch { 24 * 3600 } else { 30 * 60 }),
            delay: std::time::Duration::from_secs(15),
            mode: RestartMode::Fail,
            backoff: None,
        },
    };
    let meta_value = |key: &str| {
        task.meta
            .get(key)
            .or_else(|| group.and_then(|group| group.meta.get(key)))
            .or_else(|| job.and_then(|job| job.meta.get(key)))
            .cloned()
    };
    // The `restart` block's extension fields win; the meta keys are the older spelling.
    let block = task
        .restart_policy
        .as_ref()
        .or_else(|| group.and_then(|group| group.restart_policy.as_ref()));
    let block_factor = block
        .map(|policy| policy.backoff_factor)
        .filter(|factor| *factor != 0.0);
    let block_max_delay = block
        .map(|policy| policy.max_delay)
        .filter(|max_delay| !max_delay.is_zero())
        .map(|max_delay| max_delay.to_std());
    let backoff = block_factor
        .or_else(|| {
            meta_value(META_RESTART_BACKOFF_FACTOR)
                .and_then(|factor| factor.trim().parse::<f64>().ok())
        })
        .filter(|factor| factor.is_finite() && *factor >= 1.0)
        .map(|factor| RestartBackoff {
            factor,
            max_delay: block_max_delay
                .or_else(|| {
                    meta_value(META_RESTART_MAX_DELAY)
                        .and_then(|text| drover_structs::DurationNs::parse_go(text.trim()).ok())
                        .map(|duration| duration.to_std())
                })
                .unwrap_or(std::time::Duration::from_secs(30 * 60)),
        });
    RestartPolicySettings {
        backoff,
        ..settings
    }
}

fn restart_tracker_for(
    deps: &TaskRunnerDeps,
    alloc: &Allocation,
    task: &Task,
    persisted: Option<RestartTrackerState>,
) -> RestartTracker {
    let policy = restart_policy_settings(alloc, task);
    let on_success = restarts::restarts_on_success(
        alloc.job_type(),
        task.lifecycle
            .as_ref()
            .map(|lifecycle| lifecycle.hook.as_str()),
        task.is_sidecar(),
    );
    let seed = task.name.bytes().fold(deps.jitter_seed, |seed, byte| {
        seed.wrapping_mul(31).wrapping_add(u64::from(byte))
    });
    let now = deps.clock.now_unix_nanos();
    match persisted {
        Some(state) => RestartTracker::restore(policy, on_success, state, now, seed),
        None => RestartTracker::new(policy, on_success, now, seed),
    }
}

/// A handle on one task runner. Cheap to clone.
#[derive(Debug, Clone)]
pub struct TaskRunner {
    shared: Arc<TaskRunnerShared>,
    run_loop_exited: watch::Receiver<bool>,
}

impl TaskRunner {
    /// A runner for a task that has never run on this client. Persists its initial state
    /// ("Received") before returning; [`TaskRunner::spawn`] starts it.
    pub fn new(args: TaskRunnerArgs) -> Result<(TaskRunner, TaskRunLoop), TaskRunnerError> {
        let max_events = args.deps.config.max_task_events;
        let (runner, run_loop) = Self::build(
            args,
            TaskLifecycle::new(max_events),
            TaskLocalState::default(),
        )?;
        // Relaxed: a task whose records are lost in a crash is simply new again on restore, and
        // nothing is started before the durable "Starting" record.
        runner.shared.persist_local_relaxed()?;
        let received = runner.shared.event(drover_structs::TASK_RECEIVED);
        runner.shared.emit(received);
        Ok((runner, run_loop))
    }

    /// A runner rebuilt from the state db (agent restart). Returns `None` when the db holds no
    /// state for the task (the task never got its first record; it is then new).
    pub fn restore(
        args: TaskRunnerArgs,
    ) -> Result<Option<(TaskRunner, TaskRunLoop)>, TaskRunnerError> {
        let db = args.deps.state_db.clone();
        let alloc_id = args.alloc.id.clone();
        let lifecycle: Option<TaskLifecycle> =
            db.get_task(&alloc_id, &args.task.name, TaskRecordPart::State)?;
        let local: Option<TaskLocalState> =
            db.get_task(&alloc_id, &args.task.name, TaskRecordPart::Local)?;
        let (Some(lifecycle), Some(local)) = (lifecycle, local) else {
            return Ok(None);
        };
        Self::build(args, lifecycle, local).map(Some)
    }

    fn build(
        args: TaskRunnerArgs,
        lifecycle: TaskLifecycle,
        local: TaskLocalState,
    ) -> Result<(TaskRunner, TaskRunLoop), TaskRunnerError> {
        let TaskRunnerArgs {
            deps,
            alloc,
            task,
            alloc_dir,
            start_gate,
            state_changed,
            agent_shutdown,
            network,
        } = args;
        let task_dir = alloc_dir.task_dir(&task.name)?;
        let tracker = restart_tracker_for(&deps, &alloc, &task, local.restart_tracker);
        let (commands_tx, commands_rx) = mpsc::unbounded_channel();
        let (exited_tx, exited_rx) = watch::channel(false);
        let (phase_watch, _) = watch::channel(lifecycle.phase);
        let shared = Arc::new(TaskRunnerShared {
            alloc_id: alloc.id.clone(),
            task_name: task.name.clone(),
            deps,
            alloc: Mutex::new(alloc),
            task: Mutex::new(Arc::new(task)),
            task_dir,
            alloc_dir,
            lifecycle: Mutex::new(lifecycle),
            local: Mutex::new(local),
            tracker: Mutex::new(tracker),
            state_changed,
            kill_token: Mutex::new(CancellationToken::new()),
            destroy_token: CancellationToken::new(),
            phase_watch,
            agent_shutdown,
            commands: commands_tx,
            run_loop_exited: exited_tx,
            env_cell: hooks::TaskEnvCell::default(),
            hooks: std::sync::OnceLock::new(),
            services_hook: std::sync::OnceLock::new(),
            network,
        });
        let context = hook_context(&shared);
        // Freshly created: nobody else can have set it yet.
        let _ = shared.services_hook.set(context.services_hook.clone());
        let hook_list = hooks::build_task_hooks(&shared.task(), &context);
        // Freshly created: nobody else can have set the hooks yet.
        let _ = shared.hooks.set(hook_list);
        let run_loop = TaskRunLoop::new(shared.clone(), commands_rx, start_gate);
        Ok((
            TaskRunner {
                shared,
                run_loop_exited: exited_rx,
            },
            run_loop,
        ))
    }

    /// The task's name.
    pub fn name(&self) -> &str {
        &self.shared.task_name
    }

    /// The task as last updated.
    pub fn task(&self) -> Arc<Task> {
        self.shared.task()
    }

    /// The Nomad task state (with display messages filled in).
    pub fn task_state(&self) -> TaskState {
        lock(&self.shared.lifecycle).task_state.clone()
    }

    /// The lifecycle phase.
    pub fn phase(&self) -> TaskPhase {
        self.shared.phase()
    }

    /// Follows the lifecycle phase (the checks hook runs checks while it is `Running`).
    pub fn subscribe_phase(&self) -> watch::Receiver<TaskPhase> {
        self.shared.phase_watch.subscribe()
    }

    /// Whether the run loop has exited (runner destroyed, or agent shutdown).
    pub fn run_loop_exited(&self) -> bool {
        *self.run_loop_exited.borrow()
    }

    /// Waits until the run loop exits.
    pub async fn wait_run_loop_exited(&self) {
        let mut receiver = self.run_loop_exited.clone();
        // An error means the sender is gone, which only happens once the loop is over.
        let _ = receiver.wait_for(|exited| *exited).await;
    }

    /// Kills the task: emits `event` (a "Killing" event gets its kill timeout filled in), then
    /// the run loop runs pre-kill hooks, the shutdown delay and the kill itself. Returns once the
    /// task is dead. A dead task is left alone. The runner stays, so an AllTasks restart can run
    /// the task again; [`TaskRunner::destroy`] ends it.
    pub async fn kill(&self, event: TaskEvent) {
        let mut phase = self.shared.phase_watch.subscribe();
        if self.run_loop_exited() || *phase.borrow() == TaskPhase::Dead {
            return;
        }
        let task = self.shared.task();
        let event = if event.r#type == drover_structs::TASK_KILLING {
            event.with_kill_timeout(
                task.kill_timeout,
                drover_structs::DurationNs::from_std(self.shared.deps.config.max_kill_timeout),
            )
        } else {
            event
        };
        let kill_token = self.shared.kill_token();
        if !kill_token.is_cancelled() {
            self.shared.emit(event);
            kill_token.cancel();
        }
        let mut exited = self.run_loop_exited.clone();
        tokio::select! {
            _ = phase.wait_for(|phase| *phase == TaskPhase::Dead) => {}
            _ = exited.wait_for(|exited| *exited) => {}
        }
    }

    /// Ends the runner for good once its task is dead (alloc GC): the run loop exits and the
    /// task never runs again. Kill first; a live task is left to the caller.
    pub async fn destroy(&self) {
        self.shared.destroy_token.cancel();
        self.wait_run_loop_exited().await;
    }

    /// Restarts a running task (a "Restart Signaled" event; the task is killed and started
    /// again at once). `failure` counts the restart against the policy.
    pub async fn restart(&self, event: TaskEvent, failure: bool) -> Result<(), TaskRunnerError> {
        if self.shared.phase() != TaskPhase::Running {
            return Err(TaskRunnerError::TaskNotRunning {
                task: self.shared.task_name.clone(),
            });
        }
        let (reply, receive) = oneshot::channel();
        self.send(
            TaskCommand::Restart {
                event,
                failure,
                reply,
            },
            receive,
        )
        .await
    }

    /// Restarts the task whether it is running or dead (AllTasks restart). A dead task runs
    /// again once its start gate opens.
    pub async fn force_restart(&self, event: TaskEvent) -> Result<(), TaskRunnerError> {
        if lock(&self.shared.local).destroyed || self.run_loop_exited() {
            return Err(TaskRunnerError::TaskFinished {
                task: self.shared.task_name.clone(),
            });
        }
        let (reply, receive) = oneshot::channel();
        self.send(TaskCommand::ForceRestart { event, reply }, receive)
            .await
    }

    /// Sends `signal` to the running task's whole process tree ("Signaling" event).
    pub async fn signal(&self, event: TaskEvent, signal: &str) -> Result<(), TaskRunnerError> {
        if self.shared.phase() != TaskPhase::Running {
            return Err(TaskRunnerError::TaskNotRunning {
                task: self.shared.task_name.clone(),
            });
        }
        let (reply, receive) = oneshot::channel();
        self.send(
            TaskCommand::Signal {
                event,
                signal: signal.to_string(),
                reply,
            },
            receive,
        )
        .await
    }

    async fn send(
        &self,
        command: TaskCommand,
        receive: oneshot::Receiver<Result<(), TaskRunnerError>>,
    ) -> Result<(), TaskRunnerError> {
        let not_running = || TaskRunnerError::TaskNotRunning {
            task: self.shared.task_name.clone(),
        };
        self.shared
            .commands
            .send(command)
            .map_err(|_| not_running())?;
        receive.await.map_err(|_| not_running())?
    }

    /// Applies an allocation update from the server: the task definition and restart policy
    /// are replaced for later starts, and update hooks run.
    pub async fn update(&self, alloc: Arc<Allocation>) {
        let task = alloc
            .job
            .as_deref()
            .and_then(|job| job.lookup_task_group(&alloc.task_group))
            .and_then(|group| group.lookup_task(&self.shared.task_name))
            .cloned();
        if let Some(task) = task {
            lock(&self.shared.tracker).set_policy(restart_policy_settings(&alloc, &task));
            *lock(&self.shared.task) = Arc::new(task);
        }
        *lock(&self.shared.alloc) = alloc.clone();
        run_loop::run_update_hooks(&self.shared, alloc).await;
    }

    /// The running task's resource usage (its whole process tree).
    pub async fn stats(&self) -> Result<drover_driver::TaskResourceUsage, TaskRunnerError> {
        let not_running = || TaskRunnerError::TaskNotRunning {
            task: self.shared.task_name.clone(),
        };
        if self.shared.phase() != TaskPhase::Running {
            return Err(not_running());
        }
        let handle = lock(&self.shared.local)
            .handle
            .clone()
            .ok_or_else(not_running)?;
        let driver = self
            .shared
            .deps
            .drivers
            .driver(&handle.driver_name)
            .ok_or_else(not_running)?;
        driver
            .stats(&handle)
            .await
            .map_err(|failure| TaskRunnerError::StatsUnavailable {
                task: self.shared.task_name.clone(),
                message: failure.message,
            })
    }

    /// What `alloc exec` needs to run a command in this task's context. Refused when the task
    /// is not running (there is no process, cgroup or namespace to join).
    pub fn exec_context(&self) -> Result<TaskExecContext, TaskRunnerError> {
        exec_context_of(&self.shared)
    }

    /// Takes the task's services out of the catalog ahead of its kill (the allocation is
    /// stopping and its group's `shutdown_delay` comes first). The kill's own deregistration
    /// then has nothing left to do.
    pub async fn deregister_services(&self) {
        if let Some(hook) = self.shared.services_hook.get() {
            hook.deregister_ahead_of_kill().await;
        }
    }

    /// Records an event on the task (for example "Sibling Task Failed" from the alloc runner).
    pub fn emit_event(&self, event: TaskEvent) {
        self.shared.emit(event);
    }

    /// The persisted local state (for inspection and tests).
    pub fn local_state(&self) -> TaskLocalState {
        lock(&self.shared.local).clone()
    }

    /// Spawns the run loop on the current tokio runtime.
    pub fn spawn(run_loop: TaskRunLoop) -> tokio::task::JoinHandle<()> {
        use tracing::Instrument;
        let span = tracing::info_span!(
            "task",
            alloc_id = %run_loop.alloc_id(),
            task = %run_loop.task_name(),
            node_id = %run_loop.node_id()
        );
        tokio::spawn(run_loop.run().instrument(span))
    }
}

pub use run_loop::TaskRunLoop;
