//! `/v1/agent/pprof/<name>`: profiles of this agent as Nomad's agent endpoint answers them,
//! in the format `go tool pprof` reads (a gzip'd `perftools.profiles.Profile` protobuf).
//!
//! - `profile`: a CPU profile of `seconds` (default 1), sampled on SIGPROF 99 times a second
//!   by the `pprof` crate; each sample is a symbolized call stack of the thread it hit.
//! - `heap`: what the C allocator reports of its heap (glibc's `mallinfo2`): bytes in use in
//!   its arenas and in their own mappings, one sample each, labelled. glibc keeps no call
//!   stacks of allocations, so the profile has none (its comments say so); `debug=N` answers
//!   the same figures as text, as Go's debug form is text.
//! - `cmdline`: the agent's arguments separated by NUL bytes.
//! - Every other name, Go's `trace`, `goroutine`, `threadcreate`, `block`, `mutex` and
//!   `allocs` among them, is a Go runtime's view with no drover equivalent: answered as Nomad
//!   answers a profile it does not know, 404 "Pprof profile not found profile: <name>".
//!
//! Permissions are Nomad's: with ACLs on, `agent:write` (checked with the other routes in
//! `acl_enforce`); with ACLs off, only an agent with `enable_debug` (on under `-dev`) answers,
//! anyone else 403 "Permission denied". `node_id` and `server_id` name the agent to profile:
//! both at once are Nomad's 400; this agent's own node or server (or `leader` on a server)
//! is answered here, another server is Nomad's 500 "unknown Nomad server <id>", and another
//! node is refused (ask that node's agent).
//!
//! Not here: the profiler itself (the `pprof` crate), the allocator's figures
//! (`drover_isolate::malloc`).

use std::collections::HashMap;
use std::io::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use drover_api::ApiError;
use drover_api::params::QueryParams;

/// How often the CPU profiler samples, per second (Go's default is 100; 99 keeps the samples
/// from beating with timers that fire every 10 ms).
const CPU_SAMPLES_PER_SECOND: i32 = 99;

/// Nomad's text for a profile name it does not know.
const PROFILE_NOT_FOUND: &str = "Pprof profile not found profile:";

/// What the endpoint needs to know of its agent.
#[derive(Clone)]
pub struct PprofEndpoint {
    /// ACLs on: `acl_enforce` has checked `agent:write` before the handler runs.
    pub acl_enabled: bool,
    /// `enable_debug`: what lets an agent without ACLs answer.
    pub enable_debug: bool,
    /// This agent's server as Nomad names it (`<name>.<region>`), `None` without a server.
    pub server_name: Option<String>,
    /// This agent's client node ID, `None` without a client.
    pub node_id: Option<String>,
}

/// The profiling failures, each answered with its HTTP status.
#[derive(Debug, thiserror::Error)]
pub enum PprofError {
    #[error("{PROFILE_NOT_FOUND} {0}")]
    NotFound(String),
    #[error("cpu profiling already in use: {0}")]
    Profiler(String),
    #[error("failed to encode the profile: {0}")]
    Encode(String),
}

impl PprofError {
    fn into_api(self) -> ApiError {
        match self {
            PprofError::NotFound(_) => ApiError::not_found(self.to_string()),
            _ => ApiError::internal(self.to_string()),
        }
    }
}

pub fn router(endpoint: PprofEndpoint) -> axum::Router {
    axum::Router::new()
        .route("/v1/agent/pprof/", axum::routing::any(index))
        .route("/v1/agent/pprof/{*name}", axum::routing::any(profile))
        .with_state(endpoint)
}

/// Nomad has no index of profiles: its 404 "Invalid method".
async fn index() -> Response {
    (StatusCode::NOT_FOUND, "Invalid method").into_response()
}

/// Go's `strconv.Atoi` with its error dropped, as Nomad reads these parameters.
fn int_param(params: &QueryParams, name: &str) -> i64 {
    params
        .get(name)
        .and_then(|text| text.parse::<i64>().ok())
        .unwrap_or(0)
}

