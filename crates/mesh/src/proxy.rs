//! The Connect sidecar proxy (`drover connect-proxy -config <path>`): L4, TLS 1.3 with mesh
//! certificates on both sides.
//!
//! ```text
//!  downstream sidecar ══ mTLS ══► public_listener ─ intentions ─► local_service (TCP)
//!  the task ─ TCP ─► upstream listener ══ mTLS ══► a `<destination>-sidecar-proxy` instance
//! ```
//!
//! - **Certificates**: the roots and this service's leaf come from the agent
//!   (`/v1/agent/connect/ca/…`). The leaf is fetched again halfway through its remaining
//!   life, and at once when the roots change (a rotated keyring signs with a new root); the
//!   roots are read every [`ROOTS_POLL`]. New TLS configs serve new connections; open ones
//!   are never dropped for it.
//! - **Inbound**: a client certificate chained to the roots is required; its SPIFFE ID must
//!   be of the mesh's trust domain, and the intentions (followed by a blocking query, so a
//!   change applies to the next connection) must allow its service to reach this one.
//! - **Outbound**: each upstream's instances follow the catalog
//!   (`/v1/service/<destination>-sidecar-proxy`, a blocking query): a new connection goes to
//!   the next instance round-robin; an instance that just failed to answer is passed over
//!   for [`FAILED_BACKOFF`] (the catalog drops a stopped allocation's registration, so a
//!   stopped instance gets no new connection). An instance registered at a loopback address
//!   is dialled at `host_gateway` (inside a group's namespace the host's loopback is out of
//!   reach; its port mappings answer there). The server's SPIFFE ID must name the
//!   destination service in its namespace.
//! - **Counters**: per upstream, connections, failed connections and bytes each way (counted
//!   when a connection ends), sent to the agent every [`STATS_INTERVAL`]
//!   (`PUT /v1/agent/connect/proxy/stats`), which serves them in `/v1/metrics`.
//!
//! Bytes are passed untouched: HTTP/1.1 and h2 (prior knowledge) go through as they come.

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use drover_structs::mesh::{ConnectProxyConfig, ConnectUpstream};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_rustls::{TlsAcceptor, TlsConnector};

use crate::agent_client::{AgentClient, Instance, IntentionSet, ProxyStats, UpstreamStats};
use crate::ca::{CaRoots, LeafCert};
use crate::error::MeshError;
use crate::intentions;
use crate::tls;

/// How often the roots are read.
pub const ROOTS_POLL: Duration = Duration::from_secs(5);
/// How long an instance that failed to answer is passed over.
pub const FAILED_BACKOFF: Duration = Duration::from_secs(5);
/// How often counters are sent to the agent.
pub const STATS_INTERVAL: Duration = Duration::from_secs(5);
/// How long a TLS handshake may take.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long to wait before asking the agent again after a failed call.
const RETRY: Duration = Duration::from_secs(1);

/// Reads and checks a proxy config file.
pub fn load_config(path: &Path) -> Result<ConnectProxyConfig, MeshError> {
    let error = |reason: String| MeshError::Config {
        path: path.to_owned(),
        reason,
    };
    let text = std::fs::read(path).map_err(|source| MeshError::Io {
        path: path.to_owned(),
        source,
    })?;
    let config: ConnectProxyConfig =
        serde_json::from_slice(&text).map_err(|parse| error(parse.to_string()))?;
    for upstream in &config.upstreams {
        if !upstream.datacenter.is_empty() && upstream.datacenter != config.datacenter {
            return Err(error(format!(
                "upstream {:?} names datacenter {:?}: only the local datacenter ({:?}) is reachable through the mesh; leave it empty",
                upstream.destination_name, upstream.datacenter, config.datacenter
            )));
        }
    }
    Ok(config)
}

/// The TLS configs new connections use, and what they were made from.
struct TlsState {
    server: Arc<rustls::ServerConfig>,
    client: Arc<rustls::ClientConfig>,
    trust_domain: String,
}

