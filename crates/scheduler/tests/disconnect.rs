//! Disconnected clients (`disconnect { lost_after, replace, reconcile }`): a node that stops
//! heartbeating while its groups wait for it, the follow-up evaluations, expiry, and the
//! reconnect against the replacements. Time is the options' `now`, never a clock.

// Integration tests: a panic is a failed test.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use drover_scheduler::reconcile::{
    DESC_DISCONNECT_TIMEOUT_FOLLOWUP_EVAL, STATUS_ALLOC_LOST, STATUS_ALLOC_NOT_NEEDED,
    STATUS_ALLOC_RECONNECTED, STATUS_ALLOC_UNKNOWN,
};
use drover_scheduler::testing::{JobBuilder, NodeBuilder, running_alloc};
use drover_scheduler::{InMemoryState, Plan, SchedulerOptions, SeededIds, schedule};
use drover_structs::{
    Allocation, DisconnectStrategy, DurationNs, Evaluation, Job, Node, ReschedulePolicy,
};

const NOW: i64 = 1_700_000_000_000_000_000;
const SECOND: i64 = 1_000_000_000;
const LOST_AFTER_SECS: i64 = 60;

fn job(replace: bool, reconcile: &str) -> Job {
    let mut job = JobBuilder::service("web")
        .group("g", 1)
        .task("t", "raw_exec")
        .build();
    let group = &mut job.task_groups[0];
    group.disconnect = Some(DisconnectStrategy {
        lost_after: DurationNs::from_secs(LOST_AFTER_SECS),
        replace,
        reconcile: reconcile.to_string(),
        ..DisconnectStrategy::default()
    });
    group.reschedule_policy = Some(ReschedulePolicy {
        delay: DurationNs::from_secs(1),
        delay_function: "constant".to_string(),
        unlimited: true,
        ..ReschedulePolicy::default()
    });
    job
}

fn node(node_id: &str, status: &str) -> Node {
    NodeBuilder::new(node_id).status(status).build()
}

fn run(state: &InMemoryState, job: &Job, eval_id: &str, now: i64) -> Plan {
    let eval = Evaluation {
        id: eval_id.to_string(),
        namespace: job.namespace.clone(),
        priority: job.priority,
        r#type: job.r#type.clone(),
        triggered_by: drover_structs::EVAL_TRIGGER_NODE_UPDATE.to_string(),
        job_id: job.id.clone(),
        job_modify_index: job.job_modify_index,
        status: drover_structs::EVAL_STATUS_PENDING.to_string(),
        ..Evaluation::default()
    };
    let options = SchedulerOptions {
        seed: 7,
        now_unix_nanos: now,
        ..SchedulerOptions::default()
    };
    schedule(state, &eval, &options, &mut SeededIds::new(now as u64)).expect("schedules")
}

/// A job with one allocation running on `node-a`, which is now disconnected; `node-b` is
/// ready.
fn disconnected_cluster(job: &Job) -> InMemoryState {
    let mut state = InMemoryState::new();
    state.upsert_node(node("node-b", drover_structs::NODE_STATUS_READY));
    let node_a = node("node-a", drover_structs::NODE_STATUS_DISCONNECTED);
    state.upsert_node(node_a.clone());
    state.upsert_job(job.clone());
    state.upsert_alloc(running_alloc("original", job, "g", 0, &node_a));
    state
}

fn update_of<'a>(plan: &'a Plan, alloc_id: &str) -> &'a Allocation {
    plan.allocations()
        .find(|alloc| alloc.id == alloc_id)
        .unwrap_or_else(|| panic!("the plan updates {alloc_id}"))
}

fn last_client_status_state(alloc: &Allocation) -> (String, String) {
    let state = alloc.alloc_states.last().expect("an AllocStates entry");
    (
        state["Field"].as_str().unwrap().to_string(),
        state["Value"].as_str().unwrap().to_string(),
    )
}

