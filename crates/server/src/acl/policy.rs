//! Nomad's ACL policy language, parsed: `namespace "<glob>" { policy, capabilities,
//! variables { path "<glob>" { capabilities } } }`, `node_pool "<glob>" { … }`,
//! `host_volume "<glob>" { … }`, and the coarse `agent`, `node`, `operator`, `quota` and
//! `plugin` blocks, written in HCL or JSON.
//!
//! A coarse `policy` expands to capabilities as Nomad's `expandNamespacePolicy` (and its node
//! pool and host volume counterparts) does, so the compiled [`crate::acl::Acl`] only ever
//! checks capabilities. Unknown blocks and keys are refused by name.
//!
//! Not here: combining policies into an ACL (`compiled`), storing them (the state store).

use serde_json::{Map, Value};

pub const POLICY_DENY: &str = "deny";
pub const POLICY_READ: &str = "read";
pub const POLICY_LIST: &str = "list";
pub const POLICY_WRITE: &str = "write";
pub const POLICY_SCALE: &str = "scale";

/// Namespace capabilities, as Nomad names them.
pub mod capability {
    pub const DENY: &str = "deny";
    pub const LIST_JOBS: &str = "list-jobs";
    pub const PARSE_JOB: &str = "parse-job";
    pub const READ_JOB: &str = "read-job";
    pub const SUBMIT_JOB: &str = "submit-job";
    pub const DISPATCH_JOB: &str = "dispatch-job";
    pub const READ_LOGS: &str = "read-logs";
    pub const READ_FS: &str = "read-fs";
    pub const ALLOC_EXEC: &str = "alloc-exec";
    pub const ALLOC_NODE_EXEC: &str = "alloc-node-exec";
    pub const ALLOC_LIFECYCLE: &str = "alloc-lifecycle";
    pub const SENTINEL_OVERRIDE: &str = "sentinel-override";
    pub const CSI_REGISTER_PLUGIN: &str = "csi-register-plugin";
    pub const CSI_WRITE_VOLUME: &str = "csi-write-volume";
    pub const CSI_READ_VOLUME: &str = "csi-read-volume";
    pub const CSI_LIST_VOLUME: &str = "csi-list-volume";
    pub const CSI_MOUNT_VOLUME: &str = "csi-mount-volume";
    pub const LIST_SCALING_POLICIES: &str = "list-scaling-policies";
    pub const READ_SCALING_POLICY: &str = "read-scaling-policy";
    pub const READ_JOB_SCALING: &str = "read-job-scaling";
    pub const SCALE_JOB: &str = "scale-job";
    pub const SUBMIT_RECOMMENDATION: &str = "submit-recommendation";

    pub const ALL: &[&str] = &[
        DENY,
        LIST_JOBS,
        PARSE_JOB,
        READ_JOB,
        SUBMIT_JOB,
        DISPATCH_JOB,
        READ_LOGS,
        READ_FS,
        ALLOC_EXEC,
        ALLOC_NODE_EXEC,
        ALLOC_LIFECYCLE,
        SENTINEL_OVERRIDE,
        CSI_REGISTER_PLUGIN,
        CSI_WRITE_VOLUME,
        CSI_READ_VOLUME,
        CSI_LIST_VOLUME,
        CSI_MOUNT_VOLUME,
        LIST_SCALING_POLICIES,
        READ_SCALING_POLICY,
        READ_JOB_SCALING,
        SCALE_JOB,
        SUBMIT_RECOMMENDATION,
    ];
}

/// Variables path capabilities.
pub mod variables_capability {
    pub const DENY: &str = "deny";
    pub const READ: &str = "read";
    pub const LIST: &str = "list";
    pub const WRITE: &str = "write";
    pub const DESTROY: &str = "destroy";
    pub const ALL: &[&str] = &[DENY, READ, LIST, WRITE, DESTROY];
}

/// Node pool capabilities.
pub mod node_pool_capability {
    pub const DENY: &str = "deny";
    pub const READ: &str = "read";
    pub const WRITE: &str = "write";
    pub const DELETE: &str = "delete";
    pub const ALL: &[&str] = &[DENY, READ, WRITE, DELETE];
}

/// Host volume capabilities.
pub mod host_volume_capability {
    pub const DENY: &str = "deny";
    pub const MOUNT_READONLY: &str = "mount-readonly";
    pub const MOUNT_READWRITE: &str = "mount-readwrite";
    pub const ALL: &[&str] = &[DENY, MOUNT_READONLY, MOUNT_READWRITE];
}

