//! [`ApiClient`]: a typed async client of the `/v1` API over reqwest, as the CLI uses it.
//! The address comes from `-address`, else `NOMAD_ADDR`, else `http://127.0.0.1:4646`; a token
//! from `NOMAD_TOKEN` is sent as `X-Nomad-Token`.
//!
//! Not here: output formatting (the CLI) or retries.

use drover_structs::{
    AllocFileInfo, AllocListStub, AllocResourceUsage, AllocStopResponse, Allocation, Evaluation,
    GenericResponse, Job, JobDeregisterResponse, JobListStub, JobRegisterRequest,
    JobRegisterResponse, JobSummary, Node, NodeListStub, ServiceRegistration,
    ServiceRegistrationListStub, StreamFrame,
};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde::de::DeserializeOwned;
use serde_json::json;

/// The address used when neither `-address` nor `NOMAD_ADDR` is given.
pub const DEFAULT_ADDRESS: &str = "http://127.0.0.1:4646";

/// What Go's `url.PathEscape` leaves alone; everything else (including `/`) is escaped.
const PATH_SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b'$')
    .remove(b'&')
    .remove(b'+')
    .remove(b',')
    .remove(b';')
    .remove(b'=')
    .remove(b':')
    .remove(b'@');

/// What stays unescaped in a query key or value.
const QUERY_COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Escapes one path segment as Go's `url.PathEscape` does (so `a/b` becomes `a%2Fb`).
pub fn escape_path_segment(segment: &str) -> String {
    utf8_percent_encode(segment, PATH_SEGMENT).to_string()
}

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("is the agent running at {address}?")]
    Connect {
        address: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("Unexpected response code: {status} ({message})")]
    Status { status: u16, message: String },
    #[error("failed to decode the response: {0}")]
    Decode(String),
    #[error("request failed: {0}")]
    Transport(#[source] reqwest::Error),
    #[error("invalid address {address:?}: {message}")]
    Address { address: String, message: String },
}

impl ClientError {
    /// The HTTP status of an error answer, if the agent answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            ClientError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// Where and as whom to connect.
#[derive(Debug, Clone, Default)]
pub struct ClientConfig {
    /// `-address`; falls back to `NOMAD_ADDR`, then [`DEFAULT_ADDRESS`].
    pub address: Option<String>,
    /// Falls back to `NOMAD_TOKEN`.
    pub token: Option<String>,
    /// `-namespace`; falls back to `NOMAD_NAMESPACE`, then the agent's default.
    pub namespace: Option<String>,
    /// `-region`; falls back to `NOMAD_REGION`.
    pub region: Option<String>,
}

impl ClientConfig {
    /// Fills unset fields from `NOMAD_ADDR`, `NOMAD_TOKEN`, `NOMAD_NAMESPACE`, `NOMAD_REGION`.
    pub fn with_environment(mut self) -> Self {
        let from_env = |name: &str| std::env::var(name).ok().filter(|value| !value.is_empty());
        self.address = self.address.or_else(|| from_env("NOMAD_ADDR"));
        self.token = self.token.or_else(|| from_env("NOMAD_TOKEN"));
        self.namespace = self.namespace.or_else(|| from_env("NOMAD_NAMESPACE"));
        self.region = self.region.or_else(|| from_env("NOMAD_REGION"));
        self
    }
}

/// A log stream being read: frames as they arrive.
pub struct LogStream {
    response: reqwest::Response,
    buffer: Vec<u8>,
    plain: bool,
}

impl LogStream {
    /// The next frame, `None` at the end of the stream. For plain streams each chunk is one
    /// frame with only `Data` set.
    pub async fn next_frame(&mut self) -> Result<Option<StreamFrame>, ClientError> {
        loop {
            if self.plain {
                return match self
                    .response
                    .chunk()
                    .await
                    .map_err(ClientError::Transport)?
                {
                    Some(chunk) => Ok(Some(StreamFrame {
                        data: drover_structs::Bytes(chunk.to_vec()),
                        ..StreamFrame::default()
                    })),
                    None => Ok(None),
                };
            }
            if let Some(frame) = self.take_buffered_frame()? {
                return Ok(Some(frame));
            }
            match self
                .response
                .chunk()
                .await
                .map_err(ClientError::Transport)?
            {
                Some(chunk) => self.buffer.extend_from_slice(&chunk),
                None => {
                    return if self.buffer.iter().all(u8::is_ascii_whitespace) {
                        Ok(None)
                    } else {
                        Err(ClientError::Decode(
                            "the log stream ended inside a frame".into(),
                        ))
                    };
                }
            }
        }
    }

