//! Resolving a path beneath a directory in one step, by the kernel, and pinning what it names:
//! `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS` from a descriptor of the root, so no
//! `..`, no absolute symlink and no relative symlink that climbs out can lead outside it, and no
//! component swapped for a symlink between a check and a use can either: there is no check, only
//! the one open. Symlinks that stay beneath the root are followed (as Go's `os.Root` does).
//!
//! The result is an `O_PATH` descriptor, and [`fd_path`] its `/proc/self/fd/<n>` link: mounting
//! on it or from it reaches the very object that was resolved, whatever is renamed or replaced
//! meanwhile (how the exec driver binds into a task root). Another process cannot be handed the
//! link: one in another mount namespace cannot mount from it (the kernel refuses a bind from a
//! foreign namespace's mount, and runc mounts in the container's new namespace), so [`Staged`]
//! bind-mounts the pinned object at a private path of the caller's namespace instead, which the
//! namespace copied for a container still holds, and detaches it once the other side has made
//! its own mount (how the docker driver hands over its bind sources).
//!
//! **Not** for: deciding which root a path belongs to (the callers know: the allocation dir,
//! the task dir), or kernels without `openat2` (5.6+): there the open fails and says so.

use std::ffi::OsStr;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

/// What to do when the path does not exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missing {
    /// It is an error ([`BeneathError::Missing`]).
    Fail,
    /// Missing directories are created (0755), each beneath the root, as the Docker Engine
    /// creates a missing bind source.
    CreateDirs,
}

/// A path that cannot be resolved beneath its root.
#[derive(Debug, thiserror::Error)]
pub enum BeneathError {
    #[error("{path} resolves outside {root} (through \"..\" or a symlink)")]
    Escapes { root: PathBuf, path: PathBuf },
    #[error("{path} does not exist")]
    Missing { path: PathBuf },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn resolve_flags() -> ResolveFlags {
    ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS
}

fn path_flags() -> OFlags {
    OFlags::PATH | OFlags::CLOEXEC
}

/// Opens `root` itself (trusted: a directory the client made) as the anchor of resolutions.
pub fn open_root(root: &Path) -> Result<OwnedFd, BeneathError> {
    rustix::fs::open(root, path_flags() | OFlags::DIRECTORY, Mode::empty()).map_err(|errno| {
        BeneathError::Io {
            path: root.to_path_buf(),
            source: errno.into(),
        }
    })
}

/// `relative` (an absolute path is taken as relative to the root) resolved beneath `root` and
/// opened `O_PATH` (see the module docs).
pub fn open(root: &Path, relative: &Path, missing: Missing) -> Result<OwnedFd, BeneathError> {
    let root_fd = open_root(root)?;
    open_at(&root_fd, root, relative, missing)
}

/// As [`open`], from an already open root (`root` names it in errors).
pub fn open_at(
    root_fd: &OwnedFd,
    root: &Path,
    relative: &Path,
    missing: Missing,
) -> Result<OwnedFd, BeneathError> {
    let relative = strip_root(relative);
    let shown = root.join(&relative);
    let error = |errno: Errno| match errno {
        Errno::XDEV | Errno::LOOP => BeneathError::Escapes {
            root: root.to_path_buf(),
            path: shown.clone(),
        },
        Errno::NOENT => BeneathError::Missing {
            path: shown.clone(),
        },
        other => BeneathError::Io {
            path: shown.clone(),
            source: other.into(),
        },
    };
    match resolve(root_fd, &relative) {
        Err(Errno::NOENT) if missing == Missing::CreateDirs => {}
        other => return other.map_err(error),
    }
    // Create what is missing one directory at a time, every parent resolved beneath the root
    // again, so a component replaced meanwhile cannot lead a `mkdir` outside.
    let mut prefix = PathBuf::new();
    for component in relative.components() {
        let parent = resolve(root_fd, &prefix).map_err(error)?;
        match component {
            Component::Normal(name) => {
                make_dir(&parent, name).map_err(error)?;
                prefix.push(name);
            }
            Component::ParentDir => prefix.push(".."),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
    resolve(root_fd, &relative).map_err(error)
}

fn make_dir(parent: &OwnedFd, name: &OsStr) -> Result<(), Errno> {
    match rustix::fs::mkdirat(parent, name, Mode::from_raw_mode(0o755)) {
        Ok(()) | Err(Errno::EXIST) => Ok(()),
        Err(errno) => Err(errno),
    }
}

fn resolve(root_fd: &OwnedFd, relative: &Path) -> Result<OwnedFd, Errno> {
    let path: &Path = if relative.as_os_str().is_empty() {
        Path::new(".")
    } else {
        relative
    };
    rustix::fs::openat2(root_fd, path, path_flags(), Mode::empty(), resolve_flags())
}

/// `path` without its leading `/` (a root-relative path written as absolute).
fn strip_root(path: &Path) -> PathBuf {
    path.components()
        .filter(|component| !matches!(component, Component::RootDir | Component::Prefix(_)))
        .collect()
}

/// The `/proc/self/fd/<n>` link of a descriptor of this process: a path this process opens or
/// mounts (as source or target) to reach exactly the object the descriptor holds.
pub fn fd_path(fd: &impl AsFd) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", fd.as_fd().as_raw_fd()))
}

/// Creates the regular file `relative` beneath the root (empty, 0644, its missing directories
/// too) unless something is there already, and opens what is there `O_PATH`: a mount point for
/// a file. A symlink at the name is never written through (`O_NOFOLLOW`).
pub fn create_file_at(
    root_fd: &OwnedFd,
    root: &Path,
    relative: &Path,
) -> Result<OwnedFd, BeneathError> {
    let relative = strip_root(relative);
    if let (Some(parent), Some(name)) = (relative.parent(), relative.file_name()) {
        let parent_fd = open_at(root_fd, root, parent, Missing::CreateDirs)?;
        match rustix::fs::openat(
            &parent_fd,
            name,
            OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o644),
        ) {
            Ok(_) | Err(Errno::EXIST) => {}
            Err(errno) => {
                return Err(BeneathError::Io {
                    path: root.join(&relative),
                    source: errno.into(),
                });
            }
        }
    }
    open_at(root_fd, root, &relative, Missing::Fail)
}

/// The path the kernel gives the object behind `fd` now (for messages and logs; never to be
/// used to reach it again, which is what [`fd_path`] is for).
pub fn current_path(fd: &impl AsFd) -> Option<PathBuf> {
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_fd().as_raw_fd())).ok()
}

