//! Results of the service checks a client runs, in Nomad's `CheckQueryResult` shape (what
//! `GET /v1/client/allocation/<id>/checks` answers, keyed by check ID), and Nomad's check ID.
//!
//! Not here: running checks or deciding their status (the client's `checks` module does).

use serde::{Deserialize, Serialize};

use sha2::{Digest, Sha256};

use crate::job::ServiceCheck;

/// A check that passed.
pub const CHECK_SUCCESS: &str = "success";
/// A check that failed (Consul's "critical").
pub const CHECK_FAILURE: &str = "failure";
/// A check that has not run yet.
pub const CHECK_PENDING: &str = "pending";
/// A check that warned (HTTP 429, or a script exiting 1). Nomad's own provider never reports
/// it; drover reports it for the checks it runs with Consul's semantics.
pub const CHECK_WARNING: &str = "warning";

/// A check whose failures hold back deployments (`on_update` other than `ignore`).
pub const CHECK_MODE_HEALTHINESS: &str = "healthiness";
/// A check that deployments ignore (`on_update = "ignore"`).
pub const CHECK_MODE_READINESS: &str = "readiness";

/// The latest outcome of one check of an allocation.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct CheckQueryResult {
    #[serde(rename = "ID")]
    pub id: String,
    pub mode: String,
    pub status: String,
    #[serde(skip_serializing_if = "is_zero")]
    pub status_code: i64,
    pub output: String,
    /// Unix seconds.
    pub timestamp: i64,
    pub group: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub task: String,
    pub service: String,
    pub check: String,
}

fn is_zero(value: &i64) -> bool {
    *value == 0
}

/// Nomad's mode of a check: `readiness` when `on_update = "ignore"`, else `healthiness`.
pub fn check_mode(check: &ServiceCheck) -> &'static str {
    if check.on_update == "ignore" {
        CHECK_MODE_READINESS
    } else {
        CHECK_MODE_HEALTHINESS
    }
}

/// Nomad's ID of a check of an allocation: the hex SHA-256 of the allocation ID, the group and
/// the check's defining fields, so it is stable across agent restarts and changes with the check.
pub fn check_id(alloc_id: &str, group: &str, check: &ServiceCheck) -> String {
    let mut input = Vec::with_capacity(256);
    for text in [
        alloc_id,
        group,
        &check.task_name,
        &check.name,
        &check.r#type,
        &check.port_label,
        &check.on_update,
        &check.address_mode,
    ] {
        input.extend_from_slice(text.as_bytes());
    }
    input.extend_from_slice(&check.interval.as_nanos().to_le_bytes());
    input.extend_from_slice(&check.timeout.as_nanos().to_le_bytes());
    for text in [&check.protocol, &check.path, &check.method] {
        input.extend_from_slice(text.as_bytes());
    }
    input.extend_from_slice(if check.tls_skip_verify {
        b"true"
    } else {
        b"false"
    });
    Sha256::digest(&input)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_ids_are_stable_and_follow_the_check() {
        let check = ServiceCheck {
            name: "alive".into(),
            r#type: "http".into(),
            path: "/health".into(),
            ..ServiceCheck::default()
        };
        let first = check_id("a1", "web", &check);
        assert_eq!(first.len(), 64);
        assert_eq!(first, check_id("a1", "web", &check));
        assert_ne!(first, check_id("a2", "web", &check));
        let moved = ServiceCheck {
            path: "/other".into(),
            ..check
        };
        assert_ne!(first, check_id("a1", "web", &moved));
    }

    #[test]
    fn results_have_nomads_keys_in_nomads_order() {
        let result = CheckQueryResult {
            id: "x".into(),
            mode: CHECK_MODE_HEALTHINESS.into(),
            status: CHECK_SUCCESS.into(),
            output: "nomad: http ok".into(),
            group: "web".into(),
            service: "web".into(),
            check: "alive".into(),
            ..CheckQueryResult::default()
        };
        let value = serde_json::to_value(&result).unwrap();
        let keys: Vec<_> = value.as_object().unwrap().keys().cloned().collect();
        assert_eq!(
            keys,
            [
                "ID",
                "Mode",
                "Status",
                "Output",
                "Timestamp",
                "Group",
                "Service",
                "Check"
            ]
        );
    }
}
