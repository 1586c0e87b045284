//! ACLs: Nomad's policy language ([`policy`]) and the compiled [`Acl`] a request is checked
//! against, built from a token's policies with Nomad's precedence rules: `deny` wins over
//! everything for the same namespace, a concrete namespace beats any glob, and among globs
//! the closest match (fewest characters the glob's `*` stand for) wins; the coarse blocks
//! (`agent`, `node`, `operator`, `quota`, `plugin`) take the strongest level unless one is
//! `deny`. A management ACL allows everything.
//!
//! Not here: resolving a token (`crate::identity`), which capability a route needs (the
//! agent's enforcement table), storage (the state store).

pub mod policy;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};

use policy::{POLICY_DENY, POLICY_LIST, POLICY_READ, POLICY_WRITE, Policy, variables_capability};

type CapabilitySet = BTreeSet<String>;

/// A compiled set of policies.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Acl {
    management: bool,
    namespaces: BTreeMap<String, CapabilitySet>,
    wildcard_namespaces: BTreeMap<String, CapabilitySet>,
    /// Variables rules per namespace name (concrete or glob): path glob → capabilities.
    variables: BTreeMap<String, BTreeMap<String, CapabilitySet>>,
    node_pools: BTreeMap<String, CapabilitySet>,
    wildcard_node_pools: BTreeMap<String, CapabilitySet>,
    host_volumes: BTreeMap<String, CapabilitySet>,
    wildcard_host_volumes: BTreeMap<String, CapabilitySet>,
    agent: String,
    node: String,
    operator: String,
    quota: String,
    plugin: String,
}

/// The stronger of two coarse levels; `deny` wins (Nomad's `maxPrivilege`).
pub fn max_privilege(a: &str, b: &str) -> String {
    let level = if a == POLICY_DENY || b == POLICY_DENY {
        POLICY_DENY
    } else if a == POLICY_WRITE || b == POLICY_WRITE {
        POLICY_WRITE
    } else if a == POLICY_READ || b == POLICY_READ {
        POLICY_READ
    } else if a == POLICY_LIST || b == POLICY_LIST {
        POLICY_LIST
    } else {
        ""
    };
    level.to_owned()
}

/// Adds `capabilities` to `set`, with `deny` overriding and never overridden.
fn merge_capabilities(set: &mut CapabilitySet, capabilities: &[String]) {
    if set.contains(POLICY_DENY) {
        return;
    }
    for capability in capabilities {
        if capability == POLICY_DENY {
            set.clear();
            set.insert(POLICY_DENY.to_owned());
            return;
        }
        set.insert(capability.clone());
    }
}

/// Whether `name` matches the glob `pattern` (`*` stands for any run of characters).
pub fn glob_matches(pattern: &str, name: &str) -> bool {
    if !pattern.contains('*') {
        return pattern == name;
    }
    let parts: Vec<&str> = pattern.split('*').collect();
    let (first, rest) = parts.split_first().unwrap_or((&"", &[]));
    let Some(mut remaining) = name.strip_prefix(first) else {
        return false;
    };
    let Some((last, middle)) = rest.split_last() else {
        return true;
    };
    for part in middle {
        match remaining.find(part) {
            Some(at) => remaining = &remaining[at + part.len()..],
            None => return false,
        }
    }
    remaining.len() >= last.len() && remaining.ends_with(last)
}

/// How many characters of `name` the glob's `*` stand for (Nomad's "difference").
fn glob_difference(pattern: &str, name: &str) -> i64 {
    let length = |text: &str| i64::try_from(text.len()).unwrap_or(i64::MAX);
    length(name) - length(pattern) + length(&"*".repeat(pattern.matches('*').count()))
}

