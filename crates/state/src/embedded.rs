//! The embedded [`Kv`] backend: one redb file in the data dir.
//!
//! Every [`WriteBatch`] is one redb write transaction committed with immediate durability (one
//! fsync), so a batch acknowledged by [`Kv::apply`] survives a crash. The revision lives in the
//! same file and moves in the same transaction. Blocking redb calls run on tokio's blocking pool.
//!
//! **Boundary**: no redb type crosses this module; open failures (a damaged or locked file) are
//! returned as [`KvError`]s that name the file, never a panic.

use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use redb::{Database, DatabaseError, ReadableDatabase, ReadableTable, TableDefinition, TableError};

use crate::kv::{
    KeyRange, Kv, KvContents, KvError, KvFuture, KvPair, Revision, WriteBatch, WriteOp,
};

/// The file name of the state database inside the data dir.
pub const STATE_FILE_NAME: &str = "state.redb";

const DATA_TABLE: TableDefinition<'static, &[u8], &[u8]> = TableDefinition::new("drover_kv");
const META_TABLE: TableDefinition<'static, &str, u64> = TableDefinition::new("drover_kv_meta");
const REVISION_KEY: &str = "revision";

/// A [`Kv`] on a single redb file.
#[derive(Clone)]
pub struct EmbeddedKv {
    database: Arc<Database>,
    path: Arc<PathBuf>,
}

impl std::fmt::Debug for EmbeddedKv {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("EmbeddedKv")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

fn backend_error(operation: &'static str, error: impl std::fmt::Display) -> KvError {
    KvError::Backend {
        operation,
        reason: error.to_string(),
    }
}

impl EmbeddedKv {
    /// Opens (or creates) `<data_dir>/state.redb`.
    pub async fn open_in_dir(data_dir: &Path) -> Result<Self, KvError> {
        Self::open(&data_dir.join(STATE_FILE_NAME)).await
    }

    /// Opens (or creates) the database file at `path`.
    ///
    /// A damaged file gives [`KvError::Open`] naming the file and how to move it aside; a file
    /// held by another process gives [`KvError::Locked`].
    pub async fn open(path: &Path) -> Result<Self, KvError> {
        let path = path.to_path_buf();
        let join_path = path.clone();
        tokio::task::spawn_blocking(move || Self::open_blocking(path))
            .await
            .map_err(|join_error| KvError::Open {
                path: join_path,
                reason: format!("the open task failed: {join_error}"),
            })?
    }

