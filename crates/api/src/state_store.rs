//! [`StateReads`] for the real state store: every read is a snapshot read of
//! `drover_state::StateStore`, and blocking queries wait on its per-table watches.
//!
//! Not here: writes; the server and the client own those.

use std::future::Future;

use drover_state::{EventFilter, EventSubscription, StateStore};
use drover_structs::{
    Allocation, Deployment, Evaluation, Job, JobScalingEvents, JobSubmission, JobSummary, Node,
    ScalingPolicy, ServiceRegistration,
};

use crate::backend::{StateReads, Table};
use crate::error::ApiError;

/// The store's tables behind the API's.
fn store_tables(tables: &[Table]) -> Vec<drover_state::Table> {
    tables
        .iter()
        .map(|table| match table {
            Table::Jobs => drover_state::Table::Jobs,
            Table::JobVersions => drover_state::Table::JobVersions,
            Table::JobSummaries => drover_state::Table::JobSummaries,
            Table::Evals => drover_state::Table::Evals,
            Table::Allocs => drover_state::Table::Allocs,
            Table::Nodes => drover_state::Table::Nodes,
            Table::ServiceRegistrations => drover_state::Table::ServiceRegistrations,
            Table::Deployments => drover_state::Table::Deployments,
            Table::ScalingEvents => drover_state::Table::ScalingEvents,
            Table::ScalingPolicies => drover_state::Table::ScalingPolicies,
            Table::JobSubmissions => drover_state::Table::JobSubmissions,
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

    fn jobs(&self, namespace: &str, prefix: &str) -> Result<Vec<std::sync::Arc<Job>>, ApiError> {
        let namespace = (namespace != "*").then_some(namespace);
        Ok(StateStore::jobs(self, namespace, prefix))
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

    fn deployments(&self, namespace: &str, prefix: &str) -> Result<Vec<Deployment>, ApiError> {
        Ok(StateStore::deployments(self, prefix)
            .into_iter()
            .filter(|deployment| in_namespace(namespace, &deployment.namespace))
            .map(|deployment| (*deployment).clone())
            .collect())
    }

    fn deployment(&self, deployment_id: &str) -> Result<Option<Deployment>, ApiError> {
        Ok(StateStore::deployment(self, deployment_id).map(|deployment| (*deployment).clone()))
    }

    fn job_deployments(&self, namespace: &str, job_id: &str) -> Result<Vec<Deployment>, ApiError> {
        Ok(owned(StateStore::deployments_by_job(
            self, namespace, job_id,
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

    fn job_scaling_events(
        &self,
        namespace: &str,
        job_id: &str,
    ) -> Result<Option<JobScalingEvents>, ApiError> {
        Ok(StateStore::scaling_events(self, namespace, job_id).map(|events| (*events).clone()))
    }

    fn scaling_policies(
        &self,
        namespace: &str,
        id_prefix: &str,
        job: &str,
        policy_type: &str,
    ) -> Result<Vec<ScalingPolicy>, ApiError> {
        let namespace = (namespace != "*").then_some(namespace);
        Ok(owned(self.snapshot().scaling_policies(
            namespace,
            id_prefix,
            job,
            policy_type,
        )))
    }

    fn scaling_policy(&self, policy_id: &str) -> Result<Option<ScalingPolicy>, ApiError> {
        Ok(self
            .snapshot()
            .scaling_policy(policy_id)
            .map(|policy| (*policy).clone()))
    }

    fn job_submission(
        &self,
        namespace: &str,
        job_id: &str,
        version: u64,
    ) -> Result<Option<JobSubmission>, ApiError> {
        Ok(StateStore::job_submission(self, namespace, job_id, version)
            .map(|submission| (*submission).clone()))
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
    async fn list_indexes_are_their_own_tables_zero_until_written_and_block_from_zero() {
        let store = StateStore::in_memory().await.unwrap();
        let router = crate::app(Arc::new(Composed {
            reads: store.clone(),
            operations: MemoryBackend::dev(),
        }));
        let fresh = [
            "/v1/jobs",
            "/v1/allocations",
            "/v1/evaluations",
            "/v1/deployments",
            "/v1/nodes",
            "/v1/job/web/allocations",
            "/v1/job/web/evaluations",
            "/v1/job/web/deployments",
        ];
        for uri in fresh {
            let (status, index, _) = get(&router, uri).await;
            assert_eq!((status, index), (StatusCode::OK, 0), "{uri}");
        }
        let job_index = store
            .upsert_job(job("web"), 1_700_000_000_000_000_000)
            .await
            .unwrap()
            .job_modify_index;
        assert_eq!(get(&router, "/v1/jobs").await.1, job_index);
        for uri in [
            "/v1/allocations",
            "/v1/evaluations",
            "/v1/job/web/allocations",
        ] {
            assert_eq!(get(&router, uri).await.1, 0, "{uri} after a job write");
        }

        // A blocking query from index 0 answers at once (Nomad: no blocking query); one from
        // the job's write waits for its own table, not for the jobs table's next write.
        let (_, index, list) = get(&router, "/v1/job/web/evaluations?index=0&wait=60s").await;
        assert_eq!((index, list), (0, serde_json::json!([])));
        let waiting_router = router.clone();
        let uri = format!("/v1/job/web/evaluations?index={job_index}&wait=60s");
        let waiter = tokio::spawn(async move { get(&waiting_router, &uri).await });
        store
            .upsert_job(job("other"), 1_700_000_001_000_000_000)
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!waiter.is_finished(), "woke on another table's write");
        let eval = Evaluation {
            id: "8e8b0f53-9d5c-4c1e-a7a3-2f0b6f1f9a01".to_owned(),
            namespace: "default".to_owned(),
            job_id: "web".to_owned(),
            status: "pending".to_owned(),
            ..Evaluation::default()
        };
        let eval_index = store
            .upsert_evals(vec![eval], 1_700_000_002_000_000_000)
            .await
            .unwrap();
        let (_, index, list) = tokio::time::timeout(Duration::from_secs(10), waiter)
            .await
            .expect("the evaluation's write should wake the query")
            .unwrap();
        assert_eq!(index, eval_index);
        assert_eq!(list[0]["JobID"], "web");
        assert_eq!(get(&router, "/v1/evaluations").await.1, eval_index);
        assert_eq!(get(&router, "/v1/allocations").await.1, 0);
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
        // The deployments table was never written: its index is 0, as Nomad's.
        assert_eq!((status, index), (StatusCode::OK, 0));
        assert_eq!(body, serde_json::json!([]));
        let elapsed = started.elapsed();
        assert!(
            elapsed >= Duration::from_secs(32) && elapsed <= Duration::from_secs(34),
            "{elapsed:?}"
        );
    }
}
