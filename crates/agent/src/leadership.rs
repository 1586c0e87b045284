//! Several server agents on one etcd prefix: each campaigns for the leadership
//! (`drover_etcd::election`), only the leader runs the leader's work, followers pass writes to
//! the leader, and every server answers the cluster's status truthfully.
//!
//! - [`run_leader_duties`] follows the election: on taking the leadership the server reloads its
//!   store from etcd (trying again until it succeeds) and starts the broker, workers, periodic
//!   dispatcher, drainer and heartbeat timers from it (nodes get Nomad's failover heartbeat
//!   deadline), and the keyring gets its
//!   first root key; on losing it that work stops at once (the store's writes are already
//!   refused by then: they are fenced by the leader's lease).
//! - [`forward_writes`]: on a follower, every write (`/v1/…` other than GET/HEAD, the agent's
//!   and client's own endpoints aside) goes to the leader's HTTP address, marked so the leader
//!   serves it itself; with no leader known it answers Nomad's 500 "No cluster leader".
//! - [`cluster_status`]: `/v1/status/leader`, `/v1/status/peers` and `/v1/agent/members` from
//!   the election and the servers' member records in etcd, and real `X-Nomad-KnownLeader` /
//!   `X-Nomad-LastContact` headers on reads; a blocking query on a server etcd does not answer
//!   gets a 503 (at once, or as soon as etcd stops answering), so its caller asks another.
//!
//! Not here: the election itself (`drover_etcd`), what leader work is (`drover_server`).

use std::sync::Arc;

use anyhow::Context as _;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use drover_etcd::EtcdKv;
use drover_etcd::election::{CampaignError, Election, Leadership};
use drover_server::keyring::Keyring;
use drover_server::{Server, Takeover};
use drover_state::StateStore;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::proxy;

/// A server's record in etcd (`P leader`, `P members/<name>`, `P alive/<name>`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ServerRecord {
    pub name: String,
    pub region: String,
    pub datacenter: String,
    /// Where its HTTP API answers (`127.0.0.1:4646`): servers talk HTTP.
    pub http_addr: String,
    pub version: String,
    /// When it was forced out (`/v1/agent/force-leave`), in Unix seconds: a failed server
    /// is then listed `left`, and no longer once [`LEFT_LISTED_FOR`] has passed (Serf's
    /// tombstone timeout). Its own session publishes its record again without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub left_at: Option<i64>,
}

/// How long a server forced out stays listed as `left` (Serf's default tombstone timeout).
pub const LEFT_LISTED_FOR: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

impl ServerRecord {
    fn decode(bytes: &[u8]) -> Option<Self> {
        serde_json::from_slice(bytes).ok()
    }
}

/// This server's place in its cluster.
pub struct ClusterNode {
    pub kv: Arc<EtcdKv>,
    pub own: ServerRecord,
    election: Election,
    leadership: watch::Receiver<Leadership>,
    http: proxy::ProxyClient,
    /// This server's store, once opened: a write forwarded to the leader is answered after it
    /// reached this store (read-your-writes on this server).
    store: std::sync::OnceLock<StateStore>,
}

/// How long a follower holds a forwarded write's answer for its own store to reach the write's
/// index before answering anyway.
const READ_YOUR_WRITES_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

impl ClusterNode {
    /// The store this server answers reads from (set once, after it is opened).
    pub fn set_store(&self, store: StateStore) {
        let _ = self.store.set(store);
    }

    /// Starts campaigning as `own`; refused while another live server holds `own.name` (the
    /// message names it and where that server answers).
    pub async fn join(kv: Arc<EtcdKv>, own: ServerRecord) -> anyhow::Result<Arc<Self>> {
        let record = serde_json::to_vec(&own)?;
        let election = match kv
            .campaign(drover_etcd::election::Candidate::new(
                own.name.clone(),
                record,
            ))
            .await
        {
            Ok(election) => election,
            Err(CampaignError::NameTaken { name, holder }) => {
                let other = ServerRecord::decode(&holder).map_or_else(
                    || "an unreadable record".to_owned(),
                    |other| other.http_addr,
                );
                anyhow::bail!(
                    "another server named {name:?} is alive in this cluster (its HTTP API at \
                     {other}): each server needs a name of its own; set `name` in the agent's \
                     configuration (the default is the host name)"
                );
            }
            Err(CampaignError::Etcd(error)) => {
                return Err(error).context("starting this server's etcd session");
            }
        };
        let leadership = election.watch();
        Ok(Arc::new(Self {
            kv,
            own,
            election,
            leadership,
            http: proxy::ProxyClient::default(),
            store: std::sync::OnceLock::new(),
        }))
    }

