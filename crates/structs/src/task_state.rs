//! Task states and task events (`nomad/structs.TaskState`, `TaskEvent`), the event type strings,
//! the human `DisplayMessage` rules, the bounded event list, and the allocation client status
//! derived from task states.
//!
//! A task's `State` moves `pending → running → dead` (and back to `pending` on restart):
//!
//! ```text
//!   pending ──Started──▶ running ──Terminated/Killed──▶ dead
//!      ▲                    │
//!      └────Restarting──────┘
//! ```
//!
//! Not here: deciding transitions (the client's task runner does that) or reading clocks: every
//! event takes its time from the caller.

use std::collections::BTreeMap;

use crate::lenient::wire_struct;
use crate::time::{DurationNs, Timestamp};

/// Task states.
pub const TASK_STATE_PENDING: &str = "pending";
pub const TASK_STATE_RUNNING: &str = "running";
pub const TASK_STATE_DEAD: &str = "dead";

/// Task event types (the exact strings Nomad sends).
pub const TASK_SETUP_FAILURE: &str = "Setup Failure";
pub const TASK_DRIVER_FAILURE: &str = "Driver Failure";
pub const TASK_RECEIVED: &str = "Received";
pub const TASK_FAILED_VALIDATION: &str = "Failed Validation";
pub const TASK_STARTED: &str = "Started";
pub const TASK_PAUSING: &str = "Pausing";
pub const TASK_TERMINATED: &str = "Terminated";
pub const TASK_KILLING: &str = "Killing";
pub const TASK_KILLED: &str = "Killed";
pub const TASK_RESTARTING: &str = "Restarting";
pub const TASK_NOT_RESTARTING: &str = "Not Restarting";
pub const TASK_RESTART_SIGNAL: &str = "Restart Signaled";
pub const TASK_SIGNALING: &str = "Signaling";
pub const TASK_DOWNLOADING_ARTIFACTS: &str = "Downloading Artifacts";
pub const TASK_ARTIFACT_DOWNLOAD_FAILED: &str = "Failed Artifact Download";
pub const TASK_BUILDING_TASK_DIR: &str = "Building Task Directory";
pub const TASK_SETUP: &str = "Task Setup";
pub const TASK_DISK_EXCEEDED: &str = "Disk Resources Exceeded";
pub const TASK_SIBLING_FAILED: &str = "Sibling Task Failed";
pub const TASK_DRIVER_MESSAGE: &str = "Driver";
pub const TASK_LEADER_DEAD: &str = "Leader Task Dead";
pub const TASK_MAIN_DEAD: &str = "Main Tasks Dead";
pub const TASK_HOOK_FAILED: &str = "Task hook failed";
pub const TASK_HOOK_MESSAGE: &str = "Task hook message";
pub const TASK_RESTORE_FAILED: &str = "Failed Restoring Task";
pub const TASK_PLUGIN_UNHEALTHY: &str = "Plugin became unhealthy";
pub const TASK_PLUGIN_HEALTHY: &str = "Plugin became healthy";
pub const TASK_CLIENT_RECONNECTED: &str = "Reconnected";
pub const TASK_WAITING_SHUTDOWN_DELAY: &str = "Waiting for shutdown delay";
pub const TASK_SKIPPING_SHUTDOWN_DELAY: &str = "Skipping shutdown delay";
pub const TASK_RUNNING: &str = "Running";

/// Every task event type, in the order Nomad declares them.
pub const ALL_TASK_EVENT_TYPES: &[&str] = &[
    TASK_SETUP_FAILURE,
    TASK_DRIVER_FAILURE,
    TASK_RECEIVED,
    TASK_FAILED_VALIDATION,
    TASK_STARTED,
    TASK_PAUSING,
    TASK_TERMINATED,
    TASK_KILLING,
    TASK_KILLED,
    TASK_RESTARTING,
    TASK_NOT_RESTARTING,
    TASK_RESTART_SIGNAL,
    TASK_SIGNALING,
    TASK_DOWNLOADING_ARTIFACTS,
    TASK_ARTIFACT_DOWNLOAD_FAILED,
    TASK_BUILDING_TASK_DIR,
    TASK_SETUP,
    TASK_DISK_EXCEEDED,
    TASK_SIBLING_FAILED,
    TASK_DRIVER_MESSAGE,
    TASK_LEADER_DEAD,
    TASK_MAIN_DEAD,
    TASK_HOOK_FAILED,
    TASK_HOOK_MESSAGE,
    TASK_RESTORE_FAILED,
    TASK_PLUGIN_UNHEALTHY,
    TASK_PLUGIN_HEALTHY,
    TASK_CLIENT_RECONNECTED,
    TASK_WAITING_SHUTDOWN_DELAY,
    TASK_SKIPPING_SHUTDOWN_DELAY,
    TASK_RUNNING,
];

