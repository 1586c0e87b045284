//! The logs hook: turns the task's `logs { max_files, max_file_size }` block into the rotation
//! the driver's shim applies when it writes `alloc/logs/<task>.stdout.N` / `.stderr.N`.
//!
//! **Not** the rotation itself (the shim rotates) nor log streaming (the API reads the files).

use tokio_util::sync::CancellationToken;

use super::{HookFuture, HookResult, PrestartHook, PrestartRequest, PrestartResponse, TaskHook};
use crate::taskrunner::driver::LogRotation;

/// See the module docs.
#[derive(Debug)]
pub struct LogsHook;

/// The rotation for a task's log config (Nomad's defaults: 10 files of 10 MB).
pub fn log_rotation_for(task: &drover_structs::Task) -> LogRotation {
    let defaults = LogRotation::default();
    match task.log_config.as_ref() {
        Some(config) => LogRotation {
            max_files: u32::try_from(config.max_files)
                .ok()
                .filter(|files| *files > 0)
                .unwrap_or(defaults.max_files),
            max_file_size_bytes: u64::try_from(config.max_file_size_mb)
                .ok()
                .filter(|megabytes| *megabytes > 0)
                .map_or(defaults.max_file_size_bytes, |megabytes| {
                    megabytes * 1024 * 1024
                }),
        },
        None => defaults,
    }
}

impl TaskHook for LogsHook {
    fn name(&self) -> &'static str {
        "logs"
    }
    fn as_prestart(&self) -> Option<&dyn PrestartHook> {
        Some(self)
    }
}

impl PrestartHook for LogsHook {
    fn prestart<'a>(
        &'a self,
        _cancel: &'a CancellationToken,
        request: &'a PrestartRequest,
        response: &'a mut PrestartResponse,
    ) -> HookFuture<'a, HookResult> {
        Box::pin(async move {
            response.log_rotation = Some(log_rotation_for(&request.task));
            Ok(())
        })
    }
}
