//! Forwarding of client endpoints to the node that holds the allocation.
//!
//! A user points the CLI or an API client at one agent — usually a server — and asks for an
//! allocation's logs, files or stats. Those live on the node that runs the allocation, so an
//! agent that does not hold it passes the request on to that node's HTTP API (the node's
//! `HTTPAddr`, as the servers know it) and streams the answer back unchanged, as Nomad's
//! servers forward client RPCs to the right node. A request already forwarded once is served
//! where it lands, so a stale address cannot make two agents bounce it between them.
//!
//! Not here: the websocket `exec` endpoint (served only by the agent that holds the
//! allocation; the CLI connects there), and reads of jobs, allocations or nodes, which every
//! server answers from its own state.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use drover_state::StateStore;
use futures_util::TryStreamExt as _;

/// Marks a request an agent has forwarded; the receiving agent serves it itself.
pub const FORWARDED_HEADER: &str = "x-drover-forwarded";

/// How long connecting to the node may take. The answer itself may stream for as long as the
/// caller follows it (`follow=true` logs), so no overall timeout applies.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Largest request body forwarded (client endpoints take small JSON bodies, if any).
const MAX_FORWARDED_BODY: usize = 1024 * 1024;

/// What the forwarding layer needs: the agent's state (to find the allocation's node) and its
/// own node ID (requests for its own allocations are served locally).
#[derive(Clone)]
pub struct ForwardContext {
    pub state: StateStore,
    pub local_node_id: String,
    pub http: reqwest::Client,
}

impl ForwardContext {
    pub fn new(state: StateStore, local_node_id: String) -> anyhow::Result<Arc<Self>> {
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .build()?;
        Ok(Arc::new(Self {
            state,
            local_node_id,
            http,
        }))
    }

    /// The HTTP address of the node holding `alloc_id`, when that is another node.
    fn remote_node_address(&self, alloc_id: &str) -> Option<String> {
        let alloc = self.state.alloc(alloc_id)?;
        if alloc.node_id.is_empty() || alloc.node_id == self.local_node_id {
            return None;
        }
        let node = self.state.node(&alloc.node_id)?;
        (!node.http_addr.is_empty()).then(|| node.http_addr.clone())
    }
}

/// The allocation a client endpoint is about: `/v1/client/fs/<op>/<alloc>` and
/// `/v1/client/allocation/<alloc>/<op>` (except the websocket `exec`).
pub fn client_request_alloc(path: &str) -> Option<&str> {
    if let Some(rest) = path.strip_prefix("/v1/client/fs/") {
        let (_operation, alloc_id) = rest.split_once('/')?;
        return (!alloc_id.is_empty() && !alloc_id.contains('/')).then_some(alloc_id);
    }
    let rest = path.strip_prefix("/v1/client/allocation/")?;
    let (alloc_id, operation) = rest.split_once('/')?;
    (!alloc_id.is_empty() && !operation.is_empty() && operation != "exec").then_some(alloc_id)
}

/// The middleware: forwards a client request for another node's allocation, serves the rest.
pub async fn forward_client_requests(
    State(context): State<Arc<ForwardContext>>,
    request: Request,
    next: Next,
) -> Response {
    if request.headers().contains_key(FORWARDED_HEADER) {
        return next.run(request).await;
    }
    let target = client_request_alloc(request.uri().path())
        .and_then(|alloc_id| context.remote_node_address(alloc_id));
    match target {
        Some(address) => forward(&context.http, &address, request).await,
        None => next.run(request).await,
    }
}

async fn forward(http: &reqwest::Client, address: &str, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let path_and_query = parts
        .uri
        .path_and_query()
        .map_or("/", |path_and_query| path_and_query.as_str());
    let url = format!("http://{address}{path_and_query}");
    let body = match axum::body::to_bytes(body, MAX_FORWARDED_BODY).await {
        Ok(bytes) => bytes,
        Err(error) => {
            return (
                StatusCode::BAD_REQUEST,
                format!("reading the request body: {error}"),
            )
                .into_response();
        }
    };
    let mut outgoing = http.request(parts.method.clone(), &url).body(body);
    for (name, value) in &parts.headers {
        if name != axum::http::header::HOST && name != axum::http::header::CONTENT_LENGTH {
            outgoing = outgoing.header(name, value);
        }
    }
    outgoing = outgoing.header(FORWARDED_HEADER, "1");
    let answer = match outgoing.send().await {
        Ok(answer) => answer,
        Err(error) => {
            tracing::warn!(%url, %error, "forwarding a client request to its node failed");
            return (
                StatusCode::BAD_GATEWAY,
                format!("the node holding this allocation ({address}) cannot be reached: {error}"),
            )
                .into_response();
        }
    };
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
                format!("relaying the node's answer: {error}"),
            )
                .into_response()
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_endpoints_name_their_allocation() {
        assert_eq!(
            client_request_alloc("/v1/client/fs/logs/abc-123"),
            Some("abc-123")
        );
        assert_eq!(client_request_alloc("/v1/client/fs/cat/abc"), Some("abc"));
        assert_eq!(
            client_request_alloc("/v1/client/allocation/abc/stats"),
            Some("abc")
        );
        assert_eq!(
            client_request_alloc("/v1/client/allocation/abc/restart"),
            Some("abc")
        );
        for local in [
            "/v1/client/allocation/abc/exec",
            "/v1/client/stats",
            "/v1/client/fs/logs/",
            "/v1/client/fs/logs",
            "/v1/allocation/abc",
            "/v1/jobs",
        ] {
            assert_eq!(client_request_alloc(local), None, "{local}");
        }
    }
}
