//! The task runner's run loop: one tokio task per task runner, driving the state machine of
//! [`super::state`]. Every phase change and event is persisted (through
//! `TaskRunnerShared::record`) before the loop acts on it; the driver handle is persisted as soon
//! as start returns and before "Started" is reported.
//!
//! **Not** the public API (see [`super::TaskRunner`]).

use std::sync::Arc;

use drover_structs::{
    Allocation, TASK_DRIVER_FAILURE, TASK_FAILED_VALIDATION, TASK_HOOK_FAILED, TASK_KILLED,
    TASK_NOT_RESTARTING, TASK_RESTARTING, TASK_RESTORE_FAILED, TASK_SETUP_FAILURE, TASK_STARTED,
    TASK_TERMINATED,
};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::driver::{PersistedTaskHandle, Reattached, TaskDriver, TaskExit, TaskLaunchSpec};
use super::hooks::{
    ExitedRequest, ExitedResponse, HookErrorKind, PersistedHookState, PoststartRequest,
    PoststartResponse, PrestartRequest, PrestartResponse, StopRequest, StopResponse, UpdateRequest,
    UpdateResponse,
};
use super::kill::stop_task_processes;
use super::restarts::{RestartDecision, TaskStopCause};
use super::shared::{TaskCommand, TaskRunnerError, TaskRunnerShared};
use super::state::TaskPhase;
use crate::mutex::lock;

/// How one pass of the task's life ended.
enum Outcome {
    /// The agent is shutting down: leave the task as it is.
    Shutdown,
    /// Dead, killed or by itself (completed or failed); may run again on an AllTasks restart.
    Dead,
}

/// How a start attempt ended.
enum StartAttempt {
    Started(PersistedTaskHandle),
    Failed(TaskStopCause),
    /// Validation or setup failure: recorded dead already.
    Dead,
    Killed,
    Shutdown,
}

/// How waiting on a running task ended.
enum Waited {
    Stopped(TaskStopCause),
    Killed,
    Shutdown,
}

/// The run loop of one task runner; consumed by [`super::TaskRunner::spawn`].
pub struct TaskRunLoop {
    shared: Arc<TaskRunnerShared>,
    commands: mpsc::UnboundedReceiver<TaskCommand>,
    start_gate: watch::Receiver<bool>,
}

impl std::fmt::Debug for TaskRunLoop {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("TaskRunLoop")
            .field("task", &self.shared.task_name)
            .finish_non_exhaustive()
    }
}

impl TaskRunLoop {
    pub(crate) fn new(
        shared: Arc<TaskRunnerShared>,
        commands: mpsc::UnboundedReceiver<TaskCommand>,
        start_gate: watch::Receiver<bool>,
    ) -> Self {
        TaskRunLoop {
            shared,
            commands,
            start_gate,
        }
    }

    pub(crate) fn alloc_id(&self) -> &str {
        &self.shared.alloc_id
    }

    pub(crate) fn task_name(&self) -> &str {
        &self.shared.task_name
    }

    pub(crate) fn node_id(&self) -> &str {
        &self.shared.deps.node.id
    }

    /// Runs until the runner is destroyed or the agent shuts down.
    pub async fn run(mut self) {
        self.run_until_done().await;
        // Receivers may all be gone; the flag is only informative then.
        let _ = self.shared.run_loop_exited.send(true);
    }

    fn driver_named(&self, name: &str) -> Option<Arc<dyn TaskDriver>> {
        self.shared.deps.drivers.driver(name)
    }

    async fn run_until_done(&mut self) {
        if lock(&self.shared.local).destroyed {
            return;
        }
        let mut handle = lock(&self.shared.local).handle.clone();
        self.normalize_restored_phase(handle.is_some());
        let mut exit_found_on_restore = None;
        if let Some(persisted) = handle.clone() {
            // A driver may wait for what it needs to re-attach (the docker engine); an agent
            // shutting down meanwhile leaves the handle for the next one.
            let reattached = tokio::select! {
                () = self.shared.agent_shutdown.cancelled() => return,
                reattached = self.reattach(&persisted) => reattached,
            };
            match reattached {
                Some(gone) => {
                    handle = None;
                    exit_found_on_restore = Some(gone);
                }
                None => {
                    tracing::info!(alloc_id = %self.shared.alloc_id, task = %self.shared.task_name, "re-attached to running task");
                    // As after a start: what poststart hooks set up for a running task (its
                    // service registrations) is set up again by this agent.
                    if self.shared.phase() == TaskPhase::Running {
                        self.run_poststart_hooks(handle_pid(&persisted), &persisted)
                            .await;
                    }
                }
            }
        }

        loop {
            if self.shared.phase() != TaskPhase::Dead {
                let outcome = self.live(handle.take(), exit_found_on_restore.take()).await;
                if matches!(outcome, Outcome::Shutdown) {
                    return;
                }
            }
            self.reclaim_unrecorded_runs_of_dead_task().await;
            self.run_stop_hooks().await;
            if !self.wait_for_force_restart().await {
                return;
            }
        }
    }

