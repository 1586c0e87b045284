//! The event stream: typed events produced by every write, kept in a bounded ring buffer that
//! subscribers read from a given index onwards (Nomad's `/v1/event/stream`).
//!
//! Events carry Nomad's wire shape (`Topic`, `Type`, `Key`, `Namespace`, `FilterKeys`, `Index`,
//! `Payload`). The buffer keeps the newest `capacity` events; a subscriber that falls behind
//! the buffer resumes at the oldest event still held and is told how many indexes it skipped.
//!
//! **Boundary**: no HTTP, no ndjson framing, no topic-string parsing; that is the API's job.
//! Filtering by topic and key is offered as [`EventFilter`] so the API need not re-implement it.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::error::StateError;

/// An event topic, serialized with Nomad's spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Topic {
    /// Jobs.
    Job,
    /// Allocations.
    Allocation,
    /// Evaluations.
    Evaluation,
    /// Deployments.
    Deployment,
    /// Nodes.
    Node,
    /// Node pools.
    NodePool,
    /// Service registrations.
    Service,
    /// Variables (metadata only).
    Variable,
}

impl Topic {
    /// Nomad's name for the topic.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Job => "Job",
            Self::Allocation => "Allocation",
            Self::Evaluation => "Evaluation",
            Self::Deployment => "Deployment",
            Self::Node => "Node",
            Self::NodePool => "NodePool",
            Self::Service => "Service",
            Self::Variable => "Variable",
        }
    }

    /// The topic named `name` (Nomad's spelling), if any.
    pub fn from_name(name: &str) -> Option<Self> {
        [
            Self::Job,
            Self::Allocation,
            Self::Evaluation,
            Self::Deployment,
            Self::Node,
            Self::NodePool,
            Self::Service,
            Self::Variable,
        ]
        .into_iter()
        .find(|topic| topic.as_str() == name)
    }
}

/// An event type, serialized with Nomad's spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EventType {
    /// A job was registered or updated.
    JobRegistered,
    /// A job was stopped or purged.
    JobDeregistered,
    /// An allocation was created by a plan.
    AllocationCreated,
    /// An allocation changed (server or client side).
    AllocationUpdated,
    /// An allocation's desired status changed.
    AllocationUpdateDesiredStatus,
    /// An evaluation was created or changed.
    EvaluationUpdated,
    /// A plan was applied.
    PlanResult,
    /// A node registered.
    NodeRegistration,
    /// A node deregistered.
    NodeDeregistration,
    /// A node's scheduling eligibility changed.
    NodeEligibility,
    /// A node's drain changed.
    NodeDrain,
    /// A node's status changed.
    NodeStreamEvent,
    /// A service registration was created or changed.
    ServiceRegistration,
    /// A service registration was removed.
    ServiceDeregistration,
    /// A deployment's status or counts changed.
    DeploymentStatusUpdate,
    /// A deployment's canaries were promoted.
    DeploymentPromotion,
    /// The health of a deployment's allocations was set.
    DeploymentAllocHealth,
    /// A variable was written, deleted, locked or unlocked.
    VariableUpdated,
}

/// One event, in Nomad's JSON shape (read back by a server that follows another's writes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Event {
    /// What kind of object changed.
    pub topic: Topic,
    /// What happened.
    #[serde(rename = "Type")]
    pub event_type: EventType,
    /// The object's ID (job ID, alloc ID, …).
    pub key: String,
    /// The object's namespace; empty for nodes.
    pub namespace: String,
    /// Further keys a filter may match (for allocations: the job ID and deployment ID).
    pub filter_keys: Vec<String>,
    /// The modify index of the write that produced the event.
    pub index: u64,
    /// `{"Job": …}`, `{"Allocation": …}`, … as Nomad sends it.
    pub payload: EventPayload,
}

/// An event's payload kept as compact JSON text. The buffer holds thousands of events, mostly
/// allocations, and a parsed JSON tree of one costs several times its text; subscribers only
/// ever write the payload out, so it is serialized once, when the event is made.
#[derive(Debug, Clone)]
pub struct EventPayload(Box<serde_json::value::RawValue>);

