//! The node pools table (Nomad's `node_pools`): pools by name. The built-in `all` and `default`
//! are not stored; every read answers them (at index 1) alongside the stored ones, and writes
//! refuse to change or delete them. A node registering in a pool nobody created creates it, as
//! Nomad's store does.
//!
//! Not here: which operator may write pools, and whether a pool is still in use (the server).

use std::sync::Arc;

use drover_structs::{NodePool, built_in_node_pools, is_built_in_node_pool};

use crate::engine::Table;
use crate::error::StateError;
use crate::store::StateStore;
use crate::tables::StateSnapshot;

impl StateSnapshot {
    /// Every pool whose name starts with `prefix`, built-in ones included, by name.
    pub fn node_pools(&self, prefix: &str) -> Vec<Arc<NodePool>> {
        let mut pools: Vec<Arc<NodePool>> = built_in_node_pools()
            .into_iter()
            .filter(|pool| pool.name.starts_with(prefix))
            .map(Arc::new)
            .collect();
        pools.extend(
            self.tables()
                .node_pools
                .range(prefix.to_owned()..)
                .take_while(|(name, _)| name.starts_with(prefix))
                .map(|(_, pool)| Arc::clone(pool)),
        );
        pools.sort_by(|a, b| a.name.cmp(&b.name));
        pools
    }

    /// The pool `name`, built-in or stored.
    pub fn node_pool(&self, name: &str) -> Option<Arc<NodePool>> {
        if is_built_in_node_pool(name) {
            return built_in_node_pools()
                .into_iter()
                .find(|pool| pool.name == name)
                .map(Arc::new);
        }
        self.tables().node_pools.get(name).cloned()
    }
}

impl StateStore {
    /// See [`StateSnapshot::node_pools`].
    pub fn node_pools(&self, prefix: &str) -> Vec<Arc<NodePool>> {
        self.snapshot().node_pools(prefix)
    }

    /// See [`StateSnapshot::node_pool`].
    pub fn node_pool(&self, name: &str) -> Option<Arc<NodePool>> {
        self.snapshot().node_pool(name)
    }

    /// Creates or replaces pools in one write (`CreateIndex` kept from a stored pool). A
    /// built-in pool is refused, as Nomad's store refuses it. Returns the index of the write.
    pub async fn upsert_node_pools(&self, pools: Vec<NodePool>) -> Result<u64, StateError> {
        for pool in &pools {
            if is_built_in_node_pool(&pool.name) {
                return Err(StateError::Invalid {
                    field: "NodePool.Name",
                    reason: format!("modifying node pool {:?} is not allowed", pool.name),
                });
            }
            if pool.name.is_empty() {
                return Err(StateError::Invalid {
                    field: "NodePool.Name",
                    reason: "must be non-empty".to_owned(),
                });
            }
        }
        self.engine
            .write(move |tables, context| {
                let index = context.index();
                for mut pool in pools {
                    pool.create_index = tables
                        .node_pools
                        .get(&pool.name)
                        .map_or(index, |existing| existing.create_index);
                    pool.modify_index = index;
                    context.put(Table::NodePools, pool.name.as_bytes(), &pool)?;
                    tables.node_pools.insert(pool.name.clone(), Arc::new(pool));
                }
                Ok(index)
            })
            .await
    }

    /// Deletes pools by name in one write. A built-in or unknown pool fails the whole write
    /// with Nomad's message. Returns the index of the write.
    pub async fn delete_node_pools(&self, names: Vec<String>) -> Result<u64, StateError> {
        self.engine
            .write(move |tables, context| {
                for name in &names {
                    if is_built_in_node_pool(name) {
                        return Err(StateError::Invalid {
                            field: "NodePool.Name",
                            reason: format!("deleting node pool {name:?} is not allowed"),
                        });
                    }
                    if !tables.node_pools.contains_key(name) {
                        return Err(StateError::NotFound {
                            kind: "node pool",
                            id: name.clone(),
                        });
                    }
                }
                for name in names {
                    context.delete(Table::NodePools, name.as_bytes());
                    tables.node_pools.remove(&name);
                }
                Ok(context.index())
            })
            .await
    }
}

#[cfg(test)]
#[allow(clippy::expect_used, clippy::unwrap_used)]
mod tests {
    use super::*;

    fn pool(name: &str) -> NodePool {
        NodePool {
            name: name.to_string(),
            description: format!("{name} nodes"),
            ..NodePool::default()
        }
    }

    #[tokio::test]
    async fn pools_are_listed_with_the_built_in_ones_and_survive_a_reload() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = StateStore::open(dir.path()).await.unwrap();
            store.upsert_node_pools(vec![pool("gpu")]).await.unwrap();
            let names: Vec<String> = store
                .node_pools("")
                .iter()
                .map(|pool| pool.name.clone())
                .collect();
            assert_eq!(names, ["all", "default", "gpu"]);
            store.close().await;
        }
        let store = StateStore::open(dir.path()).await.unwrap();
        let gpu = store.node_pool("gpu").expect("persisted");
        assert_eq!(gpu.description, "gpu nodes");
        assert!(gpu.create_index > 0 && gpu.create_index == gpu.modify_index);
        assert_eq!(store.node_pools("g").len(), 1);
    }

    #[tokio::test]
    async fn built_in_pools_can_be_neither_changed_nor_deleted() {
        let store = StateStore::in_memory().await.unwrap();
        let error = store
            .upsert_node_pools(vec![pool("all")])
            .await
            .unwrap_err();
        assert!(
            error
                .to_string()
                .contains("modifying node pool \"all\" is not allowed")
        );
        let error = store
            .delete_node_pools(vec!["default".into()])
            .await
            .unwrap_err();
        assert!(
            error
                .to_string()
                .contains("deleting node pool \"default\" is not allowed")
        );
        let error = store
            .delete_node_pools(vec!["nope".into()])
            .await
            .unwrap_err();
        assert!(matches!(error, StateError::NotFound { .. }), "{error}");
        store.upsert_node_pools(vec![pool("gpu")]).await.unwrap();
        store.delete_node_pools(vec!["gpu".into()]).await.unwrap();
        assert!(store.node_pool("gpu").is_none());
        assert_eq!(
            store.node_pool("all").unwrap().description,
            drover_structs::NODE_POOL_ALL_DESCRIPTION
        );
    }
}
