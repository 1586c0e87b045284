//! The adapter from `drover-driver`'s drivers (raw_exec and exec under their shim, the mock driver) to the
//! task runner's [`TaskDriver`] seam, and the client's default driver catalog.
//!
//! Mapping: the task's `config.command` / `config.args` become the command line (the whole
//! config is also handed over for drivers that read more, such as the mock driver); the working
//! directory is the task dir, as Nomad's raw_exec; the task's reserved cores become its
//! cgroup's cpuset and the group network's hostname the host name of an isolated task; each run
//! has its own supervisor state dir (chosen by the runner), so a run never trips over the
//! leftovers of the previous one. A run
//! whose handle was never recorded is reclaimed from its state dir: the launch spec the driver
//! left there names the task's cgroup, through which what runs is stopped. On re-attach, a shim that is gone is reclaimed (what is left of the task is killed
//! through its cgroup) and the exit status it recorded is returned; a process that is not the
//! shim the handle names is never touched.
//!
//! **Not** a driver: process handling lives in `drover-driver` and `drover-shim`.

use std::sync::Arc;
use std::time::Duration;

use drover_driver::{Driver, DriverError, ExitStatus, LogSettings, ResourceLimits, TaskHandle};
use serde_json::Value;

use super::driver::{
    DriverFailure, DriverFuture, PersistedTaskHandle, Reattached, StartedTask, StaticDriverCatalog,
    TaskDriver, TaskExit, TaskLaunchSpec,
};

/// A `drover-driver` driver behind the task runner's seam.
#[derive(Clone)]
pub struct DriverAdapter {
    driver: Arc<dyn Driver>,
    /// The `connect_proxy` driver: the command line is the agent's own binary running the
    /// sidecar proxy, whatever the task config says.
    runs_connect_proxy: bool,
}

impl std::fmt::Debug for DriverAdapter {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("DriverAdapter")
            .field("driver", &self.driver.name())
            .finish()
    }
}

fn failure(error: &DriverError) -> DriverFailure {
    let mut message = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    DriverFailure {
        message,
        recoverable: error.is_recoverable(),
    }
}

fn task_exit(status: ExitStatus) -> TaskExit {
    TaskExit {
        exit_code: i64::from(status.exit_code),
        signal: i64::from(status.signal),
        oom_killed: status.oom_killed,
        // Nomad's exit message for a task the kernel's OOM killer stopped.
        message: if status.oom_killed {
            "OOM Killed".to_string()
        } else {
            String::new()
        },
    }
}

fn positive_megabytes(megabytes: i64) -> Option<u64> {
    u64::try_from(megabytes)
        .ok()
        .filter(|value| *value > 0)
        .map(|value| value * 1024 * 1024)
}

impl DriverAdapter {
    pub fn new(driver: Arc<dyn Driver>) -> Self {
        DriverAdapter {
            driver,
            runs_connect_proxy: false,
        }
    }

    /// The `connect_proxy` driver over `driver` (the shim engine without isolation): each
    /// task runs `<agent binary> connect-proxy -config <task dir>/secrets/connect-proxy.json`.
    pub fn connect_proxy(driver: Arc<dyn Driver>) -> Self {
        DriverAdapter {
            driver,
            runs_connect_proxy: true,
        }
    }

    fn launch(&self, spec: &TaskLaunchSpec) -> drover_driver::TaskLaunch {
        let mut launch = Self::launch_of(spec);
        if self.runs_connect_proxy {
            // The agent's binary (the proxy is its hidden `connect-proxy` command); an
            // unreadable path leaves the command empty, which the start refuses by name.
            launch.command = std::env::current_exe()
                .map(|path| path.to_string_lossy().into_owned())
                .unwrap_or_default();
            launch.args = vec![
                "connect-proxy".to_string(),
                "-config".to_string(),
                spec.task_dir
                    .dir
                    .join(crate::taskrunner::hooks::connect::CONFIG_FILE)
                    .to_string_lossy()
                    .into_owned(),
            ];
        }
        launch
    }

