//! The API's defaults for a submitted job (Nomad's `api/jobs.go` and `api/tasks.go`
//! `Canonicalize`, plus the server's admission defaults for datacenters and node pool).
//!
//! Nomad's API types hold pointers, so it can tell "absent" from "zero". drover's wire types hold
//! values; a zero that no valid job can mean (priority 0, CPU 0, an empty restart mode) is read as
//! "absent" and filled, while zeros a user may mean (restart `Attempts` 0, `Delay` 0) are kept when
//! their block is present. A block that is absent altogether gets the full default for the job
//! type. Some absences are settled at decode time instead: a group's `Count` is 1, an `update`
//! block's `MaxParallel` 1, a restart block's `Delay` 15s and `Mode` `fail`, and its `Attempts`
//! the marker [`RESTART_ATTEMPTS_UNSET`], filled here by job type.
//!
//! Blocks naming integrations get Nomad's defaults too (migrate strategy for service groups,
//! Vault and Consul cluster `default`, volume mount propagation `private`, CSI plugin
//! directories, one device, scaling `Min` from the count).
//!
//! Not here: validation; the jobspec parser's own defaults (group names from labels).

use crate::job::*;
use crate::job_blocks::*;
use crate::time::DurationNs;

/// Default job priority.
pub const DEFAULT_JOB_PRIORITY: i64 = 50;
/// Default task CPU in MHz.
pub const DEFAULT_TASK_CPU_MHZ: i64 = 100;
/// Default task memory in MB.
pub const DEFAULT_TASK_MEMORY_MB: i64 = 300;
/// Default ephemeral disk in MB.
pub const DEFAULT_EPHEMERAL_DISK_MB: i64 = 300;
/// Default kill timeout.
pub const DEFAULT_KILL_TIMEOUT: DurationNs = DurationNs::from_secs(5);
/// Default log rotation.
pub const DEFAULT_LOG_MAX_FILES: i64 = 10;
pub const DEFAULT_LOG_MAX_FILE_SIZE_MB: i64 = 10;

/// The restart policy a group gets when it has none, by job type: service and system jobs
/// 2 attempts per 30m, batch and sysbatch 3 per 24h; both with a 15s delay and mode `fail`.
pub fn default_restart_policy(job_type: &str) -> RestartPolicy {
    match job_type {
        JOB_TYPE_BATCH | JOB_TYPE_SYSBATCH => RestartPolicy {
            attempts: 3,
            interval: DurationNs::from_hours(24),
            delay: DurationNs::from_secs(15),
            mode: RESTART_POLICY_MODE_FAIL.to_string(),
            render_templates: false,
            backoff_factor: 0.0,
            max_delay: DurationNs::default(),
        },
        _ => RestartPolicy {
            attempts: 2,
            interval: DurationNs::from_mins(30),
            delay: DurationNs::from_secs(15),
            mode: RESTART_POLICY_MODE_FAIL.to_string(),
            render_templates: false,
            backoff_factor: 0.0,
            max_delay: DurationNs::default(),
        },
    }
}

/// The reschedule policy a group gets when it has none, by job type: service jobs reschedule
/// without limit with an exponential delay from 30s up to 1h; batch jobs once per 24h after a
/// constant 5s; system and sysbatch jobs are never rescheduled (`None`).
pub fn default_reschedule_policy(job_type: &str) -> Option<ReschedulePolicy> {
    match job_type {
        JOB_TYPE_SERVICE => Some(ReschedulePolicy {
            attempts: 0,
            interval: DurationNs::ZERO,
            delay: DurationNs::from_secs(30),
            delay_function: RESCHEDULE_DELAY_EXPONENTIAL.to_string(),
            max_delay: DurationNs::from_hours(1),
            unlimited: true,
        }),
        JOB_TYPE_BATCH => Some(ReschedulePolicy {
            attempts: 1,
            interval: DurationNs::from_hours(24),
            delay: DurationNs::from_secs(5),
            delay_function: RESCHEDULE_DELAY_CONSTANT.to_string(),
            max_delay: DurationNs::ZERO,
            unlimited: false,
        }),
        _ => None,
    }
}

