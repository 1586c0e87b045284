//! The on-disk layout of an allocation, as Nomad lays it out:
//!
//! ```text
//! <data_dir>/alloc/<alloc_id>/
//!     alloc/            shared by every task of the group (NOMAD_ALLOC_DIR)
//!         data/  logs/  tmp/
//!     <task>/           one per task (NOMAD_TASK_DIR is <task>/local)
//!         local/  secrets/ (0700, tmpfs where possible)  tmp/
//! ```
//!
//! Names become paths only after [`validate_path_component`]. Building is idempotent (a restored
//! runner builds again to re-check the layout), and a directory of the layout found to be a
//! symlink (a task can write its own task dir, and so plant one between two of its starts) is
//! refused, never chmodded or mounted on through. The secrets tmpfs is unmounted once the
//! allocation's tasks are done for good, before the dir is destroyed, and at start for
//! allocations that are gone ([`unmount_leftovers`]).
//!
//! **Not** a filesystem API for users (the `fs` endpoints read these dirs, they do not live here),
//! and no chroot population: drivers that isolate the filesystem do that in the shim.

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

/// Errors building or removing alloc and task dirs.
#[derive(Debug, thiserror::Error)]
pub enum AllocDirError {
    #[error("invalid {what} {value:?}: must be a single non-empty path component")]
    InvalidName { what: &'static str, value: String },
    #[error("path {path:?} escapes {base:?}")]
    EscapesBase { path: String, base: PathBuf },
    #[error("failed to create {path:?}")]
    Create {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "{path:?} is a symlink or not a directory where the allocation's layout has a directory (a task may have planted it); refused"
    )]
    NotADirectory { path: PathBuf },
    #[error("failed to remove {path:?}")]
    Remove {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("failed to move {from:?} to {to:?}")]
    Move {
        from: PathBuf,
        to: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// Rejects anything that is not one plain path component (no `/`, `.`, `..`, NUL, or empty).
pub fn validate_path_component(what: &'static str, value: &str) -> Result<(), AllocDirError> {
    let invalid = value.is_empty()
        || value == "."
        || value == ".."
        || value.contains('/')
        || value.contains('\0');
    if invalid {
        return Err(AllocDirError::InvalidName {
            what,
            value: value.to_string(),
        });
    }
    Ok(())
}

/// Joins a user-supplied relative path (an artifact or template destination, a payload file)
/// under `base`, lexically, and refuses a result outside `base`. Absolute inputs are treated as
/// relative to `base`, as Nomad does for destinations.
pub fn join_within(base: &Path, relative: &str) -> Result<PathBuf, AllocDirError> {
    let mut depth: usize = 0;
    let mut joined = base.to_path_buf();
    for component in Path::new(relative).components() {
        match component {
            Component::Normal(part) => {
                joined.push(part);
                depth += 1;
            }
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
            Component::ParentDir => {
                if depth == 0 {
                    return Err(AllocDirError::EscapesBase {
                        path: relative.to_string(),
                        base: base.to_path_buf(),
                    });
                }
                joined.pop();
                depth -= 1;
            }
        }
    }
    Ok(joined)
}

/// The directory of one allocation.
#[derive(Debug, Clone)]
pub struct AllocDir {
    /// `<data_dir>/alloc/<alloc_id>`.
    pub root: PathBuf,
    /// `<root>/alloc`: the shared dir (NOMAD_ALLOC_DIR).
    pub shared_dir: PathBuf,
    /// `<root>/alloc/data`.
    pub shared_data_dir: PathBuf,
    /// `<root>/alloc/logs`: every task's rotated stdout/stderr.
    pub logs_dir: PathBuf,
    /// `<root>/alloc/tmp`.
    pub shared_tmp_dir: PathBuf,
}

impl AllocDir {
    /// The layout for `alloc_id` under `alloc_root` (`<data_dir>/alloc`); nothing is created.
    pub fn new(alloc_root: &Path, alloc_id: &str) -> Result<Self, AllocDirError> {
        validate_path_component("alloc id", alloc_id)?;
        let root = alloc_root.join(alloc_id);
        let shared_dir = root.join("alloc");
        Ok(AllocDir {
            shared_data_dir: shared_dir.join("data"),
            logs_dir: shared_dir.join("logs"),
            shared_tmp_dir: shared_dir.join("tmp"),
            shared_dir,
            root,
        })
    }

    /// Creates the shared part (idempotent). The shared dirs are world-writable with the sticky
    /// bit, as Nomad's, so tasks running as different users can share them.
    pub fn build(&self) -> Result<(), AllocDirError> {
        if let Some(alloc_root) = self.root.parent() {
            fs::create_dir_all(alloc_root).map_err(|source| AllocDirError::Create {
                path: alloc_root.to_path_buf(),
                source,
            })?;
        }
        create_dir_with_mode(&self.root, 0o755)?;
        create_dir_with_mode(&self.shared_dir, 0o755)?;
        for shared in [&self.shared_data_dir, &self.logs_dir, &self.shared_tmp_dir] {
            create_dir_with_mode(shared, 0o1777)?;
        }
        Ok(())
    }

    /// The layout of one task's dir; nothing is created.
    pub fn task_dir(&self, task_name: &str) -> Result<TaskDir, AllocDirError> {
        validate_path_component("task name", task_name)?;
        let dir = self.root.join(task_name);
        Ok(TaskDir {
            local_dir: dir.join("local"),
            secrets_dir: dir.join("secrets"),
            tmp_dir: dir.join("tmp"),
            shared_alloc_dir: self.shared_dir.clone(),
            logs_dir: self.logs_dir.clone(),
            dir,
        })
    }

    /// Moves the data a sticky `ephemeral_disk` keeps from `previous` (the allocation this
    /// one replaces) into this one, as Nomad's `AllocDir.Move`: `alloc/data`, and the `local/`
    /// of each task named in `tasks` that `previous` has. A move (rename), not a copy, so both
    /// must be on one filesystem, as they are under one data dir. Only real directories are
    /// moved: a path of `previous` that is a symlink (a task may have made one) is left where
    /// it is, so nothing outside the alloc dirs is ever reached through it. Builds this
    /// allocation's shared dirs first; answers what was moved.
    pub fn move_from(
        &self,
        previous: &AllocDir,
        tasks: &[String],
    ) -> Result<Vec<PathBuf>, AllocDirError> {
        self.build()?;
        let mut moved = Vec::new();
        if move_dir_beneath(&previous.root, &self.root, Path::new("alloc"), "data")? {
            moved.push(self.shared_data_dir.clone());
        }
        for task in tasks {
            let (Ok(from), Ok(to)) = (previous.task_dir(task), self.task_dir(task)) else {
                continue;
            };
            if !is_real_dir(&from.dir) {
                continue;
            }
            create_dir_with_mode(&to.dir, 0o777)?;
            if move_dir_beneath(&previous.root, &self.root, Path::new(task), "local")? {
                moved.push(to.local_dir);
            }
        }
        // A symlink moved in and removed again left the shared data dir missing.
        self.build()?;
        Ok(moved)
    }

    /// Unmounts the secrets tmpfs of every task (lazily: a process still inside keeps its view
    /// until it leaves). For an allocation whose tasks will not run again; the dirs stay.
    pub fn unmount_secrets(&self) {
        if let Ok(entries) = fs::read_dir(&self.root) {
            for entry in entries.flatten() {
                let secrets = entry.path().join("secrets");
                if is_mount_point(&secrets) {
                    unmount_quietly(&secrets);
                }
            }
        }
    }

    /// Removes the whole alloc dir, unmounting any task secrets tmpfs first. Missing dirs are
    /// fine (destroy is idempotent).
    pub fn destroy(&self) -> Result<(), AllocDirError> {
        self.unmount_secrets();
        match fs::remove_dir_all(&self.root) {
            Ok(()) => Ok(()),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(AllocDirError::Remove {
                path: self.root.clone(),
                source,
            }),
        }
    }
}

/// Unmounts every mount under `alloc_root` that belongs to an allocation not in `live` (an
/// allocation gone while no agent ran, or left by an agent that crashed); `mountinfo` is the
/// text of `/proc/self/mountinfo`. Answers how many were unmounted.
pub fn unmount_leftovers(
    alloc_root: &Path,
    live: &std::collections::HashSet<String>,
    mountinfo: &str,
) -> usize {
    let mut leftovers: Vec<PathBuf> = mountinfo
        .lines()
        .filter_map(crate::mountinfo::mount_point_of_mountinfo_line)
        .map(PathBuf::from)
        .filter(|mount_point| {
            let Ok(inside) = mount_point.strip_prefix(alloc_root) else {
                return false;
            };
            match inside.components().next() {
                Some(Component::Normal(alloc_id)) => {
                    !live.contains(alloc_id.to_string_lossy().as_ref())
                }
                _ => false,
            }
        })
        .collect();
    // Deepest first, so a mount stacked inside another goes before it.
    leftovers.sort_by_key(|path| std::cmp::Reverse(path.components().count()));
    leftovers.dedup();
    for mount_point in &leftovers {
        unmount_quietly(mount_point);
    }
    leftovers.len()
}

/// The directory of one task inside its alloc dir.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskDir {
    /// `<alloc>/<task>`.
    pub dir: PathBuf,
    /// `<alloc>/<task>/local` (NOMAD_TASK_DIR).
    pub local_dir: PathBuf,
    /// `<alloc>/<task>/secrets` (NOMAD_SECRETS_DIR), 0700.
    pub secrets_dir: PathBuf,
    /// `<alloc>/<task>/tmp`.
    pub tmp_dir: PathBuf,
    /// `<alloc>/alloc` (NOMAD_ALLOC_DIR).
    pub shared_alloc_dir: PathBuf,
    /// `<alloc>/alloc/logs`.
    pub logs_dir: PathBuf,
}

/// What [`TaskDir::build`] did with the secrets dir.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretsBacking {
    /// A private tmpfs is mounted on it (never written to disk).
    Tmpfs,
    /// A plain 0700 directory (tmpfs not wanted or not possible).
    PlainDirectory,
}

