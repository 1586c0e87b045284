//! The server's timers for variable locks (Nomad's lock TTL timers): a lock lives twice its
//! TTL after it was taken or last renewed; when that passes without a renewal the lock is
//! lost, and after its `LockDelay` the server releases it in the store, so another caller
//! may take it. Timers run on tokio time (paused in tests) and start again, from the full
//! period, for every lock found in the store when the server starts.
//!
//! Not here: taking, giving back and checking locks (the store's `write_variable_lock`, the
//! server's `variables` module).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use drover_state::{StateStore, VariableLockOp, VariableLockWrite};
use drover_structs::VariableMetadata;
use tokio::time::Instant;

/// How often the server tries to release an expired lock before leaving it to the next start.
const RELEASE_ATTEMPTS: u32 = 6;

struct LockTimer {
    deadline: Mutex<Instant>,
    task: tokio::task::AbortHandle,
}

/// The running lock timers, by lock ID.
pub struct VariableLocks {
    state: StateStore,
    timers: Mutex<HashMap<String, Arc<LockTimer>>>,
}

/// A lock's lifetime: twice its TTL, as Nomad.
fn lifetime(ttl_ns: i64) -> Duration {
    Duration::from_nanos(u64::try_from(ttl_ns).unwrap_or(0).saturating_mul(2))
}

impl VariableLocks {
    /// No timers yet; see [`VariableLocks::restore`].
    pub fn new(state: StateStore) -> Arc<Self> {
        Arc::new(Self {
            state,
            timers: Mutex::new(HashMap::new()),
        })
    }

    /// Starts a timer for every lock held in the store.
    pub fn restore(self: &Arc<Self>) {
        for variable in self.state.locked_variables() {
            self.start(&variable.meta);
        }
    }