    /// Whether this server leads now.
    pub fn is_leader(&self) -> bool {
        self.leadership.borrow().is_leader
    }

    /// Whether etcd answered this server within a session's TTL (past that, what it knows of
    /// the leadership may be stale).
    pub fn etcd_answers(&self) -> bool {
        self.leadership
            .borrow()
            .last_contact
            .is_some_and(|contact| contact.elapsed() < drover_etcd::election::SESSION_TTL)
    }

    /// The leader's record, when this server knows one and etcd answers it.
    pub fn known_leader(&self) -> Option<ServerRecord> {
        if !self.etcd_answers() {
            return None;
        }
        self.leadership
            .borrow()
            .leader
            .as_deref()
            .and_then(ServerRecord::decode)
    }

    /// Milliseconds since this server last heard from etcd (0 on the leader).
    fn last_contact_ms(&self) -> u128 {
        let view = self.leadership.borrow();
        if view.is_leader {
            return 0;
        }
        view.last_contact
            .map_or(0, |contact| contact.elapsed().as_millis())
    }

    /// Stops campaigning (the agent is shutting down).
    pub fn leave(&self) {
        self.election.abort();
    }
}

/// Follows the election for the agent's life: takes up the leader's work on becoming leader,
/// drops it at once on losing the leadership.
pub fn run_leader_duties(
    cluster: Arc<ClusterNode>,
    server: Server,
    state: StateStore,
    keyring: Arc<Keyring>,
) -> tokio::task::JoinHandle<()> {
    let mut leadership = cluster.leadership.clone();
    tokio::spawn(async move {
        loop {
            let leading = leadership.borrow_and_update().is_leader;
            if leading && !server.is_leader() {
                // The store must hold every write the previous leader made before the broker
                // and timers are rebuilt from it: an evaluation it stored and a stale store
                // missed would never be enqueued (a rolling deployment then waits for it until
                // its progress deadline). So the reload is tried until it succeeds, for as long
                // as this server leads.
                if !reload_while_leading(&state, &mut leadership).await {
                    continue;
                }
                server.establish_leadership(Takeover::Failover);
                if let Err(error) = keyring.ensure_root_key().await {
                    tracing::warn!(%error, "making the keyring's first root key failed");
                }
                tracing::info!("leader work started");
            } else if !leading && server.is_leader() {
                server.revoke_leadership();
                tracing::warn!("leader work stopped");
            }
            if leadership.changed().await.is_err() {
                server.revoke_leadership();
                return;
            }
        }
    })
}

/// How long a new leader waits before reading the store again after a failed reload.
const RELOAD_RETRY: std::time::Duration = std::time::Duration::from_millis(250);

/// Reloads `state` from etcd until it succeeds (`true`), or answers `false` once this server no
/// longer leads.
async fn reload_while_leading(
    state: &StateStore,
    leadership: &mut watch::Receiver<Leadership>,
) -> bool {
    loop {
        match state.reload_from_backend().await {
            Ok(()) => return true,
            Err(error) => {
                tracing::warn!(%error, "reloading the state before leading failed; trying again");
            }
        }
        tokio::select! {
            () = tokio::time::sleep(RELOAD_RETRY) => {}
            changed = leadership.changed() => {
                if changed.is_err() {
                    return false;
                }
            }
        }
        if !leadership.borrow().is_leader {
            return false;
        }
    }
}

/// Marks a write a follower passed to its leader: the leader serves it itself.
pub const LEADER_FORWARDED_HEADER: &str = "x-drover-leader-forwarded";

