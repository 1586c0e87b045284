//! The web UI as the agent serves it: `/` redirects to `/ui/`, `/ui/<asset>` answers an
//! embedded file (precompressed brotli or gzip when the browser takes it, an `ETag`, and
//! `immutable` caching for the content-hashed files under `assets/`), and every other `/ui/…`
//! path answers `index.html`, where the single-page app routes it.
//!
//! Behind a reverse proxy that strips a prefix (`/nomad/ui/` → `/ui/`), the prefix comes from
//! `ui { base_path }` or the request's `X-Forwarded-Prefix`; it is written into `index.html`'s
//! `<base href>` and the redirects, and the app derives its API address from that base.
//!
//! Not here: the app itself (`ui/` at the repository root, built with npm) or any API route.
//! The assets are embedded by `build.rs`; a binary built without them answers `/ui/` with how
//! to build them.
//!
//! # Design notes
//!
//! **Invariant**: nothing is read, decompressed or allocated at the agent's start: the files
//! are static data (`include_bytes!` with their build-time `.gz`/`.br` siblings) touched only
//! when served. The middleware sits outermost, in front of the ACL layer: it serves static
//! files only, and the app's API calls carry the user's own token. The app (`ui/src`) uses
//! only the public `/v1` API with blocking queries; its browser tests (`ui/test`, chromium via
//! puppeteer-core) start real agents.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// One embedded file of `ui/dist`.
#[derive(Debug)]
pub struct Asset {
    /// Its path under `/ui/` (`index.html`, `assets/app-3F2A.js`).
    pub path: &'static str,
    pub raw: &'static [u8],
    pub gzip: Option<&'static [u8]>,
    pub brotli: Option<&'static [u8]>,
    /// A quoted content hash.
    pub etag: &'static str,
}

/// Every embedded file (empty when the binary was built without `ui/dist`).
pub static ASSETS: &[Asset] = include!(concat!(env!("OUT_DIR"), "/assets.rs"));

/// The placeholder `ui/index.html` carries, replaced by the served base.
const BASE_PLACEHOLDER: &str = "<base href=\"/ui/\">";

/// `ui { … }` of the agent's config, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UiConfig {
    /// `ui { enabled }` (Nomad's default: on).
    pub enabled: bool,
    /// `ui { base_path }`: the path prefix a reverse proxy serves this agent under (`/nomad`),
    /// normalised: leading `/`, no trailing `/`; empty when served at the root. When set it
    /// wins over a request's `X-Forwarded-Prefix`.
    pub base_path: String,
}

impl Default for UiConfig {
    fn default() -> Self {
        UiConfig {
            enabled: true,
            base_path: String::new(),
        }
    }
}

/// Why a `ui` setting cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum UiError {
    #[error("{0:?} is not a URL path of letters, digits and -._~/ (such as \"/nomad\")")]
    BadBasePath(String),
}

/// `text` as a base path: `""`, `"/"` → empty; `"nomad/"` → `"/nomad"`. Only letters, digits
/// and `-._~/` are taken (the value is written into HTML and a `Location`).
pub fn normalize_base_path(text: &str) -> Result<String, UiError> {
    let trimmed = text.trim().trim_matches('/');
    if trimmed.is_empty() {
        return Ok(String::new());
    }
    let safe = trimmed
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-._~/".contains(c));
    if !safe
        || trimmed
            .split('/')
            .any(|part| part.is_empty() || part == "..")
    {
        return Err(UiError::BadBasePath(text.to_owned()));
    }
    Ok(format!("/{trimmed}"))
}

/// Whether the binary carries the built UI.
pub fn assets_embedded() -> bool {
    !ASSETS.is_empty()
}

/// The middleware: answers `/`, `/ui` and `/ui/…` (GET and HEAD), passes everything else on.
/// It sits outside the API's ACL check: the assets are public, the API calls they make carry
/// the user's token.
pub async fn serve(State(config): State<UiConfig>, request: Request, next: Next) -> Response {
    let path = request.uri().path();
    let is_read = request.method() == Method::GET || request.method() == Method::HEAD;
    if !is_read || !(path == "/" || path == "/ui" || path.starts_with("/ui/")) {
        return next.run(request).await;
    }
    let base = base_of(&config, request.headers());
    if path == "/" || path == "/ui" {
        // Nomad answers `/` with a temporary redirect to `/ui/`, keeping the query.
        let location = match request.uri().query() {
            Some(query) => format!("{base}/ui/?{query}"),
            None => format!("{base}/ui/"),
        };
        return redirect(&location);
    }
    if !config.enabled {
        return html(StatusCode::OK, DISABLED_PAGE.to_owned(), "no-cache");
    }
    if ASSETS.is_empty() {
        return html(StatusCode::NOT_FOUND, NOT_BUILT_PAGE.to_owned(), "no-cache");
    }
    let file = &path["/ui/".len()..];
    match find(file) {
        Some(asset) if asset.path != "index.html" => {
            // Content-hashed names never change content: cached for good.
            let cache = if asset.path.starts_with("assets/") {
                "public, max-age=31536000, immutable"
            } else {
                "no-cache"
            };
            asset_response(asset, request.headers(), cache)
        }
        // A missing file under assets/ (an old hashed name) is a 404, not the app.
        None if file.starts_with("assets/") => {
            (StatusCode::NOT_FOUND, "no such UI asset").into_response()
        }
        _ => index(&base, request.headers()),
    }
}