    /// Opens (or creates) the database file at `path`, blocking the calling thread.
    pub fn open_blocking(path: PathBuf) -> Result<Self, KvError> {
        let open_error = |reason: String| KvError::Open {
            path: path.clone(),
            reason,
        };
        if let Some(parent) = path.parent()
            && !parent.as_os_str().is_empty()
        {
            std::fs::create_dir_all(parent)
                .map_err(|error| open_error(format!("cannot create its directory: {error}")))?;
        }
        let mut database = match Database::create(&path) {
            Ok(database) => database,
            Err(DatabaseError::DatabaseAlreadyOpen) => return Err(KvError::Locked { path }),
            Err(error) => return Err(open_error(error.to_string())),
        };
        // redb verifies checksums only when it recovers from an unclean shutdown; a file damaged
        // after a clean one (bad disk, stray write) would otherwise be read as is, and redb
        // panics on some damaged pages. Verify every page once at open instead: it costs one read
        // of the file.
        match database.check_integrity() {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!(path = %path.display(), "state database was damaged and has been repaired");
            }
            Err(error) => return Err(open_error(error.to_string())),
        }
        // Create both tables up front so readers never meet a missing table.
        let transaction = database
            .begin_write()
            .map_err(|error| open_error(error.to_string()))?;
        {
            let _data = transaction
                .open_table(DATA_TABLE)
                .map_err(|error| open_error(error.to_string()))?;
            let _meta = transaction
                .open_table(META_TABLE)
                .map_err(|error| open_error(error.to_string()))?;
        }
        transaction
            .commit()
            .map_err(|error| open_error(error.to_string()))?;
        Ok(Self {
            database: Arc::new(database),
            path: Arc::new(path),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    async fn run_blocking<T: Send + 'static>(
        &self,
        operation: &'static str,
        work: impl FnOnce(&Database) -> Result<T, KvError> + Send + 'static,
    ) -> Result<T, KvError> {
        let database = Arc::clone(&self.database);
        tokio::task::spawn_blocking(move || work(&database))
            .await
            .map_err(|join_error| backend_error(operation, join_error))?
    }

    fn get_blocking(database: &Database, key: &[u8]) -> Result<Option<Vec<u8>>, KvError> {
        let transaction = database
            .begin_read()
            .map_err(|error| backend_error("read", error))?;
        let table = match transaction.open_table(DATA_TABLE) {
            Ok(table) => table,
            Err(TableError::TableDoesNotExist(_)) => return Ok(None),
            Err(error) => return Err(backend_error("read", error)),
        };
        let value = table
            .get(key)
            .map_err(|error| backend_error("read", error))?;
        Ok(value.map(|guard| guard.value().to_vec()))
    }

    fn scan_blocking(database: &Database, range: &KeyRange) -> Result<Vec<KvPair>, KvError> {
        let transaction = database
            .begin_read()
            .map_err(|error| backend_error("scan", error))?;
        let table = match transaction.open_table(DATA_TABLE) {
            Ok(table) => table,
            Err(TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
            Err(error) => return Err(backend_error("scan", error)),
        };
        let bounds: (Bound<&[u8]>, Bound<&[u8]>) =
            (Bound::Included(range.start.as_slice()), range.end_bound());
        let mut pairs = Vec::new();
        for entry in table
            .range::<&[u8]>(bounds)
            .map_err(|error| backend_error("scan", error))?
        {
            let (key, value) = entry.map_err(|error| backend_error("scan", error))?;
            pairs.push(KvPair {
                key: key.value().to_vec(),
                value: value.value().to_vec(),
            });
        }
        Ok(pairs)
    }

    fn revision_blocking(database: &Database) -> Result<Revision, KvError> {
        let transaction = database
            .begin_read()
            .map_err(|error| backend_error("read revision", error))?;
        let table = match transaction.open_table(META_TABLE) {
            Ok(table) => table,
            Err(TableError::TableDoesNotExist(_)) => return Ok(0),
            Err(error) => return Err(backend_error("read revision", error)),
        };
        let revision = table
            .get(REVISION_KEY)
            .map_err(|error| backend_error("read revision", error))?;
        Ok(revision.map_or(0, |guard| guard.value()))
    }

    /// Every pair and the revision, in one read transaction: one consistent view.
    fn read_all_blocking(database: &Database) -> Result<KvContents, KvError> {
        let transaction = database
            .begin_read()
            .map_err(|error| backend_error("snapshot", error))?;
        let revision = match transaction.open_table(META_TABLE) {
            Ok(table) => table
                .get(REVISION_KEY)
                .map_err(|error| backend_error("snapshot", error))?
                .map_or(0, |guard| guard.value()),
            Err(TableError::TableDoesNotExist(_)) => 0,
            Err(error) => return Err(backend_error("snapshot", error)),
        };
        let mut pairs = Vec::new();
        match transaction.open_table(DATA_TABLE) {
            Ok(table) => {
                for entry in table
                    .iter()
                    .map_err(|error| backend_error("snapshot", error))?
                {
                    let (key, value) = entry.map_err(|error| backend_error("snapshot", error))?;
                    pairs.push(KvPair {
                        key: key.value().to_vec(),
                        value: value.value().to_vec(),
                    });
                }
            }
            Err(TableError::TableDoesNotExist(_)) => {}
            Err(error) => return Err(backend_error("snapshot", error)),
        }
        Ok(KvContents {
            revision,
            pairs,
            term: 0,
            backend: "embedded",
        })
    }

    /// Empties the data table and fills it with `pairs` in one write transaction (one fsync):
    /// a crash leaves the old keyspace or the new one.
    fn replace_all_blocking(
        database: &Database,
        pairs: Vec<KvPair>,
        expected_revision: Option<Revision>,
    ) -> Result<Revision, KvError> {
        let failed = |error: &dyn std::fmt::Display| backend_error("restore", error);
        let transaction = database.begin_write().map_err(|error| failed(&error))?;
        let new_revision = {
            let mut meta = transaction
                .open_table(META_TABLE)
                .map_err(|error| failed(&error))?;
            let current = meta
                .get(REVISION_KEY)
                .map_err(|error| failed(&error))?
                .map_or(0, |guard| guard.value());
            if let Some(expected) = expected_revision
                && expected != current
            {
                return Err(KvError::RevisionMismatch {
                    expected,
                    found: current,
                });
            }
            let mut data = transaction
                .open_table(DATA_TABLE)
                .map_err(|error| failed(&error))?;
            data.retain(|_, _| false).map_err(|error| failed(&error))?;
            for pair in &pairs {
                data.insert(pair.key.as_slice(), pair.value.as_slice())
                    .map_err(|error| failed(&error))?;
            }
            let new_revision = current + 1;
            meta.insert(REVISION_KEY, new_revision)
                .map_err(|error| failed(&error))?;
            new_revision
        };
        transaction.commit().map_err(|error| failed(&error))?;
        Ok(new_revision)
    }

    fn apply_blocking(database: &Database, batch: WriteBatch) -> Result<Revision, KvError> {
        let transaction = database
            .begin_write()
            .map_err(|error| backend_error("commit", error))?;
        let new_revision = {
            let mut meta = transaction
                .open_table(META_TABLE)
                .map_err(|error| backend_error("commit", error))?;
            let current = meta
                .get(REVISION_KEY)
                .map_err(|error| backend_error("commit", error))?
                .map_or(0, |guard| guard.value());
            if let Some(expected) = batch.expected_revision
                && expected != current
            {
                // Dropping the transaction aborts it.
                return Err(KvError::RevisionMismatch {
                    expected,
                    found: current,
                });
            }
            let mut data = transaction
                .open_table(DATA_TABLE)
                .map_err(|error| backend_error("commit", error))?;
            for op in &batch.ops {
                match op {
                    WriteOp::Put { key, value } => {
                        data.insert(key.as_slice(), value.as_slice())
                            .map_err(|error| backend_error("commit", error))?;
                    }
                    WriteOp::Delete { key } => {
                        data.remove(key.as_slice())
                            .map_err(|error| backend_error("commit", error))?;
                    }
                }
            }
            let new_revision = current + 1;
            meta.insert(REVISION_KEY, new_revision)
                .map_err(|error| backend_error("commit", error))?;
            new_revision
        };
        transaction
            .commit()
            .map_err(|error| backend_error("commit", error))?;
        Ok(new_revision)
    }
}

impl Kv for EmbeddedKv {
    fn get<'a>(&'a self, key: &'a [u8]) -> KvFuture<'a, Option<Vec<u8>>> {
        let key = key.to_vec();
        Box::pin(self.run_blocking("read", move |database| Self::get_blocking(database, &key)))
    }

    fn scan(&self, range: KeyRange) -> KvFuture<'_, Vec<KvPair>> {
        Box::pin(self.run_blocking("scan", move |database| {
            Self::scan_blocking(database, &range)
        }))
    }

    fn apply(&self, batch: WriteBatch) -> KvFuture<'_, Revision> {
        Box::pin(self.run_blocking("commit", move |database| {
            Self::apply_blocking(database, batch)
        }))
    }

