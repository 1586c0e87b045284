//! Batched allocation status updates to the servers: a shared buffer holding the latest update
//! per allocation, and a sender task that drains it on a tick.
//!
//! ```text
//!  alloc runners ──report()──▶ StatusBuffer { alloc id → latest update }   (never waits on I/O)
//!                                   │ a report that changes a ClientStatus (or the
//!                                   │   deployment health) the server knows (urgent)
//!                                   │                   → send 20 ms later, with whatever
//!                                   │                     else arrived meanwhile
//!                                   │ every 200 ms tick:
//!                                   │   urgent entries waiting  → send now
//!                                   │   otherwise               → send on every 5th tick
//!                                   ▼
//!                       ServerConn::update_allocs(batch)
//!                          ok    → remember the accepted ClientStatus per alloc
//!                          error → put entries back unless a newer one arrived, back off
//!                          refused (400: the report itself is bad) → dropped
//! ```
//!
//! Only a changed `ClientStatus` or a newly decided deployment health moves deployments and
//! reschedules along, so the many task
//! events of an allocation's early life are coalesced into a send at most once a second, while a
//! move to `running`, `complete` or `failed` goes out within 20 ms. Nomad waits for its 200 ms
//! tick (`allocSyncIntv`) for those too; drover's short coalescing window still gathers a burst
//! of allocations that start together into one send, and takes the tick off the time from
//! `job run` to running. The buffer replaces a
//! channel so that a slow or failing server call never pushes back on the runners: reporting is
//! a map insert under a short lock.
//!
//! **Not here**: deciding what an allocation's status is (the alloc runner derives it), or how
//! the update travels (the [`ServerConn`] implementation).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use crate::allocrunner::{AllocClientUpdate as RunnerStatusUpdate, AllocStatusSink};
use crate::server_conn::{AllocClientUpdate, ServerConn};

/// The batching period (Nomad's `allocSyncIntv`).
pub const STATUS_TICK: Duration = Duration::from_millis(200);
/// How long an urgent report (a changed ClientStatus) waits for others to join its send.
pub const URGENT_DELAY: Duration = Duration::from_millis(20);
/// Without an urgent entry, the buffer is sent on every this many ticks.
pub const TICKS_PER_ROUTINE_SEND: u64 = 5;
/// The first wait after a failed send; doubles on each further failure.
pub const FIRST_RETRY_BACKOFF: Duration = Duration::from_secs(1);
/// The longest wait between retries (Nomad's `allocSyncRetryIntv`).
pub const MAX_RETRY_BACKOFF: Duration = Duration::from_secs(5);

/// Timing of the sender; [`StatusBufferTiming::default`] is Nomad's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatusBufferTiming {
    pub tick: Duration,
    pub urgent_delay: Duration,
    pub ticks_per_routine_send: u64,
    pub first_retry_backoff: Duration,
    pub max_retry_backoff: Duration,
}

impl Default for StatusBufferTiming {
    fn default() -> Self {
        Self {
            tick: STATUS_TICK,
            urgent_delay: URGENT_DELAY,
            ticks_per_routine_send: TICKS_PER_ROUTINE_SEND,
            first_retry_backoff: FIRST_RETRY_BACKOFF,
            max_retry_backoff: MAX_RETRY_BACKOFF,
        }
    }
}

/// The latest not-yet-sent update of each allocation, plus what the server last accepted.
#[derive(Debug, Default)]
pub struct StatusBuffer {
    state: Mutex<BufferState>,
    /// Woken by a report that changes a ClientStatus the server knows.
    urgent: tokio::sync::Notify,
}

#[derive(Debug, Default)]
struct BufferState {
    /// Latest update per allocation, waiting for the next send.
    pending: HashMap<String, PendingEntry>,
    /// Bumped on every report; lets a failed batch tell whether an entry was overwritten.
    next_sequence: u64,
    /// The ClientStatus the server last accepted for each allocation.
    accepted_status: HashMap<String, String>,
    /// The deployment health (`Healthy`) the server last accepted for each allocation.
    accepted_health: HashMap<String, Option<bool>>,
    /// Garbage-collected allocations whose last update is still waiting: forgotten for good
    /// once it has been sent.
    forget_after_send: HashSet<String>,
}

