//! The shim engine under the `raw_exec` and `exec` drivers: each task runs under its own
//! `drover-shim` and in its own cgroup, so that the whole process tree is signalled, killed and
//! measured (memory stats for raw_exec, which Nomad lacks). What differs between the two
//! drivers — their name, the task config they accept, the isolation and user of their tasks —
//! is a [`LaunchPolicy`] each of them gives the engine.
//!
//! Cpus: a task with reserved cores (`ResourceLimits::cpuset_cpus`) gets its cgroup under
//! `<parent>/reserved/`, on exactly those cpus; every other task runs on the shared cpus, the
//! parent's minus all reserved ones, re-balanced whenever a task starts, is recovered or goes
//! (Nomad's shared and reserved cpusets).
//!
//! Not for: isolation or task config schemas (the drivers' policies and `task_config`), or
//! deciding kill timeouts.

use std::collections::{BTreeMap, HashMap};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use drover_isolate::TaskCgroup;
use drover_shim::proto::{
    CgroupSpec, EXIT_STATUS_FILE, ExitStatus, IsolationSpec, LaunchSpec, LogSpec, PROTOCOL_VERSION,
    SOCKET_FILE, SPEC_FILE, TaskStats, TaskStatus, process_start_time,
};

use crate::handle::TASK_HANDLE_VERSION;
use crate::shim_client::{ShimClient, spawn_shim, write_launch_spec};
use crate::stats::{CPU_WINDOW, CpuWindowPlan, plan_cpu_window, usage_from_sample};
use crate::{
    CgroupRef, DEFAULT_KILL_SIGNAL, Driver, DriverError, DriverFuture, ShimHandle, TaskHandle,
    TaskLaunch, TaskResourceUsage, locate_shim_binary, parse_signal,
};

/// How long reclaiming a dead shim's cgroup may take.
const RECLAIM_KILL_TIMEOUT: Duration = Duration::from_secs(10);

/// One re-balance of the shared cpus at a time in this process (the raw_exec and exec drivers
/// share the cgroup parent): each reads the reservations as they are and writes the rest, so
/// the last one after any change leaves every shared task right. Holds, per cgroup parent, the
/// shared cpus last written to every task cgroup: walking every task cgroup costs a few reads
/// per task, so it is done only when the shared cpus changed since (a reservation came or
/// went) or a task started on cpus that are no longer the shared ones — not on every start and
/// end of a task without cores, which would make starting N tasks cost N² reads.
static CPU_REBALANCE: Mutex<BTreeMap<String, Vec<u16>>> = Mutex::new(BTreeMap::new());

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawExecConfig {
    /// The `drover-shim` binary; found by [`locate_shim_binary`] when `None`.
    pub shim_binary: Option<PathBuf>,
    /// Where cgroupfs is mounted.
    pub cgroup_root: PathBuf,
    /// Parent of every task cgroup (`<parent>/<alloc_id>.<task>`, or
    /// `<parent>/reserved/<alloc_id>.<task>` for a task with reserved cores).
    pub cgroup_parent: String,
    /// Run tasks without a cgroup (signals then go to the task's process group, and there are
    /// no stats). Also what happens when no cgroup filesystem is found.
    pub disable_cgroups: bool,
    /// `plugin "raw_exec" { config { denied_envvars = [...] } }`: names (or `*` globs) of
    /// environment variables removed from every raw_exec task's environment. Only the
    /// `raw_exec` policy reads it.
    pub denied_envvars: Vec<String>,
}

impl Default for RawExecConfig {
    fn default() -> Self {
        Self {
            shim_binary: None,
            cgroup_root: PathBuf::from("/sys/fs/cgroup"),
            cgroup_parent: "drover".to_string(),
            disable_cgroups: false,
            denied_envvars: Vec::new(),
        }
    }
}

