//! Several server agents on one prefix: the leader elected through an etcd lease, and the
//! servers' member records.
//!
//! Each server keeps a *session*: an etcd lease it renews through every member, each a quarter
//! of its TTL apart. Keys under the prefix `P`:
//! - `P leader`: the leader's record, put under the leader's session lease by a
//!   compare-and-create (`version == 0`); while it leads, every batch its store applies is
//!   fenced by that lease ([`crate::Fence::Leader`]), so a server whose session lapsed cannot
//!   write even before it notices;
//! - `P members/<name>`: each server's record, kept after it dies (it is then listed failed);
//! - `P alive/<name>`: the same record under the server's session lease, present while it lives,
//!   taken by a compare-and-create: a second server of the same name is refused
//!   ([`CampaignError::NameTaken`]) while the first lives, and takes the name once its session
//!   ends.
//!
//! A server that cannot renew its session steps down (stops leading, its store refuses writes)
//! half a second before the TTL has passed since its last renewal was sent
//! ([`step_down_after`]), before etcd can let the lease lapse and another server take
//! `P leader`; it leads again, in a new term, if a later renewal shows the lease still alive and
//! `P leader` still its own. A session ends when etcd says it no longer knows the lease (a
//! keep-alive answered with a TTL of 0, a keep-alive stream or a campaign refused with "lease
//! not found": it lapsed while the server was cut off, or was revoked); the server, stepped
//! down by then, opens a new session with a new lease and campaigns again. A broken keep-alive
//! stream is opened again, through the same member, and a member that fails is left for the
//! others: neither ends the session. Followers watch `P leader` and campaign the moment it is gone, so a
//! dead leader is replaced about a TTL after its last renewal. The decisions are
//! [`SessionClock`]'s, on instants handed in, and the watchdog's, on tokio's clock, so they are
//! tested without waiting.
//!
//! Not here: what a leader does (the server crate), what a record holds (the agent encodes it).

use std::sync::Arc;
use std::time::Duration;

use etcd_client::{
    Compare, CompareOp, GetOptions, LeaseKeepAliveStream, LeaseKeeper, PutOptions, Txn, TxnOp,
};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::endpoints::Endpoints;
use crate::{EtcdKv, Fence, KvError};

/// How long a session outlives its last renewal: a killed leader is replaced this long after
/// its last keep-alive, plus up to half a second for etcd to notice (its lessor looks for
/// expired leases twice a second); the followers watch `P leader` and campaign at once.
/// Long enough that etcd electing a leader of its own (up to about 3 s after its leader dies,
/// with its default timing) costs no leadership: the leader's keep-alives are answered again
/// before it would step down.
pub const SESSION_TTL: Duration = Duration::from_secs(4);
/// How long before its session may lapse a leader stops leading (at most a quarter of the TTL):
/// etcd lets a lease lapse no sooner than a TTL after the renewal that was sent last, so the
/// server has stopped before another can be elected.
const STEP_DOWN_MARGIN: Duration = Duration::from_millis(500);
/// How often a server reads `P leader` (and campaigns when it is free), besides whenever its
/// watch on the key reports a change.
pub const POLL_INTERVAL: Duration = Duration::from_millis(250);

/// Who a server is, as it campaigns.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// The agent's name (unique among the cluster's servers).
    pub name: String,
    /// The record published as `P leader`, `P members/<name>` and `P alive/<name>`.
    pub record: Vec<u8>,
    pub ttl: Duration,
    pub poll: Duration,
}

impl Candidate {
    /// `name` with `record`, the default TTL and poll interval.
    pub fn new(name: impl Into<String>, record: Vec<u8>) -> Self {
        Self {
            name: name.into(),
            record,
            ttl: SESSION_TTL,
            poll: POLL_INTERVAL,
        }
    }
}

/// What a server knows of its cluster's leadership now.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Leadership {
    /// The leader's record, when one is known.
    pub leader: Option<Vec<u8>>,
    /// Whether this server leads.
    pub is_leader: bool,
    /// How many times this server has taken the leadership (a new term each time).
    pub term: u64,
    /// When etcd last answered this server (`None`: never).
    pub last_contact: Option<Instant>,
}

/// One server's member record and whether its session is alive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub name: String,
    pub record: Vec<u8>,
    pub alive: bool,
}

/// When the session was last renewed, and whether it can still be relied on: one per session,
/// shared by the keep-alives through every member.
#[derive(Debug, Clone, Copy)]
pub struct SessionClock {
    ttl: Duration,
    last_renewal: Instant,
}

impl SessionClock {
    /// A session granted at `now`.
    pub fn new(ttl: Duration, now: Instant) -> Self {
        Self {
            ttl,
            last_renewal: now,
        }
    }

    /// A keep-alive sent at `sent` was answered (through any member; an answer to an older
    /// keep-alive arriving late changes nothing).
    pub fn renewed(&mut self, sent: Instant) {
        self.last_renewal = self.last_renewal.max(sent);
    }

