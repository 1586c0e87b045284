//! Deployment and migration health of an allocation (Nomad's alloc health watcher hook and its
//! tracker): decides once whether a service allocation turned healthy, and the alloc runner
//! reports it as the allocation's `DeploymentStatus { Healthy, Timestamp }`.
//!
//! What is watched (only `service` jobs):
//! - an allocation of a deployment (`DeploymentID` set): the group's `update` block, unless it
//!   is absent, has `max_parallel = 0` or `health_check = "manual"` (then the operator sets
//!   health through the API);
//! - any other allocation: the group's `migrate` block (Nomad's default when absent), so that a
//!   draining node can tell when a replacement is healthy.
//!
//! The rules, as Nomad's tracker:
//! - any task (poststop tasks aside) failed, or finished while not a prestart task, or the
//!   allocation failed → unhealthy at once;
//! - every task has started (none pending) → after `min_healthy_time` without a task starting
//!   again, the tasks are healthy; a restart starts the wait over;
//! - with `health_check = "checks"` and checks in the group, every check must also have passed
//!   (a warning counts when its `on_update` is `ignore_warnings` or `ignore`, any result when
//!   `ignore`) for `min_healthy_time` without a break, looked at every 500 ms;
//! - nothing healthy by `healthy_deadline` (from when the watch began) → unhealthy, with an
//!   "Alloc Unhealthy" task event per task saying why (deployments only).
//!
//! Durations are `tokio::time` (paused in tests); timestamps come from the client's clock.
//!
//! Not here: persisting or reporting the result (the alloc runner does), or anything a server
//! does with it.

use std::collections::BTreeMap;
use std::time::Duration;

use drover_structs::checks::{CHECK_FAILURE, CHECK_SUCCESS, CHECK_WARNING};
use drover_structs::{
    ALLOC_CLIENT_STATUS_FAILED, Allocation, CheckQueryResult, TASK_STATE_DEAD, TASK_STATE_PENDING,
    TASK_STATE_RUNNING, TaskGroup, TaskState, Timestamp,
};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::AllocClientUpdate;

/// The task event type of the reasons for an unhealthy allocation (Nomad's words).
pub const ALLOC_UNHEALTHY_EVENT: &str = "Alloc Unhealthy";

/// How often check results are looked at (Nomad's `consulCheckLookupInterval`).
pub const CHECK_LOOKUP_INTERVAL: Duration = Duration::from_millis(500);

/// `migrate` defaults (Nomad's `DefaultMigrateStrategy`).
const DEFAULT_MIGRATE_MIN_HEALTHY_TIME: Duration = Duration::from_secs(10);
const DEFAULT_MIGRATE_HEALTHY_DEADLINE: Duration = Duration::from_secs(300);

/// How one allocation's health is judged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthParams {
    /// The allocation belongs to a deployment (else: migration health).
    pub is_deploy: bool,
    pub min_healthy_time: Duration,
    pub healthy_deadline: Duration,
    /// Checks count (`health_check = "checks"`).
    pub use_checks: bool,
}

/// How `alloc`'s health is judged, or `None` when the client does not judge it.
pub fn health_params(alloc: &Allocation) -> Option<HealthParams> {
    let job = alloc.job.as_deref()?;
    if job.r#type != "service" {
        return None;
    }
    let group = job.lookup_task_group(&alloc.task_group)?;
    if !alloc.deployment_id.is_empty() {
        let update = group.update.as_ref()?;
        if update.max_parallel == 0 || update.health_check == "manual" {
            return None;
        }
        return Some(HealthParams {
            is_deploy: true,
            min_healthy_time: update.min_healthy_time.to_std(),
            healthy_deadline: update.healthy_deadline.to_std(),
            use_checks: update.health_check == "checks",
        });
    }
    Some(match group.migrate.as_ref() {
        Some(migrate) => HealthParams {
            is_deploy: false,
            min_healthy_time: migrate.min_healthy_time.to_std(),
            healthy_deadline: migrate.healthy_deadline.to_std(),
            use_checks: migrate.health_check != "task_states",
        },
        None => HealthParams {
            is_deploy: false,
            min_healthy_time: DEFAULT_MIGRATE_MIN_HEALTHY_TIME,
            healthy_deadline: DEFAULT_MIGRATE_HEALTHY_DEADLINE,
            use_checks: true,
        },
    })
}

pub use crate::checks::hook::WatchedCheck;

/// What the task states say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskVerdict {
    /// Unhealthy for good; `from_alloc_failure` when the allocation itself failed (then no
    /// reasons are given per task, as Nomad).
    Unhealthy { from_alloc_failure: bool },
    /// Some task has not started.
    NotStarted,
    /// Every task has started; the latest start.
    Started(Timestamp),
}

