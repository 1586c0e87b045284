//! `drover agent`: one process that is server (state, scheduler, plan applier), client (node
//! agent running tasks), or both, serving Nomad's HTTP API. A client without a local server
//! reaches its servers over their HTTP API (see [`server_link`]).
//!
//! This crate owns the agent's flags and configuration and wires the library crates together;
//! the work itself lives in those crates.
//!
//! # Layers
//!
//! Each module directly under `src/` uses only modules on the lines below its own (`error`
//! modules aside), as `crates/structs/tests/module_cycles.rs` checks; top first:
//!
//! - `mesh_http`
//! - `operator_http`, `task_api`
//! - `client_acl`, `join_http`, `leadership`
//! - `acl_enforce`, `proxy`
//! - `docker_fingerprint`, `gc_http`, `metrics`, `node_meta_http`
//! - `backend`
//! - `server_link`
//! - `acl_resolve_http`, `acl_roles_http`, `acl_sso_http`, `in_process`, `reload`
//! - `acl_http`, `config`, `monitor`, `variables_http`
//! - `cluster`, `identity_http`, `keyring_http`, `logging`, `namespaces_http`, `node_pools_http`,
//!   `pprof_http`, `request_body`, `sso`
//!
//! # Design notes
//!
//! `drover agent`: the agent config (Nomad's keys; `client { artifact { … } }` is
//! validated into the client's `ArtifactConfig`, `host_volume "name" { path read_only }` into
//! the node's `HostVolumes` and the client's config (each path an existing directory), and the timeouts of getters drover lacks —
//! `gcs_timeout`, `hg_timeout`, `s3_timeout` — are refused naming the key), the in-process and remote
//! client↔server links, the API backend over the server and the local client, forwarding
//! (`proxy`: client endpoints to the node that runs an allocation, and on a client-only agent
//! everything else to its servers), start and shutdown.
//! The agent's own endpoints answer on every agent and are never forwarded: `/v1/metrics`
//! (`metrics`: gauges with Nomad's names in a `prometheus`-crate registry, published by each
//! source — client allocations, client node, server queues and job summaries, runtime — every
//! `telemetry.collection_interval`, each source replacing its whole set; counters and timing
//! samples as go-metrics keeps them in `metrics::sampled` — 10 s intervals, the JSON showing
//! the last finished one, Prometheus cumulative counters and summaries — fed by the client's
//! task runners through `task_metrics::TaskCounters` (`nomad.client.allocs.*`) and, on a
//! server, by `measure_endpoints`, which times each request under its Nomad endpoint's name
//! and counts `nomad.nomad.rpc.query`/`rpc.request` as Nomad's RPC layer, the in-process
//! client's allocation watch counted through the `on_query` callback the agent hands
//! `InProcessServer`, so `in_process` never names `metrics`; a first round is published before the
//! API serves), `/v1/agent/join` (`join_http`: a server of this cluster, by its
//! `X-Drover-Cluster-ID`, counts as joined; others are failed joins saying why) and
//! `/v1/agent/monitor` (`monitor`, fed by `logging`: the process's `tracing` subscriber writes
//! stderr at `log_level` and hands events to a broadcast hub only while a monitor listens at
//! their level) and `/v1/agent/pprof/<name>` (`pprof_http`: a CPU profile sampled by the
//! `pprof` crate and the glibc allocator's own heap figures, each encoded here as pprof's
//! gzip'd `Profile` protobuf with the prost already in the tree; Go-only profiles are Nomad's
//! 404; agent:write with ACLs, `enable_debug` without).
//! `SIGHUP` and `PUT|POST /v1/agent/reload` (`reload`: agent:write with ACLs) read the
//! `-config` files again: `log_level` is applied in place, every other changed key is named in
//! a warning as taking a restart, and a config that no longer loads changes nothing.
//! A server agent also answers the keyring (`keyring_http`: `/v1/operator/keyring/…`,
//! `/.well-known/jwks.json`, `/.well-known/openid-configuration` when `server { oidc_issuer }`
//! is set) and Nomad Variables (`variables_http`: `/v1/vars`, `/v1/var/<path>`; a workload
//! identity may read only its implicit `nomad/jobs/<job>[/<group>[/<task>]]` paths, any other
//! credential that does not resolve is 403; locks as Nomad's, shown to management only),
//! namespaces (`namespaces_http`: `/v1/namespaces`, `/v1/namespace[/<name>]`, Nomad's
//! answers; with ACLs on a caller sees the namespaces it has a capability in) and the ACL endpoints
//! (`acl_http`: bootstrap with the data dir's `server/acl-bootstrap-reset`, policies, tokens,
//! token self, one-time tokens (`/v1/acl/token/onetime[/exchange]`: asked for with the
//! caller's own ACL token, exchanged once within 10 minutes for it); a new token's expiry
//! within `acl { token_min_expiration_ttl, token_max_expiration_ttl }`; roles in `acl_roles_http`: `/v1/acl/roles`, `/v1/acl/role[/<id>|/name/<name>]`
//! with Nomad's validation, a client token reading only its own roles; single sign-on in
//! `acl_sso_http` (auth methods, binding rules, `/v1/acl/login`, `/v1/acl/oidc/auth-url` and
//! `complete-auth`; the pending OIDC requests in memory by client nonce, 5 minutes) over
//! `sso` (`jwt`: compact JWS verified with `rsa`/`p256` and cap's claim rules on the injected
//! clock; `oidc`: discovery, JWKS, the code exchange with PKCE, user info; `claims`: claim
//! mappings, go-bexpr selectors through `drover_api::bexpr`, `${…}` names); 400 `ACL support
//! disabled` with ACLs off). `acl_enforce` is the one place
//! requests are authorised: a route → permission table (namespace capability in the query's,
//! the registered job's or the allocation's namespace; node, agent, operator or management),
//! installed as a layer only with `acl { enabled = true }`; the anonymous policy applies
//! without a token; scaling policies are read with the scaling capability or `list-jobs` with
//! `read-job`, as Nomad's scaling endpoint allows. A list across namespaces (`namespace=*` on
//! jobs, allocations, evaluations, deployments, services, scaling policies — by their target's
//! namespace) runs and then keeps only the items in namespaces the caller may read. An exec
//! websocket without a token header and with `ws_handshake=true` (a browser's) passes with a
//! `drover_api::HandshakeTokenCheck` on it: the exec handler checks the first message's
//! `auth_token` with it before any session starts. Its `guard_node_calls` layer is on every server agent, ACLs on or off: a
//! client node's `/v1/internal/…` calls carry the node's secret ID (the state indexes nodes by
//! it, so a call finds its node without a walk), and a status update may only name allocations
//! placed on that node.
//! `node_meta_http`: `GET|POST /v1/client/metadata` on an agent with a client (Nomad's
//! `NodeMeta.Read`/`Apply`); `proxy::routing` passes a request naming another node (`?node_id=`,
//! or an apply's body `NodeID`) to that node's agent, as for `/v1/client/gc`.
//! `request_body`: the optional JSON bodies of these agent endpoints (empty is the default;
//! strict, or with keys matched without regard to case as Go's decoder).
//! `gc_http`: `PUT /v1/system/gc` and `PUT /v1/system/reconcile/summaries` on a server
//! (`drover_server::gc`; the store recounts each summary) and `/v1/client/gc` on an
//! agent with a client (every terminal allocation collected); `proxy::routing` passes
//! `/v1/client/gc?node_id=<other>` to that node's agent (a client-only agent through its
//! servers). `node_pools_http`: Nomad's node
//! pool endpoints on a server (`/v1/node/pools`, `/v1/node/pool/<name>[/nodes|/jobs]`), reads
//! from the store as blocking queries and writes through the server; `node_pool` policies
//! decide, as Nomad's: a pool's `read`, `write` or `delete`, node read too for its nodes, the
//! list keeping the pools the caller may read and a pool's jobs those in namespaces where it
//! may list jobs.
//! `task_api`: the agent's whole API served on each task's `secrets/api.sock` (bound late: the
//! client restores tasks before the API exists) behind one check of its own — a token that
//! resolves to an ACL token or a workload identity, even with ACLs off (none: 401, one that
//! does not resolve: 403, as Nomad's task API). A server agent resolves it from its keyring and
//! state; a client-only agent through `client_acl`. `identity_http`: `PUT
//! /v1/internal/node/<id>/sign-identities` for remote clients; `acl_resolve_http`: `GET
//! /v1/internal/acl/whoami` and `/v1/internal/acl/bearer-policies` (who a bearer is, what it
//! holds), ACLs on or off.
//! A client-only agent has no server and serves its API over an empty in-memory store: the
//! client endpoints of its own allocations (stats, logs, files, exec) answer; everything else is
//! passed to its servers, which check the caller themselves. `client_acl` resolves a bearer
//! token by asking the servers (Nomad's client `ResolveToken`), keeping a token's identity for
//! the client's `acl { token_ttl }` and its policies for `policy_ttl` (no longer than
//! `role_ttl` for a token with roles, which the servers expand into policies; an older answer stands
//! while no server answers; a refusal is never kept); a workload identity of an allocation this
//! node has stopped (or no longer has) is refused at once, whatever was kept. With ACLs on,
//! its `enforce_on_client` layer checks the requests the agent serves itself against
//! `acl_enforce`'s table (allocations' namespaces from the node's own runners).
//! `leadership`: a server on etcd campaigns (`drover_etcd::election`) and starts as a
//! follower; `run_leader_duties` reloads the store and takes up leader work when elected and
//! drops it when not; `forward_writes` passes a follower's writes (every non-GET `/v1/` call but
//! `/v1/agent/`, `/v1/client/`, `/v1/status/`) to the leader's HTTP address, marked
//! `x-drover-leader-forwarded`; `cluster_status` answers `/v1/status/leader`, `/v1/status/peers`
//! (alive servers) and `/v1/agent/members` (alive/failed, or `left` for a day after
//! `PUT /v1/agent/force-leave` marked a failed server's record; `prune` deletes it, in an etcd
//! transaction that holds only while the server has no live session) from etcd and sets
//! `X-Nomad-KnownLeader`/`X-Nomad-LastContact` on reads; a blocking query (`index` > 0) on a
//! server etcd no longer answers is refused, or ended, with a 503 (its store cannot move, so the
//! query would wait out its whole wait), and the caller asks another server. Such an agent's own
//! client reaches it over HTTP, like any remote client.
//! `operator_http`: `GET|PUT /v1/operator/snapshot` (a snapshot with the keyring's KEK and
//! Nomad's `Digest` header; a restore seals the snapshot's root keys again with this keyring's
//! KEK, replaces the store and rebuilds the leader's work), `/v1/operator/raft/configuration`
//! (the servers, each a voter), `DELETE /v1/operator/raft/peer` (refused; an unknown peer
//! answers Nomad's error) and
//! `/v1/operator/etcd/members`. **Boundary**: wiring, no scheduling or task logic of its own.

