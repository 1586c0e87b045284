//! Node pools (Nomad 1.6+, `nomad/structs.NodePool`): named partitions of the cluster's nodes. A
//! node joins the pool its client config names (`default` when none); a job places only on the
//! nodes of its `node_pool`. `default` and `all` (every node) are built in and can be neither
//! changed nor deleted.
//!
//! Not here: storing pools (the state store) or confining placements (the scheduler).

use std::collections::BTreeMap;

use crate::lenient::wire_struct;

/// The built-in pool of every node.
pub const NODE_POOL_ALL: &str = "all";
pub const NODE_POOL_ALL_DESCRIPTION: &str = "Node pool with all nodes in the cluster.";
/// The built-in pool of nodes that name none.
pub const NODE_POOL_DEFAULT: &str = "default";
pub const NODE_POOL_DEFAULT_DESCRIPTION: &str = "Default node pool.";
/// Nomad's limit on a pool's description.
pub const MAX_NODE_POOL_DESCRIPTION_LENGTH: usize = 256;

wire_struct! {
    /// A node pool.
    pub struct NodePool {
        pub name: String,
        pub description: String,
        pub meta: Option<BTreeMap<String, String>>,
        /// Nomad Enterprise's per-pool scheduler settings; refused here, as Nomad's community
        /// edition refuses them.
        pub scheduler_configuration: Option<serde_json::Value>,
        pub create_index: u64,
        pub modify_index: u64,
    }
}

impl NodePool {
    /// Whether this is `all` or `default`.
    pub fn is_built_in(&self) -> bool {
        is_built_in_node_pool(&self.name)
    }

    /// Nomad's `NodePool.Validate` (community edition): the name's pattern, the description's
    /// length, and no scheduler configuration. Errors are Nomad's words.
    pub fn validate(&self) -> Result<(), String> {
        let mut errors = Vec::new();
        if let Err(error) = validate_node_pool_name(&self.name) {
            errors.push(error);
        }
        if self.description.len() > MAX_NODE_POOL_DESCRIPTION_LENGTH {
            errors.push(format!(
                "description longer than {MAX_NODE_POOL_DESCRIPTION_LENGTH}"
            ));
        }
        if self.scheduler_configuration.is_some() {
            errors.push("Node Pools Governance is unlicensed.".to_string());
        }
        match errors.len() {
            0 => Ok(()),
            1 => Err(errors.remove(0)),
            count => Err(format!(
                "{count} errors occurred:\n{}\n\n",
                errors
                    .iter()
                    .map(|error| format!("\t* {error}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            )),
        }
    }
}

/// Whether `name` is one of the built-in pools.
pub fn is_built_in_node_pool(name: &str) -> bool {
    name == NODE_POOL_ALL || name == NODE_POOL_DEFAULT
}

/// Nomad's pool name rule: `^[a-zA-Z0-9-_]{1,128}$`.
pub fn validate_node_pool_name(name: &str) -> Result<(), String> {
    let valid = (1..=128).contains(&name.len())
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_');
    if valid {
        Ok(())
    } else {
        Err(format!(
            "invalid name {name:?}, must match regex ^[a-zA-Z0-9-_]{{1,128}}$"
        ))
    }
}

/// The built-in pools as the store holds them before anything changed them.
pub fn built_in_node_pools() -> [NodePool; 2] {
    [
        NodePool {
            name: NODE_POOL_ALL.to_string(),
            description: NODE_POOL_ALL_DESCRIPTION.to_string(),
            create_index: 1,
            modify_index: 1,
            ..NodePool::default()
        },
        NodePool {
            name: NODE_POOL_DEFAULT.to_string(),
            description: NODE_POOL_DEFAULT_DESCRIPTION.to_string(),
            create_index: 1,
            modify_index: 1,
            ..NodePool::default()
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_nomads_pattern() {
        assert!(validate_node_pool_name("gpu-pool_2").is_ok());
        assert_eq!(
            validate_node_pool_name("has space"),
            Err("invalid name \"has space\", must match regex ^[a-zA-Z0-9-_]{1,128}$".to_string())
        );
        assert!(validate_node_pool_name("").is_err());
        assert!(validate_node_pool_name(&"a".repeat(129)).is_err());
    }

    #[test]
    fn a_pool_with_scheduler_configuration_is_refused() {
        let pool = NodePool {
            name: "gpu".into(),
            scheduler_configuration: Some(serde_json::json!({"SchedulerAlgorithm": "spread"})),
            ..NodePool::default()
        };
        assert_eq!(
            pool.validate(),
            Err("Node Pools Governance is unlicensed.".to_string())
        );
    }
}
