//! Jobs, task groups and tasks in Nomad's server shape (`nomad/structs.Job`), which is also the
//! shape the HTTP API accepts on register (`api.Job`) once canonicalized.
//!
//! Every struct decodes leniently (see [`crate::lenient`]) and encodes with Nomad's keys. Nested
//! blocks that Nomad holds behind a pointer are `Option` here and encode as `null` when absent.
//! Free-form driver configuration (`Task.Config`) keeps its key order.
//!
//! Not here: defaults (see [`crate::canonicalize`]), validation of a job as a whole (the jobspec
//! and server crates), and anything about where a job runs.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::bytes::Bytes;
use crate::job_blocks::*;
use crate::lenient::wire_struct;
pub use crate::placement::{Affinity, Constraint};
use crate::time::DurationNs;

/// Job types.
pub const JOB_TYPE_SERVICE: &str = "service";
pub const JOB_TYPE_BATCH: &str = "batch";
pub const JOB_TYPE_SYSTEM: &str = "system";
pub const JOB_TYPE_SYSBATCH: &str = "sysbatch";

/// Job statuses (`Job.Status`).
pub const JOB_STATUS_PENDING: &str = "pending";
pub const JOB_STATUS_RUNNING: &str = "running";
pub const JOB_STATUS_DEAD: &str = "dead";

/// Restart policy modes.
pub const RESTART_POLICY_MODE_FAIL: &str = "fail";
pub const RESTART_POLICY_MODE_DELAY: &str = "delay";

/// Reschedule delay functions.
pub const RESCHEDULE_DELAY_CONSTANT: &str = "constant";
pub const RESCHEDULE_DELAY_EXPONENTIAL: &str = "exponential";
pub const RESCHEDULE_DELAY_FIBONACCI: &str = "fibonacci";

/// Lifecycle hooks (`Lifecycle.Hook`).
pub const LIFECYCLE_HOOK_PRESTART: &str = "prestart";
pub const LIFECYCLE_HOOK_POSTSTART: &str = "poststart";
pub const LIFECYCLE_HOOK_POSTSTOP: &str = "poststop";

/// Parameterized job payload requirements.
pub const DISPATCH_PAYLOAD_OPTIONAL: &str = "optional";
pub const DISPATCH_PAYLOAD_REQUIRED: &str = "required";
pub const DISPATCH_PAYLOAD_FORBIDDEN: &str = "forbidden";

/// Periodic spec types.
pub const PERIODIC_SPEC_CRON: &str = "cron";

/// The default namespace, region and node pool.
pub const DEFAULT_NAMESPACE: &str = "default";
pub const DEFAULT_REGION: &str = "global";
pub const DEFAULT_NODE_POOL: &str = "default";

wire_struct! {
    /// A job: the unit users submit. `Version` grows by one on each register that changes it.
    pub struct Job {
        pub stop: bool,
        pub region: String,
        pub namespace: String,
        #[serde(rename = "ID")]
        pub id: String,
        #[serde(rename = "ParentID")]
        pub parent_id: String,
        pub name: String,
        pub r#type: String,
        pub priority: i64,
        pub all_at_once: bool,
        pub datacenters: Vec<String>,
        pub node_pool: String,
        pub constraints: Vec<Constraint>,
        pub affinities: Vec<Affinity>,
        pub spreads: Vec<Spread>,
        pub task_groups: Vec<TaskGroup>,
        pub update: Option<UpdateStrategy>,
        pub multiregion: Option<Multiregion>,
        pub periodic: Option<PeriodicConfig>,
        pub parameterized_job: Option<ParameterizedJobConfig>,
        pub dispatched: bool,
        pub dispatch_idempotency_token: String,
        pub payload: Bytes,
        pub meta: BTreeMap<String, String>,
        /// Applied to each group by canonicalization, then cleared (the server's job has none).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub migrate: Option<MigrateStrategy>,
        #[serde(rename = "UI")]
        pub ui: Option<JobUiConfig>,
        pub consul_token: String,
        pub consul_namespace: String,
        pub vault_token: String,
        pub vault_namespace: String,
        #[serde(rename = "NomadTokenID")]
        pub nomad_token_id: String,
        pub status: String,
        pub status_description: String,
        pub stable: bool,
        pub version: u64,
        /// Unix nanoseconds of the register that made this version.
        pub submit_time: i64,
        pub create_index: u64,
        pub modify_index: u64,
        pub job_modify_index: u64,
        /// The version's tag (`nomad job tag apply`); absent when untagged.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub version_tag: Option<JobVersionTag>,
    }
}

