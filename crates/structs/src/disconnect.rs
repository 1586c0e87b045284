//! What a group's `disconnect` block (or the older `max_client_disconnect`) means for its
//! allocations, and the allocation's `AllocStates` history the disconnect rules read: when it
//! last became `unknown`, whether it still has to reconnect, when it expires. After Nomad's
//! `Allocation.DisconnectTimeout`, `Expired`, `LastUnknown`, `NeedsToReconnect` and the
//! task group's `Replace` / `GetDisconnectLostAfter`.
//!
//! Not here: deciding what to do about a disconnected node (the scheduler and the server).

use serde_json::Value;

use crate::alloc::{ALLOC_CLIENT_STATUS_UNKNOWN, Allocation};
use crate::canonicalize::DEFAULT_KILL_TIMEOUT;
use crate::job::TaskGroup;
use crate::time::{DurationNs, Timestamp};

/// `AllocState.Field` of a client status transition.
pub const ALLOC_STATE_FIELD_CLIENT_STATUS: &str = "ClientStatus";

/// `disconnect { reconcile }` choices.
pub const RECONCILE_BEST_SCORE: &str = "best_score";
pub const RECONCILE_KEEP_ORIGINAL: &str = "keep_original";
pub const RECONCILE_KEEP_REPLACEMENT: &str = "keep_replacement";
pub const RECONCILE_LONGEST_RUNNING: &str = "longest_running";

impl TaskGroup {
    /// How long, in nanoseconds, an allocation of this group may stay `unknown` on a
    /// disconnected node before it is lost: `disconnect { lost_after }`, else the older
    /// `max_client_disconnect`; 0 when neither is set (lost at once).
    pub fn disconnect_lost_after_nanos(&self) -> i64 {
        match &self.disconnect {
            Some(disconnect) => disconnect.lost_after.0.max(0),
            None => self
                .max_client_disconnect
                .map_or(0, |duration| duration.0.max(0)),
        }
    }

    /// Whether an allocation on a disconnected node is replaced (Nomad 1.8's
    /// `TaskGroup.Replace`): not when the group sets `prevent_reschedule_on_lost`, the older
    /// name of `disconnect { replace = false }`; else `disconnect { replace }`, true by default.
    pub fn replace_on_disconnect(&self) -> bool {
        !self.prevent_reschedule_on_lost
            && self
                .disconnect
                .as_ref()
                .is_none_or(|disconnect| disconnect.replace)
    }

    /// How long a client that cannot reach its servers keeps this group's allocations
    /// running before it stops them itself: the older `stop_after_client_disconnect`, else
    /// `disconnect { stop_on_client_after }` (Nomad 1.8's `GetDisconnectStopTimeout`); `None`
    /// when neither is set or it is zero (never stopped).
    pub fn disconnect_stop_after(&self) -> Option<DurationNs> {
        self.stop_after_client_disconnect
            .or_else(|| {
                self.disconnect
                    .as_ref()
                    .and_then(|disconnect| disconnect.stop_on_client_after)
            })
            .filter(|duration| duration.as_nanos() > 0)
    }

    /// The reconcile strategy for a reconnecting allocation (`best_score` by default).
    pub fn disconnect_reconcile(&self) -> &str {
        match &self.disconnect {
            Some(disconnect) if !disconnect.reconcile.is_empty() => &disconnect.reconcile,
            _ => RECONCILE_BEST_SCORE,
        }
    }
}

/// An `AllocStates` entry: `{"Field", "Value", "Time"}`.
pub fn alloc_state(field: &str, value: &str, at_unix_nanos: i64) -> Value {
    serde_json::json!({
        "Field": field,
        "Value": value,
        "Time": Timestamp::from_unix_nanos(at_unix_nanos),
    })
}

