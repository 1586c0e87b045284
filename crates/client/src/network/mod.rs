//! Group networks: a network namespace per allocation whose group asks for `network { mode =
//! "bridge" | "none" | "cni/<name>" }`, set up by the CNI plugins as Nomad's client sets it up.
//!
//! ```text
//!   (none) ── ensure ──> intent persisted ── netns made ── CNI ADD ──> ready (persisted)
//!     ^                         │ any failure: CNI DEL, netns removed,     │
//!     │                         └──────────── intent cleared <─────────────┤
//!     └──────── teardown: CNI DEL (reverse), netns removed, record cleared ┘
//! ```
//!
//! - **bridge**: Nomad's conflist — `loopback`; `bridge` (named by `bridge_network_name`,
//!   `nomad` by default) with `host-local` IPAM on `bridge_network_subnet` (`172.26.64.0/20`),
//!   masquerade, gateway and hairpin per config; `firewall` with the `NOMAD-ADMIN` admin chain
//!   (which gets the rule accepting traffic to the bridge's subnet); `portmap` with `snat`,
//!   given the allocation's ports (host port → `to`, TCP and UDP). A Connect sidecar's public
//!   port allocated on a loopback address (an agent bound to 127.0.0.1) is also mapped on the
//!   bridge's gateway (the subnet's first address), where sidecars in other groups' namespaces
//!   on the bridge dial it (they cannot reach the host's loopback).
//! - **none**: the namespace with only its loopback (the `loopback` plugin brings it up).
//! - **cni/<name>**: the conflist named `<name>` in `cni_config_dir`, with the group's
//!   `cni { args }` added to `CNI_ARGS`.
//!
//! The record is persisted before the namespace is made, so an agent that dies half way
//! finds what to undo; a restarted agent finds a ready namespace and keeps it (never a second
//! one); a ready record whose namespace is gone (deleted, or a reboot) is torn down and made
//! again. Teardown is safe to repeat.
//!
//! When a task of the group runs under a driver that must own the namespace (docker: its
//! containers can only join another container's), that driver makes it instead (a pause
//! container, [`drover_driver::NetworkManager`]); it is bound at the same path, set up by the
//! same CNI calls and entered the same way by the group's other tasks, so a docker task and an
//! exec task of one group share it. Its owner is removed with it.
//!
//! **Not** here: joining the namespace (the shim does, given [`TaskNetwork`]), or when to set
//! up and tear down (the alloc runner and the task runners' network hook decide).
//!
//! # Design notes
//!
//! A group with `network { mode = "bridge" | "none" | "cni/<name>" }` gets a network namespace per
//! allocation (`client::network`). The first task's `network` prestart hook (before the env hook,
//! whose `NOMAD_ALLOC_IP_*` it gives) sets it up for all; the others wait for it. The agent makes
//! the namespace the way `ip netns add` does (a thread of its own unshares and bind-mounts it on
//! `/var/run/netns/<alloc_id>`; that thread then ends) and runs the CNI plugins itself as the CNI
//! protocol says (a conflist plugin by plugin with `prevResult`; DEL in reverse, safe to repeat);
//! plugins are plain fork+exec children. The shim joins the namespace before exec. **Invariant**:
//! the record (conflist, args, ports, namespace path) is persisted before the namespace is made
//! and cleared only after CNI DEL and the namespace are gone, so a restarted agent keeps a live
//! namespace (never makes a second), undoes a half-made one, and makes a lost one again (then
//! restarts the tasks into it). Teardown runs when the last task is dead and on GC. A setup that
//! fails is undone at once and fails the tasks with a "Setup Failure" naming the plugin, its error
//! and the directories searched. A group with a docker task has its namespace made by the docker
//! driver (`drover_driver::NetworkManager`, Nomad's `CreateNetwork`): a pause container
//! `nomad_init_<alloc_id>` from the client's `infra_image`, whose namespace is bound at the same
//! path and set up by the same CNI calls; docker tasks join it with `container:<id>`, the others by
//! path; it is removed with the network. Each network is also entered in the node's register
//! (`/run/drover/networks`, [`registry`]) before it is made, naming the client and holding the
//! record. At restore, the networks the register names for this client (or for a client whose
//! allocation root is gone) that no restored allocation owns are swept with their own conflists
//! (CNI DEL, then the namespace), so a client whose state DB was lost still removes what it
//! made; then those of allocations whose directory the client has but whose state it lost and
//! that the register does not name (CNI DEL of the bridge conflist); pause containers of gone
//! allocations go with the docker orphan sweep.

pub mod cni;
pub mod netns;
pub mod registry;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use drover_driver::NetworkManager;
use drover_structs::{Allocation, DnsConfig, NetworkResource};
use serde_json::{Value, json};

use crate::state_db::{StateDb, StateDbError};

/// Nomad's default `cni_path`.
pub const DEFAULT_CNI_PATH: &str = "/opt/cni/bin";
/// Where Debian's `containernetworking-plugins` installs the plugins (searched too).
pub const DEBIAN_CNI_PATH: &str = "/usr/lib/cni";
/// Nomad's default `cni_config_dir`.
pub const DEFAULT_CNI_CONFIG_DIR: &str = "/opt/cni/config";
/// Nomad's default bridge name and subnet.
pub const DEFAULT_BRIDGE_NAME: &str = "nomad";
pub const DEFAULT_BRIDGE_SUBNET: &str = "172.26.64.0/20";
/// The iptables chain the firewall plugin sends forwarded traffic through first (Nomad's).
pub const ADMIN_CHAIN: &str = "NOMAD-ADMIN";
/// Where named network namespaces are bound (as `ip netns` keeps them).
pub const DEFAULT_NETNS_DIR: &str = "/var/run/netns";
/// The interface the allocation gets in its namespace.
pub const ALLOC_IFNAME: &str = "eth0";
/// The persisted record's version.
const RECORD_VERSION: u32 = 1;

/// One CNI ADD or DEL at a time on the node: the reference plugins check for a chain or a
/// bridge and then create it, so two allocations set up at once could both try to create the
/// first `CNI-HOSTPORT-DNAT` chain or the bridge, and one would fail.
static CNI_CALLS: Mutex<()> = Mutex::new(());

