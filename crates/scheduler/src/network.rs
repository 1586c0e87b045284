//! Host ports for a group's `network` block: static (`reserved`) ports must be free on the node,
//! dynamic ports are picked from the node's dynamic range (20000–32000 unless the node says
//! otherwise) avoiding every port already used there — by other allocations, by the node's
//! reserved host ports, and by this allocation's own asks. As Nomad's `NetworkIndex.AssignPorts`
//! for the node's default address; a static port that sets `ignore_collision` is given even
//! when it is in use. Named host networks and group bandwidth are not modelled
//! (Nomad ignores a group's `mbits` too).
//!
//! A task's own (deprecated) network is Nomad's `NetworkIndex.AssignTaskNetwork`: the first
//! address of the node's fingerprinted networks (`NodeResources.Networks`, those with a device)
//! whose device still has the bandwidth the task's `mbits` asks (the device's `MBits` less what
//! every allocation's task networks hold there) and where its static ports are free gets the
//! task's ports. Every port of an allocation, group or task, counts as used on the node (Nomad
//! forgets an allocation's task-network ports and bandwidth when it also has group ports; drover
//! does not, so they never collide).
//!
//! Not here: whether the group fits otherwise (`select`).

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use drover_structs::{AllocatedPortMapping, Allocation, NetworkResource, Node, Port};

use crate::rng::SeededRng;

/// Nomad's default dynamic port range.
pub const DEFAULT_MIN_DYNAMIC_PORT: i64 = 20_000;
pub const DEFAULT_MAX_DYNAMIC_PORT: i64 = 32_000;
const MAX_VALID_PORT: i64 = 65_536;
/// Random tries before scanning the range in order.
const STOCHASTIC_TRIES: usize = 20;

/// The ports given to one allocation: the mappings (`AllocatedResources.Shared.Ports`) and the
/// group network with its port values filled in (`Shared.Networks`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PortOffer {
    pub ports: Vec<AllocatedPortMapping>,
    pub networks: Vec<NetworkResource>,
}

/// Every host port an allocation holds.
pub fn alloc_ports(alloc: &Allocation) -> Vec<i64> {
    let Some(allocated) = alloc.allocated_resources.as_ref() else {
        return Vec::new();
    };
    let network_ports = |network: &NetworkResource| {
        network
            .reserved_ports
            .iter()
            .chain(network.dynamic_ports.iter())
            .map(|port| port.value)
            .collect::<Vec<_>>()
    };
    let mut ports: Vec<i64> = allocated
        .shared
        .ports
        .iter()
        .map(|port| port.value)
        .collect();
    ports.extend(allocated.shared.networks.iter().flat_map(network_ports));
    ports.extend(
        allocated
            .tasks
            .values()
            .flat_map(|task| task.networks.iter().flat_map(network_ports)),
    );
    ports.retain(|port| *port > 0);
    ports.sort_unstable();
    ports.dedup();
    ports
}

/// Parses Nomad's port list syntax (`"22,80,8000-8100"`); malformed parts are skipped.
pub fn parse_port_ranges(spec: &str) -> Vec<i64> {
    let mut ports = Vec::new();
    for part in spec
        .split(',')
        .map(str::trim)
        .filter(|part| !part.is_empty())
    {
        match part.split_once('-') {
            Some((low, high)) => {
                if let (Ok(low), Ok(high)) = (low.trim().parse::<i64>(), high.trim().parse::<i64>())
                    && low <= high
                    && high < MAX_VALID_PORT
                {
                    ports.extend(low..=high);
                }
            }
            None => {
                if let Ok(port) = part.parse::<i64>() {
                    ports.push(port);
                }
            }
        }
    }
    ports
}

/// The address ports are offered on: the node's first network with an IP, else its
/// `unique.network.ip-address` attribute, else loopback.
pub fn node_address(node: &Node) -> String {
    node.node_resources
        .as_ref()
        .and_then(|resources| {
            resources
                .networks
                .iter()
                .find(|network| !network.ip.is_empty())
                .map(|network| network.ip.clone())
        })
        .or_else(|| node.attributes.get("unique.network.ip-address").cloned())
        .unwrap_or_else(|| "127.0.0.1".to_string())
}