/// A policy that does not parse or does not validate; the text is Nomad's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("Failed to parse ACL Policy: {0}")]
    Syntax(String),
    #[error("Invalid policy: {0}")]
    Empty(String),
    #[error("{0}")]
    Invalid(String),
}

/// One `path "<glob>"` rule of a namespace's `variables` block.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VariablesPathPolicy {
    pub path: String,
    pub capabilities: Vec<String>,
}

/// One `namespace "<glob>"` block, its coarse policy already expanded into `capabilities`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NamespacePolicy {
    pub name: String,
    pub policy: String,
    pub capabilities: Vec<String>,
    /// `None` without a `variables` block.
    pub variables: Option<Vec<VariablesPathPolicy>>,
}

/// One `host_volume "<glob>"` block.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HostVolumePolicy {
    pub name: String,
    pub policy: String,
    pub capabilities: Vec<String>,
}

/// One `node_pool "<glob>"` block.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodePoolPolicy {
    pub name: String,
    pub policy: String,
    pub capabilities: Vec<String>,
}

/// A parsed policy.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Policy {
    pub namespaces: Vec<NamespacePolicy>,
    pub node_pools: Vec<NodePoolPolicy>,
    pub host_volumes: Vec<HostVolumePolicy>,
    pub agent: Option<String>,
    pub node: Option<String>,
    pub operator: Option<String>,
    pub quota: Option<String>,
    pub plugin: Option<String>,
}

impl Policy {
    pub fn is_empty(&self) -> bool {
        self.namespaces.is_empty()
            && self.node_pools.is_empty()
            && self.host_volumes.is_empty()
            && self.agent.is_none()
            && self.node.is_none()
            && self.operator.is_none()
            && self.quota.is_none()
            && self.plugin.is_none()
    }
}

impl Policy {
    /// The parsed policy as Nomad's `ACLPolicy.RulesJSON` shows it (its `acl.Policy` encoded
    /// with Go's field names; coarse policies already expanded into capabilities), with the
    /// rules' text as `Raw`. Nomad's UI reads it to know what a token may do.
    pub fn rules_json(&self, raw: &str) -> Value {
        fn coarse(policy: &Option<String>) -> Value {
            policy.as_ref().map_or(
                Value::Null,
                |policy| serde_json::json!({ "Policy": policy }),
            )
        }
        fn named(name: &str, policy: &str, capabilities: &[String]) -> Value {
            serde_json::json!({ "Name": name, "Policy": policy, "Capabilities": capabilities })
        }
        let namespaces: Vec<Value> = self
            .namespaces
            .iter()
            .map(|namespace| {
                let mut value = named(&namespace.name, &namespace.policy, &namespace.capabilities);
                value["Variables"] = namespace.variables.as_ref().map_or(Value::Null, |paths| {
                    let paths: Vec<Value> = paths
                        .iter()
                        .map(|path| {
                            serde_json::json!({
                                "PathSpec": path.path,
                                "Capabilities": path.capabilities,
                            })
                        })
                        .collect();
                    serde_json::json!({ "Paths": paths })
                });
                value
            })
            .collect();
        let listed = |blocks: Vec<Value>| {
            if blocks.is_empty() {
                Value::Null
            } else {
                Value::Array(blocks)
            }
        };
        serde_json::json!({
            "Namespaces": listed(namespaces),
            "HostVolumes": listed(self.host_volumes.iter()
                .map(|volume| named(&volume.name, &volume.policy, &volume.capabilities))
                .collect()),
            "NodePools": listed(self.node_pools.iter()
                .map(|pool| named(&pool.name, &pool.policy, &pool.capabilities))
                .collect()),
            "Agent": coarse(&self.agent),
            "Node": coarse(&self.node),
            "Operator": coarse(&self.operator),
            "Quota": coarse(&self.quota),
            "Plugin": coarse(&self.plugin),
            "Raw": raw,
        })
    }
}

