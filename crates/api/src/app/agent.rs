//! Answers about the agent itself: `/v1/agent/self` (lowercase top-level keys, as Nomad),
//! `/v1/agent/members`, built from [`AgentInfo`], `/v1/agent/health`, from the backend's
//! checks of its server and client parts, and the request of `/v1/agent/force-leave`.
//!
//! Not here: the checks themselves (the backend knows its parts).

use serde_json::json;

use axum::response::Response;

use super::respond::{Meta, json_response};
use crate::backend::{AgentHealth, AgentInfo, ApiBackend, PartHealth};
use crate::error::ApiError;
use crate::params::QueryParams;

pub(super) fn agent_self<B: ApiBackend>(backend: &B) -> serde_json::Value {
    let info = backend.agent_info();
    json!({
        "config": {
            "Region": info.region,
            "Datacenter": info.datacenter,
            "NodeName": info.node_name,
            "Version": {"Version": info.version, "Prerelease": "", "Metadata": "", "Revision": ""},
            "ACL": {"Enabled": false},
            "Server": {"Enabled": info.server_enabled},
            "Client": {"Enabled": info.client_enabled},
            "Addresses": {"HTTP": info.http_addr},
        },
        "member": member(&info),
        "stats": {
            "client": {"node_id": info.node_id},
            "nomad": {
                "leader": info.server_enabled.to_string(),
                "server": info.server_enabled.to_string(),
                "known_regions": "1",
                "leader_addr": info.server_addr,
            },
        },
    })
}

fn member(info: &AgentInfo) -> serde_json::Value {
    // drover has no gossip port: the member is the agent, reached over HTTP.
    let (address, port) = info
        .http_addr
        .rsplit_once(':')
        .and_then(|(host, port)| Some((host.to_string(), port.parse::<u16>().ok()?)))
        .unwrap_or_else(|| (info.http_addr.clone(), 0));
    json!({
        "Name": format!("{}.{}", info.node_name, info.region),
        "Addr": address,
        "Port": port,
        "Tags": {
            "region": info.region,
            "dc": info.datacenter,
            "role": "nomad",
            "build": info.version,
            "vsn": "1",
            "mvn": "1",
            "port": port.to_string(),
            "id": info.node_id,
        },
        "Status": "alive",
        "ProtocolMin": 1, "ProtocolMax": 5, "ProtocolCur": 2,
        "DelegateMin": 2, "DelegateMax": 5, "DelegateCur": 4,
    })
}

pub(super) fn agent_members<B: ApiBackend>(backend: &B) -> serde_json::Value {
    let info = backend.agent_info();
    json!({
        "ServerName": format!("{}.{}", info.node_name, info.region),
        "ServerRegion": info.region,
        "ServerDC": info.datacenter,
        "Members": [member(&info)],
    })
}

/// What `PUT /v1/agent/force-leave?node=<name>[&prune=true]` asks, checked as Nomad checks
/// it: the member's name (`<server>.<region>`) and whether to drop it from the member list at
/// once rather than list it `left`.
pub fn force_leave_request(params: &QueryParams) -> Result<(String, bool), ApiError> {
    let node = params.get("node").unwrap_or_default();
    if node.is_empty() {
        return Err(ApiError::bad_request("missing node to force leave"));
    }
    let prune = match params.non_empty("prune") {
        None => false,
        Some(value) => crate::params::parse_go_bool(value)
            .ok_or_else(|| ApiError::bad_request("invalid prune value"))?,
    };
    Ok((node.to_owned(), prune))
}

/// `/v1/agent/health[?type=client|server]`: 200 with each part's health when every part asked
/// about is ok, else 500 with the same JSON as text (Nomad's shape). A part asked for by `type`
/// that the agent does not run is reported as not enabled.
pub(super) async fn agent_health<B: ApiBackend>(
    backend: &B,
    params: &QueryParams,
) -> Result<Response, ApiError> {
    let mut health = backend.agent_health().await;
    let asked: Vec<&str> = params.get_all("type").collect();
    if !asked.is_empty() {
        let client_asked = asked.contains(&"client");
        let server_asked = asked.contains(&"server");
        health = AgentHealth {
            client: client_asked.then(|| {
                health
                    .client
                    .take()
                    .unwrap_or_else(|| PartHealth::unhealthy("client not enabled"))
            }),
            server: server_asked.then(|| {
                health
                    .server
                    .take()
                    .unwrap_or_else(|| PartHealth::unhealthy("server not enabled"))
            }),
        };
    }
    let all_ok = [&health.client, &health.server]
        .into_iter()
        .flatten()
        .all(|part| part.ok);
    if all_ok {
        json_response(&health, params, Meta::Read(1))
    } else {
        let text = serde_json::to_string(&health)
            .map_err(|error| ApiError::internal(format!("encoding the health: {error}")))?;
        Err(ApiError::Unhealthy(text))
    }
}
