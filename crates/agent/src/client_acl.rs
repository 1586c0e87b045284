//! Bearer tokens on a client-only agent, which holds no keyring and no ACL state: it asks its
//! servers who a token is (`ACL.WhoAmI`) and which policies it holds, and keeps each answer
//! for a while, as Nomad's client does (`client/acl.go`). The client's `acl { token_ttl,
//! policy_ttl, role_ttl }` bound how long: a token's identity is asked again once it is older
//! than `token_ttl`, its policies once they are older than `policy_ttl` — or than `role_ttl`,
//! when the token has roles (the servers expand its roles into the policies they answer, so
//! this is how long a role's change may take to be seen here). A server that cannot be
//! reached lets an older answer stand (with a warning), so a server outage does not lock the
//! tasks out; a refusal (unknown, expired, a workload whose allocation stopped) is never kept.
//!
//! A workload identity of an allocation this node runs is also held to the node's own view:
//! once the node stops the allocation (or no longer has one it had when the token was
//! resolved), the token is refused at once, whatever the cache holds. Tokens of allocations
//! elsewhere are checked by the servers on every request forwarded to them; only this
//! agent's own endpoints rely on the cache for them, for at most `token_ttl`.
//!
//! Two layers use it: the task API's token check (`task_api`) and, with ACLs on, the
//! enforcement of the agent's own endpoints ([`enforce_on_client`]: client and agent routes;
//! everything else goes to the servers, which check it themselves).
//!
//! Not here: what a route needs (`acl_enforce::required`), what the servers answer
//! (`acl_resolve_http`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use drover_api::params::QueryParams;
use drover_client::http_conn::HttpServerConn;
use drover_client::server_conn::ServerConnError;
use drover_server::Clock;
use drover_server::acl::{Acl, policy};
use drover_server::identity::{RequestIdentity, WorkloadIdentity, request_token};
use tokio::time::Instant;

use crate::acl_enforce::{NamespaceLookup, Permission, permits, required};
use crate::backend::LocalClient;

/// How many bearers' answers are kept (Nomad's client keeps 128 tokens).
const CACHE_CAPACITY: usize = 128;

/// Leeway for a client clock behind the servers' when checking an expiry, as Nomad's client.
const EXPIRY_LEEWAY_NS: i64 = 2_000_000_000;

/// Why a bearer token is not taken.
#[derive(Debug, thiserror::Error)]
pub enum ClientAclError {
    /// The servers refused it, or the node knows its allocation stopped: the message says
    /// which, as Nomad words it.
    #[error("{0}")]
    Refused(String),
    /// No server answered and nothing was kept to stand in.
    #[error("the servers cannot be reached to check the token: {0}")]
    Unavailable(String),
}

/// One kept answer.
struct Kept<T> {
    value: T,
    fetched: Instant,
}

/// Answers by bearer token, at most [`CACHE_CAPACITY`] (the oldest goes first).
struct TtlCache<T> {
    entries: HashMap<String, Kept<T>>,
}

impl<T: Clone> TtlCache<T> {
    fn new() -> Self {
        TtlCache {
            entries: HashMap::new(),
        }
    }

    /// The kept answer and whether it is younger than `ttl`.
    fn get(&self, token: &str, ttl: Duration, now: Instant) -> Option<(T, bool)> {
        self.entries
            .get(token)
            .map(|kept| (kept.value.clone(), now.duration_since(kept.fetched) <= ttl))
    }

    fn insert(&mut self, token: &str, value: T, now: Instant) {
        if self.entries.len() >= CACHE_CAPACITY
            && !self.entries.contains_key(token)
            && let Some(oldest) = self
                .entries
                .iter()
                .min_by_key(|(_, kept)| kept.fetched)
                .map(|(token, _)| token.clone())
        {
            self.entries.remove(&oldest);
        }
        self.entries.insert(
            token.to_owned(),
            Kept {
                value,
                fetched: now,
            },
        );
    }

    fn remove(&mut self, token: &str) {
        self.entries.remove(token);
    }
}

/// A resolved bearer, as kept.
#[derive(Clone)]
struct Resolved {
    identity: RequestIdentity,
    /// For a workload identity: whether this node ran its allocation when it was resolved.
    alloc_was_here: bool,
}

/// Where the resolver asks: the servers, and this node's view of its allocations.
pub struct ClientAclResolver {
    servers: Arc<HttpServerConn>,
    client: Arc<LocalClient>,
    clock: Arc<dyn Clock>,
    lifetimes: CacheLifetimes,
    tokens: Mutex<TtlCache<Resolved>>,
    policies: Mutex<TtlCache<Arc<Acl>>>,
}

