//! The difference between two versions of a job, in Nomad's `JobDiff` shape: what `job plan -diff`
//! prints and `/v1/job/<id>/versions?diffs=true` answers.
//!
//! The rules are Nomad's (`nomad/structs/diff.go`): a level's *primitive* fields (strings,
//! numbers, booleans and string maps such as `Meta[key]`, not nested blocks, lists or
//! pointer-held values) are compared as text, each block Nomad compares gets an [`ObjectDiff`]
//! named as Nomad names it, lists of blocks are matched by their name (task groups, tasks,
//! services, checks, ports, devices) or as sets (constraints, affinities, artifacts, templates,
//! networks), and string lists as sets. Diffs are sorted as Nomad sorts them. The comparison
//! runs over the job's wire JSON, so field names are Nomad's by construction.
//!
//! Blocks Nomad 1.1.2 does not compare (scaling, lifecycle, spreads, migrate, Consul Connect,
//! multiregion) change a group's or task's `Type` to `Edited` without a field of their own, as
//! in Nomad.
//!
//! Not here: the scheduler's annotations (`forces create`, update counts), which the server adds
//! once it has planned.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::job::Job;
use crate::lenient::null_as_default;

/// How a value changed between two versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum DiffType {
    #[default]
    None,
    Added,
    Deleted,
    Edited,
}

impl DiffType {
    /// Nomad's sort rank: Edited, then Added, then Deleted, then None.
    fn rank(self) -> u8 {
        match self {
            DiffType::Edited => 0,
            DiffType::Added => 1,
            DiffType::Deleted => 2,
            DiffType::None => 3,
        }
    }
}

/// Encodes an empty list as `null`, as Go encodes a nil slice.
fn null_if_empty<S: Serializer, T: Serialize>(
    list: &[T],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    if list.is_empty() {
        serializer.serialize_none()
    } else {
        list.serialize(serializer)
    }
}

/// One primitive field's change.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct FieldDiff {
    #[serde(deserialize_with = "null_as_default")]
    pub r#type: DiffType,
    #[serde(deserialize_with = "null_as_default")]
    pub name: String,
    #[serde(deserialize_with = "null_as_default")]
    pub old: String,
    #[serde(deserialize_with = "null_as_default")]
    pub new: String,
    #[serde(serialize_with = "null_if_empty", deserialize_with = "null_as_default")]
    pub annotations: Vec<String>,
}

/// A nested block's change.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct ObjectDiff {
    #[serde(deserialize_with = "null_as_default")]
    pub r#type: DiffType,
    #[serde(deserialize_with = "null_as_default")]
    pub name: String,
    #[serde(serialize_with = "null_if_empty", deserialize_with = "null_as_default")]
    pub fields: Vec<FieldDiff>,
    #[serde(serialize_with = "null_if_empty", deserialize_with = "null_as_default")]
    pub objects: Vec<ObjectDiff>,
}

/// A task's change; `Annotations` say what the change forces (set by the planner).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct TaskDiff {
    #[serde(deserialize_with = "null_as_default")]
    pub r#type: DiffType,
    #[serde(deserialize_with = "null_as_default")]
    pub name: String,
    #[serde(serialize_with = "null_if_empty", deserialize_with = "null_as_default")]
    pub fields: Vec<FieldDiff>,
    #[serde(serialize_with = "null_if_empty", deserialize_with = "null_as_default")]
    pub objects: Vec<ObjectDiff>,
    #[serde(serialize_with = "null_if_empty", deserialize_with = "null_as_default")]
    pub annotations: Vec<String>,
}

/// A task group's change; `Updates` counts what the scheduler would do (set by the planner).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct TaskGroupDiff {
    #[serde(deserialize_with = "null_as_default")]
    pub r#type: DiffType,
    #[serde(deserialize_with = "null_as_default")]
    pub name: String,
    #[serde(serialize_with = "null_if_empty", deserialize_with = "null_as_default")]
    pub fields: Vec<FieldDiff>,
    #[serde(serialize_with = "null_if_empty", deserialize_with = "null_as_default")]
    pub objects: Vec<ObjectDiff>,
    #[serde(serialize_with = "null_if_empty", deserialize_with = "null_as_default")]
    pub tasks: Vec<TaskDiff>,
    /// `None` encodes as `null`: no annotation was made for the group.
    pub updates: Option<BTreeMap<String, u64>>,
}

/// The change between two versions of a job.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct JobDiff {
    #[serde(deserialize_with = "null_as_default")]
    pub r#type: DiffType,
    #[serde(rename = "ID", deserialize_with = "null_as_default")]
    pub id: String,
    #[serde(serialize_with = "null_if_empty", deserialize_with = "null_as_default")]
    pub fields: Vec<FieldDiff>,
    #[serde(serialize_with = "null_if_empty", deserialize_with = "null_as_default")]
    pub objects: Vec<ObjectDiff>,
    #[serde(serialize_with = "null_if_empty", deserialize_with = "null_as_default")]
    pub task_groups: Vec<TaskGroupDiff>,
}

