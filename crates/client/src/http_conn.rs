//! [`HttpServerConn`]: the remote [`ServerConn`], for a client agent whose servers run in other
//! processes (`drover agent -client -servers=ADDR`) and for the node simulator over the
//! network. Each call is one HTTP request to a server agent's API under
//! `/v1/internal/…`, with the bodies of `drover_structs::client_rpc`, which the server's handlers
//! decode too.
//!
//! Servers are tried in turn: the one that answered last is asked first, and a server that
//! cannot be reached (refused, reset, timed out) or answers 5xx passes the call to the next
//! (the move is logged: `calls go to another server now`).
//! Errors map onto [`ServerConnError`]: nothing reachable → `Unavailable`; 404 on a heartbeat
//! → `UnknownNode`; 408 and 429 → `Unavailable`; a 403 or 404 on an allocation status report →
//! `Internal` (the answering server does not know the allocation or node yet, as a leader that
//! has just taken over may not: the report is sent again); 400 and other 4xx → `Rejected`; 5xx
//! or an answer that does not decode → `Internal`.
//!
//! Every answer must carry the server's cluster identity (`X-Drover-Cluster-ID`). The first
//! one the node sees is the cluster it joins, kept in `cluster_id_file` across restarts; an
//! answer from a server of another cluster (or of none) is refused before it is read, as
//! `ForeignCluster`, and the next server is tried. So a client pointed at servers that share
//! no state never registers with, nor takes its allocation list from, a stranger.
//!
//! **Boundary**: the only module of the client that knows HTTP routes. Not here: retries
//! with backoff (the callers own those) and TLS (the addresses are `http://`).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use drover_structs::client_rpc::{
    AclPolicySetResponse, AclWhoAmIResponse, AllocUpdateRequest, AllocsGetRequest,
    AllocsGetResponse, CLUSTER_ID_HEADER, NodeClientAllocsResponse, NodeRegisterRequest,
    NodeUpdateResponse, NodeUpdateStatusRequest, ServiceDeleteRequest, ServiceUpsertRequest,
    SignIdentitiesRequest, SignIdentitiesResponse, WorkloadIdentityRequest,
};
use drover_structs::service_catalog::ServiceRegistrationListStub;
use drover_structs::{Allocation, Node, ServiceRegistration, Variable, VariableMetadata};
use serde::Serialize;

use crate::server_conn::{
    AllocClientUpdate, Blocking, Indexed, NodeAllocations, ServerConn, ServerConnError,
};

/// The port a server address without one is reached on: the HTTP API's default, as drover's
/// clients talk to servers over HTTP (Nomad's own clients use its RPC port, 4647).
pub const DEFAULT_SERVER_PORT: u16 = 4646;

/// How the connection reaches its servers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpServerConnConfig {
    /// Server addresses (`host:port`, `host`, or `http://host:port`), tried in turn.
    pub servers: Vec<String>,
    /// How long a TCP connect may take before the next server is tried.
    pub connect_timeout: Duration,
    /// How long a call may take, on top of a blocking query's own wait.
    pub request_timeout: Duration,
    /// Where the identity of the cluster this node joined is kept (`None`: in memory only).
    pub cluster_id_file: Option<PathBuf>,
}

impl HttpServerConnConfig {
    /// Defaults for `servers`: a 5 s connect timeout and a 30 s request timeout.
    pub fn new(servers: Vec<String>) -> Self {
        HttpServerConnConfig {
            servers,
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(30),
            cluster_id_file: None,
        }
    }
}

/// Why an [`HttpServerConn`] could not be built.
#[derive(Debug, thiserror::Error)]
pub enum HttpConnError {
    #[error("no server addresses given")]
    NoServers,
    #[error("server address {address:?}: {message}")]
    BadAddress { address: String, message: String },
    #[error("reading the cluster identity {path}: {source}")]
    ClusterFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("building the http client")]
    Build {
        #[source]
        source: reqwest::Error,
    },
}

/// The remote connection to a list of server agents.
pub struct HttpServerConn {
    http: reqwest::Client,
    /// The servers, replaced as a whole by [`Self::set_servers`] (`PUT /v1/agent/servers`);
    /// a call works on the list it started with.
    servers: RwLock<Arc<ServerList>>,
    /// The index in `servers` of the server that answered last; calls start there.
    preferred: AtomicUsize,
    request_timeout: Duration,
    /// The cluster this node joined (the first identity a server answered with).
    cluster: Mutex<Option<String>>,
    cluster_id_file: Option<PathBuf>,
    /// Each registered node's secret ID, sent as `X-Nomad-Token` on its calls: a server
    /// accepts a node's calls only with it. One connection may serve several (simulated)
    /// nodes, so the secret is chosen per call: by the node the call names, else by the node
    /// whose allocations a status update reports (learned from its allocation lists).
    node_secrets: Mutex<NodeSecrets>,
}

/// The servers of a connection: the addresses as given, and the base URL of each, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerList {
    /// As configured or set (`10.0.0.1:4646`), what `/v1/agent/servers` lists.
    pub addresses: Vec<String>,
    /// `http://host:port`, one per address.
    pub bases: Vec<String>,
}

impl ServerList {
    /// Checks every address; an empty list is refused.
    pub fn parse(addresses: &[String]) -> Result<Self, HttpConnError> {
        if addresses.is_empty() {
            return Err(HttpConnError::NoServers);
        }
        let bases = addresses
            .iter()
            .map(|address| base_url(address))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ServerList {
            addresses: addresses.to_vec(),
            bases,
        })
    }
}

