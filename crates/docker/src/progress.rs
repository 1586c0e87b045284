//! Progress of one image pull as Nomad's docker driver tracks it: each layer's state and bytes
//! from the engine's pull stream, summarised as Nomad words it ("Pulled 1/3 (1.2MiB/5MiB)
//! layers: 0 waiting/2 pulling - est 3.2s remaining"), and the time of the last message. The
//! [`watch`] of a pull's stream reports that summary as a "Docker image pull progress: …"
//! event every two minutes of a slow pull, gives up a pull without activity for
//! `pull_activity_timeout`, and one not done within `image_pull_timeout`.
//!
//! Not for: talking to the engine (the driver opens the stream) or wording an engine's error
//! (the driver does, as Nomad). The summary takes the time as an argument and the watch runs on
//! tokio's clock, so both are tested without waiting.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use bollard::errors::Error as EngineError;
use bollard::models::CreateImageInfo;
use drover_driver::{DriverEvent, DriverEvents};
use futures_util::{Stream, StreamExt};
use tokio::time::Instant;

/// How often a slow pull's progress is reported as a task event (Nomad's).
pub const SLOW_REPORT_INTERVAL: Duration = Duration::from_secs(2 * 60);
/// How often the progress is looked at (Nomad's report interval).
pub const CHECK_INTERVAL: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum LayerStatus {
    Starting,
    Waiting,
    Downloading,
    Verifying,
    Downloaded,
    Extracting,
    Complete,
    Exists,
}

