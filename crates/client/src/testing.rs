//! Test support: a fake driver that behaves like a driver on tokio time (so runner logic is
//! tested on paused time), configured by task config keys as Nomad's mock driver is —
//! `run_for` (Go duration; absent = until killed), `exit_code`, `start_error`,
//! `start_error_recoverable`, `kill_after` (how long the task takes to die after its kill
//! signal; past the grace it is SIGKILLed), `ignore_signals` (the kill signal does nothing),
//! `kill_fail_times` (the first N kill calls fail) —
//! plus job and alloc builders.
//!
//! Tasks live in the driver, not in a runner: a runner that shuts down leaves them running and a
//! second runner on the same driver re-attaches, as with real shims.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use drover_structs::{
    Allocation, DurationNs, Job, RestartPolicy, Task, TaskGroup, TaskLifecycleConfig,
};
use serde_json::{Map, Value, json};
use tokio::sync::watch;

use crate::mutex::lock;
use crate::taskrunner::driver::{
    DriverFailure, DriverFuture, PersistedTaskHandle, Reattached, StartedTask, TaskDriver,
    TaskExit, TaskLaunchSpec,
};

/// A task running in the fake driver.
#[derive(Debug)]
struct FakeTask {
    pid: u32,
    task_name: String,
    exit: watch::Sender<Option<TaskExit>>,
    kill_after: Option<Duration>,
    ignore_signals: bool,
    kill_failures_left: Mutex<u64>,
}

/// What the fake driver saw.
#[derive(Debug, Default, Clone)]
pub struct FakeDriverLog {
    pub starts: Vec<String>,
    pub signals: Vec<(String, String)>,
    pub kills: Vec<(String, String, Duration)>,
    pub specs: Vec<TaskLaunchSpec>,
}

/// See the module docs.
#[derive(Debug, Default)]
pub struct FakeDriver {
    tasks: Mutex<BTreeMap<String, Arc<FakeTask>>>,
    next_pid: Mutex<u32>,
    log: Mutex<FakeDriverLog>,
}

fn duration_key(config: &Map<String, Value>, key: &str) -> Option<Duration> {
    config
        .get(key)
        .and_then(Value::as_str)
        .and_then(|text| DurationNs::parse_go(text).ok())
        .map(DurationNs::to_std)
}

fn signal_number(signal: &str) -> i64 {
    match signal {
        "SIGHUP" => 1,
        "SIGINT" => 2,
        "SIGQUIT" => 3,
        "SIGKILL" => 9,
        "SIGUSR1" => 10,
        "SIGUSR2" => 12,
        "SIGTERM" => 15,
        _ => 0,
    }
}

impl FakeDriver {
    pub fn new() -> Arc<Self> {
        Arc::new(FakeDriver::default())
    }

    pub fn log(&self) -> FakeDriverLog {
        lock(&self.log).clone()
    }

    /// Pids of tasks that have not exited.
    pub fn live_pids(&self) -> Vec<u32> {
        lock(&self.tasks)
            .values()
            .filter(|task| task.exit.borrow().is_none())
            .map(|task| task.pid)
            .collect()
    }

    /// Makes a running task exit now (as if it died while nobody watched).
    pub fn make_exit(&self, task_name: &str, exit_code: i64) {
        for task in lock(&self.tasks).values() {
            if task.task_name == task_name && task.exit.borrow().is_none() {
                task.exit.send_replace(Some(TaskExit {
                    exit_code,
                    ..TaskExit::default()
                }));
            }
        }
    }

    fn task(&self, handle: &PersistedTaskHandle) -> Result<Arc<FakeTask>, DriverFailure> {
        let id = handle
            .handle
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or_default();
        lock(&self.tasks)
            .get(id)
            .cloned()
            .ok_or_else(|| DriverFailure::unrecoverable(format!("no task {id}")))
    }
}