/// The restart reason that the `Restarting` display message leaves out.
pub const RESTART_REASON_WITHIN_POLICY: &str = "Restart within policy";
/// Restart reasons of Nomad's restart tracker.
pub const RESTART_REASON_NO_RESTARTS_ALLOWED: &str = "Policy allows no restarts";
pub const RESTART_REASON_UNRECOVERABLE_ERROR: &str = "Error was unrecoverable";
pub const RESTART_REASON_DELAY: &str = "Exceeded allowed attempts, applying a delay";
pub const RESTART_REASON_UNNECESSARY: &str = "Restart unnecessary as task terminated successfully";

/// The `Not Restarting` reason when a `fail`-mode policy is used up, worded as Nomad words it:
/// `Exceeded allowed attempts 2 in interval 30m0s and mode is "fail"`.
pub fn restart_reason_exceeded_attempts(attempts: i64, interval: DurationNs, mode: &str) -> String {
    format!(
        "Exceeded allowed attempts {attempts} in interval {interval} and mode is {}",
        go_quote(mode)
    )
}

/// How many events a task state keeps (Nomad's `defaultMaxEvents`).
pub const MAX_TASK_EVENTS: usize = 10;

/// `Details` keys of a task event.
pub const DETAIL_EXIT_CODE: &str = "exit_code";
pub const DETAIL_SIGNAL: &str = "signal";
pub const DETAIL_OOM_KILLED: &str = "oom_killed";
pub const DETAIL_EXIT_MESSAGE: &str = "exit_message";
pub const DETAIL_MESSAGE: &str = "message";
pub const DETAIL_FAILS_TASK: &str = "fails_task";
pub const DETAIL_RESTART_REASON: &str = "restart_reason";
pub const DETAIL_START_DELAY: &str = "start_delay";
pub const DETAIL_KILL_TIMEOUT: &str = "kill_timeout";
pub const DETAIL_KILL_REASON: &str = "kill_reason";
pub const DETAIL_KILL_ERROR: &str = "kill_error";
pub const DETAIL_SETUP_ERROR: &str = "setup_error";
pub const DETAIL_DRIVER_ERROR: &str = "driver_error";
pub const DETAIL_DRIVER_MESSAGE: &str = "driver_message";
pub const DETAIL_DOWNLOAD_ERROR: &str = "download_error";
pub const DETAIL_VALIDATION_ERROR: &str = "validation_error";
pub const DETAIL_FAILED_SIBLING: &str = "failed_sibling";
pub const DETAIL_TASK_SIGNAL: &str = "task_signal";
pub const DETAIL_TASK_SIGNAL_REASON: &str = "task_signal_reason";
pub const DETAIL_DISK_LIMIT: &str = "disk_limit";
pub const DETAIL_VAULT_RENEWAL_ERROR: &str = "vault_renewal_error";

wire_struct! {
    /// The state of one task in an allocation.
    pub struct TaskState {
        /// `pending`, `running` or `dead`; a new state is `pending`.
        pub state: String = TASK_STATE_PENDING.to_string(),
        /// Sticky: set once any event fails the task.
        pub failed: bool,
        pub restarts: u64,
        pub last_restart: Timestamp,
        pub started_at: Timestamp,
        pub finished_at: Timestamp,
        /// The last [`MAX_TASK_EVENTS`] events, oldest first.
        pub events: Vec<TaskEvent>,
        pub paused: String,
    }
}

impl TaskState {
    /// Appends an event, dropping the oldest beyond [`MAX_TASK_EVENTS`], and sets `Failed` when
    /// the event fails the task.
    pub fn push_event(&mut self, event: TaskEvent) {
        if event.fails_task {
            self.failed = true;
        }
        self.events.push(event);
        if self.events.len() > MAX_TASK_EVENTS {
            let excess = self.events.len() - MAX_TASK_EVENTS;
            self.events.drain(..excess);
        }
    }

