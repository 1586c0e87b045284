//! Tests of the whole HTTP layer through `oneshot` on the in-memory backend: routing, methods,
//! query parsing, blocking queries on paused time, error bodies, jobs, logs and files.

#![allow(clippy::expect_used, clippy::unwrap_used)] // a failed expectation is a failed test

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, Response, StatusCode};
use drover_structs::{Allocation, Job, StreamFrame, Task, TaskGroup};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::logs::FollowTiming;
use crate::memory::{ClientCall, MemoryBackend};
use crate::{ApiOptions, StateReads, app, app_with_options};

fn sample_job(id: &str) -> Job {
    Job {
        id: id.to_string(),
        datacenters: vec!["dc1".to_string()],
        task_groups: vec![TaskGroup {
            name: "web".to_string(),
            count: 1,
            tasks: vec![Task {
                name: "server".to_string(),
                driver: "raw_exec".to_string(),
                config: serde_json::from_value(json!({"command": "/bin/sleep", "args": ["60"]}))
                    .unwrap(),
                ..Task::default()
            }],
            ..TaskGroup::default()
        }],
        ..Job::default()
    }
}

fn sample_allocation(backend: &MemoryBackend, id: &str, job: &Job) -> Allocation {
    let allocation = Allocation {
        id: id.to_string(),
        namespace: job.namespace.clone(),
        eval_id: "eval-1".to_string(),
        name: format!("{}.web[0]", job.id),
        node_id: "node-1".to_string(),
        job_id: job.id.clone(),
        job: Some(std::sync::Arc::new(job.clone())),
        task_group: "web".to_string(),
        desired_status: "run".to_string(),
        client_status: "running".to_string(),
        ..Allocation::default()
    };
    backend.put_allocation(allocation.clone());
    allocation
}

async fn send(
    router: &axum::Router,
    method: &str,
    uri: &str,
    body: Option<Value>,
) -> Response<Body> {
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .body(match body {
            Some(value) => Body::from(value.to_string()),
            None => Body::empty(),
        })
        .unwrap();
    router.clone().oneshot(request).await.unwrap()
}

async fn body_text(response: Response<Body>) -> String {
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(bytes.to_vec()).unwrap()
}

async fn body_json(response: Response<Body>) -> Value {
    serde_json::from_str(&body_text(response).await).unwrap()
}

fn header<'a>(response: &'a Response<Body>, name: &str) -> &'a str {
    response
        .headers()
        .get(name)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("")
}

fn setup() -> (Arc<MemoryBackend>, axum::Router) {
    let backend = Arc::new(MemoryBackend::dev());
    let router = app(Arc::clone(&backend));
    (backend, router)
}

#[tokio::test]
async fn empty_lists_are_arrays_with_read_headers() {
    let (_backend, router) = setup();
    for path in [
        "/v1/jobs",
        "/v1/allocations",
        "/v1/evaluations",
        "/v1/nodes",
    ] {
        let response = send(&router, "GET", path, None).await;
        assert_eq!(response.status(), StatusCode::OK, "{path}");
        // A table never written has index 0, sent as is (Nomad's `Index(table)`).
        assert_eq!(header(&response, "X-Nomad-Index"), "0", "{path}");
        assert_eq!(header(&response, "X-Nomad-KnownLeader"), "true");
        assert_eq!(header(&response, "X-Nomad-LastContact"), "0");
        assert_eq!(header(&response, "content-type"), "application/json");
        assert_eq!(body_text(response).await, "[]", "{path}");
    }
}

#[tokio::test]
async fn register_read_and_purge_a_job_whose_id_contains_a_slash() {
    let (_backend, router) = setup();
    let job = sample_job("batch/dispatch-1700000000-abcd1234");
    let response = send(&router, "PUT", "/v1/jobs", Some(json!({"Job": job}))).await;
    assert_eq!(response.status(), StatusCode::OK);
    let index: u64 = header(&response, "X-Nomad-Index").parse().unwrap();
    let registered = body_json(response).await;
    assert_eq!(registered["Index"], json!(index));
    assert!(
        registered["EvalID"]
            .as_str()
            .is_some_and(|id| !id.is_empty())
    );

    for path in [
        "/v1/job/batch%2Fdispatch-1700000000-abcd1234",
        "/v1/job/batch/dispatch-1700000000-abcd1234",
    ] {
        let read = send(&router, "GET", path, None).await;
        assert_eq!(read.status(), StatusCode::OK, "{path}");
        let job = body_json(read).await;
        assert_eq!(job["ID"], "batch/dispatch-1700000000-abcd1234");
        // Canonicalized on the way in.
        assert_eq!(job["Priority"], 50);
        assert_eq!(job["Namespace"], "default");
    }
    let summary = send(
        &router,
        "GET",
        "/v1/job/batch/dispatch-1700000000-abcd1234/summary",
        None,
    )
    .await;
    assert_eq!(summary.status(), StatusCode::OK);
    assert_eq!(
        body_json(summary).await["JobID"],
        "batch/dispatch-1700000000-abcd1234"
    );
    let versions = send(
        &router,
        "GET",
        "/v1/job/batch%2Fdispatch-1700000000-abcd1234/versions",
        None,
    )
    .await;
    assert_eq!(body_json(versions).await["Versions"][0]["Version"], 0);

    let purge = send(
        &router,
        "DELETE",
        "/v1/job/batch%2Fdispatch-1700000000-abcd1234?purge=True",
        None,
    )
    .await;
    assert_eq!(purge.status(), StatusCode::OK);
    assert!(body_json(purge).await["EvalID"].is_string());
    let gone = send(
        &router,
        "GET",
        "/v1/job/batch/dispatch-1700000000-abcd1234",
        None,
    )
    .await;
    assert_eq!(gone.status(), StatusCode::NOT_FOUND);
    assert_eq!(body_text(gone).await, "job not found");
}

#[tokio::test]
async fn stop_without_purge_keeps_the_job_stopped() {
    let (_backend, router) = setup();
    send(
        &router,
        "POST",
        "/v1/jobs",
        Some(json!({"Job": sample_job("web")})),
    )
    .await;
    let stop = send(&router, "DELETE", "/v1/job/web?purge=false", None).await;
    assert_eq!(stop.status(), StatusCode::OK);
    let job = body_json(send(&router, "GET", "/v1/job/web", None).await).await;
    assert_eq!(job["Stop"], true);
}

