//! What runs here: the one support table of jobspec features, and the register-time check
//! that reads it.
//!
//! Each [`Feature`] row names a block or argument, says whether drover runs it
//! ([`Status::Runs`]), runs it differently from Nomad ([`Status::RunsDifferently`], reported in
//! the register response's `Warnings`), or refuses it because something is missing
//! ([`Status::NotYet`]: a part of drover that is still to come; [`Status::NeedsMissing`]: a
//! system this agent cannot reach, such as Consul or Vault), and how to find it in a [`Job`].
//! [`check`] walks a job against every row; the API refuses a register whose report has
//! refusals, and `drover job validate` prints the same report. `docs/jobspec.md` is generated
//! from the table ([`reference_markdown`]) and a test keeps the two equal.
//!
//! Parsing is not affected: a spec using a refused feature still parses (and validates) as
//! Nomad parses it, so `/v1/jobs/parse` and `/v1/validate/job` answer as Nomad does; only a
//! register refuses it. Adding a feature is one row; a later change that makes a feature run
//! flips its row's status.
//!
//! Not here: Nomad's own validation rules (`validate`), or blocks the decoder refuses outright
//! because it does not decode them (`schema`).

use std::fmt::Write as _;

use drover_structs::{
    Consul, DEFAULT_INTEGRATION_CLUSTER, DurationNs, Job, MigrateStrategy, Service, Task,
    TaskGroup, VOLUME_TYPE_CSI, VOLUME_TYPE_HOST,
};
use serde_json::Value as JsonValue;

use crate::diagnostic::{Diagnostic, Position};

/// Whether drover runs a feature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Runs as Nomad runs it.
    Runs,
    /// Runs, in a way that differs from Nomad; a job using it is registered with a warning.
    RunsDifferently,
    /// Refused at register: the part of drover that runs it does not exist yet.
    NotYet,
    /// Refused at register: it needs a system this agent does not provide (Consul, Vault, a
    /// CSI or device plugin, ...).
    NeedsMissing,
}

impl Status {
    /// Whether a job using the feature is refused at register.
    pub fn is_refused(self) -> bool {
        matches!(self, Status::NotYet | Status::NeedsMissing)
    }

    fn label(self) -> &'static str {
        match self {
            Status::Runs => "runs",
            Status::RunsDifferently => "runs, differently from Nomad (warning)",
            Status::NotYet => "refused: not in drover yet",
            Status::NeedsMissing => "refused: needs a system drover does not provide",
        }
    }
}

/// Relative JSON field paths (`Templates[0]`, `Update`) where an owner uses a feature.
type Finder<T> = fn(&T) -> Vec<String>;

/// How to find a feature in a job: at job, group and task level (any may be absent).
#[derive(Clone, Copy)]
pub struct Detect {
    job: Option<Finder<Job>>,
    group: Option<Finder<TaskGroup>>,
    task: Option<Finder<Task>>,
}

impl Detect {
    /// Nothing to find: the feature is always available (rows that run).
    const NONE: Detect = Detect {
        job: None,
        group: None,
        task: None,
    };

    const fn job(finder: Finder<Job>) -> Detect {
        Detect {
            job: Some(finder),
            ..Detect::NONE
        }
    }

    const fn group(finder: Finder<TaskGroup>) -> Detect {
        Detect {
            group: Some(finder),
            ..Detect::NONE
        }
    }

    const fn task(finder: Finder<Task>) -> Detect {
        Detect {
            task: Some(finder),
            ..Detect::NONE
        }
    }

    const fn group_and_task(group: Finder<TaskGroup>, task: Finder<Task>) -> Detect {
        Detect {
            job: None,
            group: Some(group),
            task: Some(task),
        }
    }

    fn is_none(&self) -> bool {
        self.job.is_none() && self.group.is_none() && self.task.is_none()
    }
}

/// One row of the support table.
pub struct Feature {
    /// The jobspec block or argument, as `task > template` or `group > max_client_disconnect`.
    pub name: &'static str,
    pub status: Status,
    /// What drover does with it (rows that run) or what is missing (refused rows).
    pub reason: &'static str,
    /// What would make a refused feature run; empty for rows that run.
    pub would_run: &'static str,
    detect: Detect,
}

impl Feature {
    /// Whether the row can find its feature in a job (rows that run need not).
    pub fn is_detectable(&self) -> bool {
        !self.detect.is_none()
    }
}

const fn row(
    name: &'static str,
    status: Status,
    reason: &'static str,
    would_run: &'static str,
    detect: Detect,
) -> Feature {
    Feature {
        name,
        status,
        reason,
        would_run,
        detect,
    }
}

const fn runs(name: &'static str, reason: &'static str) -> Feature {
    row(name, Status::Runs, reason, "", Detect::NONE)
}

fn each<T>(items: &[T], field: &str) -> Vec<String> {
    (0..items.len())
        .map(|index| format!("{field}[{index}]"))
        .collect()
}

fn when(condition: bool, field: &str) -> Vec<String> {
    if condition {
        vec![field.to_string()]
    } else {
        Vec::new()
    }
}

/// Whether a free-form JSON value asks for anything: some leaf that is not null, empty, false
/// or zero. Nomad's canonical JSON writes empty objects for absent features (a group's
/// `Consul: {"Namespace": ""}`); those pass.
fn asks_for(value: &JsonValue) -> bool {
    match value {
        JsonValue::Null => false,
        JsonValue::Bool(flag) => *flag,
        JsonValue::Number(number) => number.as_f64().is_some_and(|number| number != 0.0),
        JsonValue::String(text) => !text.is_empty(),
        JsonValue::Array(items) => items.iter().any(asks_for),
        JsonValue::Object(entries) => entries.values().any(asks_for),
    }
}

/// [`asks_for`] of a typed block, read as the JSON it is sent as.
fn asks_for_block<T: serde::Serialize>(block: &T) -> bool {
    serde_json::to_value(block).is_ok_and(|value| asks_for(&value))
}

fn when_asked<T: serde::Serialize>(value: Option<&T>, field: &str) -> Vec<String> {
    when(value.is_some_and(asks_for_block), field)
}

fn when_any_asked<T: serde::Serialize>(values: &[T], field: &str) -> Vec<String> {
    values
        .iter()
        .enumerate()
        .filter(|(_, value)| asks_for_block(*value))
        .map(|(index, _)| format!("{field}[{index}]"))
        .collect()
}

/// A `consul` block asks for Consul when it names a namespace, a partition or a cluster other
/// than the default (the API fills `Cluster = "default"`, and Nomad's own job JSON carries an
/// empty `Consul` block for groups that have none).
fn when_consul_asked(consul: Option<&Consul>, field: &str) -> Vec<String> {
    when(
        consul.is_some_and(|consul| {
            !consul.namespace.is_empty()
                || !consul.partition.is_empty()
                || !(consul.cluster.is_empty() || consul.cluster == DEFAULT_INTEGRATION_CLUSTER)
        }),
        field,
    )
}

/// Services left to Consul: `provider = "consul"`, or no provider (Nomad's default is Consul).
fn consul_services(services: &[Service]) -> Vec<String> {
    services_where(services, "", |service| {
        service.provider.is_empty() || service.provider == "consul"
    })
}

/// `Services[i]<suffix>` for each service `asks` is true of.
fn services_where(
    services: &[Service],
    suffix: &str,
    asks: impl Fn(&Service) -> bool,
) -> Vec<String> {
    services
        .iter()
        .enumerate()
        .filter(|(_, service)| asks(service))
        .map(|(index, _)| format!("Services[{index}]{suffix}"))
        .collect()
}