/// A pinned object bind-mounted (recursively, so a tmpfs mounted beneath it comes along) at a
/// private path, for a process that mounts it in a copy of this mount namespace (the Docker
/// Engine's runc). The mount is detached and its mount point removed on drop: once the other
/// side has mounted it, its copy no longer needs this one.
#[derive(Debug)]
pub struct Staged {
    path: PathBuf,
}

impl Staged {
    /// Mounts what `pinned` holds at `at` (a path that must not exist yet, in a directory no
    /// task can write), creating the mount point as a directory or an empty file to match.
    pub fn mount(pinned: &OwnedFd, at: &Path) -> Result<Staged, BeneathError> {
        let io = |source: std::io::Error| BeneathError::Io {
            path: at.to_path_buf(),
            source,
        };
        let stat = rustix::fs::fstat(pinned).map_err(|errno| io(errno.into()))?;
        if rustix::fs::FileType::from_raw_mode(stat.st_mode) == rustix::fs::FileType::Directory {
            std::fs::create_dir(at).map_err(io)?;
        } else {
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(at)
                .map_err(io)?;
        }
        let staged = Staged {
            path: at.to_path_buf(),
        };
        nix::mount::mount(
            Some(fd_path(pinned).as_path()),
            at,
            None::<&str>,
            nix::mount::MsFlags::MS_BIND | nix::mount::MsFlags::MS_REC,
            None::<&str>,
        )
        .map_err(|errno| io(std::io::Error::from_raw_os_error(errno as i32)))?;
        Ok(staged)
    }

