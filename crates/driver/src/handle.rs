//! What a driver is asked to start ([`TaskLaunch`]) and what the client persists about a running
//! task ([`TaskHandle`], [`ShimHandle`]).
//!
//! A handle is a persisted record: it carries a version and its fields are only ever added, so an
//! agent can recover tasks started by an older one. Not for: talking to the shim.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::DriverError;

/// Version of the [`TaskHandle`] record.
pub const TASK_HANDLE_VERSION: u32 = 1;

/// Environment variable naming the `drover-shim` binary, overriding the default (next to the
/// agent's own executable).
pub const SHIM_PATH_ENV: &str = "DROVER_SHIM_PATH";

/// Everything a driver needs to start one run of a task.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskLaunch {
    /// Unique id of this run, echoed by the shim on re-attach (e.g. `<alloc_id>/<task>`).
    pub task_id: String,
    pub alloc_id: String,
    pub task_name: String,
    pub command: String,
    pub args: Vec<String>,
    /// The complete environment of the task.
    pub env: Vec<(String, String)>,
    pub cwd: Option<PathBuf>,
    pub user: Option<String>,
    /// A directory for the shim's socket and exit status, in the client's state dir (never in the
    /// task dir). Must not hold an earlier run's state; removed on destroy.
    pub state_dir: PathBuf,
    pub logs: LogSettings,
    pub resources: ResourceLimits,
    /// Default signal of [`crate::Driver::kill`]; Nomad's default is `SIGINT`.
    pub kill_signal: Option<String>,
    /// Driver-specific settings (the `config` block of the task).
    pub driver_config: serde_json::Value,
    /// `<alloc>/<task>`: the task root of isolating drivers (`exec`).
    #[serde(default)]
    pub task_dir: Option<PathBuf>,
    /// `<alloc>/alloc`, seen at `/alloc` by isolated tasks.
    #[serde(default)]
    pub shared_alloc_dir: Option<PathBuf>,
    /// Host name of an isolated task (the group network's `hostname`); `None` keeps the host's.
    #[serde(default)]
    pub hostname: Option<String>,
    /// Host directories bound into the task (its group's host volumes, per `volume_mount`).
    /// Only drivers that isolate the filesystem take them; the client refuses them for others.
    #[serde(default)]
    pub mounts: Vec<MountConfig>,
    /// The group's network namespace (bridge, none or CNI mode), joined before exec; `None`
    /// runs the task in the host's network (or a new empty one with `network_mode = "none"`).
    #[serde(default)]
    pub network_namespace: Option<PathBuf>,
    /// What owns the group's namespace when a driver made it ([`crate::NetworkSandbox`]):
    /// the docker driver's tasks join the pause container by this ID.
    #[serde(default)]
    pub network_sandbox: Option<String>,
    /// The group's `resolv.conf` (its `dns` block), seen at `/etc/resolv.conf` by drivers that
    /// isolate the filesystem.
    #[serde(default)]
    pub resolv_conf: Option<PathBuf>,
    /// The task's own network (Nomad's deprecated task-level `resources { network }`), as the
    /// scheduler assigned it; `None` when the task asks for none.
    #[serde(default)]
    pub task_network: Option<TaskNetwork>,
}

/// A task's own network: the host address and ports assigned to it. The docker driver
/// publishes each port (to the container port `port_map` names); the others need nothing, the
/// task runs in the host's network.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskNetwork {
    /// The host address the ports are on.
    pub ip: String,
    /// Static then dynamic ports: label and host port.
    pub ports: Vec<(String, i64)>,
}

/// One host path bound into a task (Nomad's `drivers.MountConfig`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MountConfig {
    /// The directory on the host.
    pub host_path: PathBuf,
    /// Where the task sees it (absolute inside the task's root).
    pub task_path: PathBuf,
    pub read_only: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogSettings {
    /// The alloc's log dir; files are `<dir>/<task>.stdout.<n>` and `.stderr.<n>`.
    pub dir: PathBuf,
    pub max_files: u32,
    pub max_file_size_bytes: u64,
}

impl Default for LogSettings {
    /// Nomad's defaults: 10 files of 10 MB.
    fn default() -> Self {
        Self {
            dir: PathBuf::new(),
            max_files: 10,
            max_file_size_bytes: 10 * 1024 * 1024,
        }
    }
}

/// Cgroup limits of the task. Nomad's `memory` is the hard limit, unless `memory_max` is set,
/// in which case `memory` becomes the soft limit (oversubscription).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceLimits {
    pub memory_bytes: Option<u64>,
    pub memory_max_bytes: Option<u64>,
    /// Nomad's `cpu` (MHz), used as relative cpu shares.
    pub cpu_shares: Option<u64>,
    /// The most processes and threads the task may have (`pids.max`); the task config's
    /// `pids_limit` takes precedence.
    pub pids_max: Option<u64>,
    /// Cpus reserved with `cores`, in the kernel's list format.
    pub cpuset_cpus: Option<String>,
}

