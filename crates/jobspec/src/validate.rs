//! Job validation after defaults are applied: the essentials of Nomad's `Job.Validate`,
//! `TaskGroup.Validate` and `Task.Validate`, reporting every problem with the JSON field path it
//! belongs to (which the HCL front end turns into `line:column`).
//!
//! It reads the typed [`Job`]; the few blocks the model keeps opaque (a template's `wait` and
//! `change_script`, a service's `connect`) are read through small typed views. Not a scheduler
//! check: whether a node can run the job is not decided here.

use std::collections::{BTreeMap, BTreeSet};

use drover_structs::{
    Affinity, Constraint, Job, NetworkResource, ReschedulePolicy, Resources, RestartPolicy,
    ScalingPolicy, Service, Spread, Task, TaskGroup, UpdateStrategy,
};
use serde::Deserialize;
use serde_json::Value as JsonValue;

/// One validation problem: the JSON path of the offending field and a message that reads on
/// its own (`group "app" task "server": resources.memory must be at least 10 (MB)`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ValidationIssue {
    pub field_path: String,
    pub message: String,
}

const JOB_TYPES: [&str; 4] = ["service", "batch", "system", "sysbatch"];
const CONSTRAINT_OPERANDS: [&str; 19] = [
    "=",
    "==",
    "is",
    "!=",
    "not",
    "<",
    "<=",
    ">",
    ">=",
    "distinct_hosts",
    "distinct_property",
    "regexp",
    "version",
    "semver",
    "set_contains",
    "set_contains_all",
    "set_contains_any",
    "is_set",
    "is_not_set",
];
const AFFINITY_OPERANDS: [&str; 15] = [
    "=",
    "==",
    "is",
    "!=",
    "not",
    "<",
    "<=",
    ">",
    ">=",
    "regexp",
    "version",
    "semver",
    "set_contains",
    "set_contains_all",
    "set_contains_any",
];
const MINIMUM_MEMORY_MB: i64 = 10;
const MINIMUM_CPU_MHZ: i64 = 1;
const MINIMUM_RESTART_INTERVAL_NANOS: i64 = 5_000_000_000;
const MINIMUM_RESCHEDULE_DELAY_NANOS: i64 = 5_000_000_000;

struct Checker {
    issues: Vec<ValidationIssue>,
}

/// A position in the job: the JSON path and the message prefix naming the group and task.
#[derive(Clone)]
struct Place {
    path: String,
    context: String,
}

impl Place {
    fn field(&self, field: &str) -> String {
        if self.path.is_empty() {
            field.to_string()
        } else {
            format!("{}.{field}", self.path)
        }
    }

    fn child(&self, field: &str) -> Place {
        Place {
            path: self.field(field),
            context: self.context.clone(),
        }
    }

    fn item(&self, field: &str, index: usize) -> Place {
        Place {
            path: format!("{}[{index}]", self.field(field)),
            context: self.context.clone(),
        }
    }
}

/// A template's `wait` block (`api.WaitConfig`), which the model keeps as written.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct WaitBounds {
    min: Option<i64>,
    max: Option<i64>,
}

/// A template's `change_script` block (`api.ChangeScript`), kept as written by the model.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct ChangeScript {
    command: Option<String>,
}

/// Decodes a typed view of an opaque block; `None` when it does not have the view's shape.
fn view<T: serde::de::DeserializeOwned>(value: &JsonValue) -> Option<T> {
    drover_structs::lenient::from_value_ignoring_key_case(value.clone()).ok()
}

/// Formats nanoseconds the way Go prints a duration, for messages.
fn go_duration_text(nanoseconds: i64) -> String {
    drover_structs::DurationNs(nanoseconds).to_go_string()
}

/// Whether a path, taken relative to a task directory, leaves the allocation directory (the
/// same rule as Nomad's `PathEscapesAllocDir("task", path)`).
pub(crate) fn path_escapes_allocation_dir(relative_path: &str) -> bool {
    let mut depth: i64 = 1; // inside `<alloc>/task`
    for component in relative_path.split('/') {
        match component {
            "" | "." => {}
            ".." => {
                depth -= 1;
                if depth < 0 {
                    return true;
                }
            }
            _ => depth += 1,
        }
    }
    false
}

/// Whether a group needs no task of its own: Nomad adds the task of a Consul Connect gateway
/// itself (the support table refuses gateways at register, naming them).
fn has_connect_gateway(group: &TaskGroup) -> bool {
    group.services.iter().any(|service| {
        service
            .connect
            .as_ref()
            .is_some_and(|connect| connect.gateway.is_some())
    })
}

/// Nomad's Connect validation of a group (`groupConnectValidate`), with its texts: a sidecar
/// needs exactly one network, in bridge or CNI mode; a gateway's may also be host; service
/// and group names must be lowercase; two upstreams of the group cannot share an address.
fn connect_group_problems(group: &TaskGroup) -> Vec<String> {
    let mut problems = Vec::new();
    let network_problem = |prefix: &str, allow_host: bool| -> Option<String> {
        if group.networks.len() != 1 {
            return Some(format!(
                "{prefix}: must have exactly one network for Consul Connect: group {:?} has {} networks",
                group.name,
                group.networks.len()
            ));
        }
        let mode = group.networks[0].mode.as_str();
        if mode == "bridge" || (allow_host && mode == "host") || mode.starts_with("cni/") {
            return None;
        }
        let allowed = if allow_host {
            r#""bridge", "host", or "cni/*""#
        } else {
            r#""bridge" or "cni/*""#
        };
        Some(format!(
            "{prefix}: invalid network mode for Consul Connect: group {:?} uses network mode {mode:?}; must be {allowed}",
            group.name
        ))
    };
    let mut listeners: Vec<(String, &str)> = Vec::new();
    for service in &group.services {
        let Some(connect) = &service.connect else {
            continue;
        };
        if connect.has_sidecar() {
            if let Some(problem) = network_problem("connect sidecar", false) {
                problems.push(problem);
            } else if service.name != service.name.to_lowercase() {
                problems.push(format!(
                    "Consul Connect service name {:?} in group {:?} must not contain uppercase characters",
                    service.name, group.name
                ));
            } else if group.name != group.name.to_lowercase() {
                problems.push(format!(
                    "Consul Connect group {:?} with service {:?} must not contain uppercase characters",
                    group.name, service.name
                ));
            }
            for upstream in connect.upstreams() {
                let listener = if upstream.local_bind_socket_path.is_empty() {
                    let host = &upstream.local_bind_address;
                    if host.contains(':') {
                        format!("[{host}]:{}", upstream.local_bind_port)
                    } else {
                        format!("{host}:{}", upstream.local_bind_port)
                    }
                } else {
                    upstream.local_bind_socket_path.clone()
                };
                if let Some((_, other)) = listeners.iter().find(|(seen, _)| *seen == listener) {
                    problems.push(format!(
                        "Consul Connect services {:?} and {:?} in group {:?} using same address for upstreams ({listener})",
                        service.name, other, group.name
                    ));
                } else {
                    listeners.push((listener, service.name.as_str()));
                }
            }
        } else if connect.gateway.is_some()
            && let Some(problem) = network_problem("connect gateway", true)
        {
            problems.push(problem);
        }
    }
    problems
}

