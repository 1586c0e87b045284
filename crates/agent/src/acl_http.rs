//! Nomad's ACL endpoints on a server agent: `/v1/acl/bootstrap`, `/v1/acl/policies`,
//! `/v1/acl/policy/<name>`, `/v1/acl/tokens`, `/v1/acl/token` (create),
//! `/v1/acl/token/<accessor>`, `/v1/acl/token/self` and the one-time tokens
//! (`/v1/acl/token/onetime`, `…/onetime/exchange`: a secret good for one exchange within 10
//! minutes, Nomad's `nomad ui -authenticate`), in Nomad's shapes, status codes and messages
//! (the role routes are `acl_roles_http`'s). With ACLs off every one
//! answers 400 `ACL support disabled`, as Nomad.
//!
//! Who may call what is decided before a handler runs (`acl_enforce`); a handler only filters
//! what a non-management caller sees (its own policies, those of its roles, its own token).
//! A token's role links are stored by role ID and answered with the role's current name.
//!
//! Not here: the policy language (`drover_server::acl::policy`), storage (the state store).

use std::path::PathBuf;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use drover_api::ApiError;
use drover_api::blocking::{StoreTables, not_found_at, read_object, wait_for_list};
use drover_api::params::QueryParams;
use drover_server::Clock;
use drover_server::acl::{
    identity_policy_names, is_valid_policy_name, job_acl_errors, policy, policy_hash, token_hash,
    token_with_current_roles,
};
use drover_server::identity::{RequestIdentity, request_token, resolve_token_at};
use drover_server::keyring::Keyring;
use drover_state::{StateStore, Table};
use drover_structs::acl::{
    ACL_TOKEN_TYPE_CLIENT, ACL_TOKEN_TYPE_MANAGEMENT, ANONYMOUS_POLICY, AclBootstrapRequest,
    AclPolicy, AclToken, AclTokenRoleLink, ONE_TIME_TOKEN_TTL_NS, OneTimeToken,
    OneTimeTokenExchangeRequest,
};
use drover_structs::{DurationNs, Timestamp};

/// The file in the server's data dir whose number allows one more bootstrap (Nomad's).
pub const BOOTSTRAP_RESET_FILE: &str = "acl-bootstrap-reset";
/// What the ACL endpoints need.
#[derive(Clone)]
pub struct AclEndpoints {
    pub enabled: bool,
    /// How soon and how late after its creation a new token may expire (`acl {
    /// token_min_expiration_ttl, token_max_expiration_ttl }`).
    pub token_min_expiration_ttl: DurationNs,
    pub token_max_expiration_ttl: DurationNs,
    pub keyring: Arc<Keyring>,
    pub state: StateStore,
    pub clock: Arc<dyn Clock>,
    /// The server's data dir, where the bootstrap reset file is read.
    pub server_dir: PathBuf,
}

/// The routes, for a server agent.
pub fn router(endpoints: AclEndpoints) -> axum::Router {
    axum::Router::new()
        .route("/v1/acl/bootstrap", axum::routing::any(bootstrap))
        .route("/v1/acl/policies", axum::routing::any(list_policies))
        .route(
            "/v1/acl/policy/",
            axum::routing::any(|| async { ApiError::bad_request("Missing Policy Name") }),
        )
        .route("/v1/acl/policy/{name}", axum::routing::any(specific_policy))
        .route("/v1/acl/tokens", axum::routing::any(list_tokens))
        .route("/v1/acl/token", axum::routing::any(create_token))
        .route(
            "/v1/acl/token/",
            axum::routing::any(|| async { ApiError::bad_request("Missing Token Accessor") }),
        )
        .route(
            "/v1/acl/token/onetime",
            axum::routing::any(upsert_one_time_token),
        )
        .route(
            "/v1/acl/token/onetime/exchange",
            axum::routing::any(exchange_one_time_token),
        )
        .route(
            "/v1/acl/token/{accessor}",
            axum::routing::any(specific_token),
        )
        .with_state(endpoints)
}

