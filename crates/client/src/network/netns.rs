//! Named network namespaces, as `ip netns` keeps them: an empty file in the namespace dir
//! (`/var/run/netns`) with the namespace bind-mounted on it, so it lives without any process
//! in it. The dir is made a shared mount (bound on itself first if it is not a mount point) so
//! that unmounting a namespace also reaches copies of the mount in other mount namespaces.
//!
//! The namespace is made on a thread of its own, which unshares its network namespace and
//! ends once the namespace is bound (the agent's other threads never change namespace).
//!
//! **Not** here: what is set up inside (the CNI plugins, see [`super::cni`]).

use std::fs;
use std::io;
use std::path::Path;

use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::sched::{CloneFlags, unshare};

use super::NetworkError;

/// `NSFS_MAGIC`: the file system type of a namespace file.
const NSFS_MAGIC: nix::libc::__fsword_t = 0x6e73_6673;

fn io_error(step: &str, path: &Path) -> impl FnOnce(io::Error) -> NetworkError {
    let step = format!("{step} {}", path.display());
    move |error| NetworkError::Namespace(format!("{step}: {error}"))
}

fn errno_error(step: &str, path: &Path) -> impl FnOnce(nix::errno::Errno) -> NetworkError {
    let step = format!("{step} {}", path.display());
    move |error| NetworkError::Namespace(format!("{step}: {error}"))
}

/// Whether `path` is a live, bound network namespace (not just the empty file left behind).
pub fn is_bound(path: &Path) -> bool {
    nix::sys::statfs::statfs(path)
        .map(|stat| stat.filesystem_type().0 == NSFS_MAGIC)
        .unwrap_or(false)
}

/// Makes `dir` exist as a shared mount point (what `ip netns add` does the first time).
fn prepare_dir(dir: &Path) -> Result<(), NetworkError> {
    fs::create_dir_all(dir).map_err(io_error("creating", dir))?;
    let shared = || {
        mount(
            None::<&str>,
            dir,
            None::<&str>,
            MsFlags::MS_SHARED | MsFlags::MS_REC,
            None::<&str>,
        )
    };
    if shared().is_ok() {
        return Ok(());
    }
    // Not a mount point yet: bind it on itself, then share it.
    mount(
        Some(dir),
        dir,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None::<&str>,
    )
    .map_err(errno_error("binding", dir))?;
    shared().map_err(errno_error("sharing", dir))
}

/// Creates the network namespace `path` (its dir is prepared first). An existing bound
/// namespace there is an error: the caller decides about reuse.
pub fn create(path: &Path) -> Result<(), NetworkError> {
    let dir = path
        .parent()
        .ok_or_else(|| NetworkError::Namespace(format!("{} has no parent", path.display())))?;
    prepare_dir(dir)?;
    if is_bound(path) {
        return Err(NetworkError::Namespace(format!(
            "{} already exists",
            path.display()
        )));
    }
    fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(io_error("creating", path))?;
    let target = path.to_path_buf();
    let bound = std::thread::Builder::new()
        .name("netns-create".to_string())
        .spawn(move || bind_new_namespace(&target))
        .map_err(io_error("starting a thread for", path))?
        .join()
        .unwrap_or_else(|_| {
            Err(NetworkError::Namespace(
                "the namespace thread panicked".to_string(),
            ))
        });
    if bound.is_err() {
        let _ = fs::remove_file(path);
    }
    bound
}

/// Binds the existing namespace `source` (another process's, `/proc/<pid>/ns/net`) on
/// `path`, so it is kept and entered by path as one made by [`create`].
pub fn bind_existing(source: &Path, path: &Path) -> Result<(), NetworkError> {
    let dir = path
        .parent()
        .ok_or_else(|| NetworkError::Namespace(format!("{} has no parent", path.display())))?;
    prepare_dir(dir)?;
    if is_bound(path) {
        return Err(NetworkError::Namespace(format!(
            "{} already exists",
            path.display()
        )));
    }
    fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(io_error("creating", path))?;
    let bound = mount(
        Some(source),
        path,
        None::<&str>,
        MsFlags::MS_BIND,
        None::<&str>,
    )
    .map_err(errno_error(
        &format!("binding {} on", source.display()),
        path,
    ));
    if bound.is_err() {
        let _ = fs::remove_file(path);
    }
    bound
}

/// Whether two namespace files name the same namespace (device and inode).
pub fn same_namespace(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (fs::metadata(a), fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// On a thread of its own: a new network namespace for this thread, bound on `target`.
fn bind_new_namespace(target: &Path) -> Result<(), NetworkError> {
    unshare(CloneFlags::CLONE_NEWNET)
        .map_err(errno_error("unsharing a network namespace for", target))?;
    mount(
        Some("/proc/thread-self/ns/net"),
        target,
        None::<&str>,
        MsFlags::MS_BIND,
        None::<&str>,
    )
    .map_err(errno_error("binding the network namespace on", target))
}

/// Unmounts and removes the namespace `path`. Safe to repeat; a missing one is fine.
pub fn remove(path: &Path) -> Result<(), NetworkError> {
    match umount2(path, MntFlags::MNT_DETACH) {
        Ok(()) | Err(nix::errno::Errno::EINVAL) | Err(nix::errno::Errno::ENOENT) => {}
        Err(error) => return Err(errno_error("unmounting", path)(error)),
    }
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(io_error("removing", path)(error)),
    }
}
