//! Artifacts: the files a task's `artifact` blocks fetch into its directory before it starts.
//!
//! `source` reads an artifact block (interpolated) into an [`source::ArtifactSpec`]; `fetch`
//! gets it through the node's content-addressed cache (single flight per entry) with the
//! `http`/`https`, local file or `git` getter; `checksum` verifies the download before
//! anything is unpacked; `archive` unpacks tar, tar.gz, tar.bz2, tar.xz and zip trees and gz,
//! bz2 and xz files; `beneath` is the only writer, and confines every write to the
//! destination (`openat2` `RESOLVE_BENEATH`, no symlink followed, names and link targets
//! checked, decompression limits counted); `config` is the client's `artifact { … }` block;
//! `cache` keeps the node's cache within `cache_max_age` and `cache_max_size`.
//!
//! **Not** here: the prestart hook, its task events and persisted state
//! (`taskrunner::hooks::artifact`).

pub mod archive;
pub mod beneath;
pub mod cache;
pub mod checksum;
pub mod config;
pub mod error;
pub mod fetch;
pub mod flight;
pub mod source;

pub use config::ArtifactConfig;
pub use error::ArtifactError;
pub use fetch::ArtifactFetcher;
pub use source::ArtifactSpec;
