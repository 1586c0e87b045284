//! `alloc exec` sessions: starts `drover-shim exec <spec>` (a plain spawn; the shim joins the
//! task's cgroup, namespaces, user and env before exec'ing the command) with either a
//! pseudo-terminal (`rustix`'s pty calls) or three pipes, and pumps the session's input and
//! output through them. The exit code comes last; when the caller goes away (its input sender
//! or output receiver is dropped) the command's whole process group is killed.
//!
//! Not here: finding the task's context (the client does) or the websocket protocol (the API
//! crate does). Each session owns its own process, terminal and tasks; sessions share nothing.

use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use drover_shim::exec_mode::ExecSpec;
use drover_structs::exec::{ExecInput, ExecOutput};
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use rustix::pty::OpenptFlags;
use tokio::io::AsyncReadExt;
use tokio::io::AsyncWriteExt;
use tokio::io::unix::AsyncFd;
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

/// How many output chunks may wait for the caller.
const OUTPUT_BUFFER: usize = 64;
/// How many input messages may wait for the command. Input is bounded end to end: while the
/// command does not read, one write blocks, the queue behind it fills, and the websocket stops
/// being read, which pushes back on the caller over TCP instead of growing the agent's memory.
const INPUT_BUFFER: usize = 4;
/// How many stdin writes may queue behind the one in progress.
const STDIN_QUEUE: usize = 1;
/// With a terminal, how long the first input may take to arrive: a `tty_size` sent at once is
/// applied before the command starts, so the command sees the caller's size from its first line.
const FIRST_TTY_SIZE_WAIT: Duration = Duration::from_millis(100);
/// After the command exits, how long its output may still drain (a background process that
/// kept the pipes or terminal open would otherwise hold the session forever).
const DRAIN_AFTER_EXIT: Duration = Duration::from_secs(1);
/// Exit code reported when the command could not be started at all.
const EXIT_START_FAILED: i32 = 126;
/// Read size of the output pumps.
const READ_CHUNK: usize = 16 * 1024;
/// Terminal size used until the caller sends one.
const DEFAULT_TTY_SIZE: (u16, u16) = (24, 80);

/// Starts a session running `spec` through the shim at `shim_binary`. The process is started
/// by a task of the session (with a terminal, after at most [`FIRST_TTY_SIZE_WAIT`] for a size),
/// so a failure to start shows up as a message on stderr and exit code 126. Answers the
/// session's input sender and output receiver.
pub fn start_session(
    shim_binary: PathBuf,
    spec: ExecSpec,
) -> (mpsc::Sender<ExecInput>, mpsc::Receiver<ExecOutput>) {
    let (input_sender, input) = mpsc::channel(INPUT_BUFFER);
    let (output, output_receiver) = mpsc::channel(OUTPUT_BUFFER);
    tokio::spawn(async move {
        let tty = spec.tty;
        let result = if tty {
            run_with_terminal(&shim_binary, &spec, input, output.clone()).await
        } else {
            run_with_pipes(&shim_binary, &spec, input, output.clone()).await
        };
        match result {
            Ok(Some(exit_code)) => {
                let _ = output.send(ExecOutput::Exited { exit_code }).await;
            }
            // The caller went away; nobody is listening.
            Ok(None) => {}
            Err(message) => {
                let _ = output
                    .send(ExecOutput::Stderr(format!("{message}\n").into_bytes()))
                    .await;
                let _ = output
                    .send(ExecOutput::Exited {
                        exit_code: EXIT_START_FAILED,
                    })
                    .await;
            }
        }
    });
    (input_sender, output_receiver)
}

fn shim_command(shim_binary: &PathBuf, spec: &ExecSpec) -> Result<Command, String> {
    let text =
        serde_json::to_string(spec).map_err(|error| format!("encoding the exec spec: {error}"))?;
    let mut command = Command::new(shim_binary);
    command
        .arg(drover_shim::exec_mode::EXEC_MODE_ARGUMENT)
        .arg(text)
        .kill_on_drop(true);
    Ok(command)
}

fn exit_code_of(status: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(signal)) => 128 + signal,
        (None, None) => -1,
    }
}

/// Kills the command's process group (the shim starts a new session, so its pid is the group's
/// id) and the process itself, in case it had not got that far.
fn kill_process_group(child: &Child) {
    if let Some(pid) = child.id().and_then(|pid| i32::try_from(pid).ok()) {
        let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
    }
}

/// What one input does to the command's standard input.
enum StdinAction {
    Write(Vec<u8>),
    Close,
    Nothing,
}

