//! Several server agents on one prefix: the leader elected through an etcd lease, and the
//! servers' member records.
//!
//! Each server keeps a *session*: an etcd lease it renews every third of its TTL. Keys under the
//! prefix `P`:
//! - `P leader`: the leader's record, put under the leader's session lease by a
//!   compare-and-create (`version == 0`); while it leads, every batch its store applies is
//!   fenced by that lease ([`crate::Fence::Leader`]), so a server whose session lapsed cannot
//!   write even before it notices;
//! - `P members/<name>`: each server's record, kept after it dies (it is then listed failed);
//! - `P alive/<name>`: the same record under the server's session lease, present while it lives.
//!
//! A server that cannot renew its session steps down (stops leading, its store refuses writes)
//! once three quarters of the TTL have passed since its last renewal, before etcd lets the lease
//! lapse and another server takes `P leader`. The decisions are [`SessionClock`]'s, on instants
//! handed in, so they are tested without waiting.
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
/// its last keep-alive (plus one poll).
pub const SESSION_TTL: Duration = Duration::from_secs(5);
/// How often a server looks at `P leader` (and campaigns when it is free).
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

    /// Whether the server must stop relying on the session at `now`: three quarters of the TTL
    /// passed since the last renewal was sent, so etcd may let it lapse before the next one
    /// lands.
    pub fn must_step_down(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.last_renewal) >= self.ttl * 3 / 4
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
    pub fn campaign(&self, candidate: Candidate) -> Election {
        self.set_fence(Fence::Follower);
        let (sender, view) = watch::channel(Leadership::default());
        let kv = self.sibling();
        let task = tokio::spawn(async move { kv.run_sessions(candidate, sender).await });
        Election { view, task }
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

    /// Sessions, one after the other, for the life of the task.
    async fn run_sessions(&self, candidate: Candidate, view: watch::Sender<Leadership>) {
        let mut previous = None;
        loop {
            match self.session(&candidate, &view, &mut previous).await {
                Ok(()) => {}
                Err(error) => tracing::warn!(%error, "etcd session ended; starting a new one"),
            }
            self.step_down(&view);
            tokio::time::sleep(candidate.poll).await;
        }
    }

    fn step_down(&self, view: &watch::Sender<Leadership>) {
        self.set_fence(Fence::Follower);
        view.send_if_modified(|known| {
            let changed = known.is_leader;
            known.is_leader = false;
            changed
        });
    }

    /// One session: grant a lease, publish the member records, then renew and campaign until
    /// the session cannot be relied on any more.
    /// `previous` is the last session's lease: revoked once a new one is granted, so a leader
    /// key it still holds (etcd extends leases across its own elections) goes at once.
    async fn session(
        &self,
        candidate: &Candidate,
        view: &watch::Sender<Leadership>,
        previous: &mut Option<i64>,
    ) -> Result<(), KvError> {
        let endpoints = Arc::clone(self.endpoints());
        let attempt = attempt_timeout(candidate.ttl);
        let ttl_seconds = i64::try_from(candidate.ttl.as_secs().max(2)).unwrap_or(5);
        let lease = endpoints
            .call_on("lease", attempt, attempt, |mut client| async move {
                client.lease_grant(ttl_seconds, None).await
            })
            .await?
            .1
            .id();
        let granted = Instant::now();
        view.send_modify(|known| known.last_contact = Some(granted));
        if let Some(old) = previous.replace(lease) {
            // It may have lapsed already; either way it is gone after this.
            let _ = endpoints
                .call_on("lease", attempt, attempt, |mut client| async move {
                    client.lease_revoke(old).await
                })
                .await;
        }
        let clock = Arc::new(std::sync::Mutex::new(SessionClock::new(
            candidate.ttl,
            granted,
        )));
        let member_key = self.prefixed(format!("members/{}", candidate.name).as_bytes());
        let alive_key = self.prefixed(format!("alive/{}", candidate.name).as_bytes());
        let publish = Txn::new().and_then(vec![
            TxnOp::put(member_key, candidate.record.clone(), None),
            TxnOp::put(
                alive_key,
                candidate.record.clone(),
                Some(PutOptions::new().with_lease(lease)),
            ),
        ]);
        endpoints
            .call_on("member", attempt, attempt, |mut client| {
                let publish = publish.clone();
                async move { client.txn(publish).await }
            })
            .await?;
        // Keep-alives through every member at once: one lost member costs nothing, and the
        // renewers end with this session (the set aborts them when dropped).
        let (lapsed_sender, mut lapsed) = watch::channel(false);
        let mut renewers = tokio::task::JoinSet::new();
        for member in 0..endpoints.count() {
            renewers.spawn(renew_through(
                Arc::clone(&endpoints),
                member,
                lease,
                candidate.ttl,
                Arc::clone(&clock),
                lapsed_sender.clone(),
            ));
        }
        let session_clock = |clock: &std::sync::Mutex<SessionClock>| {
            *clock
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        };
        let leader_key = self.leader_key();
        loop {
            let now = Instant::now();
            let current = session_clock(&clock);
            if *lapsed.borrow_and_update() {
                tracing::error!("this server's etcd session lapsed; it stops leading");
                return Ok(());
            }
            if current.must_step_down(now) {
                tracing::error!(
                    "could not renew this server's etcd session in time; it stops leading"
                );
                return Ok(());
            }
            let renewed = current.last_renewal();
            view.send_if_modified(|known| {
                if known.last_contact.is_none_or(|contact| contact < renewed) {
                    known.last_contact = Some(renewed);
                }
                // Contact alone is no news worth waking watchers for.
                false
            });
            let attempt_txn = Txn::new()
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
            let answered = endpoints
                .call_on("campaign", attempt, attempt, |mut client| {
                    let attempt_txn = attempt_txn.clone();
                    async move { client.txn(attempt_txn).await }
                })
                .await;
            if let Ok((_, response)) = answered {
                let (leader, ours) = if response.succeeded() {
                    (Some(candidate.record.clone()), true)
                } else {
                    let current =
                        response
                            .op_responses()
                            .into_iter()
                            .find_map(|answer| match answer {
                                etcd_client::TxnOpResponse::Get(get) => get.kvs().first().cloned(),
                                _ => None,
                            });
                    match current {
                        Some(pair) => (Some(pair.value().to_vec()), pair.lease() == lease),
                        None => (None, false),
                    }
                };
                // The fence moves before anyone is told: a new leader's first write is fenced.
                if ours && !session_clock(&clock).must_step_down(Instant::now()) {
                    self.set_fence(Fence::Leader(lease));
                } else {
                    self.set_fence(Fence::Follower);
                }
                let contact = Instant::now();
                view.send_if_modified(|known| {
                    let was_leader = known.is_leader;
                    let changed = known.leader != leader || was_leader != ours;
                    known.leader = leader;
                    known.is_leader = ours;
                    if ours && !was_leader {
                        known.term += 1;
                        tracing::info!(term = known.term, "this server leads the cluster");
                    }
                    if was_leader && !ours {
                        tracing::warn!("this server no longer leads the cluster");
                    }
                    known.last_contact = Some(contact);
                    changed
                });
            }
            tokio::select! {
                () = tokio::time::sleep(candidate.poll) => {}
                _ = lapsed.changed() => {}
            }
            // A renewer only ends by panicking; the others carry on.
            while renewers.try_join_next().is_some() {}
        }
    }
}