/// Whether a request changes the cluster's state, so only the leader may serve it.
pub fn is_cluster_write(method: &Method, path: &str) -> bool {
    let reads = [Method::GET, Method::HEAD, Method::OPTIONS];
    if reads.contains(method) || !path.starts_with("/v1/") {
        return false;
    }
    // The agent's own endpoints and the client's (answered here or by the allocation's node);
    // parsing a jobspec reads no state, and Nomad's agents answer it themselves.
    path != "/v1/jobs/parse"
        && !["/v1/agent/", "/v1/client/", "/v1/status/"]
            .iter()
            .any(|prefix| path.starts_with(prefix))
}

/// The middleware of a server of a cluster: a follower passes writes to the leader.
pub async fn forward_writes(
    State(cluster): State<Arc<ClusterNode>>,
    request: Request,
    next: Next,
) -> Response {
    if request.headers().contains_key(LEADER_FORWARDED_HEADER)
        || cluster.is_leader()
        || !is_cluster_write(request.method(), request.uri().path())
    {
        return next.run(request).await;
    }
    let Some(leader) = cluster.known_leader() else {
        if !cluster.etcd_answers() {
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                "state store unavailable: etcd does not answer this server, so no leader is known",
            )
                .into_response();
        }
        return (StatusCode::INTERNAL_SERVER_ERROR, "No cluster leader").into_response();
    };
    let mut request = request;
    request
        .headers_mut()
        .insert(LEADER_FORWARDED_HEADER, HeaderValue::from_static("1"));
    let response = proxy::forward_to_server(&cluster.http, &leader.http_addr, request).await;
    if let (Some(store), Some(index)) = (cluster.store.get(), written_index(&response)) {
        wait_for_index(store, index, READ_YOUR_WRITES_WAIT).await;
    }
    response
}

/// The index a successful write's answer carries (`X-Nomad-Index`).
fn written_index(response: &Response) -> Option<u64> {
    if !response.status().is_success() {
        return None;
    }
    response
        .headers()
        .get("X-Nomad-Index")?
        .to_str()
        .ok()?
        .parse()
        .ok()
}

/// Waits until `store` reached `index` (its watch of etcd catches up with the leader's write),
/// for at most `limit`.
async fn wait_for_index(store: &StateStore, index: u64, limit: std::time::Duration) {
    if index == 0 || store.latest_index() >= index {
        return;
    }
    let deadline = tokio::time::Instant::now() + limit;
    let reached = store
        .wait_for_change(&drover_state::Table::ALL, index - 1, deadline)
        .await;
    if reached.index < index {
        tracing::debug!(
            index,
            reached = reached.index,
            "this server's store did not reach a forwarded write in time"
        );
    }
}

/// The middleware answering the cluster's status on a server of a cluster, and setting the
/// leader headers of reads.
pub async fn cluster_status(
    State(cluster): State<Arc<ClusterNode>>,
    request: Request,
    next: Next,
) -> Response {
    if matches!(*request.method(), Method::PUT | Method::POST)
        && request.uri().path() == "/v1/agent/force-leave"
    {
        let params = drover_api::params::QueryParams::parse(request.uri().query());
        return match drover_api::app::agent::force_leave_request(&params) {
            Ok((node, prune)) => force_leave(&cluster, &node, prune, unix_now()).await,
            Err(error) => error.into_response(),
        };
    }
    if request.method() == Method::GET {
        let pretty = request
            .uri()
            .query()
            .is_some_and(|query| query.split('&').any(|pair| pair.starts_with("pretty")));
        let path = request.uri().path().to_owned();
        match path.as_str() {
            "/v1/status/leader" => {
                let leader = cluster
                    .known_leader()
                    .map(|leader| leader.http_addr)
                    .unwrap_or_default();
                return read_answer(&cluster, &serde_json::json!(leader), pretty);
            }
            "/v1/status/peers" => {
                return match cluster.kv.members().await {
                    Ok(members) => {
                        let mut peers: Vec<String> = members
                            .iter()
                            .filter(|member| member.alive)
                            .filter_map(|member| ServerRecord::decode(&member.record))
                            .map(|record| record.http_addr)
                            .collect();
                        peers.sort();
                        read_answer(&cluster, &serde_json::json!(peers), pretty)
                    }
                    Err(error) => unavailable(&error),
                };
            }
            "/v1/agent/members" => {
                return match cluster.kv.members().await {
                    Ok(members) => {
                        let answer = members_answer(&cluster.own, &members, unix_now());
                        read_answer(&cluster, &answer, pretty)
                    }
                    Err(error) => unavailable(&error),
                };
            }
            "/v1/agent/self" => {
                let response = next.run(request).await;
                return with_leader_stats(&cluster, response).await;
            }
            _ => {}
        }
    }
    let mut response = if is_blocking_query(request.uri().query()) {
        answer_while_etcd_answers(&cluster, next.run(request)).await
    } else {
        next.run(request).await
    };
    let headers = response.headers_mut();
    if headers.contains_key("X-Nomad-KnownLeader") {
        set_leader_headers(&cluster, headers);
    }
    response
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| {
            i64::try_from(since.as_secs()).unwrap_or(i64::MAX)
        })
}

