//! Unpacking a downloaded artifact: the archive formats go-getter knows (tar, tar.gz/tgz,
//! tar.bz2/tbz2, tar.xz/txz, zip) into a directory, and the single-file compressions (gz, bz2,
//! xz) into one file, chosen by the file name's extension or the `archive` option.
//!
//! Every entry goes through [`BeneathDir`], which refuses names and links that would lead out
//! of the destination, and counts bytes and entries against the client's decompression limits
//! as they are written (the counts are of decompressed bytes actually read, never of what a
//! header claims). Entries other than files, directories, symlinks and hard links (devices,
//! FIFOs) are skipped, as go-getter does.
//!
//! **Not** here: checksums (checked before this runs) or where the archive came from.

use std::io::{BufReader, Read};
use std::path::Path;

use super::beneath::{BeneathDir, Budget, EntryPath};
use super::error::ArtifactError;

/// An archive or compression format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArchiveKind {
    Tar,
    TarGz,
    TarBz2,
    TarXz,
    Zip,
    Gz,
    Bz2,
    Xz,
}

/// Names as go-getter's decompressors are keyed, longest first so `.tar.gz` wins over `.gz`.
const KINDS_BY_NAME: &[(&str, ArchiveKind)] = &[
    ("tar.bz2", ArchiveKind::TarBz2),
    ("tar.gz", ArchiveKind::TarGz),
    ("tar.xz", ArchiveKind::TarXz),
    ("tbz2", ArchiveKind::TarBz2),
    ("tgz", ArchiveKind::TarGz),
    ("txz", ArchiveKind::TarXz),
    ("tar", ArchiveKind::Tar),
    ("zip", ArchiveKind::Zip),
    ("bz2", ArchiveKind::Bz2),
    ("gz", ArchiveKind::Gz),
    ("xz", ArchiveKind::Xz),
];

impl ArchiveKind {
    /// The format the `archive` option names; `Ok(None)` for `archive = false`.
    pub fn from_option(value: &str) -> Result<Option<ArchiveKind>, ArtifactError> {
        let value = value.trim().to_ascii_lowercase();
        if value == "false" {
            return Ok(None);
        }
        KINDS_BY_NAME
            .iter()
            .find(|(name, _)| *name == value)
            .map(|(_, kind)| Some(*kind))
            .ok_or_else(|| ArtifactError::InvalidOption {
                option: "archive".to_string(),
                reason: format!(
                    "unknown archive format {value:?} (tar, tar.gz, tgz, tar.bz2, tbz2, tar.xz, txz, zip, gz, bz2, xz or false)"
                ),
            })
    }

    /// The format a file name's extension says.
    pub fn from_file_name(name: &str) -> Option<ArchiveKind> {
        let lower = name.to_ascii_lowercase();
        KINDS_BY_NAME
            .iter()
            .find(|(suffix, _)| {
                lower.len() > suffix.len() + 1
                    && lower.ends_with(suffix)
                    && lower.as_bytes()[lower.len() - suffix.len() - 1] == b'.'
            })
            .map(|(_, kind)| *kind)
    }

    /// The extension of this format's files, for stripping from a single decompressed file.
    pub fn extension(self) -> &'static str {
        KINDS_BY_NAME
            .iter()
            .find(|(_, kind)| *kind == self)
            .map(|(name, _)| *name)
            .unwrap_or_default()
    }

    /// Whether it unpacks to a single file rather than a tree.
    pub fn is_single_file(self) -> bool {
        matches!(self, ArchiveKind::Gz | ArchiveKind::Bz2 | ArchiveKind::Xz)
    }
}

fn decompressing_reader(kind: ArchiveKind, file: std::fs::File) -> Box<dyn Read> {
    let buffered = BufReader::new(file);
    match kind {
        ArchiveKind::Tar | ArchiveKind::Zip => Box::new(buffered),
        ArchiveKind::TarGz | ArchiveKind::Gz => {
            Box::new(flate2::bufread::MultiGzDecoder::new(buffered))
        }
        ArchiveKind::TarBz2 | ArchiveKind::Bz2 => {
            Box::new(bzip2::bufread::MultiBzDecoder::new(buffered))
        }
        ArchiveKind::TarXz | ArchiveKind::Xz => Box::new(lzma_rust2::XzReader::new(buffered, true)),
    }
}

fn open(path: &Path) -> Result<std::fs::File, ArtifactError> {
    std::fs::File::open(path).map_err(|source| ArtifactError::Io {
        context: format!("opening {}", path.display()),
        source,
    })
}

