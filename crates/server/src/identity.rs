//! Workload identities: the claims of a task's JWT as Nomad builds them, signing them with the
//! keyring, and resolving a presented token back to the workload it names.
//!
//! A token is valid while its signature verifies with a key still in the keyring, its `nbf`
//! and `exp` hold, and the allocation it names still exists and is not terminal: a stopped
//! allocation's token is dead at once, whatever its `exp`.
//!
//! This is also the one place a request's credential becomes an identity
//! ([`resolve_token`]): nothing, an ACL token (by its secret ID; an expired one is refused),
//! or a workload identity.
//!
//! [`sign_for_node`] is Nomad's `Alloc.SignIdentities`: a node, authenticated by its secret
//! ID, asks for the identities of tasks of allocations placed on it; each is signed as the
//! task's `identity` block asks (audience, TTL), or rejected with a reason.
//!
//! Not here: the `identity` block's delivery to the task (the client's identity hook).

use drover_state::StateStore;
use drover_structs::Allocation;
use drover_structs::client_rpc::{
    SignIdentitiesResponse, SignedWorkloadIdentity, WorkloadIdentityRejection,
    WorkloadIdentityRequest,
};

use crate::keyring::{Keyring, KeyringError};

/// The audience of the default identity, as Nomad.
pub const DEFAULT_AUDIENCE: &str = "nomadproject.io";
/// The name of the identity every task has.
pub const DEFAULT_IDENTITY_NAME: &str = "default";

/// Errors resolving a presented credential.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error(transparent)]
    Keyring(#[from] KeyringError),
    #[error("allocation does not exist")]
    AllocationGone,
    #[error("allocation is terminal")]
    AllocationTerminal,
    #[error("token is not a workload identity: {0}")]
    NotWorkloadIdentity(&'static str),
    #[error("task {task} is not in allocation {alloc_id}")]
    UnknownTask { alloc_id: String, task: String },
    /// Nomad's `ErrTokenNotFound`.
    #[error("ACL token not found")]
    AclTokenNotFound,
    /// Nomad's `ErrTokenExpired`.
    #[error("ACL token expired")]
    AclTokenExpired,
    #[error("task {task} has no identity named {name:?}")]
    UnknownIdentity { task: String, name: String },
    #[error("node secret ID does not match node {0}")]
    NodeNotAuthenticated(String),
    #[error("allocation {alloc_id} is not placed on node {node_id}")]
    NotThisNode { alloc_id: String, node_id: String },
}

/// What one identity of one task asks for (the task's `identity` block, or the default).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdentitySpec {
    pub name: String,
    pub audience: Vec<String>,
    /// 0: no expiry.
    pub ttl_ns: i64,
}

impl Default for IdentitySpec {
    fn default() -> Self {
        Self {
            name: DEFAULT_IDENTITY_NAME.to_owned(),
            audience: vec![DEFAULT_AUDIENCE.to_owned()],
            ttl_ns: 0,
        }
    }
}

impl IdentitySpec {
    /// The spec of `task`'s identity `name` ("default": its `identity` block without a name,
    /// or Nomad's default identity when it has none); `None` when the task has no such
    /// named identity.
    pub fn of_task(task: &drover_structs::Task, name: &str) -> Option<IdentitySpec> {
        let from_block = |block: &drover_structs::WorkloadIdentity, name: &str| IdentitySpec {
            name: name.to_owned(),
            audience: if block.audience.is_empty() && name == DEFAULT_IDENTITY_NAME {
                vec![DEFAULT_AUDIENCE.to_owned()]
            } else {
                block.audience.clone()
            },
            ttl_ns: block.ttl.as_nanos().max(0),
        };
        if name == DEFAULT_IDENTITY_NAME {
            return Some(match &task.identity {
                Some(block) => from_block(block, name),
                None => IdentitySpec::default(),
            });
        }
        task.identities
            .iter()
            .find(|block| block.name == name)
            .map(|block| from_block(block, name))
    }
}

/// The workload a valid token names.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkloadIdentity {
    pub namespace: String,
    pub job_id: String,
    pub alloc_id: String,
    pub group: String,
    pub task: String,
    pub key_id: String,
    pub claims: serde_json::Value,
}

