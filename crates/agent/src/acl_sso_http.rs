//! Nomad's single sign-on endpoints on a server agent: auth methods (`GET /v1/acl/auth-methods`,
//! `PUT|POST /v1/acl/auth-method`, `GET|PUT|POST|DELETE /v1/acl/auth-method/<name>`), binding
//! rules (`GET /v1/acl/binding-rules`, `PUT|POST /v1/acl/binding-rule`,
//! `GET|PUT|POST|DELETE /v1/acl/binding-rule/<id>`), the JWT login (`PUT|POST /v1/acl/login`)
//! and the OIDC code flow (`PUT|POST /v1/acl/oidc/auth-url`, `/v1/acl/oidc/complete-auth`),
//! with Nomad's shapes, validation, status codes and messages. Writing methods and rules, and
//! reading one, is for management tokens (checked by `acl_enforce`); listing methods and the
//! logins are open to anyone, as in Nomad. A login writes a client token holding the policies
//! and roles its binding rules matched (or a management token), expiring after the method's
//! `MaxTokenTTL`.
//!
//! Not here: verifying tokens and speaking to the provider (`sso`), what tokens grant.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::Method;
use axum::response::{IntoResponse, Response};
use drover_api::ApiError;
use drover_api::blocking::{StoreTables, not_found_at, read_object, wait_for_list};
use drover_api::params::QueryParams;
use drover_server::acl::blake2b_256_base64;
use drover_state::Table;
use drover_structs::acl::{
    ACL_TOKEN_TYPE_CLIENT, ACL_TOKEN_TYPE_MANAGEMENT, AclToken, AclTokenRoleLink,
};
use drover_structs::acl_sso::{
    AUTH_METHOD_TYPE_JWT, AUTH_METHOD_TYPE_OIDC, AclAuthMethod, AclAuthMethodStub, AclBindingRule,
    AclBindingRuleStub, AclLoginRequest, AclOidcAuthUrlRequest, AclOidcAuthUrlResponse,
    AclOidcCompleteAuthRequest, BIND_TYPE_MANAGEMENT, BIND_TYPE_POLICY, BIND_TYPE_ROLE,
    DEFAULT_TOKEN_NAME_FORMAT,
};
use drover_structs::time::{DurationNs, Timestamp};

use crate::acl_http::{AclEndpoints, disabled, empty, is_write, json, prepare_token};
use crate::namespaces_http::multi_error;
use crate::sso::claims::{bind, selector_data, token_name};
use crate::sso::oidc::{self, PendingRequest, RequestCache};
use crate::sso::{SsoError, jwt};

/// The state of the SSO routes: the ACL endpoints' and the pending OIDC requests.
#[derive(Clone)]
pub struct SsoEndpoints {
    pub acl: AclEndpoints,
    pub requests: Arc<RequestCache>,
}

/// The routes, for a server agent (beside `acl_http::router`).
pub fn router(acl: AclEndpoints) -> axum::Router {
    let endpoints = SsoEndpoints {
        acl,
        requests: Arc::new(RequestCache::default()),
    };
    axum::Router::new()
        .route("/v1/acl/auth-methods", axum::routing::any(list_methods))
        .route("/v1/acl/auth-method", axum::routing::any(create_method))
        .route(
            "/v1/acl/auth-method/",
            axum::routing::any(|| async { ApiError::bad_request("missing ACL auth-method name") }),
        )
        .route(
            "/v1/acl/auth-method/{*name}",
            axum::routing::any(specific_method),
        )
        .route("/v1/acl/binding-rules", axum::routing::any(list_rules))
        .route("/v1/acl/binding-rule", axum::routing::any(create_rule))
        .route(
            "/v1/acl/binding-rule/",
            axum::routing::any(|| async { ApiError::bad_request("missing ACL binding rule ID") }),
        )
        .route(
            "/v1/acl/binding-rule/{*id}",
            axum::routing::any(specific_rule),
        )
        .route("/v1/acl/login", axum::routing::any(login))
        .route("/v1/acl/oidc/auth-url", axum::routing::any(oidc_auth_url))
        .route(
            "/v1/acl/oidc/complete-auth",
            axum::routing::any(oidc_complete_auth),
        )
        .with_state(endpoints)
}

fn decode<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body)
        .map_err(|error| ApiError::bad_request(format!("failed to decode request: {error}")))
}

