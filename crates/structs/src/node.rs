//! Client nodes (`nomad/structs.Node`) and their list stub, resources, drivers and events.
//!
//! Not here: fingerprinting (the client does that) or heartbeats (the server).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::job::{NetworkResource, Resources};
use crate::lenient::wire_struct;
use crate::time::{DurationNs, Timestamp};

/// Node statuses.
pub const NODE_STATUS_INITIALIZING: &str = "initializing";
pub const NODE_STATUS_READY: &str = "ready";
pub const NODE_STATUS_DOWN: &str = "down";
pub const NODE_STATUS_DISCONNECTED: &str = "disconnected";

/// Node scheduling eligibility.
pub const NODE_SCHEDULING_ELIGIBLE: &str = "eligible";
pub const NODE_SCHEDULING_INELIGIBLE: &str = "ineligible";

wire_struct! {
    /// A host volume the client's `host_volume "name" { path read_only }` declares, as the
    /// node advertises it (`Node.HostVolumes`, keyed by name).
    pub struct ClientHostVolumeConfig {
        pub name: String,
        pub path: String,
        pub read_only: bool,
    }
}

wire_struct! {
    /// A client node. `SecretID` is blanked before a node is sent out.
    pub struct Node {
        #[serde(rename = "ID")]
        pub id: String,
        #[serde(rename = "SecretID")]
        pub secret_id: String,
        pub datacenter: String,
        pub name: String,
        /// The agent's HTTP address (`127.0.0.1:4646`); the CLI connects there directly.
        #[serde(rename = "HTTPAddr")]
        pub http_addr: String,
        #[serde(rename = "TLSEnabled")]
        pub tls_enabled: bool,
        pub node_pool: String,
        pub node_class: String,
        pub computed_class: String,
        pub attributes: BTreeMap<String, String>,
        pub meta: BTreeMap<String, String>,
        pub node_resources: Option<NodeResources>,
        pub reserved_resources: Option<NodeReservedResources>,
        /// Legacy totals (Nomad before 0.9 and its 1.x CLIs read them; `node status <id>`
        /// dereferences both). Derived from `NodeResources` and `ReservedResources` in the
        /// API's view ([`Node::sanitized`]), never stored.
        pub resources: Option<Resources>,
        pub reserved: Option<Resources>,
        pub links: BTreeMap<String, String>,
        pub drain_strategy: Option<DrainStrategy>,
        /// The legacy drain flag, true while a drain strategy is set.
        pub drain: bool,
        pub scheduling_eligibility: String,
        pub status: String,
        pub status_description: String,
        /// Unix seconds.
        pub status_updated_at: i64,
        pub events: Vec<NodeEvent>,
        pub drivers: BTreeMap<String, DriverInfo>,
        pub host_volumes: BTreeMap<String, ClientHostVolumeConfig>,
        pub host_networks: BTreeMap<String, Value>,
        pub last_drain: Option<DrainMetadata>,
        /// The index at which the node last stopped heartbeating (went `disconnected` or
        /// `down`); zero once it is `ready` again.
        pub last_missed_heartbeat_index: u64,
        /// The index of the node's last allocation report while it was not `ready`: a node
        /// back from a missed heartbeat stays `initializing` until this passes
        /// `LastMissedHeartbeatIndex`. Reports of a ready node leave it alone, so they cost
        /// no write of the node.
        pub last_alloc_update_index: u64,
        pub create_index: u64,
        pub modify_index: u64,
    }
}

/// `LastDrain.Status` values.
pub const DRAIN_STATUS_DRAINING: &str = "draining";
pub const DRAIN_STATUS_COMPLETE: &str = "complete";
pub const DRAIN_STATUS_CANCELED: &str = "canceled";

wire_struct! {
    /// What an operator asks of a drain (`DrainSpec`): `Deadline` below zero forces the drain
    /// now, zero means no deadline.
    pub struct DrainSpec {
        pub deadline: DurationNs,
        pub ignore_system_jobs: bool,
    }
}

wire_struct! {
    /// A node's drain (`DrainStrategy`, Nomad's `DrainSpec` embedded, so its fields sit at the
    /// top level): `ForceDeadline` is when everything left is stopped (zero time without a
    /// positive deadline).
    pub struct DrainStrategy {
        pub deadline: DurationNs,
        pub ignore_system_jobs: bool,
        pub force_deadline: Timestamp,
        pub started_at: Timestamp,
    }
}

