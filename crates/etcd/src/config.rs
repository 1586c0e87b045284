//! What the etcd backend is told (where the cluster is, its TLS and credentials) and how an
//! etcd client's error becomes the state store's. A leaf module: the backend, its member
//! endpoints and its TLS set-up share it without importing each other.

use std::path::PathBuf;
use std::time::Duration;

use drover_state::KvError;

/// Where the backend lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdConfig {
    /// Client URLs of the cluster's members (`http://127.0.0.1:2379`).
    pub endpoints: Vec<String>,
    /// The key prefix of this drover cluster's records (several clusters can share one etcd).
    pub prefix: String,
    /// How long one request to one member may take before the next member is asked.
    pub request_timeout: Duration,
    /// etcd's user and password (etcd auth), when it has auth enabled.
    pub credentials: Option<Credentials>,
    /// TLS to the members (`https://` endpoints), when set.
    pub tls: Option<EtcdTls>,
}

/// The etcd user drover's requests run as (etcd auth).
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Credentials")
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

/// TLS to etcd's members.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EtcdTls {
    /// PEM file of the CA that signed the members' certificates.
    pub ca_file: Option<PathBuf>,
    /// PEM file of this client's certificate (etcd's `--client-cert-auth`).
    pub cert_file: Option<PathBuf>,
    /// PEM file of this client certificate's private key.
    pub key_file: Option<PathBuf>,
}

impl EtcdConfig {
    /// `endpoints` and `prefix` with the default request timeout (5 s).
    pub fn new(endpoints: Vec<String>, prefix: impl Into<String>) -> Self {
        Self {
            endpoints,
            prefix: prefix.into(),
            request_timeout: Duration::from_secs(5),
            credentials: None,
            tls: None,
        }
    }
}

/// Whether `error` says the member could not serve the request (down, unreachable, without a
/// leader), as opposed to a refusal another member would repeat.
pub(crate) fn is_unavailable(error: &etcd_client::Error) -> bool {
    match error {
        etcd_client::Error::TransportError(_) | etcd_client::Error::IoError(_) => true,
        // A member killed mid-request: tonic reports the broken connection as a status of
        // code Unknown whose message is "transport error".
        etcd_client::Error::GRpcStatus(status) => {
            matches!(
                status.code(),
                tonic::Code::Unavailable | tonic::Code::DeadlineExceeded | tonic::Code::Cancelled
            ) || (status.code() == tonic::Code::Unknown && status.message() == "transport error")
        }
        _ => false,
    }
}

pub(crate) fn client_error(operation: &'static str, error: etcd_client::Error) -> KvError {
    if is_unavailable(&error) {
        KvError::Unavailable {
            reason: format!("etcd {operation}: {error}"),
        }
    } else {
        KvError::Backend {
            operation,
            reason: error.to_string(),
        }
    }
}
