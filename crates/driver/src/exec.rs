//! The `exec` driver: the `raw_exec` machinery (one shim and one cgroup per task) plus the
//! policy of isolation the shim's child applies before exec — new mount, pid, ipc and uts
//! namespaces (network: the host's, or none), the task dir as `/` with a read-only chroot env
//! bound in, the default capability set adjusted by `cap_add`/`cap_drop` within the client's
//! `allow_caps`, `no_new_privs`, and the task's user (`nobody` by default).
//!
//! The task's host name: the group network's `hostname` when given (set in the task's own uts
//! namespace), the host's name otherwise (the namespace starts as a copy of the host's).
//!
//! Also the task-config schemas of both drivers: unknown keys are refused before anything
//! starts; `pids_limit` (both drivers, a drover extension: Nomad has it for docker only) caps
//! the task's processes and threads through `pids.max`. Not for: the mechanisms (namespaces, mounts, capabilities live in `drover-isolate`,
//! applied by `drover-shim`), or checking the user against the client's denylist (the client's
//! validate hook does that).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use drover_isolate::{CapabilitySet, DEFAULT_CAPABILITIES};
use drover_shim::proto::{BindSpec, IsolationSpec};
use serde_json::Value;

use crate::raw_exec::{RawExecConfig, RawExecDriver};
use crate::{DriverError, TaskLaunch};

/// Task config keys of `raw_exec`.
pub const RAW_EXEC_CONFIG_KEYS: &[&str] = &["command", "args", "pids_limit"];
/// Task config keys of `exec`.
pub const EXEC_CONFIG_KEYS: &[&str] = &[
    "command",
    "args",
    "cap_add",
    "cap_drop",
    "network_mode",
    "pids_limit",
];

/// The chroot env when the client sets none: each host dir bound at the same path in the root.
pub const DEFAULT_CHROOT_ENV: [&str; 6] = ["/bin", "/etc", "/lib", "/lib64", "/sbin", "/usr"];

/// Client-side settings of the exec driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecConfig {
    /// Host path → path inside the task root, bound read-only; empty means
    /// [`DEFAULT_CHROOT_ENV`] (each at its own path).
    pub chroot_env: BTreeMap<String, String>,
    /// Capabilities a task may have at most (`allow_caps`); Nomad's default is the default set.
    pub allow_caps: Vec<String>,
    /// User of tasks that name none.
    pub default_user: String,
}

impl Default for ExecConfig {
    fn default() -> Self {
        Self {
            chroot_env: BTreeMap::new(),
            allow_caps: DEFAULT_CAPABILITIES
                .iter()
                .map(|cap| cap.to_string())
                .collect(),
            default_user: "nobody".to_string(),
        }
    }
}

/// The `exec` driver (a [`RawExecDriver`] that isolates; its name is `exec`).
pub fn exec_driver(raw: RawExecConfig, exec: ExecConfig) -> RawExecDriver {
    RawExecDriver::isolating(raw, exec)
}

/// The task config keys a built-in driver accepts, by driver name (`None`: a driver whose
/// config this crate does not describe, such as the mock driver).
pub fn config_keys_for(driver: &str) -> Option<&'static [&'static str]> {
    match driver {
        "raw_exec" => Some(RAW_EXEC_CONFIG_KEYS),
        "exec" => Some(EXEC_CONFIG_KEYS),
        _ => None,
    }
}

/// Refuses task config keys the driver does not know.
pub fn validate_config(config: &Value, allowed: &[&str]) -> Result<(), DriverError> {
    let Some(map) = config.as_object() else {
        return Ok(());
    };
    let mut unknown: Vec<&str> = map
        .keys()
        .map(String::as_str)
        .filter(|key| !allowed.contains(key))
        .collect();
    unknown.sort_unstable();
    if unknown.is_empty() {
        return Ok(());
    }
    Err(DriverError::InvalidConfig(format!(
        "unknown task config key{} {} (accepted: {})",
        if unknown.len() > 1 { "s" } else { "" },
        unknown
            .iter()
            .map(|key| format!("{key:?}"))
            .collect::<Vec<_>>()
            .join(", "),
        allowed.join(", ")
    )))
}

fn string_list(config: &Value, key: &str) -> Result<Vec<String>, DriverError> {
    match config.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| {
                item.as_str().map(str::to_string).ok_or_else(|| {
                    DriverError::InvalidConfig(format!("{key} must be a list of strings"))
                })
            })
            .collect(),
        Some(_) => Err(DriverError::InvalidConfig(format!(
            "{key} must be a list of strings"
        ))),
    }
}

fn capabilities(config: &Value, key: &str) -> Result<CapabilitySet, DriverError> {
    CapabilitySet::from_names(&string_list(config, key)?)
        .map_err(|error| DriverError::InvalidConfig(format!("{key}: {error}")))
}

