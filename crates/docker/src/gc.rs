//! Garbage collection of the docker plugin config's `gc { image image_delay container }`, as
//! Nomad's docker driver does it: each image the driver pulled or loaded is counted by the
//! tasks using it (their starts and re-attaches); when the last of them is destroyed, the
//! image is removed after `image_delay` unless a task takes it again meanwhile (`image =
//! false` keeps every image). `container = false` keeps a finished task's container.
//!
//! Not for: talking to the engine (the driver removes what this says is unused); counts are
//! in memory, so an image of tasks an agent never re-attached to is left alone.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::error::DockerError;
use crate::values::{bool_value, parse_duration, single_block};

/// The `gc` block of the docker plugin config (Nomad's defaults: images removed 3m after
/// their last task, containers removed with their task).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GcConfig {
    pub image: bool,
    pub image_delay: Duration,
    pub container: bool,
}

impl Default for GcConfig {
    fn default() -> Self {
        GcConfig {
            image: true,
            image_delay: Duration::from_secs(3 * 60),
            container: true,
        }
    }
}

impl GcConfig {
    pub(crate) fn parse(value: &Value) -> Result<Self, DockerError> {
        let block = single_block(value, "gc")?;
        let mut parsed = GcConfig::default();
        for (key, value) in block {
            match key.as_str() {
                "image" => parsed.image = bool_value(value, "gc.image")?,
                "container" => parsed.container = bool_value(value, "gc.container")?,
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
                        "plugin \"docker\" config gc: unsupported key {other:?} (drover implements: image, image_delay, container)"
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
    fn the_gc_block_reads_as_nomad_writes_it() {
        let config = json!({"gc": [{"image": false, "image_delay": "10s", "container": "false"}]});
        let parsed = from_plugin_config(config.as_object().unwrap()).unwrap();
        assert_eq!(
            parsed,
            GcConfig {
                image: false,
                image_delay: Duration::from_secs(10),
                container: false
            }
        );
        assert_eq!(
            from_plugin_config(&Map::new()).unwrap(),
            GcConfig::default()
        );
        let error = from_plugin_config(
            json!({"gc": {"dangling_containers": {}}})
                .as_object()
                .unwrap(),
        )
        .unwrap_err()
        .to_string();
        assert!(error.contains("dangling_containers"), "{error}");
        assert!(
            from_plugin_config(json!({"gc": {"image_delay": "soon"}}).as_object().unwrap())
                .is_err()
        );
    }
}