    fn take_buffered_frame(&mut self) -> Result<Option<StreamFrame>, ClientError> {
        let mut frames =
            serde_json::Deserializer::from_slice(&self.buffer).into_iter::<StreamFrame>();
        match frames.next() {
            Some(Ok(frame)) => {
                let consumed = frames.byte_offset();
                self.buffer.drain(..consumed);
                Ok(Some(frame))
            }
            Some(Err(error)) if error.is_eof() => Ok(None),
            Some(Err(error)) => Err(ClientError::Decode(error.to_string())),
            None => Ok(None),
        }
    }
}

/// Options of a logs request.
#[derive(Debug, Clone)]
pub struct LogsQuery {
    pub task: String,
    pub stderr: bool,
    pub follow: bool,
    /// `true`: `offset` counts back from the end.
    pub from_end: bool,
    pub offset: u64,
    pub plain: bool,
}

/// What an answer's headers say about it (Nomad's `QueryMeta`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResponseMeta {
    /// `X-Nomad-Index`.
    pub last_index: u64,
    /// `X-Nomad-KnownLeader`.
    pub known_leader: bool,
    /// `X-Nomad-NextToken`: empty on a list's last page.
    pub next_token: String,
    /// How long the request took, as Nomad's client measures `RequestTime`.
    pub request_time_nanos: u64,
}

/// The typed client.
#[derive(Debug, Clone)]
pub struct ApiClient {
    http: reqwest::Client,
    address: String,
    token: Option<String>,
    namespace: Option<String>,
    region: Option<String>,
}

impl ApiClient {
    /// A client for `config` (environment already applied or not, as the caller chose).
    pub fn new(config: ClientConfig) -> Result<Self, ClientError> {
        let address = config
            .address
            .unwrap_or_else(|| DEFAULT_ADDRESS.to_string())
            .trim_end_matches('/')
            .to_string();
        let address = if address.contains("://") {
            address
        } else {
            format!("http://{address}")
        };
        if !address.starts_with("http://") {
            return Err(ClientError::Address {
                address,
                message: "only http:// addresses are supported".into(),
            });
        }
        let http = reqwest::Client::builder()
            .connect_timeout(std::time::Duration::from_secs(10))
            .build()
            .map_err(ClientError::Transport)?;
        Ok(ApiClient {
            http,
            address,
            token: config.token,
            namespace: config.namespace,
            region: config.region,
        })
    }

    /// The agent address this client talks to.
    pub fn address(&self) -> &str {
        &self.address
    }

    fn request(
        &self,
        method: reqwest::Method,
        path: &str,
        query: &[(&str, String)],
    ) -> reqwest::RequestBuilder {
        let mut pairs: Vec<(&str, String)> = query.to_vec();
        if let Some(namespace) = &self.namespace {
            pairs.push(("namespace", namespace.clone()));
        }
        if let Some(region) = &self.region {
            pairs.push(("region", region.clone()));
        }
        let mut url = format!("{}{path}", self.address);
        for (position, (key, value)) in pairs.iter().enumerate() {
            url.push(if position == 0 { '?' } else { '&' });
            url.push_str(&utf8_percent_encode(key, QUERY_COMPONENT).to_string());
            url.push('=');
            url.push_str(&utf8_percent_encode(value, QUERY_COMPONENT).to_string());
        }
        let mut builder = self.http.request(method, url);
        if let Some(token) = &self.token {
            builder = builder.header("X-Nomad-Token", token);
        }
        builder
    }

    async fn send(
        &self,
        builder: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, ClientError> {
        let response = builder.send().await.map_err(|error| {
            if error.is_connect() || error.is_timeout() {
                ClientError::Connect {
                    address: self.address.clone(),
                    source: error,
                }
            } else {
                ClientError::Transport(error)
            }
        })?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let message = response.text().await.unwrap_or_default();
        Err(ClientError::Status {
            status: status.as_u16(),
            message: message.trim_end().to_string(),
        })
    }

    async fn decode<T: DeserializeOwned>(response: reqwest::Response) -> Result<T, ClientError> {
        let bytes = response.bytes().await.map_err(ClientError::Transport)?;
        serde_json::from_slice(&bytes).map_err(|error| ClientError::Decode(error.to_string()))
    }

    async fn get<T: DeserializeOwned>(
        &self,
        path: &str,
        query: &[(&str, String)],
    ) -> Result<T, ClientError> {
        let response = self
            .send(self.request(reqwest::Method::GET, path, query))
            .await?;
        Self::decode(response).await
    }

    async fn put<T: DeserializeOwned>(
        &self,
        path: &str,
        query: &[(&str, String)],
        body: Option<serde_json::Value>,
    ) -> Result<T, ClientError> {
        let mut builder = self.request(reqwest::Method::PUT, path, query);
        if let Some(body) = body {
            builder = builder.json(&body);
        }
        let response = self.send(builder).await?;
        Self::decode(response).await
    }

    /// One call whose answer is arbitrary JSON, or nothing for an empty body (the ACL
    /// commands, whose answers the CLI prints field by field).
    pub async fn call_json(
        &self,
        method: &str,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> Result<Option<serde_json::Value>, ClientError> {
        self.call_json_query(method, path, &[], body).await
    }

    /// [`call_json`](Self::call_json) with query parameters (besides the namespace and region
    /// every call carries).
    pub async fn call_json_query(
        &self,
        method: &str,
        path: &str,
        query: &[(&str, String)],
        body: Option<serde_json::Value>,
    ) -> Result<Option<serde_json::Value>, ClientError> {
        let method = reqwest::Method::from_bytes(method.as_bytes())
            .map_err(|error| ClientError::Decode(format!("method {method:?}: {error}")))?;
        let mut builder = self.request(method, path, query);
        if let Some(body) = body {
            builder = builder.json(&body);
        }
        let response = self.send(builder).await?;
        let bytes = response.bytes().await.map_err(ClientError::Transport)?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(None);
        }
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|error| ClientError::Decode(error.to_string()))
    }

