//! Answers about the agent itself: `/v1/agent/self` (lowercase top-level keys, as Nomad) and
//! `/v1/agent/members`, built from [`AgentInfo`].
//!
//! Not here: health of the server or client subsystems beyond "enabled".

use serde_json::json;

use crate::backend::{AgentInfo, ApiBackend};

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
    let (address, port) = info
        .server_addr
        .rsplit_once(':')
        .map(|(host, port)| (host.to_string(), port.parse::<u16>().unwrap_or(4647)))
        .unwrap_or_else(|| (info.server_addr.clone(), 4647));
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
