//! The shim process itself: launcher, daemon, task fork/exec, output pump, reaper, exit record
//! and the socket server (one thread per connection).
//!
//! Not for: anything the agent decides (restart policy, kill timeouts, log settings); those come
//! in the launch spec or the requests.
//!
//! Threads: the main thread forks the task before any other thread exists, then pumps the
//! task's pipes and reaps children (SIGCHLD through a signalfd; the signal is blocked in every
//! thread). An acceptor thread takes connections and gives each one its own thread, so several
//! `wait`s can block at once.

use std::ffi::{CString, OsString};
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use drover_isolate::{
    BindMount, CapabilitySet, CgroupLimits, NamespaceSet, PidNamespaceForNextChild, TaskCgroup,
    TaskRoot,
};
use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SigHandler, SigSet, SigmaskHow, Signal, killpg, sigprocmask};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{ForkResult, Gid, Pid, Uid, User};

use crate::atomic_file::Durability;
use crate::logs::LogRotator;
use crate::proto::{
    EXIT_STATUS_FILE, ExitStatus, LaunchSpec, PROTOCOL_VERSION, Request, Response, SHIM_LOG_FILE,
    SOCKET_FILE, ShimIdentity, StartReport, TaskStats, TaskStatus, process_start_time,
};

/// How long the cgroup may take to empty after a SIGKILL.
const KILL_ALL_TIMEOUT: Duration = Duration::from_secs(10);
/// After the task's main process has exited and the rest of its tree is killed, how long the
/// pipes may still deliver output (a process that escaped the tree could hold them open).
const DRAIN_AFTER_EXIT: Duration = Duration::from_secs(2);
/// An unfinished output line is written out after the task has been quiet this long.
const PENDING_LINE_FLUSH: Duration = Duration::from_millis(500);
/// How long `kill` and `cleanup` wait for the exit to be recorded after the final SIGKILL.
const EXIT_AFTER_KILL_TIMEOUT: Duration = Duration::from_secs(30);
/// Stack of connection threads: they parse one small JSON line at a time.
const CONNECTION_STACK: usize = 128 * 1024;

/// Entry point of the `drover-shim` binary: `drover-shim <launch-spec.json>`. Returns the exit
/// code of the launcher (0 when the shim is serving, 1 when the task could not be started); the
/// daemonized shim never returns from here.
pub fn main_from_args(args: impl IntoIterator<Item = OsString>) -> i32 {
    let mut args = args.into_iter().skip(1);
    let (Some(spec_path), None) = (args.next(), args.next()) else {
        print_report(&StartReport::Failed {
            message: "usage: drover-shim <launch-spec.json>".to_string(),
        });
        return 2;
    };
    let spec = match load_spec(Path::new(&spec_path)) {
        Ok(spec) => spec,
        Err(message) => {
            print_report(&StartReport::Failed { message });
            return 1;
        }
    };
    launch(spec)
}

