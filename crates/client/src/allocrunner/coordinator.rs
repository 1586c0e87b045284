//! The task lifecycle coordinator: which tasks of an allocation may start now.
//!
//! - prestart tasks may start at once;
//! - main tasks once every ephemeral prestart task has completed successfully and every
//!   prestart sidecar is running;
//! - poststart tasks once every main task has started;
//! - poststop tasks once every other task is dead.
//!
//! A gate, once open, stays open (a sidecar restarting does not stop main tasks) until the
//! coordinator is frozen for an AllTasks restart, which closes every gate but the prestart one
//! until the restart requests have been delivered; then the rules apply again, to the tasks'
//! new lives.
//!
//! A replacement allocation is held until the allocation it replaces is terminal (see
//! `upstream`): while held, every gate is shut, the prestart one too; the release lets the
//! rules above apply.
//!
//! **Not** here: killing tasks (the alloc runner decides that) or starting them (the task
//! runners wait on their gate).

use drover_structs::{TASK_STATE_DEAD, TASK_STATE_RUNNING, Task, TaskState};

/// Where a task sits in the group's lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskRole {
    Prestart { sidecar: bool },
    Main,
    Poststart { sidecar: bool },
    Poststop,
}

impl TaskRole {
    pub fn of(task: &Task) -> TaskRole {
        let sidecar = task.is_sidecar();
        match task.lifecycle_hook() {
            drover_structs::LIFECYCLE_HOOK_PRESTART => TaskRole::Prestart { sidecar },
            drover_structs::LIFECYCLE_HOOK_POSTSTART => TaskRole::Poststart { sidecar },
            drover_structs::LIFECYCLE_HOOK_POSTSTOP => TaskRole::Poststop,
            _ => TaskRole::Main,
        }
    }

    /// Lifecycle order: prestart 0, main 1, poststart 2, poststop 3.
    pub fn order(self) -> u8 {
        match self {
            TaskRole::Prestart { .. } => 0,
            TaskRole::Main => 1,
            TaskRole::Poststart { .. } => 2,
            TaskRole::Poststop => 3,
        }
    }

    pub fn is_sidecar(self) -> bool {
        matches!(
            self,
            TaskRole::Prestart { sidecar: true } | TaskRole::Poststart { sidecar: true }
        )
    }
}

/// Gate state for one allocation.
#[derive(Debug, Default, Clone)]
pub struct Coordinator {
    main_open: bool,
    poststart_open: bool,
    poststop_open: bool,
    frozen: bool,
    held: bool,
}

impl Coordinator {
    /// Shuts every gate until [`Coordinator::release`] (waiting for the previous allocation).
    pub fn hold(&mut self) {
        self.held = true;
    }

    /// Ends a [`Coordinator::hold`].
    pub fn release(&mut self) {
        self.held = false;
    }

    /// Whether the allocation is still held.
    pub fn is_held(&self) -> bool {
        self.held
    }

    /// Closes every gate but the prestart one (AllTasks restart in progress).
    pub fn freeze(&mut self) {
        self.frozen = true;
        self.main_open = false;
        self.poststart_open = false;
        self.poststop_open = false;
    }

    /// Whether an AllTasks restart is being delivered.
    pub fn is_frozen(&self) -> bool {
        self.frozen
    }

    /// Lets the rules apply again.
    pub fn thaw(&mut self) {
        self.frozen = false;
    }

