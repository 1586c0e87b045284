//! The service catalog's HTTP routes: reads on the real state store (Nomad's JSON shapes,
//! blocking queries, `tag` and `choose`, 404s), writes and internal routes on the in-memory
//! backend (methods, status codes, bodies).

#![allow(clippy::expect_used, clippy::unwrap_used)] // a failed expectation is a failed test

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, Response, StatusCode};
use drover_state::StateStore;
use drover_structs::{Allocation, Job, ServiceRegistration};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::StateReads;
use crate::backend::Composed;
use crate::memory::MemoryBackend;

const NOW: i64 = 1_700_000_000_000_000_000;

async fn send(
    router: &axum::Router,
    method: &str,
    uri: &str,
    body: Option<Value>,
) -> Response<Body> {
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .body(body.map_or_else(Body::empty, |value| Body::from(value.to_string())))
        .unwrap();
    router.clone().oneshot(request).await.unwrap()
}

async fn text(response: Response<Body>) -> String {
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(bytes.to_vec()).unwrap()
}

fn index_of(response: &Response<Body>) -> u64 {
    response.headers()["X-Nomad-Index"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}

async fn get(router: &axum::Router, uri: &str) -> (StatusCode, u64, Value) {
    let response = send(router, "GET", uri, None).await;
    let status = response.status();
    let index = response
        .headers()
        .get("X-Nomad-Index")
        .map_or(0, |value| value.to_str().unwrap().parse().unwrap());
    let body = text(response).await;
    let value = serde_json::from_str(&body).unwrap_or(Value::String(body));
    (status, index, value)
}

fn job(id: &str, namespace: &str) -> Job {
    let mut job: Job = serde_json::from_value(json!({
        "ID": id,
        "Namespace": namespace,
        "Datacenters": ["dc1"],
        "TaskGroups": [{"Name": "g", "Tasks": [{"Name": "t", "Driver": "raw_exec",
            "Config": {"command": "/bin/true"}}]}]
    }))
    .unwrap();
    job.canonicalize();
    job
}

fn alloc(id: &str, job_id: &str, namespace: &str) -> Allocation {
    Allocation {
        id: id.to_owned(),
        namespace: namespace.to_owned(),
        job_id: job_id.to_owned(),
        node_id: "node-1".to_owned(),
        task_group: "g".to_owned(),
        desired_status: "run".to_owned(),
        ..Allocation::default()
    }
}

fn registration(
    id: &str,
    name: &str,
    namespace: &str,
    alloc_id: &str,
    job_id: &str,
    tags: &[&str],
    port: i64,
) -> ServiceRegistration {
    ServiceRegistration {
        id: id.to_owned(),
        service_name: name.to_owned(),
        namespace: namespace.to_owned(),
        node_id: "node-1".to_owned(),
        datacenter: "dc1".to_owned(),
        job_id: job_id.to_owned(),
        alloc_id: alloc_id.to_owned(),
        tags: tags.iter().map(|tag| (*tag).to_owned()).collect(),
        address: "10.0.0.7".to_owned(),
        port,
        ..ServiceRegistration::default()
    }
}

/// A real store with job `web` (allocs a1, a2; service `web-frontend` twice, `metrics` once),
/// job `db` in namespace `prod` (alloc p1, service `db`), job `idle` (alloc i1, no services).
async fn catalog() -> (StateStore, axum::Router) {
    let store = StateStore::in_memory().await.unwrap();
    store.upsert_job(job("web", "default"), NOW).await.unwrap();
    store.upsert_job(job("db", "prod"), NOW).await.unwrap();
    store.upsert_job(job("idle", "default"), NOW).await.unwrap();
    store
        .upsert_allocs(
            vec![
                alloc("a1", "web", "default"),
                alloc("a2", "web", "default"),
                alloc("p1", "db", "prod"),
                alloc("i1", "idle", "default"),
            ],
            NOW,
        )
        .await
        .unwrap();
    store
        .upsert_service_registrations(vec![
            registration(
                "s-a1",
                "web-frontend",
                "default",
                "a1",
                "web",
                &["http", "v1"],
                21001,
            ),
            registration(
                "s-a2",
                "web-frontend",
                "default",
                "a2",
                "web",
                &["http", "v2"],
                21002,
            ),
            registration("m-a1", "metrics", "default", "a1", "web", &[], 9100),
            registration("s-p1", "db", "prod", "p1", "db", &["primary"], 5432),
        ])
        .await
        .unwrap();
    let router = crate::app(Arc::new(Composed {
        reads: store.clone(),
        operations: MemoryBackend::dev(),
    }));
    (store, router)
}

#[tokio::test]
async fn services_list_is_grouped_by_namespace_and_name_with_the_union_of_tags() {
    let (store, router) = catalog().await;
    let (status, index, body) = get(&router, "/v1/services").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        index,
        store
            .indexes()
            .table(drover_state::Table::ServiceRegistrations)
    );
    assert_eq!(
        body,
        json!([{"Namespace": "default", "Services": [
            {"ServiceName": "metrics", "Tags": []},
            {"ServiceName": "web-frontend", "Tags": ["http", "v1", "v2"]}
        ]}])
    );
    let (_, _, prod) = get(&router, "/v1/services?namespace=prod").await;
    assert_eq!(
        prod,
        json!([{"Namespace": "prod", "Services": [{"ServiceName": "db", "Tags": ["primary"]}]}])
    );
    let (_, _, all) = get(&router, "/v1/services?namespace=*").await;
    let namespaces: Vec<&str> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|stub| stub["Namespace"].as_str().unwrap())
        .collect();
    assert_eq!(namespaces, ["default", "prod"]);
    let (status, _, none) = get(&router, "/v1/services?namespace=nothing-here").await;
    assert_eq!((status, none), (StatusCode::OK, json!([])));
}

