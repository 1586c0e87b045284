//! The `docker` task driver: runs each task as a container of a Docker Engine reached over its
//! unix socket (bollard), and implements `drover-driver`'s [`Driver`] trait as `raw_exec` and
//! `exec` do.
//!
//! A task's container is named `<task>-<alloc_id>` and labelled with its allocation and task
//! (Nomad's labels); the persisted handle names the container ID, so a restarted agent
//! re-attaches to the same container. The container's stdout and stderr are followed through
//! the engine's log API into the allocation's own rotated log files (`alloc logs` works as for
//! every driver); the follower records how far it got, so after an agent restart it resumes
//! without repeating or dropping lines. Exit codes, OOM kills, stats and signals come from the
//! engine.
//!
//! The engine is contacted only by docker tasks and the fingerprint, never on the start path
//! of other drivers. Kept in its own crate so that bollard stays out of the shim and the
//! driver crate.
//!
//! Not for: the task config schema (see [`task`]) or the client's plugin config (see
//! [`config`]); restart policy and events belong to the client.

pub mod config;
mod error;
mod logs;
pub mod task;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bollard::Docker;
use bollard::auth::DockerCredentials;
use bollard::errors::Error as EngineError;
use bollard::query_parameters::{
    CreateContainerOptions, CreateImageOptions, KillContainerOptions, RemoveContainerOptions,
    StatsOptions,
};
use drover_driver::{
    CpuUsage, Driver, DriverError, DriverEvent, DriverEvents, DriverFuture, ExitStatus,
    MemoryUsage, TaskHandle, TaskLaunch, TaskResourceUsage, parse_signal,
};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

pub use config::DockerConfig;
pub use error::DockerError;

/// Version of the handle's `driver_state` record.
const STATE_VERSION: u32 = 1;

/// How long the fingerprint waits for the engine.
const FINGERPRINT_TIMEOUT: Duration = Duration::from_secs(3);

/// How long a finished container's log follower may take to drain what is left.
const LOG_DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// The engine API version drover speaks at most; the engine's own, if older, is negotiated.
const API_VERSION: bollard::ClientVersion = bollard::ClientVersion {
    major_version: 1,
    minor_version: 41,
};

/// What the driver persists in the task handle's `driver_state`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct ContainerState {
    version: u32,
    container_id: String,
    container_name: String,
    state_dir: PathBuf,
    logs: drover_driver::LogSettings,
    task_name: String,
    /// The container's main process as the host sees it (`alloc exec` enters its namespaces).
    pid: i32,
}

/// What the driver writes into the run's state dir before it creates the container, so a run
/// whose handle was never recorded can still be found and removed.
const SPEC_FILE: &str = "spec.json";

/// The engine's answer to a fingerprint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fingerprint {
    pub detected: bool,
    pub healthy: bool,
    pub description: String,
    pub attributes: BTreeMap<String, String>,
}

/// The `docker` driver.
pub struct DockerDriver {
    config: DockerConfig,
    engine: tokio::sync::OnceCell<Docker>,
    /// Log followers by container ID: a receiver that turns true when the follower is done.
    followers: Mutex<HashMap<String, watch::Receiver<bool>>>,
    /// The node the driver runs for (a label of its containers).
    node_id: std::sync::OnceLock<String>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

fn status_code(error: &EngineError) -> Option<u16> {
    match error {
        EngineError::DockerResponseServerError { status_code, .. } => Some(*status_code),
        _ => None,
    }
}

fn engine_error(
    task_id: &str,
    request: &'static str,
    error: impl std::fmt::Display,
) -> DriverError {
    DriverError::Engine {
        task_id: task_id.to_string(),
        request,
        message: error.to_string(),
    }
}

/// Nanoseconds since the Unix epoch of an RFC 3339 time as the engine writes it.
fn unix_nanos_of(text: &str) -> u64 {
    logs::parse_timestamp(text).map_or(0, |(secs, nanos)| {
        u64::try_from(secs).unwrap_or(0) * 1_000_000_000 + u64::from(nanos)
    })
}

impl DockerDriver {
    pub fn new(config: DockerConfig) -> Self {
        Self {
            config,
            engine: tokio::sync::OnceCell::new(),
            followers: Mutex::new(HashMap::new()),
            node_id: std::sync::OnceLock::new(),
        }
    }

