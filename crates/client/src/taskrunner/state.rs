//! The task runner's lifecycle phase (an explicit state machine) and the Nomad `TaskState` it
//! reports, with the bounded event list.
//!
//! ```text
//!               gate open,                  driver start ok
//!               prestart hooks ok           (handle persisted first)
//!  ┌─────────┐ ────────────────▶ ┌──────────┐ ──────────────────────▶ ┌─────────┐
//!  │ Pending │                   │ Starting │                         │ Running │ ◀── restore
//!  └─────────┘ ◀──────────┐      └──────────┘                         └─────────┘  re-attaches
//!   │      │              │ delay over  │ start error     exit, restart │       │ kill
//!   │      │ hook   ┌──────────────┐    ▼                               │       ▼
//!   │      │ error  │ RestartDelay │ ◀─restart─ ┌────────┐ ◀────────────┘  ┌─────────┐
//!   │      └──────▶ └──────────────┘            │ Exited │                 │ Killing │
//!   │                 │ kill                    └────────┘                 └─────────┘
//!   │                 │                             │ not restarting,           │ exited
//!   │                 ▼                             ▼ complete                  ▼
//!   │ kill, setup or ┌────────────────────────────────────────────────────────────────┐
//!   └──────────────▶ │ Dead: runs again only on an AllTasks restart (Dead → Pending)  │
//!     validation     └────────────────────────────────────────────────────────────────┘
//!     failure
//! ```
//!
//! A prestart hook failure the restart policy retries goes `Pending → RestartDelay` directly.
//! On restore, a phase that disagrees with the persisted handle is brought in line first
//! (`Starting`/`RestartDelay`/`Exited` without a handle resume as `Pending`, see
//! [`TaskLifecycle::resume_as_pending`], and the rest of a persisted restart delay is still
//! waited; `Starting` with a handle becomes `Running`).
//!
//! Agent shutdown is not a phase: the runner stops driving the task and leaves it as it is, and
//! the persisted phase is what the next agent resumes from.
//!
//! Events: at most [`DEFAULT_MAX_TASK_EVENTS`] per task. Unlike Nomad, which keeps only the last
//! ten, drover pins the first [`PINNED_FIRST_EVENTS`] events (`Received`, `Task Setup`, the
//! first `Started` — how the task began) and rolls the rest, so a crash-looping task still shows
//! how it started.
//!
//! **Not** here: the decisions (the run loop) or persistence (the runner writes these records).

use drover_structs::{
    TASK_STATE_DEAD, TASK_STATE_PENDING, TASK_STATE_RUNNING, TaskEvent, TaskState, Timestamp,
};
use serde::{Deserialize, Serialize};

pub use crate::config::DEFAULT_MAX_TASK_EVENTS;

/// Events at the start of the list that are never dropped.
pub const PINNED_FIRST_EVENTS: usize = 3;

/// Where the task runner is in its lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TaskPhase {
    Pending,
    Starting,
    Running,
    Exited,
    RestartDelay,
    Killing,
    Dead,
}

/// A transition the state machine does not allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("illegal task transition from {from:?} to {to:?}")]
pub struct IllegalTransition {
    pub from: TaskPhase,
    pub to: TaskPhase,
}

impl TaskPhase {
    /// Whether `self → to` is an edge of the diagram.
    pub fn can_move_to(self, to: TaskPhase) -> bool {
        use TaskPhase::*;
        matches!(
            (self, to),
            (Pending, Starting)
                | (Pending, RestartDelay)
                | (Pending, Dead)
                | (Starting, Running)
                | (Starting, Exited)
                | (Running, Exited)
                | (Running, Killing)
                | (Exited, RestartDelay)
                | (Exited, Dead)
                | (RestartDelay, Pending)
                | (RestartDelay, Dead)
                | (Killing, Dead)
                | (Dead, Pending)
        )
    }

    /// The Nomad `TaskState.State` this phase reports.
    pub fn nomad_state(self) -> &'static str {
        match self {
            TaskPhase::Pending | TaskPhase::Starting | TaskPhase::RestartDelay => {
                TASK_STATE_PENDING
            }
            TaskPhase::Running | TaskPhase::Exited | TaskPhase::Killing => TASK_STATE_RUNNING,
            TaskPhase::Dead => TASK_STATE_DEAD,
        }
    }
}

/// A phase plus the Nomad task state, kept consistent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskLifecycle {
    pub phase: TaskPhase,
    pub task_state: TaskState,
    pub max_events: usize,
}

impl TaskLifecycle {
    /// A new task: pending, no events.
    pub fn new(max_events: usize) -> Self {
        TaskLifecycle {
            phase: TaskPhase::Pending,
            task_state: TaskState::default(),
            max_events: max_events.max(PINNED_FIRST_EVENTS + 1),
        }
    }

