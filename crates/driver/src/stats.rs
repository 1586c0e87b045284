//! Task resource usage as the client reports it (Nomad's `TaskResourceUsage` figures), and the
//! cpu percentages derived from two samples of the cgroup's cumulative cpu time.
//!
//! A percentage needs a span of time. The driver keeps each task's last sample; a stats call
//! measures from it when it is between [`CPU_WINDOW`] and [`CPU_BASELINE_MAX_AGE`] old, waits
//! out the rest of the window when it is younger, and takes a fresh baseline and waits one window
//! when there is none or it is stale ([`plan_cpu_window`]). So every call, the first included,
//! answers the usage of a recent span of at least [`CPU_WINDOW`], never a 0 % placeholder.
//!
//! Not for: reading cgroups (the shim does).

use std::time::Duration;

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

/// The shortest span a cpu percentage is measured over.
pub const CPU_WINDOW: Duration = Duration::from_millis(200);
/// A kept sample older than this is not used as a baseline: the figure would be an average over
/// a span too long to say what the task does now.
pub const CPU_BASELINE_MAX_AGE: Duration = Duration::from_secs(10);

/// How a stats call gets the two samples of its cpu span.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CpuWindowPlan {
    /// The kept sample is the baseline and `current` ends the span.
    MeasureFromKept,
    /// The kept sample is the baseline; sample again after this wait.
    WaitThenMeasureFromKept(Duration),
    /// `current` is the baseline; sample again after [`CPU_WINDOW`].
    WaitThenMeasureFromCurrent,
}

/// Chooses the span for a call that just took `current`, given the task's `kept` sample.
pub(crate) fn plan_cpu_window(current: &TaskStats, kept: Option<&TaskStats>) -> CpuWindowPlan {
    let Some(kept) = kept else {
        return CpuWindowPlan::WaitThenMeasureFromCurrent;
    };
    if current.timestamp_unix_ns < kept.timestamp_unix_ns {
        // The wall clock stepped back: the kept span means nothing.
        return CpuWindowPlan::WaitThenMeasureFromCurrent;
    }
    let age = Duration::from_nanos(current.timestamp_unix_ns - kept.timestamp_unix_ns);
    if age > CPU_BASELINE_MAX_AGE {
        CpuWindowPlan::WaitThenMeasureFromCurrent
    } else if age < CPU_WINDOW {
        CpuWindowPlan::WaitThenMeasureFromKept(CPU_WINDOW - age)
    } else {
        CpuWindowPlan::MeasureFromKept
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at_ms(ms: u64) -> TaskStats {
        TaskStats {
            timestamp_unix_ns: ms * 1_000_000,
            ..TaskStats::default()
        }
    }

    #[test]
    fn the_cpu_span_is_always_at_least_one_window_and_never_stale() {
        assert_eq!(
            plan_cpu_window(&at_ms(5_000), None),
            CpuWindowPlan::WaitThenMeasureFromCurrent
        );
        assert_eq!(
            plan_cpu_window(&at_ms(5_000), Some(&at_ms(4_000))),
            CpuWindowPlan::MeasureFromKept
        );
        assert_eq!(
            plan_cpu_window(&at_ms(5_000), Some(&at_ms(4_950))),
            CpuWindowPlan::WaitThenMeasureFromKept(CPU_WINDOW - Duration::from_millis(50))
        );
        assert_eq!(
            plan_cpu_window(&at_ms(60_000), Some(&at_ms(4_000))),
            CpuWindowPlan::WaitThenMeasureFromCurrent
        );
        assert_eq!(
            plan_cpu_window(&at_ms(4_000), Some(&at_ms(5_000))),
            CpuWindowPlan::WaitThenMeasureFromCurrent
        );
    }

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
