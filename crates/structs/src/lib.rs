//! Nomad-compatible data model: jobs, groups, tasks, allocations, task states and events,
//! evaluations and nodes, with the exact JSON wire shapes Nomad speaks (PascalCase keys, durations
//! as integer nanoseconds, event times as Unix nanoseconds).
//!
//! **Boundary**: pure data and pure functions over it. No I/O, no clocks, no randomness: callers
//! pass times and IDs in.
