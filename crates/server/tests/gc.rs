//! Garbage collection by age on paused time: the leader's periodic passes collect a terminal
//! object only once it has been unchanged longer than its threshold (Nomad's defaults: jobs
//! 4h, evaluations 1h, batch evaluations 24h, deployments 1h, down nodes 24h), an evaluation
//! with a live allocation stays until the allocation is terminal and old, expired ACL tokens
//! go (with ACLs on) once created longer ago than `acl_token_gc_threshold`, and a follower
//! collects nothing.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use drover_scheduler::testing::{JobBuilder, NodeBuilder};
use drover_server::gc::{GcConfig, Pass, plan_pass};
use drover_server::{Clock, Server, ServerConfig};
use drover_state::StateStore;
use drover_structs::acl::AclToken;
use drover_structs::{
    ALLOC_CLIENT_STATUS_COMPLETE, ALLOC_CLIENT_STATUS_RUNNING, Allocation,
    DEPLOYMENT_STATUS_SUCCESSFUL, Deployment, EVAL_STATUS_COMPLETE, Evaluation, Job,
    NODE_STATUS_DOWN, Timestamp,
};

const HOUR: u64 = 3600;
const MINUTE: i64 = 60;
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
    state
        .upsert_acl_token(acl_token(
            "expired",
            T0 - 3 * HOUR as i64,
            Some(T0 - 2 * HOUR as i64),
        ))
        .await
        .expect("token");
    let server = Server::start_follower(with_acls(), state.clone(), clock());
    advance((30, 0)).await;
    assert!(state.job("default", "report").is_some());
    assert!(state.acl().tokens.contains_key("expired"));
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

fn one_time_token(
    accessor: &str,
    secret: &str,
    expires_unix: i64,
) -> drover_structs::acl::OneTimeToken {
    drover_structs::acl::OneTimeToken {
        one_time_secret_id: secret.into(),
        accessor_id: accessor.into(),
        expires_at: drover_structs::Timestamp::from_unix_nanos(expires_unix * NS),
        ..Default::default()
    }
}

#[tokio::test(start_paused = true)]
async fn expired_one_time_tokens_go_every_ten_minutes_and_in_a_forced_gc() {
    let state = StateStore::in_memory().await.expect("store");
    // One expires 5 minutes in, one 25 minutes in.
    state
        .upsert_one_time_token(one_time_token("a1", "s1", T0 + 5 * 60))
        .await
        .unwrap();
    state
        .upsert_one_time_token(one_time_token("a2", "s2", T0 + 25 * 60))
        .await
        .unwrap();
    let server = start(state.clone(), clock());
    let stored = |secret: &str| state.acl().one_time_token_by_secret(secret).is_some();

    // The first pass, 10 minutes in, takes the one that expired.
    advance((0, 9)).await;
    assert!(stored("s1") && stored("s2"));
    advance((0, 2)).await;
    assert!(!stored("s1"));
    assert!(stored("s2"));
    // Forced, at 20 minutes: the other is not expired yet; at 26 minutes it is.
    advance((0, 9)).await;
    assert!(
        server
            .garbage_collect()
            .await
            .unwrap()
            .one_time_tokens
            .is_empty()
    );
    assert!(stored("s2"));
    tokio::time::sleep(Duration::from_secs(6 * 60)).await;
    let forced = server.garbage_collect().await.unwrap();
    assert_eq!(forced.one_time_tokens, vec!["s2".to_owned()]);
    assert!(!stored("s2"));

    // A new token for the same accessor replaces the old, and its secret is what a plan made
    // before names; the newer one is kept.
    state
        .upsert_one_time_token(one_time_token("a1", "s3", T0))
        .await
        .unwrap();
    let plan = plan_pass(
        &state.snapshot(),
        Pass::OneTimeTokens,
        &GcConfig::default(),
        (T0 + 3600) * NS,
    );
    assert_eq!(plan.one_time_tokens, vec!["s3".to_owned()]);
    state
        .upsert_one_time_token(one_time_token("a1", "s4", T0 + 7200))
        .await
        .unwrap();
    assert_eq!(
        state
            .delete_one_time_tokens_by_secret(plan.one_time_tokens)
            .await
            .unwrap(),
        0
    );
    assert!(stored("s4"));
    server.shutdown().await;
}

/// A client token created at `created_unix` that expires at `expires_unix` (never without).
fn acl_token(accessor: &str, created_unix: i64, expires_unix: Option<i64>) -> AclToken {
    AclToken {
        accessor_id: accessor.into(),
        secret_id: format!("{accessor}-secret"),
        name: accessor.into(),
        token_type: "client".into(),
        policies: Some(vec!["readonly".into()]),
        create_time: Timestamp::from_unix_nanos(created_unix * NS),
        expiration_time: expires_unix.map(|at| Timestamp::from_unix_nanos(at * NS)),
        ..AclToken::default()
    }
}

/// A server with ACLs on and Nomad's defaults otherwise.
fn with_acls() -> ServerConfig {
    ServerConfig {
        gc: GcConfig {
            acl_enabled: true,
            ..GcConfig::default()
        },
        ..ServerConfig::default()
    }
}

async fn store_tokens(state: &StateStore, tokens: Vec<AclToken>) {
    for token in tokens {
        state.upsert_acl_token(token).await.expect("token");
    }
}

