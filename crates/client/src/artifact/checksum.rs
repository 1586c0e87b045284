//! An artifact's `options { checksum = "type:hex" }`: md5, sha1, sha256 or sha512, checked
//! against the downloaded file before anything is unpacked from it. A bare hex value is taken
//! by its length, as go-getter does (32 md5, 40 sha1, 64 sha256, 128 sha512).
//!
//! `checksum = "file:<URL or path>"` names a checksum file instead ([`ChecksumOption::File`]):
//! the fetcher reads it and [`from_checksum_file`] picks the line of the artifact's file name,
//! in BSD (`SHA256 (name) = hex`) or GNU (`hex  name`, `hex *name`) form, as go-getter does.

use std::io::Read;
use std::path::Path;

use md5::Md5;
use sha1::Sha1;
use sha2::{Digest, Sha256, Sha512};

use super::error::ArtifactError;

/// The digest algorithms an artifact checksum may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChecksumKind {
    Md5,
    Sha1,
    Sha256,
    Sha512,
}

impl ChecksumKind {
    fn name(self) -> &'static str {
        match self {
            ChecksumKind::Md5 => "md5",
            ChecksumKind::Sha1 => "sha1",
            ChecksumKind::Sha256 => "sha256",
            ChecksumKind::Sha512 => "sha512",
        }
    }

    fn hex_len(self) -> usize {
        match self {
            ChecksumKind::Md5 => 32,
            ChecksumKind::Sha1 => 40,
            ChecksumKind::Sha256 => 64,
            ChecksumKind::Sha512 => 128,
        }
    }
}

/// An expected digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checksum {
    pub kind: ChecksumKind,
    /// Lowercase hex.
    pub hex: String,
}

impl std::fmt::Display for Checksum {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "{}:{}", self.kind.name(), self.hex)
    }
}

fn invalid(reason: String) -> ArtifactError {
    ArtifactError::InvalidOption {
        option: "checksum".to_string(),
        reason,
    }
}

/// The `checksum` option: a digest, or where to read one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChecksumOption {
    Digest(Checksum),
    /// `file:<URL or absolute path>`: a checksum file listing the artifact's digest.
    File(String),
}

impl ChecksumOption {
    /// Parses the `checksum` option.
    pub fn parse(text: &str) -> Result<ChecksumOption, ArtifactError> {
        match text.trim().strip_prefix("file:") {
            Some("") => Err(invalid("\"file:\" names no checksum file".to_string())),
            Some(location) => Ok(ChecksumOption::File(location.to_string())),
            None => Checksum::parse(text).map(ChecksumOption::Digest),
        }
    }
}

/// The digest of `file_name` in the checksum file `contents` read from `location`.
pub fn from_checksum_file(
    contents: &str,
    location: &str,
    file_name: &str,
) -> Result<Checksum, ArtifactError> {
    let kind_of = |hex: &str| {
        [
            ChecksumKind::Md5,
            ChecksumKind::Sha1,
            ChecksumKind::Sha256,
            ChecksumKind::Sha512,
        ]
        .into_iter()
        .find(|kind| kind.hex_len() == hex.len())
    };
    for line in contents.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (kind, hex, name) = match fields.as_slice() {
            // BSD: `SHA256 (name) = hex`.
            [kind, name, "=", hex] => {
                let Some(name) = name.strip_prefix('(').and_then(|n| n.strip_suffix(')')) else {
                    continue;
                };
                let kind = match kind.to_ascii_lowercase().as_str() {
                    "md5" => ChecksumKind::Md5,
                    "sha1" => ChecksumKind::Sha1,
                    "sha256" => ChecksumKind::Sha256,
                    "sha512" => ChecksumKind::Sha512,
                    _ => continue,
                };
                (kind, *hex, name)
            }
            // GNU: `hex  name`, `hex *name` (binary mode).
            [hex, name] => {
                let Some(kind) = kind_of(hex) else {
                    continue;
                };
                (kind, *hex, name.trim_start_matches('*'))
            }
            _ => continue,
        };
        if name.trim_start_matches("./") == file_name {
            return Checksum::parse(&format!("{}:{hex}", kind.name()));
        }
    }
    Err(invalid(format!(
        "no checksum of {file_name:?} in checksum file {location}"
    )))
}

