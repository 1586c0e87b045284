//! The service mesh's HTTP routes: the mesh CA (`/v1/agent/connect/ca/roots`,
//! `/v1/agent/connect/ca/leaf/<service>`) and intentions (`/v1/connect/intentions…`) on a
//! server agent, and the sidecars' counters (`PUT /v1/agent/connect/proxy/stats`) on an agent
//! with a client, which serves them in `/v1/metrics`.
//!
//! - Roots: the CA of every keyring root key (`drover_mesh::ca`), trust domain
//!   `<cluster ID>.consul`. Public, as Consul's.
//! - Leaf: the caller must present a workload identity of a running allocation whose task is
//!   that service's sidecar, `connect-proxy-<service>` (else 403); the leaf names the
//!   identity's namespace and the allocation's node's datacenter, valid for
//!   `server { mesh_leaf_cert_ttl }`. A client-only agent passes these calls to its servers.
//! - Intentions, in Consul's shapes: `GET /v1/connect/intentions` (a blocking query),
//!   `GET|PUT|DELETE /v1/connect/intentions/exact?source=&destination=`,
//!   `GET /v1/connect/intentions/match?by=source|destination&name=` (what sidecars follow;
//!   the answer's `X-Drover-Mesh-Default-Intention` header carries
//!   `server { mesh_default_intention }`), `GET /v1/connect/intentions/check?source=&destination=`.
//!   A source or destination is `name` or `namespace/name` (the `namespace` parameter, else
//!   `default`), either part may be `*`. ACLs (`acl_enforce`): reads as the catalog's,
//!   writes `submit-job` in the destination's namespace.
//!
//! Not here: certificates and matching (`drover_mesh`), storage (`drover_state::intentions`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use drover_api::ApiError;
use drover_api::blocking::{StoreTables, wait_for_list};
use drover_api::params::QueryParams;
use drover_mesh::agent_client::DEFAULT_INTENTION_HEADER;
use drover_mesh::agent_client::ProxyStats;
use drover_mesh::ca::{CA_KEY_INFO, MeshCa, RootKeyInput};
use drover_mesh::intentions::{self, Intention, IntentionAction};
use drover_server::Clock;
use drover_server::identity::{RequestIdentity, request_token, resolve_token};
use drover_server::keyring::Keyring;
use drover_state::{StateError, StateStore, Table};

use crate::metrics::{Gauge, Metrics, Source};
use crate::task_api::TaskApiAuth;

/// What the mesh's server routes need.
#[derive(Clone)]
pub struct MeshEndpoints {
    pub keyring: Arc<Keyring>,
    pub state: StateStore,
    pub clock: Arc<dyn Clock>,
    /// `<cluster ID>.consul`.
    pub trust_domain: String,
    /// `server { mesh_leaf_cert_ttl }`.
    pub leaf_ttl: Duration,
    /// `server { mesh_default_intention }` is not "deny".
    pub default_allow: bool,
}

/// The routes of a server agent.
pub fn router(endpoints: MeshEndpoints) -> axum::Router {
    axum::Router::new()
        .route("/v1/agent/connect/ca/roots", axum::routing::any(roots))
        .route(
            "/v1/agent/connect/ca/leaf/{service}",
            axum::routing::any(leaf),
        )
        .route("/v1/connect/intentions", axum::routing::any(list))
        .route("/v1/connect/intentions/exact", axum::routing::any(exact))
        .route("/v1/connect/intentions/match", axum::routing::any(matching))
        .route("/v1/connect/intentions/check", axum::routing::any(check))
        .with_state(endpoints)
}