impl Checker {
    /// Nomad 1.8's rules for a group's disconnect settings, old names and new.
    fn disconnect(&mut self, group: &TaskGroup, place: &Place, job_type: &str) {
        let service_or_batch = job_type == "service" || job_type == "batch";
        if group
            .stop_after_client_disconnect
            .is_some_and(|delay| delay.as_nanos() > 0)
            && !service_or_batch
        {
            self.report(
                place,
                place.field("StopAfterClientDisconnect"),
                "stop_after_client_disconnect can only be set in batch and service jobs",
            );
        }
        if group.max_client_disconnect.is_some()
            && group.prevent_reschedule_on_lost
            && group
                .reschedule_policy
                .as_ref()
                .is_some_and(|reschedule| reschedule.attempts > 0)
        {
            self.report(
                place,
                place.field("PreventRescheduleOnLost"),
                "max_client_disconnect and prevent_reschedule_on_lost cannot be enabled when rechedule.attempts > 0",
            );
        }
        if group.max_client_disconnect.is_some() && group.stop_after_client_disconnect.is_some() {
            self.report(
                place,
                place.field("StopAfterClientDisconnect"),
                "Task group cannot be configured with both max_client_disconnect and stop_after_client_disconnect",
            );
        }
        let Some(disconnect) = &group.disconnect else {
            return;
        };
        let disconnect_place = place.child("Disconnect");
        if group.max_client_disconnect.is_some() && disconnect.lost_after.as_nanos() > 0 {
            self.report(
                &disconnect_place,
                disconnect_place.field("LostAfter"),
                "using both lost_after and max_client_disconnect is not allowed",
            );
        }
        if group.stop_after_client_disconnect.is_some() && disconnect.stop_on_client_after.is_some()
        {
            self.report(
                &disconnect_place,
                disconnect_place.field("StopOnClientAfter"),
                "using both stop_after_client_disconnect and stop_on_client_after is not allowed",
            );
        }
        if let Some(stop_after) = disconnect.stop_on_client_after {
            if stop_after.as_nanos() < 0 {
                self.report(
                    &disconnect_place,
                    disconnect_place.field("StopOnClientAfter"),
                    "stop_after cannot be a negative duration",
                );
            }
            if !service_or_batch {
                self.report(
                    &disconnect_place,
                    disconnect_place.field("StopOnClientAfter"),
                    "stop_after can only be used with service or batch job types",
                );
            }
            if disconnect.lost_after.as_nanos() != 0 {
                self.report(
                    &disconnect_place,
                    disconnect_place.field("StopOnClientAfter"),
                    "Disconnect cannot be configured with both lost_after and stop_after",
                );
            }
        }
        if disconnect.lost_after.as_nanos() < 0 {
            self.report(
                &disconnect_place,
                disconnect_place.field("LostAfter"),
                "lost_after cannot be a negative duration",
            );
        }
        if !matches!(
            disconnect.reconcile.as_str(),
            "" | "best_score" | "longest_running" | "keep_original" | "keep_replacement"
        ) {
            self.report(
                &disconnect_place,
                disconnect_place.field("Reconcile"),
                format!("reconcile option is invalid: {}", disconnect.reconcile),
            );
        }
    }

    fn report(&mut self, place: &Place, field_path: String, detail: impl AsRef<str>) {
        let message = if place.context.is_empty() {
            detail.as_ref().to_string()
        } else {
            format!("{}: {}", place.context, detail.as_ref())
        };
        self.issues.push(ValidationIssue {
            field_path,
            message,
        });
    }

    fn job(&mut self, job: &Job) {
        let place = Place {
            path: String::new(),
            context: String::new(),
        };
        let id = job.id.as_str();
        if id.is_empty() {
            self.report(&place, "ID".into(), "job ID is missing");
        } else if id.contains(' ') {
            self.report(
                &place,
                "ID".into(),
                format!("job ID {id:?} must not contain spaces"),
            );
        } else if id.contains('\0') {
            self.report(
                &place,
                "ID".into(),
                "job ID must not contain a null character",
            );
        }
        if job.name.is_empty() {
            self.report(&place, "Name".into(), "job name is missing");
        }
        let job_type = job.r#type.as_str();
        if !JOB_TYPES.contains(&job_type) {
            self.report(
                &place,
                "Type".into(),
                format!("job type {job_type:?} is not one of service, batch, system, sysbatch"),
            );
        }
        let priority = job.priority;
        if !(1..=100).contains(&priority) {
            self.report(
                &place,
                "Priority".into(),
                format!("job priority must be between 1 and 100, got {priority}"),
            );
        }
        if job.datacenters.iter().any(String::is_empty) {
            self.report(
                &place,
                "Datacenters".into(),
                "datacenter names must not be empty",
            );
        }

        self.constraints(&job.constraints, &place, false);
        self.affinities(&job.affinities, &place, job_type);
        self.spreads(&job.spreads, &place, job_type);

        let groups = &job.task_groups;
        if groups.is_empty() {
            self.report(&place, String::new(), "a job needs at least one group");
        }
        let mut group_names: BTreeMap<&str, usize> = BTreeMap::new();
        for (index, group) in groups.iter().enumerate() {
            let name = group.name.as_str();
            let group_place = place.item("TaskGroups", index);
            if name.is_empty() {
                self.report(
                    &group_place,
                    group_place.field("Name"),
                    format!("group {} has no name", index + 1),
                );
            } else if let Some(first) = group_names.get(name) {
                self.report(
                    &group_place,
                    group_place.path.clone(),
                    format!(
                        "group {name:?} is defined twice (groups {} and {})",
                        first + 1,
                        index + 1
                    ),
                );
            } else {
                group_names.insert(name, index);
            }
        }
        for (index, group) in groups.iter().enumerate() {
            let group_place = Place {
                path: format!("TaskGroups[{index}]"),
                context: format!("group {:?}", group.name),
            };
            self.group(group, &group_place, job_type);
        }

        if let Some(periodic) = &job.periodic
            && periodic.enabled
        {
            let periodic_place = place.child("Periodic");
            if job_type != "batch" && job_type != "sysbatch" {
                self.report(
                    &periodic_place,
                    periodic_place.path.clone(),
                    format!(
                        "periodic is only allowed for batch and sysbatch jobs, not {job_type:?}"
                    ),
                );
            }
            let spec = periodic.spec.as_str();
            let specs = &periodic.specs;
            if !spec.is_empty() && !specs.is_empty() {
                self.report(
                    &periodic_place,
                    periodic_place.path.clone(),
                    "periodic takes cron or crons, not both",
                );
            }
            if spec.is_empty() && specs.is_empty() {
                self.report(
                    &periodic_place,
                    periodic_place.path.clone(),
                    "periodic needs a cron expression (cron = \"...\")",
                );
            }
            let spec_type = periodic.spec_type.as_str();
            if !spec_type.is_empty() && spec_type != "cron" {
                self.report(
                    &periodic_place,
                    periodic_place.field("SpecType"),
                    format!("Unknown periodic specification type {spec_type:?}"),
                );
            }
            let zone = periodic.time_zone.as_str();
            if let Err(detail) = crate::cron::check_time_zone(zone) {
                self.report(
                    &periodic_place,
                    periodic_place.field("TimeZone"),
                    format!("periodic time_zone {zone:?} is invalid: {detail}"),
                );
            }
            for (field, expression) in std::iter::once(("Spec", spec)).chain(
                specs
                    .iter()
                    .map(|expression| ("Specs", expression.as_str())),
            ) {
                if !expression.is_empty()
                    && let Err(detail) = crate::cron::check(expression)
                {
                    self.report(
                        &periodic_place,
                        periodic_place.field(field),
                        format!("periodic cron {expression:?} is invalid: {detail}"),
                    );
                }
            }
        }

        if let Some(parameterized) = &job.parameterized_job
            && !job.dispatched
        {
            let parameterized_place = place.child("ParameterizedJob");
            if job_type != "batch" && job_type != "sysbatch" {
                self.report(
                    &parameterized_place,
                    parameterized_place.path.clone(),
                    format!("parameterized is only allowed for batch and sysbatch jobs, not {job_type:?}"),
                );
            }
            let payload = parameterized.payload.as_str();
            if !["", "optional", "required", "forbidden"].contains(&payload) {
                self.report(
                    &parameterized_place,
                    parameterized_place.field("Payload"),
                    format!("parameterized payload must be optional, required or forbidden, got {payload:?}"),
                );
            }
            let required: BTreeSet<&str> = parameterized
                .meta_required
                .iter()
                .map(String::as_str)
                .collect();
            let both: Vec<&str> = parameterized
                .meta_optional
                .iter()
                .map(String::as_str)
                .filter(|key| required.contains(key))
                .collect();
            if !both.is_empty() {
                self.report(
                    &parameterized_place,
                    parameterized_place.field("MetaOptional"),
                    format!(
                        "meta keys cannot be both required and optional: {}",
                        both.join(", ")
                    ),
                );
            }
        }

        if let Some(update) = &job.update {
            self.update(update, &place.child("Update"));
        }
    }