#[test]
fn a_disconnected_nodes_allocation_turns_unknown_and_is_replaced_elsewhere() {
    let job = job(true, "best_score");
    let state = disconnected_cluster(&job);
    let plan = run(&state, &job, "disconnect", NOW);

    assert_eq!(plan.stops().count(), 0, "nothing is stopped: {plan:?}");
    let unknown = update_of(&plan, "original");
    assert_eq!(unknown.client_status, "unknown");
    assert_eq!(unknown.client_description, STATUS_ALLOC_UNKNOWN);
    assert_eq!(unknown.desired_status, "run");
    assert_eq!(
        last_client_status_state(unknown),
        ("ClientStatus".to_string(), "unknown".to_string())
    );
    assert_eq!(unknown.last_unknown_unix_nanos(), Some(NOW));

    let timeout = &plan.follow_up_evals[0];
    assert_eq!(timeout.triggered_by, "max-disconnect-timeout");
    assert_eq!(
        timeout.status_description,
        DESC_DISCONNECT_TIMEOUT_FOLLOWUP_EVAL
    );
    assert_eq!(
        timeout.wait_until.unix_nanos(),
        Some(NOW + LOST_AFTER_SECS * SECOND)
    );
    assert_eq!(unknown.followup_eval_id, timeout.id);

    let replacement = plan
        .allocations()
        .find(|alloc| alloc.id != "original")
        .expect("a replacement");
    assert_eq!(replacement.node_id, "node-b");
    assert_eq!(replacement.previous_allocation, "original");
    assert_eq!(replacement.name, "web.g[0]");
    assert_eq!(
        unknown.next_allocation, replacement.id,
        "the original names it"
    );
    let desired = &plan.annotations.desired_tg_updates["g"];
    assert_eq!((desired.disconnect, desired.place), (1, 1));
}

#[test]
fn replace_false_keeps_the_unknown_allocation_without_a_replacement() {
    let job = job(false, "best_score");
    let state = disconnected_cluster(&job);
    let plan = run(&state, &job, "disconnect", NOW);
    assert_eq!(update_of(&plan, "original").client_status, "unknown");
    assert_eq!(plan.allocations().count(), 1, "no replacement: {plan:?}");
    assert_eq!(plan.stops().count(), 0);
}

#[test]
fn prevent_reschedule_on_lost_keeps_the_unknown_allocation_as_replace_false_does() {
    let mut job = job(true, "best_score");
    job.task_groups[0].prevent_reschedule_on_lost = true;
    let state = disconnected_cluster(&job);
    let plan = run(&state, &job, "disconnect", NOW);
    assert_eq!(update_of(&plan, "original").client_status, "unknown");
    assert_eq!(plan.allocations().count(), 1, "no replacement: {plan:?}");
    assert_eq!(plan.stops().count(), 0);
}

/// `job`'s one allocation running on `node-a`, which is now down; `node-b` is ready.
fn down_node_cluster(job: &Job) -> InMemoryState {
    let mut state = InMemoryState::new();
    state.upsert_node(node("node-b", drover_structs::NODE_STATUS_READY));
    let node_a = node("node-a", drover_structs::NODE_STATUS_DOWN);
    state.upsert_node(node_a.clone());
    state.upsert_job(job.clone());
    state.upsert_alloc(running_alloc("original", job, "g", 0, &node_a));
    state
}

#[test]
fn prevent_reschedule_on_lost_leaves_a_down_nodes_allocation_unreplaced() {
    let mut job = job(true, "best_score");
    job.task_groups[0].disconnect = None;
    job.task_groups[0].prevent_reschedule_on_lost = true;
    let plan = run(&down_node_cluster(&job), &job, "node-down", NOW);
    assert_eq!(plan.stops().count(), 0, "not lost: {plan:?}");
    assert!(
        plan.allocations().all(|alloc| alloc.id == "original"),
        "no replacement: {plan:?}"
    );

    // Without it, the same allocation is lost and replaced.
    job.task_groups[0].prevent_reschedule_on_lost = false;
    let plan = run(&down_node_cluster(&job), &job, "node-down-2", NOW);
    assert_eq!(plan.stops().count(), 1, "{plan:?}");
    assert!(plan.allocations().any(|alloc| alloc.id != "original"));
}

#[test]
fn without_lost_after_a_disconnected_nodes_allocation_is_lost_at_once() {
    let mut job = job(true, "best_score");
    job.task_groups[0].disconnect = None;
    let state = disconnected_cluster(&job);
    let plan = run(&state, &job, "disconnect", NOW);
    let lost: Vec<&Allocation> = plan.stops().collect();
    assert_eq!(lost.len(), 1);
    assert_eq!(lost[0].client_status, "lost");
    assert_eq!(lost[0].desired_description, STATUS_ALLOC_LOST);
}