    fn revision(&self) -> KvFuture<'_, Revision> {
        Box::pin(self.run_blocking("read revision", Self::revision_blocking))
    }

    fn read_all(&self, _stale: bool) -> KvFuture<'_, KvContents> {
        Box::pin(self.run_blocking("snapshot", Self::read_all_blocking))
    }

    fn replace_all(
        &self,
        pairs: Vec<KvPair>,
        expected_revision: Option<Revision>,
    ) -> KvFuture<'_, Revision> {
        Box::pin(self.run_blocking("restore", move |database| {
            Self::replace_all_blocking(database, pairs, expected_revision)
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn batches_survive_reopen_with_their_revision() {
        let directory = tempfile::tempdir().unwrap();
        {
            let kv = EmbeddedKv::open_in_dir(directory.path()).await.unwrap();
            let mut batch = WriteBatch::new();
            batch.put(b"t/a".to_vec(), b"1".to_vec());
            batch.put(b"t/b".to_vec(), b"2".to_vec());
            batch.put(b"u/c".to_vec(), b"3".to_vec());
            assert_eq!(kv.apply(batch).await.unwrap(), 1);
            let mut batch = WriteBatch::new();
            batch.delete(b"t/a".to_vec());
            assert_eq!(kv.apply(batch).await.unwrap(), 2);
        }
        let kv = EmbeddedKv::open_in_dir(directory.path()).await.unwrap();
        assert_eq!(kv.revision().await.unwrap(), 2);
        assert_eq!(kv.get(b"t/a").await.unwrap(), None);
        assert_eq!(kv.get(b"u/c").await.unwrap(), Some(b"3".to_vec()));
        let pairs = kv.scan(KeyRange::prefix(b"t/")).await.unwrap();
        assert_eq!(
            pairs,
            vec![KvPair {
                key: b"t/b".to_vec(),
                value: b"2".to_vec()
            }]
        );
    }

    #[tokio::test]
    async fn a_refused_conditional_batch_changes_nothing() {
        let directory = tempfile::tempdir().unwrap();
        let kv = EmbeddedKv::open_in_dir(directory.path()).await.unwrap();
        let batch = WriteBatch {
            ops: vec![WriteOp::Put {
                key: b"k".to_vec(),
                value: b"v".to_vec(),
            }],
            expected_revision: Some(7),
            events: None,
        };
        let error = kv.apply(batch).await.unwrap_err();
        assert!(matches!(
            error,
            KvError::RevisionMismatch {
                expected: 7,
                found: 0
            }
        ));
        assert_eq!(kv.get(b"k").await.unwrap(), None);
        assert_eq!(kv.revision().await.unwrap(), 0);
    }

    #[tokio::test]
    async fn a_corrupt_file_is_an_error_naming_the_file_and_the_recovery() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join(STATE_FILE_NAME);
        // A file that is not a redb database at all.
        std::fs::write(&path, vec![0x5a_u8; 64 * 1024]).unwrap();
        let error = EmbeddedKv::open(&path).await.unwrap_err();
        let message = error.to_string();
        assert!(matches!(error, KvError::Open { .. }), "{message}");
        assert!(message.contains(&path.display().to_string()), "{message}");
        assert!(message.contains("move it aside"), "{message}");

        // A real database whose header was damaged afterwards.
        let damaged = directory.path().join("damaged.redb");
        {
            let kv = EmbeddedKv::open(&damaged).await.unwrap();
            let mut batch = WriteBatch::new();
            batch.put(b"k".to_vec(), b"v".to_vec());
            kv.apply(batch).await.unwrap();
        }
        let mut bytes = std::fs::read(&damaged).unwrap();
        for byte in bytes.iter_mut().take(512) {
            *byte = 0xa5;
        }
        std::fs::write(&damaged, bytes).unwrap();
        let error = EmbeddedKv::open(&damaged).await.unwrap_err();
        assert!(error.to_string().contains("damaged.redb"), "{error}");
    }

    #[tokio::test]
    async fn damaged_files_of_every_shape_give_errors_or_a_repaired_store_never_a_panic() {
        let directory = tempfile::tempdir().unwrap();
        let original = directory.path().join("original.redb");
        {
            let kv = EmbeddedKv::open(&original).await.unwrap();
            for round in 0..20_u32 {
                let mut batch = WriteBatch::new();
                for item in 0..50_u32 {
                    batch.put(format!("k/{round}/{item}").into_bytes(), vec![7_u8; 200]);
                }
                kv.apply(batch).await.unwrap();
            }
        }
        let bytes = std::fs::read(&original).unwrap();
        let mut damaged_versions: Vec<(&str, Vec<u8>)> = vec![
            ("truncated-half", bytes[..bytes.len() / 2].to_vec()),
            (
                "truncated-to-header",
                bytes[..bytes.len().min(700)].to_vec(),
            ),
            ("one-byte", vec![1]),
        ];
        let mut scribbled = bytes.clone();
        for position in (4096..scribbled.len()).step_by(997) {
            scribbled[position] ^= 0xff;
        }
        damaged_versions.push(("scribbled-pages", scribbled.clone()));
        let single_flips: Vec<(String, Vec<u8>)> = (1..24)
            .map(|step| {
                let position = bytes.len() * step / 24;
                let mut flipped = bytes.clone();
                flipped[position] ^= 0x40;
                (format!("flip-at-{position}"), flipped)
            })
            .collect();
        let mut damaged_versions: Vec<(String, Vec<u8>)> = damaged_versions
            .into_iter()
            .map(|(name, content)| (name.to_owned(), content))
            .collect();
        damaged_versions.extend(single_flips);
        for (name, content) in damaged_versions {
            let path = directory.path().join(format!("{name}.redb"));
            std::fs::write(&path, &content).unwrap();
            match EmbeddedKv::open(&path).await {
                Ok(kv) => {
                    // redb may repair a file after a crash; then it must answer reads.
                    let pairs = kv.scan(KeyRange::prefix(b"k/")).await;
                    assert!(
                        pairs.is_ok(),
                        "{name}: opened but cannot be read: {pairs:?}"
                    );
                }
                Err(error) => {
                    assert!(
                        error.to_string().contains(&path.display().to_string()),
                        "{name}: {error}"
                    );
                }
            }
        }
    }

    #[tokio::test]
    async fn a_second_open_of_the_same_file_reports_the_lock() {
        let directory = tempfile::tempdir().unwrap();
        let _first = EmbeddedKv::open_in_dir(directory.path()).await.unwrap();
        let error = EmbeddedKv::open_in_dir(directory.path()).await.unwrap_err();
        assert!(matches!(error, KvError::Locked { .. }), "{error}");
        assert!(error.to_string().contains(STATE_FILE_NAME), "{error}");
    }
}
