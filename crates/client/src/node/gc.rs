//! Garbage collection of terminal allocations: on request, past `gc_max_allocs`, and the
//! background destroys of runners the server dropped.

use std::sync::Arc;

use tokio::task::JoinHandle;

use super::client::{Client, lock};
use super::error::ClientError;
use super::runner::{AllocRunnerFactory, AllocRunnerHandle};
use crate::server_conn::ServerConn;

impl<S: ServerConn, F: AllocRunnerFactory> Client<S, F> {
    /// Garbage collects a terminal allocation: its runner is destroyed (alloc dir and state
    /// removed) and forgotten. A live allocation is refused.
    pub async fn gc(&self, alloc_id: &str) -> Result<(), ClientError> {
        let runner = self.runner(alloc_id)?;
        if !runner.is_client_terminal() {
            return Err(ClientError::NotTerminal {
                alloc_id: alloc_id.to_string(),
            });
        }
        let alloc_modify_index = runner.alloc_modify_index();
        // Remembered so the watcher does not fetch it again while the server still lists it.
        lock(&self.runnerless_allocs).insert(alloc_id.to_string(), alloc_modify_index);
        self.write_runners().remove(alloc_id);
        runner.destroy().await;
        self.status.forget(alloc_id);
        Ok(())
    }

    /// Garbage collects every terminal allocation; answers how many were collected.
    pub async fn gc_all(&self) -> usize {
        let terminal: Vec<String> = self
            .read_runners()
            .iter()
            .filter(|(_, runner)| runner.is_client_terminal())
            .map(|(id, _)| id.clone())
            .collect();
        let mut collected = 0;
        for alloc_id in terminal {
            if self.gc(&alloc_id).await.is_ok() {
                collected += 1;
            }
        }
        collected
    }

    /// Destroys a runner that is already out of the map, without holding up the watcher (a
    /// kill may wait out a long `kill_timeout`).
    pub(super) fn destroy_in_background(&self, alloc_id: String, runner: Arc<F::Runner>) {
        let status = Arc::clone(&self.status);
        let handle = tokio::spawn(async move {
            runner.destroy().await;
            status.forget(&alloc_id);
        });
        let mut destroying = lock(&self.destroying);
        destroying.retain(|handle| !handle.is_finished());
        destroying.push(handle);
    }

    pub(super) async fn wait_for_background_destroys(&self) {
        let handles: Vec<JoinHandle<()>> = lock(&self.destroying).drain(..).collect();
        for handle in handles {
            let _ = handle.await;
        }
    }

    /// Nomad's `gc_max_allocs`: past that many allocations, the oldest terminal ones are
    /// collected.
    pub(super) fn collect_excess_terminal_allocs(&self) {
        let max_allocs = self.config.gc_max_allocs;
        let excess: Vec<(String, Arc<F::Runner>)> = {
            let mut runners = self.write_runners();
            if runners.len() <= max_allocs {
                return;
            }
            let mut terminal: Vec<(u64, String)> = runners
                .iter()
                .filter(|(_, runner)| runner.is_client_terminal())
                .map(|(alloc_id, runner)| (runner.alloc_modify_index(), alloc_id.clone()))
                .collect();
            terminal.sort();
            terminal.truncate(runners.len() - max_allocs);
            let mut runnerless = lock(&self.runnerless_allocs);
            terminal
                .into_iter()
                .filter_map(|(alloc_modify_index, alloc_id)| {
                    runnerless.insert(alloc_id.clone(), alloc_modify_index);
                    runners.remove(&alloc_id).map(|runner| (alloc_id, runner))
                })
                .collect()
        };
        for (alloc_id, runner) in excess {
            tracing::info!(
                alloc_id,
                max_allocs,
                "garbage collecting a terminal allocation"
            );
            self.destroy_in_background(alloc_id, runner);
        }
    }
}
