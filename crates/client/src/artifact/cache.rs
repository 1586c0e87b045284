//! Keeping the node's artifact cache (`<data_dir>/client/artifacts`) in bounds: every fetch
//! marks the entry it used ([`touch`]: its modification time becomes the last use), and
//! [`collect_garbage`] removes entries unused for longer than `cache_max_age`, then, while
//! the cache is larger than `cache_max_size`, the least recently used ones. An entry a fetch
//! holds (downloading or placing it) is never removed: collection takes the entry's lock for
//! writing without waiting, and skips it when that fails. [`run`] collects every
//! [`SWEEP_INTERVAL`] on tokio time, reading "now" from the client's clock.
//!
//! **Not** here: what goes into the cache (`fetch`).

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::config::ArtifactConfig;
use crate::clock::SharedClock;

/// How often [`run`] collects.
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(10 * 60);

/// Records that `entry` (a file or a directory) was used now.
pub fn touch(entry: &Path) {
    let marked = std::fs::File::open(entry).and_then(|file| file.set_modified(SystemTime::now()));
    if let Err(error) = marked {
        tracing::debug!(entry = %entry.display(), %error, "could not mark an artifact cache entry used");
    }
}

/// One cache entry as collection sees it.
#[derive(Debug)]
struct Entry {
    path: PathBuf,
    last_used: SystemTime,
    bytes: u64,
}

/// Bytes of the tree at `path`, following no symlink.
fn size_of(path: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    if !meta.is_dir() {
        return meta.len();
    }
    let mut total = 0;
    let mut pending = vec![path.to_path_buf()];
    while let Some(directory) = pending.pop() {
        let Ok(listing) = std::fs::read_dir(&directory) else {
            continue;
        };
        for item in listing.flatten() {
            match item.metadata() {
                Ok(meta) if meta.is_dir() => pending.push(item.path()),
                Ok(meta) => total += meta.len(),
                Err(_) => {}
            }
        }
    }
    total
}

fn remove(entry: &Path) -> std::io::Result<()> {
    match std::fs::remove_dir_all(entry) {
        Err(error) if error.kind() == std::io::ErrorKind::NotADirectory => {
            std::fs::remove_file(entry)
        }
        Err(_) if std::fs::symlink_metadata(entry).is_ok_and(|meta| !meta.is_dir()) => {
            std::fs::remove_file(entry)
        }
        other => other,
    }
}

/// Removes what the limits of `config` say must go from the cache at `cache_dir`, as of
/// `now`; answers the entries removed (blocking).
pub fn collect_garbage(cache_dir: &Path, config: &ArtifactConfig, now: SystemTime) -> Vec<PathBuf> {
    let Ok(listing) = std::fs::read_dir(cache_dir) else {
        return Vec::new();
    };
    let mut entries: Vec<Entry> = listing
        .flatten()
        // `.partial` holds downloads in progress; the fetches that own them clean them up.
        .filter(|item| !item.file_name().to_string_lossy().starts_with('.'))
        .filter_map(|item| {
            let meta = std::fs::symlink_metadata(item.path()).ok()?;
            Some(Entry {
                bytes: size_of(&item.path()),
                last_used: meta.modified().ok()?,
                path: item.path(),
            })
        })
        .collect();
    // Least recently used first.
    entries.sort_by_key(|entry| entry.last_used);
    let mut total: u64 = entries.iter().map(|entry| entry.bytes).sum();
    let mut removed = Vec::new();
    for entry in entries {
        let unused_for = now.duration_since(entry.last_used).unwrap_or_default();
        let too_old = !config.cache_max_age.is_zero() && unused_for > config.cache_max_age;
        let too_big = config.cache_max_size != 0 && total > config.cache_max_size;
        if !too_old && !too_big {
            continue;
        }
        let lock = super::flight::flight_lock(&entry.path);
        let Ok(_held) = lock.try_write() else {
            continue;
        };
        match remove(&entry.path) {
            Ok(()) => {
                total = total.saturating_sub(entry.bytes);
                tracing::debug!(entry = %entry.path.display(), bytes = entry.bytes, ?unused_for, "artifact cache entry removed");
                removed.push(entry.path);
            }
            Err(error) => {
                tracing::warn!(entry = %entry.path.display(), %error, "could not remove an artifact cache entry");
            }
        }
    }
    removed
}