pub mod acl_enforce;
pub mod acl_http;
pub mod acl_resolve_http;
mod acl_roles_http;
mod acl_sso_http;
pub mod backend;
pub mod client_acl;
pub mod cluster;
pub mod config;
mod docker_fingerprint;
pub mod gc_http;
pub mod identity_http;
pub mod in_process;
pub mod join_http;
pub mod keyring_http;
pub mod leadership;
pub mod logging;
pub mod mesh_http;
pub mod metrics;
pub mod monitor;
pub mod namespaces_http;
pub mod node_meta_http;
pub mod node_pools_http;
pub mod operator_http;
pub mod pprof_http;
pub mod proxy;
pub mod reload;
mod request_body;
pub mod server_link;
pub mod sso;
pub mod task_api;
pub mod variables_http;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use drover_api::backend::{AgentInfo, Composed};
use drover_client::clock::{SharedClock, SystemClock};
use drover_client::config::ClientConfig;
use drover_client::node::{Client, NodeConfig, NodeResourceSettings};
use drover_client::runner_factory::TaskAllocRunnerFactory;
use drover_client::state_db::StateDb;
use drover_client::taskrunner::driver::DriverCatalog;
use drover_client::taskrunner::drivers::driver_catalog;
use drover_driver::exec::ExecConfig;
use drover_driver::raw_exec::RawExecConfig;
use drover_server::heartbeat::HeartbeatConfig;
use drover_server::keyring::Keyring;
use drover_server::{Server, ServerConfig};
use drover_state::StateStore;
use drover_structs::{
    NodeDiskResources, NodeMemoryResources, NodeReservedCpuResources, NodeReservedNetworkResources,
    NodeReservedResources,
};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use self::backend::{AgentBackend, LocalClient};
pub use self::config::AgentArgs;
use self::config::AgentConfig;
use self::in_process::InProcessServer;
use self::server_link::AgentServerConn;
use drover_client::http_conn::{HttpServerConn, HttpServerConnConfig};

