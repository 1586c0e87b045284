//! Linux isolation primitives: cgroups v1 and v2, namespaces, the task root (bind mounts,
//! `/dev`, `/proc`, `/sys`, pivot_root), capabilities and `no_new_privs`. Used by the shim in
//! its forked, single-threaded child before exec.
//!
//! **Boundary**: mechanisms only, no policy about tasks or allocations. The order in which the
//! shim applies them, and why, is in `drover_driver::exec` ("The order of isolation"). `malloc` holds the
//! one knob of drover's own process: the C allocator's arena limit. `beneath` resolves a path
//! beneath a root in one step and pins it (the mount sources and targets the client and the
//! drivers hand on).
//!
//! # Layers
//!
//! Each module directly under `src/` uses only modules on the lines below its own (`error`
//! modules aside), as `crates/structs/tests/module_cycles.rs` checks; top first:
//!
//! - `rootfs`
//! - `beneath`, `cgroup`
//! - `caps`, `exe_pages`, `malloc`, `namespaces`, `root_tests`
//!
//! # Design notes
//!
//! Cgroups v1/v2 (kernel behind a root-path seam; cpusets and the shared-cpu
//! re-balance for reserved cores), namespaces, mounts, capabilities; `malloc`, the one knob of
//! drover's own process (two glibc arenas for the agent); `root_tests`, the rule every
//! root-only test follows (skip with a reason, or fail under `CI=true`); `beneath`, the one
//! kernel-side path resolution for what is handed on (`openat2` `RESOLVE_BENEATH |
//! RESOLVE_NO_MAGICLINKS` from a descriptor of the root, the `O_PATH` result used through
//! `/proc/self/fd/<n>` or staged as a private bind mount for the docker engine). **Boundary**:
//! mechanisms only.

pub mod beneath;
pub mod caps;
pub mod cgroup;
mod error;
pub mod exe_pages;
pub mod malloc;
pub mod namespaces;
pub mod root_tests;
pub mod rootfs;

pub use caps::{CapabilitySet, DEFAULT_CAPABILITIES};
pub use cgroup::{
    CgroupCpuStats, CgroupError, CgroupLimits, CgroupMemoryStats, CgroupMode, RESERVED_CPUS_DIR,
    TaskCgroup, detect_mode, format_cpu_list, parse_cpu_list, rebalance_shared_cpus, shared_cpus,
};
pub use error::IsolationError;
pub use namespaces::{
    NamespaceSet, PidNamespaceForNextChild, is_valid_hostname, join_network_namespace,
    set_hostname, unshare_namespaces,
};
pub use rootfs::{BindMount, TaskRoot, enter_task_root};
