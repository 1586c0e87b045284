//! The task hook pipeline: a [`TaskHook`] names itself and opts into capabilities —
//! [`PrestartHook`], [`PoststartHook`], [`PreKillHook`], [`ExitedHook`], [`UpdateHook`],
//! [`StopHook`] — each called with a cancellation token, a request and a response.
//!
//! [`build_task_hooks`] is the one place that decides which hooks a task gets, in order. Hooks
//! never see the runner: they get narrow handles ([`TaskEventEmitter`], [`TaskLifecycleHandle`],
//! [`TaskEnvCell`]). A prestart hook returns state to keep and may say `done`; the runner
//! persists both after each success, and a `done` hook is skipped on later starts, including by
//! an agent that restored the task. Stop hooks run each time the task ends up dead (it may run
//! again on an AllTasks restart) and must be idempotent.
//!
//! Later hooks (identity) slot in by implementing the
//! capabilities they need and being added in [`build_task_hooks`]; the runner does not change.
//!
//! **Not** here: the order of capabilities in the task's life (the run loop decides) or how
//! state is stored (the runner persists it in the state db).

pub mod api;
pub mod artifact;
pub mod connect;
pub mod dispatch_payload;
pub mod env;
pub mod identity;
pub mod logs;
pub mod network;
pub mod services;
pub mod task_dir;
pub mod template;
pub mod validate;
pub mod volumes;

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use drover_structs::{Allocation, Task, TaskEvent};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::allocdir::{AllocDir, TaskDir};
use crate::clock::SharedClock;
use crate::config::ClientConfig;
use crate::taskenv::TaskEnv;
use crate::taskrunner::driver::{LogRotation, TaskExit};

/// A boxed, sendable hook future (the capability traits are object safe).
pub type HookFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// How a hook failure is handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookErrorKind {
    /// "Task hook failed"; the restart policy may retry.
    Recoverable,
    /// "Task hook failed"; the task is not restarted.
    Unrecoverable,
    /// "Failed Validation"; the task fails without a restart.
    Validation,
    /// "Setup Failure"; the task fails without a restart.
    Setup,
}

/// A hook's failure.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct HookError {
    pub kind: HookErrorKind,
    pub message: String,
    /// The event to record instead of "Task hook failed" for a recoverable or unrecoverable
    /// failure (Nomad's hook errors that carry their own event, such as "Failed Artifact
    /// Download").
    pub event: Option<Box<TaskEvent>>,
}

impl HookError {
    pub fn new(kind: HookErrorKind, message: impl Into<String>) -> Self {
        HookError {
            kind,
            message: message.into(),
            event: None,
        }
    }

    /// The same failure, reported with `event`.
    pub fn with_event(mut self, event: TaskEvent) -> Self {
        self.event = Some(Box::new(event));
        self
    }
}

/// What a prestart hook persisted last time.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PersistedHookState {
    pub data: BTreeMap<String, String>,
    pub done: bool,
}

/// Emits task events (timestamped, persisted, reported) on behalf of a hook.
#[derive(Clone)]
pub struct TaskEventEmitter {
    emit: Arc<dyn Fn(TaskEvent) + Send + Sync>,
    clock: SharedClock,
}

impl std::fmt::Debug for TaskEventEmitter {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("TaskEventEmitter")
    }
}

impl TaskEventEmitter {
    pub fn new(emit: Arc<dyn Fn(TaskEvent) + Send + Sync>, clock: SharedClock) -> Self {
        TaskEventEmitter { emit, clock }
    }

    /// A new event of `event_type` stamped now.
    pub fn event(&self, event_type: &str) -> TaskEvent {
        TaskEvent::new(event_type, self.clock.now_unix_nanos())
    }

    pub fn emit(&self, event: TaskEvent) {
        (self.emit)(event);
    }
}

