//! The task API hook: the agent's HTTP API on a unix socket at `secrets/api.sock` in every
//! task (as Nomad), so a task reaches the agent without knowing its address. The secrets dir
//! is bind-mounted into an isolated task's filesystem, so the socket is reachable from inside
//! an `exec` task's mount namespace at `/secrets/api.sock`.
//!
//! The agent decides what is served ([`TaskApiServer`]): every request must carry a valid
//! token, even with ACLs off. Like Nomad, the hook soft-fails: a socket that cannot be made
//! is logged and the task starts without it.
//!
//! Not here: authentication or routing (the agent's `task_api`).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

use super::{
    HookFuture, HookResult, PoststartHook, PoststartRequest, PoststartResponse, PrestartHook,
    PrestartRequest, PrestartResponse, StopHook, StopRequest, StopResponse, TaskHook,
};
use crate::allocdir::TaskDir;

/// Serves the agent's API to one task on a listener until `stop` is cancelled.
pub trait TaskApiServer: Send + Sync + std::fmt::Debug {
    fn serve(&self, listener: tokio::net::UnixListener, stop: CancellationToken);
}

/// The task API hook.
pub struct ApiHook {
    server: Arc<dyn TaskApiServer>,
    task_dir: TaskDir,
    listening: Mutex<Option<CancellationToken>>,
}

impl ApiHook {
    pub fn new(server: Arc<dyn TaskApiServer>, task_dir: TaskDir) -> Self {
        ApiHook {
            server,
            task_dir,
            listening: Mutex::new(None),
        }
    }

    fn socket_path(&self) -> PathBuf {
        self.task_dir.secrets_dir.join("api.sock")
    }

    /// Binds and serves the socket unless it is served already.
    fn listen(&self) {
        let mut listening = match self.listening.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        if listening.is_some() {
            return;
        }
        let path = self.socket_path();
        let _ = std::fs::remove_file(&path);
        let bound = drover_shim::socket_path::SocketPath::new(&path)
            .and_then(|address| std::os::unix::net::UnixListener::bind(address.path()))
            .and_then(|listener| {
                listener.set_nonblocking(true)?;
                tokio::net::UnixListener::from_std(listener)
            });
        match bound {
            Ok(listener) => {
                let stop = CancellationToken::new();
                self.server.serve(listener, stop.clone());
                *listening = Some(stop);
            }
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "cannot create the task API socket; the task runs without it");
            }
        }
    }

    fn close(&self) {
        let mut listening = match self.listening.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Some(stop) = listening.take() {
            stop.cancel();
        }
        let _ = std::fs::remove_file(self.socket_path());
    }
}

impl TaskHook for ApiHook {
    fn name(&self) -> &'static str {
        "api"
    }
    fn as_prestart(&self) -> Option<&dyn PrestartHook> {
        Some(self)
    }
    fn as_poststart(&self) -> Option<&dyn PoststartHook> {
        Some(self)
    }
    fn as_stop(&self) -> Option<&dyn StopHook> {
        Some(self)
    }
}

impl PrestartHook for ApiHook {
    fn prestart<'a>(
        &'a self,
        _cancel: &'a CancellationToken,
        _request: &'a PrestartRequest,
        _response: &'a mut PrestartResponse,
    ) -> HookFuture<'a, HookResult> {
        Box::pin(async move {
            self.listen();
            Ok(())
        })
    }
}

impl PoststartHook for ApiHook {
    /// After a restore the task runs without a prestart: serve its socket again.
    fn poststart<'a>(
        &'a self,
        _cancel: &'a CancellationToken,
        _request: &'a PoststartRequest,
        _response: &'a mut PoststartResponse,
    ) -> HookFuture<'a, HookResult> {
        Box::pin(async move {
            self.listen();
            Ok(())
        })
    }
}

impl StopHook for ApiHook {
    fn stop<'a>(
        &'a self,
        _cancel: &'a CancellationToken,
        _request: &'a StopRequest,
        _response: &'a mut StopResponse,
    ) -> HookFuture<'a, HookResult> {
        Box::pin(async move {
            self.close();
            Ok(())
        })
    }
}
