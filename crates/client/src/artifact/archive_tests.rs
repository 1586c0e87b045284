//! Every format unpacks; hostile archives are refused with the entry named and nothing
//! written outside the destination.

use std::io::Write;
use std::path::Path;

use tar::EntryType;

use super::*;

/// One tar entry, written with raw header bytes so hostile names survive.
struct Raw<'a> {
    name: &'a str,
    kind: EntryType,
    link: &'a str,
    data: &'a [u8],
}

fn file<'a>(name: &'a str, data: &'a [u8]) -> Raw<'a> {
    Raw {
        name,
        kind: EntryType::Regular,
        link: "",
        data,
    }
}

fn link<'a>(name: &'a str, kind: EntryType, target: &'a str) -> Raw<'a> {
    Raw {
        name,
        kind,
        link: target,
        data: b"",
    }
}

fn tar_bytes(entries: &[Raw<'_>]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for entry in entries {
        let mut header = tar::Header::new_gnu();
        {
            let gnu = header.as_gnu_mut().expect("gnu header");
            gnu.name[..entry.name.len()].copy_from_slice(entry.name.as_bytes());
            gnu.linkname[..entry.link.len()].copy_from_slice(entry.link.as_bytes());
        }
        header.set_entry_type(entry.kind);
        header.set_mode(0o755);
        header.set_size(entry.data.len() as u64);
        header.set_cksum();
        builder.append(&header, entry.data).expect("append");
    }
    builder.into_inner().expect("finish")
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(bytes).expect("gzip");
    encoder.finish().expect("gzip")
}

fn bzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
    encoder.write_all(bytes).expect("bzip2");
    encoder.finish().expect("bzip2")
}

fn xz(bytes: &[u8]) -> Vec<u8> {
    let mut writer =
        lzma_rust2::XzWriter::new(Vec::new(), lzma_rust2::XzOptions::default()).expect("xz");
    writer.write_all(bytes).expect("xz");
    writer.finish().expect("xz")
}

fn zip_bytes(entries: &[(&str, &[u8])], symlinks: &[(&str, &str)]) -> Vec<u8> {
    let mut writer = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .unix_permissions(0o640);
    for (name, data) in entries {
        writer.start_file(*name, options).expect("start");
        writer.write_all(data).expect("write");
    }
    for (name, target) in symlinks {
        writer
            .add_symlink(*name, *target, options)
            .expect("symlink");
    }
    writer.finish().expect("finish").into_inner()
}

/// A task dir with `local/` beside a sibling `outside/` that must stay empty.
struct Fixture {
    root: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Self {
        let root = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(root.path().join("task/local")).expect("task");
        std::fs::create_dir_all(root.path().join("outside")).expect("outside");
        Fixture { root }
    }

    fn task(&self) -> std::path::PathBuf {
        self.root.path().join("task")
    }

    fn local(&self, name: &str) -> std::path::PathBuf {
        self.task().join("local").join(name)
    }

    fn archive(&self, name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let path = self.root.path().join(name);
        std::fs::write(&path, bytes).expect("write archive");
        path
    }

    fn destination(&self) -> BeneathDir {
        BeneathDir::open(
            &self.task(),
            &EntryPath::parse(Path::new("local")).expect("entry"),
        )
        .expect("open destination")
    }

    fn unpack(&self, kind: ArchiveKind, bytes: &[u8]) -> Result<(), ArtifactError> {
        let archive = self.archive("archive", bytes);
        unpack_tree(
            kind,
            &archive,
            &self.destination(),
            &mut Budget::new(1 << 20, 100),
        )
    }

    fn assert_nothing_outside(&self) {
        let outside: Vec<_> = std::fs::read_dir(self.root.path().join("outside"))
            .expect("ls")
            .collect();
        assert!(outside.is_empty(), "written outside: {outside:?}");
        assert!(!self.root.path().join("etc").exists());
        assert!(!self.task().join("etc").exists());
        assert!(!self.task().join("x").exists());
    }
}

fn sample_tar() -> Vec<u8> {
    tar_bytes(&[
        file("bin/app", b"#!/bin/sh\necho hi\n"),
        link("bin/run", EntryType::Symlink, "app"),
        link("bin/hard", EntryType::Link, "bin/app"),
        file("conf/app.conf", b"port = 80\n"),
    ])
}

fn assert_sample_unpacked(fixture: &Fixture) {
    assert_eq!(
        std::fs::read(fixture.local("bin/app")).expect("app"),
        b"#!/bin/sh\necho hi\n"
    );
    assert_eq!(
        std::fs::read_link(fixture.local("bin/run")).expect("link"),
        Path::new("app")
    );
    assert_eq!(
        std::fs::read(fixture.local("bin/hard")).expect("hard"),
        b"#!/bin/sh\necho hi\n"
    );
    assert_eq!(
        std::fs::read(fixture.local("conf/app.conf")).expect("conf"),
        b"port = 80\n"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(fixture.local("bin/app"))
        .expect("meta")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o755);
}

