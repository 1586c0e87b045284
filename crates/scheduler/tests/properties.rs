//! Safety properties over random clusters and random job histories: never more live
//! allocations than a group's count, nothing placed on a node that is down, draining,
//! ineligible or outside the job's datacenters, no node's CPU or memory overcommitted, no core
//! reserved by two live allocations of a node (or outside its reservable cores), and the same
//! inputs always giving the same plan.

// Integration tests: a panic is a failed test.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::collections::BTreeMap;

use drover_scheduler::select::{allocated_usage, node_capacity};
use drover_scheduler::state::node_in_any_datacenter;
use drover_scheduler::testing::{JobBuilder, NodeBuilder};
use drover_scheduler::{
    InMemoryState, Plan, SchedulerOptions, SchedulerState, SeededIds, schedule,
};
use drover_structs::{Evaluation, Job};
use proptest::prelude::*;

const NOW: i64 = 1_700_000_000_000_000_000;

#[derive(Debug, Clone)]
struct NodeSpec {
    cpu: i64,
    memory_mb: i64,
    reserved_cpu: i64,
    status: u8,
    ineligible: bool,
    draining: bool,
    second_dc: bool,
    has_driver: bool,
    /// How many of its 4 cores (IDs from 0) tasks may reserve.
    reservable_cores: u16,
}

fn node_spec() -> impl Strategy<Value = NodeSpec> {
    (
        500i64..4000,
        512i64..8192,
        0i64..300,
        0u8..10,
        proptest::bool::weighted(0.15),
        proptest::bool::weighted(0.1),
        proptest::bool::weighted(0.3),
        proptest::bool::weighted(0.9),
        0u16..5,
    )
        .prop_map(
            |(
                cpu,
                memory_mb,
                reserved_cpu,
                status,
                ineligible,
                draining,
                second_dc,
                has_driver,
                reservable_cores,
            )| NodeSpec {
                cpu,
                memory_mb,
                reserved_cpu,
                status,
                ineligible,
                draining,
                second_dc,
                has_driver,
                reservable_cores,
            },
        )
}

#[derive(Debug, Clone)]
struct Step {
    counts: Vec<i64>,
    cpu: i64,
    memory_mb: i64,
    change_env: bool,
    stop: bool,
    take_node_down: Option<usize>,
    fail_some: bool,
    /// `alloc stop` some allocations (some with `-reschedule`).
    stop_some: bool,
    /// Cores each task reserves instead of `cpu`.
    cores: Option<i64>,
}

fn step(groups: usize) -> impl Strategy<Value = Step> {
    (
        proptest::collection::vec(0i64..12, groups),
        50i64..1500,
        64i64..2048,
        proptest::bool::weighted(0.3),
        proptest::bool::weighted(0.1),
        proptest::option::weighted(0.3, 0usize..20),
        proptest::bool::weighted(0.3),
        proptest::bool::weighted(0.3),
        proptest::option::weighted(0.3, 1i64..3),
    )
        .prop_map(
            |(
                counts,
                cpu,
                memory_mb,
                change_env,
                stop,
                take_node_down,
                fail_some,
                stop_some,
                cores,
            )| {
                Step {
                    counts,
                    cpu,
                    memory_mb,
                    change_env,
                    stop,
                    take_node_down,
                    fail_some,
                    stop_some,
                    cores,
                }
            },
        )
}

#[derive(Debug, Clone)]
struct Scenario {
    nodes: Vec<NodeSpec>,
    /// 0 service, 1 batch, 2 system, 3 sysbatch.
    job_type: u8,
    wildcard_dc: bool,
    distinct_hosts: bool,
    ports: bool,
    steps: Vec<Step>,
    seed: u64,
}

