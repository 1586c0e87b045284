//! The jobspec schema: for each block, the arguments and nested blocks it allows, the Nomad JSON
//! field each one fills, and the few names Nomad has that drover does not decode (with why).
//!
//! Decoding a block says nothing about whether drover runs it: what a job may use is decided
//! after decoding, when the job is validated.
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
    /// A list of whole numbers.
    IntegerList,
    /// An object of strings (`cni { args = { ... } }`).
    StringMap,
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
    /// `volume "name"`: an object keyed by the label (`Volumes`), each entry also holding the
    /// label in its `Name`.
    MapByLabel(&'static str),
    /// A task's `scaling "cpu"` / `scaling "mem"`: a list entry whose `Type` the label gives
    /// (`vertical_cpu`, `vertical_mem`).
    TaskScaling,
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
use ValueKind::{Bool, Duration, Integer, IntegerList, Number, StringList};

const fn labelled_list(
    name: &'static str,
    json_field: &'static str,
    label_field: &'static str,
    label_meaning: &'static str,
    body: &'static BodySchema,
) -> BlockSpec {
    BlockSpec {
        label_field: Some(label_field),
        label_meaning,
        ..block(name, json_field, List, Schema(body))
    }
}

const fn free_form_block(name: &'static str, json_field: &'static str) -> BlockSpec {
    BlockSpec {
        also_as_argument: true,
        ..block(name, json_field, Single, BodyKind::FreeForm)
    }
}

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
        argument("ignore_collision", "IgnoreCollision", Bool),
    ],
    blocks: &[],
    refused: &[],
};

static DNS: BodySchema = BodySchema {
    name: "dns",
    arguments: &[
        argument("servers", "Servers", StringList),
        argument("searches", "Searches", StringList),
        argument("options", "Options", StringList),
    ],
    blocks: &[],
    refused: &[],
};

static CNI: BodySchema = BodySchema {
    name: "cni",
    arguments: &[argument("args", "Args", ValueKind::StringMap)],
    blocks: &[],
    refused: &[],
};

static NETWORK: BodySchema = BodySchema {
    name: "network",
    arguments: &[
        argument("mode", "Mode", Text),
        argument("hostname", "Hostname", Text),
        argument("mbits", "MBits", Integer),
        argument("device", "Device", Text),
        argument("cidr", "CIDR", Text),
        argument("ip", "IP", Text),
    ],
    blocks: &[
        BlockSpec {
            placement: Placement::PortByStatic,
            label_field: Some("Label"),
            label_meaning: "the port label",
            ..block("port", "DynamicPorts", List, Schema(&PORT))
        },
        labelled_list(
            "reserved_ports",
            "ReservedPorts",
            "Label",
            "the port label",
            &PORT,
        ),
        block("dns", "DNS", Single, Schema(&DNS)),
        block("cni", "CNI", Single, Schema(&CNI)),
    ],
    refused: &[],
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
        argument("grpc_service", "GRPCService", Text),
        argument("grpc_use_tls", "GRPCUseTLS", Bool),
        argument("advertise", "Advertise", Text),
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
    refused: &[],
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
        argument("cluster", "Cluster", Text),
        argument("kind", "Kind", Text),
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
        block("connect", "Connect", Single, Schema(&CONNECT)),
        block("identity", "Identity", Single, Schema(&IDENTITY)),
        block("weights", "Weights", Single, Schema(&SERVICE_WEIGHTS)),
    ],
    refused: &[],
};

static SERVICE_WEIGHTS: BodySchema = BodySchema {
    name: "weights",
    arguments: &[
        argument("passing", "Passing", Integer),
        argument("warning", "Warning", Integer),
    ],
    blocks: &[],
    refused: &[],
};

static RESOURCES: BodySchema = BodySchema {
    name: "resources",
    arguments: &[
        argument("cpu", "CPU", Integer),
        argument("cores", "Cores", Integer),
        argument("memory", "MemoryMB", Integer),
        argument("memory_max", "MemoryMaxMB", Integer),
        argument("disk", "DiskMB", Integer),
        argument("iops", "IOPS", Integer),
        argument("secrets", "SecretsMB", Integer),
    ],
    blocks: &[
        labelled_list("device", "Devices", "Name", "the device name", &DEVICE),
        block("numa", "NUMA", Single, Schema(&NUMA)),
        block("network", "Networks", List, Schema(&NETWORK)),
    ],
    refused: &[],
};