/// Errors of group network setup and teardown.
#[derive(Debug, thiserror::Error)]
pub enum NetworkError {
    #[error("CNI plugin {plugin:?} not found (searched {searched})")]
    PluginNotFound { plugin: String, searched: String },
    #[error("CNI plugin {plugin:?} ({path}, plugins searched in {searched}) failed on {command}: {message}", path = path.display())]
    Plugin {
        plugin: String,
        path: PathBuf,
        searched: String,
        command: String,
        message: String,
    },
    #[error("network config: {0}")]
    Config(String),
    #[error("network namespace: {0}")]
    Namespace(String),
    #[error("iptables: {0}")]
    Iptables(String),
    #[error("writing {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    State(#[from] StateDbError),
    #[error("the {driver} driver's network namespace: {message}")]
    Sandbox { driver: String, message: String },
    #[error("network setup was interrupted: {0}")]
    Interrupted(String),
}

/// The client's network settings (Nomad's client keys).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkConfig {
    /// `cni_path`: directories searched for plugins, in order. Nomad's `/opt/cni/bin` and
    /// Debian's `/usr/lib/cni` unless the client sets it.
    pub cni_path: Vec<PathBuf>,
    /// `cni_config_dir`: where `cni/<name>` conflists are read.
    pub cni_config_dir: PathBuf,
    pub bridge_network_name: String,
    pub bridge_network_subnet: String,
    pub bridge_network_hairpin_mode: bool,
    /// Where the namespaces are bound.
    pub netns_dir: PathBuf,
    /// The node's register of the networks its clients made ([`registry`]).
    pub registry_dir: PathBuf,
}

impl Default for NetworkConfig {
    fn default() -> Self {
        NetworkConfig {
            cni_path: vec![
                PathBuf::from(DEFAULT_CNI_PATH),
                PathBuf::from(DEBIAN_CNI_PATH),
            ],
            cni_config_dir: PathBuf::from(DEFAULT_CNI_CONFIG_DIR),
            bridge_network_name: DEFAULT_BRIDGE_NAME.to_string(),
            bridge_network_subnet: DEFAULT_BRIDGE_SUBNET.to_string(),
            bridge_network_hairpin_mode: false,
            netns_dir: PathBuf::from(DEFAULT_NETNS_DIR),
            registry_dir: PathBuf::from(registry::DEFAULT_REGISTRY_DIR),
        }
    }
}

impl NetworkConfig {
    /// The directories searched for plugins.
    pub fn plugin_dirs(&self) -> Vec<PathBuf> {
        self.cni_path.clone()
    }
}

/// A group's network mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupNetworkMode {
    Host,
    Bridge,
    None,
    Cni(String),
}

impl GroupNetworkMode {
    /// The mode of a group's (first) network block; no block is the host's network.
    pub fn of(network: Option<&NetworkResource>) -> GroupNetworkMode {
        let mode = network.map(|network| network.mode.as_str()).unwrap_or("");
        match mode {
            "" | "host" => GroupNetworkMode::Host,
            "bridge" => GroupNetworkMode::Bridge,
            "none" => GroupNetworkMode::None,
            other => match other.strip_prefix("cni/") {
                Some(name) => GroupNetworkMode::Cni(name.to_string()),
                // Validation refuses other modes before they reach a client.
                None => GroupNetworkMode::Host,
            },
        }
    }

    fn as_text(&self) -> String {
        match self {
            GroupNetworkMode::Host => "host".to_string(),
            GroupNetworkMode::Bridge => "bridge".to_string(),
            GroupNetworkMode::None => "none".to_string(),
            GroupNetworkMode::Cni(name) => format!("cni/{name}"),
        }
    }
}

/// The group network block of `alloc`, if any.
pub fn group_network(alloc: &Allocation) -> Option<&NetworkResource> {
    alloc
        .job
        .as_deref()
        .and_then(|job| job.lookup_task_group(&alloc.task_group))
        .and_then(|group| group.networks.first())
}

/// What a task needs to run in its group's network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskNetwork {
    /// The namespace to join.
    pub namespace: PathBuf,
    /// The group's `resolv.conf` (from its `dns` block), when it has one.
    pub resolv_conf: Option<PathBuf>,
    /// The namespace's owner when a driver made it (the docker pause container's ID).
    pub sandbox_id: Option<String>,
}

/// The driver that makes the group's namespace (see the module docs).
#[derive(Clone)]
pub struct SandboxDriver {
    /// The driver's name, for messages.
    pub driver: String,
    pub manager: Arc<dyn NetworkManager>,
}

impl std::fmt::Debug for SandboxDriver {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("SandboxDriver")
            .field("driver", &self.driver)
            .finish_non_exhaustive()
    }
}

/// What is persisted of an allocation's network (see the module docs).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct NetworkRecord {
    pub version: u32,
    pub mode: String,
    pub netns: PathBuf,
    pub container_id: String,
    pub ifname: String,
    /// The conflist ADD ran with (DEL runs the same).
    pub conflist: Value,
    pub cni_args: String,
    pub port_mappings: Vec<cni::PortMapping>,
    /// The CNI ADD result, once set up.
    pub result: Option<Value>,
    /// Nomad's `AllocNetworkStatus` (`InterfaceName`, `Address`, `AddressIPv6`, `DNS`).
    pub status: Option<Value>,
    pub resolv_conf: Option<PathBuf>,
    /// The driver that owns the namespace and the owner's ID (records of older agents have
    /// none: the client made the namespace).
    #[serde(default)]
    pub sandbox_driver: Option<String>,
    #[serde(default)]
    pub sandbox_id: Option<String>,
    /// The group's host name given to the namespace's owner (kept for a remake).
    #[serde(default)]
    pub hostname: Option<String>,
    /// The setup completed; `false` is an intent left by an agent that died half way.
    pub ready: bool,
}

