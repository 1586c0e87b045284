//! Agent reload, as `SIGHUP` and `PUT|POST /v1/agent/reload` ask for it: the `-config` files
//! are read again and validated whole (a file that no longer parses, or a config the agent
//! would refuse at start, changes nothing and is reported); then what drover can change in a
//! running agent is applied, and every other key that changed is named in a warning saying it
//! takes a restart — never taken silently, never dropped silently.
//!
//! Applied in place: `log_level` (the stderr log's level; a `-log-level` flag still wins over
//! the file, as at start). Nomad also reloads its TLS certificates here; drover's HTTP API has
//! no TLS of its own, and the `etcd` block's certificates are among the keys that take a
//! restart.
//!
//! Not here: parsing and validating the config (`config`), the log subscriber (`logging`).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use crate::config::{AgentArgs, AgentConfig, ConfigError};
use crate::logging::{LogLevel, StderrLevel};

/// Why a reload changed nothing.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    #[error("failed to reload configs: {0}")]
    Config(#[from] ConfigError),
    #[error("failed to reload configs: {path}: {message}")]
    Read { path: PathBuf, message: String },
}

/// What a reload did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReloadOutcome {
    /// The stderr log level before and after, when it changed.
    pub log_level: Option<(LogLevel, LogLevel)>,
    /// The keys (dotted paths, `file: key`) that changed in the files but take a restart.
    pub not_reloaded: Vec<String>,
}

/// Reloads the agent's config: shared by the signal handler and the HTTP endpoint, one reload
/// at a time.
#[derive(Clone)]
pub struct Reloader {
    args: AgentArgs,
    stderr_level: StderrLevel,
    /// The files as last loaded, each as a JSON tree, in `-config` order.
    loaded: Arc<Mutex<Vec<(PathBuf, Value)>>>,
}

impl Reloader {
    /// A reloader for an agent started from `args`, whose files it reads now to know later
    /// what changed (they were read a moment ago: an error here is reported and treated as
    /// an empty file, so that every key of it counts as changed at the next reload).
    pub fn new(args: AgentArgs, stderr_level: StderrLevel) -> Self {
        let loaded = args
            .config
            .iter()
            .map(|path| {
                let tree = file_tree(path).unwrap_or_else(|error| {
                    tracing::warn!(%error, "reading the config file for later reloads");
                    Value::Object(serde_json::Map::new())
                });
                (path.clone(), tree)
            })
            .collect();
        Reloader {
            args,
            stderr_level,
            loaded: Arc::new(Mutex::new(loaded)),
        }
    }

    /// Reads the config files again and applies what can be applied; blocking (file reads).
    pub fn reload(&self) -> Result<ReloadOutcome, ReloadError> {
        let mut loaded = self
            .loaded
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let config = AgentConfig::load(&self.args)?;
        let mut trees = Vec::with_capacity(self.args.config.len());
        for path in &self.args.config {
            trees.push((path.clone(), file_tree(path)?));
        }
        let mut not_reloaded = Vec::new();
        for (index, (path, tree)) in trees.iter().enumerate() {
            let empty = Value::Object(serde_json::Map::new());
            let before = loaded
                .get(index)
                .filter(|(before_path, _)| before_path == path)
                .map_or(&empty, |(_, before)| before);
            let mut keys = BTreeSet::new();
            changed_keys(before, tree, "", &mut keys);
            keys.remove("log_level");
            not_reloaded.extend(
                keys.into_iter()
                    .map(|key| format!("{}: {key}", path.display())),
            );
        }
        let before = self.stderr_level.get();
        let log_level = (config.log_level != before).then(|| {
            self.stderr_level.set(config.log_level);
            (before, config.log_level)
        });
        *loaded = trees;
        Ok(ReloadOutcome {
            log_level,
            not_reloaded,
        })
    }

