//! Workload identities for client nodes over HTTP on a server agent: `PUT
//! /v1/internal/node/<id>/sign-identities` (Nomad's `Alloc.SignIdentities`), which a remote
//! client calls with its node secret to have its tasks' identities signed.
//!
//! Not here: the signing rules (`drover_server::identity::sign_for_node`) or the client's
//! delivery of the tokens to its tasks.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use drover_api::ApiError;
use drover_server::Clock;
use drover_server::identity::{IdentityError, sign_for_node};
use drover_server::keyring::Keyring;
use drover_state::StateStore;
use drover_structs::client_rpc::SignIdentitiesRequest;

/// What the identity endpoint needs.
#[derive(Clone)]
pub struct IdentityEndpoints {
    pub keyring: Arc<Keyring>,
    pub state: StateStore,
    pub clock: Arc<dyn Clock>,
}

/// The route, for a server agent.
pub fn router(endpoints: IdentityEndpoints) -> axum::Router {
    axum::Router::new()
        .route(
            "/v1/internal/node/{node_id}/sign-identities",
            axum::routing::put(sign_identities),
        )
        .with_state(endpoints)
}

async fn sign_identities(
    State(endpoints): State<IdentityEndpoints>,
    Path(node_id): Path<String>,
    body: axum::body::Bytes,
) -> Response {
    let request: SignIdentitiesRequest = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(error) => {
            return ApiError::bad_request(format!("invalid sign-identities request: {error}"))
                .into_response();
        }
    };
    match sign_for_node(
        &endpoints.keyring,
        &endpoints.state,
        &node_id,
        &request.node_secret_id,
        request.identities,
        endpoints.clock.now_unix_ns(),
    ) {
        Ok(response) => Json(response).into_response(),
        Err(IdentityError::NodeNotAuthenticated(_)) => {
            (StatusCode::FORBIDDEN, "Permission denied").into_response()
        }
        Err(error) => ApiError::internal(error.to_string()).into_response(),
    }
}