pub(crate) fn forbidden(message: &str) -> Response {
    (
        StatusCode::FORBIDDEN,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        message.to_owned(),
    )
        .into_response()
}

pub(crate) fn json(value: &impl serde::Serialize, index: u64, read: bool) -> Response {
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
    index_headers(&mut response, index, read);
    response
}

pub(crate) fn index_headers(response: &mut Response, index: u64, read: bool) {
    let headers = response.headers_mut();
    headers.insert("X-Nomad-Index", HeaderValue::from(index.max(1)));
    if read {
        headers.insert("X-Nomad-KnownLeader", HeaderValue::from_static("true"));
        headers.insert("X-Nomad-LastContact", HeaderValue::from_static("0"));
    }
}

pub(crate) fn empty(index: u64) -> Response {
    let mut response = StatusCode::OK.into_response();
    index_headers(&mut response, index, false);
    response
}

pub(crate) fn disabled() -> Result<Response, ApiError> {
    Err(ApiError::bad_request("ACL support disabled"))
}

pub(crate) fn is_write(method: &Method) -> bool {
    method == Method::PUT || method == Method::POST
}

/// The caller's identity; an unknown or expired token is the error Nomad answers (403).
pub(crate) fn caller(
    endpoints: &AclEndpoints,
    headers: &HeaderMap,
) -> Result<RequestIdentity, String> {
    let header_str = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    let token = request_token(header_str("X-Nomad-Token"), header_str("Authorization"));
    resolve_token_at(
        &endpoints.keyring,
        &endpoints.state,
        token,
        endpoints.clock.now_unix_ns(),
    )
    .map_err(|error| error.to_string())
}

fn is_uuid(text: &str) -> bool {
    uuid::Uuid::parse_str(text).is_ok_and(|parsed| parsed.hyphenated().to_string() == text)
}

/// The reset index in the data dir's `acl-bootstrap-reset`, if the file holds one.
fn reset_index(endpoints: &AclEndpoints) -> Option<u64> {
    let text = std::fs::read_to_string(endpoints.server_dir.join(BOOTSTRAP_RESET_FILE)).ok()?;
    text.trim().parse().ok()
}

async fn bootstrap(
    method: Method,
    State(endpoints): State<AclEndpoints>,
    body: Bytes,
) -> Result<Response, ApiError> {
    if !is_write(&method) {
        return Err(ApiError::MethodNotAllowed);
    }
    if !endpoints.enabled {
        return disabled();
    }
    let request: AclBootstrapRequest = crate::request_body::decode_or_default(&body)?;
    let secret_id = if request.bootstrap_secret.is_empty() {
        uuid::Uuid::new_v4().to_string()
    } else if is_uuid(&request.bootstrap_secret) {
        request.bootstrap_secret
    } else {
        return Err(ApiError::bad_request("invalid acl token"));
    };
    let mut token = AclToken {
        accessor_id: uuid::Uuid::new_v4().to_string(),
        secret_id,
        name: "Bootstrap Token".to_owned(),
        token_type: ACL_TOKEN_TYPE_MANAGEMENT.to_owned(),
        global: true,
        create_time: Timestamp::from_unix_nanos(endpoints.clock.now_unix_ns()),
        ..AclToken::default()
    };
    token.hash = token_hash(&token);
    match endpoints
        .state
        .bootstrap_acl_token(token, reset_index(&endpoints))
        .await
        .map_err(|error| ApiError::internal(error.to_string()))?
    {
        Ok(stored) => Ok(json(stored.as_ref(), stored.modify_index, false)),
        Err(refused) => Err(ApiError::bad_request(refused.to_string())),
    }
}