fn lifecycle_hook(group: &TaskGroup, task: &str) -> Option<String> {
    let lifecycle = group
        .tasks
        .iter()
        .find(|t| t.name == task)?
        .lifecycle
        .as_ref()?;
    (!lifecycle.sidecar).then(|| lifecycle.hook.clone())
}

/// Judges the task states of an allocation of `group` (Nomad's `watchTaskEvents` pass).
pub fn judge_tasks(
    group: &TaskGroup,
    task_states: &BTreeMap<String, TaskState>,
    client_status: &str,
) -> TaskVerdict {
    let mut latest: Option<Timestamp> = None;
    let mut pending = false;
    for (name, state) in task_states {
        let hook = lifecycle_hook(group, name);
        if hook.as_deref() == Some("poststop") {
            continue;
        }
        if state.failed || (!state.finished_at.is_zero() && hook.as_deref() != Some("prestart")) {
            return TaskVerdict::Unhealthy {
                from_alloc_failure: false,
            };
        }
        if state.state == TASK_STATE_PENDING {
            pending = true;
        } else if latest.is_none_or(|latest| state.started_at > latest) {
            latest = Some(state.started_at);
        }
    }
    if client_status == ALLOC_CLIENT_STATUS_FAILED {
        return TaskVerdict::Unhealthy {
            from_alloc_failure: true,
        };
    }
    match latest {
        Some(latest) if !pending && !task_states.is_empty() => TaskVerdict::Started(latest),
        _ => TaskVerdict::NotStarted,
    }
}

/// Whether every watched check passes, as deployments count it.
pub fn checks_pass(watched: &[WatchedCheck], results: &BTreeMap<String, CheckQueryResult>) -> bool {
    watched.iter().all(|check| {
        let Some(result) = results.get(&check.id) else {
            return false;
        };
        match result.status.as_str() {
            CHECK_SUCCESS => true,
            CHECK_WARNING => matches!(check.on_update.as_str(), "ignore_warnings" | "ignore"),
            CHECK_FAILURE => check.on_update == "ignore",
            _ => false,
        }
    })
}

/// Why each task is unhealthy at the deadline (Nomad's `TaskEvents`); tasks with nothing to
/// say are left out.
pub fn deadline_reasons(
    group: &TaskGroup,
    task_states: &BTreeMap<String, TaskState>,
    params: &HealthParams,
    deadline_unix_nanos: i64,
    watched: &[WatchedCheck],
    results: &BTreeMap<String, CheckQueryResult>,
) -> BTreeMap<String, String> {
    let mut reasons = BTreeMap::new();
    let min_healthy_nanos = i64::try_from(params.min_healthy_time.as_nanos()).unwrap_or(i64::MAX);
    for task in &group.tasks {
        let Some(state) = task_states.get(&task.name) else {
            continue;
        };
        let reason = if state.failed {
            Some("Unhealthy because of failed task".to_string())
        } else if state.state == TASK_STATE_PENDING {
            Some("Task not running by deadline".to_string())
        } else if state.state == TASK_STATE_DEAD
            && task
                .lifecycle
                .as_ref()
                .is_none_or(|lifecycle| lifecycle.sidecar)
        {
            Some("Unhealthy because of dead task".to_string())
        } else if state.state == TASK_STATE_RUNNING
            && state
                .started_at
                .unix_nanos()
                .unwrap_or(0)
                .saturating_add(min_healthy_nanos)
                > deadline_unix_nanos
        {
            Some(format!(
                "Task not running for min_healthy_time of {} by deadline",
                drover_structs::DurationNs::from_std(params.min_healthy_time)
            ))
        } else {
            None
        };
        let reason = reason.or_else(|| {
            if !params.use_checks {
                return None;
            }
            let task_checks: Vec<&WatchedCheck> = watched
                .iter()
                .filter(|check| {
                    results
                        .get(&check.id)
                        .is_some_and(|result| result.task == task.name)
                })
                .collect();
            if task_checks.is_empty() {
                return None;
            }
            let mut failing: Vec<String> = task_checks
                .iter()
                .filter_map(|check| results.get(&check.id))
                .filter(|result| result.status != CHECK_SUCCESS)
                .map(|result| result.service.clone())
                .collect();
            failing.dedup();
            (!failing.is_empty())
                .then(|| format!("Services not healthy by deadline: {}", failing.join(", ")))
        });
        if let Some(reason) = reason {
            reasons.insert(task.name.clone(), reason);
        }
    }
    reasons
}

