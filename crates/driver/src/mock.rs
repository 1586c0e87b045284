//! The `mock_driver`: a fake that behaves like a driver, for the client's tests (Nomad's
//! `drivers/mock`). Its behaviour comes from the task's `config` block
//! ([`TaskLaunch::driver_config`]):
//!
//! | key | meaning |
//! |---|---|
//! | `run_for` | how long the task runs (`"10s"`, or nanoseconds); default 0: it exits at once |
//! | `exit_code` | its exit code when it ends by itself; default 0 |
//! | `start_error` | start fails with this message |
//! | `start_error_recoverable` | whether that start error is recoverable; default false |
//! | `kill_after` | how long the task takes to die after a kill signal; default 0 |
//! | `stdout_string` | written to `<log dir>/<task>.stdout.0` at start |
//!
//! Time is tokio time, so tests can run it on paused time. Tasks live in the driver's memory:
//! a `recover` succeeds when the same `MockDriver` (e.g. an `Arc` shared between two client
//! instances in a restore test) still has the task, as a live shim would, and fails with
//! [`DriverError::ShimGone`] otherwise.
//!
//! Not for: anything but tests.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::handle::TASK_HANDLE_VERSION;
use crate::{
    Driver, DriverError, DriverFuture, ExitStatus, TaskHandle, TaskLaunch, TaskResourceUsage,
    parse_signal,
};

/// The mock task's settings, parsed from the task config.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MockTaskConfig {
    pub run_for: Duration,
    pub exit_code: i32,
    pub start_error: Option<String>,
    pub start_error_recoverable: bool,
    pub kill_after: Duration,
    pub stdout_string: Option<String>,
}

impl MockTaskConfig {
    /// Reads the keys above from a task's `config` object; unknown keys are an error.
    pub fn from_config(config: &serde_json::Value) -> Result<Self, DriverError> {
        let mut parsed = Self::default();
        let Some(object) = config.as_object() else {
            if config.is_null() {
                return Ok(parsed);
            }
            return Err(DriverError::InvalidConfig(
                "mock_driver config must be an object".to_string(),
            ));
        };
        for (key, value) in object {
            let invalid = |what: &str| {
                DriverError::InvalidConfig(format!("mock_driver config {key}: expected {what}"))
            };
            match key.as_str() {
                "run_for" => {
                    parsed.run_for = duration_value(value).ok_or_else(|| invalid("a duration"))?
                }
                "kill_after" => {
                    parsed.kill_after =
                        duration_value(value).ok_or_else(|| invalid("a duration"))?;
                }
                "exit_code" => {
                    parsed.exit_code = value
                        .as_i64()
                        .and_then(|code| i32::try_from(code).ok())
                        .ok_or_else(|| invalid("an integer"))?;
                }
                "start_error" => {
                    parsed.start_error = Some(
                        value
                            .as_str()
                            .ok_or_else(|| invalid("a string"))?
                            .to_string(),
                    );
                }
                "start_error_recoverable" => {
                    parsed.start_error_recoverable =
                        value.as_bool().ok_or_else(|| invalid("a boolean"))?;
                }
                "stdout_string" => {
                    parsed.stdout_string = Some(
                        value
                            .as_str()
                            .ok_or_else(|| invalid("a string"))?
                            .to_string(),
                    );
                }
                _ => {
                    return Err(DriverError::InvalidConfig(format!(
                        "mock_driver config: unknown key {key:?}"
                    )));
                }
            }
        }
        Ok(parsed)
    }
}

fn duration_value(value: &serde_json::Value) -> Option<Duration> {
    match value {
        serde_json::Value::Number(number) => number.as_u64().map(Duration::from_nanos),
        serde_json::Value::String(text) => parse_duration(text),
        _ => None,
    }
}

/// Parses Go-style durations (`1h2m3.5s`, `300ms`, `10us`, `10µs`, `5ns`, `0`) with the one
/// parser of the workspace; negative durations are refused.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let parsed = drover_structs::DurationNs::parse_go(text.trim()).ok()?;
    (parsed.as_nanos() >= 0).then(|| parsed.to_std())
}

struct MockTask {
    config: MockTaskConfig,
    exit: watch::Sender<Option<ExitStatus>>,
    signals: Vec<String>,
}

