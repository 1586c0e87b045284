//! The network hook: before a task of a group with a network of its own (bridge, none, CNI)
//! starts, the allocation's network is set up (once for all its tasks; the first hook to ask
//! does it, the others wait for it) or found ready. A setup that fails fails the task with a
//! "Setup Failure" naming the plugin, its error and where plugins were looked for; nothing of
//! that network is left.
//!
//! **Not** here: the setup itself ([`crate::network`]) or the teardown (the alloc runner).

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::{
    HookError, HookErrorKind, HookFuture, HookResult, PrestartHook, PrestartRequest,
    PrestartResponse, TaskHook,
};
use crate::network::AllocNetwork;

/// Drivers whose tasks join the namespace (the shim enters it before exec; docker tasks join
/// the pause container the docker driver made for the group).
#[cfg(not(any(test, feature = "testing")))]
const JOINING_DRIVERS: &[&str] = &["raw_exec", "exec", "docker", "connect_proxy"];
/// Test builds add the mock driver, which runs nothing real (its name stays out of the agent a
/// user runs: `scripts/check-test-doubles` looks for it in the binary).
#[cfg(any(test, feature = "testing"))]
const JOINING_DRIVERS: &[&str] = &["raw_exec", "exec", "docker", "connect_proxy", "mock_driver"];

/// See the module docs.
#[derive(Debug)]
pub struct NetworkHook {
    network: Arc<AllocNetwork>,
    /// What the group's `hostname` is interpolated with (this hook runs before the env hook).
    env_inputs: super::env::EnvHookInputs,
}

impl NetworkHook {
    pub fn new(network: Arc<AllocNetwork>, env_inputs: super::env::EnvHookInputs) -> Self {
        NetworkHook {
            network,
            env_inputs,
        }
    }

    /// The group's `hostname`, interpolated with the task's environment.
    fn hostname(&self, request: &PrestartRequest) -> Option<String> {
        let network = crate::network::group_network(&request.alloc)?;
        if network.hostname.is_empty() {
            return None;
        }
        let inputs = crate::taskenv::TaskEnvInputs {
            alloc: &request.alloc,
            task: &request.task,
            node: &self.env_inputs.node,
            region: &self.env_inputs.region,
            task_dir: &self.env_inputs.task_dir,
            path_view: self.env_inputs.path_view,
        };
        let env = crate::taskenv::TaskEnv::build(&inputs, &std::collections::BTreeMap::new());
        Some(env.interpolate(&network.hostname)).filter(|hostname| !hostname.is_empty())
    }
}

impl TaskHook for NetworkHook {
    fn name(&self) -> &'static str {
        "network"
    }
    fn as_prestart(&self) -> Option<&dyn PrestartHook> {
        Some(self)
    }
}

impl PrestartHook for NetworkHook {
    fn prestart<'a>(
        &'a self,
        _cancel: &'a CancellationToken,
        request: &'a PrestartRequest,
        _response: &'a mut PrestartResponse,
    ) -> HookFuture<'a, HookResult> {
        Box::pin(async move {
            if !JOINING_DRIVERS.contains(&request.task.driver.as_str()) {
                return Err(HookError::new(
                    HookErrorKind::Validation,
                    format!(
                        "the {} driver cannot join the group's network namespace (network mode {:?}); only raw_exec, exec and docker tasks can",
                        request.task.driver,
                        self.network.mode_text()
                    ),
                ));
            }
            let hostname = self.hostname(request);
            self.network
                .ensure(request.alloc.clone(), hostname)
                .await
                .map(|_| ())
                .map_err(|error| {
                    HookError::new(
                        HookErrorKind::Setup,
                        format!(
                            "failed to set up the group network: {}",
                            crate::error_text::error_chain(&error)
                        ),
                    )
                })
        })
    }
}
