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
//! older one refuses a newer file instead of misreading it. Every write is one redb transaction
//! (copy-on-write, fsync on commit): a crash leaves the previous or the new record, never a torn
//! one. The store is generic over the record types so it knows nothing of runners.
//!
//! **Not** the server's state store (crate `state`), and not a cache: it is read on restore only.

use std::path::{Path, PathBuf};

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

/// The client state database.
#[derive(Debug)]
pub struct StateDb {
    database: Database,
    path: PathBuf,
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
        let state_db = StateDb {
            database,
            path: path.to_path_buf(),
        };
        state_db.ensure_tables()?;
        Ok(state_db)
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
        let state_db = StateDb { database, path };
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
        let transaction = self
            .database
            .begin_write()
            .map_err(self.storage_error("begin write"))?;
        transaction
            .open_table(ALLOCS)
            .map_err(self.storage_error("open allocs table"))?;
        transaction
            .open_table(TASKS)
            .map_err(self.storage_error("open tasks table"))?;
        transaction.commit().map_err(self.storage_error("commit"))
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

    fn put(
        &self,
        table: TableDefinition<'_, &str, &[u8]>,
        key: &str,
        bytes: &[u8],
    ) -> Result<(), StateDbError> {
        self.put_with(table, key, bytes, Durability::Immediate)
    }

    fn put_with(
        &self,
        table: TableDefinition<'_, &str, &[u8]>,
        key: &str,
        bytes: &[u8],
        durability: Durability,
    ) -> Result<(), StateDbError> {
        let mut transaction = self
            .database
            .begin_write()
            .map_err(self.storage_error("begin write"))?;
        transaction
            .set_durability(durability)
            .map_err(|error| StateDbError::Storage {
                path: self.path.clone(),
                operation: "set durability",
                source: Box::new(redb::Error::from(error)),
            })?;
        {
            let mut opened = transaction
                .open_table(table)
                .map_err(self.storage_error("open table"))?;
            opened
                .insert(key, bytes)
                .map_err(self.storage_error("insert"))?;
        }
        transaction.commit().map_err(self.storage_error("commit"))
    }

    fn get(
        &self,
        table: TableDefinition<'_, &str, &[u8]>,
        key: &str,
    ) -> Result<Option<Vec<u8>>, StateDbError> {
        let transaction = self
            .database
            .begin_read()
            .map_err(self.storage_error("begin read"))?;
        let opened = transaction
            .open_table(table)
            .map_err(self.storage_error("open table"))?;
        let value = opened.get(key).map_err(self.storage_error("get"))?;
        Ok(value.map(|guard| guard.value().to_vec()))
    }

    /// Persists the alloc record of `alloc_id` (replacing the previous one).
    pub fn put_alloc<T: Serialize>(&self, alloc_id: &str, record: &T) -> Result<(), StateDbError> {
        let bytes = self.encode(alloc_id, record)?;
        self.put(ALLOCS, alloc_id, &bytes)
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
        let transaction = self
            .database
            .begin_read()
            .map_err(self.storage_error("begin read"))?;
        let opened = transaction
            .open_table(ALLOCS)
            .map_err(self.storage_error("open table"))?;
        let mut ids = Vec::new();
        for entry in opened.iter().map_err(self.storage_error("iterate"))? {
            let (key, _) = entry.map_err(self.storage_error("iterate"))?;
            ids.push(key.value().to_string());
        }
        Ok(ids)
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
        self.put(TASKS, &key, &bytes)
    }

    /// Like [`StateDb::put_task`], but the commit is not flushed to disk on its own: it becomes
    /// durable with the next durable commit, and is lost if the machine dies first. For records
    /// whose loss is harmless (an informational event), to save a flush.
    pub fn put_task_relaxed<T: Serialize>(
        &self,
        alloc_id: &str,
        task_name: &str,
        part: TaskRecordPart,
        record: &T,
    ) -> Result<(), StateDbError> {
        let key = Self::task_key(alloc_id, task_name, part);
        let bytes = self.encode(&key, record)?;
        self.put_with(TASKS, &key, &bytes, Durability::None)
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

    /// Removes an alloc and all its task records in one transaction (alloc GC).
    pub fn delete_alloc(&self, alloc_id: &str) -> Result<(), StateDbError> {
        let transaction = self
            .database
            .begin_write()
            .map_err(self.storage_error("begin write"))?;
        {
            let mut allocs = transaction
                .open_table(ALLOCS)
                .map_err(self.storage_error("open table"))?;
            allocs
                .remove(alloc_id)
                .map_err(self.storage_error("remove"))?;
            let mut tasks = transaction
                .open_table(TASKS)
                .map_err(self.storage_error("open table"))?;
            // Keys are "<alloc>/<task>/<part>"; '0' is the byte after '/', so this range is
            // exactly this alloc's tasks (ids and names never contain '/').
            let start = format!("{alloc_id}/");
            let end = format!("{alloc_id}0");
            tasks
                .retain_in(start.as_str()..end.as_str(), |_, _| false)
                .map_err(self.storage_error("remove tasks"))?;
        }
        transaction.commit().map_err(self.storage_error("commit"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn a_newer_schema_is_refused_not_misread() -> Result<(), Box<dyn std::error::Error>> {
        let db = StateDb::in_memory()?;
        db.put(ALLOCS, "a1", br#"{"version":99,"record":{}}"#)?;
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
