//! The Connect proxy hook: before a sidecar proxy task (`Kind = "connect-proxy:<service>"`)
//! starts, its [`ConnectProxyConfig`] is written as JSON to `secrets/connect-proxy.json`,
//! which the task (`drover connect-proxy -config <file>`, see the `connect_proxy` driver)
//! reads at start.
//!
//! What the file names, all inside the allocation: the public listener (`0.0.0.0:<to>` of the
//! sidecar's port), the local service (`local_service_address`/`local_service_port` of the
//! proxy block, else `127.0.0.1` and the service's port inside the namespace), the upstreams,
//! the agent socket (the task API's `secrets/api.sock`, which carries HTTP to this agent and
//! takes the task's workload identity, as Nomad's Consul gRPC socket does for Envoy) and the
//! identity token file (`secrets/nomad_token`, which the identity hook writes for a sidecar),
//! and the host's address on the group's bridge.
//!
//! **Not** here: running the proxy (the driver) or what the proxy does (the `drover-mesh`
//! crate).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use drover_structs::mesh::{ConnectProxyConfig, ConnectUpstream};
use drover_structs::{Allocation, Task};
use tokio_util::sync::CancellationToken;

use super::{
    HookError, HookErrorKind, HookFuture, HookResult, PrestartHook, PrestartRequest,
    PrestartResponse, TaskHook,
};
use crate::allocdir::TaskDir;
use crate::network::AllocNetwork;
use crate::template::beneath::{WriteOptions, write_atomic};

/// The proxy's config file, relative to the task dir.
pub const CONFIG_FILE: &str = "secrets/connect-proxy.json";
/// The default identity's token file, relative to the task dir.
pub const IDENTITY_TOKEN_FILE: &str = "secrets/nomad_token";
/// The task API socket, relative to the task dir.
pub const AGENT_SOCKET: &str = "secrets/api.sock";

/// See the module docs.
#[derive(Debug)]
pub struct ConnectProxyHook {
    task_dir: TaskDir,
    datacenter: String,
    network: Option<Arc<AllocNetwork>>,
}

impl ConnectProxyHook {
    pub fn new(task_dir: TaskDir, datacenter: String, network: Option<Arc<AllocNetwork>>) -> Self {
        ConnectProxyHook {
            task_dir,
            datacenter,
            network,
        }
    }
}

/// The port inside the namespace of a group port label (its `To`, else its host value), or
/// a literal port number.
fn port_inside(alloc: &Allocation, label: &str) -> Option<u16> {
    if let Ok(number) = label.parse::<u16>() {
        return Some(number);
    }
    let mapping = alloc
        .allocated_resources
        .as_ref()?
        .shared
        .ports
        .iter()
        .find(|port| port.label == label)?;
    let port = if mapping.to > 0 {
        mapping.to
    } else {
        mapping.value
    };
    u16::try_from(port).ok().filter(|port| *port > 0)
}

/// The sidecar's configuration, or what is wrong with the allocation for it.
pub fn proxy_config(
    alloc: &Allocation,
    task: &Task,
    task_dir: &TaskDir,
    datacenter: &str,
    host_gateway: Option<IpAddr>,
) -> Result<ConnectProxyConfig, String> {
    let service_name = drover_structs::connect::sidecar_service_of(task)
        .ok_or_else(|| format!("task {:?} is not a Connect sidecar proxy", task.name))?;
    let job = alloc
        .job
        .as_deref()
        .ok_or_else(|| "the allocation carries no job".to_string())?;
    let group = job
        .lookup_task_group(&alloc.task_group)
        .ok_or_else(|| format!("the job has no group {:?}", alloc.task_group))?;
    let (service, sidecar) = group
        .services
        .iter()
        .find_map(|service| {
            let sidecar = service.connect.as_ref()?.sidecar_service.as_ref()?;
            (service.name == service_name).then_some((service, sidecar))
        })
        .ok_or_else(|| {
            format!(
                "group {:?} has no Connect service {service_name:?}",
                group.name
            )
        })?;
    let public_label = if sidecar.port.is_empty() {
        drover_structs::connect::sidecar_port_label(service_name)
    } else {
        sidecar.port.clone()
    };
    let public_port = port_inside(alloc, &public_label).ok_or_else(|| {
        format!("the allocation has no port {public_label:?} for the sidecar's public listener")
    })?;
    let proxy = sidecar.proxy.as_ref();
    let local_address: IpAddr = match proxy.map(|proxy| proxy.local_service_address.as_str()) {
        None | Some("") => IpAddr::V4(Ipv4Addr::LOCALHOST),
        Some(text) => text
            .parse()
            .map_err(|_| format!("local_service_address {text:?} is not an IP address"))?,
    };
    let local_port = match proxy.map(|proxy| proxy.local_service_port) {
        Some(port) if port > 0 => u16::try_from(port)
            .map_err(|_| format!("local_service_port {port} is not a port number"))?,
        _ => port_inside(alloc, &service.port_label).ok_or_else(|| {
            format!(
                "service {service_name:?} has no port the sidecar can forward to (port {:?})",
                service.port_label
            )
        })?,
    };
    let mut upstreams = Vec::new();
    for upstream in proxy.map_or(&[][..], |proxy| proxy.upstreams.as_slice()) {
        let local_bind_address = if upstream.local_bind_address.is_empty() {
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        } else {
            upstream.local_bind_address.parse().map_err(|_| {
                format!(
                    "upstream {:?}: local_bind_address {:?} is not an IP address",
                    upstream.destination_name, upstream.local_bind_address
                )
            })?
        };
        let local_bind_port = u16::try_from(upstream.local_bind_port)
            .ok()
            .filter(|port| *port > 0)
            .ok_or_else(|| {
                format!(
                    "upstream {:?}: local_bind_port {} is not a port number",
                    upstream.destination_name, upstream.local_bind_port
                )
            })?;
        upstreams.push(ConnectUpstream {
            destination_name: upstream.destination_name.clone(),
            destination_namespace: if upstream.destination_namespace.is_empty() {
                alloc.namespace.clone()
            } else {
                upstream.destination_namespace.clone()
            },
            datacenter: upstream.datacenter.clone(),
            local_bind_address,
            local_bind_port,
        });
    }
    Ok(ConnectProxyConfig {
        alloc_id: alloc.id.clone(),
        namespace: alloc.namespace.clone(),
        datacenter: datacenter.to_string(),
        service: service_name.to_string(),
        public_listener: SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), public_port),
        local_service: SocketAddr::new(local_address, local_port),
        upstreams,
        agent_socket: task_dir.dir.join(AGENT_SOCKET),
        identity_token_file: task_dir.dir.join(IDENTITY_TOKEN_FILE),
        host_gateway,
    })
}

