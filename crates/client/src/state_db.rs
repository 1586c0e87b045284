//! The client's persisted state: an embedded, crash-safe redb file at
//! `<data_dir>/client/state.db`.
//!
//! What is kept (DESIGN invariant 2: written *before* it is acted on or reported):
//! - per alloc: the alloc record (the allocation as last received, plus runner bookkeeping);
//! - per task, in two parts: `local` (hook states and `done` flags, restart tracker counters,
//!   the shim handle, the run-loop-finished flag) and `state` (the Nomad `TaskState` with its
//!   events).
//!
//! Records are JSON inside a versioned envelope, so a newer drover can read an older file and an
//! older one refuses a newer file instead of misreading it. Writes are redb transactions
//! (copy-on-write, fsync on a durable commit): a crash leaves the previous or the new record,
//! never a torn one. The store is generic over the record types so it knows nothing of runners.
//!
//! **Group commit.** Every write call returns only once its write is committed (and, unless it
//! is a relaxed write, flushed to disk), exactly as if it had its own transaction; but writers
//! that arrive while a transaction is being committed queue up, and the next one to find no
//! commit in progress (the leader) commits every queued write in one transaction, in arrival
//! order, with one fsync, then wakes them all. With a hundred task runners starting at once this
//! turns hundreds of fsyncs into a few. A failed group commit fails every write in it. Relaxed
//! writes (not flushed on their own) do not even wait for a commit in progress: its leader
//! commits them right after, before it steps down, and reads wait for queued writes first.
//!
//! **After an I/O error** (a full disk, say) redb refuses every later transaction until the
//! file is opened again. An operation that fails with an I/O error therefore reopens the file
//! (once the disk has room again the reopen succeeds) and is tried once more, so a client whose
//! disk filled for a while goes on recording its tasks when it is freed.
//!
//! **Not** the server's state store (crate `state`), and not a cache: it is read on restore only.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, RwLock};

use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Version of the record envelope this build writes.
pub const STATE_SCHEMA_VERSION: u32 = 1;

const ALLOCS: TableDefinition<'_, &str, &[u8]> = TableDefinition::new("allocs");
const TASKS: TableDefinition<'_, &str, &[u8]> = TableDefinition::new("tasks");

/// The two per-task records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskRecordPart {
    /// Runner-local state: hook states, restart counters, shim handle.
    Local,
    /// The Nomad `TaskState` (state, failed, restarts, events).
    State,
}

impl TaskRecordPart {
    fn as_str(self) -> &'static str {
        match self {
            TaskRecordPart::Local => "local",
            TaskRecordPart::State => "state",
        }
    }
}

/// Errors of the client state db. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum StateDbError {
    #[error(
        "cannot open client state {path:?}: {source}; to start over, stop the agent and move the \
         file aside (tasks still running will then not be re-attached and must be stopped by hand)"
    )]
    Open {
        path: PathBuf,
        #[source]
        source: Box<redb::Error>,
    },
    #[error("cannot create the client state dir for {path:?}")]
    CreateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("client state {path:?}: {operation} failed")]
    Storage {
        path: PathBuf,
        operation: &'static str,
        #[source]
        source: Box<redb::Error>,
    },
    #[error("client state {path:?}: record {key:?} cannot be encoded or decoded")]
    Codec {
        path: PathBuf,
        key: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("client state {path:?}: {operation} failed: {message}")]
    GroupCommit {
        path: PathBuf,
        operation: &'static str,
        message: String,
    },
    #[error(
        "client state {path:?}: record {key:?} has schema version {found}, newer than the {supported} this drover understands"
    )]
    NewerSchema {
        path: PathBuf,
        key: String,
        found: u32,
        supported: u32,
    },
}

#[derive(Serialize)]
struct EnvelopeOut<'a, T> {
    version: u32,
    record: &'a T,
}

#[derive(serde::Deserialize)]
struct EnvelopeIn {
    version: u32,
    record: serde_json::Value,
}

/// The two tables, as a queued write names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RecordTable {
    Allocs,
    Tasks,
}

/// One write waiting for a group commit.
enum WriteOperation {
    Put {
        table: RecordTable,
        key: String,
        bytes: Vec<u8>,
    },
    /// An alloc record and every task record of it.
    DeleteAlloc { alloc_id: String },
    /// Nothing: a reader's place in the queue, to wait until every write before it is
    /// committed.
    Barrier,
}

/// How long a write call waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WriteWait {
    /// Until committed and flushed to disk.
    Durable,
    /// Until committed (visible to readers, not flushed).
    Committed,
    /// Not at all while another writer is committing: the write is queued, and that writer
    /// commits it (unflushed, or with the next flush) before it steps down.
    Queued,
}

