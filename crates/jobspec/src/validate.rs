//! Job validation after defaults are applied: the essentials of Nomad's `Job.Validate`,
//! `TaskGroup.Validate` and `Task.Validate`, reporting every problem with the JSON field path it
//! belongs to (which the HCL front end turns into `line:column`).
//!
//! It reads the job in Nomad's JSON shape, so it checks exactly what goes over the wire and
//! does not depend on how the Rust types name their fields. Not a scheduler check: whether a
//! node can run the job is not decided here.

use std::collections::{BTreeMap, BTreeSet};

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

fn text<'value>(object: &'value JsonValue, field: &str) -> &'value str {
    object.get(field).and_then(JsonValue::as_str).unwrap_or("")
}

fn integer(object: &JsonValue, field: &str) -> Option<i64> {
    object.get(field).and_then(JsonValue::as_i64)
}

fn backoff_factor(restart: &JsonValue) -> f64 {
    restart
        .get("BackoffFactor")
        .and_then(JsonValue::as_f64)
        .unwrap_or(0.0)
}

fn flag(object: &JsonValue, field: &str) -> bool {
    object
        .get(field)
        .and_then(JsonValue::as_bool)
        .unwrap_or(false)
}

fn items<'value>(object: &'value JsonValue, field: &str) -> &'value [JsonValue] {
    object
        .get(field)
        .and_then(JsonValue::as_array)
        .map_or(&[], Vec::as_slice)
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

impl Checker {
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

    fn job(&mut self, job: &JsonValue) {
        let place = Place {
            path: String::new(),
            context: String::new(),
        };
        let id = text(job, "ID");
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
        if text(job, "Name").is_empty() {
            self.report(&place, "Name".into(), "job name is missing");
        }
        let job_type = text(job, "Type");
        if !JOB_TYPES.contains(&job_type) {
            self.report(
                &place,
                "Type".into(),
                format!("job type {job_type:?} is not one of service, batch, system, sysbatch"),
            );
        }
        if let Some(priority) = integer(job, "Priority")
            && !(1..=100).contains(&priority)
        {
            self.report(
                &place,
                "Priority".into(),
                format!("job priority must be between 1 and 100, got {priority}"),
            );
        }
        if items(job, "Datacenters")
            .iter()
            .any(|datacenter| datacenter.as_str().is_none_or(str::is_empty))
        {
            self.report(
                &place,
                "Datacenters".into(),
                "datacenter names must not be empty",
            );
        }

        self.constraints(job, &place, false);
        self.affinities(job, &place, job_type);
        self.spreads(job, &place, job_type);

        let groups = items(job, "TaskGroups");
        if groups.is_empty() {
            self.report(&place, String::new(), "a job needs at least one group");
        }
        let mut group_names: BTreeMap<&str, usize> = BTreeMap::new();
        for (index, group) in groups.iter().enumerate() {
            let name = text(group, "Name");
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
                context: format!("group {:?}", text(group, "Name")),
            };
            self.group(group, &group_place, job_type);
        }

