//! The agent as the HTTP layer sees it: [`ApiBackend`] over the real server (state reads and
//! writes) and the local client node (alloc operations, alloc dirs).
//!
//! Not here: behaviour. Each method forwards to the owner of the data and maps its errors onto
//! the API's.

use std::path::PathBuf;
use std::sync::Arc;

use drover_api::backend::{AgentInfo, ApiBackend, Table as ApiTable};
use drover_api::error::ApiError;
use drover_client::node::{Client, ClientError, ClientErrorKind};
use drover_client::runner_factory::TaskAllocRunnerFactory;
use drover_server::{Server, ServerError};
use drover_state::Table;
use drover_structs::{
    AllocResourceUsage, AllocStopResponse, Allocation, Evaluation, Job, JobDeregisterResponse,
    JobRegisterRequest, JobRegisterResponse, JobSummary, Node,
};

use super::in_process::InProcessServer;

/// The local client node, when this agent runs one.
pub type LocalClient = Client<InProcessServer, TaskAllocRunnerFactory>;

/// Everything the HTTP API serves, in one place.
pub struct AgentBackend {
    pub info: AgentInfo,
    pub server: Server,
    pub client: Option<Arc<LocalClient>>,
    /// `<data_dir>/alloc`: where the client keeps alloc dirs.
    pub alloc_root: PathBuf,
}

fn server_error(error: ServerError) -> ApiError {
    match error {
        ServerError::NotFound(message) => ApiError::NotFound(message),
        ServerError::BadRequest(message) => ApiError::BadRequest(message),
        error => ApiError::Internal(error.to_string()),
    }
}

fn client_error(error: ClientError) -> ApiError {
    match error.kind() {
        ClientErrorKind::NotFound => ApiError::NotFound(error.to_string()),
        ClientErrorKind::BadRequest => ApiError::BadRequest(error.to_string()),
        ClientErrorKind::Unavailable | ClientErrorKind::Internal => {
            ApiError::Internal(error.to_string())
        }
    }
}

fn state_tables(tables: &[ApiTable]) -> Vec<Table> {
    tables
        .iter()
        .filter_map(|table| match table {
            ApiTable::Jobs => Some(Table::Jobs),
            ApiTable::JobVersions => Some(Table::JobVersions),
            ApiTable::JobSummaries => Some(Table::JobSummaries),
            ApiTable::Evals => Some(Table::Evals),
            ApiTable::Allocs => Some(Table::Allocs),
            ApiTable::Nodes => Some(Table::Nodes),
            // Deployments are not tracked yet; nothing ever changes them.
            ApiTable::Deployments => None,
        })
        .collect()
}

fn in_namespace(namespace: &str, object_namespace: &str) -> bool {
    namespace == "*" || namespace.is_empty() || namespace == object_namespace
}

fn cloned<T: Clone>(items: Vec<Arc<T>>) -> Vec<T> {
    items.into_iter().map(|item| T::clone(&item)).collect()
}

impl AgentBackend {
    fn client(&self) -> Result<&Arc<LocalClient>, ApiError> {
        self.client
            .as_ref()
            .ok_or_else(|| ApiError::BadRequest("this agent runs no client".into()))
    }
}

impl ApiBackend for AgentBackend {
    fn agent_info(&self) -> AgentInfo {
        self.info.clone()
    }

    fn table_index(&self, tables: &[ApiTable]) -> u64 {
        self.server
            .state()
            .indexes()
            .max_of(&state_tables(tables))
    }

    async fn wait_for_change(
        &self,
        tables: &[ApiTable],
        min_index: u64,
        deadline: tokio::time::Instant,
    ) {
        let tables = state_tables(tables);
        if tables.is_empty() {
            tokio::time::sleep_until(deadline).await;
            return;
        }
        self.server
            .state()
            .wait_for_change(&tables, min_index, deadline)
            .await;
    }

    fn jobs(&self, namespace: &str, prefix: &str) -> Result<Vec<Job>, ApiError> {
        let namespace = (namespace != "*" && !namespace.is_empty()).then_some(namespace);
        Ok(cloned(self.server.state().jobs(namespace, prefix)))
    }

    fn job(&self, namespace: &str, job_id: &str) -> Result<Option<Job>, ApiError> {
        Ok(self
            .server
            .state()
            .job(namespace, job_id)
            .map(|job| Job::clone(&job)))
    }

    fn job_versions(&self, namespace: &str, job_id: &str) -> Result<Vec<Job>, ApiError> {
        Ok(cloned(self.server.state().job_versions(namespace, job_id)))
    }

    fn job_summary(&self, namespace: &str, job_id: &str) -> Result<Option<JobSummary>, ApiError> {
        Ok(self
            .server
            .state()
            .job_summary(namespace, job_id)
            .map(|summary| JobSummary::clone(&summary)))
    }

