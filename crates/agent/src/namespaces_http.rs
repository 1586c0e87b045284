//! Nomad's namespace endpoints on a server agent: `GET /v1/namespaces` (prefix, blocking),
//! `POST|PUT /v1/namespace` (create), `GET|POST|PUT|DELETE /v1/namespace/<name>`, in Nomad's
//! shapes, status codes and messages (what Nomad answers as an RPC error is a 500 here too).
//!
//! Writing and deleting need a management token; the ACL layer checks that before a handler
//! runs (`acl_enforce`). With ACLs on, the list shows only namespaces the caller has some
//! capability in, and reading one needs such a capability, as Nomad.
//!
//! Not here: storage and the delete refusals' checks (`drover_state::namespaces`).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use drover_api::ApiError;
use drover_api::blocking::{StoreTables, not_found_at, read_object, wait_for_list};
use drover_api::params::QueryParams;
use drover_server::Clock;
use drover_server::acl::{Acl, anonymous_acl, token_acl};
use drover_server::identity::{RequestIdentity, request_token, resolve_token_at};
use drover_server::keyring::Keyring;
use drover_state::namespaces::{NamespaceDelete, NamespaceInUse};
use drover_state::{StateStore, Table};
use drover_structs::namespace::Namespace;

/// What the namespace endpoints need.
#[derive(Clone)]
pub struct NamespaceEndpoints {
    pub acl_enabled: bool,
    pub keyring: Arc<Keyring>,
    pub state: StateStore,
    pub clock: Arc<dyn Clock>,
    /// The agent's region, named in a refused delete.
    pub region: String,
}

/// The routes, for a server agent.
pub fn router(endpoints: NamespaceEndpoints) -> axum::Router {
    axum::Router::new()
        .route("/v1/namespaces", axum::routing::any(list))
        .route("/v1/namespace", axum::routing::any(create))
        .route("/v1/namespace/", axum::routing::any(missing_name))
        .route("/v1/namespace/{name}", axum::routing::any(specific))
        .with_state(endpoints)
}

/// Nomad's multi-error text.
pub(crate) fn multi_error(messages: &[String]) -> String {
    let mut text = match messages.len() {
        1 => "1 error occurred:\n".to_owned(),
        count => format!("{count} errors occurred:\n"),
    };
    for message in messages {
        text.push_str("\t* ");
        text.push_str(message);
        text.push('\n');
    }
    text.push('\n');
    text
}

/// A write refused for what the caller sent, in Nomad's words. Nomad answers these as RPC
/// errors (500); they are the caller's to fix: 400.
fn refused(message: impl Into<String>) -> Response {
    (
        StatusCode::BAD_REQUEST,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        message.into(),
    )
        .into_response()
}

fn forbidden(message: &str) -> Response {
    (
        StatusCode::FORBIDDEN,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        message.to_owned(),
    )
        .into_response()
}

fn index_headers(response: &mut Response, index: u64, read: bool) {
    let headers = response.headers_mut();
    headers.insert("X-Nomad-Index", HeaderValue::from(index.max(1)));
    if read {
        headers.insert("X-Nomad-KnownLeader", HeaderValue::from_static("true"));
        headers.insert("X-Nomad-LastContact", HeaderValue::from_static("0"));
    }
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
    index_headers(&mut response, index, true);
    response
}

fn written(index: u64) -> Response {
    let mut response = StatusCode::OK.into_response();
    index_headers(&mut response, index, false);
    response
}

/// The caller's ACL when ACLs are on (`Ok(None)` when off); an unknown or expired token is
/// the message of the 403 Nomad answers.
fn caller_acl(endpoints: &NamespaceEndpoints, headers: &HeaderMap) -> Result<Option<Acl>, String> {
    if !endpoints.acl_enabled {
        return Ok(None);
    }
    let header_str = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    let token = request_token(header_str("X-Nomad-Token"), header_str("Authorization"));
    match resolve_token_at(
        &endpoints.keyring,
        &endpoints.state,
        token,
        endpoints.clock.now_unix_ns(),
    ) {
        Ok(RequestIdentity::AclToken(token)) => Ok(Some(token_acl(&endpoints.state, &token))),
        Ok(RequestIdentity::Anonymous) => Ok(Some(anonymous_acl(&endpoints.state))),
        // A workload identity has no namespace policy of its own.
        Ok(RequestIdentity::Workload(_)) => Ok(Some(Acl::new(&[]))),
        Err(error) => Err(error.to_string()),
    }
}

/// Waits as a blocking query on the namespaces table, when the caller asked.
async fn block_on_namespaces(state: &StateStore, params: &QueryParams) -> Result<u64, ApiError> {
    wait_for_list(&StoreTables::new(state, &[Table::Namespaces]), params).await
}