/// Secrets by node ID, and the allocation IDs each node was last told it has.
#[derive(Default)]
struct NodeSecrets {
    secrets: std::collections::HashMap<String, String>,
    allocs: std::collections::HashMap<String, std::collections::HashSet<String>>,
}

impl NodeSecrets {
    /// The secret for a call about `node_id`, or reporting `alloc_id`, else any node's.
    fn secret_for(&self, node_id: &str, alloc_id: Option<&str>) -> Option<String> {
        let node_id = if node_id.is_empty() {
            alloc_id.and_then(|alloc_id| {
                self.allocs
                    .iter()
                    .find(|(_, allocs)| allocs.contains(alloc_id))
                    .map(|(node_id, _)| node_id.as_str())
            })
        } else {
            Some(node_id)
        };
        match node_id {
            Some(node_id) => self.secrets.get(node_id).cloned(),
            None => self.secrets.values().next().cloned(),
        }
    }
}

/// Normalises one server address into a base URL.
pub fn base_url(address: &str) -> Result<String, HttpConnError> {
    let trimmed = address.trim().trim_end_matches('/');
    let bad = |message: &str| HttpConnError::BadAddress {
        address: address.to_owned(),
        message: message.to_owned(),
    };
    let host_port = match trimmed.split_once("://") {
        Some(("http", rest)) => rest,
        Some(_) => return Err(bad("only http:// servers are supported")),
        None => trimmed,
    };
    if host_port.is_empty() || host_port.contains('/') {
        return Err(bad("expected host:port"));
    }
    // A port is present when the text after the last ':' is all digits and, for IPv6, the
    // colon follows the closing bracket.
    let has_port = host_port.rsplit_once(':').is_some_and(|(host, port)| {
        !port.is_empty()
            && port.bytes().all(|byte| byte.is_ascii_digit())
            && (!host.contains(':') || host.ends_with(']'))
    });
    if has_port {
        Ok(format!("http://{host_port}"))
    } else {
        Ok(format!("http://{host_port}:{DEFAULT_SERVER_PORT}"))
    }
}

/// What a 404 means for the call that got it.
#[derive(Clone, Copy)]
enum NotFoundMeans {
    /// The node is unknown: register again.
    UnknownNode,
    /// Anything else: the request cannot succeed as sent.
    Rejected,
    /// A read of something that may not exist (a variable): the 404 is an answer, with an
    /// empty body and the index it was read at.
    Absent,
    /// A report on allocations: a 404 or 403 says the answering server's state does not know
    /// them, or this node, yet (a leader that has just taken over may not have read every
    /// write of the one before): `Internal`, to be sent again. Only a 400 rejects the report.
    NotYetKnown,
}

/// A server's successful answer: its body and its `X-Nomad-Index` (0 without one).
struct Reply {
    body: Vec<u8>,
    index: u64,
}

/// One call, ready to send to any server.
struct Call<'a> {
    method: reqwest::Method,
    path: String,
    query: Vec<(&'static str, String)>,
    body: Option<Vec<u8>>,
    timeout: Duration,
    node_id: &'a str,
    /// An allocation the call reports on, when it names no node (picks the node's secret).
    reports_alloc: Option<&'a str>,
    not_found: NotFoundMeans,
    /// Sent as `X-Nomad-Token` (a task's identity, for its variables; a bearer token the
    /// agent resolves); an empty one sends none (an anonymous request). `None`: the node's
    /// secret ID.
    token: Option<&'a str>,
}

fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, ServerConnError> {
    serde_json::to_vec(value).map_err(|error| ServerConnError::Rejected {
        message: format!("encoding the request: {error}"),
    })
}

fn nanos_to_duration(nanos: u64) -> Duration {
    Duration::from_nanos(nanos)
}

/// A variable path (or namespace, or prefix) as it goes into a URL: Nomad's path characters
/// (letters, digits, `-`, `_`, `~`, `.`, `/`) pass as they are; anything else is refused.
fn variable_path(path: &str) -> Result<String, ServerConnError> {
    if path
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '~' | '.' | '/' | '*'))
    {
        Ok(path.to_owned())
    } else {
        Err(ServerConnError::Rejected {
            message: format!("invalid variable path {path:?}"),
        })
    }
}

/// Node IDs go into paths: they are UUIDs, but nothing outside a path segment may pass.
fn path_segment(node_id: &str) -> Result<&str, ServerConnError> {
    let acceptable = !node_id.is_empty()
        && node_id
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_');
    if acceptable {
        Ok(node_id)
    } else {
        Err(ServerConnError::Rejected {
            message: format!("node ID {node_id:?} is not a valid identifier"),
        })
    }
}

impl HttpServerConn {
    /// A connection to `config.servers`.
    pub fn new(config: HttpServerConnConfig) -> Result<Self, HttpConnError> {
        let servers = ServerList::parse(&config.servers)?;
        let http = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .build()
            .map_err(|source| HttpConnError::Build { source })?;
        let joined = match &config.cluster_id_file {
            Some(path) => read_cluster_id(path)?,
            None => None,
        };
        Ok(HttpServerConn {
            http,
            servers: RwLock::new(Arc::new(servers)),
            preferred: AtomicUsize::new(0),
            request_timeout: config.request_timeout,
            cluster: Mutex::new(joined),
            cluster_id_file: config.cluster_id_file,
            node_secrets: Mutex::new(NodeSecrets::default()),
        })
    }