    /// Brings a phase read back from the state db in line with the persisted handle: the
    /// previous agent may have died between persisting one and the other.
    fn normalize_restored_phase(&self, has_handle: bool) {
        let mut lifecycle = lock(&self.shared.lifecycle);
        match (lifecycle.phase, has_handle) {
            // Started, but "Started" never reported: report it now, once.
            (TaskPhase::Starting, true) => {
                drop(lifecycle);
                self.record_or_log(
                    Some(TaskPhase::Running),
                    Some(self.shared.event(TASK_STARTED)),
                );
            }
            // Nothing was started, or the exit was recorded and released but the restart
            // decision was lost: start (again) through the gate.
            (TaskPhase::Starting | TaskPhase::RestartDelay | TaskPhase::Exited, false) => {
                lifecycle.resume_as_pending();
            }
            // The kill finished but "Killed" was not recorded.
            (TaskPhase::Killing, false) => {
                drop(lifecycle);
                self.finish_kill(None);
            }
            _ => {}
        }
    }

    /// Re-attaches to a persisted handle. `None` when attached; `Some(exit)` describing what
    /// happened when the task is gone.
    async fn reattach(&self, handle: &PersistedTaskHandle) -> Option<TaskExit> {
        let Some(driver) = self.driver_named(&handle.driver_name) else {
            let explanation = format!(
                "driver {:?} is not available to re-attach",
                handle.driver_name
            );
            self.shared.emit(
                self.shared
                    .event(TASK_RESTORE_FAILED)
                    .with_message(&explanation),
            );
            return Some(TaskExit {
                exit_code: -1,
                message: explanation,
                ..TaskExit::default()
            });
        };
        let events = driver_events(&self.shared);
        let (recorded_exit, explanation) = match driver.reattach_reporting(handle, &events).await {
            Ok(Reattached::Attached(_)) => return None,
            Ok(Reattached::Gone { exit, explanation }) => (exit, explanation),
            Err(failure) => (None, failure.message),
        };
        self.shared.emit(
            self.shared
                .event(TASK_RESTORE_FAILED)
                .with_message(&explanation),
        );
        lock(&self.shared.local).handle = None;
        self.shared.persist_local_logged();
        Some(recorded_exit.unwrap_or(TaskExit {
            exit_code: -1,
            message: explanation,
            ..TaskExit::default()
        }))
    }

    /// Dead: wait for an AllTasks restart, the runner's destruction or the agent's shutdown.
    /// Returns whether the task should run again.
    async fn wait_for_force_restart(&mut self) -> bool {
        loop {
            tokio::select! {
                () = self.shared.destroy_token.cancelled() => {
                    lock(&self.shared.local).destroyed = true;
                    self.shared.persist_local_logged();
                    return false;
                }
                () = self.shared.agent_shutdown.cancelled() => return false,
                command = self.commands.recv() => match command {
                    Some(TaskCommand::ForceRestart { event, reply }) => {
                        *lock(&self.shared.kill_token) = CancellationToken::new();
                        let result = self.shared.record(Some(TaskPhase::Pending), Some(event));
                        let _ = reply.send(result.map_err(TaskRunnerError::from));
                        return true;
                    }
                    Some(TaskCommand::Restart { reply, .. }) | Some(TaskCommand::Signal { reply, .. }) => {
                        let _ = reply.send(Err(TaskRunnerError::TaskNotRunning {
                            task: self.shared.task_name.clone(),
                        }));
                    }
                    None => return false,
                },
            }
        }
    }

