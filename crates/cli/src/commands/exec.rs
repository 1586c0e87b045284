//! `drover alloc exec [-i] [-t] [-task T] [-job [-group G]] ID CMD…`: runs a command inside a task over the exec
//! websocket, with the local terminal in raw mode for `-t`, window-size changes forwarded, and
//! the remote exit code as this command's exit code.
//!
//! Not here: how the command is started inside the task (the agent's business).

use std::io::IsTerminal;

use base64::Engine;
use clap::Args;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::commands::lookup::{resolve_allocation, resolve_allocation_or_job, task_names};
use crate::format::short_id;
use crate::{ApiFlags, Io};

/// `-i` and `-t`, as `alloc exec` and `job action` take them.
#[derive(Debug, Args)]
pub struct TerminalFlags {
    /// Pass standard input to the command (-i=false to not).
    #[arg(
        short = 'i',
        num_args = 0..=1,
        require_equals = true,
        default_value = "true",
        default_missing_value = "true",
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    pub interactive: bool,
    /// Give the command a terminal (default: when standard input is one).
    #[arg(
        short = 't',
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    pub tty: Option<bool>,
}

impl TerminalFlags {
    /// Whether the session gets a terminal: `-t` as given, else whether standard input is one.
    fn tty(&self) -> bool {
        self.tty.unwrap_or_else(|| std::io::stdin().is_terminal())
    }
}

#[derive(Debug, Args)]
pub struct ExecArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    #[command(flatten)]
    pub terminal: TerminalFlags,
    /// The task to run the command in; optional when the allocation runs one task.
    #[arg(long = "task", value_name = "TASK")]
    pub task: Option<String>,
    /// The argument is a job ID or prefix: run in one of its allocations (a running one when
    /// any runs).
    #[arg(long = "job")]
    pub job: bool,
    /// With -job: pick the allocation among those of this task group.
    #[arg(long = "group", value_name = "GROUP")]
    pub group: Option<String>,
    /// The allocation ID or ID prefix (with -job, the job's).
    pub alloc: String,
    /// The command and its arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    pub command: Vec<String>,
}

/// The local terminal in raw mode until dropped.
struct RawTerminal {
    original: nix::sys::termios::Termios,
}

impl RawTerminal {
    fn enter() -> Option<RawTerminal> {
        use nix::sys::termios::{SetArg, cfmakeraw, tcgetattr, tcsetattr};
        let stdin = std::io::stdin();
        let original = tcgetattr(&stdin).ok()?;
        let mut raw = original.clone();
        cfmakeraw(&mut raw);
        tcsetattr(&stdin, SetArg::TCSANOW, &raw).ok()?;
        Some(RawTerminal { original })
    }
}

impl Drop for RawTerminal {
    fn drop(&mut self) {
        use nix::sys::termios::{SetArg, tcsetattr};
        let _ = tcsetattr(std::io::stdin(), SetArg::TCSANOW, &self.original);
    }
}

/// The terminal's size as `stty size` reports it (rows, columns).
fn terminal_size() -> Option<(u16, u16)> {
    let tty = std::fs::File::open("/dev/tty").ok()?;
    let output = std::process::Command::new("stty")
        .arg("size")
        .stdin(tty)
        .output()
        .ok()?;
    let text = String::from_utf8(output.stdout).ok()?;
    let mut numbers = text.split_whitespace().map(str::parse::<u16>);
    match (numbers.next(), numbers.next()) {
        (Some(Ok(rows)), Some(Ok(columns))) => Some((rows, columns)),
        _ => None,
    }
}

fn size_message((height, width): (u16, u16)) -> Message {
    Message::Text(
        json!({"tty_size": {"height": height, "width": width}})
            .to_string()
            .into(),
    )
}

pub async fn alloc_exec(arguments: ExecArgs, io: &mut Io<'_>) -> i32 {
    let client = match arguments.api.client() {
        Ok(client) => client,
        Err(error) => {
            io.error(format!("Error initializing client: {error}"));
            return 1;
        }
    };
    let Some(allocation) = resolve_allocation_or_job(
        &client,
        io,
        &arguments.alloc,
        arguments.job,
        arguments.group.as_deref(),
    )
    .await
    else {
        return 1;
    };
    let task = match arguments.task {
        Some(task) => task,
        None => match task_names(&allocation).as_slice() {
            [only] => only.clone(),
            names => {
                let list: Vec<String> = names.iter().map(|name| format!("  * {name}")).collect();
                io.error(format!(
                    "Allocation \"{}\" is running the following tasks:\n{}\n\nPlease specify the task.",
                    short_id(&allocation.id, false),
                    list.join("\n")
                ));
                return 1;
            }
        },
    };
    let tty = arguments.terminal.tty();
    let command = serde_json::to_string(&arguments.command).unwrap_or_default();
    let encode = percent_encoding_component;
    let path = format!(
        "/v1/client/allocation/{}/exec?task={}&tty={tty}&command={}",
        encode(&allocation.id),
        encode(&task),
        encode(&command)
    );
    run_session(
        &arguments.api,
        &client,
        &path,
        tty,
        arguments.terminal.interactive,
        io,
    )
    .await
}

