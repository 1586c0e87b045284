//! Wall-clock time for the server's timestamps, replaceable in tests.

/// Wall-clock time for the timestamps the server writes. Timers use tokio time instead, so
/// tests run on paused time.
pub trait Clock: Send + Sync + 'static {
    fn now_unix_ns(&self) -> i64;
}

/// The system clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_unix_ns(&self) -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|elapsed| i64::try_from(elapsed.as_nanos()).unwrap_or(i64::MAX))
            .unwrap_or(0)
    }
}