impl Job {
    /// The group with this name.
    pub fn lookup_task_group(&self, group_name: &str) -> Option<&TaskGroup> {
        self.task_groups
            .iter()
            .find(|group| group.name == group_name)
    }

    /// Whether the job has a periodic block (it is a template for periodic children).
    pub fn is_periodic(&self) -> bool {
        self.periodic.is_some()
    }

    /// Whether the job launches children on a schedule now: periodic, enabled, not stopped and
    /// not parameterized.
    pub fn is_periodic_active(&self) -> bool {
        self.periodic
            .as_ref()
            .is_some_and(|periodic| periodic.enabled)
            && !self.stop
            && !self.is_parameterized()
    }

    /// Whether the job is a template for dispatched children.
    pub fn is_parameterized(&self) -> bool {
        self.parameterized_job.is_some() && !self.dispatched
    }
}

wire_struct! {
    /// A group of tasks placed together on one node; `Count` copies of it are run.
    pub struct TaskGroup {
        pub name: String,
        /// Number of allocations; 1 when the key is absent, as the API defaults a nil count.
        pub count: i64 = 1,
        pub update: Option<UpdateStrategy>,
        pub migrate: Option<MigrateStrategy>,
        pub constraints: Vec<Constraint>,
        pub scaling: Option<ScalingPolicy>,
        pub restart_policy: Option<RestartPolicy>,
        pub disconnect: Option<DisconnectStrategy>,
        pub tasks: Vec<Task>,
        pub ephemeral_disk: Option<EphemeralDisk>,
        pub meta: BTreeMap<String, String>,
        pub reschedule_policy: Option<ReschedulePolicy>,
        pub affinities: Vec<Affinity>,
        pub spreads: Vec<Spread>,
        pub networks: Vec<NetworkResource>,
        pub consul: Option<Consul>,
        pub services: Vec<Service>,
        pub volumes: BTreeMap<String, VolumeRequest>,
        pub shutdown_delay: Option<DurationNs>,
        pub stop_after_client_disconnect: Option<DurationNs>,
        pub max_client_disconnect: Option<DurationNs>,
        pub max_run_duration: Option<DurationNs>,
        pub prevent_reschedule_on_lost: bool,
    }
}

impl TaskGroup {
    /// The task with this name.
    pub fn lookup_task(&self, task_name: &str) -> Option<&Task> {
        self.tasks.iter().find(|task| task.name == task_name)
    }
}

wire_struct! {
    /// One process (or container) run by a driver.
    pub struct Task {
        pub name: String,
        pub driver: String,
        pub user: String,
        /// Driver-owned configuration, key order preserved.
        pub config: Map<String, Value>,
        pub env: BTreeMap<String, String>,
        pub services: Vec<Service>,
        pub vault: Option<Vault>,
        pub consul: Option<Consul>,
        pub templates: Vec<Template>,
        pub constraints: Vec<Constraint>,
        pub affinities: Vec<Affinity>,
        pub resources: Option<Resources>,
        pub restart_policy: Option<RestartPolicy>,
        pub dispatch_payload: Option<DispatchPayloadConfig>,
        pub lifecycle: Option<TaskLifecycleConfig>,
        pub meta: BTreeMap<String, String>,
        pub kill_timeout: DurationNs,
        pub log_config: Option<LogConfig>,
        pub artifacts: Vec<TaskArtifact>,
        pub leader: bool,
        pub shutdown_delay: DurationNs,
        pub volume_mounts: Vec<VolumeMount>,
        pub scaling_policies: Vec<ScalingPolicy>,
        pub kill_signal: String,
        pub kind: String,
        #[serde(rename = "CSIPluginConfig")]
        pub csi_plugin_config: Option<TaskCsiPluginConfig>,
        pub identity: Option<WorkloadIdentity>,
        pub identities: Vec<WorkloadIdentity>,
        pub actions: Vec<Action>,
        pub schedule: Option<Value>,
    }
}

impl Task {
    /// The lifecycle hook (`prestart`, `poststart`, `poststop`), or `""` for a main task.
    pub fn lifecycle_hook(&self) -> &str {
        self.lifecycle
            .as_ref()
            .map_or("", |lifecycle| lifecycle.hook.as_str())
    }

