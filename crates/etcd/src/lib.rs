//! The etcd backend of the state store: [`EtcdKv`] implements `drover_state::Kv` on an etcd v3
//! cluster, and [`follow`] keeps a store current with writes other stores make to the same
//! prefix.
//!
//! Layout under the configured prefix `P`:
//! - `P rev`: the backend revision (8 bytes, big endian), one more for every applied batch;
//! - `P rev/batch`: the nonce of the batch that made the current revision (see below);
//! - `P gen`: the generation of the records (8 bytes, big endian; absent: 0), one more for
//!   every restored snapshot;
//! - `P k/<key>` (generation 0) or `P g/<n>/<key>` (generation n): a record, as a one-byte
//!   encoding tag and the bytes (tag 0: as given; tag 1: snappy raw block, for values of 1 KiB
//!   and more: the store's JSON records compress well and etcd refuses a request over
//!   `--max-request-bytes`, 1.5 MiB by default).
//!
//! Every [`Kv::apply`] is one etcd transaction: compare `P rev` with the revision the store last
//! saw (and `P gen` with the generation it reads), then the puts and deletes, the new revision
//! and the batch's nonce; a store that lost the race gets [`KvError::RevisionMismatch`] and
//! reloads (see `drover_state::Engine`). A transaction whose answer was lost (a member that
//! died or hung after committing it) is sent again to the next member, where its compare
//! fails: the nonce in `P rev/batch` then tells that it was this batch that committed, and the
//! write is answered as done instead of as a lost race.
//!
//! A snapshot's restore ([`Kv::replace_all`]) cannot fit one transaction (etcd caps them at
//! 128 operations and 1.5 MiB): the new records are written under the next generation's prefix
//! in batches fenced by the leader's lease, where no store reads them, and one last
//! transaction, guarded like any batch, moves `P gen` and `P rev`. Every store sees the old
//! records or the new ones; the old generation is deleted a while later (a store reading it as
//! the switch committed reads it whole, then reloads), and a restore cut short leaves only
//! unread keys: each restore first removes every generation but the current one. The store's own
//! modify indexes are records it writes in the same transactions, so they stay monotonic across
//! every store sharing the prefix. An unreachable cluster, or one without quorum, is
//! [`KvError::Unavailable`] ("state store unavailable").
//!
//! Several servers share a prefix: [`election`] elects their leader through an etcd lease and
//! fences the leader's batches by it; a follower's store refuses writes.
//!
//! [`members`] lists the etcd cluster's own members for operators.
//!
//! Every request goes through [`endpoints`]: one client per member, the next member asked when
//! one does not answer. TLS and etcd auth are the config's ([`EtcdTls`], [`Credentials`]).
//!
//! **Boundary**: bytes in, bytes out; nothing here knows tables or jobs. Not here: forwarding of
//! writes to the leader (the agent).
//!
//! # Layers
//!
//! Each module directly under `src/` uses only modules on the lines below its own (`error`
//! modules aside), as `crates/structs/tests/module_cycles.rs` checks; top first:
//!
//! - `election`
//! - `endpoints`
//! - `tls`
//! - `config`, `members`
//!
//! # Design notes
//!
//! `EtcdKv`, the state store's `Kv` on an etcd v3 cluster (`etcd-client` with its
//! OpenSSL transport), used when the agent config has `etcd { endpoints, prefix }` (with
//! `ca_file`/`cert_file`/`key_file` for TLS, `username`/`password` for etcd auth): one transaction per
//! batch, compared on the prefix's revision key; values of 1 KiB and more snappy-compressed;
//! paged scans at one revision; etcd's `--max-txn-ops` and `--max-request-bytes` as clear errors
//! (the writer's groups stay under the first); no quorum is `KvError::Unavailable`, answered as
//! HTTP 503 "state store unavailable" while reads answer from the tables. `follow` watches the
//! revision key and reloads the store for revisions it did not write, then publishes the events
//! the writing store kept with that batch (`P rev/events`, `Kv::shares_events`) on the
//! follower's event stream; a watch that ended is opened again from the etcd revision after the
//! last one seen, so etcd replays what was missed, events included (a compacted gap: reload,
//! logged, `FollowStats`). Every batch writes its nonce to `P rev/batch`: a transaction retried on
//! another member after its answer was lost finds its own nonce and answers success. A restore
//! (`replace_all`) stages the records as the next generation (`P g/<n>/`, generation 0 being
//! `P k/`) in lease-fenced batches within etcd's limits, then one transaction guarded by
//! `P rev`, `P gen` and the lease switches to it; the old generation is deleted 30 s later.
//! `members`: etcd's member list and each member's status, for operators. The agent links it (so the `drover` binary does; `drover-shim` does
//! not). Several servers share a prefix: `election` keeps a session lease per server
//! (`P alive/<name>` under it, taken by a compare-and-create: a server whose name a live server
//! holds refuses to start, naming the name and that server's address; `P members/<name>` kept)
//! and elects the leader by a
//! compare-and-create of `P leader` under that lease (4 s TTL), which the others watch and take
//! the moment it goes; the leader's batches are fenced by its lease, a follower's store refuses
//! every write, and a watchdog on its own timer steps a server that cannot renew down half a
//! second before its lease can lapse (`step_down_after`), so it has stopped before another can be
//! elected; a later renewal with the lease alive and `P leader` still its own makes it lead again
//! in a new term (`SessionClock` on instants, the watchdog on paused tokio time). A session ends
//! when etcd says it no longer knows the lease (a keep-alive answered with TTL 0, a keep-alive
//! stream or a campaign refused with "lease not found": it lapsed while the server was cut off,
//! or was revoked); the server, stepped down by then, opens a new session and campaigns again.
//! A broken keep-alive stream is opened again and a failing member left for the others, neither
//! ending the session (`tests/sessions_on_etcd.rs` cuts servers' links with `LinkProxy`). `config` (a leaf): `EtcdConfig`, TLS and
//! credentials, and how an etcd client error becomes the store's (a member killed mid-request,
//! tonic's `Unknown` "transport error", counts as unavailable). A server opens its store before
//! it joins the election: a fresh prefix's schema marker is written unfenced. `endpoints`: one client per etcd member
//! (etcd-client's balanced channel keeps routing to a dead member; plain `http://` members are
//! dialled by tonic's own connector, which sets `TCP_NODELAY`: etcd-client's OpenSSL transport
//! does not, and each request then waited about 40 ms for a delayed ACK); every request goes to the
//! member that answered last and moves to the next on a transport error, "no leader" or its
//! per-attempt timeout; the session's keep-alives go through every member at once, each on its
//! own stream with a timeout of TTL/5 (`RenewalSchedule`), so losing any one member costs no
//! leadership. `tls` reads and checks the PEM files once. `shared_value` keeps what the cluster
//! shares (its ID, the keyring's KEK). The tests start a 3-member cluster (`tests/common`, also
//! over TLS with `--client-cert-auth`, certificates made with the `openssl` CLI).

