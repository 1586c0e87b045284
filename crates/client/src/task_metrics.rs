//! Nomad's task counters, counted by the task runner as its task changes state:
//! `nomad.client.allocs.running` (the task turned running), `complete` and `failed` (it turned
//! dead), `restart` (a `Restarting` event) and `oom_killed` (a `Terminated` event of an OOM
//! kill), each with the labels Nomad's task runner puts on them ([`task_labels`]). The agent's
//! metrics registry implements [`TaskCounters`].
//!
//! Not here: keeping or publishing the counts (the agent), usage gauges.

use drover_structs::{
    Allocation, DETAIL_OOM_KILLED, TASK_RESTARTING, TASK_STATE_DEAD, TASK_STATE_RUNNING,
    TASK_TERMINATED, TaskEvent, TaskState,
};

/// Where task runners count.
pub trait TaskCounters: Send + Sync + std::fmt::Debug {
    /// Adds one to the counter `name` of the series `labels`.
    fn increment(&self, name: &'static str, labels: &[(&'static str, &str)]);
}

/// Nomad's task runner `baseLabels`: job (name), task group, alloc ID, task and namespace,
/// and for a child job its parent and its dispatch or periodic ID.
pub fn task_labels(alloc: &Allocation, task: &str) -> Vec<(&'static str, String)> {
    let job = alloc.job.as_deref();
    let job_name = job.map_or(alloc.job_id.as_str(), |job| job.name.as_str());
    let mut labels = vec![
        ("job", job_name.to_owned()),
        ("task_group", alloc.task_group.clone()),
        ("alloc_id", alloc.id.clone()),
        ("task", task.to_owned()),
        ("namespace", alloc.namespace.clone()),
    ];
    if let Some(job) = job.filter(|job| !job.parent_id.is_empty()) {
        labels.push(("parent_id", job.parent_id.clone()));
        if let Some((_, id)) = job.name.split_once("/dispatch-") {
            labels.push(("dispatch_id", id.to_owned()));
        }
        if let Some((_, id)) = job.name.split_once("/periodic-") {
            labels.push(("periodic_id", id.to_owned()));
        }
    }
    labels
}

/// The counters one state change counts, as Nomad's task runner does in `UpdateState`:
/// `previous_state` is the Nomad task state before it, `state` the task state after it (with
/// `event` applied), `event` the event it recorded.
pub fn counted(
    previous_state: &str,
    state: &TaskState,
    event: Option<&TaskEvent>,
) -> Vec<&'static str> {
    let mut names = Vec::new();
    if let Some(event) = event {
        if event.r#type == TASK_RESTARTING {
            names.push("nomad.client.allocs.restart");
        }
        if event.r#type == TASK_TERMINATED
            && event
                .details
                .get(DETAIL_OOM_KILLED)
                .is_some_and(|value| value == "true")
        {
            names.push("nomad.client.allocs.oom_killed");
        }
    }
    if state.state != previous_state {
        if state.state == TASK_STATE_RUNNING {
            names.push("nomad.client.allocs.running");
        } else if state.state == TASK_STATE_DEAD {
            names.push(if state.failed {
                "nomad.client.allocs.failed"
            } else {
                "nomad.client.allocs.complete"
            });
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(name: &str, failed: bool) -> TaskState {
        TaskState {
            state: name.to_owned(),
            failed,
            ..TaskState::default()
        }
    }

    #[test]
    fn state_changes_count_as_nomad_counts_them() {
        assert_eq!(
            counted("pending", &state("running", false), None),
            vec!["nomad.client.allocs.running"]
        );
        assert!(counted("running", &state("running", false), None).is_empty());
        assert_eq!(
            counted("running", &state("dead", true), None),
            vec!["nomad.client.allocs.failed"]
        );
        assert_eq!(
            counted("running", &state("dead", false), None),
            vec!["nomad.client.allocs.complete"]
        );
        let restarting = TaskEvent::new(TASK_RESTARTING, 1);
        assert_eq!(
            counted("running", &state("pending", false), Some(&restarting)),
            vec!["nomad.client.allocs.restart"]
        );
        let oom = TaskEvent::new(TASK_TERMINATED, 1).with_oom_killed(true);
        assert_eq!(
            counted("running", &state("running", false), Some(&oom)),
            vec!["nomad.client.allocs.oom_killed"]
        );
        let exited = TaskEvent::new(TASK_TERMINATED, 1).with_oom_killed(false);
        assert!(counted("running", &state("running", false), Some(&exited)).is_empty());
    }

    #[test]
    fn a_dispatched_child_carries_its_parent_and_dispatch_id() {
        let mut job = drover_structs::Job {
            name: "batch/dispatch-1700-abc".to_owned(),
            parent_id: "batch".to_owned(),
            ..drover_structs::Job::default()
        };
        let mut alloc = Allocation {
            id: "a1".to_owned(),
            task_group: "g".to_owned(),
            namespace: "default".to_owned(),
            job: Some(std::sync::Arc::new(job.clone())),
            ..Allocation::default()
        };
        let labels = task_labels(&alloc, "t");
        assert!(
            labels.contains(&("parent_id", "batch".to_owned())),
            "{labels:?}"
        );
        assert!(
            labels.contains(&("dispatch_id", "1700-abc".to_owned())),
            "{labels:?}"
        );
        assert_eq!(labels[0], ("job", "batch/dispatch-1700-abc".to_owned()));
        job.parent_id.clear();
        alloc.job = Some(std::sync::Arc::new(job));
        assert_eq!(task_labels(&alloc, "t").len(), 5);
    }
}
