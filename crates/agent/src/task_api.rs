//! The task API as the agent serves it: the agent's own HTTP API on each task's
//! `secrets/api.sock` (the client's api hook binds the socket and hands it here), behind one
//! rule of its own — every request must carry a token that resolves to an identity
//! (`X-Nomad-Token` or `Authorization: Bearer`), even with ACLs off, as Nomad. A workload
//! identity whose allocation has stopped no longer resolves, so it is refused too.
//!
//! The router is bound late ([`TaskApi::set_app`]): the client starts (and restores tasks)
//! before the agent has built its API, so a socket served early waits for it.
//!
//! A client-only agent holds no keyring to check a token with, so its task API refuses every
//! request, saying so.
//!
//! Not here: what each endpoint does once the caller is let in.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use drover_client::taskrunner::hooks::api::TaskApiServer;
use drover_server::identity::{RequestIdentity, request_token, resolve_token};
use drover_server::keyring::Keyring;
use drover_state::StateStore;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// The agent's task API server; cheap to share.
#[derive(Debug, Clone)]
pub struct TaskApi {
    app: Arc<watch::Sender<Option<axum::Router>>>,
}

impl Default for TaskApi {
    fn default() -> Self {
        TaskApi {
            app: Arc::new(watch::Sender::new(None)),
        }
    }
}

/// What the token check needs: the keyring and state of a server agent (`None` on a
/// client-only agent).
#[derive(Clone)]
pub struct TaskApiAuth {
    pub verifier: Option<(Arc<Keyring>, StateStore)>,
}

impl TaskApi {
    /// Binds the router served on every task's socket: `app` behind the token check.
    pub fn set_app(&self, app: axum::Router, auth: TaskApiAuth) {
        let app = app.layer(axum::middleware::from_fn_with_state(auth, require_token));
        self.app.send_replace(Some(app));
    }
}

impl TaskApiServer for TaskApi {
    fn serve(&self, listener: tokio::net::UnixListener, stop: CancellationToken) {
        let mut app_changes = self.app.subscribe();
        tokio::spawn(async move {
            let app = loop {
                if let Some(app) = app_changes.borrow_and_update().clone() {
                    break app;
                }
                tokio::select! {
                    () = stop.cancelled() => return,
                    changed = app_changes.changed() => if changed.is_err() { return },
                }
            };
            if let Err(error) = axum::serve(listener, app)
                .with_graceful_shutdown(stop.cancelled_owned())
                .await
            {
                tracing::warn!(%error, "the task API stopped with an error");
            }
        });
    }
}

fn refused(message: &'static str) -> Response {
    (
        StatusCode::FORBIDDEN,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        message,
    )
        .into_response()
}

/// Lets a request through only with a token that resolves to an identity.
async fn require_token(State(auth): State<TaskApiAuth>, request: Request, next: Next) -> Response {
    let Some((keyring, state)) = &auth.verifier else {
        return refused(
            "Permission denied: the task API of a client-only agent cannot verify tokens; \
             use the API of a server agent",
        );
    };
    let headers: &HeaderMap = request.headers();
    let header_str = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    let token = request_token(header_str("X-Nomad-Token"), header_str("Authorization"));
    match resolve_token(keyring, state, token) {
        Ok(RequestIdentity::Anonymous) => refused("Permission denied"),
        Ok(_) => next.run(request).await,
        Err(error) => {
            tracing::debug!(%error, "refused a task API request's token");
            refused("Permission denied")
        }
    }
}