/// The update strategy defaults applied to a group that has an `update` block.
pub fn default_update_strategy() -> UpdateStrategy {
    UpdateStrategy {
        stagger: DurationNs::from_secs(30),
        max_parallel: 1,
        health_check: "checks".to_string(),
        min_healthy_time: DurationNs::from_secs(10),
        healthy_deadline: DurationNs::from_mins(5),
        progress_deadline: Some(DurationNs::from_mins(10)),
        auto_revert: false,
        auto_promote: false,
        canary: 0,
    }
}

/// Default task resources.
pub fn default_resources() -> Resources {
    Resources {
        cpu: DEFAULT_TASK_CPU_MHZ,
        memory_mb: DEFAULT_TASK_MEMORY_MB,
        ..Resources::default()
    }
}

/// Default log rotation.
pub fn default_log_config() -> LogConfig {
    LogConfig {
        max_files: DEFAULT_LOG_MAX_FILES,
        max_file_size_mb: DEFAULT_LOG_MAX_FILE_SIZE_MB,
        disabled: false,
    }
}

fn fill_if_empty(field: &mut String, default: &str) {
    if field.is_empty() {
        *field = default.to_string();
    }
}

impl Job {
    /// Applies every default a registered job gets: the parse's
    /// ([`Job::canonicalize_as_parsed`]) and then the server's (a parameterized job's `Payload`
    /// `optional`; `${JOB}`, `${TASKGROUP}`, `${TASK}` and `${BASE}` replaced in service
    /// names), as Nomad's server canonicalizes a job at register, then Connect's sidecar
    /// tasks and ports ([`crate::connect`], Nomad's connect mutator). Idempotent.
    pub fn canonicalize(&mut self) {
        self.canonicalize_as_parsed();
        if let Some(parameterized) = &mut self.parameterized_job {
            fill_if_empty(&mut parameterized.payload, DISPATCH_PAYLOAD_OPTIONAL);
        }
        self.replace_service_name_variables();
        self.inject_connect_sidecars();
    }

    /// Applies the defaults a parsed job gets (`/v1/jobs/parse` with `Canonicalize`, and the
    /// CLI's parse before it submits the job), and not the server's: service names stay as
    /// written (their `${…}` replaced at register and, for the task environment's, by the
    /// client when it registers the service) and an unset `Payload` stays unset. Idempotent.
    pub fn canonicalize_as_parsed(&mut self) {
        if self.name.is_empty() {
            self.name = self.id.clone();
        }
        fill_if_empty(&mut self.namespace, DEFAULT_NAMESPACE);
        fill_if_empty(&mut self.region, DEFAULT_REGION);
        fill_if_empty(&mut self.r#type, JOB_TYPE_SERVICE);
        fill_if_empty(&mut self.node_pool, DEFAULT_NODE_POOL);
        if self.priority == 0 {
            self.priority = DEFAULT_JOB_PRIORITY;
        }
        if self.datacenters.is_empty() {
            self.datacenters = vec!["*".to_string()];
        }
        if let Some(periodic) = &mut self.periodic {
            fill_if_empty(&mut periodic.spec_type, PERIODIC_SPEC_CRON);
            fill_if_empty(&mut periodic.time_zone, "UTC");
        }
        if self.update.is_none() && self.r#type == JOB_TYPE_SERVICE {
            self.update = Some(default_update_strategy());
        }
        if let Some(update) = &mut self.update {
            canonicalize_update_strategy(update);
        }
        let job_type = self.r#type.clone();
        let job_update = self.update.clone();
        let job_migrate = self.migrate.take();
        for group in &mut self.task_groups {
            group.canonicalize(&job_type, job_update.as_ref());
            group.canonicalize_migrate(&job_type, job_migrate.as_ref());
        }
        self.name_unnamed_services();
        // The groups hold the whole strategy; the job keeps only its stagger and parallelism,
        // as Nomad's server stores it.
        if let Some(update) = &mut self.update {
            *update = UpdateStrategy {
                stagger: update.stagger,
                max_parallel: update.max_parallel,
                health_check: String::new(),
                min_healthy_time: DurationNs::ZERO,
                healthy_deadline: DurationNs::ZERO,
                progress_deadline: Some(DurationNs::ZERO),
                auto_revert: false,
                auto_promote: false,
                canary: 0,
            };
        }
    }
}

