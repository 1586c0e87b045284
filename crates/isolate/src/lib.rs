//! Linux isolation primitives: cgroups v1 and v2, namespaces, the task root (bind mounts,
//! `/dev`, `/proc`, `/sys`, pivot_root), capabilities and `no_new_privs`. Used by the shim in
//! its forked, single-threaded child before exec.
//!
//! **Boundary**: mechanisms only, no policy about tasks or allocations. The order in which the
//! shim applies them, and why, is in ARCHITECTURE.md ("exec isolation"). `malloc` holds the
//! one knob of drover's own process: the C allocator's arena limit. `beneath` resolves a path
//! beneath a root in one step and pins it (the mount sources and targets the client and the
//! drivers hand on).

pub mod beneath;
pub mod caps;
pub mod cgroup;
mod error;
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