/// How a queued write ended: set once by the leader that committed it.
type WriteOutcome = Arc<OnceLock<Result<(), (&'static str, String)>>>;

struct QueuedWrite {
    operation: WriteOperation,
    durable: bool,
    /// Shared with the writer while it waits; only the queue holds it otherwise.
    outcome: WriteOutcome,
}

impl QueuedWrite {
    fn has_waiter(&self) -> bool {
        Arc::strong_count(&self.outcome) > 1
    }
}

#[derive(Default)]
struct CommitQueue {
    pending: Vec<QueuedWrite>,
    /// A leader is committing a group right now.
    committing: bool,
}

/// A storage operation that failed: what was being done, and redb's error.
type Failed = (&'static str, redb::Error);

/// Maps an error of the step `operation` to a [`Failed`].
fn failed<E: Into<redb::Error>>(operation: &'static str) -> impl Fn(E) -> Failed {
    move |error| (operation, error.into())
}

/// The client state database.
pub struct StateDb {
    /// `None` only when a reopen after an I/O error failed (the next operation tries again).
    database: RwLock<Option<Database>>,
    /// Bumped by each reopen, so writers that failed together reopen once.
    opened: AtomicU64,
    /// Whether the database is a file that can be opened again (not the in-memory one).
    reopenable: bool,
    path: PathBuf,
    queue: Mutex<CommitQueue>,
    /// Signalled whenever a leader finishes a group.
    group_done: Condvar,
    transactions: AtomicU64,
    writes: AtomicU64,
}

impl std::fmt::Debug for StateDb {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("StateDb")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

fn lock_queue(queue: &Mutex<CommitQueue>) -> MutexGuard<'_, CommitQueue> {
    match queue.lock() {
        Ok(guard) => guard,
        // The queue is plain data (a leader never panics while holding it); keep going.
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// Runs `wait` (which blocks on disk and on other writers) without starving the async runtime:
/// on a worker of a multi-threaded tokio runtime the worker hands its other tasks to another
/// thread first, so a hundred task runners waiting on one group commit do not stall the agent
/// (and can all join the same group). Elsewhere (plain threads, blocking-pool threads,
/// current-thread runtimes in tests) it just blocks.
fn block_without_stalling_runtime<T>(wait: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(wait)
        }
        _ => wait(),
    }
}

impl StateDb {
    /// Opens (or creates) the db file at `path`, creating its parent dir.
    pub fn open(path: &Path) -> Result<Self, StateDbError> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|source| StateDbError::CreateDir {
                path: path.to_path_buf(),
                source,
            })?;
        }
        let database = Database::create(path).map_err(|source| StateDbError::Open {
            path: path.to_path_buf(),
            source: Box::new(source.into()),
        })?;
        let state_db = StateDb::from_database(database, path.to_path_buf(), true);
        state_db.ensure_tables()?;
        Ok(state_db)
    }

    fn from_database(database: Database, path: PathBuf, reopenable: bool) -> Self {
        StateDb {
            database: RwLock::new(Some(database)),
            opened: AtomicU64::new(0),
            reopenable,
            path,
            queue: Mutex::new(CommitQueue::default()),
            group_done: Condvar::new(),
            transactions: AtomicU64::new(0),
            writes: AtomicU64::new(0),
        }
    }

    /// Write transactions committed since open (each group commit is one).
    pub fn transactions_committed(&self) -> u64 {
        self.transactions.load(Ordering::Relaxed)
    }

    /// Writes (puts and deletes) committed since open.
    pub fn writes_committed(&self) -> u64 {
        self.writes.load(Ordering::Relaxed)
    }

    /// A db held in memory (tests, `-dev` without a data dir).
    pub fn in_memory() -> Result<Self, StateDbError> {
        let path = PathBuf::from(":memory:");
        let database = redb::Builder::new()
            .create_with_backend(redb::backends::InMemoryBackend::new())
            .map_err(|source| StateDbError::Open {
                path: path.clone(),
                source: Box::new(source.into()),
            })?;
        let state_db = StateDb::from_database(database, path, false);
        state_db.ensure_tables()?;
        Ok(state_db)
    }

    /// The file this db lives in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn storage_error<E: Into<redb::Error>>(
        &self,
        operation: &'static str,
    ) -> impl FnOnce(E) -> StateDbError + '_ {
        move |source| StateDbError::Storage {
            path: self.path.clone(),
            operation,
            source: Box::new(source.into()),
        }
    }

    fn ensure_tables(&self) -> Result<(), StateDbError> {
        self.with_database(|database| {
            let transaction = database.begin_write().map_err(failed("begin write"))?;
            transaction
                .open_table(ALLOCS)
                .map_err(failed("open allocs table"))?;
            transaction
                .open_table(TASKS)
                .map_err(failed("open tasks table"))?;
            transaction.commit().map_err(failed("commit"))
        })
        .map_err(|(operation, source)| self.storage_error(operation)(source))
    }

    /// Runs `operation` on the database; when it fails with an I/O error, opens the file again
    /// (unless another caller already did since this one started) and runs it once more.
    fn with_database<T>(
        &self,
        operation: impl Fn(&Database) -> Result<T, Failed>,
    ) -> Result<T, Failed> {
        let generation = self.opened.load(Ordering::Acquire);
        let first = self.run_on_database(&operation);
        match first {
            Err((_, redb::Error::Io(_) | redb::Error::PreviousIo)) if self.reopenable => {
                self.reopen(generation)?;
                self.run_on_database(&operation)
            }
            other => other,
        }
    }

    fn run_on_database<T>(
        &self,
        operation: &impl Fn(&Database) -> Result<T, Failed>,
    ) -> Result<T, Failed> {
        let guard = self
            .database
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match guard.as_ref() {
            Some(database) => operation(database),
            None => Err(("open", redb::Error::PreviousIo)),
        }
    }

    /// Closes the file and opens it again, if no reopen happened since `generation`.
    fn reopen(&self, generation: u64) -> Result<(), Failed> {
        let mut guard = self
            .database
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if self.opened.load(Ordering::Acquire) != generation && guard.is_some() {
            return Ok(());
        }
        // redb holds the file locked while open: the old handle goes first.
        drop(guard.take());
        self.opened.fetch_add(1, Ordering::AcqRel);
        let database = Database::create(&self.path).map_err(failed("reopen"))?;
        tracing::warn!(path = %self.path.display(), "client state reopened after an I/O error");
        *guard = Some(database);
        Ok(())
    }

    fn encode<T: Serialize>(&self, key: &str, record: &T) -> Result<Vec<u8>, StateDbError> {
        serde_json::to_vec(&EnvelopeOut {
            version: STATE_SCHEMA_VERSION,
            record,
        })
        .map_err(|source| StateDbError::Codec {
            path: self.path.clone(),
            key: key.to_string(),
            source,
        })
    }

    fn decode<T: DeserializeOwned>(&self, key: &str, bytes: &[u8]) -> Result<T, StateDbError> {
        let codec_error = |source| StateDbError::Codec {
            path: self.path.clone(),
            key: key.to_string(),
            source,
        };
        let envelope: EnvelopeIn = serde_json::from_slice(bytes).map_err(codec_error)?;
        if envelope.version > STATE_SCHEMA_VERSION {
            return Err(StateDbError::NewerSchema {
                path: self.path.clone(),
                key: key.to_string(),
                found: envelope.version,
                supported: STATE_SCHEMA_VERSION,
            });
        }
        serde_json::from_value(envelope.record).map_err(codec_error)
    }

    fn put(&self, table: RecordTable, key: &str, bytes: &[u8]) -> Result<(), StateDbError> {
        self.write(
            WriteOperation::Put {
                table,
                key: key.to_string(),
                bytes: bytes.to_vec(),
            },
            WriteWait::Durable,
        )
    }

    /// Queues one write and returns once a group commit holding it has committed (flushed to
    /// disk for [`WriteWait::Durable`]), or at once for [`WriteWait::Queued`] when another
    /// writer is committing. See the module docs.
    fn write(&self, operation: WriteOperation, wait: WriteWait) -> Result<(), StateDbError> {
        let outcome: WriteOutcome = Arc::new(OnceLock::new());
        // A queued write while another writer commits only joins the queue: no waiting, so no
        // hand-off of the runtime worker (which costs a thread wake-up, or a new thread).
        if wait == WriteWait::Queued {
            let mut queue = lock_queue(&self.queue);
            if queue.committing {
                queue.pending.push(QueuedWrite {
                    operation,
                    durable: false,
                    outcome,
                });
                return Ok(());
            }
        }
        let result = block_without_stalling_runtime(|| {
            let mut queue = lock_queue(&self.queue);
            queue.pending.push(QueuedWrite {
                operation,
                durable: wait == WriteWait::Durable,
                outcome: Arc::clone(&outcome),
            });
            if wait == WriteWait::Queued && queue.committing {
                // The committing leader takes it before it steps down (see `lead`).
                return Ok(());
            }
            loop {
                if let Some(result) = outcome.get() {
                    return result.clone();
                }
                if queue.committing {
                    queue = match self.group_done.wait(queue) {
                        Ok(guard) => guard,
                        Err(poisoned) => poisoned.into_inner(),
                    };
                    continue;
                }
                // Our write is still queued (a finished leader would have set its outcome), so
                // the first group of this lead holds it.
                queue = self.lead(queue);
            }
        });
        result.map_err(|(operation, message)| StateDbError::GroupCommit {
            path: self.path.clone(),
            operation,
            message,
        })
    }

    /// Commits queued writes as the leader, one group per round, until the queue is empty or
    /// a waiting writer can take over (then it leads the next group itself). Writes nobody
    /// waits for ([`WriteWait::Queued`]) are therefore never left behind in the queue.
    fn lead<'queue>(
        &'queue self,
        mut queue: MutexGuard<'queue, CommitQueue>,
    ) -> MutexGuard<'queue, CommitQueue> {
        queue.committing = true;
        loop {
            let group = std::mem::take(&mut queue.pending);
            drop(queue);
            let committed = self.commit_group(&group);
            for queued in &group {
                if let (Err((operation, message)), false) = (&committed, queued.has_waiter()) {
                    tracing::error!(path = %self.path.display(), operation = *operation, error = %message, "client state write failed");
                }
                let _ = queued.outcome.set(committed.clone());
            }
            queue = lock_queue(&self.queue);
            let waiter_queued = queue.pending.iter().any(QueuedWrite::has_waiter);
            if queue.pending.is_empty() || waiter_queued {
                break;
            }
        }
        queue.committing = false;
        self.group_done.notify_all();
        queue
    }

    /// Waits until every write queued so far is committed, so that a read sees them.
    fn settle(&self) -> Result<(), StateDbError> {
        {
            let queue = lock_queue(&self.queue);
            if queue.pending.is_empty() && !queue.committing {
                return Ok(());
            }
        }
        self.write(WriteOperation::Barrier, WriteWait::Committed)
    }

    /// Applies `group` in order in one transaction, durable if any write of it is.
    fn commit_group(&self, group: &[QueuedWrite]) -> Result<(), (&'static str, String)> {
        self.with_database(|database| Self::commit_group_on(database, group))
            .map_err(|(operation, error)| (operation, error.to_string()))?;
        self.transactions.fetch_add(1, Ordering::Relaxed);
        self.writes.fetch_add(group.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    fn commit_group_on(database: &Database, group: &[QueuedWrite]) -> Result<(), Failed> {
        let mut transaction = database.begin_write().map_err(failed("begin write"))?;
        let durability = if group.iter().any(|queued| queued.durable) {
            Durability::Immediate
        } else {
            Durability::None
        };
        transaction
            .set_durability(durability)
            .map_err(failed("set durability"))?;
        {
            let mut allocs = transaction
                .open_table(ALLOCS)
                .map_err(failed("open allocs table"))?;
            let mut tasks = transaction
                .open_table(TASKS)
                .map_err(failed("open tasks table"))?;
            for queued in group {
                match &queued.operation {
                    WriteOperation::Put { table, key, bytes } => {
                        let opened = match table {
                            RecordTable::Allocs => &mut allocs,
                            RecordTable::Tasks => &mut tasks,
                        };
                        opened
                            .insert(key.as_str(), bytes.as_slice())
                            .map_err(failed("insert"))?;
                    }
                    WriteOperation::DeleteAlloc { alloc_id } => {
                        allocs.remove(alloc_id.as_str()).map_err(failed("remove"))?;
                        // Keys are "<alloc>/<task>/<part>"; '0' is the byte after '/', so this
                        // range is exactly this alloc's tasks (ids and names never contain '/').
                        let start = format!("{alloc_id}/");
                        let end = format!("{alloc_id}0");
                        tasks
                            .retain_in(start.as_str()..end.as_str(), |_, _| false)
                            .map_err(failed("remove tasks"))?;
                    }
                    WriteOperation::Barrier => {}
                }
            }
        }
        transaction.commit().map_err(failed("commit"))
    }

    fn get(
        &self,
        table: TableDefinition<'_, &str, &[u8]>,
        key: &str,
    ) -> Result<Option<Vec<u8>>, StateDbError> {
        self.settle()?;
        self.with_database(|database| {
            let transaction = database.begin_read().map_err(failed("begin read"))?;
            let opened = transaction
                .open_table(table)
                .map_err(failed("open table"))?;
            let value = opened.get(key).map_err(failed("get"))?;
            Ok(value.map(|guard| guard.value().to_vec()))
        })
        .map_err(|(operation, source)| self.storage_error(operation)(source))
    }

    /// Persists the alloc record of `alloc_id` (replacing the previous one).
    pub fn put_alloc<T: Serialize>(&self, alloc_id: &str, record: &T) -> Result<(), StateDbError> {
        let bytes = self.encode(alloc_id, record)?;
        self.put(RecordTable::Allocs, alloc_id, &bytes)
    }

    /// The alloc record of `alloc_id`, if any.
    pub fn get_alloc<T: DeserializeOwned>(
        &self,
        alloc_id: &str,
    ) -> Result<Option<T>, StateDbError> {
        match self.get(ALLOCS, alloc_id)? {
            Some(bytes) => self.decode(alloc_id, &bytes).map(Some),
            None => Ok(None),
        }
    }

    /// Every alloc id with a record, in key order.
    pub fn alloc_ids(&self) -> Result<Vec<String>, StateDbError> {
        self.settle()?;
        self.with_database(|database| {
            let transaction = database.begin_read().map_err(failed("begin read"))?;
            let opened = transaction
                .open_table(ALLOCS)
                .map_err(failed("open table"))?;
            let mut ids = Vec::new();
            for entry in opened.iter().map_err(failed("iterate"))? {
                let (key, _) = entry.map_err(failed("iterate"))?;
                ids.push(key.value().to_string());
            }
            Ok(ids)
        })
        .map_err(|(operation, source)| self.storage_error(operation)(source))
    }

    fn task_key(alloc_id: &str, task_name: &str, part: TaskRecordPart) -> String {
        format!("{alloc_id}/{task_name}/{}", part.as_str())
    }

    /// Persists one part of a task's record.
    pub fn put_task<T: Serialize>(
        &self,
        alloc_id: &str,
        task_name: &str,
        part: TaskRecordPart,
        record: &T,
    ) -> Result<(), StateDbError> {
        let key = Self::task_key(alloc_id, task_name, part);
        let bytes = self.encode(&key, record)?;
        self.put(RecordTable::Tasks, &key, &bytes)
    }

    /// Like [`StateDb::put_task`], but the commit is not flushed to disk on its own: it becomes
    /// durable with the next durable commit, and is lost if the machine dies first. For records
    /// whose loss is harmless (an informational event, an idempotent hook's state), to save a
    /// flush. When another writer is committing, this does not wait for it: the write is
    /// queued and committed by that writer right after its group (and is lost if the agent
    /// dies first); reads of this db wait for queued writes, so they always see it. A write that
    /// fails then is logged, not returned.
    pub fn put_task_relaxed<T: Serialize>(
        &self,
        alloc_id: &str,
        task_name: &str,
        part: TaskRecordPart,
        record: &T,
    ) -> Result<(), StateDbError> {
        let key = Self::task_key(alloc_id, task_name, part);
        let bytes = self.encode(&key, record)?;
        self.write(
            WriteOperation::Put {
                table: RecordTable::Tasks,
                key,
                bytes,
            },
            WriteWait::Queued,
        )
    }

    /// One part of a task's record, if any.
    pub fn get_task<T: DeserializeOwned>(
        &self,
        alloc_id: &str,
        task_name: &str,
        part: TaskRecordPart,
    ) -> Result<Option<T>, StateDbError> {
        let key = Self::task_key(alloc_id, task_name, part);
        match self.get(TASKS, &key)? {
            Some(bytes) => self.decode(&key, &bytes).map(Some),
            None => Ok(None),
        }
    }

    fn checks_key(alloc_id: &str) -> String {
        // Task keys have two slashes, so this never names a task's record, and it lies in the
        // alloc's key range, so [`StateDb::delete_alloc`] removes it with the tasks.
        format!("{alloc_id}/checks")
    }

    /// Persists the latest check results of an allocation, durably: they are written only when
    /// a check's status changes, and a change lost to a crash would have a restarted agent
    /// report a check `pending` (or worse, its last failure) that has been passing since.
    pub fn put_check_results<T: Serialize>(
        &self,
        alloc_id: &str,
        record: &T,
    ) -> Result<(), StateDbError> {
        let key = Self::checks_key(alloc_id);
        let bytes = self.encode(&key, record)?;
        self.put(RecordTable::Tasks, &key, &bytes)
    }

    /// The check results persisted for an allocation, if any.
    pub fn get_check_results<T: DeserializeOwned>(
        &self,
        alloc_id: &str,
    ) -> Result<Option<T>, StateDbError> {
        let key = Self::checks_key(alloc_id);
        match self.get(TASKS, &key)? {
            Some(bytes) => self.decode(&key, &bytes).map(Some),
            None => Ok(None),
        }
    }

    fn health_key(alloc_id: &str) -> String {
        // One slash, like the checks' key: inside the alloc's key range, never a task's record.
        format!("{alloc_id}/health")
    }

    /// Persists the deployment health the client decided for an allocation (`None` clears
    /// it), durably: it is written before it is reported.
    pub fn put_deployment_status<T: Serialize>(
        &self,
        alloc_id: &str,
        record: &T,
    ) -> Result<(), StateDbError> {
        let key = Self::health_key(alloc_id);
        let bytes = self.encode(&key, record)?;
        self.put(RecordTable::Tasks, &key, &bytes)
    }

    /// The deployment health persisted for an allocation, if any.
    pub fn get_deployment_status<T: DeserializeOwned>(
        &self,
        alloc_id: &str,
    ) -> Result<Option<T>, StateDbError> {
        let key = Self::health_key(alloc_id);
        match self.get(TASKS, &key)? {
            Some(bytes) => self.decode(&key, &bytes).map(Some),
            None => Ok(None),
        }
    }

    fn run_timeout_key(alloc_id: &str) -> String {
        // One slash, like the checks' key: inside the alloc's key range, never a task's record.
        format!("{alloc_id}/max_run_duration")
    }

    /// Persists that an allocation ran past its `max_run_duration`, durably: it is written
    /// before its tasks are killed, so a restarted agent reports it timed out and runs
    /// nothing of it again.
    pub fn put_run_timeout<T: Serialize>(
        &self,
        alloc_id: &str,
        record: &T,
    ) -> Result<(), StateDbError> {
        let key = Self::run_timeout_key(alloc_id);
        let bytes = self.encode(&key, record)?;
        self.put(RecordTable::Tasks, &key, &bytes)
    }

    /// The run timeout persisted for an allocation, if any.
    pub fn get_run_timeout<T: DeserializeOwned>(
        &self,
        alloc_id: &str,
    ) -> Result<Option<T>, StateDbError> {
        let key = Self::run_timeout_key(alloc_id);
        match self.get(TASKS, &key)? {
            Some(bytes) => self.decode(&key, &bytes).map(Some),
            None => Ok(None),
        }
    }

    fn network_key(alloc_id: &str) -> String {
        // One slash, like the checks' key: inside the alloc's key range, never a task's record.
        format!("{alloc_id}/network")
    }

    /// Persists an allocation's group network record (`None` clears it), durably: it is
    /// written before the namespace it names is made, and cleared after it is removed.
    pub fn put_network<T: Serialize>(
        &self,
        alloc_id: &str,
        record: &T,
    ) -> Result<(), StateDbError> {
        let key = Self::network_key(alloc_id);
        let bytes = self.encode(&key, record)?;
        self.put(RecordTable::Tasks, &key, &bytes)
    }

    /// The group network record persisted for an allocation, if any.
    pub fn get_network<T: DeserializeOwned>(
        &self,
        alloc_id: &str,
    ) -> Result<Option<T>, StateDbError> {
        let key = Self::network_key(alloc_id);
        match self.get(TASKS, &key)? {
            Some(bytes) => self.decode(&key, &bytes).map(Some),
            None => Ok(None),
        }
    }

    /// Removes an alloc and all its task records in one transaction (alloc GC).
    pub fn delete_alloc(&self, alloc_id: &str) -> Result<(), StateDbError> {
        self.write(
            WriteOperation::DeleteAlloc {
                alloc_id: alloc_id.to_string(),
            },
            WriteWait::Durable,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A disk that filled up broke the client state for good: redb refuses every transaction
    /// after an I/O error until the file is opened again, so no allocation could start on the
    /// node even after the disk had room. A tmpfs of 4 MiB is the disk here.
    #[test]
    fn a_client_state_whose_disk_filled_records_again_once_the_disk_has_room()
    -> Result<(), Box<dyn std::error::Error>> {
        use nix::mount::{MntFlags, MsFlags, mount, umount2};
        use std::io::Write as _;
        if !nix::unistd::geteuid().is_root() {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "CI must run this as root, where a small tmpfs can be mounted"
            );
            return Ok(());
        }
        let dir = tempfile::tempdir()?;
        mount(
            Some("tmpfs"),
            dir.path(),
            Some("tmpfs"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
            Some("size=4m"),
        )?;
        struct Unmount<'a>(&'a Path);
        impl Drop for Unmount<'_> {
            fn drop(&mut self) {
                let _ = umount2(self.0, MntFlags::MNT_DETACH);
            }
        }
        let _unmount = Unmount(dir.path());
        let db = StateDb::open(&dir.path().join("state.db"))?;
        db.put_alloc("before", &"kept".to_string())?;

        // Fill the disk, then write until the state refuses.
        let filler_path = dir.path().join("filler");
        let mut filler = std::fs::File::create(&filler_path)?;
        let block = vec![0u8; 64 * 1024];
        while filler.write_all(&block).is_ok() {}
        drop(filler);
        let big = "x".repeat(256 * 1024);
        let refused = (0..64).any(|index| db.put_alloc(&format!("big-{index}"), &big).is_err());
        assert!(refused, "a write to a full disk must fail");

        // Room again: the next write reopens the file and succeeds; what was committed before
        // is still there.
        std::fs::remove_file(&filler_path)?;
        db.put_alloc("after", &"recorded".to_string())?;
        assert_eq!(
            db.get_alloc::<String>("after")?.as_deref(),
            Some("recorded")
        );
        assert_eq!(db.get_alloc::<String>("before")?.as_deref(), Some("kept"));
        drop(db);
        let reopened = StateDb::open(&dir.path().join("state.db"))?;
        assert_eq!(
            reopened.get_alloc::<String>("after")?.as_deref(),
            Some("recorded")
        );
        Ok(())
    }

    #[derive(Debug, Serialize, serde::Deserialize, PartialEq)]
    struct Sample {
        name: String,
        count: u32,
    }

    #[test]
    fn records_survive_reopen_and_delete_removes_only_that_alloc()
    -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("client/state.db");
        let sample = Sample {
            name: "web".into(),
            count: 3,
        };
        {
            let db = StateDb::open(&path)?;
            db.put_alloc("a1", &sample)?;
            db.put_alloc("a2", &sample)?;
            db.put_task("a1", "web", TaskRecordPart::Local, &sample)?;
            db.put_task("a1", "web", TaskRecordPart::State, &7u32)?;
            db.put_task("a2", "web", TaskRecordPart::Local, &sample)?;
        }
        let db = StateDb::open(&path)?;
        assert_eq!(db.alloc_ids()?, vec!["a1".to_string(), "a2".to_string()]);
        assert_eq!(db.get_alloc::<Sample>("a1")?, Some(sample));
        assert_eq!(
            db.get_task::<u32>("a1", "web", TaskRecordPart::State)?,
            Some(7)
        );
        db.delete_alloc("a1")?;
        assert_eq!(db.alloc_ids()?, vec!["a2".to_string()]);
        assert!(
            db.get_task::<Sample>("a1", "web", TaskRecordPart::Local)?
                .is_none()
        );
        assert!(
            db.get_task::<Sample>("a2", "web", TaskRecordPart::Local)?
                .is_some()
        );
        Ok(())
    }

    #[test]
    fn relaxed_writes_become_durable_with_the_next_durable_commit()
    -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("state.db");
        {
            let db = StateDb::open(&path)?;
            db.put_task_relaxed("a1", "web", TaskRecordPart::State, &1u32)?;
            assert_eq!(
                db.get_task::<u32>("a1", "web", TaskRecordPart::State)?,
                Some(1)
            );
            db.put_task("a1", "web", TaskRecordPart::Local, &2u32)?;
        }
        let db = StateDb::open(&path)?;
        assert_eq!(
            db.get_task::<u32>("a1", "web", TaskRecordPart::State)?,
            Some(1)
        );
        assert_eq!(
            db.get_task::<u32>("a1", "web", TaskRecordPart::Local)?,
            Some(2)
        );
        Ok(())
    }

    #[test]
    fn concurrent_writers_share_group_commits_and_are_all_durable_after_reopen()
    -> Result<(), Box<dyn std::error::Error>> {
        const WRITERS: usize = 16;
        const WRITES_EACH: usize = 20;
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("client/state.db");
        let transactions = {
            let db = std::sync::Arc::new(StateDb::open(&path)?);
            let before = db.transactions_committed();
            let start = std::sync::Arc::new(std::sync::Barrier::new(WRITERS));
            let writers: Vec<_> = (0..WRITERS)
                .map(|writer| {
                    let db = std::sync::Arc::clone(&db);
                    let start = std::sync::Arc::clone(&start);
                    std::thread::spawn(move || -> Result<(), StateDbError> {
                        start.wait();
                        for write in 0..WRITES_EACH {
                            let alloc_id = format!("a{writer:02}-{write:02}");
                            db.put_alloc(&alloc_id, &(writer * 1000 + write))?;
                            db.put_task(&alloc_id, "web", TaskRecordPart::Local, &write)?;
                        }
                        Ok(())
                    })
                })
                .collect();
            for writer in writers {
                writer.join().map_err(|_| "writer panicked")??;
            }
            let writes = u64::try_from(WRITERS * WRITES_EACH * 2)?;
            assert_eq!(db.writes_committed(), writes);
            db.transactions_committed() - before
        };
        // Each writer waits for its own commit before its next write, so without grouping
        // there would be exactly one transaction per write.
        let writes = u64::try_from(WRITERS * WRITES_EACH * 2)?;
        assert!(
            transactions < writes,
            "{transactions} transactions for {writes} writes: no write shared a commit"
        );
        let db = StateDb::open(&path)?;
        assert_eq!(db.alloc_ids()?.len(), WRITERS * WRITES_EACH);
        for writer in 0..WRITERS {
            for write in 0..WRITES_EACH {
                let alloc_id = format!("a{writer:02}-{write:02}");
                assert_eq!(
                    db.get_alloc::<usize>(&alloc_id)?,
                    Some(writer * 1000 + write)
                );
                assert_eq!(
                    db.get_task::<usize>(&alloc_id, "web", TaskRecordPart::Local)?,
                    Some(write)
                );
            }
        }
        Ok(())
    }

    #[test]
    fn writes_in_one_group_apply_in_arrival_order() -> Result<(), Box<dyn std::error::Error>> {
        let db = StateDb::in_memory()?;
        let group = vec![
            QueuedWrite {
                operation: WriteOperation::Put {
                    table: RecordTable::Tasks,
                    key: "a1/web/local".to_string(),
                    bytes: br#"{"version":1,"record":1}"#.to_vec(),
                },
                durable: false,
                outcome: Arc::default(),
            },
            QueuedWrite {
                operation: WriteOperation::Put {
                    table: RecordTable::Allocs,
                    key: "a1".to_string(),
                    bytes: br#"{"version":1,"record":1}"#.to_vec(),
                },
                durable: true,
                outcome: Arc::default(),
            },
            QueuedWrite {
                operation: WriteOperation::DeleteAlloc {
                    alloc_id: "a1".to_string(),
                },
                durable: false,
                outcome: Arc::default(),
            },
            QueuedWrite {
                operation: WriteOperation::Put {
                    table: RecordTable::Tasks,
                    key: "a1/web/state".to_string(),
                    bytes: br#"{"version":1,"record":2}"#.to_vec(),
                },
                durable: false,
                outcome: Arc::default(),
            },
        ];
        db.commit_group(&group)
            .map_err(|(operation, message)| format!("{operation}: {message}"))?;
        assert!(db.alloc_ids()?.is_empty());
        assert!(
            db.get_task::<u32>("a1", "web", TaskRecordPart::Local)?
                .is_none()
        );
        assert_eq!(
            db.get_task::<u32>("a1", "web", TaskRecordPart::State)?,
            Some(2)
        );
        Ok(())
    }

    #[test]
    fn a_relaxed_write_does_not_wait_for_a_commit_in_progress_and_reads_still_see_it()
    -> Result<(), Box<dyn std::error::Error>> {
        let db = StateDb::in_memory()?;
        // Another writer is committing (simulated: nobody is, so a waiting write would hang).
        lock_queue(&db.queue).committing = true;
        db.put_task_relaxed("a1", "web", TaskRecordPart::State, &1u32)?;
        assert_eq!(lock_queue(&db.queue).pending.len(), 1);
        // That writer steps down without taking the queue; a read then commits it first.
        lock_queue(&db.queue).committing = false;
        assert_eq!(
            db.get_task::<u32>("a1", "web", TaskRecordPart::State)?,
            Some(1)
        );
        assert!(lock_queue(&db.queue).pending.is_empty());
        Ok(())
    }

    #[test]
    fn relaxed_writes_queued_during_commits_are_never_left_behind()
    -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let db = std::sync::Arc::new(StateDb::open(&dir.path().join("state.db"))?);
        let writers: Vec<_> = (0..8usize)
            .map(|writer| {
                let db = std::sync::Arc::clone(&db);
                std::thread::spawn(move || -> Result<(), StateDbError> {
                    for write in 0..50usize {
                        let alloc_id = format!("a{writer}");
                        if write % 10 == 0 {
                            db.put_task(&alloc_id, "web", TaskRecordPart::Local, &write)?;
                        }
                        db.put_task_relaxed(&alloc_id, "web", TaskRecordPart::State, &write)?;
                    }
                    Ok(())
                })
            })
            .collect();
        for writer in writers {
            writer.join().map_err(|_| "writer panicked")??;
        }
        // No read has settled the queue: the leaders committed everything before stepping down.
        {
            let queue = lock_queue(&db.queue);
            assert!(
                queue.pending.is_empty(),
                "{} writes left",
                queue.pending.len()
            );
            assert!(!queue.committing);
        }
        assert_eq!(db.writes_committed(), 8 * (50 + 5));
        for writer in 0..8usize {
            assert_eq!(
                db.get_task::<usize>(&format!("a{writer}"), "web", TaskRecordPart::State)?,
                Some(49)
            );
        }
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn writers_on_multi_thread_runtime_workers_all_commit()
    -> Result<(), Box<dyn std::error::Error>> {
        // More writing tasks than workers, each waiting for group commits from a worker thread
        // (where the wait hands the worker's other tasks to another thread).
        let dir = tempfile::tempdir()?;
        let db = std::sync::Arc::new(StateDb::open(&dir.path().join("state.db"))?);
        let mut writers = tokio::task::JoinSet::new();
        for writer in 0..8usize {
            let db = std::sync::Arc::clone(&db);
            writers.spawn(async move {
                for write in 0..10usize {
                    db.put_alloc(&format!("a{writer}-{write}"), &write)?;
                    tokio::task::yield_now().await;
                }
                Ok::<(), StateDbError>(())
            });
        }
        let joined = tokio::time::timeout(std::time::Duration::from_secs(60), async {
            while let Some(result) = writers.join_next().await {
                result??;
            }
            Ok::<(), Box<dyn std::error::Error>>(())
        })
        .await;
        joined.map_err(|_| "writers did not finish")??;
        assert_eq!(db.alloc_ids()?.len(), 80);
        Ok(())
    }

    #[tokio::test]
    async fn a_write_from_a_current_thread_runtime_just_blocks() -> Result<(), StateDbError> {
        // Handing off the worker is only possible on a multi-threaded runtime (it would panic
        // here); on this one the write blocks the thread as any plain call does.
        let db = StateDb::in_memory()?;
        db.put_alloc("a1", &1u32)?;
        assert_eq!(db.get_alloc::<u32>("a1")?, Some(1));
        Ok(())
    }

    #[test]
    fn a_newer_schema_is_refused_not_misread() -> Result<(), Box<dyn std::error::Error>> {
        let db = StateDb::in_memory()?;
        db.put(RecordTable::Allocs, "a1", br#"{"version":99,"record":{}}"#)?;
        let result = db.get_alloc::<serde_json::Value>("a1");
        assert!(matches!(
            result,
            Err(StateDbError::NewerSchema { found: 99, .. })
        ));
        Ok(())
    }

    #[test]
    fn a_corrupt_file_is_an_error_naming_the_file() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("state.db");
        std::fs::write(
            &path,
            b"this is not a redb file, not at all, definitely not",
        )?;
        let error = StateDb::open(&path).err().ok_or("corrupt file opened")?;
        let message = error.to_string();
        assert!(message.contains("state.db"), "{message}");
        assert!(message.contains("move the file aside"), "{message}");
        Ok(())
    }
}