/// One upstream's counters.
#[derive(Debug, Default)]
pub struct UpstreamCounters {
    pub connections: AtomicU64,
    pub failed: AtomicU64,
    pub bytes_sent: AtomicU64,
    pub bytes_received: AtomicU64,
}

/// The proxy, running.
pub struct Proxy {
    config: ConnectProxyConfig,
    agent: AgentClient,
    tls: watch::Receiver<Option<Arc<TlsState>>>,
    intentions: watch::Receiver<Option<IntentionSet>>,
    counters: Vec<Arc<UpstreamCounters>>,
}

/// Runs the proxy until `shutdown` completes: binds every listener first (an error names
/// the one that failed), then serves.
pub async fn run(
    config: ConnectProxyConfig,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), MeshError> {
    let agent = AgentClient::new(
        config.agent_socket.clone(),
        config.identity_token_file.clone(),
    )?;
    let bind = |address: SocketAddr, what: String| async move {
        TcpListener::bind(address)
            .await
            .map_err(|error| MeshError::Tls(format!("binding {what} at {address}: {error}")))
    };
    let public = bind(config.public_listener, "the public listener".to_owned()).await?;
    let mut upstream_listeners = Vec::new();
    for upstream in &config.upstreams {
        let address = SocketAddr::new(upstream.local_bind_address, upstream.local_bind_port);
        upstream_listeners.push(
            bind(
                address,
                format!("the listener of upstream {:?}", upstream.destination_name),
            )
            .await?,
        );
    }
    let (tls_sender, tls) = watch::channel(None);
    let (intentions_sender, intentions) = watch::channel(None);
    let proxy = Arc::new(Proxy {
        counters: config
            .upstreams
            .iter()
            .map(|_| Arc::new(UpstreamCounters::default()))
            .collect(),
        config,
        agent,
        tls,
        intentions,
    });
    let mut tasks = tokio::task::JoinSet::new();
    tasks.spawn(follow_certificates(proxy.clone(), tls_sender));
    tasks.spawn(follow_intentions(proxy.clone(), intentions_sender));
    tasks.spawn(serve_inbound(proxy.clone(), public));
    for ((upstream, listener), counters) in proxy
        .config
        .upstreams
        .clone()
        .into_iter()
        .zip(upstream_listeners)
        .zip(proxy.counters.clone())
    {
        let (instances_sender, instances) = watch::channel(Vec::new());
        tasks.spawn(follow_instances(
            proxy.clone(),
            upstream.clone(),
            instances_sender,
        ));
        tasks.spawn(serve_upstream(
            proxy.clone(),
            upstream,
            listener,
            instances,
            counters,
        ));
    }
    tasks.spawn(report_stats(proxy.clone()));
    shutdown.await;
    tasks.abort_all();
    Ok(())
}

/// Keeps the TLS configs current: the roots polled, the leaf renewed halfway through its
/// remaining life or when the roots change.
async fn follow_certificates(proxy: Arc<Proxy>, sender: watch::Sender<Option<Arc<TlsState>>>) {
    let mut current: Option<(CaRoots, LeafCert, Instant)> = None;
    loop {
        let roots = match proxy.agent.roots().await {
            Ok(roots) => roots,
            Err(error) => {
                tracing::warn!(%error, "cannot read the mesh roots");
                tokio::time::sleep(RETRY).await;
                continue;
            }
        };
        let renew = match &current {
            None => true,
            Some((old_roots, _, renew_at)) => *old_roots != roots || Instant::now() >= *renew_at,
        };
        if renew {
            let leaf = match proxy.agent.leaf(&proxy.config.service).await {
                Ok(leaf) => leaf,
                Err(error) => {
                    tracing::warn!(%error, "cannot get this service's leaf certificate");
                    tokio::time::sleep(RETRY).await;
                    continue;
                }
            };
            let configs = tls::server_config(&roots, &leaf)
                .and_then(|server| Ok((server, tls::client_config(&roots, &leaf)?)));
            match configs {
                Ok((server, client)) => {
                    sender.send_replace(Some(Arc::new(TlsState {
                        server,
                        client,
                        trust_domain: roots.trust_domain.clone(),
                    })));
                    let renew_at = Instant::now() + renew_after(&leaf);
                    tracing::info!(serial = %leaf.serial_number, valid_before = %leaf.valid_before, "mesh certificate loaded");
                    current = Some((roots, leaf, renew_at));
                }
                Err(error) => {
                    tracing::warn!(%error, "cannot use the mesh certificates");
                    tokio::time::sleep(RETRY).await;
                    continue;
                }
            }
        }
        let wait = current
            .as_ref()
            .map(|(_, _, renew_at)| renew_at.saturating_duration_since(Instant::now()))
            .unwrap_or(RETRY)
            .min(ROOTS_POLL);
        tokio::time::sleep(wait).await;
    }
}