/// [`services_where`] on the `connect` blocks of services that have one.
fn connects_where(
    services: &[Service],
    suffix: &str,
    asks: impl Fn(&drover_structs::ConsulConnect) -> bool,
) -> Vec<String> {
    services_where(services, suffix, |service| {
        service.connect.as_ref().is_some_and(&asks)
    })
}

/// Check arguments only Consul reads: `notes`, `expose`, `advertise`.
fn consul_only_check_fields(services: &[Service]) -> Vec<String> {
    let mut found = Vec::new();
    for (index, service) in services.iter().enumerate() {
        for (check_index, check) in service.checks.iter().enumerate() {
            let at = format!("Services[{index}].Checks[{check_index}]");
            if !check.notes.is_empty() {
                found.push(format!("{at}.Notes"));
            }
            if check.expose {
                found.push(format!("{at}.Expose"));
            }
            if !check.advertise.is_empty() {
                found.push(format!("{at}.Advertise"));
            }
        }
    }
    found
}

fn service_identity(services: &[Service]) -> Vec<String> {
    services_where(services, ".Identity", |service| service.identity.is_some())
}

/// The group services whose `connect` asks for a sidecar proxy.
fn connect_sidecars(group: &TaskGroup) -> Vec<String> {
    connects_where(&group.services, ".Connect.SidecarService", |connect| {
        connect.has_sidecar()
    })
}

/// A task's services with a `connect` block (Nomad injects sidecars for group services only).
fn task_service_connect(task: &Task) -> Vec<String> {
    connects_where(&task.services, ".Connect", |_| true)
}

/// `connect { native = true }`.
fn connect_native(group: &TaskGroup) -> Vec<String> {
    connects_where(&group.services, ".Connect.Native", |connect| connect.native)
}

/// `connect { gateway { … } }`.
fn connect_gateway(group: &TaskGroup) -> Vec<String> {
    connects_where(&group.services, ".Connect.Gateway", |connect| {
        connect.gateway.is_some()
    })
}

/// `sidecar_task` fields the built-in proxy cannot honour: another driver, a driver config,
/// a user, volume mounts, extra identities.
fn connect_sidecar_task_unsupported(group: &TaskGroup) -> Vec<String> {
    let mut found = Vec::new();
    for (index, service) in group.services.iter().enumerate() {
        let Some(sidecar_task) = service
            .connect
            .as_ref()
            .and_then(|connect| connect.sidecar_task.as_ref())
        else {
            continue;
        };
        let at = format!("Services[{index}].Connect.SidecarTask");
        if !sidecar_task.driver.is_empty()
            && sidecar_task.driver != drover_structs::connect::CONNECT_PROXY_DRIVER
        {
            found.push(format!("{at}.Driver"));
        }
        if !sidecar_task.config.is_empty() {
            found.push(format!("{at}.Config"));
        }
        if !sidecar_task.user.is_empty() {
            found.push(format!("{at}.User"));
        }
        if !sidecar_task.volume_mounts.is_empty() {
            found.push(format!("{at}.VolumeMounts"));
        }
        if !sidecar_task.identities.is_empty() {
            found.push(format!("{at}.Identities"));
        }
    }
    found
}

/// Proxy settings the built-in proxy does not have: `transparent_proxy`, `expose`, an
/// Envoy `config`, and upstreams through peers, partitions, mesh gateways, Unix sockets or
/// with their own Envoy config.
fn connect_proxy_unsupported(group: &TaskGroup) -> Vec<String> {
    let mut found = Vec::new();
    for (index, service) in group.services.iter().enumerate() {
        let Some(proxy) = service
            .connect
            .as_ref()
            .and_then(|connect| connect.sidecar_service.as_ref())
            .and_then(|sidecar| sidecar.proxy.as_ref())
        else {
            continue;
        };
        let at = format!("Services[{index}].Connect.SidecarService.Proxy");
        if proxy.transparent_proxy.is_some() {
            found.push(format!("{at}.TransparentProxy"));
        }
        if proxy.expose.is_some() {
            found.push(format!("{at}.Expose"));
        }
        if !proxy.config.is_empty() {
            found.push(format!("{at}.Config"));
        }
        for (upstream_index, upstream) in proxy.upstreams.iter().enumerate() {
            let at = format!("{at}.Upstreams[{upstream_index}]");
            let unsupported = [
                ("DestinationPeer", !upstream.destination_peer.is_empty()),
                (
                    "DestinationPartition",
                    !upstream.destination_partition.is_empty(),
                ),
                ("DestinationType", !upstream.destination_type.is_empty()),
                (
                    "LocalBindSocketPath",
                    !upstream.local_bind_socket_path.is_empty(),
                ),
                (
                    "LocalBindSocketMode",
                    !upstream.local_bind_socket_mode.is_empty(),
                ),
                ("MeshGateway", !upstream.mesh_gateway.mode.is_empty()),
                ("Config", !upstream.config.is_empty()),
            ];
            for (field, used) in unsupported {
                if used {
                    found.push(format!("{at}.{field}"));
                }
            }
        }
    }
    found
}

/// Task kinds other than the sidecar proxy of one of the group's sidecar services, run by the
/// built-in proxy driver.
fn unsupported_task_kinds(group: &TaskGroup) -> Vec<String> {
    group
        .tasks
        .iter()
        .enumerate()
        .filter(|(_, task)| !task.kind.is_empty())
        .filter(|(_, task)| {
            let is_sidecar_of_group_service = drover_structs::connect::sidecar_service_of(task)
                .is_some_and(|name| {
                    group.services.iter().any(|service| {
                        service.name == name
                            && service
                                .connect
                                .as_ref()
                                .is_some_and(|connect| connect.has_sidecar())
                    })
                });
            !(is_sidecar_of_group_service
                && task.driver == drover_structs::connect::CONNECT_PROXY_DRIVER)
        })
        .map(|(index, _)| format!("Tasks[{index}].Kind"))
        .collect()
}

/// Update settings of a system job's groups that its rollout would not apply: a system job
/// rolls by the job-level `max_parallel` and `stagger` alone (Nomad up to 1.10), so a group's
/// own rolling settings, canaries, automatic promotion and revert, and the health settings
/// (non-default values) would have no effect.
fn system_update_unapplied(job: &Job) -> Vec<String> {
    if job.r#type != drover_structs::JOB_TYPE_SYSTEM {
        return Vec::new();
    }
    let job_rolling = job
        .update
        .as_ref()
        .filter(|update| update.max_parallel > 0 && update.stagger.as_nanos() > 0)
        .map(|update| (update.max_parallel, update.stagger));
    let defaults = drover_structs::canonicalize::default_update_strategy();
    let mut found = Vec::new();
    for (index, group) in job.task_groups.iter().enumerate() {
        let Some(update) = group.update.as_ref() else {
            continue;
        };
        let path = format!("TaskGroups[{index}].Update");
        let own_rolling = match job_rolling {
            Some(rolling) => (update.max_parallel, update.stagger) != rolling,
            None => update.max_parallel > 0,
        };
        if own_rolling {
            found.push(path.clone());
        }
        let health_check = update.health_check.as_str();
        let unapplied = [
            ("Canary", update.canary > 0),
            ("AutoRevert", update.auto_revert),
            ("AutoPromote", update.auto_promote),
            (
                "HealthCheck",
                !health_check.is_empty() && health_check != defaults.health_check,
            ),
            (
                "MinHealthyTime",
                !update.min_healthy_time.is_zero()
                    && update.min_healthy_time != defaults.min_healthy_time,
            ),
            (
                "HealthyDeadline",
                !update.healthy_deadline.is_zero()
                    && update.healthy_deadline != defaults.healthy_deadline,
            ),
            (
                "ProgressDeadline",
                update
                    .progress_deadline
                    .is_some_and(|deadline| Some(deadline) != defaults.progress_deadline),
            ),
        ];
        for (field, set) in unapplied {
            if set {
                found.push(format!("{path}.{field}"));
            }
        }
    }
    found
}

