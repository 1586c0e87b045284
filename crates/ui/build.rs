//! Embeds the web UI's built assets (`ui/dist`, made by `npm run build` in `ui/`) into the
//! binary: one `include_bytes!` per file and its precompressed `.gz` / `.br` siblings, listed in
//! a static table. Nothing is read, decompressed or allocated when the agent starts: the table
//! and the bytes are in the binary's read-only data, paged in when first served.
//!
//! Without a `ui/dist` (node absent, UI not built) the table is empty and the agent's `/ui/`
//! says how to build it; this script never runs node and never fails the build for it.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn main() {
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let dist = manifest_dir.join("../../ui/dist");
    // A directory is scanned whole for changes; `ui/dist/.gitkeep` keeps it present, so a
    // build without the assets is not re-run every time.
    println!("cargo:rerun-if-changed={}", dist.display());
    let mut files = Vec::new();
    collect(&dist, &dist, &mut files);
    files.sort();
    let mut table = String::from("&[\n");
    for (relative, path) in &files {
        if relative.ends_with(".gz") || relative.ends_with(".br") || relative == ".gitkeep" {
            continue;
        }
        let Ok(bytes) = std::fs::read(path) else {
            continue;
        };
        let variant = |suffix: &str| {
            let sibling = PathBuf::from(format!("{}.{suffix}", path.display()));
            if sibling.is_file() {
                format!("Some(include_bytes!({:?}))", sibling.display().to_string())
            } else {
                "None".to_owned()
            }
        };
        let _ = writeln!(
            table,
            "    Asset {{ path: {relative:?}, raw: include_bytes!({:?}), gzip: {}, brotli: {}, etag: \"\\\"{:016x}\\\"\" }},",
            path.display().to_string(),
            variant("gz"),
            variant("br"),
            fnv1a(&bytes),
        );
    }
    table.push(']');
    let out = PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default()).join("assets.rs");
    if let Err(error) = std::fs::write(&out, table) {
        println!("cargo:warning=cannot write {}: {error}", out.display());
    }
}

/// Every file under `dir`, with its path relative to `root` (`/`-separated).
fn collect(root: &Path, dir: &Path, files: &mut Vec<(String, PathBuf)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(root, &path, files);
        } else if let Ok(relative) = path.strip_prefix(root) {
            let relative = relative
                .components()
                .map(|part| part.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/");
            files.push((relative, path));
        }
    }
}

/// A content hash for the `ETag` (64-bit FNV-1a: changes with any byte, cheap, no dependency).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    })
}