/// Runs the agent until SIGINT or SIGTERM.
pub async fn run(args: AgentArgs) -> anyhow::Result<()> {
    // Before anything else: a signal that arrives while the agent starts is kept, and the
    // agent stops as soon as it has started, rather than dying half-started or missing it.
    let signals = ShutdownSignals::install().context("installing the SIGINT/SIGTERM handlers")?;
    let config = AgentConfig::load(&args)?;
    run_with_config(config, signals, args).await
}

/// SIGINT and SIGTERM, listened to from the agent's first moment: a signal delivered before
/// [`ShutdownSignals::received`] is awaited is remembered by the streams, not lost. SIGHUP too
/// (a reload, never a shutdown): one during start-up is kept and reloads once the agent serves.
struct ShutdownSignals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
    hangup: tokio::signal::unix::Signal,
}

impl ShutdownSignals {
    fn install() -> std::io::Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(ShutdownSignals {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
            hangup: signal(SignalKind::hangup())?,
        })
    }

    /// Whether a signal has arrived already (during start-up), without waiting.
    fn arrived(&mut self) -> bool {
        use std::task::{Context, Poll, Waker};
        let mut context = Context::from_waker(Waker::noop());
        matches!(self.interrupt.poll_recv(&mut context), Poll::Ready(_))
            || matches!(self.terminate.poll_recv(&mut context), Poll::Ready(_))
    }

    /// Waits for the next SIGINT or SIGTERM, reloading the config on each SIGHUP meanwhile.
    async fn received(&mut self, reloader: &reload::Reloader) {
        loop {
            tokio::select! {
                _ = self.interrupt.recv() => return,
                _ = self.terminate.recv() => return,
                _ = self.hangup.recv() => {
                    println!("==> Caught signal: hangup");
                    let reloader = reloader.clone();
                    // The outcome is in the log; the agent runs on either way.
                    let _ = tokio::task::spawn_blocking(move || reloader.reload_logged()).await;
                }
            }
        }
    }
}

/// Where the agent keeps its state: the configured data dir, or a temporary one (dev mode).
enum DataDir {
    Persistent(PathBuf),
    Temporary(tempfile::TempDir),
}

impl DataDir {
    fn path(&self) -> &Path {
        match self {
            DataDir::Persistent(path) => path,
            DataDir::Temporary(dir) => dir.path(),
        }
    }
}