    fn job_allocations(&self, namespace: &str, job_id: &str) -> Result<Vec<Allocation>, ApiError> {
        Ok(cloned(self.server.state().allocs_by_job(namespace, job_id)))
    }

    fn job_evaluations(&self, namespace: &str, job_id: &str) -> Result<Vec<Evaluation>, ApiError> {
        Ok(cloned(self.server.state().evals_by_job(namespace, job_id)))
    }

    fn allocations(&self, namespace: &str, prefix: &str) -> Result<Vec<Allocation>, ApiError> {
        Ok(self
            .server
            .state()
            .allocs(prefix)
            .into_iter()
            .filter(|alloc| in_namespace(namespace, &alloc.namespace))
            .map(|alloc| Allocation::clone(&alloc))
            .collect())
    }

    fn allocation(&self, alloc_id: &str) -> Result<Option<Allocation>, ApiError> {
        Ok(self
            .server
            .state()
            .alloc(alloc_id)
            .map(|alloc| Allocation::clone(&alloc)))
    }

    fn evaluations(&self, namespace: &str, prefix: &str) -> Result<Vec<Evaluation>, ApiError> {
        Ok(self
            .server
            .state()
            .evals(prefix)
            .into_iter()
            .filter(|eval| in_namespace(namespace, &eval.namespace))
            .map(|eval| Evaluation::clone(&eval))
            .collect())
    }

    fn evaluation(&self, eval_id: &str) -> Result<Option<Evaluation>, ApiError> {
        Ok(self
            .server
            .state()
            .eval(eval_id)
            .map(|eval| Evaluation::clone(&eval)))
    }

    fn evaluation_allocations(&self, eval_id: &str) -> Result<Vec<Allocation>, ApiError> {
        Ok(cloned(self.server.state().allocs_by_eval(eval_id)))
    }

    fn nodes(&self, prefix: &str) -> Result<Vec<Node>, ApiError> {
        Ok(cloned(self.server.state().nodes(prefix)))
    }

    fn node(&self, node_id: &str) -> Result<Option<Node>, ApiError> {
        Ok(self
            .server
            .state()
            .node(node_id)
            .map(|node| Node::clone(&node)))
    }

    fn node_allocations(&self, node_id: &str) -> Result<Vec<Allocation>, ApiError> {
        Ok(cloned(self.server.state().allocs_by_node(node_id)))
    }

    async fn register_job(
        &self,
        request: JobRegisterRequest,
    ) -> Result<JobRegisterResponse, ApiError> {
        self.server.register_job(request).await.map_err(server_error)
    }

    async fn deregister_job(
        &self,
        namespace: &str,
        job_id: &str,
        purge: bool,
    ) -> Result<JobDeregisterResponse, ApiError> {
        self.server
            .deregister_job(namespace, job_id, purge)
            .await
            .map_err(server_error)
    }

    async fn evaluate_job(
        &self,
        namespace: &str,
        job_id: &str,
    ) -> Result<JobRegisterResponse, ApiError> {
        self.server
            .evaluate_job(namespace, job_id)
            .await
            .map_err(server_error)
    }

    async fn stop_alloc(&self, alloc_id: &str) -> Result<AllocStopResponse, ApiError> {
        self.server.stop_alloc(alloc_id).await.map_err(server_error)
    }

    async fn restart_alloc(
        &self,
        alloc_id: &str,
        task: Option<String>,
        all_tasks: bool,
    ) -> Result<(), ApiError> {
        self.client()?
            .restart(alloc_id, task.as_deref(), all_tasks)
            .await
            .map_err(client_error)
    }

    async fn signal_alloc(
        &self,
        alloc_id: &str,
        task: Option<String>,
        signal: String,
    ) -> Result<(), ApiError> {
        self.client()?
            .signal(alloc_id, task.as_deref(), &signal)
            .await
            .map_err(client_error)
    }

    async fn gc_alloc(&self, alloc_id: &str) -> Result<(), ApiError> {
        self.client()?.gc(alloc_id).await.map_err(client_error)
    }

    async fn alloc_stats(
        &self,
        alloc_id: &str,
        task: Option<String>,
    ) -> Result<AllocResourceUsage, ApiError> {
        let _ = (self.client()?.alloc(alloc_id).map_err(client_error)?, task);
        Err(ApiError::Internal(format!(
            "resource usage of allocation {alloc_id} is not collected by this agent yet"
        )))
    }

    fn alloc_dir(&self, alloc_id: &str) -> Result<PathBuf, ApiError> {
        let client = self.client()?;
        client.alloc(alloc_id).map_err(client_error)?;
        Ok(self.alloc_root.join(alloc_id))
    }
}