    /// Whether the task is dead.
    pub fn is_dead(&self) -> bool {
        self.state == TASK_STATE_DEAD
    }

    /// Whether the task finished without failing.
    pub fn successful(&self) -> bool {
        self.state == TASK_STATE_DEAD && !self.failed
    }

    /// Fills in `DisplayMessage` on every event that lacks one.
    pub fn populate_display_messages(&mut self) {
        for event in &mut self.events {
            event.populate_display_message();
        }
    }
}

wire_struct! {
    /// Something that happened to a task. The flat fields mirror `Details` (older tools read the
    /// flat fields, newer ones `Details`); the `with_*` builders fill in both.
    pub struct TaskEvent {
        pub r#type: String,
        /// Unix nanoseconds.
        pub time: i64,
        pub message: String,
        pub display_message: String,
        pub details: BTreeMap<String, String>,
        pub fails_task: bool,
        pub restart_reason: String,
        pub setup_error: String,
        pub driver_error: String,
        pub exit_code: i64,
        pub signal: i64,
        pub kill_timeout: DurationNs,
        pub kill_error: String,
        pub kill_reason: String,
        pub start_delay: i64,
        pub download_error: String,
        pub validation_error: String,
        pub disk_limit: i64,
        pub failed_sibling: String,
        pub vault_error: String,
        pub task_signal_reason: String,
        pub task_signal: String,
        pub driver_message: String,
        pub generic_source: String,
    }
}

impl TaskEvent {
    /// A new event of `event_type` at `time_unix_nanos`.
    pub fn new(event_type: &str, time_unix_nanos: i64) -> Self {
        TaskEvent {
            r#type: event_type.to_string(),
            time: time_unix_nanos,
            ..TaskEvent::default()
        }
    }

    fn with_detail(mut self, key: &str, value: String) -> Self {
        self.details.insert(key.to_string(), value);
        self
    }

    /// Marks the event as failing the task (`fails_task`).
    pub fn with_fails_task(mut self) -> Self {
        self.fails_task = true;
        self.with_detail(DETAIL_FAILS_TASK, "true".to_string())
    }

    pub fn with_exit_code(mut self, exit_code: i64) -> Self {
        self.exit_code = exit_code;
        self.with_detail(DETAIL_EXIT_CODE, exit_code.to_string())
    }

    pub fn with_signal(mut self, signal: i64) -> Self {
        self.signal = signal;
        self.with_detail(DETAIL_SIGNAL, signal.to_string())
    }

    /// The exit message (for example a driver's explanation of the exit); sets `Message`.
    pub fn with_exit_message(mut self, exit_message: &str) -> Self {
        self.message = exit_message.to_string();
        self.with_detail(DETAIL_EXIT_MESSAGE, exit_message.to_string())
    }

    pub fn with_oom_killed(self, oom_killed: bool) -> Self {
        self.with_detail(DETAIL_OOM_KILLED, oom_killed.to_string())
    }

    pub fn with_message(mut self, message: &str) -> Self {
        self.message = message.to_string();
        self.with_detail(DETAIL_MESSAGE, message.to_string())
    }

    pub fn with_setup_error(mut self, setup_error: &str) -> Self {
        self.setup_error = setup_error.to_string();
        self.with_detail(DETAIL_SETUP_ERROR, setup_error.to_string())
    }

    pub fn with_driver_error(mut self, driver_error: &str) -> Self {
        self.driver_error = driver_error.to_string();
        self.with_detail(DETAIL_DRIVER_ERROR, driver_error.to_string())
    }

    pub fn with_driver_message(mut self, driver_message: &str) -> Self {
        self.driver_message = driver_message.to_string();
        self.with_detail(DETAIL_DRIVER_MESSAGE, driver_message.to_string())
    }

    pub fn with_kill_error(mut self, kill_error: &str) -> Self {
        self.kill_error = kill_error.to_string();
        self.with_detail(DETAIL_KILL_ERROR, kill_error.to_string())
    }

    pub fn with_kill_reason(mut self, kill_reason: &str) -> Self {
        self.kill_reason = kill_reason.to_string();
        self.with_detail(DETAIL_KILL_REASON, kill_reason.to_string())
    }

