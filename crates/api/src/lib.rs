//! The HTTP boundary: axum routes speaking Nomad's `/v1` JSON API, and the typed Rust client the
//! CLI uses.
//!
//! **Boundary**: maps requests to commands on the server and client and back; no business logic.
//! The agent plugs in through [`ApiBackend`]; [`app()`] builds the router, [`client::ApiClient`]
//! talks to it.
//!
//! # Layers
//!
//! Each module directly under `src/` uses only modules on the lines below its own (`error`
//! modules aside), as `crates/structs/tests/module_cycles.rs` checks; top first:
//!
//! - `app_tests`, `services_tests`, `state_store`
//! - `app`
//! - `paginate`
//! - `bexpr`, `blocking`, `logs`, `memory`
//! - `backend`, `body_limit`, `clean_path`, `client`, `fs`, `params`, `routes`
//!
//! # Design notes
//!
//! Axum routes for Nomad's `/v1` API and the typed Rust client the CLI uses; also
//! the `/v1/internal/…` routes remote client nodes call (`app::node_rpc`, and
//! `app::services` for service registrations; their bodies are `structs::client_rpc`, shared
//! with the client's `http_conn`). A read's `X-Nomad-Index` is its own tables' index, as
//! Nomad's `Index(table)`: 0 for a table never written, sent as is (`app::respond`), floored
//! at 1 only where Nomad's endpoint floors it. `app::services` also serves Nomad's catalog reads:
//! `/v1/services`, `/v1/service/<name>` (blocking, `choose`, and a repeatable `tag` filter,
//! which Nomad does not have), `DELETE /v1/service/<name>/<id>`, and the services of an
//! allocation or a job. `status/leader` and
//! `status/peers` answer the server's HTTP address (servers talk HTTP, there is no RPC port),
//! `agent/servers` the client's servers (a `PUT` replaces them, Nomad's `SetServers`, on a client
//! that reaches its servers over HTTP; a client whose server is in its own process refuses it),
//! `agent/health` the backend's checks (server: its
//! store takes writes; client: registered and heartbeats answered within the TTL), 500 with
//! Nomad's JSON when one fails. Lists take Nomad's `filter` (`bexpr`: go-bexpr's grammar and
//! matching, evaluated on each object's JSON — the full object, as Nomad's paginator sees it,
//! not the stub) and `per_page`/`next_token`/`reverse` (`paginate`: Nomad's walk and token
//! formats) on jobs, allocations, evaluations, nodes, deployments and `/v1/service/<name>`;
//! `app::submit` also answers `GET /v1/job/<id>/submission?version=N` (the stored jobspec
//! source, `VariableFlags` query-escaped on the way in and unescaped on the way out, as
//! Nomad's agent does);
//! `app::search` answers `PUT /v1/search` (prefix search), `app::fuzzy` `PUT /v1/search/fuzzy`
//! (Nomad's fuzzy search: names of jobs and their groups, services, tasks and driver
//! commands/images/classes, allocations, nodes, namespaces; evaluations and deployments by ID
//! prefix; Nomad's default limits and ordering); `app::statuses` answers `/v1/jobs/statuses`
//! (Nomad 1.8's jobs index: paged by modify index, blocking on the highest index among the
//! page's jobs, allocations and deployments); `app::scaling` `/v1/job/<id>/scale` (the
//! scale status, a scaling action) and `/v1/scaling/policies`, `/v1/scaling/policy/<id>`.
//! **Boundary**: maps requests to
//! server/client commands and back; no business logic; does not depend on `client`.
//! **Invariant**: a file of an alloc dir (fs endpoints, log streams) is resolved and opened in
//! one step beneath the alloc dir (`openat2` `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`, or an
//! `O_NOFOLLOW` walk where the kernel lacks it), only regular files are read, and file bodies
//! are streamed, never read whole; reading a task's `secrets/` (asked for, or reached through a
//! symlink) is refused as Nomad does ("Reading secret file prohibited"). **Invariant**: one limit on request bodies
//! (`body_limit::MAX_REQUEST_BODY`, 2 MiB; 413 past it), applied by the agent around the
//! forwarding layer, so direct and forwarded requests meet the same limit.
//! `clean_path`: the agent's outermost layer, Go's router's: a path that is not canonical
//! (empty, `.` or `..` segments, compared decoded) is a 301 to its cleaned form.

pub mod app;
#[cfg(test)]
mod app_tests;
pub mod backend;
pub mod bexpr;
pub mod blocking;
pub mod body_limit;
pub mod clean_path;
pub mod client;
#[cfg(test)]
mod services_tests;
pub use drover_structs::client_rpc;
pub mod error;
pub mod fs;
pub mod logs;
#[cfg(any(test, feature = "memory-backend"))]
pub mod memory;
pub mod paginate;
pub mod params;
pub mod routes;
pub mod state_store;

pub use app::exec::HandshakeTokenCheck;
pub use app::{ApiOptions, app, app_with_options};
pub use backend::{
    AgentInfo, AgentOperations, ApiBackend, Composed, ExecInput, ExecOutput, ExecRequest,
    ExecSession, StateReads, Table,
};
pub use body_limit::{MAX_REQUEST_BODY, MAX_SNAPSHOT_BODY, body_limit_for, limit_request_body};
pub use error::ApiError;
