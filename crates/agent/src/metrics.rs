//! The agent's metrics and `GET /v1/metrics`: gauges named as Nomad names them
//! (`nomad.client.allocs.memory.rss`, `nomad.nomad.job_summary.running`, …), published at the
//! telemetry `collection_interval` by [`collect`], and rendered either as go-metrics' JSON
//! summary (what Nomad's in-memory sink displays, and what python-nomad reads) or, with
//! `?format=prometheus`, in Prometheus' text format 0.0.4, the dots of a name turned into
//! underscores.
//!
//! The registry is the `prometheus` crate's, built without its protobuf feature (a handful of
//! small dependencies): it encodes the text format and also hands the gathered values back,
//! which the JSON form needs. The `metrics` facade's Prometheus exporter renders text only.
//!
//! Each source (the client's allocations, its node, the server, the runtime) replaces its whole
//! set of gauges every round, so the gauges of an allocation that is gone disappear with it, as
//! they age out of Nomad's in-memory sink. The job summary gauges (seven per job and group) are
//! the exception: a round publishes only the summaries that changed since the last one (the
//! store's snapshots share what did not change, so finding them costs little at 10 000 jobs)
//! and removes those of purged jobs. Every gauge carries the `host` label (the node name)
//! that Nomad's hostname label adds.
//!
//! Counters and timing samples ([`sampled`]) are recorded as things happen: the task runners'
//! `nomad.client.allocs.{running,complete,failed,restart,oom_killed}` (through the client's
//! `TaskCounters`) and, on a server agent, each API request's time under the name of the Nomad
//! RPC endpoint that serves it (`nomad.nomad.job.register`, `nomad.nomad.client.update_status`,
//! … — [`endpoint_metric`]). A server also counts, as Nomad's RPC layer does,
//! `nomad.nomad.rpc.query` for each read its blocking-query path serves (the API's reads
//! and every client's allocation watch, in process or over HTTP: [`count_query`]) and
//! `nomad.nomad.rpc.request` for each call a remote client node makes (its `/v1/internal/…`
//! requests, drover's RPCs), so a dev agent has counters from its first moment, as Nomad
//! has. The connection counters (`accept_conn`, `streaming_rpc`) are not kept: drover has no
//! RPC connections of its own, HTTP carries its calls.
//!
//! A round of gauges is published before the API serves its first request ([`Collector`]'s
//! `collect_once`), so neither form ever answers empty.
//!
//! Not here: sampling task usage (the client does, on request) or deciding what is published
//! (the `telemetry` config block, [`crate::config::Telemetry`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};

use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use prometheus::{GaugeVec, Opts, Registry, TextEncoder};

use drover_api::routes::Route;

use crate::backend::LocalClient;
use crate::config::Telemetry;

mod sampled;

use sampled::{Kind, Sampled};

/// Errors of the metrics registry.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    #[error("metric {name}: {source}")]
    Register {
        name: &'static str,
        #[source]
        source: prometheus::Error,
    },
    #[error("metric {name} was published with labels {got:?}, not {expected:?}")]
    LabelMismatch {
        name: &'static str,
        expected: Vec<&'static str>,
        got: Vec<&'static str>,
    },
    #[error("encoding the prometheus text format: {0}")]
    Encode(#[source] prometheus::Error),
}

/// Who publishes a set of gauges; each replaces its own set as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Source {
    ClientAllocations,
    ClientNode,
    Server,
    Runtime,
    /// The Connect sidecars' per-upstream counters (`mesh_http`).
    MeshProxies,
    /// The server's job summary gauges, changed in place ([`Metrics::publish_changes`]):
    /// only the summaries that changed since the last round are published again.
    JobSummaries,
}

/// One gauge value: a Nomad metric name (dotted), its labels (names in a fixed order per
/// metric) and the value.
#[derive(Debug, Clone, PartialEq)]
pub struct Gauge {
    pub name: &'static str,
    pub labels: Vec<(&'static str, String)>,
    pub value: f64,
}

impl Gauge {
    pub fn new(name: &'static str, labels: &[(&'static str, &str)], value: f64) -> Self {
        Gauge {
            name,
            labels: labels
                .iter()
                .map(|(label, value)| (*label, (*value).to_owned()))
                .collect(),
            value,
        }
    }
}

struct Family {
    vec: GaugeVec,
    label_names: Vec<&'static str>,
}

#[derive(Default)]
struct Inner {
    families: BTreeMap<&'static str, Family>,
    /// The Nomad (dotted) name of each registered Prometheus name.
    dotted: BTreeMap<String, &'static str>,
    /// What each source set in its last round: (metric, label values).
    published: BTreeMap<Source, BTreeSet<(&'static str, Vec<String>)>>,
}

/// The agent's gauges. Cheap to share behind an `Arc`.
pub struct Metrics {
    registry: Registry,
    host: String,
    inner: Mutex<Inner>,
    sampled: Sampled,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics")
            .field("host", &self.host)
            .finish_non_exhaustive()
    }
}

impl Metrics {
    /// An empty registry; `host` is the value of every gauge's `host` label.
    pub fn new(host: impl Into<String>) -> Self {
        Metrics {
            registry: Registry::new(),
            host: host.into(),
            inner: Mutex::new(Inner::default()),
            sampled: Sampled::default(),
        }
    }

