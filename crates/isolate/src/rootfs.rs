//! The task root: inside a fresh mount namespace, turns a host directory (the task dir) into the
//! task's `/` — read-only bind mounts of the chroot env, extra binds (the alloc dir), a tmpfs
//! `/dev` with the standard nodes, `/dev/pts` (own instance), `/dev/shm`, `/dev/mqueue`, a fresh
//! `/proc` for the task's pid namespace with the kernel's sensitive files masked or read-only,
//! a read-only `/sys` — then `pivot_root` into it (chroot when pivot_root is impossible).
//!
//! Nothing is copied: every host path the task sees is a bind mount, and every mount lives in
//! the task's own mount namespace, so it disappears with the task. Not for: deciding what the
//! chroot env is or where the root lives (the launch spec says), or running as the caller's
//! mount namespace (call [`crate::namespaces::unshare_namespaces`] with `mount` first).

use std::fs;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::sys::stat::{Mode, SFlag, makedev, mknod};

use crate::error::{IsolationError, syscall};

/// One bind mount into the task root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindMount {
    /// Host path (file or directory). A missing source is skipped (like `/lib64` on hosts
    /// without one).
    pub source: PathBuf,
    /// Absolute path inside the task root.
    pub target: PathBuf,
    pub read_only: bool,
}

/// What the task root is made of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskRoot {
    /// Host directory that becomes `/`.
    pub root: PathBuf,
    pub binds: Vec<BindMount>,
}

/// Files under `/proc` and `/sys` the task must not read: files get `/dev/null` bound over
/// them, directories an empty read-only tmpfs.
pub const MASKED_PATHS: [&str; 4] = [
    "/proc/kcore",
    "/proc/keys",
    "/proc/timer_list",
    "/sys/firmware",
];

/// Paths under `/proc` made read-only.
pub const READ_ONLY_PATHS: [&str; 4] =
    ["/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus"];

/// Character devices created in the task's `/dev`: name, major, minor.
const DEVICES: [(&str, u64, u64); 6] = [
    ("null", 1, 3),
    ("zero", 1, 5),
    ("full", 1, 7),
    ("random", 1, 8),
    ("urandom", 1, 9),
    ("tty", 5, 0),
];

fn io(step: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> IsolationError {
    let path = path.to_path_buf();
    move |source| IsolationError::Io { step, path, source }
}

fn mount_with(
    source: Option<&str>,
    target: &Path,
    fstype: Option<&str>,
    flags: MsFlags,
    data: Option<&str>,
) -> Result<(), IsolationError> {
    mount(source, target, fstype, flags, data).map_err(syscall(format!(
        "mounting {} ({})",
        target.display(),
        fstype.unwrap_or("bind")
    )))
}

fn bind(source: &Path, target: &Path, read_only: bool) -> Result<(), IsolationError> {
    mount(
        Some(source),
        target,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None::<&str>,
    )
    .map_err(syscall(format!(
        "bind mounting {} on {}",
        source.display(),
        target.display()
    )))?;
    if read_only {
        remount_read_only(target)?;
    }
    Ok(())
}

fn remount_read_only(target: &Path) -> Result<(), IsolationError> {
    mount(
        None::<&str>,
        target,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY | MsFlags::MS_NOSUID,
        None::<&str>,
    )
    .or_else(|_| {
        // Some sources carry locked flags (nodev, noexec); keep them.
        mount(
            None::<&str>,
            target,
            None::<&str>,
            MsFlags::MS_BIND
                | MsFlags::MS_REMOUNT
                | MsFlags::MS_RDONLY
                | MsFlags::MS_NOSUID
                | MsFlags::MS_NODEV
                | MsFlags::MS_NOEXEC,
            None::<&str>,
        )
    })
    .map_err(syscall(format!("making {} read-only", target.display())))
}

fn make_dir(path: &Path, mode: u32) -> Result<(), IsolationError> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(mode)
        .create(path)
        .map_err(io("creating mount point", path))
}

