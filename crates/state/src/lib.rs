//! The state store: typed tables (jobs, job versions, evals, allocs, nodes, job summaries) with
//! one monotonically increasing modify index, per-table indexes for blocking queries, and an
//! event stream, over the small [`Kv`] trait with an embedded (redb) backend.
//!
//! **Boundary**: holds data, indexes and the data derived in the same write (job status, job
//! summaries), never scheduling logic. Reads come from an in-memory snapshot; every write is
//! persisted through the group-commit writer before it is acknowledged.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod derive;
pub mod embedded;
pub mod engine;
pub mod error;
pub mod events;
pub mod kv;
pub mod store;
pub mod tables;

pub use embedded::{EmbeddedKv, STATE_FILE_NAME};
pub use engine::{
    CommitStats, Committed, Engine, EngineOptions, Indexes, SCHEMA_VERSION, Table, WatchOutcome,
    WriteContext, load_table,
};
pub use error::StateError;
pub use events::{
    Event, EventBatch, EventBuffer, EventFilter, EventSubscription, EventType, Topic,
};
pub use kv::{KeyRange, Kv, KvError, KvFuture, KvPair, MemoryKv, Revision, WriteBatch, WriteOp};
pub use store::{ClientAllocUpdate, JobRegistration, StateStore};
pub use tables::{JOB_TRACKED_VERSIONS, JobKey, StateSnapshot, StateTables};