    /// Whether the task is a sidecar (keeps running alongside the main tasks).
    pub fn is_sidecar(&self) -> bool {
        self.lifecycle
            .as_ref()
            .is_some_and(|lifecycle| lifecycle.sidecar)
    }
}

wire_struct! {
    /// Resources a task asks for.
    pub struct Resources {
        #[serde(rename = "CPU")]
        pub cpu: i64,
        pub cores: i64,
        #[serde(rename = "MemoryMB")]
        pub memory_mb: i64,
        #[serde(rename = "MemoryMaxMB")]
        pub memory_max_mb: i64,
        #[serde(rename = "DiskMB")]
        pub disk_mb: i64,
        #[serde(rename = "IOPS")]
        pub iops: i64,
        pub networks: Vec<NetworkResource>,
        pub devices: Vec<RequestedDevice>,
        #[serde(rename = "NUMA")]
        pub numa: Option<NumaResource>,
        #[serde(rename = "SecretsMB")]
        pub secrets_mb: i64,
    }
}

wire_struct! {
    /// A network asked for (group `network` block) or assigned.
    pub struct NetworkResource {
        pub mode: String,
        pub device: String,
        #[serde(rename = "CIDR")]
        pub cidr: String,
        #[serde(rename = "IP")]
        pub ip: String,
        pub hostname: String,
        #[serde(rename = "MBits")]
        pub mbits: i64,
        #[serde(rename = "DNS")]
        pub dns: Option<DnsConfig>,
        pub reserved_ports: Vec<Port>,
        pub dynamic_ports: Vec<Port>,
        #[serde(rename = "CNI")]
        pub cni: Option<CniConfig>,
    }
}

wire_struct! {
    /// A labelled port: `Value` is the host port, `To` the port inside the task's network.
    pub struct Port {
        pub label: String,
        pub value: i64,
        pub to: i64,
        pub host_network: String,
        pub ignore_collision: bool,
    }
}

/// `RestartPolicy.Attempts` before canonicalization when the key was absent; canonicalization
/// replaces it with the job type's default (or the group's, for a task).
pub const RESTART_ATTEMPTS_UNSET: i64 = -1;

wire_struct! {
    /// How a task is restarted on the same node after it exits.
    ///
    /// Keys absent from a present block decode to Nomad's defaults where those do not depend on the
    /// job type (`Delay` 15s, `Mode` `fail`); `Attempts` decodes to [`RESTART_ATTEMPTS_UNSET`] and
    /// `Interval` to zero, both filled in by canonicalization.
    pub struct RestartPolicy {
        pub attempts: i64 = RESTART_ATTEMPTS_UNSET,
        pub interval: DurationNs,
        pub delay: DurationNs = DurationNs::from_secs(15),
        pub mode: String = RESTART_POLICY_MODE_FAIL.to_string(),
        pub render_templates: bool,
        /// drover extension: each restart within an interval waits `delay × factor^(n−1)`,
        /// capped at `MaxDelay`. 0 (absent) keeps Nomad's constant delay. Omitted from the
        /// JSON when unset, so the wire shape stays Nomad's.
        #[serde(skip_serializing_if = "is_zero_f64")]
        pub backoff_factor: f64,
        /// drover extension: the cap of an exponential backoff (0: 30 minutes).
        #[serde(skip_serializing_if = "is_zero_duration")]
        pub max_delay: DurationNs,
    }
}

wire_struct! {
    /// How a failed allocation is replaced, possibly on another node.
    pub struct ReschedulePolicy {
        pub attempts: i64,
        pub interval: DurationNs,
        pub delay: DurationNs,
        pub delay_function: String,
        pub max_delay: DurationNs,
        pub unlimited: bool,
    }
}

wire_struct! {
    /// The alloc directory's disk.
    pub struct EphemeralDisk {
        pub sticky: bool,
        #[serde(rename = "SizeMB")]
        pub size_mb: i64,
        pub migrate: bool,
    }
}

wire_struct! {
    /// Spread allocations across the values of an attribute. `Weight` is 50 when the key is
    /// absent, as the API's canonicalization gives it.
    pub struct Spread {
        pub attribute: String,
        pub weight: i64 = 50,
        pub spread_target: Vec<SpreadTarget>,
    }
}

wire_struct! {
    pub struct SpreadTarget {
        pub value: String,
        pub percent: i64,
    }
}

