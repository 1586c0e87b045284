//! Nomad's ACL role endpoints on a server agent: `GET /v1/acl/roles`, `PUT|POST /v1/acl/role`
//! (create), `GET|PUT|POST|DELETE /v1/acl/role/<id>` and `GET /v1/acl/role/name/<name>`, with
//! Nomad's shapes, validation, status codes and messages. Writing is for management tokens
//! (checked by `acl_enforce` before a handler runs); a client token lists and reads only the
//! roles it links to.
//!
//! Not here: what a role grants (`drover_server::acl::token_acl`), tokens' role links
//! (`acl_http`), storage (the state store).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, Method};
use axum::response::Response;
use drover_api::ApiError;
use drover_api::blocking::{StoreTables, not_found_at, read_object, wait_for_list};
use drover_api::params::QueryParams;
use drover_server::acl::{is_valid_policy_name, role_hash, token_with_current_roles};
use drover_server::identity::RequestIdentity;
use drover_state::acl_tables::AclTables;
use drover_state::{StateError, Table};
use drover_structs::acl::{AclRole, AclRolePolicyLink, AclToken};

use crate::acl_http::{AclEndpoints, caller, disabled, empty, forbidden, is_write, json};

/// The role routes, for a server agent (beside `acl_http::router`).
pub fn router(endpoints: AclEndpoints) -> axum::Router {
    axum::Router::new()
        .route("/v1/acl/roles", axum::routing::any(list_roles))
        .route("/v1/acl/role", axum::routing::any(create_role))
        .route(
            "/v1/acl/role/",
            axum::routing::any(|| async { ApiError::bad_request("missing ACL role ID") }),
        )
        .route("/v1/acl/role/{*suffix}", axum::routing::any(specific_role))
        .with_state(endpoints)
}
use crate::namespaces_http::multi_error;

/// Nomad's limit on a role's description.
const MAX_DESCRIPTION_LENGTH: usize = 256;

/// Who is asking: a management token sees every role, another token the roles it links to
/// (by ID and current name); a caller without an ACL token sees none.
enum RoleReader {
    Management,
    Linked(Box<AclToken>),
    Nothing,
}

impl RoleReader {
    fn may_read(&self, role: &AclRole) -> bool {
        match self {
            RoleReader::Management => true,
            RoleReader::Linked(token) => token
                .roles
                .as_deref()
                .unwrap_or_default()
                .iter()
                .any(|link| link.id == role.id),
            RoleReader::Nothing => false,
        }
    }
}

/// The reader, or the 403 message for a caller whose credential does not resolve.
fn reader(endpoints: &AclEndpoints, headers: &HeaderMap) -> Result<RoleReader, String> {
    match caller(endpoints, headers) {
        Ok(RequestIdentity::AclToken(token)) if token.is_management() => Ok(RoleReader::Management),
        Ok(RequestIdentity::AclToken(token)) => Ok(RoleReader::Linked(Box::new(
            token_with_current_roles(&endpoints.state.acl(), &token),
        ))),
        Ok(RequestIdentity::Anonymous) => Ok(RoleReader::Nothing),
        Ok(_) => Err("ACL token not found".to_owned()),
        Err(message) => Err(message),
    }
}

fn role_index(endpoints: &AclEndpoints) -> u64 {
    endpoints.state.indexes().table(Table::AclRoles)
}

/// `GET /v1/acl/roles[?prefix=<ID prefix>]`.
pub(crate) async fn list_roles(
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
    let reader = match reader(&endpoints, &headers) {
        Ok(reader) => reader,
        Err(message) => return Ok(forbidden(&message)),
    };
    let params = QueryParams::parse(query.as_deref());
    let index = wait_for_list(
        &StoreTables::new(&endpoints.state, &[Table::AclRoles]),
        &params,
    )
    .await?;
    let prefix = params.prefix();
    let stubs: Vec<_> = endpoints
        .state
        .acl()
        .roles
        .values()
        .filter(|role| role.id.starts_with(prefix) && reader.may_read(role))
        .map(|role| role.stub())
        .collect();
    Ok(json(&stubs, index, true))
}

/// `PUT|POST /v1/acl/role`: a new role (the server picks its ID).
pub(crate) async fn create_role(
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
    upsert(&endpoints, None, &body).await
}

