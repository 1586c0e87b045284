//! The task dir hook: builds the alloc's shared dir and this task's dir (idempotent, so every
//! start re-checks the layout), with a private secrets dir on tmpfs where possible. The first
//! build emits Nomad's "Task Setup" event with "Building Task Directory"; a failure is a "Setup
//! Failure" that fails the task.
//!
//! **Not** the layout rules (see [`crate::allocdir`]).

use std::sync::Arc;

use drover_structs::{TASK_BUILDING_TASK_DIR, TASK_SETUP};
use tokio_util::sync::CancellationToken;

use super::{
    HookError, HookErrorKind, HookFuture, HookResult, PrestartHook, PrestartRequest,
    PrestartResponse, TaskEventEmitter, TaskHook,
};
use crate::allocdir::{AllocDir, TaskDir};
use crate::config::ClientConfig;

const STATE_BUILT: &str = "built";

/// See the module docs.
#[derive(Debug)]
pub struct TaskDirHook {
    config: Arc<ClientConfig>,
    alloc_dir: AllocDir,
    task_dir: TaskDir,
    events: TaskEventEmitter,
}

impl TaskDirHook {
    pub fn new(
        config: Arc<ClientConfig>,
        alloc_dir: AllocDir,
        task_dir: TaskDir,
        events: TaskEventEmitter,
    ) -> Self {
        TaskDirHook {
            config,
            alloc_dir,
            task_dir,
            events,
        }
    }
}

impl TaskHook for TaskDirHook {
    fn name(&self) -> &'static str {
        "task_dir"
    }
    fn as_prestart(&self) -> Option<&dyn PrestartHook> {
        Some(self)
    }
}

impl PrestartHook for TaskDirHook {
    fn prestart<'a>(
        &'a self,
        _cancel: &'a CancellationToken,
        request: &'a PrestartRequest,
        response: &'a mut PrestartResponse,
    ) -> HookFuture<'a, HookResult> {
        Box::pin(async move {
            let built_before = request.previous_state.contains_key(STATE_BUILT);
            if !built_before {
                self.events.emit(
                    self.events
                        .event(TASK_SETUP)
                        .with_message(TASK_BUILDING_TASK_DIR),
                );
            }
            let setup_error = |error: crate::allocdir::AllocDirError| {
                HookError::new(HookErrorKind::Setup, error.to_string())
            };
            // mkdir, chmod and mount block on the file system: off the async workers, so a
            // hundred tasks starting at once do not stall the agent behind each other's dirs.
            let alloc_dir = self.alloc_dir.clone();
            let task_dir = self.task_dir.clone();
            let (secrets_tmpfs, secrets_tmpfs_bytes) =
                (self.config.secrets_tmpfs, self.config.secrets_tmpfs_bytes);
            tokio::task::spawn_blocking(move || {
                alloc_dir.build()?;
                task_dir.build(secrets_tmpfs, secrets_tmpfs_bytes)
            })
            .await
            .map_err(|join_error| HookError::new(HookErrorKind::Setup, join_error.to_string()))?
            .map_err(setup_error)?;
            response.state = request.previous_state.clone();
            response
                .state
                .insert(STATE_BUILT.to_string(), "true".to_string());
            Ok(())
        })
    }
}
