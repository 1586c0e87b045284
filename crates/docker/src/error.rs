//! The docker driver's own error type, before it becomes a driver error; here so the modules
//! that report it need not import the crate root.

use bollard::errors::Error as EngineError;

/// The docker driver's errors before they become a `DriverError`.
#[derive(Debug, thiserror::Error)]
pub enum DockerError {
    #[error("{0}")]
    Config(String),
    #[error("{context}: {source}")]
    Engine {
        context: String,
        #[source]
        source: EngineError,
    },
}
