//! Nomad Variables over HTTP on a server agent: `GET /v1/vars?prefix=` (blocking),
//! `GET|PUT|DELETE /v1/var/<path>` with `cas`, in Nomad's shapes and status codes.
//!
//! Who may do what, with ACLs off as Nomad: a request without a credential may do anything; a
//! request with a workload identity may only read its implicit paths (`nomad/jobs`,
//! `nomad/jobs/<job>`, `…/<group>`, `…/<group>/<task>` in its namespace); any other
//! credential is refused (403). Locks (`lock-acquire`, `lock-renew`, `lock-release`) as
//! Nomad's; a variable's lock is shown only to management (everyone with ACLs off).
//!
//! Not here: sealing and validation (`drover_server::variables`).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use drover_api::ApiError;
use drover_api::blocking::{StoreTables, read_object, wait_for_list};
use drover_api::paginate::{ListOptions, TokenKind, TokenParts, page, to_datum};
use drover_api::params::QueryParams;
use drover_server::Clock;
use drover_server::identity::{RequestIdentity, WorkloadIdentity, request_token, resolve_token};
use drover_server::keyring::Keyring;
use drover_server::variable_locks::VariableLocks;
use drover_server::variables::{
    VariableWriteOutcome, VariablesError, acquire_variable_lock, delete_variable, put_variable,
    read_variable, release_variable_lock, renew_variable_lock,
};
use drover_state::{StateStore, Table};
use drover_structs::{DEFAULT_NAMESPACE, Variable, VariableMetadata};

/// What the variables endpoints need.
#[derive(Clone)]
pub struct VariablesEndpoints {
    pub keyring: Arc<Keyring>,
    pub state: StateStore,
    pub clock: Arc<dyn Clock>,
    pub locks: Arc<VariableLocks>,
    /// Whether ACLs are on (off: every caller sees locks, as Nomad's management).
    pub acl_enabled: bool,
}

/// The routes, for a server agent.
pub fn router(endpoints: VariablesEndpoints) -> axum::Router {
    axum::Router::new()
        .route("/v1/vars", axum::routing::any(list))
        .route("/v1/var/", axum::routing::any(missing_path))
        .route("/v1/var/{*path}", axum::routing::any(specific))
        .with_state(endpoints)
}

fn variables_error(error: VariablesError) -> ApiError {
    match error {
        VariablesError::Invalid(message) => ApiError::bad_request(message),
        VariablesError::NotFound => ApiError::not_found("variable doesn't exist"),
        other => ApiError::internal(other.to_string()),
    }
}

fn permission_denied() -> Response {
    (
        StatusCode::FORBIDDEN,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        "Permission denied",
    )
        .into_response()
}

fn json_with_status(
    status: StatusCode,
    value: &impl serde::Serialize,
    index: u64,
    read: bool,
) -> Response {
    let body = match serde_json::to_vec(value) {
        Ok(body) => body,
        Err(error) => return ApiError::internal(error.to_string()).into_response(),
    };
    let mut response = (status, [(header::CONTENT_TYPE, "application/json")], body).into_response();
    let headers = response.headers_mut();
    headers.insert("X-Nomad-Index", HeaderValue::from(index.max(1)));
    if read {
        headers.insert("X-Nomad-KnownLeader", HeaderValue::from_static("true"));
        headers.insert("X-Nomad-LastContact", HeaderValue::from_static("0"));
    }
    response
}

/// An error as Nomad answers it: lock conflicts are 409 with the message.
fn error_response(error: VariablesError) -> Response {
    match error {
        VariablesError::LockConflict(message) => (
            StatusCode::CONFLICT,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            message,
        )
            .into_response(),
        other => variables_error(other).into_response(),
    }
}

/// Whether `identity` sees locks: management only, as Nomad (everyone with ACLs off).
fn sees_locks(endpoints: &VariablesEndpoints, identity: &RequestIdentity) -> bool {
    match identity {
        RequestIdentity::Anonymous => !endpoints.acl_enabled,
        RequestIdentity::AclToken(token) => !endpoints.acl_enabled || token.is_management(),
        RequestIdentity::Workload(_) => false,
    }
}

/// Who is asking; `None` for a credential that does not resolve (answered 403).
fn caller(endpoints: &VariablesEndpoints, headers: &HeaderMap) -> Option<RequestIdentity> {
    let header_str = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    let token = request_token(header_str("X-Nomad-Token"), header_str("Authorization"));
    resolve_token(&endpoints.keyring, &endpoints.state, token)
        .inspect_err(|error| tracing::debug!(%error, "refused a variables request's credential"))
        .ok()
}

