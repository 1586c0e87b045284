//! System and sysbatch scheduling scenarios: one allocation per group on every ready, feasible
//! node.

// Integration tests: a panic is a failed test.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::collections::BTreeSet;

use drover_scheduler::reconcile::{
    STATUS_ALLOC_LOST, STATUS_ALLOC_NOT_NEEDED, STATUS_ALLOC_UPDATING,
};
use drover_scheduler::system::STATUS_ALLOC_NODE_TAINTED;
use drover_scheduler::testing::{JobBuilder, NodeBuilder};
use drover_scheduler::{
    InMemoryState, Plan, SchedulerOptions, SchedulerState, SeededIds, schedule,
};
use drover_structs::{Allocation, Evaluation, Job, TaskState};

const NOW: i64 = 1_700_000_000_000_000_000;

fn system_job(job_id: &str, job_type: &str) -> Job {
    let mut job = JobBuilder::service(job_id)
        .group("agent", 1)
        .task("t", "raw_exec")
        .build();
    job.r#type = job_type.to_string();
    job
}

fn run(state: &InMemoryState, job: &Job, eval_id: &str) -> Plan {
    let eval = Evaluation {
        id: eval_id.to_string(),
        namespace: job.namespace.clone(),
        priority: 50,
        r#type: job.r#type.clone(),
        triggered_by: drover_structs::EVAL_TRIGGER_JOB_REGISTER.to_string(),
        job_id: job.id.clone(),
        status: drover_structs::EVAL_STATUS_PENDING.to_string(),
        ..Evaluation::default()
    };
    let seed = eval_id.bytes().fold(7u64, |hash, byte| {
        hash.wrapping_mul(31).wrapping_add(u64::from(byte))
    });
    schedule(
        state,
        &eval,
        &SchedulerOptions {
            seed,
            now_unix_nanos: NOW,
            ..SchedulerOptions::default()
        },
        &mut SeededIds::new(seed),
    )
    .expect("system jobs schedule")
}

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

fn nodes_of(plan: &Plan) -> BTreeSet<String> {
    plan.allocations()
        .map(|alloc| alloc.node_id.clone())
        .collect()
}

fn live(state: &InMemoryState) -> Vec<Allocation> {
    state
        .allocs()
        .iter()
        .filter(|alloc| !alloc.terminal_status())
        .map(|alloc| Allocation::clone(alloc))
        .collect()
}

fn mixed_cluster() -> InMemoryState {
    let mut state = InMemoryState::new();
    for id in ["a", "b", "c"] {
        state.upsert_node(NodeBuilder::new(id).build());
    }
    state.upsert_node(
        NodeBuilder::new("down")
            .status(drover_structs::NODE_STATUS_DOWN)
            .build(),
    );
    state.upsert_node(NodeBuilder::new("ineligible").ineligible().build());
    state.upsert_node(NodeBuilder::new("elsewhere").datacenter("dc2").build());
    state.upsert_node(
        NodeBuilder::new("no-driver")
            .without_driver("raw_exec")
            .build(),
    );
    state
}

#[test]
fn one_allocation_on_every_ready_feasible_node() {
    let mut state = mixed_cluster();
    let job = system_job("logs", drover_structs::JOB_TYPE_SYSTEM);
    state.upsert_job(job.clone());
    let plan = run(&state, &job, "e1");
    assert_eq!(
        nodes_of(&plan),
        BTreeSet::from(["a".to_string(), "b".to_string(), "c".to_string()])
    );
    assert!(
        plan.allocations()
            .all(|alloc| alloc.name == "logs.agent[0]" && alloc.desired_status == "run")
    );
    assert_eq!(plan.annotations.desired_tg_updates["agent"].place, 3);
    assert!(
        plan.failed_tg_allocs.is_empty(),
        "a node without the driver is skipped, not a failure"
    );
    assert!(plan.blocked_eval.is_none());
    assert_eq!(plan.queued_allocations.get("agent"), Some(&0));
    commit(&mut state, &plan);

    // Unchanged: nothing to do. A new node: placed there only.
    assert!(run(&state, &job, "e2").is_no_op());
    state.upsert_node(NodeBuilder::new("d").build());
    let plan = run(&state, &job, "e3");
    assert_eq!(nodes_of(&plan), BTreeSet::from(["d".to_string()]));
    assert_eq!(plan.annotations.desired_tg_updates["agent"].ignore, 3);
}