    /// The cluster this node joined, once a server has answered.
    pub fn joined_cluster(&self) -> Option<String> {
        self.cluster
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Accepts an answer of `base` only if it comes from the cluster this node joined; the
    /// first identity seen is joined (and kept in the cluster file).
    fn check_cluster(
        &self,
        base: &str,
        headers: &reqwest::header::HeaderMap,
    ) -> Result<(), ServerConnError> {
        let found = headers
            .get(CLUSTER_ID_HEADER)
            .and_then(|value| value.to_str().ok())
            .map(str::trim)
            .filter(|value| !value.is_empty());
        // The lock only guards a string (and, once, the file write that records it).
        let mut joined = self
            .cluster
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match (joined.as_deref(), found) {
            (Some(joined), Some(found)) if joined == found => Ok(()),
            (None, Some(found)) => {
                tracing::info!(server = %base, cluster_id = found, "joined the servers' cluster");
                if let Some(path) = &self.cluster_id_file
                    && let Err(error) = write_cluster_id(path, found)
                {
                    tracing::warn!(path = %path.display(), %error, "cannot record the cluster this node joined; it is kept in memory");
                }
                *joined = Some(found.to_owned());
                Ok(())
            }
            (joined, found) => Err(ServerConnError::ForeignCluster {
                server: base.to_owned(),
                joined: joined.unwrap_or("(none yet)").to_owned(),
                found: found.unwrap_or("(no cluster identity)").to_owned(),
            }),
        }
    }

    /// The servers, in the order given.
    pub fn servers(&self) -> Arc<ServerList> {
        // The lock only guards the swap of one pointer: a poisoned one still holds a whole list.
        self.servers
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Replaces the servers (Nomad's `SetServers`, behind `PUT /v1/agent/servers`): every
    /// address is checked first, so a bad one changes nothing. Calls under way finish on the
    /// list they started with; the next call starts at the first new server.
    pub fn set_servers(&self, addresses: &[String]) -> Result<(), HttpConnError> {
        let list = Arc::new(ServerList::parse(addresses)?);
        tracing::info!(servers = ?list.addresses, "the client's servers are set");
        *self
            .servers
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = list;
        self.preferred.store(0, Ordering::Relaxed);
        Ok(())
    }

    /// Sends `call` to each server in turn from the preferred one, and answers the first
    /// server's answer that settles the call.
    async fn send(&self, call: Call<'_>) -> Result<Vec<u8>, ServerConnError> {
        self.send_indexed(call).await.map(|reply| reply.body)
    }

    /// [`Self::send`], answering the server's index with the body.
    async fn send_indexed(&self, call: Call<'_>) -> Result<Reply, ServerConnError> {
        let servers = self.servers();
        let count = servers.bases.len();
        let start = self.preferred.load(Ordering::Relaxed) % count;
        let mut last_error = ServerConnError::Unavailable {
            message: "no server tried".to_owned(),
        };
        let mut refused_foreign = None;
        for offset in 0..count {
            let position = (start + offset) % count;
            let base = &servers.bases[position];
            match self.send_to(base, &call).await {
                Ok(reply) => {
                    if position != start {
                        tracing::info!(server = %base, previous = %servers.bases[start], "calls go to another server now");
                    }
                    self.preferred.store(position, Ordering::Relaxed);
                    return Ok(reply);
                }
                Err(error @ ServerConnError::ForeignCluster { .. }) => {
                    tracing::debug!(server = %base, path = %call.path, %error, "server of another cluster; trying the next server");
                    refused_foreign = Some(error);
                }
                Err(
                    error
                    @ (ServerConnError::Unavailable { .. } | ServerConnError::Internal { .. }),
                ) => {
                    tracing::debug!(server = %base, path = %call.path, %error, "server call failed; trying the next server");
                    last_error = error;
                }
                Err(error) => {
                    // The server answered and refused: another server would answer the same.
                    self.preferred.store(position, Ordering::Relaxed);
                    return Err(error);
                }
            }
        }
        // A stranger that answered says more about the failure than one that did not.
        Err(refused_foreign.unwrap_or(last_error))
    }

    async fn send_to(&self, base: &str, call: &Call<'_>) -> Result<Reply, ServerConnError> {
        // Query values are numbers and durations: nothing in them needs escaping.
        let mut url = format!("{base}{}", call.path);
        for (position, (key, value)) in call.query.iter().enumerate() {
            url.push(if position == 0 { '?' } else { '&' });
            url.push_str(key);
            url.push('=');
            url.push_str(value);
        }
        let mut builder = self
            .http
            .request(call.method.clone(), &url)
            .timeout(call.timeout);
        // A task's own token (its variables) goes as it is; every other call carries the
        // node's secret ID, which the server checks on node calls.
        let secret = match call.token {
            Some(token) => (!token.is_empty()).then(|| token.to_owned()),
            None => self
                .node_secrets
                .lock()
                .ok()
                .and_then(|secrets| secrets.secret_for(call.node_id, call.reports_alloc)),
        };
        if let Some(secret) = secret {
            builder = builder.header("X-Nomad-Token", secret);
        }
        if let Some(body) = &call.body {
            builder = builder
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.clone());
        }
        let response = builder
            .send()
            .await
            .map_err(|error| transport_error(base, &error))?;
        self.check_cluster(base, response.headers())?;
        let status = response.status();
        let index = response
            .headers()
            .get("X-Nomad-Index")
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.parse::<u64>().ok())
            .unwrap_or(0);
        let body = response
            .bytes()
            .await
            .map_err(|error| transport_error(base, &error))?;
        if status.is_success() {
            return Ok(Reply {
                body: body.to_vec(),
                index,
            });
        }
        if status.as_u16() == 404 && matches!(call.not_found, NotFoundMeans::Absent) {
            return Ok(Reply {
                body: Vec::new(),
                index,
            });
        }
        let message = {
            let text = String::from_utf8_lossy(&body).trim().to_owned();
            if text.is_empty() {
                format!("{} from {url}", status)
            } else {
                text
            }
        };
        Err(match status.as_u16() {
            404 | 403 if matches!(call.not_found, NotFoundMeans::NotYetKnown) => {
                ServerConnError::Internal { message }
            }
            404 => match call.not_found {
                NotFoundMeans::UnknownNode => ServerConnError::UnknownNode {
                    node_id: call.node_id.to_owned(),
                },
                NotFoundMeans::Rejected | NotFoundMeans::Absent | NotFoundMeans::NotYetKnown => {
                    ServerConnError::Rejected { message }
                }
            },
            // A request that timed out or came too soon: it may succeed when sent again.
            408 | 429 => ServerConnError::Unavailable { message },
            400..=499 => ServerConnError::Rejected { message },
            _ => ServerConnError::Internal { message },
        })
    }
}

/// The cluster identity kept in `path`, `None` if there is none yet.
fn read_cluster_id(path: &Path) -> Result<Option<String>, HttpConnError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text.trim().to_owned()).filter(|id| !id.is_empty())),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(HttpConnError::ClusterFile {
            path: path.to_owned(),
            source,
        }),
    }
}

