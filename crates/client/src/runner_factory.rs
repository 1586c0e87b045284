//! The real alloc runner behind the node's small runner interface: [`TaskAllocRunnerFactory`]
//! makes [`AllocRunner`]s (new, or restored from the client state db) and
//! [`AllocRunnerHandle`] is implemented for them, mapping their errors onto [`ClientError`].
//!
//! **Not here**: anything an alloc runner does (see `allocrunner`), or the node's loops (see
//! `node`). This is glue only.

use std::sync::Arc;

use drover_structs::{Allocation, is_terminal_client_status};

use crate::allocrunner::{AllocRunner, AllocRunnerDeps, AllocRunnerError, AllocStatusSink};
use crate::clock::SharedClock;
use crate::config::ClientConfig;
use crate::node::{AllocRunnerFactory, AllocRunnerHandle, ClientError, RunnerContext};
use crate::state_db::StateDb;
use crate::taskrunner::TaskRunnerDeps;
use crate::taskrunner::driver::DriverCatalog;

/// The restart reason a user's restart carries (Nomad's words).
pub const USER_RESTART_REASON: &str = "User requested restart";

/// Makes real alloc runners; holds what every runner of the node shares.
#[derive(Debug, Clone)]
pub struct TaskAllocRunnerFactory {
    pub config: Arc<ClientConfig>,
    pub clock: SharedClock,
    pub state_db: Arc<StateDb>,
    pub drivers: Arc<dyn DriverCatalog>,
    /// The agent's region (`NOMAD_REGION` when the job names none).
    pub region: String,
    /// Seed for restart jitter.
    pub jitter_seed: u64,
    /// Serves the agent's API inside each task.
    pub task_api: Option<Arc<dyn crate::taskrunner::hooks::api::TaskApiServer>>,
    /// Where the task runners count Nomad's task counters.
    pub task_counters: Option<Arc<dyn crate::task_metrics::TaskCounters>>,
}

impl TaskAllocRunnerFactory {
    fn deps(&self, context: &RunnerContext) -> AllocRunnerDeps {
        let sink: Arc<dyn AllocStatusSink> = context.status.clone();
        AllocRunnerDeps {
            task: TaskRunnerDeps {
                config: Arc::clone(&self.config),
                clock: Arc::clone(&self.clock),
                state_db: Arc::clone(&self.state_db),
                drivers: Arc::clone(&self.drivers),
                node: Arc::clone(&context.node),
                region: self.region.clone(),
                jitter_seed: self.jitter_seed,
                services: Arc::clone(&context.services),
                identities: Arc::clone(&context.identities),
                task_api: self.task_api.clone(),
                task_counters: self.task_counters.clone(),
            },
            sink,
            upstream: context.upstream.clone(),
        }
    }
}

fn client_error(alloc_id: &str, error: AllocRunnerError) -> ClientError {
    match error {
        AllocRunnerError::UnknownTask { alloc_id, task } => {
            ClientError::UnknownTask { alloc_id, task }
        }
        error if error.is_bad_request() => ClientError::InvalidRequest {
            alloc_id: alloc_id.to_string(),
            message: error.to_string(),
        },
        error => ClientError::Runner {
            alloc_id: alloc_id.to_string(),
            message: error.to_string(),
        },
    }
}

impl AllocRunnerFactory for TaskAllocRunnerFactory {
    type Runner = AllocRunner;

    async fn spawn(
        &self,
        alloc: Allocation,
        context: &RunnerContext,
    ) -> Result<AllocRunner, ClientError> {
        let deps = self.deps(context);
        let alloc_id = alloc.id.clone();
        // Creating a runner persists the alloc record and makes its dir: file I/O, kept off the
        // async workers.
        let created = tokio::task::spawn_blocking(move || AllocRunner::new(deps, alloc))
            .await
            .map_err(|join_error| ClientError::Runner {
                alloc_id: alloc_id.clone(),
                message: join_error.to_string(),
            })?;
        let runner = created.map_err(|error| client_error(&alloc_id, error))?;
        runner.run();
        Ok(runner)
    }

