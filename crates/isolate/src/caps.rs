//! Linux capabilities of a task: names ↔ numbers, the container-runtime default set, and the
//! calls that cut a process down to a set (bounding set, then effective/permitted/inheritable
//! and ambient, so a non-root task keeps exactly that set across `execve`). Also `no_new_privs`.
//!
//! Not for: deciding a task's set (the exec driver computes it from `cap_add`/`cap_drop` and the
//! client's `allow_caps`); this only applies a bit mask.

// The calls go through rustix's safe wrappers of prctl and capset.

use nix::errno::Errno;
use rustix::thread::{self as thread_caps, CapabilitySet as KernelCapabilitySet, CapabilitySets};

use crate::error::{IsolationError, syscall};

/// Capability names in kernel order (`CAP_CHOWN` is 0); the index is the capability number.
pub const CAPABILITY_NAMES: [&str; 41] = [
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_DAC_READ_SEARCH",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETPCAP",
    "CAP_LINUX_IMMUTABLE",
    "CAP_NET_BIND_SERVICE",
    "CAP_NET_BROADCAST",
    "CAP_NET_ADMIN",
    "CAP_NET_RAW",
    "CAP_IPC_LOCK",
    "CAP_IPC_OWNER",
    "CAP_SYS_MODULE",
    "CAP_SYS_RAWIO",
    "CAP_SYS_CHROOT",
    "CAP_SYS_PTRACE",
    "CAP_SYS_PACCT",
    "CAP_SYS_ADMIN",
    "CAP_SYS_BOOT",
    "CAP_SYS_NICE",
    "CAP_SYS_RESOURCE",
    "CAP_SYS_TIME",
    "CAP_SYS_TTY_CONFIG",
    "CAP_MKNOD",
    "CAP_LEASE",
    "CAP_AUDIT_WRITE",
    "CAP_AUDIT_CONTROL",
    "CAP_SETFCAP",
    "CAP_MAC_OVERRIDE",
    "CAP_MAC_ADMIN",
    "CAP_SYSLOG",
    "CAP_WAKE_ALARM",
    "CAP_BLOCK_SUSPEND",
    "CAP_AUDIT_READ",
    "CAP_PERFMON",
    "CAP_BPF",
    "CAP_CHECKPOINT_RESTORE",
];

/// The default set of container runtimes (and of Nomad's exec driver).
pub const DEFAULT_CAPABILITIES: [&str; 14] = [
    "CAP_AUDIT_WRITE",
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_MKNOD",
    "CAP_NET_BIND_SERVICE",
    "CAP_NET_RAW",
    "CAP_SETFCAP",
    "CAP_SETGID",
    "CAP_SETPCAP",
    "CAP_SETUID",
    "CAP_SYS_CHROOT",
];

/// A set of capabilities as the kernel's bit mask (bit n = capability n).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CapabilitySet(pub u64);

impl CapabilitySet {
    /// Every capability this table knows.
    pub fn all() -> Self {
        Self((1u64 << CAPABILITY_NAMES.len()) - 1)
    }

    /// Parses names as Nomad accepts them: `net_raw`, `NET_RAW` or `CAP_NET_RAW`; `all` is every
    /// capability.
    pub fn from_names<S: AsRef<str>>(names: &[S]) -> Result<Self, IsolationError> {
        let mut set = Self::default();
        for name in names {
            set = set.union(Self::from_name(name.as_ref())?);
        }
        Ok(set)
    }

    fn from_name(name: &str) -> Result<Self, IsolationError> {
        let upper = name.trim().to_ascii_uppercase();
        if upper == "ALL" {
            return Ok(Self::all());
        }
        let full = if upper.starts_with("CAP_") {
            upper
        } else {
            format!("CAP_{upper}")
        };
        CAPABILITY_NAMES
            .iter()
            .position(|known| *known == full)
            .map(|index| Self(1u64 << index))
            .ok_or_else(|| IsolationError::UnknownCapability(name.to_string()))
    }

    pub fn union(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }

    pub fn intersection(self, other: Self) -> Self {
        Self(self.0 & other.0)
    }

    pub fn without(self, other: Self) -> Self {
        Self(self.0 & !other.0)
    }

    pub fn contains(self, capability: usize) -> bool {
        capability < 64 && self.0 & (1u64 << capability) != 0
    }

