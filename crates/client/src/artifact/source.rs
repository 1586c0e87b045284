//! What one `artifact` block asks for, with the task's `${…}` interpolated into its source,
//! options, headers and destination (as Nomad does): which getter fetches it, the checksum, how
//! it is unpacked, and where it lands.
//!
//! Getters: `http`/`https` URLs (options that are not go-getter's own are added to the query,
//! as Nomad does), local files (`/path` or `file://`), and git (`git::URL`, `git@host:path`,
//! `github.com/owner/repo`) with `ref`, `depth` and `sshkey` (a base64 private key). `s3::`, `gcs::`, `hg::` and the sources
//! they detect are refused naming the getter. `URL//sub` (go-getter's subdirectory) fetches
//! the URL and places only `sub` of its tree (an archive's or a checkout's).
//!
//! **Not** the fetching itself (see `fetch`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use drover_structs::TaskArtifact;

use super::archive::ArchiveKind;
use super::beneath::EntryPath;
use super::checksum::{Checksum, ChecksumOption};
use super::error::ArtifactError;
use crate::allocdir::join_within;
use crate::taskenv::TaskEnv;

/// How a source is fetched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Getter {
    /// An `http` or `https` URL.
    Http { url: String },
    /// A file or directory on the client.
    File { path: PathBuf },
    /// A git repository, cloned with the system `git`.
    Git {
        url: String,
        reference: Option<String>,
        depth: Option<u32>,
    },
}

/// `mode` of the artifact block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GetterMode {
    Any,
    File,
    Dir,
}

/// How a downloaded file is unpacked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArchiveChoice {
    /// By the file name's extension.
    Detect,
    /// `archive = "<format>"`.
    Format(ArchiveKind),
    /// `archive = false`: keep the file as it is.
    Keep,
}

/// One artifact, interpolated and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactSpec {
    /// The source as the jobspec wrote it, for messages.
    pub source: String,
    pub getter: Getter,
    pub checksum: Option<Checksum>,
    /// `checksum = "file:…"`: where the fetcher reads the digest (an http(s) URL or an
    /// absolute path on the client).
    pub checksum_file: Option<String>,
    pub archive: ArchiveChoice,
    /// `filename` option: the name of a downloaded file in mode `any`.
    pub filename: Option<String>,
    pub headers: BTreeMap<String, String>,
    pub mode: GetterMode,
    /// The destination relative to the task dir, `..` resolved.
    pub destination: EntryPath,
    /// `insecure`: the TLS certificate of an https (or git-over-https) source is not verified.
    pub insecure: bool,
    /// `URL//sub`: only this subdirectory of the fetched tree is placed.
    pub subdir: Option<EntryPath>,
    /// A git source's `sshkey` (decoded from base64): the private key git's ssh uses.
    pub git_ssh_key: Option<Vec<u8>>,
}

const UNSUPPORTED_GETTERS: &[&str] = &["s3", "gcs", "hg", "bitbucket", "ssh", "smb"];

fn invalid_source(source: &str, reason: impl Into<String>) -> ArtifactError {
    ArtifactError::InvalidSource {
        url: source.to_string(),
        reason: reason.into(),
    }
}

