//! Client configuration as the alloc and task runners see it: where data lives, kill limits, the
//! user denylist, and the raw `client.options` map those settings may come from.
//!
//! Two stages, as the agent config flows in: the agent's HCL `client { … }` block is decoded by the
//! binary into [`ClientConfig`] (typed, defaults filled), and [`ClientConfig::apply_options`]
//! layers Nomad's string `options` (`user.denylist`, `user.checked_drivers`) on top.
//!
//! **Not** the agent config parser, and holds nothing about servers or heartbeats.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Nomad's default `max_kill_timeout`.
pub const DEFAULT_MAX_KILL_TIMEOUT: Duration = Duration::from_secs(30);

/// Nomad's default denied users (`user.denylist`).
pub const DEFAULT_USER_DENYLIST: &[&str] = &["root", "Administrator"];

/// Nomad's default drivers whose task user is checked against the denylist
/// (`user.checked_drivers`).
pub const DEFAULT_USER_CHECKED_DRIVERS: &[&str] = &["exec", "qemu", "java"];

/// The option key for the user denylist (comma separated).
pub const OPTION_USER_DENYLIST: &str = "user.denylist";

/// The option key for the drivers whose user is checked (comma separated).
pub const OPTION_USER_CHECKED_DRIVERS: &str = "user.checked_drivers";

/// The client's bounds on a template's `wait` (Nomad's `template { wait_bounds }`): a `min`
/// below the bound is raised to it, a `max` above the bound lowered to it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TemplateWaitBounds {
    pub min: Option<Duration>,
    pub max: Option<Duration>,
}

impl TemplateWaitBounds {
    /// `(min, max)` of a template's wait within these bounds.
    pub fn clamp(&self, (min, max): (Duration, Duration)) -> (Duration, Duration) {
        let min = self.min.map_or(min, |bound| min.max(bound));
        let max = self.max.map_or(max, |bound| max.min(bound));
        (min, max.max(min))
    }
}

/// The client's `template { … }` block, as far as drover reads it, with Nomad's defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TemplateConfig {
    /// `wait { min max }`: how long a changed output of a template without a `wait` of its
    /// own is held back (consul-template's global quiescence; Nomad's default 5s and 4m).
    /// `None` when both are zero: such templates are written at once.
    pub wait: Option<(Duration, Duration)>,
    /// `wait_bounds { min max }`: the bounds of a template's own `wait`.
    pub wait_bounds: TemplateWaitBounds,
    /// `block_query_wait`: how long one blocking query for a template's data may wait for a
    /// change before the servers answer unchanged (Nomad's default 5m).
    pub block_query_wait: Duration,
}

/// Nomad's client `template { wait { min } }` default.
pub const DEFAULT_TEMPLATE_WAIT_MIN: Duration = Duration::from_secs(5);
/// Nomad's client `template { wait { max } }` default.
pub const DEFAULT_TEMPLATE_WAIT_MAX: Duration = Duration::from_secs(4 * 60);
/// Nomad's client `template { block_query_wait }` default.
pub const DEFAULT_TEMPLATE_BLOCK_QUERY_WAIT: Duration = Duration::from_secs(5 * 60);

impl Default for TemplateConfig {
    fn default() -> Self {
        TemplateConfig {
            wait: Some((DEFAULT_TEMPLATE_WAIT_MIN, DEFAULT_TEMPLATE_WAIT_MAX)),
            wait_bounds: TemplateWaitBounds::default(),
            block_query_wait: DEFAULT_TEMPLATE_BLOCK_QUERY_WAIT,
        }
    }
}

/// Events kept per task (see `taskrunner::state`).
pub const DEFAULT_MAX_TASK_EVENTS: usize = 10;

/// Settings the per-allocation machinery reads.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// The agent data dir; allocs live under `<data_dir>/alloc`, client state under
    /// `<data_dir>/client`.
    pub data_dir: PathBuf,
    /// Upper bound on any task's `kill_timeout`.
    pub max_kill_timeout: Duration,
    /// Users a task may not run as under one of `user_checked_drivers`.
    pub user_denylist: Vec<String>,
    /// Drivers whose task `user` is checked against `user_denylist`.
    pub user_checked_drivers: Vec<String>,
    /// Mount a small tmpfs on each task's `secrets` dir (falls back to a 0700 dir when mounting
    /// is not possible).
    pub secrets_tmpfs: bool,
    /// Size of the secrets tmpfs in bytes.
    pub secrets_tmpfs_bytes: u64,
    /// Events kept per task (see `taskrunner::state`).
    pub max_task_events: usize,
    /// The `drover-shim` binary script checks run through (`None`: the driver's lookup, the
    /// `DROVER_SHIM_PATH` variable or the one beside the running binary).
    pub shim_binary: Option<PathBuf>,
    /// The `artifact { … }` limits.
    pub artifact: crate::artifact::ArtifactConfig,
    /// `template { wait, wait_bounds, block_query_wait }`.
    pub template: TemplateConfig,
    /// The `host_volume` blocks, by name: what a group's host volumes resolve to (the node
    /// advertises the same map).
    pub host_volumes: BTreeMap<String, drover_structs::ClientHostVolumeConfig>,
    /// Group networks: `cni_path`, `cni_config_dir`, `bridge_network_*`.
    pub network: std::sync::Arc<crate::network::NetworkConfig>,
}