/// The capabilities for `name`: its concrete entry, else the closest matching glob's.
fn matching<'a, T>(
    concrete: &'a BTreeMap<String, T>,
    wildcard: &'a BTreeMap<String, T>,
    name: &str,
) -> Option<(&'a str, &'a T)> {
    if let Some((key, value)) = concrete.get_key_value(name) {
        return Some((key.as_str(), value));
    }
    wildcard
        .iter()
        .filter(|(pattern, _)| glob_matches(pattern, name))
        .min_by_key(|(pattern, _)| glob_difference(pattern, name))
        .map(|(pattern, value)| (pattern.as_str(), value))
}

impl Acl {
    /// The ACL of a management token.
    pub fn management() -> Self {
        Acl {
            management: true,
            ..Acl::default()
        }
    }

    /// Compiles `policies` (Nomad's `NewACL`).
    pub fn new(policies: &[Policy]) -> Self {
        let mut acl = Acl::default();
        for policy in policies {
            for namespace in &policy.namespaces {
                let table = if namespace.name.contains('*') {
                    &mut acl.wildcard_namespaces
                } else {
                    &mut acl.namespaces
                };
                merge_capabilities(
                    table.entry(namespace.name.clone()).or_default(),
                    &namespace.capabilities,
                );
                if let Some(paths) = &namespace.variables {
                    let rules = acl.variables.entry(namespace.name.clone()).or_default();
                    for rule in paths {
                        merge_capabilities(
                            rules.entry(rule.path.clone()).or_default(),
                            &rule.capabilities,
                        );
                    }
                }
            }
            for pool in &policy.node_pools {
                let table = if pool.name.contains('*') {
                    &mut acl.wildcard_node_pools
                } else {
                    &mut acl.node_pools
                };
                merge_capabilities(
                    table.entry(pool.name.clone()).or_default(),
                    &pool.capabilities,
                );
            }
            for volume in &policy.host_volumes {
                let table = if volume.name.contains('*') {
                    &mut acl.wildcard_host_volumes
                } else {
                    &mut acl.host_volumes
                };
                merge_capabilities(
                    table.entry(volume.name.clone()).or_default(),
                    &volume.capabilities,
                );
            }
            for (level, mine) in [
                (&policy.agent, &mut acl.agent),
                (&policy.node, &mut acl.node),
                (&policy.operator, &mut acl.operator),
                (&policy.quota, &mut acl.quota),
                (&policy.plugin, &mut acl.plugin),
            ] {
                if let Some(level) = level {
                    *mine = max_privilege(mine, level);
                }
            }
        }
        acl
    }

    pub fn is_management(&self) -> bool {
        self.management
    }

    fn namespace_capabilities(&self, namespace: &str) -> Option<&CapabilitySet> {
        matching(&self.namespaces, &self.wildcard_namespaces, namespace).map(|(_, set)| set)
    }

    /// Whether `operation` (a namespace capability) is allowed in `namespace`.
    pub fn allow_namespace_operation(&self, namespace: &str, operation: &str) -> bool {
        self.management
            || self
                .namespace_capabilities(namespace)
                .is_some_and(|set| !set.contains(POLICY_DENY) && set.contains(operation))
    }

    /// Whether any variables rule is written for `namespace` (Nomad's `AllowVariableSearch`:
    /// a namespace rule whose name starts with it, or any rule at all for `*`).
    pub fn allow_variable_search(&self, namespace: &str) -> bool {
        self.management
            || if namespace == "*" {
                !self.variables.is_empty()
            } else {
                self.variables.keys().any(|key| key.starts_with(namespace))
            }
    }

    /// Whether anything at all is allowed in `namespace`.
    pub fn allow_namespace(&self, namespace: &str) -> bool {
        self.management
            || self
                .namespace_capabilities(namespace)
                .is_some_and(|set| !set.is_empty() && !set.contains(POLICY_DENY))
    }

