//! The server's cluster identity: a random ID made at the server's first start and kept in
//! `<data_dir>/server/cluster_id` beside its state, answered on every response of a server
//! agent (`X-Drover-Cluster-ID`). Clients follow only servers of the cluster they joined, so
//! servers that share no state are never mistaken for one another.
//!
//! Not here: what a client does with it (`drover_client::http_conn`).

use std::io::Write as _;
use std::path::{Path, PathBuf};

use axum::extract::State;
use axum::http::HeaderValue;
use axum::response::Response;

/// Errors of reading or creating the cluster identity.
#[derive(Debug, thiserror::Error)]
pub enum ClusterIdError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {found:?} is not a cluster ID (move the file aside to make a new cluster)")]
    Invalid { path: PathBuf, found: String },
}

/// The cluster ID kept in `server_dir`, made (and durably written) on first use.
pub fn load_or_create(server_dir: &Path) -> Result<String, ClusterIdError> {
    let path = server_dir.join("cluster_id");
    let io = |source| ClusterIdError::Io {
        path: path.clone(),
        source,
    };
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let id = text.trim();
            if uuid::Uuid::parse_str(id).is_ok() {
                Ok(id.to_owned())
            } else {
                Err(ClusterIdError::Invalid {
                    path: path.clone(),
                    found: id.to_owned(),
                })
            }
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            let id = uuid::Uuid::new_v4().to_string();
            let temporary = path.with_extension("tmp");
            let mut file = std::fs::File::create(&temporary).map_err(io)?;
            file.write_all(format!("{id}\n").as_bytes()).map_err(io)?;
            file.sync_all().map_err(io)?;
            std::fs::rename(&temporary, &path).map_err(io)?;
            std::fs::File::open(server_dir)
                .and_then(|dir| dir.sync_all())
                .map_err(io)?;
            Ok(id)
        }
        Err(error) => Err(io(error)),
    }
}

/// Adds the cluster identity to a server agent's response.
pub async fn add_cluster_header(
    State(cluster_id): State<HeaderValue>,
    mut response: Response,
) -> Response {
    response
        .headers_mut()
        .insert(drover_structs::client_rpc::CLUSTER_ID_HEADER, cluster_id);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_is_made_once_and_kept_and_a_damaged_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let first = load_or_create(dir.path()).unwrap();
        assert_eq!(load_or_create(dir.path()).unwrap(), first);
        std::fs::write(dir.path().join("cluster_id"), "garbage").unwrap();
        let error = load_or_create(dir.path()).unwrap_err();
        assert!(error.to_string().contains("cluster_id"), "{error}");
        assert!(error.to_string().contains("garbage"), "{error}");
    }
}
