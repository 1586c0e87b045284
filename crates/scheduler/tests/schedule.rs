//! Scheduling scenarios on fake clusters: each test builds nodes and a job, runs a pass, applies
//! the plan to the in-memory snapshot where the scenario continues, and checks the plan.

// Integration tests: a panic is a failed test.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::collections::BTreeMap;

use drover_scheduler::reconcile::{
    STATUS_ALLOC_LOST, STATUS_ALLOC_MIGRATING, STATUS_ALLOC_NOT_NEEDED, STATUS_ALLOC_RESCHEDULED,
    STATUS_ALLOC_UPDATING,
};
use drover_scheduler::testing::{JobBuilder, NodeBuilder, running_alloc};
use drover_scheduler::{
    InMemoryState, Plan, SchedulerError, SchedulerOptions, SchedulerState, SeededIds, schedule,
};
use drover_structs::{Allocation, Evaluation, Job, TaskState};

const NOW: i64 = 1_700_000_000_000_000_000;
const SECOND: i64 = 1_000_000_000;

fn eval_for(job: &Job, eval_id: &str) -> Evaluation {
    Evaluation {
        id: eval_id.to_string(),
        namespace: job.namespace.clone(),
        priority: job.priority,
        r#type: job.r#type.clone(),
        triggered_by: drover_structs::EVAL_TRIGGER_JOB_REGISTER.to_string(),
        job_id: job.id.clone(),
        job_modify_index: job.job_modify_index,
        status: drover_structs::EVAL_STATUS_PENDING.to_string(),
        ..Evaluation::default()
    }
}

fn run(state: &InMemoryState, job: &Job, eval_id: &str) -> Plan {
    run_eval(state, &eval_for(job, eval_id))
}

fn run_eval(state: &InMemoryState, eval: &Evaluation) -> Plan {
    let options = SchedulerOptions {
        seed: 42,
        now_unix_nanos: NOW,
        ..SchedulerOptions::default()
    };
    schedule(
        state,
        eval,
        &options,
        &mut SeededIds::new(seed_of(&eval.id)),
    )
    .expect("service and batch jobs schedule")
}

/// A different ID sequence per evaluation, as a real ID source would give.
fn seed_of(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x100_0000_01b3)
    })
}

fn cluster(node_count: usize) -> InMemoryState {
    let mut state = InMemoryState::new();
    for index in 0..node_count {
        state.upsert_node(NodeBuilder::new(&format!("node-{index:02}")).build());
    }
    state
}

fn new_version(job: &Job, edit: impl FnOnce(&mut Job)) -> Job {
    let mut next = job.clone();
    next.version += 1;
    next.job_modify_index += 10;
    next.modify_index += 10;
    edit(&mut next);
    next
}

fn names(allocs: &[&Allocation]) -> Vec<String> {
    let mut names: Vec<String> = allocs.iter().map(|alloc| alloc.name.clone()).collect();
    names.sort();
    names
}

fn stops_by_description(plan: &Plan) -> BTreeMap<String, Vec<String>> {
    let mut stops: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for alloc in plan.stops() {
        stops
            .entry(alloc.desired_description.clone())
            .or_default()
            .push(alloc.name.clone());
    }
    for names in stops.values_mut() {
        names.sort();
    }
    stops
}

/// Applies the plan and marks every running-to-be allocation running, as clients would.
fn commit(state: &mut InMemoryState, plan: &Plan) {
    state.apply_plan(plan);
    for alloc in plan.allocations() {
        if alloc.client_status == drover_structs::ALLOC_CLIENT_STATUS_PENDING
            && alloc.desired_status == drover_structs::ALLOC_DESIRED_STATUS_RUN
        {
            let mut running = alloc.clone();
            running.client_status = drover_structs::ALLOC_CLIENT_STATUS_RUNNING.to_string();
            state.upsert_alloc(running);
        }
    }
}

fn live_allocs(state: &InMemoryState, job: &Job) -> Vec<Allocation> {
    let mut live: Vec<Allocation> = state
        .allocs()
        .iter()
        .filter(|alloc| alloc.job_id == job.id && !alloc.terminal_status())
        .map(|alloc| Allocation::clone(alloc))
        .collect();
    live.sort_by(|a, b| a.name.cmp(&b.name));
    live
}

#[test]
fn service_job_places_count_allocations_with_full_shape() {
    let mut state = cluster(5);
    let job = JobBuilder::service("web")
        .group("frontend", 3)
        .task("server", "raw_exec")
        .resources(250, 512)
        .build();
    state.upsert_job(job.clone());
    let plan = run(&state, &job, "eval-1");

    let allocs: Vec<&Allocation> = plan.allocations().collect();
    assert_eq!(
        names(&allocs),
        vec!["web.frontend[0]", "web.frontend[1]", "web.frontend[2]"]
    );
    for alloc in &allocs {
        assert_eq!(alloc.eval_id, "eval-1");
        assert_eq!(alloc.namespace, "default");
        assert_eq!(alloc.job_id, "web");
        assert_eq!(alloc.task_group, "frontend");
        assert_eq!(alloc.desired_status, "run");
        assert_eq!(alloc.client_status, "pending");
        assert_eq!((alloc.create_time, alloc.modify_time), (NOW, NOW));
        assert_eq!(alloc.id.len(), 36);
        assert!(alloc.node_name.starts_with("node-node-"));
        assert_eq!(alloc.job.as_deref(), Some(&job));
        let resources = alloc
            .allocated_resources
            .as_ref()
            .expect("allocated resources");
        assert_eq!(resources.tasks["server"].cpu.cpu_shares, 250);
        assert_eq!(resources.tasks["server"].memory.memory_mb, 512);
        assert_eq!(resources.shared.disk_mb, 300);
        assert!(resources.task_lifecycles.contains_key("server"));
        let metric = alloc.metrics.as_ref().expect("metrics");
        assert!(metric.nodes_evaluated >= 1);
        assert_eq!(metric.nodes_available.get("dc1"), Some(&5));
        assert!(!metric.score_meta_data.is_empty());
    }
    assert_eq!(plan.annotations.desired_tg_updates["frontend"].place, 3);
    assert_eq!(plan.queued_allocations.get("frontend"), Some(&0));
    assert!(plan.failed_tg_allocs.is_empty());
    assert!(plan.blocked_eval.is_none());
    assert!(plan.stops().next().is_none());
}

#[test]
fn the_same_inputs_give_the_same_plan() {
    let mut state = cluster(50);
    let job = JobBuilder::service("web")
        .group("g", 20)
        .task("t", "raw_exec")
        .build();
    state.upsert_job(job.clone());
    assert_eq!(run(&state, &job, "e"), run(&state, &job, "e"));
}