/// Records `cluster_id` in `path`: written to a temporary file, synced, then renamed over.
fn write_cluster_id(path: &Path, cluster_id: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    let temporary = path.with_extension("tmp");
    let mut file = std::fs::File::create(&temporary)?;
    file.write_all(format!("{cluster_id}\n").as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&temporary, path)?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

/// A transport failure: the server could not be reached or did not answer in time.
fn transport_error(base: &str, error: &reqwest::Error) -> ServerConnError {
    let what = if error.is_timeout() {
        "timed out"
    } else if error.is_connect() {
        "cannot connect"
    } else {
        "request failed"
    };
    let mut message = format!("{base}: {what}");
    let mut source: Option<&dyn std::error::Error> = std::error::Error::source(error);
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    ServerConnError::Unavailable { message }
}

/// Decodes a server's JSON answer; one that does not decode is the server's failure.
fn decode<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ServerConnError> {
    serde_json::from_slice(body).map_err(|error| ServerConnError::Internal {
        message: format!("decoding the server's answer: {error}"),
    })
}

impl ServerConn for HttpServerConn {
    async fn register_node(&self, node: Node) -> Result<Duration, ServerConnError> {
        let node_id = node.id.clone();
        if !node.secret_id.is_empty()
            && let Ok(mut secrets) = self.node_secrets.lock()
        {
            secrets
                .secrets
                .insert(node.id.clone(), node.secret_id.clone());
        }
        let body = encode(&NodeRegisterRequest { node })?;
        let answer = self
            .send(Call {
                method: reqwest::Method::PUT,
                path: "/v1/internal/node/register".to_owned(),
                query: Vec::new(),
                body: Some(body),
                timeout: self.request_timeout,
                node_id: &node_id,
                reports_alloc: None,
                not_found: NotFoundMeans::Rejected,
                token: None,
            })
            .await?;
        let response: NodeUpdateResponse = decode(&answer)?;
        Ok(nanos_to_duration(response.heartbeat_ttl))
    }

    async fn heartbeat(&self, node_id: &str, status: &str) -> Result<Duration, ServerConnError> {
        let body = encode(&NodeUpdateStatusRequest {
            status: status.to_owned(),
        })?;
        let answer = self
            .send(Call {
                method: reqwest::Method::PUT,
                path: format!("/v1/internal/node/{}/update-status", path_segment(node_id)?),
                query: Vec::new(),
                body: Some(body),
                timeout: self.request_timeout,
                node_id,
                reports_alloc: None,
                not_found: NotFoundMeans::UnknownNode,
                token: None,
            })
            .await?;
        let response: NodeUpdateResponse = decode(&answer)?;
        Ok(nanos_to_duration(response.heartbeat_ttl))
    }

    async fn node_allocs(
        &self,
        node_id: &str,
        min_index: u64,
        max_wait: Duration,
    ) -> Result<NodeAllocations, ServerConnError> {
        let wait_millis = max_wait.as_millis().max(1);
        // The server may add up to a sixteenth of the wait as jitter before it answers.
        let timeout = max_wait + max_wait / 16 + self.request_timeout;
        let answer = self
            .send(Call {
                method: reqwest::Method::GET,
                path: format!("/v1/internal/node/{}/client-allocs", path_segment(node_id)?),
                query: vec![
                    ("index", min_index.to_string()),
                    ("wait", format!("{wait_millis}ms")),
                ],
                body: None,
                timeout,
                node_id,
                reports_alloc: None,
                not_found: NotFoundMeans::UnknownNode,
                token: None,
            })
            .await?;
        let response: NodeClientAllocsResponse = decode(&answer)?;
        if let Ok(mut secrets) = self.node_secrets.lock() {
            secrets.allocs.insert(
                node_id.to_owned(),
                response.allocs.keys().cloned().collect(),
            );
        }
        Ok(NodeAllocations {
            alloc_modify_indexes: response.allocs,
            index: response.index,
        })
    }

    async fn get_allocs(&self, alloc_ids: Vec<String>) -> Result<Vec<Allocation>, ServerConnError> {
        if alloc_ids.is_empty() {
            return Ok(Vec::new());
        }
        let body = encode(&AllocsGetRequest { alloc_ids })?;
        let answer = self
            .send(Call {
                method: reqwest::Method::PUT,
                path: "/v1/internal/allocs/get".to_owned(),
                query: Vec::new(),
                body: Some(body),
                timeout: self.request_timeout,
                node_id: "",
                reports_alloc: None,
                not_found: NotFoundMeans::Rejected,
                token: None,
            })
            .await?;
        let response: AllocsGetResponse = decode(&answer)?;
        Ok(response.allocs)
    }

    async fn update_allocs(&self, updates: Vec<AllocClientUpdate>) -> Result<(), ServerConnError> {
        if updates.is_empty() {
            return Ok(());
        }
        let first_alloc = updates
            .first()
            .map(|update| update.alloc_id.clone())
            .unwrap_or_default();
        let body = encode(&AllocUpdateRequest { alloc: updates })?;
        self.send(Call {
            method: reqwest::Method::PUT,
            path: "/v1/internal/node/update-alloc".to_owned(),
            query: Vec::new(),
            body: Some(body),
            timeout: self.request_timeout,
            node_id: "",
            reports_alloc: Some(&first_alloc),
            not_found: NotFoundMeans::NotYetKnown,
            token: None,
        })
        .await?;
        Ok(())
    }

    async fn upsert_services(
        &self,
        registrations: Vec<ServiceRegistration>,
    ) -> Result<(), ServerConnError> {
        if registrations.is_empty() {
            return Ok(());
        }
        let body = encode(&ServiceUpsertRequest {
            services: registrations,
        })?;
        self.send(Call {
            method: reqwest::Method::PUT,
            path: "/v1/internal/services/upsert".to_owned(),
            query: Vec::new(),
            body: Some(body),
            timeout: self.request_timeout,
            node_id: "",
            reports_alloc: None,
            not_found: NotFoundMeans::Rejected,
            token: None,
        })
        .await?;
        Ok(())
    }

    async fn delete_services(&self, service_ids: Vec<String>) -> Result<(), ServerConnError> {
        if service_ids.is_empty() {
            return Ok(());
        }
        let body = encode(&ServiceDeleteRequest { ids: service_ids })?;
        self.send(Call {
            method: reqwest::Method::PUT,
            path: "/v1/internal/services/delete".to_owned(),
            query: Vec::new(),
            body: Some(body),
            timeout: self.request_timeout,
            node_id: "",
            reports_alloc: None,
            not_found: NotFoundMeans::Rejected,
            token: None,
        })
        .await?;
        Ok(())
    }

    async fn sign_identities(
        &self,
        node_id: &str,
        node_secret_id: &str,
        requests: Vec<WorkloadIdentityRequest>,
    ) -> Result<SignIdentitiesResponse, ServerConnError> {
        if requests.is_empty() {
            return Ok(SignIdentitiesResponse::default());
        }
        let body = encode(&SignIdentitiesRequest {
            node_secret_id: node_secret_id.to_owned(),
            identities: requests,
        })?;
        let answer = self
            .send(Call {
                method: reqwest::Method::PUT,
                path: format!(
                    "/v1/internal/node/{}/sign-identities",
                    path_segment(node_id)?
                ),
                query: Vec::new(),
                body: Some(body),
                timeout: self.request_timeout,
                node_id,
                reports_alloc: None,
                not_found: NotFoundMeans::Rejected,
                token: None,
            })
            .await?;
        decode(&answer)
    }

    async fn read_variable(
        &self,
        token: &str,
        namespace: &str,
        path: &str,
        blocking: Blocking,
    ) -> Result<Indexed<Option<Variable>>, ServerConnError> {
        let mut query = vec![("namespace", variable_path(namespace)?)];
        query.extend(blocking_query(blocking));
        let reply = self
            .send_indexed(Call {
                method: reqwest::Method::GET,
                path: format!("/v1/var/{}", variable_path(path)?),
                query,
                body: None,
                timeout: self.blocking_timeout(blocking),
                node_id: "",
                reports_alloc: None,
                not_found: NotFoundMeans::Absent,
                token: Some(token),
            })
            .await?;
        let value = if reply.body.is_empty() {
            None
        } else {
            Some(decode(&reply.body)?)
        };
        Ok(Indexed {
            value,
            index: reply.index,
        })
    }

    async fn list_variables(
        &self,
        token: &str,
        namespace: &str,
        prefix: &str,
        blocking: Blocking,
    ) -> Result<Indexed<Vec<VariableMetadata>>, ServerConnError> {
        let mut query = vec![
            ("namespace", variable_path(namespace)?),
            ("prefix", variable_path(prefix)?),
        ];
        query.extend(blocking_query(blocking));
        self.read_indexed(Call {
            method: reqwest::Method::GET,
            path: "/v1/vars".to_owned(),
            query,
            body: None,
            timeout: self.blocking_timeout(blocking),
            node_id: "",
            reports_alloc: None,
            not_found: NotFoundMeans::Rejected,
            token: Some(token),
        })
        .await
    }

    async fn read_service(
        &self,
        token: &str,
        namespace: &str,
        name: &str,
        choose: Option<&str>,
        blocking: Blocking,
    ) -> Result<Indexed<Vec<ServiceRegistration>>, ServerConnError> {
        let mut query = vec![("namespace", escaped(namespace))];
        if let Some(choose) = choose {
            query.push(("choose", escaped(choose)));
        }
        query.extend(blocking_query(blocking));
        self.read_indexed(Call {
            method: reqwest::Method::GET,
            path: format!("/v1/service/{}", escaped(name)),
            query,
            body: None,
            timeout: self.blocking_timeout(blocking),
            node_id: "",
            reports_alloc: None,
            not_found: NotFoundMeans::Rejected,
            token: Some(token),
        })
        .await
    }

    async fn list_services(
        &self,
        token: &str,
        namespace: &str,
        blocking: Blocking,
    ) -> Result<Indexed<Vec<ServiceRegistrationListStub>>, ServerConnError> {
        let mut query = vec![("namespace", escaped(namespace))];
        query.extend(blocking_query(blocking));
        self.read_indexed(Call {
            method: reqwest::Method::GET,
            path: "/v1/services".to_owned(),
            query,
            body: None,
            timeout: self.blocking_timeout(blocking),
            node_id: "",
            reports_alloc: None,
            not_found: NotFoundMeans::Rejected,
            token: Some(token),
        })
        .await
    }
}

/// The bearer token resolutions a client-only agent asks of its servers (its task API and,
/// with ACLs on, its own endpoints need them); not [`ServerConn`] calls, as a client in the
/// server's own process resolves tokens from the server's state.
impl HttpServerConn {
    /// `ACL.WhoAmI`: who `token` stands for. A token the servers do not take is `Rejected`
    /// with their message (`Permission denied`, `ACL token not found`, `ACL token expired`).
    pub async fn acl_whoami(&self, token: &str) -> Result<AclWhoAmIResponse, ServerConnError> {
        self.acl_read("/v1/internal/acl/whoami", token).await
    }

    /// The policies `token` holds (none for a management token; `anonymous` for an empty
    /// token; a workload identity's `JobACL` policies), refused as [`Self::acl_whoami`].
    pub async fn acl_bearer_policies(
        &self,
        token: &str,
    ) -> Result<AclPolicySetResponse, ServerConnError> {
        self.acl_read("/v1/internal/acl/bearer-policies", token)
            .await
    }

    /// A `GET` of `path` made with `token`, whose 404 is a refusal.
    async fn acl_read<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        token: &str,
    ) -> Result<T, ServerConnError> {
        let answer = self
            .send(Call {
                method: reqwest::Method::GET,
                path: path.to_owned(),
                query: Vec::new(),
                body: None,
                timeout: self.request_timeout,
                node_id: "",
                reports_alloc: None,
                not_found: NotFoundMeans::Rejected,
                token: Some(token),
            })
            .await?;
        decode(&answer)
    }
}

