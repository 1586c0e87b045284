//! `/v1/client/fs/{ls,stat,cat,readat}/<alloc>` (and the file `stream`): read-only access to an
//! allocation's directory, confined to it even against a task that rewrites its own directory
//! while a request is under way.
//!
//! Every path is resolved *and* opened in one step beneath a descriptor of the alloc dir:
//! `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`, or, on kernels without it, a walk
//! that opens one component at a time with `O_NOFOLLOW` and resolves symlinks itself. Nothing
//! is looked up by name twice, so swapping a component for a symlink between two steps cannot
//! lead outside. `..` components and absolute paths that climb out are refused up front;
//! symlinks are followed only while they stay beneath (an absolute symlink target is refused).
//! Files are opened without following a final link, non-blocking, and only regular files are
//! read: a FIFO or a device is an error, never a hung thread. Reads hand back an open file and a
//! range, which the caller streams: nothing reads a whole file into memory.
//!
//! Not here: log streaming (see [`crate::logs`], which opens its files through
//! [`open_beneath`]) or anything that writes.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io::{Read, Seek, SeekFrom};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Component, Path};

use drover_structs::{AllocFileInfo, Timestamp, go_file_mode_string};
use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

use crate::error::ApiError;

const ESCAPES: &str = "path escapes the alloc directory";
/// How many symlinks one lookup may follow (the kernel's own limit).
const MAX_SYMLINKS: usize = 40;
/// How often a lookup is retried when the kernel saw a concurrent rename (`EAGAIN`).
const MAX_RETRIES: usize = 8;

/// How a path is looked up beneath the alloc dir.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolver {
    /// `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`, falling back to [`Resolver::Walk`]
    /// where the kernel lacks it (`ENOSYS`).
    Openat2,
    /// One `openat(O_NOFOLLOW)` per component, symlinks resolved here.
    Walk,
}

/// What an open is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// A handle to look at (`O_PATH`): metadata only, no side effect on the object.
    Look,
    /// A handle to read, non-blocking.
    Read,
    /// A directory to list.
    Directory,
}

impl Access {
    fn flags(self) -> OFlags {
        // `openat2` refuses `O_PATH` with any flag but these.
        let common = OFlags::CLOEXEC | OFlags::NOCTTY;
        match self {
            Access::Look => OFlags::PATH | OFlags::CLOEXEC,
            Access::Read => common | OFlags::RDONLY | OFlags::NONBLOCK,
            Access::Directory => common | OFlags::RDONLY | OFlags::NONBLOCK | OFlags::DIRECTORY,
        }
    }
}

/// The components of `requested` (relative to the alloc dir; a leading `/` is the alloc dir
/// itself), refusing any that climb.
fn relative_components(requested: &str) -> Result<Vec<OsString>, ApiError> {
    let mut parts = Vec::new();
    for component in Path::new(requested.trim_start_matches('/')).components() {
        match component {
            Component::Normal(part) => parts.push(part.to_os_string()),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Err(ApiError::bad_request(ESCAPES));
            }
        }
    }
    Ok(parts)
}

/// Opens `requested` beneath `alloc_dir` in one step (see the module docs).
pub fn open_beneath(
    alloc_dir: &Path,
    requested: &str,
    access: Access,
    resolver: Resolver,
) -> Result<std::fs::File, ApiError> {
    let parts = relative_components(requested)?;
    let root = rustix::fs::open(
        alloc_dir,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|_| ApiError::not_found("alloc directory not found"))?;
    let mut retries = 0;
    loop {
        let opened = match resolver {
            Resolver::Openat2 => match open_with_openat2(&root, &parts, access) {
                Err(Errno::NOSYS) => walk_beneath(&root, &parts, access),
                other => other,
            },
            Resolver::Walk => walk_beneath(&root, &parts, access),
        };
        match opened {
            Ok(fd) => return Ok(std::fs::File::from(fd)),
            Err(Errno::AGAIN) if retries < MAX_RETRIES => retries += 1,
            Err(errno) => return Err(open_error(errno, requested)),
        }
    }
}