#[test]
fn nothing_lands_on_down_draining_ineligible_or_foreign_nodes() {
    let mut state = InMemoryState::new();
    state.upsert_node(
        NodeBuilder::new("down")
            .status(drover_structs::NODE_STATUS_DOWN)
            .build(),
    );
    state.upsert_node(NodeBuilder::new("draining").draining().build());
    state.upsert_node(NodeBuilder::new("ineligible").ineligible().build());
    state.upsert_node(
        NodeBuilder::new("initializing")
            .status(drover_structs::NODE_STATUS_INITIALIZING)
            .build(),
    );
    state.upsert_node(NodeBuilder::new("other-dc").datacenter("dc9").build());
    state.upsert_node(NodeBuilder::new("good").build());
    let job = JobBuilder::service("web")
        .group("g", 4)
        .task("t", "raw_exec")
        .build();
    state.upsert_job(job.clone());
    let plan = run(&state, &job, "e");
    assert!(
        plan.allocations().all(|alloc| alloc.node_id == "good"),
        "{:?}",
        plan.node_allocation.keys().collect::<Vec<_>>()
    );
    assert_eq!(plan.allocations().count(), 4);
    assert_eq!(
        plan.allocations()
            .next()
            .and_then(|a| a.metrics.as_ref())
            .map(|m| m.nodes_available.clone()),
        Some(BTreeMap::from([("dc1".to_string(), 1)]))
    );
}

#[test]
fn datacenter_wildcards_select_nodes() {
    let mut state = InMemoryState::new();
    state.upsert_node(NodeBuilder::new("east").datacenter("us-east-1").build());
    state.upsert_node(NodeBuilder::new("west").datacenter("us-west-1").build());
    state.upsert_node(NodeBuilder::new("eu").datacenter("eu-west-1").build());
    let job = JobBuilder::service("web")
        .datacenters(&["us-*"])
        .group("g", 6)
        .task("t", "raw_exec")
        .build();
    state.upsert_job(job.clone());
    let plan = run(&state, &job, "e");
    assert_eq!(plan.allocations().count(), 6);
    assert!(plan.allocations().all(|alloc| alloc.node_id != "eu"));
}

#[test]
fn missing_driver_fails_placement_and_blocks() {
    let mut state = InMemoryState::new();
    for index in 0..3 {
        state.upsert_node(NodeBuilder::new(&format!("n{index}")).build());
    }
    let job = JobBuilder::service("web")
        .group("g", 2)
        .task("t", "docker")
        .build();
    state.upsert_job(job.clone());
    let plan = run(&state, &job, "eval-1");
    assert!(plan.allocations().next().is_none());
    let metric = &plan.failed_tg_allocs["g"];
    assert_eq!(metric.nodes_evaluated, 3);
    assert_eq!(metric.nodes_filtered, 3);
    assert_eq!(metric.constraint_filtered.get("missing drivers"), Some(&3));
    assert_eq!(
        metric.coalesced_failures, 1,
        "the second placement of the group is coalesced"
    );
    assert_eq!(plan.queued_allocations.get("g"), Some(&2));
    let blocked = plan.blocked_eval.as_ref().expect("a blocked eval");
    assert_eq!(blocked.status, "blocked");
    assert_eq!(blocked.triggered_by, "queued-allocs");
    assert_eq!(blocked.previous_eval, "eval-1");
    assert_eq!(blocked.job_id, "web");
    assert_eq!(
        blocked.status_description,
        "created to place remaining allocations"
    );
    assert!(blocked.failed_tg_allocs.contains_key("g"));

    let finished = plan.finished_eval(&eval_for(&job, "eval-1"), NOW);
    assert_eq!(finished.status, "complete");
    assert_eq!(finished.blocked_eval, blocked.id);
    assert_eq!(finished.queued_allocations.get("g"), Some(&2));
    assert!(finished.failed_tg_allocs.contains_key("g"));

    // A blocked evaluation that still cannot place does not make another: it stays blocked.
    let mut again = eval_for(&job, "eval-2");
    again.status = drover_structs::EVAL_STATUS_BLOCKED.to_string();
    let replan = run_eval(&state, &again);
    assert!(!replan.failed_tg_allocs.is_empty());
    assert!(replan.blocked_eval.is_none());
    assert_eq!(replan.finished_eval(&again, NOW).status, "blocked");

    // Once a node with the driver joins, the blocked evaluation places and completes.
    state.upsert_node(
        NodeBuilder::new("docker-node")
            .with_driver("docker")
            .build(),
    );
    let unblocked = run_eval(&state, &again);
    assert_eq!(unblocked.allocations().count(), 2);
    assert_eq!(unblocked.finished_eval(&again, NOW).status, "complete");
}

#[test]
fn exhausted_memory_is_reported_by_dimension() {
    let mut state = InMemoryState::new();
    state.upsert_node(NodeBuilder::new("small").resources(4000, 1024).build());
    let job = JobBuilder::service("web")
        .group("g", 3)
        .task("t", "raw_exec")
        .resources(100, 400)
        .build();
    state.upsert_job(job.clone());
    let plan = run(&state, &job, "e");
    assert_eq!(
        plan.allocations().count(),
        2,
        "two 400 MB allocations fit in 1024 MB"
    );
    let metric = &plan.failed_tg_allocs["g"];
    assert_eq!(metric.nodes_exhausted, 1);
    assert_eq!(metric.dimension_exhausted.get("memory"), Some(&1));
    assert_eq!(metric.resources_exhausted["t"]["MemoryMB"], 400);
    assert_eq!(plan.queued_allocations.get("g"), Some(&1));
}

#[test]
fn reserved_resources_are_not_scheduled() {
    let mut state = InMemoryState::new();
    state.upsert_node(
        NodeBuilder::new("n")
            .resources(1000, 8192)
            .reserved(900, 0)
            .build(),
    );
    let job = JobBuilder::service("web")
        .group("g", 1)
        .task("t", "raw_exec")
        .resources(200, 64)
        .build();
    state.upsert_job(job.clone());
    let plan = run(&state, &job, "e");
    assert!(plan.allocations().next().is_none());
    assert_eq!(
        plan.failed_tg_allocs["g"].dimension_exhausted.get("cpu"),
        Some(&1)
    );
}

#[test]
fn existing_allocations_of_other_jobs_use_capacity() {
    let mut state = InMemoryState::new();
    let node = NodeBuilder::new("n").resources(1000, 1000).build();
    state.upsert_node(node.clone());
    let other = JobBuilder::service("other")
        .group("g", 1)
        .task("t", "raw_exec")
        .resources(700, 100)
        .build();
    state.upsert_alloc(running_alloc("other-1", &other, "g", 0, &node));
    let mut finished = running_alloc("other-2", &other, "g", 1, &node);
    finished.client_status = drover_structs::ALLOC_CLIENT_STATUS_COMPLETE.to_string();
    state.upsert_alloc(finished);
    let job = JobBuilder::service("web")
        .group("g", 2)
        .task("t", "raw_exec")
        .resources(200, 100)
        .build();
    state.upsert_job(job.clone());
    let plan = run(&state, &job, "e");
    assert_eq!(
        plan.allocations().count(),
        1,
        "700 + 200 fits, a second 200 does not; finished allocations free their share"
    );
}

