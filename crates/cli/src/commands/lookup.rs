//! Finding things the way Nomad's CLI does: a job or an allocation by ID or unique prefix (with the
//! candidates listed when a prefix is ambiguous), and the task names of an allocation.

use drover_api::client::ApiClient;
use drover_structs::{AllocListStub, Allocation, JobListStub};

use crate::commands::describe;
use crate::format::{date_from_unix_nanos, short_id};
use crate::{Io, columnize};

/// Nomad's `sanitizeUUIDPrefix`: an odd number of hex digits loses its last character.
pub(crate) fn sanitize_uuid_prefix(prefix: &str) -> &str {
    let digits = prefix.chars().filter(|character| *character != '-').count();
    if digits == 1 || digits % 2 == 0 {
        prefix
    } else {
        &prefix[..prefix.len() - prefix.chars().last().map_or(0, char::len_utf8)]
    }
}

fn stub_table(allocations: &[AllocListStub]) -> String {
    let mut rows = vec![
        [
            "ID",
            "Eval ID",
            "Job ID",
            "Task Group",
            "Desired Status",
            "Client Status",
        ]
        .iter()
        .map(|cell| (*cell).to_string())
        .collect::<Vec<_>>(),
    ];
    for allocation in allocations {
        rows.push(vec![
            short_id(&allocation.id, false),
            short_id(&allocation.eval_id, false),
            allocation.job_id.clone(),
            allocation.task_group.clone(),
            allocation.desired_status.clone(),
            allocation.client_status.clone(),
        ]);
    }
    columnize::columns(&rows)
}

/// Resolves an ID or prefix to one full allocation.
pub async fn resolve_allocation(
    client: &ApiClient,
    io: &mut Io<'_>,
    prefix: &str,
) -> Option<Allocation> {
    if prefix.len() == 1 {
        io.error("Identifier must contain at least two characters.");
        return None;
    }
    let candidates = match client.allocations(prefix).await {
        Ok(candidates) => candidates,
        Err(error) => {
            io.error(describe("querying allocation", &error));
            return None;
        }
    };
    let chosen = match candidates.as_slice() {
        [] => {
            io.error(format!(
                "No allocation(s) with prefix or id \"{prefix}\" found"
            ));
            return None;
        }
        [only] => only.id.clone(),
        many => match many.iter().find(|candidate| candidate.id == prefix) {
            Some(exact) => exact.id.clone(),
            None => {
                io.error(format!(
                    "Prefix matched multiple allocations\n\n{}",
                    stub_table(many)
                ));
                return None;
            }
        },
    };
    match client.allocation(&chosen).await {
        Ok(allocation) => Some(allocation),
        Err(error) => {
            io.error(describe("querying allocation", &error));
            None
        }
    }
}

/// The allocation `argument` names for `alloc exec|logs|fs`: with `job`, one allocation of the
/// job the argument names (of `group` when given), as Nomad's CLI picks it; otherwise the
/// allocation of that ID or prefix. `group` without `job` is refused: it would pick nothing.
pub async fn resolve_allocation_or_job(
    client: &ApiClient,
    io: &mut Io<'_>,
    argument: &str,
    job: bool,
    group: Option<&str>,
) -> Option<Allocation> {
    let group = group.filter(|group| !group.is_empty());
    if !job {
        if group.is_some() {
            io.error("-group picks an allocation of a job: it needs -job");
            return None;
        }
        return resolve_allocation(client, io, argument).await;
    }
    let job_id = resolve_job(client, io, argument).await?;
    match random_job_allocation(client, &job_id, group).await {
        Ok(alloc_id) => resolve_allocation(client, io, &alloc_id).await,
        Err(message) => {
            io.error(format!("Error fetching allocations: {message}"));
            None
        }
    }
}

