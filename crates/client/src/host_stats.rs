//! Node-wide usage for `GET /v1/client/stats`: memory from `/proc/meminfo`, per-CPU use from
//! `/proc/stat` (percentages over the time since the previous sample, as Nomad's collector
//! reports them), the data dir's filesystem from `statvfs`, uptime from `/proc/uptime`.
//!
//! Parsing is pure and tested on fixed text; only [`HostStatsCollector::collect`] reads the
//! machine. Not here: per-task usage (drivers read their cgroups).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use drover_structs::{HostCpuStats, HostDiskStats, HostMemoryStats, HostStats};

/// Jiffies of one CPU line of `/proc/stat`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTimes {
    pub user: u64,
    pub system: u64,
    pub idle: u64,
    pub total: u64,
}

/// Per-CPU times (`cpu0`, `cpu1`, …) from `/proc/stat`; the aggregate `cpu` line is skipped.
pub fn parse_proc_stat(text: &str) -> BTreeMap<String, CpuTimes> {
    let mut cpus = BTreeMap::new();
    for line in text.lines() {
        let mut fields = line.split_whitespace();
        let Some(name) = fields.next() else { continue };
        if !name.starts_with("cpu") || name == "cpu" {
            continue;
        }
        let values: Vec<u64> = fields.filter_map(|field| field.parse().ok()).collect();
        // user nice system idle iowait irq softirq steal …
        let at = |index: usize| values.get(index).copied().unwrap_or(0);
        cpus.insert(
            name.to_string(),
            CpuTimes {
                user: at(0) + at(1),
                system: at(2) + at(5) + at(6),
                idle: at(3) + at(4),
                total: values.iter().take(8).sum(),
            },
        );
    }
    cpus
}

/// Memory in bytes from `/proc/meminfo`.
pub fn parse_meminfo(text: &str) -> HostMemoryStats {
    let kib = |key: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(key)?.strip_prefix(':'))
            .and_then(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
            .unwrap_or(0)
            * 1024
    };
    let total = kib("MemTotal");
    let available = kib("MemAvailable");
    HostMemoryStats {
        total,
        available,
        used: total.saturating_sub(available),
        free: kib("MemFree"),
    }
}

/// Percentages of each CPU's time since `previous` (zero when there is no previous sample).
pub fn cpu_percentages(
    previous: &BTreeMap<String, CpuTimes>,
    current: &BTreeMap<String, CpuTimes>,
) -> Vec<HostCpuStats> {
    current
        .iter()
        .map(|(name, now)| {
            let before = previous.get(name).copied().unwrap_or(*now);
            let elapsed = now.total.saturating_sub(before.total) as f64;
            let percent = |now: u64, before: u64| {
                if elapsed > 0.0 {
                    now.saturating_sub(before) as f64 * 100.0 / elapsed
                } else {
                    0.0
                }
            };
            let user = percent(now.user, before.user);
            let system = percent(now.system, before.system);
            let idle = percent(now.idle, before.idle);
            HostCpuStats {
                cpu: name.clone(),
                user,
                system,
                idle,
                total: (user + system).min(100.0),
            }
        })
        .collect()
}

/// The filesystem holding `path`: size, use and inode use, from `statvfs`.
pub(crate) fn disk_stats(path: &Path) -> Option<HostDiskStats> {
    let stat = nix::sys::statvfs::statvfs(path).ok()?;
    let block = stat.fragment_size();
    let size = stat.blocks() * block;
    let available = stat.blocks_available() * block;
    let used = size.saturating_sub(stat.blocks_free() * block);
    let inodes = stat.files();
    let percent = |part: u64, whole: u64| {
        if whole == 0 {
            0.0
        } else {
            part as f64 * 100.0 / whole as f64
        }
    };
    Some(HostDiskStats {
        device: String::new(),
        mountpoint: path.display().to_string(),
        size,
        used,
        available,
        used_percent: percent(used, used + available),
        inodes_used_percent: percent(inodes.saturating_sub(stat.files_free()), inodes),
    })
}

/// Collects [`HostStats`], keeping the previous CPU sample for percentages.
#[derive(Debug)]
pub struct HostStatsCollector {
    data_dir: PathBuf,
    alloc_dir: PathBuf,
    previous: Mutex<BTreeMap<String, CpuTimes>>,
    /// The node's CPU in MHz over all cores (its fingerprint), for `CPUTicksConsumed`.
    cpu_total_mhz: f64,
    /// The device the data dir lives on (the node's `unique.storage.volume`): the CLI finds
    /// the data dir's disk among `DiskStats` by it.
    storage_device: String,
}

/// Nomad's `CPUTicksConsumed`: the MHz in use, each core's busy share of its part of
/// `cpu_total_mhz`.
pub fn cpu_ticks_consumed(cpus: &[HostCpuStats], cpu_total_mhz: f64) -> f64 {
    if cpus.is_empty() {
        return 0.0;
    }
    let per_core_mhz = cpu_total_mhz / cpus.len() as f64;
    cpus.iter()
        .map(|cpu| cpu.total / 100.0 * per_core_mhz)
        .sum()
}

