//! Node fingerprinting: what this machine is and what it offers, in the attribute names Nomad
//! uses (`kernel.name`, `cpu.numcores`, `memory.totalbytes`, `unique.hostname`, `driver.exec`,
//! …) so that job constraints written for Nomad (`${attr.kernel.name}`) work unchanged; the
//! schedulable resources (CPU shares in MHz, memory and disk in MB); and the health of the task
//! drivers.
//!
//! Every reader is split in two: a pure parser over the text of a `/proc` or `/etc` file (tested
//! on fixed inputs), and a thin function that reads the live file. A file that cannot be read
//! gives a fallback value and a warning, never an error: a node with a partial fingerprint is
//! still a node.
//!
//! **Not here**: node identity and registration (the `node` module), running the drivers.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use drover_structs::{
    DriverInfo, NodeCpuResources, NodeDiskResources, NodeMemoryResources, NodeResources, Timestamp,
};

use crate::mountinfo::{MountLine, parse_mountinfo_line};

/// CPU speed assumed when neither cpufreq nor `/proc/cpuinfo` tells it (Nomad does the same).
pub const FALLBACK_CPU_MHZ: u64 = 1000;

/// What the fingerprint needs from the agent.
#[derive(Debug, Clone)]
pub struct FingerprintInput {
    /// The client's data dir; its file system's free space is the node's disk.
    pub data_dir: PathBuf,
    /// The Nomad version the agent presents itself as (`nomad.version`).
    pub agent_version: String,
    /// The time of the fingerprint, as the drivers' `UpdateTime` carries it.
    pub update_time: Timestamp,
}

/// The result of fingerprinting: attributes, resources and drivers of the node.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeFingerprint {
    pub attributes: BTreeMap<String, String>,
    pub resources: NodeResources,
    pub drivers: BTreeMap<String, DriverInfo>,
}

/// What `/proc/cpuinfo` tells about the processors.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CpuInfo {
    pub logical_cores: u32,
    pub model_name: Option<String>,
    /// The highest "cpu MHz" seen, rounded down.
    pub mhz: Option<u64>,
}

/// Which cgroup hierarchy the machine has, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupMount {
    pub mount_point: PathBuf,
    /// `v1` or `v2`, as Nomad's `unique.cgroup.version`.
    pub version: &'static str,
    /// For v1, the controllers mounted (cpu, memory, pids, …); empty for v2.
    pub v1_controllers: Vec<String>,
}

