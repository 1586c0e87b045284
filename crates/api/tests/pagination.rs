//! Pagination through the real store: 10 000 allocations walked page by page. Its own test
//! binary, since it holds far more memory than the API's unit tests, one of which measures the
//! process's memory.
#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a failure here is the assertion

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use drover_api::backend::Composed;
use drover_api::memory::MemoryBackend;
use drover_state::StateStore;
use drover_structs::{Allocation, Job};
use http_body_util::BodyExt;
use tower::ServiceExt;

fn job(id: &str) -> Job {
    let mut job: Job = serde_json::from_value(serde_json::json!({
        "ID": id,
        "Datacenters": ["dc1"],
        "TaskGroups": [{"Name": "g", "Tasks": [{"Name": "t", "Driver": "raw_exec",
            "Config": {"command": "/bin/true"}}]}]
    }))
    .unwrap();
    job.canonicalize();
    job
}

async fn get_page(router: &axum::Router, uri: &str) -> (StatusCode, String, serde_json::Value) {
    let response = router
        .clone()
        .oneshot(Request::builder().uri(uri).body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let next = response
        .headers()
        .get("X-Nomad-NextToken")
        .map(|token| token.to_str().unwrap().to_string())
        .unwrap_or_default();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| serde_json::Value::String(String::from_utf8_lossy(&bytes).into()));
    (status, next, value)
}

/// Walks a list page by page, following `X-Nomad-NextToken`; the IDs in order.
async fn walk(router: &axum::Router, query: &str) -> (Vec<String>, usize) {
    let mut ids = Vec::new();
    let mut pages = 0;
    let mut token = String::new();
    loop {
        let uri = format!("/v1/allocations?{query}&next_token={token}");
        let (status, next, page) = get_page(router, &uri).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        pages += 1;
        for stub in page.as_array().unwrap() {
            ids.push(stub["ID"].as_str().unwrap().to_string());
        }
        if next.is_empty() {
            return (ids, pages);
        }
        token = next;
    }
}

#[tokio::test]
async fn pagination_walks_ten_thousand_allocations_without_duplicate_or_gap() {
    let store = StateStore::in_memory().await.unwrap();
    let router = drover_api::app(Arc::new(Composed {
        reads: store.clone(),
        operations: MemoryBackend::dev(),
    }));
    let web = Arc::new(job("web"));
    let mut inserted = Vec::new();
    // 100 writes of 100: create indexes repeat within a write, so the token's ID part
    // decides inside one index.
    for batch in 0..100 {
        let allocs: Vec<Allocation> = (0..100)
            .map(|n| {
                let number = batch * 100 + n;
                // IDs out of insertion order, so ID order and create order differ.
                let id = format!(
                    "{:08x}-0000-4000-8000-{:012}",
                    (number * 7919) % 10_000,
                    number
                );
                inserted.push(id.clone());
                Allocation {
                    id,
                    namespace: "default".into(),
                    eval_id: "eval".into(),
                    node_id: "node".into(),
                    job_id: if number % 4 == 0 {
                        "web".into()
                    } else {
                        "api".into()
                    },
                    job: Some(std::sync::Arc::clone(&web)),
                    task_group: "g".into(),
                    name: format!("web.g[{number}]"),
                    desired_status: "run".into(),
                    client_status: "pending".into(),
                    ..Allocation::default()
                }
            })
            .collect();
        store
            .upsert_allocs(allocs, 1_700_000_000_000_000_000)
            .await
            .unwrap();
    }

    let (ids, pages) = walk(&router, "per_page=100").await;
    assert_eq!(pages, 100);
    let unique: std::collections::BTreeSet<&String> = ids.iter().collect();
    assert_eq!(unique.len(), 10_000, "a duplicate");
    assert_eq!(
        unique,
        inserted.iter().collect::<std::collections::BTreeSet<_>>(),
        "a gap"
    );
    let (all, _) = get_page(&router, "/v1/allocations")
        .await
        .2
        .as_array()
        .map(|list| {
            (
                list.iter()
                    .map(|stub| stub["ID"].as_str().unwrap().to_string())
                    .collect::<Vec<_>>(),
                (),
            )
        })
        .unwrap();
    assert_eq!(ids, all, "the pages, end to end, are the unpaged list");

    let (reversed, _) = walk(&router, "per_page=1000&reverse=true").await;
    let mut backwards = ids.clone();
    backwards.reverse();
    assert_eq!(reversed, backwards);

    let (web_ids, _) = walk(
        &router,
        "per_page=1000&filter=DesiredStatus%20%3D%3D%20%22run%22%20and%20JobID%20matches%20%22%5Ewe%22",
    )
    .await;
    assert_eq!(web_ids.len(), 2_500);
    let (by_prefix, _) = walk(&router, "per_page=50&prefix=00002").await;
    assert!(by_prefix.windows(2).all(|pair| pair[0] < pair[1]), "by ID");
    assert!(!by_prefix.is_empty() && by_prefix.iter().all(|id| id.starts_with("00002")));

    let (status, _, body) = get_page(&router, "/v1/allocations?filter=JobID%20%3D").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        body.as_str().unwrap().starts_with(
            "failed to create result paginator: failed to read filter expression: 1:7 (6): no match found"
        ),
        "{body}"
    );
    let (status, _, body) = get_page(&router, "/v1/allocations?filter=Nope%20%3D%3D%201").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        body.as_str()
            .unwrap()
            .starts_with("failed to read result page: error finding value in datum: /Nope"),
        "{body}"
    );
    let (status, _, body) = get_page(&router, "/v1/allocations?per_page=x").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        body,
        "Expect a number for `per_page` query string parameter"
    );
}