async fn run_with_config(
    config: AgentConfig,
    mut signals: ShutdownSignals,
    args: AgentArgs,
) -> anyhow::Result<()> {
    let log_hub = logging::LogHub::new();
    let stderr_level = logging::init(config.log_level, config.log_json, &log_hub);
    let reloader = reload::Reloader::new(args, stderr_level);
    let data_dir = match &config.data_dir {
        Some(path) => DataDir::Persistent(path.clone()),
        None => DataDir::Temporary(
            tempfile::Builder::new()
                .prefix("drover-dev-")
                .tempdir()
                .context("creating a temporary data dir for dev mode")?,
        ),
    };
    std::fs::create_dir_all(data_dir.path())
        .with_context(|| format!("creating data dir {}", data_dir.path().display()))?;
    // Bind first (cheap), so the client's start-up work, which needs the advertised address,
    // can run on a blocking thread while the server's store opens: both are mostly waiting on
    // fsyncs of freshly created files.
    let listener = TcpListener::bind((config.http_addr, config.http_port))
        .await
        .with_context(|| {
            format!(
                "binding the HTTP API to {}:{}",
                config.http_addr, config.http_port
            )
        })?;
    let http_addr = listener.local_addr().context("reading the bound address")?;
    let advertised = if http_addr.ip().is_unspecified() {
        std::net::SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), http_addr.port())
    } else {
        http_addr
    };
    // Each task's `secrets/api.sock` serves the API built below, once it is built.
    let task_api = task_api::TaskApi::default();
    // Made before the client starts: its task runners count into it from their first task.
    let metrics = Arc::new(metrics::Metrics::new(config.name.clone()));
    let client_preparation = config.client_enabled.then(|| {
        let config = config.clone();
        let data_dir = data_dir.path().to_path_buf();
        let task_api = task_api.clone();
        let task_counters: Arc<dyn drover_client::task_metrics::TaskCounters> = metrics.clone();
        tokio::task::spawn_blocking(move || {
            prepare_client(&config, &data_dir, &advertised, task_api, task_counters)
        })
    });

    // The state store answers the HTTP API's reads. An agent without a server keeps an empty
    // one in memory: its API serves the client's endpoints, and the servers' state is read
    // from a server agent.
    let (state, server, cluster_id, keyring, cluster) = if config.server_enabled {
        let started = start_server(&config, data_dir.path(), &advertised).await?;
        (
            started.state,
            Some(started.server),
            Some(started.cluster_id),
            Some(started.keyring),
            started.cluster,
        )
    } else {
        let state = StateStore::in_memory()
            .await
            .context("opening an empty state store for a client-only agent")?;
        (state, None, None, None, None)
    };

    // A client-only agent's connection to its servers, shared by its client and its token
    // resolver.
    let mut remote_servers: Option<Arc<HttpServerConn>> = None;
    // The client's connection when it reaches servers over HTTP (a client-only agent, or a
    // server of a cluster): its server list is what `/v1/agent/servers` reads and sets.
    let mut client_conn: Option<Arc<HttpServerConn>> = None;
    let client = match client_preparation {
        Some(preparation) => {
            let prepared = preparation
                .await
                .context("preparing the client on a blocking thread")??;
            let conn = match &server {
                // A server of a cluster may not lead: its own client reaches it over HTTP like
                // any other, and it passes the node's writes to the leader.
                Some(_) if cluster.is_some() => {
                    let servers = Arc::new(
                        HttpServerConn::new(HttpServerConnConfig {
                            cluster_id_file: Some(
                                data_dir.path().join("client").join("cluster_id"),
                            ),
                            ..HttpServerConnConfig::new(vec![advertised.to_string()])
                        })
                        .context("configuring the connection to this agent's server")?,
                    );
                    client_conn = Some(servers.clone());
                    AgentServerConn::Remote(servers)
                }
                Some(server) => AgentServerConn::InProcess(InProcessServer {
                    server: server.clone(),
                    keyring: keyring.clone(),
                    clock: Arc::new(drover_server::SystemClock),
                    on_query: Some({
                        let metrics = metrics.clone();
                        Arc::new(move || metrics::count_query(&metrics))
                    }),
                }),
                None => {
                    let servers = Arc::new(
                        HttpServerConn::new(HttpServerConnConfig {
                            cluster_id_file: Some(
                                data_dir.path().join("client").join("cluster_id"),
                            ),
                            ..HttpServerConnConfig::new(config.servers.clone())
                        })
                        .context("configuring the connection to the servers")?,
                    );
                    remote_servers = Some(servers.clone());
                    client_conn = Some(servers.clone());
                    AgentServerConn::Remote(servers)
                }
            };
            Some(start_client(prepared, conn).await?)
        }
        None => None,
    };

    let backend = AgentBackend {
        info: AgentInfo {
            region: config.region.clone(),
            datacenter: config.datacenter.clone(),
            node_name: config.name.clone(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            http_addr: advertised.to_string(),
            server_addr: if config.server_enabled {
                advertised.to_string()
            } else {
                String::new()
            },
            client_servers: match (&client, &server) {
                (None, _) => Vec::new(),
                (Some(_), Some(_)) => vec![advertised.to_string()],
                (Some(_), None) => config.servers.clone(),
            },
            server_enabled: config.server_enabled,
            client_enabled: config.client_enabled,
            node_id: client
                .as_ref()
                .map(|client| client.node_id())
                .unwrap_or_default(),
        },
        server: server.clone(),
        client: client.clone(),
        client_conn,
        own_server_addresses: if config.server_enabled {
            std::iter::once(http_addr.port())
                .chain(config.rpc_port)
                .map(|port| std::net::SocketAddr::new(http_addr.ip(), port))
                .collect()
        } else {
            Vec::new()
        },
        alloc_root: data_dir.path().join("alloc"),
        host_stats: host_stats_collector(data_dir.path(), client.as_deref()),
    };
    let local_node_id = backend.info.node_id.clone();
    let metrics_endpoint = metrics::MetricsEndpoint {
        metrics: metrics.clone(),
        prometheus_enabled: config.telemetry.prometheus_metrics,
    };
    let app = drover_api::app(Arc::new(Composed {
        reads: state.clone(),
        operations: backend,
    }));
    // A server answers client endpoints for allocations on other nodes by passing them on; a
    // client-only agent passes everything but its own endpoints to its servers.
    let forwarding = if server.is_some() {
        Forwarding::ToNodes(proxy::ForwardContext::new(
            state.clone(),
            local_node_id.clone(),
        ))
    } else {
        Forwarding::ToServers(
            proxy::ServersContext::new(&config.servers, local_node_id.clone())
                .context("preparing the forwarding of requests to the servers")?,
        )
    };
    // Under the forwarding layer: `/v1/client/gc?node_id=` and `/v1/client/metadata` may name
    // another node.
    let app = match &client {
        Some(client) => app
            .merge(gc_http::client_router(client.clone()))
            .merge(node_meta_http::router(client.clone())),
        None => app,
    };
    let app = served_router(app, forwarding);
    // Variable locks' timers, on a server agent: started for the locks the store holds, and
    // again after a snapshot's restore.
    let variable_locks = keyring.as_ref().map(|_| {
        let locks = drover_server::variable_locks::VariableLocks::new(state.clone());
        locks.restore();
        locks
    });
    // The keyring's and variables' endpoints answer on a server agent (a client-only agent
    // forwards them).
    let app = match (&keyring, &variable_locks) {
        (Some(keyring), Some(locks)) => {
            let clock: Arc<dyn drover_server::Clock> = Arc::new(drover_server::SystemClock);
            app.merge(keyring_http::router(keyring_http::KeyringEndpoints {
                keyring: keyring.clone(),
                state: state.clone(),
                oidc_issuer: config.oidc_issuer.clone(),
                clock: clock.clone(),
            }))
            .merge(variables_http::router(variables_http::VariablesEndpoints {
                keyring: keyring.clone(),
                state: state.clone(),
                clock: clock.clone(),
                locks: locks.clone(),
                acl_enabled: config.acl.enabled,
            }))
            .merge({
                let endpoints = acl_http::AclEndpoints {
                    enabled: config.acl.enabled,
                    token_min_expiration_ttl: config.acl.token_min_expiration_ttl.into(),
                    token_max_expiration_ttl: config.acl.token_max_expiration_ttl.into(),
                    keyring: keyring.clone(),
                    state: state.clone(),
                    clock: clock.clone(),
                    server_dir: data_dir.path().join("server"),
                };
                acl_roles_http::router(endpoints.clone())
                    .merge(acl_sso_http::router(endpoints.clone()))
                    .merge(acl_http::router(endpoints))
            })
            .merge(namespaces_http::router(
                namespaces_http::NamespaceEndpoints {
                    acl_enabled: config.acl.enabled,
                    keyring: keyring.clone(),
                    state: state.clone(),
                    clock: clock.clone(),
                    region: config.region.clone(),
                },
            ))
            .merge(identity_http::router(identity_http::IdentityEndpoints {
                keyring: keyring.clone(),
                state: state.clone(),
                clock: clock.clone(),
            }))
            .merge(mesh_http::router(mesh_http::MeshEndpoints {
                keyring: keyring.clone(),
                state: state.clone(),
                clock: clock.clone(),
                trust_domain: drover_mesh::spiffe::trust_domain(
                    cluster_id.as_deref().unwrap_or_default(),
                ),
                leaf_ttl: config.mesh_leaf_cert_ttl,
                default_allow: config.mesh_default_allow,
            }))
            .merge(acl_resolve_http::router(
                acl_resolve_http::ResolveEndpoints {
                    keyring: keyring.clone(),
                    state: state.clone(),
                    clock,
                },
            ))
        }
        _ => app,
    };
    let app = match &server {
        Some(server) => {
            app.merge(gc_http::server_router(server.clone()))
                .merge(node_pools_http::router(
                    node_pools_http::NodePoolEndpoints {
                        server: server.clone(),
                        state: state.clone(),
                    },
                ))
        }
        None => app,
    };

    // Snapshots and the cluster's peers, on a server agent.
    let app = match (&server, &keyring, &variable_locks) {
        (Some(server), Some(keyring), Some(locks)) => {
            app.merge(operator_http::router(operator_http::OperatorEndpoints {
                state: state.clone(),
                keyring: keyring.clone(),
                variable_locks: locks.clone(),
                server: server.clone(),
                cluster: cluster.clone(),
                own: leadership::ServerRecord {
                    name: config.name.clone(),
                    region: config.region.clone(),
                    datacenter: config.datacenter.clone(),
                    http_addr: advertised.to_string(),
                    version: env!("CARGO_PKG_VERSION").to_owned(),
                    left_at: None,
                },
                clock: Arc::new(drover_server::SystemClock),
            }))
        }
        _ => app,
    };

    // The agent's own endpoints answer here on every agent, never forwarded.
    let app = app.merge(join_http::router(join_http::JoinEndpoint {
        server: cluster_id.as_ref().map(|cluster_id| join_http::OwnServer {
            region: config.region.clone(),
            cluster_id: cluster_id.clone(),
        }),
        http: proxy::ProxyClient::default(),
    }));
    let app = app.merge(reload::router(reloader.clone()));
    let app = app.merge(pprof_http::router(pprof_http::PprofEndpoint {
        acl_enabled: config.acl.enabled,
        enable_debug: config.enable_debug,
        server_name: server
            .is_some()
            .then(|| format!("{}.{}", config.name, config.region)),
        node_id: Some(local_node_id.clone()).filter(|id| !id.is_empty()),
    }));
    let app = app.merge(
        axum::Router::new()
            .route("/v1/metrics", axum::routing::get(metrics::metrics_handler))
            .with_state(metrics_endpoint)
            .merge(
                axum::Router::new()
                    .route(
                        "/v1/agent/monitor",
                        axum::routing::get(monitor::monitor_handler),
                    )
                    .with_state(log_hub),
            ),
    );

    // A server agent times each request its Nomad endpoint would serve
    // (`nomad.nomad.job.register`, …); the layers below run first, so a refused request is
    // not timed, as Nomad's endpoints do not time what their ACL check refuses.
    let app = if server.is_some() {
        app.layer(axum::middleware::from_fn_with_state(
            metrics.clone(),
            metrics::measure_endpoints,
        ))
    } else {
        app
    };

    // A client node's calls to a server carry the node's secret ID, ACLs on or off.
    let app = if server.is_some() {
        app.layer(axum::middleware::from_fn_with_state(
            state.clone(),
            acl_enforce::guard_node_calls,
        ))
    } else {
        app
    };
    // A server of a cluster answers the cluster's status from etcd.
    let app = match &cluster {
        Some(cluster) => app.layer(axum::middleware::from_fn_with_state(
            cluster.clone(),
            leadership::cluster_status,
        )),
        None => app,
    };

    // With ACLs on, every request of a server agent is checked in one place before it runs.
    let app = match (&keyring, config.acl.enabled) {
        (Some(keyring), true) => app.layer(axum::middleware::from_fn_with_state(
            acl_enforce::AclEnforcer {
                keyring: keyring.clone(),
                state: state.clone(),
                clock: Arc::new(drover_server::SystemClock),
            },
            acl_enforce::enforce,
        )),
        _ => app,
    };

    // A follower passes writes to the leader before anything else looks at them.
    let app = match &cluster {
        Some(cluster) => app.layer(axum::middleware::from_fn_with_state(
            cluster.clone(),
            leadership::forward_writes,
        )),
        None => app,
    };

    // Every answer of a server agent names its cluster (clients follow only their own).
    let app = match &cluster_id {
        Some(cluster_id) => {
            let value = axum::http::HeaderValue::from_str(cluster_id)
                .context("the cluster ID is not a valid header value")?;
            app.layer(axum::middleware::map_response_with_state(
                value,
                cluster::add_cluster_header,
            ))
        }
        None => app,
    };

    // A client-only agent resolves tokens by asking its servers (keeping their answers for
    // `acl { token_ttl, policy_ttl, role_ttl }`); with ACLs on, its own endpoints are checked
    // with them.
    let client_resolver = match (&remote_servers, &client) {
        (Some(servers), Some(client)) => Some(client_acl::ClientAclResolver::new(
            servers.clone(),
            client.clone(),
            Arc::new(drover_server::SystemClock),
            client_acl::CacheLifetimes {
                token: config.acl.token_ttl,
                policy: config.acl.policy_ttl,
                role: config.acl.role_ttl,
            },
        )),
        _ => None,
    };
    let app = match &client_resolver {
        Some(resolver) if config.acl.enabled => app.layer(axum::middleware::from_fn_with_state(
            client_acl::ClientEnforcer {
                resolver: resolver.clone(),
            },
            client_acl::enforce_on_client,
        )),
        _ => app,
    };

    // Outermost, as Go's router: a path that is not canonical is redirected before anything
    // else reads it.
    let app = app.layer(axum::middleware::from_fn(
        drover_api::clean_path::redirect_unclean_paths,
    ));

    let task_api_auth = match (&keyring, &client_resolver) {
        (Some(keyring), _) => Some(task_api::TaskApiAuth::Server {
            keyring: keyring.clone(),
            state: state.clone(),
        }),
        (None, Some(resolver)) => Some(task_api::TaskApiAuth::Client(resolver.clone())),
        // An agent without a server or a client has no config to get here.
        (None, None) => None,
    };
    // The sidecars report their counters to the agent that runs them (over their
    // allocation's socket); the route checks their identity itself.
    let app = match (&task_api_auth, &client) {
        (Some(auth), Some(_)) => app.merge(mesh_http::stats_router(mesh_http::StatsEndpoint {
            auth: auth.clone(),
            metrics: metrics.clone(),
            sidecars: Arc::default(),
        })),
        _ => app,
    };
    if let Some(auth) = task_api_auth {
        task_api.set_app(app.clone(), auth);
    }
    // The web UI's files (`/`, `/ui/…`) around everything: public, never forwarded.
    let app = app.layer(axum::middleware::from_fn_with_state(
        config.ui.clone(),
        drover_ui::serve,
    ));

    let shutdown = CancellationToken::new();
    let collector = metrics::Collector {
        metrics,
        telemetry: config.telemetry,
        client: client.clone(),
        server: server.clone(),
        host_stats: drover_client::host_stats::HostStatsCollector::new(data_dir.path()),
        job_summaries_seen: metrics::JobSummariesSeen::default(),
    };
    // One round before the API serves: `/v1/metrics` never answers empty.
    collector.collect_once().await;
    let collecting = tokio::spawn(metrics::collect(collector, shutdown.clone()));
    let serving = {
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            // Small frames (exec output, event stream lines, log frames) go out at once
            // rather than waiting on the peer's delayed ACK.
            let listener = axum::serve::ListenerExt::tap_io(listener, |stream| {
                if let Err(error) = stream.set_nodelay(true) {
                    tracing::debug!(%error, "cannot set TCP_NODELAY on an API connection");
                }
            });
            axum::serve(listener, app)
                .with_graceful_shutdown(async move { shutdown.cancelled().await })
                .await
        })
    };
    // Once started (the node registered, for a client), the code and read-only data that only
    // the start-up ran need not stay mapped: most of the idle agent's memory was that
    // (drover_isolate::exe_pages).
    tokio::spawn({
        let client = client.clone();
        async move {
            if let Some(client) = client {
                client.wait_registered().await;
            }
            match tokio::task::spawn_blocking(
                drover_isolate::exe_pages::release_unmodified_exe_mappings,
            )
            .await
            {
                Ok(Ok(bytes)) => {
                    tracing::debug!(
                        kib = bytes / 1024,
                        "released the start-up's executable pages"
                    )
                }
                Ok(Err(error)) => {
                    tracing::debug!(%error, "could not release the start-up's executable pages")
                }
                Err(_) => {}
            }
        }
    });
    println!(
        "==> drover agent started (region {}, datacenter {}, client {}, server {}); HTTP API listening on http://{advertised}",
        config.region, config.datacenter, config.client_enabled, config.server_enabled
    );
    if let DataDir::Persistent(path) = &data_dir {
        println!("    data dir: {}", path.display());
    }
    if client.is_some() && server.is_none() {
        println!("    servers: {}", config.servers.join(", "));
    }

    if signals.arrived() {
        println!("==> a signal arrived while the agent was starting; shutting down");
    } else {
        signals.received(&reloader).await;
    }
    println!("==> shutting down");
    shutdown.cancel();
    let _ = collecting.await;
    if let Some(client) = &client {
        match &data_dir {
            // Nothing would ever come back for these tasks: stop them with the agent.
            DataDir::Temporary(_) => client.shutdown_and_stop_all().await,
            // The next agent on this data dir re-attaches to the running tasks.
            DataDir::Persistent(_) => client.shutdown().await,
        }
    }
    if let Some(cluster) = &cluster {
        cluster.leave();
    }
    if let Some(server) = &server {
        server.shutdown().await;
    }
    state.close().await;
    match tokio::time::timeout(std::time::Duration::from_secs(5), serving).await {
        Ok(Ok(Err(error))) => tracing::warn!(%error, "HTTP server stopped with an error"),
        Ok(_) => {}
        Err(_) => tracing::warn!("HTTP connections still open after 5s; leaving them"),
    }
    Ok(())
}

