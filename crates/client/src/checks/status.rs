//! The two small state machines of a check, pure and clock-free (callers pass
//! `tokio::time::Instant`s, so tests run on paused time):
//!
//! - [`StatusTracker`]: turns each probe outcome into the check's reported status with Consul's
//!   counters, which Nomad's checks follow: `success_before_passing` consecutive successes (or
//!   warnings) before a check reports them, `failures_before_warning` / `failures_before_critical`
//!   consecutive failures before it reports warning / failure; until a threshold is met the
//!   previous status stays. A check starts at its `initial_status` (or pending).
//! - [`RestartWatch`]: `check_restart`: after `grace` from the task's start, `limit` consecutive
//!   reported failures (warnings too, unless `ignore_warnings`) ask for a restart; any healthy
//!   result starts the count over.
//!
//! ```text
//!            success × success_before_passing
//!   pending ───────────────────────────────────▶ success
//!      │  ▲                                        │
//!      │  └──── (a restored result is the start) ──┘ failure × failures_before_critical
//!      └──────────────────────────────────────────▶ failure
//! ```
//!
//! Not here: running probes or timers (see `observer`).

use drover_structs::CheckRestart;
use drover_structs::checks::{CHECK_FAILURE, CHECK_PENDING, CHECK_SUCCESS, CHECK_WARNING};
use tokio::time::{Duration, Instant};

/// The outcome of one probe, before the counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Success,
    Warning,
    Failure,
}

impl Outcome {
    pub fn status(self) -> &'static str {
        match self {
            Outcome::Success => CHECK_SUCCESS,
            Outcome::Warning => CHECK_WARNING,
            Outcome::Failure => CHECK_FAILURE,
        }
    }
}

/// The counters of one check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusTracker {
    success_before_passing: u64,
    failures_before_warning: u64,
    failures_before_critical: u64,
    successes: u64,
    failures: u64,
    status: &'static str,
}

/// The status a check starts at: its `initial_status` in Consul's words or Nomad's, else pending.
pub fn initial_status(initial: &str) -> &'static str {
    match initial {
        "passing" | "success" => CHECK_SUCCESS,
        "warning" => CHECK_WARNING,
        "critical" | "failure" => CHECK_FAILURE,
        _ => CHECK_PENDING,
    }
}

/// A persisted or reported status string as one of ours (an unknown one is pending).
pub fn known_status(status: &str) -> &'static str {
    match status {
        CHECK_SUCCESS => CHECK_SUCCESS,
        CHECK_WARNING => CHECK_WARNING,
        CHECK_FAILURE => CHECK_FAILURE,
        _ => CHECK_PENDING,
    }
}

fn count(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

impl StatusTracker {
    /// A tracker starting at `status` with the check's thresholds.
    pub fn new(
        status: &'static str,
        success_before_passing: i64,
        failures_before_warning: i64,
        failures_before_critical: i64,
    ) -> Self {
        StatusTracker {
            success_before_passing: count(success_before_passing),
            failures_before_warning: count(failures_before_warning),
            failures_before_critical: count(failures_before_critical),
            successes: 0,
            failures: 0,
            status,
        }
    }

    /// The status reported now.
    pub fn status(&self) -> &'static str {
        self.status
    }

    /// Applies one probe outcome and answers the status to report.
    pub fn observe(&mut self, outcome: Outcome) -> &'static str {
        match outcome {
            Outcome::Success | Outcome::Warning => {
                self.failures = 0;
                self.successes = self.successes.saturating_add(1);
                if self.successes >= self.success_before_passing {
                    self.status = outcome.status();
                }
            }
            Outcome::Failure => {
                self.successes = 0;
                self.failures = self.failures.saturating_add(1);
                if self.failures >= self.failures_before_critical {
                    self.status = CHECK_FAILURE;
                } else if self.failures_before_warning > 0
                    && self.failures >= self.failures_before_warning
                {
                    self.status = CHECK_WARNING;
                }
            }
        }
        self.status
    }
}

/// `check_restart` of one check of one task run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestartWatch {
    limit: u64,
    grace_until: Instant,
    ignore_warnings: bool,
    unhealthy: u64,
}

impl RestartWatch {
    /// A watch for a task that started at `started`; `None` when `check_restart` asks for no
    /// restarts (no block, or a limit of zero).
    pub fn new(config: Option<&CheckRestart>, started: Instant) -> Option<Self> {
        let config = config?;
        let limit = count(config.limit);
        (limit > 0).then(|| RestartWatch {
            limit,
            grace_until: started + Duration::from_nanos(count(config.grace.as_nanos())),
            ignore_warnings: config.ignore_warnings,
            unhealthy: 0,
        })
    }