fn print_report(report: &StartReport) {
    let line = serde_json::to_string(report)
        .unwrap_or_else(|_| r#"{"type":"failed","message":"unserializable report"}"#.to_string());
    let mut stdout = io::stdout().lock();
    let _ = writeln!(stdout, "{line}");
    let _ = stdout.flush();
}

fn load_spec(path: &Path) -> Result<LaunchSpec, String> {
    let text = fs::read_to_string(path)
        .map_err(|error| format!("reading launch spec {}: {error}", path.display()))?;
    let spec: LaunchSpec = serde_json::from_str(&text)
        .map_err(|error| format!("parsing launch spec {}: {error}", path.display()))?;
    if spec.version != PROTOCOL_VERSION {
        return Err(format!(
            "launch spec version {} is not the supported {PROTOCOL_VERSION}",
            spec.version
        ));
    }
    let absolute = |name: &str, path: &Path| {
        if path.is_absolute() {
            Ok(())
        } else {
            Err(format!(
                "{name} must be an absolute path, got {}",
                path.display()
            ))
        }
    };
    absolute("state_dir", &spec.state_dir)?;
    absolute("logs.dir", &spec.logs.dir)?;
    if let Some(cwd) = &spec.cwd {
        absolute("cwd", cwd)?;
    }
    if let Some(cgroup) = &spec.cgroup {
        absolute("cgroup.root", &cgroup.root)?;
    }
    if spec.logs.task_name.is_empty() || spec.logs.task_name.contains('/') {
        return Err(format!("invalid logs.task_name {:?}", spec.logs.task_name));
    }
    Ok(spec)
}

/// Forks the daemon and relays its start report. The launcher is single-threaded here.
fn launch(spec: LaunchSpec) -> i32 {
    let (report_read, report_write) = match nix::unistd::pipe2(OFlag::O_CLOEXEC) {
        Ok(pipe) => pipe,
        Err(error) => {
            print_report(&StartReport::Failed {
                message: format!("creating the report pipe: {error}"),
            });
            return 1;
        }
    };
    // SAFETY: no thread has been spawned in this process yet, so the child is a complete copy
    // and may allocate, lock and run arbitrary code.
    #[allow(unsafe_code)]
    let forked = unsafe { nix::unistd::fork() };
    match forked {
        Err(error) => {
            print_report(&StartReport::Failed {
                message: format!("forking the shim: {error}"),
            });
            1
        }
        Ok(ForkResult::Parent { .. }) => {
            drop(report_write);
            let mut text = String::new();
            let report = match File::from(report_read).read_to_string(&mut text) {
                Ok(_) => serde_json::from_str(text.trim()).unwrap_or(StartReport::Failed {
                    message: format!("the shim exited while starting: {:?}", text.trim()),
                }),
                Err(error) => StartReport::Failed {
                    message: format!("reading the shim's start report: {error}"),
                },
            };
            print_report(&report);
            match report {
                StartReport::Ready { .. } => 0,
                StartReport::Failed { .. } => 1,
            }
        }
        Ok(ForkResult::Child) => {
            drop(report_read);
            let code = Daemon::run(spec, File::from(report_write));
            std::process::exit(code)
        }
    }
}

/// Everything prepared before the fork, so the child only makes system calls.
struct PreparedExec {
    program: CString,
    argv: Vec<CString>,
    envp: Vec<CString>,
    cwd: Option<CString>,
    credentials: Option<(Uid, Gid, Vec<Gid>)>,
    /// For isolated tasks: the program is looked up in `path_variable` inside the task root.
    isolation: Option<PreparedIsolation>,
    /// The group's network namespace, opened before the fork; the child joins it first.
    network_namespace: Option<File>,
}

/// The isolation of a task, in the isolate crate's terms.
struct PreparedIsolation {
    namespaces: NamespaceSet,
    root: TaskRoot,
    capabilities: CapabilitySet,
    owned_by_task_user: Vec<PathBuf>,
    command: String,
    path_variable: String,
    /// Set in the new uts namespace; `None` keeps the copy of the host's name.
    hostname: Option<String>,
}

/// State shared between the main thread and the connection threads.
struct Shared {
    identity: ShimIdentity,
    task_pid: Pid,
    cgroup: Option<TaskCgroup>,
    state_dir: PathBuf,
    exit: Mutex<Option<ExitStatus>>,
    exited: Condvar,
}

struct Daemon;

impl Daemon {
    /// The daemon: starts the task, reports on `report`, then serves until `cleanup`.
    fn run(spec: LaunchSpec, mut report: File) -> i32 {
        match Self::start(&spec) {
            Ok((shared, pipes, signal_fd)) => {
                let ready = StartReport::Ready {
                    identity: shared.identity.clone(),
                };
                let line = serde_json::to_string(&ready).unwrap_or_default();
                let _ = report.write_all(line.as_bytes());
                drop(report);
                Self::supervise(&shared, pipes, &signal_fd);
                0
            }
            Err(message) => {
                let failed = StartReport::Failed {
                    message: message.clone(),
                };
                let line = serde_json::to_string(&failed).unwrap_or_default();
                let _ = report.write_all(line.as_bytes());
                eprintln!("drover-shim: start failed: {message}");
                1
            }
        }
    }

    fn start(spec: &LaunchSpec) -> Result<(Arc<Shared>, TaskPipes, SignalFd), String> {
        nix::unistd::setsid().map_err(|error| format!("setsid: {error}"))?;
        nix::sys::prctl::set_child_subreaper(true)
            .map_err(|error| format!("becoming child subreaper: {error}"))?;
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&spec.state_dir)
            .map_err(|error| format!("creating state dir {}: {error}", spec.state_dir.display()))?;
        redirect_own_stdio(&spec.state_dir.join(SHIM_LOG_FILE))?;
        // The shim must not pin any directory the agent may want to remove.
        let _ = nix::unistd::chdir("/");
        if spec.state_dir.join(EXIT_STATUS_FILE).exists() {
            return Err(format!(
                "state dir {} still holds the exit status of an earlier run",
                spec.state_dir.display()
            ));
        }

        // Block SIGCHLD before any thread exists, so every thread inherits the mask and the
        // signalfd of the main thread sees every child exit (the task resets its mask). The
        // socket and the signalfd exist before the task does, so nothing that can fail is left
        // once it runs.
        let mut child_signal = SigSet::empty();
        child_signal.add(Signal::SIGCHLD);
        sigprocmask(SigmaskHow::SIG_BLOCK, Some(&child_signal), None)
            .map_err(|error| format!("blocking SIGCHLD: {error}"))?;
        let signal_fd = SignalFd::with_flags(
            &child_signal,
            SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK,
        )
        .map_err(|error| format!("signalfd: {error}"))?;
        let socket_path = spec.state_dir.join(SOCKET_FILE);
        let _ = fs::remove_file(&socket_path);
        let address = crate::socket_path::SocketPath::new(&socket_path)
            .map_err(|error| format!("binding {}: {error}", socket_path.display()))?;
        let listener = UnixListener::bind(address.path())
            .map_err(|error| format!("binding {}: {error}", socket_path.display()))?;
        drop(address);
        fs::set_permissions(&socket_path, fs::Permissions::from_mode(0o600))
            .map_err(|error| format!("restricting {}: {error}", socket_path.display()))?;
        let cgroup = match &spec.cgroup {
            Some(cgroup_spec) => {
                let cgroup = TaskCgroup::open(&cgroup_spec.root, &cgroup_spec.name)
                    .map_err(|error| format!("task cgroup: {error}"))?;
                cgroup
                    .create(&CgroupLimits {
                        memory_soft_bytes: cgroup_spec.memory_soft_bytes,
                        memory_hard_bytes: cgroup_spec.memory_hard_bytes,
                        cpu_shares: cgroup_spec.cpu_shares,
                        pids_max: cgroup_spec.pids_max,
                        cpuset_cpus: cgroup_spec.cpuset_cpus.clone(),
                    })
                    .map_err(|error| format!("creating task cgroup: {error}"))?;
                let leftovers = cgroup
                    .pids()
                    .map_err(|error| format!("reading task cgroup: {error}"))?;
                if !leftovers.is_empty() {
                    return Err(format!(
                        "task cgroup {} still holds processes {leftovers:?} of an earlier run",
                        cgroup_spec.name
                    ));
                }
                Some(cgroup)
            }
            None => None,
        };
        let result = Self::start_task(spec, cgroup.as_ref());
        let (task_pid, pipes) = match result {
            Ok(started) => started,
            Err(message) => {
                if let Some(cgroup) = &cgroup {
                    let _ = cgroup.kill_all(KILL_ALL_TIMEOUT);
                    let _ = cgroup.remove();
                }
                return Err(message);
            }
        };

        let shim_pid = nix::unistd::getpid().as_raw();
        let identity = ShimIdentity {
            task_id: spec.task_id.clone(),
            shim_pid,
            shim_start_time: process_start_time(shim_pid).unwrap_or(0),
            task_pid: task_pid.as_raw(),
            task_start_time: process_start_time(task_pid.as_raw()).unwrap_or(0),
            protocol_version: PROTOCOL_VERSION,
        };
        let shared = Arc::new(Shared {
            identity,
            task_pid,
            cgroup,
            state_dir: spec.state_dir.clone(),
            exit: Mutex::new(None),
            exited: Condvar::new(),
        });

        let acceptor_shared = Arc::clone(&shared);
        let acceptor = thread::Builder::new()
            .name("accept".into())
            .stack_size(CONNECTION_STACK)
            .spawn(move || accept_connections(&listener, &acceptor_shared));
        if let Err(error) = acceptor {
            kill_tree(&shared);
            let _ = waitpid(shared.task_pid, None);
            if let Some(cgroup) = &shared.cgroup {
                let _ = cgroup.remove();
            }
            return Err(format!("starting the socket thread: {error}"));
        }
        Ok((shared, pipes, signal_fd))
    }

    /// Prepares and forks the task; returns once it has exec'd (or fails with why it could not).
    fn start_task(
        spec: &LaunchSpec,
        cgroup: Option<&TaskCgroup>,
    ) -> Result<(Pid, TaskPipes), String> {
        let prepared = prepare_exec(spec)?;
        let stdout_log = LogRotator::open(
            &spec.logs.dir,
            &format!("{}.stdout", spec.logs.task_name),
            spec.logs.max_files,
            spec.logs.max_file_size_bytes,
        )
        .map_err(|error| format!("opening stdout log in {}: {error}", spec.logs.dir.display()))?;
        let stderr_log = LogRotator::open(
            &spec.logs.dir,
            &format!("{}.stderr", spec.logs.task_name),
            spec.logs.max_files,
            spec.logs.max_file_size_bytes,
        )
        .map_err(|error| format!("opening stderr log in {}: {error}", spec.logs.dir.display()))?;
        let pipe = || nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(|e| format!("pipe: {e}"));
        let (stdout_read, stdout_write) = pipe()?;
        let (stderr_read, stderr_write) = pipe()?;
        let (error_read, error_write) = pipe()?;
        let dev_null = File::open("/dev/null").map_err(|error| format!("/dev/null: {error}"))?;

        // An isolated task is pid 1 of its own pid namespace: the namespace is unshared for the
        // next child only, and the shim returns to its own right after the fork.
        let pid_namespace = match &prepared.isolation {
            Some(_) => Some(
                PidNamespaceForNextChild::create()
                    .map_err(|error| format!("pid namespace: {error}"))?,
            ),
            None => None,
        };
        // SAFETY: the shim is still single-threaded (the socket thread starts after this), so the
        // child may allocate; it only prepares its process state and execs or exits.
        #[allow(unsafe_code)]
        let forked = unsafe { nix::unistd::fork() };
        let restored = match (pid_namespace, &forked) {
            (Some(namespace), Ok(ForkResult::Parent { .. }) | Err(_)) => namespace.restore(),
            _ => Ok(()),
        };
        if let (Err(error), Ok(ForkResult::Parent { child })) = (&restored, &forked) {
            let _ = nix::sys::signal::kill(*child, Signal::SIGKILL);
            let _ = waitpid(*child, None);
            return Err(format!("leaving the task's pid namespace: {error}"));
        }
        match forked {
            Err(error) => Err(format!("forking the task: {error}")),
            Ok(ForkResult::Child) => {
                drop((stdout_read, stderr_read, error_read));
                let failure = exec_task(&prepared, cgroup, &dev_null, &stdout_write, &stderr_write);
                let _ = File::from(error_write).write_all(failure.as_bytes());
                // SAFETY: _exit ends the forked child without running the parent's atexit
                // handlers or flushing its copied stdio buffers.
                #[allow(unsafe_code)]
                unsafe {
                    libc::_exit(127)
                }
            }
            Ok(ForkResult::Parent { child }) => {
                drop((stdout_write, stderr_write, error_write, dev_null));
                let mut failure = String::new();
                let _ = File::from(error_read).read_to_string(&mut failure);
                if !failure.is_empty() {
                    let _ = waitpid(child, None);
                    return Err(failure);
                }
                Ok((
                    child,
                    TaskPipes {
                        stdout: Some((File::from(stdout_read), stdout_log)),
                        stderr: Some((File::from(stderr_read), stderr_log)),
                    },
                ))
            }
        }
    }

    /// The main loop: pump output, reap children, record the exit, then keep reaping until the
    /// agent's `cleanup` ends the process.
    fn supervise(shared: &Shared, mut pipes: TaskPipes, signal_fd: &SignalFd) {
        let mut task_wait_status: Option<WaitStatus> = None;
        let mut drain_deadline: Option<Instant> = None;
        let mut recorded = false;
        let mut last_output = Instant::now();
        loop {
            if task_wait_status.is_none() {
                task_wait_status = reap_children(shared.task_pid);
            } else {
                reap_children(shared.task_pid);
            }
            if let (Some(wait_status), false) = (task_wait_status, recorded) {
                let deadline = *drain_deadline.get_or_insert_with(|| {
                    kill_tree(shared);
                    Instant::now() + DRAIN_AFTER_EXIT
                });
                if pipes.all_closed() || Instant::now() >= deadline {
                    pipes.close_all();
                    record_exit(shared, wait_status);
                    recorded = true;
                }
            }
            let timeout = if recorded {
                PollTimeout::NONE
            } else if let Some(deadline) = drain_deadline {
                duration_timeout(deadline.saturating_duration_since(Instant::now()))
            } else if pipes.has_pending() {
                duration_timeout(PENDING_LINE_FLUSH.saturating_sub(last_output.elapsed()))
            } else {
                PollTimeout::NONE
            };
            let (signal_ready, stdout_ready, stderr_ready) = {
                let mut fds = vec![PollFd::new(signal_fd.as_fd(), PollFlags::POLLIN)];
                let stdout_index = pipes.stdout.as_ref().map(|(pipe, _)| {
                    fds.push(PollFd::new(pipe.as_fd(), PollFlags::POLLIN));
                    fds.len() - 1
                });
                let stderr_index = pipes.stderr.as_ref().map(|(pipe, _)| {
                    fds.push(PollFd::new(pipe.as_fd(), PollFlags::POLLIN));
                    fds.len() - 1
                });
                match poll(&mut fds, timeout) {
                    Ok(_) | Err(Errno::EINTR) => {}
                    Err(error) => {
                        eprintln!("drover-shim: poll: {error}");
                        thread::sleep(Duration::from_millis(100));
                    }
                }
                let ready = |index: Option<usize>| {
                    index
                        .and_then(|index| fds.get(index))
                        .and_then(PollFd::revents)
                        .is_some_and(|events| !events.is_empty())
                };
                (ready(Some(0)), ready(stdout_index), ready(stderr_index))
            };
            if signal_ready {
                while let Ok(Some(_)) = signal_fd.read_signal() {}
            }
            if stdout_ready {
                let _ = pump(&mut pipes.stdout, "stdout");
                last_output = Instant::now();
            }
            if stderr_ready {
                let _ = pump(&mut pipes.stderr, "stderr");
                last_output = Instant::now();
            }
            if !stdout_ready && !stderr_ready && last_output.elapsed() >= PENDING_LINE_FLUSH {
                pipes.flush_pending();
            }
        }
    }
}

