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
//! Every bind source beneath the allocation reaches the engine pinned ([`binds`]): resolved
//! beneath the alloc dir by the kernel and handed over as a private mount of what was found,
//! never as a path a planted symlink could redirect.
//!
//! Not for: the task config schema (see [`task`]) or the client's plugin config (see
//! [`config`]); restart policy and events belong to the client.
//!
//! # Layers
//!
//! Each module directly under `src/` uses only modules on the lines below its own (`error`
//! modules aside), as `crates/structs/tests/module_cycles.rs` checks; top first:
//!
//! - `binds`, `network`
//! - `task`
//! - `config`
//! - `gc`
//! - `auth`, `labels`, `logs`, `progress`, `values`
//!
//! # Design notes
//!
//! `drover-docker`, the `docker` driver: the same `Driver` trait over a Docker
//! Engine reached on its unix socket with bollard (only its unix transport; its own crate so
//! bollard stays out of `driver` and the shim). `task` turns the Nomad docker task config into
//! the container create body (ports from the group network's `NOMAD_HOST_PORT_<label>` /
//! `NOMAD_PORT_<label>`, or the task's own deprecated network (`TaskLaunch::task_network`)
//! published to the container ports `port_map` names, `/alloc` `/local` `/secrets` bound at Nomad's paths, memory/memory_max
//! as limit/reservation, cpu shares) and refuses what the client's `plugin "docker"` config
//! (`config`: endpoint, volumes, allow_privileged, allow_caps, allow_runtimes for a task's
//! `runtime`, extra_labels (Nomad's `com.hashicorp.nomad.*` labels chosen by globs),
//! allowed_modes (the `pid_mode`/`ipc_mode`/`uts_mode` values a task may set without
//! `allow_privileged`, as Nomad 2.0.4; a `userns` list is refused, as `userns_mode` is);
//! `infra_image`/`infra_image_pull_timeout` for `network`'s pause container; `tls` refused by
//! name, as other keys) does not allow. `binds` is the last step before
//! the create: every bind source beneath the allocation (`/alloc`, `/local`, `/secrets`, and
//! `volumes`/`mount` sources without `volumes.enabled`) is resolved beneath the alloc dir by
//! `drover_isolate::beneath` and handed to the engine as a private mount of what was found
//! (`<state_dir>/binds/<n>`, detached once the container started), so a symlink planted or
//! swapped in cannot lead a bind out (GH-28177); a refusal names the setting and the path. `auth` finds registry credentials as Nomad (the task's `auth`, else the plugin's
//! `auth { config helper }`: a docker config.json's `auths`/`credHelpers`/`credsStore`, a
//! `docker-credential-<helper>`; `auth_soft_fail` pulls without them when they cannot be
//! found); `progress` summarises a pull as Nomad and watches its stream ("Docker image pull
//! progress: …" every 2 min, given up after `pull_activity_timeout` without activity or at
//! `image_pull_timeout`); `load` streams an image archive
//! from `local/` into the engine instead of a pull; `logging` sets the engine's log driver
//! (json-file 2×2m by default); `gc` counts each image's tasks (rebuilt from the re-attached
//! tasks after a restart, as Nomad's) and removes an image `image_delay` after its last one
//! (`gc { container = false }` keeps containers); `gc { dangling_containers }` removes, every
//! `period` after a first wait of max(period, creation_grace), running containers labelled by
//! this node's allocations that no task of the driver tracks and older than `creation_grace`
//! (`dry_run` logs them). The handle's
//! `driver_state` names the container (`<task>-<alloc>`, Nomad's alloc and task labels), so
//! `recover` re-attaches by ID; an engine that does not answer is waited for (a "Driver" task
//! event says so, through `Driver::recover_reporting`; at most `restore_engine_wait`, 5 min),
//! so a restored task never starts a second container while its engine restarts, and `wait`
//! and the log follower likewise ride out an engine restart. A log follower per container copies the
//! engine's log stream into the allocation's rotated files and records the last timestamp in
//! the run's state dir, so a follower restarted with the agent resumes where it stopped. The
//! engine is probed by the agent's fingerprint (`driver.docker`, `.version`, `.runtimes`,
//! `.os_type`, `.bridge_ip`) at start and every 30 s after (the agent's `docker_fingerprint`:
//! a change is applied to the node as Nomad's client applies a driver update, and the node
//! registers again, which unblocks evaluations on the server; the state store, comparing the
//! registration with the record it holds, adds Nomad's "Driver" node event for a health that
//! changed), never on another driver's start path. `alloc exec` into a
//! container goes the shared shim exec path (the container's pid's namespaces, network
//! included, and its cgroup). **Boundary**: knows containers, not allocations.

