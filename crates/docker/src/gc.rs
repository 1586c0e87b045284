//! Garbage collection of the docker plugin config's `gc { image image_delay container }`, as
//! Nomad's docker driver does it: each image the driver pulled or loaded is counted by the
//! tasks using it (their starts and re-attaches); when the last of them is destroyed, the
//! image is removed after `image_delay` unless a task takes it again meanwhile (`image =
//! false` keeps every image). `container = false` keeps a finished task's container.
//!
//! `dangling_containers` picks the running containers of this node's allocations that no task
//! of the driver owns (the driver lists and removes them).
//!
//! Not for: talking to the engine (the driver removes what this says is unused). Image counts
//! are in memory and rebuilt as an agent re-attaches to its tasks (as Nomad's), so an image
//! whose last task ended while no agent ran is left alone.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::error::DockerError;
use crate::values::{bool_value, parse_duration, single_block};

/// The `gc` block of the docker plugin config (Nomad's defaults: images removed 3m after
/// their last task, containers removed with their task, dangling containers looked for every
/// 5m).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GcConfig {
    pub image: bool,
    pub image_delay: Duration,
    pub container: bool,
    pub dangling: DanglingConfig,
}

impl Default for GcConfig {
    fn default() -> Self {
        GcConfig {
            image: true,
            image_delay: Duration::from_secs(3 * 60),
            container: true,
            dangling: DanglingConfig::default(),
        }
    }
}

/// `gc { dangling_containers { enabled period creation_grace dry_run } }`: running containers
/// labelled by this node's allocations that no task of the driver owns (a create whose answer
/// was lost, a task the client forgot) are removed, every `period`, once older than
/// `creation_grace` (at least 1m); `dry_run` only logs them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DanglingConfig {
    pub enabled: bool,
    pub period: Duration,
    pub creation_grace: Duration,
    pub dry_run: bool,
}

/// Nomad's least `creation_grace`.
const CREATION_GRACE_MINIMUM: Duration = Duration::from_secs(60);

impl Default for DanglingConfig {
    fn default() -> Self {
        DanglingConfig {
            enabled: true,
            period: Duration::from_secs(5 * 60),
            creation_grace: Duration::from_secs(5 * 60),
            dry_run: false,
        }
    }
}

impl DanglingConfig {
    fn parse(value: &Value) -> Result<Self, DockerError> {
        let block = single_block(value, "gc.dangling_containers")?;
        let mut parsed = DanglingConfig::default();
        let duration = |value: &Value, key: &str| -> Result<Duration, DockerError> {
            let text = value.as_str().ok_or_else(|| {
                DockerError::Config(format!(
                    "gc.dangling_containers.{key} must be a duration string"
                ))
            })?;
            parse_duration(text, key).map_err(|_| {
                DockerError::Config(format!("failed to parse '{key}' duration: {text:?}"))
            })
        };
        for (key, value) in block {
            match key.as_str() {
                "enabled" => parsed.enabled = bool_value(value, "gc.dangling_containers.enabled")?,
                "dry_run" => parsed.dry_run = bool_value(value, "gc.dangling_containers.dry_run")?,
                "period" => parsed.period = duration(value, "period")?,
                "creation_grace" => {
                    parsed.creation_grace = duration(value, "creation_grace")?;
                    if parsed.creation_grace < CREATION_GRACE_MINIMUM {
                        return Err(DockerError::Config(
                            "creation_grace is less than minimum, 1m0s".into(),
                        ));
                    }
                }
                other => {
                    return Err(DockerError::Config(format!(
                        "plugin \"docker\" config gc.dangling_containers: unsupported key {other:?} (enabled, period, creation_grace, dry_run)"
                    )));
                }
            }
        }
        if parsed.period.is_zero() {
            return Err(DockerError::Config(
                "gc.dangling_containers.period must be more than 0s".into(),
            ));
        }
        Ok(parsed)
    }