fn scenario() -> impl Strategy<Value = Scenario> {
    (1usize..4).prop_flat_map(|groups| {
        (
            proptest::collection::vec(node_spec(), 1..20),
            0u8..4,
            any::<bool>(),
            proptest::bool::weighted(0.2),
            proptest::bool::weighted(0.3),
            proptest::collection::vec(step(groups), 1..5),
            any::<u64>(),
        )
            .prop_map(
                |(nodes, job_type, wildcard_dc, distinct_hosts, ports, steps, seed)| Scenario {
                    nodes,
                    job_type,
                    wildcard_dc,
                    distinct_hosts,
                    ports,
                    steps,
                    seed,
                },
            )
    })
}

fn build_node(index: usize, spec: &NodeSpec) -> drover_structs::Node {
    let status = match spec.status {
        0 => drover_structs::NODE_STATUS_DOWN,
        1 => drover_structs::NODE_STATUS_INITIALIZING,
        _ => drover_structs::NODE_STATUS_READY,
    };
    let mut builder = NodeBuilder::new(&format!("node-{index:02}"))
        .resources(spec.cpu, spec.memory_mb)
        .reserved(spec.reserved_cpu, 0)
        .cores(4, &(0..spec.reservable_cores).collect::<Vec<u16>>())
        .status(status)
        .datacenter(if spec.second_dc { "dc2" } else { "dc1" });
    if spec.ineligible {
        builder = builder.ineligible();
    }
    if spec.draining {
        builder = builder.draining();
    }
    if !spec.has_driver {
        builder = builder.without_driver("raw_exec");
    }
    builder.build()
}

fn build_job(scenario: &Scenario, step: &Step, version: u64) -> Job {
    let mut builder = if scenario.job_type == 1 {
        JobBuilder::batch("job")
    } else {
        JobBuilder::service("job")
    };
    builder = builder.datacenters(if scenario.wildcard_dc {
        &["*"]
    } else {
        &["dc1"]
    });
    if scenario.distinct_hosts {
        builder = builder.constraint("", "distinct_hosts", "true");
    }
    for (index, count) in step.counts.iter().enumerate() {
        builder = builder
            .group(&format!("g{index}"), *count)
            .task("t", "raw_exec")
            .resources(step.cpu, step.memory_mb);
        if let Some(cores) = step.cores {
            builder = builder.cores(cores);
        }
        if scenario.ports {
            builder = builder.network(&[("static", 8000 + index as i64)], &["dynamic"]);
        }
    }
    let mut job = builder.build();
    match scenario.job_type {
        2 => job.r#type = drover_structs::JOB_TYPE_SYSTEM.to_string(),
        3 => job.r#type = drover_structs::JOB_TYPE_SYSBATCH.to_string(),
        _ => {}
    }
    job.version = version;
    job.job_modify_index = 10 + version * 10;
    job.modify_index = job.job_modify_index;
    job.stop = step.stop;
    if step.change_env {
        for group in &mut job.task_groups {
            for task in &mut group.tasks {
                task.env.insert("VERSION".to_string(), version.to_string());
            }
        }
    }
    job
}

fn eval_for(job: &Job, step_index: usize) -> Evaluation {
    Evaluation {
        id: format!("eval-{step_index}"),
        namespace: job.namespace.clone(),
        priority: 50,
        r#type: job.r#type.clone(),
        triggered_by: drover_structs::EVAL_TRIGGER_JOB_REGISTER.to_string(),
        job_id: job.id.clone(),
        status: drover_structs::EVAL_STATUS_PENDING.to_string(),
        ..Evaluation::default()
    }
}

fn run(state: &InMemoryState, eval: &Evaluation, seed: u64, step_index: usize) -> Plan {
    let options = SchedulerOptions {
        seed,
        now_unix_nanos: NOW + step_index as i64,
        ..SchedulerOptions::default()
    };
    schedule(
        state,
        eval,
        &options,
        &mut SeededIds::new(seed.wrapping_add(step_index as u64 * 7919)),
    )
    .expect("service and batch jobs schedule")
}

