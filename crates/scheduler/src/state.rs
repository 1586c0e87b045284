//! The read-only snapshot the scheduler works from, as a trait the server's state store
//! implements, plus [`InMemoryState`], a plain implementation for tests and tools.
//!
//! The scheduler asks for one job, that job's allocations, nodes, and the allocations on a node
//! (to account for the resources already in use). Everything it gets is a snapshot: nothing it
//! does writes back; its output is a `Plan`.
//!
//! Not here: persistence, indexes, blocking queries (the `state` crate).

use std::collections::BTreeMap;
use std::sync::Arc;

use drover_structs::{Allocation, Deployment, Job, Node};

/// A consistent, read-only view of cluster state.
pub trait SchedulerState {
    /// The job with this ID in this namespace, or `None` when it is unknown or purged.
    fn job(&self, namespace: &str, job_id: &str) -> Option<Arc<Job>>;

    /// Every allocation of the job, terminal ones included, whatever the job version.
    fn allocs_by_job(&self, namespace: &str, job_id: &str) -> Vec<Arc<Allocation>>;

    /// The node with this ID.
    fn node(&self, node_id: &str) -> Option<Arc<Node>>;

    /// Every node, in a stable order (the scheduler shuffles with its seed).
    fn nodes(&self) -> Vec<Arc<Node>>;

    /// Every allocation placed on the node, terminal ones included.
    fn allocs_by_node(&self, node_id: &str) -> Vec<Arc<Allocation>>;

    /// The job's latest deployment (highest `CreateIndex`, of any incarnation), if any.
    fn latest_deployment(&self, namespace: &str, job_id: &str) -> Option<Arc<Deployment>>;

    /// Nodes ready for placements (status `ready`, eligible, not draining) in one of
    /// `datacenters` (`*` globs allowed) and in `node_pool` (`all` or empty means any pool).
    /// A store with indexes may override this.
    fn ready_nodes(&self, datacenters: &[String], node_pool: &str) -> Vec<Arc<Node>> {
        self.nodes()
            .into_iter()
            .filter(|node| {
                node.ready_for_scheduling()
                    && node_in_any_datacenter(node, datacenters)
                    && node_in_pool(node, node_pool)
            })
            .collect()
    }
}

/// The pool that matches every node.
pub const NODE_POOL_ALL: &str = "all";

/// Whether the node's datacenter matches one of `datacenters`, where `*` matches any run of
/// characters (Nomad's glob).
pub fn node_in_any_datacenter(node: &Node, datacenters: &[String]) -> bool {
    datacenters
        .iter()
        .any(|pattern| glob_matches(pattern, &node.datacenter))
}

/// Whether the node is in `node_pool`; `all` and the empty string match every node, and a node
/// without a pool is in `default`.
pub fn node_in_pool(node: &Node, node_pool: &str) -> bool {
    if node_pool.is_empty() || node_pool == NODE_POOL_ALL {
        return true;
    }
    let node_pool_name = if node.node_pool.is_empty() {
        drover_structs::DEFAULT_NODE_POOL
    } else {
        node.node_pool.as_str()
    };
    node_pool_name == node_pool
}

/// `*` matches any run of characters (including none); everything else matches itself.
pub fn glob_matches(pattern: &str, text: &str) -> bool {
    let pieces: Vec<&str> = pattern.split('*').collect();
    if pieces.len() == 1 {
        return pattern == text;
    }
    let first = pieces[0];
    let last = pieces[pieces.len() - 1];
    if !text.starts_with(first) || text.len() < first.len() + last.len() || !text.ends_with(last) {
        return false;
    }
    let mut remaining = &text[first.len()..text.len() - last.len()];
    for piece in &pieces[1..pieces.len() - 1] {
        match remaining.find(piece) {
            Some(position) => remaining = &remaining[position + piece.len()..],
            None => return false,
        }
    }
    true
}

/// A snapshot held in memory: what tests, benchmarks and tools hand the scheduler.
#[derive(Debug, Clone, Default)]
pub struct InMemoryState {
    jobs: BTreeMap<(String, String), Arc<Job>>,
    nodes: BTreeMap<String, Arc<Node>>,
    allocs: BTreeMap<String, Arc<Allocation>>,
    allocs_by_job: BTreeMap<(String, String), Vec<String>>,
    allocs_by_node: BTreeMap<String, Vec<String>>,
    deployments: BTreeMap<String, Arc<Deployment>>,
}

impl InMemoryState {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds or replaces a job.
    pub fn upsert_job(&mut self, job: Job) {
        self.jobs
            .insert((job.namespace.clone(), job.id.clone()), Arc::new(job));
    }

    /// Removes a job (a purge); its allocations stay.
    pub fn remove_job(&mut self, namespace: &str, job_id: &str) {
        self.jobs
            .remove(&(namespace.to_string(), job_id.to_string()));
    }