#[tokio::test]
async fn services_read_answers_nomads_registration_shape() {
    let (store, router) = catalog().await;
    let created = store.service_registration("default", "s-a1").unwrap();
    let (status, _, body) = get(&router, "/v1/service/web-frontend").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body[0],
        json!({
            "ID": "s-a1",
            "ServiceName": "web-frontend",
            "Namespace": "default",
            "NodeID": "node-1",
            "Datacenter": "dc1",
            "JobID": "web",
            "AllocID": "a1",
            "Tags": ["http", "v1"],
            "Address": "10.0.0.7",
            "Port": 21001,
            "CreateIndex": created.create_index,
            "ModifyIndex": created.modify_index
        })
    );
    assert_eq!(body.as_array().unwrap().len(), 2);
    // Another namespace's service of that name is not there; an unknown name is an empty list.
    let (_, _, db) = get(&router, "/v1/service/db").await;
    assert_eq!(db, json!([]));
    let (_, _, db) = get(&router, "/v1/service/db?namespace=prod").await;
    assert_eq!(db[0]["ID"], "s-p1");
}

#[tokio::test]
async fn services_read_filters_by_every_tag_given() {
    let (_store, router) = catalog().await;
    let ids = |body: &Value| -> Vec<String> {
        body.as_array()
            .unwrap()
            .iter()
            .map(|service| service["ID"].as_str().unwrap().to_owned())
            .collect()
    };
    let (_, _, body) = get(&router, "/v1/service/web-frontend?tag=v2").await;
    assert_eq!(ids(&body), ["s-a2"]);
    let (_, _, body) = get(&router, "/v1/service/web-frontend?tag=http").await;
    assert_eq!(ids(&body), ["s-a1", "s-a2"]);
    let (_, _, body) = get(&router, "/v1/service/web-frontend?tag=http&tag=v1").await;
    assert_eq!(ids(&body), ["s-a1"]);
    let (_, _, body) = get(&router, "/v1/service/web-frontend?tag=v1&tag=v2").await;
    assert_eq!(body, json!([]));
}