impl EventPayload {
    /// `{"<name>": value}`.
    pub fn named<T: Serialize + ?Sized>(name: &str, value: &T) -> Result<Self, serde_json::Error> {
        let object: std::collections::BTreeMap<&str, &T> = [(name, value)].into_iter().collect();
        serde_json::value::to_raw_value(&object).map(Self)
    }

    /// The payload of an already built JSON value.
    pub fn from_value(value: &serde_json::Value) -> Result<Self, serde_json::Error> {
        serde_json::value::to_raw_value(value).map(Self)
    }

    /// A `null` payload.
    pub fn null() -> Self {
        Self(serde_json::value::RawValue::NULL.to_owned())
    }

    /// The JSON text.
    pub fn json(&self) -> &str {
        self.0.get()
    }

    /// The payload parsed back into a JSON value (`Null` if the text were ever not JSON, which
    /// [`named`](Self::named) and [`from_value`](Self::from_value) rule out).
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::from_str(self.json()).unwrap_or(serde_json::Value::Null)
    }
}

/// An event payload (`{"<name>": value}`); a value that does not encode is an error naming
/// the table it was written to.
pub(crate) fn payload<T: serde::Serialize>(
    table: &'static str,
    name: &str,
    value: &T,
) -> Result<EventPayload, StateError> {
    EventPayload::named(name, value).map_err(|error| StateError::Encode {
        table,
        reason: error.to_string(),
    })
}

impl PartialEq for EventPayload {
    fn eq(&self, other: &Self) -> bool {
        self.json() == other.json()
    }
}

impl Serialize for EventPayload {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for EventPayload {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Box::<serde_json::value::RawValue>::deserialize(deserializer).map(Self)
    }
}

/// Which events a subscriber wants: a list of `(topic, key)` pairs where `None` means any.
///
/// An empty filter matches every event (Nomad's behaviour without a `topic` parameter).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventFilter {
    /// The accepted `(topic, key)` pairs; `None` is the `*` wildcard.
    pub topics: Vec<(Option<Topic>, Option<String>)>,
    /// Topics the caller named that drover publishes no events of (Nomad accepts any name):
    /// they match nothing, so a filter of these alone passes no event.
    pub unknown_topics: Vec<String>,
    /// Only events of this namespace (plus namespace-less ones); `None` for all.
    pub namespace: Option<String>,
    /// The subscriber's right to each event that passes the rest of the filter (an ACL's
    /// per-event check); `None` sees every one.
    pub access: Option<EventAccess>,
}

/// A subscriber's right to see one event (Nomad's subscription `FilterFn`: a token's
/// variables rules decide which variables' events it receives). It runs outside the event
/// buffer's lock, so it may read the store.
#[derive(Clone)]
pub struct EventAccess(pub Arc<dyn Fn(&Event) -> bool + Send + Sync>);

impl EventAccess {
    /// Whether the subscriber may see `event`.
    pub fn allows(&self, event: &Event) -> bool {
        (self.0)(event)
    }
}

impl std::fmt::Debug for EventAccess {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("EventAccess")
    }
}

/// Two checks are equal when they are the same check.
impl PartialEq for EventAccess {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for EventAccess {}

impl EventFilter {
    /// Whether `event` passes the filter's topics and namespace ([`EventFilter::access`] is
    /// the subscription's to apply, outside the buffer's lock).
    pub fn matches(&self, event: &Event) -> bool {
        if let Some(namespace) = &self.namespace
            && !event.namespace.is_empty()
            && &event.namespace != namespace
        {
            return false;
        }
        if self.topics.is_empty() {
            return self.unknown_topics.is_empty();
        }
        self.topics.iter().any(|(topic, key)| {
            topic.is_none_or(|topic| topic == event.topic)
                && key.as_deref().is_none_or(|key| {
                    event.key == key || event.filter_keys.iter().any(|filter| filter == key)
                })
        })
    }
}

/// The events of one index, as Nomad streams them: `{"Index": N, "Events": [...]}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct EventBatch {
    /// The index shared by all events of the batch.
    pub index: u64,
    /// The events, in the order the write produced them.
    #[serde(serialize_with = "serialize_shared_events")]
    pub events: Vec<Arc<Event>>,
}