    /// Adds or replaces a deployment.
    pub fn upsert_deployment(&mut self, deployment: Deployment) {
        self.deployments
            .insert(deployment.id.clone(), Arc::new(deployment));
    }

    /// The deployment with this ID.
    pub fn deployment(&self, id: &str) -> Option<Arc<Deployment>> {
        self.deployments.get(id).cloned()
    }

    /// Adds or replaces a node.
    pub fn upsert_node(&mut self, node: Node) {
        self.nodes.insert(node.id.clone(), Arc::new(node));
    }

    /// Adds or replaces an allocation.
    pub fn upsert_alloc(&mut self, alloc: Allocation) {
        if let Some(previous) = self.allocs.get(&alloc.id) {
            if let Some(ids) = self.allocs_by_node.get_mut(&previous.node_id) {
                ids.retain(|id| id != &alloc.id);
            }
            let previous_job = (previous.namespace.clone(), previous.job_id.clone());
            if let Some(ids) = self.allocs_by_job.get_mut(&previous_job) {
                ids.retain(|id| id != &alloc.id);
            }
        }
        self.allocs_by_job
            .entry((alloc.namespace.clone(), alloc.job_id.clone()))
            .or_default()
            .push(alloc.id.clone());
        self.allocs_by_node
            .entry(alloc.node_id.clone())
            .or_default()
            .push(alloc.id.clone());
        self.allocs.insert(alloc.id.clone(), Arc::new(alloc));
    }

    /// The allocation with this ID.
    pub fn alloc(&self, alloc_id: &str) -> Option<Arc<Allocation>> {
        self.allocs.get(alloc_id).cloned()
    }

    /// Every allocation, in ID order.
    pub fn allocs(&self) -> Vec<Arc<Allocation>> {
        self.allocs.values().cloned().collect()
    }

    /// Applies a plan the way a plan applier would if every part of it committed: stops and
    /// updates replace the stored allocations, new allocations are added.
    pub fn apply_plan(&mut self, plan: &crate::plan::Plan) {
        for alloc in plan.node_update.values().flatten() {
            self.upsert_alloc(alloc.clone());
        }
        for alloc in plan.node_allocation.values().flatten() {
            self.upsert_alloc(alloc.clone());
        }
    }
}

impl SchedulerState for InMemoryState {
    fn latest_deployment(&self, namespace: &str, job_id: &str) -> Option<Arc<Deployment>> {
        self.deployments
            .values()
            .filter(|deployment| deployment.namespace == namespace && deployment.job_id == job_id)
            .max_by_key(|deployment| deployment.create_index)
            .cloned()
    }

    fn job(&self, namespace: &str, job_id: &str) -> Option<Arc<Job>> {
        self.jobs
            .get(&(namespace.to_string(), job_id.to_string()))
            .cloned()
    }

    fn allocs_by_job(&self, namespace: &str, job_id: &str) -> Vec<Arc<Allocation>> {
        self.allocs_by_job
            .get(&(namespace.to_string(), job_id.to_string()))
            .map(|ids| {
                ids.iter()
                    .filter_map(|id| self.allocs.get(id).cloned())
                    .collect()
            })
            .unwrap_or_default()
    }

    fn node(&self, node_id: &str) -> Option<Arc<Node>> {
        self.nodes.get(node_id).cloned()
    }

    fn nodes(&self) -> Vec<Arc<Node>> {
        self.nodes.values().cloned().collect()
    }

    fn allocs_by_node(&self, node_id: &str) -> Vec<Arc<Allocation>> {
        self.allocs_by_node
            .get(node_id)
            .map(|ids| {
                ids.iter()
                    .filter_map(|id| self.allocs.get(id).cloned())
                    .collect()
            })
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob_matches("dc1", "dc1"));
        assert!(!glob_matches("dc1", "dc2"));
        assert!(glob_matches("*", "anything"));
        assert!(glob_matches("*", ""));
        assert!(glob_matches("us-*", "us-east-1"));
        assert!(!glob_matches("us-*", "eu-west-1"));
        assert!(glob_matches("*-east-*", "us-east-1"));
        assert!(glob_matches("a*b*c", "abc"));
        assert!(!glob_matches("a*b*c", "acb"));
        assert!(
            !glob_matches("ab*ba", "aba"),
            "prefix and suffix must not overlap"
        );
    }

    #[test]
    fn pools() {
        let node = Node {
            node_pool: String::new(),
            ..Node::default()
        };
        assert!(node_in_pool(&node, "default"));
        assert!(node_in_pool(&node, "all"));
        assert!(node_in_pool(&node, ""));
        assert!(!node_in_pool(&node, "gpu"));
    }
}