/// Why two jobs cannot be compared.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobDiffError {
    #[error("can not diff jobs with different IDs: {old:?} and {new:?}")]
    DifferentIds { old: String, new: String },
    #[error("failed to encode the job: {0}")]
    Encode(String),
}

/// Job fields Nomad leaves out of a job's diff: they change on every register.
const JOB_FILTER: &[&str] = &[
    "ID",
    "Status",
    "StatusDescription",
    "Version",
    "Stable",
    "CreateIndex",
    "ModifyIndex",
    "JobModifyIndex",
    "Update",
    "SubmitTime",
    "NomadTokenID",
    "VersionTag",
    // A byte slice in Nomad, which its flattening skips.
    "Payload",
];

/// Group fields Nomad holds behind pointers (not flattened) or filters.
const GROUP_FILTER: &[&str] = &[
    "Name",
    "ShutdownDelay",
    "StopAfterClientDisconnect",
    "MaxClientDisconnect",
    "MaxRunDuration",
];

const TASK_FILTER: &[&str] = &["Name", "Config"];

/// Template fields held behind pointers in Nomad.
const TEMPLATE_FILTER: &[&str] = &["Uid", "Gid"];

/// String maps Nomad flattens as `Name[key]` at each level.
const JOB_MAPS: &[&str] = &["Meta"];
const TASK_MAPS: &[&str] = &["Env", "Meta"];
const SERVICE_MAPS: &[&str] = &["Meta", "CanaryMeta", "TaggedAddresses"];
const ARTIFACT_MAPS: &[&str] = &["GetterOptions", "GetterHeaders"];

/// Compares two versions of a job (`None`: the job does not exist on that side). With
/// `contextual`, a changed block lists its unchanged fields too, as `job plan` asks.
pub fn diff_jobs(
    old: Option<&Job>,
    new: Option<&Job>,
    contextual: bool,
) -> Result<JobDiff, JobDiffError> {
    let encode = |job: Option<&Job>| -> Result<Option<Value>, JobDiffError> {
        job.map(|job| {
            serde_json::to_value(job).map_err(|error| JobDiffError::Encode(error.to_string()))
        })
        .transpose()
    };
    let (old, new) = (encode(old)?, encode(new)?);
    diff_job_values(old.as_ref(), new.as_ref(), contextual)
}