async fn list_policies(
    method: Method,
    headers: HeaderMap,
    State(endpoints): State<AclEndpoints>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    if method != Method::GET {
        return Err(ApiError::MethodNotAllowed);
    }
    if !endpoints.enabled {
        return disabled();
    }
    let identity = match caller(&endpoints, &headers) {
        Ok(identity) => identity,
        Err(message) => return Ok(forbidden(&message)),
    };
    let params = QueryParams::parse(query.as_deref());
    let watch = StoreTables::new(&endpoints.state, &[Table::AclPolicies]);
    let index = wait_for_list(&watch, &params).await?;
    let prefix = params.prefix();
    // A management token sees every policy; any other caller those it holds (a token's own
    // and its roles', the anonymous policy, a workload identity's attached ones), as Nomad.
    let visible = identity_policy_names(&endpoints.state, &identity);
    let tables = endpoints.state.acl();
    let stubs: Vec<_> = tables
        .policies
        .values()
        .filter(|policy| policy.name.starts_with(prefix))
        .filter(|policy| {
            visible
                .as_ref()
                .is_none_or(|names| names.contains(&policy.name))
        })
        .map(|policy| policy.stub())
        .collect();
    Ok(json(&stubs, index, true))
}

async fn specific_policy(
    method: Method,
    headers: HeaderMap,
    State(endpoints): State<AclEndpoints>,
    Path(name): Path<String>,
    RawQuery(query): RawQuery,
    body: Bytes,
) -> Result<Response, ApiError> {
    if name == "self" {
        return self_policies(&method, &headers, &endpoints);
    }
    if !matches!(
        method,
        Method::GET | Method::PUT | Method::POST | Method::DELETE
    ) {
        return Err(ApiError::MethodNotAllowed);
    }
    if !endpoints.enabled {
        return disabled();
    }
    match method {
        Method::GET => {
            let identity = match caller(&endpoints, &headers) {
                Ok(identity) => identity,
                Err(message) => return Ok(forbidden(&message)),
            };
            // The anonymous policy is anyone's to read; another one its holders' (and
            // management's), as Nomad.
            let allowed = name == ANONYMOUS_POLICY
                || identity_policy_names(&endpoints.state, &identity)
                    .is_none_or(|names| names.contains(&name));
            if !allowed {
                return Ok(forbidden("Permission denied"));
            }
            // Nomad's `GetPolicy`: the policy's own ModifyIndex (the policies table's while it
            // does not exist, on the 404 too), a blocking query answered by its own write.
            let params = QueryParams::parse(query.as_deref());
            let watch = StoreTables::new(&endpoints.state, &[Table::AclPolicies]);
            let (index, policy) = read_object(
                &watch,
                &params,
                || Ok(endpoints.state.acl().policies.get(&name).cloned()),
                |policy| policy.modify_index,
            )
            .await?;
            let Some(policy) = policy else {
                return Ok(not_found_at("ACL policy not found", index));
            };
            // With `RulesJSON`, the rules parsed (Nomad fills it on read); rules that no
            // longer parse (stored by an older version) leave it out rather than fail the read.
            let mut value = serde_json::to_value(policy.as_ref())
                .map_err(|error| ApiError::internal(error.to_string()))?;
            if let (Ok(parsed), Some(object)) =
                (policy::parse(&policy.rules), value.as_object_mut())
            {
                object.insert("RulesJSON".to_owned(), parsed.rules_json(&policy.rules));
            }
            Ok(json(&value, index, true))
        }
        Method::PUT | Method::POST => {
            let mut policy: AclPolicy = serde_json::from_slice(&body).map_err(|error| {
                ApiError::bad_request(format!("failed to decode request: {error}"))
            })?;
            if policy.name != name {
                return Err(ApiError::bad_request(
                    "Policy name does not match request path",
                ));
            }
            if !is_valid_policy_name(&policy.name) {
                return Err(ApiError::bad_request(format!(
                    "policy 0 invalid: invalid name '{}'",
                    policy.name
                )));
            }
            if policy.description.len() > 256 {
                return Err(ApiError::bad_request(
                    "policy 0 invalid: description longer than 256",
                ));
            }
            policy::parse(&policy.rules)
                .map_err(|error| ApiError::bad_request(format!("policy 0 invalid: {error}")))?;
            if let Some(binding) = &policy.job_acl {
                let errors = job_acl_errors(binding);
                if !errors.is_empty() {
                    return Err(ApiError::bad_request(format!(
                        "policy 0 invalid: {}",
                        crate::namespaces_http::multi_error(&errors)
                    )));
                }
            }
            policy.hash = policy_hash(&policy);
            let index = endpoints
                .state
                .upsert_acl_policies(vec![policy])
                .await
                .map_err(|error| ApiError::internal(error.to_string()))?;
            Ok(empty(index))
        }
        Method::DELETE => {
            let index = endpoints
                .state
                .delete_acl_policies(vec![name])
                .await
                .map_err(|error| match error {
                    drover_state::StateError::NotFound { .. } => {
                        ApiError::bad_request("ACL policy not found")
                    }
                    other => ApiError::internal(other.to_string()),
                })?;
            Ok(empty(index))
        }
        _ => Err(ApiError::MethodNotAllowed),
    }
}