    fn group(&mut self, group: &TaskGroup, place: &Place, job_type: &str) {
        let count = group.count;
        if count < 0 {
            self.report(
                place,
                place.field("Count"),
                format!("count must not be negative, got {count}"),
            );
        } else if job_type == "system" && count > 1 {
            self.report(
                place,
                place.field("Count"),
                format!("count cannot exceed 1 in a system job, got {count}"),
            );
        }
        let tasks = &group.tasks;
        if tasks.is_empty() && !has_connect_gateway(group) {
            self.report(place, place.path.clone(), "a group needs at least one task");
        }
        for problem in connect_group_problems(group) {
            self.report(place, place.field("Services"), problem);
        }
        self.constraints(&group.constraints, place, false);
        self.affinities(&group.affinities, place, job_type);
        self.spreads(&group.spreads, place, job_type);

        if let Some(restart) = &group.restart_policy {
            self.restart_policy(restart, &place.child("RestartPolicy"));
        }
        if let Some(reschedule) = &group.reschedule_policy {
            if job_type == "system" || job_type == "sysbatch" {
                let reschedule_place = place.child("ReschedulePolicy");
                self.report(
                    &reschedule_place,
                    reschedule_place.path.clone(),
                    format!("a {job_type} job cannot have a reschedule policy"),
                );
            } else {
                self.reschedule_policy(reschedule, &place.child("ReschedulePolicy"));
            }
        }
        if let Some(disk) = &group.ephemeral_disk
            && disk.size_mb < 10
        {
            let disk_place = place.child("EphemeralDisk");
            self.report(
                &disk_place,
                disk_place.field("SizeMB"),
                format!(
                    "ephemeral_disk.size must be at least 10 (MB), got {}",
                    disk.size_mb
                ),
            );
        }
        if let Some(update) = &group.update {
            let update_place = place.child("Update");
            if job_type != "service" && job_type != "system" {
                self.report(
                    &update_place,
                    update_place.path.clone(),
                    format!("a {job_type} job cannot have an update block"),
                );
            }
            self.update(update, &update_place);
        }
        if let Some(scaling) = &group.scaling {
            self.scaling(scaling, count, &place.child("Scaling"), job_type);
        }
        for (field, value) in [
            ("ShutdownDelay", group.shutdown_delay),
            (
                "StopAfterClientDisconnect",
                group.stop_after_client_disconnect,
            ),
            ("MaxClientDisconnect", group.max_client_disconnect),
        ] {
            if value.is_some_and(|duration| duration.as_nanos() < 0) {
                self.report(
                    place,
                    place.field(field),
                    format!("{field} must not be negative"),
                );
            }
        }

        if let Some(limit) = group.max_run_duration {
            if limit.as_nanos() <= 0 {
                self.report(
                    place,
                    place.field("MaxRunDuration"),
                    "MaxRunDuration must be greater than zero",
                );
            }
            if !matches!(job_type, "batch" | "sysbatch") {
                self.report(
                    place,
                    place.field("MaxRunDuration"),
                    format!("Job type {job_type:?} does not allow max_run_duration"),
                );
            }
        }

        self.disconnect(group, place, job_type);

        self.networks(&group.networks, place);
        self.task_networks(group, place);
        self.volumes(group, place, job_type);

        let mut task_names: BTreeMap<&str, usize> = BTreeMap::new();
        let mut leaders = 0;
        let mut main_tasks = 0;
        for (index, task) in tasks.iter().enumerate() {
            let name = task.name.as_str();
            let task_place = place.item("Tasks", index);
            if name.is_empty() {
                self.report(
                    &task_place,
                    task_place.field("Name"),
                    format!("task {} has no name", index + 1),
                );
            } else if let Some(first) = task_names.get(name) {
                self.report(
                    &task_place,
                    task_place.path.clone(),
                    format!(
                        "task {name:?} is defined twice (tasks {} and {})",
                        first + 1,
                        index + 1
                    ),
                );
            } else {
                task_names.insert(name, index);
            }
            if task.leader {
                leaders += 1;
                if leaders > 1 {
                    self.report(
                        &task_place,
                        task_place.field("Leader"),
                        "only one task in a group may be the leader",
                    );
                }
            }
            let hook = task
                .lifecycle
                .as_ref()
                .map_or("", |lifecycle| lifecycle.hook.as_str());
            if hook.is_empty() {
                main_tasks += 1;
            }
        }
        if !tasks.is_empty() && main_tasks == 0 {
            self.report(
                place,
                place.path.clone(),
                "a group needs at least one main task (a task without a lifecycle block)",
            );
        }

        self.services(
            &group.services,
            place,
            &place.child("Services").path,
            group,
            None,
        );

        let update_progress_deadline = group
            .update
            .as_ref()
            .and_then(|update| update.progress_deadline)
            .map_or(0, |deadline| deadline.as_nanos());
        for (index, task) in tasks.iter().enumerate() {
            let task_place = Place {
                path: format!("{}.Tasks[{index}]", place.path),
                context: format!("{} task {:?}", place.context, task.name),
            };
            self.task(task, &task_place, job_type, group, update_progress_deadline);
        }
    }

    fn networks(&mut self, networks: &[NetworkResource], place: &Place) {
        if networks.len() > 1 {
            let second = place.item("Networks", 1);
            self.report(
                &second,
                second.path.clone(),
                "only one network block is allowed in a group",
            );
        }
        let mut labels: BTreeSet<&str> = BTreeSet::new();
        let mut static_ports: BTreeMap<i64, &str> = BTreeMap::new();
        for (network_index, network) in networks.iter().enumerate() {
            let network_place = place.item("Networks", network_index);
            let mode = network.mode.as_str();
            let cni_name = mode.strip_prefix("cni/");
            if cni_name == Some("") {
                self.report(
                    &network_place,
                    network_place.field("Mode"),
                    "network mode cni/ needs the name of a CNI network config, as in cni/mynet",
                );
            } else if !["", "host", "bridge", "none"].contains(&mode) && cni_name.is_none() {
                self.report(
                    &network_place,
                    network_place.field("Mode"),
                    format!("network mode must be host, bridge, none or cni/<name>, got {mode:?}"),
                );
            }
            for (field, ports) in [
                ("ReservedPorts", &network.reserved_ports),
                ("DynamicPorts", &network.dynamic_ports),
            ] {
                for (port_index, port) in ports.iter().enumerate() {
                    let port_place = network_place.item(field, port_index);
                    let label = port.label.as_str();
                    if label.is_empty() {
                        self.report(&port_place, port_place.path.clone(), "a port needs a label");
                    } else if !labels.insert(label) {
                        self.report(
                            &port_place,
                            port_place.path.clone(),
                            format!("port label {label:?} is used twice"),
                        );
                    }
                    if field == "ReservedPorts" {
                        let value = port.value;
                        if !(1..=65535).contains(&value) {
                            self.report(&port_place, port_place.field("Value"), format!("port {label:?}: static must be between 1 and 65535, got {value}"));
                        } else if let Some(other) = static_ports.get(&value) {
                            // As Nomad: a port that ignores collisions may share its value.
                            if !port.ignore_collision {
                                self.report(&port_place, port_place.field("Value"), format!("port {label:?}: static port {value} is already used by port {other:?}"));
                            }
                        } else {
                            static_ports.insert(value, label);
                        }
                    }
                    if port.ignore_collision && !matches!(mode, "" | "host") {
                        self.report(
                            &port_place,
                            port_place.field("IgnoreCollision"),
                            format!("Port {label:?} collision may not be ignored on non-host network mode {mode:?}"),
                        );
                    }
                    let to = port.to;
                    if !(-1..=65535).contains(&to) {
                        self.report(
                            &port_place,
                            port_place.field("To"),
                            format!("port {label:?}: to must be between -1 and 65535, got {to}"),
                        );
                    }
                }
            }
        }
    }