/// The disconnect pass committed, the replacement running on `node-b`.
fn after_disconnect(job: &Job) -> (InMemoryState, String) {
    let mut state = disconnected_cluster(job);
    let plan = run(&state, job, "disconnect", NOW);
    state.apply_plan(&plan);
    let replacement = plan
        .allocations()
        .find(|alloc| alloc.id != "original")
        .expect("a replacement")
        .clone();
    let mut running = replacement.clone();
    running.client_status = "running".to_string();
    state.upsert_alloc(running);
    (state, replacement.id)
}

#[test]
fn an_unknown_allocation_past_lost_after_is_lost_and_its_replacement_stays() {
    let job = job(true, "best_score");
    let (state, replacement) = after_disconnect(&job);
    let plan = run(
        &state,
        &job,
        "timeout",
        NOW + (LOST_AFTER_SECS + 1) * SECOND,
    );
    let stops: Vec<&Allocation> = plan.stops().collect();
    assert_eq!(stops.len(), 1, "{plan:?}");
    assert_eq!(stops[0].id, "original");
    assert_eq!(stops[0].client_status, "lost");
    assert_eq!(stops[0].desired_description, STATUS_ALLOC_LOST);
    assert!(
        plan.allocations().all(|alloc| alloc.id != replacement),
        "the replacement runs on untouched"
    );
    assert_eq!(
        plan.allocations()
            .filter(|alloc| alloc.previous_allocation == "original")
            .count(),
        0,
        "no second replacement"
    );
}

/// `node-a` is back and its client reported the original running again.
fn reconnected(job: &Job) -> (InMemoryState, String) {
    let (mut state, replacement) = after_disconnect(job);
    state.upsert_node(node("node-a", drover_structs::NODE_STATUS_READY));
    let mut original = Allocation::clone(
        &state
            .allocs()
            .into_iter()
            .find(|alloc| alloc.id == "original")
            .unwrap(),
    );
    original.client_status = "running".to_string();
    state.upsert_alloc(original);
    (state, replacement)
}

#[test]
fn keep_original_stops_the_replacement_when_the_client_reconnects() {
    let job = job(true, "keep_original");
    let (state, replacement) = reconnected(&job);
    let plan = run(&state, &job, "reconnect", NOW + 10 * SECOND);
    let stops: Vec<&Allocation> = plan.stops().collect();
    assert_eq!(stops.len(), 1, "{plan:?}");
    assert_eq!(stops[0].id, replacement);
    assert_eq!(stops[0].desired_description, STATUS_ALLOC_RECONNECTED);
    let reconnected = update_of(&plan, "original");
    assert_eq!(
        last_client_status_state(reconnected),
        ("ClientStatus".to_string(), "running".to_string())
    );
    assert!(!reconnected.needs_to_reconnect());
    assert_eq!(plan.annotations.desired_tg_updates["g"].reconnect, 1);
    assert_eq!(
        plan.allocations().count(),
        1,
        "nothing new is placed: {plan:?}"
    );
}

#[test]
fn keep_replacement_stops_the_original_when_the_client_reconnects() {
    let job = job(true, "keep_replacement");
    let (state, replacement) = reconnected(&job);
    let plan = run(&state, &job, "reconnect", NOW + 10 * SECOND);
    let stops: Vec<&Allocation> = plan.stops().collect();
    assert_eq!(stops.len(), 1, "{plan:?}");
    assert_eq!(stops[0].id, "original");
    assert_eq!(stops[0].desired_description, STATUS_ALLOC_NOT_NEEDED);
    assert!(plan.allocations().all(|alloc| alloc.id != replacement));
}

