//! The OpenID Connect side of single sign-on: the provider's discovery document
//! (`<OIDCDiscoveryURL>/.well-known/openid-configuration`), its JWKS, the authorization URL
//! of the code flow (state, the CLI's nonce, PKCE S256 when the method enables it), the
//! exchange of the code at the token endpoint (client secret as HTTP basic auth), the ID
//! token's checks (signature, issuer, audience, nonce, times) and the user-info claims.
//!
//! Pending authorization requests are kept in memory by client nonce for 5 minutes (Nomad's
//! request cache), so `complete-auth` must reach the server that answered `auth-url`.
//!
//! Not here: what the claims grant (`claims`), the HTTP routes (`acl_sso_http`).

use std::collections::HashMap;
use std::sync::Mutex;

use base64::Engine;
use drover_structs::acl_sso::AclAuthMethodConfig;
use serde_json::{Map, Value};

use super::SsoError;
use super::jwt::{self, Expected, KeySet};

/// How long an authorization request waits for its completion.
pub const REQUEST_EXPIRY_NS: i64 = 5 * 60 * 1_000_000_000;

/// An authorization request waiting for the provider's redirect.
#[derive(Debug, Clone)]
pub struct PendingRequest {
    pub state: String,
    pub nonce: String,
    pub redirect_uri: String,
    pub code_verifier: Option<String>,
    pub created_ns: i64,
}

/// Pending requests by client nonce.
#[derive(Debug, Default)]
pub struct RequestCache {
    pending: Mutex<HashMap<String, PendingRequest>>,
}

impl RequestCache {
    /// The pending request of `nonce`, made by `make` when there is none (or it expired).
    pub fn load_or_add(
        &self,
        nonce: &str,
        now_ns: i64,
        make: impl FnOnce() -> PendingRequest,
    ) -> PendingRequest {
        let mut pending = self
            .pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        pending.retain(|_, request| now_ns - request.created_ns < REQUEST_EXPIRY_NS);
        pending.entry(nonce.to_owned()).or_insert_with(make).clone()
    }

    /// Takes the pending request of `nonce`, if it has not expired.
    pub fn take(&self, nonce: &str, now_ns: i64) -> Option<PendingRequest> {
        let mut pending = self
            .pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        pending
            .remove(nonce)
            .filter(|request| now_ns - request.created_ns < REQUEST_EXPIRY_NS)
    }
}

/// A random URL-safe text of 32 random bytes (two version-4 UUIDs' worth of entropy).
pub fn random_text() -> String {
    let mut buffer = Vec::with_capacity(32);
    buffer.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
    buffer.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(buffer)
}

/// The S256 challenge of a PKCE verifier.
pub fn pkce_challenge(verifier: &str) -> String {
    use sha2::Digest as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier))
}

/// An HTTP client trusting the system roots and `ca_pems`.
pub fn http_client(ca_pems: &[String]) -> Result<reqwest::Client, SsoError> {
    let mut builder = reqwest::Client::builder().timeout(std::time::Duration::from_secs(30));
    for pem in ca_pems.iter().filter(|pem| !pem.trim().is_empty()) {
        let certificate = reqwest::Certificate::from_pem(pem.as_bytes())
            .map_err(|error| SsoError::Config(format!("invalid CA certificate: {error}")))?;
        builder = builder.add_root_certificate(certificate);
    }
    builder
        .build()
        .map_err(|error| SsoError::Provider(format!("cannot build an HTTP client: {error}")))
}

async fn get_json(client: &reqwest::Client, url: &str) -> Result<Value, String> {
    let response = client
        .get(url)
        .send()
        .await
        .map_err(|error| error.to_string())?;
    let status = response.status();
    if !status.is_success() {
        return Err(format!("{url}: {status}"));
    }
    response.json().await.map_err(|error| error.to_string())
}

