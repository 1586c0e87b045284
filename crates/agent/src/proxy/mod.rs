//! Forwarding: requests an agent does not serve itself are relayed to the agent that does.
//!
//! A user points the CLI or an API client at one agent — usually a server — and asks for an
//! allocation's logs, files, stats or an exec session. Those live on the node that runs the
//! allocation, so an agent that does not hold it passes the request on to that node's HTTP API
//! (the node's `HTTPAddr`, as the servers know it) and streams the answer back unchanged, as
//! Nomad's servers forward client RPCs to the right node. A request already forwarded once is
//! served where it lands, so a stale address cannot make two agents bounce it between them.
//!
//! The other direction: a client-only agent keeps no cluster state, so everything but its own
//! endpoints (`/v1/client/…`, `/v1/agent/…`) goes to its servers, tried in the configured
//! order — `NOMAD_ADDR` pointed at a client node works as it does with Nomad.
//!
//! ```text
//!  routing    which requests go where (the two middlewares)
//!     ├──▶ http       one request relayed, answer streamed back
//!     └──▶ websocket  an exec session relayed message by message (falls back to http when the
//!                     request is not an upgrade)
//! ```
//!
//! Not here: serving any of these endpoints (the API crate does, on the agent that holds the
//! allocation), or the exec protocol itself.

mod http;
mod routing;
mod websocket;

pub use http::{CONNECT_TIMEOUT, FORWARDED_HEADER, ProxyClient, forward, forward_to_server};
pub use routing::{
    ForwardContext, ServersContext, client_request_alloc, exec_request_alloc,
    forward_client_requests, forward_to_servers, node_named_in_query, served_by_client_agent,
};
pub use websocket::{ExecForwardError, forward_exec};
