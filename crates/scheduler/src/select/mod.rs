//! Choosing a node for one placement: walk the candidate nodes, drop the infeasible ones, fit
//! the group's resources next to what each node already runs (and what the plan so far adds
//! or removes), score, and take the best of the first few that fit.
//!
//! Like Nomad's generic stack: candidates are shuffled once per pass (with the caller's seed)
//! and walked cyclically, so consecutive placements look at different nodes; a placement looks
//! at up to `limit` fitting nodes (2 for batch jobs, `max(2, ceil(log2(n)))` for services),
//! deferring up to three that score zero or less (an empty node under bin-packing), and takes
//! the highest score. Scores: the bin-pack (or spread) fit normalized to 0..1, a job
//! anti-affinity penalty when the node already runs allocations of the same group, and a
//! penalty on nodes where the allocation being replaced failed, and the group's affinities
//! (matched weights over total weight, -1..1; with affinities a placement looks at up to 100
//! fitting nodes), and `spread` blocks (nodes whose attribute value is below its target share
//! of the group, or the least used value when no targets are given, score up); the final score
//! is their mean.
//!
//! Resources counted: CPU (MHz) and memory (MB) of non-terminal allocations, with Nomad's
//! lifecycle rule (prestart sidecars add up; ephemeral prestart, main plus poststart, and
//! poststop tasks take the largest), against the node's resources minus its reserved ones;
//! ephemeral disk when the node reports its disk; host ports for group networks (`network`);
//! reserved cores for tasks that ask for `cores`: each such task gets that many core IDs from
//! the node's reservable cores (minus the client's reserved ones) that no live allocation on
//! the node holds, lowest first, and CPU of cores × the node's MHz per core, as Nomad does; a
//! node without enough free cores is exhausted on the `cores` dimension.
//!
//! Not here: which placements to make (`reconcile`), building allocations (`generic`).

mod cores;
mod spread;
mod stack;
mod usage;

#[cfg(test)]
mod tests;

pub use cores::{
    CoreAssignment, alloc_reserved_cores, apply_core_assignment, assign_cores,
    node_reservable_cores, node_shares_per_core, reserved_core_conflict,
};
pub use stack::{RankedNode, SelectOptions, Stack, exhaust_resources};
pub use usage::{
    Usage, allocated_disk_mb, allocated_usage, fit_score, group_allocated_resources, node_capacity,
    node_disk_capacity, resources_usage,
};
