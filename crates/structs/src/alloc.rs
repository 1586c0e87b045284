//! Allocations (`nomad/structs.Allocation`): one placement of a task group on a node, its list
//! stub, the resources allocated to it, the scheduler's placement metrics and the reschedule
//! history.
//!
//! Not here: task states (see [`crate::task_state`]), which the client reports, or any decision
//! about when an allocation changes.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use crate::job::{Job, NetworkResource, Port, Resources, TaskLifecycleConfig};
use crate::lenient::wire_struct;
use crate::task_state::{
    ALLOC_CLIENT_STATUS_COMPLETE, ALLOC_CLIENT_STATUS_FAILED, ALLOC_CLIENT_STATUS_LOST, TaskState,
};
use crate::time::{DurationNs, Timestamp};

pub use crate::task_state::{
    ALLOC_CLIENT_STATUS_PENDING, ALLOC_CLIENT_STATUS_RUNNING, ALLOC_CLIENT_STATUS_UNKNOWN,
    derive_client_status,
};

/// Allocation desired statuses (set by the scheduler).
pub const ALLOC_DESIRED_STATUS_RUN: &str = "run";
pub const ALLOC_DESIRED_STATUS_STOP: &str = "stop";
pub const ALLOC_DESIRED_STATUS_EVICT: &str = "evict";

/// The `ClientDescription` (and the "Killing" events' display message) of an allocation its
/// client stopped for running past its group's `max_run_duration` (Nomad's
/// `AllocTimeoutReasonMaxRunDuration`).
pub const ALLOC_TIMEOUT_REASON_MAX_RUN_DURATION: &str = "allocation exceeded max_run_duration";

wire_struct! {
    /// One placement of a task group on a node.
    pub struct Allocation {
        #[serde(rename = "ID")]
        pub id: String,
        pub namespace: String,
        #[serde(rename = "EvalID")]
        pub eval_id: String,
        /// `<job>.<group>[<index>]`.
        pub name: String,
        #[serde(rename = "NodeID")]
        pub node_id: String,
        pub node_name: String,
        #[serde(rename = "JobID")]
        pub job_id: String,
        /// The job at the allocation's version. Never `None` on a read through the API; the event
        /// stream strips it. Shared: the allocations of one job version hold one copy.
        pub job: Option<Arc<Job>>,
        pub task_group: String,
        /// Legacy resource fields, kept for older clients.
        pub resources: Option<Resources>,
        pub shared_resources: Option<Resources>,
        pub task_resources: BTreeMap<String, Resources>,
        pub allocated_resources: Option<AllocatedResources>,
        pub metrics: Option<AllocMetric>,
        pub desired_status: String,
        pub desired_description: String,
        pub desired_transition: DesiredTransition,
        pub client_status: String,
        pub client_description: String,
        pub task_states: BTreeMap<String, TaskState>,
        pub alloc_states: Vec<Value>,
        #[serde(rename = "PreviousAllocation")]
        pub previous_allocation: String,
        pub next_allocation: String,
        #[serde(rename = "DeploymentID")]
        pub deployment_id: String,
        pub deployment_status: Option<AllocDeploymentStatus>,
        pub reschedule_tracker: Option<RescheduleTracker>,
        pub network_status: Option<Value>,
        #[serde(rename = "FollowupEvalID")]
        pub followup_eval_id: String,
        pub preempted_allocations: Vec<String>,
        pub preempted_by_allocation: String,
        #[serde(rename = "SigningKeyID")]
        pub signing_key_id: String,
        pub create_index: u64,
        pub modify_index: u64,
        pub alloc_modify_index: u64,
        /// Unix nanoseconds.
        pub create_time: i64,
        /// Unix nanoseconds.
        pub modify_time: i64,
    }
}

/// Whether a client status is terminal (`complete`, `failed` or `lost`).
pub fn is_terminal_client_status(client_status: &str) -> bool {
    matches!(
        client_status,
        ALLOC_CLIENT_STATUS_COMPLETE | ALLOC_CLIENT_STATUS_FAILED | ALLOC_CLIENT_STATUS_LOST
    )
}

