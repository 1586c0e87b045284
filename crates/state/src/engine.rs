//! The write engine: one writer task that applies queued writes in group commits, the modify
//! indexes, blocking-query watches, and the hand-off of events to the event buffer.
//!
//! ```text
//!  callers ──write(f)──► queue ──► writer task: take everything queued (up to a limit)
//!                                   │ for each write: f(&mut working_copy, ctx) → index N, N+1, …
//!                                   │ one Kv batch (puts + deletes + indexes) → one fsync
//!                                   ▼
//!                     publish snapshot ─► wake table watchers ─► push events ─► ack callers
//! ```
//!
//! The state `S` is held in memory; a write works on a clone of the last published state (cheap
//! when `S` keeps its tables in persistent maps that share their nodes) and the clone is
//! published only after the backend has made the batch durable, so readers never see a write
//! that could still be lost, and a failed commit leaves nothing behind. Each write that changes
//! something gets its own index (like a Raft log index); a write that changes nothing takes
//! none.
//!
//! **Boundary**: generic over the state type; it knows tables only by [`Table`] name and
//! values only as serde values. No clock is read except tokio's, for blocking-query deadlines.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::{mpsc, oneshot, watch};

use crate::error::StateError;
use crate::events::{Event, EventBuffer, EventFilter, EventSubscription};
use crate::kv::{KeyRange, Kv, KvContents, KvError, KvPair, MemoryKv, WriteBatch, WriteOp};

/// The schema version of the records this build writes.
pub const SCHEMA_VERSION: u32 = 1;

const META_LATEST_INDEX_KEY: &[u8] = b"m/index";
const META_SCHEMA_KEY: &[u8] = b"m/schema";
const META_TABLE_INDEX_PREFIX: &[u8] = b"m/table/";
const TABLE_PREFIX: &[u8] = b"t/";
/// The most operations the writer adds to a batch besides the writes' own: the latest index
/// and one index per table.
const META_OPS_PER_BATCH: usize = 1 + TABLE_COUNT;

/// A table of the store; blocking queries watch one or more of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Table {
    /// Jobs by namespace and ID.
    Jobs,
    /// Every version of every job.
    JobVersions,
    /// Evaluations.
    Evals,
    /// Allocations.
    Allocs,
    /// Nodes.
    Nodes,
    /// Job summaries.
    JobSummaries,
    /// The copies of jobs that allocations were placed with, stored once per job version
    /// rather than inside every allocation record.
    AllocJobs,
    /// Service registrations of the built-in catalog, by namespace and ID.
    ServiceRegistrations,
    /// The last launch of each periodic job, by namespace and ID.
    PeriodicLaunches,
    /// The keyring's root keys, wrapped, by key ID.
    RootKeys,
    /// Variables (items sealed), by namespace and path.
    Variables,
    /// ACL policies, tokens and the bootstrap marker (`crate::acl`).
    Acl,
    /// Deployments, by ID.
    Deployments,
    /// Namespaces, by name (`crate::namespaces`).
    Namespaces,
    /// Node pools (the built-in ones are not stored), by name.
    NodePools,
    /// The scaling events of each job, by namespace and job ID (`crate::scaling`).
    ScalingEvents,
    /// The scaling policies of the jobs' groups, by ID (`crate::scaling`).
    ScalingPolicies,
    /// The jobspec each job version was registered from, by namespace, job ID and version
    /// (`crate::job_submissions`).
    JobSubmissions,
    /// The ACL policies' own index (Nomad's `acl_policy`): its records live in [`Table::Acl`],
    /// which every ACL write touches; this one moves only when a policy is written.
    AclPolicies,
    /// The ACL tokens' own index (Nomad's `acl_token`), records in [`Table::Acl`].
    AclTokens,
    /// The ACL roles' own index (Nomad's `acl_roles`), records in [`Table::Acl`].
    AclRoles,
    /// Service mesh intentions, by source and destination (`crate::intentions`).
    Intentions,
    /// The ACL auth methods' own index (Nomad's `acl_auth_methods`), records in [`Table::Acl`].
    AclAuthMethods,
    /// The ACL binding rules' own index (Nomad's `acl_binding_rules`), records in
    /// [`Table::Acl`].
    AclBindingRules,
}

const TABLE_COUNT: usize = 24;

impl Table {
    /// Every table.
    pub const ALL: [Table; TABLE_COUNT] = [
        Table::Jobs,
        Table::JobVersions,
        Table::Evals,
        Table::Allocs,
        Table::Nodes,
        Table::JobSummaries,
        Table::AllocJobs,
        Table::ServiceRegistrations,
        Table::PeriodicLaunches,
        Table::RootKeys,
        Table::Variables,
        Table::Acl,
        Table::Deployments,
        Table::Namespaces,
        Table::NodePools,
        Table::ScalingEvents,
        Table::ScalingPolicies,
        Table::JobSubmissions,
        Table::AclPolicies,
        Table::AclTokens,
        Table::AclRoles,
        Table::Intentions,
        Table::AclAuthMethods,
        Table::AclBindingRules,
    ];

    /// The table's name, as used in keys and errors.
    pub fn name(self) -> &'static str {
        match self {
            Table::Jobs => "jobs",
            Table::JobVersions => "job_versions",
            Table::Evals => "evals",
            Table::Allocs => "allocs",
            Table::Nodes => "nodes",
            Table::JobSummaries => "job_summaries",
            Table::AllocJobs => "alloc_jobs",
            Table::ServiceRegistrations => "service_registrations",
            Table::PeriodicLaunches => "periodic_launches",
            Table::RootKeys => "root_keys",
            Table::Variables => "variables",
            Table::Acl => "acl",
            Table::Deployments => "deployments",
            Table::Namespaces => "namespaces",
            Table::NodePools => "node_pools",
            Table::ScalingEvents => "scaling_event",
            Table::ScalingPolicies => "scaling_policy",
            Table::JobSubmissions => "job_submission",
            Table::AclPolicies => "acl_policy",
            Table::AclTokens => "acl_token",
            Table::AclRoles => "acl_roles",
            Table::Intentions => "mesh_intentions",
            Table::AclAuthMethods => "acl_auth_methods",
            Table::AclBindingRules => "acl_binding_rules",
        }
    }

    fn position(self) -> usize {
        match self {
            Table::Jobs => 0,
            Table::JobVersions => 1,
            Table::Evals => 2,
            Table::Allocs => 3,
            Table::Nodes => 4,
            Table::JobSummaries => 5,
            Table::AllocJobs => 6,
            Table::ServiceRegistrations => 7,
            Table::PeriodicLaunches => 8,
            Table::RootKeys => 9,
            Table::Variables => 10,
            Table::Acl => 11,
            Table::Deployments => 12,
            Table::Namespaces => 13,
            Table::NodePools => 14,
            Table::ScalingEvents => 15,
            Table::ScalingPolicies => 16,
            Table::JobSubmissions => 17,
            Table::AclPolicies => 18,
            Table::AclTokens => 19,
            Table::AclRoles => 20,
            Table::Intentions => 21,
            Table::AclAuthMethods => 22,
            Table::AclBindingRules => 23,
        }
    }

    /// The key prefix of this table's records in the [`Kv`].
    fn key_prefix(self) -> Vec<u8> {
        let mut prefix = TABLE_PREFIX.to_vec();
        prefix.extend_from_slice(self.name().as_bytes());
        prefix.push(b'/');
        prefix
    }

    fn record_key(self, key: &[u8]) -> Vec<u8> {
        let mut full = self.key_prefix();
        full.extend_from_slice(key);
        full
    }

    fn index_key(self) -> Vec<u8> {
        let mut full = META_TABLE_INDEX_PREFIX.to_vec();
        full.extend_from_slice(self.name().as_bytes());
        full
    }
}

