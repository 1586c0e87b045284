//! The in-memory ACL tables ([`AclTables`]: policies, roles with their name index, tokens with
//! their secret ID index, the bootstrap index, one-time tokens with their secret index) and the records [`Table::Acl`](crate::engine::Table::Acl) persists them as
//! ([`AclRecord`]), below the store: the tables and the store's load read them.
//!
//! Not here: the writes (the store's ACL API in [`acl`](crate::acl)), what rules mean.

use std::collections::BTreeMap;
use std::sync::Arc;

use drover_structs::acl::{AclPolicy, AclRole, AclToken, OneTimeToken};
use drover_structs::acl_sso::{AclAuthMethod, AclBindingRule};
use serde::{Deserialize, Serialize};

/// The in-memory ACL tables.
#[derive(Debug, Clone, Default)]
pub struct AclTables {
    pub policies: BTreeMap<String, Arc<AclPolicy>>,
    /// Roles by ID.
    pub roles: BTreeMap<String, Arc<AclRole>>,
    /// Role name → role ID.
    pub roles_by_name: BTreeMap<String, String>,
    pub tokens: BTreeMap<String, Arc<AclToken>>,
    /// Secret ID → accessor ID.
    pub tokens_by_secret: BTreeMap<String, String>,
    /// The index of the bootstrap write; 0 before it.
    pub bootstrap_index: u64,
    /// One-time tokens by the accessor ID of the token that asked for them (one each, as
    /// Nomad's table is keyed).
    pub one_time_tokens: BTreeMap<String, Arc<OneTimeToken>>,
    /// One-time secret ID → accessor ID.
    pub one_time_tokens_by_secret: BTreeMap<String, String>,
    /// Single sign-on auth methods by name.
    pub auth_methods: BTreeMap<String, Arc<AclAuthMethod>>,
    /// Binding rules by ID.
    pub binding_rules: BTreeMap<String, Arc<AclBindingRule>>,
}

/// One persisted record of [`Table::Acl`](crate::engine::Table::Acl), with its key prefix.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum AclRecord {
    Policy(AclPolicy),
    Token(AclToken),
    Role(AclRole),
    Bootstrap { index: u64 },
    OneTimeToken(OneTimeToken),
    AuthMethod(Box<AclAuthMethod>),
    BindingRule(AclBindingRule),
}

impl AclTables {
    pub(crate) fn insert_record(&mut self, record: AclRecord) {
        match record {
            AclRecord::Policy(policy) => {
                self.policies.insert(policy.name.clone(), Arc::new(policy));
            }
            AclRecord::Token(token) => self.insert_token(Arc::new(token)),
            AclRecord::Role(role) => self.insert_role(Arc::new(role)),
            AclRecord::Bootstrap { index } => self.bootstrap_index = index,
            AclRecord::OneTimeToken(token) => self.insert_one_time_token(Arc::new(token)),
            AclRecord::AuthMethod(method) => {
                self.auth_methods
                    .insert(method.name.clone(), Arc::new(*method));
            }
            AclRecord::BindingRule(rule) => {
                self.binding_rules.insert(rule.id.clone(), Arc::new(rule));
            }
        }
    }

    pub(crate) fn insert_one_time_token(&mut self, token: Arc<OneTimeToken>) {
        if let Some(previous) = self.one_time_tokens.get(&token.accessor_id) {
            self.one_time_tokens_by_secret
                .remove(&previous.one_time_secret_id);
        }
        self.one_time_tokens_by_secret
            .insert(token.one_time_secret_id.clone(), token.accessor_id.clone());
        self.one_time_tokens
            .insert(token.accessor_id.clone(), token);
    }

    pub(crate) fn remove_one_time_token(&mut self, accessor_id: &str) -> bool {
        match self.one_time_tokens.remove(accessor_id) {
            Some(token) => {
                self.one_time_tokens_by_secret
                    .remove(&token.one_time_secret_id);
                true
            }
            None => false,
        }
    }

    /// The one-time token whose secret is `secret_id`.
    pub fn one_time_token_by_secret(&self, secret_id: &str) -> Option<&Arc<OneTimeToken>> {
        self.one_time_tokens
            .get(self.one_time_tokens_by_secret.get(secret_id)?)
    }

    pub(crate) fn insert_token(&mut self, token: Arc<AclToken>) {
        if let Some(previous) = self.tokens.get(&token.accessor_id) {
            self.tokens_by_secret.remove(&previous.secret_id);
        }
        self.tokens_by_secret
            .insert(token.secret_id.clone(), token.accessor_id.clone());
        self.tokens.insert(token.accessor_id.clone(), token);
    }

    pub(crate) fn insert_role(&mut self, role: Arc<AclRole>) {
        if let Some(previous) = self.roles.get(&role.id) {
            self.roles_by_name.remove(&previous.name);
        }
        self.roles_by_name
            .insert(role.name.clone(), role.id.clone());
        self.roles.insert(role.id.clone(), role);
    }

    pub(crate) fn remove_role(&mut self, id: &str) -> bool {
        match self.roles.remove(id) {
            Some(role) => {
                self.roles_by_name.remove(&role.name);
                true
            }
            None => false,
        }
    }

    /// The role named `name`.
    pub fn role_by_name(&self, name: &str) -> Option<&Arc<AclRole>> {
        self.roles.get(self.roles_by_name.get(name)?)
    }

    pub(crate) fn remove_token(&mut self, accessor_id: &str) -> bool {
        match self.tokens.remove(accessor_id) {
            Some(token) => {
                self.tokens_by_secret.remove(&token.secret_id);
                true
            }
            None => false,
        }
    }
}
