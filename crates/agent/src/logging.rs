//! The agent's log: one `tracing` subscriber per process ([`init`]) writing to stderr at the
//! agent's `log_level` (`log_json` for JSON lines), and a [`LogHub`] that hands every event to
//! the `GET /v1/agent/monitor` streams, each at its own level, whatever the agent's own level.
//!
//! The hub is a per-layer filter over the registry: an event reaches it only while a monitor
//! that wants its level is listening (so a quiet agent pays nothing for debug events), and is
//! then formatted once per format and broadcast. A monitor that falls behind loses lines and is
//! told how many, as Nomad's monitor does.
//!
//! Not here: the HTTP side (`monitor`).

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::broadcast;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::{Context, SubscriberExt as _};
use tracing_subscriber::util::SubscriberInitExt as _;

/// A log level as Nomad names them (`TRACE`, `DEBUG`, `INFO`, `WARN`, `ERROR`, any case).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    Error = 0,
    Warn = 1,
    Info = 2,
    Debug = 3,
    Trace = 4,
}

/// An unknown log level name.
#[derive(Debug, thiserror::Error)]
#[error("Unknown log level: {0}")]
pub struct UnknownLogLevel(pub String);

impl std::str::FromStr for LogLevel {
    type Err = UnknownLogLevel;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim().to_ascii_lowercase().as_str() {
            "trace" => Ok(LogLevel::Trace),
            "debug" => Ok(LogLevel::Debug),
            "info" => Ok(LogLevel::Info),
            "warn" => Ok(LogLevel::Warn),
            "error" | "err" => Ok(LogLevel::Error),
            _ => Err(UnknownLogLevel(text.to_owned())),
        }
    }
}

impl LogLevel {
    fn of(level: &Level) -> Self {
        match *level {
            Level::ERROR => LogLevel::Error,
            Level::WARN => LogLevel::Warn,
            Level::INFO => LogLevel::Info,
            Level::DEBUG => LogLevel::Debug,
            Level::TRACE => LogLevel::Trace,
        }
    }

    /// Nomad's (hclog's) name in text lines.
    pub fn name(self) -> &'static str {
        match self {
            LogLevel::Error => "ERROR",
            LogLevel::Warn => "WARN",
            LogLevel::Info => "INFO",
            LogLevel::Debug => "DEBUG",
            LogLevel::Trace => "TRACE",
        }
    }
}

/// One log event, formatted both ways.
#[derive(Debug)]
pub struct LogLine {
    pub level: LogLevel,
    /// hclog's text form: `2026-11-24T13:00:00.123Z [INFO]  target: message: key=value`.
    pub text: String,
    /// hclog's JSON form: `{"@level":"info","@message":…,"@module":…,"@timestamp":…,…}`.
    pub json: String,
}

/// Where log events go to the monitors. Cheap to clone.
#[derive(Debug, Clone)]
pub struct LogHub {
    inner: Arc<HubInner>,
}

#[derive(Debug)]
struct HubInner {
    sender: broadcast::Sender<Arc<LogLine>>,
    /// How many monitors listen at each level (indexed by `LogLevel as usize`).
    listeners: [AtomicUsize; 5],
}

/// A monitor's subscription; dropping it stops the hub from formatting for its level.
pub struct LogSubscription {
    hub: LogHub,
    level: LogLevel,
    pub receiver: broadcast::Receiver<Arc<LogLine>>,
}

impl Drop for LogSubscription {
    fn drop(&mut self) {
        self.hub.inner.listeners[self.level as usize].fetch_sub(1, Ordering::SeqCst);
    }
}

impl Default for LogHub {
    fn default() -> Self {
        Self::new()
    }
}

impl LogHub {
    pub fn new() -> Self {
        let (sender, _) = broadcast::channel(512);
        LogHub {
            inner: Arc::new(HubInner {
                sender,
                listeners: Default::default(),
            }),
        }
    }

    /// Listens to every event at `level` or more severe from now on.
    pub fn subscribe(&self, level: LogLevel) -> LogSubscription {
        let receiver = self.inner.sender.subscribe();
        self.inner.listeners[level as usize].fetch_add(1, Ordering::SeqCst);
        LogSubscription {
            hub: self.clone(),
            level,
            receiver,
        }
    }

    /// Whether some monitor wants events of `level`.
    fn wanted(&self, level: LogLevel) -> bool {
        self.inner.listeners[level as usize..]
            .iter()
            .any(|count| count.load(Ordering::Relaxed) > 0)
    }
}

/// The layer that feeds a [`LogHub`].
struct HubLayer {
    hub: LogHub,
}

#[derive(Default)]
struct Fields {
    message: String,
    pairs: Vec<(&'static str, String)>,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.message = format!("{value:?}");
        } else {
            self.pairs.push((field.name(), format!("{value:?}")));
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message = value.to_owned();
        } else {
            self.pairs.push((field.name(), value.to_owned()));
        }
    }
}