    async fn restore(&self, context: &RunnerContext) -> Result<Vec<AllocRunner>, ClientError> {
        let deps = self.deps(context);
        let alloc_root = deps.task.config.alloc_root_dir();
        let network_config = deps.task.config.network.clone();
        let restored = tokio::task::spawn_blocking(move || {
            let restored = AllocRunner::restore_all(deps)?;
            // Mounts of allocations that are gone (collected while no agent ran, or left by an
            // agent that crashed) have nobody to unmount them but us.
            let live: std::collections::HashSet<String> = restored
                .iter()
                .map(|runner| runner.alloc_id().to_string())
                .collect();
            // Their group networks too (namespace, address, port rules, veth): those the node's
            // register names, with their own conflists, then any left by their dirs.
            for alloc_id in crate::network::sweep_registered(&network_config, &alloc_root, &live) {
                tracing::info!(%alloc_id, "removed the group network of a gone allocation");
            }
            for alloc_id in std::fs::read_dir(&alloc_root)
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|entry| entry.file_name().into_string().ok())
                .filter(|alloc_id| !live.contains(alloc_id))
            {
                match crate::network::sweep_leftover(&network_config, &alloc_id) {
                    Ok(true) => {
                        tracing::info!(%alloc_id, "removed the group network of a gone allocation");
                    }
                    Ok(false) => {}
                    Err(error) => {
                        tracing::warn!(%alloc_id, error = %crate::error_text::error_chain(&error), "removing the group network of a gone allocation");
                    }
                }
            }
            let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
            let unmounted = crate::allocdir::unmount_leftovers(&alloc_root, &live, &mountinfo);
            if unmounted > 0 {
                tracing::info!(
                    unmounted,
                    "unmounted the leftovers of allocations that are gone"
                );
            }
            Ok::<_, crate::allocrunner::AllocRunnerError>(restored)
        })
        .await
        .map_err(|join_error| ClientError::Restore {
            message: join_error.to_string(),
        })?
        .map_err(|error| ClientError::Restore {
            message: error.to_string(),
        })?;
        for runner in &restored {
            runner.run();
        }
        Ok(restored)
    }
}

impl<S: crate::server_conn::ServerConn> crate::node::Client<S, TaskAllocRunnerFactory> {
    /// The context of a running task, for `alloc exec`: unknown allocations are not found,
    /// unknown or not running tasks are bad requests.
    pub fn exec_context(
        &self,
        alloc_id: &str,
        task: &str,
    ) -> Result<crate::taskrunner::TaskExecContext, ClientError> {
        self.runner(alloc_id)?
            .exec_context(task)
            .map_err(|error| client_error(alloc_id, error))
    }
}

impl<S: crate::server_conn::ServerConn> crate::node::Client<S, TaskAllocRunnerFactory> {
    /// The latest result of each service check of an allocation, by check ID.
    pub fn alloc_checks(
        &self,
        alloc_id: &str,
    ) -> Result<std::collections::BTreeMap<String, drover_structs::CheckQueryResult>, ClientError>
    {
        Ok(self.runner(alloc_id)?.checks())
    }
}

impl AllocRunnerHandle for AllocRunner {
    fn alloc(&self) -> Allocation {
        let mut alloc = Allocation::clone(&AllocRunner::alloc(self));
        let status = self.status();
        if !status.client_status.is_empty() {
            alloc.client_status = status.client_status;
            alloc.client_description = status.client_description;
        }
        alloc.task_states = self.task_states();
        alloc
    }

    fn alloc_modify_index(&self) -> u64 {
        AllocRunner::alloc(self).alloc_modify_index
    }

    fn is_client_terminal(&self) -> bool {
        is_terminal_client_status(&self.status().client_status)
    }

    async fn update(&self, alloc: Allocation) {
        if let Err(error) = AllocRunner::update(self, alloc).await {
            tracing::error!(alloc_id = self.alloc_id(), %error, "applying an allocation update failed");
        }
    }

    async fn restart(&self, task: Option<&str>, all_tasks: bool) -> Result<(), ClientError> {
        let result = match (task, all_tasks) {
            (Some(task), _) => self.restart_task(task, USER_RESTART_REASON).await,
            (None, true) => self.restart_all_tasks(USER_RESTART_REASON).await,
            (None, false) => self.restart_running_tasks(USER_RESTART_REASON).await,
        };
        result.map_err(|error| client_error(self.alloc_id(), error))
    }

