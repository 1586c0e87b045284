//! Node heartbeat timers.
//!
//! Every registered node gets a deadline of TTL + grace; each heartbeat pushes it out. A node
//! whose deadline passes is reported on a channel, and the server marks it down (its
//! allocations are then lost and replaced by the scheduler) or, while one of its allocations
//! waits out its group's `lost_after`, disconnected. The TTL grows with the number of nodes so
//! the fleet as a whole heartbeats at most `max_heartbeats_per_second`, as Nomad does.
//!
//! Timers run on tokio time, so tests drive them with paused time.
//!
//! Not here: what "down" means for allocations (the server and the scheduler decide).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Heartbeat settings, with Nomad's defaults.
#[derive(Debug, Clone)]
pub struct HeartbeatConfig {
    pub min_ttl: Duration,
    pub grace: Duration,
    pub max_heartbeats_per_second: f64,
    /// The deadline every known node gets from a server that has just taken over the
    /// leadership (Nomad's `FailoverHeartbeatTTL`): its clients need time to find it.
    pub failover_ttl: Duration,
}

impl Default for HeartbeatConfig {
    fn default() -> Self {
        Self {
            min_ttl: Duration::from_secs(10),
            grace: Duration::from_secs(10),
            max_heartbeats_per_second: 50.0,
            failover_ttl: Duration::from_secs(300),
        }
    }
}

/// Tracks one deadline per node and reports nodes that miss it.
pub struct HeartbeatTimers {
    config: HeartbeatConfig,
    timers: Mutex<HashMap<String, JoinHandle<()>>>,
    expired: mpsc::UnboundedSender<String>,
}

impl HeartbeatTimers {
    /// Creates the timers and the receiving end on which expired node IDs arrive.
    pub fn new(config: HeartbeatConfig) -> (Self, mpsc::UnboundedReceiver<String>) {
        let (expired, receiver) = mpsc::unbounded_channel();
        let timers = Self {
            config,
            timers: Mutex::new(HashMap::new()),
            expired,
        };
        (timers, receiver)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, JoinHandle<()>>> {
        // The map only holds join handles; a panic elsewhere cannot leave it inconsistent.
        self.timers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The TTL handed to a node: at least `min_ttl`, longer when many nodes share the rate.
    pub fn ttl(&self) -> Duration {
        let nodes = self.lock().len().max(1) as f64;
        let spread = Duration::from_secs_f64(nodes / self.config.max_heartbeats_per_second);
        spread.max(self.config.min_ttl)
    }

    /// Starts or pushes out a node's deadline. Returns the TTL the node should heartbeat within.
    /// Must be called from within a tokio runtime.
    pub fn reset(&self, node_id: &str) -> Duration {
        let ttl = self.ttl();
        self.reset_deadline(node_id, ttl + self.config.grace);
        ttl
    }

    /// Gives a node the failover deadline (a server that has just become the leader).
    pub fn reset_after_failover(&self, node_id: &str) {
        self.reset_deadline(node_id, self.config.failover_ttl);
    }

    /// Forgets every node (leadership lost: the next leader times them).
    pub fn clear_all(&self) {
        for (_, timer) in self.lock().drain() {
            timer.abort();
        }
    }

    fn reset_deadline(&self, node_id: &str, deadline: Duration) {
        let expired = self.expired.clone();
        let id = node_id.to_owned();
        let timer = tokio::spawn(async move {
            tokio::time::sleep(deadline).await;
            // The receiver lives as long as the server; after shutdown nobody needs to know.
            let _ = expired.send(id);
        });
        if let Some(previous) = self.lock().insert(node_id.to_owned(), timer) {
            previous.abort();
        }
    }

    /// Forgets a node (deregistered, or already marked down).
    pub fn clear(&self, node_id: &str) {
        if let Some(timer) = self.lock().remove(node_id) {
            timer.abort();
        }
    }

    /// Number of nodes being timed.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Drop for HeartbeatTimers {
    fn drop(&mut self) {
        for (_, timer) in self.lock().drain() {
            timer.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_node_that_stops_heartbeating_expires_after_ttl_and_grace() {
        let (timers, mut expired) = HeartbeatTimers::new(HeartbeatConfig::default());
        let ttl = timers.reset("node-1");
        assert_eq!(ttl, Duration::from_secs(10));

        // Heartbeats within the deadline keep the node alive.
        for _ in 0..3 {
            tokio::time::sleep(Duration::from_secs(15)).await;
            timers.reset("node-1");
        }
        assert!(expired.try_recv().is_err());

        tokio::time::sleep(Duration::from_secs(19)).await;
        assert!(expired.try_recv().is_err(), "not yet past ttl + grace");
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(expired.recv().await.as_deref(), Some("node-1"));
    }

    #[tokio::test(start_paused = true)]
    async fn cleared_nodes_never_expire() {
        let (timers, mut expired) = HeartbeatTimers::new(HeartbeatConfig::default());
        timers.reset("node-1");
        timers.clear("node-1");
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(expired.try_recv().is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn ttl_grows_with_the_fleet() {
        let (timers, _expired) = HeartbeatTimers::new(HeartbeatConfig::default());
        for n in 0..1000 {
            timers.reset(&format!("node-{n}"));
        }
        assert_eq!(timers.ttl(), Duration::from_secs(20));
    }
}
