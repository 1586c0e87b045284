//! The mesh's one error type.

/// Errors of the mesh: certificates, identities, the proxy's configuration and its calls to
/// the agent.
#[derive(Debug, thiserror::Error)]
pub enum MeshError {
    #[error("invalid SPIFFE ID {id:?}: {reason}")]
    SpiffeId { id: String, reason: &'static str },
    #[error("certificate: {0}")]
    Certificate(String),
    #[error("no active mesh CA root")]
    NoActiveRoot,
    #[error("TLS: {0}")]
    Tls(String),
    #[error("reading {path}: {source}")]
    Io {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("proxy config {path}: {reason}")]
    Config {
        path: std::path::PathBuf,
        reason: String,
    },
    #[error("agent call {what}: {reason}")]
    Agent { what: String, reason: String },
    #[error("invalid intention: {0}")]
    Intention(String),
}

impl From<rcgen::Error> for MeshError {
    fn from(error: rcgen::Error) -> Self {
        MeshError::Certificate(error.to_string())
    }
}
