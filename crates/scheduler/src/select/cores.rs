//! Reserved cores: which cores allocations hold, which a node lets tasks reserve, and picking
//! free ones for a placement's tasks that ask for `cores`.

use std::collections::{BTreeMap, BTreeSet};

use drover_structs::{AllocatedResources, Allocation, Node, TaskGroup};

/// The cores an allocation holds exclusively: the union of its tasks' `ReservedCores`, sorted.
pub fn alloc_reserved_cores(alloc: &Allocation) -> Vec<u16> {
    let Some(allocated) = alloc.allocated_resources.as_ref() else {
        return Vec::new();
    };
    let cores: BTreeSet<u16> = allocated
        .tasks
        .values()
        .filter_map(|task| task.cpu.reserved_cores.as_ref())
        .flatten()
        .copied()
        .collect();
    cores.into_iter().collect()
}

/// A core held by more than one of `allocs` (non-terminal ones only), if any: what a plan
/// applier checks before it commits allocations to one node.
pub fn reserved_core_conflict<'a>(allocs: impl IntoIterator<Item = &'a Allocation>) -> Option<u16> {
    let mut held = BTreeSet::new();
    for alloc in allocs {
        if alloc.terminal_status() {
            continue;
        }
        for core in alloc_reserved_cores(alloc) {
            if !held.insert(core) {
                return Some(core);
            }
        }
    }
    None
}

/// The core IDs a node lets tasks reserve: its reservable cores minus those its client keeps
/// back, sorted.
pub fn node_reservable_cores(node: &Node) -> BTreeSet<u16> {
    let kept_back: BTreeSet<u16> = node
        .reserved_resources
        .as_ref()
        .map(|reserved| reserved.cpu.reserved_cpu_cores.iter().copied().collect())
        .unwrap_or_default();
    node.node_resources
        .as_ref()
        .map(|resources| {
            resources
                .cpu
                .reservable_cpu_cores
                .iter()
                .copied()
                .filter(|core| !kept_back.contains(core))
                .collect()
        })
        .unwrap_or_default()
}

/// The MHz one core of `node` stands for (Nomad's `SharesPerCore`: total compute over total
/// cores), the CPU a task is charged per reserved core.
pub fn node_shares_per_core(node: &Node) -> i64 {
    node.node_resources.as_ref().map_or(0, |resources| {
        if resources.cpu.total_cpu_cores > 0 {
            resources.cpu.cpu_shares / resources.cpu.total_cpu_cores
        } else {
            0
        }
    })
}

/// The cores each task of a placement reserves, by task name.
pub type CoreAssignment = BTreeMap<String, Vec<u16>>;

/// Picks cores on `node` for every task of `group` that asks for `cores`, from those not in
/// `held` (cores live allocations on the node already hold): lowest IDs first, each task its
/// own. `Err` names the exhausted dimension (`cores`) when there are not enough.
pub fn assign_cores(
    node: &Node,
    group: &TaskGroup,
    held: &BTreeSet<u16>,
) -> Result<CoreAssignment, &'static str> {
    let mut assignment = CoreAssignment::new();
    let wanting: Vec<(&str, usize)> = group
        .tasks
        .iter()
        .filter_map(|task| {
            let cores = task
                .resources
                .as_ref()
                .map_or(0, |resources| resources.cores);
            usize::try_from(cores)
                .ok()
                .filter(|cores| *cores > 0)
                .map(|cores| (task.name.as_str(), cores))
        })
        .collect();
    if wanting.is_empty() {
        return Ok(assignment);
    }
    let mut free = node_reservable_cores(node)
        .into_iter()
        .filter(|core| !held.contains(core));
    for (task_name, cores) in wanting {
        let picked: Vec<u16> = free.by_ref().take(cores).collect();
        if picked.len() < cores {
            return Err("cores");
        }
        assignment.insert(task_name.to_string(), picked);
    }
    Ok(assignment)
}

/// Writes the reserved cores into the allocated resources, each such task charged the MHz of
/// its cores.
pub fn apply_core_assignment(
    allocated: &mut AllocatedResources,
    assignment: &CoreAssignment,
    shares_per_core: i64,
) {
    for (task_name, cores) in assignment {
        if let Some(task) = allocated.tasks.get_mut(task_name) {
            task.cpu.cpu_shares = shares_per_core * cores.len() as i64;
            task.cpu.reserved_cores = Some(cores.clone());
        }
    }
}