/// The task's capabilities: the default set within `allow_caps`, plus `cap_add` (which must be
/// allowed), minus `cap_drop` (`all` drops everything).
pub fn task_capabilities(exec: &ExecConfig, config: &Value) -> Result<CapabilitySet, DriverError> {
    let allowed = CapabilitySet::from_names(&exec.allow_caps)
        .map_err(|error| DriverError::InvalidConfig(format!("client allow_caps: {error}")))?;
    let defaults = CapabilitySet::from_names(&DEFAULT_CAPABILITIES)
        .map_err(|error| DriverError::InvalidConfig(error.to_string()))?;
    let added = capabilities(config, "cap_add")?;
    let dropped = capabilities(config, "cap_drop")?;
    let refused = added.without(allowed);
    if refused != CapabilitySet::default() {
        return Err(DriverError::InvalidConfig(format!(
            "cap_add {} not allowed by the client's allow_caps",
            refused.names().join(", ")
        )));
    }
    Ok(defaults.intersection(allowed).union(added).without(dropped))
}

/// The task config's `pids_limit`: a positive integer (or a string of one, as interpolation
/// leaves it), `None` when absent.
pub fn pids_limit(config: &Value) -> Result<Option<u64>, DriverError> {
    let invalid = |shown: &Value| {
        DriverError::InvalidConfig(format!(
            "pids_limit must be a positive integer, got {shown}"
        ))
    };
    let limit = match config.get("pids_limit") {
        None | Some(Value::Null) => return Ok(None),
        Some(value @ Value::Number(number)) => number.as_u64().ok_or_else(|| invalid(value))?,
        Some(value @ Value::String(text)) => text.trim().parse().map_err(|_| invalid(value))?,
        Some(other) => return Err(invalid(other)),
    };
    if limit == 0 {
        return Err(invalid(&Value::from(0)));
    }
    Ok(Some(limit))
}

fn network_none(config: &Value) -> Result<bool, DriverError> {
    match config.get("network_mode").and_then(Value::as_str) {
        None | Some("" | "host") => Ok(false),
        Some("none") => Ok(true),
        Some(other) => Err(DriverError::InvalidConfig(format!(
            "network_mode {other:?} is not one of \"host\", \"none\""
        ))),
    }
}

/// The isolation the shim applies to `launch`.
pub fn isolation_for(exec: &ExecConfig, launch: &TaskLaunch) -> Result<IsolationSpec, DriverError> {
    let root = launch
        .task_dir
        .clone()
        .or_else(|| launch.cwd.clone())
        .ok_or_else(|| DriverError::InvalidConfig("the exec driver needs a task dir".into()))?;
    let mut binds: Vec<BindSpec> = if exec.chroot_env.is_empty() {
        DEFAULT_CHROOT_ENV
            .iter()
            .map(|path| BindSpec {
                source: PathBuf::from(path),
                target: PathBuf::from(path),
                read_only: true,
            })
            .collect()
    } else {
        exec.chroot_env
            .iter()
            .map(|(source, target)| BindSpec {
                source: PathBuf::from(source),
                target: PathBuf::from(target),
                read_only: true,
            })
            .collect()
    };
    let mut owned_by_task_user = ["local", "secrets", "tmp"]
        .iter()
        .map(|name| root.join(name))
        .collect::<Vec<_>>();
    if let Some(shared) = &launch.shared_alloc_dir {
        binds.push(BindSpec {
            source: shared.clone(),
            target: PathBuf::from("/alloc"),
            read_only: false,
        });
        owned_by_task_user.extend(["data", "tmp"].iter().map(|name| shared.join(name)));
    }
    if let Some(hostname) = &launch.hostname
        && !drover_isolate::is_valid_hostname(hostname)
    {
        return Err(DriverError::InvalidConfig(format!(
            "network hostname {hostname:?} is not a valid host name (1 to 64 letters, digits, '-' or '.')"
        )));
    }
    Ok(IsolationSpec {
        root: root.clone(),
        binds,
        network_none: network_none(&launch.driver_config)?,
        capabilities: task_capabilities(exec, &launch.driver_config)?
            .names()
            .into_iter()
            .map(str::to_string)
            .collect(),
        owned_by_task_user,
        hostname: launch.hostname.clone(),
    })
}