    /// How long after the driver starts the first look happens: a period, or the creation
    /// grace when longer, so restored tasks are re-attached before anything is taken for
    /// dangling.
    pub fn first_delay(&self) -> Duration {
        self.period.max(self.creation_grace)
    }
}

/// A running container as the engine lists it, as much as the reconciler needs.
#[derive(Debug, Clone)]
pub(crate) struct Listed {
    pub id: String,
    /// Unix seconds.
    pub created: i64,
    pub labels: std::collections::HashMap<String, String>,
}

/// The dangling containers among `listed`: labelled with an allocation and with `node_id`,
/// not `tracked` by the driver, and created at or before `cutoff` (Unix seconds).
pub(crate) fn dangling(
    listed: &[Listed],
    tracked: &std::collections::HashSet<String>,
    node_id: &str,
    cutoff: i64,
) -> Vec<String> {
    listed
        .iter()
        .filter(|container| !tracked.contains(&container.id))
        .filter(|container| container.created <= cutoff)
        .filter(|container| container.labels.contains_key(crate::labels::ALLOC_ID_LABEL))
        .filter(|container| {
            container
                .labels
                .get(crate::labels::NODE_ID_LABEL)
                .map(String::as_str)
                == Some(node_id)
        })
        .map(|container| container.id.clone())
        .collect()
}

impl GcConfig {
    pub(crate) fn parse(value: &Value) -> Result<Self, DockerError> {
        let block = single_block(value, "gc")?;
        let mut parsed = GcConfig::default();
        for (key, value) in block {
            match key.as_str() {
                "image" => parsed.image = bool_value(value, "gc.image")?,
                "container" => parsed.container = bool_value(value, "gc.container")?,
                "dangling_containers" => parsed.dangling = DanglingConfig::parse(value)?,
                "image_delay" => {
                    let text = value.as_str().ok_or_else(|| {
                        DockerError::Config("gc.image_delay must be a duration string".into())
                    })?;
                    parsed.image_delay = parse_duration(text, "gc.image_delay").map_err(|_| {
                        DockerError::Config(format!(
                            "failed to parse 'image_delay' duration: {text:?}"
                        ))
                    })?;
                }
                other => {
                    return Err(DockerError::Config(format!(
                        "plugin \"docker\" config gc: unsupported key {other:?} (drover implements: image, image_delay, container, dangling_containers)"
                    )));
                }
            }
        }
        Ok(parsed)
    }
}

#[derive(Debug, Default)]
struct Entry {
    users: BTreeSet<String>,
    /// Bumped by every hold, so a removal scheduled before it knows it is stale.
    generation: u64,
}

/// Which tasks use which image (by image ID).
#[derive(Debug, Default)]
pub(crate) struct ImageUsers {
    images: Mutex<HashMap<String, Entry>>,
}

fn lock(
    images: &Mutex<HashMap<String, Entry>>,
) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
    match images.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

impl ImageUsers {
    /// `task_id` uses `image_id` (a start or a re-attach); a pending removal is called off.
    pub(crate) fn hold(&self, image_id: &str, task_id: &str) {
        let mut images = lock(&self.images);
        let entry = images.entry(image_id.to_string()).or_default();
        entry.users.insert(task_id.to_string());
        entry.generation += 1;
    }

    /// `task_id` is done with `image_id`. When no task uses it any more, the generation a
    /// removal must still find (see [`ImageUsers::still_unused`]).
    pub(crate) fn release(&self, image_id: &str, task_id: &str) -> Option<u64> {
        let mut images = lock(&self.images);
        let entry = images.get_mut(image_id)?;
        entry.users.remove(task_id);
        entry.users.is_empty().then_some(entry.generation)
    }