/// The modify indexes: the latest index of the whole store and the last index that touched
/// each table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Indexes {
    latest: u64,
    tables: [u64; TABLE_COUNT],
}

impl Indexes {
    /// The index of the last write to the store (0 when nothing was ever written).
    pub fn latest(&self) -> u64 {
        self.latest
    }

    /// The index of the last write that touched `table`.
    pub fn table(&self, table: Table) -> u64 {
        self.tables[table.position()]
    }

    /// The largest index among `tables` (what a blocking query over them reports).
    pub fn max_of(&self, tables: &[Table]) -> u64 {
        tables
            .iter()
            .map(|table| self.table(*table))
            .max()
            .unwrap_or(0)
    }
}

/// A committed, immutable state: the data and its indexes.
#[derive(Debug, Clone)]
pub struct Committed<S> {
    /// The modify indexes as of this state.
    pub indexes: Indexes,
    /// The data.
    pub data: S,
}

/// What a write sees besides the state: its index, and where it records the records to persist
/// and the events to publish.
#[derive(Debug)]
pub struct WriteContext {
    index: u64,
    claimed: bool,
    ops: Vec<WriteOp>,
    events: Vec<Event>,
    touched: [bool; TABLE_COUNT],
}

impl WriteContext {
    fn new(index: u64) -> Self {
        Self {
            index,
            claimed: false,
            ops: Vec::new(),
            events: Vec::new(),
            touched: [false; TABLE_COUNT],
        }
    }

    /// The modify index of this write; calling it means the write changes something.
    pub fn index(&mut self) -> u64 {
        self.claimed = true;
        self.index
    }

    /// Persists `value` under `key` in `table` and marks the table touched.
    pub fn put<T: Serialize + ?Sized>(
        &mut self,
        table: Table,
        key: &[u8],
        value: &T,
    ) -> Result<(), StateError> {
        let bytes = serde_json::to_vec(value).map_err(|error| StateError::Encode {
            table: table.name(),
            reason: error.to_string(),
        })?;
        self.touch(table);
        self.ops.push(WriteOp::Put {
            key: table.record_key(key),
            value: bytes,
        });
        Ok(())
    }

    /// Removes `key` from `table` and marks the table touched.
    pub fn delete(&mut self, table: Table, key: &[u8]) {
        self.touch(table);
        self.ops.push(WriteOp::Delete {
            key: table.record_key(key),
        });
    }

    /// The index of the last committed write before this one (what a write that changes
    /// nothing reports).
    pub fn latest_committed_index(&self) -> u64 {
        self.index - 1
    }

    /// Marks `table` touched (its index moves to this write's index) without persisting.
    pub fn touch(&mut self, table: Table) {
        self.claimed = true;
        self.touched[table.position()] = true;
    }

    /// Records an event; its index is set to this write's index.
    pub fn emit(&mut self, mut event: Event) {
        self.claimed = true;
        event.index = self.index;
        self.events.push(event);
    }
}

type Completion = Box<dyn FnOnce(Result<(), StateError>) + Send>;
type Mutation<S> = Box<dyn FnOnce(&mut S, &mut WriteContext) -> (bool, Completion) + Send>;

type Loader<S> = Arc<
    dyn Fn(Arc<dyn Kv>) -> Pin<Box<dyn Future<Output = Result<S, StateError>> + Send>>
        + Send
        + Sync,
>;

enum WriteRequest<S> {
    Mutate(Mutation<S>),
    /// Reload state and indexes from the backend (another store sharing it wrote).
    Reload(oneshot::Sender<Result<(), StateError>>),
    /// Replace the whole keyspace (a snapshot's restore); answers the new latest index.
    Restore(Vec<KvPair>, oneshot::Sender<Result<u64, StateError>>),
    Shutdown(oneshot::Sender<()>),
}

/// Tuning of the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineOptions {
    /// The most writes applied in one backend transaction.
    pub max_writes_per_commit: usize,
    /// How many events the event buffer keeps.
    pub event_buffer_capacity: usize,
    /// How many writes may wait in the queue before callers wait to enqueue.
    pub queue_capacity: usize,
}

impl Default for EngineOptions {
    fn default() -> Self {
        Self {
            max_writes_per_commit: 4096,
            event_buffer_capacity: 4096,
            queue_capacity: 16384,
        }
    }
}

/// Counters of the writer, for tests and metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CommitStats {
    /// Backend transactions applied (one fsync each on the embedded backend).
    pub transactions: u64,
    /// Writes acknowledged as committed (including writes that changed nothing).
    pub writes: u64,
    /// The most writes that went into one transaction.
    pub largest_group: u64,
}

#[derive(Debug, Default)]
struct CommitCounters {
    transactions: AtomicU64,
    writes: AtomicU64,
    largest_group: AtomicU64,
}

/// The result of a blocking wait on tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchOutcome {
    /// The largest index among the watched tables when the wait ended.
    pub index: u64,
    /// Whether that index is greater than the one waited on (otherwise the wait timed out).
    pub changed: bool,
}

