//! [`StateReads`] for the real state store: every read is a snapshot read of
//! `drover_state::StateStore`, and blocking queries wait on its per-table watches.
//!
//! Not here: writes; the server and the client own those.

use std::future::Future;

use drover_state::{EventFilter, EventSubscription, StateStore};
use drover_structs::{Allocation, Evaluation, Job, JobSummary, Node, ServiceRegistration};

use crate::backend::{StateReads, Table};
use crate::error::ApiError;

/// The store's tables behind the API's. Deployments have no table yet: a read of them never
/// changes, so a blocking query on them waits out its time.
fn store_tables(tables: &[Table]) -> Vec<drover_state::Table> {
    tables
        .iter()
        .filter_map(|table| match table {
            Table::Jobs => Some(drover_state::Table::Jobs),
            Table::JobVersions => Some(drover_state::Table::JobVersions),
            Table::JobSummaries => Some(drover_state::Table::JobSummaries),
            Table::Evals => Some(drover_state::Table::Evals),
            Table::Allocs => Some(drover_state::Table::Allocs),
            Table::Nodes => Some(drover_state::Table::Nodes),
            Table::ServiceRegistrations => Some(drover_state::Table::ServiceRegistrations),
            Table::Deployments => None,
        })
        .collect()
}

fn in_namespace(wanted: &str, actual: &str) -> bool {
    wanted == "*" || wanted == actual
}

fn owned<T: Clone>(shared: Vec<std::sync::Arc<T>>) -> Vec<T> {
    shared.into_iter().map(|item| (*item).clone()).collect()
}

impl StateReads for StateStore {
    fn table_index(&self, tables: &[Table]) -> u64 {
        self.indexes().max_of(&store_tables(tables))
    }

    fn wait_for_change(
        &self,
        tables: &[Table],
        min_index: u64,
        deadline: tokio::time::Instant,
    ) -> impl Future<Output = ()> + Send {
        let tables = store_tables(tables);
        async move {
            if tables.is_empty() {
                tokio::time::sleep_until(deadline).await;
            } else {
                StateStore::wait_for_change(self, &tables, min_index, deadline).await;
            }
        }
    }

    fn jobs(&self, namespace: &str, prefix: &str) -> Result<Vec<Job>, ApiError> {
        let namespace = (namespace != "*").then_some(namespace);
        Ok(owned(StateStore::jobs(self, namespace, prefix)))
    }

    fn job(&self, namespace: &str, job_id: &str) -> Result<Option<Job>, ApiError> {
        Ok(StateStore::job(self, namespace, job_id).map(|job| (*job).clone()))
    }

    fn job_versions(&self, namespace: &str, job_id: &str) -> Result<Vec<Job>, ApiError> {
        Ok(owned(StateStore::job_versions(self, namespace, job_id)))
    }

    fn job_summary(&self, namespace: &str, job_id: &str) -> Result<Option<JobSummary>, ApiError> {
        Ok(StateStore::job_summary(self, namespace, job_id).map(|summary| (*summary).clone()))
    }

    fn job_allocations(&self, namespace: &str, job_id: &str) -> Result<Vec<Allocation>, ApiError> {
        Ok(owned(self.allocs_by_job(namespace, job_id)))
    }

    fn job_evaluations(&self, namespace: &str, job_id: &str) -> Result<Vec<Evaluation>, ApiError> {
        Ok(owned(self.evals_by_job(namespace, job_id)))
    }

    fn allocations(&self, namespace: &str, prefix: &str) -> Result<Vec<Allocation>, ApiError> {
        Ok(owned(self.allocs(prefix))
            .into_iter()
            .filter(|allocation| in_namespace(namespace, &allocation.namespace))
            .collect())
    }

    fn allocation(&self, alloc_id: &str) -> Result<Option<Allocation>, ApiError> {
        Ok(self.alloc(alloc_id).map(|allocation| (*allocation).clone()))
    }

    fn evaluations(&self, namespace: &str, prefix: &str) -> Result<Vec<Evaluation>, ApiError> {
        Ok(owned(self.evals(prefix))
            .into_iter()
            .filter(|evaluation| in_namespace(namespace, &evaluation.namespace))
            .collect())
    }

    fn evaluation(&self, eval_id: &str) -> Result<Option<Evaluation>, ApiError> {
        Ok(self.eval(eval_id).map(|evaluation| (*evaluation).clone()))
    }

    fn evaluation_allocations(&self, eval_id: &str) -> Result<Vec<Allocation>, ApiError> {
        Ok(owned(self.allocs_by_eval(eval_id)))
    }

    fn nodes(&self, prefix: &str) -> Result<Vec<Node>, ApiError> {
        Ok(owned(StateStore::nodes(self, prefix)))
    }

    fn node(&self, node_id: &str) -> Result<Option<Node>, ApiError> {
        Ok(StateStore::node(self, node_id).map(|node| (*node).clone()))
    }

    fn node_allocations(&self, node_id: &str) -> Result<Vec<Allocation>, ApiError> {
        Ok(owned(self.allocs_by_node(node_id)))
    }

    /// Reads the shared allocations in place: every watching node wakes on every allocation
    /// write, so copying its allocations (jobs included) each time would dominate.
    fn node_alloc_modify_indexes(
        &self,
        node_id: &str,
    ) -> Result<std::collections::BTreeMap<String, u64>, ApiError> {
        Ok(self
            .allocs_by_node(node_id)
            .iter()
            .map(|allocation| (allocation.id.clone(), allocation.alloc_modify_index))
            .collect())
    }