    pub fn config(&self) -> &DockerConfig {
        &self.config
    }

    async fn engine(&self) -> Result<&Docker, EngineError> {
        self.engine
            .get_or_try_init(|| async {
                Docker::connect_with_unix(self.config.socket_path(), 120, &API_VERSION)?
                    .negotiate_version()
                    .await
            })
            .await
    }

    async fn engine_for(&self, task_id: &str) -> Result<&Docker, DriverError> {
        self.engine()
            .await
            .map_err(|error| engine_error(task_id, "connect", error))
    }

    /// Asks the engine for its version: `driver.docker` and `driver.docker.version` when it
    /// answers, undetected when there is none at the endpoint.
    pub async fn fingerprint(&self) -> Fingerprint {
        let answer = tokio::time::timeout(FINGERPRINT_TIMEOUT, async {
            let engine = self.engine().await?;
            engine.version().await
        })
        .await;
        match answer {
            Ok(Ok(version)) => {
                let mut attributes = BTreeMap::from([
                    ("driver.docker".to_string(), "1".to_string()),
                    (
                        "driver.docker.version".to_string(),
                        version.version.unwrap_or_default(),
                    ),
                ]);
                if self.config.volumes_enabled {
                    attributes.insert("driver.docker.volumes.enabled".into(), "true".into());
                }
                if self.config.allow_privileged {
                    attributes.insert("driver.docker.privileged.enabled".into(), "true".into());
                }
                Fingerprint {
                    detected: true,
                    healthy: true,
                    description: "Healthy".to_string(),
                    attributes,
                }
            }
            Ok(Err(error)) => Fingerprint {
                detected: false,
                healthy: false,
                description: format!("Failed to connect to docker daemon: {error}"),
                attributes: BTreeMap::new(),
            },
            Err(_) => Fingerprint {
                detected: false,
                healthy: false,
                description: "Failed to connect to docker daemon: timed out".to_string(),
                attributes: BTreeMap::new(),
            },
        }
    }

    fn state(handle: &TaskHandle) -> Result<ContainerState, DriverError> {
        serde_json::from_value(handle.driver_state.clone()).map_err(|_| DriverError::BadHandle {
            task_id: handle.task_id.clone(),
            what: "container",
        })
    }