impl TaskDir {
    /// Creates the task's dirs (idempotent). With `secrets_tmpfs`, mounts a tmpfs of
    /// `tmpfs_bytes` on `secrets` unless one is already mounted there.
    pub fn build(
        &self,
        secrets_tmpfs: bool,
        tmpfs_bytes: u64,
    ) -> Result<SecretsBacking, AllocDirError> {
        create_dir_with_mode(&self.dir, 0o777)?;
        create_dir_with_mode(&self.local_dir, 0o777)?;
        create_dir_with_mode(&self.tmp_dir, 0o1777)?;
        create_dir_with_mode(&self.secrets_dir, 0o700)?;
        if is_mount_point(&self.secrets_dir) {
            return Ok(SecretsBacking::Tmpfs);
        }
        if secrets_tmpfs && mount_secrets_tmpfs(&self.secrets_dir, tmpfs_bytes) {
            return Ok(SecretsBacking::Tmpfs);
        }
        Ok(SecretsBacking::PlainDirectory)
    }
}

/// Whether `path` is a directory itself, not a symlink to one.
fn is_real_dir(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|meta| meta.file_type().is_dir())
}

/// Moves the directory `<from_root>/<parent>/<name>` to `<to_root>/<parent>/<name>` (which may
/// be missing or an empty directory; anything else makes the rename fail, and is left alone),
/// without a check a swap could undo: both parents are opened through no symlink
/// (`openat2(RESOLVE_NO_SYMLINKS)` beneath their alloc dir, itself opened `O_NOFOLLOW`), the
/// entry is renamed between those descriptors (a rename never follows its last component), and
/// what arrived is then looked at where no task runs yet: anything but a directory (a symlink a
/// task planted, even one swapped in after any look before) is removed again and not counted.
/// Answers whether a directory was moved (`false` when `from` has none).
fn move_dir_beneath(
    from_root: &Path,
    to_root: &Path,
    parent: &Path,
    name: &str,
) -> Result<bool, AllocDirError> {
    use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};
    let from = from_root.join(parent).join(name);
    let to = to_root.join(parent).join(name);
    let failed = |source: io::Error| AllocDirError::Move {
        from: from.clone(),
        to: to.clone(),
        source,
    };
    let open_parent = |root: &Path| {
        let root = rustix::fs::open(
            root,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        rustix::fs::openat2(
            &root,
            parent,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
        )
    };
    let from_parent = match open_parent(from_root) {
        Ok(fd) => fd,
        // Nothing to move, or a symlink on the way: nothing is moved through it.
        Err(_) => return Ok(false),
    };
    let to_parent = open_parent(to_root).map_err(|errno| failed(errno.into()))?;
    // Only an empty one goes; a full one makes the rename fail below.
    let _ = rustix::fs::unlinkat(&to_parent, name, AtFlags::REMOVEDIR);
    match rustix::fs::renameat(&from_parent, name, &to_parent, name) {
        Ok(()) => {}
        Err(rustix::io::Errno::NOENT) => return Ok(false),
        Err(errno) => return Err(failed(errno.into())),
    }
    let arrived = rustix::fs::statat(&to_parent, name, AtFlags::SYMLINK_NOFOLLOW)
        .map_err(|errno| failed(errno.into()))?;
    if FileType::from_raw_mode(arrived.st_mode) != FileType::Directory {
        rustix::fs::unlinkat(&to_parent, name, AtFlags::empty())
            .map_err(|errno| failed(errno.into()))?;
        return Ok(false);
    }
    Ok(true)
}