/// One allocation of the job (of its task `group` when given), a running one when any runs,
/// else any of them, as Nomad's CLI picks it.
pub async fn random_job_allocation(
    client: &ApiClient,
    job_id: &str,
    group: Option<&str>,
) -> Result<String, String> {
    let allocations = client
        .job_allocations(job_id, false)
        .await
        .map_err(|error| format!("error querying job {job_id:?}: {error}"))?;
    if allocations.is_empty() {
        return Err(format!(
            "job {job_id:?} doesn't exist or it has no allocations"
        ));
    }
    let candidates: Vec<_> = allocations
        .iter()
        .filter(|allocation| group.is_none_or(|group| allocation.task_group == group))
        .collect();
    if let Some(group) = group
        && candidates.is_empty()
    {
        return Err(format!(
            "task group {group:?} doesn't exist or it has no allocations"
        ));
    }
    let running: Vec<_> = candidates
        .iter()
        .copied()
        .filter(|allocation| allocation.client_status == "running")
        .collect();
    let pool = if running.is_empty() {
        candidates
    } else {
        running
    };
    // Any allocation of the pool will do; the clock's nanoseconds spread the choice.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.subsec_nanos());
    let index = usize::try_from(nanos).unwrap_or(0) % pool.len().max(1);
    pool.get(index)
        .map(|allocation| allocation.id.clone())
        .ok_or_else(|| format!("job {job_id:?} has no allocations"))
}

/// The task names of an allocation's group, in the job's order.
pub fn task_names(allocation: &Allocation) -> Vec<String> {
    let from_job: Vec<String> = allocation
        .job
        .as_deref()
        .into_iter()
        .flat_map(|job| job.task_groups.iter())
        .filter(|group| group.name == allocation.task_group)
        .flat_map(|group| group.tasks.iter().map(|task| task.name.clone()))
        .collect();
    if from_job.is_empty() {
        allocation.task_states.keys().cloned().collect()
    } else {
        from_job
    }
}

/// Finds the one job an ID or prefix names; prints Nomad's messages otherwise.
pub async fn resolve_job(client: &ApiClient, io: &mut Io<'_>, prefix: &str) -> Option<String> {
    let jobs = match client.jobs(prefix).await {
        Ok(jobs) => jobs,
        Err(error) => {
            io.error(describe("querying jobs", &error));
            return None;
        }
    };
    if let Some(exact) = jobs.iter().find(|job| job.id == prefix) {
        return Some(exact.id.clone());
    }
    match jobs.as_slice() {
        [] => {
            io.error(format!("No job(s) with prefix or id \"{prefix}\" found"));
            None
        }
        [only] => Some(only.id.clone()),
        many => {
            io.error(format!(
                "Prefix matched multiple jobs\n\n{}",
                job_list_table(many)
            ));
            None
        }
    }
}

/// A job's type as Nomad's job list shows it: `batch/periodic`, `batch/parameterized`.
fn job_type_text(job: &JobListStub) -> String {
    let mut text = job.r#type.clone();
    if job.periodic {
        text.push_str("/periodic");
    }
    if job.parameterized_job {
        text.push_str("/parameterized");
    }
    text
}

/// A job's status as Nomad's job list shows it: `dead (stopped)` for a stopped job.
fn job_status_text(job: &JobListStub) -> String {
    if job.stop {
        format!("{} (stopped)", job.status)
    } else {
        job.status.clone()
    }
}

pub fn job_list_table(jobs: &[JobListStub]) -> String {
    let mut rows = vec![
        ["ID", "Type", "Priority", "Status", "Submit Date"]
            .iter()
            .map(|cell| (*cell).to_string())
            .collect::<Vec<_>>(),
    ];
    for job in jobs {
        rows.push(vec![
            job.id.clone(),
            job_type_text(job),
            job.priority.to_string(),
            job_status_text(job),
            date_from_unix_nanos(job.submit_time),
        ]);
    }
    columnize::columns(&rows)
}

#[cfg(test)]
mod prefix_tests {
    use super::sanitize_uuid_prefix;

    #[test]
    fn an_odd_prefix_loses_its_last_digit() {
        assert_eq!(sanitize_uuid_prefix("abc"), "ab");
        assert_eq!(sanitize_uuid_prefix("ab"), "ab");
        assert_eq!(sanitize_uuid_prefix("a"), "a");
        assert_eq!(sanitize_uuid_prefix("abcd-e"), "abcd-");
    }
}
