//! The client's docker plugin config (`plugin "docker" { config { … } }`, as Nomad writes it):
//! where the engine listens, where pulls find registry credentials (`auth { config helper }`),
//! what tasks may ask for (host volumes, privileged containers, capabilities, runtimes, the
//! namespace modes of `allowed_modes`), the
//! extra labels containers get and the garbage collection. Keys drover does not implement are refused by name.
//!
//! Not for: the task config (see `task`).

use serde_json::{Map, Value};

use crate::error::DockerError;
use crate::values::{bool_value, single_block};

/// Where the engine listens when neither the config nor `DOCKER_HOST` says.
pub const DEFAULT_ENDPOINT: &str = "unix:///var/run/docker.sock";

/// Nomad's default `allow_caps`: the capabilities Docker grants by default.
pub const DEFAULT_ALLOW_CAPS: [&str; 14] = [
    "audit_write",
    "chown",
    "dac_override",
    "fowner",
    "fsetid",
    "kill",
    "mknod",
    "net_bind_service",
    "net_raw",
    "setfcap",
    "setgid",
    "setpcap",
    "setuid",
    "sys_chroot",
];

/// Plugin config keys drover implements.
const PLUGIN_KEYS: &[&str] = &[
    "endpoint",
    "auth",
    "volumes",
    "allow_privileged",
    "allow_caps",
    "pull_activity_timeout",
    "gc",
    "extra_labels",
    "allow_runtimes",
    "allowed_modes",
    "infra_image",
    "infra_image_pull_timeout",
];

/// Nomad's default `allow_runtimes`.
pub const DEFAULT_ALLOW_RUNTIMES: [&str; 2] = ["runc", "nvidia"];

/// The docker driver's client-side settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DockerConfig {
    /// `unix:///path/docker.sock` (or a bare path).
    pub endpoint: String,
    /// `volumes { enabled = true }`: task `volumes`/`mount` may name host paths outside the
    /// task's directories.
    pub volumes_enabled: bool,
    /// `allow_privileged = true`: tasks may ask for `privileged = true`.
    pub allow_privileged: bool,
    /// `allow_caps`: the capabilities a task's `cap_add` may name (lower case, without `CAP_`;
    /// `all` allows every one).
    pub allow_caps: Vec<String>,
    /// `auth { config helper }`: where pulls find registry credentials a task does not give.
    pub auth: crate::auth::PluginAuth,
    /// `pull_activity_timeout`: a pull without progress for this long is given up (Nomad's
    /// default 2m, at least 1m).
    pub pull_activity_timeout: std::time::Duration,
    /// `gc { image image_delay container dangling_containers }`.
    pub gc: crate::gc::GcConfig,
    /// `extra_labels`: which of Nomad's `com.hashicorp.nomad.*` labels (job_name, job_id,
    /// task_group_name, task_name, namespace, node_name, node_id) containers get besides the
    /// alloc ID; `*` matches any run of characters, as Nomad's globs.
    pub extra_labels: Vec<String>,
    /// `allow_runtimes`: the OCI runtimes a task's `runtime` may name.
    pub allow_runtimes: Vec<String>,
    /// `allowed_modes { pid ipc uts }`: the values a task's `pid_mode`, `ipc_mode` and
    /// `uts_mode` may take (globs, `*` any run of characters) when `allow_privileged` is not
    /// set; empty by default, so a task may set none of them (Nomad 2.0.4).
    pub allowed_modes: AllowedModes,
    /// How long re-attaching to a container waits for an engine that does not answer (not a
    /// Nomad key: the agent's own bound, five minutes).
    pub restore_engine_wait: std::time::Duration,
    /// `infra_image`: the pause container's image, which owns the network namespace of a
    /// group in bridge, none or CNI mode with a docker task (Nomad's default
    /// `registry.k8s.io/pause-<arch>:3.3`).
    pub infra_image: String,
    /// `infra_image_pull_timeout`: how long a pull of `infra_image` may take (Nomad: 5m).
    pub infra_image_pull_timeout: std::time::Duration,
}

/// Nomad's default `infra_image` for this machine's architecture (Go's names).
pub fn default_infra_image() -> String {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        other => other,
    };
    format!("registry.k8s.io/pause-{arch}:3.3")
}

/// How long re-attaching waits for the engine by default.
pub const DEFAULT_RESTORE_ENGINE_WAIT: std::time::Duration = std::time::Duration::from_secs(300);

