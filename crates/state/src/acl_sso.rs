//! The single sign-on part of the ACL table: auth methods by name and binding rules by ID,
//! persisted as [`AclRecord`]s beside policies, roles and tokens.
//!
//! Not here: validation, who may write (the agent's `acl_sso_http`), what a login does.

use std::sync::Arc;

use drover_structs::acl_sso::{AclAuthMethod, AclBindingRule};

use crate::acl_tables::AclRecord;
use crate::engine::Table;
use crate::error::StateError;
use crate::store::StateStore;

fn auth_method_key(name: &str) -> Vec<u8> {
    format!("auth-method/{name}").into_bytes()
}

fn binding_rule_key(id: &str) -> Vec<u8> {
    format!("binding-rule/{id}").into_bytes()
}

impl StateStore {
    /// Writes one auth method (create, or replace by name keeping its `CreateIndex` and
    /// `CreateTime`); returns it as stored.
    pub async fn upsert_acl_auth_method(
        &self,
        method: AclAuthMethod,
    ) -> Result<Arc<AclAuthMethod>, StateError> {
        self.engine
            .write(move |tables, context| {
                let mut method = method;
                match tables.acl.auth_methods.get(&method.name) {
                    Some(existing) => {
                        method.create_index = existing.create_index;
                        method.create_time = existing.create_time;
                    }
                    None => method.create_index = context.index(),
                }
                method.modify_index = context.index();
                context.touch(Table::AclAuthMethods);
                context.put(
                    Table::Acl,
                    &auth_method_key(&method.name),
                    &AclRecord::AuthMethod(Box::new(method.clone())),
                )?;
                let stored = Arc::new(method);
                Arc::make_mut(&mut tables.acl)
                    .auth_methods
                    .insert(stored.name.clone(), Arc::clone(&stored));
                Ok(stored)
            })
            .await
    }

    /// Deletes auth methods by name; an unknown one is `Refused` ("ACL auth method not
    /// found") and nothing is deleted.
    pub async fn delete_acl_auth_methods(&self, names: Vec<String>) -> Result<u64, StateError> {
        self.engine
            .write(move |tables, context| {
                if names
                    .iter()
                    .any(|name| !tables.acl.auth_methods.contains_key(name))
                {
                    return Err(StateError::Refused("ACL auth method not found".to_owned()));
                }
                let index = context.index();
                let acl = Arc::make_mut(&mut tables.acl);
                for name in names {
                    context.touch(Table::AclAuthMethods);
                    context.delete(Table::Acl, &auth_method_key(&name));
                    acl.auth_methods.remove(&name);
                }
                Ok(index)
            })
            .await
    }

    /// Writes one binding rule (create, or replace by ID keeping its `CreateIndex` and
    /// `CreateTime`); its auth method must exist.
    pub async fn upsert_acl_binding_rule(
        &self,
        rule: AclBindingRule,
    ) -> Result<Arc<AclBindingRule>, StateError> {
        self.engine
            .write(move |tables, context| {
                if !tables.acl.auth_methods.contains_key(&rule.auth_method) {
                    return Err(StateError::Refused(format!(
                        "ACL auth method {} not found",
                        rule.auth_method
                    )));
                }
                let mut rule = rule;
                match tables.acl.binding_rules.get(&rule.id) {
                    Some(existing) => {
                        rule.create_index = existing.create_index;
                        rule.create_time = existing.create_time;
                    }
                    None => rule.create_index = context.index(),
                }
                rule.modify_index = context.index();
                context.touch(Table::AclBindingRules);
                context.put(
                    Table::Acl,
                    &binding_rule_key(&rule.id),
                    &AclRecord::BindingRule(rule.clone()),
                )?;
                let stored = Arc::new(rule);
                Arc::make_mut(&mut tables.acl)
                    .binding_rules
                    .insert(stored.id.clone(), Arc::clone(&stored));
                Ok(stored)
            })
            .await
    }

    /// Deletes binding rules by ID; an unknown one is `Refused` ("ACL binding rule not
    /// found") and nothing is deleted.
    pub async fn delete_acl_binding_rules(&self, ids: Vec<String>) -> Result<u64, StateError> {
        self.engine
            .write(move |tables, context| {
                if ids
                    .iter()
                    .any(|id| !tables.acl.binding_rules.contains_key(id))
                {
                    return Err(StateError::Refused("ACL binding rule not found".to_owned()));
                }
                let index = context.index();
                let acl = Arc::make_mut(&mut tables.acl);
                for id in ids {
                    context.touch(Table::AclBindingRules);
                    context.delete(Table::Acl, &binding_rule_key(&id));
                    acl.binding_rules.remove(&id);
                }
                Ok(index)
            })
            .await
    }
}