impl WorkloadIdentity {
    /// The workload a server has verified these claims for (`ACL.WhoAmI`'s answer, read by
    /// a client agent): the group comes from `sub` (`<region>:<ns>:<job>:<group>:<task>:<name>`).
    pub fn from_verified_claims(claims: serde_json::Value) -> Result<Self, IdentityError> {
        let claim = |name: &'static str| -> Result<String, IdentityError> {
            claims
                .get(name)
                .and_then(|value| value.as_str())
                .map(str::to_owned)
                .ok_or(IdentityError::NotWorkloadIdentity(name))
        };
        let group = claim("sub")
            .ok()
            .and_then(|sub| sub.split(':').nth(3).map(str::to_owned))
            .unwrap_or_default();
        Ok(WorkloadIdentity {
            namespace: claim("nomad_namespace")?,
            job_id: claim("nomad_job_id")?,
            alloc_id: claim("nomad_allocation_id")?,
            task: claim("nomad_task").unwrap_or_default(),
            group,
            key_id: String::new(),
            claims,
        })
    }
}

/// Who made a request.
#[derive(Debug, Clone, PartialEq)]
pub enum RequestIdentity {
    /// No credential presented.
    Anonymous,
    /// A task's workload identity.
    Workload(Box<WorkloadIdentity>),
    /// An ACL token, by its secret ID.
    AclToken(std::sync::Arc<drover_structs::acl::AclToken>),
}

/// The job ID an identity names: a dispatched or periodic child names its parent, as Nomad.
fn identity_job_id(alloc: &Allocation) -> String {
    match alloc.job.as_deref() {
        Some(job) if !job.parent_id.is_empty() => job.parent_id.clone(),
        _ => alloc.job_id.clone(),
    }
}

/// The claims of `task`'s identity `spec` in `alloc`, issued at `now_unix_ns`.
pub fn workload_claims(
    alloc: &Allocation,
    task: &str,
    spec: &IdentitySpec,
    now_unix_ns: i64,
) -> serde_json::Value {
    let now = now_unix_ns / 1_000_000_000;
    let job_id = identity_job_id(alloc);
    let region = alloc
        .job
        .as_deref()
        .map(|job| job.region.as_str())
        .filter(|region| !region.is_empty())
        .unwrap_or("global");
    let mut claims = serde_json::json!({
        "nomad_namespace": alloc.namespace,
        "nomad_job_id": job_id,
        "nomad_allocation_id": alloc.id,
        "nomad_task": task,
        "sub": format!(
            "{region}:{}:{job_id}:{}:{task}:{}",
            alloc.namespace, alloc.task_group, spec.name
        ),
        "aud": spec.audience,
        "iat": now,
        "nbf": now,
        "jti": uuid::Uuid::new_v4().to_string(),
    });
    if spec.ttl_ns > 0
        && let Some(object) = claims.as_object_mut()
    {
        let ttl_seconds = (spec.ttl_ns + 999_999_999) / 1_000_000_000;
        object.insert("exp".to_owned(), serde_json::json!(now + ttl_seconds));
    }
    claims
}

/// Signs `task`'s identity in the allocation `alloc_id` as the store holds it; a task the
/// allocation's group does not have, or a terminal or unknown allocation, is refused.
pub fn sign_workload_identity(
    keyring: &Keyring,
    state: &StateStore,
    alloc_id: &str,
    task: &str,
    spec: &IdentitySpec,
    now_unix_ns: i64,
) -> Result<String, IdentityError> {
    let alloc = state.alloc(alloc_id).ok_or(IdentityError::AllocationGone)?;
    if alloc.terminal_status() {
        return Err(IdentityError::AllocationTerminal);
    }
    let has_task = alloc
        .job
        .as_deref()
        .and_then(|job| {
            job.task_groups
                .iter()
                .find(|group| group.name == alloc.task_group)
        })
        .is_some_and(|group| group.tasks.iter().any(|candidate| candidate.name == task));
    if !has_task {
        return Err(IdentityError::UnknownTask {
            alloc_id: alloc_id.to_owned(),
            task: task.to_owned(),
        });
    }
    Ok(keyring.sign(&workload_claims(&alloc, task, spec, now_unix_ns))?)
}

