//! A service mesh intention (which service may open connections to which), in Consul's
//! shape (`/v1/connect/intentions`). Matching and precedence live in `drover_mesh::intentions`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// `Action`: what an intention says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IntentionAction {
    Allow,
    Deny,
}

impl IntentionAction {
    /// Reads `allow` or `deny`; anything else is named in the error.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text {
            "allow" => Ok(IntentionAction::Allow),
            "deny" => Ok(IntentionAction::Deny),
            other => Err(format!(
                "action must be \"allow\" or \"deny\", not {other:?}"
            )),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            IntentionAction::Allow => "allow",
            IntentionAction::Deny => "deny",
        }
    }
}

/// One intention, as Consul's API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Intention {
    #[serde(rename = "ID")]
    pub id: String,
    pub description: String,
    #[serde(rename = "SourceNS")]
    pub source_ns: String,
    pub source_name: String,
    #[serde(rename = "DestinationNS")]
    pub destination_ns: String,
    pub destination_name: String,
    /// Always `consul`, the only source type there is.
    pub source_type: String,
    pub action: IntentionAction,
    #[serde(default)]
    pub meta: BTreeMap<String, String>,
    pub precedence: u32,
    pub created_at: String,
    pub updated_at: String,
    pub create_index: u64,
    pub modify_index: u64,
}
