//! The docker task config, as Nomad users write it, turned into the engine's container create
//! body: image, command line, network and published ports, mounts (the task's `/alloc`,
//! `/local`, `/secrets` and its own `volumes` / `mount`), limits and security settings.
//! What the client config does not allow (host paths, privileged, capabilities) is refused
//! here, naming the key.
//!
//! Not for: talking to the engine (see the driver) or which keys exist (the driver crate's
//! `task_config::DOCKER_CONFIG_KEYS`, read by the client's validate hook too).

use std::collections::{BTreeMap, HashMap};
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use bollard::models::{
    ContainerCreateBody, DeviceMapping, HostConfig, HostConfigLogConfig, Mount, MountBindOptions,
    MountBindOptionsPropagationEnum, MountTmpfsOptions, MountType, PortBinding, ResourcesUlimits,
};
use drover_driver::TaskLaunch;
use drover_driver::task_config::{DOCKER_CONFIG_KEYS, validate_config};
use serde_json::{Map, Value};

use crate::config::{DockerConfig, normalize_cap};
use crate::error::DockerError;
use crate::values::{bool_value, parse_duration, single_block};

/// Nomad's default `image_pull_timeout`.
const DEFAULT_PULL_TIMEOUT: Duration = Duration::from_secs(5 * 60);

pub use crate::auth::RegistryAuth;

/// What the driver needs from the task config besides the create body.
#[derive(Debug, Clone)]
pub struct TaskPlan {
    pub image: String,
    pub force_pull: bool,
    pub pull_timeout: Duration,
    pub auth: Option<RegistryAuth>,
    /// `auth_soft_fail`: credentials that cannot be found are a warning, and the pull goes on
    /// without them.
    pub auth_soft_fail: bool,
    /// `load`: an image archive (in the task's `local/`) loaded instead of pulled.
    pub load: Option<PathBuf>,
    pub body: ContainerCreateBody,
    /// The allocation dir the [`BeneathBind`]s resolve in.
    pub alloc_dir: Option<PathBuf>,
    /// The bind sources to resolve and pin beneath it before the engine sees the body.
    pub beneath: Vec<BeneathBind>,
    /// `port_map`: port label → container port (the driver network's port map).
    pub port_map: BTreeMap<String, i64>,
}

fn bad(message: impl Into<String>) -> DockerError {
    DockerError::Config(message.into())
}

fn string(config: &Map<String, Value>, key: &str) -> Result<Option<String>, DockerError> {
    match config.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(Value::Number(number)) => Ok(Some(number.to_string())),
        Some(_) => Err(bad(format!("{key} must be a string"))),
    }
}

fn strings(config: &Map<String, Value>, key: &str) -> Result<Vec<String>, DockerError> {
    match config.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item {
                Value::String(text) => Ok(text.clone()),
                Value::Number(number) => Ok(number.to_string()),
                _ => Err(bad(format!("{key} must be a list of strings"))),
            })
            .collect(),
        Some(_) => Err(bad(format!("{key} must be a list of strings"))),
    }
}

fn flag(config: &Map<String, Value>, key: &str) -> Result<bool, DockerError> {
    config
        .get(key)
        .map_or(Ok(false), |value| bool_value(value, key))
}

fn integer(config: &Map<String, Value>, key: &str) -> Result<Option<i64>, DockerError> {
    match config.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(number)) => number
            .as_i64()
            .filter(|value| *value >= 0)
            .map(Some)
            .ok_or_else(|| bad(format!("{key} must be a non-negative integer"))),
        Some(Value::String(text)) => text
            .trim()
            .parse::<i64>()
            .ok()
            .filter(|value| *value >= 0)
            .map(Some)
            .ok_or_else(|| bad(format!("{key} must be a non-negative integer"))),
        Some(_) => Err(bad(format!("{key} must be a non-negative integer"))),
    }
}

/// A map given as a block (`labels { a = "b" }`) or an attribute (`labels = { a = "b" }`).
fn string_map(
    config: &Map<String, Value>,
    key: &str,
) -> Result<HashMap<String, String>, DockerError> {
    let Some(value) = config.get(key) else {
        return Ok(HashMap::new());
    };
    let mut out = HashMap::new();
    let blocks: Vec<&Value> = match value {
        Value::Array(items) => items.iter().collect(),
        other => vec![other],
    };
    for block in blocks {
        let map = block
            .as_object()
            .ok_or_else(|| bad(format!("{key} must be a map of strings")))?;
        for (name, value) in map {
            let text = match value {
                Value::String(text) => text.clone(),
                Value::Number(number) => number.to_string(),
                Value::Bool(flag) => flag.to_string(),
                _ => return Err(bad(format!("{key}.{name} must be a string"))),
            };
            out.insert(name.clone(), text);
        }
    }
    Ok(out)
}

/// `path` taken from `base` (when relative) with `.` and `..` resolved lexically; `None` when
/// `..` climbs above the root.
fn normalize(base: &Path, path: &str) -> Option<PathBuf> {
    let joined = base.join(path);
    let mut normal = PathBuf::new();
    for component in joined.components() {
        match component {
            Component::ParentDir => {
                if !normal.pop() {
                    return None;
                }
            }
            Component::CurDir => {}
            other => normal.push(other.as_os_str()),
        }
    }
    Some(normal)
}

/// Where a host path a task mounts comes from.
enum HostSource {
    /// Any host path (the client enables volumes): handed to the engine as written.
    Host(String),
    /// A path beneath the allocation dir (relative to it), resolved and pinned at create.
    Beneath(PathBuf),
}

/// A host path a task mounts: relative paths are the task dir's; anything outside the task's
/// alloc dir needs the client's `volumes { enabled = true }`. Without it the path is only
/// checked as text here; the bind is then resolved beneath the alloc dir by the kernel (see
/// [`BeneathBind`]), so a symlink cannot lead it out.
fn host_source(
    source: &str,
    key: &str,
    launch: &TaskLaunch,
    client: &DockerConfig,
) -> Result<HostSource, DockerError> {
    let task_dir = launch
        .task_dir
        .as_deref()
        .ok_or_else(|| bad("the task has no task dir"))?;
    let alloc_dir = task_dir.parent().unwrap_or(task_dir);
    if client.volumes_enabled {
        return Ok(HostSource::Host(if Path::new(source).is_absolute() {
            source.to_string()
        } else {
            task_dir.join(source).display().to_string()
        }));
    }
    normalize(task_dir, source)
        .and_then(|path| path.strip_prefix(alloc_dir).ok().map(Path::to_path_buf))
        .map(HostSource::Beneath)
        .ok_or_else(|| {
            bad(format!(
                "{key}: host path {source:?} is outside the allocation directory and volumes are not enabled on this client (plugin \"docker\" {{ config {{ volumes {{ enabled = true }} }} }})"
            ))
        })
}

