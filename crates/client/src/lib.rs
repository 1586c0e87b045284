//! The client (node agent).
//!
//! Per allocation (this part): [`allocrunner::AllocRunner`] runs an allocation's task runners
//! in lifecycle order and reports through [`allocrunner::AllocStatusSink`];
//! [`taskrunner::TaskRunner`] drives one task (state machine, hook pipeline, restart tracker,
//! kill) against a [`taskrunner::driver::TaskDriver`]; [`allocdir`] lays out alloc dirs;
//! [`taskenv`] builds task environments; [`network`] sets up group networks (a namespace per
//! allocation, through the CNI plugins); [`state_db`] persists what restore needs; [`clock`]
//! gives wall-clock time (durations use tokio time).
//!
//! Per node (the other part): [`node::Client`] registers and heartbeats, runs the alloc watcher
//! that creates, updates and destroys alloc runners, restores them on start and answers the API's
//! alloc operations; [`server_conn::ServerConn`] is the client↔server trait;
//! [`status_buffer`] batches status updates; [`fingerprint`] describes the machine;
//! [`runner_factory`] puts the real alloc runner behind the node's small runner interface, and
//! `node_sim` a simulated one (plus an in-memory server) for tests and fleet benchmarks (feature
//! `testing`, with the fake `mock_driver`; neither is in the agent a user runs);
//! [`services`] turns task and group `service` blocks into catalog registrations.
//!
//! **Boundary**: talks to the server only through the client↔server trait; knows no HTTP routes.
//!
//! # Layers
//!
//! Each module directly under `src/` uses only modules on the lines below its own (`error`
//! modules aside), as `crates/structs/tests/module_cycles.rs` checks; top first:
//!
//! - `runner_factory`
//! - `node_sim`
//! - `node`
//! - `fingerprint`, `status_buffer`
//! - `allocrunner`
//! - `checks`, `testing`
//! - `taskrunner`
//! - `config`
//! - `artifact`, `services`
//! - `taskenv`
//! - `allocdir`, `http_conn`, `identity`, `network`
//! - `clock`, `error_text`, `host_stats`, `mountinfo`, `mutex`, `server_conn`, `state_db`,
//!   `task_metrics`, `template`, `testing_grpc`, `testing_tls`
//!
//! # Design notes
//!
//! The node agent. Per node: `node::Client`, one concern per module under
//! `node/` (`client`: state, start with restore, shutdown; `heartbeat`: registration and
//! heartbeats; `heartbeat_stop`: allocations whose group has `stop_on_client_after` destroyed
//! once no server has answered for that long, on tokio time; `watcher`: the alloc watcher; `gc`: terminal allocations collected on request,
//! past `gc_max_allocs`, and every `gc_interval` while the alloc dir's filesystem is past
//! `gc_disk_usage_threshold`/`gc_inode_usage_threshold`, at most `gc_parallel_destroys` at
//! once; `operations`: the API's alloc operations;
//! `identity`: node ID, secret and the fingerprinted node record (with, as Nomad's
//! `NodeResources.Networks`, the interface of the advertised address and its link speed, which
//! task-level network asks are placed on); `meta` and `meta_store`:
//! dynamic node metadata — the configuration's `meta` with what `/v1/client/metadata` applied
//! laid over it, persisted in `<client state dir>/node-meta.json` before the apply is answered,
//! then registered at once; `config`; `runner`: the runner/factory seam),
//! `status_buffer` (one latest entry per alloc; a changed ClientStatus or newly decided
//! deployment health goes out after a 20 ms
//! coalescing window, anything else on every fifth 200 ms tick), `server_conn::ServerConn` (the client↔server
//! trait: node register, heartbeat, allocation watch and fetch, status updates, service
//! registrations), `http_conn::HttpServerConn` (that trait over HTTP to a list of servers, with
//! timeouts and error mapping; each call starts at the server that answered last and moves on
//! when one does not answer or answers 5xx, logging the move; each registered node's calls carry its secret ID), `node_sim` (a minimal runner for fleet simulation, in process
//! or over HTTP, with an in-memory server; feature `testing` only). Per allocation: `allocrunner`
//! (lifecycle coordinator and operations; an allocation the server marked `unknown` while the
//! node was unreachable records "Reconnected" on its tasks and reports again; `upstream`: a
//! replacement's wait for the allocation it replaces — the coordinator holds every gate shut
//! until it is terminal, read from the node's `LocalAllocs` registry of live runners or, when
//! it is not here, from the servers (`AllocReader` over `ServerConn::get_allocs`, polled; an
//! allocation the servers do not know is not waited for); a restored runner waits again only
//! if none of its tasks had started; then a sticky disk's data is moved over from a previous
//! allocation of this node (renamed between parent descriptors opened through no symlink, what
//! arrived checked to be a directory; a move that fails is a "Task Setup" event and the tasks
//! start without it); `snapshot`: the tar stream of an allocation's `alloc/data` and tasks' `local/`
//! and its hostile-archive-safe unpack (through the artifact unpacker's `BeneathDir`), the
//! pieces of `ephemeral_disk { migrate }` across nodes, which is not served or fetched yet and
//! stays refused; `group_services`: the group's services, registered
//! while its tasks run, again after any task restart, and deregistered before the group's
//! `shutdown_delay`; `health`: a service allocation's deployment health — its deployment's
//! `update` block, else its `migrate` block — from task states and, with `health_check =
//! "checks"`, its check results, on tokio time, persisted under `<alloc>/health` before it is
//! reported as `DeploymentStatus`; a new `DeploymentID` clears it), `checks` (the alloc-level checks hook: an observer
//! per service check, armed while its task runs and re-armed after each restart; `http`, `tcp`
//! and `script` probes, a script running through the same `drover-shim exec` path as
//! `alloc exec` via `TaskExecContext::exec_spec`; Consul's status counters and the
//! `check_restart` watch as pure state machines on tokio time; `check_restart` restarts through
//! `TaskRunner::restart` counting against the policy; results persisted relaxed under
//! `<alloc>/checks` in `state_db` when a status changes, and restored as the starting point),
//! `identity` (`IdentitySigner`: the object-safe seam over `ServerConn::sign_identities`, with
//! the node's ID and secret),
//! `taskrunner` (state machine, hook pipeline, restart tracker, kill; its `identity` hook has
//! the task's identities signed — only for tasks with an `identity` block — and delivers them
//! as Nomad (`NOMAD_TOKEN` / `secrets/nomad_token`, `NOMAD_TOKEN_<name>` /
//! `secrets/nomad_<name>.jwt`, `filepath`, `NOMAD_UNIX_ADDR`), keeps them in its hook state so
//! a restart or restore reuses a good token, and renews `ttl` identities once half the TTL is
//! spent (client clock for now, tokio time for the wait), applying `change_mode` and writing
//! the renewed tokens back to its state (`TaskLifecycleRequests::persist_hook_state`); token
//! files are written as Nomad's `users.WriteFileFor` (0600 owned by the task's `user`, else
//! readable by all); its `api`
//! hook binds `secrets/api.sock` for every task and hands it to the agent's task API server
//! (soft-failing as Nomad); its `template` hook
//! renders templates before start, adds `env = true` variables, and polls templates that read
//! files (`file`, `source`; not `once` ones) every 250 ms on tokio time, applying `change_mode`
//! noop / restart / signal / script after `splay` (`change_script` runs inside the task through
//! the shim's exec path, as script checks; with `run_on_first_render` also from the hook's
//! poststart after the first render); after the first render, `wait { min max }` (within
//! the client's `template { wait_bounds }`, else the client's `template { wait }`, 5 s / 4 min
//! by default) holds a changed output until it settles, as consul-template's quiescence;
//! `nomadVar*` and `nomadService(s)` read the servers with the task's identity
//! (`ServerConn::read_variable`, `list_variables`, `read_service`, `list_services`, each a
//! blocking query with `server_conn::Blocking`), and while the task runs each read is a view:
//! a blocking query at its last index (`block_query_wait`) whose changed answer wakes the
//! render loop; the `services` hook registers a task's services after start — and after a re-attach — and
//! deregisters them before the task's `shutdown_delay`, on exit and on stop), `services` (a
//! workload's `service` blocks → interpolated `ServiceRegistration`s, and `ServiceSync`: one
//! workload's registrations sent through the object-safe `ServiceRegistrar` over `ServerConn`,
//! retried with backoff while no server answers; providers `nomad` and `consul` both land in
//! the built-in catalog), `template` (one render with consul-template's functions; `beneath`:
//! every template path read or written through `openat2` `RESOLVE_BENEATH |
//! RESOLVE_NO_MAGICLINKS` under the task dir, writes atomic), `allocdir` (a layout directory found to be a symlink or not a directory — a task can write
//! its own task dir, a raw_exec task any — is refused, never chmodded or mounted through; the
//! secrets tmpfs is detached once the allocation is terminal
//! with every task dead, before its dir is destroyed, and at restore for every mount under the
//! alloc root of an allocation that is gone; `mountinfo` parses the mount table for it and
//! the fingerprint), `taskenv`, `taskrunner::hooks::volumes` (a task's `volume_mount`s resolved against the
//! group's host volumes and the client's `host_volume` config into the driver's `mounts`;
//! exec and docker bind them, any other driver fails the task as Nomad), `state_db` (the client's redb file, with group
//! commit: writers that arrive together share one transaction and one fsync, and a durable
//! write returns only once it is on disk; hook state and events are written relaxed and ride
//! along with the next durable commit). The task runner
//! reaches drivers through its own small `TaskDriver` seam; `taskrunner::drivers` adapts
//! `drover-driver`'s drivers to it. **Boundary**: reaches the server only through `ServerConn`;
//! knows no HTTP routes outside `http_conn`, which sends the bodies of `structs::client_rpc`
//! that the server's handlers decode. **Invariant**: a transition is persisted before it is acted on or
//! reported (the shim handle before `Started`, a kill intent before the kill).
//! **Artifacts** (`artifact`, run by the prestart hook `taskrunner::hooks::artifact`, after the
//! dispatch payload hook): `source` interpolates an `artifact` block and picks the getter
//! (http through the workspace's `reqwest`, local files, `git` through the system binary with
//! `ext::` transports off and `sshkey` handed to its ssh as a 0600 key file; `s3`, `gcs` and
//! `hg` fail naming what is missing; `URL//subdir` places only that subdirectory of the fetched
//! tree, unpacked aside first for an archive; `checksum = "file:…"` reads the digest from a
//! checksum file); `fetch` goes through the node's cache `<data>/client/artifacts/<sha256 key>`
//! (key: getter, URL, headers and the checksum — or, without a checksum, the job's namespace,
//! ID and version), one download per key at a time (a process-wide single-flight lock per
//! entry), written under `.partial/` and renamed in only once complete and checksummed, so a
//! killed agent leaves nothing half-cached; `cache` removes entries unused past
//! `cache_max_age` (default 72 h) and, past `cache_max_size`, the least recently used, never
//! one a fetch holds (the entry lock is a read-write lock: download under write, placement
//! under read); `checksum` (md5/sha1/sha256/sha512, a mismatch
//! names both digests) runs before any unpacking; `archive` unpacks tar/tgz/tbz2/txz/zip
//! trees and gz/bz2/xz files; `beneath` is the only writer; `error` is the one error enum. With `chown = true` the hook
//! gives what was placed to the task's user (as root, following no symlink). The hook records each fetched
//! artifact and `done` in its state: a restart or restore fetches nothing again. A fetch
//! failure emits "Failed Artifact Download" (the hook error carries its own event) and is
//! recoverable; a block the client cannot use is not. **Invariant**: nothing an artifact
//! brings is written outside its destination: names with `..` or a leading `/` are refused,
//! every write is resolved beneath a descriptor of the destination with `openat2`
//! (`RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`), symlinks may only climb (leading `..`) as high
//! as the destination before descending, hard links must name a regular file already written
//! beneath it, and bytes and entries are counted as they are decompressed against
//! `decompression_size_limit` / `decompression_file_count_limit` (the error names the
//! entry). The crates, all pure Rust: `tar` (no default features), `flate2` on the `zlib-rs`
//! backend, `zip` with only `deflate-flate2-zlib-rs` (no encryption, zstd, lzma or time),
//! `bzip2` 0.6 (its default backend is the Rust port `libbz2-rs-sys`, no C), `lzma-rust2`
//! with only `std` + `xz` for .xz (`xz2` is C and unmaintained), and RustCrypto's `sha2`,
//! `sha1`, `md-5` of the 0.11 generation (the one `lzma-rust2` already pulls in).

pub mod allocdir;
pub mod allocrunner;
pub mod artifact;
pub mod checks;
pub mod clock;
pub mod config;
pub(crate) mod error_text;
pub mod fingerprint;
pub mod host_stats;
pub mod http_conn;
pub mod identity;
pub(crate) mod mountinfo;
mod mutex;
pub mod network;
pub mod node;
#[cfg(any(test, feature = "testing"))]
pub mod node_sim;
pub mod runner_factory;
pub mod server_conn;
pub mod services;
pub mod state_db;
pub mod status_buffer;
pub mod task_metrics;
pub mod taskenv;
pub mod taskrunner;
pub mod template;
#[cfg(test)]
mod testing;
#[cfg(any(test, feature = "testing"))]
#[allow(clippy::expect_used)] // a test fixture: a failed bind is a failed test
pub mod testing_grpc;
#[cfg(test)]
mod testing_tls;

pub use allocrunner::{
    AllocClientUpdate, AllocRunner, AllocRunnerDeps, AllocRunnerError, AllocStatusSink,
};
pub use clock::{Clock, SharedClock, SystemClock, TokioFollowingClock};
pub use config::ClientConfig;
pub use state_db::{StateDb, StateDbError};
