//! The server: job register/deregister, evaluations and the eval broker, the scheduler workers,
//! the plan applier, node registration, heartbeats and lost nodes, blocked evaluations.
//!
//! ```text
//!  register_job ──► store job version + eval ──► broker ──► worker: schedule(snapshot, eval)
//!                                                              │
//!  client status ──► store ──► failed alloc? new eval ─►┘      ▼
//!                        └──► terminal alloc? unblock     plan applier (only writer of allocs)
//!  heartbeat timer expired ──► node down (or disconnected) ──► node-update evals
//! ```
//!
//! Operators drain nodes and toggle their eligibility through `nodes`; the drainer (`drainer`)
//! moves allocations off draining nodes. The deployment watcher (`deployment_watcher`) carries
//! rollouts on, fails and reverts them, and takes the operator's deployment writes.
//!
//! Service registrations from clients are validated here (`services`) and stored. Periodic jobs
//! are launched by the periodic dispatcher (`periodic`); parameterized jobs by
//! [`Server::dispatch_job`].
//!
//! Every object is written to the state store before anything acts on it: an evaluation is
//! stored before it is enqueued, so a restarted server re-enqueues every pending evaluation from
//! the store and loses none.
//!
//! **Boundary**: decides where work runs; never runs tasks. The HTTP API and the in-process
//! client call the methods of [`Server`]; reads go straight to [`Server::state`].
//!
//! # Layers
//!
//! Each module directly under `src/` uses only modules on the lines below its own (`error`
//! modules aside), as `crates/structs/tests/module_cycles.rs` checks; top first:
//!
//! - `acl`
//! - `deployment_watcher`, `drainer`, `identity`, `variables`, `worker`
//! - `job_plan`, `keyring`, `launch`, `plan_apply`
//! - `blocked`, `broker`, `clock`, `gc`, `heartbeat`, `node_pools`, `nodes`, `periodic`, `scaling`,
//!   `services`, `snapshot`, `variable_locks`
//!
//! # Design notes
//!
//! Job register/deregister, revert (an earlier version registered again, with
//! `EnforcePriorVersion` as an enforced `JobModifyIndex`) and version stability; `scaling`:
//! Nomad's `Job.Scale` (the count held within the group's policy, refused while the job's
//! deployment is active, the next version with a `job-scaling` evaluation, a scaling event) and
//! the policy IDs a register and a plan give; eval broker and workers, plan applier, node
//! registration, heartbeats and lost nodes (a node that misses its heartbeat while it holds an
//! allocation waiting out its group's `lost_after` is `disconnected` and timed again, `down`
//! once none is left; its status updates are refused until it heartbeats, and an allocation
//! reported after it was `unknown` gets a `reconnect` evaluation and has its `lost_after`
//! follow-up cancelled, "allocs reconnected"; a node back from `disconnected` is
//! `initializing` until a heartbeat finds it has reported its allocations since it went
//! missing, then `ready`), blocked evals; `services`: validating and storing
//! the registrations clients send (ID, ServiceName, an AllocID the server knows); `job_plan`:
//! `job plan`, the submitted job laid over one snapshot as if registered and planned by the
//! same scheduler with an evaluation that is never stored, answered with Nomad's annotated
//! diff (`forces create/destroy update`, update counts) and committing nothing. A register with
//! `EnforceIndex` answers Nomad's three errors (in Nomad's words, HTTP 409 where Nomad answers 500); a register's `Warnings`
//! are the server's (the support table's, and Nomad's submission controller: a submission
//! over `job_max_source_size` is dropped with a warning); `PreserveCounts` and
//! `PreserveResources` keep the stored job's group counts and task resources, `EvalPriority`
//! is the evaluation's priority (also `?eval_priority=` on a deregister); deregistering a job
//! that does not exist is Nomad's empty answer, and a periodic or parameterized one makes no
//! evaluation. **Invariant**: an operation's records commit in one store write (one embedded
//! write transaction, one etcd transaction), so a leader that dies mid-operation leaves all of
//! it or none: a job register, stop or purge with its evaluation (and the cancellation of its
//! blocked one), a periodic launch or dispatch with its child's, a scale with its
//! `job-scaling` one and its scaling event (`StateStore::write_together`), a node registering ready, heartbeating back, marked down or
//! disconnected, made eligible, drained or purged with its `node-update` evaluations
//! (`*_with_evals`, the node's index named in them), clients' allocation updates with the
//! `alloc-failure`/`reconnect` evaluations decided inside the write
//! (`update_allocs_from_client_with_evals`), a deployment change with its evaluations, an
//! allocation stop with its. What is left to the next leader, which redoes it from the store:
//! a worker's evaluation status after its plan committed (the evaluation is still pending, so
//! it is scheduled again against the plan's result; a blocked evaluation the plan asked for is
//! asked for again), delayed follow-up evaluations stored before their plan (they only
//! evaluate the job again), garbage collection (each pass recomputes what is left to
//! collect), a plan of more allocations than one etcd transaction holds (each part a plan
//! committed in part; its evaluation still pending), a migration (a drain's) of more
//! allocations than one etcd transaction holds (written in parts, the evaluations with the
//! first: every allocation marked has a pending evaluation, and the drainer marks the rest on
//! its next pass); `periodic`:
//! the periodic dispatcher (leader work, started with the broker and the heartbeat timers),
//! which tracks every active periodic job's next launch on the server clock and tokio time,
//! skips a launch under `prohibit_overlap` while a child has a non-terminal eval or alloc, and
//! at start launches once a job whose launch fell due while no server ran; `launch`: children
//! (`<job>/periodic-<unix>`, `<job>/dispatch-[<prefix>-]<unix>-<8 hex>` with the payload
//! snappy-compressed), each registered with its evaluation in one write; a child whose ID
//! exists is never launched again. `nodes`: an operator's node writes as Nomad's RPCs answer
//! them (drain set/updated/cancelled with `LastDrain`, eligibility refused while draining,
//! purge, evaluate; node events and `NodeDrain`/`NodeEligibility` stream events); `drainer`:
//! leader work on the server clock, woken by allocation and node changes and the earliest
//! force deadline, that marks allocations of draining nodes `DesiredTransition.Migrate`
//! through the plan applier (one `node-drain` evaluation per job) — per group no more than
//! `migrate { max_parallel }` beyond the healthy ones the clients report, batch only at the
//! deadline, system jobs last unless ignored, everything once forced — and completes the
//! drain (the node stays ineligible); the strategy is in the store, so a restart carries on.
//! `deployment_watcher`: leader work like the drainer, woken by allocation and deployment
//! changes and the earliest `RequireProgressBy`, that carries active deployments on as Nomad's
//! watcher does (an evaluation when an allocation turned healthy after the job's latest
//! evaluation, unhealthy allocations made replaceable or, without a progress deadline, the
//! deployment failed, `auto_promote`, the progress deadline) and takes the operator's writes
//! (promote, pause/resume, fail, allocation health); a failure with `auto_revert` registers the
//! latest stable version again in the same write (`StateStore::update_deployment`). **Boundary**: decides where work
//! runs, never runs it. **Invariant**: only the plan applier writes allocations (server-side);
//! `alloc stop` is a command to the applier too, committed in one write with its evaluation.
//! Leader work (broker, workers, periodic dispatcher, drainer, heartbeat timers) runs per
//! leadership term: `Server::start` leads at once (one server); `start_follower` runs none of
//! it until `establish_leadership` rebuilds it from the store (after a failover every ready
//! node gets Nomad's `failover_ttl`, 300 s), and `revoke_leadership` stops it and forgets the
//! broker, blocked evaluations, periodic jobs and timers at once. The plan applier lives as
//! long as the server; it logs every plan it commits (`plan applied`, with the index) and every
//! one it could not (`plan not applied`), so which server applied what is on record.
//! `gc`: garbage collection as Nomad's core scheduler does it: done jobs whose every
//! evaluation can go, terminal evaluations whose allocations are all terminal, terminal
//! allocations (a failed one the reschedule policy may still replace is kept), terminal
//! deployments no live allocation refers to, then down nodes without live allocations,
//! expired one-time tokens (every 10 minutes), and with ACLs on expired ACL tokens (every 5
//! minutes, Nomad's `expiredACLTokenGC`: expired and created longer ago than
//! `acl_token_gc_threshold`, at most 4096 a pass, earliest expiry first). Forced
//! (`PUT /v1/system/gc`) it takes everything; as leader work (`gc::run`, per term) each pass
//! runs on its interval and takes only what is older than its threshold (`GcConfig`, Nomad's
//! `job_gc_*`, `eval_gc_threshold`, `batch_eval_gc_threshold`, `deployment_gc_threshold`,
//! `node_gc_threshold`, `acl_token_gc_threshold`), aged by modify times on the server's clock
//! (a job by `SubmitTime`, a node by `StatusUpdatedAt`, an ACL token by `CreateTime`). `node_pools`: pool writes as Nomad's community edition answers them (built-in
//! `all`/`default` never changed or deleted, a pool with nodes or non-terminal jobs not
//! deleted, scheduler configuration refused), and the register/plan check that a job's
//! `node_pool` exists.
//! `keyring`: a key-encryption key in `<data>/server/keyring.kek` (0600, made at first start;
//! for servers on etcd the cluster's one KEK, kept in etcd, `open_shared`)
//! seals AES-256-GCM root keys before they reach the store; each root key's Ed25519 signing
//! key is derived with HKDF-SHA-256; compact JWS (`EdDSA`, `kid` = key ID, `iss` =
//! `server { oidc_issuer }` when set, as Nomad's `SignClaims`) are signed with the active key
//! and verified with whichever key signed them while it is in the keyring.
//! `identity`: a workload identity's claims as Nomad builds them, signing one for a task of a
//! stored allocation, and `resolve_token` — the one place a request's credential
//! (`X-Nomad-Token` / `Authorization: Bearer`) becomes an identity (anonymous, an ACL token by
//! its secret ID that has not expired, or a workload whose allocation is still live), and
//! `sign_for_node` (Nomad's `Alloc.SignIdentities`: a node that proves its secret ID has
//! identities signed for tasks of allocations placed on it, each as the task's `identity` block
//! asks, or rejected with a reason). `acl`:
//! Nomad's policy language (HCL or JSON; `namespace` with `policy`, `capabilities` and
//! `variables` path rules, `node_pool`, `host_volume`, `agent`, `node`, `operator`, `quota`, `plugin`;
//! other blocks refused by name) compiled into an `Acl` with Nomad's precedence (deny wins, a
//! concrete namespace before the closest glob, coarse policies expanded to capabilities); a
//! token's ACL is the union of its policies and those of the roles it links (by ID; a deleted
//! role grants nothing and its link is left out of answers); `identity_policy_names` is the
//! set of policies a caller holds (Nomad's `getPoliciesForIdentity`: a token's own and its
//! roles', `anonymous` without a token, a workload's `JobACL`-bound ones); policy, role and
//! token hashes are Nomad's BLAKE2b-256 over its `SetHash` fields. `variables`: Nomad's path and size
//! rules, items sealed with the active key (bound to namespace and path), opened on read,
//! re-sealed by a full key rotation; lock acquire (Nomad's defaults and TTL bounds), renew
//! and release. `variable_locks`: a timer per held lock on tokio time — not renewed for twice
//! its TTL, the lock is lost and released after its `LockDelay`; restarted for every held lock
//! at start. A job registered or planned in a namespace that does not exist, or using a driver
//! or network mode its namespace's capabilities exclude, is refused with Nomad's error.

