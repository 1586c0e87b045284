//! Nomad's native service discovery on the wire: a [`ServiceRegistration`] is one service of one
//! allocation as the catalog holds it, and [`resolve_service_address`] finds the address and port
//! a service (or a check) advertises from what the allocation was given.
//!
//! Not here: the catalog itself (the state store), when a client registers or deregisters (the
//! client's service hook), running checks (the client's check runner).

use std::fmt;

use crate::alloc::Allocation;
use crate::job::NetworkResource;
use crate::lenient::wire_struct;

/// The ID prefix of a task's service registration (`_nomad-task-<alloc>-<task>-<name>-<port>`).
pub const SERVICE_ID_PREFIX: &str = "_nomad-task-";

/// `address_mode` values, as Nomad spells them.
pub const ADDRESS_MODE_AUTO: &str = "auto";
pub const ADDRESS_MODE_HOST: &str = "host";
pub const ADDRESS_MODE_ALLOC: &str = "alloc";
pub const ADDRESS_MODE_DRIVER: &str = "driver";

wire_struct! {
    /// One service of one allocation in the built-in catalog (Nomad's `ServiceRegistration`).
    pub struct ServiceRegistration {
        #[serde(rename = "ID")]
        pub id: String,
        pub service_name: String,
        pub namespace: String,
        #[serde(rename = "NodeID")]
        pub node_id: String,
        pub datacenter: String,
        #[serde(rename = "JobID")]
        pub job_id: String,
        #[serde(rename = "AllocID")]
        pub alloc_id: String,
        pub tags: Vec<String>,
        pub address: String,
        pub port: i64,
        pub create_index: u64,
        pub modify_index: u64,
    }
}

/// The ID of a service registration, as Nomad makes it: the owner is the task's name for a task
/// service and `group-<group name>` for a group service.
pub fn service_registration_id(
    alloc_id: &str,
    owner: &str,
    service_name: &str,
    port_label: &str,
) -> String {
    format!("{SERVICE_ID_PREFIX}{alloc_id}-{owner}-{service_name}-{port_label}")
}

/// The network a driver gives a task of its own (a container's address), for
/// `address_mode = "driver"`. The drivers that run tasks in the host's network have none.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct DriverNetwork {
    /// The task's address inside the driver's network.
    pub ip: String,
    /// Whether `auto` should advertise this address rather than the host's.
    pub auto_advertise: bool,
    /// Port label → port inside the driver's network.
    pub port_map: std::collections::BTreeMap<String, i64>,
}

/// Why a service's address cannot be resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AddressError {
    /// The port is neither a label of the allocation's ports nor a number.
    UnknownPortLabel { label: String },
    /// A numeric port that is not above zero.
    InvalidPort { label: String },
    /// `address_mode = "alloc"` on an allocation without a network of its own.
    NoAllocNetwork,
    /// `address_mode = "driver"` on a task whose driver has no network of its own.
    NoDriverNetwork,
    /// An `address_mode` Nomad does not know.
    UnknownMode { mode: String },
}

impl fmt::Display for AddressError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownPortLabel { label } => {
                write!(f, "invalid port {label:?}: port label not found")
            }
            Self::InvalidPort { label } => write!(f, "invalid port: {label:?}: port must be >0"),
            Self::NoAllocNetwork => write!(
                f,
                "cannot use address_mode=\"alloc\": no allocation network status reported"
            ),
            Self::NoDriverNetwork => write!(
                f,
                "cannot use address_mode=\"driver\": no driver network exists"
            ),
            Self::UnknownMode { mode } => write!(f, "invalid address mode {mode:?}"),
        }
    }
}

impl std::error::Error for AddressError {}

/// Where a service or check is reached: `address` may be empty when Nomad's rules leave it to the
/// node (a numeric port in host mode), which the caller fills with the node's address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceAddress {
    pub address: String,
    pub port: i64,
}

/// Resolves the address and port a service (or check) advertises, with Nomad's rules
/// (`address_mode` auto / host / alloc / driver; a port given by label or as a number).
///
/// `task` names the task whose networks count besides the group's (none for a group service);
/// `address_override` is the service's `address` argument, which wins over the mode's address
/// but not over its port.
pub fn resolve_service_address(
    alloc: &Allocation,
    task: Option<&str>,
    port_label: &str,
    address_mode: &str,
    address_override: &str,
    driver_network: Option<&DriverNetwork>,
) -> Result<ServiceAddress, AddressError> {
    let mut resolved = resolve_mode(alloc, task, port_label, address_mode, driver_network)?;
    if !address_override.is_empty() {
        resolved.address = address_override.to_owned();
    }
    Ok(resolved)
}

