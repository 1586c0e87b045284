//! Snapshot archives: the store's whole keyspace at one backend revision, in the layout of
//! Nomad's `operator snapshot` files, so an operator handles them the same way.
//!
//! ```text
//!  gzip( tar(
//!    meta.json    what, when, at which index and revision, from which backend (JSON)
//!    state.bin    every pair: u32 BE key length, key, u32 BE value length, value
//!    keyring.kek  the key-encryption key sealing the root keys in state.bin (absent when
//!                 redacted)
//!    SHA256SUMS   `<hex sha-256>  <member>` for every member above
//!  ))
//! ```
//!
//! The pairs are the backend-independent keys and values the engine writes (table records,
//! modify indexes, the schema marker), so a snapshot taken on one backend restores on the other.
//! Reading checks everything before anything is handed out: the gzip stream to its end (its
//! CRC), each member against `SHA256SUMS`, the format name and version, and that `state.bin`
//! parses to its last byte. A file that fails any check is refused with what failed.
//!
//! Not here: reading the store or replacing it (`Kv::read_all`, `Engine::restore`), and what
//! the key-encryption key opens (the server's keyring).

use std::io::Read;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::engine::Table;
use crate::kv::{KvContents, KvPair};

/// What `meta.json` names as the format of a drover snapshot.
pub const FORMAT: &str = "drover-state";
/// The version of the archive layout this build writes and reads.
pub const ARCHIVE_VERSION: u32 = 1;

const META: &str = "meta.json";
const STATE: &str = "state.bin";
const KEYRING: &str = "keyring.kek";
const SUMS: &str = "SHA256SUMS";

/// Errors of writing or reading a snapshot archive.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("not a snapshot archive: {0}")]
    NotAnArchive(String),
    #[error("the snapshot is damaged or truncated: {0}")]
    Damaged(String),
    #[error("the snapshot's {member} does not match its SHA-256 sum: the file is damaged")]
    Checksum { member: String },
    #[error("not a drover snapshot: {0}")]
    Foreign(String),
    #[error(
        "snapshot archive version {found} is not supported (this drover reads version {ARCHIVE_VERSION})"
    )]
    Version { found: u32 },
    #[error("writing the snapshot: {0}")]
    Write(String),
}

/// `meta.json`: Nomad's raft snapshot metadata fields (`Version`, `ID`, `Index`, `Term`,
/// `Size`) and what drover adds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct SnapshotMeta {
    /// The archive layout's version ([`ARCHIVE_VERSION`]).
    pub version: u32,
    /// `<term>-<index>-<unix milliseconds>`, as Nomad names its snapshots.
    #[serde(rename = "ID")]
    pub id: String,
    /// The store's latest modify index.
    pub index: u64,
    /// The backend's consensus term (etcd's raft term); 0 for the embedded store.
    pub term: u64,
    /// The bytes of `state.bin`.
    pub size: u64,
    /// [`FORMAT`]: a drover snapshot.
    pub format: String,
    /// The record schema of the store ([`crate::SCHEMA_VERSION`]).
    pub schema_version: u32,
    /// The backend it was read from (`embedded`, `etcd`).
    pub backend: String,
    /// The backend revision it was read at.
    pub revision: u64,
    /// Whether `keyring.kek` came along.
    pub keyring_included: bool,
}

/// A read (and checked) archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub meta: SnapshotMeta,
    pub pairs: Vec<KvPair>,
    /// The keyring's key-encryption key, when it came along.
    pub keyring: Option<Vec<u8>>,
}

/// What one table holds in a snapshot (`operator snapshot inspect`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct TableStats {
    pub name: String,
    pub count: u64,
    /// Bytes of its keys and values.
    pub sum: u64,
}

impl Snapshot {
    /// A snapshot of `contents` (a backend's [`crate::Kv::read_all`]) taken at
    /// `created_unix_ms`, with the keyring's key-encryption key when given.
    pub fn of(contents: KvContents, keyring: Option<Vec<u8>>, created_unix_ms: i64) -> Self {
        let index = contents
            .pairs
            .iter()
            .find(|pair| pair.key == b"m/index")
            .and_then(|pair| <[u8; 8]>::try_from(pair.value.as_slice()).ok())
            .map_or(0, u64::from_be_bytes);
        let size = contents
            .pairs
            .iter()
            .map(|pair| 8 + pair.key.len() as u64 + pair.value.len() as u64)
            .sum();
        Self {
            meta: SnapshotMeta {
                version: ARCHIVE_VERSION,
                id: format!("{}-{index}-{created_unix_ms}", contents.term),
                index,
                term: contents.term,
                size,
                format: FORMAT.to_owned(),
                schema_version: crate::SCHEMA_VERSION,
                backend: contents.backend.to_owned(),
                revision: contents.revision,
                keyring_included: keyring.is_some(),
            },
            pairs: contents.pairs,
            keyring,
        }
    }