/// A started server and what the agent wires around it.
struct StartedServer {
    state: StateStore,
    server: Server,
    cluster_id: String,
    keyring: Arc<Keyring>,
    /// Its place in a cluster of servers on etcd (`None`: the only server, on its data dir).
    cluster: Option<Arc<leadership::ClusterNode>>,
}

fn server_config(config: &AgentConfig) -> ServerConfig {
    ServerConfig {
        region: config.region.clone(),
        datacenter: config.datacenter.clone(),
        num_schedulers: config.num_schedulers as usize,
        heartbeat: HeartbeatConfig {
            min_ttl: config.min_heartbeat_ttl,
            grace: config.heartbeat_grace,
            ..HeartbeatConfig::default()
        },
        gc: config.gc.clone(),
        job_max_source_size: config.job_max_source_size,
        job_max_count: config.job_max_count,
        ..ServerConfig::default()
    }
}

/// Opens the server's state (in `<data_dir>/server`, or on etcd) and starts the server on it.
async fn start_server(
    config: &AgentConfig,
    data_dir: &Path,
    advertised: &std::net::SocketAddr,
) -> anyhow::Result<StartedServer> {
    let clock: Arc<dyn drover_server::Clock> = Arc::new(drover_server::SystemClock);
    let server_dir = data_dir.join("server");
    std::fs::create_dir_all(&server_dir)
        .with_context(|| format!("creating {}", server_dir.display()))?;
    if let Some(etcd) = &config.etcd {
        return start_cluster_server(config, etcd, advertised, clock).await;
    }
    let cluster_id =
        cluster::load_or_create(&server_dir).context("the server's cluster identity")?;
    let state = StateStore::open(&server_dir).await.with_context(|| {
        format!(
            "opening the server state in {} (if the file is damaged, move it aside to start \
             with an empty state)",
            server_dir.display()
        )
    })?;
    let server = Server::start(server_config(config), state.clone(), clock.clone());
    let keyring = Keyring::open(&server_dir, state.clone(), clock)
        .await
        .with_context(|| format!("opening the keyring in {}", server_dir.display()))?
        .with_issuer(config.oidc_issuer.clone());
    Ok(StartedServer {
        state,
        server,
        cluster_id,
        keyring: Arc::new(keyring),
        cluster: None,
    })
}