impl Default for DockerConfig {
    fn default() -> Self {
        Self {
            endpoint: std::env::var("DOCKER_HOST")
                .ok()
                .filter(|host| !host.is_empty())
                .unwrap_or_else(|| DEFAULT_ENDPOINT.to_string()),
            volumes_enabled: false,
            allow_privileged: false,
            allow_caps: DEFAULT_ALLOW_CAPS
                .iter()
                .map(|cap| cap.to_string())
                .collect(),
            auth: crate::auth::PluginAuth::default(),
            pull_activity_timeout: std::time::Duration::from_secs(120),
            gc: crate::gc::GcConfig::default(),
            extra_labels: Vec::new(),
            allow_runtimes: DEFAULT_ALLOW_RUNTIMES
                .iter()
                .map(|runtime| runtime.to_string())
                .collect(),
            restore_engine_wait: DEFAULT_RESTORE_ENGINE_WAIT,
            allowed_modes: AllowedModes::default(),
            infra_image: default_infra_image(),
            infra_image_pull_timeout: std::time::Duration::from_secs(300),
        }
    }
}

/// The plugin's `allowed_modes` block: per namespace, the modes a task may ask for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowedModes {
    pub pid: Vec<String>,
    pub ipc: Vec<String>,
    pub uts: Vec<String>,
}

/// The task config key each `allowed_modes` list governs, with the list's own key.
pub const MODE_KEYS: [(&str, &str); 3] = [
    ("pid_mode", "pid"),
    ("ipc_mode", "ipc"),
    ("uts_mode", "uts"),
];

impl AllowedModes {
    /// The list that governs the task config key `mode_key` (`pid_mode`, …).
    pub fn for_key(&self, mode_key: &str) -> &[String] {
        match mode_key {
            "pid_mode" => &self.pid,
            "ipc_mode" => &self.ipc,
            _ => &self.uts,
        }
    }
}

/// Whether `mode` is one the engine takes for `mode_key` (moby's `Valid` of each mode type):
/// pid: `host` or `container:<id>`; ipc: `none`, `private`, `shareable`, `host`,
/// `container:<id>`; uts: `host`.
fn valid_mode(mode_key: &str, mode: &str) -> bool {
    match mode_key {
        "pid_mode" => {
            mode == "host"
                || mode
                    .strip_prefix("container:")
                    .is_some_and(|id| !id.is_empty())
        }
        "ipc_mode" => {
            matches!(mode, "none" | "private" | "shareable" | "host")
                || mode.starts_with("container:")
        }
        _ => mode.split(':').next() == Some("host"),
    }
}

fn allowed_modes(value: &Value) -> Result<AllowedModes, DockerError> {
    let block = single_block(value, "allowed_modes")?;
    if block
        .get("userns")
        .and_then(Value::as_array)
        .is_some_and(|modes| !modes.is_empty())
    {
        return Err(DockerError::Config(
            "plugin \"docker\" config allowed_modes.userns: drover's docker driver does not run a task's userns_mode (it is refused), so there is no userns mode to allow".into(),
        ));
    }
    refuse_unknown(
        block,
        &["pid", "ipc", "uts", "userns"],
        "plugin \"docker\" config allowed_modes",
    )?;
    let mut parsed = AllowedModes::default();
    for (mode_key, list_key) in MODE_KEYS {
        let Some(list) = block.get(list_key) else {
            continue;
        };
        let modes = string_list(list, &format!("allowed_modes.{list_key}"))?;
        if let Some(invalid) = modes.iter().find(|mode| !valid_mode(mode_key, mode)) {
            return Err(DockerError::Config(format!(
                "cannot apply allowed_modes configuration, {invalid:?} is not a valid {mode_key}"
            )));
        }
        match list_key {
            "pid" => parsed.pid = modes,
            "ipc" => parsed.ipc = modes,
            _ => parsed.uts = modes,
        }
    }
    Ok(parsed)
}

fn refuse_unknown(
    map: &Map<String, Value>,
    allowed: &[&str],
    what: &str,
) -> Result<(), DockerError> {
    let mut unknown: Vec<&str> = map
        .keys()
        .map(String::as_str)
        .filter(|key| !allowed.contains(key))
        .collect();
    unknown.sort_unstable();
    if unknown.is_empty() {
        return Ok(());
    }
    Err(DockerError::Config(format!(
        "{what}: unsupported key{} {} (drover implements: {})",
        if unknown.len() > 1 { "s" } else { "" },
        unknown
            .iter()
            .map(|key| format!("{key:?}"))
            .collect::<Vec<_>>()
            .join(", "),
        allowed.join(", ")
    )))
}