    /// This snapshot without its key-encryption key (`-redact`).
    pub fn redacted(mut self) -> Self {
        self.keyring = None;
        self.meta.keyring_included = false;
        self
    }

    /// The archive's bytes (gzip-compressed tar).
    pub fn encode(&self) -> Result<Vec<u8>, ArchiveError> {
        let write_error = |error: std::io::Error| ArchiveError::Write(error.to_string());
        let mut state = Vec::with_capacity(usize::try_from(self.meta.size).unwrap_or(0));
        for pair in &self.pairs {
            for part in [&pair.key, &pair.value] {
                let length = u32::try_from(part.len())
                    .map_err(|_| ArchiveError::Write("a key or value is over 4 GiB".to_owned()))?;
                state.extend_from_slice(&length.to_be_bytes());
                state.extend_from_slice(part);
            }
        }
        let mut meta = self.meta.clone();
        meta.size = state.len() as u64;
        let meta =
            serde_json::to_vec(&meta).map_err(|error| ArchiveError::Write(error.to_string()))?;
        let mut members: Vec<(&str, &[u8])> = vec![(META, &meta), (STATE, &state)];
        if let Some(keyring) = &self.keyring {
            members.push((KEYRING, keyring));
        }
        let sums: String = members
            .iter()
            .map(|(name, bytes)| format!("{}  {name}\n", sha256_hex(bytes)))
            .collect();
        members.push((SUMS, sums.as_bytes()));
        let gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        let mut tar = tar::Builder::new(gzip);
        let modified = u64::try_from(self.created_unix_ms() / 1000).unwrap_or(0);
        for (name, bytes) in members {
            let mut header = tar::Header::new_ustar();
            header.set_size(bytes.len() as u64);
            header.set_mode(0o600);
            header.set_mtime(modified);
            header.set_entry_type(tar::EntryType::Regular);
            tar.append_data(&mut header, name, bytes)
                .map_err(write_error)?;
        }
        let gzip = tar.into_inner().map_err(write_error)?;
        gzip.finish().map_err(write_error)
    }

    /// When it was taken (from its ID), in Unix milliseconds; 0 when the ID does not say.
    pub fn created_unix_ms(&self) -> i64 {
        created_from_id(&self.meta.id)
    }