    /// The names in the set, in kernel order.
    pub fn names(self) -> Vec<&'static str> {
        CAPABILITY_NAMES
            .iter()
            .enumerate()
            .filter(|(index, _)| self.contains(*index))
            .map(|(_, name)| *name)
            .collect()
    }
}

/// The kernel's error as the isolation errors carry it.
fn errno(error: rustix::io::Errno) -> Errno {
    Errno::from_raw(error.raw_os_error())
}

/// One capability, by number, as rustix takes it (any number, known to rustix or not).
fn single(capability: usize) -> KernelCapabilitySet {
    KernelCapabilitySet::from_bits_retain(1u64 << capability)
}

/// Removes every capability outside `keep` from the bounding set, so nothing (not even a
/// set-uid-root binary) can get it back. Capabilities the kernel does not know end the loop.
pub fn limit_bounding_set(keep: CapabilitySet) -> Result<(), IsolationError> {
    for capability in 0..64usize {
        if keep.contains(capability) {
            continue;
        }
        match thread_caps::remove_capability_from_bounding_set(single(capability)) {
            Ok(()) => {}
            Err(rustix::io::Errno::INVAL) => return Ok(()),
            Err(error) => {
                return Err(syscall(format!("dropping capability {capability}"))(errno(
                    error,
                )));
            }
        }
    }
    Ok(())
}

/// Keeps the permitted set through the coming `setuid` away from root (the effective set is
/// still cleared by it; [`set_process_capabilities`] restores it).
pub fn keep_capabilities_across_setuid() -> Result<(), IsolationError> {
    thread_caps::set_keep_capabilities(true)
        .map_err(|error| syscall("setting keep-capabilities")(errno(error)))
}

/// Sets the effective, permitted and inheritable sets to `set` and raises each of it in the
/// ambient set, so the program exec'd next (which has no file capabilities) runs with exactly
/// `set` whatever its uid. Must be called with `set` still in the permitted set.
pub fn set_process_capabilities(set: CapabilitySet) -> Result<(), IsolationError> {
    let kernel_set = KernelCapabilitySet::from_bits_retain(set.0);
    thread_caps::set_capabilities(
        None,
        CapabilitySets {
            effective: kernel_set,
            permitted: kernel_set,
            inheritable: kernel_set,
        },
    )
    .map_err(|error| syscall("setting capabilities")(errno(error)))?;
    thread_caps::clear_ambient_capability_set()
        .map_err(|error| syscall("clearing ambient capabilities")(errno(error)))?;
    for capability in 0..CAPABILITY_NAMES.len() {
        if !set.contains(capability) {
            continue;
        }
        match thread_caps::configure_capability_in_ambient_set(single(capability), true) {
            Ok(()) => {}
            // A capability the running kernel does not know cannot be raised; it is not held.
            Err(rustix::io::Errno::INVAL) => {}
            Err(error) => {
                return Err(syscall(format!("raising ambient capability {capability}"))(
                    errno(error),
                ));
            }
        }
    }
    Ok(())
}

/// Sets `no_new_privs`: no `execve` from here on can grant privileges (set-uid bits, file
/// capabilities).
pub fn set_no_new_privs() -> Result<(), IsolationError> {
    thread_caps::set_no_new_privs(true)
        .map_err(|error| syscall("setting no_new_privs")(errno(error)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn names_parse_in_every_nomad_spelling_and_unknown_ones_fail() {
        let set = CapabilitySet::from_names(&["net_raw", "SYS_TIME", "CAP_CHOWN"]).unwrap();
        assert_eq!(
            set.names(),
            vec!["CAP_CHOWN", "CAP_NET_RAW", "CAP_SYS_TIME"]
        );
        assert_eq!(set.0, (1 << 0) | (1 << 13) | (1 << 25));
        assert!(CapabilitySet::from_names(&["cap_flying"]).is_err());
        assert_eq!(
            CapabilitySet::from_names(&["all"]).unwrap(),
            CapabilitySet::all()
        );
    }

    #[test]
    fn the_default_set_is_the_runtime_default_mask() {
        let set = CapabilitySet::from_names(&DEFAULT_CAPABILITIES).unwrap();
        // The mask container runtimes show as CapEff for a default container.
        assert_eq!(set.0, 0x0000_0000_a804_25fb);
        assert_eq!(set.names().len(), 14);
    }
}