impl DockerConfig {
    /// Reads the `config` block of `plugin "docker"`; `None` (no block) gives the defaults.
    pub fn from_plugin_config(config: Option<&Map<String, Value>>) -> Result<Self, DockerError> {
        let mut parsed = Self::default();
        let Some(config) = config else {
            return Ok(parsed);
        };
        if config.contains_key("tls") {
            return Err(DockerError::Config(
                "plugin \"docker\" config tls: drover reaches the engine over its unix socket only, so there is no TLS to configure (an engine on tcp:// is not supported)".into(),
            ));
        }
        refuse_unknown(config, PLUGIN_KEYS, "plugin \"docker\" config")?;
        if let Some(image) = config.get("infra_image") {
            let image = image
                .as_str()
                .filter(|image| !image.is_empty())
                .ok_or_else(|| DockerError::Config("infra_image must be an image name".into()))?;
            // Nomad takes the image with or without a scheme.
            parsed.infra_image = image.trim_start_matches("https://").to_string();
        }
        if let Some(timeout) = config.get("infra_image_pull_timeout") {
            let text = timeout.as_str().ok_or_else(|| {
                DockerError::Config("infra_image_pull_timeout must be a duration string".into())
            })?;
            parsed.infra_image_pull_timeout =
                crate::values::parse_duration(text, "infra_image_pull_timeout")?;
        }
        if let Some(endpoint) = config.get("endpoint") {
            let endpoint = endpoint
                .as_str()
                .ok_or_else(|| DockerError::Config("endpoint must be a string".into()))?;
            if !endpoint.starts_with("unix://") && !endpoint.starts_with('/') {
                return Err(DockerError::Config(format!(
                    "endpoint {endpoint:?}: drover talks to the engine over a unix socket only (unix:///path)"
                )));
            }
            parsed.endpoint = endpoint.to_string();
        }
        if let Some(auth) = config.get("auth") {
            let auth = single_block(auth, "auth")?;
            refuse_unknown(auth, &["config", "helper"], "plugin \"docker\" config auth")?;
            let text = |key: &str| -> Result<Option<String>, DockerError> {
                match auth.get(key) {
                    None | Some(Value::Null) => Ok(None),
                    Some(Value::String(text)) => Ok(Some(text.clone())),
                    Some(_) => Err(DockerError::Config(format!("auth.{key} must be a string"))),
                }
            };
            parsed.auth = crate::auth::PluginAuth {
                config: text("config")?,
                helper: text("helper")?,
            };
        }
        parsed.gc = crate::gc::from_plugin_config(config)?;
        if let Some(timeout) = config.get("pull_activity_timeout") {
            let text = timeout.as_str().ok_or_else(|| {
                DockerError::Config("pull_activity_timeout must be a duration string".into())
            })?;
            let parsed_timeout = crate::values::parse_duration(text, "pull_activity_timeout")?;
            if parsed_timeout < std::time::Duration::from_secs(60) {
                return Err(DockerError::Config(
                    "pull_activity_timeout is less than minimum, 1m0s".into(),
                ));
            }
            parsed.pull_activity_timeout = parsed_timeout;
        }
        if let Some(volumes) = config.get("volumes") {
            let volumes = single_block(volumes, "volumes")?;
            refuse_unknown(volumes, &["enabled"], "plugin \"docker\" config volumes")?;
            if let Some(enabled) = volumes.get("enabled") {
                parsed.volumes_enabled = bool_value(enabled, "volumes.enabled")?;
            }
        }
        if let Some(allow) = config.get("allow_privileged") {
            parsed.allow_privileged = bool_value(allow, "allow_privileged")?;
        }
        if let Some(labels) = config.get("extra_labels") {
            parsed.extra_labels = string_list(labels, "extra_labels")?;
        }
        if let Some(runtimes) = config.get("allow_runtimes") {
            parsed.allow_runtimes = string_list(runtimes, "allow_runtimes")?;
        }
        if let Some(modes) = config.get("allowed_modes") {
            parsed.allowed_modes = allowed_modes(modes)?;
        }
        if let Some(caps) = config.get("allow_caps") {
            let caps = caps.as_array().ok_or_else(|| {
                DockerError::Config("allow_caps must be a list of strings".into())
            })?;
            parsed.allow_caps = caps
                .iter()
                .map(|cap| {
                    cap.as_str().map(normalize_cap).ok_or_else(|| {
                        DockerError::Config("allow_caps must be a list of strings".into())
                    })
                })
                .collect::<Result<_, _>>()?;
        }
        Ok(parsed)
    }

    /// The socket path of the endpoint.
    pub fn socket_path(&self) -> &str {
        self.endpoint
            .strip_prefix("unix://")
            .unwrap_or(&self.endpoint)
    }
}

fn string_list(value: &Value, key: &str) -> Result<Vec<String>, DockerError> {
    let bad = || DockerError::Config(format!("{key} must be a list of strings"));
    value
        .as_array()
        .ok_or_else(bad)?
        .iter()
        .map(|item| item.as_str().map(str::to_string).ok_or_else(bad))
        .collect()
}

