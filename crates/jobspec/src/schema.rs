//! The jobspec schema: for each block, the arguments and nested blocks it allows, the Nomad JSON
//! field each one fills, and the blocks Nomad has but drover refuses.
//!
//! Data only. The walker in `decode` reads these tables; nothing here evaluates or validates.

/// How an argument's value is converted to JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ValueKind {
    String,
    Integer,
    /// Any number (integer or fractional).
    Number,
    Bool,
    /// A Go duration string (or a number of nanoseconds) → integer nanoseconds.
    Duration,
    StringList,
}

#[derive(Debug)]
pub(crate) struct ArgumentSpec {
    pub name: &'static str,
    pub json_field: &'static str,
    pub kind: ValueKind,
}

/// How many times a block may appear and how it lands in JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Repetition {
    /// At most once; an object.
    Single,
    /// Any number of times; an array of objects.
    List,
}

/// What a block's body holds.
#[derive(Debug, Clone, Copy)]
pub(crate) enum BodyKind {
    Schema(&'static BodySchema),
    /// Arguments only, each a string (`meta`, `env`, artifact `options`).
    StringMap,
    /// Arguments only, each a list of strings (check `header`).
    StringListMap,
    /// Anything (driver `config`): arguments keep their type, nested blocks become objects.
    FreeForm,
}

/// Where a block's JSON goes when it is not a fixed field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Placement {
    Field(&'static str),
    /// `port`: `ReservedPorts` when it has `static`, `DynamicPorts` otherwise.
    PortByStatic,
    /// `identity`: the default identity (no name, or "default") is `Identity`, others go to
    /// `Identities`.
    IdentityByName,
}

#[derive(Debug)]
pub(crate) struct BlockSpec {
    pub name: &'static str,
    pub placement: Placement,
    pub repetition: Repetition,
    /// The JSON field that receives the single label, if the block takes one.
    pub label_field: Option<&'static str>,
    /// What the label names, for messages ("a group needs one label, its name").
    pub label_meaning: &'static str,
    pub body: BodyKind,
    /// Whether `name = { ... }` is accepted as well as `name { ... }` (Nomad allows it for
    /// `meta`, `env` and `config`).
    pub also_as_argument: bool,
    /// Whether this block opens a new message context (`group "app"`, `task "server"`).
    pub names_context: bool,
}

#[derive(Debug)]
pub(crate) struct BodySchema {
    /// The block name used in messages.
    pub name: &'static str,
    pub arguments: &'static [ArgumentSpec],
    pub blocks: &'static [BlockSpec],
    /// Blocks (or arguments) Nomad accepts here that drover refuses, with the reason.
    pub refused: &'static [(&'static str, &'static str)],
}

impl BodySchema {
    pub(crate) fn argument(&self, name: &str) -> Option<&'static ArgumentSpec> {
        self.arguments.iter().find(|argument| argument.name == name)
    }

    pub(crate) fn block(&self, name: &str) -> Option<&'static BlockSpec> {
        self.blocks.iter().find(|block| block.name == name)
    }

    pub(crate) fn refusal(&self, name: &str) -> Option<&'static str> {
        self.refused
            .iter()
            .find(|(refused, _)| *refused == name)
            .map(|(_, reason)| *reason)
    }

    /// Every name valid here, for "did you mean" hints.
    pub(crate) fn known_names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.arguments
            .iter()
            .map(|argument| argument.name)
            .chain(self.blocks.iter().map(|block| block.name))
    }
}

const fn argument(name: &'static str, json_field: &'static str, kind: ValueKind) -> ArgumentSpec {
    ArgumentSpec {
        name,
        json_field,
        kind,
    }
}

const fn block(
    name: &'static str,
    json_field: &'static str,
    repetition: Repetition,
    body: BodyKind,
) -> BlockSpec {
    BlockSpec {
        name,
        placement: Placement::Field(json_field),
        repetition,
        label_field: None,
        label_meaning: "",
        body,
        also_as_argument: false,
        names_context: false,
    }
}

const fn string_map_block(name: &'static str, json_field: &'static str) -> BlockSpec {
    BlockSpec {
        also_as_argument: true,
        ..block(name, json_field, Repetition::Single, BodyKind::StringMap)
    }
}

use BodyKind::Schema;
use Repetition::{List, Single};
use ValueKind::String as Text;
use ValueKind::{Bool, Duration, Integer, Number, StringList};