    /// When the last answered keep-alive was sent.
    pub fn last_renewal(&self) -> Instant {
        self.last_renewal
    }

    /// When the server stops relying on the session unless it is renewed before:
    /// [`step_down_after`] the last renewal was sent.
    pub fn step_down_at(&self) -> Instant {
        self.last_renewal + step_down_after(self.ttl)
    }

    /// Whether the server must stop relying on the session at `now`: etcd may let it lapse
    /// soon, and another server take `P leader` after it.
    pub fn must_step_down(&self, now: Instant) -> bool {
        now >= self.step_down_at()
    }
}

/// A running campaign: the task that keeps the session and the leadership, and what it knows.
pub struct Election {
    view: watch::Receiver<Leadership>,
    task: tokio::task::JoinHandle<()>,
}

impl Election {
    /// What the server knows of the leadership, updated as it changes.
    pub fn watch(&self) -> watch::Receiver<Leadership> {
        self.view.clone()
    }

    /// Stops campaigning at once (as a killed agent would: the session lapses by itself).
    pub fn abort(&self) {
        self.task.abort();
    }
}

impl Drop for Election {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl EtcdKv {
    /// Starts campaigning for the prefix's leadership as `candidate`. From now on this handle's
    /// writes are refused while the server does not lead, and fenced by its session lease while
    /// it does.
    ///
    /// The first session is opened before this answers, and with it the server's name claimed
    /// (`P alive/<name>`, a compare-and-create under the session's lease): while another live
    /// server holds the name this fails with [`CampaignError::NameTaken`], so two servers never
    /// share a name (as Serf refuses a duplicate name in Nomad). A name held by a session that
    /// is not renewed (a server that died, often this one before a restart) is waited for, up
    /// to a TTL and a second, so only a live holder is refused.
    pub async fn campaign(&self, candidate: Candidate) -> Result<Election, CampaignError> {
        self.set_fence(Fence::Follower);
        let mut previous = None;
        let budget = self.endpoints().request_timeout().max(candidate.ttl);
        let opened = self
            .open_session(&candidate, &mut previous, budget, budget)
            .await?;
        let (sender, view) = watch::channel(Leadership {
            last_contact: Some(opened.granted),
            ..Leadership::default()
        });
        let kv = self.sibling();
        let task = tokio::spawn(async move {
            kv.run_sessions(candidate, sender, previous, Some(opened))
                .await;
        });
        Ok(Election { view, task })
    }

    /// Every server that ever joined, alive or not.
    pub async fn members(&self) -> Result<Vec<Member>, KvError> {
        let members_prefix = self.prefixed(b"members/");
        let alive_prefix = self.prefixed(b"alive/");
        let records = self
            .endpoints()
            .call("read", |mut client| {
                let key = members_prefix.clone();
                async move { client.get(key, Some(GetOptions::new().with_prefix())).await }
            })
            .await?;
        let alive = self
            .endpoints()
            .call("read", |mut client| {
                let key = alive_prefix.clone();
                async move {
                    client
                        .get(key, Some(GetOptions::new().with_prefix().with_keys_only()))
                        .await
                }
            })
            .await?;
        let alive: std::collections::BTreeSet<Vec<u8>> = alive
            .kvs()
            .iter()
            .map(|pair| pair.key()[alive_prefix.len()..].to_vec())
            .collect();
        Ok(records
            .kvs()
            .iter()
            .map(|pair| {
                let name = &pair.key()[members_prefix.len()..];
                Member {
                    name: String::from_utf8_lossy(name).into_owned(),
                    record: pair.value().to_vec(),
                    alive: alive.contains(name),
                }
            })
            .collect())
    }

    /// Replaces the record of the member `name` with `record` (`Some`) or deletes it (`None`),
    /// only while that member has no live session: a server that came back meanwhile keeps the
    /// record its session published. Answers whether it was changed.
    pub async fn change_failed_member(
        &self,
        name: &str,
        record: Option<Vec<u8>>,
    ) -> Result<bool, KvError> {
        let member_key = self.prefixed(format!("members/{name}").as_bytes());
        let alive_key = self.prefixed(format!("alive/{name}").as_bytes());
        let change = match record {
            Some(record) => TxnOp::put(member_key.clone(), record, None),
            None => TxnOp::delete(member_key.clone(), None),
        };
        let txn = Txn::new()
            .when(vec![
                Compare::version(alive_key, CompareOp::Equal, 0),
                Compare::version(member_key, CompareOp::Greater, 0),
            ])
            .and_then(vec![change]);
        let answer = self
            .endpoints()
            .call("member", |mut client| {
                let txn = txn.clone();
                async move { client.txn(txn).await }
            })
            .await?;
        Ok(answer.succeeded())
    }

