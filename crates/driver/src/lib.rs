//! Task drivers: the [`Driver`] trait and the `raw_exec`, `exec` and `mock` drivers, which launch each
//! task under its own `drover-shim` (or, for `mock`, pretend to) and re-attach to it later;
//! [`exec_session`] runs an `alloc exec` command inside a running task through the same shim.
//!
//! **Boundary**: knows tasks and processes, never allocations or the server. Restart policy,
//! kill timeouts and events belong to the client; a driver only does what it is told and says
//! whether a failure is worth retrying ([`DriverError::is_recoverable`]).
//!
//! A driver's methods take the [`TaskHandle`] the client persisted, so a driver holds no
//! per-task state that a restart of the agent could lose: after a restart the client calls
//! [`Driver::recover`] with each stored handle (which verifies the shim's identity) and then
//! carries on with the same calls. When a shim is gone, [`Driver::reclaim`] kills what is left
//! through the task's cgroup and returns the exit status the shim left on disk, if any.
//!
//! # Layers
//!
//! Each module directly under `src/` uses only modules on the lines below its own (`error`
//! modules aside), as `crates/structs/tests/module_cycles.rs` checks; top first:
//!
//! - `exec`, `mock`, `raw_exec`
//! - `conformance`, `network`, `shim_engine`
//! - `events`, `exec_session`, `future`, `handle`, `shim_client`, `signal`, `stats`, `task_config`
//!
//! # Design notes
//!
//! The `Driver` trait; `shim_engine` (each task under its own shim, in its own
//! cgroup) driven by a `LaunchPolicy`, of which `raw_exec` and `exec` are the two thin ones;
//! `task_config` (both drivers' task config schemas, `pids_limit`); `events` (what a driver
//! reports while it starts a task, through `Driver::start_reporting`, which the client records
//! as Nomad's "Driver" task events: the docker driver's "Downloading image" with the image;
//! `recover_reporting` does the same for a re-attach); `signal` (the one signal
//! table: what the node advertises as `os.signals` and the client accepts); the mock driver for
//! tests (feature `mock`) and a conformance suite every driver passes; shim launch and re-attach (pid + start
//! time + a `hello` naming the task, never a bare pid); `exec_session` (an `alloc exec`
//! session: `drover-shim exec` under a pseudo-terminal or pipes, input bounded end to end).
//! Stats: cpu percentages over a recent
//! span of at least 200 ms (the task's last sample when it is between 200 ms and 10 s old, else
//! a wait on tokio time and a second sample), so the first call of a busy task answers a real
//! figure.
//! **Boundary**: knows tasks and processes, not allocations.

pub mod conformance;
mod error;
mod events;
pub mod exec;
pub mod exec_session;
mod future;
mod handle;
#[cfg(feature = "mock")]
pub mod mock;
pub mod network;
pub mod raw_exec;
pub mod shim_client;
pub mod shim_engine;
mod signal;
mod stats;
pub mod task_config;

use std::time::Duration;

pub use drover_isolate::{format_cpu_list, parse_cpu_list};
pub use drover_shim::proto::ExitStatus;
pub use error::DriverError;
pub use events::{DriverEvent, DriverEvents};
pub use future::DriverFuture;
pub use handle::{
    CgroupRef, LogSettings, MountConfig, ResourceLimits, SHIM_PATH_ENV, ShimHandle, TaskHandle,
    TaskLaunch, TaskNetwork, locate_shim_binary,
};
pub use network::{NetworkManager, NetworkSandbox};
pub use signal::{DEFAULT_KILL_SIGNAL, SIGNAL_NAMES, parse_signal};
pub use stats::{CpuUsage, MemoryUsage, TaskResourceUsage};

/// What a task driver does. Every method may be called concurrently from several tasks.
pub trait Driver: Send + Sync {
    /// The driver's name in job specs (`raw_exec`, `mock_driver`, …).
    fn name(&self) -> &'static str;

    /// Starts the task; the returned handle is what the client persists.
    fn start<'a>(&'a self, launch: &'a TaskLaunch) -> DriverFuture<'a, TaskHandle>;

    /// Starts the task as [`Driver::start`], reporting what happens on the way (Nomad's driver
    /// events, such as the docker driver's "Downloading image") to `events`. Drivers with
    /// nothing to report keep this default.
    fn start_reporting<'a>(
        &'a self,
        launch: &'a TaskLaunch,
        events: &'a DriverEvents,
    ) -> DriverFuture<'a, TaskHandle> {
        let _ = events;
        self.start(launch)
    }

    /// Re-attaches to a task started earlier (perhaps by another agent process), after checking
    /// that the shim behind the handle is the one that started it.
    fn recover<'a>(&'a self, handle: &'a TaskHandle) -> DriverFuture<'a, ()>;

    /// Re-attaches as [`Driver::recover`], reporting what happens on the way (the docker
    /// driver's wait for an engine that does not answer yet) to `events`. Drivers with nothing
    /// to report keep this default.
    fn recover_reporting<'a>(
        &'a self,
        handle: &'a TaskHandle,
        events: &'a DriverEvents,
    ) -> DriverFuture<'a, ()> {
        let _ = events;
        self.recover(handle)
    }

    /// Waits until the task has exited. Several waits may run at once.
    fn wait<'a>(&'a self, handle: &'a TaskHandle) -> DriverFuture<'a, ExitStatus>;

    /// The exit status if the task has exited, `None` while it runs.
    fn exit_status<'a>(&'a self, handle: &'a TaskHandle) -> DriverFuture<'a, Option<ExitStatus>>;

    /// Sends a signal (`SIGHUP`, `USR1`, `15`, …) to every process of the task.
    fn signal<'a>(&'a self, handle: &'a TaskHandle, signal: &'a str) -> DriverFuture<'a, ()>;

    /// Sends `signal` (the task's `kill_signal` when `None`) to the whole task, waits up to
    /// `timeout` for it to exit, then SIGKILLs what is left. Returns once everything is dead.
    fn kill<'a>(
        &'a self,
        handle: &'a TaskHandle,
        signal: Option<&'a str>,
        timeout: Duration,
    ) -> DriverFuture<'a, ExitStatus>;

    /// Current resource usage of the task.
    fn stats<'a>(&'a self, handle: &'a TaskHandle) -> DriverFuture<'a, TaskResourceUsage>;

    /// The client has recorded the exit: kills anything left and releases every resource (the
    /// cgroup, the shim and its state). Idempotent.
    fn destroy<'a>(&'a self, handle: &'a TaskHandle) -> DriverFuture<'a, ()>;

    /// The task's own network (its address and port map), for services with `address_mode =
    /// "driver"`; `None` for drivers that run tasks in the host's network.
    fn network(
        &self,
        handle: &TaskHandle,
    ) -> Option<drover_structs::service_registration::DriverNetwork> {
        let _ = handle;
        None
    }

    /// For a task whose shim is gone: kills what is left of it through its cgroup, removes the
    /// cgroup and the shim state, and returns the exit status the shim recorded, if it did.
    fn reclaim<'a>(&'a self, handle: &'a TaskHandle) -> DriverFuture<'a, Option<ExitStatus>>;
}
