//! The pause container of a group network (Nomad's `CreateNetwork`/`DestroyNetwork`): for a
//! group in bridge, none or CNI mode with a docker task, a container named
//! `nomad_init_<alloc_id>` from the client's `infra_image` (pulled only when missing, or when
//! its tag is `latest`, within `infra_image_pull_timeout`), in network mode `none` (a
//! namespace with only its loopback), restart policy `unless-stopped`, the group's hostname,
//! labelled with its allocation (and node, so the sweep of gone allocations finds it). The
//! client sets its namespace up through CNI; the docker tasks of the group join it with
//! network mode `container:<id>`, the others by its namespace path.
//!
//! Making it twice finds the running one; removing it is safe to repeat. The dangling
//! container reconciler leaves pause containers alone (their allocation's network owns them).
//!
//! **Not** here: the CNI setup in the namespace (the client's `network` module).

use bollard::models::{ContainerCreateBody, HostConfig, RestartPolicy, RestartPolicyNameEnum};
use bollard::query_parameters::{CreateContainerOptions, CreateImageOptions};
use drover_driver::{DriverError, DriverEvents, DriverFuture, NetworkManager, NetworkSandbox};

use crate::{DockerDriver, auth, engine_error, lock, status_code, task};

/// The pause containers' name prefix (Nomad's).
pub const PAUSE_CONTAINER_PREFIX: &str = "nomad_init_";

/// The pause container of `alloc_id`.
pub fn pause_container_name(alloc_id: &str) -> String {
    format!("{PAUSE_CONTAINER_PREFIX}{alloc_id}")
}

/// Whether a container name (as the engine lists it, with or without its leading `/`) is a
/// pause container's.
pub fn is_pause_container_name(name: &str) -> bool {
    name.trim_start_matches('/')
        .starts_with(PAUSE_CONTAINER_PREFIX)
}

impl DockerDriver {
    /// Pulls `infra_image` as Nomad does: not when present, unless its tag is `latest`.
    async fn ensure_infra_image(
        &self,
        engine: &bollard::Docker,
        alloc_id: &str,
    ) -> Result<(), DriverError> {
        let image = &self.config.infra_image;
        let (repository, tag) = task::split_image(image);
        if tag != "latest" && engine.inspect_image(image).await.is_ok() {
            return Ok(());
        }
        let credentials = auth::resolve(None, &self.config.auth, &repository)
            .unwrap_or_else(|error| {
                tracing::debug!(%alloc_id, %image, %error, "auth failed for infra_image container pull");
                None
            })
            .map(|auth| bollard::auth::DockerCredentials {
                username: Some(auth.username).filter(|value| !value.is_empty()),
                password: Some(auth.password).filter(|value| !value.is_empty()),
                email: Some(auth.email).filter(|value| !value.is_empty()),
                serveraddress: Some(auth.server_address).filter(|value| !value.is_empty()),
                ..bollard::auth::DockerCredentials::default()
            });
        let options = CreateImageOptions {
            from_image: Some(repository),
            tag: (!tag.is_empty()).then_some(tag),
            ..CreateImageOptions::default()
        };
        self.pull(
            engine,
            image,
            options,
            credentials,
            self.config.infra_image_pull_timeout,
            &DriverEvents::default(),
        )
        .await
        .map_err(|(error, recoverable)| DriverError::StartWorded {
            message: format!("unable to pull infra docker image {image:?}: {error}"),
            recoverable,
        })
    }

    /// The running pause container of `name`: its ID and main process.
    async fn running_pause(
        &self,
        engine: &bollard::Docker,
        name: &str,
    ) -> Result<Option<(String, i64)>, bollard::errors::Error> {
        match engine.inspect_container(name, None).await {
            Ok(inspect) => {
                let state = inspect.state.unwrap_or_default();
                let pid = state.pid.unwrap_or(0);
                match (inspect.id, state.running.unwrap_or(false) && pid > 0) {
                    (Some(id), true) => Ok(Some((id, pid))),
                    _ => Ok(None),
                }
            }
            Err(error) if status_code(&error) == Some(404) => Ok(None),
            Err(error) => Err(error),
        }
    }