pub mod acl;
pub mod blocked;
pub mod broker;
mod clock;
mod deployment_watcher;
mod drainer;
mod error;
pub mod gc;
pub mod heartbeat;
pub mod identity;
pub mod job_plan;
pub mod keyring;
mod launch;
mod node_pools;
mod nodes;
mod periodic;
pub mod plan_apply;
mod scaling;
mod services;
pub mod snapshot;
pub mod variable_locks;
pub mod variables;
mod worker;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use drover_scheduler::ScoringAlgorithm;
use drover_state::{StateStore, Table};
use drover_structs::{
    ALLOC_CLIENT_STATUS_FAILED, ALLOC_CLIENT_STATUS_UNKNOWN, AllocStopResponse, Allocation,
    EVAL_STATUS_BLOCKED, EVAL_STATUS_CANCELLED, EVAL_STATUS_PENDING, EVAL_TRIGGER_ALLOC_FAILURE,
    EVAL_TRIGGER_ALLOC_STOP, EVAL_TRIGGER_JOB_DEREGISTER, EVAL_TRIGGER_JOB_REGISTER,
    EVAL_TRIGGER_NODE_UPDATE, Evaluation, Job, JobDeregisterResponse, JobPlanRequest,
    JobPlanResponse, JobRegisterRequest, JobRegisterResponse, NODE_STATUS_DISCONNECTED,
    NODE_STATUS_DOWN, NODE_STATUS_INITIALIZING, NODE_STATUS_READY, Node,
};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::blocked::BlockedEvals;
use crate::broker::EvalBroker;
use crate::heartbeat::{HeartbeatConfig, HeartbeatTimers};
use crate::plan_apply::{Commit, PlanRequest};

pub use clock::{Clock, SystemClock};
pub use error::ServerError;

/// The work queued inside a server at one moment, for its metrics (Nomad's
/// `nomad.nomad.broker.*` and `nomad.nomad.plan.*` gauges).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// Evaluations ready to be handed to a worker.
    pub broker_ready: usize,
    /// Evaluations handed to a worker and not yet acknowledged.
    pub broker_unacked: usize,
    /// Evaluations waiting behind their job's evaluation in flight.
    pub broker_pending: usize,
    /// Evaluations blocked until resources free up.
    pub blocked: usize,
    /// Plans waiting for the plan applier.
    pub plan_queue_depth: usize,
}

/// Server settings.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub region: String,
    pub datacenter: String,
    /// Scheduler workers running concurrently (plans of one job never run concurrently).
    pub num_schedulers: usize,
    pub heartbeat: HeartbeatConfig,
    pub scoring: ScoringAlgorithm,
    /// The leader's periodic garbage collection.
    pub gc: gc::GcConfig,
    /// The largest job submission (source, variables and flags, in bytes) kept with a job
    /// version (Nomad's `job_max_source_size`, 1 MB by default); a larger one is dropped with
    /// a warning and the job is registered without it.
    pub job_max_source_size: usize,
    /// The largest total of a job's group counts a register or scale may ask for (Nomad's
    /// `job_max_count`, 50 000 by default; 0: no limit).
    pub job_max_count: i64,
}