    /// Whether `operation` (a variables capability) is allowed on `path` in `namespace`:
    /// the namespace's rules (concrete or closest glob), then the path's (concrete or closest
    /// glob). A coarse `write` on the namespace allows every variables operation and `read`
    /// allows `read` and `list`, as Nomad.
    pub fn allow_variable_operation(&self, namespace: &str, path: &str, operation: &str) -> bool {
        if self.management {
            return true;
        }
        let Some((namespace_key, set)) =
            matching(&self.namespaces, &self.wildcard_namespaces, namespace)
        else {
            return false;
        };
        if set.contains(POLICY_DENY) {
            return false;
        }
        if let Some(rules) = self.variables.get(namespace_key) {
            let concrete: BTreeMap<String, CapabilitySet> = rules
                .iter()
                .filter(|(pattern, _)| !pattern.contains('*'))
                .map(|(pattern, set)| (pattern.clone(), set.clone()))
                .collect();
            let globs: BTreeMap<String, CapabilitySet> = rules
                .iter()
                .filter(|(pattern, _)| pattern.contains('*'))
                .map(|(pattern, set)| (pattern.clone(), set.clone()))
                .collect();
            if let Some((_, capabilities)) = matching(&concrete, &globs, path) {
                return !capabilities.contains(variables_capability::DENY)
                    && capabilities.contains(operation);
            }
        }
        let coarse_write = set.contains(policy::capability::SUBMIT_JOB);
        let coarse_read = set.contains(policy::capability::READ_JOB);
        match operation {
            variables_capability::READ | variables_capability::LIST => coarse_read || coarse_write,
            _ => coarse_write,
        }
    }

    /// Whether `operation` (a node pool capability) is allowed on pool `name` (Nomad's
    /// `AllowNodePoolOperation`: its own block, else the closest glob).
    pub fn allow_node_pool_operation(&self, name: &str, operation: &str) -> bool {
        self.management
            || matching(&self.node_pools, &self.wildcard_node_pools, name)
                .is_some_and(|(_, set)| !set.contains(POLICY_DENY) && set.contains(operation))
    }

    /// Whether `operation` (a host volume capability) is allowed on volume `name`.
    pub fn allow_host_volume_operation(&self, name: &str, operation: &str) -> bool {
        self.management
            || matching(&self.host_volumes, &self.wildcard_host_volumes, name)
                .is_some_and(|(_, set)| !set.contains(POLICY_DENY) && set.contains(operation))
    }

    fn coarse_read(&self, level: &str) -> bool {
        self.management || level == POLICY_READ || level == POLICY_WRITE
    }

    fn coarse_write(&self, level: &str) -> bool {
        self.management || level == POLICY_WRITE
    }

    pub fn allow_agent_read(&self) -> bool {
        self.coarse_read(&self.agent)
    }
    pub fn allow_agent_write(&self) -> bool {
        self.coarse_write(&self.agent)
    }
    pub fn allow_node_read(&self) -> bool {
        self.coarse_read(&self.node)
    }
    pub fn allow_node_write(&self) -> bool {
        self.coarse_write(&self.node)
    }
    pub fn allow_operator_read(&self) -> bool {
        self.coarse_read(&self.operator)
    }
    pub fn allow_operator_write(&self) -> bool {
        self.coarse_write(&self.operator)
    }
    pub fn allow_quota_read(&self) -> bool {
        self.coarse_read(&self.quota)
    }
    pub fn allow_quota_write(&self) -> bool {
        self.coarse_write(&self.quota)
    }
    pub fn allow_plugin_read(&self) -> bool {
        self.management || self.plugin == POLICY_READ || self.plugin == POLICY_LIST
    }
    pub fn allow_plugin_list(&self) -> bool {
        self.allow_plugin_read()
    }
}

/// The ACL of `token` as the store holds its policies now: management for a management
/// token, else its policies compiled (a policy that no longer exists or no longer parses
/// grants nothing).
pub fn token_acl(state: &drover_state::StateStore, token: &drover_structs::acl::AclToken) -> Acl {
    if token.is_management() {
        return Acl::management();
    }
    policies_acl(state, &token_policy_names(&state.acl(), token))
}