/// `GET /v1/acl/policy/self`: the policies the caller holds, as list stubs (Nomad's
/// `aclSelfPolicy`). A workload identity gets those attached to its job, ACLs on or off; an
/// ACL token what `/v1/acl/policies` lists for it (ACLs on only).
fn self_policies(
    method: &Method,
    headers: &HeaderMap,
    endpoints: &AclEndpoints,
) -> Result<Response, ApiError> {
    if *method != Method::GET {
        return Err(ApiError::MethodNotAllowed);
    }
    let identity = match caller(endpoints, headers) {
        Ok(identity) => identity,
        Err(message) => return Ok(forbidden(&message)),
    };
    match &identity {
        RequestIdentity::Workload(_) => {}
        // Nomad takes a missing token for a workload identity that is not there.
        RequestIdentity::Anonymous => return Ok(forbidden("Permission denied")),
        RequestIdentity::AclToken(_) if !endpoints.enabled => return disabled(),
        RequestIdentity::AclToken(_) => {}
    }
    let visible = identity_policy_names(&endpoints.state, &identity);
    let tables = endpoints.state.acl();
    let stubs: Vec<_> = tables
        .policies
        .values()
        .filter(|policy| {
            visible
                .as_ref()
                .is_none_or(|names| names.contains(&policy.name))
        })
        .map(|policy| policy.stub())
        .collect();
    Ok(json(
        &stubs,
        endpoints.state.indexes().table(Table::AclPolicies),
        true,
    ))
}

async fn list_tokens(
    method: Method,
    State(endpoints): State<AclEndpoints>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    if method != Method::GET {
        return Err(ApiError::MethodNotAllowed);
    }
    if !endpoints.enabled {
        return disabled();
    }
    let params = QueryParams::parse(query.as_deref());
    let watch = StoreTables::new(&endpoints.state, &[Table::AclTokens]);
    let index = wait_for_list(&watch, &params).await?;
    let prefix = params.prefix();
    let mut tokens: Vec<Arc<AclToken>> = endpoints
        .state
        .acl()
        .tokens
        .values()
        .filter(|token| token.accessor_id.starts_with(prefix))
        .cloned()
        .collect();
    tokens.sort_by(|a, b| (a.create_index, &a.accessor_id).cmp(&(b.create_index, &b.accessor_id)));
    let tables = endpoints.state.acl();
    let stubs: Vec<_> = tokens
        .iter()
        .map(|token| token_with_current_roles(&tables, token).stub())
        .collect();
    Ok(json(&stubs, index, true))
}