static DEVICE: BodySchema = BodySchema {
    name: "device",
    arguments: &[argument("count", "Count", Integer)],
    blocks: &[
        block("constraint", "Constraints", List, Schema(&CONSTRAINT)),
        block("affinity", "Affinities", List, Schema(&AFFINITY)),
    ],
    refused: &[],
};

static NUMA: BodySchema = BodySchema {
    name: "numa",
    arguments: &[
        argument("affinity", "Affinity", Text),
        argument("devices", "Devices", StringList),
    ],
    blocks: &[],
    refused: &[],
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
        argument("vault_grace", "VaultGrace", Duration),
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
    refused: &[],
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
        argument("service_name", "ServiceName", Text),
        argument("extra_claims", "ExtraClaims", ValueKind::StringMap),
    ],
    blocks: &[],
    refused: &[],
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
        block("vault", "Vault", Single, Schema(&VAULT)),
        block("consul", "Consul", Single, Schema(&CONSUL)),
        block("volume_mount", "VolumeMounts", List, Schema(&VOLUME_MOUNT)),
        block("csi_plugin", "CSIPluginConfig", Single, Schema(&CSI_PLUGIN)),
        BlockSpec {
            placement: Placement::TaskScaling,
            label_field: Some("Type"),
            label_meaning: "what it scales, \"cpu\" or \"mem\"",
            ..block("scaling", "ScalingPolicies", List, Schema(&SCALING))
        },
        labelled_list("action", "Actions", "Name", "the action name", &ACTION),
    ],
    refused: &[
        ("secret", "drover has no secret providers"),
        (
            "schedule",
            "task schedules are a Nomad Enterprise feature drover does not have",
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
        argument("max_run_duration", "MaxRunDuration", Duration),
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
        BlockSpec {
            placement: Placement::MapByLabel("Volumes"),
            label_field: Some("Name"),
            label_meaning: "the volume name",
            ..block("volume", "Volumes", Single, Schema(&VOLUME))
        },
        block("scaling", "Scaling", Single, Schema(&SCALING)),
        block("consul", "Consul", Single, Schema(&CONSUL)),
        // Copied into every task without its own `vault` block.
        block("vault", "Vault", Single, Schema(&VAULT)),
        block("migrate", "Migrate", Single, Schema(&MIGRATE)),
        block("disconnect", "Disconnect", Single, Schema(&DISCONNECT)),
    ],
    refused: &[("secret", "drover has no secret providers")],
};

static VAULT: BodySchema = BodySchema {
    name: "vault",
    arguments: &[
        argument("policies", "Policies", StringList),
        argument("role", "Role", Text),
        argument("namespace", "Namespace", Text),
        argument("cluster", "Cluster", Text),
        argument("env", "Env", Bool),
        argument("disable_file", "DisableFile", Bool),
        argument("change_mode", "ChangeMode", Text),
        argument("change_signal", "ChangeSignal", Text),
        argument("allow_token_expiration", "AllowTokenExpiration", Bool),
    ],
    blocks: &[],
    refused: &[],
};

static CONSUL: BodySchema = BodySchema {
    name: "consul",
    arguments: &[
        argument("namespace", "Namespace", Text),
        argument("cluster", "Cluster", Text),
        argument("partition", "Partition", Text),
    ],
    blocks: &[],
    refused: &[],
};

static MOUNT_OPTIONS: BodySchema = BodySchema {
    name: "mount_options",
    arguments: &[
        argument("fs_type", "FSType", Text),
        argument("mount_flags", "MountFlags", StringList),
    ],
    blocks: &[],
    refused: &[],
};

static VOLUME: BodySchema = BodySchema {
    name: "volume",
    arguments: &[
        argument("type", "Type", Text),
        argument("source", "Source", Text),
        argument("read_only", "ReadOnly", Bool),
        argument("sticky", "Sticky", Bool),
        argument("access_mode", "AccessMode", Text),
        argument("attachment_mode", "AttachmentMode", Text),
        argument("per_alloc", "PerAlloc", Bool),
    ],
    blocks: &[block(
        "mount_options",
        "MountOptions",
        Single,
        Schema(&MOUNT_OPTIONS),
    )],
    refused: &[],
};

