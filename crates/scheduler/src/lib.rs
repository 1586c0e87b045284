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