    /// Sessions, one after the other, for the life of the task.
    async fn run_sessions(
        &self,
        candidate: Candidate,
        view: watch::Sender<Leadership>,
        mut previous: Option<i64>,
        mut opened: Option<Opened>,
    ) {
        loop {
            let pause = match self
                .session(&candidate, &view, &mut previous, opened.take())
                .await
            {
                Ok(()) => candidate.poll,
                Err(CampaignError::NameTaken { name, .. }) => {
                    // Another server took the name while this one's session had lapsed: it
                    // does not campaign under a name that is not its own.
                    tracing::error!(
                        %name,
                        "another live server now holds this server's name; this server does \
                         not campaign until the name is free (give each server a name of its own)"
                    );
                    candidate.ttl
                }
                Err(error) => {
                    tracing::warn!(%error, "etcd session ended; starting a new one");
                    candidate.poll
                }
            };
            self.step_down(&view);
            tokio::time::sleep(pause).await;
        }
    }

    /// Grants a session's lease, revokes the last session's (`previous`, then set to the new
    /// one) and claims the server's name under the new lease ([`Self::claim_name`]). Each
    /// request may take `attempt` through one member and `budget` in all.
    async fn open_session(
        &self,
        candidate: &Candidate,
        previous: &mut Option<i64>,
        attempt: Duration,
        budget: Duration,
    ) -> Result<Opened, CampaignError> {
        let endpoints = Arc::clone(self.endpoints());
        let ttl_seconds = i64::try_from(candidate.ttl.as_secs().max(2)).unwrap_or(4);
        self.await_own_lapse(candidate, *previous, attempt, budget)
            .await?;
        // The session is counted from when the grant was asked for: etcd counts it from when it
        // granted it, no sooner.
        let asked = Instant::now();
        let lease = endpoints
            .call_on("lease", attempt, budget, |mut client| async move {
                client.lease_grant(ttl_seconds, None).await
            })
            .await?
            .1
            .id();
        let granted = Instant::now();
        let old = previous.replace(lease);
        if let Some(old) = old {
            // It may have lapsed already; either way it is gone after this.
            let _ = endpoints
                .call_on("lease", attempt, attempt, |mut client| async move {
                    client.lease_revoke(old).await
                })
                .await;
        }
        self.claim_name(candidate, lease, old, attempt, budget)
            .await?;
        Ok(Opened {
            lease,
            asked,
            granted,
        })
    }

    /// Waits, up to a TTL and a second, while `P alive/<name>` is held by a session not this
    /// server's own ([`own_earlier_session`]): another server of the name that died holds it
    /// until its session lapses, within a TTL; one still held after that is renewed, so its
    /// server lives. Before the new session's lease is granted, so nothing of
    /// the new session has to be kept alive meanwhile.
    async fn await_own_lapse(
        &self,
        candidate: &Candidate,
        previous: Option<i64>,
        attempt: Duration,
        budget: Duration,
    ) -> Result<(), KvError> {
        let alive_key = self.prefixed(format!("alive/{}", candidate.name).as_bytes());
        let until = Instant::now() + candidate.ttl + Duration::from_secs(1);
        let mut logged = false;
        while Instant::now() < until {
            let (_, current) = self
                .endpoints()
                .call_on("member", attempt, budget, |mut client| {
                    let key = alive_key.clone();
                    async move { client.get(key, None).await }
                })
                .await?;
            let held_by_another = current
                .kvs()
                .first()
                .is_some_and(|held| !own_earlier_session(held, candidate, previous));
            if !held_by_another {
                return Ok(());
            }
            if !logged {
                tracing::info!(
                    name = %candidate.name,
                    "this server's name is held by another session (a server that died lets it \
                     lapse within its TTL); waiting for it before claiming the name"
                );
                logged = true;
            }
            tokio::time::sleep(candidate.poll).await;
        }
        Ok(())
    }

    /// Publishes `P members/<name>` and takes `P alive/<name>` under `lease`, unless another
    /// live server holds it: a compare-and-create, or a compare-and-swap of a key held by this
    /// server's own last session (`old`, when its revoke failed).
    async fn claim_name(
        &self,
        candidate: &Candidate,
        lease: i64,
        old: Option<i64>,
        attempt: Duration,
        budget: Duration,
    ) -> Result<(), CampaignError> {
        let endpoints = self.endpoints();
        let member_key = self.prefixed(format!("members/{}", candidate.name).as_bytes());
        let alive_key = self.prefixed(format!("alive/{}", candidate.name).as_bytes());
        loop {
            let (_, current) = endpoints
                .call_on("member", attempt, budget, |mut client| {
                    let key = alive_key.clone();
                    async move { client.get(key, None).await }
                })
                .await?;
            let condition = match current.kvs().first() {
                None => Compare::version(alive_key.clone(), CompareOp::Equal, 0),
                Some(held)
                    if held.lease() == lease || own_earlier_session(held, candidate, old) =>
                {
                    Compare::mod_revision(alive_key.clone(), CompareOp::Equal, held.mod_revision())
                }
                Some(held) => {
                    return Err(CampaignError::NameTaken {
                        name: candidate.name.clone(),
                        holder: held.value().to_vec(),
                    });
                }
            };
            let publish = Txn::new().when(vec![condition]).and_then(vec![
                TxnOp::put(member_key.clone(), candidate.record.clone(), None),
                TxnOp::put(
                    alive_key.clone(),
                    candidate.record.clone(),
                    Some(PutOptions::new().with_lease(lease)),
                ),
            ]);
            let (_, answer) = endpoints
                .call_on("member", attempt, budget, |mut client| {
                    let publish = publish.clone();
                    async move { client.txn(publish).await }
                })
                .await?;
            if answer.succeeded() {
                return Ok(());
            }
            // The key changed between the read and the claim: read it again.
        }
    }