/// Half the leaf's remaining life (at least a second).
fn renew_after(leaf: &LeafCert) -> Duration {
    let now_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| i64::try_from(elapsed.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0);
    let remaining_ns = drover_structs::time::Timestamp::parse_rfc3339(&leaf.valid_before)
        .ok()
        .and_then(|before| before.unix_nanos())
        .map_or(0, |before| before.saturating_sub(now_ns));
    Duration::from_nanos(u64::try_from(remaining_ns / 2).unwrap_or(0)).max(Duration::from_secs(1))
}

/// Keeps the intentions that may match this service current (a blocking query).
async fn follow_intentions(proxy: Arc<Proxy>, sender: watch::Sender<Option<IntentionSet>>) {
    let mut index = 0;
    loop {
        match proxy
            .agent
            .intentions(&proxy.config.namespace, &proxy.config.service, index)
            .await
        {
            Ok((set, new_index)) => {
                sender.send_if_modified(|current| {
                    let changed = current.as_ref() != Some(&set);
                    *current = Some(set);
                    changed
                });
                // An index that goes back (a restored store) starts over.
                index = if new_index < index { 0 } else { new_index };
            }
            Err(error) => {
                tracing::warn!(%error, "cannot read the intentions");
                index = 0;
                tokio::time::sleep(RETRY).await;
            }
        }
    }
}

async fn serve_inbound(proxy: Arc<Proxy>, listener: TcpListener) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "accepting a mesh connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let proxy = proxy.clone();
        tokio::spawn(async move {
            if let Err(error) = inbound(&proxy, stream).await {
                tracing::info!(%peer, %error, "refused a mesh connection");
            }
        });
    }
}

/// One inbound connection: handshake, the caller's identity and the intentions, then bytes
/// both ways to the local service.
async fn inbound(proxy: &Proxy, stream: TcpStream) -> Result<(), MeshError> {
    let Some(state) = proxy.tls.borrow().clone() else {
        return Err(MeshError::Tls("no certificate yet".to_owned()));
    };
    let acceptor = TlsAcceptor::from(state.server.clone());
    let mut tls_stream = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream))
        .await
        .map_err(|_| MeshError::Tls("handshake timed out".to_owned()))?
        .map_err(|error| MeshError::Tls(format!("handshake: {error}")))?;
    let source = tls::peer_spiffe_id(tls_stream.get_ref().1.peer_certificates())?;
    if source.trust_domain != state.trust_domain {
        return Err(MeshError::Tls(format!(
            "{source} is not of trust domain {}",
            state.trust_domain
        )));
    }
    let allowed = match proxy.intentions.borrow().as_ref() {
        Some(set) => intentions::allowed(
            &set.intentions,
            (&source.namespace, &source.service),
            (&proxy.config.namespace, &proxy.config.service),
            set.default_allow,
        ),
        // Not known yet: refuse rather than guess.
        None => false,
    };
    if !allowed {
        use tokio::io::AsyncWriteExt as _;
        let _ = tls_stream.shutdown().await;
        return Err(MeshError::Tls(format!(
            "the intentions deny {source} a connection to {}",
            proxy.config.service
        )));
    }
    let mut local = TcpStream::connect(proxy.config.local_service)
        .await
        .map_err(|error| {
            MeshError::Tls(format!(
                "connecting to the local service at {}: {error}",
                proxy.config.local_service
            ))
        })?;
    let _ = local.set_nodelay(true);
    let _ = tokio::io::copy_bidirectional(&mut tls_stream, &mut local).await;
    Ok(())
}