/// How long kept answers are fresh (the client's `acl { token_ttl, policy_ttl, role_ttl }`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheLifetimes {
    pub token: Duration,
    pub policy: Duration,
    pub role: Duration,
}

impl CacheLifetimes {
    /// How long the policies of `identity` are fresh: `policy`, and no longer than `role` for
    /// a token with roles.
    fn of_policies(&self, identity: &RequestIdentity) -> Duration {
        match identity {
            RequestIdentity::AclToken(token)
                if token.roles.as_ref().is_some_and(|roles| !roles.is_empty()) =>
            {
                self.policy.min(self.role)
            }
            _ => self.policy,
        }
    }
}

/// What the enforcement needs: the resolver.
#[derive(Clone)]
pub struct ClientEnforcer {
    pub resolver: Arc<ClientAclResolver>,
}

impl ClientAclResolver {
    pub fn new(
        servers: Arc<HttpServerConn>,
        client: Arc<LocalClient>,
        clock: Arc<dyn Clock>,
        lifetimes: CacheLifetimes,
    ) -> Arc<Self> {
        Arc::new(ClientAclResolver {
            servers,
            client,
            clock,
            lifetimes,
            tokens: Mutex::new(TtlCache::new()),
            policies: Mutex::new(TtlCache::new()),
        })
    }

    fn tokens(&self) -> std::sync::MutexGuard<'_, TtlCache<Resolved>> {
        // The lock guards a map: a panic elsewhere cannot leave it half-changed.
        self.tokens
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn policies(&self) -> std::sync::MutexGuard<'_, TtlCache<Arc<Acl>>> {
        self.policies
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Who `token` is; an empty token is anonymous.
    pub async fn resolve_identity(&self, token: &str) -> Result<RequestIdentity, ClientAclError> {
        if token.is_empty() {
            return Ok(RequestIdentity::Anonymous);
        }
        let now = Instant::now();
        let kept = self.tokens().get(token, self.lifetimes.token, now);
        let resolved = match kept {
            Some((resolved, true)) => resolved,
            stale => match self.servers.acl_whoami(token).await {
                Ok(answer) => {
                    let resolved = self.resolved_from(answer.identity)?;
                    self.tokens().insert(token, resolved.clone(), now);
                    resolved
                }
                Err(ServerConnError::Rejected { message }) => {
                    self.forget(token);
                    return Err(ClientAclError::Refused(message));
                }
                Err(error) => match stale {
                    Some((resolved, _)) => {
                        tracing::warn!(%error, "cannot resolve a token with the servers; using the answer kept from before");
                        resolved
                    }
                    None => return Err(ClientAclError::Unavailable(error.to_string())),
                },
            },
        };
        if let Err(refused) = self.still_valid(&resolved) {
            self.forget(token);
            return Err(refused);
        }
        Ok(resolved.identity)
    }

    fn forget(&self, token: &str) {
        self.tokens().remove(token);
        self.policies().remove(token);
    }

    /// The kept form of a server's answer.
    fn resolved_from(
        &self,
        identity: drover_structs::client_rpc::AuthenticatedIdentity,
    ) -> Result<Resolved, ClientAclError> {
        let identity = match (identity.acl_token, identity.claims) {
            (Some(token), _) => RequestIdentity::AclToken(Arc::new(token)),
            (None, Some(claims)) => RequestIdentity::Workload(Box::new(
                WorkloadIdentity::from_verified_claims(claims)
                    .map_err(|error| ClientAclError::Refused(error.to_string()))?,
            )),
            (None, None) => RequestIdentity::Anonymous,
        };
        let alloc_was_here = match &identity {
            RequestIdentity::Workload(workload) => self.client.alloc(&workload.alloc_id).is_ok(),
            _ => false,
        };
        Ok(Resolved {
            identity,
            alloc_was_here,
        })
    }

    /// A kept identity is still good: not expired, and, for a workload of an allocation
    /// this node runs (or ran), that allocation still runs here.
    fn still_valid(&self, resolved: &Resolved) -> Result<(), ClientAclError> {
        let now = self.clock.now_unix_ns();
        match &resolved.identity {
            RequestIdentity::AclToken(token) => {
                if token.is_expired(now.saturating_add(EXPIRY_LEEWAY_NS)) {
                    return Err(ClientAclError::Refused("ACL token expired".to_owned()));
                }
            }
            RequestIdentity::Workload(workload) => {
                let expired = workload
                    .claims
                    .get("exp")
                    .and_then(serde_json::Value::as_i64)
                    .is_some_and(|exp| {
                        exp.saturating_mul(1_000_000_000) <= now.saturating_add(EXPIRY_LEEWAY_NS)
                    });
                if expired {
                    return Err(ClientAclError::Refused("Permission denied".to_owned()));
                }
                match self.client.alloc(&workload.alloc_id) {
                    Ok(alloc) if alloc.terminal_status() => {
                        return Err(ClientAclError::Refused("Permission denied".to_owned()));
                    }
                    Ok(_) => {}
                    Err(_) if resolved.alloc_was_here => {
                        return Err(ClientAclError::Refused("Permission denied".to_owned()));
                    }
                    Err(_) => {}
                }
            }
            RequestIdentity::Anonymous => {}
        }
        Ok(())
    }

