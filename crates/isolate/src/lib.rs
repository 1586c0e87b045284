//! Linux isolation primitives: cgroups v1 and v2, namespaces, mounts and the task root,
//! capabilities, `no_new_privs`. Used by the shim in the forked child before exec.
//!
//! **Boundary**: mechanisms only, no policy about tasks or allocations.
//!
//! Today only [`cgroup`] exists. Namespaces, the task root (pivot_root/chroot with a read-only
//! chroot env), masked `/proc` paths, capabilities and `no_new_privs` for the `exec` driver are
//! not written yet; they will live in their own modules here, called by the shim's child after
//! it has joined its cgroup and before exec.

pub mod cgroup;

pub use cgroup::{
    CgroupCpuStats, CgroupError, CgroupLimits, CgroupMemoryStats, CgroupMode, TaskCgroup,
    detect_mode,
};
