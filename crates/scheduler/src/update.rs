//! Whether a job change can be applied to a running allocation in place, or needs a destructive
//! update (stop the old allocation, place a new one). After Nomad's `tasksUpdated`.
//!
//! Destructive: the set of tasks, a task's driver, user, config, env, artifacts, templates,
//! vault, consul namespace, CSI plugin config, volume mounts, meta (job, group and task meta
//! combined, since tasks see it in their environment), resources (cpu, cores, memory, memory
//! max, devices, NUMA, secrets), identities, log collection switched on or off, networks, group
//! volumes, ephemeral disk, and `restart.render_templates`. Anything else — count, the update
//! strategy, restart and reschedule policies, kill timeout, service registrations without
//! Connect, constraints — is applied in place (after a feasibility check on the same node).
//!
//! Not here: the feasibility check itself (`generic`).

use std::collections::BTreeMap;

use drover_structs::{
    Consul, Job, NetworkResource, Resources, RestartPolicy, Service, Task, TaskGroup,
};

/// The first destructive difference found, for logs and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DestructiveChange {
    pub what: &'static str,
}

fn changed(what: &'static str) -> Option<DestructiveChange> {
    Some(DestructiveChange { what })
}

/// Compares group `group_name` of the new job with the same group of the job an allocation runs;
/// `Some` names the first change that requires replacing the allocation.
pub fn destructive_change(
    new_job: &Job,
    existing_job: &Job,
    group_name: &str,
) -> Option<DestructiveChange> {
    let (Some(new_group), Some(existing_group)) = (
        new_job.lookup_task_group(group_name),
        existing_job.lookup_task_group(group_name),
    ) else {
        return changed("task group");
    };
    if new_group.tasks.len() != existing_group.tasks.len() {
        return changed("number of tasks");
    }
    if new_group.ephemeral_disk != existing_group.ephemeral_disk {
        return changed("ephemeral disk");
    }
    if networks_changed(&new_group.networks, &existing_group.networks) {
        return changed("network");
    }
    if consul_identity(new_group.consul.as_ref()) != consul_identity(existing_group.consul.as_ref())
    {
        return changed("consul namespace");
    }
    if connect_services(&new_group.services) != connect_services(&existing_group.services) {
        return changed("connect service");
    }
    if new_group.volumes != existing_group.volumes {
        return changed("volume request");
    }
    if render_templates(new_group.restart_policy.as_ref())
        != render_templates(existing_group.restart_policy.as_ref())
    {
        return changed("group restart render_templates");
    }
    for existing_task in &existing_group.tasks {
        let Some(new_task) = new_group.lookup_task(&existing_task.name) else {
            return changed("task deleted");
        };
        if let Some(change) = task_change(
            new_job,
            new_group,
            new_task,
            existing_job,
            existing_group,
            existing_task,
        ) {
            return Some(change);
        }
    }
    None
}

fn task_change(
    new_job: &Job,
    new_group: &TaskGroup,
    new_task: &Task,
    existing_job: &Job,
    existing_group: &TaskGroup,
    existing_task: &Task,
) -> Option<DestructiveChange> {
    if new_task.driver != existing_task.driver {
        return changed("task driver");
    }
    if new_task.user != existing_task.user {
        return changed("task user");
    }
    if new_task.config != existing_task.config {
        return changed("task config");
    }
    if new_task.env != existing_task.env {
        return changed("task env");
    }
    if new_task.artifacts != existing_task.artifacts {
        return changed("task artifacts");
    }
    if new_task.vault != existing_task.vault {
        return changed("task vault");
    }
    if consul_identity(new_task.consul.as_ref()) != consul_identity(existing_task.consul.as_ref()) {
        return changed("task consul namespace");
    }
    if new_task.templates != existing_task.templates {
        return changed("task templates");
    }
    if new_task.csi_plugin_config != existing_task.csi_plugin_config {
        return changed("task csi config");
    }
    if new_task.volume_mounts != existing_task.volume_mounts {
        return changed("task volume mount");
    }
    if combined_meta(new_job, new_group, new_task)
        != combined_meta(existing_job, existing_group, existing_task)
    {
        return changed("task meta");
    }
    let default_resources = Resources::default();
    let new_resources = new_task.resources.as_ref().unwrap_or(&default_resources);
    let existing_resources = existing_task
        .resources
        .as_ref()
        .unwrap_or(&default_resources);
    if networks_changed(&new_resources.networks, &existing_resources.networks) {
        return changed("task network");
    }
    if new_resources.cpu != existing_resources.cpu {
        return changed("task cpu");
    }
    if new_resources.cores != existing_resources.cores {
        return changed("task cores");
    }
    if new_resources.memory_mb != existing_resources.memory_mb {
        return changed("task memory");
    }
    if new_resources.memory_max_mb != existing_resources.memory_max_mb {
        return changed("task memory max");
    }
    if new_resources.devices != existing_resources.devices {
        return changed("task devices");
    }
    if new_resources.numa != existing_resources.numa {
        return changed("numa");
    }
    if new_resources.secrets_mb != existing_resources.secrets_mb {
        return changed("task secrets");
    }
    if new_task.identity != existing_task.identity
        || new_task.identities != existing_task.identities
    {
        return changed("task identity");
    }
    let log_disabled = |task: &Task| {
        task.log_config
            .as_ref()
            .is_some_and(|config| config.disabled)
    };
    if log_disabled(new_task) != log_disabled(existing_task) {
        return changed("task log disabled");
    }
    if render_templates(new_task.restart_policy.as_ref())
        != render_templates(existing_task.restart_policy.as_ref())
    {
        return changed("task restart render_templates");
    }
    None
}

