//! The operator's endpoints of a server agent, in Nomad's shapes where Nomad has them:
//!
//! - `GET /v1/operator/snapshot` (`stale`): the whole state at one backend revision as a
//!   snapshot archive (`drover_state::archive`), with Nomad's `Digest: sha-256=<base64>`
//!   header. The keyring's key-encryption key comes along, so the snapshot restores anywhere;
//!   without `stale` the backend answers with a linearizable read (etcd's quorum read, as
//!   current as the leader's), with `stale` any etcd member may answer from its own copy.
//! - `PUT|POST /v1/operator/snapshot`: restores one. The archive is checked whole first (gzip,
//!   sums, format, every record decoded); the root keys are sealed again by this cluster's
//!   key-encryption key; then the store's keyspace is replaced at once and the leader's work
//!   (broker, timers) is rebuilt from it. Other servers of a cluster reload through their etcd
//!   watch. A follower passes the request to the leader (`leadership::forward_writes`).
//! - `GET /v1/operator/raft/configuration`: the servers, as Nomad's `RaftConfiguration`. They
//!   are listed truthfully: no drover server votes (`Voter: false`); `RaftProtocol` names where
//!   the state's consensus lives instead (`etcd`, or `embedded` for a single server).
//! - `DELETE /v1/operator/raft/peer`: refused; there is no raft peer set to remove from.
//! - `GET /v1/operator/etcd/members` (drover's own): the etcd cluster's members and their
//!   status: the raft peers of a cluster's state.
//!
//! Management ACL on all of them (`acl_enforce`). Not here: the archive format, the keyspace
//! replacement (`drover_state`), the keys (`drover_server::keyring`).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use drover_api::ApiError;
use drover_api::params::QueryParams;
use drover_server::keyring::Keyring;
use drover_server::{Server, Takeover};
use drover_state::archive::Snapshot;
use drover_state::{StateError, StateStore, Table};
use drover_structs::WrappedRootKey;

use crate::leadership::{ClusterNode, ServerRecord};

/// What the operator endpoints need.
#[derive(Clone)]
pub struct OperatorEndpoints {
    pub state: StateStore,
    pub keyring: Arc<Keyring>,
    /// The variable locks' timers: started again for the locks a restored state holds.
    pub variable_locks: Arc<drover_server::variable_locks::VariableLocks>,
    pub server: Server,
    /// This server's place in a cluster on etcd; `None` for the single embedded server.
    pub cluster: Option<Arc<ClusterNode>>,
    /// This server, as a cluster's member record would describe it.
    pub own: ServerRecord,
    pub clock: Arc<dyn drover_server::Clock>,
}

/// The routes, for a server agent.
pub fn router(endpoints: OperatorEndpoints) -> axum::Router {
    axum::Router::new()
        .route("/v1/operator/snapshot", axum::routing::any(snapshot))
        .route(
            "/v1/operator/raft/configuration",
            axum::routing::any(raft_configuration),
        )
        .route("/v1/operator/raft/peer", axum::routing::any(raft_peer))
        .route(
            "/v1/operator/etcd/members",
            axum::routing::any(etcd_members),
        )
        .layer(axum::extract::DefaultBodyLimit::max(
            drover_api::MAX_SNAPSHOT_BODY,
        ))
        .with_state(endpoints)
}

async fn snapshot(
    method: Method,
    State(endpoints): State<OperatorEndpoints>,
    RawQuery(query): RawQuery,
    body: Bytes,
) -> Result<Response, ApiError> {
    let params = QueryParams::parse(query.as_deref());
    match method {
        Method::GET => {
            // Nomad's `stale`: present and empty means true.
            let stale = match params.get("stale") {
                Some("") => true,
                Some(_) => params.bool("stale", false)?,
                None => false,
            };
            save(&endpoints, stale).await
        }
        Method::PUT | Method::POST => restore(&endpoints, &body).await,
        _ => Err(ApiError::MethodNotAllowed),
    }
}

/// A failed state read or write as Nomad answers it: 503 while the backend has no quorum.
fn state_error(doing: &str, error: &StateError) -> ApiError {
    if error.is_unavailable() {
        ApiError::Unavailable(error.to_string())
    } else {
        ApiError::internal(format!("{doing}: {error}"))
    }
}

