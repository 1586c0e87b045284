//! Waiting for an allocation's previous allocation (Nomad's `allocwatcher` and upstream allocs
//! hook): an allocation that replaces another (`PreviousAllocation` set) starts none of its
//! tasks until the one it replaces is terminal, so a destructive update on the same node does
//! not start the new version while the old one still holds its static ports or its files.
//!
//! - The previous allocation ran on this node (its runner is in the node's [`LocalAllocs`]):
//!   its runner's status is watched until its client status is terminal.
//! - Otherwise the servers are asked ([`AllocReader`], the node's server connection) every
//!   [`REMOTE_POLL_INTERVAL`] until it is client-terminal or `unknown`; an allocation the
//!   servers no longer know means "go on", as Nomad.
//!
//! The wait is cancelled by whoever stops the allocation (the alloc runner passes its
//! cancellation token); a cancelled wait starts nothing.
//!
//! **Not here**: holding the tasks back (the coordinator's hold, released by the alloc runner)
//! or moving the previous allocation's data (the alloc runner, through
//! `AllocDir::move_from`, once the wait ends with [`Upstream::Local`]).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use drover_structs::{ALLOC_CLIENT_STATUS_UNKNOWN, Allocation, is_terminal_client_status};
use tokio_util::sync::CancellationToken;

use super::{AllocRunner, AllocRunnerInner};
use crate::mutex::lock;
use crate::server_conn::{ServerConn, ServerConnError};

/// How often the servers are asked about a previous allocation on another node.
pub const REMOTE_POLL_INTERVAL: Duration = Duration::from_secs(1);

/// How long to wait before asking again after the servers could not answer.
pub const REMOTE_RETRY_INTERVAL: Duration = Duration::from_secs(5);

/// A boxed answer of [`AllocReader::read_alloc`].
pub type ReadAllocFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Option<Allocation>, ServerConnError>> + Send + 'a>>;

/// Reads one allocation from the servers (Nomad's `Alloc.GetAlloc`); `None` when they do not
/// know it.
pub trait AllocReader: Send + Sync + std::fmt::Debug {
    fn read_alloc<'a>(&'a self, alloc_id: &'a str) -> ReadAllocFuture<'a>;
}

/// An [`AllocReader`] over the node's server connection.
pub struct ConnAllocReader<S: ServerConn> {
    conn: Arc<S>,
}

impl<S: ServerConn> ConnAllocReader<S> {
    pub fn new(conn: Arc<S>) -> Self {
        ConnAllocReader { conn }
    }
}

impl<S: ServerConn> std::fmt::Debug for ConnAllocReader<S> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("ConnAllocReader")
            .finish_non_exhaustive()
    }
}

impl<S: ServerConn> AllocReader for ConnAllocReader<S> {
    fn read_alloc<'a>(&'a self, alloc_id: &'a str) -> ReadAllocFuture<'a> {
        Box::pin(async move {
            let allocs = self.conn.get_allocs(vec![alloc_id.to_owned()]).await?;
            Ok(allocs.into_iter().find(|alloc| alloc.id == alloc_id))
        })
    }
}

/// A reader for runners that have no servers (the crate's own tests): it knows no allocation,
/// so nothing waits on a previous allocation that is not on this node.
#[cfg(any(test, feature = "testing"))]
#[derive(Debug, Default, Clone, Copy)]
pub struct NoServersReader;

#[cfg(any(test, feature = "testing"))]
impl AllocReader for NoServersReader {
    fn read_alloc<'a>(&'a self, _alloc_id: &'a str) -> ReadAllocFuture<'a> {
        Box::pin(async { Ok(None) })
    }
}

/// The alloc runners of one node, by allocation ID, as long as they live (a destroyed runner
/// leaves at once).
#[derive(Debug, Default)]
pub struct LocalAllocs {
    runners: Mutex<HashMap<String, Weak<AllocRunnerInner>>>,
}

impl LocalAllocs {
    pub(super) fn insert(&self, alloc_id: &str, inner: &Arc<AllocRunnerInner>) {
        lock(&self.runners).insert(alloc_id.to_owned(), Arc::downgrade(inner));
    }