fn check_plan(state: &InMemoryState, job: &Job, plan: &Plan) -> Result<(), TestCaseError> {
    // New placements only on nodes fit for scheduling, in the job's datacenters.
    for alloc in plan.allocations() {
        if state.alloc(&alloc.id).is_some() {
            continue;
        }
        let node = state
            .node(&alloc.node_id)
            .ok_or_else(|| TestCaseError::fail("placed on an unknown node"))?;
        prop_assert!(
            node.ready_for_scheduling(),
            "placed on {} with status {} eligibility {} drain {}",
            node.id,
            node.status,
            node.scheduling_eligibility,
            node.drain
        );
        prop_assert!(node_in_any_datacenter(&node, &job.datacenters));
        prop_assert!(!job.stop, "a stopped job places nothing");
    }
    Ok(())
}

fn check_state(state: &InMemoryState, jobs: &[&Job]) -> Result<(), TestCaseError> {
    let live: Vec<_> = state
        .allocs()
        .into_iter()
        .filter(|alloc| !alloc.terminal_status())
        .collect();
    // System jobs: at most one per group per node; others: at most the count per group.
    let mut per_group: BTreeMap<(&str, &str, &str), i64> = BTreeMap::new();
    for alloc in &live {
        let job = jobs
            .iter()
            .find(|job| job.id == alloc.job_id)
            .ok_or_else(|| TestCaseError::fail("allocation of an unknown job"))?;
        let system = job.r#type == drover_structs::JOB_TYPE_SYSTEM
            || job.r#type == drover_structs::JOB_TYPE_SYSBATCH;
        let node_key = if system { alloc.node_id.as_str() } else { "" };
        *per_group
            .entry((alloc.job_id.as_str(), alloc.task_group.as_str(), node_key))
            .or_insert(0) += 1;
    }
    for ((job_id, group, _), live_count) in per_group {
        let job = jobs
            .iter()
            .find(|job| job.id == job_id)
            .ok_or_else(|| TestCaseError::fail("unknown job"))?;
        let system = job.r#type == drover_structs::JOB_TYPE_SYSTEM
            || job.r#type == drover_structs::JOB_TYPE_SYSBATCH;
        let count = if job.stop {
            0
        } else if system {
            i64::from(job.lookup_task_group(group).is_some())
        } else {
            job.lookup_task_group(group).map_or(0, |group| group.count)
        };
        prop_assert!(
            live_count <= count,
            "group {group} has {live_count} live allocations for count {count}"
        );
    }
    let mut ports: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
    for alloc in &live {
        ports
            .entry(alloc.node_id.as_str())
            .or_default()
            .extend(drover_scheduler::network::alloc_ports(alloc));
    }
    for (node_id, mut held) in ports {
        let count = held.len();
        held.sort_unstable();
        held.dedup();
        prop_assert_eq!(
            held.len(),
            count,
            "a host port is held twice on {}",
            node_id
        );
    }
    let mut cores: BTreeMap<&str, Vec<u16>> = BTreeMap::new();
    for alloc in &live {
        cores
            .entry(alloc.node_id.as_str())
            .or_default()
            .extend(drover_scheduler::select::alloc_reserved_cores(alloc));
    }
    for (node_id, mut held) in cores {
        let node = state
            .node(node_id)
            .ok_or_else(|| TestCaseError::fail("unknown node"))?;
        let reservable = drover_scheduler::select::node_reservable_cores(&node);
        prop_assert!(
            held.iter().all(|core| reservable.contains(core)),
            "cores {:?} on {} outside its reservable {:?}",
            held,
            node_id,
            reservable
        );
        let count = held.len();
        held.sort_unstable();
        held.dedup();
        prop_assert_eq!(held.len(), count, "a core is reserved twice on {}", node_id);
    }
    let mut used: BTreeMap<&str, (i64, i64)> = BTreeMap::new();
    for alloc in &live {
        let usage = allocated_usage(alloc);
        let entry = used.entry(alloc.node_id.as_str()).or_insert((0, 0));
        entry.0 += usage.cpu;
        entry.1 += usage.memory_mb;
    }
    for (node_id, (cpu, memory_mb)) in used {
        let node = state
            .node(node_id)
            .ok_or_else(|| TestCaseError::fail("unknown node"))?;
        let capacity = node_capacity(&node);
        prop_assert!(
            cpu <= capacity.cpu && memory_mb <= capacity.memory_mb,
            "node {node_id} overcommitted: {cpu}/{} MHz, {memory_mb}/{} MB",
            capacity.cpu,
            capacity.memory_mb
        );
    }
    Ok(())
}

