//! `drover-shim exec <spec-json>`: runs one command in the context of a running task, for
//! `alloc exec`. The agent spawns this mode with a plain spawn (its stdio already set to pipes or
//! a terminal); everything that must happen between fork and exec happens here, in a
//! single-threaded process: join the task's cgroup, optionally enter the task's namespaces and
//! root, start a new session (taking the terminal on fd 0 as the controlling one when asked),
//! set the task's environment and working directory, drop to the task's user, and exec.
//!
//! Not for: supervising anything. The exec'd command replaces this process (or, after entering
//! a pid namespace, is its only child, whose exit status this process passes on); its output is
//! whatever the agent connected to fds 0/1/2, and the agent kills the process group to end it.

use std::ffi::{CString, OsStr, OsString};
use std::fs::{self, File};
use std::io::Write;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use nix::sched::CloneFlags;
use nix::sys::signal::{SigHandler, SigSet, SigmaskHow, Signal, sigprocmask};
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::{ForkResult, User};
use serde::{Deserialize, Serialize};

/// The first argument that selects this mode.
pub const EXEC_MODE_ARGUMENT: &str = "exec";

/// Exit code when the command could not be found.
pub const EXIT_COMMAND_NOT_FOUND: i32 = 127;
/// Exit code when the context could not be set up or the command could not be executed.
pub const EXIT_SETUP_FAILED: i32 = 126;

/// `PATH` used to find the command when the task's environment has none.
const DEFAULT_SEARCH_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// What to run and in which task context; passed as one JSON argument.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ExecSpec {
    /// The program (looked up in the task's `PATH` when it has no `/`) and its arguments.
    pub command: Vec<String>,
    /// The complete environment of the command.
    pub env: Vec<(String, String)>,
    /// Working directory (inside the task's root when namespaces are entered).
    pub cwd: Option<PathBuf>,
    /// User to run as; `None` keeps the current one.
    pub user: Option<String>,
    /// The task's cgroup, joined (in every directory of its layout) before anything else.
    pub cgroup: Option<ExecCgroup>,
    /// For isolated tasks: the pid of a task process whose network, mount, pid, ipc and uts namespaces
    /// are entered and whose root becomes this command's root.
    pub enter_namespaces_of: Option<i32>,
    /// Fd 0 is a terminal that becomes the command's controlling terminal.
    pub tty: bool,
}

/// A cgroup as the shim created it for the task: `name` under the cgroup `root`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecCgroup {
    pub root: PathBuf,
    pub name: String,
}

/// Entry point of the mode: `args` are the binary's arguments after `exec`. Returns the exit
/// code when the command could not be started (or, after a pid namespace was entered, the
/// command's exit code); on success the process is replaced and never returns.
pub fn main_from_args(args: impl IntoIterator<Item = OsString>) -> i32 {
    let mut args = args.into_iter();
    let (Some(spec_text), None) = (args.next(), args.next()) else {
        report("usage: drover-shim exec <spec-json>");
        return 2;
    };
    let spec: ExecSpec = match serde_json::from_slice(spec_text.as_bytes()) {
        Ok(spec) => spec,
        Err(error) => {
            report(&format!("parsing the exec spec: {error}"));
            return 2;
        }
    };
    run(&spec)
}

fn report(message: &str) {
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(stderr, "drover-shim exec: {message}");
    let _ = stderr.flush();
}

fn run(spec: &ExecSpec) -> i32 {
    if spec.command.is_empty() {
        report("no command given");
        return 2;
    }
    if let Err(message) = join_cgroup(spec.cgroup.as_ref()) {
        report(&message);
        return EXIT_SETUP_FAILED;
    }
    // A new session: the command and its children form one process group the agent can kill,
    // and a terminal on fd 0 can become the controlling one.
    if let Err(error) = nix::unistd::setsid() {
        report(&format!("starting a new session: {error}"));
        return EXIT_SETUP_FAILED;
    }
    if let Some(task_pid) = spec.enter_namespaces_of {
        if let Err(message) = enter_namespaces(task_pid) {
            report(&message);
            return EXIT_SETUP_FAILED;
        }
        // Entering a pid namespace only applies to children: the command runs in one, and
        // this process passes its exit status on.
        // SAFETY: this process is single-threaded (the shim binary starts no threads in
        // this mode), so the child may run any code after fork.
        #[allow(unsafe_code)]
        let forked = unsafe { nix::unistd::fork() };
        return match forked {
            Err(error) => {
                report(&format!("forking into the task's pid namespace: {error}"));
                EXIT_SETUP_FAILED
            }
            Ok(ForkResult::Child) => exec_command(spec),
            Ok(ForkResult::Parent { child }) => wait_for_exit(child),
        };
    }
    exec_command(spec)
}

