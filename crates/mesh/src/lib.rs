//! drover's service mesh without Consul: the mesh CA (`ca`: roots derived from the keyring's
//! root keys, short-lived leaf certificates), SPIFFE identities (`spiffe`), intentions
//! (`intentions`: Consul's shape and precedence), the TLS both sides of a sidecar speak
//! (`tls`), and the Connect sidecar proxy itself (`proxy`, run by
//! `drover connect-proxy -config <path>`), which reaches its agent through `agent_client`.
//!
//! # Layers
//!
//! Each module directly under `src/` uses only modules on the lines below its own (`error`
//! modules aside); top first:
//!
//! - `proxy`
//! - `agent_client`
//! - `tls`
//! - `ca`, `intentions`
//! - `spiffe`
//!
//! **Boundary**: no HTTP server, no state store, no keyring: the agent serves the routes and
//! hands the CA its root keys' derived secrets; the proxy only calls the agent's API.

pub mod agent_client;
pub mod ca;
pub mod error;
pub mod intentions;
pub mod proxy;
pub mod spiffe;
pub mod tls;

pub use error::MeshError;
