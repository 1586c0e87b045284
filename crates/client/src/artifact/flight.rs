//! The per-entry locks of the artifact cache, shared by fetches ([`super::fetch`]) and the
//! cache's garbage collection ([`super::cache`]); a module of its own so neither imports the
//! other.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex, Weak};

/// One lock per cache entry, shared by every fetch in the process: a fetch holds it for
/// writing while it looks for (and downloads) the entry, then for reading while it places it,
/// so fetches of one key download once and place side by side, and the cache's garbage
/// collection ([`super::cache`]) removes only entries nobody holds.
type FlightLocks = HashMap<PathBuf, Weak<tokio::sync::RwLock<()>>>;
static IN_FLIGHT: LazyLock<Mutex<FlightLocks>> = LazyLock::new(|| Mutex::new(HashMap::new()));

pub(crate) fn flight_lock(entry: &Path) -> Arc<tokio::sync::RwLock<()>> {
    let mut locks = match IN_FLIGHT.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    };
    if let Some(lock) = locks.get(entry).and_then(Weak::upgrade) {
        return lock;
    }
    locks.retain(|_, lock| lock.strong_count() > 0);
    let lock = Arc::new(tokio::sync::RwLock::new(()));
    locks.insert(entry.to_path_buf(), Arc::downgrade(&lock));
    lock
}
