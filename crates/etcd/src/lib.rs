//! The etcd backend of the state store: [`EtcdKv`] implements `drover_state::Kv` on an etcd v3
//! cluster, and [`follow`] keeps a store current with writes other stores make to the same
//! prefix.
//!
//! Layout under the configured prefix `P`:
//! - `P rev`: the backend revision (8 bytes, big endian), one more for every applied batch;
//! - `P k/<key>`: a record, as a one-byte encoding tag and the bytes (tag 0: as given; tag 1:
//!   snappy raw block, for values of 1 KiB and more: the store's JSON records compress well and
//!   etcd refuses a request over `--max-request-bytes`, 1.5 MiB by default).
//!
//! Every [`Kv::apply`] is one etcd transaction: compare `P rev` with the revision the store last
//! saw, then the puts and deletes and the new revision; a store that lost the race gets
//! [`KvError::RevisionMismatch`] and reloads (see `drover_state::Engine`). The store's own
//! modify indexes are records it writes in the same transactions, so they stay monotonic across
//! every store sharing the prefix. An unreachable cluster, or one without quorum, is
//! [`KvError::Unavailable`] ("state store unavailable").
//!
//! Several servers share a prefix: [`election`] elects their leader through an etcd lease and
//! fences the leader's batches by it; a follower's store refuses writes.
//!
//! Every request goes through [`endpoints`]: one client per member, the next member asked when
//! one does not answer. TLS and etcd auth are the config's ([`EtcdTls`], [`Credentials`]).
//!
//! **Boundary**: bytes in, bytes out; nothing here knows tables or jobs. Not here: forwarding of
//! writes to the leader (the agent).

mod config;
pub mod election;
mod endpoints;
mod tls;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use drover_state::{
    KeyRange, Kv, KvError, KvFuture, KvPair, Revision, StateError, StateStore, WriteBatch, WriteOp,
};
use etcd_client::{Compare, CompareOp, GetOptions, Txn, TxnOp};

pub use crate::config::{Credentials, EtcdConfig, EtcdTls};
use crate::endpoints::Endpoints;

/// etcd's default `--max-txn-ops`: the most operations one transaction may hold.
pub const ETCD_MAX_TXN_OPS: usize = 128;
/// etcd's default `--max-request-bytes` (1.5 MiB).
pub const ETCD_MAX_REQUEST_BYTES: usize = 1536 * 1024;
/// Room kept below the request limit for the request's own framing and the compare.
const REQUEST_HEADROOM: usize = 16 * 1024;
/// The cap reported to the group-commit writer: etcd's limit, minus the revision put, minus room
/// for one write larger than every earlier one in the group (the writer's own rule).
const MAX_OPS_PER_BATCH: usize = ETCD_MAX_TXN_OPS - 1 - 31;
/// Values this long and longer are stored snappy-compressed.
const COMPRESS_FROM: usize = 1024;
/// Keys read per range request during a scan.
const SCAN_PAGE: i64 = 1000;
const TAG_RAW: u8 = 0;
const TAG_SNAPPY: u8 = 1;

/// A `Kv` on an etcd cluster.
pub struct EtcdKv {
    endpoints: Arc<Endpoints>,
    prefix: Vec<u8>,
    /// The highest revision this handle applied itself (its follower skips those).
    applied: Arc<AtomicU64>,
    /// What every batch is fenced by (see [`Fence`]).
    fence: Arc<std::sync::Mutex<Fence>>,
}

/// What a handle's writes are fenced by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fence {
    /// No fence: a store alone on its prefix (no election runs).
    Unfenced,
    /// This server leads: every batch commits only while `P leader` is held by this lease.
    Leader(i64),
    /// A server of a cluster that does not lead (now): every write is refused.
    Follower,
}

impl std::fmt::Debug for EtcdKv {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("EtcdKv")
            .field("prefix", &String::from_utf8_lossy(&self.prefix))
            .finish_non_exhaustive()
    }
}

fn decode_revision(bytes: &[u8]) -> Result<Revision, KvError> {
    let array: [u8; 8] = bytes.try_into().map_err(|_| KvError::Backend {
        operation: "read",
        reason: format!("the revision key holds {} bytes, not 8", bytes.len()),
    })?;
    Ok(u64::from_be_bytes(array))
}