    /// One life of the task: start attempts, waits and restarts until it is dead, killed, or
    /// the agent shuts down.
    async fn live(
        &mut self,
        mut handle: Option<PersistedTaskHandle>,
        mut exit_found_on_restore: Option<TaskExit>,
    ) -> Outcome {
        loop {
            let cause = if let Some(exit) = exit_found_on_restore.take() {
                if self.shared.phase() == TaskPhase::Killing {
                    self.record_exit(&exit);
                    self.finish_kill(None);
                    return Outcome::Dead;
                }
                self.record_exit(&exit);
                self.run_exited_hooks(Some(exit.clone())).await;
                TaskStopCause::Exited {
                    successful: exit.successful(),
                }
            } else if let Some(running) = handle.take() {
                match self.wait_running(running).await {
                    Waited::Stopped(cause) => cause,
                    Waited::Killed => return Outcome::Dead,
                    Waited::Shutdown => return Outcome::Shutdown,
                }
            } else {
                match self.start_attempt().await {
                    StartAttempt::Started(started) => {
                        handle = Some(started);
                        continue;
                    }
                    StartAttempt::Failed(cause) => cause,
                    StartAttempt::Dead => return Outcome::Dead,
                    StartAttempt::Killed => {
                        self.finish_kill(None);
                        return Outcome::Dead;
                    }
                    StartAttempt::Shutdown => return Outcome::Shutdown,
                }
            };

            let now = self.shared.now();
            let decision = lock(&self.shared.tracker).decide(&cause, now);
            if let RestartDecision::Restart { delay, .. } = &decision {
                let delay_nanos = i64::try_from(delay.as_nanos()).unwrap_or(i64::MAX);
                lock(&self.shared.local).restart_due_unix_nanos =
                    Some(now.saturating_add(delay_nanos));
            }
            self.shared.persist_local_logged();
            match decision {
                RestartDecision::Restart { delay, reason } => {
                    let event = self
                        .shared
                        .event(TASK_RESTARTING)
                        .with_restart_delay(drover_structs::DurationNs::from_std(delay))
                        .with_restart_reason(&reason);
                    self.record_or_log(Some(TaskPhase::RestartDelay), Some(event));
                    let kill = self.shared.kill_token();
                    let wake_at = tokio::time::Instant::now() + delay;
                    loop {
                        tokio::select! {
                            biased;
                            () = kill.cancelled() => {
                                self.finish_kill(None);
                                return Outcome::Dead;
                            }
                            () = self.shared.agent_shutdown.cancelled() => return Outcome::Shutdown,
                            () = tokio::time::sleep_until(wake_at) => break,
                            Some(command) = self.commands.recv() => answer_while_not_running(&self.shared, command),
                        }
                    }
                    lock(&self.shared.local).restart_due_unix_nanos = None;
                    self.record_or_log(Some(TaskPhase::Pending), None);
                }
                RestartDecision::NotRestarting { reason } => {
                    let event = self
                        .shared
                        .event(TASK_NOT_RESTARTING)
                        .with_restart_reason(&reason)
                        .with_fails_task();
                    self.record_or_log(Some(TaskPhase::Dead), Some(event));
                    return Outcome::Dead;
                }
                RestartDecision::Complete { .. } => {
                    self.record_or_log(Some(TaskPhase::Dead), None);
                    return Outcome::Dead;
                }
                RestartDecision::Killed => {
                    self.finish_kill(None);
                    return Outcome::Dead;
                }
            }
        }
    }

    fn record_or_log(&self, to: Option<TaskPhase>, event: Option<drover_structs::TaskEvent>) {
        if let Err(error) = self.shared.record(to, event) {
            tracing::error!(alloc_id = %self.shared.alloc_id, task = %self.shared.task_name, %error, "task state machine refused a transition");
        }
    }

    /// Records the end of a kill: `Killed` (with the kill error, if any), dead.
    fn finish_kill(&self, kill_error: Option<String>) {
        let mut event = self.shared.event(TASK_KILLED);
        if let Some(error) = kill_error {
            event = event.with_kill_error(&error);
        }
        let phase = self.shared.phase();
        let to = if phase == TaskPhase::Dead {
            None
        } else {
            Some(TaskPhase::Dead)
        };
        // Pending/Starting/RestartDelay/Killing → Dead are all edges; Running or Exited first
        // pass through Killing in `kill_running`.
        self.record_or_log(to, Some(event));
    }

    /// "Terminated" with the exit status; Running → Exited.
    fn record_exit(&self, exit: &TaskExit) {
        let mut event = self
            .shared
            .event(TASK_TERMINATED)
            .with_exit_code(exit.exit_code)
            .with_signal(exit.signal)
            .with_oom_killed(exit.oom_killed);
        if !exit.message.is_empty() {
            event = event.with_exit_message(&exit.message);
        }
        let to = (self.shared.phase() == TaskPhase::Running).then_some(TaskPhase::Exited);
        self.record_or_log(to, Some(event));
    }

