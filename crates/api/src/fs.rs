//! `/v1/client/fs/{ls,stat,cat,readat}/<alloc>`: read-only access to an allocation's directory,
//! confined to it. `..` components, absolute paths that climb out, percent-encoded dots and
//! symlinks whose target lies outside the alloc dir are all refused.
//!
//! Not here: log streaming (see [`crate::logs`]) or anything that writes.

use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

use drover_structs::{AllocFileInfo, Timestamp, go_file_mode_string};

use crate::error::ApiError;

const ESCAPES: &str = "path escapes the alloc directory";

/// Resolves `requested` (relative to the alloc dir; a leading `/` is the alloc dir itself)
/// to a path that exists inside `alloc_dir`, following symlinks only while they stay inside.
pub fn resolve_confined(alloc_dir: &Path, requested: &str) -> Result<PathBuf, ApiError> {
    let relative = Path::new(requested.trim_start_matches('/'));
    let mut joined = alloc_dir.to_path_buf();
    for component in relative.components() {
        match component {
            Component::Normal(part) => joined.push(part),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Err(ApiError::bad_request(ESCAPES));
            }
        }
    }
    let root = alloc_dir
        .canonicalize()
        .map_err(|_| ApiError::not_found("alloc directory not found"))?;
    let resolved = match joined.canonicalize() {
        Ok(resolved) => resolved,
        Err(_) => {
            // A dangling symlink or a missing file: say which without following anything.
            return match joined.symlink_metadata() {
                Ok(_) => Err(ApiError::bad_request(ESCAPES)),
                Err(_) => Err(ApiError::not_found(format!("file {requested:?} not found"))),
            };
        }
    };
    if resolved.starts_with(&root) {
        Ok(resolved)
    } else {
        Err(ApiError::bad_request(ESCAPES))
    }
}

fn go_file_mode(metadata: &std::fs::Metadata) -> String {
    go_file_mode_string(
        metadata.permissions().mode(),
        metadata.is_dir(),
        metadata.file_type().is_symlink(),
    )
}

fn content_type_of(path: &Path) -> String {
    let mut head = [0u8; 512];
    let read = std::fs::File::open(path)
        .and_then(|mut file| file.read(&mut head))
        .unwrap_or(0);
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

fn file_info(name: String, path: &Path, metadata: &std::fs::Metadata) -> AllocFileInfo {
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
        content_type: if metadata.is_file() {
            content_type_of(path)
        } else {
            String::new()
        },
    }
}

fn io_error(error: std::io::Error) -> ApiError {
    ApiError::internal(error.to_string())
}

/// `ls`: the entries of a directory, sorted by name. Entries are described without following
/// symlinks.
pub fn list(alloc_dir: &Path, requested: &str) -> Result<Vec<AllocFileInfo>, ApiError> {
    let directory = resolve_confined(alloc_dir, requested)?;
    if !directory.is_dir() {
        return Err(ApiError::bad_request(format!(
            "{requested:?} is not a directory"
        )));
    }
    let mut infos = Vec::new();
    for entry in std::fs::read_dir(&directory).map_err(io_error)? {
        let entry = entry.map_err(io_error)?;
        let metadata = entry.path().symlink_metadata().map_err(io_error)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        infos.push(file_info(name, &entry.path(), &metadata));
    }
    infos.sort_by(|left, right| left.name.cmp(&right.name));
    Ok(infos)
}

/// `stat`: one entry.
pub fn stat(alloc_dir: &Path, requested: &str) -> Result<AllocFileInfo, ApiError> {
    if requested.is_empty() {
        return Err(ApiError::bad_request("must provide a file name"));
    }
    let path = resolve_confined(alloc_dir, requested)?;
    let metadata = path.metadata().map_err(io_error)?;
    let name = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|| "/".to_string());
    Ok(file_info(name, &path, &metadata))
}