impl HttpServerConn {
    /// A read's answer, decoded, with its index.
    async fn read_indexed<T: serde::de::DeserializeOwned>(
        &self,
        call: Call<'_>,
    ) -> Result<Indexed<T>, ServerConnError> {
        let reply = self.send_indexed(call).await?;
        Ok(Indexed {
            value: decode(&reply.body)?,
            index: reply.index,
        })
    }

    /// How long a read under `blocking` may take: the wait, the sixteenth of it the server
    /// may add as jitter, and the usual request timeout.
    fn blocking_timeout(&self, blocking: Blocking) -> Duration {
        if blocking.min_index == 0 {
            return self.request_timeout;
        }
        blocking.max_wait + blocking.max_wait / 16 + self.request_timeout
    }
}

/// The `index` and `wait` query parameters of a blocking read (none for an immediate one).
fn blocking_query(blocking: Blocking) -> Vec<(&'static str, String)> {
    if blocking.min_index == 0 {
        return Vec::new();
    }
    vec![
        ("index", blocking.min_index.to_string()),
        (
            "wait",
            format!("{}ms", blocking.max_wait.as_millis().max(1)),
        ),
    ]
}

/// `text` percent-encoded for a path segment or a query value.
fn escaped(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string()
}

#[cfg(test)]
#[allow(clippy::expect_used, clippy::unwrap_used)] // a failed expectation is a failed test
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    #[test]
    fn server_addresses_become_base_urls_with_the_http_port_by_default() {
        assert_eq!(base_url("10.0.0.1:4646").unwrap(), "http://10.0.0.1:4646");
        assert_eq!(base_url("10.0.0.1").unwrap(), "http://10.0.0.1:4646");
        assert_eq!(
            base_url("http://server-a:5000/").unwrap(),
            "http://server-a:5000"
        );
        assert_eq!(base_url("[::1]:4000").unwrap(), "http://[::1]:4000");
        assert_eq!(base_url("[::1]").unwrap(), "http://[::1]:4646");
        assert!(matches!(
            base_url("https://server-a:4646"),
            Err(HttpConnError::BadAddress { .. })
        ));
        assert!(matches!(
            base_url("server-a:4646/v1"),
            Err(HttpConnError::BadAddress { .. })
        ));
        assert!(matches!(
            HttpServerConn::new(HttpServerConnConfig::new(Vec::new())),
            Err(HttpConnError::NoServers)
        ));
    }

    /// A port nothing listens on: bound, then closed.
    async fn closed_port() -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        drop(listener);
        address
    }

    /// A one-request HTTP server that answers `status` with `body` and hands back the request
    /// it read.
    async fn answer_once(
        status: &'static str,
        body: &'static str,
    ) -> (String, tokio::task::JoinHandle<String>) {
        answer_once_from(Some("cluster-a"), status, body).await
    }

    /// One HTTP answer, from a server of cluster `cluster` (or of none).
    async fn answer_once_from(
        cluster: Option<&'static str>,
        status: &'static str,
        body: &'static str,
    ) -> (String, tokio::task::JoinHandle<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let served = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut request = Vec::new();
            let mut buffer = [0_u8; 4096];
            // Read the head, then as much body as Content-Length says.
            loop {
                let read = stream.read(&mut buffer).await.unwrap();
                request.extend_from_slice(&buffer[..read]);
                let text = String::from_utf8_lossy(&request).to_string();
                if let Some((head, rest)) = text.split_once("\r\n\r\n") {
                    let length = head
                        .lines()
                        .find_map(|line| {
                            let (name, value) = line.split_once(':')?;
                            name.eq_ignore_ascii_case("content-length")
                                .then(|| value.trim().parse::<usize>().ok())?
                        })
                        .unwrap_or(0);
                    if rest.len() >= length {
                        break;
                    }
                }
                if read == 0 {
                    break;
                }
            }
            let cluster_header = cluster
                .map(|id| format!("{CLUSTER_ID_HEADER}: {id}\r\n"))
                .unwrap_or_default();
            let response = format!(
                "HTTP/1.1 {status}\r\n{cluster_header}content-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            stream.write_all(response.as_bytes()).await.unwrap();
            String::from_utf8_lossy(&request).to_string()
        });
        (address, served)
    }

    fn conn(servers: Vec<String>) -> HttpServerConn {
        let mut config = HttpServerConnConfig::new(servers);
        config.connect_timeout = Duration::from_secs(2);
        config.request_timeout = Duration::from_secs(10);
        HttpServerConn::new(config).unwrap()
    }

    const TTL_ANSWER: &str = r#"{"HeartbeatTTL":12000000000,"Index":7}"#;

    #[tokio::test]
    async fn the_first_cluster_answered_is_joined_and_kept_and_a_stranger_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("cluster_id");
        let joining = {
            let (address, _served) = answer_once("200 OK", TTL_ANSWER).await;
            let mut config = HttpServerConnConfig::new(vec![address]);
            config.cluster_id_file = Some(file.clone());
            HttpServerConn::new(config).unwrap()
        };
        joining.heartbeat("node-1", "ready").await.unwrap();
        assert_eq!(joining.joined_cluster().as_deref(), Some("cluster-a"));
        assert_eq!(std::fs::read_to_string(&file).unwrap().trim(), "cluster-a");

        // After a restart, on the same file: a server of another cluster, even one that says
        // it does not know the node, is refused before its answer is read.
        let (stranger, _served) =
            answer_once_from(Some("cluster-b"), "404 Not Found", "node not found").await;
        let mut config = HttpServerConnConfig::new(vec![stranger.clone()]);
        config.cluster_id_file = Some(file.clone());
        let restarted = HttpServerConn::new(config).unwrap();
        let error = restarted.heartbeat("node-1", "ready").await.unwrap_err();
        assert_eq!(
            error,
            ServerConnError::ForeignCluster {
                server: format!("http://{stranger}"),
                joined: "cluster-a".into(),
                found: "cluster-b".into(),
            }
        );
        assert!(error.is_retryable());
        assert!(error.to_string().contains("not following it"), "{error}");
    }

    #[tokio::test]
    async fn a_server_of_another_cluster_or_of_none_passes_the_call_to_the_next_one() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("cluster_id");
        std::fs::write(&file, "cluster-a\n").unwrap();
        let (stranger, _) = answer_once_from(Some("cluster-b"), "200 OK", TTL_ANSWER).await;
        let (anonymous, _) = answer_once_from(None, "200 OK", TTL_ANSWER).await;
        let (member, _) = answer_once("200 OK", r#"{"HeartbeatTTL":3000000000}"#).await;
        let mut config = HttpServerConnConfig::new(vec![stranger, anonymous, member]);
        config.cluster_id_file = Some(file);
        let conn = HttpServerConn::new(config).unwrap();
        let ttl = conn.heartbeat("node-1", "ready").await.unwrap();
        assert_eq!(ttl, Duration::from_secs(3));
        assert_eq!(conn.preferred.load(Ordering::Relaxed), 2);
    }

    #[tokio::test]
    async fn setting_the_servers_sends_the_next_call_to_the_new_ones_and_a_bad_list_changes_nothing()
     {
        let conn = conn(vec![closed_port().await]);
        let before = conn.servers();
        let error = conn
            .set_servers(&["10.0.0.1:4646".to_owned(), "https://10.0.0.2".to_owned()])
            .unwrap_err();
        assert!(error.to_string().contains("https://10.0.0.2"), "{error}");
        assert!(matches!(
            conn.set_servers(&[]),
            Err(HttpConnError::NoServers)
        ));
        assert_eq!(
            conn.servers(),
            before,
            "a refused list leaves the servers as they were"
        );

        let (address, served) = answer_once("200 OK", TTL_ANSWER).await;
        conn.set_servers(std::slice::from_ref(&address)).unwrap();
        assert_eq!(conn.servers().addresses, vec![address.clone()]);
        assert_eq!(conn.servers().bases, vec![format!("http://{address}")]);
        let ttl = conn.heartbeat("node-1", "ready").await.unwrap();
        assert_eq!(ttl, Duration::from_secs(12));
        assert!(
            served
                .await
                .unwrap()
                .starts_with("PUT /v1/internal/node/node-1/update-status")
        );
    }

    #[tokio::test]
    async fn a_refused_connection_is_unavailable() {
        let conn = conn(vec![closed_port().await]);
        let error = conn.heartbeat("node-1", "ready").await.unwrap_err();
        assert!(
            matches!(&error, ServerConnError::Unavailable { message } if message.contains("cannot connect")),
            "{error:?}"
        );
        assert!(error.is_retryable());
    }

    #[tokio::test]
    async fn an_unreachable_server_passes_the_call_to_the_next_one() {
        let (address, served) =
            answer_once("200 OK", r#"{"HeartbeatTTL":12000000000,"Index":7}"#).await;
        let conn = conn(vec![closed_port().await, address]);
        let ttl = conn.heartbeat("node-1", "ready").await.unwrap();
        assert_eq!(ttl, Duration::from_secs(12));
        let request = served.await.unwrap();
        assert!(
            request.starts_with("PUT /v1/internal/node/node-1/update-status HTTP/1.1"),
            "{request}"
        );
        assert!(request.ends_with(r#"{"Status":"ready"}"#), "{request}");
        assert_eq!(
            conn.preferred.load(Ordering::Relaxed),
            1,
            "the answering server is preferred next"
        );
    }

    #[tokio::test]
    async fn a_404_heartbeat_means_the_node_must_register_again() {
        let (address, _served) = answer_once("404 Not Found", "node not found").await;
        let error = conn(vec![address])
            .heartbeat("node-1", "ready")
            .await
            .unwrap_err();
        assert_eq!(
            error,
            ServerConnError::UnknownNode {
                node_id: "node-1".into()
            }
        );
    }

    #[tokio::test]
    async fn a_400_is_final_and_a_500_is_retryable() {
        let (address, _served) =
            answer_once("400 Bad Request", "missing node ID for client registration").await;
        let error = conn(vec![address])
            .register_node(Node::default())
            .await
            .unwrap_err();
        assert_eq!(
            error,
            ServerConnError::Rejected {
                message: "missing node ID for client registration".into()
            }
        );
        assert!(!error.is_retryable());

        let (address, _served) = answer_once("500 Internal Server Error", "no leader").await;
        let update = AllocClientUpdate {
            alloc_id: "a1".into(),
            client_status: "running".into(),
            ..AllocClientUpdate::default()
        };
        let error = conn(vec![address])
            .update_allocs(vec![update])
            .await
            .unwrap_err();
        assert_eq!(
            error,
            ServerConnError::Internal {
                message: "no leader".into()
            }
        );
        assert!(error.is_retryable());
    }

    /// A leader that has just taken over may answer a status report 403 or 404 before it has
    /// read the allocations the previous leader placed: the report was dropped for good, and a
    /// deployment waiting for that allocation's health stalled until its progress deadline.
    #[tokio::test]
    async fn a_status_report_refused_by_a_server_that_does_not_know_the_allocation_is_sent_again() {
        let update = AllocClientUpdate {
            alloc_id: "a1".into(),
            client_status: "running".into(),
            ..AllocClientUpdate::default()
        };
        for (status, retryable) in [
            ("403 Forbidden", true),
            ("404 Not Found", true),
            ("429 Too Many Requests", true),
            ("408 Request Timeout", true),
            ("400 Bad Request", false),
        ] {
            let (address, _served) = answer_once(status, "refused").await;
            let error = conn(vec![address])
                .update_allocs(vec![update.clone()])
                .await
                .unwrap_err();
            assert_eq!(error.is_retryable(), retryable, "{status}: {error:?}");
        }
        // Elsewhere a 403 stays a refusal.
        let (address, _served) = answer_once("403 Forbidden", "Permission denied").await;
        let error = conn(vec![address])
            .heartbeat("node-1", "")
            .await
            .unwrap_err();
        assert!(!error.is_retryable(), "{error:?}");
    }

    #[tokio::test]
    async fn a_blocking_query_sends_index_and_wait_and_reads_the_answer() {
        let (address, served) =
            answer_once("200 OK", r#"{"Allocs":{"a1":5,"a2":9},"Index":12}"#).await;
        let answer = conn(vec![address])
            .node_allocs("node-1", 11, Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(answer.index, 12);
        assert_eq!(
            answer.alloc_modify_indexes,
            BTreeMap::from([("a1".to_string(), 5), ("a2".to_string(), 9)])
        );
        let request = served.await.unwrap();
        assert!(
            request.starts_with(
                "GET /v1/internal/node/node-1/client-allocs?index=11&wait=5000ms HTTP/1.1"
            ),
            "{request}"
        );
    }

    #[tokio::test]
    async fn an_answer_that_does_not_decode_is_internal() {
        let (address, _served) = answer_once("200 OK", "not json").await;
        let error = conn(vec![address])
            .get_allocs(vec!["a1".into()])
            .await
            .unwrap_err();
        assert!(
            matches!(error, ServerConnError::Internal { .. }),
            "{error:?}"
        );
    }

    #[tokio::test]
    async fn a_node_id_that_is_not_an_identifier_never_reaches_a_path() {
        let conn = conn(vec![closed_port().await]);
        let error = conn.heartbeat("../jobs", "ready").await.unwrap_err();
        assert!(
            matches!(error, ServerConnError::Rejected { .. }),
            "{error:?}"
        );
    }
}