/// Applies the plan as a fully committing applier would, then lets clients start what was placed.
fn commit(state: &mut InMemoryState, plan: &Plan) {
    state.apply_plan(plan);
    for alloc in plan.allocations() {
        if alloc.client_status == drover_structs::ALLOC_CLIENT_STATUS_PENDING {
            let mut running = alloc.clone();
            running.client_status = drover_structs::ALLOC_CLIENT_STATUS_RUNNING.to_string();
            state.upsert_alloc(running);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn scheduling_never_overplaces_overcommits_or_uses_unfit_nodes(scenario in scenario()) {
        let mut state = InMemoryState::new();
        for (index, spec) in scenario.nodes.iter().enumerate() {
            state.upsert_node(build_node(index, spec));
        }
        // Half the scenarios share the nodes with another service job.
        let background = (scenario.seed % 2 == 0).then(|| {
            JobBuilder::service("other")
                .datacenters(&["dc1", "dc2"])
                .group("o", scenario.nodes.len() as i64)
                .task("t", "raw_exec")
                .resources(200, 256)
                .build()
        });
        if let Some(other) = background.as_ref() {
            state.upsert_job(other.clone());
            let plan = run(&state, &eval_for(other, 100), scenario.seed, 100);
            check_plan(&state, other, &plan)?;
            commit(&mut state, &plan);
        }
        for (step_index, step) in scenario.steps.iter().enumerate() {
            if let Some(victim) = step.take_node_down
                && let Some(node) =
                    state.node(&format!("node-{:02}", victim % scenario.nodes.len()))
            {
                let mut down = (*node).clone();
                down.status = drover_structs::NODE_STATUS_DOWN.to_string();
                state.upsert_node(down);
            }
            if step.fail_some {
                let victims: Vec<_> = state.allocs().into_iter().filter(|alloc| !alloc.terminal_status()).step_by(3).collect();
                for alloc in victims {
                    let mut failed = (*alloc).clone();
                    failed.client_status = drover_structs::ALLOC_CLIENT_STATUS_FAILED.to_string();
                    failed.modify_time = NOW - 3_600_000_000_000;
                    state.upsert_alloc(failed);
                }
            }
            if step.stop_some {
                let targets: Vec<_> = state
                    .allocs()
                    .into_iter()
                    .filter(|alloc| !alloc.terminal_status())
                    .step_by(4)
                    .collect();
                for (position, alloc) in targets.into_iter().enumerate() {
                    let mut stopping = (*alloc).clone();
                    stopping.desired_transition.migrate = Some(true);
                    if position % 2 == 1 {
                        stopping.desired_transition.reschedule = Some(true);
                        stopping.modify_time = NOW - 3_600_000_000_000;
                    }
                    state.upsert_alloc(stopping);
                }
            }
            let job = build_job(&scenario, step, step_index as u64);
            state.upsert_job(job.clone());
            let eval = eval_for(&job, step_index);
            let plan = run(&state, &eval, scenario.seed, step_index);
            prop_assert_eq!(&plan, &run(&state, &eval, scenario.seed, step_index), "same inputs, same plan");
            check_plan(&state, &job, &plan)?;
            for (group, metric) in &plan.failed_tg_allocs {
                prop_assert!(job.lookup_task_group(group).is_some());
                prop_assert!(metric.nodes_evaluated >= metric.nodes_filtered + metric.nodes_exhausted);
            }
            commit(&mut state, &plan);
            let mut jobs = vec![&job];
            if let Some(other) = background.as_ref() {
                let plan = run(&state, &eval_for(other, 200 + step_index), scenario.seed, 200 + step_index);
                check_plan(&state, other, &plan)?;
                commit(&mut state, &plan);
                jobs.push(other);
            }
            check_state(&state, &jobs)?;
        }
    }
}
