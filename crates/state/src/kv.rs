//! The `Kv` trait: the small, honest key-value contract the state store is built on.
//!
//! Byte keys, byte values, ordered range scans, and a write batch that is applied atomically and
//! stamps a new revision. The embedded backend ([`crate::embedded::EmbeddedKv`]) implements it on
//! a redb file; an etcd backend can implement it with one `Txn` per batch (compare on the
//! revision, then puts and deletes). [`MemoryKv`] implements it in memory for tests.
//!
//! **Boundary**: nothing here knows about jobs, allocations or indexes, and no backend type
//! (redb, etcd) leaks through the trait. Batching of many callers into one batch (group commit)
//! happens above this trait, in [`crate::engine`].

use std::collections::BTreeMap;
use std::future::Future;
use std::ops::Bound;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Mutex;

/// A backend revision: grows by exactly one for every applied [`WriteBatch`].
pub type Revision = u64;

/// A boxed future returned by [`Kv`] methods, so the trait stays object safe.
pub type KvFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, KvError>> + Send + 'a>>;

/// One key and its value, as returned by a scan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KvPair {
    /// The key bytes.
    pub key: Vec<u8>,
    /// The value bytes.
    pub value: Vec<u8>,
}

/// A half-open key range `[start, end)`; `end: None` means "to the end of the key space".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRange {
    /// The first key included.
    pub start: Vec<u8>,
    /// The first key excluded, or `None` for no upper bound.
    pub end: Option<Vec<u8>>,
}

impl KeyRange {
    /// Every key that starts with `prefix` (etcd's "range end = prefix + 1").
    pub fn prefix(prefix: &[u8]) -> Self {
        Self {
            start: prefix.to_vec(),
            end: prefix_successor(prefix),
        }
    }

    /// Every key from `start` (inclusive) to `end` (exclusive).
    pub fn between(start: &[u8], end: &[u8]) -> Self {
        Self {
            start: start.to_vec(),
            end: Some(end.to_vec()),
        }
    }

    /// Whether `key` falls inside this range.
    pub fn contains(&self, key: &[u8]) -> bool {
        key >= self.start.as_slice() && self.end.as_deref().is_none_or(|end| key < end)
    }

    pub(crate) fn end_bound(&self) -> Bound<&[u8]> {
        match &self.end {
            Some(end) => Bound::Excluded(end.as_slice()),
            None => Bound::Unbounded,
        }
    }
}

/// The smallest key greater than every key with this prefix, or `None` if there is none (the
/// prefix is empty or all `0xff`).
fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// One operation in a [`WriteBatch`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteOp {
    /// Set `key` to `value`, replacing any previous value.
    Put {
        /// The key bytes.
        key: Vec<u8>,
        /// The value bytes.
        value: Vec<u8>,
    },
    /// Remove `key` if present.
    Delete {
        /// The key bytes.
        key: Vec<u8>,
    },
}

/// Puts and deletes applied all together or not at all, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteBatch {
    /// The operations, applied in order (a later op on the same key wins).
    pub ops: Vec<WriteOp>,
    /// When set, the batch is refused with [`KvError::RevisionMismatch`] unless the backend's
    /// revision is exactly this (optimistic fencing, as an etcd `Txn` compare would do).
    pub expected_revision: Option<Revision>,
    /// The events of the batch's writes as JSON, for a backend shared by several stores
    /// ([`Kv::shares_events`]): it keeps them with the batch, so the stores following it can
    /// publish them. Not a record; `None` for other backends.
    pub events: Option<Vec<u8>>,
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a put.
    pub fn put(&mut self, key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) {
        self.ops.push(WriteOp::Put {
            key: key.into(),
            value: value.into(),
        });
    }

    /// Adds a delete.
    pub fn delete(&mut self, key: impl Into<Vec<u8>>) {
        self.ops.push(WriteOp::Delete { key: key.into() });
    }

    /// Whether the batch holds no operation.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

