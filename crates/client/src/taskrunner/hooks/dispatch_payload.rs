//! The dispatch payload hook: writes a dispatched job's payload, snappy-compressed in the raw
//! block format as Nomad stores it, decoded into `local/<dispatch_payload.file>`. Done once: the
//! file survives restarts of the task and of the agent.
//!
//! **Not** payload validation (the server checks `required`/`forbidden` on dispatch).

use tokio_util::sync::CancellationToken;

use super::{
    HookError, HookErrorKind, HookFuture, HookResult, PrestartHook, PrestartRequest,
    PrestartResponse, TaskHook,
};
use crate::allocdir::join_within;

/// See the module docs.
#[derive(Debug)]
pub struct DispatchPayloadHook;

impl TaskHook for DispatchPayloadHook {
    fn name(&self) -> &'static str {
        "dispatch_payload"
    }
    fn as_prestart(&self) -> Option<&dyn PrestartHook> {
        Some(self)
    }
}

fn setup_error(message: String) -> HookError {
    HookError::new(HookErrorKind::Setup, message)
}

impl PrestartHook for DispatchPayloadHook {
    fn prestart<'a>(
        &'a self,
        _cancel: &'a CancellationToken,
        request: &'a PrestartRequest,
        response: &'a mut PrestartResponse,
    ) -> HookFuture<'a, HookResult> {
        Box::pin(async move {
            let file = request
                .task
                .dispatch_payload
                .as_ref()
                .map(|config| config.file.as_str())
                .unwrap_or_default();
            let payload = request
                .alloc
                .job
                .as_deref()
                .map(|job| job.payload.0.as_slice())
                .unwrap_or_default();
            if file.is_empty() || payload.is_empty() {
                response.done = true;
                return Ok(());
            }
            let destination = join_within(&request.task_dir.local_dir, file)
                .map_err(|error| setup_error(format!("dispatch payload: {error}")))?;
            let decoded = snap::raw::Decoder::new()
                .decompress_vec(payload)
                .map_err(|error| {
                    setup_error(format!("failed to decode dispatch payload: {error}"))
                })?;
            if let Some(parent) = destination.parent() {
                tokio::fs::create_dir_all(parent).await.map_err(|error| {
                    setup_error(format!("failed to create {}: {error}", parent.display()))
                })?;
            }
            tokio::fs::write(&destination, decoded)
                .await
                .map_err(|error| {
                    setup_error(format!(
                        "failed to write {}: {error}",
                        destination.display()
                    ))
                })?;
            response.done = true;
            Ok(())
        })
    }
}