fn diff_job_values(
    old: Option<&Value>,
    new: Option<&Value>,
    contextual: bool,
) -> Result<JobDiff, JobDiffError> {
    let mut diff = JobDiff::default();
    let (old_flat, new_flat) = match (old, new) {
        (None, None) => return Ok(diff),
        (None, Some(new)) => {
            diff.r#type = DiffType::Added;
            diff.id = text(new, "ID");
            (None, Some(flatten(new, JOB_FILTER, JOB_MAPS)))
        }
        (Some(old), None) => {
            diff.r#type = DiffType::Deleted;
            diff.id = text(old, "ID");
            (Some(flatten(old, JOB_FILTER, JOB_MAPS)), None)
        }
        (Some(old), Some(new)) => {
            let (old_id, new_id) = (text(old, "ID"), text(new, "ID"));
            if old_id != new_id {
                return Err(JobDiffError::DifferentIds {
                    old: old_id,
                    new: new_id,
                });
            }
            diff.id = new_id;
            (
                Some(flatten(old, JOB_FILTER, JOB_MAPS)),
                Some(flatten(new, JOB_FILTER, JOB_MAPS)),
            )
        }
    };
    diff.fields = field_diffs(old_flat.as_ref(), new_flat.as_ref(), false);

    if let Some(datacenters) = string_set_diff(
        &strings(old, "Datacenters"),
        &strings(new, "Datacenters"),
        "Datacenters",
        contextual,
    ) && datacenters.r#type != DiffType::None
    {
        diff.objects.push(datacenters);
    }
    diff.objects.extend(placement_diffs(old, new, contextual));
    diff.task_groups = named_list_diff(old, new, "TaskGroups", |old, new| {
        group_diff(old, new, contextual)
    });
    diff.objects.extend(primitive_object_diff(
        member(old, "Periodic"),
        member(new, "Periodic"),
        &[],
        "Periodic",
        contextual,
    ));
    diff.objects.extend(block_diff(
        member(old, "ParameterizedJob"),
        member(new, "ParameterizedJob"),
        "ParameterizedJob",
        &[],
        &[],
        contextual,
        |old, new, objects| {
            objects.extend(string_set_diff(
                &strings(old, "MetaOptional"),
                &strings(new, "MetaOptional"),
                "MetaOptional",
                contextual,
            ));
            objects.extend(string_set_diff(
                &strings(old, "MetaRequired"),
                &strings(new, "MetaRequired"),
                "MetaRequired",
                contextual,
            ));
        },
    ));

    if diff.r#type == DiffType::None {
        let changed = diff
            .fields
            .iter()
            .any(|field| field.r#type != DiffType::None)
            || diff
                .objects
                .iter()
                .any(|object| object.r#type != DiffType::None)
            || diff
                .task_groups
                .iter()
                .any(|group| group.r#type != DiffType::None);
        if changed {
            diff.r#type = DiffType::Edited;
        }
    }
    Ok(diff)
}

/// Constraints and affinities of one level, as sets.
fn placement_diffs(old: Option<&Value>, new: Option<&Value>, contextual: bool) -> Vec<ObjectDiff> {
    let mut diffs = primitive_object_set_diff(
        &list(old, "Constraints"),
        &list(new, "Constraints"),
        &[],
        "Constraint",
        contextual,
    );
    diffs.extend(primitive_object_set_diff(
        &list(old, "Affinities"),
        &list(new, "Affinities"),
        &[],
        "Affinity",
        contextual,
    ));
    diffs
}

fn group_diff(old: Option<&Value>, new: Option<&Value>, contextual: bool) -> TaskGroupDiff {
    let mut diff = TaskGroupDiff::default();
    let (mut old_flat, mut new_flat) = (None, None);
    match (old, new) {
        (None, None) => return diff,
        (None, Some(new)) => {
            diff.r#type = DiffType::Added;
            diff.name = text(new, "Name");
            new_flat = Some(flatten(new, GROUP_FILTER, JOB_MAPS));
        }
        (Some(old), None) => {
            diff.r#type = DiffType::Deleted;
            diff.name = text(old, "Name");
            old_flat = Some(flatten(old, GROUP_FILTER, JOB_MAPS));
        }
        (Some(old_group), Some(new_group)) => {
            if old_group != new_group {
                diff.r#type = DiffType::Edited;
            }
            diff.name = text(new_group, "Name");
            let mut old_fields = flatten(old_group, GROUP_FILTER, JOB_MAPS);
            let mut new_fields = flatten(new_group, GROUP_FILTER, JOB_MAPS);
            // Nomad compares these two pointer-held durations only when both groups exist.
            for key in ["ShutdownDelay", "StopAfterClientDisconnect"] {
                old_fields.insert(
                    key.to_string(),
                    member(old, key).map(primitive_text).unwrap_or_default(),
                );
                new_fields.insert(
                    key.to_string(),
                    member(new, key).map(primitive_text).unwrap_or_default(),
                );
            }
            old_flat = Some(old_fields);
            new_flat = Some(new_fields);
        }
    }
    diff.fields = field_diffs(old_flat.as_ref(), new_flat.as_ref(), false);
    diff.objects.extend(placement_diffs(old, new, contextual));
    for name in [
        "RestartPolicy",
        "ReschedulePolicy",
        "EphemeralDisk",
        "Consul",
    ] {
        diff.objects.extend(primitive_object_diff(
            member(old, name),
            member(new, name),
            &[],
            name,
            contextual,
        ));
    }
    diff.objects.extend(primitive_object_diff(
        member(old, "Update"),
        member(new, "Update"),
        &["Stagger"],
        "Update",
        contextual,
    ));
    diff.objects.extend(network_diffs(old, new, contextual));
    diff.objects.extend(service_diffs(old, new, contextual));
    diff.objects.extend(volume_diffs(old, new, contextual));
    diff.tasks = named_list_diff(old, new, "Tasks", |old, new| {
        task_diff(old, new, contextual)
    });
    diff
}

fn task_diff(old: Option<&Value>, new: Option<&Value>, contextual: bool) -> TaskDiff {
    let mut diff = TaskDiff::default();
    let (old_flat, new_flat) = match (old, new) {
        (None, None) => return diff,
        (None, Some(new)) => {
            diff.r#type = DiffType::Added;
            diff.name = text(new, "Name");
            (None, Some(flatten(new, TASK_FILTER, TASK_MAPS)))
        }
        (Some(old), None) => {
            diff.r#type = DiffType::Deleted;
            diff.name = text(old, "Name");
            (Some(flatten(old, TASK_FILTER, TASK_MAPS)), None)
        }
        (Some(old_task), Some(new_task)) => {
            if old_task != new_task {
                diff.r#type = DiffType::Edited;
            }
            diff.name = text(new_task, "Name");
            (
                Some(flatten(old_task, TASK_FILTER, TASK_MAPS)),
                Some(flatten(new_task, TASK_FILTER, TASK_MAPS)),
            )
        }
    };
    diff.fields = field_diffs(old_flat.as_ref(), new_flat.as_ref(), false);
    diff.objects.extend(placement_diffs(old, new, contextual));
    diff.objects.extend(config_diff(
        member(old, "Config"),
        member(new, "Config"),
        contextual,
    ));
    diff.objects.extend(block_diff(
        member(old, "Resources"),
        member(new, "Resources"),
        "Resources",
        &[],
        &[],
        contextual,
        |old, new, objects| {
            objects.extend(network_diffs(old, new, contextual));
            objects.extend(keyed_diffs(
                &list(old, "Devices"),
                &list(new, "Devices"),
                "Name",
                |old, new| block_diff(old, new, "Device", &[], &[], contextual, |_, _, _| {}),
            ));
        },
    ));
    for name in ["LogConfig", "DispatchPayload"] {
        diff.objects.extend(primitive_object_diff(
            member(old, name),
            member(new, name),
            &[],
            name,
            contextual,
        ));
    }
    diff.objects.extend(object_set_diff(
        &list(old, "Artifacts"),
        &list(new, "Artifacts"),
        &[],
        ARTIFACT_MAPS,
        "Artifact",
        contextual,
    ));
    diff.objects.extend(service_diffs(old, new, contextual));
    diff.objects.extend(block_diff(
        member(old, "Vault"),
        member(new, "Vault"),
        "Vault",
        &[],
        &[],
        contextual,
        |old, new, objects| {
            objects.extend(string_set_diff(
                &strings(old, "Policies"),
                &strings(new, "Policies"),
                "Policies",
                contextual,
            ));
        },
    ));
    diff.objects.extend(object_set_diff(
        &list(old, "Templates"),
        &list(new, "Templates"),
        TEMPLATE_FILTER,
        &[],
        "Template",
        contextual,
    ));
    diff
}

/// Services of a group or task, matched by name.
fn service_diffs(old: Option<&Value>, new: Option<&Value>, contextual: bool) -> Vec<ObjectDiff> {
    keyed_diffs(
        &list(old, "Services"),
        &list(new, "Services"),
        "Name",
        |old, new| {
            block_diff(
                old,
                new,
                "Service",
                &[],
                SERVICE_MAPS,
                contextual,
                |old, new, objects| {
                    objects.extend(string_set_diff(
                        &strings(old, "CanaryTags"),
                        &strings(new, "CanaryTags"),
                        "CanaryTags",
                        contextual,
                    ));
                    objects.extend(string_set_diff(
                        &strings(old, "Tags"),
                        &strings(new, "Tags"),
                        "Tags",
                        contextual,
                    ));
                    objects.extend(keyed_diffs(
                        &list(old, "Checks"),
                        &list(new, "Checks"),
                        "Name",
                        |old, new| {
                            block_diff(
                                old,
                                new,
                                "Check",
                                &[],
                                &[],
                                contextual,
                                |old, new, objects| {
                                    objects.extend(full_map_diff(
                                        member(old, "Header"),
                                        member(new, "Header"),
                                        "Header",
                                        contextual,
                                    ));
                                    objects.extend(block_diff(
                                        member(old, "CheckRestart"),
                                        member(new, "CheckRestart"),
                                        "CheckRestart",
                                        &[],
                                        &[],
                                        contextual,
                                        |_, _, _| {},
                                    ));
                                },
                            )
                        },
                    ));
                },
            )
        },
    )
}

/// Networks of a group or of task resources, as sets.
fn network_diffs(old: Option<&Value>, new: Option<&Value>, contextual: bool) -> Vec<ObjectDiff> {
    let (old, new) = (list(old, "Networks"), list(new, "Networks"));
    let mut diffs = Vec::new();
    for network in &old {
        if !new.contains(network) {
            diffs.extend(network_diff(Some(network), None, contextual));
        }
    }
    for network in &new {
        if !old.contains(network) {
            diffs.extend(network_diff(None, Some(network), contextual));
        }
    }
    sort_objects(&mut diffs);
    diffs
}

fn network_diff(old: Option<&Value>, new: Option<&Value>, contextual: bool) -> Option<ObjectDiff> {
    block_diff(
        old,
        new,
        "Network",
        &["Device", "CIDR", "IP"],
        &[],
        contextual,
        |old, new, objects| {
            for (key, name, filter) in [
                ("ReservedPorts", "Static Port", &[][..]),
                ("DynamicPorts", "Dynamic Port", &["Value"][..]),
            ] {
                objects.extend(keyed_diffs(
                    &list(old, key),
                    &list(new, key),
                    "Label",
                    |old, new| primitive_object_diff(old, new, filter, name, contextual),
                ));
            }
            objects.extend(dns_diff(member(old, "DNS"), member(new, "DNS"), contextual));
        },
    )
}

fn dns_diff(old: Option<&Value>, new: Option<&Value>, contextual: bool) -> Option<ObjectDiff> {
    if old == new {
        return None;
    }
    let flat = |dns: &Value| {
        let mut fields = BTreeMap::new();
        for key in ["Servers", "Searches", "Options"] {
            let values = strings(Some(dns), key);
            if !values.is_empty() {
                fields.insert(key.to_string(), values.join(","));
            }
        }
        fields
    };
    let (r#type, old_flat, new_flat) = match (old, new) {
        (None, Some(new)) => (DiffType::Added, None, Some(flat(new))),
        (Some(old), None) => (DiffType::Deleted, Some(flat(old)), None),
        (Some(old), Some(new)) => (DiffType::Edited, Some(flat(old)), Some(flat(new))),
        (None, None) => return None,
    };
    Some(ObjectDiff {
        r#type,
        name: "DNS".into(),
        fields: field_diffs(old_flat.as_ref(), new_flat.as_ref(), contextual),
        objects: Vec::new(),
    })
}

/// A group's volume requests, by name.
fn volume_diffs(old: Option<&Value>, new: Option<&Value>, contextual: bool) -> Vec<ObjectDiff> {
    let empty = Map::new();
    let old = member(old, "Volumes")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let new = member(new, "Volumes")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let names: BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    let mut diffs = Vec::new();
    for name in names {
        diffs.extend(block_diff(
            old.get(name),
            new.get(name),
            "Volume",
            &[],
            &[],
            contextual,
            |old, new, objects| {
                objects.extend(block_diff(
                    member(old, "MountOptions"),
                    member(new, "MountOptions"),
                    "MountOptions",
                    &[],
                    &[],
                    contextual,
                    |old, new, objects| {
                        objects.extend(string_set_diff(
                            &strings(old, "MountFlags"),
                            &strings(new, "MountFlags"),
                            "MountFlags",
                            contextual,
                        ));
                    },
                ));
            },
        ));
    }
    diffs
}

/// A task's driver configuration: every value, nested ones as `key[0]`, `key[sub]`.
fn config_diff(old: Option<&Value>, new: Option<&Value>, contextual: bool) -> Option<ObjectDiff> {
    let is_empty =
        |value: Option<&Value>| value.and_then(Value::as_object).is_none_or(Map::is_empty);
    if old == new || (is_empty(old) && is_empty(new)) {
        return None;
    }
    let r#type = if is_empty(old) {
        DiffType::Added
    } else if is_empty(new) {
        DiffType::Deleted
    } else {
        DiffType::Edited
    };
    let flat = |value: Option<&Value>| {
        let mut fields = BTreeMap::new();
        if let Some(value) = value {
            flatten_all("", value, &mut fields);
        }
        fields
    };
    Some(ObjectDiff {
        r#type,
        name: "Config".into(),
        fields: field_diffs(Some(&flat(old)), Some(&flat(new)), contextual),
        objects: Vec::new(),
    })
}

/// A map of lists (a check's `Header`), flattened in full.
fn full_map_diff(
    old: Option<&Value>,
    new: Option<&Value>,
    name: &str,
    contextual: bool,
) -> Option<ObjectDiff> {
    let is_empty =
        |value: Option<&Value>| value.and_then(Value::as_object).is_none_or(Map::is_empty);
    if old == new || (is_empty(old) && is_empty(new)) {
        return None;
    }
    let flat = |value: Option<&Value>| {
        let mut fields = BTreeMap::new();
        if let Some(value) = value {
            flatten_all("", value, &mut fields);
        }
        fields
    };
    let (r#type, old_flat, new_flat) = if is_empty(old) {
        (DiffType::Added, None, Some(flat(new)))
    } else if is_empty(new) {
        (DiffType::Deleted, Some(flat(old)), None)
    } else {
        (DiffType::Edited, Some(flat(old)), Some(flat(new)))
    };
    Some(ObjectDiff {
        r#type,
        name: name.into(),
        fields: field_diffs(old_flat.as_ref(), new_flat.as_ref(), contextual),
        objects: Vec::new(),
    })
}

/// The common shape of a block's diff (Nomad's per-type `Diff` methods): nothing when equal,
/// else Added, Deleted or Edited with its primitive fields, then its sub-objects from `nested`
/// (called with the two sides, a missing side as `None`).
fn block_diff(
    old: Option<&Value>,
    new: Option<&Value>,
    name: &str,
    filter: &[&str],
    maps: &[&str],
    contextual: bool,
    nested: impl FnOnce(Option<&Value>, Option<&Value>, &mut Vec<ObjectDiff>),
) -> Option<ObjectDiff> {
    let old = old.filter(|value| !value.is_null());
    let new = new.filter(|value| !value.is_null());
    if old == new {
        return None;
    }
    let (r#type, old_flat, new_flat) = match (old, new) {
        (None, Some(new)) => (DiffType::Added, None, Some(flatten(new, filter, maps))),
        (Some(old), None) => (DiffType::Deleted, Some(flatten(old, filter, maps)), None),
        (Some(old), Some(new)) => (
            DiffType::Edited,
            Some(flatten(old, filter, maps)),
            Some(flatten(new, filter, maps)),
        ),
        (None, None) => return None,
    };
    let mut objects = Vec::new();
    nested(old, new, &mut objects);
    Some(ObjectDiff {
        r#type,
        name: name.into(),
        fields: field_diffs(old_flat.as_ref(), new_flat.as_ref(), contextual),
        objects,
    })
}

/// Lists of blocks matched by a key (`Name`, `Label`): each pair diffed, sorted.
fn keyed_diffs(
    old: &[Value],
    new: &[Value],
    key: &str,
    mut diff: impl FnMut(Option<&Value>, Option<&Value>) -> Option<ObjectDiff>,
) -> Vec<ObjectDiff> {
    let index = |values: &[Value]| -> BTreeMap<String, Value> {
        values
            .iter()
            .map(|value| (text(value, key), value.clone()))
            .collect()
    };
    let (old, new) = (index(old), index(new));
    let mut diffs = Vec::new();
    for (name, old_value) in &old {
        diffs.extend(diff(Some(old_value), new.get(name)));
    }
    for (name, new_value) in &new {
        if !old.contains_key(name) {
            diffs.extend(diff(None, Some(new_value)));
        }
    }
    sort_objects(&mut diffs);
    diffs
}

/// Task groups or tasks, matched by name and sorted by it.
fn named_list_diff<T>(
    old: Option<&Value>,
    new: Option<&Value>,
    key: &str,
    mut diff: impl FnMut(Option<&Value>, Option<&Value>) -> T,
) -> Vec<T> {
    let index = |values: Vec<Value>| -> BTreeMap<String, Value> {
        values
            .into_iter()
            .map(|value| (text(&value, "Name"), value))
            .collect()
    };
    let (old, new) = (index(list(old, key)), index(list(new, key)));
    let names: BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    names
        .into_iter()
        .map(|name| diff(old.get(name), new.get(name)))
        .collect()
}

/// Nomad's `primitiveObjectDiff`: a block's primitive fields; `None` when none changed.
fn primitive_object_diff(
    old: Option<&Value>,
    new: Option<&Value>,
    filter: &[&str],
    name: &str,
    contextual: bool,
) -> Option<ObjectDiff> {
    primitive_object_diff_with_maps(old, new, filter, &[], name, contextual)
}

fn primitive_object_diff_with_maps(
    old: Option<&Value>,
    new: Option<&Value>,
    filter: &[&str],
    maps: &[&str],
    name: &str,
    contextual: bool,
) -> Option<ObjectDiff> {
    let flat = |value: Option<&Value>| {
        value
            .filter(|value| !value.is_null())
            .map(|value| flatten(value, filter, maps))
    };
    let fields = field_diffs(flat(old).as_ref(), flat(new).as_ref(), contextual);
    let edited = fields.iter().any(|field| field.r#type == DiffType::Edited);
    let added = fields.iter().any(|field| field.r#type == DiffType::Added);
    let deleted = fields.iter().any(|field| field.r#type == DiffType::Deleted);
    let r#type = if edited || (added && deleted) {
        DiffType::Edited
    } else if added {
        DiffType::Added
    } else if deleted {
        DiffType::Deleted
    } else {
        return None;
    };
    Some(ObjectDiff {
        r#type,
        name: name.into(),
        fields,
        objects: Vec::new(),
    })
}

/// Nomad's `primitiveObjectSetDiff`: blocks compared whole; each one only on one side is an
/// Added or Deleted object with its primitive fields.
fn primitive_object_set_diff(
    old: &[Value],
    new: &[Value],
    filter: &[&str],
    name: &str,
    contextual: bool,
) -> Vec<ObjectDiff> {
    object_set_diff(old, new, filter, &[], name, contextual)
}

fn object_set_diff(
    old: &[Value],
    new: &[Value],
    filter: &[&str],
    maps: &[&str],
    name: &str,
    contextual: bool,
) -> Vec<ObjectDiff> {
    let set = |values: &[Value]| -> BTreeMap<String, Value> {
        values
            .iter()
            .map(|value| (value.to_string(), value.clone()))
            .collect()
    };
    let (old, new) = (set(old), set(new));
    let mut diffs = Vec::new();
    for (key, value) in &old {
        if !new.contains_key(key) {
            diffs.extend(primitive_object_diff_with_maps(
                Some(value),
                None,
                filter,
                maps,
                name,
                contextual,
            ));
        }
    }
    for (key, value) in &new {
        if !old.contains_key(key) {
            diffs.extend(primitive_object_diff_with_maps(
                None,
                Some(value),
                filter,
                maps,
                name,
                contextual,
            ));
        }
    }
    sort_objects(&mut diffs);
    diffs
}

/// Nomad's `stringSetDiff`: a list of strings as a set; with `contextual`, unchanged members are
/// listed too (and an unchanged set gives a `None` object).
fn string_set_diff(
    old: &[String],
    new: &[String],
    name: &str,
    contextual: bool,
) -> Option<ObjectDiff> {
    let old: BTreeSet<&String> = old.iter().collect();
    let new: BTreeSet<&String> = new.iter().collect();
    if old == new && !contextual {
        return None;
    }
    let mut fields = Vec::new();
    let (mut added, mut removed) = (false, false);
    for value in &old {
        if !new.contains(value) {
            fields.extend(field_diff(value, "", name, contextual));
            removed = true;
        } else if contextual {
            fields.extend(field_diff(value, value, name, contextual));
        }
    }
    for value in &new {
        if !old.contains(value) {
            fields.extend(field_diff("", value, name, contextual));
            added = true;
        }
    }
    sort_fields(&mut fields);
    let r#type = match (added, removed) {
        (true, true) => DiffType::Edited,
        (true, false) => DiffType::Added,
        (false, true) => DiffType::Deleted,
        (false, false) if fields.is_empty() => return None,
        (false, false) => DiffType::None,
    };
    Some(ObjectDiff {
        r#type,
        name: name.into(),
        fields,
        objects: Vec::new(),
    })
}

fn field_diff(old: &str, new: &str, name: &str, contextual: bool) -> Option<FieldDiff> {
    let mut diff = FieldDiff {
        name: name.into(),
        ..FieldDiff::default()
    };
    if old == new {
        if !contextual {
            return None;
        }
        diff.old = old.into();
        diff.new = new.into();
        return Some(diff);
    }
    diff.r#type = if old.is_empty() {
        DiffType::Added
    } else if new.is_empty() {
        DiffType::Deleted
    } else {
        DiffType::Edited
    };
    diff.old = old.into();
    diff.new = new.into();
    Some(diff)
}

/// Nomad's `fieldDiffs` over two flattened levels (a missing level has no fields).
fn field_diffs(
    old: Option<&BTreeMap<String, String>>,
    new: Option<&BTreeMap<String, String>>,
    contextual: bool,
) -> Vec<FieldDiff> {
    let empty = BTreeMap::new();
    let (old, new) = (old.unwrap_or(&empty), new.unwrap_or(&empty));
    let mut diffs = Vec::new();
    for (key, old_value) in old {
        let new_value = new.get(key).map_or("", String::as_str);
        diffs.extend(field_diff(old_value, new_value, key, contextual));
    }
    for (key, new_value) in new {
        if !old.contains_key(key) {
            diffs.extend(field_diff("", new_value, key, contextual));
        }
    }
    sort_fields(&mut diffs);
    diffs
}

fn sort_fields(fields: &mut [FieldDiff]) {
    fields.sort_by(compare_fields);
}

fn compare_fields(a: &FieldDiff, b: &FieldDiff) -> Ordering {
    a.name
        .cmp(&b.name)
        .then_with(|| a.old.cmp(&b.old))
        .then_with(|| a.new.cmp(&b.new))
}

fn sort_objects(objects: &mut [ObjectDiff]) {
    for object in objects.iter_mut() {
        sort_fields(&mut object.fields);
        sort_objects(&mut object.objects);
    }
    objects.sort_by(compare_objects);
}

/// Nomad's `ObjectDiff.Less`: by name, type, number of fields and objects, then contents.
fn compare_objects(a: &ObjectDiff, b: &ObjectDiff) -> Ordering {
    a.name
        .cmp(&b.name)
        .then_with(|| a.r#type.rank().cmp(&b.r#type.rank()))
        .then_with(|| a.fields.len().cmp(&b.fields.len()))
        .then_with(|| a.objects.len().cmp(&b.objects.len()))
        .then_with(|| {
            a.fields
                .iter()
                .zip(&b.fields)
                .map(|(a, b)| compare_fields(a, b))
                .find(|order| order.is_ne())
                .unwrap_or(Ordering::Equal)
        })
        .then_with(|| {
            a.objects
                .iter()
                .zip(&b.objects)
                .map(|(a, b)| compare_objects(a, b))
                .find(|order| order.is_ne())
                .unwrap_or(Ordering::Equal)
        })
}

/// Nomad's primitive flattening of one level: strings, numbers and booleans by field name,
/// the named string maps as `Map[key]`; nested blocks, lists, `null` and `filter`ed fields left
/// out.
fn flatten(value: &Value, filter: &[&str], maps: &[&str]) -> BTreeMap<String, String> {
    let mut flat = BTreeMap::new();
    let Some(object) = value.as_object() else {
        return flat;
    };
    for (key, field) in object {
        if filter.contains(&key.as_str()) {
            continue;
        }
        match field {
            Value::String(_) | Value::Number(_) | Value::Bool(_) => {
                flat.insert(key.clone(), primitive_text(field));
            }
            Value::Object(map) if maps.contains(&key.as_str()) => {
                for (map_key, map_value) in map {
                    if !matches!(map_value, Value::Null | Value::Array(_) | Value::Object(_)) {
                        flat.insert(format!("{key}[{map_key}]"), primitive_text(map_value));
                    }
                }
            }
            _ => {}
        }
    }
    flat
}

/// Nomad's full flattening (driver config, check headers): nested maps as `key[sub]`, lists as
/// `key[0]`, `null` as `nil`.
fn flatten_all(prefix: &str, value: &Value, out: &mut BTreeMap<String, String>) {
    match value {
        Value::Object(map) => {
            for (key, value) in map {
                let name = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}[{key}]")
                };
                flatten_all(&name, value, out);
            }
        }
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                flatten_all(&format!("{prefix}[{index}]"), item, out);
            }
        }
        Value::Null => {
            out.insert(prefix.to_string(), "nil".into());
        }
        _ => {
            out.insert(prefix.to_string(), primitive_text(value));
        }
    }
}