    /// The tasks' own (deprecated) networks, as Nomad's group validation checks them: a port
    /// needs a label the group's network does not already use (a task's labels are its own, so
    /// two tasks may share one), a static port is in range and reserved by no other port of
    /// the group, its network or its tasks'.
    fn task_networks(&mut self, group: &TaskGroup, place: &Place) {
        let group_ports = group
            .networks
            .iter()
            .flat_map(|network| network.reserved_ports.iter().chain(&network.dynamic_ports));
        let group_labels: BTreeSet<&str> = group_ports
            .clone()
            .map(|port| port.label.as_str())
            .collect();
        let mut static_ports: BTreeMap<i64, String> = group
            .networks
            .iter()
            .flat_map(|network| &network.reserved_ports)
            .map(|port| {
                (
                    port.value,
                    format!("the group network's port {:?}", port.label),
                )
            })
            .collect();
        for (task_index, task) in group.tasks.iter().enumerate() {
            let Some(resources) = task.resources.as_ref() else {
                continue;
            };
            let task_place = Place {
                path: place.item("Tasks", task_index).path,
                context: format!("{} task {:?}", place.context, task.name),
            };
            let mut labels: BTreeSet<&str> = BTreeSet::new();
            for (network_index, network) in resources.networks.iter().enumerate() {
                let network_place = task_place
                    .child("Resources")
                    .item("Networks", network_index);
                for (field, ports) in [
                    ("ReservedPorts", &network.reserved_ports),
                    ("DynamicPorts", &network.dynamic_ports),
                ] {
                    for (port_index, port) in ports.iter().enumerate() {
                        let port_place = network_place.item(field, port_index);
                        let label = port.label.as_str();
                        if label.is_empty() {
                            self.report(
                                &port_place,
                                port_place.path.clone(),
                                "a port needs a label",
                            );
                        } else if group_labels.contains(label) {
                            self.report(
                                &port_place,
                                port_place.path.clone(),
                                format!(
                                    "port label {label:?} is already used by the group's network"
                                ),
                            );
                        } else if !labels.insert(label) {
                            self.report(
                                &port_place,
                                port_place.path.clone(),
                                format!("port label {label:?} is used twice"),
                            );
                        }
                        if field != "ReservedPorts" {
                            continue;
                        }
                        let value = port.value;
                        if !(1..=65535).contains(&value) {
                            self.report(
                                &port_place,
                                port_place.field("Value"),
                                format!("port {label:?}: static must be between 1 and 65535, got {value}"),
                            );
                        } else if let Some(other) = static_ports.get(&value) {
                            let other = other.clone();
                            self.report(
                                &port_place,
                                port_place.field("Value"),
                                format!(
                                    "port {label:?}: static port {value} is already used by {other}"
                                ),
                            );
                        } else {
                            static_ports
                                .insert(value, format!("task {:?}'s port {label:?}", task.name));
                        }
                    }
                }
            }
        }
    }

    /// Nomad's `VolumeRequest.Validate` for each group `volume` block: current Nomad's rules
    /// for host volumes (an access mode of its dynamic host volumes, none of CSI's), Nomad
    /// 1.1.2's for CSI volumes.
    fn volumes(&mut self, group: &TaskGroup, place: &Place, job_type: &str) {
        let canaries = group.update.as_ref().map_or(0, |update| update.canary);
        for (name, volume) in &group.volumes {
            let volume_place = place.child(&format!("Volumes.{name}"));
            let field = |key: &str| volume_place.field(key);
            let kind = volume.r#type.as_str();
            let label = format!("volume {name:?}");
            if kind != "host" && kind != "csi" {
                self.report(
                    place,
                    field("Type"),
                    format!("{label} has unrecognized type {kind:?} (host or csi)"),
                );
                continue;
            }
            let access_mode = volume.access_mode.as_str();
            let attachment_mode = volume.attachment_mode.as_str();
            let has_mount_options = volume.mount_options.is_some();
            if kind == "host" {
                if has_mount_options {
                    self.report(
                        place,
                        field("MountOptions"),
                        format!("{label}: host volumes cannot have mount options"),
                    );
                }
                match access_mode {
                    "single-node-reader-only" if !volume.read_only => self.report(
                        place,
                        field("ReadOnly"),
                        format!("{label}: {access_mode} volumes must be read-only"),
                    ),
                    ""
                    | "single-node-reader-only"
                    | "single-node-writer"
                    | "single-node-single-writer"
                    | "single-node-multi-writer" => {}
                    other => self.report(
                        place,
                        field("AccessMode"),
                        format!("{label}: host volumes cannot be mounted with {other} access mode"),
                    ),
                }
            } else {
                if attachment_mode.is_empty() {
                    self.report(
                        place,
                        field("AttachmentMode"),
                        format!("{label}: CSI volumes must have an attachment mode"),
                    );
                }
                if access_mode.is_empty() {
                    self.report(
                        place,
                        field("AccessMode"),
                        format!("{label}: CSI volumes must have an access mode"),
                    );
                }
                if matches!(
                    access_mode,
                    "single-node-reader-only" | "multi-node-reader-only"
                ) && !volume.read_only
                {
                    self.report(
                        place,
                        field("ReadOnly"),
                        format!("{label}: {access_mode} volumes must be read-only"),
                    );
                }
            }
            if volume.per_alloc {
                if job_type == "system" || job_type == "sysbatch" {
                    self.report(
                        place,
                        field("PerAlloc"),
                        format!("{label} cannot be per_alloc for system or sysbatch jobs"),
                    );
                }
                if volume.sticky {
                    self.report(
                        place,
                        field("PerAlloc"),
                        format!("{label} cannot be per_alloc and sticky at the same time"),
                    );
                }
            }
            if kind == "csi" && attachment_mode == "block-device" && has_mount_options {
                self.report(
                    place,
                    field("MountOptions"),
                    format!("{label}: block devices cannot have mount options"),
                );
            }
            if volume.per_alloc && canaries > 0 {
                self.report(
                    place,
                    field("PerAlloc"),
                    format!("{label} cannot be per_alloc when canaries are in use"),
                );
            }
            if volume.source.is_empty() {
                self.report(
                    place,
                    field("Source"),
                    format!("{label} has an empty source"),
                );
            }
        }
    }

    /// A task's `volume_mount` blocks name a group volume and a valid propagation mode, as
    /// Nomad's `TaskGroup.Validate` and `Task.Validate`.
    fn volume_mounts(&mut self, task: &Task, place: &Place, group: &TaskGroup) {
        for (index, mount) in task.volume_mounts.iter().enumerate() {
            let mount_place = place.item("VolumeMounts", index);
            let label = format!("volume_mount {}", index + 1);
            let volume = mount.volume.as_str();
            if volume.is_empty() {
                self.report(
                    place,
                    mount_place.field("Volume"),
                    format!("{label} names no volume"),
                );
            } else if !group.volumes.contains_key(volume) {
                self.report(
                    place,
                    mount_place.field("Volume"),
                    format!("{label} references undefined volume {volume:?}"),
                );
            }
            let mode = mount.propagation_mode.as_str();
            if !matches!(mode, "" | "private" | "host-to-task" | "bidirectional") {
                self.report(
                    place,
                    mount_place.field("PropagationMode"),
                    format!("{label} has an invalid propagation mode: {mode:?}"),
                );
            }
        }
    }

