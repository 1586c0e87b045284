//! The proxy's calls to its local agent, over the allocation's agent socket, each with the
//! sidecar's workload identity (read from its file at every call: the client renews it).
//! The socket lives deep in the agent's data dir (`<data_dir>/alloc/<alloc>/<task>/secrets/
//! api.sock`), often past the 107 bytes a unix socket address holds: it is then reached
//! through a descriptor of its directory (`drover_shim::socket_path`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use drover_shim::socket_path::SocketPath;

use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use serde::{Deserialize, Serialize};

use crate::ca::{CaRoots, LeafCert};
use crate::error::MeshError;
use crate::intentions::Intention;

/// The header on the intentions list that says the default when none matches.
pub const DEFAULT_INTENTION_HEADER: &str = "X-Drover-Mesh-Default-Intention";

/// How long a blocking query of the proxy waits at most.
const BLOCKING_WAIT: &str = "30s";

/// What the proxy sends the agent: `PUT /v1/agent/connect/proxy/stats`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ProxyStats {
    #[serde(rename = "AllocID")]
    pub alloc_id: String,
    pub namespace: String,
    pub service: String,
    pub upstreams: Vec<UpstreamStats>,
}

/// One upstream's counters, as sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct UpstreamStats {
    pub destination_name: String,
    pub destination_namespace: String,
    pub connections: u64,
    pub failed_connections: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
}

/// One instance of a service in the catalog.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Instance {
    #[serde(rename = "ID")]
    pub id: String,
    #[serde(rename = "AllocID", default)]
    pub alloc_id: String,
    pub address: String,
    pub port: u16,
}

/// The intentions and the default, as the agent answered them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntentionSet {
    pub intentions: Vec<Intention>,
    pub default_allow: bool,
}

/// A client of the local agent's API on a Unix socket.
#[derive(Debug, Clone)]
pub struct AgentClient {
    http: reqwest::Client,
    token_file: PathBuf,
    /// Keeps the directory descriptor a long socket path goes through open.
    _socket: Arc<SocketPath>,
}

fn encode(part: &str) -> String {
    utf8_percent_encode(part, NON_ALPHANUMERIC).to_string()
}

impl AgentClient {
    pub fn new(socket: PathBuf, token_file: PathBuf) -> Result<Self, MeshError> {
        let address = SocketPath::new(&socket).map_err(|error| MeshError::Agent {
            what: format!("the agent socket {}", socket.display()),
            reason: error.to_string(),
        })?;
        let http = reqwest::Client::builder()
            .unix_socket(address.path().to_path_buf())
            // Longer than a blocking query's wait.
            .timeout(Duration::from_secs(60))
            .build()
            .map_err(|error| MeshError::Agent {
                what: format!("client for {}", socket.display()),
                reason: error.to_string(),
            })?;
        Ok(AgentClient {
            http,
            token_file,
            _socket: Arc::new(address),
        })
    }

    fn token(&self) -> Result<String, MeshError> {
        std::fs::read_to_string(&self.token_file)
            .map(|token| token.trim().to_owned())
            .map_err(|source| MeshError::Io {
                path: self.token_file.clone(),
                source,
            })
    }

