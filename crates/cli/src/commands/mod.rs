//! One module per command family. Each command resolves IDs by prefix the way Nomad does, calls
//! the API, and prints Nomad-shaped output; errors go to standard error with exit code 1.

pub mod acl;
pub mod agent_monitor;
pub mod alloc;
pub mod connect_proxy;
pub mod deployment;
pub mod deployment_view;
pub mod eval;
pub mod exec;
pub mod intention;
pub mod job;
pub mod job_history;
pub mod job_input;
pub mod job_plan;
pub mod job_restart;
pub mod job_scale;
pub mod job_tag;
pub mod login;
pub mod lookup;
pub mod monitor;
pub mod namespace;
pub mod node;
pub mod node_pool;
pub mod operator;
pub mod scaling;
pub mod server;
pub mod service;
pub mod status;
pub mod system;
pub mod var;

use drover_api::client::ClientError;

/// The error line for a failed call: `Error <doing>: <why>`. A refused connection names the
/// address the agent was expected at.
pub fn describe(doing: &str, error: &ClientError) -> String {
    format!("Error {doing}: {error}")
}