/// The mock driver. Cheap to clone; clones share their tasks.
#[derive(Clone, Default)]
pub struct MockDriver {
    tasks: Arc<Mutex<HashMap<String, MockTask>>>,
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

fn exited(exit_code: i32, signal: i32) -> ExitStatus {
    ExitStatus {
        exit_code,
        signal,
        oom_killed: false,
        finished_at_unix_ns: now_ns(),
    }
}

impl MockDriver {
    pub fn new() -> Self {
        Self::default()
    }

    fn tasks(&self) -> MutexGuard<'_, HashMap<String, MockTask>> {
        self.tasks
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Signals the task has received, in order (for tests).
    pub fn signals_received(&self, task_id: &str) -> Vec<String> {
        self.tasks()
            .get(task_id)
            .map(|task| task.signals.clone())
            .unwrap_or_default()
    }

    /// Forgets a task, as if its shim had died (for restore tests).
    pub fn lose_task(&self, task_id: &str) {
        self.tasks().remove(task_id);
    }

    fn subscribe(&self, task_id: &str) -> Result<watch::Receiver<Option<ExitStatus>>, DriverError> {
        self.tasks()
            .get(task_id)
            .map(|task| task.exit.subscribe())
            .ok_or_else(|| DriverError::UnknownTask {
                task_id: task_id.to_string(),
                driver: "mock_driver",
            })
    }

    async fn start_task(&self, launch: &TaskLaunch) -> Result<TaskHandle, DriverError> {
        let config = MockTaskConfig::from_config(&launch.driver_config)?;
        if let Some(message) = &config.start_error {
            return Err(DriverError::Start {
                task_id: launch.task_id.clone(),
                message: message.clone(),
                recoverable: config.start_error_recoverable,
            });
        }
        if let Some(text) = &config.stdout_string {
            let path = launch
                .logs
                .dir
                .join(format!("{}.stdout.0", launch.task_name));
            tokio::fs::create_dir_all(&launch.logs.dir)
                .await
                .and(tokio::fs::write(&path, text.as_bytes()).await)
                .map_err(|source| DriverError::StateDir { path, source })?;
        }
        let (sender, _) = watch::channel(None);
        let run_for = config.run_for;
        let exit_code = config.exit_code;
        let on_exit = sender.clone();
        self.tasks().insert(
            launch.task_id.clone(),
            MockTask {
                config: config.clone(),
                exit: sender,
                signals: Vec::new(),
            },
        );
        tokio::spawn(async move {
            tokio::time::sleep(run_for).await;
            on_exit.send_if_modified(|exit| {
                if exit.is_none() {
                    *exit = Some(exited(exit_code, 0));
                    true
                } else {
                    false
                }
            });
        });
        Ok(TaskHandle {
            version: TASK_HANDLE_VERSION,
            driver: self.name().to_string(),
            task_id: launch.task_id.clone(),
            kill_signal: launch.kill_signal.clone(),
            shim: None,
            driver_state: serde_json::to_value(&config).unwrap_or_default(),
        })
    }

    async fn wait_task(&self, task_id: &str) -> Result<ExitStatus, DriverError> {
        let mut receiver = self.subscribe(task_id)?;
        let gone = || DriverError::ShimGone {
            task_id: task_id.to_string(),
        };
        let exit = receiver
            .wait_for(Option::is_some)
            .await
            .map_err(|_| gone())?;
        (*exit).ok_or_else(gone)
    }

    async fn kill_task(
        &self,
        handle: &TaskHandle,
        signal: Option<&str>,
        timeout: Duration,
    ) -> Result<ExitStatus, DriverError> {
        let name = signal
            .or(handle.kill_signal.as_deref())
            .unwrap_or(crate::DEFAULT_KILL_SIGNAL);
        let signal = parse_signal(name)?;
        let (kill_after, sender) = {
            let mut tasks = self.tasks();
            let task = tasks
                .get_mut(&handle.task_id)
                .ok_or_else(|| DriverError::UnknownTask {
                    task_id: handle.task_id.clone(),
                    driver: "mock_driver",
                })?;
            if let Some(exit) = *task.exit.borrow() {
                return Ok(exit);
            }
            task.signals.push(name.to_string());
            (task.config.kill_after, task.exit.clone())
        };
        let (delay, dying_signal) = if kill_after <= timeout {
            (kill_after, signal as i32)
        } else {
            (timeout, libc::SIGKILL)
        };
        tokio::time::sleep(delay).await;
        sender.send_if_modified(|exit| {
            if exit.is_none() {
                *exit = Some(exited(128 + dying_signal, dying_signal));
                true
            } else {
                false
            }
        });
        self.wait_task(&handle.task_id).await
    }
}

impl Driver for MockDriver {
    fn name(&self) -> &'static str {
        "mock_driver"
    }

