//! An in-memory [`ApiBackend`] for tests of the HTTP layer and of the CLI: objects are put in
//! directly, writes bump one index and wake blocking queries, and client-node operations are
//! recorded so a test can assert what reached the "client".
//!
//! Not a scheduler and not a server: registering a job stores it with a new evaluation and
//! nothing else happens unless the test does it.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use drover_state::{
    Event, EventBuffer, EventFilter, EventPayload, EventSubscription, EventType, Topic,
};

use drover_structs::{
    AllocResourceUsage, AllocStopResponse, Allocation, Deployment, Evaluation, Job,
    JobDeregisterResponse, JobRegisterRequest, JobRegisterResponse, JobSummary, Node,
    ServiceRegistration,
};

use crate::backend::{
    AgentHealth, AgentInfo, AgentOperations, ExecInput, ExecOutput, ExecRequest, ExecSession,
    PartHealth, StateReads, Table,
};
use crate::error::ApiError;

/// A client-node operation as the backend received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientCall {
    Restart {
        alloc_id: String,
        task: Option<String>,
        all_tasks: bool,
    },
    Signal {
        alloc_id: String,
        task: Option<String>,
        signal: String,
    },
    Gc {
        alloc_id: String,
    },
}

#[derive(Default)]
struct Contents {
    index: u64,
    /// The client's servers once set through `PUT /v1/agent/servers`.
    client_servers: Option<Vec<String>>,
    table_indexes: HashMap<Table, u64>,
    /// (namespace, id) → versions, oldest first.
    jobs: BTreeMap<(String, String), Vec<Job>>,
    summaries: BTreeMap<(String, String), JobSummary>,
    allocations: BTreeMap<String, Allocation>,
    evaluations: BTreeMap<String, Evaluation>,
    deployments: BTreeMap<String, Deployment>,
    nodes: BTreeMap<String, Node>,
    /// (namespace, ID) → registration.
    services: BTreeMap<(String, String), ServiceRegistration>,
    alloc_dirs: BTreeMap<String, PathBuf>,
    client_calls: Vec<ClientCall>,
    eval_counter: u64,
    /// What `/v1/agent/health` answers, when a test set it.
    health: Option<AgentHealth>,
}

impl Contents {
    fn bump(&mut self, tables: &[Table]) -> u64 {
        self.index += 1;
        for table in tables {
            self.table_indexes.insert(*table, self.index);
        }
        self.index
    }
}

/// The heartbeat TTL the in-memory backend hands out to the nodes that register with it.
pub const MEMORY_HEARTBEAT_TTL: std::time::Duration = std::time::Duration::from_secs(10);

/// The in-memory backend.
pub struct MemoryBackend {
    info: AgentInfo,
    contents: Mutex<Contents>,
    changes: tokio::sync::watch::Sender<u64>,
    events: Arc<EventBuffer>,
}

/// `{"<name>": value}`; the records of this backend always serialize (their types are the
/// wire types the API itself sends), so a failure leaves a `null` payload rather than no event.
fn payload_of<T: serde::Serialize>(name: &str, value: &T) -> EventPayload {
    EventPayload::named(name, value).unwrap_or_else(|_| EventPayload::null())
}

/// One event of a write, published in index order while the write holds the lock.
fn event(
    topic: Topic,
    event_type: EventType,
    key: &str,
    namespace: &str,
    index: u64,
    payload: EventPayload,
) -> Event {
    Event {
        topic,
        event_type,
        key: key.to_string(),
        namespace: namespace.to_string(),
        filter_keys: Vec::new(),
        index,
        payload,
    }
}

fn namespace_matches(wanted: &str, actual: &str) -> bool {
    wanted == "*" || wanted == actual
}

impl MemoryBackend {
    pub fn new(info: AgentInfo) -> Self {
        MemoryBackend {
            info,
            contents: Mutex::new(Contents::default()),
            changes: tokio::sync::watch::channel(0).0,
            events: Arc::new(EventBuffer::new(1024)),
        }
    }