#[test]
fn constraints_filter_nodes_and_are_counted() {
    let mut state = InMemoryState::new();
    state.upsert_node(
        NodeBuilder::new("linux-old")
            .attribute("kernel.version", "4.19.0")
            .build(),
    );
    state.upsert_node(
        NodeBuilder::new("linux-new")
            .attribute("kernel.version", "6.1.0")
            .meta("zone", "a")
            .build(),
    );
    state.upsert_node(
        NodeBuilder::new("darwin")
            .attribute("kernel.name", "darwin")
            .attribute("kernel.version", "6.2.0")
            .build(),
    );
    let job = JobBuilder::service("web")
        .constraint("${attr.kernel.name}", "=", "linux")
        .group("g", 1)
        .task("t", "raw_exec")
        .group_constraint("${attr.kernel.version}", "version", ">= 5.10")
        .build();
    state.upsert_job(job.clone());
    let plan = run(&state, &job, "e");
    let alloc = plan.allocations().next().expect("one placement");
    assert_eq!(alloc.node_id, "linux-new");

    let strict = new_version(&job, |job| {
        job.task_groups[0]
            .constraints
            .push(drover_scheduler::testing::constraint(
                "${meta.zone}",
                "=",
                "b",
            ))
    });
    state.upsert_job(strict.clone());
    let plan = run(&state, &strict, "e2");
    let metric = &plan.failed_tg_allocs["g"];
    assert_eq!(
        metric
            .constraint_filtered
            .get("${attr.kernel.name} = linux"),
        Some(&1)
    );
    assert_eq!(
        metric
            .constraint_filtered
            .get("${attr.kernel.version} version >= 5.10"),
        Some(&1)
    );
    assert_eq!(metric.constraint_filtered.get("${meta.zone} = b"), Some(&1));
    assert_eq!(metric.nodes_filtered, 3);
}

#[test]
fn distinct_hosts_places_one_per_node() {
    let mut state = cluster(2);
    let job = JobBuilder::service("web")
        .constraint("", "distinct_hosts", "")
        .group("g", 3)
        .task("t", "raw_exec")
        .build();
    state.upsert_job(job.clone());
    let plan = run(&state, &job, "e");
    let nodes: std::collections::BTreeSet<&str> = plan
        .allocations()
        .map(|alloc| alloc.node_id.as_str())
        .collect();
    assert_eq!(plan.allocations().count(), 2);
    assert_eq!(nodes.len(), 2);
    assert_eq!(
        plan.failed_tg_allocs["g"]
            .constraint_filtered
            .get("distinct_hosts"),
        Some(&2)
    );
}

#[test]
fn distinct_property_limits_allocations_per_value() {
    let mut state = InMemoryState::new();
    for (id, rack) in [("a", "r1"), ("b", "r1"), ("c", "r2"), ("d", "r2")] {
        state.upsert_node(NodeBuilder::new(id).meta("rack", rack).build());
    }
    let job = JobBuilder::service("web")
        .group("g", 3)
        .task("t", "raw_exec")
        .group_constraint("${meta.rack}", "distinct_property", "")
        .build();
    state.upsert_job(job.clone());
    let plan = run(&state, &job, "e");
    let racks: Vec<&str> = plan
        .allocations()
        .map(|alloc| {
            if alloc.node_id == "a" || alloc.node_id == "b" {
                "r1"
            } else {
                "r2"
            }
        })
        .collect();
    assert_eq!(racks.len(), 2, "one per rack");
    assert_ne!(racks[0], racks[1]);
    assert!(plan.failed_tg_allocs.contains_key("g"));
}

#[test]
fn binpack_prefers_the_busier_node_and_spread_the_emptier() {
    let mut state = InMemoryState::new();
    let busy = NodeBuilder::new("busy").build();
    state.upsert_node(busy.clone());
    state.upsert_node(NodeBuilder::new("idle").build());
    let other = JobBuilder::service("other")
        .group("g", 1)
        .task("t", "raw_exec")
        .resources(2000, 4096)
        .build();
    state.upsert_alloc(running_alloc("other-1", &other, "g", 0, &busy));
    let job = JobBuilder::service("web")
        .group("g", 1)
        .task("t", "raw_exec")
        .resources(500, 512)
        .build();
    state.upsert_job(job.clone());
    let eval = eval_for(&job, "e");
    for seed in 0..8 {
        let binpack = schedule(
            &state,
            &eval,
            &SchedulerOptions {
                seed,
                now_unix_nanos: NOW,
                scoring: drover_scheduler::ScoringAlgorithm::Binpack,
                deployments: false,
            },
            &mut SeededIds::new(1),
        )
        .unwrap();
        let spread = schedule(
            &state,
            &eval,
            &SchedulerOptions {
                seed,
                now_unix_nanos: NOW,
                scoring: drover_scheduler::ScoringAlgorithm::Spread,
                deployments: false,
            },
            &mut SeededIds::new(1),
        )
        .unwrap();
        assert_eq!(
            binpack
                .allocations()
                .next()
                .map(|alloc| alloc.node_id.as_str()),
            Some("busy")
        );
        assert_eq!(
            spread
                .allocations()
                .next()
                .map(|alloc| alloc.node_id.as_str()),
            Some("idle")
        );
    }
}

#[test]
fn allocations_of_one_group_avoid_sharing_a_node() {
    let mut state = cluster(4);
    let job = JobBuilder::service("web")
        .group("g", 4)
        .task("t", "raw_exec")
        .resources(500, 512)
        .build();
    state.upsert_job(job.clone());
    let plan = run(&state, &job, "e");
    let used = plan
        .node_allocation
        .values()
        .filter(|allocs| !allocs.is_empty())
        .count();
    assert_eq!(used, 4, "job anti-affinity spreads a group's allocations");
}

#[test]
fn scaling_up_places_new_indexes_and_updates_the_rest_in_place() {
    let mut state = cluster(5);
    let job = JobBuilder::service("web")
        .group("g", 3)
        .task("t", "raw_exec")
        .build();
    state.upsert_job(job.clone());
    let first = run(&state, &job, "e1");
    commit(&mut state, &first);

    let bigger = new_version(&job, |job| job.task_groups[0].count = 5);
    state.upsert_job(bigger.clone());
    let plan = run(&state, &bigger, "e2");
    let updates = &plan.annotations.desired_tg_updates["g"];
    assert_eq!(
        (
            updates.place,
            updates.in_place_update,
            updates.destructive_update,
            updates.stop
        ),
        (2, 3, 0, 0)
    );
    let new: Vec<&Allocation> = plan
        .allocations()
        .filter(|alloc| {
            alloc.create_time == NOW && alloc.eval_id == "e2" && alloc.client_status == "pending"
        })
        .collect();
    assert_eq!(names(&new), vec!["web.g[3]", "web.g[4]"]);
    let in_place: Vec<&Allocation> = plan
        .allocations()
        .filter(|alloc| alloc.client_status == "running")
        .collect();
    assert_eq!(in_place.len(), 3);
    for alloc in in_place {
        assert_eq!(alloc.job.as_ref().map(|job| job.version), Some(1));
        assert_eq!(alloc.eval_id, "e2");
    }
    assert!(plan.stops().next().is_none());
    commit(&mut state, &plan);
    assert_eq!(live_allocs(&state, &bigger).len(), 5);
}

#[test]
fn scaling_down_stops_the_highest_indexes() {
    let mut state = cluster(5);
    let job = JobBuilder::service("web")
        .group("g", 5)
        .task("t", "raw_exec")
        .build();
    state.upsert_job(job.clone());
    let first = run(&state, &job, "e1");
    commit(&mut state, &first);

    let smaller = new_version(&job, |job| job.task_groups[0].count = 2);
    state.upsert_job(smaller.clone());
    let plan = run(&state, &smaller, "e2");
    assert_eq!(
        stops_by_description(&plan),
        BTreeMap::from([(
            STATUS_ALLOC_NOT_NEEDED.to_string(),
            vec![
                "web.g[2]".to_string(),
                "web.g[3]".to_string(),
                "web.g[4]".to_string()
            ]
        )])
    );
    let updates = &plan.annotations.desired_tg_updates["g"];
    assert_eq!(
        (updates.stop, updates.in_place_update, updates.place),
        (3, 2, 0)
    );
    commit(&mut state, &plan);
    let live = live_allocs(&state, &smaller);
    assert_eq!(
        live.iter()
            .map(|alloc| alloc.name.as_str())
            .collect::<Vec<_>>(),
        vec!["web.g[0]", "web.g[1]"]
    );
}

