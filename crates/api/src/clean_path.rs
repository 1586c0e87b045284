//! Paths as Go's HTTP router sees them: a request whose path is not in canonical form (an empty
//! segment as in `/v1/job//scale`, a `.` or `..` segment) is answered `301 Moved Permanently`
//! to the cleaned path, query kept, as Nomad's `http.ServeMux` does before any handler runs.
//! Go's clients then follow it (a `POST` becoming a `GET`), and meet what the cleaned path
//! answers: for `/v1/job//scale`, the 404 of a job named `scale`.
//!
//! Not here: routing itself (see [`crate::routes`]); the path is compared decoded, as Go's
//! `URL.Path`, so an escaped `%2F` in a job ID counts as the slash it stands for.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use percent_encoding::{AsciiSet, CONTROLS, percent_decode_str, percent_encode};

/// The middleware: a path that cleaning changes is redirected; any other request runs.
pub async fn redirect_unclean_paths(request: Request, next: Next) -> Response {
    if request.method() != Method::CONNECT
        && let Some(location) = canonical_location(request.uri())
    {
        return moved_permanently(request.method(), &location);
    }
    next.run(request).await
}

/// Where Go's router sends a request for `uri`, or `None` when its path is already canonical
/// (or is not a valid escaping, which Go refuses before routing and is left to the routes).
pub fn canonical_location(uri: &axum::http::Uri) -> Option<String> {
    let raw = uri.path();
    let decoded: Vec<u8> = percent_decode_str(raw).collect();
    if !valid_escapes(raw) {
        return None;
    }
    let cleaned = clean(&decoded);
    if cleaned == decoded {
        return None;
    }
    let mut location = percent_encode(&cleaned, GO_PATH_ESCAPES).to_string();
    if let Some(query) = uri.query() {
        location.push('?');
        location.push_str(query);
    }
    Some(location)
}

/// Go's `cleanPath`: rooted, `path.Clean`ed, a trailing slash kept.
fn clean(path: &[u8]) -> Vec<u8> {
    let mut segments: Vec<&[u8]> = Vec::new();
    for segment in path.split(|byte| *byte == b'/') {
        match segment {
            b"" | b"." => {}
            b".." => {
                segments.pop();
            }
            other => segments.push(other),
        }
    }
    let mut cleaned = Vec::with_capacity(path.len() + 1);
    for segment in &segments {
        cleaned.push(b'/');
        cleaned.extend_from_slice(segment);
    }
    if cleaned.is_empty() || (path.ends_with(b"/") && !segments.is_empty()) {
        cleaned.push(b'/');
    }
    cleaned
}

/// Every `%` is followed by two hex digits (Go's URL parser refuses anything else).
fn valid_escapes(raw: &str) -> bool {
    let bytes = raw.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] == b'%' {
            let hex = |offset: usize| bytes.get(at + offset).is_some_and(u8::is_ascii_hexdigit);
            if !(hex(1) && hex(2)) {
                return false;
            }
            at += 3;
        } else {
            at += 1;
        }
    }
    true
}

/// What Go's `url.PathEscape`-like path encoding escapes: everything but the unreserved
/// characters and `$&+,/:;=@`.
const GO_PATH_ESCAPES: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'!')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'\'')
    .add(b'(')
    .add(b')')
    .add(b'*')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'[')
    .add(b'\\')
    .add(b']')
    .add(b'^')
    .add(b'`')
    .add(b'{')
    .add(b'|')
    .add(b'}');

/// Go's `http.Redirect` answer with 301: the location, and for a `GET` its small HTML body.
fn moved_permanently(method: &Method, location: &str) -> Response {
    let Ok(value) = HeaderValue::from_str(location) else {
        // Only ASCII is ever produced above; a value the header cannot carry is a 400.
        return (StatusCode::BAD_REQUEST, "invalid request path").into_response();
    };
    let body = if method == Method::GET {
        Body::from(format!("<a href=\"{location}\">Moved Permanently</a>.\n\n"))
    } else {
        Body::empty()
    };
    let mut response = Response::new(body);
    *response.status_mut() = StatusCode::MOVED_PERMANENTLY;
    response.headers_mut().insert(header::LOCATION, value);
    if method == Method::GET || method == Method::HEAD {
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        );
    }
    response
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // a failed expectation is a failed test

    use super::*;

    fn location(uri: &str) -> Option<String> {
        canonical_location(&uri.parse().unwrap())
    }

    #[test]
    fn canonical_paths_run_as_they_are() {
        assert_eq!(location("/v1/jobs"), None);
        assert_eq!(location("/v1/job/web/scale?namespace=a"), None);
        assert_eq!(location("/v1/job/a%2Fb/scale"), None);
        assert_eq!(location("/v1/client/fs/ls/abc/"), None);
        assert_eq!(location("/"), None);
    }

    #[test]
    fn empty_segments_are_cleaned_as_go_does() {
        assert_eq!(location("/v1/job//scale").as_deref(), Some("/v1/job/scale"));
        assert_eq!(
            location("/v1/job//scale?namespace=default").as_deref(),
            Some("/v1/job/scale?namespace=default")
        );
        assert_eq!(location("//v1/jobs").as_deref(), Some("/v1/jobs"));
        // A trailing slash is kept, as Go's `cleanPath` keeps it.
        assert_eq!(location("/v1/job//").as_deref(), Some("/v1/job/"));
    }

    #[test]
    fn dot_segments_are_resolved() {
        assert_eq!(
            location("/v1/jobs/../agent/self").as_deref(),
            Some("/v1/agent/self")
        );
        assert_eq!(location("/v1/./jobs").as_deref(), Some("/v1/jobs"));
        assert_eq!(location("/../v1/jobs").as_deref(), Some("/v1/jobs"));
    }

    #[test]
    fn escaped_slashes_count_as_slashes_and_are_escaped_again() {
        assert_eq!(
            location("/v1/job/a%2F%2Fb%20c").as_deref(),
            Some("/v1/job/a/b%20c")
        );
    }

    #[test]
    fn invalid_escapes_are_left_to_the_routes() {
        assert_eq!(location("/v1/job//%zz"), None);
    }
}