/// Binds `bind_mount.source` at its target beneath `root`: the mount point (a directory, or an
/// empty file for a file source) is created and opened beneath the root by the kernel
/// ([`crate::beneath`]), and the mount made on that descriptor, never on a path a symlink
/// planted in the task root (or swapped in meanwhile) could lead outside it.
fn bind_beneath(root: &Path, bind_mount: &BindMount, dir: bool) -> Result<(), IsolationError> {
    use crate::beneath::{self, Missing};
    let refused = |error: beneath::BeneathError| IsolationError::Beneath {
        target: bind_mount.target.clone(),
        source: error,
    };
    let root_fd = beneath::open_root(root).map_err(refused)?;
    let target = if dir {
        beneath::open_at(&root_fd, root, &bind_mount.target, Missing::CreateDirs)
    } else {
        beneath::create_file_at(&root_fd, root, &bind_mount.target)
    }
    .map_err(refused)?;
    bind(&bind_mount.source, &beneath::fd_path(&target), false)?;
    if bind_mount.read_only {
        // The descriptor still names what was under the new mount: open the mount itself.
        let mounted =
            beneath::open_at(&root_fd, root, &bind_mount.target, Missing::Fail).map_err(refused)?;
        remount_read_only(&beneath::fd_path(&mounted))?;
    }
    Ok(())
}

/// Builds the task root as described in the module docs and makes it the calling process's
/// `/` (its working directory becomes `/`). The caller must be in its own mount namespace, and
/// in the task's pid namespace for `/proc` to show only the task.
pub fn enter_task_root(plan: &TaskRoot) -> Result<(), IsolationError> {
    let root = plan.root.as_path();
    // Nothing mounted from here on may reach the host's mount namespace.
    mount_with(
        None,
        Path::new("/"),
        None,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None,
    )?;
    // pivot_root needs the new root to be a mount point.
    bind(root, root, false)?;
    // The root as mounted now, pinned: the task's working directory is entered through this
    // descriptor, never through the root's path again.
    let root_fd = crate::beneath::open_root(root).map_err(|error| IsolationError::Beneath {
        target: PathBuf::from("/"),
        source: error,
    })?;

    for bind_mount in &plan.binds {
        let Ok(source) = fs::metadata(&bind_mount.source) else {
            continue;
        };
        bind_beneath(root, bind_mount, source.is_dir())?;
    }

    mount_dev(root)?;
    mount_proc(root)?;
    mount_sys(root)?;
    pivot_into(root, &root_fd)
}

/// `statfs(2)` types of the filesystems mounted here.
const TMPFS_MAGIC: rustix::fs::FsWord = 0x0102_1994;
const PROC_SUPER_MAGIC: rustix::fs::FsWord = 0x9fa0;
const SYSFS_MAGIC: rustix::fs::FsWord = 0x6265_6572;

/// Mounts a filesystem at `inside` without a check that a swap could undo: the mount point is
/// opened (created when missing) beneath the root by the kernel ([`crate::beneath`]) and
/// `mount_on` mounts on that descriptor's link; then what is mounted there now is opened
/// beneath the root again and must be a filesystem of type `magic` (what `mount_on` mounts).
/// The answer is a descriptor of the new mount: everything done inside it afterwards goes
/// through it, never through a path of the task root.
fn mount_beneath(
    root: &Path,
    inside: &str,
    magic: rustix::fs::FsWord,
    mount_on: impl FnOnce(&Path) -> Result<(), IsolationError>,
) -> Result<std::os::fd::OwnedFd, IsolationError> {
    use crate::beneath::{self, Missing};
    let refused = |error: beneath::BeneathError| IsolationError::Beneath {
        target: PathBuf::from(inside),
        source: error,
    };
    let root_fd = beneath::open_root(root).map_err(refused)?;
    let point = beneath::open_at(&root_fd, root, Path::new(inside), Missing::CreateDirs)
        .map_err(refused)?;
    if !rustix::fs::fstat(&point)
        .is_ok_and(|stat| rustix::fs::FileType::from_raw_mode(stat.st_mode).is_dir())
    {
        return Err(IsolationError::InvalidPath {
            path: root.join(inside.trim_start_matches('/')),
            reason: "is not a directory",
        });
    }
    mount_on(&beneath::fd_path(&point))?;
    let mounted =
        beneath::open_at(&root_fd, root, Path::new(inside), Missing::Fail).map_err(refused)?;
    if !rustix::fs::fstatfs(&mounted).is_ok_and(|stat| stat.f_type == magic) {
        return Err(IsolationError::InvalidPath {
            path: root.join(inside.trim_start_matches('/')),
            reason: "is no longer what was just mounted there (it changed meanwhile)",
        });
    }
    Ok(mounted)
}