/// The provider's discovery document; its `issuer` must be the discovery URL.
pub async fn discover(client: &reqwest::Client, discovery_url: &str) -> Result<Value, SsoError> {
    let url = format!(
        "{}/.well-known/openid-configuration",
        discovery_url.trim_end_matches('/')
    );
    let document = get_json(client, &url).await.map_err(|error| {
        SsoError::Provider(format!("failed to fetch OIDC discovery document: {error}"))
    })?;
    let issuer = document.get("issuer").and_then(Value::as_str).unwrap_or("");
    if issuer.trim_end_matches('/') != discovery_url.trim_end_matches('/') {
        return Err(SsoError::Provider(format!(
            "oidc: issuer did not match the issuer returned by provider, expected {discovery_url:?} got {issuer:?}"
        )));
    }
    Ok(document)
}

/// The keys at a JWKS URL.
pub async fn fetch_jwks(client: &reqwest::Client, url: &str) -> Result<KeySet, SsoError> {
    let document = get_json(client, url).await.map_err(|error| {
        SsoError::Keys(format!("unable to get validation keys from JWKS: {error}"))
    })?;
    jwt::parse_jwks(&document)
}

/// The key set a JWT auth method verifies with: its static keys, its JWKS URL, or the JWKS
/// its OIDC discovery document names, in that order as Nomad picks.
pub async fn jwt_method_keys(config: &AclAuthMethodConfig) -> Result<KeySet, SsoError> {
    if !config.jwt_validation_pub_keys.is_empty() {
        return jwt::parse_pem_keys(&config.jwt_validation_pub_keys);
    }
    if !config.jwks_url.is_empty() {
        let client = http_client(std::slice::from_ref(&config.jwks_ca_cert))?;
        return fetch_jwks(&client, &config.jwks_url).await;
    }
    let client = http_client(&config.discovery_ca_pem)?;
    let document = discover(&client, &config.oidc_discovery_url)
        .await
        .map_err(|error| {
            SsoError::Keys(format!(
                "unable to get validation keys from OIDC provider: {error}"
            ))
        })?;
    let jwks_uri = document
        .get("jwks_uri")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            SsoError::Keys(
                "unable to get validation keys from OIDC provider: no jwks_uri".to_owned(),
            )
        })?;
    fetch_jwks(&client, jwks_uri).await
}

/// The method's expectations of a token.
pub fn expected(config: &AclAuthMethodConfig) -> Expected {
    Expected {
        audiences: config.bound_audiences.clone(),
        signing_algorithms: config.signing_algs.clone(),
        expiration_leeway_ns: config.expiration_leeway.0.as_nanos(),
        not_before_leeway_ns: config.not_before_leeway.0.as_nanos(),
        clock_skew_leeway_ns: config.clock_skew_leeway.0.as_nanos(),
    }
}

fn query_escape(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// The authorization URL of `request` at the provider of `document`.
pub fn auth_url(
    document: &Value,
    config: &AclAuthMethodConfig,
    request: &PendingRequest,
) -> Result<String, SsoError> {
    let endpoint = document
        .get("authorization_endpoint")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            SsoError::Provider("the provider names no authorization_endpoint".to_owned())
        })?;
    let mut scopes = vec!["openid".to_owned()];
    scopes.extend(
        config
            .oidc_scopes
            .iter()
            .filter(|scope| *scope != "openid")
            .cloned(),
    );
    let mut parameters = vec![
        ("client_id", config.oidc_client_id.clone()),
        ("nonce", request.nonce.clone()),
        ("redirect_uri", request.redirect_uri.clone()),
        ("response_type", "code".to_owned()),
        ("scope", scopes.join(" ")),
        ("state", request.state.clone()),
    ];
    if let Some(verifier) = &request.code_verifier {
        parameters.push(("code_challenge", pkce_challenge(verifier)));
        parameters.push(("code_challenge_method", "S256".to_owned()));
    }
    let query: Vec<String> = parameters
        .iter()
        .map(|(name, value)| format!("{name}={}", query_escape(value)))
        .collect();
    let separator = if endpoint.contains('?') { '&' } else { '?' };
    Ok(format!("{endpoint}{separator}{}", query.join("&")))
}

