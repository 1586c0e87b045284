//! How the node presents itself: its config, Nomad's defaults, the operator's word on its
//! resources, and the retry timing of the client's loops.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use drover_structs::{NodeReservedResources, NodeResources};
use rand::Rng;

use crate::clock::SharedClock;
use crate::status_buffer::StatusBufferTiming;

/// How long one blocking query on the node's allocations may wait (Nomad's default
/// `MaxQueryTime`).
pub const DEFAULT_ALLOC_QUERY_WAIT: Duration = Duration::from_secs(300);

/// Nomad's default `gc_max_allocs`.
pub const DEFAULT_GC_MAX_ALLOCS: usize = 50;
/// Nomad's default `gc_interval`.
pub const DEFAULT_GC_INTERVAL: Duration = Duration::from_secs(60);
/// Nomad's default `gc_disk_usage_threshold` (percent).
pub const DEFAULT_GC_DISK_USAGE_THRESHOLD: f64 = 80.0;
/// Nomad's default `gc_inode_usage_threshold` (percent).
pub const DEFAULT_GC_INODE_USAGE_THRESHOLD: f64 = 70.0;
/// Nomad's default `gc_parallel_destroys`.
pub const DEFAULT_GC_PARALLEL_DESTROYS: usize = 2;

/// Retry timing of the client's loops; the defaults suit a real agent, tests shrink them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryTiming {
    /// First wait after a failed call; doubles per failure, with up to 50% random added.
    pub first_backoff: Duration,
    /// Longest wait between attempts.
    pub max_backoff: Duration,
}

impl Default for RetryTiming {
    fn default() -> Self {
        Self {
            first_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(15),
        }
    }
}

impl RetryTiming {
    pub(super) fn delay(&self, failures: u32) -> Duration {
        let doubled = self
            .first_backoff
            .saturating_mul(1u32 << failures.min(16))
            .min(self.max_backoff);
        let jitter = rand::thread_rng().gen_range(0.0..0.5);
        doubled.mul_f64(1.0 + jitter).min(self.max_backoff)
    }
}

/// How the node presents itself and where it keeps its identity.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// The agent's data dir; the node ID lives in `<data_dir>/client/node-id`.
    pub data_dir: PathBuf,
    /// Dev mode without a data dir: a fresh node ID each start, nothing restored.
    pub ephemeral: bool,
    /// The node's name (Nomad defaults it to the hostname).
    pub name: String,
    pub datacenter: String,
    pub node_pool: String,
    pub node_class: String,
    pub meta: BTreeMap<String, String>,
    /// The node registers ineligible for scheduling (Nomad's `client { default_ineligible }`);
    /// the servers keep a known node's eligibility as it was.
    pub default_ineligible: bool,
    /// The agent's own HTTP API address (`127.0.0.1:4646`); the CLI connects there directly.
    pub http_addr: String,
    /// The Nomad version the agent presents (`nomad.version`).
    pub agent_version: String,
    /// Longest wait of one blocking query on the node's allocations.
    pub alloc_query_wait: Duration,
    /// Past this many allocations, the oldest terminal ones are garbage collected (Nomad's
    /// `gc_max_allocs`).
    pub gc_max_allocs: usize,
    /// How often the node checks its allocation directory's filesystem (`gc_interval`).
    pub gc_interval: Duration,
    /// Disk and inode usage (percent) of that filesystem past which terminal allocations
    /// are collected, oldest first (`gc_disk_usage_threshold`, `gc_inode_usage_threshold`).
    pub gc_disk_usage_threshold: f64,
    pub gc_inode_usage_threshold: f64,
    /// How many allocations are destroyed at once (`gc_parallel_destroys`).
    pub gc_parallel_destroys: usize,
    pub retry: RetryTiming,
    pub status_timing: StatusBufferTiming,
    /// What the agent's config says about the node's resources, over the fingerprint.
    pub resources: NodeResourceSettings,
    /// Wall-clock time for the node's timestamps.
    pub clock: SharedClock,
}

/// The client config's word on the node's resources (Nomad's `cpu_total_compute`,
/// `memory_total_mb`, `reservable_cores` and `reserved { … }`): what the fingerprint found is
/// replaced where the operator says otherwise, and what is reserved for the host is never
/// offered to allocations.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeResourceSettings {
    /// Total compute in MHz, instead of the fingerprinted frequency × cores.
    pub cpu_total_compute: Option<i64>,
    /// Total memory in MB, instead of `/proc/meminfo`'s.
    pub memory_total_mb: Option<i64>,
    /// The cores tasks may reserve, instead of the agent's allowed cpus.
    pub reservable_cores: Option<Vec<u16>>,
    /// Kept back for the host: CPU MHz, memory and disk MB, cores and host ports.
    pub reserved: NodeReservedResources,
}

impl NodeResourceSettings {
    /// Applies the overrides to the fingerprinted `resources` (and the attributes that describe
    /// them), and returns the node's reserved resources: always some, zero when nothing is
    /// reserved, as Nomad's client registers them (API readers find `ReservedResources` on
    /// every node).
    pub fn apply(
        &self,
        resources: &mut NodeResources,
        attributes: &mut BTreeMap<String, String>,
    ) -> Option<NodeReservedResources> {
        if let Some(compute) = self.cpu_total_compute {
            resources.cpu.cpu_shares = compute;
            for key in ["cpu.totalcompute", "cpu.usablecompute"] {
                attributes.insert(key.to_string(), compute.to_string());
            }
        }
        if let Some(memory_mb) = self.memory_total_mb {
            resources.memory.memory_mb = memory_mb;
            attributes.insert(
                "memory.totalbytes".to_string(),
                memory_mb.saturating_mul(1024 * 1024).to_string(),
            );
        }
        if let Some(cores) = &self.reservable_cores {
            resources.cpu.reservable_cpu_cores = cores.clone();
            attributes.insert("cpu.reservablecores".to_string(), cores.len().to_string());
        }
        Some(self.reserved.clone())
    }
}

impl NodeConfig {
    /// A config with Nomad's defaults for a node named `name` in `dc1`.
    pub fn new(data_dir: impl Into<PathBuf>, name: impl Into<String>, clock: SharedClock) -> Self {
        Self {
            data_dir: data_dir.into(),
            ephemeral: false,
            name: name.into(),
            datacenter: "dc1".to_string(),
            node_pool: "default".to_string(),
            node_class: String::new(),
            meta: BTreeMap::new(),
            default_ineligible: false,
            http_addr: String::new(),
            agent_version: String::new(),
            alloc_query_wait: DEFAULT_ALLOC_QUERY_WAIT,
            gc_max_allocs: DEFAULT_GC_MAX_ALLOCS,
            gc_interval: DEFAULT_GC_INTERVAL,
            gc_disk_usage_threshold: DEFAULT_GC_DISK_USAGE_THRESHOLD,
            gc_inode_usage_threshold: DEFAULT_GC_INODE_USAGE_THRESHOLD,
            gc_parallel_destroys: DEFAULT_GC_PARALLEL_DESTROYS,
            retry: RetryTiming::default(),
            status_timing: StatusBufferTiming::default(),
            resources: NodeResourceSettings::default(),
            clock,
        }
    }

    /// `<data_dir>/alloc`, where the allocations' directories are.
    pub fn alloc_dir(&self) -> PathBuf {
        self.data_dir.join("alloc")
    }

    /// `<data_dir>/client`.
    pub fn client_state_dir(&self) -> PathBuf {
        self.data_dir.join("client")
    }
}
