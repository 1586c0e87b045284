//! The last step before the engine sees a container's create body: every bind source that must
//! stay beneath the allocation dir (the task's `/alloc`, `/local`, `/secrets`, and its own
//! `volumes` / `mount` sources where the client does not enable volumes) is resolved beneath the
//! alloc dir by the kernel in one step (`drover_isolate::beneath`), and the body then names a
//! private mount of the object found instead of the path. A symlink planted in the alloc dir (by
//! a prestart task, by a sidecar, at any moment) can neither lead the bind outside nor be swapped
//! in between a check and the engine's mount: the engine mounts what was resolved.
//!
//! The private mounts live in the task's driver state dir (which no task can reach) and are
//! detached once the container has started, when its own mount namespace holds its copies.
//!
//! Not for: deciding which sources must stay beneath (the task plan does) or talking to the
//! engine.

use std::path::{Path, PathBuf};

use drover_isolate::beneath::{self, BeneathError, Missing, Staged};

use crate::error::DockerError;
use crate::task::{BindSlot, TaskPlan};

/// Where a task's private mounts are made, under its driver state dir.
pub fn staging_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("binds")
}

/// Resolves the plan's beneath-binds and rewrites the body to name their private mounts; the
/// mounts stay for as long as the returned guards live (until the container has started).
pub fn pin(plan: &mut TaskPlan, state_dir: &Path) -> Result<Vec<Staged>, DockerError> {
    if plan.beneath.is_empty() {
        return Ok(Vec::new());
    }
    let alloc_dir = plan
        .alloc_dir
        .clone()
        .ok_or_else(|| DockerError::Config("the task has no allocation directory".into()))?;
    let root = beneath::open_root(&alloc_dir).map_err(|error| {
        DockerError::Config(format!("opening the allocation directory: {error}"))
    })?;
    // Everything resolved first, so a refusal mounts nothing.
    let mut pinned = Vec::with_capacity(plan.beneath.len());
    for bind in &plan.beneath {
        let missing = if bind.create_missing {
            Missing::CreateDirs
        } else {
            Missing::Fail
        };
        pinned.push(
            beneath::open_at(&root, &alloc_dir, &bind.relative, missing)
                .map_err(|error| refusal(&bind.setting, &bind.written, &error))?,
        );
    }
    let staging = staging_dir(state_dir);
    // Mounts an earlier agent left behind (it died between staging and start).
    Staged::clear_dir(&staging);
    std::fs::create_dir_all(&staging).map_err(|error| {
        DockerError::Config(format!(
            "creating the bind staging directory {}: {error}",
            staging.display()
        ))
    })?;
    let mut staged = Vec::new();
    let Some(host_config) = plan.body.host_config.as_mut() else {
        return Ok(staged);
    };
    for (number, (bind, pinned)) in plan.beneath.iter().zip(&pinned).enumerate() {
        let mount = Staged::mount(pinned, &staging.join(number.to_string())).map_err(|error| {
            DockerError::Config(format!(
                "{}: staging the bind of {:?}: {error}",
                bind.setting, bind.written
            ))
        })?;
        let source = mount.path().display().to_string();
        match &bind.slot {
            BindSlot::Bind { index, suffix } => {
                if let Some(entry) = host_config.binds.as_mut().and_then(|b| b.get_mut(*index)) {
                    *entry = format!("{source}{suffix}");
                }
            }
            BindSlot::Mount(index) => {
                if let Some(entry) = host_config.mounts.as_mut().and_then(|m| m.get_mut(*index)) {
                    entry.source = Some(source);
                }
            }
        }
        staged.push(mount);
    }
    Ok(staged)
}