fn state_error(error: drover_state::StateError) -> ApiError {
    match error {
        drover_state::StateError::Refused(message) => ApiError::bad_request(message),
        other => ApiError::internal(other.to_string()),
    }
}

fn method_hash(method: &AclAuthMethod) -> String {
    let config = method.config.clone().unwrap_or_default();
    let ttl = method.max_token_ttl.0.to_go_string();
    let leeways = [
        config.expiration_leeway.0.to_go_string(),
        config.not_before_leeway.0.to_go_string(),
        config.clock_skew_leeway.0.to_go_string(),
    ];
    let flags = [
        config.oidc_enable_pkce.to_string(),
        config.oidc_disable_user_info.to_string(),
        config.verbose_logging.to_string(),
        method.default.to_string(),
    ];
    let mut fields: Vec<&str> = vec![
        &method.name,
        &method.method_type,
        &method.token_locality,
        &method.token_name_format,
        &ttl,
        &config.jwks_url,
        &config.jwks_ca_cert,
        &config.oidc_discovery_url,
        &config.oidc_client_id,
        &config.oidc_client_secret,
    ];
    fields.extend(flags.iter().map(String::as_str));
    fields.extend(leeways.iter().map(String::as_str));
    for list in [
        &config.bound_audiences,
        &config.bound_issuer,
        &config.allowed_redirect_uris,
        &config.discovery_ca_pem,
        &config.signing_algs,
        &config.oidc_scopes,
        &config.jwt_validation_pub_keys,
    ] {
        fields.extend(list.iter().map(String::as_str));
    }
    for (source, target) in config
        .claim_mappings
        .iter()
        .chain(config.list_claim_mappings.iter())
    {
        fields.push(source);
        fields.push(target);
    }
    blake2b_256_base64(fields)
}

/// Nomad's `ACLAuthMethod.Validate`, and what drover cannot run refused by name.
fn validate_method(method: &AclAuthMethod, endpoints: &SsoEndpoints) -> Vec<String> {
    let mut problems = Vec::new();
    let name_ok = (1..=128).contains(&method.name.len())
        && method
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-');
    if !name_ok {
        problems.push(format!("invalid name '{}'", method.name));
    }
    if !matches!(method.token_locality.as_str(), "local" | "global") {
        problems.push(format!(
            "invalid token locality '{}'",
            method.token_locality
        ));
    }
    if !matches!(
        method.method_type.as_str(),
        AUTH_METHOD_TYPE_OIDC | AUTH_METHOD_TYPE_JWT
    ) {
        problems.push(format!("invalid token type '{}'", method.method_type));
    }
    match &method.config {
        None => problems.push("invalid config: missing auth method Config".to_owned()),
        Some(config) => {
            let mut config_problems = Vec::new();
            match method.method_type.as_str() {
                AUTH_METHOD_TYPE_OIDC => {
                    if config.oidc_discovery_url.is_empty() {
                        config_problems.push("missing OIDCDiscoveryURL".to_owned());
                    }
                    if config.oidc_client_id.is_empty() {
                        config_problems.push("missing OIDCClientID".to_owned());
                    }
                }
                AUTH_METHOD_TYPE_JWT
                    if config.oidc_discovery_url.is_empty()
                        && config.jwks_url.is_empty()
                        && config.jwt_validation_pub_keys.is_empty() =>
                {
                    config_problems.push("JWT auth method requires either OIDCDiscoveryURL, or JWKS URL, or JWTValidationPubKeys set".to_owned());
                }
                _ => {}
            }
            if config.oidc_client_assertion.is_some() {
                config_problems.push("OIDCClientAssertion is not supported: drover authenticates to the provider with OIDCClientSecret; remove OIDCClientAssertion".to_owned());
            }
            for algorithm in &config.signing_algs {
                if !jwt::SUPPORTED_ALGORITHMS.contains(&algorithm.as_str()) {
                    config_problems.push(format!(
                        "unsupported signing algorithm {algorithm:?}: drover verifies {}",
                        jwt::SUPPORTED_ALGORITHMS.join(", ")
                    ));
                }
            }
            if !config.jwt_validation_pub_keys.is_empty()
                && let Err(error) = jwt::parse_pem_keys(&config.jwt_validation_pub_keys)
            {
                config_problems.push(error.to_string());
            }
            if !config_problems.is_empty() {
                problems.push(format!("invalid config: {}", config_problems.join("; ")));
            }
        }
    }
    let (min, max) = (
        endpoints.acl.token_min_expiration_ttl,
        endpoints.acl.token_max_expiration_ttl,
    );
    let ttl = method.max_token_ttl.0;
    if min > ttl || ttl > max {
        problems.push(format!(
            "invalid MaxTokenTTL value '{ttl}' (should be between {min} and {max})"
        ));
    }
    problems
}

