//! A running task's context for running another command inside it (`alloc exec`, script
//! checks, template change scripts), and [`run_in_task`], which runs one there to its end: a
//! capability of the task runner, in a module of its own so the hooks and the checks that need
//! it import it without importing the task runner.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt;

/// The bytes of a command's output kept: its last 4 KiB, as Nomad keeps a check's.
pub const OUTPUT_LIMIT: usize = 4 * 1024;

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

/// A command that ran to its end inside a task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptRun {
    /// Its exit code (128 + the signal when a signal ended it).
    pub code: i32,
    /// The tail of its combined output.
    pub output: String,
}

/// A command that did not run to its end inside a task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScriptError {
    /// The timeout passed; its process group was killed.
    TimedOut,
    /// It could not be started or waited for.
    Failed(String),
}

/// Runs `command` inside the task of `context` through the shim at `shim_binary` (the
/// `alloc exec` path): script checks and a template's `change_script` alike. The command's
/// process group is killed when `timeout` passes.
pub async fn run_in_task(
    shim_binary: PathBuf,
    context: TaskExecContext,
    command: Vec<String>,
    timeout: Duration,
) -> Result<ScriptRun, ScriptError> {
    let spec = context.exec_spec(command, false);
    let text = serde_json::to_string(&spec)
        .map_err(|error| ScriptError::Failed(format!("encoding the exec spec: {error}")))?;
    let mut child = tokio::process::Command::new(&shim_binary)
        .arg(drover_shim::exec_mode::EXEC_MODE_ARGUMENT)
        .arg(text)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|error| {
            ScriptError::Failed(format!("starting {}: {error}", shim_binary.display()))
        })?;
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let output = std::sync::Arc::new(std::sync::Mutex::new(TailBuffer::default()));
    let pumps: Vec<_> = [
        stdout.map(|pipe| Box::new(pipe) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
        stderr.map(|pipe| Box::new(pipe) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
    ]
    .into_iter()
    .flatten()
    .map(|mut pipe| {
        let output = std::sync::Arc::clone(&output);
        tokio::spawn(async move {
            let mut chunk = [0u8; 4096];
            while let Ok(read) = pipe.read(&mut chunk).await {
                if read == 0 {
                    break;
                }
                if let Ok(mut tail) = output.lock() {
                    tail.push(&chunk[..read]);
                }
            }
        })
    })
    .collect();
    let waited = tokio::time::timeout(timeout, child.wait()).await;
    let code = match waited {
        Ok(Ok(status)) => {
            use std::os::unix::process::ExitStatusExt;
            status
                .code()
                .or_else(|| status.signal().map(|signal| 128 + signal))
                .unwrap_or(2)
        }
        Ok(Err(error)) => {
            return Err(ScriptError::Failed(format!(
                "waiting for the script: {error}"
            )));
        }
        Err(_) => {
            // The shim starts a new session: its pid is the command's process group.
            if let Some(pid) = child.id().and_then(|pid| i32::try_from(pid).ok()) {
                let group = nix::unistd::Pid::from_raw(pid);
                let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
            }
            let _ = child.kill().await;
            pumps.iter().for_each(tokio::task::JoinHandle::abort);
            return Err(ScriptError::TimedOut);
        }
    };
    // A background process holding the pipes must not hold the caller.
    for pump in pumps {
        let _ = tokio::time::timeout(Duration::from_secs(1), pump).await;
    }
    let output = output
        .lock()
        .map(|tail| String::from_utf8_lossy(&tail.bytes).into_owned())
        .unwrap_or_default();
    Ok(ScriptRun { code, output })
}

/// Keeps the last [`OUTPUT_LIMIT`] bytes written to it (a circular buffer, as Nomad's).
#[derive(Debug, Default)]
struct TailBuffer {
    bytes: Vec<u8>,
}

impl TailBuffer {
    fn push(&mut self, data: &[u8]) {
        self.bytes.extend_from_slice(data);
        if self.bytes.len() > OUTPUT_LIMIT {
            let excess = self.bytes.len() - OUTPUT_LIMIT;
            self.bytes.drain(..excess);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_buffer_keeps_the_last_bytes() {
        let mut tail = TailBuffer::default();
        tail.push(&[b'a'; OUTPUT_LIMIT]);
        tail.push(b"end");
        assert_eq!(tail.bytes.len(), OUTPUT_LIMIT);
        assert!(tail.bytes.ends_with(b"aend"));
    }
}