async fn profile(
    State(endpoint): State<PprofEndpoint>,
    Path(name): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let params = QueryParams::parse(query.as_deref());
    let seconds = int_param(&params, "seconds");
    let debug = int_param(&params, "debug");
    let node_id = params.get("node_id").unwrap_or("");
    let server_id = params.get("server_id").unwrap_or("");
    if !node_id.is_empty() && !server_id.is_empty() {
        return Err(ApiError::bad_request(
            "Cannot target node and server simultaneously",
        ));
    }
    if !endpoint.acl_enabled && !endpoint.enable_debug {
        return Ok((StatusCode::FORBIDDEN, "Permission denied").into_response());
    }
    if !server_id.is_empty() {
        let own = endpoint
            .server_name
            .as_deref()
            .is_some_and(|own| server_id == own || server_id == "leader");
        if !own {
            return Err(ApiError::internal(format!(
                "unknown Nomad server {server_id}"
            )));
        }
    }
    if !node_id.is_empty() && endpoint.node_id.as_deref() != Some(node_id) {
        return Err(ApiError::bad_request(format!(
            "node {node_id} is not this agent's node: profiles of another node are taken by asking that node's agent"
        )));
    }
    match name.as_str() {
        "cmdline" => {
            let line = std::env::args().collect::<Vec<_>>().join("\0");
            Ok(answer(line.into_bytes(), Kind::Text))
        }
        "profile" => {
            // Nomad's default and floor: one second.
            let seconds = u64::try_from(seconds).ok().filter(|&s| s > 0).unwrap_or(1);
            let bytes = cpu_profile(Duration::from_secs(seconds))
                .await
                .map_err(PprofError::into_api)?;
            Ok(answer(bytes, Kind::Profile("profile")))
        }
        "heap" => {
            let usage = drover_isolate::malloc::heap_usage()
                .ok_or_else(|| PprofError::NotFound(name.clone()).into_api())?;
            if debug != 0 {
                Ok(answer(heap_text(&usage).into_bytes(), Kind::Text))
            } else {
                let bytes =
                    heap_profile(&usage, SystemTime::now()).map_err(PprofError::into_api)?;
                Ok(answer(bytes, Kind::Profile("heap")))
            }
        }
        other => Err(PprofError::NotFound(other.to_owned()).into_api()),
    }
}

enum Kind {
    Text,
    /// A profile file, named for `Content-Disposition`.
    Profile(&'static str),
}

/// The body with Nomad's headers for it.
fn answer(body: Vec<u8>, kind: Kind) -> Response {
    let mut response = (StatusCode::OK, body).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    match kind {
        Kind::Text => {
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            );
        }
        Kind::Profile(name) => {
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/octet-stream"),
            );
            let disposition = format!("attachment; filename=\"{name}\"");
            if let Ok(value) = HeaderValue::from_str(&disposition) {
                headers.insert(header::CONTENT_DISPOSITION, value);
            }
        }
    }
    response
}

/// Samples the whole agent's CPU for `duration`, then symbolizes and encodes the samples.
async fn cpu_profile(duration: Duration) -> Result<Vec<u8>, PprofError> {
    // Unwinding through the C library, libgcc or the vDSO from a signal handler can deadlock
    // or crash; their frames are left out, as the pprof crate advises.
    let guard = pprof::ProfilerGuardBuilder::default()
        .frequency(CPU_SAMPLES_PER_SECOND)
        .blocklist(&["libc", "libgcc", "pthread", "vdso"])
        .build()
        .map_err(|error| PprofError::Profiler(error.to_string()))?;
    tokio::time::sleep(duration).await;
    // Symbolizing reads debug information: off the async workers.
    let report = tokio::task::spawn_blocking(move || {
        let report = guard.report().build();
        drop(guard);
        report
    })
    .await
    .map_err(|error| PprofError::Profiler(error.to_string()))?
    .map_err(|error| PprofError::Profiler(error.to_string()))?;
    let mut builder = ProfileBuilder::default();
    let samples_type = builder.value_type("samples", "count");
    let cpu_type = builder.value_type("cpu", "nanoseconds");
    let period = 1_000_000_000 / i64::from(report.timing.frequency.max(1));
    let thread_key = builder.string("thread");
    for (frames, count) in &report.data {
        let count = i64::try_from(*count).unwrap_or(i64::MAX);
        let locations = frames
            .frames
            .iter()
            .map(|symbols| {
                let lines = symbols
                    .iter()
                    .map(|symbol| {
                        let name = symbol.name();
                        let file = symbol.filename().into_owned();
                        (builder.function(&name, &file), i64::from(symbol.lineno()))
                    })
                    .collect::<Vec<_>>();
                builder.location(lines)
            })
            .collect::<Vec<_>>();
        let thread = builder.string(&frames.thread_name_or_id());
        builder.profile.sample.push(proto::Sample {
            location_id: locations,
            value: vec![count, count.saturating_mul(period)],
            label: vec![proto::Label {
                key: thread_key,
                str: thread,
                ..proto::Label::default()
            }],
        });
    }
    builder.profile.sample_type = vec![samples_type, cpu_type];
    builder.profile.period_type = Some(cpu_type);
    builder.profile.period = period;
    builder.profile.time_nanos = unix_nanos(report.timing.start_time);
    builder.profile.duration_nanos =
        i64::try_from(report.timing.duration.as_nanos()).unwrap_or(i64::MAX);
    builder.finish()
}

