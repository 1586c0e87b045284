//! Registration and heartbeats: register with backoff, then beat at half the TTL, and register
//! again when the servers forgot the node or the node record changed.

use std::sync::Arc;
use std::time::Duration;

use drover_structs::{NODE_STATUS_READY, Node};

use super::client::{Client, lock};
use super::runner::AllocRunnerFactory;
use crate::server_conn::{ServerConn, ServerConnError};

impl<S: ServerConn, F: AllocRunnerFactory> Client<S, F> {
    /// Registers (retrying with backoff), then heartbeats at half the TTL the server gives, so
    /// one lost beat never marks the node down. A server that forgot the node gets it
    /// registered again.
    pub(super) async fn register_and_heartbeat(self: Arc<Self>) {
        let mut failures: u32 = 0;
        let mut must_register = true;
        let mut next_beat = Duration::ZERO;
        loop {
            tokio::select! {
                _ = self.loops_shutdown.cancelled() => return,
                _ = tokio::time::sleep(next_beat) => {}
                // The node record changed: the servers get the new one now.
                _ = self.node_changed.notified() => must_register = true,
            }
            let result = if must_register {
                self.conn
                    .register_node(Node::clone(&self.runner_context().node))
                    .await
            } else {
                self.conn.heartbeat(&self.node_id, NODE_STATUS_READY).await
            };
            match result {
                Ok(ttl) => {
                    if must_register {
                        tracing::info!(node_id = %self.node_id, "node registered");
                        self.registrations
                            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    }
                    must_register = false;
                    failures = 0;
                    {
                        let mut heartbeat = lock(&self.heartbeat);
                        heartbeat.registered = true;
                        heartbeat.ttl = ttl;
                        heartbeat.last_heartbeat = Some(tokio::time::Instant::now());
                    }
                    self.registered.send_replace(true);
                    self.contact_changed.notify_one();
                    next_beat = (ttl / 2).max(Duration::from_millis(10));
                }
                Err(ServerConnError::UnknownNode { .. }) => {
                    tracing::warn!(node_id = %self.node_id, "servers do not know this node; registering again");
                    must_register = true;
                    next_beat = if failures == 0 {
                        Duration::ZERO
                    } else {
                        self.config.retry.delay(failures)
                    };
                    failures = failures.saturating_add(1);
                }
                Err(error) => {
                    next_beat = self.config.retry.delay(failures);
                    failures = failures.saturating_add(1);
                    tracing::warn!(%error, retry_in = ?next_beat, registering = must_register, "heartbeat failed");
                }
            }
        }
    }
}