static VOLUME_MOUNT: BodySchema = BodySchema {
    name: "volume_mount",
    arguments: &[
        argument("volume", "Volume", Text),
        argument("destination", "Destination", Text),
        argument("read_only", "ReadOnly", Bool),
        argument("propagation_mode", "PropagationMode", Text),
        argument("selinux_label", "SELinuxLabel", Text),
    ],
    blocks: &[],
    refused: &[],
};

static CSI_PLUGIN: BodySchema = BodySchema {
    name: "csi_plugin",
    arguments: &[
        argument("id", "ID", Text),
        argument("type", "Type", Text),
        argument("mount_dir", "MountDir", Text),
        argument("stage_publish_base_dir", "StagePublishBaseDir", Text),
        argument("health_timeout", "HealthTimeout", Duration),
    ],
    blocks: &[],
    refused: &[],
};

static SCALING: BodySchema = BodySchema {
    name: "scaling",
    arguments: &[
        argument("min", "Min", Integer),
        argument("max", "Max", Integer),
        argument("enabled", "Enabled", Bool),
        argument("type", "Type", Text),
    ],
    blocks: &[free_form_block("policy", "Policy")],
    refused: &[],
};

static ACTION: BodySchema = BodySchema {
    name: "action",
    arguments: &[
        argument("command", "Command", Text),
        argument("args", "Args", StringList),
    ],
    blocks: &[],
    refused: &[],
};

static MIGRATE: BodySchema = BodySchema {
    name: "migrate",
    arguments: &[
        argument("max_parallel", "MaxParallel", Integer),
        argument("health_check", "HealthCheck", Text),
        argument("min_healthy_time", "MinHealthyTime", Duration),
        argument("healthy_deadline", "HealthyDeadline", Duration),
    ],
    blocks: &[],
    refused: &[],
};

static DISCONNECT: BodySchema = BodySchema {
    name: "disconnect",
    arguments: &[
        argument("lost_after", "LostAfter", Duration),
        argument("stop_on_client_after", "StopOnClientAfter", Duration),
        argument("replace", "Replace", Bool),
        argument("reconcile", "Reconcile", Text),
    ],
    blocks: &[],
    refused: &[],
};

static MULTIREGION_STRATEGY: BodySchema = BodySchema {
    name: "strategy",
    arguments: &[
        argument("max_parallel", "MaxParallel", Integer),
        argument("on_failure", "OnFailure", Text),
    ],
    blocks: &[],
    refused: &[],
};

static MULTIREGION_REGION: BodySchema = BodySchema {
    name: "region",
    arguments: &[
        argument("count", "Count", Integer),
        argument("datacenters", "Datacenters", StringList),
        argument("node_pool", "NodePool", Text),
    ],
    blocks: &[string_map_block("meta", "Meta")],
    refused: &[],
};

static MULTIREGION: BodySchema = BodySchema {
    name: "multiregion",
    arguments: &[],
    blocks: &[
        block(
            "strategy",
            "Strategy",
            Single,
            Schema(&MULTIREGION_STRATEGY),
        ),
        labelled_list(
            "region",
            "Regions",
            "Name",
            "the region name",
            &MULTIREGION_REGION,
        ),
    ],
    refused: &[],
};

static UI_LINK: BodySchema = BodySchema {
    name: "link",
    arguments: &[
        argument("label", "Label", Text),
        argument("url", "URL", Text),
    ],
    blocks: &[],
    refused: &[],
};

static UI: BodySchema = BodySchema {
    name: "ui",
    arguments: &[argument("description", "Description", Text)],
    blocks: &[block("link", "Links", List, Schema(&UI_LINK))],
    refused: &[],
};

// Consul Connect: `connect { native, sidecar_service { proxy { upstreams, expose { path },
// transparent_proxy, config } }, sidecar_task { ... }, gateway { proxy, ingress, terminating,
// mesh } }`, in the shape of Nomad's `api.ConsulConnect`.