impl BufferState {
    /// Whether `update` changes the ClientStatus, or newly decides the deployment health, the
    /// server last accepted for its allocation.
    fn is_urgent(&self, update: &AllocClientUpdate) -> bool {
        let health = update
            .deployment_status
            .as_ref()
            .and_then(|status| status.healthy);
        self.accepted_status.get(&update.alloc_id) != Some(&update.client_status)
            || (health.is_some()
                && self
                    .accepted_health
                    .get(&update.alloc_id)
                    .copied()
                    .flatten()
                    != health)
    }

    fn any_urgent(&self) -> bool {
        self.pending
            .values()
            .any(|entry| self.is_urgent(&entry.update))
    }
}

#[derive(Debug)]
struct PendingEntry {
    update: AllocClientUpdate,
    sequence: u64,
}

/// A batch taken out of the buffer; handed back on failure so nothing newer is overwritten.
#[derive(Debug)]
struct TakenBatch {
    entries: Vec<PendingEntry>,
}

impl TakenBatch {
    fn updates(&self) -> Vec<AllocClientUpdate> {
        self.entries
            .iter()
            .map(|entry| entry.update.clone())
            .collect()
    }
}

impl StatusBuffer {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, BufferState> {
        // A panic while holding this lock leaves a map that is still consistent (every
        // operation is a single insert or remove), so a poisoned lock is safe to keep using.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records the latest status of an allocation, replacing any unsent older one. Never waits
    /// on the server.
    pub fn report(&self, update: AllocClientUpdate) {
        let urgent = {
            let mut state = self.lock();
            state.next_sequence += 1;
            let sequence = state.next_sequence;
            let urgent = state.is_urgent(&update);
            state
                .pending
                .insert(update.alloc_id.clone(), PendingEntry { update, sequence });
            urgent
        };
        if urgent {
            // A permit is kept when the sender is busy, so the wake-up is never lost.
            self.urgent.notify_one();
        }
    }

    /// Forgets an allocation that has been garbage collected. Its last update, if still
    /// waiting, is sent first — a collected allocation's final status (often its terminal one)
    /// must still reach the server — and the allocation is forgotten once it has been.
    pub fn forget(&self, alloc_id: &str) {
        let mut state = self.lock();
        state.accepted_status.remove(alloc_id);
        state.accepted_health.remove(alloc_id);
        if state.pending.contains_key(alloc_id) {
            state.forget_after_send.insert(alloc_id.to_owned());
        }
    }

    /// How many allocations have an update waiting.
    pub fn pending_count(&self) -> usize {
        self.lock().pending.len()
    }

    /// The waiting update of one allocation, if any.
    pub fn pending_update(&self, alloc_id: &str) -> Option<AllocClientUpdate> {
        self.lock()
            .pending
            .get(alloc_id)
            .map(|entry| entry.update.clone())
    }

    /// Whether some waiting update changes a ClientStatus the server knows.
    pub fn has_urgent_update(&self) -> bool {
        self.lock().any_urgent()
    }

    /// Takes the whole buffer if it is due: when urgent, or on a routine tick.
    fn take_if_due(&self, routine_tick: bool) -> Option<TakenBatch> {
        let mut state = self.lock();
        if state.pending.is_empty() {
            return None;
        }
        if !routine_tick && !state.any_urgent() {
            return None;
        }
        let entries = state.pending.drain().map(|(_, entry)| entry).collect();
        Some(TakenBatch { entries })
    }

    fn mark_accepted(&self, batch: &TakenBatch) {
        let mut state = self.lock();
        for entry in &batch.entries {
            let alloc_id = &entry.update.alloc_id;
            if state.forget_after_send.remove(alloc_id) && !state.pending.contains_key(alloc_id) {
                continue;
            }
            state
                .accepted_status
                .insert(alloc_id.clone(), entry.update.client_status.clone());
            let health = entry
                .update
                .deployment_status
                .as_ref()
                .and_then(|status| status.healthy);
            state.accepted_health.insert(alloc_id.clone(), health);
        }
    }

    /// Puts back the entries of a failed batch, except where a newer report arrived meanwhile.
    fn restore(&self, batch: TakenBatch) {
        let mut state = self.lock();
        for entry in batch.entries {
            let newer_exists = state
                .pending
                .get(&entry.update.alloc_id)
                .is_some_and(|pending| pending.sequence > entry.sequence);
            if !newer_exists {
                state.pending.insert(entry.update.alloc_id.clone(), entry);
            }
        }
    }

