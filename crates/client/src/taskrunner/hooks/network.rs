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

/// Drivers whose tasks join the namespace (the shim enters it before exec).
#[cfg(not(any(test, feature = "testing")))]
const JOINING_DRIVERS: &[&str] = &["raw_exec", "exec"];
/// Test builds add the mock driver, which runs nothing real (its name stays out of the agent a
/// user runs: `scripts/check-test-doubles` looks for it in the binary).
#[cfg(any(test, feature = "testing"))]
const JOINING_DRIVERS: &[&str] = &["raw_exec", "exec", "mock_driver"];

/// See the module docs.
#[derive(Debug)]
pub struct NetworkHook {
    network: Arc<AllocNetwork>,
}

impl NetworkHook {
    pub fn new(network: Arc<AllocNetwork>) -> Self {
        NetworkHook { network }
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
                        "the {} driver cannot join the group's network namespace (network mode {:?}); only raw_exec and exec tasks can",
                        request.task.driver,
                        self.network.mode_text()
                    ),
                ));
            }
            self.network
                .ensure(request.alloc.clone())
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
