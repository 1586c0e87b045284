//! Throughput on a large fake cluster. Not a test of correctness and never run by default:
//! `cargo test --release -p drover-scheduler --test bench -- --ignored --nocapture`
//! prints placements per second. Timing is measured here, in the harness, never inside the
//! scheduler (which has no clock).

// Integration tests: a panic is a failed test.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::time::Instant;

use drover_scheduler::testing::{JobBuilder, NodeBuilder};
use drover_scheduler::{InMemoryState, SchedulerOptions, SeededIds, schedule};
use drover_structs::{Evaluation, Job};

fn eval_for(job: &Job, eval_id: &str) -> Evaluation {
    Evaluation {
        id: eval_id.to_string(),
        namespace: job.namespace.clone(),
        priority: 50,
        r#type: job.r#type.clone(),
        triggered_by: drover_structs::EVAL_TRIGGER_JOB_REGISTER.to_string(),
        job_id: job.id.clone(),
        status: drover_structs::EVAL_STATUS_PENDING.to_string(),
        ..Evaluation::default()
    }
}

#[allow(
    clippy::disallowed_methods,
    reason = "the benchmark harness times the pure scheduler from outside"
)]
fn timed_pass(
    state: &InMemoryState,
    job: &Job,
    eval_id: &str,
    seed: u64,
) -> (drover_scheduler::Plan, f64) {
    let started = Instant::now();
    let options = SchedulerOptions {
        seed,
        now_unix_nanos: 1_700_000_000_000_000_000,
        ..SchedulerOptions::default()
    };
    let plan = schedule(
        state,
        &eval_for(job, eval_id),
        &options,
        &mut SeededIds::new(seed),
    )
    .expect("schedules");
    (plan, started.elapsed().as_secs_f64())
}

fn cluster(nodes: usize) -> InMemoryState {
    let mut state = InMemoryState::new();
    for index in 0..nodes {
        let datacenter = if index % 2 == 0 { "dc1" } else { "dc2" };
        state.upsert_node(
            NodeBuilder::new(&format!("node-{index:05}"))
                .datacenter(datacenter)
                .meta("rack", &format!("r{}", index % 40))
                .build(),
        );
    }
    state
}

#[test]
#[ignore = "benchmark: run with --release -- --ignored --nocapture"]
fn bench_placements_on_ten_thousand_nodes() {
    let nodes = 10_000;
    let mut state = cluster(nodes);
    for (job_type, count) in [("service", 5_000_i64), ("batch", 5_000)] {
        let builder = if job_type == "service" {
            JobBuilder::service(&format!("{job_type}-job"))
        } else {
            JobBuilder::batch(&format!("{job_type}-job"))
        };
        let job = builder
            .datacenters(&["dc1", "dc2"])
            .constraint("${attr.kernel.name}", "=", "linux")
            .group("g", count)
            .task("t", "raw_exec")
            .resources(100, 128)
            .build();
        state.upsert_job(job.clone());
        let (plan, seconds) = timed_pass(
            &state,
            &job,
            &format!("{job_type}-1"),
            count as u64 + job_type.len() as u64,
        );
        let placed = plan.allocations().count();
        assert_eq!(placed as i64, count);
        println!(
            "{job_type}: {placed} placements on {nodes} nodes in {seconds:.3} s = {:.0} placements/s",
            placed as f64 / seconds
        );
        state.apply_plan(&plan);

        let (noop, seconds) = timed_pass(
            &state,
            &job,
            &format!("{job_type}-2"),
            2 + job_type.len() as u64,
        );
        assert!(
            noop.is_no_op(),
            "{:?} stops {} allocs {}",
            noop.annotations,
            noop.stops().count(),
            noop.allocations().count()
        );
        println!("{job_type}: re-evaluating {count} unchanged allocations took {seconds:.3} s");
    }
}

#[test]
#[ignore = "benchmark: run with --release -- --ignored --nocapture"]
fn bench_small_job_latency_on_ten_thousand_nodes() {
    let state_nodes = 10_000;
    let mut state = cluster(state_nodes);
    for round in 0..5u64 {
        let job = JobBuilder::service(&format!("small-{round}"))
            .datacenters(&["dc1", "dc2"])
            .group("g", 10)
            .task("t", "raw_exec")
            .build();
        state.upsert_job(job.clone());
        let (plan, seconds) = timed_pass(&state, &job, &format!("small-{round}"), 100 + round);
        assert_eq!(plan.allocations().count(), 10);
        println!(
            "service job of 10 on {state_nodes} nodes: one evaluation in {:.1} ms",
            seconds * 1000.0
        );
        state.apply_plan(&plan);
    }
}