mod config;
pub mod election;
mod endpoints;
pub mod members;
mod tls;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use drover_state::{
    KeyRange, Kv, KvContents, KvError, KvFuture, KvPair, Revision, StateError, StateStore,
    WriteBatch, WriteOp,
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
/// How long reading back whether a batch whose answer was lost committed may take.
const READ_BACK_BUDGET: Duration = Duration::from_secs(1);
/// How long the records of the generation before a restore stay in etcd after it.
const OLD_GENERATION_KEPT: Duration = Duration::from_secs(30);
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
    /// The generation of the records this handle reads and writes (`P gen`), as last read.
    generation: Arc<AtomicU64>,
    /// This handle's batch nonces: a random prefix and a counter.
    nonce_seed: u64,
    batches: Arc<AtomicU64>,
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
            generation: Arc::new(AtomicU64::new(0)),
            nonce_seed: std::hash::BuildHasher::hash_one(
                &std::collections::hash_map::RandomState::new(),
                std::process::id(),
            ),
            batches: Arc::new(AtomicU64::new(0)),
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
            generation: Arc::clone(&self.generation),
            nonce_seed: self.nonce_seed,
            batches: Arc::clone(&self.batches),
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

    /// The nonce of the batch that made the current revision.
    fn batch_key(&self) -> Vec<u8> {
        self.prefixed(b"rev/batch")
    }

    fn generation_key(&self) -> Vec<u8> {
        self.prefixed(b"gen")
    }