    fn step_down(&self, view: &watch::Sender<Leadership>) {
        self.set_fence(Fence::Follower);
        view.send_if_modified(|known| {
            let changed = known.is_leader;
            if changed {
                tracing::warn!(term = known.term, "this server no longer leads the cluster");
            }
            known.is_leader = false;
            changed
        });
    }

    /// One session: grant a lease, publish the member records, then renew and campaign until
    /// the session lapses.
    /// `previous` is the last session's lease: revoked once a new one is granted, so a leader
    /// key it still holds (etcd extends leases across its own elections) goes at once.
    ///
    /// Three things run at once for the session's life: the keep-alives through every member
    /// ([`renew_through`]), a watchdog that steps the server down the moment its session can no
    /// longer be relied on ([`Seat::step_down_if_due`], on a timer of its own, so a request
    /// hanging on an unreachable member never delays it), and this loop, which reads `P leader`
    /// every poll and whenever a watch on it reports a change, and campaigns the moment it is
    /// free.
    async fn session(
        &self,
        candidate: &Candidate,
        view: &watch::Sender<Leadership>,
        previous: &mut Option<i64>,
        opened: Option<Opened>,
    ) -> Result<(), CampaignError> {
        let endpoints = Arc::clone(self.endpoints());
        let attempt = attempt_timeout(candidate.ttl);
        let opened = match opened {
            Some(opened) => opened,
            None => {
                self.open_session(candidate, previous, attempt, attempt)
                    .await?
            }
        };
        let Opened {
            lease,
            asked,
            granted,
        } = opened;
        view.send_modify(|known| known.last_contact = Some(granted));
        tracing::info!(
            lease = format!("{lease:x}"),
            name = %candidate.name,
            "etcd session opened; this server's name is claimed under its lease"
        );
        let seat = Arc::new(Seat {
            clock: std::sync::Mutex::new(SessionClock::new(candidate.ttl, asked)),
            lease,
            kv: self.sibling(),
            view: view.clone(),
        });
        // Keep-alives through every member at once: one lost member costs nothing. They and
        // the watchdog end with this session (the set aborts them when dropped).
        let (lapsed_sender, mut lapsed) = watch::channel(false);
        let mut helpers = tokio::task::JoinSet::new();
        for member in 0..endpoints.count() {
            helpers.spawn(renew_through(
                Arc::clone(&endpoints),
                member,
                lease,
                candidate.ttl,
                Arc::clone(&seat),
                lapsed_sender.clone(),
            ));
        }
        helpers.spawn(watchdog(Arc::clone(&seat), candidate.poll));
        let leader_key = self.leader_key();
        let mut leader_watch: Option<etcd_client::WatchStream> = None;
        loop {
            if *lapsed.borrow_and_update() {
                tracing::error!("this server's etcd session lapsed; it stops leading");
                return Ok(());
            }
            if leader_watch.is_none() {
                leader_watch = endpoints
                    .call_on("watch", attempt, attempt, |mut client| {
                        let key = leader_key.clone();
                        async move { client.watch(key, None).await }
                    })
                    .await
                    .ok()
                    .map(|(_, stream)| stream);
            }
            match self.read_or_take_leader(candidate, lease, attempt).await {
                Ok(found) => {
                    let (leader, ours) = match found {
                        Some((record, holder)) => (Some(record), holder == lease),
                        None => (None, false),
                    };
                    seat.settle(leader, ours, Instant::now());
                }
                Err(Campaign::LeaseGone) => {
                    tracing::error!(
                        "etcd no longer knows this server's session lease; it stops leading \
                         and opens a new session"
                    );
                    return Ok(());
                }
                // etcd did not answer: the keep-alives and the watchdog decide.
                Err(Campaign::Failed(error)) => {
                    tracing::debug!(%error, "reading or taking the leadership failed");
                }
            }
            tokio::select! {
                () = tokio::time::sleep(candidate.poll) => {}
                _ = lapsed.changed() => {}
                changed = next_change(&mut leader_watch) => {
                    if !changed {
                        leader_watch = None;
                    }
                }
            }
            // A helper only ends by panicking; the others carry on.
            while helpers.try_join_next().is_some() {}
        }
    }