impl HostStatsCollector {
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        let data_dir = data_dir.into();
        let alloc_dir = data_dir.join("alloc");
        let previous = std::fs::read_to_string("/proc/stat")
            .map(|text| parse_proc_stat(&text))
            .unwrap_or_default();
        Self {
            data_dir,
            alloc_dir,
            previous: Mutex::new(previous),
            cpu_total_mhz: 0.0,
            storage_device: String::new(),
        }
    }

    /// Names the device the data dir lives on (the node's `unique.storage.volume`).
    pub fn with_storage_device(mut self, device: impl Into<String>) -> Self {
        self.storage_device = device.into();
        self
    }

    /// Sets the node's CPU in MHz over all cores; without it `CPUTicksConsumed` is 0.
    pub fn with_cpu_total_mhz(mut self, cpu_total_mhz: i64) -> Self {
        self.cpu_total_mhz = cpu_total_mhz as f64;
        self
    }

    /// Reads the machine now. `now_unix_ns` stamps the sample.
    pub fn collect(&self, now_unix_ns: i64) -> HostStats {
        let current = std::fs::read_to_string("/proc/stat")
            .map(|text| parse_proc_stat(&text))
            .unwrap_or_default();
        let cpu = {
            // The map is replaced whole; a poisoned lock still holds a complete sample.
            let mut previous = self
                .previous
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let cpu = cpu_percentages(&previous, &current);
            *previous = current;
            cpu
        };
        let memory = std::fs::read_to_string("/proc/meminfo")
            .map(|text| parse_meminfo(&text))
            .unwrap_or_default();
        let uptime = std::fs::read_to_string("/proc/uptime")
            .ok()
            .and_then(|text| text.split_whitespace().next()?.parse::<f64>().ok())
            .map_or(0, |seconds| seconds as u64);
        let alloc_root = if self.alloc_dir.exists() {
            &self.alloc_dir
        } else {
            &self.data_dir
        };
        let cpu_ticks_consumed = cpu_ticks_consumed(&cpu, self.cpu_total_mhz);
        HostStats {
            memory,
            cpu,
            disk_stats: disk_stats(&self.data_dir)
                .map(|disk| HostDiskStats {
                    device: self.storage_device.clone(),
                    ..disk
                })
                .into_iter()
                .collect(),
            alloc_dir_stats: disk_stats(alloc_root),
            device_stats: Vec::new(),
            uptime,
            timestamp: now_unix_ns,
            cpu_ticks_consumed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT_BEFORE: &str = "cpu  10 0 10 80 0 0 0 0 0 0\ncpu0 10 0 10 80 0 0 0 0 0 0\nintr 1\n";
    const STAT_AFTER: &str = "cpu  40 0 20 140 0 0 0 0 0 0\ncpu0 40 0 20 140 0 0 0 0 0 0\nintr 1\n";

    #[test]
    fn ticks_consumed_are_each_cores_busy_share_of_its_mhz() {
        let core = |total: f64| HostCpuStats {
            cpu: String::new(),
            user: total,
            system: 0.0,
            idle: 100.0 - total,
            total,
        };
        // Two cores of a 6000 MHz node, one full and one a quarter busy.
        let ticks = cpu_ticks_consumed(&[core(100.0), core(25.0)], 6000.0);
        assert!((ticks - 3750.0).abs() < 1e-9, "{ticks}");
        assert_eq!(cpu_ticks_consumed(&[], 6000.0), 0.0);
    }

    #[test]
    fn cpu_percentages_come_from_the_difference_between_samples() {
        let before = parse_proc_stat(STAT_BEFORE);
        let after = parse_proc_stat(STAT_AFTER);
        assert_eq!(after.len(), 1, "the aggregate line is skipped");
        let stats = cpu_percentages(&before, &after);
        assert_eq!(stats[0].cpu, "cpu0");
        // 100 jiffies passed: 30 user, 10 system, 60 idle.
        assert!((stats[0].user - 30.0).abs() < 1e-9);
        assert!((stats[0].system - 10.0).abs() < 1e-9);
        assert!((stats[0].idle - 60.0).abs() < 1e-9);
        assert!((stats[0].total - 40.0).abs() < 1e-9);
        // Without a previous sample nothing is known yet.
        assert_eq!(cpu_percentages(&BTreeMap::new(), &after)[0].total, 0.0);
    }

    #[test]
    fn meminfo_is_read_in_bytes() {
        let memory = parse_meminfo(
            "MemTotal:       1000 kB\nMemFree:         200 kB\nMemAvailable:    600 kB\n",
        );
        assert_eq!(memory.total, 1_024_000);
        assert_eq!(memory.free, 204_800);
        assert_eq!(memory.available, 614_400);
        assert_eq!(memory.used, 409_600);
    }

    #[test]
    fn this_machine_reports_memory_cpus_disk_and_uptime() {
        let dir = tempfile::tempdir().expect("temp dir");
        let collector = HostStatsCollector::new(dir.path());
        let stats = collector.collect(1);
        assert!(stats.memory.total > 0);
        assert!(!stats.cpu.is_empty());
        assert!(stats.uptime > 0);
        assert!(stats.disk_stats[0].size > 0);
        assert!(stats.alloc_dir_stats.is_some());
    }
}