/// `PUT /v1/agent/force-leave?node=<name>.<region>`, as Serf's `RemoveFailedNode`: a failed
/// server is listed `left` from now on (`prune`: dropped from the list at once); a server that
/// is alive, or one no member is named for, is left as it is, and the answer is a 200 all the
/// same, as Nomad's.
async fn force_leave(cluster: &ClusterNode, node: &str, prune: bool, now_unix: i64) -> Response {
    let members = match cluster.kv.members().await {
        Ok(members) => members,
        Err(error) => return unavailable(&error),
    };
    let named = members
        .iter()
        .filter(|member| !member.alive)
        .find_map(|member| {
            let record = ServerRecord::decode(&member.record)?;
            (format!("{}.{}", record.name, record.region) == node).then_some((member, record))
        });
    let Some((member, mut record)) = named else {
        return StatusCode::OK.into_response();
    };
    let replacement = if prune {
        None
    } else if record.left_at.is_some() {
        // Already left: it stays listed until its first leave's time is up.
        return StatusCode::OK.into_response();
    } else {
        record.left_at = Some(now_unix);
        match serde_json::to_vec(&record) {
            Ok(bytes) => Some(bytes),
            Err(error) => {
                return (StatusCode::INTERNAL_SERVER_ERROR, error.to_string()).into_response();
            }
        }
    };
    match cluster
        .kv
        .change_failed_member(&member.name, replacement)
        .await
    {
        Ok(changed) => {
            if changed {
                tracing::info!(node, prune, "a failed server was forced to leave");
            }
            StatusCode::OK.into_response()
        }
        Err(error) => unavailable(&error),
    }
}

/// How often a blocking query's server looks whether etcd still answers it.
const CONTACT_CHECK: std::time::Duration = std::time::Duration::from_millis(500);

/// A blocking query waits for a change this server can only see while etcd answers it: cut
/// off, it would wait out its whole wait on a store that no longer moves (a client's
/// allocation query would never bring it new allocations). So it is refused, or ended, with a
/// 503, and the caller asks another server.
async fn answer_while_etcd_answers(
    cluster: &ClusterNode,
    answer: impl std::future::Future<Output = Response>,
) -> Response {
    let lost_contact = || {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "state store unavailable: etcd does not answer this server, so a blocking query \
             here would never see a change; ask another server",
        )
            .into_response()
    };
    if !cluster.etcd_answers() {
        return lost_contact();
    }
    let watch_contact = async {
        loop {
            tokio::time::sleep(CONTACT_CHECK).await;
            if !cluster.etcd_answers() {
                return;
            }
        }
    };
    tokio::select! {
        response = answer => response,
        () = watch_contact => lost_contact(),
    }
}

