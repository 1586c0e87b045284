//! Single sign-on on the wire and at rest, in Nomad's shapes: auth methods ([`AclAuthMethod`],
//! of type `OIDC` or `JWT`, with their [`AclAuthMethodConfig`] and list stub), binding rules
//! ([`AclBindingRule`]) that turn a login's claims into policies, roles or a management token,
//! and the login requests (`/v1/acl/login`, `/v1/acl/oidc/auth-url`,
//! `/v1/acl/oidc/complete-auth`).
//!
//! Durations that Nomad marshals as Go duration text (`MaxTokenTTL`, the leeways) are
//! [`GoDurationText`]: written as `"1h0m0s"` (empty for zero), read from text or nanoseconds.
//!
//! Not here: validating a login (the server's `acl::sso`), storage (the state store).

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::lenient::wire_struct;
use crate::time::{DurationNs, Timestamp};

/// An auth method of the OpenID Connect authorization code flow.
pub const AUTH_METHOD_TYPE_OIDC: &str = "OIDC";
/// An auth method that verifies a JWT the caller presents.
pub const AUTH_METHOD_TYPE_JWT: &str = "JWT";
/// A binding rule that links a role by name.
pub const BIND_TYPE_ROLE: &str = "role";
/// A binding rule that grants a policy by name.
pub const BIND_TYPE_POLICY: &str = "policy";
/// A binding rule that makes the token a management token.
pub const BIND_TYPE_MANAGEMENT: &str = "management";
/// The token name an auth method gives when it names no format.
pub const DEFAULT_TOKEN_NAME_FORMAT: &str = "${auth_method_type}-${auth_method_name}";

/// A Go `time.Duration` that Nomad's JSON writes as its `String()` (`""` for zero).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct GoDurationText(pub DurationNs);

impl Serialize for GoDurationText {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if self.0 == DurationNs::ZERO {
            serializer.serialize_str("")
        } else {
            serializer.serialize_str(&self.0.to_go_string())
        }
    }
}

impl<'de> Deserialize<'de> for GoDurationText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(deserializer)?;
        match value {
            serde_json::Value::String(text) if text.is_empty() => Ok(GoDurationText::default()),
            other => DurationNs::deserialize(other)
                .map(GoDurationText)
                .map_err(serde::de::Error::custom),
        }
    }
}

wire_struct! {
    /// Nomad's `ACLAuthMethodConfig`.
    pub struct AclAuthMethodConfig {
        #[serde(rename = "JWTValidationPubKeys")]
        pub jwt_validation_pub_keys: Vec<String>,
        #[serde(rename = "JWKSURL")]
        pub jwks_url: String,
        #[serde(rename = "OIDCDiscoveryURL")]
        pub oidc_discovery_url: String,
        #[serde(rename = "OIDCClientID")]
        pub oidc_client_id: String,
        #[serde(rename = "OIDCClientSecret")]
        pub oidc_client_secret: String,
        /// Private-key JWT client authentication; refused (see the server's `acl::sso`).
        #[serde(rename = "OIDCClientAssertion", skip_serializing_if = "Option::is_none")]
        pub oidc_client_assertion: Option<serde_json::Value>,
        #[serde(rename = "OIDCEnablePKCE")]
        pub oidc_enable_pkce: bool,
        #[serde(rename = "OIDCDisableUserInfo")]
        pub oidc_disable_user_info: bool,
        #[serde(rename = "OIDCScopes")]
        pub oidc_scopes: Vec<String>,
        pub bound_audiences: Vec<String>,
        pub bound_issuer: Vec<String>,
        #[serde(rename = "AllowedRedirectURIs")]
        pub allowed_redirect_uris: Vec<String>,
        pub discovery_ca_pem: Vec<String>,
        #[serde(rename = "JWKSCACert")]
        pub jwks_ca_cert: String,
        pub signing_algs: Vec<String>,
        pub expiration_leeway: GoDurationText,
        pub not_before_leeway: GoDurationText,
        pub clock_skew_leeway: GoDurationText,
        pub claim_mappings: BTreeMap<String, String>,
        pub list_claim_mappings: BTreeMap<String, String>,
        pub verbose_logging: bool,
    }
}

