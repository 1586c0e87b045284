//! The ACL table: policies by name, roles by ID (with a name index), tokens by accessor ID
//! (with a secret ID index), and the index of the one bootstrap, all in one persisted table ([`Table::Acl`]) as [`AclRecord`]s.
//! Policies, tokens and roles each keep their own index besides ([`Table::AclPolicies`],
//! [`Table::AclTokens`], [`Table::AclRoles`]), as Nomad's tables do: a token's write does not
//! move the policies list's index.
//!
//! **Invariant**: the bootstrap happens once; a second one is refused unless the caller
//! names the current bootstrap index as its reset index (Nomad's `acl-bootstrap-reset`).
//!
//! Not here: what rules mean, who may call what (the server's `acl` module and the API).

use std::sync::Arc;

use drover_structs::acl::{AclPolicy, AclRole, AclToken, OneTimeToken};

use crate::acl_tables::{AclRecord, AclTables};
use crate::engine::{Table, WriteContext};
use crate::error::StateError;
use crate::store::StateStore;

const BOOTSTRAP_KEY: &[u8] = b"bootstrap";

fn policy_key(name: &str) -> Vec<u8> {
    format!("policy/{name}").into_bytes()
}

fn role_key(id: &str) -> Vec<u8> {
    format!("role/{id}").into_bytes()
}

fn token_key(accessor_id: &str) -> Vec<u8> {
    format!("token/{accessor_id}").into_bytes()
}

fn one_time_token_key(accessor_id: &str) -> Vec<u8> {
    format!("onetime/{accessor_id}").into_bytes()
}

/// Why a bootstrap was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AclBootstrapError {
    #[error("ACL bootstrap already done (reset index: {reset_index})")]
    AlreadyDone { reset_index: u64 },
    #[error(transparent)]
    State(#[from] StateErrorText),
}

/// A state error as text (state errors are not `Clone`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct StateErrorText(pub String);

fn put_token(
    acl: &mut AclTables,
    context: &mut WriteContext,
    mut token: AclToken,
    index: u64,
) -> Result<Arc<AclToken>, StateError> {
    token.create_index = match acl.tokens.get(&token.accessor_id) {
        Some(existing) => existing.create_index,
        None => index,
    };
    token.modify_index = index;
    context.touch(Table::AclTokens);
    context.put(
        Table::Acl,
        &token_key(&token.accessor_id),
        &AclRecord::Token(token.clone()),
    )?;
    let stored = Arc::new(token);
    acl.insert_token(Arc::clone(&stored));
    Ok(stored)
}

impl StateStore {
    /// Writes policies (create or replace, keeping a replaced policy's `CreateIndex`).
    pub async fn upsert_acl_policies(&self, policies: Vec<AclPolicy>) -> Result<u64, StateError> {
        self.engine
            .write(move |tables, context| {
                let index = context.index();
                let acl = Arc::make_mut(&mut tables.acl);
                for mut policy in policies {
                    policy.create_index = acl
                        .policies
                        .get(&policy.name)
                        .map_or(index, |existing| existing.create_index);
                    policy.modify_index = index;
                    context.touch(Table::AclPolicies);
                    context.put(
                        Table::Acl,
                        &policy_key(&policy.name),
                        &AclRecord::Policy(policy.clone()),
                    )?;
                    acl.policies.insert(policy.name.clone(), Arc::new(policy));
                }
                Ok(index)
            })
            .await
    }

    /// Deletes policies by name; an unknown name is `NotFound` and nothing is deleted.
    pub async fn delete_acl_policies(&self, names: Vec<String>) -> Result<u64, StateError> {
        self.engine
            .write(move |tables, context| {
                if let Some(missing) = names
                    .iter()
                    .find(|name| !tables.acl.policies.contains_key(*name))
                {
                    return Err(StateError::NotFound {
                        kind: "ACL policy",
                        id: missing.clone(),
                    });
                }
                let index = context.index();
                let acl = Arc::make_mut(&mut tables.acl);
                for name in names {
                    context.touch(Table::AclPolicies);
                    context.delete(Table::Acl, &policy_key(&name));
                    acl.policies.remove(&name);
                }
                Ok(index)
            })
            .await
    }

