//! Agent configuration: Nomad's agent config file keys (HCL or JSON), merged across `-config`
//! files in order, then overridden by flags, then validated into [`AgentConfig`].
//!
//! Raw (as written) → validated (with defaults and parsed durations) in two stages, so every
//! error names the file and key it came from.
//!
//! Not here: what the agent does with the configuration.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::logging::LogLevel;

/// Flags of `drover agent`, named as Nomad names them (`-dev`, `-config`, `-data-dir`, ...).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct AgentArgs {
    /// Development mode: server and client in one process, state in a temporary directory
    /// unless `-data-dir` is given, listening on 127.0.0.1.
    #[arg(long)]
    pub dev: bool,
    /// Agent configuration file (HCL, with Nomad's keys). May be repeated.
    #[arg(long = "config", value_name = "FILE")]
    pub config: Vec<PathBuf>,
    /// Directory for server and client state.
    #[arg(long = "data-dir", value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Address the HTTP API binds to.
    #[arg(long = "bind", value_name = "ADDR")]
    pub bind: Option<String>,
    /// HTTP API port; 0 picks a free port.
    #[arg(long = "http-port", value_name = "PORT")]
    pub http_port: Option<u16>,
    /// Run a server (jobs, scheduler, state).
    #[arg(long)]
    pub server: bool,
    /// Run a client (the node that runs tasks). Without `-server` it connects to `-servers`.
    #[arg(long)]
    pub client: bool,
    /// The server agents a client connects to, `host:port` separated by commas. drover's
    /// clients reach servers over their HTTP API, so the port is the HTTP port (4646 unless
    /// given).
    #[arg(long = "servers", value_name = "ADDR[,ADDR]", value_delimiter = ',')]
    pub servers: Vec<String>,
    /// The level of the agent's log on stderr: TRACE, DEBUG, INFO, WARN or ERROR.
    #[arg(long = "log-level", value_name = "LEVEL")]
    pub log_level: Option<String>,
    /// Write the agent's log as JSON lines.
    #[arg(long = "log-json")]
    pub log_json: bool,
}

/// The default HTTP port, as Nomad's.
pub const DEFAULT_HTTP_PORT: u16 = 4646;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{key}: {message}")]
    Invalid { key: &'static str, message: String },
}

/// One config file as written. Every field is optional so files merge.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    pub region: Option<String>,
    pub datacenter: Option<String>,
    pub name: Option<String>,
    pub data_dir: Option<PathBuf>,
    pub bind_addr: Option<String>,
    pub log_level: Option<String>,
    pub log_json: Option<bool>,
    pub ports: Option<RawPorts>,
    pub addresses: Option<RawAddresses>,
    pub client: Option<RawClient>,
    pub server: Option<RawServer>,
    /// `plugin "raw_exec" { config { enabled = true } }`
    pub plugin: Option<BTreeMap<String, RawPlugin>>,
    pub telemetry: Option<RawTelemetry>,
    pub etcd: Option<RawEtcd>,
    pub acl: Option<RawAcl>,
    /// Nomad's opt-out of its check for newer versions. drover never checks for updates, so
    /// `true` and `false` both mean what drover always does; accepted so Nomad's configs load.
    pub disable_update_check: Option<bool>,
    /// Nomad's `enable_debug`: an agent without ACLs answers `/v1/agent/pprof` only with it.
    pub enable_debug: Option<bool>,
    /// `vault { enabled = false }`: accepted as what it says, Vault not used. Anything more in
    /// the block is refused by name (drover has no Vault integration).
    pub vault: Option<serde_json::Map<String, serde_json::Value>>,
    /// `ui { enabled = true, base_path = "/nomad" }`: the web UI at `/ui/`.
    pub ui: Option<RawUi>,
}

/// `ui { enabled, base_path }`. Nomad's other `ui` keys (`consul`, `vault`, `label`,
/// `content_security_policy`, `show_cli_hints`) are refused as unknown fields.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawUi {
    pub enabled: Option<bool>,
    /// The path prefix a reverse proxy serves this agent under (it strips it before passing
    /// requests on); written into the UI's links.
    pub base_path: Option<String>,
}

/// `etcd { endpoints = [...], prefix = "..." }`: keep the server's state in an etcd cluster
/// instead of the embedded file.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawEtcd {
    pub endpoints: Option<Vec<String>>,
    pub prefix: Option<String>,
    /// TLS to the members (`https://` endpoints), named as in Nomad's `consul` and `vault`
    /// blocks.
    pub ca_file: Option<String>,
    pub cert_file: Option<String>,
    pub key_file: Option<String>,
    /// etcd auth (`etcdctl auth enable`): the user drover's requests run as.
    pub username: Option<String>,
    pub password: Option<String>,
    /// Parsed so it can be refused by name: the TLS settings are the block's own keys.
    pub tls: Option<serde_json::Value>,
}

/// `acl { enabled = true, token_ttl = "30s", policy_ttl = "30s", role_ttl = "30s", token_min_expiration_ttl =
/// "1m", token_max_expiration_ttl = "24h" }`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAcl {
    pub enabled: Option<bool>,
    pub token_ttl: Option<String>,
    pub policy_ttl: Option<String>,
    pub role_ttl: Option<String>,
    /// The bounds of a new token's expiry, counted from its creation (Go durations).
    pub token_min_expiration_ttl: Option<String>,
    pub token_max_expiration_ttl: Option<String>,
}

/// `telemetry { ... }`: what the agent publishes on `/v1/metrics`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTelemetry {
    pub prometheus_metrics: Option<bool>,
    pub collection_interval: Option<String>,
    pub publish_allocation_metrics: Option<bool>,
    pub publish_node_metrics: Option<bool>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPorts {
    pub http: Option<u16>,
    pub rpc: Option<u16>,
    pub serf: Option<u16>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAddresses {
    pub http: Option<String>,
    pub rpc: Option<String>,
    pub serf: Option<String>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawClient {
    pub enabled: Option<bool>,
    pub node_class: Option<String>,
    /// A new node registers ineligible for scheduling.
    pub default_ineligible: Option<bool>,
    pub node_pool: Option<String>,
    pub max_kill_timeout: Option<String>,
    pub meta: Option<BTreeMap<String, String>>,
    pub options: Option<BTreeMap<String, String>>,
    pub chroot_env: Option<BTreeMap<String, String>>,
    pub reserved: Option<RawReserved>,
    pub servers: Option<Vec<String>>,
    pub cpu_total_compute: Option<u64>,
    pub memory_total_mb: Option<u64>,
    /// The cores tasks may reserve, as a cpuset list (`"0-3,6"`).
    pub reservable_cores: Option<String>,
    pub artifact: Option<RawArtifact>,
    /// `template { wait { min max }, wait_bounds { min max }, block_query_wait }`; Nomad's
    /// other template keys are refused as unknown fields.
    pub template: Option<RawClientTemplate>,
    /// `host_volume "name" { path = "…" read_only = false }`, by name.
    pub host_volume: Option<BTreeMap<String, RawHostVolume>>,
    /// Garbage collection of terminal allocations (Nomad's client keys).
    pub gc_interval: Option<String>,
    pub gc_disk_usage_threshold: Option<f64>,
    pub gc_inode_usage_threshold: Option<f64>,
    pub gc_max_allocs: Option<usize>,
    pub gc_parallel_destroys: Option<usize>,
    /// Group networks (Nomad's client keys): plugin dirs (`:`-separated), the dir of
    /// `cni/<name>` conflists, and the bridge of `mode = "bridge"`.
    pub cni_path: Option<String>,
    pub cni_config_dir: Option<String>,
    pub bridge_network_name: Option<String>,
    pub bridge_network_subnet: Option<String>,
    pub bridge_network_hairpin_mode: Option<bool>,
}

/// The client's group network settings over Nomad's defaults.
fn network_config(
    client: &RawClient,
) -> Result<drover_client::network::NetworkConfig, ConfigError> {
    let mut config = drover_client::network::NetworkConfig::default();
    if let Some(paths) = client.cni_path.as_deref().filter(|paths| !paths.is_empty()) {
        config.cni_path = paths
            .split(':')
            .filter(|path| !path.is_empty())
            .map(std::path::PathBuf::from)
            .collect();
        if let Some(relative) = config.cni_path.iter().find(|path| !path.is_absolute()) {
            return Err(ConfigError::Invalid {
                key: "client.cni_path",
                message: format!("{} is not an absolute path", relative.display()),
            });
        }
    }
    if let Some(dir) = client
        .cni_config_dir
        .as_deref()
        .filter(|dir| !dir.is_empty())
    {
        config.cni_config_dir = std::path::PathBuf::from(dir);
    }
    if let Some(name) = client
        .bridge_network_name
        .as_deref()
        .filter(|name| !name.is_empty())
    {
        if name.len() > 15
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return Err(ConfigError::Invalid {
                key: "client.bridge_network_name",
                message: format!(
                    "{name:?} is not a valid interface name (at most 15 letters, digits, '-', '_' or '.')"
                ),
            });
        }
        config.bridge_network_name = name.to_string();
    }
    if let Some(subnet) = client
        .bridge_network_subnet
        .as_deref()
        .filter(|subnet| !subnet.is_empty())
    {
        let valid = subnet.split_once('/').is_some_and(|(address, prefix)| {
            address.parse::<std::net::Ipv4Addr>().is_ok()
                && prefix
                    .parse::<u8>()
                    .is_ok_and(|prefix| (8..=30).contains(&prefix))
        });
        if !valid {
            return Err(ConfigError::Invalid {
                key: "client.bridge_network_subnet",
                message: format!("{subnet:?} is not an IPv4 CIDR such as 172.26.64.0/20"),
            });
        }
        config.bridge_network_subnet = subnet.to_string();
    }
    if let Some(hairpin) = client.bridge_network_hairpin_mode {
        config.bridge_network_hairpin_mode = hairpin;
    }
    Ok(config)
}

/// `client { host_volume "name" { … } }`: a directory of the host that groups may mount.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHostVolume {
    pub path: Option<String>,
    pub read_only: Option<bool>,
}

/// The client's host volumes as the node advertises them: each path given, absolute and an
/// existing directory (Nomad refuses to start a client whose host volume path is missing).
fn host_volumes(
    raw: Option<&BTreeMap<String, RawHostVolume>>,
) -> Result<BTreeMap<String, drover_structs::ClientHostVolumeConfig>, ConfigError> {
    let mut volumes = BTreeMap::new();
    for (name, volume) in raw.into_iter().flatten() {
        let invalid = |message: String| ConfigError::Invalid {
            key: "client.host_volume",
            message,
        };
        let Some(path) = volume.path.as_deref().filter(|path| !path.is_empty()) else {
            return Err(invalid(format!("host_volume {name:?}: path is required")));
        };
        if !Path::new(path).is_absolute() {
            return Err(invalid(format!(
                "host_volume {name:?}: path {path:?} must be absolute"
            )));
        }
        match std::fs::metadata(path) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => {
                return Err(invalid(format!(
                    "host_volume {name:?}: path {path:?} is not a directory"
                )));
            }
            Err(err) => {
                return Err(invalid(format!(
                    "host_volume {name:?}: path {path:?}: {err}"
                )));
            }
        }
        volumes.insert(
            name.clone(),
            drover_structs::ClientHostVolumeConfig {
                name: name.clone(),
                path: path.to_string(),
                read_only: volume.read_only.unwrap_or(false),
            },
        );
    }
    Ok(volumes)
}