impl ArtifactSpec {
    /// Reads `artifact` for a task whose environment is `env` and whose dir is `task_dir`.
    pub fn from_task_artifact(
        artifact: &TaskArtifact,
        env: &TaskEnv,
        task_dir: &Path,
    ) -> Result<ArtifactSpec, ArtifactError> {
        let source = env.interpolate(&artifact.getter_source);
        let mut options: BTreeMap<String, String> = artifact
            .getter_options
            .iter()
            .map(|(key, value)| (key.clone(), env.interpolate(value)))
            .collect();
        let (checksum, checksum_file) = match options
            .remove("checksum")
            .map(|text| ChecksumOption::parse(&text))
            .transpose()?
        {
            None => (None, None),
            Some(ChecksumOption::Digest(checksum)) => (Some(checksum), None),
            Some(ChecksumOption::File(location)) => {
                let location = location.strip_prefix("file://").unwrap_or(&location);
                let fetchable = location.starts_with('/')
                    || location.starts_with("http://")
                    || location.starts_with("https://");
                if !fetchable {
                    return Err(ArtifactError::InvalidOption {
                        option: "checksum".to_string(),
                        reason: format!(
                            "checksum file {location:?} must be an http(s) URL or an absolute path"
                        ),
                    });
                }
                (None, Some(location.to_string()))
            }
        };
        let archive = match options.remove("archive") {
            None => ArchiveChoice::Detect,
            Some(value) => match ArchiveKind::from_option(&value)? {
                Some(kind) => ArchiveChoice::Format(kind),
                None => ArchiveChoice::Keep,
            },
        };
        let filename = options.remove("filename");
        if let Some(name) = &filename
            && (name.is_empty() || name.contains('/') || name == "." || name == "..")
        {
            return Err(ArtifactError::InvalidOption {
                option: "filename".to_string(),
                reason: format!("{name:?} is not a file name"),
            });
        }
        let (source, subdir) = split_subdir(&source);
        let subdir = subdir
            .map(|subdir| {
                if subdir.contains(['*', '?', '[']) {
                    return Err(invalid_source(
                        &artifact.getter_source,
                        "globs in a subdirectory (\"//sub*\") are not supported",
                    ));
                }
                EntryPath::parse(Path::new(&subdir))
                    .map_err(|error| invalid_source(&artifact.getter_source, error.to_string()))
            })
            .transpose()?;
        let mut ssh_key = None;
        let getter = getter_for(&artifact.getter_source, &source, &mut options, &mut ssh_key)?;
        let git_ssh_key = ssh_key
            .map(|key| {
                use base64::Engine as _;
                base64::engine::general_purpose::STANDARD
                    .decode(key.trim())
                    .map_err(|error| ArtifactError::InvalidOption {
                        option: "sshkey".to_string(),
                        reason: format!("not base64: {error}"),
                    })
            })
            .transpose()?;
        if let Some(option) = options.keys().next()
            && !matches!(getter, Getter::Http { .. })
        {
            return Err(ArtifactError::InvalidOption {
                option: option.clone(),
                reason: "not an option of this getter".to_string(),
            });
        }
        let getter = match getter {
            Getter::Http { url } => Getter::Http {
                url: with_query(&artifact.getter_source, &url, &options)?,
            },
            other => other,
        };
        if (checksum.is_some() || checksum_file.is_some()) && matches!(getter, Getter::Git { .. }) {
            return Err(ArtifactError::InvalidOption {
                option: "checksum".to_string(),
                reason: "a git source has no file to check; pin it with ref instead".to_string(),
            });
        }
        let mode = match artifact.getter_mode.as_str() {
            "" | "any" => GetterMode::Any,
            "file" => GetterMode::File,
            "dir" => GetterMode::Dir,
            other => {
                return Err(ArtifactError::InvalidMode {
                    mode: other.to_string(),
                    reason: "must be one of any, file or dir".to_string(),
                });
            }
        };
        let headers = artifact
            .getter_headers
            .iter()
            .map(|(key, value)| (key.clone(), env.interpolate(value)))
            .collect();
        let written_destination = env.interpolate(if artifact.relative_dest.is_empty() {
            "local/"
        } else {
            &artifact.relative_dest
        });
        let escapes = || ArtifactError::InvalidDestination {
            destination: written_destination.clone(),
            reason: "escapes the task directory".to_string(),
        };
        let joined = join_within(task_dir, &written_destination).map_err(|_| escapes())?;
        let relative = joined.strip_prefix(task_dir).map_err(|_| escapes())?;
        let destination = EntryPath::parse(relative).map_err(|_| escapes())?;
        Ok(ArtifactSpec {
            source: artifact.getter_source.clone(),
            getter,
            checksum,
            checksum_file,
            archive,
            filename,
            headers,
            mode,
            destination,
            insecure: artifact.getter_insecure,
            subdir,
            git_ssh_key,
        })
    }
}