    /// Where the object is mounted.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Detaches every mount left at the entries of `dir` (by an earlier process that died
    /// before it dropped its [`Staged`]) and removes them.
    pub fn clear_dir(dir: &Path) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let _ = nix::mount::umount2(&path, nix::mount::MntFlags::MNT_DETACH);
            let _ = std::fs::remove_dir(&path).or_else(|_| std::fs::remove_file(&path));
        }
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        let _ = nix::mount::umount2(&self.path, nix::mount::MntFlags::MNT_DETACH);
        let _ = std::fs::remove_dir(&self.path).or_else(|_| std::fs::remove_file(&self.path));
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn paths_beneath_open_and_escapes_are_refused() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("task/local/in")).unwrap();
        symlink(outside.path(), root.path().join("task/local/abs")).unwrap();
        symlink("../../../..", root.path().join("task/local/climb")).unwrap();
        symlink("../../task/local/in", root.path().join("task/local/inside")).unwrap();

        let opened = open(root.path(), Path::new("task/local/in"), Missing::Fail).unwrap();
        assert_eq!(
            current_path(&opened).unwrap(),
            root.path().join("task/local/in")
        );
        // A symlink that stays beneath is followed.
        let followed = open(root.path(), Path::new("/task/local/inside"), Missing::Fail).unwrap();
        assert_eq!(
            current_path(&followed).unwrap(),
            root.path().join("task/local/in")
        );
        for escape in [
            "task/local/abs",
            "task/local/climb/etc",
            "task/../../x",
            "/../x",
        ] {
            let error = open(root.path(), Path::new(escape), Missing::CreateDirs).unwrap_err();
            assert!(
                matches!(error, BeneathError::Escapes { .. }),
                "{escape}: {error}"
            );
        }
        assert!(matches!(
            open(root.path(), Path::new("task/none"), Missing::Fail),
            Err(BeneathError::Missing { .. })
        ));
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    }

    #[test]
    fn missing_directories_are_created_beneath_and_never_through_a_symlink() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("local")).unwrap();
        symlink(outside.path(), root.path().join("local/out")).unwrap();
        let made = open(root.path(), Path::new("local/a/b"), Missing::CreateDirs).unwrap();
        assert!(root.path().join("local/a/b").is_dir());
        assert_eq!(current_path(&made).unwrap(), root.path().join("local/a/b"));
        let error = open(root.path(), Path::new("local/out/x"), Missing::CreateDirs).unwrap_err();
        assert!(matches!(error, BeneathError::Escapes { .. }), "{error}");
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_file_mount_point_is_created_beneath_and_a_planted_symlink_not_written_through() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let root_fd = open_root(root.path()).unwrap();
        let made = create_file_at(&root_fd, root.path(), Path::new("/etc/resolv.conf")).unwrap();
        assert!(root.path().join("etc/resolv.conf").is_file());
        assert_eq!(
            current_path(&made).unwrap(),
            root.path().join("etc/resolv.conf")
        );
        symlink(outside.path().join("f"), root.path().join("etc/hosts")).unwrap();
        assert!(create_file_at(&root_fd, root.path(), Path::new("/etc/hosts")).is_err());
        assert!(!outside.path().join("f").exists());
    }

    #[test]
    fn the_fd_path_keeps_reaching_the_object_after_a_swap_for_a_symlink() {
        // The race a textual check loses: the directory is resolved, then replaced by a
        // symlink out before the path is used. The pinned path still reaches the original.
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "host").unwrap();
        std::fs::create_dir(root.path().join("data")).unwrap();
        std::fs::write(root.path().join("data/mine"), "alloc").unwrap();
        let pinned = open(root.path(), Path::new("data"), Missing::Fail).unwrap();
        std::fs::rename(root.path().join("data"), root.path().join("moved")).unwrap();
        symlink(outside.path(), root.path().join("data")).unwrap();
        let through = fd_path(&pinned);
        assert_eq!(
            std::fs::read_to_string(through.join("mine")).unwrap(),
            "alloc"
        );
        assert!(!through.join("secret").exists());
    }

    #[test]
    fn a_staged_mount_shows_the_pinned_object_and_goes_on_drop() {
        if !crate::root_tests::root_test_may_run("mount(2)", true) {
            return;
        }
        let root = tempfile::tempdir().unwrap();
        let private = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("data")).unwrap();
        std::fs::write(root.path().join("data/mine"), "alloc").unwrap();
        std::fs::write(root.path().join("file"), "one file").unwrap();
        let pinned = open(root.path(), Path::new("data"), Missing::Fail).unwrap();
        let file = open(root.path(), Path::new("file"), Missing::Fail).unwrap();
        // Swapped for a symlink out after it was pinned: the stage still shows the original.
        std::fs::rename(root.path().join("data"), root.path().join("moved")).unwrap();
        symlink("/etc", root.path().join("data")).unwrap();
        let at = private.path().join("0");
        let staged = Staged::mount(&pinned, &at).unwrap();
        assert_eq!(
            std::fs::read_to_string(staged.path().join("mine")).unwrap(),
            "alloc"
        );
        let staged_file = Staged::mount(&file, &private.path().join("1")).unwrap();
        assert_eq!(
            std::fs::read_to_string(staged_file.path()).unwrap(),
            "one file"
        );
        drop(staged);
        drop(staged_file);
        assert!(!at.exists());
        assert_eq!(std::fs::read_dir(private.path()).unwrap().count(), 0);
    }
}
