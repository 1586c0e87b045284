//! The client (node agent).
//!
//! Per allocation (this part): [`allocrunner::AllocRunner`] runs an allocation's task runners
//! in lifecycle order and reports through [`allocrunner::AllocStatusSink`];
//! [`taskrunner::TaskRunner`] drives one task (state machine, hook pipeline, restart tracker,
//! kill) against a [`taskrunner::driver::TaskDriver`]; [`allocdir`] lays out alloc dirs;
//! [`taskenv`] builds task environments; [`network`] sets up group networks (a namespace per
//! allocation, through the CNI plugins); [`state_db`] persists what restore needs; [`clock`]
//! gives wall-clock time (durations use tokio time).
//!
//! Per node (the other part): [`node::Client`] registers and heartbeats, runs the alloc watcher
//! that creates, updates and destroys alloc runners, restores them on start and answers the API's
//! alloc operations; [`server_conn::ServerConn`] is the client↔server trait;
//! [`status_buffer`] batches status updates; [`fingerprint`] describes the machine;
//! [`runner_factory`] puts the real alloc runner behind the node's small runner interface, and
//! `node_sim` a simulated one (plus an in-memory server) for tests and fleet benchmarks (feature
//! `testing`, with the fake `mock_driver`; neither is in the agent a user runs);
//! [`services`] turns task and group `service` blocks into catalog registrations.
//!
//! **Boundary**: talks to the server only through the client↔server trait; knows no HTTP routes.

pub mod allocdir;
pub mod allocrunner;
pub mod artifact;
pub mod checks;
pub mod clock;
pub mod config;
pub(crate) mod error_text;
pub mod fingerprint;
pub mod host_stats;
pub mod http_conn;
pub mod identity;
pub(crate) mod mountinfo;
pub mod network;
pub mod node;
#[cfg(any(test, feature = "testing"))]
pub mod node_sim;
pub mod runner_factory;
pub mod server_conn;
pub mod services;
pub mod state_db;
pub mod status_buffer;
pub mod task_metrics;
pub mod taskenv;
pub mod taskrunner;
pub mod template;
#[cfg(test)]
mod testing;
#[cfg(any(test, feature = "testing"))]
#[allow(clippy::expect_used)] // a test fixture: a failed bind is a failed test
pub mod testing_grpc;
#[cfg(test)]
mod testing_tls;

pub use allocrunner::{
    AllocClientUpdate, AllocRunner, AllocRunnerDeps, AllocRunnerError, AllocStatusSink,
};
pub use clock::{Clock, SharedClock, SystemClock, TokioFollowingClock};
pub use config::ClientConfig;
pub use state_db::{StateDb, StateDbError};
