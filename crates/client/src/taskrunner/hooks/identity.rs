//! The identity hook: a task's workload identities, signed by the servers (through the node's
//! [`IdentitySigner`]) and delivered as Nomad delivers them.
//!
//! The default identity (the task's `identity` block without a name) goes to `NOMAD_TOKEN`
//! with `env = true` and to `secrets/nomad_token` with `file = true`; a named identity goes to
//! `NOMAD_TOKEN_<name>` and `secrets/nomad_<name>.jwt`; `filepath` puts the file elsewhere in
//! the task dir. `NOMAD_UNIX_ADDR` names the task API socket whenever a token is in the
//! environment. Tokens are kept in the hook's persisted state (renewed ones written back to
//! it), so a restart or a restored agent reuses a token that is still good instead of signing
//! again. Token files are written for the task's `user` as Nomad writes them. An identity with a `ttl`
//! is renewed once half of it is spent (client clock for "now", tokio time for the wait),
//! its file rewritten and its `change_mode` applied (`noop`, `restart`, `signal` with
//! `change_signal`).
//!
//! The default identity is also signed for a task that reads Nomad Variables in its
//! templates: the template hook reads it through [`TaskTokens`].
//!
//! Not here: signing (the servers) or checking tokens (the task API).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use drover_structs::client_rpc::{SignIdentitiesResponse, WorkloadIdentityRequest};
use drover_structs::{Task, WorkloadIdentity};
use tokio_util::sync::CancellationToken;

use super::{
    HookError, HookErrorKind, HookFuture, HookResult, PoststartHook, PoststartRequest,
    PoststartResponse, PrestartHook, PrestartRequest, PrestartResponse, StopHook, StopRequest,
    StopResponse, TaskHook, TaskLifecycleHandle,
};
use crate::allocdir::TaskDir;
use crate::clock::SharedClock;
use crate::identity::IdentitySigner;
use crate::template::beneath::{WriteOptions, write_atomic};

/// The hook's name, under which its state is persisted.
const HOOK_NAME: &str = "identity";

/// The name of the identity every task has.
pub const DEFAULT_IDENTITY: &str = "default";

/// One signed token and its expiry (Unix seconds, 0 for none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedToken {
    pub jwt: String,
    pub expiration: i64,
}

/// A task's current tokens by identity name, shared with the hooks that use them.
#[derive(Debug, Clone, Default)]
pub struct TaskTokens(Arc<Mutex<BTreeMap<String, SignedToken>>>);

impl TaskTokens {
    fn with<T>(&self, action: impl FnOnce(&mut BTreeMap<String, SignedToken>) -> T) -> T {
        match self.0.lock() {
            Ok(mut guard) => action(&mut guard),
            Err(poisoned) => action(&mut poisoned.into_inner()),
        }
    }

    /// The current token of identity `name`.
    pub fn get(&self, name: &str) -> Option<String> {
        self.with(|tokens| tokens.get(name).map(|token| token.jwt.clone()))
    }

    fn entry(&self, name: &str) -> Option<SignedToken> {
        self.with(|tokens| tokens.get(name).cloned())
    }

    pub(crate) fn set(&self, name: &str, token: SignedToken) {
        self.with(|tokens| tokens.insert(name.to_owned(), token));
    }

    /// Seeds tokens from a persisted hook state (`jwt.<name>`, `exp.<name>`), keeping any
    /// token already held (it is newer).
    fn seed(&self, state: &BTreeMap<String, String>) {
        for (key, jwt) in state {
            let Some(name) = key.strip_prefix("jwt.") else {
                continue;
            };
            let expiration = state
                .get(&format!("exp.{name}"))
                .and_then(|value| value.parse().ok())
                .unwrap_or(0);
            self.with(|tokens| {
                tokens.entry(name.to_owned()).or_insert(SignedToken {
                    jwt: jwt.clone(),
                    expiration,
                });
            });
        }
    }

    fn to_state(&self) -> BTreeMap<String, String> {
        self.with(|tokens| {
            tokens
                .iter()
                .flat_map(|(name, token)| {
                    [
                        (format!("jwt.{name}"), token.jwt.clone()),
                        (format!("exp.{name}"), token.expiration.to_string()),
                    ]
                })
                .collect()
        })
    }
}

