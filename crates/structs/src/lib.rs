//! Nomad-compatible data model: jobs, groups, tasks, allocations, task states and events,
//! evaluations and nodes, with the exact JSON wire shapes Nomad speaks (PascalCase keys, durations
//! as integer nanoseconds, event times as Unix nanoseconds).
//!
//! **Boundary**: pure data and pure functions over it. No I/O, no clocks, no randomness: callers
//! pass times and IDs in.
//!
//! Decoding is lenient like Go's `encoding/json` (absent or `null` fields take their zero value,
//! unknown keys are ignored); [`lenient::from_value_ignoring_key_case`] also matches keys
//! case-insensitively, for request bodies. Encoding writes every field with Nomad's key; empty
//! lists and maps inside objects are written as `[]`/`{}` (Nomad writes `null` for nil ones; Go
//! clients read both the same).
//!
//! Where things are:
//! - [`job`]: `Job`, `TaskGroup`, `Task` and their blocks; [`job_blocks`]: the blocks naming
//!   integrations (volumes, Vault, Consul, CSI, scaling, devices, multiregion, ...);
//!   [`canonicalize`]: the API's defaults.
//! - [`alloc`]: `Allocation`, `AllocListStub`, `AllocatedResources`, `AllocMetric`.
//! - [`task_state`]: `TaskState`, `TaskEvent`, event type strings, display messages,
//!   `derive_client_status`.
//! - [`deployment`]: `Deployment` and its per-group `DeploymentState`.
//! - [`job_submission`]: the jobspec source a job version was registered from.
//! - [`node_meta`]: dynamic node metadata (`/v1/client/metadata`).
//! - [`eval`], [`node`], [`job_summary`] (also `JobListStub` and `derive_job_status`).
//! - [`requests`]: request and response bodies; [`resource_usage`]: alloc stats; [`fs`]: file
//!   info and stream frames; [`exec`]: the messages of an `alloc exec` session.
//! - [`time`]: `Timestamp` (RFC 3339) and `DurationNs` (Go durations); [`bytes`]: base64 `[]byte`.
//! - [`service_registration`]: the built-in catalog's `ServiceRegistration` and the address
//!   a service advertises.
//! - [`scaling`]: scale requests, scaling events, the scale status.
//! - [`ids`]: `AllocId` and `TaskName`, validated before any path is built from them.
//!
//! # Layers
//!
//! Each module directly under `src/` uses only modules on the lines below its own (`error`
//! modules aside), as `crates/structs/tests/module_cycles.rs` checks; top first:
//!
//! - `client_rpc`, `requests`, `service_catalog`
//! - `disconnect`, `eval`, `service_registration`
//! - `alloc`, `canonicalize`, `checks`, `connect`, `deployment`, `job_diff`, `job_summary`,
//!   `namespace`, `node`
//! - `job`, `scaling`
//! - `acl`, `acl_sso`, `fs`, `job_blocks`, `task_state`, `variables`
//! - `job_submission`, `keyring`, `node_meta`, `node_pool`, `placement`, `resource_usage`, `time`
//! - `bytes`, `exec`, `go_duration`, `ids`, `intention`, `lenient`, `mesh`, `version`
//!
//! # Design notes
//!
//! The data model with Nomad's JSON wire shapes (PascalCase, durations in
//! nanoseconds, event times in Unix nanoseconds, `time.Time` as RFC3339); the blocks that name
//! integrations (volumes, Vault, Consul, CSI, scaling, devices, multiregion) in `job_blocks`;
//! constraints and affinities, which both hold, in `placement`; Nomad's
//! `ServiceRegistration` and address rules in `service_registration`, the catalog's list
//! stubs and `choose` (rendezvous hashing over SHA-256, as Nomad ranks) in `service_catalog`.
//! Request bodies are read as Go reads Nomad's pointer fields (`lenient`: keys
//! case-insensitive, a `null` field is an absent one, so the Nomad CLI's `"Count": null` is a
//! count of 1). Canonicalization (API defaults, per job type, as Nomad's agent applies them on
//! every write path; a job's `Update` is laid under each group's own on the JSON before
//! decoding, field by field, as Nomad merges them), the legacy `Resources`/`TaskResources`/`SharedResources` of an
//! allocation and `Resources`/`Reserved` of a node that older CLIs read, task event
//! construction and display messages, alloc status derivation and
//! which fields of an allocation a client's report owns (`merge_client_update`); the
//! bodies of the client↔server calls over HTTP (`client_rpc`); the version and semver
//! constraint rules (`version`), shared by the scheduler and the jobspec's validation;
//! `job_diff`, Nomad's `JobDiff` between two job versions (its rules for which fields and
//! blocks are compared, over the job's wire JSON), for `job plan` and `versions?diffs=true`,
//! checked against Nomad 1.1.2's answers (`tests/job_diff_nomad.rs`). An allocation's job is an
//! `Arc<Job>`: the allocations of one job version share one copy (on the wire it is the job
//! itself).
//! **Boundary**: no I/O, no clocks, no randomness.

pub mod acl;
pub mod acl_sso;
pub mod alloc;
pub mod bytes;
pub mod canonicalize;
pub mod checks;
pub mod client_rpc;
pub mod connect;
pub mod deployment;
pub mod disconnect;
pub mod eval;
pub mod exec;
pub mod fs;
pub mod go_duration;
pub mod ids;
pub mod intention;
pub mod job;
pub mod job_blocks;
pub mod job_diff;
pub mod job_submission;
pub mod job_summary;
pub mod keyring;
pub mod lenient;
pub mod mesh;
pub mod namespace;
pub mod node;
pub mod node_meta;
pub mod node_pool;
pub mod placement;
pub mod requests;
pub mod resource_usage;
pub mod scaling;
pub mod service_catalog;
pub mod service_registration;
pub mod task_state;
pub mod time;
pub mod variables;
pub mod version;

pub use alloc::*;
pub use bytes::Bytes;
pub use checks::{CheckQueryResult, check_id, check_mode};
pub use deployment::*;
pub use eval::*;
pub use fs::*;
pub use go_duration::{DurationError, parse_go_duration};
pub use ids::{AllocId, IdError, MAX_TASK_NAME_BYTES, TaskName};
pub use job::*;
pub use job_blocks::*;
pub use job_submission::JobSubmission;
pub use job_summary::*;
pub use keyring::{RootKeyMeta, WrappedRootKey};
pub use node::*;
pub use node_pool::*;
pub use requests::*;
pub use resource_usage::*;
pub use scaling::*;
pub use service_catalog::{ServiceRegistrationListStub, ServiceRegistrationStub};
pub use service_registration::ServiceRegistration;
pub use task_state::*;
pub use time::{DurationNs, TimeParseError, Timestamp};
pub use variables::{Variable, VariableEncrypted, VariableMetadata};