impl Allocation {
    /// The job's type, or `""` without a job.
    pub fn job_type(&self) -> &str {
        self.job.as_deref().map_or("", |job| job.r#type.as_str())
    }

    /// The job's version, or 0 without a job.
    pub fn job_version(&self) -> u64 {
        self.job.as_deref().map_or(0, |job| job.version)
    }

    /// The group's `max_run_duration`, when it limits this allocation: set above zero, in a
    /// batch or sysbatch job (Nomad's `Allocation.MaxRunDuration`).
    pub fn max_run_duration(&self) -> Option<DurationNs> {
        let job = self.job.as_deref()?;
        if !matches!(
            job.r#type.as_str(),
            crate::job::JOB_TYPE_BATCH | crate::job::JOB_TYPE_SYSBATCH
        ) {
            return None;
        }
        job.lookup_task_group(&self.task_group)?
            .max_run_duration
            .filter(|limit| limit.as_nanos() > 0)
    }

    /// When, in Unix nanoseconds, the allocation has run too long: its `CreateTime` plus the
    /// group's `max_run_duration`. Anchored to the creation time, it stays the same across
    /// task restarts and agent restarts (Nomad's `MaxRunDurationDeadline`).
    pub fn max_run_deadline_unix_nanos(&self) -> Option<i64> {
        let limit = self.max_run_duration()?;
        (self.create_time != 0).then(|| self.create_time.saturating_add(limit.as_nanos()))
    }

    /// Whether the server wants the allocation stopped (`stop` or `evict`).
    pub fn server_terminal_status(&self) -> bool {
        matches!(
            self.desired_status.as_str(),
            ALLOC_DESIRED_STATUS_STOP | ALLOC_DESIRED_STATUS_EVICT
        )
    }

    /// Takes the fields a client owns from its report `update`, written at `index`: the
    /// client status and its description, the task states, the network status when it reports
    /// one, and of its deployment status only `Healthy` and `Timestamp`, when they are news
    /// (then `DeploymentStatus.ModifyIndex` becomes `index`; `Canary` stays the server's, as
    /// Nomad). Everything else (desired state, indexes, the job) stays the server's.
    pub fn merge_client_update(&mut self, update: Allocation, index: u64) {
        self.client_status = update.client_status;
        self.client_description = update.client_description;
        self.task_states = update.task_states;
        match (&mut self.deployment_status, update.deployment_status) {
            (Some(existing), Some(reported)) => {
                if reported.healthy.is_some() && reported.healthy != existing.healthy {
                    existing.healthy = reported.healthy;
                    existing.timestamp = reported.timestamp;
                    existing.modify_index = index;
                }
            }
            (existing @ None, Some(mut reported)) => {
                reported.modify_index = index;
                *existing = Some(reported);
            }
            (_, None) => {}
        }
        if update.network_status.is_some() {
            self.network_status = update.network_status;
        }
    }

    /// Whether the client has finished with the allocation.
    pub fn client_terminal_status(&self) -> bool {
        is_terminal_client_status(&self.client_status)
    }

    /// Terminal if either the server or the client says so.
    pub fn terminal_status(&self) -> bool {
        self.server_terminal_status() || self.client_terminal_status()
    }

    /// Sets the legacy `Resources` total Nomad still returns for older clients (the 1.1 CLI's
    /// `alloc status` reads its `DiskMB`): the sum of the legacy `TaskResources` and the
    /// group's `SharedResources`, networks on one address merged.
    pub fn fill_legacy_total_resources(&mut self) {
        let mut total = Resources::default();
        for task in self.task_resources.values() {
            total.add(task);
        }
        if let Some(shared) = &self.shared_resources {
            total.add(shared);
        }
        self.resources = Some(total);
    }

    /// The allocation's index within its group, parsed from the `[n]` suffix of its name.
    pub fn index(&self) -> Option<u64> {
        let open = self.name.rfind('[')?;
        self.name.strip_suffix(']')?.get(open + 1..)?.parse().ok()
    }

    /// Fills in `DisplayMessage` on every task event (Nomad does this on read).
    pub fn populate_display_messages(&mut self) {
        for task_state in self.task_states.values_mut() {
            task_state.populate_display_messages();
        }
    }

    /// The list form. `include_task_states` false gives `TaskStates: null` (the API's
    /// `task_states=false`); `include_resources` adds `AllocatedResources` (`resources=true`).
    pub fn stub_with(&self, include_task_states: bool, include_resources: bool) -> AllocListStub {
        AllocListStub {
            id: self.id.clone(),
            eval_id: self.eval_id.clone(),
            name: self.name.clone(),
            namespace: self.namespace.clone(),
            node_id: self.node_id.clone(),
            node_name: self.node_name.clone(),
            job_id: self.job_id.clone(),
            job_type: self.job_type().to_string(),
            job_version: self.job_version(),
            task_group: self.task_group.clone(),
            allocated_resources: if include_resources {
                self.allocated_resources.clone()
            } else {
                None
            },
            desired_status: self.desired_status.clone(),
            desired_description: self.desired_description.clone(),
            client_status: self.client_status.clone(),
            client_description: self.client_description.clone(),
            desired_transition: self.desired_transition.clone(),
            task_states: include_task_states.then(|| self.task_states.clone()),
            deployment_status: self.deployment_status.clone(),
            followup_eval_id: self.followup_eval_id.clone(),
            next_allocation: self.next_allocation.clone(),
            reschedule_tracker: self.reschedule_tracker.clone(),
            preempted_allocations: self.preempted_allocations.clone(),
            preempted_by_allocation: self.preempted_by_allocation.clone(),
            create_index: self.create_index,
            modify_index: self.modify_index,
            create_time: self.create_time,
            modify_time: self.modify_time,
        }
    }

    /// The list form with task states and without resources (the API's default).
    pub fn stub(&self) -> AllocListStub {
        self.stub_with(true, false)
    }
}

wire_struct! {
    /// An allocation in list responses.
    pub struct AllocListStub {
        #[serde(rename = "ID")]
        pub id: String,
        #[serde(rename = "EvalID")]
        pub eval_id: String,
        pub name: String,
        pub namespace: String,
        #[serde(rename = "NodeID")]
        pub node_id: String,
        pub node_name: String,
        #[serde(rename = "JobID")]
        pub job_id: String,
        pub job_type: String,
        pub job_version: u64,
        pub task_group: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub allocated_resources: Option<AllocatedResources>,
        pub desired_status: String,
        pub desired_description: String,
        pub client_status: String,
        pub client_description: String,
        pub desired_transition: DesiredTransition,
        pub task_states: Option<BTreeMap<String, TaskState>>,
        pub deployment_status: Option<AllocDeploymentStatus>,
        #[serde(rename = "FollowupEvalID")]
        pub followup_eval_id: String,
        pub next_allocation: String,
        pub reschedule_tracker: Option<RescheduleTracker>,
        pub preempted_allocations: Vec<String>,
        pub preempted_by_allocation: String,
        pub create_index: u64,
        pub modify_index: u64,
        pub create_time: i64,
        pub modify_time: i64,
    }
}

wire_struct! {
    /// What the server wants done to an allocation beyond its desired status. Each field is a
    /// tri-state (`null` means unset).
    pub struct DesiredTransition {
        pub migrate: Option<bool>,
        pub reschedule: Option<bool>,
        pub force_reschedule: Option<bool>,
        pub no_shutdown_delay: Option<bool>,
        pub migrate_disable_placement: Option<bool>,
    }
}

impl DesiredTransition {
    pub fn should_migrate(&self) -> bool {
        self.migrate == Some(true)
    }
    pub fn should_reschedule(&self) -> bool {
        self.reschedule == Some(true)
    }
    pub fn should_force_reschedule(&self) -> bool {
        self.force_reschedule == Some(true)
    }
    pub fn should_ignore_shutdown_delay(&self) -> bool {
        self.no_shutdown_delay == Some(true)
    }
}

wire_struct! {
    /// Deployment health of an allocation.
    pub struct AllocDeploymentStatus {
        pub healthy: Option<bool>,
        pub timestamp: Timestamp,
        pub canary: bool,
        pub modify_index: u64,
    }
}

wire_struct! {
    /// The resources given to an allocation, per task and shared by the group.
    pub struct AllocatedResources {
        pub tasks: BTreeMap<String, AllocatedTaskResources>,
        /// Per task: its lifecycle, or `null` for a main task.
        pub task_lifecycles: BTreeMap<String, Option<TaskLifecycleConfig>>,
        pub shared: AllocatedSharedResources,
    }
}

wire_struct! {
    pub struct AllocatedTaskResources {
        pub cpu: AllocatedCpuResources,
        pub memory: AllocatedMemoryResources,
        pub networks: Vec<NetworkResource>,
        pub devices: Vec<Value>,
    }
}

wire_struct! {
    pub struct AllocatedCpuResources {
        pub cpu_shares: i64,
        /// Cores reserved exclusively (`null` when none).
        pub reserved_cores: Option<Vec<u16>>,
    }
}

wire_struct! {
    pub struct AllocatedMemoryResources {
        #[serde(rename = "MemoryMB")]
        pub memory_mb: i64,
        #[serde(rename = "MemoryMaxMB")]
        pub memory_max_mb: i64,
    }
}

wire_struct! {
    pub struct AllocatedSharedResources {
        pub networks: Vec<NetworkResource>,
        #[serde(rename = "DiskMB")]
        pub disk_mb: i64,
        pub ports: Vec<AllocatedPortMapping>,
    }
}

wire_struct! {
    /// A port given to the group: `Value` on the host at `HostIP`, `To` inside.
    pub struct AllocatedPortMapping {
        pub label: String,
        pub value: i64,
        pub to: i64,
        #[serde(rename = "HostIP")]
        pub host_ip: String,
    }
}

impl From<&AllocatedPortMapping> for Port {
    fn from(mapping: &AllocatedPortMapping) -> Self {
        Port {
            label: mapping.label.clone(),
            value: mapping.value,
            to: mapping.to,
            host_network: String::new(),
            ignore_collision: false,
        }
    }
}

wire_struct! {
    /// The scheduler's account of a placement (or of why a group could not be placed).
    pub struct AllocMetric {
        pub nodes_evaluated: i64,
        pub nodes_filtered: i64,
        pub nodes_in_pool: i64,
        pub nodes_available: BTreeMap<String, i64>,
        pub class_filtered: BTreeMap<String, i64>,
        pub constraint_filtered: BTreeMap<String, i64>,
        pub nodes_exhausted: i64,
        pub class_exhausted: BTreeMap<String, i64>,
        pub dimension_exhausted: BTreeMap<String, i64>,
        pub quota_exhausted: Vec<String>,
        pub resources_exhausted: BTreeMap<String, Value>,
        pub score_meta_data: Vec<NodeScoreMeta>,
        pub allocation_time: DurationNs,
        pub coalesced_failures: i64,
    }
}

wire_struct! {
    /// Scores of one node in a placement.
    pub struct NodeScoreMeta {
        #[serde(rename = "NodeID")]
        pub node_id: String,
        pub scores: BTreeMap<String, f64>,
        pub norm_score: f64,
    }
}

wire_struct! {
    /// The reschedule history carried from allocation to replacement.
    pub struct RescheduleTracker {
        pub events: Vec<RescheduleEvent>,
        pub last_reschedule: String,
    }
}

wire_struct! {
    pub struct RescheduleEvent {
        /// Unix nanoseconds.
        pub reschedule_time: i64,
        #[serde(rename = "PrevAllocID")]
        pub prev_alloc_id: String,
        #[serde(rename = "PrevNodeID")]
        pub prev_node_id: String,
        pub delay: DurationNs,
    }
}

/// An allocation's name: `<job>.<group>[<index>]`.
pub fn alloc_name(job_id: &str, group_name: &str, index: u64) -> String {
    format!("{job_id}.{group_name}[{index}]")
}

impl AllocatedResources {
    /// The resources a group asks for, as the scheduler allocates them before any network or
    /// device assignment: each task's CPU and memory (canonicalized tasks carry resources; a task
    /// without them counts as zero), each task's lifecycle, and the group's ephemeral disk.
    pub fn for_task_group(group: &crate::job::TaskGroup) -> AllocatedResources {
        let mut allocated = AllocatedResources::default();
        for task in &group.tasks {
            let requested = task.resources.clone().unwrap_or_default();
            allocated.tasks.insert(
                task.name.clone(),
                AllocatedTaskResources {
                    cpu: AllocatedCpuResources {
                        cpu_shares: requested.cpu,
                        reserved_cores: None,
                    },
                    memory: AllocatedMemoryResources {
                        memory_mb: requested.memory_mb,
                        memory_max_mb: requested.memory_max_mb,
                    },
                    networks: requested.networks,
                    devices: Vec::new(),
                },
            );
            allocated
                .task_lifecycles
                .insert(task.name.clone(), task.lifecycle.clone());
        }
        allocated.shared.disk_mb = group.ephemeral_disk.as_ref().map_or(0, |disk| disk.size_mb);
        allocated.shared.networks = group.networks.clone();
        allocated
    }