/// `CAP_NET_ADMIN`, `net_admin` → `net_admin`.
pub(crate) fn normalize_cap(cap: &str) -> String {
    let lower = cap.trim().to_ascii_lowercase();
    lower
        .strip_prefix("cap_")
        .map(str::to_string)
        .unwrap_or(lower)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn plugin_config_is_read_and_unknown_keys_refused() {
        let config = json!({
            "endpoint": "unix:///tmp/d.sock",
            "volumes": [{"enabled": true}],
            "allow_privileged": true,
            "allow_caps": ["CAP_NET_ADMIN", "chown"],
            "auth": [{"config": "/etc/docker-auth.json", "helper": "ecr-login"}],
        });
        let parsed = DockerConfig::from_plugin_config(config.as_object()).unwrap();
        assert_eq!(parsed.socket_path(), "/tmp/d.sock");
        assert!(parsed.volumes_enabled && parsed.allow_privileged);
        assert_eq!(parsed.allow_caps, vec!["net_admin", "chown"]);
        assert_eq!(parsed.auth.config.as_deref(), Some("/etc/docker-auth.json"));
        assert_eq!(parsed.auth.helper.as_deref(), Some("ecr-login"));
        assert_eq!(parsed.allow_runtimes, vec!["runc", "nvidia"]);
        assert!(parsed.extra_labels.is_empty());
        let parsed = DockerConfig::from_plugin_config(
            json!({"extra_labels": ["job_name", "task*"], "allow_runtimes": ["runc", "runsc"]})
                .as_object(),
        )
        .unwrap();
        assert_eq!(parsed.extra_labels, vec!["job_name", "task*"]);
        assert_eq!(parsed.allow_runtimes, vec!["runc", "runsc"]);
        let error = DockerConfig::from_plugin_config(json!({"tls": {"ca": "x"}}).as_object())
            .unwrap_err()
            .to_string();
        assert!(error.contains("tls"), "{error}");

        let infra = DockerConfig::from_plugin_config(
            json!({"infra_image": "https://127.0.0.1:5000/pause:1", "infra_image_pull_timeout": "30s"})
                .as_object(),
        )
        .unwrap();
        assert_eq!(infra.infra_image, "127.0.0.1:5000/pause:1");
        assert_eq!(
            infra.infra_image_pull_timeout,
            std::time::Duration::from_secs(30)
        );
        assert_eq!(DockerConfig::default().infra_image, default_infra_image());
        assert!(default_infra_image().starts_with("registry.k8s.io/pause-"));
        let error = DockerConfig::from_plugin_config(json!({"infra_image": ""}).as_object())
            .unwrap_err()
            .to_string();
        assert!(error.contains("infra_image"), "{error}");
        let error =
            DockerConfig::from_plugin_config(json!({"volumes": {"selinuxlabel": "z"}}).as_object())
                .unwrap_err()
                .to_string();
        assert!(error.contains("\"selinuxlabel\""), "{error}");
        assert!(
            DockerConfig::from_plugin_config(json!({"endpoint": "tcp://1.2.3.4:2375"}).as_object())
                .is_err()
        );
    }

    #[test]
    fn allowed_modes_are_read_and_checked_as_nomad() {
        let parsed = DockerConfig::from_plugin_config(
            json!({"allowed_modes": [{"pid": ["host"], "ipc": ["private", "container:*"], "uts": ["host"], "userns": []}]})
                .as_object(),
        )
        .unwrap();
        assert_eq!(parsed.allowed_modes.pid, vec!["host"]);
        assert_eq!(parsed.allowed_modes.ipc, vec!["private", "container:*"]);
        assert_eq!(parsed.allowed_modes.uts, vec!["host"]);
        assert_eq!(
            DockerConfig::default().allowed_modes,
            AllowedModes::default()
        );
        for (config, named) in [
            (
                json!({"pid": ["private"]}),
                "\"private\" is not a valid pid_mode",
            ),
            (
                json!({"pid": ["container:"]}),
                "\"container:\" is not a valid pid_mode",
            ),
            (
                json!({"ipc": ["hostly"]}),
                "\"hostly\" is not a valid ipc_mode",
            ),
            (
                json!({"uts": ["private"]}),
                "\"private\" is not a valid uts_mode",
            ),
            (json!({"userns": ["host"]}), "allowed_modes.userns"),
            (json!({"cgroup": ["host"]}), "\"cgroup\""),
            (
                json!({"pid": "host"}),
                "allowed_modes.pid must be a list of strings",
            ),
        ] {
            let error = DockerConfig::from_plugin_config(
                json!({"allowed_modes": config.clone()}).as_object(),
            )
            .unwrap_err()
            .to_string();
            assert!(error.contains(named), "{config}: {error}");
        }
    }
}
