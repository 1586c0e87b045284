//! Reschedule policy arithmetic: when a failed allocation may be replaced (now, later, or never),
//! the delay before it, and the tracker carried from an allocation to its replacement.
//!
//! Times are Unix nanoseconds; 0 stands for "unset" (Go's zero time).
//!
//! Not here: choosing the replacement's node (`generic`).

use drover_structs::{Allocation, RescheduleEvent, ReschedulePolicy, RescheduleTracker};

/// An allocation due within this window is rescheduled now rather than by a delayed evaluation.
pub const RESCHEDULE_WINDOW_NANOS: i64 = 1_000_000_000;
/// Allocations due within this window of each other share one delayed evaluation.
pub const BATCHED_FAILED_ALLOC_WINDOW_NANOS: i64 = 5_000_000_000;
/// With unlimited rescheduling, only the last few events are carried forward.
pub const MAX_PAST_RESCHEDULE_EVENTS: usize = 5;

/// `RescheduleTracker.LastReschedule` after a replacement was placed.
pub const LAST_RESCHEDULE_SUCCESS: &str = "ok";
/// `RescheduleTracker.LastReschedule` after no node could take the replacement.
pub const LAST_RESCHEDULE_FAILED_TO_PLACE: &str = "no placement";

/// The reschedule policy of the allocation's group, in the job version it runs.
pub fn reschedule_policy(alloc: &Allocation) -> Option<&ReschedulePolicy> {
    alloc
        .job
        .as_deref()?
        .lookup_task_group(&alloc.task_group)?
        .reschedule_policy
        .as_ref()
}

/// When the allocation last changed: the latest task finish time, else its modify time.
pub fn last_event_time(alloc: &Allocation) -> i64 {
    let latest_finish = alloc
        .task_states
        .values()
        .filter_map(|state| state.finished_at.unix_nanos())
        .max();
    latest_finish.unwrap_or(alloc.modify_time)
}

/// Whether every task of the allocation ran and finished without failing.
pub fn ran_successfully(alloc: &Allocation) -> bool {
    !alloc.task_states.is_empty() && alloc.task_states.values().all(|state| state.successful())
}

/// Whether the last attempt to reschedule the allocation found no node.
pub fn last_reschedule_failed(alloc: &Allocation) -> bool {
    alloc.reschedule_tracker.as_ref().is_some_and(|tracker| {
        !tracker.last_reschedule.is_empty() && tracker.last_reschedule != LAST_RESCHEDULE_SUCCESS
    })
}

fn tracker_events(alloc: &Allocation) -> &[RescheduleEvent] {
    alloc
        .reschedule_tracker
        .as_ref()
        .map_or(&[], |tracker| tracker.events.as_slice())
}

/// The delay before the next replacement: the policy's delay, grown by its delay function
/// (`exponential`, `fibonacci`) over earlier attempts, capped by `MaxDelay` (and reset to the
/// base delay once the allocation ran longer than the cap).
pub fn next_delay(alloc: &Allocation) -> i64 {
    let Some(policy) = reschedule_policy(alloc) else {
        return 0;
    };
    let base = policy.delay.as_nanos();
    let events = tracker_events(alloc);
    let Some(last) = events.last() else {
        return base;
    };
    let mut delay = match policy.delay_function.as_str() {
        drover_structs::RESCHEDULE_DELAY_EXPONENTIAL => last.delay.as_nanos().saturating_mul(2),
        drover_structs::RESCHEDULE_DELAY_FIBONACCI => {
            if events.len() >= 2 {
                let previous = events[events.len() - 2].delay.as_nanos();
                let latest = last.delay.as_nanos();
                if previous == policy.max_delay.as_nanos() && latest == base {
                    latest
                } else {
                    latest.saturating_add(previous)
                }
            } else {
                base
            }
        }
        _ => return base,
    };
    let max_delay = policy.max_delay.as_nanos();
    if max_delay > 0 && delay > max_delay {
        delay = max_delay;
        if last_event_time(alloc).saturating_sub(last.reschedule_time) > delay {
            delay = base;
        }
    }
    delay
}

/// How many reschedules happened within the policy's interval before `fail_time`, and how many
/// the policy allows.
pub fn reschedule_attempts(
    alloc: &Allocation,
    policy: &ReschedulePolicy,
    fail_time: i64,
) -> (i64, i64) {
    let mut attempted = 0;
    if policy.attempts > 0 {
        for event in tracker_events(alloc).iter().rev() {
            if fail_time.saturating_sub(event.reschedule_time) < policy.interval.as_nanos() {
                attempted += 1;
            }
        }
    }
    (attempted, policy.attempts)
}

