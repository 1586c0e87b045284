//! Nomad Variables on the server: validation (Nomad's path and size rules), sealing items with
//! the keyring's active root key before they reach the store, opening them on read, and
//! check-and-set writes.
//!
//! Not here: who may read which path (the HTTP layer asks the identity resolver), locks.

use std::collections::BTreeMap;
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use drover_state::{StateError, StateStore, VariableOp, VariableWrite};
use drover_structs::variables::{
    MAX_VARIABLE_SIZE, VARIABLE_RECORD_VERSION, items_size, validate_variable_path,
};
use drover_structs::{DEFAULT_NAMESPACE, Variable, VariableEncrypted, VariableMetadata};

use crate::keyring::{Keyring, KeyringError};

/// Errors of variable reads and writes.
#[derive(Debug, thiserror::Error)]
pub enum VariablesError {
    /// Bad input, with Nomad's message.
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Keyring(#[from] KeyringError),
    #[error(transparent)]
    State(#[from] StateError),
    #[error("stored variable {path} is damaged: {reason}")]
    Damaged { path: String, reason: String },
}

/// The outcome of a write.
#[derive(Debug, Clone, PartialEq)]
pub enum VariableWriteOutcome {
    /// Written (none after a delete), at `index`.
    Applied {
        variable: Option<Variable>,
        index: u64,
    },
    /// A stale `cas`: the current variable (metadata only, namespace and path, when there is
    /// none).
    Conflict(Variable),
}

/// What binds sealed items to their variable: a record moved to another path does not open.
fn associated_data(namespace: &str, path: &str) -> Vec<u8> {
    format!("{namespace}\0{path}").into_bytes()
}

/// Opens a stored variable.
pub fn open_variable(
    keyring: &Keyring,
    stored: &VariableEncrypted,
) -> Result<Variable, VariablesError> {
    let damaged = |reason: &str| VariablesError::Damaged {
        path: stored.meta.path.clone(),
        reason: reason.to_owned(),
    };
    let sealed = STANDARD
        .decode(&stored.data)
        .map_err(|_| damaged("the sealed items are not base64"))?;
    let plain = keyring.decrypt(
        &stored.key_id,
        &associated_data(&stored.meta.namespace, &stored.meta.path),
        &sealed,
    )?;
    let items: BTreeMap<String, String> =
        serde_json::from_slice(&plain).map_err(|_| damaged("the items are not a JSON object"))?;
    Ok(Variable::from_parts(&stored.meta, items))
}

/// The variable at `path` in `namespace`, opened.
pub fn read_variable(
    keyring: &Keyring,
    state: &StateStore,
    namespace: &str,
    path: &str,
) -> Result<Option<Variable>, VariablesError> {
    state
        .variable(namespace, path)
        .map(|stored| open_variable(keyring, &stored))
        .transpose()
}

fn conflict(
    keyring: &Keyring,
    stored: Option<Arc<VariableEncrypted>>,
    namespace: &str,
    path: &str,
) -> Result<VariableWriteOutcome, VariablesError> {
    Ok(VariableWriteOutcome::Conflict(match stored {
        Some(stored) => open_variable(keyring, &stored)?,
        None => Variable {
            namespace: namespace.to_owned(),
            path: path.to_owned(),
            ..Variable::default()
        },
    }))
}

/// Creates or replaces a variable (checked against `cas` when given), sealing its items.
pub async fn put_variable(
    keyring: &Keyring,
    state: &StateStore,
    mut variable: Variable,
    cas: Option<u64>,
    now_unix_ns: i64,
) -> Result<VariableWriteOutcome, VariablesError> {
    if variable.namespace.is_empty() {
        variable.namespace = DEFAULT_NAMESPACE.to_owned();
    }
    if variable.namespace == "*" {
        return Err(VariablesError::Invalid(
            "can not target wildcard (\"*\")namespace".to_owned(),
        ));
    }
    if variable.items.is_empty() {
        return Err(VariablesError::Invalid(
            "variable missing required Items object".to_owned(),
        ));
    }
    if items_size(&variable.items) > MAX_VARIABLE_SIZE {
        return Err(VariablesError::Invalid(
            "variables are limited to 64KiB in total size".to_owned(),
        ));
    }
    validate_variable_path(&variable.path).map_err(VariablesError::Invalid)?;
    let plain = serde_json::to_vec(&variable.items)
        .map_err(|error| VariablesError::Invalid(error.to_string()))?;
    let (key_id, sealed) = keyring.encrypt(
        &associated_data(&variable.namespace, &variable.path),
        &plain,
    )?;
    let record = VariableEncrypted {
        version: VARIABLE_RECORD_VERSION,
        meta: VariableMetadata {
            namespace: variable.namespace.clone(),
            path: variable.path.clone(),
            ..VariableMetadata::default()
        },
        key_id,
        data: STANDARD.encode(sealed),
    };
    match state
        .write_variable(VariableOp::Set(record), cas, now_unix_ns)
        .await?
    {
        VariableWrite::Applied {
            variable: stored,
            index,
        } => Ok(VariableWriteOutcome::Applied {
            variable: stored.map(|stored| Variable::from_parts(&stored.meta, variable.items)),
            index,
        }),
        VariableWrite::Conflict(stored) => {
            conflict(keyring, stored, &variable.namespace, &variable.path)
        }
    }
}

/// Removes a variable (checked against `cas` when given); an absent one is no error.
pub async fn delete_variable(
    keyring: &Keyring,
    state: &StateStore,
    namespace: &str,
    path: &str,
    cas: Option<u64>,
    now_unix_ns: i64,
) -> Result<VariableWriteOutcome, VariablesError> {
    let op = VariableOp::Delete {
        namespace: namespace.to_owned(),
        path: path.to_owned(),
    };
    match state.write_variable(op, cas, now_unix_ns).await? {
        VariableWrite::Applied { index, .. } => Ok(VariableWriteOutcome::Applied {
            variable: None,
            index,
        }),
        VariableWrite::Conflict(stored) => conflict(keyring, stored, namespace, path),
    }
}

/// Re-seals every variable sealed with another key with the active one (a full rotation).
/// Returns how many were re-sealed.
pub async fn reseal_variables(
    keyring: &Keyring,
    state: &StateStore,
    active_key_id: &str,
    now_unix_ns: i64,
) -> Result<usize, VariablesError> {
    let mut resealed = 0;
    for stored in state.variables(None, "") {
        if stored.key_id == active_key_id {
            continue;
        }
        let variable = open_variable(keyring, &stored)?;
        let outcome = put_variable(
            keyring,
            state,
            variable,
            Some(stored.meta.modify_index),
            now_unix_ns,
        )
        .await?;
        // A variable written meanwhile is already sealed with the active key.
        if matches!(outcome, VariableWriteOutcome::Applied { .. }) {
            resealed += 1;
        }
    }
    Ok(resealed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::SystemClock;

    #[tokio::test]
    async fn items_are_sealed_in_the_store_and_opened_on_read() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateStore::open(dir.path()).await.unwrap();
        let keyring = Keyring::open(dir.path(), state.clone(), Arc::new(SystemClock))
            .await
            .unwrap();
        let variable = Variable {
            path: "app/db".to_owned(),
            items: BTreeMap::from([("password".to_owned(), "s3cr3t-plaintext".to_owned())]),
            ..Variable::default()
        };
        let VariableWriteOutcome::Applied {
            variable: Some(written),
            index,
        } = put_variable(&keyring, &state, variable.clone(), None, 5)
            .await
            .unwrap()
        else {
            panic!("not applied")
        };
        assert_eq!(written.namespace, "default");
        assert_eq!(written.modify_index, index);
        let stored = state.variable("default", "app/db").unwrap();
        assert!(!stored.data.contains("s3cr3t"));
        let read = read_variable(&keyring, &state, "default", "app/db")
            .unwrap()
            .unwrap();
        assert_eq!(read.items["password"], "s3cr3t-plaintext");

        let VariableWriteOutcome::Conflict(current) =
            put_variable(&keyring, &state, variable.clone(), Some(index - 1), 6)
                .await
                .unwrap()
        else {
            panic!("a stale cas was applied")
        };
        assert_eq!(current, read);

        // A full rotation re-seals with the new key; the old key is then no longer in use.
        let old_key = stored.key_id.clone();
        let new_key = keyring.rotate().await.unwrap();
        assert_eq!(
            reseal_variables(&keyring, &state, &new_key.key_id, 7)
                .await
                .unwrap(),
            1
        );
        assert_eq!(state.variables_sealed_with(&old_key), 0);
        assert_eq!(
            read_variable(&keyring, &state, "default", "app/db")
                .unwrap()
                .unwrap()
                .items,
            read.items
        );

        let empty = Variable {
            path: "x".to_owned(),
            ..Variable::default()
        };
        assert!(matches!(
            put_variable(&keyring, &state, empty, None, 8).await,
            Err(VariablesError::Invalid(_))
        ));
    }
}