    async fn create_pause(
        &self,
        alloc_id: &str,
        hostname: Option<&str>,
    ) -> Result<NetworkSandbox, DriverError> {
        let engine = self.engine_for(alloc_id).await?;
        let name = pause_container_name(alloc_id);
        let sandbox = |id: String, pid: i64| NetworkSandbox {
            namespace: std::path::PathBuf::from(format!("/proc/{pid}/ns/net")),
            sandbox_id: id,
        };
        if let Some((id, pid)) = self
            .running_pause(engine, &name)
            .await
            .map_err(|error| engine_error(alloc_id, "inspect the pause container", error))?
        {
            lock(&self.tracked).insert(id.clone());
            return Ok(sandbox(id, pid));
        }
        // One that is not running (stopped, or half made by a dead agent) is replaced.
        self.remove_container(engine, alloc_id, &name).await?;
        self.ensure_infra_image(engine, alloc_id).await?;
        let mut labels = std::collections::HashMap::from([(
            task::ALLOC_ID_LABEL.to_string(),
            alloc_id.to_string(),
        )]);
        if let Some(node_id) = self.node_id.get() {
            labels.insert(task::NODE_ID_LABEL.to_string(), node_id.clone());
        }
        let body = ContainerCreateBody {
            image: Some(self.config.infra_image.clone()),
            hostname: hostname.map(str::to_string),
            labels: Some(labels),
            host_config: Some(HostConfig {
                network_mode: Some("none".to_string()),
                restart_policy: Some(RestartPolicy {
                    name: Some(RestartPolicyNameEnum::UNLESS_STOPPED),
                    maximum_retry_count: None,
                }),
                ..HostConfig::default()
            }),
            ..ContainerCreateBody::default()
        };
        let options = CreateContainerOptions {
            name: Some(name.clone()),
            ..CreateContainerOptions::default()
        };
        let created = engine
            .create_container(Some(options), body)
            .await
            .map_err(|error| engine_error(alloc_id, "create the pause container", error))?;
        lock(&self.tracked).insert(created.id.clone());
        let started = async {
            engine
                .start_container(&created.id, None)
                .await
                .map_err(|error| engine_error(alloc_id, "start the pause container", error))?;
            self.running_pause(engine, &created.id)
                .await
                .map_err(|error| engine_error(alloc_id, "inspect the pause container", error))?
                .ok_or_else(|| DriverError::StartWorded {
                    message: format!(
                        "the pause container {name} of image {:?} exited at once (the image must run a process that stays)",
                        self.config.infra_image
                    ),
                    recoverable: false,
                })
        }
        .await;
        match started {
            Ok((id, pid)) => {
                tracing::info!(%alloc_id, container_id = %id, "pause container started");
                Ok(sandbox(id, pid))
            }
            Err(error) => {
                lock(&self.tracked).remove(&created.id);
                let _ = self.remove_container(engine, alloc_id, &created.id).await;
                Err(error)
            }
        }
    }

    async fn remove_pause(&self, alloc_id: &str) -> Result<(), DriverError> {
        let engine = self.engine_for(alloc_id).await?;
        let name = pause_container_name(alloc_id);
        if let Ok(inspect) = engine.inspect_container(&name, None).await
            && let Some(id) = inspect.id
        {
            lock(&self.tracked).remove(&id);
        }
        self.remove_container(engine, alloc_id, &name).await
    }
}

impl NetworkManager for DockerDriver {
    fn create_network<'a>(
        &'a self,
        alloc_id: &'a str,
        hostname: Option<&'a str>,
    ) -> DriverFuture<'a, NetworkSandbox> {
        Box::pin(self.create_pause(alloc_id, hostname))
    }

    fn destroy_network<'a>(&'a self, alloc_id: &'a str) -> DriverFuture<'a, ()> {
        Box::pin(self.remove_pause(alloc_id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pause_containers_are_named_as_nomad_names_them() {
        assert_eq!(pause_container_name("a1"), "nomad_init_a1");
        assert!(is_pause_container_name("/nomad_init_a1"));
        assert!(!is_pause_container_name("/web-a1"));
    }
}