    pub(super) fn remove(&self, alloc_id: &str) {
        lock(&self.runners).remove(alloc_id);
    }

    /// The live runner of `alloc_id` on this node, if any.
    pub fn get(&self, alloc_id: &str) -> Option<AllocRunner> {
        let mut runners = lock(&self.runners);
        let inner = runners.get(alloc_id)?.upgrade();
        match inner {
            Some(inner) => Some(AllocRunner { inner }),
            None => {
                runners.remove(alloc_id);
                None
            }
        }
    }
}

/// What an alloc runner needs to find its previous allocation: the node's runners and its
/// servers. Cheap to clone; every runner of a node shares one.
#[derive(Debug, Clone)]
pub struct UpstreamAllocs {
    pub local: Arc<LocalAllocs>,
    pub remote: Arc<dyn AllocReader>,
}

/// A node of its own with no servers (tests).
#[cfg(any(test, feature = "testing"))]
impl Default for UpstreamAllocs {
    fn default() -> Self {
        UpstreamAllocs {
            local: Arc::new(LocalAllocs::default()),
            remote: Arc::new(NoServersReader),
        }
    }
}

/// How the wait for a previous allocation ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Upstream {
    /// It was on this node and is terminal now; its runner (for its dirs) is given.
    Local(AllocRunner),
    /// It was on another node and is terminal (or `unknown`) now; its node is given.
    Remote { node_id: String },
    /// The servers no longer know it (collected): nothing to wait for or take data from.
    Gone,
    /// The wait was cancelled.
    Cancelled,
}

impl PartialEq for AllocRunner {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl Eq for AllocRunner {}

/// Waits until `prev_alloc_id` is terminal (module docs), or `cancel`.
pub async fn wait_previous(
    upstream: &UpstreamAllocs,
    prev_alloc_id: &str,
    cancel: &CancellationToken,
) -> Upstream {
    if let Some(previous) = upstream.local.get(prev_alloc_id) {
        let mut status = previous.subscribe_status();
        tracing::info!(
            previous_alloc = prev_alloc_id,
            "waiting for previous alloc to terminate"
        );
        loop {
            if is_terminal_client_status(&status.borrow_and_update().client_status) {
                return Upstream::Local(previous);
            }
            tokio::select! {
                () = cancel.cancelled() => return Upstream::Cancelled,
                changed = status.changed() => {
                    if changed.is_err() {
                        // The runner is gone (destroyed): nothing of it runs any more.
                        return Upstream::Local(previous);
                    }
                }
            }
        }
    }
    tracing::info!(
        previous_alloc = prev_alloc_id,
        "waiting for remote previous alloc to terminate"
    );
    loop {
        let read = tokio::select! {
            () = cancel.cancelled() => return Upstream::Cancelled,
            read = upstream.remote.read_alloc(prev_alloc_id) => read,
        };
        let pause = match read {
            Ok(None) => {
                tracing::debug!(
                    previous_alloc = prev_alloc_id,
                    "previous alloc was collected"
                );
                return Upstream::Gone;
            }
            Ok(Some(alloc))
                if alloc.client_terminal_status()
                    || alloc.client_status == ALLOC_CLIENT_STATUS_UNKNOWN =>
            {
                return Upstream::Remote {
                    node_id: alloc.node_id,
                };
            }
            Ok(Some(_)) => REMOTE_POLL_INTERVAL,
            Err(ServerConnError::Rejected { message }) => {
                tracing::warn!(previous_alloc = prev_alloc_id, %message, "unable to read previous alloc; not waiting for it");
                return Upstream::Gone;
            }
            Err(error) => {
                tracing::warn!(previous_alloc = prev_alloc_id, %error, "error querying previous alloc");
                REMOTE_RETRY_INTERVAL
            }
        };
        tokio::select! {
            () = cancel.cancelled() => return Upstream::Cancelled,
            () = tokio::time::sleep(pause) => {}
        }
    }
}