    /// Pulls the image unless it is present (or `force_pull`), within the pull timeout, first
    /// reporting "Downloading image" with the image reference, as Nomad.
    async fn ensure_image(
        &self,
        engine: &Docker,
        launch: &TaskLaunch,
        plan: &task::TaskPlan,
        events: &DriverEvents,
    ) -> Result<(), DriverError> {
        if !plan.force_pull && engine.inspect_image(&plan.image).await.is_ok() {
            return Ok(());
        }
        let (repository, tag) = task::split_image(&plan.image);
        let reference = if tag.is_empty() {
            plan.image.clone()
        } else {
            format!("{repository}:{tag}")
        };
        events.emit(DriverEvent {
            message: "Downloading image".to_string(),
            annotations: BTreeMap::from([("image".to_string(), reference)]),
        });
        let options = CreateImageOptions {
            from_image: Some(repository),
            tag: (!tag.is_empty()).then_some(tag),
            ..CreateImageOptions::default()
        };
        let credentials = plan.auth.as_ref().map(|auth| DockerCredentials {
            username: Some(auth.username.clone()).filter(|value| !value.is_empty()),
            password: Some(auth.password.clone()).filter(|value| !value.is_empty()),
            serveraddress: Some(auth.server_address.clone()).filter(|value| !value.is_empty()),
            ..DockerCredentials::default()
        });
        let pull = async {
            let mut progress = engine.create_image(Some(options), None, credentials);
            while let Some(item) = progress.next().await {
                let info = item?;
                if let Some(detail) = info.error_detail.and_then(|detail| detail.message) {
                    return Err(EngineError::DockerStreamError { error: detail });
                }
            }
            Ok(())
        };
        let start_failure = |message: String| DriverError::Start {
            task_id: launch.task_id.clone(),
            message,
            recoverable: true,
        };
        match tokio::time::timeout(plan.pull_timeout, pull).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) => Err(start_failure(format!(
                "Failed to pull `{}`: {error}",
                plan.image
            ))),
            Err(_) => Err(start_failure(format!(
                "Failed to pull `{}`: timed out after {:?} (image_pull_timeout)",
                plan.image, plan.pull_timeout
            ))),
        }
    }

    /// Starts following the container's logs into the task's log files, unless a follower
    /// already runs.
    fn follow_logs(&self, engine: &Docker, state: &ContainerState) {
        let mut followers = lock(&self.followers);
        if let Some(done) = followers.get(&state.container_id)
            && !*done.borrow()
        {
            return;
        }
        let (done_tx, done_rx) = watch::channel(false);
        followers.insert(state.container_id.clone(), done_rx);
        let engine = engine.clone();
        let state = state.clone();
        tokio::spawn(async move {
            // The log stream ends when the container stops; it may also end early (a request
            // timeout while the task is quiet, an engine restart): then it is asked again from
            // the recorded position for as long as the container runs.
            loop {
                if let Err(error) = logs::follow(
                    &engine,
                    &state.container_id,
                    &state.task_name,
                    &state.logs,
                    &state.state_dir,
                )
                .await
                {
                    tracing::debug!(container = %state.container_id, %error, "following container logs");
                }
                let running = engine
                    .inspect_container(&state.container_id, None)
                    .await
                    .ok()
                    .and_then(|inspect| inspect.state?.running)
                    .unwrap_or(false);
                if !running {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            let _ = done_tx.send(true);
        });
    }

    /// Waits (a bounded time) for the container's log follower to write what is left.
    async fn drain_logs(&self, container_id: &str) {
        let follower = lock(&self.followers).get(container_id).cloned();
        if let Some(mut done) = follower {
            let _ = tokio::time::timeout(LOG_DRAIN_TIMEOUT, done.wait_for(|done| *done)).await;
        }
    }

    /// The exit status of a container that is no longer running, `None` while it runs.
    async fn finished(
        &self,
        engine: &Docker,
        task_id: &str,
        container_id: &str,
    ) -> Result<Option<ExitStatus>, DriverError> {
        let inspect = engine
            .inspect_container(container_id, None)
            .await
            .map_err(|error| match status_code(&error) {
                Some(404) => DriverError::ShimGone {
                    task_id: task_id.to_string(),
                },
                _ => engine_error(task_id, "inspect the container", error),
            })?;
        let state = inspect.state.unwrap_or_default();
        if state.running.unwrap_or(false) || state.restarting.unwrap_or(false) {
            return Ok(None);
        }
        Ok(Some(ExitStatus {
            exit_code: i32::try_from(state.exit_code.unwrap_or(0)).unwrap_or(i32::MAX),
            // The engine reports a signal death as exit code 128+n, as Nomad shows it.
            signal: 0,
            oom_killed: state.oom_killed.unwrap_or(false),
            finished_at_unix_ns: state.finished_at.as_deref().map_or(0, unix_nanos_of),
        }))
    }

    async fn wait_exit(
        &self,
        engine: &Docker,
        task_id: &str,
        container_id: &str,
    ) -> Result<ExitStatus, DriverError> {
        loop {
            if let Some(status) = self.finished(engine, task_id, container_id).await? {
                self.drain_logs(container_id).await;
                return Ok(status);
            }
            let mut waiting = engine.wait_container(container_id, None);
            match waiting.next().await {
                // A non-zero exit is an error to bollard; either way the container stopped.
                Some(Ok(_) | Err(EngineError::DockerContainerWaitError { .. })) | None => {}
                Some(Err(error)) if status_code(&error) == Some(404) => {
                    return Err(DriverError::ShimGone {
                        task_id: task_id.to_string(),
                    });
                }
                Some(Err(error)) => {
                    tracing::debug!(container = container_id, %error, "waiting for container; asking again");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        }
    }

    async fn remove_container(
        &self,
        engine: &Docker,
        task_id: &str,
        container: &str,
    ) -> Result<(), DriverError> {
        let options = RemoveContainerOptions {
            force: true,
            v: true,
            ..RemoveContainerOptions::default()
        };
        match engine.remove_container(container, Some(options)).await {
            Ok(()) => Ok(()),
            Err(error) if matches!(status_code(&error), Some(404)) => Ok(()),
            // Removal already under way.
            Err(error) if matches!(status_code(&error), Some(409)) => Ok(()),
            Err(error) => Err(engine_error(task_id, "remove the container", error)),
        }
    }

    async fn start_task(
        &self,
        launch: &TaskLaunch,
        events: &DriverEvents,
    ) -> Result<TaskHandle, DriverError> {
        let mut plan = task::plan(launch, &self.config)
            .map_err(|error| DriverError::InvalidConfig(error.to_string()))?;
        if let (Some(node_id), Some(labels)) = (self.node_id.get(), plan.body.labels.as_mut()) {
            labels.insert(task::NODE_ID_LABEL.to_string(), node_id.clone());
        }
        let engine = self.engine_for(&launch.task_id).await?;
        let name = task::container_name(launch);
        std::fs::create_dir_all(&launch.state_dir).map_err(|source| DriverError::StateDir {
            path: launch.state_dir.clone(),
            source,
        })?;
        let spec = serde_json::json!({"task_id": launch.task_id, "container_name": name});
        std::fs::write(launch.state_dir.join(SPEC_FILE), spec.to_string()).map_err(|source| {
            DriverError::StateDir {
                path: launch.state_dir.clone(),
                source,
            }
        })?;
        self.ensure_image(engine, launch, &plan, events).await?;

        let options = || CreateContainerOptions {
            name: Some(name.clone()),
            ..CreateContainerOptions::default()
        };
        let created = match engine
            .create_container(Some(options()), plan.body.clone())
            .await
        {
            Ok(created) => created,
            // A container of an earlier run of this task (the name is the task's): replace it.
            Err(error) if status_code(&error) == Some(409) => {
                self.remove_container(engine, &launch.task_id, &name)
                    .await?;
                engine
                    .create_container(Some(options()), plan.body.clone())
                    .await
                    .map_err(|error| engine_error(&launch.task_id, "create the container", error))?
            }
            Err(error) if status_code(&error) == Some(400) => {
                return Err(DriverError::InvalidConfig(format!(
                    "the engine refused the container: {error}"
                )));
            }
            Err(error) => {
                return Err(engine_error(&launch.task_id, "create the container", error));
            }
        };
        if let Err(error) = engine.start_container(&created.id, None).await {
            let _ = self
                .remove_container(engine, &launch.task_id, &created.id)
                .await;
            return Err(DriverError::Start {
                task_id: launch.task_id.clone(),
                message: format!("Failed to start container {}: {error}", created.id),
                recoverable: status_code(&error) != Some(400),
            });
        }
        let pid = engine
            .inspect_container(&created.id, None)
            .await
            .ok()
            .and_then(|inspect| inspect.state?.pid)
            .and_then(|pid| i32::try_from(pid).ok())
            .unwrap_or(0);
        let state = ContainerState {
            version: STATE_VERSION,
            container_id: created.id.clone(),
            container_name: name,
            state_dir: launch.state_dir.clone(),
            logs: launch.logs.clone(),
            task_name: launch.task_name.clone(),
            pid,
        };
        self.follow_logs(engine, &state);
        let driver_state = serde_json::to_value(&state).map_err(|error| DriverError::Start {
            task_id: launch.task_id.clone(),
            message: format!("handle not serializable: {error}"),
            recoverable: false,
        })?;
        Ok(TaskHandle {
            version: 1,
            driver: "docker".to_string(),
            task_id: launch.task_id.clone(),
            kill_signal: launch.kill_signal.clone(),
            shim: None,
            driver_state,
        })
    }

    async fn send_signal(
        &self,
        engine: &Docker,
        task_id: &str,
        container_id: &str,
        signal: &str,
    ) -> Result<(), DriverError> {
        let number = parse_signal(signal)? as i32;
        let options = KillContainerOptions {
            signal: number.to_string(),
        };
        match engine.kill_container(container_id, Some(options)).await {
            Ok(()) => Ok(()),
            // Not running (any more): nothing to signal.
            Err(error) if status_code(&error) == Some(409) => Ok(()),
            Err(error) if status_code(&error) == Some(404) => Err(DriverError::ShimGone {
                task_id: task_id.to_string(),
            }),
            Err(error) => Err(engine_error(task_id, "signal the container", error)),
        }
    }

    async fn task_stats(&self, handle: &TaskHandle) -> Result<TaskResourceUsage, DriverError> {
        let state = Self::state(handle)?;
        let engine = self.engine_for(&handle.task_id).await?;
        let options = StatsOptions {
            stream: false,
            one_shot: false,
        };
        let sample = engine
            .stats(&state.container_id, Some(options))
            .next()
            .await
            .ok_or_else(|| engine_error(&handle.task_id, "report stats", "no sample"))?
            .map_err(|error| engine_error(&handle.task_id, "report stats", error))?;
        Ok(usage_of(&sample))
    }
}

/// Nomad's docker figures from one engine stats sample (which carries the previous one).
fn usage_of(sample: &bollard::models::ContainerStatsResponse) -> TaskResourceUsage {
    let memory = sample.memory_stats.clone().unwrap_or_default();
    let detail = memory.stats.clone().unwrap_or_default();
    let figure = |key: &str| detail.get(key).copied().unwrap_or(0);
    let cpu = sample.cpu_stats.clone().unwrap_or_default();
    let previous = sample.precpu_stats.clone().unwrap_or_default();
    let usage = cpu.cpu_usage.clone().unwrap_or_default();
    let previous_usage = previous.cpu_usage.clone().unwrap_or_default();
    let system_delta = cpu
        .system_cpu_usage
        .unwrap_or(0)
        .saturating_sub(previous.system_cpu_usage.unwrap_or(0));
    let cpus = f64::from(cpu.online_cpus.filter(|cpus| *cpus > 0).unwrap_or_else(|| {
        usage.percpu_usage.as_ref().map_or(1, |per_cpu| {
            u32::try_from(per_cpu.len()).unwrap_or(1).max(1)
        })
    }));
    let percent = |now: Option<u64>, before: Option<u64>| {
        if system_delta == 0 {
            return 0.0;
        }
        let delta = now.unwrap_or(0).saturating_sub(before.unwrap_or(0));
        delta as f64 / system_delta as f64 * cpus * 100.0
    };
    let throttling = cpu.throttling_data.clone().unwrap_or_default();
    let timestamp = sample
        .read
        .as_ref()
        .map(|read| unix_nanos_of(&read.to_string()))
        .filter(|nanos| *nanos > 0)
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |elapsed| {
                    u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX)
                })
        });
    TaskResourceUsage {
        timestamp_unix_ns: timestamp,
        memory: MemoryUsage {
            rss: figure("rss"),
            cache: figure("cache"),
            swap: figure("swap"),
            usage: memory.usage.unwrap_or(0),
            max_usage: memory.max_usage.unwrap_or(0),
            kernel_usage: 0,
            kernel_max_usage: 0,
            measured: ["RSS", "Cache", "Swap", "Usage", "Max Usage"]
                .iter()
                .map(|name| name.to_string())
                .collect(),
        },
        cpu: CpuUsage {
            total_ns: usage.total_usage.unwrap_or(0),
            user_ns: usage.usage_in_usermode.unwrap_or(0),
            system_ns: usage.usage_in_kernelmode.unwrap_or(0),
            percent: percent(usage.total_usage, previous_usage.total_usage),
            user_mode_percent: percent(usage.usage_in_usermode, previous_usage.usage_in_usermode),
            system_mode_percent: percent(
                usage.usage_in_kernelmode,
                previous_usage.usage_in_kernelmode,
            ),
            throttled_periods: throttling.throttled_periods.unwrap_or(0),
            throttled_time_ns: throttling.throttled_time.unwrap_or(0),
            measured: ["Throttled Periods", "Throttled Time", "Percent"]
                .iter()
                .map(|name| name.to_string())
                .collect(),
        },
        pids: Vec::new(),
    }
}

