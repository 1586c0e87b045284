//! The `raw_exec` driver: the shim engine with no isolation — the command runs as given, as the
//! agent's user unless the task names one, without namespaces or a chroot. The `connect_proxy`
//! driver is the same engine for a Connect sidecar: the client gives it the agent's own binary
//! as the command, run as the agent's user (it joins the group's network namespace, has its
//! own cgroup and its logs, like any task under a shim).

use drover_shim::proto::IsolationSpec;

use crate::shim_engine::{LaunchPolicy, ShimEngine};
use crate::task_config::{RAW_EXEC_CONFIG_KEYS, validate_config};
use crate::{DriverError, TaskLaunch};

/// The engine's settings, named for the driver that uses them alone.
pub use crate::shim_engine::RawExecConfig;

/// The `raw_exec` driver: the shim engine with the [`RawExec`] policy.
pub fn raw_exec_driver(config: RawExecConfig) -> ShimEngine {
    ShimEngine::new(config, RawExec)
}

/// The `raw_exec` driver's policy: its task config, no isolation.
pub struct RawExec;

impl LaunchPolicy for RawExec {
    fn driver_name(&self) -> &'static str {
        "raw_exec"
    }

    fn isolation(
        &self,
        launch: &TaskLaunch,
        _engine: &ShimEngine,
    ) -> Result<Option<IsolationSpec>, DriverError> {
        validate_config(&launch.driver_config, RAW_EXEC_CONFIG_KEYS)?;
        Ok(None)
    }

    fn user(&self, launch: &TaskLaunch) -> Option<String> {
        launch.user.clone()
    }
}

/// The `connect_proxy` driver: the shim engine with the [`ConnectProxy`] policy.
pub fn connect_proxy_driver(config: RawExecConfig) -> ShimEngine {
    ShimEngine::new(config, ConnectProxy)
}

/// The `connect_proxy` driver's policy: no task config of its own (the client builds the
/// command line), no isolation, the agent's user.
pub struct ConnectProxy;

impl LaunchPolicy for ConnectProxy {
    fn driver_name(&self) -> &'static str {
        "connect_proxy"
    }

    fn isolation(
        &self,
        launch: &TaskLaunch,
        _engine: &ShimEngine,
    ) -> Result<Option<IsolationSpec>, DriverError> {
        validate_config(&launch.driver_config, &[])?;
        Ok(None)
    }

    fn user(&self, _launch: &TaskLaunch) -> Option<String> {
        None
    }
}
