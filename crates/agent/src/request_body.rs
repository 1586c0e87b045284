//! Decoding the JSON bodies of the agent's own endpoints: an empty (or all-whitespace) body is
//! the request's default, as Nomad's decoders read an empty body.
//!
//! Not here: the `/v1` API's bodies (`drover_api`'s decoder serves those).

use axum::body::Bytes;
use drover_api::error::ApiError;
use serde::de::DeserializeOwned;

fn is_empty(body: &Bytes) -> bool {
    body.iter().all(u8::is_ascii_whitespace)
}

/// Decodes `body` strictly by its field names; the error is Nomad's "failed to decode request".
pub(crate) fn decode_or_default<T: DeserializeOwned + Default>(
    body: &Bytes,
) -> Result<T, ApiError> {
    if is_empty(body) {
        return Ok(T::default());
    }
    serde_json::from_slice(body)
        .map_err(|error| ApiError::bad_request(format!("failed to decode request: {error}")))
}

/// Decodes `body` as Go's `encoding/json` does: keys matched without regard to case.
pub(crate) fn decode_lenient_or_default<T: DeserializeOwned + Default>(
    body: &Bytes,
) -> Result<T, ApiError> {
    if is_empty(body) {
        return Ok(T::default());
    }
    let value: serde_json::Value =
        serde_json::from_slice(body).map_err(|error| ApiError::bad_request(error.to_string()))?;
    drover_structs::lenient::from_value_ignoring_key_case(value)
        .map_err(|error| ApiError::bad_request(error.to_string()))
}