fn duration_timeout(duration: Duration) -> PollTimeout {
    PollTimeout::try_from(duration.max(Duration::from_millis(1))).unwrap_or(PollTimeout::NONE)
}

/// The read ends of the task's stdout and stderr, each with its log files.
struct TaskPipes {
    stdout: Option<(File, LogRotator)>,
    stderr: Option<(File, LogRotator)>,
}

impl TaskPipes {
    fn all_closed(&self) -> bool {
        self.stdout.is_none() && self.stderr.is_none()
    }

    fn has_pending(&self) -> bool {
        [&self.stdout, &self.stderr]
            .into_iter()
            .flatten()
            .any(|(_, log)| log.has_pending())
    }

    fn flush_pending(&mut self) {
        for (_, log) in [&mut self.stdout, &mut self.stderr].into_iter().flatten() {
            if let Err(error) = log.flush_pending() {
                eprintln!("drover-shim: writing log: {error}");
            }
        }
    }

    fn close_all(&mut self) {
        for pipe in [&mut self.stdout, &mut self.stderr] {
            // Take what is already buffered in the pipe without blocking on a writer that
            // escaped the tree.
            if let Some((file, _)) = pipe.as_ref() {
                let _ = nix::fcntl::fcntl(
                    file.as_fd(),
                    nix::fcntl::FcntlArg::F_SETFL(OFlag::O_NONBLOCK),
                );
            }
            while pump(pipe, "output") {}
            if let Some((_, mut log)) = pipe.take()
                && let Err(error) = log.flush_pending()
            {
                eprintln!("drover-shim: writing log: {error}");
            }
        }
    }
}

