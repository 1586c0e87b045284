//! The small interface between the node and whatever runs an allocation: the handle the node
//! keeps per allocation and the factory that makes them.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use drover_structs::{Allocation, Node};

use super::error::ClientError;
use crate::status_buffer::StatusBuffer;

/// The handle the node keeps for each allocation: what the client needs from an alloc runner,
/// and no more. The real alloc runner implements it, and so does the node simulator's fake
/// (`node_sim`), which is the proof that this is all a runner must offer.
pub trait AllocRunnerHandle: Send + Sync + 'static {
    /// The allocation as the runner knows it: the server's fields as last received, with the
    /// runner's own client status and task states.
    fn alloc(&self) -> Allocation;

    /// The `AllocModifyIndex` of the allocation last given to the runner (cheaper than
    /// [`alloc`](Self::alloc) for the watcher's diff).
    fn alloc_modify_index(&self) -> u64;

    /// Whether every task has finished for good (client status complete, failed or lost), so
    /// the allocation may be garbage collected.
    fn is_client_terminal(&self) -> bool;

    /// Hands the runner a newer version of its allocation (a changed job, or a desired status
    /// of `stop`, which the runner answers by stopping its tasks).
    fn update(&self, alloc: Allocation) -> impl Future<Output = ()> + Send;

    /// Restarts one task, the running tasks, or (`all_tasks`) every task in lifecycle order.
    fn restart(
        &self,
        task: Option<&str>,
        all_tasks: bool,
    ) -> impl Future<Output = Result<(), ClientError>> + Send;

    /// Sends a signal to one task, or to every running task.
    fn signal(
        &self,
        task: Option<&str>,
        signal: &str,
    ) -> impl Future<Output = Result<(), ClientError>> + Send;

    /// Resource usage of one task, or of every running task when `task` is `None`. A runner
    /// that measures nothing reports no tasks.
    fn stats(
        &self,
        task: Option<&str>,
    ) -> impl Future<
        Output = Result<BTreeMap<String, drover_driver::TaskResourceUsage>, ClientError>,
    > + Send {
        let _ = task;
        async { Ok(BTreeMap::new()) }
    }

    /// The agent is going away: stop watching, leave the tasks running, keep the state.
    fn shutdown(&self) -> impl Future<Output = ()> + Send;

    /// Kills the tasks, runs their stop hooks, removes the alloc dir and the persisted state.
    fn destroy(&self) -> impl Future<Output = ()> + Send;
}

/// What the node hands a factory for every runner it makes.
#[derive(Debug, Clone)]
pub struct RunnerContext {
    /// The node record as registered (task environments read its attributes and meta).
    pub node: Arc<Node>,
    /// Where runners report their status.
    pub status: Arc<StatusBuffer>,
    /// Where runners register their services (the node's servers).
    pub services: Arc<dyn crate::services::ServiceRegistrar>,
    /// Where task runners have their workload identities signed (the node's servers).
    pub identities: Arc<dyn crate::identity::IdentitySigner>,
    /// The node's runners and its servers, where a replacement finds the allocation it
    /// replaces.
    pub upstream: crate::allocrunner::upstream::UpstreamAllocs,
}

/// Makes alloc runners: new ones for allocations the server placed here, and the ones found in
/// the client state at start. The runners it returns are already running.
pub trait AllocRunnerFactory: Send + Sync + 'static {
    type Runner: AllocRunnerHandle;

    /// Starts a runner for a new allocation.
    fn spawn(
        &self,
        alloc: Allocation,
        context: &RunnerContext,
    ) -> impl Future<Output = Result<Self::Runner, ClientError>> + Send;

    /// Rebuilds (and runs) the runners of every allocation in the persisted client state,
    /// re-attaching to their running tasks.
    fn restore(
        &self,
        context: &RunnerContext,
    ) -> impl Future<Output = Result<Vec<Self::Runner>, ClientError>> + Send;
}