    async fn release_handle(&self, driver: &dyn TaskDriver, handle: &PersistedTaskHandle) {
        if let Err(failure) = driver.cleanup(handle).await {
            tracing::warn!(alloc_id = %self.shared.alloc_id, task = %self.shared.task_name, error = %failure, "driver cleanup failed");
        }
        lock(&self.shared.local).handle = None;
        self.shared.persist_local_logged();
    }

    async fn start_attempt(&mut self) -> StartAttempt {
        let kill = self.shared.kill_token();
        // A restart delay interrupted by an agent restart is waited out.
        let due = lock(&self.shared.local).restart_due_unix_nanos;
        if let Some(due) = due {
            let remaining = due.saturating_sub(self.shared.now()).max(0);
            let remaining = std::time::Duration::from_nanos(u64::try_from(remaining).unwrap_or(0));
            tokio::select! {
                biased;
                () = kill.cancelled() => return StartAttempt::Killed,
                () = self.shared.agent_shutdown.cancelled() => return StartAttempt::Shutdown,
                () = tokio::time::sleep(remaining) => {}
            }
            lock(&self.shared.local).restart_due_unix_nanos = None;
            self.shared.persist_local_logged();
        }
        // The coordinator decides when this task may start.
        loop {
            tokio::select! {
                // A kill wins over a start that became possible at the same moment.
                biased;
                () = kill.cancelled() => return StartAttempt::Killed,
                () = self.shared.agent_shutdown.cancelled() => return StartAttempt::Shutdown,
                gate = self.start_gate.wait_for(|open| *open) => {
                    if gate.is_err() {
                        // The alloc runner is gone; treat like a shutdown.
                        return StartAttempt::Shutdown;
                    }
                    break;
                }
                Some(command) = self.commands.recv() => answer_while_not_running(&self.shared, command),
            }
        }

        let hook_cancel = CancellationToken::new();
        let mut log_rotation = None;
        let hooks = self.shared.hooks.get().cloned().unwrap_or_default();
        for hook in &hooks {
            let Some(prestart) = hook.as_prestart() else {
                continue;
            };
            let previous = lock(&self.shared.local)
                .hooks
                .get(hook.name())
                .cloned()
                .unwrap_or_default();
            if previous.done {
                continue;
            }
            let request = PrestartRequest {
                alloc: self.shared.alloc(),
                task: self.shared.task(),
                task_dir: self.shared.task_dir.clone(),
                task_env: self.shared.env_cell.get(),
                previous_state: previous.data,
            };
            let mut response = PrestartResponse::default();
            let started_at = tokio::time::Instant::now();
            let result = tokio::select! {
                result = prestart.prestart(&hook_cancel, &request, &mut response) => result,
                () = kill.cancelled() => {
                    hook_cancel.cancel();
                    return StartAttempt::Killed;
                }
                () = self.shared.agent_shutdown.cancelled() => {
                    hook_cancel.cancel();
                    return StartAttempt::Shutdown;
                }
            };
            tracing::debug!(alloc_id = %self.shared.alloc_id, task = %self.shared.task_name, hook = hook.name(), elapsed = ?started_at.elapsed(), "prestart hook finished");
            match result {
                Ok(()) => {
                    self.shared.env_cell.add_from_hook(&response.env);
                    if response.log_rotation.is_some() {
                        log_rotation = response.log_rotation;
                    }
                    let hook_state = PersistedHookState {
                        data: response.state,
                        done: response.done,
                    };
                    let changed = {
                        let mut local = lock(&self.shared.local);
                        // No entry reads back as the default (see `previous` above).
                        let changed =
                            local.hooks.get(hook.name()).cloned().unwrap_or_default() != hook_state;
                        local.hooks.insert(hook.name().to_string(), hook_state);
                        changed
                    };
                    // Prestart hooks are idempotent: losing this in a crash only runs the hook
                    // again. The durable "Starting" record below flushes it before the start.
                    // A hook that keeps no state leaves the record as it was: nothing to write.
                    if changed {
                        self.shared.persist_local_relaxed_logged();
                    }
                }
                Err(error) => {
                    let message = format!("{}: {}", hook.name(), error.message);
                    return match error.kind {
                        HookErrorKind::Validation => {
                            let event = self
                                .shared
                                .event(TASK_FAILED_VALIDATION)
                                .with_validation_error(&error.message)
                                .with_fails_task();
                            self.record_or_log(Some(TaskPhase::Dead), Some(event));
                            StartAttempt::Dead
                        }
                        HookErrorKind::Setup => {
                            let event = self
                                .shared
                                .event(TASK_SETUP_FAILURE)
                                .with_setup_error(&message)
                                .with_fails_task();
                            self.record_or_log(Some(TaskPhase::Dead), Some(event));
                            StartAttempt::Dead
                        }
                        HookErrorKind::Recoverable | HookErrorKind::Unrecoverable => {
                            let event = match error.event {
                                Some(event) => *event,
                                None => self
                                    .shared
                                    .event(TASK_HOOK_FAILED)
                                    .with_message(&message)
                                    .with_display_message(&message),
                            };
                            self.shared.emit(event);
                            StartAttempt::Failed(TaskStopCause::StartFailed {
                                recoverable: error.kind == HookErrorKind::Recoverable,
                            })
                        }
                    };
                }
            }
        }

        // Before a start, any run left unrecorded is stopped. It can take a while, so it comes
        // before the check below: a kill that arrives meanwhile still wins over the start.
        if let Some(driver) = self.driver_named(&self.shared.task().driver) {
            self.reclaim_unrecorded_runs(driver.as_ref()).await;
        }
        // A kill (or shutdown) that arrived while the prestart hooks ran still wins over the
        // start: the hooks' `select!` is not biased, so a hook that was already done could be
        // picked over the kill, and the task was then started after its "Killing" event.
        if kill.is_cancelled() {
            return StartAttempt::Killed;
        }
        if self.shared.agent_shutdown.is_cancelled() {
            return StartAttempt::Shutdown;
        }
        self.record_or_log(Some(TaskPhase::Starting), None);
        let task = self.shared.task();
        let Some(driver) = self.driver_named(&task.driver) else {
            let message = format!("driver {:?} is not available on this client", task.driver);
            self.record_or_log(
                Some(TaskPhase::Exited),
                Some(
                    self.shared
                        .event(TASK_DRIVER_FAILURE)
                        .with_driver_error(&message),
                ),
            );
            return StartAttempt::Failed(TaskStopCause::StartFailed { recoverable: false });
        };
        let spec = self.launch_spec(
            log_rotation.unwrap_or_else(|| super::hooks::logs::log_rotation_for(&task)),
        );
        let start_began = tokio::time::Instant::now();
        let started = driver.start(spec).await;
        tracing::debug!(elapsed = ?start_began.elapsed(), ok = started.is_ok(), "driver start returned");
        let started = match started {
            Ok(started) => started,
            Err(failure) => {
                self.record_or_log(
                    Some(TaskPhase::Exited),
                    Some(
                        self.shared
                            .event(TASK_DRIVER_FAILURE)
                            .with_driver_error(&failure.message),
                    ),
                );
                return StartAttempt::Failed(TaskStopCause::StartFailed {
                    recoverable: failure.recoverable,
                });
            }
        };

        // Persist the handle before anything reports the task as started.
        lock(&self.shared.local).handle = Some(started.handle.clone());
        if let Err(error) = self.shared.persist_local() {
            tracing::error!(alloc_id = %self.shared.alloc_id, task = %self.shared.task_name, %error, "cannot persist the task handle; stopping the task");
            let _ = driver
                .kill(&started.handle, "SIGKILL", std::time::Duration::ZERO)
                .await;
            let _ = driver.cleanup(&started.handle).await;
            lock(&self.shared.local).handle = None;
            self.record_or_log(
                Some(TaskPhase::Exited),
                Some(
                    self.shared
                        .event(TASK_DRIVER_FAILURE)
                        .with_driver_error(&format!("failed to persist task handle: {error}")),
                ),
            );
            return StartAttempt::Failed(TaskStopCause::StartFailed { recoverable: true });
        }
        self.record_or_log(
            Some(TaskPhase::Running),
            Some(self.shared.event(TASK_STARTED)),
        );
        self.run_poststart_hooks(started.pid, &started.handle).await;
        StartAttempt::Started(started.handle)
    }

