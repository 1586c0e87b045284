//! Task cgroups on cgroupfs, v1, v2 and the hybrid layout: create, limit, join, list, signal,
//! freeze-and-kill, measure (memory, cpu, OOM kills) and remove.
//!
//! The kernel sits behind a seam: every function takes the cgroupfs root as a `&Path`
//! (normally `/sys/fs/cgroup`), so unit tests run against a tempdir filled with the kernel's
//! file formats. Nothing here knows about allocations or tasks beyond the relative cgroup name it
//! is given (for example `drover/<alloc_id>.<task>`), and nothing here decides policy (which limits
//! a task gets, when to kill it).
//!
//! Layouts, detected at runtime by [`detect_mode`]:
//! - **v2** (`<root>/cgroup.controllers` exists): one directory `<root>/<name>`; controllers are
//!   enabled in every ancestor's `cgroup.subtree_control`.
//! - **v1** (`<root>/<controller>` directories): one directory per controller
//!   (`memory`, `cpu`, `cpuacct`, `pids`, `freezer`, `cpuset`), each `<root>/<ctrl>/<name>`.
//! - **hybrid** (v1 plus a controller-less cgroup2 tree at `<root>/unified`): as v1, and the task is
//!   also placed in `<root>/unified/<name>`, which gives `cgroup.kill` and `cgroup.freeze` on
//!   kernels that have them even though no controller is attached there.

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// Errors of the cgroup subsystem. Every variant names the path involved.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error("no cgroup filesystem found under {root}")]
    NoCgroupFilesystem { root: PathBuf },
    #[error("invalid cgroup name {name:?}: {reason}")]
    InvalidName { name: String, reason: &'static str },
    #[error("cgroup i/o on {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("unexpected content in {path}: {detail}")]
    Parse { path: PathBuf, detail: String },
    #[error("sending signal {signal} to pid {pid} in cgroup {name}")]
    Signal {
        name: String,
        pid: i32,
        signal: i32,
        #[source]
        source: Errno,
    },
    #[error("processes {remaining:?} still alive in cgroup {name} after {waited:?}")]
    KillTimedOut {
        name: String,
        remaining: Vec<i32>,
        waited: Duration,
    },
}

fn io_error(path: &Path) -> impl FnOnce(io::Error) -> CgroupError + '_ {
    move |source| CgroupError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The cgroup layout of a host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupMode {
    /// Controllers on separate v1 hierarchies; `unified` says whether a (controller-less)
    /// cgroup2 tree is mounted at `<root>/unified` as well (the hybrid layout).
    V1 { unified: bool },
    /// The single cgroup2 hierarchy.
    V2,
}

/// The v1 controllers a task cgroup uses, when the host has them.
pub const V1_CONTROLLERS: [&str; 6] = ["memory", "cpu", "cpuacct", "pids", "freezer", "cpuset"];

/// The v2 controllers a task cgroup enables, when the root offers them.
const V2_CONTROLLERS: [&str; 4] = ["memory", "cpu", "pids", "cpuset"];

/// Finds the cgroup layout under `root` (normally `/sys/fs/cgroup`).
pub fn detect_mode(root: &Path) -> Result<CgroupMode, CgroupError> {
    if root.join("cgroup.controllers").is_file() {
        return Ok(CgroupMode::V2);
    }
    let has_v1 = V1_CONTROLLERS
        .iter()
        .any(|controller| root.join(controller).join("cgroup.procs").is_file());
    if has_v1 {
        let unified = root.join("unified").join("cgroup.controllers").is_file();
        return Ok(CgroupMode::V1 { unified });
    }
    Err(CgroupError::NoCgroupFilesystem {
        root: root.to_path_buf(),
    })
}

/// Limits applied when a task cgroup is created. `None` leaves the kernel default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CgroupLimits {
    /// Soft limit (v1 `memory.soft_limit_in_bytes`, v2 `memory.low`).
    pub memory_soft_bytes: Option<u64>,
    /// Hard limit (v1 `memory.limit_in_bytes` and `memory.memsw.limit_in_bytes`, so no swap;
    /// v2 `memory.max` with `memory.swap.max` 0).
    pub memory_hard_bytes: Option<u64>,
    /// Relative cpu weight as v1 shares (2..=262144); converted to `cpu.weight` on v2.
    pub cpu_shares: Option<u64>,
    /// Maximum number of processes and threads (`pids.max`).
    pub pids_max: Option<u64>,
    /// Cpus the task may run on, in the kernel's list format (`0-1,3`).
    pub cpuset_cpus: Option<String>,
}