    fn task(
        &mut self,
        task: &Task,
        place: &Place,
        job_type: &str,
        group: &TaskGroup,
        update_progress_deadline: i64,
    ) {
        self.volume_mounts(task, place, group);
        let name = task.name.as_str();
        if name == "alloc" {
            self.report(
                place,
                place.field("Name"),
                "a task cannot be named \"alloc\"",
            );
        }
        // Task names become directory names on the client: the same rule as its `TaskName`.
        if !name.is_empty()
            && let Err(error) = drover_structs::TaskName::parse(name)
        {
            self.report(place, place.field("Name"), error.to_string());
        }
        if task.driver.is_empty() {
            self.report(
                place,
                place.path.clone(),
                "driver is missing (for example driver = \"raw_exec\")",
            );
        }
        let kill_timeout = task.kill_timeout.as_nanos();
        if kill_timeout < 0 {
            self.report(
                place,
                place.field("KillTimeout"),
                "kill_timeout must not be negative",
            );
        } else if job_type == "service"
            && update_progress_deadline > 0
            && kill_timeout > update_progress_deadline
        {
            self.report(
                place,
                place.field("KillTimeout"),
                format!(
                    "kill_timeout ({}) is longer than the group's update.progress_deadline ({})",
                    go_duration_text(kill_timeout),
                    go_duration_text(update_progress_deadline)
                ),
            );
        }
        self.actions(task, place);
        if task.shutdown_delay.as_nanos() < 0 {
            self.report(
                place,
                place.field("ShutdownDelay"),
                "shutdown_delay must not be negative",
            );
        }

        match &task.resources {
            Some(resources) => self.resources(resources, &place.child("Resources")),
            None => self.report(place, place.path.clone(), "resources are missing"),
        }
        if let Some(logs) = &task.log_config {
            let logs_place = place.child("LogConfig");
            let max_files = logs.max_files;
            let max_file_size = logs.max_file_size_mb;
            if max_files < 1 {
                self.report(
                    &logs_place,
                    logs_place.field("MaxFiles"),
                    format!("logs.max_files must be at least 1, got {max_files}"),
                );
            }
            if max_file_size < 1 {
                self.report(
                    &logs_place,
                    logs_place.field("MaxFileSizeMB"),
                    format!("logs.max_file_size must be at least 1 (MB), got {max_file_size}"),
                );
            }
            if let Some(disk) = &group.ephemeral_disk
                && max_files >= 1
                && max_file_size >= 1
                && disk.size_mb <= max_files * max_file_size
            {
                self.report(
                    &logs_place,
                    logs_place.path.clone(),
                    format!(
                        "log storage ({} MB) must be less than the group's ephemeral_disk.size ({} MB)",
                        max_files * max_file_size,
                        disk.size_mb
                    ),
                );
            }
        }

        self.constraints(&task.constraints, place, true);
        self.affinities(&task.affinities, place, job_type);

        if let Some(lifecycle) = &task.lifecycle {
            let lifecycle_place = place.child("Lifecycle");
            match lifecycle.hook.as_str() {
                "prestart" | "poststart" | "poststop" => {}
                "" => self.report(
                    &lifecycle_place,
                    lifecycle_place.path.clone(),
                    "lifecycle.hook is missing (prestart, poststart or poststop)",
                ),
                other => self.report(
                    &lifecycle_place,
                    lifecycle_place.field("Hook"),
                    format!(
                        "lifecycle.hook must be prestart, poststart or poststop, got {other:?}"
                    ),
                ),
            }
        }

        for (index, artifact) in task.artifacts.iter().enumerate() {
            let artifact_place = place.item("Artifacts", index);
            let label = format!("artifact {}", index + 1);
            if artifact.getter_source.is_empty() {
                self.report(
                    &artifact_place,
                    artifact_place.path.clone(),
                    format!("{label}: source is missing"),
                );
            }
            let mode = artifact.getter_mode.as_str();
            if !["", "any", "file", "dir"].contains(&mode) {
                self.report(
                    &artifact_place,
                    artifact_place.field("GetterMode"),
                    format!("{label}: mode must be any, file or dir, got {mode:?}"),
                );
            }
            let destination = artifact.relative_dest.as_str();
            if path_escapes_allocation_dir(destination) {
                self.report(
                    &artifact_place,
                    artifact_place.field("RelativeDest"),
                    format!(
                        "{label}: destination {destination:?} escapes the allocation directory"
                    ),
                );
            }
        }

        let mut destinations: BTreeMap<&str, usize> = BTreeMap::new();
        for (index, template) in task.templates.iter().enumerate() {
            let template_place = place.item("Templates", index);
            let label = format!("template {}", index + 1);
            if template.source_path.is_empty() && template.embedded_tmpl.is_empty() {
                self.report(
                    &template_place,
                    template_place.path.clone(),
                    format!("{label}: needs source or data"),
                );
            }
            let destination = template.dest_path.as_str();
            if destination.is_empty() {
                self.report(
                    &template_place,
                    template_place.path.clone(),
                    format!("{label}: destination is missing"),
                );
            } else if path_escapes_allocation_dir(destination) {
                self.report(
                    &template_place,
                    template_place.field("DestPath"),
                    format!(
                        "{label}: destination {destination:?} escapes the allocation directory"
                    ),
                );
            } else if let Some(first) = destinations.insert(destination, index) {
                self.report(
                    &template_place,
                    template_place.field("DestPath"),
                    format!(
                        "{label}: destination {destination:?} is also used by template {}",
                        first + 1
                    ),
                );
            }
            match template.change_mode.as_str() {
                "" | "noop" | "restart" => {}
                "signal" => {
                    if template.change_signal.is_empty() {
                        self.report(&template_place, template_place.field("ChangeMode"), format!("{label}: change_mode \"signal\" needs change_signal"));
                    }
                    if template.envvars {
                        self.report(&template_place, template_place.field("ChangeMode"), format!("{label}: change_mode \"signal\" cannot be used with env = true"));
                    }
                }
                "script" => match template.change_script.as_ref().filter(|script| script.is_object()) {
                    None => self.report(&template_place, template_place.field("ChangeMode"), format!("{label}: change_mode \"script\" needs a change_script block")),
                    Some(script)
                        if view::<ChangeScript>(script)
                            .and_then(|script| script.command)
                            .is_none_or(|command| command.is_empty()) =>
                    {
                        let script_place = template_place.child("ChangeScript");
                        self.report(&script_place, script_place.path.clone(), format!("{label}: change_script.command is missing"));
                    }
                    Some(_) => {}
                },
                other => self.report(&template_place, template_place.field("ChangeMode"), format!("{label}: change_mode must be noop, restart, signal or script, got {other:?}")),
            }
            let perms = template.perms.as_str();
            if !perms.is_empty() && (u16::from_str_radix(perms, 8).is_err() || perms.len() > 4) {
                self.report(
                    &template_place,
                    template_place.field("Perms"),
                    format!("{label}: perms {perms:?} is not an octal mode"),
                );
            }
            if let Some(WaitBounds {
                min: Some(minimum),
                max: Some(maximum),
            }) = template.wait.as_ref().and_then(view::<WaitBounds>)
                && maximum < minimum
            {
                let wait_place = template_place.child("Wait");
                self.report(
                    &wait_place,
                    wait_place.field("Max"),
                    format!("{label}: wait.max must not be less than wait.min"),
                );
            }
        }

        if let Some(payload) = &task.dispatch_payload {
            let file = payload.file.as_str();
            let payload_place = place.child("DispatchPayload");
            if path_escapes_allocation_dir(file) {
                self.report(
                    &payload_place,
                    payload_place.field("File"),
                    format!("dispatch_payload.file {file:?} escapes the allocation directory"),
                );
            }
        }

        let mut identity_names = BTreeSet::new();
        for (index, identity) in task.identities.iter().enumerate() {
            let identity_place = place.item("Identities", index);
            let name = identity.name.as_str();
            if !identity_names.insert(name) {
                self.report(
                    &identity_place,
                    identity_place.field("Name"),
                    format!("identity {name:?} is defined twice"),
                );
            }
            if identity.audience.is_empty() {
                self.report(
                    &identity_place,
                    identity_place.path.clone(),
                    format!("identity {name:?}: aud must name at least one audience"),
                );
            }
        }
        for identity in task.identity.iter().chain(&task.identities) {
            let change_mode = identity.change_mode.as_str();
            if !["", "noop", "restart", "signal"].contains(&change_mode) {
                self.report(
                    place,
                    place.path.clone(),
                    format!(
                        "identity change_mode must be noop, restart or signal, got {change_mode:?}"
                    ),
                );
            }
            let name = identity.name.as_str();
            let signal = identity.change_signal.as_str();
            let mut problems = Vec::new();
            if change_mode == "signal" && signal.is_empty() {
                problems.push(
                    "change_signal must be specified when using change_mode=\"signal\"".to_owned(),
                );
            }
            if change_mode != "signal" && !signal.is_empty() {
                problems.push("can only use change_signal with change_mode=\"signal\"".to_owned());
            }
            let ttl = identity.ttl.as_nanos();
            if ttl > 0 && (name.is_empty() || name == "default") {
                problems.push("ttl for default identity not yet supported".to_owned());
            }
            if ttl < 0 {
                problems.push("ttl must be >= 0".to_owned());
            }
            if !identity.filepath.is_empty() && !identity.file {
                problems
                    .push("file parameter must be true in order to specify filepath".to_owned());
            }
            if !name.is_empty()
                && !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                problems.push(format!(
                    "invalid name {name:?}. Must match regex ^[a-zA-Z0-9-_]{{1,128}}$"
                ));
            }
            for problem in problems {
                self.report(place, place.path.clone(), format!("identity: {problem}"));
            }
        }