/// Nomad's default `job_max_count` (`structs.JobDefaultMaxCount`).
pub const DEFAULT_JOB_MAX_COUNT: i64 = 50_000;

/// Nomad's default `job_max_source_size`, "1M" as go-humanize reads it.
pub const DEFAULT_JOB_MAX_SOURCE_SIZE: usize = 1_000_000;

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            region: "global".into(),
            datacenter: "dc1".into(),
            num_schedulers: 2,
            heartbeat: HeartbeatConfig::default(),
            scoring: ScoringAlgorithm::Binpack,
            gc: gc::GcConfig::default(),
            job_max_source_size: DEFAULT_JOB_MAX_SOURCE_SIZE,
            job_max_count: DEFAULT_JOB_MAX_COUNT,
        }
    }
}

pub(crate) struct ServerInner {
    pub(crate) config: ServerConfig,
    pub(crate) state: StateStore,
    pub(crate) broker: Arc<EvalBroker>,
    pub(crate) blocked: BlockedEvals,
    pub(crate) heartbeats: HeartbeatTimers,
    pub(crate) plans: mpsc::Sender<PlanRequest>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) periodic: periodic::PeriodicDispatcher,
    pub(crate) drainer: drainer::Drainer,
    /// Cancelled when the server stops.
    shutdown: CancellationToken,
    /// Cancelled when the current leadership term ends (cancelled while following).
    term: Mutex<CancellationToken>,
}

/// The running server. Cheap to clone.
#[derive(Clone)]
pub struct Server {
    inner: Arc<ServerInner>,
    /// Tasks of the server's life (plan applier, heartbeat watcher).
    tasks: Arc<Mutex<Vec<JoinHandle<()>>>>,
    /// Tasks of the current leadership term (workers, periodic dispatcher, drainer).
    term_tasks: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

/// How a server came to lead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Takeover {
    /// It (re)started as the only server: nodes get their usual heartbeat deadline.
    Restart,
    /// It took over from another leader: nodes get the failover deadline.
    Failover,
}

fn lock_tasks(
    tasks: &Mutex<Vec<JoinHandle<()>>>,
) -> std::sync::MutexGuard<'_, Vec<JoinHandle<()>>> {
    // The vector only holds join handles; a panic elsewhere cannot leave it inconsistent.
    tasks
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("region", &self.inner.config.region)
            .finish_non_exhaustive()
    }
}

/// Nomad's `EnforceIndex` rule for a register: index 0 means "the job must not exist", any
/// other index must be the stored job's `JobModifyIndex`.
fn check_enforced_index(expected: u64, existing: Option<u64>) -> Result<(), ServerError> {
    const PREFIX: &str = "Enforcing job modify index";
    match existing {
        Some(_) if expected == 0 => Err(ServerError::IndexConflict(format!(
            "{PREFIX} 0: job already exists"
        ))),
        Some(current) if current != expected => Err(ServerError::IndexConflict(format!(
            "{PREFIX} {expected}: job exists with conflicting job modify index: {current}"
        ))),
        None if expected != 0 => Err(ServerError::IndexConflict(format!(
            "{PREFIX} {expected}: job does not exist"
        ))),
        _ => Ok(()),
    }
}

fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

impl Server {
    /// Starts the server on a state store as its only server (it leads at once): re-enqueues
    /// pending evaluations, re-tracks blocked ones and gives every ready node a fresh heartbeat
    /// deadline, then starts the workers, the plan applier and the heartbeat watcher. Must be
    /// called within a tokio runtime.
    pub fn start(config: ServerConfig, state: StateStore, clock: Arc<dyn Clock>) -> Server {
        let server = Self::start_follower(config, state, clock);
        server.establish_leadership(Takeover::Restart);
        server
    }

