//! ACL policies, roles and tokens on the wire and at rest, in Nomad's shapes: [`AclPolicy`],
//! [`AclRole`] and [`AclToken`] with their list stubs, and the bootstrap request.
//!
//! Not here: what a policy's rules mean (the server's `acl` module), storage (the state store).

use crate::lenient::wire_struct;
use crate::time::{DurationNs, Timestamp};

/// A token of type `management` may do everything.
pub const ACL_TOKEN_TYPE_MANAGEMENT: &str = "management";
/// A token of type `client` may do what its policies allow.
pub const ACL_TOKEN_TYPE_CLIENT: &str = "client";
/// The policy every request without a token is held to, when it exists.
pub const ANONYMOUS_POLICY: &str = "anonymous";

wire_struct! {
    /// Nomad's `ACLPolicy`: named rules in the policy language.
    pub struct AclPolicy {
        pub name: String,
        pub description: String,
        pub rules: String,
        /// Which workloads this policy is attached to, if any (Nomad's `JobACL`): their
        /// workload identities hold it.
        #[serde(rename = "JobACL")]
        pub job_acl: Option<JobAcl>,
        /// Base64 of the BLAKE2b-256 of name, description, rules and the `JobACL`.
        pub hash: String,
        pub create_index: u64,
        pub modify_index: u64,
    }
}

wire_struct! {
    /// Nomad's `JobACL`: the workloads a policy applies to.
    pub struct JobAcl {
        pub namespace: String,
        #[serde(rename = "JobID")]
        pub job_id: String,
        pub group: String,
        pub task: String,
    }
}

wire_struct! {
    /// What `GET /v1/acl/policies` lists.
    pub struct AclPolicyListStub {
        pub name: String,
        pub description: String,
        #[serde(rename = "JobACL")]
        pub job_acl: Option<JobAcl>,
        pub hash: String,
        pub create_index: u64,
        pub modify_index: u64,
    }
}

impl AclPolicy {
    pub fn stub(&self) -> AclPolicyListStub {
        AclPolicyListStub {
            name: self.name.clone(),
            description: self.description.clone(),
            job_acl: self.job_acl.clone(),
            hash: self.hash.clone(),
            create_index: self.create_index,
            modify_index: self.modify_index,
        }
    }
}

wire_struct! {
    /// A role a token links to (Nomad's `ACLTokenRoleLink`).
    pub struct AclTokenRoleLink {
        #[serde(rename = "ID")]
        pub id: String,
        pub name: String,
    }
}

wire_struct! {
    /// Nomad's `ACLToken`.
    pub struct AclToken {
        #[serde(rename = "AccessorID")]
        pub accessor_id: String,
        #[serde(rename = "SecretID")]
        pub secret_id: String,
        pub name: String,
        #[serde(rename = "Type")]
        pub token_type: String,
        pub policies: Option<Vec<String>>,
        pub roles: Option<Vec<AclTokenRoleLink>>,
        pub global: bool,
        pub hash: String,
        pub create_time: Timestamp,
        /// When the token stops working; absent for a token that does not expire.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub expiration_time: Option<Timestamp>,
        #[serde(rename = "ExpirationTTL", skip_serializing_if = "duration_is_zero")]
        pub expiration_ttl: DurationNs,
        pub create_index: u64,
        pub modify_index: u64,
    }
}

wire_struct! {
    /// What `GET /v1/acl/tokens` lists (no secret).
    pub struct AclTokenListStub {
        #[serde(rename = "AccessorID")]
        pub accessor_id: String,
        pub name: String,
        #[serde(rename = "Type")]
        pub token_type: String,
        pub policies: Option<Vec<String>>,
        pub roles: Option<Vec<AclTokenRoleLink>>,
        pub global: bool,
        pub hash: String,
        pub create_time: Timestamp,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub expiration_time: Option<Timestamp>,
        pub create_index: u64,
        pub modify_index: u64,
    }
}

impl AclToken {
    pub fn is_management(&self) -> bool {
        self.token_type == ACL_TOKEN_TYPE_MANAGEMENT
    }

    /// Whether the token has expired at `now_unix_ns`.
    pub fn is_expired(&self, now_unix_ns: i64) -> bool {
        self.expiration_time
            .and_then(Timestamp::unix_nanos)
            .is_some_and(|expiry| expiry <= now_unix_ns)
    }

    pub fn stub(&self) -> AclTokenListStub {
        AclTokenListStub {
            accessor_id: self.accessor_id.clone(),
            name: self.name.clone(),
            token_type: self.token_type.clone(),
            policies: self.policies.clone(),
            roles: self.roles.clone(),
            global: self.global,
            hash: self.hash.clone(),
            create_time: self.create_time,
            expiration_time: self.expiration_time,
            create_index: self.create_index,
            modify_index: self.modify_index,
        }
    }
}

wire_struct! {
    /// The body of `POST /v1/acl/bootstrap` (optional).
    pub struct AclBootstrapRequest {
        pub bootstrap_secret: String,
    }
}

fn duration_is_zero(duration: &DurationNs) -> bool {
    duration.is_zero()
}

wire_struct! {
    /// A policy a role links to (Nomad's `ACLRolePolicyLink`).
    pub struct AclRolePolicyLink {
        pub name: String,
    }
}

wire_struct! {
    /// Nomad's `ACLRole`: a named set of policies tokens link to by ID or name.
    pub struct AclRole {
        #[serde(rename = "ID")]
        pub id: String,
        pub name: String,
        pub description: String,
        pub policies: Vec<AclRolePolicyLink>,
        /// Base64 of the BLAKE2b-256 of name, description and policy names.
        pub hash: String,
        pub create_index: u64,
        pub modify_index: u64,
    }
}

wire_struct! {
    /// What `GET /v1/acl/roles` lists (Nomad's `ACLRoleListStub`, today the role's fields).
    pub struct AclRoleListStub {
        #[serde(rename = "ID")]
        pub id: String,
        pub name: String,
        pub description: String,
        pub policies: Vec<AclRolePolicyLink>,
        pub hash: String,
        pub create_index: u64,
        pub modify_index: u64,
    }
}

impl AclRole {
    pub fn stub(&self) -> AclRoleListStub {
        AclRoleListStub {
            id: self.id.clone(),
            name: self.name.clone(),
            description: self.description.clone(),
            policies: self.policies.clone(),
            hash: self.hash.clone(),
            create_index: self.create_index,
            modify_index: self.modify_index,
        }
    }
}
