//! The handlers of the client↔server calls remote client nodes make (`crate::client_rpc`):
//! decode the body, hand it to the backend, answer Nomad's field names.
//!
//! Not here: what registering a node or merging a status means (the server owns that).

use axum::body::Bytes;
use axum::response::Response;

use super::{Meta, decode_body, json_response};
use crate::backend::{ApiBackend, Table};
use crate::client_rpc::{
    AllocUpdateRequest, AllocsGetRequest, AllocsGetResponse, NodeClientAllocsResponse,
    NodeRegisterRequest, NodeUpdateResponse, NodeUpdateStatusRequest,
};
use crate::error::ApiError;
use crate::params::QueryParams;

fn nanos(ttl: std::time::Duration) -> u64 {
    u64::try_from(ttl.as_nanos()).unwrap_or(u64::MAX)
}

/// `Node.Register`.
pub(super) async fn register<B: ApiBackend>(
    backend: &B,
    params: &QueryParams,
    body: Bytes,
) -> Result<Response, ApiError> {
    let request: NodeRegisterRequest = decode_body(&body)?;
    if request.node.id.is_empty() {
        return Err(ApiError::bad_request(
            "missing node ID for client registration",
        ));
    }
    let ttl = backend.register_node(request.node).await?;
    let index = backend.table_index(&[Table::Nodes]);
    let response = NodeUpdateResponse {
        heartbeat_ttl: nanos(ttl),
        index,
    };
    json_response(&response, params, Meta::Write(index))
}

/// `Node.UpdateStatus`: the heartbeat.
pub(super) async fn update_status<B: ApiBackend>(
    backend: &B,
    params: &QueryParams,
    node_id: &str,
    body: Bytes,
) -> Result<Response, ApiError> {
    let request: NodeUpdateStatusRequest = decode_body(&body)?;
    let ttl = backend.update_node_status(node_id, &request.status).await?;
    let index = backend.table_index(&[Table::Nodes]);
    let response = NodeUpdateResponse {
        heartbeat_ttl: nanos(ttl),
        index,
    };
    json_response(&response, params, Meta::Write(index))
}

/// `Node.GetClientAllocs`: a blocking read of the node's allocations and their
/// `AllocModifyIndex`, which only server-side changes bump.
///
/// A blocking query answers when one of *this node's* allocations changed on the server's
/// side (Nomad's watch on the node's allocations), not on every write to the allocations
/// table: every status report of every node is such a write, and answering each waiting node
/// for each of them costs a fleet of N nodes N round trips per write. At once when an
/// allocation's `AllocModifyIndex` is past the query's index; else when the node's list or one
/// of its indexes moves; else at the end of the wait, with the table's index.
pub(super) async fn client_allocs<B: ApiBackend>(
    backend: &B,
    params: &QueryParams,
    node_id: &str,
) -> Result<Response, ApiError> {
    let options = params.blocking()?;
    let tables = [Table::Allocs];
    let mut index = backend.table_index(&tables).max(1);
    let mut allocs = backend.node_alloc_modify_indexes(node_id)?;
    let changed_since_query = allocs
        .values()
        .any(|modified| *modified > options.min_index);
    if options.min_index > 0 && !changed_since_query {
        let deadline =
            tokio::time::Instant::now() + options.wait_with_jitter(rand::random::<f64>());
        let mut seen = index.max(options.min_index);
        while tokio::time::Instant::now() < deadline {
            backend.wait_for_change(&tables, seen, deadline).await;
            let now = backend.table_index(&tables);
            if now <= seen {
                continue;
            }
            seen = now;
            index = now.max(1);
            let current = backend.node_alloc_modify_indexes(node_id)?;
            if current != allocs {
                allocs = current;
                break;
            }
        }
    }
    let response = NodeClientAllocsResponse { allocs, index };
    json_response(&response, params, Meta::Read(index))
}

/// `Alloc.GetAllocs`.
pub(super) async fn get_allocs<B: ApiBackend>(
    backend: &B,
    params: &QueryParams,
    body: Bytes,
) -> Result<Response, ApiError> {
    let request: AllocsGetRequest = decode_body(&body)?;
    let index = backend.table_index(&[Table::Allocs]).max(1);
    let mut allocs = Vec::with_capacity(request.alloc_ids.len());
    for alloc_id in &request.alloc_ids {
        if let Some(allocation) = backend.allocation(alloc_id)? {
            allocs.push(allocation);
        }
    }
    let response = AllocsGetResponse { allocs, index };
    json_response(&response, params, Meta::Read(index))
}

/// `Node.UpdateAlloc`: a batch of client status updates.
pub(super) async fn update_alloc<B: ApiBackend>(
    backend: &B,
    params: &QueryParams,
    body: Bytes,
) -> Result<Response, ApiError> {
    let request: AllocUpdateRequest = decode_body(&body)?;
    if request.alloc.is_empty() {
        return Err(ApiError::bad_request("Must update at least one allocation"));
    }
    if request.alloc.iter().any(|update| update.id.is_empty()) {
        return Err(ApiError::bad_request("missing allocation ID in an update"));
    }
    let index = backend.update_allocs_from_client(request.alloc).await?;
    json_response(
        &drover_structs::GenericResponse { index },
        params,
        Meta::Write(index),
    )
}