/// A primitive as Go's `%v` prints it.
fn primitive_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Bool(flag) => flag.to_string(),
        Value::Number(number) => {
            if let Some(integer) = number.as_i64() {
                integer.to_string()
            } else if let Some(integer) = number.as_u64() {
                integer.to_string()
            } else {
                go_float(number.as_f64().unwrap_or_default())
            }
        }
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// A float as Go's `%v` prints it: the shortest representation, in decimal notation for
/// exponents from -4 to 20 and as `1.5e+21` (at least two exponent digits) otherwise.
fn go_float(value: f64) -> String {
    let exponent = if value == 0.0 {
        0
    } else {
        // The decimal exponent of a finite, non-zero f64 lies within ±400.
        value.abs().log10().floor() as i64
    };
    if (-4..21).contains(&exponent) {
        let shortest = format!("{value}");
        shortest
            .strip_suffix(".0")
            .map_or(shortest.clone(), str::to_string)
    } else {
        let scientific = format!("{value:e}");
        let (mantissa, power) = scientific.split_once('e').unwrap_or((&scientific, "0"));
        let (sign, digits) = power
            .strip_prefix('-')
            .map_or(("+", power), |digits| ("-", digits));
        format!("{mantissa}e{sign}{digits:0>2}")
    }
}

fn member<'a>(value: Option<&'a Value>, key: &str) -> Option<&'a Value> {
    value
        .and_then(|value| value.get(key))
        .filter(|value| !value.is_null())
}