#[test]
fn longest_running_keeps_the_allocation_that_started_first() {
    let job = job(true, "longest_running");
    let (mut state, replacement) = reconnected(&job);
    for (alloc_id, started) in [
        ("original", NOW - 100 * SECOND),
        (replacement.as_str(), NOW),
    ] {
        let mut alloc = Allocation::clone(
            &state
                .allocs()
                .into_iter()
                .find(|alloc| alloc.id == alloc_id)
                .unwrap(),
        );
        alloc.task_states.insert(
            "t".to_string(),
            drover_structs::TaskState {
                state: "running".to_string(),
                started_at: drover_structs::Timestamp::from_unix_nanos(started),
                ..drover_structs::TaskState::default()
            },
        );
        state.upsert_alloc(alloc);
    }
    let plan = run(&state, &job, "reconnect", NOW + 10 * SECOND);
    let stops: Vec<&Allocation> = plan.stops().collect();
    assert_eq!(stops.len(), 1, "{plan:?}");
    assert_eq!(stops[0].id, replacement, "the original started first");
    assert_eq!(stops[0].desired_description, STATUS_ALLOC_RECONNECTED);
}

#[test]
fn a_replacement_of_a_newer_job_version_wins_whatever_the_strategy() {
    let job_v0 = job(true, "keep_original");
    let (mut state, replacement) = reconnected(&job_v0);
    let mut job_v1 = job_v0.clone();
    job_v1.version = 1;
    let mut newer = Allocation::clone(
        &state
            .allocs()
            .into_iter()
            .find(|alloc| alloc.id == replacement)
            .unwrap(),
    );
    newer.job = Some(std::sync::Arc::new(job_v1));
    state.upsert_alloc(newer);
    let plan = run(&state, &job_v0, "reconnect", NOW + 10 * SECOND);
    let stops: Vec<&Allocation> = plan.stops().collect();
    assert_eq!(stops.len(), 1, "{plan:?}");
    assert_eq!(stops[0].id, "original");
}

// System and sysbatch jobs: one allocation per node, so a disconnected node's allocation turns
// `unknown` and waits on its node, with nothing placed elsewhere.

fn system_job(job_type: &str, lost_after_secs: Option<i64>) -> Job {
    let mut job = JobBuilder::service("agent")
        .group("g", 1)
        .task("t", "raw_exec")
        .build();
    job.r#type = job_type.to_string();
    job.task_groups[0].disconnect = lost_after_secs.map(|secs| DisconnectStrategy {
        lost_after: DurationNs::from_secs(secs),
        replace: true,
        ..DisconnectStrategy::default()
    });
    job
}

/// A system job running on `node-a` (now `node_a_status`) and `node-b` (ready).
fn system_cluster(job: &Job, node_a_status: &str) -> InMemoryState {
    let mut state = InMemoryState::new();
    let node_b = node("node-b", drover_structs::NODE_STATUS_READY);
    let node_a = node("node-a", node_a_status);
    state.upsert_node(node_b.clone());
    state.upsert_node(node_a.clone());
    state.upsert_job(job.clone());
    state.upsert_alloc(running_alloc("original", job, "g", 0, &node_a));
    state.upsert_alloc(running_alloc("on-b", job, "g", 0, &node_b));
    state
}

fn set_node_status(state: &mut InMemoryState, node_id: &str, status: &str) {
    state.upsert_node(node(node_id, status));
}

fn stored(state: &InMemoryState, alloc_id: &str) -> Allocation {
    Allocation::clone(
        &state
            .allocs()
            .into_iter()
            .find(|alloc| alloc.id == alloc_id)
            .unwrap(),
    )
}

#[test]
fn a_system_allocation_on_a_disconnected_node_turns_unknown_and_waits_there() {
    for job_type in [
        drover_structs::JOB_TYPE_SYSTEM,
        drover_structs::JOB_TYPE_SYSBATCH,
    ] {
        let job = system_job(job_type, Some(LOST_AFTER_SECS));
        let mut state = system_cluster(&job, drover_structs::NODE_STATUS_DISCONNECTED);
        let plan = run(&state, &job, "disconnect", NOW);

        assert_eq!(
            plan.stops().count(),
            0,
            "{job_type}: nothing stops: {plan:?}"
        );
        assert_eq!(
            plan.allocations().count(),
            1,
            "{job_type}: no placement: {plan:?}"
        );
        let unknown = update_of(&plan, "original");
        assert_eq!(unknown.client_status, "unknown");
        assert_eq!(unknown.client_description, STATUS_ALLOC_UNKNOWN);
        assert_eq!(unknown.desired_status, "run");
        assert_eq!(unknown.last_unknown_unix_nanos(), Some(NOW));
        assert!(unknown.needs_to_reconnect());
        assert!(
            plan.follow_up_evals.is_empty(),
            "the server's heartbeat timer, not an evaluation, bounds it"
        );
        assert_eq!(plan.annotations.desired_tg_updates["g"].disconnect, 1);

        // Within lost_after, later evaluations leave it alone.
        state.apply_plan(&plan);
        let plan = run(&state, &job, "still-away", NOW + 30 * SECOND);
        assert!(plan.is_no_op(), "{job_type}: {plan:?}");
    }
}