    /// Updates the gates from the tasks' roles and states and returns, per task, whether it may
    /// start.
    pub fn gates(&mut self, tasks: &[(TaskRole, TaskState)]) -> Vec<bool> {
        if self.held {
            return vec![false; tasks.len()];
        }
        if !self.frozen {
            let prestart_ready = tasks.iter().all(|(role, state)| match role {
                TaskRole::Prestart { sidecar: false } => state.successful(),
                TaskRole::Prestart { sidecar: true } => state.state == TASK_STATE_RUNNING,
                _ => true,
            });
            self.main_open |= prestart_ready;
            let main_started = tasks.iter().all(|(role, state)| {
                *role != TaskRole::Main
                    || state.state == TASK_STATE_RUNNING
                    || (state.state == TASK_STATE_DEAD && !state.started_at.is_zero())
            });
            self.poststart_open |= self.main_open && main_started;
            let others_dead = tasks
                .iter()
                .all(|(role, state)| *role == TaskRole::Poststop || state.state == TASK_STATE_DEAD);
            self.poststop_open |= others_dead;
        }
        tasks
            .iter()
            .map(|(role, _)| match role {
                TaskRole::Prestart { .. } => true,
                TaskRole::Main => self.main_open,
                TaskRole::Poststart { .. } => self.poststart_open,
                TaskRole::Poststop => self.poststop_open,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_structs::{TASK_STATE_PENDING, Timestamp};

    fn state(state: &str, failed: bool, started: bool) -> TaskState {
        TaskState {
            state: state.to_string(),
            failed,
            started_at: if started {
                Timestamp::from_unix_nanos(1)
            } else {
                Timestamp::ZERO
            },
            ..TaskState::default()
        }
    }

    #[test]
    fn a_held_allocation_starts_nothing_until_released() {
        let mut coordinator = Coordinator::default();
        coordinator.hold();
        let tasks = [
            (
                TaskRole::Prestart { sidecar: false },
                state(TASK_STATE_PENDING, false, false),
            ),
            (TaskRole::Main, state(TASK_STATE_PENDING, false, false)),
            (TaskRole::Poststop, state(TASK_STATE_PENDING, false, false)),
        ];
        assert_eq!(coordinator.gates(&tasks), vec![false, false, false]);
        // Killed while held: every other task is dead, and still the poststop task waits.
        let killed = [
            (
                TaskRole::Prestart { sidecar: false },
                state(TASK_STATE_DEAD, true, false),
            ),
            (TaskRole::Main, state(TASK_STATE_DEAD, true, false)),
            (TaskRole::Poststop, state(TASK_STATE_PENDING, false, false)),
        ];
        assert_eq!(coordinator.gates(&killed), vec![false, false, false]);
        coordinator.release();
        assert_eq!(coordinator.gates(&tasks), vec![true, false, false]);
    }

    #[test]
    fn gates_open_in_lifecycle_order() {
        let mut coordinator = Coordinator::default();
        let roles = [
            TaskRole::Prestart { sidecar: false },
            TaskRole::Prestart { sidecar: true },
            TaskRole::Main,
            TaskRole::Poststart { sidecar: false },
            TaskRole::Poststop,
        ];
        let with = |states: [TaskState; 5]| -> Vec<(TaskRole, TaskState)> {
            roles.iter().copied().zip(states).collect()
        };
        let pending = || state(TASK_STATE_PENDING, false, false);
        assert_eq!(
            coordinator.gates(&with([
                pending(),
                pending(),
                pending(),
                pending(),
                pending()
            ])),
            vec![true, true, false, false, false]
        );
        let done = || state(TASK_STATE_DEAD, false, true);
        let running = || state(TASK_STATE_RUNNING, false, true);
        assert_eq!(
            coordinator.gates(&with([done(), pending(), pending(), pending(), pending()])),
            vec![true, true, false, false, false]
        );
        assert_eq!(
            coordinator.gates(&with([done(), running(), pending(), pending(), pending()])),
            vec![true, true, true, false, false]
        );
        assert_eq!(
            coordinator.gates(&with([done(), running(), running(), pending(), pending()])),
            vec![true, true, true, true, false]
        );
        assert_eq!(
            coordinator.gates(&with([done(), done(), done(), done(), pending()])),
            vec![true, true, true, true, true]
        );
        coordinator.freeze();
        assert_eq!(
            coordinator.gates(&with([done(), done(), done(), done(), done()])),
            vec![true, true, false, false, false]
        );
    }

    #[test]
    fn failed_prestart_keeps_main_closed() {
        let mut coordinator = Coordinator::default();
        let tasks = vec![
            (
                TaskRole::Prestart { sidecar: false },
                state(TASK_STATE_DEAD, true, true),
            ),
            (TaskRole::Main, state(TASK_STATE_PENDING, false, false)),
        ];
        assert_eq!(coordinator.gates(&tasks), vec![true, false]);
    }
}