/// One allocation's group network. Cheap to share; calls are serialized.
#[derive(Debug)]
pub struct AllocNetwork {
    alloc_id: String,
    mode: GroupNetworkMode,
    config: Arc<NetworkConfig>,
    state_db: Arc<StateDb>,
    alloc_root: PathBuf,
    /// The driver that makes the namespace, when one of the group's drivers must.
    sandbox: Option<SandboxDriver>,
    /// Serializes setup and teardown.
    busy: tokio::sync::Mutex<()>,
    record: Mutex<Option<NetworkRecord>>,
    /// The `NetworkStatus`, for whoever follows it (the alloc runner's services and checks).
    status: tokio::sync::watch::Sender<Option<Value>>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl AllocNetwork {
    /// The network of `alloc` when its group has one of its own (`None` in host mode), with
    /// whatever an earlier agent persisted of it.
    pub fn for_alloc(
        config: Arc<NetworkConfig>,
        state_db: Arc<StateDb>,
        alloc: &Allocation,
        alloc_root: &Path,
        sandbox: Option<SandboxDriver>,
    ) -> Result<Option<Arc<AllocNetwork>>, NetworkError> {
        let mode = GroupNetworkMode::of(group_network(alloc));
        if mode == GroupNetworkMode::Host {
            return Ok(None);
        }
        let record = state_db
            .get_network::<Option<NetworkRecord>>(&alloc.id)?
            .flatten();
        let status = record
            .as_ref()
            .filter(|record| record.ready)
            .and_then(|record| record.status.clone());
        Ok(Some(Arc::new(AllocNetwork {
            alloc_id: alloc.id.clone(),
            mode,
            config,
            state_db,
            alloc_root: alloc_root.to_path_buf(),
            sandbox,
            busy: tokio::sync::Mutex::new(()),
            record: Mutex::new(record),
            status: tokio::sync::watch::Sender::new(status),
        })))
    }

    /// The group's network mode, as the jobspec writes it.
    pub fn mode_text(&self) -> String {
        self.mode.as_text()
    }

    /// Nomad's `NetworkStatus` of the allocation, once set up (none in `none` mode).
    pub fn status(&self) -> Option<Value> {
        lock(&self.record)
            .as_ref()
            .filter(|record| record.ready)
            .and_then(|record| record.status.clone())
    }

    /// The host's address on the group's network (the first gateway of the CNI result), once
    /// set up: what a task inside the namespace dials to reach the host's port mappings.
    pub fn host_gateway(&self) -> Option<std::net::IpAddr> {
        let record = lock(&self.record);
        let result = record
            .as_ref()
            .filter(|record| record.ready)?
            .result
            .as_ref()?;
        result
            .get("ips")
            .and_then(Value::as_array)?
            .iter()
            .filter_map(|ip| ip.get("gateway").and_then(Value::as_str))
            .find_map(|gateway| gateway.parse().ok())
    }

    /// What a task joins, once set up.
    pub fn task_network(&self) -> Option<TaskNetwork> {
        lock(&self.record)
            .as_ref()
            .filter(|record| record.ready)
            .map(task_network_of)
    }

    /// Follows the `NetworkStatus` (set up, made again, torn down).
    pub fn subscribe_status(&self) -> tokio::sync::watch::Receiver<Option<Value>> {
        self.status.subscribe()
    }

    /// Whether a ready record's namespace is gone (deleted by hand, or a reboot).
    pub fn is_lost(&self) -> bool {
        lock(&self.record)
            .as_ref()
            .is_some_and(|record| record.ready && !netns::is_bound(&record.netns))
    }

    /// Sets the network up, or keeps the one that is up (see the module docs). Idempotent.
    /// `hostname` is the group's (interpolated), given to a driver's namespace owner.
    pub async fn ensure(
        &self,
        alloc: Arc<Allocation>,
        hostname: Option<String>,
    ) -> Result<TaskNetwork, NetworkError> {
        let _busy = self.busy.lock().await;
        let existing = lock(&self.record).clone();
        if let Some(record) = &existing
            && record.ready
            && netns::is_bound(&record.netns)
            && self.owner_holds(record).await
        {
            return Ok(task_network_of(record));
        }
        let setup = Setup {
            config: self.config.clone(),
            state_db: self.state_db.clone(),
            alloc_id: self.alloc_id.clone(),
            mode: self.mode.clone(),
            alloc_root: self.alloc_root.clone(),
            sandbox: self.sandbox.clone(),
            runtime: tokio::runtime::Handle::current(),
            hostname: hostname
                .or_else(|| existing.as_ref().and_then(|record| record.hostname.clone())),
        };
        let started = std::time::Instant::now();
        let outcome = tokio::task::spawn_blocking(move || setup.run(&alloc, existing))
            .await
            .map_err(|error| NetworkError::Interrupted(error.to_string()))?;
        match outcome {
            Ok(record) => {
                tracing::info!(alloc_id = %self.alloc_id, mode = %record.mode, netns = %record.netns.display(), sandbox = ?record.sandbox_id, elapsed = ?started.elapsed(), "group network set up");
                let network = task_network_of(&record);
                self.status.send_replace(record.status.clone());
                *lock(&self.record) = Some(record);
                Ok(network)
            }
            Err(error) => {
                *lock(&self.record) = None;
                Err(error)
            }
        }
    }

    /// Tears the network down: CNI DEL, the namespace, the record. Safe to repeat.
    pub async fn teardown(&self) -> Result<(), NetworkError> {
        let _busy = self.busy.lock().await;
        let Some(record) = lock(&self.record).clone() else {
            return Ok(());
        };
        let config = self.config.clone();
        let state_db = self.state_db.clone();
        let alloc_id = self.alloc_id.clone();
        let owner = self.owner();
        tokio::task::spawn_blocking(move || {
            undo(&config, &record, owner.as_ref())?;
            state_db.put_network::<Option<NetworkRecord>>(&alloc_id, &None)?;
            registry::remove(&config.registry_dir, &alloc_id)?;
            Ok::<(), NetworkError>(())
        })
        .await
        .map_err(|error| NetworkError::Interrupted(error.to_string()))??;
        *lock(&self.record) = None;
        self.status.send_replace(None);
        tracing::info!(alloc_id = %self.alloc_id, "group network torn down");
        Ok(())
    }
}

impl AllocNetwork {
    /// The driver that made the namespace, with the runtime to call it from a blocking thread.
    fn owner(&self) -> Option<Owner> {
        self.sandbox.clone().map(|sandbox| Owner {
            sandbox,
            runtime: tokio::runtime::Handle::current(),
        })
    }

