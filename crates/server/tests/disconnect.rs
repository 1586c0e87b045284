//! Disconnected clients on paused time, through the real server (heartbeat timers, workers,
//! the plan applier, the state store): a system job's allocation waits on its disconnected
//! node and is lost once `lost_after` passes; a node back from a disconnection is
//! `initializing` until it has reported its allocations; a reconnect cancels the `lost_after`
//! follow-up evaluation ("allocs reconnected").

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use drover_scheduler::testing::{JobBuilder, NodeBuilder};
use drover_server::{Clock, Server, ServerConfig};
use drover_state::StateStore;
use drover_structs::{
    ALLOC_CLIENT_STATUS_LOST, ALLOC_CLIENT_STATUS_RUNNING, ALLOC_CLIENT_STATUS_UNKNOWN,
    ALLOC_DESIRED_STATUS_RUN, ALLOC_DESIRED_STATUS_STOP, Allocation, DisconnectStrategy,
    DurationNs, EVAL_STATUS_CANCELLED, EVAL_STATUS_PENDING, Job, JobRegisterRequest,
    NODE_STATUS_DISCONNECTED, NODE_STATUS_DOWN, NODE_STATUS_INITIALIZING, NODE_STATUS_READY,
};

const NS: i64 = 1_000_000_000;

/// A wall clock that starts at a fixed instant and moves with (paused) tokio time.
struct FollowingClock {
    base: tokio::time::Instant,
}

impl Clock for FollowingClock {
    fn now_unix_ns(&self) -> i64 {
        let elapsed = tokio::time::Instant::now().saturating_duration_since(self.base);
        1_700_000_000 * NS + i64::try_from(elapsed.as_nanos()).unwrap()
    }
}

async fn start() -> Server {
    let state = StateStore::in_memory().await.expect("store");
    let clock = Arc::new(FollowingClock {
        base: tokio::time::Instant::now(),
    });
    Server::start(ServerConfig::default(), state, clock)
}

fn job_waiting(job: Job, lost_after_secs: u64) -> Job {
    let mut job = job;
    job.task_groups[0].disconnect = Some(DisconnectStrategy {
        lost_after: DurationNs::from_secs(lost_after_secs as i64),
        replace: true,
        ..DisconnectStrategy::default()
    });
    job
}

fn system_job(lost_after_secs: u64) -> Job {
    let mut job = JobBuilder::service("node-agent")
        .group("agent", 1)
        .task("agent", "raw_exec")
        .resources(50, 32)
        .build();
    job.r#type = drover_structs::JOB_TYPE_SYSTEM.to_owned();
    job_waiting(job, lost_after_secs)
}

async fn register(server: &Server, job: Job) {
    let registered = server
        .register_job(JobRegisterRequest {
            job: Some(job),
            ..JobRegisterRequest::default()
        })
        .await
        .expect("registered");
    eventually(server, &[], "the registration to be evaluated", || {
        server
            .state()
            .eval(&registered.eval_id)
            .filter(|eval| eval.status != EVAL_STATUS_PENDING)
    })
    .await;
}