fn create_dir_with_mode(path: &Path, mode: u32) -> Result<(), AllocDirError> {
    let create_error = |source| AllocDirError::Create {
        path: path.to_path_buf(),
        source,
    };
    match fs::create_dir(path) {
        Ok(()) => {}
        Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {}
        Err(error) => return Err(create_error(error)),
    }
    // Opened without following a symlink: a task can write its own task dir (and a raw_exec
    // task any), and a symlink planted where a directory belongs is refused, never chmodded
    // (or mounted on) through. Set explicitly: the process umask must not weaken or widen
    // what the layout promises.
    use rustix::fs::{Mode, OFlags};
    let dir = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|errno| match errno {
        rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR => AllocDirError::NotADirectory {
            path: path.to_path_buf(),
        },
        other => create_error(other.into()),
    })?;
    rustix::fs::fchmod(&dir, Mode::from_raw_mode(mode)).map_err(|errno| create_error(errno.into()))
}

/// A dir is a mount point when it sits on a different device than its parent.
fn is_mount_point(path: &Path) -> bool {
    let Some(parent) = path.parent() else {
        return false;
    };
    match (fs::metadata(path), fs::metadata(parent)) {
        (Ok(own), Ok(parent)) => own.dev() != parent.dev(),
        _ => false,
    }
}

