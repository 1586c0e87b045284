//! What allocations hold and nodes offer: CPU and memory with Nomad's lifecycle rule, disk, and
//! the bin-pack / spread fit score over them.

use drover_structs::{
    AllocatedCpuResources, AllocatedMemoryResources, AllocatedResources, AllocatedTaskResources,
    Allocation, Node, TaskGroup,
};

use crate::plan::ScoringAlgorithm;

/// The largest value of Nomad's fit score.
pub(super) const MAX_FIT_SCORE: f64 = 18.0;

/// CPU and memory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub cpu: i64,
    pub memory_mb: i64,
}

impl Usage {
    pub(super) fn add(&mut self, other: Usage) {
        self.cpu += other.cpu;
        self.memory_mb += other.memory_mb;
    }

    pub(super) fn max(&mut self, other: Usage) {
        self.cpu = self.cpu.max(other.cpu);
        self.memory_mb = self.memory_mb.max(other.memory_mb);
    }
}

/// What an allocation holds on its node, with Nomad's lifecycle rule.
pub fn allocated_usage(alloc: &Allocation) -> Usage {
    if let Some(allocated) = alloc.allocated_resources.as_ref() {
        return resources_usage(allocated);
    }
    let mut usage = Usage::default();
    if !alloc.task_resources.is_empty() {
        for resources in alloc.task_resources.values() {
            usage.add(Usage {
                cpu: resources.cpu,
                memory_mb: resources.memory_mb,
            });
        }
    } else if let Some(resources) = alloc.resources.as_ref() {
        usage.add(Usage {
            cpu: resources.cpu,
            memory_mb: resources.memory_mb,
        });
    }
    usage
}

/// CPU and memory of allocated resources: prestart sidecars add up; ephemeral prestart tasks,
/// main tasks plus poststart tasks, and poststop tasks never run together, so the largest counts.
pub fn resources_usage(allocated: &AllocatedResources) -> Usage {
    let mut sidecars = Usage::default();
    let mut ephemeral_prestart = Usage::default();
    let mut main = Usage::default();
    let mut poststop = Usage::default();
    for (task_name, task) in &allocated.tasks {
        let usage = Usage {
            cpu: task.cpu.cpu_shares,
            memory_mb: task.memory.memory_mb,
        };
        match allocated
            .task_lifecycles
            .get(task_name)
            .and_then(Option::as_ref)
        {
            None => main.add(usage),
            Some(lifecycle) => match lifecycle.hook.as_str() {
                drover_structs::LIFECYCLE_HOOK_PRESTART if lifecycle.sidecar => sidecars.add(usage),
                drover_structs::LIFECYCLE_HOOK_PRESTART => ephemeral_prestart.add(usage),
                drover_structs::LIFECYCLE_HOOK_POSTSTOP => poststop.add(usage),
                _ => main.add(usage),
            },
        }
    }
    ephemeral_prestart.max(main);
    ephemeral_prestart.max(poststop);
    sidecars.add(ephemeral_prestart);
    sidecars
}

/// The resources a new allocation of `group` gets.
pub fn group_allocated_resources(group: &TaskGroup) -> AllocatedResources {
    let mut allocated = AllocatedResources::default();
    for task in &group.tasks {
        let resources = task.resources.clone().unwrap_or_default();
        allocated.tasks.insert(
            task.name.clone(),
            AllocatedTaskResources {
                cpu: AllocatedCpuResources {
                    cpu_shares: resources.cpu,
                    reserved_cores: None,
                },
                memory: AllocatedMemoryResources {
                    memory_mb: resources.memory_mb,
                    memory_max_mb: resources.memory_max_mb,
                },
                ..AllocatedTaskResources::default()
            },
        );
        allocated
            .task_lifecycles
            .insert(task.name.clone(), task.lifecycle.clone());
    }
    allocated.shared.disk_mb = group.ephemeral_disk.as_ref().map_or(0, |disk| disk.size_mb);
    allocated
}

/// The ephemeral disk an allocation holds (MB).
pub fn allocated_disk_mb(alloc: &Allocation) -> i64 {
    match alloc.allocated_resources.as_ref() {
        Some(allocated) => allocated.shared.disk_mb,
        None => alloc
            .shared_resources
            .as_ref()
            .map_or(0, |resources| resources.disk_mb),
    }
}

/// The disk a node offers to allocations (MB), or `None` when it reports no disk (then disk is
/// not a constraint, so a node that cannot measure its disk still takes work).
pub fn node_disk_capacity(node: &Node) -> Option<i64> {
    let total = node.node_resources.as_ref()?.disk.disk_mb;
    if total <= 0 {
        return None;
    }
    let reserved = node
        .reserved_resources
        .as_ref()
        .map_or(0, |reserved| reserved.disk.disk_mb);
    Some(total - reserved)
}

/// The CPU and memory a node offers to allocations: its resources minus its reserved ones.
pub fn node_capacity(node: &Node) -> Usage {
    let total = node
        .node_resources
        .as_ref()
        .map_or(Usage::default(), |resources| Usage {
            cpu: resources.cpu.cpu_shares,
            memory_mb: resources.memory.memory_mb,
        });
    let reserved = node
        .reserved_resources
        .as_ref()
        .map_or(Usage::default(), |reserved| Usage {
            cpu: reserved.cpu.cpu_shares,
            memory_mb: reserved.memory.memory_mb,
        });
    Usage {
        cpu: total.cpu - reserved.cpu,
        memory_mb: total.memory_mb - reserved.memory_mb,
    }
}

/// Nomad's fit score (0..18) for a node whose capacity is `capacity` once `used` is placed.
/// Bin-packing rewards fuller nodes; spread rewards emptier ones.
pub fn fit_score(algorithm: ScoringAlgorithm, capacity: Usage, used: Usage) -> f64 {
    let free_fraction = |used: i64, capacity: i64| {
        if capacity <= 0 {
            0.0
        } else {
            1.0 - used as f64 / capacity as f64
        }
    };
    let total = 10f64.powf(free_fraction(used.cpu, capacity.cpu))
        + 10f64.powf(free_fraction(used.memory_mb, capacity.memory_mb));
    let score = match algorithm {
        ScoringAlgorithm::Binpack => 20.0 - total,
        ScoringAlgorithm::Spread => total - 2.0,
    };
    score.clamp(0.0, MAX_FIT_SCORE)
}
