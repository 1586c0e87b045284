//! Stopping a task's processes: pre-kill hooks, the task's `shutdown_delay` ("Waiting for
//! shutdown delay", skipped with an event when the stop asked for no delay), then the driver's
//! kill — `kill_signal` (default SIGINT) to the whole tree, `kill_timeout` capped by the client's
//! `max_kill_timeout`, then SIGKILL to the whole tree — retried with capped exponential backoff
//! when the driver fails, and finally waiting for the exit status.
//!
//! Used both by a kill (the task is done) and by a restart (the task runs again); the caller
//! records the phase and the events around it.
//!
//! **Not** signal delivery: the driver (through the shim) does that.

use std::time::Duration;

use drover_structs::{TASK_SKIPPING_SHUTDOWN_DELAY, TASK_WAITING_SHUTDOWN_DELAY};
use tokio_util::sync::CancellationToken;

use super::driver::{PersistedTaskHandle, TaskDriver, TaskExit};
use super::hooks::{PreKillRequest, PreKillResponse};
use super::shared::TaskRunnerShared;

/// First retry delay after a failed kill.
pub const KILL_BACKOFF_BASELINE: Duration = Duration::from_secs(5);
/// Cap of the retry delay.
pub const KILL_BACKOFF_LIMIT: Duration = Duration::from_secs(120);
/// Kill attempts before giving up (resources may leak; the event says so).
pub const KILL_FAILURE_LIMIT: u32 = 5;
/// How long to wait for the exit status once the kill succeeded, beyond the kill timeout.
pub const EXIT_AFTER_KILL_GRACE: Duration = Duration::from_secs(30);

/// The delay before kill retry `attempt` (0-based): baseline × 4^attempt, capped.
pub fn kill_retry_backoff(attempt: u32) -> Duration {
    let factor = 1u32.checked_shl(2 * attempt).unwrap_or(u32::MAX);
    KILL_BACKOFF_BASELINE
        .checked_mul(factor)
        .map_or(KILL_BACKOFF_LIMIT, |delay| delay.min(KILL_BACKOFF_LIMIT))
}

/// What stopping the processes gave.
#[derive(Debug, Clone, Default)]
pub(crate) struct StopOutcome {
    /// The exit status, when one was collected.
    pub exit: Option<TaskExit>,
    /// The last kill error when every attempt failed.
    pub kill_error: Option<String>,
}

pub(crate) async fn run_pre_kill_hooks(shared: &TaskRunnerShared) {
    let Some(hooks) = shared.hooks.get() else {
        return;
    };
    let cancel = CancellationToken::new();
    for hook in hooks {
        if let Some(pre_kill) = hook.as_pre_kill() {
            let mut response = PreKillResponse;
            if let Err(error) = pre_kill
                .pre_kill(&cancel, &PreKillRequest, &mut response)
                .await
            {
                tracing::warn!(alloc_id = %shared.alloc_id, task = %shared.task_name, hook = hook.name(), %error, "pre-kill hook failed");
            }
        }
    }
}

/// Pre-kill hooks, shutdown delay, kill with retries, exit status.
pub(crate) async fn stop_task_processes(
    shared: &TaskRunnerShared,
    driver: &dyn TaskDriver,
    handle: &PersistedTaskHandle,
    honour_shutdown_delay: bool,
) -> StopOutcome {
    run_pre_kill_hooks(shared).await;
    let task = shared.task();

    let shutdown_delay = task.shutdown_delay.to_std();
    if honour_shutdown_delay && !shutdown_delay.is_zero() {
        if shared
            .alloc()
            .desired_transition
            .should_ignore_shutdown_delay()
        {
            shared.emit(
                shared
                    .event(TASK_SKIPPING_SHUTDOWN_DELAY)
                    .with_message(&format!(
                        "Skipping shutdown_delay of {} before killing the task.",
                        task.shutdown_delay
                    )),
            );
        } else {
            shared.emit(
                shared
                    .event(TASK_WAITING_SHUTDOWN_DELAY)
                    .with_message(&format!(
                        "Waiting for shutdown_delay of {} before killing the task.",
                        task.shutdown_delay
                    )),
            );
            tokio::select! {
                waited = driver.wait(handle) => {
                    if let Ok(exit) = waited {
                        return StopOutcome { exit: Some(exit), kill_error: None };
                    }
                }
                () = tokio::time::sleep(shutdown_delay) => {}
            }
        }
    }

    let signal = if task.kill_signal.is_empty() {
        drover_driver::DEFAULT_KILL_SIGNAL.to_string()
    } else {
        task.kill_signal.clone()
    };
    let kill_timeout = shared
        .deps
        .config
        .effective_kill_timeout(task.kill_timeout.to_std());

    let mut kill_error = None;
    for attempt in 0..KILL_FAILURE_LIMIT {
        match driver.kill(handle, &signal, kill_timeout).await {
            Ok(()) => {
                kill_error = None;
                break;
            }
            Err(failure) => {
                let backoff = kill_retry_backoff(attempt);
                tracing::error!(alloc_id = %shared.alloc_id, task = %shared.task_name, error = %failure, ?backoff, "failed to kill task; retrying");
                kill_error = Some(failure.message);
                if attempt + 1 < KILL_FAILURE_LIMIT {
                    tokio::time::sleep(backoff).await;
                }
            }
        }
    }

    let exit = match tokio::time::timeout(kill_timeout + EXIT_AFTER_KILL_GRACE, driver.wait(handle))
        .await
    {
        Ok(Ok(exit)) => Some(exit),
        Ok(Err(failure)) => {
            tracing::warn!(alloc_id = %shared.alloc_id, task = %shared.task_name, error = %failure, "no exit status after kill");
            None
        }
        Err(_elapsed) => {
            tracing::error!(alloc_id = %shared.alloc_id, task = %shared.task_name, "task did not exit after kill");
            None
        }
    };
    StopOutcome { exit, kill_error }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_by_four_and_caps_at_two_minutes() {
        assert_eq!(kill_retry_backoff(0), Duration::from_secs(5));
        assert_eq!(kill_retry_backoff(1), Duration::from_secs(20));
        assert_eq!(kill_retry_backoff(2), Duration::from_secs(80));
        assert_eq!(kill_retry_backoff(3), Duration::from_secs(120));
        assert_eq!(kill_retry_backoff(40), Duration::from_secs(120));
    }
}
