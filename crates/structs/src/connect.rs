//! Connect sidecar injection at register (Nomad's `job_endpoint_hook_connect` mutator): every
//! group service with `connect { sidecar_service {} }` in a group with a network gets the task
//! `connect-proxy-<service>` (kind `connect-proxy:<service>`, lifecycle prestart sidecar,
//! Nomad's default resources and logs), its `sidecar_task` overrides merged in as Nomad
//! merges them, and a dynamic port `connect-proxy-<service>` (mapped to the same port inside
//! the group's namespace) for its public listener.
//!
//! What differs from Nomad, deliberately: the injected task's driver is drover's built-in
//! [`CONNECT_PROXY_DRIVER`] (the agent's own binary running its proxy), not docker with an
//! Envoy image, and it carries no Consul version constraints, as no Consul is involved.
//!
//! **Not** here: whether a connect block may run (the jobspec's validation and support table
//! refuse what does not), or running the proxy (the client).

use crate::job::{Job, LogConfig, Port, Resources, SidecarTask, Task, TaskLifecycleConfig};
use crate::time::DurationNs;

/// The prefix of the injected sidecar's task name, kind and port label.
pub const CONNECT_PROXY_PREFIX: &str = "connect-proxy";

/// The built-in driver that runs a sidecar proxy: the client agent's own binary as
/// `connect-proxy -config <file>`, inside the group's network namespace.
pub const CONNECT_PROXY_DRIVER: &str = "connect_proxy";

/// The CPU (MHz) and memory (MB) Nomad gives a sidecar that names none.
pub const SIDECAR_DEFAULT_CPU_MHZ: i64 = 250;
pub const SIDECAR_DEFAULT_MEMORY_MB: i64 = 128;

/// The kind of the sidecar task of `service` (`connect-proxy:<service>`).
pub fn sidecar_task_kind(service: &str) -> String {
    format!("{CONNECT_PROXY_PREFIX}:{service}")
}

/// The default label of the sidecar's public port (`connect-proxy-<service>`).
pub fn sidecar_port_label(service: &str) -> String {
    format!("{CONNECT_PROXY_PREFIX}-{service}")
}

/// The name of the check Nomad registers on a sidecar's public port.
pub const SIDECAR_CHECK_NAME: &str = "Connect Sidecar Listening";

/// The registration of `service`'s Connect sidecar as its checks see it, with the check
/// Nomad gives every sidecar unless `disable_default_tcp_check`: TCP on the host address and
/// port of the sidecar's public listener, every 10 s. `None` without a sidecar.
pub fn sidecar_checked_service(service: &crate::job::Service) -> Option<crate::job::Service> {
    let sidecar = service.connect.as_ref()?.sidecar_service.as_ref()?;
    let port_label = if sidecar.port.is_empty() {
        sidecar_port_label(&service.name)
    } else {
        sidecar.port.clone()
    };
    let checks = if sidecar.disable_default_tcp_check {
        Vec::new()
    } else {
        vec![crate::job::ServiceCheck {
            name: SIDECAR_CHECK_NAME.to_string(),
            r#type: "tcp".to_string(),
            port_label: port_label.clone(),
            address_mode: "host".to_string(),
            interval: DurationNs::from_secs(10),
            ..crate::job::ServiceCheck::default()
        }]
    };
    Some(crate::job::Service {
        name: format!("{}-sidecar-proxy", service.name),
        port_label,
        address_mode: "host".to_string(),
        provider: service.provider.clone(),
        namespace: service.namespace.clone(),
        checks,
        ..crate::job::Service::default()
    })
}

/// The service a task is the sidecar proxy of, if its kind says so.
pub fn sidecar_service_of(task: &Task) -> Option<&str> {
    task.kind
        .strip_prefix(CONNECT_PROXY_PREFIX)
        .and_then(|rest| rest.strip_prefix(':'))
}