/// The container a handle names: its ID, or, for a run whose handle was never recorded, the
/// name the driver wrote into the run's state dir before creating it.
fn container_of(handle: &TaskHandle) -> Option<String> {
    if let Ok(state) = DockerDriver::state(handle) {
        return Some(state.container_id);
    }
    let state_dir: &Path = &handle.shim.as_ref()?.state_dir;
    let spec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(state_dir.join(SPEC_FILE)).ok()?).ok()?;
    spec.get("container_name")?.as_str().map(str::to_string)
}

fn state_dir_of(handle: &TaskHandle) -> Option<PathBuf> {
    DockerDriver::state(handle)
        .map(|state| state.state_dir)
        .ok()
        .or_else(|| handle.shim.as_ref().map(|shim| shim.state_dir.clone()))
}

impl Driver for DockerDriver {
    fn name(&self) -> &'static str {
        "docker"
    }

    fn start<'a>(&'a self, launch: &'a TaskLaunch) -> DriverFuture<'a, TaskHandle> {
        Box::pin(async move { self.start_task(launch, &DriverEvents::default()).await })
    }

    fn start_reporting<'a>(
        &'a self,
        launch: &'a TaskLaunch,
        events: &'a DriverEvents,
    ) -> DriverFuture<'a, TaskHandle> {
        Box::pin(self.start_task(launch, events))
    }

    fn recover<'a>(&'a self, handle: &'a TaskHandle) -> DriverFuture<'a, ()> {
        Box::pin(async move {
            let state = Self::state(handle)?;
            let engine = self.engine_for(&handle.task_id).await?;
            // Gone containers answer ShimGone: the client then reclaims the run.
            let running = self
                .finished(engine, &handle.task_id, &state.container_id)
                .await?
                .is_none();
            if running {
                self.follow_logs(engine, &state);
            }
            Ok(())
        })
    }

    fn wait<'a>(&'a self, handle: &'a TaskHandle) -> DriverFuture<'a, ExitStatus> {
        Box::pin(async move {
            let state = Self::state(handle)?;
            let engine = self.engine_for(&handle.task_id).await?;
            self.wait_exit(engine, &handle.task_id, &state.container_id)
                .await
        })
    }

    fn exit_status<'a>(&'a self, handle: &'a TaskHandle) -> DriverFuture<'a, Option<ExitStatus>> {
        Box::pin(async move {
            let state = Self::state(handle)?;
            let engine = self.engine_for(&handle.task_id).await?;
            self.finished(engine, &handle.task_id, &state.container_id)
                .await
        })
    }

    fn signal<'a>(&'a self, handle: &'a TaskHandle, signal: &'a str) -> DriverFuture<'a, ()> {
        Box::pin(async move {
            let state = Self::state(handle)?;
            let engine = self.engine_for(&handle.task_id).await?;
            self.send_signal(engine, &handle.task_id, &state.container_id, signal)
                .await
        })
    }

    fn kill<'a>(
        &'a self,
        handle: &'a TaskHandle,
        signal: Option<&'a str>,
        timeout: Duration,
    ) -> DriverFuture<'a, ExitStatus> {
        Box::pin(async move {
            let state = Self::state(handle)?;
            let engine = self.engine_for(&handle.task_id).await?;
            let signal = signal
                .or(handle.kill_signal.as_deref())
                .unwrap_or(drover_driver::DEFAULT_KILL_SIGNAL);
            let id = &state.container_id;
            self.send_signal(engine, &handle.task_id, id, signal)
                .await?;
            match tokio::time::timeout(timeout, self.wait_exit(engine, &handle.task_id, id)).await {
                Ok(status) => status,
                Err(_) => {
                    self.send_signal(engine, &handle.task_id, id, "SIGKILL")
                        .await?;
                    self.wait_exit(engine, &handle.task_id, id).await
                }
            }
        })
    }

    fn stats<'a>(&'a self, handle: &'a TaskHandle) -> DriverFuture<'a, TaskResourceUsage> {
        Box::pin(self.task_stats(handle))
    }

    fn destroy<'a>(&'a self, handle: &'a TaskHandle) -> DriverFuture<'a, ()> {
        Box::pin(async move {
            if let Some(container) = container_of(handle) {
                let engine = self.engine_for(&handle.task_id).await?;
                self.remove_container(engine, &handle.task_id, &container)
                    .await?;
                lock(&self.followers).remove(&container);
            }
            if let Some(dir) = state_dir_of(handle) {
                match std::fs::remove_dir_all(&dir) {
                    Ok(()) => {}
                    Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                    Err(source) => return Err(DriverError::StateDir { path: dir, source }),
                }
            }
            Ok(())
        })
    }

    fn reclaim<'a>(&'a self, handle: &'a TaskHandle) -> DriverFuture<'a, Option<ExitStatus>> {
        Box::pin(async move {
            // Called when the container is gone: nothing is left to kill; what state the run
            // kept is removed.
            self.destroy(handle).await?;
            Ok(None)
        })
    }
}