/// The capabilities a coarse namespace policy stands for (Nomad's `expandNamespacePolicy`).
pub fn expand_namespace_policy(policy: &str) -> Vec<&'static str> {
    use capability::*;
    let read = [
        LIST_JOBS,
        PARSE_JOB,
        READ_JOB,
        CSI_LIST_VOLUME,
        CSI_READ_VOLUME,
        READ_JOB_SCALING,
        LIST_SCALING_POLICIES,
        READ_SCALING_POLICY,
    ];
    match policy {
        POLICY_DENY => vec![DENY],
        POLICY_READ => read.to_vec(),
        POLICY_WRITE => {
            let mut write = read.to_vec();
            write.extend([
                SCALE_JOB,
                SUBMIT_JOB,
                DISPATCH_JOB,
                READ_LOGS,
                READ_FS,
                ALLOC_EXEC,
                ALLOC_LIFECYCLE,
                CSI_MOUNT_VOLUME,
                CSI_WRITE_VOLUME,
                SUBMIT_RECOMMENDATION,
            ]);
            write
        }
        POLICY_SCALE => vec![
            LIST_SCALING_POLICIES,
            READ_SCALING_POLICY,
            READ_JOB_SCALING,
            SCALE_JOB,
        ],
        _ => Vec::new(),
    }
}

/// Nomad's `expandNodePoolPolicy`.
fn expand_node_pool_policy(policy: &str) -> Vec<&'static str> {
    use node_pool_capability::*;
    match policy {
        POLICY_DENY => vec![DENY],
        POLICY_READ => vec![READ],
        POLICY_WRITE => vec![DELETE, READ, WRITE],
        _ => Vec::new(),
    }
}

fn expand_host_volume_policy(policy: &str) -> Vec<&'static str> {
    use host_volume_capability::*;
    match policy {
        POLICY_DENY => vec![DENY],
        POLICY_READ => vec![MOUNT_READONLY],
        POLICY_WRITE => vec![MOUNT_READONLY, MOUNT_READWRITE],
        _ => Vec::new(),
    }
}

/// A variables rule's capabilities: `deny` alone if present; `read` implies `list`.
fn expand_variables_capabilities(capabilities: Vec<String>) -> Vec<String> {
    use variables_capability::*;
    if capabilities.iter().any(|capability| capability == DENY) {
        return vec![DENY.to_owned()];
    }
    let mut capabilities = capabilities;
    if capabilities.iter().any(|capability| capability == READ)
        && !capabilities.iter().any(|capability| capability == LIST)
    {
        capabilities.push(LIST.to_owned());
    }
    capabilities
}

fn is_valid_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '*')
}

fn is_coarse_policy(policy: &str) -> bool {
    matches!(
        policy,
        POLICY_DENY | POLICY_READ | POLICY_WRITE | POLICY_SCALE
    )
}

/// A block's label and its body.
type LabeledBlock = (String, Map<String, Value>);

/// The blocks under `key`: `{label: body}` objects, or lists of them, as HCL and JSON write.
fn labeled_blocks(value: &Value, key: &str) -> Result<Vec<LabeledBlock>, PolicyError> {
    let mut out = Vec::new();
    match value {
        Value::Object(by_label) => {
            for (label, body) in by_label {
                for body in bodies(body, key)? {
                    out.push((label.clone(), body));
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                out.extend(labeled_blocks(item, key)?);
            }
        }
        _ => {
            return Err(PolicyError::Syntax(format!(
                "{key}: expected a block with a label"
            )));
        }
    }
    Ok(out)
}

/// The bodies of an unlabeled block: an object or a list of objects.
fn bodies(value: &Value, key: &str) -> Result<Vec<Map<String, Value>>, PolicyError> {
    match value {
        Value::Object(body) => Ok(vec![body.clone()]),
        Value::Array(items) => items.iter().try_fold(Vec::new(), |mut all, item| {
            all.extend(bodies(item, key)?);
            Ok(all)
        }),
        _ => Err(PolicyError::Syntax(format!("{key}: expected a block"))),
    }
}

fn string_field(body: &Map<String, Value>, key: &str, block: &str) -> Result<String, PolicyError> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(text)) => Ok(text.clone()),
        Some(_) => Err(PolicyError::Syntax(format!(
            "{block}.{key}: expected a string"
        ))),
    }
}

fn string_list(
    body: &Map<String, Value>,
    key: &str,
    block: &str,
) -> Result<Vec<String>, PolicyError> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| {
                item.as_str().map(str::to_owned).ok_or_else(|| {
                    PolicyError::Syntax(format!("{block}.{key}: expected a list of strings"))
                })
            })
            .collect(),
        Some(_) => Err(PolicyError::Syntax(format!(
            "{block}.{key}: expected a list of strings"
        ))),
    }
}

