//! The one error type of the HTTP layer and its mapping onto Nomad's plain-text error responses.
//!
//! Every handler returns `Result<_, ApiError>`; [`ApiError`]'s `IntoResponse` is the only place
//! where an error becomes a status code and a body. Not here: the errors of the typed client
//! (see [`crate::client::ClientError`]).

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

/// An error answered to an HTTP caller. The body is the bare message as `text/plain`, as Nomad
/// sends it (`job not found`, `Invalid wait time`, ...).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// Bad input: 400.
    #[error("{0}")]
    BadRequest(String),
    /// A missing object: 404 with the message.
    #[error("{0}")]
    NotFound(String),
    /// A path no route serves: 404 with an empty body, as Nomad's root fallthrough answers.
    #[error("no route")]
    NoRoute,
    /// A write whose precondition (an index the caller named) did not hold: 409.
    #[error("{0}")]
    Conflict(String),
    /// A route served with a method it does not take: 405 `Invalid method`.
    #[error("Invalid method")]
    MethodNotAllowed,
    /// A route this agent does not serve in its role (a client route on a server-only agent):
    /// 501 with the message, as Nomad answers.
    #[error("{0}")]
    NotImplemented(String),
    /// `/v1/agent/health` of an agent with a failing part: 500 with the health JSON as text,
    /// not logged as a failed request.
    #[error("{0}")]
    Unhealthy(String),
    /// The agent cannot serve this now (shutting down): 503.
    #[error("{0}")]
    Unavailable(String),
    /// Anything else: 500. The message is logged and sent.
    #[error("{0}")]
    Internal(String),
}

impl ApiError {
    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError::BadRequest(message.into())
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        ApiError::NotFound(message.into())
    }

    pub fn not_implemented(message: impl Into<String>) -> Self {
        ApiError::NotImplemented(message.into())
    }

    pub fn internal(message: impl Into<String>) -> Self {
        ApiError::Internal(message.into())
    }

    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::NotFound(_) | ApiError::NoRoute => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::NotImplemented(_) => StatusCode::NOT_IMPLEMENTED,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) | ApiError::Unhealthy(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let body = match &self {
            ApiError::NoRoute => String::new(),
            ApiError::Internal(message) => {
                tracing::error!(error = %message, "request failed");
                message.clone()
            }
            other => other.to_string(),
        };
        (
            status,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            body,
        )
            .into_response()
    }
}
