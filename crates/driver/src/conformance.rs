//! One conformance suite run against every driver: what the client relies on, whatever the
//! driver. Each driver's tests call [`run_conformance_suite`] with a way to build a task for each
//! [`Scenario`].
//!
//! Not for: driver-specific behaviour (isolation, cgroups, log rotation); those have their own
//! tests.

use std::time::Duration;

use crate::{Driver, DriverError, TaskLaunch};

/// What the task built for a check must do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// Exit by itself, soon, with this code.
    ExitWith(i32),
    /// Run until killed (and die on the kill signal).
    RunUntilKilled,
}

/// Runs every check; `make_task(scenario, name)` builds a task with a unique `task_id` per name.
/// Returns the first failed check, by name.
pub async fn run_conformance_suite(
    driver: &dyn Driver,
    make_task: &(dyn Fn(Scenario, &str) -> TaskLaunch + Sync),
) -> Result<(), String> {
    exit_code_is_reported_to_wait_and_status(driver, make_task)
        .await
        .map_err(|error| format!("exit_code_is_reported_to_wait_and_status: {error}"))?;
    kill_ends_a_running_task(driver, make_task)
        .await
        .map_err(|error| format!("kill_ends_a_running_task: {error}"))?;
    Ok(())
}

fn check(condition: bool, what: &str) -> Result<(), String> {
    if condition {
        Ok(())
    } else {
        Err(what.to_string())
    }
}

async fn exit_code_is_reported_to_wait_and_status(
    driver: &dyn Driver,
    make_task: &(dyn Fn(Scenario, &str) -> TaskLaunch + Sync),
) -> Result<(), String> {
    let task = make_task(Scenario::ExitWith(3), "exits");
    let handle = driver.start(&task).await.map_err(|e| e.to_string())?;
    check(
        handle.driver == driver.name(),
        "the handle names its driver",
    )?;
    check(handle.task_id == task.task_id, "the handle names its task")?;
    let exit = driver.wait(&handle).await.map_err(|e| e.to_string())?;
    check(
        exit.exit_code == 3 && exit.signal == 0,
        "wait reports exit code 3",
    )?;
    let status = driver
        .exit_status(&handle)
        .await
        .map_err(|e| e.to_string())?;
    check(status == Some(exit), "exit_status agrees with wait")?;
    check(
        driver.wait(&handle).await.map_err(|e| e.to_string())? == exit,
        "a second wait returns the same exit",
    )?;
    driver.destroy(&handle).await.map_err(|e| e.to_string())?;
    driver
        .destroy(&handle)
        .await
        .map_err(|e| format!("destroy is not idempotent: {e}"))?;
    Ok(())
}

async fn kill_ends_a_running_task(
    driver: &dyn Driver,
    make_task: &(dyn Fn(Scenario, &str) -> TaskLaunch + Sync),
) -> Result<(), String> {
    let task = make_task(Scenario::RunUntilKilled, "killed");
    let handle = driver.start(&task).await.map_err(|e| e.to_string())?;
    driver.recover(&handle).await.map_err(|e| e.to_string())?;
    check(
        driver
            .exit_status(&handle)
            .await
            .map_err(|e| e.to_string())?
            .is_none(),
        "a running task has no exit status",
    )?;
    check(
        matches!(
            driver.signal(&handle, "SIGBOGUS").await,
            Err(DriverError::UnknownSignal(_))
        ),
        "an unknown signal is refused",
    )?;
    let exit = driver
        .kill(&handle, Some("SIGTERM"), Duration::from_secs(10))
        .await
        .map_err(|e| e.to_string())?;
    // A shim reports the signal; a container engine reports it, as Nomad's docker driver
    // shows it, as exit code 128 + the signal.
    check(
        exit.signal != 0 || exit.exit_code > 128,
        "a killed task reports the signal (or exit code 128 + signal)",
    )?;
    check(
        driver.wait(&handle).await.map_err(|e| e.to_string())? == exit,
        "wait after kill returns the kill's exit",
    )?;
    driver.destroy(&handle).await.map_err(|e| e.to_string())?;
    Ok(())
}
