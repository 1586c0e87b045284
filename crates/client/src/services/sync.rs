//! Keeps one workload's registrations in the catalog in line with what its hook wants.
//!
//! A hook says what it wants ([`ServiceSync::want`]: the registrations, or none) and then asks
//! for a [`ServiceSync::sync`], which sends the difference: a delete of every ID the catalog may
//! still hold that is no longer wanted, then an upsert of everything wanted (an upsert of the same
//! registrations is harmless, which is what makes a restored agent's re-registration free of
//! duplicates and of flapping: nothing is deleted first). Attempts are serialized and always send
//! the latest wish, so a registration and a deregistration that race end in the later one.
//!
//! When an attempt fails with an error worth retrying (no server reachable), a background retry
//! sends the latest wish again after 1 s, 2 s, 4 s … up to 60 s, until one succeeds or the wish is
//! met by a later call; a refused request is logged and not retried. Delays are tokio time.
//!
//! **Not** here: what the registrations are ([`super::workload`]) or when a workload wants them
//! (the hooks).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use drover_structs::ServiceRegistration;

use super::ServiceRegistrar;
use crate::mutex::lock;
use crate::server_conn::ServerConnError;

/// First delay before a failed sync is tried again.
pub const SYNC_RETRY_BASELINE: Duration = Duration::from_secs(1);
/// Cap of the retry delay.
pub const SYNC_RETRY_LIMIT: Duration = Duration::from_secs(60);

/// The delay before retry `attempt` (0-based): baseline × 2^attempt, capped.
pub fn sync_retry_backoff(attempt: u32) -> Duration {
    let factor = 1u32.checked_shl(attempt).unwrap_or(u32::MAX);
    SYNC_RETRY_BASELINE
        .checked_mul(factor)
        .map_or(SYNC_RETRY_LIMIT, |delay| delay.min(SYNC_RETRY_LIMIT))
}

#[derive(Debug, Default)]
struct Wish {
    /// What the catalog should hold for this workload.
    wanted: Vec<ServiceRegistration>,
    /// IDs the catalog may hold for this workload: sent before, or named by the hook as
    /// possibly left by an earlier agent.
    maybe_held: BTreeSet<String>,
    /// Bumped by every [`ServiceSync::want`]; an attempt meets the wish it read.
    generation: u64,
    /// The generation the catalog is known to match.
    synced_generation: u64,
    /// A background retry is under way.
    retrying: bool,
}

/// One workload's registrations (see the module docs). Shared by its hook and its retry task.
#[derive(Debug)]
pub struct ServiceSync {
    registrar: Arc<dyn ServiceRegistrar>,
    /// For logs: the allocation and the owner (task or `group-<group>`).
    alloc_id: String,
    owner: String,
    wish: Mutex<Wish>,
    /// Serializes attempts.
    attempt: tokio::sync::Mutex<()>,
}

impl ServiceSync {
    pub fn new(registrar: Arc<dyn ServiceRegistrar>, alloc_id: &str, owner: &str) -> Arc<Self> {
        Arc::new(ServiceSync {
            registrar,
            alloc_id: alloc_id.to_owned(),
            owner: owner.to_owned(),
            wish: Mutex::new(Wish::default()),
            attempt: tokio::sync::Mutex::new(()),
        })
    }

    /// Records what the catalog should hold; `maybe_held` names IDs it may hold from before
    /// (deleted unless wanted). Sends nothing: call [`ServiceSync::sync`].
    pub fn want(&self, wanted: Vec<ServiceRegistration>, maybe_held: Vec<String>) {
        let mut wish = lock(&self.wish);
        wish.wanted = wanted;
        wish.maybe_held.extend(maybe_held);
        wish.generation += 1;
    }

    /// Whether there is nothing to send: nothing wanted and nothing possibly held.
    pub fn is_idle(&self) -> bool {
        let wish = lock(&self.wish);
        wish.wanted.is_empty() && wish.maybe_held.is_empty()
    }

    /// The registrations currently wanted.
    pub fn wanted(&self) -> Vec<ServiceRegistration> {
        lock(&self.wish).wanted.clone()
    }

    /// Sends the latest wish. On a failure worth retrying, a background retry takes over (the
    /// error is still returned, for the caller to log or report).
    pub async fn sync(self: &Arc<Self>) -> Result<(), ServerConnError> {
        let result = self.attempt().await;
        if let Err(error) = &result {
            if error.is_retryable() {
                self.start_retry();
            } else {
                tracing::warn!(alloc_id = %self.alloc_id, owner = %self.owner, %error, "service registration refused; not retrying");
            }
        }
        result
    }

    async fn attempt(&self) -> Result<(), ServerConnError> {
        let _serialized = self.attempt.lock().await;
        let (wanted, stale, generation) = {
            let mut wish = lock(&self.wish);
            if wish.synced_generation == wish.generation {
                return Ok(());
            }
            let wanted_ids: BTreeSet<&String> = wish.wanted.iter().map(|r| &r.id).collect();
            let stale: Vec<String> = wish
                .maybe_held
                .iter()
                .filter(|id| !wanted_ids.contains(id))
                .cloned()
                .collect();
            let wanted = wish.wanted.clone();
            // From the moment the upsert is sent the catalog may hold these.
            let ids: Vec<String> = wanted.iter().map(|r| r.id.clone()).collect();
            wish.maybe_held.extend(ids);
            (wanted, stale, wish.generation)
        };
        if !stale.is_empty() {
            self.registrar.delete(stale.clone()).await?;
            let mut wish = lock(&self.wish);
            for id in &stale {
                // Wanted again since the snapshot: a later attempt upserts it.
                if !wish.wanted.iter().any(|r| &r.id == id) {
                    wish.maybe_held.remove(id);
                }
            }
        }
        if !wanted.is_empty() {
            self.registrar.upsert(wanted).await?;
        }
        let mut wish = lock(&self.wish);
        wish.synced_generation = wish.synced_generation.max(generation);
        Ok(())
    }

