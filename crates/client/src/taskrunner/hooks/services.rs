//! The task service hook: registers the task's `service` blocks in the built-in catalog once the
//! task runs, and deregisters them when it stops running, as Nomad's task `service_hook` does.
//!
//! - poststart (also after an agent re-attached to the running task): register — an upsert, so a
//!   restored agent re-registers without duplicates and without deleting anything first;
//! - pre-kill (before the task's `shutdown_delay` is waited, on a kill and on a restart) and
//!   exited: deregister; when the whole allocation stops, the alloc runner deregisters ahead of
//!   the group's `shutdown_delay` ([`TaskServiceHook::deregister_ahead_of_kill`]) and the
//!   pre-kill then finds nothing left to do;
//! - update: re-register with the new allocation (changed tags, canary promotion, new port);
//!   registrations no longer wanted are deleted;
//! - stop: deregister (idempotent; also names the IDs the definition gives, in case an earlier
//!   agent registered them).
//!
//! A task without services costs a check of an empty list per call: nothing is built or sent.
//! Failures to reach the server are retried in the background ([`ServiceSync`]); a service that
//! cannot be built (an unknown port label) fails the poststart hook with the service named.
//!
//! **Not** here: the group's services (the alloc runner's group hook), checks.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use drover_structs::{Allocation, Task};
use tokio_util::sync::CancellationToken;

use super::env::EnvHookInputs;
use super::{
    ExitedHook, ExitedRequest, ExitedResponse, HookError, HookErrorKind, HookFuture, HookResult,
    PoststartHook, PoststartRequest, PoststartResponse, PreKillHook, PreKillRequest,
    PreKillResponse, StopHook, StopRequest, StopResponse, TaskHook, UpdateHook, UpdateRequest,
    UpdateResponse,
};
use crate::mutex::lock;
use crate::services::ServiceRegistrar;
use crate::services::sync::ServiceSync;
use crate::services::workload::ServiceWorkload;
use crate::taskenv::{TaskEnv, TaskEnvInputs};

/// The hook's name (the key of its persisted state; it keeps none).
pub const SERVICES_HOOK_NAME: &str = "task_services";

struct View {
    alloc: Arc<Allocation>,
    task: Arc<Task>,
    /// The environment of the task's current run; `None` until one is known.
    env: Option<TaskEnv>,
    /// Registrations are wanted (the task runs).
    running: bool,
    /// The catalog may hold registrations of this task that this hook has not sent (an earlier
    /// agent's); cleared once a deregistration has named them.
    unaccounted: bool,
    /// The running task's own network, as its driver reported it (`address_mode = "driver"`).
    driver_network: Option<drover_structs::service_registration::DriverNetwork>,
}

/// See the module docs.
pub struct TaskServiceHook {
    sync: Arc<ServiceSync>,
    env_inputs: EnvHookInputs,
    view: Mutex<View>,
}

impl std::fmt::Debug for TaskServiceHook {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("TaskServiceHook")
            .field("task", &self.env_inputs.task_name)
            .finish_non_exhaustive()
    }
}

impl TaskServiceHook {
    pub fn new(
        registrar: Arc<dyn ServiceRegistrar>,
        alloc: Arc<Allocation>,
        task: Arc<Task>,
        env_inputs: EnvHookInputs,
    ) -> Self {
        TaskServiceHook {
            sync: ServiceSync::new(registrar, &alloc.id, &task.name),
            env_inputs,
            view: Mutex::new(View {
                alloc,
                task,
                env: None,
                running: false,
                unaccounted: true,
                driver_network: None,
            }),
        }
    }

    /// The task's environment for interpolation when the runner has none to give (a task
    /// re-attached by a restarted agent): the `NOMAD_*` variables, the task's `env` block and
    /// the node's facts.
    fn built_env(&self, alloc: &Allocation, task: &Task) -> TaskEnv {
        let with_status = self.env_inputs.with_network_status(alloc);
        let alloc = with_status.as_ref().unwrap_or(alloc);
        let inputs = TaskEnvInputs {
            alloc,
            task,
            node: &self.env_inputs.node,
            region: &self.env_inputs.region,
            task_dir: &self.env_inputs.task_dir,
            path_view: self.env_inputs.path_view,
        };
        TaskEnv::build(&inputs, &BTreeMap::new())
    }

    /// Nothing registered, nothing to register: every call returns at once.
    fn is_idle(&self) -> bool {
        lock(&self.view).task.services.is_empty() && self.sync.is_idle()
    }

