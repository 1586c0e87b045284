//! The restart tracker: given why a task stopped, decide whether it runs again, after what
//! delay, and with what reason (Nomad's reason strings, verbatim, because users grep for them).
//!
//! Rules (Nomad's `restart` block):
//! - `attempts` restarts are allowed within `interval`; the counter resets when a new interval
//!   begins. Past the limit, mode `fail` stops the task ("Exceeded allowed attempts 2 in interval
//!   30m0s and mode is \"fail\""), mode `delay` waits for the interval to end and goes on.
//! - Each restart within policy waits `delay` plus up to 25 % jitter (seeded RNG, injectable).
//! - A task that exits 0 is complete when it does not restart on success: batch and sysbatch
//!   tasks, ephemeral prestart/poststart tasks, and poststop tasks. Service tasks and sidecars
//!   restart on any exit.
//! - A start error that is not recoverable stops the task ("Error was unrecoverable").
//! - A restart the user asked for runs at once and does not count against the policy; a kill
//!   never restarts.
//!
//! **Drover extension — exponential backoff** (opt-in): when the policy carries a
//! [`RestartBackoff`], the n-th restart of an interval waits `delay * factor^(n-1)`, capped at
//! `max_delay`, before jitter. Without it the delay is constant, exactly as Nomad. Jobs turn it
//! on in the `restart` block, read by [`crate::taskrunner::restart_policy_settings`]:
//!
//! ```hcl
//! restart {
//!   attempts       = 10
//!   interval       = "30m"
//!   delay          = "5s"
//!   mode           = "delay"
//!   backoff_factor = 2      # drover extension, ≥ 1; absent: constant delay
//!   max_delay      = "5m"   # drover extension; default 30m
//! }
//! ```
//!
//! In JSON the fields are `BackoffFactor` and `MaxDelay`, omitted when unset, so a job that does
//! not use them has Nomad's exact shape (and Nomad ignores them). The task-meta keys
//! `drover.restart.backoff_factor` / `drover.restart.max_delay` are also read, for jobspecs that
//! must stay valid for Nomad's own parser.
//!
//! All time here is tokio time (paused in tests); the interval start is also kept as wall-clock
//! nanoseconds so it survives an agent restart (see [`RestartTrackerState`]).
//!
//! **Not** the place that sleeps or emits events: the task runner does that with the decision.

use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

/// Fraction of the delay added at most as jitter.
pub const RESTART_JITTER_FRACTION: f64 = 0.25;

/// Nomad: `attempts = 0`.
pub const REASON_NO_RESTARTS_ALLOWED: &str = "Policy allows no restarts";
/// Nomad: a start error that is not recoverable.
pub const REASON_UNRECOVERABLE_ERROR: &str = "Error was unrecoverable";
/// Nomad: a restart within the policy.
pub const REASON_WITHIN_POLICY: &str = "Restart within policy";
/// Nomad: mode `delay` past the attempts.
pub const REASON_DELAY: &str = "Exceeded allowed attempts, applying a delay";
/// Nomad: a batch task exiting 0.
pub const REASON_TERMINATED_SUCCESSFULLY: &str =
    "Restart unnecessary as task terminated successfully";

/// What happens once the attempts of an interval are used up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RestartMode {
    /// Stop restarting; the task fails.
    Fail,
    /// Wait until the interval ends, then restart.
    Delay,
}

/// Drover's opt-in exponential backoff.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RestartBackoff {
    /// Multiplier applied per restart within the interval (≥ 1).
    pub factor: f64,
    /// Cap on the backed-off delay (before jitter).
    pub max_delay: Duration,
}

/// The policy as the tracker uses it.
#[derive(Debug, Clone, PartialEq)]
pub struct RestartPolicySettings {
    pub attempts: u32,
    pub interval: Duration,
    pub delay: Duration,
    pub mode: RestartMode,
    pub backoff: Option<RestartBackoff>,
}

/// Why the task stopped, as the tracker needs to know it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskStopCause {
    /// The driver could not start the task.
    StartFailed { recoverable: bool },
    /// The task ran and exited.
    Exited { successful: bool },
    /// A user (or a hook) asked for a restart; does not count against the policy.
    RestartRequested,
    /// The task was killed; never restarted.
    Killed,
}

/// The tracker's verdict.
#[derive(Debug, Clone, PartialEq)]
pub enum RestartDecision {
    /// Run again after `delay` ("Restarting" event).
    Restart { delay: Duration, reason: String },
    /// Do not run again; the task failed ("Not Restarting" event, fails the task).
    NotRestarting { reason: String },
    /// Do not run again; the task completed.
    Complete { reason: String },
    /// The task was killed.
    Killed,
}