/// A server of a cluster on etcd: its state follows the prefix, its cluster ID and keyring KEK
/// are the cluster's (kept in etcd, made by the first server), and it campaigns for the
/// leadership; it starts as a follower and takes up leader work when elected.
async fn start_cluster_server(
    config: &AgentConfig,
    etcd: &config::EtcdSettings,
    advertised: &std::net::SocketAddr,
    clock: Arc<dyn drover_server::Clock>,
) -> anyhow::Result<StartedServer> {
    let settings = drover_etcd::EtcdConfig {
        tls: etcd.tls.clone(),
        credentials: etcd.credentials.clone(),
        ..drover_etcd::EtcdConfig::new(etcd.endpoints.clone(), etcd.prefix.clone())
    };
    let kv = Arc::new(
        drover_etcd::EtcdKv::connect(&settings)
            .await
            .with_context(|| format!("connecting to etcd at {}", etcd.endpoints.join(",")))?,
    );
    let cluster_id = kv
        .shared_value("cluster_id", || {
            uuid::Uuid::new_v4().to_string().into_bytes()
        })
        .await
        .context("reading the cluster's identity from etcd")?;
    let cluster_id = String::from_utf8(cluster_id)
        .ok()
        .filter(|id| uuid::Uuid::parse_str(id).is_ok())
        .context("the cluster identity in etcd is not a UUID")?;
    let kek = kv
        .shared_value("keyring_kek", || {
            drover_server::keyring::new_kek_text().into_bytes()
        })
        .await
        .context("reading the cluster's keyring key from etcd")?;
    let state = StateStore::open_with_kv(kv.clone(), drover_state::EngineOptions::default())
        .await
        .with_context(|| {
            format!(
                "opening the server state in etcd at {} (prefix {:?})",
                etcd.endpoints.join(","),
                etcd.prefix
            )
        })?;
    // The store is opened before the election starts: opening a fresh prefix writes its
    // schema marker (guarded by the prefix's revision), which a follower's fenced handle would
    // refuse. From the election on, the store's writes are fenced: a follower writes nothing.
    let cluster = leadership::ClusterNode::join(
        kv.clone(),
        leadership::ServerRecord {
            name: config.name.clone(),
            region: config.region.clone(),
            datacenter: config.datacenter.clone(),
            http_addr: advertised.to_string(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            left_at: None,
        },
    )
    .await?;
    // The task ends by itself when the store is closed.
    drop(drover_etcd::follow(&kv, state.clone()));
    cluster.set_store(state.clone());
    let server = Server::start_follower(server_config(config), state.clone(), clock.clone());
    let keyring = Arc::new(
        Keyring::open_shared(&String::from_utf8_lossy(&kek), state.clone(), clock)
            .context("opening the cluster's keyring")?
            .with_issuer(config.oidc_issuer.clone()),
    );
    // The task follows the election for the agent's life.
    drop(leadership::run_leader_duties(
        cluster.clone(),
        server.clone(),
        state.clone(),
        keyring.clone(),
    ));
    Ok(StartedServer {
        state,
        server,
        cluster_id,
        keyring,
        cluster: Some(cluster),
    })
}

/// What the client needs before it can start, built off the async runtime: its config, its
/// state db (opened, or created) and its node record (identity and fingerprint).
struct PreparedClient {
    factory: TaskAllocRunnerFactory,
    docker: Arc<drover_docker::DockerDriver>,
    node_config: NodeConfig,
    node: drover_structs::Node,
}

fn prepare_client(
    config: &AgentConfig,
    data_dir: &Path,
    http_addr: &std::net::SocketAddr,
    task_api: task_api::TaskApi,
    task_counters: Arc<dyn drover_client::task_metrics::TaskCounters>,
) -> anyhow::Result<PreparedClient> {
    let clock: SharedClock = Arc::new(SystemClock);
    let mut client_config = ClientConfig::new(data_dir);
    client_config.max_kill_timeout = config.max_kill_timeout;
    client_config.artifact = config.artifact.clone();
    client_config.template = config.template;
    client_config.host_volumes = config.host_volumes.clone();
    client_config.network = Arc::new(config.network.clone());
    client_config.apply_options(&config.options);
    let client_config = Arc::new(client_config);
    let state_db = Arc::new(
        StateDb::open(&client_config.state_db_path()).with_context(|| {
            format!(
                "opening the client state {} (if the file is damaged, move it aside; tasks it \
                 tracked will then not be re-attached)",
                client_config.state_db_path().display()
            )
        })?,
    );
    let docker = Arc::new(drover_docker::DockerDriver::new(config.docker.clone()));
    let factory = TaskAllocRunnerFactory {
        config: client_config.clone(),
        clock: clock.clone(),
        state_db,
        drivers: drivers_for(config, docker.clone())?,
        region: config.region.clone(),
        jitter_seed: rand_seed(),
        task_api: Some(Arc::new(task_api)),
        task_counters: Some(task_counters),
    };
    let mut node_config = NodeConfig::new(data_dir, config.name.clone(), clock);
    node_config.ephemeral = config.data_dir.is_none();
    node_config.datacenter = config.datacenter.clone();
    node_config.node_pool = config.node_pool.clone();
    node_config.node_class = config.node_class.clone();
    node_config.default_ineligible = config.default_ineligible;
    node_config.meta = config.meta.clone();
    node_config.http_addr = http_addr.to_string();
    node_config.agent_version = env!("CARGO_PKG_VERSION").to_owned();
    node_config.resources = node_resource_settings(config);
    node_config.gc_interval = config.client_gc.interval;
    node_config.gc_disk_usage_threshold = config.client_gc.disk_usage_threshold;
    node_config.gc_inode_usage_threshold = config.client_gc.inode_usage_threshold;
    node_config.gc_max_allocs = config.client_gc.max_allocs;
    node_config.gc_parallel_destroys = config.client_gc.parallel_destroys;
    let mut node = drover_client::node::build_node(&node_config).context("starting the client")?;
    node.host_volumes = config.host_volumes.clone();
    // Runs on a blocking thread of the runtime: the engine probe is awaited here, once.
    let docker_fingerprint = tokio::runtime::Handle::current().block_on(docker.fingerprint());
    docker_fingerprint::apply(
        &mut node,
        docker_fingerprint,
        node_config.clock.now_unix_nanos(),
    );
    docker.set_node(&node.id, &node.name);
    Ok(PreparedClient {
        factory,
        docker,
        node_config,
        node,
    })
}

async fn start_client(
    prepared: PreparedClient,
    conn: AgentServerConn,
) -> anyhow::Result<Arc<LocalClient>> {
    let docker_healthy = docker_fingerprint::healthy(&prepared.node);
    let docker = prepared.docker;
    let clock = prepared.factory.clock.clone();
    // The node's artifact cache stays within its cache_max_age / cache_max_size.
    tokio::spawn(drover_client::artifact::cache::run(
        prepared.factory.config.artifact_cache_dir(),
        prepared.factory.config.artifact.clone(),
        prepared.factory.clock.clone(),
    ));
    let client = Client::start_with_node(
        prepared.node_config,
        prepared.node,
        Arc::new(conn),
        prepared.factory,
    )
    .await
    .context("starting the client")?;
    if docker_healthy {
        // Containers of allocations this client no longer has (their state went with an
        // earlier data dir's GC, or their runner was gone) are removed, as Nomad's client does.
        // An engine found later has them removed when it is found.
        docker_fingerprint::remove_orphans(Arc::clone(&docker), Arc::clone(&client));
    }
    docker.spawn_dangling_reconciler();
    docker_fingerprint::spawn_refresh(docker, &client, clock, drover_docker::FINGERPRINT_PERIOD);
    Ok(client)
}

/// The client config's resource settings, as the node applies them over its fingerprint.
fn node_resource_settings(config: &AgentConfig) -> NodeResourceSettings {
    let megabytes = |value: u64| i64::try_from(value).unwrap_or(i64::MAX);
    NodeResourceSettings {
        cpu_total_compute: config.cpu_total_compute.map(megabytes),
        memory_total_mb: config.memory_total_mb.map(megabytes),
        reservable_cores: config.reservable_cores.clone(),
        reserved: NodeReservedResources {
            cpu: NodeReservedCpuResources {
                cpu_shares: megabytes(config.reserved_cpu),
                reserved_cpu_cores: config.reserved_cores.clone(),
            },
            memory: NodeMemoryResources {
                memory_mb: megabytes(config.reserved_memory_mb),
            },
            disk: NodeDiskResources {
                disk_mb: megabytes(config.reserved_disk_mb),
            },
            networks: NodeReservedNetworkResources {
                reserved_host_ports: config.reserved_ports.clone(),
            },
        },
    }
}

fn rand_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_nanos() as u64)
        .unwrap_or(0)
        ^ u64::from(std::process::id())
}

