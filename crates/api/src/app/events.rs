//! `/v1/event/stream`: the state store's event stream as newline-delimited JSON, one
//! `{"Index":N,"Events":[…]}` line per write, `{}` heartbeats (first, and whenever the stream
//! has been quiet for a while), filtered by `topic=Topic:Key` (repeatable; a bare `Topic`,
//! `*` or a `*` key match everything) and `namespace`.
//!
//! Not here: producing events (the state store does that in the same write as the data).

use std::time::Duration;

use axum::body::{Body, Bytes};
use drover_state::{EventFilter, EventSubscription, Topic};
use tokio::sync::mpsc;

use crate::error::ApiError;
use crate::params::QueryParams;

/// Reads the `topic` and `namespace` parameters into a filter.
pub(super) fn event_filter(params: &QueryParams) -> Result<EventFilter, ApiError> {
    let mut topics = Vec::new();
    let mut unknown_topics = Vec::new();
    for query in params.get_all("topic") {
        // As Nomad's `parseTopic`: a bare topic means every key; more than one `:` is no
        // `Topic:Key` pair at all. Any other name is accepted, as Nomad accepts it: a topic
        // drover publishes nothing of (or an empty one) just never has an event.
        let (name, key) = match query.split(':').collect::<Vec<_>>()[..] {
            [name] => (name, "*"),
            [name, key] => (name, key),
            _ => {
                return Err(ApiError::bad_request(format!(
                    "Invalid topic query: error parsing topics: Invalid key value pair for topic, topic: {query}"
                )));
            }
        };
        let topic = if name == "*" {
            None
        } else {
            match Topic::from_name(name) {
                Some(topic) => Some(topic),
                None => {
                    unknown_topics.push(name.to_string());
                    continue;
                }
            }
        };
        let key = (key != "*").then(|| key.to_string());
        topics.push((topic, key));
    }
    let namespace = match params.namespace() {
        "*" => None,
        namespace => Some(namespace.to_string()),
    };
    Ok(EventFilter {
        topics,
        unknown_topics,
        namespace,
        access: None,
    })
}

/// The streaming body: a `{}` line at once, then each batch as a line, with a `{}` line after
/// every `heartbeat` of quiet. Ends when the caller goes away or the store shuts down.
pub(super) fn event_stream_body(mut subscription: EventSubscription, heartbeat: Duration) -> Body {
    let (sender, receiver) = mpsc::channel::<Bytes>(16);
    tokio::spawn(async move {
        if sender.send(Bytes::from_static(b"{}\n")).await.is_err() {
            return;
        }
        loop {
            let line = tokio::select! {
                () = sender.closed() => return,
                batch = subscription.next_batch() => match batch {
                    Some(batch) => match serde_json::to_vec(&batch) {
                        Ok(mut encoded) => {
                            encoded.push(b'\n');
                            Bytes::from(encoded)
                        }
                        Err(error) => {
                            tracing::error!(%error, "event batch could not be encoded");
                            continue;
                        }
                    },
                    None => return,
                },
                () = tokio::time::sleep(heartbeat) => Bytes::from_static(b"{}\n"),
            };
            if sender.send(line).await.is_err() {
                return;
            }
        }
    });
    let stream = futures_util::stream::unfold(receiver, |mut receiver| async move {
        receiver
            .recv()
            .await
            .map(|chunk| (Ok::<_, std::io::Error>(chunk), receiver))
    });
    Body::from_stream(stream)
}