impl DrainStrategy {
    /// Whether everything left must go now (`Deadline < 0`) or by a deadline that has passed.
    pub fn forced_at(&self, now_unix_ns: i64) -> bool {
        if self.deadline.as_nanos() < 0 {
            return true;
        }
        self.deadline.as_nanos() > 0
            && self
                .force_deadline
                .unix_nanos()
                .is_some_and(|deadline| deadline <= now_unix_ns)
    }
}

wire_struct! {
    /// The node's most recent drain (`LastDrain`).
    pub struct DrainMetadata {
        pub started_at: Timestamp,
        pub updated_at: Timestamp,
        pub status: String,
        #[serde(rename = "AccessorID")]
        pub accessor_id: String,
        pub meta: Option<BTreeMap<String, String>>,
    }
}

/// Nomad keeps a node's ten most recent events.
pub const MAX_NODE_EVENTS: usize = 10;

impl Node {
    /// Appends `event`, stamped with the write's `index`, keeping the newest
    /// [`MAX_NODE_EVENTS`].
    pub fn append_event(&mut self, mut event: NodeEvent, index: u64) {
        event.create_index = index;
        self.events.push(event);
        if self.events.len() > MAX_NODE_EVENTS {
            let excess = self.events.len() - MAX_NODE_EVENTS;
            self.events.drain(..excess);
        }
    }

    /// A "Driver" event for each driver whose health or health description differs from
    /// `previous`'s, with the new description as its message and the driver's name in its
    /// details, as Nomad's client emits one when a fingerprint finds the change. A driver
    /// `previous` did not have, or a change to an empty description, makes none (Nomad's rule).
    ///
    /// The server compares a re-registration with the record it holds (drover's client has no
    /// separate event call), so a health that changed while the agent was down also leaves an
    /// event when it comes back; Nomad's restarted client starts from an empty record and
    /// reports none for its first fingerprint.
    pub fn driver_health_events(&self, previous: &Node, now_unix_ns: i64) -> Vec<NodeEvent> {
        self.drivers
            .iter()
            .filter(|(_, info)| !info.health_description.is_empty())
            .filter(|(name, info)| {
                previous.drivers.get(*name).is_some_and(|before| {
                    before.healthy != info.healthy
                        || before.health_description != info.health_description
                })
            })
            .map(|(name, info)| NodeEvent {
                message: info.health_description.clone(),
                subsystem: "Driver".to_owned(),
                details: BTreeMap::from([("driver".to_owned(), name.clone())]),
                timestamp: Timestamp::from_unix_nanos(now_unix_ns),
                create_index: 0,
            })
            .collect()
    }

    /// Whether the node stopped heartbeating (`down` or `disconnected`; Nomad's
    /// `UnresponsiveStatus`): its allocation reports are refused until it heartbeats.
    pub fn unresponsive(&self) -> bool {
        self.status == NODE_STATUS_DOWN || self.status == NODE_STATUS_DISCONNECTED
    }

    /// Whether the scheduler may place allocations here.
    pub fn ready_for_scheduling(&self) -> bool {
        self.status == NODE_STATUS_READY
            && self.drain_strategy.is_none()
            && self.scheduling_eligibility == NODE_SCHEDULING_ELIGIBLE
    }

    /// The node as the API shows it: `SecretID` blanked, the legacy `Resources` and `Reserved`
    /// filled in.
    pub fn sanitized(&self) -> Node {
        let (resources, reserved) = self.legacy_resources();
        Node {
            secret_id: String::new(),
            resources,
            reserved,
            ..self.clone()
        }
    }

    /// The legacy `Resources` (what the node has) and `Reserved` (what it keeps back) Nomad
    /// derives from the node's resources; `None` when the node reported none.
    fn legacy_resources(&self) -> (Option<Resources>, Option<Resources>) {
        let Some(node) = &self.node_resources else {
            return (None, None);
        };
        let resources = Resources {
            cpu: node.cpu.cpu_shares,
            memory_mb: node.memory.memory_mb,
            disk_mb: node.disk.disk_mb,
            networks: node.networks.clone(),
            ..Resources::default()
        };
        let reserved =
            self.reserved_resources
                .as_ref()
                .map_or_else(Resources::default, |reserved| Resources {
                    cpu: reserved.cpu.cpu_shares,
                    memory_mb: reserved.memory.memory_mb,
                    disk_mb: reserved.disk.disk_mb,
                    ..Resources::default()
                });
        (Some(resources), Some(reserved))
    }