    /// Total CPU shares (MHz) over all tasks.
    pub fn total_cpu_shares(&self) -> i64 {
        self.tasks.values().map(|task| task.cpu.cpu_shares).sum()
    }

    /// Total memory (MB) over all tasks.
    pub fn total_memory_mb(&self) -> i64 {
        self.tasks.values().map(|task| task.memory.memory_mb).sum()
    }
}

impl Resources {
    /// Adds `delta` in the manner of Nomad's legacy `Resources.Add`: CPU, memory and disk are
    /// summed (a `MemoryMaxMB` of 0 counts as the `MemoryMB` it defaults to), and a network on
    /// an address already present (same IP, or same CIDR) adds its bandwidth and ports to it.
    pub fn add(&mut self, delta: &Resources) {
        self.cpu += delta.cpu;
        self.memory_mb += delta.memory_mb;
        self.memory_max_mb += if delta.memory_max_mb > 0 {
            delta.memory_max_mb
        } else {
            delta.memory_mb
        };
        self.disk_mb += delta.disk_mb;
        for network in &delta.networks {
            let same_address = self.networks.iter_mut().find(|existing| {
                (!network.ip.is_empty() && existing.ip == network.ip)
                    || (!network.cidr.is_empty() && existing.cidr == network.cidr)
            });
            match same_address {
                Some(existing) => {
                    existing.mbits += network.mbits;
                    existing
                        .reserved_ports
                        .extend(network.reserved_ports.iter().cloned());
                    existing
                        .dynamic_ports
                        .extend(network.dynamic_ports.iter().cloned());
                }
                None => self.networks.push(network.clone()),
            }
        }
    }
}