        if let Some(periodic) = job.get("Periodic").filter(|value| value.is_object()) {
            let periodic_place = place.child("Periodic");
            let enabled = periodic
                .get("Enabled")
                .and_then(JsonValue::as_bool)
                .unwrap_or(true);
            if enabled {
                if job_type != "batch" && job_type != "sysbatch" {
                    self.report(
                        &periodic_place,
                        periodic_place.path.clone(),
                        format!(
                            "periodic is only allowed for batch and sysbatch jobs, not {job_type:?}"
                        ),
                    );
                }
                let spec = text(periodic, "Spec");
                let specs = items(periodic, "Specs");
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
                let spec_type = text(periodic, "SpecType");
                if !spec_type.is_empty() && spec_type != "cron" {
                    self.report(
                        &periodic_place,
                        periodic_place.field("SpecType"),
                        format!("Unknown periodic specification type {spec_type:?}"),
                    );
                }
                let zone = text(periodic, "TimeZone");
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
                        .map(|value| ("Specs", value.as_str().unwrap_or(""))),
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
        }

        if let Some(parameterized) = job
            .get("ParameterizedJob")
            .filter(|value| value.is_object())
            && !flag(job, "Dispatched")
        {
            let parameterized_place = place.child("ParameterizedJob");
            if job_type != "batch" && job_type != "sysbatch" {
                self.report(
                    &parameterized_place,
                    parameterized_place.path.clone(),
                    format!("parameterized is only allowed for batch and sysbatch jobs, not {job_type:?}"),
                );
            }
            let payload = text(parameterized, "Payload");
            if !["", "optional", "required", "forbidden"].contains(&payload) {
                self.report(
                    &parameterized_place,
                    parameterized_place.field("Payload"),
                    format!("parameterized payload must be optional, required or forbidden, got {payload:?}"),
                );
            }
            let required: BTreeSet<&str> = items(parameterized, "MetaRequired")
                .iter()
                .filter_map(JsonValue::as_str)
                .collect();
            let both: Vec<&str> = items(parameterized, "MetaOptional")
                .iter()
                .filter_map(JsonValue::as_str)
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

        if let Some(update) = job.get("Update").filter(|value| value.is_object()) {
            self.update(update, &place.child("Update"));
        }
    }

    fn group(&mut self, group: &JsonValue, place: &Place, job_type: &str) {
        if let Some(count) = integer(group, "Count") {
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
        }
        let tasks = items(group, "Tasks");
        // Nomad adds the task of a Consul Connect gateway itself, so such a group needs none of
        // its own (the support table refuses Connect at register, naming it).
        let has_gateway = items(group, "Services").iter().any(|service| {
            service
                .get("Connect")
                .and_then(|connect| connect.get("Gateway"))
                .is_some_and(|gateway| !gateway.is_null())
        });
        if tasks.is_empty() && !has_gateway {
            self.report(place, place.path.clone(), "a group needs at least one task");
        }
        self.constraints(group, place, false);
        self.affinities(group, place, job_type);
        self.spreads(group, place, job_type);

        if let Some(restart) = group.get("RestartPolicy").filter(|value| value.is_object()) {
            self.restart_policy(restart, &place.child("RestartPolicy"));
        }
        if let Some(reschedule) = group
            .get("ReschedulePolicy")
            .filter(|value| value.is_object())
        {
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
        if let Some(disk) = group.get("EphemeralDisk").filter(|value| value.is_object())
            && let Some(size) = integer(disk, "SizeMB")
            && size < 10
        {
            let disk_place = place.child("EphemeralDisk");
            self.report(
                &disk_place,
                disk_place.field("SizeMB"),
                format!("ephemeral_disk.size must be at least 10 (MB), got {size}"),
            );
        }
        if let Some(update) = group.get("Update").filter(|value| value.is_object()) {
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
        for field in [
            "ShutdownDelay",
            "StopAfterClientDisconnect",
            "MaxClientDisconnect",
        ] {
            if let Some(value) = integer(group, field)
                && value < 0
            {
                self.report(
                    place,
                    place.field(field),
                    format!("{field} must not be negative"),
                );
            }
        }

        self.networks(group, place);
        self.volumes(group, place);

        let mut task_names: BTreeMap<&str, usize> = BTreeMap::new();
        let mut leaders = 0;
        let mut main_tasks = 0;
        for (index, task) in tasks.iter().enumerate() {
            let name = text(task, "Name");
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
            if flag(task, "Leader") {
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
                .get("Lifecycle")
                .map_or("", |lifecycle| text(lifecycle, "Hook"));
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

        let group_services = items(group, "Services");
        self.services(
            group_services,
            place,
            &place.child("Services").path,
            group,
            None,
        );

        let update_progress_deadline = group
            .get("Update")
            .and_then(|update| integer(update, "ProgressDeadline"))
            .unwrap_or(0);
        for (index, task) in tasks.iter().enumerate() {
            let task_place = Place {
                path: format!("{}.Tasks[{index}]", place.path),
                context: format!("{} task {:?}", place.context, text(task, "Name")),
            };
            self.task(task, &task_place, job_type, group, update_progress_deadline);
        }
    }

    fn networks(&mut self, group: &JsonValue, place: &Place) {
        let networks = items(group, "Networks");
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
            let mode = text(network, "Mode");
            if !["", "host", "bridge", "none"].contains(&mode) {
                self.report(
                    &network_place,
                    network_place.field("Mode"),
                    format!("network mode must be host, bridge or none, got {mode:?}"),
                );
            }
            for field in ["ReservedPorts", "DynamicPorts"] {
                for (port_index, port) in items(network, field).iter().enumerate() {
                    let port_place = network_place.item(field, port_index);
                    let label = text(port, "Label");
                    if label.is_empty() {
                        self.report(&port_place, port_place.path.clone(), "a port needs a label");
                    } else if !labels.insert(label) {
                        self.report(
                            &port_place,
                            port_place.path.clone(),
                            format!("port label {label:?} is used twice"),
                        );
                    }
                    if let Some(value) = integer(port, "Value").filter(|_| field == "ReservedPorts")
                    {
                        if !(1..=65535).contains(&value) {
                            self.report(&port_place, port_place.field("Value"), format!("port {label:?}: static must be between 1 and 65535, got {value}"));
                        } else if let Some(other) = static_ports.insert(value, label) {
                            self.report(&port_place, port_place.field("Value"), format!("port {label:?}: static port {value} is already used by port {other:?}"));
                        }
                    }
                    if let Some(to) = integer(port, "To")
                        && !(-1..=65535).contains(&to)
                    {
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

    /// Nomad's `VolumeRequest.Validate` for each group `volume` block.
    fn volumes(&mut self, group: &JsonValue, place: &Place) {
        let Some(volumes) = group.get("Volumes").and_then(JsonValue::as_object) else {
            return;
        };
        let canaries = group
            .get("Update")
            .and_then(|update| integer(update, "Canary"))
            .unwrap_or(0);
        for (name, volume) in volumes {
            let volume_place = place.child(&format!("Volumes.{name}"));
            let field = |key: &str| volume_place.field(key);
            let kind = text(volume, "Type");
            let label = format!("volume {name:?}");
            if kind != "host" && kind != "csi" {
                self.report(
                    place,
                    field("Type"),
                    format!("{label} has unrecognized type {kind:?} (host or csi)"),
                );
                continue;
            }
            let access_mode = text(volume, "AccessMode");
            let attachment_mode = text(volume, "AttachmentMode");
            let has_mount_options = volume
                .get("MountOptions")
                .is_some_and(|options| !options.is_null());
            if kind == "host" {
                if !attachment_mode.is_empty() {
                    self.report(
                        place,
                        field("AttachmentMode"),
                        format!("{label}: host volumes cannot have an attachment mode"),
                    );
                }
                if !access_mode.is_empty() {
                    self.report(
                        place,
                        field("AccessMode"),
                        format!("{label}: host volumes cannot have an access mode"),
                    );
                }
                if has_mount_options {
                    self.report(
                        place,
                        field("MountOptions"),
                        format!("{label}: host volumes cannot have mount options"),
                    );
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
            }
            if matches!(
                access_mode,
                "single-node-reader-only" | "multi-node-reader-only"
            ) && !flag(volume, "ReadOnly")
            {
                self.report(
                    place,
                    field("ReadOnly"),
                    format!("{label}: {access_mode} volumes must be read-only"),
                );
            }
            if attachment_mode == "block-device" && has_mount_options {
                self.report(
                    place,
                    field("MountOptions"),
                    format!("{label}: block devices cannot have mount options"),
                );
            }
            if flag(volume, "PerAlloc") && canaries > 0 {
                self.report(
                    place,
                    field("PerAlloc"),
                    format!("{label} cannot be per_alloc when canaries are in use"),
                );
            }
            if text(volume, "Source").is_empty() {
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
    fn volume_mounts(&mut self, task: &JsonValue, place: &Place, group: &JsonValue) {
        let volumes = group.get("Volumes").and_then(JsonValue::as_object);
        for (index, mount) in items(task, "VolumeMounts").iter().enumerate() {
            let mount_place = place.item("VolumeMounts", index);
            let label = format!("volume_mount {}", index + 1);
            let volume = text(mount, "Volume");
            if volume.is_empty() {
                self.report(
                    place,
                    mount_place.field("Volume"),
                    format!("{label} names no volume"),
                );
            } else if !volumes.is_some_and(|volumes| volumes.contains_key(volume)) {
                self.report(
                    place,
                    mount_place.field("Volume"),
                    format!("{label} references undefined volume {volume:?}"),
                );
            }
            let mode = text(mount, "PropagationMode");
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
        task: &JsonValue,
        place: &Place,
        job_type: &str,
        group: &JsonValue,
        update_progress_deadline: i64,
    ) {
        self.volume_mounts(task, place, group);
        let name = text(task, "Name");
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
        if text(task, "Driver").is_empty() {
            self.report(
                place,
                place.path.clone(),
                "driver is missing (for example driver = \"raw_exec\")",
            );
        }
        if let Some(kill_timeout) = integer(task, "KillTimeout") {
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
        }
        if let Some(delay) = integer(task, "ShutdownDelay")
            && delay < 0
        {
            self.report(
                place,
                place.field("ShutdownDelay"),
                "shutdown_delay must not be negative",
            );
        }

        match task.get("Resources").filter(|value| value.is_object()) {
            Some(resources) => self.resources(resources, &place.child("Resources")),
            None => self.report(place, place.path.clone(), "resources are missing"),
        }
        if let Some(logs) = task.get("LogConfig").filter(|value| value.is_object()) {
            let logs_place = place.child("LogConfig");
            let max_files = integer(logs, "MaxFiles").unwrap_or(0);
            let max_file_size = integer(logs, "MaxFileSizeMB").unwrap_or(0);
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
            if let Some(disk_size) = group
                .get("EphemeralDisk")
                .and_then(|disk| integer(disk, "SizeMB"))
                && max_files >= 1
                && max_file_size >= 1
                && disk_size <= max_files * max_file_size
            {
                self.report(
                    &logs_place,
                    logs_place.path.clone(),
                    format!(
                        "log storage ({} MB) must be less than the group's ephemeral_disk.size ({disk_size} MB)",
                        max_files * max_file_size
                    ),
                );
            }
        }

        self.constraints(task, place, true);
        self.affinities(task, place, job_type);

        if let Some(lifecycle) = task.get("Lifecycle").filter(|value| value.is_object()) {
            let lifecycle_place = place.child("Lifecycle");
            let hook = text(lifecycle, "Hook");
            match hook {
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

        for (index, artifact) in items(task, "Artifacts").iter().enumerate() {
            let artifact_place = place.item("Artifacts", index);
            let label = format!("artifact {}", index + 1);
            if text(artifact, "GetterSource").is_empty() {
                self.report(
                    &artifact_place,
                    artifact_place.path.clone(),
                    format!("{label}: source is missing"),
                );
            }
            let mode = text(artifact, "GetterMode");
            if !["", "any", "file", "dir"].contains(&mode) {
                self.report(
                    &artifact_place,
                    artifact_place.field("GetterMode"),
                    format!("{label}: mode must be any, file or dir, got {mode:?}"),
                );
            }
            let destination = text(artifact, "RelativeDest");
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
        for (index, template) in items(task, "Templates").iter().enumerate() {
            let template_place = place.item("Templates", index);
            let label = format!("template {}", index + 1);
            if text(template, "SourcePath").is_empty() && text(template, "EmbeddedTmpl").is_empty()
            {
                self.report(
                    &template_place,
                    template_place.path.clone(),
                    format!("{label}: needs source or data"),
                );
            }
            let destination = text(template, "DestPath");
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
            match text(template, "ChangeMode") {
                "" | "noop" | "restart" => {}
                "signal" => {
                    if text(template, "ChangeSignal").is_empty() {
                        self.report(&template_place, template_place.field("ChangeMode"), format!("{label}: change_mode \"signal\" needs change_signal"));
                    }
                    if flag(template, "Envvars") {
                        self.report(&template_place, template_place.field("ChangeMode"), format!("{label}: change_mode \"signal\" cannot be used with env = true"));
                    }
                }
                "script" => match template.get("ChangeScript").filter(|value| value.is_object()) {
                    None => self.report(&template_place, template_place.field("ChangeMode"), format!("{label}: change_mode \"script\" needs a change_script block")),
                    Some(script) if text(script, "Command").is_empty() => {
                        let script_place = template_place.child("ChangeScript");
                        self.report(&script_place, script_place.path.clone(), format!("{label}: change_script.command is missing"));
                    }
                    Some(_) => {}
                },
                other => self.report(&template_place, template_place.field("ChangeMode"), format!("{label}: change_mode must be noop, restart, signal or script, got {other:?}")),
            }
            let perms = text(template, "Perms");
            if !perms.is_empty() && (u16::from_str_radix(perms, 8).is_err() || perms.len() > 4) {
                self.report(
                    &template_place,
                    template_place.field("Perms"),
                    format!("{label}: perms {perms:?} is not an octal mode"),
                );
            }
            if let Some(wait) = template.get("Wait").filter(|value| value.is_object())
                && let (Some(minimum), Some(maximum)) = (integer(wait, "Min"), integer(wait, "Max"))
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

        if let Some(payload) = task
            .get("DispatchPayload")
            .filter(|value| value.is_object())
        {
            let file = text(payload, "File");
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
        for (index, identity) in items(task, "Identities").iter().enumerate() {
            let identity_place = place.item("Identities", index);
            let name = text(identity, "Name");
            if !identity_names.insert(name) {
                self.report(
                    &identity_place,
                    identity_place.field("Name"),
                    format!("identity {name:?} is defined twice"),
                );
            }
            if items(identity, "Audience").is_empty() {
                self.report(
                    &identity_place,
                    identity_place.path.clone(),
                    format!("identity {name:?}: aud must name at least one audience"),
                );
            }
        }
        for identity in task
            .get("Identity")
            .filter(|value| value.is_object())
            .into_iter()
            .chain(items(task, "Identities"))
        {
            let change_mode = text(identity, "ChangeMode");
            if !["", "noop", "restart", "signal"].contains(&change_mode) {
                self.report(
                    place,
                    place.path.clone(),
                    format!(
                        "identity change_mode must be noop, restart or signal, got {change_mode:?}"
                    ),
                );
            }
            let name = text(identity, "Name");
            let signal = text(identity, "ChangeSignal");
            let mut problems = Vec::new();
            if change_mode == "signal" && signal.is_empty() {
                problems.push(
                    "change_signal must be specified when using change_mode=\"signal\"".to_owned(),
                );
            }
            if change_mode != "signal" && !signal.is_empty() {
                problems.push("can only use change_signal with change_mode=\"signal\"".to_owned());
            }
            let ttl = identity
                .get("TTL")
                .and_then(|ttl| ttl.as_i64())
                .unwrap_or(0);
            if ttl > 0 && (name.is_empty() || name == "default") {
                problems.push("ttl for default identity not yet supported".to_owned());
            }
            if ttl < 0 {
                problems.push("ttl must be >= 0".to_owned());
            }
            if !text(identity, "Filepath").is_empty()
                && !identity
                    .get("File")
                    .and_then(|file| file.as_bool())
                    .unwrap_or(false)
            {
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

        let task_services = items(task, "Services");
        self.services(
            task_services,
            place,
            &place.child("Services").path,
            group,
            Some(task),
        );
    }

    fn resources(&mut self, resources: &JsonValue, place: &Place) {
        let cpu = integer(resources, "CPU").unwrap_or(0);
        let cores = integer(resources, "Cores").unwrap_or(0);
        let memory = integer(resources, "MemoryMB").unwrap_or(0);
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
        if let Some(memory_max) = integer(resources, "MemoryMaxMB")
            && memory_max != 0
            && memory_max != -1
            && memory_max < memory
        {
            self.report(place, place.field("MemoryMaxMB"), format!("resources.memory_max ({memory_max}) must not be less than resources.memory ({memory})"));
        }
        if let Some(disk) = integer(resources, "DiskMB")
            && disk > 0
        {
            self.report(
                place,
                place.field("DiskMB"),
                "resources.disk is not allowed in a task; use the group's ephemeral_disk.size",
            );
        }
    }

    fn restart_policy(&mut self, restart: &JsonValue, place: &Place) {
        self.restart_backoff(restart, place);
        let mode = text(restart, "Mode");
        let attempts = integer(restart, "Attempts").unwrap_or(0);
        let interval = integer(restart, "Interval").unwrap_or(0);
        let delay = integer(restart, "Delay").unwrap_or(0);
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
            && backoff_factor(restart) <= 1.0
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
    fn restart_backoff(&mut self, restart: &JsonValue, place: &Place) {
        let Some(factor) = restart.get("BackoffFactor").and_then(JsonValue::as_f64) else {
            return;
        };
        if factor != 0.0 && factor < 1.0 {
            self.report(
                place,
                place.field("BackoffFactor"),
                format!("restart.backoff_factor must be at least 1 (or absent), got {factor}"),
            );
        }
        let delay = integer(restart, "Delay").unwrap_or(0);
        let max_delay = integer(restart, "MaxDelay").unwrap_or(0);
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

    fn reschedule_policy(&mut self, reschedule: &JsonValue, place: &Place) {
        let attempts = integer(reschedule, "Attempts").unwrap_or(0);
        let unlimited = flag(reschedule, "Unlimited");
        if attempts <= 0 && !unlimited {
            return;
        }
        let interval = integer(reschedule, "Interval").unwrap_or(0);
        let delay = integer(reschedule, "Delay").unwrap_or(0);
        let max_delay = integer(reschedule, "MaxDelay").unwrap_or(0);
        let delay_function = text(reschedule, "DelayFunction");
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

    fn update(&mut self, update: &JsonValue, place: &Place) {
        if let Some(max_parallel) = integer(update, "MaxParallel")
            && max_parallel < 0
        {
            self.report(
                place,
                place.field("MaxParallel"),
                "update.max_parallel must not be negative",
            );
        }
        if let Some(canary) = integer(update, "Canary")
            && canary < 0
        {
            self.report(
                place,
                place.field("Canary"),
                "update.canary must not be negative",
            );
        }
        let health_check = text(update, "HealthCheck");
        if !["", "checks", "task_states", "manual"].contains(&health_check) {
            self.report(
                place,
                place.field("HealthCheck"),
                format!("update.health_check must be checks, task_states or manual, got {health_check:?}"),
            );
        }
        if let (Some(minimum_healthy), Some(healthy_deadline)) = (
            integer(update, "MinHealthyTime"),
            integer(update, "HealthyDeadline"),
        ) && healthy_deadline > 0
            && minimum_healthy >= healthy_deadline
        {
            self.report(
                place,
                place.field("MinHealthyTime"),
                "update.min_healthy_time must be less than update.healthy_deadline",
            );
        }
        if let (Some(healthy_deadline), Some(progress_deadline)) = (
            integer(update, "HealthyDeadline"),
            integer(update, "ProgressDeadline"),
        ) && progress_deadline != 0
            && progress_deadline < healthy_deadline
        {
            self.report(
                place,
                place.field("ProgressDeadline"),
                "update.progress_deadline must not be less than update.healthy_deadline",
            );
        }
    }

    fn constraints(&mut self, owner: &JsonValue, place: &Place, task_level: bool) {
        for (index, constraint) in items(owner, "Constraints").iter().enumerate() {
            let constraint_place = place.item("Constraints", index);
            let label = format!("constraint {}", index + 1);
            let operand = text(constraint, "Operand");
            let left = text(constraint, "LTarget");
            let right = text(constraint, "RTarget");
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

    fn affinities(&mut self, owner: &JsonValue, place: &Place, job_type: &str) {
        let affinities = items(owner, "Affinities");
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
            let operand = text(affinity, "Operand");
            if !AFFINITY_OPERANDS.contains(&operand) {
                self.report(
                    &affinity_place,
                    affinity_place.field("Operand"),
                    format!("{label}: unknown operator {operand:?}"),
                );
            } else if text(affinity, "RTarget").is_empty() {
                self.report(
                    &affinity_place,
                    affinity_place.path.clone(),
                    format!("{label}: operator {operand:?} needs a value"),
                );
            } else if let Some(problem) =
                compiled_target_problem(operand, text(affinity, "RTarget"))
            {
                self.report(
                    &affinity_place,
                    affinity_place.field("RTarget"),
                    format!("{label}: {problem}"),
                );
            }
            if text(affinity, "LTarget").is_empty() {
                self.report(
                    &affinity_place,
                    affinity_place.path.clone(),
                    format!("{label}: attribute is missing"),
                );
            }
            let weight = integer(affinity, "Weight").unwrap_or(0);
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

    fn spreads(&mut self, owner: &JsonValue, place: &Place, job_type: &str) {
        let spreads = items(owner, "Spreads");
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
            if text(spread, "Attribute").is_empty() {
                self.report(
                    &spread_place,
                    spread_place.path.clone(),
                    format!("{label}: attribute is missing"),
                );
            }
            let weight = integer(spread, "Weight").unwrap_or(0);
            if !(1..=100).contains(&weight) {
                self.report(
                    &spread_place,
                    spread_place.field("Weight"),
                    format!("{label}: weight must be between 1 and 100, got {weight}"),
                );
            }
            let mut seen = BTreeSet::new();
            let mut total = 0;
            for (target_index, target) in items(spread, "SpreadTarget").iter().enumerate() {
                let target_place = spread_place.item("SpreadTarget", target_index);
                let value = text(target, "Value");
                if !seen.insert(value) {
                    self.report(
                        &target_place,
                        target_place.path.clone(),
                        format!("{label}: target {value:?} is defined twice"),
                    );
                }
                let percent = integer(target, "Percent").unwrap_or(0);
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
        services: &[JsonValue],
        place: &Place,
        services_path: &str,
        group: &JsonValue,
        task: Option<&JsonValue>,
    ) {
        // A task service may also name a port of its task's own (deprecated) network, which
        // the support table refuses at register with its own message.
        let task_networks = task
            .and_then(|task| task.get("Resources"))
            .map(|resources| items(resources, "Networks"))
            .unwrap_or_default();
        let port_labels: BTreeSet<&str> = items(group, "Networks")
            .iter()
            .chain(task_networks)
            .flat_map(|network| {
                items(network, "ReservedPorts")
                    .iter()
                    .chain(items(network, "DynamicPorts"))
            })
            .map(|port| text(port, "Label"))
            .collect();
        let task_names: BTreeSet<&str> = items(group, "Tasks")
            .iter()
            .map(|task| text(task, "Name"))
            .collect();
        let mut seen_names = BTreeSet::new();
        for (index, service) in services.iter().enumerate() {
            let service_place = Place {
                path: format!("{services_path}[{index}]"),
                context: place.context.clone(),
            };
            let name = text(service, "Name");
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
            let port = text(service, "PortLabel");
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
            let provider = text(service, "Provider");
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
                let service_task = text(service, "TaskName");
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
            for (check_index, check) in items(service, "Checks").iter().enumerate() {
                let check_place = service_place.item("Checks", check_index);
                let check_label = format!("{label} check {}", check_index + 1);
                let check_type = text(check, "Type");
                match check_type {
                    "http" | "tcp" => {
                        let check_port = text(check, "PortLabel");
                        if port.is_empty() && check_port.is_empty() {
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
                        if text(check, "Command").is_empty() {
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
                if !consul_provider && flag(check, "Expose") {
                    self.report(
                        &check_place,
                        check_place.field("Expose"),
                        format!("{check_label}: expose is only for Consul service checks"),
                    );
                }
                if !consul_provider && text(check, "OnUpdate") == "ignore_warnings" {
                    self.report(&check_place, check_place.field("OnUpdate"), format!("{check_label}: on_update = \"ignore_warnings\" is only for Consul service checks"));
                }
                if !consul_provider && text(check, "AddressMode") == "driver" {
                    self.report(&check_place, check_place.field("AddressMode"), format!("{check_label}: address_mode = \"driver\" is only for Consul service checks"));
                }
                if !consul_provider && integer(check, "SuccessBeforePassing").unwrap_or(0) != 0 {
                    self.report(&check_place, check_place.field("SuccessBeforePassing"), format!("{check_label}: success_before_passing is only for Consul service checks"));
                }
                let method = text(check, "Method");
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
                if check_type == "http" && text(check, "Path").is_empty() {
                    self.report(
                        &check_place,
                        check_place.path.clone(),
                        format!("{check_label}: an http check needs a path"),
                    );
                }
                let interval = integer(check, "Interval").unwrap_or(0);
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
                let timeout = integer(check, "Timeout").unwrap_or(0);
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

/// Validates a job given as Nomad JSON (after defaults).
pub(crate) fn validate_job_json(job: &JsonValue) -> Vec<ValidationIssue> {
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