#[test]
fn unchanged_job_is_a_no_op() {
    let mut state = cluster(3);
    let job = JobBuilder::service("web")
        .group("g", 3)
        .task("t", "raw_exec")
        .build();
    state.upsert_job(job.clone());
    let first = run(&state, &job, "e1");
    commit(&mut state, &first);
    let plan = run(&state, &job, "e2");
    assert!(plan.is_no_op());
    assert_eq!(plan.annotations.desired_tg_updates["g"].ignore, 3);
}

#[test]
fn destructive_update_replaces_each_allocation() {
    let mut state = cluster(3);
    let job = JobBuilder::service("web")
        .group("g", 2)
        .task("t", "raw_exec")
        .build();
    state.upsert_job(job.clone());
    let first = run(&state, &job, "e1");
    commit(&mut state, &first);
    let old_ids: Vec<String> = live_allocs(&state, &job)
        .into_iter()
        .map(|alloc| alloc.id)
        .collect();

    let changed = new_version(&job, |job| {
        job.task_groups[0].tasks[0]
            .env
            .insert("VERSION".into(), "2".into());
    });
    state.upsert_job(changed.clone());
    let plan = run(&state, &changed, "e2");
    assert_eq!(
        stops_by_description(&plan),
        BTreeMap::from([(
            STATUS_ALLOC_UPDATING.to_string(),
            vec!["web.g[0]".to_string(), "web.g[1]".to_string()]
        )])
    );
    let replacements: Vec<&Allocation> = plan.allocations().collect();
    assert_eq!(names(&replacements), vec!["web.g[0]", "web.g[1]"]);
    for alloc in &replacements {
        assert!(old_ids.contains(&alloc.previous_allocation));
        assert!(!old_ids.contains(&alloc.id));
        assert_eq!(alloc.job.as_ref().map(|job| job.version), Some(1));
    }
    assert_eq!(
        plan.annotations.desired_tg_updates["g"].destructive_update,
        2
    );
}

#[test]
fn stopping_the_job_stops_everything() {
    let mut state = cluster(3);
    let job = JobBuilder::service("web")
        .group("g", 3)
        .task("t", "raw_exec")
        .build();
    state.upsert_job(job.clone());
    let first = run(&state, &job, "e1");
    commit(&mut state, &first);

    let stopped = new_version(&job, |job| job.stop = true);
    state.upsert_job(stopped.clone());
    let plan = run(&state, &stopped, "e2");
    assert_eq!(plan.stops().count(), 3);
    assert!(plan.stops().all(|alloc| alloc.desired_status == "stop"
        && alloc.desired_description == STATUS_ALLOC_NOT_NEEDED));
    assert_eq!(plan.annotations.desired_tg_updates["g"].stop, 3);
    assert!(plan.allocations().next().is_none());
    assert_eq!(
        plan.queued_allocations,
        BTreeMap::from([("g".to_string(), 0)])
    );

    // Purged: the job is gone, its allocations still stop.
    state.remove_job("default", "web");
    let purged = run(&state, &job, "e3");
    assert_eq!(purged.stops().count(), 3);
    assert!(purged.job.is_none());
}

#[test]
fn removed_group_is_stopped() {
    let mut state = cluster(3);
    let job = JobBuilder::service("web")
        .group("a", 1)
        .task("t", "raw_exec")
        .group("b", 2)
        .task("t", "raw_exec")
        .build();
    state.upsert_job(job.clone());
    let first = run(&state, &job, "e1");
    commit(&mut state, &first);
    let without_b = new_version(&job, |job| {
        job.task_groups.retain(|group| group.name == "a")
    });
    state.upsert_job(without_b.clone());
    let plan = run(&state, &without_b, "e2");
    assert_eq!(
        stops_by_description(&plan),
        BTreeMap::from([(
            STATUS_ALLOC_NOT_NEEDED.to_string(),
            vec!["web.b[0]".to_string(), "web.b[1]".to_string()]
        )])
    );
}

#[test]
fn lost_allocations_are_replaced_elsewhere() {
    let mut state = cluster(3);
    let job = JobBuilder::service("web")
        .group("g", 3)
        .task("t", "raw_exec")
        .build();
    state.upsert_job(job.clone());
    let first = run(&state, &job, "e1");
    commit(&mut state, &first);
    let victim_node = live_allocs(&state, &job)[0].node_id.clone();
    let on_victim: Vec<String> = live_allocs(&state, &job)
        .into_iter()
        .filter(|alloc| alloc.node_id == victim_node)
        .map(|alloc| alloc.name)
        .collect();
    let down = state
        .node(&victim_node)
        .map(|node| drover_structs::Node {
            status: drover_structs::NODE_STATUS_DOWN.to_string(),
            ..(*node).clone()
        })
        .expect("node");
    state.upsert_node(down);

    let mut eval = eval_for(&job, "e2");
    eval.triggered_by = drover_structs::EVAL_TRIGGER_NODE_UPDATE.to_string();
    let plan = run_eval(&state, &eval);
    let lost: Vec<&Allocation> = plan.stops().collect();
    assert_eq!(lost.len(), on_victim.len());
    for alloc in &lost {
        assert_eq!(alloc.desired_description, STATUS_ALLOC_LOST);
        assert_eq!(alloc.client_status, "lost");
        assert_eq!(alloc.alloc_states.len(), 1);
    }
    let replacements: Vec<&Allocation> = plan.allocations().collect();
    assert_eq!(replacements.len(), on_victim.len());
    assert!(
        replacements
            .iter()
            .all(|alloc| alloc.node_id != victim_node && !alloc.previous_allocation.is_empty())
    );
    let mut replaced_names: Vec<String> = replacements
        .iter()
        .map(|alloc| alloc.name.clone())
        .collect();
    replaced_names.sort();
    let mut expected = on_victim.clone();
    expected.sort();
    assert_eq!(
        replaced_names, expected,
        "replacements keep the lost allocations' names"
    );
}

#[test]
fn alloc_stop_migrates_to_a_replacement() {
    let mut state = cluster(2);
    let job = JobBuilder::service("web")
        .group("g", 2)
        .task("t", "raw_exec")
        .build();
    state.upsert_job(job.clone());
    let first = run(&state, &job, "e1");
    commit(&mut state, &first);
    let mut target = live_allocs(&state, &job)[1].clone();
    target.desired_transition.migrate = Some(true);
    state.upsert_alloc(target.clone());

    let mut eval = eval_for(&job, "e2");
    eval.triggered_by = drover_structs::EVAL_TRIGGER_ALLOC_STOP.to_string();
    let plan = run_eval(&state, &eval);
    assert_eq!(
        stops_by_description(&plan),
        BTreeMap::from([(
            STATUS_ALLOC_MIGRATING.to_string(),
            vec![target.name.clone()]
        )])
    );
    let replacement: Vec<&Allocation> = plan.allocations().collect();
    assert_eq!(replacement.len(), 1);
    assert_eq!(replacement[0].name, target.name);
    assert_eq!(replacement[0].previous_allocation, target.id);
    assert_eq!(plan.annotations.desired_tg_updates["g"].migrate, 1);
}

