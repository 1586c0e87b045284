//! Relaying one HTTP request to another agent: read the body (bounded), send it marked as
//! forwarded, and stream the answer back with its status and headers.

use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use drover_client::http_conn::base_url;
use futures_util::TryStreamExt as _;

/// Marks a request an agent has forwarded; the receiving agent serves it itself.
pub const FORWARDED_HEADER: &str = "x-drover-forwarded";

/// How long connecting to the node may take. The answer itself may stream for as long as the
/// caller follows it (`follow=true` logs), so no overall timeout applies.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The HTTP client of the forwarding layer and of `/v1/agent/join`, built at its first request
/// rather than at the agent's start: building a `reqwest` client loads the system's TLS trust
/// store (OpenSSL reads and parses every root certificate of `/etc/ssl/certs`, twice, about
/// 45 ms and a megabyte of heap), which an agent that never forwards a request should not pay
/// for before it answers.
#[derive(Clone, Default)]
pub struct ProxyClient(std::sync::Arc<std::sync::OnceLock<reqwest::Client>>);

impl ProxyClient {
    /// The client, built on the first call.
    pub fn get(&self) -> Result<&reqwest::Client, String> {
        if let Some(client) = self.0.get() {
            return Ok(client);
        }
        let built = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .map_err(|error| format!("building the HTTP client to forward with: {error}"))?;
        // Two first requests at once both build one; the first stored is kept.
        Ok(self.0.get_or_init(|| built))
    }
}

/// Largest request body forwarded: the largest any route takes (a snapshot's restore); each
/// route's own limit is already enforced around this layer.
const MAX_FORWARDED_BODY: usize = drover_api::MAX_SNAPSHOT_BODY;

/// Relays a request to the agent at `address` (its HTTP address), answering 502 when that
/// agent cannot be reached.
pub async fn forward(http: &ProxyClient, address: &str, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = match read_body(body).await {
        Ok(bytes) => bytes,
        Err(refused) => return refused,
    };
    let sent = match base_url(address) {
        Ok(base) => send(http, &base, &parts, body).await,
        Err(error) => Err(error.to_string()),
    };
    match sent {
        Ok(answer) => relay(answer),
        Err(error) => {
            tracing::warn!(address, %error, "forwarding a client request to its node failed");
            (
                StatusCode::BAD_GATEWAY,
                format!("the node holding this allocation ({address}) cannot be reached: {error}"),
            )
                .into_response()
        }
    }
}

/// Relays a request to the server agent at `address` (the cluster's leader), answering 502
/// when it cannot be reached.
pub async fn forward_to_server(http: &ProxyClient, address: &str, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = match read_body(body).await {
        Ok(bytes) => bytes,
        Err(refused) => return refused,
    };
    let sent = match base_url(address) {
        Ok(base) => send(http, &base, &parts, body).await,
        Err(error) => Err(error.to_string()),
    };
    match sent {
        Ok(answer) => relay(answer),
        Err(error) => {
            tracing::warn!(address, %error, "forwarding a write to the leader failed");
            (
                StatusCode::BAD_GATEWAY,
                format!("the cluster's leader ({address}) cannot be reached: {error}"),
            )
                .into_response()
        }
    }
}

/// The whole request body, to be sent on (possibly to more than one server).
pub(super) async fn read_body(body: Body) -> Result<axum::body::Bytes, Response> {
    axum::body::to_bytes(body, MAX_FORWARDED_BODY)
        .await
        .map_err(|error| {
            (
                StatusCode::BAD_REQUEST,
                format!("reading the request body: {error}"),
            )
                .into_response()
        })
}

/// Sends the request made of `parts` and `body` to the agent at `base` (`http://host:port`),
/// marked as forwarded.
pub(super) async fn send(
    http: &ProxyClient,
    base: &str,
    parts: &axum::http::request::Parts,
    body: axum::body::Bytes,
) -> Result<reqwest::Response, String> {
    let path_and_query = parts
        .uri
        .path_and_query()
        .map_or("/", |path_and_query| path_and_query.as_str());
    let url = format!("{base}{path_and_query}");
    let mut outgoing = http.get()?.request(parts.method.clone(), &url).body(body);
    for (name, value) in &parts.headers {
        if name != axum::http::header::HOST && name != axum::http::header::CONTENT_LENGTH {
            outgoing = outgoing.header(name, value);
        }
    }
    outgoing
        .header(FORWARDED_HEADER, "1")
        .send()
        .await
        .map_err(|error| error.to_string())
}

/// The agent's answer, status, headers and (streamed) body, as the caller's response.
pub(super) fn relay(answer: reqwest::Response) -> Response {
    let mut response = Response::builder().status(answer.status());
    for (name, value) in answer.headers() {
        if name == axum::http::header::TRANSFER_ENCODING || name == axum::http::header::CONNECTION {
            continue;
        }
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_str().as_bytes()),
            HeaderValue::from_bytes(value.as_bytes()),
        ) {
            response = response.header(name, value);
        }
    }
    let stream = answer.bytes_stream().map_err(std::io::Error::other);
    response
        .body(Body::from_stream(stream))
        .unwrap_or_else(|error| {
            (
                StatusCode::BAD_GATEWAY,
                format!("relaying the answer: {error}"),
            )
                .into_response()
        })
}