    /// Writes one role (create, or replace by ID keeping its `CreateIndex`); returns it as
    /// stored. Checked again inside the write, as Nomad's state store does: every linked
    /// policy exists, and no other role has the name (both `Refused` with Nomad's text). A
    /// role equal to the stored one (same hash) is not written again.
    pub async fn upsert_acl_role(&self, role: AclRole) -> Result<Arc<AclRole>, StateError> {
        self.engine
            .write(move |tables, context| {
                if role
                    .policies
                    .iter()
                    .any(|link| !tables.acl.policies.contains_key(&link.name))
                {
                    return Err(StateError::Refused("ACL policy not found".to_owned()));
                }
                if let Some(named) = tables.acl.role_by_name(&role.name)
                    && named.id != role.id
                {
                    return Err(StateError::Refused(format!(
                        "ACL role with name {} already exists",
                        role.name
                    )));
                }
                let mut role = role;
                match tables.acl.roles.get(&role.id) {
                    Some(existing) if existing.hash == role.hash => {
                        return Ok(Arc::clone(existing));
                    }
                    Some(existing) => role.create_index = existing.create_index,
                    None => role.create_index = context.index(),
                }
                role.modify_index = context.index();
                context.touch(Table::AclRoles);
                context.put(
                    Table::Acl,
                    &role_key(&role.id),
                    &AclRecord::Role(role.clone()),
                )?;
                let stored = Arc::new(role);
                Arc::make_mut(&mut tables.acl).insert_role(Arc::clone(&stored));
                Ok(stored)
            })
            .await
    }

    /// Deletes roles by ID; an unknown one is `Refused` ("ACL role not found", Nomad's text)
    /// and nothing is deleted. Tokens keep their links; a link to a deleted role grants
    /// nothing and is left out when a token is read.
    pub async fn delete_acl_roles(&self, ids: Vec<String>) -> Result<u64, StateError> {
        self.engine
            .write(move |tables, context| {
                if ids.iter().any(|id| !tables.acl.roles.contains_key(id)) {
                    return Err(StateError::Refused("ACL role not found".to_owned()));
                }
                let index = context.index();
                let acl = Arc::make_mut(&mut tables.acl);
                for id in ids {
                    context.touch(Table::AclRoles);
                    context.delete(Table::Acl, &role_key(&id));
                    acl.remove_role(&id);
                }
                Ok(index)
            })
            .await
    }

    /// Writes one token (create or replace by accessor ID); returns it as stored.
    pub async fn upsert_acl_token(&self, token: AclToken) -> Result<Arc<AclToken>, StateError> {
        self.engine
            .write(move |tables, context| {
                let index = context.index();
                let acl = Arc::make_mut(&mut tables.acl);
                put_token(acl, context, token, index)
            })
            .await
    }

    /// Deletes tokens by accessor ID; an unknown one is `NotFound` and nothing is deleted.
    pub async fn delete_acl_tokens(&self, accessor_ids: Vec<String>) -> Result<u64, StateError> {
        self.engine
            .write(move |tables, context| {
                if let Some(missing) = accessor_ids
                    .iter()
                    .find(|id| !tables.acl.tokens.contains_key(*id))
                {
                    return Err(StateError::NotFound {
                        kind: "ACL token",
                        id: missing.clone(),
                    });
                }
                let index = context.index();
                let acl = Arc::make_mut(&mut tables.acl);
                for accessor_id in accessor_ids {
                    context.touch(Table::AclTokens);
                    context.delete(Table::Acl, &token_key(&accessor_id));
                    acl.remove_token(&accessor_id);
                }
                Ok(index)
            })
            .await
    }

