//! The driver subsystem's error type. Not for: deciding what to do about an error; the client
//! reads [`DriverError::is_recoverable`] and applies its restart policy.

use std::io;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// A start failure worded as Nomad's driver words it (the docker driver's "Failed to pull
    /// `image`: …"), shown as it is.
    #[error("{message}")]
    StartWorded { message: String, recoverable: bool },
    #[error("task {task_id} failed to start: {message}")]
    Start {
        task_id: String,
        message: String,
        recoverable: bool,
    },
    #[error(
        "shim binary not found at {path} (set DROVER_SHIM_PATH or install drover-shim next to drover)"
    )]
    ShimBinaryMissing { path: PathBuf },
    #[error("spawning shim {path}")]
    SpawnShim {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("preparing shim state dir {path}")]
    StateDir {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("the shim of task {task_id} is gone")]
    ShimGone { task_id: String },
    #[error("the process behind the handle of task {task_id} is not its shim: {detail}")]
    IdentityMismatch { task_id: String, detail: String },
    #[error("talking to the shim at {socket}")]
    Connection {
        socket: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("unexpected reply from the shim at {socket}: {detail}")]
    Protocol { socket: PathBuf, detail: String },
    #[error("the shim of task {task_id} refused {request}: {message}")]
    Refused {
        task_id: String,
        request: &'static str,
        message: String,
    },
    #[error("unknown signal {0:?}")]
    UnknownSignal(String),
    #[error("task {task_id} has no {what} in its handle")]
    BadHandle { task_id: String, what: &'static str },
    #[error("task {task_id} is not known to the {driver} driver")]
    UnknownTask {
        task_id: String,
        driver: &'static str,
    },
    /// A container engine (the docker driver's) failed or refused a request.
    #[error("task {task_id}: the container engine failed to {request}: {message}")]
    Engine {
        task_id: String,
        request: &'static str,
        message: String,
    },
    #[error("invalid task config: {0}")]
    InvalidConfig(String),
    #[error("cleaning up after task {task_id}")]
    Cgroup {
        task_id: String,
        #[source]
        source: drover_isolate::CgroupError,
    },
}

impl DriverError {
    /// Whether trying again (restarting the task) may succeed. Invalid configuration and
    /// identity mismatches never get better by retrying.
    pub fn is_recoverable(&self) -> bool {
        match self {
            Self::Start { recoverable, .. } | Self::StartWorded { recoverable, .. } => *recoverable,
            Self::InvalidConfig(_)
            | Self::UnknownSignal(_)
            | Self::IdentityMismatch { .. }
            | Self::BadHandle { .. }
            | Self::ShimBinaryMissing { .. } => false,
            Self::SpawnShim { .. }
            | Self::StateDir { .. }
            | Self::ShimGone { .. }
            | Self::Connection { .. }
            | Self::Protocol { .. }
            | Self::Refused { .. }
            | Self::Engine { .. }
            | Self::UnknownTask { .. }
            | Self::Cgroup { .. } => true,
        }
    }
}
