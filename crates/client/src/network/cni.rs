//! The CNI protocol as a runtime speaks it: each plugin of a conflist is a program run with
//! `CNI_COMMAND`, `CNI_CONTAINERID`, `CNI_NETNS`, `CNI_IFNAME`, `CNI_ARGS` and `CNI_PATH` in its
//! environment and its network config on stdin; it answers with a result (ADD) or an error
//! (`{"code", "msg", "details"}`) on stdout. ADD runs the list in order, each plugin getting
//! the previous result as `prevResult`; DEL runs it in reverse, goes on past a failing plugin,
//! and is safe to repeat (the plugins make it so).
//!
//! Plugins are looked up, all of them before any runs, in the client's plugin directories.
//!
//! **Not** here: which conflist an allocation uses, or its namespace (see [`super`]).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use super::NetworkError;

/// One port the `portmap` plugin maps (its `runtimeConfig.portMappings` entry).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PortMapping {
    pub host_port: i64,
    pub container_port: i64,
    pub protocol: String,
    #[serde(rename = "hostIP", default, skip_serializing_if = "String::is_empty")]
    pub host_ip: String,
}

/// What identifies one attachment of a container to a network.
#[derive(Debug, Clone)]
pub struct Attachment<'a> {
    pub container_id: &'a str,
    pub netns: &'a Path,
    pub ifname: &'a str,
    /// `CNI_ARGS`: `K=V` pairs joined by `;`.
    pub args: &'a str,
    pub plugin_dirs: &'a [PathBuf],
    pub port_mappings: &'a [PortMapping],
}

/// The plugin types of a conflist, in order.
pub fn plugin_types(conflist: &Value) -> Result<Vec<String>, NetworkError> {
    let plugins = conflist
        .get("plugins")
        .and_then(Value::as_array)
        .ok_or_else(|| NetworkError::Config("the conflist has no \"plugins\" list".to_string()))?;
    if plugins.is_empty() {
        return Err(NetworkError::Config(
            "the conflist's \"plugins\" list is empty".to_string(),
        ));
    }
    plugins
        .iter()
        .map(|plugin| {
            plugin
                .get("type")
                .and_then(Value::as_str)
                .filter(|kind| !kind.is_empty() && !kind.contains('/'))
                .map(str::to_string)
                .ok_or_else(|| {
                    NetworkError::Config(format!(
                        "a plugin of the conflist has no valid \"type\": {plugin}"
                    ))
                })
        })
        .collect()
}

/// Where plugin `name` is, or the error naming it and every directory searched.
pub fn find_plugin(name: &str, dirs: &[PathBuf]) -> Result<PathBuf, NetworkError> {
    for dir in dirs {
        let candidate = dir.join(name);
        if candidate.is_file() {
            return Ok(candidate);
        }
    }
    Err(NetworkError::PluginNotFound {
        plugin: name.to_string(),
        searched: search_list(dirs),
    })
}