/// The engine handle: enqueue writes, read the published state, wait for changes.
pub struct Engine<S> {
    queue: mpsc::Sender<WriteRequest<S>>,
    /// The backend, for reads that need no writer (a snapshot's [`Kv::read_all`]); taken at
    /// shutdown, so the backend is released once the writer lets go of it.
    kv_for_reads: std::sync::RwLock<Option<Arc<dyn Kv>>>,
    /// Builds the state from a backend: the writer's, and [`Engine::restore`]'s check.
    loader: Loader<S>,
    /// The backend's cap on operations per transaction ([`Kv::max_ops_per_batch`]).
    max_ops_per_batch: Option<usize>,
    published: watch::Receiver<Arc<Committed<S>>>,
    table_watchers: Arc<[watch::Sender<u64>; TABLE_COUNT]>,
    events: Arc<EventBuffer>,
    counters: Arc<CommitCounters>,
}

impl<S> std::fmt::Debug for Engine<S> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Engine")
            .field("indexes", &self.published.borrow().indexes)
            .finish_non_exhaustive()
    }
}

/// The records of one table as stored: the table-relative key and the decoded value.
pub async fn load_table<T: DeserializeOwned>(
    kv: &dyn Kv,
    table: Table,
) -> Result<Vec<(Vec<u8>, T)>, StateError> {
    let prefix = table.key_prefix();
    let pairs = kv.scan(KeyRange::prefix(&prefix)).await?;
    pairs
        .into_iter()
        .map(|pair| {
            let key = pair.key[prefix.len()..].to_vec();
            let value =
                serde_json::from_slice(&pair.value).map_err(|error| StateError::Decode {
                    table: table.name(),
                    key: String::from_utf8_lossy(&key).into_owned(),
                    reason: error.to_string(),
                })?;
            Ok((key, value))
        })
        .collect()
}

fn decode_index(bytes: &[u8]) -> Result<u64, StateError> {
    let array: [u8; 8] = bytes.try_into().map_err(|_| StateError::Decode {
        table: "meta",
        key: "index".to_owned(),
        reason: format!("expected 8 bytes, found {}", bytes.len()),
    })?;
    Ok(u64::from_be_bytes(array))
}

async fn load_indexes(kv: &dyn Kv) -> Result<Indexes, StateError> {
    let mut indexes = Indexes::default();
    if let Some(bytes) = kv.get(META_LATEST_INDEX_KEY).await? {
        indexes.latest = decode_index(&bytes)?;
    }
    for table in Table::ALL {
        if let Some(bytes) = kv.get(&table.index_key()).await? {
            indexes.tables[table.position()] = decode_index(&bytes)?;
        }
    }
    Ok(indexes)
}

async fn check_schema(kv: &dyn Kv) -> Result<(), StateError> {
    let supported = SCHEMA_VERSION.to_string();
    match kv.get(META_SCHEMA_KEY).await? {
        Some(found) if found == supported.as_bytes() => Ok(()),
        Some(found) => Err(StateError::Schema {
            found: String::from_utf8_lossy(&found).into_owned(),
            supported: SCHEMA_VERSION,
        }),
        None => {
            let mut batch = WriteBatch::new();
            batch.put(META_SCHEMA_KEY.to_vec(), supported.clone().into_bytes());
            match kv.apply(batch).await {
                Ok(_) => Ok(()),
                // Another server opening the same fresh backend wrote first: its marker
                // decides, as if it had been there.
                Err(KvError::RevisionMismatch { .. }) => match kv.get(META_SCHEMA_KEY).await? {
                    Some(found) if found == supported.as_bytes() => Ok(()),
                    Some(found) => Err(StateError::Schema {
                        found: String::from_utf8_lossy(&found).into_owned(),
                        supported: SCHEMA_VERSION,
                    }),
                    None => Err(StateError::Commit(Arc::new(KvError::Unavailable {
                        reason: "the backend moved while its schema marker was written".to_owned(),
                    }))),
                },
                Err(error) => Err(error.into()),
            }
        }
    }
}