    /// Starts the server as a follower of a cluster: it answers reads and runs no leader work
    /// (broker, workers, periodic dispatcher, drainer, heartbeat timers) until
    /// [`Server::establish_leadership`]. Its writes are the store's to refuse (a follower's
    /// store on etcd refuses every write).
    pub fn start_follower(
        config: ServerConfig,
        state: StateStore,
        clock: Arc<dyn Clock>,
    ) -> Server {
        let (plans, plan_requests) = mpsc::channel(64);
        let (heartbeats, mut expired) = HeartbeatTimers::new(config.heartbeat.clone());
        let shutdown = CancellationToken::new();
        let term = shutdown.child_token();
        // No term yet.
        term.cancel();
        let inner = Arc::new(ServerInner {
            config,
            state,
            broker: Arc::new(EvalBroker::default()),
            blocked: BlockedEvals::default(),
            heartbeats,
            plans,
            clock,
            periodic: periodic::PeriodicDispatcher::default(),
            drainer: drainer::Drainer::default(),
            shutdown: shutdown.clone(),
            term: Mutex::new(term),
        });

        // The plan applier and the heartbeat watcher live as long as the server: only a leader
        // sends them work (plans from its workers, expired timers it set).
        let mut tasks = Vec::new();
        tasks.push(tokio::spawn(plan_apply::run(
            inner.state.clone(),
            inner.clock.clone(),
            plan_requests,
        )));
        {
            let inner = inner.clone();
            let shutdown = shutdown.clone();
            tasks.push(tokio::spawn(async move {
                loop {
                    let node_id = tokio::select! {
                        () = shutdown.cancelled() => return,
                        next = expired.recv() => match next {
                            Some(node_id) => node_id,
                            None => return,
                        },
                    };
                    if inner.term_token().is_cancelled() {
                        continue;
                    }
                    if let Err(error) = inner.node_missed_heartbeat(&node_id).await {
                        tracing::error!(node_id, %error, "could not mark the node down");
                    }
                }
            }));
        }
        Server {
            inner,
            tasks: Arc::new(Mutex::new(tasks)),
            term_tasks: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// Whether this server runs the leader's work now.
    pub fn is_leader(&self) -> bool {
        !self.inner.term_token().is_cancelled()
    }

    /// Takes up the leader's work from what the store holds: pending evaluations go to the
    /// broker, blocked ones are tracked, every ready node gets a heartbeat deadline (after a
    /// failover Nomad's longer one, so clients have time to find the new leader), and the
    /// workers, the periodic dispatcher and the drainer start. The store must be current (a
    /// server on etcd reloads it first). Does nothing while already leading.
    pub fn establish_leadership(&self, takeover: Takeover) {
        let mut term_tasks = lock_tasks(&self.term_tasks);
        if self.is_leader() {
            return;
        }
        let term = self.inner.shutdown.child_token();
        *self
            .inner
            .term
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = term.clone();
        let inner = &self.inner;
        let snapshot = inner.state.snapshot();
        for eval in snapshot.evals("") {
            match eval.status.as_str() {
                EVAL_STATUS_PENDING => inner.enqueue_when_due((*eval).clone()),
                EVAL_STATUS_BLOCKED => {
                    inner.blocked.block((*eval).clone());
                }
                _ => {}
            }
        }
        for node in snapshot.nodes("") {
            // Every node that is not down is timed: a disconnected one goes down once its
            // allocations expire, an initializing one when it misses a heartbeat.
            if node.status != NODE_STATUS_DOWN {
                match takeover {
                    Takeover::Restart => {
                        inner.heartbeats.reset(&node.id);
                    }
                    Takeover::Failover => inner.heartbeats.reset_after_failover(&node.id),
                }
            }
        }
        // The periodic dispatcher tracks every active periodic job and catches up a launch
        // missed while no server led.
        term_tasks.push(tokio::spawn(inner.clone().restore_periodic(term.clone())));
        // A drain in the store carries on under the new leader.
        term_tasks.push(tokio::spawn(drainer::run(inner.clone(), term.clone())));
        // So is the deployment watcher; the deployments and their counts are in the store.
        term_tasks.push(tokio::spawn(deployment_watcher::run(
            inner.clone(),
            term.clone(),
        )));
        // Garbage collection by age is the leader's too.
        term_tasks.push(tokio::spawn(gc::run(inner.clone(), term.clone())));
        for _ in 0..inner.config.num_schedulers.max(1) {
            term_tasks.push(tokio::spawn(worker::run(inner.clone(), term.clone())));
        }
    }

    /// Stops the leader's work at once (leadership lost): the workers, the dispatcher and the
    /// drainer stop, and the broker, blocked evaluations, periodic jobs and heartbeat timers
    /// are forgotten; the next leader rebuilds them from the store.
    pub fn revoke_leadership(&self) {
        let mut term_tasks = lock_tasks(&self.term_tasks);
        self.inner.term_token().cancel();
        for task in term_tasks.drain(..) {
            task.abort();
        }
        self.inner.broker.flush();
        self.inner.blocked.flush();
        self.inner.periodic.flush();
        self.inner.heartbeats.clear_all();
    }

    /// Stops the workers and the applier. Stored state is untouched.
    pub async fn shutdown(&self) {
        self.inner.shutdown.cancel();
        let mut tasks: Vec<JoinHandle<()>> = lock_tasks(&self.tasks).drain(..).collect();
        tasks.extend(lock_tasks(&self.term_tasks).drain(..));
        for task in tasks {
            task.abort();
            let _ = task.await;
        }
    }

    /// How much work is queued in the broker, the blocked set and the plan queue now.
    pub fn queue_stats(&self) -> QueueStats {
        let plans = &self.inner.plans;
        QueueStats {
            broker_ready: self.inner.broker.ready_len(),
            broker_unacked: self.inner.broker.outstanding_len(),
            broker_pending: self.inner.broker.pending_len(),
            blocked: self.inner.blocked.len(),
            plan_queue_depth: plans.max_capacity().saturating_sub(plans.capacity()),
        }
    }

    /// The state store: every read goes straight to it.
    pub fn state(&self) -> &StateStore {
        &self.inner.state
    }

    pub fn region(&self) -> &str {
        &self.inner.config.region
    }

    pub fn datacenter(&self) -> &str {
        &self.inner.config.datacenter
    }

    /// Registers (or updates) a job and creates its evaluation.
    pub async fn register_job(
        &self,
        request: JobRegisterRequest,
    ) -> Result<JobRegisterResponse, ServerError> {
        let Some(mut job) = request.job else {
            return Err(ServerError::BadRequest("Job must be specified".into()));
        };
        if job.id.is_empty() {
            return Err(ServerError::BadRequest(
                "Job ID hasn't been provided".into(),
            ));
        }
        job.canonicalize();
        if job.region.is_empty() {
            job.region.clone_from(&self.inner.config.region);
        }
        check_job_namespace(&self.inner.state, &job)?;
        node_pools::check_job_node_pool(&self.inner.state.snapshot(), &job)?;
        let existing = self.inner.state.job(&job.namespace, &job.id);
        if let Some(existing) = existing.as_deref() {
            preserve_values(
                &mut job,
                existing,
                request.preserve_counts,
                request.preserve_resources,
            );
        }
        scaling::assign_policy_ids(existing.as_deref(), &mut job);
        if request.enforce_index {
            check_enforced_index(
                request.job_modify_index,
                existing.map(|existing| existing.job_modify_index),
            )?;
        }
        let total_count: i64 = job.task_groups.iter().map(|group| group.count).sum();
        let max_count = self.inner.config.job_max_count;
        if max_count > 0 && total_count > max_count {
            return Err(ServerError::BadRequest(format!(
                "1 error occurred:\n\t* total count was greater than configured job_max_count: {total_count} > {max_count}\n\n"
            )));
        }
        // A register clears a previous stop.
        job.stop = false;
        // The warnings Nomad's register answers: what runs differently from Nomad, and a
        // submission too large to keep.
        let mut warnings = drover_jobspec::support::check(&job).warnings;
        let submission = match request.submission {
            Some(submission) if submission.size() > self.inner.config.job_max_source_size => {
                warnings.push(oversized_submission_warning(
                    submission.size(),
                    self.inner.config.job_max_source_size,
                ));
                None
            }
            other => other,
        };
        let warnings = drover_jobspec::support::warnings_text(&warnings);
        let now = self.inner.clock.now_unix_ns();
        // Periodic and parameterized jobs are templates: they are launched by the periodic
        // dispatcher and by dispatch, never scheduled themselves.
        if job.is_periodic() || job.is_parameterized() {
            let registration = self
                .inner
                .state
                .upsert_job_with_submission(job, submission, now)
                .await?;
            self.inner.periodic.add(registration.job.clone(), now);
            let index = self.inner.state.latest_index();
            return Ok(JobRegisterResponse {
                job_modify_index: registration.job_modify_index,
                index,
                warnings,
                ..JobRegisterResponse::default()
            });
        }

        // The job version and its evaluation commit in one write (Nomad's job register is one
        // Raft entry): a leader that dies after it leaves an evaluation a new leader
        // schedules, never a job that no evaluation will place. The store names the version
        // in the evaluation.
        let mut eval = self.inner.new_eval(&job, EVAL_TRIGGER_JOB_REGISTER, 0);
        // Nomad's `EvalPriority`: the evaluation's priority instead of the job's.
        if request.eval_priority > 0 {
            eval.priority = request.eval_priority;
        }
        let eval_id = eval.id.clone();
        let (registration, index) = self
            .inner
            .state
            .upsert_job_with_submission_and_evals(job, submission, vec![eval], now)
            .await?;
        let job = registration.job;
        self.inner.periodic.add(job.clone(), now);
        self.inner.enqueue_stored(std::slice::from_ref(&eval_id));
        tracing::debug!(
            namespace = job.namespace,
            job_id = job.id,
            eval_id,
            "job registered"
        );
        Ok(JobRegisterResponse {
            eval_id,
            eval_create_index: index,
            job_modify_index: registration.job_modify_index,
            index,
            warnings,
            ..JobRegisterResponse::default()
        })
    }

    /// Plans a job as if registered, committing nothing (`POST /v1/job/<id>/plan`). The
    /// scheduling pass runs off the async runtime.
    pub async fn plan_job(&self, request: JobPlanRequest) -> Result<JobPlanResponse, ServerError> {
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || job_plan::plan_job(&inner, request))
            .await
            .map_err(|error| ServerError::Internal(format!("the plan was not made: {error}")))?
    }

    /// Stops a job (its allocations are stopped by the evaluation), or purges it. A job that
    /// does not exist is nothing to do: an empty answer (no evaluation, index 0), as Nomad's
    /// `Job.Deregister` gives.
    pub async fn deregister_job(
        &self,
        namespace: &str,
        job_id: &str,
        purge: bool,
    ) -> Result<JobDeregisterResponse, ServerError> {
        self.deregister_job_with_priority(namespace, job_id, purge, 0)
            .await
    }

    /// [`Server::deregister_job`] whose evaluation takes `eval_priority` (when positive)
    /// instead of the job's priority (Nomad's `?eval_priority=`).
    pub async fn deregister_job_with_priority(
        &self,
        namespace: &str,
        job_id: &str,
        purge: bool,
        eval_priority: i64,
    ) -> Result<JobDeregisterResponse, ServerError> {
        let Some(existing) = self.inner.state.job(namespace, job_id) else {
            return Ok(JobDeregisterResponse::default());
        };
        let now = self.inner.clock.now_unix_ns();
        // The stop (or purge), its evaluation and the cancellation of the job's blocked
        // evaluation commit in one write: a leader that dies after it leaves an evaluation
        // that stops the allocations, never a stopped job whose allocations run on. A
        // periodic or parameterized job places nothing itself: no evaluation, as Nomad.
        let launchable = !(existing.is_periodic() || existing.is_parameterized());
        let mut evals = Vec::new();
        let mut eval_id = String::new();
        if launchable {
            // The store names the stop's (or purge's) index in it.
            let mut eval = self
                .inner
                .new_eval(&existing, EVAL_TRIGGER_JOB_DEREGISTER, 0);
            if eval_priority > 0 {
                eval.priority = eval_priority;
            }
            eval_id.clone_from(&eval.id);
            evals.push(eval);
        }
        if let Some(blocked) = self.inner.blocked.untrack(namespace, job_id) {
            evals.push(superseded(blocked));
        }
        let job_modify_index = if purge {
            self.inner
                .state
                .delete_job_with_evals(namespace, job_id, evals, now)
                .await?
        } else {
            let mut stopped = Job::clone(&existing);
            stopped.stop = true;
            self.inner
                .state
                .upsert_job_with_evals(stopped, evals, now)
                .await?
                .0
                .job_modify_index
        };
        self.inner.periodic.remove(namespace, job_id);
        if !launchable {
            return Ok(JobDeregisterResponse {
                eval_create_index: job_modify_index,
                job_modify_index,
                index: job_modify_index,
                ..JobDeregisterResponse::default()
            });
        }
        self.inner.enqueue_stored(std::slice::from_ref(&eval_id));
        let index = self
            .inner
            .state
            .eval(&eval_id)
            .map_or(job_modify_index, |eval| eval.create_index);
        Ok(JobDeregisterResponse {
            eval_id,
            eval_create_index: index,
            job_modify_index,
            index,
            ..JobDeregisterResponse::default()
        })
    }

    /// Creates a new evaluation for a job (`POST /v1/job/:id/evaluate`).
    pub async fn evaluate_job(
        &self,
        namespace: &str,
        job_id: &str,
    ) -> Result<JobRegisterResponse, ServerError> {
        let Some(job) = self.inner.state.job(namespace, job_id) else {
            return Err(ServerError::NotFound("job not found".into()));
        };
        if job.is_periodic() || job.is_parameterized() {
            return Err(ServerError::BadRequest(
                "can't evaluate periodic or parameterized job".into(),
            ));
        }
        let eval = self
            .inner
            .new_eval(&job, EVAL_TRIGGER_JOB_REGISTER, job.job_modify_index);
        let eval_id = eval.id.clone();
        let index = self.inner.store_and_enqueue(vec![eval]).await?;
        Ok(JobRegisterResponse {
            eval_id,
            eval_create_index: index,
            job_modify_index: job.job_modify_index,
            index,
            ..JobRegisterResponse::default()
        })
    }

    /// Registers an earlier version of a job again as its next version (Nomad's `Job.Revert`).
    /// With `enforce_prior_version`, the job must still be at that version.
    pub async fn revert_job(
        &self,
        namespace: &str,
        request: drover_structs::JobRevertRequest,
    ) -> Result<JobRegisterResponse, ServerError> {
        let Some(current) = self.inner.state.job(namespace, &request.job_id) else {
            return Err(ServerError::NotFound(format!(
                "job {:?} not found",
                request.job_id
            )));
        };
        if request.job_version == current.version {
            return Err(ServerError::BadRequest(
                "can't revert to current version".into(),
            ));
        }
        let Some(earlier) = self
            .inner
            .state
            .job_versions(namespace, &request.job_id)
            .into_iter()
            .find(|job| job.version == request.job_version)
        else {
            return Err(ServerError::NotFound(format!(
                "job {:?} in namespace {:?} at version {} not found",
                request.job_id, namespace, request.job_version
            )));
        };
        let mut enforce_index = false;
        if let Some(prior) = request.enforce_prior_version {
            if current.version != prior {
                return Err(ServerError::BadRequest(format!(
                    "Current job has version {}; enforcing version {prior}",
                    current.version
                )));
            }
            enforce_index = true;
        }
        let mut job = drover_structs::Job::clone(&earlier);
        // The new version is not the tagged one: its tag stays where it was (Nomad clears it).
        job.version_tag = None;
        self.register_job(JobRegisterRequest {
            job: Some(job),
            enforce_index,
            job_modify_index: current.job_modify_index,
            ..JobRegisterRequest::default()
        })
        .await
    }

    /// Applies a tag to a job version, or with `tag` absent removes the tag named `name`
    /// (Nomad's `Job.TagVersion`); the tag as stored and the index of the write.
    pub async fn tag_job_version(
        &self,
        namespace: &str,
        request: drover_structs::JobApplyTagRequest,
    ) -> Result<drover_structs::JobTagResponse, ServerError> {
        let now_unix_ns = self.inner.clock.now_unix_ns();
        if request.latest && request.version > 0 {
            return Err(ServerError::BadRequest(format!(
                "version must be zero when tagging latest, got: {}",
                request.version
            )));
        }
        let tag = request.tag.map(|mut tag| {
            tag.tagged_time = now_unix_ns;
            tag
        });
        if let Some(tag) = &tag
            && tag.description.chars().count() > 1000
        {
            return Err(ServerError::BadRequest(format!(
                "Tagged version description must be under 1000 characters, currently {}",
                tag.description.chars().count()
            )));
        }
        // Without `Latest`, the version named (0 included), as Nomad's store reads it.
        let version = (!request.latest).then_some(request.version);
        let index = match self
            .inner
            .state
            .update_job_version_tag(
                namespace,
                &request.job_id,
                version,
                &request.name,
                tag.clone(),
            )
            .await
        {
            Err(drover_state::StateError::Refused(message)) => {
                return Err(ServerError::BadRequest(message));
            }
            other => other?,
        };
        let tag = tag.unwrap_or_default();
        Ok(drover_structs::JobTagResponse {
            name: tag.name,
            description: tag.description,
            tagged_time: tag.tagged_time,
            index,
            ..Default::default()
        })
    }

    /// Marks a version of a job stable or not (Nomad's `Job.Stable`); the index of the write.
    pub async fn set_job_stability(
        &self,
        namespace: &str,
        request: drover_structs::JobStabilityRequest,
    ) -> Result<u64, ServerError> {
        match self
            .inner
            .state
            .update_job_stability(
                namespace,
                &request.job_id,
                request.job_version,
                request.stable,
            )
            .await
        {
            Err(drover_state::StateError::NotFound { .. }) => Err(ServerError::NotFound(format!(
                "job {:?} in namespace {:?} at version {} not found",
                request.job_id, namespace, request.job_version
            ))),
            other => Ok(other?),
        }
    }

    /// Stops one allocation; the scheduler places a replacement (the allocation migrates). The
    /// allocation is marked through the plan applier, together with the evaluation, so it is
    /// never written from a stale copy.
    pub async fn stop_alloc(&self, alloc_id: &str) -> Result<AllocStopResponse, ServerError> {
        let Some(alloc) = self.inner.state.alloc(alloc_id) else {
            return Err(ServerError::NotFound("allocation not found".into()));
        };
        let eval = match self.inner.state.job(&alloc.namespace, &alloc.job_id) {
            Some(job) => self
                .inner
                .new_eval(&job, EVAL_TRIGGER_ALLOC_STOP, job.job_modify_index),
            None => {
                let job = alloc.job.as_deref().cloned().unwrap_or_default();
                self.inner.new_eval(&job, EVAL_TRIGGER_ALLOC_STOP, 0)
            }
        };
        let eval_id = eval.id.clone();
        let (reply, response) = tokio::sync::oneshot::channel();
        self.inner
            .plans
            .send(PlanRequest {
                commit: Commit::MigrateAllocs {
                    alloc_ids: vec![alloc_id.to_owned()],
                    evals: vec![eval],
                },
                reply,
            })
            .await
            .map_err(|_| ServerError::Internal("the plan applier has stopped".into()))?;
        let committed = response
            .await
            .map_err(|_| ServerError::Internal("the plan applier dropped the request".into()))??;
        if let Some(stored) = self.inner.state.eval(&eval_id) {
            self.inner.enqueue_when_due((*stored).clone());
        }
        Ok(AllocStopResponse {
            eval_id,
            index: committed.index,
        })
    }

    /// Registers a node (or re-registers it after a restart). Returns the heartbeat TTL.
    pub async fn register_node(&self, mut node: Node) -> Result<Duration, ServerError> {
        if node.id.is_empty() {
            return Err(ServerError::BadRequest(
                "missing node ID for client registration".into(),
            ));
        }
        let previous = self.inner.state.node(&node.id);
        let previous_status = previous.as_ref().map(|n| n.status.clone());
        // A ready node registering again with other drivers, attributes or resources (a
        // driver found healthy by a later fingerprint) may now fit evaluations that were
        // blocked: Nomad's state store unblocks them on every upsert of a ready node.
        let offers_changed = previous
            .as_deref()
            .is_some_and(|previous| offers_differ(previous, &node));
        node.status = NODE_STATUS_READY.to_owned();
        let now = self.inner.clock.now_unix_ns();
        // A node turning ready and its evaluations commit in one write.
        let turns_ready = previous_status.as_deref() != Some(NODE_STATUS_READY);
        let evals = if turns_ready {
            self.inner.node_evals(&node.id)
        } else {
            Vec::new()
        };
        let eval_ids = eval_ids(&evals);
        self.inner
            .state
            .upsert_node_with_evals(node.clone(), evals, now)
            .await?;
        let ttl = self.inner.heartbeats.reset(&node.id);
        if turns_ready || offers_changed {
            self.inner.capacity_changed().await;
        }
        self.inner.enqueue_stored(&eval_ids);
        Ok(ttl)
    }

    /// Records a heartbeat. An unknown node must register first (404).
    ///
    /// A node back from `disconnected` is `initializing` (Nomad's `Node.UpdateStatus`): its
    /// client may report its allocations again, but nothing is placed on it until a heartbeat
    /// finds that it has reported since it went missing (or that it holds nothing live); then
    /// it is `ready`. A `down` node that heartbeats is `ready` at once.
    pub async fn heartbeat_node(&self, node_id: &str) -> Result<Duration, ServerError> {
        let Some(node) = self.inner.state.node(node_id) else {
            return Err(ServerError::NotFound("node not found".into()));
        };
        let ttl = self.inner.heartbeats.reset(node_id);
        let next = match node.status.as_str() {
            NODE_STATUS_READY => return Ok(ttl),
            NODE_STATUS_DISCONNECTED => NODE_STATUS_INITIALIZING,
            NODE_STATUS_INITIALIZING => {
                let reported = node.last_alloc_update_index > node.last_missed_heartbeat_index;
                let holds_live = self
                    .inner
                    .state
                    .allocs_by_node(node_id)
                    .iter()
                    .any(|alloc| !alloc.terminal_status());
                if holds_live && !reported {
                    return Ok(ttl);
                }
                NODE_STATUS_READY
            }
            _ => NODE_STATUS_READY,
        };
        let now = self.inner.clock.now_unix_ns();
        // The status and the node's evaluations commit in one write.
        let evals = self.inner.node_evals(node_id);
        let eval_ids = eval_ids(&evals);
        self.inner
            .state
            .update_node_status_with_evals(node_id, next, evals, now)
            .await?;
        if next == NODE_STATUS_READY {
            self.inner.capacity_changed().await;
        }
        self.inner.enqueue_stored(&eval_ids);
        Ok(ttl)
    }

    /// The allocations placed on a node, as `alloc ID → AllocModifyIndex`, once one of them
    /// changed after `min_index` (added, removed, or changed by the server) or `max_wait`
    /// passes (a blocking query; `min_index` 0 answers at once). The index returned is the
    /// allocation table's. The client fetches only those whose modify index changed. An
    /// allocation removed between `min_index` and this call (garbage collection) shows in the
    /// next answer rather than ending this wait early.
    pub async fn node_allocs(
        &self,
        node_id: &str,
        min_index: u64,
        max_wait: Duration,
    ) -> Result<(BTreeMap<String, u64>, u64), ServerError> {
        let snapshot = self.inner.state.snapshot();
        let mut view = node_alloc_view(&snapshot, node_id);
        let mut index = snapshot.table_index(Table::Allocs).max(1);
        // Answer at once on the first query, or when one of the node's allocations changed
        // after `min_index`. Otherwise wait for a change of *this node's* allocations: every
        // status report of every node bumps the allocations table, and waking each node's
        // watcher for each of them would cost a fleet of N nodes N answers per write.
        let changed_since = |view: &BTreeMap<String, u64>| {
            view.values().any(|alloc_index| *alloc_index > min_index)
        };
        if min_index > 0 && !changed_since(&view) {
            let deadline = tokio::time::Instant::now() + max_wait;
            let mut seen = index.max(min_index);
            loop {
                let outcome = self
                    .inner
                    .state
                    .wait_for_change(&[Table::Allocs], seen, deadline)
                    .await;
                if !outcome.changed {
                    break;
                }
                let snapshot = self.inner.state.snapshot();
                let now = node_alloc_view(&snapshot, node_id);
                index = snapshot.table_index(Table::Allocs).max(1);
                seen = index;
                if now != view {
                    view = now;
                    break;
                }
            }
        }
        Ok((view, index))
    }

    /// Full allocations by ID (unknown IDs are skipped).
    pub fn allocs(&self, ids: &[String]) -> Vec<Allocation> {
        ids.iter()
            .filter_map(|id| self.inner.state.alloc(id))
            .map(|alloc| Allocation::clone(&alloc))
            .collect()
    }

    /// Applies a batch of client status updates. Allocations that failed get an evaluation so
    /// the scheduler can reschedule them; allocations that finished free capacity.
    pub async fn update_allocs_from_client(
        &self,
        updates: Vec<Allocation>,
    ) -> Result<u64, ServerError> {
        // A node the server holds for down or disconnected must heartbeat first (Nomad's
        // `Node.UpdateAlloc`); its client keeps the updates and sends them again.
        if let Some(node_id) = updates
            .iter()
            .find_map(|update| self.inner.state.alloc(&update.id))
            .map(|alloc| alloc.node_id.clone())
            && let Some(node) = self.inner.state.node(&node_id)
            && (node.status == NODE_STATUS_DOWN || node.status == NODE_STATUS_DISCONNECTED)
        {
            return Err(ServerError::Rpc(format!(
                "node {node_id} is not allowed to update allocs while in status {}",
                node.status
            )));
        }
        let now = self.inner.clock.now_unix_ns();
        // The updates and the evaluations they call for commit in one write (Nomad's
        // `Node.UpdateAlloc`): a leader that dies after it leaves a failed allocation with the
        // evaluation that replaces it, never without. The evaluations are decided inside the
        // write, on the allocations as the write changed them.
        let made = Arc::new(std::sync::Mutex::new((false, Vec::<String>::new())));
        let inner = Arc::clone(&self.inner);
        let record = Arc::clone(&made);
        let outcome = self
            .inner
            .state
            .update_allocs_from_client_with_evals(updates, now, move |changes| {
                let (freed_capacity, evals) = client_update_evals(&inner, changes);
                let mut made = record
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                made.0 |= freed_capacity;
                made.1.extend(eval_ids(&evals));
                evals
            })
            .await?;
        let (freed_capacity, eval_ids) = std::mem::take(
            &mut *made
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        self.inner.enqueue_stored(&eval_ids);
        if freed_capacity {
            self.inner.capacity_changed().await;
        }
        Ok(outcome.index)
    }
}

/// What client updates call for, decided on the allocations as the update's write changed
/// them: whether capacity was freed (an allocation turned terminal), and a `reconnect`
/// evaluation for each job with an allocation reported again after it was `unknown`, or
/// else an `alloc-failure` one for each live job with an allocation that should run and
/// failed.
fn client_update_evals(
    inner: &ServerInner,
    changes: &[drover_state::ClientAllocChange],
) -> (bool, Vec<Evaluation>) {
    let mut freed_capacity = false;
    let mut failed_jobs = BTreeMap::new();
    let mut reconnected_jobs = BTreeMap::new();
    for change in changes {
        let (before, alloc) = (&change.before, &change.after);
        let Some(job) = &change.job else {
            freed_capacity |= alloc.terminal_status() && !before.terminal_status();
            continue;
        };
        let key = (alloc.namespace.clone(), alloc.job_id.clone());
        if before.client_status == ALLOC_CLIENT_STATUS_UNKNOWN {
            reconnected_jobs.insert(key.clone(), Arc::clone(job));
        }
        if alloc.terminal_status() && !before.terminal_status() {
            freed_capacity = true;
        }
        if alloc.client_status == ALLOC_CLIENT_STATUS_FAILED
            && before.client_status != ALLOC_CLIENT_STATUS_FAILED
            && alloc.desired_status == drover_structs::ALLOC_DESIRED_STATUS_RUN
        {
            failed_jobs.insert(key, Arc::clone(job));
        }
    }
    let mut evals = Vec::new();
    // An allocation its client reports again after it was `unknown` is settled against its
    // replacements by a `reconnect` evaluation.
    for job in reconnected_jobs.values() {
        evals.push(inner.new_eval(
            job,
            drover_structs::EVAL_TRIGGER_RECONNECT,
            job.job_modify_index,
        ));
    }
    for (key, job) in failed_jobs {
        if !reconnected_jobs.contains_key(&key) && !job.stop {
            evals.push(inner.new_eval(&job, EVAL_TRIGGER_ALLOC_FAILURE, job.job_modify_index));
        }
    }
    (freed_capacity, evals)
}

/// The IDs of `evals`.
pub(crate) fn eval_ids(evals: &[Evaluation]) -> Vec<String> {
    evals.iter().map(|eval| eval.id.clone()).collect()
}

/// `eval` canceled because a newer evaluation of its job superseded it.
pub(crate) fn superseded(mut eval: Evaluation) -> Evaluation {
    eval.status = EVAL_STATUS_CANCELLED.to_owned();
    eval.status_description = "canceled after more recent eval was processed".into();
    eval
}

/// The node's allocations with their `AllocModifyIndex` (moved only by server-side changes):
/// what its client's alloc watcher compares.
fn node_alloc_view(snapshot: &drover_state::StateSnapshot, node_id: &str) -> BTreeMap<String, u64> {
    snapshot
        .allocs_by_node(node_id)
        .into_iter()
        .map(|alloc| (alloc.id.clone(), alloc.alloc_modify_index))
        .collect()
}

impl ServerInner {
    /// The current leadership term's token (cancelled while following).
    pub(crate) fn term_token(&self) -> CancellationToken {
        self.term
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    fn new_eval(&self, job: &Job, triggered_by: &str, job_modify_index: u64) -> Evaluation {
        let now = self.clock.now_unix_ns();
        Evaluation {
            id: new_id(),
            namespace: if job.namespace.is_empty() {
                drover_structs::DEFAULT_NAMESPACE.to_owned()
            } else {
                job.namespace.clone()
            },
            priority: job.priority,
            r#type: job.r#type.clone(),
            triggered_by: triggered_by.to_owned(),
            job_id: job.id.clone(),
            job_modify_index,
            status: EVAL_STATUS_PENDING.to_owned(),
            create_time: now,
            modify_time: now,
            ..Evaluation::default()
        }
    }

    /// Stores evaluations (one write). Returns the index of the write.
    pub(crate) async fn store_evals(&self, evals: Vec<Evaluation>) -> Result<u64, ServerError> {
        let now = self.clock.now_unix_ns();
        Ok(self.state.upsert_evals(evals, now).await?)
    }

    /// Stores evaluations, then hands the stored copies (with their indexes) to the broker.
    /// Only for evaluations that are the whole of an operation's write: those made with
    /// another record commit with it, then go to [`ServerInner::enqueue_stored`].
    async fn store_and_enqueue(&self, evals: Vec<Evaluation>) -> Result<u64, ServerError> {
        let ids = eval_ids(&evals);
        let index = self.store_evals(evals).await?;
        self.enqueue_stored(&ids);
        Ok(index)
    }

    /// Hands the stored copies (with their indexes) of evaluations just committed to the
    /// broker.
    pub(crate) fn enqueue_stored(&self, ids: &[String]) {
        for id in ids {
            if let Some(stored) = self.state.eval(id) {
                self.enqueue_when_due((*stored).clone());
            }
        }
    }

    /// Enqueues an evaluation now, after its `Wait` (counted from now, as Nomad's broker counts
    /// it from the enqueue, also when a new leader restores it), or at its `WaitUntil` when that
    /// lies in the future. `Wait` takes precedence, as in Nomad.
    pub(crate) fn enqueue_when_due(&self, eval: Evaluation) {
        let delay = if eval.wait.as_nanos() > 0 {
            eval.wait.to_std()
        } else {
            let wait_until = eval.wait_until.unix_nanos().unwrap_or(0);
            let now = self.clock.now_unix_ns();
            Duration::from_nanos(u64::try_from(wait_until.saturating_sub(now)).unwrap_or(0))
        };
        if delay.is_zero() {
            self.broker.enqueue(eval);
            return;
        }
        let shutdown = self.term_token();
        let broker = self.broker.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = shutdown.cancelled() => {}
                () = tokio::time::sleep(delay) => broker.enqueue(eval),
            }
        });
    }