    /// Reads and checks an archive (see the module docs for what is checked).
    pub fn decode(bytes: &[u8]) -> Result<Self, ArchiveError> {
        if !bytes.starts_with(&[0x1f, 0x8b]) {
            return Err(ArchiveError::NotAnArchive(
                "it is not gzip-compressed (a snapshot archive is a .tar.gz)".to_owned(),
            ));
        }
        let damaged = |error: std::io::Error| ArchiveError::Damaged(error.to_string());
        let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(bytes));
        let mut members: Vec<(String, Vec<u8>)> = Vec::new();
        for entry in archive.entries().map_err(damaged)? {
            let mut entry = entry.map_err(damaged)?;
            let name = entry
                .path()
                .map_err(damaged)?
                .to_string_lossy()
                .into_owned();
            if ![META, STATE, KEYRING, SUMS].contains(&name.as_str()) {
                return Err(ArchiveError::Foreign(format!(
                    "unexpected file {name:?} in the archive"
                )));
            }
            if members.iter().any(|(seen, _)| *seen == name) {
                return Err(ArchiveError::Foreign(format!(
                    "{name} appears twice in the archive"
                )));
            }
            let mut content = Vec::new();
            entry.read_to_end(&mut content).map_err(damaged)?;
            members.push((name, content));
        }
        // The tar reader stops at the end-of-archive blocks; reading the gzip stream to its end
        // checks its length and CRC, so a file cut after the archive's members is found too.
        let mut rest = Vec::new();
        archive
            .into_inner()
            .read_to_end(&mut rest)
            .map_err(damaged)?;
        let member = |name: &str| {
            members
                .iter()
                .find(|(seen, _)| seen == name)
                .map(|(_, content)| content.as_slice())
        };
        let sums = member(SUMS)
            .ok_or_else(|| ArchiveError::Foreign(format!("the archive has no {SUMS}")))?;
        let sums = parse_sums(sums)?;
        for (name, content) in &members {
            if name == SUMS {
                continue;
            }
            match sums.iter().find(|(listed, _)| listed == name) {
                Some((_, sum)) if *sum == sha256_hex(content) => {}
                Some(_) => {
                    return Err(ArchiveError::Checksum {
                        member: name.clone(),
                    });
                }
                None => {
                    return Err(ArchiveError::Foreign(format!(
                        "{name} has no sum in {SUMS}"
                    )));
                }
            }
        }
        for (listed, _) in &sums {
            if member(listed).is_none() {
                return Err(ArchiveError::Damaged(format!(
                    "{listed} is listed in {SUMS} but missing from the archive"
                )));
            }
        }
        let meta = member(META)
            .ok_or_else(|| ArchiveError::Foreign(format!("the archive has no {META}")))?;
        let meta: serde_json::Value = serde_json::from_slice(meta)
            .map_err(|error| ArchiveError::Foreign(format!("{META}: {error}")))?;
        match meta.get("Format").and_then(serde_json::Value::as_str) {
            Some(FORMAT) => {}
            Some(other) => {
                return Err(ArchiveError::Foreign(format!(
                    "{META} names format {other:?}, not {FORMAT:?}"
                )));
            }
            None => {
                return Err(ArchiveError::Foreign(format!(
                    "{META} names no format (a Nomad snapshot holds Nomad's own state, which \
                     drover cannot restore)"
                )));
            }
        }
        let version = meta
            .get("Version")
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(0);
        if version != u64::from(ARCHIVE_VERSION) {
            return Err(ArchiveError::Version {
                found: u32::try_from(version).unwrap_or(u32::MAX),
            });
        }
        let meta: SnapshotMeta = serde_json::from_value(meta)
            .map_err(|error| ArchiveError::Foreign(format!("{META}: {error}")))?;
        let state = member(STATE)
            .ok_or_else(|| ArchiveError::Foreign(format!("the archive has no {STATE}")))?;
        if state.len() as u64 != meta.size {
            return Err(ArchiveError::Damaged(format!(
                "{STATE} holds {} bytes, {META} says {}",
                state.len(),
                meta.size
            )));
        }
        let pairs = parse_state(state)?;
        let keyring = member(KEYRING).map(<[u8]>::to_vec);
        if keyring.is_some() != meta.keyring_included {
            return Err(ArchiveError::Damaged(format!(
                "{META} and the archive disagree on whether {KEYRING} is included"
            )));
        }
        Ok(Self {
            meta,
            pairs,
            keyring,
        })
    }

    /// What each table holds (records and bytes), largest first, then the store's own keys
    /// (indexes, schema marker) as `meta`.
    pub fn table_stats(&self) -> Vec<TableStats> {
        let mut stats: Vec<TableStats> = Vec::new();
        for pair in &self.pairs {
            let name = table_of(&pair.key);
            let bytes = (pair.key.len() + pair.value.len()) as u64;
            match stats.iter_mut().find(|stat| stat.name == name) {
                Some(stat) => {
                    stat.count += 1;
                    stat.sum += bytes;
                }
                None => stats.push(TableStats {
                    name,
                    count: 1,
                    sum: bytes,
                }),
            }
        }
        stats.sort_by(|a, b| b.sum.cmp(&a.sum).then_with(|| a.name.cmp(&b.name)));
        stats
    }

    /// The records of `table`: table-relative key and stored bytes.
    pub fn records(&self, table: Table) -> impl Iterator<Item = (&[u8], &[u8])> {
        let prefix = format!("t/{}/", table.name()).into_bytes();
        self.pairs.iter().filter_map(move |pair| {
            pair.key
                .strip_prefix(prefix.as_slice())
                .map(|key| (key, pair.value.as_slice()))
        })
    }

    /// Replaces the stored bytes of record `key` of `table`.
    pub fn set_record(&mut self, table: Table, key: &[u8], value: Vec<u8>) {
        let mut full = format!("t/{}/", table.name()).into_bytes();
        full.extend_from_slice(key);
        if let Some(pair) = self.pairs.iter_mut().find(|pair| pair.key == full) {
            pair.value = value;
        }
    }
}