/// Waits for the command, following the caller's input; `None` when the caller went away (the
/// command is then killed and reaped). Stdin bytes go to `stdin`, a bounded queue: while a
/// write waits for room, no further input is taken, so a command that never reads holds the
/// caller back rather than piling input up here.
async fn follow_until_exit(
    child: &mut Child,
    input: &mut mpsc::Receiver<ExecInput>,
    output: &mpsc::Sender<ExecOutput>,
    mut stdin: Option<mpsc::Sender<Vec<u8>>>,
    mut on_input: impl FnMut(ExecInput) -> StdinAction,
) -> Result<Option<i32>, String> {
    let mut waiting: Option<Vec<u8>> = None;
    loop {
        let room = stdin.clone();
        tokio::select! {
            status = child.wait() => {
                let status = status.map_err(|error| format!("waiting for the command: {error}"))?;
                // The command's own children may live on in its group; they belong to the
                // session and end with it.
                kill_process_group(child);
                return Ok(Some(exit_code_of(status)));
            }
            permit = async move { room?.reserve_owned().await.ok() }, if waiting.is_some() => {
                match (permit, waiting.take()) {
                    (Some(permit), Some(data)) => {
                        permit.send(data);
                    }
                    // The writer is gone (the command closed its input): nothing more to write.
                    _ => stdin = None,
                }
            }
            received = input.recv(), if waiting.is_none() => match received {
                Some(item) => match on_input(item) {
                    StdinAction::Write(data) if stdin.is_some() => waiting = Some(data),
                    StdinAction::Write(_) | StdinAction::Nothing => {}
                    StdinAction::Close => stdin = None,
                },
                None => {
                    kill_process_group(child);
                    let _ = child.wait().await;
                    return Ok(None);
                }
            },
            () = output.closed() => {
                kill_process_group(child);
                let _ = child.wait().await;
                return Ok(None);
            }
        }
    }
}

async fn pump_output(
    mut reader: impl tokio::io::AsyncRead + Unpin,
    output: mpsc::Sender<ExecOutput>,
    wrap: fn(Vec<u8>) -> ExecOutput,
) {
    let mut buffer = vec![0_u8; READ_CHUNK];
    loop {
        match reader.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(read) => {
                if output.send(wrap(buffer[..read].to_vec())).await.is_err() {
                    return;
                }
            }
        }
    }
}

async fn drain(pumps: Vec<tokio::task::JoinHandle<()>>) {
    let deadline = tokio::time::Instant::now() + DRAIN_AFTER_EXIT;
    for mut pump in pumps {
        if tokio::time::timeout_at(deadline, &mut pump).await.is_err() {
            pump.abort();
        }
    }
}

async fn run_with_pipes(
    shim_binary: &PathBuf,
    spec: &ExecSpec,
    mut input: mpsc::Receiver<ExecInput>,
    output: mpsc::Sender<ExecOutput>,
) -> Result<Option<i32>, String> {
    let mut command = shim_command(shim_binary, spec)?;
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command
        .spawn()
        .map_err(|error| format!("starting {}: {error}", shim_binary.display()))?;
    let mut pumps = Vec::new();
    if let Some(stdout) = child.stdout.take() {
        pumps.push(tokio::spawn(pump_output(
            stdout,
            output.clone(),
            ExecOutput::Stdout,
        )));
    }
    if let Some(stderr) = child.stderr.take() {
        pumps.push(tokio::spawn(pump_output(
            stderr,
            output.clone(),
            ExecOutput::Stderr,
        )));
    }
    // Standard input is written by its own task so a command that does not read never holds up
    // its output; dropping the sender closes the pipe once what was sent is written.
    let stdin_sender = child.stdin.take().map(|mut stdin| {
        let (sender, mut receiver) = mpsc::channel::<Vec<u8>>(STDIN_QUEUE);
        tokio::spawn(async move {
            while let Some(data) = receiver.recv().await {
                if stdin.write_all(&data).await.is_err() {
                    return;
                }
            }
        });
        sender
    });
    let exit = follow_until_exit(
        &mut child,
        &mut input,
        &output,
        stdin_sender,
        |item| match item {
            ExecInput::Stdin(data) => StdinAction::Write(data),
            ExecInput::StdinClose => StdinAction::Close,
            ExecInput::TtySize { .. } => StdinAction::Nothing,
        },
    )
    .await?;
    if exit.is_some() {
        drain(pumps).await;
    } else {
        pumps.iter().for_each(tokio::task::JoinHandle::abort);
    }
    Ok(exit)
}

