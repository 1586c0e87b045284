//! `/v1/client/allocation/<id>/exec`: a websocket speaking Nomad's exec protocol. Parameters
//! are checked before the upgrade (plain 4xx answers); an allocation nobody knows is reported
//! after it, as Nomad's agent does: the handshake completes and a 1008 close frame says
//! `Unknown allocation "<id>"`, the text Go's client returns as its error. Afterwards the
//! client sends JSON
//! `{"stdin":{"data":<b64>}}`, `{"stdin":{"close":true}}`, `{"tty_size":{"height":h,"width":w}}`
//! or `{}` (heartbeat), and receives `{"stdout":{"data":<b64>}}`, `{"stderr":{"data":<b64>}}`
//! and finally `{"exited":true,"result":{"exit_code":N}}`, followed by a normal close. Errors
//! after the upgrade are close frames: 1011 for internal ones, 1008 otherwise. Input is bounded
//! end to end: messages are at most [`MAX_MESSAGE`] long and the socket is read only while the
//! session has room for more.
//!
//! `/v1/job/<job>/action?action=<name>&allocID=<alloc>&task=<task>` speaks the same protocol
//! for a task's `action` block: the command is the action's `command` and `args` as the
//! allocation's job defines them (Nomad's `jobRunAction`), checked before the upgrade like an
//! exec's parameters.
//!
//! Not here: running the command (the backend's [`AgentOperations::exec`]).
//!
//! [`AgentOperations::exec`]: crate::backend::AgentOperations::exec

use std::collections::VecDeque;
use std::sync::Arc;

use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, State};
use axum::http::{Method, Uri};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde_json::json;

use super::AppState;
use crate::backend::{ApiBackend, ExecInput, ExecOutput, ExecRequest, ExecSession};
use crate::error::ApiError;
use crate::params::QueryParams;

/// Close codes of the exec protocol.
const CLOSE_NORMAL: u16 = 1000;
const CLOSE_POLICY: u16 = 1008;
const CLOSE_INTERNAL: u16 = 1011;

pub(super) async fn exec_endpoint<B: ApiBackend>(
    State(state): State<AppState<B>>,
    method: Method,
    Path(alloc_id): Path<String>,
    uri: Uri,
    token_check: Option<axum::Extension<HandshakeTokenCheck>>,
    upgrade: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Response {
    match prepare(&state, &method, alloc_id, &uri) {
        Err(error) => error.into_response(),
        Ok((request, handshake, known)) => match upgrade {
            Err(_) => ApiError::bad_request("exec needs a websocket connection").into_response(),
            Ok(upgrade) => {
                let backend = Arc::clone(&state.backend);
                let token_check = token_check.map(|axum::Extension(check)| check);
                upgrade
                    .max_message_size(MAX_MESSAGE)
                    .max_frame_size(MAX_MESSAGE)
                    .on_upgrade(move |mut socket| async move {
                        if handshake {
                            // `{"version":1,"auth_token":"…"}`: checked when the ACL layer
                            // left the check to it; otherwise tokens came as headers (or
                            // ACLs are off).
                            let first = socket.recv().await;
                            if let Some(check) = &token_check
                                && let Err(message) = (check.0)(handshake_token(first)).await
                            {
                                close(socket, CLOSE_POLICY, message).await;
                                return;
                            }
                        }
                        if known {
                            run_session(backend, request, socket).await;
                        } else {
                            refuse_unknown_allocation(request, socket).await;
                        }
                    })
            }
        },
    }
}

/// A check of the ACL token a browser sends in the exec websocket's first message
/// (`ws_handshake=true`: a browser cannot put a header on a websocket request). The agent's
/// ACL layer puts it on a request that carried no token; the session starts only if it
/// passes, else the socket closes with its message as a policy close.
#[derive(Clone)]
pub struct HandshakeTokenCheck(pub Arc<TokenCheck>);

/// Answers whether a token may open the session, or the refusal's message. A future: a
/// client-only agent asks its servers to resolve the token.
pub type TokenCheck = dyn Fn(String) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), String>> + Send>>
    + Send
    + Sync;

/// The `auth_token` of the handshake message ("" when it has none).
fn handshake_token(first: Option<Result<Message, axum::Error>>) -> String {
    match first {
        Some(Ok(Message::Text(text))) => serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|value| value.get("auth_token")?.as_str().map(str::to_owned))
            .unwrap_or_default(),
        _ => String::new(),
    }
}