fn open_error(errno: Errno, requested: &str) -> ApiError {
    match errno {
        Errno::XDEV => ApiError::bad_request(ESCAPES),
        Errno::NOENT => ApiError::not_found(format!("file {requested:?} not found")),
        Errno::LOOP => {
            ApiError::bad_request(format!("{requested:?}: too many levels of symbolic links"))
        }
        Errno::NOTDIR => {
            ApiError::bad_request(format!("{requested:?}: a component is not a directory"))
        }
        other => ApiError::internal(format!("opening {requested:?}: {other}")),
    }
}

fn open_with_openat2(root: &OwnedFd, parts: &[OsString], access: Access) -> Result<OwnedFd, Errno> {
    let path: std::path::PathBuf = if parts.is_empty() {
        ".".into()
    } else {
        parts.iter().collect()
    };
    rustix::fs::openat2(
        root,
        &path,
        access.flags(),
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
    )
}

/// The walk for kernels without `openat2`: each component is opened with `O_NOFOLLOW` relative
/// to the descriptor of its parent, so a component swapped for a symlink is seen as one (and
/// resolved here, beneath the root) rather than followed by the kernel.
fn walk_beneath(root: &OwnedFd, parts: &[OsString], access: Access) -> Result<OwnedFd, Errno> {
    // The directories entered below the root, innermost last; `..` pops one.
    let mut entered: Vec<OwnedFd> = Vec::new();
    let mut pending: VecDeque<OsString> = parts.iter().cloned().collect();
    let mut links_followed = 0;
    if pending.is_empty() {
        return rustix::fs::openat(root, ".", access.flags(), Mode::empty());
    }
    while let Some(name) = pending.pop_front() {
        if name == "." {
            if pending.is_empty() {
                let here = entered.last().unwrap_or(root);
                return rustix::fs::openat(here, ".", access.flags(), Mode::empty());
            }
            continue;
        }
        if name == ".." {
            if entered.pop().is_none() {
                return Err(Errno::XDEV);
            }
            if pending.is_empty() {
                let here = entered.last().unwrap_or(root);
                return rustix::fs::openat(here, ".", access.flags(), Mode::empty());
            }
            continue;
        }
        let parent = entered.last().unwrap_or(root);
        // An `O_PATH | O_NOFOLLOW` open of a symlink yields the link itself, which is then read
        // through that very descriptor: no second lookup by name.
        let fd = rustix::fs::openat(
            parent,
            &name,
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let looked = rustix::fs::fstat(&fd)?;
        let kind = rustix::fs::FileType::from_raw_mode(looked.st_mode);
        if kind != rustix::fs::FileType::Symlink {
            if pending.is_empty() {
                if access == Access::Look {
                    return Ok(fd);
                }
                // Opened again by name for reading: it must still be the object looked at.
                let opened = rustix::fs::openat(
                    parent,
                    &name,
                    access.flags() | OFlags::NOFOLLOW,
                    Mode::empty(),
                )?;
                let stat = rustix::fs::fstat(&opened)?;
                if stat.st_dev != looked.st_dev || stat.st_ino != looked.st_ino {
                    return Err(Errno::AGAIN);
                }
                return Ok(opened);
            }
            if kind != rustix::fs::FileType::Directory {
                return Err(Errno::NOTDIR);
            }
            entered.push(fd);
            continue;
        }
        let target = rustix::fs::readlinkat(&fd, "", Vec::new())?;
        links_followed += 1;
        if links_followed > MAX_SYMLINKS {
            return Err(Errno::LOOP);
        }
        let target = std::path::PathBuf::from(OsString::from_vec(target.into_bytes()));
        if target.is_absolute() {
            return Err(Errno::XDEV);
        }
        for component in target.components().rev() {
            match component {
                Component::Normal(part) => pending.push_front(part.to_os_string()),
                Component::ParentDir => pending.push_front("..".into()),
                Component::CurDir => pending.push_front(".".into()),
                Component::RootDir | Component::Prefix(_) => return Err(Errno::XDEV),
            }
        }
    }
    // Unreachable in practice (the loop returns at the last component); an empty target would
    // land here and means the current directory.
    let here = entered.last().unwrap_or(root);
    rustix::fs::openat(here, ".", access.flags(), Mode::empty())
}

fn go_file_mode(metadata: &std::fs::Metadata) -> String {
    go_file_mode_string(
        metadata.permissions().mode(),
        metadata.is_dir(),
        metadata.file_type().is_symlink(),
    )
}

/// Text or binary, from the first 512 bytes of an open regular file.
fn content_type_of(mut file: &std::fs::File) -> String {
    let mut head = [0u8; 512];
    let read = file.read(&mut head).unwrap_or(0);
    let head = &head[..read];
    if head.contains(&0) {
        return "application/octet-stream".to_string();
    }
    match std::str::from_utf8(head) {
        Ok(_) => "text/plain; charset=utf-8".to_string(),
        // The 512-byte window may cut a character in half.
        Err(error) if error.error_len().is_none() => "text/plain; charset=utf-8".to_string(),
        Err(_) => "application/octet-stream".to_string(),
    }
}

/// Opens `name` in the directory `dir` for reading, without following a symlink, and only if it
/// is still the regular file `expected` described.
fn open_entry_for_content(
    dir: &impl AsFd,
    name: &std::ffi::OsStr,
    expected: &std::fs::Metadata,
) -> Option<std::fs::File> {
    let fd = rustix::fs::openat(
        dir,
        name,
        Access::Read.flags() | OFlags::NOFOLLOW,
        Mode::empty(),
    )
    .ok()?;
    let file = std::fs::File::from(fd);
    let metadata = file.metadata().ok()?;
    (metadata.is_file() && same_object(&metadata, expected)).then_some(file)
}

fn same_object(left: &std::fs::Metadata, right: &std::fs::Metadata) -> bool {
    left.dev() == right.dev() && left.ino() == right.ino()
}

fn file_info(
    name: String,
    metadata: &std::fs::Metadata,
    content: Option<&std::fs::File>,
) -> AllocFileInfo {
    let mod_time = metadata
        .modified()
        .ok()
        .and_then(|time| time.duration_since(std::time::UNIX_EPOCH).ok())
        .and_then(|since| i64::try_from(since.as_nanos()).ok())
        .map(Timestamp::from_unix_nanos)
        .unwrap_or(Timestamp::ZERO);
    AllocFileInfo {
        name,
        is_dir: metadata.is_dir(),
        size: i64::try_from(metadata.len()).unwrap_or(i64::MAX),
        file_mode: go_file_mode(metadata),
        mod_time,
        content_type: match content {
            Some(file) if metadata.is_file() => content_type_of(file),
            _ => String::new(),
        },
    }
}

fn io_error(error: std::io::Error) -> ApiError {
    ApiError::internal(error.to_string())
}

/// `ls`: the entries of a directory, sorted by name. Entries are described without following
/// symlinks.
pub fn list(alloc_dir: &Path, requested: &str) -> Result<Vec<AllocFileInfo>, ApiError> {
    let not_a_directory = || ApiError::bad_request(format!("{requested:?} is not a directory"));
    let looked = open_beneath(alloc_dir, requested, Access::Look, Resolver::Openat2)?;
    if !looked.metadata().map_err(io_error)?.is_dir() {
        return Err(not_a_directory());
    }
    let directory = open_beneath(alloc_dir, requested, Access::Directory, Resolver::Openat2)
        .map_err(|error| match error {
            ApiError::BadRequest(_) => not_a_directory(),
            other => other,
        })?;
    let mut entries =
        rustix::fs::Dir::read_from(&directory).map_err(|errno| io_error(errno.into()))?;
    let mut infos = Vec::new();
    while let Some(entry) = entries.read() {
        let entry = entry.map_err(|errno| io_error(errno.into()))?;
        let name_bytes = entry.file_name().to_bytes();
        if name_bytes == b"." || name_bytes == b".." {
            continue;
        }
        let name = OsString::from_vec(name_bytes.to_vec());
        // The entry itself (a symlink stays a symlink), looked at through a descriptor.
        let Ok(fd) = rustix::fs::openat(
            &directory,
            &name,
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        ) else {
            // Removed since the directory was read.
            continue;
        };
        let metadata = std::fs::File::from(fd).metadata().map_err(io_error)?;
        let content = metadata
            .is_file()
            .then(|| open_entry_for_content(&directory, &name, &metadata))
            .flatten();
        infos.push(file_info(
            name.to_string_lossy().into_owned(),
            &metadata,
            content.as_ref(),
        ));
    }
    infos.sort_by(|left, right| left.name.cmp(&right.name));
    Ok(infos)
}

/// The names in a directory beneath the alloc dir (for the log streams, which pick their files
/// by name).
pub fn entry_names(alloc_dir: &Path, requested: &str) -> Result<Vec<String>, ApiError> {
    let directory = open_beneath(alloc_dir, requested, Access::Directory, Resolver::Openat2)?;
    let mut entries =
        rustix::fs::Dir::read_from(&directory).map_err(|errno| io_error(errno.into()))?;
    let mut names = Vec::new();
    while let Some(entry) = entries.read() {
        let entry = entry.map_err(|errno| io_error(errno.into()))?;
        if let Ok(name) = entry.file_name().to_str()
            && name != "."
            && name != ".."
        {
            names.push(name.to_string());
        }
    }
    Ok(names)
}

/// `stat`: one entry (a symlink inside the alloc dir is described by what it points to).
pub fn stat(alloc_dir: &Path, requested: &str) -> Result<AllocFileInfo, ApiError> {
    if requested.is_empty() {
        return Err(ApiError::bad_request("must provide a file name"));
    }
    let handle = open_beneath(alloc_dir, requested, Access::Look, Resolver::Openat2)?;
    let metadata = handle.metadata().map_err(io_error)?;
    // The name as asked for (a symlink keeps its own name); the alloc dir itself goes by its own.
    let name = Path::new(requested)
        .file_name()
        .or_else(|| alloc_dir.file_name())
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|| "/".to_string());
    let content = if metadata.is_file() {
        open_regular_file(alloc_dir, requested, Resolver::Openat2).ok()
    } else {
        None
    };
    let content = content.filter(|file| {
        file.metadata()
            .is_ok_and(|opened| same_object(&opened, &metadata))
    });
    Ok(file_info(name, &metadata, content.as_ref()))
}