    /// Records the wish for the current view (registered when running, else deregistered).
    fn want_current(&self) -> Result<(), HookError> {
        let mut view = lock(&self.view);
        let env = match &view.env {
            Some(env) => env.clone(),
            None => {
                let env = self.built_env(&view.alloc, &view.task);
                view.env = Some(env.clone());
                env
            }
        };
        // address_mode "alloc" reads the group network's address from the allocation.
        let with_status = self.env_inputs.with_network_status(&view.alloc);
        let workload = ServiceWorkload {
            alloc: with_status.as_ref().unwrap_or(&view.alloc),
            node: &self.env_inputs.node,
            task: Some(&view.task.name),
            services: &view.task.services,
            env: &env,
            driver_network: view.driver_network.as_ref(),
        };
        if view.running {
            let registrations = workload
                .registrations()
                .map_err(|error| HookError::new(HookErrorKind::Recoverable, error.to_string()))?;
            self.sync.want(registrations, Vec::new());
        } else {
            let maybe_held = if view.unaccounted {
                workload.registration_ids()
            } else {
                Vec::new()
            };
            view.unaccounted = false;
            self.sync.want(Vec::new(), maybe_held);
        }
        Ok(())
    }

    async fn send(&self) {
        if let Err(error) = self.sync.sync().await {
            tracing::warn!(task = %self.env_inputs.task_name, %error, "service registration not synced; retrying in the background");
        }
    }

    /// Deregisters now, outside the hook pipeline (the allocation is stopping; see
    /// `TaskRunner::deregister_services`). Failures are logged and retried in the background.
    pub async fn deregister_ahead_of_kill(&self) {
        if let Err(error) = self.deregister().await {
            tracing::warn!(task = %self.env_inputs.task_name, %error, "cannot deregister the task's services");
        }
    }

    async fn deregister(&self) -> HookResult {
        if self.is_idle() {
            return Ok(());
        }
        lock(&self.view).running = false;
        self.want_current()?;
        self.send().await;
        Ok(())
    }
}

impl TaskHook for TaskServiceHook {
    fn name(&self) -> &'static str {
        SERVICES_HOOK_NAME
    }
    fn as_poststart(&self) -> Option<&dyn PoststartHook> {
        Some(self)
    }
    fn as_pre_kill(&self) -> Option<&dyn PreKillHook> {
        Some(self)
    }
    fn as_exited(&self) -> Option<&dyn ExitedHook> {
        Some(self)
    }
    fn as_update(&self) -> Option<&dyn UpdateHook> {
        Some(self)
    }
    fn as_stop(&self) -> Option<&dyn StopHook> {
        Some(self)
    }
}

impl PoststartHook for TaskServiceHook {
    fn poststart<'a>(
        &'a self,
        _cancel: &'a CancellationToken,
        request: &'a PoststartRequest,
        _response: &'a mut PoststartResponse,
    ) -> HookFuture<'a, HookResult> {
        Box::pin(async move {
            {
                let mut view = lock(&self.view);
                if view.task.services.is_empty() && self.sync.is_idle() {
                    return Ok(());
                }
                view.running = true;
                view.driver_network = request.driver_network.clone();
                // A re-attached task's runner has no environment to hand in.
                view.env = (!request.task_env.env.is_empty()).then(|| request.task_env.clone());
            }
            self.want_current()?;
            self.send().await;
            Ok(())
        })
    }
}

impl PreKillHook for TaskServiceHook {
    fn pre_kill<'a>(
        &'a self,
        _cancel: &'a CancellationToken,
        _request: &'a PreKillRequest,
        _response: &'a mut PreKillResponse,
    ) -> HookFuture<'a, HookResult> {
        Box::pin(self.deregister())
    }
}

impl ExitedHook for TaskServiceHook {
    fn exited<'a>(
        &'a self,
        _cancel: &'a CancellationToken,
        _request: &'a ExitedRequest,
        _response: &'a mut ExitedResponse,
    ) -> HookFuture<'a, HookResult> {
        Box::pin(self.deregister())
    }
}

impl StopHook for TaskServiceHook {
    fn stop<'a>(
        &'a self,
        _cancel: &'a CancellationToken,
        _request: &'a StopRequest,
        _response: &'a mut StopResponse,
    ) -> HookFuture<'a, HookResult> {
        Box::pin(self.deregister())
    }
}

impl UpdateHook for TaskServiceHook {
    fn update<'a>(
        &'a self,
        _cancel: &'a CancellationToken,
        request: &'a UpdateRequest,
        _response: &'a mut UpdateResponse,
    ) -> HookFuture<'a, HookResult> {
        Box::pin(async move {
            let running = {
                let mut view = lock(&self.view);
                let task = request
                    .alloc
                    .job
                    .as_deref()
                    .and_then(|job| job.lookup_task_group(&request.alloc.task_group))
                    .and_then(|group| group.lookup_task(&self.env_inputs.task_name))
                    .cloned();
                if let Some(task) = task {
                    view.task = Arc::new(task);
                }
                view.alloc = request.alloc.clone();
                view.env = (!request.task_env.env.is_empty()).then(|| request.task_env.clone());
                view.running
            };
            if !running || self.is_idle() {
                return Ok(());
            }
            self.want_current()?;
            self.send().await;
            Ok(())
        })
    }
}
