//! Nomad Variables on the wire and at rest: [`VariableMetadata`] (what a list answers),
//! [`Variable`] (a variable with its items, Nomad's `VariableDecrypted`), the stored
//! [`VariableEncrypted`] record (metadata in the clear, items only sealed), and Nomad's path
//! and size rules.
//!
//! Not here: sealing and opening items (the server's keyring), storage (the state store).

use std::collections::BTreeMap;

use crate::lenient::wire_struct;
use crate::time::DurationNs;

/// The most bytes of keys and values one variable's items may hold, as Nomad.
pub const MAX_VARIABLE_SIZE: usize = 65_536;

/// The version of [`VariableEncrypted`] records written now.
pub const VARIABLE_RECORD_VERSION: u32 = 1;

wire_struct! {
    /// A variable's metadata (Nomad's `VariableMetadata`).
    pub struct VariableMetadata {
        pub namespace: String,
        pub path: String,
        pub create_index: u64,
        /// Unix nanoseconds.
        pub create_time: i64,
        pub modify_index: u64,
        /// Unix nanoseconds.
        pub modify_time: i64,
        /// The lock held on the variable, if any (shown to management only).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub lock: Option<VariableLock>,
    }
}

/// A lock's TTL when none is asked for, as Nomad.
pub const DEFAULT_LOCK_TTL: DurationNs = DurationNs(15_000_000_000);
/// How long an expired lock blocks the variable when no delay is asked for, as Nomad.
pub const DEFAULT_LOCK_DELAY: DurationNs = DurationNs(15_000_000_000);
/// The shortest and longest TTL a lock may have, as Nomad.
pub const MIN_LOCK_TTL: DurationNs = DurationNs(10_000_000_000);
pub const MAX_LOCK_TTL: DurationNs = DurationNs(24 * 3600 * 1_000_000_000);

/// Go's `Duration.String()`, or empty for zero (Nomad's `VariableLock` marshalling).
fn lock_duration<S: serde::Serializer>(
    value: &DurationNs,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    if value.0 == 0 {
        serializer.serialize_str("")
    } else {
        serializer.serialize_str(&value.to_go_string())
    }
}

/// Go's duration string or nanoseconds; empty or `null` is zero (Nomad's `VariableLock`
/// unmarshalling).
fn lock_duration_in<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<DurationNs, D::Error> {
    use serde::Deserialize as _;
    match Option::<serde_json::Value>::deserialize(deserializer)? {
        None | Some(serde_json::Value::Null) => Ok(DurationNs::ZERO),
        Some(serde_json::Value::String(text)) if text.is_empty() => Ok(DurationNs::ZERO),
        Some(value) => DurationNs::deserialize(value).map_err(serde::de::Error::custom),
    }
}

/// Nomad's `VariableLock`: who holds the lock (`ID`, issued by the server), how long the
/// holder has between renewals (`TTL`) and how long an expired lock still blocks the
/// variable (`LockDelay`). Durations travel as Go duration strings.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct VariableLock {
    #[serde(rename = "ID", deserialize_with = "crate::lenient::null_as_default")]
    pub id: String,
    #[serde(
        rename = "TTL",
        serialize_with = "lock_duration",
        deserialize_with = "lock_duration_in"
    )]
    pub ttl: DurationNs,
    #[serde(
        serialize_with = "lock_duration",
        deserialize_with = "lock_duration_in"
    )]
    pub lock_delay: DurationNs,
}

impl VariableLock {
    /// Nomad's `VariableLock.Validate`, as its error lines.
    pub fn validate(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.ttl.0 < 0 || self.lock_delay.0 < 0 {
            problems.push("Lock delay and TTL must be positive".to_owned());
        }
        if self.ttl.0 > MAX_LOCK_TTL.0 || self.ttl.0 < MIN_LOCK_TTL.0 {
            problems.push("TTL must be between 10 seconds and 24 hours".to_owned());
        }
        problems
    }
}