/// The sidecar task Nomad injects for `service` before `sidecar_task` overrides.
fn new_sidecar_task(service: &str) -> Task {
    Task {
        name: format!("{CONNECT_PROXY_PREFIX}-{service}"),
        kind: sidecar_task_kind(service),
        driver: CONNECT_PROXY_DRIVER.to_string(),
        shutdown_delay: DurationNs::from_secs(5),
        log_config: Some(LogConfig {
            max_files: 2,
            max_file_size_mb: 2,
            disabled: false,
        }),
        resources: Some(Resources {
            cpu: SIDECAR_DEFAULT_CPU_MHZ,
            memory_mb: SIDECAR_DEFAULT_MEMORY_MB,
            ..Resources::default()
        }),
        lifecycle: Some(TaskLifecycleConfig {
            hook: "prestart".to_string(),
            sidecar: true,
        }),
        ..Task::default()
    }
}

/// Nomad's `Resources.Merge`: every non-zero field of `other` replaces the task's.
fn merge_resources(into: &mut Resources, other: &Resources) {
    let replace = |field: &mut i64, value: i64| {
        if value != 0 {
            *field = value;
        }
    };
    replace(&mut into.cpu, other.cpu);
    replace(&mut into.cores, other.cores);
    replace(&mut into.memory_mb, other.memory_mb);
    replace(&mut into.memory_max_mb, other.memory_max_mb);
    replace(&mut into.disk_mb, other.disk_mb);
    replace(&mut into.iops, other.iops);
    replace(&mut into.secrets_mb, other.secrets_mb);
    if !other.networks.is_empty() {
        into.networks.clone_from(&other.networks);
    }
    if !other.devices.is_empty() {
        into.devices.clone_from(&other.devices);
    }
    if other.numa.is_some() {
        into.numa.clone_from(&other.numa);
    }
}

impl SidecarTask {
    /// Lays these overrides over the injected task, as Nomad's `SidecarTask.MergeIntoTask`:
    /// set fields replace, maps are merged key by key, a driver change replaces the config.
    pub fn merge_into_task(&self, task: &mut Task) {
        if !self.name.is_empty() {
            task.name.clone_from(&self.name);
        }
        if !self.driver.is_empty() && self.driver != task.driver {
            task.driver.clone_from(&self.driver);
            task.config.clone_from(&self.config);
        } else {
            for (key, value) in &self.config {
                task.config.insert(key.clone(), value.clone());
            }
        }
        if !self.user.is_empty() {
            task.user.clone_from(&self.user);
        }
        for (key, value) in &self.env {
            task.env.insert(key.clone(), value.clone());
        }
        if let Some(resources) = &self.resources {
            merge_resources(
                task.resources.get_or_insert_with(Resources::default),
                resources,
            );
        }
        for (key, value) in &self.meta {
            task.meta.insert(key.clone(), value.clone());
        }
        if let Some(kill_timeout) = self.kill_timeout {
            task.kill_timeout = kill_timeout;
        }
        if let Some(logs) = &self.log_config {
            match &mut task.log_config {
                None => task.log_config = Some(logs.clone()),
                Some(current) => {
                    if logs.max_files > 0 {
                        current.max_files = logs.max_files;
                    }
                    if logs.max_file_size_mb > 0 {
                        current.max_file_size_mb = logs.max_file_size_mb;
                    }
                }
            }
        }
        if let Some(shutdown_delay) = self.shutdown_delay {
            task.shutdown_delay = shutdown_delay;
        }
        if !self.kill_signal.is_empty() {
            task.kill_signal.clone_from(&self.kill_signal);
        }
        if !self.volume_mounts.is_empty() {
            task.volume_mounts.clone_from(&self.volume_mounts);
        }
        if !self.identities.is_empty() {
            task.identities.clone_from(&self.identities);
        }
    }
}

