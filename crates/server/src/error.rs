//! The server's error type: what the caller did wrong, or what failed inside.

use drover_state::StateError;

/// Errors of server operations, by what the caller did wrong (or didn't).
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The object asked for does not exist (HTTP 404).
    #[error("{0}")]
    NotFound(String),
    /// The request is invalid (HTTP 400).
    #[error("{0}")]
    BadRequest(String),
    /// A register's `EnforceIndex` did not hold. Nomad answers it as an RPC error (HTTP 500),
    /// and its CLI recognises it by the text's `Enforcing job modify index` prefix.
    #[error("{0}")]
    IndexConflict(String),
    /// Refused as Nomad refuses it in an RPC (HTTP 500 with Nomad's words).
    #[error("{0}")]
    Rpc(String),
    /// The state store failed.
    #[error(transparent)]
    State(#[from] StateError),
    /// Something inside the server failed (HTTP 500).
    #[error("{0}")]
    Internal(String),
}