/// Nomad's default `migrate` block (the API gives one to every service group).
/// The fields of a task's networks Nomad does not use (everything but the first network's
/// ports and mbits), as field paths under the task.
fn task_network_ignored_fields(networks: &[drover_structs::NetworkResource]) -> Vec<String> {
    let mut found = Vec::new();
    for (index, network) in networks.iter().enumerate() {
        let path = format!("Resources.Networks[{index}]");
        if index > 0 {
            found.push(path);
            continue;
        }
        found.extend(when(
            !matches!(network.mode.as_str(), "" | "host"),
            &format!("{path}.Mode"),
        ));
        for (field, value) in [
            ("Device", &network.device),
            ("CIDR", &network.cidr),
            ("IP", &network.ip),
            ("Hostname", &network.hostname),
        ] {
            found.extend(when(!value.is_empty(), &format!("{path}.{field}")));
        }
        found.extend(when_asked(network.dns.as_ref(), &format!("{path}.DNS")));
        found.extend(when_asked(network.cni.as_ref(), &format!("{path}.CNI")));
        for (field, ports) in [
            ("ReservedPorts", &network.reserved_ports),
            ("DynamicPorts", &network.dynamic_ports),
        ] {
            for (port_index, port) in ports.iter().enumerate() {
                let port_path = format!("{path}.{field}[{port_index}]");
                // A dynamic port's `to = -1` asks for the host port, which is what a task
                // network's port is anyway.
                found.extend(when(
                    port.to != 0 && !(port.to == -1 && field == "DynamicPorts"),
                    &format!("{port_path}.To"),
                ));
                found.extend(when(
                    !matches!(port.host_network.as_str(), "" | "default"),
                    &format!("{port_path}.HostNetwork"),
                ));
                found.extend(when(
                    port.ignore_collision,
                    &format!("{port_path}.IgnoreCollision"),
                ));
            }
        }
    }
    found
}

fn is_default_migrate(migrate: &MigrateStrategy) -> bool {
    migrate.max_parallel == 1
        && migrate.health_check == "checks"
        && migrate.min_healthy_time == DurationNs::from_secs(10)
        && migrate.healthy_deadline == DurationNs::from_mins(5)
}

const CONSUL: &str = "runs once drover integrates with Consul";
const VAULT: &str = "runs once drover integrates with Vault";
const CSI: &str = "runs once drover has CSI plugins";
const NO_AUTOSCALER: &str = "runs once drover has dynamic application sizing";

/// Nomad docker task config keys the docker driver does not implement (refused by name).
const DOCKER_UNIMPLEMENTED_KEYS: &[&str] = &[
    "mac_address",
    "cpu_hard_limit",
    "cpu_cfs_period",
    "storage_opt",
    "userns_mode",
    "isolation",
    "healthchecks",
    "network_aliases",
    "ipv4_address",
    "ipv6_address",
    "advertise_ipv6_address",
    "volume_driver",
];