    /// Adds `value` to a counter (go-metrics' `IncrCounterWithLabels`) at `now_unix_ns`.
    pub fn incr_counter(
        &self,
        name: &'static str,
        labels: &[(&'static str, &str)],
        value: f64,
        now_unix_ns: i64,
    ) {
        self.record(Kind::Counter, name, labels, value, now_unix_ns);
    }

    /// Records a sample, a time in milliseconds (go-metrics' `AddSampleWithLabels`, which its
    /// `MeasureSince` uses) at `now_unix_ns`.
    pub fn add_sample(
        &self,
        name: &'static str,
        labels: &[(&'static str, &str)],
        value: f64,
        now_unix_ns: i64,
    ) {
        self.record(Kind::Sample, name, labels, value, now_unix_ns);
    }

    fn record(
        &self,
        kind: Kind,
        name: &'static str,
        labels: &[(&'static str, &str)],
        value: f64,
        now_unix_ns: i64,
    ) {
        let mut labels: Vec<(&'static str, String)> = labels
            .iter()
            .map(|(label, value)| (*label, (*value).to_owned()))
            .collect();
        labels.push(("host", self.host.clone()));
        self.sampled.record(kind, name, labels, value, now_unix_ns);
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves the maps consistent (every update is a single
        // insert or removal), so a poisoned lock is still usable.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Replaces everything `source` published with `gauges`: values are set, and the label
    /// sets it published last round and not this one are removed.
    pub fn publish(&self, source: Source, gauges: Vec<Gauge>) -> Result<(), MetricsError> {
        let mut inner = self.lock();
        let mut now = BTreeSet::new();
        let mut first_error = None;
        for mut gauge in gauges {
            gauge.labels.push(("host", self.host.clone()));
            match self.set(&mut inner, &gauge) {
                Ok(()) => {
                    let values = gauge.labels.into_iter().map(|(_, value)| value).collect();
                    now.insert((gauge.name, values));
                }
                Err(error) => {
                    first_error.get_or_insert(error);
                }
            }
        }
        // What this round no longer publishes is removed; `now` then takes the place of the
        // last round's set without a copy (a server with 10 000 jobs publishes 70 000 job
        // summary gauges a round).
        let before = inner.published.remove(&source).unwrap_or_default();
        for (name, values) in before.difference(&now) {
            if let Some(family) = inner.families.get(name) {
                let values: Vec<&str> = values.iter().map(String::as_str).collect();
                // Absent already is fine: nothing to remove.
                let _ = family.vec.remove_label_values(&values);
            }
        }
        inner.published.insert(source, now);
        first_error.map_or(Ok(()), Err)
    }

    /// Changes `source`'s gauges in place: each of `set` is set, each of `removed` (its name
    /// and labels; the value is not read) is removed, and everything else `source` published
    /// stays as it is. For a source that publishes only what changed since its last round.
    pub fn publish_changes(
        &self,
        source: Source,
        set: Vec<Gauge>,
        removed: Vec<Gauge>,
    ) -> Result<(), MetricsError> {
        let mut inner = self.lock();
        let mut first_error = None;
        for mut gauge in removed {
            gauge.labels.push(("host", self.host.clone()));
            let values: Vec<String> = gauge.labels.into_iter().map(|(_, value)| value).collect();
            if let Some(family) = inner.families.get(gauge.name) {
                let values: Vec<&str> = values.iter().map(String::as_str).collect();
                // Absent already is fine: nothing to remove.
                let _ = family.vec.remove_label_values(&values);
            }
            if let Some(published) = inner.published.get_mut(&source) {
                published.remove(&(gauge.name, values));
            }
        }
        for mut gauge in set {
            gauge.labels.push(("host", self.host.clone()));
            match self.set(&mut inner, &gauge) {
                Ok(()) => {
                    let values = gauge.labels.into_iter().map(|(_, value)| value).collect();
                    inner
                        .published
                        .entry(source)
                        .or_default()
                        .insert((gauge.name, values));
                }
                Err(error) => {
                    first_error.get_or_insert(error);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    fn set(&self, inner: &mut Inner, gauge: &Gauge) -> Result<(), MetricsError> {
        let label_names: Vec<&'static str> = gauge.labels.iter().map(|(name, _)| *name).collect();
        if !inner.families.contains_key(gauge.name) {
            let prometheus_name = gauge.name.replace(['.', '-'], "_");
            // Nomad's Prometheus sink uses the metric's name as its help text.
            let vec = GaugeVec::new(Opts::new(&prometheus_name, gauge.name), &label_names)
                .map_err(|source| MetricsError::Register {
                    name: gauge.name,
                    source,
                })?;
            self.registry
                .register(Box::new(vec.clone()))
                .map_err(|source| MetricsError::Register {
                    name: gauge.name,
                    source,
                })?;
            inner.dotted.insert(prometheus_name, gauge.name);
            inner.families.insert(
                gauge.name,
                Family {
                    vec,
                    label_names: label_names.clone(),
                },
            );
        }
        let family = inner
            .families
            .get(gauge.name)
            .ok_or(MetricsError::LabelMismatch {
                name: gauge.name,
                expected: Vec::new(),
                got: label_names.clone(),
            })?;
        if family.label_names != label_names {
            return Err(MetricsError::LabelMismatch {
                name: gauge.name,
                expected: family.label_names.clone(),
                got: label_names,
            });
        }
        let values: Vec<&str> = gauge
            .labels
            .iter()
            .map(|(_, value)| value.as_str())
            .collect();
        family
            .vec
            .get_metric_with_label_values(&values)
            .map_err(|source| MetricsError::Register {
                name: gauge.name,
                source,
            })?
            .set(gauge.value);
        Ok(())
    }

    /// The Prometheus text format (0.0.4) at `now_unix_ns`.
    pub fn render_prometheus(&self, now_unix_ns: i64) -> Result<String, MetricsError> {
        let mut families = {
            let _inner = self.lock();
            self.registry.gather()
        };
        families.extend(
            self.sampled
                .families(now_unix_ns, |name| name.replace(['.', '-'], "_")),
        );
        TextEncoder::new()
            .encode_to_string(&families)
            .map_err(MetricsError::Encode)
    }

    /// go-metrics' `MetricsSummary`, as Nomad's `/v1/metrics` answers it. `now_unix_ns` stamps
    /// it (rounded to the second, printed as Go prints a UTC time).
    pub fn render_json(&self, now_unix_ns: i64) -> serde_json::Value {
        let (families, dotted) = {
            let inner = self.lock();
            (self.registry.gather(), inner.dotted.clone())
        };
        let mut gauges = Vec::new();
        for family in &families {
            let name = dotted.get(family.name()).copied().unwrap_or(family.name());
            for metric in family.get_metric() {
                let labels: serde_json::Map<String, serde_json::Value> = metric
                    .get_label()
                    .iter()
                    .map(|pair| (pair.name().to_owned(), pair.value().into()))
                    .collect();
                gauges.push(serde_json::json!({
                    "Name": name,
                    "Value": metric.get_gauge().get_value(),
                    "Labels": labels,
                }));
            }
        }
        let (counters, samples) = self.sampled.summary(now_unix_ns);
        serde_json::json!({
            "Timestamp": go_utc_time(now_unix_ns),
            "Gauges": gauges,
            "Points": [],
            "Counters": counters,
            "Samples": samples,
        })
    }

    /// How many gauge values are held (all sources).
    pub fn len(&self) -> usize {
        let _inner = self.lock();
        self.registry
            .gather()
            .iter()
            .map(|family| family.get_metric().len())
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The task runners count into the registry.
impl drover_client::task_metrics::TaskCounters for Metrics {
    fn increment(&self, name: &'static str, labels: &[(&'static str, &str)]) {
        self.incr_counter(name, labels, 1.0, unix_now_ns());
    }
}

/// A Unix time in nanoseconds as Go's `time.Time.String()` prints a UTC time rounded to the
/// second: `2006-01-02 15:04:05 +0000 UTC`.
fn go_utc_time(unix_ns: i64) -> String {
    let rounded = (unix_ns + 500_000_000).div_euclid(1_000_000_000) * 1_000_000_000;
    let rfc3339 = drover_structs::Timestamp::from_unix_nanos(rounded).to_rfc3339_nanos();
    format!(
        "{} +0000 UTC",
        rfc3339.trim_end_matches('Z').replacen('T', " ", 1)
    )
}

/// What `/v1/metrics` serves from: the registry and whether Prometheus output is on.
#[derive(Clone)]
pub struct MetricsEndpoint {
    pub metrics: Arc<Metrics>,
    pub prometheus_enabled: bool,
}

#[derive(Debug, serde::Deserialize)]
pub struct MetricsQuery {
    #[serde(default)]
    format: Option<String>,
    #[serde(default)]
    pretty: Option<String>,
}

/// `GET /v1/metrics[?format=prometheus]`.
pub async fn metrics_handler(
    State(endpoint): State<MetricsEndpoint>,
    Query(query): Query<MetricsQuery>,
) -> Response {
    if query.format.as_deref() == Some("prometheus") {
        if !endpoint.prometheus_enabled {
            return (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "Prometheus is not enabled",
            )
                .into_response();
        }
        return match endpoint.metrics.render_prometheus(unix_now_ns()) {
            Ok(text) => (
                [(
                    header::CONTENT_TYPE,
                    "text/plain; version=0.0.4; charset=utf-8",
                )],
                text,
            )
                .into_response(),
            Err(error) => {
                tracing::warn!(%error, "cannot render the metrics");
                (StatusCode::INTERNAL_SERVER_ERROR, error.to_string()).into_response()
            }
        };
    }
    let summary = endpoint.metrics.render_json(unix_now_ns());
    let pretty = query
        .pretty
        .as_deref()
        .is_some_and(|value| value.is_empty() || value == "true" || value == "1");
    let body = if pretty {
        serde_json::to_string_pretty(&summary)
    } else {
        serde_json::to_string(&summary)
    };
    match body {
        Ok(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(error) => (StatusCode::INTERNAL_SERVER_ERROR, error.to_string()).into_response(),
    }
}

/// The Nomad RPC endpoint that serves what `route` asks, as the name of the timing Nomad's
/// endpoint records (`defer metrics.MeasureSince([]string{"nomad", "job", "register"}, …)`);
/// `None` for what Nomad answers without a server endpoint (the agent's own, parsing) or on
/// the client.
pub fn endpoint_metric(route: &Route) -> Option<&'static str> {
    Some(match route {
        Route::JobList => "nomad.nomad.job.list",
        Route::JobRegister | Route::JobRegisterAt { .. } => "nomad.nomad.job.register",
        Route::JobValidate => "nomad.nomad.job.validate",
        Route::JobRead { .. } => "nomad.nomad.job.get_job",
        Route::JobDeregister { .. } => "nomad.nomad.job.deregister",
        Route::JobAllocations { .. } => "nomad.nomad.job.allocations",
        Route::JobEvaluations { .. } => "nomad.nomad.job.evaluations",
        Route::JobVersions { .. } => "nomad.nomad.job.get_job_versions",
        Route::JobRevert { .. } => "nomad.nomad.job.revert",
        Route::JobStable { .. } => "nomad.nomad.job.stable",
        Route::JobSummary { .. } => "nomad.nomad.job_summary.get_job_summary",
        Route::JobDeployment { .. } => "nomad.nomad.job.latest_deployment",
        Route::JobDeployments { .. } => "nomad.nomad.job.deployments",
        Route::JobPlan { .. } => "nomad.nomad.job.plan",
        Route::JobEvaluate { .. } => "nomad.nomad.job.evaluate",
        Route::JobPeriodicForce { .. } => "nomad.nomad.periodic.force",
        Route::JobDispatch { .. } => "nomad.nomad.job.dispatch",
        Route::JobSubmission { .. } => "nomad.nomad.job.get_job_submission",
        Route::JobActions { .. } => "nomad.nomad.job.get_actions",
        Route::AllocationList => "nomad.nomad.alloc.list",
        Route::AllocationRead { .. } => "nomad.nomad.alloc.get_alloc",
        Route::AllocationStop { .. } => "nomad.nomad.alloc.stop",
        Route::EvaluationList => "nomad.nomad.eval.list",
        Route::EvaluationRead { .. } => "nomad.nomad.eval.get_eval",
        Route::EvaluationAllocations { .. } => "nomad.nomad.eval.allocations",
        Route::ServiceList => "nomad.nomad.service_registration.list",
        Route::ServiceRead { .. } => "nomad.nomad.service_registration.get_service",
        Route::NodeList => "nomad.nomad.client.list",
        Route::NodeRead { .. } => "nomad.nomad.client.get_node",
        Route::NodeAllocations { .. } => "nomad.nomad.client.get_allocs",
        Route::NodeDrain { .. } => "nomad.nomad.client.update_drain",
        Route::NodeEligibility { .. } => "nomad.nomad.client.update_eligibility",
        Route::NodePurge { .. } => "nomad.nomad.client.deregister",
        Route::NodeEvaluate { .. } => "nomad.nomad.client.evaluate",
        Route::NodeRegister => "nomad.nomad.client.register",
        Route::NodeUpdateStatus { .. } => "nomad.nomad.client.update_status",
        Route::NodeGetClientAllocs { .. } => "nomad.nomad.client.get_client_allocs",
        Route::NodeUpdateAlloc => "nomad.nomad.client.update_alloc",
        Route::AllocGetAllocs => "nomad.nomad.alloc.get_allocs",
        Route::DeploymentList => "nomad.nomad.deployment.list",
        Route::DeploymentRead { .. } => "nomad.nomad.deployment.get_deployment",
        Route::DeploymentAllocations { .. } => "nomad.nomad.deployment.allocations",
        Route::Search => "nomad.nomad.search.prefix_search",
        _ => return None,
    })
}

/// Times every request a server agent serves whose route is a Nomad server endpoint
/// ([`endpoint_metric`]), as a sample in milliseconds: from the request's arrival to its
/// answer's head (a streamed body is not waited for).
pub async fn measure_endpoints(
    State(metrics): State<Arc<Metrics>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let route = drover_api::routes::route(request.method(), request.uri().path()).ok();
    let name = route.as_ref().and_then(endpoint_metric);
    let counted = match &route {
        Some(Route::NodeGetClientAllocs { .. }) => Some(RPC_QUERY),
        Some(
            Route::NodeRegister
            | Route::NodeUpdateStatus { .. }
            | Route::AllocGetAllocs
            | Route::NodeUpdateAlloc
            | Route::ServiceRegistrationUpsert
            | Route::ServiceRegistrationDeleteIds,
        ) => Some(RPC_REQUEST),
        Some(_) if name.is_some() && request.method() == axum::http::Method::GET => Some(RPC_QUERY),
        _ => None,
    };
    if let Some(counter) = counted {
        // A client's blocking watch is a remote RPC too.
        if matches!(route, Some(Route::NodeGetClientAllocs { .. })) {
            metrics.incr_counter(RPC_REQUEST, &[], 1.0, unix_now_ns());
        }
        metrics.incr_counter(counter, &[], 1.0, unix_now_ns());
    }
    let started = tokio::time::Instant::now();
    let response = next.run(request).await;
    if let Some(name) = name {
        let elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
        metrics.add_sample(name, &[], elapsed_ms, unix_now_ns());
    }
    response
}

/// Nomad's counter of the reads its blocking-query path runs.
const RPC_QUERY: &str = "nomad.nomad.rpc.query";
/// Nomad's counter of the RPC requests its servers handle from other agents.
const RPC_REQUEST: &str = "nomad.nomad.rpc.request";

/// Counts one read of the blocking-query path (`nomad.nomad.rpc.query`), as a local client's
/// allocation watch makes it without HTTP.
pub fn count_query(metrics: &Metrics) {
    metrics.incr_counter(RPC_QUERY, &[], 1.0, unix_now_ns());
}

fn unix_now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| i64::try_from(elapsed.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// What [`collect`] reads from.
pub struct Collector {
    pub metrics: Arc<Metrics>,
    pub telemetry: Telemetry,
    pub client: Option<Arc<LocalClient>>,
    pub server: Option<drover_server::Server>,
    pub host_stats: drover_client::host_stats::HostStatsCollector,
    /// The server's state as of the last round of job summary gauges.
    pub job_summaries_seen: JobSummariesSeen,
}

/// The snapshot the job summary gauges were last published from: the next round publishes
/// only the summaries that differ from it ([`drover_state::StateSnapshot::job_summary_changes`]).
#[derive(Debug, Default)]
pub struct JobSummariesSeen(Mutex<Option<drover_state::StateSnapshot>>);

/// Publishes every gauge each `collection_interval` until `shutdown`.
pub async fn collect(collector: Collector, shutdown: tokio_util::sync::CancellationToken) {
    let mut ticks = tokio::time::interval(collector.telemetry.collection_interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = ticks.tick() => {}
        }
        collector.collect_once().await;
    }
}

impl Collector {
    /// One round of every source.
    pub async fn collect_once(&self) {
        let mut rounds = vec![(Source::Runtime, runtime_gauges())];
        if let Some(server) = &self.server {
            rounds.push((Source::Server, server_gauges(server)));
            self.publish_job_summaries(server);
        }
        if let Some(client) = &self.client {
            let node = client.node();
            let node_class = if node.node_class.is_empty() {
                "none"
            } else {
                node.node_class.as_str()
            };
            let node_id = client.node_id();
            let base = [
                ("node_id", node_id.as_str()),
                ("datacenter", node.datacenter.as_str()),
                ("node_class", node_class),
                ("node_pool", node.node_pool.as_str()),
                ("node_status", node.status.as_str()),
                (
                    "node_scheduling_eligibility",
                    node.scheduling_eligibility.as_str(),
                ),
            ];
            let (mut node_gauges, task_gauges) = self.client_gauges(client, &base).await;
            if self.telemetry.publish_node_metrics {
                node_gauges.extend(host_gauges(&self.host_stats.collect(unix_now_ns()), &base));
            }
            rounds.push((Source::ClientNode, node_gauges));
            rounds.push((Source::ClientAllocations, task_gauges));
        }
        for (source, gauges) in rounds {
            if let Err(error) = self.metrics.publish(source, gauges) {
                tracing::warn!(%error, ?source, "cannot publish a metric");
            }
        }
    }

    /// The job summary gauges of the jobs whose summary changed since the last round; a purged
    /// job's gauges are removed (Nomad's leader stops publishing them and they age out).
    fn publish_job_summaries(&self, server: &drover_server::Server) {
        let snapshot = server.state().snapshot();
        let mut seen = self
            .job_summaries_seen
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (set, removed) = job_summary_gauges(&snapshot, seen.as_ref());
        if let Err(error) = self
            .metrics
            .publish_changes(Source::JobSummaries, set, removed)
        {
            tracing::warn!(%error, "cannot publish a job summary metric");
        }
        *seen = Some(snapshot);
    }

    /// Nomad's `emitClientMetrics` (alloc and task counts by state, always) and, with
    /// `publish_allocation_metrics`, each running task's usage.
    async fn client_gauges(
        &self,
        client: &LocalClient,
        base: &[(&'static str, &str)],
    ) -> (Vec<Gauge>, Vec<Gauge>) {
        let (mut pending, mut running, mut terminal) = (0, 0, 0);
        let (mut task_pending, mut task_running, mut task_dead) = (0, 0, 0);
        let mut task_gauges = Vec::new();
        for alloc_id in client.alloc_ids() {
            let Ok(alloc) = client.alloc(&alloc_id) else {
                continue;
            };
            for state in alloc.task_states.values() {
                match state.state.as_str() {
                    "pending" => task_pending += 1,
                    "running" => task_running += 1,
                    "dead" => task_dead += 1,
                    _ => {}
                }
            }
            match alloc.client_status.as_str() {
                "pending" => pending += 1,
                "running" => running += 1,
                "complete" | "failed" => terminal += 1,
                _ => {}
            }
            if !self.telemetry.publish_allocation_metrics || alloc.client_status != "running" {
                continue;
            }
            let Ok(usage) = client.alloc_stats(&alloc_id, None).await else {
                continue;
            };
            let job_name = alloc
                .job
                .as_ref()
                .map_or(alloc.job_id.as_str(), |job| job.name.as_str());
            for (task, task_usage) in &usage.tasks {
                let labels = [
                    ("job", job_name),
                    ("task_group", alloc.task_group.as_str()),
                    ("alloc_id", alloc.id.as_str()),
                    ("task", task.as_str()),
                    ("namespace", alloc.namespace.as_str()),
                ];
                task_gauges.extend(task_usage_gauges(
                    &task_usage.resource_usage,
                    alloc_task_resources(&alloc, task),
                    &labels,
                ));
            }
        }
        let node_gauges = [
            ("nomad.client.allocations.migrating", 0),
            ("nomad.client.allocations.blocked", 0),
            ("nomad.client.allocations.pending", pending),
            ("nomad.client.allocations.running", running),
            ("nomad.client.allocations.terminal", terminal),
            ("nomad.client.tasks.pending", task_pending),
            ("nomad.client.tasks.running", task_running),
            ("nomad.client.tasks.dead", task_dead),
        ]
        .into_iter()
        .map(|(name, count)| Gauge::new(name, base, f64::from(count)))
        .collect();
        (node_gauges, task_gauges)
    }
}

/// A task's reserved memory (MB, max MB) and cpu (MHz) from the allocation.
fn alloc_task_resources(alloc: &drover_structs::Allocation, task: &str) -> (i64, i64, i64) {
    alloc
        .allocated_resources
        .as_ref()
        .and_then(|resources| resources.tasks.get(task))
        .map_or((0, 0, 0), |resources| {
            (
                resources.memory.memory_mb,
                resources.memory.memory_max_mb,
                resources.cpu.cpu_shares,
            )
        })
}

/// Nomad's task runner `setGaugeForMemory` and `setGaugeForCPU`: a memory figure is published
/// when it is non-zero or was measured.
fn task_usage_gauges(
    usage: &drover_structs::ResourceUsage,
    (memory_mb, memory_max_mb, cpu_mhz): (i64, i64, i64),
    labels: &[(&'static str, &str)],
) -> Vec<Gauge> {
    let memory = &usage.memory_stats;
    let cpu = &usage.cpu_stats;
    let mut gauges = Vec::new();
    for (name, value, measured) in [
        ("nomad.client.allocs.memory.rss", memory.rss, "RSS"),
        ("nomad.client.allocs.memory.cache", memory.cache, "Cache"),
        ("nomad.client.allocs.memory.swap", memory.swap, "Swap"),
        (
            "nomad.client.allocs.memory.mapped_file",
            memory.mapped_file,
            "Mapped File",
        ),
        ("nomad.client.allocs.memory.usage", memory.usage, "Usage"),
        (
            "nomad.client.allocs.memory.max_usage",
            memory.max_usage,
            "Max Usage",
        ),
        (
            "nomad.client.allocs.memory.kernel_usage",
            memory.kernel_usage,
            "Kernel Usage",
        ),
        (
            "nomad.client.allocs.memory.kernel_max_usage",
            memory.kernel_max_usage,
            "Kernel Max Usage",
        ),
    ] {
        if value != 0 || memory.measured.iter().any(|m| m == measured) {
            gauges.push(Gauge::new(name, labels, value as f64));
        }
    }
    const MIB: f64 = 1024.0 * 1024.0;
    if memory_mb > 0 {
        gauges.push(Gauge::new(
            "nomad.client.allocs.memory.allocated",
            labels,
            memory_mb as f64 * MIB,
        ));
    }
    if memory_max_mb > 0 {
        gauges.push(Gauge::new(
            "nomad.client.allocs.memory.max_allocated",
            labels,
            memory_max_mb as f64 * MIB,
        ));
    }
    for (name, value) in [
        ("nomad.client.allocs.cpu.total_percent", cpu.percent),
        ("nomad.client.allocs.cpu.system", cpu.system_mode),
        ("nomad.client.allocs.cpu.user", cpu.user_mode),
        (
            "nomad.client.allocs.cpu.throttled_time",
            cpu.throttled_time as f64,
        ),
        (
            "nomad.client.allocs.cpu.throttled_periods",
            cpu.throttled_periods as f64,
        ),
        ("nomad.client.allocs.cpu.total_ticks", cpu.total_ticks),
    ] {
        gauges.push(Gauge::new(name, labels, value));
    }
    if cpu_mhz > 0 {
        gauges.push(Gauge::new(
            "nomad.client.allocs.cpu.allocated",
            labels,
            cpu_mhz as f64,
        ));
    }
    gauges
}

/// Nomad's client `emitHostStats`: memory, uptime, each cpu and each disk.
fn host_gauges(stats: &drover_structs::HostStats, base: &[(&'static str, &str)]) -> Vec<Gauge> {
    let memory = &stats.memory;
    let mut gauges = vec![
        Gauge::new("nomad.client.host.memory.total", base, memory.total as f64),
        Gauge::new(
            "nomad.client.host.memory.available",
            base,
            memory.available as f64,
        ),
        Gauge::new("nomad.client.host.memory.used", base, memory.used as f64),
        Gauge::new("nomad.client.host.memory.free", base, memory.free as f64),
        Gauge::new("nomad.client.uptime", base, stats.uptime as f64),
    ];
    for cpu in &stats.cpu {
        let mut labels = base.to_vec();
        labels.push(("cpu", cpu.cpu.as_str()));
        for (name, value) in [
            ("nomad.client.host.cpu.total", cpu.total),
            ("nomad.client.host.cpu.total_percent", cpu.total),
            ("nomad.client.host.cpu.user", cpu.user),
            ("nomad.client.host.cpu.idle", cpu.idle),
            ("nomad.client.host.cpu.system", cpu.system),
        ] {
            gauges.push(Gauge::new(name, &labels, value));
        }
    }
    for disk in &stats.disk_stats {
        let mut labels = base.to_vec();
        labels.push(("disk", disk.device.as_str()));
        for (name, value) in [
            ("nomad.client.host.disk.size", disk.size as f64),
            ("nomad.client.host.disk.used", disk.used as f64),
            ("nomad.client.host.disk.available", disk.available as f64),
            ("nomad.client.host.disk.used_percent", disk.used_percent),
            (
                "nomad.client.host.disk.inodes_percent",
                disk.inodes_used_percent,
            ),
        ] {
            gauges.push(Gauge::new(name, &labels, value));
        }
    }
    gauges
}

/// Nomad's broker and plan queue gauges (Nomad's leader publishes them; every drover server is
/// its own leader).
fn server_gauges(server: &drover_server::Server) -> Vec<Gauge> {
    let queues = server.queue_stats();
    [
        ("nomad.nomad.broker.total_ready", queues.broker_ready),
        ("nomad.nomad.broker.total_unacked", queues.broker_unacked),
        ("nomad.nomad.broker.total_pending", queues.broker_pending),
        ("nomad.nomad.broker.total_blocked", queues.blocked),
        ("nomad.nomad.plan.queue_depth", queues.plan_queue_depth),
    ]
    .into_iter()
    .map(|(name, count)| Gauge::new(name, &[], count as f64))
    .collect()
}

/// The job summary gauges, per job and task group, that changed between `previous` and
/// `snapshot`: (to set, to remove). A group whose counters did not move is not published again;
/// the gauges of a purged job, or of a group a job no longer has, are removed.
fn job_summary_gauges(
    snapshot: &drover_state::StateSnapshot,
    previous: Option<&drover_state::StateSnapshot>,
) -> (Vec<Gauge>, Vec<Gauge>) {
    fn group_gauges(
        summary: &drover_structs::JobSummary,
        group: &str,
        counts: &drover_structs::TaskGroupSummary,
        into: &mut Vec<Gauge>,
    ) {
        let labels = [
            ("job", summary.job_id.as_str()),
            ("task_group", group),
            ("namespace", summary.namespace.as_str()),
        ];
        for (name, value) in [
            ("nomad.nomad.job_summary.queued", counts.queued),
            ("nomad.nomad.job_summary.complete", counts.complete),
            ("nomad.nomad.job_summary.failed", counts.failed),
            ("nomad.nomad.job_summary.running", counts.running),
            ("nomad.nomad.job_summary.starting", counts.starting),
            ("nomad.nomad.job_summary.lost", counts.lost),
            ("nomad.nomad.job_summary.unknown", counts.unknown),
        ] {
            into.push(Gauge::new(name, &labels, value as f64));
        }
    }
    let (mut set, mut removed) = (Vec::new(), Vec::new());
    for change in snapshot.job_summary_changes(previous) {
        if let Some(after) = &change.after {
            for (group, counts) in &after.summary {
                let unchanged = change
                    .before
                    .as_ref()
                    .is_some_and(|before| before.summary.get(group) == Some(counts));
                if !unchanged {
                    group_gauges(after, group, counts, &mut set);
                }
            }
        }
        if let Some(before) = &change.before {
            for (group, counts) in &before.summary {
                let kept = change
                    .after
                    .as_ref()
                    .is_some_and(|after| after.summary.contains_key(group));
                if !kept {
                    group_gauges(before, group, counts, &mut removed);
                }
            }
        }
    }
    (set, removed)
}

/// The agent process itself: Go's runtime gauges where drover has a counterpart —
/// `num_goroutines` is the number of live tokio tasks, `sys_bytes` the resident memory.
fn runtime_gauges() -> Vec<Gauge> {
    let mut gauges = Vec::new();
    if let Ok(handle) = tokio::runtime::Handle::try_current() {
        gauges.push(Gauge::new(
            "nomad.runtime.num_goroutines",
            &[],
            handle.metrics().num_alive_tasks() as f64,
        ));
    }
    if let Some(rss) = resident_bytes() {
        gauges.push(Gauge::new("nomad.runtime.sys_bytes", &[], rss as f64));
    }
    gauges
}

/// The agent's resident memory, from `/proc/self/statm` (pages × page size).
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    let page_size =
        u64::try_from(nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE).ok()??).ok()?;
    Some(pages * page_size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gauges_render_as_go_metrics_json_and_prometheus_text_with_nomad_names() {
        let metrics = Metrics::new("node-1");
        metrics
            .publish(
                Source::ClientAllocations,
                vec![Gauge::new(
                    "nomad.client.allocs.memory.rss",
                    &[("alloc_id", "a1"), ("task", "web")],
                    4096.0,
                )],
            )
            .unwrap();
        let text = metrics.render_prometheus(0).unwrap();
        assert!(
            text.contains(
                "nomad_client_allocs_memory_rss{alloc_id=\"a1\",host=\"node-1\",task=\"web\"} 4096"
            ),
            "{text}"
        );
        assert!(
            text.contains("# TYPE nomad_client_allocs_memory_rss gauge"),
            "{text}"
        );
        let json = metrics.render_json(1_700_000_000_400_000_000);
        assert_eq!(json["Timestamp"], "2023-11-14 22:13:20 +0000 UTC");
        assert_eq!(json["Gauges"][0]["Name"], "nomad.client.allocs.memory.rss");
        assert_eq!(json["Gauges"][0]["Value"], 4096.0);
        assert_eq!(json["Gauges"][0]["Labels"]["task"], "web");
        assert_eq!(json["Counters"], serde_json::json!([]));
    }

    #[test]
    fn a_source_replaces_its_gauges_so_a_gone_allocation_disappears() {
        let metrics = Metrics::new("h");
        let rss = |alloc: &str| {
            Gauge::new(
                "nomad.client.allocs.memory.rss",
                &[("alloc_id", alloc)],
                1.0,
            )
        };
        metrics
            .publish(Source::ClientAllocations, vec![rss("a"), rss("b")])
            .unwrap();
        metrics
            .publish(
                Source::Runtime,
                vec![Gauge::new("nomad.runtime.sys_bytes", &[], 9.0)],
            )
            .unwrap();
        assert_eq!(metrics.len(), 3);
        metrics
            .publish(Source::ClientAllocations, vec![rss("b")])
            .unwrap();
        let text = metrics.render_prometheus(0).unwrap();
        assert!(!text.contains("alloc_id=\"a\""), "{text}");
        assert!(text.contains("alloc_id=\"b\""), "{text}");
        assert!(text.contains("nomad_runtime_sys_bytes"), "{text}");
    }

    #[test]
    fn published_changes_set_and_remove_only_what_they_name() {
        let metrics = Metrics::new("h");
        let running = |job: &str, value: f64| {
            Gauge::new(
                "nomad.nomad.job_summary.running",
                &[("job", job), ("task_group", "g"), ("namespace", "default")],
                value,
            )
        };
        metrics
            .publish_changes(
                Source::JobSummaries,
                vec![running("a", 1.0), running("b", 2.0)],
                Vec::new(),
            )
            .unwrap();
        // The next round names only what changed: b moves, a is purged, nothing else goes.
        metrics
            .publish_changes(
                Source::JobSummaries,
                vec![running("b", 3.0)],
                vec![running("a", 0.0)],
            )
            .unwrap();
        let text = metrics.render_prometheus(0).unwrap();
        assert!(!text.contains("job=\"a\""), "{text}");
        assert!(
            text.contains(
                "nomad_nomad_job_summary_running{host=\"h\",job=\"b\",namespace=\"default\",task_group=\"g\"} 3"
            ),
            "{text}"
        );
        assert_eq!(metrics.len(), 1);
    }

    #[test]
    fn a_gauge_published_with_other_labels_is_refused_by_name() {
        let metrics = Metrics::new("h");
        metrics
            .publish(
                Source::Server,
                vec![Gauge::new("nomad.nomad.plan.queue_depth", &[], 1.0)],
            )
            .unwrap();
        let error = metrics
            .publish(
                Source::Server,
                vec![Gauge::new(
                    "nomad.nomad.plan.queue_depth",
                    &[("x", "y")],
                    1.0,
                )],
            )
            .unwrap_err();
        assert!(
            error.to_string().contains("nomad.nomad.plan.queue_depth"),
            "{error}"
        );
    }

    #[test]
    fn task_gauges_follow_nomad_measured_rules() {
        let mut usage = drover_structs::ResourceUsage::default();
        usage.memory_stats.rss = 10;
        usage.memory_stats.measured = vec!["RSS".into(), "Swap".into()];
        usage.cpu_stats.percent = 12.5;
        let gauges = task_usage_gauges(&usage, (256, 0, 100), &[("task", "t")]);
        let names: Vec<&str> = gauges.iter().map(|gauge| gauge.name).collect();
        assert!(names.contains(&"nomad.client.allocs.memory.rss"));
        assert!(names.contains(&"nomad.client.allocs.memory.swap"));
        assert!(!names.contains(&"nomad.client.allocs.memory.cache"));
        assert!(!names.contains(&"nomad.client.allocs.memory.max_allocated"));
        let allocated = gauges
            .iter()
            .find(|gauge| gauge.name == "nomad.client.allocs.memory.allocated")
            .unwrap();
        assert_eq!(allocated.value, 256.0 * 1024.0 * 1024.0);
        assert!(names.contains(&"nomad.client.allocs.cpu.total_percent"));
        assert!(names.contains(&"nomad.client.allocs.cpu.allocated"));
    }
}