/// Checks a token to create or update and fills what the server sets (Nomad's
/// `ACLToken.Validate` and expiry rules).
pub(crate) fn prepare_token(
    endpoints: &AclEndpoints,
    token: &mut AclToken,
    existing: Option<&AclToken>,
) -> Result<(), ApiError> {
    if token.name.len() > 256 {
        return Err(ApiError::bad_request("token name too long"));
    }
    let has_policies = token
        .policies
        .as_ref()
        .is_some_and(|names| !names.is_empty());
    let has_roles = token.roles.as_ref().is_some_and(|links| !links.is_empty());
    match token.token_type.as_str() {
        ACL_TOKEN_TYPE_CLIENT => {
            if !has_policies && !has_roles {
                return Err(ApiError::bad_request(
                    "client token missing policies or roles",
                ));
            }
        }
        ACL_TOKEN_TYPE_MANAGEMENT => {
            if has_policies || has_roles {
                return Err(ApiError::bad_request(
                    "management token cannot be associated with policies or roles",
                ));
            }
        }
        _ => {
            return Err(ApiError::bad_request(
                "token type must be client or management",
            ));
        }
    }
    // A policy the token names need not exist yet, as Nomad's `ACL.UpsertTokens` does not
    // look: the token holds it once it is written (resolution skips names not stored).
    let tables = endpoints.state.acl();
    // Role links by ID or name become links by the role's immutable ID, without repeats
    // (Nomad stores no name: a role may be renamed).
    if let Some(links) = token.roles.take() {
        let mut resolved: Vec<AclTokenRoleLink> = Vec::new();
        for link in links {
            let role = if link.id.is_empty() {
                tables.role_by_name(&link.name)
            } else {
                tables.roles.get(&link.id)
            };
            let Some(role) = role else {
                let named = if link.id.is_empty() {
                    link.name
                } else {
                    link.id
                };
                return Err(ApiError::bad_request(format!("cannot find role {named}")));
            };
            if !resolved.iter().any(|seen| seen.id == role.id) {
                resolved.push(AclTokenRoleLink {
                    id: role.id.clone(),
                    name: String::new(),
                });
            }
        }
        token.roles = Some(resolved);
    }
    let now = endpoints.clock.now_unix_ns();
    match existing {
        Some(existing) => {
            if existing.token_type != token.token_type {
                return Err(ApiError::bad_request("cannot change token type"));
            }
            if existing.global != token.global {
                return Err(ApiError::bad_request("cannot toggle global value"));
            }
            token.secret_id.clone_from(&existing.secret_id);
            token.create_time = existing.create_time;
            token.expiration_time = existing.expiration_time;
            token.expiration_ttl = existing.expiration_ttl;
        }
        None => {
            token.accessor_id = uuid::Uuid::new_v4().to_string();
            token.secret_id = uuid::Uuid::new_v4().to_string();
            token.create_time = Timestamp::from_unix_nanos(now);
            let ttl = token.expiration_ttl.as_nanos();
            if ttl != 0 && token.expiration_time.is_some() {
                return Err(ApiError::bad_request(
                    "Token cannot have both expiration time and TTL",
                ));
            }
            if ttl != 0 {
                if ttl < 0 {
                    return Err(ApiError::bad_request(
                        "token expiration TTL must be positive",
                    ));
                }
                token.expiration_time = Some(Timestamp::from_unix_nanos(now.saturating_add(ttl)));
            }
            if let Some(expiry) = token.expiration_time.and_then(Timestamp::unix_nanos) {
                let in_future = DurationNs::from_nanos(expiry.saturating_sub(now));
                let (min, max) = (
                    endpoints.token_min_expiration_ttl,
                    endpoints.token_max_expiration_ttl,
                );
                if in_future > max {
                    return Err(ApiError::bad_request(format!(
                        "expiration time cannot be more than {max} in the future (was {in_future})"
                    )));
                }
                if in_future < min {
                    return Err(ApiError::bad_request(format!(
                        "expiration time cannot be less than {min} in the future (was {in_future})"
                    )));
                }
            }
        }
    }
    token.hash = token_hash(token);
    Ok(())
}