fn mount_dev(root: &Path) -> Result<(), IsolationError> {
    let dev_fd = mount_beneath(root, "/dev", TMPFS_MAGIC, |target| {
        mount_with(
            Some("tmpfs"),
            target,
            Some("tmpfs"),
            MsFlags::MS_NOSUID | MsFlags::MS_STRICTATIME,
            Some("mode=755,size=65536k"),
        )
    })?;
    // A tmpfs just mounted in this private namespace, reached through its descriptor: nothing
    // else can write in it.
    let dev = crate::beneath::fd_path(&dev_fd);
    for (name, major, minor) in DEVICES {
        let node = dev.join(name);
        match mknod(
            &node,
            SFlag::S_IFCHR,
            Mode::from_bits_truncate(0o666),
            makedev(major, minor),
        ) {
            Ok(()) => {
                fs::set_permissions(&node, std::os::unix::fs::PermissionsExt::from_mode(0o666))
                    .map_err(io("setting device permissions", &node))?;
            }
            // Without the right to create nodes, bind the host's.
            Err(Errno::EPERM) => {
                fs::File::create(&node).map_err(io("creating device mount point", &node))?;
                bind(&Path::new("/dev").join(name), &node, false)?;
            }
            Err(error) => return Err(syscall(format!("creating {}", node.display()))(error)),
        }
    }
    for (link, target) in [
        ("ptmx", "pts/ptmx"),
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        let path = dev.join(link);
        std::os::unix::fs::symlink(target, &path).map_err(io("creating symlink", &path))?;
    }
    let pts = dev.join("pts");
    make_dir(&pts, 0o755)?;
    mount_with(
        Some("devpts"),
        &pts,
        Some("devpts"),
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        Some("newinstance,ptmxmode=0666,mode=0620,gid=5"),
    )?;
    let shm = dev.join("shm");
    make_dir(&shm, 0o1777)?;
    mount_with(
        Some("shm"),
        &shm,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        Some("mode=1777,size=65536k"),
    )?;
    let mqueue = dev.join("mqueue");
    make_dir(&mqueue, 0o755)?;
    mount_with(
        Some("mqueue"),
        &mqueue,
        Some("mqueue"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        None,
    )
}

fn mount_proc(root: &Path) -> Result<(), IsolationError> {
    let proc_fd = mount_beneath(root, "/proc", PROC_SUPER_MAGIC, |target| {
        mount_with(
            Some("proc"),
            target,
            Some("proc"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
            None,
        )
    })?;
    // The fresh procfs, through its descriptor: its names are the kernel's, none a task made.
    let proc_dir = crate::beneath::fd_path(&proc_fd);
    for read_only in READ_ONLY_PATHS {
        let path = proc_dir.join(read_only.trim_start_matches("/proc/"));
        if path.exists() {
            bind(&path, &path, true)?;
        }
    }
    mask(&proc_dir, "/proc/", &MASKED_PATHS[..3])
}

fn mount_sys(root: &Path) -> Result<(), IsolationError> {
    let sys_fd = mount_beneath(root, "/sys", SYSFS_MAGIC, |target| {
        let flags =
            MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
        if mount(Some("sysfs"), target, Some("sysfs"), flags, None::<&str>).is_err() {
            // A sysfs of the host's network namespace cannot always be mounted afresh; bind it.
            bind(Path::new("/sys"), target, true)?;
        }
        Ok(())
    })?;
    mask(
        &crate::beneath::fd_path(&sys_fd),
        "/sys/",
        &MASKED_PATHS[3..],
    )
}

/// Masks `paths` (each under `prefix`) inside the filesystem mounted at `mounted` (a
/// descriptor's link): a directory gets an empty read-only tmpfs, a file the host's
/// `/dev/null`.
fn mask(mounted: &Path, prefix: &str, paths: &[&str]) -> Result<(), IsolationError> {
    let null = Path::new("/dev/null");
    for masked in paths {
        let path = mounted.join(masked.trim_start_matches(prefix));
        let Ok(meta) = fs::metadata(&path) else {
            continue;
        };
        if meta.is_dir() {
            mount_with(
                Some("tmpfs"),
                &path,
                Some("tmpfs"),
                MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
                Some("size=0k"),
            )?;
        } else {
            bind(null, &path, false)?;
        }
    }
    Ok(())
}

fn pivot_into(root: &Path, root_fd: &std::os::fd::OwnedFd) -> Result<(), IsolationError> {
    nix::unistd::fchdir(root_fd).map_err(syscall(format!("entering {}", root.display())))?;
    match nix::unistd::pivot_root(".", ".") {
        Ok(()) => {
            // The old root is now stacked on `/`; detach it so nothing of the host stays
            // reachable.
            umount2(".", MntFlags::MNT_DETACH).map_err(syscall("detaching the old root"))?;
        }
        // pivot_root is refused when `/` is not a mount the kernel can move (an initramfs).
        Err(Errno::EINVAL) => {
            nix::unistd::chroot(".").map_err(syscall("chroot into the task root"))?;
        }
        Err(error) => return Err(syscall("pivot_root into the task root")(error)),
    }
    nix::unistd::chdir("/").map_err(syscall("entering the new root"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_bind_lands_beneath_the_task_root_whatever_symlink_is_planted() {
        if !crate::root_tests::root_test_may_run("mount(2)", true) {
            return;
        }
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let source = tempfile::tempdir().unwrap();
        std::fs::write(source.path().join("v"), "volume").unwrap();
        // A task planted an absolute symlink out where a volume's mount point goes.
        std::os::unix::fs::symlink(outside.path(), root.path().join("data")).unwrap();
        let out = BindMount {
            source: source.path().to_path_buf(),
            target: "/data/vol".into(),
            read_only: true,
        };
        let error = bind_beneath(root.path(), &out, true).unwrap_err();
        assert!(error.to_string().contains("/data/vol"), "{error}");
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
        // One that stays inside is followed; the mount lands beneath the root, read-only.
        std::fs::create_dir(root.path().join("real")).unwrap();
        std::os::unix::fs::symlink("real", root.path().join("alias")).unwrap();
        let inside = BindMount {
            target: "/alias/vol".into(),
            ..out
        };
        bind_beneath(root.path(), &inside, true).unwrap();
        let mounted = root.path().join("real/vol");
        let seen = std::fs::read_to_string(mounted.join("v"));
        let written = std::fs::write(mounted.join("w"), "x");
        umount2(&mounted, MntFlags::MNT_DETACH).unwrap();
        assert_eq!(seen.unwrap(), "volume");
        assert!(written.is_err(), "the bind is read-only");
    }

    /// Whether anything is mounted at or under `path` in this mount namespace.
    fn mounted_under(path: &Path) -> bool {
        let shown = path.to_string_lossy().into_owned();
        std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap()
            .lines()
            .any(|line| {
                line.split(' ')
                    .nth(4)
                    .is_some_and(|at| at.starts_with(&shown))
            })
    }

    #[test]
    fn dev_proc_and_sys_refuse_a_planted_symlink_and_mount_nothing_outside() {
        if !crate::root_tests::root_test_may_run("mount(2)", true) {
            return;
        }
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let outside_name = outside.path().file_name().unwrap().to_str().unwrap();
        // An absolute symlink, a relative one that climbs out, and one through a directory
        // that climbs out.
        std::os::unix::fs::symlink(outside.path(), root.path().join("proc")).unwrap();
        std::os::unix::fs::symlink(format!("../{outside_name}"), root.path().join("sys")).unwrap();
        std::fs::create_dir(root.path().join("etc")).unwrap();
        std::os::unix::fs::symlink(format!("../../{outside_name}"), root.path().join("etc/up"))
            .unwrap();
        std::os::unix::fs::symlink("etc/up", root.path().join("dev")).unwrap();
        for (what, result) in [
            ("/proc", mount_proc(root.path())),
            ("/sys", mount_sys(root.path())),
            ("/dev", mount_dev(root.path())),
        ] {
            let error = result.unwrap_err();
            assert!(
                error.to_string().contains("resolves outside"),
                "{what}: {error}"
            );
        }
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
        assert!(!mounted_under(outside.path()));
    }

    #[test]
    fn a_mount_point_swapped_for_a_symlink_after_it_was_opened_is_mounted_where_it_was() {
        if !crate::root_tests::root_test_may_run("mount(2)", true) {
            return;
        }
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("dev")).unwrap();
        let moved = root.path().join("dev-before");
        let result = mount_beneath(root.path(), "/dev", TMPFS_MAGIC, |target| {
            // The task root changes between the open and the mount: the mount still lands on
            // the directory that was opened.
            std::fs::rename(root.path().join("dev"), &moved).unwrap();
            std::os::unix::fs::symlink(outside.path(), root.path().join("dev")).unwrap();
            mount_with(Some("tmpfs"), target, Some("tmpfs"), MsFlags::empty(), None)
        });
        let landed = mounted_under(&moved);
        let escaped = mounted_under(outside.path());
        if landed {
            umount2(&moved, MntFlags::MNT_DETACH).unwrap();
        }
        if escaped {
            umount2(outside.path(), MntFlags::MNT_DETACH).unwrap();
        }
        assert!(landed, "the tmpfs is not on the directory that was opened");
        assert!(!escaped, "the tmpfs followed the swapped-in symlink");
        // And the mount point, now a symlink out, is refused rather than used.
        let error = result.unwrap_err();
        assert!(error.to_string().contains("resolves outside"), "{error}");

        // Nothing planted: the tmpfs is mounted and its descriptor handed back.
        let clean = tempfile::tempdir().unwrap();
        let mounted = mount_beneath(clean.path(), "/dev", TMPFS_MAGIC, |target| {
            mount_with(Some("tmpfs"), target, Some("tmpfs"), MsFlags::empty(), None)
        });
        umount2(&clean.path().join("dev"), MntFlags::MNT_DETACH).unwrap();
        assert_eq!(
            rustix::fs::fstatfs(mounted.unwrap()).unwrap().f_type,
            TMPFS_MAGIC
        );
        // A filesystem of another type where one was expected is refused.
        let other = tempfile::tempdir().unwrap();
        let wrong = mount_beneath(other.path(), "/proc", PROC_SUPER_MAGIC, |target| {
            mount_with(Some("tmpfs"), target, Some("tmpfs"), MsFlags::empty(), None)
        });
        umount2(&other.path().join("proc"), MntFlags::MNT_DETACH).unwrap();
        assert!(wrong.unwrap_err().to_string().contains("changed meanwhile"));
    }
}