wire_struct! {
    /// Nomad's `ACLAuthMethod`.
    pub struct AclAuthMethod {
        pub name: String,
        #[serde(rename = "Type")]
        pub method_type: String,
        pub token_locality: String,
        pub token_name_format: String,
        #[serde(rename = "MaxTokenTTL")]
        pub max_token_ttl: GoDurationText,
        pub default: bool,
        pub config: Option<AclAuthMethodConfig>,
        /// Base64 of the BLAKE2b-256 of the method's fields.
        pub hash: String,
        pub create_time: Timestamp,
        pub modify_time: Timestamp,
        pub create_index: u64,
        pub modify_index: u64,
    }
}

wire_struct! {
    /// What `GET /v1/acl/auth-methods` lists.
    pub struct AclAuthMethodStub {
        pub name: String,
        #[serde(rename = "Type")]
        pub method_type: String,
        pub default: bool,
        pub hash: String,
        pub create_index: u64,
        pub modify_index: u64,
    }
}

impl AclAuthMethod {
    pub fn stub(&self) -> AclAuthMethodStub {
        AclAuthMethodStub {
            name: self.name.clone(),
            method_type: self.method_type.clone(),
            default: self.default,
            hash: self.hash.clone(),
            create_index: self.create_index,
            modify_index: self.modify_index,
        }
    }

    /// The method as it is shown to callers: the client secret redacted.
    pub fn sanitized(&self) -> AclAuthMethod {
        let mut clean = self.clone();
        if let Some(config) = clean.config.as_mut()
            && !config.oidc_client_secret.is_empty()
        {
            config.oidc_client_secret = "redacted".to_owned();
        }
        clean
    }
}

wire_struct! {
    /// Nomad's `ACLBindingRule`.
    pub struct AclBindingRule {
        #[serde(rename = "ID")]
        pub id: String,
        pub description: String,
        pub auth_method: String,
        pub selector: String,
        pub bind_type: String,
        pub bind_name: String,
        pub hash: String,
        pub create_time: Timestamp,
        pub modify_time: Timestamp,
        pub create_index: u64,
        pub modify_index: u64,
    }
}

wire_struct! {
    /// What `GET /v1/acl/binding-rules` lists.
    pub struct AclBindingRuleStub {
        #[serde(rename = "ID")]
        pub id: String,
        pub description: String,
        pub auth_method: String,
        pub hash: String,
        pub create_index: u64,
        pub modify_index: u64,
    }
}

impl AclBindingRule {
    pub fn stub(&self) -> AclBindingRuleStub {
        AclBindingRuleStub {
            id: self.id.clone(),
            description: self.description.clone(),
            auth_method: self.auth_method.clone(),
            hash: self.hash.clone(),
            create_index: self.create_index,
            modify_index: self.modify_index,
        }
    }
}

wire_struct! {
    /// `PUT /v1/acl/login`: a JWT presented to a JWT auth method.
    pub struct AclLoginRequest {
        pub auth_method_name: String,
        pub login_token: String,
    }
}

wire_struct! {
    /// `PUT /v1/acl/oidc/auth-url`.
    pub struct AclOidcAuthUrlRequest {
        pub auth_method_name: String,
        #[serde(rename = "RedirectURI")]
        pub redirect_uri: String,
        pub client_nonce: String,
    }
}

wire_struct! {
    /// The answer of `/v1/acl/oidc/auth-url`.
    pub struct AclOidcAuthUrlResponse {
        #[serde(rename = "AuthURL")]
        pub auth_url: String,
    }
}

wire_struct! {
    /// `PUT /v1/acl/oidc/complete-auth`: what the provider's redirect carried.
    pub struct AclOidcCompleteAuthRequest {
        pub auth_method_name: String,
        pub client_nonce: String,
        pub state: String,
        pub code: String,
        #[serde(rename = "RedirectURI")]
        pub redirect_uri: String,
        pub iss: String,
    }
}