fn serialize_shared_events<S: serde::Serializer>(
    events: &[Arc<Event>],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_seq(events.iter().map(|event| event.as_ref()))
}

/// How many of the newest batches (one per index) a subscription without an index replays:
/// Nomad's broker keeps 100 batches (`event_buffer_size`) and such a subscription gets every
/// one after the buffer's head.
pub const REPLAYED_BATCHES: usize = 99;

/// The bounded ring buffer of recent events.
#[derive(Debug)]
pub struct EventBuffer {
    events: Mutex<VecDeque<Arc<Event>>>,
    capacity: usize,
    newest_index: watch::Sender<u64>,
}

impl EventBuffer {
    /// A buffer that keeps the newest `capacity` events (at least one).
    pub fn new(capacity: usize) -> Self {
        Self {
            events: Mutex::new(VecDeque::with_capacity(capacity.clamp(1, 4096))),
            capacity: capacity.max(1),
            newest_index: watch::Sender::new(0),
        }
    }

    /// Appends events (in non-decreasing index order) and wakes subscribers.
    pub fn publish(&self, events: Vec<Event>) {
        let Some(newest) = events.last().map(|event| event.index) else {
            return;
        };
        {
            let mut buffer = self.lock();
            for event in events {
                if buffer.len() == self.capacity {
                    buffer.pop_front();
                }
                buffer.push_back(Arc::new(event));
            }
        }
        self.newest_index.send_replace(newest);
    }

    /// The index of the newest event published (0 if none).
    pub fn newest_index(&self) -> u64 {
        *self.newest_index.borrow()
    }

    /// A subscription delivering events with `Index >= from_index`. An index older than the
    /// buffer starts at the oldest event. `from_index == 0` starts with the newest
    /// [`REPLAYED_BATCHES`] batches the buffer holds, then follows, as Nomad's broker does for a
    /// subscription without an index (it reads on from the head of its buffer of 100 batches).
    pub fn subscribe(self: &Arc<Self>, from_index: u64, filter: EventFilter) -> EventSubscription {
        let mut newest = self.newest_index.subscribe();
        let newest_published = *newest.borrow_and_update();
        let next_index = if from_index == 0 {
            self.replay_start().unwrap_or(newest_published + 1)
        } else {
            from_index
        };
        EventSubscription {
            buffer: Arc::clone(self),
            newest,
            next_index,
            filter,
            missed_indexes: 0,
        }
    }