impl<S: Clone + Send + Sync + 'static> Engine<S> {
    /// Starts the writer task over `kv`, with `load` building the in-memory state from the
    /// stored records (see [`load_table`]); `load` runs again on [`Engine::reload`]. Must be
    /// called inside a tokio runtime.
    pub async fn start<F, Fut>(
        kv: Arc<dyn Kv>,
        options: EngineOptions,
        load: F,
    ) -> Result<Self, StateError>
    where
        F: Fn(Arc<dyn Kv>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<S, StateError>> + Send + 'static,
    {
        check_schema(kv.as_ref()).await?;
        let loader: Loader<S> = Arc::new(move |kv| Box::pin(load(kv)));
        // The revision is read before the records, so the records are at least that new; a
        // write guarded by an older revision than the records is refused, never lost.
        let revision = kv.revision().await?;
        let indexes = load_indexes(kv.as_ref()).await?;
        let data = loader(Arc::clone(&kv)).await?;
        let committed = Arc::new(Committed { indexes, data });
        let (published_sender, published) = watch::channel(committed);
        let table_watchers =
            Arc::new(Table::ALL.map(|table| watch::Sender::new(indexes.table(table))));
        let events = Arc::new(EventBuffer::new(options.event_buffer_capacity));
        let counters = Arc::new(CommitCounters::default());
        let (queue, receiver) = mpsc::channel(options.queue_capacity.max(1));
        let writer = Writer {
            receiver,
            published: published_sender,
            table_watchers: Arc::clone(&table_watchers),
            events: Arc::clone(&events),
            counters: Arc::clone(&counters),
            max_writes_per_commit: options.max_writes_per_commit.max(1),
            max_ops_per_batch: kv.max_ops_per_batch(),
            kv: Arc::clone(&kv),
            loader: Arc::clone(&loader),
            revision,
        };
        tokio::spawn(writer.run());
        Ok(Self {
            queue,
            max_ops_per_batch: kv.max_ops_per_batch(),
            kv_for_reads: std::sync::RwLock::new(Some(kv)),
            loader,
            published,
            table_watchers,
            events,
            counters,
        })
    }

    /// Queues `write` and waits until it is durable and visible.
    ///
    /// `write` runs on the writer task against the current state. It must leave the state
    /// unchanged when it returns an error (validate first, then change). Its result is returned
    /// once the group commit it belongs to has been persisted and published. Dropping the
    /// returned future does not withdraw a write that is already queued.
    pub async fn write<R, F>(&self, write: F) -> Result<R, StateError>
    where
        R: Send + 'static,
        F: FnOnce(&mut S, &mut WriteContext) -> Result<R, StateError> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel::<Result<R, StateError>>();
        let mutation: Mutation<S> = Box::new(move |state, context| match write(state, context) {
            Ok(result) => (
                true,
                Box::new(move |commit: Result<(), StateError>| {
                    // The caller may have gone away; the write is committed either way.
                    let _ = reply.send(commit.map(|()| result));
                }),
            ),
            Err(error) => (
                false,
                Box::new(move |_commit: Result<(), StateError>| {
                    let _ = reply.send(Err(error));
                }),
            ),
        });
        self.queue
            .send(WriteRequest::Mutate(mutation))
            .await
            .map_err(|_| StateError::Closed)?;
        answer.await.map_err(|_| StateError::Closed)?
    }

    /// The backend's cap on operations per transaction, if it has one: a single write must
    /// stay within it (writes of many records split themselves, see the store).
    pub fn max_ops_per_batch(&self) -> Option<usize> {
        self.max_ops_per_batch
    }

    /// The current committed state (cheap: an `Arc` clone).
    pub fn snapshot(&self) -> Arc<Committed<S>> {
        Arc::clone(&self.published.borrow())
    }

    /// The current indexes.
    pub fn indexes(&self) -> Indexes {
        self.published.borrow().indexes
    }

    /// Waits until one of `tables` has an index greater than `min_index`, or until `deadline`.
    /// Wakes only on commits that touch one of the tables; no polling.
    pub async fn wait_for_change(
        &self,
        tables: &[Table],
        min_index: u64,
        deadline: tokio::time::Instant,
    ) -> WatchOutcome {
        let mut receivers: Vec<watch::Receiver<u64>> = tables
            .iter()
            .map(|table| self.table_watchers[table.position()].subscribe())
            .collect();
        loop {
            let index = receivers
                .iter_mut()
                .map(|receiver| *receiver.borrow_and_update())
                .max()
                .unwrap_or(0);
            if index > min_index {
                return WatchOutcome {
                    index,
                    changed: true,
                };
            }
            if receivers.is_empty() {
                tokio::time::sleep_until(deadline).await;
                return WatchOutcome {
                    index,
                    changed: false,
                };
            }
            let any_change = futures_util::future::select_all(
                receivers
                    .iter_mut()
                    .map(|receiver| Box::pin(receiver.changed())),
            );
            match tokio::time::timeout_at(deadline, any_change).await {
                Ok(_) => continue,
                Err(_elapsed) => {
                    return WatchOutcome {
                        index,
                        changed: false,
                    };
                }
            }
        }
    }

    /// Reloads state and indexes from the backend, after another store sharing the backend
    /// wrote to it (see `drover-etcd`'s follower). Runs on the writer between group commits, so
    /// no local write is computed on a state older than what it commits over; table watchers
    /// whose index moved are woken as by a local write. Events of remote writes are not
    /// replayed (the backend keeps records, not events).
    pub async fn reload(&self) -> Result<(), StateError> {
        let (reply, answer) = oneshot::channel();
        self.queue
            .send(WriteRequest::Reload(reply))
            .await
            .map_err(|_| StateError::Closed)?;
        answer.await.map_err(|_| StateError::Closed)?
    }

    /// The whole keyspace as the backend holds it, at one revision (see [`Kv::read_all`]).
    /// Not queued behind writes: the backend's own consistency makes it one point in time.
    pub async fn read_all(&self, stale: bool) -> Result<KvContents, StateError> {
        let kv = self
            .kv_for_reads
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
            .ok_or(StateError::Closed)?;
        Ok(kv.read_all(stale).await?)
    }

    /// Replaces the whole keyspace with `pairs` (a snapshot's records, as
    /// [`Engine::read_all`] gave them) and reloads from it; answers the new latest index.
    ///
    /// Every record is decoded first, on a copy in memory: a snapshot whose schema differs or
    /// whose records do not decode is refused before anything changes. The modify indexes move
    /// only forward: each table's index becomes the snapshot's when that is higher than the
    /// store's, else the new latest index, so no blocking query waits on an index that went
    /// back. Runs on the writer between group commits; every table's watchers are woken.
    pub async fn restore(&self, pairs: Vec<KvPair>) -> Result<u64, StateError> {
        let copy = MemoryKv::new();
        let mut batch = WriteBatch::new();
        for pair in &pairs {
            batch.put(pair.key.clone(), pair.value.clone());
        }
        copy.apply(batch).await?;
        let copy: Arc<dyn Kv> = Arc::new(copy);
        match copy.get(META_SCHEMA_KEY).await? {
            Some(found) if found == SCHEMA_VERSION.to_string().as_bytes() => {}
            Some(found) => {
                return Err(StateError::Schema {
                    found: String::from_utf8_lossy(&found).into_owned(),
                    supported: SCHEMA_VERSION,
                });
            }
            None => {
                return Err(StateError::Invalid {
                    field: "snapshot",
                    reason: "it holds no schema marker (m/schema): not a drover state".to_owned(),
                });
            }
        }
        load_indexes(copy.as_ref()).await?;
        (self.loader)(copy).await?;
        let (reply, answer) = oneshot::channel();
        self.queue
            .send(WriteRequest::Restore(pairs, reply))
            .await
            .map_err(|_| StateError::Closed)?;
        answer.await.map_err(|_| StateError::Closed)?
    }

    /// Publishes events another store wrote with its batches to the shared backend (their
    /// JSON, as [`WriteBatch::events`] holds it), once this store has reloaded their state.
    pub fn publish_shared_events(&self, encoded: &[u8]) -> Result<(), serde_json::Error> {
        let events: Vec<crate::events::Event> = serde_json::from_slice(encoded)?;
        self.events.publish(events);
        Ok(())
    }

    /// Subscribes to the event stream from `from_index` (0: the newest batches still buffered, then new ones).
    pub fn subscribe_events(&self, from_index: u64, filter: EventFilter) -> EventSubscription {
        self.events.subscribe(from_index, filter)
    }

    /// Whether the writer still takes writes (false once it stopped or was shut down).
    pub fn is_writable(&self) -> bool {
        !self.queue.is_closed()
    }

    /// The writer's counters.
    pub fn stats(&self) -> CommitStats {
        CommitStats {
            transactions: self.counters.transactions.load(Ordering::Relaxed),
            writes: self.counters.writes.load(Ordering::Relaxed),
            largest_group: self.counters.largest_group.load(Ordering::Relaxed),
        }
    }

    /// Commits what is queued, stops the writer and releases the backend (for the embedded
    /// backend: closes the file). Later writes fail with [`StateError::Closed`].
    pub async fn shutdown(&self) {
        self.kv_for_reads
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        let (done, finished) = oneshot::channel();
        if self.queue.send(WriteRequest::Shutdown(done)).await.is_ok() {
            // An error means the writer already stopped, which is what was asked.
            let _ = finished.await;
        }
    }
}