/// Fingerprints this machine.
pub fn fingerprint_host(input: &FingerprintInput) -> NodeFingerprint {
    let cpu_info = read_proc_file("/proc/cpuinfo")
        .map(|text| parse_cpuinfo(&text))
        .unwrap_or_default();
    let logical_cores = if cpu_info.logical_cores > 0 {
        cpu_info.logical_cores
    } else {
        std::thread::available_parallelism()
            .map(|count| u32::try_from(count.get()).unwrap_or(u32::MAX))
            .unwrap_or(1)
    };
    let cpu_mhz = read_cpufreq_max_mhz()
        .or(cpu_info.mhz)
        .filter(|mhz| *mhz > 0)
        .unwrap_or(FALLBACK_CPU_MHZ);
    let total_compute = cpu_mhz.saturating_mul(u64::from(logical_cores));
    // The cores tasks may reserve: those the agent itself may run on (its cpuset and affinity,
    // as Nomad reads its parent cgroup's cpuset), every core when that cannot be read.
    let reservable_cores = read_proc_file("/proc/self/status")
        .and_then(|text| parse_cpus_allowed_list(&text))
        .filter(|cores| !cores.is_empty())
        .unwrap_or_else(|| {
            (0..logical_cores)
                .filter_map(|core| u16::try_from(core).ok())
                .collect()
        });

    let memory_total_bytes = read_proc_file("/proc/meminfo")
        .and_then(|text| parse_meminfo_total_bytes(&text))
        .unwrap_or(0);
    if memory_total_bytes == 0 {
        tracing::warn!("could not read the total memory from /proc/meminfo");
    }

    let mountinfo = read_proc_file("/proc/self/mountinfo").unwrap_or_default();
    let cgroup = parse_cgroup_mount(&mountinfo);
    let storage = disk_space(&input.data_dir);

    let mut attributes = BTreeMap::new();
    let mut set = |key: &str, value: String| {
        attributes.insert(key.to_string(), value);
    };
    set("kernel.name", std::env::consts::OS.to_string());
    set("kernel.arch", std::env::consts::ARCH.to_string());
    if let Some(release) = read_proc_file("/proc/sys/kernel/osrelease") {
        set("kernel.version", release.trim().to_string());
    }
    let os_release = std::fs::read_to_string("/etc/os-release")
        .or_else(|_| std::fs::read_to_string("/usr/lib/os-release"))
        .unwrap_or_default();
    let (os_name, os_version) = parse_os_release(&os_release);
    if let Some(name) = os_name {
        set("os.name", name);
    }
    if let Some(version) = os_version {
        set("os.version", version);
    }
    set("os.signals", drover_driver::SIGNAL_NAMES.join(","));
    set("cpu.arch", go_arch_name(std::env::consts::ARCH).to_string());
    set("cpu.numcores", logical_cores.to_string());
    set("cpu.reservablecores", reservable_cores.len().to_string());
    set("cpu.frequency", cpu_mhz.to_string());
    set("cpu.totalcompute", total_compute.to_string());
    set("cpu.usablecompute", total_compute.to_string());
    if let Some(model) = cpu_info.model_name.clone() {
        set("cpu.modelname", model);
    }
    set("memory.totalbytes", memory_total_bytes.to_string());
    if let Some(hostname) = hostname() {
        set("unique.hostname", hostname);
    }
    if let Some(volume) = mount_source_of(&mountinfo, &input.data_dir) {
        set("unique.storage.volume", volume);
    }
    if let Some(space) = storage {
        set("unique.storage.bytestotal", space.total_bytes.to_string());
        set("unique.storage.bytesfree", space.free_bytes.to_string());
    }
    if let Some(cgroup) = &cgroup {
        set(
            "unique.cgroup.mountpoint",
            cgroup.mount_point.display().to_string(),
        );
        set("unique.cgroup.version", cgroup.version.to_string());
    }
    set("nomad.version", input.agent_version.clone());

    let drivers = fingerprint_drivers(
        nix::unistd::geteuid().is_root(),
        cgroup.as_ref(),
        input.update_time,
    );
    for (name, driver) in &drivers {
        if driver.detected && driver.healthy {
            attributes.insert(format!("driver.{name}"), "1".to_string());
        }
    }

    let resources = NodeResources {
        cpu: NodeCpuResources {
            cpu_shares: i64::try_from(total_compute).unwrap_or(i64::MAX),
            total_cpu_cores: i64::from(logical_cores),
            reservable_cpu_cores: reservable_cores,
        },
        memory: NodeMemoryResources {
            memory_mb: i64::try_from(memory_total_bytes / (1024 * 1024)).unwrap_or(i64::MAX),
        },
        disk: NodeDiskResources {
            disk_mb: storage
                .map(|space| i64::try_from(space.free_bytes / (1024 * 1024)).unwrap_or(i64::MAX))
                .unwrap_or(0),
        },
        ..NodeResources::default()
    };

    NodeFingerprint {
        attributes,
        resources,
        drivers,
    }
}

/// The health of the built-in drivers: `raw_exec` needs nothing; `exec` needs root (to enter
/// namespaces and chroot) and a cgroup hierarchy (to limit and account the task);
/// `connect_proxy` (Connect sidecars) needs root to enter the group's network namespace.
pub fn fingerprint_drivers(
    running_as_root: bool,
    cgroup: Option<&CgroupMount>,
    update_time: Timestamp,
) -> BTreeMap<String, DriverInfo> {
    let mut drivers = BTreeMap::new();
    drivers.insert(
        "raw_exec".to_string(),
        DriverInfo {
            attributes: BTreeMap::from([("driver.raw_exec".to_string(), "1".to_string())]),
            detected: true,
            healthy: true,
            health_description: "Healthy".to_string(),
            update_time,
        },
    );
    let exec_problem = if !running_as_root {
        Some("exec driver must run as root")
    } else if cgroup.is_none_or(|mount| !cgroup_has_exec_controllers(mount)) {
        Some("cgroups are unavailable or lack the cpu, memory and pids controllers")
    } else {
        None
    };
    let mut exec_attributes = BTreeMap::new();
    if exec_problem.is_none() {
        exec_attributes.insert("driver.exec".to_string(), "1".to_string());
    }
    // The built-in Connect sidecar proxy (the agent's own binary, in the group's network
    // namespace, which only root can enter).
    let connect_proxy = drover_structs::connect::CONNECT_PROXY_DRIVER;
    drivers.insert(
        connect_proxy.to_string(),
        DriverInfo {
            attributes: if running_as_root {
                BTreeMap::from([(format!("driver.{connect_proxy}"), "1".to_string())])
            } else {
                BTreeMap::new()
            },
            detected: true,
            healthy: running_as_root,
            health_description: if running_as_root {
                "Healthy"
            } else {
                "the connect_proxy driver must run as root"
            }
            .to_string(),
            update_time,
        },
    );
    drivers.insert(
        "exec".to_string(),
        DriverInfo {
            attributes: exec_attributes,
            detected: true,
            healthy: exec_problem.is_none(),
            health_description: exec_problem.unwrap_or("Healthy").to_string(),
            update_time,
        },
    );
    drivers
}

