//! Nomad's dynamic node metadata endpoint on an agent that runs a client:
//! `GET /v1/client/metadata` (the node's merged, dynamic and static metadata) and
//! `POST /v1/client/metadata` (set keys, or with `null` unset them; the node registers again so
//! the servers schedule on it), in Nomad's shapes (`NodeMetaResponse`) and messages. Any other
//! method is 405, as Nomad.
//!
//! Not here: a request naming another node (`?node_id=`, or `NodeID` in an apply's body),
//! which `proxy::routing` passes on to that node's agent (through the servers from a
//! client-only agent); one that still lands here, on the wrong agent, is refused. Who may
//! call it: `acl_enforce` (node read, node write).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use drover_api::ApiError;
use drover_api::params::QueryParams;
use drover_client::node::ClientErrorKind;
use drover_structs::node_meta::NodeMetaApplyRequest;

use crate::backend::LocalClient;

/// The path of the endpoint.
pub const NODE_META_PATH: &str = "/v1/client/metadata";

/// The routes of an agent that runs a client: `/v1/client/metadata`.
pub fn router(client: Arc<LocalClient>) -> axum::Router {
    axum::Router::new()
        .route(NODE_META_PATH, axum::routing::any(node_meta))
        .with_state(client)
}

fn json(value: &impl serde::Serialize, pretty: bool) -> Result<Response, ApiError> {
    let body = if pretty {
        serde_json::to_vec_pretty(value)
    } else {
        serde_json::to_vec(value)
    }
    .map_err(|error| ApiError::internal(error.to_string()))?;
    Ok((
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response())
}

async fn node_meta(
    method: Method,
    State(client): State<Arc<LocalClient>>,
    RawQuery(query): RawQuery,
    body: Bytes,
) -> Result<Response, ApiError> {
    let params = QueryParams::parse(query.as_deref());
    let wrong_node = |named: &str| {
        (!named.is_empty() && named != client.node_id()).then(|| {
            ApiError::bad_request(format!(
                "node {named} is not this agent's node: ask that node's agent"
            ))
        })
    };
    match method {
        Method::GET => {
            if let Some(refused) = wrong_node(params.get("node_id").unwrap_or_default()) {
                return Err(refused);
            }
            json(&client.node_meta().await, params.pretty())
        }
        Method::POST => {
            let request: NodeMetaApplyRequest =
                crate::request_body::decode_lenient_or_default(&body)?;
            // Nomad's `parseNode`: the query's `node_id` wins over the body's.
            let named = params
                .non_empty("node_id")
                .unwrap_or(request.node_id.as_str());
            if let Some(refused) = wrong_node(named) {
                return Err(refused);
            }
            match client.apply_node_meta(&request).await {
                Ok(answer) => json(&answer, params.pretty()),
                Err(error) if error.kind() == ClientErrorKind::BadRequest => {
                    Err(ApiError::bad_request(error.to_string()))
                }
                Err(error) => Err(ApiError::internal(error.to_string())),
            }
        }
        _ => Err(ApiError::MethodNotAllowed),
    }
}
