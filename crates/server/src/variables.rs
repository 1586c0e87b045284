//! Nomad Variables on the server: validation (Nomad's path and size rules), sealing items with
//! the keyring's active root key before they reach the store, opening them on read,
//!
//! check-and-set writes, and locks (acquire, renew, release, as Nomad's `Variables.Apply`
//! lock operations and `Variables.RenewLock`).
//!
//! Not here: who may read which path (the HTTP layer asks the identity resolver), the
//! lock timers (`variable_locks`).

use std::collections::BTreeMap;
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use drover_state::{
    StateError, StateStore, VariableLockOp, VariableLockWrite, VariableOp, VariableWrite,
};
use drover_structs::variables::{
    DEFAULT_LOCK_DELAY, DEFAULT_LOCK_TTL, MAX_VARIABLE_SIZE, VARIABLE_RECORD_VERSION, VariableLock,
    items_size, validate_variable_path,
};
use drover_structs::{DEFAULT_NAMESPACE, Variable, VariableEncrypted, VariableMetadata};

use crate::keyring::{Keyring, KeyringError};
use crate::variable_locks::VariableLocks;

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
    /// A lock operation on a variable that does not exist (HTTP 404).
    #[error("variable doesn't exist")]
    NotFound,
    /// A lock operation refused as Nomad's RPC error with code 409, with its message.
    #[error("{0}")]
    LockConflict(&'static str),
}

/// Nomad's message for a renew or release on a variable without a lock.
pub const NO_LOCK: &str = "variable doesn't hold a lock";
/// Nomad's message for a renewal by another caller or of a lost lock.
pub const LOCKED: &str = "attempting to modify locked variable";

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
        // A locked variable's conflict carries only its namespace and path.
        Some(stored) if stored.key_id.is_empty() => {
            Variable::from_parts(&stored.meta, BTreeMap::new())
        }
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
    if variable
        .lock
        .as_ref()
        .is_some_and(|lock| lock.ttl.0 != 0 || lock.lock_delay.0 != 0)
    {
        return Err(VariablesError::Invalid(
            "variable should not contain lock definition".to_owned(),
        ));
    }
    // A lock named by a write is the caller's proof of holding it, never a new lock.
    let record = seal(keyring, &variable, variable.lock.clone())?;
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

/// The stored record of `variable`: its items sealed, `lock` in its metadata.
fn seal(
    keyring: &Keyring,
    variable: &Variable,
    lock: Option<VariableLock>,
) -> Result<VariableEncrypted, VariablesError> {
    let plain = serde_json::to_vec(&variable.items)
        .map_err(|error| VariablesError::Invalid(error.to_string()))?;
    let (key_id, sealed) = keyring.encrypt(
        &associated_data(&variable.namespace, &variable.path),
        &plain,
    )?;
    Ok(VariableEncrypted {
        version: VARIABLE_RECORD_VERSION,
        meta: VariableMetadata {
            namespace: variable.namespace.clone(),
            path: variable.path.clone(),
            lock,
            ..VariableMetadata::default()
        },
        key_id,
        data: STANDARD.encode(sealed),
    })
}

/// Nomad's multi-error text.
fn multi_error(messages: &[String]) -> String {
    let mut text = match messages.len() {
        1 => "1 error occurred:\n".to_owned(),
        count => format!("{count} errors occurred:\n"),
    };
    for message in messages {
        text.push_str("\t* ");
        text.push_str(message);
        text.push('\n');
    }
    text.push('\n');
    text
}

fn lock_conflict(stored: VariableEncrypted) -> VariableWriteOutcome {
    VariableWriteOutcome::Conflict(Variable::from_parts(&stored.meta, BTreeMap::new()))
}