/// Errors of a [`Kv`] backend.
#[derive(Debug, thiserror::Error)]
pub enum KvError {
    /// The backing file could not be opened; the message says how to recover.
    #[error(
        "cannot open state database {path}: {reason}; if the file is damaged, move it aside \
         (mv {path} {path}.corrupt) and start again with an empty state"
    )]
    Open {
        /// The database file.
        path: PathBuf,
        /// What the backend reported.
        reason: String,
    },
    /// Another process already holds the database file.
    #[error(
        "state database {path} is already open in another process (is another agent running with this data dir?)"
    )]
    Locked {
        /// The database file.
        path: PathBuf,
    },
    /// A conditional batch found another revision.
    #[error("revision mismatch: expected {expected}, found {found}")]
    RevisionMismatch {
        /// The revision the batch expected.
        expected: Revision,
        /// The backend's revision.
        found: Revision,
    },
    /// The backend cannot be reached or cannot commit (an etcd cluster without quorum).
    #[error("state store unavailable: {reason}")]
    Unavailable {
        /// What the backend reported.
        reason: String,
    },
    /// A read or write failed in the backend.
    #[error("state backend {operation} failed: {reason}")]
    Backend {
        /// What was being done ("read", "commit", …).
        operation: &'static str,
        /// What the backend reported.
        reason: String,
    },
}

/// The whole keyspace as read at one revision (what a snapshot archive holds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KvContents {
    /// The backend revision the pairs were read at.
    pub revision: Revision,
    /// Every pair, in key order.
    pub pairs: Vec<KvPair>,
    /// The backend's consensus term when it has one (etcd's raft term), else 0.
    pub term: u64,
    /// Which backend was read (`embedded`, `etcd`, `memory`).
    pub backend: &'static str,
}

/// The key-value contract of the state store.
///
/// Implementations must make [`Kv::apply`] atomic and durable: once it returns `Ok`, the batch
/// survives a crash; if it fails, none of it is visible.
pub trait Kv: Send + Sync + 'static {
    /// The value of `key`, if any.
    fn get<'a>(&'a self, key: &'a [u8]) -> KvFuture<'a, Option<Vec<u8>>>;

    /// Every pair in `range`, in key order.
    fn scan(&self, range: KeyRange) -> KvFuture<'_, Vec<KvPair>>;

    /// Applies `batch` atomically and durably; returns the new revision (previous + 1).
    fn apply(&self, batch: WriteBatch) -> KvFuture<'_, Revision>;

    /// The revision of the last applied batch (0 for a new store).
    fn revision(&self) -> KvFuture<'_, Revision>;

    /// The most operations one batch should hold, if the backend has a cap (etcd's
    /// `--max-txn-ops`, 128 by default). The group-commit writer then splits its groups so that
    /// batches of same-sized writes stay within it; report the cap with room for one write.
    fn max_ops_per_batch(&self) -> Option<usize> {
        None
    }

    /// Whether other stores follow this backend's writes (etcd): the writer then hands every
    /// batch its events ([`WriteBatch::events`]).
    fn shares_events(&self) -> bool {
        false
    }

    /// Every pair and the revision they were read at, all at that one revision (a snapshot).
    /// `stale` lets a backend answer from a replica that may lag (etcd's serializable read);
    /// a backend with one copy ignores it. The default scans after reading the revision, which
    /// is one revision only while nothing writes: the real backends override it.
    fn read_all(&self, stale: bool) -> KvFuture<'_, KvContents> {
        let _ = stale;
        Box::pin(async move {
            let revision = self.revision().await?;
            let pairs = self
                .scan(KeyRange {
                    start: Vec::new(),
                    end: None,
                })
                .await?;
            Ok(KvContents {
                revision,
                pairs,
                term: 0,
                backend: "memory",
            })
        })
    }

    /// Replaces the whole keyspace with `pairs` (a snapshot's restore), atomically: a reader
    /// sees the old keyspace or the new one, never a mix, and a failure leaves the old one.
    /// Refused with [`KvError::RevisionMismatch`] unless the revision is `expected_revision`
    /// (when given); returns the new revision, greater than every earlier one.
    fn replace_all(
        &self,
        pairs: Vec<KvPair>,
        expected_revision: Option<Revision>,
    ) -> KvFuture<'_, Revision> {
        let _ = (pairs, expected_revision);
        Box::pin(async {
            Err(KvError::Backend {
                operation: "restore",
                reason: "this backend cannot replace its keyspace".to_owned(),
            })
        })
    }
}

/// An in-memory [`Kv`] with the same semantics as the durable backends, minus durability.
#[derive(Debug, Default)]
pub struct MemoryKv {
    inner: Mutex<MemoryKvInner>,
}

#[derive(Debug, Default)]
struct MemoryKvInner {
    pairs: BTreeMap<Vec<u8>, Vec<u8>>,
    revision: Revision,
}

