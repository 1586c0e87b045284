//! The one limit on request bodies, for every route: direct, forwarded to a server or a node,
//! or internal. The agent applies [`limit_request_body`] as the outermost layer, so a body is
//! measured once, before any route or forwarding sees it. Past the limit the answer is
//! `413 Payload Too Large` with a plain-text message naming the limit.
//!
//! Nomad's HTTP layer sets no such limit; drover keeps the 2 MiB its router had always
//! enforced on direct routes, now the same everywhere. Not here: limits on response bodies or
//! on websocket messages (the exec endpoint sets its own).

use axum::body::Body;
use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body_util::{BodyExt, LengthLimitError, Limited};

/// The largest request body a route takes, in bytes, but for a snapshot's restore.
pub const MAX_REQUEST_BODY: usize = 2 * 1024 * 1024;
/// The largest snapshot archive `PUT /v1/operator/snapshot` takes, in bytes: the largest
/// body any route takes.
pub const MAX_SNAPSHOT_BODY: usize = 512 * 1024 * 1024;

/// The body limit of a request to `path`.
pub fn body_limit_for(method: &axum::http::Method, path: &str) -> usize {
    let restore = *method == axum::http::Method::PUT || *method == axum::http::Method::POST;
    if restore && path == "/v1/operator/snapshot" {
        MAX_SNAPSHOT_BODY
    } else {
        MAX_REQUEST_BODY
    }
}

fn too_large(limit: usize) -> Response {
    (
        StatusCode::PAYLOAD_TOO_LARGE,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        format!("request body too large: the limit is {limit} bytes"),
    )
        .into_response()
}

/// Middleware: refuses a body longer than the route's limit ([`body_limit_for`]: by its
/// `Content-Length`, or while reading it when it has none), and hands the rest on whole.
pub async fn limit_request_body(request: Request, next: Next) -> Response {
    let limit = body_limit_for(request.method(), request.uri().path());
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    if declared.is_some_and(|length| length > limit as u64) {
        return too_large(limit);
    }
    let (parts, body) = request.into_parts();
    let collected = match Limited::new(body, limit).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(error) if error.downcast_ref::<LengthLimitError>().is_some() => {
            return too_large(limit);
        }
        Err(error) => {
            return (
                StatusCode::BAD_REQUEST,
                [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                format!("reading the request body: {error}"),
            )
                .into_response();
        }
    };
    next.run(Request::from_parts(parts, Body::from(collected)))
        .await
}

#[cfg(test)]
#[allow(clippy::expect_used, clippy::unwrap_used)] // a failed expectation is a failed test
mod tests {
    use axum::Router;
    use axum::routing::put;
    use tower::ServiceExt;

    use super::*;

    fn echo_length() -> Router {
        Router::new()
            .route(
                "/v1/jobs",
                put(|body: axum::body::Bytes| async move { body.len().to_string() }),
            )
            .layer(axum::middleware::from_fn(limit_request_body))
    }

    async fn send(
        router: Router,
        body: Body,
        declare_length: Option<usize>,
    ) -> (StatusCode, String) {
        let mut request = Request::builder().method("PUT").uri("/v1/jobs");
        if let Some(length) = declare_length {
            request = request.header(header::CONTENT_LENGTH, length);
        }
        let response = router.oneshot(request.body(body).unwrap()).await.unwrap();
        let status = response.status();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8_lossy(&bytes).into_owned())
    }

    #[tokio::test]
    async fn a_body_past_the_limit_gets_413_whether_declared_or_streamed() {
        let three_mib = vec![b'x'; 3 * 1024 * 1024];
        let (status, text) = send(
            echo_length(),
            Body::from(three_mib.clone()),
            Some(three_mib.len()),
        )
        .await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(text, "request body too large: the limit is 2097152 bytes");

        // No Content-Length: the body is cut off while it is read.
        let chunks = three_mib
            .chunks(64 * 1024)
            .map(|chunk| Ok::<_, std::io::Error>(axum::body::Bytes::copy_from_slice(chunk)))
            .collect::<Vec<_>>();
        let streamed = Body::from_stream(futures_util::stream::iter(chunks));
        let (status, _) = send(echo_length(), streamed, None).await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);

        let at_limit = vec![b'x'; MAX_REQUEST_BODY];
        let (status, text) =
            send(echo_length(), Body::from(at_limit), Some(MAX_REQUEST_BODY)).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(text, MAX_REQUEST_BODY.to_string());
    }
}
