//! The shim's wire types: the launch spec the agent hands it, the one-line start report, and the
//! line-delimited JSON request/response protocol on its unix socket.
//!
//! This is a compatibility boundary: a newer agent re-attaches to shims started by an older one,
//! so fields are only ever added (with defaults), never renamed. Not for: how the agent talks to
//! the shim (blocking or async) — both sides only exchange these values, one JSON object per line.
//!
//! Protocol, one connection may carry several exchanges, each one request line answered by one
//! response line:
//!
//! | request (`{"op": …}`)                          | response (`{"type": …}`)                    |
//! |------------------------------------------------|---------------------------------------------|
//! | `hello`                                        | `hello` with a [`ShimIdentity`]             |
//! | `status`                                       | `status` with a [`TaskStatus`]              |
//! | `wait`                                         | `exited` with an [`ExitStatus`], once it has exited |
//! | `signal {signal}`                              | `signalled`                                  |
//! | `kill {signal, grace_ns}`                      | `exited`, once the whole tree is dead       |
//! | `stats`                                        | `stats` with [`TaskStats`]                  |
//! | `cleanup`                                      | `cleaned_up`, then the shim exits           |
//!
//! Any request may instead be answered by `error {message}`.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Version of the launch spec and protocol this shim speaks.
pub const PROTOCOL_VERSION: u32 = 1;

/// File names inside a shim's state directory.
pub const SOCKET_FILE: &str = "shim.sock";
pub const EXIT_STATUS_FILE: &str = "exit.json";
pub const SPEC_FILE: &str = "spec.json";
pub const SHIM_LOG_FILE: &str = "shim.log";

/// Everything the shim needs to run one task. Written by the agent to `<state_dir>/spec.json`
/// (or any path), whose path is the shim's only argument.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchSpec {
    pub version: u32,
    /// Opaque identity the agent gives the task (e.g. `<alloc_id>/<task>`); echoed by `hello`.
    pub task_id: String,
    /// Program to run: a path, or a name looked up in the task environment's `PATH`.
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    /// The task's complete environment (nothing is inherited from the shim).
    #[serde(default)]
    pub env: Vec<(String, String)>,
    /// Working directory of the task; the shim's own when absent.
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// User name to run as (resolved through the host's user database); the shim's own when absent.
    #[serde(default)]
    pub user: Option<String>,
    /// Directory owned by the shim for its socket and exit status; removed by `cleanup`.
    /// Never inside the task directory.
    pub state_dir: PathBuf,
    pub logs: LogSpec,
    /// The task's cgroup; without one, signals go to the task's process group.
    #[serde(default)]
    pub cgroup: Option<CgroupSpec>,
    /// Namespaces, task root and capabilities (the `exec` driver); `None` runs the task on the
    /// host as it is (`raw_exec`). With isolation, `command` is looked up and `cwd` taken inside
    /// the task root.
    #[serde(default)]
    pub isolation: Option<IsolationSpec>,
    /// A network namespace to join (`setns`) before exec: the bind-mounted namespace of the
    /// task's group network (bridge, none or CNI mode), such as `/var/run/netns/<alloc_id>`.
    /// `None` keeps the shim's own (the host's, or a new empty one with `network_none`).
    #[serde(default)]
    pub network_namespace: Option<PathBuf>,
}

/// How the shim's child isolates the task before exec (order and reasons: `drover_driver::exec`,
/// "The order of isolation"). The policy is decided by the driver; the shim applies it as given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IsolationSpec {
    /// Host directory that becomes the task's `/` (the task dir).
    pub root: PathBuf,
    /// Bind mounts into the root, in order: the read-only chroot env, then the alloc dir.
    #[serde(default)]
    pub binds: Vec<BindSpec>,
    /// A new, empty network namespace instead of the host's network.
    #[serde(default)]
    pub network_none: bool,
    /// The task's capabilities (`CAP_…` names); everything else is dropped, bounding set
    /// included.
    #[serde(default)]
    pub capabilities: Vec<String>,
    /// Host directories handed to the task's user before it runs (its local, secrets and tmp
    /// dirs, the shared alloc dir), so a task that is not root can write where Nomad lets it.
    #[serde(default)]
    pub owned_by_task_user: Vec<PathBuf>,
    /// Host name set in the task's uts namespace; `None` keeps the host's name there.
    #[serde(default)]
    pub hostname: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BindSpec {
    /// Host path.
    pub source: PathBuf,
    /// Absolute path inside the task root.
    pub target: PathBuf,
    pub read_only: bool,
}

/// Where and how the task's stdout and stderr are written: `<dir>/<task_name>.stdout.<n>` and
/// `<dir>/<task_name>.stderr.<n>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogSpec {
    pub dir: PathBuf,
    pub task_name: String,
    pub max_files: u32,
    pub max_file_size_bytes: u64,
}