/// Job, group and task meta merged, the more specific level winning.
pub fn combined_meta(job: &Job, group: &TaskGroup, task: &Task) -> BTreeMap<String, String> {
    let mut meta = job.meta.clone();
    meta.extend(
        group
            .meta
            .iter()
            .map(|(key, value)| (key.clone(), value.clone())),
    );
    meta.extend(
        task.meta
            .iter()
            .map(|(key, value)| (key.clone(), value.clone())),
    );
    meta
}

/// Networks compared on what a job asks for: mode, bandwidth, reserved ports, and dynamic port
/// labels and mappings (not the values the scheduler assigned).
fn networks_changed(new: &[NetworkResource], existing: &[NetworkResource]) -> bool {
    if new.len() != existing.len() {
        return true;
    }
    new.iter().zip(existing).any(|(a, b)| {
        let dynamic = |network: &NetworkResource| {
            network
                .dynamic_ports
                .iter()
                .map(|port| (port.label.clone(), port.to, port.host_network.clone()))
                .collect::<Vec<_>>()
        };
        a.mode != b.mode
            || a.mbits != b.mbits
            || a.hostname != b.hostname
            || a.dns != b.dns
            || a.reserved_ports != b.reserved_ports
            || dynamic(a) != dynamic(b)
    })
}

/// The Consul namespace and cluster of a `consul` block: changing either breaks connections.
fn consul_identity(consul: Option<&Consul>) -> (&str, &str) {
    consul.map_or(("", ""), |consul| {
        (consul.namespace.as_str(), consul.cluster.as_str())
    })
}

/// Services using Consul Connect, which cannot change in place.
fn connect_services(services: &[Service]) -> Vec<(&str, &drover_structs::ConsulConnect)> {
    services
        .iter()
        .filter_map(|service| {
            service
                .connect
                .as_ref()
                .map(|connect| (service.name.as_str(), connect))
        })
        .collect()
}

fn render_templates(policy: Option<&RestartPolicy>) -> bool {
    policy.is_some_and(|policy| policy.render_templates)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::JobBuilder;

    fn changed_by(edit: impl FnOnce(&mut Job)) -> Option<&'static str> {
        let existing = JobBuilder::service("web")
            .group("g", 2)
            .task("t", "raw_exec")
            .build();
        let mut new = existing.clone();
        new.version += 1;
        new.job_modify_index += 1;
        edit(&mut new);
        destructive_change(&new, &existing, "g").map(|change| change.what)
    }

    #[test]
    fn in_place_changes() {
        assert_eq!(changed_by(|_| {}), None);
        assert_eq!(changed_by(|job| job.task_groups[0].count = 7), None);
        assert_eq!(changed_by(|job| job.priority = 90), None);
        assert_eq!(
            changed_by(|job| job.task_groups[0].tasks[0].kill_timeout =
                drover_structs::DurationNs::from_secs(30)),
            None
        );
        assert_eq!(
            changed_by(
                |job| job.task_groups[0].update = Some(drover_structs::UpdateStrategy {
                    max_parallel: 3,
                    ..Default::default()
                })
            ),
            None
        );
    }

    #[test]
    fn destructive_changes() {
        assert_eq!(
            changed_by(|job| job.task_groups[0].tasks[0].driver = "exec".into()),
            Some("task driver")
        );
        assert_eq!(
            changed_by(|job| {
                job.task_groups[0].tasks[0]
                    .config
                    .insert("command".into(), serde_json::Value::from("/bin/false"));
            }),
            Some("task config")
        );
        assert_eq!(
            changed_by(|job| {
                job.task_groups[0].tasks[0]
                    .env
                    .insert("A".into(), "1".into());
            }),
            Some("task env")
        );
        assert_eq!(
            changed_by(|job| {
                job.meta.insert("owner".into(), "ops".into());
            }),
            Some("task meta")
        );
        assert_eq!(
            changed_by(|job| job.task_groups[0].tasks[0]
                .resources
                .as_mut()
                .map(|r| r.memory_mb += 1)
                .unwrap_or(())),
            Some("task memory")
        );
        assert_eq!(
            changed_by(|job| job.task_groups[0].tasks[0]
                .resources
                .as_mut()
                .map(|r| r.cpu += 1)
                .unwrap_or(())),
            Some("task cpu")
        );
        assert_eq!(
            changed_by(|job| job.task_groups[0].tasks[0].name = "other".into()),
            Some("task deleted")
        );
        assert_eq!(
            changed_by(|job| {
                let task = job.task_groups[0].tasks[0].clone();
                job.task_groups[0].tasks.push(Task {
                    name: "second".into(),
                    ..task
                });
            }),
            Some("number of tasks")
        );
        assert_eq!(
            changed_by(|job| job.task_groups[0].name = "renamed".into()),
            Some("task group")
        );
    }
}