impl Job {
    /// Injects the sidecar task and port of every group service that asks for a sidecar, in
    /// groups with a network (a group without one is left for validation to refuse). Runs
    /// after canonicalization and is idempotent: a group that has the sidecar task (found by
    /// its kind) or the port keeps it, the overrides are merged again.
    pub(crate) fn inject_connect_sidecars(&mut self) {
        for group in &mut self.task_groups {
            if group.networks.is_empty() {
                continue;
            }
            let restart_policy = group.restart_policy.clone();
            for service in &group.services {
                let Some(connect) = &service.connect else {
                    continue;
                };
                let Some(sidecar_service) = &connect.sidecar_service else {
                    continue;
                };
                let kind = sidecar_task_kind(&service.name);
                let index = match group.tasks.iter().position(|task| task.kind == kind) {
                    Some(index) => index,
                    None => {
                        let mut task = new_sidecar_task(&service.name);
                        // A user's task of the same name keeps it (Nomad adds a random
                        // suffix; this one is fixed, so a register stays deterministic).
                        if group.tasks.iter().any(|other| other.name == task.name) {
                            task.name.push_str("-sidecar");
                        }
                        group.tasks.push(task);
                        group.tasks.len() - 1
                    }
                };
                let task = &mut group.tasks[index];
                if let Some(overrides) = &connect.sidecar_task {
                    overrides.merge_into_task(task);
                }
                task.canonicalize(restart_policy.as_ref());
                let label = if sidecar_service.port.is_empty() {
                    sidecar_port_label(&service.name)
                } else {
                    sidecar_service.port.clone()
                };
                let network = &mut group.networks[0];
                if !network.dynamic_ports.iter().any(|port| port.label == label) {
                    network.dynamic_ports.push(Port {
                        label,
                        // Mapped to the same port inside the group's namespace.
                        to: -1,
                        ..Port::default()
                    });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn connect_job(connect: serde_json::Value) -> Job {
        let mut job: Job = serde_json::from_value(json!({
            "ID": "countdash",
            "TaskGroups": [{
                "Name": "api",
                "Networks": [{"Mode": "bridge"}],
                "Services": [{"Name": "count-api", "PortLabel": "9001", "Connect": connect}],
                "Tasks": [{"Name": "web", "Driver": "raw_exec", "Config": {"command": "/bin/true"}}]
            }]
        }))
        .unwrap();
        job.canonicalize();
        job
    }

    #[test]
    fn a_sidecar_gets_nomads_default_tcp_check_unless_disabled() {
        let service: crate::job::Service = serde_json::from_value(json!({
            "Name": "count-api",
            "PortLabel": "http",
            "Provider": "nomad",
            "Connect": {"SidecarService": {}}
        }))
        .unwrap();
        let sidecar = sidecar_checked_service(&service).unwrap();
        assert_eq!(sidecar.name, "count-api-sidecar-proxy");
        assert_eq!(sidecar.port_label, "connect-proxy-count-api");
        assert_eq!(sidecar.provider, "nomad");
        assert_eq!(sidecar.checks.len(), 1);
        let check = &sidecar.checks[0];
        assert_eq!(check.name, "Connect Sidecar Listening");
        assert_eq!(check.r#type, "tcp");
        assert_eq!(check.port_label, "connect-proxy-count-api");
        assert_eq!(check.address_mode, "host");
        assert_eq!(check.interval, DurationNs::from_secs(10));

        let disabled: crate::job::Service = serde_json::from_value(json!({
            "Name": "count-api",
            "Connect": {"SidecarService": {"Port": "mesh", "DisableDefaultTCPCheck": true}}
        }))
        .unwrap();
        let sidecar = sidecar_checked_service(&disabled).unwrap();
        assert_eq!(sidecar.port_label, "mesh");
        assert!(sidecar.checks.is_empty());

        let plain: crate::job::Service =
            serde_json::from_value(json!({"Name": "count-api"})).unwrap();
        assert!(sidecar_checked_service(&plain).is_none());
    }

    #[test]
    fn sidecar_service_injects_the_proxy_task_and_port_as_nomad() {
        let job = connect_job(json!({"SidecarService": {}}));
        let group = &job.task_groups[0];
        assert_eq!(group.tasks.len(), 2);
        let sidecar = &group.tasks[1];
        assert_eq!(sidecar.name, "connect-proxy-count-api");
        assert_eq!(sidecar.kind, "connect-proxy:count-api");
        assert_eq!(sidecar.driver, CONNECT_PROXY_DRIVER);
        assert_eq!(sidecar.lifecycle_hook(), "prestart");
        assert!(sidecar.is_sidecar());
        let resources = sidecar.resources.as_ref().unwrap();
        assert_eq!((resources.cpu, resources.memory_mb), (250, 128));
        let logs = sidecar.log_config.as_ref().unwrap();
        assert_eq!((logs.max_files, logs.max_file_size_mb), (2, 2));
        assert_eq!(sidecar.shutdown_delay, DurationNs::from_secs(5));
        assert_eq!(sidecar.kill_timeout, DurationNs::from_secs(5));
        assert!(sidecar.restart_policy.is_some());
        let ports = &group.networks[0].dynamic_ports;
        assert_eq!(ports.len(), 1);
        assert_eq!(ports[0].label, "connect-proxy-count-api");
        assert_eq!(ports[0].to, -1);
    }

    #[test]
    fn injection_is_idempotent_over_a_second_canonicalize() {
        let mut job = connect_job(json!({"SidecarService": {},
            "SidecarTask": {"Env": {"A": "1"}}}));
        let once = job.clone();
        job.canonicalize();
        assert_eq!(job, once);
    }

    #[test]
    fn sidecar_task_overrides_merge_as_nomad() {
        let job = connect_job(json!({
            "SidecarService": {"Port": "proxy"},
            "SidecarTask": {
                "Name": "my-proxy",
                "Env": {"LOG": "debug"},
                "Meta": {"team": "a"},
                "Resources": {"MemoryMB": 64},
                "KillTimeout": 10_000_000_000_i64,
                "LogConfig": {"MaxFiles": 3},
                "KillSignal": "SIGTERM"
            }
        }));
        let group = &job.task_groups[0];
        let sidecar = &group.tasks[1];
        assert_eq!(sidecar.name, "my-proxy");
        assert_eq!(sidecar.kind, "connect-proxy:count-api");
        assert_eq!(sidecar.env["LOG"], "debug");
        assert_eq!(sidecar.meta["team"], "a");
        let resources = sidecar.resources.as_ref().unwrap();
        assert_eq!((resources.cpu, resources.memory_mb), (250, 64));
        assert_eq!(sidecar.kill_timeout, DurationNs::from_secs(10));
        let logs = sidecar.log_config.as_ref().unwrap();
        assert_eq!((logs.max_files, logs.max_file_size_mb), (3, 2));
        assert_eq!(sidecar.kill_signal, "SIGTERM");
        // The sidecar service names its own port: that label is the one injected.
        assert_eq!(group.networks[0].dynamic_ports[0].label, "proxy");
    }

    #[test]
    fn a_group_without_a_network_is_left_for_validation() {
        let mut job: Job = serde_json::from_value(json!({
            "ID": "j",
            "TaskGroups": [{"Name": "g",
                "Services": [{"Name": "s", "Connect": {"SidecarService": {}}}],
                "Tasks": [{"Name": "t", "Driver": "raw_exec"}]}]
        }))
        .unwrap();
        job.canonicalize();
        assert_eq!(job.task_groups[0].tasks.len(), 1);
    }

    #[test]
    fn connect_block_round_trips_in_nomads_shape() {
        let job = connect_job(json!({"SidecarService": {"Proxy": {"Upstreams": [
            {"DestinationName": "count-api", "LocalBindPort": 8080}]}}}));
        let wire = serde_json::to_value(&job.task_groups[0].services[0]).unwrap();
        let connect = &wire["Connect"];
        assert_eq!(connect["Native"], false);
        assert_eq!(connect["SidecarTask"], serde_json::Value::Null);
        assert_eq!(connect["Gateway"], serde_json::Value::Null);
        let upstream = &connect["SidecarService"]["Proxy"]["Upstreams"][0];
        assert_eq!(upstream["DestinationName"], "count-api");
        assert_eq!(upstream["LocalBindPort"], 8080);
        assert_eq!(upstream["MeshGateway"], json!({"Mode": ""}));
        assert_eq!(
            connect["SidecarService"]["DisableDefaultTCPCheck"],
            json!(false)
        );
    }
}
