//! Registry credentials for an image pull, found as Nomad's docker driver finds them: the task
//! config's `auth` block first, then the client's `plugin "docker" { config { auth { config
//! helper } } }` — a docker `config.json` (its `auths` entry for the image's registry, else
//! its `credHelpers` entry for that registry, else its `credsStore`) and then a credential
//! helper (`docker-credential-<helper> get`, given the registry on stdin, answering
//! `{"Username", "Secret"}`). The first source that has something wins; a source that fails
//! (an unreadable file, a failing helper) is an error, which the task's `auth_soft_fail`
//! turns into a warning.
//!
//! Not for: the pull itself (the driver) or checking credentials (the registry does).

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use base64::Engine as _;
use serde::Deserialize;

/// The registry address Docker files credentials for Docker Hub under.
const DOCKER_HUB_KEY: &str = "https://index.docker.io/v1/";
/// Docker Hub's index name (what a credential helper is asked about).
const DOCKER_HUB_NAME: &str = "docker.io";
/// Credential helpers are programs named after the helper with this prefix.
const HELPER_PREFIX: &str = "docker-credential-";

/// Credentials for one registry (Nomad's `docker.AuthConfiguration`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegistryAuth {
    pub username: String,
    pub password: String,
    pub email: String,
    pub server_address: String,
}

impl RegistryAuth {
    fn is_empty(&self) -> bool {
        self.username.is_empty()
            && self.password.is_empty()
            && self.email.is_empty()
            && self.server_address.is_empty()
    }
}

/// The client's `auth` block of the docker plugin config.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PluginAuth {
    /// Path of a docker `config.json`.
    pub config: Option<String>,
    /// A credential helper's name (`docker-credential-<helper>`).
    pub helper: Option<String>,
}

/// The registry an image's repository lives in: its first path component when that looks like
/// a host (a dot, a port, or `localhost`), else Docker Hub.
pub fn registry_of(repository: &str) -> String {
    match repository.split_once('/') {
        Some((first, _)) if first.contains('.') || first.contains(':') || first == "localhost" => {
            first.to_string()
        }
        _ => DOCKER_HUB_NAME.to_string(),
    }
}

/// The credentials for pulling `repository`, `Ok(None)` when no source has any.
pub fn resolve(
    task: Option<&RegistryAuth>,
    plugin: &PluginAuth,
    repository: &str,
) -> Result<Option<RegistryAuth>, String> {
    if let Some(task) = task.filter(|auth| !auth.is_empty()) {
        return Ok(Some(task.clone()));
    }
    let registry = registry_of(repository);
    if let Some(path) = plugin.config.as_deref().filter(|path| !path.is_empty())
        && let Some(found) = from_config_file(Path::new(path), &registry)?
    {
        return Ok(Some(found));
    }
    if let Some(helper) = plugin.helper.as_deref().filter(|name| !name.is_empty()) {
        return from_helper(helper, &registry);
    }
    Ok(None)
}

#[derive(Debug, Default, Deserialize)]
struct ConfigFile {
    #[serde(default)]
    auths: std::collections::BTreeMap<String, ConfigEntry>,
    #[serde(default, rename = "credHelpers")]
    cred_helpers: std::collections::BTreeMap<String, String>,
    #[serde(default, rename = "credsStore")]
    creds_store: String,
}

#[derive(Debug, Default, Deserialize)]
struct ConfigEntry {
    #[serde(default)]
    auth: String,
    #[serde(default)]
    username: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    email: String,
    #[serde(default, rename = "serveraddress")]
    server_address: String,
}

/// `https://host:port/v1/` → `host:port`, as Docker compares the keys of `auths`.
fn key_host(key: &str) -> &str {
    let without_scheme = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    without_scheme
        .split_once('/')
        .map_or(without_scheme, |(host, _)| host)
}