/// The identities `task` asks for: its `identity` block (as "default") and its named ones,
/// plus the default identity when `need_default` (templates that read variables) and the task
/// has no block for it (then delivered neither to the env nor to a file).
pub fn wanted_identities(task: &Task, need_default: bool) -> Vec<WorkloadIdentity> {
    let mut wanted = Vec::new();
    match &task.identity {
        Some(block) => {
            let mut block = block.clone();
            if block.name.is_empty() {
                block.name = DEFAULT_IDENTITY.to_owned();
            }
            wanted.push(block);
        }
        None if need_default => wanted.push(WorkloadIdentity {
            name: DEFAULT_IDENTITY.to_owned(),
            ..WorkloadIdentity::default()
        }),
        None => {}
    }
    wanted.extend(task.identities.iter().cloned());
    wanted
}

/// What [`IdentityHook::new`] needs.
#[derive(Debug, Clone)]
pub struct IdentityHookInputs {
    pub alloc_id: String,
    pub task_name: String,
    pub wanted: Vec<WorkloadIdentity>,
    pub task_dir: TaskDir,
    pub signer: Arc<dyn IdentitySigner>,
    pub clock: SharedClock,
    pub lifecycle: TaskLifecycleHandle,
    pub tokens: TaskTokens,
    /// The hook's state as last persisted (a restored task's tokens).
    pub persisted: BTreeMap<String, String>,
    /// The task's `user`: token files are written for it (Nomad's `users.WriteFileFor`).
    pub user: String,
}

/// The identity hook.
pub struct IdentityHook {
    inputs: IdentityHookInputs,
    renewer: Mutex<Option<CancellationToken>>,
}

impl IdentityHook {
    pub fn new(inputs: IdentityHookInputs) -> Self {
        inputs.tokens.seed(&inputs.persisted);
        IdentityHook {
            inputs,
            renewer: Mutex::new(None),
        }
    }

    fn replace_renewer(&self, next: Option<CancellationToken>) -> bool {
        let mut guard = match self.renewer.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        if next.is_some() && guard.as_ref().is_some_and(|token| !token.is_cancelled()) {
            return false;
        }
        if let Some(previous) = std::mem::replace(&mut *guard, next) {
            previous.cancel();
        }
        true
    }
}

fn ttl_seconds(identity: &WorkloadIdentity) -> i64 {
    let nanos = identity.ttl.as_nanos();
    if nanos <= 0 {
        0
    } else {
        (nanos + 999_999_999) / 1_000_000_000
    }
}

/// When a token of `identity` should be renewed: once half its TTL is spent; `None` for a
/// token that does not expire.
fn renew_at(identity: &WorkloadIdentity, token: &SignedToken) -> Option<i64> {
    (token.expiration > 0).then(|| token.expiration - ttl_seconds(identity).max(1) / 2)
}

fn hook_error(message: String) -> HookError {
    HookError::new(HookErrorKind::Recoverable, message)
}

/// Asks the servers for `names`' tokens; any rejection fails the whole call.
async fn sign(
    inputs: &IdentityHookInputs,
    names: &[String],
) -> Result<SignIdentitiesResponse, HookError> {
    let requests = names
        .iter()
        .map(|name| WorkloadIdentityRequest {
            alloc_id: inputs.alloc_id.clone(),
            task_name: inputs.task_name.clone(),
            identity_name: name.clone(),
        })
        .collect();
    let response = inputs
        .signer
        .sign(requests)
        .await
        .map_err(|error| hook_error(format!("failed to sign workload identities: {error}")))?;
    if let Some(rejection) = response.rejections.first() {
        return Err(hook_error(format!(
            "workload identity {:?} not signed: {}",
            rejection.request.identity_name, rejection.reason
        )));
    }
    for signed in &response.signed_identities {
        inputs.tokens.set(
            &signed.request.identity_name,
            SignedToken {
                jwt: signed.jwt.clone(),
                expiration: signed.expiration,
            },
        );
    }
    Ok(response)
}

/// Where `identity`'s file goes, relative to the task dir.
fn token_file(identity: &WorkloadIdentity) -> String {
    if !identity.filepath.is_empty() {
        identity.filepath.clone()
    } else if identity.name == DEFAULT_IDENTITY {
        "secrets/nomad_token".to_owned()
    } else {
        format!("secrets/nomad_{}.jwt", identity.name)
    }
}