/// The drivers this client offers: `raw_exec` (when enabled) and `exec` (configured by the
/// client's `chroot_env` and the exec plugin's `allow_caps`), each task under its own shim, and
/// `docker` (the given driver, configured by `plugin "docker"`).
fn drivers_for(
    config: &AgentConfig,
    docker: Arc<drover_docker::DockerDriver>,
) -> anyhow::Result<Arc<dyn DriverCatalog>> {
    let raw_exec = RawExecConfig {
        denied_envvars: config.raw_exec_denied_envvars.clone(),
        ..RawExecConfig::default()
    };
    let mut exec = ExecConfig {
        chroot_env: config.chroot_env.clone(),
        ..ExecConfig::default()
    };
    if !drover_driver::exec::chroot_env_is_valid(&exec.chroot_env) {
        anyhow::bail!("client chroot_env: every source and destination must be an absolute path");
    }
    if let Some(allow_caps) = &config.exec_allow_caps {
        exec.allow_caps = allow_caps.clone();
    }
    let catalog =
        drover_client::taskrunner::drivers::with_docker(driver_catalog(raw_exec, exec), docker);
    if !config.raw_exec_enabled {
        anyhow::bail!(
            "plugin \"raw_exec\" is disabled and this client has no other driver; enable it or disable the client"
        );
    }
    Ok(Arc::new(catalog))
}

