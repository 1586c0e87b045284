//! What a client-only agent asks its servers about a bearer token, on a server agent: `GET
//! /v1/internal/acl/whoami` (Nomad's `ACL.WhoAmI`: the ACL token or the workload identity's
//! verified claims the bearer in `X-Nomad-Token` stands for) and `GET
//! /v1/internal/acl/bearer-policies` (the policies it holds: Nomad's `ACL.GetPolicies` over a
//! token's own and its roles' policies, `ACL.GetClaimPolicies` for a workload identity). Both
//! answer with ACLs on or off, as the task API needs them either way; a bearer that does not
//! resolve (unknown, expired, a workload whose allocation is terminal or gone) is a 403 with
//! Nomad's message. Bodies are `drover_structs::client_rpc`'s.
//!
//! Not here: the client's cache of these answers (`client_acl`), resolving a token
//! (`drover_server::identity`).

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use drover_api::ApiError;
use drover_server::Clock;
use drover_server::acl::{identity_policy_names, token_with_current_roles};
use drover_server::identity::{IdentityError, RequestIdentity, request_token, resolve_token_at};
use drover_server::keyring::Keyring;
use drover_state::{StateStore, Table};
use drover_structs::client_rpc::{AclPolicySetResponse, AclWhoAmIResponse, AuthenticatedIdentity};

use crate::acl_http::json;

/// What the two routes need.
#[derive(Clone)]
pub struct ResolveEndpoints {
    pub keyring: Arc<Keyring>,
    pub state: StateStore,
    pub clock: Arc<dyn Clock>,
}

/// The routes, for a server agent.
pub fn router(endpoints: ResolveEndpoints) -> axum::Router {
    axum::Router::new()
        .route("/v1/internal/acl/whoami", axum::routing::any(whoami))
        .route(
            "/v1/internal/acl/bearer-policies",
            axum::routing::any(bearer_policies),
        )
        .with_state(endpoints)
}

/// The bearer's identity, or Nomad's message for one that does not resolve (answered 403).
fn bearer(
    endpoints: &ResolveEndpoints,
    headers: &HeaderMap,
) -> Result<RequestIdentity, &'static str> {
    let header_str = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    let token = request_token(header_str("X-Nomad-Token"), header_str("Authorization"));
    resolve_token_at(
        &endpoints.keyring,
        &endpoints.state,
        token,
        endpoints.clock.now_unix_ns(),
    )
    .map_err(|error| {
        tracing::debug!(%error, "a bearer token did not resolve");
        match error {
            IdentityError::AclTokenExpired => "ACL token expired",
            IdentityError::AclTokenNotFound => "ACL token not found",
            _ => "Permission denied",
        }
    })
}

fn refused(message: &'static str) -> Response {
    (
        StatusCode::FORBIDDEN,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        message,
    )
        .into_response()
}

async fn whoami(
    method: Method,
    headers: HeaderMap,
    State(endpoints): State<ResolveEndpoints>,
) -> Result<Response, ApiError> {
    if method != Method::GET {
        return Err(ApiError::MethodNotAllowed);
    }
    let identity = match bearer(&endpoints, &headers) {
        Ok(identity) => identity,
        Err(message) => return Ok(refused(message)),
    };
    let tables = endpoints.state.acl();
    let (identity, index) = match identity {
        RequestIdentity::Anonymous => (AuthenticatedIdentity::default(), 0),
        RequestIdentity::AclToken(token) => {
            let index = token.modify_index;
            let token = token_with_current_roles(&tables, &token);
            (
                AuthenticatedIdentity {
                    acl_token: Some(token),
                    claims: None,
                },
                index,
            )
        }
        RequestIdentity::Workload(workload) => (
            AuthenticatedIdentity {
                acl_token: None,
                claims: Some(workload.claims),
            },
            0,
        ),
    };
    Ok(json(&AclWhoAmIResponse { identity }, index, true))
}

async fn bearer_policies(
    method: Method,
    headers: HeaderMap,
    State(endpoints): State<ResolveEndpoints>,
) -> Result<Response, ApiError> {
    if method != Method::GET {
        return Err(ApiError::MethodNotAllowed);
    }
    let identity = match bearer(&endpoints, &headers) {
        Ok(identity) => identity,
        Err(message) => return Ok(refused(message)),
    };
    let names = identity_policy_names(&endpoints.state, &identity).unwrap_or_default();
    let tables = endpoints.state.acl();
    let policies = names
        .into_iter()
        .filter_map(|name| {
            let policy = tables.policies.get(&name)?;
            Some((name, policy.as_ref().clone()))
        })
        .collect();
    Ok(json(
        &AclPolicySetResponse { policies },
        endpoints.state.indexes().table(Table::AclPolicies),
        true,
    ))
}
