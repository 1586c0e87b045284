//! The client's one error type, and what each error means to an API caller.

use std::path::PathBuf;

/// Errors of the client's operations, each with the HTTP-ish [`ClientErrorKind`] it maps to.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The message is Nomad's, word for word; clients match on it.
    #[error("Unknown allocation \"{alloc_id}\"")]
    UnknownAlloc { alloc_id: String },
    #[error("unknown task {task:?} in allocation {alloc_id}")]
    UnknownTask { alloc_id: String, task: String },
    #[error("invalid request for allocation {alloc_id}: {message}")]
    InvalidRequest { alloc_id: String, message: String },
    #[error("allocation {alloc_id} is not terminal; stop it before garbage collecting it")]
    NotTerminal { alloc_id: String },
    #[error("alloc runner for {alloc_id} failed: {message}")]
    Runner { alloc_id: String, message: String },
    #[error("restoring allocations from the client state failed: {message}")]
    Restore { message: String },
    #[error("node identity file {path} could not be read or written")]
    NodeIdentity {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Nomad's validation message, word for word.
    #[error("{0}")]
    InvalidNodeMeta(String),
    #[error("dynamic node metadata file {path}: {message}")]
    NodeMeta { path: PathBuf, message: String },
    #[error("the client is shutting down")]
    ShuttingDown,
}

/// What an error means to a caller of the API: which status code it deserves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientErrorKind {
    NotFound,
    BadRequest,
    Unavailable,
    Internal,
}

impl ClientError {
    pub fn kind(&self) -> ClientErrorKind {
        match self {
            Self::UnknownAlloc { .. } => ClientErrorKind::NotFound,
            Self::UnknownTask { .. }
            | Self::InvalidRequest { .. }
            | Self::NotTerminal { .. }
            | Self::InvalidNodeMeta(_) => ClientErrorKind::BadRequest,
            Self::ShuttingDown => ClientErrorKind::Unavailable,
            Self::Runner { .. }
            | Self::Restore { .. }
            | Self::NodeIdentity { .. }
            | Self::NodeMeta { .. } => ClientErrorKind::Internal,
        }
    }
}
