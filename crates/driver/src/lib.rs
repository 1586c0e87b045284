//! Task drivers: the [`Driver`] trait and the `raw_exec` and `exec` drivers, which launch each
//! task under its own `drover-shim` and re-attach to it later.
//!
//! **Boundary**: knows tasks and processes, never allocations or the server.