#[test]
fn a_down_node_loses_its_allocation_without_replacement() {
    let mut state = mixed_cluster();
    let job = system_job("logs", drover_structs::JOB_TYPE_SYSTEM);
    state.upsert_job(job.clone());
    let plan = run(&state, &job, "e1");
    commit(&mut state, &plan);
    let node = state.node("b").unwrap();
    state.upsert_node(drover_structs::Node {
        status: drover_structs::NODE_STATUS_DOWN.to_string(),
        ..(*node).clone()
    });
    let plan = run(&state, &job, "e2");
    let stops: Vec<&Allocation> = plan.stops().collect();
    assert_eq!(stops.len(), 1);
    assert_eq!(
        (
            stops[0].node_id.as_str(),
            stops[0].desired_description.as_str(),
            stops[0].client_status.as_str()
        ),
        ("b", STATUS_ALLOC_LOST, "lost")
    );
    assert!(plan.allocations().next().is_none());
}

#[test]
fn job_changes_update_in_place_or_replace_on_the_same_node() {
    let mut state = mixed_cluster();
    let job = system_job("logs", drover_structs::JOB_TYPE_SYSTEM);
    state.upsert_job(job.clone());
    let plan = run(&state, &job, "e1");
    commit(&mut state, &plan);

    let mut reprioritized = job.clone();
    reprioritized.priority = 80;
    reprioritized.version = 1;
    reprioritized.job_modify_index = 20;
    state.upsert_job(reprioritized.clone());
    let plan = run(&state, &reprioritized, "e2");
    assert_eq!(
        plan.annotations.desired_tg_updates["agent"].in_place_update,
        3
    );
    assert!(plan.stops().next().is_none());
    commit(&mut state, &plan);

    let mut changed = reprioritized.clone();
    changed.version = 2;
    changed.job_modify_index = 30;
    changed.task_groups[0].tasks[0]
        .env
        .insert("LEVEL".into(), "debug".into());
    state.upsert_job(changed.clone());
    let plan = run(&state, &changed, "e3");
    assert_eq!(
        plan.annotations.desired_tg_updates["agent"].destructive_update,
        3
    );
    let stopped: BTreeSet<(String, String)> = plan
        .stops()
        .map(|alloc| (alloc.node_id.clone(), alloc.id.clone()))
        .collect();
    assert_eq!(stopped.len(), 3);
    assert!(
        plan.stops()
            .all(|alloc| alloc.desired_description == STATUS_ALLOC_UPDATING)
    );
    for alloc in plan.allocations() {
        assert!(
            stopped.contains(&(alloc.node_id.clone(), alloc.previous_allocation.clone())),
            "replaced on the same node"
        );
    }
}

#[test]
fn stopping_a_system_job_stops_every_allocation() {
    let mut state = mixed_cluster();
    let job = system_job("logs", drover_structs::JOB_TYPE_SYSTEM);
    state.upsert_job(job.clone());
    let plan = run(&state, &job, "e1");
    commit(&mut state, &plan);
    let mut stopped = job.clone();
    stopped.stop = true;
    stopped.job_modify_index = 20;
    state.upsert_job(stopped.clone());
    let plan = run(&state, &stopped, "e2");
    assert_eq!(plan.stops().count(), 3);
    assert!(
        plan.stops()
            .all(|alloc| alloc.desired_description == STATUS_ALLOC_NOT_NEEDED)
    );
    commit(&mut state, &plan);
    assert!(live(&state).is_empty());
}

#[test]
fn a_group_no_node_can_run_reports_why_without_blocking() {
    let mut state = mixed_cluster();
    let mut job = system_job("logs", drover_structs::JOB_TYPE_SYSTEM);
    job.constraints.push(drover_scheduler::testing::constraint(
        "${attr.kernel.name}",
        "=",
        "windows",
    ));
    state.upsert_job(job.clone());
    let plan = run(&state, &job, "e1");
    assert!(plan.allocations().next().is_none());
    let metric = &plan.failed_tg_allocs["agent"];
    assert_eq!(
        metric
            .constraint_filtered
            .get("${attr.kernel.name} = windows"),
        Some(&4)
    );
    assert!(plan.blocked_eval.is_none());
}