/// Moves what is readable from one pipe into its log; closes the pipe at end of file. Returns
/// whether it read anything.
fn pump(pipe: &mut Option<(File, LogRotator)>, stream: &str) -> bool {
    let Some((file, log)) = pipe.as_mut() else {
        return false;
    };
    let mut buffer = [0u8; 16 * 1024];
    match file.read(&mut buffer) {
        Ok(0) => {
            if let Err(error) = log.flush_pending() {
                eprintln!("drover-shim: writing {stream} log: {error}");
            }
            *pipe = None;
            false
        }
        Ok(count) => {
            if let Err(error) = log.write(&buffer[..count]) {
                eprintln!("drover-shim: writing {stream} log: {error}");
            }
            true
        }
        Err(error)
            if error.kind() == io::ErrorKind::Interrupted
                || error.kind() == io::ErrorKind::WouldBlock =>
        {
            false
        }
        Err(error) => {
            eprintln!("drover-shim: reading task {stream}: {error}");
            *pipe = None;
            false
        }
    }
}

/// Reaps every exited child (the shim is a subreaper, so orphans of the task come here too).
/// Returns the task's own wait status if it was among them.
fn reap_children(task_pid: Pid) -> Option<WaitStatus> {
    let mut task_status = None;
    loop {
        match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) | Err(_) => return task_status,
            Ok(status) => {
                if status.pid() == Some(task_pid)
                    && matches!(status, WaitStatus::Exited(..) | WaitStatus::Signaled(..))
                {
                    task_status = Some(status);
                }
            }
        }
    }
}

