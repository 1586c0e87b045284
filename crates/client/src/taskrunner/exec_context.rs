//! A running task's context for running another command inside it (`alloc exec`, script
//! checks, template change scripts): its own module so the hooks that need it import it without
//! importing the task runner.

use std::collections::BTreeMap;

/// A running task's context, for running another command in it (`alloc exec`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskExecContext {
    /// The task's environment, as given to the task.
    pub env: BTreeMap<String, String>,
    /// The task dir (the task's working directory).
    pub cwd: std::path::PathBuf,
    /// The task's user; `None` runs as the agent's.
    pub user: Option<String>,
    /// The task's main process, when the driver knows it.
    pub task_pid: Option<i32>,
    /// The task's cgroup, when its driver made one.
    pub cgroup: Option<drover_driver::CgroupRef>,
    /// The task runs in its own namespaces and root (enter those of `task_pid`).
    pub isolated: bool,
}

impl TaskExecContext {
    /// The shim's exec spec for `command` in this context: the one path by which anything runs
    /// inside a task (`alloc exec` sessions and script checks alike).
    pub fn exec_spec(self, command: Vec<String>, tty: bool) -> drover_shim::exec_mode::ExecSpec {
        drover_shim::exec_mode::ExecSpec {
            command,
            env: self.env.into_iter().collect(),
            cwd: Some(self.cwd),
            user: self.user,
            cgroup: self
                .cgroup
                .map(|cgroup| drover_shim::exec_mode::ExecCgroup {
                    root: cgroup.root,
                    name: cgroup.name,
                }),
            enter_namespaces_of: self.task_pid.filter(|_| self.isolated),
            tty,
        }
    }
}