#[test]
fn every_tar_format_unpacks() {
    let plain = sample_tar();
    for (kind, bytes) in [
        (ArchiveKind::Tar, plain.clone()),
        (ArchiveKind::TarGz, gzip(&plain)),
        (ArchiveKind::TarBz2, bzip(&plain)),
        (ArchiveKind::TarXz, xz(&plain)),
    ] {
        let fixture = Fixture::new();
        fixture
            .unpack(kind, &bytes)
            .unwrap_or_else(|error| panic!("{kind:?}: {error}"));
        assert_sample_unpacked(&fixture);
    }
}

#[test]
fn zip_unpacks_files_modes_and_inner_symlinks() {
    let fixture = Fixture::new();
    let bytes = zip_bytes(
        &[("dir/a.txt", b"alpha"), ("b.txt", b"beta")],
        &[("dir/l", "a.txt")],
    );
    fixture.unpack(ArchiveKind::Zip, &bytes).expect("zip");
    assert_eq!(
        std::fs::read(fixture.local("dir/a.txt")).expect("a"),
        b"alpha"
    );
    assert_eq!(
        std::fs::read(fixture.local("dir/l")).expect("via link"),
        b"alpha"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(fixture.local("b.txt"))
        .expect("meta")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o640);
}

#[test]
fn single_file_compressions_decompress() {
    for (kind, bytes) in [
        (ArchiveKind::Gz, gzip(b"payload")),
        (ArchiveKind::Bz2, bzip(b"payload")),
        (ArchiveKind::Xz, xz(b"payload")),
    ] {
        let fixture = Fixture::new();
        let archive = fixture.archive("file", &bytes);
        let entry = EntryPath::parse(Path::new("out.bin")).expect("entry");
        decompress_file(
            kind,
            &archive,
            &fixture.destination(),
            &entry,
            &mut Budget::unlimited(),
        )
        .unwrap_or_else(|error| panic!("{kind:?}: {error}"));
        assert_eq!(
            std::fs::read(fixture.local("out.bin")).expect("out"),
            b"payload"
        );
    }
}

#[test]
fn kinds_come_from_extensions_and_the_archive_option() {
    assert_eq!(
        ArchiveKind::from_file_name("app.tar.gz"),
        Some(ArchiveKind::TarGz)
    );
    assert_eq!(
        ArchiveKind::from_file_name("APP.TGZ"),
        Some(ArchiveKind::TarGz)
    );
    assert_eq!(
        ArchiveKind::from_file_name("app.tar.xz"),
        Some(ArchiveKind::TarXz)
    );
    assert_eq!(
        ArchiveKind::from_file_name("app.tbz2"),
        Some(ArchiveKind::TarBz2)
    );
    assert_eq!(
        ArchiveKind::from_file_name("data.gz"),
        Some(ArchiveKind::Gz)
    );
    assert_eq!(
        ArchiveKind::from_file_name("app.zip"),
        Some(ArchiveKind::Zip)
    );
    assert_eq!(ArchiveKind::from_file_name("app"), None);
    assert_eq!(ArchiveKind::from_file_name(".gz"), None);
    assert_eq!(
        ArchiveKind::from_option("tgz").expect("tgz"),
        Some(ArchiveKind::TarGz)
    );
    assert_eq!(ArchiveKind::from_option("false").expect("false"), None);
    assert!(ArchiveKind::from_option("rar").is_err());
}

fn assert_refused(fixture: &Fixture, result: Result<(), ArtifactError>, entry: &str) {
    let error = result.expect_err("hostile archive refused");
    assert!(
        matches!(&error, ArtifactError::UnsafeEntry { entry: named, .. } if named == entry),
        "{error}"
    );
    assert!(error.to_string().contains(entry), "{error}");
    fixture.assert_nothing_outside();
}

#[test]
fn climbing_and_absolute_entries_are_refused() {
    let fixture = Fixture::new();
    let result = fixture.unpack(
        ArchiveKind::Tar,
        &tar_bytes(&[file("../../etc/x", b"pwned")]),
    );
    assert_refused(&fixture, result, "../../etc/x");
    let result = fixture.unpack(
        ArchiveKind::Tar,
        &tar_bytes(&[file("../outside/x", b"pwned")]),
    );
    assert_refused(&fixture, result, "../outside/x");
    let result = fixture.unpack(ArchiveKind::Tar, &tar_bytes(&[file("/etc/x", b"pwned")]));
    assert_refused(&fixture, result, "/etc/x");
    let result = fixture.unpack(
        ArchiveKind::Zip,
        &zip_bytes(&[("../../outside/z", b"pwned")], &[]),
    );
    assert_refused(&fixture, result, "../../outside/z");
}

