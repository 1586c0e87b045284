//! The `exec` driver: the `raw_exec` machinery (one shim and one cgroup per task) plus the
//! policy of isolation the shim's child applies before exec — new mount, pid, ipc and uts
//! namespaces (network: the host's, or none), the task dir as `/` with a read-only chroot env
//! bound in, the default capability set adjusted by `cap_add`/`cap_drop` within the client's
//! `allow_caps`, `no_new_privs`, and the task's user (`nobody` by default).
//!
//! In a group network (bridge, none, CNI) the shim joins the group's namespace instead of
//! keeping the host's, and the group's `resolv.conf` (its `dns` block) is bound at
//! `/etc/resolv.conf`.
//!
//! The task's host name: the group network's `hostname` when given (set in the task's own uts
//! namespace), the host's name otherwise (the namespace starts as a copy of the host's).
//!
//! Not for: the task config schema (`task_config`), the shim and cgroup machinery
//! (`shim_engine`), the mechanisms (namespaces, mounts, capabilities live in `drover-isolate`,
//! applied by `drover-shim`), or checking the user against the client's denylist (the client's
//! validate hook does that).
//!
//! # The order of isolation
//!
//! The `exec` driver decides the policy (chroot env, capabilities within `allow_caps`, user,
//! network) and writes it into the shim's launch spec; the shim applies it with the mechanisms of
//! `isolate` in its forked child, which is a copy of a single-threaded process, so it may allocate
//! and do real work between fork and exec. The agent never forks to isolate. The order:
//!
//! 1. **pid namespace, chosen at fork.** `unshare(CLONE_NEWPID)` only applies to the caller's
//!    children, so the shim unshares it just before forking the task and re-enters its own right
//!    after (while it is unshared the kernel refuses new threads). The task is therefore **pid 1**
//!    of its namespace, as in Nomad's libcontainer-based exec (no extra init process, one process
//!    fewer to account for, the shim reaps the task directly). Consequences, as in any container
//!    without an init: pid 1 only receives the signals it installs handlers for, so a task that
//!    ignores its kill signal is SIGKILLed after `kill_timeout`; when pid 1 exits the kernel kills
//!    the rest of the namespace (and the shim kills what is left of the cgroup anyway).
//! 2. **Join the task cgroup** — the child's first act, before it can allocate or fork, so every
//!    byte and process of the setup and the task is charged and limited, and the whole tree can be
//!    frozen and killed through it. The shim created it with the task's limits: memory, cpu shares,
//!    `cpuset.cpus` set to exactly the task's reserved cores when it has any, else to the shared
//!    cpus (see "Reserved cores" below; on v1 each new cpuset dir first gets
//!    `cpuset.cpus`/`cpuset.mems` copied from its parent, or it could hold no process), and
//!    `pids.max` from the task config's `pids_limit`.
//! 3. **mount, ipc, uts namespaces** (and a new, empty **network** namespace with
//!    `network_mode = "none"`; the host's network otherwise; in a group network the child has
//!    already joined the group's namespace with `setns`, its first act after the cgroup, for
//!    raw_exec tasks too) — before any mount, so nothing mounted
//!    later exists outside the task. The new uts namespace starts as a copy of the host's, so the
//!    task sees the host's name, as in Nomad, unless the group's `network { hostname = "…" }`
//!    names it (interpolated with the task's environment, checked as an RFC 1123 name of at most
//!    64 bytes): then that name is set in the task's namespace only. Nomad honours `hostname` in
//!    bridge networking only (older versions refuse it for any driver but docker); drover has no
//!    bridge mode and honours it in any, a drover extension.
//! 4. **Stdio and signals** (dup2 onto the log pipes, default dispositions, empty mask).
//! 5. **Hand the task's dirs to its user** (`local`, `secrets`, `tmp`, the alloc `data`/`tmp`),
//!    while still root and still seeing host paths.
//! 6. **Task root**: `/` made `rprivate` (nothing propagates back to the host); the task dir bound
//!    onto itself (pivot_root needs a mount point); the chroot env (`/bin /etc /lib /lib64 /sbin
//!    /usr` or the client's `chroot_env`) bound **read-only**, never copied; the alloc dir at
//!    `/alloc` (`/local`, `/secrets`, `/tmp` are the task dir's own); the task's host volumes at
//!    their `volume_mount` destinations (every bind's mount point created and opened beneath the
//!    task root by `isolate::beneath` and the mount made on that descriptor, so a symlink the
//!    task planted, absolute or climbing out, is refused and none swapped in is followed)
//!    (read-only when the client's volume, the group's request or the mount says so); a tmpfs `/dev` with null, zero, full, random, urandom, tty, `ptmx ->
//!    pts/ptmx`, `/dev/pts` (`newinstance`), `/dev/shm`, `/dev/mqueue`; a fresh `/proc` (it shows
//!    the new pid namespace because the child is in it) with `/proc/kcore`, `/proc/keys`,
//!    `/proc/timer_list` masked by `/dev/null` and `/proc/sys`, `/proc/sysrq-trigger`,
//!    `/proc/irq`, `/proc/bus` read-only; `/sys` read-only with `/sys/firmware` masked (each of
//!    `/dev`, `/proc`, `/sys` mounted on a descriptor of its mount point opened beneath the root,
//!    reopened and checked to be the filesystem just mounted, and filled through that descriptor);
//!    `pivot_root` from the root pinned after its bind (`fchdir`) and a lazy unmount of the old
//!    root (chroot only where pivot_root is refused).
//!    Mounts need `CAP_SYS_ADMIN`, so this comes before any privilege is dropped.
//! 7. **Program lookup** in the task's `PATH`, inside the new root (the host's binaries are not
//!    what the task runs).
//! 8. **Capabilities**: the bounding set is cut to the task's set first (it needs `CAP_SETPCAP`,
//!    which is about to go); the set is Docker's default 14 (`CapEff` 0xa80425fb) plus `cap_add`
//!    minus `cap_drop`, and `cap_add` outside the client's `allow_caps` is refused at start.
//! 9. **no_new_privs**, so no set-uid binary or file capability can raise privileges after exec.
//! 10. **User** (default `nobody`; the client's user denylist is checked by the validate hook):
//!     keep-caps, setgroups, setgid, setuid.
//! 11. **Effective, permitted, inheritable and ambient sets** set to the task's set, so a task that
//!     is not root still holds exactly the default set after exec (ambient capabilities survive
//!     `execve` of a file without capabilities).
//! 12. **exec.** Any failure before it is written to a close-on-exec pipe the shim reads, so the
//!     start fails with the step that failed and nothing runs half-isolated.
//!
//! **Reserved cores** (`resources { cores = N }`, exec and raw_exec alike). The client fingerprints
//! `NodeResources.Cpu.ReservableCpuCores` as the cpus the agent itself may run on
//! (`Cpus_allowed_list`, which follows its cpuset and affinity, as Nomad reads its parent cgroup's
//! cpuset); the scheduler (`select::assign_cores`) gives each task that asks for cores the lowest
//! free IDs among them, minus `ReservedResources.Cpu.ReservedCpuCores`, minus every core a live
//! allocation on the node holds, charges it cores × the node's MHz per core (`CpuShares` /
//! `TotalCpuCores`, Nomad's `SharesPerCore`), records them in
//! `AllocatedResources.Tasks[t].Cpu.ReservedCores`, and fails a node that has too few on the
//! `cores` dimension. In-place updates keep an allocation's cores; a change of `cores` is
//! destructive. The client hands them to the driver (`ResourceLimits.cpuset_cpus`) and the task
//! sees them in `NOMAD_CPU_CORES`. As in Nomad's shared and reserved cpusets, a task with cores
//! gets its cgroup under `<parent>/reserved/` (`drover/reserved/<alloc>.<task>`), and every other
//! task runs on the *shared* cpus: the parent's cpus minus those of every reserved cgroup that
//! still has a process (all of them if nothing is left). The driver writes them into each shared
//! task cgroup after every start, recovery and end of a task (`isolate::rebalance_shared_cpus`, one
//! at a time per agent, reading the reservations from cgroupfs, so an agent restart loses nothing);
//! the kernel moves running processes at once. The client config has no `reserved { cores }` /
//! `reservable_cores` yet, and the plan applier does not yet re-check cores
//! (`select::reserved_core_conflict` is there for it), so two schedulers racing on one node could
//! in principle pick the same core.
//!
//! **`pids_limit`** (task config of exec and raw_exec, a positive integer; a drover extension:
//! Nomad has it for docker only) is written to `pids.max`; a fork beyond it fails with `EAGAIN`
//! inside the task. Without it the kernel's default (no limit) applies. A `pids_limit` on a client
//! without cgroups fails the start instead of being ignored.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use drover_isolate::{CapabilitySet, DEFAULT_CAPABILITIES};
use drover_shim::proto::{BindSpec, IsolationSpec};
use serde_json::Value;