    async fn signal(&self, task: Option<&str>, signal: &str) -> Result<(), ClientError> {
        AllocRunner::signal(self, task, signal)
            .await
            .map_err(|error| client_error(self.alloc_id(), error))
    }

    async fn stats(
        &self,
        task: Option<&str>,
    ) -> Result<std::collections::BTreeMap<String, drover_driver::TaskResourceUsage>, ClientError>
    {
        AllocRunner::stats(self, task)
            .await
            .map_err(|error| client_error(self.alloc_id(), error))
    }

    async fn shutdown(&self) {
        AllocRunner::shutdown(self).await;
    }

    async fn destroy(&self) {
        if let Err(error) = AllocRunner::destroy(self).await {
            tracing::error!(alloc_id = self.alloc_id(), %error, "destroying an allocation failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::TokioFollowingClock;
    use crate::node::{Client, ClientErrorKind, NodeConfig};
    use crate::node_sim::InMemoryServer;
    use crate::taskrunner::driver::StaticDriverCatalog;
    use crate::testing::{FakeDriver, alloc_with_tasks, fake_task, restart_policy};
    use drover_structs::{ALLOC_CLIENT_STATUS_COMPLETE, ALLOC_CLIENT_STATUS_RUNNING, TASK_STARTED};
    use serde_json::json;
    use std::path::Path;
    use std::time::Duration;

    type RealClient = Client<InMemoryServer, TaskAllocRunnerFactory>;

    const LIMIT: Duration = Duration::from_secs(120);

    async fn eventually(what: &str, condition: impl Fn() -> bool) {
        let deadline = tokio::time::Instant::now() + LIMIT;
        while !condition() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for: {what}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn clock() -> SharedClock {
        Arc::new(TokioFollowingClock::starting_at(1_700_000_000_000_000_000))
    }

    async fn start_client(
        data_dir: &Path,
        server: &Arc<InMemoryServer>,
        driver: &Arc<FakeDriver>,
    ) -> Arc<RealClient> {
        start_client_with(data_dir, server, driver, false).await
    }

    async fn start_client_with(
        data_dir: &Path,
        server: &Arc<InMemoryServer>,
        driver: &Arc<FakeDriver>,
        ephemeral: bool,
    ) -> Arc<RealClient> {
        let mut client_config = ClientConfig::new(data_dir);
        client_config.secrets_tmpfs = false;
        std::fs::create_dir_all(client_config.client_state_dir())
            .unwrap_or_else(|error| panic!("state dir: {error}"));
        let state_db = StateDb::open(&client_config.state_db_path())
            .unwrap_or_else(|error| panic!("state db: {error}"));
        let factory = TaskAllocRunnerFactory {
            config: Arc::new(client_config),
            clock: clock(),
            state_db: Arc::new(state_db),
            drivers: Arc::new(StaticDriverCatalog::new().with("fake", driver.clone())),
            region: "global".to_string(),
            jitter_seed: 7,
            task_api: None,
            task_counters: None,
        };
        let mut node_config = NodeConfig::new(data_dir, "node-1", clock());
        node_config.alloc_query_wait = Duration::from_secs(30);
        node_config.ephemeral = ephemeral;
        let client = Client::start(node_config, Arc::clone(server), factory)
            .await
            .unwrap_or_else(|error| panic!("client start: {error}"));
        client.wait_registered().await;
        client
    }

    fn server_status(server: &InMemoryServer, alloc_id: &str) -> String {
        server
            .alloc(alloc_id)
            .map(|alloc| alloc.client_status)
            .unwrap_or_default()
    }

    #[tokio::test(start_paused = true)]
    async fn real_runners_run_stop_and_restore_through_the_node() {
        let data_dir = tempfile::tempdir().unwrap_or_else(|error| panic!("tempdir: {error}"));
        let server = Arc::new(InMemoryServer::new(Duration::from_secs(10)));
        let driver = FakeDriver::new();

        let first = start_client(data_dir.path(), &server, &driver).await;
        let node_id = first.node_id();
        let mut alloc = alloc_with_tasks(
            "service",
            vec![fake_task("web", json!({}))],
            restart_policy(2, Duration::from_secs(1), Duration::from_secs(60), "fail"),
        );
        alloc.node_id = node_id.clone();
        let alloc_id = alloc.id.clone();
        server.place_alloc(alloc);
        eventually("running on the server's books", || {
            server_status(&server, &alloc_id) == ALLOC_CLIENT_STATUS_RUNNING
        })
        .await;
        assert_eq!(driver.live_pids().len(), 1);

        // Typed errors from the real runner.
        let bad_signal = first.signal(&alloc_id, None, "SIGNOPE").await;
        assert!(
            matches!(bad_signal, Err(ref error) if error.kind() == ClientErrorKind::BadRequest)
        );
        let bad_task = first.restart(&alloc_id, Some("nosuch"), false).await;
        assert!(matches!(bad_task, Err(ClientError::UnknownTask { .. })));

        // Agent restart: the task keeps running and is re-attached, never started twice.
        first.shutdown().await;
        assert_eq!(
            driver.live_pids().len(),
            1,
            "shutdown leaves the task running"
        );
        // The old agent is gone for good (its state db lock with it).
        drop(first);
        tokio::time::sleep(Duration::from_millis(100)).await;
        let second = start_client(data_dir.path(), &server, &driver).await;
        assert_eq!(second.node_id(), node_id);
        assert_eq!(second.alloc_ids(), vec![alloc_id.clone()]);
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(
            driver.log().starts.len(),
            1,
            "restore does not start the task again"
        );
        let started_events = second
            .alloc(&alloc_id)
            .unwrap_or_default()
            .task_states
            .get("web")
            .map(|state| {
                state
                    .events
                    .iter()
                    .filter(|event| event.r#type == TASK_STARTED)
                    .count()
            })
            .unwrap_or_default();
        assert_eq!(started_events, 1);

        // The server stops it: the task is killed and the alloc completes.
        server.stop_alloc(&alloc_id);
        eventually("complete on the server's books", || {
            server_status(&server, &alloc_id) == ALLOC_CLIENT_STATUS_COMPLETE
        })
        .await;
        assert!(driver.live_pids().is_empty());

        // The server forgets it: the alloc dir goes.
        let alloc_dir = data_dir.path().join("alloc").join(&alloc_id);
        assert!(alloc_dir.exists());
        server.remove_alloc(&alloc_id);
        eventually("the alloc dir is removed", || !alloc_dir.exists()).await;
        eventually("the runner is gone", || second.alloc_ids().is_empty()).await;
        second.shutdown().await;
    }

    #[tokio::test(start_paused = true)]
    async fn dev_mode_shutdown_stops_every_task_and_removes_the_alloc_dirs() {
        let data_dir = tempfile::tempdir().unwrap_or_else(|error| panic!("tempdir: {error}"));
        let server = Arc::new(InMemoryServer::new(Duration::from_secs(10)));
        let driver = FakeDriver::new();
        let client = start_client_with(data_dir.path(), &server, &driver, true).await;
        let mut alloc_ids = Vec::new();
        for _ in 0..3 {
            let mut alloc = alloc_with_tasks(
                "service",
                vec![fake_task("web", json!({})), fake_task("cache", json!({}))],
                restart_policy(2, Duration::from_secs(1), Duration::from_secs(60), "fail"),
            );
            alloc.node_id = client.node_id();
            alloc_ids.push(alloc.id.clone());
            server.place_alloc(alloc);
        }
        eventually("all running", || {
            alloc_ids
                .iter()
                .all(|id| server_status(&server, id) == ALLOC_CLIENT_STATUS_RUNNING)
        })
        .await;
        assert_eq!(driver.live_pids().len(), 6);

        client.shutdown_and_stop_all().await;
        assert!(driver.live_pids().is_empty(), "every task was killed");
        for alloc_id in &alloc_ids {
            assert!(!data_dir.path().join("alloc").join(alloc_id).exists());
            assert_eq!(
                server_status(&server, alloc_id),
                ALLOC_CLIENT_STATUS_COMPLETE,
                "the kills reached the server before shutdown returned"
            );
        }
    }
}