#[test]
fn an_unknown_system_allocation_past_lost_after_is_lost_without_replacement() {
    let job = system_job(drover_structs::JOB_TYPE_SYSTEM, Some(LOST_AFTER_SECS));
    let mut state = system_cluster(&job, drover_structs::NODE_STATUS_DISCONNECTED);
    let plan = run(&state, &job, "disconnect", NOW);
    state.apply_plan(&plan);
    // Every allocation expired: the server marks the node down.
    set_node_status(&mut state, "node-a", drover_structs::NODE_STATUS_DOWN);
    let plan = run(&state, &job, "down", NOW + (LOST_AFTER_SECS + 5) * SECOND);
    let stops: Vec<&Allocation> = plan.stops().collect();
    assert_eq!(stops.len(), 1, "{plan:?}");
    assert_eq!(stops[0].id, "original");
    assert_eq!(stops[0].client_status, "lost");
    assert_eq!(stops[0].desired_description, STATUS_ALLOC_LOST);
    assert_eq!(plan.allocations().count(), 0, "nothing replaces it");
}

#[test]
fn without_lost_after_a_system_allocation_turns_unknown_then_lost_on_the_next_evaluation() {
    // Nomad's node reconciler marks every running allocation of a disconnected node unknown;
    // one whose group does not wait has expired by the next evaluation.
    let job = system_job(drover_structs::JOB_TYPE_SYSTEM, None);
    let mut state = system_cluster(&job, drover_structs::NODE_STATUS_DISCONNECTED);
    let plan = run(&state, &job, "disconnect", NOW);
    assert_eq!(update_of(&plan, "original").client_status, "unknown");
    state.apply_plan(&plan);
    let plan = run(&state, &job, "next", NOW + SECOND);
    let stops: Vec<&Allocation> = plan.stops().collect();
    assert_eq!(stops.len(), 1, "{plan:?}");
    assert_eq!(stops[0].client_status, "lost");
}

#[test]
fn a_reconnected_system_allocation_is_recorded_running_and_kept() {
    let job = system_job(drover_structs::JOB_TYPE_SYSTEM, Some(LOST_AFTER_SECS));
    let mut state = system_cluster(&job, drover_structs::NODE_STATUS_DISCONNECTED);
    let plan = run(&state, &job, "disconnect", NOW);
    state.apply_plan(&plan);

    // The client heartbeats again: the node is initializing until it has reported its
    // allocations. Until it reports this one, it stays unknown and untouched.
    set_node_status(
        &mut state,
        "node-a",
        drover_structs::NODE_STATUS_INITIALIZING,
    );
    let plan = run(&state, &job, "back", NOW + 10 * SECOND);
    assert!(plan.is_no_op(), "{plan:?}");

    // It reports the allocation running: the reconnect evaluation records it so.
    let mut reported = stored(&state, "original");
    reported.client_status = "running".to_string();
    state.upsert_alloc(reported);
    let plan = run(&state, &job, "reconnect", NOW + 11 * SECOND);
    assert_eq!(plan.stops().count(), 0, "{plan:?}");
    assert_eq!(plan.allocations().count(), 1, "{plan:?}");
    let reconnected = update_of(&plan, "original");
    assert_eq!(reconnected.client_status, "running");
    assert_eq!(
        last_client_status_state(reconnected),
        ("ClientStatus".to_string(), "running".to_string())
    );
    assert!(!reconnected.needs_to_reconnect());
    assert_eq!(plan.annotations.desired_tg_updates["g"].reconnect, 1);

    // Ready again: nothing more to do.
    state.apply_plan(&plan);
    set_node_status(&mut state, "node-a", drover_structs::NODE_STATUS_READY);
    let plan = run(&state, &job, "ready", NOW + 12 * SECOND);
    assert!(plan.is_no_op(), "{plan:?}");
}