    /// Removes the tokens of these accessors that are still stored (garbage collection of
    /// expired tokens: one deleted since the collector looked is no error). Answers how many
    /// went.
    pub async fn delete_acl_tokens_still_stored(
        &self,
        accessor_ids: Vec<String>,
    ) -> Result<usize, StateError> {
        self.engine
            .write(move |tables, context| {
                let present: Vec<String> = accessor_ids
                    .into_iter()
                    .filter(|id| tables.acl.tokens.contains_key(id))
                    .collect();
                if present.is_empty() {
                    return Ok(0);
                }
                let acl = Arc::make_mut(&mut tables.acl);
                for accessor_id in &present {
                    context.touch(Table::AclTokens);
                    context.delete(Table::Acl, &token_key(accessor_id));
                    acl.remove_token(accessor_id);
                }
                Ok(present.len())
            })
            .await
    }

    /// The bootstrap: stores the management `token` unless a bootstrap was done, in which
    /// case only `reset_index` equal to the bootstrap's index lets it happen again.
    pub async fn bootstrap_acl_token(
        &self,
        token: AclToken,
        reset_index: Option<u64>,
    ) -> Result<Result<Arc<AclToken>, AclBootstrapError>, StateError> {
        self.engine
            .write(move |tables, context| {
                let done = tables.acl.bootstrap_index;
                if done > 0 && reset_index != Some(done) {
                    return Ok(Err(AclBootstrapError::AlreadyDone { reset_index: done }));
                }
                let index = context.index();
                let acl = Arc::make_mut(&mut tables.acl);
                let stored = put_token(acl, context, token, index)?;
                context.put(Table::Acl, BOOTSTRAP_KEY, &AclRecord::Bootstrap { index })?;
                acl.bootstrap_index = index;
                Ok(Ok(stored))
            })
            .await
    }

    /// Stores a one-time token (Nomad's `UpsertOneTimeToken`): it replaces any other of the
    /// same accessor, and takes this write's index as its create and modify index.
    pub async fn upsert_one_time_token(
        &self,
        mut token: OneTimeToken,
    ) -> Result<Arc<OneTimeToken>, StateError> {
        self.engine
            .write(move |tables, context| {
                let index = context.index();
                token.create_index = index;
                token.modify_index = index;
                context.put(
                    Table::Acl,
                    &one_time_token_key(&token.accessor_id),
                    &AclRecord::OneTimeToken(token.clone()),
                )?;
                let stored = Arc::new(token);
                Arc::make_mut(&mut tables.acl).insert_one_time_token(Arc::clone(&stored));
                Ok(stored)
            })
            .await
    }

    /// Removes the one-time tokens of these accessors (Nomad's `DeleteOneTimeTokens`, what
    /// an exchange does). Answers the write's index, or the latest when none was there.
    pub async fn delete_one_time_tokens(
        &self,
        accessor_ids: Vec<String>,
    ) -> Result<u64, StateError> {
        self.engine
            .write(move |tables, context| {
                let present: Vec<String> = accessor_ids
                    .into_iter()
                    .filter(|id| tables.acl.one_time_tokens.contains_key(id))
                    .collect();
                if present.is_empty() {
                    return Ok(context.latest_committed_index());
                }
                let acl = Arc::make_mut(&mut tables.acl);
                for accessor_id in present {
                    context.delete(Table::Acl, &one_time_token_key(&accessor_id));
                    acl.remove_one_time_token(&accessor_id);
                }
                Ok(context.index())
            })
            .await
    }