pub mod auth;
pub mod binds;
pub mod config;
mod error;
pub mod gc;
mod labels;
mod logs;
pub mod network;
mod progress;
pub mod task;
mod values;

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

/// How often the agent fingerprints the engine again after its start (Nomad's docker driver:
/// 30 s), so an engine started, stopped or upgraded later shows in the node.
pub const FINGERPRINT_PERIOD: Duration = Duration::from_secs(30);

/// How often a task waiting for an unreachable engine asks again.
const ENGINE_POLL: Duration = Duration::from_secs(1);

/// How long one probe of the engine (a ping) may take before it counts as no answer.
const ENGINE_PROBE_TIMEOUT: Duration = Duration::from_secs(3);

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
    /// The image the container runs (its ID), counted for the image GC; absent in handles
    /// of older agents.
    #[serde(default)]
    image_id: Option<String>,
    /// The container's own network as Nomad's driver detects it (`address_mode = "driver"`);
    /// absent in handles of older agents.
    #[serde(default)]
    network: Option<drover_structs::service_registration::DriverNetwork>,
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
    /// The node's name (for `extra_labels`).
    node_name: std::sync::OnceLock<String>,
    /// The containers of the driver's tasks (started or re-attached, not yet destroyed): the
    /// dangling-container reconciler leaves them alone.
    tracked: Mutex<std::collections::HashSet<String>>,
    /// Which tasks use which image, for the image GC.
    image_users: Arc<gc::ImageUsers>,
    /// Whether a fingerprint has found the engine: once it has, one that finds no engine is
    /// unhealthy rather than undetected (Nomad's rule).
    detected: std::sync::atomic::AtomicBool,
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

/// An engine error as Nomad's docker client words it: `API error (<status>): <message>` for an
/// answer of the engine, the message alone for an error in the pull stream.
fn pull_error_text(error: &EngineError) -> String {
    match error {
        EngineError::DockerResponseServerError {
            status_code,
            message,
        } => format!("API error ({status_code}): {message}"),
        EngineError::DockerStreamError { error } => error.clone(),
        other => other.to_string(),
    }
}

/// Whether the engine said the image does not exist (Nomad's `Error: image .+ not found`, and
/// the registry's "manifest unknown"/"not found" answers), which no retry fixes.
fn image_not_found(text: &str) -> bool {
    text.split("Error: image ")
        .nth(1)
        .is_some_and(|rest| rest.contains(" not found"))
}