    fn start<'a>(&'a self, launch: &'a TaskLaunch) -> DriverFuture<'a, TaskHandle> {
        Box::pin(self.start_task(launch))
    }

    fn recover<'a>(&'a self, handle: &'a TaskHandle) -> DriverFuture<'a, ()> {
        Box::pin(async move {
            if self.tasks().contains_key(&handle.task_id) {
                Ok(())
            } else {
                Err(DriverError::ShimGone {
                    task_id: handle.task_id.clone(),
                })
            }
        })
    }

    fn wait<'a>(&'a self, handle: &'a TaskHandle) -> DriverFuture<'a, ExitStatus> {
        Box::pin(self.wait_task(&handle.task_id))
    }

    fn exit_status<'a>(&'a self, handle: &'a TaskHandle) -> DriverFuture<'a, Option<ExitStatus>> {
        Box::pin(async move { Ok(*self.subscribe(&handle.task_id)?.borrow()) })
    }

    fn signal<'a>(&'a self, handle: &'a TaskHandle, signal: &'a str) -> DriverFuture<'a, ()> {
        Box::pin(async move {
            parse_signal(signal)?;
            let mut tasks = self.tasks();
            let task = tasks
                .get_mut(&handle.task_id)
                .ok_or_else(|| DriverError::UnknownTask {
                    task_id: handle.task_id.clone(),
                    driver: "mock_driver",
                })?;
            if task.exit.borrow().is_some() {
                return Err(DriverError::Refused {
                    task_id: handle.task_id.clone(),
                    request: "signal",
                    message: "the task has exited".to_string(),
                });
            }
            task.signals.push(signal.to_string());
            Ok(())
        })
    }

    fn kill<'a>(
        &'a self,
        handle: &'a TaskHandle,
        signal: Option<&'a str>,
        timeout: Duration,
    ) -> DriverFuture<'a, ExitStatus> {
        Box::pin(self.kill_task(handle, signal, timeout))
    }

    fn stats<'a>(&'a self, handle: &'a TaskHandle) -> DriverFuture<'a, TaskResourceUsage> {
        Box::pin(async move {
            let running = self.subscribe(&handle.task_id)?.borrow().is_none();
            let mut usage = TaskResourceUsage {
                timestamp_unix_ns: now_ns(),
                ..TaskResourceUsage::default()
            };
            if running {
                usage.memory.rss = 1 << 20;
                usage.memory.usage = 1 << 20;
                usage.memory.measured = vec!["RSS".to_string(), "Usage".to_string()];
            }
            Ok(usage)
        })
    }

    fn destroy<'a>(&'a self, handle: &'a TaskHandle) -> DriverFuture<'a, ()> {
        Box::pin(async move {
            if let Some(task) = self.tasks().remove(&handle.task_id) {
                task.exit.send_if_modified(|exit| {
                    if exit.is_none() {
                        *exit = Some(exited(128 + libc::SIGKILL, libc::SIGKILL));
                        true
                    } else {
                        false
                    }
                });
            }
            Ok(())
        })
    }

    fn reclaim<'a>(&'a self, handle: &'a TaskHandle) -> DriverFuture<'a, Option<ExitStatus>> {
        Box::pin(async move {
            let exit = self
                .tasks()
                .remove(&handle.task_id)
                .and_then(|task| *task.exit.borrow());
            Ok(exit)
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn launch(task_id: &str, config: serde_json::Value) -> TaskLaunch {
        TaskLaunch {
            task_id: task_id.to_string(),
            task_name: "web".to_string(),
            driver_config: config,
            ..TaskLaunch::default()
        }
    }

    #[test]
    fn go_durations_parse() {
        assert_eq!(parse_duration("10s"), Some(Duration::from_secs(10)));
        assert_eq!(
            parse_duration("1h2m3.5s"),
            Some(Duration::from_millis(3_723_500))
        );
        assert_eq!(parse_duration("300ms"), Some(Duration::from_millis(300)));
        assert_eq!(parse_duration("10µs"), Some(Duration::from_micros(10)));
        assert_eq!(parse_duration("0"), Some(Duration::ZERO));
        assert_eq!(parse_duration("1d"), None);
        assert_eq!(parse_duration(""), None);
        assert_eq!(parse_duration("s"), None);
    }

    #[test]
    fn unknown_and_mistyped_config_keys_are_refused() {
        assert!(MockTaskConfig::from_config(&json!({"run_four": "1s"})).is_err());
        assert!(MockTaskConfig::from_config(&json!({"exit_code": "3"})).is_err());
        let parsed = MockTaskConfig::from_config(&json!({
            "run_for": "2s", "exit_code": 3, "kill_after": 5_000_000_000u64,
            "start_error_recoverable": true, "stdout_string": "hi"
        }))
        .unwrap();
        assert_eq!(parsed.run_for, Duration::from_secs(2));
        assert_eq!(parsed.kill_after, Duration::from_secs(5));
        assert_eq!(parsed.exit_code, 3);
        assert!(parsed.start_error_recoverable);
    }

    #[tokio::test(start_paused = true)]
    async fn a_task_runs_for_its_time_and_exits_with_its_code() {
        let driver = MockDriver::new();
        let started = tokio::time::Instant::now();
        let handle = driver
            .start(&launch("t1", json!({"run_for": "10s", "exit_code": 3})))
            .await
            .unwrap();
        assert_eq!(driver.exit_status(&handle).await.unwrap(), None);
        let exit = driver.wait(&handle).await.unwrap();
        assert_eq!(exit.exit_code, 3);
        assert_eq!(started.elapsed(), Duration::from_secs(10));
    }

    #[tokio::test(start_paused = true)]
    async fn kill_waits_kill_after_or_force_kills_at_the_timeout() {
        let driver = MockDriver::new();
        let slow = driver
            .start(&launch(
                "slow",
                json!({"run_for": "1h", "kill_after": "5s"}),
            ))
            .await
            .unwrap();
        let started = tokio::time::Instant::now();
        let exit = driver
            .kill(&slow, Some("SIGTERM"), Duration::from_secs(2))
            .await
            .unwrap();
        assert_eq!((exit.signal, exit.exit_code), (9, 137));
        assert_eq!(started.elapsed(), Duration::from_secs(2));

        let polite = driver
            .start(&launch(
                "polite",
                json!({"run_for": "1h", "kill_after": "1s"}),
            ))
            .await
            .unwrap();
        let exit = driver
            .kill(&polite, None, Duration::from_secs(2))
            .await
            .unwrap();
        assert_eq!(exit.signal, libc::SIGINT, "Nomad's default kill signal");
        assert_eq!(
            driver.signals_received("polite"),
            vec!["SIGINT".to_string()]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn start_errors_carry_their_recoverability_and_recover_needs_the_task() {
        let driver = MockDriver::new();
        let error = driver
            .start(&launch(
                "e",
                json!({"start_error": "boom", "start_error_recoverable": true}),
            ))
            .await
            .unwrap_err();
        assert!(error.is_recoverable());
        let error = driver
            .start(&launch("e", json!({"start_error": "boom"})))
            .await
            .unwrap_err();
        assert!(!error.is_recoverable());

        let handle = driver
            .start(&launch("r", json!({"run_for": "1m"})))
            .await
            .unwrap();
        driver.clone().recover(&handle).await.unwrap();
        driver.lose_task("r");
        assert!(matches!(
            driver.recover(&handle).await,
            Err(DriverError::ShimGone { .. })
        ));
    }

    #[tokio::test]
    async fn the_mock_driver_passes_the_conformance_suite() {
        use crate::conformance::{Scenario, run_conformance_suite};
        let make_task = |scenario: Scenario, name: &str| match scenario {
            Scenario::ExitWith(code) => launch(name, json!({"exit_code": code})),
            Scenario::RunUntilKilled => launch(name, json!({"run_for": "1h"})),
        };
        run_conformance_suite(&MockDriver::new(), &make_task)
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn stdout_string_lands_in_the_first_log_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut task = launch("s", json!({"stdout_string": "hello\n"}));
        task.logs.dir = dir.path().to_path_buf();
        let driver = MockDriver::new();
        let handle = driver.start(&task).await.unwrap();
        driver.wait(&handle).await.unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("web.stdout.0")).unwrap(),
            "hello\n"
        );
    }
}