        self.services(
            &task.services,
            place,
            &place.child("Services").path,
            group,
            Some(task),
        );
    }

    /// Nomad's `Action.Validate` and the task's check of repeated names.
    fn actions(&mut self, task: &Task, place: &Place) {
        let mut seen: Vec<&str> = Vec::new();
        let mut reported: Vec<&str> = Vec::new();
        for (index, action) in task.actions.iter().enumerate() {
            let action_place = place.item("Actions", index);
            let name = action.name.as_str();
            let mut problems = Vec::new();
            if action.command.is_empty() {
                problems.push("command cannot be empty".to_string());
            }
            let name_ok = (1..=128).contains(&name.chars().count())
                && !name.chars().any(|c| c == '\0' || c.is_whitespace());
            if !name_ok {
                problems.push(format!("invalid name '{name}'"));
            }
            if !problems.is_empty() {
                self.report(
                    &action_place,
                    action_place.path.clone(),
                    format!("Action {name} validation failed: {}", problems.join("; ")),
                );
            }
            if seen.contains(&name) {
                if !reported.contains(&name) {
                    reported.push(name);
                    self.report(
                        &action_place,
                        action_place.field("Name"),
                        format!("Action {name} defined multiple times"),
                    );
                }
            } else {
                seen.push(name);
            }
        }
    }

    fn resources(&mut self, resources: &Resources, place: &Place) {
        let cpu = resources.cpu;
        let cores = resources.cores;
        let memory = resources.memory_mb;
        if cores > 0 && cpu > 0 {
            self.report(
                place,
                place.field("Cores"),
                "resources may ask for cpu or cores, not both",
            );
        }
        if cores < 0 {
            self.report(
                place,
                place.field("Cores"),
                format!("resources.cores must not be negative, got {cores}"),
            );
        }
        if cores == 0 && cpu < MINIMUM_CPU_MHZ {
            self.report(
                place,
                place.field("CPU"),
                format!("resources.cpu must be at least {MINIMUM_CPU_MHZ} (MHz), got {cpu}"),
            );
        }
        if memory < MINIMUM_MEMORY_MB {
            self.report(
                place,
                place.field("MemoryMB"),
                format!("resources.memory must be at least {MINIMUM_MEMORY_MB} (MB)"),
            );
        }
        let memory_max = resources.memory_max_mb;
        if memory_max != 0 && memory_max != -1 && memory_max < memory {
            self.report(place, place.field("MemoryMaxMB"), format!("resources.memory_max ({memory_max}) must not be less than resources.memory ({memory})"));
        }
    }

    fn restart_policy(&mut self, restart: &RestartPolicy, place: &Place) {
        self.restart_backoff(restart, place);
        let mode = restart.mode.as_str();
        let attempts = restart.attempts;
        let interval = restart.interval.as_nanos();
        let delay = restart.delay.as_nanos();
        if mode != "delay" && mode != "fail" {
            self.report(
                place,
                place.field("Mode"),
                format!("restart.mode must be \"fail\" or \"delay\", got {mode:?}"),
            );
        }
        if attempts < 0 {
            self.report(
                place,
                place.field("Attempts"),
                format!("restart.attempts must not be negative, got {attempts}"),
            );
        } else if attempts == 0 && mode == "delay" {
            self.report(
                place,
                place.field("Attempts"),
                "restart.mode \"delay\" with 0 attempts is ambiguous",
            );
        }
        if interval < MINIMUM_RESTART_INTERVAL_NANOS {
            self.report(
                place,
                place.field("Interval"),
                format!(
                    "restart.interval must be at least 5s, got {}",
                    go_duration_text(interval)
                ),
            );
        } else if attempts > 0
            && restart.backoff_factor <= 1.0
            && attempts.saturating_mul(delay) > interval
        {
            self.report(
                place,
                place.field("Delay"),
                format!(
                    "cannot restart {attempts} times in an interval of {} with a delay of {}",
                    go_duration_text(interval),
                    go_duration_text(delay)
                ),
            );
        }
    }

    /// drover's restart backoff extension: `backoff_factor` ≥ 1 (or absent), `max_delay` not
    /// below `delay`.
    fn restart_backoff(&mut self, restart: &RestartPolicy, place: &Place) {
        let factor = restart.backoff_factor;
        // 0 is "absent": the model leaves it out of the JSON.
        if factor == 0.0 {
            return;
        }
        if factor < 1.0 {
            self.report(
                place,
                place.field("BackoffFactor"),
                format!("restart.backoff_factor must be at least 1 (or absent), got {factor}"),
            );
        }
        let delay = restart.delay.as_nanos();
        let max_delay = restart.max_delay.as_nanos();
        if max_delay != 0 && max_delay < delay {
            self.report(
                place,
                place.field("MaxDelay"),
                format!(
                    "restart.max_delay ({}) must not be shorter than restart.delay ({})",
                    go_duration_text(max_delay),
                    go_duration_text(delay)
                ),
            );
        }
    }

    fn reschedule_policy(&mut self, reschedule: &ReschedulePolicy, place: &Place) {
        let attempts = reschedule.attempts;
        let unlimited = reschedule.unlimited;
        if attempts <= 0 && !unlimited {
            return;
        }
        let interval = reschedule.interval.as_nanos();
        let delay = reschedule.delay.as_nanos();
        let max_delay = reschedule.max_delay.as_nanos();
        let delay_function = reschedule.delay_function.as_str();
        if attempts > 0 && unlimited {
            self.report(
                place,
                place.field("Unlimited"),
                "reschedule.unlimited cannot be true when attempts is set",
            );
        }
        if attempts > 0 && interval <= 0 {
            self.report(
                place,
                place.field("Interval"),
                "reschedule.interval must be set when attempts is set",
            );
        }
        if delay < MINIMUM_RESCHEDULE_DELAY_NANOS {
            self.report(
                place,
                place.field("Delay"),
                format!(
                    "reschedule.delay must be at least 5s, got {}",
                    go_duration_text(delay)
                ),
            );
        }
        if !["constant", "exponential", "fibonacci"].contains(&delay_function) {
            self.report(
                place,
                place.field("DelayFunction"),
                format!("reschedule.delay_function must be constant, exponential or fibonacci, got {delay_function:?}"),
            );
        } else if delay_function != "constant" && max_delay < delay {
            self.report(
                place,
                place.field("MaxDelay"),
                "reschedule.max_delay must not be less than reschedule.delay",
            );
        }
    }

    fn update(&mut self, update: &UpdateStrategy, place: &Place) {
        if update.max_parallel < 0 {
            self.report(
                place,
                place.field("MaxParallel"),
                "update.max_parallel must not be negative",
            );
        }
        if update.canary < 0 {
            self.report(
                place,
                place.field("Canary"),
                "update.canary must not be negative",
            );
        }
        let health_check = update.health_check.as_str();
        if !["", "checks", "task_states", "manual"].contains(&health_check) {
            self.report(
                place,
                place.field("HealthCheck"),
                format!("update.health_check must be checks, task_states or manual, got {health_check:?}"),
            );
        }
        let minimum_healthy = update.min_healthy_time.as_nanos();
        let healthy_deadline = update.healthy_deadline.as_nanos();
        let progress_deadline = update
            .progress_deadline
            .map_or(0, |deadline| deadline.as_nanos());
        if healthy_deadline > 0 && minimum_healthy >= healthy_deadline {
            self.report(
                place,
                place.field("MinHealthyTime"),
                "update.min_healthy_time must be less than update.healthy_deadline",
            );
        }
        if progress_deadline != 0 && progress_deadline < healthy_deadline {
            self.report(
                place,
                place.field("ProgressDeadline"),
                "update.progress_deadline must not be less than update.healthy_deadline",
            );
        }
    }

    /// A group's `scaling` block as Nomad's `validateScalingPolicy` judges it (`min` was
    /// filled from the count when absent).
    fn scaling(&mut self, scaling: &ScalingPolicy, count: i64, place: &Place, job_type: &str) {
        if job_type == "system" {
            self.report(
                place,
                place.path.clone(),
                "Task groups with job type system do not support scaling stanzas",
            );
            return;
        }
        let min = scaling.min.unwrap_or(count);
        let max = scaling.max.unwrap_or(-1);
        if max < 0 {
            self.report(
                place,
                place.field("Max"),
                "Scaling policy invalid: maximum count must be specified and non-negative",
            );
        } else if max < min {
            self.report(
                place,
                place.field("Max"),
                "Scaling policy invalid: maximum count must not be less than minimum count",
            );
        }
        if min < 0 {
            self.report(
                place,
                place.field("Min"),
                "Scaling policy invalid: minimum count must be specified and non-negative",
            );
        }
        if max < count {
            self.report(
                place,
                place.field("Max"),
                "Scaling policy invalid: task group count must not be greater than maximum count in scaling policy",
            );
        }
        if count < min {
            self.report(
                place,
                place.field("Min"),
                "Scaling policy invalid: task group count must not be less than minimum count in scaling policy",
            );
        }
    }

    fn constraints(&mut self, constraints: &[Constraint], place: &Place, task_level: bool) {
        for (index, constraint) in constraints.iter().enumerate() {
            let constraint_place = place.item("Constraints", index);
            let label = format!("constraint {}", index + 1);
            let operand = constraint.operand.as_str();
            let left = constraint.l_target.as_str();
            let right = constraint.r_target.as_str();
            if !CONSTRAINT_OPERANDS.contains(&operand) {
                self.report(
                    &constraint_place,
                    constraint_place.field("Operand"),
                    format!("{label}: unknown operator {operand:?}"),
                );
                continue;
            }
            if task_level && (operand == "distinct_hosts" || operand == "distinct_property") {
                self.report(
                    &constraint_place,
                    constraint_place.field("Operand"),
                    format!("{label}: {operand} is not allowed in a task"),
                );
            }
            match operand {
                "=" | "==" | "is" | "!=" | "not" | "<" | "<=" | ">" | ">=" if right.is_empty() => {
                    self.report(
                        &constraint_place,
                        constraint_place.path.clone(),
                        format!("{label}: operator {operand:?} needs a value"),
                    );
                }
                "set_contains" | "set_contains_all" | "set_contains_any" if right.is_empty() => {
                    self.report(
                        &constraint_place,
                        constraint_place.path.clone(),
                        format!("{label}: {operand} needs a value"),
                    );
                }
                "regexp" | "version" | "semver" => {
                    if let Some(problem) = compiled_target_problem(operand, right) {
                        self.report(
                            &constraint_place,
                            constraint_place.field("RTarget"),
                            format!("{label}: {problem}"),
                        );
                    }
                }
                "distinct_property"
                    if !right.is_empty()
                        && right.parse::<u64>().map_or(true, |count| count < 1) =>
                {
                    self.report(
                        &constraint_place,
                        constraint_place.field("RTarget"),
                        format!(
                            "{label}: distinct_property allows a count of 1 or more, got {right:?}"
                        ),
                    );
                }
                "is_set" | "is_not_set" if !right.is_empty() => {
                    self.report(
                        &constraint_place,
                        constraint_place.field("RTarget"),
                        format!("{label}: operator {operand:?} takes no value"),
                    );
                }
                _ => {}
            }
            if operand != "distinct_hosts" && left.is_empty() {
                self.report(
                    &constraint_place,
                    constraint_place.path.clone(),
                    format!("{label}: attribute is missing"),
                );
            }
        }
    }

    fn affinities(&mut self, affinities: &[Affinity], place: &Place, job_type: &str) {
        if job_type == "system" && !affinities.is_empty() {
            let first = place.item("Affinities", 0);
            self.report(
                &first,
                first.path.clone(),
                "a system job cannot have affinities",
            );
            return;
        }
        for (index, affinity) in affinities.iter().enumerate() {
            let affinity_place = place.item("Affinities", index);
            let label = format!("affinity {}", index + 1);
            let operand = affinity.operand.as_str();
            let right = affinity.r_target.as_str();
            if !AFFINITY_OPERANDS.contains(&operand) {
                self.report(
                    &affinity_place,
                    affinity_place.field("Operand"),
                    format!("{label}: unknown operator {operand:?}"),
                );
            } else if right.is_empty() {
                self.report(
                    &affinity_place,
                    affinity_place.path.clone(),
                    format!("{label}: operator {operand:?} needs a value"),
                );
            } else if let Some(problem) = compiled_target_problem(operand, right) {
                self.report(
                    &affinity_place,
                    affinity_place.field("RTarget"),
                    format!("{label}: {problem}"),
                );
            }
            if affinity.l_target.is_empty() {
                self.report(
                    &affinity_place,
                    affinity_place.path.clone(),
                    format!("{label}: attribute is missing"),
                );
            }
            let weight = affinity.weight;
            if weight == 0 || !(-100..=100).contains(&weight) {
                self.report(
                    &affinity_place,
                    affinity_place.field("Weight"),
                    format!(
                        "{label}: weight must be between -100 and 100 and not zero, got {weight}"
                    ),
                );
            }
        }
    }

    fn spreads(&mut self, spreads: &[Spread], place: &Place, job_type: &str) {
        if job_type == "system" && !spreads.is_empty() {
            let first = place.item("Spreads", 0);
            self.report(
                &first,
                first.path.clone(),
                "a system job cannot have spreads",
            );
            return;
        }
        for (index, spread) in spreads.iter().enumerate() {
            let spread_place = place.item("Spreads", index);
            let label = format!("spread {}", index + 1);
            if spread.attribute.is_empty() {
                self.report(
                    &spread_place,
                    spread_place.path.clone(),
                    format!("{label}: attribute is missing"),
                );
            }
            let weight = spread.weight;
            if !(1..=100).contains(&weight) {
                self.report(
                    &spread_place,
                    spread_place.field("Weight"),
                    format!("{label}: weight must be between 1 and 100, got {weight}"),
                );
            }
            let mut seen = BTreeSet::new();
            let mut total = 0;
            for (target_index, target) in spread.spread_target.iter().enumerate() {
                let target_place = spread_place.item("SpreadTarget", target_index);
                let value = target.value.as_str();
                if !seen.insert(value) {
                    self.report(
                        &target_place,
                        target_place.path.clone(),
                        format!("{label}: target {value:?} is defined twice"),
                    );
                }
                let percent = target.percent;
                if !(0..=100).contains(&percent) {
                    self.report(
                        &target_place,
                        target_place.field("Percent"),
                        format!("{label}: target {value:?} percent must be between 0 and 100"),
                    );
                }
                total += percent;
            }
            if total > 100 {
                self.report(
                    &spread_place,
                    spread_place.path.clone(),
                    format!("{label}: target percentages add up to {total}%, more than 100%"),
                );
            }
        }
    }

    fn services(
        &mut self,
        services: &[Service],
        place: &Place,
        services_path: &str,
        group: &TaskGroup,
        task: Option<&Task>,
    ) {
        // A task service may also name a port of its task's own (deprecated) network.
        let task_networks: &[NetworkResource] = task
            .and_then(|task| task.resources.as_ref())
            .map_or(&[], |resources| resources.networks.as_slice());
        let port_labels: BTreeSet<&str> = group
            .networks
            .iter()
            .chain(task_networks)
            .flat_map(|network| network.reserved_ports.iter().chain(&network.dynamic_ports))
            .map(|port| port.label.as_str())
            .collect();
        let task_names: BTreeSet<&str> =
            group.tasks.iter().map(|task| task.name.as_str()).collect();
        let mut seen_names = BTreeSet::new();
        for (index, service) in services.iter().enumerate() {
            let service_place = Place {
                path: format!("{services_path}[{index}]"),
                context: place.context.clone(),
            };
            let name = service.name.as_str();
            let label = format!("service {name:?}");
            if name.is_empty() {
                self.report(
                    &service_place,
                    service_place.path.clone(),
                    format!("service {} has no name", index + 1),
                );
            } else if !is_valid_service_name(name) && !name.contains("${") {
                self.report(
                    &service_place,
                    service_place.field("Name"),
                    format!("{label}: a service name must be letters, digits and dashes, starting with a letter"),
                );
            }
            // Nomad: only a task's services have a driver whose network they could take.
            if task.is_none() && service.address_mode == "driver" {
                self.report(
                    &service_place,
                    service_place.field("AddressMode"),
                    format!("service {name:?} cannot use address_mode=\"driver\", only services defined in a \"task\" block can use this mode"),
                );
            }
            let port = service.port_label.as_str();
            if !seen_names.insert((name, port)) {
                self.report(
                    &service_place,
                    service_place.path.clone(),
                    format!("{label} with port {port:?} is defined twice"),
                );
            }
            if !port.is_empty()
                && port.parse::<u16>().is_err()
                && !port_labels.contains(port)
                && !port.contains("${")
            {
                self.report(
                    &service_place,
                    service_place.field("PortLabel"),
                    format!("{label}: port {port:?} is not a port label of the group's network"),
                );
            }
            let provider = service.provider.as_str();
            // Consul is accepted (and registered in the built-in catalog, with a warning at
            // register); anything else is refused as Nomad refuses it.
            if !["", "nomad", "consul"].contains(&provider) {
                self.report(
                    &service_place,
                    service_place.field("Provider"),
                    format!("{label}: service provider must be \"consul\", or \"nomad\"; not {provider:?}"),
                );
            }
            if task.is_none() {
                let service_task = service.task_name.as_str();
                if !service_task.is_empty() && !task_names.contains(service_task) {
                    self.report(
                        &service_place,
                        service_place.field("TaskName"),
                        format!("{label}: task {service_task:?} is not in this group"),
                    );
                }
            }
            // An unset provider is Consul, Nomad's default.
            let consul_provider = provider == "consul" || provider.is_empty();
            for (check_index, check) in service.checks.iter().enumerate() {
                let check_place = service_place.item("Checks", check_index);
                let check_label = format!("{label} check {}", check_index + 1);
                let check_type = check.r#type.as_str();
                match check_type {
                    "http" | "tcp" => {
                        if port.is_empty() && check.port_label.is_empty() {
                            self.report(
                                &check_place,
                                check_place.path.clone(),
                                format!("{check_label}: a {check_type} check needs a port"),
                            );
                        }
                    }
                    // Nomad's rule: the consul provider's checks may also be script and grpc
                    // checks (drover runs consul services' checks itself).
                    "script" if consul_provider => {
                        if check.command.is_empty() {
                            self.report(&check_place, check_place.field("Command"), format!("{check_label}: a script check needs a command"));
                        }
                    }
                    "grpc" if consul_provider => {}
                    "script" | "grpc" => self.report(
                        &check_place,
                        check_place.field("Type"),
                        format!("{check_label}: {check_type} checks need Consul; the nomad service provider runs http and tcp checks"),
                    ),
                    "" => self.report(&check_place, check_place.path.clone(), format!("{check_label}: type is missing (http or tcp)")),
                    other => self.report(&check_place, check_place.field("Type"), format!("{check_label}: type must be http or tcp, got {other:?}")),
                }
                if !consul_provider && check.expose {
                    self.report(
                        &check_place,
                        check_place.field("Expose"),
                        format!("{check_label}: expose is only for Consul service checks"),
                    );
                }
                if !consul_provider && check.on_update == "ignore_warnings" {
                    self.report(&check_place, check_place.field("OnUpdate"), format!("{check_label}: on_update = \"ignore_warnings\" is only for Consul service checks"));
                }
                if !consul_provider && check.address_mode == "driver" {
                    self.report(&check_place, check_place.field("AddressMode"), format!("{check_label}: address_mode = \"driver\" is only for Consul service checks"));
                }
                if !consul_provider && check.success_before_passing != 0 {
                    self.report(&check_place, check_place.field("SuccessBeforePassing"), format!("{check_label}: success_before_passing is only for Consul service checks"));
                }
                let method = check.method.as_str();
                if check_type == "http"
                    && ![
                        "", "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "CONNECT", "OPTIONS",
                        "TRACE",
                    ]
                    .contains(&method)
                {
                    self.report(
                        &check_place,
                        check_place.field("Method"),
                        format!("{check_label}: method {method:?} is not an HTTP method"),
                    );
                }
                if check_type == "http" && check.path.is_empty() {
                    self.report(
                        &check_place,
                        check_place.path.clone(),
                        format!("{check_label}: an http check needs a path"),
                    );
                }
                let interval = check.interval.as_nanos();
                if interval < 1_000_000_000 {
                    self.report(
                        &check_place,
                        check_place.field("Interval"),
                        format!(
                            "{check_label}: interval must be at least 1s, got {}",
                            go_duration_text(interval)
                        ),
                    );
                }
                let timeout = check.timeout.as_nanos();
                if timeout < 1_000_000_000 {
                    self.report(
                        &check_place,
                        check_place.field("Timeout"),
                        format!(
                            "{check_label}: timeout must be at least 1s, got {}",
                            go_duration_text(timeout)
                        ),
                    );
                }
            }
        }
    }
}