/// What makes a driver out of the engine: its name, the task config it accepts, and the
/// isolation and user of its tasks.
pub trait LaunchPolicy: Send + Sync + 'static {
    /// The driver's name in job specs.
    fn driver_name(&self) -> &'static str;

    /// Checks the task config and answers the isolation the shim applies to the task (`None`:
    /// the command runs as given).
    fn isolation(
        &self,
        launch: &TaskLaunch,
        engine: &ShimEngine,
    ) -> Result<Option<IsolationSpec>, DriverError>;

    /// The user the task runs as (`None`: the agent's).
    fn user(&self, launch: &TaskLaunch) -> Option<String>;

    /// The environment the task starts with, and the names the policy took out of the
    /// launch's (recorded in the handle so `alloc exec` leaves them out too). Everything
    /// unless the policy says otherwise.
    fn environment(
        &self,
        launch: &TaskLaunch,
        _engine: &ShimEngine,
    ) -> Result<TaskEnvironment, DriverError> {
        Ok(TaskEnvironment {
            env: launch.env.clone(),
            removed: Vec::new(),
        })
    }
}

/// The environment a task starts with, and the names a policy took out of its launch's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskEnvironment {
    pub env: Vec<(String, String)>,
    pub removed: Vec<String>,
}

/// A driver made of the shim engine and a [`LaunchPolicy`].
pub struct ShimEngine {
    config: RawExecConfig,
    policy: Box<dyn LaunchPolicy>,
    /// The previous stats sample per task id, for cpu percentages.
    previous_samples: Mutex<HashMap<String, TaskStats>>,
}

