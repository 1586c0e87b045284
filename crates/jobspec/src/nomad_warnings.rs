//! Nomad's own job warnings (its `Job.Warnings`): deprecated things a job may still use, which a
//! register, a plan and a validation answer in `Warnings` and register anyway. Each group's
//! warnings come as one `Group "<name>" has warnings: …` entry, a task's nested inside it as
//! `Task "<name>" has warnings: …`, in Nomad's multi-error text.
//!
//! Not here: the support table's notes on what runs differently here (`support`), which follow
//! these in the same `Warnings` text.

use drover_structs::{Job, Task, TaskGroup};

/// Nomad's warning for a task that still asks for a network of its own.
pub const TASK_NETWORK_DEPRECATED: &str = "task network resources have been deprecated as of Nomad 0.12.0. Please configure networking via group network block.";

/// Nomad's warning for a task's `iops`.
pub const IOPS_DEPRECATED: &str =
    "IOPS has been deprecated as of Nomad 0.9.0. Please remove IOPS from resource block.";

/// Nomad's warning for `mbits` in a group's network.
pub const GROUP_MBITS_DEPRECATED: &str =
    "mbits has been deprecated as of Nomad 0.12.0. Please remove mbits from the network block";

/// The warnings Nomad's `Job.Warnings` gives `job`, one entry per group that has any.
pub fn job_warnings(job: &Job) -> Vec<String> {
    job.task_groups
        .iter()
        .filter_map(|group| {
            let warnings = group_warnings(group);
            (!warnings.is_empty()).then(|| {
                format!(
                    "Group {:?} has warnings: {}",
                    group.name,
                    multi_error_text(&warnings)
                )
            })
        })
        .collect()
}

fn group_warnings(group: &TaskGroup) -> Vec<String> {
    let mut warnings = Vec::new();
    if group
        .networks
        .first()
        .is_some_and(|network| network.mbits > 0)
    {
        warnings.push(GROUP_MBITS_DEPRECATED.to_string());
    }
    for task in &group.tasks {
        let task_warnings = task_warnings(task);
        if !task_warnings.is_empty() {
            warnings.push(format!(
                "Task {:?} has warnings: {}",
                task.name,
                multi_error_text(&task_warnings)
            ));
        }
    }
    warnings
}

fn task_warnings(task: &Task) -> Vec<String> {
    let mut warnings = Vec::new();
    if let Some(resources) = task.resources.as_ref() {
        if resources.iops != 0 {
            warnings.push(IOPS_DEPRECATED.to_string());
        }
        if !resources.networks.is_empty() {
            warnings.push(TASK_NETWORK_DEPRECATED.to_string());
        }
    }
    warnings
}

/// Go's multi-error text: `1 error occurred:\n\t* one\n\n`, or `2 errors occurred:\n\t* one\n\t*
/// two\n\n`.
fn multi_error_text(errors: &[String]) -> String {
    let points: Vec<String> = errors.iter().map(|error| format!("* {error}")).collect();
    if errors.len() == 1 {
        format!("1 error occurred:\n\t{}\n\n", points.join(""))
    } else {
        format!(
            "{} errors occurred:\n\t{}\n\n",
            errors.len(),
            points.join("\n\t")
        )
    }
}

#[cfg(test)]
mod tests {
    use drover_structs::{NetworkResource, Port, Resources};

    use super::*;

    fn task_with_network(name: &str) -> Task {
        Task {
            name: name.to_string(),
            resources: Some(Resources {
                networks: vec![NetworkResource {
                    dynamic_ports: vec![Port {
                        label: "http".to_string(),
                        ..Port::default()
                    }],
                    ..NetworkResource::default()
                }],
                ..Resources::default()
            }),
            ..Task::default()
        }
    }

    #[test]
    fn a_task_network_warns_nested_in_its_group_as_nomad_words_it() {
        let job = Job {
            task_groups: vec![TaskGroup {
                name: "web".to_string(),
                tasks: vec![task_with_network("server"), Task::default()],
                ..TaskGroup::default()
            }],
            ..Job::default()
        };
        assert_eq!(
            job_warnings(&job),
            vec![format!(
                "Group \"web\" has warnings: 1 error occurred:\n\t* Task \"server\" has warnings: \
                 1 error occurred:\n\t* {TASK_NETWORK_DEPRECATED}\n\n\n\n"
            )]
        );
    }

    #[test]
    fn two_warnings_of_one_task_are_listed_together() {
        let mut task = task_with_network("server");
        if let Some(resources) = task.resources.as_mut() {
            resources.iops = 10;
        }
        let group = TaskGroup {
            name: "web".to_string(),
            tasks: vec![task],
            ..TaskGroup::default()
        };
        assert_eq!(
            group_warnings(&group),
            vec![format!(
                "Task \"server\" has warnings: 2 errors occurred:\n\t* {IOPS_DEPRECATED}\n\t* \
                 {TASK_NETWORK_DEPRECATED}\n\n"
            )]
        );
        assert!(job_warnings(&Job::default()).is_empty());
    }
}