fn client_status_states(alloc: &Allocation) -> impl DoubleEndedIterator<Item = (&str, i64)> {
    alloc.alloc_states.iter().filter_map(|state| {
        if state.get("Field")?.as_str()? != ALLOC_STATE_FIELD_CLIENT_STATUS {
            return None;
        }
        let value = state.get("Value")?.as_str()?;
        let time = state
            .get("Time")
            .and_then(|time| serde_json::from_value::<Timestamp>(time.clone()).ok())
            .and_then(Timestamp::unix_nanos)
            .unwrap_or(0);
        Some((value, time))
    })
}

impl Allocation {
    /// Records a client status transition in `AllocStates`.
    pub fn append_client_status_state(&mut self, client_status: &str, at_unix_nanos: i64) {
        self.alloc_states.push(alloc_state(
            ALLOC_STATE_FIELD_CLIENT_STATUS,
            client_status,
            at_unix_nanos,
        ));
    }

    /// When the allocation last turned `unknown` (the first of the latest run of `unknown`
    /// entries), if it did.
    pub fn last_unknown_unix_nanos(&self) -> Option<i64> {
        let mut last_unknown = None;
        for (value, time) in client_status_states(self).rev() {
            if value == ALLOC_CLIENT_STATUS_UNKNOWN {
                last_unknown = Some(time);
            } else if last_unknown.is_some() {
                break;
            }
        }
        last_unknown
    }

    /// Whether the latest client status transition the server recorded is `unknown`: the
    /// allocation was on a disconnected node and has not been reconnected yet.
    pub fn needs_to_reconnect(&self) -> bool {
        client_status_states(self)
            .rev()
            .find(|(value, _)| !value.is_empty())
            .is_some_and(|(value, _)| value == ALLOC_CLIENT_STATUS_UNKNOWN)
    }

    fn task_group(&self) -> Option<&TaskGroup> {
        self.job.as_deref()?.lookup_task_group(&self.task_group)
    }

    /// The group's `lost_after` in nanoseconds (0 without a job or group).
    pub fn disconnect_lost_after_nanos(&self) -> i64 {
        self.task_group()
            .map_or(0, TaskGroup::disconnect_lost_after_nanos)
    }

    /// When an allocation disconnected at `now` turns lost: `now` itself without `lost_after`.
    pub fn disconnect_timeout(&self, now_unix_nanos: i64) -> i64 {
        now_unix_nanos.saturating_add(self.disconnect_lost_after_nanos())
    }

    /// Whether an `unknown` allocation has been so for its whole `lost_after`.
    pub fn disconnect_expired(&self, now_unix_nanos: i64) -> bool {
        if self.client_status != ALLOC_CLIENT_STATUS_UNKNOWN || self.task_group().is_none() {
            return false;
        }
        let Some(last_unknown) = self.last_unknown_unix_nanos() else {
            return false;
        };
        last_unknown.saturating_add(self.disconnect_lost_after_nanos()) <= now_unix_nanos
    }

    /// Whether the group replaces this allocation while its node is disconnected.
    pub fn replace_on_disconnect(&self) -> bool {
        self.task_group()
            .is_none_or(TaskGroup::replace_on_disconnect)
    }

    /// The `lost_after` follow-up evaluation a client report of `client_status` makes
    /// needless: the allocation waited to reconnect and is now known to run or to have
    /// finished (Nomad's `FollowupEvalForReconnect`).
    pub fn followup_eval_for_reconnect(&self, client_status: &str) -> Option<String> {
        if !self.needs_to_reconnect() || self.followup_eval_id.is_empty() {
            return None;
        }
        matches!(
            client_status,
            crate::ALLOC_CLIENT_STATUS_RUNNING
                | crate::ALLOC_CLIENT_STATUS_COMPLETE
                | crate::ALLOC_CLIENT_STATUS_FAILED
        )
        .then(|| self.followup_eval_id.clone())
    }

    /// The group's client-side stop delay (`stop_on_client_after`), if it has one.
    pub fn disconnect_stop_after(&self) -> Option<DurationNs> {
        self.task_group().and_then(TaskGroup::disconnect_stop_after)
    }