/// The allocator's figures as a heap profile: bytes in use, one labelled sample per kind.
fn heap_profile(
    usage: &drover_isolate::malloc::HeapUsage,
    now: SystemTime,
) -> Result<Vec<u8>, PprofError> {
    let mut builder = ProfileBuilder::default();
    let inuse = builder.value_type("inuse_space", "bytes");
    let kind_key = builder.string("kind");
    for (kind, bytes) in [
        ("malloc arenas", usage.in_use_bytes),
        ("malloc mmapped", usage.mmapped_bytes),
    ] {
        let kind = builder.string(kind);
        builder.profile.sample.push(proto::Sample {
            location_id: Vec::new(),
            value: vec![i64::try_from(bytes).unwrap_or(i64::MAX)],
            label: vec![proto::Label {
                key: kind_key,
                str: kind,
                ..proto::Label::default()
            }],
        });
    }
    let comments = [
        "drover heap: what glibc malloc reports (mallinfo2), totals only".to_owned(),
        "glibc keeps no call stacks of allocations, so no sample has one".to_owned(),
        format!(
            "arena bytes {}, free in arenas {}",
            usage.arena_bytes, usage.free_bytes
        ),
    ];
    builder.profile.comment = comments
        .iter()
        .map(|comment| builder.string(comment))
        .collect();
    builder.profile.sample_type = vec![inuse];
    builder.profile.period_type = Some(inuse);
    builder.profile.time_nanos = unix_nanos(now);
    builder.finish()
}

/// The same figures as text (`debug=N`).
fn heap_text(usage: &drover_isolate::malloc::HeapUsage) -> String {
    format!(
        "# drover heap: what glibc malloc reports (mallinfo2); it keeps no call stacks\n\
         # in use in arenas: {} bytes\n\
         # in use in own mappings: {} bytes\n\
         # free in arenas: {} bytes\n\
         # arenas: {} bytes\n",
        usage.in_use_bytes, usage.mmapped_bytes, usage.free_bytes, usage.arena_bytes
    )
}

