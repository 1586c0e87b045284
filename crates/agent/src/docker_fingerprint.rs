//! The docker driver's fingerprint in the node record: applied once at start, then again every
//! [`drover_docker::FINGERPRINT_PERIOD`] while the client runs, so an engine that starts (or
//! stops, or is upgraded) after the agent shows in the node and the servers schedule on it.
//! A change is applied as Nomad's client applies a driver update (`Drivers["docker"]`, the
//! node's `driver.docker*` attributes) and the node registers again with the new record.
//! Once the engine is first found healthy, the containers of allocations this client no longer
//! has are removed.
//!
//! Not for: talking to the engine (the docker crate's `fingerprint`) or how the client
//! registers (its heartbeat loop).

use std::sync::{Arc, Weak};
use std::time::Duration;

use drover_client::SharedClock;
use drover_docker::{DockerDriver, Fingerprint};
use drover_structs::{DriverInfo, Node, Timestamp};

use crate::backend::LocalClient;

const DRIVER: &str = "docker";

/// The node attribute Nomad keeps for a detected driver (`driver.docker = 1`).
const DETECTED_ATTRIBUTE: &str = "driver.docker";

/// Applies a fingerprint to the node as Nomad's client applies a driver's: the driver's
/// record when anything in it changed (detection, health, its description, an attribute),
/// each changed attribute copied into the node's (one the driver no longer reports with a
/// value is left as it was, as Nomad leaves it), and `driver.docker = 1` while detected.
/// Returns whether the node changed.
pub(crate) fn apply(node: &mut Node, fingerprint: Fingerprint, now_unix_nanos: i64) -> bool {
    let mut changed = false;
    match node.drivers.get(DRIVER) {
        None => {
            changed = true;
            node.attributes.extend(
                fingerprint
                    .attributes
                    .iter()
                    .map(|(key, value)| (key.clone(), value.clone())),
            );
        }
        Some(old) => {
            changed |= old.detected != fingerprint.detected;
            changed |= old.healthy != fingerprint.healthy
                || old.health_description != fingerprint.description;
            for (key, value) in &fingerprint.attributes {
                if old.attributes.get(key) == Some(value) {
                    continue;
                }
                changed = true;
                if value.is_empty() {
                    node.attributes.remove(key);
                } else {
                    node.attributes.insert(key.clone(), value.clone());
                }
            }
        }
    }
    let had_detected_attribute = node.attributes.get(DETECTED_ATTRIBUTE).cloned();
    if fingerprint.detected {
        node.attributes
            .insert(DETECTED_ATTRIBUTE.to_string(), "1".to_string());
    } else {
        node.attributes.remove(DETECTED_ATTRIBUTE);
    }
    changed |= had_detected_attribute != node.attributes.get(DETECTED_ATTRIBUTE).cloned();
    if changed {
        node.drivers.insert(
            DRIVER.to_string(),
            DriverInfo {
                attributes: fingerprint.attributes,
                detected: fingerprint.detected,
                healthy: fingerprint.healthy,
                health_description: fingerprint.description,
                update_time: Timestamp::from_unix_nanos(now_unix_nanos),
            },
        );
    }
    changed
}

/// Whether the node's docker driver is healthy.
pub(crate) fn healthy(node: &Node) -> bool {
    node.drivers
        .get(DRIVER)
        .is_some_and(|driver| driver.healthy)
}

/// Removes the containers of allocations `client` no longer has (in the background).
pub(crate) fn remove_orphans(docker: Arc<DockerDriver>, client: Arc<LocalClient>) {
    tokio::spawn(async move {
        let known = || client.alloc_ids().into_iter().collect();
        match docker.remove_orphans(known).await {
            Ok(0) => {}
            Ok(count) => tracing::info!(count, "removed containers of gone allocations"),
            Err(error) => tracing::warn!(%error, "looking for containers of gone allocations"),
        }
    });
}

/// Fingerprints the engine every `period` for as long as the client lives, updating the node
/// (which then registers again) when the answer changes.
pub(crate) fn spawn_refresh(
    docker: Arc<DockerDriver>,
    client: &Arc<LocalClient>,
    clock: SharedClock,
    period: Duration,
) {
    let client: Weak<LocalClient> = Arc::downgrade(client);
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(period).await;
            let fingerprint = docker.fingerprint().await;
            let Some(client) = client.upgrade() else {
                return;
            };
            let was_healthy = healthy(&client.node());
            let now = clock.now_unix_nanos();
            let changed = client.update_node(|node| apply(node, fingerprint, now));
            if !changed {
                continue;
            }
            let node = client.node();
            let driver = node.drivers.get(DRIVER);
            tracing::info!(
                healthy = driver.is_some_and(|driver| driver.healthy),
                description = driver.map_or("", |driver| driver.health_description.as_str()),
                "docker driver fingerprint changed; updating the node"
            );
            if !was_healthy && healthy(&node) {
                remove_orphans(Arc::clone(&docker), client);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::collections::BTreeMap;

    use super::*;

    fn healthy_fingerprint(version: &str) -> Fingerprint {
        Fingerprint {
            detected: true,
            healthy: true,
            description: "Healthy".into(),
            attributes: BTreeMap::from([
                ("driver.docker".into(), "true".into()),
                ("driver.docker.version".into(), version.into()),
            ]),
        }
    }

    fn down(detected: bool) -> Fingerprint {
        Fingerprint {
            detected,
            healthy: false,
            description: "Failed to connect to docker daemon".into(),
            attributes: BTreeMap::new(),
        }
    }

    #[test]
    fn a_driver_update_changes_the_node_as_nomads_client_does() {
        let mut node = Node::default();
        assert!(apply(&mut node, down(false), 1));
        assert!(!node.drivers[DRIVER].detected);
        assert!(!node.attributes.contains_key("driver.docker"));
        // The same answer again changes nothing (no registration).
        assert!(!apply(&mut node, down(false), 2));
        assert_eq!(
            node.drivers[DRIVER].update_time,
            Timestamp::from_unix_nanos(1)
        );

        // The engine started: healthy, its attributes in the node, driver.docker = 1.
        assert!(apply(&mut node, healthy_fingerprint("20.10.24"), 3));
        let driver = &node.drivers[DRIVER];
        assert!(driver.detected && driver.healthy);
        assert_eq!(driver.attributes["driver.docker"], "true");
        assert_eq!(node.attributes["driver.docker"], "1");
        assert_eq!(node.attributes["driver.docker.version"], "20.10.24");
        assert!(!apply(&mut node, healthy_fingerprint("20.10.24"), 4));

        // Upgraded: the changed attribute.
        assert!(apply(&mut node, healthy_fingerprint("20.10.25"), 5));
        assert_eq!(node.attributes["driver.docker.version"], "20.10.25");

        // Stopped after being found: detected but unhealthy; attributes left as they were.
        assert!(apply(&mut node, down(true), 6));
        let driver = &node.drivers[DRIVER];
        assert!(driver.detected && !driver.healthy);
        assert_eq!(
            driver.health_description,
            "Failed to connect to docker daemon"
        );
        assert_eq!(node.attributes["driver.docker"], "1");
        assert_eq!(node.attributes["driver.docker.version"], "20.10.25");
    }
}