#[test]
fn a_full_node_is_a_failure_that_blocks() {
    let mut state = InMemoryState::new();
    state.upsert_node(NodeBuilder::new("big").build());
    state.upsert_node(NodeBuilder::new("tiny").resources(50, 64).build());
    let job = system_job("logs", drover_structs::JOB_TYPE_SYSTEM);
    state.upsert_job(job.clone());
    let plan = run(&state, &job, "e1");
    assert_eq!(nodes_of(&plan), BTreeSet::from(["big".to_string()]));
    assert_eq!(
        plan.failed_tg_allocs["agent"]
            .dimension_exhausted
            .get("cpu"),
        Some(&1)
    );
    assert_eq!(plan.queued_allocations.get("agent"), Some(&1));
    assert!(plan.blocked_eval.is_some());
}

#[test]
fn alloc_stop_on_a_system_job_stops_it_as_tainted() {
    let mut state = mixed_cluster();
    let job = system_job("logs", drover_structs::JOB_TYPE_SYSTEM);
    state.upsert_job(job.clone());
    let plan = run(&state, &job, "e1");
    commit(&mut state, &plan);
    let mut target = live(&state)
        .into_iter()
        .find(|alloc| alloc.node_id == "a")
        .unwrap();
    target.desired_transition.migrate = Some(true);
    state.upsert_alloc(target);
    let plan = run(&state, &job, "e2");
    assert_eq!(
        plan.stops()
            .map(|alloc| (alloc.node_id.as_str(), alloc.desired_description.as_str()))
            .collect::<Vec<_>>(),
        vec![("a", STATUS_ALLOC_NODE_TAINTED)]
    );
    commit(&mut state, &plan);
    // The next evaluation runs it on that node again.
    let plan = run(&state, &job, "e3");
    assert_eq!(nodes_of(&plan), BTreeSet::from(["a".to_string()]));
}

fn finish(state: &mut InMemoryState, client_status: &str, failed: bool) {
    for alloc in live(state) {
        let mut done = alloc.clone();
        done.client_status = client_status.to_string();
        done.task_states.insert(
            "t".to_string(),
            TaskState {
                state: drover_structs::TASK_STATE_DEAD.to_string(),
                failed,
                ..TaskState::default()
            },
        );
        state.upsert_alloc(done);
    }
}

#[test]
fn sysbatch_work_runs_once_per_node_per_version() {
    let mut state = mixed_cluster();
    let job = system_job("scan", drover_structs::JOB_TYPE_SYSBATCH);
    state.upsert_job(job.clone());
    let plan = run(&state, &job, "e1");
    assert_eq!(plan.allocations().count(), 3);
    commit(&mut state, &plan);
    finish(
        &mut state,
        drover_structs::ALLOC_CLIENT_STATUS_COMPLETE,
        false,
    );
    assert!(
        run(&state, &job, "e2").is_no_op(),
        "finished sysbatch work is not run again"
    );

    let mut changed = job.clone();
    changed.version = 1;
    changed.job_modify_index = 20;
    changed.task_groups[0].tasks[0]
        .env
        .insert("TARGET".into(), "all".into());
    state.upsert_job(changed.clone());
    let plan = run(&state, &changed, "e3");
    assert_eq!(plan.allocations().count(), 3, "a new version runs again");
    assert!(
        plan.stops().next().is_none(),
        "finished allocations need no stop"
    );
}

#[test]
fn failed_system_allocations_are_replaced_on_their_node() {
    let mut state = mixed_cluster();
    let job = system_job("logs", drover_structs::JOB_TYPE_SYSTEM);
    state.upsert_job(job.clone());
    let plan = run(&state, &job, "e1");
    commit(&mut state, &plan);
    let before: BTreeSet<String> = live(&state).into_iter().map(|alloc| alloc.id).collect();
    finish(&mut state, drover_structs::ALLOC_CLIENT_STATUS_FAILED, true);
    let plan = run(&state, &job, "e2");
    assert_eq!(
        nodes_of(&plan),
        BTreeSet::from(["a".to_string(), "b".to_string(), "c".to_string()])
    );
    assert!(
        plan.allocations()
            .all(|alloc| before.contains(&alloc.previous_allocation))
    );
}

fn rolling(mut job: Job, max_parallel: i64, stagger_secs: i64) -> Job {
    job.update = Some(drover_structs::UpdateStrategy {
        max_parallel,
        stagger: drover_structs::DurationNs::from_secs(stagger_secs),
        ..drover_structs::UpdateStrategy::default()
    });
    job
}

