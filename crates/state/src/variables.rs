//! The variables table: each variable's metadata with its items sealed by the server's
//! keyring (the store never holds an item in the clear), keyed by namespace and path, and
//! the check-and-set rules of a write.
//!
//! **Invariant**: a write with a `cas` index applies only when the stored variable's
//! `ModifyIndex` equals it (0: only when there is none); otherwise nothing is written and the
//! stored record is answered as the conflict. A variable holding a lock is written only by
//! a caller naming the lock's ID (never deleted), and keeps its lock until it is released.

use std::sync::Arc;

use drover_structs::VariableEncrypted;
use drover_structs::VariableMetadata;
use drover_structs::variables::VariableLock;

use crate::engine::Table;
use crate::error::StateError;
use crate::events::{Event, EventPayload, EventType, Topic};
use crate::store::StateStore;

fn record_key(namespace: &str, path: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(namespace.len() + path.len() + 1);
    key.extend_from_slice(namespace.as_bytes());
    key.push(0);
    key.extend_from_slice(path.as_bytes());
    key
}

/// A write to one variable.
#[derive(Debug, Clone, PartialEq)]
pub enum VariableOp {
    /// Create or replace it (the record's sealed items; metadata indexes and times are set
    /// here).
    Set(VariableEncrypted),
    /// Remove it (absent: nothing to do).
    Delete { namespace: String, path: String },
}

/// The outcome of [`StateStore::write_variable`].
#[derive(Debug, Clone, PartialEq)]
pub enum VariableWrite {
    /// Applied; the stored record (none after a delete) and the index of the write.
    Applied {
        variable: Option<Arc<VariableEncrypted>>,
        index: u64,
    },
    /// The `cas` index did not match: the stored record (none: no such variable).
    Conflict(Option<Arc<VariableEncrypted>>),
}

/// A lock operation on one variable.
#[derive(Debug, Clone, PartialEq)]
pub enum VariableLockOp {
    /// Take the lock: the record with its sealed items and `meta.lock` set.
    Acquire(VariableEncrypted),
    /// Give it back; `lock_id` must be the held lock's (`None`: whoever holds it).
    Release {
        namespace: String,
        path: String,
        lock_id: Option<String>,
    },
}

/// The outcome of [`StateStore::write_variable_lock`].
#[derive(Debug, Clone, PartialEq)]
pub enum VariableLockWrite {
    Applied {
        variable: Arc<VariableEncrypted>,
        index: u64,
    },
    /// Another lock is held (acquire) or another lock ID was named (release): the variable's
    /// namespace and path only (with an empty lock for a release, as Nomad).
    Conflict(VariableEncrypted),
    /// Release of a variable that does not exist.
    NotFound,
    /// Release of a variable that holds no lock.
    NoLock,
}

/// Nomad's `Variable` event (`VariableUpdated`): the metadata, and whether it was deleted.
fn variable_event(meta: &VariableMetadata, deleted: bool, index: u64) -> Result<Event, StateError> {
    let payload = serde_json::json!({"Metadata": meta, "Deleted": deleted});
    Ok(Event {
        topic: Topic::Variable,
        event_type: EventType::VariableUpdated,
        key: meta.path.clone(),
        namespace: meta.namespace.clone(),
        filter_keys: Vec::new(),
        index,
        payload: EventPayload::from_value(&payload).map_err(|error| StateError::Encode {
            table: Table::Variables.name(),
            reason: error.to_string(),
        })?,
    })
}

/// What a refused write on a locked variable answers: its namespace and path only.
fn locked_conflict(namespace: &str, path: &str, lock: Option<VariableLock>) -> VariableEncrypted {
    VariableEncrypted {
        meta: VariableMetadata {
            namespace: namespace.to_owned(),
            path: path.to_owned(),
            lock,
            ..VariableMetadata::default()
        },
        ..VariableEncrypted::default()
    }
}

