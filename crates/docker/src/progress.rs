//! Progress of one image pull as Nomad's docker driver tracks it: each layer's state and bytes
//! from the engine's pull stream, summarised as Nomad words it ("Pulled 1/3 (1.2MiB/5MiB)
//! layers: 0 waiting/2 pulling - est 3.2s remaining"), which the driver reports as a
//! "Docker image pull progress: …" event every two minutes of a slow pull, and the time of the
//! last message, by which a pull without activity for `pull_activity_timeout` is given up.
//!
//! Not for: talking to the engine or emitting events (the driver does both); time is passed
//! in, so the summary is tested without waiting.

use std::collections::HashMap;
use std::time::Duration;

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
    use super::*;

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