fn table_of(key: &[u8]) -> String {
    match key.strip_prefix(b"t/") {
        Some(rest) => {
            let end = rest
                .iter()
                .position(|byte| *byte == b'/')
                .unwrap_or(rest.len());
            String::from_utf8_lossy(&rest[..end]).into_owned()
        }
        None => "meta".to_owned(),
    }
}

fn created_from_id(id: &str) -> i64 {
    id.rsplit('-')
        .next()
        .and_then(|millis| millis.parse().ok())
        .unwrap_or(0)
}

/// The SHA-256 of `bytes` (an archive's, for the `Digest` header of its download).
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

fn sha256_hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    Sha256::digest(bytes)
        .iter()
        .fold(String::with_capacity(64), |mut text, byte| {
            // Writing to a String cannot fail.
            let _ = write!(text, "{byte:02x}");
            text
        })
}

fn parse_sums(bytes: &[u8]) -> Result<Vec<(String, String)>, ArchiveError> {
    let text = std::str::from_utf8(bytes)
        .map_err(|_| ArchiveError::Damaged(format!("{SUMS} is not text")))?;
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            let (sum, name) = line.split_once("  ").ok_or_else(|| {
                ArchiveError::Damaged(format!("{SUMS} line {line:?} is not `<sum>  <file>`"))
            })?;
            Ok((name.trim().to_owned(), sum.trim().to_ascii_lowercase()))
        })
        .collect()
}

/// The next length-prefixed part of `state.bin` (a key or a value), moving `rest` past it.
fn take_part(all: &[u8], rest: &mut &[u8], what: &str) -> Result<Vec<u8>, ArchiveError> {
    let offset = all.len() - rest.len();
    let cut = || ArchiveError::Damaged(format!("{STATE} ends inside a {what} at byte {offset}"));
    let (length, after) = rest.split_first_chunk::<4>().ok_or_else(cut)?;
    let length = u32::from_be_bytes(*length) as usize;
    if after.len() < length {
        return Err(cut());
    }
    let (part, after) = after.split_at(length);
    *rest = after;
    Ok(part.to_vec())
}