impl Job {
    /// Names every unnamed service as Nomad's API does: `<job>-<group>` for a group service,
    /// `<job>-<group>-<task>` for a task service.
    fn name_unnamed_services(&mut self) {
        let job_name = self.name.clone();
        for group in &mut self.task_groups {
            let group_base = format!("{job_name}-{}", group.name);
            for service in &mut group.services {
                if service.name.is_empty() {
                    service.name = group_base.clone();
                }
            }
            for task in &mut group.tasks {
                for service in &mut task.services {
                    if service.name.is_empty() {
                        service.name = format!("{group_base}-{}", task.name);
                    }
                }
            }
        }
    }

    /// Replaces `${JOB}`, `${TASKGROUP}`, `${TASK}` and `${BASE}` in service names, as Nomad's
    /// server does at register.
    fn replace_service_name_variables(&mut self) {
        let job_name = self.name.clone();
        for group in &mut self.task_groups {
            let group_name = group.name.clone();
            let group_base = format!("{job_name}-{group_name}");
            for service in &mut group.services {
                // Nomad's server names the task of a group service "group".
                service.name = replace_service_name_variables(
                    &service.name,
                    &job_name,
                    &group_name,
                    "group",
                    &format!("{group_base}-group"),
                );
            }
            for task in &mut group.tasks {
                let base = format!("{group_base}-{}", task.name);
                for service in &mut task.services {
                    service.name = replace_service_name_variables(
                        &service.name,
                        &job_name,
                        &group_name,
                        &task.name,
                        &base,
                    );
                }
            }
        }
    }
}

/// Replaces the four names Nomad's server knows in a service name; any other `${…}` is left
/// for the client's interpolation.
fn replace_service_name_variables(
    name: &str,
    job: &str,
    group: &str,
    task: &str,
    base: &str,
) -> String {
    if !name.contains("${") {
        return name.to_string();
    }
    name.replace("${JOB}", job)
        .replace("${TASKGROUP}", group)
        .replace("${TASK}", task)
        .replace("${BASE}", base)
}

/// Fills the fields of a present restart block that were left unset (`Attempts` unset, an
/// empty `Mode`, a zero `Interval`) from `defaults`.
fn fill_unset_restart_fields(policy: &mut RestartPolicy, defaults: &RestartPolicy) {
    if policy.attempts == RESTART_ATTEMPTS_UNSET {
        policy.attempts = defaults.attempts;
    }
    fill_if_empty(&mut policy.mode, &defaults.mode);
    if policy.interval.is_zero() {
        policy.interval = defaults.interval;
    }
    if policy.backoff_factor == 0.0 {
        policy.backoff_factor = defaults.backoff_factor;
    }
    if policy.max_delay.is_zero() {
        policy.max_delay = defaults.max_delay;
    }
}

fn canonicalize_update_strategy(update: &mut UpdateStrategy) {
    let defaults = default_update_strategy();
    if update.stagger.is_zero() {
        update.stagger = defaults.stagger;
    }
    fill_if_empty(&mut update.health_check, &defaults.health_check);
    if update.min_healthy_time.is_zero() {
        update.min_healthy_time = defaults.min_healthy_time;
    }
    if update.healthy_deadline.is_zero() {
        update.healthy_deadline = defaults.healthy_deadline;
    }
    // Only an absent deadline is filled, as Nomad's API fills only a nil one: 0 says "no
    // deadline".
    if update.progress_deadline.is_none() {
        update.progress_deadline = defaults.progress_deadline;
    }
}