impl MemoryKv {
    /// An empty store at revision 0.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, MemoryKvInner>, KvError> {
        self.inner.lock().map_err(|_| KvError::Backend {
            operation: "lock",
            reason: "memory store lock poisoned".to_owned(),
        })
    }
}

impl Kv for MemoryKv {
    fn get<'a>(&'a self, key: &'a [u8]) -> KvFuture<'a, Option<Vec<u8>>> {
        Box::pin(async move { Ok(self.lock()?.pairs.get(key).cloned()) })
    }

    fn scan(&self, range: KeyRange) -> KvFuture<'_, Vec<KvPair>> {
        Box::pin(async move {
            let inner = self.lock()?;
            let bounds = (Bound::Included(range.start.as_slice()), range.end_bound());
            Ok(inner
                .pairs
                .range::<[u8], _>(bounds)
                .map(|(key, value)| KvPair {
                    key: key.clone(),
                    value: value.clone(),
                })
                .collect())
        })
    }

    fn apply(&self, batch: WriteBatch) -> KvFuture<'_, Revision> {
        Box::pin(async move {
            let mut inner = self.lock()?;
            if let Some(expected) = batch.expected_revision
                && expected != inner.revision
            {
                return Err(KvError::RevisionMismatch {
                    expected,
                    found: inner.revision,
                });
            }
            for op in batch.ops {
                match op {
                    WriteOp::Put { key, value } => {
                        inner.pairs.insert(key, value);
                    }
                    WriteOp::Delete { key } => {
                        inner.pairs.remove(&key);
                    }
                }
            }
            inner.revision += 1;
            Ok(inner.revision)
        })
    }

    fn revision(&self) -> KvFuture<'_, Revision> {
        Box::pin(async move { Ok(self.lock()?.revision) })
    }

    fn read_all(&self, _stale: bool) -> KvFuture<'_, KvContents> {
        Box::pin(async move {
            let inner = self.lock()?;
            Ok(KvContents {
                revision: inner.revision,
                pairs: inner
                    .pairs
                    .iter()
                    .map(|(key, value)| KvPair {
                        key: key.clone(),
                        value: value.clone(),
                    })
                    .collect(),
                term: 0,
                backend: "memory",
            })
        })
    }

    fn replace_all(
        &self,
        pairs: Vec<KvPair>,
        expected_revision: Option<Revision>,
    ) -> KvFuture<'_, Revision> {
        Box::pin(async move {
            let mut inner = self.lock()?;
            if let Some(expected) = expected_revision
                && expected != inner.revision
            {
                return Err(KvError::RevisionMismatch {
                    expected,
                    found: inner.revision,
                });
            }
            inner.pairs = pairs
                .into_iter()
                .map(|pair| (pair.key, pair.value))
                .collect();
            inner.revision += 1;
            Ok(inner.revision)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_range_covers_exactly_the_prefixed_keys() {
        let range = KeyRange::prefix(b"t/jobs/");
        assert!(range.contains(b"t/jobs/"));
        assert!(range.contains(b"t/jobs/default\0web"));
        assert!(!range.contains(b"t/jobs0"));
        assert!(!range.contains(b"t/job"));
        let all_ff = KeyRange::prefix(&[0xff, 0xff]);
        assert_eq!(all_ff.end, None);
        assert_eq!(KeyRange::prefix(&[1, 0xff]).end, Some(vec![2]));
    }

    #[tokio::test]
    async fn memory_kv_applies_batches_in_order_and_counts_revisions() {
        let kv = MemoryKv::new();
        let mut batch = WriteBatch::new();
        batch.put(b"a/1".to_vec(), b"one".to_vec());
        batch.put(b"a/2".to_vec(), b"two".to_vec());
        batch.put(b"b/1".to_vec(), b"other".to_vec());
        batch.delete(b"a/2".to_vec());
        assert_eq!(kv.apply(batch).await.ok(), Some(1));
        let pairs = kv.scan(KeyRange::prefix(b"a/")).await.unwrap_or_default();
        assert_eq!(
            pairs,
            vec![KvPair {
                key: b"a/1".to_vec(),
                value: b"one".to_vec()
            }]
        );
        let stale = WriteBatch {
            ops: vec![],
            expected_revision: Some(0),
            events: None,
        };
        assert!(matches!(
            kv.apply(stale).await,
            Err(KvError::RevisionMismatch {
                expected: 0,
                found: 1
            })
        ));
        assert_eq!(kv.revision().await.ok(), Some(1));
    }
}
