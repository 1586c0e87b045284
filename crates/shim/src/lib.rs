//! `drover-shim`: the per-task supervisor. One small synchronous process per running task that
//! owns the task process, its stdio (written straight into rotating log files), its cgroup and its
//! exit status, and answers the agent on a unix socket.
//!
//! **Boundary**: synchronous code only; never links an async runtime or anything big.