fn cgroup_has_exec_controllers(mount: &CgroupMount) -> bool {
    if mount.version == "v2" {
        return true;
    }
    ["cpu", "memory", "pids"].iter().all(|controller| {
        mount
            .v1_controllers
            .iter()
            .any(|mounted| mounted == controller)
    })
}

fn read_proc_file(path: &str) -> Option<String> {
    match std::fs::read_to_string(path) {
        Ok(text) => Some(text),
        Err(error) => {
            tracing::warn!(path, %error, "fingerprint could not read file");
            None
        }
    }
}

/// Parses `/proc/cpuinfo`: counts `processor` entries, takes the first `model name` and the
/// highest `cpu MHz`.
/// The `Cpus_allowed_list` of a `/proc/<pid>/status` text: the cpus the process may run on.
pub fn parse_cpus_allowed_list(status: &str) -> Option<Vec<u16>> {
    status
        .lines()
        .find_map(|line| line.strip_prefix("Cpus_allowed_list:"))
        .and_then(drover_driver::parse_cpu_list)
}

pub fn parse_cpuinfo(text: &str) -> CpuInfo {
    let mut info = CpuInfo::default();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let (key, value) = (key.trim(), value.trim());
        match key {
            "processor" => info.logical_cores += 1,
            "model name" if info.model_name.is_none() && !value.is_empty() => {
                info.model_name = Some(value.to_string());
            }
            "cpu MHz" => {
                if let Ok(mhz) = value.parse::<f64>()
                    && mhz.is_finite()
                    && mhz > 0.0
                {
                    // Truncation to whole MHz is intended.
                    let whole_mhz = mhz as u64;
                    info.mhz = Some(info.mhz.map_or(whole_mhz, |seen| seen.max(whole_mhz)));
                }
            }
            _ => {}
        }
    }
    info
}

/// The highest maximum frequency cpufreq reports, in MHz.
fn read_cpufreq_max_mhz() -> Option<u64> {
    let khz = std::fs::read_to_string("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()?;
    Some(khz / 1000)
}

/// Parses `MemTotal` out of `/proc/meminfo`, in bytes.
pub fn parse_meminfo_total_bytes(text: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let rest = line.strip_prefix("MemTotal:")?;
        let mut words = rest.split_whitespace();
        let amount = words.next()?.parse::<u64>().ok()?;
        let multiplier = match words.next() {
            Some("kB") | Some("KB") => 1024,
            None => 1,
            Some(_) => return None,
        };
        amount.checked_mul(multiplier)
    })
}

/// Parses `ID` and `VERSION_ID` out of an os-release file, unquoted.
pub fn parse_os_release(text: &str) -> (Option<String>, Option<String>) {
    let mut name = None;
    let mut version = None;
    for line in text.lines() {
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let value = value
            .trim()
            .trim_matches('"')
            .trim_matches('\'')
            .to_string();
        match key.trim() {
            "ID" if !value.is_empty() => name = Some(value),
            "VERSION_ID" if !value.is_empty() => version = Some(value),
            _ => {}
        }
    }
    (name, version)
}

/// Go's name for an architecture (`cpu.arch` is Go's `GOARCH` in Nomad).
pub fn go_arch_name(rust_arch: &str) -> &str {
    match rust_arch {
        "x86_64" => "amd64",
        "x86" => "386",
        "aarch64" => "arm64",
        "powerpc64" => "ppc64",
        "loongarch64" => "loong64",
        other => other,
    }
}

fn hostname() -> Option<String> {
    let name = nix::unistd::gethostname().ok()?.into_string().ok()?;
    (!name.is_empty()).then_some(name)
}