/// Nomad's implicit policy of a workload identity: read its own job's paths.
pub(crate) fn workload_may_read(identity: &WorkloadIdentity, namespace: &str, path: &str) -> bool {
    if namespace != identity.namespace {
        return false;
    }
    let parts: Vec<&str> = path.split('/').collect();
    let own = [
        "nomad",
        "jobs",
        identity.job_id.as_str(),
        identity.group.as_str(),
        identity.task.as_str(),
    ];
    (2..=5).contains(&parts.len()) && parts.iter().zip(own.iter()).all(|(part, own)| part == own)
}

/// Waits as a blocking query on the variables table, when the caller asked.
async fn block_on_variables(state: &StateStore, params: &QueryParams) -> Result<u64, ApiError> {
    wait_for_list(&StoreTables::new(state, &[Table::Variables]), params).await
}

/// A read of one variable as Nomad's `Variables.Read` answers it
/// ([`drover_api::blocking::read_object`] on the variables table).
async fn block_on_variable(
    endpoints: &VariablesEndpoints,
    params: &QueryParams,
    namespace: &str,
    path: &str,
) -> Result<(u64, Option<Variable>), ApiError> {
    let watch = StoreTables::new(&endpoints.state, &[Table::Variables]);
    read_object(
        &watch,
        params,
        || {
            read_variable(&endpoints.keyring, &endpoints.state, namespace, path)
                .map_err(variables_error)
        },
        |variable| variable.modify_index,
    )
    .await
}

fn namespace_of(params: &QueryParams) -> String {
    match params.non_empty("namespace") {
        Some(namespace) => namespace.to_owned(),
        None => DEFAULT_NAMESPACE.to_owned(),
    }
}

async fn list(
    method: Method,
    headers: HeaderMap,
    State(endpoints): State<VariablesEndpoints>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    if method != Method::GET {
        return Err(ApiError::MethodNotAllowed);
    }
    let Some(identity) = caller(&endpoints, &headers) else {
        return Ok(permission_denied());
    };
    let params = QueryParams::parse(query.as_deref());
    let namespace = namespace_of(&params);
    let prefix = params.prefix().to_owned();
    let options = ListOptions::from_params(&params)?;
    let index = block_on_variables(&endpoints.state, &params).await?;
    let wanted_namespace = (namespace != "*").then_some(namespace.as_str());
    let token_acl = match &identity {
        RequestIdentity::AclToken(token) => {
            Some(drover_server::acl::token_acl(&endpoints.state, token))
        }
        RequestIdentity::Workload(workload) => {
            Some(drover_server::acl::workload_acl(&endpoints.state, workload))
        }
        RequestIdentity::Anonymous => None,
    };
    let mut readable: Vec<_> = endpoints
        .state
        .variables(wanted_namespace, &prefix)
        .into_iter()
        .filter(|stored| match &identity {
            RequestIdentity::Anonymous => true,
            RequestIdentity::Workload(workload) => {
                workload_may_read(workload, &stored.meta.namespace, &stored.meta.path)
                    || token_acl.as_ref().is_some_and(|acl| {
                        acl.allow_variable_operation(
                            &stored.meta.namespace,
                            &stored.meta.path,
                            "list",
                        )
                    })
            }
            RequestIdentity::AclToken(_) => token_acl.as_ref().is_some_and(|acl| {
                acl.allow_variable_operation(&stored.meta.namespace, &stored.meta.path, "list")
            }),
        })
        .map(|stored| {
            let mut meta = stored.meta.clone();
            if !sees_locks(&endpoints, &identity) {
                meta.lock = None;
            }
            meta
        })
        .collect();
    // Nomad's paginator over its (namespace, path) index: tokens are `<namespace>.<path>`.
    readable.sort_by(|a, b| (&a.namespace, &a.path).cmp(&(&b.namespace, &b.path)));
    if options.reverse {
        readable.reverse();
    }
    let (listed, next_token): (Vec<VariableMetadata>, String) = page(
        readable,
        &options,
        TokenKind::NamespaceId,
        |meta| TokenParts {
            namespace: &meta.namespace,
            id: &meta.path,
            create_index: meta.create_index,
        },
        to_datum,
        Ok,
    )?;
    let mut response = json_with_status(StatusCode::OK, &listed, index, true);
    if !next_token.is_empty()
        && let Ok(value) = HeaderValue::from_str(&next_token)
    {
        response.headers_mut().insert("X-Nomad-NextToken", value);
    }
    Ok(response)
}

async fn missing_path() -> ApiError {
    ApiError::bad_request("missing variable path")
}

fn parse_cas(params: &QueryParams) -> Result<Option<u64>, ApiError> {
    match params.non_empty("cas") {
        None => Ok(None),
        Some(value) => value
            .parse::<u64>()
            .map(Some)
            .map_err(|error| ApiError::bad_request(format!("can not parse cas: {error}"))),
    }
}

