//! The scheduler: pure functions from (snapshot, evaluation, seed) to a plan. Reconcile desired
//! against existing allocations, check feasibility, rank nodes by bin-packing.
//!
//! **Invariant**: deterministic, no I/O, no clocks; only the server's plan applier writes. The
//! caller passes "now" and the seed in [`SchedulerOptions`] and new IDs through an
//! [`IdSource`]; `clippy.toml` forbids clocks and OS randomness in this crate.
//!
//! Entry point: [`schedule`]`(state, eval, options, ids) -> Result<Plan, SchedulerError>` for
//! service and batch jobs. The pipeline, as in Nomad: `reconcile` (what to stop, place, update)
//! → `feasible` (constraints, drivers, distinct hosts/property) → `select` (fit CPU and memory,
//! score, pick) → `generic` (build allocations into the [`Plan`]).

pub mod constraint;
pub mod error;
pub mod feasible;
pub mod generic;
pub mod ids;
pub mod names;
pub mod plan;
pub mod reconcile;
pub mod reschedule;
pub mod rng;
pub mod select;
pub mod state;
pub mod testing;
pub mod update;
pub mod version;

pub use error::SchedulerError;
pub use generic::schedule;
pub use ids::{IdSource, PregeneratedIds, SeededIds};
pub use plan::{DesiredUpdates, Plan, PlanAnnotations, SchedulerOptions, ScoringAlgorithm};
pub use state::{InMemoryState, SchedulerState};