async fn create_token(
    method: Method,
    State(endpoints): State<AclEndpoints>,
    body: Bytes,
) -> Result<Response, ApiError> {
    if !is_write(&method) {
        return Err(ApiError::MethodNotAllowed);
    }
    if !endpoints.enabled {
        return disabled();
    }
    let mut token: AclToken = serde_json::from_slice(&body)
        .map_err(|error| ApiError::bad_request(format!("failed to decode request: {error}")))?;
    if !token.accessor_id.is_empty() {
        return Err(ApiError::bad_request(
            "cannot create a token with an accessor ID",
        ));
    }
    prepare_token(&endpoints, &mut token, None)?;
    let stored = endpoints
        .state
        .upsert_acl_token(token)
        .await
        .map_err(|error| ApiError::internal(error.to_string()))?;
    Ok(json(
        &token_with_current_roles(&endpoints.state.acl(), &stored),
        stored.modify_index,
        false,
    ))
}

async fn specific_token(
    method: Method,
    headers: HeaderMap,
    State(endpoints): State<AclEndpoints>,
    Path(accessor): Path<String>,
    RawQuery(query): RawQuery,
    body: Bytes,
) -> Result<Response, ApiError> {
    // The method is Nomad's HTTP handler's to check, before ACLs are.
    let methods_taken: &[Method] = if accessor == "self" {
        &[Method::GET]
    } else {
        &[Method::GET, Method::PUT, Method::POST, Method::DELETE]
    };
    if !methods_taken.contains(&method) {
        return Err(ApiError::MethodNotAllowed);
    }
    if !endpoints.enabled {
        return disabled();
    }
    let identity = match caller(&endpoints, &headers) {
        Ok(identity) => identity,
        Err(message) => return Ok(forbidden(&message)),
    };
    // A token read answers the token's own modify index, as Nomad's `GetToken` does.
    if accessor == "self" {
        return match identity {
            RequestIdentity::AclToken(token) => Ok(json(
                &token_with_current_roles(&endpoints.state.acl(), &token),
                token.modify_index,
                true,
            )),
            // Nomad's `aclTokenSelf`: an identity that is no ACL token has none to show.
            _ => Err(ApiError::not_found("ACL token not found")),
        };
    }
    let management = matches!(&identity, RequestIdentity::AclToken(token) if token.is_management());
    match method {
        Method::GET => {
            let own = matches!(&identity, RequestIdentity::AclToken(token) if token.accessor_id == accessor);
            if !management && !own {
                return Ok(forbidden("Permission denied"));
            }
            // Nomad's `GetToken`: the token's own ModifyIndex (the tokens table's while it
            // does not exist, on the 404 too), a blocking query answered by its own write.
            let params = QueryParams::parse(query.as_deref());
            let watch = StoreTables::new(&endpoints.state, &[Table::AclTokens]);
            let (index, token) = read_object(
                &watch,
                &params,
                || Ok(endpoints.state.acl().tokens.get(&accessor).cloned()),
                |token| token.modify_index,
            )
            .await?;
            let Some(token) = token else {
                return Ok(not_found_at("ACL token not found", index));
            };
            Ok(json(
                &token_with_current_roles(&endpoints.state.acl(), &token),
                index,
                true,
            ))
        }
        Method::PUT | Method::POST => {
            let mut token: AclToken = serde_json::from_slice(&body).map_err(|error| {
                ApiError::bad_request(format!("failed to decode request: {error}"))
            })?;
            if token.accessor_id.is_empty() {
                token.accessor_id.clone_from(&accessor);
            }
            if token.accessor_id != accessor {
                return Err(ApiError::bad_request(
                    "Accessor ID does not match request path",
                ));
            }
            let existing = endpoints
                .state
                .acl()
                .tokens
                .get(&accessor)
                .cloned()
                .ok_or_else(|| ApiError::bad_request("Cannot find token"))?;
            prepare_token(&endpoints, &mut token, Some(&existing))?;
            let stored = endpoints
                .state
                .upsert_acl_token(token)
                .await
                .map_err(|error| ApiError::internal(error.to_string()))?;
            Ok(json(
                &token_with_current_roles(&endpoints.state.acl(), &stored),
                stored.modify_index,
                false,
            ))
        }
        Method::DELETE => {
            let index = endpoints
                .state
                .delete_acl_tokens(vec![accessor])
                .await
                .map_err(|error| match error {
                    drover_state::StateError::NotFound { .. } => {
                        ApiError::bad_request("Cannot find token")
                    }
                    other => ApiError::internal(other.to_string()),
                })?;
            Ok(empty(index))
        }
        _ => Err(ApiError::MethodNotAllowed),
    }
}