impl LayerStatus {
    fn of(status: &str) -> Option<Self> {
        Some(match status {
            "Pulling fs layer" => Self::Starting,
            "Waiting" => Self::Waiting,
            "Downloading" => Self::Downloading,
            "Verifying Checksum" => Self::Verifying,
            "Download complete" => Self::Downloaded,
            "Extracting" => Self::Extracting,
            "Pull complete" => Self::Complete,
            "Already exists" => Self::Exists,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, Copy)]
struct Layer {
    status: LayerStatus,
    current: i64,
    total: i64,
}

/// What the pull stream said so far.
#[derive(Debug)]
pub struct PullProgress {
    started: Instant,
    last_message: Option<Instant>,
    layers: HashMap<String, Layer>,
}

impl PullProgress {
    pub fn new(now: Instant) -> Self {
        PullProgress {
            started: now,
            last_message: None,
            layers: HashMap::new(),
        }
    }

    /// One message of the pull stream: its layer ID, status and byte progress.
    pub fn observe(
        &mut self,
        now: Instant,
        id: Option<&str>,
        status: Option<&str>,
        current: Option<i64>,
        total: Option<i64>,
    ) {
        self.last_message = Some(now);
        let Some(status) = status.and_then(LayerStatus::of) else {
            return;
        };
        let layer = self
            .layers
            .entry(id.unwrap_or_default().to_string())
            .or_insert(Layer {
                status,
                current: 0,
                total: 0,
            });
        layer.status = status;
        match status {
            LayerStatus::Downloading => {
                if let (Some(current), Some(total)) = (current, total) {
                    layer.current = current;
                    layer.total = total;
                }
            }
            LayerStatus::Downloaded => layer.current = layer.total,
            _ => {}
        }
    }

    /// When the stream last said something (the pull's start before its first message).
    pub fn last_activity(&self) -> Instant {
        self.last_message.unwrap_or(self.started)
    }

    /// Nomad's summary of the pull at `now`.
    pub fn summary(&self, now: Instant) -> String {
        if self.last_message.is_none() {
            return "No progress".to_string();
        }
        let (mut pulled, mut pulling, mut waiting) = (0, 0, 0);
        for layer in self.layers.values() {
            match layer.status {
                LayerStatus::Starting | LayerStatus::Waiting => waiting += 1,
                LayerStatus::Downloading | LayerStatus::Verifying => pulling += 1,
                _ => pulled += 1,
            }
        }
        let current: i64 = self.layers.values().map(|layer| layer.current).sum();
        let total: i64 = self.layers.values().map(|layer| layer.total).sum();
        let elapsed = i128::try_from(now.saturating_duration_since(self.started).as_nanos())
            .unwrap_or(i128::MAX);
        let estimate = if current == 0 {
            0
        } else {
            // As Nomad computes it: integer nanoseconds per byte, times the bytes in all.
            (elapsed / i128::from(current)).saturating_mul(i128::from(total)) - elapsed
        };
        let mut text = format!(
            "Pulled {pulled}/{} ({}/{}) layers: {waiting} waiting/{pulling} pulling",
            self.layers.len(),
            bytes_size(current),
            bytes_size(total),
        );
        if estimate > 0 {
            text.push_str(&format!(
                " - est {:.1}s remaining",
                estimate as f64 / 1_000_000_000.0
            ));
        }
        text
    }
}

/// The time limits of one pull.
#[derive(Debug, Clone, Copy)]
pub struct PullLimits {
    /// `image_pull_timeout`: the whole pull.
    pub pull_timeout: Duration,
    /// The client's `pull_activity_timeout`: the longest silence of the stream.
    pub activity_timeout: Duration,
}

/// Why a watched pull did not finish.
#[derive(Debug)]
pub enum PullFailure {
    /// The engine answered the request with an error.
    Engine(EngineError),
    /// The pull stream carried an error message.
    Stream(String),
    /// Nothing came for the activity timeout (given here).
    Inactive(Duration),
    /// The pull timeout passed.
    DeadlineExceeded,
}

/// Follows a pull's stream until it ends, as Nomad's docker coordinator does: every
/// [`CHECK_INTERVAL`] it gives up a pull silent for longer than the activity timeout, and
/// reports the progress as a driver event when [`SLOW_REPORT_INTERVAL`] passed since the last
/// report; the pull timeout ends it whatever it is doing.
pub async fn watch<S>(
    stream: S,
    image: &str,
    limits: PullLimits,
    events: &DriverEvents,
) -> Result<(), PullFailure>
where
    S: Stream<Item = Result<CreateImageInfo, EngineError>>,
{
    let mut stream = std::pin::pin!(stream);
    let started = Instant::now();
    let deadline = started + limits.pull_timeout;
    let mut progress = PullProgress::new(started);
    let mut last_slow_report = started;
    let mut checks = tokio::time::interval_at(started + CHECK_INTERVAL, CHECK_INTERVAL);
    loop {
        tokio::select! {
            item = stream.next() => match item {
                None => return Ok(()),
                Some(Err(error)) => return Err(PullFailure::Engine(error)),
                Some(Ok(info)) => {
                    if let Some(message) = info.error_detail.and_then(|detail| detail.message) {
                        return Err(PullFailure::Stream(message));
                    }
                    let detail = info.progress_detail.unwrap_or_default();
                    progress.observe(
                        Instant::now(),
                        info.id.as_deref(),
                        info.status.as_deref(),
                        detail.current,
                        detail.total,
                    );
                }
            },
            _ = checks.tick() => {
                let now = Instant::now();
                if now.saturating_duration_since(progress.last_activity()) > limits.activity_timeout {
                    tracing::error!(image, last_event = %progress.summary(now), "image pull aborted due to inactivity");
                    return Err(PullFailure::Inactive(limits.activity_timeout));
                }
                if now.saturating_duration_since(last_slow_report) > SLOW_REPORT_INTERVAL {
                    events.emit(DriverEvent {
                        message: format!("Docker image pull progress: {}", progress.summary(now)),
                        annotations: BTreeMap::from([("image".to_string(), image.to_string())]),
                    });
                    last_slow_report = now;
                }
                tracing::debug!(image, message = %progress.summary(now), "image pull progress");
            }
            () = tokio::time::sleep_until(deadline) => return Err(PullFailure::DeadlineExceeded),
        }
    }
}

/// A byte count as Docker's `units.BytesSize` writes it: binary units, four significant
/// digits, no trailing zeros (`0B`, `512B`, `1.5KiB`, `2.346MiB`).
pub fn bytes_size(bytes: i64) -> String {
    const UNITS: [&str; 9] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"];
    let mut size = bytes as f64;
    let mut unit = 0;
    while size >= 1024.0 && unit < UNITS.len() - 1 {
        size /= 1024.0;
        unit += 1;
    }
    format!("{}{}", significant(size, 4), UNITS[unit])
}

/// `%.<digits>g` for numbers below 10 000: that many significant digits, trailing zeros cut.
fn significant(value: f64, digits: i32) -> String {
    if value == 0.0 {
        return "0".to_string();
    }
    let magnitude = value.abs().log10().floor() as i32;
    let decimals = usize::try_from((digits - 1 - magnitude).max(0)).unwrap_or(0);
    let text = format!("{value:.decimals$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::sync::{Arc, Mutex};

    use super::*;

    const LIMITS: PullLimits = PullLimits {
        pull_timeout: Duration::from_secs(30 * 60),
        activity_timeout: Duration::from_secs(2 * 60),
    };

    /// A pull stream saying `(after, status, current, total)` of one layer in turn, each
    /// `after` the one before, then ending.
    fn pull_stream(
        steps: Vec<(Duration, &'static str, i64, i64)>,
    ) -> impl Stream<Item = Result<CreateImageInfo, EngineError>> {
        futures_util::stream::iter(steps).then(|(after, status, current, total)| async move {
            tokio::time::sleep(after).await;
            Ok(CreateImageInfo {
                id: Some("layer".to_string()),
                status: Some(status.to_string()),
                progress_detail: Some(bollard::models::ProgressDetail {
                    current: Some(current),
                    total: Some(total),
                }),
                ..CreateImageInfo::default()
            })
        })
    }

    fn recorded() -> (DriverEvents, Arc<Mutex<Vec<DriverEvent>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&seen);
        (
            DriverEvents::new(move |event| sink.lock().unwrap().push(event)),
            seen,
        )
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_pull_is_reported_every_two_minutes_until_it_ends() {
        // Five minutes of a byte every 30 s: reports after 2m10s and 4m20s (the first checks
        // past two minutes since the last report), none for a pull already done.
        let mut steps = vec![(Duration::ZERO, "Pulling fs layer", 0, 0)];
        steps.extend((1..=10).map(|step| (Duration::from_secs(30), "Downloading", step, 1024)));
        steps.push((Duration::from_secs(1), "Pull complete", 1024, 1024));
        let (events, seen) = recorded();
        let started = Instant::now();
        watch(pull_stream(steps), "x:1", LIMITS, &events)
            .await
            .unwrap();
        assert_eq!(started.elapsed(), Duration::from_secs(301));
        let seen = seen.lock().unwrap();
        let messages: Vec<&str> = seen.iter().map(|event| event.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "Docker image pull progress: Pulled 0/1 (4B/1KiB) layers: 0 waiting/1 pulling - est 33150.0s remaining",
                "Docker image pull progress: Pulled 0/1 (8B/1KiB) layers: 0 waiting/1 pulling - est 33020.0s remaining",
            ]
        );
        assert_eq!(seen[0].annotations["image"], "x:1");
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_pull_is_given_up_after_the_activity_timeout() {
        let steps = vec![
            (Duration::ZERO, "Pulling fs layer", 0, 0),
            (Duration::from_secs(3600), "Pull complete", 0, 0),
        ];
        let started = Instant::now();
        let failure = watch(pull_stream(steps), "x:1", LIMITS, &DriverEvents::default())
            .await
            .unwrap_err();
        assert!(
            matches!(failure, PullFailure::Inactive(timeout) if timeout == LIMITS.activity_timeout),
            "{failure:?}"
        );
        // Noticed at the first check past the timeout.
        assert_eq!(started.elapsed(), Duration::from_secs(130));
    }

    #[tokio::test(start_paused = true)]
    async fn a_pull_still_going_at_its_timeout_is_ended_there() {
        let steps = (0..100)
            .map(|step| (Duration::from_secs(10), "Downloading", step, 1_000))
            .collect();
        let limits = PullLimits {
            pull_timeout: Duration::from_secs(95),
            ..LIMITS
        };
        let started = Instant::now();
        let failure = watch(pull_stream(steps), "x:1", limits, &DriverEvents::default())
            .await
            .unwrap_err();
        assert!(
            matches!(failure, PullFailure::DeadlineExceeded),
            "{failure:?}"
        );
        assert_eq!(started.elapsed(), Duration::from_secs(95));
    }

    #[test]
    fn sizes_read_as_docker_writes_them() {
        assert_eq!(bytes_size(0), "0B");
        assert_eq!(bytes_size(512), "512B");
        assert_eq!(bytes_size(1536), "1.5KiB");
        assert_eq!(bytes_size(2 * 1024 * 1024), "2MiB");
        assert_eq!(bytes_size(2_459_648), "2.346MiB");
        assert_eq!(bytes_size(5 * 1024 * 1024 * 1024), "5GiB");
    }

    #[test]
    fn a_pull_is_summarised_as_nomad_does() {
        let start = Instant::now();
        let mut progress = PullProgress::new(start);
        assert_eq!(progress.summary(start), "No progress");
        let at = |seconds| start + Duration::from_secs(seconds);
        progress.observe(at(1), Some("a"), Some("Pulling fs layer"), None, None);
        progress.observe(at(1), Some("b"), Some("Pulling fs layer"), None, None);
        progress.observe(at(1), Some("c"), Some("Waiting"), None, None);
        progress.observe(
            at(2),
            Some("a"),
            Some("Downloading"),
            Some(1024 * 1024),
            Some(4 * 1024 * 1024),
        );
        progress.observe(at(2), Some("b"), Some("Already exists"), None, None);
        assert_eq!(
            progress.summary(at(4)),
            "Pulled 1/3 (1MiB/4MiB) layers: 1 waiting/1 pulling - est 12.0s remaining"
        );
        assert_eq!(progress.last_activity(), at(2));
        progress.observe(at(5), Some("a"), Some("Download complete"), None, None);
        assert_eq!(
            progress.summary(at(5)),
            "Pulled 2/3 (4MiB/4MiB) layers: 1 waiting/0 pulling"
        );
        // Messages that are not a layer's state still count as activity.
        progress.observe(at(9), None, Some("Digest: sha256:00"), None, None);
        assert_eq!(progress.last_activity(), at(9));
    }
}