const CONSUL_REASON: &str = "drover has no Consul integration";
const VAULT_REASON: &str = "drover has no Vault integration";
const VOLUME_REASON: &str = "drover does not manage host or CSI volumes";
const SCALING_REASON: &str = "drover has no autoscaler integration";

pub(crate) static CONSTRAINT: BodySchema = BodySchema {
    name: "constraint",
    arguments: &[
        argument("attribute", "LTarget", Text),
        argument("value", "RTarget", Text),
        argument("operator", "Operand", Text),
        // Shortcuts, folded into Operand/RTarget by the decoder.
        argument("distinct_hosts", "distinct_hosts", Bool),
        argument("distinct_property", "distinct_property", Text),
        argument("regexp", "regexp", Text),
        argument("version", "version", Text),
        argument("semver", "semver", Text),
        argument("set_contains", "set_contains", Text),
        argument("set_contains_all", "set_contains_all", Text),
        argument("set_contains_any", "set_contains_any", Text),
        argument("is_set", "is_set", Text),
        argument("is_not_set", "is_not_set", Text),
    ],
    blocks: &[],
    refused: &[],
};

pub(crate) static AFFINITY: BodySchema = BodySchema {
    name: "affinity",
    arguments: &[
        argument("attribute", "LTarget", Text),
        argument("value", "RTarget", Text),
        argument("operator", "Operand", Text),
        argument("weight", "Weight", Integer),
        argument("regexp", "regexp", Text),
        argument("version", "version", Text),
        argument("semver", "semver", Text),
        argument("set_contains", "set_contains", Text),
        argument("set_contains_all", "set_contains_all", Text),
        argument("set_contains_any", "set_contains_any", Text),
    ],
    blocks: &[],
    refused: &[],
};

static SPREAD_TARGET: BodySchema = BodySchema {
    name: "target",
    arguments: &[argument("percent", "Percent", Integer)],
    blocks: &[],
    refused: &[],
};

static SPREAD: BodySchema = BodySchema {
    name: "spread",
    arguments: &[
        argument("attribute", "Attribute", Text),
        argument("weight", "Weight", Integer),
    ],
    blocks: &[BlockSpec {
        label_field: Some("Value"),
        label_meaning: "the target value",
        ..block("target", "SpreadTarget", List, Schema(&SPREAD_TARGET))
    }],
    refused: &[],
};

static UPDATE: BodySchema = BodySchema {
    name: "update",
    arguments: &[
        argument("stagger", "Stagger", Duration),
        argument("max_parallel", "MaxParallel", Integer),
        argument("health_check", "HealthCheck", Text),
        argument("min_healthy_time", "MinHealthyTime", Duration),
        argument("healthy_deadline", "HealthyDeadline", Duration),
        argument("progress_deadline", "ProgressDeadline", Duration),
        argument("canary", "Canary", Integer),
        argument("auto_revert", "AutoRevert", Bool),
        argument("auto_promote", "AutoPromote", Bool),
    ],
    blocks: &[],
    refused: &[],
};

static PERIODIC: BodySchema = BodySchema {
    name: "periodic",
    arguments: &[
        argument("enabled", "Enabled", Bool),
        argument("cron", "Spec", Text),
        argument("crons", "Specs", StringList),
        argument("prohibit_overlap", "ProhibitOverlap", Bool),
        argument("time_zone", "TimeZone", Text),
    ],
    blocks: &[],
    refused: &[],
};

static PARAMETERIZED: BodySchema = BodySchema {
    name: "parameterized",
    arguments: &[
        argument("payload", "Payload", Text),
        argument("meta_required", "MetaRequired", StringList),
        argument("meta_optional", "MetaOptional", StringList),
    ],
    blocks: &[],
    refused: &[],
};

static RESCHEDULE: BodySchema = BodySchema {
    name: "reschedule",
    arguments: &[
        argument("attempts", "Attempts", Integer),
        argument("interval", "Interval", Duration),
        argument("delay", "Delay", Duration),
        argument("delay_function", "DelayFunction", Text),
        argument("max_delay", "MaxDelay", Duration),
        argument("unlimited", "Unlimited", Bool),
    ],
    blocks: &[],
    refused: &[],
};