    /// `P leader`'s record and the lease holding it, taking it first under `lease` when it is
    /// free (a compare-and-create: of two servers campaigning at once, one wins).
    async fn read_or_take_leader(
        &self,
        candidate: &Candidate,
        lease: i64,
        attempt: Duration,
    ) -> Result<Option<(Vec<u8>, i64)>, Campaign> {
        let leader_key = self.leader_key();
        let endpoints = self.endpoints();
        let (_, current) = endpoints
            .call_on("campaign", attempt, attempt, |mut client| {
                let key = leader_key.clone();
                async move { client.get(key, None).await }
            })
            .await
            .map_err(Campaign::Failed)?;
        if let Some(pair) = current.kvs().first() {
            return Ok(Some((pair.value().to_vec(), pair.lease())));
        }
        let take = Txn::new()
            .when(vec![Compare::version(
                leader_key.clone(),
                CompareOp::Equal,
                0,
            )])
            .and_then(vec![TxnOp::put(
                leader_key.clone(),
                candidate.record.clone(),
                Some(PutOptions::new().with_lease(lease)),
            )])
            .or_else(vec![TxnOp::get(leader_key.clone(), None)]);
        // etcd refuses a put under a lease it no longer knows: the session is over, however
        // the keep-alives fare.
        let gone = std::sync::atomic::AtomicBool::new(false);
        let taken = endpoints
            .call_on("campaign", attempt, attempt, |mut client| {
                let take = take.clone();
                let gone = &gone;
                async move {
                    let answer = client.txn(take).await;
                    if matches!(&answer, Err(error) if lease_is_gone(error)) {
                        gone.store(true, std::sync::atomic::Ordering::Relaxed);
                    }
                    answer
                }
            })
            .await;
        let response = match taken {
            Ok((_, response)) => response,
            Err(_) if gone.load(std::sync::atomic::Ordering::Relaxed) => {
                return Err(Campaign::LeaseGone);
            }
            Err(error) => return Err(Campaign::Failed(error)),
        };
        if response.succeeded() {
            return Ok(Some((candidate.record.clone(), lease)));
        }
        Ok(response
            .op_responses()
            .into_iter()
            .find_map(|answer| match answer {
                etcd_client::TxnOpResponse::Get(get) => get.kvs().first().cloned(),
                _ => None,
            })
            .map(|pair| (pair.value().to_vec(), pair.lease())))
    }
}

/// Why a server cannot campaign.
#[derive(Debug, thiserror::Error)]
pub enum CampaignError {
    /// Another live server (its session alive) holds this server's name.
    #[error("another server named {name:?} is alive on this etcd prefix")]
    NameTaken {
        name: String,
        /// The other server's record (`P alive/<name>`).
        holder: Vec<u8>,
    },
    /// etcd did not answer, or refused.
    #[error(transparent)]
    Etcd(#[from] KvError),
}

/// A session's lease, granted, with the server's name claimed under it.
struct Opened {
    lease: i64,
    /// When the grant was asked for (the session is counted from then).
    asked: Instant,
    /// When etcd answered.
    granted: Instant,
}

/// Why a campaign step found nothing.
enum Campaign {
    /// etcd no longer knows the session's lease (it lapsed or was revoked): only a new session
    /// can campaign.
    LeaseGone,
    /// etcd did not answer, or refused for another reason: try again on the next poll.
    Failed(KvError),
}

/// Whether `error` says etcd no longer knows the lease named in the request: it lapsed or was
/// revoked. etcd refuses a request under such a lease with `NotFound` ("requested lease not
/// found"); etcd-client opening a keep-alive stream for one answers its own "lease not found"
/// (where an open stream answers a TTL of 0).
fn lease_is_gone(error: &etcd_client::Error) -> bool {
    match error {
        etcd_client::Error::LeaseKeepAliveError(message) => message == "lease not found",
        etcd_client::Error::GRpcStatus(status) => {
            status.code() == tonic::Code::NotFound && status.message().contains("lease not found")
        }
        _ => false,
    }
}

/// Whether the watch on `P leader` reported something (false: it ended, open another). Never
/// answers without a watch.
async fn next_change(watch: &mut Option<etcd_client::WatchStream>) -> bool {
    match watch {
        Some(stream) => matches!(stream.message().await, Ok(Some(answer)) if !answer.canceled()),
        None => std::future::pending().await,
    }
}

/// One session's standing: its clock, and what the server is told and its store fenced by.
/// Every change of the leadership is decided under the clock's lock, on the clock, so the
/// watchdog and the campaign loop never undo each other's decision.
struct Seat {
    clock: std::sync::Mutex<SessionClock>,
    lease: i64,
    kv: EtcdKv,
    view: watch::Sender<Leadership>,
}

impl Seat {
    fn clock(&self) -> std::sync::MutexGuard<'_, SessionClock> {
        // A poisoned lock only means a helper panicked; the clock is still a clock.
        self.clock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A keep-alive sent at `sent` was answered.
    fn renewed(&self, sent: Instant) {
        let renewal = {
            let mut clock = self.clock();
            clock.renewed(sent);
            clock.last_renewal()
        };
        self.view.send_if_modified(|known| {
            if known.last_contact.is_none_or(|contact| contact < renewal) {
                known.last_contact = Some(renewal);
            }
            // Contact alone is no news worth waking watchers for.
            false
        });
    }