/// Finds the cgroup hierarchy: a cgroup2 file system at `/sys/fs/cgroup` is v2 (unified);
/// otherwise v1 controllers mounted under `/sys/fs/cgroup/<controller>` make it v1.
pub fn parse_cgroup_mount(mountinfo: &str) -> Option<CgroupMount> {
    let lines: Vec<MountLine<'_>> = mountinfo.lines().filter_map(parse_mountinfo_line).collect();
    if let Some(unified) = lines
        .iter()
        .find(|line| line.fs_type == "cgroup2" && line.mount_point == "/sys/fs/cgroup")
    {
        return Some(CgroupMount {
            mount_point: PathBuf::from(&unified.mount_point),
            version: "v2",
            v1_controllers: Vec::new(),
        });
    }
    let mut v1_controllers: Vec<String> = lines
        .iter()
        .filter(|line| line.fs_type == "cgroup")
        .flat_map(|line| line.super_options.split(','))
        .filter(|option| {
            matches!(
                *option,
                "cpu" | "cpuacct" | "cpuset" | "memory" | "pids" | "devices" | "freezer" | "blkio"
            )
        })
        .map(str::to_string)
        .collect();
    if v1_controllers.is_empty() {
        return None;
    }
    v1_controllers.sort();
    v1_controllers.dedup();
    Some(CgroupMount {
        mount_point: PathBuf::from("/sys/fs/cgroup"),
        version: "v1",
        v1_controllers,
    })
}

/// The device (mount source) of the file system holding `path`: the mount with the longest
/// mount point that is a prefix of `path`.
pub fn mount_source_of(mountinfo: &str, path: &Path) -> Option<String> {
    let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    mountinfo
        .lines()
        .filter_map(parse_mountinfo_line)
        .filter(|line| path.starts_with(&line.mount_point))
        // The last of equally long mount points is the one on top.
        .enumerate()
        .max_by_key(|(order, line)| (line.mount_point.len(), *order))
        .map(|(_, line)| line.source.to_string())
}

#[derive(Debug, Clone, Copy)]
struct DiskSpace {
    total_bytes: u64,
    free_bytes: u64,
}

fn disk_space(path: &Path) -> Option<DiskSpace> {
    match nix::sys::statvfs::statvfs(path) {
        Ok(stats) => {
            let fragment = stats.fragment_size();
            Some(DiskSpace {
                total_bytes: stats.blocks().saturating_mul(fragment),
                free_bytes: stats.blocks_available().saturating_mul(fragment),
            })
        }
        Err(error) => {
            tracing::warn!(path = %path.display(), %error, "fingerprint could not stat the data dir");
            None
        }
    }
}

/// Link speed assumed when the interface does not report one (Nomad's default `network_speed`).
pub const DEFAULT_NETWORK_SPEED_MBITS: i64 = 1000;

/// The node's network for task-level network asks (Nomad's `NodeResources.Networks`): the
/// interface holding `address` (the node's advertised address), as one host address
/// (`<ip>/32` or `/128`) with the interface's bandwidth. `None` when no interface holds it.
pub fn host_network(address: &str) -> Option<drover_structs::NetworkResource> {
    let ip: std::net::IpAddr = address.parse().ok()?;
    let device = interface_holding(ip)?;
    let speed = std::fs::read_to_string(Path::new("/sys/class/net").join(&device).join("speed"))
        .ok()
        .and_then(|text| parse_link_speed(&text));
    Some(network_resource(&device, ip, speed))
}

/// The network resource of `device` at `ip` with link speed `speed` (Mb/s), the default speed
/// when the link does not tell.
pub fn network_resource(
    device: &str,
    ip: std::net::IpAddr,
    speed: Option<i64>,
) -> drover_structs::NetworkResource {
    let prefix = if ip.is_ipv4() { 32 } else { 128 };
    drover_structs::NetworkResource {
        mode: "host".to_string(),
        device: device.to_string(),
        cidr: format!("{ip}/{prefix}"),
        ip: ip.to_string(),
        mbits: speed.unwrap_or(DEFAULT_NETWORK_SPEED_MBITS),
        ..drover_structs::NetworkResource::default()
    }
}

/// The link speed in `/sys/class/net/<dev>/speed` (Mb/s); none for a link that reports
/// nothing usable (loopback, a down link's `-1`).
pub fn parse_link_speed(text: &str) -> Option<i64> {
    text.lines()
        .next()?
        .trim()
        .parse::<i64>()
        .ok()
        .filter(|speed| *speed > 0)
}

