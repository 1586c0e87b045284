//! The service mesh's intentions table: one intention per (source, destination), each side
//! `(namespace, name)` (either may be `*`). The store keeps them as the server wrote them;
//! matching is `drover_mesh::intentions`'.

use std::sync::Arc;

use drover_structs::intention::Intention;

use crate::engine::Table;
use crate::error::StateError;
use crate::store::StateStore;
use crate::tables::intention_key;

impl StateStore {
    /// Stores `intention` under its source and destination. One already there keeps its ID,
    /// `CreateIndex` and `CreatedAt` and takes the rest (`ModifyIndex` is this write's).
    /// Returns the stored record.
    pub async fn put_intention(
        &self,
        mut intention: Intention,
    ) -> Result<Arc<Intention>, StateError> {
        let key = intention_key(
            (&intention.source_ns, &intention.source_name),
            (&intention.destination_ns, &intention.destination_name),
        );
        if key.matches('/').count() != 3 || key.contains('\0') {
            return Err(StateError::Invalid {
                field: "Intention",
                reason: "a source or destination part is empty or holds '/'".to_owned(),
            });
        }
        self.engine
            .write(move |tables, context| {
                let index = context.index();
                match tables.intentions.get(&key) {
                    Some(existing) => {
                        intention.id = existing.id.clone();
                        intention.create_index = existing.create_index;
                        intention.created_at = existing.created_at.clone();
                    }
                    None => intention.create_index = index,
                }
                intention.modify_index = index;
                context.put(Table::Intentions, key.as_bytes(), &intention)?;
                let intention = Arc::new(intention);
                tables.intentions.insert(key, Arc::clone(&intention));
                Ok(intention)
            })
            .await
    }

    /// Removes the intention from `source` to `destination`; `NotFound` when there is none.
    /// Returns the index of the write.
    pub async fn delete_intention(
        &self,
        source: (&str, &str),
        destination: (&str, &str),
    ) -> Result<u64, StateError> {
        let key = intention_key(source, destination);
        self.engine
            .write(move |tables, context| {
                if !tables.intentions.contains_key(&key) {
                    return Err(StateError::NotFound {
                        kind: "intention",
                        id: key,
                    });
                }
                context.delete(Table::Intentions, key.as_bytes());
                tables.intentions.remove(&key);
                Ok(context.index())
            })
            .await
    }

    /// Every intention, by source then destination.
    pub fn intentions(&self) -> Vec<Arc<Intention>> {
        self.engine
            .snapshot()
            .data
            .intentions
            .values()
            .cloned()
            .collect()
    }

    /// The intention from `source` to `destination`, exactly.
    pub fn intention(
        &self,
        source: (&str, &str),
        destination: (&str, &str),
    ) -> Option<Arc<Intention>> {
        self.engine
            .snapshot()
            .data
            .intentions
            .get(&intention_key(source, destination))
            .cloned()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use drover_structs::intention::IntentionAction;

    use super::*;

    fn intention(source: &str, destination: &str, action: IntentionAction) -> Intention {
        Intention {
            id: format!("id-{source}-{destination}"),
            description: String::new(),
            source_ns: "default".to_owned(),
            source_name: source.to_owned(),
            destination_ns: "default".to_owned(),
            destination_name: destination.to_owned(),
            source_type: "consul".to_owned(),
            action,
            meta: BTreeMap::new(),
            precedence: 9,
            created_at: "then".to_owned(),
            updated_at: "then".to_owned(),
            create_index: 0,
            modify_index: 0,
        }
    }

    #[tokio::test]
    async fn an_intention_is_kept_replaced_in_place_and_removed_across_reopens() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::open(dir.path()).await.unwrap();
        let first = store
            .put_intention(intention("web", "api", IntentionAction::Allow))
            .await
            .unwrap();
        let mut replacement = intention("web", "api", IntentionAction::Deny);
        replacement.id = "another".to_owned();
        replacement.created_at = "now".to_owned();
        let second = store.put_intention(replacement).await.unwrap();
        assert_eq!(second.id, first.id);
        assert_eq!(second.created_at, "then");
        assert_eq!(second.create_index, first.create_index);
        assert!(second.modify_index > first.modify_index);
        assert!(store.indexes().table(Table::Intentions) >= second.modify_index);
        store.close().await;

        let store = StateStore::open(dir.path()).await.unwrap();
        let stored = store
            .intention(("default", "web"), ("default", "api"))
            .unwrap();
        assert_eq!(stored.action, IntentionAction::Deny);
        assert_eq!(store.intentions().len(), 1);
        store
            .delete_intention(("default", "web"), ("default", "api"))
            .await
            .unwrap();
        assert!(matches!(
            store
                .delete_intention(("default", "web"), ("default", "api"))
                .await,
            Err(StateError::NotFound { .. })
        ));
        assert!(store.intentions().is_empty());
    }
}