    fn launch_of(spec: &TaskLaunchSpec) -> drover_driver::TaskLaunch {
        let run = spec
            .supervisor_state_dir
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default();
        let command = spec
            .config
            .get("command")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let args = spec
            .config
            .get("args")
            .and_then(Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .map(|item| match item {
                        Value::String(text) => text.clone(),
                        other => other.to_string(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        drover_driver::TaskLaunch {
            task_id: format!("{}/{}/{run}", spec.alloc_id, spec.task_name),
            alloc_id: spec.alloc_id.clone(),
            task_name: spec.task_name.clone(),
            command,
            args,
            env: spec
                .env
                .iter()
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect(),
            cwd: Some(spec.task_dir.dir.clone()),
            user: Some(spec.user.clone()).filter(|user| !user.is_empty()),
            state_dir: spec.supervisor_state_dir.clone(),
            logs: LogSettings {
                dir: spec.logs_dir.clone(),
                max_files: spec.log_rotation.max_files,
                max_file_size_bytes: spec.log_rotation.max_file_size_bytes,
            },
            resources: ResourceLimits {
                memory_bytes: positive_megabytes(spec.memory_mb),
                memory_max_bytes: positive_megabytes(spec.memory_max_mb),
                cpu_shares: u64::try_from(spec.cpu_shares)
                    .ok()
                    .filter(|shares| *shares > 0),
                cpuset_cpus: (!spec.reserved_cores.is_empty())
                    .then(|| drover_driver::format_cpu_list(&spec.reserved_cores)),
                ..ResourceLimits::default()
            },
            hostname: spec.hostname.clone(),
            mounts: spec.mounts.clone(),
            task_network: spec.task_network.clone(),
            network_namespace: spec
                .network
                .as_ref()
                .map(|network| network.namespace.clone()),
            resolv_conf: spec
                .network
                .as_ref()
                .and_then(|network| network.resolv_conf.clone()),
            network_sandbox: spec
                .network
                .as_ref()
                .and_then(|network| network.sandbox_id.clone()),
            kill_signal: None,
            driver_config: Value::Object(spec.config.clone()),
            task_dir: Some(spec.task_dir.dir.clone()),
            shared_alloc_dir: Some(spec.task_dir.shared_alloc_dir.clone()),
        }
    }

    fn decode(handle: &PersistedTaskHandle) -> Result<TaskHandle, DriverFailure> {
        serde_json::from_value(handle.handle.clone()).map_err(|error| {
            DriverFailure::unrecoverable(format!("unreadable task handle: {error}"))
        })
    }
}

impl TaskDriver for DriverAdapter {
    fn driver_network(
        &self,
        handle: &PersistedTaskHandle,
    ) -> Option<drover_structs::service_registration::DriverNetwork> {
        let decoded = Self::decode(handle).ok()?;
        self.driver.network(&decoded)
    }

    fn start(&self, spec: TaskLaunchSpec) -> DriverFuture<'_, Result<StartedTask, DriverFailure>> {
        Box::pin(async move {
            let launch = self.launch(&spec);
            let handle = self
                .driver
                .start_reporting(&launch, &spec.events)
                .await
                .map_err(|error| failure(&error))?;
            let pid = handle
                .shim
                .as_ref()
                .and_then(|shim| u32::try_from(shim.task_pid).ok());
            let value = serde_json::to_value(&handle).map_err(|error| {
                DriverFailure::recoverable(format!("task handle not serializable: {error}"))
            })?;
            Ok(StartedTask {
                handle: PersistedTaskHandle {
                    driver_name: spec.driver_name.clone(),
                    handle: value,
                },
                pid,
            })
        })
    }

    fn reattach<'a>(
        &'a self,
        handle: &'a PersistedTaskHandle,
    ) -> DriverFuture<'a, Result<Reattached, DriverFailure>> {
        Box::pin(async move {
            self.reattach_reporting(handle, &drover_driver::DriverEvents::default())
                .await
        })
    }

    fn reattach_reporting<'a>(
        &'a self,
        handle: &'a PersistedTaskHandle,
        events: &'a drover_driver::DriverEvents,
    ) -> DriverFuture<'a, Result<Reattached, DriverFailure>> {
        Box::pin(async move {
            let decoded = Self::decode(handle)?;
            match self.driver.recover_reporting(&decoded, events).await {
                Ok(()) => Ok(Reattached::Attached(StartedTask {
                    handle: handle.clone(),
                    pid: decoded
                        .shim
                        .as_ref()
                        .and_then(|shim| u32::try_from(shim.task_pid).ok()),
                })),
                Err(DriverError::ShimGone { .. }) => {
                    let reclaimed = self
                        .driver
                        .reclaim(&decoded)
                        .await
                        .map_err(|error| failure(&error))?;
                    let explanation = match reclaimed {
                        Some(_) => "the task's supervisor was gone; its recorded exit status was collected and what remained of the task was stopped".to_string(),
                        None => "the task's supervisor was gone without recording an exit status; what remained of the task was stopped".to_string(),
                    };
                    Ok(Reattached::Gone {
                        exit: reclaimed.map(task_exit),
                        explanation,
                    })
                }
                // Not our shim (pid reuse) or unreachable: never touch what cannot be identified.
                Err(error) => Ok(Reattached::Gone {
                    exit: None,
                    explanation: failure(&error).message,
                }),
            }
        })
    }

    fn wait<'a>(
        &'a self,
        handle: &'a PersistedTaskHandle,
    ) -> DriverFuture<'a, Result<TaskExit, DriverFailure>> {
        Box::pin(async move {
            let decoded = Self::decode(handle)?;
            self.driver
                .wait(&decoded)
                .await
                .map(task_exit)
                .map_err(|error| failure(&error))
        })
    }

    fn signal<'a>(
        &'a self,
        handle: &'a PersistedTaskHandle,
        signal: &'a str,
    ) -> DriverFuture<'a, Result<(), DriverFailure>> {
        Box::pin(async move {
            let decoded = Self::decode(handle)?;
            self.driver
                .signal(&decoded, signal)
                .await
                .map_err(|error| failure(&error))
        })
    }

    fn kill<'a>(
        &'a self,
        handle: &'a PersistedTaskHandle,
        signal: &'a str,
        grace: Duration,
    ) -> DriverFuture<'a, Result<(), DriverFailure>> {
        Box::pin(async move {
            let decoded = Self::decode(handle)?;
            self.driver
                .kill(&decoded, Some(signal), grace)
                .await
                .map(|_| ())
                .map_err(|error| failure(&error))
        })
    }

    fn stats<'a>(
        &'a self,
        handle: &'a PersistedTaskHandle,
    ) -> DriverFuture<'a, Result<drover_driver::TaskResourceUsage, DriverFailure>> {
        Box::pin(async move {
            let decoded = Self::decode(handle)?;
            self.driver
                .stats(&decoded)
                .await
                .map_err(|error| failure(&error))
        })
    }

    fn reclaim_unrecorded<'a>(
        &'a self,
        supervisor_state_dir: &'a std::path::Path,
    ) -> DriverFuture<'a, Result<(), DriverFailure>> {
        Box::pin(async move {
            let spec_path = supervisor_state_dir.join("spec.json");
            let spec: Option<Value> = std::fs::read(&spec_path)
                .ok()
                .and_then(|bytes| serde_json::from_slice(&bytes).ok());
            let Some(spec) = spec else {
                // Nothing was launched from here (the spec is written before the shim starts).
                return match std::fs::remove_dir_all(supervisor_state_dir) {
                    Ok(()) => Ok(()),
                    Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
                    Err(error) => Err(DriverFailure::recoverable(format!(
                        "removing {}: {error}",
                        supervisor_state_dir.display()
                    ))),
                };
            };
            let cgroup = spec.get("cgroup").and_then(|cgroup| {
                Some(drover_driver::CgroupRef {
                    root: cgroup.get("root")?.as_str()?.into(),
                    name: cgroup.get("name")?.as_str()?.to_string(),
                })
            });
            let handle = TaskHandle {
                version: 1,
                driver: self.driver.name().to_string(),
                task_id: spec
                    .get("task_id")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                kill_signal: None,
                shim: Some(drover_driver::ShimHandle {
                    shim_pid: 0,
                    shim_start_time: 0,
                    task_pid: 0,
                    task_start_time: 0,
                    socket_path: supervisor_state_dir.join("shim.sock"),
                    state_dir: supervisor_state_dir.to_path_buf(),
                    cgroup,
                }),
                driver_state: Value::Null,
            };
            // A live shim is told to kill its task and exit; a gone one is reclaimed through
            // the task's cgroup.
            self.driver
                .destroy(&handle)
                .await
                .map_err(|error| failure(&error))
        })
    }

    fn cleanup<'a>(
        &'a self,
        handle: &'a PersistedTaskHandle,
    ) -> DriverFuture<'a, Result<(), DriverFailure>> {
        Box::pin(async move {
            let decoded = Self::decode(handle)?;
            self.driver
                .destroy(&decoded)
                .await
                .map_err(|error| failure(&error))
        })
    }
}

