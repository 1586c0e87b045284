//! The seam between a task runner and a task driver: exactly the calls the runner makes (start,
//! re-attach, wait, signal, kill with grace, cleanup), with an opaque persisted handle.
//!
//! The runner depends on this trait only; an adapter implements it over the `drover-driver`
//! crate's drivers (raw_exec, exec, mock), and unit tests use a fake that runs on tokio time.
//! Keeping the seam here means a driver crate change touches one adapter, not the run loop.
//!
//! **Not** a driver: no process handling happens in this module.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::allocdir::TaskDir;

/// A boxed, sendable future (the seam is object safe).
pub type DriverFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Log rotation the driver (its shim) applies to stdout/stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogRotation {
    pub max_files: u32,
    pub max_file_size_bytes: u64,
}

impl Default for LogRotation {
    /// Nomad's defaults: 10 files of 10 MB.
    fn default() -> Self {
        LogRotation {
            max_files: 10,
            max_file_size_bytes: 10 * 1024 * 1024,
        }
    }
}

/// Everything a driver needs to start one task.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskLaunchSpec {
    pub alloc_id: String,
    pub task_name: String,
    pub driver_name: String,
    /// The task's driver config with `${…}` already interpolated.
    pub config: Map<String, Value>,
    pub env: BTreeMap<String, String>,
    /// Empty means the driver's default user.
    pub user: String,
    pub task_dir: TaskDir,
    /// A directory the driver owns for this run's supervisor (socket, exit status):
    /// `<data_dir>/client/tasks/<alloc_id>/<task>/<run>`, never inside the task dir. Empty
    /// before the start.
    pub supervisor_state_dir: PathBuf,
    /// `<alloc>/alloc/logs`; files are `<task>.stdout.N` / `<task>.stderr.N`.
    pub logs_dir: PathBuf,
    pub log_rotation: LogRotation,
    pub cpu_shares: i64,
    pub memory_mb: i64,
    pub memory_max_mb: i64,
    /// Core IDs the scheduler reserved for the task (`resources.cores`); empty: the shared cpus.
    pub reserved_cores: Vec<u16>,
    /// The group network's `hostname`, interpolated; `None` keeps the host's name.
    pub hostname: Option<String>,
    /// Host volumes bound into the task (resolved by the volumes hook).
    pub mounts: Vec<drover_driver::MountConfig>,
    /// The task's own (deprecated) network, as assigned to the allocation.
    pub task_network: Option<drover_driver::TaskNetwork>,
    /// The group's network (bridge, none, CNI) the task joins; `None`: the host's.
    pub network: Option<crate::network::TaskNetwork>,
    /// Where the driver's events during the start go (recorded as "Driver" task events).
    pub events: drover_driver::DriverEvents,
}

/// The driver's handle of a started task, persisted verbatim so a later agent can re-attach.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PersistedTaskHandle {
    pub driver_name: String,
    pub handle: Value,
}

/// A task the driver started or re-attached to.
#[derive(Debug, Clone, PartialEq)]
pub struct StartedTask {
    pub handle: PersistedTaskHandle,
    pub pid: Option<u32>,
}

/// How a task ended.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskExit {
    pub exit_code: i64,
    pub signal: i64,
    pub oom_killed: bool,
    /// An explanation from the driver (for example why the task could not be waited on).
    pub message: String,
}

impl TaskExit {
    /// Exit code 0, no signal, not OOM killed.
    pub fn successful(&self) -> bool {
        self.exit_code == 0 && self.signal == 0 && !self.oom_killed
    }
}

/// A driver call that failed. `recoverable` decides whether the restart policy may retry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct DriverFailure {
    pub message: String,
    pub recoverable: bool,
}

impl DriverFailure {
    pub fn recoverable(message: impl Into<String>) -> Self {
        DriverFailure {
            message: message.into(),
            recoverable: true,
        }
    }

    pub fn unrecoverable(message: impl Into<String>) -> Self {
        DriverFailure {
            message: message.into(),
            recoverable: false,
        }
    }
}

/// What re-attaching found.
#[derive(Debug, Clone, PartialEq)]
pub enum Reattached {
    /// The task is alive (or exited with a status the shim kept); `wait` will report it.
    Attached(StartedTask),
    /// Nothing to attach to: the shim is gone. The driver cleaned up what remained (the task's
    /// cgroup) and returns the exit status the shim recorded, if it did; `explanation` says what
    /// happened.
    Gone {
        exit: Option<TaskExit>,
        explanation: String,
    },
}

/// The calls a task runner makes on a driver.
pub trait TaskDriver: Send + Sync + std::fmt::Debug {
    /// Starts the task under a fresh shim and returns its handle as soon as it runs.
    fn start(&self, spec: TaskLaunchSpec) -> DriverFuture<'_, Result<StartedTask, DriverFailure>>;