/// Lets `seconds` of tokio time pass, the `beating` nodes heartbeating every 4 s (the TTL is
/// 10 s).
async fn pass_time(server: &Server, beating: &[&str], seconds: u64) {
    for second in 0..seconds {
        if second % 4 == 0 {
            for node_id in beating {
                server.heartbeat_node(node_id).await.expect("heartbeat");
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Waits (on tokio time, the `beating` nodes heartbeating) until `probe` holds.
async fn eventually<T>(
    server: &Server,
    beating: &[&str],
    what: &str,
    mut probe: impl FnMut() -> Option<T>,
) -> T {
    for _ in 0..600 {
        if let Some(value) = probe() {
            return value;
        }
        pass_time(server, beating, 1).await;
    }
    panic!("timed out waiting for {what}");
}

fn allocs(server: &Server, job_id: &str) -> Vec<Allocation> {
    server
        .state()
        .allocs_by_job("default", job_id)
        .iter()
        .map(|alloc| Allocation::clone(alloc))
        .collect()
}

fn alloc_on(server: &Server, job_id: &str, node_id: &str) -> Allocation {
    allocs(server, job_id)
        .into_iter()
        .find(|alloc| alloc.node_id == node_id)
        .unwrap_or_else(|| panic!("an allocation of {job_id} on {node_id}"))
}

async fn report(server: &Server, alloc: &Allocation, client_status: &str) {
    let mut update = alloc.clone();
    update.client_status = client_status.to_owned();
    server
        .update_allocs_from_client(vec![update])
        .await
        .expect("the client's report");
}

fn node_status(server: &Server, node_id: &str) -> String {
    server.state().node(node_id).expect("node").status.clone()
}

/// Both nodes run the system job, then `away` stops heartbeating until it is disconnected.
async fn system_job_with_a_disconnected_node(lost_after_secs: u64) -> (Server, Allocation) {
    let server = start().await;
    for node_id in ["home", "away"] {
        server
            .register_node(NodeBuilder::new(node_id).build())
            .await
            .expect("node");
    }
    register(&server, system_job(lost_after_secs)).await;
    for node_id in ["home", "away"] {
        report(
            &server,
            &alloc_on(&server, "node-agent", node_id),
            ALLOC_CLIENT_STATUS_RUNNING,
        )
        .await;
    }
    let unknown = eventually(
        &server,
        &["home"],
        "the away node's allocation to be unknown",
        || {
            let alloc = alloc_on(&server, "node-agent", "away");
            (alloc.client_status == ALLOC_CLIENT_STATUS_UNKNOWN).then_some(alloc)
        },
    )
    .await;
    assert_eq!(node_status(&server, "away"), NODE_STATUS_DISCONNECTED);
    (server, unknown)
}

#[tokio::test(start_paused = true)]
async fn a_system_allocation_waits_on_its_disconnected_node_and_reconnects_through_initializing() {
    let (server, unknown) = system_job_with_a_disconnected_node(120).await;
    assert_eq!(unknown.desired_status, ALLOC_DESIRED_STATUS_RUN);
    assert_eq!(
        unknown.client_description,
        "alloc is unknown since its node is disconnected"
    );
    let away = server.state().node("away").expect("node");
    assert!(away.last_missed_heartbeat_index > 0);
    // Within lost_after nothing is replaced and the node is never marked down.
    pass_time(&server, &["home"], 60).await;
    assert_eq!(node_status(&server, "away"), NODE_STATUS_DISCONNECTED);
    assert_eq!(allocs(&server, "node-agent").len(), 2);

    // The client is back: initializing until it has reported its allocations.
    server.heartbeat_node("away").await.expect("heartbeat");
    assert_eq!(node_status(&server, "away"), NODE_STATUS_INITIALIZING);
    pass_time(&server, &["home", "away"], 8).await;
    assert_eq!(
        node_status(&server, "away"),
        NODE_STATUS_INITIALIZING,
        "no report yet"
    );
    report(&server, &unknown, ALLOC_CLIENT_STATUS_RUNNING).await;
    let reconnected = eventually(
        &server,
        &["home", "away"],
        "the reconnect evaluation",
        || {
            let alloc = alloc_on(&server, "node-agent", "away");
            (!alloc.needs_to_reconnect()).then_some(alloc)
        },
    )
    .await;
    assert_eq!(reconnected.id, unknown.id);
    assert_eq!(reconnected.client_status, ALLOC_CLIENT_STATUS_RUNNING);
    assert_eq!(reconnected.desired_status, ALLOC_DESIRED_STATUS_RUN);
    let evals = server.state().evals_by_job("default", "node-agent");
    assert!(
        evals.iter().any(|eval| eval.triggered_by == "reconnect"),
        "{evals:?}"
    );
    eventually(&server, &["home", "away"], "the node to be ready", || {
        (node_status(&server, "away") == NODE_STATUS_READY).then_some(())
    })
    .await;
    assert_eq!(
        server
            .state()
            .node("away")
            .expect("node")
            .last_missed_heartbeat_index,
        0
    );
    pass_time(&server, &["home", "away"], 10).await;
    let live: Vec<Allocation> = allocs(&server, "node-agent")
        .into_iter()
        .filter(|alloc| !alloc.terminal_status())
        .collect();
    assert_eq!(live.len(), 2, "the same two allocations: {live:?}");
    server.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn an_unknown_system_allocation_is_lost_once_lost_after_passes() {
    let (server, unknown) = system_job_with_a_disconnected_node(60).await;
    eventually(&server, &["home"], "the away node to go down", || {
        (node_status(&server, "away") == NODE_STATUS_DOWN).then_some(())
    })
    .await;
    let lost = eventually(&server, &["home"], "the allocation to be lost", || {
        let alloc = alloc_on(&server, "node-agent", "away");
        (alloc.client_status == ALLOC_CLIENT_STATUS_LOST).then_some(alloc)
    })
    .await;
    assert_eq!(lost.id, unknown.id);
    assert_eq!(lost.desired_status, ALLOC_DESIRED_STATUS_STOP);
    let unknown_at = unknown.last_unknown_unix_nanos().expect("unknown since");
    assert!(
        lost.modify_time >= unknown_at + 60 * NS,
        "lost only after lost_after"
    );
    assert_eq!(
        allocs(&server, "node-agent").len(),
        2,
        "nothing replaces it elsewhere"
    );
    server.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_reconnect_cancels_the_lost_after_follow_up_evaluation() {
    let server = start().await;
    server
        .register_node(NodeBuilder::new("away").build())
        .await
        .expect("node");
    let job = job_waiting(
        JobBuilder::service("web")
            .group("app", 1)
            .task("server", "raw_exec")
            .resources(50, 32)
            .build(),
        60,
    );
    register(&server, job).await;
    let original = alloc_on(&server, "web", "away");
    report(&server, &original, ALLOC_CLIENT_STATUS_RUNNING).await;
    server
        .register_node(NodeBuilder::new("home").build())
        .await
        .expect("node");

    let unknown = eventually(&server, &["home"], "the original to be unknown", || {
        let alloc = alloc_on(&server, "web", "away");
        (alloc.client_status == ALLOC_CLIENT_STATUS_UNKNOWN).then_some(alloc)
    })
    .await;
    let followup_id = unknown.followup_eval_id.clone();
    let followup = server.state().eval(&followup_id).expect("the follow-up");
    assert_eq!(followup.triggered_by, "max-disconnect-timeout");
    assert_eq!(followup.status, EVAL_STATUS_PENDING);

    server.heartbeat_node("away").await.expect("heartbeat");
    report(&server, &unknown, ALLOC_CLIENT_STATUS_RUNNING).await;
    let cancelled = server.state().eval(&followup_id).expect("the follow-up");
    assert_eq!(cancelled.status, EVAL_STATUS_CANCELLED);
    assert_eq!(cancelled.status_description, "allocs reconnected");
    assert_eq!(
        server
            .state()
            .alloc(&unknown.id)
            .expect("alloc")
            .followup_eval_id,
        ""
    );

    // Past lost_after, the cancelled evaluation marks nothing lost.
    pass_time(&server, &["home", "away"], 90).await;
    let cancelled = server.state().eval(&followup_id).expect("the follow-up");
    assert_eq!(cancelled.status, EVAL_STATUS_CANCELLED);
    let original = server.state().alloc(&unknown.id).expect("alloc");
    assert_ne!(original.client_status, ALLOC_CLIENT_STATUS_LOST);
    server.shutdown().await;
}