/// Runs one exec-protocol session on the websocket at `path` (with its query): standard input
/// in (when `interactive`), output out, the remote exit code as the result.
async fn run_session(
    api: &ApiFlags,
    client: &drover_api::client::ApiClient,
    path: &str,
    tty: bool,
    interactive: bool,
    io: &mut Io<'_>,
) -> i32 {
    let address = client.address().to_string();
    let host = address.trim_start_matches("http://").to_string();
    let url = format!("ws://{host}{path}");
    let mut request = match url.as_str().into_client_request() {
        Ok(request) => request,
        Err(error) => {
            io.error(format!("Error preparing exec: {error}"));
            return 1;
        }
    };
    if let Some(token) = api
        .token
        .clone()
        .or_else(|| std::env::var("NOMAD_TOKEN").ok())
        && let Ok(value) = token.parse()
    {
        request.headers_mut().insert("X-Nomad-Token", value);
    }
    let stream = match tokio::net::TcpStream::connect(&host).await {
        Ok(stream) => stream,
        Err(error) => {
            io.error(format!(
                "Error connecting to {address}: {error}: is the agent running at {address}?"
            ));
            return 1;
        }
    };
    let mut socket = match tokio_tungstenite::client_async(request, stream).await {
        Ok((socket, _)) => socket,
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            let body = response
                .body()
                .as_ref()
                .map(|body| String::from_utf8_lossy(body).into_owned())
                .unwrap_or_default();
            io.error(format!(
                "Failed to exec into task: Unexpected response code: {} ({body})",
                response.status().as_u16()
            ));
            return 1;
        }
        Err(error) => {
            io.error(format!("Failed to exec into task: {error}"));
            return 1;
        }
    };

    let (outgoing, mut outgoing_receiver) = tokio::sync::mpsc::channel::<Message>(16);
    let raw_terminal = if tty { RawTerminal::enter() } else { None };
    if tty && let Some(size) = terminal_size() {
        let _ = outgoing.send(size_message(size)).await;
    }
    let stdin_task = if interactive {
        let sender = outgoing.clone();
        // Standard input is read on a blocking thread; it ends with the process or at EOF.
        Some(tokio::task::spawn_blocking(move || {
            let mut stdin = std::io::stdin();
            let mut buffer = vec![0u8; 8192];
            loop {
                match std::io::Read::read(&mut stdin, &mut buffer) {
                    Ok(0) | Err(_) => {
                        let close = json!({"stdin": {"close": true}}).to_string();
                        let _ = sender.blocking_send(Message::Text(close.into()));
                        return;
                    }
                    Ok(read) => {
                        let data =
                            base64::engine::general_purpose::STANDARD.encode(&buffer[..read]);
                        let frame = json!({"stdin": {"data": data}}).to_string();
                        if sender.blocking_send(Message::Text(frame.into())).is_err() {
                            return;
                        }
                    }
                }
            }
        }))
    } else {
        let close = json!({"stdin": {"close": true}}).to_string();
        let _ = outgoing.send(Message::Text(close.into())).await;
        None
    };
    let resize_task = if tty {
        let sender = outgoing.clone();
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::window_change())
            .ok()
            .map(|mut changes| {
                tokio::spawn(async move {
                    while changes.recv().await.is_some() {
                        if let Some(size) = terminal_size()
                            && sender.send(size_message(size)).await.is_err()
                        {
                            return;
                        }
                    }
                })
            })
    } else {
        None
    };
    drop(outgoing);

    let mut exit_code: Option<i32> = None;
    let mut sending = true;
    let outcome = loop {
        tokio::select! {
            Some(message) = outgoing_receiver.recv(), if sending => {
                // Input may race the end of the session: the frames already received (the
                // exit code among them) are still read below.
                if socket.send(message).await.is_err() {
                    sending = false;
                }
            }
            incoming = socket.next() => match incoming {
                Some(Ok(Message::Text(text))) => {
                    let Ok(frame) = serde_json::from_str::<Value>(text.as_str()) else { continue };
                    let decode = |value: &Value| {
                        value.as_str().and_then(|data| base64::engine::general_purpose::STANDARD.decode(data).ok())
                    };
                    if let Some(data) = frame.pointer("/stdout/data").and_then(decode) {
                        let _ = io.out.write_all(&data);
                        let _ = io.out.flush();
                    } else if let Some(data) = frame.pointer("/stderr/data").and_then(decode) {
                        let _ = io.err.write_all(&data);
                        let _ = io.err.flush();
                    } else if frame["exited"] == true {
                        let code = frame.pointer("/result/exit_code").and_then(Value::as_i64).unwrap_or(0);
                        exit_code = Some(i32::try_from(code).unwrap_or(1));
                    }
                }
                Some(Ok(Message::Close(frame))) => {
                    break match (exit_code, frame) {
                        (Some(code), _) => Ok(code),
                        (None, Some(frame)) if !frame.reason.is_empty() => Err(frame.reason.to_string()),
                        (None, _) => Err("websocket closed before receiving exit code".to_string()),
                    };
                }
                Some(Ok(_)) => {}
                Some(Err(_)) | None => {
                    break exit_code.ok_or_else(|| "websocket closed before receiving exit code".to_string());
                }
            },
        }
    };
    for task in [stdin_task, resize_task].into_iter().flatten() {
        task.abort();
    }
    // The terminal is restored before any error is printed.
    drop(raw_terminal);
    match outcome {
        Ok(code) => code,
        Err(message) => {
            io.error(format!("Failed to exec into task: {message}"));
            1
        }
    }
}

