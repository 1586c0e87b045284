//! The allocation watcher: blocking queries on the node's allocations, the diff against the
//! runners, and starting, updating or forgetting runners to match.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use drover_structs::{ALLOC_CLIENT_STATUS_COMPLETE, Allocation, TASK_STATE_DEAD, TaskState};
use tokio::task::JoinSet;

use super::client::{Client, lock};
use super::runner::{AllocRunnerFactory, AllocRunnerHandle};
use crate::server_conn::{AllocClientUpdate, NodeAllocations, ServerConn, ServerConnError};

/// How many runners the watcher starts or updates at the same time. Each start waits mostly on
/// a group commit of the client state db, which all of them share, so more at once means
/// bigger groups, not more fsyncs.
const MAX_CONCURRENT_RUNNER_CHANGES: usize = 128;

impl<S: ServerConn, F: AllocRunnerFactory> Client<S, F> {
    /// The allocation watcher: blocking queries on the node's allocations, then the diff.
    pub(super) async fn watch_allocations(self: Arc<Self>) {
        self.wait_registered().await;
        let node_id = self.node_id.clone();
        let mut min_index: u64 = 0;
        let mut failures: u32 = 0;
        loop {
            if self.loops_shutdown.is_cancelled() {
                return;
            }
            let answer = tokio::select! {
                _ = self.loops_shutdown.cancelled() => return,
                answer = self.conn.node_allocs(&node_id, min_index, self.config.alloc_query_wait) => answer,
            };
            let listed = match answer {
                Ok(listed) => listed,
                Err(error) => {
                    let delay = self.config.retry.delay(failures);
                    failures = failures.saturating_add(1);
                    tracing::warn!(%error, retry_in = ?delay, "querying the node's allocations failed");
                    if self.sleep_or_shutdown(delay).await {
                        return;
                    }
                    continue;
                }
            };
            if listed.index <= min_index && min_index > 0 {
                // The wait ran out with nothing new.
                continue;
            }
            match self.apply_listing(&listed).await {
                Ok(()) => {
                    failures = 0;
                    // Never 0 again: a query at index 0 answers at once, which would spin.
                    min_index = listed.index.max(1);
                }
                Err(error) => {
                    let delay = self.config.retry.delay(failures);
                    failures = failures.saturating_add(1);
                    tracing::warn!(%error, retry_in = ?delay, "fetching changed allocations failed");
                    if self.sleep_or_shutdown(delay).await {
                        return;
                    }
                }
            }
        }
    }

    /// Sleeps, or answers true at once if the client shuts down meanwhile.
    async fn sleep_or_shutdown(&self, delay: Duration) -> bool {
        tokio::select! {
            _ = self.loops_shutdown.cancelled() => true,
            _ = tokio::time::sleep(delay) => false,
        }
    }

    /// Brings the runners in line with one answer of the blocking query.
    async fn apply_listing(
        self: &Arc<Self>,
        listed: &NodeAllocations,
    ) -> Result<(), ServerConnError> {
        let mut to_pull = Vec::new();
        {
            let runners = self.read_runners();
            let runnerless = lock(&self.runnerless_allocs);
            for (alloc_id, server_index) in &listed.alloc_modify_indexes {
                let known_index = runners
                    .get(alloc_id)
                    .map(|runner| runner.alloc_modify_index())
                    .or_else(|| runnerless.get(alloc_id).copied());
                if known_index.is_none_or(|known| *server_index > known) {
                    to_pull.push(alloc_id.clone());
                }
            }
        }

        let pulled = if to_pull.is_empty() {
            Vec::new()
        } else {
            let wanted = to_pull.len();
            let pulled = self.conn.get_allocs(to_pull).await?;
            if pulled.len() < wanted {
                // Listed a moment ago but gone now: the next query will tell the truth.
                return Err(ServerConnError::Internal {
                    message: format!(
                        "asked for {wanted} allocations, the server returned {}",
                        pulled.len()
                    ),
                });
            }
            pulled
        };

        self.remove_unlisted(&listed.alloc_modify_indexes);
        // Each allocation appears once per listing, so they are independent: start and update
        // them side by side (a runner's start persists state first, which takes a while).
        let mut applying = JoinSet::new();
        for alloc in pulled {
            if applying.len() >= MAX_CONCURRENT_RUNNER_CHANGES {
                applying.join_next().await;
            }
            let client = Arc::clone(self);
            applying.spawn(async move { client.apply_pulled(alloc).await });
        }
        while applying.join_next().await.is_some() {}
        self.collect_excess_terminal_allocs();
        Ok(())
    }