/// The websocket of `/v1/job/<job>/action`: a task action run as an exec session. As in
/// Nomad, the session's own checks (allocation, job, task, action) are answered after the
/// upgrade, as close frames carrying Nomad's error text.
pub(super) async fn action_endpoint<B: ApiBackend>(
    state: AppState<B>,
    method: Method,
    job_id: String,
    uri: Uri,
    upgrade: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Response {
    if method != Method::GET {
        return ApiError::MethodNotAllowed.into_response();
    }
    let params = QueryParams::parse(uri.query());
    let handshake = match params.bool("ws_handshake", false) {
        Ok(handshake) => handshake,
        Err(error) => return error.into_response(),
    };
    let Ok(upgrade) = upgrade else {
        return ApiError::bad_request("exec needs a websocket connection").into_response();
    };
    let prepared = prepare_action(&state, &job_id, &params);
    let backend = Arc::clone(&state.backend);
    upgrade
        .max_message_size(MAX_MESSAGE)
        .max_frame_size(MAX_MESSAGE)
        .on_upgrade(move |mut socket| async move {
            if handshake {
                // `{"version":1,"auth_token":"…"}`: the token came as a header (or ACLs are off).
                let _ = socket.recv().await;
            }
            match prepared {
                Ok(request) => run_session(backend, request, socket).await,
                Err(error) => close(socket, close_code(&error), error.to_string()).await,
            }
        })
}

/// An action's exec request: the allocation must belong to the job, and the task must define
/// the action; the command is the action's. Nomad's texts and statuses.
fn prepare_action<B: ApiBackend>(
    state: &AppState<B>,
    job_id: &str,
    params: &QueryParams,
) -> Result<ExecRequest, ApiError> {
    let alloc_id = params
        .non_empty("allocID")
        .ok_or_else(|| ApiError::bad_request("must provide a valid alloc id"))?
        .to_string();
    let task = params
        .non_empty("task")
        .ok_or_else(|| ApiError::bad_request("must provide task name"))?
        .to_string();
    let action = params.get("action").unwrap_or("").to_string();
    if action.is_empty() {
        return Err(ApiError::bad_request("command is not present"));
    }
    let tty = params.bool("tty", false)?;
    let allocation = super::client_view(&*state.backend, &alloc_id)?
        .ok_or_else(|| ApiError::not_found(format!("Unknown allocation {alloc_id:?}")))?;
    if allocation.job_id != job_id {
        return Err(ApiError::bad_request(format!(
            "job {job_id} does not have allocation {alloc_id}"
        )));
    }
    let defined = allocation
        .job
        .as_deref()
        .and_then(|job| job.lookup_task_group(&allocation.task_group))
        .and_then(|group| group.tasks.iter().find(|candidate| candidate.name == task))
        .ok_or_else(|| {
            ApiError::bad_request(format!("task {task} not found in allocation {alloc_id}"))
        })?
        .actions
        .iter()
        .find(|candidate| candidate.name == action)
        .ok_or_else(|| {
            ApiError::bad_request(format!("action {action} not found in task {task}"))
        })?;
    let mut command = vec![defined.command.clone()];
    command.extend(defined.args.iter().cloned());
    Ok(ExecRequest {
        alloc_id,
        task,
        command,
        tty,
    })
}

/// Checks the method and parameters, and whether the allocation exists (the third value).
fn prepare<B: ApiBackend>(
    state: &AppState<B>,
    method: &Method,
    alloc_id: String,
    uri: &Uri,
) -> Result<(ExecRequest, bool, bool), ApiError> {
    if method != Method::GET {
        return Err(ApiError::MethodNotAllowed);
    }
    let params = QueryParams::parse(uri.query());
    let task = params
        .non_empty("task")
        .ok_or_else(|| ApiError::bad_request("must provide task name"))?
        .to_string();
    let command: Vec<String> = serde_json::from_str(params.get("command").unwrap_or(""))
        .map_err(|_| ApiError::bad_request("failed to marshal command into json"))?;
    if command.is_empty() {
        return Err(ApiError::bad_request("command is not present"));
    }
    let tty = params.bool("tty", false)?;
    let handshake = params.bool("ws_handshake", false)?;
    let known = super::client_view(&*state.backend, &alloc_id)?.is_some();
    Ok((
        ExecRequest {
            alloc_id,
            task,
            command,
            tty,
        },
        handshake,
        known,
    ))
}

/// The session of an allocation nobody knows (its handshake message already read): the
/// stream closes with Nomad's 404 as a policy close.
async fn refuse_unknown_allocation(request: ExecRequest, socket: WebSocket) {
    let error = ApiError::not_found(format!("Unknown allocation {:?}", request.alloc_id));
    close(socket, close_code(&error), error.to_string()).await;
}

/// The largest websocket message a caller may send (a stdin frame carries its data base64
/// encoded; Nomad's CLI sends small ones). Together with the session's bounded input queue this
/// caps what one session can make the agent hold.
const MAX_MESSAGE: usize = 256 * 1024;

/// How long a closing session waits for the client to answer its close frame.
const CLOSE_HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// Sends a close frame and waits (briefly) for the client's answer, so the connection is not
/// torn down under frames the client has yet to read: a reset would discard them.
async fn close(mut socket: WebSocket, code: u16, reason: String) {
    let frame = CloseFrame {
        code,
        reason: reason.into(),
    };
    if socket.send(Message::Close(Some(frame))).await.is_err() {
        return;
    }
    let _ = tokio::time::timeout(CLOSE_HANDSHAKE_TIMEOUT, async {
        while let Some(Ok(message)) = socket.recv().await {
            if matches!(message, Message::Close(_)) {
                return;
            }
        }
    })
    .await;
}

fn close_code(error: &ApiError) -> u16 {
    match error {
        ApiError::Internal(_) | ApiError::Unavailable(_) => CLOSE_INTERNAL,
        _ => CLOSE_POLICY,
    }
}

/// The inputs one client message carries (none for a heartbeat).
fn parse_input(text: &str) -> Result<Vec<ExecInput>, String> {
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|error| format!("invalid exec input: {error}"))?;
    let mut inputs = Vec::new();
    if let Some(stdin) = value.get("stdin").filter(|stdin| !stdin.is_null()) {
        if let Some(data) = stdin.get("data").and_then(serde_json::Value::as_str) {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(data)
                .map_err(|error| format!("invalid stdin data: {error}"))?;
            inputs.push(ExecInput::Stdin(bytes));
        }
        if stdin.get("close").and_then(serde_json::Value::as_bool) == Some(true) {
            inputs.push(ExecInput::StdinClose);
        }
    }
    if let Some(size) = value.get("tty_size").filter(|size| !size.is_null()) {
        let dimension = |name: &str| {
            size.get(name)
                .and_then(serde_json::Value::as_u64)
                .and_then(|number| u16::try_from(number).ok())
                .unwrap_or(0)
        };
        inputs.push(ExecInput::TtySize {
            height: dimension("height"),
            width: dimension("width"),
        });
    }
    Ok(inputs)
}