/// Sets the terminal's window size (the command gets SIGWINCH).
fn set_window_size(master: &impl AsFd, height: u16, width: u16) {
    let size = rustix::termios::Winsize {
        ws_row: height,
        ws_col: width,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    if let Err(error) = rustix::termios::tcsetwinsize(master, size) {
        tracing::debug!(%error, "cannot set the exec terminal's size");
    }
}

/// Opens a pseudo-terminal: the master (non-blocking, close-on-exec) and the slave (a file,
/// close-on-exec, opened from the master rather than by name), so no other process started
/// meanwhile inherits either.
fn open_terminal() -> Result<(OwnedFd, std::fs::File), String> {
    let failed = |error: rustix::io::Errno| format!("opening a terminal: {error}");
    let flags = OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC;
    let master = rustix::pty::openpt(flags).map_err(failed)?;
    rustix::pty::grantpt(&master).map_err(failed)?;
    rustix::pty::unlockpt(&master).map_err(failed)?;
    let slave = rustix::pty::ioctl_tiocgptpeer(&master, flags).map_err(failed)?;
    rustix::io::ioctl_fionbio(&master, true).map_err(failed)?;
    Ok((master, std::fs::File::from(slave)))
}

async fn pump_terminal_output(master: Arc<AsyncFd<OwnedFd>>, output: mpsc::Sender<ExecOutput>) {
    let mut buffer = vec![0_u8; READ_CHUNK];
    loop {
        let Ok(mut guard) = master.readable().await else {
            return;
        };
        match guard.try_io(|inner| {
            rustix::io::read(inner.get_ref(), &mut buffer).map_err(std::io::Error::from)
        }) {
            Err(_would_block) => continue,
            // EIO: every holder of the slave has closed it.
            Ok(Ok(0) | Err(_)) => return,
            Ok(Ok(read)) => {
                if output
                    .send(ExecOutput::Stdout(buffer[..read].to_vec()))
                    .await
                    .is_err()
                {
                    return;
                }
            }
        }
    }
}

async fn write_terminal(master: &AsyncFd<OwnedFd>, mut data: &[u8]) -> Result<(), ()> {
    while !data.is_empty() {
        let mut guard = master.writable().await.map_err(|_| ())?;
        match guard
            .try_io(|inner| rustix::io::write(inner.get_ref(), data).map_err(std::io::Error::from))
        {
            Err(_would_block) => {}
            Ok(Ok(written)) => data = &data[written..],
            Ok(Err(_)) => return Err(()),
        }
    }
    Ok(())
}

async fn run_with_terminal(
    shim_binary: &PathBuf,
    spec: &ExecSpec,
    mut input: mpsc::Receiver<ExecInput>,
    output: mpsc::Sender<ExecOutput>,
) -> Result<Option<i32>, String> {
    let (master, slave) = open_terminal()?;
    let (mut height, mut width) = DEFAULT_TTY_SIZE;
    let mut early_input = None;
    match tokio::time::timeout(FIRST_TTY_SIZE_WAIT, input.recv()).await {
        Ok(Some(ExecInput::TtySize {
            height: asked_height,
            width: asked_width,
        })) => (height, width) = (asked_height, asked_width),
        Ok(Some(other)) => early_input = Some(other),
        Ok(None) => return Ok(None),
        Err(_elapsed) => {}
    }
    set_window_size(&master, height, width);
    let mut command = shim_command(shim_binary, spec)?;
    let stdio = |file: &std::fs::File| {
        file.try_clone()
            .map(Stdio::from)
            .map_err(|error| format!("sharing the terminal: {error}"))
    };
    command
        .stdin(stdio(&slave)?)
        .stdout(stdio(&slave)?)
        .stderr(stdio(&slave)?);
    let spawned = command.spawn();
    // Only the command holds the slave now: the master reads EIO once the command's side is
    // closed.
    drop(command);
    drop(slave);
    let mut child =
        spawned.map_err(|error| format!("starting {}: {error}", shim_binary.display()))?;
    // The master fd is owned by the `OwnedFd` moved into the `AsyncFd`, so it stays open for as
    // long as it is registered (what the deprecation of `new` is about).
    #[allow(deprecated)]
    let watched = AsyncFd::new(master);
    let master = Arc::new(watched.map_err(|error| format!("watching the terminal: {error}"))?);
    let pump = tokio::spawn(pump_terminal_output(Arc::clone(&master), output.clone()));
    let (writes, mut write_queue) = mpsc::channel::<Vec<u8>>(STDIN_QUEUE);
    let writer_master = Arc::clone(&master);
    let writer = tokio::spawn(async move {
        while let Some(data) = write_queue.recv().await {
            if write_terminal(&writer_master, &data).await.is_err() {
                return;
            }
        }
    });
    let handle_input = |item: ExecInput| match item {
        ExecInput::Stdin(data) => StdinAction::Write(data),
        // End of input on a terminal is the EOF character at the start of a line.
        ExecInput::StdinClose => StdinAction::Write(vec![0x04]),
        ExecInput::TtySize { height, width } => {
            set_window_size(master.get_ref(), height, width);
            StdinAction::Nothing
        }
    };
    if let Some(item) = early_input
        && let StdinAction::Write(data) = handle_input(item)
    {
        // The queue is empty: the first write always has room.
        let _ = writes.try_send(data);
    }
    let exit =
        follow_until_exit(&mut child, &mut input, &output, Some(writes), handle_input).await?;
    writer.abort();
    if exit.is_some() {
        drain(vec![pump]).await;
    } else {
        pump.abort();
    }
    Ok(exit)
}