wire_struct! {
    /// Rolling update settings (the `update` block). `MaxParallel` is 1 when the key is absent
    /// (an explicit 0 disables rolling updates).
    pub struct UpdateStrategy {
        pub stagger: DurationNs,
        pub max_parallel: i64 = 1,
        pub health_check: String,
        pub min_healthy_time: DurationNs,
        pub healthy_deadline: DurationNs,
        /// `None` until canonicalized (then 10m); `Some(0)` is Nomad's "no deadline".
        pub progress_deadline: Option<DurationNs>,
        pub auto_revert: bool,
        pub auto_promote: bool,
        pub canary: i64,
    }
}

wire_struct! {
    /// Launch children on a cron schedule. `Enabled` is true when the key is absent.
    pub struct PeriodicConfig {
        pub enabled: bool = true,
        pub spec: String,
        pub specs: Vec<String>,
        pub spec_type: String,
        pub prohibit_overlap: bool,
        pub time_zone: String,
    }
}

wire_struct! {
    /// The last launch of a periodic job (Nomad's `PeriodicLaunch`); until the first launch,
    /// the time the job was registered.
    pub struct PeriodicLaunch {
        #[serde(rename = "ID")]
        pub id: String,
        pub namespace: String,
        pub launch: crate::Timestamp,
        pub create_index: u64,
        pub modify_index: u64,
    }
}

/// What a periodic child's ID holds after its parent's ID (`<parent>/periodic-<unix seconds>`).
pub const PERIODIC_LAUNCH_SUFFIX: &str = "/periodic-";

/// What a dispatched child's ID holds after its parent's ID.
pub const DISPATCH_LAUNCH_SUFFIX: &str = "/dispatch-";

/// The largest dispatch payload, in bytes, before compression (Nomad's
/// `DispatchPayloadSizeLimit`).
pub const DISPATCH_PAYLOAD_SIZE_LIMIT: usize = 16 * 1024;

/// The launch time (Unix seconds) in a periodic child's ID, or `None` when the ID is not one.
pub fn periodic_launch_time(child_id: &str) -> Option<i64> {
    let (_, suffix) = child_id.rsplit_once(PERIODIC_LAUNCH_SUFFIX)?;
    suffix.parse().ok()
}

wire_struct! {
    /// Makes a job a template dispatched with a payload and metadata.
    pub struct ParameterizedJobConfig {
        pub payload: String,
        pub meta_required: Vec<String>,
        pub meta_optional: Vec<String>,
    }
}

wire_struct! {
    /// Where a dispatched payload is written, relative to the task's `local/` directory.
    pub struct DispatchPayloadConfig {
        pub file: String,
    }
}

wire_struct! {
    /// When a task runs relative to the main tasks.
    pub struct TaskLifecycleConfig {
        pub hook: String,
        pub sidecar: bool,
    }
}

wire_struct! {
    /// Log rotation: up to `MaxFiles` files of `MaxFileSizeMB` each, per stream.
    pub struct LogConfig {
        pub max_files: i64,
        #[serde(rename = "MaxFileSizeMB")]
        pub max_file_size_mb: i64,
        pub disabled: bool,
    }
}

wire_struct! {
    /// A file rendered into the task directory.
    pub struct Template {
        pub source_path: String,
        pub dest_path: String,
        pub embedded_tmpl: String,
        pub change_mode: String,
        pub change_signal: String,
        pub change_script: Option<Value>,
        pub splay: DurationNs,
        pub perms: String,
        pub uid: Option<i64>,
        pub gid: Option<i64>,
        pub left_delim: String,
        pub right_delim: String,
        pub envvars: bool,
        pub vault_grace: DurationNs,
        pub wait: Option<Value>,
        pub err_missing_key: bool,
        /// Render once, before the first start, and never again (Nomad's `once`).
        pub once: bool,
    }
}

wire_struct! {
    /// A file fetched into the task directory before it starts.
    pub struct TaskArtifact {
        pub getter_source: String,
        pub getter_options: BTreeMap<String, String>,
        pub getter_headers: BTreeMap<String, String>,
        pub getter_mode: String,
        pub getter_insecure: bool,
        pub relative_dest: String,
        pub chown: bool,
    }
}

