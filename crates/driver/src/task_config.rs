//! The task config schemas of the `raw_exec` and `exec` drivers: unknown keys are refused before
//! anything starts; `pids_limit` (both drivers, a drover extension: Nomad has it for docker
//! only) caps the task's processes and threads through `pids.max`.

use serde_json::Value;

use crate::DriverError;

/// Task config keys of `raw_exec`.
pub const RAW_EXEC_CONFIG_KEYS: &[&str] = &["command", "args", "pids_limit", "denied_envvars"];
/// Task config keys of `exec`.
pub const EXEC_CONFIG_KEYS: &[&str] = &[
    "command",
    "args",
    "cap_add",
    "cap_drop",
    "network_mode",
    "pids_limit",
];

/// Task config keys of `docker` (the driver lives in `drover-docker`; its keys are listed here
/// so the client refuses unknown ones before anything starts, as for the other drivers).
pub const DOCKER_CONFIG_KEYS: &[&str] = &[
    "image",
    "command",
    "args",
    "entrypoint",
    "work_dir",
    "ports",
    "port_map",
    "network_mode",
    "hostname",
    "dns_servers",
    "dns_search_domains",
    "dns_options",
    "extra_hosts",
    "labels",
    "volumes",
    "mount",
    "mounts",
    "privileged",
    "cap_add",
    "cap_drop",
    "devices",
    "shm_size",
    "ulimit",
    "sysctl",
    "pids_limit",
    "memory_hard_limit",
    "cpuset_cpus",
    "tty",
    "interactive",
    "readonly_rootfs",
    "init",
    "ipc_mode",
    "pid_mode",
    "uts_mode",
    "group_add",
    "security_opt",
    "force_pull",
    "image_pull_timeout",
    "auth",
    "auth_soft_fail",
    "logging",
    "load",
    "runtime",
];

/// The task config keys a built-in driver accepts, by driver name (`None`: a driver whose
/// config this crate does not describe, such as the mock driver).
pub fn config_keys_for(driver: &str) -> Option<&'static [&'static str]> {
    match driver {
        "raw_exec" => Some(RAW_EXEC_CONFIG_KEYS),
        "exec" => Some(EXEC_CONFIG_KEYS),
        "docker" => Some(DOCKER_CONFIG_KEYS),
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

pub(crate) fn string_list(config: &Value, key: &str) -> Result<Vec<String>, DriverError> {
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

pub(crate) fn network_none(config: &Value) -> Result<bool, DriverError> {
    match config.get("network_mode").and_then(Value::as_str) {
        None | Some("" | "host") => Ok(false),
        Some("none") => Ok(true),
        Some(other) => Err(DriverError::InvalidConfig(format!(
            "network_mode {other:?} is not one of \"host\", \"none\""
        ))),
    }
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
}
