//! The scheduler: pure functions from (snapshot, evaluation, seed) to a plan. Reconcile desired
//! against existing allocations, check feasibility, rank nodes by bin-packing.
//!
//! **Invariant**: deterministic, no I/O, no clocks; only the server's plan applier writes. The
//! caller passes "now" and the seed in [`SchedulerOptions`] and new IDs through an
//! [`IdSource`]; `clippy.toml` forbids clocks and OS randomness in this crate.
//!
//! Entry point: [`schedule`]`(state, eval, options, ids) -> Result<Plan, SchedulerError>` for
//! service, batch, system and sysbatch jobs. The pipeline, as in Nomad:
//! - `reconcile` (service/batch) or `system` (one per node): what to stop, place, update in
//!   place or replace; `reschedule` says when a failed allocation is replaced, `update` which
//!   job changes are destructive, `names` which indexes to use;
//! - `feasible` (drivers, constraints via `constraint` and `version`, distinct hosts and
//!   properties) → `select` (fit CPU, memory, disk and ports via `network`; score bin-pack or
//!   spread, anti-affinity, affinities, spreads; pick among the first few) → `generic` (build
//!   allocations into the [`Plan`]).
//!
//! How the server calls it: implement [`SchedulerState`] over a consistent snapshot of the
//! store, pass the evaluation, a seed, "now", and an ID source whose IDs are unique across
//! passes (UUIDs); then commit the returned plan (stops in `node_update`, new and updated
//! allocations in `node_allocation`), create `blocked_eval` and `follow_up_evals`, and store
//! [`Plan::finished_eval`]. `testing` has builders for fake clusters; [`InMemoryState`] is a
//! snapshot held in memory.
//!
//! ```
//! use drover_scheduler::testing::{JobBuilder, NodeBuilder};
//! use drover_scheduler::{InMemoryState, SchedulerOptions, SeededIds, schedule};
//!
//! let mut state = InMemoryState::new();
//! state.upsert_node(NodeBuilder::new("node-1").build());
//! let job = JobBuilder::service("web").group("frontend", 2).task("server", "raw_exec").build();
//! state.upsert_job(job.clone());
//! let eval = drover_structs::Evaluation {
//!     id: "eval-1".into(),
//!     namespace: job.namespace.clone(),
//!     job_id: job.id.clone(),
//!     r#type: job.r#type.clone(),
//!     ..Default::default()
//! };
//! let options = SchedulerOptions { seed: 1, now_unix_nanos: 1_700_000_000_000_000_000, ..Default::default() };
//! let plan = schedule(&state, &eval, &options, &mut SeededIds::new(1)).unwrap();
//! assert_eq!(plan.allocations().count(), 2);
//! assert!(plan.failed_tg_allocs.is_empty());
//! ```
//!
//! # Layers
//!
//! Each module directly under `src/` uses only modules on the lines below its own (`error`
//! modules aside), as `crates/structs/tests/module_cycles.rs` checks; top first:
//!
//! - `system`
//! - `generic`
//! - `reconcile`, `select`
//! - `feasible`, `network`, `reschedule`, `update`
//! - `ids`, `state`, `testing`
//! - `constraint`, `names`, `plan`, `rng`
//!
//! # Design notes
//!
//! Reconcile, feasibility (`feasible`: constraints, drivers, host volumes
//! — each source, with `per_alloc` the source with the allocation's `[index]`, declared by the
//! node and writable unless asked read-only, else `missing compatible host volumes`),
//! bin-packing → `Plan`; placement is `select/`:
//! `usage` (what allocations hold and nodes offer, the fit score), `cores` (reserved cores),
//! `spread` (spread scoring), `stack` (the generic stack that walks, filters and scores
//! candidates); `network`: host ports of group networks, and a task's own deprecated network
//! (ports and `mbits` on the node's fingerprinted network, as Nomad's `AssignTaskNetwork`).
//! `reconcile` rolls a group with `update { max_parallel > 0 }` out through a
//! deployment as Nomad's reconciler does (max_parallel, canaries until promotion, cancel on a
//! newer version or a stopped job, successful when all are healthy; a failed allocation of
//! the active deployment is replaced only once the deployment watcher allows it) when
//! `SchedulerOptions::deployments` is on, as the server has it; an evaluation records the
//! job's latest deployment as its `DeploymentID`. `system` rolls a system job whose job-level
//! `update` has `max_parallel` and `stagger` as Nomad up to 1.10: at most `max_parallel`
//! destructive replacements per evaluation, the rest left to a `rolling-update` evaluation
//! whose `Wait` is the stagger (the server enqueues it once the wait has passed); no
//! deployment. Disconnected clients as Nomad 1.8's
//! reconciler: an allocation of a `disconnected` node whose group has `disconnect {
//! lost_after }` (or `max_client_disconnect`) turns `unknown` with a `max-disconnect-timeout`
//! follow-up evaluation, is replaced by its reschedule policy unless `replace = false`, is lost
//! once `unknown` past `lost_after` (its `AllocStates` history, stamped with the pass's `now`),
//! and when its node is ready again is kept or stopped against its replacements as `reconcile`
//! says (`structs::disconnect` holds the history and group helpers). `system` does the same
//! per node as Nomad's node reconciler: a running allocation of a disconnected node turns
//! `unknown` and waits there (one per node, so nothing is placed elsewhere), is lost once
//! expired, and is recorded running again when its client reports it. A lost allocation whose
//! group stops it on the client (`stop_on_client_after`) is replaced only once the client
//! surely stopped it: a `failed-follow-up` evaluation at the lost time plus the delay plus the
//! longest kill timeout, and no placement for the group before then.
//! **Invariant**: pure and
//! deterministic given (snapshot, eval, seed, ids, now); no I/O, no clock reads.

pub mod constraint;
pub mod error;
pub mod feasible;
pub mod generic;
pub mod ids;
pub mod names;
pub mod network;
pub mod plan;
pub mod reconcile;
pub mod reschedule;
pub mod rng;
pub mod select;
pub mod state;
pub mod system;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod update;

pub use error::SchedulerError;
pub use generic::schedule;
pub use ids::{IdSource, PregeneratedIds, SeededIds};
pub use plan::{DesiredUpdates, Plan, PlanAnnotations, SchedulerOptions, ScoringAlgorithm};
pub use state::{InMemoryState, SchedulerState};