#[tokio::test]
async fn services_read_chooses_by_rendezvous_hash_and_refuses_a_malformed_choose() {
    let (store, router) = catalog().await;
    let key = "caller-alloc";
    let mut expected: Vec<(String, String)> = store
        .service_registrations_by_name("default", "web-frontend")
        .iter()
        .map(|service| {
            (
                drover_structs::service_catalog::rendezvous_hash(service, key),
                service.id.clone(),
            )
        })
        .collect();
    expected.sort();
    let (status, _, body) = get(&router, &format!("/v1/service/web-frontend?choose=1|{key}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body.as_array().unwrap().len(), 1);
    assert_eq!(body[0]["ID"], expected[0].1);
    let (_, _, again) = get(&router, &format!("/v1/service/web-frontend?choose=1|{key}")).await;
    assert_eq!(again, body);
    let (_, _, both) = get(&router, &format!("/v1/service/web-frontend?choose=5|{key}")).await;
    let order: Vec<&str> = both
        .as_array()
        .unwrap()
        .iter()
        .map(|service| service["ID"].as_str().unwrap())
        .collect();
    assert_eq!(order, [expected[0].1.as_str(), expected[1].1.as_str()]);

    for bad in ["2", "x|key", "2|"] {
        let (status, _, message) =
            get(&router, &format!("/v1/service/web-frontend?choose={bad}")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
        assert_eq!(
            message,
            "failed to choose services: choose parameter is not formatted correctly"
        );
    }
}

#[tokio::test]
async fn services_read_blocks_until_the_catalog_changes() {
    let (store, router) = catalog().await;
    let (_, index, _) = get(&router, "/v1/service/web-frontend").await;
    let waiting = router.clone();
    let uri = format!("/v1/service/web-frontend?index={index}&wait=60s");
    let waiter = tokio::spawn(async move { get(&waiting, &uri).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    // A write elsewhere does not answer it.
    store
        .upsert_job(job("other", "default"), NOW)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiter.is_finished(), "answered before the catalog changed");
    store
        .upsert_allocs(vec![alloc("a3", "web", "default")], NOW)
        .await
        .unwrap();
    let written = store
        .upsert_service_registrations(vec![registration(
            "s-a3",
            "web-frontend",
            "default",
            "a3",
            "web",
            &["http"],
            21003,
        )])
        .await
        .unwrap();
    let (status, new_index, body) = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("the registration should wake the query")
        .unwrap();
    assert_eq!(status, StatusCode::OK);
    assert_eq!(new_index, written);
    assert_eq!(body.as_array().unwrap().len(), 3);
}

#[tokio::test]
async fn services_of_an_allocation_and_of_a_job_or_404() {
    let (_store, router) = catalog().await;
    let (status, _, body) = get(&router, "/v1/allocation/a1/services").await;
    assert_eq!(status, StatusCode::OK);
    let ids: Vec<&str> = body
        .as_array()
        .unwrap()
        .iter()
        .map(|service| service["ID"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["m-a1", "s-a1"]);
    let (status, _, body) = get(&router, "/v1/allocation/i1/services").await;
    assert_eq!((status, body), (StatusCode::OK, json!([])));
    let (status, _, body) = get(&router, "/v1/allocation/nope/services").await;
    assert_eq!(
        (status, body),
        (StatusCode::NOT_FOUND, json!("allocation not found"))
    );
    // An allocation of another namespace than asked is not found, as in Nomad.
    let (status, _, _) = get(&router, "/v1/allocation/p1/services").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _, body) = get(&router, "/v1/allocation/p1/services?namespace=prod").await;
    assert_eq!(
        (status, body[0]["ID"].clone()),
        (StatusCode::OK, json!("s-p1"))
    );

    let (status, _, body) = get(&router, "/v1/job/web/services").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body.as_array().unwrap().len(), 3);
    let (status, _, body) = get(&router, "/v1/job/idle/services").await;
    assert_eq!((status, body), (StatusCode::OK, json!([])));
    let (status, _, body) = get(&router, "/v1/job/nope/services").await;
    assert_eq!(
        (status, body),
        (StatusCode::NOT_FOUND, json!("job not found"))
    );
    let (status, _, _) = get(&router, "/v1/job/db/services?namespace=prod").await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn services_routes_answer_nomads_codes_for_wrong_methods_and_paths() {
    let (_store, router) = catalog().await;
    for (method, uri, status, message) in [
        (
            "DELETE",
            "/v1/service/web-frontend",
            StatusCode::METHOD_NOT_ALLOWED,
            None,
        ),
        ("PUT", "/v1/services", StatusCode::METHOD_NOT_ALLOWED, None),
        (
            "GET",
            "/v1/service/web-frontend/s-a1",
            StatusCode::METHOD_NOT_ALLOWED,
            None,
        ),
        (
            "GET",
            "/v1/service/",
            StatusCode::BAD_REQUEST,
            Some("missing service name"),
        ),
        (
            "DELETE",
            "/v1/service/web-frontend/",
            StatusCode::BAD_REQUEST,
            Some("missing service id"),
        ),
        (
            "GET",
            "/v1/service/a/b/c",
            StatusCode::BAD_REQUEST,
            Some("invalid URI"),
        ),
        (
            "PUT",
            "/v1/allocation/a1/services",
            StatusCode::METHOD_NOT_ALLOWED,
            None,
        ),
        (
            "PUT",
            "/v1/job/web/services",
            StatusCode::METHOD_NOT_ALLOWED,
            None,
        ),
        (
            "GET",
            "/v1/internal/services/upsert",
            StatusCode::METHOD_NOT_ALLOWED,
            None,
        ),
    ] {
        let response = send(&router, method, uri, None).await;
        assert_eq!(response.status(), status, "{method} {uri}");
        if let Some(message) = message {
            assert_eq!(text(response).await, message, "{method} {uri}");
        }
    }
}

#[tokio::test]
async fn services_delete_removes_one_registration_or_404() {
    let backend = Arc::new(MemoryBackend::dev());
    let router = crate::app(Arc::clone(&backend));
    let response = send(
        &router,
        "PUT",
        "/v1/internal/services/upsert",
        Some(json!({"Services": [
            {"ID": "s1", "ServiceName": "web", "Namespace": "default", "AllocID": "a1",
             "Address": "127.0.0.1", "Port": 8080, "Tags": ["x"]},
            {"ID": "s2", "ServiceName": "web", "Namespace": "default", "AllocID": "a2"}
        ]})),
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    let written = index_of(&response);
    assert_eq!(
        serde_json::from_str::<Value>(&text(response).await).unwrap()["Index"],
        written
    );
    assert_eq!(backend.service_registrations("default").unwrap().len(), 2);

    let response = send(&router, "DELETE", "/v1/service/web/s1", None).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert!(index_of(&response) > written);
    assert_eq!(text(response).await, "");
    // An unknown ID: 404 in Nomad's words (Nomad answers its RPC error, a 500).
    let response = send(&router, "DELETE", "/v1/service/web/s1", None).await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    assert_eq!(text(response).await, "service registration not found");

    let response = send(
        &router,
        "PUT",
        "/v1/internal/services/delete",
        Some(json!({"IDs": ["s2", "unknown"]})),
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    assert!(backend.service_registrations("*").unwrap().is_empty());
}

#[tokio::test]
async fn services_internal_routes_refuse_empty_and_undecodable_bodies() {
    let router = crate::app(Arc::new(MemoryBackend::dev()));
    for (uri, body, message) in [
        (
            "/v1/internal/services/upsert",
            json!({"Services": []}),
            "must register at least one service (Services is empty)",
        ),
        (
            "/v1/internal/services/delete",
            json!({"IDs": []}),
            "must deregister at least one service (IDs is empty)",
        ),
        (
            "/v1/internal/services/delete",
            json!({"IDs": [""]}),
            "IDs contains an empty service ID",
        ),
    ] {
        let response = send(&router, "PUT", uri, Some(body)).await;
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{uri}");
        assert_eq!(text(response).await, message);
    }
    let response = send(
        &router,
        "PUT",
        "/v1/internal/services/upsert",
        Some(json!({"Services": "not a list"})),
    )
    .await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert!(text(response).await.starts_with("Request decode failed"));
}

#[tokio::test]
async fn services_events_stream_on_the_service_topic() {
    let (store, router) = catalog().await;
    let response = send(&router, "GET", "/v1/event/stream?topic=Service:*", None).await;
    let mut body = response.into_body();
    store
        .delete_service_registration("default", "m-a1")
        .await
        .unwrap();
    // Without an index the stream starts with the registrations it still holds (Nomad's
    // broker reads on from its buffer's head), then the deregistration.
    let mut received = String::new();
    while !received.contains("ServiceDeregistration") || !received.ends_with('\n') {
        let frame = tokio::time::timeout(Duration::from_secs(10), body.frame())
            .await
            .expect("no event arrived")
            .unwrap()
            .unwrap();
        if let Ok(data) = frame.into_data() {
            received.push_str(std::str::from_utf8(&data).unwrap());
        }
    }
    let lines: Vec<Value> = received
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .filter(|line: &Value| line.get("Events").is_some())
        .collect();
    assert!(lines.len() >= 2, "{received}");
    assert_eq!(lines[0]["Events"][0]["Type"], "ServiceRegistration");
    let event = &lines[lines.len() - 1]["Events"][0];
    assert_eq!(event["Topic"], "Service");
    assert_eq!(event["Type"], "ServiceDeregistration");
    assert_eq!(event["Key"], "m-a1");
    assert_eq!(event["FilterKeys"], json!(["web", "metrics"]));
    assert_eq!(event["Payload"]["Service"]["ServiceName"], "metrics");
}

#[tokio::test]
async fn services_left_to_consul_register_with_a_warning() {
    let router = crate::app(Arc::new(MemoryBackend::dev()));
    let mut job = serde_json::to_value(job("web", "default")).unwrap();
    job["TaskGroups"][0]["Services"] = json!([
        {"Name": "web-frontend", "PortLabel": "8080"},
        {"Name": "web-native", "PortLabel": "8080", "Provider": "nomad"}
    ]);
    let response = send(&router, "PUT", "/v1/jobs", Some(json!({"Job": job}))).await;
    assert_eq!(response.status(), StatusCode::OK);
    let body: Value = serde_json::from_str(&text(response).await).unwrap();
    let warnings = body["Warnings"].as_str().unwrap();
    assert!(
        warnings.contains("service (provider = \"consul\", Nomad's default) in group \"g\" (TaskGroups[0].Services[0]): this agent has no Consul"),
        "{warnings}"
    );
    // The provider = "nomad" one is not mentioned.
    assert!(!warnings.contains("Services[1]"), "{warnings}");
}
