//! Forwarding of client endpoints to the node that holds the allocation.
//!
//! A user points the CLI or an API client at one agent — usually a server — and asks for an
//! allocation's logs, files or stats. Those live on the node that runs the allocation, so an
//! agent that does not hold it passes the request on to that node's HTTP API (the node's
//! `HTTPAddr`, as the servers know it) and streams the answer back unchanged, as Nomad's
//! servers forward client RPCs to the right node. A request already forwarded once is served
//! where it lands, so a stale address cannot make two agents bounce it between them.
//!
//! The other direction: a client-only agent keeps no cluster state, so everything but its own
//! endpoints (`/v1/client/…`, `/v1/agent/…`) goes to its servers, tried in the configured
//! order — `NOMAD_ADDR` pointed at a client node works as it does with Nomad.
//!
//! The websocket `exec` endpoint is forwarded too, by [`super::forward_exec`]: the node is
//! asked first, and the caller's connection is upgraded only once the node has accepted.
//!
//! Not here: serving any of these endpoints (the API crate does, on the agent that holds the
//! allocation).

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use drover_client::http_conn::base_url;
use drover_state::StateStore;
use futures_util::TryStreamExt as _;

use super::forward_exec::{exec_request_alloc, forward_exec};

/// Marks a request an agent has forwarded; the receiving agent serves it itself.
pub const FORWARDED_HEADER: &str = "x-drover-forwarded";

/// How long connecting to the node may take. The answer itself may stream for as long as the
/// caller follows it (`follow=true` logs), so no overall timeout applies.
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Largest request body forwarded: the agent's one limit, already enforced around this layer.
const MAX_FORWARDED_BODY: usize = drover_api::MAX_REQUEST_BODY;

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

/// Where a client-only agent sends what it does not serve itself.
#[derive(Clone)]
pub struct ServersContext {
    /// Base URLs (`http://host:port`) of the servers, in the configured order.
    pub servers: Vec<String>,
    pub http: reqwest::Client,
}

impl ServersContext {
    pub fn new(servers: &[String]) -> anyhow::Result<Arc<Self>> {
        let servers = servers
            .iter()
            .map(|server| base_url(server))
            .collect::<Result<Vec<_>, _>>()?;
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .build()?;
        Ok(Arc::new(Self { servers, http }))
    }
}

/// Whether a client-only agent answers `path` itself: its client endpoints, its own agent
/// endpoints, and the node calls (which a server would refuse anyway).
pub fn served_by_client_agent(path: &str) -> bool {
    ["/v1/client/", "/v1/agent/", "/v1/internal/"]
        .iter()
        .any(|prefix| path.starts_with(prefix))
        || !path.starts_with("/v1/")
}

/// The middleware of a client-only agent: cluster reads and writes go to the servers.
pub async fn forward_to_servers(
    State(context): State<Arc<ServersContext>>,
    request: Request,
    next: Next,
) -> Response {
    if request.headers().contains_key(FORWARDED_HEADER)
        || served_by_client_agent(request.uri().path())
    {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let body = match read_body(body).await {
        Ok(bytes) => bytes,
        Err(refused) => return refused,
    };
    let mut last_error = String::from("no server addresses are configured");
    for server in &context.servers {
        match send(&context.http, server, &parts, body.clone()).await {
            Ok(answer) => return relay(answer),
            Err(error) => {
                tracing::debug!(server, %error, "server unreachable; trying the next");
                last_error = format!("{server}: {error}");
            }
        }
    }
    (
        StatusCode::BAD_GATEWAY,
        format!("no server could be reached ({last_error})"),
    )
        .into_response()
}

/// The allocation a client endpoint is about: `/v1/client/fs/<op>/<alloc>` and
/// `/v1/client/allocation/<alloc>/<op>` (except the websocket `exec`, see
/// [`exec_request_alloc`]).
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
    if let Some(address) = exec_request_alloc(request.uri().path())
        .and_then(|alloc_id| context.remote_node_address(alloc_id))
    {
        return forward_exec(&context.http, &address, request).await;
    }
    let target = client_request_alloc(request.uri().path())
        .and_then(|alloc_id| context.remote_node_address(alloc_id));
    match target {
        Some(address) => forward(&context.http, &address, request).await,
        None => next.run(request).await,
    }
}

pub(super) async fn forward(http: &reqwest::Client, address: &str, request: Request) -> Response {
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

/// The whole request body, to be sent on (possibly to more than one server).
async fn read_body(body: Body) -> Result<axum::body::Bytes, Response> {
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
async fn send(
    http: &reqwest::Client,
    base: &str,
    parts: &axum::http::request::Parts,
    body: axum::body::Bytes,
) -> Result<reqwest::Response, String> {
    let path_and_query = parts
        .uri
        .path_and_query()
        .map_or("/", |path_and_query| path_and_query.as_str());
    let url = format!("{base}{path_and_query}");
    let mut outgoing = http.request(parts.method.clone(), &url).body(body);
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
fn relay(answer: reqwest::Response) -> Response {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_agent_serves_its_own_endpoints_and_passes_on_the_rest() {
        for own in [
            "/v1/client/fs/logs/abc",
            "/v1/client/stats",
            "/v1/agent/self",
            "/v1/internal/node/register",
            "/",
        ] {
            assert!(served_by_client_agent(own), "{own}");
        }
        for cluster in [
            "/v1/jobs",
            "/v1/job/web",
            "/v1/allocations",
            "/v1/event/stream",
        ] {
            assert!(!served_by_client_agent(cluster), "{cluster}");
        }
    }

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