/// Whether a request's query asks to block (`index` above 0, as Nomad reads it).
fn is_blocking_query(query: Option<&str>) -> bool {
    query.is_some_and(|query| {
        query.split('&').any(|pair| {
            pair.strip_prefix("index=")
                .and_then(|index| index.parse::<u64>().ok())
                .is_some_and(|index| index > 0)
        })
    })
}

/// `/v1/agent/self` with this server's truth in `stats.nomad.leader` and `leader_addr`.
async fn with_leader_stats(cluster: &ClusterNode, response: Response) -> Response {
    if response.status() != StatusCode::OK {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            "reading the agent's answer",
        )
            .into_response();
    };
    let Ok(mut value) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        return Response::from_parts(parts, axum::body::Body::from(bytes));
    };
    if let Some(nomad) = value.pointer_mut("/stats/nomad") {
        nomad["leader"] = serde_json::json!(cluster.is_leader().to_string());
        nomad["leader_addr"] = serde_json::json!(
            cluster
                .known_leader()
                .map(|leader| leader.http_addr)
                .unwrap_or_default()
        );
    }
    // `?pretty` answers are indented: keep them so.
    let body = if bytes.contains(&b'\n') {
        serde_json::to_vec_pretty(&value)
    } else {
        serde_json::to_vec(&value)
    }
    .unwrap_or_default();
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    Response::from_parts(parts, axum::body::Body::from(body))
}

fn unavailable(error: &drover_state::KvError) -> Response {
    (StatusCode::SERVICE_UNAVAILABLE, error.to_string()).into_response()
}

fn set_leader_headers(cluster: &ClusterNode, headers: &mut axum::http::HeaderMap) {
    let known = cluster.is_leader() || cluster.known_leader().is_some();
    headers.insert(
        "X-Nomad-KnownLeader",
        HeaderValue::from_static(if known { "true" } else { "false" }),
    );
    headers.insert(
        "X-Nomad-LastContact",
        HeaderValue::from(u64::try_from(cluster.last_contact_ms()).unwrap_or(u64::MAX)),
    );
}

