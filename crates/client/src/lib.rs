//! The client (node agent). Node part: registration and heartbeats, the allocation watcher and
//! the map of alloc runners ([`node::Client`]), fingerprinting, the batched status updates and
//! the client↔server trait ([`server_conn::ServerConn`]), and a minimal simulated alloc runner.
//! Per-allocation part: alloc runners and their lifecycle coordinator, task runners and their
//! hook pipeline, the restart tracker, alloc dirs and task environments, and the persisted client
//! state their restore reads.
//!
//! **Boundary**: talks to the server only through the client↔server trait (node part of this
//! crate); knows no HTTP routes. Status leaves through [`allocrunner::AllocStatusSink`].

pub mod allocdir;
pub mod allocrunner;
pub mod clock;
pub mod config;
pub mod fingerprint;
pub mod node;
pub mod node_sim;
pub mod runner_factory;
pub mod server_conn;
pub mod state_db;
pub mod status_buffer;
pub mod taskenv;
pub mod taskrunner;
#[cfg(test)]
mod testing;

pub use allocrunner::{
    AllocClientUpdate, AllocRunner, AllocRunnerDeps, AllocRunnerError, AllocStatusSink,
};
pub use clock::{Clock, SharedClock, SystemClock, TokioFollowingClock};
pub use config::ClientConfig;
pub use state_db::{StateDb, StateDbError};