fn wait_for_exit(child: nix::unistd::Pid) -> i32 {
    loop {
        match waitpid(child, None) {
            Ok(WaitStatus::Exited(_, code)) => return code,
            Ok(WaitStatus::Signaled(_, signal, _)) => return 128 + signal as i32,
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(error) => {
                report(&format!("waiting for the command: {error}"));
                return EXIT_SETUP_FAILED;
            }
        }
    }
}

fn join_cgroup(cgroup: Option<&ExecCgroup>) -> Result<(), String> {
    let Some(cgroup) = cgroup else {
        return Ok(());
    };
    drover_isolate::TaskCgroup::open(&cgroup.root, &cgroup.name)
        .and_then(|opened| opened.add_pid(0))
        .map_err(|error| format!("joining cgroup {}: {error}", cgroup.name))
}

/// Enters the network, mount, pid, ipc and uts namespaces of `task_pid` and changes root to its
/// root (a container's network is its own; an exec task's is the host's, entered harmlessly).
fn enter_namespaces(task_pid: i32) -> Result<(), String> {
    let proc_dir = PathBuf::from(format!("/proc/{task_pid}"));
    // Opened before any namespace changes: the root as the task sees it.
    let root = File::open(proc_dir.join("root"))
        .map_err(|error| format!("opening the root of task process {task_pid}: {error}"))?;
    let namespaces = [
        ("net", CloneFlags::CLONE_NEWNET),
        ("ipc", CloneFlags::CLONE_NEWIPC),
        ("uts", CloneFlags::CLONE_NEWUTS),
        ("pid", CloneFlags::CLONE_NEWPID),
        ("mnt", CloneFlags::CLONE_NEWNS),
    ];
    let mut opened = Vec::with_capacity(namespaces.len());
    for (name, flag) in namespaces {
        let file = File::open(proc_dir.join("ns").join(name)).map_err(|error| {
            format!("opening the {name} namespace of task process {task_pid}: {error}")
        })?;
        opened.push((name, flag, file));
    }
    for (name, flag, file) in &opened {
        // Entering a namespace the process is already in is harmless.
        nix::sched::setns(file.as_fd(), *flag).map_err(|error| {
            format!("entering the {name} namespace of task process {task_pid}: {error}")
        })?;
    }
    nix::unistd::fchdir(root.as_fd())
        .and_then(|()| nix::unistd::chroot("."))
        .and_then(|()| nix::unistd::chdir("/"))
        .map_err(|error| format!("changing root to that of task process {task_pid}: {error}"))
}

/// Sets up the rest of the context and replaces this process with the command. Returns the
/// exit code only when that failed.
fn exec_command(spec: &ExecSpec) -> i32 {
    match prepare_and_exec(spec) {
        Ok(never) => match never {},
        Err((code, message)) => {
            report(&message);
            code
        }
    }
}

fn prepare_and_exec(spec: &ExecSpec) -> Result<std::convert::Infallible, (i32, String)> {
    let failed = |message: String| (EXIT_SETUP_FAILED, message);
    if spec.tty {
        take_controlling_terminal().map_err(failed)?;
    }
    // The command starts with default signal dispositions and an empty mask (Rust ignores
    // SIGPIPE at start-up; ignored signals would survive exec).
    // SAFETY: setting a signal to its default disposition installs no handler code.
    #[allow(unsafe_code)]
    let reset = unsafe { nix::sys::signal::signal(Signal::SIGPIPE, SigHandler::SigDfl) };
    reset
        .map(|_| ())
        .and_then(|()| sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None))
        .map_err(|error| failed(format!("resetting signals: {error}")))?;
    let credentials = match &spec.user {
        Some(name) if !name.is_empty() => Some(credentials_of(name).map_err(failed)?),
        _ => None,
    };
    if let Some(cwd) = &spec.cwd {
        nix::unistd::chdir(cwd.as_path())
            .map_err(|error| failed(format!("changing directory to {}: {error}", cwd.display())))?;
    }
    if spec.enter_namespaces_of.is_some() {
        // An isolated task runs with the default capability bound and no_new_privs; a command
        // exec'd into it gets no more (a set-uid binary from the read-only system dirs must not
        // lift it out of the task's privileges). The bound needs CAP_SETPCAP, still held here.
        let keep = drover_isolate::caps::CapabilitySet::from_names(
            &drover_isolate::caps::DEFAULT_CAPABILITIES,
        )
        .map_err(|error| failed(error.to_string()))?;
        drover_isolate::caps::limit_bounding_set(keep)
            .and_then(|()| drover_isolate::caps::set_no_new_privs())
            .map_err(|error| failed(format!("limiting privileges: {error}")))?;
    }
    if let Some((uid, gid, groups)) = &credentials {
        nix::unistd::setgroups(groups)
            .and_then(|()| nix::unistd::setgid(*gid))
            .and_then(|()| nix::unistd::setuid(*uid))
            .map_err(|error| failed(format!("switching to uid {uid} gid {gid}: {error}")))?;
    }
    let search_path = spec
        .env
        .iter()
        .rev()
        .find(|(key, _)| key == "PATH")
        .map_or(DEFAULT_SEARCH_PATH, |(_, value)| value.as_str());
    let program = resolve_program(&spec.command[0], search_path).ok_or_else(|| {
        (
            EXIT_COMMAND_NOT_FOUND,
            format!("{:?}: command not found", spec.command[0]),
        )
    })?;
    let to_c_string = |text: &[u8]| {
        CString::new(text).map_err(|_| failed(format!("{text:?} contains a NUL byte")))
    };
    let program_c = to_c_string(program.as_os_str().as_bytes())?;
    let argv = spec
        .command
        .iter()
        .map(|argument| to_c_string(argument.as_bytes()))
        .collect::<Result<Vec<_>, _>>()?;
    let envp = spec
        .env
        .iter()
        .map(|(key, value)| to_c_string(format!("{key}={value}").as_bytes()))
        .collect::<Result<Vec<_>, _>>()?;
    nix::unistd::execve(&program_c, &argv, &envp)
        .map_err(|error| failed(format!("executing {}: {error}", program.display())))
}

