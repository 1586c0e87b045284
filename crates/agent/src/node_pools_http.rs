//! Nomad's node pool endpoints on a server agent: `/v1/node/pools` (GET list with `prefix`,
//! `filter`, `per_page`, `next_token`, `reverse`; PUT/POST create or replace),
//! `/v1/node/pool/<name>` (GET, PUT/POST, DELETE), `/v1/node/pool/<name>/nodes` and
//! `/v1/node/pool/<name>/jobs`, with Nomad's shapes, status codes and messages. Reads are
//! blocking queries (`index`, `wait`) on the tables they read, as Nomad's.
//!
//! Not here: the rules of a write (`drover_server`'s `node_pools`), storage (the state store).

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use drover_api::ApiError;
use drover_api::blocking::{StoreTables, not_found_at, read_object, wait_for_list};
use drover_api::paginate::{ListOptions, TokenKind, TokenParts, page, to_datum};
use drover_api::params::QueryParams;
use drover_server::{Server, ServerError};
use drover_state::{StateStore, Table};
use drover_structs::{NODE_POOL_ALL, NodePool};

/// What the endpoints need.
#[derive(Clone)]
pub struct NodePoolEndpoints {
    pub server: Server,
    pub state: StateStore,
}

/// The routes, for a server agent.
pub fn router(endpoints: NodePoolEndpoints) -> axum::Router {
    axum::Router::new()
        .route("/v1/node/pools", axum::routing::any(pools))
        .route("/v1/node/pool/{name}", axum::routing::any(specific_pool))
        .route("/v1/node/pool/{name}/nodes", axum::routing::any(pool_nodes))
        .route("/v1/node/pool/{name}/jobs", axum::routing::any(pool_jobs))
        .with_state(endpoints)
}

fn server_error(error: ServerError) -> ApiError {
    match error {
        ServerError::NotFound(message) => ApiError::NotFound(message),
        ServerError::BadRequest(message) => ApiError::BadRequest(message),
        ServerError::State(drover_state::StateError::Refused(message)) => {
            ApiError::BadRequest(message)
        }
        ServerError::State(error) if error.is_unavailable() => {
            ApiError::Unavailable(error.to_string())
        }
        error => ApiError::Internal(error.to_string()),
    }
}

fn json(value: &impl serde::Serialize, index: u64, next_token: &str) -> Response {
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
    let headers = response.headers_mut();
    headers.insert("X-Nomad-Index", HeaderValue::from(index.max(1)));
    headers.insert("X-Nomad-KnownLeader", HeaderValue::from_static("true"));
    headers.insert("X-Nomad-LastContact", HeaderValue::from_static("0"));
    if !next_token.is_empty()
        && let Ok(value) = HeaderValue::from_str(next_token)
    {
        headers.insert("X-Nomad-NextToken", value);
    }
    response
}

/// Waits as a blocking query on `tables` when the caller asked (`index` and `wait`), so the
/// snapshot taken after it shows the change waited for.
async fn block_on(
    state: &StateStore,
    params: &QueryParams,
    tables: &[Table],
) -> Result<(), ApiError> {
    wait_for_list(&StoreTables::new(state, tables), params)
        .await
        .map(drop)
}

fn written(index: u64) -> Response {
    let mut response = StatusCode::OK.into_response();
    response
        .headers_mut()
        .insert("X-Nomad-Index", HeaderValue::from(index.max(1)));
    response
}

fn is_write(method: &Method) -> bool {
    method == Method::PUT || method == Method::POST
}

/// Decodes a pool as Nomad's `decodeBody` does: a bad body is a 400 with the decoder's words.
fn decode_pool(body: &Bytes) -> Result<NodePool, ApiError> {
    serde_json::from_slice(body).map_err(|error| ApiError::bad_request(error.to_string()))
}

async fn upsert(
    endpoints: &NodePoolEndpoints,
    body: &Bytes,
    path_name: Option<&str>,
) -> Result<Response, ApiError> {
    let pool = decode_pool(body)?;
    if let Some(name) = path_name
        && pool.name != name
    {
        return Err(ApiError::bad_request(
            "Node pool name does not match request path",
        ));
    }
    let index = endpoints
        .server
        .upsert_node_pool(pool)
        .await
        .map_err(server_error)?;
    Ok(written(index))
}

async fn pools(
    method: Method,
    State(endpoints): State<NodePoolEndpoints>,
    RawQuery(query): RawQuery,
    body: Bytes,
) -> Result<Response, ApiError> {
    if is_write(&method) {
        return upsert(&endpoints, &body, None).await;
    }
    if method != Method::GET {
        return Err(ApiError::MethodNotAllowed);
    }
    let params = QueryParams::parse(query.as_deref());
    let options = ListOptions::from_params(&params)?;
    block_on(&endpoints.state, &params, &[Table::NodePools]).await?;
    let snapshot = endpoints.state.snapshot();
    let mut pools = snapshot.node_pools(params.prefix());
    if options.reverse {
        pools.reverse();
    }
    let (list, next_token) = page(
        pools,
        &options,
        TokenKind::Id,
        |pool| TokenParts {
            namespace: "",
            id: &pool.name,
            create_index: pool.create_index,
        },
        |pool| to_datum(pool.as_ref()),
        |pool| Ok(pool.as_ref().clone()),
    )?;
    Ok(json(
        &list,
        snapshot.table_index(Table::NodePools),
        &next_token,
    ))
}