    /// When a lost allocation whose client stops it on its own (`stop_on_client_after`) is
    /// surely stopped, so it may be replaced (Nomad's `WaitClientStop`): from when it was
    /// first marked lost (`now` before that), the group's delay plus the longest kill
    /// timeout of its tasks (at least Nomad's default 5 s). `None` without such a delay.
    pub fn wait_client_stop(&self, now_unix_nanos: i64) -> Option<i64> {
        let stop_after = self.disconnect_stop_after()?;
        let group = self.task_group()?;
        let lost_at = client_status_states(self)
            .find(|(value, _)| *value == crate::ALLOC_CLIENT_STATUS_LOST)
            .map_or(now_unix_nanos, |(_, time)| time);
        let kill = group
            .tasks
            .iter()
            .map(|task| task.kill_timeout.as_nanos())
            .fold(DEFAULT_KILL_TIMEOUT.as_nanos(), i64::max);
        Some(
            lost_at
                .saturating_add(stop_after.as_nanos())
                .saturating_add(kill),
        )
    }

    /// When a task of the allocation last started (its last restart, else its start), if
    /// it did.
    pub fn last_start_of_task(&self, task: &str) -> Option<i64> {
        let state = self.task_states.get(task)?;
        state
            .last_restart
            .unix_nanos()
            .or_else(|| state.started_at.unix_nanos())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::DisconnectStrategy;
    use crate::{ALLOC_CLIENT_STATUS_RUNNING, Job};
    use std::sync::Arc;

    fn alloc_with_group(group: TaskGroup) -> Allocation {
        let job = Job {
            task_groups: vec![group],
            ..Job::default()
        };
        Allocation {
            task_group: "web".into(),
            job: Some(Arc::new(job)),
            ..Allocation::default()
        }
    }

    #[test]
    fn lost_after_comes_from_the_disconnect_block_else_max_client_disconnect() {
        let mut group = TaskGroup {
            name: "web".into(),
            max_client_disconnect: Some(DurationNs::from_millis(5_000)),
            ..TaskGroup::default()
        };
        assert_eq!(group.disconnect_lost_after_nanos(), 5_000_000_000);
        assert!(group.replace_on_disconnect());
        group.disconnect = Some(DisconnectStrategy {
            lost_after: DurationNs::from_millis(1_000),
            replace: false,
            ..DisconnectStrategy::default()
        });
        assert_eq!(group.disconnect_lost_after_nanos(), 1_000_000_000);
        assert!(!group.replace_on_disconnect());
        assert_eq!(group.disconnect_reconcile(), RECONCILE_BEST_SCORE);
        group.disconnect = None;
        group.prevent_reschedule_on_lost = true;
        assert!(!group.replace_on_disconnect());
    }

    #[test]
    fn unknown_history_says_when_it_disconnected_and_whether_it_reconnected() {
        let mut alloc = alloc_with_group(TaskGroup {
            name: "web".into(),
            max_client_disconnect: Some(DurationNs::from_millis(10_000)),
            ..TaskGroup::default()
        });
        assert!(!alloc.needs_to_reconnect());
        alloc.client_status = ALLOC_CLIENT_STATUS_UNKNOWN.into();
        alloc.append_client_status_state(ALLOC_CLIENT_STATUS_UNKNOWN, 100);
        alloc.append_client_status_state(ALLOC_CLIENT_STATUS_UNKNOWN, 200);
        assert_eq!(alloc.last_unknown_unix_nanos(), Some(100));
        assert!(alloc.needs_to_reconnect());
        assert!(!alloc.disconnect_expired(100 + 9_999_999_999));
        assert!(alloc.disconnect_expired(100 + 10_000_000_000));
        // The history survives the wire.
        let back: Allocation =
            serde_json::from_value(serde_json::to_value(&alloc).unwrap()).unwrap();
        assert_eq!(back.last_unknown_unix_nanos(), Some(100));

        alloc.client_status = ALLOC_CLIENT_STATUS_RUNNING.into();
        alloc.append_client_status_state(ALLOC_CLIENT_STATUS_RUNNING, 300);
        assert!(!alloc.needs_to_reconnect());
        assert!(!alloc.disconnect_expired(i64::MAX));
    }
}
