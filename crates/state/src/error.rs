//! The error type of the state store.
//!
//! **Boundary**: one enum for the whole crate's store API; backend errors are wrapped, not
//! flattened, so the caller still sees which file failed and why.

use std::sync::Arc;

use crate::kv::KvError;

/// Errors of the state store.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// The backend failed while opening or loading.
    #[error(transparent)]
    Backend(#[from] KvError),
    /// A group commit failed; none of the writes in it were applied.
    #[error("commit failed: {0}")]
    Commit(#[source] Arc<KvError>),
    /// Reloading the state from the backend failed.
    #[error("reloading the state from the backend failed: {0}")]
    Reload(String),
    /// The writer task has stopped (the store is shutting down).
    #[error("state store is closed")]
    Closed,
    /// A stored record could not be decoded.
    #[error("cannot decode stored {table} record {key}: {reason}")]
    Decode {
        /// The table.
        table: &'static str,
        /// The record's key, printable.
        key: String,
        /// What serde reported.
        reason: String,
    },
    /// A record could not be encoded.
    #[error("cannot encode {table} record: {reason}")]
    Encode {
        /// The table.
        table: &'static str,
        /// What serde reported.
        reason: String,
    },
    /// The file was written by an incompatible version of drover.
    #[error(
        "state schema version {found} is not supported (this drover reads version {supported})"
    )]
    Schema {
        /// The version found in the store.
        found: String,
        /// The version this build reads and writes.
        supported: u32,
    },
    /// The object a write refers to does not exist.
    #[error("{kind} not found: {id}")]
    NotFound {
        /// What was looked up ("job", "alloc", "node", "eval").
        kind: &'static str,
        /// Its ID.
        id: String,
    },
    /// The write is refused by a rule of the state it would change (Nomad's words, answered
    /// as its RPC errors are: HTTP 500).
    #[error("{0}")]
    Refused(String),
    /// The write is not valid (for example an empty ID).
    #[error("invalid {field}: {reason}")]
    Invalid {
        /// The offending field.
        field: &'static str,
        /// Why.
        reason: String,
    },
}

impl StateError {
    /// Whether the backend is unreachable or has no quorum (answered as HTTP 503).
    pub fn is_unavailable(&self) -> bool {
        match self {
            StateError::Backend(error) => matches!(error, KvError::Unavailable { .. }),
            StateError::Commit(error) => matches!(error.as_ref(), KvError::Unavailable { .. }),
            _ => false,
        }
    }
}