    /// The ACL `identity` (presented as `token`) holds: management for a management token,
    /// else its policies (for a workload identity, those attached to its job) as the servers
    /// last told them, at most `policy_ttl` ago (and `role_ttl`, for a token with roles).
    pub async fn acl(
        &self,
        token: &str,
        identity: &RequestIdentity,
    ) -> Result<Arc<Acl>, ClientAclError> {
        if let RequestIdentity::AclToken(acl_token) = identity
            && acl_token.is_management()
        {
            return Ok(Arc::new(Acl::management()));
        }
        let now = Instant::now();
        let kept = self
            .policies()
            .get(token, self.lifetimes.of_policies(identity), now);
        match kept {
            Some((acl, true)) => Ok(acl),
            stale => match self.servers.acl_bearer_policies(token).await {
                Ok(answer) => {
                    let parsed: Vec<policy::Policy> = answer
                        .policies
                        .values()
                        .filter_map(|stored| {
                            policy::parse(&stored.rules)
                                .inspect_err(|error| {
                                    tracing::warn!(policy = %stored.name, %error, "an ACL policy from the servers does not parse");
                                })
                                .ok()
                        })
                        .collect();
                    let acl = Arc::new(Acl::new(&parsed));
                    self.policies().insert(token, acl.clone(), now);
                    Ok(acl)
                }
                Err(ServerConnError::Rejected { message }) => {
                    self.forget(token);
                    Err(ClientAclError::Refused(message))
                }
                Err(error) => match stale {
                    Some((acl, _)) => {
                        tracing::warn!(%error, "cannot read a token's policies from the servers; using those kept from before");
                        Ok(acl)
                    }
                    None => Err(ClientAclError::Unavailable(error.to_string())),
                },
            },
        }
    }
}

/// The namespaces of this node's own allocations (the requests a client-only agent serves
/// name only those).
struct LocalAllocations<'a>(&'a LocalClient);

impl NamespaceLookup for LocalAllocations<'_> {
    fn alloc_namespace(&self, alloc_id: &str) -> Option<String> {
        self.0.alloc(alloc_id).ok().map(|alloc| alloc.namespace)
    }

    fn eval_namespace(&self, _eval_id: &str) -> Option<String> {
        None
    }
}

fn answer(status: StatusCode, message: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        message.to_owned(),
    )
        .into_response()
}

/// The token a request carries (`X-Nomad-Token`, else `Authorization: Bearer`), or "".
pub fn bearer_of(headers: &axum::http::HeaderMap) -> String {
    let header_str = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    request_token(header_str("X-Nomad-Token"), header_str("Authorization"))
        .map(str::trim)
        .unwrap_or_default()
        .to_owned()
}