static EXPOSE_PATH: BodySchema = BodySchema {
    name: "path",
    arguments: &[
        argument("path", "Path", Text),
        argument("protocol", "Protocol", Text),
        argument("local_path_port", "LocalPathPort", Integer),
        argument("listener_port", "ListenerPort", Text),
    ],
    blocks: &[],
    refused: &[],
};

static EXPOSE: BodySchema = BodySchema {
    name: "expose",
    arguments: &[],
    blocks: &[block("path", "Paths", List, Schema(&EXPOSE_PATH))],
    refused: &[],
};

static MESH_GATEWAY: BodySchema = BodySchema {
    name: "mesh_gateway",
    arguments: &[argument("mode", "Mode", Text)],
    blocks: &[],
    refused: &[],
};

static UPSTREAM: BodySchema = BodySchema {
    name: "upstreams",
    arguments: &[
        argument("destination_name", "DestinationName", Text),
        argument("destination_namespace", "DestinationNamespace", Text),
        argument("destination_peer", "DestinationPeer", Text),
        argument("destination_partition", "DestinationPartition", Text),
        argument("destination_type", "DestinationType", Text),
        argument("local_bind_port", "LocalBindPort", Integer),
        argument("datacenter", "Datacenter", Text),
        argument("local_bind_address", "LocalBindAddress", Text),
        argument("local_bind_socket_path", "LocalBindSocketPath", Text),
        argument("local_bind_socket_mode", "LocalBindSocketMode", Text),
    ],
    blocks: &[
        block("mesh_gateway", "MeshGateway", Single, Schema(&MESH_GATEWAY)),
        free_form_block("config", "Config"),
    ],
    refused: &[],
};

static TRANSPARENT_PROXY: BodySchema = BodySchema {
    name: "transparent_proxy",
    arguments: &[
        argument("uid", "UID", Text),
        argument("outbound_port", "OutboundPort", Integer),
        argument("exclude_inbound_ports", "ExcludeInboundPorts", StringList),
        argument(
            "exclude_outbound_ports",
            "ExcludeOutboundPorts",
            IntegerList,
        ),
        argument("exclude_outbound_cidrs", "ExcludeOutboundCIDRs", StringList),
        argument("exclude_uids", "ExcludeUIDs", StringList),
        argument("no_dns", "NoDNS", Bool),
    ],
    blocks: &[],
    refused: &[],
};

static PROXY: BodySchema = BodySchema {
    name: "proxy",
    arguments: &[
        argument("local_service_address", "LocalServiceAddress", Text),
        argument("local_service_port", "LocalServicePort", Integer),
    ],
    blocks: &[
        block("expose", "Expose", Single, Schema(&EXPOSE)),
        block("upstreams", "Upstreams", List, Schema(&UPSTREAM)),
        block(
            "transparent_proxy",
            "TransparentProxy",
            Single,
            Schema(&TRANSPARENT_PROXY),
        ),
        free_form_block("config", "Config"),
    ],
    refused: &[],
};

static SIDECAR_SERVICE: BodySchema = BodySchema {
    name: "sidecar_service",
    arguments: &[
        argument("tags", "Tags", StringList),
        argument("port", "Port", Text),
        argument("disable_default_tcp_check", "DisableDefaultTCPCheck", Bool),
    ],
    blocks: &[
        block("proxy", "Proxy", Single, Schema(&PROXY)),
        string_map_block("meta", "Meta"),
    ],
    refused: &[],
};

static SIDECAR_TASK: BodySchema = BodySchema {
    name: "sidecar_task",
    arguments: &[
        argument("name", "Name", Text),
        argument("driver", "Driver", Text),
        argument("user", "User", Text),
        argument("kill_timeout", "KillTimeout", Duration),
        argument("shutdown_delay", "ShutdownDelay", Duration),
        argument("kill_signal", "KillSignal", Text),
    ],
    blocks: &[
        free_form_block("config", "Config"),
        string_map_block("env", "Env"),
        string_map_block("meta", "Meta"),
        block("resources", "Resources", Single, Schema(&RESOURCES)),
        block("logs", "LogConfig", Single, Schema(&LOGS)),
        block("volume_mount", "VolumeMounts", List, Schema(&VOLUME_MOUNT)),
        block("identity", "Identities", List, Schema(&IDENTITY)),
    ],
    refused: &[],
};