/// `PUT|POST /v1/acl/token/onetime` (Nomad's `ACL.UpsertOneTimeToken`): a one-time token for
/// the caller's own ACL token, found by its secret ID (no capability needed; a caller without
/// an ACL token — anonymous, a workload identity — is refused), valid for 10 minutes. A new
/// one replaces the caller's previous one.
async fn upsert_one_time_token(
    method: Method,
    headers: HeaderMap,
    State(endpoints): State<AclEndpoints>,
) -> Result<Response, ApiError> {
    if !is_write(&method) {
        return Err(ApiError::MethodNotAllowed);
    }
    if !endpoints.enabled {
        return disabled();
    }
    let header_str = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    let secret = request_token(header_str("X-Nomad-Token"), header_str("Authorization"));
    let Some(token) = secret.and_then(|secret| endpoints.state.acl_token_by_secret(secret)) else {
        return Ok(forbidden("Permission denied"));
    };
    let now = endpoints.clock.now_unix_ns();
    let stored = endpoints
        .state
        .upsert_one_time_token(OneTimeToken {
            one_time_secret_id: uuid::Uuid::new_v4().to_string(),
            accessor_id: token.accessor_id.clone(),
            expires_at: Timestamp::from_unix_nanos(now.saturating_add(ONE_TIME_TOKEN_TTL_NS)),
            ..OneTimeToken::default()
        })
        .await
        .map_err(|error| ApiError::internal(error.to_string()))?;
    let index = stored.modify_index;
    Ok(json(
        &serde_json::json!({ "OneTimeToken": stored.as_ref(), "Index": index }),
        index,
        false,
    ))
}

/// `PUT|POST /v1/acl/token/onetime/exchange` (Nomad's `ACL.ExchangeOneTimeToken`): the ACL
/// token behind an unexpired one-time secret, which is used up. An unknown or expired secret,
/// or one whose token was deleted, is 403 (an expired one is left for garbage collection).
async fn exchange_one_time_token(
    method: Method,
    State(endpoints): State<AclEndpoints>,
    body: Bytes,
) -> Result<Response, ApiError> {
    if !is_write(&method) {
        return Err(ApiError::MethodNotAllowed);
    }
    if !endpoints.enabled {
        return disabled();
    }
    let request: OneTimeTokenExchangeRequest = crate::request_body::decode_or_default(&body)?;
    if request.one_time_secret_id.is_empty() {
        return Err(ApiError::bad_request(
            "one-time token lookup failed: missing secret",
        ));
    }
    let tables = endpoints.state.acl();
    let Some(one_time) = tables.one_time_token_by_secret(&request.one_time_secret_id) else {
        return Ok(forbidden("Permission denied"));
    };
    let now = endpoints.clock.now_unix_ns();
    if one_time
        .expires_at
        .unix_nanos()
        .is_none_or(|expires| expires < now)
    {
        return Ok(forbidden("Permission denied"));
    }
    let Some(token) = tables.tokens.get(&one_time.accessor_id).cloned() else {
        return Ok(forbidden("Permission denied"));
    };
    let index = endpoints
        .state
        .delete_one_time_tokens(vec![one_time.accessor_id.clone()])
        .await
        .map_err(|error| ApiError::internal(error.to_string()))?;
    Ok(json(
        &serde_json::json!({
            "Token": token_with_current_roles(&endpoints.state.acl(), &token),
            "Index": index,
        }),
        index,
        false,
    ))
}
