//! Usage, fit and cores on hand-made allocations and nodes.

use drover_structs::{
    AllocatedCpuResources, AllocatedMemoryResources, AllocatedResources, AllocatedTaskResources,
    Allocation,
};

use super::*;
use crate::plan::ScoringAlgorithm;
use drover_structs::TaskLifecycleConfig;

#[test]
fn binpack_prefers_fuller_nodes_and_spread_emptier() {
    let capacity = Usage {
        cpu: 1000,
        memory_mb: 1000,
    };
    let empty = Usage {
        cpu: 100,
        memory_mb: 100,
    };
    let full = Usage {
        cpu: 900,
        memory_mb: 900,
    };
    assert!(
        fit_score(ScoringAlgorithm::Binpack, capacity, full)
            > fit_score(ScoringAlgorithm::Binpack, capacity, empty)
    );
    assert!(
        fit_score(ScoringAlgorithm::Spread, capacity, empty)
            > fit_score(ScoringAlgorithm::Spread, capacity, full)
    );
    assert_eq!(
        fit_score(ScoringAlgorithm::Binpack, capacity, capacity),
        18.0
    );
    assert_eq!(
        fit_score(ScoringAlgorithm::Binpack, capacity, Usage::default()),
        0.0
    );
}

#[test]
fn lifecycle_usage_rule() {
    let mut allocated = AllocatedResources::default();
    let mut add = |name: &str, cpu: i64, memory: i64, lifecycle: Option<(&str, bool)>| {
        allocated.tasks.insert(
            name.to_string(),
            AllocatedTaskResources {
                cpu: AllocatedCpuResources {
                    cpu_shares: cpu,
                    reserved_cores: None,
                },
                memory: AllocatedMemoryResources {
                    memory_mb: memory,
                    memory_max_mb: 0,
                },
                ..AllocatedTaskResources::default()
            },
        );
        allocated.task_lifecycles.insert(
            name.to_string(),
            lifecycle.map(|(hook, sidecar)| TaskLifecycleConfig {
                hook: hook.to_string(),
                sidecar,
            }),
        );
    };
    add("main", 100, 200, None);
    add("init", 500, 50, Some(("prestart", false)));
    add("sidecar", 10, 10, Some(("prestart", true)));
    add("after", 20, 30, Some(("poststart", false)));
    add("cleanup", 5, 400, Some(("poststop", false)));
    // sidecar + max(init, main + after, cleanup) per dimension.
    assert_eq!(
        resources_usage(&allocated),
        Usage {
            cpu: 10 + 500,
            memory_mb: 10 + 400
        }
    );
}

#[test]
fn a_core_held_by_two_live_allocations_is_a_conflict() {
    let with_cores = |id: &str, cores: &[u16], status: &str| {
        let mut allocated = AllocatedResources::default();
        allocated.tasks.insert(
            "t".to_string(),
            AllocatedTaskResources {
                cpu: AllocatedCpuResources {
                    cpu_shares: 1000,
                    reserved_cores: Some(cores.to_vec()),
                },
                ..AllocatedTaskResources::default()
            },
        );
        Allocation {
            id: id.to_string(),
            client_status: status.to_string(),
            desired_status: drover_structs::ALLOC_DESIRED_STATUS_RUN.to_string(),
            allocated_resources: Some(allocated),
            ..Allocation::default()
        }
    };
    let running = drover_structs::ALLOC_CLIENT_STATUS_RUNNING;
    let a = with_cores("a", &[0, 1], running);
    let b = with_cores("b", &[2], running);
    let c = with_cores("c", &[1], running);
    let done = with_cores("d", &[0], drover_structs::ALLOC_CLIENT_STATUS_COMPLETE);
    assert_eq!(alloc_reserved_cores(&a), vec![0, 1]);
    assert_eq!(reserved_core_conflict([&a, &b]), None);
    assert_eq!(reserved_core_conflict([&a, &b, &c]), Some(1));
    assert_eq!(
        reserved_core_conflict([&a, &done]),
        None,
        "a terminal allocation holds nothing"
    );
}

#[test]
fn a_node_without_a_core_count_charges_nothing_per_core() {
    let mut node = crate::testing::NodeBuilder::new("n").build();
    assert_eq!(node_shares_per_core(&node), 1000);
    if let Some(resources) = node.node_resources.as_mut() {
        resources.cpu.total_cpu_cores = 0;
    }
    assert_eq!(node_shares_per_core(&node), 0);
}