    /// `<data_dir>/client/tasks/<alloc_id>/<task>`: one subdir per run of the task.
    fn supervisor_base_dir(&self) -> std::path::PathBuf {
        self.shared
            .deps
            .config
            .client_state_dir()
            .join("tasks")
            .join(&self.shared.alloc_id)
            .join(&self.shared.task_name)
    }

    /// A dead task leaves no process behind. If the previous agent died between a shim's start
    /// and persisting its handle, and the task was then killed (or stopped) before it could be
    /// started again, that unrecorded run is still going: only a start used to reclaim it, so
    /// a task stopped in that window was reported "Killed" while its process lived on as an
    /// orphan. Reclaim it here, whenever the task is dead with no run recorded.
    async fn reclaim_unrecorded_runs_of_dead_task(&self) {
        if lock(&self.shared.local).handle.is_some() {
            return;
        }
        let task = self.shared.task();
        if let Some(driver) = self.driver_named(&task.driver) {
            self.reclaim_unrecorded_runs(driver.as_ref()).await;
        }
    }

    /// Before a start (no run of the task is recorded), any run dir left is from a start whose
    /// handle was never persisted: have the driver stop what runs there.
    async fn reclaim_unrecorded_runs(&self, driver: &dyn TaskDriver) {
        let Ok(entries) = std::fs::read_dir(self.supervisor_base_dir()) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if !path.is_dir() {
                continue;
            }
            tracing::warn!(path = %path.display(), "reclaiming a run whose handle was never recorded");
            if let Err(failure) = driver.reclaim_unrecorded(&path).await {
                tracing::error!(path = %path.display(), error = %failure, "failed to reclaim an unrecorded run");
            }
        }
    }

    fn launch_spec(&self, log_rotation: super::driver::LogRotation) -> TaskLaunchSpec {
        let task = self.shared.task();
        let alloc = self.shared.alloc();
        let env = self.shared.env_cell.get();
        let allocated = alloc
            .allocated_resources
            .as_ref()
            .and_then(|resources| resources.tasks.get(&task.name));
        let asked = task.resources.clone().unwrap_or_default();
        TaskLaunchSpec {
            alloc_id: alloc.id.clone(),
            task_name: task.name.clone(),
            driver_name: task.driver.clone(),
            config: env.interpolate_config(&task.config),
            user: task.user.clone(),
            task_dir: self.shared.task_dir.clone(),
            supervisor_state_dir: self.supervisor_base_dir().join(run_name()),
            logs_dir: self.shared.alloc_dir.logs_dir.clone(),
            log_rotation,
            cpu_shares: allocated.map_or(asked.cpu, |resources| resources.cpu.cpu_shares),
            memory_mb: allocated.map_or(asked.memory_mb, |resources| resources.memory.memory_mb),
            memory_max_mb: allocated.map_or(asked.memory_max_mb, |resources| {
                resources.memory.memory_max_mb
            }),
            reserved_cores: allocated
                .and_then(|resources| resources.cpu.reserved_cores.clone())
                .unwrap_or_default(),
            hostname: alloc
                .job
                .as_deref()
                .and_then(|job| job.lookup_task_group(&alloc.task_group))
                .and_then(|group| group.networks.first())
                .map(|network| env.interpolate(&network.hostname))
                .filter(|hostname| !hostname.is_empty()),
            // The volumes hook ran the same resolution before this start and failed the task
            // on an error, and neither input has changed since (the client's host volumes are
            // fixed for the agent's life), so an error cannot reach here.
            mounts: super::hooks::volumes::task_mounts(
                &alloc,
                &task,
                &self.shared.deps.config.host_volumes,
                &env,
            )
            .unwrap_or_default(),
            task_network: allocated
                .and_then(|resources| resources.networks.first())
                .map(|network| drover_driver::TaskNetwork {
                    ip: network.ip.clone(),
                    ports: network
                        .reserved_ports
                        .iter()
                        .chain(&network.dynamic_ports)
                        .map(|port| (port.label.clone(), port.value))
                        .collect(),
                }),
            // The network hook set it up before this start.
            network: self
                .shared
                .network
                .as_ref()
                .and_then(|network| network.task_network()),
            events: driver_events(&self.shared),
            env: env.env,
        }
    }

    async fn wait_running(&mut self, handle: PersistedTaskHandle) -> Waited {
        let Some(driver) = self.driver_named(&handle.driver_name) else {
            let exit = TaskExit {
                exit_code: -1,
                message: format!("driver {:?} is not available", handle.driver_name),
                ..TaskExit::default()
            };
            self.record_exit(&exit);
            lock(&self.shared.local).handle = None;
            self.shared.persist_local_logged();
            return Waited::Stopped(TaskStopCause::Exited { successful: false });
        };
        if self.shared.phase() == TaskPhase::Killing {
            // Restored in the middle of a kill: finish it.
            return if self.kill_running(driver.as_ref(), &handle).await {
                Waited::Killed
            } else {
                Waited::Shutdown
            };
        }
        let kill = self.shared.kill_token();
        loop {
            tokio::select! {
                biased;
                () = kill.cancelled() => {
                    return if self.kill_running(driver.as_ref(), &handle).await {
                        Waited::Killed
                    } else {
                        Waited::Shutdown
                    };
                }
                () = self.shared.agent_shutdown.cancelled() => return Waited::Shutdown,
                waited = driver.wait(&handle) => {
                    let exit = waited.unwrap_or_else(|failure| TaskExit {
                        exit_code: -1,
                        message: failure.message,
                        ..TaskExit::default()
                    });
                    self.record_exit(&exit);
                    self.release_handle(driver.as_ref(), &handle).await;
                    self.run_exited_hooks(Some(exit.clone())).await;
                    return Waited::Stopped(TaskStopCause::Exited { successful: exit.successful() });
                }
                command = self.commands.recv() => match command {
                    Some(TaskCommand::Restart { event, failure, reply }) => {
                        let cause = self.restart_running(driver.as_ref(), &handle, event, failure).await;
                        let _ = reply.send(Ok(()));
                        return Waited::Stopped(cause);
                    }
                    Some(TaskCommand::ForceRestart { event, reply }) => {
                        let cause = self.restart_running(driver.as_ref(), &handle, event, false).await;
                        let _ = reply.send(Ok(()));
                        return Waited::Stopped(cause);
                    }
                    Some(TaskCommand::Signal { event, signal, reply }) => {
                        self.shared.emit(event);
                        let result = driver.signal(&handle, &signal).await.map_err(|failure| {
                            TaskRunnerError::SignalFailed {
                                task: self.shared.task_name.clone(),
                                message: failure.message,
                            }
                        });
                        let _ = reply.send(result);
                    }
                    None => {}
                },
            }
        }
    }

    async fn restart_running(
        &self,
        driver: &dyn TaskDriver,
        handle: &PersistedTaskHandle,
        event: drover_structs::TaskEvent,
        failure: bool,
    ) -> TaskStopCause {
        self.shared.emit(event);
        let outcome = stop_task_processes(&self.shared, driver, handle, false).await;
        let exit = outcome.exit.unwrap_or_else(|| TaskExit {
            exit_code: -1,
            message: outcome.kill_error.clone().unwrap_or_default(),
            ..TaskExit::default()
        });
        self.record_exit(&exit);
        self.release_handle(driver, handle).await;
        self.run_exited_hooks(Some(exit)).await;
        if failure {
            TaskStopCause::Exited { successful: false }
        } else {
            TaskStopCause::RestartRequested
        }
    }

    /// The kill path of a running task: persist the Killing phase (the intent) first, then stop
    /// the processes, record the exit, release the handle, and end dead with "Killed". Returns
    /// `false` when the agent shut down first: the persisted intent lets the next agent finish.
    async fn kill_running(&self, driver: &dyn TaskDriver, handle: &PersistedTaskHandle) -> bool {
        if self.shared.phase() != TaskPhase::Killing {
            self.record_or_log(Some(TaskPhase::Killing), None);
        }
        let outcome = tokio::select! {
            outcome = stop_task_processes(&self.shared, driver, handle, true) => outcome,
            () = self.shared.agent_shutdown.cancelled() => return false,
        };
        if let Some(exit) = &outcome.exit {
            self.record_exit(exit);
        }
        self.release_handle(driver, handle).await;
        self.run_exited_hooks(outcome.exit.clone()).await;
        self.finish_kill(outcome.kill_error);
        true
    }

    async fn run_poststart_hooks(&self, pid: Option<u32>, handle: &PersistedTaskHandle) {
        let hooks = self.shared.hooks.get().cloned().unwrap_or_default();
        let cancel = self.shared.kill_token().child_token();
        let driver_network = self.driver_network(handle);
        for hook in &hooks {
            if let Some(poststart) = hook.as_poststart() {
                let request = PoststartRequest {
                    task_env: self.shared.env_cell.get(),
                    pid,
                    driver_network: driver_network.clone(),
                };
                let mut response = PoststartResponse;
                if let Err(error) = poststart.poststart(&cancel, &request, &mut response).await {
                    let message = format!("{}: {}", hook.name(), error.message);
                    self.shared.emit(
                        self.shared
                            .event(TASK_HOOK_FAILED)
                            .with_message(&message)
                            .with_display_message(&message),
                    );
                }
            }
        }
    }

    /// The task's network as its driver reports it (`address_mode = "driver"`); a container
    /// in the group's namespace has the group network's address.
    fn driver_network(
        &self,
        handle: &PersistedTaskHandle,
    ) -> Option<drover_structs::service_registration::DriverNetwork> {
        let driver = self.driver_named(&handle.driver_name)?;
        let mut network = driver.driver_network(handle)?;
        if network.ip.is_empty()
            && let Some(group) = &self.shared.network
            && let Some(status) = group.status()
            && let Some(address) = status.get("Address").and_then(serde_json::Value::as_str)
        {
            network.ip = address.to_string();
        }
        Some(network)
    }

    async fn run_exited_hooks(&self, exit: Option<TaskExit>) {
        let hooks = self.shared.hooks.get().cloned().unwrap_or_default();
        let cancel = CancellationToken::new();
        let request = ExitedRequest { exit };
        for hook in &hooks {
            if let Some(exited) = hook.as_exited() {
                let mut response = ExitedResponse;
                if let Err(error) = exited.exited(&cancel, &request, &mut response).await {
                    tracing::warn!(alloc_id = %self.shared.alloc_id, task = %self.shared.task_name, hook = hook.name(), %error, "exited hook failed");
                }
            }
        }
    }

    async fn run_stop_hooks(&self) {
        let hooks = self.shared.hooks.get().cloned().unwrap_or_default();
        let cancel = CancellationToken::new();
        for hook in &hooks {
            if let Some(stop) = hook.as_stop() {
                let request = StopRequest {
                    existing_state: lock(&self.shared.local)
                        .hooks
                        .get(hook.name())
                        .map(|state| state.data.clone())
                        .unwrap_or_default(),
                };
                let mut response = StopResponse;
                if let Err(error) = stop.stop(&cancel, &request, &mut response).await {
                    tracing::warn!(alloc_id = %self.shared.alloc_id, task = %self.shared.task_name, hook = hook.name(), %error, "stop hook failed");
                }
            }
        }
    }
}