/// Keeps one upstream's instances current (a blocking query on the catalog).
async fn follow_instances(
    proxy: Arc<Proxy>,
    upstream: ConnectUpstream,
    sender: watch::Sender<Vec<Instance>>,
) {
    let service = format!("{}-sidecar-proxy", upstream.destination_name);
    let mut index = 0;
    loop {
        match proxy
            .agent
            .instances(&service, &upstream.destination_namespace, index)
            .await
        {
            Ok((instances, new_index)) => {
                sender.send_if_modified(|current| {
                    let changed = *current != instances;
                    *current = instances;
                    changed
                });
                index = if new_index < index { 0 } else { new_index };
            }
            Err(error) => {
                tracing::warn!(%error, service, "cannot read the upstream's instances");
                index = 0;
                tokio::time::sleep(RETRY).await;
            }
        }
    }
}

/// The address an instance is dialled at: a loopback registration at the host gateway.
fn dial_address(instance: &Instance, host_gateway: Option<IpAddr>) -> Option<SocketAddr> {
    let ip: IpAddr = instance.address.parse().ok()?;
    let ip = match host_gateway {
        Some(gateway) if ip.is_loopback() => gateway,
        _ => ip,
    };
    Some(SocketAddr::new(ip, instance.port))
}

async fn serve_upstream(
    proxy: Arc<Proxy>,
    upstream: ConnectUpstream,
    listener: TcpListener,
    instances: watch::Receiver<Vec<Instance>>,
    counters: Arc<UpstreamCounters>,
) {
    let next = Arc::new(AtomicUsize::new(0));
    let failed: Arc<Mutex<Vec<(String, Instant)>>> = Arc::default();
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "accepting an upstream connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let (proxy, upstream, instances, counters, next, failed) = (
            proxy.clone(),
            upstream.clone(),
            instances.clone(),
            counters.clone(),
            next.clone(),
            failed.clone(),
        );
        tokio::spawn(async move {
            counters.connections.fetch_add(1, Ordering::Relaxed);
            match outbound(&proxy, &upstream, stream, &instances, &next, &failed).await {
                Ok((sent, received)) => {
                    counters.bytes_sent.fetch_add(sent, Ordering::Relaxed);
                    counters
                        .bytes_received
                        .fetch_add(received, Ordering::Relaxed);
                }
                Err(error) => {
                    counters.failed.fetch_add(1, Ordering::Relaxed);
                    tracing::info!(%error, destination = %upstream.destination_name, "upstream connection failed");
                }
            }
        });
    }
}

