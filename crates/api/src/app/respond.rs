//! How the handlers answer: JSON bodies with Nomad's index headers, blocking reads, and
//! request bodies decoded as Go decodes them. Shared by every handler module of `app`; knows no
//! route.

use axum::body::Bytes;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::backend::{ApiBackend, Table};
use crate::error::ApiError;
use crate::params::QueryParams;

/// Response metadata: reads carry all three headers, writes only the index. A read's index is
/// sent as it is, 0 included (a table never written), as Nomad's `setIndex` does; the routes
/// whose Nomad endpoint floors its index at 1 floor it themselves.
#[derive(Clone, Copy)]
pub(super) enum Meta {
    Read(u64),
    Write(u64),
    None,
}

fn encode_json<T: Serialize>(value: &T, pretty: bool) -> Result<Vec<u8>, ApiError> {
    let encoded = if pretty {
        let mut buffer = Vec::new();
        let formatter = serde_json::ser::PrettyFormatter::with_indent(b"    ");
        let mut serializer = serde_json::Serializer::with_formatter(&mut buffer, formatter);
        value.serialize(&mut serializer).map(|()| {
            buffer.push(b'\n');
            buffer
        })
    } else {
        serde_json::to_vec(value)
    };
    encoded.map_err(|error| ApiError::internal(format!("failed to encode the response: {error}")))
}

pub(super) fn json_response<T: Serialize>(
    value: &T,
    params: &QueryParams,
    meta: Meta,
) -> Result<Response, ApiError> {
    let body = encode_json(value, params.pretty())?;
    let mut response = (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response();
    let headers = response.headers_mut();
    match meta {
        Meta::Read(index) => {
            headers.insert("X-Nomad-Index", HeaderValue::from(index));
            headers.insert("X-Nomad-KnownLeader", HeaderValue::from_static("true"));
            headers.insert("X-Nomad-LastContact", HeaderValue::from_static("0"));
        }
        Meta::Write(index) => {
            headers.insert("X-Nomad-Index", HeaderValue::from(index));
        }
        Meta::None => {}
    }
    Ok(response)
}

/// A page of a paginated list: a read's answer with `X-Nomad-NextToken` when more is left.
pub(super) fn page_response<T: Serialize>(
    value: &T,
    params: &QueryParams,
    index: u64,
    next_token: &str,
) -> Result<Response, ApiError> {
    let mut response = json_response(value, params, Meta::Read(index))?;
    if !next_token.is_empty() {
        let token = HeaderValue::from_str(next_token)
            .map_err(|_| ApiError::internal("next token is not a header value"))?;
        response.headers_mut().insert("X-Nomad-NextToken", token);
    }
    Ok(response)
}

/// Runs a read as a blocking query: with `?index=N`, waits until one of `tables` passes N or
/// the wait (plus jitter) runs out, then reads. The index is taken before the data, so the
/// data is never older than the index the caller will block on next. It is the tables' own
/// index: 0 while none of them was ever written (Nomad's `Index(table)`), and `index=0` is
/// no blocking query, as in Nomad's `blockingRPC`.
pub(super) async fn blocking_read<B: ApiBackend, T>(
    backend: &B,
    params: &QueryParams,
    tables: &[Table],
    read: impl FnOnce(&B) -> Result<T, ApiError>,
) -> Result<(u64, T), ApiError> {
    let index = crate::blocking::wait_for_list(&BackendTables { backend, tables }, params).await?;
    let value = read(backend)?;
    Ok((index, value))
}

/// Decodes a request body as Go's `encoding/json` would: keys matched case-insensitively,
/// unknown keys ignored, `null` as absent. An empty body is the default value.
pub(super) fn decode_body<T: serde::de::DeserializeOwned + Default>(
    body: &Bytes,
) -> Result<T, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    let value: serde_json::Value = serde_json::from_slice(body)
        .map_err(|error| ApiError::bad_request(format!("Request decode failed: {error}")))?;
    decode_value(value)
}

/// Decodes a request body already read as JSON (keys matched without regard to case).
pub(super) fn decode_value<T: serde::de::DeserializeOwned>(
    value: serde_json::Value,
) -> Result<T, ApiError> {
    drover_structs::lenient::from_value_ignoring_key_case(value)
        .map_err(|error| ApiError::bad_request(format!("Request decode failed: {error}")))
}

/// Runs a read of one object (a job, an allocation, an evaluation, a node, a deployment, a
/// scaling policy) as Nomad's `Get…` endpoints run it: [`crate::blocking::read_object`] over
/// `tables` of the backend.
pub(super) async fn blocking_read_object<B: ApiBackend, T>(
    backend: &B,
    params: &QueryParams,
    tables: &[Table],
    read: impl Fn(&B) -> Result<Option<T>, ApiError>,
    modify_index: impl Fn(&T) -> u64,
) -> Result<(u64, Option<T>), ApiError> {
    let watch = BackendTables { backend, tables };
    crate::blocking::read_object(&watch, params, || read(backend), modify_index).await
}

/// Tables of an [`ApiBackend`], watched by a blocking read of one object.
struct BackendTables<'a, B> {
    backend: &'a B,
    tables: &'a [Table],
}

impl<B: ApiBackend> crate::blocking::TableWatch for BackendTables<'_, B> {
    fn index(&self) -> u64 {
        self.backend.table_index(self.tables)
    }

    fn changed_past(
        &self,
        index: u64,
        deadline: tokio::time::Instant,
    ) -> impl std::future::Future<Output = ()> + Send {
        self.backend.wait_for_change(self.tables, index, deadline)
    }
}

/// The answer to a read of one object: the object with the read headers, or Nomad's 404 with
/// the same headers (its HTTP layer sets the query's meta before it finds nothing), so a
/// reader waiting for the object to appear blocks on from the index it was sent.
pub(super) fn object_response<T: Serialize>(
    object: Option<&T>,
    params: &QueryParams,
    index: u64,
    not_found: &'static str,
) -> Result<Response, ApiError> {
    match object {
        Some(object) => json_response(object, params, Meta::Read(index)),
        None => Ok(crate::blocking::not_found_at(not_found, index)),
    }
}