    /// [`Reloader::reload`], reported in the agent's log as Nomad reports it.
    pub fn reload_logged(&self) -> Result<ReloadOutcome, ReloadError> {
        tracing::info!("reloading configuration");
        let outcome = self.reload();
        match &outcome {
            Ok(outcome) => {
                if let Some((from, to)) = outcome.log_level {
                    tracing::info!(from = from.name(), to = to.name(), "log level changed");
                }
                if !outcome.not_reloaded.is_empty() {
                    tracing::warn!(
                        keys = %outcome.not_reloaded.join(", "),
                        "config changes not reloaded: drover applies them only at start; restart the agent to apply them"
                    );
                }
                tracing::info!("configuration reloaded");
            }
            Err(error) => tracing::error!(%error, "the configuration was not reloaded"),
        }
        outcome
    }
}

/// One config file as a JSON tree (HCL blocks become nested objects).
fn file_tree(path: &std::path::Path) -> Result<Value, ReloadError> {
    let read_error = |message: String| ReloadError::Read {
        path: path.to_owned(),
        message,
    };
    let text = std::fs::read_to_string(path).map_err(|error| read_error(error.to_string()))?;
    if text.trim_start().starts_with('{') {
        serde_json::from_str(&text).map_err(|error| read_error(error.to_string()))
    } else {
        hcl::from_str(&text).map_err(|error| read_error(error.to_string()))
    }
}

/// Adds to `out` the dotted paths where `before` and `after` differ: objects are compared key
/// by key, anything else (lists included) as a whole.
fn changed_keys(before: &Value, after: &Value, prefix: &str, out: &mut BTreeSet<String>) {
    match (before, after) {
        (Value::Object(before), Value::Object(after)) => {
            let keys: BTreeSet<&String> = before.keys().chain(after.keys()).collect();
            let null = Value::Null;
            for key in keys {
                let path = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                changed_keys(
                    before.get(key).unwrap_or(&null),
                    after.get(key).unwrap_or(&null),
                    &path,
                    out,
                );
            }
        }
        (before, after) if before != after => {
            out.insert(prefix.to_owned());
        }
        _ => {}
    }
}

/// `PUT|POST /v1/agent/reload` (agent:write with ACLs): 200 with no body once reloaded, 500
/// with the reason when the files could not be reloaded; other methods are Nomad's 405.
pub fn router(reloader: Reloader) -> axum::Router {
    axum::Router::new()
        .route("/v1/agent/reload", axum::routing::any(reload_handler))
        .with_state(reloader)
}

async fn reload_handler(
    method: Method,
    axum::extract::State(reloader): axum::extract::State<Reloader>,
) -> Response {
    if method != Method::PUT && method != Method::POST {
        return (StatusCode::METHOD_NOT_ALLOWED, "Invalid method").into_response();
    }
    match tokio::task::spawn_blocking(move || reloader.reload_logged()).await {
        Ok(Ok(_)) => StatusCode::OK.into_response(),
        Ok(Err(error)) => (StatusCode::INTERNAL_SERVER_ERROR, error.to_string()).into_response(),
        Err(error) => (StatusCode::INTERNAL_SERVER_ERROR, error.to_string()).into_response(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn changed_keys_name_each_changed_leaf_and_compare_lists_whole() {
        let before: Value = hcl::from_str(
            "log_level = \"INFO\"\nclient {\n  enabled = true\n  servers = [\"a\"]\n}\nplugin \"raw_exec\" {\n  config {\n    enabled = true\n  }\n}\n",
        )
        .unwrap();
        let after: Value = hcl::from_str(
            "log_level = \"DEBUG\"\nclient {\n  enabled = true\n  servers = [\"a\", \"b\"]\n}\nplugin \"raw_exec\" {\n  config {\n    enabled = true\n    denied_envvars = [\"X\"]\n  }\n}\nname = \"n\"\n",
        )
        .unwrap();
        let mut keys = BTreeSet::new();
        changed_keys(&before, &after, "", &mut keys);
        assert_eq!(
            keys.into_iter().collect::<Vec<_>>(),
            vec![
                "client.servers",
                "log_level",
                "name",
                "plugin.raw_exec.config.denied_envvars"
            ]
        );
    }
}