/// `/v1/acl/role/<id>` and `/v1/acl/role/name/<name>`, split as Nomad splits the suffix.
pub(crate) async fn specific_role(
    method: Method,
    headers: HeaderMap,
    State(endpoints): State<AclEndpoints>,
    Path(suffix): Path<String>,
    RawQuery(query): RawQuery,
    body: Bytes,
) -> Result<Response, ApiError> {
    let parts: Vec<&str> = suffix.split('/').collect();
    // What Nomad's HTTP handler checks of the path and method, before ACLs are.
    match parts.as_slice() {
        [""] => return Err(ApiError::bad_request("missing ACL role ID")),
        [_] => {
            if !matches!(
                method,
                Method::GET | Method::PUT | Method::POST | Method::DELETE
            ) {
                return Err(ApiError::MethodNotAllowed);
            }
        }
        [kind, name] => {
            if method != Method::GET {
                return Err(ApiError::MethodNotAllowed);
            }
            if *kind != "name" {
                return Err(ApiError::bad_request("invalid URI"));
            }
            if name.is_empty() {
                return Err(ApiError::bad_request("missing ACL role name"));
            }
        }
        _ => return Err(ApiError::bad_request("invalid URI")),
    }
    if !endpoints.enabled {
        return disabled();
    }
    match parts.as_slice() {
        [id] => match method {
            Method::GET => {
                let reader = match reader(&endpoints, &headers) {
                    Ok(reader) => reader,
                    Err(message) => return Ok(forbidden(&message)),
                };
                let linked = match &reader {
                    RoleReader::Linked(token) => token
                        .roles
                        .as_deref()
                        .unwrap_or_default()
                        .iter()
                        .any(|link| link.id == *id),
                    RoleReader::Management => true,
                    RoleReader::Nothing => false,
                };
                if !linked {
                    return Ok(forbidden("Permission denied"));
                }
                let params = QueryParams::parse(query.as_deref());
                read_role(&endpoints, &params, |acl| acl.roles.get(*id).cloned()).await
            }
            Method::DELETE => {
                let index = endpoints
                    .state
                    .delete_acl_roles(vec![(*id).to_owned()])
                    .await
                    .map_err(state_error)?;
                Ok(empty(index))
            }
            Method::PUT | Method::POST => upsert(&endpoints, Some(id), &body).await,
            _ => Err(ApiError::MethodNotAllowed),
        },
        [_, name] => {
            let reader = match reader(&endpoints, &headers) {
                Ok(reader) => reader,
                Err(message) => return Ok(forbidden(&message)),
            };
            let linked = match &reader {
                RoleReader::Linked(token) => token
                    .roles
                    .as_deref()
                    .unwrap_or_default()
                    .iter()
                    .any(|link| link.name == *name),
                RoleReader::Management => true,
                RoleReader::Nothing => false,
            };
            if !linked {
                return Ok(forbidden("Permission denied"));
            }
            let params = QueryParams::parse(query.as_deref());
            read_role(&endpoints, &params, |acl| acl.role_by_name(name).cloned()).await
        }
        _ => Err(ApiError::bad_request("invalid URI")),
    }
}

/// A read of one role as Nomad's `GetRoleByID` and `GetRoleByName` answer it: the role's own
/// ModifyIndex, or the roles table's index while it does not exist (on the 404 too); a
/// blocking query is answered by a write of this role alone.
async fn read_role(
    endpoints: &AclEndpoints,
    params: &QueryParams,
    find: impl Fn(&AclTables) -> Option<Arc<AclRole>>,
) -> Result<Response, ApiError> {
    let watch = StoreTables::new(&endpoints.state, &[Table::AclRoles]);
    let (index, role) = read_object(
        &watch,
        params,
        || Ok(find(&endpoints.state.acl())),
        |role| role.modify_index,
    )
    .await?;
    Ok(match role {
        Some(role) => json(role.as_ref(), index, true),
        None => not_found_at("ACL role not found", index),
    })
}

fn state_error(error: StateError) -> ApiError {
    match error {
        StateError::Refused(message) => ApiError::bad_request(message),
        other => ApiError::internal(other.to_string()),
    }
}

/// What `Validate` says of a role (Nomad's `ACLRole.Validate`), before any state lookup.
fn validation_errors(role: &AclRole) -> Vec<String> {
    let mut errors = Vec::new();
    // Role names follow the policy-name rule: letters, digits and `-`, 1 to 128.
    if !is_valid_policy_name(&role.name) {
        errors.push(format!("invalid name '{}'", role.name));
    }
    if role.description.len() > MAX_DESCRIPTION_LENGTH {
        errors.push(format!("description longer than {MAX_DESCRIPTION_LENGTH}"));
    }
    if role.policies.is_empty() {
        errors.push("at least one policy should be specified".to_owned());
    }
    errors
}

/// Creates (`path_id` none and no ID in the body) or updates a role, as Nomad's
/// `ACL.UpsertRoles`: validated, an update must name an existing role, a create must not reuse
/// a name, every linked policy must exist, links are de-duplicated; answers the stored role.
async fn upsert(
    endpoints: &AclEndpoints,
    path_id: Option<&str>,
    body: &[u8],
) -> Result<Response, ApiError> {
    let mut role: AclRole = serde_json::from_slice(body)
        .map_err(|error| ApiError::bad_request(format!("failed to decode request: {error}")))?;
    if path_id.is_some_and(|id| id != role.id) {
        return Err(ApiError::bad_request(
            "ACL role ID does not match request path",
        ));
    }
    let errors = validation_errors(&role);
    if !errors.is_empty() {
        return Err(ApiError::bad_request(format!(
            "role 0 invalid: {}",
            multi_error(&errors)
        )));
    }
    let tables = endpoints.state.acl();
    if role.id.is_empty() {
        if tables.role_by_name(&role.name).is_some() {
            return Err(ApiError::bad_request(format!(
                "role with name {} already exists",
                role.name
            )));
        }
        role.id = uuid::Uuid::new_v4().to_string();
    } else if !tables.roles.contains_key(&role.id) {
        return Err(ApiError::bad_request(format!(
            "cannot find role {}",
            role.id
        )));
    }
    let mut links: Vec<AclRolePolicyLink> = Vec::new();
    for link in std::mem::take(&mut role.policies) {
        if !tables.policies.contains_key(&link.name) {
            return Err(ApiError::bad_request(format!(
                "cannot find policy {}",
                link.name
            )));
        }
        if !links.iter().any(|seen| seen.name == link.name) {
            links.push(link);
        }
    }
    role.policies = links;
    role.hash = role_hash(&role);
    let stored = endpoints
        .state
        .upsert_acl_role(role)
        .await
        .map_err(state_error)?;
    Ok(json(
        stored.as_ref(),
        stored.modify_index.max(role_index(endpoints)),
        false,
    ))
}