fn refuse_unknown_keys(
    body: &Map<String, Value>,
    known: &[&str],
    block: &str,
) -> Result<(), PolicyError> {
    match body.keys().find(|key| !known.contains(&key.as_str())) {
        Some(key) => Err(PolicyError::Syntax(format!(
            "{block}: unsupported key {key:?}"
        ))),
        None => Ok(()),
    }
}

/// The last body of a coarse block (`agent`, `node`, …): its `policy`.
fn coarse_block(value: &Value, key: &str) -> Result<String, PolicyError> {
    let mut policy = String::new();
    for body in bodies(value, key)? {
        refuse_unknown_keys(&body, &["policy"], key)?;
        policy = string_field(&body, "policy", key)?;
    }
    Ok(policy)
}

fn parse_variables(
    value: &Value,
    namespace: &str,
) -> Result<Vec<VariablesPathPolicy>, PolicyError> {
    let mut paths = Vec::new();
    for body in bodies(value, "variables")? {
        refuse_unknown_keys(&body, &["path"], "variables")?;
        if let Some(path_blocks) = body.get("path") {
            for (path, rule) in labeled_blocks(path_blocks, "path")? {
                refuse_unknown_keys(&rule, &["capabilities"], "path")?;
                if path.is_empty() {
                    return Err(PolicyError::Invalid(format!(
                        "Invalid missing variable path in namespace {namespace}"
                    )));
                }
                let capabilities = string_list(&rule, "capabilities", "path")?;
                if let Some(bad) = capabilities
                    .iter()
                    .find(|capability| !variables_capability::ALL.contains(&capability.as_str()))
                {
                    return Err(PolicyError::Invalid(format!(
                        "Invalid variable capability '{bad}' in namespace {namespace}"
                    )));
                }
                paths.push(VariablesPathPolicy {
                    path,
                    capabilities: expand_variables_capabilities(capabilities),
                });
            }
        }
    }
    if paths.is_empty() {
        return Err(PolicyError::Invalid(format!(
            "Invalid variable policy: no variable paths in namespace {namespace}"
        )));
    }
    Ok(paths)
}

