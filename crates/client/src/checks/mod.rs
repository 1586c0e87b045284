//! Service checks run by the client (Nomad's built-in provider checks, and Consul-provider
//! checks, since this agent has no Consul): `http`, `tcp`, `grpc` and `script` probes, Consul's status
//! counters, `check_restart`, and the alloc-level hook that runs them while tasks run.
//!
//! - `status`: the pure counters (`success_before_passing`, `failures_before_*`) and the
//!   `check_restart` watch;
//! - `probe`: one run of one check; `grpc`: the gRPC health call;
//! - `hook`: the observers of an allocation's checks, their results and their persistence.
//!
//! Not here: registering services in a catalog, or the HTTP route that shows the results.

pub mod grpc;
pub mod hook;
pub mod probe;
pub mod status;

pub use hook::{CheckedTask, ChecksDeps, ChecksHook};
