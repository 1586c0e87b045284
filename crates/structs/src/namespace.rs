//! Namespaces on the wire and at rest, in Nomad's `Namespace` shape, with Nomad's validation
//! (name pattern, description length) and the capability check a job registration passes
//! (enabled/disabled task drivers and group network modes).
//!
//! Not here: storage (the state store's namespaces table), who may create or delete one (the
//! agent's namespace endpoints).

use std::collections::BTreeMap;

use crate::job::Job;
use crate::lenient::wire_struct;

/// Nomad's description of the built-in namespace.
pub const DEFAULT_NAMESPACE_DESCRIPTION: &str = "Default shared namespace";
/// The longest description Nomad accepts.
pub const MAX_NAMESPACE_DESCRIPTION_LENGTH: usize = 256;
/// `*` in a request's `namespace` asks for every namespace the caller may read.
pub const ALL_NAMESPACES: &str = "*";

wire_struct! {
    /// Nomad's `Namespace`. Quotas, node-pool, Vault and Consul configuration and extra
    /// claims are Enterprise features or need parts drover does not have: a namespace naming
    /// any of them is refused by [`Namespace::validate`], never stored and ignored.
    pub struct Namespace {
        pub name: String,
        pub description: String,
        pub quota: String,
        pub capabilities: Option<NamespaceCapabilities>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub node_pool_configuration: Option<serde_json::Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub vault_configuration: Option<serde_json::Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub consul_configuration: Option<serde_json::Value>,
        pub meta: Option<BTreeMap<String, String>>,
        /// Base64 of the SHA-256 of the user-set fields (Nomad: a BLAKE2b of them); set on
        /// every write.
        pub hash: String,
        pub create_index: u64,
        pub modify_index: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub required_extra_claims: Option<BTreeMap<String, String>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub optional_extra_claims: Option<BTreeMap<String, String>>,
    }
}

wire_struct! {
    /// Nomad's `NamespaceCapabilities`: which task drivers and group network modes jobs in
    /// the namespace may use (an empty enabled list allows all but the disabled ones).
    pub struct NamespaceCapabilities {
        pub enabled_task_drivers: Vec<String>,
        pub disabled_task_drivers: Vec<String>,
        pub enabled_network_modes: Vec<String>,
        pub disabled_network_modes: Vec<String>,
    }
}

/// Whether `name` matches Nomad's `^[a-zA-Z0-9-]{1,128}$`.
pub fn is_valid_namespace_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-')
}

impl Namespace {
    /// The built-in `default` namespace as Nomad creates it.
    pub fn builtin_default() -> Self {
        let mut namespace = Namespace {
            name: crate::DEFAULT_NAMESPACE.to_owned(),
            description: DEFAULT_NAMESPACE_DESCRIPTION.to_owned(),
            create_index: 1,
            modify_index: 1,
            ..Namespace::default()
        };
        namespace.set_hash();
        namespace
    }

    /// Nomad's `Namespace.Validate`, as its multi-error lines, plus the fields drover refuses.
    pub fn validate(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if !is_valid_namespace_name(&self.name) {
            problems.push(format!(
                "invalid name {:?}. Must match regex ^[a-zA-Z0-9-]{{1,128}}$",
                self.name
            ));
        }
        if self.description.len() > MAX_NAMESPACE_DESCRIPTION_LENGTH {
            problems.push(format!(
                "description longer than {MAX_NAMESPACE_DESCRIPTION_LENGTH}"
            ));
        }
        let unsupported = [
            (
                "NodePoolConfiguration",
                self.node_pool_configuration
                    .as_ref()
                    .is_some_and(|value| !value.is_null()),
            ),
            (
                "VaultConfiguration",
                self.vault_configuration
                    .as_ref()
                    .is_some_and(|value| !value.is_null()),
            ),
            (
                "ConsulConfiguration",
                self.consul_configuration
                    .as_ref()
                    .is_some_and(|value| !value.is_null()),
            ),
            (
                "RequiredExtraClaims",
                self.required_extra_claims
                    .as_ref()
                    .is_some_and(|claims| !claims.is_empty()),
            ),
            (
                "OptionalExtraClaims",
                self.optional_extra_claims
                    .as_ref()
                    .is_some_and(|claims| !claims.is_empty()),
            ),
        ];
        for (field, set) in unsupported {
            if set {
                problems.push(format!("{field} is not supported by drover"));
            }
        }
        problems
    }

