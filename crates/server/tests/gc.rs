//! Garbage collection by age on paused time: the leader's periodic passes collect a terminal
//! object only once it has been unchanged longer than its threshold (Nomad's defaults: jobs
//! 4h, evaluations 1h, batch evaluations 24h, deployments 1h, down nodes 24h), an evaluation
//! with a live allocation stays until the allocation is terminal and old, and a follower
//! collects nothing.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use drover_scheduler::testing::{JobBuilder, NodeBuilder};
use drover_server::gc::{GcConfig, Pass, plan_pass};
use drover_server::{Clock, Server, ServerConfig};
use drover_state::StateStore;
use drover_structs::{
    ALLOC_CLIENT_STATUS_COMPLETE, ALLOC_CLIENT_STATUS_RUNNING, Allocation,
    DEPLOYMENT_STATUS_SUCCESSFUL, Deployment, EVAL_STATUS_COMPLETE, Evaluation, Job,
    NODE_STATUS_DOWN,
};

const HOUR: u64 = 3600;
/// The wall-clock time the tests start at (Unix seconds).
const T0: i64 = 1_700_000_000;
const NS: i64 = 1_000_000_000;

/// A wall clock that starts at `T0` and moves with (paused) tokio time.
struct FollowingClock {
    base: tokio::time::Instant,
}

impl Clock for FollowingClock {
    fn now_unix_ns(&self) -> i64 {
        let elapsed = tokio::time::Instant::now().saturating_duration_since(self.base);
        T0 * NS + i64::try_from(elapsed.as_nanos()).unwrap()
    }
}

fn clock() -> Arc<FollowingClock> {
    Arc::new(FollowingClock {
        base: tokio::time::Instant::now(),
    })
}

fn start(state: StateStore, clock: Arc<FollowingClock>) -> Server {
    Server::start(ServerConfig::default(), state, clock)
}

async fn advance(hours_and_minutes: (u64, u64)) {
    let (hours, minutes) = hours_and_minutes;
    tokio::time::sleep(Duration::from_secs(hours * HOUR + minutes * 60)).await;
}

fn eval(id: &str, job: &Job) -> Evaluation {
    Evaluation {
        id: id.into(),
        namespace: job.namespace.clone(),
        job_id: job.id.clone(),
        r#type: job.r#type.clone(),
        status: EVAL_STATUS_COMPLETE.into(),
        priority: 50,
        triggered_by: "job-register".into(),
        ..Evaluation::default()
    }
}

fn alloc(id: &str, job: &Job, eval_id: &str, client_status: &str) -> Allocation {
    Allocation {
        id: id.into(),
        namespace: job.namespace.clone(),
        job_id: job.id.clone(),
        eval_id: eval_id.into(),
        node_id: "n1".into(),
        task_group: job.task_groups[0].name.clone(),
        name: format!("{}.{}[0]", job.id, job.task_groups[0].name),
        desired_status: "run".into(),
        client_status: client_status.into(),
        ..Allocation::default()
    }
}

/// A batch job that ran one allocation to completion at `T0`.
async fn finished_batch_job(state: &StateStore, id: &str) -> Job {
    let job = Job::clone(
        &state
            .upsert_job(
                JobBuilder::batch(id)
                    .group("g", 1)
                    .task("t", "raw_exec")
                    .build(),
                T0 * NS,
            )
            .await
            .expect("job")
            .job,
    );
    let eval_id = format!("{id}-eval");
    state
        .upsert_allocs_and_evals(
            vec![alloc(
                &format!("{id}-alloc"),
                &job,
                &eval_id,
                ALLOC_CLIENT_STATUS_COMPLETE,
            )],
            vec![eval(&eval_id, &job)],
            T0 * NS,
        )
        .await
        .expect("eval and alloc");
    assert_eq!(state.job("default", id).expect("job").status, "dead");
    job
}

