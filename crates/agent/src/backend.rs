//! What the agent does, as the HTTP layer sees it: [`AgentOperations`] over the real server
//! (job and alloc writes, and the calls of remote client nodes) and the local client node
//! (alloc operations, alloc dirs). Reads go to the state store directly (`drover_api`
//! implements them for it). An agent without a server refuses the server's operations.
//!
//! Not here: behaviour. Each method forwards to the owner of the data and maps its errors onto
//! the API's.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use drover_api::backend::{
    AgentHealth, AgentInfo, AgentOperations, ExecRequest, ExecSession, PartHealth,
};
use drover_api::error::ApiError;
use drover_client::node::{Client, ClientError, ClientErrorKind, ServerContact};
use drover_client::runner_factory::TaskAllocRunnerFactory;
use drover_server::{Server, ServerError};
use drover_structs::{
    AllocResourceUsage, AllocStopResponse, Allocation, JobDeregisterResponse, JobPlanRequest,
    JobPlanResponse, JobRegisterRequest, JobRegisterResponse, Node, ServiceRegistration,
};

use drover_client::http_conn::HttpServerConn;

use super::server_link::AgentServerConn;

/// The local client node, when this agent runs one.
pub type LocalClient = Client<AgentServerConn, TaskAllocRunnerFactory>;

/// Everything the HTTP API serves, in one place.
pub struct AgentBackend {
    pub info: AgentInfo,
    /// The server, when this agent runs one.
    pub server: Option<Server>,
    pub client: Option<Arc<LocalClient>>,
    /// The client's connection to its servers when it reaches them over HTTP (`None` with the
    /// server in process, or without a client).
    pub client_conn: Option<Arc<HttpServerConn>>,
    /// The addresses that name this agent's own server (its HTTP address, and with a Nomad
    /// config's `ports { rpc }` that port on the same host): an in-process client accepts
    /// them as its servers, being connected to that server already.
    pub own_server_addresses: Vec<std::net::SocketAddr>,
    /// `<data_dir>/alloc`: where the client keeps alloc dirs.
    pub alloc_root: PathBuf,
    /// Node-wide usage for `/v1/client/stats`.
    pub host_stats: drover_client::host_stats::HostStatsCollector,
}

/// Whether `address` (`host:port`, 4646 when no port is given, as `-servers` reads it)
/// names one of `own`: the same port, on the same IP or a loopback one.
fn names_own_server(address: &str, own: &[std::net::SocketAddr]) -> bool {
    let address = address.trim();
    let parsed = address.parse::<std::net::SocketAddr>().ok().or_else(|| {
        let (host, port) = address.rsplit_once(':').unwrap_or((address, "4646"));
        let port: u16 = port.parse().ok()?;
        let ip = if host == "localhost" {
            std::net::IpAddr::from(std::net::Ipv4Addr::LOCALHOST)
        } else {
            host.trim_matches(['[', ']']).parse().ok()?
        };
        Some(std::net::SocketAddr::new(ip, port))
    });
    let Some(parsed) = parsed else {
        return false;
    };
    own.iter().any(|own| {
        own.port() == parsed.port() && (own.ip() == parsed.ip() || parsed.ip().is_loopback())
    })
}

/// A server error as the HTTP answer. What the caller got wrong is a 4xx even where Nomad's
/// RPC layer answers it with a 500 (a write refused by the state's rules, an `EnforceIndex`
/// that did not hold: 409, its text still Nomad's, which its CLI recognises by the words); only
/// a failure inside the agent is a 500.
fn server_error(error: ServerError) -> ApiError {
    match error {
        ServerError::NotFound(message) => ApiError::NotFound(message),
        ServerError::BadRequest(message) => ApiError::BadRequest(message),
        ServerError::IndexConflict(message) => ApiError::Conflict(message),
        ServerError::State(error) if error.is_unavailable() => {
            ApiError::Unavailable(error.to_string())
        }
        ServerError::State(error @ drover_state::StateError::NotFound { .. }) => {
            ApiError::NotFound(error.to_string())
        }
        ServerError::State(
            error @ (drover_state::StateError::Refused(_)
            | drover_state::StateError::Invalid { .. }),
        ) => ApiError::BadRequest(error.to_string()),
        error => ApiError::Internal(error.to_string()),
    }
}