/// The names of the policies `token` holds: its own, then those of the roles it links to
/// (Nomad's rule: a link to a role that no longer exists grants nothing), without repeats.
pub fn token_policy_names(
    tables: &drover_state::acl_tables::AclTables,
    token: &drover_structs::acl::AclToken,
) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    let linked = token
        .roles
        .as_deref()
        .unwrap_or_default()
        .iter()
        .filter_map(|link| tables.roles.get(&link.id))
        .flat_map(|role| role.policies.iter().map(|policy| &policy.name));
    for name in token
        .policies
        .as_deref()
        .unwrap_or_default()
        .iter()
        .chain(linked)
    {
        if !names.contains(name) {
            names.push(name.clone());
        }
    }
    names
}

/// The token as Nomad answers it: role links carry the role's current name, and links to
/// deleted roles are left out (Nomad's `fixTokenRoleLinks`).
pub fn token_with_current_roles(
    tables: &drover_state::acl_tables::AclTables,
    token: &drover_structs::acl::AclToken,
) -> drover_structs::acl::AclToken {
    let mut token = token.clone();
    if let Some(links) = token.roles.as_mut() {
        links.retain_mut(|link| match tables.roles.get(&link.id) {
            Some(role) => {
                link.name.clone_from(&role.name);
                true
            }
            None => false,
        });
    }
    token
}

/// The ACL of the named policies as stored now.
pub fn policies_acl(state: &drover_state::StateStore, names: &[String]) -> Acl {
    let tables = state.acl();
    let parsed: Vec<Policy> = names
        .iter()
        .filter_map(|name| tables.policies.get(name))
        .filter_map(|stored| {
            policy::parse(&stored.rules)
                .inspect_err(|error| {
                    tracing::warn!(policy = %stored.name, %error, "a stored ACL policy does not parse");
                })
                .ok()
        })
        .collect();
    Acl::new(&parsed)
}

/// The ACL of a workload identity beyond its implicit rights: the policies attached to its
/// job ([`workload_policy_names`]).
pub fn workload_acl(
    state: &drover_state::StateStore,
    workload: &crate::identity::WorkloadIdentity,
) -> Acl {
    policies_acl(state, &workload_policy_names(state, workload))
}

/// The policies attached to a workload identity's job (Nomad's `JobACL`,
/// `ResolvePoliciesForClaims`): a policy bound to the workload's namespace alone, to its job
/// (for a dispatched or periodic child, the parent job), to its job and group, or to its job,
/// group and task. An allocation that is gone holds none.
pub fn workload_policy_names(
    state: &drover_state::StateStore,
    workload: &crate::identity::WorkloadIdentity,
) -> Vec<String> {
    let Some(alloc) = state.alloc(&workload.alloc_id) else {
        return Vec::new();
    };
    let job_id = alloc
        .job
        .as_deref()
        .map_or(alloc.job_id.as_str(), |job| {
            if job.parent_id.is_empty() {
                job.id.as_str()
            } else {
                job.parent_id.as_str()
            }
        })
        .to_owned();
    let tables = state.acl();
    tables
        .policies
        .values()
        .filter(|policy| {
            policy.job_acl.as_ref().is_some_and(|binding| {
                binding.namespace == alloc.namespace
                    && (binding.job_id.is_empty()
                        || (binding.job_id == job_id
                            && (binding.group.is_empty()
                                || (binding.group == alloc.task_group
                                    && (binding.task.is_empty()
                                        || binding.task == workload.task)))))
            })
        })
        .map(|policy| policy.name.clone())
        .collect()
}