static RESTART: BodySchema = BodySchema {
    name: "restart",
    arguments: &[
        argument("attempts", "Attempts", Integer),
        argument("interval", "Interval", Duration),
        argument("delay", "Delay", Duration),
        argument("mode", "Mode", Text),
        argument("render_templates", "RenderTemplates", Bool),
        // drover extensions: opt-in exponential backoff between restarts.
        argument("backoff_factor", "BackoffFactor", Number),
        argument("max_delay", "MaxDelay", Duration),
    ],
    blocks: &[],
    refused: &[],
};

static EPHEMERAL_DISK: BodySchema = BodySchema {
    name: "ephemeral_disk",
    arguments: &[
        argument("sticky", "Sticky", Bool),
        argument("migrate", "Migrate", Bool),
        argument("size", "SizeMB", Integer),
    ],
    blocks: &[],
    refused: &[],
};

static PORT: BodySchema = BodySchema {
    name: "port",
    arguments: &[
        argument("static", "Value", Integer),
        argument("to", "To", Integer),
        argument("host_network", "HostNetwork", Text),
    ],
    blocks: &[],
    refused: &[(
        "ignore_collision",
        "drover does not share static ports between allocations",
    )],
};

static NETWORK: BodySchema = BodySchema {
    name: "network",
    arguments: &[
        argument("mode", "Mode", Text),
        argument("hostname", "Hostname", Text),
        argument("mbits", "MBits", Integer),
    ],
    blocks: &[BlockSpec {
        placement: Placement::PortByStatic,
        label_field: Some("Label"),
        label_meaning: "the port label",
        ..block("port", "DynamicPorts", List, Schema(&PORT))
    }],
    refused: &[
        (
            "dns",
            "custom DNS needs network namespaces drover does not create",
        ),
        ("cni", "drover has no CNI networking"),
        ("reserved_ports", "use port blocks with static instead"),
        ("device", "drover does not pin a network device"),
        ("cidr", "drover does not pin a network address"),
        ("ip", "drover does not pin a network address"),
    ],
};

static CHECK_RESTART: BodySchema = BodySchema {
    name: "check_restart",
    arguments: &[
        argument("limit", "Limit", Integer),
        argument("grace", "Grace", Duration),
        argument("ignore_warnings", "IgnoreWarnings", Bool),
    ],
    blocks: &[],
    refused: &[],
};

static CHECK: BodySchema = BodySchema {
    name: "check",
    arguments: &[
        argument("name", "Name", Text),
        argument("type", "Type", Text),
        argument("command", "Command", Text),
        argument("args", "Args", StringList),
        argument("path", "Path", Text),
        argument("protocol", "Protocol", Text),
        argument("port", "PortLabel", Text),
        argument("expose", "Expose", Bool),
        argument("address_mode", "AddressMode", Text),
        argument("interval", "Interval", Duration),
        argument("timeout", "Timeout", Duration),
        argument("initial_status", "InitialStatus", Text),
        argument("notes", "Notes", Text),
        argument("tls_server_name", "TLSServerName", Text),
        argument("tls_skip_verify", "TLSSkipVerify", Bool),
        argument("method", "Method", Text),
        argument("body", "Body", Text),
        argument("task", "TaskName", Text),
        argument("success_before_passing", "SuccessBeforePassing", Integer),
        argument(
            "failures_before_critical",
            "FailuresBeforeCritical",
            Integer,
        ),
        argument("failures_before_warning", "FailuresBeforeWarning", Integer),
        argument("on_update", "OnUpdate", Text),
    ],
    blocks: &[
        block("header", "Header", Single, BodyKind::StringListMap),
        block(
            "check_restart",
            "CheckRestart",
            Single,
            Schema(&CHECK_RESTART),
        ),
    ],
    refused: &[
        ("grpc_service", "drover does not run gRPC checks"),
        ("grpc_use_tls", "drover does not run gRPC checks"),
        ("advertise", CONSUL_REASON),
    ],
};

static SERVICE: BodySchema = BodySchema {
    name: "service",
    arguments: &[
        argument("name", "Name", Text),
        argument("tags", "Tags", StringList),
        argument("canary_tags", "CanaryTags", StringList),
        argument("enable_tag_override", "EnableTagOverride", Bool),
        argument("port", "PortLabel", Text),
        argument("address_mode", "AddressMode", Text),
        argument("address", "Address", Text),
        argument("task", "TaskName", Text),
        argument("on_update", "OnUpdate", Text),
        argument("provider", "Provider", Text),
    ],
    blocks: &[
        block("check", "Checks", List, Schema(&CHECK)),
        block(
            "check_restart",
            "CheckRestart",
            Single,
            Schema(&CHECK_RESTART),
        ),
        string_map_block("meta", "Meta"),
        string_map_block("canary_meta", "CanaryMeta"),
        string_map_block("tagged_addresses", "TaggedAddresses"),
    ],
    refused: &[
        ("connect", "drover has no Consul Connect service mesh"),
        ("identity", CONSUL_REASON),
        ("weights", CONSUL_REASON),
        ("kind", CONSUL_REASON),
        ("cluster", CONSUL_REASON),
    ],
};