/// The prefix to write into links: the configured base path, else a valid
/// `X-Forwarded-Prefix`, else none.
fn base_of(config: &UiConfig, headers: &HeaderMap) -> String {
    if !config.base_path.is_empty() {
        return config.base_path.clone();
    }
    headers
        .get("x-forwarded-prefix")
        .and_then(|value| value.to_str().ok())
        .and_then(|text| normalize_base_path(text).ok())
        .unwrap_or_default()
}

fn find(path: &str) -> Option<&'static Asset> {
    ASSETS.iter().find(|asset| asset.path == path)
}

/// `index.html` with its `<base href>` pointing at `<base>/ui/`; never cached without
/// revalidation (it names the current hashed assets).
fn index(base: &str, headers: &HeaderMap) -> Response {
    let Some(asset) = find("index.html") else {
        return html(StatusCode::NOT_FOUND, NOT_BUILT_PAGE.to_owned(), "no-cache");
    };
    if base.is_empty() {
        return asset_response(asset, headers, "no-cache");
    }
    let text = String::from_utf8_lossy(asset.raw).replacen(
        BASE_PLACEHOLDER,
        &format!("<base href=\"{base}/ui/\">"),
        1,
    );
    html(StatusCode::OK, text, "no-cache")
}

fn asset_response(asset: &'static Asset, headers: &HeaderMap, cache: &'static str) -> Response {
    let not_modified = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|tags| {
            tags.split(',')
                .any(|tag| tag.trim() == asset.etag || tag.trim() == "*")
        });
    let mut builder = Response::builder()
        .header(header::ETAG, asset.etag)
        .header(header::CACHE_CONTROL, cache)
        .header(header::VARY, "Accept-Encoding");
    if not_modified {
        return builder
            .status(StatusCode::NOT_MODIFIED)
            .body(Body::empty())
            .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response());
    }
    let accepted = headers
        .get(header::ACCEPT_ENCODING)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("");
    let (bytes, encoding) = match (asset.brotli, asset.gzip) {
        (Some(bytes), _) if accepts(accepted, "br") => (bytes, Some("br")),
        (_, Some(bytes)) if accepts(accepted, "gzip") => (bytes, Some("gzip")),
        _ => (asset.raw, None),
    };
    if let Some(encoding) = encoding {
        builder = builder.header(header::CONTENT_ENCODING, encoding);
    }
    builder
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, content_type(asset.path))
        .header(header::CONTENT_LENGTH, bytes.len())
        .body(Body::from(bytes))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// Whether an `Accept-Encoding` list takes `coding` (named, without `q=0`).
fn accepts(list: &str, coding: &str) -> bool {
    list.split(',').any(|item| {
        let mut parts = item.split(';');
        let name = parts.next().unwrap_or("").trim();
        let refused = parts.any(|param| {
            let param = param.trim().replace(' ', "");
            param == "q=0" || param == "q=0.0" || param == "q=0.00" || param == "q=0.000"
        });
        name.eq_ignore_ascii_case(coding) && !refused
    })
}

fn content_type(path: &str) -> &'static str {
    match path.rsplit('.').next().unwrap_or("") {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "json" | "map" => "application/json",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "woff2" => "font/woff2",
        "txt" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

fn redirect(location: &str) -> Response {
    match HeaderValue::from_str(location) {
        Ok(value) => (StatusCode::TEMPORARY_REDIRECT, [(header::LOCATION, value)]).into_response(),
        Err(_) => (StatusCode::BAD_REQUEST, "bad redirect target").into_response(),
    }
}

fn html(status: StatusCode, body: String, cache: &'static str) -> Response {
    (
        status,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, cache),
        ],
        body,
    )
        .into_response()
}

const DISABLED_PAGE: &str = "<!doctype html><meta charset=utf-8><title>drover UI disabled</title>\
<h1>drover UI disabled</h1><p>This agent's web UI is turned off (<code>ui { enabled = false }</code> \
in its configuration). The HTTP API at <code>/v1/</code> still answers.</p>";

const NOT_BUILT_PAGE: &str = "<!doctype html><meta charset=utf-8><title>drover UI not built</title>\
<h1>drover UI not built</h1><p>This drover binary was built without the web UI's assets. \
Build them, then drover again:</p><pre>cd ui &amp;&amp; npm ci &amp;&amp; npm run build &amp;&amp; cd ..\n\
cargo build -p drover</pre><p>(<code>./scripts/dev</code> does both.) The HTTP API at \
<code>/v1/</code> answers without them.</p>";

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)] // a failed expectation is a failed test
mod tests {
    use super::*;