fn finished(alloc: &Allocation, client_status: &str, failed: bool) -> Allocation {
    let mut done = alloc.clone();
    done.client_status = client_status.to_string();
    done.modify_time = NOW - 10 * SECOND;
    let state = TaskState {
        state: drover_structs::TASK_STATE_DEAD.to_string(),
        failed,
        finished_at: drover_structs::Timestamp::from_unix_nanos(NOW - 10 * SECOND),
        ..TaskState::default()
    };
    done.task_states.insert("t".to_string(), state);
    done
}

#[test]
fn completed_batch_work_is_not_run_again() {
    let mut state = cluster(2);
    let job = JobBuilder::batch("report")
        .group("g", 2)
        .task("t", "raw_exec")
        .build();
    state.upsert_job(job.clone());
    let first = run(&state, &job, "e1");
    commit(&mut state, &first);
    for alloc in live_allocs(&state, &job) {
        state.upsert_alloc(finished(
            &alloc,
            drover_structs::ALLOC_CLIENT_STATUS_COMPLETE,
            false,
        ));
    }
    let plan = run(&state, &job, "e2");
    assert!(plan.is_no_op(), "{plan:?}");
}

#[test]
fn failed_batch_allocation_is_rescheduled_while_attempts_remain() {
    let mut state = cluster(2);
    let job = JobBuilder::batch("report")
        .group("g", 1)
        .task("t", "raw_exec")
        .reschedule_attempts(1)
        .build();
    state.upsert_job(job.clone());
    let first = run(&state, &job, "e1");
    commit(&mut state, &first);
    let original = live_allocs(&state, &job)[0].clone();
    state.upsert_alloc(finished(
        &original,
        drover_structs::ALLOC_CLIENT_STATUS_FAILED,
        true,
    ));

    let plan = run(&state, &job, "e2");
    assert_eq!(
        stops_by_description(&plan),
        BTreeMap::from([(
            STATUS_ALLOC_RESCHEDULED.to_string(),
            vec![original.name.clone()]
        )])
    );
    let replacement: Vec<&Allocation> = plan.allocations().collect();
    assert_eq!(replacement.len(), 1);
    assert_eq!(replacement[0].previous_allocation, original.id);
    assert_ne!(
        replacement[0].node_id, original.node_id,
        "the node it failed on is penalized"
    );
    let tracker = replacement[0].reschedule_tracker.as_ref().expect("tracker");
    assert_eq!(tracker.events.len(), 1);
    assert_eq!(tracker.events[0].prev_alloc_id, original.id);
    assert_eq!(tracker.events[0].reschedule_time, NOW);
    let stopped = plan.stops().next().expect("stop");
    assert_eq!(stopped.next_allocation, replacement[0].id);
    commit(&mut state, &plan);

    // The replacement fails too: the single attempt is used up, so nothing more happens.
    let second = live_allocs(&state, &job)[0].clone();
    state.upsert_alloc(finished(
        &second,
        drover_structs::ALLOC_CLIENT_STATUS_FAILED,
        true,
    ));
    let plan = run(&state, &job, "e3");
    assert!(plan.is_no_op(), "{plan:?}");
}

#[test]
fn failed_service_allocation_is_rescheduled_after_its_delay() {
    let mut state = cluster(2);
    let job = JobBuilder::service("web")
        .group("g", 1)
        .task("t", "raw_exec")
        .build();
    state.upsert_job(job.clone());
    let first = run(&state, &job, "e1");
    commit(&mut state, &first);
    let original = live_allocs(&state, &job)[0].clone();
    state.upsert_alloc(finished(
        &original,
        drover_structs::ALLOC_CLIENT_STATUS_FAILED,
        true,
    ));

    // Default service policy: 30 s delay, so a delayed evaluation is made instead.
    let plan = run(&state, &job, "e2");
    assert_eq!(plan.follow_up_evals.len(), 1);
    let follow_up = &plan.follow_up_evals[0];
    assert_eq!(
        follow_up.wait_until.unix_nanos(),
        Some(NOW - 10 * SECOND + 30 * SECOND)
    );
    assert_eq!(follow_up.triggered_by, "alloc-reschedule");
    assert_eq!(follow_up.status, "pending");
    let marked: Vec<&Allocation> = plan.allocations().collect();
    assert_eq!(marked.len(), 1);
    assert_eq!(marked[0].id, original.id);
    assert_eq!(marked[0].followup_eval_id, follow_up.id);
    assert_eq!(plan.annotations.desired_tg_updates["g"].reschedule_later, 1);
    commit(&mut state, &plan);

    // The follow-up evaluation replaces it.
    let mut follow_up_eval = follow_up.clone();
    follow_up_eval.status = drover_structs::EVAL_STATUS_PENDING.to_string();
    let plan = run_eval(&state, &follow_up_eval);
    let replacement: Vec<&Allocation> = plan
        .allocations()
        .filter(|alloc| alloc.id != original.id)
        .collect();
    assert_eq!(replacement.len(), 1);
    assert_eq!(replacement[0].previous_allocation, original.id);
    assert_eq!(
        stops_by_description(&plan)
            .get(STATUS_ALLOC_RESCHEDULED)
            .map(Vec::len),
        Some(1)
    );
}

#[test]
fn unknown_job_types_are_refused() {
    let mut state = cluster(1);
    let mut job = JobBuilder::service("sys")
        .group("g", 1)
        .task("t", "raw_exec")
        .build();
    job.r#type = "cron".to_string();
    state.upsert_job(job.clone());
    let outcome = schedule(
        &state,
        &eval_for(&job, "e"),
        &SchedulerOptions::default(),
        &mut SeededIds::new(1),
    );
    assert!(matches!(
        outcome,
        Err(SchedulerError::UnsupportedJobType { .. })
    ));
}

#[test]
fn an_in_place_update_that_no_longer_fits_its_node_becomes_destructive() {
    let mut state = InMemoryState::new();
    state.upsert_node(NodeBuilder::new("a").meta("tier", "old").build());
    state.upsert_node(NodeBuilder::new("b").meta("tier", "new").build());
    let job = JobBuilder::service("web")
        .group("g", 1)
        .task("t", "raw_exec")
        .group_constraint("${meta.tier}", "=", "old")
        .build();
    state.upsert_job(job.clone());
    let first = run(&state, &job, "e1");
    commit(&mut state, &first);
    assert_eq!(live_allocs(&state, &job)[0].node_id, "a");

    // Constraints are not a destructive field, but the running node no longer satisfies them.
    let moved = new_version(&job, |job| {
        job.task_groups[0].constraints[0].r_target = "new".into()
    });
    state.upsert_job(moved.clone());
    let plan = run(&state, &moved, "e2");
    assert_eq!(
        plan.annotations.desired_tg_updates["g"].destructive_update,
        1
    );
    assert_eq!(
        stops_by_description(&plan)
            .get(STATUS_ALLOC_UPDATING)
            .map(Vec::len),
        Some(1)
    );
    let replacement: Vec<&Allocation> = plan.allocations().collect();
    assert_eq!(replacement.len(), 1);
    assert_eq!(replacement[0].node_id, "b");
}