/// The task's main process as a shim-run task's handle names it (`None` for other drivers).
fn handle_pid(handle: &PersistedTaskHandle) -> Option<u32> {
    serde_json::from_value::<drover_driver::TaskHandle>(handle.handle.clone())
        .ok()
        .and_then(|handle| handle.shim)
        .and_then(|shim| u32::try_from(shim.task_pid).ok())
}

/// A short random name for one run of a task (its supervisor state dir).
fn run_name() -> String {
    let value: u32 = rand::random();
    format!("{value:08x}")
}

/// Answers a command that arrived while the task is between lives (waiting for its gate or a
/// restart delay): a forced restart is already under way; a restart or a signal has no task.
/// Records each event the driver reports during a start as Nomad's "Driver" task event: the
/// message as its driver message, the annotations as its details.
fn driver_events(shared: &Arc<TaskRunnerShared>) -> drover_driver::DriverEvents {
    let shared = Arc::downgrade(shared);
    drover_driver::DriverEvents::new(move |reported| {
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let mut event = shared.event(drover_structs::TASK_DRIVER_MESSAGE);
        event.driver_message = reported.message;
        event.details = reported.annotations;
        if let Err(error) = shared.record(None, Some(event)) {
            tracing::error!(alloc_id = %shared.alloc_id, task = %shared.task_name, %error, "task state machine refused a driver event");
        }
    })
}

fn answer_while_not_running(shared: &TaskRunnerShared, command: TaskCommand) {
    let not_running = || TaskRunnerError::TaskNotRunning {
        task: shared.task_name.clone(),
    };
    match command {
        TaskCommand::ForceRestart { reply, .. } => {
            let _ = reply.send(Ok(()));
        }
        TaskCommand::Restart { reply, .. } | TaskCommand::Signal { reply, .. } => {
            let _ = reply.send(Err(not_running()));
        }
    }
}

/// Runs the update hooks with a new allocation (concurrently with the run loop, as Nomad).
pub(crate) async fn run_update_hooks(shared: &TaskRunnerShared, alloc: Arc<Allocation>) {
    let hooks = shared.hooks.get().cloned().unwrap_or_default();
    let cancel = shared.kill_token().child_token();
    for hook in &hooks {
        if let Some(update) = hook.as_update() {
            let request = UpdateRequest {
                alloc: alloc.clone(),
                task_env: shared.env_cell.get(),
            };
            let mut response = UpdateResponse;
            if let Err(error) = update.update(&cancel, &request, &mut response).await {
                tracing::warn!(alloc_id = %shared.alloc_id, task = %shared.task_name, hook = hook.name(), %error, "update hook failed");
            }
        }
    }
}