fn new_version(job: &Job, version: u64, level: &str) -> Job {
    let mut changed = job.clone();
    changed.version = version;
    changed.job_modify_index = 10 * (version + 1);
    changed.task_groups[0].tasks[0]
        .env
        .insert("LEVEL".into(), level.into());
    changed
}

/// Allocations running the job at `job_modify_index`, by node.
fn live_nodes_at(state: &InMemoryState, job_modify_index: u64) -> BTreeSet<String> {
    live(state)
        .into_iter()
        .filter(|alloc| {
            alloc
                .job
                .as_ref()
                .is_some_and(|job| job.job_modify_index == job_modify_index)
        })
        .map(|alloc| alloc.node_id)
        .collect()
}

#[test]
fn a_rolling_system_job_replaces_max_parallel_allocations_per_evaluation() {
    let mut state = mixed_cluster();
    let job = rolling(system_job("logs", drover_structs::JOB_TYPE_SYSTEM), 2, 30);
    state.upsert_job(job.clone());
    let first = run(&state, &job, "e1");
    commit(&mut state, &first);

    let changed = new_version(&job, 1, "debug");
    state.upsert_job(changed.clone());
    // A node that joined meanwhile is placed at once: the limit is for replacements only.
    state.upsert_node(NodeBuilder::new("d").build());
    let plan = run(&state, &changed, "e2");
    let desired = &plan.annotations.desired_tg_updates["agent"];
    assert_eq!(
        (desired.destructive_update, desired.place),
        (3, 1),
        "the annotations count every destructive update, as Nomad's are made before the limit"
    );
    assert_eq!(plan.stops().count(), 2, "max_parallel replacements");
    assert!(
        plan.stops()
            .all(|alloc| alloc.desired_description == STATUS_ALLOC_UPDATING)
    );
    assert_eq!(plan.allocations().count(), 3);
    assert_eq!(plan.follow_up_evals.len(), 1);
    let next = &plan.follow_up_evals[0];
    assert_eq!(
        (
            next.triggered_by.as_str(),
            next.status.as_str(),
            next.wait,
            next.previous_eval.as_str(),
            next.job_id.as_str(),
            next.r#type.as_str(),
            next.create_time,
        ),
        (
            drover_structs::EVAL_TRIGGER_ROLLING_UPDATE,
            drover_structs::EVAL_STATUS_PENDING,
            drover_structs::DurationNs::from_secs(30),
            "e2",
            "logs",
            drover_structs::JOB_TYPE_SYSTEM,
            NOW,
        )
    );
    assert!(next.wait_until.unix_nanos().is_none_or(|at| at == 0));
    let finished = plan.finished_eval(&Evaluation::default(), NOW);
    assert_eq!(finished.next_eval, next.id);
    commit(&mut state, &plan);
    assert_eq!(live_nodes_at(&state, changed.job_modify_index).len(), 3);
    assert_eq!(live_nodes_at(&state, job.job_modify_index).len(), 1);

    // The rolling-update evaluation does the last wave and asks for no further one.
    let plan = run(&state, &changed, &next.id);
    assert_eq!(plan.stops().count(), 1);
    assert_eq!(plan.allocations().count(), 1);
    assert!(plan.follow_up_evals.is_empty());
    commit(&mut state, &plan);
    assert_eq!(
        live_nodes_at(&state, changed.job_modify_index),
        BTreeSet::from(["a", "b", "c", "d"].map(String::from))
    );
    assert!(run(&state, &changed, "e4").is_no_op());
}

#[test]
fn a_rolling_system_job_updates_in_place_without_limit() {
    let mut state = mixed_cluster();
    let job = rolling(system_job("logs", drover_structs::JOB_TYPE_SYSTEM), 1, 30);
    state.upsert_job(job.clone());
    let first = run(&state, &job, "e1");
    commit(&mut state, &first);
    let mut reprioritized = job.clone();
    reprioritized.priority = 80;
    reprioritized.job_modify_index = 20;
    state.upsert_job(reprioritized.clone());
    let plan = run(&state, &reprioritized, "e2");
    assert_eq!(
        plan.annotations.desired_tg_updates["agent"].in_place_update,
        3
    );
    assert!(plan.stops().next().is_none());
    assert!(plan.follow_up_evals.is_empty());
}

