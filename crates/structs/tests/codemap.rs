//! Every path and item ARCHITECTURE.md names exists.
//!
//! The codemap is read as text and each code span (`` `…` ``) is checked by its shape:
//! - a repository path (`crates/…`, `scripts/…`, `tests/…`, a file ending in `.rs`, `.md`, …):
//!   the file or directory exists at the workspace root, under `crates/`, or in some crate;
//! - a Cargo feature (`drover-client/testing`): the crate declares the feature;
//! - a Rust path (`server_conn::ServerConn`, `drover_agent::run`, `AllocDir::move_from`): its
//!   leading segments are modules of a crate, the rest names items defined there;
//! - a lone identifier (`resolve_token`, `StatusBuffer`): some source file of the workspace
//!   uses it, and a crate named in the "Crates" list (`**`name`**`) is a crate directory.
//!
//! Spans with spaces, HTTP routes, runtime paths (`<data>/…`) and command lines are prose and
//! are left alone. The test fails with every name it could not find.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_else(|error| panic!("reading {}: {error}", path.display()))
}

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

/// One crate of the workspace: its directory name and its source.
struct Crate {
    dir: PathBuf,
    name: String,
    source: String,
}

impl Crate {
    /// The file of module `path` (empty: the crate root), if it is one.
    fn module_file(&self, path: &[&str]) -> Option<PathBuf> {
        let src = self.dir.join("src");
        if path.is_empty() {
            return ["lib.rs", "main.rs"]
                .iter()
                .map(|f| src.join(f))
                .find(|f| f.exists());
        }
        let joined = path.join("/");
        [format!("{joined}.rs"), format!("{joined}/mod.rs")]
            .iter()
            .map(|f| src.join(f))
            .find(|f| f.exists())
    }

    /// Whether `path` is a module of this crate: a file, or a `mod name {` inline in its parent.
    fn is_module(&self, path: &[&str]) -> bool {
        if self.module_file(path).is_some() {
            return true;
        }
        let Some((last, parent)) = path.split_last() else {
            return true;
        };
        self.module_file(parent)
            .map(|file| read(&file).contains(&format!("mod {last} {{")))
            .unwrap_or(false)
    }
}

fn crates(root: &Path) -> Vec<Crate> {
    let mut out = Vec::new();
    let entries = std::fs::read_dir(root.join("crates")).unwrap_or_else(|error| panic!("{error}"));
    for entry in entries.flatten() {
        let dir = entry.path();
        if !dir.join("Cargo.toml").exists() {
            continue;
        }
        let mut files = Vec::new();
        rust_files(&dir.join("src"), &mut files);
        let source = files.iter().map(|f| read(f)).collect::<Vec<_>>().join("\n");
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        out.push(Crate { dir, name, source });
    }
    out
}

/// Whether `word` occurs in `text` as a whole identifier.
fn has_word(text: &str, word: &str) -> bool {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    text.match_indices(word).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        !before.is_some_and(ident) && !after.is_some_and(ident)
    })
}

/// Whether `word` is defined (not only used) in `text`.
fn defines(text: &str, word: &str) -> bool {
    [
        "fn", "struct", "enum", "trait", "type", "mod", "const", "static", "macro_rules!",
    ]
    .iter()
    .any(|kind| has_word(text, &format!("{kind} {word}")))
        // enum variants and struct fields
        || text.lines().any(|line| {
            let line = line.trim_start().trim_start_matches("pub ").trim_start_matches("pub(crate) ");
            line.starts_with(word)
                && line[word.len()..].starts_with([',', '(', ' ', '{', ':'])
        })
}

fn is_identifier(span: &str) -> bool {
    !span.is_empty()
        && span.chars().all(|c| c.is_alphanumeric() || c == '_')
        && !span.starts_with(|c: char| c.is_ascii_digit())
}

/// The code spans of `text`, in order.
fn spans(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find('`') {
        let after = &rest[start + 1..];
        let Some(end) = after.find('`') else {
            break;
        };
        out.push(&after[..end]);
        rest = &after[end + 1..];
    }
    out
}

const PATH_ROOTS: &[&str] = &[
    "crates", "scripts", "docs", "examples", "tests", ".ci", "ui",
];
const FILE_ENDINGS: &[&str] = &[".rs", ".md", ".hcl", ".toml", ".sh", ".json"];

fn check_path(root: &Path, all: &[Crate], span: &str) -> Option<String> {
    if !span.contains('/') {
        // A bare file name (`lib.rs`): some crate has a file of that name.
        let mut files = Vec::new();
        all.iter().for_each(|c| rust_files(&c.dir, &mut files));
        let found = files
            .iter()
            .any(|f| f.file_name().is_some_and(|n| n == span))
            || root.join(span).exists();
        return (!found).then(|| format!("file `{span}` exists nowhere in the workspace"));
    }
    let candidates = std::iter::once(root.join(span))
        .chain(std::iter::once(root.join("crates").join(span)))
        .chain(all.iter().map(|c| c.dir.join(span)));
    let found = candidates.into_iter().any(|p| p.exists());
    (!found).then(|| format!("path `{span}` exists nowhere in the workspace"))
}