    fn subscribe_events(&self, from_index: u64, filter: EventFilter) -> EventSubscription {
        StateStore::subscribe_events(self, from_index, filter)
    }

    fn service_registrations(&self, namespace: &str) -> Result<Vec<ServiceRegistration>, ApiError> {
        let namespace = (namespace != "*").then_some(namespace);
        Ok(owned(StateStore::service_registrations(self, namespace)))
    }

    fn service_registrations_by_name(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Vec<ServiceRegistration>, ApiError> {
        Ok(owned(StateStore::service_registrations_by_name(
            self, namespace, name,
        )))
    }

    fn service_registrations_by_alloc(
        &self,
        alloc_id: &str,
    ) -> Result<Vec<ServiceRegistration>, ApiError> {
        Ok(owned(StateStore::service_registrations_by_alloc(
            self, alloc_id,
        )))
    }

    fn service_registrations_by_job(
        &self,
        namespace: &str,
        job_id: &str,
    ) -> Result<Vec<ServiceRegistration>, ApiError> {
        Ok(owned(StateStore::service_registrations_by_job(
            self, namespace, job_id,
        )))
    }
}

#[cfg(test)]
#[allow(clippy::expect_used, clippy::unwrap_used)] // a failed expectation is a failed test
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    use super::*;
    use crate::backend::Composed;
    use crate::memory::MemoryBackend;

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

    async fn get(router: &axum::Router, uri: &str) -> (StatusCode, u64, serde_json::Value) {
        let response = router
            .clone()
            .oneshot(Request::builder().uri(uri).body(Body::empty()).unwrap())
            .await
            .unwrap();
        let status = response.status();
        let index = response.headers()["X-Nomad-Index"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        let value = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
        (status, index, value)
    }

    #[tokio::test]
    async fn reads_and_blocking_queries_go_through_the_real_store() {
        let store = StateStore::in_memory().await.unwrap();
        let backend = Arc::new(Composed {
            reads: store.clone(),
            operations: MemoryBackend::dev(),
        });
        let router = crate::app(backend);
        store
            .upsert_job(job("batch/dispatch-1"), 1_700_000_000_000_000_000)
            .await
            .unwrap();

        let (status, index, jobs) = get(&router, "/v1/jobs").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(jobs[0]["ID"], "batch/dispatch-1");
        assert_eq!(jobs[0]["JobSummary"]["Summary"]["g"]["Queued"], 0);
        let (status, _, read) = get(&router, "/v1/job/batch%2Fdispatch-1").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(read["Version"], 0);

        let waiting_router = router.clone();
        let uri = format!("/v1/jobs?index={index}&wait=60s");
        let waiter = tokio::spawn(async move { get(&waiting_router, &uri).await });
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!waiter.is_finished(), "answered before anything changed");
        store
            .upsert_job(job("second"), 1_700_000_001_000_000_000)
            .await
            .unwrap();
        let (_, new_index, jobs) = tokio::time::timeout(Duration::from_secs(10), waiter)
            .await
            .expect("the write should wake the query")
            .unwrap();
        assert!(new_index > index);
        assert_eq!(jobs.as_array().map(Vec::len), Some(2));
    }

    #[tokio::test]
    async fn the_event_stream_carries_the_store_events() {
        let store = StateStore::in_memory().await.unwrap();
        let router = crate::app(Arc::new(Composed {
            reads: store.clone(),
            operations: MemoryBackend::dev(),
        }));
        let response = router
            .clone()
            .oneshot(
                Request::builder()
                    .uri("/v1/event/stream?topic=Job:*")
                    .body(Body::empty())
                    .unwrap(),
            )
            .await
            .unwrap();
        let mut body = response.into_body();
        store
            .upsert_job(job("web"), 1_700_000_000_000_000_000)
            .await
            .unwrap();
        let mut text = String::new();
        while text.matches('\n').count() < 2 {
            let frame = tokio::time::timeout(Duration::from_secs(10), body.frame())
                .await
                .expect("no event arrived")
                .unwrap()
                .unwrap();
            if let Ok(data) = frame.into_data() {
                text.push_str(std::str::from_utf8(&data).unwrap());
            }
        }
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        assert_eq!(lines[0], serde_json::json!({}));
        assert_eq!(lines[1]["Events"][0]["Type"], "JobRegistered");
        assert_eq!(lines[1]["Events"][0]["Key"], "web");
    }

    #[tokio::test(start_paused = true)]
    async fn a_blocking_read_of_deployments_waits_out_its_time() {
        let store = StateStore::in_memory().await.unwrap();
        let router = crate::app(Arc::new(Composed {
            reads: store,
            operations: MemoryBackend::dev(),
        }));
        let started = tokio::time::Instant::now();
        let (status, index, body) = get(&router, "/v1/job/x/deployments?index=1&wait=32s").await;
        assert_eq!((status, index), (StatusCode::OK, 1));
        assert_eq!(body, serde_json::json!([]));
        let elapsed = started.elapsed();
        assert!(
            elapsed >= Duration::from_secs(32) && elapsed <= Duration::from_secs(34),
            "{elapsed:?}"
        );
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
        let router = crate::app(Arc::new(Composed {
            reads: store.clone(),
            operations: MemoryBackend::dev(),
        }));
        let web = std::sync::Arc::new(job("web"));
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
}
