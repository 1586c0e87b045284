//! The namespaces table: namespaces by name, persisted in [`Table::Namespaces`].
//!
//! **Invariant**: `default` always exists. Until someone writes it, it is Nomad's built-in
//! one (`CreateIndex` 1, "Default shared namespace"), answered without being stored; it can
//! be updated but never deleted. A delete is refused, and nothing deleted, while a namespace
//! holds a job that is not dead, an allocation that is not terminal, or a variable (Nomad's
//! checks).
//!
//! Not here: validation of a namespace's fields and who may write one (the agent's namespace
//! endpoints), the refusal of a job in an unknown namespace (the server's register).

use std::sync::Arc;

use drover_structs::namespace::Namespace;
use drover_structs::{DEFAULT_NAMESPACE, JOB_STATUS_DEAD};

use crate::engine::Table;
use crate::error::StateError;
use crate::store::StateStore;

/// Why a namespace cannot be deleted: what it still holds, as Nomad names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NamespaceInUse {
    /// `namespace %q has non-terminal jobs in regions: …`
    NonTerminalJobs,
    /// `namespace %q has non-terminal allocations in regions: …`
    NonTerminalAllocations,
    /// `namespace %q has variables associated with it in regions: …`
    Variables,
}

/// The outcome of [`StateStore::delete_namespaces`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NamespaceDelete {
    /// Deleted (names that did not exist are skipped, as Nomad); the index of the write.
    Deleted { index: u64 },
    /// `default` was named.
    Default,
    /// Namespaces that still hold something, with what: nothing was deleted.
    InUse(Vec<(String, NamespaceInUse)>),
}

impl StateStore {
    /// The namespace `name`, the built-in `default` when it was never written.
    pub fn namespace(&self, name: &str) -> Option<Arc<Namespace>> {
        let snapshot = self.snapshot();
        match snapshot.tables().namespaces.get(name) {
            Some(namespace) => Some(Arc::clone(namespace)),
            None if name == DEFAULT_NAMESPACE => Some(Arc::new(Namespace::builtin_default())),
            None => None,
        }
    }

    /// Whether namespace `name` exists.
    pub fn namespace_exists(&self, name: &str) -> bool {
        name == DEFAULT_NAMESPACE || self.snapshot().tables().namespaces.contains_key(name)
    }

    /// Every namespace whose name starts with `prefix`, by name.
    pub fn namespaces(&self, prefix: &str) -> Vec<Arc<Namespace>> {
        let snapshot = self.snapshot();
        let stored = &snapshot.tables().namespaces;
        let mut listed: Vec<Arc<Namespace>> = stored
            .range(prefix.to_owned()..)
            .take_while(|(name, _)| name.starts_with(prefix))
            .map(|(_, namespace)| Arc::clone(namespace))
            .collect();
        if !stored.contains_key(DEFAULT_NAMESPACE) && DEFAULT_NAMESPACE.starts_with(prefix) {
            listed.push(Arc::new(Namespace::builtin_default()));
            listed.sort_by(|a, b| a.name.cmp(&b.name));
        }
        listed
    }

    /// Creates or replaces namespaces (a replaced one keeps its `CreateIndex`; the built-in
    /// `default` keeps 1); returns the index of the write.
    pub async fn upsert_namespaces(&self, namespaces: Vec<Namespace>) -> Result<u64, StateError> {
        self.engine
            .write(move |tables, context| {
                let index = context.index();
                let stored = &mut tables.namespaces;
                for mut namespace in namespaces {
                    namespace.create_index = match stored.get(&namespace.name) {
                        Some(existing) => existing.create_index,
                        None if namespace.name == DEFAULT_NAMESPACE => 1,
                        None => index,
                    };
                    namespace.modify_index = index;
                    namespace.set_hash();
                    context.put(Table::Namespaces, namespace.name.as_bytes(), &namespace)?;
                    stored.insert(namespace.name.clone(), Arc::new(namespace));
                }
                Ok(index)
            })
            .await
    }

    /// Deletes namespaces by name, unless one is `default` or still holds something.
    pub async fn delete_namespaces(
        &self,
        names: Vec<String>,
    ) -> Result<NamespaceDelete, StateError> {
        self.engine
            .write(move |tables, context| {
                if names.iter().any(|name| name == DEFAULT_NAMESPACE) {
                    return Ok(NamespaceDelete::Default);
                }
                let mut in_use = Vec::new();
                for name in names
                    .iter()
                    .filter(|name| tables.namespaces.contains_key(*name))
                {
                    let live_job = tables
                        .jobs
                        .values()
                        .any(|job| job.namespace == *name && job.status != JOB_STATUS_DEAD);
                    let live_alloc = tables
                        .allocs
                        .values()
                        .any(|alloc| alloc.namespace == *name && !alloc.terminal_status());
                    let variable = tables
                        .variables
                        .range((name.clone(), String::new())..)
                        .next()
                        .is_some_and(|((namespace, _), _)| namespace == name);
                    for (held, kind) in [
                        (live_job, NamespaceInUse::NonTerminalJobs),
                        (live_alloc, NamespaceInUse::NonTerminalAllocations),
                        (variable, NamespaceInUse::Variables),
                    ] {
                        if held {
                            in_use.push((name.clone(), kind));
                        }
                    }
                }
                if !in_use.is_empty() {
                    return Ok(NamespaceDelete::InUse(in_use));
                }
                let index = context.index();
                let stored = &mut tables.namespaces;
                for name in names {
                    if stored.remove(&name).is_some() {
                        context.delete(Table::Namespaces, name.as_bytes());
                    }
                }
                Ok(NamespaceDelete::Deleted { index })
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(name: &str) -> Namespace {
        Namespace {
            name: name.to_owned(),
            description: format!("{name} team"),
            ..Namespace::default()
        }
    }

    #[tokio::test]
    async fn default_is_built_in_and_namespaces_persist() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::open(dir.path()).await.unwrap();
        let default = store.namespace("default").unwrap();
        assert_eq!(default.description, "Default shared namespace");
        assert_eq!((default.create_index, default.modify_index), (1, 1));
        assert!(store.namespace("prod").is_none());

        let index = store
            .upsert_namespaces(vec![named("prod"), named("dev")])
            .await
            .unwrap();
        let names: Vec<String> = store
            .namespaces("")
            .iter()
            .map(|namespace| namespace.name.clone())
            .collect();
        assert_eq!(names, ["default", "dev", "prod"]);
        assert_eq!(store.namespaces("d").len(), 2);
        let updated = store.upsert_namespaces(vec![named("prod")]).await.unwrap();
        let prod = store.namespace("prod").unwrap();
        assert_eq!((prod.create_index, prod.modify_index), (index, updated));
        assert!(!prod.hash.is_empty());

        assert_eq!(
            store
                .delete_namespaces(vec!["default".to_owned()])
                .await
                .unwrap(),
            NamespaceDelete::Default
        );
        store.close().await;

        let store = StateStore::open(dir.path()).await.unwrap();
        assert!(store.namespace_exists("prod"));
        assert!(matches!(
            store
                .delete_namespaces(vec!["prod".to_owned(), "nope".to_owned()])
                .await
                .unwrap(),
            NamespaceDelete::Deleted { .. }
        ));
        assert!(!store.namespace_exists("prod"));
        assert!(store.namespace_exists("dev"));
    }
}
