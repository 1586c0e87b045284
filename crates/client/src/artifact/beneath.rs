//! Writing an artifact's files beneath one directory of a task, and never anywhere else.
//!
//! Every name is resolved relative to a descriptor of the destination directory with
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`, so neither a `..`
//! nor a symlink — one in the archive or one the task planted in its own directory — can lead a
//! write outside. Entry names are checked before any of that: absolute names and names with a
//! `..` component are refused. A symlink may only point within the destination, by a target
//! that climbs at most to the destination (leading `..` components, no deeper than the link
//! itself) and then only descends; since parent directories are never symlinks, every link
//! written here resolves within the destination however links chain. A hard link must name an
//! entry already written beneath the destination, and never a symlink (its target would be
//! read from a new place). An existing entry at a name is removed first (never written
//! through: it may be a hard link to a file elsewhere), and files are created with
//! `O_EXCL | O_NOFOLLOW`, without set-id bits.
//!
//! [`Budget`] counts what an unpack writes (bytes and entries) against the client's
//! decompression limits, so an archive that expands past them stops at the entry that crossed.
//!
//! **Not** here: archive formats (see `archive`) or where the bytes come from.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

use super::error::ArtifactError;

/// The checked components of an entry name, relative to the destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryPath {
    display: String,
    parts: Vec<OsString>,
}

impl EntryPath {
    /// Checks an entry name from an archive (or a file of a tree being copied).
    pub fn parse(name: &Path) -> Result<EntryPath, ArtifactError> {
        let display = name.display().to_string();
        let unsafe_entry = |reason: &str| ArtifactError::UnsafeEntry {
            entry: display.clone(),
            reason: reason.to_string(),
        };
        if name.is_absolute() {
            return Err(unsafe_entry("absolute paths are refused"));
        }
        let mut parts = Vec::new();
        for component in name.components() {
            match component {
                Component::Normal(part) => parts.push(part.to_os_string()),
                Component::CurDir => {}
                Component::ParentDir => {
                    return Err(unsafe_entry("paths with \"..\" are refused"));
                }
                Component::RootDir | Component::Prefix(_) => {
                    return Err(unsafe_entry("absolute paths are refused"));
                }
            }
        }
        Ok(EntryPath { display, parts })
    }

    /// The name as the archive spelled it, for errors.
    pub fn display(&self) -> &str {
        &self.display
    }

    /// Whether the name is the destination itself (`./`).
    pub fn is_root(&self) -> bool {
        self.parts.is_empty()
    }

    /// The parent directory and the last component, as entries of their own.
    pub fn split_file(&self) -> Option<(EntryPath, EntryPath)> {
        let (name, parents) = self.parts.split_last()?;
        let parent = EntryPath {
            display: parents.iter().collect::<PathBuf>().display().to_string(),
            parts: parents.to_vec(),
        };
        let file = EntryPath {
            display: self.display.clone(),
            parts: vec![name.clone()],
        };
        Some((parent, file))
    }

    fn split_last(&self) -> Option<(&OsString, &[OsString])> {
        self.parts.split_last()
    }
}

/// Counts bytes and entries written by one unpack against the decompression limits.
#[derive(Debug, Clone)]
pub struct Budget {
    max_bytes: u64,
    max_entries: u64,
    bytes: u64,
    entries: u64,
}

impl Budget {
    /// Limits of zero mean no limit.
    pub fn new(max_bytes: u64, max_entries: u64) -> Self {
        Budget {
            max_bytes: if max_bytes == 0 { u64::MAX } else { max_bytes },
            max_entries: if max_entries == 0 {
                u64::MAX
            } else {
                max_entries
            },
            bytes: 0,
            entries: 0,
        }
    }

    /// No limits (copying a tree that is already on disk, such as a git checkout).
    pub fn unlimited() -> Self {
        Budget::new(0, 0)
    }

    fn count_entry(&mut self, entry: &EntryPath) -> Result<(), ArtifactError> {
        self.entries += 1;
        if self.entries > self.max_entries {
            return Err(ArtifactError::FileCountLimit {
                entry: entry.display().to_string(),
                limit: self.max_entries,
            });
        }
        Ok(())
    }

    fn count_bytes(&mut self, entry: &EntryPath, bytes: u64) -> Result<(), ArtifactError> {
        self.bytes = self.bytes.saturating_add(bytes);
        if self.bytes > self.max_bytes {
            return Err(ArtifactError::SizeLimit {
                entry: entry.display().to_string(),
                limit: self.max_bytes,
            });
        }
        Ok(())
    }
}

/// An open destination directory that every write is confined to.
#[derive(Debug)]
pub struct BeneathDir {
    root: OwnedFd,
    path: PathBuf,
}

fn beneath_flags() -> ResolveFlags {
    ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS
}

fn dir_flags() -> OFlags {
    OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC
}

impl BeneathDir {
    /// Opens `relative` beneath `base` (creating missing directories, following no symlink),
    /// as the root of later writes. `base` itself is trusted (the task dir the client made).
    pub fn open(base: &Path, relative: &EntryPath) -> Result<BeneathDir, ArtifactError> {
        let base_fd = rustix::fs::open(base, dir_flags(), Mode::empty())
            .map_err(|errno| io_error(format!("opening {}", base.display()), errno))?;
        let base_dir = BeneathDir {
            root: base_fd,
            path: base.to_path_buf(),
        };
        let root = base_dir.ensure_dir(relative, &relative.parts)?;
        let mut path = base.to_path_buf();
        path.extend(&relative.parts);
        Ok(BeneathDir { root, path })
    }

    /// The destination's path on the host, for messages.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Gives the destination and everything beneath it to `uid`:`gid` (`chown = true`),
    /// following no symlink: a symlink itself changes owner, never what it points to.
    pub fn chown_all(&self, uid: u32, gid: u32) -> Result<(), ArtifactError> {
        let owner = Some(rustix::fs::Uid::from_raw(uid));
        let group = Some(rustix::fs::Gid::from_raw(gid));
        let fail = |path: &Path, errno: Errno| {
            io_error(format!("changing the owner of {}", path.display()), errno)
        };
        rustix::fs::chownat(&self.root, "", owner, group, AtFlags::EMPTY_PATH)
            .map_err(|errno| fail(&self.path, errno))?;
        let read_flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let first = rustix::fs::openat(&self.root, ".", read_flags, Mode::empty())
            .map_err(|errno| fail(&self.path, errno))?;
        let mut pending = vec![(first, self.path.clone())];
        while let Some((directory, path)) = pending.pop() {
            let listing =
                rustix::fs::Dir::read_from(&directory).map_err(|errno| fail(&path, errno))?;
            for item in listing {
                let item = item.map_err(|errno| fail(&path, errno))?;
                let name = std::ffi::OsStr::from_bytes(item.file_name().to_bytes()).to_owned();
                if name == "." || name == ".." {
                    continue;
                }
                let child = path.join(&name);
                rustix::fs::chownat(
                    &directory,
                    name.as_os_str(),
                    owner,
                    group,
                    AtFlags::SYMLINK_NOFOLLOW,
                )
                .map_err(|errno| fail(&child, errno))?;
                if is_dir_at(&directory, &name) {
                    let opened =
                        rustix::fs::openat(&directory, name.as_os_str(), read_flags, Mode::empty())
                            .map_err(|errno| fail(&child, errno))?;
                    pending.push((opened, child));
                }
            }
        }
        Ok(())
    }

    /// Gives the file `entry` beneath the destination to `uid`:`gid`, following no symlink
    /// (`chown = true` in mode `file`).
    pub fn chown_entry(&self, entry: &EntryPath, uid: u32, gid: u32) -> Result<(), ArtifactError> {
        let (parent, name) = self.parent_of(entry)?;
        rustix::fs::chownat(
            &parent,
            name.as_os_str(),
            Some(rustix::fs::Uid::from_raw(uid)),
            Some(rustix::fs::Gid::from_raw(gid)),
            AtFlags::SYMLINK_NOFOLLOW,
        )
        .map_err(|errno| self.entry_error(entry, errno))
    }

    /// Opens (creating as needed) the directory `parts` beneath the root.
    fn ensure_dir(&self, entry: &EntryPath, parts: &[OsString]) -> Result<OwnedFd, ArtifactError> {
        let mut current = rustix::fs::openat(&self.root, ".", dir_flags(), Mode::empty())
            .map_err(|errno| self.entry_error(entry, errno))?;
        for part in parts {
            let next = match open_dir_beneath(&current, part) {
                Err(Errno::NOENT) => {
                    match rustix::fs::mkdirat(
                        &current,
                        part.as_os_str(),
                        Mode::from_raw_mode(0o755),
                    ) {
                        Ok(()) | Err(Errno::EXIST) => {}
                        Err(errno) => return Err(self.entry_error(entry, errno)),
                    }
                    open_dir_beneath(&current, part)
                }
                other => other,
            };
            current = next.map_err(|errno| self.entry_error(entry, errno))?;
        }
        Ok(current)
    }

    /// The parent directory of `entry` (created as needed) and its last component.
    fn parent_of<'e>(
        &self,
        entry: &'e EntryPath,
    ) -> Result<(OwnedFd, &'e OsString), ArtifactError> {
        let Some((name, parents)) = entry.split_last() else {
            return Err(ArtifactError::UnsafeEntry {
                entry: entry.display().to_string(),
                reason: "not a file name".to_string(),
            });
        };
        Ok((self.ensure_dir(entry, parents)?, name))
    }

    /// Removes what is at `name` in `parent`, unless it is a directory.
    fn clear(
        &self,
        entry: &EntryPath,
        parent: &OwnedFd,
        name: &OsString,
    ) -> Result<(), ArtifactError> {
        match rustix::fs::unlinkat(parent, name.as_os_str(), AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => Ok(()),
            Err(Errno::ISDIR) | Err(Errno::PERM) if is_dir_at(parent, name) => {
                Err(ArtifactError::UnsafeEntry {
                    entry: entry.display().to_string(),
                    reason: "a directory is in the way".to_string(),
                })
            }
            Err(errno) => Err(self.entry_error(entry, errno)),
        }
    }

    /// Creates the directory `entry` (and its parents).
    pub fn create_dir(&self, entry: &EntryPath, budget: &mut Budget) -> Result<(), ArtifactError> {
        budget.count_entry(entry)?;
        self.ensure_dir(entry, &entry.parts).map(drop)
    }

    /// Writes `entry` as a new regular file with `mode` (permission bits only) from `contents`.
    pub fn write_file(
        &self,
        entry: &EntryPath,
        mode: u32,
        contents: &mut dyn Read,
        budget: &mut Budget,
    ) -> Result<(), ArtifactError> {
        budget.count_entry(entry)?;
        let (parent, name) = self.parent_of(entry)?;
        self.clear(entry, &parent, name)?;
        let fd = rustix::fs::openat(
            &parent,
            name.as_os_str(),
            OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )
        .map_err(|errno| self.entry_error(entry, errno))?;
        let mut file = std::fs::File::from(fd);
        let mut buffer = vec![0u8; 64 * 1024];
        loop {
            let read = contents
                .read(&mut buffer)
                .map_err(|source| ArtifactError::Io {
                    context: format!("reading archive entry {:?}", entry.display()),
                    source,
                })?;
            if read == 0 {
                break;
            }
            budget.count_bytes(entry, read as u64)?;
            file.write_all(&buffer[..read])
                .map_err(|source| ArtifactError::Io {
                    context: format!("writing {}", self.path.join(entry.display()).display()),
                    source,
                })?;
        }
        rustix::fs::fchmod(&file, Mode::from_raw_mode(mode & 0o777))
            .map_err(|errno| self.entry_error(entry, errno))?;
        Ok(())
    }

    /// Creates `entry` as a symlink to `target`, which must resolve within the destination
    /// (see the module docs).
    pub fn symlink(
        &self,
        entry: &EntryPath,
        target: &Path,
        budget: &mut Budget,
    ) -> Result<(), ArtifactError> {
        budget.count_entry(entry)?;
        check_symlink_target(entry, target)?;
        let (parent, name) = self.parent_of(entry)?;
        self.clear(entry, &parent, name)?;
        rustix::fs::symlinkat(target.as_os_str(), &parent, name.as_os_str())
            .map_err(|errno| self.entry_error(entry, errno))
    }

    /// Creates `entry` as a hard link to `target`, an entry already written beneath the
    /// destination (not a symlink, not a directory).
    pub fn hard_link(
        &self,
        entry: &EntryPath,
        target: &EntryPath,
        budget: &mut Budget,
    ) -> Result<(), ArtifactError> {
        budget.count_entry(entry)?;
        let refuse = |reason: String| ArtifactError::UnsafeEntry {
            entry: entry.display().to_string(),
            reason,
        };
        let Some((target_name, target_parents)) = target.split_last() else {
            return Err(refuse("hard link to the destination itself".to_string()));
        };
        let target_parent = self.resolve_existing(target_parents).map_err(|_| {
            refuse(format!(
                "hard link target {:?} is not in the archive",
                target.display()
            ))
        })?;
        let stat = rustix::fs::statat(
            &target_parent,
            target_name.as_os_str(),
            AtFlags::SYMLINK_NOFOLLOW,
        )
        .map_err(|_| {
            refuse(format!(
                "hard link target {:?} is not in the archive",
                target.display()
            ))
        })?;
        if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
            return Err(refuse(format!(
                "hard link target {:?} is not a regular file",
                target.display()
            )));
        }
        let (parent, name) = self.parent_of(entry)?;
        if is_same_entry(entry, target) {
            return Ok(());
        }
        self.clear(entry, &parent, name)?;
        rustix::fs::linkat(
            &target_parent,
            target_name.as_os_str(),
            &parent,
            name.as_os_str(),
            AtFlags::empty(),
        )
        .map_err(|errno| self.entry_error(entry, errno))
    }

    fn resolve_existing(&self, parts: &[OsString]) -> Result<OwnedFd, Errno> {
        let path: PathBuf = if parts.is_empty() {
            ".".into()
        } else {
            parts.iter().collect()
        };
        rustix::fs::openat2(
            &self.root,
            &path,
            dir_flags(),
            Mode::empty(),
            beneath_flags(),
        )
    }

    fn entry_error(&self, entry: &EntryPath, errno: Errno) -> ArtifactError {
        match errno {
            Errno::XDEV | Errno::LOOP => ArtifactError::UnsafeEntry {
                entry: entry.display().to_string(),
                reason: "a directory on its path is a symlink".to_string(),
            },
            Errno::NOTDIR => ArtifactError::UnsafeEntry {
                entry: entry.display().to_string(),
                reason: "a file is in the way of its directory".to_string(),
            },
            other => io_error(
                format!("writing {}", self.path.join(entry.display()).display()),
                other,
            ),
        }
    }
}

fn is_same_entry(first: &EntryPath, second: &EntryPath) -> bool {
    first.parts == second.parts
}

fn open_dir_beneath(parent: &OwnedFd, name: &OsString) -> Result<OwnedFd, Errno> {
    rustix::fs::openat2(
        parent,
        name.as_os_str(),
        dir_flags(),
        Mode::empty(),
        beneath_flags(),
    )
}

fn is_dir_at(parent: &OwnedFd, name: &OsString) -> bool {
    rustix::fs::statat(parent, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW)
        .is_ok_and(|stat| FileType::from_raw_mode(stat.st_mode) == FileType::Directory)
}

fn io_error(context: String, errno: Errno) -> ArtifactError {
    ArtifactError::Io {
        context,
        source: std::io::Error::from(errno),
    }
}

/// A symlink target is allowed when it is relative, climbs (leading `..` only) no higher than
/// the destination, and then only descends.
fn check_symlink_target(entry: &EntryPath, target: &Path) -> Result<(), ArtifactError> {
    let refuse = |reason: &str| ArtifactError::UnsafeEntry {
        entry: entry.display().to_string(),
        reason: format!("symlink to {:?} {reason}", target.display()),
    };
    if target.as_os_str().is_empty() {
        return Err(refuse("is empty"));
    }
    if target.as_os_str().as_bytes().contains(&0) {
        return Err(refuse("holds a NUL byte"));
    }
    let depth = entry.parts.len().saturating_sub(1);
    let mut climbs = 0usize;
    let mut descended = false;
    for component in target.components() {
        match component {
            Component::RootDir | Component::Prefix(_) => {
                return Err(refuse("is absolute and points out of the destination"));
            }
            Component::CurDir => {}
            Component::ParentDir => {
                if descended {
                    return Err(refuse("climbs after descending, which is refused"));
                }
                climbs += 1;
                if climbs > depth {
                    return Err(refuse("points out of the destination"));
                }
            }
            Component::Normal(_) => descended = true,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str) -> EntryPath {
        EntryPath::parse(Path::new(name)).expect("valid entry")
    }

    #[test]
    fn climbing_and_absolute_names_are_refused() {
        for name in ["../../etc/x", "a/../../b", "/etc/passwd"] {
            let error = EntryPath::parse(Path::new(name)).expect_err(name);
            assert!(error.to_string().contains(name), "{error}");
        }
        assert!(EntryPath::parse(Path::new("./a/b")).is_ok());
    }

    #[test]
    fn symlink_targets_stay_within() {
        assert!(check_symlink_target(&entry("lib/x.so"), Path::new("x.so.1")).is_ok());
        assert!(check_symlink_target(&entry("bin/x"), Path::new("../lib/x")).is_ok());
        assert!(check_symlink_target(&entry("x"), Path::new("../x")).is_err());
        assert!(check_symlink_target(&entry("a/x"), Path::new("../../x")).is_err());
        assert!(check_symlink_target(&entry("a/b/x"), Path::new("c/../../y")).is_err());
        assert!(check_symlink_target(&entry("x"), Path::new("/etc/passwd")).is_err());
    }

    #[test]
    fn writes_never_follow_a_planted_symlink() {
        let base = tempfile::tempdir().expect("tempdir");
        let outside = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(base.path().join("local")).expect("local");
        std::os::unix::fs::symlink(outside.path(), base.path().join("local/planted"))
            .expect("symlink");
        let dir = BeneathDir::open(base.path(), &entry("local")).expect("open");
        let mut budget = Budget::unlimited();
        let error = dir
            .write_file(&entry("planted/x"), 0o644, &mut &b"data"[..], &mut budget)
            .expect_err("through a symlink");
        assert!(error.to_string().contains("planted/x"), "{error}");
        // A file planted as a symlink is replaced, not written through.
        std::os::unix::fs::symlink(outside.path().join("y"), base.path().join("local/y"))
            .expect("symlink");
        dir.write_file(&entry("y"), 0o644, &mut &b"data"[..], &mut budget)
            .expect("replaces the link");
        assert!(!outside.path().join("y").exists());
        assert_eq!(
            std::fs::read(base.path().join("local/y")).expect("read"),
            b"data"
        );
        // The destination itself being a symlink out is refused.
        std::os::unix::fs::symlink(outside.path(), base.path().join("out")).expect("symlink");
        assert!(BeneathDir::open(base.path(), &entry("out/sub")).is_err());
        assert_eq!(std::fs::read_dir(outside.path()).expect("ls").count(), 0);
    }

    #[test]
    fn budget_stops_at_the_entry_past_the_limit() {
        let base = tempfile::tempdir().expect("tempdir");
        let dir = BeneathDir::open(base.path(), &entry(".")).expect("open");
        let mut budget = Budget::new(10, 0);
        dir.write_file(&entry("a"), 0o644, &mut &[0u8; 8][..], &mut budget)
            .expect("within");
        let error = dir
            .write_file(&entry("b"), 0o644, &mut &[0u8; 8][..], &mut budget)
            .expect_err("past the limit");
        assert!(matches!(error, ArtifactError::SizeLimit { ref entry, .. } if entry == "b"));
        let mut budget = Budget::new(0, 1);
        dir.create_dir(&entry("d"), &mut budget).expect("first");
        assert!(matches!(
            dir.create_dir(&entry("e"), &mut budget),
            Err(ArtifactError::FileCountLimit { .. })
        ));
    }
}