fn from_config_file(path: &Path, registry: &str) -> Result<Option<RegistryAuth>, String> {
    let text = std::fs::read(path).map_err(|error| {
        format!(
            "Failed to open auth config file: {}, error: {error}",
            path.display()
        )
    })?;
    let file: ConfigFile = serde_json::from_slice(&text)
        .map_err(|error| format!("Failed to parse auth config file: {error}"))?;
    let entry = if registry == DOCKER_HUB_NAME {
        file.auths.get(DOCKER_HUB_KEY).or_else(|| {
            file.auths
                .iter()
                .find(|(key, _)| matches!(key_host(key), "index.docker.io" | DOCKER_HUB_NAME))
                .map(|(_, entry)| entry)
        })
    } else {
        file.auths.get(registry).or_else(|| {
            file.auths
                .iter()
                .find(|(key, _)| key_host(key) == registry)
                .map(|(_, entry)| entry)
        })
    };
    if let Some(entry) = entry {
        let mut auth = RegistryAuth {
            username: entry.username.clone(),
            password: entry.password.clone(),
            email: entry.email.clone(),
            server_address: entry.server_address.clone(),
        };
        if !entry.auth.is_empty() {
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(entry.auth.trim())
                .map_err(|error| format!("Failed to parse auth config file: auth: {error}"))?;
            let decoded = String::from_utf8_lossy(&decoded).into_owned();
            let (username, password) = decoded.split_once(':').ok_or_else(|| {
                "Failed to parse auth config file: auth is not base64 of \"user:password\""
                    .to_string()
            })?;
            auth.username = username.to_string();
            auth.password = password.to_string();
        }
        if auth.server_address.is_empty() && !auth.is_empty() {
            auth.server_address = registry.to_string();
        }
        if !auth.is_empty() {
            return Ok(Some(auth));
        }
    }
    let hub_key;
    let helper_key = if registry == DOCKER_HUB_NAME {
        hub_key = DOCKER_HUB_KEY.to_string();
        &hub_key
    } else {
        registry
    };
    if let Some(helper) = file
        .cred_helpers
        .get(helper_key)
        .filter(|name| !name.is_empty())
    {
        return from_helper(helper, registry);
    }
    if !file.creds_store.is_empty() {
        return from_helper(&file.creds_store, registry);
    }
    Ok(None)
}

/// Asks `docker-credential-<helper> get` for the registry's credentials.
fn from_helper(helper: &str, registry: &str) -> Result<Option<RegistryAuth>, String> {
    let program = format!("{HELPER_PREFIX}{helper}");
    let mut child = Command::new(&program)
        .arg("get")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|error| format!("{program}: {error}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        // A helper that exits without reading its input answers through its status.
        let _ = stdin.write_all(registry.as_bytes());
    }
    let output = child
        .wait_with_output()
        .map_err(|error| format!("{program}: {error}"))?;
    if !output.status.success() {
        return Err(format!(
            "{program} with input {registry:?} failed with stderr: {}",
            String::from_utf8_lossy(&output.stderr).trim_end()
        ));
    }
    let answer: std::collections::BTreeMap<String, String> = serde_json::from_slice(&output.stdout)
        .map_err(|error| format!("{program}: unreadable answer: {error}"))?;
    let auth = RegistryAuth {
        username: answer.get("Username").cloned().unwrap_or_default(),
        password: answer.get("Secret").cloned().unwrap_or_default(),
        ..RegistryAuth::default()
    };
    Ok((!auth.is_empty()).then_some(auth))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_registry_of_a_repository_is_its_host_or_docker_hub() {
        assert_eq!(
            registry_of("127.0.0.1:5000/drover/busybox"),
            "127.0.0.1:5000"
        );
        assert_eq!(registry_of("localhost/x"), "localhost");
        assert_eq!(registry_of("ghcr.io/a/b"), "ghcr.io");
        assert_eq!(registry_of("library/busybox"), "docker.io");
        assert_eq!(registry_of("busybox"), "docker.io");
    }

    #[test]
    fn credentials_come_from_the_task_then_the_config_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        let encoded = base64::engine::general_purpose::STANDARD.encode("filed:secret");
        std::fs::write(
            &path,
            format!(
                r#"{{"auths": {{"http://127.0.0.1:5000/v2/": {{"auth": "{encoded}"}},
                   "https://index.docker.io/v1/": {{"username": "hub", "password": "p"}}}}}}"#
            ),
        )
        .unwrap();
        let plugin = PluginAuth {
            config: Some(path.display().to_string()),
            helper: None,
        };
        let found = resolve(None, &plugin, "127.0.0.1:5000/drover/busybox")
            .unwrap()
            .unwrap();
        assert_eq!(
            (found.username.as_str(), found.password.as_str()),
            ("filed", "secret")
        );
        assert_eq!(found.server_address, "127.0.0.1:5000");
        let hub = resolve(None, &plugin, "busybox").unwrap().unwrap();
        assert_eq!(hub.username, "hub");
        assert_eq!(resolve(None, &plugin, "ghcr.io/a/b").unwrap(), None);

        let task = RegistryAuth {
            username: "task".into(),
            ..RegistryAuth::default()
        };
        let found = resolve(Some(&task), &plugin, "127.0.0.1:5000/drover/busybox")
            .unwrap()
            .unwrap();
        assert_eq!(found.username, "task");

        let missing = PluginAuth {
            config: Some(dir.path().join("nope.json").display().to_string()),
            helper: None,
        };
        let error = resolve(None, &missing, "busybox").unwrap_err();
        assert!(
            error.starts_with("Failed to open auth config file"),
            "{error}"
        );
        let error = resolve(
            None,
            &PluginAuth {
                config: None,
                helper: Some("drover-test-no-such-helper".into()),
            },
            "busybox",
        )
        .unwrap_err();
        assert!(
            error.contains("docker-credential-drover-test-no-such-helper"),
            "{error}"
        );
    }
}
