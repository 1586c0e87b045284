//! `drover-shim`: the per-task supervisor. One small synchronous process per running task that
//! owns the task process, its stdio (written straight into rotating log files), its cgroup and its
//! exit status, and answers the agent on a unix socket.
//!
//! **Boundary**: synchronous code only; never links an async runtime or anything big.
//!
//! Life of a shim (`drover-shim <spec.json>`, see [`proto::LaunchSpec`]):
//!
//! ```text
//!  agent ── spawn ──> launcher ── fork ──> shim (setsid, child subreaper, cgroup, socket)
//!    │                   │  <── StartReport ──┤          │ fork → join cgroup → setsid → user → exec
//!    │ <─ one JSON line ─┤ exits (agent reaps)│        task
//!    │                                        │ pumps stdout/stderr → <task>.stdout.<n>
//!    └── unix socket: hello/status/wait/signal/kill/stats/cleanup ──┘
//! ```
//!
//! With an isolation spec (the `exec` driver) the child also gets new namespaces (it is pid 1
//! of its own pid namespace), a task root it pivots into, a cut capability set, `no_new_privs`
//! and the task's user before exec; the order and the reasons are in
//! `drover_driver::exec` ("The order of isolation").
//!
//! The launcher exits as soon as the shim reports, so the shim is re-parented to init and the
//! agent is neither its parent nor the task's. When the task exits the shim kills what is left
//! of its cgroup, drains the pipes, writes `exit.json` atomically into its state directory and
//! keeps serving until the agent says `cleanup`. If the shim itself dies, the task keeps running
//! in its cgroup, from where the agent can kill it.
//!
//! # Layers
//!
//! Each module directly under `src/` uses only modules on the lines below its own (`error`
//! modules aside), as `crates/structs/tests/module_cycles.rs` checks; top first:
//!
//! - `supervisor`
//! - `atomic_file`, `exec_mode`, `logs`, `proto`, `socket_path`
//!
//! # Design notes
//!
//! `drover-shim`: owns one task process, its stdio (rotating log files), its
//! cgroup and its exit status; answers the agent on a unix socket (`socket_path`: a socket whose
//! path is longer than a unix address holds is bound and reached as `/proc/self/fd/<dir fd>/…`,
//! so a deep data dir or a long task name cannot fail a start); `atomic_file`, the one
//! atomic-replace helper (temp file, rename, fsync of file and dir when durable), which the
//! driver and the client use too. **Boundary**: synchronous,
//! no async runtime, nothing big linked.

pub mod atomic_file;
pub mod exec_mode;
pub mod logs;
pub mod proto;
pub mod socket_path;
mod supervisor;

/// Entry point of the `drover-shim` binary: `drover-shim exec <spec-json>` runs a command in a
/// task's context ([`exec_mode`]); anything else is the supervisor's launch path.
pub fn main_from_args(args: impl IntoIterator<Item = std::ffi::OsString>) -> i32 {
    let mut args = args.into_iter();
    let program = args.next();
    let first = args.next();
    if first.as_deref() == Some(std::ffi::OsStr::new(exec_mode::EXEC_MODE_ARGUMENT)) {
        return exec_mode::main_from_args(args);
    }
    supervisor::main_from_args(program.into_iter().chain(first).chain(args))
}