/// One upstream connection: the next instance that answers with the destination's identity,
/// then bytes both ways. Answers the bytes sent and received.
async fn outbound(
    proxy: &Proxy,
    upstream: &ConnectUpstream,
    mut stream: TcpStream,
    instances: &watch::Receiver<Vec<Instance>>,
    next: &AtomicUsize,
    failed: &Mutex<Vec<(String, Instant)>>,
) -> Result<(u64, u64), MeshError> {
    let Some(state) = proxy.tls.borrow().clone() else {
        return Err(MeshError::Tls("no certificate yet".to_owned()));
    };
    let _ = stream.set_nodelay(true);
    let candidates: Vec<Instance> = instances.borrow().clone();
    if candidates.is_empty() {
        return Err(MeshError::Tls(format!(
            "no instance of {}-sidecar-proxy in the catalog",
            upstream.destination_name
        )));
    }
    let lock = |failed: &Mutex<Vec<(String, Instant)>>| {
        failed
            .lock()
            .map(|mut guard| {
                guard.retain(|(_, at)| at.elapsed() < FAILED_BACKOFF);
                guard.iter().map(|(id, _)| id.clone()).collect::<Vec<_>>()
            })
            .unwrap_or_default()
    };
    let recently_failed = lock(failed);
    let start = next.fetch_add(1, Ordering::Relaxed);
    let mut order: Vec<&Instance> = (0..candidates.len())
        .filter_map(|offset| candidates.get((start + offset) % candidates.len()))
        .collect();
    // Instances that just failed go last, not out: better them than nothing.
    order.sort_by_key(|instance| recently_failed.contains(&instance.id));
    let mut last_error = None;
    for instance in order {
        match dial(proxy, &state, upstream, instance).await {
            Ok(mut tls_stream) => {
                return tokio::io::copy_bidirectional(&mut stream, &mut tls_stream)
                    .await
                    .or(Ok((0, 0)));
            }
            Err(error) => {
                if let Ok(mut guard) = failed.lock() {
                    guard.push((instance.id.clone(), Instant::now()));
                }
                last_error = Some(error);
            }
        }
    }
    Err(last_error.unwrap_or_else(|| MeshError::Tls("no instance answered".to_owned())))
}

async fn dial(
    proxy: &Proxy,
    state: &TlsState,
    upstream: &ConnectUpstream,
    instance: &Instance,
) -> Result<tokio_rustls::client::TlsStream<TcpStream>, MeshError> {
    let address = dial_address(instance, proxy.config.host_gateway).ok_or_else(|| {
        MeshError::Tls(format!(
            "instance {} has no IP address ({:?})",
            instance.id, instance.address
        ))
    })?;
    let tcp = tokio::time::timeout(HANDSHAKE_TIMEOUT, TcpStream::connect(address))
        .await
        .map_err(|_| MeshError::Tls(format!("connecting to {address} timed out")))?
        .map_err(|error| MeshError::Tls(format!("connecting to {address}: {error}")))?;
    let _ = tcp.set_nodelay(true);
    let connector = TlsConnector::from(state.client.clone());
    let tls_stream = tokio::time::timeout(
        HANDSHAKE_TIMEOUT,
        connector.connect(tls::server_name(address), tcp),
    )
    .await
    .map_err(|_| MeshError::Tls(format!("handshake with {address} timed out")))?
    .map_err(|error| MeshError::Tls(format!("handshake with {address}: {error}")))?;
    let peer = tls::peer_spiffe_id(tls_stream.get_ref().1.peer_certificates())?;
    if peer.service != upstream.destination_name || peer.namespace != upstream.destination_namespace
    {
        return Err(MeshError::Tls(format!(
            "{address} presented {peer}, not service {} in namespace {}",
            upstream.destination_name, upstream.destination_namespace
        )));
    }
    Ok(tls_stream)
}

/// Sends the counters to the agent every [`STATS_INTERVAL`].
async fn report_stats(proxy: Arc<Proxy>) {
    loop {
        tokio::time::sleep(STATS_INTERVAL).await;
        let stats = ProxyStats {
            alloc_id: proxy.config.alloc_id.clone(),
            namespace: proxy.config.namespace.clone(),
            service: proxy.config.service.clone(),
            upstreams: proxy
                .config
                .upstreams
                .iter()
                .zip(&proxy.counters)
                .map(|(upstream, counters)| UpstreamStats {
                    destination_name: upstream.destination_name.clone(),
                    destination_namespace: upstream.destination_namespace.clone(),
                    connections: counters.connections.load(Ordering::Relaxed),
                    failed_connections: counters.failed.load(Ordering::Relaxed),
                    bytes_sent: counters.bytes_sent.load(Ordering::Relaxed),
                    bytes_received: counters.bytes_received.load(Ordering::Relaxed),
                })
                .collect(),
        };
        if let Err(error) = proxy.agent.put_stats(&stats).await {
            tracing::debug!(%error, "cannot send the proxy's counters");
        }
    }
}