    fn start_retry(self: &Arc<Self>) {
        {
            let mut wish = lock(&self.wish);
            if wish.retrying {
                return;
            }
            wish.retrying = true;
        }
        let weak: Weak<ServiceSync> = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut attempt = 0u32;
            loop {
                tokio::time::sleep(sync_retry_backoff(attempt)).await;
                attempt = attempt.saturating_add(1);
                // The hook is gone (its runner was dropped): nobody wants anything any more.
                let Some(sync) = weak.upgrade() else {
                    return;
                };
                match sync.attempt().await {
                    Ok(()) => {
                        tracing::info!(alloc_id = %sync.alloc_id, owner = %sync.owner, "service registrations synced after retrying");
                        lock(&sync.wish).retrying = false;
                        return;
                    }
                    Err(error) if error.is_retryable() => {
                        tracing::debug!(alloc_id = %sync.alloc_id, owner = %sync.owner, %error, "service sync failed; retrying");
                    }
                    Err(error) => {
                        tracing::warn!(alloc_id = %sync.alloc_id, owner = %sync.owner, %error, "service registration refused; not retrying");
                        lock(&sync.wish).retrying = false;
                        return;
                    }
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{Call, RecordingRegistrar};
    use super::*;

    fn registration(id: &str) -> ServiceRegistration {
        ServiceRegistration {
            id: id.into(),
            service_name: "web".into(),
            ..ServiceRegistration::default()
        }
    }

    #[test]
    fn backoff_doubles_and_caps_at_a_minute() {
        assert_eq!(sync_retry_backoff(0), Duration::from_secs(1));
        assert_eq!(sync_retry_backoff(3), Duration::from_secs(8));
        assert_eq!(sync_retry_backoff(6), Duration::from_secs(60));
        assert_eq!(sync_retry_backoff(99), Duration::from_secs(60));
    }

    #[tokio::test(start_paused = true)]
    async fn a_changed_wish_deletes_what_is_no_longer_wanted_and_upserts_the_rest() {
        let catalog = Arc::new(RecordingRegistrar::default());
        let sync = ServiceSync::new(catalog.clone(), "a1", "web");
        assert!(sync.is_idle());
        sync.want(vec![registration("x"), registration("y")], vec![]);
        sync.sync().await.unwrap();
        // Nothing new: nothing sent.
        sync.sync().await.unwrap();
        sync.want(vec![registration("y")], vec![]);
        sync.sync().await.unwrap();
        sync.want(vec![], vec![]);
        sync.sync().await.unwrap();
        assert_eq!(
            catalog.calls(),
            vec![
                Call::Upsert(vec!["x".into(), "y".into()]),
                Call::Delete(vec!["x".into()]),
                Call::Upsert(vec!["y".into()]),
                Call::Delete(vec!["y".into()]),
            ]
        );
        assert!(catalog.catalog().is_empty());
        assert!(sync.is_idle());
    }

    #[tokio::test(start_paused = true)]
    async fn an_unreachable_server_is_retried_with_backoff_and_the_latest_wish_wins() {
        let catalog = Arc::new(RecordingRegistrar::default());
        let sync = ServiceSync::new(catalog.clone(), "a1", "web");
        catalog.set_unreachable(true);
        sync.want(vec![registration("x")], vec![]);
        assert!(sync.sync().await.is_err());
        tokio::time::sleep(Duration::from_millis(1500)).await;
        // First retry (after 1 s) failed too; the wish changes meanwhile.
        assert_eq!(catalog.calls().len(), 2);
        sync.want(vec![registration("z")], vec![]);
        catalog.set_unreachable(false);
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(
            catalog.catalog().keys().cloned().collect::<Vec<_>>(),
            vec!["z".to_owned()]
        );
        // x may have reached the catalog before the failure: it was deleted.
        assert!(catalog.calls().contains(&Call::Delete(vec!["x".into()])));
        let calls = catalog.calls().len();
        tokio::time::sleep(Duration::from_secs(300)).await;
        assert_eq!(catalog.calls().len(), calls, "the retry stops once synced");
    }

    #[tokio::test(start_paused = true)]
    async fn ids_possibly_left_by_an_earlier_agent_are_deleted_when_not_wanted() {
        let catalog = Arc::new(RecordingRegistrar::default());
        let sync = ServiceSync::new(catalog.clone(), "a1", "web");
        sync.want(vec![], vec!["old".into()]);
        assert!(!sync.is_idle());
        sync.sync().await.unwrap();
        assert_eq!(catalog.calls(), vec![Call::Delete(vec!["old".into()])]);
        assert!(sync.is_idle());
    }
}