    /// Marks superseded evaluations canceled.
    pub(crate) async fn cancel_superseded(&self, superseded: Vec<Evaluation>) {
        if superseded.is_empty() {
            return;
        }
        let canceled = superseded.into_iter().map(self::superseded).collect();
        if let Err(error) = self.store_evals(canceled).await {
            tracing::error!(%error, "could not cancel superseded evaluations");
        }
    }

    /// Capacity may have grown: retry every blocked evaluation. It keeps its `blocked` status
    /// while it is retried, so a pass that still cannot place parks it again rather than
    /// making another one.
    async fn capacity_changed(&self) {
        for eval in self.blocked.unblock_all() {
            self.broker.enqueue(eval);
        }
    }

    /// A node-update evaluation for every job with a live allocation on the node, to commit
    /// with the node's change.
    fn node_evals(&self, node_id: &str) -> Vec<Evaluation> {
        let mut jobs = BTreeSet::new();
        for alloc in self.state.allocs_by_node(node_id) {
            if !alloc.terminal_status() {
                jobs.insert((alloc.namespace.clone(), alloc.job_id.clone()));
            }
        }
        let mut evals = Vec::new();
        for (namespace, job_id) in jobs {
            if let Some(job) = self.state.job(&namespace, &job_id) {
                let mut eval = self.new_eval(&job, EVAL_TRIGGER_NODE_UPDATE, job.job_modify_index);
                eval.node_id = node_id.to_owned();
                evals.push(eval);
            }
        }
        evals
    }