static GATEWAY_BIND_ADDRESS: BodySchema = BodySchema {
    name: "envoy_gateway_bind_addresses",
    arguments: &[
        argument("address", "Address", Text),
        argument("port", "Port", Integer),
    ],
    blocks: &[],
    refused: &[],
};

static GATEWAY_PROXY: BodySchema = BodySchema {
    name: "proxy",
    arguments: &[
        argument("connect_timeout", "ConnectTimeout", Duration),
        argument(
            "envoy_gateway_bind_tagged_addresses",
            "EnvoyGatewayBindTaggedAddresses",
            Bool,
        ),
        argument(
            "envoy_gateway_no_default_bind",
            "EnvoyGatewayNoDefaultBind",
            Bool,
        ),
        argument("envoy_dns_discovery_type", "EnvoyDNSDiscoveryType", Text),
    ],
    blocks: &[
        BlockSpec {
            placement: Placement::MapByLabel("EnvoyGatewayBindAddresses"),
            label_field: Some("Name"),
            label_meaning: "the listener name",
            ..block(
                "envoy_gateway_bind_addresses",
                "EnvoyGatewayBindAddresses",
                Single,
                Schema(&GATEWAY_BIND_ADDRESS),
            )
        },
        free_form_block("config", "Config"),
    ],
    refused: &[],
};

static GATEWAY_TLS_SDS: BodySchema = BodySchema {
    name: "sds",
    arguments: &[
        argument("cluster_name", "ClusterName", Text),
        argument("cert_resource", "CertResource", Text),
    ],
    blocks: &[],
    refused: &[],
};

static GATEWAY_TLS: BodySchema = BodySchema {
    name: "tls",
    arguments: &[
        argument("enabled", "Enabled", Bool),
        argument("tls_min_version", "TLSMinVersion", Text),
        argument("tls_max_version", "TLSMaxVersion", Text),
        argument("cipher_suites", "CipherSuites", StringList),
    ],
    blocks: &[block("sds", "SDS", Single, Schema(&GATEWAY_TLS_SDS))],
    refused: &[],
};

static HTTP_HEADER_MODIFIERS: BodySchema = BodySchema {
    name: "request_headers",
    arguments: &[argument("remove", "Remove", StringList)],
    blocks: &[
        string_map_block("add", "Add"),
        string_map_block("set", "Set"),
    ],
    refused: &[],
};

static INGRESS_SERVICE: BodySchema = BodySchema {
    name: "service",
    arguments: &[
        argument("name", "Name", Text),
        argument("hosts", "Hosts", StringList),
        argument("max_connections", "MaxConnections", Integer),
        argument("max_pending_requests", "MaxPendingRequests", Integer),
        argument("max_concurrent_requests", "MaxConcurrentRequests", Integer),
    ],
    blocks: &[
        block("tls", "TLS", Single, Schema(&GATEWAY_TLS)),
        block(
            "request_headers",
            "RequestHeaders",
            Single,
            Schema(&HTTP_HEADER_MODIFIERS),
        ),
        block(
            "response_headers",
            "ResponseHeaders",
            Single,
            Schema(&HTTP_HEADER_MODIFIERS),
        ),
    ],
    refused: &[],
};

static INGRESS_LISTENER: BodySchema = BodySchema {
    name: "listener",
    arguments: &[
        argument("port", "Port", Integer),
        argument("protocol", "Protocol", Text),
    ],
    blocks: &[block("service", "Services", List, Schema(&INGRESS_SERVICE))],
    refused: &[],
};

static INGRESS: BodySchema = BodySchema {
    name: "ingress",
    arguments: &[],
    blocks: &[
        block("tls", "TLS", Single, Schema(&GATEWAY_TLS)),
        block("listener", "Listeners", List, Schema(&INGRESS_LISTENER)),
    ],
    refused: &[],
};

