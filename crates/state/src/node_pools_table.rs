//! The node pools table's load and the in-write helper a node's registration calls: the part of
//! `crate::node_pools` the store itself uses, kept apart so the store does not import the
//! module that extends it.

use std::sync::Arc;

use drover_structs::{NodePool, is_built_in_node_pool};

use crate::engine::{Table, WriteContext, load_table};
use crate::error::StateError;
use crate::kv::Kv;
use crate::tables::StateTables;

/// Loads the persisted pools into `tables`.
pub(crate) async fn load_node_pools(
    kv: &dyn Kv,
    tables: &mut StateTables,
) -> Result<(), StateError> {
    for (_, pool) in load_table::<NodePool>(kv, Table::NodePools).await? {
        tables.node_pools.insert(pool.name.clone(), Arc::new(pool));
    }
    Ok(())
}

/// Inside a node's write: creates the node's pool when it does not exist yet.
pub(crate) fn ensure_node_pool(
    tables: &mut StateTables,
    context: &mut WriteContext,
    name: &str,
) -> Result<(), StateError> {
    if name.is_empty() || is_built_in_node_pool(name) || tables.node_pools.contains_key(name) {
        return Ok(());
    }
    let index = context.index();
    let pool = NodePool {
        name: name.to_string(),
        create_index: index,
        modify_index: index,
        ..NodePool::default()
    };
    context.put(Table::NodePools, pool.name.as_bytes(), &pool)?;
    tables.node_pools.insert(pool.name.clone(), Arc::new(pool));
    Ok(())
}
