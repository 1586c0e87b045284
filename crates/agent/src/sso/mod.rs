//! Single sign-on: logging in through an auth method to get an ACL token, as Nomad 1.5+ does.
//! `jwt` verifies tokens, `oidc` speaks to an OpenID provider (discovery, the code flow with
//! PKCE, user info), `claims` maps claims and evaluates binding rules.
//!
//! Not here: the routes and the token written (`acl_sso_http`).

pub mod claims;
pub mod jwt;
pub mod oidc;

/// Why a login or an auth method was refused.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SsoError {
    /// The presented token does not verify (cap's text).
    #[error("{0}")]
    Token(String),
    /// The keys to verify with could not be had.
    #[error("{0}")]
    Keys(String),
    /// The method's configuration cannot be used.
    #[error("{0}")]
    Config(String),
    /// Claims could not be mapped, or a bind name not computed.
    #[error("{0}")]
    Claims(String),
    /// The OpenID provider failed or answered something unusable.
    #[error("{0}")]
    Provider(String),
}
