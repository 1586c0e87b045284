//! Relaying the websocket `exec` endpoint to the node that holds the allocation.
//!
//! The node is asked first: its refusal (an unknown allocation, a bad command, a missing task)
//! is the caller's answer, status and body unchanged, and the caller's connection is upgraded
//! only once the node has accepted. From then on every message is passed through as it is —
//! text, binary, ping, pong and close with its code and reason — until either side closes. A
//! caller that goes away takes the node connection with it, and the node ends the command it
//! ran for the session. Frames are not looked into.

use std::time::Duration;

use axum::extract::ws::{self, WebSocket, WebSocketUpgrade};
use axum::extract::{FromRequestParts, Request};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use drover_client::http_conn::base_url;
use futures_util::{SinkExt as _, StreamExt as _};
use tokio::net::TcpStream;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::{self, client::IntoClientRequest as _, protocol::CloseFrame};

use super::http::{CONNECT_TIMEOUT, FORWARDED_HEADER, ProxyClient, forward};

/// How long the node may take to answer the websocket handshake (it checks the request and
/// looks the allocation up before it answers).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a closing side is given to answer a close frame before its connection is dropped.
const CLOSE_ANSWER_TIMEOUT: Duration = Duration::from_secs(2);

/// Close code sent to the caller when the node's connection ends without a close frame.
const CLOSE_INTERNAL: u16 = 1011;

/// Request headers passed on to the node: the caller's credentials.
const PASSED_ON_HEADERS: [&str; 2] = ["x-nomad-token", "authorization"];

/// The websocket to the node.
type NodeSocket = WebSocketStream<TcpStream>;

/// Why the node's websocket could not be opened (answered to the caller as 502).
#[derive(Debug, thiserror::Error)]
pub enum ExecForwardError {
    #[error("the node's address {address:?} is not usable: {message}")]
    BadAddress { address: String, message: String },
    #[error("the node holding this allocation ({address}) cannot be reached: {source}")]
    Connect {
        address: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the node holding this allocation ({address}) did not answer within {timeout:?}")]
    Timeout { address: String, timeout: Duration },
    #[error("the exec websocket to the node holding this allocation ({address}) failed: {source}")]
    Handshake {
        address: String,
        #[source]
        source: Box<tungstenite::Error>,
    },
}

/// What the node said to the websocket handshake.
enum NodeAnswer {
    /// It accepted: the session runs on this socket.
    Accepted(Box<NodeSocket>),
    /// It refused with an HTTP answer, to be given to the caller as it is.
    Refused(Response),
}

/// Passes an exec request on to the node at `address` (its HTTP address). A request that is
/// not a websocket upgrade goes as a plain request, so the node gives its own answer to it.
pub async fn forward_exec(http: &ProxyClient, address: &str, request: Request) -> Response {
    let (mut parts, body) = request.into_parts();
    let upgrade = match WebSocketUpgrade::from_request_parts(&mut parts, &()).await {
        Ok(upgrade) => upgrade,
        Err(_) => return forward(http, address, Request::from_parts(parts, body)).await,
    };
    let path_and_query = parts
        .uri
        .path_and_query()
        .map_or("/", |path_and_query| path_and_query.as_str());
    match open_node_socket(address, path_and_query, &parts.headers).await {
        Ok(NodeAnswer::Accepted(node)) => upgrade
            .on_failed_upgrade(|error| {
                tracing::debug!(%error, "upgrading a forwarded exec request failed");
            })
            .on_upgrade(move |caller| pipe(caller, *node)),
        Ok(NodeAnswer::Refused(answer)) => answer,
        Err(error) => {
            tracing::warn!(address, %error, "forwarding an exec session to its node failed");
            (StatusCode::BAD_GATEWAY, error.to_string()).into_response()
        }
    }
}

/// The `ws://host:port<path?query>` URL of the same request on the node at `address`.
fn node_url(address: &str, path_and_query: &str) -> Result<(String, String), ExecForwardError> {
    let base = base_url(address).map_err(|error| ExecForwardError::BadAddress {
        address: address.to_owned(),
        message: error.to_string(),
    })?;
    let host_port = base.trim_start_matches("http://").to_owned();
    Ok((format!("ws://{host_port}{path_and_query}"), host_port))
}

/// Opens the websocket to the node, marked as forwarded and carrying the caller's
/// credentials.
async fn open_node_socket(
    address: &str,
    path_and_query: &str,
    caller_headers: &axum::http::HeaderMap,
) -> Result<NodeAnswer, ExecForwardError> {
    let (url, host_port) = node_url(address, path_and_query)?;
    let handshake_failed = |source: tungstenite::Error| ExecForwardError::Handshake {
        address: address.to_owned(),
        source: Box::new(source),
    };
    let mut request = url.into_client_request().map_err(handshake_failed)?;
    for name in PASSED_ON_HEADERS {
        if let Some(value) = caller_headers.get(name) {
            request.headers_mut().insert(name, value.clone());
        }
    }
    request
        .headers_mut()
        .insert(FORWARDED_HEADER, HeaderValue::from_static("1"));
    let stream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(&host_port))
        .await
        .map_err(|_| ExecForwardError::Timeout {
            address: address.to_owned(),
            timeout: CONNECT_TIMEOUT,
        })?
        .map_err(|source| ExecForwardError::Connect {
            address: address.to_owned(),
            source,
        })?;
    if let Err(error) = stream.set_nodelay(true) {
        tracing::debug!(%error, "cannot set TCP_NODELAY on the exec connection to a node");
    }
    let handshake = tokio::time::timeout(
        HANDSHAKE_TIMEOUT,
        tokio_tungstenite::client_async(request, stream),
    )
    .await
    .map_err(|_| ExecForwardError::Timeout {
        address: address.to_owned(),
        timeout: HANDSHAKE_TIMEOUT,
    })?;
    match handshake {
        Ok((socket, _)) => Ok(NodeAnswer::Accepted(Box::new(socket))),
        Err(tungstenite::Error::Http(refusal)) => Ok(NodeAnswer::Refused(refused(*refusal))),
        Err(error) => Err(handshake_failed(error)),
    }
}