/// Nomad's `Alloc.SignIdentities`: signs each requested identity of a task of an allocation
/// placed on `node_id`, whose secret must be `node_secret_id`. A request the servers will not
/// sign (allocation gone, terminal or on another node, unknown task or identity) is answered
/// as a rejection; a wrong node secret refuses the whole call.
pub fn sign_for_node(
    keyring: &Keyring,
    state: &StateStore,
    node_id: &str,
    node_secret_id: &str,
    requests: Vec<WorkloadIdentityRequest>,
    now_unix_ns: i64,
) -> Result<SignIdentitiesResponse, IdentityError> {
    let authenticated = state.node(node_id).is_some_and(|node| {
        !node.secret_id.is_empty()
            && constant_time_eq(node.secret_id.as_bytes(), node_secret_id.as_bytes())
    });
    if !authenticated {
        return Err(IdentityError::NodeNotAuthenticated(node_id.to_owned()));
    }
    let mut response = SignIdentitiesResponse::default();
    for request in requests {
        match sign_one_for_node(keyring, state, node_id, &request, now_unix_ns) {
            Ok((jwt, expiration)) => response.signed_identities.push(SignedWorkloadIdentity {
                request,
                jwt,
                expiration,
            }),
            Err(IdentityError::Keyring(error)) => return Err(IdentityError::Keyring(error)),
            Err(error) => response.rejections.push(WorkloadIdentityRejection {
                request,
                reason: error.to_string(),
            }),
        }
    }
    Ok(response)
}

fn sign_one_for_node(
    keyring: &Keyring,
    state: &StateStore,
    node_id: &str,
    request: &WorkloadIdentityRequest,
    now_unix_ns: i64,
) -> Result<(String, i64), IdentityError> {
    let alloc = state
        .alloc(&request.alloc_id)
        .ok_or(IdentityError::AllocationGone)?;
    if alloc.node_id != node_id {
        return Err(IdentityError::NotThisNode {
            alloc_id: alloc.id.clone(),
            node_id: node_id.to_owned(),
        });
    }
    let task = alloc
        .job
        .as_deref()
        .and_then(|job| job.lookup_task_group(&alloc.task_group))
        .and_then(|group| {
            group
                .tasks
                .iter()
                .find(|task| task.name == request.task_name)
        })
        .ok_or_else(|| IdentityError::UnknownTask {
            alloc_id: alloc.id.clone(),
            task: request.task_name.clone(),
        })?;
    let spec = IdentitySpec::of_task(task, &request.identity_name).ok_or_else(|| {
        IdentityError::UnknownIdentity {
            task: request.task_name.clone(),
            name: request.identity_name.clone(),
        }
    })?;
    let jwt = sign_workload_identity(
        keyring,
        state,
        &request.alloc_id,
        &request.task_name,
        &spec,
        now_unix_ns,
    )?;
    let expiration = if spec.ttl_ns > 0 {
        now_unix_ns / 1_000_000_000 + (spec.ttl_ns + 999_999_999) / 1_000_000_000
    } else {
        0
    };
    Ok((jwt, expiration))
}

/// Compares two secrets in time that does not depend on where they differ.
fn constant_time_eq(left: &[u8], right: &[u8]) -> bool {
    left.len() == right.len()
        && left
            .iter()
            .zip(right)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

/// Verifies a workload identity token: signature, time, and an allocation that still runs.
pub fn verify_workload_identity(
    keyring: &Keyring,
    state: &StateStore,
    token: &str,
) -> Result<WorkloadIdentity, IdentityError> {
    let verified = keyring.verify(token)?;
    let claim = |name: &'static str| -> Result<String, IdentityError> {
        verified
            .claims
            .get(name)
            .and_then(|value| value.as_str())
            .map(str::to_owned)
            .ok_or(IdentityError::NotWorkloadIdentity(name))
    };
    let alloc_id = claim("nomad_allocation_id")?;
    let alloc = state
        .alloc(&alloc_id)
        .ok_or(IdentityError::AllocationGone)?;
    if alloc.terminal_status() {
        return Err(IdentityError::AllocationTerminal);
    }
    Ok(WorkloadIdentity {
        namespace: claim("nomad_namespace")?,
        job_id: claim("nomad_job_id")?,
        task: claim("nomad_task").unwrap_or_default(),
        group: alloc.task_group.clone(),
        alloc_id,
        key_id: verified.key_id,
        claims: verified.claims,
    })
}

/// The one resolver of a request's credential (`X-Nomad-Token`, or `Authorization: Bearer`):
/// none is anonymous; a JWT must be a valid workload identity; anything else must be the
/// secret ID of an ACL token that has not expired (by the system clock).
pub fn resolve_token(
    keyring: &Keyring,
    state: &StateStore,
    token: Option<&str>,
) -> Result<RequestIdentity, IdentityError> {
    resolve_token_at(
        keyring,
        state,
        token,
        crate::clock::Clock::now_unix_ns(&crate::clock::SystemClock),
    )
}