use crate::shim_engine::{LaunchPolicy, RawExecConfig, ShimEngine};
use crate::task_config::{EXEC_CONFIG_KEYS, network_none, string_list, validate_config};
use crate::{DriverError, TaskLaunch};

/// The chroot env when the client sets none: each host dir bound at the same path in the root.
pub const DEFAULT_CHROOT_ENV: [&str; 6] = ["/bin", "/etc", "/lib", "/lib64", "/sbin", "/usr"];

/// Client-side settings of the exec driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecConfig {
    /// Host path → path inside the task root, bound read-only; empty means
    /// [`DEFAULT_CHROOT_ENV`] (each at its own path).
    pub chroot_env: BTreeMap<String, String>,
    /// Capabilities a task may have at most (`allow_caps`); Nomad's default is the default set.
    pub allow_caps: Vec<String>,
    /// User of tasks that name none.
    pub default_user: String,
}

impl Default for ExecConfig {
    fn default() -> Self {
        Self {
            chroot_env: BTreeMap::new(),
            allow_caps: DEFAULT_CAPABILITIES
                .iter()
                .map(|cap| cap.to_string())
                .collect(),
            default_user: "nobody".to_string(),
        }
    }
}

/// The `exec` driver: the shim engine with the [`Exec`] policy.
pub fn exec_driver(raw: RawExecConfig, exec: ExecConfig) -> ShimEngine {
    ShimEngine::new(raw, Exec(exec))
}