async fn list_methods(
    method: Method,
    State(endpoints): State<SsoEndpoints>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    if method != Method::GET {
        return Err(ApiError::MethodNotAllowed);
    }
    if !endpoints.acl.enabled {
        return disabled();
    }
    let params = QueryParams::parse(query.as_deref());
    let watch = StoreTables::new(&endpoints.acl.state, &[Table::AclAuthMethods]);
    let index = wait_for_list(&watch, &params).await?;
    let tables = endpoints.acl.state.acl();
    let stubs: Vec<AclAuthMethodStub> = tables.auth_methods.values().map(|m| m.stub()).collect();
    Ok(json(&stubs, index, true))
}

async fn create_method(
    method: Method,
    State(endpoints): State<SsoEndpoints>,
    body: Bytes,
) -> Result<Response, ApiError> {
    if !is_write(&method) {
        return Err(ApiError::MethodNotAllowed);
    }
    upsert_method(&endpoints, None, &body).await
}

async fn specific_method(
    method: Method,
    State(endpoints): State<SsoEndpoints>,
    Path(name): Path<String>,
    RawQuery(query): RawQuery,
    body: Bytes,
) -> Result<Response, ApiError> {
    if name.is_empty() {
        return Err(ApiError::bad_request("missing ACL auth-method name"));
    }
    match method {
        Method::GET => {
            if !endpoints.acl.enabled {
                return disabled();
            }
            // Nomad's `GetAuthMethod`: the method's own ModifyIndex (the auth methods' table's while it
            // does not exist, on the 404 too), a blocking query answered by its own write.
            let params = QueryParams::parse(query.as_deref());
            let watch = StoreTables::new(&endpoints.acl.state, &[Table::AclAuthMethods]);
            let (index, found) = read_object(
                &watch,
                &params,
                || Ok(endpoints.acl.state.acl().auth_methods.get(&name).cloned()),
                |found| found.modify_index,
            )
            .await?;
            match found {
                Some(found) => Ok(json(&found.sanitized(), index, true)),
                None => Ok(not_found_at("ACL auth-method not found", index)),
            }
        }
        Method::DELETE => {
            if !endpoints.acl.enabled {
                return disabled();
            }
            let index = endpoints
                .acl
                .state
                .delete_acl_auth_methods(vec![name])
                .await
                .map_err(state_error)?;
            Ok(empty(index))
        }
        Method::PUT | Method::POST => upsert_method(&endpoints, Some(name), &body).await,
        _ => Err(ApiError::MethodNotAllowed),
    }
}

async fn upsert_method(
    endpoints: &SsoEndpoints,
    path_name: Option<String>,
    body: &[u8],
) -> Result<Response, ApiError> {
    let mut method: AclAuthMethod = decode(body)?;
    if let Some(path_name) = path_name
        && path_name != method.name
    {
        return Err(ApiError::bad_request(
            "ACL auth-method name does not match request path",
        ));
    }
    if !endpoints.acl.enabled {
        return disabled();
    }
    let tables = endpoints.acl.state.acl();
    // Nomad's `Merge`: what the update leaves empty keeps the stored value.
    if let Some(existing) = tables.auth_methods.get(&method.name) {
        if method.method_type.is_empty() {
            method.method_type.clone_from(&existing.method_type);
        }
        if method.token_locality.is_empty() {
            method.token_locality.clone_from(&existing.token_locality);
        }
        if method.token_name_format.is_empty() {
            method
                .token_name_format
                .clone_from(&existing.token_name_format);
        }
        if method.max_token_ttl.0 == DurationNs::ZERO {
            method.max_token_ttl = existing.max_token_ttl;
        }
        if method.config.is_none() {
            method.config.clone_from(&existing.config);
        }
    }
    let now = Timestamp::from_unix_nanos(endpoints.acl.clock.now_unix_ns());
    method.create_time = now;
    method.modify_time = now;
    if method.token_name_format.is_empty() {
        method.token_name_format = DEFAULT_TOKEN_NAME_FORMAT.to_owned();
    }
    let problems = validate_method(&method, endpoints);
    if !problems.is_empty() {
        return Err(ApiError::bad_request(format!(
            "auth method 0 invalid: {}",
            multi_error(&problems)
        )));
    }
    if method.default
        && let Some(other) = tables
            .auth_methods
            .values()
            .find(|other| other.default && other.name != method.name)
    {
        return Err(ApiError::bad_request(format!(
            "default method already exists: {}",
            other.name
        )));
    }
    method.hash = method_hash(&method);
    let stored = endpoints
        .acl
        .state
        .upsert_acl_auth_method(method)
        .await
        .map_err(state_error)?;
    Ok(json(&stored.sanitized(), stored.modify_index, false))
}

