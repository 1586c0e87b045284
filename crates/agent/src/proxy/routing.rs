//! Which requests are forwarded, and where: a client request for another node's allocation goes
//! to that node, and a client-only agent sends what it does not serve to its servers.
//! `/v1/client/gc?node_id=<other>` and `/v1/client/metadata` naming another node (`?node_id=`,
//! or an apply's `NodeID`) go to the node they name, as Nomad's client RPCs do: from a
//! client-only agent through its servers, from a server to that node's agent.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use drover_client::http_conn::base_url;
use drover_state::StateStore;

use super::http::{FORWARDED_HEADER, ProxyClient, forward, read_body, relay, send};
use super::websocket::forward_exec;
use crate::node_meta_http::NODE_META_PATH;

/// What the forwarding layer needs: the agent's state (to find the allocation's node) and its
/// own node ID (requests for its own allocations are served locally).
#[derive(Clone)]
pub struct ForwardContext {
    pub state: StateStore,
    pub local_node_id: String,
    pub http: ProxyClient,
}

impl ForwardContext {
    pub fn new(state: StateStore, local_node_id: String) -> Arc<Self> {
        Arc::new(Self {
            state,
            local_node_id,
            http: ProxyClient::default(),
        })
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
    /// The agent's own node: a client request naming another node goes to the servers.
    pub local_node_id: String,
    pub http: ProxyClient,
}

impl ServersContext {
    pub fn new(servers: &[String], local_node_id: String) -> anyhow::Result<Arc<Self>> {
        let servers = servers
            .iter()
            .map(|server| base_url(server))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Arc::new(Self {
            servers,
            local_node_id,
            http: ProxyClient::default(),
        }))
    }
}

/// Whether a client-only agent answers `path` itself: its client endpoints, its own agent
/// endpoints, and the node calls (which a server would refuse anyway). The mesh CA's
/// (`/v1/agent/connect/ca/…`) is the servers'.
pub fn served_by_client_agent(path: &str) -> bool {
    if path.starts_with("/v1/agent/connect/ca/") {
        return false;
    }
    ["/v1/client/", "/v1/agent/", "/v1/internal/"]
        .iter()
        .any(|prefix| path.starts_with(prefix))
        || !path.starts_with("/v1/")
}

