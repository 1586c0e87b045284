//! An allocation's migratable data as a tar stream, both ways (Nomad's alloc dir snapshot):
//! [`write_snapshot`] packs `alloc/data` and each task's `local/`, named relative to the alloc
//! dir (`alloc/data/…`, `<task>/local/…`), symlinks as symlinks; [`unpack_snapshot`] writes such
//! a stream into an allocation's dir, treating it as hostile: only names under `alloc/data` or
//! a known task's `local` are taken; absolute names, `..`, symlinks and hard links that lead
//! out, and device, FIFO or other special entries are refused with an error naming the entry.
//! Every write goes through the artifact unpacker's [`BeneathDir`] (`openat2` beneath the alloc
//! dir, no symlink followed), so nothing is ever written outside it.
//!
//! **Not here**, and not yet anywhere: serving the stream to another node or fetching it from
//! one (`ephemeral_disk { migrate }` stays refused by the jobspec support table until then).

use std::io::{Read, Write};
use std::path::{Component, Path};

use crate::allocdir::AllocDir;
use crate::artifact::beneath::{BeneathDir, Budget, EntryPath};
use crate::artifact::error::ArtifactError;

/// Errors packing or unpacking a snapshot.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("snapshot entry {entry:?}: {reason}")]
    Refused { entry: String, reason: String },
    #[error("reading the snapshot: {0}")]
    Read(#[source] std::io::Error),
    #[error("writing the snapshot of {path:?}")]
    Write {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Unpack(#[from] ArtifactError),
    #[error(transparent)]
    AllocDir(#[from] crate::allocdir::AllocDirError),
}

fn refused(entry: &Path, reason: &str) -> SnapshotError {
    SnapshotError::Refused {
        entry: entry.display().to_string(),
        reason: reason.to_string(),
    }
}

/// Writes the tar stream of `alloc_dir`'s `alloc/data` and the `local/` of each of `tasks` to
/// `out`. A dir that is missing, or a symlink, is left out.
pub fn write_snapshot(
    alloc_dir: &AllocDir,
    tasks: &[String],
    out: impl Write,
) -> Result<(), SnapshotError> {
    let mut builder = tar::Builder::new(out);
    builder.follow_symlinks(false);
    let mut sources = vec![(
        Path::new("alloc/data").to_path_buf(),
        alloc_dir.shared_data_dir.clone(),
    )];
    for task in tasks {
        if let Ok(task_dir) = alloc_dir.task_dir(task) {
            sources.push((Path::new(task).join("local"), task_dir.local_dir));
        }
    }
    for (name, path) in sources {
        let real_dir = std::fs::symlink_metadata(&path).is_ok_and(|meta| meta.is_dir());
        let parent_real = path
            .parent()
            .is_some_and(|parent| std::fs::symlink_metadata(parent).is_ok_and(|m| m.is_dir()));
        if !(real_dir && parent_real) {
            continue;
        }
        builder
            .append_dir_all(&name, &path)
            .map_err(|source| SnapshotError::Write {
                path: path.clone(),
                source,
            })?;
    }
    builder
        .into_inner()
        .and_then(|mut out| out.flush())
        .map_err(|source| SnapshotError::Write {
            path: alloc_dir.root.clone(),
            source,
        })
}

/// Whether `name` lies under `alloc/data` or `<task>/local` for one of `tasks`.
fn migratable(name: &Path, tasks: &[String]) -> bool {
    let mut parts = name.components().filter(|part| *part != Component::CurDir);
    match (parts.next(), parts.next()) {
        (Some(Component::Normal(first)), Some(Component::Normal(second))) => {
            (first == "alloc" && second == "data")
                || (second == "local" && tasks.iter().any(|task| first == task.as_str()))
        }
        _ => false,
    }
}

/// Unpacks the snapshot `reader` into `alloc_dir` (module docs). Stops at the first refused
/// entry; what was written before it stays, all of it inside the alloc dir.
pub fn unpack_snapshot(
    reader: impl Read,
    alloc_dir: &AllocDir,
    tasks: &[String],
) -> Result<(), SnapshotError> {
    use tar::EntryType;
    alloc_dir.build()?;
    let root = EntryPath::parse(Path::new(""))?;
    let destination = BeneathDir::open(&alloc_dir.root, &root)?;
    let mut budget = Budget::unlimited();
    let mut archive = tar::Archive::new(reader);
    for entry in archive.entries().map_err(SnapshotError::Read)? {
        let mut entry = entry.map_err(SnapshotError::Read)?;
        let name = entry.path().map_err(SnapshotError::Read)?.into_owned();
        let path = EntryPath::parse(&name).map_err(|error| match error {
            ArtifactError::UnsafeEntry { reason, .. } => refused(&name, &reason),
            other => other.into(),
        })?;
        let entry_type = entry.header().entry_type();
        let within = migratable(&name, tasks);
        // `alloc` and `<task>` themselves come before their contents in a tar of the dirs.
        let parent_dir = entry_type == EntryType::Directory
            && name.components().count() == 1
            && (name == Path::new("alloc") || tasks.iter().any(|task| name == Path::new(task)));
        if !within && !parent_dir {
            return Err(refused(
                &name,
                "only alloc/data and the tasks' local dirs are migrated",
            ));
        }
        match entry_type {
            EntryType::Directory => destination.create_dir(&path, &mut budget)?,
            EntryType::Regular | EntryType::Continuous => {
                let mode = entry.header().mode().unwrap_or(0o644);
                destination.write_file(&path, mode, &mut entry, &mut budget)?;
            }
            EntryType::Symlink => {
                let target = entry
                    .link_name()
                    .map_err(SnapshotError::Read)?
                    .ok_or_else(|| refused(&name, "symlink without a target"))?
                    .into_owned();
                destination
                    .symlink(&path, &target, &mut budget)
                    .map_err(|error| match error {
                        ArtifactError::UnsafeEntry { reason, .. } => refused(&name, &reason),
                        other => other.into(),
                    })?;
            }
            EntryType::Link => {
                let target = entry
                    .link_name()
                    .map_err(SnapshotError::Read)?
                    .ok_or_else(|| refused(&name, "hard link without a target"))?
                    .into_owned();
                if !migratable(&target, tasks) {
                    return Err(refused(
                        &name,
                        &format!("hard link to {:?} points out of the migrated dirs", target),
                    ));
                }
                let target = EntryPath::parse(&target).map_err(|_| {
                    refused(
                        &name,
                        &format!("hard link to {:?} points out of the alloc dir", target),
                    )
                })?;
                destination.hard_link(&path, &target, &mut budget)?;
            }
            other => {
                return Err(refused(
                    &name,
                    &format!("{other:?} entries (devices, FIFOs, …) are refused"),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tar::EntryType;

    /// One raw entry: name, type, link target, data.
    type Raw<'a> = (&'a str, EntryType, &'a str, &'a [u8]);

    /// A tar of raw entries: header bytes are written as is, so hostile names survive.
    fn tar_bytes(entries: &[Raw<'_>]) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        for (name, kind, link, data) in entries {
            let mut header = tar::Header::new_gnu();
            {
                let gnu = header.as_gnu_mut().unwrap();
                gnu.name[..name.len()].copy_from_slice(name.as_bytes());
                gnu.linkname[..link.len()].copy_from_slice(link.as_bytes());
            }
            header.set_entry_type(*kind);
            header.set_mode(0o644);
            header.set_size(data.len() as u64);
            header.set_cksum();
            builder.append(&header, *data).unwrap();
        }
        builder.into_inner().unwrap()
    }

    fn fresh() -> (tempfile::TempDir, AllocDir) {
        let data = tempfile::tempdir().unwrap();
        let alloc_dir = AllocDir::new(&data.path().join("alloc"), "new").unwrap();
        (data, alloc_dir)
    }

    fn tasks() -> Vec<String> {
        vec!["web".to_string()]
    }

    #[test]
    fn a_snapshot_round_trips_data_local_and_inner_symlinks() {
        let data = tempfile::tempdir().unwrap();
        let old = AllocDir::new(&data.path().join("alloc"), "old").unwrap();
        old.build().unwrap();
        std::fs::create_dir_all(old.shared_data_dir.join("db")).unwrap();
        std::fs::write(old.shared_data_dir.join("db/rows"), "1,2").unwrap();
        std::os::unix::fs::symlink("db/rows", old.shared_data_dir.join("latest")).unwrap();
        let web = old.task_dir("web").unwrap();
        web.build(false, 0).unwrap();
        std::fs::write(web.local_dir.join("cache"), "warm").unwrap();
        std::fs::write(web.secrets_dir.join("token"), "never").unwrap();
        let mut stream = Vec::new();
        write_snapshot(&old, &tasks(), &mut stream).unwrap();

        let (_keep, new) = fresh();
        unpack_snapshot(stream.as_slice(), &new, &tasks()).unwrap();
        assert_eq!(
            std::fs::read_to_string(new.shared_data_dir.join("latest")).unwrap(),
            "1,2"
        );
        assert!(
            std::fs::symlink_metadata(new.shared_data_dir.join("latest"))
                .unwrap()
                .is_symlink()
        );
        let new_web = new.task_dir("web").unwrap();
        assert_eq!(
            std::fs::read_to_string(new_web.local_dir.join("cache")).unwrap(),
            "warm"
        );
        assert!(!new_web.secrets_dir.join("token").exists());
    }

    #[test]
    fn a_hostile_snapshot_is_refused_naming_the_entry_and_writes_nothing_outside() {
        let cases: &[(&[Raw<'_>], &str, &str)] = &[
            (
                &[("/etc/owned", EntryType::Regular, "", b"x")],
                "/etc/owned",
                "absolute",
            ),
            (
                &[("alloc/data/../../../../owned", EntryType::Regular, "", b"x")],
                "alloc/data/../../../../owned",
                "..",
            ),
            (
                &[("alloc/data/out", EntryType::Symlink, "../../../..", b"")],
                "alloc/data/out",
                "",
            ),
            (
                &[("alloc/data/abs", EntryType::Symlink, "/etc", b"")],
                "alloc/data/abs",
                "",
            ),
            (
                &[("alloc/data/hard", EntryType::Link, "../../../owned", b"")],
                "alloc/data/hard",
                "hard link",
            ),
            (
                &[("alloc/data/null", EntryType::Char, "", b"")],
                "alloc/data/null",
                "refused",
            ),
            (
                &[("alloc/data/disk", EntryType::Block, "", b"")],
                "alloc/data/disk",
                "refused",
            ),
            (
                &[("alloc/data/pipe", EntryType::Fifo, "", b"")],
                "alloc/data/pipe",
                "refused",
            ),
            (
                &[("web/secrets/token", EntryType::Regular, "", b"x")],
                "web/secrets/token",
                "only alloc/data",
            ),
            // A symlink planted first, then a file written through it.
            (
                &[
                    ("alloc/data/link", EntryType::Symlink, "sub", b""),
                    (
                        "alloc/data/link/../../../../owned",
                        EntryType::Regular,
                        "",
                        b"x",
                    ),
                ],
                "alloc/data/link/../../../../owned",
                "..",
            ),
        ];
        for (entries, entry, reason) in cases {
            let (data, new) = fresh();
            let error =
                unpack_snapshot(tar_bytes(entries).as_slice(), &new, &tasks()).expect_err(entry);
            let text = error.to_string();
            assert!(text.contains(entry), "{entry}: {text}");
            assert!(text.contains(reason), "{entry}: {text}");
            assert!(!data.path().join("owned").exists(), "{entry}");
            assert!(
                !data.path().parent().unwrap().join("owned").exists(),
                "{entry}"
            );
        }
    }
}