    /// Whether the driver-made namespace's owner still holds the bound namespace (the pause
    /// container runs, and is the one the namespace came from). A namespace the client made
    /// has no owner to ask.
    async fn owner_holds(&self, record: &NetworkRecord) -> bool {
        let (Some(sandbox), Some(sandbox_id)) = (&self.sandbox, &record.sandbox_id) else {
            return record.sandbox_id.is_none();
        };
        match sandbox.manager.create_network(&self.alloc_id, None).await {
            Ok(found) => {
                let holds = &found.sandbox_id == sandbox_id
                    && netns::same_namespace(&found.namespace, &record.netns);
                if !holds {
                    tracing::warn!(alloc_id = %self.alloc_id, recorded = %sandbox_id, found = %found.sandbox_id, "the group network's pause container was replaced");
                }
                holds
            }
            Err(error) => {
                tracing::warn!(alloc_id = %self.alloc_id, %error, "the group network's pause container is not running");
                false
            }
        }
    }
}

fn task_network_of(record: &NetworkRecord) -> TaskNetwork {
    TaskNetwork {
        namespace: record.netns.clone(),
        resolv_conf: record.resolv_conf.clone(),
        sandbox_id: record.sandbox_id.clone(),
    }
}

/// The driver that owns a namespace, callable from a blocking thread.
struct Owner {
    sandbox: SandboxDriver,
    runtime: tokio::runtime::Handle,
}

/// Tears down what is left of the network of an allocation this client no longer knows (its
/// state was lost, or it was collected while a crashed agent was half way): the namespace
/// bound for it, with a CNI DEL of the bridge conflist first (host-local releases the address
/// by the allocation's ID, portmap and firewall drop its chains, the bridge its masquerade
/// rules). Returns whether there was anything. Only the allocations whose directory this
/// client has are swept, never another agent's namespaces.
pub fn sweep_leftover(config: &NetworkConfig, alloc_id: &str) -> Result<bool, NetworkError> {
    let namespace = config.netns_dir.join(alloc_id);
    if !namespace.exists() {
        return Ok(false);
    }
    let record = NetworkRecord {
        version: RECORD_VERSION,
        mode: GroupNetworkMode::Bridge.as_text(),
        netns: namespace,
        container_id: alloc_id.to_string(),
        ifname: ALLOC_IFNAME.to_string(),
        conflist: bridge_conflist(config),
        cni_args: "IgnoreUnknown=true".to_string(),
        port_mappings: Vec::new(),
        result: None,
        status: None,
        resolv_conf: None,
        sandbox_driver: None,
        sandbox_id: None,
        hostname: None,
        ready: true,
    };
    undo(config, &record, None)?;
    Ok(true)
}

/// Tears down the networks the node's register says this client made (or a client that is
/// gone made) for allocations it no longer runs: after its state DB was lost (removed, or the
/// agent restarted on a fresh data dir) its allocation directories may be gone too, but the
/// register still names each network with the conflist its ADD ran with. `live` are the
/// allocations the client restored; `client_alloc_root` its allocation root. A pause
/// container that owned a namespace is left to the docker driver's orphan sweep. Returns the
/// allocations whose networks were removed.
pub fn sweep_registered(
    config: &NetworkConfig,
    client_alloc_root: &Path,
    live: &std::collections::HashSet<String>,
) -> Vec<String> {
    let mut swept = Vec::new();
    for (alloc_id, entry) in registry::orphans_of(&config.registry_dir, client_alloc_root) {
        if live.contains(&alloc_id) {
            continue;
        }
        let mut record = entry.record;
        // The owner (a pause container) is not this client's to find any more.
        record.sandbox_driver = None;
        match undo(config, &record, None)
            .and_then(|()| registry::remove(&config.registry_dir, &alloc_id))
        {
            Ok(()) => swept.push(alloc_id),
            Err(error) => {
                tracing::warn!(%alloc_id, error = %crate::error_text::error_chain(&error), "removing the group network of a gone allocation");
            }
        }
    }
    swept
}

/// The inputs of one setup, moved onto a blocking thread.
struct Setup {
    config: Arc<NetworkConfig>,
    state_db: Arc<StateDb>,
    alloc_id: String,
    mode: GroupNetworkMode,
    alloc_root: PathBuf,
    sandbox: Option<SandboxDriver>,
    runtime: tokio::runtime::Handle,
    hostname: Option<String>,
}

impl Setup {
    fn owner(&self) -> Option<Owner> {
        self.sandbox.clone().map(|sandbox| Owner {
            sandbox,
            runtime: self.runtime.clone(),
        })
    }