#[test]
fn outward_symlinks_are_refused() {
    let outside = "../../outside";
    for (name, target) in [("evil", "/etc"), ("evil", outside), ("a/evil", "../../x")] {
        let fixture = Fixture::new();
        let result = fixture.unpack(
            ArchiveKind::TarGz,
            &gzip(&tar_bytes(&[
                link(name, EntryType::Symlink, target),
                file(&format!("{name}/x"), b"pwned"),
            ])),
        );
        assert_refused(&fixture, result, name);
    }
    let fixture = Fixture::new();
    let result = fixture.unpack(
        ArchiveKind::Zip,
        &zip_bytes(&[], &[("evil", "../../outside")]),
    );
    assert_refused(&fixture, result, "evil");
}

#[test]
fn writing_through_an_inner_symlink_is_refused() {
    // `sub -> .` stays inside, but an entry beneath it would be placed through a link.
    let fixture = Fixture::new();
    let result = fixture.unpack(
        ArchiveKind::Tar,
        &tar_bytes(&[link("sub", EntryType::Symlink, "."), file("sub/x", b"data")]),
    );
    assert_refused(&fixture, result, "sub/x");
}

#[test]
fn outward_hard_links_are_refused() {
    let fixture = Fixture::new();
    let secret_dir = fixture.root.path().join("secret");
    std::fs::create_dir(&secret_dir).expect("secret dir");
    let secret = secret_dir.join("file");
    std::fs::write(&secret, b"s").expect("secret");
    let result = fixture.unpack(
        ArchiveKind::Tar,
        &tar_bytes(&[link("h", EntryType::Link, "../../secret/file")]),
    );
    assert_refused(&fixture, result, "h");
    let result = fixture.unpack(
        ArchiveKind::Tar,
        &tar_bytes(&[link("h", EntryType::Link, &secret.to_string_lossy())]),
    );
    assert_refused(&fixture, result, "h");
    // A hard link to an inner symlink would re-read its target from elsewhere.
    let result = fixture.unpack(
        ArchiveKind::Tar,
        &tar_bytes(&[
            link("a/b/l", EntryType::Symlink, "../../x"),
            link("h", EntryType::Link, "a/b/l"),
        ]),
    );
    assert_refused(&fixture, result, "h");
    use std::os::unix::fs::MetadataExt;
    assert_eq!(std::fs::metadata(&secret).expect("secret").nlink(), 1);
    assert!(!fixture.local("h").exists());
}

#[test]
fn decompression_bombs_stop_at_the_limit() {
    let zeros = vec![0u8; 4 << 20];
    for (kind, bytes) in [
        (
            ArchiveKind::TarGz,
            gzip(&tar_bytes(&[file("small", b"ok"), file("bomb", &zeros)])),
        ),
        (
            ArchiveKind::Zip,
            zip_bytes(&[("small", b"ok"), ("bomb", &zeros)], &[]),
        ),
    ] {
        let fixture = Fixture::new();
        let error = fixture.unpack(kind, &bytes).expect_err("bomb refused");
        assert!(
            matches!(&error, ArtifactError::SizeLimit { entry, limit } if entry == "bomb" && *limit == 1 << 20),
            "{kind:?}: {error}"
        );
        let written = std::fs::metadata(fixture.local("bomb")).map_or(0, |meta| meta.len());
        assert!(written <= 1 << 20, "{written} bytes written past the limit");
    }
    // A single compressed file counts the same way.
    let fixture = Fixture::new();
    let archive = fixture.archive("bomb.gz", &gzip(&zeros));
    let entry = EntryPath::parse(Path::new("bomb")).expect("entry");
    let error = decompress_file(
        ArchiveKind::Gz,
        &archive,
        &fixture.destination(),
        &entry,
        &mut Budget::new(1 << 20, 0),
    )
    .expect_err("bomb refused");
    assert!(matches!(error, ArtifactError::SizeLimit { .. }), "{error}");
    // So does the number of entries.
    let fixture = Fixture::new();
    let many: Vec<String> = (0..200).map(|index| format!("f{index}")).collect();
    let entries: Vec<Raw<'_>> = many.iter().map(|name| file(name, b"x")).collect();
    let error = fixture
        .unpack(ArchiveKind::Tar, &tar_bytes(&entries))
        .expect_err("too many");
    assert!(
        matches!(error, ArtifactError::FileCountLimit { ref entry, .. } if entry == "f100"),
        "{error}"
    );
}