/// How a token file is written, as Nomad's `users.WriteFileFor`: for a task with a `user`,
/// owner-only and owned by that user's UID; when the task has none, or the user cannot be
/// found or chowned to (an agent not running as root), readable by all (Nomad's 0666 under
/// the usual umask 022), so the task reads it whichever user it runs as.
fn token_write_options(user: &str) -> Vec<WriteOptions> {
    let readable = WriteOptions {
        mode: 0o644,
        uid: None,
        gid: None,
    };
    if user.is_empty() {
        return vec![readable];
    }
    match nix::unistd::User::from_name(user) {
        Ok(Some(found)) => vec![
            WriteOptions {
                mode: 0o600,
                uid: Some(found.uid.as_raw()),
                gid: None,
            },
            readable,
        ],
        _ => vec![readable],
    }
}

fn write_token(
    task_dir: &TaskDir,
    identity: &WorkloadIdentity,
    jwt: &str,
    user: &str,
) -> HookResult {
    let path = token_file(identity);
    let mut last_error = None;
    for options in token_write_options(user) {
        match write_atomic(&task_dir.dir, &path, jwt.as_bytes(), options) {
            Ok(()) => return Ok(()),
            Err(error) => last_error = Some(error),
        }
    }
    let reason = last_error.map_or_else(String::new, |error| error.to_string());
    Err(HookError::new(
        HookErrorKind::Setup,
        format!(
            "failed to write token for identity {:?}: {reason}",
            identity.name
        ),
    ))
}

impl TaskHook for IdentityHook {
    fn name(&self) -> &'static str {
        HOOK_NAME
    }
    fn as_prestart(&self) -> Option<&dyn PrestartHook> {
        Some(self)
    }
    fn as_poststart(&self) -> Option<&dyn PoststartHook> {
        Some(self)
    }
    fn as_stop(&self) -> Option<&dyn StopHook> {
        Some(self)
    }
}

impl PrestartHook for IdentityHook {
    fn prestart<'a>(
        &'a self,
        _cancel: &'a CancellationToken,
        request: &'a PrestartRequest,
        response: &'a mut PrestartResponse,
    ) -> HookFuture<'a, HookResult> {
        Box::pin(async move {
            let inputs = &self.inputs;
            inputs.tokens.seed(&request.previous_state);
            let now = inputs.clock.now_unix_nanos() / 1_000_000_000;
            let missing: Vec<String> = inputs
                .wanted
                .iter()
                .filter(|identity| match inputs.tokens.entry(&identity.name) {
                    None => true,
                    Some(token) => renew_at(identity, &token).is_some_and(|at| at <= now),
                })
                .map(|identity| identity.name.clone())
                .collect();
            if !missing.is_empty() {
                sign(inputs, &missing).await?;
            }
            let mut in_env = false;
            for identity in &inputs.wanted {
                let Some(jwt) = inputs.tokens.get(&identity.name) else {
                    return Err(hook_error(format!(
                        "workload identity {:?} was not signed",
                        identity.name
                    )));
                };
                if identity.env {
                    let key = if identity.name == DEFAULT_IDENTITY {
                        "NOMAD_TOKEN".to_owned()
                    } else {
                        format!("NOMAD_TOKEN_{}", identity.name)
                    };
                    response.env.insert(key, jwt.clone());
                    in_env = true;
                }
                if identity.file {
                    write_token(&inputs.task_dir, identity, &jwt, &inputs.user)?;
                }
            }
            if in_env {
                let secrets = request
                    .task_env
                    .env
                    .get("NOMAD_SECRETS_DIR")
                    .cloned()
                    .unwrap_or_else(|| inputs.task_dir.secrets_dir.display().to_string());
                response.env.insert(
                    "NOMAD_UNIX_ADDR".to_owned(),
                    format!("unix://{secrets}/api.sock"),
                );
            }
            response.state = inputs.tokens.to_state();
            Ok(())
        })
    }
}

impl PoststartHook for IdentityHook {
    fn poststart<'a>(
        &'a self,
        _cancel: &'a CancellationToken,
        _request: &'a PoststartRequest,
        _response: &'a mut PoststartResponse,
    ) -> HookFuture<'a, HookResult> {
        Box::pin(async move {
            let expiring: Vec<WorkloadIdentity> = self
                .inputs
                .wanted
                .iter()
                .filter(|identity| ttl_seconds(identity) > 0)
                .cloned()
                .collect();
            if expiring.is_empty() {
                return Ok(());
            }
            let token = CancellationToken::new();
            if self.replace_renewer(Some(token.clone())) {
                tokio::spawn(renew(self.inputs.clone(), expiring, token));
            }
            Ok(())
        })
    }
}

