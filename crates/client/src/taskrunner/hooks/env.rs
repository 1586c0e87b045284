//! The env hook: builds the task's base environment (`NOMAD_*` variables and the task's own
//! `env` block, interpolated) into the [`TaskEnvCell`] before every start, and rebuilds it when
//! the allocation is updated. Runs first so later hooks can interpolate `${…}`.
//!
//! **Not** the variable rules themselves: those live in [`crate::taskenv`].

use std::collections::BTreeMap;
use std::sync::Arc;

use drover_structs::Node;
use tokio_util::sync::CancellationToken;

use super::{
    HookFuture, HookResult, PrestartHook, PrestartRequest, PrestartResponse, TaskEnvCell, TaskHook,
    UpdateHook, UpdateRequest, UpdateResponse,
};
use crate::allocdir::TaskDir;
use crate::taskenv::{TaskEnv, TaskEnvInputs, TaskPathView};

/// What the env hook needs besides the alloc and task.
#[derive(Debug, Clone)]
pub struct EnvHookInputs {
    pub node: Arc<Node>,
    pub region: String,
    pub path_view: TaskPathView,
    pub task_dir: TaskDir,
    pub task_name: String,
    /// The group's network (bridge, none, CNI), whose status gives `NOMAD_ALLOC_IP_<label>`.
    pub network: Option<Arc<crate::network::AllocNetwork>>,
}

impl EnvHookInputs {
    /// `alloc` with the group network's status filled in, once it is set up (the server's
    /// copy carries it only after the client reported it).
    pub fn with_network_status(
        &self,
        alloc: &drover_structs::Allocation,
    ) -> Option<drover_structs::Allocation> {
        let status = self.network.as_ref()?.status()?;
        if alloc.network_status.as_ref() == Some(&status) {
            return None;
        }
        let mut alloc = alloc.clone();
        alloc.network_status = Some(status);
        Some(alloc)
    }
}

/// See the module docs.
#[derive(Debug)]
pub struct EnvHook {
    cell: TaskEnvCell,
    inputs: EnvHookInputs,
}

impl EnvHook {
    pub fn new(cell: TaskEnvCell, inputs: EnvHookInputs) -> Self {
        EnvHook { cell, inputs }
    }

    fn rebuild(&self, alloc: &drover_structs::Allocation, task: &drover_structs::Task) {
        let with_status = self.inputs.with_network_status(alloc);
        let alloc = with_status.as_ref().unwrap_or(alloc);
        let inputs = TaskEnvInputs {
            alloc,
            task,
            node: &self.inputs.node,
            region: &self.inputs.region,
            task_dir: &self.inputs.task_dir,
            path_view: self.inputs.path_view,
        };
        self.cell
            .set_base(TaskEnv::build(&inputs, &BTreeMap::new()));
    }
}

impl TaskHook for EnvHook {
    fn name(&self) -> &'static str {
        "env"
    }
    fn as_prestart(&self) -> Option<&dyn PrestartHook> {
        Some(self)
    }
    fn as_update(&self) -> Option<&dyn UpdateHook> {
        Some(self)
    }
}

impl PrestartHook for EnvHook {
    fn prestart<'a>(
        &'a self,
        _cancel: &'a CancellationToken,
        request: &'a PrestartRequest,
        _response: &'a mut PrestartResponse,
    ) -> HookFuture<'a, HookResult> {
        Box::pin(async move {
            self.rebuild(&request.alloc, &request.task);
            Ok(())
        })
    }
}

impl UpdateHook for EnvHook {
    fn update<'a>(
        &'a self,
        _cancel: &'a CancellationToken,
        request: &'a UpdateRequest,
        _response: &'a mut UpdateResponse,
    ) -> HookFuture<'a, HookResult> {
        Box::pin(async move {
            let task = request
                .alloc
                .job
                .as_deref()
                .and_then(|job| job.lookup_task_group(&request.alloc.task_group))
                .and_then(|group| group.lookup_task(&self.inputs.task_name));
            if let Some(task) = task {
                self.rebuild(&request.alloc, task);
            }
            Ok(())
        })
    }
}