/// `readat`: up to `limit` bytes from `offset` (`limit` 0 or absent: to the end); `cat` is
/// `readat` from 0 without a limit.
pub fn read_at(
    alloc_dir: &Path,
    requested: &str,
    offset: u64,
    limit: Option<u64>,
) -> Result<Vec<u8>, ApiError> {
    if requested.is_empty() {
        return Err(ApiError::bad_request("must provide a file name"));
    }
    let path = resolve_confined(alloc_dir, requested)?;
    if path.is_dir() {
        return Err(ApiError::bad_request(format!(
            "{requested:?} is a directory"
        )));
    }
    let mut file = std::fs::File::open(&path).map_err(io_error)?;
    file.seek(SeekFrom::Start(offset)).map_err(io_error)?;
    let mut data = Vec::new();
    match limit {
        Some(limit) if limit > 0 => {
            file.take(limit).read_to_end(&mut data).map_err(io_error)?;
        }
        _ => {
            file.read_to_end(&mut data).map_err(io_error)?;
        }
    }
    Ok(data)
}

#[cfg(test)]
#[allow(clippy::expect_used, clippy::unwrap_used)] // a failed expectation is a failed test
mod tests {
    use super::*;

    fn alloc_dir_with_files() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("alloc/logs")).unwrap();
        std::fs::create_dir_all(dir.path().join("web/local")).unwrap();
        std::fs::write(dir.path().join("alloc/logs/web.stdout.0"), "hello\n").unwrap();
        std::fs::write(dir.path().join("web/local/conf"), "a=1\n").unwrap();
        dir
    }

    #[test]
    fn paths_inside_resolve_and_a_leading_slash_is_the_alloc_dir() {
        let dir = alloc_dir_with_files();
        let resolved = resolve_confined(dir.path(), "/alloc/logs/web.stdout.0").unwrap();
        assert_eq!(std::fs::read_to_string(resolved).unwrap(), "hello\n");
        let root = resolve_confined(dir.path(), "/").unwrap();
        assert_eq!(root, dir.path().canonicalize().unwrap());
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
            let outcome = resolve_confined(dir.path(), attempt);
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
        std::os::unix::fs::symlink("conf", dir.path().join("web/local/inside")).unwrap();
        assert_eq!(
            read_at(dir.path(), "web/local/leak", 0, None),
            Err(ApiError::bad_request(ESCAPES))
        );
        assert_eq!(
            read_at(dir.path(), "web/etc/passwd", 0, None),
            Err(ApiError::bad_request(ESCAPES))
        );
        assert_eq!(
            read_at(dir.path(), "web/local/inside", 0, None).unwrap(),
            b"a=1\n"
        );
    }

    #[test]
    fn listing_sorts_by_name_and_describes_modes_like_go() {
        let dir = alloc_dir_with_files();
        let entries = list(dir.path(), "/").unwrap();
        let names: Vec<_> = entries.iter().map(|entry| entry.name.as_str()).collect();
        assert_eq!(names, vec!["alloc", "web"]);
        assert!(entries[0].is_dir);
        assert!(entries[0].file_mode.starts_with('d'));
        let file = stat(dir.path(), "alloc/logs/web.stdout.0").unwrap();
        assert_eq!(file.size, 6);
        assert_eq!(file.name, "web.stdout.0");
        assert_eq!(file.content_type, "text/plain; charset=utf-8");
        assert_eq!(&file.file_mode[..1], "-");
    }

    #[test]
    fn read_at_honours_offset_and_limit() {
        let dir = alloc_dir_with_files();
        assert_eq!(
            read_at(dir.path(), "alloc/logs/web.stdout.0", 1, Some(3)).unwrap(),
            b"ell"
        );
        assert_eq!(
            read_at(dir.path(), "alloc/logs/web.stdout.0", 4, None).unwrap(),
            b"o\n"
        );
        assert!(matches!(
            read_at(dir.path(), "nothing/here", 0, None),
            Err(ApiError::NotFound(_))
        ));
    }
}