/// A server answer as the JSON the HTTP layer sends.
fn to_json<T: serde::Serialize>(
    answer: Result<T, ServerError>,
) -> Result<serde_json::Value, ApiError> {
    let answer = answer.map_err(server_error)?;
    serde_json::to_value(answer).map_err(|error| ApiError::Internal(error.to_string()))
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

impl AgentBackend {
    fn client(&self) -> Result<&Arc<LocalClient>, ApiError> {
        self.client
            .as_ref()
            .ok_or_else(|| ApiError::BadRequest("this agent runs no client".into()))
    }

    fn server(&self) -> Result<&Server, ApiError> {
        self.server
            .as_ref()
            .ok_or_else(|| ApiError::BadRequest(drover_api::backend::NO_SERVER.into()))
    }
}

impl AgentOperations for AgentBackend {
    fn agent_info(&self) -> AgentInfo {
        let mut info = self.info.clone();
        if let Some(conn) = &self.client_conn {
            info.client_servers = conn.servers().addresses.clone();
        }
        info
    }

    fn set_client_servers(&self, addresses: Vec<String>) -> Result<(), ApiError> {
        self.client()?;
        let Some(conn) = &self.client_conn else {
            // The client reaches the server in this process: a list naming only that server
            // is what it uses already (Nomad's tests point a dev agent's client at its own
            // server); any other server it could not use.
            if let Some(other) = addresses
                .iter()
                .find(|address| !names_own_server(address, &self.own_server_addresses))
            {
                return Err(ApiError::BadRequest(format!(
                    "server {other:?} is not this agent's own: its client reaches the server in \
                     its own process and uses no other; run a client-only agent \
                     (-client -servers=...) to use other servers"
                )));
            }
            return Ok(());
        };
        conn.set_servers(&addresses)
            .map_err(|error| ApiError::BadRequest(error.to_string()))
    }

    /// The server part is healthy while its state store takes writes; the client part while it
    /// is registered and its heartbeats are answered within the TTL.
    async fn agent_health(&self) -> AgentHealth {
        let server = self.server.as_ref().map(|server| {
            if server.state().is_writable() {
                PartHealth::healthy()
            } else {
                PartHealth::unhealthy("the state store takes no writes")
            }
        });
        let client = self.client.as_ref().map(|client| {
            match client
                .heartbeat_status()
                .contact_at(tokio::time::Instant::now())
            {
                ServerContact::Ok => PartHealth::healthy(),
                ServerContact::NotRegistered => {
                    PartHealth::unhealthy("not registered with any server")
                }
                ServerContact::HeartbeatOverdue { since } => PartHealth::unhealthy(format!(
                    "no heartbeat answered for {}",
                    drover_structs::DurationNs::from_std(since).to_go_string()
                )),
            }
        });
        AgentHealth { client, server }
    }

    async fn register_job(
        &self,
        request: JobRegisterRequest,
    ) -> Result<JobRegisterResponse, ApiError> {
        self.server()?
            .register_job(request)
            .await
            .map_err(server_error)
    }

    async fn plan_job(&self, request: JobPlanRequest) -> Result<JobPlanResponse, ApiError> {
        self.server()?.plan_job(request).await.map_err(server_error)
    }

    async fn deregister_job(
        &self,
        namespace: &str,
        job_id: &str,
        purge: bool,
        eval_priority: i64,
    ) -> Result<JobDeregisterResponse, ApiError> {
        self.server()?
            .deregister_job_with_priority(namespace, job_id, purge, eval_priority)
            .await
            .map_err(server_error)
    }

    async fn evaluate_job(
        &self,
        namespace: &str,
        job_id: &str,
    ) -> Result<JobRegisterResponse, ApiError> {
        self.server()?
            .evaluate_job(namespace, job_id)
            .await
            .map_err(server_error)
    }

    async fn force_periodic(
        &self,
        namespace: &str,
        job_id: &str,
    ) -> Result<JobRegisterResponse, ApiError> {
        self.server()?
            .force_periodic(namespace, job_id)
            .await
            .map_err(server_error)
    }

    async fn revert_job(
        &self,
        namespace: &str,
        request: drover_structs::JobRevertRequest,
    ) -> Result<JobRegisterResponse, ApiError> {
        self.server()?
            .revert_job(namespace, request)
            .await
            .map_err(server_error)
    }

    async fn scale_job(
        &self,
        namespace: &str,
        job_id: &str,
        request: drover_structs::ScalingRequest,
    ) -> Result<JobRegisterResponse, ApiError> {
        self.server()?
            .scale_job(namespace, job_id, request)
            .await
            .map_err(server_error)
    }

    async fn dispatch_job(
        &self,
        namespace: &str,
        job_id: &str,
        request: drover_structs::JobDispatchRequest,
        idempotency_token: &str,
    ) -> Result<drover_structs::JobDispatchResponse, ApiError> {
        self.server()?
            .dispatch_job(namespace, job_id, request, idempotency_token)
            .await
            .map_err(server_error)
    }

    async fn update_node(
        &self,
        request: drover_api::backend::NodeOperation,
    ) -> Result<serde_json::Value, ApiError> {
        use drover_api::backend::NodeOperation;
        let server = self.server()?;
        match request {
            NodeOperation::Drain {
                node_id,
                spec,
                mark_eligible,
                meta,
            } => to_json(
                server
                    .update_node_drain(&node_id, spec, mark_eligible, meta)
                    .await,
            ),
            NodeOperation::Eligibility {
                node_id,
                eligibility,
            } => to_json(server.update_node_eligibility(&node_id, &eligibility).await),
            NodeOperation::Purge { node_id } => to_json(server.purge_node(&node_id).await),
            NodeOperation::Evaluate { node_id } => to_json(server.evaluate_node(&node_id).await),
        }
    }

    async fn update_deployment(
        &self,
        request: drover_api::backend::DeploymentOperation,
    ) -> Result<drover_structs::DeploymentUpdateResponse, ApiError> {
        use drover_api::backend::DeploymentOperation;
        let server = self.server()?;
        match request {
            DeploymentOperation::Promote(request) => server.promote_deployment(request).await,
            DeploymentOperation::Fail { deployment_id } => {
                server.fail_deployment(&deployment_id).await
            }
            DeploymentOperation::Pause(request) => server.pause_deployment(request).await,
            DeploymentOperation::AllocHealth(request) => {
                server.set_deployment_alloc_health(request).await
            }
        }
        .map_err(server_error)
    }

    async fn set_job_stability(
        &self,
        namespace: &str,
        request: drover_structs::JobStabilityRequest,
    ) -> Result<u64, ApiError> {
        self.server()?
            .set_job_stability(namespace, request)
            .await
            .map_err(server_error)
    }

    async fn tag_job_version(
        &self,
        namespace: &str,
        request: drover_structs::JobApplyTagRequest,
    ) -> Result<drover_structs::JobTagResponse, ApiError> {
        self.server()?
            .tag_job_version(namespace, request)
            .await
            .map_err(server_error)
    }

    async fn stop_alloc(&self, alloc_id: &str) -> Result<AllocStopResponse, ApiError> {
        self.server()?
            .stop_alloc(alloc_id)
            .await
            .map_err(server_error)
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
            .map_err(|error| match error {
                // Nomad's alloc runner's words, an RPC error (HTTP 500).
                ClientError::UnknownTask { task, .. } => {
                    ApiError::Internal(format!("Could not find task runner for task: {task}"))
                }
                other => client_error(other),
            })
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
            .map_err(|error| match error {
                // Nomad's alloc runner's words, an RPC error (HTTP 500).
                ClientError::UnknownTask { .. } => ApiError::Internal("Task not found".into()),
                other => client_error(other),
            })
    }

    async fn gc_alloc(&self, alloc_id: &str) -> Result<(), ApiError> {
        self.client()?.gc(alloc_id).await.map_err(client_error)
    }

    async fn alloc_stats(
        &self,
        alloc_id: &str,
        task: Option<String>,
    ) -> Result<AllocResourceUsage, ApiError> {
        self.client()?
            .alloc_stats(alloc_id, task.as_deref())
            .await
            .map_err(client_error)
    }

    async fn host_stats(&self) -> Result<drover_structs::HostStats, ApiError> {
        self.client()?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|elapsed| i64::try_from(elapsed.as_nanos()).unwrap_or(i64::MAX))
            .unwrap_or(0);
        Ok(self.host_stats.collect(now))
    }

    async fn exec(&self, request: ExecRequest) -> Result<ExecSession, ApiError> {
        if request.command.is_empty() {
            return Err(ApiError::BadRequest("command is not present".into()));
        }
        let context = self
            .client()?
            .exec_context(&request.alloc_id, &request.task)
            .map_err(client_error)?;
        let shim_binary = drover_driver::locate_shim_binary(None)
            .map_err(|error| ApiError::Internal(error.to_string()))?;
        let spec = context.exec_spec(request.command, request.tty);
        let (input, output) = drover_driver::exec_session::start_session(shim_binary, spec);
        Ok(ExecSession { input, output })
    }

    async fn register_node(&self, node: Node) -> Result<Duration, ApiError> {
        self.server()?
            .register_node(node)
            .await
            .map_err(server_error)
    }

    /// The status a node reports is `ready` while it beats; the server marks it down itself.
    async fn update_node_status(&self, node_id: &str, _status: &str) -> Result<Duration, ApiError> {
        self.server()?
            .heartbeat_node(node_id)
            .await
            .map_err(server_error)
    }

    async fn update_allocs_from_client(&self, updates: Vec<Allocation>) -> Result<u64, ApiError> {
        self.server()?
            .update_allocs_from_client(updates)
            .await
            .map_err(server_error)
    }

    async fn upsert_service_registrations(
        &self,
        services: Vec<ServiceRegistration>,
    ) -> Result<u64, ApiError> {
        self.server()?
            .upsert_service_registrations(services)
            .await
            .map_err(server_error)
    }

    async fn delete_service_registrations(&self, ids: Vec<String>) -> Result<u64, ApiError> {
        self.server()?
            .delete_service_registrations(ids)
            .await
            .map_err(server_error)
    }

    async fn delete_service_registration(
        &self,
        namespace: &str,
        id: &str,
    ) -> Result<u64, ApiError> {
        self.server()?
            .delete_service_registration(namespace, id)
            .await
            .map_err(server_error)
    }

    fn alloc_dir(&self, alloc_id: &str) -> Result<PathBuf, ApiError> {
        let client = self.client()?;
        client.alloc(alloc_id).map_err(client_error)?;
        Ok(self.alloc_root.join(alloc_id))
    }

    fn client_allocation(&self, alloc_id: &str) -> Result<Option<Allocation>, ApiError> {
        let Some(client) = &self.client else {
            return Ok(None);
        };
        match client.alloc(alloc_id) {
            Ok(allocation) => Ok(Some(allocation)),
            Err(error) if error.kind() == ClientErrorKind::NotFound => Ok(None),
            Err(error) => Err(client_error(error)),
        }
    }

    fn alloc_checks(
        &self,
        alloc_id: &str,
    ) -> Result<
        Option<std::collections::BTreeMap<String, drover_structs::CheckQueryResult>>,
        ApiError,
    > {
        let Some(client) = &self.client else {
            return Ok(None);
        };
        match client.alloc_checks(alloc_id) {
            Ok(checks) => Ok(Some(checks)),
            Err(error) if error.kind() == ClientErrorKind::NotFound => Ok(None),
            Err(error) => Err(client_error(error)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::names_own_server;

    #[test]
    fn an_address_names_the_own_server_by_its_port_on_this_host() {
        let own: Vec<std::net::SocketAddr> = vec![
            "10.1.2.3:4646".parse().expect("address"),
            "10.1.2.3:4647".parse().expect("address"),
        ];
        for address in [
            "10.1.2.3:4646",
            "127.0.0.1:4647",
            "localhost:4646",
            "127.0.0.1",
            " [::1]:4647 ",
        ] {
            assert!(names_own_server(address, &own), "{address}");
        }
        for address in [
            "10.9.9.9:4646",
            "127.0.0.1:9999",
            "nope",
            "db.internal:4646",
        ] {
            assert!(!names_own_server(address, &own), "{address}");
        }
    }
}