    /// The prefix of generation `generation`'s records.
    fn generation_prefix(&self, generation: u64) -> Vec<u8> {
        if generation == 0 {
            self.prefixed(b"k/")
        } else {
            self.prefixed(format!("g/{generation}/").as_bytes())
        }
    }

    fn record_prefix(&self) -> Vec<u8> {
        self.generation_prefix(self.generation.load(Ordering::SeqCst))
    }

    fn record_key(&self, key: &[u8]) -> Vec<u8> {
        let mut full = self.record_prefix();
        full.extend_from_slice(key);
        full
    }

    /// A compare that holds while `P gen` is `generation`.
    fn generation_guard(&self, generation: u64) -> Compare {
        if generation == 0 {
            Compare::version(self.generation_key(), CompareOp::Equal, 0)
        } else {
            Compare::value(
                self.generation_key(),
                CompareOp::Equal,
                generation.to_be_bytes().to_vec(),
            )
        }
    }

    /// A compare that holds while `P rev` is `revision`.
    fn revision_guard(&self, revision: Revision) -> Compare {
        if revision == 0 {
            Compare::version(self.revision_key(), CompareOp::Equal, 0)
        } else {
            Compare::value(
                self.revision_key(),
                CompareOp::Equal,
                revision.to_be_bytes().to_vec(),
            )
        }
    }

    /// A nonce no other batch of any handle carries.
    fn next_nonce(&self) -> Vec<u8> {
        let mut nonce = self.nonce_seed.to_be_bytes().to_vec();
        nonce.extend_from_slice(&self.batches.fetch_add(1, Ordering::SeqCst).to_be_bytes());
        nonce
    }

    /// The revision and the generation, read together; the generation is remembered (the
    /// records read next are that generation's).
    async fn read_revision(&self) -> Result<Revision, KvError> {
        let transaction = Txn::new().and_then(vec![
            TxnOp::get(self.revision_key(), None),
            TxnOp::get(self.generation_key(), None),
        ]);
        let response = self
            .endpoints
            .call("read", |mut client| {
                let transaction = transaction.clone();
                async move { client.txn(transaction).await }
            })
            .await?;
        let values: Vec<Option<Vec<u8>>> = response
            .op_responses()
            .into_iter()
            .map(|answer| match answer {
                etcd_client::TxnOpResponse::Get(get) => {
                    get.kvs().first().map(|pair| pair.value().to_vec())
                }
                _ => None,
            })
            .collect();
        let decode = |index: usize| {
            values
                .get(index)
                .cloned()
                .flatten()
                .map_or(Ok(0), |bytes| decode_revision(&bytes))
        };
        let (revision, generation) = (decode(0)?, decode(1)?);
        self.generation.store(generation, Ordering::SeqCst);
        Ok(revision)
    }