    /// Moves to `to`, updating `State`, `StartedAt` and `FinishedAt` as Nomad does.
    pub fn move_to(&mut self, to: TaskPhase, now_unix_nanos: i64) -> Result<(), IllegalTransition> {
        if !self.phase.can_move_to(to) {
            return Err(IllegalTransition {
                from: self.phase,
                to,
            });
        }
        let from = std::mem::replace(&mut self.phase, to);
        // A start that failed never ran: Nomad's task stays pending, with no `StartedAt`,
        // until the restart decision (`nomad alloc status` shows "Started At = N/A").
        let new_state = if (from, to) == (TaskPhase::Starting, TaskPhase::Exited) {
            TASK_STATE_PENDING
        } else {
            to.nomad_state()
        };
        if new_state != self.task_state.state {
            if new_state == TASK_STATE_RUNNING {
                self.task_state.started_at = Timestamp::from_unix_nanos(now_unix_nanos);
            }
            if new_state == TASK_STATE_DEAD {
                self.task_state.finished_at = Timestamp::from_unix_nanos(now_unix_nanos);
            }
            if new_state == TASK_STATE_PENDING && self.task_state.state == TASK_STATE_DEAD {
                // A dead task run again (AllTasks restart) starts over as not failed.
                self.task_state.failed = false;
                self.task_state.finished_at = Timestamp::ZERO;
            }
            self.task_state.state = new_state.to_string();
        }
        Ok(())
    }

    /// Restore only: a start, restart delay or exit that the previous agent did not finish
    /// resumes as `Pending` (the run loop checked that no task process is held).
    pub fn resume_as_pending(&mut self) {
        self.phase = TaskPhase::Pending;
        self.task_state.state = TASK_STATE_PENDING.to_string();
    }

    /// Appends an event: sets `Failed` when it fails the task, counts restarts, fills in the
    /// display message, and bounds the list keeping the first events.
    pub fn push_event(&mut self, mut event: TaskEvent) {
        if event.fails_task {
            self.task_state.failed = true;
        }
        if event.r#type == drover_structs::TASK_RESTARTING {
            self.task_state.restarts += 1;
            self.task_state.last_restart = Timestamp::from_unix_nanos(event.time);
        }
        event.populate_display_message();
        let events = &mut self.task_state.events;
        events.push(event);
        if events.len() > self.max_events {
            let excess = events.len() - self.max_events;
            events.drain(PINNED_FIRST_EVENTS..PINNED_FIRST_EVENTS + excess);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn illegal_transitions_are_errors() {
        let mut lifecycle = TaskLifecycle::new(10);
        assert_eq!(
            lifecycle.move_to(TaskPhase::Running, 1),
            Err(IllegalTransition {
                from: TaskPhase::Pending,
                to: TaskPhase::Running
            })
        );
        assert!(lifecycle.move_to(TaskPhase::Starting, 1).is_ok());
        assert!(lifecycle.move_to(TaskPhase::Running, 2).is_ok());
        assert_eq!(lifecycle.task_state.state, "running");
        assert_eq!(
            lifecycle.task_state.started_at,
            Timestamp::from_unix_nanos(2)
        );
        assert!(lifecycle.move_to(TaskPhase::Pending, 3).is_err());
        assert!(lifecycle.move_to(TaskPhase::Killing, 3).is_ok());
        assert!(lifecycle.move_to(TaskPhase::Dead, 4).is_ok());
        assert_eq!(
            lifecycle.task_state.finished_at,
            Timestamp::from_unix_nanos(4)
        );
    }

    #[test]
    fn a_failed_start_never_ran() {
        let mut lifecycle = TaskLifecycle::new(10);
        assert!(lifecycle.move_to(TaskPhase::Starting, 1).is_ok());
        assert!(lifecycle.move_to(TaskPhase::Exited, 2).is_ok());
        assert_eq!(lifecycle.task_state.state, "pending");
        assert_eq!(lifecycle.task_state.started_at, Timestamp::ZERO);
        assert!(lifecycle.move_to(TaskPhase::Dead, 3).is_ok());
        assert_eq!(lifecycle.task_state.state, "dead");
        assert_eq!(lifecycle.task_state.started_at, Timestamp::ZERO);
        assert_eq!(
            lifecycle.task_state.finished_at,
            Timestamp::from_unix_nanos(3)
        );
    }

    #[test]
    fn events_are_bounded_keeping_the_first_ones() {
        let mut lifecycle = TaskLifecycle::new(5);
        for index in 0..20 {
            lifecycle.push_event(TaskEvent::new(&format!("e{index}"), index));
        }
        let kinds: Vec<&str> = lifecycle
            .task_state
            .events
            .iter()
            .map(|event| event.r#type.as_str())
            .collect();
        assert_eq!(kinds, vec!["e0", "e1", "e2", "e18", "e19"]);
    }

    #[test]
    fn restarting_counts_and_fails_task_sticks() {
        let mut lifecycle = TaskLifecycle::new(10);
        lifecycle.push_event(TaskEvent::new(drover_structs::TASK_RESTARTING, 7));
        lifecycle
            .push_event(TaskEvent::new(drover_structs::TASK_NOT_RESTARTING, 8).with_fails_task());
        assert_eq!(lifecycle.task_state.restarts, 1);
        assert_eq!(
            lifecycle.task_state.last_restart,
            Timestamp::from_unix_nanos(7)
        );
        assert!(lifecycle.task_state.failed);
        assert!(!lifecycle.task_state.events[0].display_message.is_empty());
    }
}