/// How long one keep-alive or campaign request to one member may take before it counts as
/// failed: well under the session's TTL, so a member that hangs is left long before the
/// session is at risk.
fn attempt_timeout(ttl: Duration) -> Duration {
    (ttl / 5).max(Duration::from_millis(200))
}

/// Renews `lease` through member `member` for as long as the session lasts, on its own
/// keep-alive stream (reopened after any failure), recording every renewal in `clock`.
/// Member `member` starts a fraction of the interval after the others, so renewals through
/// the members are spread over it. Ends when etcd answers that the lease is gone.
async fn renew_through(
    endpoints: Arc<Endpoints>,
    member: usize,
    lease: i64,
    ttl: Duration,
    clock: Arc<std::sync::Mutex<SessionClock>>,
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
                clock
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .renewed(sent);
            }
            Ok(Ok(Some(_))) => {
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
        let mut clock = SessionClock::new(ttl, start);
        assert!(!clock.must_step_down(start + Duration::from_millis(2999)));
        assert!(clock.must_step_down(start + Duration::from_secs(3)));

        // One member answers a keep-alive sent at 2 s; another's answer to one sent at 1 s
        // arrives later and does not move the session back.
        clock.renewed(start + Duration::from_secs(2));
        clock.renewed(start + Duration::from_secs(1));
        assert_eq!(clock.last_renewal(), start + Duration::from_secs(2));
        assert!(!clock.must_step_down(start + Duration::from_millis(4999)));
        // No member answers any more: the server steps down 3/4 of the TTL after the last
        // renewal was sent, before etcd may let the lease lapse.
        assert!(clock.must_step_down(start + Duration::from_secs(5)));
    }
}