/// The support table. Order: job, group, task, then nested blocks; the generated reference
/// page keeps it.
pub static FEATURES: &[Feature] = &[
    // ---- job ----
    runs(
        "job",
        "id, name, type (service, batch, system, sysbatch), priority, datacenters, node_pool, region and namespace as Nomad stores them",
    ),
    runs(
        "job > meta",
        "interpolated and exported to tasks as NOMAD_META_*",
    ),
    runs(
        "constraint",
        "job, group and task level: attribute, operator and value, or a shortcut (distinct_hosts, distinct_property, regexp, version, semver, set_contains, set_contains_all, set_contains_any, is_set, is_not_set), checked against node attributes",
    ),
    runs(
        "affinity",
        "job, group and task level: attribute, operator, value and weight, or a shortcut (regexp, version, semver, set_contains, set_contains_all, set_contains_any); scored as Nomad scores them",
    ),
    runs(
        "spread",
        "job and group level: attribute, weight and target blocks with percent; scored as Nomad scores them",
    ),
    row(
        "job > all_at_once",
        Status::RunsDifferently,
        "drover's plan applier commits the placements that fit; all_at_once does not make a partial plan fail",
        "",
        Detect::job(|job| when(job.all_at_once, "AllAtOnce")),
    ),
    runs(
        "update (Nomad's default)",
        "a changed service group rolls out through a deployment one allocation at a time, each healthy by its checks for 10s within 5m, the deployment failing without progress for 10m, as Nomad's default update block",
    ),
    runs(
        "update { max_parallel = 0 }",
        "a changed group is replaced all at once, as Nomad does with rolling updates disabled",
    ),
    runs(
        "update",
        "service groups roll out through deployments: max_parallel at a time, health_check (checks, task_states, manual through /v1/deployment/allocation-health), min_healthy_time, healthy_deadline, progress_deadline (the deployment fails without progress), canary with canary_tags until promoted (auto_promote, or `deployment promote`), auto_revert to the latest stable version; stagger only paces system jobs in Nomad and is kept, as there",
    ),
    runs(
        "update (system jobs)",
        "a changed system job is replaced max_parallel nodes at a time, as the job-level update block says, each further wave a stagger after the last (a rolling-update evaluation whose Wait is the stagger), as Nomad up to 1.10 rolls system jobs; in-place updates are not limited and no deployment is made",
    ),
    row(
        "update (system jobs) > group settings",
        Status::NotYet,
        "a system job rolls by its job-level max_parallel and stagger alone, as Nomad up to 1.10 does; a group's own max_parallel or stagger, canary, auto_revert, auto_promote, health_check, min_healthy_time, healthy_deadline and progress_deadline would not be applied",
        "runs once system jobs roll out through deployments (as Nomad 1.11 does); until then set max_parallel and stagger in the job's update block and leave the rest at their defaults",
        Detect::job(system_update_unapplied),
    ),
    runs(
        "periodic",
        "cron and crons (Nomad's 5, 6 and 7-field expressions and @ aliases), time_zone (IANA), prohibit_overlap and enabled: children <job>/periodic-<unix> launched on schedule, a launch missed while no server ran caught up once at start, `job periodic force`",
    ),
    runs(
        "parameterized",
        "payload (required, optional, forbidden; at most 16 KiB), meta_required and meta_optional: `job dispatch` runs children <job>/dispatch-<unix>-<hex> with the payload and meta",
    ),
    row(
        "multiregion",
        Status::NeedsMissing,
        "needs federated regions; drover runs a single region",
        "runs once drover federates regions",
        Detect::job(|job| when_asked(job.multiregion.as_ref(), "Multiregion")),
    ),
    runs(
        "job > ui (description, link: label, url)",
        "stored with the job, returned by the API and shown on the job's page of the web UI (/ui/)",
    ),
    // ---- group ----
    runs("group > count", "the number of allocations"),
    runs(
        "group > meta",
        "interpolated and exported to tasks as NOMAD_META_*",
    ),
    runs(
        "restart",
        "group and task level: attempts, interval, delay and mode; drover adds backoff_factor and max_delay",
    ),
    runs(
        "reschedule",
        "job and group level: attempts, interval, delay, delay_function, max_delay and unlimited; failed allocations are replaced on another node by the policy",
    ),
    runs(
        "network",
        "host networking with static and dynamic ports (port, to, host_network), and hostname",
    ),
    runs(
        "group > shutdown_delay",
        "tasks are told to stop that long before they are killed",
    ),
    runs(
        "ephemeral_disk > size",
        "the disk an allocation reserves on its node",
    ),
    runs(
        "ephemeral_disk > sticky",
        "a replacement allocation is placed on its previous allocation's node when possible, waits for it to stop, and there takes over its alloc/data and each task's local/ (moved, not copied)",
    ),
    row(
        "ephemeral_disk > migrate",
        Status::NotYet,
        "a replacement on the same node takes the previous allocation's data as with sticky, but the client does not fetch it from another node",
        "runs once the client fetches the previous allocation's data from its node",
        Detect::group(|group| {
            when(
                group
                    .ephemeral_disk
                    .as_ref()
                    .is_some_and(|disk| disk.migrate),
                "EphemeralDisk.Migrate",
            )
        }),
    ),
    row(
        "migrate (Nomad's default)",
        Status::Runs,
        "allocations leave a draining node max_parallel at a time, each group's count minus max_parallel kept running with health reported by the client (task states or checks, min_healthy_time, healthy_deadline); batch allocations finish until the deadline, system ones go last",
        "",
        Detect::group(|group| {
            when(
                group
                    .migrate
                    .as_ref()
                    .is_some_and(|migrate| asks_for_block(migrate) && is_default_migrate(migrate)),
                "Migrate",
            )
        }),
    ),
    row(
        "migrate",
        Status::Runs,
        "allocations leave a draining node max_parallel at a time, each group's count minus max_parallel kept running with health reported by the client (task states or checks, min_healthy_time, healthy_deadline); batch allocations finish until the deadline, system ones go last",
        "",
        Detect::group(|group| {
            when(
                group
                    .migrate
                    .as_ref()
                    .is_some_and(|migrate| asks_for_block(migrate) && !is_default_migrate(migrate)),
                "Migrate",
            )
        }),
    ),
    row(
        "group > max_client_disconnect, disconnect { lost_after, replace, reconcile }",
        Status::Runs,
        "an allocation on a node that misses its heartbeats turns unknown (the node disconnected, not down); a service or batch one is replaced by its reschedule policy unless replace = false, a system or sysbatch one waits on its node; unknown past lost_after it is lost and the node down; a client back before then keeps it (system jobs) or it or its replacement as reconcile says (best_score, keep_original, keep_replacement, longest_running), with a Reconnected task event",
        "",
        Detect::NONE,
    ),
    runs(
        "group > stop_after_client_disconnect, disconnect > stop_on_client_after",
        "a client that has had no answer from a server for that long stops the group's allocations itself (service and batch jobs); the servers mark them lost when the node goes down and place their replacements only once the delay and the tasks' kill_timeout have passed",
    ),
    runs(
        "group > max_run_duration",
        "batch and sysbatch jobs: an allocation still running that long after it was created is stopped by its client, as Nomad's: its tasks get a Killing event \"allocation exceeded max_run_duration\" (a poststop task that has not started never runs) and it is complete with that description, so it is not rescheduled; the deadline is the allocation's CreateTime plus the duration, persisted with the client's state, so neither a task restart nor an agent restart moves it",
    ),
    runs(
        "network > mode (bridge, none, cni/*)",
        "each allocation gets a network namespace of its own, made before any task starts (prestart tasks too), kept across agent restarts (made again if it was lost) and removed after its last task stopped and on GC; bridge: Nomad's CNI conflist (loopback, bridge on the client's bridge_network_name and bridge_network_subnet with host-local IPAM, firewall, portmap with snat), the group's ports mapped from the host port to `to`, TCP and UDP, the address in the allocation's NetworkStatus and NOMAD_ALLOC_IP_<label>; none: loopback only; cni/<name>: the conflist <name> from the client's cni_config_dir; raw_exec and exec tasks run inside it",
    ),
    runs(
        "network > dns, cni",
        "dns { servers searches options } is written into the allocation's resolv.conf, which exec tasks see at /etc/resolv.conf (raw_exec tasks share the host's files, as in Nomad); cni { args } is added to the plugins' CNI_ARGS",
    ),
    runs(
        "docker task in a group network (bridge, none, cni/*)",
        "as Nomad: the docker driver starts a pause container (nomad_init_<alloc_id>, from the client's infra_image) that owns the group's namespace, which CNI sets up; docker tasks join it with network_mode container:<id> (their own network_mode wins), exec and raw_exec tasks of the group enter the same namespace, so they talk over localhost; the pause container is removed with the network",
    ),
    row(
        "network > device, cidr, ip",
        Status::NotYet,
        "drover places ports on the node's default address and does not pin a network device or address",
        "runs once drover fingerprints and schedules node networks",
        Detect::group(|group| {
            let mut found = Vec::new();
            for (index, network) in group.networks.iter().enumerate() {
                for (field, value) in [
                    ("Device", &network.device),
                    ("CIDR", &network.cidr),
                    ("IP", &network.ip),
                ] {
                    found.extend(when(
                        !value.is_empty(),
                        &format!("Networks[{index}].{field}"),
                    ));
                }
            }
            found
        }),
    ),
    runs(
        "network > port > ignore_collision",
        "as Nomad: a static port of a host-mode group network that sets it is placed even where the node already gives that port to another allocation (or reserves it), for tasks that share it (SO_REUSEPORT); it still counts as used for every port that does not set it; refused in any other network mode",
    ),
    runs(
        "group > prevent_reschedule_on_lost",
        "as in Nomad 1.8 and 1.9, where it is the older name of disconnect { replace = false }: an allocation on a node that misses its heartbeats, or goes down, is kept (unknown) and not replaced (Nomad 1.10 and later drop the key)",
    ),
    runs(
        "service (provider = \"nomad\")",
        "group and task services are registered in drover's built-in catalog (Nomad's native service discovery) while the task runs, with name, port (label or number), address, address_mode, tags and canary_tags, and read through /v1/services and /v1/service/<name>; meta, canary_meta, enable_tag_override, tagged_addresses, weights (passing, warning), on_update and cluster stay with the job, as Nomad's own catalog has no place for them; a service's check_restart (limit, grace, ignore_warnings) only acts through its checks (service > check)",
    ),
    row(
        "service (provider = \"consul\", Nomad's default)",
        Status::RunsDifferently,
        "this agent has no Consul: the service is registered in drover's built-in catalog (/v1/service/<name>) instead of Consul, so only Nomad-native service discovery finds it",
        "",
        Detect::group_and_task(
            |group| consul_services(&group.services),
            |task| consul_services(&task.services),
        ),
    ),
    runs(
        "service > check",
        "the client runs `http` (plain or `protocol = \"https\"`, verified against the system's roots unless `tls_skip_verify`, with `tls_server_name` as the name verified), `tcp`, `grpc` (the standard grpc.health.v1 Health/Check with `grpc_service`, in plain HTTP/2 or with `grpc_use_tls` over TLS, `tls_skip_verify` and `tls_server_name` as for https; SERVING passes) and `script` checks (inside the task, as `alloc exec` runs), with `check_restart`, for `nomad` and `consul` services alike; an HTTP status maps to a result by Nomad's rules for a `nomad` service (below 400 passes) and by Consul's for a `consul` one (2xx passes, 429 warns)",
    ),
    runs(
        "service > check (arguments)",
        "method, header, body, initial_status, success_before_passing, failures_before_critical and failures_before_warning run as in Nomad (with Consul's counters for consul services)",
    ),
    row(
        "service > check > notes, expose, advertise",
        Status::RunsDifferently,
        "kept with the job: notes is Consul's free text, expose and advertise address Consul Connect's proxy and agent, which this agent does not run",
        "",
        Detect::group_and_task(
            |group| consul_only_check_fields(&group.services),
            |task| consul_only_check_fields(&task.services),
        ),
    ),
    runs(
        "service > check (grpc)",
        "the standard grpc.health.v1 Health/Check with grpc_service, in plain HTTP/2 or with grpc_use_tls over TLS (tls_skip_verify, tls_server_name as for https); SERVING passes",
    ),
    row(
        "service > identity",
        Status::NeedsMissing,
        "a service's identity is for Consul, which this agent does not run",
        CONSUL,
        Detect::group_and_task(
            |group| service_identity(&group.services),
            |task| service_identity(&task.services),
        ),
    ),
    row(
        "service > connect",
        Status::RunsDifferently,
        "no Consul and no Envoy: a group service's `connect { sidecar_service { proxy { local_service_address local_service_port upstreams { destination_name destination_namespace datacenter local_bind_address local_bind_port } } tags port disable_default_tcp_check } }` gets the task connect-proxy-<service> (kind connect-proxy:<service>, lifecycle prestart sidecar, 250 MHz and 128 MB unless sidecar_task says otherwise) run by the built-in driver \"connect_proxy\" (the agent's own binary, in the group's network namespace, under its shim and cgroup, logs through alloc logs), a dynamic port connect-proxy-<service>, NOMAD_UPSTREAM_{ADDR,IP,PORT}_<name> in every task of the group, and the registration <service>-sidecar-proxy in drover's built-in catalog, with Nomad's default check \"Connect Sidecar Listening\" (TCP on the sidecar's host port every 10 s, in the allocation's checks) unless disable_default_tcp_check (sidecar_service meta stays with the job, as the catalog has no meta)",
        "",
        Detect::group(connect_sidecars),
    ),
    row(
        "service > connect (task service)",
        Status::NotYet,
        "Nomad injects Connect sidecars for group services only",
        "runs as a group service: move the service with its connect block to the group",
        Detect::task(task_service_connect),
    ),
    row(
        "service > connect > native",
        Status::NotYet,
        "a Connect-native task needs the mesh's certificates handed to the task itself",
        "runs once drover gives Connect-native tasks their mesh certificates",
        Detect::group(connect_native),
    ),
    row(
        "service > connect > gateway",
        Status::NotYet,
        "ingress, terminating and mesh gateways are Envoy roles drover's proxy does not have",
        "runs once drover's proxy can act as a gateway",
        Detect::group(connect_gateway),
    ),
    row(
        "service > connect > sidecar_task > driver, config, user, volume_mount, identity",
        Status::NotYet,
        "the sidecar is drover's built-in proxy (driver \"connect_proxy\", the agent's own binary): another driver or image, a driver config, a user, volume mounts and extra identities have nothing to act on",
        "runs without them: remove them from sidecar_task (name, resources, env, meta, kill_timeout, kill_signal, shutdown_delay and logs apply)",
        Detect::group(connect_sidecar_task_unsupported),
    ),
    row(
        "service > connect > sidecar_service > proxy > transparent_proxy, expose, config, upstreams (peer, partition, type, socket, mesh_gateway, config)",
        Status::NotYet,
        "drover's proxy listens on its public port and one local port per upstream; it has no transparent mode, exposed check paths, Envoy configuration, peers, partitions, mesh gateways or Unix-socket upstreams",
        "runs once drover's proxy has them; remove them to run the sidecar without",
        Detect::group(connect_proxy_unsupported),
    ),
    row(
        "consul",
        Status::NeedsMissing,
        "needs a Consul cluster",
        CONSUL,
        Detect::group_and_task(
            |group| when_consul_asked(group.consul.as_ref(), "Consul"),
            |task| when_consul_asked(task.consul.as_ref(), "Consul"),
        ),
    ),
    runs(
        "group > volume (host)",
        "type = \"host\" with source, read_only and per_alloc (each allocation mounts <source>[<index>]); placed only on nodes whose client declares the volume (host_volume), writable unless the request is read-only",
    ),
    row(
        "group > volume (host) > sticky, access_mode, attachment_mode",
        Status::NotYet,
        "sticky, access_mode and attachment_mode act on Nomad 1.10's dynamic host volumes (made by /v1/volume/host/create and claimed per node); drover has only the client's static host_volume ones, which take none of them",
        "runs once drover has dynamic host volumes",
        Detect::group(|group| {
            group
                .volumes
                .iter()
                .filter(|(_, volume)| volume.r#type == VOLUME_TYPE_HOST)
                .flat_map(|(name, volume)| {
                    [
                        (volume.sticky, "Sticky"),
                        (!volume.access_mode.is_empty(), "AccessMode"),
                        (!volume.attachment_mode.is_empty(), "AttachmentMode"),
                    ]
                    .into_iter()
                    .filter(|(asked, _)| *asked)
                    .map(move |(_, field)| format!("Volumes.{name}.{field}"))
                })
                .collect()
        }),
    ),
    row(
        "group > volume (csi)",
        Status::NeedsMissing,
        "needs a CSI plugin",
        CSI,
        Detect::group(|group| {
            group
                .volumes
                .iter()
                .filter(|(_, volume)| volume.r#type == VOLUME_TYPE_CSI)
                .map(|(name, _)| format!("Volumes.{name}"))
                .collect()
        }),
    ),
    runs(
        "group > scaling",
        "min and max bound the group's count at register and on every scale (`job scale`, /v1/job/<id>/scale); enabled, type and policy are stored as written and served at /v1/scaling/policies for an external autoscaler, as Nomad serves them",
    ),
    row(
        "task > scaling",
        Status::NeedsMissing,
        "task scaling \"cpu\"/\"mem\" policies are for Nomad Enterprise's dynamic application sizing",
        NO_AUTOSCALER,
        Detect::task(|task| when_any_asked(&task.scaling_policies, "ScalingPolicies")),
    ),
    // ---- task ----
    runs(
        "task",
        "driver (raw_exec, exec, docker), user, config, env, meta, kill_timeout, kill_signal, leader, shutdown_delay",
    ),
    runs(
        "task > config (raw_exec)",
        "command, args, pids_limit (a drover extension: the task cgroup's pids.max), denied_envvars (Nomad 1.10: names or `*` globs removed from the task's environment and from what alloc exec runs in it, together with the client's plugin \"raw_exec\" { config { denied_envvars } }); other keys fail the task naming them",
    ),
    runs(
        "task > config (docker)",
        "image (pulled with auth (the task's, else the client's auth config file or credential helper) and auth_soft_fail, force_pull, image_pull_timeout), command, args, entrypoint, work_dir, ports (group network labels, published on the allocated host ports), network_mode (bridge, host, none, container:), hostname, dns_servers, dns_search_domains, dns_options, extra_hosts, labels, volumes and mount (and its pre-1.0 list form mounts; bind, volume, tmpfs; host paths, a bare volumes name being the task dir's as in Nomad, confined to the allocation (resolved beneath it by the kernel, so a planted symlink cannot lead out) and named volumes refused unless the client enables volumes), privileged (client-gated), cap_add (client allow_caps), cap_drop, devices, shm_size, ulimit, sysctl, pids_limit, memory_hard_limit (the container's hard limit, memory then its reservation, as Nomad), cpuset_cpus (in place of the cores' cpuset), tty, interactive, readonly_rootfs, init, ipc_mode, pid_mode, uts_mode (each only where the client's allowed_modes or allow_privileged allows it, as Nomad 2.0.4), group_add, security_opt, runtime (one of the client's allow_runtimes, Nomad's runc and nvidia by default), load (an image archive in local/, from an artifact, loaded instead of pulled), logging (type and config of the engine's log driver, json-file with two files of 2m by default); /alloc, /local and /secrets mounted (resolved beneath the allocation as the host paths); logs in the allocation's log files whatever the log driver",
    ),
    row(
        "task > config (docker) > other keys",
        Status::NotYet,
        "Nomad docker config keys the docker driver does not implement (mac_address, cpu_hard_limit, cpu_cfs_period, storage_opt, userns_mode, isolation, healthchecks, network_aliases, ipv4_address, ipv6_address, advertise_ipv6_address, volume_driver)",
        "runs once the docker driver implements the key",
        Detect::task(|task| {
            if task.driver != "docker" {
                return Vec::new();
            }
            DOCKER_UNIMPLEMENTED_KEYS
                .iter()
                .filter(|key| task.config.contains_key(**key))
                .map(|key| format!("Config.{key}"))
                .collect()
        }),
    ),
    runs(
        "task > config (docker) > port_map",
        "with a task-level network: each of its ports is published on its allocated host address and port, to the container port port_map names for its label (else the same port), and the container's NOMAD_PORT_<label> is that container port; without a task-level network the task fails as in Nomad ('port_map' cannot map group network ports, use 'ports' instead)",
    ),
    runs(
        "resources",
        "cpu, cores, memory and memory_max, enforced by cgroups",
    ),
    runs(
        "lifecycle",
        "hook (prestart, poststart, poststop) and sidecar, in Nomad's order",
    ),
    runs(
        "logs",
        "rotation of stdout and stderr (max_files, max_file_size), or no logs when disabled (enabled = false)",
    ),
    runs(
        "dispatch_payload",
        "file: where the payload of a dispatched job is written in the task's local dir",
    ),
    runs(
        "task > kind (connect-proxy)",
        "connect-proxy:<service> marks the sidecar proxy of a group service's connect block: injected at register when the group has none, or the group's own task of that kind with driver \"connect_proxy\"",
    ),
    row(
        "task > kind",
        Status::NotYet,
        "other task kinds mark Consul Connect native or gateway tasks, which drover does not run",
        "runs as the connect-proxy:<service> task of a group service with connect { sidecar_service {} } and driver \"connect_proxy\" (or no task at all: it is injected)",
        Detect::group(unsupported_task_kinds),
    ),
    row(
        "restart > render_templates",
        Status::RunsDifferently,
        "drover renders templates again before every start, restarts included, which is what render_templates = true asks; without it drover re-renders on a restart too, where Nomad keeps the previous run's files",
        "",
        Detect::group_and_task(
            |group| {
                when(
                    group
                        .restart_policy
                        .as_ref()
                        .is_some_and(|policy| policy.render_templates),
                    "RestartPolicy.RenderTemplates",
                )
            },
            |task| {
                when(
                    task.restart_policy
                        .as_ref()
                        .is_some_and(|policy| policy.render_templates),
                    "RestartPolicy.RenderTemplates",
                )
            },
        ),
    ),
    row(
        "template",
        Status::RunsDifferently,
        "rendered before start with Go template syntax and consul-template's functions (env, file, parse/encode, string, list, arithmetic, a sprig_* subset); templates reading files (file, source) are rendered again every 250 ms; unless once, a changed output is written after its wait (the template's own, else the client's template { wait }: 5s and 4m by default; the first render is written at once) and change_mode noop, restart, signal or script applied after splay; templates reading Nomad Variables (nomadVar, nomadVarExists, nomadVarList) or the built-in service catalog (nomadService with tag, ?ns= and choose forms, nomadServices) read them with the task's workload identity, wait for a missing nomadVar, and watch them with blocking queries (the client's block_query_wait, 5m by default), rendering again as soon as a change is answered; env-only templates do not change while the task runs; a query naming another region fails the render; Consul and Vault functions (key, service, secret, …) are refused naming what they need",
        "",
        Detect::task(|task| each(&task.templates, "Templates")),
    ),
    runs(
        "template (arguments)",
        "source, destination, data, change_mode, change_signal, once, splay, perms, uid, gid, left_delimiter, right_delimiter and env run as in Nomad",
    ),
    runs(
        "template > wait > min, max",
        "after the first render (written at once), a changed output is written, and its change_mode applied, once it has stayed the same for min or changes have been held for max (four times min when max is left out), within the client's wait_bounds, as consul-template's quiescence; a template without its own wait takes the client's template { wait } (Nomad's default: 5s and 4m)",
    ),
    runs(
        "template > error_on_missing_key",
        "a missing map key fails the render, naming the key and its line:column; without it a missing key renders \"<no value>\" as in Nomad",
    ),
    row(
        "template > vault_grace",
        Status::RunsDifferently,
        "without Vault (refused wherever a task asks for it), vault_grace has nothing to act on, as in Nomad without Vault",
        "",
        Detect::task(|task| {
            let mut found = Vec::new();
            for (index, template) in task.templates.iter().enumerate() {
                found.extend(when(
                    template.vault_grace.0 != 0,
                    &format!("Templates[{index}].VaultGrace"),
                ));
            }
            found
        }),
    ),
    runs(
        "template > change_script",
        "command and args run inside the task (its namespaces, cgroup, user and environment, the path of alloc exec) when the template changes, bounded by timeout; the \"Task hook message\" / \"Task hook failed\" events as Nomad, and fail_on_error kills the task",
    ),
    runs(
        "template > change_script > run_on_first_render",
        "the change_script also runs once the task has started after the first render (and after a restart when render_templates renders again), as Nomad's poststart runs it",
    ),
    row(
        "artifact",
        Status::Runs,
        "fetched before the task starts over http or https (with headers; https verified against the system's roots unless `insecure`), from local files or with git (`insecure` turns off git's certificate check too), checksummed (a digest, or `checksum = \"file:<url or path>\"` naming a checksum file in BSD or GNU form) and unpacked as options say, and cached per node; s3, gcs and hg sources fail the download, naming what is missing",
        "",
        Detect::task(|task| each(&task.artifacts, "Artifacts")),
    ),
    runs(
        "artifact > chown",
        "what the artifact placed (its destination and everything beneath it, or the one file in mode file) is given to the task's user, following no symlink, when the agent runs as root and the task names a user, as Nomad does",
    ),
    row(
        "identity",
        Status::Runs,
        "each task's identities are signed by the servers and delivered as Nomad delivers them (NOMAD_TOKEN / secrets/nomad_token for the default one, NOMAD_TOKEN_<name> / secrets/nomad_<name>.jwt for named ones, filepath), renewed before a ttl runs out with change_mode applied; every task has the task API at secrets/api.sock",
        "",
        Detect::task(|task| {
            let mut found = when(task.identity.is_some(), "Identity");
            found.extend(each(&task.identities, "Identities"));
            found
        }),
    ),
    runs(
        "identity > aud",
        "the audiences of the identity's JWT (the default identity's is nomadproject.io)",
    ),
    row(
        "identity > service_name",
        Status::NeedsMissing,
        "service identities are for Consul, which this agent does not run",
        "runs once drover integrates with Consul",
        Detect::task(|task| {
            let mut found: Vec<String> = task
                .identity
                .iter()
                .filter(|identity| !identity.service_name.is_empty())
                .map(|_| "Identity.ServiceName".to_owned())
                .collect();
            found.extend(
                task.identities
                    .iter()
                    .enumerate()
                    .filter(|(_, identity)| !identity.service_name.is_empty())
                    .map(|(index, _)| format!("Identities[{index}].ServiceName")),
            );
            found
        }),
    ),
    row(
        "identity > extra_claims",
        Status::NotYet,
        "drover does not add extra claims to workload identities",
        "runs once identities carry extra claims",
        Detect::task(|task| {
            let mut found: Vec<String> = task
                .identity
                .iter()
                .filter(|identity| !identity.extra_claims.is_empty())
                .map(|_| "Identity.ExtraClaims".to_owned())
                .collect();
            found.extend(
                task.identities
                    .iter()
                    .enumerate()
                    .filter(|(_, identity)| !identity.extra_claims.is_empty())
                    .map(|(index, _)| format!("Identities[{index}].ExtraClaims")),
            );
            found
        }),
    ),
    row(
        "vault",
        Status::NeedsMissing,
        "needs a Vault server; keep secrets in Nomad Variables (/v1/var) instead (see docs/vault.md)",
        VAULT,
        Detect::task(|task| when_asked(task.vault.as_ref(), "Vault")),
    ),
    runs(
        "volume_mount",
        "volume, destination, read_only, propagation_mode private: a host volume bound at the destination inside an exec task's root or a docker container; raw_exec has no filesystem isolation, so a task of it that mounts a volume fails to start, as in Nomad",
    ),
    row(
        "volume_mount > propagation_mode (host-to-task, bidirectional)",
        Status::NotYet,
        "mount propagation other than private",
        "runs once drover's task roots take mount events from the host",
        Detect::task(|task| {
            task.volume_mounts
                .iter()
                .enumerate()
                .filter(|(_, mount)| !matches!(mount.propagation_mode.as_str(), "" | "private"))
                .map(|(index, _)| format!("VolumeMounts[{index}].PropagationMode"))
                .collect()
        }),
    ),
    row(
        "csi_plugin",
        Status::NeedsMissing,
        "needs CSI plugin support",
        CSI,
        Detect::task(|task| when_asked(task.csi_plugin_config.as_ref(), "CSIPluginConfig")),
    ),
    row(
        "resources > device",
        Status::NeedsMissing,
        "needs a device plugin; drover fingerprints no devices",
        "runs once drover has device plugins",
        Detect::task(|task| {
            task.resources
                .as_ref()
                .map(|resources| when_any_asked(&resources.devices, "Resources.Devices"))
                .unwrap_or_default()
        }),
    ),
    runs(
        "resources > iops",
        "ignored, as Nomad ignores it, with Nomad's deprecation warning in the register response",
    ),
    row(
        "resources > disk",
        Status::RunsDifferently,
        "a task's disk is ignored, as Nomad ignores it (it reserves nothing); reserve disk for the allocation with the group's ephemeral_disk { size }",
        "",
        Detect::task(|task| {
            when(
                task.resources
                    .as_ref()
                    .is_some_and(|resources| resources.disk_mb != 0),
                "Resources.DiskMB",
            )
        }),
    ),
    row(
        "resources > secrets",
        Status::NotYet,
        "drover does not size a task's secrets directory",
        "runs once drover mounts a sized tmpfs for secrets",
        Detect::task(|task| {
            when(
                task.resources
                    .as_ref()
                    .is_some_and(|resources| resources.secrets_mb != 0),
                "Resources.SecretsMB",
            )
        }),
    ),
    row(
        "resources > numa",
        Status::NotYet,
        "drover does not schedule NUMA nodes",
        "runs once drover fingerprints and schedules NUMA nodes",
        Detect::task(|task| {
            when_asked(
                task.resources
                    .as_ref()
                    .and_then(|resources| resources.numa.as_ref()),
                "Resources.NUMA",
            )
        }),
    ),
    runs(
        "resources > network",
        "the task's own (deprecated) network, with Nomad's deprecation warning: its static and dynamic ports are reserved on the node's network address (clear of the group's and every other allocation's ports) and its mbits against the node's network bandwidth (the interface's link speed, else 1000), as Nomad's scheduler does; the task gets NOMAD_IP_<label>, NOMAD_PORT_<label>, NOMAD_ADDR_<label>, NOMAD_HOST_PORT_<label> (and its group's other tasks NOMAD_ADDR_<task>_<label>, NOMAD_IP_<task>_<label>, NOMAD_PORT_<task>_<label>), and its services may name its port labels",
    ),
    row(
        "resources > network > mode, device, cidr, ip, hostname, dns, cni, port to, host_network, ignore_collision, a second network",
        Status::NotYet,
        "Nomad takes only a task network's ports and mbits, and only from the first one: it ignores the rest, so drover refuses them rather than ignore them",
        "move them into the group's network block",
        Detect::task(|task| {
            task.resources
                .as_ref()
                .map(|resources| task_network_ignored_fields(&resources.networks))
                .unwrap_or_default()
        }),
    ),
    runs(
        "action",
        "runs its command and args inside the task as `alloc exec` does, through `drover job action` and the `/v1/job/<id>/action` websocket (the `alloc-exec` capability)",
    ),
    row(
        "task > schedule",
        Status::NotYet,
        "drover does not run task schedules",
        "runs once drover has task schedules",
        Detect::task(|task| when_asked(task.schedule.as_ref(), "Schedule")),
    ),
];

/// One use of a feature that cannot run here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The row's name.
    pub feature: &'static str,
    /// The Nomad JSON field path of the use, such as `TaskGroups[0].Tasks[1].Templates[0]`.
    pub field_path: String,
    /// The message, naming the group and task, what is missing and what would make it run.
    pub message: String,
}

impl Refusal {
    /// The refusal as a diagnostic of `file`, positioned by `locate` when the source is known.
    pub fn to_diagnostic(
        &self,
        file: &str,
        locate: &dyn Fn(&str) -> Option<Position>,
    ) -> Diagnostic {
        Diagnostic {
            file: file.to_string(),
            position: locate(&self.field_path),
            field_path: Some(self.field_path.clone()),
            message: self.message.clone(),
        }
    }
}

/// What [`check`] found in a job.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SupportReport {
    /// Uses of features drover cannot run; a register with any is refused.
    pub refusals: Vec<Refusal>,
    /// Nomad's own warnings for the job (deprecated things it uses, see `nomad_warnings`),
    /// then one line per feature that runs differently from Nomad.
    pub warnings: Vec<String>,
}