    /// The kill timeout, capped by the client's maximum as Nomad does (`Details` holds the Go
    /// duration text, such as `5s`).
    pub fn with_kill_timeout(
        mut self,
        kill_timeout: DurationNs,
        max_kill_timeout: DurationNs,
    ) -> Self {
        let effective = if max_kill_timeout.is_zero() {
            kill_timeout
        } else {
            kill_timeout.min(max_kill_timeout)
        };
        self.kill_timeout = effective;
        self.with_detail(DETAIL_KILL_TIMEOUT, effective.to_go_string())
    }

    /// The delay before the next start (`Restarting` events).
    pub fn with_restart_delay(mut self, delay: DurationNs) -> Self {
        self.start_delay = delay.as_nanos();
        self.with_detail(DETAIL_START_DELAY, delay.as_nanos().to_string())
    }

    pub fn with_restart_reason(mut self, restart_reason: &str) -> Self {
        self.restart_reason = restart_reason.to_string();
        self.with_detail(DETAIL_RESTART_REASON, restart_reason.to_string())
    }

    pub fn with_task_signal(mut self, task_signal: &str) -> Self {
        self.task_signal = task_signal.to_string();
        self.with_detail(DETAIL_TASK_SIGNAL, task_signal.to_string())
    }

    pub fn with_task_signal_reason(mut self, reason: &str) -> Self {
        self.task_signal_reason = reason.to_string();
        self.with_detail(DETAIL_TASK_SIGNAL_REASON, reason.to_string())
    }

    pub fn with_download_error(mut self, download_error: &str) -> Self {
        self.download_error = download_error.to_string();
        self.with_detail(DETAIL_DOWNLOAD_ERROR, download_error.to_string())
    }

    pub fn with_validation_error(mut self, validation_error: &str) -> Self {
        self.validation_error = validation_error.to_string();
        self.with_detail(DETAIL_VALIDATION_ERROR, validation_error.to_string())
    }

    pub fn with_disk_limit(mut self, disk_limit: i64) -> Self {
        self.disk_limit = disk_limit;
        self.with_detail(DETAIL_DISK_LIMIT, disk_limit.to_string())
    }

    pub fn with_failed_sibling(mut self, sibling_task_name: &str) -> Self {
        self.failed_sibling = sibling_task_name.to_string();
        self.with_detail(DETAIL_FAILED_SIBLING, sibling_task_name.to_string())
    }

    pub fn with_vault_renewal_error(mut self, vault_error: &str) -> Self {
        self.vault_error = vault_error.to_string();
        self.with_detail(DETAIL_VAULT_RENEWAL_ERROR, vault_error.to_string())
    }

    /// Sets `DisplayMessage` explicitly (it is then left alone by
    /// [`TaskEvent::populate_display_message`]).
    pub fn with_display_message(mut self, display_message: &str) -> Self {
        self.display_message = display_message.to_string();
        self
    }

    /// Fills in `DisplayMessage` from the type and fields when it is empty, by Nomad's rules.
    pub fn populate_display_message(&mut self) {
        if self.display_message.is_empty() {
            self.display_message = self.display_message_for_type();
        }
    }