impl ResourceLimits {
    /// `(soft, hard)` memory limits in bytes.
    pub fn memory_limits(&self) -> (Option<u64>, Option<u64>) {
        match (self.memory_bytes, self.memory_max_bytes) {
            (memory, Some(max)) => (memory, Some(max)),
            (memory, None) => (None, memory),
        }
    }
}

/// A task's cgroup, as the shim created it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CgroupRef {
    pub root: PathBuf,
    pub name: String,
}

/// What identifies a running shim; persisted by the client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShimHandle {
    pub shim_pid: i32,
    /// Field 22 of `/proc/<shim_pid>/stat`.
    pub shim_start_time: u64,
    pub task_pid: i32,
    pub task_start_time: u64,
    pub socket_path: PathBuf,
    pub state_dir: PathBuf,
    pub cgroup: Option<CgroupRef>,
}

/// The persisted record of one run of a task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskHandle {
    pub version: u32,
    pub driver: String,
    pub task_id: String,
    pub kill_signal: Option<String>,
    /// Set by drivers that run tasks under a shim.
    pub shim: Option<ShimHandle>,
    /// Driver-private state (the mock driver keeps its config here).
    #[serde(default)]
    pub driver_state: serde_json::Value,
}

/// Key of a [`TaskHandle::driver_state`] listing the environment variables the driver took out
/// of the task's environment (raw_exec's `denied_envvars`).
pub const REMOVED_ENV_KEY: &str = "RemovedEnv";

impl TaskHandle {
    /// The names of the environment variables the driver took out of the task's environment:
    /// a command run inside the task (`alloc exec`) goes without them too.
    pub fn removed_env(&self) -> Vec<String> {
        self.driver_state
            .get(REMOVED_ENV_KEY)
            .and_then(serde_json::Value::as_array)
            .map(|names| {
                names
                    .iter()
                    .filter_map(|name| name.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }

    pub(crate) fn shim(&self) -> Result<&ShimHandle, DriverError> {
        self.shim.as_ref().ok_or_else(|| DriverError::BadHandle {
            task_id: self.task_id.clone(),
            what: "shim",
        })
    }
}

/// Finds the `drover-shim` binary: `explicit` if given, else `$DROVER_SHIM_PATH`, else
/// `drover-shim` next to the running executable.
pub fn locate_shim_binary(explicit: Option<&Path>) -> Result<PathBuf, DriverError> {
    let candidate = match explicit {
        Some(path) => path.to_path_buf(),
        None => match std::env::var_os(SHIM_PATH_ENV) {
            Some(path) if !path.is_empty() => PathBuf::from(path),
            _ => {
                let exe = std::env::current_exe().map_err(|_| DriverError::ShimBinaryMissing {
                    path: PathBuf::from("drover-shim"),
                })?;
                exe.with_file_name("drover-shim")
            }
        },
    };
    if candidate.is_file() {
        Ok(candidate)
    } else {
        Err(DriverError::ShimBinaryMissing { path: candidate })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn memory_max_turns_memory_into_the_soft_limit() {
        let plain = ResourceLimits {
            memory_bytes: Some(100),
            ..ResourceLimits::default()
        };
        assert_eq!(plain.memory_limits(), (None, Some(100)));
        let oversubscribed = ResourceLimits {
            memory_bytes: Some(100),
            memory_max_bytes: Some(300),
            ..ResourceLimits::default()
        };
        assert_eq!(oversubscribed.memory_limits(), (Some(100), Some(300)));
    }

    #[test]
    fn an_explicit_shim_path_must_exist() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("drover-shim");
        assert!(matches!(
            locate_shim_binary(Some(&missing)),
            Err(DriverError::ShimBinaryMissing { path }) if path == missing
        ));
        std::fs::write(&missing, b"").unwrap();
        assert_eq!(locate_shim_binary(Some(&missing)).unwrap(), missing);
    }

    #[test]
    fn a_handle_round_trips_through_json() {
        let handle = TaskHandle {
            version: TASK_HANDLE_VERSION,
            driver: "raw_exec".into(),
            task_id: "a1/web".into(),
            kill_signal: Some("SIGTERM".into()),
            shim: Some(ShimHandle {
                shim_pid: 10,
                shim_start_time: 20,
                task_pid: 11,
                task_start_time: 21,
                socket_path: "/s/shim.sock".into(),
                state_dir: "/s".into(),
                cgroup: Some(CgroupRef {
                    root: "/sys/fs/cgroup".into(),
                    name: "drover/a1.web".into(),
                }),
            }),
            driver_state: serde_json::Value::Null,
        };
        let text = serde_json::to_string(&handle).unwrap();
        assert_eq!(serde_json::from_str::<TaskHandle>(&text).unwrap(), handle);
    }
}