/// Percent-encodes a query component.
fn percent_encoding_component(text: &str) -> String {
    let mut encoded = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    encoded
}

/// `drover job action -job J [-alloc A | -group G -task T] NAME`: runs a task's `action`
/// block over the `/v1/job/<job>/action` websocket, as `nomad job action` does.
#[derive(Debug, Args)]
pub struct JobActionArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// The job that defines the action.
    #[arg(long = "job", value_name = "JOB")]
    pub job: Option<String>,
    /// The allocation to run the action in; without it, one of the group's allocations
    /// (a running one when there is one) is picked at random.
    #[arg(long = "alloc", value_name = "ALLOC")]
    pub alloc: Option<String>,
    /// The task that defines the action (required without -alloc).
    #[arg(long = "task", value_name = "TASK")]
    pub task: Option<String>,
    /// The group of the task (required without -alloc).
    #[arg(long = "group", value_name = "GROUP")]
    pub group: Option<String>,
    #[command(flatten)]
    pub terminal: TerminalFlags,
    /// The action's name.
    pub action: Option<String>,
}

const JOB_ACTION_HELP: &str = "For additional help try 'drover job action -help'";

pub async fn job_action(arguments: JobActionArgs, io: &mut Io<'_>) -> i32 {
    let Some(action) = arguments.action.clone() else {
        io.error("An action name is required");
        io.error(JOB_ACTION_HELP);
        return 1;
    };
    let Some(job) = arguments.job.clone().filter(|job| !job.is_empty()) else {
        io.error("A job ID is required");
        io.error(JOB_ACTION_HELP);
        return 1;
    };
    let tty = arguments.terminal.tty();
    if tty && !arguments.terminal.interactive {
        io.error("-i must be enabled if running with tty");
        io.error(JOB_ACTION_HELP);
        return 1;
    }
    let client = match arguments.api.client() {
        Ok(client) => client,
        Err(error) => {
            io.error(format!("Error initializing client: {error}"));
            return 1;
        }
    };
    let alloc_id = match arguments.alloc.as_deref().filter(|alloc| !alloc.is_empty()) {
        Some(prefix) => prefix.to_string(),
        None => {
            let Some(group) = arguments.group.as_deref().filter(|group| !group.is_empty()) else {
                io.error("A group name is required if no allocation is provided");
                io.error(JOB_ACTION_HELP);
                return 1;
            };
            if arguments.task.as_deref().is_none_or(str::is_empty) {
                io.error("A task name is required if no allocation is provided");
                io.error(JOB_ACTION_HELP);
                return 1;
            }
            let Some(job_id) = crate::commands::lookup::resolve_job(&client, io, &job).await else {
                return 1;
            };
            match crate::commands::lookup::random_job_allocation(&client, &job_id, Some(group))
                .await
            {
                Ok(alloc_id) => alloc_id,
                Err(message) => {
                    io.error(format!("Error fetching allocations: {message}"));
                    return 1;
                }
            }
        }
    };
    let Some(allocation) = resolve_allocation(&client, io, &alloc_id).await else {
        return 1;
    };
    let names = task_names(&allocation);
    let task = match arguments.task.clone().filter(|task| !task.is_empty()) {
        Some(task) if names.contains(&task) => task,
        Some(task) => {
            io.error(format!(
                "Could not find task named: {task}, found:\n{}",
                names
                    .iter()
                    .map(|name| format!("  * {name}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            ));
            return 1;
        }
        None => match names.as_slice() {
            [only] => only.clone(),
            _ => {
                io.error(format!(
                    "Allocation \"{}\" is running the following tasks:\n{}\n\nPlease specify the task.",
                    short_id(&allocation.id, false),
                    names
                        .iter()
                        .map(|name| format!("  * {name}"))
                        .collect::<Vec<_>>()
                        .join("\n")
                ));
                return 1;
            }
        },
    };
    let encode = percent_encoding_component;
    let path = format!(
        "/v1/job/{}/action?action={}&allocID={}&group={}&task={}&tty={tty}&command=%5B%5D",
        encode(&job),
        encode(&action),
        encode(&allocation.id),
        encode(&allocation.task_group),
        encode(&task),
    );
    run_session(
        &arguments.api,
        &client,
        &path,
        tty,
        arguments.terminal.interactive,
        io,
    )
    .await
}