/// Exchanges `code` for tokens and checks the ID token; answers its claims and the access
/// token.
pub async fn exchange(
    client: &reqwest::Client,
    document: &Value,
    config: &AclAuthMethodConfig,
    request: &PendingRequest,
    code: &str,
    now_ns: i64,
) -> Result<(Map<String, Value>, Option<String>), SsoError> {
    let failed =
        |why: String| SsoError::Provider(format!("failed to exchange token with provider: {why}"));
    let endpoint = document
        .get("token_endpoint")
        .and_then(Value::as_str)
        .ok_or_else(|| failed("the provider names no token_endpoint".to_owned()))?;
    let mut form = vec![
        ("grant_type", "authorization_code".to_owned()),
        ("code", code.to_owned()),
        ("redirect_uri", request.redirect_uri.clone()),
    ];
    if let Some(verifier) = &request.code_verifier {
        form.push(("code_verifier", verifier.clone()));
    }
    let body: Vec<String> = form
        .iter()
        .map(|(name, value)| format!("{name}={}", query_escape(value)))
        .collect();
    let response = client
        .post(endpoint)
        .basic_auth(
            query_escape(&config.oidc_client_id),
            Some(query_escape(&config.oidc_client_secret)),
        )
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(body.join("&"))
        .send()
        .await
        .map_err(|error| failed(error.to_string()))?;
    let status = response.status();
    let answer: Value = response
        .json()
        .await
        .map_err(|error| failed(error.to_string()))?;
    if !status.is_success() {
        let reason = answer
            .get("error_description")
            .or_else(|| answer.get("error"))
            .and_then(Value::as_str)
            .unwrap_or("");
        return Err(failed(format!("oauth2: {status}: {reason}")));
    }
    let id_token = answer
        .get("id_token")
        .and_then(Value::as_str)
        .ok_or_else(|| failed("id_token is missing from auth code exchange".to_owned()))?;
    let jwks_uri = document
        .get("jwks_uri")
        .and_then(Value::as_str)
        .ok_or_else(|| failed("the provider names no jwks_uri".to_owned()))?;
    let keys = fetch_jwks(client, jwks_uri).await?;
    let mut expectations = expected(config);
    if expectations.signing_algorithms.is_empty() {
        expectations.signing_algorithms = vec!["RS256".to_owned()];
    }
    let mut audiences = config.bound_audiences.clone();
    if audiences.is_empty() {
        audiences.push(config.oidc_client_id.clone());
    }
    expectations.audiences = audiences;
    let claims = jwt::validate(id_token, &keys, &expectations, now_ns)
        .map_err(|error| failed(format!("id_token failed verification: {error}")))?;
    let issuer = claims.get("iss").and_then(Value::as_str).unwrap_or("");
    if issuer.trim_end_matches('/') != config.oidc_discovery_url.trim_end_matches('/') {
        return Err(failed(format!(
            "id_token failed verification: invalid id_token issuer: {issuer}"
        )));
    }
    if claims.get("nonce").and_then(Value::as_str) != Some(request.nonce.as_str()) {
        return Err(failed(
            "id_token failed verification: invalid id_token nonce".to_owned(),
        ));
    }
    let access_token = answer
        .get("access_token")
        .and_then(Value::as_str)
        .map(str::to_owned);
    Ok((claims, access_token))
}

/// The user-info claims for `access_token`; their `sub` must be the ID token's.
pub async fn user_info(
    client: &reqwest::Client,
    document: &Value,
    access_token: &str,
    subject: &str,
) -> Result<Option<Map<String, Value>>, SsoError> {
    let Some(endpoint) = document.get("userinfo_endpoint").and_then(Value::as_str) else {
        return Ok(None);
    };
    let failed =
        |why: String| SsoError::Provider(format!("failed to retrieve the user info claims: {why}"));
    let response = client
        .get(endpoint)
        .bearer_auth(access_token)
        .send()
        .await
        .map_err(|error| failed(error.to_string()))?;
    if !response.status().is_success() {
        return Err(failed(response.status().to_string()));
    }
    let claims: Map<String, Value> = response
        .json()
        .await
        .map_err(|error| failed(error.to_string()))?;
    if claims.get("sub").and_then(Value::as_str) != Some(subject) {
        return Err(failed(
            "the user info subject does not match the ID token".to_owned(),
        ));
    }
    Ok(Some(claims))
}
