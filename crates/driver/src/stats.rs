//! Task resource usage as the client reports it (Nomad's `TaskResourceUsage` figures), and the
//! cpu percentages derived from two successive samples. Not for: reading cgroups (the shim does).

use serde::{Deserialize, Serialize};

use drover_shim::proto::TaskStats;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MemoryUsage {
    pub rss: u64,
    pub cache: u64,
    pub swap: u64,
    pub usage: u64,
    pub max_usage: u64,
    pub kernel_usage: u64,
    pub kernel_max_usage: u64,
    /// Which figures are measured (Nomad's `Measured`), empty when none are.
    pub measured: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuUsage {
    /// Cumulative cpu time.
    pub total_ns: u64,
    pub user_ns: u64,
    pub system_ns: u64,
    /// Share of one cpu used since the previous sample, in percent (100 = one full cpu).
    pub percent: f64,
    pub user_mode_percent: f64,
    pub system_mode_percent: f64,
    pub throttled_periods: u64,
    pub throttled_time_ns: u64,
    pub measured: Vec<String>,
}

impl CpuUsage {
    /// Nomad's `TotalTicks`: the MHz consumed, given the node's total cpu in MHz over all cores
    /// (`percent` counts one full core as 100).
    pub fn total_ticks(&self, node_total_mhz: f64, node_cores: u32) -> f64 {
        if node_cores == 0 {
            return 0.0;
        }
        self.percent / 100.0 * node_total_mhz / f64::from(node_cores)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskResourceUsage {
    pub timestamp_unix_ns: u64,
    pub memory: MemoryUsage,
    pub cpu: CpuUsage,
    pub pids: Vec<i32>,
}

const MEMORY_MEASURED: [&str; 6] = ["RSS", "Cache", "Swap", "Usage", "Max Usage", "Kernel Usage"];
const CPU_MEASURED: [&str; 5] = [
    "System Mode",
    "User Mode",
    "Throttled Periods",
    "Throttled Time",
    "Percent",
];

/// Turns the shim's raw sample into usage, with percentages over the time since `previous`.
pub(crate) fn usage_from_sample(
    current: &TaskStats,
    previous: Option<&TaskStats>,
) -> TaskResourceUsage {
    let percent_of = |now: u64, before: u64, elapsed_ns: u64| {
        if elapsed_ns == 0 {
            0.0
        } else {
            now.saturating_sub(before) as f64 / elapsed_ns as f64 * 100.0
        }
    };
    let (percent, user_mode_percent, system_mode_percent) = match previous {
        Some(before) => {
            let elapsed = current
                .timestamp_unix_ns
                .saturating_sub(before.timestamp_unix_ns);
            (
                percent_of(current.cpu_total_ns, before.cpu_total_ns, elapsed),
                percent_of(current.cpu_user_ns, before.cpu_user_ns, elapsed),
                percent_of(current.cpu_system_ns, before.cpu_system_ns, elapsed),
            )
        }
        None => (0.0, 0.0, 0.0),
    };
    let measured = |names: &[&str]| {
        if current.measured {
            names.iter().map(|name| (*name).to_string()).collect()
        } else {
            Vec::new()
        }
    };
    TaskResourceUsage {
        timestamp_unix_ns: current.timestamp_unix_ns,
        memory: MemoryUsage {
            rss: current.memory_rss,
            cache: current.memory_cache,
            swap: current.memory_swap,
            usage: current.memory_usage,
            max_usage: current.memory_max_usage,
            kernel_usage: current.memory_kernel_usage,
            kernel_max_usage: current.memory_kernel_max_usage,
            measured: measured(&MEMORY_MEASURED),
        },
        cpu: CpuUsage {
            total_ns: current.cpu_total_ns,
            user_ns: current.cpu_user_ns,
            system_ns: current.cpu_system_ns,
            percent,
            user_mode_percent,
            system_mode_percent,
            throttled_periods: current.cpu_throttled_periods,
            throttled_time_ns: current.cpu_throttled_time_ns,
            measured: measured(&CPU_MEASURED),
        },
        pids: current.pids.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_is_cpu_time_over_wall_time_between_samples() {
        let before = TaskStats {
            timestamp_unix_ns: 1_000_000_000,
            cpu_total_ns: 100,
            cpu_user_ns: 60,
            cpu_system_ns: 40,
            measured: true,
            ..TaskStats::default()
        };
        let after = TaskStats {
            timestamp_unix_ns: 2_000_000_000,
            cpu_total_ns: 500_000_100,
            cpu_user_ns: 400_000_060,
            cpu_system_ns: 100_000_040,
            measured: true,
            ..TaskStats::default()
        };
        let first = usage_from_sample(&before, None);
        assert_eq!(first.cpu.percent, 0.0);
        let usage = usage_from_sample(&after, Some(&before));
        assert!((usage.cpu.percent - 50.0).abs() < 1e-9);
        assert!((usage.cpu.user_mode_percent - 40.0).abs() < 1e-9);
        assert!((usage.cpu.system_mode_percent - 10.0).abs() < 1e-9);
        assert!(usage.memory.measured.contains(&"RSS".to_string()));
        // Half a core of a 2-core, 6000 MHz node is 1500 MHz.
        assert!((usage.cpu.total_ticks(6000.0, 2) - 1500.0).abs() < 1e-9);
        assert_eq!(usage.cpu.total_ticks(6000.0, 0), 0.0);
    }
}