fn json(value: &impl serde::Serialize, index: u64) -> Response {
    let body = match serde_json::to_vec(value) {
        Ok(body) => body,
        Err(error) => return ApiError::internal(error.to_string()).into_response(),
    };
    let mut response = (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response();
    response
        .headers_mut()
        .insert("X-Nomad-Index", HeaderValue::from(index.max(1)));
    response
}

fn permission_denied() -> Response {
    (
        StatusCode::FORBIDDEN,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        "Permission denied",
    )
        .into_response()
}

fn only_get(method: &Method) -> Result<(), ApiError> {
    if *method == Method::GET {
        Ok(())
    } else {
        Err(ApiError::MethodNotAllowed)
    }
}

/// The CA as the keyring stands now.
fn mesh_ca(endpoints: &MeshEndpoints) -> Result<MeshCa, ApiError> {
    let keys = endpoints
        .keyring
        .derived_secrets(CA_KEY_INFO)
        .map_err(|error| ApiError::internal(error.to_string()))?
        .into_iter()
        .map(|(meta, secret)| RootKeyInput {
            active: meta.is_active(),
            key_id: meta.key_id,
            create_time_ns: meta.create_time,
            secret,
        })
        .collect::<Vec<_>>();
    MeshCa::new(&endpoints.trust_domain, &keys)
        .map_err(|error| ApiError::internal(error.to_string()))
}

async fn roots(
    method: Method,
    State(endpoints): State<MeshEndpoints>,
) -> Result<Response, ApiError> {
    only_get(&method)?;
    let ca = mesh_ca(&endpoints)?;
    Ok(json(&ca.roots(), endpoints.keyring.index()))
}

async fn leaf(
    method: Method,
    headers: HeaderMap,
    Path(service): Path<String>,
    State(endpoints): State<MeshEndpoints>,
) -> Result<Response, ApiError> {
    only_get(&method)?;
    let header_str = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    let token = request_token(header_str("X-Nomad-Token"), header_str("Authorization"));
    let identity = match resolve_token(&endpoints.keyring, &endpoints.state, token) {
        Ok(RequestIdentity::Workload(workload)) => workload,
        Ok(_) => return Ok(permission_denied()),
        Err(error) => {
            tracing::debug!(%error, "refused a mesh leaf request's credential");
            return Ok(permission_denied());
        }
    };
    // The identity must be the sidecar task of this service in an allocation whose group
    // has it.
    let sidecar_task = format!("connect-proxy-{service}");
    let Some(alloc) = endpoints.state.alloc(&identity.alloc_id) else {
        return Ok(permission_denied());
    };
    let runs_sidecar = identity.task == sidecar_task
        && alloc.job.as_deref().is_some_and(|job| {
            job.task_groups
                .iter()
                .filter(|group| group.name == alloc.task_group)
                .any(|group| group.tasks.iter().any(|task| task.name == sidecar_task))
        });
    if !runs_sidecar {
        tracing::debug!(
            alloc_id = %identity.alloc_id,
            task = %identity.task,
            service,
            "a leaf was asked for by a task that is not the service's sidecar"
        );
        return Ok(permission_denied());
    }
    let datacenter = endpoints
        .state
        .node(&alloc.node_id)
        .map(|node| node.datacenter.clone())
        .unwrap_or_default();
    let ca = mesh_ca(&endpoints)?;
    let ttl_ns = i64::try_from(endpoints.leaf_ttl.as_nanos()).unwrap_or(i64::MAX);
    let leaf = ca
        .issue_leaf(
            &identity.namespace,
            &datacenter,
            &service,
            endpoints.clock.now_unix_ns(),
            ttl_ns,
        )
        .map_err(|error| ApiError::bad_request(error.to_string()))?;
    Ok(json(&leaf, endpoints.keyring.index()))
}

/// Waits as a blocking query on the intentions, when the caller asked.
async fn block(state: &StateStore, params: &QueryParams) -> Result<u64, ApiError> {
    wait_for_list(&StoreTables::new(state, &[Table::Intentions]), params).await
}

fn default_namespace(params: &QueryParams) -> String {
    params
        .non_empty("namespace")
        .unwrap_or(drover_structs::DEFAULT_NAMESPACE)
        .to_owned()
}

/// A required `source` or `destination` parameter, read as `name` or `namespace/name`.
fn endpoint_param(params: &QueryParams, key: &str) -> Result<(String, String), ApiError> {
    let text = params.non_empty(key).ok_or_else(|| {
        ApiError::bad_request(format!("required query parameter '{key}' not set"))
    })?;
    intentions::parse_endpoint(text, &default_namespace(params))
        .map_err(|error| ApiError::bad_request(format!("{key}: {error}")))
}

fn sorted(mut list: Vec<Arc<Intention>>) -> Vec<Arc<Intention>> {
    // Consul's order: highest precedence first, then by source and destination.
    list.sort_by(|a, b| {
        b.precedence.cmp(&a.precedence).then_with(|| {
            (
                &a.source_ns,
                &a.source_name,
                &a.destination_ns,
                &a.destination_name,
            )
                .cmp(&(
                    &b.source_ns,
                    &b.source_name,
                    &b.destination_ns,
                    &b.destination_name,
                ))
        })
    });
    list
}

async fn list(
    method: Method,
    State(endpoints): State<MeshEndpoints>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    only_get(&method)?;
    let params = QueryParams::parse(query.as_deref());
    if params.non_empty("filter").is_some() {
        return Err(ApiError::bad_request(
            "filter is not supported on /v1/connect/intentions; list all and filter locally",
        ));
    }
    let index = block(&endpoints.state, &params).await?;
    Ok(json(&sorted(endpoints.state.intentions()), index))
}

async fn exact(
    method: Method,
    State(endpoints): State<MeshEndpoints>,
    RawQuery(query): RawQuery,
    body: Bytes,
) -> Result<Response, ApiError> {
    let params = QueryParams::parse(query.as_deref());
    let source = endpoint_param(&params, "source")?;
    let destination = endpoint_param(&params, "destination")?;
    let (source_ref, destination_ref) = (
        (source.0.as_str(), source.1.as_str()),
        (destination.0.as_str(), destination.1.as_str()),
    );
    match method {
        Method::GET => {
            let index = endpoints.state.indexes().table(Table::Intentions);
            match endpoints.state.intention(source_ref, destination_ref) {
                Some(intention) => Ok(json(&intention, index)),
                None => Err(ApiError::not_found("Intention not found")),
            }
        }
        Method::PUT | Method::POST => {
            let request: serde_json::Value = serde_json::from_slice(&body).map_err(|error| {
                ApiError::bad_request(format!("Failed to decode request body: {error}"))
            })?;
            let field = |name: &str| {
                request
                    .as_object()
                    .and_then(|object| {
                        object
                            .iter()
                            .find(|(key, _)| key.eq_ignore_ascii_case(name))
                            .map(|(_, value)| value)
                    })
                    .filter(|value| !value.is_null())
            };
            let action = match field("Action") {
                Some(serde_json::Value::String(action)) => {
                    IntentionAction::parse(action).map_err(ApiError::bad_request)?
                }
                Some(other) => {
                    return Err(ApiError::bad_request(format!(
                        "Action must be \"allow\" or \"deny\", not {other}"
                    )));
                }
                None => {
                    return Err(ApiError::bad_request(
                        "Action is required: \"allow\" or \"deny\"",
                    ));
                }
            };
            if field("Permissions").is_some() {
                return Err(ApiError::bad_request(
                    "Permissions (L7 intentions) are not supported: the mesh is L4; use Action",
                ));
            }
            let description = match field("Description") {
                None => String::new(),
                Some(serde_json::Value::String(description)) => description.clone(),
                Some(other) => {
                    return Err(ApiError::bad_request(format!(
                        "Description must be a string, not {other}"
                    )));
                }
            };
            let meta: BTreeMap<String, String> = match field("Meta") {
                Some(meta) => serde_json::from_value(meta.clone())
                    .map_err(|error| ApiError::bad_request(format!("Meta: {error}")))?,
                None => BTreeMap::new(),
            };
            let now = drover_mesh::ca::rfc3339(endpoints.clock.now_unix_ns());
            let intention = Intention {
                id: uuid::Uuid::new_v4().to_string(),
                description,
                precedence: intentions::precedence(source_ref, destination_ref),
                source_ns: source.0.clone(),
                source_name: source.1.clone(),
                destination_ns: destination.0.clone(),
                destination_name: destination.1.clone(),
                source_type: "consul".to_owned(),
                action,
                meta,
                created_at: now.clone(),
                updated_at: now,
                create_index: 0,
                modify_index: 0,
            };
            let stored = endpoints
                .state
                .put_intention(intention)
                .await
                .map_err(state_error)?;
            Ok(json(&true, stored.modify_index))
        }
        Method::DELETE => {
            let index = endpoints
                .state
                .delete_intention(source_ref, destination_ref)
                .await
                .map_err(state_error)?;
            Ok(json(&true, index))
        }
        _ => Err(ApiError::MethodNotAllowed),
    }
}

fn state_error(error: StateError) -> ApiError {
    match error {
        StateError::NotFound { .. } => ApiError::not_found("Intention not found"),
        StateError::Invalid { reason, .. } => ApiError::bad_request(reason),
        other => ApiError::internal(other.to_string()),
    }
}

async fn matching(
    method: Method,
    State(endpoints): State<MeshEndpoints>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    only_get(&method)?;
    let params = QueryParams::parse(query.as_deref());
    let by_source = match params.non_empty("by") {
        Some("source") => true,
        Some("destination") => false,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "by must be \"source\" or \"destination\", not {other:?}"
            )));
        }
        None => {
            return Err(ApiError::bad_request(
                "required query parameter 'by' not set",
            ));
        }
    };
    let name_text = params
        .non_empty("name")
        .ok_or_else(|| ApiError::bad_request("required query parameter 'name' not set"))?
        .to_owned();
    let (namespace, name) = intentions::parse_endpoint(&name_text, &default_namespace(&params))
        .map_err(|error| ApiError::bad_request(format!("name: {error}")))?;
    let index = block(&endpoints.state, &params).await?;
    let matched: Vec<Arc<Intention>> = endpoints
        .state
        .intentions()
        .into_iter()
        .filter(|intention| {
            let (pattern_ns, pattern_name) = if by_source {
                (&intention.source_ns, &intention.source_name)
            } else {
                (&intention.destination_ns, &intention.destination_name)
            };
            (pattern_ns == "*" || *pattern_ns == namespace)
                && (pattern_name == "*" || *pattern_name == name)
        })
        .collect();
    let mut answer = BTreeMap::new();
    answer.insert(name_text, sorted(matched));
    let mut response = json(&answer, index);
    response.headers_mut().insert(
        DEFAULT_INTENTION_HEADER,
        HeaderValue::from_static(if endpoints.default_allow {
            "allow"
        } else {
            "deny"
        }),
    );
    Ok(response)
}