/// Opens a regular file beneath the alloc dir for reading. The object is first looked at
/// without opening it for reading (`O_PATH`), so a FIFO or a device is refused before anything
/// could block on it or disturb it; the file opened for reading must then be that same object.
pub fn open_regular_file(
    alloc_dir: &Path,
    requested: &str,
    resolver: Resolver,
) -> Result<std::fs::File, ApiError> {
    if requested.is_empty() {
        return Err(ApiError::bad_request("must provide a file name"));
    }
    let parts = relative_components(requested)?;
    if names_a_secrets_dir(alloc_dir, &parts) {
        return Err(secret_refused(requested));
    }
    let looked = open_beneath(alloc_dir, requested, Access::Look, resolver)?;
    // Where the path led once its symlinks were followed: a link beneath the alloc dir may
    // still point into a task's `secrets/`.
    if let Some(resolved) = resolved_beneath(alloc_dir, &looked)
        && names_a_secrets_dir(alloc_dir, &resolved)
    {
        return Err(secret_refused(requested));
    }
    let looked = looked.metadata().map_err(io_error)?;
    if looked.is_dir() {
        return Err(ApiError::bad_request(format!(
            "{requested:?} is a directory"
        )));
    }
    if !looked.is_file() {
        return Err(ApiError::bad_request(format!(
            "{requested:?} is not a regular file"
        )));
    }
    let file = open_beneath(alloc_dir, requested, Access::Read, resolver)?;
    let opened = file.metadata().map_err(io_error)?;
    if !opened.is_file() || !same_object(&opened, &looked) {
        return Err(ApiError::bad_request(format!(
            "{requested:?} changed while it was being opened"
        )));
    }
    Ok(file)
}