    /// Reads one page of records from `start` (`options` carry the range's end and the page
    /// size), appends them to `pairs` with keys relative to `record_prefix`, and answers the
    /// revision the page was read at and where the next page starts (`None`: the range is read).
    async fn read_page(
        &self,
        start: &[u8],
        options: GetOptions,
        record_prefix: &[u8],
        pairs: &mut Vec<KvPair>,
    ) -> Result<(i64, Option<Vec<u8>>), KvError> {
        let response = self
            .endpoints
            .call("read", |mut client| {
                let (start, options) = (start.to_vec(), options.clone());
                async move { client.get(start, Some(options)).await }
            })
            .await?;
        for pair in response.kvs() {
            let key = pair.key()[record_prefix.len()..].to_vec();
            let value = decode_value(&key, pair.value())?;
            pairs.push(KvPair { key, value });
        }
        let revision = response.header().map_or(0, |header| header.revision());
        let next = match response.kvs().last() {
            Some(last) if response.more() => {
                let mut next = last.key().to_vec();
                next.push(0);
                Some(next)
            }
            _ => None,
        };
        Ok((revision, next))
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
            let (revision, next) = self
                .read_page(&start, options, &record_prefix, &mut pairs)
                .await?;
            if at_revision == 0 {
                at_revision = revision;
            }
            match next {
                Some(next) => start = next,
                None => return Ok(pairs),
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
        let generation = self.generation.load(Ordering::SeqCst);
        let guard = self.revision_guard(expected);
        let next = expected + 1;
        let nonce = self.next_nonce();
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
        operations.push(TxnOp::put(self.batch_key(), nonce.clone(), None));
        let mut compares = vec![guard, self.generation_guard(generation)];
        if let Some(lease) = fence {
            compares.push(Compare::lease(self.leader_key(), CompareOp::Equal, lease));
        }
        let transaction = Txn::new().when(compares).and_then(operations).or_else(vec![
            TxnOp::get(revision_key, None),
            TxnOp::get(self.batch_key(), None),
        ]);
        let response = match self
            .endpoints
            .call("commit", |mut client| {
                let transaction = transaction.clone();
                async move { client.txn(transaction).await }
            })
            .await
        {
            Ok(response) => response,
            // The last member asked may have committed it and then failed to answer: ask.
            Err(error @ KvError::Unavailable { .. }) => {
                return match self.committed_as(next, &nonce).await {
                    Ok(true) => {
                        self.applied.fetch_max(next, Ordering::SeqCst);
                        Ok(next)
                    }
                    _ => Err(error),
                };
            }
            Err(error) => return Err(error),
        };
        if response.succeeded() {
            self.applied.fetch_max(next, Ordering::SeqCst);
            return Ok(next);
        }
        let (found, found_nonce) = revision_and_nonce(&response)?;
        if found == next && found_nonce.as_deref() == Some(nonce.as_slice()) {
            // An earlier attempt of this very batch committed (its answer was lost on the way
            // back, and the call moved on to another member): the write is done.
            tracing::debug!(revision = next, "a retried batch had already committed");
            self.applied.fetch_max(next, Ordering::SeqCst);
            return Ok(next);
        }
        if found == expected && fence.is_some() {
            return Err(KvError::Unavailable {
                reason: "this server's leadership lapsed; writes go to the new leader".to_owned(),
            });
        }
        Err(KvError::RevisionMismatch { expected, found })
    }
}

/// The revision and the batch nonce a failed transaction's `or_else` read.
fn revision_and_nonce(
    response: &etcd_client::TxnResponse,
) -> Result<(Revision, Option<Vec<u8>>), KvError> {
    let mut values = response
        .op_responses()
        .into_iter()
        .map(|answer| match answer {
            etcd_client::TxnOpResponse::Get(get) => {
                get.kvs().first().map(|pair| pair.value().to_vec())
            }
            _ => None,
        });
    let revision = values
        .next()
        .flatten()
        .map_or(Ok(0), |bytes| decode_revision(&bytes))?;
    Ok((revision, values.next().flatten()))
}

impl EtcdKv {
    /// Whether the batch with `nonce` made revision `revision` (read back after a commit whose
    /// answer never came).
    async fn committed_as(&self, revision: Revision, nonce: &[u8]) -> Result<bool, KvError> {
        let transaction = Txn::new().and_then(vec![
            TxnOp::get(self.revision_key(), None),
            TxnOp::get(self.batch_key(), None),
        ]);
        // Briefly: without a quorum this read fails as the write did, and the caller's error
        // should not wait twice as long.
        let response = self
            .endpoints
            .call_on("read", READ_BACK_BUDGET, READ_BACK_BUDGET, |mut client| {
                let transaction = transaction.clone();
                async move { client.txn(transaction).await }
            })
            .await?
            .1;
        let (found, found_nonce) = revision_and_nonce(&response)?;
        Ok(found == revision && found_nonce.as_deref() == Some(nonce))
    }

    /// Every record of the current generation and the revision, at one etcd revision.
    async fn read_everything(&self, stale: bool) -> Result<KvContents, KvError> {
        let options = |at: i64| {
            let options = GetOptions::new();
            let options = if at > 0 {
                options.with_revision(at)
            } else {
                options
            };
            if stale {
                options.with_serializable()
            } else {
                options
            }
        };
        let revision_key = self.revision_key();
        let first = self
            .endpoints
            .call("read", |mut client| {
                let (key, options) = (revision_key.clone(), options(0));
                async move { client.get(key, Some(options)).await }
            })
            .await?;
        let header = first
            .header()
            .map(|header| (header.revision(), header.raft_term()));
        let (at, term) = header.unwrap_or((0, 0));
        let revision = match first.kvs().first() {
            Some(pair) => decode_revision(pair.value())?,
            None => 0,
        };
        let generation_key = self.generation_key();
        let generation = self
            .endpoints
            .call("read", |mut client| {
                let (key, options) = (generation_key.clone(), options(at));
                async move { client.get(key, Some(options)).await }
            })
            .await?
            .kvs()
            .first()
            .map_or(Ok(0), |pair| decode_revision(pair.value()))?;
        let record_prefix = self.generation_prefix(generation);
        let end = prefix_end(&record_prefix);
        let mut start = record_prefix.clone();
        let mut pairs = Vec::new();
        loop {
            let page = options(at).with_range(end.clone()).with_limit(SCAN_PAGE);
            let (_, next) = self
                .read_page(&start, page, &record_prefix, &mut pairs)
                .await?;
            match next {
                Some(next) => start = next,
                None => break,
            }
        }
        Ok(KvContents {
            revision,
            pairs,
            term,
            backend: "etcd",
        })
    }