async fn list_rules(
    method: Method,
    State(endpoints): State<SsoEndpoints>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    if method != Method::GET {
        return Err(ApiError::MethodNotAllowed);
    }
    if !endpoints.acl.enabled {
        return disabled();
    }
    let params = QueryParams::parse(query.as_deref());
    let watch = StoreTables::new(&endpoints.acl.state, &[Table::AclBindingRules]);
    let index = wait_for_list(&watch, &params).await?;
    let tables = endpoints.acl.state.acl();
    let stubs: Vec<AclBindingRuleStub> = tables
        .binding_rules
        .values()
        .map(|rule| rule.stub())
        .collect();
    Ok(json(&stubs, index, true))
}

async fn create_rule(
    method: Method,
    State(endpoints): State<SsoEndpoints>,
    body: Bytes,
) -> Result<Response, ApiError> {
    if !is_write(&method) {
        return Err(ApiError::MethodNotAllowed);
    }
    upsert_rule(&endpoints, None, &body).await
}

async fn specific_rule(
    method: Method,
    State(endpoints): State<SsoEndpoints>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
    body: Bytes,
) -> Result<Response, ApiError> {
    if id.is_empty() {
        return Err(ApiError::bad_request("missing ACL binding rule ID"));
    }
    match method {
        Method::GET => {
            if !endpoints.acl.enabled {
                return disabled();
            }
            // Nomad's `GetBindingRule`: the rule's own ModifyIndex (the binding rules' table's while it
            // does not exist, on the 404 too), a blocking query answered by its own write.
            let params = QueryParams::parse(query.as_deref());
            let watch = StoreTables::new(&endpoints.acl.state, &[Table::AclBindingRules]);
            let (index, found) = read_object(
                &watch,
                &params,
                || Ok(endpoints.acl.state.acl().binding_rules.get(&id).cloned()),
                |found| found.modify_index,
            )
            .await?;
            match found {
                Some(found) => Ok(json(found.as_ref(), index, true)),
                None => Ok(not_found_at("ACL binding rule not found", index)),
            }
        }
        Method::DELETE => {
            if !endpoints.acl.enabled {
                return disabled();
            }
            let index = endpoints
                .acl
                .state
                .delete_acl_binding_rules(vec![id])
                .await
                .map_err(state_error)?;
            Ok(empty(index))
        }
        Method::PUT | Method::POST => upsert_rule(&endpoints, Some(id), &body).await,
        _ => Err(ApiError::MethodNotAllowed),
    }
}

/// Nomad's `ACLBindingRule.Validate`.
fn validate_rule(rule: &AclBindingRule) -> Vec<String> {
    let mut problems = Vec::new();
    if rule.auth_method.is_empty() {
        problems.push("auth method is missing".to_owned());
    }
    if rule.description.len() > 256 {
        problems.push("description longer than 256".to_owned());
    }
    match rule.bind_type.as_str() {
        "" => problems.push("bind type is missing".to_owned()),
        BIND_TYPE_ROLE | BIND_TYPE_POLICY => {
            if rule.bind_name.is_empty() {
                problems.push("bind name is missing".to_owned());
            }
        }
        BIND_TYPE_MANAGEMENT => {
            if !rule.bind_name.is_empty() {
                problems.push("bind name should be empty".to_owned());
            }
        }
        other => problems.push(format!("unsupported bind type: {other:?}")),
    }
    if !rule.selector.is_empty()
        && let Err(error) = drover_api::bexpr::Filter::parse(&rule.selector)
    {
        problems.push(format!("selector is invalid: {error}"));
    }
    problems
}