fn secret_refused(requested: &str) -> ApiError {
    ApiError::bad_request(format!("Reading secret file prohibited: {requested}"))
}

/// Whether the path `parts` (relative to the alloc dir) lies in a task's `secrets/`, by
/// Nomad's rule for reads: the path, compared without regard to case, starts with a task dir's
/// `secrets` path (a task dir: any directory of the alloc dir but the shared `alloc/` that
/// holds a `secrets` directory).
fn names_a_secrets_dir(alloc_dir: &Path, parts: &[OsString]) -> bool {
    let Some(first) = parts.first() else {
        return false;
    };
    let joined = parts
        .iter()
        .map(|part| part.to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
        .to_lowercase();
    let first = first.to_string_lossy().to_lowercase();
    let Ok(entries) = std::fs::read_dir(alloc_dir) else {
        return false;
    };
    entries.flatten().any(|entry| {
        let name = entry.file_name().to_string_lossy().to_lowercase();
        name == first
            && name != "alloc"
            && std::fs::symlink_metadata(entry.path().join("secrets"))
                .is_ok_and(|metadata| metadata.is_dir())
            && joined.starts_with(&format!("{name}/secrets"))
    })
}

/// The components, relative to the alloc dir, of where `opened` is now (read from
/// `/proc/self/fd`), when it is beneath the alloc dir.
fn resolved_beneath(alloc_dir: &Path, opened: &std::fs::File) -> Option<Vec<OsString>> {
    let root = std::fs::canonicalize(alloc_dir).ok()?;
    let at = std::fs::read_link(format!("/proc/self/fd/{}", opened.as_fd().as_raw_fd())).ok()?;
    let relative = at.strip_prefix(&root).ok()?;
    Some(
        relative
            .components()
            .map(|component| component.as_os_str().to_os_string())
            .collect(),
    )
}

/// `readat`: the range of a file from `offset`, `limit` bytes long (`limit` 0 or absent: to
/// the end); `cat` is `readat` from 0 without a limit. The range is handed back open, to be
/// streamed; nothing is read yet.
pub fn read_at(
    alloc_dir: &Path,
    requested: &str,
    offset: u64,
    limit: Option<u64>,
) -> Result<std::io::Take<std::fs::File>, ApiError> {
    read_at_with(alloc_dir, requested, offset, limit, Resolver::Openat2)
}

fn read_at_with(
    alloc_dir: &Path,
    requested: &str,
    offset: u64,
    limit: Option<u64>,
    resolver: Resolver,
) -> Result<std::io::Take<std::fs::File>, ApiError> {
    let mut file = open_regular_file(alloc_dir, requested, resolver)?;
    file.seek(SeekFrom::Start(offset)).map_err(io_error)?;
    let limit = match limit {
        Some(limit) if limit > 0 => limit,
        _ => u64::MAX,
    };
    Ok(file.take(limit))
}

#[cfg(test)]
#[allow(clippy::expect_used, clippy::unwrap_used)] // a failed expectation is a failed test
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    const RESOLVERS: [Resolver; 2] = [Resolver::Openat2, Resolver::Walk];

    fn alloc_dir_with_files() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("alloc/logs")).unwrap();
        std::fs::create_dir_all(dir.path().join("web/local")).unwrap();
        std::fs::write(dir.path().join("alloc/logs/web.stdout.0"), "hello\n").unwrap();
        std::fs::write(dir.path().join("web/local/conf"), "a=1\n").unwrap();
        dir
    }

    fn read_all(dir: &Path, requested: &str, resolver: Resolver) -> Result<Vec<u8>, ApiError> {
        let mut data = Vec::new();
        read_at_with(dir, requested, 0, None, resolver)?
            .read_to_end(&mut data)
            .unwrap();
        Ok(data)
    }

    fn rss_bytes() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status
            .lines()
            .find(|line| line.starts_with("VmRSS:"))
            .unwrap();
        let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        kib * 1024
    }

    #[test]
    fn reading_a_task_secrets_file_is_prohibited_as_nomad_does_however_it_is_named() {
        let dir = alloc_dir_with_files();
        std::fs::create_dir_all(dir.path().join("web/secrets")).unwrap();
        std::fs::write(dir.path().join("web/secrets/token"), "s3cret\n").unwrap();
        // A relative symlink beneath the alloc dir into the secrets, in a file and in an
        // intermediate directory, and an absolute one.
        std::os::unix::fs::symlink("../secrets/token", dir.path().join("web/local/token")).unwrap();
        std::os::unix::fs::symlink("../../web/secrets", dir.path().join("alloc/logs/s")).unwrap();
        std::os::unix::fs::symlink(
            dir.path().join("web/secrets/token"),
            dir.path().join("web/local/absolute"),
        )
        .unwrap();
        for resolver in RESOLVERS {
            for requested in [
                "web/secrets/token",
                "/web/secrets/token",
                "/WEB/Secrets/token",
                "./web//secrets/token",
                "web/secrets",
                "web/local/token",
                "alloc/logs/s/token",
            ] {
                let error = read_all(dir.path(), requested, resolver).unwrap_err();
                assert_eq!(
                    error.to_string(),
                    format!("Reading secret file prohibited: {requested}"),
                    "{resolver:?}"
                );
                assert_eq!(error.status(), axum::http::StatusCode::BAD_REQUEST);
            }
            assert_eq!(
                read_all(dir.path(), "web/secrets/token", resolver)
                    .unwrap_err()
                    .to_string(),
                "Reading secret file prohibited: web/secrets/token"
            );
            // The absolute link is refused as leading outside (it names the host's path).
            assert!(read_all(dir.path(), "web/local/absolute", resolver).is_err());
            // Looking at the secrets is allowed, as in Nomad: only reads are refused.
            assert!(stat(dir.path(), "web/secrets/token").is_ok());
            // Not a task's secrets: the shared alloc dir has none, and other files read.
            std::fs::create_dir_all(dir.path().join("alloc/secrets")).unwrap();
            std::fs::write(dir.path().join("alloc/secrets/x"), "x").unwrap();
            assert_eq!(
                read_all(dir.path(), "alloc/secrets/x", resolver).unwrap(),
                b"x"
            );
            assert_eq!(
                read_all(dir.path(), "web/local/conf", resolver).unwrap(),
                b"a=1\n"
            );
        }
    }

    #[test]
    fn this_kernel_has_openat2() {
        // The walk is the fallback; the kernels drover targets have `openat2` (5.6+).
        let dir = alloc_dir_with_files();
        let root =
            rustix::fs::open(dir.path(), OFlags::PATH | OFlags::DIRECTORY, Mode::empty()).unwrap();
        assert!(open_with_openat2(&root, &[], Access::Look).is_ok());
    }

    #[test]
    fn paths_inside_open_and_a_leading_slash_is_the_alloc_dir() {
        let dir = alloc_dir_with_files();
        for resolver in RESOLVERS {
            assert_eq!(
                read_all(dir.path(), "/alloc/logs/web.stdout.0", resolver).unwrap(),
                b"hello\n",
                "{resolver:?}"
            );
            let root = open_beneath(dir.path(), "/", Access::Look, resolver).unwrap();
            let expected = std::fs::metadata(dir.path()).unwrap();
            assert!(
                same_object(&root.metadata().unwrap(), &expected),
                "{resolver:?}"
            );
        }
    }

    #[test]
    fn parent_components_and_climbing_absolute_paths_are_refused() {
        let dir = alloc_dir_with_files();
        for attempt in [
            "../etc/passwd",
            "/../../etc/passwd",
            "alloc/../../x",
            "web/../..",
        ] {
            let outcome = read_at(dir.path(), attempt, 0, None).map(|_| ());
            assert_eq!(outcome, Err(ApiError::bad_request(ESCAPES)), "{attempt}");
        }
    }

    #[test]
    fn a_symlink_pointing_outside_is_refused_and_one_inside_is_followed() {
        let dir = alloc_dir_with_files();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "host secret").unwrap();
        std::os::unix::fs::symlink(
            outside.path().join("secret"),
            dir.path().join("web/local/leak"),
        )
        .unwrap();
        std::os::unix::fs::symlink("/etc", dir.path().join("web/etc")).unwrap();
        std::os::unix::fs::symlink("../../../..", dir.path().join("web/local/up")).unwrap();
        std::os::unix::fs::symlink("conf", dir.path().join("web/local/inside")).unwrap();
        std::os::unix::fs::symlink("../web/local", dir.path().join("alloc/sibling")).unwrap();
        std::os::unix::fs::symlink("self", dir.path().join("web/self")).unwrap();
        for resolver in RESOLVERS {
            for escape in [
                "web/local/leak",
                "web/etc/passwd",
                "web/local/up/etc/passwd",
            ] {
                assert_eq!(
                    read_all(dir.path(), escape, resolver),
                    Err(ApiError::bad_request(ESCAPES)),
                    "{resolver:?} {escape}"
                );
            }
            assert_eq!(
                read_all(dir.path(), "web/local/inside", resolver).unwrap(),
                b"a=1\n"
            );
            assert_eq!(
                read_all(dir.path(), "alloc/sibling/inside", resolver).unwrap(),
                b"a=1\n"
            );
            assert!(matches!(
                read_all(dir.path(), "web/self", resolver),
                Err(ApiError::BadRequest(message)) if message.contains("symbolic links")
            ));
        }
    }

    /// A task flips a path component between a directory inside and a symlink to the host,
    /// as fast as it can, while requests read through it: no byte from outside ever comes back.
    #[test]
    fn a_component_swapped_for_a_symlink_mid_request_never_leaks_the_outside() {
        let dir = alloc_dir_with_files();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("file"), "SECRET").unwrap();
        std::fs::create_dir(dir.path().join("web/swap")).unwrap();
        std::fs::write(dir.path().join("web/swap/file"), "inside").unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("web/other")).unwrap();

        let stop = Arc::new(AtomicBool::new(false));
        let swapper = {
            let stop = Arc::clone(&stop);
            let web = dir.path().join("web");
            std::thread::spawn(move || {
                let web = rustix::fs::open(&web, OFlags::PATH | OFlags::DIRECTORY, Mode::empty())
                    .unwrap();
                let mut swaps = 0_u64;
                while !stop.load(Ordering::Relaxed) {
                    rustix::fs::renameat_with(
                        &web,
                        "swap",
                        &web,
                        "other",
                        rustix::fs::RenameFlags::EXCHANGE,
                    )
                    .unwrap();
                    swaps += 1;
                }
                swaps
            })
        };
        let mut inside_reads = 0;
        for resolver in RESOLVERS {
            for _ in 0..3000 {
                for requested in ["web/swap/file", "web/other/file"] {
                    if let Ok(data) = read_all(dir.path(), requested, resolver) {
                        assert_eq!(data, b"inside", "{resolver:?} read {requested} outside");
                        inside_reads += 1;
                    }
                    if let Ok(info) = stat(dir.path(), requested) {
                        assert_eq!(info.size, 6, "{resolver:?} stat {requested} outside");
                    }
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
        let swaps = swapper.join().unwrap();
        assert!(swaps > 100, "the swap loop barely ran ({swaps})");
        assert!(inside_reads > 0, "no read got through at all");
    }

    #[test]
    fn a_fifo_is_refused_at_once_rather_than_read() {
        let dir = alloc_dir_with_files();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            dir.path().join("web/pipe"),
            rustix::fs::FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let (done, outcome) = std::sync::mpsc::channel();
        let root = dir.path().to_path_buf();
        std::thread::spawn(move || {
            for resolver in RESOLVERS {
                let read = read_all(&root, "web/pipe", resolver).map(|_| ());
                let _ = done.send(read);
            }
            let _ = done.send(stat(&root, "web/pipe").map(|info| assert!(!info.is_dir)));
            let _ = done.send(list(&root, "web").map(|_| ()));
        });
        let wait = std::time::Duration::from_secs(10);
        for _ in RESOLVERS {
            assert_eq!(
                outcome.recv_timeout(wait).expect("cat of a FIFO hung"),
                Err(ApiError::bad_request("\"web/pipe\" is not a regular file"))
            );
        }
        assert_eq!(outcome.recv_timeout(wait).expect("stat hung"), Ok(()));
        assert_eq!(outcome.recv_timeout(wait).expect("ls hung"), Ok(()));
    }

    #[test]
    fn a_sparse_hundred_gib_file_is_read_as_a_range_in_flat_memory() {
        const GIB: u64 = 1024 * 1024 * 1024;
        const MIB: u64 = 1024 * 1024;
        let dir = alloc_dir_with_files();
        let path = dir.path().join("web/sparse");
        let file = std::fs::File::create(&path).unwrap();
        file.set_len(100 * GIB).unwrap();
        let marker: Vec<u8> = (0..MIB).map(|byte| (byte % 251) as u8).collect();
        std::os::unix::fs::FileExt::write_all_at(&file, &marker, 99 * GIB).unwrap();
        drop(file);

        let before = rss_bytes();
        // `readat`: one MiB at 99 GiB, read the way the HTTP body streams it.
        let mut range = read_at(dir.path(), "web/sparse", 99 * GIB, Some(MIB)).unwrap();
        let mut chunk = vec![0u8; 64 * 1024];
        let mut received = Vec::with_capacity(marker.len());
        loop {
            let read = range.read(&mut chunk).unwrap();
            if read == 0 {
                break;
            }
            received.extend_from_slice(&chunk[..read]);
        }
        assert_eq!(received, marker);
        // `cat`: the whole 100 GiB, of which the first 256 MiB are streamed and dropped.
        let mut whole = read_at(dir.path(), "web/sparse", 0, None).unwrap();
        let mut streamed = 0_u64;
        while streamed < 256 * MIB {
            let read = whole.read(&mut chunk).unwrap();
            assert!(read > 0);
            assert!(chunk[..read].iter().all(|byte| *byte == 0));
            streamed += read as u64;
        }
        // The process's RSS also counts what tests running alongside allocate; a whole-file
        // read would need gigabytes here.
        let growth = rss_bytes().saturating_sub(before);
        eprintln!(
            "streamed {} MiB; RSS grew by {} KiB",
            streamed / MIB,
            growth / 1024
        );
        assert!(growth < 48 * MIB, "memory grew by {growth} bytes");
    }

    #[test]
    fn listing_sorts_by_name_and_describes_modes_like_go() {
        let dir = alloc_dir_with_files();
        std::os::unix::fs::symlink("/etc/passwd", dir.path().join("web/local/link")).unwrap();
        let entries = list(dir.path(), "/").unwrap();
        let names: Vec<_> = entries.iter().map(|entry| entry.name.as_str()).collect();
        assert_eq!(names, vec!["alloc", "web"]);
        assert!(entries[0].is_dir);
        assert!(entries[0].file_mode.starts_with('d'));
        let local = list(dir.path(), "web/local").unwrap();
        assert_eq!(local[1].name, "link");
        assert!(
            local[1].file_mode.starts_with('L'),
            "{}",
            local[1].file_mode
        );
        assert_eq!(local[1].content_type, "");
        assert!(matches!(
            list(dir.path(), "web/local/conf"),
            Err(ApiError::BadRequest(message)) if message.contains("not a directory")
        ));
        let root = stat(dir.path(), "/").unwrap();
        assert_eq!(
            Some(root.name.as_str()),
            dir.path().file_name().and_then(|name| name.to_str())
        );
        assert!(root.is_dir);
        let file = stat(dir.path(), "alloc/logs/web.stdout.0").unwrap();
        assert_eq!(file.size, 6);
        assert_eq!(file.name, "web.stdout.0");
        assert_eq!(file.content_type, "text/plain; charset=utf-8");
        assert_eq!(&file.file_mode[..1], "-");
    }

    #[test]
    fn read_at_honours_offset_and_limit() {
        let dir = alloc_dir_with_files();
        let mut data = String::new();
        read_at(dir.path(), "alloc/logs/web.stdout.0", 1, Some(3))
            .unwrap()
            .read_to_string(&mut data)
            .unwrap();
        assert_eq!(data, "ell");
        data.clear();
        read_at(dir.path(), "alloc/logs/web.stdout.0", 4, None)
            .unwrap()
            .read_to_string(&mut data)
            .unwrap();
        assert_eq!(data, "o\n");
        assert!(matches!(
            read_at(dir.path(), "nothing/here", 0, None),
            Err(ApiError::NotFound(_))
        ));
        assert!(matches!(
            read_at(dir.path(), "web/local", 0, None),
            Err(ApiError::BadRequest(message)) if message.contains("is a directory")
        ));
    }
}