    /// Starts the sender task. It runs until `shutdown` is cancelled, then makes one last
    /// attempt to send what is left.
    pub fn spawn_sender<S: ServerConn>(
        self: &Arc<Self>,
        conn: Arc<S>,
        timing: StatusBufferTiming,
        shutdown: CancellationToken,
    ) -> JoinHandle<()> {
        let buffer = Arc::clone(self);
        tokio::spawn(async move { buffer.run_sender(conn, timing, shutdown).await })
    }

    async fn run_sender<S: ServerConn>(
        &self,
        conn: Arc<S>,
        timing: StatusBufferTiming,
        shutdown: CancellationToken,
    ) {
        let mut ticker = tokio::time::interval_at(Instant::now() + timing.tick, timing.tick);
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let ticks_per_routine_send = timing.ticks_per_routine_send.max(1);
        let mut tick_count: u64 = 0;
        let mut backoff = timing.first_retry_backoff;
        let mut retry_not_before: Option<Instant> = None;
        loop {
            let on_tick = tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = ticker.tick() => true,
                () = self.urgent.notified() => {
                    tokio::select! {
                        _ = shutdown.cancelled() => break,
                        () = tokio::time::sleep(timing.urgent_delay) => false,
                    }
                }
            };
            if on_tick {
                tick_count += 1;
            }
            if retry_not_before.is_some_and(|not_before| Instant::now() < not_before) {
                continue;
            }
            let routine_tick = (on_tick && tick_count.is_multiple_of(ticks_per_routine_send))
                || retry_not_before.is_some();
            let Some(batch) = self.take_if_due(routine_tick) else {
                continue;
            };
            match self.send(&*conn, batch).await {
                SendOutcome::Sent | SendOutcome::Dropped => {
                    retry_not_before = None;
                    backoff = timing.first_retry_backoff;
                }
                SendOutcome::Retry => {
                    retry_not_before = Some(Instant::now() + backoff);
                    backoff = (backoff * 2).min(timing.max_retry_backoff);
                }
            }
        }
        // Last attempt so that a graceful shutdown does not swallow the final states.
        if let Some(batch) = self.take_if_due(true) {
            let _ = self.send(&*conn, batch).await;
        }
    }

    async fn send<S: ServerConn>(&self, conn: &S, batch: TakenBatch) -> SendOutcome {
        let count = batch.entries.len();
        match conn.update_allocs(batch.updates()).await {
            Ok(()) => {
                tracing::trace!(count, "sent allocation status updates");
                self.mark_accepted(&batch);
                SendOutcome::Sent
            }
            Err(error) if error.is_retryable() => {
                tracing::warn!(%error, count, "sending allocation status updates failed; will retry");
                self.restore(batch);
                SendOutcome::Retry
            }
            Err(error) => {
                tracing::error!(%error, count, "server refused allocation status updates; dropped");
                SendOutcome::Dropped
            }
        }
    }
}

/// The alloc runners report here. Their own "status changed" flag is not needed: urgency is
/// judged against what the server last accepted, which also covers a change whose send failed.
impl AllocStatusSink for StatusBuffer {
    fn alloc_updated(&self, update: RunnerStatusUpdate) {
        self.report(AllocClientUpdate {
            alloc_id: update.alloc_id,
            client_status: update.client_status,
            client_description: update.client_description,
            task_states: update.task_states,
            deployment_status: update.deployment_status,
            network_status: update.network_status,
        });
    }
}

enum SendOutcome {
    Sent,
    Retry,
    Dropped,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server_conn::{NodeAllocations, ServerConnError};
    use drover_structs::{
        ALLOC_CLIENT_STATUS_PENDING, ALLOC_CLIENT_STATUS_RUNNING, Allocation, Node,
    };
    use std::collections::BTreeMap;

    /// Records every batch with the (paused) time it arrived; fails the first `failures` calls.
    #[derive(Default)]
    struct RecordingConn {
        batches: Mutex<Vec<(Instant, Vec<AllocClientUpdate>)>>,
        failures_left: Mutex<u32>,
    }