impl TaskDriver for FakeDriver {
    fn start(&self, spec: TaskLaunchSpec) -> DriverFuture<'_, Result<StartedTask, DriverFailure>> {
        Box::pin(async move {
            {
                let mut log = lock(&self.log);
                log.starts.push(spec.task_name.clone());
                log.specs.push(spec.clone());
            }
            let config = &spec.config;
            if let Some(message) = config.get("start_error").and_then(Value::as_str) {
                let recoverable = config
                    .get("start_error_recoverable")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                return Err(DriverFailure {
                    message: message.to_string(),
                    recoverable,
                });
            }
            let pid = {
                let mut next = lock(&self.next_pid);
                *next += 1;
                1000 + *next
            };
            let (exit, _) = watch::channel(None);
            let task = Arc::new(FakeTask {
                pid,
                task_name: spec.task_name.clone(),
                exit,
                kill_after: duration_key(config, "kill_after"),
                ignore_signals: config
                    .get("ignore_signals")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
                kill_failures_left: Mutex::new(
                    config
                        .get("kill_fail_times")
                        .and_then(Value::as_u64)
                        .unwrap_or(0),
                ),
            });
            let id = format!("{}-{}-{pid}", spec.alloc_id, spec.task_name);
            lock(&self.tasks).insert(id.clone(), task.clone());
            if let Some(run_for) = duration_key(config, "run_for") {
                let exit_code = config.get("exit_code").and_then(Value::as_i64).unwrap_or(0);
                let running = task.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(run_for).await;
                    running.exit.send_if_modified(|exit| {
                        if exit.is_none() {
                            *exit = Some(TaskExit {
                                exit_code,
                                ..TaskExit::default()
                            });
                            true
                        } else {
                            false
                        }
                    });
                });
            }
            Ok(StartedTask {
                handle: PersistedTaskHandle {
                    driver_name: spec.driver_name.clone(),
                    handle: json!({"id": id, "pid": pid}),
                },
                pid: Some(pid),
            })
        })
    }

    fn reattach<'a>(
        &'a self,
        handle: &'a PersistedTaskHandle,
    ) -> DriverFuture<'a, Result<Reattached, DriverFailure>> {
        Box::pin(async move {
            match self.task(handle) {
                Ok(task) => Ok(Reattached::Attached(StartedTask {
                    handle: handle.clone(),
                    pid: Some(task.pid),
                })),
                Err(_) => Ok(Reattached::Gone {
                    exit: None,
                    explanation: "shim is gone".to_string(),
                }),
            }
        })
    }

    fn wait<'a>(
        &'a self,
        handle: &'a PersistedTaskHandle,
    ) -> DriverFuture<'a, Result<TaskExit, DriverFailure>> {
        Box::pin(async move {
            let task = self.task(handle)?;
            let mut receiver = task.exit.subscribe();
            let exit = receiver
                .wait_for(Option::is_some)
                .await
                .map_err(|_| DriverFailure::recoverable("task vanished"))?;
            Ok(exit.clone().unwrap_or_default())
        })
    }

    fn signal<'a>(
        &'a self,
        handle: &'a PersistedTaskHandle,
        signal: &'a str,
    ) -> DriverFuture<'a, Result<(), DriverFailure>> {
        Box::pin(async move {
            let task = self.task(handle)?;
            lock(&self.log)
                .signals
                .push((task.task_name.clone(), signal.to_string()));
            Ok(())
        })
    }

    fn kill<'a>(
        &'a self,
        handle: &'a PersistedTaskHandle,
        signal: &'a str,
        grace: Duration,
    ) -> DriverFuture<'a, Result<(), DriverFailure>> {
        Box::pin(async move {
            let task = self.task(handle)?;
            lock(&self.log)
                .kills
                .push((task.task_name.clone(), signal.to_string(), grace));
            {
                let mut failures_left = lock(&task.kill_failures_left);
                if *failures_left > 0 {
                    *failures_left -= 1;
                    return Err(DriverFailure::recoverable("shim did not answer"));
                }
            }
            let dies_after = match (task.ignore_signals, task.kill_after) {
                (true, _) => None,
                (false, Some(after)) => Some(after),
                (false, None) => Some(Duration::ZERO),
            };
            let (delay, exit_signal) = match dies_after {
                Some(after) if after <= grace => (after, signal_number(signal)),
                _ => (grace, 9),
            };
            let dying = task.clone();
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                dying.exit.send_if_modified(|exit| {
                    if exit.is_none() {
                        *exit = Some(TaskExit {
                            exit_code: 128 + exit_signal,
                            signal: exit_signal,
                            ..TaskExit::default()
                        });
                        true
                    } else {
                        false
                    }
                });
            });
            Ok(())
        })
    }

    fn cleanup<'a>(
        &'a self,
        handle: &'a PersistedTaskHandle,
    ) -> DriverFuture<'a, Result<(), DriverFailure>> {
        Box::pin(async move {
            let id = handle
                .handle
                .get("id")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let mut tasks = lock(&self.tasks);
            if tasks
                .get(id)
                .is_some_and(|task| task.exit.borrow().is_some())
            {
                tasks.remove(id);
            }
            Ok(())
        })
    }
}

/// A task for the fake driver with the given config.
pub fn fake_task(name: &str, config: Value) -> Task {
    Task {
        name: name.to_string(),
        driver: "fake".to_string(),
        config: config.as_object().cloned().unwrap_or_default(),
        kill_timeout: DurationNs::from_secs(5),
        ..Task::default()
    }
}

/// Marks a task as a lifecycle task.
pub fn with_lifecycle(mut task: Task, hook: &str, sidecar: bool) -> Task {
    task.lifecycle = Some(TaskLifecycleConfig {
        hook: hook.to_string(),
        sidecar,
    });
    task
}

/// An alloc of a one-group job holding `tasks`.
pub fn alloc_with_tasks(job_type: &str, tasks: Vec<Task>, restart: RestartPolicy) -> Allocation {
    let job = Job {
        id: "example".to_string(),
        name: "example".to_string(),
        r#type: job_type.to_string(),
        region: "global".to_string(),
        namespace: "default".to_string(),
        datacenters: vec!["dc1".to_string()],
        task_groups: vec![TaskGroup {
            name: "group".to_string(),
            tasks,
            restart_policy: Some(restart),
            ..TaskGroup::default()
        }],
        ..Job::default()
    };
    Allocation {
        id: uuid::Uuid::new_v4().to_string(),
        name: "example.group[0]".to_string(),
        namespace: "default".to_string(),
        job_id: "example".to_string(),
        task_group: "group".to_string(),
        desired_status: drover_structs::ALLOC_DESIRED_STATUS_RUN.to_string(),
        job: Some(std::sync::Arc::new(job)),
        ..Allocation::default()
    }
}

/// A restart policy.
pub fn restart_policy(
    attempts: i64,
    delay: Duration,
    interval: Duration,
    mode: &str,
) -> RestartPolicy {
    RestartPolicy {
        attempts,
        delay: DurationNs::from_std(delay),
        interval: DurationNs::from_std(interval),
        mode: mode.to_string(),
        render_templates: false,
        ..RestartPolicy::default()
    }
}
