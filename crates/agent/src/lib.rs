//! `drover agent`: one process that is server (state, scheduler, plan applier), client (node
//! agent running tasks), or both, serving Nomad's HTTP API. A client without a local server
//! reaches its servers over their HTTP API (see [`server_link`]).
//!
//! This crate owns the agent's flags and configuration and wires the library crates together;
//! the work itself lives in those crates.

pub mod backend;
pub mod config;
pub mod exec;
pub mod in_process;
pub mod proxy;
pub mod server_link;

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
    let config = AgentConfig::load(&args)?;
    run_with_config(config).await
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

async fn run_with_config(config: AgentConfig) -> anyhow::Result<()> {
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
    let client_preparation = config.client_enabled.then(|| {
        let config = config.clone();
        let data_dir = data_dir.path().to_path_buf();
        tokio::task::spawn_blocking(move || prepare_client(&config, &data_dir, &advertised))
    });

    // The state store answers the HTTP API's reads. An agent without a server keeps an empty
    // one in memory: its API serves the client's endpoints, and the servers' state is read
    // from a server agent.
    let (state, server) = if config.server_enabled {
        let (state, server) = start_server(&config, data_dir.path()).await?;
        (state, Some(server))
    } else {
        let state = StateStore::in_memory()
            .await
            .context("opening an empty state store for a client-only agent")?;
        (state, None)
    };

    let client = match client_preparation {
        Some(preparation) => {
            let prepared = preparation
                .await
                .context("preparing the client on a blocking thread")??;
            let conn = match &server {
                Some(server) => AgentServerConn::InProcess(InProcessServer(server.clone())),
                None => AgentServerConn::Remote(
                    HttpServerConn::new(HttpServerConnConfig::new(config.servers.clone()))
                        .context("configuring the connection to the servers")?,
                ),
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
            server_addr: format!("{}:4647", advertised.ip()),
            server_enabled: config.server_enabled,
            client_enabled: config.client_enabled,
            node_id: client
                .as_ref()
                .map(|client| client.node_id())
                .unwrap_or_default(),
        },
        server: server.clone(),
        client: client.clone(),
        alloc_root: data_dir.path().join("alloc"),
        host_stats: drover_client::host_stats::HostStatsCollector::new(data_dir.path()),
    };
    let local_node_id = backend.info.node_id.clone();
    let app = drover_api::app(Arc::new(Composed {
        reads: state.clone(),
        operations: backend,
    }));
    // A server answers client endpoints for allocations on other nodes by passing them on; a
    // client-only agent passes everything but its own endpoints to its servers.
    let app = if server.is_some() {
        let forwarding = proxy::ForwardContext::new(state.clone(), local_node_id)
            .context("preparing the forwarding of client requests")?;
        app.layer(axum::middleware::from_fn_with_state(
            forwarding,
            proxy::forward_client_requests,
        ))
    } else {
        let servers = proxy::ServersContext::new(&config.servers)
            .context("preparing the forwarding of requests to the servers")?;
        app.layer(axum::middleware::from_fn_with_state(
            servers,
            proxy::forward_to_servers,
        ))
    };

    let shutdown = CancellationToken::new();
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

    wait_for_signal().await;
    println!("==> shutting down");
    shutdown.cancel();
    if let Some(client) = &client {
        match &data_dir {
            // Nothing would ever come back for these tasks: stop them with the agent.
            DataDir::Temporary(_) => client.shutdown_and_stop_all().await,
            // The next agent on this data dir re-attaches to the running tasks.
            DataDir::Persistent(_) => client.shutdown().await,
        }
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

/// Opens the server's state in `<data_dir>/server` and starts the server on it.
async fn start_server(
    config: &AgentConfig,
    data_dir: &Path,
) -> anyhow::Result<(StateStore, Server)> {
    let clock: Arc<dyn drover_server::Clock> = Arc::new(drover_server::SystemClock);
    let server_dir = data_dir.join("server");
    std::fs::create_dir_all(&server_dir)
        .with_context(|| format!("creating {}", server_dir.display()))?;
    let state = StateStore::open(&server_dir).await.with_context(|| {
        format!(
            "opening the server state in {} (if the file is damaged, move it aside to start \
             with an empty state)",
            server_dir.display()
        )
    })?;
    let server = Server::start(
        ServerConfig {
            region: config.region.clone(),
            datacenter: config.datacenter.clone(),
            num_schedulers: config.num_schedulers as usize,
            heartbeat: HeartbeatConfig {
                min_ttl: config.min_heartbeat_ttl,
                grace: config.heartbeat_grace,
                ..HeartbeatConfig::default()
            },
            ..ServerConfig::default()
        },
        state.clone(),
        clock,
    );
    Ok((state, server))
}

/// What the client needs before it can start, built off the async runtime: its config, its
/// state db (opened, or created) and its node record (identity and fingerprint).
struct PreparedClient {
    factory: TaskAllocRunnerFactory,
    node_config: NodeConfig,
    node: drover_structs::Node,
}

fn prepare_client(
    config: &AgentConfig,
    data_dir: &Path,
    http_addr: &std::net::SocketAddr,
) -> anyhow::Result<PreparedClient> {
    let clock: SharedClock = Arc::new(SystemClock);
    let mut client_config = ClientConfig::new(data_dir);
    client_config.max_kill_timeout = config.max_kill_timeout;
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
    let factory = TaskAllocRunnerFactory {
        config: client_config.clone(),
        clock: clock.clone(),
        state_db,
        drivers: drivers_for(config)?,
        region: config.region.clone(),
        jitter_seed: rand_seed(),
    };
    let mut node_config = NodeConfig::new(data_dir, config.name.clone(), clock);
    node_config.ephemeral = config.data_dir.is_none();
    node_config.datacenter = config.datacenter.clone();
    node_config.node_pool = config.node_pool.clone();
    node_config.node_class = config.node_class.clone();
    node_config.meta = config.meta.clone();
    node_config.http_addr = http_addr.to_string();
    node_config.agent_version = env!("CARGO_PKG_VERSION").to_owned();
    node_config.resources = node_resource_settings(config);
    let node = drover_client::node::build_node(&node_config).context("starting the client")?;
    Ok(PreparedClient {
        factory,
        node_config,
        node,
    })
}

async fn start_client(
    prepared: PreparedClient,
    conn: AgentServerConn,
) -> anyhow::Result<Arc<LocalClient>> {
    let client = Client::start_with_node(
        prepared.node_config,
        prepared.node,
        Arc::new(conn),
        prepared.factory,
    )
    .await
    .context("starting the client")?;
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

async fn wait_for_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut stream) => {
                stream.recv().await;
            }
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminate => {}
    }
}

/// The drivers this client offers: `raw_exec` (when enabled) and `exec` (configured by the
/// client's `chroot_env` and the exec plugin's `allow_caps`), each task under its own shim.
fn drivers_for(config: &AgentConfig) -> anyhow::Result<Arc<dyn DriverCatalog>> {
    let raw_exec = RawExecConfig::default();
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
    let catalog = driver_catalog(raw_exec, exec);
    if !config.raw_exec_enabled {
        anyhow::bail!(
            "plugin \"raw_exec\" is disabled and this client has no other driver; enable it or disable the client"
        );
    }
    Ok(Arc::new(catalog))
}
