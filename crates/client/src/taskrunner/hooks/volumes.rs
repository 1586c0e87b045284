//! The volumes hook: resolves a task's `volume_mount`s against its group's host volumes and the
//! client's `host_volume` config (Nomad's task runner volume hook), before anything starts.
//! A group host volume the node does not declare, or a mount for a driver that cannot bind
//! host paths (raw_exec, which has no filesystem isolation), fails the task with Nomad's
//! messages and no restart; the run loop hands the resolved mounts to the driver.
//!
//! **Not** here: CSI volumes (refused at register) or whether a node may take the allocation
//! (the scheduler's feasibility check does that).

use std::collections::BTreeMap;

use drover_driver::MountConfig;
use drover_structs::{Allocation, ClientHostVolumeConfig, Task, VOLUME_TYPE_HOST};
use tokio_util::sync::CancellationToken;

use super::{
    HookError, HookErrorKind, HookFuture, HookResult, PrestartHook, PrestartRequest,
    PrestartResponse, TaskHook,
};
use crate::taskenv::TaskEnv;

/// Drivers whose tasks can have host paths bound into them (Nomad's `MountConfigSupportAll`).
const DRIVERS_WITH_MOUNTS: [&str; 2] = ["exec", "docker"];

/// The host paths `task` of `alloc` binds, as Nomad's volume hook computes them: the group's
/// host volumes must all be declared by the client (with `per_alloc`, `<source>[<index>]`);
/// each `volume_mount` naming one is bound read-only if the client's volume, the group's
/// request or the mount says so. `volume`, `destination` and `propagation_mode` are
/// interpolated with the task's environment.
pub fn task_mounts(
    alloc: &Allocation,
    task: &Task,
    host_volumes: &BTreeMap<String, ClientHostVolumeConfig>,
    env: &TaskEnv,
) -> Result<Vec<MountConfig>, String> {
    let Some(group) = alloc
        .job
        .as_deref()
        .and_then(|job| job.lookup_task_group(&alloc.task_group))
    else {
        return Ok(Vec::new());
    };
    let host_requests = group
        .volumes
        .iter()
        .filter(|(_, request)| request.r#type == VOLUME_TYPE_HOST);
    let missing: Vec<String> = host_requests
        .clone()
        .map(|(_, request)| request.source_for(&alloc.name))
        .filter(|source| !host_volumes.contains_key(source))
        .map(|source| format!("missing {source}"))
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "host volume validation error: {}",
            missing.join(", ")
        ));
    }
    let mut mounts = Vec::new();
    for mount in &task.volume_mounts {
        let volume = env.interpolate(&mount.volume);
        let Some(request) = group
            .volumes
            .get(&volume)
            .filter(|request| request.r#type == VOLUME_TYPE_HOST)
        else {
            continue;
        };
        let source = request.source_for(&alloc.name);
        let Some(offered) = host_volumes.get(&source) else {
            return Err(format!("No host volume named: {source}"));
        };
        mounts.push(MountConfig {
            host_path: offered.path.clone().into(),
            task_path: env.interpolate(&mount.destination).into(),
            read_only: offered.read_only || request.read_only || mount.read_only,
        });
    }
    if !mounts.is_empty() && !DRIVERS_WITH_MOUNTS.contains(&task.driver.as_str()) {
        return Err(format!(
            "task driver {:?} for {:?} does not support host volumes",
            task.driver, task.name
        ));
    }
    Ok(mounts)
}

/// See the module docs.
#[derive(Debug)]
pub struct VolumesHook {
    host_volumes: BTreeMap<String, ClientHostVolumeConfig>,
}

impl VolumesHook {
    pub fn new(host_volumes: BTreeMap<String, ClientHostVolumeConfig>) -> Self {
        VolumesHook { host_volumes }
    }
}

impl TaskHook for VolumesHook {
    fn name(&self) -> &'static str {
        "volumes"
    }
    fn as_prestart(&self) -> Option<&dyn PrestartHook> {
        Some(self)
    }
}

impl PrestartHook for VolumesHook {
    fn prestart<'a>(
        &'a self,
        _cancel: &'a CancellationToken,
        request: &'a PrestartRequest,
        _response: &'a mut PrestartResponse,
    ) -> HookFuture<'a, HookResult> {
        Box::pin(async move {
            task_mounts(
                &request.alloc,
                &request.task,
                &self.host_volumes,
                &request.task_env,
            )
            .map(|_| ())
            .map_err(|message| HookError::new(HookErrorKind::Unrecoverable, message))
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::sync::Arc;

    use drover_structs::{Job, TaskGroup, VolumeMount, VolumeRequest};

    use super::*;

    fn allocation(driver: &str, per_alloc: bool, request_read_only: bool) -> (Allocation, Task) {
        let task = Task {
            name: "t".into(),
            driver: driver.into(),
            volume_mounts: vec![VolumeMount {
                volume: "v".into(),
                destination: "/srv/${NOMAD_ALLOC_INDEX}".into(),
                ..VolumeMount::default()
            }],
            ..Task::default()
        };
        let mut group = TaskGroup {
            name: "g".into(),
            tasks: vec![task.clone()],
            ..TaskGroup::default()
        };
        group.volumes.insert(
            "v".into(),
            VolumeRequest {
                name: "v".into(),
                r#type: VOLUME_TYPE_HOST.into(),
                source: "data".into(),
                read_only: request_read_only,
                per_alloc,
                ..VolumeRequest::default()
            },
        );
        let job = Job {
            id: "j".into(),
            task_groups: vec![group],
            ..Job::default()
        };
        let alloc = Allocation {
            name: "j.g[1]".into(),
            task_group: "g".into(),
            job: Some(Arc::new(job)),
            ..Allocation::default()
        };
        (alloc, task)
    }

    fn offered(names: &[&str]) -> BTreeMap<String, ClientHostVolumeConfig> {
        names
            .iter()
            .map(|name| {
                (
                    name.to_string(),
                    ClientHostVolumeConfig {
                        name: name.to_string(),
                        path: format!("/host/{name}"),
                        read_only: false,
                    },
                )
            })
            .collect()
    }

    fn env() -> TaskEnv {
        let mut env = TaskEnv::default();
        env.env.insert("NOMAD_ALLOC_INDEX".into(), "1".into());
        env
    }

    #[test]
    fn per_alloc_mounts_the_indexed_volume_at_the_interpolated_destination() {
        let (alloc, task) = allocation("exec", true, false);
        let mounts = task_mounts(&alloc, &task, &offered(&["data[0]", "data[1]"]), &env()).unwrap();
        assert_eq!(
            mounts,
            vec![MountConfig {
                host_path: "/host/data[1]".into(),
                task_path: "/srv/1".into(),
                read_only: false,
            }]
        );
        let error = task_mounts(&alloc, &task, &offered(&["data"]), &env()).unwrap_err();
        assert_eq!(error, "host volume validation error: missing data[1]");
    }

    #[test]
    fn read_only_from_the_request_and_raw_exec_refused_as_nomad() {
        let (alloc, task) = allocation("docker", false, true);
        let mounts = task_mounts(&alloc, &task, &offered(&["data"]), &env()).unwrap();
        assert!(mounts[0].read_only);
        let (alloc, task) = allocation("raw_exec", false, false);
        let error = task_mounts(&alloc, &task, &offered(&["data"]), &env()).unwrap_err();
        assert_eq!(
            error,
            "task driver \"raw_exec\" for \"t\" does not support host volumes"
        );
    }
}