#[test]
fn failed_allocations_beyond_a_lowered_count_are_stopped_not_replaced() {
    let mut state = cluster(3);
    let job = JobBuilder::service("web")
        .group("g", 3)
        .task("t", "raw_exec")
        .build();
    state.upsert_job(job.clone());
    let first = run(&state, &job, "e1");
    commit(&mut state, &first);
    let highest = live_allocs(&state, &job)[2].clone();
    let mut failed = highest.clone();
    failed.client_status = drover_structs::ALLOC_CLIENT_STATUS_FAILED.to_string();
    failed.modify_time = NOW - 3_600 * SECOND;
    state.upsert_alloc(failed);

    let smaller = new_version(&job, |job| job.task_groups[0].count = 2);
    state.upsert_job(smaller.clone());
    let plan = run(&state, &smaller, "e2");
    assert_eq!(
        stops_by_description(&plan),
        BTreeMap::from([(
            STATUS_ALLOC_NOT_NEEDED.to_string(),
            vec![highest.name.clone()]
        )])
    );
    assert!(
        plan.allocations()
            .all(|alloc| alloc.client_status == "running"),
        "only in-place updates"
    );
}

#[test]
fn terminal_batch_allocations_of_an_older_version_are_ignored() {
    let mut state = cluster(2);
    let job = JobBuilder::batch("report")
        .group("g", 1)
        .task("t", "raw_exec")
        .build();
    state.upsert_job(job.clone());
    let first = run(&state, &job, "e1");
    commit(&mut state, &first);
    let done = live_allocs(&state, &job)[0].clone();
    state.upsert_alloc(finished(
        &done,
        drover_structs::ALLOC_CLIENT_STATUS_COMPLETE,
        false,
    ));

    // A new version of a batch job runs again.
    let rerun = new_version(&job, |job| {
        job.task_groups[0].tasks[0]
            .env
            .insert("RUN".into(), "2".into());
    });
    state.upsert_job(rerun.clone());
    let plan = run(&state, &rerun, "e2");
    let updates = &plan.annotations.desired_tg_updates["g"];
    assert_eq!((updates.ignore, updates.place), (1, 1));
    assert!(plan.stops().next().is_none());
}

#[test]
fn group_ports_are_assigned_without_collisions() {
    let mut state = InMemoryState::new();
    state.upsert_node(
        NodeBuilder::new("only")
            .attribute("unique.network.ip-address", "10.1.2.3")
            .build(),
    );
    let job = JobBuilder::service("web")
        .group("g", 3)
        .task("t", "raw_exec")
        .network(&[], &["http", "metrics"])
        .build();
    state.upsert_job(job.clone());
    let plan = run(&state, &job, "e1");
    let mut seen = std::collections::BTreeSet::new();
    for alloc in plan.allocations() {
        let shared = &alloc.allocated_resources.as_ref().unwrap().shared;
        assert_eq!(
            shared
                .ports
                .iter()
                .map(|port| port.label.as_str())
                .collect::<Vec<_>>(),
            vec!["http", "metrics"]
        );
        for port in &shared.ports {
            assert_eq!(port.host_ip, "10.1.2.3");
            assert!((20_000..=32_000).contains(&port.value));
            assert!(seen.insert(port.value), "port {} given twice", port.value);
        }
        assert_eq!(shared.networks[0].ip, "10.1.2.3");
    }
    assert_eq!(seen.len(), 6);
    commit(&mut state, &plan);

    // A static port can be held by one allocation per node.
    let fixed = JobBuilder::service("api")
        .group("g", 2)
        .task("t", "raw_exec")
        .network(&[("http", 8080)], &[])
        .build();
    state.upsert_job(fixed.clone());
    let plan = run(&state, &fixed, "e2");
    assert_eq!(plan.allocations().count(), 1);
    assert_eq!(
        plan.failed_tg_allocs["g"]
            .dimension_exhausted
            .get("network: reserved port collision http=8080"),
        Some(&1)
    );
    commit(&mut state, &plan);

    // Ports already held count as used on later passes too.
    let other = JobBuilder::service("other")
        .group("g", 1)
        .task("t", "raw_exec")
        .network(&[("http", 8080)], &[])
        .build();
    state.upsert_job(other.clone());
    let plan = run(&state, &other, "e3");
    assert!(plan.allocations().next().is_none());
}

#[test]
fn task_networks_get_ports_and_bandwidth_of_the_nodes_network() {
    let mut state = InMemoryState::new();
    state.upsert_node(
        NodeBuilder::new("only")
            .attribute("unique.network.ip-address", "10.1.2.3")
            .network("eth0", "10.1.2.3", 100)
            .build(),
    );
    // A group port and two tasks with networks of their own: every port distinct.
    let job = JobBuilder::service("web")
        .group("g", 1)
        .network(&[], &["group"])
        .task("front", "raw_exec")
        .task_network(&[("admin", 9090)], &["http"], 30)
        .task("back", "raw_exec")
        .task_network(&[], &["http"], 20)
        .build();
    state.upsert_job(job.clone());
    let plan = run(&state, &job, "e1");
    let alloc = plan.allocations().next().expect("placed");
    let allocated = alloc.allocated_resources.as_ref().unwrap();
    let front = &allocated.tasks["front"].networks;
    assert_eq!(front.len(), 1);
    assert_eq!(
        (
            front[0].device.as_str(),
            front[0].ip.as_str(),
            front[0].mbits
        ),
        ("eth0", "10.1.2.3", 30)
    );
    assert_eq!(front[0].reserved_ports[0].value, 9090);
    let back = &allocated.tasks["back"].networks[0];
    let mut ports = vec![
        allocated.shared.ports[0].value,
        front[0].dynamic_ports[0].value,
        back.dynamic_ports[0].value,
    ];
    assert!(
        ports[1..]
            .iter()
            .all(|port| (20_000..=32_000).contains(port))
    );
    ports.sort_unstable();
    ports.dedup();
    assert_eq!(ports.len(), 3, "a port was given twice: {ports:?}");
    // The legacy per-task resources carry the same networks, as Nomad's allocations do.
    assert_eq!(alloc.task_resources["back"].networks[0], *back);
    commit(&mut state, &plan);

    // The static port is held: a second job asking for it does not fit on the node...
    let clash = JobBuilder::service("clash")
        .group("g", 1)
        .task("t", "raw_exec")
        .task_network(&[("admin", 9090)], &[], 10)
        .build();
    state.upsert_job(clash.clone());
    let plan = run(&state, &clash, "e2");
    assert!(plan.allocations().next().is_none());
    assert_eq!(
        plan.failed_tg_allocs["g"]
            .dimension_exhausted
            .get("network: reserved port collision admin=9090"),
        Some(&1)
    );
    // ...nor a group port on it.
    let group_clash = JobBuilder::service("group-clash")
        .group("g", 1)
        .network(&[("admin", 9090)], &[])
        .task("t", "raw_exec")
        .build();
    state.upsert_job(group_clash.clone());
    let plan = run(&state, &group_clash, "e3");
    assert!(plan.allocations().next().is_none());

    // 50 of the device's 100 MBits are held: 50 more fit, 51 do not.
    let fits = JobBuilder::service("fits")
        .group("g", 1)
        .task("t", "raw_exec")
        .task_network(&[], &["x"], 50)
        .build();
    state.upsert_job(fits.clone());
    let plan = run(&state, &fits, "e4");
    assert_eq!(plan.allocations().count(), 1);
    commit(&mut state, &plan);
    let over = JobBuilder::service("over")
        .group("g", 1)
        .task("t", "raw_exec")
        .task_network(&[], &["x"], 1)
        .build();
    state.upsert_job(over.clone());
    let plan = run(&state, &over, "e5");
    assert!(plan.allocations().next().is_none());
    assert_eq!(
        plan.failed_tg_allocs["g"]
            .dimension_exhausted
            .get("network: bandwidth exceeded"),
        Some(&1)
    );
}