/// `client { template { … } }`: the default `wait` of jobs' templates, bounds on what they
/// may ask, and how long their blocking queries wait.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawClientTemplate {
    pub wait: Option<RawWaitBounds>,
    pub wait_bounds: Option<RawWaitBounds>,
    pub block_query_wait: Option<String>,
}

/// `wait { min max }`: the quiescence of templates without a `wait` of their own (each key
/// over Nomad's default: 5s and 4m; both zero turns it off). `wait_bounds { min max }`: a
/// template's own `wait` is raised to `min` and lowered to `max`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawWaitBounds {
    pub min: Option<String>,
    pub max: Option<String>,
}

impl RawClientTemplate {
    fn validate(&self) -> Result<drover_client::config::TemplateConfig, ConfigError> {
        use drover_client::config::{
            DEFAULT_TEMPLATE_BLOCK_QUERY_WAIT, DEFAULT_TEMPLATE_WAIT_MAX,
            DEFAULT_TEMPLATE_WAIT_MIN, TemplateConfig, TemplateWaitBounds,
        };
        let parse = |key: &'static str, value: &Option<String>| {
            value
                .as_deref()
                .map(|text| parse_duration(key, text))
                .transpose()
        };
        let min_over_max = |key: &'static str| ConfigError::Invalid {
            key,
            message: "max must not be less than min".to_owned(),
        };
        let wait = match &self.wait {
            None => Some((DEFAULT_TEMPLATE_WAIT_MIN, DEFAULT_TEMPLATE_WAIT_MAX)),
            Some(wait) => {
                let min = parse("client.template.wait.min", &wait.min)?
                    .unwrap_or(DEFAULT_TEMPLATE_WAIT_MIN);
                let max = parse("client.template.wait.max", &wait.max)?
                    .unwrap_or(DEFAULT_TEMPLATE_WAIT_MAX);
                if max < min {
                    return Err(min_over_max("client.template.wait"));
                }
                // Nomad turns the wait off only when both are zero.
                (!min.is_zero() || !max.is_zero()).then_some((min, max))
            }
        };
        let wait_bounds = match &self.wait_bounds {
            None => TemplateWaitBounds::default(),
            Some(bounds) => {
                let min = parse("client.template.wait_bounds.min", &bounds.min)?;
                let max = parse("client.template.wait_bounds.max", &bounds.max)?;
                if let (Some(min), Some(max)) = (min, max)
                    && max < min
                {
                    return Err(min_over_max("client.template.wait_bounds"));
                }
                TemplateWaitBounds { min, max }
            }
        };
        let block_query_wait = parse("client.template.block_query_wait", &self.block_query_wait)?
            .unwrap_or(DEFAULT_TEMPLATE_BLOCK_QUERY_WAIT);
        if block_query_wait.is_zero() {
            return Err(ConfigError::Invalid {
                key: "client.template.block_query_wait",
                message: "must be greater than zero".to_owned(),
            });
        }
        Ok(TemplateConfig {
            wait,
            wait_bounds,
            block_query_wait,
        })
    }
}

/// `client { artifact { … } }`: limits of artifact downloads.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawArtifact {
    pub http_read_timeout: Option<String>,
    pub http_max_size: Option<String>,
    pub git_timeout: Option<String>,
    pub decompression_size_limit: Option<String>,
    pub decompression_file_count_limit: Option<u64>,
    /// drover's node-wide artifact cache: entries unused for longer are removed.
    pub cache_max_age: Option<String>,
    /// drover's node-wide artifact cache: its size cap (least recently used entries go).
    pub cache_max_size: Option<String>,
    /// Nomad sandboxes its getter process unless this is true; drover always confines every
    /// artifact write to the task dir, so `false` (the default) is what runs and `true` is
    /// refused with the key named.
    pub disable_filesystem_isolation: Option<bool>,
    /// Nomad passes only these agent variables to its getter process; drover's `git` sees the
    /// agent's whole environment, so a list is refused with the key named.
    pub set_environment_variables: Option<String>,
    /// Timeouts of getters drover does not have: refused with the key named.
    pub gcs_timeout: Option<String>,
    pub hg_timeout: Option<String>,
    pub s3_timeout: Option<String>,
}