fn read_answer(cluster: &ClusterNode, value: &serde_json::Value, pretty: bool) -> Response {
    let body = if pretty {
        serde_json::to_string_pretty(value)
    } else {
        serde_json::to_string(value)
    }
    .unwrap_or_default();
    let mut response = (
        StatusCode::OK,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response();
    let headers = response.headers_mut();
    headers.insert("X-Nomad-Index", HeaderValue::from(1_u64));
    set_leader_headers(cluster, headers);
    response
}

/// `/v1/agent/members` in Nomad's shape, at `now_unix`: every server that joined, alive while
/// its session lives, failed after; one forced to leave is `left`, and no longer listed once
/// [`LEFT_LISTED_FOR`] has passed.
pub fn members_answer(
    own: &ServerRecord,
    members: &[drover_etcd::election::Member],
    now_unix: i64,
) -> serde_json::Value {
    let listed_for = i64::try_from(LEFT_LISTED_FOR.as_secs()).unwrap_or(i64::MAX);
    let mut listed: Vec<serde_json::Value> = members
        .iter()
        .filter_map(|member| {
            let record = ServerRecord::decode(&member.record)?;
            let status = match (member.alive, record.left_at) {
                (true, _) => "alive",
                (false, None) => "failed",
                (false, Some(left_at)) if now_unix.saturating_sub(left_at) < listed_for => "left",
                (false, Some(_)) => return None,
            };
            Some(member_json(&record, status))
        })
        .collect();
    listed.sort_by(|a, b| a["Name"].as_str().cmp(&b["Name"].as_str()));
    serde_json::json!({
        "ServerName": format!("{}.{}", own.name, own.region),
        "ServerRegion": own.region,
        "ServerDC": own.datacenter,
        "Members": listed,
    })
}

fn member_json(record: &ServerRecord, status: &str) -> serde_json::Value {
    let (address, port) = record
        .http_addr
        .rsplit_once(':')
        .and_then(|(host, port)| Some((host.to_owned(), port.parse::<u16>().ok()?)))
        .unwrap_or_else(|| (record.http_addr.clone(), 0));
    serde_json::json!({
        "Name": format!("{}.{}", record.name, record.region),
        "Addr": address,
        "Port": port,
        "Tags": {
            "region": record.region,
            "dc": record.datacenter,
            "role": "nomad",
            "build": record.version,
            "vsn": "1",
            "mvn": "1",
            "port": port.to_string(),
            "rpc_addr": address,
        },
        "Status": status,
        "ProtocolMin": 1, "ProtocolMax": 5, "ProtocolCur": 2,
        "DelegateMin": 2, "DelegateMax": 5, "DelegateCur": 4,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn writes_go_to_the_leader_and_agent_and_client_calls_stay() {
        for (method, path) in [
            (Method::PUT, "/v1/jobs"),
            (Method::POST, "/v1/job/web"),
            (Method::DELETE, "/v1/job/web"),
            (Method::PUT, "/v1/internal/node/register"),
            (Method::PUT, "/v1/internal/node/n1/update-status"),
            (Method::PUT, "/v1/internal/node/update-alloc"),
            (Method::PUT, "/v1/var/a/b"),
            (Method::POST, "/v1/acl/bootstrap"),
        ] {
            assert!(is_cluster_write(&method, path), "{method} {path}");
        }
        for (method, path) in [
            (Method::GET, "/v1/jobs"),
            (Method::GET, "/v1/internal/node/n1/client-allocs"),
            (Method::PUT, "/v1/agent/join"),
            (Method::POST, "/v1/client/allocation/a/restart"),
            (Method::PUT, "/ui/"),
            (Method::POST, "/v1/jobs/parse"),
        ] {
            assert!(!is_cluster_write(&method, path), "{method} {path}");
        }
    }

    #[test]
    fn a_query_blocks_with_an_index_above_zero() {
        assert!(is_blocking_query(Some("index=12&wait=5m")));
        assert!(is_blocking_query(Some("wait=1s&index=3")));
        assert!(!is_blocking_query(Some("index=0")));
        assert!(!is_blocking_query(Some("prefix=index=3")));
        assert!(!is_blocking_query(Some("wait=5m")));
        assert!(!is_blocking_query(None));
    }

    #[test]
    fn members_are_listed_by_name_alive_failed_or_left_for_a_day() {
        let record = |name: &str, port: u16| ServerRecord {
            name: name.to_owned(),
            region: "global".to_owned(),
            datacenter: "dc1".to_owned(),
            http_addr: format!("127.0.0.1:{port}"),
            version: "0.1.0".to_owned(),
            left_at: None,
        };
        let member = |name: &str, port: u16, alive: bool| drover_etcd::election::Member {
            name: name.to_owned(),
            record: serde_json::to_vec(&record(name, port)).unwrap(),
            alive,
        };
        let now = 1_800_000_000;
        let left = |name: &str, port: u16, left_at: i64| drover_etcd::election::Member {
            name: name.to_owned(),
            record: serde_json::to_vec(&ServerRecord {
                left_at: Some(left_at),
                ..record(name, port)
            })
            .unwrap(),
            alive: false,
        };
        let day = i64::try_from(LEFT_LISTED_FOR.as_secs()).unwrap();
        let answer = members_answer(
            &record("b", 2),
            &[
                member("c", 3, true),
                member("a", 1, false),
                member("b", 2, true),
                left("d", 4, now - day + 1),
                left("e", 5, now - day),
            ],
            now,
        );
        assert_eq!(answer["ServerName"], "b.global");
        let members = answer["Members"].as_array().unwrap();
        let names: Vec<&str> = members
            .iter()
            .map(|m| m["Name"].as_str().unwrap())
            .collect();
        // Forced out: listed `left` for a day, then no longer.
        assert_eq!(names, ["a.global", "b.global", "c.global", "d.global"]);
        assert_eq!(members[0]["Status"], "failed");
        assert_eq!(members[1]["Status"], "alive");
        assert_eq!(members[3]["Status"], "left");
        assert_eq!(members[0]["Port"], 1);
        assert_eq!(members[0]["Tags"]["port"], "1");
    }
}
