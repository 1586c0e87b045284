//! The node: the [`Client`] that registers this machine with the servers, keeps it alive with
//! heartbeats, watches the allocations placed on it, and owns one alloc runner per allocation.
//!
//! ```text
//!  start ─▶ node id (data dir) ─▶ fingerprint ─▶ restore runners ─▶ register ─┬─▶ heartbeat loop
//!                                                                           ├─▶ alloc watcher
//!                                                                           ├─▶ status sender
//!                                                                           └─▶ stop on lost servers
//!  alloc watcher, one round:
//!    node_allocs(min_index) ── blocking query ──▶ { alloc id → AllocModifyIndex }
//!      index newer than the runner's (or no runner)  → pull
//!      runner without a server entry                 → destroy + forget   (server GC'd it)
//!    get_allocs(pull) ─▶ runner exists  → runner.update(alloc)
//!                        new, live      → factory.spawn(alloc)
//!                        new, terminal  → remembered, never run
//! ```
//!
//! A terminal allocation keeps its runner (and alloc dir, for logs) until the server drops it or
//! someone asks for [`Client::gc`]. Shutting down comes in two kinds that must not be confused:
//! [`Client::shutdown`] leaves every task running for the next agent to re-attach to, while
//! [`Client::shutdown_and_stop_all`] (dev mode without a data dir) destroys every allocation.
//!
//! The client does not know what runs an allocation: it drives runners through the small
//! [`AllocRunnerHandle`] / [`AllocRunnerFactory`] pair, which the real alloc runner and the node
//! simulator's fake both implement.
//!
//! **Not here**: HTTP routes (the API crate maps [`ClientError::kind`] to a status), running
//! tasks (the alloc runner), the wire format (the [`ServerConn`](crate::server_conn::ServerConn) implementation).

mod client;
mod config;
mod error;
mod gc;
mod heartbeat;
mod heartbeat_stop;
mod identity;
mod meta;
mod meta_store;
mod operations;
mod runner;
mod watcher;

pub use client::{Client, HeartbeatStatus, ServerContact};
pub use config::{
    DEFAULT_ALLOC_QUERY_WAIT, DEFAULT_GC_DISK_USAGE_THRESHOLD, DEFAULT_GC_INODE_USAGE_THRESHOLD,
    DEFAULT_GC_INTERVAL, DEFAULT_GC_MAX_ALLOCS, DEFAULT_GC_PARALLEL_DESTROYS, NodeConfig,
    NodeResourceSettings, RetryTiming,
};
pub use error::{ClientError, ClientErrorKind};
pub use identity::{NodeIdentity, build_node};
pub use meta_store::NODE_META_FILE;
pub use operations::alloc_resource_usage;
pub use runner::{AllocRunnerFactory, AllocRunnerHandle, RunnerContext};
