//! The server: job register/deregister, evaluations and the eval broker, the scheduler worker,
//! the plan applier, node registration and heartbeats.
//!
//! **Boundary**: decides where work runs; never runs tasks itself.