/// Memory figures of a cgroup, in bytes. Fields the kernel does not offer are 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CgroupMemoryStats {
    pub rss: u64,
    pub cache: u64,
    pub swap: u64,
    pub usage: u64,
    pub max_usage: u64,
    pub kernel_usage: u64,
    pub kernel_max_usage: u64,
}

/// Cumulative cpu figures of a cgroup.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CgroupCpuStats {
    pub total_ns: u64,
    pub user_ns: u64,
    pub system_ns: u64,
    pub throttled_periods: u64,
    pub throttled_time_ns: u64,
}

/// One directory of a task cgroup and what it is for.
#[derive(Debug, Clone, PartialEq, Eq)]
struct CgroupDir {
    /// v1 controller name, `"unified"` for the hybrid cgroup2 tree, `""` on pure v2.
    kind: &'static str,
    /// `<root>/<mount>` (where parents are created from).
    mount: PathBuf,
    /// `<mount>/<name>`.
    path: PathBuf,
}

/// A task's cgroup, by name, under one cgroupfs root. Cheap to build: [`TaskCgroup::open`] only
/// computes paths; [`TaskCgroup::create`] makes the directories.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskCgroup {
    mode: CgroupMode,
    name: String,
    dirs: Vec<CgroupDir>,
}

/// How long a v1 freezer may take to report `FROZEN` before the kill loop goes on regardless.
const FREEZE_WAIT: Duration = Duration::from_millis(500);

fn validate_name(name: &str) -> Result<(), CgroupError> {
    let invalid = |reason| CgroupError::InvalidName {
        name: name.to_string(),
        reason,
    };
    if name.is_empty() {
        return Err(invalid("empty"));
    }
    if name.starts_with('/') {
        return Err(invalid("must be relative"));
    }
    for component in name.split('/') {
        if component.is_empty() || component == "." || component == ".." {
            return Err(invalid("empty, `.` or `..` component"));
        }
        if component.bytes().any(|byte| byte == 0 || byte == b'\n') {
            return Err(invalid("contains a NUL or newline"));
        }
    }
    Ok(())
}

impl TaskCgroup {
    /// Computes the directories of cgroup `name` (relative, e.g. `drover/<alloc>.<task>`) under
    /// `root` for the detected layout. Touches nothing.
    pub fn open(root: &Path, name: &str) -> Result<Self, CgroupError> {
        validate_name(name)?;
        let mode = detect_mode(root)?;
        let mut dirs = Vec::new();
        match mode {
            CgroupMode::V2 => dirs.push(CgroupDir {
                kind: "",
                mount: root.to_path_buf(),
                path: root.join(name),
            }),
            CgroupMode::V1 { unified } => {
                for controller in V1_CONTROLLERS {
                    let mount = root.join(controller);
                    if mount.join("cgroup.procs").is_file() {
                        dirs.push(CgroupDir {
                            kind: controller,
                            path: mount.join(name),
                            mount,
                        });
                    }
                }
                if unified {
                    let mount = root.join("unified");
                    dirs.push(CgroupDir {
                        kind: "unified",
                        path: mount.join(name),
                        mount,
                    });
                }
            }
        }
        Ok(Self {
            mode,
            name: name.to_string(),
            dirs,
        })
    }

    /// The layout this cgroup lives in.
    pub fn mode(&self) -> CgroupMode {
        self.mode
    }