#[test]
fn a_task_network_needs_a_fingerprinted_node_network() {
    let mut state = InMemoryState::new();
    state.upsert_node(NodeBuilder::new("bare").build());
    let job = JobBuilder::service("web")
        .group("g", 1)
        .task("t", "raw_exec")
        .task_network(&[], &["http"], 0)
        .build();
    state.upsert_job(job.clone());
    let plan = run(&state, &job, "e1");
    assert!(plan.allocations().next().is_none());
    assert_eq!(
        plan.failed_tg_allocs["g"]
            .dimension_exhausted
            .get("network: no networks available"),
        Some(&1)
    );
}

#[test]
fn affinities_steer_placements() {
    let mut state = InMemoryState::new();
    for index in 0..20 {
        let zone = if index == 13 { "fast" } else { "slow" };
        state.upsert_node(
            NodeBuilder::new(&format!("n{index:02}"))
                .meta("zone", zone)
                .build(),
        );
    }
    let mut job = JobBuilder::service("web")
        .group("g", 1)
        .task("t", "raw_exec")
        .build();
    job.affinities.push(drover_structs::Affinity {
        l_target: "${meta.zone}".into(),
        operand: "=".into(),
        r_target: "fast".into(),
        weight: 80,
    });
    state.upsert_job(job.clone());
    for eval_id in ["a", "b", "c", "d"] {
        let plan = run(&state, &job, eval_id);
        let alloc = plan.allocations().next().expect("placed");
        assert_eq!(
            alloc.node_id, "n13",
            "the only node matching the affinity wins"
        );
        let top = &alloc.metrics.as_ref().unwrap().score_meta_data[0];
        assert_eq!(top.scores.get("node-affinity"), Some(&1.0));
    }
    // A negative weight pushes away from matching nodes.
    let mut avoid = job.clone();
    avoid.affinities[0].weight = -80;
    state.upsert_job(avoid.clone());
    let plan = run(&state, &avoid, "e");
    assert_ne!(
        plan.allocations()
            .next()
            .map(|alloc| alloc.node_id.as_str()),
        Some("n13")
    );
}

#[test]
fn spread_targets_split_allocations_by_attribute() {
    let mut state = InMemoryState::new();
    for index in 0..12 {
        let rack = if index < 6 { "r1" } else { "r2" };
        state.upsert_node(
            NodeBuilder::new(&format!("n{index:02}"))
                .meta("rack", rack)
                .build(),
        );
    }
    let mut job = JobBuilder::service("web")
        .group("g", 10)
        .task("t", "raw_exec")
        .build();
    job.task_groups[0].spreads.push(drover_structs::Spread {
        attribute: "${meta.rack}".into(),
        weight: 100,
        spread_target: vec![
            drover_structs::SpreadTarget {
                value: "r1".into(),
                percent: 70,
            },
            drover_structs::SpreadTarget {
                value: "r2".into(),
                percent: 30,
            },
        ],
    });
    state.upsert_job(job.clone());
    let plan = run(&state, &job, "e");
    let on_r1 = plan
        .allocations()
        .filter(|alloc| alloc.node_id.as_str() < "n06")
        .count();
    assert_eq!(plan.allocations().count(), 10);
    assert_eq!(on_r1, 7, "70% on r1");

    // Without targets: even.
    let mut even = new_version(&job, |_| {});
    even.id = "even".into();
    even.name = "even".into();
    even.task_groups[0].spreads[0].spread_target.clear();
    state.upsert_job(even.clone());
    let plan = run(&state, &even, "e2");
    let on_r1 = plan
        .allocations()
        .filter(|alloc| alloc.node_id.as_str() < "n06")
        .count();
    assert_eq!(on_r1, 5);
}

#[test]
fn ephemeral_disk_counts_when_the_node_reports_its_disk() {
    let job = JobBuilder::service("web")
        .group("g", 3)
        .task("t", "raw_exec")
        .build();
    let with_disk = |disk_mb: i64| {
        let mut state = InMemoryState::new();
        let mut node = NodeBuilder::new("n").build();
        if let Some(resources) = node.node_resources.as_mut() {
            resources.disk.disk_mb = disk_mb;
        }
        state.upsert_node(node);
        state.upsert_job(job.clone());
        run(&state, &job, "e")
    };
    let small = with_disk(700);
    assert_eq!(
        small.allocations().count(),
        2,
        "two 300 MB disks fit in 700 MB, three do not"
    );
    assert_eq!(
        small.failed_tg_allocs["g"].dimension_exhausted.get("disk"),
        Some(&1)
    );
    let unknown = with_disk(0);
    assert_eq!(
        unknown.allocations().count(),
        3,
        "a node that reports no disk is not limited by it"
    );
}

#[test]
fn stopping_a_batch_allocation_with_reschedule_replaces_it_once() {
    let mut state = cluster(3);
    let job = JobBuilder::batch("report")
        .group("g", 2)
        .task("t", "raw_exec")
        .reschedule_attempts(2)
        .build();
    state.upsert_job(job.clone());
    let first = run(&state, &job, "e1");
    commit(&mut state, &first);
    let mut target = live_allocs(&state, &job)[1].clone();
    target.desired_transition.migrate = Some(true);
    target.desired_transition.reschedule = Some(true);
    target.modify_time = NOW - 3_600 * SECOND;
    state.upsert_alloc(target.clone());

    let plan = run(&state, &job, "e2");
    assert_eq!(
        stops_by_description(&plan),
        BTreeMap::from([(
            STATUS_ALLOC_MIGRATING.to_string(),
            vec![target.name.clone()]
        )])
    );
    let placed: Vec<&Allocation> = plan.allocations().collect();
    assert_eq!(placed.len(), 1, "{:?}", plan.annotations);
    assert_eq!(
        placed[0].name, target.name,
        "{:?} {:?}",
        plan.annotations, placed[0]
    );
    assert_eq!(placed[0].previous_allocation, target.id);
    assert!(
        placed[0].reschedule_tracker.is_some(),
        "replaced as a reschedule"
    );
}