fn check_feature(all: &[Crate], span: &str) -> Option<String> {
    let (package, feature) = span.split_once('/')?;
    let name = package.trim_start_matches("drover-");
    let Some(krate) = all.iter().find(|c| c.name == name) else {
        return Some(format!("feature `{span}`: no crate `{name}`"));
    };
    let manifest = read(&krate.dir.join("Cargo.toml"));
    let declared = manifest
        .lines()
        .any(|line| line.trim_start().starts_with(&format!("{feature} =")));
    (!declared).then(|| format!("feature `{span}`: `{package}` declares no `{feature}`"))
}

fn check_rust_path(all: &[Crate], span: &str) -> Option<String> {
    let segments: Vec<&str> = span.trim_end_matches("()").split("::").collect();
    if segments.iter().any(|s| !is_identifier(s)) {
        return None;
    }
    // A crate named by its library name (`drover_agent`) or its directory (`client`).
    let by_crate = |first: &str| {
        all.iter().find(|c| {
            first == format!("drover_{}", c.name)
                || first == c.name
                || first == c.name.replace('-', "_")
        })
    };
    let resolves_in = |krate: &Crate, rest: &[&str]| -> bool {
        // The longest prefix that is a module, then items.
        let mut depth = rest.len();
        while depth > 0 && !krate.is_module(&rest[..depth]) {
            depth -= 1;
        }
        let items = &rest[depth..];
        let Some(first) = items.first() else {
            return true;
        };
        let item_found = if depth == 0 {
            // No module named: an item anywhere in the crate (`AllocDir::move_from`).
            defines(&krate.source, first)
        } else {
            // An item of the module itself, or one it re-exports from elsewhere in the crate.
            let home = krate
                .module_file(&rest[..depth])
                .map(|f| read(&f))
                .unwrap_or_default();
            defines(&home, first) || (has_word(&home, first) && defines(&krate.source, first))
        };
        item_found
            && items[1..]
                .iter()
                .all(|member| defines(&krate.source, member))
    };
    if let Some(krate) = by_crate(segments[0])
        && resolves_in(krate, &segments[1..])
    {
        return None;
    }
    // A path relative to some crate's root (`taskrunner::shared`, `AllocDir::move_from`).
    if all.iter().any(|krate| resolves_in(krate, &segments)) {
        return None;
    }
    Some(format!("item `{span}` is not defined where the path says"))
}

#[test]
fn every_name_in_the_codemap_exists() {
    let root = workspace_root();
    let text = read(&root.join("ARCHITECTURE.md"));
    let all = crates(&root);
    // Identifiers may also name test programs (`tests/interop-rs`'s `in_task`).
    let mut test_files = Vec::new();
    rust_files(&root.join("tests"), &mut test_files);
    let every_source: String = all
        .iter()
        .map(|c| c.source.clone())
        .chain(test_files.iter().map(|f| read(f)))
        .chain(
            test_files
                .iter()
                .filter_map(|f| f.file_stem().map(|s| s.to_string_lossy().into_owned())),
        )
        .collect::<Vec<_>>()
        .join("\n");
    let mut missing = BTreeSet::new();
    for span in spans(&text) {
        let span = span.trim();
        let prose =
            span.contains(' ') || span.starts_with('/') || span.contains('<') || span.contains('…');
        if prose || span.is_empty() {
            continue;
        }
        let problem = if span.contains("::") {
            check_rust_path(&all, span)
        } else if span.starts_with("drover-") && span.contains('/') {
            check_feature(&all, span)
        } else if span.contains('/') || FILE_ENDINGS.iter().any(|e| span.ends_with(e)) {
            let first = span.split('/').next().unwrap_or(span);
            let repo_path = PATH_ROOTS.contains(&first)
                || all.iter().any(|c| c.name == first)
                || FILE_ENDINGS.iter().any(|e| span.ends_with(e));
            if repo_path {
                check_path(&root, &all, span)
            } else {
                None
            }
        } else if is_identifier(span)
            && (span.contains('_') || span.starts_with(|c: char| c.is_ascii_uppercase()))
        {
            (!has_word(&every_source, span))
                .then(|| format!("name `{span}` occurs in no source file"))
        } else {
            None
        };
        if let Some(problem) = problem {
            missing.insert(problem);
        }
    }
    // The crates list names crate directories.
    if let Some(section) = text.split("\n## Crates\n").nth(1) {
        let section = section.split("\n## ").next().unwrap_or(section);
        for line in section.lines() {
            let Some(rest) = line.strip_prefix("- **`") else {
                continue;
            };
            let Some(name) = rest.split('`').next() else {
                continue;
            };
            if !all.iter().any(|c| c.name == name) {
                missing.insert(format!("crate `{name}` has no directory under crates/"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names what does not exist:\n{}",
        missing.into_iter().collect::<Vec<_>>().join("\n")
    );
}

#[test]
fn a_renamed_item_is_caught() {
    let root = workspace_root();
    let all = crates(&root);
    assert_eq!(check_rust_path(&all, "drover_agent::run"), None);
    assert_eq!(check_rust_path(&all, "server_conn::ServerConn"), None);
    assert!(check_rust_path(&all, "server_conn::NoSuchConn").is_some());
    assert!(check_rust_path(&all, "drover_agent::no_such_function").is_some());
    assert!(check_path(&root, &all, "crates/cli/src/no_such_file.rs").is_some());
    assert!(check_feature(&all, "drover-driver/no_such_feature").is_some());
}
