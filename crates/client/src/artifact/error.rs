//! [`ArtifactError`]: why an artifact could not be fetched, and whether retrying may help.
//!
//! **Not** the task event a failure becomes (the artifact hook builds it).

use std::time::Duration;

/// Why an artifact could not be fetched.
#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    #[error("invalid source {url:?}: {reason}")]
    InvalidSource { url: String, reason: String },
    #[error("getter {getter:?} is not supported (drover fetches http, https, local files and git)")]
    UnsupportedGetter { getter: String },
    #[error("option {option:?}: {reason}")]
    InvalidOption { option: String, reason: String },
    #[error("mode {mode:?}: {reason}")]
    InvalidMode { mode: String, reason: String },
    #[error("destination {destination:?} {reason}")]
    InvalidDestination { destination: String, reason: String },
    #[error("checksums did not match for {file}: expected {expected}, got {actual}")]
    ChecksumMismatch {
        file: String,
        expected: String,
        actual: String,
    },
    #[error("GET {url}: {message}")]
    Http { url: String, message: String },
    #[error("GET {url}: bad response code: {status}")]
    HttpStatus { url: String, status: u16 },
    #[error("download is larger than http_max_size ({limit} bytes)")]
    TooLarge { limit: u64 },
    #[error("git {action} failed: {message}")]
    Git {
        action: &'static str,
        message: String,
    },
    #[error("git {action} did not finish within git_timeout ({timeout:?})")]
    GitTimeout {
        action: &'static str,
        timeout: Duration,
    },
    #[error("archive entry {entry:?} refused: {reason}")]
    UnsafeEntry { entry: String, reason: String },
    #[error("archive entry {entry:?}: unpacking exceeds decompression_size_limit ({limit} bytes)")]
    SizeLimit { entry: String, limit: u64 },
    #[error(
        "archive entry {entry:?}: the archive holds more than decompression_file_count_limit ({limit}) entries"
    )]
    FileCountLimit { entry: String, limit: u64 },
    #[error("reading {format} archive: {message}")]
    Archive {
        format: &'static str,
        message: String,
    },
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl ArtifactError {
    /// Whether trying again may help. As in Nomad, a source, option, mode or destination the
    /// task cannot use fails it at once; anything met while fetching (network, server,
    /// checksum, archive contents) is left to the restart policy.
    pub fn is_recoverable(&self) -> bool {
        !matches!(
            self,
            ArtifactError::InvalidSource { .. }
                | ArtifactError::UnsupportedGetter { .. }
                | ArtifactError::InvalidOption { .. }
                | ArtifactError::InvalidMode { .. }
                | ArtifactError::InvalidDestination { .. }
        )
    }
}