/// A bind source that must stay beneath the allocation dir: the task's `/alloc`, `/local` and
/// `/secrets`, and its own `volumes` / `mount` sources where the client does not enable
/// volumes. The driver resolves each beneath the alloc dir in one step and hands the engine a
/// pinned mount of what it found (`binds::pin`), never the path as text (GH-28177: a prestart
/// task could plant a symlink there to expose a host directory).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BeneathBind {
    /// The setting that asked for it, for the refusal (`volumes`, `mount`, `/local`, …).
    pub setting: String,
    /// The source as the task config wrote it (or the task dir it is).
    pub written: String,
    /// The source relative to the allocation dir.
    pub relative: PathBuf,
    /// A missing source is created (a `volumes` entry, as the engine would) or refused.
    pub create_missing: bool,
    /// Where its source sits in the create body.
    pub slot: BindSlot,
}

/// A source's place in the create body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BindSlot {
    /// `HostConfig.binds[index]`, which reads `<source><suffix>`.
    Bind { index: usize, suffix: String },
    /// `HostConfig.mounts[index].source`.
    Mount(usize),
}

fn volume_binds(
    config: &Map<String, Value>,
    launch: &TaskLaunch,
    client: &DockerConfig,
    binds: &mut Vec<String>,
    beneath: &mut Vec<BeneathBind>,
) -> Result<(), DockerError> {
    for entry in strings(config, "volumes")? {
        let parts: Vec<&str> = entry.split(':').collect();
        let (source, target, mode) = match parts.as_slice() {
            [source, target] => (*source, *target, None),
            [source, target, mode] => (*source, *target, Some(*mode)),
            _ => {
                return Err(bad(format!(
                    "volumes: {entry:?} is not \"source:destination[:mode]\""
                )));
            }
        };
        // Without a volume driver (which drover does not take), a source is a host path, a
        // bare name too (the task dir's), as in Nomad: never a named volume of the engine.
        let suffix = match mode {
            Some(mode) => format!(":{target}:{mode}"),
            None => format!(":{target}"),
        };
        match host_source(source, "volumes", launch, client)? {
            HostSource::Host(path) => binds.push(format!("{path}{suffix}")),
            HostSource::Beneath(relative) => {
                let shown = launch
                    .task_dir
                    .as_deref()
                    .and_then(Path::parent)
                    .map_or_else(|| relative.clone(), |alloc| alloc.join(&relative));
                beneath.push(BeneathBind {
                    setting: "volumes".to_string(),
                    written: source.to_string(),
                    relative,
                    create_missing: true,
                    slot: BindSlot::Bind {
                        index: binds.len(),
                        suffix: suffix.clone(),
                    },
                });
                binds.push(format!("{}{suffix}", shown.display()));
            }
        }
    }
    Ok(())
}

fn mounts(
    config: &Map<String, Value>,
    launch: &TaskLaunch,
    client: &DockerConfig,
    beneath: &mut Vec<BeneathBind>,
) -> Result<Vec<Mount>, DockerError> {
    // `mount` blocks, then the pre-1.0 `mounts = [{ … }]` list, as Nomad appends them.
    let blocks: Vec<&Value> = ["mount", "mounts"]
        .iter()
        .filter_map(|key| config.get(*key))
        .flat_map(|value| match value {
            Value::Array(items) => items.iter().collect(),
            other => vec![other],
        })
        .collect();
    let mut mounts = Vec::new();
    for block in blocks {
        let block = block
            .as_object()
            .ok_or_else(|| bad("mount must be a block"))?;
        for key in block.keys() {
            if ![
                "type",
                "target",
                "source",
                "readonly",
                "bind_options",
                "tmpfs_options",
            ]
            .contains(&key.as_str())
            {
                return Err(bad(format!(
                    "mount: unsupported key {key:?} (drover implements: type, target, source, readonly, bind_options, tmpfs_options)"
                )));
            }
        }
        let kind = string(block, "type")?.unwrap_or_else(|| "volume".to_string());
        let target = string(block, "target")?.ok_or_else(|| bad("mount: target is required"))?;
        let source = string(block, "source")?;
        let mut mount = Mount {
            target: Some(target),
            read_only: Some(flag(block, "readonly")?),
            ..Mount::default()
        };
        match kind.as_str() {
            "bind" => {
                let source = source.ok_or_else(|| bad("mount: a bind mount needs a source"))?;
                mount.typ = Some(MountType::BIND);
                mount.source = Some(match host_source(&source, "mount", launch, client)? {
                    HostSource::Host(path) => path,
                    HostSource::Beneath(relative) => {
                        let shown = launch
                            .task_dir
                            .as_deref()
                            .and_then(Path::parent)
                            .map_or_else(|| relative.clone(), |alloc| alloc.join(&relative));
                        beneath.push(BeneathBind {
                            setting: "mount".to_string(),
                            written: source.clone(),
                            relative,
                            // The engine refuses a missing bind source of a mount.
                            create_missing: false,
                            slot: BindSlot::Mount(mounts.len()),
                        });
                        shown.display().to_string()
                    }
                });
                if let Some(options) = block.get("bind_options") {
                    let options = single_block(options, "mount.bind_options")?;
                    if let Some(propagation) = string(options, "propagation")? {
                        let propagation = match propagation.as_str() {
                            "private" => MountBindOptionsPropagationEnum::PRIVATE,
                            "rprivate" => MountBindOptionsPropagationEnum::RPRIVATE,
                            "shared" => MountBindOptionsPropagationEnum::SHARED,
                            "rshared" => MountBindOptionsPropagationEnum::RSHARED,
                            "slave" => MountBindOptionsPropagationEnum::SLAVE,
                            "rslave" => MountBindOptionsPropagationEnum::RSLAVE,
                            other => {
                                return Err(bad(format!(
                                    "mount.bind_options.propagation {other:?} is not one of private, rprivate, shared, rshared, slave, rslave"
                                )));
                            }
                        };
                        mount.bind_options = Some(MountBindOptions {
                            propagation: Some(propagation),
                            ..MountBindOptions::default()
                        });
                    }
                }
            }
            "volume" => {
                // A named volume is storage outside the allocation, as a host path is: only
                // where the client enables volumes (Nomad's rule).
                if !client.volumes_enabled {
                    return Err(bad(format!(
                        "mount: volumes are not enabled; cannot mount volume: {:?} (plugin \"docker\" {{ config {{ volumes {{ enabled = true }} }} }})",
                        source.unwrap_or_default()
                    )));
                }
                mount.typ = Some(MountType::VOLUME);
                mount.source = source;
            }
            "tmpfs" => {
                mount.typ = Some(MountType::TMPFS);
                if let Some(options) = block.get("tmpfs_options") {
                    let options = single_block(options, "mount.tmpfs_options")?;
                    mount.tmpfs_options = Some(MountTmpfsOptions {
                        size_bytes: integer(options, "size")?,
                        mode: integer(options, "mode")?,
                        ..MountTmpfsOptions::default()
                    });
                }
            }
            other => {
                return Err(bad(format!(
                    "mount: type {other:?} is not one of bind, volume, tmpfs"
                )));
            }
        }
        mounts.push(mount);
    }
    Ok(mounts)
}