    #[test]
    fn base_paths_are_normalised_and_unsafe_ones_refused() {
        assert_eq!(normalize_base_path("").unwrap(), "");
        assert_eq!(normalize_base_path("/").unwrap(), "");
        assert_eq!(normalize_base_path("/nomad/").unwrap(), "/nomad");
        assert_eq!(normalize_base_path("a/b").unwrap(), "/a/b");
        assert!(normalize_base_path("/x\"><script>").is_err());
        assert!(normalize_base_path("/a//b").is_err());
        assert!(normalize_base_path("/a/../b").is_err());
    }

    #[test]
    fn accept_encoding_honours_q_zero() {
        assert!(accepts("gzip, deflate, br", "br"));
        assert!(accepts("gzip;q=1.0", "gzip"));
        assert!(!accepts("gzip;q=0, br", "gzip"));
        assert!(!accepts("identity", "gzip"));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)] // a failed expectation is a failed test
mod serving_tests {
    use axum::Router;
    use axum::body::Body;
    use axum::http::{Request, StatusCode, header};
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    use super::*;

    fn router(config: UiConfig) -> Router {
        Router::new()
            .route("/v1/jobs", axum::routing::get(|| async { "[]" }))
            .layer(axum::middleware::from_fn_with_state(config, serve))
    }

    async fn get(router: &Router, path: &str, headers: &[(&str, &str)]) -> Response {
        let mut request = Request::get(path);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        router
            .clone()
            .oneshot(request.body(Body::empty()).unwrap())
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn the_root_redirects_to_the_ui_keeping_the_query_and_the_forwarded_prefix() {
        let router = router(UiConfig::default());
        let response = get(&router, "/?region=global", &[]).await;
        assert_eq!(response.status(), StatusCode::TEMPORARY_REDIRECT);
        assert_eq!(response.headers()[header::LOCATION], "/ui/?region=global");
        let response = get(&router, "/ui", &[("X-Forwarded-Prefix", "/nomad/")]).await;
        assert_eq!(response.headers()[header::LOCATION], "/nomad/ui/");
        // A prefix that is not a plain path is not written into a Location.
        let response = get(&router, "/", &[("X-Forwarded-Prefix", "/x\"><script>")]).await;
        assert_eq!(response.headers()[header::LOCATION], "/ui/");
        // The configured base path wins over the header.
        let router = self::router(UiConfig {
            enabled: true,
            base_path: "/ops/nomad".into(),
        });
        let response = get(&router, "/", &[("X-Forwarded-Prefix", "/other")]).await;
        assert_eq!(response.headers()[header::LOCATION], "/ops/nomad/ui/");
    }

    #[tokio::test]
    async fn the_api_passes_through_and_a_disabled_ui_says_so() {
        let router = router(UiConfig {
            enabled: false,
            base_path: String::new(),
        });
        let response = get(&router, "/v1/jobs", &[]).await;
        assert_eq!(response.status(), StatusCode::OK);
        let response = get(&router, "/ui/jobs", &[]).await;
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert!(String::from_utf8_lossy(&body).contains("ui { enabled = false }"));
    }

    #[tokio::test]
    async fn ui_paths_answer_the_app_or_how_to_build_it() {
        let router = router(UiConfig::default());
        let response = get(&router, "/ui/jobs/web", &[("X-Forwarded-Prefix", "/nomad")]).await;
        let status = response.status();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let body = String::from_utf8_lossy(&body);
        if assets_embedded() {
            // Any page path answers the app, its base pointing under the proxy's prefix.
            assert_eq!(status, StatusCode::OK);
            assert!(body.contains("<base href=\"/nomad/ui/\">"), "{body}");
            let missing = get(&router, "/ui/assets/gone-1234.js", &[]).await;
            assert_eq!(missing.status(), StatusCode::NOT_FOUND);
            let script = ASSETS
                .iter()
                .find(|asset| asset.path.ends_with(".js"))
                .expect("a built UI has a script");
            let path = format!("/ui/{}", script.path);
            let compressed = get(&router, &path, &[("Accept-Encoding", "gzip, br")]).await;
            assert_eq!(compressed.headers()[header::CONTENT_ENCODING], "br");
            assert!(
                compressed.headers()[header::CACHE_CONTROL]
                    .to_str()
                    .unwrap()
                    .contains("immutable")
            );
            let again = get(&router, &path, &[("If-None-Match", script.etag)]).await;
            assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
            let plain = get(&router, &path, &[]).await;
            assert!(plain.headers().get(header::CONTENT_ENCODING).is_none());
            let body = plain.into_body().collect().await.unwrap().to_bytes();
            assert_eq!(&body[..], script.raw);
        } else {
            assert_eq!(status, StatusCode::NOT_FOUND);
            assert!(body.contains("npm run build"), "{body}");
        }
    }
}