impl SupportReport {
    /// Nomad's `Warnings` text for a response (`1 warning:\n\n* …`), empty without warnings.
    pub fn warnings_text(&self) -> String {
        warnings_text(&self.warnings)
    }
}

/// Warnings as Nomad's API answers them in one `Warnings` text (`1 warning:` or `N warnings:`,
/// then a `* ` line each, trimmed); empty without any.
pub fn warnings_text(warnings: &[String]) -> String {
    let mut text = match warnings.len() {
        0 => return String::new(),
        1 => "1 warning:\n".to_string(),
        count => format!("{count} warnings:\n"),
    };
    for warning in warnings {
        text.push_str("\n* ");
        text.push_str(warning.trim());
    }
    text
}

/// Finds every use of a feature in `job` (defaults applied or not) that drover refuses or runs
/// differently from Nomad, after Nomad's own warnings for the job.
pub fn check(job: &Job) -> SupportReport {
    let mut report = SupportReport {
        warnings: crate::nomad_warnings::job_warnings(job),
        ..SupportReport::default()
    };
    for feature in FEATURES {
        if feature.status == Status::Runs {
            continue;
        }
        // (owner's path, path relative to the owner, owner's message context)
        let mut places: Vec<(String, String, String)> = Vec::new();
        if let Some(find) = feature.detect.job {
            places.extend(
                find(job)
                    .into_iter()
                    .map(|path| (String::new(), path, String::new())),
            );
        }
        for (group_index, group) in job.task_groups.iter().enumerate() {
            let group_path = format!("TaskGroups[{group_index}]");
            let group_context = format!("group {:?}", group.name);
            if let Some(find) = feature.detect.group {
                places.extend(
                    find(group)
                        .into_iter()
                        .map(|path| (group_path.clone(), path, group_context.clone())),
                );
            }
            if let Some(find) = feature.detect.task {
                for (task_index, task) in group.tasks.iter().enumerate() {
                    let task_path = format!("{group_path}.Tasks[{task_index}]");
                    let task_context = format!("{group_context} task {:?}", task.name);
                    places.extend(
                        find(task)
                            .into_iter()
                            .map(|path| (task_path.clone(), path, task_context.clone())),
                    );
                }
            }
        }
        if places.is_empty() {
            continue;
        }
        let full_path = |owner: &str, relative: &str| {
            if owner.is_empty() {
                relative.to_string()
            } else {
                format!("{owner}.{relative}")
            }
        };
        if feature.status.is_refused() {
            for (owner, relative, context) in places {
                let prefix = if context.is_empty() {
                    String::new()
                } else {
                    format!("{context}: ")
                };
                report.refusals.push(Refusal {
                    feature: feature.name,
                    message: format!(
                        "{prefix}{} cannot run here: {}; {}",
                        jobspec_name(&relative),
                        feature.reason,
                        feature.would_run
                    ),
                    field_path: full_path(&owner, &relative),
                });
            }
        } else {
            let owners: Vec<String> = places
                .iter()
                .map(|(owner, relative, context)| {
                    let path = full_path(owner, relative);
                    if context.is_empty() {
                        format!("job ({path})")
                    } else {
                        format!("{context} ({path})")
                    }
                })
                .collect();
            report.warnings.push(format!(
                "{} in {}: {}",
                feature.name,
                owners.join(", "),
                feature.reason
            ));
        }
    }
    report
}