    fn timers(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<LockTimer>>> {
        self.timers.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts the timer of the lock `meta` holds (nothing when it holds none or a timer runs).
    pub fn start(self: &Arc<Self>, meta: &VariableMetadata) {
        let Some(lock) = meta.lock.clone() else {
            return;
        };
        let mut timers = self.timers();
        if timers.contains_key(&lock.id) {
            tracing::warn!(lock_id = %lock.id, "a variable lock's timer already runs");
            return;
        }
        let lock_id = lock.id.clone();
        let (namespace, path) = (meta.namespace.clone(), meta.path.clone());
        let deadline = Instant::now() + lifetime(lock.ttl.0);
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel::<Arc<LockTimer>>();
        let locks = Arc::downgrade(self);
        let task = tokio::spawn(async move {
            let Ok(timer) = ready_rx.await else {
                return;
            };
            loop {
                let due = *timer
                    .deadline
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                tokio::time::sleep_until(due).await;
                let due = *timer
                    .deadline
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                if due <= Instant::now() {
                    break;
                }
            }
            let Some(locks) = locks.upgrade() else {
                return;
            };
            locks.timers().remove(&lock.id);
            tracing::debug!(%namespace, %path, "variable lock expired, releasing after its delay");
            tokio::time::sleep(Duration::from_nanos(
                u64::try_from(lock.lock_delay.0).unwrap_or(0),
            ))
            .await;
            locks.release_expired(namespace, path, lock.id).await;
        });
        let timer = Arc::new(LockTimer {
            deadline: Mutex::new(deadline),
            task: task.abort_handle(),
        });
        timers.insert(lock_id, Arc::clone(&timer));
        // The task waits for its timer; it cannot have ended before this send.
        let _ = ready_tx.send(timer);
    }

    /// Renews lock `lock_id` for another twice `ttl_ns`; false when no timer runs for it (it
    /// expired, or the server never started one).
    pub fn renew(&self, lock_id: &str, ttl_ns: i64) -> bool {
        match self.timers().get(lock_id) {
            Some(timer) => {
                *timer
                    .deadline
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) = Instant::now() + lifetime(ttl_ns);
                true
            }
            None => false,
        }
    }

    /// Stops lock `lock_id`'s timer (the lock was released).
    pub fn stop(&self, lock_id: &str) {
        if let Some(timer) = self.timers().remove(lock_id) {
            timer.task.abort();
        }
    }

    /// Whether a timer runs for lock `lock_id`.
    pub fn is_running(&self, lock_id: &str) -> bool {
        self.timers().contains_key(lock_id)
    }

    async fn release_expired(&self, namespace: String, path: String, lock_id: String) {
        for attempt in 0..RELEASE_ATTEMPTS {
            let op = VariableLockOp::Release {
                namespace: namespace.clone(),
                path: path.clone(),
                lock_id: Some(lock_id.clone()),
            };
            match self.state.write_variable_lock(op, 0).await {
                // Released, or released and taken again meanwhile: nothing left to do.
                Ok(
                    VariableLockWrite::Applied { .. }
                    | VariableLockWrite::Conflict(_)
                    | VariableLockWrite::NoLock
                    | VariableLockWrite::NotFound,
                ) => return,
                Err(error) => {
                    tracing::warn!(%namespace, %path, %error, "releasing an expired variable lock failed");
                    tokio::time::sleep(Duration::from_secs(10 << attempt)).await;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use drover_structs::VariableEncrypted;
    use drover_structs::variables::VariableLock;

    use super::*;

    fn locked(path: &str, id: &str) -> VariableEncrypted {
        VariableEncrypted {
            version: 1,
            meta: VariableMetadata {
                namespace: "default".to_owned(),
                path: path.to_owned(),
                lock: Some(VariableLock {
                    id: id.to_owned(),
                    ttl: drover_structs::DurationNs(10_000_000_000),
                    lock_delay: drover_structs::DurationNs(5_000_000_000),
                }),
                ..VariableMetadata::default()
            },
            key_id: "k".to_owned(),
            data: "sealed".to_owned(),
        }
    }

    async fn settle() {
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_lock_not_renewed_for_twice_its_ttl_is_released_after_its_delay() {
        let state = StateStore::in_memory().await.unwrap();
        let VariableLockWrite::Applied { variable, .. } = state
            .write_variable_lock(VariableLockOp::Acquire(locked("a", "L1")), 1)
            .await
            .unwrap()
        else {
            panic!("not acquired")
        };
        let locks = VariableLocks::new(state.clone());
        locks.start(&variable.meta);
        settle().await;

        // Renewed at 15 s, it lives until 35 s.
        tokio::time::advance(Duration::from_secs(15)).await;
        assert!(locks.renew("L1", 10_000_000_000));
        tokio::time::advance(Duration::from_secs(19)).await;
        settle().await;
        assert!(locks.is_running("L1"));
        // Lost at 35 s: no renewal any more, but still held during the delay.
        tokio::time::advance(Duration::from_secs(2)).await;
        settle().await;
        assert!(!locks.is_running("L1"));
        assert!(!locks.renew("L1", 10_000_000_000));
        assert!(state.variable("default", "a").unwrap().meta.lock.is_some());
        // Released after the 5 s delay.
        tokio::time::advance(Duration::from_secs(5)).await;
        settle().await;
        let released = state.variable("default", "a").unwrap();
        assert!(released.meta.lock.is_none());
        assert_eq!(released.data, "sealed");
    }

    #[tokio::test(start_paused = true)]
    async fn a_stopped_timer_releases_nothing_and_restore_restarts_timers() {
        let state = StateStore::in_memory().await.unwrap();
        state
            .write_variable_lock(VariableLockOp::Acquire(locked("b", "L2")), 1)
            .await
            .unwrap();
        let locks = VariableLocks::new(state.clone());
        locks.restore();
        settle().await;
        assert!(locks.is_running("L2"));
        locks.stop("L2");
        tokio::time::advance(Duration::from_secs(60)).await;
        settle().await;
        assert!(state.variable("default", "b").unwrap().meta.lock.is_some());
    }
}