    /// The index of the oldest of the newest [`REPLAYED_BATCHES`] batches held, if any.
    fn replay_start(&self) -> Option<u64> {
        let buffer = self.lock();
        let mut batches = 0;
        let mut start = None;
        for event in buffer.iter().rev() {
            if start != Some(event.index) {
                batches += 1;
                if batches > REPLAYED_BATCHES {
                    break;
                }
                start = Some(event.index);
            }
        }
        start
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Arc<Event>>> {
        // A poisoned lock only means a publisher panicked between pop and push; the deque is
        // still a valid deque, so keep serving it.
        self.events
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The first batch with index >= `next_index` that passes `filter`, and the index to resume
    /// from; also how many indexes were skipped because they had left the buffer.
    fn batch_from(&self, next_index: u64, filter: &EventFilter) -> (Option<EventBatch>, u64, u64) {
        let buffer = self.lock();
        let start = buffer.partition_point(|event| event.index < next_index);
        let missed = match buffer.front() {
            Some(oldest) if oldest.index > next_index && next_index > 0 => {
                oldest.index - next_index
            }
            _ => 0,
        };
        let mut position = start;
        while position < buffer.len() {
            let index = buffer[position].index;
            let mut events = Vec::new();
            while position < buffer.len() && buffer[position].index == index {
                if filter.matches(&buffer[position]) {
                    events.push(Arc::clone(&buffer[position]));
                }
                position += 1;
            }
            if !events.is_empty() {
                return (Some(EventBatch { index, events }), index + 1, missed);
            }
        }
        let resume = buffer
            .back()
            .map_or(next_index, |newest| next_index.max(newest.index + 1));
        (None, resume, missed)
    }
}

/// A reader of the event stream, from some index onwards.
#[derive(Debug)]
pub struct EventSubscription {
    buffer: Arc<EventBuffer>,
    newest: watch::Receiver<u64>,
    next_index: u64,
    filter: EventFilter,
    missed_indexes: u64,
}

impl EventSubscription {
    /// The next batch of matching events, waiting for one if none is buffered; `None` once the
    /// store has shut down.
    pub async fn next_batch(&mut self) -> Option<EventBatch> {
        loop {
            // Mark the current newest index as seen before reading, so a publish that lands
            // after the read wakes the wait below.
            self.newest.borrow_and_update();
            if let Some(batch) = self.try_next_batch() {
                return Some(batch);
            }
            if self.newest.changed().await.is_err() {
                return self.try_next_batch();
            }
        }
    }

    /// The next batch of matching events if one is buffered, without waiting.
    pub fn try_next_batch(&mut self) -> Option<EventBatch> {
        loop {
            let (batch, resume, missed) = self.buffer.batch_from(self.next_index, &self.filter);
            self.missed_indexes += missed;
            self.next_index = resume;
            let mut batch = batch?;
            // The caller's right to each event, checked with the buffer unlocked; a batch left
            // empty is skipped as one that never matched.
            if let Some(access) = &self.filter.access {
                batch.events.retain(|event| access.allows(event));
                if batch.events.is_empty() {
                    continue;
                }
            }
            return Some(batch);
        }
    }

    /// How many indexes this subscriber skipped because their events had left the buffer.
    pub fn missed_indexes(&self) -> u64 {
        self.missed_indexes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job_event(index: u64, key: &str) -> Event {
        Event {
            topic: Topic::Job,
            event_type: EventType::JobRegistered,
            key: key.to_owned(),
            namespace: "default".to_owned(),
            filter_keys: Vec::new(),
            index,
            payload: EventPayload::from_value(&serde_json::json!({"Job": {"ID": key}})).unwrap(),
        }
    }

    fn alloc_event(index: u64, key: &str, job: &str) -> Event {
        Event {
            topic: Topic::Allocation,
            event_type: EventType::AllocationUpdated,
            key: key.to_owned(),
            namespace: "default".to_owned(),
            filter_keys: vec![job.to_owned()],
            index,
            payload: EventPayload::from_value(&serde_json::json!({"Allocation": {"ID": key}}))
                .unwrap(),
        }
    }

    #[test]
    fn a_subscription_without_an_index_replays_only_the_newest_batches() {
        let buffer = Arc::new(EventBuffer::new(10_000));
        for index in 1..=150 {
            buffer.publish(vec![job_event(index, "a"), alloc_event(index, "x", "a")]);
        }
        let mut without_index = buffer.subscribe(0, EventFilter::default());
        let mut replayed = Vec::new();
        while let Some(batch) = without_index.try_next_batch() {
            replayed.push(batch.index);
        }
        let expected: Vec<u64> = (52..=150).collect();
        assert_eq!(replayed.len(), REPLAYED_BATCHES);
        assert_eq!(replayed, expected);
        let empty = Arc::new(EventBuffer::new(10));
        assert!(
            empty
                .subscribe(0, EventFilter::default())
                .try_next_batch()
                .is_none()
        );
    }

    #[tokio::test]
    async fn subscribers_replay_from_an_index_then_follow_new_events() {
        let buffer = Arc::new(EventBuffer::new(100));
        buffer.publish(vec![job_event(3, "a"), alloc_event(3, "x", "a")]);
        buffer.publish(vec![job_event(5, "b")]);

        let mut from_four = buffer.subscribe(4, EventFilter::default());
        let batch = from_four.try_next_batch().unwrap();
        assert_eq!(batch.index, 5);
        assert_eq!(batch.events[0].key, "b");
        assert!(from_four.try_next_batch().is_none());

        let mut from_start = buffer.subscribe(1, EventFilter::default());
        let first = from_start.try_next_batch().unwrap();
        assert_eq!((first.index, first.events.len()), (3, 2));

        // Without an index: what the buffer holds, then what comes.
        let mut without_index = buffer.subscribe(0, EventFilter::default());
        assert_eq!(without_index.try_next_batch().unwrap().index, 3);
        assert_eq!(without_index.try_next_batch().unwrap().index, 5);
        assert!(without_index.try_next_batch().is_none());
        let waiter = tokio::spawn(async move { without_index.next_batch().await });
        tokio::task::yield_now().await;
        buffer.publish(vec![job_event(9, "c")]);
        let batch = waiter.await.unwrap().unwrap();
        assert_eq!(batch.index, 9);
    }

    #[test]
    fn filters_match_topic_key_and_filter_keys() {
        let buffer = Arc::new(EventBuffer::new(100));
        buffer.publish(vec![
            job_event(1, "web"),
            alloc_event(1, "alloc-1", "web"),
            alloc_event(2, "alloc-2", "db"),
        ]);
        let filter = EventFilter {
            topics: vec![(Some(Topic::Allocation), Some("web".to_owned()))],
            namespace: None,
            unknown_topics: Vec::new(),
            access: None,
        };
        let mut subscription = buffer.subscribe(1, filter);
        let batch = subscription.try_next_batch().unwrap();
        assert_eq!(batch.events.len(), 1);
        assert_eq!(batch.events[0].key, "alloc-1");
        assert!(subscription.try_next_batch().is_none());

        // Only topics drover publishes nothing of: no event passes (not every event).
        let unknown = EventFilter {
            unknown_topics: vec!["Nonsense".to_owned()],
            ..EventFilter::default()
        };
        assert!(buffer.subscribe(1, unknown).try_next_batch().is_none());
    }

    #[test]
    fn an_access_check_drops_the_events_it_refuses_and_skips_a_batch_left_empty() {
        let buffer = Arc::new(EventBuffer::new(100));
        buffer.publish(vec![job_event(1, "secret")]);
        buffer.publish(vec![job_event(2, "web"), job_event(2, "secret")]);
        let filter = EventFilter {
            access: Some(EventAccess(Arc::new(|event: &Event| event.key != "secret"))),
            ..EventFilter::default()
        };
        let mut subscription = buffer.subscribe(1, filter);
        let batch = subscription.try_next_batch().unwrap();
        assert_eq!(batch.index, 2, "the batch of refused events alone was sent");
        let keys: Vec<&str> = batch
            .events
            .iter()
            .map(|event| event.key.as_str())
            .collect();
        assert_eq!(keys, ["web"]);
        assert!(subscription.try_next_batch().is_none());
    }

    #[test]
    fn the_buffer_is_bounded_and_a_late_subscriber_starts_at_the_oldest_event() {
        let buffer = Arc::new(EventBuffer::new(3));
        for index in 1..=10 {
            buffer.publish(vec![job_event(index, "j")]);
        }
        let mut subscription = buffer.subscribe(2, EventFilter::default());
        let indexes: Vec<u64> = std::iter::from_fn(|| subscription.try_next_batch())
            .map(|batch| batch.index)
            .collect();
        assert_eq!(indexes, vec![8, 9, 10]);
        assert_eq!(subscription.missed_indexes(), 6);
    }

    #[test]
    fn events_serialize_in_nomad_shape() {
        let value = serde_json::to_value(job_event(57, "example")).unwrap();
        assert_eq!(value["Topic"], "Job");
        assert_eq!(value["Type"], "JobRegistered");
        assert_eq!(value["Key"], "example");
        assert_eq!(value["Index"], 57);
        assert_eq!(value["Payload"]["Job"]["ID"], "example");
    }
}