#[tokio::test]
async fn booleans_are_parsed_as_go_parses_them() {
    let (_backend, router) = setup();
    send(
        &router,
        "POST",
        "/v1/jobs",
        Some(json!({"Job": sample_job("web")})),
    )
    .await;
    let bad = send(&router, "DELETE", "/v1/job/web?purge=yes", None).await;
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
    assert!(body_text(bad).await.contains("purge"));
    let purged = send(&router, "DELETE", "/v1/job/web?purge=T", None).await;
    assert_eq!(purged.status(), StatusCode::OK);
    let gone = send(&router, "GET", "/v1/job/web", None).await;
    assert_eq!(gone.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn wrong_methods_get_405_and_unknown_paths_an_empty_404() {
    let (_backend, router) = setup();
    let wrong = send(&router, "DELETE", "/v1/jobs", None).await;
    assert_eq!(wrong.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(body_text(wrong).await, "Invalid method");
    let wrong = send(&router, "GET", "/v1/allocation/abc/stop", None).await;
    assert_eq!(wrong.status(), StatusCode::METHOD_NOT_ALLOWED);
    let unknown = send(&router, "GET", "/v1/does/not/exist", None).await;
    assert_eq!(unknown.status(), StatusCode::NOT_FOUND);
    assert_eq!(body_text(unknown).await, "");
}

#[tokio::test]
async fn missing_objects_are_404_in_plain_text() {
    let (_backend, router) = setup();
    for (path, message) in [
        ("/v1/job/nope", "job not found"),
        ("/v1/allocation/nope", "alloc not found"),
        ("/v1/evaluation/nope", "eval not found"),
        ("/v1/node/nope", "node not found"),
        ("/v1/job/nope/versions", "job versions not found"),
    ] {
        let response = send(&router, "GET", path, None).await;
        assert_eq!(response.status(), StatusCode::NOT_FOUND, "{path}");
        assert!(header(&response, "content-type").starts_with("text/plain"));
        assert_eq!(body_text(response).await, message, "{path}");
    }
    let stop = send(&router, "POST", "/v1/allocation/nope/stop", None).await;
    assert_eq!(stop.status(), StatusCode::NOT_FOUND);
    let restart = send(&router, "POST", "/v1/client/allocation/nope/restart", None).await;
    assert_eq!(restart.status(), StatusCode::NOT_FOUND);
    assert_eq!(body_text(restart).await, "Unknown allocation \"nope\"");
}

#[tokio::test]
async fn register_errors_are_400_with_nomads_messages() {
    let (_backend, router) = setup();
    let no_job = send(&router, "PUT", "/v1/jobs", Some(json!({}))).await;
    assert_eq!(no_job.status(), StatusCode::BAD_REQUEST);
    assert_eq!(body_text(no_job).await, "Job must be specified");
    let no_id = send(
        &router,
        "PUT",
        "/v1/jobs",
        Some(json!({"Job": {"Name": "x"}})),
    )
    .await;
    assert_eq!(body_text(no_id).await, "Job ID hasn't been provided");
    let mismatch = send(
        &router,
        "PUT",
        "/v1/job/other",
        Some(json!({"Job": sample_job("web")})),
    )
    .await;
    assert_eq!(mismatch.status(), StatusCode::BAD_REQUEST);
    assert_eq!(body_text(mismatch).await, "Job ID does not match name");
    let garbage = send(&router, "PUT", "/v1/jobs", None).await;
    assert_eq!(body_text(garbage).await, "Job must be specified");
}

#[tokio::test]
async fn an_invalid_job_gets_every_validation_error_at_once() {
    let (_backend, router) = setup();
    let mut job = sample_job("web");
    job.task_groups[0].tasks[0].driver = String::new();
    job.task_groups[0].tasks.push(Task {
        name: "second".to_string(),
        ..Task::default()
    });
    let response = send(&router, "PUT", "/v1/jobs", Some(json!({"Job": job}))).await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let text = body_text(response).await;
    let count = text.lines().filter(|line| line.starts_with("\t* ")).count();
    assert!(count >= 2, "expected several errors, got:\n{text}");
    assert!(
        text.starts_with(&format!("{count} errors occurred:")),
        "{text}"
    );
}

#[tokio::test]
async fn request_bodies_match_keys_case_insensitively_and_accept_null() {
    let (_backend, router) = setup();
    let body = json!({"job": {"id": "lower", "datacenters": ["dc1"], "taskgroups": [{"name": "g",
        "tasks": [{"name": "t", "driver": "raw_exec", "config": {"command": "/bin/true"}}]}]},
        "EnforceIndex": null});
    let response = send(&router, "POST", "/v1/jobs", Some(body)).await;
    assert_eq!(
        response.status(),
        StatusCode::OK,
        "{}",
        body_text(response).await
    );
    let job = body_json(send(&router, "GET", "/v1/job/lower", None).await).await;
    assert_eq!(job["TaskGroups"][0]["Tasks"][0]["Driver"], "raw_exec");
}

#[tokio::test]
async fn a_group_update_takes_what_it_leaves_out_from_the_jobs_as_nomad_merges_them() {
    let (_backend, router) = setup();
    let body = json!({"Job": {"ID": "merged", "Datacenters": ["dc1"],
        "Update": {"MaxParallel": 2, "MinHealthyTime": 5_000_000_000_i64, "AutoRevert": true},
        "TaskGroups": [{"Name": "g", "Update": {"Canary": 1, "MaxParallel": null},
        "Tasks": [{"Name": "t", "Driver": "raw_exec", "Config": {"command": "/bin/true"}}]}]}});
    let response = send(&router, "PUT", "/v1/jobs", Some(body)).await;
    assert_eq!(
        response.status(),
        StatusCode::OK,
        "{}",
        body_text(response).await
    );
    let job = body_json(send(&router, "GET", "/v1/job/merged", None).await).await;
    let update = &job["TaskGroups"][0]["Update"];
    assert_eq!(
        (
            update["MaxParallel"].as_i64(),
            update["MinHealthyTime"].as_i64(),
            update["AutoRevert"].as_bool(),
            update["Canary"].as_i64(),
            update["HealthyDeadline"].as_i64(),
        ),
        (
            Some(2),
            Some(5_000_000_000),
            Some(true),
            Some(1),
            Some(300_000_000_000)
        )
    );
}

#[tokio::test]
async fn pretty_output_is_indented_with_a_trailing_newline() {
    let (_backend, router) = setup();
    let text = body_text(send(&router, "GET", "/v1/regions?pretty", None).await).await;
    assert_eq!(text, "[\n    \"global\"\n]\n");
    let compact = body_text(send(&router, "GET", "/v1/regions", None).await).await;
    assert_eq!(compact, "[\"global\"]");
}

#[tokio::test]
async fn agent_and_status_endpoints_answer_like_nomad() {
    let (_backend, router) = setup();
    // Servers talk HTTP: the leader and the peers are the server's HTTP address.
    let leader = body_text(send(&router, "GET", "/v1/status/leader", None).await).await;
    assert_eq!(leader, "\"127.0.0.1:4646\"");
    let peers = body_json(send(&router, "GET", "/v1/status/peers", None).await).await;
    assert_eq!(peers, json!(["127.0.0.1:4646"]));
    let me = body_json(send(&router, "GET", "/v1/agent/self", None).await).await;
    assert_eq!(me["config"]["Region"], "global");
    assert_eq!(me["member"]["Name"], "node1.global");
    let members = body_json(send(&router, "GET", "/v1/agent/members", None).await).await;
    assert_eq!(members["Members"][0]["Status"], "alive");
    // A lone server has no failed member to force out: Nomad's checks, then a 200.
    let refused = send(&router, "PUT", "/v1/agent/force-leave", None).await;
    assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
    assert_eq!(body_text(refused).await, "missing node to force leave");
    let refused = send(
        &router,
        "PUT",
        "/v1/agent/force-leave?node=a&prune=maybe",
        None,
    )
    .await;
    assert_eq!(body_text(refused).await, "invalid prune value");
    let forced = send(&router, "PUT", "/v1/agent/force-leave?node=a.global", None).await;
    assert_eq!(forced.status(), StatusCode::OK);
    let wrong = send(&router, "GET", "/v1/agent/force-leave?node=a.global", None).await;
    assert_eq!(wrong.status(), StatusCode::METHOD_NOT_ALLOWED);
    let members_after = body_json(send(&router, "GET", "/v1/agent/members", None).await).await;
    assert_eq!(members_after, members);
    let servers = body_json(send(&router, "GET", "/v1/agent/servers", None).await).await;
    assert_eq!(servers, json!(["127.0.0.1:4646"]));
    let deployments = body_text(send(&router, "GET", "/v1/deployments", None).await).await;
    assert_eq!(deployments, "[]");
    let deployment = send(&router, "GET", "/v1/deployment/abc", None).await;
    assert_eq!(deployment.status(), StatusCode::NOT_FOUND);
    let health = body_json(send(&router, "GET", "/v1/agent/health", None).await).await;
    assert_eq!(
        health,
        json!({"client": {"ok": true, "message": "ok"}, "server": {"ok": true, "message": "ok"}})
    );
}

#[tokio::test]
async fn an_unhealthy_part_makes_agent_health_a_500_with_nomads_json() {
    let (backend, router) = setup();
    backend.set_health(crate::backend::AgentHealth {
        client: Some(crate::backend::PartHealth::unhealthy(
            "not registered with any server",
        )),
        server: Some(crate::backend::PartHealth::healthy()),
    });
    let response = send(&router, "GET", "/v1/agent/health", None).await;
    assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
    let body: Value = serde_json::from_str(&body_text(response).await).unwrap();
    assert_eq!(
        body,
        json!({"client": {"ok": false, "message": "not registered with any server"},
            "server": {"ok": true, "message": "ok"}})
    );
    let server_only = send(&router, "GET", "/v1/agent/health?type=server", None).await;
    assert_eq!(server_only.status(), StatusCode::OK);
    assert_eq!(
        body_json(server_only).await,
        json!({"server": {"ok": true, "message": "ok"}})
    );
}

#[tokio::test]
async fn a_server_only_agent_has_no_client_servers_and_a_client_only_agent_no_peers() {
    let server_only = Arc::new(MemoryBackend::new(crate::backend::AgentInfo {
        client_enabled: false,
        client_servers: Vec::new(),
        ..crate::backend::AgentOperations::agent_info(&MemoryBackend::dev())
    }));
    let router = app(Arc::clone(&server_only));
    let servers = send(&router, "GET", "/v1/agent/servers", None).await;
    assert_eq!(servers.status(), StatusCode::NOT_IMPLEMENTED);
    assert_eq!(body_text(servers).await, "Invalid method");
    let set = send(&router, "PUT", "/v1/agent/servers?address=10.0.0.1", None).await;
    assert_eq!(set.status(), StatusCode::NOT_IMPLEMENTED);
    let health = body_json(send(&router, "GET", "/v1/agent/health", None).await).await;
    assert_eq!(health, json!({"server": {"ok": true, "message": "ok"}}));
    let asked = send(&router, "GET", "/v1/agent/health?type=client", None).await;
    assert_eq!(asked.status(), StatusCode::INTERNAL_SERVER_ERROR);

    let client_only = Arc::new(MemoryBackend::new(crate::backend::AgentInfo {
        server_enabled: false,
        server_addr: String::new(),
        client_servers: vec!["10.0.0.2:4646".into(), "10.0.0.1:4646".into()],
        ..crate::backend::AgentOperations::agent_info(&MemoryBackend::dev())
    }));
    let router = app(Arc::clone(&client_only));
    let servers = body_json(send(&router, "GET", "/v1/agent/servers", None).await).await;
    assert_eq!(servers, json!(["10.0.0.1:4646", "10.0.0.2:4646"]));
    // Setting the servers (Nomad's `SetServers`): every `address` given, read back sorted.
    let missing = send(&router, "PUT", "/v1/agent/servers", None).await;
    assert_eq!(missing.status(), StatusCode::BAD_REQUEST);
    assert_eq!(body_text(missing).await, "missing server address");
    let set = send(
        &router,
        "POST",
        "/v1/agent/servers?address=10.0.0.9:4646&address=10.0.0.3:4646",
        None,
    )
    .await;
    assert_eq!(set.status(), StatusCode::OK);
    assert_eq!(body_text(set).await, "");
    let servers = body_json(send(&router, "GET", "/v1/agent/servers", None).await).await;
    assert_eq!(servers, json!(["10.0.0.3:4646", "10.0.0.9:4646"]));
    let peers = body_json(send(&router, "GET", "/v1/status/peers", None).await).await;
    assert_eq!(peers, json!([]));
}

#[tokio::test]
async fn another_region_has_no_path() {
    let (_backend, router) = setup();
    let own = send(&router, "GET", "/v1/jobs?region=global", None).await;
    assert_eq!(own.status(), StatusCode::OK);
    let other = send(&router, "GET", "/v1/jobs?region=mars", None).await;
    assert_eq!(other.status(), StatusCode::BAD_REQUEST);
    assert_eq!(body_text(other).await, "No path to region");
}

#[tokio::test]
async fn bad_blocking_parameters_are_400() {
    let (_backend, router) = setup();
    let wait = send(&router, "GET", "/v1/jobs?index=1&wait=forever", None).await;
    assert_eq!(wait.status(), StatusCode::BAD_REQUEST);
    assert_eq!(body_text(wait).await, "Invalid wait time");
    let index = send(&router, "GET", "/v1/jobs?index=abc", None).await;
    assert_eq!(body_text(index).await, "Invalid index");
}

#[tokio::test(start_paused = true)]
async fn a_blocking_query_wakes_on_a_change() {
    let (backend, router) = setup();
    backend.put_job(sample_job("first"));
    let index = backend.table_index(&[crate::Table::Jobs]);
    let waiting_router = router.clone();
    let uri = format!("/v1/jobs?index={index}&wait=5m");
    let waiter = tokio::spawn(async move { send(&waiting_router, "GET", &uri, None).await });
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(!waiter.is_finished(), "answered before anything changed");
    backend.put_job(sample_job("second"));
    let started = tokio::time::Instant::now();
    let response = waiter.await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(1));
    let new_index: u64 = header(&response, "X-Nomad-Index").parse().unwrap();
    assert!(new_index > index);
    let jobs = body_json(response).await;
    assert_eq!(jobs.as_array().map(Vec::len), Some(2));
}

#[tokio::test(start_paused = true)]
async fn a_blocking_query_times_out_with_the_same_index_after_wait_plus_jitter() {
    let (backend, router) = setup();
    backend.put_job(sample_job("first"));
    let index = backend.table_index(&[crate::Table::Jobs]);
    let started = tokio::time::Instant::now();
    let response = send(
        &router,
        "GET",
        &format!("/v1/jobs?index={index}&wait=16s"),
        None,
    )
    .await;
    let elapsed = started.elapsed();
    assert!(elapsed >= Duration::from_secs(16), "{elapsed:?}");
    assert!(elapsed <= Duration::from_secs(17), "{elapsed:?}");
    assert_eq!(header(&response, "X-Nomad-Index"), index.to_string());
    // A change to another table does not wake a jobs query.
    let waiting_router = router.clone();
    let uri = format!("/v1/jobs?index={index}&wait=10s");
    let waiter = tokio::spawn(async move { send(&waiting_router, "GET", &uri, None).await });
    tokio::time::sleep(Duration::from_secs(1)).await;
    backend.put_node(drover_structs::Node {
        id: "n1".into(),
        ..Default::default()
    });
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!waiter.is_finished());
    let response = waiter.await.unwrap();
    assert_eq!(header(&response, "X-Nomad-Index"), index.to_string());
}

#[tokio::test]
async fn allocations_list_read_and_stop() {
    let (backend, router) = setup();
    let job = backend.put_job(sample_job("web"));
    sample_allocation(&backend, "8e3a0000-1111-2222-3333-444455556666", &job);
    let list = body_json(send(&router, "GET", "/v1/allocations?prefix=8e3a", None).await).await;
    assert_eq!(list[0]["ID"], "8e3a0000-1111-2222-3333-444455556666");
    assert!(list[0]["TaskStates"].is_object());
    let without_states =
        body_json(send(&router, "GET", "/v1/allocations?task_states=False", None).await).await;
    assert!(without_states[0]["TaskStates"].is_null());
    let none = body_json(send(&router, "GET", "/v1/allocations?prefix=ffff", None).await).await;
    assert_eq!(none, json!([]));
    let read = body_json(
        send(
            &router,
            "GET",
            "/v1/allocation/8e3a0000-1111-2222-3333-444455556666",
            None,
        )
        .await,
    )
    .await;
    assert_eq!(read["Job"]["ID"], "web");
    let by_job =
        body_json(send(&router, "GET", "/v1/job/web/allocations?all=false", None).await).await;
    assert_eq!(by_job.as_array().map(Vec::len), Some(1));
    let stop = send(
        &router,
        "PUT",
        "/v1/allocation/8e3a0000-1111-2222-3333-444455556666/stop",
        None,
    )
    .await;
    assert_eq!(stop.status(), StatusCode::OK);
    let stopped = body_json(stop).await;
    assert!(stopped["EvalID"].is_string() && stopped["Index"].as_u64() > Some(0));
    // Nomad's `reschedule` flag has no path in drover's scheduler: refused by name, not ignored.
    let alloc_stop = "/v1/allocation/8e3a0000-1111-2222-3333-444455556666/stop";
    let refused = send(
        &router,
        "PUT",
        &format!("{alloc_stop}?reschedule=true"),
        None,
    )
    .await;
    assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
    let text = body_text(refused).await;
    assert!(text.starts_with("reschedule is not supported"), "{text}");
    let malformed = send(
        &router,
        "PUT",
        &format!("{alloc_stop}?reschedule=maybe"),
        None,
    )
    .await;
    assert_eq!(malformed.status(), StatusCode::BAD_REQUEST);
    let default = send(
        &router,
        "PUT",
        &format!("{alloc_stop}?reschedule=false"),
        None,
    )
    .await;
    assert_eq!(default.status(), StatusCode::OK);
}

#[tokio::test]
async fn client_operations_reach_the_backend_and_answer_json() {
    let (backend, router) = setup();
    let job = backend.put_job(sample_job("web"));
    sample_allocation(&backend, "a1", &job);
    let restart = send(&router, "POST", "/v1/client/allocation/a1/restart", None).await;
    assert_eq!(restart.status(), StatusCode::OK);
    assert_eq!(body_json(restart).await, json!({"Index": 0}));
    let restart_task = send(
        &router,
        "PUT",
        "/v1/client/allocation/a1/restart",
        Some(json!({"TaskName": "server", "AllTasks": false})),
    )
    .await;
    assert_eq!(restart_task.status(), StatusCode::OK);
    let signal = send(
        &router,
        "POST",
        "/v1/client/allocation/a1/signal",
        Some(json!({"Signal": "SIGUSR1", "Task": null})),
    )
    .await;
    assert_eq!(signal.status(), StatusCode::OK);
    let unknown_task = send(
        &router,
        "POST",
        "/v1/client/allocation/a1/signal",
        Some(json!({"Signal": "SIGUSR1", "Task": "nope"})),
    )
    .await;
    assert_eq!(unknown_task.status(), StatusCode::BAD_REQUEST);
    let gc = send(&router, "GET", "/v1/client/allocation/a1/gc", None).await;
    assert_eq!(gc.status(), StatusCode::OK);
    assert_eq!(body_text(gc).await, "");
    assert_eq!(
        backend.client_calls(),
        vec![
            ClientCall::Restart {
                alloc_id: "a1".into(),
                task: None,
                all_tasks: false
            },
            ClientCall::Restart {
                alloc_id: "a1".into(),
                task: Some("server".into()),
                all_tasks: false
            },
            ClientCall::Signal {
                alloc_id: "a1".into(),
                task: None,
                signal: "SIGUSR1".into()
            },
            ClientCall::Gc {
                alloc_id: "a1".into()
            },
        ]
    );
}

#[tokio::test]
async fn parse_turns_hcl_into_a_job_and_reports_located_errors() {
    let (_backend, router) = setup();
    let hcl = r#"job "hello" {
  group "g" {
    task "t" {
      driver = "raw_exec"
      config { command = "/bin/true" }
    }
  }
}
"#;
    let response = send(
        &router,
        "POST",
        "/v1/jobs/parse",
        Some(json!({"JobHCL": hcl, "Canonicalize": true})),
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    let job = body_json(response).await;
    assert_eq!(job["ID"], "hello");
    assert_eq!(job["Priority"], 50);
    let raw = body_json(
        send(
            &router,
            "POST",
            "/v1/jobs/parse",
            Some(json!({"JobHCL": hcl, "Canonicalize": false})),
        )
        .await,
    )
    .await;
    assert_eq!(raw["ID"], "hello");
    assert_eq!(raw["Priority"], 0);

    let broken = "job \"x\" {\n  group \"g\" {\n    task \"t\" {\n      drivr = \"raw_exec\"\n    }\n  }\n}\n";
    let response = send(
        &router,
        "POST",
        "/v1/jobs/parse",
        Some(json!({"JobHCL": broken})),
    )
    .await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let text = body_text(response).await;
    assert!(text.contains("input.hcl:4:7"), "{text}");
}

// Logs and files.

fn alloc_with_logs(backend: &MemoryBackend, dir: &std::path::Path) {
    let job = backend.put_job(sample_job("web"));
    sample_allocation(backend, "a1", &job);
    std::fs::create_dir_all(dir.join("alloc/logs")).unwrap();
    backend.set_alloc_dir("a1", dir.to_path_buf());
}

fn frames_of(text: &str) -> Vec<StreamFrame> {
    crate::logs::split_frames(text.as_bytes()).unwrap()
}

fn data_of(frames: &[StreamFrame]) -> String {
    frames
        .iter()
        .map(|frame| String::from_utf8(frame.data.0.clone()).unwrap())
        .collect()
}

#[tokio::test]
async fn logs_are_framed_across_rotated_files_with_offsets() {
    let (backend, router) = setup();
    let dir = tempfile::tempdir().unwrap();
    alloc_with_logs(&backend, dir.path());
    std::fs::write(dir.path().join("alloc/logs/server.stdout.0"), "one\ntwo\n").unwrap();
    std::fs::write(dir.path().join("alloc/logs/server.stdout.1"), "three\n").unwrap();
    std::fs::write(dir.path().join("alloc/logs/server.stderr.0"), "oops\n").unwrap();

    let response = send(
        &router,
        "GET",
        "/v1/client/fs/logs/a1?task=server&type=stdout",
        None,
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(header(&response, "content-type"), "application/json");
    let frames = frames_of(&body_text(response).await);
    assert_eq!(data_of(&frames), "one\ntwo\nthree\n");
    assert_eq!(frames[0].file, "alloc/logs/server.stdout.0");
    assert_eq!(frames[0].offset, 8);
    let last = frames.last().unwrap();
    assert_eq!(
        (last.file.as_str(), last.offset),
        ("alloc/logs/server.stdout.1", 6)
    );

    let plain = send(
        &router,
        "GET",
        "/v1/client/fs/logs/a1?task=server&type=stderr&plain=true",
        None,
    )
    .await;
    assert!(header(&plain, "content-type").starts_with("text/plain"));
    assert_eq!(body_text(plain).await, "oops\n");
}

#[tokio::test]
async fn origin_end_counts_back_across_files_and_origin_start_skips_forward() {
    let (backend, router) = setup();
    let dir = tempfile::tempdir().unwrap();
    alloc_with_logs(&backend, dir.path());
    std::fs::write(dir.path().join("alloc/logs/server.stdout.0"), "one\ntwo\n").unwrap();
    std::fs::write(dir.path().join("alloc/logs/server.stdout.1"), "three\n").unwrap();
    let tail = send(
        &router,
        "GET",
        "/v1/client/fs/logs/a1?task=server&type=stdout&origin=end&offset=10&plain=true",
        None,
    )
    .await;
    assert_eq!(body_text(tail).await, "two\nthree\n");
    let framed_tail = send(
        &router,
        "GET",
        "/v1/client/fs/logs/a1?task=server&type=stdout&origin=end&offset=3",
        None,
    )
    .await;
    let frames = frames_of(&body_text(framed_tail).await);
    assert_eq!(data_of(&frames), "ee\n");
    assert_eq!(frames[0].offset, 6);
    let skip = send(
        &router,
        "GET",
        "/v1/client/fs/logs/a1?task=server&type=stdout&origin=start&offset=4&plain=1",
        None,
    )
    .await;
    assert_eq!(body_text(skip).await, "two\nthree\n");
    let everything = send(
        &router,
        "GET",
        "/v1/client/fs/logs/a1?task=server&type=stdout&origin=end&offset=1000&plain=true",
        None,
    )
    .await;
    assert_eq!(body_text(everything).await, "one\ntwo\nthree\n");
}

#[tokio::test]
async fn log_parameters_are_checked_with_nomads_messages() {
    let (backend, router) = setup();
    let dir = tempfile::tempdir().unwrap();
    alloc_with_logs(&backend, dir.path());
    for (query, message) in [
        ("type=stdout", "must provide task name"),
        ("task=server", "must provide log type (stdout/stderr)"),
        (
            "task=server&type=stdin",
            "must provide log type (stdout/stderr)",
        ),
        (
            "task=server&type=stdout&origin=middle",
            "origin must be start or end",
        ),
    ] {
        let response = send(
            &router,
            "GET",
            &format!("/v1/client/fs/logs/a1?{query}"),
            None,
        )
        .await;
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{query}");
        assert_eq!(body_text(response).await, message);
    }
    let unknown_task = send(
        &router,
        "GET",
        "/v1/client/fs/logs/a1?task=nope&type=stdout",
        None,
    )
    .await;
    assert_eq!(unknown_task.status(), StatusCode::BAD_REQUEST);
    let unknown_alloc = send(
        &router,
        "GET",
        "/v1/client/fs/logs/zz?task=server&type=stdout",
        None,
    )
    .await;
    assert_eq!(unknown_alloc.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn follow_streams_new_data_across_rotation_with_heartbeats() {
    let backend = Arc::new(MemoryBackend::dev());
    let timing = FollowTiming {
        poll_interval: Duration::from_millis(10),
        heartbeat_interval: Duration::from_millis(50),
    };
    let router = app_with_options(
        Arc::clone(&backend),
        ApiOptions {
            follow_timing: timing,
            ..ApiOptions::default()
        },
    );
    let dir = tempfile::tempdir().unwrap();
    alloc_with_logs(&backend, dir.path());
    let logs = dir.path().join("alloc/logs");
    std::fs::write(logs.join("server.stdout.0"), "first\n").unwrap();

    let response = send(
        &router,
        "GET",
        "/v1/client/fs/logs/a1?task=server&type=stdout&follow=true",
        None,
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.into_body();
    let mut received = String::new();
    let mut frames = Vec::new();
    let mut step = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while tokio::time::Instant::now() < deadline {
        let Ok(Some(Ok(chunk))) = tokio::time::timeout(Duration::from_secs(5), body.frame()).await
        else {
            break;
        };
        let Ok(data) = chunk.into_data() else {
            continue;
        };
        received.push_str(std::str::from_utf8(&data).unwrap());
        frames = frames_of(&received);
        let text = data_of(&frames);
        if step == 0 && text == "first\n" {
            // Rotation: the rest of .0, then a new .1.
            let mut file = std::fs::OpenOptions::new()
                .append(true)
                .open(logs.join("server.stdout.0"))
                .unwrap();
            std::io::Write::write_all(&mut file, b"tail of zero\n").unwrap();
            std::fs::write(logs.join("server.stdout.1"), "in one\n").unwrap();
            step = 1;
        } else if step == 1 && text == "first\ntail of zero\nin one\n" {
            step = 2;
        } else if step == 2 && frames.last().is_some_and(StreamFrame::is_heartbeat) {
            step = 3;
            break;
        }
    }
    assert_eq!(step, 3, "frames so far: {frames:?}");
    let with_data: Vec<_> = frames
        .iter()
        .filter(|frame| !frame.data.0.is_empty())
        .collect();
    assert_eq!(with_data.last().unwrap().file, "alloc/logs/server.stdout.1");
    assert_eq!(with_data.last().unwrap().offset, 7);
}

#[tokio::test]
async fn a_deleted_file_is_reported_and_reading_moves_on() {
    let backend = Arc::new(MemoryBackend::dev());
    let timing = FollowTiming {
        poll_interval: Duration::from_millis(10),
        heartbeat_interval: Duration::from_secs(60),
    };
    let router = app_with_options(
        Arc::clone(&backend),
        ApiOptions {
            follow_timing: timing,
            ..ApiOptions::default()
        },
    );
    let dir = tempfile::tempdir().unwrap();
    alloc_with_logs(&backend, dir.path());
    let logs = dir.path().join("alloc/logs");
    std::fs::write(logs.join("server.stdout.3"), "old\n").unwrap();
    let response = send(
        &router,
        "GET",
        "/v1/client/fs/logs/a1?task=server&type=stdout&follow=true",
        None,
    )
    .await;
    let mut body = response.into_body();
    let mut received = String::new();
    let mut deleted_seen = false;
    for _ in 0..50 {
        let Ok(Some(Ok(chunk))) = tokio::time::timeout(Duration::from_secs(5), body.frame()).await
        else {
            break;
        };
        let Ok(data) = chunk.into_data() else {
            continue;
        };
        received.push_str(std::str::from_utf8(&data).unwrap());
        let frames = frames_of(&received);
        if data_of(&frames) == "old\n" && !logs.join("server.stdout.4").exists() {
            std::fs::remove_file(logs.join("server.stdout.3")).unwrap();
            std::fs::write(logs.join("server.stdout.4"), "new\n").unwrap();
        }
        deleted_seen = frames
            .iter()
            .any(|frame| frame.file_event == "file deleted");
        if deleted_seen && data_of(&frames) == "old\nnew\n" {
            break;
        }
    }
    assert!(deleted_seen, "{received}");
    assert_eq!(data_of(&frames_of(&received)), "old\nnew\n");
}

#[tokio::test]
async fn fs_endpoints_serve_inside_the_alloc_dir_and_refuse_escapes() {
    let (backend, router) = setup();
    let dir = tempfile::tempdir().unwrap();
    alloc_with_logs(&backend, dir.path());
    std::fs::write(dir.path().join("alloc/logs/server.stdout.0"), "hello\n").unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("shadow"), "secret").unwrap();
    std::fs::create_dir_all(dir.path().join("server/local")).unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("shadow"),
        dir.path().join("server/local/leak"),
    )
    .unwrap();

    let listing =
        body_json(send(&router, "GET", "/v1/client/fs/ls/a1?path=/alloc/logs", None).await).await;
    assert_eq!(listing[0]["Name"], "server.stdout.0");
    assert_eq!(listing[0]["Size"], 6);
    let root = body_json(send(&router, "GET", "/v1/client/fs/ls/a1", None).await).await;
    assert_eq!(root.as_array().map(Vec::len), Some(2));
    let stat = body_json(
        send(
            &router,
            "GET",
            "/v1/client/fs/stat/a1?path=alloc/logs/server.stdout.0",
            None,
        )
        .await,
    )
    .await;
    assert_eq!(stat["FileMode"].as_str().map(|mode| &mode[..1]), Some("-"));
    let cat = send(
        &router,
        "GET",
        "/v1/client/fs/cat/a1?path=alloc/logs/server.stdout.0",
        None,
    )
    .await;
    assert_eq!(body_text(cat).await, "hello\n");
    let readat = send(
        &router,
        "GET",
        "/v1/client/fs/readat/a1?path=alloc/logs/server.stdout.0&offset=1&limit=3",
        None,
    )
    .await;
    assert_eq!(body_text(readat).await, "ell");
    // A negative limit reads to the end, as Nomad's: `nomad alloc fs -tail` asks for -1.
    let to_end = send(
        &router,
        "GET",
        "/v1/client/fs/readat/a1?path=alloc/logs/server.stdout.0&offset=2&limit=-1",
        None,
    )
    .await;
    assert_eq!(to_end.status(), 200);
    assert_eq!(body_text(to_end).await, "llo\n");
    let no_name = send(&router, "GET", "/v1/client/fs/stat/a1", None).await;
    assert_eq!(body_text(no_name).await, "must provide a file name");

    for escape in [
        "/v1/client/fs/cat/a1?path=../../../../etc/passwd",
        "/v1/client/fs/cat/a1?path=%2e%2e%2f%2e%2e%2fetc%2fpasswd",
        "/v1/client/fs/cat/a1?path=/../../etc/passwd",
        "/v1/client/fs/cat/a1?path=server/local/leak",
        "/v1/client/fs/ls/a1?path=..",
        "/v1/client/fs/stat/a1?path=server/local/leak",
    ] {
        let response = send(&router, "GET", escape, None).await;
        let status = response.status();
        let text = body_text(response).await;
        assert!(status.is_client_error(), "{escape}: {status}");
        assert!(
            !text.contains("secret") && !text.contains("root:"),
            "{escape}: {text}"
        );
    }
}

#[tokio::test]
async fn fs_reads_of_a_fifo_fail_at_once_and_a_sparse_range_streams() {
    const GIB: u64 = 1024 * 1024 * 1024;
    let (backend, router) = setup();
    let dir = tempfile::tempdir().unwrap();
    alloc_with_logs(&backend, dir.path());
    rustix::fs::mknodat(
        rustix::fs::CWD,
        dir.path().join("alloc/pipe"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    for uri in [
        "/v1/client/fs/cat/a1?path=alloc/pipe",
        "/v1/client/fs/readat/a1?path=alloc/pipe&offset=0&limit=10",
        "/v1/client/fs/stream/a1?path=alloc/pipe&follow=false",
    ] {
        let response = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            send(&router, "GET", uri, None),
        )
        .await
        .expect("a FIFO read hung");
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{uri}");
        assert_eq!(
            body_text(response).await,
            "\"alloc/pipe\" is not a regular file"
        );
    }

    let sparse = std::fs::File::create(dir.path().join("alloc/sparse")).unwrap();
    sparse.set_len(100 * GIB).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&sparse, b"needle", 99 * GIB + 10).unwrap();
    let uri = format!(
        "/v1/client/fs/readat/a1?path=alloc/sparse&offset={}&limit=16",
        99 * GIB + 6
    );
    let response = send(&router, "GET", &uri, None).await;
    assert_eq!(response.status(), StatusCode::OK);
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(&bytes[..], b"\0\0\0\0needle\0\0\0\0\0\0");
}

#[tokio::test]
async fn fs_stream_frames_one_file_and_stops_when_not_following() {
    let (backend, router) = setup();
    let dir = tempfile::tempdir().unwrap();
    alloc_with_logs(&backend, dir.path());
    std::fs::create_dir_all(dir.path().join("alloc/data")).unwrap();
    std::fs::write(dir.path().join("alloc/data/report.txt"), "0123456789").unwrap();
    let response = send(
        &router,
        "GET",
        "/v1/client/fs/stream/a1?path=/alloc/data/report.txt&origin=end&offset=4&follow=false",
        None,
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    let frames = frames_of(&body_text(response).await);
    assert_eq!(data_of(&frames), "6789");
    assert_eq!(frames[0].file, "alloc/data/report.txt");
    assert_eq!(frames[0].offset, 10);
    let escape = send(
        &router,
        "GET",
        "/v1/client/fs/stream/a1?path=../../etc/passwd&follow=false",
        None,
    )
    .await;
    assert_eq!(escape.status(), StatusCode::BAD_REQUEST);
    let no_path = send(&router, "GET", "/v1/client/fs/stream/a1", None).await;
    assert_eq!(body_text(no_path).await, "must provide a file path");
}

#[tokio::test]
async fn checks_are_an_empty_object_for_a_known_allocation() {
    let (backend, router) = setup();
    let job = backend.put_job(sample_job("web"));
    sample_allocation(&backend, "a1", &job);
    let checks = send(&router, "GET", "/v1/client/allocation/a1/checks", None).await;
    assert_eq!(body_json(checks).await, json!({}));
    let unknown = send(&router, "GET", "/v1/client/allocation/zz/checks", None).await;
    assert_eq!(unknown.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn parse_decodes_a_vault_job_that_register_then_refuses() {
    let (_backend, router) = setup();
    let hcl = r#"
job "secrets" {
  vault {
    policies = ["read"]
  }
  group "g" {
    task "t" {
      driver = "raw_exec"
      config { command = "/bin/true" }
    }
  }
}
"#;
    let response = send(
        &router,
        "POST",
        "/v1/jobs/parse",
        Some(json!({"JobHCL": hcl, "Canonicalize": true})),
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    let job = body_json(response).await;
    let vault = &job["TaskGroups"][0]["Tasks"][0]["Vault"];
    assert_eq!(vault["Policies"], json!(["read"]));
    assert_eq!(vault["Env"], true);
    assert_eq!(vault["ChangeMode"], "restart");
    assert_eq!(vault["Cluster"], "default");

    let response = send(&router, "PUT", "/v1/jobs", Some(json!({"Job": job}))).await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let text = body_text(response).await;
    assert!(
        text.contains("group \"g\" task \"t\": vault cannot run here: needs a Vault server"),
        "{text}"
    );
}

/// `/v1/jobs/parse` answers what Nomad's parse answers, without the defaults the server adds
/// at register: a parameterized job's `Payload` stays unset (it was `"optional"`), and a
/// service name keeps its `${TASKGROUP}` (it was replaced). A register then applies both.
#[tokio::test]
async fn parse_leaves_the_register_defaults_to_the_register() {
    let (backend, router) = setup();
    let hcl = r#"job "as-written" {
  type = "batch"
  parameterized {
    meta_optional = ["run"]
  }
  group "work" {
    service {
      name     = "${TASKGROUP}-api"
      provider = "nomad"
    }
    task "run" {
      driver = "raw_exec"
      config { command = "/bin/true" }
      service {
        name     = "run-${NOMAD_ALLOC_INDEX}"
        provider = "nomad"
      }
    }
  }
}
"#;
    let response = send(
        &router,
        "PUT",
        "/v1/jobs/parse",
        Some(json!({"JobHCL": hcl, "Canonicalize": true})),
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    let job = body_json(response).await;
    assert_eq!(job["ParameterizedJob"]["Payload"], "");
    assert_eq!(
        job["TaskGroups"][0]["Services"][0]["Name"],
        "${TASKGROUP}-api"
    );
    assert_eq!(
        job["TaskGroups"][0]["Tasks"][0]["Services"][0]["Name"],
        "run-${NOMAD_ALLOC_INDEX}"
    );

    let response = send(&router, "PUT", "/v1/jobs", Some(json!({"Job": job}))).await;
    assert_eq!(
        response.status(),
        StatusCode::OK,
        "{}",
        body_text(response).await
    );
    let stored = backend.job("default", "as-written").unwrap().unwrap();
    let parameterized = stored.parameterized_job.as_ref().unwrap();
    assert_eq!(parameterized.payload, "optional");
    assert_eq!(stored.task_groups[0].services[0].name, "work-api");
    // The task environment's names are the client's to fill in when it registers the service.
    assert_eq!(
        stored.task_groups[0].tasks[0].services[0].name,
        "run-${NOMAD_ALLOC_INDEX}"
    );
}

#[tokio::test]
async fn parse_takes_variables_as_hcl_text_or_as_an_object() {
    let (_backend, router) = setup();
    let hcl = r#"variable "n" {
  type    = number
  default = 1
}
job "vars" {
  group "g" {
    count = var.n
    task "t" {
      driver = "raw_exec"
      config { command = "/bin/true" }
    }
  }
}
"#;
    let from_text = body_json(
        send(
            &router,
            "POST",
            "/v1/jobs/parse",
            Some(json!({"JobHCL": hcl, "Canonicalize": true, "Variables": "n = 4\n"})),
        )
        .await,
    )
    .await;
    assert_eq!(from_text["TaskGroups"][0]["Count"], 4);
    let from_object = body_json(
        send(
            &router,
            "POST",
            "/v1/jobs/parse",
            Some(json!({"JobHCL": hcl, "Canonicalize": true, "Variables": {"n": "3"}})),
        )
        .await,
    )
    .await;
    assert_eq!(from_object["TaskGroups"][0]["Count"], 3);
    let hcl1 = send(
        &router,
        "POST",
        "/v1/jobs/parse",
        Some(json!({"JobHCL": hcl, "HCLv1": true})),
    )
    .await;
    assert_eq!(hcl1.status(), StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn a_register_using_what_cannot_run_here_is_refused_naming_each_use() {
    let (_backend, router) = setup();
    let job = json!({
        "ID": "later",
        "Type": "batch",
        "TaskGroups": [{
            "Name": "web",
            "Networks": [{"Device": "eth0"}],
            "Tasks": [{
                "Name": "server",
                "Driver": "raw_exec",
                "Config": {"command": "/bin/true"},
                "Identity": {"Env": true, "ExtraClaims": {"team": "web"}},
                "Vault": {"Policies": ["db"]}
            }]
        }]
    });
    for (method, path) in [("PUT", "/v1/jobs"), ("POST", "/v1/job/later")] {
        let response = send(&router, method, path, Some(json!({"Job": job}))).await;
        assert_eq!(
            response.status(),
            StatusCode::BAD_REQUEST,
            "{method} {path}"
        );
        let text = body_text(response).await;
        assert!(text.starts_with("3 errors occurred:\n"), "{text}");
        for expected in [
            "group \"web\": network.device cannot run here:",
            "TaskGroups[0].Tasks[0].Identity.ExtraClaims: group \"web\" task \"server\": ",
            "cannot run here: drover does not add extra claims to workload identities; runs once identities carry extra claims",
            "TaskGroups[0].Tasks[0].Vault: group \"web\" task \"server\": vault cannot run here: needs a Vault server; keep secrets in Nomad Variables (/v1/var) instead (see docs/vault.md); runs once drover integrates with Vault",
        ] {
            assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
        }
    }
    let jobs = body_json(send(&router, "GET", "/v1/jobs", None).await).await;
    assert_eq!(jobs, json!([]), "a refused job is not stored");

    // The same job still parses and validates as Nomad's would; validation reports the refusals.
    let validated = body_json(
        send(
            &router,
            "PUT",
            "/v1/validate/job",
            Some(json!({"Job": job})),
        )
        .await,
    )
    .await;
    assert_eq!(validated["ValidationErrors"].as_array().unwrap().len(), 3);
}

#[tokio::test]
async fn nomads_default_update_registers_without_a_warning() {
    let (_backend, router) = setup();
    let mut job = sample_job("web");
    job.update = Some(drover_structs::canonicalize::default_update_strategy());
    let response = send(&router, "PUT", "/v1/jobs", Some(json!({"Job": job}))).await;
    assert_eq!(response.status(), StatusCode::OK);
    let registered = body_json(response).await;
    let warnings = registered["Warnings"].as_str().unwrap();
    // Nomad's default update (deployments) and migrate (the drainer) strategies both run.
    assert_eq!(warnings, "");
    let validated = body_json(
        send(
            &router,
            "PUT",
            "/v1/validate/job",
            Some(json!({"Job": job})),
        )
        .await,
    )
    .await;
    assert_eq!(validated["ValidationErrors"], json!([]));
    assert_eq!(validated["Warnings"], json!(warnings));

    let plain = body_json(
        send(
            &router,
            "PUT",
            "/v1/jobs",
            Some(json!({"Job": Job { r#type: "batch".to_string(), ..sample_job("plain") }})),
        )
        .await,
    )
    .await;
    assert_eq!(plain["Warnings"], "");
}

#[tokio::test]
async fn validate_job_lists_problems_with_200() {
    let (_backend, router) = setup();
    let good = body_json(
        send(
            &router,
            "POST",
            "/v1/validate/job",
            Some(json!({"Job": sample_job("web")})),
        )
        .await,
    )
    .await;
    assert_eq!(good["ValidationErrors"], json!([]));
    assert_eq!(good["Error"], "");
    let mut job = sample_job("web");
    job.task_groups[0].tasks[0].driver = String::new();
    let bad = send(
        &router,
        "PUT",
        "/v1/validate/job",
        Some(json!({"Job": job})),
    )
    .await;
    assert_eq!(bad.status(), StatusCode::OK);
    let bad = body_json(bad).await;
    assert!(!bad["ValidationErrors"].as_array().unwrap().is_empty());
    assert!(bad["Error"].as_str().unwrap().contains("error"));
    // The agent answered, so the driver configuration counts as validated, as in Nomad; a
    // false here makes Nomad's CLI print that the agent could not be reached.
    assert_eq!(bad["DriverConfigValidated"], true);
}

#[tokio::test]
async fn following_the_log_of_a_dead_task_ends_after_the_last_bytes() {
    let backend = Arc::new(MemoryBackend::dev());
    let timing = FollowTiming {
        poll_interval: Duration::from_millis(10),
        heartbeat_interval: Duration::from_secs(60),
    };
    let router = app_with_options(
        Arc::clone(&backend),
        ApiOptions {
            follow_timing: timing,
            ..ApiOptions::default()
        },
    );
    let dir = tempfile::tempdir().unwrap();
    alloc_with_logs(&backend, dir.path());
    std::fs::write(dir.path().join("alloc/logs/server.stdout.0"), "running\n").unwrap();
    let response = send(
        &router,
        "GET",
        "/v1/client/fs/logs/a1?task=server&type=stdout&follow=true",
        None,
    )
    .await;
    let mut body = response.into_body();
    let first = tokio::time::timeout(Duration::from_secs(10), body.frame())
        .await
        .unwrap();
    let first = first.unwrap().unwrap().into_data().unwrap();
    assert_eq!(
        data_of(&frames_of(std::str::from_utf8(&first).unwrap())),
        "running\n"
    );
    // The task writes its last line and dies.
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(dir.path().join("alloc/logs/server.stdout.0"))
        .unwrap();
    std::io::Write::write_all(&mut file, b"last words\n").unwrap();
    let mut allocation = backend.allocation("a1").unwrap().unwrap();
    allocation.task_states.insert(
        "server".into(),
        drover_structs::TaskState {
            state: "dead".into(),
            ..Default::default()
        },
    );
    backend.put_allocation(allocation);
    let rest = tokio::time::timeout(Duration::from_secs(10), body.collect())
        .await
        .expect("the stream should end once the task is dead")
        .unwrap()
        .to_bytes();
    assert_eq!(
        data_of(&frames_of(std::str::from_utf8(&rest).unwrap())),
        "last words\n"
    );
}

#[tokio::test]
async fn job_allocations_leave_out_an_earlier_job_with_the_same_id_unless_all() {
    let (backend, router) = setup();
    let first = backend.put_job(sample_job("web"));
    sample_allocation(&backend, "old-alloc", &first);
    let purge = send(&router, "DELETE", "/v1/job/web?purge=true", None).await;
    assert_eq!(purge.status(), StatusCode::OK);
    let second = backend.put_job(sample_job("web"));
    assert_ne!(first.create_index, second.create_index);
    sample_allocation(&backend, "new-alloc", &second);
    let current =
        body_json(send(&router, "GET", "/v1/job/web/allocations?all=false", None).await).await;
    let ids: Vec<&str> = current
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|stub| stub["ID"].as_str())
        .collect();
    assert_eq!(ids, vec!["new-alloc"]);
    let every =
        body_json(send(&router, "GET", "/v1/job/web/allocations?all=True", None).await).await;
    assert_eq!(every.as_array().map(Vec::len), Some(2));
}

#[tokio::test]
async fn evaluations_filter_by_job_and_status() {
    let (backend, router) = setup();
    for (id, job, status) in [
        ("e1", "web", "complete"),
        ("e2", "web", "blocked"),
        ("e3", "db", "complete"),
    ] {
        backend.put_evaluation(drover_structs::Evaluation {
            id: id.into(),
            namespace: "default".into(),
            job_id: job.into(),
            status: status.into(),
            ..Default::default()
        });
    }
    let by_job = body_json(send(&router, "GET", "/v1/evaluations?job=web", None).await).await;
    assert_eq!(by_job.as_array().map(Vec::len), Some(2));
    let blocked =
        body_json(send(&router, "GET", "/v1/evaluations?status=blocked", None).await).await;
    assert_eq!(blocked[0]["ID"], "e2");
    let by_prefix = body_json(send(&router, "GET", "/v1/evaluations?prefix=e3", None).await).await;
    assert_eq!(by_prefix[0]["JobID"], "db");
    let one = body_json(send(&router, "GET", "/v1/evaluation/e1", None).await).await;
    assert_eq!(one["Status"], "complete");
}

/// Reads ndjson lines from a streaming body, keeping what it has read past the last line.
struct LineReader {
    body: Body,
    pending: String,
}

impl LineReader {
    fn new(body: Body) -> Self {
        LineReader {
            body,
            pending: String::new(),
        }
    }

    async fn lines(&mut self, count: usize) -> Vec<Value> {
        let mut lines = Vec::new();
        while lines.len() < count {
            if let Some(end) = self.pending.find('\n') {
                let line: String = self.pending.drain(..=end).collect();
                lines.push(serde_json::from_str(line.trim()).unwrap());
                continue;
            }
            let frame = tokio::time::timeout(Duration::from_secs(60), self.body.frame())
                .await
                .expect("the stream went silent")
                .expect("the stream ended")
                .unwrap();
            if let Ok(data) = frame.into_data() {
                self.pending.push_str(std::str::from_utf8(&data).unwrap());
            }
        }
        lines
    }
}

#[tokio::test]
async fn the_event_stream_sends_matching_batches_as_lines() {
    let (backend, router) = setup();
    backend.put_job(sample_job("before"));
    let response = send(
        &router,
        "GET",
        "/v1/event/stream?topic=Job:web&topic=Allocation",
        None,
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(header(&response, "content-type"), "application/json");
    let mut reader = LineReader::new(response.into_body());
    assert_eq!(reader.lines(1).await, vec![json!({})]);
    backend.put_job(sample_job("other"));
    let web = backend.put_job(sample_job("web"));
    sample_allocation(&backend, "a1", &web);
    let lines = reader.lines(2).await;
    assert_eq!(lines[0]["Index"], json!(web.modify_index));
    assert_eq!(lines[0]["Events"][0]["Topic"], "Job");
    assert_eq!(lines[0]["Events"][0]["Type"], "JobRegistered");
    assert_eq!(lines[0]["Events"][0]["Payload"]["Job"]["ID"], "web");
    assert_eq!(lines[1]["Events"][0]["Topic"], "Allocation");
    assert_eq!(lines[1]["Events"][0]["Key"], "a1");
}

#[tokio::test]
async fn the_event_stream_replays_from_an_index_accepts_unknown_topics_and_refuses_bad_pairs() {
    let (backend, router) = setup();
    let first = backend.put_job(sample_job("first"));
    backend.put_job(sample_job("second"));
    let response = send(
        &router,
        "GET",
        &format!("/v1/event/stream?index={}", first.modify_index),
        None,
    )
    .await;
    let lines = LineReader::new(response.into_body()).lines(3).await;
    assert_eq!(lines[1]["Events"][0]["Key"], "first");
    assert_eq!(lines[2]["Events"][0]["Key"], "second");
    // A topic name drover publishes nothing of is accepted as Nomad accepts it, and matches
    // nothing: beside `Job:second`, only that job's event comes.
    let unknown = send(
        &router,
        "GET",
        &format!(
            "/v1/event/stream?index={}&topic=Nonsense:x&topic=Job:second&topic=:",
            first.modify_index
        ),
        None,
    )
    .await;
    assert_eq!(unknown.status(), StatusCode::OK);
    let lines = LineReader::new(unknown.into_body()).lines(2).await;
    assert_eq!(lines[1]["Events"][0]["Key"], "second");
    assert_eq!(lines[1]["Events"].as_array().map(Vec::len), Some(1));
    let only_unknown = send(&router, "GET", "/v1/event/stream?topic=Nonsense", None).await;
    assert_eq!(only_unknown.status(), StatusCode::OK);
    // Nomad's api suite: a topic with more than one `:` is refused before the stream opens.
    let unparsable = send(
        &router,
        "GET",
        "/v1/event/stream?topic=Evaluation:::*",
        None,
    )
    .await;
    assert_eq!(unparsable.status(), StatusCode::BAD_REQUEST);
    assert_eq!(
        body_text(unparsable).await,
        "Invalid topic query: error parsing topics: Invalid key value pair for topic, topic: Evaluation:::*"
    );
}

#[tokio::test(start_paused = true)]
async fn a_quiet_event_stream_sends_heartbeats() {
    let (_backend, router) = setup();
    let response = send(&router, "GET", "/v1/event/stream", None).await;
    let mut reader = LineReader::new(response.into_body());
    let started = tokio::time::Instant::now();
    let lines = reader.lines(2).await;
    assert_eq!(lines, vec![json!({}), json!({})]);
    assert!(
        started.elapsed() >= Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
}

// Exec over a real websocket.

mod exec_over_websocket {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message as WsMessage;

    use super::*;

    type Socket = tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>;

    async fn serve() -> (Arc<MemoryBackend>, String) {
        let backend = Arc::new(MemoryBackend::dev());
        let job = backend.put_job(sample_job("web"));
        sample_allocation(&backend, "a1", &job);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let router = app(Arc::clone(&backend));
        tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
        (backend, address)
    }

    async fn connect(address: &str, command: &[&str]) -> Socket {
        let command = serde_json::to_string(command).unwrap();
        let encoded: String =
            percent_encoding::utf8_percent_encode(&command, percent_encoding::NON_ALPHANUMERIC)
                .to_string();
        let url = format!(
            "ws://{address}/v1/client/allocation/a1/exec?task=server&tty=false&command={encoded}"
        );
        let stream = tokio::net::TcpStream::connect(address).await.unwrap();
        let (socket, _) = tokio_tungstenite::client_async(url, stream).await.unwrap();
        socket
    }

    /// Reads frames until `exited`; returns stdout, stderr, the exit code and the close code.
    async fn run_to_exit(socket: &mut Socket) -> (String, String, i64, Option<u16>) {
        let (mut stdout, mut stderr, mut exit_code) = (Vec::new(), Vec::new(), None);
        loop {
            let message = tokio::time::timeout(Duration::from_secs(20), socket.next())
                .await
                .expect("no frame")
                .expect("closed before the exit code")
                .unwrap();
            match message {
                WsMessage::Text(text) => {
                    let frame: Value = serde_json::from_str(text.as_str()).unwrap();
                    let decode = |value: &Value| {
                        base64::Engine::decode(
                            &base64::engine::general_purpose::STANDARD,
                            value.as_str().unwrap(),
                        )
                        .unwrap()
                    };
                    if let Some(data) = frame.pointer("/stdout/data") {
                        stdout.extend(decode(data));
                    } else if let Some(data) = frame.pointer("/stderr/data") {
                        stderr.extend(decode(data));
                    } else if frame["exited"] == true {
                        exit_code = frame["result"]["exit_code"].as_i64();
                    }
                }
                WsMessage::Close(frame) => {
                    return (
                        String::from_utf8(stdout).unwrap(),
                        String::from_utf8(stderr).unwrap(),
                        exit_code.expect("closed before the exit code"),
                        frame.map(|frame| u16::from(frame.code)),
                    );
                }
                _ => {}
            }
        }
    }

    #[tokio::test]
    async fn a_command_runs_and_reports_output_and_exit_code() {
        let (_backend, address) = serve().await;
        let mut socket = connect(&address, &["/bin/echo", "hi"]).await;
        assert_eq!(
            run_to_exit(&mut socket).await,
            ("hi\n".into(), String::new(), 0, Some(1000))
        );
        let mut socket = connect(&address, &["/bin/sh", "-c", "echo oops >&2; exit 7"]).await;
        assert_eq!(
            run_to_exit(&mut socket).await,
            (String::new(), "oops\n".into(), 7, Some(1000))
        );
    }

    #[tokio::test]
    async fn stdin_reaches_the_command_until_closed() {
        let (_backend, address) = serve().await;
        let mut socket = connect(&address, &["/bin/cat"]).await;
        socket
            .send(WsMessage::Text(json!({}).to_string().into()))
            .await
            .unwrap();
        socket
            .send(WsMessage::Text(
                json!({"stdin": {"data": "cGluZwo="}}).to_string().into(),
            ))
            .await
            .unwrap();
        socket
            .send(WsMessage::Text(
                json!({"tty_size": {"height": 40, "width": 120}})
                    .to_string()
                    .into(),
            ))
            .await
            .unwrap();
        socket
            .send(WsMessage::Text(
                json!({"stdin": {"close": true}}).to_string().into(),
            ))
            .await
            .unwrap();
        assert_eq!(
            run_to_exit(&mut socket).await,
            ("ping\n".into(), String::new(), 0, Some(1000))
        );
    }

    #[tokio::test]
    async fn a_client_that_goes_away_ends_its_process() {
        let (_backend, address) = serve().await;
        let mut socket = connect(&address, &["/bin/sh", "-c", "echo $$; exec sleep 60"]).await;
        let pid = loop {
            let message = tokio::time::timeout(Duration::from_secs(20), socket.next())
                .await
                .unwrap()
                .unwrap()
                .unwrap();
            if let WsMessage::Text(text) = message {
                let frame: Value = serde_json::from_str(text.as_str()).unwrap();
                if let Some(data) = frame.pointer("/stdout/data") {
                    let bytes = base64::Engine::decode(
                        &base64::engine::general_purpose::STANDARD,
                        data.as_str().unwrap(),
                    )
                    .unwrap();
                    break String::from_utf8(bytes)
                        .unwrap()
                        .trim()
                        .parse::<u32>()
                        .unwrap();
                }
            }
        };
        assert!(std::path::Path::new(&format!("/proc/{pid}")).exists());
        drop(socket);
        let mut gone = false;
        for _ in 0..200 {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
            if status.is_empty() || status.contains("State:\tZ") {
                gone = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(gone, "process {pid} outlived its client");
    }

    #[tokio::test]
    async fn bad_exec_requests_get_http_errors_before_the_upgrade() {
        let (_backend, router) = setup();
        let no_command = send(
            &router,
            "GET",
            "/v1/client/allocation/a1/exec?task=server",
            None,
        )
        .await;
        assert_eq!(no_command.status(), StatusCode::BAD_REQUEST);
        assert_eq!(
            body_text(no_command).await,
            "failed to marshal command into json"
        );
        let empty = send(
            &router,
            "GET",
            "/v1/client/allocation/a1/exec?task=server&command=%5B%5D",
            None,
        )
        .await;
        assert_eq!(body_text(empty).await, "command is not present");
        let no_task = send(
            &router,
            "GET",
            "/v1/client/allocation/a1/exec?command=%5B%22ls%22%5D",
            None,
        )
        .await;
        assert_eq!(body_text(no_task).await, "must provide task name");
        let unknown = send(
            &router,
            "GET",
            "/v1/client/allocation/zz/exec?task=t&command=%5B%22ls%22%5D",
            None,
        )
        .await;
        // Not a websocket request: refused as such, whatever the allocation.
        assert_eq!(unknown.status(), StatusCode::BAD_REQUEST);
        let wrong_method = send(&router, "POST", "/v1/client/allocation/zz/exec", None).await;
        assert_eq!(wrong_method.status(), StatusCode::METHOD_NOT_ALLOWED);
    }

    /// Nomad's api suite execs in an allocation that does not exist and expects the error Go's
    /// client reads from the stream's close frame, not a failed handshake.
    #[tokio::test]
    async fn exec_of_an_unknown_allocation_completes_the_handshake_and_closes_with_unknown_allocation()
     {
        let (_backend, address) = serve().await;
        let command = "%5B%22ls%22%5D";
        let url = format!(
            "ws://{address}/v1/client/allocation/zz/exec?task=t&command={command}&ws_handshake=true"
        );
        let stream = tokio::net::TcpStream::connect(&address).await.unwrap();
        let (mut socket, _) = tokio_tungstenite::client_async(url, stream)
            .await
            .expect("the websocket handshake completes");
        socket
            .send(WsMessage::Text(r#"{"version":1,"auth_token":""}"#.into()))
            .await
            .unwrap();
        let message = tokio::time::timeout(Duration::from_secs(20), socket.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        match message {
            WsMessage::Close(Some(frame)) => {
                assert_eq!(u16::from(frame.code), 1008);
                assert_eq!(frame.reason.as_str(), "Unknown allocation \"zz\"");
            }
            other => panic!("expected a close frame, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn an_unknown_task_is_refused_with_a_policy_close() {
        let (_backend, address) = serve().await;
        let command = "%5B%22ls%22%5D";
        let url =
            format!("ws://{address}/v1/client/allocation/a1/exec?task=nope&command={command}");
        let stream = tokio::net::TcpStream::connect(&address).await.unwrap();
        let (mut socket, _) = tokio_tungstenite::client_async(url, stream).await.unwrap();
        let message = tokio::time::timeout(Duration::from_secs(20), socket.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        match message {
            WsMessage::Close(Some(frame)) => {
                assert_eq!(u16::from(frame.code), 1008);
                assert!(frame.reason.as_str().contains("nope"));
            }
            other => panic!("expected a close frame, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn following_a_file_of_a_finished_allocation_ends() {
    let (backend, router) = setup();
    let dir = tempfile::tempdir().unwrap();
    alloc_with_logs(&backend, dir.path());
    std::fs::write(dir.path().join("alloc/logs/server.stdout.0"), "done\n").unwrap();
    let mut allocation = backend.allocation("a1").unwrap().unwrap();
    allocation.client_status = "complete".into();
    backend.put_allocation(allocation);
    let response = send(
        &router,
        "GET",
        "/v1/client/fs/stream/a1?path=alloc/logs/server.stdout.0",
        None,
    )
    .await;
    let body = tokio::time::timeout(Duration::from_secs(10), body_text(response))
        .await
        .expect("a followed file of a finished allocation should end");
    assert_eq!(data_of(&frames_of(&body)), "done\n");
}

// The client↔server calls of remote client nodes (`crate::client_rpc`).

#[tokio::test]
async fn a_node_registers_beats_and_an_unknown_node_gets_404() {
    let (backend, router) = setup();
    let node = drover_structs::Node {
        id: "node-7".into(),
        secret_id: "secret".into(),
        name: "worker-7".into(),
        datacenter: "dc1".into(),
        ..drover_structs::Node::default()
    };
    let response = send(
        &router,
        "PUT",
        "/v1/internal/node/register",
        Some(json!({"Node": node})),
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    let index: u64 = header(&response, "X-Nomad-Index").parse().unwrap();
    let answer = body_json(response).await;
    let ttl = u64::try_from(crate::memory::MEMORY_HEARTBEAT_TTL.as_nanos()).unwrap();
    assert_eq!(answer["HeartbeatTTL"], json!(ttl));
    assert_eq!(answer["Index"], json!(index));
    let stored = backend.node("node-7").unwrap().expect("the node is stored");
    assert_eq!(
        (stored.name.as_str(), stored.status.as_str()),
        ("worker-7", "ready")
    );
    assert_eq!(
        stored.secret_id, "secret",
        "the secret ID travels on registration"
    );
    let listed = body_json(send(&router, "GET", "/v1/nodes", None).await).await;
    assert_eq!(listed[0]["Name"], "worker-7");

    let beat = send(
        &router,
        "PUT",
        "/v1/internal/node/node-7/update-status",
        Some(json!({"Status": "ready"})),
    )
    .await;
    assert_eq!(beat.status(), StatusCode::OK);
    assert_eq!(body_json(beat).await["HeartbeatTTL"], json!(ttl));

    let unknown = send(
        &router,
        "PUT",
        "/v1/internal/node/node-unknown/update-status",
        Some(json!({"Status": "ready"})),
    )
    .await;
    assert_eq!(unknown.status(), StatusCode::NOT_FOUND);
    assert_eq!(body_text(unknown).await, "node not found");
}

#[tokio::test]
async fn bad_node_and_update_bodies_get_400() {
    let (_backend, router) = setup();
    let not_json = Request::builder()
        .method("PUT")
        .uri("/v1/internal/node/register")
        .body(Body::from("{not json"))
        .unwrap();
    let response = router.clone().oneshot(not_json).await.unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert!(
        body_text(response)
            .await
            .starts_with("Request decode failed")
    );

    let no_id = send(
        &router,
        "PUT",
        "/v1/internal/node/register",
        Some(json!({"Node": {"Name": "nameless"}})),
    )
    .await;
    assert_eq!(no_id.status(), StatusCode::BAD_REQUEST);
    assert_eq!(
        body_text(no_id).await,
        "missing node ID for client registration"
    );

    let empty = send(
        &router,
        "PUT",
        "/v1/internal/node/update-alloc",
        Some(json!({"Alloc": []})),
    )
    .await;
    assert_eq!(empty.status(), StatusCode::BAD_REQUEST);
    let wrong_type = send(
        &router,
        "PUT",
        "/v1/internal/node/update-alloc",
        Some(json!({"Alloc": [{"ID": "a", "TaskStates": 5}]})),
    )
    .await;
    assert_eq!(wrong_type.status(), StatusCode::BAD_REQUEST);
}

#[tokio::test(start_paused = true)]
async fn client_allocs_block_until_the_server_changes_them_and_updates_merge_client_fields() {
    let (backend, router) = setup();
    let job = backend.put_job(sample_job("web"));
    let mut allocation = sample_allocation(&backend, "alloc-1", &job);
    // Below the table's index, as the server's own writes leave it.
    allocation.alloc_modify_index = 1;
    allocation.client_status = "pending".into();
    backend.put_allocation(allocation.clone());

    let first = send(
        &router,
        "GET",
        "/v1/internal/node/node-1/client-allocs",
        None,
    )
    .await;
    assert_eq!(first.status(), StatusCode::OK);
    let first = body_json(first).await;
    assert_eq!(first["Allocs"], json!({"alloc-1": 1}));
    let index = first["Index"].as_u64().unwrap();

    // A blocking query past the current index waits out its time when nothing changes.
    let started = tokio::time::Instant::now();
    let quiet = send(
        &router,
        "GET",
        &format!("/v1/internal/node/node-1/client-allocs?index={index}&wait=2s"),
        None,
    )
    .await;
    assert!(started.elapsed() >= Duration::from_secs(2));
    assert_eq!(body_json(quiet).await["Index"], json!(index));

    // A server-side change (a new AllocModifyIndex) wakes the waiting query at once.
    let waiting_router = router.clone();
    let uri = format!("/v1/internal/node/node-1/client-allocs?index={index}&wait=60s");
    let started = tokio::time::Instant::now();
    let waiter = tokio::spawn(async move { send(&waiting_router, "GET", &uri, None).await });
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert!(!waiter.is_finished(), "answered before anything changed");
    // Writes to other nodes' allocations, and this node's own status reports (which move no
    // AllocModifyIndex), leave the query waiting.
    let mut elsewhere = allocation.clone();
    elsewhere.id = "alloc-other".into();
    elsewhere.node_id = "node-2".into();
    elsewhere.alloc_modify_index = 12;
    backend.put_allocation(elsewhere);
    let mut reported = allocation.clone();
    reported.client_status = "running".into();
    backend.put_allocation(reported);
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert!(
        !waiter.is_finished(),
        "answered for a write that changed nothing of this node's"
    );
    allocation.alloc_modify_index = 9;
    backend.put_allocation(allocation.clone());
    let woken = body_json(waiter.await.unwrap()).await;
    assert!(started.elapsed() < Duration::from_secs(60));
    assert_eq!(woken["Allocs"], json!({"alloc-1": 9}));
    let index = woken["Index"].as_u64().unwrap();

    // A status report from the client: only the client's fields are merged.
    let update = send(
        &router,
        "PUT",
        "/v1/internal/node/update-alloc",
        Some(json!({"Alloc": [{
            "ID": "alloc-1",
            "ClientStatus": "running",
            "ClientDescription": "Tasks are running",
            "TaskStates": {"server": {"State": "running"}}
        }]})),
    )
    .await;
    assert_eq!(update.status(), StatusCode::OK);
    assert!(body_json(update).await["Index"].as_u64().unwrap() > index);
    let stored = backend.allocation("alloc-1").unwrap().unwrap();
    assert_eq!(stored.client_status, "running");
    assert_eq!(stored.task_states["server"].state, "running");
    assert_eq!(
        stored.desired_status, "run",
        "the server's fields are left alone"
    );
    assert_eq!(stored.job_id, "web");

    let fetched = send(
        &router,
        "PUT",
        "/v1/internal/allocs/get",
        Some(json!({"AllocIDs": ["alloc-1", "alloc-gone"]})),
    )
    .await;
    assert_eq!(fetched.status(), StatusCode::OK);
    let fetched = body_json(fetched).await;
    let allocs = fetched["Allocs"].as_array().unwrap();
    assert_eq!(allocs.len(), 1, "unknown IDs are left out");
    assert_eq!(allocs[0]["ID"], "alloc-1");
    assert_eq!(
        allocs[0]["Job"]["ID"], "web",
        "the full allocation, job included"
    );
}

/// What the Nomad 1.1.2 CLI sends for `nomad job run` of a jobspec without `count`: an
/// uncanonicalized job, `null` for every default.
const NOMAD_CLI_JOB_RUN_NO_COUNT: &str =
    include_str!("../testdata/nomad-1.1.2/job-run-no-count.json");
const NOMAD_CLI_JOB_VALIDATE_NO_COUNT: &str =
    include_str!("../testdata/nomad-1.1.2/job-validate-no-count.json");

/// Regression: the 1.1 CLI's `"Count": null` registered a job of count 0 that never ran. The
/// expected values are those Nomad 1.1.2's agent stores for the same body.
#[tokio::test]
async fn a_job_from_the_nomad_cli_with_nulls_for_defaults_gets_nomads_defaults() {
    for (method, path) in [("PUT", "/v1/jobs"), ("POST", "/v1/job/nocount")] {
        let (_backend, router) = setup();
        let body: Value = serde_json::from_str(NOMAD_CLI_JOB_RUN_NO_COUNT).unwrap();
        let response = send(&router, method, path, Some(body)).await;
        assert_eq!(
            response.status(),
            StatusCode::OK,
            "{method} {path}: {}",
            body_text(response).await
        );
        let job = body_json(send(&router, "GET", "/v1/job/nocount", None).await).await;
        assert_eq!(job["Type"], "service");
        assert_eq!(job["Priority"], 50);
        assert_eq!(job["Namespace"], "default");
        assert_eq!(job["Region"], "global");
        assert_eq!(
            (&job["Update"]["Stagger"], &job["Update"]["MaxParallel"]),
            (&json!(30_000_000_000_i64), &json!(1))
        );
        let group = &job["TaskGroups"][0];
        assert_eq!(group["Count"], 1, "{method} {path}");
        assert_eq!(
            group["RestartPolicy"],
            json!({"Attempts": 2, "Delay": 15_000_000_000_i64,
                "Interval": 1_800_000_000_000_i64, "Mode": "fail", "RenderTemplates": false})
        );
        assert_eq!(
            group["ReschedulePolicy"],
            json!({"Attempts": 0, "Delay": 30_000_000_000_i64, "DelayFunction": "exponential",
                "Interval": 0, "MaxDelay": 3_600_000_000_000_i64, "Unlimited": true})
        );
        assert_eq!(group["EphemeralDisk"]["SizeMB"], 300);
        assert_eq!(group["Update"]["MaxParallel"], 1);
        assert_eq!(group["Update"]["HealthCheck"], "checks");
        assert_eq!(group["Update"]["MinHealthyTime"], 10_000_000_000_i64);
        assert_eq!(group["Update"]["HealthyDeadline"], 300_000_000_000_i64);
        assert_eq!(group["Update"]["ProgressDeadline"], 600_000_000_000_i64);
        assert_eq!(
            group["Migrate"],
            json!({"HealthCheck": "checks", "HealthyDeadline": 300_000_000_000_i64,
                "MaxParallel": 1, "MinHealthyTime": 10_000_000_000_i64})
        );
        let task = &group["Tasks"][0];
        assert_eq!(task["Resources"]["CPU"], 100);
        assert_eq!(task["Resources"]["MemoryMB"], 300);
        assert_eq!(task["KillTimeout"], 5_000_000_000_i64);
        assert_eq!(task["LogConfig"]["MaxFiles"], 10);
        assert_eq!(task["LogConfig"]["MaxFileSizeMB"], 10);
        assert_eq!(task["RestartPolicy"], group["RestartPolicy"]);
    }
}

#[tokio::test]
async fn the_nomad_cli_validate_body_with_nulls_is_valid() {
    let (_backend, router) = setup();
    let body: Value = serde_json::from_str(NOMAD_CLI_JOB_VALIDATE_NO_COUNT).unwrap();
    let answer = body_json(send(&router, "PUT", "/v1/validate/job", Some(body)).await).await;
    assert_eq!(answer["ValidationErrors"], json!([]), "{answer}");
    assert_eq!(answer["Error"], "");
}

#[tokio::test]
async fn versions_with_diffs_compare_each_version_with_the_one_before() {
    let (backend, router) = setup();
    let first = sample_job("web");
    backend.put_job(first.clone());
    let mut second = first;
    second.task_groups[0].count = 3;
    backend.put_job(second);

    let plain = body_json(send(&router, "GET", "/v1/job/web/versions", None).await).await;
    assert_eq!(plain["Diffs"], Value::Null);

    let answer =
        body_json(send(&router, "GET", "/v1/job/web/versions?diffs=true", None).await).await;
    assert_eq!(answer["Versions"].as_array().unwrap().len(), 2);
    let diffs = answer["Diffs"].as_array().unwrap();
    assert_eq!(diffs.len(), 1);
    assert_eq!(diffs[0]["Type"], "Edited");
    assert_eq!(diffs[0]["ID"], "web");
    let count = &diffs[0]["TaskGroups"][0]["Fields"][0];
    assert_eq!(
        (&count["Name"], &count["Old"], &count["New"]),
        (&json!("Count"), &json!("1"), &json!("3"))
    );
    // Diffs of versions carry no planner annotations.
    assert_eq!(count["Annotations"], Value::Null);
    assert_eq!(diffs[0]["TaskGroups"][0]["Updates"], Value::Null);
}

#[tokio::test]
async fn plan_is_not_served_by_an_agent_without_a_server() {
    let (_backend, router) = setup();
    let response = send(
        &router,
        "POST",
        "/v1/job/web/plan",
        Some(json!({"Job": sample_job("web"), "Diff": true})),
    )
    .await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    let mismatched = send(
        &router,
        "POST",
        "/v1/job/other/plan",
        Some(json!({"Job": sample_job("web")})),
    )
    .await;
    assert_eq!(mismatched.status(), StatusCode::BAD_REQUEST);
    assert_eq!(body_text(mismatched).await, "Job ID does not match");
    let get = send(&router, "GET", "/v1/job/web/plan", None).await;
    assert_eq!(get.status(), StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn prefix_search_answers_nomads_matches_and_truncations() {
    let (backend, router) = setup();
    let job = backend.put_job(sample_job("8e-web"));
    sample_allocation(&backend, "8e3a0000-1111-2222-3333-444455556666", &job);
    sample_allocation(&backend, "8e3b0000-1111-2222-3333-444455556666", &job);
    let all = body_json(
        send(
            &router,
            "PUT",
            "/v1/search",
            Some(json!({"Prefix": "8e3", "Context": "all"})),
        )
        .await,
    )
    .await;
    assert_eq!(
        all["Matches"]["allocs"],
        json!([
            "8e3a0000-1111-2222-3333-444455556666",
            "8e3b0000-1111-2222-3333-444455556666"
        ])
    );
    assert_eq!(all["Matches"]["jobs"], Value::Null);
    assert_eq!(all["Matches"]["plugins"], Value::Null);
    assert_eq!(all["Truncations"]["allocs"], false);
    assert!(all["Index"].as_u64().unwrap() > 0);
    let jobs = body_json(
        send(
            &router,
            "POST",
            "/v1/search",
            Some(json!({"Prefix": "8e", "Context": "jobs"})),
        )
        .await,
    )
    .await;
    assert_eq!(jobs["Matches"], json!({"jobs": ["8e-web"]}));
    let bad = send(
        &router,
        "PUT",
        "/v1/search",
        Some(json!({"Prefix": "8e", "Context": "nope"})),
    )
    .await;
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
    assert!(
        body_text(bad)
            .await
            .starts_with("context must be one of [allocs jobs")
    );
    let get = send(&router, "GET", "/v1/search", None).await;
    assert_eq!(get.status(), StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn list_filters_are_evaluated_per_object_and_malformed_ones_are_400s() {
    let (backend, router) = setup();
    let web = backend.put_job(sample_job("web"));
    let api = backend.put_job(sample_job("api"));
    sample_allocation(&backend, "aaaa0000-1111-2222-3333-444455556666", &web);
    sample_allocation(&backend, "bbbb0000-1111-2222-3333-444455556666", &api);
    let uri = "/v1/allocations?filter=ClientStatus%20%3D%3D%20%22running%22%20and%20JobID%20matches%20%22%5Eweb%22";
    let list = body_json(send(&router, "GET", uri, None).await).await;
    assert_eq!(list.as_array().map(Vec::len), Some(1));
    assert_eq!(list[0]["JobID"], "web");
    let jobs =
        body_json(send(&router, "GET", "/v1/jobs?filter=ID%20%21%3D%20web", None).await).await;
    assert_eq!(jobs.as_array().map(Vec::len), Some(1));
    assert_eq!(jobs[0]["ID"], "api");
    let page = send(&router, "GET", "/v1/jobs?per_page=1", None).await;
    assert_eq!(page.headers()["X-Nomad-NextToken"], "default.web");
    assert_eq!(body_json(page).await[0]["ID"], "api");
    for path in [
        "/v1/jobs",
        "/v1/allocations",
        "/v1/evaluations",
        "/v1/nodes",
        "/v1/deployments",
    ] {
        let bad = send(
            &router,
            "GET",
            &format!("{path}?filter=ID%20%3D%3D%20%22x"),
            None,
        )
        .await;
        assert_eq!(bad.status(), StatusCode::BAD_REQUEST, "{path}");
        assert_eq!(
            body_text(bad).await,
            "failed to create result paginator: failed to read filter expression: 1:9 (8): rule string: Unterminated string literal",
            "{path}"
        );
    }
    let mixed = send(
        &router,
        "GET",
        "/v1/evaluations?job=web&filter=ID%20%3D%3D%20x",
        None,
    )
    .await;
    assert_eq!(mixed.status(), StatusCode::BAD_REQUEST);
    assert_eq!(
        body_text(mixed).await,
        "Filter expression cannot be used with other filter parameters"
    );
}

fn sample_deployment(id: &str, job: &Job) -> drover_structs::Deployment {
    let mut deployment = drover_structs::Deployment::new_for_job(id.to_string(), job, 50);
    deployment.task_groups.insert(
        "web".to_string(),
        drover_structs::DeploymentState {
            desired_total: 2,
            ..Default::default()
        },
    );
    deployment
}

#[tokio::test]
async fn deployments_are_listed_read_and_found_by_job_in_nomads_shape() {
    let (backend, router) = setup();
    let web = backend.put_job(sample_job("web"));
    backend.put_deployment(sample_deployment(
        "aaaa0000-1111-2222-3333-444455556666",
        &web,
    ));
    backend.put_deployment(sample_deployment(
        "bbbb0000-1111-2222-3333-444455556666",
        &web,
    ));
    let mut older = sample_deployment("cccc0000-1111-2222-3333-444455556666", &web);
    older.job_create_index = web.create_index + 100;
    backend.put_deployment(older);
    let mut alloc = sample_allocation(&backend, "dddd0000-1111-2222-3333-444455556666", &web);
    alloc.deployment_id = "aaaa0000-1111-2222-3333-444455556666".to_string();
    backend.put_allocation(alloc);
    sample_allocation(&backend, "eeee0000-1111-2222-3333-444455556666", &web);

    let list = body_json(send(&router, "GET", "/v1/deployments", None).await).await;
    let ids: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|deployment| deployment["ID"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 3);
    assert_eq!(list[0]["TaskGroups"]["web"]["DesiredTotal"], 2);
    assert_eq!(list[0]["Status"], "running");
    assert_eq!(list[0]["StatusDescription"], "Deployment is running");
    assert_eq!(
        list[0]["TaskGroups"]["web"]["RequireProgressBy"],
        "0001-01-01T00:00:00Z"
    );
    let page = send(&router, "GET", "/v1/deployments?per_page=1", None).await;
    assert!(!header(&page, "X-Nomad-NextToken").is_empty());
    let prefixed = body_json(send(&router, "GET", "/v1/deployments?prefix=bb", None).await).await;
    assert_eq!(prefixed.as_array().map(Vec::len), Some(1));

    let one = send(
        &router,
        "GET",
        "/v1/deployment/aaaa0000-1111-2222-3333-444455556666",
        None,
    )
    .await;
    assert_eq!(one.status(), StatusCode::OK);
    assert_eq!(body_json(one).await["JobID"], "web");
    let missing = send(&router, "GET", "/v1/deployment/ffff", None).await;
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    let allocs = body_json(
        send(
            &router,
            "GET",
            "/v1/deployment/allocations/aaaa0000-1111-2222-3333-444455556666",
            None,
        )
        .await,
    )
    .await;
    assert_eq!(allocs.as_array().map(Vec::len), Some(1));
    assert_eq!(allocs[0]["ID"], "dddd0000-1111-2222-3333-444455556666");

    // The job's deployments are those of its current incarnation unless `all` is asked.
    let of_job = body_json(send(&router, "GET", "/v1/job/web/deployments", None).await).await;
    assert_eq!(of_job.as_array().map(Vec::len), Some(2));
    assert_eq!(of_job[0]["ID"], "bbbb0000-1111-2222-3333-444455556666");
    let all = body_json(send(&router, "GET", "/v1/job/web/deployments?all=true", None).await).await;
    assert_eq!(all.as_array().map(Vec::len), Some(3));
    let latest = body_json(send(&router, "GET", "/v1/job/web/deployment", None).await).await;
    assert_eq!(latest["ID"], "bbbb0000-1111-2222-3333-444455556666");
    let none = body_text(send(&router, "GET", "/v1/job/nope/deployment", None).await).await;
    assert_eq!(none, "null");
    let none = body_text(send(&router, "GET", "/v1/job/nope/deployments", None).await).await;
    assert_eq!(none, "[]");

    // Deployment writes check the body's ID as Nomad does; a backend without a server has
    // no such endpoint.
    let path = "/v1/deployment/promote/aaaa0000-1111-2222-3333-444455556666";
    for (body, status) in [
        (json!({"All": true}), StatusCode::BAD_REQUEST),
        (
            json!({"All": true, "DeploymentID": "other"}),
            StatusCode::BAD_REQUEST,
        ),
        (
            json!({"All": true, "DeploymentID": "aaaa0000-1111-2222-3333-444455556666"}),
            StatusCode::NOT_FOUND,
        ),
    ] {
        let promote = send(&router, "PUT", path, Some(body.clone())).await;
        assert_eq!(promote.status(), status, "{body}");
    }

    let search = body_json(
        send(
            &router,
            "PUT",
            "/v1/search",
            Some(json!({"Prefix": "aaaa", "Context": "deployment"})),
        )
        .await,
    )
    .await;
    assert_eq!(
        search["Matches"]["deployment"],
        json!(["aaaa0000-1111-2222-3333-444455556666"])
    );
}

/// Nomad's api suite scales a job with an empty ID (`POST /v1/job//scale`) and expects the 404
/// Go's router leads to: a 301 to the cleaned `/v1/job/scale`, which Go's client follows as a
/// `GET` of the job named `scale`.
#[tokio::test]
async fn a_path_with_an_empty_segment_is_redirected_to_the_clean_path_as_gos_router_does() {
    let (_backend, router) = setup();
    let router = router.layer(axum::middleware::from_fn(
        crate::clean_path::redirect_unclean_paths,
    ));
    let scale = send(
        &router,
        "POST",
        "/v1/job//scale?namespace=default",
        Some(json!({"Count": 1})),
    )
    .await;
    assert_eq!(scale.status(), StatusCode::MOVED_PERMANENTLY);
    assert_eq!(
        header(&scale, "location"),
        "/v1/job/scale?namespace=default"
    );
    let followed = send(&router, "GET", "/v1/job/scale?namespace=default", None).await;
    assert_eq!(followed.status(), StatusCode::NOT_FOUND);
    assert_eq!(body_text(followed).await, "job not found");
    // A canonical path is not touched.
    let jobs = send(&router, "GET", "/v1/jobs", None).await;
    assert_eq!(jobs.status(), StatusCode::OK);
}

#[tokio::test(start_paused = true)]
async fn a_single_object_read_answers_its_own_modify_index_and_blocks_on_it() {
    let (backend, router) = setup();
    let first = backend.put_job(sample_job("first"));
    backend.put_job(sample_job("second"));
    let table_index = backend.table_index(&[crate::Table::Jobs]);
    assert!(first.modify_index < table_index);
    let response = send(&router, "GET", "/v1/job/first", None).await;
    assert_eq!(response.status(), StatusCode::OK);
    // Nomad's `GetJob`: the job's own ModifyIndex, not the jobs table's.
    assert_eq!(
        header(&response, "X-Nomad-Index"),
        first.modify_index.to_string()
    );
    // An absent job: a 404 with the table's index, for a reader waiting for it to appear.
    let missing = send(&router, "GET", "/v1/job/absent", None).await;
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    assert_eq!(header(&missing, "X-Nomad-Index"), table_index.to_string());
    assert_eq!(body_text(missing).await, "job not found");

    // Blocking on the index it was sent: another job's write does not answer it (nor make it
    // spin), a write of this job does.
    let waiting_router = router.clone();
    let uri = format!("/v1/job/first?index={}&wait=5m", first.modify_index);
    let waiter = tokio::spawn(async move { send(&waiting_router, "GET", &uri, None).await });
    tokio::time::sleep(Duration::from_secs(10)).await;
    backend.put_job(sample_job("third"));
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(
        !waiter.is_finished(),
        "another job's write answered the read"
    );
    let updated = backend.put_job(sample_job("first"));
    let response = waiter.await.unwrap();
    assert_eq!(
        header(&response, "X-Nomad-Index"),
        updated.modify_index.to_string()
    );

    // The same for a job's summary, an allocation, an evaluation, a node and a deployment.
    let job = backend.put_job(sample_job("web"));
    sample_allocation(&backend, "alloc-1", &job);
    backend.put_evaluation(drover_structs::Evaluation {
        id: "eval-1".into(),
        namespace: "default".into(),
        job_id: "web".into(),
        ..Default::default()
    });
    backend.put_node(drover_structs::Node {
        id: "node-1".into(),
        ..Default::default()
    });
    backend.put_deployment(drover_structs::Deployment {
        id: "deploy-1".into(),
        namespace: "default".into(),
        job_id: "web".into(),
        ..Default::default()
    });
    for (path, table) in [
        ("/v1/job/web/summary", crate::Table::JobSummaries),
        ("/v1/allocation/alloc-1", crate::Table::Allocs),
        ("/v1/evaluation/eval-1", crate::Table::Evals),
        ("/v1/node/node-1", crate::Table::Nodes),
        ("/v1/deployment/deploy-1", crate::Table::Deployments),
    ] {
        let response = send(&router, "GET", path, None).await;
        assert_eq!(response.status(), StatusCode::OK, "{path}");
        let index: u64 = header(&response, "X-Nomad-Index").parse().unwrap();
        let object = body_json(response).await;
        assert_eq!(object["ModifyIndex"], json!(index), "{path}");
        // A later write to the same table leaves the object's index where it was.
        match table {
            crate::Table::JobSummaries => {
                backend.put_job(sample_job("another"));
            }
            crate::Table::Allocs => {
                sample_allocation(&backend, "alloc-2", &job);
            }
            crate::Table::Evals => backend.put_evaluation(drover_structs::Evaluation {
                id: "eval-2".into(),
                namespace: "default".into(),
                ..Default::default()
            }),
            crate::Table::Nodes => backend.put_node(drover_structs::Node {
                id: "node-2".into(),
                ..Default::default()
            }),
            _ => backend.put_deployment(drover_structs::Deployment {
                id: "deploy-2".into(),
                namespace: "default".into(),
                ..Default::default()
            }),
        }
        assert!(backend.table_index(&[table]) > index, "{path}");
        let again = send(&router, "GET", path, None).await;
        assert_eq!(header(&again, "X-Nomad-Index"), index.to_string(), "{path}");
    }
    // An absent job's summary: Nomad's 404 with the summaries table's index.
    let missing = send(&router, "GET", "/v1/job/absent/summary", None).await;
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    assert_eq!(
        header(&missing, "X-Nomad-Index"),
        backend
            .table_index(&[crate::Table::JobSummaries])
            .to_string()
    );
}
