//! Reading and writing a task's files strictly beneath its task dir: every path a template names
//! (`source`, `destination`, `file`) is resolved by the kernel in one step under the task dir's
//! descriptor (`openat2` with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`), so neither `..` nor a
//! symlink the task planted can reach outside it.
//!
//! **Not** a fallback for kernels without `openat2` (5.6+): there the call fails with an error
//! and the template is not rendered.

use std::io::{Read as _, Write as _};
use std::os::fd::OwnedFd;
use std::path::Path;

use rustix::fs::{Mode, OFlags, ResolveFlags};

/// A file that cannot be read or written beneath the task dir.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct BeneathError {
    pub path: String,
    pub message: String,
}

/// Longest file a template reads (a source or through `file`).
pub const MAX_READ_BYTES: u64 = 16 * 1024 * 1024;

fn error(path: &str, message: impl std::fmt::Display) -> BeneathError {
    BeneathError {
        path: path.to_string(),
        message: message.to_string(),
    }
}

/// `path` with a leading `/` dropped: Nomad reads absolute template paths as task-dir relative.
fn relative(path: &str) -> &str {
    let trimmed = path.trim_start_matches('/');
    if trimmed.is_empty() { "." } else { trimmed }
}

fn open_root(root: &Path) -> Result<OwnedFd, BeneathError> {
    rustix::fs::open(
        root,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|errno| error(&root.display().to_string(), errno))
}

fn open_beneath(
    root: &OwnedFd,
    path: &str,
    flags: OFlags,
    mode: Mode,
) -> Result<OwnedFd, BeneathError> {
    rustix::fs::openat2(
        root,
        relative(path),
        flags | OFlags::CLOEXEC,
        mode,
        ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
    )
    .map_err(|errno| match errno {
        rustix::io::Errno::XDEV => error(path, "escapes the task directory"),
        other => error(path, other),
    })
}

/// The contents of the regular file `path` beneath `root`, as UTF-8.
pub fn read_to_string(root: &Path, path: &str) -> Result<String, BeneathError> {
    let root_fd = open_root(root)?;
    let fd = open_beneath(
        &root_fd,
        path,
        OFlags::RDONLY | OFlags::NOCTTY,
        Mode::empty(),
    )?;
    let file = std::fs::File::from(fd);
    let metadata = file.metadata().map_err(|e| error(path, e))?;
    if !metadata.is_file() {
        return Err(error(path, "not a regular file"));
    }
    let mut contents = String::new();
    file.take(MAX_READ_BYTES + 1)
        .read_to_string(&mut contents)
        .map_err(|e| error(path, e))?;
    if contents.len() as u64 > MAX_READ_BYTES {
        return Err(error(path, format!("larger than {MAX_READ_BYTES} bytes")));
    }
    Ok(contents)
}

/// Creates the directories of `dir` beneath `root` (0755), each resolved beneath it.
fn make_dirs(root: &OwnedFd, dir: &str) -> Result<OwnedFd, BeneathError> {
    let mut current = String::new();
    for part in Path::new(relative(dir)).components() {
        let part = match part {
            std::path::Component::Normal(part) => part,
            std::path::Component::ParentDir => {
                return Err(error(dir, "escapes the task directory"));
            }
            _ => continue,
        };
        if !current.is_empty() {
            current.push('/');
        }
        current.push_str(&part.to_string_lossy());
        match rustix::fs::mkdirat(
            &open_beneath(
                root,
                Path::new(&current)
                    .parent()
                    .map_or(".".to_string(), |p| p.display().to_string())
                    .as_str(),
                OFlags::PATH | OFlags::DIRECTORY,
                Mode::empty(),
            )?,
            part,
            Mode::from_raw_mode(0o755),
        ) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(errno) => return Err(error(&current, errno)),
        }
    }
    open_beneath(
        root,
        if current.is_empty() { "." } else { &current },
        OFlags::PATH | OFlags::DIRECTORY,
        Mode::empty(),
    )
}

/// How a rendered file is written.
#[derive(Debug, Clone, Copy)]
pub struct WriteOptions {
    pub mode: u32,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
}

/// Writes `contents` to `path` beneath `root` atomically (a temp file beside it, renamed over
/// it), creating its directories; a symlink at `path` is replaced, never followed.
pub fn write_atomic(
    root: &Path,
    path: &str,
    contents: &[u8],
    options: WriteOptions,
) -> Result<(), BeneathError> {
    let relative_path = Path::new(relative(path));
    let name = relative_path
        .file_name()
        .ok_or_else(|| error(path, "names no file"))?;
    let parent = relative_path
        .parent()
        .map_or(String::new(), |parent| parent.display().to_string());
    let root_fd = open_root(root)?;
    let dir = make_dirs(&root_fd, &parent)?;
    let temp_name = format!(".{}.drover-tmp", name.to_string_lossy());
    let _ = rustix::fs::unlinkat(&dir, temp_name.as_str(), rustix::fs::AtFlags::empty());
    let fd = rustix::fs::openat(
        &dir,
        temp_name.as_str(),
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )
    .map_err(|errno| error(path, errno))?;
    let mut file = std::fs::File::from(fd);
    let written = file
        .write_all(contents)
        .and_then(|()| file.sync_all())
        .map_err(|e| error(path, e))
        .and_then(|()| {
            if options.uid.is_some() || options.gid.is_some() {
                rustix::fs::fchown(
                    &file,
                    options.uid.map(rustix::fs::Uid::from_raw),
                    options.gid.map(rustix::fs::Gid::from_raw),
                )
                .map_err(|errno| error(path, format!("chown: {errno}")))?;
            }
            rustix::fs::fchmod(&file, Mode::from_raw_mode(options.mode & 0o7777))
                .map_err(|errno| error(path, format!("chmod: {errno}")))
        })
        .and_then(|()| {
            rustix::fs::renameat(&dir, temp_name.as_str(), &dir, name)
                .map_err(|errno| error(path, errno))
        });
    if written.is_err() {
        let _ = rustix::fs::unlinkat(&dir, temp_name.as_str(), rustix::fs::AtFlags::empty());
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_beneath_and_refuses_escapes() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("local")).unwrap();
        std::fs::write(dir.path().join("local/a.txt"), "hello").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.path().join("local/out")).unwrap();
        assert_eq!(read_to_string(dir.path(), "local/a.txt").unwrap(), "hello");
        assert_eq!(read_to_string(dir.path(), "/local/a.txt").unwrap(), "hello");
        let escape = read_to_string(dir.path(), "../x").unwrap_err();
        assert!(escape.to_string().contains("escapes"), "{escape}");
        assert!(read_to_string(dir.path(), "local/out").is_err());
    }

    #[test]
    fn writes_atomically_with_mode_and_replaces_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("victim");
        std::fs::write(&target, "keep").unwrap();
        std::fs::create_dir(dir.path().join("local")).unwrap();
        std::os::unix::fs::symlink(&target, dir.path().join("local/conf")).unwrap();
        let options = WriteOptions {
            mode: 0o640,
            uid: None,
            gid: None,
        };
        write_atomic(dir.path(), "local/conf", b"new", options).unwrap();
        write_atomic(dir.path(), "local/deep/er/x.env", b"A=1", options).unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("local/conf")).unwrap(),
            "new"
        );
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(dir.path().join("local/conf"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o640);
        assert_eq!(
            std::fs::read_to_string(dir.path().join("local/deep/er/x.env")).unwrap(),
            "A=1"
        );
        assert!(write_atomic(dir.path(), "../../etc/x", b"no", options).is_err());
    }
}