static RESOURCES: BodySchema = BodySchema {
    name: "resources",
    arguments: &[
        argument("cpu", "CPU", Integer),
        argument("cores", "Cores", Integer),
        argument("memory", "MemoryMB", Integer),
        argument("memory_max", "MemoryMaxMB", Integer),
        argument("disk", "DiskMB", Integer),
    ],
    blocks: &[],
    refused: &[
        ("device", "drover does not schedule devices"),
        ("numa", "drover does not schedule NUMA nodes"),
        (
            "network",
            "a task-level network block is deprecated in Nomad; use a group network block",
        ),
        ("iops", "iops was removed from Nomad"),
        ("secrets", "drover sizes the secrets directory itself"),
    ],
};

static LOGS: BodySchema = BodySchema {
    name: "logs",
    arguments: &[
        argument("max_files", "MaxFiles", Integer),
        argument("max_file_size", "MaxFileSizeMB", Integer),
        argument("disabled", "Disabled", Bool),
        argument("enabled", "Enabled", Bool),
    ],
    blocks: &[],
    refused: &[],
};

static LIFECYCLE: BodySchema = BodySchema {
    name: "lifecycle",
    arguments: &[
        argument("hook", "Hook", Text),
        argument("sidecar", "Sidecar", Bool),
    ],
    blocks: &[],
    refused: &[],
};

static DISPATCH_PAYLOAD: BodySchema = BodySchema {
    name: "dispatch_payload",
    arguments: &[argument("file", "File", Text)],
    blocks: &[],
    refused: &[],
};

static ARTIFACT: BodySchema = BodySchema {
    name: "artifact",
    arguments: &[
        argument("source", "GetterSource", Text),
        argument("mode", "GetterMode", Text),
        argument("insecure", "GetterInsecure", Bool),
        argument("destination", "RelativeDest", Text),
        argument("chown", "Chown", Bool),
    ],
    blocks: &[
        string_map_block("options", "GetterOptions"),
        string_map_block("headers", "GetterHeaders"),
    ],
    refused: &[],
};

static TEMPLATE_WAIT: BodySchema = BodySchema {
    name: "wait",
    arguments: &[
        argument("min", "Min", Duration),
        argument("max", "Max", Duration),
    ],
    blocks: &[],
    refused: &[],
};

static CHANGE_SCRIPT: BodySchema = BodySchema {
    name: "change_script",
    arguments: &[
        argument("command", "Command", Text),
        argument("args", "Args", StringList),
        argument("timeout", "Timeout", Duration),
        argument("fail_on_error", "FailOnError", Bool),
        argument("run_on_first_render", "RunOnFirstRender", Bool),
    ],
    blocks: &[],
    refused: &[],
};

static TEMPLATE: BodySchema = BodySchema {
    name: "template",
    arguments: &[
        argument("source", "SourcePath", Text),
        argument("destination", "DestPath", Text),
        argument("data", "EmbeddedTmpl", Text),
        argument("change_mode", "ChangeMode", Text),
        argument("change_signal", "ChangeSignal", Text),
        argument("once", "Once", Bool),
        argument("splay", "Splay", Duration),
        argument("perms", "Perms", Text),
        argument("uid", "Uid", Integer),
        argument("gid", "Gid", Integer),
        argument("left_delimiter", "LeftDelim", Text),
        argument("right_delimiter", "RightDelim", Text),
        argument("env", "Envvars", Bool),
        argument("error_on_missing_key", "ErrMissingKey", Bool),
    ],
    blocks: &[
        block("wait", "Wait", Single, Schema(&TEMPLATE_WAIT)),
        block(
            "change_script",
            "ChangeScript",
            Single,
            Schema(&CHANGE_SCRIPT),
        ),
    ],
    refused: &[(
        "vault_grace",
        "vault_grace was removed from Nomad and drover has no Vault",
    )],
};