/// How a watch ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HealthOutcome {
    Healthy,
    /// Unhealthy, with the reason per task to record as "Alloc Unhealthy" events (empty when
    /// a task or the allocation failed: their own events say why).
    Unhealthy(BTreeMap<String, String>),
}

/// What a watch reads of its allocation while it runs.
pub trait HealthSource: Send + Sync + 'static {
    /// Whether `watched` pass by their latest results ([`checks_pass`]), read in place: a watch
    /// looks every [`CHECK_LOOKUP_INTERVAL`] and an allocation may have a thousand checks.
    fn checks_pass(&self, watched: &[WatchedCheck]) -> bool;
    /// The latest check results, by check ID (a copy: read once, when the deadline passes).
    fn check_results(&self) -> BTreeMap<String, CheckQueryResult>;
    /// The client's wall clock, Unix nanoseconds.
    fn now_unix_nanos(&self) -> i64;
}

/// Watches one allocation until its health is known. `None` when `cancel` fires first (the
/// allocation is stopping, was updated, or the agent shuts down).
pub async fn watch_health(
    params: HealthParams,
    group: TaskGroup,
    watched: Vec<WatchedCheck>,
    mut status: watch::Receiver<AllocClientUpdate>,
    source: &dyn HealthSource,
    cancel: CancellationToken,
) -> Option<HealthOutcome> {
    let begun = Instant::now();
    let deadline = begun + params.healthy_deadline;
    let deadline_unix_nanos = source
        .now_unix_nanos()
        .saturating_add(i64::try_from(params.healthy_deadline.as_nanos()).unwrap_or(i64::MAX));
    let checks_count = params.use_checks && !watched.is_empty();
    let mut started: Option<Timestamp> = None;
    let mut tasks_healthy_at: Option<Instant> = None;
    let mut checks_passing_since: Option<Instant> = None;
    let mut next_lookup = begun;
    loop {
        let now = Instant::now();
        let update = status.borrow_and_update().clone();
        match judge_tasks(&group, &update.task_states, &update.client_status) {
            TaskVerdict::Unhealthy { .. } => {
                return Some(HealthOutcome::Unhealthy(BTreeMap::new()));
            }
            TaskVerdict::NotStarted => {
                started = None;
                tasks_healthy_at = None;
            }
            TaskVerdict::Started(latest) => {
                if started != Some(latest) {
                    started = Some(latest);
                    tasks_healthy_at = Some(now + params.min_healthy_time);
                    checks_passing_since = None;
                }
            }
        }
        let tasks_healthy = tasks_healthy_at.is_some_and(|at| now >= at);
        if checks_count {
            if now >= next_lookup {
                next_lookup = now + CHECK_LOOKUP_INTERVAL;
                if source.checks_pass(&watched) {
                    checks_passing_since.get_or_insert(now);
                } else {
                    checks_passing_since = None;
                }
            }
            let checks_healthy =
                checks_passing_since.is_some_and(|since| now >= since + params.min_healthy_time);
            if tasks_healthy && checks_healthy {
                return Some(HealthOutcome::Healthy);
            }
        } else if tasks_healthy {
            return Some(HealthOutcome::Healthy);
        }
        if now >= deadline {
            let update = status.borrow().clone();
            let results = source.check_results();
            let reasons = if params.is_deploy {
                deadline_reasons(
                    &group,
                    &update.task_states,
                    &params,
                    deadline_unix_nanos,
                    &watched,
                    &results,
                )
            } else {
                BTreeMap::new()
            };
            return Some(HealthOutcome::Unhealthy(reasons));
        }

        let mut wake = deadline;
        if let Some(at) = tasks_healthy_at.filter(|at| *at > now) {
            wake = wake.min(at);
        }
        if checks_count {
            wake = wake.min(next_lookup);
            if let Some(at) = checks_passing_since
                .map(|since| since + params.min_healthy_time)
                .filter(|at| *at > now)
            {
                wake = wake.min(at);
            }
        }
        tokio::select! {
            () = cancel.cancelled() => return None,
            changed = status.changed() => {
                if changed.is_err() {
                    return None;
                }
            }
            () = tokio::time::sleep_until(wake) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_structs::{Job, MigrateStrategy, Task, TaskLifecycleConfig, UpdateStrategy};

    fn group(update: Option<UpdateStrategy>) -> TaskGroup {
        TaskGroup {
            name: "web".into(),
            tasks: vec![Task {
                name: "server".into(),
                ..Task::default()
            }],
            update,
            ..TaskGroup::default()
        }
    }

    fn alloc(job_type: &str, group: TaskGroup, deployment: &str) -> Allocation {
        Allocation {
            id: "a1".into(),
            task_group: group.name.clone(),
            deployment_id: deployment.into(),
            job: Some(std::sync::Arc::new(Job {
                r#type: job_type.into(),
                task_groups: vec![group],
                ..Job::default()
            })),
            ..Allocation::default()
        }
    }

    fn update(health_check: &str, max_parallel: i64) -> UpdateStrategy {
        UpdateStrategy {
            max_parallel,
            health_check: health_check.into(),
            min_healthy_time: drover_structs::DurationNs::from_secs(3),
            healthy_deadline: drover_structs::DurationNs::from_secs(60),
            ..UpdateStrategy::default()
        }
    }

    #[test]
    fn params_follow_the_update_block_in_a_deployment_and_migrate_otherwise() {
        let deploy = health_params(&alloc(
            "service",
            group(Some(update("task_states", 1))),
            "d1",
        ))
        .unwrap();
        assert!(deploy.is_deploy && !deploy.use_checks);
        assert_eq!(deploy.min_healthy_time, Duration::from_secs(3));
        assert_eq!(deploy.healthy_deadline, Duration::from_secs(60));

        for skipped in [update("manual", 1), update("checks", 0)] {
            assert_eq!(
                health_params(&alloc("service", group(Some(skipped)), "d1")),
                None
            );
        }
        assert_eq!(health_params(&alloc("service", group(None), "d1")), None);
        assert_eq!(health_params(&alloc("batch", group(None), "")), None);

        let migrate = health_params(&alloc("service", group(None), "")).unwrap();
        assert!(!migrate.is_deploy && migrate.use_checks);
        assert_eq!(migrate.min_healthy_time, Duration::from_secs(10));
        let mut custom = group(None);
        custom.migrate = Some(MigrateStrategy {
            max_parallel: 1,
            health_check: "task_states".into(),
            min_healthy_time: drover_structs::DurationNs::from_secs(1),
            healthy_deadline: drover_structs::DurationNs::from_secs(9),
        });
        let migrate = health_params(&alloc("service", custom, "")).unwrap();
        assert!(!migrate.use_checks);
        assert_eq!(migrate.healthy_deadline, Duration::from_secs(9));
    }

    fn state(state: &str, started: i64) -> TaskState {
        TaskState {
            state: state.into(),
            started_at: Timestamp::from_unix_nanos(started),
            ..TaskState::default()
        }
    }

    #[test]
    fn task_verdicts_follow_nomads_rules() {
        let mut group = group(None);
        group.tasks.push(Task {
            name: "init".into(),
            lifecycle: Some(TaskLifecycleConfig {
                hook: "prestart".into(),
                sidecar: false,
            }),
            ..Task::default()
        });
        let mut states = BTreeMap::from([("server".to_string(), state("pending", 0))]);
        assert_eq!(
            judge_tasks(&group, &states, "pending"),
            TaskVerdict::NotStarted
        );

        states.insert("server".into(), state("running", 5));
        let mut init = state("dead", 2);
        init.finished_at = Timestamp::from_unix_nanos(3);
        states.insert("init".into(), init);
        // A prestart task that finished is fine.
        assert_eq!(
            judge_tasks(&group, &states, "running"),
            TaskVerdict::Started(Timestamp::from_unix_nanos(5))
        );

        let mut dead = state("dead", 5);
        dead.finished_at = Timestamp::from_unix_nanos(6);
        states.insert("server".into(), dead);
        assert_eq!(
            judge_tasks(&group, &states, "running"),
            TaskVerdict::Unhealthy {
                from_alloc_failure: false
            }
        );

        states.insert("server".into(), state("running", 5));
        assert_eq!(
            judge_tasks(&group, &states, "failed"),
            TaskVerdict::Unhealthy {
                from_alloc_failure: true
            }
        );
    }

    #[test]
    fn checks_pass_by_on_update() {
        let result = |status: &str| CheckQueryResult {
            status: status.into(),
            ..CheckQueryResult::default()
        };
        let watched = |on_update: &str| {
            vec![WatchedCheck {
                id: "c".into(),
                on_update: on_update.into(),
            }]
        };
        let results = |status: &str| BTreeMap::from([("c".to_string(), result(status))]);
        assert!(checks_pass(
            &watched("require_healthy"),
            &results("success")
        ));
        assert!(!checks_pass(
            &watched("require_healthy"),
            &results("warning")
        ));
        assert!(checks_pass(
            &watched("ignore_warnings"),
            &results("warning")
        ));
        assert!(!checks_pass(
            &watched("ignore_warnings"),
            &results("failure")
        ));
        assert!(checks_pass(&watched("ignore"), &results("failure")));
        assert!(!checks_pass(&watched("ignore"), &results("pending")));
        assert!(!checks_pass(&watched("require_healthy"), &BTreeMap::new()));
    }
}