/// [`resolve_token`] at `now_unix_ns` (an ACL token's expiry is checked against it).
pub fn resolve_token_at(
    keyring: &Keyring,
    state: &StateStore,
    token: Option<&str>,
    now_unix_ns: i64,
) -> Result<RequestIdentity, IdentityError> {
    match token.map(str::trim).filter(|token| !token.is_empty()) {
        None => Ok(RequestIdentity::Anonymous),
        // A JWT has three dot-separated parts; an ACL secret ID is a UUID.
        Some(token) if token.matches('.').count() != 2 => {
            let acl_token = state
                .acl_token_by_secret(token)
                .ok_or(IdentityError::AclTokenNotFound)?;
            if acl_token.is_expired(now_unix_ns) {
                return Err(IdentityError::AclTokenExpired);
            }
            Ok(RequestIdentity::AclToken(acl_token))
        }
        Some(token) => Ok(RequestIdentity::Workload(Box::new(
            verify_workload_identity(keyring, state, token)?,
        ))),
    }
}

/// The credential a request carries: `X-Nomad-Token`, else `Authorization: Bearer <token>`.
pub fn request_token<'a>(
    x_nomad_token: Option<&'a str>,
    authorization: Option<&'a str>,
) -> Option<&'a str> {
    x_nomad_token.filter(|token| !token.is_empty()).or_else(|| {
        authorization.and_then(|value| {
            value
                .strip_prefix("Bearer ")
                .or_else(|| value.strip_prefix("bearer "))
                .map(str::trim)
        })
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use drover_structs::{Job, Task, TaskGroup};

    use super::*;
    use crate::clock::{Clock, SystemClock};

    fn alloc() -> Allocation {
        let job = Job {
            id: "web".to_owned(),
            namespace: "default".to_owned(),
            region: "global".to_owned(),
            task_groups: vec![TaskGroup {
                name: "frontend".to_owned(),
                tasks: vec![Task {
                    name: "server".to_owned(),
                    ..Task::default()
                }],
                ..TaskGroup::default()
            }],
            ..Job::default()
        };
        Allocation {
            id: "8a0c1c5e-0000-4000-8000-000000000001".to_owned(),
            namespace: "default".to_owned(),
            job_id: "web".to_owned(),
            task_group: "frontend".to_owned(),
            desired_status: "run".to_owned(),
            client_status: "running".to_owned(),
            job: Some(Arc::new(job)),
            ..Allocation::default()
        }
    }

    #[test]
    fn claims_are_nomads_and_exp_follows_the_ttl() {
        let spec = IdentitySpec {
            ttl_ns: 3_600_000_000_000,
            ..IdentitySpec::default()
        };
        let claims = workload_claims(&alloc(), "server", &spec, 1_700_000_000_000_000_000);
        assert_eq!(claims["nomad_namespace"], "default");
        assert_eq!(claims["nomad_job_id"], "web");
        assert_eq!(claims["nomad_allocation_id"], alloc().id);
        assert_eq!(claims["nomad_task"], "server");
        assert_eq!(claims["sub"], "global:default:web:frontend:server:default");
        assert_eq!(claims["aud"], serde_json::json!(["nomadproject.io"]));
        assert_eq!(claims["iat"], 1_700_000_000);
        assert_eq!(claims["nbf"], 1_700_000_000);
        assert_eq!(claims["exp"], 1_700_003_600);
        let no_ttl = workload_claims(&alloc(), "server", &IdentitySpec::default(), 0);
        assert!(no_ttl.get("exp").is_none());
    }

    #[tokio::test]
    async fn a_node_has_only_its_own_allocations_identities_signed_with_its_secret() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateStore::open(dir.path()).await.unwrap();
        let keyring = Keyring::open(dir.path(), state.clone(), Arc::new(SystemClock))
            .await
            .unwrap();
        let now = SystemClock.now_unix_ns();
        let node = drover_structs::Node {
            id: "node-a".to_owned(),
            secret_id: "secret-a".to_owned(),
            ..drover_structs::Node::default()
        };
        state.upsert_node(node, now).await.unwrap();
        let mut placed = alloc();
        placed.node_id = "node-a".to_owned();
        if let Some(job) = placed.job.as_mut() {
            let job = Arc::make_mut(job);
            job.task_groups[0].tasks[0].identities = vec![drover_structs::WorkloadIdentity {
                name: "extra".to_owned(),
                audience: vec!["example.com".to_owned()],
                ttl: drover_structs::DurationNs::from_secs(60),
                ..drover_structs::WorkloadIdentity::default()
            }];
        }
        let mut elsewhere = alloc();
        elsewhere.id = "8a0c1c5e-0000-4000-8000-000000000002".to_owned();
        elsewhere.node_id = "node-b".to_owned();
        state
            .upsert_allocs(vec![placed.clone(), elsewhere.clone()], now)
            .await
            .unwrap();
        let request = |alloc_id: &str, name: &str| WorkloadIdentityRequest {
            alloc_id: alloc_id.to_owned(),
            task_name: "server".to_owned(),
            identity_name: name.to_owned(),
        };

        assert!(matches!(
            sign_for_node(
                &keyring,
                &state,
                "node-a",
                "wrong",
                vec![request(&placed.id, "default")],
                now
            ),
            Err(IdentityError::NodeNotAuthenticated(_))
        ));
        let answer = sign_for_node(
            &keyring,
            &state,
            "node-a",
            "secret-a",
            vec![
                request(&placed.id, "default"),
                request(&placed.id, "extra"),
                request(&placed.id, "missing"),
                request(&elsewhere.id, "default"),
            ],
            now,
        )
        .unwrap();
        assert_eq!(answer.signed_identities.len(), 2, "{answer:?}");
        assert_eq!(answer.signed_identities[0].expiration, 0);
        let extra = &answer.signed_identities[1];
        assert_eq!(extra.expiration, now / 1_000_000_000 + 60);
        let verified = verify_workload_identity(&keyring, &state, &extra.jwt).unwrap();
        assert_eq!(verified.claims["aud"], serde_json::json!(["example.com"]));
        assert_eq!(answer.rejections.len(), 2);
        assert!(answer.rejections[0].reason.contains("no identity named"));
        assert!(
            answer.rejections[1]
                .reason
                .contains("not placed on node node-a")
        );
    }

    #[tokio::test]
    async fn a_token_dies_with_its_allocation() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateStore::open(dir.path()).await.unwrap();
        let keyring = Keyring::open(dir.path(), state.clone(), Arc::new(SystemClock))
            .await
            .unwrap();
        let now = SystemClock.now_unix_ns();
        let spec = IdentitySpec::default();
        assert!(matches!(
            sign_workload_identity(&keyring, &state, &alloc().id, "server", &spec, now),
            Err(IdentityError::AllocationGone)
        ));
        state.upsert_allocs(vec![alloc()], now).await.unwrap();
        assert!(matches!(
            sign_workload_identity(&keyring, &state, &alloc().id, "other", &spec, now),
            Err(IdentityError::UnknownTask { .. })
        ));
        let token =
            sign_workload_identity(&keyring, &state, &alloc().id, "server", &spec, now).unwrap();
        let identity = verify_workload_identity(&keyring, &state, &token).unwrap();
        assert_eq!(identity.job_id, "web");
        assert_eq!(identity.group, "frontend");
        assert_eq!(
            resolve_token(
                &keyring,
                &state,
                request_token(None, Some(&format!("Bearer {token}")))
            )
            .unwrap(),
            RequestIdentity::Workload(Box::new(identity))
        );
        assert_eq!(
            resolve_token(&keyring, &state, None).unwrap(),
            RequestIdentity::Anonymous
        );
        assert!(resolve_token(&keyring, &state, Some("not-a-jwt")).is_err());

        // ACL tokens resolve by secret ID; an expired one is refused, by the clock passed in.
        let expiring = drover_structs::acl::AclToken {
            accessor_id: "a1".to_owned(),
            secret_id: "7c4e0b3a-1d2f-4e5a-8b6c-9d0e1f2a3b4c".to_owned(),
            token_type: "client".to_owned(),
            expiration_time: Some(drover_structs::Timestamp::from_unix_nanos(
                now + 60_000_000_000,
            )),
            ..Default::default()
        };
        state.upsert_acl_token(expiring.clone()).await.unwrap();
        assert!(matches!(
            resolve_token_at(&keyring, &state, Some(&expiring.secret_id), now),
            Ok(RequestIdentity::AclToken(token)) if token.accessor_id == "a1"
        ));
        assert!(matches!(
            resolve_token_at(
                &keyring,
                &state,
                Some(&expiring.secret_id),
                now + 61_000_000_000
            ),
            Err(IdentityError::AclTokenExpired)
        ));
        assert!(matches!(
            resolve_token_at(
                &keyring,
                &state,
                Some("b0e4b3c4-0000-4000-8000-000000000000"),
                now
            ),
            Err(IdentityError::AclTokenNotFound)
        ));

        let mut stopped = alloc();
        stopped.desired_status = "stop".to_owned();
        stopped.client_status = "complete".to_owned();
        state.upsert_allocs(vec![stopped], now).await.unwrap();
        assert!(matches!(
            verify_workload_identity(&keyring, &state, &token),
            Err(IdentityError::AllocationTerminal)
        ));
    }
}