    fn run(
        &self,
        alloc: &Allocation,
        existing: Option<NetworkRecord>,
    ) -> Result<NetworkRecord, NetworkError> {
        if let Some(stale) = existing {
            // Half made by a dead agent, or its namespace is gone: undo what is left first
            // (releases its address and port rules), then make it anew.
            tracing::warn!(alloc_id = %self.alloc_id, netns = %stale.netns.display(), ready = stale.ready, "repairing the group network");
            undo(&self.config, &stale, self.owner().as_ref())?;
            self.state_db
                .put_network::<Option<NetworkRecord>>(&self.alloc_id, &None)?;
            registry::remove(&self.config.registry_dir, &self.alloc_id)?;
        }
        let network = group_network(alloc);
        let conflist = match &self.mode {
            GroupNetworkMode::Bridge => bridge_conflist(&self.config),
            GroupNetworkMode::None => loopback_conflist(),
            GroupNetworkMode::Cni(name) => load_conflist(&self.config.cni_config_dir, name)?,
            GroupNetworkMode::Host => {
                return Err(NetworkError::Config(
                    "host mode has no network of its own".to_string(),
                ));
            }
        };
        // Every plugin is found before anything is made.
        let plugin_dirs = self.config.plugin_dirs();
        for kind in cni::plugin_types(&conflist)? {
            cni::find_plugin(&kind, &plugin_dirs)?;
        }
        if self.mode == GroupNetworkMode::Bridge {
            let _one_at_a_time = lock(&CNI_CALLS);
            ensure_admin_chain(&self.config)?;
        }
        let mut record = NetworkRecord {
            version: RECORD_VERSION,
            mode: self.mode.as_text(),
            netns: self.config.netns_dir.join(&self.alloc_id),
            container_id: self.alloc_id.clone(),
            ifname: ALLOC_IFNAME.to_string(),
            conflist,
            cni_args: cni_args(alloc, network),
            port_mappings: match self.mode {
                GroupNetworkMode::None => Vec::new(),
                GroupNetworkMode::Bridge => {
                    let mut mappings = port_mappings(alloc);
                    if let Some(gateway) = bridge_gateway(&self.config.bridge_network_subnet) {
                        mappings.extend(sidecar_gateway_mappings(alloc, gateway));
                    }
                    mappings
                }
                _ => port_mappings(alloc),
            },
            result: None,
            status: None,
            resolv_conf: None,
            sandbox_driver: self.sandbox.as_ref().map(|sandbox| sandbox.driver.clone()),
            sandbox_id: None,
            hostname: self.hostname.clone(),
            ready: false,
        };
        // The intent first, in the node's register too: a crash from here on, even one that
        // loses the state DB, leaves a record to undo.
        self.register(&record)?;
        self.state_db.put_network(&self.alloc_id, &Some(&record))?;
        let made = self.make(&mut record, network);
        if let Err(error) = made {
            if let Err(undo_error) = undo(&self.config, &record, self.owner().as_ref()) {
                tracing::warn!(alloc_id = %self.alloc_id, error = %undo_error, "undoing a failed network setup");
            }
            self.state_db
                .put_network::<Option<NetworkRecord>>(&self.alloc_id, &None)?;
            registry::remove(&self.config.registry_dir, &self.alloc_id)?;
            return Err(error);
        }
        record.ready = true;
        self.state_db.put_network(&self.alloc_id, &Some(&record))?;
        // With the ADD's result, which the sweep's DEL passes on as the plugins expect.
        self.register(&record)?;
        Ok(record)
    }

    /// Writes the network's entry in the node's register, naming this client.
    fn register(&self, record: &NetworkRecord) -> Result<(), NetworkError> {
        let client_alloc_root = self
            .alloc_root
            .parent()
            .unwrap_or(&self.alloc_root)
            .to_path_buf();
        registry::write(
            &self.config.registry_dir,
            &self.alloc_id,
            &registry::RegistryEntry {
                client_alloc_root,
                record: record.clone(),
            },
        )
    }

    fn make(
        &self,
        record: &mut NetworkRecord,
        network: Option<&NetworkResource>,
    ) -> Result<(), NetworkError> {
        match &self.sandbox {
            None => netns::create(&record.netns)?,
            Some(sandbox) => {
                let made = self
                    .runtime
                    .block_on(
                        sandbox
                            .manager
                            .create_network(&self.alloc_id, self.hostname.as_deref()),
                    )
                    .map_err(|error| NetworkError::Sandbox {
                        driver: sandbox.driver.clone(),
                        message: error.to_string(),
                    })?;
                record.sandbox_id = Some(made.sandbox_id);
                // Kept with the ID, so a crash from here on finds the owner to remove.
                self.state_db.put_network(&self.alloc_id, &Some(&*record))?;
                netns::bind_existing(&made.namespace, &record.netns)?;
            }
        }
        let plugin_dirs = self.config.plugin_dirs();
        let result = {
            let _one_at_a_time = lock(&CNI_CALLS);
            cni::add(&record.conflist, &attachment(record, &plugin_dirs))?
        };
        if self.mode != GroupNetworkMode::None {
            record.status = Some(status_from_result(&result)?);
        }
        record.result = Some(result);
        if let Some(dns) = network.and_then(|network| network.dns.as_ref()) {
            let path = self.alloc_root.join("resolv.conf");
            write_resolv_conf(&path, dns)?;
            record.resolv_conf = Some(path);
        }
        Ok(())
    }
}

fn attachment<'a>(record: &'a NetworkRecord, plugin_dirs: &'a [PathBuf]) -> cni::Attachment<'a> {
    cni::Attachment {
        container_id: &record.container_id,
        netns: &record.netns,
        ifname: &record.ifname,
        args: &record.cni_args,
        plugin_dirs,
        port_mappings: &record.port_mappings,
    }
}

/// CNI DEL, then the namespace and the resolv.conf. A DEL failure is returned after the rest
/// was still removed (the record stays for the next attempt).
fn undo(
    config: &NetworkConfig,
    record: &NetworkRecord,
    owner: Option<&Owner>,
) -> Result<(), NetworkError> {
    let plugin_dirs = config.plugin_dirs();
    let _one_at_a_time = lock(&CNI_CALLS);
    let deleted = cni::del(
        &record.conflist,
        &attachment(record, &plugin_dirs),
        record.result.as_ref(),
    );
    // The bridge plugin removes its masquerade rules only when it finds the namespace (it
    // reads the addresses there); when the namespace is gone they are removed here.
    let masquerade = remove_masquerade_rules(&record.container_id);
    let removed = netns::remove(&record.netns);
    if let Some(path) = &record.resolv_conf {
        let _ = std::fs::remove_file(path);
    }
    // The namespace's owner last: nothing is left in the namespace it holds.
    let owner_removed = match (owner, &record.sandbox_driver) {
        (Some(owner), Some(_)) => owner
            .runtime
            .block_on(owner.sandbox.manager.destroy_network(&record.container_id))
            .map_err(|error| NetworkError::Sandbox {
                driver: owner.sandbox.driver.clone(),
                message: error.to_string(),
            }),
        (None, Some(driver)) => Err(NetworkError::Sandbox {
            driver: driver.clone(),
            message: "the driver that made the namespace is not available to remove it".to_string(),
        }),
        _ => Ok(()),
    };
    deleted.and(masquerade).and(removed).and(owner_removed)
}

/// Deletes the nat `POSTROUTING` rules that name `container_id` (the bridge plugin's
/// `ipMasq` rules, commented with the container's ID) and the chains they jump to.
fn remove_masquerade_rules(container_id: &str) -> Result<(), NetworkError> {
    let iptables = |args: &[&str]| {
        std::process::Command::new("iptables")
            .args(["-w", "-t", "nat"])
            .args(args)
            .output()
            .map_err(|error| NetworkError::Iptables(format!("running iptables: {error}")))
    };
    let listed = iptables(&["-S", "POSTROUTING"])?;
    if !listed.status.success() {
        // No nat table (iptables missing a module): the plugins made no rule there either.
        return Ok(());
    }
    let text = String::from_utf8_lossy(&listed.stdout).into_owned();
    // `-S CHAIN` prints the policy first, then rule 1, 2, …
    let mut numbers_and_chains: Vec<(usize, String)> = text
        .lines()
        .filter(|line| line.starts_with("-A "))
        .enumerate()
        .filter(|(_, line)| line.contains(container_id))
        .map(|(index, line)| {
            let target = line
                .split_whitespace()
                .skip_while(|word| *word != "-j")
                .nth(1)
                .unwrap_or_default()
                .to_string();
            (index + 1, target)
        })
        .collect();
    numbers_and_chains.sort_by_key(|(number, _)| std::cmp::Reverse(*number));
    for (number, chain) in numbers_and_chains {
        let deleted = iptables(&["-D", "POSTROUTING", &number.to_string()])?;
        if !deleted.status.success() {
            return Err(NetworkError::Iptables(format!(
                "deleting POSTROUTING rule {number} of {container_id}: {}",
                String::from_utf8_lossy(&deleted.stderr).trim()
            )));
        }
        if chain.starts_with("CNI-") {
            iptables(&["-F", &chain])?;
            iptables(&["-X", &chain])?;
        }
    }
    Ok(())
}

/// Nomad's bridge conflist (see the module docs).
pub fn bridge_conflist(config: &NetworkConfig) -> Value {
    json!({
        "cniVersion": "0.4.0",
        "name": "nomad",
        "plugins": [
            {"type": "loopback"},
            {
                "type": "bridge",
                "bridge": config.bridge_network_name,
                "ipMasq": true,
                "isGateway": true,
                "forceAddress": true,
                "hairpinMode": config.bridge_network_hairpin_mode,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": config.bridge_network_subnet}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": "/var/run/cni"
                }
            },
            {"type": "firewall", "backend": "iptables", "iptablesAdminChainName": ADMIN_CHAIN},
            {"type": "portmap", "capabilities": {"portMappings": true}, "snat": true}
        ]
    })
}

