//! Task runner.
pub mod restarts;
pub mod state;