fn is_valid_service_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes[0].is_ascii_alphabetic()
        && bytes
            .iter()
            .all(|byte| byte.is_ascii_alphanumeric() || *byte == b'-')
        && bytes[bytes.len() - 1] != b'-'
}

/// What is wrong with the right target of a `regexp`, `version` or `semver` operand, compiled
/// as the scheduler will (so a bad pattern is an error here, not a node that never fits).
fn compiled_target_problem(operand: &str, right: &str) -> Option<String> {
    use drover_structs::version::{VersionConstraint, VersionFlavor};
    match operand {
        "regexp" => regex::Regex::new(right).err().map(|error| {
            let text = error.to_string();
            let detail = text
                .lines()
                .find_map(|line| line.trim().strip_prefix("error: "))
                .unwrap_or(text.trim())
                .to_string();
            format!("regular expression {right:?} is invalid: {detail}")
        }),
        "version" => VersionConstraint::parse(right, VersionFlavor::Lenient)
            .is_none()
            .then(|| format!("version constraint {right:?} is invalid")),
        "semver" => VersionConstraint::parse(right, VersionFlavor::Semver)
            .is_none()
            .then(|| format!("semver constraint {right:?} is invalid")),
        _ => None,
    }
}

/// Validates a job (defaults applied).
pub(crate) fn validate_job(job: &Job) -> Vec<ValidationIssue> {
    let mut checker = Checker { issues: Vec::new() };
    checker.job(job);
    checker.issues
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocation_dir_escapes() {
        assert!(!path_escapes_allocation_dir("local/file"));
        assert!(!path_escapes_allocation_dir("../alloc/data/x"));
        assert!(!path_escapes_allocation_dir("/etc/passwd"));
        assert!(path_escapes_allocation_dir("../../etc/passwd"));
        assert!(path_escapes_allocation_dir("local/../../../x"));
        assert!(!path_escapes_allocation_dir(""));
    }

    #[test]
    fn go_durations_print_like_go() {
        assert_eq!(go_duration_text(0), "0s");
        assert_eq!(go_duration_text(15_000_000_000), "15s");
        assert_eq!(go_duration_text(1_800_000_000_000), "30m0s");
        assert_eq!(go_duration_text(86_400_000_000_000), "24h0m0s");
        assert_eq!(go_duration_text(1_000_000), "1ms");
    }
}
