//! The scheduler: pure functions from (snapshot, evaluation, seed) to a plan. Reconcile desired
//! against existing allocations, check feasibility, rank nodes by bin-packing.
//!
//! **Invariant**: deterministic, no I/O, no clocks; only the server's plan applier writes.

pub mod ids;
pub mod names;
pub mod rng;
pub mod version;