fn encode_value(value: &[u8]) -> Result<Vec<u8>, KvError> {
    if value.len() < COMPRESS_FROM {
        let mut stored = Vec::with_capacity(value.len() + 1);
        stored.push(TAG_RAW);
        stored.extend_from_slice(value);
        return Ok(stored);
    }
    let compressed = snap::raw::Encoder::new()
        .compress_vec(value)
        .map_err(|error| KvError::Backend {
            operation: "encode",
            reason: error.to_string(),
        })?;
    let mut stored = Vec::with_capacity(compressed.len() + 1);
    stored.push(TAG_SNAPPY);
    stored.extend_from_slice(&compressed);
    Ok(stored)
}

fn decode_value(key: &[u8], stored: &[u8]) -> Result<Vec<u8>, KvError> {
    let undecodable = |reason: String| KvError::Backend {
        operation: "read",
        reason: format!(
            "record {} cannot be decoded: {reason}",
            String::from_utf8_lossy(key)
        ),
    };
    match stored.split_first() {
        Some((&TAG_RAW, value)) => Ok(value.to_vec()),
        Some((&TAG_SNAPPY, compressed)) => snap::raw::Decoder::new()
            .decompress_vec(compressed)
            .map_err(|error| undecodable(error.to_string())),
        Some((tag, _)) => Err(undecodable(format!("unknown encoding tag {tag}"))),
        None => Err(undecodable("empty value".to_owned())),
    }
}

/// The smallest key greater than every key that starts with `prefix`.
fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return end;
        }
    }
    // etcd's "to the end of the key space".
    vec![0]
}

impl EtcdKv {
    /// Connects to the cluster: one client per member, each asked in turn when the one before
    /// does not answer (see [`endpoints`]). No request is made yet; an unreachable cluster
    /// shows on the first read or write.
    pub async fn connect(config: &EtcdConfig) -> Result<Self, KvError> {
        let endpoints = Endpoints::new(config)?;
        Ok(Self {
            endpoints: Arc::new(endpoints),
            prefix: config.prefix.as_bytes().to_vec(),
            applied: Arc::new(AtomicU64::new(0)),
            fence: Arc::new(std::sync::Mutex::new(Fence::Unfenced)),
        })
    }

    /// The leader's key: its record, under its session lease (see [`election`]).
    pub(crate) fn leader_key(&self) -> Vec<u8> {
        self.prefixed(b"leader")
    }

    pub(crate) fn prefixed(&self, suffix: &[u8]) -> Vec<u8> {
        let mut key = self.prefix.clone();
        key.extend_from_slice(suffix);
        key
    }

    pub(crate) fn endpoints(&self) -> &Arc<Endpoints> {
        &self.endpoints
    }