fn mount_secrets_tmpfs(secrets_dir: &Path, tmpfs_bytes: u64) -> bool {
    use nix::mount::{MsFlags, mount};
    let options = format!("size={tmpfs_bytes},mode=0700");
    let mounted = mount(
        Some("tmpfs"),
        secrets_dir,
        Some("tmpfs"),
        MsFlags::MS_NOEXEC | MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(options.as_str()),
    );
    match mounted {
        Ok(()) => true,
        Err(errno) => {
            tracing::debug!(path = %secrets_dir.display(), %errno, "secrets tmpfs not mounted; using a private dir");
            false
        }
    }
}

fn unmount_quietly(path: &Path) {
    if let Err(errno) = nix::mount::umount2(path, nix::mount::MntFlags::MNT_DETACH) {
        tracing::warn!(path = %path.display(), %errno, "failed to unmount");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_sticky_move_takes_data_and_task_local_dirs_and_follows_no_symlink()
    -> Result<(), Box<dyn std::error::Error>> {
        let data = tempfile::tempdir()?;
        let root = data.path().join("alloc");
        let previous = AllocDir::new(&root, "old")?;
        previous.build()?;
        fs::write(previous.shared_data_dir.join("kept"), "data")?;
        let web = previous.task_dir("web")?;
        web.build(false, 0)?;
        fs::write(web.local_dir.join("cache"), "local")?;
        // A task replaced its local dir with a link out of the alloc dir.
        let outside = data.path().join("outside");
        fs::create_dir(&outside)?;
        fs::write(outside.join("secret"), "not ours")?;
        let db = previous.task_dir("db")?;
        fs::create_dir_all(&db.dir)?;
        std::os::unix::fs::symlink(&outside, &db.local_dir)?;

        let next = AllocDir::new(&root, "new")?;
        let tasks = ["web", "db", "gone"].map(str::to_owned);
        let moved = next.move_from(&previous, &tasks)?;
        assert_eq!(
            moved,
            vec![
                next.shared_data_dir.clone(),
                next.task_dir("web")?.local_dir
            ]
        );
        assert_eq!(
            fs::read_to_string(next.shared_data_dir.join("kept"))?,
            "data"
        );
        assert_eq!(
            fs::read_to_string(next.task_dir("web")?.local_dir.join("cache"))?,
            "local"
        );
        assert!(!previous.shared_data_dir.exists(), "moved, not copied");
        assert!(!next.task_dir("db")?.local_dir.exists());
        assert_eq!(fs::read_to_string(outside.join("secret"))?, "not ours");

        // A previous data dir that is a symlink is not followed either.
        let linked = AllocDir::new(&root, "linked")?;
        linked.build()?;
        fs::remove_dir(&linked.shared_data_dir)?;
        std::os::unix::fs::symlink(&outside, &linked.shared_data_dir)?;
        let after = AllocDir::new(&root, "after")?;
        assert!(after.move_from(&linked, &[])?.is_empty());
        assert!(outside.join("secret").exists());
        assert!(fs::symlink_metadata(&after.shared_data_dir)?.is_dir());

        // A task dir that is itself a symlink (an intermediate directory), absolute or
        // relative, to a directory outside with a `local/` of its own: nothing is moved from it.
        let hostile = AllocDir::new(&root, "hostile")?;
        hostile.build()?;
        fs::create_dir_all(outside.join("local"))?;
        fs::write(outside.join("local/host-file"), "host")?;
        std::os::unix::fs::symlink(&outside, hostile.root.join("abs"))?;
        std::os::unix::fs::symlink("../../outside", hostile.root.join("rel"))?;
        // And a data dir that is a relative symlink climbing out.
        fs::remove_dir(&hostile.shared_data_dir)?;
        std::os::unix::fs::symlink("../../../outside", &hostile.shared_data_dir)?;
        let last = AllocDir::new(&root, "last")?;
        let tasks = ["abs", "rel"].map(str::to_owned);
        assert!(last.move_from(&hostile, &tasks)?.is_empty());
        assert_eq!(fs::read_to_string(outside.join("local/host-file"))?, "host");
        assert!(!last.task_dir("abs")?.local_dir.exists());
        assert!(!last.task_dir("rel")?.local_dir.exists());
        assert!(fs::symlink_metadata(&last.shared_data_dir)?.is_dir());
        assert_eq!(fs::read_dir(&last.shared_data_dir)?.count(), 0);
        Ok(())
    }

    /// The swap the move cannot see coming: the entry becomes a symlink after anything could
    /// have looked at it. The move renames whatever is there and then looks at what arrived, so
    /// the symlink is removed rather than kept as the new allocation's directory.
    #[test]
    fn a_sticky_dir_swapped_for_a_symlink_mid_move_never_becomes_the_new_dir()
    -> Result<(), Box<dyn std::error::Error>> {
        let data = tempfile::tempdir()?;
        let root = data.path().join("alloc");
        let outside = data.path().join("outside");
        fs::create_dir(&outside)?;
        fs::write(outside.join("secret"), "not ours")?;
        let previous = AllocDir::new(&root, "old")?;
        previous.build()?;
        let web = previous.task_dir("web")?;
        web.build(false, 0)?;
        let next = AllocDir::new(&root, "new")?;
        next.build()?;
        fs::create_dir_all(next.task_dir("web")?.dir)?;
        // The swap lands between any look and the rename: here, before the move's own steps.
        fs::remove_dir(&web.local_dir)?;
        std::os::unix::fs::symlink(&outside, &web.local_dir)?;
        assert!(!move_dir_beneath(
            &previous.root,
            &next.root,
            Path::new("web"),
            "local"
        )?);
        assert!(fs::symlink_metadata(next.task_dir("web")?.local_dir).is_err());
        assert_eq!(fs::read_to_string(outside.join("secret"))?, "not ours");
        Ok(())
    }

    #[test]
    fn layout_matches_nomad_and_secrets_is_private() -> Result<(), Box<dyn std::error::Error>> {
        let data = tempfile::tempdir()?;
        let alloc_dir = AllocDir::new(data.path(), "a1")?;
        alloc_dir.build()?;
        let task_dir = alloc_dir.task_dir("web")?;
        let backing = task_dir.build(true, 1024 * 1024)?;
        for dir in [
            "a1/alloc/data",
            "a1/alloc/logs",
            "a1/alloc/tmp",
            "a1/web/local",
            "a1/web/secrets",
            "a1/web/tmp",
        ] {
            assert!(data.path().join(dir).is_dir(), "{dir} missing");
        }
        let mode = fs::metadata(&task_dir.secrets_dir)?.permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        // Building again is harmless and keeps the same backing.
        assert_eq!(task_dir.build(true, 1024 * 1024)?, backing);
        if backing == SecretsBacking::Tmpfs {
            assert!(is_mount_point(&task_dir.secrets_dir));
        }
        alloc_dir.destroy()?;
        assert!(!alloc_dir.root.exists());
        alloc_dir.destroy()?;
        Ok(())
    }

    fn secrets_tmpfs(data: &Path, alloc_id: &str) -> Result<TaskDir, Box<dyn std::error::Error>> {
        let alloc_dir = AllocDir::new(data, alloc_id)?;
        alloc_dir.build()?;
        let task_dir = alloc_dir.task_dir("web")?;
        let backing = task_dir.build(true, 1024 * 1024)?;
        if backing != SecretsBacking::Tmpfs {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "CI must run this as root, where a tmpfs can be mounted"
            );
            return Err("no tmpfs here (not root)".into());
        }
        Ok(task_dir)
    }

    /// Regression: the secrets tmpfs of allocations that were gone when an agent started (or
    /// left by an agent that crashed) stayed mounted forever.
    #[test]
    fn leftover_mounts_of_gone_allocations_are_unmounted_and_live_ones_kept()
    -> Result<(), Box<dyn std::error::Error>> {
        let data = tempfile::tempdir()?;
        let (live, gone) = match (
            secrets_tmpfs(data.path(), "live"),
            secrets_tmpfs(data.path(), "gone"),
        ) {
            (Ok(live), Ok(gone)) => (live, gone),
            _ => {
                eprintln!("skipping: needs root to mount a tmpfs");
                return Ok(());
            }
        };
        let keep = std::collections::HashSet::from(["live".to_string()]);
        let mountinfo = fs::read_to_string("/proc/self/mountinfo")?;
        assert_eq!(unmount_leftovers(data.path(), &keep, &mountinfo), 1);
        assert!(!is_mount_point(&gone.secrets_dir));
        assert!(is_mount_point(&live.secrets_dir));
        let mountinfo = fs::read_to_string("/proc/self/mountinfo")?;
        assert_eq!(unmount_leftovers(data.path(), &keep, &mountinfo), 0);

        AllocDir::new(data.path(), "live")?.unmount_secrets();
        assert!(!is_mount_point(&live.secrets_dir));
        assert!(live.secrets_dir.is_dir(), "the dirs stay");
        Ok(())
    }

    #[test]
    fn a_task_dir_replaced_by_a_symlink_is_refused_and_never_chmodded_through()
    -> Result<(), Box<dyn std::error::Error>> {
        let data = tempfile::tempdir()?;
        let host = tempfile::tempdir()?;
        fs::set_permissions(host.path(), fs::Permissions::from_mode(0o700))?;
        let alloc_dir = AllocDir::new(data.path(), "a1")?;
        alloc_dir.build()?;
        let task_dir = alloc_dir.task_dir("web")?;
        task_dir.build(false, 0)?;
        // What a task (or a prestart task) can do between two starts of the task.
        for planted in [&task_dir.local_dir, &task_dir.secrets_dir] {
            fs::remove_dir_all(planted)?;
            std::os::unix::fs::symlink(host.path(), planted)?;
            let error = task_dir.build(false, 0).unwrap_err();
            assert!(
                matches!(&error, AllocDirError::NotADirectory { path } if path == planted),
                "{error}"
            );
            assert!(error.to_string().contains("symlink"), "{error}");
            assert_eq!(
                fs::metadata(host.path())?.permissions().mode() & 0o777,
                0o700
            );
            fs::remove_file(planted)?;
            fs::create_dir(planted)?;
        }
        Ok(())
    }

    #[test]
    fn names_that_are_not_one_component_are_refused() {
        for bad in ["", ".", "..", "a/b", "x\0"] {
            assert!(
                validate_path_component("task name", bad).is_err(),
                "{bad:?}"
            );
        }
        assert!(validate_path_component("task name", "web-1").is_ok());
    }

    #[test]
    fn join_within_refuses_escapes() -> Result<(), AllocDirError> {
        let base = Path::new("/data/alloc/a1/web");
        assert_eq!(join_within(base, "local/x")?, base.join("local/x"));
        assert_eq!(join_within(base, "/local/./y")?, base.join("local/y"));
        assert_eq!(join_within(base, "local/../z")?, base.join("z"));
        assert!(join_within(base, "../other").is_err());
        assert!(join_within(base, "local/../../x").is_err());
        Ok(())
    }
}