/// The node's dynamic port range.
fn dynamic_port_range(node: &Node) -> (i64, i64) {
    match node.node_resources.as_ref() {
        Some(resources)
            if resources.min_dynamic_port > 0
                && resources.max_dynamic_port >= resources.min_dynamic_port =>
        {
            (resources.min_dynamic_port, resources.max_dynamic_port)
        }
        _ => (DEFAULT_MIN_DYNAMIC_PORT, DEFAULT_MAX_DYNAMIC_PORT),
    }
}

/// The ports in use on `node`: those of its allocations and its reserved host ports.
fn node_used_ports(node: &Node, used_by_allocs: &BTreeSet<i64>) -> BTreeSet<i64> {
    let mut used: BTreeSet<i64> = used_by_allocs.clone();
    if let Some(reserved) = node.reserved_resources.as_ref() {
        used.extend(parse_port_ranges(&reserved.networks.reserved_host_ports));
    }
    used
}

/// Assigns the group's ports on `node`, given the ports already in use there. `Err` carries the
/// metric dimension, such as `"network: reserved port collision http=8080"`.
pub fn assign_ports(
    node: &Node,
    asks: &[NetworkResource],
    used_by_allocs: &BTreeSet<i64>,
    rng: &mut SeededRng,
) -> Result<PortOffer, String> {
    let mut used = node_used_ports(node, used_by_allocs);
    let (min_port, max_port) = dynamic_port_range(node);
    let address = node_address(node);
    let mut offer = PortOffer::default();
    for ask in asks {
        let mut network = ask.clone();
        network.ip = address.clone();
        // Static ports of every ask are held before any dynamic port is picked.
        for port in &mut network.reserved_ports {
            if port.value < 0 || port.value >= MAX_VALID_PORT {
                return Err(format!(
                    "network: invalid port {} (out of range)",
                    port.value
                ));
            }
            // A port that ignores collisions may take a value in use (Nomad's
            // `ignore_collision`, for tasks that share it with SO_REUSEPORT); it still counts as
            // used for every other ask.
            if !used.insert(port.value) && !port.ignore_collision {
                return Err(format!(
                    "network: reserved port collision {}={}",
                    port.label, port.value
                ));
            }
            offer.ports.push(mapping(port, &address));
        }
        offer.networks.push(network);
    }
    for network in &mut offer.networks {
        for port in &mut network.dynamic_ports {
            let value = pick_dynamic_port(&used, min_port, max_port, rng)
                .ok_or_else(|| "network: dynamic port selection failed".to_string())?;
            used.insert(value);
            port.value = value;
            if port.to == -1 {
                port.to = value;
            }
            offer.ports.push(mapping(port, &address));
        }
    }
    Ok(offer)
}

/// Bandwidth (MBits) an allocation's task networks hold, per node network device.
pub fn alloc_bandwidth(alloc: &Allocation) -> BTreeMap<String, i64> {
    let mut held = BTreeMap::new();
    if let Some(allocated) = alloc.allocated_resources.as_ref() {
        for task in allocated.tasks.values() {
            // Nomad reserves only a task's first network.
            if let Some(network) = task.networks.first() {
                *held.entry(network.device.clone()).or_insert(0) += network.mbits;
            }
        }
    }
    held
}

/// At most this many addresses of one node network are tried (a fingerprinted network is a
/// single address, `/32` or `/128`).
const MAX_ADDRESSES_PER_NETWORK: u128 = 65_536;

/// The addresses of a node network's `CIDR`, lowest first; none when it does not parse.
fn cidr_addresses(cidr: &str) -> Vec<IpAddr> {
    let Some((address, prefix)) = cidr.split_once('/') else {
        return Vec::new();
    };
    let (Ok(address), Ok(prefix)) = (address.parse::<IpAddr>(), prefix.parse::<u32>()) else {
        return Vec::new();
    };
    let (bits, value) = match address {
        IpAddr::V4(v4) => (32, u128::from(u32::from(v4))),
        IpAddr::V6(v6) => (128, u128::from(v6)),
    };
    if prefix > bits {
        return Vec::new();
    }
    let host_bits = bits - prefix;
    let size = if host_bits >= 128 {
        u128::MAX
    } else {
        1u128 << host_bits
    };
    let first = value & !(size - 1);
    (0..size.min(MAX_ADDRESSES_PER_NETWORK))
        .filter_map(|offset| {
            let candidate = first.checked_add(offset)?;
            Some(match address {
                IpAddr::V4(_) => {
                    IpAddr::V4(std::net::Ipv4Addr::from(u32::try_from(candidate).ok()?))
                }
                IpAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::from(candidate)),
            })
        })
        .collect()
}