wire_struct! {
    /// A service registration.
    pub struct Service {
        pub name: String,
        pub task_name: String,
        pub port_label: String,
        pub address_mode: String,
        pub address: String,
        pub enable_tag_override: bool,
        pub tags: Vec<String>,
        pub canary_tags: Vec<String>,
        pub checks: Vec<ServiceCheck>,
        pub connect: Option<ConsulConnect>,
        pub meta: BTreeMap<String, String>,
        pub canary_meta: BTreeMap<String, String>,
        pub tagged_addresses: BTreeMap<String, String>,
        pub namespace: String,
        pub on_update: String,
        pub provider: String,
        pub cluster: String,
        pub kind: String,
        pub weights: Option<ServiceWeights>,
        pub identity: Option<WorkloadIdentity>,
        /// The service-wide `check_restart`, which each check's own block overrides key by key
        /// (Nomad's API merges them into the checks; the server's JSON carries it only when set).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub check_restart: Option<CheckRestart>,
    }
}

wire_struct! {
    /// When a failing check restarts its task (`check_restart`): after `limit` consecutive
    /// critical results, counted once `grace` has passed since the task started; with
    /// `ignore_warnings` a warning counts as healthy.
    /// Unset keys are left out of the JSON, as the jobspec decoder writes only the keys given.
    pub struct CheckRestart {
        #[serde(skip_serializing_if = "is_zero_i64")]
        pub limit: i64,
        #[serde(skip_serializing_if = "is_zero_duration")]
        pub grace: DurationNs,
        #[serde(skip_serializing_if = "is_false")]
        pub ignore_warnings: bool,
    }
}

fn is_zero_i64(value: &i64) -> bool {
    *value == 0
}

fn is_false(value: &bool) -> bool {
    !*value
}

impl CheckRestart {
    /// This block with the keys it leaves unset taken from `service_wide` (Nomad's merge: a
    /// zero limit or grace and a false `ignore_warnings` are "unset").
    pub fn merged_over(&self, service_wide: &CheckRestart) -> CheckRestart {
        CheckRestart {
            limit: if self.limit == 0 {
                service_wide.limit
            } else {
                self.limit
            },
            grace: if self.grace.is_zero() {
                service_wide.grace
            } else {
                self.grace
            },
            ignore_warnings: self.ignore_warnings || service_wide.ignore_warnings,
        }
    }
}

wire_struct! {
    /// A health check of a service.
    pub struct ServiceCheck {
        pub name: String,
        pub r#type: String,
        pub command: String,
        pub args: Vec<String>,
        pub path: String,
        pub protocol: String,
        pub port_label: String,
        pub expose: bool,
        pub address_mode: String,
        pub interval: DurationNs,
        pub timeout: DurationNs,
        pub initial_status: String,
        #[serde(rename = "TLSServerName")]
        pub tls_server_name: String,
        #[serde(rename = "TLSSkipVerify")]
        pub tls_skip_verify: bool,
        pub method: String,
        pub header: BTreeMap<String, Vec<String>>,
        pub check_restart: Option<CheckRestart>,
        #[serde(rename = "GRPCService")]
        pub grpc_service: String,
        #[serde(rename = "GRPCUseTLS")]
        pub grpc_use_tls: bool,
        pub task_name: String,
        pub success_before_passing: i64,
        pub failures_before_critical: i64,
        pub failures_before_warning: i64,
        pub body: String,
        pub on_update: String,
        pub advertise: String,
        /// Consul's free text for operators; kept with the job.
        pub notes: String,
    }
}

wire_struct! {
    /// A workload identity token made available to the task.
    pub struct WorkloadIdentity {
        pub name: String,
        pub audience: Vec<String>,
        pub change_mode: String,
        pub change_signal: String,
        pub env: bool,
        pub file: bool,
        pub filepath: String,
        pub service_name: String,
        pub extra_claims: BTreeMap<String, String>,
        #[serde(rename = "TTL")]
        pub ttl: DurationNs,
    }
}

wire_struct! {
    /// A service's `connect` block (Nomad's `structs.ConsulConnect`): a sidecar proxy, a native
    /// integration or a gateway.
    pub struct ConsulConnect {
        pub native: bool,
        pub sidecar_service: Option<ConsulSidecarService>,
        pub sidecar_task: Option<SidecarTask>,
        pub gateway: Option<ConsulGateway>,
    }
}

impl ConsulConnect {
    /// Whether the block asks for a sidecar proxy (Nomad's `HasSidecar`).
    pub fn has_sidecar(&self) -> bool {
        self.sidecar_service.is_some()
    }

    /// The sidecar's upstreams, none without a proxy block.
    pub fn upstreams(&self) -> &[ConsulUpstream] {
        self.sidecar_service
            .as_ref()
            .and_then(|sidecar| sidecar.proxy.as_ref())
            .map_or(&[], |proxy| proxy.upstreams.as_slice())
    }
}