/// Requests a hook may make of its task's life (restart, signal, kill), without waiting.
pub trait TaskLifecycleRequests: Send + Sync + std::fmt::Debug {
    fn request_restart(&self, source: &str, reason: &str, failure: bool);
    fn request_signal(&self, source: &str, reason: &str, signal: &str);
    fn request_kill(&self, source: &str, reason: &str, fail: bool);
    /// The running task's exec context, to run a command inside it (a template's
    /// `change_script`); `None` when it is not running.
    fn exec_context(&self) -> Option<crate::taskrunner::exec_context::TaskExecContext> {
        None
    }
    /// Replaces the persisted state of prestart hook `hook` (its `done` flag kept) and
    /// persists it, for state a hook changes after its prestart (a renewed identity token).
    fn persist_hook_state(&self, hook: &str, state: BTreeMap<String, String>);
}

/// The lifecycle handle hooks get.
pub type TaskLifecycleHandle = Arc<dyn TaskLifecycleRequests>;

/// The task's current environment: the base built by the env hook plus what other prestart
/// hooks added. The runner reads it to build the launch spec; hooks read it from requests.
#[derive(Debug, Clone, Default)]
pub struct TaskEnvCell(Arc<Mutex<TaskEnvCellInner>>);

#[derive(Debug, Clone, Default)]
struct TaskEnvCellInner {
    base: TaskEnv,
    added_by_hooks: BTreeMap<String, String>,
}

impl TaskEnvCell {
    fn with_inner<T>(&self, action: impl FnOnce(&mut TaskEnvCellInner) -> T) -> T {
        match self.0.lock() {
            Ok(mut guard) => action(&mut guard),
            Err(poisoned) => action(&mut poisoned.into_inner()),
        }
    }

    /// The merged environment.
    pub fn get(&self) -> TaskEnv {
        self.with_inner(|inner| {
            let mut env = inner.base.clone();
            env.env.extend(inner.added_by_hooks.clone());
            env
        })
    }

    /// Replaces the base (NOMAD_* variables and the task's env block).
    pub fn set_base(&self, base: TaskEnv) {
        self.with_inner(|inner| inner.base = base);
    }

    /// Adds variables returned by a prestart hook.
    pub fn add_from_hook(&self, variables: &BTreeMap<String, String>) {
        self.with_inner(|inner| inner.added_by_hooks.extend(variables.clone()));
    }
}

/// Input of a prestart hook.
#[derive(Debug, Clone)]
pub struct PrestartRequest {
    pub alloc: Arc<Allocation>,
    pub task: Arc<Task>,
    pub task_dir: TaskDir,
    /// The environment as built so far (the env hook runs first).
    pub task_env: TaskEnv,
    /// What this hook returned last time (copy what should be kept into the response).
    pub previous_state: BTreeMap<String, String>,
}

/// Output of a prestart hook.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PrestartResponse {
    /// Variables added to the task's environment.
    pub env: BTreeMap<String, String>,
    /// State to persist for the next call.
    pub state: BTreeMap<String, String>,
    /// The hook finished for good; it is not called again for this task.
    pub done: bool,
    /// Log rotation for the driver.
    pub log_rotation: Option<LogRotation>,
}

/// Input of a poststart hook.
#[derive(Debug, Clone)]
pub struct PoststartRequest {
    pub task_env: TaskEnv,
    pub pid: Option<u32>,
    /// The task's own network as its driver reports it (docker), for `address_mode =
    /// "driver"`; `None` for drivers that run tasks in the host's or the group's network.
    pub driver_network: Option<drover_structs::service_registration::DriverNetwork>,
}

/// Output of a poststart hook.
#[derive(Debug, Clone, Default)]
pub struct PoststartResponse;

/// Input of a pre-kill hook.
#[derive(Debug, Clone, Default)]
pub struct PreKillRequest;

/// Output of a pre-kill hook.
#[derive(Debug, Clone, Default)]
pub struct PreKillResponse;

/// Input of an exited hook.
#[derive(Debug, Clone)]
pub struct ExitedRequest {
    pub exit: Option<TaskExit>,
}

/// Output of an exited hook.
#[derive(Debug, Clone, Default)]
pub struct ExitedResponse;

/// Input of an update hook.
#[derive(Debug, Clone)]
pub struct UpdateRequest {
    pub alloc: Arc<Allocation>,
    pub task_env: TaskEnv,
}