/// The node's refusal of the handshake as the caller's answer: its status, content type and
/// body.
fn refused(refusal: tungstenite::http::Response<Option<Vec<u8>>>) -> Response {
    let (parts, body) = refusal.into_parts();
    let status = StatusCode::from_u16(parts.status.as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    let mut answer = (status, body.unwrap_or_default()).into_response();
    if let Some(content_type) = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| HeaderValue::from_bytes(value.as_bytes()).ok())
    {
        answer
            .headers_mut()
            .insert(header::CONTENT_TYPE, content_type);
    }
    answer
}

/// A caller's message as it goes to the node.
fn to_node(message: ws::Message) -> tungstenite::Message {
    match message {
        ws::Message::Text(text) => tungstenite::Message::Text(text.as_str().into()),
        ws::Message::Binary(data) => tungstenite::Message::Binary(data),
        ws::Message::Ping(data) => tungstenite::Message::Ping(data),
        ws::Message::Pong(data) => tungstenite::Message::Pong(data),
        ws::Message::Close(frame) => tungstenite::Message::Close(frame.map(|frame| CloseFrame {
            code: frame.code.into(),
            reason: frame.reason.as_str().into(),
        })),
    }
}

/// A node's message as it goes to the caller (raw frames, which a reader never yields, have
/// no counterpart).
fn to_caller(message: tungstenite::Message) -> Option<ws::Message> {
    Some(match message {
        tungstenite::Message::Text(text) => ws::Message::Text(text.as_str().into()),
        tungstenite::Message::Binary(data) => ws::Message::Binary(data),
        tungstenite::Message::Ping(data) => ws::Message::Ping(data),
        tungstenite::Message::Pong(data) => ws::Message::Pong(data),
        tungstenite::Message::Close(frame) => {
            ws::Message::Close(frame.map(|frame| ws::CloseFrame {
                code: frame.code.into(),
                reason: frame.reason.as_str().into(),
            }))
        }
        tungstenite::Message::Frame(_) => return None,
    })
}