/// Picks the getter of `source` (interpolated), taking the git options out of `options`
/// (`sshkey` into `ssh_key`).
fn getter_for(
    written: &str,
    source: &str,
    options: &mut BTreeMap<String, String>,
    ssh_key: &mut Option<String>,
) -> Result<Getter, ArtifactError> {
    let (forced, rest) = match source.split_once("::") {
        Some((name, rest))
            if !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric()) =>
        {
            (Some(name.to_ascii_lowercase()), rest)
        }
        _ => (None, source),
    };
    if has_subdirectory(rest) {
        return Err(invalid_source(written, "more than one \"//\" subdirectory"));
    }
    let scheme = rest
        .split_once("://")
        .map(|(scheme, _)| scheme.to_ascii_lowercase());
    let getter_name = match (&forced, &scheme) {
        (Some(forced), _) => forced.clone(),
        (None, Some(scheme)) => scheme.clone(),
        (None, None) => detect_schemeless(rest),
    };
    if UNSUPPORTED_GETTERS.contains(&getter_name.as_str()) {
        return Err(ArtifactError::UnsupportedGetter {
            getter: getter_name,
        });
    }
    match getter_name.as_str() {
        "http" | "https" => {
            if scheme.as_deref() != Some("http") && scheme.as_deref() != Some("https") {
                return Err(invalid_source(
                    written,
                    "an http source needs an http:// or https:// URL",
                ));
            }
            Ok(Getter::Http {
                url: rest.to_string(),
            })
        }
        "file" => {
            let path = rest.strip_prefix("file://").unwrap_or(rest);
            if !path.starts_with('/') {
                return Err(invalid_source(
                    written,
                    "a local source must be an absolute path",
                ));
            }
            Ok(Getter::File {
                path: PathBuf::from(path),
            })
        }
        "git" => {
            let url = if forced.is_none() && rest.starts_with("github.com/") {
                let trimmed = rest.trim_end_matches(".git");
                format!("https://{trimmed}.git")
            } else {
                rest.to_string()
            };
            let (url, query) = split_query(&url);
            let mut query: BTreeMap<String, String> = query.map(parse_query).unwrap_or_default();
            query.append(options);
            let reference = query.remove("ref");
            let depth = query
                .remove("depth")
                .map(|depth| {
                    depth
                        .parse::<u32>()
                        .map_err(|_| ArtifactError::InvalidOption {
                            option: "depth".to_string(),
                            reason: format!("{depth:?} is not a number"),
                        })
                })
                .transpose()?;
            *ssh_key = query.remove("sshkey");
            // Whatever is left is reported by the caller as an unknown option.
            *options = query;
            Ok(Getter::Git {
                url: url.to_string(),
                reference,
                depth,
            })
        }
        other => Err(ArtifactError::UnsupportedGetter {
            getter: other.to_string(),
        }),
    }
}

/// go-getter's detectors for sources without a scheme.
fn detect_schemeless(source: &str) -> String {
    let host = source.split('/').next().unwrap_or_default();
    if source.starts_with('/') {
        "file".to_string()
    } else if source.starts_with("git@") || host == "github.com" {
        "git".to_string()
    } else if host == "bitbucket.org" {
        "bitbucket".to_string()
    } else if host.ends_with("amazonaws.com") {
        "s3".to_string()
    } else if host == "www.googleapis.com" || host == "storage.googleapis.com" {
        "gcs".to_string()
    } else {
        // A relative path, or a host without a scheme: go-getter would read either from the
        // agent's working directory, which no job can rely on.
        "relative path".to_string()
    }
}

/// `source` without its `//sub` (after the scheme and host, before the query), and `sub`, as
/// go-getter's `SourceDirSubdir` splits it; the query stays with the source.
fn split_subdir(source: &str) -> (String, Option<String>) {
    let (forced, rest) = match source.split_once("::") {
        Some((name, rest))
            if !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric()) =>
        {
            (format!("{name}::"), rest)
        }
        _ => (String::new(), source),
    };
    let scheme_end = rest.find("://").map_or(0, |at| at + 3);
    let (base, query) = split_query(rest);
    let Some(at) = base[scheme_end..].find("//").map(|at| at + scheme_end) else {
        return (source.to_string(), None);
    };
    let subdir = base[at + 2..].to_string();
    let query = query.map(|query| format!("?{query}")).unwrap_or_default();
    (format!("{forced}{}{query}", &base[..at]), Some(subdir))
}

/// Whether the source names a subdirectory (`…//sub`) after its scheme and host.
fn has_subdirectory(source: &str) -> bool {
    let after_scheme = source
        .split_once("://")
        .map(|(_, rest)| rest)
        .unwrap_or(source);
    let path = split_query(after_scheme).0;
    path.contains("//")
}

fn split_query(url: &str) -> (&str, Option<&str>) {
    match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    }
}

fn parse_query(query: &str) -> BTreeMap<String, String> {
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(key), decode(value))
        })
        .collect()
}

fn decode(text: &str) -> String {
    percent_encoding::percent_decode_str(&text.replace('+', " "))
        .decode_utf8_lossy()
        .into_owned()
}