impl RawArtifact {
    fn validate(&self) -> Result<drover_client::artifact::ArtifactConfig, ConfigError> {
        for (key, value, getter) in [
            ("client.artifact.gcs_timeout", &self.gcs_timeout, "gcs"),
            ("client.artifact.hg_timeout", &self.hg_timeout, "hg"),
            ("client.artifact.s3_timeout", &self.s3_timeout, "s3"),
        ] {
            if value.is_some() {
                return Err(ConfigError::Invalid {
                    key,
                    message: format!(
                        "drover has no {getter} getter (artifacts come over http, https, git or from local files)"
                    ),
                });
            }
        }
        if self.disable_filesystem_isolation == Some(true) {
            return Err(ConfigError::Invalid {
                key: "client.artifact.disable_filesystem_isolation",
                message: "drover always confines artifact downloads to the task dir; only false \
                          (the default) runs"
                    .to_owned(),
            });
        }
        if self.set_environment_variables.is_some() {
            return Err(ConfigError::Invalid {
                key: "client.artifact.set_environment_variables",
                message: "drover's artifact getters run with the agent's whole environment; \
                          choosing the variables they see is not supported yet"
                    .to_owned(),
            });
        }
        let size = |key: &'static str, value: &Option<String>, default: u64| match value {
            Some(text) => drover_client::artifact::config::parse_byte_size(text)
                .map_err(|message| ConfigError::Invalid { key, message }),
            None => Ok(default),
        };
        let defaults = drover_client::artifact::ArtifactConfig::default();
        Ok(drover_client::artifact::ArtifactConfig {
            http_read_timeout: match &self.http_read_timeout {
                Some(text) => parse_duration("client.artifact.http_read_timeout", text)?,
                None => defaults.http_read_timeout,
            },
            http_max_size: size(
                "client.artifact.http_max_size",
                &self.http_max_size,
                defaults.http_max_size,
            )?,
            git_timeout: match &self.git_timeout {
                Some(text) => parse_duration("client.artifact.git_timeout", text)?,
                None => defaults.git_timeout,
            },
            decompression_size_limit: size(
                "client.artifact.decompression_size_limit",
                &self.decompression_size_limit,
                defaults.decompression_size_limit,
            )?,
            decompression_file_count_limit: self
                .decompression_file_count_limit
                .unwrap_or(defaults.decompression_file_count_limit),
            cache_max_age: match &self.cache_max_age {
                Some(text) => parse_duration("client.artifact.cache_max_age", text)?,
                None => defaults.cache_max_age,
            },
            cache_max_size: size(
                "client.artifact.cache_max_size",
                &self.cache_max_size,
                defaults.cache_max_size,
            )?,
        })
    }
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawReserved {
    pub cpu: Option<u64>,
    pub memory: Option<u64>,
    pub disk: Option<u64>,
    /// Cores kept back for the host, as a cpuset list (`"0"`, `"0-1"`).
    pub cores: Option<String>,
    /// Host ports kept back, as Nomad writes them (`"22,80,8000-8100"`).
    pub reserved_ports: Option<String>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawServer {
    pub enabled: Option<bool>,
    pub bootstrap_expect: Option<u32>,
    pub num_schedulers: Option<u32>,
    pub heartbeat_grace: Option<String>,
    pub min_heartbeat_ttl: Option<String>,
    /// Garbage collection by age (Go durations): how often the leader collects jobs, and how
    /// long a terminal object stays.
    pub job_gc_interval: Option<String>,
    pub job_gc_threshold: Option<String>,
    pub eval_gc_threshold: Option<String>,
    pub batch_eval_gc_threshold: Option<String>,
    pub deployment_gc_threshold: Option<String>,
    pub node_gc_threshold: Option<String>,
    /// How long ago an expired ACL token must have been created before the leader removes it.
    pub acl_token_gc_threshold: Option<String>,
    /// The `iss` of workload identities and the issuer `/.well-known/openid-configuration`
    /// announces (unset: the discovery document is 404, as Nomad).
    pub oidc_issuer: Option<String>,
    /// The largest job submission kept with a job version ("1M" by default), a byte size as
    /// go-humanize reads it.
    pub job_max_source_size: Option<String>,
    /// The largest total of a job's group counts (50 000 by default; 0: no limit).
    pub job_max_count: Option<i64>,
    /// How long a service mesh leaf certificate is valid (a Go duration, "72h" by default).
    pub mesh_leaf_cert_ttl: Option<String>,
    /// What a mesh connection no intention matches gets: "allow" (the default) or "deny".
    pub mesh_default_intention: Option<String>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPlugin {
    pub config: Option<BTreeMap<String, serde_json::Value>>,
}

/// The raw_exec plugin's `denied_envvars`, refusing the plugin's keys drover does not honour.
fn raw_exec_denied_envvars(
    config: Option<&BTreeMap<String, serde_json::Value>>,
) -> Result<Vec<String>, ConfigError> {
    let Some(config) = config else {
        return Ok(Vec::new());
    };
    for key in config.keys() {
        match key.as_str() {
            "enabled" | "denied_envvars" => {}
            "denied_host_uids" | "denied_host_gids" => {
                return Err(ConfigError::Invalid {
                    key: "plugin.raw_exec.config",
                    message: format!(
                        "{key} is not implemented by drover's raw_exec driver; remove it to start the agent"
                    ),
                });
            }
            other => {
                return Err(ConfigError::Invalid {
                    key: "plugin.raw_exec.config",
                    message: format!("unknown key {other:?} (accepted: enabled, denied_envvars)"),
                });
            }
        }
    }
    let invalid = || ConfigError::Invalid {
        key: "plugin.raw_exec.config.denied_envvars",
        message: "must be a list of strings".into(),
    };
    match config.get("denied_envvars") {
        None => Ok(Vec::new()),
        Some(serde_json::Value::Array(items)) => items
            .iter()
            .map(|item| item.as_str().map(str::to_owned).ok_or_else(invalid))
            .collect(),
        Some(_) => Err(invalid()),
    }
}

macro_rules! merge_options {
    ($base:expr, $over:expr, $($field:ident),* $(,)?) => {
        { $( if $over.$field.is_some() { $base.$field = $over.$field; } )* }
    };
}

impl RawConfig {
    /// Reads one config file, HCL or JSON by its content, as Nomad's HCL loader tells them
    /// apart: a file whose first non-blank character is `{` is JSON, whatever its name.
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        let parsed = if text.trim_start().starts_with('{') {
            serde_json::from_str(&text).map_err(|err| err.to_string())
        } else {
            hcl::from_str(&text).map_err(|err| err.to_string())
        };
        parsed.map_err(|message| ConfigError::Parse {
            path: path.to_owned(),
            message,
        })
    }

    /// Layers `other` over `self`: fields set in `other` win, nested blocks merge field by field.
    pub fn merge(&mut self, other: RawConfig) {
        merge_options!(
            self,
            other,
            region,
            datacenter,
            name,
            data_dir,
            bind_addr,
            log_level,
            log_json,
            disable_update_check,
            enable_debug
        );
        if let Some(over) = other.vault {
            self.vault.get_or_insert_with(Default::default).extend(over);
        }
        match (&mut self.ports, other.ports) {
            (Some(base), Some(over)) => merge_options!(base, over, http, rpc, serf),
            (base, over) => {
                if over.is_some() {
                    *base = over;
                }
            }
        }
        match (&mut self.addresses, other.addresses) {
            (Some(base), Some(over)) => merge_options!(base, over, http, rpc, serf),
            (base, over) => {
                if over.is_some() {
                    *base = over;
                }
            }
        }
        match (&mut self.client, other.client) {
            (Some(base), Some(over)) => merge_options!(
                base,
                over,
                enabled,
                node_class,
                node_pool,
                max_kill_timeout,
                meta,
                options,
                chroot_env,
                reserved,
                servers,
                cpu_total_compute,
                memory_total_mb,
                reservable_cores,
                artifact,
                template,
                host_volume,
                gc_interval,
                gc_disk_usage_threshold,
                gc_inode_usage_threshold,
                gc_max_allocs,
                gc_parallel_destroys
            ),
            (base, over) => {
                if over.is_some() {
                    *base = over;
                }
            }
        }
        match (&mut self.server, other.server) {
            (Some(base), Some(over)) => merge_options!(
                base,
                over,
                enabled,
                bootstrap_expect,
                num_schedulers,
                heartbeat_grace,
                min_heartbeat_ttl,
                job_gc_interval,
                job_gc_threshold,
                eval_gc_threshold,
                batch_eval_gc_threshold,
                deployment_gc_threshold,
                node_gc_threshold,
                acl_token_gc_threshold,
                oidc_issuer,
                job_max_source_size,
                mesh_leaf_cert_ttl,
                mesh_default_intention
            ),
            (base, over) => {
                if over.is_some() {
                    *base = over;
                }
            }
        }
        match (&mut self.telemetry, other.telemetry) {
            (Some(base), Some(over)) => merge_options!(
                base,
                over,
                prometheus_metrics,
                collection_interval,
                publish_allocation_metrics,
                publish_node_metrics
            ),
            (base, over) => {
                if over.is_some() {
                    *base = over;
                }
            }
        }
        match (&mut self.etcd, other.etcd) {
            (Some(base), Some(over)) => merge_options!(base, over, endpoints, prefix, tls),
            (base, over) => {
                if over.is_some() {
                    *base = over;
                }
            }
        }
        match (&mut self.ui, other.ui) {
            (Some(base), Some(over)) => merge_options!(base, over, enabled, base_path),
            (base, over) => {
                if over.is_some() {
                    *base = over;
                }
            }
        }
        match (&mut self.acl, other.acl) {
            (Some(base), Some(over)) => merge_options!(
                base,
                over,
                enabled,
                token_ttl,
                policy_ttl,
                role_ttl,
                token_min_expiration_ttl,
                token_max_expiration_ttl
            ),
            (base, over) => {
                if over.is_some() {
                    *base = over;
                }
            }
        }
        if let Some(plugins) = other.plugin {
            self.plugin
                .get_or_insert_with(BTreeMap::new)
                .extend(plugins);
        }
    }
}

/// The validated agent configuration.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub dev: bool,
    pub region: String,
    pub datacenter: String,
    pub name: String,
    /// `None` in dev mode without `-data-dir`: the agent uses a temporary directory and stops
    /// every task when it exits.
    pub data_dir: Option<PathBuf>,
    pub http_addr: IpAddr,
    pub http_port: u16,
    /// A Nomad config's `ports { rpc }`: drover has no RPC listener (its servers answer on the
    /// HTTP port), but an address with this port on this host still names this agent's own
    /// server, for `PUT /v1/agent/servers`.
    pub rpc_port: Option<u16>,
    pub client_enabled: bool,
    pub server_enabled: bool,
    /// `client { servers = [...] }` / `-servers`: the server agents a client without a local
    /// server connects to, reached over their HTTP API (`host:port`, port 4646 by default).
    /// Ignored when this agent runs a server: its client uses that one.
    pub servers: Vec<String>,
    pub max_kill_timeout: Duration,
    /// `client { gc_* }` over Nomad's defaults.
    pub client_gc: ClientGc,
    pub node_class: String,
    /// `client { default_ineligible }`.
    pub default_ineligible: bool,
    pub node_pool: String,
    pub meta: BTreeMap<String, String>,
    pub options: BTreeMap<String, String>,
    pub chroot_env: BTreeMap<String, String>,
    pub reserved_cpu: u64,
    pub reserved_memory_mb: u64,
    pub reserved_disk_mb: u64,
    pub reserved_cores: Vec<u16>,
    pub reserved_ports: String,
    pub cpu_total_compute: Option<u64>,
    pub memory_total_mb: Option<u64>,
    pub reservable_cores: Option<Vec<u16>>,
    /// `client { artifact { … } }`, validated.
    pub artifact: drover_client::artifact::ArtifactConfig,
    /// `client { template { … } }`, validated, with Nomad's defaults.
    pub template: drover_client::config::TemplateConfig,
    /// `client { host_volume "name" { … } }`, validated (each path an existing directory).
    pub host_volumes: BTreeMap<String, drover_structs::ClientHostVolumeConfig>,
    /// `client { cni_path, cni_config_dir, bridge_network_* }`, validated.
    pub network: drover_client::network::NetworkConfig,
    pub num_schedulers: u32,
    /// `server { oidc_issuer = … }`.
    pub oidc_issuer: Option<String>,
    /// `server { mesh_leaf_cert_ttl }` (72 h unless set).
    pub mesh_leaf_cert_ttl: Duration,
    /// `server { mesh_default_intention }`: whether a mesh connection no intention matches is
    /// allowed (true unless set to "deny").
    pub mesh_default_allow: bool,
    pub heartbeat_grace: Duration,
    pub min_heartbeat_ttl: Duration,
    /// `server { job_gc_interval, *_gc_threshold }` over Nomad's defaults, and whether ACLs
    /// are on (for the collection of expired ACL tokens).
    pub gc: drover_server::gc::GcConfig,
    /// `server { job_max_source_size }` in bytes (1 000 000 unless set).
    pub job_max_source_size: usize,
    /// `server { job_max_count }` (50 000 unless set, 0: no limit).
    pub job_max_count: i64,
    pub raw_exec_enabled: bool,
    /// `plugin "raw_exec" { config { denied_envvars = [...] } }`: variables (or `*` globs)
    /// removed from every raw_exec task's environment.
    pub raw_exec_denied_envvars: Vec<String>,
    /// `plugin "exec" { config { allow_caps = [...] } }`; `None` keeps the default set.
    pub exec_allow_caps: Option<Vec<String>>,
    /// `plugin "docker" { config { … } }`: the engine's endpoint and what docker tasks may ask for.
    pub docker: drover_docker::DockerConfig,
    pub telemetry: Telemetry,
    /// `etcd { … }`: the server's state in etcd; `None` keeps it in `<data_dir>/server`.
    pub etcd: Option<EtcdSettings>,
    /// `acl { … }`, validated.
    pub acl: AclConfig,
    /// `ui { … }`, validated.
    pub ui: drover_ui::UiConfig,
    /// `log_level` / `-log-level`: what the agent writes to stderr (INFO unless given).
    pub log_level: LogLevel,
    /// `log_json` / `-log-json`: stderr lines as JSON.
    pub log_json: bool,
    /// `enable_debug`: `/v1/agent/pprof` answers without ACLs. On under `-dev`, which a
    /// file's `false` does not undo (Nomad merges it as a flag that only turns on).
    pub enable_debug: bool,
}

/// The validated `etcd` block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdSettings {
    /// Client URLs (`http://host:port`).
    pub endpoints: Vec<String>,
    /// The prefix of this cluster's keys (`drover/` unless given).
    pub prefix: String,
    /// TLS to the members, when the endpoints are `https://`.
    pub tls: Option<drover_etcd::EtcdTls>,
    /// etcd auth's user and password.
    pub credentials: Option<drover_etcd::Credentials>,
}

impl EtcdSettings {
    fn from_raw(raw: RawEtcd, server_enabled: bool) -> Result<Self, ConfigError> {
        if !server_enabled {
            return Err(ConfigError::Invalid {
                key: "etcd",
                message:
                    "the etcd block holds the server's state; it needs server { enabled = true }"
                        .into(),
            });
        }
        if raw.tls.is_some() {
            return Err(ConfigError::Invalid {
                key: "etcd.tls",
                message: "TLS to etcd is set in the etcd block itself: ca_file, cert_file and \
                          key_file, with https:// endpoints"
                    .into(),
            });
        }
        let endpoints: Vec<String> = raw
            .endpoints
            .unwrap_or_default()
            .into_iter()
            .map(|endpoint| endpoint.trim().to_owned())
            .filter(|endpoint| !endpoint.is_empty())
            .collect();
        if endpoints.is_empty() {
            return Err(ConfigError::Invalid {
                key: "etcd.endpoints",
                message: "give the client URLs of the etcd members (endpoints = [\"http://127.0.0.1:2379\"])"
                    .into(),
            });
        }
        if let Some(bad) = endpoints
            .iter()
            .find(|endpoint| !endpoint.starts_with("http://") && !endpoint.starts_with("https://"))
        {
            return Err(ConfigError::Invalid {
                key: "etcd.endpoints",
                message: format!("{bad:?} is not an http:// or https:// URL"),
            });
        }
        let secure = endpoints
            .iter()
            .filter(|endpoint| endpoint.starts_with("https://"))
            .count();
        if secure != 0 && secure != endpoints.len() {
            return Err(ConfigError::Invalid {
                key: "etcd.endpoints",
                message: "give every endpoint as https:// or every one as http://, not both".into(),
            });
        }
        let file = |value: Option<String>| value.filter(|path| !path.trim().is_empty());
        let (ca_file, cert_file, key_file) =
            (file(raw.ca_file), file(raw.cert_file), file(raw.key_file));
        let tls = if secure == 0 {
            if let Some(key) = [
                ("etcd.ca_file", &ca_file),
                ("etcd.cert_file", &cert_file),
                ("etcd.key_file", &key_file),
            ]
            .into_iter()
            .find_map(|(key, value)| value.is_some().then_some(key))
            {
                return Err(ConfigError::Invalid {
                    key,
                    message: "TLS files need https:// endpoints".into(),
                });
            }
            None
        } else {
            if cert_file.is_some() != key_file.is_some() {
                return Err(ConfigError::Invalid {
                    key: if cert_file.is_some() {
                        "etcd.key_file"
                    } else {
                        "etcd.cert_file"
                    },
                    message: "a client certificate needs both cert_file and key_file".into(),
                });
            }
            Some(drover_etcd::EtcdTls {
                ca_file: ca_file.map(Into::into),
                cert_file: cert_file.map(Into::into),
                key_file: key_file.map(Into::into),
            })
        };
        let credentials = match (raw.username, raw.password) {
            (None, None) => None,
            (Some(username), Some(password)) if !username.is_empty() => {
                Some(drover_etcd::Credentials { username, password })
            }
            (Some(_), Some(_)) => {
                return Err(ConfigError::Invalid {
                    key: "etcd.username",
                    message: "the etcd user may not be empty".into(),
                });
            }
            (Some(_), None) => {
                return Err(ConfigError::Invalid {
                    key: "etcd.password",
                    message: "etcd auth needs the user's password as well".into(),
                });
            }
            (None, Some(_)) => {
                return Err(ConfigError::Invalid {
                    key: "etcd.username",
                    message: "etcd auth needs the user's name as well".into(),
                });
            }
        };
        let prefix = raw.prefix.unwrap_or_else(|| "drover/".into());
        if prefix.is_empty() {
            return Err(ConfigError::Invalid {
                key: "etcd.prefix",
                message: "the prefix may not be empty (it keeps drover's keys apart from others)"
                    .into(),
            });
        }
        Ok(Self {
            endpoints,
            prefix,
            tls,
            credentials,
        })
    }
}