fn search_list(dirs: &[PathBuf]) -> String {
    dirs.iter()
        .map(|dir| dir.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The network config plugin `index` of `conflist` is given: its own block with the list's
/// `name` and `cniVersion`, the previous result, and the port mappings when it asks for them.
fn plugin_config(
    conflist: &Value,
    index: usize,
    previous: Option<&Value>,
    port_mappings: &[PortMapping],
) -> Value {
    let mut config = conflist["plugins"][index].clone();
    if let Some(object) = config.as_object_mut() {
        object.insert("name".to_string(), conflist["name"].clone());
        object.insert("cniVersion".to_string(), conflist["cniVersion"].clone());
        if let Some(previous) = previous {
            object.insert("prevResult".to_string(), previous.clone());
        }
        let wants_ports = object
            .get("capabilities")
            .and_then(|capabilities| capabilities.get("portMappings"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        if wants_ports {
            object.insert(
                "runtimeConfig".to_string(),
                json!({ "portMappings": port_mappings }),
            );
        }
    }
    config
}

/// Runs every plugin of `conflist` with ADD, in order; the result is the last plugin's. On a
/// failure the plugins already run are not undone here (the caller runs [`del`]).
pub fn add(conflist: &Value, attachment: &Attachment<'_>) -> Result<Value, NetworkError> {
    let kinds = plugin_types(conflist)?;
    let paths = kinds
        .iter()
        .map(|kind| find_plugin(kind, attachment.plugin_dirs))
        .collect::<Result<Vec<_>, _>>()?;
    let mut previous: Option<Value> = None;
    for (index, (kind, path)) in kinds.iter().zip(&paths).enumerate() {
        let config = plugin_config(conflist, index, previous.as_ref(), attachment.port_mappings);
        let result = run_plugin(kind, path, "ADD", &config, attachment)?;
        // A plugin may answer nothing (it passes the previous result on unchanged).
        if !result.is_null() {
            previous = Some(result);
        }
    }
    Ok(previous.unwrap_or(Value::Null))
}

/// Runs every plugin of `conflist` with DEL, in reverse order, each given `result` (the ADD
/// result, when known) as `prevResult`. Goes on past failures and returns the first one. A
/// plugin that is not installed fails the DEL too (what it made cannot be removed without it).
pub fn del(
    conflist: &Value,
    attachment: &Attachment<'_>,
    result: Option<&Value>,
) -> Result<(), NetworkError> {
    let kinds = plugin_types(conflist)?;
    let mut first_error = None;
    for (index, kind) in kinds.iter().enumerate().rev() {
        let outcome = find_plugin(kind, attachment.plugin_dirs).and_then(|path| {
            let config = plugin_config(conflist, index, result, attachment.port_mappings);
            run_plugin(kind, &path, "DEL", &config, attachment).map(|_| ())
        });
        if let Err(error) = outcome {
            tracing::warn!(plugin = %kind, container_id = attachment.container_id, %error, "CNI DEL failed");
            first_error.get_or_insert(error);
        }
    }
    match first_error {
        Some(error) => Err(error),
        None => Ok(()),
    }
}

fn run_plugin(
    kind: &str,
    path: &Path,
    command: &str,
    config: &Value,
    attachment: &Attachment<'_>,
) -> Result<Value, NetworkError> {
    let failed = |message: String| NetworkError::Plugin {
        plugin: kind.to_string(),
        path: path.to_path_buf(),
        searched: search_list(attachment.plugin_dirs),
        command: command.to_string(),
        message,
    };
    let plugin_path = std::env::join_paths(attachment.plugin_dirs)
        .map_err(|error| failed(format!("plugin directories: {error}")))?;
    // A plain spawn (fork+exec): nothing runs between them in the agent.
    let mut child = Command::new(path)
        .env_clear()
        .env(
            "PATH",
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        )
        .env("CNI_COMMAND", command)
        .env("CNI_CONTAINERID", attachment.container_id)
        .env("CNI_NETNS", attachment.netns)
        .env("CNI_IFNAME", attachment.ifname)
        .env("CNI_ARGS", attachment.args)
        .env("CNI_PATH", plugin_path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|error| failed(format!("running {}: {error}", path.display())))?;
    if let Some(mut stdin) = child.stdin.take() {
        let bytes = serde_json::to_vec(config)
            .map_err(|error| failed(format!("encoding its config: {error}")))?;
        stdin
            .write_all(&bytes)
            .map_err(|error| failed(format!("writing its config: {error}")))?;
    }
    let output = child
        .wait_with_output()
        .map_err(|error| failed(format!("waiting for {}: {error}", path.display())))?;
    let answer: Option<Value> = serde_json::from_slice(&output.stdout).ok();
    if !output.status.success() {
        let message = match &answer {
            Some(error) if error.get("msg").is_some() => {
                let msg = error["msg"].as_str().unwrap_or_default();
                match error.get("details").and_then(Value::as_str) {
                    Some(details) if !details.is_empty() => format!("{msg}: {details}"),
                    _ => msg.to_string(),
                }
            }
            _ => {
                let stderr = String::from_utf8_lossy(&output.stderr);
                let stdout = String::from_utf8_lossy(&output.stdout);
                format!("{} {}", stdout.trim(), stderr.trim())
                    .trim()
                    .to_string()
            }
        };
        return Err(failed(format!("{message} ({})", output.status)));
    }
    Ok(answer.unwrap_or(Value::Null))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_missing_plugin_names_itself_and_every_directory_searched() {
        let dirs = [
            PathBuf::from("/nonexistent/a"),
            PathBuf::from("/nonexistent/b"),
        ];
        let error = find_plugin("bridge", &dirs).unwrap_err().to_string();
        assert!(error.contains("\"bridge\""), "{error}");
        assert!(error.contains("/nonexistent/a, /nonexistent/b"), "{error}");
    }

    #[test]
    fn each_plugin_gets_the_list_name_version_previous_result_and_its_ports() {
        let conflist = json!({
            "cniVersion": "0.4.0",
            "name": "nomad",
            "plugins": [
                {"type": "bridge"},
                {"type": "portmap", "capabilities": {"portMappings": true}, "snat": true}
            ]
        });
        let ports = [PortMapping {
            host_port: 25000,
            container_port: 8080,
            protocol: "tcp".to_string(),
            host_ip: String::new(),
        }];
        let first = plugin_config(&conflist, 0, None, &ports);
        assert_eq!(
            first,
            json!({"type": "bridge", "name": "nomad", "cniVersion": "0.4.0"})
        );
        let previous = json!({"ips": []});
        let second = plugin_config(&conflist, 1, Some(&previous), &ports);
        assert_eq!(second["prevResult"], previous);
        assert_eq!(
            second["runtimeConfig"],
            json!({"portMappings": [{"hostPort": 25000, "containerPort": 8080, "protocol": "tcp"}]})
        );
        assert_eq!(plugin_types(&conflist).unwrap(), ["bridge", "portmap"]);
        assert!(plugin_types(&json!({"plugins": [{"type": "../x"}]})).is_err());
    }
}