/// Assigns a task's own network (its `resources { network { … } }`) on `node`, as Nomad's
/// `AssignTaskNetwork`: `used_ports` are the ports already taken there (by allocations and by
/// this placement's earlier asks), `used_bandwidth` the MBits held per device. The offer
/// carries the device, the address, the ask's mbits and its ports with the dynamic ones
/// picked. `Err` carries the metric dimension, such as `"network: bandwidth exceeded"`.
pub fn assign_task_network(
    node: &Node,
    ask: &NetworkResource,
    used_ports: &BTreeSet<i64>,
    used_bandwidth: &BTreeMap<String, i64>,
    rng: &mut SeededRng,
) -> Result<NetworkResource, String> {
    let used = node_used_ports(node, used_ports);
    let (min_port, max_port) = dynamic_port_range(node);
    let mut failure = "no networks available".to_string();
    let node_networks = node
        .node_resources
        .as_ref()
        .map(|resources| resources.networks.as_slice())
        .unwrap_or_default();
    for network in node_networks
        .iter()
        .filter(|network| !network.device.is_empty())
    {
        for address in cidr_addresses(&network.cidr) {
            let held = used_bandwidth.get(&network.device).copied().unwrap_or(0);
            if held + ask.mbits > network.mbits {
                failure = "bandwidth exceeded".to_string();
                continue;
            }
            if let Some(problem) = ask.reserved_ports.iter().find_map(|port| {
                if port.value < 0 || port.value >= MAX_VALID_PORT {
                    Some(format!("invalid port {} (out of range)", port.value))
                } else if used.contains(&port.value) {
                    Some(format!(
                        "reserved port collision {}={}",
                        port.label, port.value
                    ))
                } else {
                    None
                }
            }) {
                failure = problem;
                continue;
            }
            let mut taken = used.clone();
            taken.extend(ask.reserved_ports.iter().map(|port| port.value));
            let mut offer = NetworkResource {
                mode: ask.mode.clone(),
                device: network.device.clone(),
                ip: address.to_string(),
                mbits: ask.mbits,
                dns: ask.dns.clone(),
                reserved_ports: ask.reserved_ports.clone(),
                dynamic_ports: ask.dynamic_ports.clone(),
                ..NetworkResource::default()
            };
            let mut picked_all = true;
            for port in &mut offer.dynamic_ports {
                let Some(value) = pick_dynamic_port(&taken, min_port, max_port, rng) else {
                    picked_all = false;
                    break;
                };
                taken.insert(value);
                port.value = value;
                if port.to == -1 {
                    port.to = value;
                }
            }
            if !picked_all {
                failure = "dynamic port selection failed".to_string();
                continue;
            }
            return Ok(offer);
        }
    }
    Err(format!("network: {failure}"))
}

/// Every host port of a network offer.
pub fn network_ports(network: &NetworkResource) -> impl Iterator<Item = i64> + '_ {
    network
        .reserved_ports
        .iter()
        .chain(&network.dynamic_ports)
        .map(|port| port.value)
}

fn mapping(port: &Port, address: &str) -> AllocatedPortMapping {
    AllocatedPortMapping {
        label: port.label.clone(),
        value: port.value,
        to: port.to,
        host_ip: address.to_string(),
    }
}