/// Parses and validates `rules` (HCL, or JSON when it starts with `{`). Empty rules are an
/// empty policy, as Nomad.
pub fn parse(rules: &str) -> Result<Policy, PolicyError> {
    let mut policy = Policy::default();
    if rules.is_empty() {
        return Ok(policy);
    }
    let root: Value = if rules.trim_start().starts_with('{') {
        serde_json::from_str(rules).map_err(|error| PolicyError::Syntax(error.to_string()))?
    } else {
        hcl::from_str(rules).map_err(|error| PolicyError::Syntax(error.to_string()))?
    };
    let Value::Object(root) = root else {
        return Err(PolicyError::Syntax("expected blocks".to_owned()));
    };
    for (key, value) in &root {
        match key.as_str() {
            "namespace" => {
                for (name, body) in labeled_blocks(value, "namespace")? {
                    refuse_unknown_keys(
                        &body,
                        &["policy", "capabilities", "variables"],
                        "namespace",
                    )?;
                    let coarse = string_field(&body, "policy", "namespace")?;
                    let mut capabilities = string_list(&body, "capabilities", "namespace")?;
                    if !is_valid_name(&name) {
                        return Err(PolicyError::Invalid(format!(
                            "Invalid namespace name: {name:?}"
                        )));
                    }
                    if !coarse.is_empty() && !is_coarse_policy(&coarse) {
                        return Err(PolicyError::Invalid(format!(
                            "Invalid namespace policy: {coarse:?} in namespace {name:?}"
                        )));
                    }
                    if let Some(bad) = capabilities
                        .iter()
                        .find(|capability| !capability::ALL.contains(&capability.as_str()))
                    {
                        return Err(PolicyError::Invalid(format!(
                            "Invalid namespace capability '{bad}' in namespace {name:?}"
                        )));
                    }
                    capabilities.extend(
                        expand_namespace_policy(&coarse)
                            .into_iter()
                            .map(str::to_owned),
                    );
                    let variables = match body.get("variables") {
                        Some(variables) => Some(parse_variables(variables, &name)?),
                        None => None,
                    };
                    policy.namespaces.push(NamespacePolicy {
                        name,
                        policy: coarse,
                        capabilities,
                        variables,
                    });
                }
            }
            "node_pool" => {
                for (name, body) in labeled_blocks(value, "node_pool")? {
                    refuse_unknown_keys(&body, &["policy", "capabilities"], "node_pool")?;
                    let coarse = string_field(&body, "policy", "node_pool")?;
                    let mut capabilities = string_list(&body, "capabilities", "node_pool")?;
                    // Nomad's `^[a-zA-Z0-9-_*]{1,128}$`.
                    let valid_name = (1..=128).contains(&name.len())
                        && name
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '*'));
                    if !valid_name {
                        return Err(PolicyError::Invalid(format!(
                            "Invalid node pool name '{name}'"
                        )));
                    }
                    // `scale` is no node pool policy (Nomad's `isPolicyValid` takes it, and
                    // it then grants nothing).
                    if !coarse.is_empty() && !is_coarse_policy(&coarse) {
                        return Err(PolicyError::Invalid(format!(
                            "Invalid node pool policy '{coarse}' for '{name}'"
                        )));
                    }
                    if let Some(bad) = capabilities.iter().find(|capability| {
                        !node_pool_capability::ALL.contains(&capability.as_str())
                    }) {
                        return Err(PolicyError::Invalid(format!(
                            "Invalid node pool capability '{bad}' for '{name}'"
                        )));
                    }
                    capabilities.extend(
                        expand_node_pool_policy(&coarse)
                            .into_iter()
                            .map(str::to_owned),
                    );
                    policy.node_pools.push(NodePoolPolicy {
                        name,
                        policy: coarse,
                        capabilities,
                    });
                }
            }
            "host_volume" => {
                for (name, body) in labeled_blocks(value, "host_volume")? {
                    refuse_unknown_keys(&body, &["policy", "capabilities"], "host_volume")?;
                    let coarse = string_field(&body, "policy", "host_volume")?;
                    let mut capabilities = string_list(&body, "capabilities", "host_volume")?;
                    if !is_valid_name(&name) {
                        return Err(PolicyError::Invalid(format!(
                            "Invalid host volume name: {name:?}"
                        )));
                    }
                    if !coarse.is_empty() && !is_coarse_policy(&coarse) {
                        return Err(PolicyError::Invalid(format!(
                            "Invalid host volume policy: {coarse:?} in host volume {name:?}"
                        )));
                    }
                    if let Some(bad) = capabilities.iter().find(|capability| {
                        !host_volume_capability::ALL.contains(&capability.as_str())
                    }) {
                        return Err(PolicyError::Invalid(format!(
                            "Invalid host volume capability '{bad}' in host volume {name:?}"
                        )));
                    }
                    capabilities.extend(
                        expand_host_volume_policy(&coarse)
                            .into_iter()
                            .map(str::to_owned),
                    );
                    policy.host_volumes.push(HostVolumePolicy {
                        name,
                        policy: coarse,
                        capabilities,
                    });
                }
            }
            "agent" => policy.agent = Some(coarse_block(value, "agent")?),
            "node" => policy.node = Some(coarse_block(value, "node")?),
            "operator" => policy.operator = Some(coarse_block(value, "operator")?),
            "quota" => policy.quota = Some(coarse_block(value, "quota")?),
            "plugin" => policy.plugin = Some(coarse_block(value, "plugin")?),
            other => {
                return Err(PolicyError::Syntax(format!(
                    "unsupported block {other:?} (drover enforces namespace, node_pool, host_volume, agent, node, operator, quota and plugin)"
                )));
            }
        }
    }
    if policy.is_empty() {
        return Err(PolicyError::Empty(rules.to_owned()));
    }
    for (name, value) in [
        ("agent", &policy.agent),
        ("node", &policy.node),
        ("operator", &policy.operator),
        ("quota", &policy.quota),
    ] {
        if let Some(value) = value
            && !is_coarse_policy(value)
        {
            return Err(PolicyError::Invalid(format!(
                "Invalid {name} policy: {value:?}"
            )));
        }
    }
    if let Some(plugin) = &policy.plugin
        && !matches!(plugin.as_str(), POLICY_DENY | POLICY_READ | POLICY_LIST)
    {
        return Err(PolicyError::Invalid(format!(
            "Invalid plugin policy: {plugin:?}"
        )));
    }
    Ok(policy)
}