    /// Writes `pairs` as the next generation in fenced batches, then switches to it in one
    /// guarded transaction (see the module docs).
    async fn replace_everything(
        &self,
        pairs: Vec<KvPair>,
        expected_revision: Option<Revision>,
    ) -> Result<Revision, KvError> {
        let lease = match self.fence() {
            Fence::Unfenced => None,
            Fence::Leader(lease) => Some(lease),
            Fence::Follower => {
                return Err(KvError::Unavailable {
                    reason: "this server is not the cluster's leader; a restore goes to the leader"
                        .to_owned(),
                });
            }
        };
        let fenced = |compares: Vec<Compare>| match lease {
            Some(lease) => {
                let mut compares = compares;
                compares.push(Compare::lease(self.leader_key(), CompareOp::Equal, lease));
                compares
            }
            None => compares,
        };
        let current_revision = self.read_revision().await?;
        let expected = expected_revision.unwrap_or(current_revision);
        let generation = self.generation.load(Ordering::SeqCst);
        let next_generation = generation + 1;
        let staging = self.generation_prefix(next_generation);
        let lapsed = || KvError::Unavailable {
            reason: "this server's leadership lapsed during the restore; nothing was replaced"
                .to_owned(),
        };
        // Every generation but the current one: what a restore cut short left, and the
        // generation before the last restore if its removal did not run.
        let current = self.generation_prefix(generation);
        let generations = self.prefixed(b"g/");
        let range = |start: Vec<u8>, end: Vec<u8>| {
            TxnOp::delete(
                start,
                Some(etcd_client::DeleteOptions::new().with_range(end)),
            )
        };
        let mut clear_ops = vec![range(generations.clone(), prefix_end(&generations))];
        if generation > 0 {
            clear_ops = vec![
                range(generations.clone(), current.clone()),
                range(prefix_end(&current), prefix_end(&generations)),
                range(self.prefixed(b"k/"), prefix_end(&self.prefixed(b"k/"))),
            ];
        }
        let clear = Txn::new().when(fenced(Vec::new())).and_then(clear_ops);
        self.commit_staging(&clear, &lapsed).await?;
        let mut operations = Vec::new();
        let mut request_bytes = 0_usize;
        for pair in pairs {
            let mut key = staging.clone();
            key.extend_from_slice(&pair.key);
            let stored = encode_value(&pair.value)?;
            let size = key.len() + stored.len();
            if size + REQUEST_HEADROOM > ETCD_MAX_REQUEST_BYTES {
                return Err(KvError::Backend {
                    operation: "restore",
                    reason: format!(
                        "record {} is {size} bytes (compressed), over etcd's --max-request-bytes                          ({ETCD_MAX_REQUEST_BYTES})",
                        String::from_utf8_lossy(&pair.key)
                    ),
                });
            }
            if operations.len() + 1 > ETCD_MAX_TXN_OPS - 1
                || request_bytes + size + REQUEST_HEADROOM > ETCD_MAX_REQUEST_BYTES
            {
                let batch = Txn::new()
                    .when(fenced(Vec::new()))
                    .and_then(std::mem::take(&mut operations));
                self.commit_staging(&batch, &lapsed).await?;
                request_bytes = 0;
            }
            request_bytes += size;
            operations.push(TxnOp::put(key, stored, None));
        }
        if !operations.is_empty() {
            let batch = Txn::new().when(fenced(Vec::new())).and_then(operations);
            self.commit_staging(&batch, &lapsed).await?;
        }
        let next = expected + 1;
        let nonce = self.next_nonce();
        let old = self.generation_prefix(generation);
        let switch = Txn::new()
            .when(fenced(vec![
                self.revision_guard(expected),
                self.generation_guard(generation),
            ]))
            .and_then(vec![
                TxnOp::put(
                    self.generation_key(),
                    next_generation.to_be_bytes().to_vec(),
                    None,
                ),
                TxnOp::put(self.revision_key(), next.to_be_bytes().to_vec(), None),
                TxnOp::put(self.batch_key(), nonce.clone(), None),
                TxnOp::delete(self.events_key(), None),
            ])
            .or_else(vec![
                TxnOp::get(self.revision_key(), None),
                TxnOp::get(self.batch_key(), None),
            ]);
        let answer = self
            .endpoints
            .call("restore", |mut client| {
                let switch = switch.clone();
                async move { client.txn(switch).await }
            })
            .await;
        let switched = match answer {
            Ok(response) if response.succeeded() => true,
            Ok(response) => {
                let (found, found_nonce) = revision_and_nonce(&response)?;
                if found == next && found_nonce.as_deref() == Some(nonce.as_slice()) {
                    true
                } else if found == expected && lease.is_some() {
                    return Err(lapsed());
                } else {
                    return Err(KvError::RevisionMismatch { expected, found });
                }
            }
            Err(error @ KvError::Unavailable { .. }) => {
                if self.committed_as(next, &nonce).await.unwrap_or(false) {
                    true
                } else {
                    return Err(error);
                }
            }
            Err(error) => return Err(error),
        };
        if switched {
            self.generation.store(next_generation, Ordering::SeqCst);
            self.applied.fetch_max(next, Ordering::SeqCst);
            // The old generation goes once every store has had time to reload from the new
            // one: a store reading tables while the switch committed reads the old ones whole,
            // then reloads on the switch's revision.
            let endpoints = Arc::clone(&self.endpoints);
            tokio::spawn(async move {
                tokio::time::sleep(OLD_GENERATION_KEPT).await;
                let removed = endpoints
                    .call("restore", |mut client| {
                        let (start, end) = (old.clone(), prefix_end(&old));
                        async move {
                            client
                                .delete(
                                    start,
                                    Some(etcd_client::DeleteOptions::new().with_range(end)),
                                )
                                .await
                        }
                    })
                    .await;
                if let Err(error) = removed {
                    tracing::warn!(%error, "removing the records from before a restore failed; the next restore removes them");
                }
            });
        }
        Ok(next)
    }