fn env_of<'a>(launch: &'a TaskLaunch, key: &str) -> Option<&'a str> {
    launch
        .env
        .iter()
        .find(|(name, _)| name == key)
        .map(|(_, value)| value.as_str())
}

/// `port_map { http = 8080 }` (decoded as a list of maps, or a map): port label → container
/// port.
fn port_map(config: &Map<String, Value>) -> Result<BTreeMap<String, i64>, DockerError> {
    let mut out = BTreeMap::new();
    for (label, text) in string_map(config, "port_map")? {
        let port = text
            .parse::<i64>()
            .ok()
            .filter(|port| (1..=65535).contains(port))
            .ok_or_else(|| {
                bad(format!(
                    "port_map.{label} must be a port number (1 to 65535), got {text:?}"
                ))
            })?;
        out.insert(label, port);
    }
    Ok(out)
}

/// The container's environment: the task's, with `NOMAD_PORT_<label>` set to the container
/// port of each `port_map` entry, as Nomad's docker driver sets it.
fn container_env(
    config: &Map<String, Value>,
    launch: &TaskLaunch,
) -> Result<Vec<String>, DockerError> {
    let mapped = port_map(config)?;
    let mapped_keys: BTreeMap<String, i64> = mapped
        .iter()
        .map(|(label, port)| (clean_env_key(&format!("NOMAD_PORT_{label}")), *port))
        .collect();
    let mut env: Vec<String> = launch
        .env
        .iter()
        .filter(|(key, _)| !mapped_keys.contains_key(key))
        .map(|(key, value)| format!("{key}={value}"))
        .collect();
    env.extend(
        mapped_keys
            .iter()
            .map(|(key, port)| format!("{key}={port}")),
    );
    Ok(env)
}

/// Nomad's `CleanEnvVar(key, '_')`: every byte but ASCII letters, `_`, `.` and (after the
/// first) digits becomes `_`.
fn clean_env_key(key: &str) -> String {
    key.bytes()
        .enumerate()
        .map(|(index, byte)| match byte {
            b'_' | b'.' | b'a'..=b'z' | b'A'..=b'Z' => byte as char,
            b'0'..=b'9' if index > 0 => byte as char,
            _ => '_',
        })
        .collect()
}

/// The ports to publish, as Nomad's docker driver picks them: with `ports = ["http"]`, each
/// label of the group network, its container port (`to`, or the host port) published on the
/// allocated host address and port; else, with a task-level network, each of its ports
/// published on its host address and port to the container port `port_map` names for it (or
/// the same port); else a `port_map` has nothing to map and fails the task with Nomad's error.
/// Tcp and udp, as Nomad does.
fn port_bindings(
    config: &Map<String, Value>,
    launch: &TaskLaunch,
) -> Result<(Vec<String>, bollard::models::PortMap), DockerError> {
    let group_labels = strings(config, "ports")?;
    let mapped = port_map(config)?;
    if group_labels.is_empty() {
        if let Some(network) = &launch.task_network {
            return Ok(task_network_bindings(network, &mapped));
        }
        if !mapped.is_empty() {
            return Err(bad(
                "'port_map' cannot map group network ports, use 'ports' instead",
            ));
        }
    }
    let mut exposed = Vec::new();
    let mut bindings = HashMap::new();
    for label in group_labels {
        let host_port = env_of(launch, &format!("NOMAD_HOST_PORT_{label}")).ok_or_else(|| {
            bad(format!(
                "ports: port label {label:?} is not a port of the group's network"
            ))
        })?;
        let container_port = env_of(launch, &format!("NOMAD_PORT_{label}")).unwrap_or(host_port);
        let host_ip = env_of(launch, &format!("NOMAD_HOST_IP_{label}"))
            .or_else(|| env_of(launch, &format!("NOMAD_IP_{label}")))
            .unwrap_or("0.0.0.0");
        for protocol in ["tcp", "udp"] {
            let key = format!("{container_port}/{protocol}");
            exposed.push(key.clone());
            bindings.insert(
                key,
                Some(vec![PortBinding {
                    host_ip: Some(host_ip.to_string()),
                    host_port: Some(host_port.to_string()),
                }]),
            );
        }
    }
    Ok((exposed, bindings))
}

/// A task network's ports: each on its host address and port, to the container port
/// `port_map` gives its label (else the host port), tcp and udp; ports mapped to one container
/// port are all bound to it.
fn task_network_bindings(
    network: &drover_driver::TaskNetwork,
    mapped: &BTreeMap<String, i64>,
) -> (Vec<String>, bollard::models::PortMap) {
    let mut exposed: Vec<String> = Vec::new();
    let mut bindings: bollard::models::PortMap = HashMap::new();
    for (label, host_port) in &network.ports {
        let container_port = mapped.get(label).copied().unwrap_or(*host_port);
        for protocol in ["tcp", "udp"] {
            let key = format!("{container_port}/{protocol}");
            if !exposed.contains(&key) {
                exposed.push(key.clone());
            }
            bindings
                .entry(key)
                .or_insert_with(|| Some(Vec::new()))
                .get_or_insert_with(Vec::new)
                .push(PortBinding {
                    host_ip: Some(network.ip.clone()),
                    host_port: Some(host_port.to_string()),
                });
        }
    }
    (exposed, bindings)
}

fn ulimits(config: &Map<String, Value>) -> Result<Vec<ResourcesUlimits>, DockerError> {
    let mut out = Vec::new();
    let mut names: Vec<(String, String)> = string_map(config, "ulimit")?.into_iter().collect();
    names.sort();
    for (name, value) in names {
        let invalid = || {
            bad(format!(
                "ulimit.{name} {value:?} is not \"soft\" or \"soft:hard\" (integers)"
            ))
        };
        let (soft, hard) = match value.split_once(':') {
            Some((soft, hard)) => (soft, hard),
            None => (value.as_str(), value.as_str()),
        };
        let soft: i64 = soft.trim().parse().map_err(|_| invalid())?;
        let hard: i64 = hard.trim().parse().map_err(|_| invalid())?;
        out.push(ResourcesUlimits {
            name: Some(name.clone()),
            soft: Some(soft),
            hard: Some(hard),
        });
    }
    Ok(out)
}

