//! The keyring's table: root keys as the server wrapped them (metadata and sealed key
//! material), one of them `active`.
//!
//! The store never sees a key in the clear and does no cryptography: the server's keyring
//! seals a key before handing it here and unseals what it reads back.
//!
//! **Invariant**: at most one root key is `active`; storing a new active key makes the
//! previous one `inactive` in the same write.

use std::sync::Arc;

use drover_structs::WrappedRootKey;
use drover_structs::keyring::{ROOT_KEY_STATE_ACTIVE, ROOT_KEY_STATE_INACTIVE};

use crate::engine::Table;
use crate::error::StateError;
use crate::store::StateStore;

impl StateStore {
    /// Stores a new root key (its `CreateIndex` and `ModifyIndex` are this write's); if it is
    /// active, the key active until now becomes inactive in the same write. An existing key ID
    /// is refused. Returns the stored record.
    pub async fn insert_root_key(
        &self,
        mut key: WrappedRootKey,
    ) -> Result<Arc<WrappedRootKey>, StateError> {
        if key.meta.key_id.is_empty() || key.meta.key_id.contains('\0') {
            return Err(StateError::Invalid {
                field: "RootKeyMeta.KeyID",
                reason: "must be a non-empty ID without NUL".to_owned(),
            });
        }
        self.engine
            .write(move |tables, context| {
                if tables.root_keys.contains_key(&key.meta.key_id) {
                    return Err(StateError::Invalid {
                        field: "RootKeyMeta.KeyID",
                        reason: format!("root key {} already exists", key.meta.key_id),
                    });
                }
                let index = context.index();
                if key.meta.is_active() {
                    let previously_active: Vec<Arc<WrappedRootKey>> = tables
                        .root_keys
                        .values()
                        .filter(|existing| existing.meta.is_active())
                        .cloned()
                        .collect();
                    for existing in previously_active {
                        let mut demoted = WrappedRootKey::clone(&existing);
                        demoted.meta.state = ROOT_KEY_STATE_INACTIVE.to_owned();
                        demoted.meta.modify_index = index;
                        context.put(Table::RootKeys, demoted.meta.key_id.as_bytes(), &demoted)?;
                        tables
                            .root_keys
                            .insert(demoted.meta.key_id.clone(), Arc::new(demoted));
                    }
                }
                key.meta.create_index = index;
                key.meta.modify_index = index;
                context.put(Table::RootKeys, key.meta.key_id.as_bytes(), &key)?;
                let key = Arc::new(key);
                tables
                    .root_keys
                    .insert(key.meta.key_id.clone(), Arc::clone(&key));
                Ok(key)
            })
            .await
    }

    /// Removes the root key `key_id`. An unknown key is `NotFound`; the active key is refused
    /// (rotate first). Returns the index of the write.
    pub async fn delete_root_key(&self, key_id: &str) -> Result<u64, StateError> {
        let key_id = key_id.to_owned();
        self.engine
            .write(move |tables, context| {
                let Some(existing) = tables.root_keys.get(&key_id) else {
                    return Err(StateError::NotFound {
                        kind: "root key",
                        id: key_id,
                    });
                };
                if existing.meta.state == ROOT_KEY_STATE_ACTIVE {
                    return Err(StateError::Invalid {
                        field: "KeyID",
                        reason: "active root key cannot be deleted - call rotate first".to_owned(),
                    });
                }
                context.delete(Table::RootKeys, key_id.as_bytes());
                tables.root_keys.remove(&key_id);
                Ok(context.index())
            })
            .await
    }

    /// Every root key, by key ID.
    pub fn root_keys(&self) -> Vec<Arc<WrappedRootKey>> {
        self.engine
            .snapshot()
            .data
            .root_keys
            .values()
            .cloned()
            .collect()
    }

    /// The root key `key_id`.
    pub fn root_key(&self, key_id: &str) -> Option<Arc<WrappedRootKey>> {
        self.engine.snapshot().data.root_keys.get(key_id).cloned()
    }
}

#[cfg(test)]
mod tests {
    use drover_structs::RootKeyMeta;

    use super::*;

    fn key(id: &str, state: &str) -> WrappedRootKey {
        WrappedRootKey {
            version: 1,
            meta: RootKeyMeta {
                key_id: id.to_owned(),
                algorithm: "aes256-gcm".to_owned(),
                state: state.to_owned(),
                ..RootKeyMeta::default()
            },
            kek_id: "kek".to_owned(),
            wrapped_key: "c2VhbGVk".to_owned(),
        }
    }

    #[tokio::test]
    async fn a_new_active_key_demotes_the_old_one_and_only_inactive_keys_can_be_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::open(dir.path()).await.unwrap();
        let first = store.insert_root_key(key("one", "active")).await.unwrap();
        assert!(first.meta.create_index > 0);
        assert!(store.delete_root_key("one").await.is_err());
        store.insert_root_key(key("two", "active")).await.unwrap();
        assert!(store.insert_root_key(key("two", "active")).await.is_err());
        let states: Vec<(String, String)> = store
            .root_keys()
            .iter()
            .map(|key| (key.meta.key_id.clone(), key.meta.state.clone()))
            .collect();
        assert_eq!(
            states,
            [
                ("one".to_owned(), "inactive".to_owned()),
                ("two".to_owned(), "active".to_owned())
            ]
        );
        store.close().await;
        drop(store);

        let store = StateStore::open(dir.path()).await.unwrap();
        assert_eq!(store.root_keys().len(), 2);
        assert!(store.root_key("two").unwrap().meta.is_active());
        store.delete_root_key("one").await.unwrap();
        assert!(matches!(
            store.delete_root_key("one").await,
            Err(StateError::NotFound { .. })
        ));
        assert_eq!(store.root_keys().len(), 1);
    }
}
