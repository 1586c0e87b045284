//! Replacing a file so that a reader sees the old contents or the new, never a part: write a
//! temporary file beside it (mode 0600), rename it over the target, and — when the contents
//! must survive a machine crash — flush the file before the rename and the directory after.
//!
//! The one implementation for the shim (`exit.json`), the driver (the launch spec) and the
//! client (the node identity). Synchronous and std-only, so the shim can use it.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Whether a write must survive a machine crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Flushed to disk (file, then directory) before returning.
    Flushed,
    /// Atomic for readers, but left in the page cache: for files that matter only while the
    /// machine is up.
    Unflushed,
}

/// Replaces `path` with `contents` atomically, through `.<name>.tmp` in the same directory.
pub fn write_atomically(path: &Path, contents: &[u8], durability: Durability) -> io::Result<()> {
    let parent = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let file_name = path.file_name().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} names no file", path.display()),
        )
    })?;
    let temporary = parent.join(format!(".{}.tmp", file_name.to_string_lossy()));
    {
        let mut file = OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .mode(0o600)
            .open(&temporary)?;
        file.write_all(contents)?;
        if durability == Durability::Flushed {
            file.sync_all()?;
        }
    }
    std::fs::rename(&temporary, path)?;
    if durability == Durability::Flushed {
        File::open(parent)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_is_replaced_whole_and_no_temporary_is_left() {
        let dir = tempfile::tempdir().unwrap_or_else(|error| panic!("tempdir: {error}"));
        let path = dir.path().join("exit.json");
        for (contents, durability) in [
            (&b"first"[..], Durability::Flushed),
            (&b"second, longer"[..], Durability::Unflushed),
            (&b"3"[..], Durability::Flushed),
        ] {
            write_atomically(&path, contents, durability)
                .unwrap_or_else(|error| panic!("write: {error}"));
            assert_eq!(std::fs::read(&path).unwrap_or_default(), contents);
        }
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap_or_else(|error| panic!("read_dir: {error}"))
            .flatten()
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec!["exit.json".to_string()]);
        let mode = std::fs::metadata(&path)
            .map(|metadata| std::os::unix::fs::PermissionsExt::mode(&metadata.permissions()))
            .unwrap_or_default();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn a_path_without_a_file_name_is_refused() {
        let error = write_atomically(Path::new("/"), b"x", Durability::Unflushed)
            .err()
            .map(|error| error.kind());
        assert_eq!(error, Some(io::ErrorKind::InvalidInput));
    }
}