impl Checksum {
    /// Parses a digest (`type:hex` or a bare hex).
    pub fn parse(text: &str) -> Result<Checksum, ArtifactError> {
        let text = text.trim();
        let (kind, hex) = match text.split_once(':') {
            Some((kind, hex)) => {
                let kind = match kind.to_ascii_lowercase().as_str() {
                    "md5" => ChecksumKind::Md5,
                    "sha1" => ChecksumKind::Sha1,
                    "sha256" => ChecksumKind::Sha256,
                    "sha512" => ChecksumKind::Sha512,
                    other => {
                        return Err(invalid(format!(
                            "unsupported checksum type {other:?} (md5, sha1, sha256 or sha512)"
                        )));
                    }
                };
                (kind, hex)
            }
            None => {
                let kind = [
                    ChecksumKind::Md5,
                    ChecksumKind::Sha1,
                    ChecksumKind::Sha256,
                    ChecksumKind::Sha512,
                ]
                .into_iter()
                .find(|kind| kind.hex_len() == text.len())
                .ok_or_else(|| invalid(format!("cannot tell the type of checksum {text:?}")))?;
                (kind, text)
            }
        };
        let hex = hex.to_ascii_lowercase();
        if hex.len() != kind.hex_len() || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(invalid(format!(
                "{:?} is not a {} digest ({} hex digits)",
                hex,
                kind.name(),
                kind.hex_len()
            )));
        }
        Ok(Checksum { kind, hex })
    }

    /// Digests `path` and compares; a mismatch names both digests.
    pub fn verify_file(&self, path: &Path, name_for_errors: &str) -> Result<(), ArtifactError> {
        let mut file = std::fs::File::open(path).map_err(|source| ArtifactError::Io {
            context: format!("opening {} to check its checksum", path.display()),
            source,
        })?;
        let actual = digest_hex(self.kind, &mut file).map_err(|source| ArtifactError::Io {
            context: format!("reading {} to check its checksum", path.display()),
            source,
        })?;
        if actual != self.hex {
            return Err(ArtifactError::ChecksumMismatch {
                file: name_for_errors.to_string(),
                expected: self.to_string(),
                actual: format!("{}:{actual}", self.kind.name()),
            });
        }
        Ok(())
    }
}

/// The lowercase hex digest of everything `reader` yields.
pub fn digest_hex(kind: ChecksumKind, reader: &mut dyn Read) -> std::io::Result<String> {
    match kind {
        ChecksumKind::Md5 => digest_with::<Md5>(reader),
        ChecksumKind::Sha1 => digest_with::<Sha1>(reader),
        ChecksumKind::Sha256 => digest_with::<Sha256>(reader),
        ChecksumKind::Sha512 => digest_with::<Sha512>(reader),
    }
}

fn digest_with<D: Digest>(reader: &mut dyn Read) -> std::io::Result<String> {
    let mut hasher = D::new();
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let read = reader.read(&mut buffer)?;
        if read == 0 {
            break;
        }
        hasher.update(&buffer[..read]);
    }
    Ok(to_hex(&hasher.finalize()))
}

/// Lowercase hex of `bytes`.
pub fn to_hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut out, byte| {
            // Writing to a String cannot fail.
            let _ = write!(out, "{byte:02x}");
            out
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    // Digests of "hello\n" from coreutils' md5sum, sha1sum, sha256sum and sha512sum.
    const HELLO: &[(&str, &str)] = &[
        ("md5", "b1946ac92492d2347c6235b4d2611184"),
        ("sha1", "f572d396fae9206628714fb2ce00f72e94f2258f"),
        (
            "sha256",
            "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03",
        ),
        (
            "sha512",
            "e7c22b994c59d9cf2b48e549b1e24666636045930d3da7c1acb299d1c3b7f931f94aae41edda2c2b207a36e10f8bcb8d45223e54878f5b316e7ce3b6bc019629",
        ),
    ];

    #[test]
    fn every_algorithm_accepts_the_right_digest_and_names_both_on_a_wrong_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("hello");
        std::fs::write(&file, b"hello\n").expect("write");
        for (kind, hex) in HELLO {
            let checksum = Checksum::parse(&format!("{kind}:{hex}")).expect("parses");
            checksum.verify_file(&file, "hello").expect("matches");
            let bare = Checksum::parse(&hex.to_ascii_uppercase()).expect("bare digest");
            assert_eq!(bare, checksum);
            let wrong_hex: String = hex.chars().rev().collect();
            let wrong = Checksum::parse(&format!("{kind}:{wrong_hex}")).expect("parses");
            let message = wrong
                .verify_file(&file, "hello")
                .expect_err("mismatch")
                .to_string();
            assert!(
                message.contains(&format!("{kind}:{wrong_hex}")),
                "{message}"
            );
            assert!(message.contains(&format!("{kind}:{hex}")), "{message}");
        }
    }

    #[test]
    fn malformed_checksums_are_refused() {
        assert!(Checksum::parse("sha256:abc").is_err());
        assert!(Checksum::parse("crc32:abcd1234").is_err());
        assert!(Checksum::parse("file:http://example/SHASUMS").is_err());
        assert!(Checksum::parse("zz").is_err());
        assert!(ChecksumOption::parse("file:").is_err());
    }

    #[test]
    fn checksum_files_in_bsd_and_gnu_form_give_the_digest_of_the_files_name() {
        let sha256 = HELLO[2].1;
        let md5 = HELLO[0].1;
        assert_eq!(
            ChecksumOption::parse("file:https://example.com/SHA256SUMS").expect("parses"),
            ChecksumOption::File("https://example.com/SHA256SUMS".to_string())
        );
        let gnu = format!("{md5}  other.tgz\n{sha256} *app.tgz\n");
        assert_eq!(
            from_checksum_file(&gnu, "SUMS", "app.tgz").expect("found"),
            Checksum::parse(&format!("sha256:{sha256}")).expect("digest")
        );
        let bsd = format!("MD5 (./app.tgz) = {md5}\n");
        assert_eq!(
            from_checksum_file(&bsd, "SUMS", "app.tgz").expect("found"),
            Checksum::parse(&format!("md5:{md5}")).expect("digest")
        );
        let missing = from_checksum_file(&gnu, "SUMS", "nope.tgz").expect_err("absent");
        assert!(
            missing
                .to_string()
                .contains("no checksum of \"nope.tgz\" in checksum file SUMS"),
            "{missing}"
        );
    }
}