fn format_error(kind: ArchiveKind, error: impl std::fmt::Display) -> ArtifactError {
    ArtifactError::Archive {
        format: kind.extension(),
        message: error.to_string(),
    }
}

/// Unpacks the tree archive `archive` (not a single-file kind) into `destination`.
pub fn unpack_tree(
    kind: ArchiveKind,
    archive: &Path,
    destination: &BeneathDir,
    budget: &mut Budget,
) -> Result<(), ArtifactError> {
    match kind {
        ArchiveKind::Zip => unpack_zip(archive, destination, budget),
        _ => unpack_tar(
            kind,
            decompressing_reader(kind, open(archive)?),
            destination,
            budget,
        ),
    }
}

/// Decompresses the single-file `archive` into `entry` beneath `destination`.
pub fn decompress_file(
    kind: ArchiveKind,
    archive: &Path,
    destination: &BeneathDir,
    entry: &EntryPath,
    budget: &mut Budget,
) -> Result<(), ArtifactError> {
    let mut reader = decompressing_reader(kind, open(archive)?);
    destination.write_file(entry, 0o644, &mut reader, budget)
}

fn unpack_tar(
    kind: ArchiveKind,
    reader: Box<dyn Read>,
    destination: &BeneathDir,
    budget: &mut Budget,
) -> Result<(), ArtifactError> {
    use tar::EntryType;
    let mut archive = tar::Archive::new(reader);
    let entries = archive
        .entries()
        .map_err(|error| format_error(kind, error))?;
    for entry in entries {
        let mut entry = entry.map_err(|error| format_error(kind, error))?;
        let name = entry
            .path()
            .map_err(|error| format_error(kind, error))?
            .into_owned();
        let path = EntryPath::parse(&name)?;
        let entry_type = entry.header().entry_type();
        match entry_type {
            EntryType::Directory => {
                if !path.is_root() {
                    destination.create_dir(&path, budget)?;
                }
            }
            EntryType::Regular | EntryType::Continuous | EntryType::GNUSparse => {
                let mode = entry.header().mode().unwrap_or(0o644);
                destination.write_file(&path, mode, &mut entry, budget)?;
            }
            EntryType::Symlink => {
                let target = entry
                    .link_name()
                    .map_err(|error| format_error(kind, error))?
                    .ok_or_else(|| format_error(kind, format!("symlink {name:?} has no target")))?
                    .into_owned();
                destination.symlink(&path, &target, budget)?;
            }
            EntryType::Link => {
                let target = entry
                    .link_name()
                    .map_err(|error| format_error(kind, error))?
                    .ok_or_else(|| format_error(kind, format!("hard link {name:?} has no target")))?
                    .into_owned();
                let target = EntryPath::parse(&target).map_err(|_| ArtifactError::UnsafeEntry {
                    entry: path.display().to_string(),
                    reason: format!(
                        "hard link to {:?} points out of the destination",
                        target.display()
                    ),
                })?;
                destination.hard_link(&path, &target, budget)?;
            }
            _ => {
                tracing::debug!(entry = %path.display(), ?entry_type, "skipping archive entry of this type");
            }
        }
    }
    Ok(())
}

fn unpack_zip(
    archive: &Path,
    destination: &BeneathDir,
    budget: &mut Budget,
) -> Result<(), ArtifactError> {
    let kind = ArchiveKind::Zip;
    let mut zip = zip::ZipArchive::new(BufReader::new(open(archive)?))
        .map_err(|error| format_error(kind, error))?;
    for index in 0..zip.len() {
        let mut file = zip
            .by_index(index)
            .map_err(|error| format_error(kind, error))?;
        let name = String::from_utf8_lossy(file.name_raw()).into_owned();
        let path = EntryPath::parse(Path::new(&name))?;
        if file.is_dir() {
            if !path.is_root() {
                destination.create_dir(&path, budget)?;
            }
        } else if file.is_symlink() {
            let mut target = Vec::new();
            // A link target longer than a path can be is refused rather than read whole.
            (&mut file)
                .take(4097)
                .read_to_end(&mut target)
                .map_err(|error| format_error(kind, error))?;
            if target.len() > 4096 {
                return Err(format_error(
                    kind,
                    format!("symlink {name:?} has an overlong target"),
                ));
            }
            let target = std::path::PathBuf::from(
                <std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(target),
            );
            destination.symlink(&path, &target, budget)?;
        } else {
            let mode = file.unix_mode().unwrap_or(0o644);
            destination.write_file(&path, mode, &mut file, budget)?;
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "archive_tests.rs"]
mod tests;