/// The refusal of a source that does not resolve beneath the alloc dir, naming the setting and
/// the path.
fn refusal(setting: &str, written: &str, error: &BeneathError) -> DockerError {
    let user_path = matches!(setting, "volumes" | "mount");
    let what = if user_path {
        format!("{setting}: host path {written:?}")
    } else {
        format!("{setting}: the task's directory {written}")
    };
    DockerError::Config(match error {
        BeneathError::Escapes { .. } if user_path => format!(
            "{what} resolves outside the allocation directory through a symlink; refused (volumes are not enabled on this client: plugin \"docker\" {{ config {{ volumes {{ enabled = true }} }} }}; {error})"
        ),
        BeneathError::Escapes { .. } => format!(
            "{what} resolves outside the allocation directory through a symlink (a task may have planted it); refused ({error})"
        ),
        BeneathError::Missing { .. } => {
            format!("{what}: bind source path does not exist ({error})")
        }
        BeneathError::Io { .. } => format!("{what}: {error}"),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use drover_driver::TaskLaunch;
    use serde_json::json;

    use crate::config::DockerConfig;

    /// An alloc dir with one task and its directories, as the client makes it.
    fn alloc() -> (tempfile::TempDir, TaskLaunch) {
        let dir = tempfile::tempdir().unwrap();
        for sub in ["alloc/data", "web/local", "web/secrets"] {
            std::fs::create_dir_all(dir.path().join(sub)).unwrap();
        }
        let launch = TaskLaunch {
            alloc_id: "a1".into(),
            task_name: "web".into(),
            task_dir: Some(dir.path().join("web")),
            shared_alloc_dir: Some(dir.path().join("alloc")),
            ..TaskLaunch::default()
        };
        (dir, launch)
    }

    fn planned(launch: &TaskLaunch, config: serde_json::Value) -> TaskPlan {
        let mut launch = launch.clone();
        launch.driver_config = config;
        crate::task::plan(&launch, &DockerConfig::default()).unwrap()
    }

    #[test]
    fn binds_name_private_mounts_of_what_resolved_beneath_the_alloc_dir() {
        if !drover_isolate::root_tests::root_test_may_run("mount(2)", true) {
            return;
        }
        let (dir, launch) = alloc();
        let state = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("web/local/f"), "local").unwrap();
        let mut plan = planned(
            &launch,
            json!({"image": "x", "volumes": ["local/new/dir:/new"], "mount": [{"type": "bind", "source": "../alloc/data", "target": "/d"}]}),
        );
        let staged = pin(&mut plan, state.path()).unwrap();
        let host = plan.body.host_config.as_ref().unwrap();
        let binds = host.binds.as_ref().unwrap();
        let staging = staging_dir(state.path());
        assert_eq!(binds[1], format!("{}:/local", staging.join("1").display()));
        assert_eq!(
            std::fs::read_to_string(staging.join("1/f")).unwrap(),
            "local"
        );
        // A missing `volumes` source is created beneath, as the engine would.
        assert!(dir.path().join("web/local/new/dir").is_dir());
        assert_eq!(binds[3], format!("{}:/new", staging.join("3").display()));
        let mounts = host.mounts.as_ref().unwrap();
        assert_eq!(
            mounts[0].source.as_deref(),
            Some(staging.join("4").display().to_string().as_str())
        );
        drop(staged);
        assert_eq!(std::fs::read_dir(&staging).unwrap().count(), 0);
    }

    #[test]
    fn a_planted_symlink_out_of_the_alloc_dir_is_refused_naming_the_setting_and_path() {
        let (dir, launch) = alloc();
        let state = tempfile::tempdir().unwrap();
        let host = tempfile::tempdir().unwrap();
        // The three ways in: a symlink in local/ named by `volumes`, one in alloc/data named
        // by a bind `mount`, and local/ itself replaced by a symlink.
        std::os::unix::fs::symlink(host.path(), dir.path().join("web/local/x")).unwrap();
        std::os::unix::fs::symlink(host.path(), dir.path().join("alloc/data/y")).unwrap();
        for (config, named) in [
            (
                json!({"image": "x", "volumes": ["local/x:/x"]}),
                "volumes: host path \"local/x\" resolves outside the allocation directory",
            ),
            (
                json!({"image": "x", "mount": [{"type": "bind", "source": "../alloc/data/y", "target": "/y"}]}),
                "mount: host path \"../alloc/data/y\" resolves outside the allocation directory",
            ),
        ] {
            let mut plan = planned(&launch, config.clone());
            let error = pin(&mut plan, state.path()).unwrap_err().to_string();
            assert!(error.contains(named), "{config}: {error}");
            assert!(error.contains("volumes { enabled = true }"), "{error}");
        }
        std::fs::remove_dir_all(dir.path().join("web/local")).unwrap();
        std::os::unix::fs::symlink(host.path(), dir.path().join("web/local")).unwrap();
        let mut plan = planned(&launch, json!({"image": "x"}));
        let error = pin(&mut plan, state.path()).unwrap_err().to_string();
        assert!(
            error.contains("/local: the task's directory") && error.contains("web/local"),
            "{error}"
        );
        assert!(
            error.contains("resolves outside the allocation directory"),
            "{error}"
        );
        assert_eq!(std::fs::read_dir(host.path()).unwrap().count(), 0);
    }
}