/// The validated `acl` block. A server reads tokens and policies from its state on every
/// request; a client-only agent asks its servers and keeps their answers: a token's identity
/// for `token_ttl`, its policies for `policy_ttl`, and those of a token with roles for no
/// longer than `role_ttl` either (the servers resolve roles into policies, so a role's change
/// is seen once that answer is older than `role_ttl`; Nomad's client cache lifetimes, 30 s by
/// default). On an agent with a server the three bound nothing, so they are refused there.
/// `token_min_expiration_ttl` and `token_max_expiration_ttl` bound how far from its creation
/// a new token may expire (Nomad's 1 minute and 24 hours); tokens are made by servers, so a
/// client-only agent refuses them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AclConfig {
    pub enabled: bool,
    pub token_ttl: Duration,
    pub policy_ttl: Duration,
    pub role_ttl: Duration,
    pub token_min_expiration_ttl: Duration,
    pub token_max_expiration_ttl: Duration,
}

/// Nomad's `ACLTokenMinExpirationTTL` and `ACLTokenMaxExpirationTTL`.
pub const DEFAULT_TOKEN_MIN_EXPIRATION_TTL: Duration = Duration::from_secs(60);
pub const DEFAULT_TOKEN_MAX_EXPIRATION_TTL: Duration = Duration::from_secs(24 * 3600);

impl AclConfig {
    fn from_raw(raw: Option<&RawAcl>, server_enabled: bool) -> Result<Self, ConfigError> {
        let raw = raw.cloned().unwrap_or_default();
        let cache_lifetime = |key: &'static str, value: &Option<String>| match value {
            Some(_) if server_enabled => Err(ConfigError::Invalid {
                key,
                message: "it bounds how long a client-only agent keeps its servers' answers \
                          about a token; this agent runs a server, which reads tokens and \
                          policies from its own state on every request: remove it here"
                    .into(),
            }),
            Some(text) => parse_duration(key, text),
            None => Ok(Duration::from_secs(30)),
        };
        let expiration_bound =
            |key: &'static str, value: &Option<String>, default: Duration| match value {
                Some(_) if !server_enabled => Err(ConfigError::Invalid {
                    key,
                    message: "it bounds the expiry of the tokens a server creates; this agent \
                              runs no server: set it on the servers"
                        .into(),
                }),
                Some(text) => {
                    let bound = parse_duration(key, text)?;
                    if bound.is_zero() {
                        return Err(ConfigError::Invalid {
                            key,
                            message: "should be greater than 0s (leave it out for the default)"
                                .into(),
                        });
                    }
                    Ok(bound)
                }
                None => Ok(default),
            };
        let token_min_expiration_ttl = expiration_bound(
            "acl.token_min_expiration_ttl",
            &raw.token_min_expiration_ttl,
            DEFAULT_TOKEN_MIN_EXPIRATION_TTL,
        )?;
        let token_max_expiration_ttl = expiration_bound(
            "acl.token_max_expiration_ttl",
            &raw.token_max_expiration_ttl,
            DEFAULT_TOKEN_MAX_EXPIRATION_TTL,
        )?;
        if token_min_expiration_ttl > token_max_expiration_ttl {
            return Err(ConfigError::Invalid {
                key: "acl.token_min_expiration_ttl",
                message: format!(
                    "{} is more than token_max_expiration_ttl ({}): no token could expire",
                    drover_structs::DurationNs::from(token_min_expiration_ttl),
                    drover_structs::DurationNs::from(token_max_expiration_ttl),
                ),
            });
        }
        Ok(AclConfig {
            enabled: raw.enabled.unwrap_or(false),
            token_ttl: cache_lifetime("acl.token_ttl", &raw.token_ttl)?,
            policy_ttl: cache_lifetime("acl.policy_ttl", &raw.policy_ttl)?,
            role_ttl: cache_lifetime("acl.role_ttl", &raw.role_ttl)?,
            token_min_expiration_ttl,
            token_max_expiration_ttl,
        })
    }
}

/// The validated `telemetry` block. Nomad's defaults: nothing published but the agent's own
/// runtime and the server's gauges, collected every second; `-dev` turns everything on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Telemetry {
    /// Whether `/v1/metrics?format=prometheus` answers (otherwise 415, as Nomad).
    pub prometheus_metrics: bool,
    /// How often the client samples node and task usage for the gauges.
    pub collection_interval: Duration,
    /// Publish per-task usage gauges (`nomad.client.allocs.*`).
    pub publish_allocation_metrics: bool,
    /// Publish the node's usage gauges (`nomad.client.host.*`, `nomad.client.uptime`).
    pub publish_node_metrics: bool,
}

impl Telemetry {
    fn from_raw(raw: Option<RawTelemetry>, dev: bool) -> Result<Self, ConfigError> {
        let raw = raw.unwrap_or_default();
        let collection_interval = match &raw.collection_interval {
            Some(text) => parse_duration("telemetry.collection_interval", text)?,
            None => Duration::from_secs(1),
        };
        if collection_interval.is_zero() {
            return Err(ConfigError::Invalid {
                key: "telemetry.collection_interval",
                message: "must be longer than zero".into(),
            });
        }
        Ok(Telemetry {
            prometheus_metrics: raw.prometheus_metrics.unwrap_or(dev),
            collection_interval,
            publish_allocation_metrics: raw.publish_allocation_metrics.unwrap_or(dev),
            publish_node_metrics: raw.publish_node_metrics.unwrap_or(dev),
        })
    }
}

/// The client's garbage collection of terminal allocations (`client { gc_* }`).
#[derive(Debug, Clone, PartialEq)]
pub struct ClientGc {
    pub interval: Duration,
    pub disk_usage_threshold: f64,
    pub inode_usage_threshold: f64,
    pub max_allocs: usize,
    /// At least 1: Nomad's client takes a smaller value as 1.
    pub parallel_destroys: usize,
}

impl ClientGc {
    fn from_raw(client: &RawClient) -> Result<Self, ConfigError> {
        use drover_client::node as defaults;
        Ok(Self {
            interval: match &client.gc_interval {
                Some(text) => parse_duration("client.gc_interval", text)?,
                None => defaults::DEFAULT_GC_INTERVAL,
            },
            disk_usage_threshold: client
                .gc_disk_usage_threshold
                .unwrap_or(defaults::DEFAULT_GC_DISK_USAGE_THRESHOLD),
            inode_usage_threshold: client
                .gc_inode_usage_threshold
                .unwrap_or(defaults::DEFAULT_GC_INODE_USAGE_THRESHOLD),
            max_allocs: client
                .gc_max_allocs
                .unwrap_or(defaults::DEFAULT_GC_MAX_ALLOCS),
            parallel_destroys: client
                .gc_parallel_destroys
                .unwrap_or(defaults::DEFAULT_GC_PARALLEL_DESTROYS)
                .max(1),
        })
    }
}

/// The server block's GC keys over Nomad's defaults; `job_gc_interval` must be positive, as
/// Nomad's agent requires. Expired ACL tokens are collected only with ACLs on.
fn server_gc(
    server: &RawServer,
    acl: &AclConfig,
) -> Result<drover_server::gc::GcConfig, ConfigError> {
    let mut gc = drover_server::gc::GcConfig {
        acl_enabled: acl.enabled,
        ..drover_server::gc::GcConfig::default()
    };
    let keys: [(&'static str, &Option<String>, &mut Duration); 7] = [
        (
            "server.job_gc_interval",
            &server.job_gc_interval,
            &mut gc.job_gc_interval,
        ),
        (
            "server.job_gc_threshold",
            &server.job_gc_threshold,
            &mut gc.job_gc_threshold,
        ),
        (
            "server.eval_gc_threshold",
            &server.eval_gc_threshold,
            &mut gc.eval_gc_threshold,
        ),
        (
            "server.batch_eval_gc_threshold",
            &server.batch_eval_gc_threshold,
            &mut gc.batch_eval_gc_threshold,
        ),
        (
            "server.deployment_gc_threshold",
            &server.deployment_gc_threshold,
            &mut gc.deployment_gc_threshold,
        ),
        (
            "server.node_gc_threshold",
            &server.node_gc_threshold,
            &mut gc.node_gc_threshold,
        ),
        (
            "server.acl_token_gc_threshold",
            &server.acl_token_gc_threshold,
            &mut gc.acl_token_gc_threshold,
        ),
    ];
    for (key, text, value) in keys {
        if let Some(text) = text {
            *value = parse_duration(key, text)?;
        }
    }
    if gc.job_gc_interval.is_zero() {
        return Err(ConfigError::Invalid {
            key: "server.job_gc_interval",
            message: "job_gc_interval should be greater than 0s".to_owned(),
        });
    }
    Ok(gc)
}

fn parse_duration(key: &'static str, text: &str) -> Result<Duration, ConfigError> {
    drover_jobspec::parse_go_duration(text)
        .map(Duration::from_nanos)
        .map_err(|err| ConfigError::Invalid {
            key,
            message: format!("{err} (a Go duration such as \"30s\" or \"1m30s\")"),
        })
}

/// A cpuset list (`"0-3,6"`) of the config key `key`.
fn parse_core_list(key: &'static str, text: &str) -> Result<Vec<u16>, ConfigError> {
    drover_driver::parse_cpu_list(text)
        .filter(|cores| !cores.is_empty())
        .ok_or_else(|| ConfigError::Invalid {
            key,
            message: format!("{text:?} is not a list of cores such as \"0-3,6\""),
        })
}

/// A host port list (`"22,80,8000-8100"`) of the config key `key`, kept as written.
fn check_port_list(key: &'static str, text: &str) -> Result<String, ConfigError> {
    let valid_port = |part: &str| part.trim().parse::<u16>().is_ok_and(|port| port > 0);
    let valid = text
        .split(',')
        .filter(|part| !part.trim().is_empty())
        .all(|part| match part.split_once('-') {
            Some((low, high)) => {
                valid_port(low)
                    && valid_port(high)
                    && low.trim().parse::<u16>().ok() <= high.trim().parse::<u16>().ok()
            }
            None => valid_port(part),
        });
    if valid {
        Ok(text.to_string())
    } else {
        Err(ConfigError::Invalid {
            key,
            message: format!("{text:?} is not a list of ports such as \"22,8000-8100\""),
        })
    }
}

fn default_node_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_owned())
        .ok()
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "drover".to_owned())
}

/// `vault { enabled = false }` (or an empty block) asks for nothing drover lacks; Vault
/// enabled, or any other key, is refused by name.
fn check_vault(
    vault: Option<&serde_json::Map<String, serde_json::Value>>,
) -> Result<(), ConfigError> {
    let Some(vault) = vault else {
        return Ok(());
    };
    if let Some(key) = vault.keys().find(|key| key.as_str() != "enabled") {
        return Err(ConfigError::Invalid {
            key: "vault",
            message: format!(
                "vault.{key} is not supported: drover has no Vault integration; only `enabled = false` may be set"
            ),
        });
    }
    match vault.get("enabled") {
        None | Some(serde_json::Value::Bool(false)) => Ok(()),
        Some(other) => Err(ConfigError::Invalid {
            key: "vault.enabled",
            message: format!(
                "{other} is not supported: drover has no Vault integration; set enabled = false or leave the vault block out"
            ),
        }),
    }
}