async fn upsert_rule(
    endpoints: &SsoEndpoints,
    path_id: Option<String>,
    body: &[u8],
) -> Result<Response, ApiError> {
    let mut rule: AclBindingRule = decode(body)?;
    if let Some(path_id) = path_id {
        if rule.id.is_empty() {
            rule.id.clone_from(&path_id);
        }
        if rule.id != path_id {
            return Err(ApiError::bad_request(
                "ACL binding rule ID does not match request path",
            ));
        }
    }
    if !endpoints.acl.enabled {
        return disabled();
    }
    let tables = endpoints.acl.state.acl();
    let now = Timestamp::from_unix_nanos(endpoints.acl.clock.now_unix_ns());
    if !rule.id.is_empty() {
        let Some(existing) = tables.binding_rules.get(&rule.id) else {
            return Err(ApiError::bad_request(format!(
                "cannot find binding rule {}",
                rule.id
            )));
        };
        // Nomad's `Merge`: an empty bind name, bind type or method keeps the stored one.
        if rule.bind_name.is_empty() {
            rule.bind_name.clone_from(&existing.bind_name);
        }
        if rule.bind_type.is_empty() {
            rule.bind_type.clone_from(&existing.bind_type);
        }
        if rule.auth_method.is_empty() {
            rule.auth_method.clone_from(&existing.auth_method);
        }
        if rule.auth_method != existing.auth_method {
            return Err(ApiError::bad_request(
                "cannot update auth method for binding rule, create a new rule instead",
            ));
        }
    }
    let problems = validate_rule(&rule);
    if !problems.is_empty() {
        return Err(ApiError::bad_request(format!(
            "binding rule 0 invalid: {}",
            multi_error(&problems)
        )));
    }
    if !tables.auth_methods.contains_key(&rule.auth_method) {
        return Err(ApiError::bad_request(format!(
            "ACL auth method {} not found",
            rule.auth_method
        )));
    }
    if rule.id.is_empty() {
        rule.id = uuid::Uuid::new_v4().to_string();
    }
    rule.create_time = now;
    rule.modify_time = now;
    rule.hash = blake2b_256_base64([
        rule.id.as_str(),
        rule.description.as_str(),
        rule.auth_method.as_str(),
        rule.selector.as_str(),
        rule.bind_type.as_str(),
        rule.bind_name.as_str(),
    ]);
    let stored = endpoints
        .acl
        .state
        .upsert_acl_binding_rule(rule)
        .await
        .map_err(state_error)?;
    Ok(json(stored.as_ref(), stored.modify_index, false))
}

fn auth_method(endpoints: &SsoEndpoints, name: &str) -> Result<Arc<AclAuthMethod>, ApiError> {
    endpoints
        .acl
        .state
        .acl()
        .auth_methods
        .get(name)
        .cloned()
        .ok_or_else(|| ApiError::bad_request(format!("auth-method {name:?} not found")))
}

/// Binds the claims and writes the login's token (Nomad's tail of `Login` and
/// `OIDCCompleteAuth`).
async fn issue_token(
    endpoints: &SsoEndpoints,
    method: &AclAuthMethod,
    claims: crate::sso::claims::AuthClaims,
) -> Result<Response, ApiError> {
    let tables = endpoints.acl.state.acl();
    let bindings =
        bind(&tables, method, &claims).map_err(|error| ApiError::internal(error.to_string()))?;
    if bindings.none() && !bindings.management {
        return Err(ApiError::bad_request("no role or policy bindings matched"));
    }
    let name = token_name(method, &method.method_type, &claims)
        .map_err(|error| ApiError::internal(error.to_string()))?;
    let mut token = AclToken {
        name,
        global: method.token_locality == "global",
        expiration_ttl: method.max_token_ttl.0,
        ..AclToken::default()
    };
    if bindings.management {
        token.token_type = ACL_TOKEN_TYPE_MANAGEMENT.to_owned();
    } else {
        token.token_type = ACL_TOKEN_TYPE_CLIENT.to_owned();
        token.policies = Some(bindings.policies);
        token.roles = Some(
            bindings
                .roles
                .into_iter()
                .map(|id| AclTokenRoleLink {
                    id,
                    name: String::new(),
                })
                .collect(),
        );
    }
    prepare_token(&endpoints.acl, &mut token, None)?;
    let stored = endpoints
        .acl
        .state
        .upsert_acl_token(token)
        .await
        .map_err(|error| ApiError::internal(error.to_string()))?;
    Ok(json(
        &drover_server::acl::token_with_current_roles(&endpoints.acl.state.acl(), &stored),
        stored.modify_index,
        false,
    ))
}