/// The collector of `/v1/client/stats`, told the node's CPU and storage device when a client
/// runs here.
fn host_stats_collector(
    data_dir: &std::path::Path,
    client: Option<&LocalClient>,
) -> drover_client::host_stats::HostStatsCollector {
    let collector = drover_client::host_stats::HostStatsCollector::new(data_dir);
    let Some(client) = client else {
        return collector;
    };
    let node = client.node();
    let cpu_total_mhz = node
        .node_resources
        .as_ref()
        .map_or(0, |resources| resources.cpu.cpu_shares);
    let device = node
        .attributes
        .get("unique.storage.volume")
        .cloned()
        .unwrap_or_default();
    collector
        .with_cpu_total_mhz(cpu_total_mhz)
        .with_storage_device(device)
}

/// Where requests the agent does not answer itself go.
enum Forwarding {
    /// A server: client endpoints of allocations on other nodes go to those nodes.
    ToNodes(Arc<proxy::ForwardContext>),
    /// A client-only agent: everything but its own endpoints goes to its servers.
    ToServers(Arc<proxy::ServersContext>),
}

/// The API as served: the forwarding layer around the routes, and around both the one limit
/// on request bodies, so a forwarded request is measured exactly as a direct one.
fn served_router(app: axum::Router, forwarding: Forwarding) -> axum::Router {
    let app = match forwarding {
        Forwarding::ToNodes(context) => app.layer(axum::middleware::from_fn_with_state(
            context,
            proxy::forward_client_requests,
        )),
        Forwarding::ToServers(context) => app.layer(axum::middleware::from_fn_with_state(
            context,
            proxy::forward_to_servers,
        )),
    };
    app.layer(axum::middleware::from_fn(drover_api::limit_request_body))
}

#[cfg(test)]
#[allow(clippy::expect_used, clippy::unwrap_used)] // a failed expectation is a failed test
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use axum::body::{Body, Bytes};
    use axum::http::{Request, StatusCode};
    use tower::ServiceExt;

    use super::*;

    /// A client-only agent in front of a stand-in server that records the body sizes it got.
    async fn client_agent_before_a_server() -> (axum::Router, Arc<AtomicUsize>) {
        let received = Arc::new(AtomicUsize::new(0));
        let recorder = Arc::clone(&received);
        let server = axum::Router::new().route(
            "/v1/jobs",
            axum::routing::put(move |body: Bytes| async move {
                recorder.store(body.len(), Ordering::SeqCst);
                "registered"
            })
            .layer(axum::extract::DefaultBodyLimit::disable()),
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move { axum::serve(listener, server).await });
        let local = axum::Router::new();
        let servers = proxy::ServersContext::new(&[address], "local".to_owned()).unwrap();
        (
            served_router(local, Forwarding::ToServers(servers)),
            received,
        )
    }

    async fn put_job(router: &axum::Router, size: usize) -> (StatusCode, String) {
        let request = Request::put("/v1/jobs")
            .header("content-length", size)
            .body(Body::from(vec![b'{'; size]))
            .unwrap();
        let response = router.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    #[tokio::test]
    async fn a_forwarded_body_meets_the_same_limit_as_a_direct_one() {
        let (router, received) = client_agent_before_a_server().await;
        let (status, text) = put_job(&router, 3 * 1024 * 1024).await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{text}");
        assert!(text.contains("2097152 bytes"), "{text}");
        assert_eq!(
            received.load(Ordering::SeqCst),
            0,
            "the server saw the body"
        );

        let under = drover_api::MAX_REQUEST_BODY - 1;
        let (status, text) = put_job(&router, under).await;
        assert_eq!((status, text.as_str()), (StatusCode::OK, "registered"));
        assert_eq!(received.load(Ordering::SeqCst), under);
    }
}