/// Makes the terminal on fd 0 the controlling terminal of this (new) session.
fn take_controlling_terminal() -> Result<(), String> {
    // SAFETY: TIOCSCTTY takes an integer argument and touches no memory of this process.
    #[allow(unsafe_code)]
    let result = unsafe { libc::ioctl(0, libc::TIOCSCTTY, 0) };
    if result == 0 {
        Ok(())
    } else {
        Err(format!(
            "taking the terminal as the controlling one: {}",
            std::io::Error::last_os_error()
        ))
    }
}

fn credentials_of(
    name: &str,
) -> Result<(nix::unistd::Uid, nix::unistd::Gid, Vec<nix::unistd::Gid>), String> {
    let user = User::from_name(name)
        .map_err(|error| format!("looking up user {name:?}: {error}"))?
        .ok_or_else(|| format!("user {name:?} does not exist"))?;
    let user_name = CString::new(name).map_err(|_| format!("user name {name:?} contains NUL"))?;
    let groups = nix::unistd::getgrouplist(&user_name, user.gid)
        .map_err(|error| format!("listing the groups of {name:?}: {error}"))?;
    Ok((user.uid, user.gid, groups))
}

/// The program to execute: `name` itself when it holds a `/`, else the first executable file
/// of that name in `search_path`.
fn resolve_program(name: &str, search_path: &str) -> Option<PathBuf> {
    if name.contains('/') {
        return Some(PathBuf::from(name));
    }
    if name.is_empty() {
        return None;
    }
    search_path
        .split(':')
        .filter(|dir| !dir.is_empty())
        .map(|dir| Path::new(dir).join(OsStr::new(name)))
        .find(|candidate| {
            fs::metadata(candidate).is_ok_and(|metadata| {
                metadata.is_file() && metadata.permissions().mode() & 0o111 != 0
            })
        })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn programs_are_found_in_the_given_path_only() {
        let dir = tempfile::tempdir().unwrap();
        let tool = dir.path().join("tool");
        fs::write(&tool, b"#!/bin/sh\n").unwrap();
        fs::set_permissions(&tool, fs::Permissions::from_mode(0o755)).unwrap();
        let plain = dir.path().join("plain");
        fs::write(&plain, b"").unwrap();
        let search = format!("/nonexistent:{}", dir.path().display());
        assert_eq!(resolve_program("tool", &search), Some(tool));
        assert_eq!(resolve_program("plain", &search), None);
        assert_eq!(resolve_program("tool", "/nonexistent"), None);
        assert_eq!(
            resolve_program("./relative/x", "/nonexistent"),
            Some(PathBuf::from("./relative/x"))
        );
    }

    #[test]
    fn a_spec_round_trips_and_missing_fields_default() {
        let spec: ExecSpec = serde_json::from_str(r#"{"command":["/bin/true"]}"#).unwrap();
        assert_eq!(spec.command, vec!["/bin/true"]);
        assert!(!spec.tty && spec.cgroup.is_none() && spec.enter_namespaces_of.is_none());
        let text = serde_json::to_string(&spec).unwrap();
        assert_eq!(serde_json::from_str::<ExecSpec>(&text).unwrap(), spec);
    }
}