/// The name of the interface that has `ip` among its addresses.
fn interface_holding(ip: std::net::IpAddr) -> Option<String> {
    let interfaces = nix::ifaddrs::getifaddrs().ok()?;
    for interface in interfaces {
        let Some(address) = interface.address else {
            continue;
        };
        let held = if let Some(v4) = address.as_sockaddr_in() {
            std::net::IpAddr::V4(v4.ip())
        } else if let Some(v6) = address.as_sockaddr_in6() {
            std::net::IpAddr::V6(v6.ip())
        } else {
            continue;
        };
        if held == ip {
            return Some(interface.interface_name);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const CPUINFO: &str = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\ncpu MHz\t\t: 2449.998\n\nprocessor\t: 1\nmodel name\t: AMD EPYC 7B13\ncpu MHz\t\t: 2596.122\n\n";

    #[test]
    fn reservable_cores_come_from_the_cpus_allowed_list() {
        let status = "Name:\tdrover\nCpus_allowed:\t3b\nCpus_allowed_list:\t0-1,3-5\nMems_allowed_list:\t0\n";
        assert_eq!(parse_cpus_allowed_list(status), Some(vec![0, 1, 3, 4, 5]));
        assert_eq!(parse_cpus_allowed_list("Name:\tx\n"), None);
        let live = std::fs::read_to_string("/proc/self/status").unwrap();
        let cores = parse_cpus_allowed_list(&live).unwrap();
        assert!(!cores.is_empty());
        let affinity = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)).unwrap();
        for core in &cores {
            assert!(affinity.is_set(usize::from(*core)).unwrap(), "core {core}");
        }
    }

    #[test]
    fn cpuinfo_counts_processors_and_takes_the_highest_frequency() {
        let info = parse_cpuinfo(CPUINFO);
        assert_eq!(info.logical_cores, 2);
        assert_eq!(info.model_name.as_deref(), Some("AMD EPYC 7B13"));
        assert_eq!(info.mhz, Some(2596));
        assert_eq!(
            parse_cpuinfo("processor : 0\ncpu MHz : nonsense\n").mhz,
            None
        );
    }

    #[test]
    fn meminfo_total_is_read_in_bytes() {
        let text = "MemTotal:        8130560 kB\nMemFree:          123 kB\n";
        assert_eq!(parse_meminfo_total_bytes(text), Some(8_130_560 * 1024));
        assert_eq!(parse_meminfo_total_bytes("MemFree: 1 kB\n"), None);
        assert_eq!(parse_meminfo_total_bytes("MemTotal: lots kB\n"), None);
    }

    #[test]
    fn os_release_id_and_version_are_unquoted() {
        let text = "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nID=debian\nVERSION_ID=\"12\"\n";
        assert_eq!(
            parse_os_release(text),
            (Some("debian".to_string()), Some("12".to_string()))
        );
    }

    const MOUNTINFO_V1: &str = "\
22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
30 22 0:26 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755
31 30 0:27 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
32 30 0:28 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
33 30 0:29 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
34 30 0:30 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
40 22 0:40 / /srv/my\\040data rw,relatime - xfs /dev/vdb1 rw
";

    const MOUNTINFO_V2: &str = "\
22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
30 22 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate
";

    #[test]
    fn cgroup_version_is_found_in_mountinfo() {
        let v1 = parse_cgroup_mount(MOUNTINFO_V1);
        assert_eq!(
            v1,
            Some(CgroupMount {
                mount_point: PathBuf::from("/sys/fs/cgroup"),
                version: "v1",
                v1_controllers: vec!["cpu".into(), "memory".into(), "pids".into()],
            })
        );
        let v2 = parse_cgroup_mount(MOUNTINFO_V2);
        assert_eq!(v2.map(|mount| mount.version), Some("v2"));
        assert_eq!(
            parse_cgroup_mount("22 1 254:0 / / rw - ext4 /dev/vda rw\n"),
            None
        );
    }

    #[test]
    fn storage_volume_is_the_source_of_the_deepest_mount() {
        assert_eq!(
            mount_source_of(MOUNTINFO_V1, Path::new("/srv/my data/drover")),
            Some("/dev/vdb1".to_string())
        );
        assert_eq!(
            mount_source_of(MOUNTINFO_V1, Path::new("/srv/other")),
            Some("/dev/vda".to_string())
        );
    }

    #[test]
    fn exec_is_healthy_only_as_root_with_cgroups() {
        let v2 = parse_cgroup_mount(MOUNTINFO_V2);
        let healthy = fingerprint_drivers(true, v2.as_ref(), Timestamp::ZERO);
        assert!(healthy["exec"].healthy);
        assert_eq!(
            healthy["exec"]
                .attributes
                .get("driver.exec")
                .map(String::as_str),
            Some("1")
        );
        let not_root = fingerprint_drivers(false, v2.as_ref(), Timestamp::ZERO);
        assert!(not_root["exec"].detected && !not_root["exec"].healthy);
        assert_eq!(
            not_root["exec"].health_description,
            "exec driver must run as root"
        );
        let no_cgroups = fingerprint_drivers(true, None, Timestamp::ZERO);
        assert!(!no_cgroups["exec"].healthy);
        assert!(no_cgroups["raw_exec"].healthy);
    }

    #[test]
    fn this_machine_fingerprints_with_real_cpu_memory_and_disk() {
        let data_dir = tempfile::tempdir().unwrap_or_else(|error| panic!("tempdir: {error}"));
        let fingerprint = fingerprint_host(&FingerprintInput {
            data_dir: data_dir.path().to_path_buf(),
            agent_version: "1.7.0".to_string(),
            update_time: Timestamp::from_unix_nanos(1_700_000_000_000_000_000),
        });
        let attribute = |key: &str| fingerprint.attributes.get(key).cloned().unwrap_or_default();

        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let expected_memory = parse_meminfo_total_bytes(&meminfo).unwrap_or_default();
        assert!(expected_memory > 0);
        assert_eq!(attribute("memory.totalbytes"), expected_memory.to_string());
        assert_eq!(
            fingerprint.resources.memory.memory_mb,
            (expected_memory / (1024 * 1024)) as i64
        );

        let cores = fingerprint.resources.cpu.total_cpu_cores;
        assert!(cores >= 1);
        assert_eq!(attribute("cpu.numcores"), cores.to_string());
        let mhz: i64 = attribute("cpu.frequency").parse().unwrap_or_default();
        assert!(mhz > 0);
        assert_eq!(fingerprint.resources.cpu.cpu_shares, mhz * cores);
        assert_eq!(attribute("cpu.totalcompute"), (mhz * cores).to_string());

        assert!(fingerprint.resources.disk.disk_mb > 0);
        assert_eq!(attribute("kernel.name"), "linux");
        assert!(!attribute("kernel.version").is_empty());
        assert!(!attribute("unique.hostname").is_empty());
        assert_eq!(attribute("nomad.version"), "1.7.0");
        assert_eq!(attribute("driver.raw_exec"), "1");
        assert!(fingerprint.drivers["raw_exec"].healthy);

        let signals = attribute("os.signals");
        assert!(signals.contains("SIGUSR1"), "{signals}");
        for signal in signals.split(',') {
            assert!(
                crate::allocrunner::normalize_signal(signal).is_ok(),
                "the node advertises {signal}, which the client must accept"
            );
        }
        // This machine's cgroup layout, read independently of the parser under test.
        let has_cgroups = std::path::Path::new("/sys/fs/cgroup/cgroup.controllers").exists()
            || std::path::Path::new("/sys/fs/cgroup/memory").exists();
        let is_root = nix::unistd::geteuid().is_root();
        assert_eq!(fingerprint.drivers["exec"].healthy, has_cgroups && is_root);
        assert_eq!(attribute("driver.exec") == "1", has_cgroups && is_root);
    }

    #[test]
    fn the_loopback_address_is_the_network_of_a_dev_node() {
        let network = host_network("127.0.0.1").expect("loopback holds 127.0.0.1");
        assert_eq!(network.device, "lo");
        assert_eq!(network.cidr, "127.0.0.1/32");
        assert_eq!(network.ip, "127.0.0.1");
        // Loopback reports no link speed: Nomad's default.
        assert_eq!(network.mbits, DEFAULT_NETWORK_SPEED_MBITS);
        assert!(host_network("192.0.2.99").is_none());
    }

    #[test]
    fn link_speed_is_read_when_the_link_tells() {
        assert_eq!(parse_link_speed("10000\n"), Some(10_000));
        assert_eq!(parse_link_speed("-1\n"), None);
        assert_eq!(parse_link_speed(""), None);
        let network = network_resource("eth0", "fe80::1".parse().unwrap(), Some(25_000));
        assert_eq!(
            (network.cidr.as_str(), network.mbits),
            ("fe80::1/128", 25_000)
        );
    }
}
