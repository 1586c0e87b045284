//! Linux isolation primitives: cgroups v1 and v2, namespaces, mounts and the task root,
//! capabilities, `no_new_privs`. Used by the shim in the forked child before exec.
//!
//! **Boundary**: mechanisms only, no policy about tasks or allocations.
