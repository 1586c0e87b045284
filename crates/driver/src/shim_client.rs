//! The agent's side of the shim protocol ([`drover_shim::proto`]): spawning a shim and exchanging
//! JSON lines with it over a tokio `UnixStream`, one connection per request.
//!
//! Not for: policy. Identity checks, retries and timeouts are the driver's.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use drover_shim::atomic_file::{Durability, write_atomically};
use drover_shim::proto::{
    ExitStatus, LaunchSpec, Request, Response, ShimIdentity, StartReport, TaskStats, TaskStatus,
};
use drover_shim::socket_path::SocketPath;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

use crate::DriverError;

/// How long a shim may take to start its task and report.
pub const SHIM_START_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// Spawns `shim_binary` on the spec at `spec_path` and returns the shim's start report.
///
/// The process spawned is only the shim's launcher: it forks the daemonized shim, prints one
/// report line and exits, and is reaped here at once. The shim is then re-parented to init, so
/// it is neither a child of the agent nor tied to its life. The spawn is a plain fork+exec with
/// no work between the two, as a multi-threaded process requires.
pub async fn spawn_shim(
    shim_binary: &Path,
    spec_path: &Path,
    task_id: &str,
) -> Result<ShimIdentity, DriverError> {
    let mut launcher = tokio::process::Command::new(shim_binary)
        .arg(spec_path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(false)
        .spawn()
        .map_err(|source| DriverError::SpawnShim {
            path: shim_binary.to_path_buf(),
            source,
        })?;
    let mut output = String::new();
    if let Some(mut stdout) = launcher.stdout.take() {
        let read = tokio::time::timeout(SHIM_START_TIMEOUT, stdout.read_to_string(&mut output));
        match read.await {
            Ok(Ok(_)) => {}
            Ok(Err(source)) => {
                return Err(DriverError::SpawnShim {
                    path: shim_binary.to_path_buf(),
                    source,
                });
            }
            Err(_elapsed) => {
                let _ = launcher.kill().await;
                return Err(DriverError::Start {
                    task_id: task_id.to_string(),
                    message: format!("the shim did not report within {SHIM_START_TIMEOUT:?}"),
                    recoverable: true,
                });
            }
        }
    }
    // The launcher exits right after its report; reap it.
    let _ = launcher.wait().await;
    let report: StartReport =
        serde_json::from_str(output.trim()).map_err(|error| DriverError::Start {
            task_id: task_id.to_string(),
            message: format!(
                "the shim gave no start report ({error}): {:?}",
                output.trim()
            ),
            recoverable: true,
        })?;
    match report {
        StartReport::Ready { identity } => Ok(identity),
        StartReport::Failed { message } => Err(DriverError::Start {
            task_id: task_id.to_string(),
            message,
            recoverable: true,
        }),
    }
}

/// Writes the launch spec the shim will read (atomically: a reader sees the whole spec or
/// none). Not flushed to disk: the shim reads it at once, and the agent reads it again only
/// to reclaim a run after an agent crash, when the page cache still holds it. After a machine
/// crash there is nothing left to reclaim (the shim, its task and their cgroups died with the
/// kernel), so a flush per task start would buy nothing.
pub async fn write_launch_spec(path: &Path, spec: &LaunchSpec) -> Result<(), DriverError> {
    let state_error = |source| DriverError::StateDir {
        path: path.to_path_buf(),
        source,
    };
    let bytes = serde_json::to_vec_pretty(spec).map_err(|error| state_error(error.into()))?;
    let final_path = path.to_path_buf();
    // One trip to the blocking pool for the create, write and rename.
    let written = tokio::task::spawn_blocking(move || {
        write_atomically(&final_path, &bytes, Durability::Unflushed)
    })
    .await
    .map_err(|join_error| state_error(std::io::Error::other(join_error.to_string())))?;
    written.map_err(state_error)
}

/// A client of one shim's socket.
#[derive(Debug, Clone)]
pub struct ShimClient {
    socket_path: PathBuf,
    task_id: String,
}

impl ShimClient {
    pub fn new(socket_path: impl Into<PathBuf>, task_id: impl Into<String>) -> Self {
        Self {
            socket_path: socket_path.into(),
            task_id: task_id.into(),
        }
    }

    /// Sends one request on a fresh connection and reads its response.
    pub async fn request(&self, request: &Request) -> Result<Response, DriverError> {
        let connection_error = |source| DriverError::Connection {
            socket: self.socket_path.clone(),
            source,
        };
        let not_reachable = |error: std::io::Error| match error.kind() {
            std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => {
                DriverError::ShimGone {
                    task_id: self.task_id.clone(),
                }
            }
            _ => connection_error(error),
        };
        // Held until connected: a long socket path is reached through its directory's fd.
        let address = SocketPath::new(&self.socket_path).map_err(not_reachable)?;
        let stream = UnixStream::connect(address.path())
            .await
            .map_err(not_reachable)?;
        drop(address);
        let (reader, mut writer) = stream.into_split();
        let mut line = serde_json::to_string(request).map_err(|error| DriverError::Protocol {
            socket: self.socket_path.clone(),
            detail: error.to_string(),
        })?;
        line.push('\n');
        writer
            .write_all(line.as_bytes())
            .await
            .map_err(connection_error)?;
        let mut reply = String::new();
        let read = BufReader::new(reader)
            .read_line(&mut reply)
            .await
            .map_err(connection_error)?;
        if read == 0 {
            return Err(DriverError::ShimGone {
                task_id: self.task_id.clone(),
            });
        }
        serde_json::from_str(reply.trim()).map_err(|error| DriverError::Protocol {
            socket: self.socket_path.clone(),
            detail: format!("{error}: {:?}", reply.trim()),
        })
    }

    fn unexpected(&self, request: &'static str, response: Response) -> DriverError {
        match response {
            Response::Error { message } => DriverError::Refused {
                task_id: self.task_id.clone(),
                request,
                message,
            },
            other => DriverError::Protocol {
                socket: self.socket_path.clone(),
                detail: format!("{request} answered with {other:?}"),
            },
        }
    }

    pub async fn hello(&self) -> Result<ShimIdentity, DriverError> {
        match self.request(&Request::Hello).await? {
            Response::Hello { identity } => Ok(identity),
            other => Err(self.unexpected("hello", other)),
        }
    }

    pub async fn status(&self) -> Result<TaskStatus, DriverError> {
        match self.request(&Request::Status).await? {
            Response::Status { status } => Ok(status),
            other => Err(self.unexpected("status", other)),
        }
    }

    pub async fn wait(&self) -> Result<ExitStatus, DriverError> {
        match self.request(&Request::Wait).await? {
            Response::Exited { exit } => Ok(exit),
            other => Err(self.unexpected("wait", other)),
        }
    }

    pub async fn signal(&self, signal: i32) -> Result<(), DriverError> {
        match self.request(&Request::Signal { signal }).await? {
            Response::Signalled => Ok(()),
            other => Err(self.unexpected("signal", other)),
        }
    }

    pub async fn kill(&self, signal: i32, grace_ns: u64) -> Result<ExitStatus, DriverError> {
        match self.request(&Request::Kill { signal, grace_ns }).await? {
            Response::Exited { exit } => Ok(exit),
            other => Err(self.unexpected("kill", other)),
        }
    }

    pub async fn stats(&self) -> Result<TaskStats, DriverError> {
        match self.request(&Request::Stats).await? {
            Response::Stats { stats } => Ok(stats),
            other => Err(self.unexpected("stats", other)),
        }
    }

    pub async fn cleanup(&self) -> Result<(), DriverError> {
        match self.request(&Request::Cleanup).await? {
            Response::CleanedUp => Ok(()),
            other => Err(self.unexpected("cleanup", other)),
        }
    }
}