/// The middleware of a client-only agent with ACLs on: a request it serves itself (its
/// client and agent endpoints) is checked against the caller's ACL, as a server checks the
/// rest; requests for the servers pass untouched (they check them).
pub async fn enforce_on_client(
    State(enforcer): State<ClientEnforcer>,
    request: Request,
    next: Next,
) -> Response {
    let path = percent_encoding::percent_decode_str(request.uri().path())
        .decode_utf8_lossy()
        .into_owned();
    let for_another_node = crate::proxy::node_named_in_query(&path, request.uri().query())
        .is_some_and(|node_id| node_id != enforcer.resolver.client.node_id());
    if !crate::proxy::served_by_client_agent(&path) || for_another_node {
        return next.run(request).await;
    }
    let params = QueryParams::parse(request.uri().query());
    let permission = required(
        &LocalAllocations(&enforcer.resolver.client),
        request.method(),
        &path,
        &params,
        &[],
    );
    if permission == Permission::Anyone {
        return next.run(request).await;
    }
    let token = bearer_of(request.headers());
    // A browser's exec websocket carries its token in the first message (`ws_handshake`), as
    // on a server agent: the exec handler resolves it (through the servers) with this check
    // before the session starts.
    if token.is_empty()
        && path.starts_with("/v1/client/allocation/")
        && path.ends_with("/exec")
        && params.bool("ws_handshake", false).unwrap_or(false)
    {
        let resolver = Arc::clone(&enforcer.resolver);
        let check = move |token: String| -> std::pin::Pin<
            Box<dyn std::future::Future<Output = Result<(), String>> + Send>,
        > {
            let resolver = Arc::clone(&resolver);
            let permission = permission.clone();
            Box::pin(async move {
                let identity = resolver
                    .resolve_identity(&token)
                    .await
                    .map_err(|error| error.to_string())?;
                let acl = resolver
                    .acl(&token, &identity)
                    .await
                    .map_err(|error| error.to_string())?;
                if permits(&identity, &acl, &permission) {
                    Ok(())
                } else {
                    Err("Permission denied".to_owned())
                }
            })
        };
        let mut request = request;
        request
            .extensions_mut()
            .insert(drover_api::HandshakeTokenCheck(Arc::new(check)));
        return next.run(request).await;
    }
    let resolver = &enforcer.resolver;
    let checked = async {
        let identity = resolver.resolve_identity(&token).await?;
        let acl = resolver.acl(&token, &identity).await?;
        Ok::<_, ClientAclError>(permits(&identity, &acl, &permission))
    };
    match checked.await {
        Ok(true) => next.run(request).await,
        Ok(false) => {
            tracing::debug!(path, ?permission, "ACL refused a request");
            answer(StatusCode::FORBIDDEN, "Permission denied")
        }
        Err(ClientAclError::Refused(message)) => answer(StatusCode::FORBIDDEN, &message),
        Err(error @ ClientAclError::Unavailable(_)) => {
            answer(StatusCode::INTERNAL_SERVER_ERROR, &error.to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_with_roles_keeps_its_policies_no_longer_than_role_ttl() {
        let lifetimes = CacheLifetimes {
            token: Duration::from_secs(60),
            policy: Duration::from_secs(30),
            role: Duration::from_secs(5),
        };
        let token = |roles: Option<Vec<drover_structs::acl::AclTokenRoleLink>>| {
            RequestIdentity::AclToken(Arc::new(drover_structs::acl::AclToken {
                roles,
                ..drover_structs::acl::AclToken::default()
            }))
        };
        let role = drover_structs::acl::AclTokenRoleLink::default();
        assert_eq!(
            lifetimes.of_policies(&token(Some(vec![role]))),
            Duration::from_secs(5)
        );
        assert_eq!(lifetimes.of_policies(&token(None)), Duration::from_secs(30));
        assert_eq!(
            lifetimes.of_policies(&token(Some(Vec::new()))),
            Duration::from_secs(30)
        );
        // A role_ttl longer than policy_ttl bounds nothing more.
        let longer = CacheLifetimes {
            role: Duration::from_secs(90),
            ..lifetimes
        };
        let role = drover_structs::acl::AclTokenRoleLink::default();
        assert_eq!(
            longer.of_policies(&token(Some(vec![role]))),
            Duration::from_secs(30)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_kept_answer_is_fresh_for_its_ttl_then_stale_and_the_oldest_goes_first() {
        let ttl = Duration::from_secs(30);
        let mut cache = TtlCache::new();
        cache.insert("first", 1, Instant::now());
        assert_eq!(cache.get("first", ttl, Instant::now()), Some((1, true)));
        tokio::time::advance(Duration::from_secs(30)).await;
        assert_eq!(cache.get("first", ttl, Instant::now()), Some((1, true)));
        tokio::time::advance(Duration::from_millis(1)).await;
        // Stale, but still there to stand in while no server answers.
        assert_eq!(cache.get("first", ttl, Instant::now()), Some((1, false)));
        assert_eq!(cache.get("other", ttl, Instant::now()), None);

        for n in 0..CACHE_CAPACITY {
            tokio::time::advance(Duration::from_millis(1)).await;
            cache.insert(&format!("token-{n}"), n, Instant::now());
        }
        assert_eq!(cache.entries.len(), CACHE_CAPACITY);
        assert_eq!(
            cache.get("first", ttl, Instant::now()),
            None,
            "the oldest went"
        );
        assert!(cache.get("token-0", ttl, Instant::now()).is_some());
        // Answering again for a kept token replaces it, without pushing another out.
        cache.insert("token-0", 7, Instant::now());
        assert_eq!(cache.entries.len(), CACHE_CAPACITY);
        assert_eq!(cache.get("token-0", ttl, Instant::now()), Some((7, true)));
        cache.remove("token-0");
        assert_eq!(cache.get("token-0", ttl, Instant::now()), None);
    }
}