fn resolve_mode(
    alloc: &Allocation,
    task: Option<&str>,
    port_label: &str,
    address_mode: &str,
    driver_network: Option<&DriverNetwork>,
) -> Result<ServiceAddress, AddressError> {
    match address_mode {
        "" | ADDRESS_MODE_AUTO => {
            let mode = match driver_network {
                Some(network) if network.auto_advertise => ADDRESS_MODE_DRIVER,
                _ => ADDRESS_MODE_HOST,
            };
            resolve_mode(alloc, task, port_label, mode, driver_network)
        }
        ADDRESS_MODE_HOST => host_address(alloc, task, port_label),
        ADDRESS_MODE_ALLOC => alloc_address(alloc, port_label),
        ADDRESS_MODE_DRIVER => {
            let network = driver_network.ok_or(AddressError::NoDriverNetwork)?;
            if port_label.is_empty() {
                return Ok(ServiceAddress {
                    address: network.ip.clone(),
                    port: 0,
                });
            }
            // A label of the group's ports: the port inside (`to`); else the driver's own
            // port map (docker's `port_map`); else a number (Nomad's order).
            let group_port = alloc
                .allocated_resources
                .as_ref()
                .and_then(|resources| {
                    resources
                        .shared
                        .ports
                        .iter()
                        .find(|port| port.label == port_label)
                })
                .map(|port| port.to);
            let port = match (group_port, network.port_map.get(port_label)) {
                (Some(to), _) => to,
                (None, Some(port)) => *port,
                (None, None) => numeric_port(port_label)?,
            };
            Ok(ServiceAddress {
                address: network.ip.clone(),
                port,
            })
        }
        other => Err(AddressError::UnknownMode {
            mode: other.to_owned(),
        }),
    }
}

/// The networks that count for a service: the group's, then the task's.
fn networks<'a>(alloc: &'a Allocation, task: Option<&str>) -> Vec<&'a NetworkResource> {
    let Some(resources) = alloc.allocated_resources.as_ref() else {
        return Vec::new();
    };
    let task_networks = task
        .and_then(|task| resources.tasks.get(task))
        .map(|task| task.networks.iter())
        .into_iter()
        .flatten();
    resources
        .shared
        .networks
        .iter()
        .chain(task_networks)
        .collect()
}

fn host_address(
    alloc: &Allocation,
    task: Option<&str>,
    port_label: &str,
) -> Result<ServiceAddress, AddressError> {
    let networks = networks(alloc, task);
    if port_label.is_empty() {
        // Nomad's pre-0.7.1 behaviour: the only network's IP and no port, else nothing.
        return Ok(match networks.as_slice() {
            [only] => ServiceAddress {
                address: only.ip.clone(),
                port: 0,
            },
            _ => ServiceAddress {
                address: String::new(),
                port: 0,
            },
        });
    }
    if let Some(mapping) = alloc.allocated_resources.as_ref().and_then(|resources| {
        resources
            .shared
            .ports
            .iter()
            .find(|p| p.label == port_label)
    }) {
        return Ok(ServiceAddress {
            address: mapping.host_ip.clone(),
            port: mapping.value,
        });
    }
    for network in &networks {
        let port = network
            .reserved_ports
            .iter()
            .chain(&network.dynamic_ports)
            .find(|port| port.label == port_label);
        if let Some(port) = port.filter(|port| port.value > 0) {
            return Ok(ServiceAddress {
                address: network.ip.clone(),
                port: port.value,
            });
        }
    }
    // A number: the node's address (left empty here) and that port.
    Ok(ServiceAddress {
        address: String::new(),
        port: numeric_port(port_label)?,
    })
}

fn alloc_address(alloc: &Allocation, port_label: &str) -> Result<ServiceAddress, AddressError> {
    let address = alloc
        .network_status
        .as_ref()
        .and_then(|status| status.get("Address"))
        .and_then(|address| address.as_str())
        .filter(|address| !address.is_empty())
        .ok_or(AddressError::NoAllocNetwork)?
        .to_owned();
    if port_label.is_empty() {
        return Ok(ServiceAddress { address, port: 0 });
    }
    if let Some(mapping) = alloc.allocated_resources.as_ref().and_then(|resources| {
        resources
            .shared
            .ports
            .iter()
            .find(|p| p.label == port_label)
    }) {
        let port = if mapping.to > 0 {
            mapping.to
        } else {
            mapping.value
        };
        return Ok(ServiceAddress { address, port });
    }
    Ok(ServiceAddress {
        address,
        port: numeric_port(port_label)?,
    })
}

