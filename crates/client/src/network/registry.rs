//! The node's register of the group networks its clients made, kept outside any client's data
//! dir (`/run/drover/networks/<alloc_id>.json`, on the tmpfs a reboot clears with the
//! namespaces themselves), so a client whose state DB was lost (the DB removed, or the agent
//! restarted on a fresh data dir) still finds what it made: each entry names the client that
//! made it (its allocation root) and holds the whole setup record, so the sweep runs CNI DEL
//! with the conflist the ADD ran with (a `cni/<name>` network with its own, not the bridge's).
//!
//! An entry is written before the namespace is made and removed after the network is torn
//! down. Whose it is: the client whose allocation root it names, or no one's when that root no
//! longer exists (a client's root exists while it runs), so a client never sweeps the networks
//! of another client that runs on the same node.
//!
//! Not here: the teardown itself ([`super::undo`]).

use std::path::{Path, PathBuf};

use super::{NetworkError, NetworkRecord};

/// Where the register is kept unless the client says otherwise.
pub const DEFAULT_REGISTRY_DIR: &str = "/run/drover/networks";

/// One network a client made.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct RegistryEntry {
    /// The allocation root of the client that made it.
    pub client_alloc_root: PathBuf,
    pub record: NetworkRecord,
}

fn entry_path(dir: &Path, alloc_id: &str) -> PathBuf {
    dir.join(format!("{alloc_id}.json"))
}

/// Writes (atomically: temp file, fsync, rename) the entry of `alloc_id`.
pub fn write(dir: &Path, alloc_id: &str, entry: &RegistryEntry) -> Result<(), NetworkError> {
    let write_error = |path: &Path, source| NetworkError::Write {
        path: path.to_path_buf(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(|source| write_error(dir, source))?;
    // The entry is the client's while its root exists: the root is made with it, so a client's
    // first network (set up before its allocation root was ever made) is not taken for a gone
    // client's by another client restoring on the node at that moment.
    std::fs::create_dir_all(&entry.client_alloc_root)
        .map_err(|source| write_error(&entry.client_alloc_root, source))?;
    let path = entry_path(dir, alloc_id);
    let bytes = serde_json::to_vec(entry)
        .map_err(|error| NetworkError::Config(format!("encoding the network register: {error}")))?;
    let temporary = dir.join(format!(".{alloc_id}.json.tmp"));
    let written = (|| {
        use std::io::Write as _;
        let mut file = std::fs::File::create(&temporary)?;
        file.write_all(&bytes)?;
        file.sync_all()?;
        std::fs::rename(&temporary, &path)
    })();
    written.map_err(|source| write_error(&path, source))
}

/// Removes the entry of `alloc_id` (nothing to do when there is none).
pub fn remove(dir: &Path, alloc_id: &str) -> Result<(), NetworkError> {
    let path = entry_path(dir, alloc_id);
    match std::fs::remove_file(&path) {
        Err(source) if source.kind() != std::io::ErrorKind::NotFound => {
            Err(NetworkError::Write { path, source })
        }
        _ => Ok(()),
    }
}

/// The entries that belong to the client of `client_alloc_root` or to no running client,
/// with their allocation IDs. Entries that do not parse are logged and left alone.
pub fn orphans_of(dir: &Path, client_alloc_root: &Path) -> Vec<(String, RegistryEntry)> {
    let Ok(listing) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in listing.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(alloc_id) = name.strip_suffix(".json").filter(|id| !id.starts_with('.')) else {
            continue;
        };
        let parsed = std::fs::read(entry.path())
            .map_err(|error| error.to_string())
            .and_then(|bytes| {
                serde_json::from_slice::<RegistryEntry>(&bytes).map_err(|error| error.to_string())
            });
        match parsed {
            Ok(registered) => {
                if registered.client_alloc_root == client_alloc_root
                    || !registered.client_alloc_root.exists()
                {
                    found.push((alloc_id.to_string(), registered));
                }
            }
            Err(error) => {
                tracing::warn!(path = %entry.path().display(), %error, "an unreadable entry of the network register");
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // a failed expectation is a failed test

    use super::*;

    fn record(alloc_id: &str) -> NetworkRecord {
        NetworkRecord {
            version: 1,
            mode: "cni/mine".into(),
            netns: PathBuf::from("/var/run/netns").join(alloc_id),
            container_id: alloc_id.into(),
            ifname: "eth0".into(),
            conflist: serde_json::json!({"name": "mine", "plugins": []}),
            cni_args: String::new(),
            port_mappings: Vec::new(),
            result: None,
            status: None,
            resolv_conf: None,
            sandbox_driver: None,
            sandbox_id: None,
            hostname: None,
            ready: false,
        }
    }

    #[test]
    fn a_client_finds_its_own_entries_and_those_of_gone_clients_never_another_running_ones() {
        let dir = tempfile::tempdir().unwrap();
        let register = dir.path().join("networks");
        let mine = dir.path().join("mine/alloc");
        let other = dir.path().join("other/alloc");
        std::fs::create_dir_all(&mine).unwrap();
        std::fs::create_dir_all(&other).unwrap();
        let gone = dir.path().join("gone/alloc");
        for (alloc_id, root) in [("a1", &mine), ("a2", &other), ("a3", &gone)] {
            let entry = RegistryEntry {
                client_alloc_root: root.clone(),
                record: record(alloc_id),
            };
            write(&register, alloc_id, &entry).unwrap();
        }
        // That client is gone: its root with it.
        std::fs::remove_dir_all(dir.path().join("gone")).unwrap();
        let mut found: Vec<String> = orphans_of(&register, &mine)
            .into_iter()
            .map(|(alloc_id, entry)| {
                assert_eq!(entry.record.conflist["name"], "mine");
                alloc_id
            })
            .collect();
        found.sort();
        assert_eq!(found, ["a1", "a3"]);
        remove(&register, "a1").unwrap();
        remove(&register, "a1").unwrap();
        assert_eq!(orphans_of(&register, &mine).len(), 1);
    }

    /// A client registers its first network before its allocation root exists (the root is
    /// made with the first allocation's directory, after the network hook): another client
    /// restoring on the node at that moment took the entry for a gone client's and tore a
    /// running allocation's network down under it.
    #[test]
    fn a_first_network_registered_before_its_clients_root_exists_is_no_ones_orphan() {
        let dir = tempfile::tempdir().unwrap();
        let register = dir.path().join("networks");
        let fresh = dir.path().join("fresh/alloc");
        let restoring = dir.path().join("restoring/alloc");
        std::fs::create_dir_all(&restoring).unwrap();
        let entry = RegistryEntry {
            client_alloc_root: fresh.clone(),
            record: record("first"),
        };
        write(&register, "first", &entry).unwrap();
        assert!(orphans_of(&register, &restoring).is_empty());
        assert_eq!(orphans_of(&register, &fresh).len(), 1);
    }
}
