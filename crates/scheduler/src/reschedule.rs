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
    next_reschedule_time_from(alloc, policy, fail_time)
}

/// When an allocation that stopped counting at `fail_time` may be replaced under its
/// reschedule policy, whatever its status (Nomad's `NextRescheduleTimeByTime`, which the
/// disconnect rules use with the time its node disconnected).
pub fn next_reschedule_time_at(alloc: &Allocation, fail_time: i64) -> Option<i64> {
    let policy = reschedule_policy(alloc)?;
    next_reschedule_time_from(alloc, policy, fail_time)
}

fn next_reschedule_time_from(
    alloc: &Allocation,
    policy: &ReschedulePolicy,
    fail_time: i64,
) -> Option<i64> {
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

    fn job_with_policy(policy: ReschedulePolicy) -> drover_structs::Job {
        let mut job = JobBuilder::service("web")
            .group("g", 1)
            .task("t", "raw_exec")
            .build();
        job.task_groups[0].reschedule_policy = Some(policy);
        job
    }

    fn policy(function: &str, delay_secs: i64, max_secs: i64) -> ReschedulePolicy {
        ReschedulePolicy {
            attempts: 0,
            interval: DurationNs::ZERO,
            delay: DurationNs::from_secs(delay_secs),
            delay_function: function.to_string(),
            max_delay: DurationNs::from_secs(max_secs),
            unlimited: true,
        }
    }

    /// A tracker whose events had these delays, one a second apart from `start`.
    fn tracker(delays_secs: &[i64], start: i64) -> RescheduleTracker {
        RescheduleTracker {
            events: delays_secs
                .iter()
                .enumerate()
                .map(|(position, delay)| RescheduleEvent {
                    reschedule_time: start + position as i64 * SECOND,
                    delay: DurationNs::from_secs(*delay),
                    ..RescheduleEvent::default()
                })
                .collect(),
            last_reschedule: LAST_RESCHEDULE_SUCCESS.into(),
        }
    }

    fn delay_after(job: &drover_structs::Job, delays_secs: &[i64]) -> i64 {
        let mut alloc = failed_alloc(job);
        if !delays_secs.is_empty() {
            alloc.reschedule_tracker = Some(tracker(delays_secs, 99 * SECOND));
        }
        next_delay(&alloc) / SECOND
    }

    #[test]
    fn constant_delay_never_grows() {
        let job = job_with_policy(policy(drover_structs::RESCHEDULE_DELAY_CONSTANT, 5, 0));
        assert_eq!(delay_after(&job, &[]), 5);
        assert_eq!(delay_after(&job, &[5]), 5);
        assert_eq!(delay_after(&job, &[5, 5, 5]), 5);
    }

    #[test]
    fn exponential_delay_doubles_up_to_the_cap() {
        let job = job_with_policy(policy(drover_structs::RESCHEDULE_DELAY_EXPONENTIAL, 5, 60));
        assert_eq!(delay_after(&job, &[]), 5);
        assert_eq!(delay_after(&job, &[5]), 10);
        assert_eq!(delay_after(&job, &[5, 10]), 20);
        assert_eq!(delay_after(&job, &[5, 10, 20, 40]), 60, "capped");
    }

    #[test]
    fn fibonacci_delay_adds_the_last_two_up_to_the_cap() {
        let job = job_with_policy(policy(drover_structs::RESCHEDULE_DELAY_FIBONACCI, 5, 60));
        assert_eq!(delay_after(&job, &[]), 5);
        assert_eq!(delay_after(&job, &[5]), 5);
        assert_eq!(delay_after(&job, &[5, 5]), 10);
        assert_eq!(delay_after(&job, &[5, 5, 10]), 15);
        assert_eq!(delay_after(&job, &[5, 5, 10, 15]), 25);
        assert_eq!(delay_after(&job, &[10, 15, 25, 40]), 60, "capped");
        // After a reset to the base delay, a new series starts.
        assert_eq!(delay_after(&job, &[60, 5]), 5);
    }

    #[test]
    fn a_capped_delay_resets_once_the_allocation_ran_longer_than_the_cap() {
        let job = job_with_policy(policy(drover_structs::RESCHEDULE_DELAY_EXPONENTIAL, 5, 60));
        let mut alloc = failed_alloc(&job);
        // Rescheduled at 99 s with a 40 s delay; failed again at 100 s: capped at 60 s.
        alloc.reschedule_tracker = Some(tracker(&[40], 99 * SECOND));
        assert_eq!(next_delay(&alloc), 60 * SECOND);
        // Failed 2 minutes after that reschedule: longer than the cap, back to the base.
        alloc.modify_time = 220 * SECOND;
        assert_eq!(next_delay(&alloc), 5 * SECOND);
    }

    #[test]
    fn attempts_count_only_inside_the_interval() {
        let mut limited = policy(drover_structs::RESCHEDULE_DELAY_CONSTANT, 1, 0);
        limited.attempts = 2;
        limited.unlimited = false;
        limited.interval = DurationNs::from_secs(3600);
        let job = job_with_policy(limited);
        let mut alloc = failed_alloc(&job);
        assert_eq!(
            next_reschedule_time(&alloc),
            Some(101 * SECOND),
            "first failure"
        );
        // Reschedules at 400 s and 2200 s, a failure at 4000 s: only the later one is inside
        // the hour.
        alloc.modify_time = 4000 * SECOND;
        alloc.reschedule_tracker = Some(RescheduleTracker {
            events: [400, 2200]
                .iter()
                .map(|at| RescheduleEvent {
                    reschedule_time: at * SECOND,
                    delay: DurationNs::from_secs(1),
                    ..RescheduleEvent::default()
                })
                .collect(),
            last_reschedule: LAST_RESCHEDULE_SUCCESS.into(),
        });
        assert_eq!(
            reschedule_attempts(&alloc, reschedule_policy(&alloc).unwrap(), 4000 * SECOND),
            (1, 2),
            "the one at 400 s fell out of the hour before 4000 s"
        );
        assert_eq!(next_reschedule_time(&alloc), Some(4001 * SECOND));
        alloc.modify_time = 3000 * SECOND;
        assert_eq!(next_reschedule_time(&alloc), None, "both inside the hour");
        // A delay as long as the interval is never eligible.
        let mut long = policy(drover_structs::RESCHEDULE_DELAY_CONSTANT, 3600, 0);
        long.attempts = 2;
        long.unlimited = false;
        long.interval = DurationNs::from_secs(3600);
        let mut alloc = failed_alloc(&job_with_policy(long));
        alloc.reschedule_tracker = Some(tracker(&[3600], 0));
        assert_eq!(next_reschedule_time(&alloc), None);
    }

    #[test]
    fn unlimited_reschedules_keep_the_last_few_events() {
        let job = job_with_policy(policy(drover_structs::RESCHEDULE_DELAY_CONSTANT, 1, 0));
        let mut alloc = failed_alloc(&job);
        alloc.reschedule_tracker = Some(tracker(&[1; 8], 0));
        assert!(next_reschedule_time(&alloc).is_some());
        let next = replacement_tracker(&alloc, 500 * SECOND);
        assert_eq!(next.events.len(), MAX_PAST_RESCHEDULE_EVENTS + 1);
        assert_eq!(next.events.last().unwrap().prev_alloc_id, "a1");
    }
}