async fn list(
    method: Method,
    headers: HeaderMap,
    State(endpoints): State<NamespaceEndpoints>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    if method != Method::GET {
        return Err(ApiError::MethodNotAllowed);
    }
    let acl = match caller_acl(&endpoints, &headers) {
        Ok(acl) => acl,
        Err(refusal) => return Ok(forbidden(&refusal)),
    };
    let params = QueryParams::parse(query.as_deref());
    let index = block_on_namespaces(&endpoints.state, &params).await?;
    let listed: Vec<Namespace> = endpoints
        .state
        .namespaces(params.prefix())
        .iter()
        .filter(|namespace| {
            acl.as_ref()
                .is_none_or(|acl| acl.allow_namespace(&namespace.name))
        })
        .map(|namespace| (**namespace).clone())
        .collect();
    Ok(json(&listed, index))
}

async fn missing_name() -> ApiError {
    ApiError::bad_request("Missing Namespace Name")
}

async fn create(
    method: Method,
    State(endpoints): State<NamespaceEndpoints>,
    body: Bytes,
) -> Result<Response, ApiError> {
    if method != Method::PUT && method != Method::POST {
        return Err(ApiError::MethodNotAllowed);
    }
    Ok(update(&endpoints, None, &body).await)
}

async fn specific(
    method: Method,
    headers: HeaderMap,
    State(endpoints): State<NamespaceEndpoints>,
    Path(name): Path<String>,
    RawQuery(query): RawQuery,
    body: Bytes,
) -> Result<Response, ApiError> {
    match method {
        Method::GET => {
            if let Some(acl) = match caller_acl(&endpoints, &headers) {
                Ok(acl) => acl,
                Err(refusal) => return Ok(forbidden(&refusal)),
            } && !acl.allow_namespace(&name)
            {
                return Ok(forbidden("Permission denied"));
            }
            // Nomad's `GetNamespace`: the namespace's own ModifyIndex (the table's, floored
            // at 1, while it does not exist), and a blocking query answered by its own write.
            let params = QueryParams::parse(query.as_deref());
            let watch = StoreTables::new(&endpoints.state, &[Table::Namespaces]);
            let (index, namespace) = read_object(
                &watch,
                &params,
                || Ok(endpoints.state.namespace(&name)),
                |namespace| namespace.modify_index,
            )
            .await?;
            match namespace {
                Some(namespace) => Ok(json(namespace.as_ref(), index)),
                None => Ok(not_found_at("Namespace not found", index.max(1))),
            }
        }
        Method::PUT | Method::POST => Ok(update(&endpoints, Some(&name), &body).await),
        Method::DELETE => Ok(delete(&endpoints, name).await),
        _ => Err(ApiError::MethodNotAllowed),
    }
}

/// Creates or updates the namespace in `body` (named by the path, when there is one).
async fn update(endpoints: &NamespaceEndpoints, path_name: Option<&str>, body: &[u8]) -> Response {
    let namespace: Namespace = match serde_json::from_slice::<serde_json::Value>(body)
        .and_then(drover_structs::lenient::from_value_ignoring_key_case)
    {
        Ok(namespace) => namespace,
        // Nomad answers a body it cannot decode with 500: a 400 here.
        Err(error) => return refused(error.to_string()),
    };
    if path_name.is_some_and(|name| name != namespace.name) {
        return ApiError::bad_request("Namespace name does not match request path").into_response();
    }
    let problems = namespace.validate();
    if !problems.is_empty() {
        return refused(format!(
            "Invalid namespace {:?}: {}",
            namespace.name,
            multi_error(&problems)
        ));
    }
    if !namespace.quota.is_empty() {
        // No quota specifications exist in drover (an Enterprise feature), as Nomad OSS.
        return refused(format!(
            "namespace {:?} using non-existent quota {:?}",
            namespace.name, namespace.quota
        ));
    }
    match endpoints.state.upsert_namespaces(vec![namespace]).await {
        Ok(index) => written(index),
        Err(error) if error.is_unavailable() => {
            ApiError::Unavailable(error.to_string()).into_response()
        }
        Err(error) => ApiError::internal(error.to_string()).into_response(),
    }
}

async fn delete(endpoints: &NamespaceEndpoints, name: String) -> Response {
    match endpoints.state.delete_namespaces(vec![name]).await {
        Ok(NamespaceDelete::Deleted { index }) => written(index),
        Ok(NamespaceDelete::Default) => refused("can not delete default namespace"),
        Ok(NamespaceDelete::InUse(held)) => {
            let messages: Vec<String> = held
                .iter()
                .map(|(namespace, what)| {
                    let what = match what {
                        NamespaceInUse::NonTerminalJobs => "has non-terminal jobs",
                        NamespaceInUse::NonTerminalAllocations => "has non-terminal allocations",
                        NamespaceInUse::Variables => "has variables associated with it",
                    };
                    format!(
                        "namespace {namespace:?} {what} in regions: [{}]",
                        endpoints.region
                    )
                })
                .collect();
            refused(multi_error(&messages))
        }
        Err(error) if error.is_unavailable() => {
            ApiError::Unavailable(error.to_string()).into_response()
        }
        Err(error) => ApiError::internal(error.to_string()).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multi_errors_read_as_nomads() {
        assert_eq!(
            multi_error(&["a".to_owned()]),
            "1 error occurred:\n\t* a\n\n"
        );
        assert_eq!(
            multi_error(&["a".to_owned(), "b".to_owned()]),
            "2 errors occurred:\n\t* a\n\t* b\n\n"
        );
    }
}