#[test]
fn a_running_allocation_stopped_for_reschedule_stays_stopped_when_no_node_fits() {
    // Regression: restoring it after its replacement failed overcommitted the node, because
    // another placement of the same pass had already used what its stop freed.
    let mut state = InMemoryState::new();
    let node = NodeBuilder::new("only").resources(1000, 8192).build();
    state.upsert_node(node.clone());
    let job = JobBuilder::batch("work")
        .group("z", 1)
        .task("t", "raw_exec")
        .resources(600, 64)
        .reschedule_attempts(3)
        .group("b", 1)
        .task("t", "raw_exec")
        .resources(600, 64)
        .build();
    state.upsert_job(job.clone());
    let mut running = running_alloc("z-0", &job, "z", 0, &node);
    running.desired_transition.migrate = Some(true);
    running.desired_transition.reschedule = Some(true);
    running.modify_time = NOW - 3_600 * SECOND;
    state.upsert_alloc(running);

    let plan = run(&state, &job, "e");
    assert_eq!(
        plan.stops()
            .map(|alloc| alloc.id.as_str())
            .collect::<Vec<_>>(),
        vec!["z-0"]
    );
    assert_eq!(
        plan.allocations()
            .map(|alloc| alloc.task_group.as_str())
            .collect::<Vec<_>>(),
        vec!["b"]
    );
    assert!(plan.failed_tg_allocs.contains_key("z"));
    commit(&mut state, &plan);
    let used: i64 = state
        .allocs()
        .iter()
        .filter(|alloc| !alloc.terminal_status())
        .map(|alloc| drover_scheduler::select::allocated_usage(alloc).cpu)
        .sum();
    assert!(used <= 1000, "{used} MHz placed on a 1000 MHz node");
}

#[test]
fn sticky_ephemeral_disk_keeps_a_replacement_on_its_node() {
    let mut state = cluster(8);
    let mut job = JobBuilder::service("db")
        .group("g", 1)
        .task("t", "raw_exec")
        .build();
    if let Some(disk) = job.task_groups[0].ephemeral_disk.as_mut() {
        disk.sticky = true;
    }
    state.upsert_job(job.clone());
    let first = run(&state, &job, "e1");
    commit(&mut state, &first);
    let original = live_allocs(&state, &job)[0].clone();
    for round in 0..4 {
        let changed = new_version(&job, |job| {
            job.task_groups[0].tasks[0]
                .env
                .insert("ROUND".into(), round.to_string());
        });
        state.upsert_job(changed.clone());
        let plan = run(&state, &changed, &format!("e-{round}"));
        let replacement = plan.allocations().next().expect("a replacement");
        assert_eq!(replacement.node_id, original.node_id, "round {round}");
    }
}

fn reserved_cores_of(alloc: &Allocation, task: &str) -> Vec<u16> {
    alloc.allocated_resources.as_ref().unwrap().tasks[task]
        .cpu
        .reserved_cores
        .clone()
        .unwrap_or_default()
}

#[test]
fn tasks_with_cores_get_distinct_core_ids_and_their_cpu() {
    let mut state = InMemoryState::new();
    // 4000 MHz over 4 cores: 1000 MHz per core; core 0 kept back by the client.
    state.upsert_node(
        NodeBuilder::new("n")
            .cores(4, &[0, 1, 2, 3])
            .reserved_cores(&[0])
            .build(),
    );
    let job = JobBuilder::service("web")
        .group("g", 2)
        .task("t", "raw_exec")
        .cores(1)
        .build();
    state.upsert_job(job.clone());
    let mut plan = run(&state, &job, "e1");
    assert!(plan.failed_tg_allocs.is_empty());
    let first: Vec<Vec<u16>> = plan
        .allocations()
        .map(|alloc| reserved_cores_of(alloc, "t"))
        .collect();
    let mut all: Vec<u16> = first.iter().flatten().copied().collect();
    all.sort_unstable();
    assert_eq!(all, vec![1, 2], "lowest free cores, never core 0, one each");
    for alloc in plan.allocations() {
        let allocated = alloc.allocated_resources.as_ref().unwrap();
        assert_eq!(allocated.tasks["t"].cpu.cpu_shares, 1000);
        assert_eq!(alloc.task_resources["t"].cpu, 1000);
    }
    commit(&mut state, &plan);

    // Another job asking for two cores finds only core 3 free: exhausted on "cores".
    let other = JobBuilder::service("batchy")
        .group("big", 1)
        .task("crunch", "raw_exec")
        .cores(2)
        .build();
    state.upsert_job(other.clone());
    plan = run(&state, &other, "e2");
    assert!(plan.allocations().next().is_none());
    let metric = &plan.failed_tg_allocs["big"];
    assert_eq!(metric.nodes_exhausted, 1);
    assert_eq!(metric.dimension_exhausted.get("cores"), Some(&1));

    // One core fits, on core 3.
    let single = new_version(&other, |job| {
        job.task_groups[0].tasks[0]
            .resources
            .as_mut()
            .unwrap()
            .cores = 1;
    });
    state.upsert_job(single.clone());
    plan = run(&state, &single, "e3");
    let placed: Vec<&Allocation> = plan.allocations().collect();
    assert_eq!(placed.len(), 1);
    assert_eq!(reserved_cores_of(placed[0], "crunch"), vec![3]);
}

#[test]
fn cores_of_stopped_allocations_are_free_again_and_in_place_updates_keep_theirs() {
    let mut state = InMemoryState::new();
    state.upsert_node(NodeBuilder::new("n").cores(4, &[0, 1]).build());
    let job = JobBuilder::service("web")
        .group("g", 1)
        .task("t", "raw_exec")
        .cores(1)
        .build();
    state.upsert_job(job.clone());
    let plan = run(&state, &job, "e1");
    commit(&mut state, &plan);
    let first = live_allocs(&state, &job);
    assert_eq!(reserved_cores_of(&first[0], "t"), vec![0]);

    // Scaling up updates the running allocation in place (it keeps its core and the CPU it
    // stands for) and gives the new one the other core.
    let scaled = new_version(&job, |job| job.task_groups[0].count = 2);
    state.upsert_job(scaled.clone());
    let plan = run(&state, &scaled, "e2");
    assert!(plan.failed_tg_allocs.is_empty());
    let kept = plan
        .allocations()
        .find(|alloc| alloc.id == first[0].id)
        .expect("updated in place");
    assert_eq!(reserved_cores_of(kept, "t"), vec![0]);
    assert_eq!(
        kept.allocated_resources.as_ref().unwrap().tasks["t"]
            .cpu
            .cpu_shares,
        1000
    );
    let new: Vec<&Allocation> = plan
        .allocations()
        .filter(|alloc| alloc.id != first[0].id)
        .collect();
    assert_eq!(new.len(), 1);
    assert_eq!(reserved_cores_of(new[0], "t"), vec![1]);
    commit(&mut state, &plan);

    // A second job cannot have a core while the first runs.
    let other = JobBuilder::service("other")
        .group("g", 1)
        .task("t", "raw_exec")
        .cores(1)
        .build();
    state.upsert_job(other.clone());
    let plan = run(&state, &other, "e3");
    assert!(plan.allocations().next().is_none());
    assert_eq!(
        plan.failed_tg_allocs["g"].dimension_exhausted.get("cores"),
        Some(&1)
    );

    // Once the first job stops, its cores are free again.
    let stopped = new_version(&scaled, |job| job.stop = true);
    state.upsert_job(stopped.clone());
    let plan = run(&state, &stopped, "e4");
    commit(&mut state, &plan);
    let plan = run(&state, &other, "e5");
    let placed: Vec<&Allocation> = plan.allocations().collect();
    assert_eq!(placed.len(), 1);
    assert_eq!(reserved_cores_of(placed[0], "t"), vec![0]);
}
