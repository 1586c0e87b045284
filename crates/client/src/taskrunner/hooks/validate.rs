//! The validate hook: refuses to start a task the client must not run — a user on the client's
//! denylist under a checked driver (Nomad's `user.denylist` / `user.checked_drivers`), driver
//! config keys the driver does not know, or an artifact or template destination that escapes
//! the task dir. A refusal is a "Failed
//! Validation" event that fails the task without a restart.
//!
//! **Not** a jobspec validator: the server validated the job; this guards the node.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::{
    HookError, HookErrorKind, HookFuture, HookResult, PrestartHook, PrestartRequest,
    PrestartResponse, TaskHook,
};
use crate::allocdir::join_within;
use crate::config::ClientConfig;

/// See the module docs.
#[derive(Debug)]
pub struct ValidateHook {
    config: Arc<ClientConfig>,
}

impl ValidateHook {
    pub fn new(config: Arc<ClientConfig>) -> Self {
        ValidateHook { config }
    }

    fn problems(&self, request: &PrestartRequest) -> Vec<String> {
        let task = &request.task;
        let mut problems = Vec::new();
        if !self.config.user_allowed(&task.driver, &task.user) {
            problems.push(format!("running as user {:?} is disallowed", task.user));
        }
        // Unknown driver config keys are a mistake in the jobspec: refuse them here, before
        // anything starts, rather than as a driver failure the restart policy would retry.
        if let Some(allowed) = drover_driver::task_config::config_keys_for(&task.driver) {
            let config = serde_json::Value::Object(task.config.clone());
            if let Err(error) = drover_driver::task_config::validate_config(&config, allowed) {
                problems.push(format!("driver {:?}: {error}", task.driver));
            }
        }
        for (index, artifact) in task.artifacts.iter().enumerate() {
            let destination = request.task_env.interpolate(&artifact.relative_dest);
            if join_within(&request.task_dir.dir, &destination).is_err() {
                problems.push(format!(
                    "artifact ({index}) failed validation: destination {destination:?} escapes the task directory"
                ));
            }
        }
        for (index, template) in task.templates.iter().enumerate() {
            let destination = request.task_env.interpolate(&template.dest_path);
            if join_within(&request.task_dir.dir, &destination).is_err() {
                problems.push(format!(
                    "template ({index}) failed validation: destination {destination:?} escapes the task directory"
                ));
            }
        }
        problems
    }
}

impl TaskHook for ValidateHook {
    fn name(&self) -> &'static str {
        "validate"
    }
    fn as_prestart(&self) -> Option<&dyn PrestartHook> {
        Some(self)
    }
}

impl PrestartHook for ValidateHook {
    fn prestart<'a>(
        &'a self,
        _cancel: &'a CancellationToken,
        request: &'a PrestartRequest,
        _response: &'a mut PrestartResponse,
    ) -> HookFuture<'a, HookResult> {
        Box::pin(async move {
            let problems = self.problems(request);
            if problems.is_empty() {
                Ok(())
            } else {
                Err(HookError::new(
                    HookErrorKind::Validation,
                    problems.join("; "),
                ))
            }
        })
    }
}