    /// A `GET` whose answer is arbitrary JSON, with what its headers say (Nomad's `QueryMeta`).
    pub async fn call_json_with_meta(
        &self,
        method: &str,
        path: &str,
        query: &[(&str, String)],
    ) -> Result<(Option<serde_json::Value>, ResponseMeta), ClientError> {
        let method = reqwest::Method::from_bytes(method.as_bytes())
            .map_err(|error| ClientError::Decode(format!("method {method:?}: {error}")))?;
        let started = std::time::Instant::now();
        let response = self.send(self.request(method, path, query)).await?;
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|value| value.to_str().ok())
                .unwrap_or_default()
                .to_owned()
        };
        let mut meta = ResponseMeta {
            last_index: header("X-Nomad-Index").parse().unwrap_or_default(),
            known_leader: header("X-Nomad-KnownLeader") == "true",
            next_token: header("X-Nomad-NextToken"),
            request_time_nanos: 0,
        };
        let bytes = response.bytes().await.map_err(ClientError::Transport)?;
        meta.request_time_nanos = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok((None, meta));
        }
        serde_json::from_slice(&bytes)
            .map(|value| (Some(value), meta))
            .map_err(|error| ClientError::Decode(error.to_string()))
    }

    fn job_path(job_id: &str, suffix: &str) -> String {
        format!("/v1/job/{}{suffix}", escape_path_segment(job_id))
    }

    pub async fn jobs(&self, prefix: &str) -> Result<Vec<JobListStub>, ClientError> {
        self.get("/v1/jobs", &[("prefix", prefix.to_string())])
            .await
    }

    pub async fn job(&self, job_id: &str) -> Result<Job, ClientError> {
        self.get(&Self::job_path(job_id, ""), &[]).await
    }

    pub async fn register_job(&self, job: &Job) -> Result<JobRegisterResponse, ClientError> {
        self.register(&JobRegisterRequest {
            job: Some(job.clone()),
            ..JobRegisterRequest::default()
        })
        .await
    }

    /// `PUT /v1/jobs` with a whole register request (a submission, an enforced index, …).
    pub async fn register(
        &self,
        request: &JobRegisterRequest,
    ) -> Result<JobRegisterResponse, ClientError> {
        let body = serde_json::to_value(request)
            .map_err(|error| ClientError::Decode(error.to_string()))?;
        self.put("/v1/jobs", &[], Some(body)).await
    }

    /// A node's metadata (`GET /v1/client/metadata`): the node `node_id` names, else the
    /// agent's own.
    pub async fn node_meta(
        &self,
        node_id: Option<&str>,
    ) -> Result<drover_structs::node_meta::NodeMetaResponse, ClientError> {
        let query: Vec<(&str, String)> = node_id
            .filter(|node_id| !node_id.is_empty())
            .map(|node_id| vec![("node_id", node_id.to_owned())])
            .unwrap_or_default();
        self.get("/v1/client/metadata", &query).await
    }

    /// Applies dynamic node metadata (`POST /v1/client/metadata`; a `None` unsets a key).
    pub async fn apply_node_meta(
        &self,
        request: &drover_structs::node_meta::NodeMetaApplyRequest,
    ) -> Result<drover_structs::node_meta::NodeMetaResponse, ClientError> {
        let builder = self
            .request(reqwest::Method::POST, "/v1/client/metadata", &[])
            .json(request);
        let response = self.send(builder).await?;
        Self::decode(response).await
    }

    /// The jobspec source version `version` of a job was registered from.
    pub async fn job_submission(
        &self,
        job_id: &str,
        version: u64,
    ) -> Result<drover_structs::JobSubmission, ClientError> {
        self.get(
            &Self::job_path(job_id, "/submission"),
            &[("version", version.to_string())],
        )
        .await
    }

    /// Registers a job only if its stored `JobModifyIndex` is `job_modify_index` (0: only if
    /// no such job exists), as `job run -check-index` does.
    pub async fn register_job_enforcing_index(
        &self,
        job: &Job,
        job_modify_index: u64,
    ) -> Result<JobRegisterResponse, ClientError> {
        self.register(&JobRegisterRequest {
            job: Some(job.clone()),
            enforce_index: true,
            job_modify_index,
            ..JobRegisterRequest::default()
        })
        .await
    }

    /// What registering `job` would do (`POST /v1/job/<id>/plan`), with its diff if asked.
    pub async fn plan_job(
        &self,
        job: &Job,
        diff: bool,
    ) -> Result<drover_structs::JobPlanResponse, ClientError> {
        let request = drover_structs::JobPlanRequest {
            job: Some(job.clone()),
            diff,
            ..drover_structs::JobPlanRequest::default()
        };
        let body = serde_json::to_value(&request)
            .map_err(|error| ClientError::Decode(error.to_string()))?;
        self.put(&Self::job_path(&job.id, "/plan"), &[], Some(body))
            .await
    }

    /// The kept versions of a job, newest first, with each one's diff from the one before
    /// when `diffs` is set (`GET /v1/job/<id>/versions`).
    pub async fn job_versions(
        &self,
        job_id: &str,
        diffs: bool,
    ) -> Result<drover_structs::JobVersionsResponse, ClientError> {
        self.get(
            &Self::job_path(job_id, "/versions"),
            &[("diffs", diffs.to_string())],
        )
        .await
    }

    /// [`ApiClient::job_versions`] with every version's diff taken against one version: the
    /// one tagged `diff_tag`, else the one numbered `diff_version` (Nomad 1.9's `diff_tag`,
    /// `diff_version`).
    pub async fn job_versions_against(
        &self,
        job_id: &str,
        diff_tag: Option<&str>,
        diff_version: Option<u64>,
    ) -> Result<drover_structs::JobVersionsResponse, ClientError> {
        let mut query = vec![("diffs", "true".to_owned())];
        if let Some(tag) = diff_tag {
            query.push(("diff_tag", tag.to_owned()));
        }
        if let Some(version) = diff_version {
            query.push(("diff_version", version.to_string()));
        }
        self.get(&Self::job_path(job_id, "/versions"), &query).await
    }

    pub async fn deregister_job(
        &self,
        job_id: &str,
        purge: bool,
    ) -> Result<JobDeregisterResponse, ClientError> {
        let response = self
            .send(self.request(
                reqwest::Method::DELETE,
                &Self::job_path(job_id, ""),
                &[("purge", purge.to_string())],
            ))
            .await?;
        Self::decode(response).await
    }

    /// `PUT /v1/job/<id>/periodic/force`: the evaluation of the child launched now.
    pub async fn force_periodic(&self, job_id: &str) -> Result<JobRegisterResponse, ClientError> {
        self.put(&Self::job_path(job_id, "/periodic/force"), &[], None)
            .await
    }

    /// `PUT /v1/job/<id>/dispatch`, with `?idempotency_token=` when a token is given.
    pub async fn dispatch_job(
        &self,
        job_id: &str,
        request: &drover_structs::JobDispatchRequest,
        idempotency_token: &str,
    ) -> Result<drover_structs::JobDispatchResponse, ClientError> {
        let body = serde_json::to_value(request)
            .map_err(|error| ClientError::Decode(error.to_string()))?;
        let query: Vec<(&str, String)> = if idempotency_token.is_empty() {
            Vec::new()
        } else {
            vec![("idempotency_token", idempotency_token.to_owned())]
        };
        self.put(&Self::job_path(job_id, "/dispatch"), &query, Some(body))
            .await
    }

    /// Registers version `version` of a job again (`PUT /v1/job/<id>/revert`).
    pub async fn revert_job(
        &self,
        job_id: &str,
        version: u64,
    ) -> Result<JobRegisterResponse, ClientError> {
        let body = serde_json::json!({"JobID": job_id, "JobVersion": version});
        self.put(&Self::job_path(job_id, "/revert"), &[], Some(body))
            .await
    }

    /// A job's scale status (`GET /v1/job/<id>/scale`).
    pub async fn job_scale_status(
        &self,
        job_id: &str,
    ) -> Result<drover_structs::JobScaleStatus, ClientError> {
        self.get(&Self::job_path(job_id, "/scale"), &[]).await
    }

    /// Sets the count of one group of a job (`PUT /v1/job/<id>/scale`).
    pub async fn scale_job(
        &self,
        job_id: &str,
        group: &str,
        count: i64,
        message: &str,
    ) -> Result<JobRegisterResponse, ClientError> {
        let body = serde_json::json!({
            "Count": count,
            "Target": {"Group": group},
            "Message": message,
            "Error": false,
            "Meta": null,
            "PolicyOverride": false,
        });
        self.put(&Self::job_path(job_id, "/scale"), &[], Some(body))
            .await
    }

    /// Scaling policies (`GET /v1/scaling/policies`) with the `job`, `type` and `prefix`
    /// filters given.
    pub async fn scaling_policies(
        &self,
        filters: &[(&str, String)],
    ) -> Result<Vec<drover_structs::ScalingPolicyListStub>, ClientError> {
        self.get("/v1/scaling/policies", filters).await
    }

    /// One scaling policy (`GET /v1/scaling/policy/<id>`).
    pub async fn scaling_policy(
        &self,
        policy_id: &str,
    ) -> Result<drover_structs::ScalingPolicy, ClientError> {
        self.get(
            &format!("/v1/scaling/policy/{}", escape_path_segment(policy_id)),
            &[],
        )
        .await
    }

    /// Deployments whose ID starts with `prefix`.
    pub async fn deployments(
        &self,
        prefix: &str,
    ) -> Result<Vec<drover_structs::Deployment>, ClientError> {
        self.get("/v1/deployments", &[("prefix", prefix.to_string())])
            .await
    }

    pub async fn deployment(
        &self,
        deployment_id: &str,
    ) -> Result<drover_structs::Deployment, ClientError> {
        self.get(
            &format!("/v1/deployment/{}", escape_path_segment(deployment_id)),
            &[],
        )
        .await
    }

    /// A job's latest deployment (`null` when it has none).
    pub async fn job_latest_deployment(
        &self,
        job_id: &str,
    ) -> Result<Option<drover_structs::Deployment>, ClientError> {
        self.get(&Self::job_path(job_id, "/deployment"), &[]).await
    }

    /// A job's deployments (`GET /v1/job/<id>/deployments?all=`).
    pub async fn job_deployments(
        &self,
        job_id: &str,
        all: bool,
    ) -> Result<Vec<drover_structs::Deployment>, ClientError> {
        self.get(
            &Self::job_path(job_id, "/deployments"),
            &[("all", all.to_string())],
        )
        .await
    }

    /// `PUT /v1/job/<id>/evaluate` with Nomad's `EvalOptions` (`ForceReschedule`).
    pub async fn evaluate_job(
        &self,
        job_id: &str,
        force_reschedule: bool,
    ) -> Result<JobRegisterResponse, ClientError> {
        let body = json!({"JobID": job_id, "EvalOptions": {"ForceReschedule": force_reschedule}});
        self.put(&Self::job_path(job_id, "/evaluate"), &[], Some(body))
            .await
    }

    /// A deployment write (`promote`, `fail`, `pause`, `allocation-health`) with its body.
    pub async fn deployment_write(
        &self,
        write: &str,
        deployment_id: &str,
        body: serde_json::Value,
    ) -> Result<drover_structs::DeploymentUpdateResponse, ClientError> {
        self.put(
            &format!(
                "/v1/deployment/{write}/{}",
                escape_path_segment(deployment_id)
            ),
            &[],
            Some(body),
        )
        .await
    }

    pub async fn job_summary(&self, job_id: &str) -> Result<JobSummary, ClientError> {
        self.get(&Self::job_path(job_id, "/summary"), &[]).await
    }

    pub async fn job_allocations(
        &self,
        job_id: &str,
        all: bool,
    ) -> Result<Vec<AllocListStub>, ClientError> {
        self.get(
            &Self::job_path(job_id, "/allocations"),
            &[("all", all.to_string())],
        )
        .await
    }

    pub async fn job_evaluations(&self, job_id: &str) -> Result<Vec<Evaluation>, ClientError> {
        self.get(&Self::job_path(job_id, "/evaluations"), &[]).await
    }

    pub async fn evaluation(&self, eval_id: &str) -> Result<Evaluation, ClientError> {
        self.get(
            &format!("/v1/evaluation/{}", escape_path_segment(eval_id)),
            &[],
        )
        .await
    }

    pub async fn evaluation_allocations(
        &self,
        eval_id: &str,
    ) -> Result<Vec<AllocListStub>, ClientError> {
        self.get(
            &format!(
                "/v1/evaluation/{}/allocations",
                escape_path_segment(eval_id)
            ),
            &[],
        )
        .await
    }

    pub async fn allocations(&self, prefix: &str) -> Result<Vec<AllocListStub>, ClientError> {
        self.get("/v1/allocations", &[("prefix", prefix.to_string())])
            .await
    }

    pub async fn allocation(&self, alloc_id: &str) -> Result<Allocation, ClientError> {
        self.get(
            &format!("/v1/allocation/{}", escape_path_segment(alloc_id)),
            &[],
        )
        .await
    }

    pub async fn stop_allocation(&self, alloc_id: &str) -> Result<AllocStopResponse, ClientError> {
        self.put(
            &format!("/v1/allocation/{}/stop", escape_path_segment(alloc_id)),
            &[],
            None,
        )
        .await
    }

    pub async fn restart_allocation(
        &self,
        alloc_id: &str,
        task: Option<&str>,
        all_tasks: bool,
    ) -> Result<GenericResponse, ClientError> {
        self.put(
            &format!(
                "/v1/client/allocation/{}/restart",
                escape_path_segment(alloc_id)
            ),
            &[],
            Some(json!({"TaskName": task.unwrap_or(""), "AllTasks": all_tasks})),
        )
        .await
    }

    pub async fn signal_allocation(
        &self,
        alloc_id: &str,
        task: Option<&str>,
        signal: &str,
    ) -> Result<GenericResponse, ClientError> {
        self.put(
            &format!(
                "/v1/client/allocation/{}/signal",
                escape_path_segment(alloc_id)
            ),
            &[],
            Some(json!({"Task": task.unwrap_or(""), "Signal": signal})),
        )
        .await
    }

    /// The latest result of each service check of an allocation, by check ID
    /// (`GET /v1/client/allocation/<id>/checks`).
    pub async fn allocation_checks(
        &self,
        alloc_id: &str,
    ) -> Result<std::collections::BTreeMap<String, drover_structs::CheckQueryResult>, ClientError>
    {
        self.get(
            &format!(
                "/v1/client/allocation/{}/checks",
                escape_path_segment(alloc_id)
            ),
            &[],
        )
        .await
    }

    pub async fn allocation_stats(
        &self,
        alloc_id: &str,
    ) -> Result<AllocResourceUsage, ClientError> {
        self.get(
            &format!(
                "/v1/client/allocation/{}/stats",
                escape_path_segment(alloc_id)
            ),
            &[],
        )
        .await
    }

    /// Opens a log stream of one task.
    pub async fn logs(&self, alloc_id: &str, query: &LogsQuery) -> Result<LogStream, ClientError> {
        let pairs = [
            ("task", query.task.clone()),
            (
                "type",
                if query.stderr { "stderr" } else { "stdout" }.to_string(),
            ),
            ("follow", query.follow.to_string()),
            (
                "origin",
                if query.from_end { "end" } else { "start" }.to_string(),
            ),
            ("offset", query.offset.to_string()),
            ("plain", query.plain.to_string()),
        ];
        let response = self
            .send(self.request(
                reqwest::Method::GET,
                &format!("/v1/client/fs/logs/{}", escape_path_segment(alloc_id)),
                &pairs,
            ))
            .await?;
        Ok(LogStream {
            response,
            buffer: Vec::new(),
            plain: query.plain,
        })
    }

    /// Opens the agent's log stream (`/v1/agent/monitor`) at `log_level`, lines as JSON with
    /// `json`; frames carry the lines in `Data`.
    pub async fn agent_monitor(
        &self,
        log_level: &str,
        json: bool,
    ) -> Result<LogStream, ClientError> {
        let pairs = [
            ("log_level", log_level.to_string()),
            ("log_json", json.to_string()),
        ];
        let response = self
            .send(self.request(reqwest::Method::GET, "/v1/agent/monitor", &pairs))
            .await?;
        Ok(LogStream {
            response,
            buffer: Vec::new(),
            plain: false,
        })
    }

    /// `ls`: the entries of a directory in an allocation's directory.
    pub async fn fs_list(
        &self,
        alloc_id: &str,
        path: &str,
    ) -> Result<Vec<AllocFileInfo>, ClientError> {
        self.get(
            &format!("/v1/client/fs/ls/{}", escape_path_segment(alloc_id)),
            &[("path", path.to_string())],
        )
        .await
    }

    /// `stat`: one entry of an allocation's directory.
    pub async fn fs_stat(&self, alloc_id: &str, path: &str) -> Result<AllocFileInfo, ClientError> {
        self.get(
            &format!("/v1/client/fs/stat/{}", escape_path_segment(alloc_id)),
            &[("path", path.to_string())],
        )
        .await
    }

    /// `cat`: the bytes of a file in an allocation's directory.
    pub async fn fs_cat(&self, alloc_id: &str, path: &str) -> Result<Vec<u8>, ClientError> {
        let response = self
            .send(self.request(
                reqwest::Method::GET,
                &format!("/v1/client/fs/cat/{}", escape_path_segment(alloc_id)),
                &[("path", path.to_string())],
            ))
            .await?;
        let bytes = response.bytes().await.map_err(ClientError::Transport)?;
        Ok(bytes.to_vec())
    }

    pub async fn nodes(&self, prefix: &str) -> Result<Vec<NodeListStub>, ClientError> {
        self.get("/v1/nodes", &[("prefix", prefix.to_string())])
            .await
    }

    pub async fn node(&self, node_id: &str) -> Result<Node, ClientError> {
        self.get(&format!("/v1/node/{}", escape_path_segment(node_id)), &[])
            .await
    }

    /// A blocking read: answers once the response's `X-Nomad-Index` passes `index` (or after
    /// the server's wait), with that index.
    async fn get_blocking<T: DeserializeOwned>(
        &self,
        path: &str,
        index: u64,
    ) -> Result<(T, u64), ClientError> {
        let query = [("index", index.to_string()), ("wait", "30s".to_string())];
        let response = self
            .send(self.request(reqwest::Method::GET, path, &query))
            .await?;
        let seen = response
            .headers()
            .get("X-Nomad-Index")
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.parse().ok())
            .unwrap_or(0);
        Ok((Self::decode(response).await?, seen))
    }

    /// `GET /v1/node/<id>?index=`: the node once it changed after `index`.
    pub async fn node_blocking(
        &self,
        node_id: &str,
        index: u64,
    ) -> Result<(Node, u64), ClientError> {
        self.get_blocking(&format!("/v1/node/{}", escape_path_segment(node_id)), index)
            .await
    }

    /// `GET /v1/node/<id>/allocations?index=`.
    pub async fn node_allocations_blocking(
        &self,
        node_id: &str,
        index: u64,
    ) -> Result<(Vec<Allocation>, u64), ClientError> {
        self.get_blocking(
            &format!("/v1/node/{}/allocations", escape_path_segment(node_id)),
            index,
        )
        .await
    }

    /// `PUT /v1/node/<id>/drain`: sets (`Some` spec) or cancels a drain.
    pub async fn update_node_drain(
        &self,
        node_id: &str,
        request: &drover_structs::NodeDrainRequest,
    ) -> Result<drover_structs::NodeDrainUpdateResponse, ClientError> {
        let body = serde_json::to_value(request)
            .map_err(|error| ClientError::Decode(error.to_string()))?;
        self.put(
            &format!("/v1/node/{}/drain", escape_path_segment(node_id)),
            &[],
            Some(body),
        )
        .await
    }

    /// `PUT /v1/node/<id>/eligibility`: `eligible` or `ineligible`.
    pub async fn update_node_eligibility(
        &self,
        node_id: &str,
        eligibility: &str,
    ) -> Result<drover_structs::NodeDrainUpdateResponse, ClientError> {
        let body = serde_json::json!({"NodeID": node_id, "Eligibility": eligibility});
        self.put(
            &format!("/v1/node/{}/eligibility", escape_path_segment(node_id)),
            &[],
            Some(body),
        )
        .await
    }

    pub async fn node_allocations(&self, node_id: &str) -> Result<Vec<Allocation>, ClientError> {
        self.get(
            &format!("/v1/node/{}/allocations", escape_path_segment(node_id)),
            &[],
        )
        .await
    }

    pub async fn evaluations(&self, prefix: &str) -> Result<Vec<Evaluation>, ClientError> {
        self.get("/v1/evaluations", &[("prefix", prefix.to_string())])
            .await
    }

    /// `GET /v1/operator/snapshot`: a snapshot archive, checked against the answer's
    /// `Digest` header (`sha-256=<base64>`) as Nomad's client does.
    pub async fn snapshot_save(&self, stale: bool) -> Result<Vec<u8>, ClientError> {
        let query = if stale {
            vec![("stale", "true".to_string())]
        } else {
            Vec::new()
        };
        let response = self
            .send(self.request(reqwest::Method::GET, "/v1/operator/snapshot", &query))
            .await?;
        let digest = response
            .headers()
            .get("Digest")
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let bytes = response.bytes().await.map_err(ClientError::Transport)?;
        let Some(expected) = digest.strip_prefix("sha-256=") else {
            return Err(ClientError::Decode(format!(
                "the snapshot's Digest header {digest:?} names no sha-256 sum"
            )));
        };
        use base64::Engine as _;
        let found =
            base64::engine::general_purpose::STANDARD.encode(drover_state::archive::sha256(&bytes));
        if found != expected {
            return Err(ClientError::Decode(format!(
                "the snapshot does not match its digest (sha-256={expected}, got sha-256={found}): \
                 it was damaged on the way"
            )));
        }
        Ok(bytes.to_vec())
    }

    /// `PUT /v1/operator/snapshot`: restores a snapshot archive; answers the new index.
    pub async fn snapshot_restore(&self, archive: Vec<u8>) -> Result<u64, ClientError> {
        let response = self
            .send(
                self.request(reqwest::Method::PUT, "/v1/operator/snapshot", &[])
                    .body(archive),
            )
            .await?;
        Ok(response
            .headers()
            .get("X-Nomad-Index")
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.parse().ok())
            .unwrap_or(0))
    }

    pub async fn agent_members(&self) -> Result<serde_json::Value, ClientError> {
        self.get("/v1/agent/members", &[]).await
    }

    /// The region's leader (`/v1/status/leader`): its address, empty when none is known.
    pub async fn status_leader(&self) -> Result<String, ClientError> {
        self.get("/v1/status/leader", &[]).await
    }

    /// The servers the agent's client talks to (`GET /v1/agent/servers`).
    pub async fn agent_servers(&self) -> Result<Vec<String>, ClientError> {
        self.get("/v1/agent/servers", &[]).await
    }

    /// Replaces the servers the agent's client talks to (`PUT /v1/agent/servers`, one
    /// `address` per server).
    pub async fn set_agent_servers(&self, addresses: &[String]) -> Result<(), ClientError> {
        let query: Vec<(&str, String)> = addresses
            .iter()
            .map(|address| ("address", address.clone()))
            .collect();
        let builder = self.request(reqwest::Method::PUT, "/v1/agent/servers", &query);
        self.send(builder).await.map(drop)
    }

    /// Forces the failed server `node` (`<name>.<region>`) out of the member list
    /// (`PUT /v1/agent/force-leave`): listed `left`, or with `prune` not listed at all.
    pub async fn force_leave(&self, node: &str, prune: bool) -> Result<(), ClientError> {
        let mut query = vec![("node", node.to_owned())];
        if prune {
            query.push(("prune", "true".to_owned()));
        }
        let builder = self.request(reqwest::Method::PUT, "/v1/agent/force-leave", &query);
        self.send(builder).await.map(drop)
    }

    pub async fn agent_self(&self) -> Result<serde_json::Value, ClientError> {
        self.get("/v1/agent/self", &[]).await
    }

    /// The namespace this client reads and writes in, when one was set.
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// The same client, acting in `namespace`.
    pub fn in_namespace(&self, namespace: &str) -> ApiClient {
        ApiClient {
            namespace: Some(namespace.to_string()),
            ..self.clone()
        }
    }

    /// `GET /v1/services`: the service names of the namespace (every one for `*`).
    pub async fn services(&self) -> Result<Vec<ServiceRegistrationListStub>, ClientError> {
        self.get("/v1/services", &[]).await
    }

    /// `GET /v1/service/<name>`: the registrations of one service.
    pub async fn service(&self, name: &str) -> Result<Vec<ServiceRegistration>, ClientError> {
        self.get(&format!("/v1/service/{}", escape_path_segment(name)), &[])
            .await
    }

    /// `DELETE /v1/service/<name>/<id>`.
    pub async fn delete_service(&self, name: &str, id: &str) -> Result<(), ClientError> {
        let path = format!(
            "/v1/service/{}/{}",
            escape_path_segment(name),
            escape_path_segment(id)
        );
        self.send(self.request(reqwest::Method::DELETE, &path, &[]))
            .await?;
        Ok(())
    }
}

/// Drains a framed or plain log stream into bytes (for non-follow reads and tests).
pub async fn collect_log_data(stream: &mut LogStream) -> Result<Vec<u8>, ClientError> {
    let mut data = Vec::new();
    while let Some(frame) = stream.next_frame().await? {
        data.extend_from_slice(&frame.data.0);
    }
    Ok(data)
}

#[cfg(test)]
#[allow(clippy::expect_used, clippy::unwrap_used)] // a failed expectation is a failed test
mod tests {
    use super::*;

    #[test]
    fn path_escape_matches_go() {
        assert_eq!(
            escape_path_segment("batch/dispatch-1-ab"),
            "batch%2Fdispatch-1-ab"
        );
        assert_eq!(escape_path_segment("web app"), "web%20app");
        assert_eq!(escape_path_segment("a:b@c=d"), "a:b@c=d");
    }
}
