//! The HTTP boundary: axum routes speaking Nomad's `/v1` JSON API, and the typed Rust client the
//! CLI uses.
//!
//! **Boundary**: maps requests to commands on the server and client and back; no business logic.
//! The agent plugs in through [`ApiBackend`]; [`app()`] builds the router, [`client::ApiClient`]
//! talks to it.

pub mod app;
#[cfg(test)]
mod app_tests;
pub mod backend;
pub mod bexpr;
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

pub use app::{ApiOptions, HandshakeTokenCheck, app, app_with_options};
pub use backend::{
    AgentInfo, AgentOperations, ApiBackend, Composed, ExecInput, ExecOutput, ExecRequest,
    ExecSession, StateReads, Table,
};
pub use body_limit::{MAX_REQUEST_BODY, MAX_SNAPSHOT_BODY, body_limit_for, limit_request_body};
pub use error::ApiError;