#[tokio::test(start_paused = true)]
async fn expired_acl_tokens_go_every_five_minutes_once_created_over_an_hour_ago() {
    let state = StateStore::in_memory().await.expect("store");
    store_tokens(
        &state,
        vec![
            // Expires 10 minutes in; created at T0.
            acl_token("short", T0, Some(T0 + 10 * MINUTE)),
            // Created 3 hours before T0; expires 7 minutes in.
            acl_token("old", T0 - 3 * HOUR as i64, Some(T0 + 7 * MINUTE)),
            // Expires 2 hours in.
            acl_token("later", T0, Some(T0 + 2 * HOUR as i64)),
            // Never expires.
            acl_token("forever", T0 - 3 * HOUR as i64, None),
        ],
    )
    .await;
    let server = Server::start(with_acls(), state.clone(), clock());
    let stored = |accessor: &str| state.acl().tokens.contains_key(accessor);

    advance((0, 6)).await;
    assert!(stored("old"), "the 5m pass: not expired yet");
    advance((0, 5)).await;
    assert!(!stored("old"), "the 10m pass: expired, created 3h10m ago");
    assert!(
        stored("short"),
        "the 10m pass: expired, but created 10m ago"
    );
    advance((0, 45)).await;
    assert!(stored("short"), "the 55m pass: created 55m ago");
    advance((0, 10)).await;
    assert!(!stored("short"), "the 60m pass: created an hour ago");
    assert!(stored("later"), "not expired");
    advance((1, 0)).await;
    assert!(
        !stored("later"),
        "the 2h05m pass: expired, created 2h05m ago"
    );
    assert!(stored("forever"));
    advance((30, 0)).await;
    assert!(
        stored("forever"),
        "a token without expiry is never collected"
    );
    server.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_forced_gc_takes_every_expired_acl_token_whatever_its_age() {
    let state = StateStore::in_memory().await.expect("store");
    store_tokens(
        &state,
        vec![
            acl_token("fresh", T0, Some(T0 + MINUTE)),
            acl_token("later", T0, Some(T0 + HOUR as i64)),
            acl_token("forever", T0, None),
        ],
    )
    .await;
    let server = Server::start(with_acls(), state.clone(), clock());
    let stored = |accessor: &str| state.acl().tokens.contains_key(accessor);

    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(
        server
            .garbage_collect()
            .await
            .unwrap()
            .acl_tokens
            .is_empty()
    );
    assert!(stored("fresh"), "not expired yet");
    tokio::time::sleep(Duration::from_secs(60)).await;
    let forced = server.garbage_collect().await.unwrap();
    assert_eq!(forced.acl_tokens, vec!["fresh".to_owned()]);
    assert!(
        !stored("fresh"),
        "expired 30s ago, created 90s ago: forced, it goes"
    );
    assert!(stored("later") && stored("forever"));
    server.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn with_acls_off_expired_acl_tokens_are_kept() {
    let state = StateStore::in_memory().await.expect("store");
    store_tokens(
        &state,
        vec![acl_token(
            "expired",
            T0 - 3 * HOUR as i64,
            Some(T0 - 2 * HOUR as i64),
        )],
    )
    .await;
    let server = start(state.clone(), clock());
    advance((0, 11)).await;
    assert!(
        server
            .garbage_collect()
            .await
            .unwrap()
            .acl_tokens
            .is_empty()
    );
    assert!(state.acl().tokens.contains_key("expired"));
    server.shutdown().await;
}

#[tokio::test]
async fn the_acl_token_pass_follows_the_configured_threshold() {
    let state = StateStore::in_memory().await.expect("store");
    store_tokens(&state, vec![acl_token("t", T0, Some(T0 + MINUTE))]).await;
    let config = GcConfig {
        acl_enabled: true,
        acl_token_gc_threshold: Duration::from_secs(10 * 60),
        ..GcConfig::default()
    };
    let at = |minutes: i64| (T0 + minutes * MINUTE) * NS;
    let snapshot = state.snapshot();
    assert!(
        plan_pass(&snapshot, Pass::ExpiredAclTokens, &config, at(5))
            .acl_tokens
            .is_empty(),
        "expired, created 5m ago"
    );
    assert_eq!(
        plan_pass(&snapshot, Pass::ExpiredAclTokens, &config, at(11)).acl_tokens,
        vec!["t".to_owned()]
    );
    // The other passes leave tokens alone.
    assert!(
        plan_pass(&snapshot, Pass::OneTimeTokens, &config, at(11))
            .acl_tokens
            .is_empty()
    );
}

#[tokio::test(start_paused = true)]
async fn the_acl_token_pass_runs_only_while_leading() {
    // A server on etcd follows until elected and stops its leader work when it loses the
    // election: the expired tokens go only during its terms.
    let state = StateStore::in_memory().await.expect("store");
    store_tokens(
        &state,
        vec![
            acl_token("a", T0 - 3 * HOUR as i64, Some(T0 - 2 * HOUR as i64)),
            acl_token("b", T0 - 3 * HOUR as i64, Some(T0 + 20 * MINUTE)),
        ],
    )
    .await;
    let server = Server::start_follower(with_acls(), state.clone(), clock());
    let stored = |accessor: &str| state.acl().tokens.contains_key(accessor);
    advance((0, 11)).await;
    assert!(stored("a"), "following: kept");

    server.establish_leadership(drover_server::Takeover::Failover);
    advance((0, 6)).await;
    assert!(!stored("a"), "the first pass of the term took it");

    server.revoke_leadership();
    advance((0, 30)).await;
    assert!(stored("b"), "expired at 20m, but no longer leading");
    server.shutdown().await;
}