/// Keeps a cgroup path component to characters that are safe everywhere.
fn cgroup_component(value: &str) -> String {
    value
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

impl ShimEngine {
    /// The engine's settings.
    pub fn config(&self) -> &RawExecConfig {
        &self.config
    }

    pub fn new(config: RawExecConfig, policy: impl LaunchPolicy) -> Self {
        Self {
            config,
            policy: Box::new(policy),
            previous_samples: Mutex::new(HashMap::new()),
        }
    }

    /// Whether tasks get a cgroup here (cgroups are on and a cgroup filesystem is found).
    pub fn cgroups_available(&self) -> bool {
        !self.config.disable_cgroups
            && drover_isolate::detect_mode(&self.config.cgroup_root).is_ok()
    }

    fn client(handle: &TaskHandle) -> Result<ShimClient, DriverError> {
        Ok(ShimClient::new(
            handle.shim()?.socket_path.clone(),
            handle.task_id.clone(),
        ))
    }

    /// The task's cgroup and its limits; `pids_limit` in the task config takes precedence
    /// over the client's `pids_max` and, since only a cgroup enforces it, fails the start where
    /// cgroups are off.
    fn cgroup_spec(&self, launch: &TaskLaunch) -> Result<Option<CgroupSpec>, DriverError> {
        let pids_max = crate::task_config::pids_limit(&launch.driver_config)?;
        if self.config.disable_cgroups
            || drover_isolate::detect_mode(&self.config.cgroup_root).is_err()
        {
            if pids_max.is_some() {
                return Err(DriverError::InvalidConfig(
                    "pids_limit needs cgroups, which this client does not use".to_string(),
                ));
            }
            return Ok(None);
        }
        let (memory_soft_bytes, memory_hard_bytes) = launch.resources.memory_limits();
        let reserved = launch.resources.cpuset_cpus.is_some();
        // A shared task starts on the shared cpus as they are now (the re-balance after the
        // start catches up with reservations made meanwhile).
        let cpuset_cpus = match &launch.resources.cpuset_cpus {
            Some(cpus) => Some(cpus.clone()),
            None => {
                drover_isolate::shared_cpus(&self.config.cgroup_root, &self.config.cgroup_parent)
                    .ok()
                    .flatten()
                    .map(|cpus| drover_isolate::format_cpu_list(&cpus))
            }
        };
        Ok(Some(CgroupSpec {
            root: self.config.cgroup_root.clone(),
            name: format!(
                "{}/{}{}.{}",
                self.config.cgroup_parent,
                if reserved {
                    format!("{}/", drover_isolate::RESERVED_CPUS_DIR)
                } else {
                    String::new()
                },
                cgroup_component(&launch.alloc_id),
                cgroup_component(&launch.task_name)
            ),
            memory_soft_bytes,
            memory_hard_bytes,
            cpu_shares: launch.resources.cpu_shares,
            pids_max: pids_max.or(launch.resources.pids_max),
            cpuset_cpus,
        }))
    }

    /// Re-balances the shared cpus after a reservation may have come or gone. `started_on` is
    /// the cpu list a task without cores was just started on (it may have been worked out
    /// before a concurrent reservation changed the shared cpus). A failure only leaves shared
    /// tasks on more or fewer cpus than they should have, so it is logged.
    async fn rebalance_shared_cpus(&self, started_on: Option<String>) {
        if !self.cgroups_available() {
            return;
        }
        let root = self.config.cgroup_root.clone();
        let parent = self.config.cgroup_parent.clone();
        let work = move || {
            let mut applied = CPU_REBALANCE
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let key = format!("{}:{parent}", root.display());
            let Some(shared) = drover_isolate::shared_cpus(&root, &parent)? else {
                return Ok(());
            };
            let unchanged = applied.get(&key) == Some(&shared);
            let started_right = started_on
                .as_deref()
                .is_none_or(|cpus| cpus == drover_isolate::format_cpu_list(&shared));
            if unchanged && started_right {
                return Ok(());
            }
            if let Some(written) = drover_isolate::rebalance_shared_cpus(&root, &parent)? {
                applied.insert(key, written);
            }
            Ok::<(), drover_isolate::CgroupError>(())
        };
        match tokio::task::spawn_blocking(work).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => tracing::warn!(%error, "re-balancing the shared cpus"),
            Err(error) => tracing::warn!(%error, "re-balancing the shared cpus"),
        }
    }

    pub(crate) async fn start_task(&self, launch: &TaskLaunch) -> Result<TaskHandle, DriverError> {
        let isolation = self.policy.isolation(launch, self)?;
        let TaskEnvironment {
            env,
            removed: removed_env,
        } = self.policy.environment(launch, self)?;
        if launch.command.is_empty() {
            return Err(DriverError::InvalidConfig("command is empty".to_string()));
        }
        let cgroup = self.cgroup_spec(launch)?;
        let shim_binary = locate_shim_binary(self.config.shim_binary.as_deref())?;
        let state_dir = launch.state_dir.clone();
        // mkdir blocks on the file system: off the async workers.
        let creating = state_dir.clone();
        tokio::task::spawn_blocking(move || {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&creating)
        })
        .await
        .map_err(|join_error| std::io::Error::other(join_error.to_string()))
        .and_then(|created| created)
        .map_err(|source| DriverError::StateDir {
            path: state_dir.clone(),
            source,
        })?;
        let spec = LaunchSpec {
            version: PROTOCOL_VERSION,
            task_id: launch.task_id.clone(),
            command: launch.command.clone(),
            args: launch.args.clone(),
            env,
            // Isolated tasks start in their root; `cwd` is then a path inside it.
            cwd: match &isolation {
                Some(_) => Some(PathBuf::from("/")),
                None => launch.cwd.clone(),
            },
            user: self.policy.user(launch),
            state_dir: state_dir.clone(),
            logs: LogSpec {
                dir: launch.logs.dir.clone(),
                task_name: launch.task_name.clone(),
                max_files: launch.logs.max_files,
                max_file_size_bytes: launch.logs.max_file_size_bytes,
            },
            cgroup: cgroup.clone(),
            isolation,
            network_namespace: launch.network_namespace.clone(),
        };
        let spec_path = state_dir.join(SPEC_FILE);
        write_launch_spec(&spec_path, &spec).await?;
        let identity = spawn_shim(&shim_binary, &spec_path, &launch.task_id).await?;
        let started_on = cgroup
            .as_ref()
            .filter(|_| launch.resources.cpuset_cpus.is_none())
            .and_then(|cgroup| cgroup.cpuset_cpus.clone());
        self.rebalance_shared_cpus(started_on).await;
        Ok(TaskHandle {
            version: TASK_HANDLE_VERSION,
            driver: self.name().to_string(),
            task_id: launch.task_id.clone(),
            kill_signal: launch.kill_signal.clone(),
            shim: Some(ShimHandle {
                shim_pid: identity.shim_pid,
                shim_start_time: identity.shim_start_time,
                task_pid: identity.task_pid,
                task_start_time: identity.task_start_time,
                socket_path: state_dir.join(SOCKET_FILE),
                state_dir,
                cgroup: cgroup.map(|spec| CgroupRef {
                    root: spec.root,
                    name: spec.name,
                }),
            }),
            driver_state: if removed_env.is_empty() {
                serde_json::Value::Null
            } else {
                serde_json::json!({ crate::handle::REMOVED_ENV_KEY: removed_env })
            },
        })
    }

    async fn recover_task(&self, handle: &TaskHandle) -> Result<(), DriverError> {
        let shim = handle.shim()?;
        let mismatch = |detail: String| DriverError::IdentityMismatch {
            task_id: handle.task_id.clone(),
            detail,
        };
        match process_start_time(shim.shim_pid) {
            None => {
                return Err(DriverError::ShimGone {
                    task_id: handle.task_id.clone(),
                });
            }
            Some(start_time) if start_time != shim.shim_start_time => {
                return Err(mismatch(format!(
                    "pid {} started at tick {start_time}, the shim at tick {}",
                    shim.shim_pid, shim.shim_start_time
                )));
            }
            Some(_) => {}
        }
        let identity = Self::client(handle)?.hello().await?;
        let expected = (
            handle.task_id.as_str(),
            shim.shim_pid,
            shim.shim_start_time,
            shim.task_pid,
            shim.task_start_time,
        );
        let actual = (
            identity.task_id.as_str(),
            identity.shim_pid,
            identity.shim_start_time,
            identity.task_pid,
            identity.task_start_time,
        );
        if expected != actual {
            return Err(mismatch(format!(
                "the shim says (task, shim pid, shim start, task pid, task start) = {actual:?}, the handle {expected:?}"
            )));
        }
        self.rebalance_shared_cpus(None).await;
        Ok(())
    }

    /// The task's usage, its cpu figures over a recent span of at least one window (see
    /// [`crate::stats`]): the kept sample when it fits, else a wait on tokio time and a second
    /// sample.
    async fn stats_of(&self, handle: &TaskHandle) -> Result<TaskResourceUsage, DriverError> {
        let client = Self::client(handle)?;
        let current = client.stats().await?;
        let kept = self.kept_sample(&handle.task_id);
        let (baseline, end) = match plan_cpu_window(&current, kept.as_ref()) {
            CpuWindowPlan::MeasureFromKept => (kept, current),
            CpuWindowPlan::WaitThenMeasureFromKept(wait) => {
                tokio::time::sleep(wait).await;
                (kept, client.stats().await?)
            }
            CpuWindowPlan::WaitThenMeasureFromCurrent => {
                tokio::time::sleep(CPU_WINDOW).await;
                (Some(current), client.stats().await?)
            }
        };
        let usage = usage_from_sample(&end, baseline.as_ref());
        self.previous_samples
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(handle.task_id.clone(), end);
        Ok(usage)
    }

    fn kept_sample(&self, task_id: &str) -> Option<TaskStats> {
        self.previous_samples
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(task_id)
            .cloned()
    }

    async fn destroy_task(&self, handle: &TaskHandle) -> Result<(), DriverError> {
        self.previous_samples
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .remove(&handle.task_id);
        let result = match Self::client(handle)?.cleanup().await {
            Ok(()) => Ok(()),
            Err(DriverError::ShimGone { .. }) => self.reclaim_task(handle).await.map(|_| ()),
            Err(error) => Err(error),
        };
        self.rebalance_shared_cpus(None).await;
        result
    }

    async fn reclaim_task(&self, handle: &TaskHandle) -> Result<Option<ExitStatus>, DriverError> {
        let shim = handle.shim()?.clone();
        let task_id = handle.task_id.clone();
        let work = move || -> Result<Option<ExitStatus>, DriverError> {
            if let Some(cgroup_ref) = &shim.cgroup {
                let cgroup_error = |source| DriverError::Cgroup {
                    task_id: task_id.clone(),
                    source,
                };
                let cgroup =
                    TaskCgroup::open(&cgroup_ref.root, &cgroup_ref.name).map_err(cgroup_error)?;
                cgroup
                    .kill_all(RECLAIM_KILL_TIMEOUT)
                    .map_err(cgroup_error)?;
                cgroup.remove().map_err(cgroup_error)?;
            }
            let exit = read_exit_status(&shim.state_dir);
            match std::fs::remove_dir_all(&shim.state_dir) {
                Ok(()) => {}
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => {
                    return Err(DriverError::StateDir {
                        path: shim.state_dir.clone(),
                        source,
                    });
                }
            }
            Ok(exit)
        };
        tokio::task::spawn_blocking(work)
            .await
            .map_err(|error| DriverError::Protocol {
                socket: PathBuf::new(),
                detail: format!("reclaim task panicked: {error}"),
            })?
    }
}