impl DockerDriver {
    /// Tells the driver the node it runs for: its containers are labelled with it, and only
    /// containers of this node are ever taken for orphans.
    pub fn set_node_id(&self, node_id: &str) {
        let _ = self.node_id.set(node_id.to_string());
    }

    /// Removes this node's containers (by label) whose allocation `known_allocs` (asked after
    /// the listing, so an allocation starting meanwhile is known) does not name: left by
    /// allocations the client no longer has. Returns how many were removed.
    pub async fn remove_orphans(
        &self,
        known_allocs: impl FnOnce() -> std::collections::BTreeSet<String>,
    ) -> Result<usize, DockerError> {
        let Some(node_id) = self.node_id.get() else {
            return Ok(0);
        };
        let engine = self.engine().await.map_err(|source| DockerError::Engine {
            context: "connecting to the engine".into(),
            source,
        })?;
        let options = bollard::query_parameters::ListContainersOptions {
            all: true,
            filters: Some(HashMap::from([(
                "label".to_string(),
                vec![format!("{}={node_id}", task::NODE_ID_LABEL)],
            )])),
            ..bollard::query_parameters::ListContainersOptions::default()
        };
        let containers = engine
            .list_containers(Some(options))
            .await
            .map_err(|source| DockerError::Engine {
                context: "listing containers".into(),
                source,
            })?;
        let known = known_allocs();
        let orphans: Vec<String> = containers
            .into_iter()
            .filter(|container| {
                container
                    .labels
                    .as_ref()
                    .and_then(|labels| labels.get(task::ALLOC_ID_LABEL))
                    .is_some_and(|alloc| !known.contains(alloc))
            })
            .filter_map(|container| container.id)
            .collect();
        for id in &orphans {
            if let Err(error) = self.remove_container(engine, id, id).await {
                tracing::warn!(container = %id, %error, "removing a container left by a gone allocation");
            }
        }
        Ok(orphans.len())
    }
}

/// Shared handle to the driver, for the client's catalog and the fingerprint alike.
pub type SharedDockerDriver = Arc<DockerDriver>;