impl TaskHook for ConnectProxyHook {
    fn name(&self) -> &'static str {
        "connect_proxy"
    }
    fn as_prestart(&self) -> Option<&dyn PrestartHook> {
        Some(self)
    }
}

impl PrestartHook for ConnectProxyHook {
    fn prestart<'a>(
        &'a self,
        _cancel: &'a CancellationToken,
        request: &'a PrestartRequest,
        _response: &'a mut PrestartResponse,
    ) -> HookFuture<'a, HookResult> {
        Box::pin(async move {
            let host_gateway = self
                .network
                .as_ref()
                .and_then(|network| network.host_gateway());
            let config = proxy_config(
                &request.alloc,
                &request.task,
                &self.task_dir,
                &self.datacenter,
                host_gateway,
            )
            .map_err(|message| {
                HookError::new(
                    HookErrorKind::Validation,
                    format!("connect proxy: {message}"),
                )
            })?;
            let json = serde_json::to_vec_pretty(&config).map_err(|error| {
                HookError::new(
                    HookErrorKind::Unrecoverable,
                    format!("connect proxy: encoding its config: {error}"),
                )
            })?;
            write_atomic(
                &self.task_dir.dir,
                CONFIG_FILE,
                &json,
                WriteOptions {
                    mode: 0o600,
                    uid: None,
                    gid: None,
                },
            )
            .map_err(|error| {
                HookError::new(
                    HookErrorKind::Recoverable,
                    format!("connect proxy: writing {CONFIG_FILE}: {error}"),
                )
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::allocdir::AllocDir;
    use serde_json::json;

    #[test]
    fn config_names_the_ports_inside_the_namespace_and_the_upstreams() {
        let mut job: drover_structs::Job = serde_json::from_value(json!({
            "ID": "countdash",
            "TaskGroups": [{
                "Name": "dashboard",
                "Networks": [{"Mode": "bridge",
                    "DynamicPorts": [{"Label": "http", "To": 9002}]}],
                "Services": [{"Name": "count-dashboard", "PortLabel": "http",
                    "Connect": {"SidecarService": {"Proxy": {"Upstreams": [
                        {"DestinationName": "count-api", "LocalBindPort": 8080}]}}}}],
                "Tasks": [{"Name": "dashboard", "Driver": "raw_exec"}]
            }]
        }))
        .unwrap();
        job.canonicalize();
        let sidecar = job.task_groups[0].tasks[1].clone();
        let mut resources = drover_structs::AllocatedResources::default();
        resources.shared.ports = vec![
            drover_structs::AllocatedPortMapping {
                label: "http".into(),
                value: 23001,
                to: 9002,
                host_ip: "10.0.0.5".into(),
            },
            drover_structs::AllocatedPortMapping {
                label: "connect-proxy-count-dashboard".into(),
                value: 23002,
                to: 23002,
                host_ip: "10.0.0.5".into(),
            },
        ];
        let alloc = Allocation {
            id: "8e3a1b2c-0000-4000-8000-000000000000".into(),
            namespace: "default".into(),
            task_group: "dashboard".into(),
            job: Some(Arc::new(job)),
            allocated_resources: Some(resources),
            ..Allocation::default()
        };
        let alloc_dir = AllocDir::new(std::path::Path::new("/data/alloc"), &alloc.id).unwrap();
        let task_dir = alloc_dir.task_dir(&sidecar.name).unwrap();
        let gateway: IpAddr = "172.26.64.1".parse().unwrap();
        let config = proxy_config(&alloc, &sidecar, &task_dir, "dc1", Some(gateway)).unwrap();
        assert_eq!(config.service, "count-dashboard");
        assert_eq!(config.public_listener, "0.0.0.0:23002".parse().unwrap());
        assert_eq!(config.local_service, "127.0.0.1:9002".parse().unwrap());
        assert_eq!(config.upstreams.len(), 1);
        assert_eq!(config.upstreams[0].destination_name, "count-api");
        assert_eq!(config.upstreams[0].destination_namespace, "default");
        assert_eq!(config.upstreams[0].local_bind_port, 8080);
        assert_eq!(
            config.upstreams[0].local_bind_address,
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        );
        assert_eq!(config.agent_socket, task_dir.dir.join("secrets/api.sock"));
        assert_eq!(
            config.identity_token_file,
            task_dir.dir.join("secrets/nomad_token")
        );
        assert_eq!(config.host_gateway, Some(gateway));
        assert_eq!(config.datacenter, "dc1");
    }
}