    /// Removes the one-time tokens with these secrets, those still stored (Nomad's
    /// `ExpireOneTimeTokens` deletes by secret, so a token asked for since is kept). Answers
    /// how many went.
    pub async fn delete_one_time_tokens_by_secret(
        &self,
        secrets: Vec<String>,
    ) -> Result<usize, StateError> {
        self.engine
            .write(move |tables, context| {
                let accessors: Vec<String> = secrets
                    .iter()
                    .filter_map(|secret| tables.acl.one_time_tokens_by_secret.get(secret))
                    .cloned()
                    .collect();
                if accessors.is_empty() {
                    return Ok(0);
                }
                let acl = Arc::make_mut(&mut tables.acl);
                for accessor_id in &accessors {
                    context.delete(Table::Acl, &one_time_token_key(accessor_id));
                    acl.remove_one_time_token(accessor_id);
                }
                Ok(accessors.len())
            })
            .await
    }

    /// The ACL tables as of now.
    pub fn acl(&self) -> Arc<AclTables> {
        Arc::clone(&self.engine.snapshot().data.acl)
    }

    /// The token whose secret is `secret_id`.
    pub fn acl_token_by_secret(&self, secret_id: &str) -> Option<Arc<AclToken>> {
        let acl = self.acl();
        let accessor = acl.tokens_by_secret.get(secret_id)?;
        acl.tokens.get(accessor).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(accessor: &str, secret: &str) -> AclToken {
        AclToken {
            accessor_id: accessor.to_owned(),
            secret_id: secret.to_owned(),
            token_type: "management".to_owned(),
            ..AclToken::default()
        }
    }

    #[tokio::test]
    async fn acl_policies_tokens_and_roles_each_keep_their_own_index_across_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::open(dir.path()).await.unwrap();
        let indexes = store.indexes();
        assert_eq!(indexes.table(Table::AclPolicies), 0);
        assert_eq!(indexes.table(Table::AclTokens), 0);
        let bootstrap = store
            .bootstrap_acl_token(token("a1", "s1"), None)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            store.indexes().table(Table::AclTokens),
            bootstrap.modify_index
        );
        assert_eq!(store.indexes().table(Table::AclPolicies), 0);
        let policy_index = store
            .upsert_acl_policies(vec![AclPolicy {
                name: "readonly".to_owned(),
                ..AclPolicy::default()
            }])
            .await
            .unwrap();
        store.upsert_acl_token(token("a2", "s2")).await.unwrap();
        let indexes = store.indexes();
        assert_eq!(indexes.table(Table::AclPolicies), policy_index);
        assert!(indexes.table(Table::AclTokens) > policy_index);
        assert_eq!(indexes.table(Table::AclRoles), 0);
        assert_eq!(indexes.table(Table::Acl), indexes.table(Table::AclTokens));
        store.close().await;