impl ClientConfig {
    /// A config with Nomad's defaults rooted at `data_dir`.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        ClientConfig {
            data_dir: data_dir.into(),
            max_kill_timeout: DEFAULT_MAX_KILL_TIMEOUT,
            user_denylist: DEFAULT_USER_DENYLIST
                .iter()
                .map(|user| user.to_string())
                .collect(),
            user_checked_drivers: DEFAULT_USER_CHECKED_DRIVERS
                .iter()
                .map(|driver| driver.to_string())
                .collect(),
            secrets_tmpfs: true,
            secrets_tmpfs_bytes: 1024 * 1024,
            max_task_events: DEFAULT_MAX_TASK_EVENTS,
            shim_binary: None,
            artifact: crate::artifact::ArtifactConfig::default(),
            template: TemplateConfig::default(),
            host_volumes: BTreeMap::new(),
            network: std::sync::Arc::default(),
        }
    }

    /// Layer Nomad's `client.options` string map over the typed settings. Unknown keys are left
    /// for other subsystems.
    pub fn apply_options(&mut self, options: &BTreeMap<String, String>) {
        if let Some(denylist) = options.get(OPTION_USER_DENYLIST) {
            self.user_denylist = split_comma_list(denylist);
        }
        if let Some(checked) = options.get(OPTION_USER_CHECKED_DRIVERS) {
            self.user_checked_drivers = split_comma_list(checked);
        }
    }

    /// `<data_dir>/alloc`: parent of every alloc dir.
    pub fn alloc_root_dir(&self) -> PathBuf {
        self.data_dir.join("alloc")
    }

    /// `<data_dir>/client`: client state (the state db, shim sockets).
    pub fn client_state_dir(&self) -> PathBuf {
        self.data_dir.join("client")
    }

    /// `<data_dir>/client/artifacts`: the node's artifact cache.
    pub fn artifact_cache_dir(&self) -> PathBuf {
        self.client_state_dir().join("artifacts")
    }

    /// `<data_dir>/client/state.db`.
    pub fn state_db_path(&self) -> PathBuf {
        self.client_state_dir().join("state.db")
    }

    /// The kill timeout a task gets: its own, capped by `max_kill_timeout`.
    pub fn effective_kill_timeout(&self, task_kill_timeout: Duration) -> Duration {
        task_kill_timeout.min(self.max_kill_timeout)
    }

    /// Whether `user` may run tasks under `driver`.
    pub fn user_allowed(&self, driver: &str, user: &str) -> bool {
        let checked = self.user_checked_drivers.iter().any(|name| name == driver);
        !(checked && self.user_denylist.iter().any(|denied| denied == user))
    }

    /// The data dir as a path.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }
}

fn split_comma_list(raw: &str) -> Vec<String> {
    raw.split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_is_denied_for_exec_only_by_default() {
        let config = ClientConfig::new("/tmp/x");
        assert!(!config.user_allowed("exec", "root"));
        assert!(config.user_allowed("raw_exec", "root"));
        assert!(config.user_allowed("exec", "nobody"));
    }

    #[test]
    fn options_override_denylist_and_checked_drivers() {
        let mut config = ClientConfig::new("/tmp/x");
        let options = BTreeMap::from([
            (
                OPTION_USER_DENYLIST.to_string(),
                "nobody, alice".to_string(),
            ),
            (
                OPTION_USER_CHECKED_DRIVERS.to_string(),
                "raw_exec".to_string(),
            ),
        ]);
        config.apply_options(&options);
        assert!(config.user_allowed("exec", "root"));
        assert!(!config.user_allowed("raw_exec", "alice"));
        assert!(config.user_allowed("raw_exec", "root"));
    }

    #[test]
    fn kill_timeout_is_capped() {
        let config = ClientConfig::new("/tmp/x");
        assert_eq!(
            config.effective_kill_timeout(Duration::from_secs(5)),
            Duration::from_secs(5)
        );
        assert_eq!(
            config.effective_kill_timeout(Duration::from_secs(500)),
            DEFAULT_MAX_KILL_TIMEOUT
        );
    }
}