/// The persisted part of the tracker, so an agent restart neither forgets nor resets attempts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestartTrackerState {
    /// Restarts counted in the current interval.
    pub count_in_interval: u32,
    /// Wall-clock start of the current interval (Unix nanoseconds).
    pub interval_started_unix_nanos: i64,
}

/// Whether a task restarts after a successful exit, from its job type and lifecycle.
pub fn restarts_on_success(
    job_type: &str,
    lifecycle_hook: Option<&str>,
    lifecycle_sidecar: bool,
) -> bool {
    match lifecycle_hook {
        Some("prestart") | Some("poststart") => lifecycle_sidecar,
        Some("poststop") => false,
        _ => !matches!(job_type, "batch" | "sysbatch"),
    }
}

/// Restart bookkeeping for one task.
#[derive(Debug)]
pub struct RestartTracker {
    policy: RestartPolicySettings,
    restart_on_success: bool,
    count_in_interval: u32,
    interval_started: tokio::time::Instant,
    interval_started_unix_nanos: i64,
    rng: StdRng,
}

impl RestartTracker {
    /// A fresh tracker; `now_unix_nanos` is the wall-clock now, `seed` seeds the jitter.
    pub fn new(
        policy: RestartPolicySettings,
        restart_on_success: bool,
        now_unix_nanos: i64,
        seed: u64,
    ) -> Self {
        RestartTracker {
            policy,
            restart_on_success,
            count_in_interval: 0,
            interval_started: tokio::time::Instant::now(),
            interval_started_unix_nanos: now_unix_nanos,
            rng: StdRng::seed_from_u64(seed),
        }
    }

    /// Rebuilds a tracker from persisted state: the interval keeps running across the restart of
    /// the agent, measured by the wall clock.
    pub fn restore(
        policy: RestartPolicySettings,
        restart_on_success: bool,
        state: RestartTrackerState,
        now_unix_nanos: i64,
        seed: u64,
    ) -> Self {
        let elapsed_nanos = now_unix_nanos
            .saturating_sub(state.interval_started_unix_nanos)
            .max(0);
        let elapsed = Duration::from_nanos(u64::try_from(elapsed_nanos).unwrap_or(0));
        let now = tokio::time::Instant::now();
        let interval_started = now.checked_sub(elapsed).unwrap_or(now);
        RestartTracker {
            policy,
            restart_on_success,
            count_in_interval: state.count_in_interval,
            interval_started,
            interval_started_unix_nanos: state.interval_started_unix_nanos,
            rng: StdRng::seed_from_u64(seed),
        }
    }

    /// The state to persist.
    pub fn state(&self) -> RestartTrackerState {
        RestartTrackerState {
            count_in_interval: self.count_in_interval,
            interval_started_unix_nanos: self.interval_started_unix_nanos,
        }
    }

    /// Replaces the policy (the job was updated in place).
    pub fn set_policy(&mut self, policy: RestartPolicySettings) {
        self.policy = policy;
    }

    /// Decides what follows `cause`. `now_unix_nanos` is the wall clock, used only to persist
    /// the start of a new interval.
    pub fn decide(&mut self, cause: &TaskStopCause, now_unix_nanos: i64) -> RestartDecision {
        match cause {
            TaskStopCause::Killed => return RestartDecision::Killed,
            TaskStopCause::RestartRequested => {
                return RestartDecision::Restart {
                    delay: Duration::ZERO,
                    reason: String::new(),
                };
            }
            TaskStopCause::StartFailed { .. } | TaskStopCause::Exited { .. } => {}
        }
        let exited_successfully = matches!(cause, TaskStopCause::Exited { successful: true });

        if self.policy.attempts == 0 {
            if exited_successfully && !self.restart_on_success {
                return RestartDecision::Complete {
                    reason: REASON_NO_RESTARTS_ALLOWED.to_string(),
                };
            }
            return RestartDecision::NotRestarting {
                reason: REASON_NO_RESTARTS_ALLOWED.to_string(),
            };
        }

        let now = tokio::time::Instant::now();
        if now > self.interval_started + self.policy.interval {
            self.count_in_interval = 0;
            self.interval_started = now;
            self.interval_started_unix_nanos = now_unix_nanos;
        }
        self.count_in_interval += 1;

        match cause {
            TaskStopCause::StartFailed { recoverable: false } => {
                return RestartDecision::NotRestarting {
                    reason: REASON_UNRECOVERABLE_ERROR.to_string(),
                };
            }
            TaskStopCause::Exited { successful: true } if !self.restart_on_success => {
                return RestartDecision::Complete {
                    reason: REASON_TERMINATED_SUCCESSFULLY.to_string(),
                };
            }
            _ => {}
        }

        if self.count_in_interval > self.policy.attempts {
            return match self.policy.mode {
                RestartMode::Fail => RestartDecision::NotRestarting {
                    reason: format!(
                        "Exceeded allowed attempts {} in interval {} and mode is \"fail\"",
                        self.policy.attempts,
                        format_go_duration(self.policy.interval)
                    ),
                },
                RestartMode::Delay => RestartDecision::Restart {
                    delay: (self.interval_started + self.policy.interval)
                        .saturating_duration_since(now),
                    reason: REASON_DELAY.to_string(),
                },
            };
        }

        RestartDecision::Restart {
            delay: self.jittered(self.base_delay()),
            reason: REASON_WITHIN_POLICY.to_string(),
        }
    }