    fn display_message_for_type(&self) -> String {
        fn or_else(value: &str, fallback: &str) -> String {
            if value.is_empty() {
                fallback.to_string()
            } else {
                value.to_string()
            }
        }
        match self.r#type.as_str() {
            TASK_SETUP => self.message.clone(),
            TASK_STARTED => "Task started by client".to_string(),
            TASK_RECEIVED => "Task received by client".to_string(),
            TASK_FAILED_VALIDATION => or_else(&self.validation_error, "Validation of task failed"),
            TASK_SETUP_FAILURE => or_else(&self.setup_error, "Task setup failed"),
            TASK_DRIVER_FAILURE => or_else(&self.driver_error, "Failed to start task"),
            TASK_DOWNLOADING_ARTIFACTS => "Client is downloading artifacts".to_string(),
            TASK_ARTIFACT_DOWNLOAD_FAILED => {
                or_else(&self.download_error, "Failed to download artifacts")
            }
            TASK_KILLING => {
                if !self.kill_reason.is_empty() {
                    self.kill_reason.clone()
                } else if !self.kill_timeout.is_zero() {
                    format!(
                        "Sent interrupt. Waiting {} before force killing",
                        self.kill_timeout
                    )
                } else {
                    "Sent interrupt".to_string()
                }
            }
            TASK_KILLED => or_else(&self.kill_error, "Task successfully killed"),
            TASK_TERMINATED => {
                let mut parts = vec![format!("Exit Code: {}", self.exit_code)];
                if self.signal != 0 {
                    parts.push(format!("Signal: {}", self.signal));
                }
                if !self.message.is_empty() {
                    parts.push(format!("Exit Message: {}", go_quote(&self.message)));
                }
                parts.join(", ")
            }
            TASK_RESTARTING => {
                let restarting_in = format!("Task restarting in {}", DurationNs(self.start_delay));
                if !self.restart_reason.is_empty()
                    && self.restart_reason != RESTART_REASON_WITHIN_POLICY
                {
                    format!("{} - {restarting_in}", self.restart_reason)
                } else {
                    restarting_in
                }
            }
            TASK_NOT_RESTARTING => or_else(&self.restart_reason, "Task exceeded restart policy"),
            TASK_SIBLING_FAILED => {
                if self.failed_sibling.is_empty() {
                    "Task's sibling failed".to_string()
                } else {
                    format!("Task's sibling {} failed", go_quote(&self.failed_sibling))
                }
            }
            TASK_SIGNALING => match (
                self.task_signal.is_empty(),
                self.task_signal_reason.is_empty(),
            ) {
                (true, true) => "Task being sent a signal".to_string(),
                (true, false) => self.task_signal_reason.clone(),
                (false, true) => format!("Task being sent signal {}", self.task_signal),
                (false, false) => {
                    format!(
                        "Task being sent signal {}: {}",
                        self.task_signal, self.task_signal_reason
                    )
                }
            },
            TASK_RESTART_SIGNAL => or_else(&self.restart_reason, "Task signaled to restart"),
            TASK_DRIVER_MESSAGE => self.driver_message.clone(),
            TASK_LEADER_DEAD => "Leader Task in Group dead".to_string(),
            TASK_MAIN_DEAD => "Main tasks in the group died".to_string(),
            TASK_CLIENT_RECONNECTED => "Client reconnected".to_string(),
            _ => self.message.clone(),
        }
    }
}

/// Go's `%q` for ordinary text: double quotes with `"` and `\` escaped and control characters
/// written as escapes.
fn go_quote(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for character in text.chars() {
        match character {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            '\n' => quoted.push_str("\\n"),
            '\r' => quoted.push_str("\\r"),
            '\t' => quoted.push_str("\\t"),
            control if control.is_control() => {
                quoted.push_str(&format!("\\x{:02x}", u32::from(control)));
            }
            other => quoted.push(other),
        }
    }
    quoted.push('"');
    quoted
}

/// Allocation client statuses.
pub const ALLOC_CLIENT_STATUS_PENDING: &str = "pending";
pub const ALLOC_CLIENT_STATUS_RUNNING: &str = "running";
pub const ALLOC_CLIENT_STATUS_COMPLETE: &str = "complete";
pub const ALLOC_CLIENT_STATUS_FAILED: &str = "failed";
pub const ALLOC_CLIENT_STATUS_LOST: &str = "lost";
pub const ALLOC_CLIENT_STATUS_UNKNOWN: &str = "unknown";

/// An allocation's client status and description from its task states, checked in Nomad's order:
/// any failed dead task → `failed`; else any running → `running`; else any pending → `pending`;
/// else any dead → `complete`. With no task states at all the result is `("", "")`, which leaves
/// the alloc's status unchanged in Nomad.
pub fn derive_client_status(
    task_states: &BTreeMap<String, TaskState>,
) -> (&'static str, &'static str) {
    let mut any_failed = false;
    let mut any_running = false;
    let mut any_pending = false;
    let mut any_dead = false;
    for task_state in task_states.values() {
        match task_state.state.as_str() {
            TASK_STATE_RUNNING => any_running = true,
            TASK_STATE_PENDING => any_pending = true,
            TASK_STATE_DEAD if task_state.failed => any_failed = true,
            TASK_STATE_DEAD => any_dead = true,
            _ => {}
        }
    }
    if any_failed {
        (ALLOC_CLIENT_STATUS_FAILED, "Failed tasks")
    } else if any_running {
        (ALLOC_CLIENT_STATUS_RUNNING, "Tasks are running")
    } else if any_pending {
        (ALLOC_CLIENT_STATUS_PENDING, "No tasks have started")
    } else if any_dead {
        (ALLOC_CLIENT_STATUS_COMPLETE, "All tasks have completed")
    } else {
        ("", "")
    }
}
