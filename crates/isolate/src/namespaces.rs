//! Linux namespaces for a task: which ones it gets ([`NamespaceSet`]), unsharing them in the
//! calling process, the pid namespace, which only applies to the children of the process
//! that unshares it ([`PidNamespaceForNextChild`]), and the host name inside a new uts
//! namespace ([`set_hostname`]), and joining a group's network namespace
//! ([`join_network_namespace`]).
//!
//! Not for: deciding which namespaces a task gets (the launch spec does), or anything done
//! inside them (see [`crate::rootfs`]).

use std::fs::File;
use std::os::fd::AsFd;

use nix::sched::{CloneFlags, setns, unshare};

use crate::error::{IsolationError, syscall};

/// The namespaces a task gets besides its pid namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NamespaceSet {
    pub mount: bool,
    pub ipc: bool,
    pub uts: bool,
    /// A new, empty network namespace (only a down loopback); `false` keeps the host's network.
    pub network: bool,
}

impl NamespaceSet {
    fn flags(self) -> CloneFlags {
        let mut flags = CloneFlags::empty();
        for (wanted, flag) in [
            (self.mount, CloneFlags::CLONE_NEWNS),
            (self.ipc, CloneFlags::CLONE_NEWIPC),
            (self.uts, CloneFlags::CLONE_NEWUTS),
            (self.network, CloneFlags::CLONE_NEWNET),
        ] {
            if wanted {
                flags |= flag;
            }
        }
        flags
    }
}

/// Moves the calling process into new namespaces of the kinds in `set`.
pub fn unshare_namespaces(set: NamespaceSet) -> Result<(), IsolationError> {
    let flags = set.flags();
    if flags.is_empty() {
        return Ok(());
    }
    unshare(flags).map_err(syscall(format!("unsharing namespaces {flags:?}")))
}

/// Moves the calling process into the network namespace `namespace` (an open namespace file,
/// such as a bind-mounted `/var/run/netns/<name>`): the group network of a task.
pub fn join_network_namespace(namespace: &File) -> Result<(), IsolationError> {
    setns(namespace.as_fd(), CloneFlags::CLONE_NEWNET)
        .map_err(syscall("joining the group's network namespace"))
}

/// The longest host name the kernel takes (`HOST_NAME_MAX`).
pub const HOSTNAME_MAX_BYTES: usize = 64;

/// Whether `name` is a host name the task may be given: 1 to 64 bytes of letters, digits, `-`
/// and `.`, not starting with `-` or `.` (RFC 1123 labels; the kernel itself would take any
/// bytes, but resolvers and shells would not).
pub fn is_valid_hostname(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= HOSTNAME_MAX_BYTES
        && !name.starts_with(['-', '.'])
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'.')
}

/// Sets the host name of the calling process's uts namespace; call it only after unsharing
/// one, or the host's own name changes.
pub fn set_hostname(name: &str) -> Result<(), IsolationError> {
    if !is_valid_hostname(name) {
        return Err(IsolationError::InvalidHostname(name.to_string()));
    }
    nix::unistd::sethostname(name).map_err(syscall(format!("setting the host name {name:?}")))
}

/// A new pid namespace for the *next child* of the calling process, which becomes its pid 1.
///
/// `unshare(CLONE_NEWPID)` leaves the caller in its own pid namespace and only changes where its
/// children are created; while that is so the caller cannot start threads (the kernel refuses
/// `CLONE_THREAD` across pid namespaces). So the caller forks exactly once and then calls
/// [`PidNamespaceForNextChild::restore`], which points its children back at its own namespace.
#[derive(Debug)]
pub struct PidNamespaceForNextChild {
    own_namespace: File,
}

impl PidNamespaceForNextChild {
    pub fn create() -> Result<Self, IsolationError> {
        let path = "/proc/self/ns/pid";
        let own_namespace = File::open(path).map_err(|source| IsolationError::Io {
            step: "opening the own pid namespace",
            path: path.into(),
            source,
        })?;
        unshare(CloneFlags::CLONE_NEWPID).map_err(syscall("unsharing the pid namespace"))?;
        Ok(Self { own_namespace })
    }

    /// Children created from now on are in the caller's own pid namespace again.
    pub fn restore(self) -> Result<(), IsolationError> {
        setns(self.own_namespace.as_fd(), CloneFlags::CLONE_NEWPID)
            .map_err(syscall("re-entering the own pid namespace"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names_are_rfc_1123_and_at_most_64_bytes() {
        assert!(is_valid_hostname("web-1.service"));
        assert!(is_valid_hostname(&"a".repeat(64)));
        assert!(!is_valid_hostname(&"a".repeat(65)));
        assert!(!is_valid_hostname(""));
        assert!(!is_valid_hostname("-web"));
        assert!(!is_valid_hostname("web server"));
        assert!(!is_valid_hostname("web/1"));
        assert!(!is_valid_hostname("${NOMAD_ALLOC_ID}"));
    }
}