fn write_answer(outcome: VariableWriteOutcome, delete: bool) -> Response {
    match outcome {
        VariableWriteOutcome::Conflict(current) => {
            let index = current.modify_index;
            json_with_status(StatusCode::CONFLICT, &current, index, false)
        }
        VariableWriteOutcome::Applied { index, .. } if delete => {
            let mut response = StatusCode::NO_CONTENT.into_response();
            response
                .headers_mut()
                .insert("X-Nomad-Index", HeaderValue::from(index.max(1)));
            response
        }
        VariableWriteOutcome::Applied { variable, index } => {
            json_with_status(StatusCode::OK, &variable, index, false)
        }
    }
}

async fn specific(
    method: Method,
    headers: HeaderMap,
    State(endpoints): State<VariablesEndpoints>,
    Path(path): Path<String>,
    RawQuery(query): RawQuery,
    body: Bytes,
) -> Result<Response, ApiError> {
    let params = QueryParams::parse(query.as_deref());
    let namespace = namespace_of(&params);
    let Some(identity) = caller(&endpoints, &headers) else {
        return Ok(permission_denied());
    };
    let workload = match &identity {
        // An ACL token's rights were checked by the agent's ACL layer before this handler.
        RequestIdentity::Anonymous | RequestIdentity::AclToken(_) => None,
        RequestIdentity::Workload(workload) => Some(workload),
    };
    // Beyond its implicit read of its own job's paths, a workload may do what the policies
    // attached to its job grant (Nomad's `JobACL`).
    let attached_allows = |operation: &str| {
        workload.is_some_and(|workload| {
            drover_server::acl::workload_acl(&endpoints.state, workload)
                .allow_variable_operation(&namespace, &path, operation)
        })
    };
    match method {
        Method::GET => {
            if workload.is_some_and(|workload| !workload_may_read(workload, &namespace, &path))
                && !attached_allows("read")
            {
                return Ok(permission_denied());
            }
            let (index, variable) =
                block_on_variable(&endpoints, &params, &namespace, &path).await?;
            match variable {
                Some(mut variable) => {
                    if !sees_locks(&endpoints, &identity) {
                        variable.lock = None;
                    }
                    Ok(json_with_status(StatusCode::OK, &variable, index, true))
                }
                // Nomad sets the query's index on the 404 too: a blocking reader waiting
                // for the variable to appear goes on from there.
                None => {
                    let mut response = ApiError::not_found("variable not found").into_response();
                    let headers = response.headers_mut();
                    headers.insert("X-Nomad-Index", HeaderValue::from(index.max(1)));
                    headers.insert("X-Nomad-KnownLeader", HeaderValue::from_static("true"));
                    headers.insert("X-Nomad-LastContact", HeaderValue::from_static("0"));
                    Ok(response)
                }
            }
        }
        Method::PUT | Method::POST => {
            if workload.is_some() && !attached_allows("write") {
                return Ok(permission_denied());
            }
            let lock_ops = ["lock-acquire", "lock-renew", "lock-release"]
                .iter()
                .filter(|op| params.get(op).is_some())
                .count();
            if lock_ops > 1 {
                return Err(ApiError::bad_request("multiple lock operations"));
            }
            let mut variable: Variable = crate::request_body::decode_lenient_or_default(&body)?;
            if lock_ops == 1 {
                if params.non_empty("cas").is_some() {
                    return Err(ApiError::bad_request(
                        "CAS can't be used with lock operations",
                    ));
                }
                variable.path = path;
                if params.non_empty("namespace").is_some() || variable.namespace.is_empty() {
                    variable.namespace = namespace;
                }
                return Ok(lock_operation(&endpoints, &params, variable).await);
            }
            if variable.items.is_empty() {
                return Err(ApiError::bad_request(
                    "variable missing required Items object",
                ));
            }
            variable.path = path;
            if params.non_empty("namespace").is_some() || variable.namespace.is_empty() {
                variable.namespace = namespace;
            }
            let cas = parse_cas(&params)?;
            let outcome = put_variable(
                &endpoints.keyring,
                &endpoints.state,
                variable,
                cas,
                endpoints.clock.now_unix_ns(),
            )
            .await
            .map_err(variables_error)?;
            Ok(write_answer(outcome, false))
        }
        Method::DELETE => {
            if workload.is_some() && !attached_allows("destroy") {
                return Ok(permission_denied());
            }
            let cas = parse_cas(&params)?;
            let outcome = delete_variable(
                &endpoints.keyring,
                &endpoints.state,
                &namespace,
                &path,
                cas,
                endpoints.clock.now_unix_ns(),
            )
            .await
            .map_err(variables_error)?;
            Ok(write_answer(outcome, true))
        }
        // Nomad answers a bad method here with 400.
        _ => Err(ApiError::bad_request("Invalid method")),
    }
}