/// A duration as Go prints it for whole seconds (`5m0s`, `1h0m0s`, `30s`), as Nomad's messages
/// show durations.
fn go_duration(duration: Duration) -> String {
    let total = duration.as_secs();
    let (hours, minutes, seconds) = (total / 3600, total / 60 % 60, total % 60);
    if hours > 0 {
        format!("{hours}h{minutes}m{seconds}s")
    } else if minutes > 0 {
        format!("{minutes}m{seconds}s")
    } else {
        format!("{seconds}s")
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
            node_name: std::sync::OnceLock::new(),
            tracked: Mutex::new(std::collections::HashSet::new()),
            image_users: Arc::new(gc::ImageUsers::default()),
            detected: std::sync::atomic::AtomicBool::new(false),
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

    /// Asks the engine what it is, as Nomad's docker driver fingerprints it: when it answers,
    /// healthy with `driver.docker`, `driver.docker.version`, `driver.docker.runtimes`,
    /// `driver.docker.os_type`, `driver.docker.bridge_ip` (the default bridge's gateway) and
    /// the plugin's `privileged.enabled` / `volumes.enabled`; when it does not, undetected, or
    /// unhealthy once an earlier fingerprint had found it ("Failed to connect to docker
    /// daemon"). The agent fingerprints at start and then every [`FINGERPRINT_PERIOD`].
    pub async fn fingerprint(&self) -> Fingerprint {
        let answer = tokio::time::timeout(FINGERPRINT_TIMEOUT, async {
            let engine = self.engine().await?;
            let version = engine.version().await?;
            // Both are extras: an engine that answers its version is healthy without them.
            let networks = engine
                .list_networks(None::<bollard::query_parameters::ListNetworksOptions>)
                .await;
            let info = engine.info().await;
            Ok::<_, EngineError>((version, networks, info))
        })
        .await;
        let failure = match answer {
            Ok(Ok((version, networks, info))) => {
                self.detected
                    .store(true, std::sync::atomic::Ordering::SeqCst);
                return Fingerprint {
                    detected: true,
                    healthy: true,
                    description: "Healthy".to_string(),
                    attributes: self.fingerprint_attributes(version, networks, info),
                };
            }
            Ok(Err(error)) => error.to_string(),
            Err(_) => format!("no answer within {}", go_duration(FINGERPRINT_TIMEOUT)),
        };
        tracing::debug!(endpoint = %self.config.endpoint, error = %failure, "could not connect to docker daemon");
        Fingerprint {
            detected: self.detected.load(std::sync::atomic::Ordering::SeqCst),
            healthy: false,
            description: "Failed to connect to docker daemon".to_string(),
            attributes: BTreeMap::new(),
        }
    }

    fn fingerprint_attributes(
        &self,
        version: bollard::models::SystemVersion,
        networks: Result<Vec<bollard::models::Network>, EngineError>,
        info: Result<bollard::models::SystemInfo, EngineError>,
    ) -> BTreeMap<String, String> {
        let mut attributes = BTreeMap::from([
            ("driver.docker".to_string(), "true".to_string()),
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
        match networks {
            Ok(networks) => {
                let gateway = networks
                    .iter()
                    .find(|network| network.name.as_deref() == Some("bridge"))
                    .and_then(|bridge| {
                        bridge
                            .ipam
                            .as_ref()?
                            .config
                            .as_ref()?
                            .first()?
                            .gateway
                            .clone()
                    })
                    .filter(|gateway| !gateway.is_empty());
                if let Some(gateway) = gateway {
                    attributes.insert("driver.docker.bridge_ip".into(), gateway);
                }
            }
            Err(error) => tracing::warn!(%error, "error discovering bridge IP"),
        }
        match info {
            Ok(info) => {
                let mut runtimes: Vec<String> =
                    info.runtimes.unwrap_or_default().into_keys().collect();
                runtimes.sort();
                attributes.insert("driver.docker.runtimes".into(), runtimes.join(","));
                attributes.insert(
                    "driver.docker.os_type".into(),
                    info.os_type.unwrap_or_default(),
                );
            }
            Err(error) => tracing::warn!(%error, "failed to get Docker system info"),
        }
        attributes
    }

    /// The engine, once it answers a ping within [`ENGINE_PROBE_TIMEOUT`].
    async fn reachable_engine(&self) -> Result<&Docker, String> {
        let probe = async {
            let engine = self.engine().await?;
            engine.ping().await?;
            Ok::<_, EngineError>(engine)
        };
        match tokio::time::timeout(ENGINE_PROBE_TIMEOUT, probe).await {
            Ok(Ok(engine)) => Ok(engine),
            Ok(Err(error)) => Err(error.to_string()),
            Err(_) => Err(format!(
                "no answer within {}",
                go_duration(ENGINE_PROBE_TIMEOUT)
            )),
        }
    }

    /// The engine for re-attaching to `container_id`: at once when it answers; otherwise,
    /// after saying so as a driver event, asked again every second for up to the config's
    /// `restore_engine_wait` (an engine restarting, a socket not there yet), so a restored
    /// task waits for its container instead of being taken for gone and started again. An
    /// engine still silent after that is an error: the task is then restored as failed.
    async fn engine_for_restore(
        &self,
        task_id: &str,
        container_id: &str,
        events: &DriverEvents,
    ) -> Result<&Docker, DriverError> {
        let first = match self.reachable_engine().await {
            Ok(engine) => return Ok(engine),
            Err(error) => error,
        };
        let wait = self.config.restore_engine_wait;
        let short_id: String = container_id.chars().take(12).collect();
        events.emit(DriverEvent {
            message: format!(
                "Docker engine unreachable, waiting up to {} to re-attach to container {short_id}",
                go_duration(wait)
            ),
            annotations: BTreeMap::from([
                ("container_id".to_string(), container_id.to_string()),
                ("error".to_string(), first.clone()),
            ]),
        });
        tracing::warn!(task_id, container = %short_id, error = %first, wait = ?wait, "docker engine unreachable; waiting for it to re-attach");
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            tokio::time::sleep(ENGINE_POLL).await;
            match self.reachable_engine().await {
                Ok(engine) => {
                    events.emit(DriverEvent {
                        message: format!(
                            "Docker engine answering again, re-attaching to container {short_id}"
                        ),
                        annotations: BTreeMap::from([(
                            "container_id".to_string(),
                            container_id.to_string(),
                        )]),
                    });
                    return Ok(engine);
                }
                Err(error) if tokio::time::Instant::now() >= deadline => {
                    return Err(engine_error(
                        task_id,
                        "reach the engine to re-attach",
                        format!(
                            "the Docker engine did not answer within {}: {error}",
                            go_duration(wait)
                        ),
                    ));
                }
                Err(_) => {}
            }
        }
    }

    fn state(handle: &TaskHandle) -> Result<ContainerState, DriverError> {
        serde_json::from_value(handle.driver_state.clone()).map_err(|_| DriverError::BadHandle {
            task_id: handle.task_id.clone(),
            what: "container",
        })
    }

    /// Pulls the image unless it is present (or `force_pull`), as Nomad: credentials first
    /// (the task's `auth`, else the client's auth config; `auth_soft_fail` pulls without them
    /// when they cannot be found), then "Downloading image" with the image reference, then the
    /// pull within `image_pull_timeout`, reporting "Docker image pull progress: …" every two
    /// minutes of a slow pull and giving up on one without activity for the client's
    /// `pull_activity_timeout`.
    async fn ensure_image(
        &self,
        engine: &Docker,
        launch: &TaskLaunch,
        plan: &task::TaskPlan,
        events: &DriverEvents,
    ) -> Result<(), DriverError> {
        if let Some(archive) = &plan.load {
            return self.load_image(engine, plan, archive).await;
        }
        if !plan.force_pull && engine.inspect_image(&plan.image).await.is_ok() {
            return Ok(());
        }
        let (repository, tag) = task::split_image(&plan.image);
        let credentials = match auth::resolve(plan.auth.as_ref(), &self.config.auth, &repository) {
            Ok(found) => found,
            Err(error) if plan.auth_soft_fail => {
                tracing::warn!(task_id = %launch.task_id, repo = %repository, %error, "Failed to find docker repo auth");
                None
            }
            Err(error) => {
                return Err(DriverError::StartWorded {
                    message: format!("Failed to find docker auth for repo {repository:?}: {error}"),
                    recoverable: false,
                });
            }
        };
        let credentials = credentials.map(|auth| DockerCredentials {
            username: Some(auth.username).filter(|value| !value.is_empty()),
            password: Some(auth.password).filter(|value| !value.is_empty()),
            email: Some(auth.email).filter(|value| !value.is_empty()),
            serveraddress: Some(auth.server_address).filter(|value| !value.is_empty()),
            ..DockerCredentials::default()
        });
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
        let outcome = self
            .pull(
                engine,
                &plan.image,
                options,
                credentials,
                plan.pull_timeout,
                events,
            )
            .await;
        outcome.map_err(|(error, recoverable)| DriverError::StartWorded {
            message: format!("Failed to pull `{}`: {error}", plan.image),
            recoverable,
        })
    }

    /// `load`: the archive streamed into the engine (`docker load`), then the task's image
    /// looked up in it, as Nomad does instead of a pull.
    async fn load_image(
        &self,
        engine: &Docker,
        plan: &task::TaskPlan,
        archive: &Path,
    ) -> Result<(), DriverError> {
        let failure = |message: String, recoverable: bool| DriverError::StartWorded {
            message,
            recoverable,
        };
        let open_error = |error: &dyn std::fmt::Display| {
            failure(
                format!(
                    "unable to open image archive: open {}: {error}",
                    archive.display()
                ),
                false,
            )
        };
        // Resolved beneath the allocation dir, as the binds: a symlink planted at the archive's
        // path does not make the agent stream a host file into the engine.
        let alloc_dir = plan
            .alloc_dir
            .as_deref()
            .ok_or_else(|| open_error(&"the task has no allocation directory"))?;
        let relative = archive
            .strip_prefix(alloc_dir)
            .map_err(|_| open_error(&"outside the allocation directory"))?;
        let pinned = drover_isolate::beneath::open(
            alloc_dir,
            relative,
            drover_isolate::beneath::Missing::Fail,
        )
        .map_err(|error| open_error(&error))?;
        let file = tokio::fs::File::open(drover_isolate::beneath::fd_path(&pinned))
            .await
            .map_err(|error| open_error(&error))?;
        let options = bollard::query_parameters::ImportImageOptions {
            quiet: true,
            ..bollard::query_parameters::ImportImageOptions::default()
        };
        let mut loading = Box::pin(engine.import_image_stream(
            options,
            tokio_util::io::ReaderStream::new(file),
            None,
        ));
        while let Some(item) = loading.next().await {
            let info = item.map_err(|error| failure(pull_error_text(&error), false))?;
            if let Some(message) = info.error_detail.and_then(|detail| detail.message) {
                return Err(failure(message, false));
            }
        }
        engine
            .inspect_image(&plan.image)
            .await
            .map(|_| ())
            .map_err(|error| {
                failure(
                    format!(
                        "image {} is not in the loaded archive {}: {}",
                        plan.image,
                        archive.display(),
                        pull_error_text(&error)
                    ),
                    false,
                )
            })
    }

    /// One pull, watched ([`progress::watch`]): `Err((reason, recoverable))` as Nomad words and
    /// classes it (an image the registry does not have is not worth retrying).
    async fn pull(
        &self,
        engine: &Docker,
        image: &str,
        options: CreateImageOptions,
        credentials: Option<DockerCredentials>,
        pull_timeout: Duration,
        events: &DriverEvents,
    ) -> Result<(), (String, bool)> {
        let stream = engine.create_image(Some(options), None, credentials);
        let limits = progress::PullLimits {
            pull_timeout,
            activity_timeout: self.config.pull_activity_timeout,
        };
        progress::watch(stream, image, limits, events)
            .await
            .map_err(|failure| match failure {
                progress::PullFailure::Engine(error) => {
                    let text = pull_error_text(&error);
                    let recoverable = !image_not_found(&text);
                    (text, recoverable)
                }
                progress::PullFailure::Stream(message) => {
                    let recoverable = !image_not_found(&message);
                    (message, recoverable)
                }
                progress::PullFailure::Inactive(activity_timeout) => (
                    format!(
                        "context canceled: no pull activity for {} (pull_activity_timeout)",
                        go_duration(activity_timeout)
                    ),
                    true,
                ),
                progress::PullFailure::DeadlineExceeded => {
                    ("context deadline exceeded".to_string(), true)
                }
            })
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
        let engine_wait = self.config.restore_engine_wait;
        tokio::spawn(async move {
            let mut unreachable_since: Option<tokio::time::Instant> = None;
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
                // An engine that does not answer (restarting) is asked again, for as long as
                // a re-attach would wait for it.
                let running = match engine.inspect_container(&state.container_id, None).await {
                    Ok(inspect) => {
                        unreachable_since = None;
                        inspect
                            .state
                            .and_then(|state| state.running)
                            .unwrap_or(false)
                    }
                    Err(error) if status_code(&error).is_some() => false,
                    Err(_) => {
                        let since =
                            *unreachable_since.get_or_insert_with(tokio::time::Instant::now);
                        since.elapsed() < engine_wait
                    }
                };
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
        // An engine that stops answering (restarting, with its containers kept running) is
        // waited for as on re-attach, not taken for an exit.
        let mut unreachable_since: Option<tokio::time::Instant> = None;
        loop {
            match self.finished(engine, task_id, container_id).await {
                Ok(Some(status)) => {
                    self.drain_logs(container_id).await;
                    return Ok(status);
                }
                Ok(None) => unreachable_since = None,
                Err(gone @ DriverError::ShimGone { .. }) => return Err(gone),
                Err(error) => {
                    let since = *unreachable_since.get_or_insert_with(tokio::time::Instant::now);
                    if since.elapsed() >= self.config.restore_engine_wait {
                        return Err(error);
                    }
                    tracing::debug!(container = container_id, %error, "engine unreachable while waiting for the container; asking again");
                    tokio::time::sleep(ENGINE_POLL).await;
                    continue;
                }
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
            let node_name = self.node_name.get().map_or("", String::as_str);
            labels.extend(task::extra_labels(
                &self.config.extra_labels,
                launch,
                node_id,
                node_name,
            ));
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

        // Resolved at the last moment, held until the container's own mounts are made.
        let staged = binds::pin(&mut plan, &launch.state_dir)
            .map_err(|error| DriverError::InvalidConfig(error.to_string()))?;
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
        lock(&self.tracked).insert(created.id.clone());
        let started = engine.start_container(&created.id, None).await;
        // The container's mount namespace holds its copies now (or it never started).
        drop(staged);
        if let Err(error) = started {
            lock(&self.tracked).remove(&created.id);
            let _ = self
                .remove_container(engine, &launch.task_id, &created.id)
                .await;
            return Err(DriverError::Start {
                task_id: launch.task_id.clone(),
                message: format!("Failed to start container {}: {error}", created.id),
                recoverable: status_code(&error) != Some(400),
            });
        }
        let inspect = engine.inspect_container(&created.id, None).await.ok();
        let pid = inspect
            .as_ref()
            .and_then(|inspect| inspect.state.as_ref()?.pid)
            .and_then(|pid| i32::try_from(pid).ok())
            .unwrap_or(0);
        let network = Some(detect_network(inspect.as_ref(), &plan.port_map));
        let image_id = inspect.and_then(|inspect| inspect.image);
        if let Some(image_id) = &image_id {
            self.image_users.hold(image_id, &launch.task_id);
        }
        let state = ContainerState {
            version: STATE_VERSION,
            container_id: created.id.clone(),
            container_name: name,
            state_dir: launch.state_dir.clone(),
            logs: launch.logs.clone(),
            task_name: launch.task_name.clone(),
            pid,
            image_id,
            network,
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
/// The container's address as Nomad's driver detects it: the first of its networks with an
/// address, advertised by `auto` unless that is the default `bridge`; none in another
/// container's namespace (the group's, whose address the client knows).
fn detect_network(
    inspect: Option<&bollard::models::ContainerInspectResponse>,
    port_map: &BTreeMap<String, i64>,
) -> drover_structs::service_registration::DriverNetwork {
    let mut found = inspect
        .and_then(|inspect| inspect.network_settings.as_ref()?.networks.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|(name, network)| {
            let ip = network.ip_address.as_deref().filter(|ip| !ip.is_empty())?;
            Some((name.clone(), ip.to_string()))
        })
        .collect::<Vec<_>>();
    found.sort();
    let (ip, auto_advertise) = found
        .into_iter()
        .next()
        .map(|(name, ip)| (ip, name != "bridge" && name != "nat"))
        .unwrap_or_default();
    drover_structs::service_registration::DriverNetwork {
        ip,
        auto_advertise,
        port_map: port_map.clone(),
    }
}

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
            self.recover_reporting(handle, &DriverEvents::default())
                .await
        })
    }

    fn recover_reporting<'a>(
        &'a self,
        handle: &'a TaskHandle,
        events: &'a DriverEvents,
    ) -> DriverFuture<'a, ()> {
        Box::pin(async move {
            let state = Self::state(handle)?;
            let engine = self
                .engine_for_restore(&handle.task_id, &state.container_id, events)
                .await?;
            lock(&self.tracked).insert(state.container_id.clone());
            // Gone containers answer ShimGone: the client then reclaims the run.
            let running = self
                .finished(engine, &handle.task_id, &state.container_id)
                .await?
                .is_none();
            if running {
                self.follow_logs(engine, &state);
            }
            if let Some(image_id) = &state.image_id {
                self.image_users.hold(image_id, &handle.task_id);
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

    fn network(
        &self,
        handle: &TaskHandle,
    ) -> Option<drover_structs::service_registration::DriverNetwork> {
        Self::state(handle).ok()?.network
    }

    fn destroy<'a>(&'a self, handle: &'a TaskHandle) -> DriverFuture<'a, ()> {
        Box::pin(async move {
            if let Some(container) = container_of(handle) {
                let engine = self.engine_for(&handle.task_id).await?;
                // gc { container = false } keeps the container (its name is taken again,
                // replacing it, by the task's next start).
                if self.config.gc.container {
                    self.remove_container(engine, &handle.task_id, &container)
                        .await?;
                }
                lock(&self.followers).remove(&container);
                lock(&self.tracked).remove(&container);
                if let Ok(ContainerState {
                    image_id: Some(image_id),
                    ..
                }) = Self::state(handle)
                {
                    self.release_image(engine, &image_id, &handle.task_id);
                }
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
    /// A task is done with its image: once no task uses it, it is removed after the gc's
    /// `image_delay` (unless taken again meanwhile, or `gc { image = false }`).
    fn release_image(&self, engine: &Docker, image_id: &str, task_id: &str) {
        let Some(generation) = self.image_users.release(image_id, task_id) else {
            return;
        };
        if !self.config.gc.image {
            return;
        }
        let users = Arc::clone(&self.image_users);
        let engine = engine.clone();
        let image_id = image_id.to_string();
        let delay = self.config.gc.image_delay;
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            if !users.still_unused(&image_id, generation) {
                return;
            }
            let options = bollard::query_parameters::RemoveImageOptions {
                force: false,
                noprune: false,
                ..bollard::query_parameters::RemoveImageOptions::default()
            };
            match engine.remove_image(&image_id, Some(options), None).await {
                Ok(_) => tracing::debug!(image = %image_id, "removed an image no task uses"),
                // In use by a container not of a task (or kept by gc { container = false }).
                Err(error) if status_code(&error) == Some(409) => {
                    tracing::debug!(image = %image_id, %error, "image still in use; kept");
                }
                Err(error) if status_code(&error) == Some(404) => {}
                Err(error) => tracing::warn!(image = %image_id, %error, "removing an unused image"),
            }
        });
    }

    /// Tells the driver the node it runs for: its containers are labelled with it, and only
    /// containers of this node are ever taken for orphans or dangling.
    pub fn set_node(&self, node_id: &str, node_name: &str) {
        let _ = self.node_id.set(node_id.to_string());
        let _ = self.node_name.set(node_name.to_string());
    }

    /// Runs the client's `gc { dangling_containers }` in the background for as long as the
    /// driver lives (nothing when disabled): first after [`gc::DanglingConfig::first_delay`],
    /// then every `period`, while the engine answers.
    pub fn spawn_dangling_reconciler(self: &Arc<Self>) {
        let config = self.config.gc.dangling.clone();
        if !config.enabled {
            tracing::debug!("skipping dangling containers handling; is disabled");
            return;
        }
        let driver = Arc::downgrade(self);
        tokio::spawn(async move {
            tokio::time::sleep(config.first_delay()).await;
            loop {
                let Some(live) = driver.upgrade() else {
                    return;
                };
                if let Err(error) = live.remove_dangling(&config).await {
                    tracing::warn!(%error, "failed to remove dangling containers");
                }
                drop(live);
                tokio::time::sleep(config.period).await;
            }
        });
    }

    /// One round of the dangling-container reconciler: returns the containers found.
    async fn remove_dangling(
        &self,
        config: &gc::DanglingConfig,
    ) -> Result<Vec<String>, DockerError> {
        let Some(node_id) = self.node_id.get() else {
            return Ok(Vec::new());
        };
        let Ok(engine) = self.reachable_engine().await else {
            return Ok(Vec::new());
        };
        let options = bollard::query_parameters::ListContainersOptions {
            all: false,
            filters: Some(HashMap::from([(
                "label".to_string(),
                vec![format!("{}={node_id}", task::NODE_ID_LABEL)],
            )])),
            ..bollard::query_parameters::ListContainersOptions::default()
        };
        let cutoff = std::time::SystemTime::now()
            .checked_sub(config.creation_grace)
            .and_then(|at| at.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |since| {
                i64::try_from(since.as_secs()).unwrap_or(i64::MAX)
            });
        let listed: Vec<gc::Listed> = engine
            .list_containers(Some(options))
            .await
            .map_err(|source| DockerError::Engine {
                context: "listing containers".into(),
                source,
            })?
            .into_iter()
            // A pause container belongs to its allocation's network, not to a task.
            .filter(|container| {
                !container
                    .names
                    .iter()
                    .flatten()
                    .any(|name| network::is_pause_container_name(name))
            })
            .filter_map(|container| {
                Some(gc::Listed {
                    id: container.id?,
                    created: container.created.unwrap_or(0),
                    labels: container.labels.unwrap_or_default(),
                })
            })
            .collect();
        let tracked = lock(&self.tracked).clone();
        let untracked = gc::dangling(&listed, &tracked, node_id, cutoff);
        if untracked.is_empty() {
            return Ok(untracked);
        }
        if config.dry_run {
            tracing::info!(container_ids = ?untracked, "detected untracked containers");
            return Ok(untracked);
        }
        for id in &untracked {
            match self.remove_container(engine, id, id).await {
                Ok(()) => tracing::info!(container_id = %id, "removed untracked container"),
                Err(error) => {
                    tracing::warn!(container_id = %id, %error, "failed to remove untracked container");
                }
            }
        }
        Ok(untracked)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_go_prints_them() {
        assert_eq!(go_duration(Duration::from_secs(300)), "5m0s");
        assert_eq!(go_duration(Duration::from_secs(30)), "30s");
        assert_eq!(go_duration(Duration::from_secs(3723)), "1h2m3s");
    }

    #[test]
    fn engine_errors_read_as_nomad_words_them() {
        let answer = EngineError::DockerResponseServerError {
            status_code: 500,
            message: "Head \"http://127.0.0.1:5000/v2/x/manifests/1\": no basic auth credentials"
                .into(),
        };
        assert_eq!(
            pull_error_text(&answer),
            "API error (500): Head \"http://127.0.0.1:5000/v2/x/manifests/1\": no basic auth credentials"
        );
        let stream = EngineError::DockerStreamError {
            error: "unauthorized: authentication required".into(),
        };
        assert_eq!(
            pull_error_text(&stream),
            "unauthorized: authentication required"
        );
        assert!(image_not_found(
            "API error (404): Error: image drover/x:1 not found"
        ));
        assert!(!image_not_found("API error (500): unauthorized"));
    }
}