async fn save(endpoints: &OperatorEndpoints, stale: bool) -> Result<Response, ApiError> {
    let contents = endpoints
        .state
        .read_all(stale)
        .await
        .map_err(|error| state_error("failed to take a snapshot", &error))?;
    let created_ms = endpoints.clock.now_unix_ns() / 1_000_000;
    let snapshot = Snapshot::of(
        contents,
        Some(endpoints.keyring.kek_text().as_bytes().to_vec()),
        created_ms,
    );
    let index = snapshot.meta.index;
    let bytes = snapshot
        .encode()
        .map_err(|error| ApiError::internal(error.to_string()))?;
    let digest = format!(
        "sha-256={}",
        base64::engine::general_purpose::STANDARD.encode(drover_state::archive::sha256(&bytes))
    );
    let mut response = (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/x-gzip")],
        bytes,
    )
        .into_response();
    let headers = response.headers_mut();
    headers.insert(
        "Digest",
        HeaderValue::from_str(&digest).map_err(|error| ApiError::internal(error.to_string()))?,
    );
    headers.insert("X-Nomad-Index", HeaderValue::from(index.max(1)));
    headers.insert("X-Nomad-KnownLeader", HeaderValue::from_static("true"));
    headers.insert("X-Nomad-LastContact", HeaderValue::from_static("0"));
    Ok(response)
}

/// Nomad's words for a restore refused for what was sent (not a snapshot, a damaged one, a
/// root key that does not decode): 400, where Nomad answers 500.
fn restore_failed(reason: impl std::fmt::Display) -> ApiError {
    ApiError::bad_request(format!("failed to restore from snapshot: {reason}"))
}

async fn restore(endpoints: &OperatorEndpoints, body: &[u8]) -> Result<Response, ApiError> {
    let mut snapshot = Snapshot::decode(body).map_err(restore_failed)?;
    seal_root_keys_here(&endpoints.keyring, &mut snapshot)?;
    let index = endpoints
        .state
        .restore(snapshot.pairs)
        .await
        .map_err(|error| match error {
            error if error.is_unavailable() => ApiError::Unavailable(error.to_string()),
            // The snapshot's records: what was sent.
            StateError::Decode { .. } | StateError::Invalid { .. } | StateError::Schema { .. } => {
                restore_failed(error)
            }
            error => ApiError::internal(format!("failed to restore from snapshot: {error}")),
        })?;
    endpoints.keyring.forget_opened();
    endpoints.variable_locks.restore();
    // The leader's work was built from the old state: build it again from the restored one.
    if endpoints.server.is_leader() {
        endpoints.server.revoke_leadership();
        endpoints.server.establish_leadership(Takeover::Failover);
    }
    tracing::warn!(
        index,
        snapshot = %snapshot.meta.id,
        backend = %snapshot.meta.backend,
        "the state was replaced by a snapshot's"
    );
    let mut response = StatusCode::OK.into_response();
    response
        .headers_mut()
        .insert("X-Nomad-Index", HeaderValue::from(index));
    Ok(response)
}

/// Makes every root key of `snapshot` open with this keyring: sealed again by this cluster's
/// key-encryption key when the snapshot carries its own, else (a redacted snapshot) only
/// accepted when this cluster already holds the key that sealed them.
fn seal_root_keys_here(keyring: &Keyring, snapshot: &mut Snapshot) -> Result<(), ApiError> {
    let stored: Vec<(Vec<u8>, WrappedRootKey)> = snapshot
        .records(Table::RootKeys)
        .map(|(key, value)| {
            serde_json::from_slice(value)
                .map(|wrapped| (key.to_vec(), wrapped))
                .map_err(|error| restore_failed(format!("a root key does not decode: {error}")))
        })
        .collect::<Result<_, _>>()?;
    let kek_text = snapshot
        .keyring
        .as_deref()
        .map(|bytes| String::from_utf8_lossy(bytes).into_owned());
    for (key, wrapped) in stored {
        let resealed = match &kek_text {
            Some(kek_text) => keyring
                .reseal_from(kek_text, &wrapped)
                .map_err(restore_failed)?,
            None if wrapped.kek_id == keyring.kek_id() => continue,
            None => {
                return Err(restore_failed(format!(
                    "the snapshot was saved with -redact: its root key {} is sealed by \
                     key-encryption key {}, which this cluster does not hold (it holds {}); \
                     restore a snapshot saved without -redact, or start this cluster's servers \
                     with that key-encryption key",
                    wrapped.meta.key_id,
                    wrapped.kek_id,
                    keyring.kek_id()
                )));
            }
        };
        let bytes =
            serde_json::to_vec(&resealed).map_err(|error| ApiError::internal(error.to_string()))?;
        snapshot.set_record(Table::RootKeys, &key, bytes);
    }
    Ok(())
}