    fn fence(&self) -> Fence {
        // A poisoned lock only means an election task panicked; the value is still a fence.
        *self
            .fence
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn set_fence(&self, fence: Fence) {
        *self
            .fence
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = fence;
    }

    /// Another handle on the same connection, revision and fence.
    pub(crate) fn sibling(&self) -> EtcdKv {
        EtcdKv {
            endpoints: Arc::clone(&self.endpoints),
            prefix: self.prefix.clone(),
            applied: Arc::clone(&self.applied),
            fence: Arc::clone(&self.fence),
        }
    }

    /// A value the whole cluster shares, made once: the first server to ask stores `make()`
    /// under `P shared/<name>`, every later one reads what it stored (the cluster's ID, the
    /// keyring's key-encryption key).
    pub async fn shared_value(
        &self,
        name: &str,
        make: impl FnOnce() -> Vec<u8>,
    ) -> Result<Vec<u8>, KvError> {
        let key = self.prefixed(format!("shared/{name}").as_bytes());
        let made = make();
        let transaction = Txn::new()
            .when(vec![Compare::version(key.clone(), CompareOp::Equal, 0)])
            .and_then(vec![TxnOp::put(key.clone(), made.clone(), None)])
            .or_else(vec![TxnOp::get(key, None)]);
        let response = self
            .endpoints
            .call("shared value", |mut client| {
                let transaction = transaction.clone();
                async move { client.txn(transaction).await }
            })
            .await?;
        if response.succeeded() {
            return Ok(made);
        }
        response
            .op_responses()
            .into_iter()
            .find_map(|answer| match answer {
                etcd_client::TxnOpResponse::Get(get) => {
                    get.kvs().first().map(|pair| pair.value().to_vec())
                }
                _ => None,
            })
            .ok_or(KvError::Backend {
                operation: "shared value",
                reason: format!("{name} vanished while it was read"),
            })
    }

    fn revision_key(&self) -> Vec<u8> {
        let mut key = self.prefix.clone();
        key.extend_from_slice(b"rev");
        key
    }

    /// The last batch's events (under the revision key's name, so one watch sees both).
    fn events_key(&self) -> Vec<u8> {
        self.prefixed(b"rev/events")
    }

    fn record_prefix(&self) -> Vec<u8> {
        let mut key = self.prefix.clone();
        key.extend_from_slice(b"k/");
        key
    }

    fn record_key(&self, key: &[u8]) -> Vec<u8> {
        let mut full = self.record_prefix();
        full.extend_from_slice(key);
        full
    }

    async fn read_revision(&self) -> Result<Revision, KvError> {
        let key = self.revision_key();
        let response = self
            .endpoints
            .call("read", |mut client| {
                let key = key.clone();
                async move { client.get(key, None).await }
            })
            .await?;
        match response.kvs().first() {
            Some(pair) => decode_revision(pair.value()),
            None => Ok(0),
        }
    }

    async fn scan_pairs(&self, range: KeyRange) -> Result<Vec<KvPair>, KvError> {
        let record_prefix = self.record_prefix();
        let end = match &range.end {
            Some(end) => self.record_key(end),
            None => prefix_end(&record_prefix),
        };
        let mut start = self.record_key(&range.start);
        let mut at_revision = 0_i64;
        let mut pairs = Vec::new();
        loop {
            let mut options = GetOptions::new()
                .with_range(end.clone())
                .with_limit(SCAN_PAGE);
            if at_revision > 0 {
                // Later pages read the same revision as the first: one consistent scan.
                options = options.with_revision(at_revision);
            }
            let response = self
                .endpoints
                .call("read", |mut client| {
                    let (start, options) = (start.clone(), options.clone());
                    async move { client.get(start, Some(options)).await }
                })
                .await?;
            if at_revision == 0 {
                at_revision = response.header().map_or(0, |header| header.revision());
            }
            for pair in response.kvs() {
                let key = pair.key()[record_prefix.len()..].to_vec();
                let value = decode_value(&key, pair.value())?;
                pairs.push(KvPair { key, value });
            }
            match response.kvs().last() {
                Some(last) if response.more() => {
                    start = last.key().to_vec();
                    start.push(0);
                }
                _ => return Ok(pairs),
            }
        }
    }

    async fn apply_batch(&self, batch: WriteBatch) -> Result<Revision, KvError> {
        let events = batch.events;
        // etcd refuses a transaction naming a key twice; a later op on a key wins anyway.
        let mut last_op = std::collections::BTreeMap::new();
        for op in batch.ops {
            match op {
                WriteOp::Put { key, value } => last_op.insert(key, Some(value)),
                WriteOp::Delete { key } => last_op.insert(key, None),
            };
        }
        if last_op.len() + 1 > ETCD_MAX_TXN_OPS {
            return Err(KvError::Backend {
                operation: "commit",
                reason: format!(
                    "a batch of {} operations exceeds etcd's --max-txn-ops ({ETCD_MAX_TXN_OPS})",
                    last_op.len() + 1
                ),
            });
        }
        let expected = match batch.expected_revision {
            Some(expected) => expected,
            None => self.read_revision().await?,
        };
        let revision_key = self.revision_key();
        let fence = match self.fence() {
            Fence::Unfenced => None,
            Fence::Leader(lease) => Some(lease),
            Fence::Follower => {
                return Err(KvError::Unavailable {
                    reason: "this server is not the cluster's leader; writes go to the leader"
                        .to_owned(),
                });
            }
        };
        let guard = if expected == 0 {
            Compare::version(revision_key.clone(), CompareOp::Equal, 0)
        } else {
            Compare::value(
                revision_key.clone(),
                CompareOp::Equal,
                expected.to_be_bytes().to_vec(),
            )
        };
        let next = expected + 1;
        let mut operations = Vec::with_capacity(last_op.len() + 1);
        let mut request_bytes = 0_usize;
        for (key, value) in last_op {
            let key = self.record_key(&key);
            request_bytes += key.len();
            match value {
                Some(value) => {
                    let stored = encode_value(&value)?;
                    request_bytes += stored.len();
                    operations.push(TxnOp::put(key, stored, None));
                }
                None => operations.push(TxnOp::delete(key, None)),
            }
        }
        if let Some(events) = events {
            let stored = encode_value(&events)?;
            request_bytes += stored.len();
            operations.push(TxnOp::put(self.events_key(), stored, None));
        }
        if request_bytes + REQUEST_HEADROOM > ETCD_MAX_REQUEST_BYTES {
            return Err(KvError::Backend {
                operation: "commit",
                reason: format!(
                    "a batch of {request_bytes} bytes (compressed) exceeds etcd's \
                     --max-request-bytes ({ETCD_MAX_REQUEST_BYTES})"
                ),
            });
        }
        operations.push(TxnOp::put(
            revision_key.clone(),
            next.to_be_bytes().to_vec(),
            None,
        ));
        let mut compares = vec![guard];
        if let Some(lease) = fence {
            compares.push(Compare::lease(self.leader_key(), CompareOp::Equal, lease));
        }
        let transaction = Txn::new()
            .when(compares)
            .and_then(operations)
            .or_else(vec![TxnOp::get(revision_key, None)]);
        let response = self
            .endpoints
            .call("commit", |mut client| {
                let transaction = transaction.clone();
                async move { client.txn(transaction).await }
            })
            .await?;
        if response.succeeded() {
            self.applied.fetch_max(next, Ordering::SeqCst);
            return Ok(next);
        }
        let found = response
            .op_responses()
            .into_iter()
            .find_map(|answer| match answer {
                etcd_client::TxnOpResponse::Get(get) => Some(
                    get.kvs()
                        .first()
                        .map_or(Ok(0), |pair| decode_revision(pair.value())),
                ),
                _ => None,
            })
            .unwrap_or(Ok(0))?;
        if found == expected && fence.is_some() {
            return Err(KvError::Unavailable {
                reason: "this server's leadership lapsed; writes go to the new leader".to_owned(),
            });
        }
        Err(KvError::RevisionMismatch { expected, found })
    }
}

impl Kv for EtcdKv {
    fn get<'a>(&'a self, key: &'a [u8]) -> KvFuture<'a, Option<Vec<u8>>> {
        Box::pin(async move {
            let record = self.record_key(key);
            let response = self
                .endpoints
                .call("read", |mut client| {
                    let record = record.clone();
                    async move { client.get(record, None).await }
                })
                .await?;
            response
                .kvs()
                .first()
                .map(|pair| decode_value(key, pair.value()))
                .transpose()
        })
    }