/// When the failed allocation may be replaced, and whether the policy allows it at all.
pub fn next_reschedule_time(alloc: &Allocation) -> Option<i64> {
    let policy = reschedule_policy(alloc)?;
    if policy.attempts == 0 && !policy.unlimited {
        return None;
    }
    let fail_time = last_event_time(alloc);
    let is_rescheduled_batch = alloc.job_type() == drover_structs::JOB_TYPE_BATCH
        && alloc.desired_transition.should_reschedule();
    let failed_or_lost = alloc.client_status
        == drover_structs::task_state::ALLOC_CLIENT_STATUS_FAILED
        || alloc.client_status == drover_structs::task_state::ALLOC_CLIENT_STATUS_LOST;
    if (alloc.desired_status == drover_structs::ALLOC_DESIRED_STATUS_STOP
        && !last_reschedule_failed(alloc))
        || (!is_rescheduled_batch && !failed_or_lost)
        || fail_time == 0
    {
        return None;
    }
    let delay = next_delay(alloc);
    let eligible = if policy.attempts > 0 && !tracker_events(alloc).is_empty() {
        let (attempted, allowed) = reschedule_attempts(alloc, policy, fail_time);
        attempted < allowed && delay < policy.interval.as_nanos()
    } else {
        policy.unlimited || policy.attempts > 0
    };
    eligible.then_some(fail_time.saturating_add(delay))
}

/// The tracker of a replacement for `previous`: earlier events still inside the policy's
/// interval (or the last few when unlimited) plus this reschedule.
pub fn replacement_tracker(previous: &Allocation, now_unix_nanos: i64) -> RescheduleTracker {
    let mut events: Vec<RescheduleEvent> = Vec::new();
    let earlier = tracker_events(previous);
    if let Some(policy) = reschedule_policy(previous) {
        if policy.attempts > 0 {
            let interval = policy.interval.as_nanos();
            events.extend(
                earlier
                    .iter()
                    .filter(|event| {
                        interval > 0
                            && now_unix_nanos.saturating_sub(event.reschedule_time) <= interval
                    })
                    .cloned(),
            );
        } else {
            let start = earlier.len().saturating_sub(MAX_PAST_RESCHEDULE_EVENTS);
            events.extend(earlier[start..].iter().cloned());
        }
    }
    events.push(RescheduleEvent {
        reschedule_time: now_unix_nanos,
        prev_alloc_id: previous.id.clone(),
        prev_node_id: previous.node_id.clone(),
        delay: drover_structs::DurationNs::from_nanos(next_delay(previous)),
    });
    RescheduleTracker {
        events,
        last_reschedule: LAST_RESCHEDULE_SUCCESS.to_string(),
    }
}

/// Marks the allocation's tracker with how its last reschedule went.
pub fn annotate_last_reschedule(alloc: &mut Allocation, outcome: &str) {
    alloc
        .reschedule_tracker
        .get_or_insert_with(RescheduleTracker::default)
        .last_reschedule = outcome.to_string();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{JobBuilder, NodeBuilder, running_alloc};
    use drover_structs::DurationNs;

    const SECOND: i64 = 1_000_000_000;

    fn failed_alloc(job: &drover_structs::Job) -> Allocation {
        let node = NodeBuilder::new("n1").build();
        let mut alloc = running_alloc("a1", job, "g", 0, &node);
        alloc.client_status = drover_structs::task_state::ALLOC_CLIENT_STATUS_FAILED.to_string();
        alloc.modify_time = 100 * SECOND;
        alloc
    }

    #[test]
    fn service_default_policy_reschedules_after_exponential_delay() {
        let job = JobBuilder::service("web")
            .group("g", 1)
            .task("t", "raw_exec")
            .build();
        let mut alloc = failed_alloc(&job);
        assert_eq!(next_reschedule_time(&alloc), Some(130 * SECOND));
        alloc.reschedule_tracker = Some(replacement_tracker(&alloc, 130 * SECOND));
        assert_eq!(next_delay(&alloc), 60 * SECOND, "exponential growth");
        alloc.reschedule_tracker = Some(RescheduleTracker {
            events: vec![RescheduleEvent {
                reschedule_time: 100 * SECOND,
                delay: DurationNs::from_mins(50),
                ..RescheduleEvent::default()
            }],
            last_reschedule: LAST_RESCHEDULE_SUCCESS.into(),
        });
        assert_eq!(next_delay(&alloc), 3600 * SECOND, "capped at max delay");
    }

    #[test]
    fn limited_attempts_run_out() {
        let job = JobBuilder::batch("b")
            .group("g", 1)
            .task("t", "raw_exec")
            .reschedule_attempts(1)
            .build();
        let mut alloc = failed_alloc(&job);
        assert_eq!(next_reschedule_time(&alloc), Some(100 * SECOND));
        alloc.reschedule_tracker = Some(replacement_tracker(&alloc, 90 * SECOND));
        assert_eq!(
            next_reschedule_time(&alloc),
            None,
            "the single attempt was used within the interval"
        );
        let job_without = JobBuilder::batch("b")
            .group("g", 1)
            .task("t", "raw_exec")
            .reschedule_attempts(0)
            .build();
        assert_eq!(next_reschedule_time(&failed_alloc(&job_without)), None);
    }

    #[test]
    fn running_and_stopped_allocs_are_not_rescheduled() {
        let job = JobBuilder::service("web")
            .group("g", 1)
            .task("t", "raw_exec")
            .build();
        let mut alloc = failed_alloc(&job);
        alloc.client_status = drover_structs::ALLOC_CLIENT_STATUS_RUNNING.into();
        assert_eq!(next_reschedule_time(&alloc), None);
        let mut stopped = failed_alloc(&job);
        stopped.desired_status = drover_structs::ALLOC_DESIRED_STATUS_STOP.into();
        assert_eq!(next_reschedule_time(&stopped), None);
    }
}
