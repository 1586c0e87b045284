//! `GET /v1/agent/monitor?log_level=&log_json=&plain=`: the agent's log, streamed live, as
//! Nomad streams it — `StreamFrame` JSON objects back to back (each line in `Data`, `FileEvent`
//! "log", a `{}` heartbeat every second of silence) or, with `plain=true`, the bare lines.
//! The level defaults to INFO, whatever the agent's own `log_level`.
//!
//! Not here: capturing the log ([`crate::logging`]). `node_id` and `server_id` (another
//! agent's log) are refused: this agent streams its own.

use std::time::Duration;

use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use tokio::sync::broadcast::error::RecvError;

use crate::logging::{LogHub, LogLevel, LogSubscription};

/// How long a framed stream stays silent before a `{}` heartbeat (Nomad's framer: 1 s).
const HEARTBEAT: Duration = Duration::from_secs(1);

#[derive(Debug, serde::Deserialize)]
pub struct MonitorQuery {
    log_level: Option<String>,
    log_json: Option<String>,
    plain: Option<String>,
    node_id: Option<String>,
    server_id: Option<String>,
}

fn bad_request(message: String) -> Response {
    (StatusCode::BAD_REQUEST, message).into_response()
}

/// Go's `strconv.ParseBool`.
fn parse_bool(text: &str) -> Option<bool> {
    match text {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// An optional boolean query value, or the message of a 400 naming it.
fn bool_option(value: Option<&str>, what: &str) -> Result<bool, String> {
    match value.filter(|text| !text.is_empty()) {
        None => Ok(false),
        Some(text) => parse_bool(text).ok_or_else(|| {
            format!(
                "Unknown option for {what}: strconv.ParseBool: parsing {text:?}: invalid syntax"
            )
        }),
    }
}

/// The monitor endpoint.
pub async fn monitor_handler(
    State(hub): State<LogHub>,
    Query(query): Query<MonitorQuery>,
) -> Response {
    let level = match query.log_level.as_deref().filter(|text| !text.is_empty()) {
        None => LogLevel::Info,
        Some(text) => match text.parse::<LogLevel>() {
            Ok(level) => level,
            Err(error) => return bad_request(error.to_string()),
        },
    };
    let json = match bool_option(query.log_json.as_deref(), "log json") {
        Ok(json) => json,
        Err(message) => return bad_request(message),
    };
    let plain = match bool_option(query.plain.as_deref(), "plain") {
        Ok(plain) => plain,
        Err(message) => return bad_request(message),
    };
    let node_id = query.node_id.filter(|id| !id.is_empty());
    let server_id = query.server_id.filter(|id| !id.is_empty());
    if node_id.is_some() && server_id.is_some() {
        return bad_request("Cannot target node and server simultaneously".into());
    }
    if node_id.is_some() || server_id.is_some() {
        return bad_request(
            "node_id and server_id are not supported: ask the agent itself for its log".into(),
        );
    }
    let subscription = hub.subscribe(level);
    let stream = futures_util::stream::unfold(
        Stream {
            subscription,
            level,
            json,
            plain,
        },
        |mut stream| async move {
            let chunk = stream.next_chunk().await?;
            Some((Ok::<_, std::convert::Infallible>(chunk), stream))
        },
    );
    let content_type = if plain {
        "text/plain"
    } else {
        "application/json"
    };
    (
        [(header::CONTENT_TYPE, content_type)],
        Body::from_stream(stream),
    )
        .into_response()
}

struct Stream {
    subscription: LogSubscription,
    level: LogLevel,
    json: bool,
    plain: bool,
}

impl Stream {
    /// The next bytes to send; `None` once the hub is gone.
    async fn next_chunk(&mut self) -> Option<Vec<u8>> {
        loop {
            let received = if self.plain {
                self.subscription.receiver.recv().await
            } else {
                match tokio::time::timeout(HEARTBEAT, self.subscription.receiver.recv()).await {
                    Ok(received) => received,
                    Err(_) => return Some(b"{}".to_vec()),
                }
            };
            let data = match received {
                Ok(line) if line.level <= self.level => {
                    if self.json {
                        line.json.clone().into_bytes()
                    } else {
                        line.text.clone().into_bytes()
                    }
                }
                // Another monitor asked for more detail than this one.
                Ok(_) => continue,
                Err(RecvError::Lagged(missed)) => {
                    format!("[WARN] Monitor dropped {missed} logs during monitor request\n")
                        .into_bytes()
                }
                Err(RecvError::Closed) => return None,
            };
            if self.plain {
                return Some(data);
            }
            let frame = drover_structs::StreamFrame {
                data: drover_structs::Bytes(data),
                file_event: "log".into(),
                ..Default::default()
            };
            return serde_json::to_vec(&frame).ok();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_booleans_parse_and_others_are_named() {
        assert_eq!(parse_bool("T"), Some(true));
        assert_eq!(parse_bool("0"), Some(false));
        assert_eq!(parse_bool("yes"), None);
        assert!(bool_option(Some("yes"), "plain").is_err());
        assert_eq!(bool_option(Some(""), "plain").ok(), Some(false));
    }
}