/// The client's drivers: `raw_exec` and `exec` (each task under its own shim), `exec` with
/// Nomad's defaults (see [`driver_catalog`]).
pub fn default_driver_catalog(
    raw_exec: drover_driver::shim_engine::RawExecConfig,
) -> StaticDriverCatalog {
    driver_catalog(raw_exec, drover_driver::exec::ExecConfig::default())
}

/// The client's drivers, `exec` configured by the client (`chroot_env`, `allow_caps`). Whether
/// the node offers `exec` is the fingerprint's call (root and cgroups).
pub fn driver_catalog(
    raw_exec: drover_driver::shim_engine::RawExecConfig,
    exec: drover_driver::exec::ExecConfig,
) -> StaticDriverCatalog {
    let connect_proxy: Arc<dyn Driver> = Arc::new(drover_driver::raw_exec::connect_proxy_driver(
        raw_exec.clone(),
    ));
    let exec: Arc<dyn Driver> = Arc::new(drover_driver::exec::exec_driver(raw_exec.clone(), exec));
    let raw_exec: Arc<dyn Driver> = Arc::new(drover_driver::raw_exec::raw_exec_driver(raw_exec));
    let catalog = StaticDriverCatalog::new()
        .with("raw_exec", Arc::new(DriverAdapter::new(raw_exec)))
        .with("exec", Arc::new(DriverAdapter::new(exec)))
        .with(
            drover_structs::connect::CONNECT_PROXY_DRIVER,
            Arc::new(DriverAdapter::connect_proxy(connect_proxy)),
        );
    with_test_drivers(catalog)
}

/// Adds the `docker` driver (one per client: it holds the engine connection and the tasks' log
/// followers). Whether the node offers it is the fingerprint's call (an engine answering).
pub fn with_docker(
    catalog: StaticDriverCatalog,
    docker: Arc<drover_docker::DockerDriver>,
) -> StaticDriverCatalog {
    let manager: Arc<dyn drover_driver::NetworkManager> = docker.clone();
    let docker: Arc<dyn Driver> = docker;
    catalog
        .with("docker", Arc::new(DriverAdapter::new(docker)))
        .with_network_manager("docker", manager)
}

/// Test builds add the fake `mock_driver`; the agent a user runs has none.
#[cfg(any(test, feature = "testing"))]
fn with_test_drivers(catalog: StaticDriverCatalog) -> StaticDriverCatalog {
    let mock: Arc<dyn Driver> = Arc::new(drover_driver::mock::MockDriver::new());
    catalog.with("mock_driver", Arc::new(DriverAdapter::new(mock)))
}

#[cfg(not(any(test, feature = "testing")))]
fn with_test_drivers(catalog: StaticDriverCatalog) -> StaticDriverCatalog {
    catalog
}