    /// Whether the image is still unused since the release that returned `generation`; if so
    /// it is forgotten (the caller removes it).
    pub(crate) fn still_unused(&self, image_id: &str, generation: u64) -> bool {
        let mut images = lock(&self.images);
        let unused = images
            .get(image_id)
            .is_some_and(|entry| entry.users.is_empty() && entry.generation == generation);
        if unused {
            images.remove(image_id);
        }
        unused
    }
}

/// Reads `gc` out of a plugin config map (absent: the defaults).
pub(crate) fn from_plugin_config(config: &Map<String, Value>) -> Result<GcConfig, DockerError> {
    config
        .get("gc")
        .map_or_else(|| Ok(GcConfig::default()), GcConfig::parse)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn an_image_is_unused_only_after_its_last_task_and_until_taken_again() {
        let users = ImageUsers::default();
        users.hold("sha256:a", "t1");
        users.hold("sha256:a", "t2");
        assert_eq!(users.release("sha256:a", "t1"), None);
        let generation = users.release("sha256:a", "t2").unwrap();
        // Taken again before the delay ran out: the scheduled removal is stale.
        users.hold("sha256:a", "t3");
        assert!(!users.still_unused("sha256:a", generation));
        let generation = users.release("sha256:a", "t3").unwrap();
        assert!(users.still_unused("sha256:a", generation));
        // Forgotten once removed.
        assert!(!users.still_unused("sha256:a", generation));
        assert_eq!(users.release("sha256:unknown", "t1"), None);
    }

    #[test]
    fn dangling_containers_are_this_nodes_untracked_old_enough_alloc_containers() {
        let container = |id: &str, created: i64, labels: &[(&str, &str)]| Listed {
            id: id.into(),
            created,
            labels: labels
                .iter()
                .map(|(key, value)| (key.to_string(), value.to_string()))
                .collect(),
        };
        let ours = [
            (crate::labels::ALLOC_ID_LABEL, "a1"),
            (crate::labels::NODE_ID_LABEL, "n1"),
        ];
        let listed = [
            container("dangling", 100, &ours),
            container("tracked", 100, &ours),
            container("too-young", 201, &ours),
            container(
                "other-node",
                100,
                &[
                    (crate::labels::ALLOC_ID_LABEL, "a1"),
                    (crate::labels::NODE_ID_LABEL, "n2"),
                ],
            ),
            container("not-a-task", 100, &[(crate::labels::NODE_ID_LABEL, "n1")]),
        ];
        let tracked = std::collections::HashSet::from(["tracked".to_string()]);
        assert_eq!(dangling(&listed, &tracked, "n1", 200), vec!["dangling"]);
    }

    #[test]
    fn the_gc_block_reads_as_nomad_writes_it() {
        let config = json!({"gc": [{"image": false, "image_delay": "10s", "container": "false"}]});
        let parsed = from_plugin_config(config.as_object().unwrap()).unwrap();
        assert_eq!(
            parsed,
            GcConfig {
                image: false,
                image_delay: Duration::from_secs(10),
                container: false,
                dangling: DanglingConfig::default(),
            }
        );
        assert_eq!(
            from_plugin_config(&Map::new()).unwrap(),
            GcConfig::default()
        );
        let parsed = from_plugin_config(
            json!({"gc": {"dangling_containers": [{"period": "10s", "creation_grace": "1m", "dry_run": true}]}})
                .as_object()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(
            parsed.dangling,
            DanglingConfig {
                enabled: true,
                period: Duration::from_secs(10),
                creation_grace: Duration::from_secs(60),
                dry_run: true,
            }
        );
        assert_eq!(parsed.dangling.first_delay(), Duration::from_secs(60));
        let error = from_plugin_config(
            json!({"gc": {"dangling_containers": {"creation_grace": "30s"}}})
                .as_object()
                .unwrap(),
        )
        .unwrap_err()
        .to_string();
        assert_eq!(error, "creation_grace is less than minimum, 1m0s");
        assert!(
            from_plugin_config(json!({"gc": {"image_delay": "soon"}}).as_object().unwrap())
                .is_err()
        );
    }
}