static IDENTITY: BodySchema = BodySchema {
    name: "identity",
    arguments: &[
        argument("name", "Name", Text),
        argument("aud", "Audience", StringList),
        argument("change_mode", "ChangeMode", Text),
        argument("change_signal", "ChangeSignal", Text),
        argument("env", "Env", Bool),
        argument("file", "File", Bool),
        argument("filepath", "Filepath", Text),
        argument("ttl", "TTL", Duration),
    ],
    blocks: &[],
    refused: &[
        ("service_name", CONSUL_REASON),
        ("extra_claims", "drover does not add extra identity claims"),
    ],
};

static TASK: BodySchema = BodySchema {
    name: "task",
    arguments: &[
        argument("driver", "Driver", Text),
        argument("user", "User", Text),
        argument("kill_timeout", "KillTimeout", Duration),
        argument("kill_signal", "KillSignal", Text),
        argument("leader", "Leader", Bool),
        argument("shutdown_delay", "ShutdownDelay", Duration),
        argument("kind", "Kind", Text),
    ],
    blocks: &[
        BlockSpec {
            also_as_argument: true,
            ..block("config", "Config", Single, BodyKind::FreeForm)
        },
        string_map_block("env", "Env"),
        string_map_block("meta", "Meta"),
        block("lifecycle", "Lifecycle", Single, Schema(&LIFECYCLE)),
        block("constraint", "Constraints", List, Schema(&CONSTRAINT)),
        block("affinity", "Affinities", List, Schema(&AFFINITY)),
        block("service", "Services", List, Schema(&SERVICE)),
        block("resources", "Resources", Single, Schema(&RESOURCES)),
        block("restart", "RestartPolicy", Single, Schema(&RESTART)),
        block("logs", "LogConfig", Single, Schema(&LOGS)),
        block("artifact", "Artifacts", List, Schema(&ARTIFACT)),
        block("template", "Templates", List, Schema(&TEMPLATE)),
        block(
            "dispatch_payload",
            "DispatchPayload",
            Single,
            Schema(&DISPATCH_PAYLOAD),
        ),
        BlockSpec {
            placement: Placement::IdentityByName,
            ..block("identity", "Identities", List, Schema(&IDENTITY))
        },
    ],
    refused: &[
        ("vault", VAULT_REASON),
        ("consul", CONSUL_REASON),
        ("volume_mount", VOLUME_REASON),
        ("csi_plugin", VOLUME_REASON),
        ("scaling", SCALING_REASON),
        ("secret", "drover has no secret providers"),
        ("action", "drover does not support task actions"),
        ("schedule", "drover does not support task schedules"),
        (
            "dynamic",
            "dynamic blocks are not supported; write the blocks out",
        ),
    ],
};

static GROUP: BodySchema = BodySchema {
    name: "group",
    arguments: &[
        argument("count", "Count", Integer),
        argument("shutdown_delay", "ShutdownDelay", Duration),
        argument(
            "stop_after_client_disconnect",
            "StopAfterClientDisconnect",
            Duration,
        ),
        argument("max_client_disconnect", "MaxClientDisconnect", Duration),
        argument(
            "prevent_reschedule_on_lost",
            "PreventRescheduleOnLost",
            Bool,
        ),
    ],
    blocks: &[
        BlockSpec {
            label_field: Some("Name"),
            label_meaning: "the task name",
            names_context: true,
            ..block("task", "Tasks", List, Schema(&TASK))
        },
        block("constraint", "Constraints", List, Schema(&CONSTRAINT)),
        block("affinity", "Affinities", List, Schema(&AFFINITY)),
        block("spread", "Spreads", List, Schema(&SPREAD)),
        block("restart", "RestartPolicy", Single, Schema(&RESTART)),
        block(
            "reschedule",
            "ReschedulePolicy",
            Single,
            Schema(&RESCHEDULE),
        ),
        block(
            "ephemeral_disk",
            "EphemeralDisk",
            Single,
            Schema(&EPHEMERAL_DISK),
        ),
        block("update", "Update", Single, Schema(&UPDATE)),
        block("network", "Networks", List, Schema(&NETWORK)),
        block("service", "Services", List, Schema(&SERVICE)),
        string_map_block("meta", "Meta"),
    ],
    refused: &[
        ("volume", VOLUME_REASON),
        ("scaling", SCALING_REASON),
        ("consul", CONSUL_REASON),
        ("vault", VAULT_REASON),
        ("secret", "drover has no secret providers"),
        (
            "migrate",
            "drover does not migrate ephemeral disks between nodes",
        ),
        (
            "disconnect",
            "use max_client_disconnect or stop_after_client_disconnect",
        ),
        (
            "max_run_duration",
            "drover does not support max_run_duration yet",
        ),
    ],
};

