//! Nomad's garbage collection and system endpoints: `PUT /v1/system/gc` on a server agent (a
//! forced GC of terminal jobs, evaluations, allocations, deployments and down nodes, and of
//! expired one-time and ACL tokens, `drover_server::gc`), `PUT /v1/system/reconcile/summaries`
//! (every job summary counted again from its allocations), and `/v1/client/gc` on an agent
//! that runs a client (every terminal allocation's directory and state collected). All answer
//! 200 with an empty body, as Nomad does. A client-only agent passes the `/v1/system/` ones on
//! to its servers with every other server endpoint.
//!
//! Not here: one allocation's collection (`/v1/client/allocation/<id>/gc`, in `drover_api`),
//! and passing `/v1/client/gc?node_id=` naming another node on to that node's agent
//! (`proxy::routing`); one that still lands here, on the wrong agent, is refused.

use std::sync::Arc;

use axum::extract::{RawQuery, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use drover_api::ApiError;
use drover_api::params::QueryParams;
use drover_server::Server;

use crate::backend::LocalClient;

/// The routes of a server agent: `/v1/system/gc` and `/v1/system/reconcile/summaries`.
pub fn server_router(server: Server) -> axum::Router {
    axum::Router::new()
        .route("/v1/system/gc", axum::routing::any(system_gc))
        .route(
            "/v1/system/reconcile/summaries",
            axum::routing::any(reconcile_summaries),
        )
        .with_state(server)
}

/// The routes of an agent that runs a client: `/v1/client/gc`.
pub fn client_router(client: Arc<LocalClient>) -> axum::Router {
    axum::Router::new()
        .route("/v1/client/gc", axum::routing::any(client_gc))
        .with_state(client)
}

async fn system_gc(method: Method, State(server): State<Server>) -> Result<Response, ApiError> {
    if method != Method::PUT {
        return Err(ApiError::MethodNotAllowed);
    }
    server
        .garbage_collect()
        .await
        .map_err(|error| ApiError::internal(error.to_string()))?;
    Ok(StatusCode::OK.into_response())
}

/// Nomad answers it without an index header (its handler sets none).
async fn reconcile_summaries(
    method: Method,
    State(server): State<Server>,
) -> Result<Response, ApiError> {
    if method != Method::PUT {
        return Err(ApiError::MethodNotAllowed);
    }
    server
        .reconcile_job_summaries()
        .await
        .map_err(|error| ApiError::internal(error.to_string()))?;
    Ok(StatusCode::OK.into_response())
}

async fn client_gc(
    State(client): State<Arc<LocalClient>>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let params = QueryParams::parse(query.as_deref());
    if let Some(node_id) = params.non_empty("node_id")
        && node_id != client.node_id()
    {
        return Err(ApiError::bad_request(format!(
            "node {node_id} is not this agent's node: ask that node's agent"
        )));
    }
    let collected = client.gc_all().await;
    tracing::debug!(collected, "collected terminal allocations on request");
    Ok(StatusCode::OK.into_response())
}
