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
//!
//! # Layers
//!
//! Each module directly under `src/` uses only modules on the lines below its own (`error`
//! modules aside), as `crates/structs/tests/module_cycles.rs` checks; top first:
//!
//! - `acl`, `acl_sso`, `batch`, `deployments`, `gc`, `intentions`, `keyring`, `namespaces`,
//!   `node_pools`, `scaling`, `variables`
//! - `store`
//! - `deployments_table`, `job_submissions`, `node_pools_table`, `scaling_table`
//! - `archive`, `tables`
//! - `engine`
//! - `embedded`
//! - `acl_tables`, `derive`, `events`, `kv`
//!
//! # Design notes
//!
//! Typed tables (jobs, versions, evals, allocs, nodes, summaries, service
//! registrations, periodic launches) over a small `Kv` trait with an embedded redb backend; one monotonically
//! increasing index; group commit; blocking queries; the event stream buffer (payloads kept as
//! compact JSON text, not parsed trees; a subscription without an index starts with the newest
//! 99 batches held, as Nomad's broker reads on from the head of its 100-batch buffer). **Invariant**: a service registration never outlives
//! its allocation's life: the write that makes the allocation client-terminal (complete,
//! failed, lost), marks its node down, purges its job or collects it removes the
//! registration too (with a `ServiceDeregistration` event on the `Service` topic). A job
//! register keeps Nomad's `PeriodicLaunch` table in the same write (an active periodic job's
//! register time until its first launch, then each child's launch time from its ID) and counts
//! each child job under its status in its parent's `Children` summary.
//! `keyring`: the root keys, only as the server sealed them (one `active`; storing a new active
//! key demotes the old in the same write); `variables`: each variable's metadata with its items
//! only sealed, and check-and-set (`cas`) writes that answer the stored record on a mismatch;
//! a variable's lock (Nomad's `VariableLock`, persisted in its metadata) lets only the caller
//! naming its ID write it and nobody delete it, until released (`write_variable_lock`);
//! every variable write is a `VariableUpdated` event on the `Variable` topic;
//! `namespaces`: namespaces by name, `default` built in (answered until written, never
//! deleted); a delete is refused while the namespace holds a live job or allocation or a
//! variable;
//! `acl`: ACL policies, roles (by ID, indexed by name, their policies checked at write),
//! tokens (by accessor, indexed by secret), one-time tokens (one per accessor, indexed by
//! secret) and the bootstrap index in one
//! table (`acl_tables`: the in-memory tables and persisted records the store loads), with
//! policies, tokens and roles each keeping their own index (`AclPolicies`, `AclTokens`,
//! `AclRoles`, index-only tables: Nomad's `X-Nomad-Index` of each list); a second
//! bootstrap is refused unless it names the first one's index (the reset).
//! Every group commit is guarded by the backend revision its state was built from; a store
//! sharing its backend with another (etcd) that loses the race fails that commit and reloads,
//! and `reload_from_backend` (driven by `etcd`'s watch) rebuilds the tables from the backend and
//! wakes blocking queries on the tables that moved (remote writes' events come from the
//! follower, `etcd::follow`). `read_all` (`Kv::read_all`) is the whole keyspace at one
//! revision; `restore` decodes every record of a snapshot on a copy first, then replaces the
//! keyspace (`Kv::replace_all`, atomic on each backend) on the writer between group commits,
//! with indexes that only move forward. On a backend with a cap on operations per transaction
//! (etcd), the writes of many allocations (a plan's results, a client's batched updates, a
//! migration) split into consecutive writes within it, each a consistent state as a plan
//! committed in part (`allocs_per_write`). `archive`: the snapshot file (Nomad's layout: gzip tar
//! of `meta.json`, `state.bin`, `SHA256SUMS`, plus `keyring.kek`), checked whole before
//! anything is read from it.
//! `node_pools`: node pools by name; `all` and `default` are answered on every read and never
//! stored; a node registering in an unknown pool creates it in the same write. `gc`: removal of
//! deployments by ID for garbage collection.
//! `deployments`: Nomad's deployments by ID, indexed by job, with `Deployment` events; a plan's
//! deployment, its status changes and its allocations commit in one write
//! (`upsert_plan_results`), and every allocation write counts the allocation in its deployment
//! as Nomad's store does (placed, canary, healthy/unhealthy on the first report,
//! `RequireProgressBy`; `deployments_table`: the load and the in-write helpers the store's
//! allocation writes call). `update_deployment` commits a watcher's or operator's change in one
//! write: promotion (refused, in Nomad's words, unless every canary concerned is healthy),
//! allocation health or `DesiredTransition.Reschedule`, status, a job registered again and the
//! evaluations.
//! `job_submissions`: Nomad's `job_submission` table — the jobspec source each job version
//! was registered from, by (namespace, job, version), written in the register's write (the
//! first one of a version wins; a register without one whose job names a version the job has
//! reached takes that version's, as Nomad's store does for reverts and stops), the newest six
//! kept, removed with the job.
//! A job's versions keep the newest six, and every tagged one besides (`VersionTag`, written
//! by `update_job_version_tag`); a new allocation that replaces another names itself as that
//! one's `NextAllocation` in the same write, as Nomad's store does.
//! `scaling`: each job's scaling events per group (newest first, 20 kept, as Nomad's
//! `JobTrackedScalingEvents`) and the group `scaling` policies by ID; a job register writes its
//! policies in the same write (an unchanged policy keeps its indexes) and removes those it
//! dropped, a purge removes both (`scaling_table`: the load and those in-write helpers).
//! `batch`: `write_together`, a list of changes (a job version, evaluations, a scaling event)
//! applied as one write of the engine, so one backend transaction; a change refused part-way
//! puts the tables back as they were, and nothing of the write is persisted or published.
//! **Boundary**: holds data, never scheduling logic, never a key or a secret in the clear.

pub mod acl;
pub mod acl_sso;
pub mod acl_tables;
pub mod archive;
pub mod batch;
pub mod deployments;
pub mod deployments_table;
pub mod derive;
pub mod embedded;
pub mod engine;
pub mod error;
pub mod events;
pub mod gc;
pub mod intentions;
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

pub use batch::{Change, Written};
pub use embedded::{EmbeddedKv, STATE_FILE_NAME};
pub use engine::{
    CommitStats, Committed, Engine, EngineOptions, Indexes, SCHEMA_VERSION, Table, WatchOutcome,
    WriteContext, load_table,
};
pub use error::StateError;
pub use events::{
    Event, EventAccess, EventBatch, EventBuffer, EventFilter, EventPayload, EventSubscription,
    EventType, Topic,
};
pub use kv::{
    KeyRange, Kv, KvContents, KvError, KvFuture, KvPair, MemoryKv, Revision, WriteBatch, WriteOp,
};
pub use store::{
    ClientAllocChange, ClientAllocUpdate, JobRegistration, NODE_EVENT_REGISTERED,
    NODE_EVENT_REREGISTERED, StateStore,
};
pub use tables::{JOB_TRACKED_VERSIONS, JobKey, JobSummaryChange, StateSnapshot, StateTables};
pub use variables::{VariableLockOp, VariableLockWrite, VariableOp, VariableWrite};
