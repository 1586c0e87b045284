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

use std::time::Duration;

use etcd_client::{Compare, CompareOp, GetOptions, PutOptions, Txn, TxnOp};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::{EtcdKv, Fence, KvError, client_error};

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

/// The session's timing rules, on instants handed in.
#[derive(Debug, Clone, Copy)]
pub struct SessionClock {
    ttl: Duration,
    last_renewal: Instant,
    next_renewal: Instant,
}

impl SessionClock {
    /// A session granted (or renewed) at `now`.
    pub fn new(ttl: Duration, now: Instant) -> Self {
        Self {
            ttl,
            last_renewal: now,
            next_renewal: now + ttl / 3,
        }
    }

    /// Whether the session is due for a renewal at `now`.
    pub fn renewal_due(&self, now: Instant) -> bool {
        now >= self.next_renewal
    }

    /// A renewal succeeded at `now`.
    pub fn renewed(&mut self, now: Instant) {
        self.last_renewal = now;
        self.next_renewal = now + self.ttl / 3;
    }

    /// A renewal failed at `now`: try again soon.
    pub fn renewal_failed(&mut self, now: Instant) {
        self.next_renewal = now + (self.ttl / 10).max(Duration::from_millis(100));
    }

    /// Whether the server must stop relying on the session at `now`: three quarters of the TTL
    /// passed since its last renewal, so etcd may let it lapse before the next one lands.
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
        let mut client = self.client();
        let records = client
            .get(
                self.prefixed(b"members/"),
                Some(GetOptions::new().with_prefix()),
            )
            .await
            .map_err(|error| client_error("read", error))?;
        let alive = client
            .get(
                self.prefixed(b"alive/"),
                Some(GetOptions::new().with_prefix().with_keys_only()),
            )
            .await
            .map_err(|error| client_error("read", error))?;
        let alive_prefix = self.prefixed(b"alive/");
        let alive: std::collections::BTreeSet<Vec<u8>> = alive
            .kvs()
            .iter()
            .map(|pair| pair.key()[alive_prefix.len()..].to_vec())
            .collect();
        let members_prefix = self.prefixed(b"members/");
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
        let mut client = self.client();
        let ttl_seconds = i64::try_from(candidate.ttl.as_secs().max(2)).unwrap_or(5);
        let lease = client
            .lease_grant(ttl_seconds, None)
            .await
            .map_err(|error| client_error("lease", error))?
            .id();
        view.send_modify(|known| known.last_contact = Some(Instant::now()));
        if let Some(old) = previous.replace(lease) {
            // It may have lapsed already; either way it is gone after this.
            let _ = client.lease_revoke(old).await;
        }
        let mut clock = SessionClock::new(candidate.ttl, Instant::now());
        let member_key = self.prefixed(format!("members/{}", candidate.name).as_bytes());
        let alive_key = self.prefixed(format!("alive/{}", candidate.name).as_bytes());
        client
            .txn(Txn::new().and_then(vec![
                TxnOp::put(member_key, candidate.record.clone(), None),
                TxnOp::put(
                    alive_key,
                    candidate.record.clone(),
                    Some(PutOptions::new().with_lease(lease)),
                ),
            ]))
            .await
            .map_err(|error| client_error("member", error))?;
        let (mut keeper, mut stream) = client
            .lease_keep_alive(lease)
            .await
            .map_err(|error| client_error("lease", error))?;
        let leader_key = self.leader_key();
        loop {
            let now = Instant::now();
            if clock.must_step_down(now) {
                tracing::error!(
                    "could not renew this server's etcd session in time; it stops leading"
                );
                return Ok(());
            }
            if clock.renewal_due(now) {
                let renewal = tokio::time::timeout(candidate.ttl / 4, async {
                    keeper.keep_alive().await?;
                    stream.message().await
                })
                .await;
                match renewal {
                    Ok(Ok(Some(answer))) if answer.ttl() > 0 => {
                        clock.renewed(now);
                        view.send_modify(|known| known.last_contact = Some(now));
                    }
                    Ok(Ok(Some(_))) => {
                        tracing::error!("this server's etcd session lapsed; it stops leading");
                        return Ok(());
                    }
                    Ok(Ok(None) | Err(_)) | Err(_) => {
                        clock.renewal_failed(now);
                        // The keep-alive stream may be broken: open another on the same lease.
                        if let Ok((new_keeper, new_stream)) = client.lease_keep_alive(lease).await {
                            keeper = new_keeper;
                            stream = new_stream;
                        }
                    }
                }
            }
            let attempt = Txn::new()
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
            let answered = tokio::time::timeout(candidate.ttl / 4, client.txn(attempt)).await;
            if let Ok(Ok(response)) = answered {
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
                if ours && !clock.must_step_down(Instant::now()) {
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
                    // Contact alone is no news worth waking watchers for.
                    changed
                });
            }
            tokio::time::sleep(candidate.poll).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_renews_every_third_of_its_ttl_and_steps_down_before_it_can_lapse() {
        let start = Instant::now();
        let ttl = Duration::from_secs(6);
        let mut clock = SessionClock::new(ttl, start);
        assert!(!clock.renewal_due(start + Duration::from_millis(1999)));
        assert!(clock.renewal_due(start + Duration::from_secs(2)));

        // Renewals keep pushing the deadline out.
        clock.renewed(start + Duration::from_secs(2));
        assert!(!clock.must_step_down(start + Duration::from_secs(6)));

        // Renewals failing: retried soon, and the server steps down at 3/4 of the TTL since
        // the last success, before etcd may let the lease lapse.
        clock.renewal_failed(start + Duration::from_secs(4));
        assert!(clock.renewal_due(start + Duration::from_millis(4600)));
        assert!(!clock.must_step_down(start + Duration::from_millis(6499)));
        assert!(clock.must_step_down(start + Duration::from_millis(6500)));
    }
}