/// The task cgroup: created by the shim under `root` (normally `/sys/fs/cgroup`) as `name`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CgroupSpec {
    pub root: PathBuf,
    pub name: String,
    #[serde(default)]
    pub memory_soft_bytes: Option<u64>,
    #[serde(default)]
    pub memory_hard_bytes: Option<u64>,
    #[serde(default)]
    pub cpu_shares: Option<u64>,
    #[serde(default)]
    pub pids_max: Option<u64>,
    #[serde(default)]
    pub cpuset_cpus: Option<String>,
}

/// The single line the shim's launcher prints on stdout before it exits: the daemonized shim is
/// serving, or the task could not be started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StartReport {
    Ready { identity: ShimIdentity },
    Failed { message: String },
}

/// Who a shim is, checked by the agent before it trusts a re-attached shim. Start times are
/// field 22 of `/proc/<pid>/stat` (clock ticks since boot), so a reused pid never matches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShimIdentity {
    pub task_id: String,
    pub shim_pid: i32,
    pub shim_start_time: u64,
    pub task_pid: i32,
    pub task_start_time: u64,
    pub protocol_version: u32,
}

/// How the task ended. `exit_code` follows Nomad: 128 + signal when a signal killed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitStatus {
    pub exit_code: i32,
    /// The signal that killed the task, 0 if it exited by itself.
    pub signal: i32,
    /// The kernel's OOM killer killed a process of the task's cgroup.
    pub oom_killed: bool,
    pub finished_at_unix_ns: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum TaskStatus {
    Running,
    Exited(ExitStatus),
}

/// Resource usage of the task's cgroup (cumulative cpu in nanoseconds, memory in bytes).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskStats {
    pub timestamp_unix_ns: u64,
    pub memory_rss: u64,
    pub memory_cache: u64,
    pub memory_swap: u64,
    pub memory_usage: u64,
    pub memory_max_usage: u64,
    pub memory_kernel_usage: u64,
    pub memory_kernel_max_usage: u64,
    pub cpu_total_ns: u64,
    pub cpu_user_ns: u64,
    pub cpu_system_ns: u64,
    pub cpu_throttled_periods: u64,
    pub cpu_throttled_time_ns: u64,
    /// Whether the figures come from a cgroup (otherwise they are zeros).
    pub measured: bool,
    pub pids: Vec<i32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    Hello,
    Status,
    Wait,
    /// Send `signal` (a number) to every process of the task.
    Signal {
        signal: i32,
    },
    /// Send `signal` to every process of the task, wait up to `grace_ns` for it to exit, then
    /// SIGKILL the whole cgroup. Answered once everything is dead.
    Kill {
        signal: i32,
        grace_ns: u64,
    },
    Stats,
    /// The agent has recorded the exit: kill whatever is left, remove the cgroup and the state
    /// directory, and exit.
    Cleanup,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Response {
    Hello { identity: ShimIdentity },
    Status { status: TaskStatus },
    Exited { exit: ExitStatus },
    Signalled,
    Stats { stats: TaskStats },
    CleanedUp,
    Error { message: String },
}

/// Field 22 (`starttime`) of `/proc/<pid>/stat`, or `None` if there is no such process or it is
/// a zombie (it has exited and waits to be reaped).
pub fn process_start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may contain spaces and parentheses.
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace();
    // After the name: field 3 is the state; starttime is field 22, i.e. 19 further on.
    let state = fields.next()?;
    if state == "Z" || state == "X" {
        return None;
    }
    fields.nth(18)?.parse().ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn requests_and_responses_have_their_documented_shape() {
        let kill: Request =
            serde_json::from_str(r#"{"op":"kill","signal":15,"grace_ns":5000000000}"#).unwrap();
        assert_eq!(
            kill,
            Request::Kill {
                signal: 15,
                grace_ns: 5_000_000_000
            }
        );
        let exited = Response::Status {
            status: TaskStatus::Exited(ExitStatus {
                exit_code: 3,
                signal: 0,
                oom_killed: false,
                finished_at_unix_ns: 7,
            }),
        };
        assert_eq!(
            serde_json::to_string(&exited).unwrap(),
            r#"{"type":"status","status":{"state":"exited","exit_code":3,"signal":0,"oom_killed":false,"finished_at_unix_ns":7}}"#
        );
        assert_eq!(
            serde_json::to_string(&Request::Hello).unwrap(),
            r#"{"op":"hello"}"#
        );
    }

    #[test]
    fn start_time_of_this_process_is_stable_and_of_a_missing_one_absent() {
        let pid = std::process::id() as i32;
        let first = process_start_time(pid).unwrap();
        assert_eq!(process_start_time(pid), Some(first));
        assert_eq!(process_start_time(i32::MAX), None);
    }
}