fn devices(config: &Map<String, Value>) -> Result<Vec<DeviceMapping>, DockerError> {
    let Some(value) = config.get("devices") else {
        return Ok(Vec::new());
    };
    let items = value
        .as_array()
        .ok_or_else(|| bad("devices must be a list of blocks"))?;
    items
        .iter()
        .map(|item| {
            let item = item
                .as_object()
                .ok_or_else(|| bad("devices must be a list of blocks"))?;
            for key in item.keys() {
                if !["host_path", "container_path", "cgroup_permissions"].contains(&key.as_str())
                {
                    return Err(bad(format!(
                        "devices: unsupported key {key:?} (host_path, container_path, cgroup_permissions)"
                    )));
                }
            }
            let host = string(item, "host_path")?
                .ok_or_else(|| bad("devices: host_path is required"))?;
            Ok(DeviceMapping {
                path_in_container: Some(string(item, "container_path")?.unwrap_or_else(|| host.clone())),
                path_on_host: Some(host),
                cgroup_permissions: Some(
                    string(item, "cgroup_permissions")?.unwrap_or_else(|| "rwm".to_string()),
                ),
            })
        })
        .collect()
}

/// `logging { type config }`: the engine's log driver for the container; without the block,
/// Nomad's default (`json-file` keeping two files of 2m). Whatever the driver, drover copies
/// what the engine's log API reads back into the allocation's log files.
fn logging(config: &Map<String, Value>) -> Result<HostConfigLogConfig, DockerError> {
    let Some(value) = config.get("logging") else {
        return Ok(HostConfigLogConfig {
            typ: Some("json-file".to_string()),
            config: Some(HashMap::from([
                ("max-file".to_string(), "2".to_string()),
                ("max-size".to_string(), "2m".to_string()),
            ])),
        });
    };
    let block = single_block(value, "logging")?;
    for key in block.keys() {
        if !["type", "config"].contains(&key.as_str()) {
            return Err(bad(format!(
                "logging: unsupported key {key:?} (type, config)"
            )));
        }
    }
    let options =
        string_map(block, "config").map_err(|_| bad("logging.config must be a map of strings"))?;
    Ok(HostConfigLogConfig {
        typ: string(block, "type")?.filter(|kind| !kind.is_empty()),
        config: (!options.is_empty()).then_some(options),
    })
}

/// `load = "image.tar"`: the archive's path in the task's `local/` dir (where an artifact
/// puts it); a path leaving the task dir is refused.
fn load_archive(
    config: &Map<String, Value>,
    launch: &TaskLaunch,
) -> Result<Option<PathBuf>, DockerError> {
    let Some(archive) = string(config, "load")?.filter(|path| !path.is_empty()) else {
        return Ok(None);
    };
    let task_dir = launch
        .task_dir
        .as_deref()
        .ok_or_else(|| bad("the task has no task dir"))?;
    normalize(&task_dir.join("local"), &archive)
        .filter(|path| path.starts_with(task_dir))
        .map(Some)
        .ok_or_else(|| bad(format!("load: {archive:?} is outside the task directory")))
}

fn auth(config: &Map<String, Value>) -> Result<Option<RegistryAuth>, DockerError> {
    let Some(value) = config.get("auth") else {
        return Ok(None);
    };
    let block = single_block(value, "auth")?;
    for key in block.keys() {
        if !["username", "password", "email", "server_address"].contains(&key.as_str()) {
            return Err(bad(format!(
                "auth: unsupported key {key:?} (username, password, email, server_address)"
            )));
        }
    }
    Ok(Some(RegistryAuth {
        username: string(block, "username")?.unwrap_or_default(),
        password: string(block, "password")?.unwrap_or_default(),
        email: string(block, "email")?.unwrap_or_default(),
        server_address: string(block, "server_address")?.unwrap_or_default(),
    }))
}

/// The container name Nomad gives a task's container: `<task>-<alloc_id>`.
pub fn container_name(launch: &TaskLaunch) -> String {
    format!("{}-{}", launch.task_name, launch.alloc_id)
}

pub use crate::labels::{ALLOC_ID_LABEL, NODE_ID_LABEL, TASK_NAME_LABEL};

/// Label names of Nomad's `extra_labels`, each with the key it is chosen by.
const EXTRA_LABELS: [(&str, &str); 7] = [
    ("job_name", "com.hashicorp.nomad.job_name"),
    ("job_id", "com.hashicorp.nomad.job_id"),
    ("task_group_name", "com.hashicorp.nomad.task_group_name"),
    ("task_name", TASK_NAME_LABEL),
    ("namespace", "com.hashicorp.nomad.namespace"),
    ("node_name", "com.hashicorp.nomad.node_name"),
    ("node_id", "com.hashicorp.nomad.node_id"),
];

/// Whether `name` matches `pattern`, where `*` stands for any run of characters (Nomad's
/// go-glob: no other wildcard).
fn glob_matches(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == name;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !name.starts_with(first) || name.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    for middle in &parts[1..parts.len() - 1] {
        match rest.find(middle) {
            Some(at) => rest = &rest[at + middle.len()..],
            None => return false,
        }
    }
    name.ends_with(last)
}

/// The labels the client's `extra_labels` asks for, with the task's job, group, namespace
/// (from its environment) and the node's name and ID.
pub fn extra_labels(
    patterns: &[String],
    launch: &TaskLaunch,
    node_id: &str,
    node_name: &str,
) -> Vec<(String, String)> {
    let value = |key: &str| -> String {
        match key {
            "job_name" => env_of(launch, "NOMAD_JOB_NAME")
                .unwrap_or_default()
                .to_string(),
            "job_id" => env_of(launch, "NOMAD_JOB_ID")
                .unwrap_or_default()
                .to_string(),
            "task_group_name" => env_of(launch, "NOMAD_GROUP_NAME")
                .unwrap_or_default()
                .to_string(),
            "task_name" => launch.task_name.clone(),
            "namespace" => env_of(launch, "NOMAD_NAMESPACE")
                .unwrap_or_default()
                .to_string(),
            "node_name" => node_name.to_string(),
            _ => node_id.to_string(),
        }
    };
    EXTRA_LABELS
        .iter()
        .filter(|(key, _)| patterns.iter().any(|pattern| glob_matches(pattern, key)))
        .map(|(key, label)| (label.to_string(), value(key)))
        .collect()
}

