//! Events a driver reports while it starts or re-attaches to a task (Nomad's
//! `drivers.TaskEvent`, such as the docker driver's "Downloading image" or its wait for an
//! engine that does not answer), which the client records as "Driver" task events.
//!
//! Not for: the task's lifecycle events (the client makes those).

use std::collections::BTreeMap;
use std::sync::Arc;

/// One driver event: a message and its annotations (Nomad's `Annotations`, e.g. `image`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DriverEvent {
    pub message: String,
    pub annotations: BTreeMap<String, String>,
}

/// Where a driver sends its events during a start or a re-attach. The default drops them.
#[derive(Clone)]
pub struct DriverEvents(Arc<dyn Fn(DriverEvent) + Send + Sync>);

impl DriverEvents {
    pub fn new(sink: impl Fn(DriverEvent) + Send + Sync + 'static) -> Self {
        DriverEvents(Arc::new(sink))
    }

    pub fn emit(&self, event: DriverEvent) {
        (self.0)(event);
    }
}

impl Default for DriverEvents {
    fn default() -> Self {
        DriverEvents::new(|_| {})
    }
}

impl std::fmt::Debug for DriverEvents {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("DriverEvents")
    }
}

/// Sinks are not data: any two compare equal, so a launch spec holding one still compares by
/// what it asks for.
impl PartialEq for DriverEvents {
    fn eq(&self, _other: &Self) -> bool {
        true
    }
}
