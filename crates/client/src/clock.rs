//! Wall-clock time for task event timestamps and `StartedAt`/`FinishedAt`.
//!
//! Durations (restart delays, kill timeouts, shutdown delays, backoff) never come from here: they
//! go through `tokio::time`, so tests pause and advance them. This trait only answers "what time
//! is it", as Unix nanoseconds, the unit Nomad's JSON uses for `TaskEvent.Time`.
//!
//! **Not** a scheduler or timer source.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// A source of wall-clock time.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Current wall-clock time as nanoseconds since the Unix epoch.
    fn now_unix_nanos(&self) -> i64;
}

/// Shared clock handle, cloned into every runner.
pub type SharedClock = Arc<dyn Clock>;

/// The real clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_unix_nanos(&self) -> i64 {
        match SystemTime::now().duration_since(UNIX_EPOCH) {
            Ok(since_epoch) => i64::try_from(since_epoch.as_nanos()).unwrap_or(i64::MAX),
            // A clock set before 1970 is reported as the epoch rather than a negative time.
            Err(_) => 0,
        }
    }
}

/// A clock for tests that follows `tokio::time`: it starts at a fixed wall-clock instant and
/// advances exactly as (possibly paused) tokio time advances, so event timestamps line up with
/// the simulated delays.
#[derive(Debug, Clone)]
pub struct TokioFollowingClock {
    base_unix_nanos: i64,
    base_instant: tokio::time::Instant,
}

impl TokioFollowingClock {
    /// A clock reading `base_unix_nanos` now (in tokio time).
    pub fn starting_at(base_unix_nanos: i64) -> Self {
        TokioFollowingClock {
            base_unix_nanos,
            base_instant: tokio::time::Instant::now(),
        }
    }
}

impl Clock for TokioFollowingClock {
    fn now_unix_nanos(&self) -> i64 {
        let elapsed = tokio::time::Instant::now().saturating_duration_since(self.base_instant);
        self.base_unix_nanos
            .saturating_add(i64::try_from(elapsed.as_nanos()).unwrap_or(i64::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn following_clock_advances_with_paused_tokio_time() {
        let clock = TokioFollowingClock::starting_at(1_000);
        assert_eq!(clock.now_unix_nanos(), 1_000);
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(clock.now_unix_nanos(), 1_000 + 2_000_000_000);
    }

    #[test]
    fn system_clock_is_after_2020() {
        assert!(SystemClock.now_unix_nanos() > 1_577_836_800_000_000_000);
    }
}
