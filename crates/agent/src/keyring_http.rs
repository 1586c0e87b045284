//! The keyring's HTTP endpoints on a server agent, in Nomad's shapes:
//! `GET /v1/operator/keyring/keys` (blocking), `PUT|POST /v1/operator/keyring/rotate`,
//! `DELETE /v1/operator/keyring/key/<id>`, and the public `/.well-known/jwks.json` and
//! `/.well-known/openid-configuration` third parties verify workload identities with.
//!
//! Not here: the keys and their cryptography (`drover_server::keyring`).

use std::sync::Arc;

use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use drover_api::ApiError;
use drover_api::blocking::{StoreTables, wait_for_list};
use drover_api::params::QueryParams;
use drover_server::keyring::{Keyring, KeyringError};
use drover_state::{StateStore, Table};
use drover_structs::keyring::{KeyringDeleteResponse, KeyringRotateResponse};

/// What the keyring endpoints need.
#[derive(Clone)]
pub struct KeyringEndpoints {
    pub keyring: Arc<Keyring>,
    pub state: StateStore,
    /// `server { oidc_issuer }`.
    pub oidc_issuer: Option<String>,
    pub clock: Arc<dyn drover_server::Clock>,
}

/// The routes, for a server agent.
pub fn router(endpoints: KeyringEndpoints) -> axum::Router {
    axum::Router::new()
        .route("/v1/operator/keyring/keys", axum::routing::any(list_keys))
        .route("/v1/operator/keyring/rotate", axum::routing::any(rotate))
        .route(
            "/v1/operator/keyring/key/{key_id}",
            axum::routing::any(delete_key),
        )
        .route("/.well-known/jwks.json", axum::routing::any(jwks))
        .route(
            "/.well-known/openid-configuration",
            axum::routing::any(openid_configuration),
        )
        .with_state(endpoints)
}

/// Nomad's status for each keyring error.
fn keyring_error(error: KeyringError) -> ApiError {
    match error {
        // Nomad answers these as plain errors (500) with these messages; the caller named a
        // key that is not there (404) or may not go (400).
        KeyringError::KeyNotFound { .. } => ApiError::not_found(error.to_string()),
        KeyringError::KeyInUse { .. } | KeyringError::ActiveKey => {
            ApiError::bad_request(error.to_string())
        }
        KeyringError::State(drover_state::StateError::Invalid { reason, .. }) => {
            ApiError::bad_request(reason)
        }
        other => ApiError::internal(other.to_string()),
    }
}

fn json(value: &impl serde::Serialize, index_headers: Option<(u64, bool)>) -> Response {
    let body = match serde_json::to_vec(value) {
        Ok(body) => body,
        Err(error) => return ApiError::internal(error.to_string()).into_response(),
    };
    let mut response = (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response();
    if let Some((index, read)) = index_headers {
        let headers = response.headers_mut();
        headers.insert("X-Nomad-Index", HeaderValue::from(index.max(1)));
        if read {
            headers.insert("X-Nomad-KnownLeader", HeaderValue::from_static("true"));
            headers.insert("X-Nomad-LastContact", HeaderValue::from_static("0"));
        }
    }
    response
}

/// Waits as a blocking query on the keyring table, when the caller asked.
async fn block_on_keyring(state: &StateStore, params: &QueryParams) -> Result<u64, ApiError> {
    wait_for_list(&StoreTables::new(state, &[Table::RootKeys]), params).await
}

async fn list_keys(
    method: Method,
    State(endpoints): State<KeyringEndpoints>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    if method != Method::GET {
        return Err(ApiError::MethodNotAllowed);
    }
    let params = QueryParams::parse(query.as_deref());
    let index = block_on_keyring(&endpoints.state, &params).await?;
    Ok(json(&endpoints.keyring.list(), Some((index, true))))
}

async fn rotate(
    method: Method,
    State(endpoints): State<KeyringEndpoints>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    if method != Method::PUT && method != Method::POST {
        return Err(ApiError::MethodNotAllowed);
    }
    let params = QueryParams::parse(query.as_deref());
    // `algo` names the only algorithm there is (anything else is ignored, as Nomad);
    // `full` re-seals every variable with the new key before answering.
    let full = params.get("full").is_some();
    let publish_time = params.i64("publish_time", 0)?;
    if publish_time != 0 {
        return Err(ApiError::bad_request(
            "publish_time: prepublished root keys are not supported",
        ));
    }
    let key = endpoints.keyring.rotate().await.map_err(keyring_error)?;
    if full {
        drover_server::variables::reseal_variables(
            &endpoints.keyring,
            &endpoints.state,
            &key.key_id,
            endpoints.clock.now_unix_ns(),
        )
        .await
        .map_err(|error| ApiError::internal(error.to_string()))?;
    }
    let index = key.modify_index;
    Ok(json(
        &KeyringRotateResponse {
            key: Some(key),
            index,
        },
        Some((index, false)),
    ))
}

async fn delete_key(
    method: Method,
    State(endpoints): State<KeyringEndpoints>,
    Path(key_id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let params = QueryParams::parse(query.as_deref());
    let force = match params.get("force") {
        None => false,
        Some(value) => match drover_api::params::parse_go_bool(value) {
            Some(force) => force,
            None => {
                return Ok((
                    StatusCode::UNPROCESSABLE_ENTITY,
                    [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                    "invalid force parameter",
                )
                    .into_response());
            }
        },
    };
    if method != Method::DELETE {
        return Err(ApiError::MethodNotAllowed);
    }
    if key_id.is_empty() {
        return Err(ApiError::bad_request("root key ID is required"));
    }
    let in_use = endpoints.state.variables_sealed_with(&key_id) > 0;
    let index = endpoints
        .keyring
        .delete(&key_id, in_use, force)
        .await
        .map_err(keyring_error)?;
    Ok(json(&KeyringDeleteResponse { index }, Some((index, false))))
}

async fn jwks(
    method: Method,
    State(endpoints): State<KeyringEndpoints>,
) -> Result<Response, ApiError> {
    if method != Method::GET {
        return Err(ApiError::MethodNotAllowed);
    }
    let keys = endpoints.keyring.public_keys().map_err(keyring_error)?;
    let keys: Vec<serde_json::Value> = keys
        .iter()
        .map(|key| {
            serde_json::json!({
                "use": "sig",
                "kty": "OKP",
                "kid": key.key_id,
                "crv": "Ed25519",
                "alg": "EdDSA",
                "x": base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(key.public_key),
            })
        })
        .collect();
    Ok(json(&serde_json::json!({ "keys": keys }), None))
}

async fn openid_configuration(
    method: Method,
    State(endpoints): State<KeyringEndpoints>,
) -> Result<Response, ApiError> {
    if method != Method::GET {
        return Err(ApiError::MethodNotAllowed);
    }
    let Some(issuer) = &endpoints.oidc_issuer else {
        return Err(ApiError::not_found("OIDC Discovery endpoint disabled"));
    };
    let jwks_uri = format!("{}/.well-known/jwks.json", issuer.trim_end_matches('/'));
    Ok(json(
        &serde_json::json!({
            "issuer": issuer,
            "jwks_uri": jwks_uri,
            // Only EdDSA: the keyring signs nothing else.
            "id_token_signing_alg_values_supported": ["EdDSA"],
            "response_types_supported": ["code"],
            "subject_types_supported": ["public"],
        }),
        None,
    ))
}