#[test]
fn a_system_allocation_that_failed_while_disconnected_is_replaced_on_its_node() {
    let job = system_job(drover_structs::JOB_TYPE_SYSTEM, Some(LOST_AFTER_SECS));
    let mut state = system_cluster(&job, drover_structs::NODE_STATUS_DISCONNECTED);
    let plan = run(&state, &job, "disconnect", NOW);
    state.apply_plan(&plan);
    set_node_status(&mut state, "node-a", drover_structs::NODE_STATUS_READY);
    let mut reported = stored(&state, "original");
    reported.client_status = "failed".to_string();
    state.upsert_alloc(reported);
    let plan = run(&state, &job, "reconnect", NOW + 10 * SECOND);
    let placed: Vec<&Allocation> = plan.allocations().collect();
    assert_eq!(placed.len(), 1, "{plan:?}");
    assert_eq!(placed[0].node_id, "node-a");
    assert_eq!(placed[0].previous_allocation, "original");
    assert_eq!(plan.stops().count(), 0);
}

// `disconnect { stop_on_client_after }` / `stop_after_client_disconnect`: the client stops the
// allocation itself, so the server replaces a lost one only once that has surely happened.

const STOP_AFTER_SECS: i64 = 30;

fn stopping_job(older_name: bool) -> Job {
    let mut job = JobBuilder::service("web")
        .group("g", 1)
        .task("t", "raw_exec")
        .build();
    let group = &mut job.task_groups[0];
    if older_name {
        group.stop_after_client_disconnect = Some(DurationNs::from_secs(STOP_AFTER_SECS));
    } else {
        group.disconnect = Some(DisconnectStrategy {
            stop_on_client_after: Some(DurationNs::from_secs(STOP_AFTER_SECS)),
            replace: true,
            ..DisconnectStrategy::default()
        });
    }
    group.tasks[0].kill_timeout = DurationNs::from_secs(10);
    job
}

#[test]
fn a_lost_allocation_stopped_by_its_client_is_replaced_only_after_the_stop_delay() {
    for older_name in [false, true] {
        let job = stopping_job(older_name);
        let mut state = disconnected_cluster(&job);
        state.upsert_node(node("node-a", drover_structs::NODE_STATUS_DOWN));
        let plan = run(&state, &job, "down", NOW);

        let stops: Vec<&Allocation> = plan.stops().collect();
        assert_eq!(stops.len(), 1, "{plan:?}");
        assert_eq!(stops[0].id, "original");
        assert_eq!(stops[0].client_status, "lost");
        assert_eq!(stops[0].desired_description, STATUS_ALLOC_LOST);
        assert_eq!(
            plan.allocations().count(),
            0,
            "no replacement yet: {plan:?}"
        );
        let followup = &plan.follow_up_evals[0];
        assert_eq!(followup.triggered_by, "failed-follow-up");
        // stop_on_client_after, then the longest kill timeout.
        assert_eq!(
            followup.wait_until.unix_nanos(),
            Some(NOW + (STOP_AFTER_SECS + 10) * SECOND)
        );
        assert_eq!(stops[0].followup_eval_id, followup.id);

        // The follow-up evaluation places the replacement.
        state.apply_plan(&plan);
        let plan = run(
            &state,
            &job,
            &followup.id,
            NOW + (STOP_AFTER_SECS + 10) * SECOND,
        );
        let placed: Vec<&Allocation> = plan.allocations().collect();
        assert_eq!(placed.len(), 1, "{plan:?}");
        assert_eq!(placed[0].node_id, "node-b");
        assert_eq!(placed[0].name, "web.g[0]");
        assert!(plan.follow_up_evals.is_empty());
    }
}

#[test]
fn without_a_stop_delay_a_lost_allocation_is_replaced_at_once() {
    let mut job = stopping_job(false);
    job.task_groups[0].disconnect = None;
    let mut state = disconnected_cluster(&job);
    state.upsert_node(node("node-a", drover_structs::NODE_STATUS_DOWN));
    let plan = run(&state, &job, "down", NOW);
    assert_eq!(plan.stops().count(), 1);
    assert_eq!(plan.allocations().count(), 1, "{plan:?}");
    assert!(plan.follow_up_evals.is_empty());
}