wire_struct! {
    /// A variable with its items in the clear (Nomad's `VariableDecrypted`, the API's
    /// `Variable`). Only ever on the wire, never stored.
    pub struct Variable {
        pub namespace: String,
        pub path: String,
        pub create_index: u64,
        pub create_time: i64,
        pub modify_index: u64,
        pub modify_time: i64,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub lock: Option<VariableLock>,
        /// Omitted when empty, as Nomad (a conflict on a variable that does not exist).
        #[serde(skip_serializing_if = "BTreeMap::is_empty")]
        pub items: BTreeMap<String, String>,
    }
}

impl Variable {
    pub fn metadata(&self) -> VariableMetadata {
        VariableMetadata {
            namespace: self.namespace.clone(),
            path: self.path.clone(),
            create_index: self.create_index,
            create_time: self.create_time,
            modify_index: self.modify_index,
            modify_time: self.modify_time,
            lock: self.lock.clone(),
        }
    }

    pub fn from_parts(meta: &VariableMetadata, items: BTreeMap<String, String>) -> Self {
        Self {
            namespace: meta.namespace.clone(),
            path: meta.path.clone(),
            create_index: meta.create_index,
            create_time: meta.create_time,
            modify_index: meta.modify_index,
            modify_time: meta.modify_time,
            lock: meta.lock.clone(),
            items,
        }
    }
}

wire_struct! {
    /// The stored form of a variable: its metadata, and its items as JSON sealed with root
    /// key `KeyID` (base64 of nonce ‖ ciphertext ‖ tag).
    pub struct VariableEncrypted {
        pub version: u32,
        pub meta: VariableMetadata,
        #[serde(rename = "KeyID")]
        pub key_id: String,
        pub data: String,
    }
}

/// The size Nomad counts for a variable's items: the bytes of every key and value.
pub fn items_size(items: &BTreeMap<String, String>) -> usize {
    items
        .iter()
        .map(|(key, value)| key.len() + value.len())
        .sum()
}

/// Nomad's path rules: 1 to 128 of `[a-zA-Z0-9-_~/]`, and under `nomad/` only `nomad/jobs…`,
/// `nomad/sentinel…` and `nomad/job-templates/<name>`.
pub fn validate_variable_path(path: &str) -> Result<(), String> {
    if path.is_empty() {
        return Err("variable requires path".to_owned());
    }
    let valid_chars = path
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '~' | '/'));
    if !valid_chars || path.len() > 128 {
        return Err(format!("invalid path {path:?}"));
    }
    let parts: Vec<&str> = path.split('/').collect();
    if parts[0] != "nomad" {
        return Ok(());
    }
    match parts.get(1) {
        None => Err("\"nomad\" is a reserved top-level directory path, but you may write variables to \"nomad/jobs\", \"nomad/job-templates\", \"nomad/sentinel\", or below".to_owned()),
        Some(&"jobs") | Some(&"sentinel") => Ok(()),
        Some(&"job-templates") if parts.len() == 3 => Ok(()),
        Some(&"job-templates") => Err("\"nomad/job-templates\" is a reserved directory path, but you may write variables at the level below it, for example, \"nomad/job-templates/template-name\"".to_owned()),
        Some(_) => Err("only paths at \"nomad/jobs\" or \"nomad/job-templates\" and below are valid paths under the top-level \"nomad\" directory".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_follow_nomads_rules() {
        assert!(validate_variable_path("app/db").is_ok());
        assert!(validate_variable_path("nomad/jobs/web/g/t").is_ok());
        assert!(validate_variable_path("nomad/job-templates/x").is_ok());
        assert!(validate_variable_path("").is_err());
        assert!(validate_variable_path("nomad").is_err());
        assert!(validate_variable_path("nomad/other").is_err());
        assert!(validate_variable_path("nomad/job-templates").is_err());
        assert!(validate_variable_path("a.b").is_err());
        assert!(validate_variable_path(&"a".repeat(129)).is_err());
    }
}