    /// A node missed its heartbeat deadline. While it holds an allocation whose group waits
    /// for a disconnected client (`disconnect { lost_after }` / `max_client_disconnect`) that
    /// should run and has not been `unknown` for its whole `lost_after`, it is marked
    /// `disconnected` and timed again (Nomad's `disconnectState`); otherwise it is marked down
    /// and the scheduler replaces its allocations (they become lost).
    async fn node_missed_heartbeat(&self, node_id: &str) -> Result<(), ServerError> {
        self.heartbeats.clear(node_id);
        let Some(node) = self.state.node(node_id) else {
            return Ok(());
        };
        if node.status == NODE_STATUS_DOWN {
            return Ok(());
        }
        let now = self.clock.now_unix_ns();
        // A node still initializing after a disconnection goes down (Nomad's
        // `disconnectState`).
        let initializing = node.status == NODE_STATUS_INITIALIZING;
        let waits_for_reconnect = !initializing
            && self.state.allocs_by_node(node_id).iter().any(|alloc| {
                alloc.disconnect_lost_after_nanos() > 0
                    && alloc.desired_status == drover_structs::ALLOC_DESIRED_STATUS_RUN
                    && !alloc.disconnect_expired(now)
            });
        if waits_for_reconnect {
            self.heartbeats.reset(node_id);
            if node.status == NODE_STATUS_DISCONNECTED {
                return Ok(());
            }
            tracing::warn!(
                node_id,
                "node missed its heartbeat; marking it disconnected"
            );
            return self
                .mark_node_with_evals(node_id, NODE_STATUS_DISCONNECTED, now)
                .await;
        }
        tracing::warn!(node_id, "node missed its heartbeat; marking it down");
        self.mark_node_with_evals(node_id, NODE_STATUS_DOWN, now)
            .await
    }

