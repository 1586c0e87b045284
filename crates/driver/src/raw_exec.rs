//! The `raw_exec` driver: the shim engine with no isolation — the command runs as given, as the
//! agent's user unless the task names one, without namespaces or a chroot.

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