impl StateStore {
    /// Applies `op`, checked against `cas` when given. `now_unix_ns` becomes the
    /// `ModifyTime` (and the `CreateTime` of a new variable).
    pub async fn write_variable(
        &self,
        op: VariableOp,
        cas: Option<u64>,
        now_unix_ns: i64,
    ) -> Result<VariableWrite, StateError> {
        self.engine
            .write(move |tables, context| {
                let key = match &op {
                    VariableOp::Set(variable) => {
                        (variable.meta.namespace.clone(), variable.meta.path.clone())
                    }
                    VariableOp::Delete { namespace, path } => (namespace.clone(), path.clone()),
                };
                let existing = tables.variables.get(&key).cloned();
                if let Some(cas) = cas {
                    let current = existing
                        .as_ref()
                        .map_or(0, |stored| stored.meta.modify_index);
                    if current != cas {
                        return Ok(VariableWrite::Conflict(existing));
                    }
                }
                // A held lock lets only its holder write (a delete never names a lock).
                let caller_lock = match &op {
                    VariableOp::Set(variable) => variable.meta.lock.as_ref().map(|lock| &lock.id),
                    VariableOp::Delete { .. } => None,
                };
                if let Some(held) = existing
                    .as_ref()
                    .and_then(|stored| stored.meta.lock.as_ref())
                    && caller_lock != Some(&held.id)
                {
                    return Ok(VariableWrite::Conflict(Some(Arc::new(locked_conflict(
                        &key.0, &key.1, None,
                    )))));
                }
                match op {
                    VariableOp::Set(mut variable) => {
                        let index = context.index();
                        // The holder's write keeps the lock as it is; a write never takes one.
                        variable.meta.lock = existing
                            .as_ref()
                            .and_then(|stored| stored.meta.lock.clone());
                        match &existing {
                            Some(stored) => {
                                variable.meta.create_index = stored.meta.create_index;
                                variable.meta.create_time = stored.meta.create_time;
                            }
                            None => {
                                variable.meta.create_index = index;
                                variable.meta.create_time = now_unix_ns;
                            }
                        }
                        variable.meta.modify_index = index;
                        variable.meta.modify_time = now_unix_ns;
                        context.put(Table::Variables, &record_key(&key.0, &key.1), &variable)?;
                        context.emit(variable_event(&variable.meta, false, index)?);
                        let variable = Arc::new(variable);
                        tables.variables.insert(key, Arc::clone(&variable));
                        Ok(VariableWrite::Applied {
                            variable: Some(variable),
                            index,
                        })
                    }
                    VariableOp::Delete { .. } => {
                        if existing.is_none() {
                            return Ok(VariableWrite::Applied {
                                variable: None,
                                index: context.latest_committed_index(),
                            });
                        }
                        context.delete(Table::Variables, &record_key(&key.0, &key.1));
                        if let Some(removed) = tables.variables.remove(&key) {
                            let index = context.index();
                            context.emit(variable_event(&removed.meta, true, index)?);
                        }
                        Ok(VariableWrite::Applied {
                            variable: None,
                            index: context.index(),
                        })
                    }
                }
            })
            .await
    }

    /// Takes or gives back the lock on a variable (Nomad's `VarLockAcquire` and
    /// `VarLockRelease`). Acquiring writes the record (its items and its lock, which must be
    /// set) unless another lock is held; releasing keeps the items and clears the lock when
    /// the caller names it (`None`: the server itself, after the lock expired).
    pub async fn write_variable_lock(
        &self,
        op: VariableLockOp,
        now_unix_ns: i64,
    ) -> Result<VariableLockWrite, StateError> {
        self.engine
            .write(move |tables, context| {
                let key = match &op {
                    VariableLockOp::Acquire(variable) => {
                        (variable.meta.namespace.clone(), variable.meta.path.clone())
                    }
                    VariableLockOp::Release {
                        namespace, path, ..
                    } => (namespace.clone(), path.clone()),
                };
                let existing = tables.variables.get(&key).cloned();
                let index = context.index();
                let stored = match op {
                    VariableLockOp::Acquire(mut variable) => {
                        if let Some(stored) = &existing {
                            if stored.meta.lock.is_some() {
                                return Ok(VariableLockWrite::Conflict(locked_conflict(
                                    &key.0, &key.1, None,
                                )));
                            }
                            variable.meta.create_index = stored.meta.create_index;
                            variable.meta.create_time = stored.meta.create_time;
                        } else {
                            variable.meta.create_index = index;
                            variable.meta.create_time = now_unix_ns;
                        }
                        variable.meta.modify_index = index;
                        variable.meta.modify_time = now_unix_ns;
                        variable
                    }
                    VariableLockOp::Release { lock_id, .. } => {
                        let Some(stored) = existing else {
                            return Ok(VariableLockWrite::NotFound);
                        };
                        let Some(held) = &stored.meta.lock else {
                            return Ok(VariableLockWrite::NoLock);
                        };
                        if lock_id.is_some_and(|id| id != held.id) {
                            return Ok(VariableLockWrite::Conflict(locked_conflict(
                                &key.0,
                                &key.1,
                                Some(VariableLock::default()),
                            )));
                        }
                        let mut released = (*stored).clone();
                        released.meta.lock = None;
                        released.meta.modify_index = index;
                        released
                    }
                };
                context.put(Table::Variables, &record_key(&key.0, &key.1), &stored)?;
                context.emit(variable_event(&stored.meta, false, index)?);
                let stored = Arc::new(stored);
                tables.variables.insert(key, Arc::clone(&stored));
                Ok(VariableLockWrite::Applied {
                    variable: stored,
                    index,
                })
            })
            .await
    }