/// How the jobspec writes a field path relative to its job, group or task:
/// `Services[0].Checks[1]` → `service.check`, `Volumes.data` → `volume "data"`.
fn jobspec_name(relative_path: &str) -> String {
    let mut names: Vec<String> = Vec::new();
    let mut after_volumes = false;
    for segment in relative_path.split('.') {
        let field = segment.split_once('[').map_or(segment, |(field, _)| field);
        if after_volumes {
            if let Some(last) = names.last_mut() {
                *last = format!("{last} {field:?}");
            }
            after_volumes = false;
            continue;
        }
        after_volumes = field == "Volumes";
        let name = match field {
            "Volumes" => "volume",
            "VolumeMounts" => "volume_mount",
            "Vault" => "vault",
            "Consul" => "consul",
            "CSIPluginConfig" => "csi_plugin",
            "Scaling" | "ScalingPolicies" => "scaling",
            "Devices" => "device",
            "NUMA" => "numa",
            "Networks" => "network",
            "Actions" => "action",
            "Schedule" => "schedule",
            "Multiregion" => "multiregion",
            "Connect" => "connect",
            "Disconnect" => "disconnect",
            "Migrate" => "migrate",
            "Update" => "update",
            "Periodic" => "periodic",
            "ParameterizedJob" => "parameterized",
            "MaxClientDisconnect" => "max_client_disconnect",
            "MaxRunDuration" => "max_run_duration",
            "DNS" => "dns",
            "CNI" => "cni",
            "Device" => "device",
            "CIDR" => "cidr",
            "IP" => "ip",
            "IgnoreCollision" => "ignore_collision",
            "ReservedPorts" | "DynamicPorts" => "port",
            "IOPS" => "iops",
            "SecretsMB" => "secrets",
            "UI" => "ui",
            "StopAfterClientDisconnect" => "stop_after_client_disconnect",
            "PreventRescheduleOnLost" => "prevent_reschedule_on_lost",
            "AllAtOnce" => "all_at_once",
            "EphemeralDisk" => "ephemeral_disk",
            "Sticky" => "sticky",
            "Kind" => "kind",
            "RestartPolicy" => "restart",
            "RenderTemplates" => "render_templates",
            other => crate::schema::hcl_name_for_json_field(other).unwrap_or(other),
        };
        names.push(name.to_string());
    }
    names.join(".")
}

