//! The state store: typed tables (jobs, job versions, evals, allocs, nodes) with one
//! monotonically increasing modify index, blocking queries and an event stream, over a small
//! [`Kv`]-style trait with an embedded backend.
//!
//! **Boundary**: holds data and indexes, never scheduling logic.