    /// One transaction of a restore's staging, refused as a lapsed leadership when its fence
    /// does not hold.
    async fn commit_staging(
        &self,
        transaction: &Txn,
        lapsed: &impl Fn() -> KvError,
    ) -> Result<(), KvError> {
        let response = self
            .endpoints
            .call("restore", |mut client| {
                let transaction = transaction.clone();
                async move { client.txn(transaction).await }
            })
            .await?;
        if response.succeeded() {
            Ok(())
        } else {
            Err(lapsed())
        }
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

    fn read_all(&self, stale: bool) -> KvFuture<'_, KvContents> {
        Box::pin(self.read_everything(stale))
    }

    fn replace_all(
        &self,
        pairs: Vec<KvPair>,
        expected_revision: Option<Revision>,
    ) -> KvFuture<'_, Revision> {
        Box::pin(self.replace_everything(pairs, expected_revision))
    }
}

/// What a store's follower ([`follow`]) has done.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct FollowStats {
    /// Times the watch was opened again from the revision after the last one it saw, so the
    /// writes made while it was down were replayed with their events.
    pub resumed: u64,
    /// Times those revisions had been compacted away in etcd: the store reloaded, and the
    /// events of those writes were not published on this server.
    pub compacted: u64,
}

/// A running follower: ends when the store is closed, or when aborted.
pub struct Follower {
    task: tokio::task::JoinHandle<()>,
    stats: Arc<std::sync::Mutex<FollowStats>>,
}

impl Follower {
    /// Stops following at once.
    pub fn abort(&self) {
        self.task.abort();
    }