pub(crate) static JOB: BodySchema = BodySchema {
    name: "job",
    arguments: &[
        argument("id", "ID", Text),
        argument("name", "Name", Text),
        argument("region", "Region", Text),
        argument("namespace", "Namespace", Text),
        argument("type", "Type", Text),
        argument("priority", "Priority", Integer),
        argument("all_at_once", "AllAtOnce", Bool),
        argument("datacenters", "Datacenters", StringList),
        argument("node_pool", "NodePool", Text),
    ],
    blocks: &[
        BlockSpec {
            label_field: Some("Name"),
            label_meaning: "the group name",
            names_context: true,
            ..block("group", "TaskGroups", List, Schema(&GROUP))
        },
        block("constraint", "Constraints", List, Schema(&CONSTRAINT)),
        block("affinity", "Affinities", List, Schema(&AFFINITY)),
        block("spread", "Spreads", List, Schema(&SPREAD)),
        block("update", "Update", Single, Schema(&UPDATE)),
        block("periodic", "Periodic", Single, Schema(&PERIODIC)),
        block(
            "parameterized",
            "ParameterizedJob",
            Single,
            Schema(&PARAMETERIZED),
        ),
        block("reschedule", "Reschedule", Single, Schema(&RESCHEDULE)),
        string_map_block("meta", "Meta"),
    ],
    refused: &[
        ("task", "put the task in a group block"),
        ("multiregion", "drover runs a single region"),
        ("vault", VAULT_REASON),
        ("secret", "drover has no secret providers"),
        (
            "migrate",
            "drover does not migrate ephemeral disks between nodes",
        ),
        ("ui", "drover has no web UI"),
        ("consul_token", CONSUL_REASON),
        ("vault_token", VAULT_REASON),
        (
            "dynamic",
            "dynamic blocks are not supported; write the blocks out",
        ),
    ],
};

/// Every block drover refuses, as `(parent, block, reason)`, for documentation and tests.
pub fn refused_blocks() -> Vec<(&'static str, &'static str, &'static str)> {
    let schemas: [&BodySchema; 9] = [
        &JOB, &GROUP, &TASK, &RESOURCES, &NETWORK, &SERVICE, &CHECK, &IDENTITY, &TEMPLATE,
    ];
    let mut refused: Vec<_> = schemas
        .iter()
        .flat_map(|schema| {
            schema
                .refused
                .iter()
                .map(|(name, reason)| (schema.name, *name, *reason))
        })
        .collect();
    refused.extend(
        PORT.refused
            .iter()
            .map(|(name, reason)| ("port", *name, *reason)),
    );
    refused
}

static ALL_SCHEMAS: [&BodySchema; 28] = [
    &JOB,
    &GROUP,
    &TASK,
    &CONSTRAINT,
    &AFFINITY,
    &SPREAD,
    &SPREAD_TARGET,
    &UPDATE,
    &PERIODIC,
    &PARAMETERIZED,
    &RESCHEDULE,
    &RESTART,
    &EPHEMERAL_DISK,
    &PORT,
    &NETWORK,
    &CHECK_RESTART,
    &CHECK,
    &SERVICE,
    &RESOURCES,
    &LOGS,
    &LIFECYCLE,
    &DISPATCH_PAYLOAD,
    &ARTIFACT,
    &TEMPLATE_WAIT,
    &CHANGE_SCRIPT,
    &TEMPLATE,
    &IDENTITY,
    &JOB,
];

/// The jobspec name of a Nomad JSON field (`MemoryMB` → `memory`), for messages.
pub(crate) fn hcl_name_for_json_field(json_field: &str) -> Option<&'static str> {
    match json_field {
        "ReservedPorts" | "DynamicPorts" => return Some("port"),
        "Identity" | "Identities" => return Some("identity"),
        _ => {}
    }
    ALL_SCHEMAS.iter().find_map(|schema| {
        schema
            .arguments
            .iter()
            .find(|argument| argument.json_field == json_field)
            .map(|argument| argument.name)
            .or_else(|| {
                schema
                    .blocks
                    .iter()
                    .find(|block| matches!(block.placement, Placement::Field(field) if field == json_field))
                    .map(|block| block.name)
            })
    })
}