fn output_message(output: &ExecOutput) -> Message {
    let encode = |data: &[u8]| base64::engine::general_purpose::STANDARD.encode(data);
    let value = match output {
        ExecOutput::Stdout(data) => json!({"stdout": {"data": encode(data)}}),
        ExecOutput::Stderr(data) => json!({"stderr": {"data": encode(data)}}),
        ExecOutput::Exited { exit_code } => {
            json!({"exited": true, "result": {"exit_code": exit_code}})
        }
    };
    Message::Text(value.to_string().into())
}

async fn run_session<B: ApiBackend>(backend: Arc<B>, request: ExecRequest, mut socket: WebSocket) {
    let ExecSession { input, mut output } = match backend.exec(request).await {
        Ok(session) => session,
        Err(error) => {
            close(socket, close_code(&error), error.to_string()).await;
            return;
        }
    };
    // Inputs of the last message not yet taken by the session. While any wait, the socket is
    // not read: a command that does not read its input pushes back on the caller over TCP.
    let mut waiting: VecDeque<ExecInput> = VecDeque::new();
    loop {
        let room = input.clone();
        tokio::select! {
            permit = room.reserve_owned(), if !waiting.is_empty() => match (permit, waiting.pop_front()) {
                (Ok(permit), Some(item)) => {
                    permit.send(item);
                }
                // A session that stopped taking input is ending anyway.
                _ => waiting.clear(),
            },
            message = socket.recv(), if waiting.is_empty() => match message {
                Some(Ok(Message::Text(text))) => match parse_input(text.as_str()) {
                    Ok(inputs) => waiting.extend(inputs),
                    Err(reason) => {
                        close(socket, CLOSE_POLICY, reason).await;
                        return;
                    }
                },
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return,
                Some(Ok(_)) => {}
            },
            produced = output.recv() => match produced {
                Some(produced) => {
                    let exited = matches!(produced, ExecOutput::Exited { .. });
                    if socket.send(output_message(&produced)).await.is_err() {
                        return;
                    }
                    if exited {
                        close(socket, CLOSE_NORMAL, String::new()).await;
                        return;
                    }
                }
                None => {
                    close(socket, CLOSE_INTERNAL, "exec session ended without an exit code".into()).await;
                    return;
                }
            },
        }
    }
}

#[cfg(test)]
#[allow(clippy::expect_used, clippy::unwrap_used)] // a failed expectation is a failed test
mod tests {
    use super::*;

    #[test]
    fn inputs_decode_from_nomads_frames() {
        assert_eq!(parse_input("{}"), Ok(vec![]));
        assert_eq!(
            parse_input(r#"{"stdin":{"data":"aGk="}}"#),
            Ok(vec![ExecInput::Stdin(b"hi".to_vec())])
        );
        assert_eq!(
            parse_input(r#"{"stdin":{"close":true}}"#),
            Ok(vec![ExecInput::StdinClose])
        );
        assert_eq!(
            parse_input(r#"{"tty_size":{"height":40,"width":120}}"#),
            Ok(vec![ExecInput::TtySize {
                height: 40,
                width: 120
            }])
        );
        assert!(parse_input("not json").is_err());
    }
}