wire_struct! {
    /// `connect { sidecar_service { … } }`: the sidecar proxy's own service.
    pub struct ConsulSidecarService {
        pub tags: Vec<String>,
        /// The port label (or number) of the sidecar's public listener; empty: the injected
        /// `connect-proxy-<service>` port.
        pub port: String,
        pub proxy: Option<ConsulProxy>,
        #[serde(rename = "DisableDefaultTCPCheck")]
        pub disable_default_tcp_check: bool,
        pub meta: BTreeMap<String, String>,
    }
}

wire_struct! {
    /// `sidecar_service { proxy { … } }`.
    pub struct ConsulProxy {
        pub local_service_address: String,
        pub local_service_port: i64,
        pub upstreams: Vec<ConsulUpstream>,
        pub expose: Option<ConsulExposeConfig>,
        pub transparent_proxy: Option<ConsulTransparentProxy>,
        pub config: Map<String, Value>,
    }
}

wire_struct! {
    /// `proxy { upstreams { … } }`: a local listener for a mesh service.
    pub struct ConsulUpstream {
        pub destination_name: String,
        pub destination_namespace: String,
        pub destination_partition: String,
        pub destination_peer: String,
        pub destination_type: String,
        pub local_bind_port: i64,
        pub datacenter: String,
        pub local_bind_address: String,
        pub local_bind_socket_path: String,
        pub local_bind_socket_mode: String,
        pub mesh_gateway: ConsulMeshGateway,
        pub config: Map<String, Value>,
    }
}

wire_struct! {
    /// `upstreams { mesh_gateway { mode } }`.
    pub struct ConsulMeshGateway {
        pub mode: String,
    }
}

wire_struct! {
    /// `proxy { expose { path { … } } }`.
    pub struct ConsulExposeConfig {
        pub paths: Vec<ConsulExposePath>,
    }
}

wire_struct! {
    /// One exposed HTTP or gRPC path.
    pub struct ConsulExposePath {
        pub path: String,
        pub protocol: String,
        pub local_path_port: i64,
        pub listener_port: String,
    }
}

wire_struct! {
    /// `proxy { transparent_proxy { … } }`.
    pub struct ConsulTransparentProxy {
        #[serde(rename = "UID")]
        pub uid: String,
        pub outbound_port: i64,
        pub exclude_inbound_ports: Vec<String>,
        pub exclude_outbound_ports: Vec<i64>,
        #[serde(rename = "ExcludeOutboundCIDRs")]
        pub exclude_outbound_cidrs: Vec<String>,
        #[serde(rename = "ExcludeUIDs")]
        pub exclude_uids: Vec<String>,
        #[serde(rename = "NoDNS")]
        pub no_dns: bool,
    }
}

wire_struct! {
    /// `connect { sidecar_task { … } }`: what overrides the injected proxy task (Nomad's
    /// `structs.SidecarTask`; unset pointers stay `null`).
    pub struct SidecarTask {
        pub name: String,
        pub driver: String,
        pub user: String,
        pub config: Map<String, Value>,
        pub env: BTreeMap<String, String>,
        pub resources: Option<Resources>,
        pub meta: BTreeMap<String, String>,
        pub kill_timeout: Option<DurationNs>,
        pub log_config: Option<LogConfig>,
        pub shutdown_delay: Option<DurationNs>,
        pub kill_signal: String,
        pub volume_mounts: Vec<VolumeMount>,
        pub identities: Vec<WorkloadIdentity>,
    }
}

wire_struct! {
    /// `connect { gateway { … } }`: which gateway (each kind's configuration entry kept as
    /// Nomad's JSON; no gateway runs here, see the support table).
    pub struct ConsulGateway {
        pub proxy: Option<Value>,
        pub ingress: Option<Value>,
        pub terminating: Option<Value>,
        pub mesh: Option<Value>,
    }
}

impl ConsulGateway {
    /// The gateway's kind as Nomad's task kind prefix names it.
    pub fn kind(&self) -> &'static str {
        if self.mesh.is_some() {
            "mesh-gateway"
        } else if self.ingress.is_some() {
            "ingress-gateway"
        } else if self.terminating.is_some() {
            "terminating-gateway"
        } else {
            ""
        }
    }
}

fn is_zero_f64(value: &f64) -> bool {
    *value == 0.0
}

fn is_zero_duration(value: &DurationNs) -> bool {
    value.is_zero()
}
