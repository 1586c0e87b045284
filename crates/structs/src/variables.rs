//! Nomad Variables on the wire and at rest: [`VariableMetadata`] (what a list answers),
//! [`Variable`] (a variable with its items, Nomad's `VariableDecrypted`), the stored
//! [`VariableEncrypted`] record (metadata in the clear, items only sealed), and Nomad's path
//! and size rules.
//!
//! Not here: sealing and opening items (the server's keyring), storage (the state store).

use std::collections::BTreeMap;

use crate::lenient::wire_struct;

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