#[test]
fn a_system_job_rolls_only_with_both_max_parallel_and_stagger() {
    for (max_parallel, stagger_secs) in [(0, 30), (1, 0)] {
        let mut state = mixed_cluster();
        let job = rolling(
            system_job("logs", drover_structs::JOB_TYPE_SYSTEM),
            max_parallel,
            stagger_secs,
        );
        state.upsert_job(job.clone());
        let first = run(&state, &job, "e1");
        commit(&mut state, &first);
        let changed = new_version(&job, 1, "debug");
        state.upsert_job(changed.clone());
        let plan = run(&state, &changed, "e2");
        assert_eq!(
            plan.stops().count(),
            3,
            "max_parallel {max_parallel}, stagger {stagger_secs}s: all at once"
        );
        assert!(plan.follow_up_evals.is_empty());
    }
}

#[test]
fn a_group_update_block_does_not_roll_a_system_job() {
    // Nomad up to 1.10 reads the job-level block only; the support table refuses a group's
    // own settings, and the scheduler does not read them either.
    let mut state = mixed_cluster();
    let mut job = system_job("logs", drover_structs::JOB_TYPE_SYSTEM);
    job.task_groups[0].update = Some(drover_structs::UpdateStrategy {
        max_parallel: 1,
        stagger: drover_structs::DurationNs::from_secs(30),
        ..drover_structs::UpdateStrategy::default()
    });
    state.upsert_job(job.clone());
    let first = run(&state, &job, "e1");
    commit(&mut state, &first);
    let changed = new_version(&job, 1, "debug");
    state.upsert_job(changed.clone());
    let plan = run(&state, &changed, "e2");
    assert_eq!(plan.stops().count(), 3);
    assert!(plan.follow_up_evals.is_empty());
}

#[test]
fn stopping_a_rolling_system_job_stops_every_allocation_at_once() {
    let mut state = mixed_cluster();
    let job = rolling(system_job("logs", drover_structs::JOB_TYPE_SYSTEM), 1, 30);
    state.upsert_job(job.clone());
    let first = run(&state, &job, "e1");
    commit(&mut state, &first);
    let mut stopped = job.clone();
    stopped.stop = true;
    stopped.job_modify_index = 20;
    state.upsert_job(stopped.clone());
    let plan = run(&state, &stopped, "e2");
    assert_eq!(plan.stops().count(), 3);
    assert!(plan.follow_up_evals.is_empty());
}

#[test]
fn a_full_node_counts_among_the_desired_placements() {
    // Nomad's annotations take back only the nodes that do not suit the group.
    let mut state = InMemoryState::new();
    state.upsert_node(NodeBuilder::new("big").build());
    state.upsert_node(NodeBuilder::new("tiny").resources(50, 64).build());
    state.upsert_node(
        NodeBuilder::new("no-driver")
            .without_driver("raw_exec")
            .build(),
    );
    let job = system_job("logs", drover_structs::JOB_TYPE_SYSTEM);
    state.upsert_job(job.clone());
    let plan = run(&state, &job, "e1");
    assert_eq!(plan.annotations.desired_tg_updates["agent"].place, 2);
    assert_eq!(plan.allocations().count(), 1);
}

#[test]
fn a_changed_job_stops_its_allocation_on_a_node_it_no_longer_suits() {
    // As Nomad's system scheduler: the update is evicted, and its placement is filtered out,
    // so the old version does not keep running where the new one may not.
    let mut state = mixed_cluster();
    let job = system_job("logs", drover_structs::JOB_TYPE_SYSTEM);
    state.upsert_job(job.clone());
    let first = run(&state, &job, "e1");
    commit(&mut state, &first);
    let mut constrained = job.clone();
    constrained.version = 1;
    constrained.job_modify_index = 20;
    constrained
        .constraints
        .push(drover_scheduler::testing::constraint(
            "${node.unique.id}",
            "!=",
            "a",
        ));
    state.upsert_job(constrained.clone());
    let plan = run(&state, &constrained, "e2");
    assert_eq!(
        plan.stops()
            .map(|alloc| (alloc.node_id.as_str(), alloc.desired_description.as_str()))
            .collect::<Vec<_>>(),
        vec![("a", STATUS_ALLOC_UPDATING)]
    );
    assert!(plan.allocations().all(|alloc| alloc.node_id != "a"));
    assert!(plan.failed_tg_allocs.is_empty());
    commit(&mut state, &plan);
    assert!(run(&state, &constrained, "e3").is_no_op());
}