/// Output of an update hook.
#[derive(Debug, Clone, Default)]
pub struct UpdateResponse;

/// Input of a stop hook.
#[derive(Debug, Clone)]
pub struct StopRequest {
    /// Read-only: what prestart persisted.
    pub existing_state: BTreeMap<String, String>,
}

/// Output of a stop hook.
#[derive(Debug, Clone, Default)]
pub struct StopResponse;

/// A hook's result.
pub type HookResult = Result<(), HookError>;

/// Runs before every start (skipped once `done`).
pub trait PrestartHook: Send + Sync {
    fn prestart<'a>(
        &'a self,
        cancel: &'a CancellationToken,
        request: &'a PrestartRequest,
        response: &'a mut PrestartResponse,
    ) -> HookFuture<'a, HookResult>;
}

/// Runs after each successful start.
pub trait PoststartHook: Send + Sync {
    fn poststart<'a>(
        &'a self,
        cancel: &'a CancellationToken,
        request: &'a PoststartRequest,
        response: &'a mut PoststartResponse,
    ) -> HookFuture<'a, HookResult>;
}

/// Runs right before the task is killed or restarted.
pub trait PreKillHook: Send + Sync {
    fn pre_kill<'a>(
        &'a self,
        cancel: &'a CancellationToken,
        request: &'a PreKillRequest,
        response: &'a mut PreKillResponse,
    ) -> HookFuture<'a, HookResult>;
}

/// Runs after each exit, restarted or not.
pub trait ExitedHook: Send + Sync {
    fn exited<'a>(
        &'a self,
        cancel: &'a CancellationToken,
        request: &'a ExitedRequest,
        response: &'a mut ExitedResponse,
    ) -> HookFuture<'a, HookResult>;
}

/// Runs when the server updates the allocation.
pub trait UpdateHook: Send + Sync {
    fn update<'a>(
        &'a self,
        cancel: &'a CancellationToken,
        request: &'a UpdateRequest,
        response: &'a mut UpdateResponse,
    ) -> HookFuture<'a, HookResult>;
}

/// Runs whenever the task ends up dead (it may still run again on an AllTasks restart). Idempotent.
pub trait StopHook: Send + Sync {
    fn stop<'a>(
        &'a self,
        cancel: &'a CancellationToken,
        request: &'a StopRequest,
        response: &'a mut StopResponse,
    ) -> HookFuture<'a, HookResult>;
}

/// A task hook: a name plus the capabilities it implements.
pub trait TaskHook: Send + Sync {
    /// Stable name; the key of its persisted state.
    fn name(&self) -> &'static str;

    fn as_prestart(&self) -> Option<&dyn PrestartHook> {
        None
    }
    fn as_poststart(&self) -> Option<&dyn PoststartHook> {
        None
    }
    fn as_pre_kill(&self) -> Option<&dyn PreKillHook> {
        None
    }
    fn as_exited(&self) -> Option<&dyn ExitedHook> {
        None
    }
    fn as_update(&self) -> Option<&dyn UpdateHook> {
        None
    }
    fn as_stop(&self) -> Option<&dyn StopHook> {
        None
    }
}

/// What [`build_task_hooks`] gives hooks.
#[derive(Debug, Clone)]
pub struct TaskHookContext {
    pub config: Arc<ClientConfig>,
    pub alloc_dir: AllocDir,
    pub task_dir: TaskDir,
    pub events: TaskEventEmitter,
    pub lifecycle: TaskLifecycleHandle,
    pub env_cell: TaskEnvCell,
    pub env_inputs: env::EnvHookInputs,
    /// The task's services hook (the runner keeps a handle on it too, to deregister the
    /// services ahead of a kill when the allocation stops).
    pub services_hook: Arc<services::TaskServiceHook>,
    /// The allocation's ID (the identity hook asks for its tokens by it).
    pub alloc_id: String,
    /// The allocation's namespace (templates read its variables).
    pub namespace: String,
    /// Signs the task's workload identities.
    pub identities: Arc<dyn crate::identity::IdentitySigner>,
    /// The task's current workload identity tokens.
    pub identity_tokens: identity::TaskTokens,
    /// The identity hook's state as last persisted.
    pub identity_state: BTreeMap<String, String>,
    pub clock: SharedClock,
    /// Serves the agent's API on the task's `secrets/api.sock` (`None`: no task API).
    pub task_api: Option<Arc<dyn api::TaskApiServer>>,
}