    impl RecordingConn {
        fn failing(failures: u32) -> Self {
            Self {
                failures_left: Mutex::new(failures),
                ..Self::default()
            }
        }
        fn batches(&self) -> Vec<(Instant, Vec<AllocClientUpdate>)> {
            self.batches
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone()
        }
    }

    impl ServerConn for RecordingConn {
        async fn register_node(&self, _node: Node) -> Result<Duration, ServerConnError> {
            Err(ServerConnError::Rejected {
                message: "not in this test".into(),
            })
        }
        async fn heartbeat(&self, _: &str, _: &str) -> Result<Duration, ServerConnError> {
            Err(ServerConnError::Rejected {
                message: "not in this test".into(),
            })
        }
        async fn node_allocs(
            &self,
            _: &str,
            _: u64,
            _: Duration,
        ) -> Result<NodeAllocations, ServerConnError> {
            Err(ServerConnError::Rejected {
                message: "not in this test".into(),
            })
        }
        async fn get_allocs(&self, _: Vec<String>) -> Result<Vec<Allocation>, ServerConnError> {
            Err(ServerConnError::Rejected {
                message: "not in this test".into(),
            })
        }
        async fn update_allocs(
            &self,
            updates: Vec<AllocClientUpdate>,
        ) -> Result<(), ServerConnError> {
            {
                let mut failures_left = self
                    .failures_left
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                if *failures_left > 0 {
                    *failures_left -= 1;
                    return Err(ServerConnError::Unavailable {
                        message: "connection refused".into(),
                    });
                }
            }
            self.batches
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push((Instant::now(), updates));
            Ok(())
        }
        async fn upsert_services(
            &self,
            _: Vec<drover_structs::ServiceRegistration>,
        ) -> Result<(), ServerConnError> {
            Err(ServerConnError::Rejected {
                message: "not in this test".into(),
            })
        }
        async fn delete_services(&self, _: Vec<String>) -> Result<(), ServerConnError> {
            Err(ServerConnError::Rejected {
                message: "not in this test".into(),
            })
        }
    }

    fn update(alloc_id: &str, status: &str, version: u32) -> AllocClientUpdate {
        AllocClientUpdate {
            alloc_id: alloc_id.to_string(),
            client_status: status.to_string(),
            client_description: format!("version {version}"),
            task_states: BTreeMap::new(),
            ..AllocClientUpdate::default()
        }
    }

    fn start(conn: &Arc<RecordingConn>) -> (Arc<StatusBuffer>, CancellationToken, JoinHandle<()>) {
        let buffer = Arc::new(StatusBuffer::new());
        let shutdown = CancellationToken::new();
        let sender = buffer.spawn_sender(
            Arc::clone(conn),
            StatusBufferTiming::default(),
            shutdown.clone(),
        );
        (buffer, shutdown, sender)
    }

