//! The HTTP boundary: axum routes speaking Nomad's `/v1` JSON API, and the typed Rust client the
//! CLI uses.
//!
//! **Boundary**: maps requests to commands on the server and client and back; no business logic.