impl StopHook for IdentityHook {
    fn stop<'a>(
        &'a self,
        _cancel: &'a CancellationToken,
        _request: &'a StopRequest,
        _response: &'a mut StopResponse,
    ) -> HookFuture<'a, HookResult> {
        Box::pin(async move {
            self.replace_renewer(None);
            Ok(())
        })
    }
}

/// Renews `expiring` identities until cancelled: each once half its TTL is spent, then its
/// file is rewritten and its change mode applied.
async fn renew(
    inputs: IdentityHookInputs,
    expiring: Vec<WorkloadIdentity>,
    cancel: CancellationToken,
) {
    let mut failures: u32 = 0;
    loop {
        let now = inputs.clock.now_unix_nanos() / 1_000_000_000;
        let due_at = expiring
            .iter()
            .map(|identity| match inputs.tokens.entry(&identity.name) {
                Some(token) => renew_at(identity, &token).unwrap_or(i64::MAX),
                None => now,
            })
            .min()
            .unwrap_or(i64::MAX);
        let wait = if failures > 0 {
            Duration::from_secs(1u64 << failures.min(6))
        } else {
            Duration::from_secs(u64::try_from(due_at.saturating_sub(now)).unwrap_or(0))
        };
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
        }
        let now = inputs.clock.now_unix_nanos() / 1_000_000_000;
        let due: Vec<&WorkloadIdentity> = expiring
            .iter()
            .filter(|identity| {
                inputs
                    .tokens
                    .entry(&identity.name)
                    .and_then(|token| renew_at(identity, &token))
                    .is_none_or(|at| at <= now)
            })
            .collect();
        if due.is_empty() {
            continue;
        }
        let names: Vec<String> = due.iter().map(|identity| identity.name.clone()).collect();
        if let Err(error) = sign(&inputs, &names).await {
            failures = failures.saturating_add(1);
            tracing::warn!(alloc_id = %inputs.alloc_id, task = %inputs.task_name, error = %error.message, "renewing workload identities failed; retrying");
            continue;
        }
        failures = 0;
        // The renewed tokens become the hook's persisted state, so a restored task keeps
        // them instead of the ones its prestart signed.
        inputs
            .lifecycle
            .persist_hook_state(HOOK_NAME, inputs.tokens.to_state());
        for identity in due {
            if identity.file
                && let Some(jwt) = inputs.tokens.get(&identity.name)
                && let Err(error) = write_token(&inputs.task_dir, identity, &jwt, &inputs.user)
            {
                tracing::warn!(alloc_id = %inputs.alloc_id, task = %inputs.task_name, error = %error.message, "writing a renewed workload identity failed");
            }
            let reason = format!("Identity[{}]: new token acquired", identity.name);
            match identity.change_mode.as_str() {
                "restart" => inputs.lifecycle.request_restart("identity", &reason, false),
                "signal" => {
                    inputs
                        .lifecycle
                        .request_signal("identity", &reason, &identity.change_signal)
                }
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use drover_structs::DurationNs;
    use drover_structs::client_rpc::SignedWorkloadIdentity;

    use super::*;
    use crate::allocdir::AllocDir;
    use crate::clock::TokioFollowingClock;
    use crate::identity::SignFuture;
    use crate::taskenv::TaskEnv;

    /// Signs every request as `<name>-<n>` with the TTL the test gives, on the test clock.
    #[derive(Debug)]
    struct CountingSigner {
        clock: SharedClock,
        ttl_seconds: i64,
        calls: Mutex<Vec<Vec<String>>>,
    }

    impl IdentitySigner for CountingSigner {
        fn sign(&self, requests: Vec<WorkloadIdentityRequest>) -> SignFuture<'_> {
            let mut calls = self.calls.lock().unwrap();
            calls.push(
                requests
                    .iter()
                    .map(|request| request.identity_name.clone())
                    .collect(),
            );
            let count = calls.len();
            let now = self.clock.now_unix_nanos() / 1_000_000_000;
            let signed = requests
                .into_iter()
                .map(|request| SignedWorkloadIdentity {
                    jwt: format!("{}-{count}", request.identity_name),
                    expiration: if request.identity_name == DEFAULT_IDENTITY {
                        0
                    } else {
                        now + self.ttl_seconds
                    },
                    request,
                })
                .collect();
            Box::pin(async move {
                Ok(SignIdentitiesResponse {
                    signed_identities: signed,
                    rejections: Vec::new(),
                })
            })
        }

        fn read_variable<'a>(
            &'a self,
            _: &'a str,
            _: &'a str,
            _: &'a str,
            _: crate::server_conn::Blocking,
        ) -> crate::identity::VariableFuture<'a> {
            Box::pin(async {
                Ok(crate::server_conn::Indexed {
                    value: None,
                    index: 1,
                })
            })
        }

        fn list_variables<'a>(
            &'a self,
            _: &'a str,
            _: &'a str,
            _: &'a str,
            _: crate::server_conn::Blocking,
        ) -> crate::identity::VariableListFuture<'a> {
            Box::pin(async {
                Ok(crate::server_conn::Indexed {
                    value: Vec::new(),
                    index: 1,
                })
            })
        }
    }

    #[derive(Debug, Default)]
    struct RecordedRequests(Mutex<Vec<String>>, Mutex<BTreeMap<String, String>>);

    impl super::super::TaskLifecycleRequests for RecordedRequests {
        fn request_restart(&self, _source: &str, reason: &str, _failure: bool) {
            self.0.lock().unwrap().push(format!("restart {reason}"));
        }
        fn request_signal(&self, _source: &str, _reason: &str, signal: &str) {
            self.0.lock().unwrap().push(format!("signal {signal}"));
        }
        fn request_kill(&self, _source: &str, reason: &str, _fail: bool) {
            self.0.lock().unwrap().push(format!("kill {reason}"));
        }
        fn persist_hook_state(&self, hook: &str, state: BTreeMap<String, String>) {
            self.0
                .lock()
                .unwrap()
                .push(format!("persist {hook} {}", state.len()));
            *self.1.lock().unwrap() = state;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn tokens_are_delivered_kept_and_renewed_with_their_change_mode() {
        let root = tempfile::tempdir().unwrap();
        let alloc_dir = AllocDir::new(root.path(), "a1").unwrap();
        let task_dir = alloc_dir.task_dir("t").unwrap();
        std::fs::create_dir_all(&task_dir.secrets_dir).unwrap();
        let clock: SharedClock =
            Arc::new(TokioFollowingClock::starting_at(1_700_000_000_000_000_000));
        let signer = Arc::new(CountingSigner {
            clock: clock.clone(),
            ttl_seconds: 600,
            calls: Mutex::new(Vec::new()),
        });
        let requests = Arc::new(RecordedRequests::default());
        let task = Task {
            name: "t".to_owned(),
            identity: Some(WorkloadIdentity {
                env: true,
                file: true,
                ..WorkloadIdentity::default()
            }),
            identities: vec![WorkloadIdentity {
                name: "vault".to_owned(),
                audience: vec!["vault.io".to_owned()],
                file: true,
                ttl: DurationNs::from_secs(600),
                change_mode: "restart".to_owned(),
                ..WorkloadIdentity::default()
            }],
            ..Task::default()
        };
        let inputs = IdentityHookInputs {
            alloc_id: "a1".to_owned(),
            task_name: "t".to_owned(),
            wanted: wanted_identities(&task, false),
            task_dir: task_dir.clone(),
            signer: signer.clone(),
            clock: clock.clone(),
            lifecycle: requests.clone(),
            tokens: TaskTokens::default(),
            persisted: BTreeMap::new(),
            user: String::new(),
        };
        let hook = IdentityHook::new(inputs.clone());
        let request = PrestartRequest {
            alloc: Arc::new(drover_structs::Allocation::default()),
            task: Arc::new(task.clone()),
            task_dir: task_dir.clone(),
            task_env: TaskEnv {
                env: BTreeMap::from([("NOMAD_SECRETS_DIR".to_owned(), "/secrets".to_owned())]),
                ..TaskEnv::default()
            },
            previous_state: BTreeMap::new(),
        };
        let mut response = PrestartResponse::default();
        hook.prestart(&CancellationToken::new(), &request, &mut response)
            .await
            .unwrap();
        assert_eq!(response.env["NOMAD_TOKEN"], "default-1");
        assert_eq!(response.env["NOMAD_UNIX_ADDR"], "unix:///secrets/api.sock");
        assert!(!response.env.contains_key("NOMAD_TOKEN_vault"));
        let read = |name: &str| std::fs::read_to_string(task_dir.secrets_dir.join(name)).unwrap();
        assert_eq!(read("nomad_token"), "default-1");
        assert_eq!(read("nomad_vault.jwt"), "vault-1");
        // A task without a `user` may run as anyone (exec's nobody): readable by all, as Nomad.
        let mode = |name: &str| {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::metadata(task_dir.secrets_dir.join(name))
                .unwrap()
                .permissions()
                .mode()
                & 0o777
        };
        assert_eq!(mode("nomad_token"), 0o644);

        // A restored hook with the persisted state signs nothing again.
        let restored = IdentityHook::new(IdentityHookInputs {
            tokens: TaskTokens::default(),
            persisted: response.state.clone(),
            ..inputs.clone()
        });
        let mut again = PrestartResponse::default();
        restored
            .prestart(&CancellationToken::new(), &request, &mut again)
            .await
            .unwrap();
        assert_eq!(again.env["NOMAD_TOKEN"], "default-1");
        assert_eq!(signer.calls.lock().unwrap().len(), 1);

        // Half the TTL later the ttl identity alone is renewed, its file rewritten and the
        // task restarted.
        hook.poststart(
            &CancellationToken::new(),
            &PoststartRequest {
                task_env: TaskEnv::default(),
                pid: None,
                driver_network: None,
            },
            &mut PoststartResponse,
        )
        .await
        .unwrap();
        tokio::time::sleep(Duration::from_secs(299)).await;
        assert_eq!(signer.calls.lock().unwrap().len(), 1);
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(
            signer.calls.lock().unwrap().clone(),
            vec![
                vec!["default".to_owned(), "vault".to_owned()],
                vec!["vault".to_owned()]
            ]
        );
        assert_eq!(read("nomad_vault.jwt"), "vault-2");
        assert_eq!(read("nomad_token"), "default-1");
        assert_eq!(
            requests.0.lock().unwrap().clone(),
            vec![
                "persist identity 4".to_owned(),
                "restart Identity[vault]: new token acquired".to_owned()
            ]
        );
        // The renewed token is the hook's persisted state: a hook restored from it delivers
        // the renewed token and signs nothing.
        let written_back = requests.1.lock().unwrap().clone();
        assert!(
            written_back.values().any(|value| value == "vault-2"),
            "{written_back:?}"
        );
        let restored = IdentityHook::new(IdentityHookInputs {
            tokens: TaskTokens::default(),
            persisted: written_back,
            ..inputs.clone()
        });
        restored
            .prestart(
                &CancellationToken::new(),
                &request,
                &mut PrestartResponse::default(),
            )
            .await
            .unwrap();
        assert_eq!(
            restored.inputs.tokens.get("vault").as_deref(),
            Some("vault-2")
        );
        assert_eq!(signer.calls.lock().unwrap().len(), 2);
        hook.stop(
            &CancellationToken::new(),
            &StopRequest {
                existing_state: BTreeMap::new(),
            },
            &mut StopResponse,
        )
        .await
        .unwrap();
    }

    /// As Nomad's `users.WriteFileFor`: a task with a `user` gets an owner-only token file
    /// owned by that user; an unknown user falls back to a file readable by all.
    #[test]
    fn token_files_belong_to_the_tasks_user() {
        use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
        if !nix::unistd::geteuid().is_root() {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "CI must run this as root, where a file can be given to another user"
            );
            return;
        }
        let nobody = nix::unistd::User::from_name("nobody")
            .unwrap()
            .expect("CI has a nobody user");
        let root = tempfile::tempdir().unwrap();
        let alloc_dir = AllocDir::new(root.path(), "a1").unwrap();
        let task_dir = alloc_dir.task_dir("t").unwrap();
        std::fs::create_dir_all(&task_dir.secrets_dir).unwrap();
        let identity = WorkloadIdentity {
            name: DEFAULT_IDENTITY.to_owned(),
            file: true,
            ..WorkloadIdentity::default()
        };
        let file = task_dir.secrets_dir.join("nomad_token");
        write_token(&task_dir, &identity, "jwt", "nobody").unwrap();
        let metadata = std::fs::metadata(&file).unwrap();
        assert_eq!(metadata.uid(), nobody.uid.as_raw());
        assert_eq!(metadata.permissions().mode() & 0o777, 0o600);
        write_token(&task_dir, &identity, "jwt", "no-such-user-here").unwrap();
        let metadata = std::fs::metadata(&file).unwrap();
        assert_eq!(metadata.uid(), 0);
        assert_eq!(metadata.permissions().mode() & 0o777, 0o644);
    }
}