    /// What it has done so far.
    pub fn stats(&self) -> FollowStats {
        *self
            .stats
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Keeps `store` current with writes other stores make through the same prefix: watches the
/// revision key and, for every revision this handle did not apply itself, has the store reload
/// ([`StateStore::reload_from_backend`], which wakes blocking queries as a local write does),
/// then publishes the events that store wrote with the batch on this store's event stream.
///
/// The watch does not reconnect by itself, so this loop does: it opens the watch again from the
/// etcd revision after the last one it saw, and etcd replays every write made meanwhile, with
/// its events. When etcd has compacted those revisions away, the store reloads instead and the
/// loss of their events is logged (and counted in [`FollowStats::compacted`]).
pub fn follow(kv: &EtcdKv, store: StateStore) -> Follower {
    let endpoints = Arc::clone(&kv.endpoints);
    let key = kv.revision_key();
    let events_key = kv.events_key();
    let applied = Arc::clone(&kv.applied);
    let stats = Arc::new(std::sync::Mutex::new(FollowStats::default()));
    let counted = Arc::clone(&stats);
    let count = move |change: fn(&mut FollowStats)| {
        change(
            &mut counted
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
    };
    let task = tokio::spawn(async move {
        // The last etcd revision whose events this loop has seen (0: none yet).
        let mut seen: i64 = 0;
        loop {
            let resume_from = (seen > 0).then_some(seen + 1);
            let mut options = etcd_client::WatchOptions::new().with_prefix();
            if let Some(from) = resume_from {
                options = options.with_start_revision(from);
            }
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
                    if let Some(from) = resume_from {
                        count(|stats| stats.resumed += 1);
                        tracing::debug!(from, "etcd watch resumed");
                    } else {
                        // A fresh watch: its creation's revision is taken before the store
                        // reloads, so a link cut right after the reload resumes from there
                        // (with the writes' events) instead of starting over.
                        match stream.message().await {
                            Ok(Some(response)) if response.created() => {
                                seen = response
                                    .header()
                                    .map_or(0, etcd_client::ResponseHeader::revision);
                            }
                            answer => {
                                if let Err(error) = answer {
                                    tracing::warn!(%error, "etcd watch ended; reconnecting");
                                }
                                endpoints.failed(member);
                                tokio::time::sleep(Duration::from_secs(1)).await;
                                continue;
                            }
                        }
                        if !reload(&store).await {
                            return;
                        }
                    }
                    loop {
                        match stream.message().await {
                            Ok(Some(response)) => {
                                if response.compact_revision() > 0 {
                                    tracing::warn!(
                                        from = seen + 1,
                                        compacted = response.compact_revision(),
                                        "etcd compacted the revisions this server missed while its \
                                         watch was down; reloading the state without their events"
                                    );
                                    count(|stats| stats.compacted += 1);
                                    seen = 0;
                                    endpoints.failed(member);
                                    break;
                                }
                                if response.canceled() {
                                    endpoints.failed(member);
                                    break;
                                }
                                if let Some(last) = response
                                    .events()
                                    .iter()
                                    .filter_map(|event| event.kv())
                                    .map(etcd_client::KeyValue::mod_revision)
                                    .max()
                                {
                                    seen = seen.max(last);
                                }
                                if !catch_up(&store, &response, &key, &events_key, &applied).await {
                                    return;
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
    });
    Follower { task, stats }
}

/// Brings `store` up to the writes of one watch response that other stores made, and publishes
/// their events; false once the store is closed.
async fn catch_up(
    store: &StateStore,
    response: &etcd_client::WatchResponse,
    key: &[u8],
    events_key: &[u8],
    applied: &AtomicU64,
) -> bool {
    // The etcd revisions of batches other stores applied.
    let remote: std::collections::BTreeSet<i64> = response
        .events()
        .iter()
        .filter_map(|event| event.kv())
        .filter(|pair| pair.key() == key)
        .filter(|pair| {
            decode_revision(pair.value())
                .is_ok_and(|revision| revision > applied.load(Ordering::SeqCst))
        })
        .map(etcd_client::KeyValue::mod_revision)
        .collect();
    if remote.is_empty() {
        return true;
    }
    if !reload(store).await {
        return false;
    }
    for pair in response.events().iter().filter_map(|event| event.kv()) {
        if pair.key() != events_key || !remote.contains(&pair.mod_revision()) {
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
    true
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