fn unix_nanos(time: SystemTime) -> i64 {
    time.duration_since(UNIX_EPOCH)
        .map(|since| i64::try_from(since.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Builds a profile: interns strings, functions and locations as the format wants them.
#[derive(Default)]
struct ProfileBuilder {
    profile: proto::Profile,
    strings: HashMap<String, i64>,
    functions: HashMap<(i64, i64), u64>,
    locations: HashMap<Vec<(u64, i64)>, u64>,
}

impl ProfileBuilder {
    /// The string's index in the string table (entry 0 is always "").
    fn string(&mut self, text: &str) -> i64 {
        if self.profile.string_table.is_empty() {
            self.profile.string_table.push(String::new());
            self.strings.insert(String::new(), 0);
        }
        if let Some(&index) = self.strings.get(text) {
            return index;
        }
        let index = i64::try_from(self.profile.string_table.len()).unwrap_or(i64::MAX);
        self.profile.string_table.push(text.to_owned());
        self.strings.insert(text.to_owned(), index);
        index
    }

    fn value_type(&mut self, kind: &str, unit: &str) -> proto::ValueType {
        proto::ValueType {
            r#type: self.string(kind),
            unit: self.string(unit),
        }
    }

    fn function(&mut self, name: &str, file: &str) -> u64 {
        let key = (self.string(name), self.string(file));
        if let Some(&id) = self.functions.get(&key) {
            return id;
        }
        let id = self.profile.function.len() as u64 + 1;
        self.profile.function.push(proto::Function {
            id,
            name: key.0,
            system_name: key.0,
            filename: key.1,
            start_line: 0,
        });
        self.functions.insert(key, id);
        id
    }

    /// A location of these (function, line) pairs, innermost first as the format wants
    /// inlined frames.
    fn location(&mut self, lines: Vec<(u64, i64)>) -> u64 {
        if let Some(&id) = self.locations.get(&lines) {
            return id;
        }
        let id = self.profile.location.len() as u64 + 1;
        self.profile.location.push(proto::Location {
            id,
            mapping_id: 0,
            address: 0,
            line: lines
                .iter()
                .map(|&(function_id, line)| proto::Line { function_id, line })
                .collect(),
            is_folded: false,
        });
        self.locations.insert(lines, id);
        id
    }

    /// The profile, protobuf-encoded and gzip'd as `go tool pprof` reads it.
    fn finish(mut self) -> Result<Vec<u8>, PprofError> {
        if self.profile.string_table.is_empty() {
            self.string("");
        }
        let encoded = prost::Message::encode_to_vec(&self.profile);
        let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gzip.write_all(&encoded)
            .map_err(|error| PprofError::Encode(error.to_string()))?;
        gzip.finish()
            .map_err(|error| PprofError::Encode(error.to_string()))
    }
}

/// Reads back a profile this endpoint wrote (gunzip, then decode the `Profile` message).
pub fn decode(gzipped: &[u8]) -> Result<proto::Profile, PprofError> {
    use std::io::Read;
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(gzipped)
        .read_to_end(&mut raw)
        .map_err(|error| PprofError::Encode(format!("not gzip: {error}")))?;
    prost::Message::decode(raw.as_slice())
        .map_err(|error| PprofError::Encode(format!("not a Profile message: {error}")))
}

/// The messages of pprof's `profile.proto` (package `perftools.profiles`) that drover writes,
/// with their field numbers; fields it never sets (mappings, drop/keep frames) are left out,
/// which the format allows.
pub mod proto {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Profile {
        #[prost(message, repeated, tag = "1")]
        pub sample_type: Vec<ValueType>,
        #[prost(message, repeated, tag = "2")]
        pub sample: Vec<Sample>,
        #[prost(message, repeated, tag = "4")]
        pub location: Vec<Location>,
        #[prost(message, repeated, tag = "5")]
        pub function: Vec<Function>,
        #[prost(string, repeated, tag = "6")]
        pub string_table: Vec<String>,
        #[prost(int64, tag = "9")]
        pub time_nanos: i64,
        #[prost(int64, tag = "10")]
        pub duration_nanos: i64,
        #[prost(message, optional, tag = "11")]
        pub period_type: Option<ValueType>,
        #[prost(int64, tag = "12")]
        pub period: i64,
        #[prost(int64, repeated, tag = "13")]
        pub comment: Vec<i64>,
    }

    #[derive(Clone, Copy, PartialEq, prost::Message)]
    pub struct ValueType {
        #[prost(int64, tag = "1")]
        pub r#type: i64,
        #[prost(int64, tag = "2")]
        pub unit: i64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Sample {
        #[prost(uint64, repeated, tag = "1")]
        pub location_id: Vec<u64>,
        #[prost(int64, repeated, tag = "2")]
        pub value: Vec<i64>,
        #[prost(message, repeated, tag = "3")]
        pub label: Vec<Label>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Label {
        #[prost(int64, tag = "1")]
        pub key: i64,
        #[prost(int64, tag = "2")]
        pub str: i64,
        #[prost(int64, tag = "3")]
        pub num: i64,
        #[prost(int64, tag = "4")]
        pub num_unit: i64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Location {
        #[prost(uint64, tag = "1")]
        pub id: u64,
        #[prost(uint64, tag = "2")]
        pub mapping_id: u64,
        #[prost(uint64, tag = "3")]
        pub address: u64,
        #[prost(message, repeated, tag = "4")]
        pub line: Vec<Line>,
        #[prost(bool, tag = "5")]
        pub is_folded: bool,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Line {
        #[prost(uint64, tag = "1")]
        pub function_id: u64,
        #[prost(int64, tag = "2")]
        pub line: i64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Function {
        #[prost(uint64, tag = "1")]
        pub id: u64,
        #[prost(int64, tag = "2")]
        pub name: i64,
        #[prost(int64, tag = "3")]
        pub system_name: i64,
        #[prost(int64, tag = "4")]
        pub filename: i64,
        #[prost(int64, tag = "5")]
        pub start_line: i64,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    async fn status_of(endpoint: PprofEndpoint, uri: &str) -> (StatusCode, String) {
        use tower::ServiceExt;
        let response = router(endpoint)
            .oneshot(
                axum::http::Request::builder()
                    .uri(uri)
                    .body(axum::body::Body::empty())
                    .unwrap(),
            )
            .await
            .unwrap();
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        (status, String::from_utf8_lossy(&bytes).into_owned())
    }

    fn endpoint(acl_enabled: bool, enable_debug: bool) -> PprofEndpoint {
        PprofEndpoint {
            acl_enabled,
            enable_debug,
            server_name: Some("node1.global".to_owned()),
            node_id: Some("4f6b6c1e-0000-4000-8000-000000000001".to_owned()),
        }
    }

    #[tokio::test]
    async fn without_acls_only_an_agent_with_enable_debug_answers() {
        assert_eq!(
            status_of(endpoint(false, false), "/v1/agent/pprof/heap").await,
            (StatusCode::FORBIDDEN, "Permission denied".to_owned())
        );
        assert_eq!(
            status_of(
                endpoint(false, true),
                "/v1/agent/pprof/heap?server_id=node1.global"
            )
            .await
            .0,
            StatusCode::OK
        );
        // With ACLs on, `acl_enforce` has required agent:write already.
        assert_eq!(
            status_of(
                endpoint(true, false),
                "/v1/agent/pprof/heap?server_id=leader"
            )
            .await
            .0,
            StatusCode::OK
        );
        let (status, text) = status_of(
            endpoint(true, false),
            "/v1/agent/pprof/heap?node_id=4f6b6c1e-0000-4000-8000-000000000002",
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
    }

    #[tokio::test]
    async fn go_runtime_views_answer_nomads_404_for_a_profile_that_does_not_exist() {
        // Go's execution trace and the goroutine, thread and lock views have no Rust
        // equivalent: each is named in Nomad's answer for an unknown profile.
        for name in [
            "trace",
            "goroutine",
            "threadcreate",
            "block",
            "mutex",
            "allocs",
        ] {
            assert_eq!(
                status_of(endpoint(false, true), &format!("/v1/agent/pprof/{name}")).await,
                (
                    StatusCode::NOT_FOUND,
                    format!("Pprof profile not found profile: {name}")
                ),
                "{name}"
            );
        }
    }

    #[test]
    fn the_heap_profile_carries_the_allocators_in_use_bytes() {
        let usage = drover_isolate::malloc::HeapUsage {
            in_use_bytes: 1234,
            mmapped_bytes: 5678,
            free_bytes: 9,
            arena_bytes: 2000,
        };
        let profile = decode(&heap_profile(&usage, SystemTime::now()).unwrap()).unwrap();
        let text = |index: i64| profile.string_table[index as usize].clone();
        assert_eq!(profile.string_table[0], "");
        assert_eq!(text(profile.sample_type[0].r#type), "inuse_space");
        assert_eq!(text(profile.sample_type[0].unit), "bytes");
        let values: Vec<(String, i64)> = profile
            .sample
            .iter()
            .map(|sample| (text(sample.label[0].str), sample.value[0]))
            .collect();
        assert_eq!(
            values,
            [
                ("malloc arenas".to_owned(), 1234),
                ("malloc mmapped".to_owned(), 5678)
            ]
        );
        assert!(
            profile
                .comment
                .iter()
                .any(|&index| text(index).contains("no call stacks"))
        );
    }
}
