//! `PUT /v1/agent/join?address=…`: Nomad's answer, `{"num_joined": N, "error": "…"}`, for
//! drover's servers. drover's servers form a cluster by sharing one etcd prefix, not by
//! gossip, so "joining" a server is finding that it is one of this cluster already: each
//! address is asked for its identity (`GET /v1/agent/self`, its `X-Drover-Cluster-ID`), and
//! counts as joined when it is a server of this cluster. A server of another region is
//! refused (regions do not federate in drover), as is a server of another cluster of this
//! region (it keeps its own state; it can only be made one of these by sharing their etcd),
//! and an address that does not answer, each in the `error` text as Nomad reports a failed
//! join. An agent without a server answers Nomad's 501.
//!
//! Not here: the cluster itself (`leadership`, `cluster`).

use std::time::Duration;

use axum::extract::{RawQuery, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use drover_api::ApiError;
use drover_api::params::QueryParams;
use drover_structs::client_rpc::CLUSTER_ID_HEADER;

/// What the endpoint needs: this server's region and cluster ID (`None`: no server here).
#[derive(Clone)]
pub struct JoinEndpoint {
    pub server: Option<OwnServer>,
    /// Built at the first join, not at the agent's start (it loads the TLS trust store).
    pub http: crate::proxy::ProxyClient,
}

#[derive(Clone)]
pub struct OwnServer {
    pub region: String,
    pub cluster_id: String,
}

/// How long one address may take to say who it is.
const ASK_TIMEOUT: Duration = Duration::from_secs(5);

pub fn router(endpoint: JoinEndpoint) -> axum::Router {
    axum::Router::new()
        .route("/v1/agent/join", axum::routing::any(join))
        .with_state(endpoint)
}

async fn join(
    method: Method,
    RawQuery(query): RawQuery,
    State(endpoint): State<JoinEndpoint>,
) -> Result<Response, ApiError> {
    if method != Method::PUT && method != Method::POST {
        return Err(ApiError::MethodNotAllowed);
    }
    let Some(own) = &endpoint.server else {
        return Ok((StatusCode::NOT_IMPLEMENTED, "Invalid method").into_response());
    };
    let params = QueryParams::parse(query.as_deref());
    let addresses: Vec<String> = params.get_all("address").map(str::to_owned).collect();
    if addresses.is_empty() {
        return Err(ApiError::bad_request("missing address to join"));
    }
    let mut joined = 0usize;
    let mut errors = Vec::new();
    for address in &addresses {
        let asked = match endpoint.http.get() {
            Ok(http) => ask(http, own, address).await,
            Err(error) => Err(error),
        };
        match asked {
            Ok(()) => joined += 1,
            Err(error) => errors.push(format!("Failed to join {address}: {error}")),
        }
    }
    let error = match errors.len() {
        0 => String::new(),
        count => format!(
            "{count} error{} occurred:\n{}\n\n",
            if count == 1 { "" } else { "s" },
            errors
                .iter()
                .map(|error| format!("\t* {error}"))
                .collect::<Vec<_>>()
                .join("\n")
        ),
    };
    Ok(axum::Json(serde_json::json!({"num_joined": joined, "error": error})).into_response())
}

/// Whether the agent at `address` is a server of this cluster; why not otherwise.
async fn ask(http: &reqwest::Client, own: &OwnServer, address: &str) -> Result<(), String> {
    let address = address.trim();
    let base = if address.contains("://") {
        address.to_owned()
    } else if address
        .rsplit_once(':')
        .is_some_and(|(_, port)| port.parse::<u16>().is_ok())
    {
        format!("http://{address}")
    } else {
        // drover's servers answer on their HTTP port, 4646 unless configured.
        format!("http://{address}:4646")
    };
    let response = http
        .get(format!("{base}/v1/agent/self"))
        .timeout(ASK_TIMEOUT)
        .send()
        .await
        .map_err(|error| format!("no drover agent answers there: {error}"))?;
    let cluster_id = response
        .headers()
        .get(CLUSTER_ID_HEADER)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let status = response.status();
    let body: serde_json::Value = response.json().await.map_err(|error| {
        format!("its /v1/agent/self is not an agent's answer ({status}): {error}")
    })?;
    let region = body
        .pointer("/config/Region")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default();
    let Some(cluster_id) = cluster_id else {
        return Err("it runs no server".to_owned());
    };
    if region != own.region {
        return Err(format!(
            "it is a server of region {region:?}, this one of {:?}: drover does not federate regions",
            own.region
        ));
    }
    if cluster_id != own.cluster_id {
        return Err(format!(
            "it is a server of another cluster ({cluster_id}), with its own state: drover's \
             servers form one cluster by sharing an etcd prefix (etcd {{ endpoints, prefix }}), \
             not by joining"
        ));
    }
    Ok(())
}