    /// When the watchdog must look next (the session's step-down instant).
    fn step_down_at(&self) -> Instant {
        self.clock().step_down_at()
    }

    /// What `P leader` holds now, read at `now`: this server leads while the record is under
    /// its lease and its session can still be relied on (so after a step-down it leads again,
    /// in a new term, once a renewal shows the lease alive and the key still its own: nobody
    /// else can have led meanwhile). The fence moves before anyone is told: a new leader's
    /// first write is fenced.
    fn settle(&self, leader: Option<Vec<u8>>, ours: bool, now: Instant) {
        let clock = self.clock();
        let leads = ours && !clock.must_step_down(now);
        self.kv.set_fence(if leads {
            Fence::Leader(self.lease)
        } else {
            Fence::Follower
        });
        self.view.send_if_modified(|known| {
            let was_leader = known.is_leader;
            let changed = known.leader != leader || was_leader != leads;
            known.leader = leader;
            known.is_leader = leads;
            if leads && !was_leader {
                known.term += 1;
                tracing::info!(term = known.term, "this server leads the cluster");
            }
            if was_leader && !leads {
                tracing::warn!(term = known.term, "this server no longer leads the cluster");
            }
            known.last_contact = Some(now.max(known.last_contact.unwrap_or(now)));
            changed
        });
        drop(clock);
    }

    /// Steps down if the session can no longer be relied on at `now`.
    fn step_down_if_due(&self, now: Instant) {
        let clock = self.clock();
        if !clock.must_step_down(now) {
            return;
        }
        self.kv.set_fence(Fence::Follower);
        self.view.send_if_modified(|known| {
            if !known.is_leader {
                return false;
            }
            known.is_leader = false;
            tracing::error!(
                term = known.term,
                "could not renew this server's etcd session in time; it stops leading"
            );
            true
        });
        drop(clock);
    }
}

/// How long after its last renewal was sent a session is relied on: the TTL less
/// [`STEP_DOWN_MARGIN`] (a quarter of the TTL when that is less).
pub fn step_down_after(ttl: Duration) -> Duration {
    ttl - STEP_DOWN_MARGIN.min(ttl / 4)
}

/// How long one keep-alive or campaign request to one member may take before it counts as
/// failed: well under the session's TTL, so a member that hangs is left long before the
/// session is at risk.
fn attempt_timeout(ttl: Duration) -> Duration {
    (ttl / 5).max(Duration::from_millis(200))
}

/// Steps the server down the moment its session can no longer be relied on, on a timer of its
/// own; once down, looks again every `poll` (a renewal moves the instant on).
async fn watchdog(seat: Arc<Seat>, poll: Duration) {
    loop {
        let due = seat.step_down_at();
        if Instant::now() < due {
            tokio::time::sleep_until(due).await;
        }
        let now = Instant::now();
        seat.step_down_if_due(now);
        if seat.step_down_at() <= now {
            tokio::time::sleep(poll).await;
        }
    }
}

/// Renews `lease` through member `member` for as long as the session lasts, on its own
/// keep-alive stream (reopened after any failure), recording every renewal in the seat's
/// clock. Member `member` starts a fraction of the interval after the others, so renewals
/// through the members are spread over it. Ends when etcd answers that the lease is gone.
async fn renew_through(
    endpoints: Arc<Endpoints>,
    member: usize,
    lease: i64,
    ttl: Duration,
    seat: Arc<Seat>,
    lapsed: watch::Sender<bool>,
) {
    let attempt = attempt_timeout(ttl);
    let offset = renewal_offset(ttl, member, endpoints.count());
    let mut schedule = RenewalSchedule::new(ttl, Instant::now() + offset);
    let mut stream: Option<(LeaseKeeper, LeaseKeepAliveStream)> = None;
    loop {
        tokio::time::sleep_until(schedule.next()).await;
        let sent = Instant::now();
        let answer = tokio::time::timeout(attempt, async {
            let (keeper, messages) = match stream.as_mut() {
                Some(open) => open,
                None => {
                    let mut client = endpoints.client(member).await?;
                    stream.insert(client.lease_keep_alive(lease).await?)
                }
            };
            keeper.keep_alive().await?;
            messages.message().await
        })
        .await;
        match answer {
            Ok(Ok(Some(answer))) if answer.ttl() > 0 => {
                schedule.renewed(sent);
                seat.renewed(sent);
            }
            // An open stream answers a TTL of 0 for a lease etcd no longer knows; opening one
            // for it fails with "lease not found" (a server cut off for longer than its TTL
            // learns it that way once the link is back). Either way the session is over: the
            // campaign opens a new one.
            Ok(Ok(Some(_))) => {
                let _ = lapsed.send(true);
                return;
            }
            Ok(Err(error)) if lease_is_gone(&error) => {
                tracing::warn!(member = %endpoints.url(member), %error, "etcd no longer knows this server's session lease");
                let _ = lapsed.send(true);
                return;
            }
            Ok(Ok(None) | Err(_)) | Err(_) => {
                if let Ok(Err(error)) = &answer {
                    tracing::debug!(member = %endpoints.url(member), %error, "session keep-alive failed");
                } else {
                    tracing::debug!(member = %endpoints.url(member), "session keep-alive unanswered");
                }
                // The stream may be broken: the next attempt opens another.
                stream = None;
                schedule.failed(sent);
            }
        }
    }
}

/// Where member `member` of `count` starts in the renewal interval.
fn renewal_offset(ttl: Duration, member: usize, count: usize) -> Duration {
    let count = u32::try_from(count.max(1)).unwrap_or(1);
    let member = u32::try_from(member).unwrap_or(0) % count;
    renewal_interval(ttl) * member / count
}

/// How often each member renews the session while it answers.
fn renewal_interval(ttl: Duration) -> Duration {
    ttl / 4
}

/// When one member's next keep-alive is due.
#[derive(Debug, Clone, Copy)]
pub struct RenewalSchedule {
    ttl: Duration,
    next: Instant,
}

impl RenewalSchedule {
    /// The first keep-alive is due at `first`.
    pub fn new(ttl: Duration, first: Instant) -> Self {
        Self { ttl, next: first }
    }

