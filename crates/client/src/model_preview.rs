//! Interim copies of the few `drover-structs` types this half of the client touches, kept only
//! until the data-model crate lands on `main`; then this module is deleted and the imports point
//! at `drover_structs`. Not a data model of its own.
#![allow(dead_code)]

use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AllocClientStatus {
    #[default]
    Pending,
    Running,
    Complete,
    Failed,
    Lost,
    Unknown,
}

impl AllocClientStatus {
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Complete | Self::Failed | Self::Lost)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AllocDesiredStatus {
    #[default]
    Run,
    Stop,
    Evict,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct TaskState {
    pub state: String,
    pub failed: bool,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Allocation {
    pub id: String,
    pub node_id: String,
    pub name: String,
    pub task_group: String,
    pub desired_status: AllocDesiredStatus,
    pub client_status: AllocClientStatus,
    pub client_description: String,
    pub task_states: BTreeMap<String, TaskState>,
    pub modify_index: u64,
    pub alloc_modify_index: u64,
}

impl Allocation {
    pub fn server_terminal_status(&self) -> bool {
        matches!(
            self.desired_status,
            AllocDesiredStatus::Stop | AllocDesiredStatus::Evict
        )
    }
    pub fn terminal_status(&self) -> bool {
        self.server_terminal_status() || self.client_status.is_terminal()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NodeStatus {
    #[default]
    Initializing,
    Ready,
    Down,
    Disconnected,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct DriverInfo {
    pub attributes: BTreeMap<String, String>,
    pub detected: bool,
    pub healthy: bool,
    pub health_description: String,
    pub update_time: String,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct NodeCpuResources {
    pub cpu_shares: i64,
    pub total_cpu_cores: u32,
    pub reservable_cpu_cores: Vec<u16>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct NodeMemoryResources {
    pub memory_mb: i64,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct NodeDiskResources {
    pub disk_mb: i64,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct NodeResources {
    pub cpu: NodeCpuResources,
    pub memory: NodeMemoryResources,
    pub disk: NodeDiskResources,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Node {
    pub id: String,
    pub secret_id: String,
    pub datacenter: String,
    pub name: String,
    pub http_addr: String,
    pub attributes: BTreeMap<String, String>,
    pub meta: BTreeMap<String, String>,
    pub node_resources: NodeResources,
    pub drivers: BTreeMap<String, DriverInfo>,
    pub status: NodeStatus,
}