    /// Sets a node's status and creates its evaluations in one write: a leader that dies
    /// after it leaves a down node with the evaluations that replace its allocations (a new
    /// leader times no down node, so nothing else would).
    async fn mark_node_with_evals(
        &self,
        node_id: &str,
        status: &str,
        now: i64,
    ) -> Result<(), ServerError> {
        let evals = self.node_evals(node_id);
        let eval_ids = eval_ids(&evals);
        self.state
            .update_node_status_with_evals(node_id, status, evals, now)
            .await?;
        self.enqueue_stored(&eval_ids);
        Ok(())
    }
}

/// Nomad's namespace admission check of a registered or planned job: the namespace must
/// exist and allow the job's task drivers and group network modes. Nomad answers a failed
/// check as an RPC error (HTTP 500) in its multi-error form; the text is Nomad's, the status
/// 400 (the job is what is wrong).
pub(crate) fn check_job_namespace(state: &StateStore, job: &Job) -> Result<(), ServerError> {
    let problem = match state.namespace(&job.namespace) {
        None => Some(format!(
            "job {:?} is in nonexistent namespace {:?}",
            job.id, job.namespace
        )),
        Some(namespace) => namespace.check_job(job).err(),
    };
    match problem {
        None => Ok(()),
        Some(problem) => Err(ServerError::BadRequest(format!(
            "1 error occurred:\n\t* {problem}\n\n"
        ))),
    }
}