async fn specific_pool(
    method: Method,
    State(endpoints): State<NodePoolEndpoints>,
    Path(name): Path<String>,
    RawQuery(query): RawQuery,
    body: Bytes,
) -> Result<Response, ApiError> {
    if is_write(&method) {
        return upsert(&endpoints, &body, Some(&name)).await;
    }
    if method == Method::DELETE {
        let index = endpoints
            .server
            .delete_node_pool(&name)
            .await
            .map_err(server_error)?;
        return Ok(written(index));
    }
    if method != Method::GET {
        return Err(ApiError::MethodNotAllowed);
    }
    // Nomad's `GetNodePool`: the pool's own ModifyIndex (the table's, floored at 1, while it
    // does not exist, on the 404 too), and a blocking query answered by its own write.
    let params = QueryParams::parse(query.as_deref());
    let watch = StoreTables::new(&endpoints.state, &[Table::NodePools]);
    let (index, pool) = read_object(
        &watch,
        &params,
        || Ok(endpoints.state.node_pool(&name)),
        |pool| pool.modify_index,
    )
    .await?;
    match pool {
        Some(pool) => Ok(json(pool.as_ref(), index, "")),
        None => Ok(not_found_at("node pool not found", index.max(1))),
    }
}

async fn pool_nodes(
    method: Method,
    State(endpoints): State<NodePoolEndpoints>,
    Path(name): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    if method != Method::GET {
        return Err(ApiError::MethodNotAllowed);
    }
    let params = QueryParams::parse(query.as_deref());
    if !params.prefix().is_empty() {
        return Err(ApiError::bad_request("prefix argument not allowed"));
    }
    let include_attributes = params.bool("os", false)?;
    let include_resources = params.bool("resources", false)?;
    let options = ListOptions::from_params(&params)?;
    block_on(&endpoints.state, &params, &[Table::Nodes]).await?;
    let snapshot = endpoints.state.snapshot();
    let index = snapshot.table_index(Table::Nodes);
    if snapshot.node_pool(&name).is_none() {
        return Ok(json(&Vec::<()>::new(), index, ""));
    }
    let mut nodes: Vec<_> = snapshot
        .nodes("")
        .into_iter()
        .filter(|node| name == NODE_POOL_ALL || node.node_pool == name)
        .collect();
    nodes.sort_by(|a, b| a.id.cmp(&b.id));
    if options.reverse {
        nodes.reverse();
    }
    let (list, next_token) = page(
        nodes,
        &options,
        TokenKind::Id,
        |node| TokenParts {
            namespace: "",
            id: &node.id,
            create_index: node.create_index,
        },
        |node| to_datum(&node.sanitized()),
        |node| Ok(node.stub_with(include_attributes, include_resources)),
    )?;
    Ok(json(&list, index, &next_token))
}

async fn pool_jobs(
    method: Method,
    State(endpoints): State<NodePoolEndpoints>,
    Path(name): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    if method != Method::GET {
        return Err(ApiError::MethodNotAllowed);
    }
    let params = QueryParams::parse(query.as_deref());
    if !params.prefix().is_empty() {
        return Err(ApiError::bad_request("prefix argument not allowed"));
    }
    let include_meta = params.bool("meta", false)?;
    let options = ListOptions::from_params(&params)?;
    block_on(
        &endpoints.state,
        &params,
        &[Table::Jobs, Table::JobSummaries],
    )
    .await?;
    let snapshot = endpoints.state.snapshot();
    let index = snapshot
        .table_index(Table::Jobs)
        .max(snapshot.table_index(Table::JobSummaries));
    if snapshot.node_pool(&name).is_none() {
        return Ok(json(&Vec::<()>::new(), index, ""));
    }
    let namespace = params.namespace().to_owned();
    let mut jobs: Vec<_> = snapshot
        .jobs((namespace != "*").then_some(namespace.as_str()), "")
        .into_iter()
        .filter(|job| job.node_pool == name)
        .collect();
    jobs.sort_by(|a, b| (&a.namespace, &a.id).cmp(&(&b.namespace, &b.id)));
    if options.reverse {
        jobs.reverse();
    }
    let (list, next_token) = page(
        jobs,
        &options,
        TokenKind::NamespaceId,
        |job| TokenParts {
            namespace: &job.namespace,
            id: &job.id,
            create_index: job.create_index,
        },
        |job| to_datum(job.as_ref()),
        |job| {
            let summary = snapshot
                .job_summary(&job.namespace, &job.id)
                .map(|summary| summary.as_ref().clone());
            Ok(job.stub(summary, include_meta))
        },
    )?;
    Ok(json(&list, index, &next_token))
}