    /// A backend describing a dev agent at `127.0.0.1:4646`.
    pub fn dev() -> Self {
        MemoryBackend::new(AgentInfo {
            region: "global".into(),
            datacenter: "dc1".into(),
            node_name: "node1".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            http_addr: "127.0.0.1:4646".into(),
            server_addr: "127.0.0.1:4646".into(),
            client_servers: vec!["127.0.0.1:4646".into()],
            server_enabled: true,
            client_enabled: true,
            node_id: String::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Contents> {
        // A panic while holding the lock only happens in a failing test; keep going with the
        // data as it is.
        self.contents
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write<R>(&self, tables: &[Table], change: impl FnOnce(&mut Contents, u64) -> R) -> R {
        let (result, index) = {
            let mut contents = self.lock();
            let index = contents.bump(tables);
            (change(&mut contents, index), index)
        };
        self.changes.send_replace(index);
        result
    }

    /// Stores a job as a new version (indexes and version filled in) with a zeroed summary.
    pub fn put_job(&self, mut job: Job) -> Job {
        job.canonicalize();
        if job.status.is_empty() {
            job.status = "pending".to_string();
        }
        self.write(
            &[Table::Jobs, Table::JobVersions, Table::JobSummaries],
            |contents, index| {
                let key = (job.namespace.clone(), job.id.clone());
                let versions = contents.jobs.entry(key.clone()).or_default();
                match versions.last() {
                    Some(previous) => {
                        job.version = previous.version + 1;
                        job.create_index = previous.create_index;
                    }
                    None => job.create_index = index,
                }
                job.modify_index = index;
                job.job_modify_index = index;
                versions.push(job.clone());
                let mut summary = JobSummary::new_for_job(&job);
                summary.modify_index = index;
                contents.summaries.insert(key, summary);
                self.events.publish(vec![event(
                    Topic::Job,
                    EventType::JobRegistered,
                    &job.id,
                    &job.namespace,
                    index,
                    payload_of("Job", &job),
                )]);
                job
            },
        )
    }

    pub fn put_summary(&self, summary: JobSummary) {
        self.write(&[Table::JobSummaries], |contents, _| {
            contents
                .summaries
                .insert((summary.namespace.clone(), summary.job_id.clone()), summary);
        });
    }

    pub fn put_allocation(&self, mut allocation: Allocation) {
        self.write(&[Table::Allocs], |contents, index| {
            if allocation.create_index == 0 {
                allocation.create_index = index;
            }
            allocation.modify_index = index;
            let mut published = event(
                Topic::Allocation,
                EventType::AllocationUpdated,
                &allocation.id,
                &allocation.namespace,
                index,
                payload_of("Allocation", &allocation),
            );
            published.filter_keys = vec![allocation.job_id.clone()];
            self.events.publish(vec![published]);
            contents
                .allocations
                .insert(allocation.id.clone(), allocation);
        });
    }

    pub fn put_evaluation(&self, mut evaluation: Evaluation) {
        self.write(&[Table::Evals], |contents, index| {
            if evaluation.create_index == 0 {
                evaluation.create_index = index;
            }
            evaluation.modify_index = index;
            self.events.publish(vec![event(
                Topic::Evaluation,
                EventType::EvaluationUpdated,
                &evaluation.id,
                &evaluation.namespace,
                index,
                payload_of("Evaluation", &evaluation),
            )]);
            contents
                .evaluations
                .insert(evaluation.id.clone(), evaluation);
        });
    }

    pub fn put_deployment(&self, mut deployment: Deployment) {
        self.write(&[Table::Deployments], |contents, index| {
            if deployment.create_index == 0 {
                deployment.create_index = index;
            }
            deployment.modify_index = index;
            let mut published = event(
                Topic::Deployment,
                EventType::DeploymentStatusUpdate,
                &deployment.id,
                &deployment.namespace,
                index,
                payload_of("Deployment", &deployment),
            );
            published.filter_keys = vec![deployment.job_id.clone()];
            self.events.publish(vec![published]);
            contents
                .deployments
                .insert(deployment.id.clone(), deployment);
        });
    }

    pub fn put_node(&self, mut node: Node) {
        self.write(&[Table::Nodes], |contents, index| {
            if node.create_index == 0 {
                node.create_index = index;
            }
            node.modify_index = index;
            self.events.publish(vec![event(
                Topic::Node,
                EventType::NodeRegistration,
                &node.id,
                "",
                index,
                payload_of("Node", &node),
            )]);
            contents.nodes.insert(node.id.clone(), node);
        });
    }

    /// Where an allocation's directory is, for the logs and fs endpoints.
    pub fn set_alloc_dir(&self, alloc_id: &str, dir: PathBuf) {
        self.lock().alloc_dirs.insert(alloc_id.to_string(), dir);
    }

    /// The client-node operations received so far.
    /// Makes `/v1/agent/health` answer `health`.
    pub fn set_health(&self, health: AgentHealth) {
        self.lock().health = Some(health);
    }

    pub fn client_calls(&self) -> Vec<ClientCall> {
        self.lock().client_calls.clone()
    }

    fn known_alloc(&self, alloc_id: &str) -> Result<Allocation, ApiError> {
        self.lock()
            .allocations
            .get(alloc_id)
            .cloned()
            .ok_or_else(|| ApiError::not_found(format!("Unknown allocation {alloc_id:?}")))
    }

    fn check_task(allocation: &Allocation, task: &Option<String>) -> Result<(), ApiError> {
        let Some(task) = task else { return Ok(()) };
        let known = allocation
            .job
            .as_deref()
            .into_iter()
            .flat_map(|job| job.task_groups.iter())
            .filter(|group| group.name == allocation.task_group)
            .flat_map(|group| group.tasks.iter())
            .any(|candidate| &candidate.name == task);
        if known {
            Ok(())
        } else {
            Err(ApiError::bad_request(format!("Task not running: {task}")))
        }
    }

    fn new_eval(
        &self,
        contents: &mut Contents,
        job: &Job,
        trigger: &str,
        index: u64,
    ) -> Evaluation {
        contents.eval_counter += 1;
        let eval = Evaluation {
            id: format!(
                "{:08x}-0000-4000-8000-{:012x}",
                contents.eval_counter, index
            ),
            namespace: job.namespace.clone(),
            priority: job.priority,
            r#type: job.r#type.clone(),
            triggered_by: trigger.to_string(),
            job_id: job.id.clone(),
            job_modify_index: job.job_modify_index,
            status: "pending".to_string(),
            create_index: index,
            modify_index: index,
            ..Evaluation::default()
        };
        contents.evaluations.insert(eval.id.clone(), eval.clone());
        eval
    }
}

impl StateReads for MemoryBackend {
    fn table_index(&self, tables: &[Table]) -> u64 {
        let contents = self.lock();
        tables
            .iter()
            .filter_map(|table| contents.table_indexes.get(table))
            .copied()
            .max()
            .unwrap_or(0)
    }

    async fn wait_for_change(
        &self,
        tables: &[Table],
        min_index: u64,
        deadline: tokio::time::Instant,
    ) {
        let mut receiver = self.changes.subscribe();
        loop {
            if self.table_index(tables) > min_index {
                return;
            }
            tokio::select! {
                changed = receiver.changed() => if changed.is_err() { return },
                () = tokio::time::sleep_until(deadline) => return,
            }
        }
    }

    fn jobs(&self, namespace: &str, prefix: &str) -> Result<Vec<Arc<Job>>, ApiError> {
        Ok(self
            .lock()
            .jobs
            .iter()
            .filter(|((job_namespace, id), _)| {
                namespace_matches(namespace, job_namespace) && id.starts_with(prefix)
            })
            .filter_map(|(_, versions)| versions.last().cloned().map(Arc::new))
            .collect())
    }

    fn job(&self, namespace: &str, job_id: &str) -> Result<Option<Job>, ApiError> {
        Ok(self
            .lock()
            .jobs
            .get(&(namespace.to_string(), job_id.to_string()))
            .and_then(|versions| versions.last().cloned()))
    }

    fn job_versions(&self, namespace: &str, job_id: &str) -> Result<Vec<Job>, ApiError> {
        Ok(self
            .lock()
            .jobs
            .get(&(namespace.to_string(), job_id.to_string()))
            .map(|versions| versions.iter().rev().cloned().collect())
            .unwrap_or_default())
    }

    fn job_summary(&self, namespace: &str, job_id: &str) -> Result<Option<JobSummary>, ApiError> {
        Ok(self
            .lock()
            .summaries
            .get(&(namespace.to_string(), job_id.to_string()))
            .cloned())
    }

    fn job_allocations(&self, namespace: &str, job_id: &str) -> Result<Vec<Allocation>, ApiError> {
        Ok(self
            .lock()
            .allocations
            .values()
            .filter(|allocation| allocation.namespace == namespace && allocation.job_id == job_id)
            .cloned()
            .collect())
    }

    fn job_evaluations(&self, namespace: &str, job_id: &str) -> Result<Vec<Evaluation>, ApiError> {
        Ok(self
            .lock()
            .evaluations
            .values()
            .filter(|eval| eval.namespace == namespace && eval.job_id == job_id)
            .cloned()
            .collect())
    }

    fn allocations(&self, namespace: &str, prefix: &str) -> Result<Vec<Allocation>, ApiError> {
        Ok(self
            .lock()
            .allocations
            .values()
            .filter(|allocation| {
                namespace_matches(namespace, &allocation.namespace)
                    && allocation.id.starts_with(prefix)
            })
            .cloned()
            .collect())
    }

    fn allocation(&self, alloc_id: &str) -> Result<Option<Allocation>, ApiError> {
        Ok(self.lock().allocations.get(alloc_id).cloned())
    }

    fn evaluations(&self, namespace: &str, prefix: &str) -> Result<Vec<Evaluation>, ApiError> {
        Ok(self
            .lock()
            .evaluations
            .values()
            .filter(|eval| {
                namespace_matches(namespace, &eval.namespace) && eval.id.starts_with(prefix)
            })
            .cloned()
            .collect())
    }

    fn evaluation(&self, eval_id: &str) -> Result<Option<Evaluation>, ApiError> {
        Ok(self.lock().evaluations.get(eval_id).cloned())
    }

    fn deployments(&self, namespace: &str, prefix: &str) -> Result<Vec<Deployment>, ApiError> {
        Ok(self
            .lock()
            .deployments
            .values()
            .filter(|deployment| {
                namespace_matches(namespace, &deployment.namespace)
                    && deployment.id.starts_with(prefix)
            })
            .cloned()
            .collect())
    }

    fn deployment(&self, deployment_id: &str) -> Result<Option<Deployment>, ApiError> {
        Ok(self.lock().deployments.get(deployment_id).cloned())
    }

    fn job_deployments(&self, namespace: &str, job_id: &str) -> Result<Vec<Deployment>, ApiError> {
        let mut found: Vec<Deployment> = self
            .lock()
            .deployments
            .values()
            .filter(|deployment| deployment.namespace == namespace && deployment.job_id == job_id)
            .cloned()
            .collect();
        found.sort_by(|a, b| b.create_index.cmp(&a.create_index).then(a.id.cmp(&b.id)));
        Ok(found)
    }

    fn evaluation_allocations(&self, eval_id: &str) -> Result<Vec<Allocation>, ApiError> {
        Ok(self
            .lock()
            .allocations
            .values()
            .filter(|allocation| allocation.eval_id == eval_id)
            .cloned()
            .collect())
    }

    fn nodes(&self, prefix: &str) -> Result<Vec<Node>, ApiError> {
        Ok(self
            .lock()
            .nodes
            .values()
            .filter(|node| node.id.starts_with(prefix))
            .cloned()
            .collect())
    }

    fn node(&self, node_id: &str) -> Result<Option<Node>, ApiError> {
        Ok(self.lock().nodes.get(node_id).cloned())
    }

    fn subscribe_events(&self, from_index: u64, filter: EventFilter) -> EventSubscription {
        self.events.subscribe(from_index, filter)
    }

    fn node_allocations(&self, node_id: &str) -> Result<Vec<Allocation>, ApiError> {
        Ok(self
            .lock()
            .allocations
            .values()
            .filter(|allocation| allocation.node_id == node_id)
            .cloned()
            .collect())
    }

    fn service_registrations(&self, namespace: &str) -> Result<Vec<ServiceRegistration>, ApiError> {
        Ok(self.services_where(|service| namespace == "*" || service.namespace == namespace))
    }

    fn service_registrations_by_name(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Vec<ServiceRegistration>, ApiError> {
        Ok(self.services_where(|service| {
            service.namespace == namespace && service.service_name == name
        }))
    }

    fn service_registrations_by_alloc(
        &self,
        alloc_id: &str,
    ) -> Result<Vec<ServiceRegistration>, ApiError> {
        Ok(self.services_where(|service| service.alloc_id == alloc_id))
    }

    fn service_registrations_by_job(
        &self,
        namespace: &str,
        job_id: &str,
    ) -> Result<Vec<ServiceRegistration>, ApiError> {
        Ok(self
            .services_where(|service| service.namespace == namespace && service.job_id == job_id))
    }
}

impl MemoryBackend {
    fn services_where(
        &self,
        wanted: impl Fn(&ServiceRegistration) -> bool,
    ) -> Vec<ServiceRegistration> {
        self.lock()
            .services
            .values()
            .filter(|service| wanted(service))
            .cloned()
            .collect()
    }
}

impl AgentOperations for MemoryBackend {
    fn agent_info(&self) -> AgentInfo {
        let mut info = self.info.clone();
        if let Some(servers) = &self.lock().client_servers {
            info.client_servers = servers.clone();
        }
        info
    }

    /// Keeps the list, which [`AgentOperations::agent_info`] answers from then on.
    fn set_client_servers(&self, addresses: Vec<String>) -> Result<(), ApiError> {
        self.lock().client_servers = Some(addresses);
        Ok(())
    }

    /// Each part the info says runs is healthy unless [`MemoryBackend::set_health`] says
    /// otherwise.
    async fn agent_health(&self) -> AgentHealth {
        if let Some(health) = self.lock().health.clone() {
            return health;
        }
        AgentHealth {
            client: self.info.client_enabled.then(PartHealth::healthy),
            server: self.info.server_enabled.then(PartHealth::healthy),
        }
    }

    async fn register_job(
        &self,
        request: JobRegisterRequest,
    ) -> Result<JobRegisterResponse, ApiError> {
        let job = request
            .job
            .ok_or_else(|| ApiError::bad_request("Job must be specified"))?;
        // The register's warnings are the server's: what runs differently from Nomad.
        let warnings = drover_jobspec::support::check(&job).warnings_text();
        let job = self.put_job(job);
        let (eval, index) = self.write(&[Table::Evals], |contents, index| {
            (self.new_eval(contents, &job, "job-register", index), index)
        });
        Ok(JobRegisterResponse {
            eval_id: eval.id,
            eval_create_index: index,
            job_modify_index: job.job_modify_index,
            index,
            warnings,
            ..JobRegisterResponse::default()
        })
    }

    /// Stores the earlier version again as a new one, with an evaluation.
    async fn revert_job(
        &self,
        namespace: &str,
        request: drover_structs::JobRevertRequest,
    ) -> Result<JobRegisterResponse, ApiError> {
        let earlier = self
            .job_versions(namespace, &request.job_id)?
            .into_iter()
            .find(|job| job.version == request.job_version)
            .ok_or_else(|| ApiError::not_found("job version not found"))?;
        self.register_job(JobRegisterRequest {
            job: Some(earlier),
            ..JobRegisterRequest::default()
        })
        .await
    }

    /// Sets `Stable` on the stored version.
    async fn set_job_stability(
        &self,
        namespace: &str,
        request: drover_structs::JobStabilityRequest,
    ) -> Result<u64, ApiError> {
        let key = (namespace.to_string(), request.job_id.clone());
        self.write(&[Table::Jobs, Table::JobVersions], |contents, index| {
            let version = contents
                .jobs
                .get_mut(&key)
                .and_then(|versions| {
                    versions
                        .iter_mut()
                        .find(|job| job.version == request.job_version)
                })
                .ok_or_else(|| ApiError::not_found("job version not found"))?;
            version.stable = request.stable;
            Ok(index)
        })
    }

    async fn deregister_job(
        &self,
        namespace: &str,
        job_id: &str,
        purge: bool,
        _eval_priority: i64,
    ) -> Result<JobDeregisterResponse, ApiError> {
        let key = (namespace.to_string(), job_id.to_string());
        self.write(
            &[
                Table::Jobs,
                Table::JobVersions,
                Table::JobSummaries,
                Table::Evals,
            ],
            |contents, index| {
                let Some(versions) = contents.jobs.get_mut(&key) else {
                    // Nothing to deregister: Nomad's empty answer.
                    return Ok(JobDeregisterResponse::default());
                };
                let mut job = versions.last().cloned().unwrap_or_default();
                if purge {
                    contents.jobs.remove(&key);
                    contents.summaries.remove(&key);
                } else if let Some(latest) = versions.last_mut() {
                    latest.stop = true;
                    latest.modify_index = index;
                    job = latest.clone();
                }
                let eval = self.new_eval(contents, &job, "job-deregister", index);
                Ok(JobDeregisterResponse {
                    eval_id: eval.id,
                    eval_create_index: index,
                    job_modify_index: index,
                    index,
                    ..JobDeregisterResponse::default()
                })
            },
        )
    }

    async fn evaluate_job(
        &self,
        namespace: &str,
        job_id: &str,
    ) -> Result<JobRegisterResponse, ApiError> {
        let job = self
            .job(namespace, job_id)?
            .ok_or_else(|| ApiError::not_found("job not found"))?;
        let (eval, index) = self.write(&[Table::Evals], |contents, index| {
            (self.new_eval(contents, &job, "job-register", index), index)
        });
        Ok(JobRegisterResponse {
            eval_id: eval.id,
            eval_create_index: index,
            job_modify_index: job.job_modify_index,
            index,
            ..JobRegisterResponse::default()
        })
    }

    async fn stop_alloc(&self, alloc_id: &str) -> Result<AllocStopResponse, ApiError> {
        let allocation = self
            .allocation(alloc_id)?
            .ok_or_else(|| ApiError::not_found("allocation not found"))?;
        let job = allocation.job.as_deref().cloned().unwrap_or_default();
        let (eval, index) = self.write(&[Table::Evals, Table::Allocs], |contents, index| {
            if let Some(stored) = contents.allocations.get_mut(alloc_id) {
                stored.desired_transition.migrate = Some(true);
                stored.modify_index = index;
            }
            (self.new_eval(contents, &job, "alloc-stop", index), index)
        });
        Ok(AllocStopResponse {
            eval_id: eval.id,
            index,
        })
    }

    async fn restart_alloc(
        &self,
        alloc_id: &str,
        task: Option<String>,
        all_tasks: bool,
    ) -> Result<(), ApiError> {
        let allocation = self.known_alloc(alloc_id)?;
        Self::check_task(&allocation, &task)?;
        self.lock().client_calls.push(ClientCall::Restart {
            alloc_id: alloc_id.to_string(),
            task,
            all_tasks,
        });
        Ok(())
    }

    async fn signal_alloc(
        &self,
        alloc_id: &str,
        task: Option<String>,
        signal: String,
    ) -> Result<(), ApiError> {
        let allocation = self.known_alloc(alloc_id)?;
        Self::check_task(&allocation, &task)?;
        if !signal.starts_with("SIG") || signal.len() < 5 {
            return Err(ApiError::bad_request(format!("unknown signal {signal:?}")));
        }
        self.lock().client_calls.push(ClientCall::Signal {
            alloc_id: alloc_id.to_string(),
            task,
            signal,
        });
        Ok(())
    }

    async fn gc_alloc(&self, alloc_id: &str) -> Result<(), ApiError> {
        self.known_alloc(alloc_id)?;
        self.lock().client_calls.push(ClientCall::Gc {
            alloc_id: alloc_id.to_string(),
        });
        Ok(())
    }

    async fn alloc_stats(
        &self,
        alloc_id: &str,
        _task: Option<String>,
    ) -> Result<AllocResourceUsage, ApiError> {
        self.known_alloc(alloc_id)?;
        Ok(AllocResourceUsage::default())
    }

    /// Runs the command as a plain local process (no isolation, no terminal): enough to test
    /// the exec protocol end to end.
    async fn exec(&self, request: ExecRequest) -> Result<ExecSession, ApiError> {
        let allocation = self.known_alloc(&request.alloc_id)?;
        Self::check_task(&allocation, &Some(request.task.clone()))?;
        let (program, arguments) = request
            .command
            .split_first()
            .ok_or_else(|| ApiError::bad_request("command is not present"))?;
        let mut child = tokio::process::Command::new(program)
            .args(arguments)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|error| {
                ApiError::bad_request(format!("failed to start {program:?}: {error}"))
            })?;
        let (input_sender, input) = tokio::sync::mpsc::channel(16);
        let (output, output_receiver) = tokio::sync::mpsc::channel(16);
        tokio::spawn(supervise_exec(
            child_pipes(&mut child),
            child,
            input,
            output,
        ));
        Ok(ExecSession {
            input: input_sender,
            output: output_receiver,
        })
    }

    async fn register_node(&self, mut node: Node) -> Result<std::time::Duration, ApiError> {
        if node.id.is_empty() {
            return Err(ApiError::bad_request(
                "missing node ID for client registration",
            ));
        }
        node.status = "ready".to_string();
        self.put_node(node);
        Ok(MEMORY_HEARTBEAT_TTL)
    }

    async fn update_node_status(
        &self,
        node_id: &str,
        status: &str,
    ) -> Result<std::time::Duration, ApiError> {
        let mut node = self
            .node(node_id)?
            .ok_or_else(|| ApiError::not_found("node not found"))?;
        if node.status != status {
            node.status = status.to_string();
            self.put_node(node);
        }
        Ok(MEMORY_HEARTBEAT_TTL)
    }

    /// Merges the client-owned fields; the allocation's `AllocModifyIndex` stays, so a node's
    /// own reports do not wake its watcher.
    async fn update_allocs_from_client(&self, updates: Vec<Allocation>) -> Result<u64, ApiError> {
        Ok(self.write(&[Table::Allocs], |contents, index| {
            for update in updates {
                if let Some(stored) = contents.allocations.get_mut(&update.id) {
                    stored.merge_client_update(update, index);
                    stored.modify_index = index;
                }
            }
            index
        }))
    }

    /// Stores registrations as given (indexes set); no validation beyond a non-empty ID.
    async fn upsert_service_registrations(
        &self,
        services: Vec<ServiceRegistration>,
    ) -> Result<u64, ApiError> {
        if services.iter().any(|service| service.id.is_empty()) {
            return Err(ApiError::bad_request(
                "service registration is missing its ID",
            ));
        }
        Ok(
            self.write(&[Table::ServiceRegistrations], |contents, index| {
                for mut service in services {
                    let key = (service.namespace.clone(), service.id.clone());
                    service.create_index = contents
                        .services
                        .get(&key)
                        .map_or(index, |existing| existing.create_index);
                    service.modify_index = index;
                    contents.services.insert(key, service);
                }
                index
            }),
        )
    }

    async fn delete_service_registrations(&self, ids: Vec<String>) -> Result<u64, ApiError> {
        Ok(
            self.write(&[Table::ServiceRegistrations], |contents, index| {
                contents.services.retain(|(_, id), _| !ids.contains(id));
                index
            }),
        )
    }

    async fn delete_service_registration(
        &self,
        namespace: &str,
        id: &str,
    ) -> Result<u64, ApiError> {
        let key = (namespace.to_owned(), id.to_owned());
        if !self.lock().services.contains_key(&key) {
            return Err(ApiError::not_found("service registration not found"));
        }
        Ok(
            self.write(&[Table::ServiceRegistrations], |contents, index| {
                contents.services.remove(&key);
                index
            }),
        )
    }

    fn alloc_dir(&self, alloc_id: &str) -> Result<PathBuf, ApiError> {
        self.lock()
            .alloc_dirs
            .get(alloc_id)
            .cloned()
            .ok_or_else(|| ApiError::not_found(format!("Unknown allocation {alloc_id:?}")))
    }
}

type ExecPipes = (
    Option<tokio::process::ChildStdin>,
    Option<tokio::process::ChildStdout>,
    Option<tokio::process::ChildStderr>,
);

fn child_pipes(child: &mut tokio::process::Child) -> ExecPipes {
    (child.stdin.take(), child.stdout.take(), child.stderr.take())
}

/// Copies one output pipe into the session as it is written.
async fn pump<R: tokio::io::AsyncRead + Unpin>(
    mut pipe: R,
    output: tokio::sync::mpsc::Sender<ExecOutput>,
    wrap: fn(Vec<u8>) -> ExecOutput,
) {
    use tokio::io::AsyncReadExt;
    let mut buffer = vec![0u8; 8192];
    while let Ok(read) = pipe.read(&mut buffer).await {
        if read == 0 || output.send(wrap(buffer[..read].to_vec())).await.is_err() {
            return;
        }
    }
}

/// Feeds input to the process and reports its output and exit; a caller that goes away
/// (input closed) kills it.
async fn supervise_exec(
    pipes: ExecPipes,
    mut child: tokio::process::Child,
    mut input: tokio::sync::mpsc::Receiver<ExecInput>,
    output: tokio::sync::mpsc::Sender<ExecOutput>,
) {
    use std::os::unix::process::ExitStatusExt;
    use tokio::io::AsyncWriteExt;
    let (mut stdin, stdout, stderr) = pipes;
    let stdout_pump =
        stdout.map(|pipe| tokio::spawn(pump(pipe, output.clone(), ExecOutput::Stdout)));
    let stderr_pump =
        stderr.map(|pipe| tokio::spawn(pump(pipe, output.clone(), ExecOutput::Stderr)));
    let status = loop {
        tokio::select! {
            received = input.recv() => match received {
                Some(ExecInput::Stdin(data)) => {
                    if let Some(pipe) = stdin.as_mut() {
                        let _ = pipe.write_all(&data).await;
                    }
                }
                Some(ExecInput::StdinClose) => stdin = None,
                Some(ExecInput::TtySize { .. }) => {}
                None => {
                    let _ = child.kill().await;
                    return;
                }
            },
            status = child.wait() => break status,
        }
    };
    for pump in [stdout_pump, stderr_pump].into_iter().flatten() {
        let _ = pump.await;
    }
    let exit_code = match status {
        Ok(status) => status
            .code()
            .or_else(|| status.signal().map(|signal| 128 + signal))
            .unwrap_or(-1),
        Err(_) => -1,
    };
    let _ = output.send(ExecOutput::Exited { exit_code }).await;
}