/// Takes the lock on a variable (creating it when absent, with the request's items, which
/// may be empty), as Nomad's `lock-acquire`: a new lock ID, Nomad's default TTL and delay
/// where none is asked for, and the lock's timer started. Another held lock is the conflict.
pub async fn acquire_variable_lock(
    keyring: &Keyring,
    state: &StateStore,
    locks: &std::sync::Arc<VariableLocks>,
    mut variable: Variable,
    now_unix_ns: i64,
) -> Result<VariableWriteOutcome, VariablesError> {
    if variable.namespace.is_empty() {
        variable.namespace = DEFAULT_NAMESPACE.to_owned();
    }
    let mut lock = variable.lock.take().unwrap_or_default();
    if lock.id.is_empty() {
        lock.id = uuid::Uuid::new_v4().to_string();
    }
    if lock.ttl.0 == 0 {
        lock.ttl = DEFAULT_LOCK_TTL;
    }
    if lock.lock_delay.0 == 0 {
        lock.lock_delay = DEFAULT_LOCK_DELAY;
    }
    if variable.namespace == "*" {
        return Err(VariablesError::Invalid(multi_error(&[
            "can not target wildcard (\"*\")namespace".to_owned(),
        ])));
    }
    if items_size(&variable.items) > MAX_VARIABLE_SIZE {
        return Err(VariablesError::Invalid(
            "variables are limited to 64KiB in total size".to_owned(),
        ));
    }
    validate_variable_path(&variable.path).map_err(VariablesError::Invalid)?;
    let problems = lock.validate();
    if !problems.is_empty() {
        return Err(VariablesError::Invalid(multi_error(&problems)));
    }
    let record = seal(keyring, &variable, Some(lock))?;
    match state
        .write_variable_lock(VariableLockOp::Acquire(record), now_unix_ns)
        .await?
    {
        VariableLockWrite::Applied {
            variable: stored,
            index,
        } => {
            locks.start(&stored.meta);
            Ok(VariableWriteOutcome::Applied {
                variable: Some(Variable::from_parts(&stored.meta, variable.items)),
                index,
            })
        }
        VariableLockWrite::Conflict(stored) => Ok(lock_conflict(stored)),
        VariableLockWrite::NotFound => Err(VariablesError::NotFound),
        VariableLockWrite::NoLock => Err(VariablesError::LockConflict(NO_LOCK)),
    }
}

/// Gives back the lock `variable.lock` names (`lock-release`): the items stay as they are.
pub async fn release_variable_lock(
    state: &StateStore,
    locks: &VariableLocks,
    variable: Variable,
) -> Result<VariableWriteOutcome, VariablesError> {
    let Some(lock_id) = variable
        .lock
        .as_ref()
        .map(|lock| lock.id.clone())
        .filter(|id| !id.is_empty())
    else {
        return Err(VariablesError::Invalid(
            "missing lock information".to_owned(),
        ));
    };
    if !variable.items.is_empty() {
        return Err(VariablesError::Invalid(
            "lock release operation doesn't take variable items".to_owned(),
        ));
    }
    validate_variable_path(&variable.path).map_err(VariablesError::Invalid)?;
    let namespace = if variable.namespace.is_empty() {
        DEFAULT_NAMESPACE.to_owned()
    } else {
        variable.namespace.clone()
    };
    let op = VariableLockOp::Release {
        namespace,
        path: variable.path.clone(),
        lock_id: Some(lock_id.clone()),
    };
    match state.write_variable_lock(op, 0).await? {
        VariableLockWrite::Applied {
            variable: stored,
            index,
        } => {
            locks.stop(&lock_id);
            Ok(VariableWriteOutcome::Applied {
                variable: Some(Variable::from_parts(&stored.meta, BTreeMap::new())),
                index,
            })
        }
        VariableLockWrite::Conflict(stored) => Ok(lock_conflict(stored)),
        VariableLockWrite::NotFound => Err(VariablesError::NotFound),
        VariableLockWrite::NoLock => Err(VariablesError::LockConflict(NO_LOCK)),
    }
}

/// Renews lock `lock_id` on a variable (`lock-renew`); answers the variable's metadata.
pub fn renew_variable_lock(
    state: &StateStore,
    locks: &VariableLocks,
    namespace: &str,
    path: &str,
    lock_id: &str,
) -> Result<VariableMetadata, VariablesError> {
    let Some(stored) = state.variable(namespace, path) else {
        return Err(VariablesError::NotFound);
    };
    let Some(lock) = &stored.meta.lock else {
        return Err(VariablesError::LockConflict(NO_LOCK));
    };
    if lock.id != lock_id || !locks.renew(lock_id, lock.ttl.0) {
        return Err(VariablesError::LockConflict(LOCKED));
    }
    Ok(stored.meta.clone())
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
        let mut variable = open_variable(keyring, &stored)?;
        // A locked variable is re-sealed as its holder, keeping the lock.
        variable.lock = variable.lock.map(|lock| VariableLock {
            id: lock.id,
            ..VariableLock::default()
        });
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