    /// When the next keep-alive is due.
    pub fn next(&self) -> Instant {
        self.next
    }

    /// A keep-alive sent at `sent` was answered: the next one a quarter of the TTL later.
    pub fn renewed(&mut self, sent: Instant) {
        self.next = sent + renewal_interval(self.ttl);
    }

    /// A keep-alive sent at `sent` failed: try again soon.
    pub fn failed(&mut self, sent: Instant) {
        self.next = sent + (self.ttl / 20).max(Duration::from_millis(100));
    }
}

/// Whether `P alive/<name>` is held by an earlier session of this very server: the lease of
/// its last session (`previous`, known when a session of this process lapsed), or, after a
/// restart, a record byte for byte this server's own. A record names where the server's API
/// answers, which this process now holds: no other live server can publish the same one. A
/// server killed and restarted takes its name back at once, even when etcd keeps the dead
/// session's lease past its TTL (a lease's clock restarts on every etcd leader change).
fn own_earlier_session(
    held: &etcd_client::KeyValue,
    candidate: &Candidate,
    previous: Option<i64>,
) -> bool {
    Some(held.lease()) == previous || held.value() == candidate.record.as_slice()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_member_renews_every_quarter_of_the_ttl_and_retries_soon_after_a_failure() {
        let start = Instant::now();
        let ttl = Duration::from_secs(8);
        // Three members spread over the 2 s interval.
        assert_eq!(renewal_offset(ttl, 0, 3), Duration::ZERO);
        assert_eq!(renewal_offset(ttl, 2, 3), Duration::from_secs(4) / 3);
        let mut schedule = RenewalSchedule::new(ttl, start);
        assert_eq!(schedule.next(), start);
        schedule.renewed(start);
        assert_eq!(schedule.next(), start + Duration::from_secs(2));
        schedule.failed(start + Duration::from_secs(2));
        assert_eq!(schedule.next(), start + Duration::from_millis(2400));
        // Well under the TTL: a member that hangs is left long before the session is at risk.
        assert_eq!(attempt_timeout(ttl), Duration::from_millis(1600));
    }

    #[test]
    fn the_session_lives_on_the_latest_renewal_through_any_member_and_steps_down_before_it_can_lapse()
     {
        let start = Instant::now();
        let ttl = Duration::from_secs(4);
        assert_eq!(step_down_after(ttl), Duration::from_millis(3500));
        // A short TTL keeps three quarters of itself.
        assert_eq!(
            step_down_after(Duration::from_secs(1)),
            Duration::from_millis(750)
        );
        let mut clock = SessionClock::new(ttl, start);
        assert!(!clock.must_step_down(start + Duration::from_millis(3499)));
        assert!(clock.must_step_down(start + Duration::from_millis(3500)));

        // One member answers a keep-alive sent at 2 s; another's answer to one sent at 1 s
        // arrives later and does not move the session back.
        clock.renewed(start + Duration::from_secs(2));
        clock.renewed(start + Duration::from_secs(1));
        assert_eq!(clock.last_renewal(), start + Duration::from_secs(2));
        assert_eq!(clock.step_down_at(), start + Duration::from_millis(5500));
        assert!(!clock.must_step_down(start + Duration::from_millis(5499)));
        // No member answers any more: the server steps down half a second before etcd may let
        // the lease lapse (a TTL after the last renewal was sent).
        assert!(clock.must_step_down(start + Duration::from_millis(5500)));
    }

    #[test]
    fn every_answer_that_etcd_no_longer_knows_the_lease_ends_the_session_and_nothing_else_does() {
        // etcd refusing a keep-alive, a put or a campaign under a lapsed or revoked lease.
        let refused = etcd_client::Error::GRpcStatus(tonic::Status::not_found(
            "etcdserver: requested lease not found",
        ));
        assert!(lease_is_gone(&refused));
        // etcd-client opening a keep-alive stream for a lease etcd no longer knows.
        let reopened = etcd_client::Error::LeaseKeepAliveError("lease not found".to_owned());
        assert!(lease_is_gone(&reopened));
        // A member that is down, slow or restarting, a stream that closed, another key not
        // found: the session goes on through the others (or the watchdog steps down).
        for error in [
            etcd_client::Error::GRpcStatus(tonic::Status::unavailable("connection refused")),
            etcd_client::Error::GRpcStatus(tonic::Status::deadline_exceeded("timed out")),
            etcd_client::Error::GRpcStatus(tonic::Status::not_found("key not found")),
            etcd_client::Error::GRpcStatus(tonic::Status::out_of_range(
                "etcdserver: mvcc: required revision has been compacted",
            )),
            etcd_client::Error::LeaseKeepAliveError("stream closed".to_owned()),
        ] {
            assert!(!lease_is_gone(&error), "{error}");
        }
    }

    /// A seat on a handle that makes no request (the fence and the view are all that is used).
    async fn seat(ttl: Duration) -> (Arc<Seat>, watch::Receiver<Leadership>) {
        let kv = EtcdKv::connect(&crate::EtcdConfig::new(
            vec!["http://127.0.0.1:9".to_owned()],
            "seat/",
        ))
        .await
        .unwrap();
        let (view, receiver) = watch::channel(Leadership::default());
        let seat = Seat {
            clock: std::sync::Mutex::new(SessionClock::new(ttl, Instant::now())),
            lease: 7,
            kv,
            view,
        };
        (Arc::new(seat), receiver)
    }

    #[tokio::test(start_paused = true)]
    async fn the_watchdog_steps_a_leader_down_on_time_and_a_renewal_with_the_key_still_its_own_leads_again()
     {
        let ttl = Duration::from_secs(4);
        let (seat, view) = seat(ttl).await;
        let start = Instant::now();
        seat.settle(Some(b"me".to_vec()), true, start);
        assert!(view.borrow().is_leader);
        assert_eq!(view.borrow().term, 1);
        assert_eq!(seat.kv.fence(), Fence::Leader(7));
        let _watchdog = tokio::spawn(watchdog(Arc::clone(&seat), POLL_INTERVAL));

        // Renewed at 1 s: the leadership holds past the first deadline.
        tokio::time::sleep(Duration::from_secs(1)).await;
        seat.renewed(Instant::now());
        tokio::time::sleep(Duration::from_millis(3400)).await;
        assert!(view.borrow().is_leader, "stepped down 4.4 s after start");
        // No renewal since 1 s: down at 4.5 s, with the store fenced at once.
        tokio::time::sleep(Duration::from_millis(150)).await;
        assert!(!view.borrow().is_leader, "still leading 4.55 s after start");
        assert_eq!(seat.kv.fence(), Fence::Follower);
        // While the session cannot be relied on, reading the key as its own changes nothing.
        seat.settle(Some(b"me".to_vec()), true, Instant::now());
        assert!(!view.borrow().is_leader);

        // A keep-alive is answered again (the lease lives) and the key is still its own: a new
        // term.
        seat.renewed(Instant::now());
        seat.settle(Some(b"me".to_vec()), true, Instant::now());
        assert!(view.borrow().is_leader);
        assert_eq!(view.borrow().term, 2);
        assert_eq!(seat.kv.fence(), Fence::Leader(7));

        // Another server's record: a follower, whatever the clock says.
        seat.settle(Some(b"other".to_vec()), false, Instant::now());
        assert!(!view.borrow().is_leader);
        assert_eq!(view.borrow().leader.as_deref(), Some(&b"other"[..]));
        assert_eq!(seat.kv.fence(), Fence::Follower);
        assert!(start.elapsed() < ttl * 2);
    }
}
