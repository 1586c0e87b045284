//! The error of the namespace, task-root and capability mechanisms (cgroups have their own,
//! [`crate::CgroupError`]). Every variant says which step failed and on what.
//!
//! Not for: deciding what to do about a failure; the shim's child reports it and exits.

use std::path::PathBuf;

use nix::errno::Errno;

#[derive(Debug, thiserror::Error)]
pub enum IsolationError {
    #[error("{step}: {source}")]
    Syscall {
        step: String,
        #[source]
        source: Errno,
    },
    #[error("{step} {path}: {source}")]
    Io {
        step: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("unknown capability {0:?}")]
    UnknownCapability(String),
    #[error("invalid host name {0:?} (1 to 64 letters, digits, '-' or '.')")]
    InvalidHostname(String),
    #[error("invalid path {path}: {reason}")]
    InvalidPath { path: PathBuf, reason: &'static str },
    #[error("mount point {target}: {source}")]
    Beneath {
        target: PathBuf,
        #[source]
        source: crate::beneath::BeneathError,
    },
}

pub(crate) fn syscall(step: impl Into<String>) -> impl FnOnce(Errno) -> IsolationError {
    let step = step.into();
    move |source| IsolationError::Syscall { step, source }
}