struct Writer<S> {
    kv: Arc<dyn Kv>,
    receiver: mpsc::Receiver<WriteRequest<S>>,
    published: watch::Sender<Arc<Committed<S>>>,
    table_watchers: Arc<[watch::Sender<u64>; TABLE_COUNT]>,
    events: Arc<EventBuffer>,
    counters: Arc<CommitCounters>,
    max_writes_per_commit: usize,
    max_ops_per_batch: Option<usize>,
    loader: Loader<S>,
    /// The backend revision the published state was built from; every batch is guarded by it.
    revision: u64,
}

impl<S: Clone + Send + Sync + 'static> Writer<S> {
    async fn run(mut self) {
        let mut shutdown_reply = None;
        while shutdown_reply.is_none() {
            let Some(first) = self.receiver.recv().await else {
                break;
            };
            let mut group = VecDeque::new();
            let mut next = Some(first);
            let mut reloads = Vec::new();
            let mut restore = None;
            while let Some(request) = next.take() {
                match request {
                    WriteRequest::Mutate(mutation) => group.push_back(mutation),
                    WriteRequest::Reload(reply) => reloads.push(reply),
                    WriteRequest::Restore(pairs, reply) => {
                        // The writes queued before it commit first; those after, on the
                        // restored state.
                        restore = Some((pairs, reply));
                        break;
                    }
                    WriteRequest::Shutdown(reply) => {
                        shutdown_reply = Some(reply);
                        break;
                    }
                }
                if group.len() < self.max_writes_per_commit {
                    next = self.receiver.try_recv().ok();
                }
            }
            // Remote changes first: the writes queued with them are computed on the newer state.
            if !reloads.is_empty() {
                let result = self.reload().await;
                for reply in reloads {
                    let _ = reply.send(match &result {
                        Ok(()) => Ok(()),
                        Err(error) => Err(StateError::Reload(error.to_string())),
                    });
                }
            }
            // A backend with a cap on operations per batch may need several transactions.
            while !group.is_empty() {
                self.commit_group(&mut group).await;
            }
            if let Some((pairs, reply)) = restore {
                let _ = reply.send(self.restore(pairs).await);
            }
        }
        self.receiver.close();
        // Writes queued behind the shutdown are refused; dropping them tells their callers.
        while self.receiver.try_recv().is_ok() {}
        let Writer { kv, .. } = self;
        drop(kv);
        if let Some(reply) = shutdown_reply {
            let _ = reply.send(());
        }
    }

    /// Rebuilds the published state from the backend when its revision moved past the one the
    /// published state was built from, and wakes the watchers of every table whose index moved.
    async fn reload(&mut self) -> Result<(), StateError> {
        let revision = self.kv.revision().await?;
        if revision == self.revision {
            return Ok(());
        }
        let indexes = load_indexes(self.kv.as_ref()).await?;
        let data = (self.loader)(Arc::clone(&self.kv)).await?;
        let previous = self.published.borrow().indexes;
        self.published
            .send_replace(Arc::new(Committed { indexes, data }));
        self.revision = revision;
        for table in Table::ALL {
            if indexes.table(table) != previous.table(table) {
                self.table_watchers[table.position()].send_replace(indexes.table(table));
            }
        }
        Ok(())
    }

    /// Replaces the backend's keyspace with `pairs` under indexes that only move forward (see
    /// [`Engine::restore`]), then publishes the state loaded from it.
    async fn restore(&mut self, mut pairs: Vec<KvPair>) -> Result<u64, StateError> {
        let current = self.published.borrow().indexes;
        let mut restored = Indexes::default();
        let index_of = |pairs: &[KvPair], key: &[u8]| -> Result<u64, StateError> {
            pairs
                .iter()
                .find(|pair| pair.key == key)
                .map_or(Ok(0), |pair| decode_index(&pair.value))
        };
        let snapshot_latest = index_of(&pairs, META_LATEST_INDEX_KEY)?;
        restored.latest = snapshot_latest.max(current.latest + 1);
        for table in Table::ALL {
            let snapshot_index = index_of(&pairs, &table.index_key())?;
            restored.tables[table.position()] = if snapshot_index > current.table(table) {
                snapshot_index
            } else {
                restored.latest
            };
        }
        pairs.retain(|pair| {
            pair.key != META_LATEST_INDEX_KEY && !pair.key.starts_with(META_TABLE_INDEX_PREFIX)
        });
        pairs.push(KvPair {
            key: META_LATEST_INDEX_KEY.to_vec(),
            value: restored.latest.to_be_bytes().to_vec(),
        });
        for table in Table::ALL {
            pairs.push(KvPair {
                key: table.index_key(),
                value: restored.table(table).to_be_bytes().to_vec(),
            });
        }
        pairs.sort_by(|a, b| a.key.cmp(&b.key));
        let revision = self.kv.replace_all(pairs, Some(self.revision)).await?;
        let data = (self.loader)(Arc::clone(&self.kv)).await?;
        let indexes = load_indexes(self.kv.as_ref()).await?;
        self.revision = revision;
        self.published
            .send_replace(Arc::new(Committed { indexes, data }));
        for table in Table::ALL {
            self.table_watchers[table.position()].send_replace(indexes.table(table));
        }
        Ok(indexes.latest())
    }

    /// Applies writes from the front of `group` in one backend transaction: all of them, or as
    /// many as fit the backend's cap on operations per batch (at least one; a write larger than
    /// every earlier one in the batch may still overshoot the cap, so backends should report
    /// their cap with room for one write).
    async fn commit_group(&mut self, group: &mut VecDeque<Mutation<S>>) {
        let current = Arc::clone(&self.published.borrow());
        let mut working: Committed<S> = (*current).clone();
        let mut batch = WriteBatch::new();
        let mut events = Vec::new();
        let mut touched = [false; TABLE_COUNT];
        let mut completions = Vec::with_capacity(group.len());
        let mut group_size = 0_u64;
        let mut largest_write_ops = 0_usize;
        while let Some(mutation) = group.pop_front() {
            // Stop before a write that would not fit if it were as large as the largest so far
            // (a write's size is known only once it has run, and it cannot be undone then).
            if group_size > 0
                && self.max_ops_per_batch.is_some_and(|limit| {
                    batch.ops.len() + largest_write_ops + META_OPS_PER_BATCH > limit
                })
            {
                group.push_front(mutation);
                break;
            }
            group_size += 1;
            let mut context = WriteContext::new(working.indexes.latest + 1);
            let (succeeded, completion) = mutation(&mut working.data, &mut context);
            completions.push(completion);
            if !succeeded || !context.claimed {
                continue;
            }
            working.indexes.latest = context.index;
            for table in Table::ALL {
                if context.touched[table.position()] {
                    working.indexes.tables[table.position()] = context.index;
                    touched[table.position()] = true;
                }
            }
            largest_write_ops = largest_write_ops.max(context.ops.len());
            batch.ops.append(&mut context.ops);
            events.append(&mut context.events);
        }

        let changed = working.indexes.latest != current.indexes.latest;
        if changed {
            batch.put(
                META_LATEST_INDEX_KEY.to_vec(),
                working.indexes.latest.to_be_bytes().to_vec(),
            );
            for table in Table::ALL {
                if touched[table.position()] {
                    batch.put(
                        table.index_key(),
                        working.indexes.table(table).to_be_bytes().to_vec(),
                    );
                }
            }
            batch.expected_revision = Some(self.revision);
            if self.kv.shares_events() && !events.is_empty() {
                match serde_json::to_vec(&events) {
                    Ok(encoded) => batch.events = Some(encoded),
                    Err(error) => tracing::warn!(%error, "the batch's events cannot be shared"),
                }
            }
            match self.kv.apply(batch).await {
                Ok(revision) => self.revision = revision,
                Err(error) => {
                    tracing::error!(%error, writes = group_size, "state group commit failed");
                    // Another store wrote first: catch up before answering, so the callers'
                    // next write is computed on the newer state and can succeed.
                    if matches!(error, KvError::RevisionMismatch { .. })
                        && let Err(error) = self.reload().await
                    {
                        tracing::error!(%error, "reloading the state after a lost race failed");
                    }
                    let shared: Arc<KvError> = Arc::new(error);
                    for completion in completions {
                        completion(Err(StateError::Commit(Arc::clone(&shared))));
                    }
                    return;
                }
            }
            self.counters.transactions.fetch_add(1, Ordering::Relaxed);
        }

        let indexes = working.indexes;
        self.published.send_replace(Arc::new(working));
        for table in Table::ALL {
            if touched[table.position()] {
                self.table_watchers[table.position()].send_replace(indexes.table(table));
            }
        }
        self.events.publish(events);
        self.counters
            .writes
            .fetch_add(group_size, Ordering::Relaxed);
        self.counters
            .largest_group
            .fetch_max(group_size, Ordering::Relaxed);
        for completion in completions {
            completion(Ok(()));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use super::*;
    use crate::embedded::EmbeddedKv;
    use crate::events::{EventType, Topic};
    use crate::kv::{KvFuture, KvPair, MemoryKv, Revision};

    /// A toy state: named counters, persisted in the `Nodes` table.
    #[derive(Debug, Clone, Default)]
    struct Counters {
        values: Arc<BTreeMap<String, u64>>,
    }

    async fn load_counters(kv: Arc<dyn Kv>) -> Result<Counters, StateError> {
        let records = load_table::<u64>(kv.as_ref(), Table::Nodes).await?;
        Ok(Counters {
            values: Arc::new(
                records
                    .into_iter()
                    .map(|(key, value)| (String::from_utf8_lossy(&key).into_owned(), value))
                    .collect(),
            ),
        })
    }

    async fn set(engine: &Engine<Counters>, name: &str, value: u64) -> Result<u64, StateError> {
        let name = name.to_owned();
        engine
            .write(move |state, context| {
                let index = context.index();
                context.put(Table::Nodes, name.as_bytes(), &value)?;
                context.emit(Event {
                    topic: Topic::Node,
                    event_type: EventType::NodeRegistration,
                    key: name.clone(),
                    namespace: String::new(),
                    filter_keys: Vec::new(),
                    index: 0,
                    payload: crate::events::EventPayload::from_value(
                        &serde_json::json!({ "Node": { "ID": name, "Value": value } }),
                    )
                    .unwrap(),
                });
                Arc::make_mut(&mut state.values).insert(name, value);
                Ok(index)
            })
            .await
    }

    async fn memory_engine() -> Engine<Counters> {
        Engine::start(
            Arc::new(MemoryKv::new()),
            EngineOptions::default(),
            load_counters,
        )
        .await
        .unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_burst_of_concurrent_writes_is_a_handful_of_durable_transactions() {
        let directory = tempfile::tempdir().unwrap();
        let kv = Arc::new(EmbeddedKv::open_in_dir(directory.path()).await.unwrap());
        let engine = Arc::new(
            Engine::start(kv.clone(), EngineOptions::default(), load_counters)
                .await
                .unwrap(),
        );
        let revision_before = kv.revision().await.unwrap();
        let started = std::time::Instant::now();
        let writers: Vec<_> = (0..1000_u64)
            .map(|number| {
                let engine = Arc::clone(&engine);
                tokio::spawn(
                    async move { set(&engine, &format!("alloc-{number:04}"), number).await },
                )
            })
            .collect();
        let mut indexes = Vec::new();
        for writer in writers {
            indexes.push(writer.await.unwrap().unwrap());
        }
        let elapsed = started.elapsed();
        let stats = engine.stats();
        let revision_after = kv.revision().await.unwrap();
        println!(
            "1000 concurrent writes: {} transactions, largest group {}, {:?}",
            stats.transactions, stats.largest_group, elapsed
        );
        // Every write got its own index, 1..=1000.
        indexes.sort_unstable();
        assert_eq!(indexes, (1..=1000).collect::<Vec<_>>());
        assert_eq!(stats.writes, 1000);
        // The backend saw exactly the transactions the writer counted, and far fewer than 1000.
        assert_eq!(revision_after - revision_before, stats.transactions);
        assert!(
            stats.transactions <= 100,
            "expected group commits, got {} transactions for 1000 writes",
            stats.transactions
        );
        assert!(stats.largest_group >= 10);
        assert_eq!(engine.snapshot().data.values.len(), 1000);
        assert_eq!(engine.indexes().latest(), 1000);
        assert_eq!(engine.indexes().table(Table::Nodes), 1000);
        assert_eq!(engine.indexes().table(Table::Jobs), 0);
    }

    #[tokio::test]
    async fn state_and_indexes_are_reloaded_from_the_backend() {
        let directory = tempfile::tempdir().unwrap();
        {
            let kv = Arc::new(EmbeddedKv::open_in_dir(directory.path()).await.unwrap());
            let engine = Engine::start(kv, EngineOptions::default(), load_counters)
                .await
                .unwrap();
            set(&engine, "a", 1).await.unwrap();
            set(&engine, "b", 2).await.unwrap();
            set(&engine, "a", 3).await.unwrap();
            engine.shutdown().await;
            assert!(matches!(
                set(&engine, "c", 4).await,
                Err(StateError::Closed)
            ));
        }
        let kv = Arc::new(EmbeddedKv::open_in_dir(directory.path()).await.unwrap());
        let engine = Engine::start(kv, EngineOptions::default(), load_counters)
            .await
            .unwrap();
        let snapshot = engine.snapshot();
        assert_eq!(snapshot.data.values.get("a"), Some(&3));
        assert_eq!(snapshot.data.values.get("b"), Some(&2));
        assert_eq!(snapshot.indexes.latest(), 3);
        assert_eq!(snapshot.indexes.table(Table::Nodes), 3);
        assert_eq!(set(&engine, "d", 5).await.unwrap(), 4);
    }

    #[tokio::test]
    async fn failed_and_empty_writes_take_no_index_and_indexes_only_grow() {
        let engine = memory_engine().await;
        assert_eq!(set(&engine, "a", 1).await.unwrap(), 1);
        let refused = engine
            .write(|_state, _context| -> Result<(), StateError> {
                Err(StateError::NotFound {
                    kind: "node",
                    id: "missing".to_owned(),
                })
            })
            .await;
        assert!(matches!(refused, Err(StateError::NotFound { .. })));
        let unchanged = engine.write(|_state, _context| Ok(())).await;
        assert!(unchanged.is_ok());
        assert_eq!(set(&engine, "b", 2).await.unwrap(), 2);
        let mut previous = 0;
        for value in 0..20 {
            let index = set(&engine, "c", value).await.unwrap();
            assert!(index > previous);
            previous = index;
        }
        assert_eq!(engine.indexes().latest(), previous);
    }

    #[tokio::test(start_paused = true)]
    async fn a_blocking_wait_wakes_on_a_change_to_its_table_and_times_out_otherwise() {
        let engine = Arc::new(memory_engine().await);
        set(&engine, "a", 1).await.unwrap();
        let started = tokio::time::Instant::now();

        // Nothing changes: the wait ends at its deadline with the unchanged index.
        let outcome = engine
            .wait_for_change(&[Table::Nodes], 1, started + Duration::from_secs(300))
            .await;
        assert_eq!(
            outcome,
            WatchOutcome {
                index: 1,
                changed: false
            }
        );
        assert_eq!(started.elapsed(), Duration::from_secs(300));

        // An already newer index answers at once.
        let outcome = engine
            .wait_for_change(&[Table::Nodes], 0, tokio::time::Instant::now())
            .await;
        assert!(outcome.changed);

        // A write to another table does not end the wait; a write to the watched one does.
        let waiter = {
            let engine = Arc::clone(&engine);
            tokio::spawn(async move {
                let deadline = tokio::time::Instant::now() + Duration::from_secs(300);
                engine.wait_for_change(&[Table::Allocs], 1, deadline).await
            })
        };
        tokio::time::sleep(Duration::from_secs(10)).await;
        set(&engine, "b", 2).await.unwrap();
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert!(!waiter.is_finished());
        let write_started = tokio::time::Instant::now();
        engine
            .write(|_state, context| {
                context.touch(Table::Allocs);
                Ok(())
            })
            .await
            .unwrap();
        let outcome = waiter.await.unwrap();
        assert_eq!(
            outcome,
            WatchOutcome {
                index: 3,
                changed: true
            }
        );
        assert_eq!(write_started.elapsed(), Duration::ZERO);
    }

    #[tokio::test]
    async fn writes_publish_events_with_their_index() {
        let engine = memory_engine().await;
        let mut subscription = engine.subscribe_events(0, EventFilter::default());
        set(&engine, "a", 1).await.unwrap();
        set(&engine, "b", 2).await.unwrap();
        let first = subscription.next_batch().await.unwrap();
        assert_eq!((first.index, first.events[0].key.as_str()), (1, "a"));
        let second = subscription.next_batch().await.unwrap();
        assert_eq!((second.index, second.events[0].index), (2, 2));
    }

    #[tokio::test]
    async fn two_engines_on_one_backend_catch_up_by_reload_and_refuse_stale_writes() {
        let kv = Arc::new(MemoryKv::new());
        let first = Engine::start(kv.clone(), EngineOptions::default(), load_counters)
            .await
            .unwrap();
        let second = Arc::new(
            Engine::start(kv.clone(), EngineOptions::default(), load_counters)
                .await
                .unwrap(),
        );
        assert_eq!(set(&first, "a", 1).await.unwrap(), 1);

        // The second engine has not seen it: its write loses the race, changes nothing, and
        // the engine reloads, so its next write lands after the first engine's.
        let error = set(&second, "b", 2).await.unwrap_err();
        assert!(error.to_string().contains("revision mismatch"), "{error}");
        assert_eq!(second.snapshot().data.values.get("a"), Some(&1));
        assert_eq!(second.snapshot().data.values.get("b"), None);
        assert_eq!(set(&second, "b", 2).await.unwrap(), 2);

        // An explicit reload (what a backend watch triggers) wakes blocking waits on the tables
        // that moved, with the other engine's index.
        let waiter = {
            let second = Arc::clone(&second);
            tokio::spawn(async move {
                let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
                second.wait_for_change(&[Table::Nodes], 2, deadline).await
            })
        };
        first.reload().await.unwrap();
        assert_eq!(set(&first, "c", 3).await.unwrap(), 3);
        second.reload().await.unwrap();
        assert_eq!(
            waiter.await.unwrap(),
            WatchOutcome {
                index: 3,
                changed: true
            }
        );
        assert_eq!(second.snapshot().data.values.len(), 3);
        // A reload with nothing new changes nothing.
        second.reload().await.unwrap();
        assert_eq!(second.indexes().latest(), 3);
    }

    #[tokio::test]
    async fn a_restore_replaces_everything_and_indexes_only_move_forward() {
        let directory = tempfile::tempdir().unwrap();
        let source = memory_engine().await;
        for (name, value) in [("a", 1), ("b", 2), ("c", 3)] {
            set(&source, name, value).await.unwrap();
        }
        let contents = source.read_all(false).await.unwrap();
        assert_eq!(contents.backend, "memory");

        // A target on the embedded backend with a history of its own, further along.
        let kv = Arc::new(EmbeddedKv::open_in_dir(directory.path()).await.unwrap());
        let target = Arc::new(
            Engine::start(kv.clone(), EngineOptions::default(), load_counters)
                .await
                .unwrap(),
        );
        for number in 0..5 {
            set(&target, &format!("old-{number}"), number)
                .await
                .unwrap();
        }
        let waiter = {
            let target = Arc::clone(&target);
            tokio::spawn(async move {
                let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
                target.wait_for_change(&[Table::Nodes], 5, deadline).await
            })
        };

        // A record that does not decode: refused, and nothing changed.
        let mut broken = contents.pairs.clone();
        broken.push(crate::kv::KvPair {
            key: b"t/nodes/d".to_vec(),
            value: b"not json".to_vec(),
        });
        broken.sort_by(|a, b| a.key.cmp(&b.key));
        let error = target.restore(broken).await.unwrap_err();
        assert!(
            error
                .to_string()
                .contains("cannot decode stored nodes record d"),
            "{error}"
        );
        assert_eq!(target.snapshot().data.values.len(), 5);
        assert_eq!(target.indexes().latest(), 5);

        let index = target.restore(contents.pairs.clone()).await.unwrap();
        let values = &target.snapshot().data.values;
        assert_eq!(values.len(), 3);
        assert_eq!(values.get("c"), Some(&3));
        // The snapshot's index (3) is behind the target's (5): the tables move past it.
        assert_eq!(index, 6);
        assert_eq!(target.indexes().table(Table::Nodes), 6);
        assert_eq!(waiter.await.unwrap().index, 6);
        // Durable: a new engine on the same file reads the restored state.
        assert_eq!(set(&target, "d", 4).await.unwrap(), 7);
        target.shutdown().await;
        drop(target);
        drop(kv);
        let kv = Arc::new(EmbeddedKv::open_in_dir(directory.path()).await.unwrap());
        let reopened = Engine::start(kv, EngineOptions::default(), load_counters)
            .await
            .unwrap();
        assert_eq!(reopened.snapshot().data.values.len(), 4);
        assert_eq!(reopened.indexes().latest(), 7);

        // Into a fresh store the snapshot's indexes come along as they were.
        let fresh = memory_engine().await;
        assert_eq!(fresh.restore(contents.pairs).await.unwrap(), 3);
        assert_eq!(fresh.indexes().table(Table::Nodes), 3);
    }

    /// A backend whose commits always fail.
    struct FailingKv {
        inner: MemoryKv,
    }

    impl Kv for FailingKv {
        fn get<'a>(&'a self, key: &'a [u8]) -> KvFuture<'a, Option<Vec<u8>>> {
            self.inner.get(key)
        }
        fn scan(&self, range: KeyRange) -> KvFuture<'_, Vec<KvPair>> {
            self.inner.scan(range)
        }
        fn apply(&self, _batch: WriteBatch) -> KvFuture<'_, Revision> {
            Box::pin(async {
                Err(KvError::Backend {
                    operation: "commit",
                    reason: "disk full".to_owned(),
                })
            })
        }
        fn revision(&self) -> KvFuture<'_, Revision> {
            self.inner.revision()
        }
    }

    /// A backend with a cap on operations per batch that records the size of every batch.
    struct CappedKv {
        inner: MemoryKv,
        cap: usize,
        batch_sizes: std::sync::Mutex<Vec<usize>>,
    }

    impl Kv for CappedKv {
        fn get<'a>(&'a self, key: &'a [u8]) -> KvFuture<'a, Option<Vec<u8>>> {
            self.inner.get(key)
        }
        fn scan(&self, range: KeyRange) -> KvFuture<'_, Vec<KvPair>> {
            self.inner.scan(range)
        }
        fn apply(&self, batch: WriteBatch) -> KvFuture<'_, Revision> {
            self.batch_sizes.lock().unwrap().push(batch.ops.len());
            if batch.ops.len() > self.cap {
                return Box::pin(async {
                    Err(KvError::Backend {
                        operation: "commit",
                        reason: "too many operations in one transaction".to_owned(),
                    })
                });
            }
            Box::pin(async move {
                // Take as long as a small fsync, so writes queue up behind the commit.
                tokio::time::sleep(Duration::from_millis(2)).await;
                self.inner.apply(batch).await
            })
        }
        fn revision(&self) -> KvFuture<'_, Revision> {
            self.inner.revision()
        }
        fn max_ops_per_batch(&self) -> Option<usize> {
            Some(self.cap)
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn groups_are_split_to_fit_a_backend_cap_on_operations() {
        let kv = Arc::new(CappedKv {
            inner: MemoryKv::new(),
            // Room for the per-table index keys the writer reserves besides the writes.
            cap: 50,
            batch_sizes: std::sync::Mutex::new(Vec::new()),
        });
        let engine = Arc::new(
            Engine::start(kv.clone(), EngineOptions::default(), load_counters)
                .await
                .unwrap(),
        );
        let writers: Vec<_> = (0..300_u64)
            .map(|number| {
                let engine = Arc::clone(&engine);
                tokio::spawn(async move { set(&engine, &format!("k{number}"), number).await })
            })
            .collect();
        for writer in writers {
            writer.await.unwrap().unwrap();
        }
        let sizes = kv.batch_sizes.lock().unwrap().clone();
        assert!(sizes.iter().all(|size| *size <= 50), "{sizes:?}");
        // Still grouped: far fewer transactions than writes.
        assert!(sizes.len() < 300, "{} transactions", sizes.len());
        assert!(sizes.iter().any(|size| *size > 20), "{sizes:?}");
        assert_eq!(engine.snapshot().data.values.len(), 300);
        assert_eq!(engine.indexes().latest(), 300);
    }

    #[tokio::test]
    async fn a_failed_commit_is_reported_and_leaves_the_state_unchanged() {
        let inner = MemoryKv::new();
        let mut schema = WriteBatch::new();
        schema.put(
            META_SCHEMA_KEY.to_vec(),
            SCHEMA_VERSION.to_string().into_bytes(),
        );
        inner.apply(schema).await.unwrap();
        let engine = Engine::start(
            Arc::new(FailingKv { inner }),
            EngineOptions::default(),
            load_counters,
        )
        .await
        .unwrap();
        let error = set(&engine, "a", 1).await.unwrap_err();
        assert!(error.to_string().contains("disk full"), "{error}");
        assert!(engine.snapshot().data.values.is_empty());
        assert_eq!(engine.indexes().latest(), 0);
    }

    #[tokio::test]
    async fn a_store_from_a_newer_schema_is_refused() {
        let kv = MemoryKv::new();
        let mut batch = WriteBatch::new();
        batch.put(META_SCHEMA_KEY.to_vec(), b"99".to_vec());
        kv.apply(batch).await.unwrap();
        let error = Engine::start(Arc::new(kv), EngineOptions::default(), load_counters)
            .await
            .unwrap_err();
        assert!(matches!(error, StateError::Schema { .. }), "{error}");
    }
}