/// The hooks of `task`, in the order they run. The group network's hook comes first, then the
/// env hook, so later hooks can interpolate `${…}` (validation checks interpolated
/// destinations).
pub fn build_task_hooks(task: &Task, context: &TaskHookContext) -> Vec<Arc<dyn TaskHook>> {
    let mut hooks: Vec<Arc<dyn TaskHook>> = Vec::new();
    // The group network before the env (whose NOMAD_ALLOC_IP_* it gives).
    if let Some(network) = &context.env_inputs.network {
        hooks.push(Arc::new(network::NetworkHook::new(
            network.clone(),
            context.env_inputs.clone(),
        )));
    }
    hooks.extend::<[Arc<dyn TaskHook>; 5]>([
        Arc::new(env::EnvHook::new(
            context.env_cell.clone(),
            context.env_inputs.clone(),
        )),
        Arc::new(validate::ValidateHook::new(context.config.clone())),
        Arc::new(volumes::VolumesHook::new(
            context.config.host_volumes.clone(),
        )),
        Arc::new(task_dir::TaskDirHook::new(
            context.config.clone(),
            context.alloc_dir.clone(),
            context.task_dir.clone(),
            context.events.clone(),
        )),
        Arc::new(logs::LogsHook),
    ]);
    if let Some(server) = &context.task_api {
        hooks.push(Arc::new(api::ApiHook::new(
            server.clone(),
            context.task_dir.clone(),
        )));
    }
    let is_connect_proxy = drover_structs::connect::sidecar_service_of(task).is_some();
    let mut wanted = identity::wanted_identities(
        task,
        is_connect_proxy || task.templates.iter().any(template::reads_variables),
    );
    // A sidecar proxy reads its identity from `secrets/nomad_token` to call the agent.
    if is_connect_proxy
        && let Some(default) = wanted
            .iter_mut()
            .find(|identity| identity.name == identity::DEFAULT_IDENTITY)
    {
        default.file = true;
    }
    if !wanted.is_empty() {
        hooks.push(Arc::new(identity::IdentityHook::new(
            identity::IdentityHookInputs {
                alloc_id: context.alloc_id.clone(),
                task_name: task.name.clone(),
                wanted,
                task_dir: context.task_dir.clone(),
                signer: context.identities.clone(),
                clock: context.clock.clone(),
                lifecycle: context.lifecycle.clone(),
                tokens: context.identity_tokens.clone(),
                persisted: context.identity_state.clone(),
                user: task.user.clone(),
            },
        )));
    }
    if is_connect_proxy {
        hooks.push(Arc::new(connect::ConnectProxyHook::new(
            context.task_dir.clone(),
            context.env_inputs.node.datacenter.clone(),
            context.env_inputs.network.clone(),
        )));
    }
    if task.dispatch_payload.is_some() {
        hooks.push(Arc::new(dispatch_payload::DispatchPayloadHook));
    }
    if !task.artifacts.is_empty() {
        hooks.push(Arc::new(artifact::ArtifactHook::new(
            context.config.clone(),
            context.events.clone(),
        )));
    }
    if !task.templates.is_empty() {
        hooks.push(Arc::new(
            template::TemplateHook::new(
                task.templates.clone(),
                context.task_dir.clone(),
                context.events.clone(),
                context.lifecycle.clone(),
            )
            .with_variables(template::VariableSource {
                reader: context.identities.clone(),
                tokens: context.identity_tokens.clone(),
                namespace: context.namespace.clone(),
            })
            .with_shim_binary(context.config.shim_binary.clone())
            .with_config(context.config.template),
        ));
    }
    // Always present: an update may give a task services it did not have. Without services it
    // returns at once from every call.
    hooks.push(context.services_hook.clone());
    hooks
}
