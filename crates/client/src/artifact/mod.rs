//! Artifacts: the files a task's `artifact` blocks fetch into its directory before it starts.
//!
//! `source` reads an artifact block (interpolated) into an [`source::ArtifactSpec`]; `fetch`
//! gets it through the node's content-addressed cache (single flight per entry) with the
//! `http`/`https`, local file or `git` getter; `checksum` verifies the download before
//! anything is unpacked; `archive` unpacks tar, tar.gz, tar.bz2, tar.xz and zip trees and gz,
//! bz2 and xz files; `beneath` is the only writer, and confines every write to the
//! destination (`openat2` `RESOLVE_BENEATH`, no symlink followed, names and link targets
//! checked, decompression limits counted); `config` is the client's `artifact { … }` block.
//!
//! **Not** here: the prestart hook, its task events and persisted state
//! (`taskrunner::hooks::artifact`).

pub mod archive;
pub mod beneath;
pub mod checksum;
pub mod config;
pub mod fetch;
pub mod source;

use std::time::Duration;

pub use config::ArtifactConfig;
pub use fetch::ArtifactFetcher;
pub use source::ArtifactSpec;

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