async fn login(
    method: Method,
    State(endpoints): State<SsoEndpoints>,
    body: Bytes,
) -> Result<Response, ApiError> {
    if !is_write(&method) {
        return Err(ApiError::MethodNotAllowed);
    }
    let request: AclLoginRequest = decode(&body)?;
    if !endpoints.acl.enabled {
        return disabled();
    }
    let mut problems = Vec::new();
    if request.auth_method_name.is_empty() {
        problems.push("missing auth method name".to_owned());
    }
    if request.login_token.is_empty() {
        problems.push("missing login token".to_owned());
    }
    if !problems.is_empty() {
        return Err(ApiError::bad_request(format!(
            "invalid login request: {}",
            multi_error(&problems)
        )));
    }
    let auth = auth_method(&endpoints, &request.auth_method_name)?;
    if auth.method_type != AUTH_METHOD_TYPE_JWT {
        return Err(ApiError::bad_request(format!(
            "unsupported auth-method type: {}",
            auth.method_type
        )));
    }
    let config = auth.config.clone().unwrap_or_default();
    let claims = match verify_login_token(&endpoints, &config, &request.login_token).await {
        Ok(claims) => claims,
        Err(error) => {
            // Nomad answers a token that does not verify with 401.
            return Ok((
                axum::http::StatusCode::UNAUTHORIZED,
                [(
                    axum::http::header::CONTENT_TYPE,
                    "text/plain; charset=utf-8",
                )],
                format!("unable to validate provided token: {error}"),
            )
                .into_response());
        }
    };
    let mapped = selector_data(&auth, claims, None)
        .map_err(|error| ApiError::internal(error.to_string()))?;
    issue_token(&endpoints, &auth, mapped).await
}

/// Nomad's `jwt.Validate`: the signature, the expectations, then the bound issuers.
async fn verify_login_token(
    endpoints: &SsoEndpoints,
    config: &drover_structs::acl_sso::AclAuthMethodConfig,
    token: &str,
) -> Result<serde_json::Map<String, serde_json::Value>, SsoError> {
    let keys = oidc::jwt_method_keys(config).await?;
    let claims = jwt::validate(
        token,
        &keys,
        &oidc::expected(config),
        endpoints.acl.clock.now_unix_ns(),
    )
    .map_err(|error| {
        SsoError::Token(format!("unable to verify signature of JWT token: {error}"))
    })?;
    if !config.bound_issuer.is_empty() {
        match claims.get("iss") {
            None => {
                return Err(SsoError::Token("auth method specifies BoundIssuers but the provided token does not contain issuer information".to_owned()));
            }
            Some(serde_json::Value::String(issuer)) => {
                if !config.bound_issuer.contains(issuer) {
                    return Err(SsoError::Token(format!("invalid JWT issuer: {issuer}")));
                }
            }
            Some(_) => {
                return Err(SsoError::Token(
                    "unable to read iss property of provided token".to_owned(),
                ));
            }
        }
    }
    Ok(claims)
}