/// Checks the task config against the client's and builds the container's create body.
pub fn plan(launch: &TaskLaunch, client: &DockerConfig) -> Result<TaskPlan, DockerError> {
    validate_config(&launch.driver_config, DOCKER_CONFIG_KEYS)
        .map_err(|error| bad(error.to_string()))?;
    let empty = Map::new();
    let config = launch.driver_config.as_object().unwrap_or(&empty);
    let image = string(config, "image")?
        .filter(|image| !image.is_empty())
        .ok_or_else(|| bad("image is required"))?;

    let command = string(config, "command")?.filter(|command| !command.is_empty());
    let args = strings(config, "args")?;
    let cmd = match command {
        Some(command) => Some(std::iter::once(command).chain(args).collect()),
        None if !args.is_empty() => Some(args),
        None => None,
    };
    let entrypoint = config
        .contains_key("entrypoint")
        .then(|| strings(config, "entrypoint"))
        .transpose()?;

    let own_network_mode = string(config, "network_mode")?.filter(|mode| !mode.is_empty());
    if let Some(mode) = &own_network_mode
        && !matches!(mode.as_str(), "bridge" | "host" | "none" | "default")
        && !mode.starts_with("container:")
    {
        return Err(bad(format!(
            "network_mode {mode:?} is not one of bridge, host, none, container:<name>"
        )));
    }
    // In a group network the task joins the group's pause container, as Nomad's tasks do,
    // unless its own network_mode says otherwise.
    let joins_group = own_network_mode.is_none() && launch.network_namespace.is_some();
    let network_mode = match (&own_network_mode, joins_group, &launch.network_sandbox) {
        (Some(mode), _, _) => Some(mode.clone()),
        (None, true, Some(sandbox)) => Some(format!("container:{sandbox}")),
        (None, true, None) => {
            return Err(bad(
                "the group's network namespace has no pause container to join (it was not made by the docker driver)",
            ));
        }
        (None, false, _) => None,
    };
    let (mut exposed_ports, mut port_bindings) = port_bindings(config, launch)?;
    if network_mode
        .as_deref()
        .is_some_and(|mode| mode.starts_with("container:"))
    {
        // The group's ports are mapped into the shared namespace by the network's portmap;
        // nothing is published by the engine (Nomad's rule for a shared namespace).
        exposed_ports.clear();
        port_bindings.clear();
    }
    if !port_bindings.is_empty() && matches!(network_mode.as_deref(), Some("host" | "none")) {
        if !strings(config, "ports")?.is_empty() {
            return Err(bad(
                "ports cannot be published with network_mode host or none",
            ));
        }
        // A task network's ports in the host's network: the container binds them itself
        // (the engine discards published ports there, as it does under Nomad).
        exposed_ports.clear();
        port_bindings.clear();
    }

    let privileged = flag(config, "privileged")?;
    if privileged && !client.allow_privileged {
        return Err(bad(
            "privileged: this client does not allow privileged containers (plugin \"docker\" { config { allow_privileged = true } })",
        ));
    }
    // The host's (or another container's) pid, ipc and uts namespaces: only what the client
    // allows (Nomad 2.0.4, GH-28190), every mode when it allows privileged containers.
    let mut modes = HashMap::new();
    for (mode_key, list_key) in crate::config::MODE_KEYS {
        let Some(mode) = string(config, mode_key)?.filter(|mode| !mode.is_empty()) else {
            continue;
        };
        let allowed = client.allow_privileged
            || client
                .allowed_modes
                .for_key(mode_key)
                .iter()
                .any(|pattern| glob_matches(pattern, &mode));
        if !allowed {
            return Err(bad(format!(
                "cannot apply {mode_key:?} configuration: {mode_key} = {mode:?} is not allowed by this client (plugin \"docker\" {{ config {{ allowed_modes {{ {list_key} = [{mode:?}] }} }} }}, or allow_privileged = true)"
            )));
        }
        modes.insert(mode_key, mode);
    }
    let cap_add: Vec<String> = strings(config, "cap_add")?;
    let allowed_all = client.allow_caps.iter().any(|cap| cap == "all");
    let refused: Vec<&String> = cap_add
        .iter()
        .filter(|cap| !allowed_all && !client.allow_caps.contains(&normalize_cap(cap)))
        .collect();
    if !refused.is_empty() {
        return Err(bad(format!(
            "cap_add: {} not allowed by this client's allow_caps",
            refused
                .iter()
                .map(|cap| format!("{cap:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let cap_drop = strings(config, "cap_drop")?;

    let runtime = string(config, "runtime")?.filter(|runtime| !runtime.is_empty());
    if let Some(runtime) = &runtime
        && !client.allow_runtimes.contains(runtime)
    {
        return Err(bad(format!("requested runtime {runtime:?} is not allowed")));
    }

    let mut labels = string_map(config, "labels")?;
    labels.insert(ALLOC_ID_LABEL.to_string(), launch.alloc_id.clone());
    labels.insert(TASK_NAME_LABEL.to_string(), launch.task_name.clone());

    // The task's directories at Nomad's paths, each resolved beneath the alloc dir at create.
    let mut binds = Vec::new();
    let mut beneath = Vec::new();
    let alloc_dir = launch
        .task_dir
        .as_deref()
        .and_then(Path::parent)
        .map(Path::to_path_buf);
    if let (Some(alloc), Some(task_dir), Some(alloc_dir)) =
        (&launch.shared_alloc_dir, &launch.task_dir, &alloc_dir)
    {
        for (source, target) in [
            (alloc.clone(), "/alloc"),
            (task_dir.join("local"), "/local"),
            (task_dir.join("secrets"), "/secrets"),
        ] {
            let relative = source.strip_prefix(alloc_dir).map_err(|_| {
                bad(format!(
                    "{target}: {} is not in the allocation directory {}",
                    source.display(),
                    alloc_dir.display()
                ))
            })?;
            beneath.push(BeneathBind {
                setting: target.to_string(),
                written: source.display().to_string(),
                relative: relative.to_path_buf(),
                create_missing: false,
                slot: BindSlot::Bind {
                    index: binds.len(),
                    suffix: format!(":{target}"),
                },
            });
            binds.push(format!("{}:{target}", source.display()));
        }
    }
    volume_binds(config, launch, client, &mut binds, &mut beneath)?;

    // memory_hard_limit (MiB), as Nomad: the larger of it and memory_max is the hard limit,
    // and memory then the reservation.
    let (soft, hard) = match integer(config, "memory_hard_limit")? {
        Some(limit) if limit < 0 => {
            return Err(bad("memory_hard_limit must not be negative"));
        }
        Some(limit) if limit > 0 => {
            let limit_bytes = u64::try_from(limit)
                .unwrap_or(0)
                .saturating_mul(1024 * 1024);
            let hard = launch
                .resources
                .memory_max_bytes
                .map_or(limit_bytes, |max| max.max(limit_bytes));
            (launch.resources.memory_bytes, Some(hard))
        }
        _ => launch.resources.memory_limits(),
    };
    let as_i64 = |value: u64| i64::try_from(value).unwrap_or(i64::MAX);
    let pids_limit = match integer(config, "pids_limit")? {
        Some(0) => return Err(bad("pids_limit must be a positive integer")),
        Some(limit) => Some(limit),
        None => launch.resources.pids_max.map(as_i64),
    };
    let shm_size = integer(config, "shm_size")?;
    let sysctls = string_map(config, "sysctl")?;
    let ulimits = ulimits(config)?;
    let devices = devices(config)?;
    let dns = strings(config, "dns_servers")?;
    let dns_search = strings(config, "dns_search_domains")?;
    let dns_options = strings(config, "dns_options")?;
    let group_add = strings(config, "group_add")?;
    let extra_hosts = strings(config, "extra_hosts")?;
    let security_opt = strings(config, "security_opt")?;
    let mut mounts = mounts(config, launch, client, &mut beneath)?;
    // The group's `dns` block: its resolv.conf, as Nomad mounts it (the task's own dns_*
    // settings do not combine with it).
    let group_dns = launch.resolv_conf.as_ref().filter(|_| joins_group);
    if let Some(resolv_conf) = group_dns {
        mounts.push(Mount {
            target: Some("/etc/resolv.conf".to_string()),
            source: Some(resolv_conf.display().to_string()),
            typ: Some(MountType::BIND),
            read_only: Some(true),
            ..Mount::default()
        });
    }
    let (dns, dns_search, dns_options) = if group_dns.is_some() {
        (Vec::new(), Vec::new(), Vec::new())
    } else {
        (dns, dns_search, dns_options)
    };
    // The group's host volumes, as Nomad mounts a task's `volume_mount`s: bind mounts the
    // client resolved from its own `host_volume` config, so not confined by `volumes`.
    mounts.extend(launch.mounts.iter().map(|mount| Mount {
        target: Some(mount.task_path.display().to_string()),
        source: Some(mount.host_path.display().to_string()),
        typ: Some(MountType::BIND),
        read_only: Some(mount.read_only),
        ..Mount::default()
    }));

    let host_config = HostConfig {
        binds: Some(binds),
        mounts: (!mounts.is_empty()).then_some(mounts),
        memory: hard.map(as_i64),
        // No swap beyond the memory limit, as Nomad.
        memory_swap: hard.map(as_i64),
        memory_reservation: soft.map(as_i64),
        cpu_shares: launch.resources.cpu_shares.map(as_i64),
        // cpuset_cpus replaces the cpuset of the task's reserved cores, as in Nomad.
        cpuset_cpus: string(config, "cpuset_cpus")?
            .filter(|cpus| !cpus.is_empty())
            .or_else(|| launch.resources.cpuset_cpus.clone()),
        pids_limit,
        network_mode: network_mode.clone(),
        port_bindings: (!port_bindings.is_empty()).then_some(port_bindings),
        dns: (!dns.is_empty()).then_some(dns),
        dns_search: (!dns_search.is_empty()).then_some(dns_search),
        dns_options: (!dns_options.is_empty()).then_some(dns_options),
        group_add: (!group_add.is_empty()).then_some(group_add),
        extra_hosts: (!extra_hosts.is_empty()).then_some(extra_hosts),
        privileged: Some(privileged),
        cap_add: (!cap_add.is_empty()).then_some(cap_add),
        cap_drop: (!cap_drop.is_empty()).then_some(cap_drop),
        shm_size,
        ulimits: (!ulimits.is_empty()).then_some(ulimits),
        sysctls: (!sysctls.is_empty()).then_some(sysctls),
        readonly_rootfs: Some(flag(config, "readonly_rootfs")?),
        init: config
            .contains_key("init")
            .then(|| flag(config, "init"))
            .transpose()?,
        ipc_mode: modes.remove("ipc_mode"),
        pid_mode: modes.remove("pid_mode"),
        uts_mode: modes.remove("uts_mode"),
        security_opt: (!security_opt.is_empty()).then_some(security_opt),
        devices: (!devices.is_empty()).then_some(devices),
        log_config: Some(logging(config)?),
        runtime,
        ..HostConfig::default()
    };

    // The group network's host name is the pause container's (a task joining it has it);
    // a container gets only its own `hostname`, as in Nomad.
    let hostname = string(config, "hostname")?.filter(|name| !name.is_empty());
    if hostname.is_some() && matches!(network_mode.as_deref(), Some("host")) {
        return Err(bad("hostname cannot be set with network_mode host"));
    }
    let body = ContainerCreateBody {
        image: Some(image.clone()),
        cmd,
        entrypoint,
        working_dir: string(config, "work_dir")?,
        env: Some(container_env(config, launch)?),
        user: launch.user.clone(),
        hostname,
        tty: Some(flag(config, "tty")?),
        open_stdin: Some(flag(config, "interactive")?),
        labels: Some(labels),
        exposed_ports: (!exposed_ports.is_empty()).then_some(exposed_ports),
        host_config: Some(host_config),
        ..ContainerCreateBody::default()
    };
    let pull_timeout = match string(config, "image_pull_timeout")? {
        Some(text) => parse_duration(&text, "image_pull_timeout")?,
        None => DEFAULT_PULL_TIMEOUT,
    };
    Ok(TaskPlan {
        image,
        force_pull: flag(config, "force_pull")?,
        pull_timeout,
        auth: auth(config)?,
        auth_soft_fail: flag(config, "auth_soft_fail")?,
        load: load_archive(config, launch)?,
        alloc_dir,
        beneath,
        body,
        port_map: port_map(config)?,
    })
}

/// `registry/repo:tag` → (`registry/repo`, `tag`); no tag is `latest`; a digest stays whole.
pub fn split_image(image: &str) -> (String, String) {
    if image.contains('@') {
        return (image.to_string(), String::new());
    }
    let name_start = image.rfind('/').map_or(0, |slash| slash + 1);
    match image[name_start..].rfind(':') {
        Some(colon) => (
            image[..name_start + colon].to_string(),
            image[name_start + colon + 1..].to_string(),
        ),
        None => (image.to_string(), "latest".to_string()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn launch(config: Value) -> TaskLaunch {
        TaskLaunch {
            alloc_id: "a1".into(),
            task_name: "web".into(),
            driver_config: config,
            task_dir: Some("/data/alloc/a1/web".into()),
            shared_alloc_dir: Some("/data/alloc/a1/alloc".into()),
            env: vec![
                ("NOMAD_HOST_PORT_http".into(), "23456".into()),
                ("NOMAD_PORT_http".into(), "8080".into()),
                ("NOMAD_HOST_IP_http".into(), "127.0.0.1".into()),
            ],
            ..TaskLaunch::default()
        }
    }

    #[test]
    fn extra_labels_are_chosen_by_globs_as_nomad() {
        assert!(glob_matches("task*", "task_name") && glob_matches("task*", "task_group_name"));
        assert!(glob_matches("*", "job_id") && glob_matches("*_id", "node_id"));
        assert!(glob_matches("j*_n*e", "job_name") && !glob_matches("j*_n*e", "job_id"));
        assert!(!glob_matches("job", "job_id"));
        let mut launch = launch(json!({"image": "x"}));
        launch.env.push(("NOMAD_JOB_NAME".into(), "web-job".into()));
        launch.env.push(("NOMAD_GROUP_NAME".into(), "g".into()));
        let labels = extra_labels(&["job_name".into(), "task*".into()], &launch, "n1", "host");
        assert_eq!(
            labels,
            vec![
                (
                    "com.hashicorp.nomad.job_name".to_string(),
                    "web-job".to_string()
                ),
                (
                    "com.hashicorp.nomad.task_group_name".to_string(),
                    "g".to_string()
                ),
                (TASK_NAME_LABEL.to_string(), "web".to_string()),
            ]
        );
    }

    #[test]
    fn a_runtime_must_be_allowed_by_the_client() {
        let client = DockerConfig::default();
        let planned = plan(&launch(json!({"image": "x", "runtime": "runc"})), &client).unwrap();
        assert_eq!(
            planned.body.host_config.unwrap().runtime.as_deref(),
            Some("runc")
        );
        let error = plan(&launch(json!({"image": "x", "runtime": "runsc"})), &client)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("requested runtime \"runsc\" is not allowed"),
            "{error}"
        );
    }

    #[test]
    fn images_split_into_repository_and_tag() {
        assert_eq!(split_image("busybox"), ("busybox".into(), "latest".into()));
        assert_eq!(
            split_image("127.0.0.1:5000/local/busybox:1"),
            ("127.0.0.1:5000/local/busybox".into(), "1".into())
        );
        assert_eq!(
            split_image("127.0.0.1:5000/busybox"),
            ("127.0.0.1:5000/busybox".into(), "latest".into())
        );
        assert_eq!(split_image("a@sha256:ab").1, "");
    }

    #[test]
    fn a_task_config_becomes_a_create_body() {
        let plan = plan(
            &launch(json!({
                "image": "local/busybox:1",
                "command": "httpd",
                "args": ["-f", "-p", "8080"],
                "ports": ["http"],
                "labels": [{"team": "web"}],
                "ulimit": {"nofile": "1024:2048"},
                "volumes": ["local/data:/data:ro"],
                "image_pull_timeout": "1m30s",
            })),
            &DockerConfig::default(),
        )
        .unwrap();
        assert_eq!(plan.pull_timeout, Duration::from_secs(90));
        let body = plan.body;
        assert_eq!(body.cmd.unwrap(), vec!["httpd", "-f", "-p", "8080"]);
        let host = body.host_config.unwrap();
        let binding = &host.port_bindings.unwrap()["8080/tcp"];
        assert_eq!(
            binding.as_ref().unwrap()[0].host_port.as_deref(),
            Some("23456")
        );
        assert!(
            host.binds
                .as_ref()
                .unwrap()
                .contains(&"/data/alloc/a1/alloc:/alloc".to_string())
        );
        assert!(
            host.binds
                .unwrap()
                .contains(&"/data/alloc/a1/web/local/data:/data:ro".to_string())
        );
        assert_eq!(host.ulimits.unwrap()[0].hard, Some(2048));
        assert_eq!(body.labels.unwrap()["team"], "web");
    }

    #[test]
    fn a_task_of_a_group_network_joins_the_pause_container_and_publishes_nothing() {
        let mut joining = launch(json!({"image": "x", "ports": ["http"]}));
        joining.network_namespace = Some("/var/run/netns/a1".into());
        joining.network_sandbox = Some("c0ffee".into());
        joining.hostname = Some("web-host".into());
        joining.resolv_conf = Some("/data/alloc/a1/resolv.conf".into());
        let body = plan(&joining, &DockerConfig::default()).unwrap().body;
        let host = body.host_config.unwrap();
        assert_eq!(host.network_mode.as_deref(), Some("container:c0ffee"));
        assert!(host.port_bindings.is_none(), "{:?}", host.port_bindings);
        // The host name is the pause container's; the group's resolv.conf is mounted.
        assert_eq!(body.hostname, None);
        let resolv = host
            .mounts
            .unwrap()
            .into_iter()
            .find(|mount| mount.target.as_deref() == Some("/etc/resolv.conf"))
            .unwrap();
        assert_eq!(resolv.source.as_deref(), Some("/data/alloc/a1/resolv.conf"));
        assert_eq!(resolv.read_only, Some(true));

        // The task's own network_mode wins, as in Nomad.
        let mut own = joining.clone();
        own.driver_config = json!({"image": "x", "network_mode": "host"});
        let host = plan(&own, &DockerConfig::default())
            .unwrap()
            .body
            .host_config
            .unwrap();
        assert_eq!(host.network_mode.as_deref(), Some("host"));

        // A namespace without a pause container cannot be joined by a container.
        let mut orphan = joining.clone();
        orphan.network_sandbox = None;
        let error = plan(&orphan, &DockerConfig::default())
            .unwrap_err()
            .to_string();
        assert!(error.contains("pause container"), "{error}");
    }

    #[test]
    fn port_map_maps_the_task_networks_ports_as_nomad() {
        let mut task_launch = launch(json!({
            "image": "x",
            "port_map": [{"http": 8080}],
        }));
        task_launch.env = vec![
            ("NOMAD_PORT_http".into(), "23456".into()),
            ("NOMAD_PORT_db".into(), "25000".into()),
        ];
        task_launch.task_network = Some(drover_driver::TaskNetwork {
            ip: "10.0.0.5".into(),
            ports: vec![("http".into(), 23456), ("db".into(), 25000)],
        });
        let body = plan(&task_launch, &DockerConfig::default()).unwrap().body;
        let bindings = body.host_config.unwrap().port_bindings.unwrap();
        let bound = |key: &str| {
            let binding = &bindings[key].as_ref().unwrap()[0];
            (
                binding.host_ip.clone().unwrap(),
                binding.host_port.clone().unwrap(),
            )
        };
        // http goes to the container port port_map names, db (unmapped) to its host port.
        assert_eq!(bound("8080/tcp"), ("10.0.0.5".into(), "23456".into()));
        assert_eq!(bound("8080/udp"), ("10.0.0.5".into(), "23456".into()));
        assert_eq!(bound("25000/tcp"), ("10.0.0.5".into(), "25000".into()));
        assert_eq!(bindings.len(), 4);
        // The container sees the container port as its NOMAD_PORT_http.
        let env = body.env.unwrap();
        assert!(env.contains(&"NOMAD_PORT_http=8080".to_string()), "{env:?}");
        assert!(env.contains(&"NOMAD_PORT_db=25000".to_string()), "{env:?}");
        assert!(
            !env.contains(&"NOMAD_PORT_http=23456".to_string()),
            "{env:?}"
        );

        // In the host's network the container binds the host ports itself: nothing published.
        let mut host_mode = task_launch.clone();
        host_mode.driver_config =
            json!({"image": "x", "network_mode": "host", "port_map": {"http": 8080}});
        let host = plan(&host_mode, &DockerConfig::default()).unwrap().body;
        assert!(
            host.host_config
                .unwrap()
                .port_bindings
                .unwrap_or_default()
                .is_empty()
        );

        // Without a task network, port_map fails the task with Nomad's error.
        let error = plan(
            &launch(json!({"image": "x", "port_map": [{"http": 8080}]})),
            &DockerConfig::default(),
        )
        .unwrap_err();
        assert!(
            error
                .to_string()
                .contains("'port_map' cannot map group network ports, use 'ports' instead"),
            "{error}"
        );
        let error = plan(
            &launch(json!({"image": "x", "port_map": [{"http": "web"}]})),
            &DockerConfig::default(),
        )
        .unwrap_err();
        assert!(error.to_string().contains("port_map.http"), "{error}");
    }

    #[test]
    fn memory_hard_limit_raises_the_hard_limit_as_nomad() {
        const MIB: i64 = 1024 * 1024;
        let limits = |config: Value, memory_max_mb: Option<u64>| {
            let mut launch = launch(config);
            launch.resources.memory_bytes = Some(32 * 1024 * 1024);
            launch.resources.memory_max_bytes = memory_max_mb.map(|mb| mb * 1024 * 1024);
            let host = plan(&launch, &DockerConfig::default())
                .unwrap()
                .body
                .host_config
                .unwrap();
            (host.memory, host.memory_reservation)
        };
        // Without it: memory is the hard limit, no reservation.
        assert_eq!(limits(json!({"image": "x"}), None), (Some(32 * MIB), None));
        // With it: the hard limit, memory the reservation; memory_max wins when larger.
        let hard = json!({"image": "x", "memory_hard_limit": 64});
        assert_eq!(limits(hard.clone(), None), (Some(64 * MIB), Some(32 * MIB)));
        assert_eq!(limits(hard, Some(128)), (Some(128 * MIB), Some(32 * MIB)));
        let error = plan(
            &launch(json!({"image": "x", "memory_hard_limit": -1})),
            &DockerConfig::default(),
        )
        .unwrap_err();
        assert!(error.to_string().contains("memory_hard_limit"), "{error}");
    }

    #[test]
    fn namespace_modes_need_the_clients_allowed_modes_or_allow_privileged() {
        let host_modes =
            json!({"image": "x", "pid_mode": "host", "ipc_mode": "host", "uts_mode": "host"});
        for (key, value) in [
            ("pid_mode", "host"),
            ("ipc_mode", "host"),
            ("uts_mode", "host"),
            ("ipc_mode", "private"),
        ] {
            let error = plan(
                &launch(json!({"image": "x", key: value})),
                &DockerConfig::default(),
            )
            .unwrap_err()
            .to_string();
            assert!(
                error.contains(&format!("cannot apply \"{key}\" configuration")),
                "{error}"
            );
            assert!(error.contains("allowed_modes"), "{error}");
        }
        let allowing = DockerConfig {
            allowed_modes: crate::config::AllowedModes {
                pid: vec!["host".into()],
                ipc: vec!["ho*".into()],
                uts: vec!["host".into()],
            },
            ..DockerConfig::default()
        };
        let host = plan(&launch(host_modes.clone()), &allowing)
            .unwrap()
            .body
            .host_config
            .unwrap();
        assert_eq!(
            (
                host.pid_mode.as_deref(),
                host.ipc_mode.as_deref(),
                host.uts_mode.as_deref()
            ),
            (Some("host"), Some("host"), Some("host"))
        );
        // An allowed list names only what it names.
        let error = plan(
            &launch(json!({"image": "x", "pid_mode": "container:other"})),
            &allowing,
        )
        .unwrap_err();
        assert!(error.to_string().contains("\"pid_mode\""), "{error}");
        let privileged = DockerConfig {
            allow_privileged: true,
            ..DockerConfig::default()
        };
        assert!(plan(&launch(host_modes), &privileged).is_ok());
    }

    #[test]
    fn what_the_client_does_not_allow_is_refused_by_name() {
        let client = DockerConfig::default();
        for (config, named) in [
            (
                json!({"image": "x", "volumes": ["/etc:/host-etc"]}),
                "volumes",
            ),
            (
                json!({"image": "x", "volumes": ["../../../etc:/e"]}),
                "volumes",
            ),
            (json!({"image": "x", "privileged": true}), "privileged"),
            (json!({"image": "x", "cap_add": ["sys_admin"]}), "cap_add"),
            (json!({"image": "x", "ports": ["admin"]}), "ports"),
            (json!({"image": "x", "logging": {"driver": "x"}}), "logging"),
            (json!({"image": "x", "load": "../../../x.tar"}), "load"),
            (
                json!({"image": "x", "mount": [{"type": "volume", "source": "v", "target": "/v"}]}),
                "cannot mount volume: \"v\"",
            ),
            (json!({"command": "x"}), "image"),
        ] {
            let error = plan(&launch(config.clone()), &client)
                .unwrap_err()
                .to_string();
            assert!(error.contains(named), "{config}: {error}");
        }
        let open = DockerConfig {
            volumes_enabled: true,
            allow_privileged: true,
            ..DockerConfig::default()
        };
        assert!(
            plan(
                &launch(json!({
                    "image": "x",
                    "volumes": ["/etc:/e"],
                    "privileged": true,
                    "mount": [{"type": "volume", "source": "v", "target": "/v"}],
                })),
                &open
            )
            .is_ok()
        );
    }
}