    /// Applies a reported status at `now`; true when the task must be restarted (the count
    /// then starts over).
    pub fn observe(&mut self, status: &str, now: Instant) -> bool {
        let unhealthy =
            status == CHECK_FAILURE || (status == CHECK_WARNING && !self.ignore_warnings);
        if !unhealthy {
            self.unhealthy = 0;
            return false;
        }
        if now < self.grace_until {
            return false;
        }
        self.unhealthy = self.unhealthy.saturating_add(1);
        if self.unhealthy >= self.limit {
            self.unhealthy = 0;
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_thresholds_every_outcome_is_reported_at_once() {
        let mut tracker = StatusTracker::new(initial_status(""), 0, 0, 0);
        assert_eq!(tracker.status(), CHECK_PENDING);
        assert_eq!(tracker.observe(Outcome::Success), CHECK_SUCCESS);
        assert_eq!(tracker.observe(Outcome::Warning), CHECK_WARNING);
        assert_eq!(tracker.observe(Outcome::Failure), CHECK_FAILURE);
        assert_eq!(tracker.observe(Outcome::Success), CHECK_SUCCESS);
    }

    #[test]
    fn success_before_passing_holds_the_previous_status() {
        let mut tracker = StatusTracker::new(initial_status("critical"), 3, 0, 0);
        assert_eq!(tracker.status(), CHECK_FAILURE);
        assert_eq!(tracker.observe(Outcome::Success), CHECK_FAILURE);
        assert_eq!(tracker.observe(Outcome::Success), CHECK_FAILURE);
        // A failure in between starts the count over.
        assert_eq!(tracker.observe(Outcome::Failure), CHECK_FAILURE);
        assert_eq!(tracker.observe(Outcome::Success), CHECK_FAILURE);
        assert_eq!(tracker.observe(Outcome::Success), CHECK_FAILURE);
        assert_eq!(tracker.observe(Outcome::Success), CHECK_SUCCESS);
    }

    #[test]
    fn failures_before_warning_and_critical_step_down() {
        let mut tracker = StatusTracker::new(initial_status("passing"), 0, 2, 4);
        assert_eq!(tracker.observe(Outcome::Failure), CHECK_SUCCESS);
        assert_eq!(tracker.observe(Outcome::Failure), CHECK_WARNING);
        assert_eq!(tracker.observe(Outcome::Failure), CHECK_WARNING);
        assert_eq!(tracker.observe(Outcome::Failure), CHECK_FAILURE);
        assert_eq!(tracker.observe(Outcome::Success), CHECK_SUCCESS);
        assert_eq!(tracker.observe(Outcome::Failure), CHECK_SUCCESS);
    }

    #[test]
    fn a_restored_status_is_kept_until_thresholds_say_otherwise() {
        let mut tracker = StatusTracker::new(known_status("success"), 0, 0, 2);
        assert_eq!(tracker.observe(Outcome::Failure), CHECK_SUCCESS);
        assert_eq!(known_status("bogus"), CHECK_PENDING);
    }

    fn restart(limit: i64, grace_secs: i64, ignore_warnings: bool) -> CheckRestart {
        CheckRestart {
            limit,
            grace: drover_structs::DurationNs::from_secs(grace_secs),
            ignore_warnings,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn check_restart_waits_out_grace_then_counts_to_limit() {
        let started = Instant::now();
        let mut watch = RestartWatch::new(Some(&restart(2, 10, false)), started).unwrap();
        // Inside grace nothing counts.
        tokio::time::advance(Duration::from_secs(5)).await;
        assert!(!watch.observe(CHECK_FAILURE, Instant::now()));
        tokio::time::advance(Duration::from_secs(5)).await;
        assert!(!watch.observe(CHECK_FAILURE, Instant::now()));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(watch.observe(CHECK_FAILURE, Instant::now()));
        // The count starts over after a restart, and a healthy result resets it.
        assert!(!watch.observe(CHECK_FAILURE, Instant::now()));
        assert!(!watch.observe(CHECK_SUCCESS, Instant::now()));
        assert!(!watch.observe(CHECK_FAILURE, Instant::now()));
        assert!(watch.observe(CHECK_FAILURE, Instant::now()));
    }

    #[tokio::test(start_paused = true)]
    async fn warnings_count_unless_ignored() {
        let now = Instant::now();
        let mut counting = RestartWatch::new(Some(&restart(1, 0, false)), now).unwrap();
        assert!(counting.observe(CHECK_WARNING, now));
        let mut ignoring = RestartWatch::new(Some(&restart(1, 0, true)), now).unwrap();
        assert!(!ignoring.observe(CHECK_WARNING, now));
        assert!(ignoring.observe(CHECK_FAILURE, now));
        assert!(!ignoring.observe(CHECK_PENDING, now));
    }

    #[test]
    fn no_block_or_a_zero_limit_watches_nothing() {
        let now = Instant::now();
        assert!(RestartWatch::new(None, now).is_none());
        assert!(RestartWatch::new(Some(&restart(0, 0, false)), now).is_none());
    }
}
