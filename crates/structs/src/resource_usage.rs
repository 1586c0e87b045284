//! Resource usage as `GET /v1/client/allocation/:id/stats` reports it (Nomad's
//! `client/structs.AllocResourceUsage`): memory and CPU per task and summed for the allocation.
//!
//! Not here: measuring (the driver and isolation crates read cgroups).

use std::collections::BTreeMap;

use crate::lenient::wire_struct;

/// Names used in `Measured` lists.
pub const MEASURED_MEMORY_RSS: &str = "RSS";
pub const MEASURED_MEMORY_CACHE: &str = "Cache";
pub const MEASURED_MEMORY_SWAP: &str = "Swap";
pub const MEASURED_MEMORY_USAGE: &str = "Usage";
pub const MEASURED_MEMORY_MAX_USAGE: &str = "Max Usage";
pub const MEASURED_MEMORY_KERNEL_USAGE: &str = "Kernel Usage";
pub const MEASURED_MEMORY_KERNEL_MAX_USAGE: &str = "Kernel Max Usage";
pub const MEASURED_CPU_SYSTEM_MODE: &str = "System Mode";
pub const MEASURED_CPU_USER_MODE: &str = "User Mode";
pub const MEASURED_CPU_PERCENT: &str = "Percent";
pub const MEASURED_CPU_THROTTLED_PERIODS: &str = "Throttled Periods";
pub const MEASURED_CPU_THROTTLED_TIME: &str = "Throttled Time";

wire_struct! {
    /// Usage of an allocation: the sum, and each task's.
    pub struct AllocResourceUsage {
        pub resource_usage: ResourceUsage,
        pub tasks: BTreeMap<String, TaskResourceUsage>,
        /// Unix nanoseconds.
        pub timestamp: i64,
    }
}

wire_struct! {
    /// Usage of one task, with optional per-process figures keyed by PID.
    pub struct TaskResourceUsage {
        pub resource_usage: ResourceUsage,
        /// Unix nanoseconds.
        pub timestamp: i64,
        pub pids: Option<BTreeMap<String, ResourceUsage>>,
    }
}

wire_struct! {
    pub struct ResourceUsage {
        pub memory_stats: MemoryStats,
        pub cpu_stats: CpuStats,
        pub device_stats: Option<Vec<serde_json::Value>>,
    }
}

impl ResourceUsage {
    /// Adds another usage into this one (counters sum; `Measured` lists are merged).
    pub fn add(&mut self, other: &ResourceUsage) {
        let memory = &mut self.memory_stats;
        memory.rss += other.memory_stats.rss;
        memory.cache += other.memory_stats.cache;
        memory.swap += other.memory_stats.swap;
        memory.mapped_file += other.memory_stats.mapped_file;
        memory.usage += other.memory_stats.usage;
        memory.max_usage += other.memory_stats.max_usage;
        memory.kernel_usage += other.memory_stats.kernel_usage;
        memory.kernel_max_usage += other.memory_stats.kernel_max_usage;
        merge_measured(&mut memory.measured, &other.memory_stats.measured);
        let cpu = &mut self.cpu_stats;
        cpu.system_mode += other.cpu_stats.system_mode;
        cpu.user_mode += other.cpu_stats.user_mode;
        cpu.total_ticks += other.cpu_stats.total_ticks;
        cpu.throttled_periods += other.cpu_stats.throttled_periods;
        cpu.throttled_time += other.cpu_stats.throttled_time;
        cpu.percent += other.cpu_stats.percent;
        merge_measured(&mut cpu.measured, &other.cpu_stats.measured);
    }
}

fn merge_measured(into: &mut Vec<String>, from: &[String]) {
    for name in from {
        if !into.contains(name) {
            into.push(name.clone());
        }
    }
}

wire_struct! {
    /// Memory in bytes.
    pub struct MemoryStats {
        #[serde(rename = "RSS")]
        pub rss: u64,
        pub cache: u64,
        pub swap: u64,
        pub mapped_file: u64,
        pub usage: u64,
        pub max_usage: u64,
        pub kernel_usage: u64,
        pub kernel_max_usage: u64,
        /// Which of the figures were really measured.
        pub measured: Vec<String>,
    }
}

wire_struct! {
    /// CPU: modes as percentages of one core, ticks in MHz-equivalent, throttling counters.
    pub struct CpuStats {
        pub system_mode: f64,
        pub user_mode: f64,
        pub total_ticks: f64,
        pub throttled_periods: u64,
        pub throttled_time: u64,
        pub percent: f64,
        pub measured: Vec<String>,
    }
}

wire_struct! {
    /// The node's own usage, as `GET /v1/client/stats` reports it (Nomad's
    /// `client/structs.HostStats`).
    pub struct HostStats {
        pub memory: HostMemoryStats,
        #[serde(rename = "CPU")]
        pub cpu: Vec<HostCpuStats>,
        pub disk_stats: Vec<HostDiskStats>,
        pub alloc_dir_stats: Option<HostDiskStats>,
        pub device_stats: Vec<serde_json::Value>,
        /// Seconds since boot.
        pub uptime: u64,
        /// Unix nanoseconds.
        pub timestamp: i64,
        /// CPU consumed since the previous sample, in MHz-seconds as Nomad counts ticks.
        #[serde(rename = "CPUTicksConsumed")]
        pub cpu_ticks_consumed: f64,
    }
}

wire_struct! {
    /// Host memory in bytes.
    pub struct HostMemoryStats {
        pub total: u64,
        pub available: u64,
        pub used: u64,
        pub free: u64,
    }
}

wire_struct! {
    /// One CPU's use since the previous sample, in percent.
    pub struct HostCpuStats {
        #[serde(rename = "CPU")]
        pub cpu: String,
        pub user: f64,
        pub system: f64,
        pub idle: f64,
        pub total: f64,
    }
}

wire_struct! {
    /// A filesystem's size and use.
    pub struct HostDiskStats {
        pub device: String,
        pub mountpoint: String,
        pub size: u64,
        pub used: u64,
        pub available: u64,
        pub used_percent: f64,
        pub inodes_used_percent: f64,
    }
}