fn parse_state(bytes: &[u8]) -> Result<Vec<KvPair>, ArchiveError> {
    let mut rest = bytes;
    let mut pairs: Vec<KvPair> = Vec::new();
    while !rest.is_empty() {
        let key = take_part(bytes, &mut rest, "key")?;
        let value = take_part(bytes, &mut rest, "value")?;
        if pairs.last().is_some_and(|previous| previous.key >= key) {
            return Err(ArchiveError::Damaged(format!(
                "{STATE}: keys are not in order at {}",
                String::from_utf8_lossy(&key)
            )));
        }
        pairs.push(KvPair { key, value });
    }
    Ok(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contents() -> KvContents {
        let pair = |key: &[u8], value: &[u8]| KvPair {
            key: key.to_vec(),
            value: value.to_vec(),
        };
        KvContents {
            revision: 9,
            pairs: vec![
                pair(b"m/index", &42_u64.to_be_bytes()),
                pair(b"m/schema", b"1"),
                pair(b"t/jobs/default\0web", b"{\"ID\":\"web\"}"),
                pair(b"t/variables/default\0a/b", &[0_u8; 300]),
            ],
            term: 3,
            backend: "etcd",
        }
    }

    #[test]
    fn an_archive_round_trips_with_its_meta_and_keyring() {
        let snapshot = Snapshot::of(contents(), Some(b"kek".to_vec()), 1_700_000_000_123);
        let bytes = snapshot.encode().unwrap();
        let read = Snapshot::decode(&bytes).unwrap();
        assert_eq!(read.pairs, snapshot.pairs);
        assert_eq!(read.keyring.as_deref(), Some(&b"kek"[..]));
        assert_eq!(read.meta.id, "3-42-1700000000123");
        assert_eq!((read.meta.index, read.meta.term), (42, 3));
        assert_eq!(read.meta.backend, "etcd");
        assert_eq!(read.created_unix_ms(), 1_700_000_000_123);
        let redacted = Snapshot::decode(&read.redacted().encode().unwrap()).unwrap();
        assert_eq!(redacted.keyring, None);
        assert!(!redacted.meta.keyring_included);
        let stats = snapshot.table_stats();
        assert_eq!(stats[0].name, "variables");
        assert!(
            stats
                .iter()
                .any(|stat| stat.name == "meta" && stat.count == 2)
        );
    }

    #[test]
    fn damaged_truncated_and_foreign_files_are_refused_by_what_is_wrong() {
        let bytes = Snapshot::of(contents(), None, 1).encode().unwrap();
        // Cut anywhere: never accepted.
        for cut in [10, bytes.len() / 2, bytes.len() - 1] {
            let error = Snapshot::decode(&bytes[..cut]).unwrap_err();
            assert!(
                matches!(error, ArchiveError::Damaged(_)),
                "cut at {cut}: {error}"
            );
        }
        // A flipped byte: the gzip CRC or a member's sum catches it.
        for position in (20..bytes.len() - 8).step_by(7) {
            let mut flipped = bytes.clone();
            flipped[position] ^= 0x55;
            assert!(Snapshot::decode(&flipped).is_err(), "flip at {position}");
        }
        let error = Snapshot::decode(b"{\"not\": \"an archive\"}").unwrap_err();
        assert!(error.to_string().contains("not gzip"), "{error}");

        // A well-formed archive that a member's sum does not match.
        let mut snapshot = Snapshot::of(contents(), None, 1);
        let honest = snapshot.encode().unwrap();
        snapshot.pairs[2].value = b"{\"ID\":\"evil\"}".to_vec();
        let tampered = repack_with_sums_of(&honest, &snapshot.encode().unwrap());
        let error = Snapshot::decode(&tampered).unwrap_err();
        assert!(
            matches!(&error, ArchiveError::Checksum { member } if member == "state.bin"),
            "{error}"
        );

        // Nomad's own layout, without drover's format name.
        let nomad = archive_of(&[
            (
                "meta.json",
                b"{\"Version\":1,\"ID\":\"2-5-1\",\"Index\":5}".to_vec(),
            ),
            ("state.bin", b"\x83\x01".to_vec()),
        ]);
        let error = Snapshot::decode(&nomad).unwrap_err();
        assert!(error.to_string().contains("Nomad snapshot"), "{error}");
    }

    /// An archive of `members` with a correct SHA256SUMS.
    fn archive_of(members: &[(&str, Vec<u8>)]) -> Vec<u8> {
        let mut all: Vec<(String, Vec<u8>)> = members
            .iter()
            .map(|(name, bytes)| ((*name).to_owned(), bytes.clone()))
            .collect();
        let sums: String = all
            .iter()
            .map(|(name, bytes)| format!("{}  {name}\n", sha256_hex(bytes)))
            .collect();
        all.push((SUMS.to_owned(), sums.into_bytes()));
        let mut tar = tar::Builder::new(flate2::write::GzEncoder::new(
            Vec::new(),
            flate2::Compression::default(),
        ));
        for (name, bytes) in all {
            let mut header = tar::Header::new_ustar();
            header.set_size(bytes.len() as u64);
            header.set_mode(0o600);
            tar.append_data(&mut header, name, bytes.as_slice())
                .unwrap();
        }
        tar.into_inner().unwrap().finish().unwrap()
    }

    /// `honest`'s members with `other`'s state.bin, under `honest`'s sums.
    fn repack_with_sums_of(honest: &[u8], other: &[u8]) -> Vec<u8> {
        let read = |bytes: &[u8]| -> Vec<(String, Vec<u8>)> {
            let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(bytes));
            archive
                .entries()
                .unwrap()
                .map(|entry| {
                    let mut entry = entry.unwrap();
                    let name = entry.path().unwrap().to_string_lossy().into_owned();
                    let mut content = Vec::new();
                    entry.read_to_end(&mut content).unwrap();
                    (name, content)
                })
                .collect()
        };
        let other_state = read(other)
            .into_iter()
            .find(|(name, _)| name == STATE)
            .unwrap()
            .1;
        let mut tar = tar::Builder::new(flate2::write::GzEncoder::new(
            Vec::new(),
            flate2::Compression::default(),
        ));
        for (name, content) in read(honest) {
            let content = if name == STATE {
                other_state.clone()
            } else {
                content
            };
            let mut header = tar::Header::new_ustar();
            header.set_size(content.len() as u64);
            header.set_mode(0o600);
            tar.append_data(&mut header, name, content.as_slice())
                .unwrap();
        }
        tar.into_inner().unwrap().finish().unwrap()
    }
}