    /// GETs `path`; answers the body and the `X-Nomad-Index` and default-intention headers.
    async fn get(&self, path: &str) -> Result<(Vec<u8>, u64, Option<String>), MeshError> {
        let failed = |reason: String| MeshError::Agent {
            what: format!("GET {path}"),
            reason,
        };
        let response = self
            .http
            .get(format!("http://agent{path}"))
            .header("X-Nomad-Token", self.token()?)
            .send()
            .await
            .map_err(|error| failed(error.to_string()))?;
        let status = response.status();
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|value| value.to_str().ok())
                .map(str::to_owned)
        };
        let index = header("X-Nomad-Index")
            .and_then(|index| index.parse().ok())
            .unwrap_or(0);
        let default = header(DEFAULT_INTENTION_HEADER);
        let body = response
            .bytes()
            .await
            .map_err(|error| failed(error.to_string()))?;
        if !status.is_success() {
            return Err(failed(format!(
                "{status}: {}",
                String::from_utf8_lossy(&body).trim()
            )));
        }
        Ok((body.to_vec(), index, default))
    }

    fn decode<T: serde::de::DeserializeOwned>(path: &str, body: &[u8]) -> Result<T, MeshError> {
        serde_json::from_slice(body).map_err(|error| MeshError::Agent {
            what: format!("GET {path}"),
            reason: format!("unexpected answer: {error}"),
        })
    }

    /// `GET /v1/agent/connect/ca/roots`.
    pub async fn roots(&self) -> Result<CaRoots, MeshError> {
        let path = "/v1/agent/connect/ca/roots";
        let (body, _, _) = self.get(path).await?;
        Self::decode(path, &body)
    }

    /// `GET /v1/agent/connect/ca/leaf/<service>`.
    pub async fn leaf(&self, service: &str) -> Result<LeafCert, MeshError> {
        let path = format!("/v1/agent/connect/ca/leaf/{}", encode(service));
        let (body, _, _) = self.get(&path).await?;
        Self::decode(&path, &body)
    }

    /// The instances of `service` in `namespace`, as a blocking query after `index`.
    pub async fn instances(
        &self,
        service: &str,
        namespace: &str,
        index: u64,
    ) -> Result<(Vec<Instance>, u64), MeshError> {
        let path = format!(
            "/v1/service/{}?namespace={}&index={index}&wait={BLOCKING_WAIT}",
            encode(service),
            encode(namespace)
        );
        let (body, index, _) = self.get(&path).await?;
        Ok((Self::decode(&path, &body)?, index))
    }

    /// The intentions whose destination may match `service` in `namespace`, as a blocking
    /// query after `index`.
    pub async fn intentions(
        &self,
        namespace: &str,
        service: &str,
        index: u64,
    ) -> Result<(IntentionSet, u64), MeshError> {
        let path = format!(
            "/v1/connect/intentions/match?by=destination&name={}&index={index}&wait={BLOCKING_WAIT}",
            encode(&format!("{namespace}/{service}"))
        );
        let (body, index, default) = self.get(&path).await?;
        let matched: std::collections::BTreeMap<String, Vec<Intention>> =
            Self::decode(&path, &body)?;
        let default_allow = match default.as_deref() {
            Some("deny") => false,
            Some("allow") => true,
            other => {
                return Err(MeshError::Agent {
                    what: format!("GET {path}"),
                    reason: format!("no {DEFAULT_INTENTION_HEADER} header (got {other:?})"),
                });
            }
        };
        Ok((
            IntentionSet {
                intentions: matched.into_values().flatten().collect(),
                default_allow,
            },
            index,
        ))
    }
}

impl AgentClient {
    /// `PUT /v1/agent/connect/proxy/stats`.
    pub async fn put_stats(&self, stats: &ProxyStats) -> Result<(), MeshError> {
        let path = "/v1/agent/connect/proxy/stats";
        let failed = |reason: String| MeshError::Agent {
            what: format!("PUT {path}"),
            reason,
        };
        let response = self
            .http
            .put(format!("http://agent{path}"))
            .header("X-Nomad-Token", self.token()?)
            .json(stats)
            .send()
            .await
            .map_err(|error| failed(error.to_string()))?;
        if !response.status().is_success() {
            return Err(failed(response.status().to_string()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// Regression: a sidecar whose allocation dir lies deep in the agent's data dir (a client
    /// agent's data dir under a test's, a long service name) could not reach its agent: the
    /// socket's path was longer than a unix socket address holds.
    #[tokio::test]
    async fn an_agent_socket_path_longer_than_a_unix_address_holds_is_reached() {
        let temp = tempfile::tempdir().unwrap();
        let secrets = temp
            .path()
            .join("node-b/data/alloc/a2962018-6ec2-4afc-9f2a-501d6eb61613")
            .join("connect-proxy-count-dashboard-with-a-long-name/secrets");
        std::fs::create_dir_all(&secrets).unwrap();
        let socket = secrets.join("api.sock");
        assert!(socket.as_os_str().len() > 107, "{}", socket.display());
        let token_file = secrets.join("nomad_token");
        std::fs::write(&token_file, "the-token\n").unwrap();

        let bound = SocketPath::new(&socket).unwrap();
        let listener = tokio::net::UnixListener::bind(bound.path()).unwrap();
        let server = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut request = Vec::new();
            let mut buffer = [0u8; 1024];
            while !request.windows(4).any(|window| window == b"\r\n\r\n") {
                let read = stream.read(&mut buffer).await.unwrap();
                assert!(read > 0, "the request ended early");
                request.extend_from_slice(&buffer[..read]);
            }
            let body = r#"{"ActiveRootID":"r1","TrustDomain":"t.consul","Roots":[]}"#;
            stream
                .write_all(
                    format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    )
                    .as_bytes(),
                )
                .await
                .unwrap();
            String::from_utf8(request).unwrap()
        });

        let client = AgentClient::new(socket, token_file).unwrap();
        let roots = client.roots().await.unwrap();
        assert_eq!(roots.trust_domain, "t.consul");
        let request = server.await.unwrap();
        assert!(
            request.starts_with("GET /v1/agent/connect/ca/roots "),
            "{request}"
        );
        assert!(
            request
                .to_ascii_lowercase()
                .contains("x-nomad-token: the-token\r\n"),
            "{request}"
        );
    }
}