    /// Sets `hash` from the user-set fields.
    pub fn set_hash(&mut self) {
        use base64::Engine as _;
        use sha2::Digest as _;
        let mut hasher = sha2::Sha256::new();
        hasher.update(self.name.as_bytes());
        hasher.update(self.description.as_bytes());
        hasher.update(self.quota.as_bytes());
        if let Some(capabilities) = &self.capabilities {
            for list in [
                &capabilities.enabled_task_drivers,
                &capabilities.disabled_task_drivers,
                &capabilities.enabled_network_modes,
                &capabilities.disabled_network_modes,
            ] {
                for item in list {
                    hasher.update(item.as_bytes());
                }
                hasher.update([0]);
            }
        }
        for (key, value) in self.meta.iter().flatten() {
            hasher.update(key.as_bytes());
            hasher.update(value.as_bytes());
        }
        self.hash = base64::engine::general_purpose::STANDARD.encode(hasher.finalize());
    }

    /// Nomad's namespace constraint check of a job registration: the drivers and group
    /// network modes the namespace's capabilities do not allow, as Nomad's error text.
    pub fn check_job(&self, job: &Job) -> Result<(), String> {
        let Some(capabilities) = &self.capabilities else {
            return Ok(());
        };
        let allowed = |item: &str, enabled: &[String], disabled: &[String]| {
            (enabled.is_empty() || enabled.iter().any(|e| e == item))
                && !disabled.iter().any(|d| d == item)
        };
        let drivers: Vec<&str> = job
            .task_groups
            .iter()
            .flat_map(|group| group.tasks.iter())
            .map(|task| task.driver.as_str())
            .filter(|driver| {
                !allowed(
                    driver,
                    &capabilities.enabled_task_drivers,
                    &capabilities.disabled_task_drivers,
                )
            })
            .collect();
        match drivers.as_slice() {
            [] => {}
            [one] => {
                return Err(format!(
                    "used task driver {one:?} is not allowed in namespace {:?}",
                    self.name
                ));
            }
            many => {
                return Err(format!(
                    "used task drivers {} are not allowed in namespace {:?}",
                    go_quoted_list(many),
                    self.name
                ));
            }
        }
        let modes: Vec<&str> = job
            .task_groups
            .iter()
            .flat_map(|group| group.networks.iter())
            .map(|network| {
                if network.mode.is_empty() {
                    "host"
                } else {
                    network.mode.as_str()
                }
            })
            .filter(|mode| {
                !allowed(
                    mode,
                    &capabilities.enabled_network_modes,
                    &capabilities.disabled_network_modes,
                )
            })
            .collect();
        match modes.as_slice() {
            [] => Ok(()),
            [one] => Err(format!(
                "used group network mode {one:?} is not allowed in namespace {:?}",
                self.name
            )),
            many => Err(format!(
                "used group network modes {} are not allowed in namespace {:?}",
                go_quoted_list(many),
                self.name
            )),
        }
    }
}

/// Go's `%q` of a `[]string`: `["a" "b"]`.
fn go_quoted_list(items: &[&str]) -> String {
    let quoted: Vec<String> = items.iter().map(|item| format!("{item:?}")).collect();
    format!("[{}]", quoted.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_nomads_pattern() {
        assert!(is_valid_namespace_name("prod-1"));
        assert!(!is_valid_namespace_name(""));
        assert!(!is_valid_namespace_name("a_b"));
        assert!(!is_valid_namespace_name(&"a".repeat(129)));
        let bad = Namespace {
            name: "a b".to_owned(),
            description: "x".repeat(257),
            ..Namespace::default()
        };
        assert_eq!(
            bad.validate(),
            vec![
                "invalid name \"a b\". Must match regex ^[a-zA-Z0-9-]{1,128}$".to_owned(),
                "description longer than 256".to_owned()
            ]
        );
    }

    #[test]
    fn the_wire_shape_is_nomads() {
        let value = serde_json::to_value(Namespace::builtin_default()).unwrap();
        let mut keys: Vec<&str> = value
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "Capabilities",
                "CreateIndex",
                "Description",
                "Hash",
                "Meta",
                "ModifyIndex",
                "Name",
                "Quota"
            ]
        );
    }
}