    fn base_delay(&self) -> Duration {
        let Some(backoff) = self.policy.backoff else {
            return self.policy.delay;
        };
        let exponent = i32::try_from(self.count_in_interval.saturating_sub(1)).unwrap_or(i32::MAX);
        let factor = backoff.factor.max(1.0).powi(exponent);
        let scaled = self.policy.delay.as_secs_f64() * factor;
        if !scaled.is_finite() || scaled >= backoff.max_delay.as_secs_f64() {
            return backoff.max_delay;
        }
        Duration::from_secs_f64(scaled)
    }

    fn jittered(&mut self, delay: Duration) -> Duration {
        let nanos = u64::try_from(delay.as_nanos()).unwrap_or(u64::MAX).max(1);
        let random_part = self.rng.gen_range(0..nanos) as f64 * RESTART_JITTER_FRACTION;
        Duration::from_nanos(nanos.saturating_add(random_part as u64))
    }
}

/// Formats a duration as Go's `time.Duration.String()` does ("30m0s", "1.5s", "250ms"), with
/// the one formatter of the workspace ([`drover_structs::DurationNs::to_go_string`]).
pub fn format_go_duration(duration: Duration) -> String {
    drover_structs::DurationNs::from_std(duration).to_go_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(attempts: u32, mode: RestartMode) -> RestartPolicySettings {
        RestartPolicySettings {
            attempts,
            interval: Duration::from_secs(30 * 60),
            delay: Duration::from_secs(1),
            mode,
            backoff: None,
        }
    }

    const FAILED_EXIT: TaskStopCause = TaskStopCause::Exited { successful: false };

    #[test]
    fn go_duration_format_matches_go() {
        assert_eq!(format_go_duration(Duration::from_secs(1800)), "30m0s");
        assert_eq!(format_go_duration(Duration::from_secs(1)), "1s");
        assert_eq!(format_go_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(format_go_duration(Duration::from_millis(250)), "250ms");
        assert_eq!(format_go_duration(Duration::from_secs(3600)), "1h0m0s");
        assert_eq!(format_go_duration(Duration::from_secs(90)), "1m30s");
        assert_eq!(format_go_duration(Duration::ZERO), "0s");
        assert_eq!(format_go_duration(Duration::from_nanos(5)), "5ns");
    }

    #[tokio::test(start_paused = true)]
    async fn mode_fail_allows_attempts_then_fails_with_nomads_reason() {
        let mut tracker = RestartTracker::new(policy(2, RestartMode::Fail), true, 0, 7);
        for _ in 0..2 {
            match tracker.decide(&FAILED_EXIT, 0) {
                RestartDecision::Restart { delay, reason } => {
                    assert_eq!(reason, REASON_WITHIN_POLICY);
                    assert!(delay >= Duration::from_secs(1));
                    assert!(delay <= Duration::from_millis(1250));
                }
                other => panic!("expected restart, got {other:?}"),
            }
        }
        assert_eq!(
            tracker.decide(&FAILED_EXIT, 0),
            RestartDecision::NotRestarting {
                reason: "Exceeded allowed attempts 2 in interval 30m0s and mode is \"fail\""
                    .to_string()
            }
        );
    }

    #[tokio::test(start_paused = true)]
    async fn mode_delay_waits_for_the_interval_then_counts_again() {
        let mut tracker = RestartTracker::new(policy(1, RestartMode::Delay), true, 0, 7);
        assert!(matches!(
            tracker.decide(&FAILED_EXIT, 0),
            RestartDecision::Restart { .. }
        ));
        tokio::time::advance(Duration::from_secs(60)).await;
        match tracker.decide(&FAILED_EXIT, 0) {
            RestartDecision::Restart { delay, reason } => {
                assert_eq!(reason, REASON_DELAY);
                assert_eq!(delay, Duration::from_secs(29 * 60));
            }
            other => panic!("expected delayed restart, got {other:?}"),
        }
        tokio::time::advance(Duration::from_secs(29 * 60 + 1)).await;
        match tracker.decide(&FAILED_EXIT, 0) {
            RestartDecision::Restart { reason, .. } => assert_eq!(reason, REASON_WITHIN_POLICY),
            other => panic!("expected restart in new interval, got {other:?}"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn batch_success_completes_and_service_success_restarts() {
        let success = TaskStopCause::Exited { successful: true };
        let mut batch = RestartTracker::new(policy(2, RestartMode::Fail), false, 0, 1);
        assert!(matches!(
            batch.decide(&success, 0),
            RestartDecision::Complete { .. }
        ));
        let mut service = RestartTracker::new(policy(2, RestartMode::Fail), true, 0, 1);
        assert!(matches!(
            service.decide(&success, 0),
            RestartDecision::Restart { .. }
        ));
        assert!(restarts_on_success("service", None, false));
        assert!(!restarts_on_success("batch", None, false));
        assert!(!restarts_on_success("service", Some("prestart"), false));
        assert!(restarts_on_success("batch", Some("prestart"), true));
        assert!(!restarts_on_success("service", Some("poststop"), false));
    }

    #[tokio::test(start_paused = true)]
    async fn unrecoverable_start_error_is_not_restarted_recoverable_is() {
        let mut tracker = RestartTracker::new(policy(2, RestartMode::Fail), true, 0, 1);
        assert!(matches!(
            tracker.decide(&TaskStopCause::StartFailed { recoverable: true }, 0),
            RestartDecision::Restart { .. }
        ));
        assert_eq!(
            tracker.decide(&TaskStopCause::StartFailed { recoverable: false }, 0),
            RestartDecision::NotRestarting {
                reason: REASON_UNRECOVERABLE_ERROR.to_string()
            }
        );
    }

    #[tokio::test(start_paused = true)]
    async fn user_restarts_do_not_count_and_kills_never_restart() {
        let mut tracker = RestartTracker::new(policy(1, RestartMode::Fail), true, 0, 1);
        for _ in 0..5 {
            assert_eq!(
                tracker.decide(&TaskStopCause::RestartRequested, 0),
                RestartDecision::Restart {
                    delay: Duration::ZERO,
                    reason: String::new()
                }
            );
        }
        assert!(matches!(
            tracker.decide(&FAILED_EXIT, 0),
            RestartDecision::Restart { .. }
        ));
        assert_eq!(
            tracker.decide(&TaskStopCause::Killed, 0),
            RestartDecision::Killed
        );
        assert!(matches!(
            tracker.decide(&FAILED_EXIT, 0),
            RestartDecision::NotRestarting { .. }
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn zero_attempts_allows_no_restarts() {
        let mut tracker = RestartTracker::new(policy(0, RestartMode::Fail), true, 0, 1);
        assert_eq!(
            tracker.decide(&FAILED_EXIT, 0),
            RestartDecision::NotRestarting {
                reason: REASON_NO_RESTARTS_ALLOWED.to_string()
            }
        );
    }

    #[tokio::test(start_paused = true)]
    async fn exponential_backoff_grows_and_caps() {
        let mut settings = policy(10, RestartMode::Fail);
        settings.backoff = Some(RestartBackoff {
            factor: 2.0,
            max_delay: Duration::from_secs(5),
        });
        let mut tracker = RestartTracker::new(settings, true, 0, 3);
        let mut lower_bounds = Vec::new();
        for _ in 0..5 {
            if let RestartDecision::Restart { delay, .. } = tracker.decide(&FAILED_EXIT, 0) {
                lower_bounds.push(delay);
            }
        }
        let expected_base = [1, 2, 4, 5, 5].map(Duration::from_secs);
        for (delay, base) in lower_bounds.iter().zip(expected_base) {
            assert!(
                *delay >= base && *delay <= base + base / 4,
                "{delay:?} vs {base:?}"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn restored_tracker_keeps_count_and_interval() {
        let mut tracker = RestartTracker::new(policy(2, RestartMode::Fail), true, 1_000, 1);
        tracker.decide(&FAILED_EXIT, 1_000);
        tracker.decide(&FAILED_EXIT, 1_000);
        let saved = tracker.state();
        assert_eq!(saved.count_in_interval, 2);
        let mut restored = RestartTracker::restore(
            policy(2, RestartMode::Fail),
            true,
            saved,
            1_000 + 60_000_000_000,
            1,
        );
        assert!(matches!(
            restored.decide(&FAILED_EXIT, 0),
            RestartDecision::NotRestarting { .. }
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn same_seed_same_jitter() {
        let mut first = RestartTracker::new(policy(5, RestartMode::Fail), true, 0, 42);
        let mut second = RestartTracker::new(policy(5, RestartMode::Fail), true, 0, 42);
        assert_eq!(
            first.decide(&FAILED_EXIT, 0),
            second.decide(&FAILED_EXIT, 0)
        );
    }
}