    /// The relative name given to [`TaskCgroup::open`].
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Every directory of this cgroup (one per v1 controller, plus the unified one).
    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        self.dirs.iter().map(|dir| dir.path.as_path())
    }

    /// Whether any directory of this cgroup exists.
    pub fn exists(&self) -> bool {
        self.dirs.iter().any(|dir| dir.path.is_dir())
    }

    fn dir(&self, kind: &str) -> Option<&Path> {
        self.dirs
            .iter()
            .find(|dir| dir.kind == kind)
            .map(|dir| dir.path.as_path())
    }

    /// The cgroup2 directory, if there is one (pure v2, or the hybrid unified tree).
    fn v2_dir(&self) -> Option<&Path> {
        match self.mode {
            CgroupMode::V2 => self.dir(""),
            CgroupMode::V1 { .. } => self.dir("unified"),
        }
    }

    fn memory_dir(&self) -> Option<&Path> {
        match self.mode {
            CgroupMode::V2 => self.dir(""),
            CgroupMode::V1 { .. } => self.dir("memory"),
        }
    }

    /// Creates the directories (and parents) and applies `limits`. Creating an existing cgroup
    /// re-applies the limits.
    pub fn create(&self, limits: &CgroupLimits) -> Result<(), CgroupError> {
        for dir in &self.dirs {
            match (self.mode, dir.kind) {
                (CgroupMode::V2, _) => create_v2_dirs(&dir.mount, &self.name)?,
                (_, "cpuset") => create_v1_cpuset_dirs(&dir.mount, &self.name)?,
                _ => fs::create_dir_all(&dir.path).map_err(io_error(&dir.path))?,
            }
        }
        self.apply_limits(limits)
    }

    fn apply_limits(&self, limits: &CgroupLimits) -> Result<(), CgroupError> {
        match self.mode {
            CgroupMode::V2 => {
                let Some(dir) = self.dir("") else {
                    return Ok(());
                };
                if let Some(soft) = limits.memory_soft_bytes {
                    write_file(&dir.join("memory.low"), &soft.to_string())?;
                }
                if let Some(hard) = limits.memory_hard_bytes {
                    write_file(&dir.join("memory.max"), &hard.to_string())?;
                    write_if_present(&dir.join("memory.swap.max"), "0")?;
                }
                if let Some(shares) = limits.cpu_shares {
                    write_file(
                        &dir.join("cpu.weight"),
                        &cpu_shares_to_weight(shares).to_string(),
                    )?;
                }
                if let Some(pids_max) = limits.pids_max {
                    write_file(&dir.join("pids.max"), &pids_max.to_string())?;
                }
                if let Some(cpus) = &limits.cpuset_cpus {
                    write_file(&dir.join("cpuset.cpus"), cpus)?;
                }
            }
            CgroupMode::V1 { .. } => {
                if let Some(dir) = self.dir("memory") {
                    if let Some(hard) = limits.memory_hard_bytes {
                        write_file(&dir.join("memory.limit_in_bytes"), &hard.to_string())?;
                        // Equal memory+swap and memory limits: no swap for the task.
                        write_if_present(
                            &dir.join("memory.memsw.limit_in_bytes"),
                            &hard.to_string(),
                        )?;
                        write_if_present(&dir.join("memory.swappiness"), "0")?;
                    }
                    if let Some(soft) = limits.memory_soft_bytes {
                        write_file(&dir.join("memory.soft_limit_in_bytes"), &soft.to_string())?;
                    }
                }
                if let (Some(dir), Some(shares)) = (self.dir("cpu"), limits.cpu_shares) {
                    write_file(&dir.join("cpu.shares"), &shares.to_string())?;
                }
                if let (Some(dir), Some(pids_max)) = (self.dir("pids"), limits.pids_max) {
                    write_file(&dir.join("pids.max"), &pids_max.to_string())?;
                }
                if let (Some(dir), Some(cpus)) = (self.dir("cpuset"), &limits.cpuset_cpus) {
                    write_file(&dir.join("cpuset.cpus"), cpus)?;
                }
            }
        }
        Ok(())
    }

    /// Moves `pid` (0: the calling process) into every directory of this cgroup.
    pub fn add_pid(&self, pid: i32) -> Result<(), CgroupError> {
        let pid = pid.to_string();
        for dir in &self.dirs {
            write_file(&dir.path.join("cgroup.procs"), &pid)?;
        }
        Ok(())
    }

    /// The processes in this cgroup (the union over its directories), sorted. A cgroup that does
    /// not exist has none.
    pub fn pids(&self) -> Result<Vec<i32>, CgroupError> {
        let mut pids = BTreeSet::new();
        for dir in &self.dirs {
            let procs = dir.path.join("cgroup.procs");
            let content = match fs::read_to_string(&procs) {
                Ok(content) => content,
                Err(error) if error.kind() == io::ErrorKind::NotFound => continue,
                Err(error) => return Err(io_error(&procs)(error)),
            };
            for line in content.lines().filter(|line| !line.trim().is_empty()) {
                let pid = line.trim().parse::<i32>().map_err(|_| CgroupError::Parse {
                    path: procs.clone(),
                    detail: format!("pid {line:?}"),
                })?;
                pids.insert(pid);
            }
        }
        Ok(pids.into_iter().collect())
    }

    /// Sends `signal` to every process in the cgroup. Processes that exit meanwhile are fine.
    pub fn signal_all(&self, signal: Signal) -> Result<(), CgroupError> {
        for pid in self.pids()? {
            match kill(Pid::from_raw(pid), signal) {
                Ok(()) | Err(Errno::ESRCH) => {}
                Err(source) => {
                    return Err(CgroupError::Signal {
                        name: self.name.clone(),
                        pid,
                        signal: signal as i32,
                        source,
                    });
                }
            }
        }
        Ok(())
    }

    /// Kills every process in the cgroup and returns once none is left, or fails after `timeout`.
    ///
    /// With `cgroup.kill` (v2, or the hybrid unified tree on kernels ≥ 5.14) the kernel does it
    /// atomically. Otherwise: freeze (so nothing forks meanwhile), SIGKILL every pid, thaw,
    /// and repeat until the cgroup is empty.
    pub fn kill_all(&self, timeout: Duration) -> Result<(), CgroupError> {
        let started = Instant::now();
        let kill_file = self
            .v2_dir()
            .map(|dir| dir.join("cgroup.kill"))
            .filter(|file| file.is_file());
        let mut pause = Duration::from_millis(1);
        loop {
            let pids = self.pids()?;
            if pids.is_empty() {
                return Ok(());
            }
            if started.elapsed() > timeout {
                return Err(CgroupError::KillTimedOut {
                    name: self.name.clone(),
                    remaining: pids,
                    waited: started.elapsed(),
                });
            }
            match &kill_file {
                Some(file) => write_file(file, "1")?,
                None => {
                    let frozen = self.freeze()?;
                    let result = self.signal_all(Signal::SIGKILL);
                    if frozen {
                        self.thaw()?;
                    }
                    result?;
                }
            }
            thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(50));
        }
    }

    /// Freezes the cgroup if a freezer is available; returns whether it tried.
    fn freeze(&self) -> Result<bool, CgroupError> {
        if let Some(dir) = self.dir("freezer") {
            let state = dir.join("freezer.state");
            write_file(&state, "FROZEN")?;
            let started = Instant::now();
            while started.elapsed() < FREEZE_WAIT {
                if read_file(&state)?.trim() == "FROZEN" {
                    break;
                }
                thread::sleep(Duration::from_millis(1));
            }
            return Ok(true);
        }
        if let Some(dir) = self.v2_dir() {
            let freeze = dir.join("cgroup.freeze");
            if freeze.is_file() {
                write_file(&freeze, "1")?;
                let events = dir.join("cgroup.events");
                let started = Instant::now();
                while started.elapsed() < FREEZE_WAIT {
                    if flat_keyed_value(&read_file(&events)?, "frozen") == Some(1) {
                        break;
                    }
                    thread::sleep(Duration::from_millis(1));
                }
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn thaw(&self) -> Result<(), CgroupError> {
        if let Some(dir) = self.dir("freezer") {
            return write_file(&dir.join("freezer.state"), "THAWED");
        }
        if let Some(dir) = self.v2_dir() {
            write_if_present(&dir.join("cgroup.freeze"), "0")?;
        }
        Ok(())
    }

    /// Memory figures; zeros when the memory controller is not available.
    pub fn memory_stats(&self) -> Result<CgroupMemoryStats, CgroupError> {
        let Some(dir) = self.memory_dir() else {
            return Ok(CgroupMemoryStats::default());
        };
        let stat_path = dir.join("memory.stat");
        if !stat_path.is_file() {
            // cgroup2 without the memory controller enabled for this subtree.
            return Ok(CgroupMemoryStats::default());
        }
        let stat = read_file(&stat_path)?;
        let key = |name| flat_keyed_value(&stat, name).unwrap_or(0);
        match self.mode {
            CgroupMode::V2 => {
                let kernel_usage = flat_keyed_value(&stat, "kernel")
                    .unwrap_or_else(|| key("kernel_stack") + key("slab") + key("percpu"));
                Ok(CgroupMemoryStats {
                    rss: key("anon"),
                    cache: key("file"),
                    swap: read_u64_if_present(&dir.join("memory.swap.current"))?,
                    usage: read_u64(&dir.join("memory.current"))?,
                    max_usage: read_u64_if_present(&dir.join("memory.peak"))?,
                    kernel_usage,
                    kernel_max_usage: 0,
                })
            }
            CgroupMode::V1 { .. } => Ok(CgroupMemoryStats {
                rss: key("rss"),
                cache: key("cache"),
                swap: key("swap"),
                usage: read_u64(&dir.join("memory.usage_in_bytes"))?,
                max_usage: read_u64_if_present(&dir.join("memory.max_usage_in_bytes"))?,
                kernel_usage: read_u64_if_present(&dir.join("memory.kmem.usage_in_bytes"))?,
                kernel_max_usage: read_u64_if_present(&dir.join("memory.kmem.max_usage_in_bytes"))?,
            }),
        }
    }

    /// Cumulative cpu figures; zeros for what the host does not offer.
    pub fn cpu_stats(&self) -> Result<CgroupCpuStats, CgroupError> {
        let mut stats = CgroupCpuStats::default();
        match self.mode {
            CgroupMode::V2 => {
                if let Some(dir) = self.dir("") {
                    read_v2_cpu_stat(dir, &mut stats)?;
                }
            }
            CgroupMode::V1 { .. } => {
                if let Some(dir) = self.dir("cpuacct") {
                    stats.total_ns = read_u64(&dir.join("cpuacct.usage"))?;
                    let user = dir.join("cpuacct.usage_user");
                    if user.is_file() {
                        stats.user_ns = read_u64(&user)?;
                        stats.system_ns = read_u64(&dir.join("cpuacct.usage_sys"))?;
                    } else {
                        // cpuacct.stat is in USER_HZ ticks (100 per second on Linux).
                        let stat = read_file(&dir.join("cpuacct.stat"))?;
                        let tick_ns = 10_000_000;
                        stats.user_ns = flat_keyed_value(&stat, "user").unwrap_or(0) * tick_ns;
                        stats.system_ns = flat_keyed_value(&stat, "system").unwrap_or(0) * tick_ns;
                    }
                } else if let Some(dir) = self.dir("unified") {
                    // The core cpu.stat of cgroup2 exists without the cpu controller.
                    read_v2_cpu_stat(dir, &mut stats)?;
                }
                if let Some(dir) = self.dir("cpu") {
                    let stat = read_file(&dir.join("cpu.stat"))?;
                    stats.throttled_periods = flat_keyed_value(&stat, "nr_throttled").unwrap_or(0);
                    stats.throttled_time_ns =
                        flat_keyed_value(&stat, "throttled_time").unwrap_or(0);
                }
            }
        }
        Ok(stats)
    }

    /// How many processes of this cgroup the kernel's OOM killer has killed; `None` without a
    /// memory controller (or on kernels that do not count).
    pub fn oom_kill_count(&self) -> Result<Option<u64>, CgroupError> {
        let Some(dir) = self.memory_dir() else {
            return Ok(None);
        };
        let file = match self.mode {
            CgroupMode::V2 => dir.join("memory.events"),
            CgroupMode::V1 { .. } => dir.join("memory.oom_control"),
        };
        match fs::read_to_string(&file) {
            Ok(content) => Ok(flat_keyed_value(&content, "oom_kill")),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(io_error(&file)(error)),
        }
    }

    /// Removes every directory of the cgroup (not its parents). Missing directories are fine;
    /// a cgroup that still has processes fails with the kernel's `EBUSY` after a few retries.
    pub fn remove(&self) -> Result<(), CgroupError> {
        for dir in &self.dirs {
            let mut attempt = 0;
            loop {
                match fs::remove_dir(&dir.path) {
                    Ok(()) => break,
                    Err(error) if error.kind() == io::ErrorKind::NotFound => break,
                    // Exited tasks can linger in the cgroup for a moment.
                    Err(error) if error.raw_os_error() == Some(libc::EBUSY) && attempt < 50 => {
                        attempt += 1;
                        thread::sleep(Duration::from_millis(10));
                    }
                    // A tempdir (the test seam) holds regular files a real cgroupfs does not let
                    // anyone delete; remove them too.
                    Err(error) if error.raw_os_error() == Some(libc::ENOTEMPTY) => {
                        fs::remove_dir_all(&dir.path).map_err(io_error(&dir.path))?;
                        break;
                    }
                    Err(error) => return Err(io_error(&dir.path)(error)),
                }
            }
        }
        Ok(())
    }
}

fn read_v2_cpu_stat(dir: &Path, stats: &mut CgroupCpuStats) -> Result<(), CgroupError> {
    let stat = read_file(&dir.join("cpu.stat"))?;
    let usec = |name| flat_keyed_value(&stat, name).unwrap_or(0) * 1_000;
    stats.total_ns = usec("usage_usec");
    stats.user_ns = usec("user_usec");
    stats.system_ns = usec("system_usec");
    stats.throttled_periods = flat_keyed_value(&stat, "nr_throttled").unwrap_or(0);
    stats.throttled_time_ns = usec("throttled_usec");
    Ok(())
}

/// Creates `<mount>/<name>` on cgroup2, enabling the available controllers in the
/// `cgroup.subtree_control` of the root and of every intermediate directory.
fn create_v2_dirs(mount: &Path, name: &str) -> Result<(), CgroupError> {
    let offered = read_file(&mount.join("cgroup.controllers"))?;
    let wanted: Vec<&str> = V2_CONTROLLERS
        .into_iter()
        .filter(|controller| offered.split_whitespace().any(|c| c == *controller))
        .collect();
    let mut current = mount.to_path_buf();
    for component in name.split('/') {
        enable_v2_controllers(&current, &wanted)?;
        current.push(component);
        match fs::create_dir(&current) {
            Ok(()) => {}
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {}
            Err(error) => return Err(io_error(&current)(error)),
        }
    }
    Ok(())
}

fn enable_v2_controllers(dir: &Path, wanted: &[&str]) -> Result<(), CgroupError> {
    let control = dir.join("cgroup.subtree_control");
    let enabled = match fs::read_to_string(&control) {
        Ok(content) => content,
        Err(error) if error.kind() == io::ErrorKind::NotFound => String::new(),
        Err(error) => return Err(io_error(&control)(error)),
    };
    for controller in wanted {
        if !enabled.split_whitespace().any(|c| c == *controller) {
            // On cgroupfs a write of `+ctrl` enables one controller and the file then lists
            // them all; appending makes the tempdir seam read the same way.
            append_file(&control, &format!("+{controller}\n"))?;
        }
    }
    Ok(())
}

fn append_file(path: &Path, value: &str) -> Result<(), CgroupError> {
    use std::io::Write;
    let mut file = fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .map_err(io_error(path))?;
    file.write_all(value.as_bytes()).map_err(io_error(path))
}

/// Creates `<mount>/<name>` on the v1 cpuset hierarchy, where every new directory starts with
/// empty `cpuset.cpus`/`cpuset.mems` and cannot take a process until they are copied from its
/// parent.
fn create_v1_cpuset_dirs(mount: &Path, name: &str) -> Result<(), CgroupError> {
    let mut parent = mount.to_path_buf();
    for component in name.split('/') {
        let current = parent.join(component);
        match fs::create_dir(&current) {
            Ok(()) => {}
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {}
            Err(error) => return Err(io_error(&current)(error)),
        }
        for file in ["cpuset.cpus", "cpuset.mems"] {
            let own = current.join(file);
            let empty = match fs::read_to_string(&own) {
                Ok(content) => content.trim().is_empty(),
                Err(error) if error.kind() == io::ErrorKind::NotFound => true,
                Err(error) => return Err(io_error(&own)(error)),
            };
            if empty {
                let inherited = read_file(&parent.join(file))?;
                if !inherited.trim().is_empty() {
                    write_file(&own, inherited.trim())?;
                }
            }
        }
        parent = current;
    }
    Ok(())
}

/// The subdirectory of a cgroup parent that holds the task cgroups with reserved cpus; every
/// other task cgroup directly under the parent runs on the shared cpus.
pub const RESERVED_CPUS_DIR: &str = "reserved";

/// The cpuset directory of the cgroup parent `parent` (v1: in the cpuset hierarchy), if the host
/// has a cpuset controller there.
fn cpuset_parent_dir(root: &Path, parent: &str) -> Result<Option<PathBuf>, CgroupError> {
    validate_name(parent)?;
    let dir = match detect_mode(root)? {
        CgroupMode::V2 => root.join(parent),
        CgroupMode::V1 { .. } => {
            if !root.join("cpuset").join("cgroup.procs").is_file() {
                return Ok(None);
            }
            root.join("cpuset").join(parent)
        }
    };
    Ok(dir.is_dir().then_some(dir))
}

fn read_cpu_list(path: &Path) -> Result<Option<Vec<u16>>, CgroupError> {
    let content = match fs::read_to_string(path) {
        Ok(content) => content,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(io_error(path)(error)),
    };
    parse_cpu_list(&content)
        .map(Some)
        .ok_or_else(|| CgroupError::Parse {
            path: path.to_path_buf(),
            detail: format!("not a cpu list: {:?}", content.trim()),
        })
}

/// The shared cpus under the cgroup parent `parent`: the parent's cpus minus every cpu a task
/// cgroup under `<parent>/reserved` with a process in it holds (all of the parent's when
/// nothing would be left, as a cpuset cannot be empty). `None` when there is no cpuset for the parent (yet).
pub fn shared_cpus(root: &Path, parent: &str) -> Result<Option<Vec<u16>>, CgroupError> {
    let Some(dir) = cpuset_parent_dir(root, parent)? else {
        return Ok(None);
    };
    // v2 lists what the parent may use in `cpuset.cpus.effective` (its own `cpuset.cpus` is
    // empty when it inherits); v1 copies the cpus into every directory.
    let all = match read_cpu_list(&dir.join("cpuset.cpus.effective"))? {
        Some(cpus) if !cpus.is_empty() => cpus,
        _ => read_cpu_list(&dir.join("cpuset.cpus"))?.unwrap_or_default(),
    };
    if all.is_empty() {
        return Ok(None);
    }
    // Only reservations something runs in count: a cgroup whose task is gone (its dir not yet
    // removed, or left behind by a crash) holds nothing.
    let mut reserved = BTreeSet::new();
    if let Ok(entries) = fs::read_dir(dir.join(RESERVED_CPUS_DIR)) {
        // The dir also holds its own control files; only subdirectories are task cgroups (the
        // type comes with the listing, no extra call).
        for entry in entries.flatten() {
            if !entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                continue;
            }
            let path = entry.path();
            let occupied = fs::read_to_string(path.join("cgroup.procs"))
                .is_ok_and(|procs| procs.lines().any(|line| !line.trim().is_empty()));
            if occupied && let Some(cpus) = read_cpu_list(&path.join("cpuset.cpus"))? {
                reserved.extend(cpus);
            }
        }
    }
    let shared: Vec<u16> = all
        .iter()
        .copied()
        .filter(|cpu| !reserved.contains(cpu))
        .collect();
    Ok(Some(if shared.is_empty() { all } else { shared }))
}

/// Puts every task cgroup directly under `parent` (not those under `<parent>/reserved`) on the
/// [`shared_cpus`], writing only where they differ; the kernel moves the tasks' processes at
/// once. Returns the shared cpus. Cgroups removed meanwhile are skipped.
pub fn rebalance_shared_cpus(root: &Path, parent: &str) -> Result<Option<Vec<u16>>, CgroupError> {
    let Some(shared) = shared_cpus(root, parent)? else {
        return Ok(None);
    };
    let Some(dir) = cpuset_parent_dir(root, parent)? else {
        return Ok(None);
    };
    let wanted = format_cpu_list(&shared);
    let entries = fs::read_dir(&dir).map_err(io_error(&dir))?;
    for entry in entries.flatten() {
        let path = entry.path();
        if entry.file_name() == RESERVED_CPUS_DIR
            || !entry.file_type().is_ok_and(|kind| kind.is_dir())
        {
            continue;
        }
        let file = path.join("cpuset.cpus");
        match read_cpu_list(&file) {
            Ok(Some(current)) if current == shared => continue,
            Ok(Some(_)) => {}
            Ok(None) => continue,
            Err(CgroupError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
                continue;
            }
            Err(error) => return Err(error),
        }
        match fs::write(&file, wanted.as_bytes()) {
            Ok(()) => {}
            Err(error) if error.kind() == io::ErrorKind::NotFound => {}
            Err(error) => return Err(io_error(&file)(error)),
        }
    }
    Ok(Some(shared))
}

/// Maps v1 cpu shares (2..=262144, default 1024) onto v2 `cpu.weight` (1..=10000, default 100),
/// the same linear map container runtimes use.
pub fn cpu_shares_to_weight(shares: u64) -> u64 {
    let shares = shares.clamp(2, 262_144);
    1 + ((shares - 2) * 9_999) / 262_142
}

/// Cpu IDs in the kernel's list format (`0-2,5`), as `cpuset.cpus` takes them: ranges for runs
/// of consecutive IDs, in ascending order, duplicates dropped.
pub fn format_cpu_list(cpus: &[u16]) -> String {
    let sorted: BTreeSet<u16> = cpus.iter().copied().collect();
    let mut parts: Vec<String> = Vec::new();
    let mut run: Option<(u16, u16)> = None;
    for cpu in sorted {
        run = match run {
            Some((first, last)) if u32::from(cpu) == u32::from(last) + 1 => Some((first, cpu)),
            Some(done) => {
                parts.push(format_cpu_run(done));
                Some((cpu, cpu))
            }
            None => Some((cpu, cpu)),
        };
    }
    if let Some(done) = run {
        parts.push(format_cpu_run(done));
    }
    parts.join(",")
}

fn format_cpu_run((first, last): (u16, u16)) -> String {
    if first == last {
        first.to_string()
    } else {
        format!("{first}-{last}")
    }
}

/// Parses the kernel's cpu list format (`0-2,5`, as in `cpuset.cpus` or `Cpus_allowed_list`);
/// `None` when it is not one. An empty list is empty.
pub fn parse_cpu_list(text: &str) -> Option<Vec<u16>> {
    let mut cpus = BTreeSet::new();
    for part in text
        .trim()
        .split(',')
        .filter(|part| !part.trim().is_empty())
    {
        let part = part.trim();
        let (first, last) = match part.split_once('-') {
            Some((first, last)) => (first.parse::<u16>().ok()?, last.parse::<u16>().ok()?),
            None => {
                let cpu = part.parse::<u16>().ok()?;
                (cpu, cpu)
            }
        };
        if first > last {
            return None;
        }
        cpus.extend(first..=last);
    }
    Some(cpus.into_iter().collect())
}

/// The value of `key` in a flat-keyed cgroup file (`key value` per line).
fn flat_keyed_value(content: &str, key: &str) -> Option<u64> {
    content.lines().find_map(|line| {
        let mut fields = line.split_whitespace();
        if fields.next()? == key {
            fields.next()?.parse().ok()
        } else {
            None
        }
    })
}

fn read_file(path: &Path) -> Result<String, CgroupError> {
    fs::read_to_string(path).map_err(io_error(path))
}

fn read_u64(path: &Path) -> Result<u64, CgroupError> {
    let content = read_file(path)?;
    let trimmed = content.trim();
    if trimmed == "max" {
        return Ok(u64::MAX);
    }
    trimmed.parse().map_err(|_| CgroupError::Parse {
        path: path.to_path_buf(),
        detail: format!("expected a number, got {trimmed:?}"),
    })
}

fn read_u64_if_present(path: &Path) -> Result<u64, CgroupError> {
    if path.is_file() {
        read_u64(path)
    } else {
        Ok(0)
    }
}

/// Writes `value` into an existing cgroup file (or, on the tempdir seam, creates it).
fn write_file(path: &Path, value: &str) -> Result<(), CgroupError> {
    fs::write(path, value.as_bytes()).map_err(io_error(path))
}

fn write_if_present(path: &Path, value: &str) -> Result<(), CgroupError> {
    if path.is_file() {
        write_file(path, value)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