#[tokio::test(start_paused = true)]
async fn a_job_done_three_hours_ago_stays_and_one_done_five_hours_ago_goes() {
    let state = StateStore::in_memory().await.expect("store");
    finished_batch_job(&state, "report").await;
    let clock = clock();
    let server = start(state.clone(), clock);

    advance((3, 0)).await;
    assert!(state.job("default", "report").is_some(), "3h: kept");
    assert!(state.alloc("report-alloc").is_some());
    // A live batch job's evaluation is never the evaluation pass's, even past 24h: it goes with
    // its job.
    advance((2, 0)).await;
    assert!(state.job("default", "report").is_none(), "5h: collected");
    assert!(state.eval("report-eval").is_none());
    assert!(state.alloc("report-alloc").is_none());
    server.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn an_evaluation_stays_while_its_allocation_runs_and_goes_an_hour_after_it_ends() {
    let state = StateStore::in_memory().await.expect("store");
    let job = Job::clone(
        &state
            .upsert_job(
                JobBuilder::service("web")
                    .group("g", 1)
                    .task("t", "raw_exec")
                    .build(),
                T0 * NS,
            )
            .await
            .expect("job")
            .job,
    );
    state
        .upsert_allocs_and_evals(
            vec![alloc("a1", &job, "e1", ALLOC_CLIENT_STATUS_RUNNING)],
            vec![eval("e1", &job)],
            T0 * NS,
        )
        .await
        .expect("eval and alloc");
    let clock = clock();
    let server = start(state.clone(), Arc::clone(&clock));

    advance((2, 0)).await;
    assert!(state.eval("e1").is_some(), "its allocation runs");
    let mut done = Allocation::clone(&state.alloc("a1").expect("alloc"));
    done.client_status = ALLOC_CLIENT_STATUS_COMPLETE.into();
    state
        .update_allocs_from_client(vec![done], clock.now_unix_ns())
        .await
        .expect("client update");

    advance((0, 50)).await;
    assert!(state.eval("e1").is_some(), "the allocation ended 50m ago");
    assert!(state.alloc("a1").is_some());
    advance((0, 20)).await;
    assert!(state.eval("e1").is_none(), "the allocation ended 70m ago");
    assert!(state.alloc("a1").is_none());
    // A service job that was not stopped is never collected.
    assert!(state.job("default", "web").is_some());
    server.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn deployments_go_an_hour_after_they_end_and_down_nodes_a_day_after() {
    let state = StateStore::in_memory().await.expect("store");
    let job = Job::clone(
        &state
            .upsert_job(
                JobBuilder::service("web")
                    .group("g", 1)
                    .task("t", "raw_exec")
                    .build(),
                T0 * NS,
            )
            .await
            .expect("job")
            .job,
    );
    let mut deployment = Deployment::new_for_job("d1".into(), &job, 50);
    deployment.status = DEPLOYMENT_STATUS_SUCCESSFUL.into();
    state
        .upsert_deployment(deployment, T0 * NS)
        .await
        .expect("deployment");
    state
        .upsert_node(NodeBuilder::new("n9").build(), T0 * NS)
        .await
        .expect("node");
    state
        .update_node_status("n9", NODE_STATUS_DOWN, T0 * NS)
        .await
        .expect("down");
    let server = start(state.clone(), clock());

    advance((0, 55)).await;
    assert!(state.deployment("d1").is_some(), "ended 55m ago");
    advance((0, 10)).await;
    assert!(state.deployment("d1").is_none(), "ended 65m ago");
    advance((22, 0)).await;
    assert!(state.node("n9").is_some(), "down for 23h05m");
    advance((1, 0)).await;
    assert!(state.node("n9").is_none(), "down for 24h05m");
    server.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_follower_collects_nothing() {
    let state = StateStore::in_memory().await.expect("store");
    finished_batch_job(&state, "report").await;
    let server = Server::start_follower(ServerConfig::default(), state.clone(), clock());
    advance((30, 0)).await;
    assert!(state.job("default", "report").is_some());
    server.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn the_job_pass_follows_the_configured_interval_and_threshold() {
    let state = StateStore::in_memory().await.expect("store");
    finished_batch_job(&state, "report").await;
    let config = ServerConfig {
        gc: GcConfig {
            job_gc_interval: Duration::from_secs(10),
            job_gc_threshold: Duration::from_secs(60),
            ..GcConfig::default()
        },
        ..ServerConfig::default()
    };
    let server = Server::start(config, state.clone(), clock());
    tokio::time::sleep(Duration::from_secs(55)).await;
    assert!(state.job("default", "report").is_some());
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert!(state.job("default", "report").is_none());
    server.shutdown().await;
}

#[tokio::test]
async fn a_batch_evaluation_waits_for_the_batch_threshold() {
    let state = StateStore::in_memory().await.expect("store");
    let job = finished_batch_job(&state, "report").await;
    // Stopped: its evaluations are the evaluation pass's, at the batch threshold.
    let mut stopped = job.clone();
    stopped.stop = true;
    state.upsert_job(stopped, T0 * NS).await.expect("stop");
    let config = GcConfig::default();
    let at = |hours: i64| (T0 + hours * 3600) * NS;
    let snapshot = state.snapshot();
    let early = plan_pass(&snapshot, Pass::Evals, &config, at(2));
    assert!(early.evals.is_empty(), "{early:?}");
    let late = plan_pass(&snapshot, Pass::Evals, &config, at(25));
    assert_eq!(late.evals, vec!["report-eval".to_owned()]);
    assert_eq!(late.allocs, vec!["report-alloc".to_owned()]);
    // A service job's evaluation needs only the hour.
    let web = Job::clone(
        &state
            .upsert_job(
                JobBuilder::service("web")
                    .group("g", 1)
                    .task("t", "raw_exec")
                    .build(),
                T0 * NS,
            )
            .await
            .expect("job")
            .job,
    );
    state
        .upsert_evals(vec![eval("web-eval", &web)], T0 * NS)
        .await
        .expect("eval");
    let snapshot = state.snapshot();
    let plan = plan_pass(&snapshot, Pass::Evals, &config, at(2));
    assert_eq!(plan.evals, vec!["web-eval".to_owned()]);
    assert!(
        plan_pass(&snapshot, Pass::Jobs, &config, at(2))
            .jobs
            .is_empty(),
        "a stopped job submitted 2h ago is younger than job_gc_threshold"
    );
    assert_eq!(
        plan_pass(&snapshot, Pass::Jobs, &config, at(5)).jobs,
        vec![("default".to_owned(), "report".to_owned())]
    );
}

#[tokio::test(start_paused = true)]
async fn a_stopped_job_ages_from_its_stop_not_from_its_first_registration() {
    // Nomad's job deregister writes the stop with a new SubmitTime, and job GC ages a job from
    // its SubmitTime: a job registered long ago but stopped an hour ago stays 3 more hours.
    let state = StateStore::in_memory().await.expect("store");
    let registered_at = (T0 - 10 * HOUR as i64) * NS;
    let job = Job::clone(
        &state
            .upsert_job(
                JobBuilder::service("web")
                    .group("g", 1)
                    .task("t", "raw_exec")
                    .build(),
                registered_at,
            )
            .await
            .expect("job")
            .job,
    );
    state
        .upsert_allocs_and_evals(
            vec![alloc(
                "web-alloc",
                &job,
                "web-eval",
                ALLOC_CLIENT_STATUS_COMPLETE,
            )],
            vec![eval("web-eval", &job)],
            registered_at,
        )
        .await
        .expect("eval and alloc");
    let mut stopped = job.clone();
    stopped.stop = true;
    let stopped_at = (T0 - HOUR as i64) * NS;
    state.upsert_job(stopped, stopped_at).await.expect("stop");
    let stored = state.job("default", "web").expect("job");
    assert_eq!(stored.submit_time, stopped_at);
    assert_eq!(stored.status, "dead");

    let server = start(state.clone(), clock());
    advance((2, 50)).await;
    assert!(
        state.job("default", "web").is_some(),
        "3h50m after the stop: kept"
    );
    advance((0, 20)).await;
    assert!(
        state.job("default", "web").is_none(),
        "4h10m after the stop: collected"
    );
    server.shutdown().await;
}