    /// The list form. `include_attributes` is the API's `os=true` (Nomad then lists one
    /// attribute, `os.name`), `include_resources` its `resources=true`.
    pub fn stub_with(&self, include_attributes: bool, include_resources: bool) -> NodeListStub {
        NodeListStub {
            address: self
                .attributes
                .get("unique.network.ip-address")
                .cloned()
                .unwrap_or_default(),
            id: self.id.clone(),
            attributes: include_attributes.then(|| {
                BTreeMap::from([(
                    "os.name".to_owned(),
                    self.attributes.get("os.name").cloned().unwrap_or_default(),
                )])
            }),
            datacenter: self.datacenter.clone(),
            name: self.name.clone(),
            node_pool: self.node_pool.clone(),
            node_class: self.node_class.clone(),
            version: self
                .attributes
                .get("nomad.version")
                .cloned()
                .unwrap_or_default(),
            drain: self.drain_strategy.is_some(),
            scheduling_eligibility: self.scheduling_eligibility.clone(),
            status: self.status.clone(),
            status_description: self.status_description.clone(),
            drivers: self.drivers.clone(),
            host_volumes: self.host_volumes.clone(),
            node_resources: if include_resources {
                self.node_resources.clone()
            } else {
                None
            },
            reserved_resources: if include_resources {
                self.reserved_resources.clone()
            } else {
                None
            },
            last_drain: self.last_drain.clone(),
            create_index: self.create_index,
            modify_index: self.modify_index,
        }
    }

    /// The list form without attributes or resources.
    pub fn stub(&self) -> NodeListStub {
        self.stub_with(false, false)
    }
}

wire_struct! {
    /// A node in list responses.
    pub struct NodeListStub {
        pub address: String,
        #[serde(rename = "ID")]
        pub id: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub attributes: Option<BTreeMap<String, String>>,
        pub datacenter: String,
        pub name: String,
        pub node_pool: String,
        pub node_class: String,
        pub version: String,
        pub drain: bool,
        pub scheduling_eligibility: String,
        pub status: String,
        pub status_description: String,
        pub drivers: BTreeMap<String, DriverInfo>,
        pub host_volumes: BTreeMap<String, ClientHostVolumeConfig>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub node_resources: Option<NodeResources>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub reserved_resources: Option<NodeReservedResources>,
        pub last_drain: Option<DrainMetadata>,
        pub create_index: u64,
        pub modify_index: u64,
    }
}

wire_struct! {
    /// What a node offers.
    pub struct NodeResources {
        pub cpu: NodeCpuResources,
        pub memory: NodeMemoryResources,
        pub disk: NodeDiskResources,
        pub networks: Vec<NetworkResource>,
        pub node_networks: Vec<Value>,
        pub devices: Vec<Value>,
        pub min_dynamic_port: i64,
        pub max_dynamic_port: i64,
    }
}

wire_struct! {
    pub struct NodeCpuResources {
        /// Total MHz.
        pub cpu_shares: i64,
        pub total_cpu_cores: i64,
        pub reservable_cpu_cores: Vec<u16>,
    }
}

wire_struct! {
    pub struct NodeMemoryResources {
        #[serde(rename = "MemoryMB")]
        pub memory_mb: i64,
    }
}

wire_struct! {
    pub struct NodeDiskResources {
        #[serde(rename = "DiskMB")]
        pub disk_mb: i64,
    }
}

wire_struct! {
    /// What a node keeps back from scheduling.
    pub struct NodeReservedResources {
        pub cpu: NodeReservedCpuResources,
        pub memory: NodeMemoryResources,
        pub disk: NodeDiskResources,
        pub networks: NodeReservedNetworkResources,
    }
}

wire_struct! {
    pub struct NodeReservedCpuResources {
        pub cpu_shares: i64,
        pub reserved_cpu_cores: Vec<u16>,
    }
}

wire_struct! {
    pub struct NodeReservedNetworkResources {
        pub reserved_host_ports: String,
    }
}

wire_struct! {
    /// A task driver as fingerprinted on a node.
    pub struct DriverInfo {
        pub attributes: BTreeMap<String, String>,
        pub detected: bool,
        pub healthy: bool,
        pub health_description: String,
        pub update_time: Timestamp,
    }
}

wire_struct! {
    /// Something that happened to a node.
    pub struct NodeEvent {
        pub message: String,
        pub subsystem: String,
        pub details: BTreeMap<String, String>,
        pub timestamp: Timestamp,
        pub create_index: u64,
    }
}