fn text(value: &Value, key: &str) -> String {
    value
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn list(value: Option<&Value>, key: &str) -> Vec<Value> {
    member(value, key)
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn strings(value: Option<&Value>, key: &str) -> Vec<String> {
    list(value, key)
        .iter()
        .filter_map(|value| value.as_str().map(str::to_string))
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)] // a failed expectation is a failed test
mod tests {
    use super::*;

    #[test]
    fn unchanged_jobs_have_no_diff() {
        let job = Job {
            id: "web".into(),
            ..Job::default()
        };
        let diff = diff_jobs(Some(&job), Some(&job), true).unwrap();
        assert_eq!(diff.r#type, DiffType::None);
        assert!(diff.fields.is_empty());
    }

    #[test]
    fn jobs_with_different_ids_are_refused() {
        let old = Job {
            id: "a".into(),
            ..Job::default()
        };
        let new = Job {
            id: "b".into(),
            ..Job::default()
        };
        assert_eq!(
            diff_jobs(Some(&old), Some(&new), true)
                .unwrap_err()
                .to_string(),
            r#"can not diff jobs with different IDs: "a" and "b""#
        );
    }

    #[test]
    fn go_prints_floats_without_a_needless_point() {
        assert_eq!(go_float(8080.0), "8080");
        assert_eq!(go_float(0.5), "0.5");
        assert_eq!(go_float(1e6), "1000000");
        assert_eq!(go_float(1e21), "1e+21");
        assert_eq!(go_float(0.00001), "1e-05");
    }

    #[test]
    fn empty_lists_encode_as_null() {
        let diff = JobDiff {
            id: "web".into(),
            ..JobDiff::default()
        };
        let json = serde_json::to_value(&diff).unwrap();
        assert_eq!(json["Fields"], Value::Null);
        assert_eq!(json["TaskGroups"], Value::Null);
        assert_eq!(json["Type"], "None");
    }
}