/// Collects garbage in `cache_dir` now and every [`SWEEP_INTERVAL`] (tokio time), forever;
/// spawn it. Does nothing when neither limit is set.
pub async fn run(cache_dir: PathBuf, config: ArtifactConfig, clock: SharedClock) {
    if config.cache_max_age.is_zero() && config.cache_max_size == 0 {
        return;
    }
    loop {
        let now_nanos = u64::try_from(clock.now_unix_nanos()).unwrap_or_default();
        let now = SystemTime::UNIX_EPOCH + Duration::from_nanos(now_nanos);
        let (dir, limits) = (cache_dir.clone(), config.clone());
        let removed =
            tokio::task::spawn_blocking(move || collect_garbage(&dir, &limits, now)).await;
        if let Ok(removed) = removed
            && !removed.is_empty()
        {
            tracing::info!(count = removed.len(), "artifact cache entries removed");
        }
        tokio::time::sleep(SWEEP_INTERVAL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn aged(path: &Path, age: Duration, now: SystemTime) {
        std::fs::File::open(path)
            .expect("open")
            .set_modified(now - age)
            .expect("set mtime");
    }

    #[test]
    fn entries_unused_too_long_or_past_the_size_cap_go_least_recently_used_first() {
        let cache = tempfile::tempdir().expect("tempdir");
        let now = SystemTime::now();
        let hour = Duration::from_secs(3600);
        for (name, bytes, age) in [("old", 100, 50), ("mid", 100, 3), ("new", 100, 1)] {
            std::fs::write(cache.path().join(name), vec![0u8; bytes]).expect("entry");
            aged(&cache.path().join(name), hour * age, now);
        }
        std::fs::create_dir_all(cache.path().join("tree/sub")).expect("tree");
        std::fs::write(cache.path().join("tree/sub/f"), vec![0u8; 50]).expect("file");
        aged(&cache.path().join("tree"), hour * 2, now);
        std::fs::create_dir_all(cache.path().join(".partial")).expect("partial");

        let keep_all = ArtifactConfig {
            cache_max_age: Duration::ZERO,
            cache_max_size: 0,
            ..ArtifactConfig::default()
        };
        assert!(collect_garbage(cache.path(), &keep_all, now).is_empty());

        // Unused for more than a day: "old" goes.
        let by_age = ArtifactConfig {
            cache_max_age: hour * 24,
            ..keep_all.clone()
        };
        let removed = collect_garbage(cache.path(), &by_age, now);
        assert_eq!(removed, vec![cache.path().join("old")]);

        // 250 bytes left over a 120-byte cap: the least recently used go until it fits.
        let by_size = ArtifactConfig {
            cache_max_size: 120,
            ..keep_all.clone()
        };
        let removed = collect_garbage(cache.path(), &by_size, now);
        assert_eq!(
            removed,
            vec![cache.path().join("mid"), cache.path().join("tree")]
        );
        assert!(cache.path().join("new").exists());
        assert!(cache.path().join(".partial").exists());
    }

    #[tokio::test]
    async fn an_entry_in_use_is_kept() {
        let cache = tempfile::tempdir().expect("tempdir");
        let entry = cache.path().join("busy");
        std::fs::write(&entry, b"x").expect("entry");
        let now = SystemTime::now() + Duration::from_secs(7 * 24 * 3600);
        let limits = ArtifactConfig {
            cache_max_age: Duration::from_secs(60),
            ..ArtifactConfig::default()
        };
        let lock = super::super::flight::flight_lock(&entry);
        let reading = lock.read().await;
        assert!(collect_garbage(cache.path(), &limits, now).is_empty());
        drop(reading);
        assert_eq!(collect_garbage(cache.path(), &limits, now), vec![entry]);
    }
}
