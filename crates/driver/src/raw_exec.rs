//! The `raw_exec` driver: the shim engine with no isolation — the command runs as given, as the
//! agent's user unless the task names one, without namespaces or a chroot. The `connect_proxy`
//! driver is the same engine for a Connect sidecar: the client gives it the agent's own binary
//! as the command, run as the agent's user (it joins the group's network namespace, has its
//! own cgroup and its logs, like any task under a shim).
//!
//! `denied_envvars`, in the client's plugin config and in the task config alike (Nomad 1.10):
//! the environment variables whose names match one of them are removed from the task's
//! environment (and from commands `alloc exec` runs in it). A name matches a pattern equal to
//! it, or one with `*` wildcards, each standing for any run of characters (`NOMAD_*`,
//! `*_TOKEN`, `*AWS*`); nothing else in a pattern is special.

use drover_shim::proto::IsolationSpec;

use crate::shim_engine::{LaunchPolicy, ShimEngine, TaskEnvironment};
use crate::task_config::{RAW_EXEC_CONFIG_KEYS, string_list, validate_config};
use crate::{DriverError, TaskLaunch};

/// The engine's settings, named for the driver that uses them alone.
pub use crate::shim_engine::RawExecConfig;

/// The `raw_exec` driver: the shim engine with the [`RawExec`] policy.
pub fn raw_exec_driver(config: RawExecConfig) -> ShimEngine {
    ShimEngine::new(config, RawExec)
}

/// The `raw_exec` driver's policy: its task config, no isolation.
pub struct RawExec;

impl LaunchPolicy for RawExec {
    fn driver_name(&self) -> &'static str {
        "raw_exec"
    }

    fn isolation(
        &self,
        launch: &TaskLaunch,
        _engine: &ShimEngine,
    ) -> Result<Option<IsolationSpec>, DriverError> {
        validate_config(&launch.driver_config, RAW_EXEC_CONFIG_KEYS)?;
        Ok(None)
    }

    fn user(&self, launch: &TaskLaunch) -> Option<String> {
        launch.user.clone()
    }

    fn environment(
        &self,
        launch: &TaskLaunch,
        engine: &ShimEngine,
    ) -> Result<TaskEnvironment, DriverError> {
        let mut denied = engine.config().denied_envvars.clone();
        denied.extend(string_list(&launch.driver_config, "denied_envvars")?);
        let (removed, kept): (Vec<_>, Vec<_>) = launch
            .env
            .iter()
            .cloned()
            .partition(|(name, _)| is_denied(name, &denied));
        Ok(TaskEnvironment {
            env: kept,
            removed: removed.into_iter().map(|(name, _)| name).collect(),
        })
    }
}

/// Whether `name` matches one of the `denied` patterns.
pub fn is_denied(name: &str, denied: &[String]) -> bool {
    denied.iter().any(|pattern| glob_matches(pattern, name))
}

/// Whether `name` matches `pattern`, where each `*` stands for any run of characters (none
/// included) and every other character for itself.
pub fn glob_matches(pattern: &str, name: &str) -> bool {
    let mut pieces = pattern.split('*');
    // `split` always yields a first piece; without a `*` it is the whole pattern.
    let first = pieces.next().unwrap_or_default();
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let middle_and_last: Vec<&str> = pieces.collect();
    let Some((last, middle)) = middle_and_last.split_last() else {
        return rest.is_empty();
    };
    for piece in middle {
        // Taking each piece at its first place leaves the most room for the ones after it.
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

/// The `connect_proxy` driver: the shim engine with the [`ConnectProxy`] policy.
pub fn connect_proxy_driver(config: RawExecConfig) -> ShimEngine {
    ShimEngine::new(config, ConnectProxy)
}

/// The `connect_proxy` driver's policy: no task config of its own (the client builds the
/// command line), no isolation, the agent's user.
pub struct ConnectProxy;

impl LaunchPolicy for ConnectProxy {
    fn driver_name(&self) -> &'static str {
        "connect_proxy"
    }

    fn isolation(
        &self,
        launch: &TaskLaunch,
        _engine: &ShimEngine,
    ) -> Result<Option<IsolationSpec>, DriverError> {
        validate_config(&launch.driver_config, &[])?;
        Ok(None)
    }

    fn user(&self, _launch: &TaskLaunch) -> Option<String> {
        None
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn globs_match_as_nomad_matches_denied_envvars() {
        for (pattern, name) in [
            ("AWS_SECRET_KEY", "AWS_SECRET_KEY"),
            ("NOMAD_*", "NOMAD_TOKEN"),
            ("NOMAD_*", "NOMAD_"),
            ("*_TOKEN", "GITHUB_TOKEN"),
            ("*TOKEN", "TOKEN"),
            ("*AWS*", "TEST_AWS_VAR"),
            ("*AWS*", "AWS"),
            ("*", "ANYTHING"),
            ("A*B*C", "AxxBxxBxxC"),
            ("A**C", "AC"),
        ] {
            assert!(glob_matches(pattern, name), "{pattern} should match {name}");
        }
        for (pattern, name) in [
            ("AWS_SECRET_KEY", "AWS_SECRET_KEY2"),
            ("NOMAD_*", "XNOMAD_TOKEN"),
            ("*_TOKEN", "GITHUB_TOKENS"),
            ("*AWS*", "AW_S"),
            ("A*B*C", "AxxCxxB"),
            ("ABA*ABA", "ABA"),
            ("", "X"),
            ("X?", "XY"),
        ] {
            assert!(
                !glob_matches(pattern, name),
                "{pattern} should not match {name}"
            );
        }
    }

    #[test]
    fn the_client_and_task_denied_envvars_both_apply() {
        let engine = raw_exec_driver(RawExecConfig {
            denied_envvars: vec!["*_TOKEN".into()],
            ..RawExecConfig::default()
        });
        let launch = TaskLaunch {
            env: [
                ("NOMAD_TOKEN", "a"),
                ("AWS_SECRET_KEY", "b"),
                ("PORT", "c"),
                ("NOMAD_ADDR", "d"),
            ]
            .into_iter()
            .map(|(name, value)| (name.to_owned(), value.to_owned()))
            .collect(),
            driver_config: serde_json::json!({"command": "x", "denied_envvars": ["AWS_*"]}),
            ..TaskLaunch::default()
        };
        let TaskEnvironment { env, removed } = RawExec.environment(&launch, &engine).unwrap();
        assert_eq!(
            env,
            vec![
                ("PORT".to_owned(), "c".to_owned()),
                ("NOMAD_ADDR".to_owned(), "d".to_owned())
            ]
        );
        assert_eq!(removed, vec!["NOMAD_TOKEN", "AWS_SECRET_KEY"]);
        let bad = TaskLaunch {
            driver_config: serde_json::json!({"denied_envvars": "AWS_*"}),
            ..TaskLaunch::default()
        };
        assert!(
            RawExec
                .environment(&bad, &engine)
                .unwrap_err()
                .to_string()
                .contains("denied_envvars must be a list of strings")
        );
    }
}