/// The names of the policies a caller holds (Nomad's `getPoliciesForIdentity`): an ACL
/// token's own and its roles', the `anonymous` policy for a request without a token, a
/// workload identity's attached policies; `None` for a management token, which holds them
/// all.
pub fn identity_policy_names(
    state: &drover_state::StateStore,
    identity: &crate::identity::RequestIdentity,
) -> Option<Vec<String>> {
    use crate::identity::RequestIdentity;
    match identity {
        RequestIdentity::AclToken(token) if token.is_management() => None,
        RequestIdentity::AclToken(token) => Some(token_policy_names(&state.acl(), token)),
        RequestIdentity::Anonymous => Some(vec![drover_structs::acl::ANONYMOUS_POLICY.to_owned()]),
        RequestIdentity::Workload(workload) => Some(workload_policy_names(state, workload)),
    }
}

/// What Nomad's `ACLPolicy.Validate` says of a policy's `JobACL`.
pub fn job_acl_errors(binding: &drover_structs::acl::JobAcl) -> Vec<String> {
    let mut errors = Vec::new();
    if !binding.job_id.is_empty() && binding.namespace.is_empty() {
        errors.push("namespace must be set to set job ID".to_owned());
    }
    if !binding.group.is_empty() && binding.job_id.is_empty() {
        errors.push("job ID must be set to set group".to_owned());
    }
    if !binding.task.is_empty() && binding.group.is_empty() {
        errors.push("group must be set to set task".to_owned());
    }
    errors
}

/// The ACL of a request without a token: the `anonymous` policy's, or nothing.
pub fn anonymous_acl(state: &drover_state::StateStore) -> Acl {
    policies_acl(state, &[drover_structs::acl::ANONYMOUS_POLICY.to_owned()])
}

/// BLAKE2b-256 over `fields` in order, each written as it is (no separators, as Nomad's
/// `SetHash` writes them), base64 as Go encodes a `[]byte` in JSON.
pub fn blake2b_256_base64<'a>(fields: impl IntoIterator<Item = &'a str>) -> String {
    use base64::Engine as _;
    use blake2::Digest as _;
    let mut hasher = blake2::Blake2b::<blake2::digest::consts::U32>::new();
    for field in fields {
        hasher.update(field.as_bytes());
    }
    base64::engine::general_purpose::STANDARD.encode(hasher.finalize())
}

/// Nomad's `ACLPolicy.SetHash`: name, description, rules, then the `JobACL`'s namespace, job
/// ID, group and task when it has one.
pub fn policy_hash(policy: &drover_structs::acl::AclPolicy) -> String {
    let mut fields = vec![
        policy.name.as_str(),
        policy.description.as_str(),
        policy.rules.as_str(),
    ];
    if let Some(binding) = &policy.job_acl {
        fields.extend([
            binding.namespace.as_str(),
            binding.job_id.as_str(),
            binding.group.as_str(),
            binding.task.as_str(),
        ]);
    }
    blake2b_256_base64(fields)
}

/// Nomad's `ACLToken.SetHash`: name, type, each policy, `global` or `local`, then each
/// linked role's ID (the fields a token update may change; not its expiry).
pub fn token_hash(token: &drover_structs::acl::AclToken) -> String {
    let mut fields = vec![token.name.as_str(), token.token_type.as_str()];
    fields.extend(
        token
            .policies
            .as_deref()
            .unwrap_or_default()
            .iter()
            .map(String::as_str),
    );
    fields.push(if token.global { "global" } else { "local" });
    fields.extend(
        token
            .roles
            .as_deref()
            .unwrap_or_default()
            .iter()
            .map(|role| role.id.as_str()),
    );
    blake2b_256_base64(fields)
}

/// Nomad's `ACLRole.SetHash`: name, description, then each linked policy's name.
pub fn role_hash(role: &drover_structs::acl::AclRole) -> String {
    let mut fields = vec![role.name.as_str(), role.description.as_str()];
    fields.extend(role.policies.iter().map(|policy| policy.name.as_str()));
    blake2b_256_base64(fields)
}

/// Whether `name` is a valid policy name (Nomad: letters, digits and `-`, 1 to 128).
pub fn is_valid_policy_name(name: &str) -> bool {
    (1..=128).contains(&name.len()) && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}
