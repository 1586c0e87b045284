//! The bodies of the client↔server calls a remote client node makes over HTTP, under
//! `/v1/internal/…`. Nomad's clients make these calls over its RPC (`Node.Register`,
//! `Node.UpdateStatus`, `Node.GetClientAllocs`, `Alloc.GetAllocs`, `Node.UpdateAlloc`), so
//! there is no Nomad wire format to match: the routes keep the RPC names recognisable and the
//! bodies reuse Nomad's field names for the same requests and responses.
//!
//! | call | route | request | response |
//! |---|---|---|---|
//! | `Node.Register` | `PUT /v1/internal/node/register` | [`NodeRegisterRequest`] | [`NodeUpdateResponse`] |
//! | `Node.UpdateStatus` | `PUT /v1/internal/node/<id>/update-status` | [`NodeUpdateStatusRequest`] | [`NodeUpdateResponse`]; 404 for an unknown node |
//! | `Node.GetClientAllocs` | `GET /v1/internal/node/<id>/client-allocs?index=&wait=` | — | [`NodeClientAllocsResponse`] |
//! | `Alloc.GetAllocs` | `PUT /v1/internal/allocs/get` | [`AllocsGetRequest`] | [`AllocsGetResponse`] |
//! | `Node.UpdateAlloc` | `PUT /v1/internal/node/update-alloc` | [`AllocUpdateRequest`] | `{"Index": n}` |
//! | `Alloc.SignIdentities` | `PUT /v1/internal/node/<id>/sign-identities` | [`SignIdentitiesRequest`] | [`SignIdentitiesResponse`]; 403 for a wrong node secret |
//! | `ACL.WhoAmI` | `GET /v1/internal/acl/whoami` | the bearer in `X-Nomad-Token` | [`AclWhoAmIResponse`]; 403 for a bearer that does not resolve |
//! | `ACL.GetPolicies` + `ACL.GetRolesByID`, `ACL.GetClaimPolicies` | `GET /v1/internal/acl/bearer-policies` | the bearer in `X-Nomad-Token` | [`AclPolicySetResponse`]; 403 as above |
//!
//! A client status update travels as a partial `Allocation` holding only the fields the client
//! owns (`ID`, `ClientStatus`, `ClientDescription`, `TaskStates`, `DeploymentStatus`,
//! `NetworkStatus`); the server merges those and leaves the rest alone. Both ends use these
//! types: the server's handlers (`drover_api`) and the remote connection
//! (`drover_client::http_conn`).
//!
//! Not here: what the server does with a call (`drover_api`'s `AgentOperations`).

/// The response header a server agent answers every request with: the identity of its
/// cluster (generated at its first start, kept in its state). A client follows only servers
/// of the cluster it joined first.
pub const CLUSTER_ID_HEADER: &str = "X-Drover-Cluster-ID";

use std::collections::BTreeMap;

use crate::{Allocation, Node};
use serde::{Deserialize, Serialize};

/// `Node.Register`: the node as the client describes it, secret ID included.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct NodeRegisterRequest {
    pub node: Node,
}

/// `Node.UpdateStatus`: the status the node reports itself in (`ready`, …).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct NodeUpdateStatusRequest {
    pub status: String,
}

/// The answer to a register or a heartbeat: the TTL the node must beat within.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct NodeUpdateResponse {
    /// Nanoseconds, as Go's `time.Duration` encodes.
    #[serde(rename = "HeartbeatTTL")]
    pub heartbeat_ttl: u64,
    /// The node table's index after the call.
    pub index: u64,
}

/// `Node.GetClientAllocs`: every allocation placed on the node, by ID, with its
/// `AllocModifyIndex`; `Index` is what the next blocking query passes as `?index=`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct NodeClientAllocsResponse {
    pub allocs: BTreeMap<String, u64>,
    pub index: u64,
}

/// `Alloc.GetAllocs`: the allocations wanted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct AllocsGetRequest {
    #[serde(rename = "AllocIDs")]
    pub alloc_ids: Vec<String>,
}

/// The full allocations found (unknown IDs are left out).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct AllocsGetResponse {
    pub allocs: Vec<Allocation>,
    pub index: u64,
}

/// `Node.UpdateAlloc`: a batch of client status updates, each a partial allocation. The
/// server reads them as `Allocation`s; a client may send any type with the same keys.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct AllocUpdateRequest<A = Allocation> {
    #[serde(default = "Vec::new")]
    pub alloc: Vec<A>,
}

/// `PUT /v1/internal/services/upsert`: service registrations to add or replace.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ServiceUpsertRequest {
    #[serde(default)]
    pub services: Vec<crate::ServiceRegistration>,
}

/// `PUT /v1/internal/services/delete`: the IDs of service registrations to remove.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ServiceDeleteRequest {
    #[serde(default, rename = "IDs")]
    pub ids: Vec<String>,
}

impl<A> Default for AllocUpdateRequest<A> {
    fn default() -> Self {
        Self { alloc: Vec::new() }
    }
}

/// `Alloc.SignIdentities`: the workload identities a node asks the servers to sign for tasks
/// of allocations placed on it, authenticated by the node's secret ID.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct SignIdentitiesRequest {
    #[serde(rename = "NodeSecretID")]
    pub node_secret_id: String,
    pub identities: Vec<WorkloadIdentityRequest>,
}

/// One identity of one task (`IdentityName` "default" for the task's default identity).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct WorkloadIdentityRequest {
    #[serde(rename = "AllocID")]
    pub alloc_id: String,
    pub task_name: String,
    pub identity_name: String,
}

/// A signed identity: the JWT and its expiry (Unix seconds; 0 when it has none).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct SignedWorkloadIdentity {
    #[serde(flatten)]
    pub request: WorkloadIdentityRequest,
    #[serde(rename = "JWT")]
    pub jwt: String,
    pub expiration: i64,
}

/// An identity the servers will not sign, and why (the allocation is terminal or gone, the
/// task or the identity is unknown).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct WorkloadIdentityRejection {
    #[serde(flatten)]
    pub request: WorkloadIdentityRequest,
    pub reason: String,
}

/// The answer to [`SignIdentitiesRequest`]: each request is either signed or rejected.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct SignIdentitiesResponse {
    pub signed_identities: Vec<SignedWorkloadIdentity>,
    pub rejections: Vec<WorkloadIdentityRejection>,
}

/// Who a bearer token is (`ACL.WhoAmI`): an ACL token (its secret included, as the bearer
/// presented it) or a workload identity's verified claims; neither for no token.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct AuthenticatedIdentity {
    #[serde(rename = "ACLToken")]
    pub acl_token: Option<crate::acl::AclToken>,
    pub claims: Option<serde_json::Value>,
}

/// The answer to `ACL.WhoAmI`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct AclWhoAmIResponse {
    pub identity: AuthenticatedIdentity,
}

/// The policies a bearer holds, by name: an ACL token's own and its roles' (nothing for a
/// management token, which needs none), the `anonymous` policy for no token, or the policies
/// bound to a workload identity's job, group or task (`JobACL`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct AclPolicySetResponse {
    pub policies: BTreeMap<String, crate::acl::AclPolicy>,
}