    #[tokio::test(start_paused = true)]
    async fn many_transitions_without_status_change_are_coalesced_into_few_sends() {
        let conn = Arc::new(RecordingConn::default());
        let (buffer, shutdown, sender) = start(&conn);
        let started = Instant::now();

        // The first report is urgent (the server knows no status yet).
        buffer.report(update("a1", ALLOC_CLIENT_STATUS_PENDING, 0));
        tokio::time::sleep(STATUS_TICK + Duration::from_millis(10)).await;
        assert_eq!(conn.batches().len(), 1, "the first status goes out at once");

        // Fifty task-level changes over two seconds, all still `pending`.
        for version in 1..=50 {
            buffer.report(update("a1", ALLOC_CLIENT_STATUS_PENDING, version));
            tokio::time::sleep(Duration::from_millis(40)).await;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        shutdown.cancel();
        let _ = sender.await;

        let batches = conn.batches();
        // 50 reports over ~3 s of routine ticks: at most one send per second, plus the first.
        let elapsed = Instant::now() - started;
        let routine_sends_allowed = elapsed.as_secs() as usize + 1;
        assert!(
            batches.len() >= 2 && batches.len() <= 1 + routine_sends_allowed,
            "expected a few coalesced sends, got {}",
            batches.len()
        );
        let last_batch = batches
            .last()
            .map(|(_, batch)| batch.clone())
            .unwrap_or_default();
        assert_eq!(
            last_batch,
            vec![update("a1", ALLOC_CLIENT_STATUS_PENDING, 50)]
        );
        for pair in batches.windows(2) {
            assert!(
                pair[1].0 - pair[0].0 >= STATUS_TICK * TICKS_PER_ROUTINE_SEND as u32 - STATUS_TICK,
                "routine sends are about a second apart"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_status_change_goes_out_within_the_urgent_delay() {
        let conn = Arc::new(RecordingConn::default());
        let (buffer, shutdown, sender) = start(&conn);

        buffer.report(update("a1", ALLOC_CLIENT_STATUS_PENDING, 0));
        tokio::time::sleep(STATUS_TICK * 2).await;
        assert_eq!(conn.batches().len(), 1);

        // Land between routine sends, then change the ClientStatus.
        tokio::time::sleep(Duration::from_millis(50)).await;
        buffer.report(update("a1", ALLOC_CLIENT_STATUS_PENDING, 1));
        assert!(!buffer.has_urgent_update());
        buffer.report(update("a1", ALLOC_CLIENT_STATUS_RUNNING, 2));
        assert!(buffer.has_urgent_update());
        let reported_at = Instant::now();
        tokio::time::sleep(STATUS_TICK + Duration::from_millis(1)).await;

        let batches = conn.batches();
        assert_eq!(
            batches.len(),
            2,
            "the running status was sent without waiting"
        );
        let (sent_at, batch) = &batches[1];
        assert!(
            *sent_at - reported_at <= URGENT_DELAY,
            "sent {:?} after the report, not within the urgent delay",
            *sent_at - reported_at
        );
        assert_eq!(batch, &vec![update("a1", ALLOC_CLIENT_STATUS_RUNNING, 2)]);
        assert_eq!(buffer.pending_count(), 0);

        shutdown.cancel();
        let _ = sender.await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_decided_deployment_health_goes_out_within_the_urgent_delay() {
        let conn = Arc::new(RecordingConn::default());
        let (buffer, shutdown, sender) = start(&conn);
        let with_health = |healthy: Option<bool>| AllocClientUpdate {
            deployment_status: Some(drover_structs::AllocDeploymentStatus {
                healthy,
                ..drover_structs::AllocDeploymentStatus::default()
            }),
            ..update("a1", ALLOC_CLIENT_STATUS_RUNNING, 1)
        };

        buffer.report(update("a1", ALLOC_CLIENT_STATUS_RUNNING, 0));
        tokio::time::sleep(STATUS_TICK * 2).await;
        assert_eq!(conn.batches().len(), 1);
        buffer.report(with_health(None));
        assert!(!buffer.has_urgent_update(), "no health decided yet");
        buffer.report(with_health(Some(true)));
        assert!(buffer.has_urgent_update());
        tokio::time::sleep(URGENT_DELAY + Duration::from_millis(1)).await;
        assert_eq!(conn.batches().len(), 2);
        assert_eq!(conn.batches()[1].1, vec![with_health(Some(true))]);

        // The same health again is routine; a change is urgent again.
        buffer.report(with_health(Some(true)));
        assert!(!buffer.has_urgent_update());
        buffer.report(with_health(Some(false)));
        assert!(buffer.has_urgent_update());

        shutdown.cancel();
        let _ = sender.await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_of_status_changes_goes_out_in_one_send() {
        let conn = Arc::new(RecordingConn::default());
        let (buffer, shutdown, sender) = start(&conn);

        // Fifty allocations start within 10 ms: the first wakes the sender, the rest join it.
        for index in 0..50 {
            buffer.report(update(&format!("a{index}"), ALLOC_CLIENT_STATUS_RUNNING, 0));
            if index % 10 == 9 {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
        tokio::time::sleep(URGENT_DELAY * 2).await;
        let batches = conn.batches();
        assert_eq!(batches.len(), 1, "one send for the burst");
        assert_eq!(batches[0].1.len(), 50);
        assert_eq!(buffer.pending_count(), 0);

        // Once accepted, the same status again is routine: it waits for the routine tick.
        buffer.report(update("a0", ALLOC_CLIENT_STATUS_RUNNING, 1));
        tokio::time::sleep(URGENT_DELAY * 2).await;
        assert_eq!(conn.batches().len(), 1);

        shutdown.cancel();
        let _ = sender.await;
    }

    /// Regression: a node past `gc_max_allocs` collected terminal allocations before their
    /// final (complete) status had been sent, and the server never heard they finished.
    #[tokio::test(start_paused = true)]
    async fn a_collected_allocations_final_status_is_still_sent_then_forgotten() {
        let conn = Arc::new(RecordingConn::default());
        let (buffer, shutdown, sender) = start(&conn);

        buffer.report(update("a1", ALLOC_CLIENT_STATUS_RUNNING, 0));
        tokio::time::sleep(STATUS_TICK * 2).await;
        assert_eq!(conn.batches().len(), 1);

        buffer.report(update(
            "a1",
            drover_structs::ALLOC_CLIENT_STATUS_COMPLETE,
            1,
        ));
        buffer.forget("a1");
        tokio::time::sleep(STATUS_TICK * 2).await;
        let batches = conn.batches();
        assert_eq!(batches.len(), 2, "the final status went out");
        assert_eq!(
            batches[1].1,
            vec![update(
                "a1",
                drover_structs::ALLOC_CLIENT_STATUS_COMPLETE,
                1
            )]
        );
        assert_eq!(buffer.pending_count(), 0);
        assert!(
            buffer.lock().accepted_status.is_empty(),
            "nothing is kept for a collected allocation"
        );
        assert!(buffer.lock().forget_after_send.is_empty());

        shutdown.cancel();
        let _ = sender.await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_failing_send_is_retried_with_the_latest_state_and_nothing_lost() {
        let conn = Arc::new(RecordingConn::failing(2));
        let (buffer, shutdown, sender) = start(&conn);

        buffer.report(update("a1", ALLOC_CLIENT_STATUS_PENDING, 0));
        buffer.report(update("a2", ALLOC_CLIENT_STATUS_RUNNING, 0));
        // First tick: the send fails; the entries go back into the buffer.
        tokio::time::sleep(STATUS_TICK + Duration::from_millis(1)).await;
        assert!(conn.batches().is_empty());
        assert_eq!(buffer.pending_count(), 2, "failed entries are kept");

        // A newer report arrives during the backoff and must win over the failed one.
        buffer.report(update("a1", ALLOC_CLIENT_STATUS_RUNNING, 1));
        // Second attempt fails too, the third succeeds.
        tokio::time::sleep(FIRST_RETRY_BACKOFF * 4).await;

        let batches = conn.batches();
        assert_eq!(batches.len(), 1, "one successful send after the retries");
        let mut sent = batches[0].1.clone();
        sent.sort_by(|left, right| left.alloc_id.cmp(&right.alloc_id));
        assert_eq!(
            sent,
            vec![
                update("a1", ALLOC_CLIENT_STATUS_RUNNING, 1),
                update("a2", ALLOC_CLIENT_STATUS_RUNNING, 0)
            ]
        );
        assert_eq!(buffer.pending_count(), 0);

        shutdown.cancel();
        let _ = sender.await;
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_flushes_what_is_left() {
        let conn = Arc::new(RecordingConn::default());
        let (buffer, shutdown, sender) = start(&conn);
        buffer.report(update("a1", ALLOC_CLIENT_STATUS_PENDING, 0));
        tokio::time::sleep(STATUS_TICK * 2).await;
        buffer.report(update("a1", ALLOC_CLIENT_STATUS_PENDING, 1));
        shutdown.cancel();
        let _ = sender.await;
        let batches = conn.batches();
        assert_eq!(batches.len(), 2);
        assert_eq!(
            batches[1].1,
            vec![update("a1", ALLOC_CLIENT_STATUS_PENDING, 1)]
        );
    }

    #[test]
    fn reporting_does_not_wait_for_a_send_in_flight() {
        // The buffer lock is only ever held for map operations: a report while a batch is out
        // for sending lands in the buffer and survives the batch's failure.
        let buffer = StatusBuffer::new();
        buffer.report(update("a1", ALLOC_CLIENT_STATUS_PENDING, 0));
        let batch = buffer.take_if_due(false);
        assert!(batch.is_some());
        buffer.report(update("a1", ALLOC_CLIENT_STATUS_RUNNING, 1));
        if let Some(batch) = batch {
            buffer.restore(batch);
        }
        assert_eq!(
            buffer.pending_update("a1"),
            Some(update("a1", ALLOC_CLIENT_STATUS_RUNNING, 1))
        );
    }
}
