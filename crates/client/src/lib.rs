//! The client (node agent): alloc runners, task runners and their hook pipeline, the restart
//! tracker, alloc dirs and task environments, persisted client state and its restore, and batched
//! status updates to the server.
//!
//! **Boundary**: talks to the server only through the client↔server trait; knows no HTTP routes.

pub mod fingerprint;
pub mod server_conn;
pub mod status_buffer;