fn numeric_port(label: &str) -> Result<i64, AddressError> {
    let port: i64 = label.parse().map_err(|_| AddressError::UnknownPortLabel {
        label: label.to_owned(),
    })?;
    if port <= 0 {
        return Err(AddressError::InvalidPort {
            label: label.to_owned(),
        });
    }
    Ok(port)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alloc::{AllocatedPortMapping, AllocatedResources};

    fn alloc_with_port(label: &str, value: i64, to: i64) -> Allocation {
        let mut resources = AllocatedResources::default();
        resources.shared.ports.push(AllocatedPortMapping {
            label: label.to_owned(),
            value,
            to,
            host_ip: "10.0.0.5".to_owned(),
        });
        Allocation {
            allocated_resources: Some(resources),
            ..Allocation::default()
        }
    }

    #[test]
    fn a_labelled_port_in_host_mode_is_the_host_ip_and_host_port() {
        let alloc = alloc_with_port("http", 23456, 8080);
        for mode in ["", "auto", "host"] {
            let resolved = resolve_service_address(&alloc, None, "http", mode, "", None).unwrap();
            assert_eq!(
                resolved,
                ServiceAddress {
                    address: "10.0.0.5".into(),
                    port: 23456
                }
            );
        }
    }

    #[test]
    fn a_numeric_port_in_host_mode_leaves_the_address_to_the_node() {
        let alloc = alloc_with_port("http", 23456, 0);
        let resolved = resolve_service_address(&alloc, None, "9000", "host", "", None).unwrap();
        assert_eq!(resolved.address, "");
        assert_eq!(resolved.port, 9000);
        let error = resolve_service_address(&alloc, None, "nope", "host", "", None).unwrap_err();
        assert_eq!(
            error.to_string(),
            "invalid port \"nope\": port label not found"
        );
        let error = resolve_service_address(&alloc, None, "-1", "host", "", None).unwrap_err();
        assert!(matches!(error, AddressError::InvalidPort { .. }));
    }

    #[test]
    fn alloc_mode_uses_the_network_status_address_and_the_inside_port() {
        let mut alloc = alloc_with_port("http", 23456, 8080);
        let error = resolve_service_address(&alloc, None, "http", "alloc", "", None).unwrap_err();
        assert_eq!(error, AddressError::NoAllocNetwork);
        alloc.network_status = Some(serde_json::json!({"Address": "172.26.64.3"}));
        let resolved = resolve_service_address(&alloc, None, "http", "alloc", "", None).unwrap();
        assert_eq!(resolved.address, "172.26.64.3");
        assert_eq!(resolved.port, 8080);
    }

    #[test]
    fn driver_mode_needs_a_driver_network_and_auto_follows_its_advertise_flag() {
        let alloc = alloc_with_port("http", 23456, 8080);
        let error = resolve_service_address(&alloc, None, "http", "driver", "", None).unwrap_err();
        assert_eq!(error, AddressError::NoDriverNetwork);
        let network = DriverNetwork {
            ip: "172.17.0.2".into(),
            auto_advertise: true,
            port_map: [("http".to_owned(), 80), ("db".to_owned(), 5432)]
                .into_iter()
                .collect(),
        };
        // Nomad's order: a group port's `to`, then the driver's port map, then a number.
        let resolved =
            resolve_service_address(&alloc, None, "http", "auto", "", Some(&network)).unwrap();
        assert_eq!(
            (resolved.address.as_str(), resolved.port),
            ("172.17.0.2", 8080)
        );
        let resolved =
            resolve_service_address(&alloc, None, "db", "driver", "", Some(&network)).unwrap();
        assert_eq!(resolved.port, 5432);
        let resolved =
            resolve_service_address(&alloc, None, "9090", "driver", "", Some(&network)).unwrap();
        assert_eq!(resolved.port, 9090);
    }

    #[test]
    fn an_address_override_keeps_the_port() {
        let alloc = alloc_with_port("http", 23456, 8080);
        let resolved =
            resolve_service_address(&alloc, None, "http", "host", "example.internal", None)
                .unwrap();
        assert_eq!(resolved.address, "example.internal");
        assert_eq!(resolved.port, 23456);
    }

    #[test]
    fn registration_ids_follow_nomads_shape() {
        assert_eq!(
            service_registration_id("a1", "group-web", "frontend", "http"),
            "_nomad-task-a1-group-web-frontend-http"
        );
    }
}