/// The `exec` driver's policy: its task config, and isolation within the client's settings.
pub struct Exec(pub ExecConfig);

impl LaunchPolicy for Exec {
    fn driver_name(&self) -> &'static str {
        "exec"
    }

    fn isolation(
        &self,
        launch: &TaskLaunch,
        engine: &ShimEngine,
    ) -> Result<Option<IsolationSpec>, DriverError> {
        validate_config(&launch.driver_config, EXEC_CONFIG_KEYS)?;
        if !engine.cgroups_available() {
            return Err(DriverError::InvalidConfig(
                "the exec driver needs a cgroup filesystem".to_string(),
            ));
        }
        isolation_for(&self.0, launch).map(Some)
    }

    fn user(&self, launch: &TaskLaunch) -> Option<String> {
        Some(
            launch
                .user
                .clone()
                .unwrap_or_else(|| self.0.default_user.clone()),
        )
    }
}

fn capabilities(config: &Value, key: &str) -> Result<CapabilitySet, DriverError> {
    CapabilitySet::from_names(&string_list(config, key)?)
        .map_err(|error| DriverError::InvalidConfig(format!("{key}: {error}")))
}

/// The task's capabilities: the default set within `allow_caps`, plus `cap_add` (which must be
/// allowed), minus `cap_drop` (`all` drops everything).
pub fn task_capabilities(exec: &ExecConfig, config: &Value) -> Result<CapabilitySet, DriverError> {
    let allowed = CapabilitySet::from_names(&exec.allow_caps)
        .map_err(|error| DriverError::InvalidConfig(format!("client allow_caps: {error}")))?;
    let defaults = CapabilitySet::from_names(&DEFAULT_CAPABILITIES)
        .map_err(|error| DriverError::InvalidConfig(error.to_string()))?;
    let added = capabilities(config, "cap_add")?;
    let dropped = capabilities(config, "cap_drop")?;
    let refused = added.without(allowed);
    if refused != CapabilitySet::default() {
        return Err(DriverError::InvalidConfig(format!(
            "cap_add {} not allowed by the client's allow_caps",
            refused.names().join(", ")
        )));
    }
    Ok(defaults.intersection(allowed).union(added).without(dropped))
}