async fn check(
    method: Method,
    State(endpoints): State<MeshEndpoints>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    only_get(&method)?;
    let params = QueryParams::parse(query.as_deref());
    let source = endpoint_param(&params, "source")?;
    let destination = endpoint_param(&params, "destination")?;
    let list: Vec<Intention> = endpoints
        .state
        .intentions()
        .iter()
        .map(|intention| Intention::clone(intention))
        .collect();
    let allowed = intentions::allowed(
        &list,
        (&source.0, &source.1),
        (&destination.0, &destination.1),
        endpoints.default_allow,
    );
    let index = endpoints.state.indexes().table(Table::Intentions);
    Ok(json(&serde_json::json!({ "Allowed": allowed }), index))
}

/// The last counters of each sidecar, by (allocation ID, service), with when they came.
pub type SidecarCounters =
    Arc<Mutex<BTreeMap<(String, String), (ProxyStats, tokio::time::Instant)>>>;

/// What the stats route needs: who the caller is, and where the gauges go.
#[derive(Clone)]
pub struct StatsEndpoint {
    pub auth: TaskApiAuth,
    pub metrics: Arc<Metrics>,
    pub sidecars: SidecarCounters,
}

/// How long a sidecar's counters stay without a new report (its allocation stopped).
const STATS_KEPT: Duration = Duration::from_secs(60);