/// The middleware of a client-only agent: cluster reads and writes go to the servers, and so
/// does a node endpoint naming another node.
pub async fn forward_to_servers(
    State(context): State<Arc<ServersContext>>,
    request: Request,
    next: Next,
) -> Response {
    if request.headers().contains_key(FORWARDED_HEADER) {
        return next.run(request).await;
    }
    let (request, named) = match node_named_by(request).await {
        Ok(found) => found,
        Err(refused) => return refused,
    };
    let for_another_node = named.is_some_and(|node_id| node_id != context.local_node_id);
    if served_by_client_agent(request.uri().path()) && !for_another_node {
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

/// Nomad's client GC endpoint, whose `node_id` may name another node.
const CLIENT_GC_PATH: &str = "/v1/client/gc";

/// The client endpoints that name their node rather than an allocation: `/v1/client/gc` and
/// `/v1/client/metadata` (`?node_id=`; an apply may name it in its body's `NodeID`).
pub fn names_its_node(path: &str) -> bool {
    path == CLIENT_GC_PATH || path == NODE_META_PATH
}

/// The node `?node_id=` names on one of the endpoints of [`names_its_node`].
pub fn node_named_in_query(path: &str, query: Option<&str>) -> Option<String> {
    if !names_its_node(path) {
        return None;
    }
    drover_api::params::QueryParams::parse(query)
        .non_empty("node_id")
        .map(str::to_owned)
}

/// The node a request names, with the request to pass on: the query's `node_id`, else — for a
/// metadata apply — its body's `NodeID` (Nomad's `parseNode` order). Only such an apply has
/// its body read (and put back).
async fn node_named_by(request: Request) -> Result<(Request, Option<String>), Response> {
    let path = request.uri().path();
    if let Some(named) = node_named_in_query(path, request.uri().query()) {
        return Ok((request, Some(named)));
    }
    if path != NODE_META_PATH || request.method() != axum::http::Method::POST {
        return Ok((request, None));
    }
    let (parts, body) = request.into_parts();
    let bytes = read_body(body).await?;
    let named = serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .and_then(|value| {
            value.as_object().and_then(|object| {
                object
                    .iter()
                    .find(|(key, _)| key.eq_ignore_ascii_case("NodeID"))
                    .and_then(|(_, value)| value.as_str())
                    .filter(|node_id| !node_id.is_empty())
                    .map(str::to_owned)
            })
        });
    Ok((
        Request::from_parts(parts, axum::body::Body::from(bytes)),
        named,
    ))
}

/// Where a server agent sends a request of [`names_its_node`].
enum NodeRoute {
    /// Its own client answers.
    Local,
    /// The named node's agent, at this HTTP address.
    Node(String),
    /// Nomad's refusal.
    Refused(StatusCode, String),
}

/// Where a node-naming request goes from a server agent: no node named and no local client is
/// a 400, an unknown node a 404 `Unknown node` (Nomad's `getNodeForRpc` words; Nomad answers
/// it with a 500), a node without a connection a 404.
fn node_route(context: &ForwardContext, named: Option<String>) -> NodeRoute {
    let Some(node_id) = named else {
        return if context.local_node_id.is_empty() {
            NodeRoute::Refused(
                StatusCode::BAD_REQUEST,
                "No local Node and node_id not provided".to_owned(),
            )
        } else {
            NodeRoute::Local
        };
    };
    if node_id == context.local_node_id {
        return NodeRoute::Local;
    }
    let Some(node) = context.state.node(&node_id) else {
        // Nomad answers this with a 500; the caller named a node that is not there.
        return NodeRoute::Refused(StatusCode::NOT_FOUND, format!("Unknown node {node_id}"));
    };
    if node.http_addr.is_empty() || node.status == drover_structs::NODE_STATUS_DOWN {
        return NodeRoute::Refused(StatusCode::NOT_FOUND, "No path to node".to_owned());
    }
    NodeRoute::Node(node.http_addr.clone())
}

/// The middleware: forwards a client request for another node's allocation, serves the rest.
pub async fn forward_client_requests(
    State(context): State<Arc<ForwardContext>>,
    request: Request,
    next: Next,
) -> Response {
    // A node-naming request may come once forwarded (from a client-only agent, which cannot
    // reach the node itself); what this server forwards on is marked twice and served where it
    // lands.
    let request = if names_its_node(request.uri().path())
        && request.headers().get_all(FORWARDED_HEADER).iter().count() <= 1
    {
        let (request, named) = match node_named_by(request).await {
            Ok(found) => found,
            Err(refused) => return refused,
        };
        match node_route(&context, named) {
            NodeRoute::Local => request,
            NodeRoute::Node(address) => return forward(&context.http, &address, request).await,
            NodeRoute::Refused(status, message) => return (status, message).into_response(),
        }
    } else {
        request
    };
    if request.headers().contains_key(FORWARDED_HEADER) {
        return next.run(request).await;
    }
    if let Some(address) = exec_request_alloc(request.uri().path())
        .or_else(|| action_request_alloc(request.uri()))
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

/// The allocation of a task action's websocket: `/v1/job/<job>/action?allocID=<alloc>`.
fn action_request_alloc(uri: &axum::http::Uri) -> Option<&str> {
    drover_api::routes::job_action_path(uri.path())?;
    uri.query()?
        .split('&')
        .find_map(|pair| pair.strip_prefix("allocID="))
        .filter(|alloc_id| !alloc_id.is_empty() && !alloc_id.contains(['/', '%']))
}

/// The allocation of an exec request: `/v1/client/allocation/<alloc>/exec`.
pub fn exec_request_alloc(path: &str) -> Option<&str> {
    let alloc_id = path
        .strip_prefix("/v1/client/allocation/")?
        .strip_suffix("/exec")?;
    (!alloc_id.is_empty() && !alloc_id.contains('/')).then_some(alloc_id)
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
            "/v1/agent/connect/proxy/stats",
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
            "/v1/agent/connect/ca/roots",
            "/v1/agent/connect/ca/leaf/api",
            "/v1/connect/intentions/match",
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

    #[test]
    fn exec_requests_name_their_allocation() {
        assert_eq!(
            exec_request_alloc("/v1/client/allocation/abc-123/exec"),
            Some("abc-123")
        );
        for other in [
            "/v1/client/allocation/abc/stats",
            "/v1/client/allocation//exec",
            "/v1/client/allocation/exec",
            "/v1/client/allocation/a/b/exec",
            "/v1/client/allocation/abc/exec/more",
            "/v1/client/fs/logs/abc",
            "/v1/allocation/abc/exec",
        ] {
            assert_eq!(exec_request_alloc(other), None, "{other}");
        }
    }
}