    /// Every variable that holds a lock (for the server's lock timers at start).
    pub fn locked_variables(&self) -> Vec<Arc<VariableEncrypted>> {
        self.engine
            .snapshot()
            .data
            .variables
            .values()
            .filter(|variable| variable.meta.lock.is_some())
            .map(Arc::clone)
            .collect()
    }

    /// The variable at `path` in `namespace`.
    pub fn variable(&self, namespace: &str, path: &str) -> Option<Arc<VariableEncrypted>> {
        self.engine
            .snapshot()
            .data
            .variables
            .get(&(namespace.to_owned(), path.to_owned()))
            .cloned()
    }

    /// The variables whose path starts with `prefix`, in `namespace` (every namespace when
    /// `None`), by namespace and path.
    pub fn variables(&self, namespace: Option<&str>, prefix: &str) -> Vec<Arc<VariableEncrypted>> {
        self.engine
            .snapshot()
            .data
            .variables
            .iter()
            .filter(|((ns, path), _)| {
                namespace.is_none_or(|wanted| wanted == ns) && path.starts_with(prefix)
            })
            .map(|(_, variable)| Arc::clone(variable))
            .collect()
    }

    /// How many variables are sealed with root key `key_id`.
    pub fn variables_sealed_with(&self, key_id: &str) -> usize {
        self.engine
            .snapshot()
            .data
            .variables
            .values()
            .filter(|variable| variable.key_id == key_id)
            .count()
    }
}

#[cfg(test)]
mod tests {
    use drover_structs::VariableMetadata;

    use super::*;

    fn sealed(path: &str, data: &str) -> VariableEncrypted {
        VariableEncrypted {
            version: 1,
            meta: VariableMetadata {
                namespace: "default".to_owned(),
                path: path.to_owned(),
                ..VariableMetadata::default()
            },
            key_id: "k1".to_owned(),
            data: data.to_owned(),
        }
    }

    #[tokio::test]
    async fn check_and_set_applies_only_on_the_current_index() {
        let store = StateStore::in_memory().await.unwrap();
        let VariableWrite::Applied {
            variable: Some(first),
            ..
        } = store
            .write_variable(VariableOp::Set(sealed("a/b", "one")), Some(0), 100)
            .await
            .unwrap()
        else {
            panic!("first write conflicted")
        };
        assert_eq!(first.meta.create_time, 100);
        let conflict = store
            .write_variable(VariableOp::Set(sealed("a/b", "two")), Some(0), 200)
            .await
            .unwrap();
        assert_eq!(conflict, VariableWrite::Conflict(Some(first.clone())));
        let VariableWrite::Applied {
            variable: Some(second),
            ..
        } = store
            .write_variable(
                VariableOp::Set(sealed("a/b", "two")),
                Some(first.meta.modify_index),
                200,
            )
            .await
            .unwrap()
        else {
            panic!("a current cas conflicted")
        };
        assert_eq!(second.meta.create_index, first.meta.create_index);
        assert_eq!(second.meta.create_time, 100);
        assert_eq!(second.meta.modify_time, 200);
        assert_eq!(store.variables(Some("default"), "a/").len(), 1);
        assert_eq!(store.variables(None, "x").len(), 0);
        assert_eq!(store.variables_sealed_with("k1"), 1);
        let delete = VariableOp::Delete {
            namespace: "default".to_owned(),
            path: "a/b".to_owned(),
        };
        assert!(matches!(
            store
                .write_variable(delete.clone(), Some(first.meta.modify_index), 300)
                .await
                .unwrap(),
            VariableWrite::Conflict(Some(_))
        ));
        store.write_variable(delete, None, 300).await.unwrap();
        assert!(store.variable("default", "a/b").is_none());
    }
}