async fn oidc_auth_url(
    method: Method,
    State(endpoints): State<SsoEndpoints>,
    body: Bytes,
) -> Result<Response, ApiError> {
    if !is_write(&method) {
        return Err(ApiError::MethodNotAllowed);
    }
    let request: AclOidcAuthUrlRequest = decode(&body)?;
    if !endpoints.acl.enabled {
        return disabled();
    }
    let mut problems = Vec::new();
    if request.auth_method_name.is_empty() {
        problems.push("missing auth method name".to_owned());
    }
    if request.client_nonce.is_empty() {
        problems.push("missing client nonce".to_owned());
    }
    if request.redirect_uri.is_empty() {
        problems.push("missing redirect URI".to_owned());
    }
    if !problems.is_empty() {
        return Err(ApiError::bad_request(format!(
            "invalid OIDC auth-url request: {}",
            multi_error(&problems)
        )));
    }
    let auth = auth_method(&endpoints, &request.auth_method_name)?;
    let config = auth.config.clone().unwrap_or_default();
    let now = endpoints.acl.clock.now_unix_ns();
    let pending = endpoints
        .requests
        .load_or_add(&request.client_nonce, now, || PendingRequest {
            state: oidc::random_text(),
            nonce: request.client_nonce.clone(),
            redirect_uri: request.redirect_uri.clone(),
            code_verifier: config.oidc_enable_pkce.then(oidc::random_text),
            created_ns: now,
        });
    let provider_failed =
        |error: SsoError| ApiError::internal(format!("failed to generate OIDC provider: {error}"));
    let client = oidc::http_client(&config.discovery_ca_pem).map_err(provider_failed)?;
    let document = oidc::discover(&client, &config.oidc_discovery_url)
        .await
        .map_err(provider_failed)?;
    if !config.allowed_redirect_uris.contains(&pending.redirect_uri) {
        return Err(ApiError::internal(
            "failed to generate auth URL: Provider.AuthURL: unauthorized redirect_uri",
        ));
    }
    let auth_url = oidc::auth_url(&document, &config, &pending)
        .map_err(|error| ApiError::internal(format!("failed to generate auth URL: {error}")))?;
    Ok(json(&AclOidcAuthUrlResponse { auth_url }, 0, false))
}

async fn oidc_complete_auth(
    method: Method,
    State(endpoints): State<SsoEndpoints>,
    body: Bytes,
) -> Result<Response, ApiError> {
    if !is_write(&method) {
        return Err(ApiError::MethodNotAllowed);
    }
    let request: AclOidcCompleteAuthRequest = decode(&body)?;
    if !endpoints.acl.enabled {
        return disabled();
    }
    let mut problems = Vec::new();
    if request.auth_method_name.is_empty() {
        problems.push("missing auth method name".to_owned());
    }
    if request.client_nonce.is_empty() {
        problems.push("missing client nonce".to_owned());
    }
    if request.state.is_empty() {
        problems.push("missing state".to_owned());
    }
    if request.code.is_empty() {
        problems.push("missing code".to_owned());
    }
    if request.redirect_uri.is_empty() {
        problems.push("missing redirect URI".to_owned());
    }
    if !problems.is_empty() {
        return Err(ApiError::bad_request(format!(
            "invalid OIDC complete-auth request: {}",
            multi_error(&problems)
        )));
    }
    let auth = auth_method(&endpoints, &request.auth_method_name)?;
    let config = auth.config.clone().unwrap_or_default();
    let provider_failed =
        |error: SsoError| ApiError::internal(format!("failed to generate OIDC provider: {error}"));
    let client = oidc::http_client(&config.discovery_ca_pem).map_err(provider_failed)?;
    let document = oidc::discover(&client, &config.oidc_discovery_url)
        .await
        .map_err(provider_failed)?;
    if document
        .get("authorization_response_iss_parameter_supported")
        .and_then(serde_json::Value::as_bool)
        == Some(true)
        && (request.iss.is_empty() || request.iss != config.oidc_discovery_url)
    {
        return Err(ApiError::internal(
            "invalid or missing issuer parameter in callback",
        ));
    }
    let now = endpoints.acl.clock.now_unix_ns();
    let pending = endpoints
        .requests
        .take(&request.client_nonce, now)
        .ok_or_else(|| ApiError::internal("no OIDC request found for client nonce"))?;
    if pending.state != request.state {
        return Err(ApiError::internal(
            "failed to exchange token with provider: Provider.Exchange: authen state and response state are not equal",
        ));
    }
    let internal = |error: SsoError| ApiError::internal(error.to_string());
    let (token_claims, access_token) =
        oidc::exchange(&client, &document, &config, &pending, &request.code, now)
            .await
            .map_err(internal)?;
    let mut user_claims = None;
    if !config.oidc_disable_user_info
        && let Some(access_token) = access_token
    {
        let subject = token_claims
            .get("sub")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("")
            .to_owned();
        user_claims = oidc::user_info(&client, &document, &access_token, &subject)
            .await
            .map_err(internal)?;
    }
    let mapped = selector_data(&auth, token_claims, user_claims).map_err(internal)?;
    issue_token(&endpoints, &auth, mapped).await
}