/// The reference page `docs/jobspec.md`, generated from the table.
pub fn reference_markdown() -> String {
    let mut page = String::from(
        "# Jobspec support\n\n\
         <!-- Generated from crates/jobspec/src/support.rs by `DROVER_BLESS_DOCS=1 cargo test -p drover-jobspec --test support`; do not edit. -->\n\n\
         drover reads Nomad's jobspecs (HCL2 and JSON) unchanged: a spec parses and validates as \
         Nomad parses it, whatever it uses. What this page lists is what *runs*. Registering a job \
         (`drover job run`, `PUT /v1/jobs`, `PUT /v1/job/<id>`) that uses a refused feature fails \
         with a 400 naming each use, where it is and what would make it run; `drover job validate` \
         and `/v1/validate/job` report the same refusals. A feature that runs differently from \
         Nomad is registered with a note in the response's `Warnings`, which `drover job run` and \
         `drover job validate` print.\n\n\
         Blocks Nomad has that drover does not decode at all are refused by the parser itself.\n\n",
    );
    for (heading, wanted) in [
        ("Runs", &[Status::Runs][..]),
        (
            "Runs differently from Nomad",
            &[Status::RunsDifferently][..],
        ),
        (
            "Refused at register",
            &[Status::NotYet, Status::NeedsMissing][..],
        ),
    ] {
        let _ = write!(page, "## {heading}\n\n");
        if wanted.iter().any(|status| status.is_refused()) {
            page.push_str(
                "| feature | status | why | what would make it run |\n|---|---|---|---|\n",
            );
        } else {
            page.push_str("| feature | status | what drover does |\n|---|---|---|\n");
        }
        for feature in FEATURES
            .iter()
            .filter(|feature| wanted.contains(&feature.status))
        {
            if feature.status.is_refused() {
                let _ = writeln!(
                    page,
                    "| `{}` | {} | {} | {} |",
                    feature.name,
                    feature.status.label(),
                    feature.reason,
                    feature.would_run
                );
            } else {
                let _ = writeln!(
                    page,
                    "| `{}` | {} | {} |",
                    feature.name,
                    feature.status.label(),
                    feature.reason
                );
            }
        }
        page.push('\n');
    }
    page
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::schema::{BodyKind, BodySchema};

    /// The words a row speaks of: its name, and for rows that run, what it says it runs.
    fn covered_words() -> (BTreeSet<&'static str>, BTreeSet<&'static str>) {
        let split = |text: &'static str| {
            text.split(|character: char| !(character.is_ascii_alphanumeric() || character == '_'))
                .filter(|word| !word.is_empty())
                .collect::<Vec<_>>()
        };
        let mut words = BTreeSet::new();
        let mut refused = BTreeSet::new();
        for feature in FEATURES {
            words.extend(split(feature.name));
            if feature.status == Status::Runs {
                words.extend(split(feature.reason));
            }
            if feature.status.is_refused() {
                // Only the refused block itself, not the blocks its name is nested in.
                let own = feature
                    .name
                    .rsplit_once('>')
                    .map_or(feature.name, |(_, own)| own);
                refused.extend(split(own));
            }
        }
        (words, refused)
    }

    fn uncovered(
        schema: &'static BodySchema,
        path: &str,
        refused_ancestor: bool,
        words: &BTreeSet<&'static str>,
        refused: &BTreeSet<&'static str>,
        missing: &mut Vec<String>,
    ) {
        for argument in schema.arguments {
            if !refused_ancestor && !words.contains(argument.name) {
                missing.push(format!("{path} > {} (argument)", argument.name));
            }
        }
        for block in schema.blocks {
            let covered = refused_ancestor || words.contains(block.name);
            if !covered {
                missing.push(format!("{path} > {}", block.name));
            }
            if let BodyKind::Schema(body) = block.body {
                uncovered(
                    body,
                    &format!("{path} > {}", block.name),
                    refused_ancestor || refused.contains(block.name),
                    words,
                    refused,
                    missing,
                );
            }
        }
    }

    /// Every block and argument the decoder accepts is named by a row of the table (directly, or
    /// inside a refused block), so nothing decodes without the table saying what happens to it.
    #[test]
    fn every_decoded_block_and_argument_has_a_row() {
        let (words, refused) = covered_words();
        let mut missing = Vec::new();
        uncovered(
            &crate::schema::JOB,
            "job",
            false,
            &words,
            &refused,
            &mut missing,
        );
        assert!(
            missing.is_empty(),
            "decoded but not in the support table:\n{}",
            missing.join("\n")
        );
    }
}
