//! How a deployment is shown (Nomad's `formatDeployment` and its groups table) and watched
//! until it is done (Nomad's deployment monitor), for `deployment status`, `job status` and
//! the monitor of `job run`. Not here: the deployment commands (`deployment`).

use std::time::Duration;

use drover_api::client::ApiClient;
use drover_structs::Deployment;

use crate::format::{date_from_timestamp, now_date, short_id};
use crate::{Io, columnize};

/// Nomad's `formatDeploymentGroups`: one row per group, with the optional columns only when
/// some group needs them.
pub fn deployment_groups_table(deployment: &Deployment) -> String {
    let states = &deployment.task_groups;
    let auto_revert = states.values().any(|state| state.auto_revert);
    let canaries = states.values().any(|state| state.desired_canaries > 0);
    let deadline = states.values().any(|state| state.progress_deadline.0 != 0);
    let mut header = vec!["Task Group"];
    if auto_revert {
        header.push("Auto Revert");
    }
    if canaries {
        header.push("Promoted");
    }
    header.push("Desired");
    if canaries {
        header.push("Canaries");
    }
    header.extend(["Placed", "Healthy", "Unhealthy"]);
    if deadline {
        header.push("Progress Deadline");
    }
    let mut rows = vec![header.iter().map(|cell| (*cell).to_string()).collect()];
    for (name, state) in states {
        let mut row = vec![name.clone()];
        if auto_revert {
            row.push(state.auto_revert.to_string());
        }
        if canaries {
            row.push(if state.desired_canaries > 0 {
                state.promoted.to_string()
            } else {
                "N/A".to_owned()
            });
        }
        row.push(state.desired_total.to_string());
        if canaries {
            row.push(state.desired_canaries.to_string());
        }
        row.push(state.placed_allocs.to_string());
        row.push(state.healthy_allocs.to_string());
        row.push(state.unhealthy_allocs.to_string());
        if deadline {
            row.push(if state.require_progress_by.is_zero() {
                "N/A".to_owned()
            } else {
                date_from_timestamp(state.require_progress_by)
            });
        }
        rows.push(row);
    }
    columnize::columns(&rows)
}

/// Nomad's `formatDeployment` (`deployment status`); `job status` leaves out the job lines.
pub fn deployment_text(deployment: &Deployment, verbose: bool, with_job: bool) -> String {
    let mut pairs = vec![("ID", short_id(&deployment.id, verbose))];
    if with_job {
        pairs.push(("Job ID", deployment.job_id.clone()));
        pairs.push(("Job Version", deployment.job_version.to_string()));
    }
    pairs.push(("Status", deployment.status.clone()));
    pairs.push(("Description", deployment.status_description.clone()));
    let mut text = columnize::key_values(&pairs);
    if deployment.task_groups.is_empty() {
        return text;
    }
    text.push_str("\n\nDeployed\n");
    text.push_str(&deployment_groups_table(deployment));
    text
}

/// Watches a deployment until it is done, printing it whenever it changes (Nomad's monitor
/// when standard output is not a terminal). A failed deployment with `auto_revert` is followed
/// by the job's next deployment, the rollback's.
/// How often the monitor prints an unchanged deployment again (the wait of Nomad's blocking
/// query).
const REPRINT_EVERY: Duration = Duration::from_secs(2);

pub async fn monitor_deployment(
    client: &ApiClient,
    io: &mut Io<'_>,
    deployment_id: &str,
    verbose: bool,
    prefix: &str,
) {
    // Nomad's prefixed UI puts its prefix before a message, not before each of its lines: a
    // frame starts with a line holding only the prefix.
    let prefixed = |text: String| -> String { format!("{prefix}{text}").trim_end().to_owned() };
    let poll = std::env::var("DROVER_MONITOR_INTERVAL_MS")
        .ok()
        .and_then(|text| text.parse::<u64>().ok())
        .map_or(Duration::from_secs(1), Duration::from_millis);
    let mut current = deployment_id.to_owned();
    let mut last_shown: Option<(Deployment, tokio::time::Instant)> = None;
    loop {
        let deployment = match client.deployment(&current).await {
            Ok(deployment) => deployment,
            Err(_) => {
                io.error(format!("{}: Error fetching deployment", now_date()));
                return;
            }
        };
        // A frame when the deployment changed, and every REPRINT_EVERY anyway, as Nomad's
        // monitor prints after each blocking query (which waits at most 2 s).
        let due = last_shown
            .as_ref()
            .is_none_or(|(shown, at)| *shown != deployment || at.elapsed() >= REPRINT_EVERY);
        if due {
            io.say(prefixed(format!(
                "\n{}\n{}",
                now_date(),
                deployment_text(&deployment, verbose, true)
            )));
            last_shown = Some((deployment.clone(), tokio::time::Instant::now()));
        }
        match deployment.status.as_str() {
            "failed" => {
                if deployment
                    .task_groups
                    .values()
                    .any(|state| state.auto_revert)
                {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    let rollback = client.job_latest_deployment(&deployment.job_id).await;
                    io.say(prefixed(String::new()));
                    match rollback {
                        Ok(Some(rollback)) if rollback.id != deployment.id => {
                            current = rollback.id;
                            last_shown = None;
                            continue;
                        }
                        Ok(_) => {}
                        Err(_) => io.error(format!(
                            "{}: Error fetching deployment of previous job version",
                            now_date()
                        )),
                    }
                }
                return;
            }
            "successful" | "cancelled" => return,
            _ => tokio::time::sleep(poll.min(REPRINT_EVERY)).await,
        }
    }
}