/// `PUT /v1/agent/connect/proxy/stats` on an agent with a client.
pub fn stats_router(endpoint: StatsEndpoint) -> axum::Router {
    axum::Router::new()
        .route("/v1/agent/connect/proxy/stats", axum::routing::any(stats))
        .with_state(endpoint)
}

async fn stats(
    method: Method,
    headers: HeaderMap,
    State(endpoint): State<StatsEndpoint>,
    body: Bytes,
) -> Result<Response, ApiError> {
    if method != Method::PUT && method != Method::POST {
        return Err(ApiError::MethodNotAllowed);
    }
    let report: ProxyStats = serde_json::from_slice(&body).map_err(|error| {
        ApiError::bad_request(format!("Failed to decode request body: {error}"))
    })?;
    let token = crate::client_acl::bearer_of(&headers);
    // Only the sidecar's own allocation may report its counters.
    match endpoint.auth.resolve(&token).await {
        Ok(RequestIdentity::Workload(workload)) if workload.alloc_id == report.alloc_id => {}
        Ok(_) => return Ok(permission_denied()),
        Err(status) => return Ok(status.into_response()),
    }
    let gauges = {
        let mut sidecars = endpoint
            .sidecars
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = tokio::time::Instant::now();
        sidecars.retain(|_, (_, at)| now.duration_since(*at) < STATS_KEPT);
        sidecars.insert(
            (report.alloc_id.clone(), report.service.clone()),
            (report, now),
        );
        let mut gauges = Vec::new();
        for (report, _) in sidecars.values() {
            for upstream in &report.upstreams {
                let labels = [
                    ("alloc_id", report.alloc_id.as_str()),
                    ("namespace", report.namespace.as_str()),
                    ("service", report.service.as_str()),
                    ("upstream", upstream.destination_name.as_str()),
                ];
                #[allow(clippy::cast_precision_loss)]
                for (name, value) in [
                    (
                        "nomad.client.mesh.upstream.connections",
                        upstream.connections,
                    ),
                    (
                        "nomad.client.mesh.upstream.failed_connections",
                        upstream.failed_connections,
                    ),
                    ("nomad.client.mesh.upstream.bytes_sent", upstream.bytes_sent),
                    (
                        "nomad.client.mesh.upstream.bytes_received",
                        upstream.bytes_received,
                    ),
                ] {
                    gauges.push(Gauge::new(name, &labels, value as f64));
                }
            }
        }
        gauges
    };
    endpoint
        .metrics
        .publish(Source::MeshProxies, gauges)
        .map_err(|error| ApiError::internal(error.to_string()))?;
    Ok(StatusCode::OK.into_response())
}