fn loopback_conflist() -> Value {
    json!({"cniVersion": "0.4.0", "name": "nomad-none", "plugins": [{"type": "loopback"}]})
}

/// The network config named `name` in `dir`: a conflist (`*.conflist`, `*.json`) or a single
/// plugin config (`*.conf`, made a list of one), as Nomad's CNI mode reads it.
pub fn load_conflist(dir: &Path, name: &str) -> Result<Value, NetworkError> {
    let entries = std::fs::read_dir(dir).map_err(|error| {
        NetworkError::Config(format!("reading cni_config_dir {}: {error}", dir.display()))
    })?;
    let mut paths: Vec<PathBuf> = entries
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| {
            matches!(
                path.extension().and_then(|ext| ext.to_str()),
                Some("conflist" | "conf" | "json")
            )
        })
        .collect();
    paths.sort();
    for path in paths {
        let Ok(text) = std::fs::read(&path) else {
            continue;
        };
        let Ok(config) = serde_json::from_slice::<Value>(&text) else {
            tracing::warn!(path = %path.display(), "skipping a CNI config that is not JSON");
            continue;
        };
        if config.get("name").and_then(Value::as_str) != Some(name) {
            continue;
        }
        if config.get("plugins").is_some() {
            return Ok(config);
        }
        let version = config.get("cniVersion").cloned().unwrap_or(json!("0.4.0"));
        return Ok(json!({"cniVersion": version, "name": name, "plugins": [config]}));
    }
    Err(NetworkError::Config(format!(
        "no CNI network config named {name:?} in cni_config_dir {}",
        dir.display()
    )))
}

/// `CNI_ARGS` as Nomad passes them: `IgnoreUnknown`, the workload's identity, then the
/// group's `cni { args }` (values with a `;` are left out, as Nomad does).
fn cni_args(alloc: &Allocation, network: Option<&NetworkResource>) -> String {
    let mut args = BTreeMap::new();
    args.insert("IgnoreUnknown".to_string(), "true".to_string());
    let job = alloc.job.as_deref();
    for (key, value) in [
        (
            "NOMAD_REGION",
            job.map(|job| job.region.clone()).unwrap_or_default(),
        ),
        ("NOMAD_NAMESPACE", alloc.namespace.clone()),
        ("NOMAD_JOB_ID", alloc.job_id.clone()),
        ("NOMAD_GROUP_NAME", alloc.task_group.clone()),
        ("NOMAD_ALLOC_ID", alloc.id.clone()),
    ] {
        args.insert(key.to_string(), value);
    }
    if let Some(cni) = network.and_then(|network| network.cni.as_ref()) {
        args.extend(cni.args.clone());
    }
    args.into_iter()
        .filter(|(key, value)| {
            let usable = !key.contains([';', '=']) && !value.contains(';');
            if !usable {
                tracing::warn!(alloc_id = %alloc.id, %key, "skipping a CNI arg with a ';' or '='");
            }
            usable
        })
        .map(|(key, value)| format!("{key}={value}"))
        .collect::<Vec<_>>()
        .join(";")
}

/// The allocation's ports as portmap takes them: host port → `to` (the host port when not
/// set), TCP and UDP, on the allocated host address.
pub fn port_mappings(alloc: &Allocation) -> Vec<cni::PortMapping> {
    let Some(resources) = alloc.allocated_resources.as_ref() else {
        return Vec::new();
    };
    let mut mappings = Vec::new();
    for port in &resources.shared.ports {
        let container_port = if port.to > 0 { port.to } else { port.value };
        for protocol in ["tcp", "udp"] {
            mappings.push(cni::PortMapping {
                host_port: port.value,
                container_port,
                protocol: protocol.to_string(),
                host_ip: port.host_ip.clone(),
            });
        }
    }
    mappings
}