static LINKED_SERVICE: BodySchema = BodySchema {
    name: "service",
    arguments: &[
        argument("name", "Name", Text),
        argument("ca_file", "CAFile", Text),
        argument("cert_file", "CertFile", Text),
        argument("key_file", "KeyFile", Text),
        argument("sni", "SNI", Text),
    ],
    blocks: &[],
    refused: &[],
};

static TERMINATING: BodySchema = BodySchema {
    name: "terminating",
    arguments: &[],
    blocks: &[block("service", "Services", List, Schema(&LINKED_SERVICE))],
    refused: &[],
};

static MESH: BodySchema = BodySchema {
    name: "mesh",
    arguments: &[],
    blocks: &[],
    refused: &[],
};

static GATEWAY: BodySchema = BodySchema {
    name: "gateway",
    arguments: &[],
    blocks: &[
        block("proxy", "Proxy", Single, Schema(&GATEWAY_PROXY)),
        block("ingress", "Ingress", Single, Schema(&INGRESS)),
        block("terminating", "Terminating", Single, Schema(&TERMINATING)),
        block("mesh", "Mesh", Single, Schema(&MESH)),
    ],
    refused: &[],
};

static CONNECT: BodySchema = BodySchema {
    name: "connect",
    arguments: &[argument("native", "Native", Bool)],
    blocks: &[
        block(
            "sidecar_service",
            "SidecarService",
            Single,
            Schema(&SIDECAR_SERVICE),
        ),
        block("sidecar_task", "SidecarTask", Single, Schema(&SIDECAR_TASK)),
        block("gateway", "Gateway", Single, Schema(&GATEWAY)),
    ],
    refused: &[],
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
        // A task outside any group runs in a group of its own, named after it.
        BlockSpec {
            label_field: Some("Name"),
            label_meaning: "the task name",
            names_context: true,
            ..block("task", "Tasks", List, Schema(&TASK))
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
        block("multiregion", "Multiregion", Single, Schema(&MULTIREGION)),
        // Copied into every task without its own `vault` block.
        block("vault", "Vault", Single, Schema(&VAULT)),
        block("migrate", "Migrate", Single, Schema(&MIGRATE)),
        block("ui", "UI", Single, Schema(&UI)),
    ],
    refused: &[
        ("secret", "drover has no secret providers"),
        (
            "consul_token",
            "Nomad takes a Consul token at submission (-consul-token), not in the jobspec",
        ),
        (
            "vault_token",
            "Nomad takes a Vault token at submission (-vault-token), not in the jobspec",
        ),
    ],
};

/// Every block drover refuses, as `(parent, block, reason)`, for documentation and tests.
pub fn refused_blocks() -> Vec<(&'static str, &'static str, &'static str)> {
    let mut refused: Vec<_> = ALL_SCHEMAS
        .iter()
        .flat_map(|schema| {
            schema
                .refused
                .iter()
                .map(|(name, reason)| (schema.name, *name, *reason))
        })
        .collect();
    refused.dedup();
    refused
}

static ALL_SCHEMAS: &[&BodySchema] = &[
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
    &DNS,
    &CNI,
    &SERVICE_WEIGHTS,
    &DEVICE,
    &NUMA,
    &VAULT,
    &CONSUL,
    &MOUNT_OPTIONS,
    &VOLUME,
    &VOLUME_MOUNT,
    &CSI_PLUGIN,
    &SCALING,
    &ACTION,
    &MIGRATE,
    &DISCONNECT,
    &MULTIREGION_STRATEGY,
    &MULTIREGION_REGION,
    &MULTIREGION,
    &UI_LINK,
    &UI,
    &EXPOSE_PATH,
    &EXPOSE,
    &MESH_GATEWAY,
    &UPSTREAM,
    &TRANSPARENT_PROXY,
    &PROXY,
    &SIDECAR_SERVICE,
    &SIDECAR_TASK,
    &GATEWAY_BIND_ADDRESS,
    &GATEWAY_PROXY,
    &GATEWAY_TLS_SDS,
    &GATEWAY_TLS,
    &HTTP_HEADER_MODIFIERS,
    &INGRESS_SERVICE,
    &INGRESS_LISTENER,
    &INGRESS,
    &LINKED_SERVICE,
    &TERMINATING,
    &MESH,
    &GATEWAY,
    &CONNECT,
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