    /// Destroys the runners of allocations the server no longer lists (it garbage collected
    /// them) and forgets the runner-less ones.
    ///
    /// A client never kills tasks because a server does not know them: a live runner is
    /// destroyed only when the server listed its allocation since the node last registered
    /// and now does not. An allocation a freshly (re-)registered server has never listed — it
    /// lost the node, or is not the server that placed it — keeps running, and the client says
    /// so. A runner whose tasks have all finished goes either way.
    fn remove_unlisted(&self, listed: &BTreeMap<String, u64>) {
        lock(&self.runnerless_allocs).retain(|alloc_id, _| listed.contains_key(alloc_id));
        let registration = self.registrations.load(std::sync::atomic::Ordering::SeqCst);
        let previously_listed = {
            let mut last = lock(&self.last_listing);
            let previous = if last.0 == registration {
                std::mem::take(&mut last.1)
            } else {
                std::collections::HashSet::new()
            };
            *last = (registration, listed.keys().cloned().collect());
            previous
        };
        let mut unknown_to_server = Vec::new();
        let removed: Vec<(String, Arc<F::Runner>)> = {
            let mut runners = self.write_runners();
            let gone: Vec<String> = runners
                .iter()
                .filter(|(alloc_id, _)| !listed.contains_key(*alloc_id))
                .filter_map(|(alloc_id, runner)| {
                    if previously_listed.contains(alloc_id) || runner.is_client_terminal() {
                        Some(alloc_id.clone())
                    } else {
                        unknown_to_server.push(alloc_id.clone());
                        None
                    }
                })
                .collect();
            gone.into_iter()
                .filter_map(|alloc_id| runners.remove(&alloc_id).map(|runner| (alloc_id, runner)))
                .collect()
        };
        for alloc_id in unknown_to_server {
            tracing::warn!(
                alloc_id,
                node_id = %self.node_id,
                "the server does not know this running allocation (it has not listed it since \
                 the node registered); keeping its tasks running"
            );
        }
        for (alloc_id, runner) in removed {
            tracing::info!(
                alloc_id,
                "allocation removed by the server; destroying its runner"
            );
            self.destroy_in_background(alloc_id, runner);
        }
    }

    async fn apply_pulled(&self, alloc: Allocation) {
        let existing = self.read_runners().get(&alloc.id).cloned();
        if let Some(runner) = existing {
            runner.update(alloc).await;
            return;
        }
        if alloc.terminal_status() {
            if alloc.server_terminal_status() && !alloc.client_terminal_status() {
                // Stopped before it ever ran here: nothing to kill, but the server must hear
                // that it is finished.
                self.status.report(never_ran_update(&alloc));
            }
            lock(&self.runnerless_allocs).insert(alloc.id.clone(), alloc.alloc_modify_index);
            return;
        }
        let alloc_id = alloc.id.clone();
        let alloc_modify_index = alloc.alloc_modify_index;
        let context = self.runner_context();
        match self.factory.spawn(alloc, &context).await {
            Ok(runner) => {
                tracing::debug!(alloc_id, "started alloc runner");
                self.write_runners().insert(alloc_id, Arc::new(runner));
                self.contact_changed.notify_one();
            }
            Err(error) => {
                // Remembered at this index so it is not retried in a loop; a newer version
                // from the server gets another try.
                tracing::error!(alloc_id, %error, "could not start an alloc runner");
                lock(&self.runnerless_allocs).insert(alloc_id, alloc_modify_index);
            }
        }
    }
}

/// The status of an allocation stopped by the server before this node ran any of it: every
/// task dead, not failed, the allocation complete.
fn never_ran_update(alloc: &Allocation) -> AllocClientUpdate {
    let task_names: Vec<String> = alloc
        .job
        .as_deref()
        .and_then(|job| job.lookup_task_group(&alloc.task_group))
        .map(|group| group.tasks.iter().map(|task| task.name.clone()).collect())
        .unwrap_or_default();
    let task_states = task_names
        .into_iter()
        .map(|name| {
            (
                name,
                TaskState {
                    state: TASK_STATE_DEAD.to_string(),
                    ..TaskState::default()
                },
            )
        })
        .collect();
    AllocClientUpdate {
        alloc_id: alloc.id.clone(),
        client_status: ALLOC_CLIENT_STATUS_COMPLETE.to_string(),
        client_description: "Stopped before it started on the node".to_string(),
        task_states,
        ..AllocClientUpdate::default()
    }
}
