//! Garbage collection of terminal allocations, by Nomad's client rules: on request, past
//! `gc_max_allocs`, every `gc_interval` while the allocation directory's filesystem is past
//! `gc_disk_usage_threshold` or `gc_inode_usage_threshold` (oldest terminal allocation first,
//! until it is below or none is left), and the background destroys of runners the server
//! dropped; at most `gc_parallel_destroys` destroys run at once.
//!
//! Not here: the server's GC of its records (`drover_server::gc`).

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
        self.destroy_now(alloc_id, &runner).await;
        Ok(())
    }

    /// Destroys a runner already out of the map once a destroy slot is free.
    async fn destroy_now(&self, alloc_id: &str, runner: &F::Runner) {
        // The semaphore is never closed, so acquiring only waits.
        let _slot = Arc::clone(&self.destroy_slots).acquire_owned().await.ok();
        runner.destroy().await;
        self.status.forget(alloc_id);
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
        let slots = Arc::clone(&self.destroy_slots);
        let handle = tokio::spawn(async move {
            let _slot = slots.acquire_owned().await.ok();
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

    /// Takes the oldest terminal allocation out of the map (remembered as runnerless, as a
    /// requested GC does).
    fn take_oldest_terminal(&self) -> Option<(String, Arc<F::Runner>)> {
        let mut runners = self.write_runners();
        let (alloc_modify_index, alloc_id) = runners
            .iter()
            .filter(|(_, runner)| runner.is_client_terminal())
            .map(|(alloc_id, runner)| (runner.alloc_modify_index(), alloc_id.clone()))
            .min()?;
        lock(&self.runnerless_allocs).insert(alloc_id.clone(), alloc_modify_index);
        runners.remove(&alloc_id).map(|runner| (alloc_id, runner))
    }

    /// Nomad's `keepUsageBelowThreshold`: while the allocation directory's filesystem is
    /// past a threshold (or the node holds more than `gc_max_allocs` allocations), collects
    /// the oldest terminal allocation. Answers how many were collected.
    pub async fn keep_usage_below_threshold(&self) -> usize {
        let mut collected = 0;
        loop {
            if self.loops_shutdown.is_cancelled() {
                return collected;
            }
            let mut path = self.config.alloc_dir();
            if !path.exists() {
                path.clone_from(&self.config.data_dir);
            }
            let usage = crate::host_stats::disk_stats(&path);
            let live = self.read_runners().len();
            let reason = match usage {
                Some(disk) if disk.used_percent > self.config.gc_disk_usage_threshold => format!(
                    "disk usage of {:.0} is over gc threshold of {:.0}",
                    disk.used_percent, self.config.gc_disk_usage_threshold
                ),
                Some(disk) if disk.inodes_used_percent > self.config.gc_inode_usage_threshold => {
                    format!(
                        "inode usage of {:.0} is over gc threshold of {:.0}",
                        disk.inodes_used_percent, self.config.gc_inode_usage_threshold
                    )
                }
                _ if live > self.config.gc_max_allocs => format!(
                    "number of allocations ({live}) is over the limit ({})",
                    self.config.gc_max_allocs
                ),
                _ => return collected,
            };
            let Some((alloc_id, runner)) = self.take_oldest_terminal() else {
                tracing::debug!(
                    reason,
                    "garbage collection skipped because no terminal allocations"
                );
                return collected;
            };
            tracing::info!(alloc_id, reason, "garbage collecting allocation");
            self.destroy_now(&alloc_id, &runner).await;
            collected += 1;
        }
    }

    /// Checks usage every `gc_interval` (the first check one interval after the start, as
    /// Nomad's ticker) until the client's loops stop.
    pub(super) async fn collect_by_usage(self: Arc<Self>) {
        let period = self
            .config
            .gc_interval
            .max(std::time::Duration::from_millis(1));
        let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = self.loops_shutdown.cancelled() => return,
                _ = ticker.tick() => {}
            }
            self.keep_usage_below_threshold().await;
        }
    }
}