/// The isolation the shim applies to `launch`.
pub fn isolation_for(exec: &ExecConfig, launch: &TaskLaunch) -> Result<IsolationSpec, DriverError> {
    let root = launch
        .task_dir
        .clone()
        .or_else(|| launch.cwd.clone())
        .ok_or_else(|| DriverError::InvalidConfig("the exec driver needs a task dir".into()))?;
    let mut binds: Vec<BindSpec> = if exec.chroot_env.is_empty() {
        DEFAULT_CHROOT_ENV
            .iter()
            .map(|path| BindSpec {
                source: PathBuf::from(path),
                target: PathBuf::from(path),
                read_only: true,
            })
            .collect()
    } else {
        exec.chroot_env
            .iter()
            .map(|(source, target)| BindSpec {
                source: PathBuf::from(source),
                target: PathBuf::from(target),
                read_only: true,
            })
            .collect()
    };
    let mut owned_by_task_user = ["local", "secrets", "tmp"]
        .iter()
        .map(|name| root.join(name))
        .collect::<Vec<_>>();
    if let Some(shared) = &launch.shared_alloc_dir {
        binds.push(BindSpec {
            source: shared.clone(),
            target: PathBuf::from("/alloc"),
            read_only: false,
        });
        owned_by_task_user.extend(["data", "tmp"].iter().map(|name| shared.join(name)));
    }
    // The group's DNS settings over the host's (bound inside the chroot env's /etc).
    if let Some(resolv_conf) = &launch.resolv_conf {
        binds.push(BindSpec {
            source: resolv_conf.clone(),
            target: PathBuf::from("/etc/resolv.conf"),
            read_only: true,
        });
    }
    // Host volumes last, so a volume mounted under /alloc lands on the alloc dir's bind.
    for mount in &launch.mounts {
        if !mount.task_path.is_absolute() {
            return Err(DriverError::InvalidConfig(format!(
                "volume_mount destination {:?} must be an absolute path",
                mount.task_path.display()
            )));
        }
        if !mount.host_path.is_dir() {
            return Err(DriverError::InvalidConfig(format!(
                "host volume path {:?} is not a directory on this node",
                mount.host_path.display()
            )));
        }
        binds.push(BindSpec {
            source: mount.host_path.clone(),
            target: mount.task_path.clone(),
            read_only: mount.read_only,
        });
    }
    if let Some(hostname) = &launch.hostname
        && !drover_isolate::is_valid_hostname(hostname)
    {
        return Err(DriverError::InvalidConfig(format!(
            "network hostname {hostname:?} is not a valid host name (1 to 64 letters, digits, '-' or '.')"
        )));
    }
    Ok(IsolationSpec {
        root: root.clone(),
        binds,
        network_none: network_none(&launch.driver_config)?,
        capabilities: task_capabilities(exec, &launch.driver_config)?
            .names()
            .into_iter()
            .map(str::to_string)
            .collect(),
        owned_by_task_user,
        hostname: launch.hostname.clone(),
    })
}

