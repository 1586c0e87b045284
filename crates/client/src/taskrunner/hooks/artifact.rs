//! The artifact hook: before the task starts, fetches each of its `artifact` blocks into the
//! task dir (see `crate::artifact`), emitting "Downloading Artifacts" first and "Failed
//! Artifact Download" (naming the source and the error) on a failure, as Nomad does.
//!
//! Each artifact fetched is recorded in the hook's state under a digest of its block, so a
//! retry after a later artifact failed does not fetch it again; once all are fetched the hook
//! is `done` and is never run again for the task, across restarts of the task and of the agent.
//! A failure while fetching is recoverable (the restart policy retries it); a block the client
//! cannot use (source, option, mode, destination) is not.
//!
//! **Not** the fetching, caching or unpacking (`crate::artifact`).

use std::sync::Arc;

use drover_structs::{TASK_ARTIFACT_DOWNLOAD_FAILED, TASK_DOWNLOADING_ARTIFACTS, TaskArtifact};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use super::{
    HookError, HookErrorKind, HookFuture, HookResult, PrestartHook, PrestartRequest,
    PrestartResponse, TaskEventEmitter, TaskHook,
};
use crate::artifact::checksum::to_hex;
use crate::artifact::error::ArtifactError;
use crate::artifact::{ArtifactFetcher, ArtifactSpec};
use crate::config::ClientConfig;

/// See the module docs.
#[derive(Debug)]
pub struct ArtifactHook {
    config: Arc<ClientConfig>,
    events: TaskEventEmitter,
}

impl ArtifactHook {
    pub fn new(config: Arc<ClientConfig>, events: TaskEventEmitter) -> Self {
        ArtifactHook { config, events }
    }
}

impl TaskHook for ArtifactHook {
    fn name(&self) -> &'static str {
        "artifacts"
    }
    fn as_prestart(&self) -> Option<&dyn PrestartHook> {
        Some(self)
    }
}

/// The key of an artifact in the hook's state: a digest of everything in its block, so a
/// changed block is fetched anew.
pub fn artifact_id(artifact: &TaskArtifact) -> String {
    let mut hasher = Sha256::new();
    let mut field = |text: &str| {
        hasher.update((text.len() as u64).to_le_bytes());
        hasher.update(text.as_bytes());
    };
    field(&artifact.getter_source);
    for (key, value) in &artifact.getter_options {
        field(key);
        field(value);
    }
    field("headers");
    for (key, value) in &artifact.getter_headers {
        field(key);
        field(value);
    }
    field(&artifact.getter_mode);
    field(&artifact.relative_dest);
    if artifact.chown {
        field("chown");
    }
    to_hex(&hasher.finalize())
}

/// `chown = true`: what the artifact placed goes to the task's `user`, as Nomad does: only
/// when the agent runs as root and the task names a user (else nothing changes).
async fn chown(
    spec: &ArtifactSpec,
    user: &str,
    task_dir: &std::path::Path,
) -> Result<(), ArtifactError> {
    if user.is_empty() || !nix::unistd::geteuid().is_root() {
        return Ok(());
    }
    let found = nix::unistd::User::from_name(user).map_err(|errno| ArtifactError::Io {
        context: format!("looking up user {user:?}"),
        source: std::io::Error::from(errno),
    })?;
    let Some(found) = found else {
        return Err(ArtifactError::InvalidOption {
            option: "chown".to_string(),
            reason: format!("the task's user {user:?} does not exist on this client"),
        });
    };
    let (spec, task_dir) = (spec.clone(), task_dir.to_path_buf());
    let (uid, gid) = (found.uid.as_raw(), found.gid.as_raw());
    tokio::task::spawn_blocking(move || {
        crate::artifact::fetch::chown_placed(&spec, &task_dir, uid, gid)
    })
    .await
    .map_err(|error| ArtifactError::Io {
        context: "artifact worker".to_string(),
        source: std::io::Error::other(error.to_string()),
    })?
}

impl PrestartHook for ArtifactHook {
    fn prestart<'a>(
        &'a self,
        _cancel: &'a CancellationToken,
        request: &'a PrestartRequest,
        response: &'a mut PrestartResponse,
    ) -> HookFuture<'a, HookResult> {
        Box::pin(async move {
            let artifacts = &request.task.artifacts;
            if artifacts.is_empty() {
                response.done = true;
                return Ok(());
            }
            self.events
                .emit(self.events.event(TASK_DOWNLOADING_ARTIFACTS));
            let fetcher = ArtifactFetcher::new(
                self.config.artifact_cache_dir(),
                self.config.artifact.clone(),
            );
            let job_version = request.alloc.job.as_deref().map_or(0, |job| job.version);
            let job_version_key = format!(
                "{}/{}/{job_version}",
                request.alloc.namespace, request.alloc.job_id
            );
            for artifact in artifacts {
                let id = artifact_id(artifact);
                if let Some(previous) = request.previous_state.get(&id) {
                    response.state.insert(id, previous.clone());
                    continue;
                }
                let started = tokio::time::Instant::now();
                let result = match ArtifactSpec::from_task_artifact(
                    artifact,
                    &request.task_env,
                    &request.task_dir.dir,
                ) {
                    Ok(spec) => match fetcher
                        .fetch(&spec, &request.task_dir.dir, &job_version_key)
                        .await
                    {
                        Ok(()) if artifact.chown => {
                            chown(&spec, &request.task.user, &request.task_dir.dir).await
                        }
                        other => other,
                    },
                    Err(error) => Err(error),
                };
                if let Err(error) = result {
                    let message = format!(
                        "failed to download artifact {:?}: {error}",
                        artifact.getter_source
                    );
                    let kind = if error.is_recoverable() {
                        HookErrorKind::Recoverable
                    } else {
                        HookErrorKind::Unrecoverable
                    };
                    let event = self
                        .events
                        .event(TASK_ARTIFACT_DOWNLOAD_FAILED)
                        .with_download_error(&message);
                    return Err(HookError::new(kind, message).with_event(event));
                }
                tracing::debug!(source = %artifact.getter_source, elapsed = ?started.elapsed(), "artifact fetched");
                response.state.insert(id, "1".to_string());
            }
            response.done = true;
            Ok(())
        })
    }
}