/// Passes messages both ways until one side closes or goes away.
async fn pipe(mut caller: WebSocket, mut node: NodeSocket) {
    loop {
        tokio::select! {
            from_caller = caller.recv() => {
                // A caller gone without a close frame: dropping the node's connection ends
                // the session there.
                let Some(Ok(message)) = from_caller else { return };
                let closing = matches!(message, ws::Message::Close(_));
                if node.send(to_node(message)).await.is_err() {
                    return;
                }
                if closing {
                    await_node_close(&mut node).await;
                    return;
                }
            }
            from_node = node.next() => match from_node {
                Some(Ok(message)) => {
                    let closing = matches!(message, tungstenite::Message::Close(_));
                    let Some(message) = to_caller(message) else { continue };
                    if caller.send(message).await.is_err() {
                        return;
                    }
                    if closing {
                        await_caller_close(&mut caller).await;
                        return;
                    }
                }
                Some(Err(_)) | None => {
                    let frame = ws::CloseFrame {
                        code: CLOSE_INTERNAL,
                        reason: "the connection to the node holding the allocation ended".into(),
                    };
                    if caller.send(ws::Message::Close(Some(frame))).await.is_ok() {
                        await_caller_close(&mut caller).await;
                    }
                    return;
                }
            },
        }
    }
}

/// Waits (briefly) for the caller to answer a close frame, so its connection is not torn down
/// under frames it has yet to read.
async fn await_caller_close(caller: &mut WebSocket) {
    let _ = tokio::time::timeout(CLOSE_ANSWER_TIMEOUT, async {
        while let Some(Ok(message)) = caller.recv().await {
            if matches!(message, ws::Message::Close(_)) {
                return;
            }
        }
    })
    .await;
}

/// Waits (briefly) for the node to answer the caller's close frame.
async fn await_node_close(node: &mut NodeSocket) {
    let _ = tokio::time::timeout(CLOSE_ANSWER_TIMEOUT, async {
        while let Some(Ok(message)) = node.next().await {
            if matches!(message, tungstenite::Message::Close(_)) {
                return;
            }
        }
    })
    .await;
}

#[cfg(test)]
#[allow(clippy::panic)] // a failed expectation is a failed test
mod tests {
    use super::*;

    #[test]
    fn the_node_url_keeps_the_path_and_query() {
        let (url, host_port) = node_url(
            "127.0.0.1:4646",
            "/v1/client/allocation/abc/exec?task=web&command=%5B%22ls%22%5D",
        )
        .map_err(|error| error.to_string())
        .unwrap_or_default();
        assert_eq!(
            url,
            "ws://127.0.0.1:4646/v1/client/allocation/abc/exec?task=web&command=%5B%22ls%22%5D"
        );
        assert_eq!(host_port, "127.0.0.1:4646");
        assert!(matches!(
            node_url("https://node:4646", "/"),
            Err(ExecForwardError::BadAddress { .. })
        ));
    }

    #[test]
    fn messages_keep_their_kind_and_close_code_both_ways() {
        let close = ws::Message::Close(Some(ws::CloseFrame {
            code: 1011,
            reason: "boom".into(),
        }));
        let tungstenite::Message::Close(Some(frame)) = to_node(close.clone()) else {
            panic!("a close frame stays one");
        };
        assert_eq!(u16::from(frame.code), 1011);
        assert_eq!(frame.reason.as_str(), "boom");
        assert_eq!(
            to_caller(tungstenite::Message::Close(Some(frame))),
            Some(close)
        );
        let text = ws::Message::Text("{\"exited\":true}".into());
        assert_eq!(to_caller(to_node(text.clone())), Some(text));
        let binary = ws::Message::Binary(vec![0, 1, 2].into());
        assert_eq!(to_caller(to_node(binary.clone())), Some(binary));
        let ping = ws::Message::Ping(vec![7].into());
        assert_eq!(to_caller(to_node(ping.clone())), Some(ping));
    }
}