/// Whether a re-registering node offers the scheduler something else than its stored record:
/// drivers (detected, healthy, attributes), attributes, resources, class, meta or host volumes.
/// Nomad's `updatePreservedValues`: with `counts`, each group the stored job has keeps its
/// count; with `resources`, each task it has keeps its resources.
fn preserve_values(job: &mut Job, stored: &Job, counts: bool, resources: bool) {
    for group in &mut job.task_groups {
        let Some(previous) = stored.lookup_task_group(&group.name) else {
            continue;
        };
        if counts {
            group.count = previous.count;
        }
        if resources {
            for task in &mut group.tasks {
                if let Some(previous) = previous.tasks.iter().find(|old| old.name == task.name) {
                    task.resources.clone_from(&previous.resources);
                }
            }
        }
    }
}

/// Nomad's submission controller warning, sizes as go-humanize's `Bytes` writes them.
fn oversized_submission_warning(size: usize, limit: usize) -> String {
    format!(
        "job source size of {} exceeds maximum of {} and will be discarded",
        humanize_bytes(size as u64),
        humanize_bytes(limit as u64)
    )
}

/// go-humanize's `Bytes`: SI units (powers of 1000), one decimal below 10, none from 10 on
/// (`1.0 MB`, `12 kB`, `7 B`).
pub fn humanize_bytes(bytes: u64) -> String {
    const UNITS: [&str; 7] = ["B", "kB", "MB", "GB", "TB", "PB", "EB"];
    if bytes < 10 {
        return format!("{bytes} B");
    }
    let value = bytes as f64;
    let exponent = (value.ln() / 1000_f64.ln()).floor().clamp(0.0, 6.0);
    let scaled = (value / 1000_f64.powf(exponent) * 10.0 + 0.5).floor() / 10.0;
    let unit = UNITS[exponent as usize];
    if scaled < 10.0 {
        format!("{scaled:.1} {unit}")
    } else {
        format!("{scaled:.0} {unit}")
    }
}

fn offers_differ(stored: &Node, registering: &Node) -> bool {
    let drivers = |node: &Node| {
        node.drivers
            .iter()
            .map(|(name, info)| {
                (
                    name.clone(),
                    info.detected,
                    info.healthy,
                    info.attributes.clone(),
                )
            })
            .collect::<Vec<_>>()
    };
    drivers(stored) != drivers(registering)
        || stored.attributes != registering.attributes
        || stored.node_resources != registering.node_resources
        || stored.reserved_resources != registering.reserved_resources
        || stored.node_class != registering.node_class
        || stored.meta != registering.meta
        || stored.host_volumes != registering.host_volumes
}