impl TaskGroup {
    /// Applies the API's group defaults for a job of `job_type`, inheriting the job's `update`.
    pub fn canonicalize(&mut self, job_type: &str, job_update: Option<&UpdateStrategy>) {
        match &mut self.ephemeral_disk {
            None => {
                self.ephemeral_disk = Some(EphemeralDisk {
                    size_mb: DEFAULT_EPHEMERAL_DISK_MB,
                    ..EphemeralDisk::default()
                });
            }
            Some(disk) if disk.size_mb == 0 => disk.size_mb = DEFAULT_EPHEMERAL_DISK_MB,
            Some(_) => {}
        }

        let restart_defaults = default_restart_policy(job_type);
        match &mut self.restart_policy {
            None => self.restart_policy = Some(restart_defaults),
            Some(policy) => fill_unset_restart_fields(policy, &restart_defaults),
        }

        match (
            &mut self.reschedule_policy,
            default_reschedule_policy(job_type),
        ) {
            (None, defaults) => self.reschedule_policy = defaults,
            (Some(policy), Some(defaults)) => {
                fill_if_empty(&mut policy.delay_function, &defaults.delay_function);
                if policy.delay.is_zero() {
                    policy.delay = defaults.delay;
                }
                if policy.max_delay.is_zero() && policy.delay_function != RESCHEDULE_DELAY_CONSTANT
                {
                    policy.max_delay = DurationNs::from_hours(1);
                }
            }
            (Some(policy), None) => {
                fill_if_empty(&mut policy.delay_function, RESCHEDULE_DELAY_CONSTANT);
            }
        }

        if self.update.is_none() && matches!(job_type, JOB_TYPE_SERVICE | JOB_TYPE_SYSTEM) {
            self.update = job_update.cloned();
        }
        if let Some(update) = &mut self.update {
            canonicalize_update_strategy(update);
        }

        let group_restart = self.restart_policy.clone();
        for task in &mut self.tasks {
            task.canonicalize(group_restart.as_ref());
        }

        if let Some(scaling) = &mut self.scaling {
            if scaling.min.is_none() {
                scaling.min = Some(self.count);
            }
            fill_if_empty(&mut scaling.r#type, SCALING_POLICY_TYPE_HORIZONTAL);
        }
        if let Some(consul) = &mut self.consul {
            fill_if_empty(&mut consul.cluster, DEFAULT_INTEGRATION_CLUSTER);
        }
        if let Some(disconnect) = &mut self.disconnect {
            fill_if_empty(&mut disconnect.reconcile, DISCONNECT_RECONCILE_BEST_SCORE);
        }
    }

    /// The group's migrate strategy: the job's, with the group's own values laid over it;
    /// service groups without either get the defaults.
    pub fn canonicalize_migrate(&mut self, job_type: &str, job_migrate: Option<&MigrateStrategy>) {
        let merged = match (job_migrate, self.migrate.take()) {
            (Some(job), Some(group)) => Some(merge_migrate(job, &group)),
            (Some(job), None) => Some(job.clone()),
            (None, group) => group,
        };
        self.migrate = match merged {
            None if job_type == JOB_TYPE_SERVICE => Some(MigrateStrategy::default()),
            other => other,
        };
        if let Some(migrate) = &mut self.migrate {
            let defaults = default_migrate_strategy();
            if migrate.max_parallel == 0 {
                migrate.max_parallel = defaults.max_parallel;
            }
            fill_if_empty(&mut migrate.health_check, &defaults.health_check);
            if migrate.min_healthy_time.is_zero() {
                migrate.min_healthy_time = defaults.min_healthy_time;
            }
            if migrate.healthy_deadline.is_zero() {
                migrate.healthy_deadline = defaults.healthy_deadline;
            }
        }
    }
}

/// `Disconnect.Reconcile` default.
pub const DISCONNECT_RECONCILE_BEST_SCORE: &str = "best_score";

/// The migrate strategy defaults: one allocation at a time, healthy by its checks for 10s
/// within 5m.
pub fn default_migrate_strategy() -> MigrateStrategy {
    MigrateStrategy {
        max_parallel: 1,
        health_check: "checks".to_string(),
        min_healthy_time: DurationNs::from_secs(10),
        healthy_deadline: DurationNs::from_mins(5),
    }
}

/// `base` with every field `over` sets (non-zero) taking its place.
fn merge_migrate(base: &MigrateStrategy, over: &MigrateStrategy) -> MigrateStrategy {
    let mut merged = base.clone();
    if over.max_parallel != 0 {
        merged.max_parallel = over.max_parallel;
    }
    if !over.health_check.is_empty() {
        merged.health_check = over.health_check.clone();
    }
    if !over.min_healthy_time.is_zero() {
        merged.min_healthy_time = over.min_healthy_time;
    }
    if !over.healthy_deadline.is_zero() {
        merged.healthy_deadline = over.healthy_deadline;
    }
    merged
}

impl Task {
    /// Applies the API's task defaults; a task without a restart policy takes its group's.
    pub fn canonicalize(&mut self, group_restart_policy: Option<&RestartPolicy>) {
        match &mut self.resources {
            None => self.resources = Some(default_resources()),
            Some(resources) => {
                if resources.cpu == 0 && resources.cores == 0 {
                    resources.cpu = DEFAULT_TASK_CPU_MHZ;
                }
                if resources.memory_mb == 0 {
                    resources.memory_mb = DEFAULT_TASK_MEMORY_MB;
                }
            }
        }
        if self.kill_timeout.is_zero() {
            self.kill_timeout = DEFAULT_KILL_TIMEOUT;
        }
        match &mut self.log_config {
            None => self.log_config = Some(default_log_config()),
            Some(log_config) => {
                if log_config.max_files == 0 {
                    log_config.max_files = DEFAULT_LOG_MAX_FILES;
                }
                if log_config.max_file_size_mb == 0 {
                    log_config.max_file_size_mb = DEFAULT_LOG_MAX_FILE_SIZE_MB;
                }
            }
        }
        match (&mut self.restart_policy, group_restart_policy) {
            (None, group_policy) => self.restart_policy = group_policy.cloned(),
            (Some(task_policy), Some(group_policy)) => {
                fill_unset_restart_fields(task_policy, group_policy);
            }
            (Some(task_policy), None) => {
                if task_policy.attempts == RESTART_ATTEMPTS_UNSET {
                    task_policy.attempts = 0;
                }
            }
        }
        if self
            .lifecycle
            .as_ref()
            .is_some_and(|lifecycle| lifecycle.hook.is_empty())
        {
            self.lifecycle = None;
        }
        for artifact in &mut self.artifacts {
            fill_if_empty(&mut artifact.getter_mode, "any");
            fill_if_empty(&mut artifact.relative_dest, "local/");
        }
        if let Some(resources) = &mut self.resources {
            for device in &mut resources.devices {
                if device.count == 0 {
                    device.count = 1;
                }
            }
            if let Some(numa) = &mut resources.numa {
                fill_if_empty(&mut numa.affinity, "none");
            }
        }
        if let Some(vault) = &mut self.vault {
            fill_if_empty(&mut vault.cluster, DEFAULT_INTEGRATION_CLUSTER);
            fill_if_empty(&mut vault.change_mode, "restart");
            fill_if_empty(&mut vault.change_signal, "SIGHUP");
        }
        if let Some(consul) = &mut self.consul {
            fill_if_empty(&mut consul.cluster, DEFAULT_INTEGRATION_CLUSTER);
        }
        for mount in &mut self.volume_mounts {
            fill_if_empty(
                &mut mount.propagation_mode,
                VOLUME_MOUNT_PROPAGATION_PRIVATE,
            );
        }
        if let Some(plugin) = &mut self.csi_plugin_config {
            fill_if_empty(&mut plugin.mount_dir, "/csi");
            fill_if_empty(&mut plugin.stage_publish_base_dir, "/local/csi");
            if plugin.health_timeout.is_zero() {
                plugin.health_timeout = DurationNs::from_secs(30);
            }
        }
        for template in &mut self.templates {
            fill_if_empty(&mut template.change_mode, "restart");
            fill_if_empty(&mut template.perms, "0644");
            fill_if_empty(&mut template.left_delim, "{{");
            fill_if_empty(&mut template.right_delim, "}}");
            if template.splay.is_zero() {
                template.splay = DurationNs::from_secs(5);
            }
        }
    }
}

/// Lays a job's `Update` under each group's own `Update`, field by field, as Nomad's API merges
/// them (`UpdateStrategy.Merge` over a copy of the job's): what the group sets wins, a field it
/// leaves out (or sends as `null`) comes from the job. A group without an `Update` inherits the
/// job's whole block in [`TaskGroup::canonicalize`].
///
/// It works on the job's JSON, before decoding, because the decoded [`UpdateStrategy`] cannot
/// tell a field left out from one set to its default (a missing `MaxParallel` reads as 1).
/// Keys match without regard to case, as the decoder matches them.
pub fn merge_job_update_into_groups(job: &mut serde_json::Value) {
    fn key_of(object: &serde_json::Map<String, serde_json::Value>, name: &str) -> Option<String> {
        object
            .keys()
            .find(|key| key.eq_ignore_ascii_case(name))
            .cloned()
    }
    let Some(job_object) = job.as_object_mut() else {
        return;
    };
    let job_update: Vec<(String, serde_json::Value)> =
        match key_of(job_object, "Update").and_then(|key| job_object.get(&key)) {
            Some(serde_json::Value::Object(update)) => update
                .iter()
                .filter(|(_, value)| !value.is_null())
                .map(|(field, value)| (field.clone(), value.clone()))
                .collect(),
            _ => return,
        };
    let Some(groups_key) = key_of(job_object, "TaskGroups") else {
        return;
    };
    let Some(serde_json::Value::Array(groups)) = job_object.get_mut(&groups_key) else {
        return;
    };
    for group in groups
        .iter_mut()
        .filter_map(serde_json::Value::as_object_mut)
    {
        let Some(update_key) = key_of(group, "Update") else {
            continue;
        };
        let Some(serde_json::Value::Object(group_update)) = group.get_mut(&update_key) else {
            continue;
        };
        for (field, value) in &job_update {
            match key_of(group_update, field) {
                Some(existing) if !group_update[&existing].is_null() => {}
                Some(existing) => {
                    group_update.insert(existing, value.clone());
                }
                None => {
                    group_update.insert(field.clone(), value.clone());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job_from(json: serde_json::Value) -> Job {
        crate::lenient::from_value_ignoring_key_case(json).unwrap_or_default()
    }

    #[test]
    fn only_an_absent_progress_deadline_is_filled() {
        let mut job = job_from(serde_json::json!({
            "ID": "web",
            "TaskGroups": [
                {"Name": "absent", "Update": {"MaxParallel": 1}},
                {"Name": "none", "Update": {"MaxParallel": 1, "ProgressDeadline": 0}},
                {"Name": "null", "Update": {"MaxParallel": 1, "ProgressDeadline": null}},
            ],
        }));
        job.canonicalize();
        job.canonicalize();
        let deadlines: Vec<Option<DurationNs>> = job
            .task_groups
            .iter()
            .map(|group| {
                group
                    .update
                    .as_ref()
                    .and_then(|update| update.progress_deadline)
            })
            .collect();
        assert_eq!(
            deadlines,
            [
                Some(DurationNs::from_mins(10)),
                Some(DurationNs::ZERO),
                Some(DurationNs::from_mins(10)),
            ]
        );

        // A job-level `progress_deadline = 0` reaches the groups that inherit the block.
        let mut job = job_from(serde_json::json!({
            "ID": "web",
            "Update": {"MaxParallel": 1, "ProgressDeadline": 0},
            "TaskGroups": [{"Name": "g"}],
        }));
        job.canonicalize();
        let update = job.task_groups[0].update.clone().unwrap_or_default();
        assert_eq!(update.progress_deadline, Some(DurationNs::ZERO));
    }

    #[test]
    fn service_groups_get_the_migrate_defaults_and_the_jobs_migrate_is_merged() {
        let mut job = job_from(serde_json::json!({
            "ID": "web",
            "Migrate": {"MaxParallel": 3},
            "TaskGroups": [
                {"Name": "a", "Migrate": {"HealthCheck": "task_states"}},
                {"Name": "b"}
            ]
        }));
        job.canonicalize();
        let a = job.task_groups[0].migrate.clone().unwrap_or_default();
        assert_eq!(a.max_parallel, 3);
        assert_eq!(a.health_check, "task_states");
        assert_eq!(a.min_healthy_time, DurationNs::from_secs(10));
        let b = job.task_groups[1].migrate.clone().unwrap_or_default();
        assert_eq!((b.max_parallel, b.health_check.as_str()), (3, "checks"));

        let mut batch = job_from(serde_json::json!({
            "ID": "b", "Type": "batch", "TaskGroups": [{"Name": "a"}]
        }));
        batch.canonicalize();
        assert_eq!(batch.task_groups[0].migrate, None);
    }

    #[test]
    fn integration_blocks_get_nomads_defaults() {
        let mut job = job_from(serde_json::json!({
            "ID": "web",
            "TaskGroups": [{
                "Name": "a",
                "Count": 2,
                "Scaling": {"Max": 5},
                "Consul": {},
                "Disconnect": {"LostAfter": 60_000_000_000u64},
                "Tasks": [{
                    "Name": "t",
                    "Vault": {"Policies": ["p"]},
                    "VolumeMounts": [{"Volume": "v", "Destination": "/data"}],
                    "CSIPluginConfig": {"ID": "ebs", "Type": "node"},
                    "Resources": {"Devices": [{"Name": "nvidia/gpu"}], "NUMA": {}}
                }]
            }]
        }));
        job.canonicalize();
        let group = &job.task_groups[0];
        let scaling = group.scaling.clone().unwrap_or_default();
        assert_eq!((scaling.min, scaling.max), (Some(2), Some(5)));
        assert!(scaling.enabled);
        assert_eq!(scaling.r#type, "horizontal");
        assert_eq!(group.consul.clone().unwrap_or_default().cluster, "default");
        let disconnect = group.disconnect.clone().unwrap_or_default();
        assert!(disconnect.replace);
        assert_eq!(disconnect.reconcile, "best_score");
        let task = &group.tasks[0];
        let vault = task.vault.clone().unwrap_or_default();
        assert!(vault.env);
        assert_eq!(
            (
                vault.cluster.as_str(),
                vault.change_mode.as_str(),
                vault.change_signal.as_str()
            ),
            ("default", "restart", "SIGHUP")
        );
        assert_eq!(task.volume_mounts[0].propagation_mode, "private");
        let plugin = task.csi_plugin_config.clone().unwrap_or_default();
        assert_eq!(plugin.mount_dir, "/csi");
        assert_eq!(plugin.stage_publish_base_dir, "/local/csi");
        assert_eq!(plugin.health_timeout, DurationNs::from_secs(30));
        let resources = task.resources.clone().unwrap_or_default();
        assert_eq!(resources.devices[0].count, 1);
        assert_eq!(resources.numa.unwrap_or_default().affinity, "none");
    }

    #[test]
    fn a_group_update_takes_the_fields_it_leaves_out_from_the_job() {
        let mut job = serde_json::json!({
            "Update": {"MaxParallel": 2, "MinHealthyTime": 5_000_000_000_i64, "AutoRevert": true,
                       "Canary": null},
            "TaskGroups": [
                {"Name": "own", "update": {"canary": 1, "minHealthyTime": null}},
                {"Name": "inherits"}
            ]
        });
        merge_job_update_into_groups(&mut job);
        assert_eq!(
            job["TaskGroups"][0]["update"],
            serde_json::json!({
                "canary": 1, "minHealthyTime": 5_000_000_000_i64, "MaxParallel": 2,
                "AutoRevert": true
            })
        );
        assert!(job["TaskGroups"][1].get("Update").is_none());
        let mut job_json = serde_json::json!({
            "ID": "web", "Type": "service",
            "Update": {"MaxParallel": 2, "AutoRevert": true},
            "TaskGroups": [{"Name": "own", "Update": {"Canary": 1}}]
        });
        merge_job_update_into_groups(&mut job_json);
        let mut decoded = job_from(job_json);
        decoded.canonicalize();
        let update = decoded.task_groups[0].update.clone().unwrap_or_default();
        assert_eq!(
            (update.max_parallel, update.auto_revert, update.canary),
            (2, true, 1)
        );
    }
}