        let store = StateStore::open(dir.path()).await.unwrap();
        assert_eq!(store.indexes().table(Table::AclPolicies), policy_index);
        let deleted = store
            .delete_acl_policies(vec!["readonly".to_owned()])
            .await
            .unwrap();
        assert_eq!(store.indexes().table(Table::AclPolicies), deleted);
        store.close().await;
    }

    #[tokio::test]
    async fn bootstrap_happens_once_unless_reset_and_survives_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::open(dir.path()).await.unwrap();
        let first = store
            .bootstrap_acl_token(token("a1", "s1"), None)
            .await
            .unwrap()
            .unwrap();
        let done = store.acl().bootstrap_index;
        assert_eq!(first.create_index, done);
        assert_eq!(
            store
                .bootstrap_acl_token(token("a2", "s2"), None)
                .await
                .unwrap(),
            Err(AclBootstrapError::AlreadyDone { reset_index: done })
        );
        assert!(
            store
                .bootstrap_acl_token(token("a2", "s2"), Some(done + 7))
                .await
                .unwrap()
                .is_err()
        );
        store
            .bootstrap_acl_token(token("a2", "s2"), Some(done))
            .await
            .unwrap()
            .unwrap();
        store.close().await;

        let store = StateStore::open(dir.path()).await.unwrap();
        assert_eq!(store.acl_token_by_secret("s2").unwrap().accessor_id, "a2");
        assert!(store.acl().bootstrap_index > done);
        store
            .upsert_acl_policies(vec![AclPolicy {
                name: "readonly".to_owned(),
                ..AclPolicy::default()
            }])
            .await
            .unwrap();
        assert!(
            store
                .delete_acl_policies(vec!["nope".to_owned()])
                .await
                .is_err()
        );
        store
            .delete_acl_tokens(vec!["a1".to_owned()])
            .await
            .unwrap();
        assert!(store.acl_token_by_secret("s1").is_none());
        assert_eq!(store.acl().policies.len(), 1);
    }

    #[tokio::test]
    async fn collected_tokens_go_for_good_and_one_already_gone_is_no_error() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::open(dir.path()).await.unwrap();
        for (accessor, secret) in [("a1", "s1"), ("a2", "s2")] {
            store
                .upsert_acl_token(token(accessor, secret))
                .await
                .unwrap();
        }
        let went = store
            .delete_acl_tokens_still_stored(vec!["a1".to_owned(), "gone".to_owned()])
            .await
            .unwrap();
        assert_eq!(went, 1);
        assert_eq!(
            store
                .delete_acl_tokens_still_stored(vec!["gone".to_owned()])
                .await
                .unwrap(),
            0
        );
        store.close().await;

        let store = StateStore::open(dir.path()).await.unwrap();
        assert!(store.acl_token_by_secret("s1").is_none());
        assert!(!store.acl().tokens.contains_key("a1"));
        assert_eq!(store.acl_token_by_secret("s2").unwrap().accessor_id, "a2");
    }

    #[tokio::test]
    async fn roles_keep_their_name_unique_need_their_policies_and_survive_a_restart() {
        use drover_structs::acl::AclRolePolicyLink;
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::open(dir.path()).await.unwrap();
        let role = |id: &str, name: &str, policy: &str| AclRole {
            id: id.to_owned(),
            name: name.to_owned(),
            policies: vec![AclRolePolicyLink {
                name: policy.to_owned(),
            }],
            hash: format!("{name}/{policy}"),
            ..AclRole::default()
        };
        let refused = store.upsert_acl_role(role("r1", "ops", "readonly")).await;
        assert_eq!(refused.unwrap_err().to_string(), "ACL policy not found");
        store
            .upsert_acl_policies(vec![AclPolicy {
                name: "readonly".to_owned(),
                ..AclPolicy::default()
            }])
            .await
            .unwrap();
        let first = store
            .upsert_acl_role(role("r1", "ops", "readonly"))
            .await
            .unwrap();
        let same = store
            .upsert_acl_role(role("r1", "ops", "readonly"))
            .await
            .unwrap();
        assert_eq!(same.modify_index, first.modify_index);
        let taken = store.upsert_acl_role(role("r2", "ops", "readonly")).await;
        assert_eq!(
            taken.unwrap_err().to_string(),
            "ACL role with name ops already exists"
        );
        let renamed = store
            .upsert_acl_role(role("r1", "operators", "readonly"))
            .await
            .unwrap();
        assert_eq!(renamed.create_index, first.create_index);
        assert!(renamed.modify_index > first.modify_index);
        store.close().await;

        let store = StateStore::open(dir.path()).await.unwrap();
        let acl = store.acl();
        assert!(acl.role_by_name("ops").is_none());
        assert_eq!(acl.role_by_name("operators").unwrap().id, "r1");
        assert_eq!(
            store
                .delete_acl_roles(vec!["r1".to_owned(), "r9".to_owned()])
                .await
                .unwrap_err()
                .to_string(),
            "ACL role not found"
        );
        store.delete_acl_roles(vec!["r1".to_owned()]).await.unwrap();
        assert!(store.acl().roles.is_empty());
        assert!(store.acl().roles_by_name.is_empty());
    }
}