/// Whether the shim of `handle` still runs: its pid alive, started when the handle says.
fn shim_runs(handle: &TaskHandle) -> bool {
    handle
        .shim
        .as_ref()
        .is_some_and(|shim| process_start_time(shim.shim_pid) == Some(shim.shim_start_time))
}

/// The exit status a shim left in its state dir, if it recorded one.
pub fn read_exit_status(state_dir: &Path) -> Option<ExitStatus> {
    let bytes = std::fs::read(state_dir.join(EXIT_STATUS_FILE)).ok()?;
    serde_json::from_slice(&bytes).ok()
}

impl Driver for ShimEngine {
    fn name(&self) -> &'static str {
        self.policy.driver_name()
    }

    fn start<'a>(&'a self, launch: &'a TaskLaunch) -> DriverFuture<'a, TaskHandle> {
        Box::pin(self.start_task(launch))
    }

    fn recover<'a>(&'a self, handle: &'a TaskHandle) -> DriverFuture<'a, ()> {
        Box::pin(self.recover_task(handle))
    }

    fn wait<'a>(&'a self, handle: &'a TaskHandle) -> DriverFuture<'a, ExitStatus> {
        Box::pin(async move { Self::client(handle)?.wait().await })
    }

    fn exit_status<'a>(&'a self, handle: &'a TaskHandle) -> DriverFuture<'a, Option<ExitStatus>> {
        Box::pin(async move {
            Ok(match Self::client(handle)?.status().await? {
                TaskStatus::Running => None,
                TaskStatus::Exited(exit) => Some(exit),
            })
        })
    }

    fn signal<'a>(&'a self, handle: &'a TaskHandle, signal: &'a str) -> DriverFuture<'a, ()> {
        Box::pin(async move {
            let signal = parse_signal(signal)?;
            Self::client(handle)?.signal(signal as i32).await
        })
    }

    fn kill<'a>(
        &'a self,
        handle: &'a TaskHandle,
        signal: Option<&'a str>,
        timeout: Duration,
    ) -> DriverFuture<'a, ExitStatus> {
        Box::pin(async move {
            let name = signal
                .or(handle.kill_signal.as_deref())
                .unwrap_or(DEFAULT_KILL_SIGNAL);
            let signal = parse_signal(name)?;
            let grace_ns = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
            match Self::client(handle)?.kill(signal as i32, grace_ns).await {
                // The shim died (killed with its agent, or by the kernel): nothing answers for
                // the task but its cgroup. Its processes are killed there; the exit the shim
                // recorded, if it did, is the task's. A kill retried against the gone shim held
                // the allocation (and the replacement waiting for it) for minutes. Its socket
                // may still refuse or reset a connection: the shim's own process says.
                Err(error)
                    if matches!(error, DriverError::ShimGone { .. }) || !shim_runs(handle) =>
                {
                    let recorded = self.reclaim_task(handle).await?;
                    self.rebalance_shared_cpus(None).await;
                    // Killed by the cgroup's SIGKILL, whatever signal was asked for.
                    let killed = nix::sys::signal::Signal::SIGKILL as i32;
                    Ok(recorded.unwrap_or_else(|| ExitStatus {
                        exit_code: 128 + killed,
                        signal: killed,
                        oom_killed: false,
                        finished_at_unix_ns: std::time::SystemTime::now()
                            .duration_since(std::time::UNIX_EPOCH)
                            .map_or(0, |since| {
                                u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)
                            }),
                    }))
                }
                other => other,
            }
        })
    }

    fn stats<'a>(&'a self, handle: &'a TaskHandle) -> DriverFuture<'a, TaskResourceUsage> {
        Box::pin(self.stats_of(handle))
    }

    fn destroy<'a>(&'a self, handle: &'a TaskHandle) -> DriverFuture<'a, ()> {
        Box::pin(self.destroy_task(handle))
    }

    fn reclaim<'a>(&'a self, handle: &'a TaskHandle) -> DriverFuture<'a, Option<ExitStatus>> {
        Box::pin(async move {
            let reclaimed = self.reclaim_task(handle).await;
            self.rebalance_shared_cpus(None).await;
            reclaimed
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroup_names_keep_only_safe_characters() {
        assert_eq!(cgroup_component("web server/1"), "web_server_1");
        assert_eq!(cgroup_component("a-b_c9"), "a-b_c9");
        assert_eq!(cgroup_component(".."), "__");
    }
}