/// The servers that hold a session now (a cluster), or this one (a single server).
async fn servers(endpoints: &OperatorEndpoints) -> Result<Vec<(ServerRecord, bool)>, ApiError> {
    let Some(cluster) = &endpoints.cluster else {
        return Ok(vec![(endpoints.own.clone(), endpoints.server.is_leader())]);
    };
    let members = cluster
        .kv
        .members()
        .await
        .map_err(|error| ApiError::Unavailable(error.to_string()))?;
    let leader = cluster.known_leader();
    let mut servers: Vec<(ServerRecord, bool)> = members
        .iter()
        .filter(|member| member.alive)
        .filter_map(|member| serde_json::from_slice::<ServerRecord>(&member.record).ok())
        .map(|record| {
            let leads = leader.as_ref() == Some(&record);
            (record, leads)
        })
        .collect();
    servers.sort_by(|a, b| a.0.name.cmp(&b.0.name));
    Ok(servers)
}

async fn raft_configuration(
    method: Method,
    State(endpoints): State<OperatorEndpoints>,
) -> Result<Response, ApiError> {
    if method != Method::GET {
        return Err(ApiError::MethodNotAllowed);
    }
    let protocol = if endpoints.cluster.is_some() {
        "etcd"
    } else {
        "embedded"
    };
    let servers: Vec<serde_json::Value> = servers(&endpoints)
        .await?
        .into_iter()
        .map(|(record, leads)| {
            serde_json::json!({
                "ID": record.name,
                "Node": format!("{}.{}", record.name, record.region),
                "Address": record.http_addr,
                "Leader": leads,
                // Every drover server takes part in leader election on etcd (a single
                // server is its own electorate): each counts as a voter.
                "Voter": true,
                "RaftProtocol": protocol,
            })
        })
        .collect();
    Ok(axum::Json(serde_json::json!({ "Servers": servers, "Index": 0 })).into_response())
}

/// `DELETE /v1/operator/raft/peer?id=|address=`: Nomad's parameter checks and, for a peer
/// that is not among the servers, Nomad's error; a server that is one is refused, saying why.
async fn raft_peer(
    method: Method,
    RawQuery(query): RawQuery,
    State(endpoints): State<OperatorEndpoints>,
) -> Result<Response, ApiError> {
    if method != Method::DELETE {
        return Err(ApiError::MethodNotAllowed);
    }
    let params = QueryParams::parse(query.as_deref());
    let (id, address) = (params.get("id"), params.get("address"));
    let (kind, named) = match (id, address) {
        (None, None) => {
            return Err(ApiError::bad_request(
                "Must specify either ?id with the server's ID or ?address with IP:port of peer to remove",
            ));
        }
        (Some(_), Some(_)) => {
            return Err(ApiError::bad_request(
                "Must specify only one of ?id or ?address",
            ));
        }
        (Some(id), None) => ("id", id.to_owned()),
        (None, Some(address)) => ("address", address.to_owned()),
    };
    let known = servers(&endpoints).await?.iter().any(|(record, _)| {
        if kind == "id" {
            record.name == named
        } else {
            record.http_addr == named
        }
    });
    // Nomad answers this as a failed RPC (500); it is a request naming no peer, so a 404 with
    // Nomad's words.
    if !known {
        return Err(ApiError::not_found(format!(
            "{kind} {named:?} was not found in the Raft configuration"
        )));
    }
    Err(ApiError::not_found(
        "drover servers are not raft peers: a cluster's state is replicated by etcd, whose \
         members are removed with etcdctl member remove; a stopped drover server leaves the \
         server list when its etcd session lapses",
    ))
}

async fn etcd_members(
    method: Method,
    State(endpoints): State<OperatorEndpoints>,
) -> Result<Response, ApiError> {
    if method != Method::GET {
        return Err(ApiError::MethodNotAllowed);
    }
    let Some(cluster) = &endpoints.cluster else {
        return Err(ApiError::not_found(
            "this server keeps its state in its data dir, not in etcd (no etcd block in its \
             configuration)",
        ));
    };
    let members = cluster
        .kv
        .etcd_members()
        .await
        .map_err(|error| ApiError::Unavailable(error.to_string()))?;
    let listed: Vec<serde_json::Value> = members
        .iter()
        .map(|member| {
            let status = member.status.as_ref();
            serde_json::json!({
                "ID": format!("{:x}", member.id),
                "Name": member.name,
                "PeerURLs": member.peer_urls,
                "ClientURLs": member.client_urls,
                "IsLearner": member.is_learner,
                "Reachable": status.is_some(),
                "Leader": status.is_some_and(|status| status.is_leader),
                "Version": status.map(|status| status.version.clone()).unwrap_or_default(),
                "DbSize": status.map_or(0, |status| status.db_size),
                "RaftTerm": status.map_or(0, |status| status.raft_term),
                "RaftIndex": status.map_or(0, |status| status.raft_index),
            })
        })
        .collect();
    Ok(axum::Json(serde_json::json!({ "Members": listed })).into_response())
}
