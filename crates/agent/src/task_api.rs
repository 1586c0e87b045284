//! The task API as the agent serves it: the agent's own HTTP API on each task's
//! `secrets/api.sock` (the client's api hook binds the socket and hands it here), behind one
//! rule of its own — every request must carry a token (`X-Nomad-Token` or `Authorization:
//! Bearer`) that resolves to an ACL token or a workload identity, even with ACLs off. As
//! Nomad's task API answers: no token is 401 `Unauthorized`, a token that does not resolve
//! (unknown, expired, a workload identity whose allocation has stopped) 403 `Forbidden`, and a
//! failure to ask the servers 500.
//!
//! A server agent resolves a token from its own keyring and state; a client-only agent asks
//! its servers (`client_acl`, which keeps answers for `acl { token_ttl }` and refuses at once
//! the token of an allocation this node has stopped).
//!
//! The router is bound late ([`TaskApi::set_app`]): the client starts (and restores tasks)
//! before the agent has built its API, so a socket served early waits for it.
//!
//! Not here: what each endpoint does once the caller is let in.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use drover_client::taskrunner::hooks::api::TaskApiServer;
use drover_server::identity::{RequestIdentity, resolve_token};
use drover_server::keyring::Keyring;
use drover_state::StateStore;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::client_acl::{ClientAclError, ClientAclResolver, bearer_of};

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

/// How the token check resolves a token.
#[derive(Clone)]
pub enum TaskApiAuth {
    /// A server agent: its keyring and state.
    Server {
        keyring: Arc<Keyring>,
        state: StateStore,
    },
    /// A client-only agent: its servers, through the resolver's cache.
    Client(Arc<ClientAclResolver>),
}

impl TaskApiAuth {
    /// Who `token` is: 403 when it does not resolve, 500 when the servers cannot be asked.
    pub async fn resolve(&self, token: &str) -> Result<RequestIdentity, StatusCode> {
        match self {
            TaskApiAuth::Server { keyring, state } => resolve_token(keyring, state, Some(token))
                .map_err(|error| {
                    tracing::debug!(%error, "refused a task API request's token");
                    StatusCode::FORBIDDEN
                }),
            TaskApiAuth::Client(resolver) => {
                resolver
                    .resolve_identity(token)
                    .await
                    .map_err(|error| match error {
                        ClientAclError::Refused(message) => {
                            tracing::debug!(message, "refused a task API request's token");
                            StatusCode::FORBIDDEN
                        }
                        ClientAclError::Unavailable(message) => {
                            tracing::error!(message, "cannot authenticate a task API request");
                            StatusCode::INTERNAL_SERVER_ERROR
                        }
                    })
            }
        }
    }
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

/// Nomad's plain-text refusal: the status's reason phrase.
fn refused(status: StatusCode) -> Response {
    let text = match status {
        StatusCode::INTERNAL_SERVER_ERROR => "Server error authenticating request\n",
        other => other.canonical_reason().unwrap_or_default(),
    };
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        text,
    )
        .into_response()
}

/// Lets a request through only with a token that resolves to an ACL token or a workload
/// identity.
async fn require_token(State(auth): State<TaskApiAuth>, request: Request, next: Next) -> Response {
    let token = bearer_of(request.headers());
    if token.is_empty() {
        return refused(StatusCode::UNAUTHORIZED);
    }
    let resolved = auth.resolve(&token).await;
    match resolved {
        Ok(RequestIdentity::Anonymous) => refused(StatusCode::FORBIDDEN),
        Ok(_) => next.run(request).await,
        Err(status) => refused(status),
    }
}
