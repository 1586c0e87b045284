//! The state store: typed tables (jobs, job versions, evals, allocs, nodes, job summaries, the
//! service catalog's registrations) with one monotonically increasing modify index, per-table
//! indexes for blocking queries, and an event stream, over the small [`Kv`] trait with an
//! embedded (redb) backend.
//!
//! **Boundary**: holds data, indexes and the data derived in the same write (job status, job
//! summaries), never scheduling logic. Reads come from an in-memory snapshot; every write is
//! persisted through the group-commit writer before it is acknowledged.
//!
//! Layers, bottom up:
//! - [`kv`]: the [`Kv`] trait (byte keys and values, range scans, atomic revisioned batches)
//!   and [`MemoryKv`]; [`embedded`]: [`EmbeddedKv`], one redb file `<data_dir>/state.redb`.
//! - [`engine`]: the group-commit writer, modify indexes, table watches (blocking queries) and
//!   the hand-off to [`events`], generic over the in-memory state.
//! - [`store`]: [`StateStore`], the typed API the server, API and client use; [`tables`]: its
//!   in-memory tables and [`StateSnapshot`]; [`derive`](mod@derive): job status and summary counters.
//!
//! ```text
//! let store = StateStore::open(data_dir).await?;
//! let registration = store.upsert_job(job, now_unix_ns).await?;          // versioned
//! let outcome = store.wait_for_change(&[Table::Allocs], index, deadline).await;
//! let snapshot = store.snapshot();                                       // for the scheduler
//! ```

pub mod acl;
pub mod acl_sso;
pub mod acl_tables;
pub mod archive;
pub mod deployments;
pub mod deployments_table;
pub mod derive;
pub mod embedded;
pub mod engine;
pub mod error;
pub mod events;
pub mod gc;
pub mod job_submissions;
pub mod keyring;
pub mod kv;
pub mod namespaces;
pub mod node_pools;
mod node_pools_table;
pub mod scaling;
mod scaling_table;
pub mod store;
pub mod tables;
pub mod variables;

pub use embedded::{EmbeddedKv, STATE_FILE_NAME};
pub use engine::{
    CommitStats, Committed, Engine, EngineOptions, Indexes, SCHEMA_VERSION, Table, WatchOutcome,
    WriteContext, load_table,
};
pub use error::StateError;
pub use events::{
    Event, EventBatch, EventBuffer, EventFilter, EventPayload, EventSubscription, EventType, Topic,
};
pub use kv::{
    KeyRange, Kv, KvContents, KvError, KvFuture, KvPair, MemoryKv, Revision, WriteBatch, WriteOp,
};
pub use store::{
    ClientAllocChange, ClientAllocUpdate, JobRegistration, NODE_EVENT_REGISTERED,
    NODE_EVENT_REREGISTERED, StateStore,
};
pub use tables::{JOB_TRACKED_VERSIONS, JobKey, StateSnapshot, StateTables};
pub use variables::{VariableLockOp, VariableLockWrite, VariableOp, VariableWrite};
