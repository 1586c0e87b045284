//! Stopping allocations when the servers are out of reach (Nomad's client `heartbeatStop`): an
//! allocation whose group says `disconnect { stop_on_client_after }` (or the older
//! `stop_after_client_disconnect`) is destroyed once the node has gone that long without an
//! answered registration or heartbeat. Its final status (complete) reaches the servers when
//! they answer again; meanwhile they have marked it lost and replace it once they know it is
//! stopped.
//!
//! The clock is tokio's: the last answered heartbeat is a `tokio::time::Instant`, and the wait
//! for the next deadline is a tokio sleep, so tests run this on paused time. The watch wakes
//! on each answered heartbeat and each new runner, and otherwise sleeps until the earliest
//! deadline.
//!
//! Not here: the heartbeats themselves (`heartbeat`), what the servers do with a node that
//! stopped heartbeating.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::client::{Client, lock};
use super::runner::{AllocRunnerFactory, AllocRunnerHandle};
use crate::server_conn::ServerConn;

impl<S: ServerConn, F: AllocRunnerFactory> Client<S, F> {
    /// Watches for allocations to stop while no server answers; runs until the client's loops
    /// stop. Contact counts from the start, so a node that never reaches a server stops them
    /// too, as Nomad's does.
    pub(super) async fn stop_allocs_without_servers(self: Arc<Self>) {
        let started = Instant::now();
        // Each runner's delay, read once from its allocation (`None`: the group has none).
        let mut delays: HashMap<String, Option<Duration>> = HashMap::new();
        let mut stopped: HashSet<String> = HashSet::new();
        loop {
            let last_contact = self.heartbeat_status().last_heartbeat.unwrap_or(started);
            let now = Instant::now();
            let mut next_deadline: Option<Instant> = None;
            let mut due = Vec::new();
            {
                let runners = self.read_runners();
                delays.retain(|alloc_id, _| runners.contains_key(alloc_id));
                stopped.retain(|alloc_id| runners.contains_key(alloc_id));
                for (alloc_id, runner) in runners.iter() {
                    if stopped.contains(alloc_id) {
                        continue;
                    }
                    let delay = *delays.entry(alloc_id.clone()).or_insert_with(|| {
                        runner
                            .alloc()
                            .disconnect_stop_after()
                            .map(|delay| delay.to_std())
                    });
                    let Some(delay) = delay else {
                        continue;
                    };
                    if runner.is_client_terminal() {
                        continue;
                    }
                    let deadline = last_contact + delay;
                    if deadline <= now {
                        due.push((alloc_id.clone(), Arc::clone(runner)));
                    } else {
                        next_deadline = Some(next_deadline.map_or(deadline, |at| at.min(deadline)));
                    }
                }
            }
            for (alloc_id, runner) in due {
                tracing::warn!(
                    alloc_id,
                    node_id = %self.node_id,
                    since_last_contact = ?now.saturating_duration_since(last_contact),
                    "no server answered for the group's stop_on_client_after; stopping the allocation"
                );
                stopped.insert(alloc_id);
                // The runner stays in the map, so its final status goes out once a server
                // answers; the kill runs in the background, as a garbage collection's does.
                let handle = tokio::spawn(async move { runner.destroy().await });
                let mut destroying = lock(&self.destroying);
                destroying.retain(|handle| !handle.is_finished());
                destroying.push(handle);
            }
            let sleep = async {
                match next_deadline {
                    Some(deadline) => tokio::time::sleep_until(deadline).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = self.loops_shutdown.cancelled() => return,
                () = self.contact_changed.notified() => {}
                () = sleep => {}
            }
        }
    }
}