    fn scan(&self, range: KeyRange) -> KvFuture<'_, Vec<KvPair>> {
        Box::pin(self.scan_pairs(range))
    }

    fn apply(&self, batch: WriteBatch) -> KvFuture<'_, Revision> {
        Box::pin(self.apply_batch(batch))
    }

    fn revision(&self) -> KvFuture<'_, Revision> {
        Box::pin(self.read_revision())
    }

    fn max_ops_per_batch(&self) -> Option<usize> {
        Some(MAX_OPS_PER_BATCH)
    }

    fn shares_events(&self) -> bool {
        true
    }
}

/// Keeps `store` current with writes other stores make through the same prefix: watches the
/// revision key and, for every revision this handle did not apply itself, has the store reload
/// ([`StateStore::reload_from_backend`], which wakes blocking queries as a local write does),
/// then publishes the events that store wrote with the batch on this store's event stream.
/// The watch does not reconnect by itself, so this loop does, and reloads once on every
/// (re)connection to cover what it missed (events written while the watch was down are not
/// replayed). Ends when the store is closed.
pub fn follow(kv: &EtcdKv, store: StateStore) -> tokio::task::JoinHandle<()> {
    let endpoints = Arc::clone(&kv.endpoints);
    let key = kv.revision_key();
    let events_key = kv.events_key();
    let applied = Arc::clone(&kv.applied);
    tokio::spawn(async move {
        loop {
            let options = etcd_client::WatchOptions::new().with_prefix();
            let opened = endpoints
                .call_on(
                    "watch",
                    Duration::from_secs(5),
                    Duration::from_secs(5),
                    |mut client| {
                        let (key, options) = (key.clone(), options.clone());
                        async move { client.watch(key, Some(options)).await }
                    },
                )
                .await;
            match opened {
                Ok((member, mut stream)) => {
                    if !reload(&store).await {
                        return;
                    }
                    loop {
                        match stream.message().await {
                            Ok(Some(response)) => {
                                if response.canceled() {
                                    endpoints.failed(member);
                                    break;
                                }
                                // The etcd revisions of batches other stores applied.
                                let remote: std::collections::BTreeSet<i64> = response
                                    .events()
                                    .iter()
                                    .filter_map(|event| event.kv())
                                    .filter(|pair| pair.key() == key.as_slice())
                                    .filter(|pair| {
                                        decode_revision(pair.value()).is_ok_and(|revision| {
                                            revision > applied.load(Ordering::SeqCst)
                                        })
                                    })
                                    .map(etcd_client::KeyValue::mod_revision)
                                    .collect();
                                if remote.is_empty() {
                                    continue;
                                }
                                if !reload(&store).await {
                                    return;
                                }
                                for pair in response.events().iter().filter_map(|event| event.kv())
                                {
                                    if pair.key() != events_key.as_slice()
                                        || !remote.contains(&pair.mod_revision())
                                    {
                                        continue;
                                    }
                                    let published = decode_value(pair.key(), pair.value())
                                        .map_err(|error| error.to_string())
                                        .and_then(|events| {
                                            store
                                                .publish_shared_events(&events)
                                                .map_err(|error| error.to_string())
                                        });
                                    if let Err(error) = published {
                                        tracing::warn!(%error, "events of another server's write were not published");
                                    }
                                }
                            }
                            Ok(None) => {
                                endpoints.failed(member);
                                break;
                            }
                            Err(error) => {
                                tracing::warn!(%error, "etcd watch ended; reconnecting");
                                endpoints.failed(member);
                                break;
                            }
                        }
                    }
                }
                Err(error) => tracing::warn!(%error, "etcd watch failed; retrying"),
            }
            if !store.is_writable() {
                return;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    })
}

/// Reloads the store; false once the store is closed.
async fn reload(store: &StateStore) -> bool {
    match store.reload_from_backend().await {
        Ok(()) => true,
        Err(StateError::Closed) => false,
        Err(error) => {
            tracing::warn!(%error, "catching up with the etcd backend failed");
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_raw_and_compressed() {
        let small = b"{\"ID\":\"a\"}".to_vec();
        assert_eq!(encode_value(&small).unwrap()[0], TAG_RAW);
        assert_eq!(
            decode_value(b"k", &encode_value(&small).unwrap()).unwrap(),
            small
        );
        let large = serde_json::to_vec(&vec!["the same text again"; 2000]).unwrap();
        let stored = encode_value(&large).unwrap();
        assert_eq!(stored[0], TAG_SNAPPY);
        assert!(stored.len() < large.len() / 10);
        assert_eq!(decode_value(b"k", &stored).unwrap(), large);
        assert!(decode_value(b"k", &[7, 1]).is_err());
        assert!(decode_value(b"k", &[]).is_err());
    }

    #[test]
    fn prefix_end_is_the_next_key_after_the_prefix() {
        assert_eq!(prefix_end(b"drover/k/"), b"drover/k0".to_vec());
        assert_eq!(prefix_end(&[1, 0xff]), vec![2]);
        assert_eq!(prefix_end(&[0xff]), vec![0]);
    }
}