/// The bridge's gateway on an IPv4 `subnet` (`a.b.c.d/n`): its first address, which
/// `host-local` gives the bridge.
pub fn bridge_gateway(subnet: &str) -> Option<std::net::Ipv4Addr> {
    let (address, prefix) = subnet.split_once('/')?;
    let address: std::net::Ipv4Addr = address.parse().ok()?;
    let prefix: u32 = prefix.parse().ok()?;
    if prefix > 30 {
        return None;
    }
    let mask = u32::MAX.checked_shl(32 - prefix).unwrap_or(0);
    Some(std::net::Ipv4Addr::from((u32::from(address) & mask) + 1))
}

/// The ports of the group's Connect sidecars (`connect-proxy-<service>`, or the
/// `sidecar_service`'s own `port`) that are allocated on a loopback address, mapped again on
/// the bridge's `gateway`: other groups' sidecars on the bridge dial a loopback registration
/// there.
pub fn sidecar_gateway_mappings(
    alloc: &Allocation,
    gateway: std::net::Ipv4Addr,
) -> Vec<cni::PortMapping> {
    let sidecar_labels: Vec<String> = alloc
        .job
        .as_deref()
        .and_then(|job| job.lookup_task_group(&alloc.task_group))
        .map(|group| {
            group
                .services
                .iter()
                .filter_map(|service| {
                    let sidecar = service.connect.as_ref()?.sidecar_service.as_ref()?;
                    Some(if sidecar.port.is_empty() {
                        drover_structs::connect::sidecar_port_label(&service.name)
                    } else {
                        sidecar.port.clone()
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    let gateway = gateway.to_string();
    port_mappings(alloc)
        .into_iter()
        .filter(|mapping| mapping.protocol == "tcp")
        .filter(|mapping| {
            mapping
                .host_ip
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
        })
        .filter(|mapping| {
            alloc.allocated_resources.as_ref().is_some_and(|resources| {
                resources.shared.ports.iter().any(|port| {
                    port.value == mapping.host_port && sidecar_labels.contains(&port.label)
                })
            })
        })
        .map(|mapping| cni::PortMapping {
            host_ip: gateway.clone(),
            ..mapping
        })
        .collect()
}

/// Nomad's `AllocNetworkStatus` from a CNI result: the first IPv4 address of an interface in
/// the sandbox (any interface when none is), and the result's DNS.
pub fn status_from_result(result: &Value) -> Result<Value, NetworkError> {
    let empty = Vec::new();
    let interfaces = result
        .get("interfaces")
        .and_then(Value::as_array)
        .unwrap_or(&empty);
    let ips = result
        .get("ips")
        .and_then(Value::as_array)
        .unwrap_or(&empty);
    let mut order: Vec<usize> = (0..interfaces.len()).collect();
    order.sort_by_key(|index| {
        interfaces[*index]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    });
    for require_sandbox in [true, false] {
        for index in &order {
            let interface = &interfaces[*index];
            if require_sandbox && interface["sandbox"].as_str().unwrap_or_default().is_empty() {
                continue;
            }
            let address = ips
                .iter()
                .filter(|ip| ip["interface"].as_u64() == Some(*index as u64))
                .filter_map(|ip| ip["address"].as_str())
                .map(|cidr| cidr.split('/').next().unwrap_or(cidr))
                .find(|address| address.parse::<std::net::Ipv4Addr>().is_ok());
            if let Some(address) = address {
                let dns = result
                    .get("dns")
                    .filter(|dns| {
                        dns["nameservers"]
                            .as_array()
                            .is_some_and(|servers| !servers.is_empty())
                    })
                    .map(|dns| {
                        json!({
                            "Servers": dns["nameservers"],
                            "Searches": dns.get("search").cloned().unwrap_or(json!([])),
                            "Options": dns.get("options").cloned().unwrap_or(json!([])),
                        })
                    });
                return Ok(json!({
                    "InterfaceName": interface["name"],
                    "Address": address,
                    "AddressIPv6": "",
                    "DNS": dns,
                }));
            }
        }
    }
    Err(NetworkError::Config(
        "failed to configure network: no interface with an address".to_string(),
    ))
}

/// Writes the group's `resolv.conf`: its servers (the host's when it names none), searches and
/// options.
fn write_resolv_conf(path: &Path, dns: &DnsConfig) -> Result<(), NetworkError> {
    let mut text = String::new();
    if dns.servers.is_empty() {
        let host = std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
        for line in host
            .lines()
            .filter(|line| line.trim_start().starts_with("nameserver"))
        {
            text.push_str(line.trim());
            text.push('\n');
        }
    }
    for server in &dns.servers {
        text.push_str(&format!("nameserver {server}\n"));
    }
    if !dns.searches.is_empty() {
        text.push_str(&format!("search {}\n", dns.searches.join(" ")));
    }
    if !dns.options.is_empty() {
        text.push_str(&format!("options {}\n", dns.options.join(" ")));
    }
    let write_error = |source| NetworkError::Write {
        path: path.to_path_buf(),
        source,
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(write_error)?;
    }
    let temporary = path.with_extension("tmp");
    std::fs::write(&temporary, text).map_err(write_error)?;
    std::fs::rename(&temporary, path).map_err(write_error)
}

/// The `NOMAD-ADMIN` chain with the rule accepting traffic to the bridge's subnet (Nomad's
/// forwarding rule), made once per node.
fn ensure_admin_chain(config: &NetworkConfig) -> Result<(), NetworkError> {
    let iptables = |args: &[&str]| {
        std::process::Command::new("iptables")
            .args(["-w", "-t", "filter"])
            .args(args)
            .output()
            .map_err(|error| NetworkError::Iptables(format!("running iptables: {error}")))
    };
    let chains = iptables(&["-S"])?;
    if !chains.status.success() {
        return Err(NetworkError::Iptables(format!(
            "listing the filter table: {}",
            String::from_utf8_lossy(&chains.stderr).trim()
        )));
    }
    let listed = String::from_utf8_lossy(&chains.stdout);
    if !listed
        .lines()
        .any(|line| line == format!("-N {ADMIN_CHAIN}"))
    {
        let made = iptables(&["-N", ADMIN_CHAIN])?;
        if !made.status.success() && made.status.code() != Some(1) {
            return Err(NetworkError::Iptables(format!(
                "creating chain {ADMIN_CHAIN}: {}",
                String::from_utf8_lossy(&made.stderr).trim()
            )));
        }
    }
    let rule = [
        "-o",
        config.bridge_network_name.as_str(),
        "-d",
        config.bridge_network_subnet.as_str(),
        "-j",
        "ACCEPT",
    ];
    let exists = iptables(&[&["-C", ADMIN_CHAIN][..], &rule[..]].concat())?;
    if exists.status.success() {
        return Ok(());
    }
    let appended = iptables(&[&["-A", ADMIN_CHAIN][..], &rule[..]].concat())?;
    if !appended.status.success() {
        return Err(NetworkError::Iptables(format!(
            "adding the rule to {ADMIN_CHAIN}: {}",
            String::from_utf8_lossy(&appended.stderr).trim()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_bridge_gateway_is_the_subnets_first_address() {
        assert_eq!(
            bridge_gateway("172.26.64.0/20"),
            Some("172.26.64.1".parse().unwrap())
        );
        assert_eq!(
            bridge_gateway("10.252.43.77/24"),
            Some("10.252.43.1".parse().unwrap())
        );
        assert_eq!(bridge_gateway("10.0.0.0/31"), None);
        assert_eq!(bridge_gateway("fd00::/64"), None);
        assert_eq!(bridge_gateway("nonsense"), None);
    }

    /// Regression: a sidecar registered at 127.0.0.1 (an agent bound to loopback) was dialled
    /// at the bridge's gateway, where nothing mapped its port: only the loopback mapping
    /// existed, so no sidecar in another namespace reached it.
    #[test]
    fn a_sidecars_loopback_port_is_mapped_on_the_bridge_gateway_too() {
        let alloc: Allocation = serde_json::from_value(json!({
            "ID": "a1",
            "TaskGroup": "api",
            "Job": {
                "ID": "countdash",
                "TaskGroups": [{
                    "Name": "api",
                    "Services": [
                        {"Name": "count-api", "PortLabel": "http",
                         "Connect": {"SidecarService": {}}},
                        {"Name": "plain", "PortLabel": "http"}
                    ]
                }]
            },
            "AllocatedResources": {"Shared": {"Ports": [
                {"Label": "http", "Value": 20001, "To": 9001, "HostIP": "127.0.0.1"},
                {"Label": "connect-proxy-count-api", "Value": 20002, "To": 20002, "HostIP": "127.0.0.1"}
            ]}}
        }))
        .unwrap();
        let gateway = "10.252.43.1".parse().unwrap();
        let mappings = sidecar_gateway_mappings(&alloc, gateway);
        assert_eq!(
            mappings,
            vec![cni::PortMapping {
                host_port: 20002,
                container_port: 20002,
                protocol: "tcp".to_string(),
                host_ip: "10.252.43.1".to_string(),
            }]
        );
        // A port on a routable address needs nothing more.
        let mut routable = alloc.clone();
        if let Some(resources) = routable.allocated_resources.as_mut() {
            for port in &mut resources.shared.ports {
                port.host_ip = "192.0.2.10".to_string();
            }
        }
        assert!(sidecar_gateway_mappings(&routable, gateway).is_empty());
    }

    #[test]
    fn the_status_is_the_sandbox_interfaces_first_ipv4_address() {
        let result = json!({
            "cniVersion": "0.4.0",
            "interfaces": [
                {"name": "nomad", "mac": "aa"},
                {"name": "veth1", "mac": "bb"},
                {"name": "eth0", "mac": "cc", "sandbox": "/var/run/netns/x"}
            ],
            "ips": [
                {"version": "4", "interface": 2, "address": "172.26.64.7/20", "gateway": "172.26.64.1"}
            ],
            "dns": {}
        });
        assert_eq!(
            status_from_result(&result).unwrap(),
            json!({"InterfaceName": "eth0", "Address": "172.26.64.7", "AddressIPv6": "", "DNS": null})
        );
        assert!(status_from_result(&json!({"interfaces": []})).is_err());
    }

    #[test]
    fn the_bridge_conflist_takes_the_clients_bridge_settings() {
        let config = NetworkConfig {
            bridge_network_name: "br9".to_string(),
            bridge_network_subnet: "10.9.0.0/24".to_string(),
            bridge_network_hairpin_mode: true,
            ..NetworkConfig::default()
        };
        let list = bridge_conflist(&config);
        assert_eq!(
            cni::plugin_types(&list).unwrap(),
            ["loopback", "bridge", "firewall", "portmap"]
        );
        assert_eq!(list["plugins"][1]["bridge"], "br9");
        assert_eq!(list["plugins"][1]["hairpinMode"], true);
        assert_eq!(
            list["plugins"][1]["ipam"]["ranges"][0][0]["subnet"],
            "10.9.0.0/24"
        );
        assert_eq!(list["plugins"][3]["snat"], true);
        assert_eq!(
            NetworkConfig::default().plugin_dirs(),
            [PathBuf::from("/opt/cni/bin"), PathBuf::from("/usr/lib/cni")]
        );
    }

    #[test]
    fn a_named_cni_config_is_found_and_a_single_plugin_becomes_a_list() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("10-a.conflist"),
            r#"{"cniVersion":"0.4.0","name":"a","plugins":[{"type":"bridge"}]}"#,
        )
        .unwrap();
        std::fs::write(
            dir.path().join("20-b.conf"),
            r#"{"cniVersion":"0.4.0","name":"b","type":"ptp"}"#,
        )
        .unwrap();
        assert_eq!(
            load_conflist(dir.path(), "a").unwrap()["plugins"][0]["type"],
            "bridge"
        );
        let single = load_conflist(dir.path(), "b").unwrap();
        assert_eq!(cni::plugin_types(&single).unwrap(), ["ptp"]);
        let missing = load_conflist(dir.path(), "c").unwrap_err().to_string();
        assert!(missing.contains("\"c\""), "{missing}");
    }
}
