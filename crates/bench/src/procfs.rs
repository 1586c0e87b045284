//! What `/proc` says about drover's processes: which shims and tasks belong to a data dir, their
//! PSS (`smaps_rollup`) and RSS, whether a pid is still alive; and the clean-up that kills
//! whatever a scenario left behind and unmounts what the client mounted under its data dir.
//!
//! Not here: starting processes (see `agent`).

use std::path::Path;

/// Every pid in `/proc`.
pub fn all_pids() -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .collect()
}

fn cmdline(pid: i32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|raw| String::from_utf8_lossy(&raw).replace('\0', " "))
        .unwrap_or_default()
}

fn has_env_prefix(pid: i32, prefix: &str) -> bool {
    std::fs::read(format!("/proc/{pid}/environ"))
        .map(|raw| {
            raw.split(|byte| *byte == 0)
                .any(|var| var.starts_with(prefix.as_bytes()))
        })
        .unwrap_or(false)
}

/// Whether `pid` exists and is not a zombie.
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z')),
        Err(_) => false,
    }
}

/// The processes that belong to a data dir, by kind.
#[derive(Debug, Default, Clone)]
pub struct DataDirProcesses {
    /// `drover-shim` processes (their command line names the data dir).
    pub shims: Vec<i32>,
    /// Task processes (their environment has `NOMAD_ALLOC_DIR` under the data dir).
    pub tasks: Vec<i32>,
}

/// Scans `/proc` for the shims and tasks of `data_dir`, skipping `exclude` (the agent).
pub fn data_dir_processes(data_dir: &Path, exclude: &[i32]) -> DataDirProcesses {
    let needle = data_dir.to_string_lossy().into_owned();
    let alloc_dir_var = format!("NOMAD_ALLOC_DIR={needle}");
    let mut found = DataDirProcesses::default();
    for pid in all_pids() {
        if exclude.contains(&pid) || !alive(pid) {
            continue;
        }
        let command = cmdline(pid);
        if command.contains("drover-shim") && command.contains(&needle) {
            found.shims.push(pid);
        } else if has_env_prefix(pid, &alloc_dir_var) {
            found.tasks.push(pid);
        }
    }
    found
}

fn field_kib(path: &str, field: &str) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|value| value.parse().ok())
}

/// Proportional set size of `pid` in KiB (`Pss:` of `smaps_rollup`).
pub fn pss_kib(pid: i32) -> Option<u64> {
    field_kib(&format!("/proc/{pid}/smaps_rollup"), "Pss:")
}

/// Resident set size of `pid` in KiB (`VmRSS:` of `status`).
pub fn rss_kib(pid: i32) -> Option<u64> {
    field_kib(&format!("/proc/{pid}/status"), "VmRSS:")
}

/// Kills every process of `data_dir` (shims and tasks) and unmounts what the client mounted
/// there (the tasks' `secrets` tmpfs), deepest first. Returns how many processes were killed.
pub fn clean_up_after(data_dir: &Path) -> usize {
    let found = data_dir_processes(data_dir, &[]);
    let mut killed = 0;
    for pid in found.shims.iter().chain(&found.tasks) {
        if nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(*pid),
            nix::sys::signal::Signal::SIGKILL,
        )
        .is_ok()
        {
            killed += 1;
        }
    }
    let needle = data_dir.to_string_lossy().into_owned();
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut targets: Vec<&str> = mounts
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .filter(|target| target.starts_with(needle.as_str()))
        .collect();
    targets.sort_by_key(|target| std::cmp::Reverse(target.len()));
    for target in targets {
        let _ = nix::mount::umount2(target, nix::mount::MntFlags::MNT_DETACH);
    }
    killed
}

/// Time `pid` has spent on a CPU, in milliseconds: the sum over its live threads of the first
/// field of `schedstat` (nanoseconds). A figure the load of a shared machine does not inflate.
pub fn cpu_ms(pid: i32) -> f64 {
    let Ok(threads) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0.0;
    };
    let nanos: u64 = threads
        .flatten()
        .filter_map(|thread| {
            let text = std::fs::read_to_string(thread.path().join("schedstat")).ok()?;
            text.split_whitespace().next()?.parse::<u64>().ok()
        })
        .sum();
    nanos as f64 / 1e6
}

/// On-CPU time of the calling thread, in nanoseconds (`/proc/thread-self/schedstat`).
pub fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}