    /// Re-attaches to a task started by an earlier agent, checking the shim's identity.
    fn reattach<'a>(
        &'a self,
        handle: &'a PersistedTaskHandle,
    ) -> DriverFuture<'a, Result<Reattached, DriverFailure>>;

    /// Re-attaches as [`TaskDriver::reattach`], recording what the driver reports on the way
    /// (as "Driver" task events) through `events`.
    fn reattach_reporting<'a>(
        &'a self,
        handle: &'a PersistedTaskHandle,
        events: &'a drover_driver::DriverEvents,
    ) -> DriverFuture<'a, Result<Reattached, DriverFailure>> {
        let _ = events;
        self.reattach(handle)
    }

    /// Waits until the task exits. Dropping the future stops waiting, never the task.
    fn wait<'a>(
        &'a self,
        handle: &'a PersistedTaskHandle,
    ) -> DriverFuture<'a, Result<TaskExit, DriverFailure>>;

    /// Sends `signal` (a name such as `SIGUSR1`) to the task's whole process tree.
    fn signal<'a>(
        &'a self,
        handle: &'a PersistedTaskHandle,
        signal: &'a str,
    ) -> DriverFuture<'a, Result<(), DriverFailure>>;

    /// Sends `signal` to the whole tree, waits up to `grace`, then SIGKILLs the whole tree.
    fn kill<'a>(
        &'a self,
        handle: &'a PersistedTaskHandle,
        signal: &'a str,
        grace: Duration,
    ) -> DriverFuture<'a, Result<(), DriverFailure>>;

    /// Current resource usage of the task's whole tree.
    fn stats<'a>(
        &'a self,
        handle: &'a PersistedTaskHandle,
    ) -> DriverFuture<'a, Result<drover_driver::TaskResourceUsage, DriverFailure>> {
        let _ = handle;
        Box::pin(async { Err(DriverFailure::unrecoverable("the driver reports no stats")) })
    }

    /// Cleans up after a start whose handle was never recorded (the agent died between the
    /// driver starting the task and the handle being persisted): whatever runs from
    /// `supervisor_state_dir` is stopped and the dir removed. Idempotent.
    fn reclaim_unrecorded<'a>(
        &'a self,
        supervisor_state_dir: &'a std::path::Path,
    ) -> DriverFuture<'a, Result<(), DriverFailure>> {
        Box::pin(async move {
            match std::fs::remove_dir_all(supervisor_state_dir) {
                Ok(()) => Ok(()),
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(error) => Err(DriverFailure::recoverable(format!(
                    "removing {}: {error}",
                    supervisor_state_dir.display()
                ))),
            }
        })
    }

    /// The task's own network, for `address_mode = "driver"` (docker); `None` by default.
    fn driver_network(
        &self,
        handle: &PersistedTaskHandle,
    ) -> Option<drover_structs::service_registration::DriverNetwork> {
        let _ = handle;
        None
    }

    /// Releases what the driver holds for the task (shim, socket, cgroup). Idempotent.
    fn cleanup<'a>(
        &'a self,
        handle: &'a PersistedTaskHandle,
    ) -> DriverFuture<'a, Result<(), DriverFailure>>;
}

/// Finds a driver by the task's `driver` name.
pub trait DriverCatalog: Send + Sync + std::fmt::Debug {
    fn driver(&self, name: &str) -> Option<Arc<dyn TaskDriver>>;

    /// Whether the driver isolates the filesystem (the task sees `/alloc`, `/local`, …).
    fn isolates_filesystem(&self, name: &str) -> bool {
        name == "exec" || name == "docker"
    }

    /// The driver's network manager when it must make a group's network namespace itself
    /// (docker), `None` for drivers whose tasks enter one by path.
    fn network_manager(&self, name: &str) -> Option<Arc<dyn drover_driver::NetworkManager>> {
        let _ = name;
        None
    }
}

/// A catalog over a fixed map of drivers.
#[derive(Default, Clone)]
pub struct StaticDriverCatalog {
    drivers: BTreeMap<String, Arc<dyn TaskDriver>>,
    network_managers: BTreeMap<String, Arc<dyn drover_driver::NetworkManager>>,
}

impl std::fmt::Debug for StaticDriverCatalog {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("StaticDriverCatalog")
            .field("drivers", &self.drivers)
            .field(
                "network_managers",
                &self.network_managers.keys().collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl StaticDriverCatalog {
    pub fn new() -> Self {
        StaticDriverCatalog::default()
    }

    pub fn with(mut self, name: &str, driver: Arc<dyn TaskDriver>) -> Self {
        self.drivers.insert(name.to_string(), driver);
        self
    }

    /// Registers the network manager of the driver `name` (see
    /// [`DriverCatalog::network_manager`]).
    pub fn with_network_manager(
        mut self,
        name: &str,
        manager: Arc<dyn drover_driver::NetworkManager>,
    ) -> Self {
        self.network_managers.insert(name.to_string(), manager);
        self
    }
}

impl DriverCatalog for StaticDriverCatalog {
    fn driver(&self, name: &str) -> Option<Arc<dyn TaskDriver>> {
        self.drivers.get(name).cloned()
    }

    fn network_manager(&self, name: &str) -> Option<Arc<dyn drover_driver::NetworkManager>> {
        self.network_managers.get(name).cloned()
    }
}