/// Whether every chroot env source and destination is an absolute path.
pub fn chroot_env_is_valid(chroot_env: &BTreeMap<String, String>) -> bool {
    chroot_env
        .iter()
        .all(|(source, target)| Path::new(source).is_absolute() && Path::new(target).is_absolute())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_keys_are_refused_with_what_is_accepted() {
        let error = validate_config(
            &json!({"command": "x", "comand": "y", "volumes": []}),
            EXEC_CONFIG_KEYS,
        )
        .unwrap_err()
        .to_string();
        assert!(error.contains("\"comand\", \"volumes\""), "{error}");
        assert!(error.contains("cap_add"), "{error}");
        assert!(
            validate_config(&json!({"command": "x", "args": []}), RAW_EXEC_CONFIG_KEYS).is_ok()
        );
        assert!(validate_config(&json!({"cap_add": []}), RAW_EXEC_CONFIG_KEYS).is_err());
    }

    #[test]
    fn capabilities_start_from_the_default_set_within_allow_caps() {
        let exec = ExecConfig::default();
        let defaults = task_capabilities(&exec, &json!({})).unwrap();
        assert_eq!(defaults.0, 0xa804_25fb);
        let dropped =
            task_capabilities(&exec, &json!({"cap_drop": ["net_raw", "CAP_KILL"]})).unwrap();
        assert_eq!(dropped.names().len(), 12);
        assert!(!dropped.names().contains(&"CAP_NET_RAW"));
        let refused = task_capabilities(&exec, &json!({"cap_add": ["sys_admin"]})).unwrap_err();
        assert!(refused.to_string().contains("CAP_SYS_ADMIN"), "{refused}");
        let permissive = ExecConfig {
            allow_caps: vec!["all".into()],
            ..ExecConfig::default()
        };
        let added = task_capabilities(&permissive, &json!({"cap_add": ["sys_time"]})).unwrap();
        assert!(added.names().contains(&"CAP_SYS_TIME"));
        assert!(
            task_capabilities(&exec, &json!({"cap_drop": ["all"]}))
                .unwrap()
                .0
                == 0
        );
    }

    #[test]
    fn the_task_root_binds_the_chroot_env_read_only_and_the_alloc_dir() {
        let launch = TaskLaunch {
            task_dir: Some("/data/alloc/a1/web".into()),
            shared_alloc_dir: Some("/data/alloc/a1/alloc".into()),
            driver_config: json!({"network_mode": "none"}),
            ..TaskLaunch::default()
        };
        let spec = isolation_for(&ExecConfig::default(), &launch).unwrap();
        assert_eq!(spec.root, PathBuf::from("/data/alloc/a1/web"));
        assert!(spec.network_none);
        assert_eq!(spec.binds.len(), 7);
        assert!(spec.binds[..6].iter().all(|bind| bind.read_only));
        let alloc = spec.binds.last().unwrap();
        assert_eq!(
            (alloc.target.as_path(), alloc.read_only),
            (Path::new("/alloc"), false)
        );
        let bad = TaskLaunch {
            driver_config: json!({"network_mode": "bridge"}),
            ..launch
        };
        assert!(isolation_for(&ExecConfig::default(), &bad).is_err());
    }

    #[test]
    fn pids_limit_must_be_a_positive_integer() {
        assert_eq!(pids_limit(&json!({})).unwrap(), None);
        assert_eq!(pids_limit(&json!({"pids_limit": 64})).unwrap(), Some(64));
        assert_eq!(
            pids_limit(&json!({"pids_limit": "128"})).unwrap(),
            Some(128)
        );
        for bad in [
            json!(0),
            json!(-1),
            json!(1.5),
            json!("many"),
            json!([1]),
            json!(true),
        ] {
            let error = pids_limit(&json!({"pids_limit": bad.clone()})).unwrap_err();
            assert!(
                error.to_string().contains("positive integer"),
                "{bad}: {error}"
            );
        }
        assert!(validate_config(&json!({"pids_limit": 5}), RAW_EXEC_CONFIG_KEYS).is_ok());
        assert!(validate_config(&json!({"pids_limit": 5}), EXEC_CONFIG_KEYS).is_ok());
    }

    #[test]
    fn the_network_hostname_is_passed_on_when_valid() {
        let launch = TaskLaunch {
            task_dir: Some("/data/alloc/a1/web".into()),
            hostname: Some("web-1".into()),
            ..TaskLaunch::default()
        };
        let spec = isolation_for(&ExecConfig::default(), &launch).unwrap();
        assert_eq!(spec.hostname.as_deref(), Some("web-1"));
        let unnamed = TaskLaunch {
            hostname: None,
            ..launch.clone()
        };
        assert_eq!(
            isolation_for(&ExecConfig::default(), &unnamed)
                .unwrap()
                .hostname,
            None
        );
        let bad = TaskLaunch {
            hostname: Some("web server".into()),
            ..launch
        };
        let error = isolation_for(&ExecConfig::default(), &bad).unwrap_err();
        assert!(error.to_string().contains("web server"), "{error}");
    }
}