impl AgentConfig {
    /// Reads the `-config` files in order, applies the flags over them, then defaults.
    pub fn load(args: &AgentArgs) -> Result<Self, ConfigError> {
        let mut raw = RawConfig::default();
        for path in &args.config {
            raw.merge(RawConfig::from_file(path)?);
        }
        Self::from_raw(raw, args)
    }

    pub fn from_raw(mut raw: RawConfig, args: &AgentArgs) -> Result<Self, ConfigError> {
        if let Some(dir) = &args.data_dir {
            raw.data_dir = Some(dir.clone());
        }
        if let Some(bind) = &args.bind {
            raw.bind_addr = Some(bind.clone());
        }
        if let Some(port) = args.http_port {
            raw.ports.get_or_insert_with(RawPorts::default).http = Some(port);
        }
        check_vault(raw.vault.as_ref())?;
        let dev = args.dev;
        let mut client = raw.client.unwrap_or_default();
        let mut server = raw.server.unwrap_or_default();
        if args.client {
            client.enabled = Some(true);
        }
        if args.server {
            server.enabled = Some(true);
        }
        if !args.servers.is_empty() {
            client.servers = Some(args.servers.clone());
        }

        let bind_text = raw
            .addresses
            .as_ref()
            .and_then(|addresses| addresses.http.clone())
            .or(raw.bind_addr)
            .unwrap_or_else(|| if dev { "127.0.0.1" } else { "0.0.0.0" }.to_owned());
        let http_addr: IpAddr = bind_text.parse().map_err(|_| ConfigError::Invalid {
            key: "bind_addr",
            message: format!("{bind_text:?} is not an IP address"),
        })?;

        let data_dir = match raw.data_dir {
            Some(dir) if dir.as_os_str().is_empty() => {
                return Err(ConfigError::Invalid {
                    key: "data_dir",
                    message: "must not be empty".into(),
                });
            }
            Some(dir) => Some(
                std::path::absolute(&dir).map_err(|err| ConfigError::Invalid {
                    key: "data_dir",
                    message: format!("{}: {err}", dir.display()),
                })?,
            ),
            None if dev => None,
            None => {
                return Err(ConfigError::Invalid {
                    key: "data_dir",
                    message:
                        "must be set outside dev mode (use -data-dir or data_dir in a -config file)"
                            .into(),
                });
            }
        };

        let raw_exec_enabled = raw
            .plugin
            .as_ref()
            .and_then(|plugins| plugins.get("raw_exec"))
            .and_then(|plugin| plugin.config.as_ref())
            .and_then(|config| config.get("enabled"))
            .map(|enabled| enabled.as_bool().unwrap_or(false))
            // drover enables raw_exec by default: it runs tasks in their own cgroup, which is
            // what makes it safe to measure and kill.
            .unwrap_or(true);

        let raw_exec_plugin = raw
            .plugin
            .as_ref()
            .and_then(|plugins| plugins.get("raw_exec"))
            .and_then(|plugin| plugin.config.as_ref());
        let raw_exec_denied_envvars = raw_exec_denied_envvars(raw_exec_plugin)?;

        let exec_allow_caps = raw
            .plugin
            .as_ref()
            .and_then(|plugins| plugins.get("exec"))
            .and_then(|plugin| plugin.config.as_ref())
            .and_then(|config| config.get("allow_caps"))
            .and_then(|caps| caps.as_array())
            .map(|caps| {
                caps.iter()
                    .filter_map(|cap| cap.as_str().map(str::to_string))
                    .collect()
            });

        let docker_config: Option<serde_json::Map<String, serde_json::Value>> = raw
            .plugin
            .as_ref()
            .and_then(|plugins| plugins.get("docker"))
            .and_then(|plugin| plugin.config.as_ref())
            .map(|config| config.clone().into_iter().collect());
        let docker = drover_docker::DockerConfig::from_plugin_config(docker_config.as_ref())
            .map_err(|error| ConfigError::Invalid {
                key: "plugin.docker.config",
                message: error.to_string(),
            })?;

        let network = network_config(&client)?;
        // `-client` alone is a client of remote servers; `-dev` alone runs both. Under `-dev`
        // a config file's `client { enabled = false }` does not take the client away: Nomad
        // merges `enabled` as a flag that only turns on (`ClientConfig.Merge`), and its own
        // test agents rely on it (a `-dev` agent with such a file waits for its node).
        let client_enabled = dev || client.enabled.unwrap_or(false);
        let server_enabled = server.enabled.unwrap_or(dev && !args.client);
        if !client_enabled && !server_enabled {
            return Err(ConfigError::Invalid {
                key: "client.enabled",
                message: "neither client nor server is enabled; enable at least one (or use -dev)"
                    .into(),
            });
        }
        let servers: Vec<String> = client
            .servers
            .clone()
            .unwrap_or_default()
            .into_iter()
            .map(|address| address.trim().to_owned())
            .filter(|address| !address.is_empty())
            .collect();
        if client_enabled && !server_enabled && servers.is_empty() {
            return Err(ConfigError::Invalid {
                key: "client.servers",
                message: "a client without a local server needs the addresses of its servers \
                          (-servers=HOST:PORT or client { servers = [\"HOST:PORT\"] })"
                    .into(),
            });
        }

        let telemetry = Telemetry::from_raw(raw.telemetry, dev)?;
        let etcd = match raw.etcd {
            Some(etcd) => Some(EtcdSettings::from_raw(etcd, server_enabled)?),
            None => None,
        };
        let log_level = match args.log_level.as_deref().or(raw.log_level.as_deref()) {
            Some(text) => text.parse().map_err(|_| ConfigError::Invalid {
                key: "log_level",
                message: format!("{text:?} is not one of TRACE, DEBUG, INFO, WARN, ERROR"),
            })?,
            None => LogLevel::Info,
        };
        let log_json = args.log_json || raw.log_json.unwrap_or(false);
        let enable_debug = dev || raw.enable_debug.unwrap_or(false);
        let acl = AclConfig::from_raw(raw.acl.as_ref(), server_enabled)?;
        let ui = drover_ui::UiConfig {
            enabled: raw.ui.as_ref().and_then(|ui| ui.enabled).unwrap_or(true),
            base_path: match raw.ui.as_ref().and_then(|ui| ui.base_path.as_deref()) {
                Some(text) => {
                    drover_ui::normalize_base_path(text).map_err(|error| ConfigError::Invalid {
                        key: "ui.base_path",
                        message: error.to_string(),
                    })?
                }
                None => String::new(),
            },
        };
        Ok(Self {
            dev,
            region: raw.region.unwrap_or_else(|| "global".into()),
            datacenter: raw.datacenter.unwrap_or_else(|| "dc1".into()),
            name: raw.name.unwrap_or_else(default_node_name),
            data_dir,
            http_addr,
            http_port: raw
                .ports
                .as_ref()
                .and_then(|ports| ports.http)
                .unwrap_or(DEFAULT_HTTP_PORT),
            rpc_port: raw.ports.as_ref().and_then(|ports| ports.rpc),
            client_enabled,
            server_enabled,
            servers,
            client_gc: ClientGc::from_raw(&client)?,
            max_kill_timeout: match &client.max_kill_timeout {
                Some(text) => parse_duration("client.max_kill_timeout", text)?,
                None => Duration::from_secs(30),
            },
            node_class: client.node_class.unwrap_or_default(),
            default_ineligible: client.default_ineligible.unwrap_or(false),
            node_pool: client.node_pool.unwrap_or_else(|| "default".into()),
            meta: client.meta.unwrap_or_default(),
            options: client.options.unwrap_or_default(),
            chroot_env: client.chroot_env.unwrap_or_default(),
            reserved_cpu: client.reserved.as_ref().and_then(|r| r.cpu).unwrap_or(0),
            reserved_memory_mb: client.reserved.as_ref().and_then(|r| r.memory).unwrap_or(0),
            reserved_disk_mb: client.reserved.as_ref().and_then(|r| r.disk).unwrap_or(0),
            reserved_cores: match client.reserved.as_ref().and_then(|r| r.cores.as_deref()) {
                Some(text) => parse_core_list("client.reserved.cores", text)?,
                None => Vec::new(),
            },
            reserved_ports: match client
                .reserved
                .as_ref()
                .and_then(|r| r.reserved_ports.as_deref())
            {
                Some(text) => check_port_list("client.reserved.reserved_ports", text)?,
                None => String::new(),
            },
            cpu_total_compute: client.cpu_total_compute,
            memory_total_mb: client.memory_total_mb,
            reservable_cores: match client.reservable_cores.as_deref() {
                Some(text) => Some(parse_core_list("client.reservable_cores", text)?),
                None => None,
            },
            artifact: client.artifact.clone().unwrap_or_default().validate()?,
            template: client.template.clone().unwrap_or_default().validate()?,
            host_volumes: host_volumes(client.host_volume.as_ref())?,
            network,
            num_schedulers: server.num_schedulers.unwrap_or(2).max(1),
            oidc_issuer: server
                .oidc_issuer
                .clone()
                .filter(|issuer| !issuer.is_empty()),
            mesh_leaf_cert_ttl: match &server.mesh_leaf_cert_ttl {
                Some(text) => {
                    let ttl = parse_duration("server.mesh_leaf_cert_ttl", text)?;
                    if ttl < Duration::from_secs(1) {
                        return Err(ConfigError::Invalid {
                            key: "server.mesh_leaf_cert_ttl",
                            message: format!("{text:?} is shorter than the least, 1s"),
                        });
                    }
                    ttl
                }
                None => Duration::from_secs(72 * 3600),
            },
            mesh_default_allow: match server.mesh_default_intention.as_deref() {
                None | Some("allow") => true,
                Some("deny") => false,
                Some(other) => {
                    return Err(ConfigError::Invalid {
                        key: "server.mesh_default_intention",
                        message: format!("{other:?} is neither \"allow\" nor \"deny\""),
                    });
                }
            },
            heartbeat_grace: match &server.heartbeat_grace {
                Some(text) => parse_duration("server.heartbeat_grace", text)?,
                None => Duration::from_secs(10),
            },
            min_heartbeat_ttl: match &server.min_heartbeat_ttl {
                Some(text) => parse_duration("server.min_heartbeat_ttl", text)?,
                None => Duration::from_secs(10),
            },
            gc: server_gc(&server, &acl)?,
            job_max_source_size: match &server.job_max_source_size {
                Some(text) => drover_client::artifact::config::parse_byte_size(text)
                    .ok()
                    .and_then(|bytes| usize::try_from(bytes).ok())
                    .ok_or_else(|| ConfigError::Invalid {
                        key: "server.job_max_source_size",
                        message: format!(
                            "failed to parse max job source bytes: {text:?} is not a size such as \"1M\" or \"512KiB\""
                        ),
                    })?,
                None => drover_server::DEFAULT_JOB_MAX_SOURCE_SIZE,
            },
            job_max_count: match server.job_max_count {
                Some(count) if count < 0 => {
                    return Err(ConfigError::Invalid {
                        key: "server.job_max_count",
                        message: format!("job_max_count ({count}) cannot be negative"),
                    });
                }
                Some(count) => count,
                None => drover_server::DEFAULT_JOB_MAX_COUNT,
            },
            raw_exec_enabled,
            raw_exec_denied_envvars,
            exec_allow_caps,
            docker,
            telemetry,
            etcd,
            acl,
            ui,
            log_level,
            log_json,
            enable_debug,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev_args() -> AgentArgs {
        AgentArgs {
            dev: true,
            ..AgentArgs::default()
        }
    }

    /// Nomad's api suite writes its agent config as JSON to a file named without `.json`;
    /// Nomad's loader reads it by content, and so does drover's.
    #[test]
    fn a_json_config_file_without_the_json_extension_is_read_as_json() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("nomad123");
        std::fs::write(
            &path,
            r#"  {"region": "eu", "disable_update_check": true, "vault": {"enabled": false}}"#,
        )
        .expect("write");
        let raw = RawConfig::from_file(&path).expect("JSON by content");
        assert_eq!(raw.region.as_deref(), Some("eu"));
        let hcl_path = dir.path().join("agent.json");
        std::fs::write(&hcl_path, "region = \"us\"\n").expect("write");
        let raw = RawConfig::from_file(&hcl_path).expect("HCL by content, whatever the name");
        assert_eq!(raw.region.as_deref(), Some("us"));
    }

    #[test]
    fn disable_update_check_and_a_disabled_vault_are_accepted_and_vault_otherwise_refused() {
        let accepted: RawConfig =
            hcl::from_str("disable_update_check = true\nvault {\n  enabled = false\n}\n")
                .expect("parses");
        AgentConfig::from_raw(accepted, &dev_args()).expect("nothing asked that drover lacks");
        for (text, named) in [
            ("vault {\n  enabled = true\n}\n", "vault.enabled"),
            (
                "vault {\n  enabled = false\n  address = \"https://vault:8200\"\n}\n",
                "vault.address",
            ),
        ] {
            let raw: RawConfig = hcl::from_str(text).expect("parses");
            let error = AgentConfig::from_raw(raw, &dev_args())
                .expect_err("refused")
                .to_string();
            assert!(error.contains(named), "{error}");
            assert!(error.contains("no Vault integration"), "{error}");
        }
    }

    #[test]
    fn raw_exec_denied_envvars_are_read_and_unknown_plugin_keys_refused() {
        let text = "plugin \"raw_exec\" {\n  config {\n    enabled = true\n    denied_envvars = [\"*_TOKEN\", \"AWS_SECRET_KEY\"]\n  }\n}\n";
        let raw: RawConfig = hcl::from_str(text).expect("parses");
        let config = AgentConfig::from_raw(raw, &dev_args()).expect("valid");
        assert_eq!(
            config.raw_exec_denied_envvars,
            vec!["*_TOKEN".to_owned(), "AWS_SECRET_KEY".to_owned()]
        );
        for (text, named) in [
            (
                "plugin \"raw_exec\" {\n  config {\n    denied_host_uids = \"0\"\n  }\n}\n",
                "denied_host_uids is not implemented",
            ),
            (
                "plugin \"raw_exec\" {\n  config {\n    no_cgroups = true\n  }\n}\n",
                "unknown key \"no_cgroups\"",
            ),
            (
                "plugin \"raw_exec\" {\n  config {\n    denied_envvars = \"X\"\n  }\n}\n",
                "plugin.raw_exec.config.denied_envvars: must be a list of strings",
            ),
        ] {
            let raw: RawConfig = hcl::from_str(text).expect("parses");
            let error = AgentConfig::from_raw(raw, &dev_args())
                .expect_err("refused")
                .to_string();
            assert!(error.contains(named), "{error}");
        }
    }

    #[test]
    fn dev_defaults() {
        let config = AgentConfig::from_raw(RawConfig::default(), &dev_args()).expect("valid");
        assert_eq!(config.region, "global");
        assert_eq!(config.datacenter, "dc1");
        assert_eq!(config.http_port, 4646);
        assert_eq!(config.http_addr.to_string(), "127.0.0.1");
        assert!(config.data_dir.is_none());
        assert!(config.client_enabled && config.server_enabled);
        assert_eq!(config.max_kill_timeout, Duration::from_secs(30));
    }

    #[test]
    fn hcl_file_with_nomad_keys_and_flag_overrides() {
        let raw: RawConfig = hcl::from_str(
            r#"
            region     = "eu"
            datacenter = "fra1"
            name       = "worker-1"
            data_dir   = "/var/lib/drover"
            bind_addr  = "0.0.0.0"
            ports {
              http = 5656
            }
            client {
              enabled          = true
              max_kill_timeout = "1m"
              meta {
                rack = "r1"
              }
              artifact {
                http_read_timeout              = "5m"
                http_max_size                  = "1GiB"
                git_timeout                    = "2m"
                decompression_size_limit       = "10GB"
                decompression_file_count_limit = 100
                disable_filesystem_isolation   = false
              }
            }
            server {
              enabled = true
            }
            plugin "raw_exec" {
              config {
                enabled = true
              }
            }
            "#,
        )
        .expect("parses");
        let args = AgentArgs {
            http_port: Some(0),
            ..AgentArgs::default()
        };
        let config = AgentConfig::from_raw(raw, &args).expect("valid");
        assert_eq!(config.region, "eu");
        assert_eq!(config.datacenter, "fra1");
        assert_eq!(config.name, "worker-1");
        assert_eq!(config.http_port, 0, "the flag wins over the file");
        assert_eq!(config.max_kill_timeout, Duration::from_secs(60));
        assert_eq!(config.meta.get("rack").map(String::as_str), Some("r1"));
        assert!(config.raw_exec_enabled);
        assert_eq!(config.artifact.http_read_timeout, Duration::from_secs(300));
        assert_eq!(config.artifact.http_max_size, 1 << 30);
        assert_eq!(config.artifact.git_timeout, Duration::from_secs(120));
        assert_eq!(config.artifact.decompression_size_limit, 10_000_000_000);
        assert_eq!(config.artifact.decompression_file_count_limit, 100);
    }

    #[test]
    fn group_network_keys_take_nomads_defaults_and_are_validated() {
        let raw: RawConfig = hcl::from_str("client {\n  enabled = true\n}\n").expect("parses");
        let config = AgentConfig::from_raw(raw, &dev_args()).expect("valid");
        assert_eq!(
            config.network,
            drover_client::network::NetworkConfig::default()
        );
        assert_eq!(
            config.network.cni_path,
            [
                std::path::PathBuf::from("/opt/cni/bin"),
                std::path::PathBuf::from("/usr/lib/cni")
            ]
        );
        let raw: RawConfig = hcl::from_str(
            "client {\n  cni_path = \"/a:/b\"\n  cni_config_dir = \"/etc/cni\"\n  bridge_network_name = \"br1\"\n  bridge_network_subnet = \"10.1.0.0/16\"\n  bridge_network_hairpin_mode = true\n}\n",
        )
        .expect("parses");
        let config = AgentConfig::from_raw(raw, &dev_args()).expect("valid");
        let network = &config.network;
        assert_eq!(
            network.cni_path,
            [
                std::path::PathBuf::from("/a"),
                std::path::PathBuf::from("/b")
            ]
        );
        assert_eq!(network.cni_config_dir, std::path::PathBuf::from("/etc/cni"));
        assert_eq!(network.bridge_network_name, "br1");
        assert_eq!(network.bridge_network_subnet, "10.1.0.0/16");
        assert!(network.bridge_network_hairpin_mode);
        for (text, key) in [
            (
                "bridge_network_subnet = \"10.1.0.0\"",
                "client.bridge_network_subnet",
            ),
            (
                "bridge_network_name = \"a-name-far-too-long\"",
                "client.bridge_network_name",
            ),
            ("cni_path = \"relative/bin\"", "client.cni_path"),
        ] {
            let raw: RawConfig =
                hcl::from_str(&format!("client {{\n  {text}\n}}\n")).expect("parses");
            let err = AgentConfig::from_raw(raw, &dev_args()).expect_err(text);
            assert!(err.to_string().starts_with(key), "{err}");
        }
    }

    #[test]
    fn host_volumes_are_validated_and_unknown_keys_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let a = dir.path().join("a");
        std::fs::create_dir(&a).expect("mkdir");
        let text = format!(
            "client {{\n  host_volume \"data[0]\" {{\n    path = \"{}\"\n  }}\n  host_volume \"ro\" {{\n    path = \"{}\"\n    read_only = true\n  }}\n}}\n",
            a.display(),
            a.display()
        );
        let raw: RawConfig = hcl::from_str(&text).expect("parses");
        let config = AgentConfig::from_raw(raw, &dev_args()).expect("valid");
        assert_eq!(config.host_volumes.len(), 2);
        let first = &config.host_volumes["data[0]"];
        assert_eq!(
            (first.name.as_str(), first.path.as_str(), first.read_only),
            ("data[0]", a.to_str().expect("utf-8"), false)
        );
        assert!(config.host_volumes["ro"].read_only);

        let err = hcl::from_str::<RawConfig>(
            "client {\n  host_volume \"x\" {\n    path = \"/tmp\"\n    readonly = true\n  }\n}\n",
        )
        .expect_err("unknown key");
        assert!(err.to_string().contains("readonly"), "{err}");

        let missing = dir.path().join("missing");
        let raw: RawConfig = hcl::from_str(&format!(
            "client {{\n  host_volume \"x\" {{\n    path = \"{}\"\n  }}\n}}\n",
            missing.display()
        ))
        .expect("parses");
        let err = AgentConfig::from_raw(raw, &dev_args()).expect_err("missing path");
        assert!(
            err.to_string()
                .starts_with("client.host_volume: host_volume \"x\""),
            "{err}"
        );
    }

    #[test]
    fn later_files_override_earlier_ones_key_by_key() {
        let mut base: RawConfig =
            hcl::from_str("region = \"a\"\nclient {\n  enabled = true\n}\n").expect("parses");
        let over: RawConfig =
            hcl::from_str("client {\n  node_class = \"gpu\"\n}\n").expect("parses");
        base.merge(over);
        let client = base.client.expect("client block");
        assert_eq!(client.enabled, Some(true));
        assert_eq!(client.node_class.as_deref(), Some("gpu"));
        assert_eq!(base.region.as_deref(), Some("a"));
    }

    #[test]
    fn telemetry_follows_nomad_defaults_and_dev_mode_and_names_bad_intervals() {
        let server_args = AgentArgs {
            server: true,
            data_dir: Some("/tmp/drover-config-test".into()),
            ..AgentArgs::default()
        };
        let config = AgentConfig::from_raw(RawConfig::default(), &server_args).expect("valid");
        assert_eq!(
            config.telemetry,
            Telemetry {
                prometheus_metrics: false,
                collection_interval: Duration::from_secs(1),
                publish_allocation_metrics: false,
                publish_node_metrics: false,
            }
        );
        let dev = AgentConfig::from_raw(RawConfig::default(), &dev_args()).expect("valid");
        assert!(dev.telemetry.prometheus_metrics && dev.telemetry.publish_allocation_metrics);

        let mut raw: RawConfig = hcl::from_str(
            "telemetry {\n  prometheus_metrics = true\n  collection_interval = \"250ms\"\n}\n",
        )
        .expect("parses");
        raw.merge(
            hcl::from_str("telemetry {\n  publish_node_metrics = true\n}\n").expect("parses"),
        );
        let config = AgentConfig::from_raw(raw, &server_args).expect("valid");
        assert!(config.telemetry.prometheus_metrics && config.telemetry.publish_node_metrics);
        assert!(!config.telemetry.publish_allocation_metrics);
        assert_eq!(
            config.telemetry.collection_interval,
            Duration::from_millis(250)
        );

        let raw: RawConfig =
            hcl::from_str("telemetry {\n  collection_interval = \"0s\"\n}\n").expect("parses");
        let err = AgentConfig::from_raw(raw, &dev_args()).expect_err("zero interval");
        assert!(
            err.to_string().starts_with("telemetry.collection_interval"),
            "{err}"
        );
    }

    #[test]
    fn job_max_source_size_is_a_byte_size_with_nomads_default() {
        let config = AgentConfig::from_raw(RawConfig::default(), &dev_args()).expect("valid");
        assert_eq!(config.job_max_source_size, 1_000_000);
        let raw: RawConfig =
            hcl::from_str("server {\n  job_max_source_size = \"512KiB\"\n}\n").expect("parses");
        let config = AgentConfig::from_raw(raw, &dev_args()).expect("valid");
        assert_eq!(config.job_max_source_size, 512 * 1024);
        let raw: RawConfig =
            hcl::from_str("server {\n  job_max_source_size = \"lots\"\n}\n").expect("parses");
        let err = AgentConfig::from_raw(raw, &dev_args()).expect_err("not a size");
        assert!(
            err.to_string()
                .starts_with("server.job_max_source_size: failed to parse max job source bytes"),
            "{err}"
        );
    }

    #[test]
    fn gc_keys_take_nomads_defaults_and_the_values_given() {
        let config = AgentConfig::from_raw(RawConfig::default(), &dev_args()).expect("valid");
        assert_eq!(config.gc, drover_server::gc::GcConfig::default());
        assert_eq!(config.gc.job_gc_threshold, Duration::from_secs(4 * 3600));
        assert_eq!(config.gc.acl_token_gc_threshold, Duration::from_secs(3600));
        assert!(!config.gc.acl_enabled);
        assert_eq!(
            config.gc.batch_eval_gc_threshold,
            Duration::from_secs(24 * 3600)
        );
        assert_eq!(config.client_gc.interval, Duration::from_secs(60));
        assert_eq!(config.client_gc.max_allocs, 50);
        assert_eq!(config.client_gc.parallel_destroys, 2);
        assert!((config.client_gc.disk_usage_threshold - 80.0).abs() < f64::EPSILON);
        assert!((config.client_gc.inode_usage_threshold - 70.0).abs() < f64::EPSILON);

        let raw: RawConfig = hcl::from_str(
            r#"
            server {
              job_gc_interval         = "30s"
              job_gc_threshold        = "1h"
              eval_gc_threshold       = "10m"
              batch_eval_gc_threshold = "2h"
              deployment_gc_threshold = "20m"
              node_gc_threshold       = "48h"
              acl_token_gc_threshold  = "90s"
            }
            acl {
              enabled = true
            }
            client {
              gc_interval              = "5s"
              gc_disk_usage_threshold  = 90
              gc_inode_usage_threshold = 75.5
              gc_max_allocs            = 10
              gc_parallel_destroys     = 0
            }
            "#,
        )
        .expect("parses");
        let config = AgentConfig::from_raw(raw, &dev_args()).expect("valid");
        assert_eq!(config.gc.job_gc_interval, Duration::from_secs(30));
        assert_eq!(config.gc.job_gc_threshold, Duration::from_secs(3600));
        assert_eq!(config.gc.eval_gc_threshold, Duration::from_secs(600));
        assert_eq!(config.gc.batch_eval_gc_threshold, Duration::from_secs(7200));
        assert_eq!(config.gc.deployment_gc_threshold, Duration::from_secs(1200));
        assert_eq!(config.gc.node_gc_threshold, Duration::from_secs(48 * 3600));
        assert_eq!(config.gc.acl_token_gc_threshold, Duration::from_secs(90));
        assert!(
            config.gc.acl_enabled,
            "expired ACL tokens go only with ACLs on"
        );
        assert_eq!(config.client_gc.interval, Duration::from_secs(5));
        assert!((config.client_gc.disk_usage_threshold - 90.0).abs() < f64::EPSILON);
        assert!((config.client_gc.inode_usage_threshold - 75.5).abs() < f64::EPSILON);
        assert_eq!(config.client_gc.max_allocs, 10);
        assert_eq!(config.client_gc.parallel_destroys, 1, "at least one");

        let raw: RawConfig =
            hcl::from_str("server {\n  job_gc_interval = \"0s\"\n}\n").expect("parses");
        let err = AgentConfig::from_raw(raw, &dev_args()).expect_err("zero interval");
        assert!(
            err.to_string()
                .contains("job_gc_interval should be greater than 0s"),
            "{err}"
        );
        let raw: RawConfig =
            hcl::from_str("server {\n  node_gc_threshold = \"soon\"\n}\n").expect("parses");
        let err = AgentConfig::from_raw(raw, &dev_args()).expect_err("bad duration");
        assert!(
            err.to_string().starts_with("server.node_gc_threshold"),
            "{err}"
        );
        let raw: RawConfig =
            hcl::from_str("server {\n  acl_token_gc_threshold = \"-1h\"\n}\n").expect("parses");
        let err = AgentConfig::from_raw(raw, &dev_args()).expect_err("negative duration");
        assert!(
            err.to_string().starts_with("server.acl_token_gc_threshold"),
            "{err}"
        );
    }

    #[test]
    fn token_expiration_bounds_take_nomads_defaults_and_refuse_what_no_token_could_meet() {
        let config = AgentConfig::from_raw(RawConfig::default(), &dev_args()).expect("valid");
        assert_eq!(config.acl.token_min_expiration_ttl, Duration::from_secs(60));
        assert_eq!(
            config.acl.token_max_expiration_ttl,
            Duration::from_secs(24 * 3600)
        );
        let raw: RawConfig = hcl::from_str(
            "acl {\n  token_min_expiration_ttl = \"1s\"\n  token_max_expiration_ttl = \"2h\"\n}\n",
        )
        .expect("parses");
        let config = AgentConfig::from_raw(raw, &dev_args()).expect("valid");
        assert_eq!(config.acl.token_min_expiration_ttl, Duration::from_secs(1));
        assert_eq!(
            config.acl.token_max_expiration_ttl,
            Duration::from_secs(7200)
        );

        for (body, key, says) in [
            (
                "acl {\n  token_min_expiration_ttl = \"0s\"\n}\n",
                "acl.token_min_expiration_ttl",
                "greater than 0s",
            ),
            (
                "acl {\n  token_max_expiration_ttl = \"a day\"\n}\n",
                "acl.token_max_expiration_ttl",
                "Go duration",
            ),
            (
                "acl {\n  token_min_expiration_ttl = \"2h\"\n  token_max_expiration_ttl = \"1h\"\n}\n",
                "acl.token_min_expiration_ttl",
                "more than token_max_expiration_ttl",
            ),
        ] {
            let raw: RawConfig = hcl::from_str(body).expect("parses");
            let err = AgentConfig::from_raw(raw, &dev_args()).expect_err(body);
            assert!(err.to_string().starts_with(key), "{body}: {err}");
            assert!(err.to_string().contains(says), "{body}: {err}");
        }
        // A client-only agent creates no tokens.
        let client_args = AgentArgs {
            client: true,
            servers: vec!["10.0.0.1:4646".to_owned()],
            data_dir: Some("/tmp/drover-config-test".into()),
            ..AgentArgs::default()
        };
        let raw: RawConfig =
            hcl::from_str("acl {\n  token_max_expiration_ttl = \"1h\"\n}\n").expect("parses");
        let err = AgentConfig::from_raw(raw, &client_args).expect_err("no server");
        assert!(
            err.to_string().starts_with("acl.token_max_expiration_ttl"),
            "{err}"
        );
    }

    #[test]
    fn the_ui_block_is_on_by_default_and_its_base_path_normalised_or_refused() {
        let config = AgentConfig::from_raw(RawConfig::default(), &dev_args()).expect("valid");
        assert_eq!(config.ui, drover_ui::UiConfig::default());
        let raw: RawConfig =
            hcl::from_str("ui {\n  enabled = false\n  base_path = \"nomad/\"\n}\n")
                .expect("parses");
        let config = AgentConfig::from_raw(raw, &dev_args()).expect("valid");
        assert!(!config.ui.enabled);
        assert_eq!(config.ui.base_path, "/nomad");
        let raw: RawConfig = hcl::from_str("ui {\n  base_path = \"/a b\"\n}\n").expect("parses");
        let err = AgentConfig::from_raw(raw, &dev_args()).expect_err("refused");
        assert!(err.to_string().starts_with("ui.base_path: "), "{err}");
        // Nomad's keys for its Consul and Vault links are not accepted and then ignored.
        let err = hcl::from_str::<RawConfig>("ui {\n  label {\n    text = \"x\"\n  }\n}\n")
            .expect_err("unknown key refused");
        assert!(err.to_string().contains("label"), "{err}");
    }

    #[test]
    fn unknown_keys_and_bad_values_are_named() {
        let err = hcl::from_str::<RawConfig>("client {\n  enabeld = true\n}\n")
            .expect_err("unknown key refused");
        assert!(err.to_string().contains("enabeld"), "{err}");

        let raw: RawConfig =
            hcl::from_str("client {\n  max_kill_timeout = \"soon\"\n}\n").expect("parses");
        let err = AgentConfig::from_raw(raw, &dev_args()).expect_err("bad duration");
        assert!(
            err.to_string().starts_with("client.max_kill_timeout"),
            "{err}"
        );

        let raw: RawConfig =
            hcl::from_str("client {\n  artifact {\n    s3_timeout = \"5m\"\n  }\n}\n")
                .expect("parses");
        let err = AgentConfig::from_raw(raw, &dev_args()).expect_err("no s3 getter");
        assert!(
            err.to_string().starts_with("client.artifact.s3_timeout"),
            "{err}"
        );
        for (body, key) in [
            (
                "disable_filesystem_isolation = true",
                "client.artifact.disable_filesystem_isolation",
            ),
            (
                "set_environment_variables = \"HOME\"",
                "client.artifact.set_environment_variables",
            ),
        ] {
            let raw: RawConfig =
                hcl::from_str(&format!("client {{\n  artifact {{\n    {body}\n  }}\n}}\n"))
                    .expect("parses");
            let err = AgentConfig::from_raw(raw, &dev_args()).expect_err("not run");
            assert!(err.to_string().starts_with(key), "{err}");
        }
        let raw: RawConfig =
            hcl::from_str("client {\n  artifact {\n    http_max_size = \"huge\"\n  }\n}\n")
                .expect("parses");
        let err = AgentConfig::from_raw(raw, &dev_args()).expect_err("bad size");
        assert!(
            err.to_string().starts_with("client.artifact.http_max_size"),
            "{err}"
        );

        let raw: RawConfig = hcl::from_str("log_level = \"LOUD\"\n").expect("parses");
        let err = AgentConfig::from_raw(raw, &dev_args()).expect_err("bad level");
        assert!(err.to_string().starts_with("log_level"), "{err}");

        let raw: RawConfig = hcl::from_str("bind_addr = \"localhost:80\"\n").expect("parses");
        let err = AgentConfig::from_raw(raw, &dev_args()).expect_err("bad address");
        assert!(err.to_string().contains("bind_addr"), "{err}");
    }

    #[test]
    fn the_etcd_block_is_validated_and_refuses_what_does_not_run() {
        let server_args = AgentArgs {
            server: true,
            data_dir: Some("/tmp/drover-config-test".into()),
            ..AgentArgs::default()
        };
        let raw: RawConfig = hcl::from_str(
            "etcd {\n  endpoints = [\"http://127.0.0.1:2379\", \"http://127.0.0.1:2479\"]\n}\n",
        )
        .expect("parses");
        let config = AgentConfig::from_raw(raw, &server_args).expect("valid");
        assert_eq!(
            config.etcd,
            Some(EtcdSettings {
                endpoints: vec![
                    "http://127.0.0.1:2379".to_owned(),
                    "http://127.0.0.1:2479".to_owned()
                ],
                prefix: "drover/".to_owned(),
                tls: None,
                credentials: None,
            })
        );
        let raw: RawConfig = hcl::from_str(
            "etcd {\n  endpoints = [\"https://127.0.0.1:2379\"]\n  ca_file = \"/tls/ca.pem\"\n  \
             cert_file = \"/tls/drover.pem\"\n  key_file = \"/tls/drover-key.pem\"\n  \
             username = \"drover\"\n  password = \"secret\"\n}\n",
        )
        .expect("parses");
        let etcd = AgentConfig::from_raw(raw, &server_args)
            .expect("valid")
            .etcd
            .expect("etcd");
        assert_eq!(
            etcd.tls,
            Some(drover_etcd::EtcdTls {
                ca_file: Some("/tls/ca.pem".into()),
                cert_file: Some("/tls/drover.pem".into()),
                key_file: Some("/tls/drover-key.pem".into()),
            })
        );
        let credentials = etcd.credentials.expect("credentials");
        assert_eq!(
            (credentials.username.as_str(), credentials.password.as_str()),
            ("drover", "secret")
        );
        // The password never shows in a debug print of the settings.
        assert!(!format!("{credentials:?}").contains("secret"));
        assert_eq!(
            AgentConfig::from_raw(RawConfig::default(), &server_args)
                .expect("valid")
                .etcd,
            None
        );
        let err = hcl::from_str::<RawConfig>("etcd {\n  endpoint = [\"x\"]\n}\n")
            .expect_err("unknown key refused");
        assert!(err.to_string().contains("endpoint"), "{err}");
        for (body, key) in [
            ("endpoints = []", "etcd.endpoints"),
            ("endpoints = [\"ftp://e:2379\"]", "etcd.endpoints"),
            (
                "endpoints = [\"https://e:2379\", \"http://f:2379\"]",
                "etcd.endpoints",
            ),
            (
                "endpoints = [\"http://e:2379\"]\n  ca_file = \"ca.pem\"",
                "etcd.ca_file",
            ),
            (
                "endpoints = [\"https://e:2379\"]\n  cert_file = \"c.pem\"",
                "etcd.key_file",
            ),
            (
                "endpoints = [\"http://e:2379\"]\n  username = \"drover\"",
                "etcd.password",
            ),
            (
                "endpoints = [\"http://e:2379\"]\n  password = \"x\"",
                "etcd.username",
            ),
            (
                "endpoints = [\"http://e:2379\"]\n  prefix = \"\"",
                "etcd.prefix",
            ),
            (
                "endpoints = [\"http://e:2379\"]\n  tls {\n    ca_file = \"ca.pem\"\n  }",
                "etcd.tls",
            ),
        ] {
            let raw: RawConfig =
                hcl::from_str(&format!("etcd {{\n  {body}\n}}\n")).expect("parses");
            let err = AgentConfig::from_raw(raw, &server_args).expect_err("refused");
            assert!(err.to_string().starts_with(key), "{body}: {err}");
        }
        let client_args = AgentArgs {
            client: true,
            servers: vec!["127.0.0.1:4646".to_owned()],
            data_dir: Some("/tmp/drover-config-test".into()),
            ..AgentArgs::default()
        };
        let raw: RawConfig =
            hcl::from_str("etcd {\n  endpoints = [\"http://e:2379\"]\n}\n").expect("parses");
        let err = AgentConfig::from_raw(raw, &client_args).expect_err("no server");
        assert!(err.to_string().starts_with("etcd"), "{err}");
    }

    #[test]
    fn the_acl_block_is_validated_and_unknown_keys_refused() {
        let config = AgentConfig::from_raw(RawConfig::default(), &dev_args()).expect("valid");
        assert!(!config.acl.enabled);
        let client_args = AgentArgs {
            client: true,
            servers: vec!["10.0.0.1:4646".to_owned()],
            data_dir: Some("/tmp/drover-config-test".into()),
            ..AgentArgs::default()
        };
        let raw: RawConfig =
            hcl::from_str("acl {\n  enabled = true\n  token_ttl = \"5s\"\n}\n").expect("parses");
        let config = AgentConfig::from_raw(raw, &client_args).expect("valid");
        assert!(config.acl.enabled);
        assert_eq!(config.acl.token_ttl, Duration::from_secs(5));
        assert_eq!(config.acl.policy_ttl, Duration::from_secs(30));
        assert_eq!(config.acl.role_ttl, Duration::from_secs(30));
        let raw: RawConfig = hcl::from_str("acl {\n  role_ttl = \"10s\"\n}\n").expect("parses");
        let config = AgentConfig::from_raw(raw, &client_args).expect("valid");
        assert_eq!(config.acl.role_ttl, Duration::from_secs(10));
        let raw: RawConfig = hcl::from_str("acl {\n  role_ttl = \"10s\"\n}\n").expect("parses");
        let err = AgentConfig::from_raw(raw, &dev_args()).expect_err("refused on a server");
        assert!(err.to_string().starts_with("acl.role_ttl"), "{err}");
        let err = hcl::from_str::<RawConfig>("acl {\n  enable = true\n}\n")
            .expect_err("unknown key refused");
        assert!(err.to_string().contains("enable"), "{err}");
        let raw: RawConfig = hcl::from_str("acl {\n  policy_ttl = \"later\"\n}\n").expect("parses");
        let err = AgentConfig::from_raw(raw, &client_args).expect_err("bad duration");
        assert!(err.to_string().starts_with("acl.policy_ttl"), "{err}");
        // An agent with a server keeps no cache for them to bound.
        let raw: RawConfig =
            hcl::from_str("acl {\n  enabled = true\n  policy_ttl = \"5s\"\n}\n").expect("parses");
        let err = AgentConfig::from_raw(raw, &dev_args()).expect_err("refused on a server");
        assert!(err.to_string().starts_with("acl.policy_ttl"), "{err}");
        assert!(err.to_string().contains("client-only"), "{err}");
    }

    #[test]
    fn reserved_cores_ports_and_reservable_cores_are_parsed_and_bad_lists_named() {
        let raw: RawConfig = hcl::from_str(
            "client {\n  reservable_cores = \"0-3\"\n  reserved {\n    cores = \"0,2\"\n    reserved_ports = \"22,8000-8100\"\n  }\n}\n",
        )
        .expect("parses");
        let config = AgentConfig::from_raw(raw, &dev_args()).expect("valid");
        assert_eq!(config.reserved_cores, vec![0, 2]);
        assert_eq!(config.reserved_ports, "22,8000-8100");
        assert_eq!(config.reservable_cores, Some(vec![0, 1, 2, 3]));

        for (text, key) in [
            (
                "client {\n  reserved {\n    cores = \"two\"\n  }\n}\n",
                "client.reserved.cores",
            ),
            (
                "client {\n  reserved {\n    reserved_ports = \"80-22\"\n  }\n}\n",
                "client.reserved.reserved_ports",
            ),
            (
                "client {\n  reservable_cores = \"\"\n}\n",
                "client.reservable_cores",
            ),
        ] {
            let raw: RawConfig = hcl::from_str(text).expect("parses");
            let err = AgentConfig::from_raw(raw, &dev_args()).expect_err(text);
            assert!(err.to_string().starts_with(key), "{err}");
        }
    }

    #[test]
    fn a_client_without_a_local_server_needs_server_addresses() {
        let args = AgentArgs {
            client: true,
            data_dir: Some(PathBuf::from("/tmp/drover-client")),
            ..AgentArgs::default()
        };
        let err = AgentConfig::from_raw(RawConfig::default(), &args).expect_err("no servers");
        assert!(err.to_string().starts_with("client.servers"), "{err}");

        let args = AgentArgs {
            servers: vec!["10.0.0.1:4646".into(), "10.0.0.2".into()],
            ..args
        };
        let config = AgentConfig::from_raw(RawConfig::default(), &args).expect("valid");
        assert!(config.client_enabled && !config.server_enabled);
        assert_eq!(config.servers, ["10.0.0.1:4646", "10.0.0.2"]);

        let raw: RawConfig = hcl::from_str(
            "data_dir = \"/tmp/d\"\nclient {\n  enabled = true\n  servers = [\"s1:4646\"]\n}\nserver {\n  enabled = false\n}\n",
        )
        .expect("parses");
        let config = AgentConfig::from_raw(raw, &AgentArgs::default()).expect("valid");
        assert!(config.client_enabled && !config.server_enabled);
        assert_eq!(config.servers, ["s1:4646"]);
    }

    #[test]
    fn a_dev_agents_client_stays_when_a_config_file_disables_it_as_in_nomad() {
        let raw: RawConfig = hcl::from_str("client {\n  enabled = false\n}\n").expect("parses");
        let config = AgentConfig::from_raw(raw.clone(), &dev_args()).expect("valid");
        assert!(config.client_enabled && config.server_enabled);
        // Without `-dev` the file decides: a server alone.
        let args = AgentArgs {
            server: true,
            data_dir: Some(PathBuf::from("/tmp/drover-server")),
            ..AgentArgs::default()
        };
        let config = AgentConfig::from_raw(raw, &args).expect("valid");
        assert!(config.server_enabled && !config.client_enabled);
    }

    #[test]
    fn dash_server_alone_runs_only_a_server_and_dev_client_only_needs_servers() {
        let args = AgentArgs {
            server: true,
            data_dir: Some(PathBuf::from("/tmp/drover-server")),
            ..AgentArgs::default()
        };
        let config = AgentConfig::from_raw(RawConfig::default(), &args).expect("valid");
        assert!(config.server_enabled && !config.client_enabled);

        let args = AgentArgs {
            dev: true,
            client: true,
            servers: vec!["127.0.0.1:4646".into()],
            ..AgentArgs::default()
        };
        let config = AgentConfig::from_raw(RawConfig::default(), &args).expect("valid");
        assert!(config.client_enabled && !config.server_enabled);
    }

    #[test]
    fn outside_dev_mode_a_data_dir_is_required() {
        let raw: RawConfig = hcl::from_str("client {\n  enabled = true\n}\n").expect("parses");
        let err = AgentConfig::from_raw(raw, &AgentArgs::default()).expect_err("no data dir");
        assert!(err.to_string().contains("data_dir"), "{err}");
    }
}