fn redirect_own_stdio(log_path: &Path) -> Result<(), String> {
    let dev_null = OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
        .map_err(|error| format!("/dev/null: {error}"))?;
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(log_path)
        .map_err(|error| format!("{}: {error}", log_path.display()))?;
    nix::unistd::dup2_stdin(&dev_null).map_err(|error| format!("dup2 stdin: {error}"))?;
    nix::unistd::dup2_stdout(&dev_null).map_err(|error| format!("dup2 stdout: {error}"))?;
    nix::unistd::dup2_stderr(&log).map_err(|error| format!("dup2 stderr: {error}"))?;
    Ok(())
}

fn prepare_exec(spec: &LaunchSpec) -> Result<PreparedExec, String> {
    let cstring = |what: &str, value: &str| {
        CString::new(value).map_err(|_| format!("{what} contains a NUL byte: {value:?}"))
    };
    let path_variable = spec
        .env
        .iter()
        .rev()
        .find(|(key, _)| key == "PATH")
        .map(|(_, value)| value.as_str())
        .unwrap_or("/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
    let program = match &spec.isolation {
        // Looked up in the child, inside the task root.
        Some(_) => PathBuf::from(&spec.command),
        None => resolve_program(&spec.command, path_variable, spec.cwd.as_deref())?,
    };
    let mut argv = vec![cstring("command", &spec.command)?];
    for arg in &spec.args {
        argv.push(cstring("argument", arg)?);
    }
    let mut envp = Vec::with_capacity(spec.env.len());
    for (key, value) in &spec.env {
        if key.is_empty() || key.contains('=') {
            return Err(format!("invalid environment variable name {key:?}"));
        }
        envp.push(cstring("environment variable", &format!("{key}={value}"))?);
    }
    let cwd = match &spec.cwd {
        Some(cwd) => Some(cstring("cwd", &cwd.to_string_lossy())?),
        None => None,
    };
    let credentials = match &spec.user {
        Some(name) => {
            let user = User::from_name(name)
                .map_err(|error| format!("looking up user {name:?}: {error}"))?
                .ok_or_else(|| format!("user {name:?} does not exist"))?;
            let name_c = cstring("user", name)?;
            let groups = nix::unistd::getgrouplist(&name_c, user.gid)
                .map_err(|error| format!("groups of user {name:?}: {error}"))?;
            Some((user.uid, user.gid, groups))
        }
        None => None,
    };
    let isolation = match &spec.isolation {
        Some(isolation) => {
            if !isolation.root.is_absolute() {
                return Err(format!(
                    "isolation.root must be an absolute path, got {}",
                    isolation.root.display()
                ));
            }
            if spec.command.is_empty() {
                return Err("command is empty".to_string());
            }
            Some(PreparedIsolation {
                namespaces: NamespaceSet {
                    mount: true,
                    ipc: true,
                    uts: true,
                    // A group network namespace is joined instead of a new empty one.
                    network: isolation.network_none && spec.network_namespace.is_none(),
                },
                root: TaskRoot {
                    root: isolation.root.clone(),
                    binds: isolation
                        .binds
                        .iter()
                        .map(|bind| BindMount {
                            source: bind.source.clone(),
                            target: bind.target.clone(),
                            read_only: bind.read_only,
                        })
                        .collect(),
                },
                capabilities: CapabilitySet::from_names(&isolation.capabilities)
                    .map_err(|error| format!("capabilities: {error}"))?,
                owned_by_task_user: isolation.owned_by_task_user.clone(),
                command: spec.command.clone(),
                path_variable: path_variable.to_string(),
                hostname: isolation.hostname.clone(),
            })
        }
        None => None,
    };
    let network_namespace = match &spec.network_namespace {
        Some(path) => Some(File::open(path).map_err(|error| {
            format!("opening the network namespace {}: {error}", path.display())
        })?),
        None => None,
    };
    Ok(PreparedExec {
        program: cstring("command", &program.to_string_lossy())?,
        argv,
        envp,
        cwd,
        credentials,
        isolation,
        network_namespace,
    })
}

/// A command with a `/` is used as given (relative to the task's cwd); a bare name is looked up
/// in the task's `PATH`.
fn resolve_program(command: &str, path: &str, cwd: Option<&Path>) -> Result<PathBuf, String> {
    if command.is_empty() {
        return Err("command is empty".to_string());
    }
    if command.contains('/') {
        return Ok(PathBuf::from(command));
    }
    for dir in path.split(':').filter(|dir| !dir.is_empty()) {
        let mut candidate = PathBuf::from(dir).join(command);
        if candidate.is_relative()
            && let Some(cwd) = cwd
        {
            candidate = cwd.join(candidate);
        }
        let executable = fs::metadata(&candidate)
            .map(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
            .unwrap_or(false);
        if executable {
            return Ok(candidate);
        }
    }
    Err(format!("command {command:?} not found in PATH {path:?}"))
}

/// Runs in the forked child: sets up the process and execs. Returns only on failure, with
/// what failed.
fn exec_task(
    prepared: &PreparedExec,
    cgroup: Option<&TaskCgroup>,
    stdin: &File,
    stdout: &OwnedFd,
    stderr: &OwnedFd,
) -> String {
    // Own session and process group, so the task's tree can be signalled as a group and no
    // terminal signal of the shim's reaches it.
    if let Err(error) = nix::unistd::setsid() {
        return format!("setsid: {error}");
    }
    if let Some(cgroup) = cgroup
        && let Err(error) = cgroup.add_pid(0)
    {
        return format!("joining the task cgroup: {error}");
    }
    // The group's network namespace before any other: the namespaces unshared next (uts, ipc,
    // mount, pid) are independent of it.
    if let Some(namespace) = &prepared.network_namespace
        && let Err(error) = drover_isolate::join_network_namespace(namespace)
    {
        return error.to_string();
    }
    if let Some(isolation) = &prepared.isolation {
        if let Err(error) = drover_isolate::unshare_namespaces(isolation.namespaces) {
            return error.to_string();
        }
        if let Some(hostname) = &isolation.hostname
            && let Err(error) = drover_isolate::set_hostname(hostname)
        {
            return error.to_string();
        }
    }
    if let Err(error) = nix::unistd::dup2_stdin(stdin)
        .and_then(|()| nix::unistd::dup2_stdout(stdout))
        .and_then(|()| nix::unistd::dup2_stderr(stderr))
    {
        return format!("redirecting stdio: {error}");
    }
    // The task starts with default signal dispositions and an empty mask (Rust ignores SIGPIPE
    // in the shim; ignored signals would survive exec).
    // SAFETY: setting a signal to its default disposition installs no handler code.
    #[allow(unsafe_code)]
    let reset = unsafe { nix::sys::signal::signal(Signal::SIGPIPE, SigHandler::SigDfl) };
    if let Err(error) = reset
        .map(|_| ())
        .and_then(|()| sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None))
    {
        return format!("resetting signals: {error}");
    }
    let mut program = prepared.program.clone();
    if let Some(isolation) = &prepared.isolation {
        match isolate_task(isolation, prepared.credentials.as_ref()) {
            Ok(resolved) => program = resolved,
            Err(message) => return message,
        }
    }
    if let Some(cwd) = &prepared.cwd
        && let Err(error) = nix::unistd::chdir(cwd.as_c_str())
    {
        return format!("changing directory to {cwd:?}: {error}");
    }
    if let Some(isolation) = &prepared.isolation {
        // The bounding set first (needs CAP_SETPCAP, still held), then no_new_privs, then the
        // user with the permitted set kept, then the task's set as effective and ambient.
        let result = drover_isolate::caps::limit_bounding_set(isolation.capabilities)
            .and_then(|()| drover_isolate::caps::set_no_new_privs())
            .and_then(|()| drover_isolate::caps::keep_capabilities_across_setuid());
        if let Err(error) = result {
            return error.to_string();
        }
    }
    if let Some((uid, gid, groups)) = &prepared.credentials
        && let Err(error) = nix::unistd::setgroups(groups)
            .and_then(|()| nix::unistd::setgid(*gid))
            .and_then(|()| nix::unistd::setuid(*uid))
    {
        return format!("switching to uid {uid} gid {gid}: {error}");
    }
    if let Some(isolation) = &prepared.isolation
        && let Err(error) = drover_isolate::caps::set_process_capabilities(isolation.capabilities)
    {
        return error.to_string();
    }
    match nix::unistd::execve(&program, &prepared.argv, &prepared.envp) {
        Err(error) => format!("executing {program:?}: {error}"),
        Ok(never) => match never {},
    }
}

/// In the child, in its new namespaces: hands the task's dirs to its user, builds and enters
/// the task root, and finds the program there. Returns the program's path inside the root.
fn isolate_task(
    isolation: &PreparedIsolation,
    credentials: Option<&(Uid, Gid, Vec<Gid>)>,
) -> Result<CString, String> {
    if let Some((uid, gid, _)) = credentials {
        for dir in &isolation.owned_by_task_user {
            match nix::unistd::chown(dir.as_path(), Some(*uid), Some(*gid)) {
                Ok(()) | Err(Errno::ENOENT) => {}
                Err(error) => {
                    return Err(format!(
                        "handing {} to the task user: {error}",
                        dir.display()
                    ));
                }
            }
        }
    }
    drover_isolate::enter_task_root(&isolation.root)
        .map_err(|error| format!("task root: {error}"))?;
    let program = resolve_program(&isolation.command, &isolation.path_variable, None)?;
    CString::new(program.to_string_lossy().as_bytes())
        .map_err(|_| format!("command contains a NUL byte: {:?}", isolation.command))
}

/// Kills whatever is left of the task's tree: the cgroup, or the process group without one.
fn kill_tree(shared: &Shared) {
    match &shared.cgroup {
        Some(cgroup) => {
            if let Err(error) = cgroup.kill_all(KILL_ALL_TIMEOUT) {
                eprintln!("drover-shim: killing the task cgroup: {error}");
            }
        }
        None => match killpg(shared.task_pid, Signal::SIGKILL) {
            Ok(()) | Err(Errno::ESRCH) => {}
            Err(error) => eprintln!("drover-shim: killing the task's process group: {error}"),
        },
    }
}

fn signal_tree(shared: &Shared, signal: Signal) -> Result<(), String> {
    match &shared.cgroup {
        Some(cgroup) => cgroup.signal_all(signal).map_err(|error| error.to_string()),
        None => match killpg(shared.task_pid, signal) {
            Ok(()) | Err(Errno::ESRCH) => Ok(()),
            Err(error) => Err(format!("signalling the task's process group: {error}")),
        },
    }
}

fn unix_now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

fn exit_status_of(wait_status: WaitStatus, oom_killed: bool) -> ExitStatus {
    let (exit_code, signal) = match wait_status {
        WaitStatus::Exited(_, code) => (code, 0),
        WaitStatus::Signaled(_, signal, _) => (128 + signal as i32, signal as i32),
        _ => (-1, 0),
    };
    ExitStatus {
        exit_code,
        signal,
        oom_killed,
        finished_at_unix_ns: unix_now_ns(),
    }
}

/// Persists the exit status (temp file, fsync, rename, fsync dir) and wakes the waiters.
fn record_exit(shared: &Shared, wait_status: WaitStatus) {
    let oom_killed = shared
        .cgroup
        .as_ref()
        .and_then(|cgroup| cgroup.oom_kill_count().ok().flatten())
        .is_some_and(|count| count > 0);
    let exit = exit_status_of(wait_status, oom_killed);
    if let Err(error) = write_atomically(&shared.state_dir, EXIT_STATUS_FILE, &exit) {
        eprintln!("drover-shim: recording the exit status: {error}");
    }
    *lock(&shared.exit) = Some(exit);
    shared.exited.notify_all();
}

fn write_atomically(dir: &Path, name: &str, value: &ExitStatus) -> io::Result<()> {
    let bytes = serde_json::to_vec(value).map_err(io::Error::other)?;
    crate::atomic_file::write_atomically(&dir.join(name), &bytes, Durability::Flushed)
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A poisoned lock only means another thread panicked while holding it; with
    // `panic = "abort"` that cannot happen in the shim binary, and the data stays consistent
    // (every critical section is a single assignment or read).
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Waits for the exit to be recorded, up to `timeout` (forever when `None`).
fn wait_for_exit(shared: &Shared, timeout: Option<Duration>) -> Option<ExitStatus> {
    let started = Instant::now();
    let mut exit = lock(&shared.exit);
    loop {
        if let Some(status) = *exit {
            return Some(status);
        }
        exit = match timeout {
            None => shared
                .exited
                .wait(exit)
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
            Some(limit) => {
                let left = limit.checked_sub(started.elapsed())?;
                shared
                    .exited
                    .wait_timeout(exit, left)
                    .map(|(guard, _)| guard)
                    .unwrap_or_else(|poisoned| poisoned.into_inner().0)
            }
        };
    }
}

fn accept_connections(listener: &UnixListener, shared: &Arc<Shared>) {
    for connection in listener.incoming() {
        match connection {
            Ok(stream) => {
                let shared = Arc::clone(shared);
                let spawned = thread::Builder::new()
                    .name("conn".into())
                    .stack_size(CONNECTION_STACK)
                    .spawn(move || serve_connection(stream, &shared));
                if let Err(error) = spawned {
                    eprintln!("drover-shim: starting a connection thread: {error}");
                }
            }
            Err(error) => {
                eprintln!("drover-shim: accepting a connection: {error}");
                thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

fn serve_connection(stream: UnixStream, shared: &Shared) {
    let Ok(reader) = stream.try_clone() else {
        return;
    };
    let mut writer = stream;
    for line in BufReader::new(reader).lines() {
        let Ok(line) = line else { return };
        if line.trim().is_empty() {
            continue;
        }
        let response = match serde_json::from_str::<Request>(&line) {
            Ok(request) => handle_request(shared, request),
            Err(error) => Response::Error {
                message: format!("bad request: {error}"),
            },
        };
        let Ok(mut text) = serde_json::to_string(&response) else {
            return;
        };
        text.push('\n');
        let written = writer
            .write_all(text.as_bytes())
            .and_then(|()| writer.flush());
        if response == Response::CleanedUp {
            std::process::exit(0);
        }
        if written.is_err() {
            return;
        }
    }
}

fn handle_request(shared: &Shared, request: Request) -> Response {
    let current_exit = || *lock(&shared.exit);
    match request {
        Request::Hello => Response::Hello {
            identity: shared.identity.clone(),
        },
        Request::Status => Response::Status {
            status: match current_exit() {
                Some(exit) => TaskStatus::Exited(exit),
                None => TaskStatus::Running,
            },
        },
        Request::Wait => match wait_for_exit(shared, None) {
            Some(exit) => Response::Exited { exit },
            None => error_response("the task's exit was not recorded"),
        },
        Request::Signal { signal } => {
            if current_exit().is_some() {
                return error_response("the task has exited");
            }
            match Signal::try_from(signal) {
                Ok(signal) => match signal_tree(shared, signal) {
                    Ok(()) => Response::Signalled,
                    Err(message) => Response::Error { message },
                },
                Err(_) => error_response(&format!("unknown signal {signal}")),
            }
        }
        Request::Kill { signal, grace_ns } => {
            let Ok(signal) = Signal::try_from(signal) else {
                return error_response(&format!("unknown signal {signal}"));
            };
            kill_with_grace(shared, signal, Duration::from_nanos(grace_ns))
        }
        Request::Stats => stats(shared),
        Request::Cleanup => cleanup(shared),
    }
}

fn error_response(message: &str) -> Response {
    Response::Error {
        message: message.to_string(),
    }
}

fn kill_with_grace(shared: &Shared, signal: Signal, grace: Duration) -> Response {
    if let Some(exit) = *lock(&shared.exit) {
        return Response::Exited { exit };
    }
    if !grace.is_zero() {
        if let Err(message) = signal_tree(shared, signal) {
            eprintln!("drover-shim: {message}");
        }
        if let Some(exit) = wait_for_exit(shared, Some(grace)) {
            return Response::Exited { exit };
        }
    }
    kill_tree(shared);
    match wait_for_exit(shared, Some(EXIT_AFTER_KILL_TIMEOUT)) {
        Some(exit) => Response::Exited { exit },
        None => error_response("the task did not die after SIGKILL"),
    }
}

fn stats(shared: &Shared) -> Response {
    let mut stats = TaskStats {
        timestamp_unix_ns: unix_now_ns(),
        ..TaskStats::default()
    };
    match &shared.cgroup {
        Some(cgroup) => {
            let measured = cgroup
                .memory_stats()
                .and_then(|memory| Ok((memory, cgroup.cpu_stats()?, cgroup.pids()?)));
            match measured {
                Ok((memory, cpu, pids)) => {
                    stats.memory_rss = memory.rss;
                    stats.memory_cache = memory.cache;
                    stats.memory_swap = memory.swap;
                    stats.memory_usage = memory.usage;
                    stats.memory_max_usage = memory.max_usage;
                    stats.memory_kernel_usage = memory.kernel_usage;
                    stats.memory_kernel_max_usage = memory.kernel_max_usage;
                    stats.cpu_total_ns = cpu.total_ns;
                    stats.cpu_user_ns = cpu.user_ns;
                    stats.cpu_system_ns = cpu.system_ns;
                    stats.cpu_throttled_periods = cpu.throttled_periods;
                    stats.cpu_throttled_time_ns = cpu.throttled_time_ns;
                    stats.measured = true;
                    stats.pids = pids;
                }
                Err(error) => return error_response(&format!("reading cgroup stats: {error}")),
            }
        }
        None => {
            if lock(&shared.exit).is_none() {
                stats.pids = vec![shared.task_pid.as_raw()];
            }
        }
    }
    Response::Stats { stats }
}

fn cleanup(shared: &Shared) -> Response {
    if lock(&shared.exit).is_none() {
        kill_tree(shared);
        if wait_for_exit(shared, Some(EXIT_AFTER_KILL_TIMEOUT)).is_none() {
            return error_response("the task did not die after SIGKILL; not cleaning up");
        }
    }
    if let Some(cgroup) = &shared.cgroup
        && let Err(error) = cgroup.remove()
    {
        return error_response(&format!("removing the task cgroup: {error}"));
    }
    if let Err(error) = fs::remove_dir_all(&shared.state_dir)
        && error.kind() != io::ErrorKind::NotFound
    {
        return error_response(&format!(
            "removing state dir {}: {error}",
            shared.state_dir.display()
        ));
    }
    Response::CleanedUp
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn bare_commands_are_found_in_the_task_path_and_paths_are_kept() {
        let found = resolve_program("sh", "/nonexistent:/bin:/usr/bin", None).unwrap();
        assert!(found.ends_with("sh") && found.is_absolute(), "{found:?}");
        assert_eq!(
            resolve_program("./run.sh", "/bin", None).unwrap(),
            PathBuf::from("./run.sh")
        );
        let missing = resolve_program("no-such-command-here", "/bin:/usr/bin", None);
        assert!(missing.unwrap_err().contains("not found"));
        assert!(resolve_program("", "/bin", None).is_err());
    }

    #[test]
    fn exit_codes_follow_nomad_for_signals() {
        let pid = Pid::from_raw(10);
        let exited = exit_status_of(WaitStatus::Exited(pid, 3), false);
        assert_eq!(
            (exited.exit_code, exited.signal, exited.oom_killed),
            (3, 0, false)
        );
        let killed = exit_status_of(WaitStatus::Signaled(pid, Signal::SIGKILL, false), true);
        assert_eq!(
            (killed.exit_code, killed.signal, killed.oom_killed),
            (137, 9, true)
        );
        assert!(killed.finished_at_unix_ns > 0);
    }

    #[test]
    fn exit_status_is_written_whole_and_no_temporary_is_left() {
        let dir = tempfile::tempdir().unwrap();
        let exit = exit_status_of(WaitStatus::Exited(Pid::from_raw(1), 0), false);
        write_atomically(dir.path(), EXIT_STATUS_FILE, &exit).unwrap();
        let read: ExitStatus =
            serde_json::from_slice(&fs::read(dir.path().join(EXIT_STATUS_FILE)).unwrap()).unwrap();
        assert_eq!(read, exit);
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from(EXIT_STATUS_FILE)]);
    }
}