impl<S: Subscriber> Layer<S> for HubLayer {
    fn on_event(&self, event: &Event<'_>, _context: Context<'_, S>) {
        let metadata = event.metadata();
        let level = LogLevel::of(metadata.level());
        let mut fields = Fields::default();
        event.record(&mut fields);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|elapsed| i64::try_from(elapsed.as_nanos()).unwrap_or(i64::MAX))
            .unwrap_or(0);
        // Milliseconds, as hclog stamps its lines.
        let timestamp = drover_structs::Timestamp::from_unix_nanos(now - now.rem_euclid(1_000_000))
            .to_rfc3339_nanos();
        let module = metadata.target();
        let mut text = format!("{timestamp} [{}] ", level.name());
        // hclog pads the level to five characters.
        if level.name().len() == 4 {
            text.push(' ');
        }
        let _ = write!(text, "{module}: {}", fields.message);
        for (position, (key, value)) in fields.pairs.iter().enumerate() {
            let separator = if position == 0 { ": " } else { " " };
            let _ = write!(text, "{separator}{key}={value}");
        }
        text.push('\n');
        let mut json = serde_json::Map::new();
        json.insert("@level".into(), level.name().to_ascii_lowercase().into());
        json.insert("@message".into(), fields.message.into());
        json.insert("@module".into(), module.into());
        json.insert("@timestamp".into(), timestamp.into());
        for (key, value) in fields.pairs {
            json.insert(key.into(), value.into());
        }
        let json = format!("{}\n", serde_json::Value::Object(json));
        // No monitor listening any more is not an error.
        let _ = self
            .hub
            .inner
            .sender
            .send(Arc::new(LogLine { level, text, json }));
    }
}

/// The level of the agent's stderr log, changed in place by a reload (`SIGHUP`,
/// `/v1/agent/reload`): events are checked against it as they happen.
#[derive(Debug, Clone)]
pub struct StderrLevel(Arc<AtomicUsize>);

impl StderrLevel {
    fn new(level: LogLevel) -> Self {
        StderrLevel(Arc::new(AtomicUsize::new(level as usize)))
    }

    /// The level now.
    pub fn get(&self) -> LogLevel {
        match self.0.load(Ordering::Relaxed) {
            0 => LogLevel::Error,
            1 => LogLevel::Warn,
            2 => LogLevel::Info,
            3 => LogLevel::Debug,
            _ => LogLevel::Trace,
        }
    }

    /// Writes events of `level` and more severe from now on.
    pub fn set(&self, level: LogLevel) {
        self.0.store(level as usize, Ordering::Relaxed);
    }

    fn allows(&self, level: &Level) -> bool {
        LogLevel::of(level) as usize <= self.0.load(Ordering::Relaxed)
    }
}

/// Installs the process's subscriber: stderr at `level` (JSON lines with `json`), and `hub`;
/// answers the handle that changes the stderr level. A second call (a test starting two agents
/// in one process) keeps the first subscriber, and its handle then changes nothing.
pub fn init(level: LogLevel, json: bool, hub: &LogHub) -> StderrLevel {
    let stderr_level = StderrLevel::new(level);
    let allowed = stderr_level.clone();
    let filter = tracing_subscriber::filter::dynamic_filter_fn(move |metadata, _| {
        allowed.allows(metadata.level())
    });
    let stderr = if json {
        tracing_subscriber::fmt::layer()
            .json()
            .with_writer(std::io::stderr)
            .with_filter(filter)
            .boxed()
    } else {
        tracing_subscriber::fmt::layer()
            .with_ansi(false)
            .with_writer(std::io::stderr)
            .with_filter(filter)
            .boxed()
    };
    let wanted = hub.clone();
    let monitors =
        HubLayer { hub: hub.clone() }.with_filter(tracing_subscriber::filter::dynamic_filter_fn(
            move |metadata, _| wanted.wanted(LogLevel::of(metadata.level())),
        ));
    if tracing_subscriber::registry()
        .with(stderr)
        .with(monitors)
        .try_init()
        .is_err()
    {
        tracing::debug!("a log subscriber is already installed; keeping it");
    }
    stderr_level
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_parse_as_nomad_names_them() {
        assert_eq!("DEBUG".parse::<LogLevel>().unwrap(), LogLevel::Debug);
        assert_eq!("warn".parse::<LogLevel>().unwrap(), LogLevel::Warn);
        let error = "loud".parse::<LogLevel>().unwrap_err();
        assert_eq!(error.to_string(), "Unknown log level: loud");
    }

    #[test]
    fn the_hub_formats_only_what_a_monitor_listens_for() {
        let hub = LogHub::new();
        let subscriber =
            tracing_subscriber::registry().with(HubLayer { hub: hub.clone() }.with_filter(
                tracing_subscriber::filter::dynamic_filter_fn({
                    let hub = hub.clone();
                    move |metadata, _| hub.wanted(LogLevel::of(metadata.level()))
                }),
            ));
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!("before anyone listens");
            let mut monitor = hub.subscribe(LogLevel::Info);
            tracing::debug!("too verbose");
            tracing::info!(job_id = "web", "job registered");
            let line = monitor.receiver.try_recv().unwrap();
            assert!(
                line.text.contains("[INFO]  ") && line.text.contains("job registered: job_id=web"),
                "{}",
                line.text
            );
            let json: serde_json::Value = serde_json::from_str(&line.json).unwrap();
            assert_eq!(json["@level"], "info");
            assert_eq!(json["@message"], "job registered");
            assert_eq!(json["job_id"], "web");
            assert!(monitor.receiver.try_recv().is_err());
        });
    }
}