/// `lock-acquire`, `lock-release` (the variable, or the conflict as 409) and `lock-renew`
/// (the variable's metadata), as Nomad's.
async fn lock_operation(
    endpoints: &VariablesEndpoints,
    params: &QueryParams,
    variable: Variable,
) -> Response {
    let outcome = if params.get("lock-renew").is_some() {
        let lock_id = variable
            .lock
            .as_ref()
            .map(|lock| lock.id.clone())
            .unwrap_or_default();
        return match renew_variable_lock(
            &endpoints.state,
            &endpoints.locks,
            &variable.namespace,
            &variable.path,
            &lock_id,
        ) {
            Ok(meta) => json_with_status(StatusCode::OK, &meta, meta.modify_index, false),
            Err(error) => error_response(error),
        };
    } else if params.get("lock-acquire").is_some() {
        acquire_variable_lock(
            &endpoints.keyring,
            &endpoints.state,
            &endpoints.locks,
            variable,
            endpoints.clock.now_unix_ns(),
        )
        .await
    } else {
        release_variable_lock(&endpoints.state, &endpoints.locks, variable).await
    };
    match outcome {
        Ok(outcome) => write_answer(outcome, false),
        Err(error) => error_response(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workload_reads_only_its_implicit_paths() {
        let identity = WorkloadIdentity {
            namespace: "default".to_owned(),
            job_id: "web".to_owned(),
            alloc_id: "a".to_owned(),
            group: "g".to_owned(),
            task: "t".to_owned(),
            key_id: "k".to_owned(),
            claims: serde_json::Value::Null,
        };
        for path in [
            "nomad/jobs",
            "nomad/jobs/web",
            "nomad/jobs/web/g",
            "nomad/jobs/web/g/t",
        ] {
            assert!(workload_may_read(&identity, "default", path), "{path}");
        }
        for path in [
            "nomad",
            "nomad/jobs/other",
            "nomad/jobs/web/h",
            "nomad/jobs/web/g/u",
            "nomad/jobs/web/g/t/deeper",
            "app/db",
        ] {
            assert!(!workload_may_read(&identity, "default", path), "{path}");
        }
        assert!(!workload_may_read(&identity, "other", "nomad/jobs/web"));
    }

    async fn send(router: &axum::Router, method: &str, uri: &str, body: &str) -> Response {
        use tower::ServiceExt as _;
        let request = axum::http::Request::builder()
            .method(method)
            .uri(uri)
            .body(axum::body::Body::from(body.to_owned()))
            .unwrap();
        router.clone().oneshot(request).await.unwrap()
    }

    fn index_of(response: &Response) -> u64 {
        response.headers()["X-Nomad-Index"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn a_variable_read_answers_its_own_modify_index_and_blocks_on_it() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateStore::open(dir.path()).await.unwrap();
        let clock: Arc<dyn Clock> = Arc::new(drover_server::SystemClock);
        let keyring = Arc::new(
            Keyring::open(dir.path(), state.clone(), Arc::clone(&clock))
                .await
                .unwrap(),
        );
        let router = router(VariablesEndpoints {
            keyring,
            locks: VariableLocks::new(state.clone()),
            state: state.clone(),
            clock,
            acl_enabled: false,
        });
        let put = send(&router, "PUT", "/v1/var/app/a", r#"{"Items":{"k":"1"}}"#).await;
        assert_eq!(put.status(), StatusCode::OK);
        let written = index_of(&put);
        let other = send(&router, "PUT", "/v1/var/app/b", r#"{"Items":{"k":"2"}}"#).await;
        assert_eq!(other.status(), StatusCode::OK);
        assert!(state.indexes().table(Table::Variables) > written);
        // Nomad's `Variables.Read`: the variable's ModifyIndex, not the table's.
        let read = send(&router, "GET", "/v1/var/app/a", "").await;
        assert_eq!(read.status(), StatusCode::OK);
        assert_eq!(index_of(&read), written);

        // Blocking on it: another variable's write neither answers the read nor makes it
        // spin; a write of this variable does.
        let waiting = router.clone();
        let uri = format!("/v1/var/app/a?index={written}&wait=5m");
        let waiter = tokio::spawn(async move { send(&waiting, "GET", &uri, "").await });
        tokio::time::sleep(std::time::Duration::from_secs(10)).await;
        send(&router, "PUT", "/v1/var/app/c", r#"{"Items":{"k":"3"}}"#).await;
        tokio::time::sleep(std::time::Duration::from_secs(10)).await;
        assert!(
            !waiter.is_finished(),
            "another variable's write answered the read"
        );
        let rewritten =
            index_of(&send(&router, "PUT", "/v1/var/app/a", r#"{"Items":{"k":"4"}}"#).await);
        let answered = waiter.await.unwrap();
        assert_eq!(index_of(&answered), rewritten);
    }
}