/// Whether every chroot env source and destination is an absolute path.
pub fn chroot_env_is_valid(chroot_env: &BTreeMap<String, String>) -> bool {
    chroot_env
        .iter()
        .all(|(source, target)| Path::new(source).is_absolute() && Path::new(target).is_absolute())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn capabilities_start_from_the_default_set_within_allow_caps() {
        let exec = ExecConfig::default();
        let defaults = task_capabilities(&exec, &json!({})).unwrap();
        assert_eq!(defaults.0, 0xa804_25fb);
        let dropped =
            task_capabilities(&exec, &json!({"cap_drop": ["net_raw", "CAP_KILL"]})).unwrap();
        assert_eq!(dropped.names().len(), 12);
        assert!(!dropped.names().contains(&"CAP_NET_RAW"));
        let refused = task_capabilities(&exec, &json!({"cap_add": ["sys_admin"]})).unwrap_err();
        assert!(refused.to_string().contains("CAP_SYS_ADMIN"), "{refused}");
        let permissive = ExecConfig {
            allow_caps: vec!["all".into()],
            ..ExecConfig::default()
        };
        let added = task_capabilities(&permissive, &json!({"cap_add": ["sys_time"]})).unwrap();
        assert!(added.names().contains(&"CAP_SYS_TIME"));
        assert!(
            task_capabilities(&exec, &json!({"cap_drop": ["all"]}))
                .unwrap()
                .0
                == 0
        );
    }

    #[test]
    fn the_task_root_binds_the_chroot_env_read_only_and_the_alloc_dir() {
        let launch = TaskLaunch {
            task_dir: Some("/data/alloc/a1/web".into()),
            shared_alloc_dir: Some("/data/alloc/a1/alloc".into()),
            driver_config: json!({"network_mode": "none"}),
            ..TaskLaunch::default()
        };
        let spec = isolation_for(&ExecConfig::default(), &launch).unwrap();
        assert_eq!(spec.root, PathBuf::from("/data/alloc/a1/web"));
        assert!(spec.network_none);
        assert_eq!(spec.binds.len(), 7);
        assert!(spec.binds[..6].iter().all(|bind| bind.read_only));
        let alloc = spec.binds.last().unwrap();
        assert_eq!(
            (alloc.target.as_path(), alloc.read_only),
            (Path::new("/alloc"), false)
        );
        let bad = TaskLaunch {
            driver_config: json!({"network_mode": "bridge"}),
            ..launch
        };
        assert!(isolation_for(&ExecConfig::default(), &bad).is_err());
    }

    #[test]
    fn host_volumes_are_bound_last_with_their_mode() {
        let volume = std::env::temp_dir();
        let launch = TaskLaunch {
            task_dir: Some("/data/alloc/a1/web".into()),
            shared_alloc_dir: Some("/data/alloc/a1/alloc".into()),
            mounts: vec![crate::MountConfig {
                host_path: volume.clone(),
                task_path: "/srv/data".into(),
                read_only: true,
            }],
            ..TaskLaunch::default()
        };
        let spec = isolation_for(&ExecConfig::default(), &launch).unwrap();
        let bind = spec.binds.last().unwrap();
        assert_eq!(
            (bind.source.as_path(), bind.target.as_path(), bind.read_only),
            (volume.as_path(), Path::new("/srv/data"), true)
        );
        let relative = TaskLaunch {
            mounts: vec![crate::MountConfig {
                host_path: volume,
                task_path: "srv".into(),
                read_only: false,
            }],
            ..launch
        };
        let error = isolation_for(&ExecConfig::default(), &relative).unwrap_err();
        assert!(error.to_string().contains("\"srv\""), "{error}");
    }

    #[test]
    fn the_network_hostname_is_passed_on_when_valid() {
        let launch = TaskLaunch {
            task_dir: Some("/data/alloc/a1/web".into()),
            hostname: Some("web-1".into()),
            ..TaskLaunch::default()
        };
        let spec = isolation_for(&ExecConfig::default(), &launch).unwrap();
        assert_eq!(spec.hostname.as_deref(), Some("web-1"));
        let unnamed = TaskLaunch {
            hostname: None,
            ..launch.clone()
        };
        assert_eq!(
            isolation_for(&ExecConfig::default(), &unnamed)
                .unwrap()
                .hostname,
            None
        );
        let bad = TaskLaunch {
            hostname: Some("web server".into()),
            ..launch
        };
        let error = isolation_for(&ExecConfig::default(), &bad).unwrap_err();
        assert!(error.to_string().contains("web server"), "{error}");
    }
}