fn pick_dynamic_port(
    used: &BTreeSet<i64>,
    min_port: i64,
    max_port: i64,
    rng: &mut SeededRng,
) -> Option<i64> {
    let span = (max_port - min_port + 1) as usize;
    for _ in 0..STOCHASTIC_TRIES {
        let candidate = min_port + rng.below(span) as i64;
        if !used.contains(&candidate) {
            return Some(candidate);
        }
    }
    (min_port..=max_port).find(|candidate| !used.contains(candidate))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::NodeBuilder;

    fn ask(reserved: &[(&str, i64)], dynamic: &[&str]) -> NetworkResource {
        NetworkResource {
            mode: "host".to_string(),
            reserved_ports: reserved
                .iter()
                .map(|(label, value)| Port {
                    label: label.to_string(),
                    value: *value,
                    ..Port::default()
                })
                .collect(),
            dynamic_ports: dynamic
                .iter()
                .map(|label| Port {
                    label: label.to_string(),
                    ..Port::default()
                })
                .collect(),
            ..NetworkResource::default()
        }
    }

    #[test]
    fn cidr_addresses_are_listed_lowest_first() {
        assert_eq!(
            cidr_addresses("10.0.0.5/32"),
            vec!["10.0.0.5".parse::<IpAddr>().unwrap()]
        );
        let four: Vec<String> = cidr_addresses("192.168.1.9/30")
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            four,
            ["192.168.1.8", "192.168.1.9", "192.168.1.10", "192.168.1.11"]
        );
        assert_eq!(cidr_addresses("::1/128").len(), 1);
        assert!(cidr_addresses("10.0.0.5").is_empty());
        assert!(cidr_addresses("10.0.0.5/33").is_empty());
        assert_eq!(
            cidr_addresses("10.0.0.0/8").len(),
            MAX_ADDRESSES_PER_NETWORK as usize
        );
    }

    #[test]
    fn port_ranges() {
        assert_eq!(
            parse_port_ranges("22, 80,8000-8002,x,9-1"),
            vec![22, 80, 8000, 8001, 8002]
        );
        assert!(parse_port_ranges("").is_empty());
    }

    #[test]
    fn static_and_dynamic_ports_are_assigned() {
        let node = NodeBuilder::new("n")
            .attribute("unique.network.ip-address", "10.0.0.5")
            .build();
        let offer = assign_ports(
            &node,
            &[ask(&[("http", 8080)], &["metrics", "admin"])],
            &BTreeSet::new(),
            &mut SeededRng::new(1),
        )
        .unwrap();
        assert_eq!(offer.ports.len(), 3);
        assert_eq!(
            offer.ports[0],
            AllocatedPortMapping {
                label: "http".into(),
                value: 8080,
                to: 0,
                host_ip: "10.0.0.5".into()
            }
        );
        let dynamic: Vec<i64> = offer.ports[1..].iter().map(|port| port.value).collect();
        assert!(
            dynamic
                .iter()
                .all(|port| (DEFAULT_MIN_DYNAMIC_PORT..=DEFAULT_MAX_DYNAMIC_PORT).contains(port))
        );
        assert_ne!(dynamic[0], dynamic[1]);
        assert_eq!(offer.networks[0].ip, "10.0.0.5");
        assert_eq!(offer.networks[0].dynamic_ports[0].value, dynamic[0]);
    }

    #[test]
    fn a_port_that_ignores_collisions_takes_a_value_in_use_and_others_still_avoid_it() {
        let node = NodeBuilder::new("n").build();
        let used = BTreeSet::from([8080]);
        let mut sharing = ask(&[("http", 8080)], &[]);
        sharing.reserved_ports[0].ignore_collision = true;
        let offer = assign_ports(&node, &[sharing], &used, &mut SeededRng::new(1))
            .expect("the port is shared");
        assert_eq!(offer.ports[0].value, 8080);
        // The same ask without it still collides.
        assert_eq!(
            assign_ports(
                &node,
                &[ask(&[("http", 8080)], &[])],
                &used,
                &mut SeededRng::new(1)
            ),
            Err("network: reserved port collision http=8080".to_string())
        );
    }

    #[test]
    fn collisions_and_exhaustion() {
        let node = NodeBuilder::new("n").build();
        let used = BTreeSet::from([8080]);
        assert_eq!(
            assign_ports(
                &node,
                &[ask(&[("http", 8080)], &[])],
                &used,
                &mut SeededRng::new(1)
            ),
            Err("network: reserved port collision http=8080".to_string())
        );
        let mut tiny = NodeBuilder::new("n").build();
        if let Some(resources) = tiny.node_resources.as_mut() {
            resources.min_dynamic_port = 30_000;
            resources.max_dynamic_port = 30_001;
        }
        let offer = assign_ports(
            &tiny,
            &[ask(&[], &["a", "b"])],
            &BTreeSet::new(),
            &mut SeededRng::new(1),
        )
        .unwrap();
        let mut values: Vec<i64> = offer.ports.iter().map(|port| port.value).collect();
        values.sort_unstable();
        assert_eq!(values, vec![30_000, 30_001]);
        assert_eq!(
            assign_ports(
                &tiny,
                &[ask(&[], &["a", "b", "c"])],
                &BTreeSet::new(),
                &mut SeededRng::new(1)
            ),
            Err("network: dynamic port selection failed".to_string())
        );
    }
}