/// `url` with `options` added to its query string.
fn with_query(
    written: &str,
    url: &str,
    options: &BTreeMap<String, String>,
) -> Result<String, ArtifactError> {
    let mut parsed =
        reqwest::Url::parse(url).map_err(|error| invalid_source(written, error.to_string()))?;
    if !options.is_empty() {
        let mut pairs = parsed.query_pairs_mut();
        for (key, value) in options {
            pairs.append_pair(key, value);
        }
    }
    Ok(parsed.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(source: &str, options: &[(&str, &str)]) -> Result<ArtifactSpec, ArtifactError> {
        let artifact = TaskArtifact {
            getter_source: source.to_string(),
            getter_options: options
                .iter()
                .map(|(key, value)| (key.to_string(), value.to_string()))
                .collect(),
            ..TaskArtifact::default()
        };
        let mut env = TaskEnv::default();
        env.env.insert("NOMAD_JOB_NAME".into(), "web".into());
        ArtifactSpec::from_task_artifact(&artifact, &env, Path::new("/alloc/task"))
    }

    #[test]
    fn getters_are_chosen_as_go_getter_detects_them() {
        assert!(matches!(
            spec("https://example.com/${NOMAD_JOB_NAME}.tgz", &[("foo", "bar")]).expect("http").getter,
            Getter::Http { url } if url == "https://example.com/web.tgz?foo=bar"
        ));
        assert!(matches!(
            spec("file:///srv/app.tgz", &[]).expect("file").getter,
            Getter::File { path } if path == Path::new("/srv/app.tgz")
        ));
        assert_eq!(
            spec(
                "git::https://example.com/repo.git?ref=v1",
                &[("depth", "1")]
            )
            .expect("git")
            .getter,
            Getter::Git {
                url: "https://example.com/repo.git".into(),
                reference: Some("v1".into()),
                depth: Some(1)
            }
        );
        assert!(matches!(
            spec("github.com/hashicorp/nomad", &[]).expect("github").getter,
            Getter::Git { url, .. } if url == "https://github.com/hashicorp/nomad.git"
        ));
    }

    #[test]
    fn a_subdirectory_is_split_off_the_source_keeping_the_query() {
        let tgz = spec("https://example.com/app.tgz//bin/x?archive=tgz", &[]).expect("http");
        assert!(matches!(
            &tgz.getter,
            Getter::Http { url } if url == "https://example.com/app.tgz?archive=tgz"
        ));
        assert_eq!(tgz.subdir.as_ref().map(EntryPath::display), Some("bin/x"));
        let git = spec("git::https://example.com/repo.git//deploy?ref=v1", &[]).expect("git");
        assert_eq!(
            git.getter,
            Getter::Git {
                url: "https://example.com/repo.git".into(),
                reference: Some("v1".into()),
                depth: None
            }
        );
        assert_eq!(git.subdir.as_ref().map(EntryPath::display), Some("deploy"));
        let local = spec("/srv/tree//conf", &[]).expect("file");
        assert_eq!(
            local.getter,
            Getter::File {
                path: "/srv/tree".into()
            }
        );
        assert_eq!(local.subdir.as_ref().map(EntryPath::display), Some("conf"));
        assert_eq!(
            spec("https://example.com/x", &[]).expect("plain").subdir,
            None
        );
    }

    #[test]
    fn unsupported_getters_are_named() {
        for (source, getter) in [
            ("s3::https://s3.amazonaws.com/bucket/foo", "s3"),
            ("gcs::https://www.googleapis.com/storage/v1/b/foo", "gcs"),
            ("hg::http://example.com/repo", "hg"),
            ("bucket.s3.amazonaws.com/foo", "s3"),
        ] {
            let error = spec(source, &[]).expect_err(source);
            assert!(
                matches!(&error, ArtifactError::UnsupportedGetter { getter: named } if named == getter),
                "{source}: {error}"
            );
            assert!(error.to_string().contains(getter), "{error}");
        }
    }

    #[test]
    fn destinations_and_options_are_checked() {
        let artifact = TaskArtifact {
            getter_source: "https://example.com/x".into(),
            relative_dest: "local/../../../etc".into(),
            ..TaskArtifact::default()
        };
        assert!(matches!(
            ArtifactSpec::from_task_artifact(&artifact, &TaskEnv::default(), Path::new("/a/t")),
            Err(ArtifactError::InvalidDestination { .. })
        ));
        assert!(spec("/srv/x", &[("unknown", "1")]).is_err());
        assert!(spec("https://example.com/x//../up", &[]).is_err());
        assert!(spec("https://example.com/x//sub*", &[]).is_err());
        assert!(spec("relative/path", &[]).is_err());
        let defaults = spec("https://example.com/x.tgz", &[("archive", "false")]).expect("spec");
        assert_eq!(defaults.archive, ArchiveChoice::Keep);
        assert_eq!(defaults.destination.display(), "local");
    }
}
