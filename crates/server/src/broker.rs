//! The evaluation broker: the queue between "an evaluation was created" and "a scheduler worker
//! processes it".
//!
//! Rules, after Nomad's `EvalBroker`:
//! - Ready evaluations are handed out by priority, then in creation order.
//! - At most one evaluation per job is *in flight* (ready or handed out and not yet acked): the
//!   scheduler never works on two evaluations of the same job at once, so their plans cannot
//!   race. Further evaluations of that job wait in the job's pending set.
//! - On ack, the newest pending evaluation of the job becomes ready; older pending ones are
//!   superseded (the newest sees the latest state anyway) and are returned to the caller to be
//!   marked `canceled`.
//! - On nack the evaluation is redelivered, up to a delivery limit; past it the caller marks it
//!   `failed`.
//!
//! Not here: persistence (evaluations are stored by the server before they are enqueued, and
//! re-enqueued from the store on start) and blocked evaluations (see [`crate::blocked`]).

use std::cmp::Ordering;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::sync::Mutex;

use drover_structs::Evaluation;
use tokio::sync::Notify;

/// How many times an evaluation is handed out before it is given up as failed.
pub const DEFAULT_DELIVERY_LIMIT: u32 = 3;

/// `(namespace, job ID)`: evaluations of the same key are serialized.
type JobKey = (String, String);

/// A proof that the holder dequeued a particular delivery of an evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeliveryToken(u64);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BrokerError {
    #[error("evaluation {eval_id} is not outstanding")]
    NotOutstanding { eval_id: String },
    #[error("evaluation {eval_id} was delivered again; the token is stale")]
    StaleToken { eval_id: String },
}

/// What a nack led to.
#[derive(Debug, PartialEq)]
pub enum NackOutcome {
    /// The evaluation is ready again.
    Requeued,
    /// The delivery limit is reached: the caller marks the evaluation failed, and the older
    /// pending evaluations of its job canceled.
    DeliveryLimitReached {
        failed: Box<Evaluation>,
        superseded: Vec<Evaluation>,
    },
}

/// What an ack led to.
#[derive(Debug, Default, PartialEq)]
pub struct AckOutcome {
    /// Older pending evaluations of the same job that the newest one supersedes.
    pub superseded: Vec<Evaluation>,
}

struct ReadyEval {
    priority: i64,
    create_index: u64,
    sequence: u64,
    eval: Evaluation,
}

impl PartialEq for ReadyEval {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for ReadyEval {}
impl PartialOrd for ReadyEval {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for ReadyEval {
    /// Max-heap order: higher priority first, then lower create index, then enqueue order.
    fn cmp(&self, other: &Self) -> Ordering {
        self.priority
            .cmp(&other.priority)
            .then_with(|| other.create_index.cmp(&self.create_index))
            .then_with(|| other.sequence.cmp(&self.sequence))
    }
}

struct Outstanding {
    eval: Evaluation,
    token: DeliveryToken,
}

#[derive(Default)]
struct Inner {
    ready: BinaryHeap<ReadyEval>,
    outstanding: HashMap<String, Outstanding>,
    /// Jobs with an evaluation ready or outstanding.
    jobs_in_flight: HashMap<JobKey, String>,
    /// Evaluations waiting for their job's in-flight one, keyed by modify index.
    pending: HashMap<JobKey, BTreeMap<(u64, u64), Evaluation>>,
    deliveries: HashMap<String, u32>,
    next_sequence: u64,
    next_token: u64,
}

/// The evaluation broker. Cheap to share behind an `Arc`.
pub struct EvalBroker {
    inner: Mutex<Inner>,
    ready_changed: Notify,
    delivery_limit: u32,
}

impl Default for EvalBroker {
    fn default() -> Self {
        Self::new(DEFAULT_DELIVERY_LIMIT)
    }
}

fn job_key(eval: &Evaluation) -> JobKey {
    (eval.namespace.clone(), eval.job_id.clone())
}

impl EvalBroker {
    pub fn new(delivery_limit: u32) -> Self {
        Self {
            inner: Mutex::new(Inner::default()),
            ready_changed: Notify::new(),
            delivery_limit: delivery_limit.max(1),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding this lock cannot leave the queues half-updated in a way later
        // callers could not handle (every method restores the invariants before returning), so
        // continue with the poisoned state rather than propagating the panic.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Queues an evaluation. Evaluations already known (ready, outstanding or pending) are
    /// ignored, so re-enqueueing on restore is harmless.
    pub fn enqueue(&self, eval: Evaluation) {
        let mut inner = self.lock();
        if inner.outstanding.contains_key(&eval.id)
            || inner.ready.iter().any(|ready| ready.eval.id == eval.id)
        {
            return;
        }
        let key = job_key(&eval);
        if inner.jobs_in_flight.contains_key(&key) {
            let sequence = inner.next_sequence;
            inner.next_sequence += 1;
            let pending = inner.pending.entry(key).or_default();
            if pending.values().any(|waiting| waiting.id == eval.id) {
                return;
            }
            pending.insert((eval.modify_index, sequence), eval);
            return;
        }
        inner.jobs_in_flight.insert(key, eval.id.clone());
        Self::push_ready(&mut inner, eval);
        drop(inner);
        self.ready_changed.notify_one();
    }

    fn push_ready(inner: &mut Inner, eval: Evaluation) {
        let sequence = inner.next_sequence;
        inner.next_sequence += 1;
        inner.ready.push(ReadyEval {
            priority: eval.priority,
            create_index: eval.create_index,
            sequence,
            eval,
        });
    }

    /// Forgets every evaluation (leadership lost: the next leader rebuilds its broker from the
    /// store). Delivery tokens stay unique: an ack of an earlier delivery fails.
    pub fn flush(&self) {
        let mut inner = self.lock();
        let next_token = inner.next_token;
        *inner = Inner {
            next_token,
            ..Inner::default()
        };
    }

    /// Takes the next ready evaluation, or `None` if none is ready.
    pub fn try_dequeue(&self) -> Option<(Evaluation, DeliveryToken)> {
        let mut inner = self.lock();
        let ready = inner.ready.pop()?;
        inner.next_token += 1;
        let token = DeliveryToken(inner.next_token);
        *inner.deliveries.entry(ready.eval.id.clone()).or_insert(0) += 1;
        inner.outstanding.insert(
            ready.eval.id.clone(),
            Outstanding {
                eval: ready.eval.clone(),
                token,
            },
        );
        Some((ready.eval, token))
    }

    /// Waits for the next ready evaluation.
    pub async fn dequeue(&self) -> (Evaluation, DeliveryToken) {
        loop {
            let notified = self.ready_changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(next) = self.try_dequeue() {
                return next;
            }
            notified.await;
        }
    }

    fn take_outstanding(
        inner: &mut Inner,
        eval_id: &str,
        token: DeliveryToken,
    ) -> Result<Evaluation, BrokerError> {
        match inner.outstanding.get(eval_id) {
            None => Err(BrokerError::NotOutstanding {
                eval_id: eval_id.to_owned(),
            }),
            Some(outstanding) if outstanding.token != token => Err(BrokerError::StaleToken {
                eval_id: eval_id.to_owned(),
            }),
            Some(_) => inner
                .outstanding
                .remove(eval_id)
                .map(|outstanding| outstanding.eval)
                .ok_or_else(|| BrokerError::NotOutstanding {
                    eval_id: eval_id.to_owned(),
                }),
        }
    }

    /// Releases a job's in-flight slot: its newest pending evaluation becomes ready, older
    /// pending ones are returned as superseded. Returns whether one was promoted.
    fn release_job(inner: &mut Inner, key: JobKey, superseded: &mut Vec<Evaluation>) -> bool {
        inner.jobs_in_flight.remove(&key);
        let Some(mut pending) = inner.pending.remove(&key) else {
            return false;
        };
        let Some((_, newest)) = pending.pop_last() else {
            return false;
        };
        superseded.extend(pending.into_values());
        inner.jobs_in_flight.insert(key, newest.id.clone());
        Self::push_ready(inner, newest);
        true
    }

    /// Marks an evaluation processed. The job's newest pending evaluation becomes ready.
    pub fn ack(&self, eval_id: &str, token: DeliveryToken) -> Result<AckOutcome, BrokerError> {
        let mut inner = self.lock();
        let eval = Self::take_outstanding(&mut inner, eval_id, token)?;
        inner.deliveries.remove(eval_id);
        let mut outcome = AckOutcome::default();
        let promoted = Self::release_job(&mut inner, job_key(&eval), &mut outcome.superseded);
        drop(inner);
        if promoted {
            self.ready_changed.notify_one();
        }
        Ok(outcome)
    }

    /// Returns an evaluation that could not be processed; it is redelivered until the delivery
    /// limit is reached.
    pub fn nack(&self, eval_id: &str, token: DeliveryToken) -> Result<NackOutcome, BrokerError> {
        let mut inner = self.lock();
        let eval = Self::take_outstanding(&mut inner, eval_id, token)?;
        let deliveries = inner.deliveries.get(eval_id).copied().unwrap_or(0);
        if deliveries >= self.delivery_limit {
            inner.deliveries.remove(eval_id);
            let mut superseded = Vec::new();
            let promoted = Self::release_job(&mut inner, job_key(&eval), &mut superseded);
            drop(inner);
            if promoted {
                self.ready_changed.notify_one();
            }
            return Ok(NackOutcome::DeliveryLimitReached {
                failed: Box::new(eval),
                superseded,
            });
        }
        Self::push_ready(&mut inner, eval);
        drop(inner);
        self.ready_changed.notify_one();
        Ok(NackOutcome::Requeued)
    }

    /// How many times `eval_id` has been handed out so far.
    pub fn deliveries(&self, eval_id: &str) -> u32 {
        self.lock().deliveries.get(eval_id).copied().unwrap_or(0)
    }

    /// Number of evaluations ready to be handed out.
    pub fn ready_len(&self) -> usize {
        self.lock().ready.len()
    }

    /// Number of evaluations handed out and not yet acked or nacked.
    pub fn outstanding_len(&self) -> usize {
        self.lock().outstanding.len()
    }

    /// Number of evaluations waiting behind their job's in-flight evaluation.
    pub fn pending_len(&self) -> usize {
        self.lock().pending.values().map(BTreeMap::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(id: &str, job: &str, priority: i64, index: u64) -> Evaluation {
        Evaluation {
            id: id.to_owned(),
            namespace: "default".to_owned(),
            job_id: job.to_owned(),
            priority,
            create_index: index,
            modify_index: index,
            ..Evaluation::default()
        }
    }

    #[test]
    fn hands_out_by_priority_then_creation_order() {
        let broker = EvalBroker::default();
        broker.enqueue(eval("a", "job-a", 50, 3));
        broker.enqueue(eval("b", "job-b", 70, 5));
        broker.enqueue(eval("c", "job-c", 50, 2));
        let order: Vec<String> = std::iter::from_fn(|| broker.try_dequeue())
            .map(|(eval, _)| eval.id)
            .collect();
        assert_eq!(order, ["b", "c", "a"]);
    }

    #[test]
    fn one_evaluation_per_job_in_flight_and_newest_pending_wins() {
        let broker = EvalBroker::default();
        broker.enqueue(eval("first", "web", 50, 1));
        broker.enqueue(eval("second", "web", 50, 2));
        broker.enqueue(eval("third", "web", 50, 3));
        let (first, token) = broker.try_dequeue().expect("first is ready");
        assert_eq!(first.id, "first");
        assert!(
            broker.try_dequeue().is_none(),
            "the job's other evals wait while one is outstanding"
        );
        assert_eq!(broker.pending_len(), 2);

        let outcome = broker.ack("first", token).expect("ack");
        let superseded: Vec<_> = outcome.superseded.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(superseded, ["second"]);
        let (next, _) = broker.try_dequeue().expect("newest pending promoted");
        assert_eq!(next.id, "third");
    }

    #[test]
    fn nack_redelivers_until_the_limit() {
        let broker = EvalBroker::new(2);
        broker.enqueue(eval("e", "job", 50, 1));
        let (_, token) = broker.try_dequeue().expect("ready");
        assert_eq!(broker.nack("e", token), Ok(NackOutcome::Requeued));
        let (_, token) = broker.try_dequeue().expect("redelivered");
        match broker.nack("e", token) {
            Ok(NackOutcome::DeliveryLimitReached { failed, .. }) => assert_eq!(failed.id, "e"),
            other => panic!("expected the delivery limit, got {other:?}"),
        }
        assert!(broker.try_dequeue().is_none());
    }

    #[test]
    fn stale_tokens_and_unknown_evals_are_refused() {
        let broker = EvalBroker::default();
        broker.enqueue(eval("e", "job", 50, 1));
        let (_, first_token) = broker.try_dequeue().expect("ready");
        assert_eq!(broker.nack("e", first_token), Ok(NackOutcome::Requeued));
        let (_, second_token) = broker.try_dequeue().expect("redelivered");
        assert_eq!(
            broker.ack("e", first_token),
            Err(BrokerError::StaleToken {
                eval_id: "e".into()
            })
        );
        assert!(broker.ack("e", second_token).is_ok());
        assert_eq!(
            broker.ack("missing", second_token),
            Err(BrokerError::NotOutstanding {
                eval_id: "missing".into()
            })
        );
    }

    #[test]
    fn enqueueing_a_known_evaluation_again_is_ignored() {
        let broker = EvalBroker::default();
        broker.enqueue(eval("e", "job", 50, 1));
        broker.enqueue(eval("e", "job", 50, 1));
        assert_eq!(broker.ready_len(), 1);
        assert_eq!(broker.pending_len(), 0);
    }

    #[tokio::test]
    async fn dequeue_waits_for_an_enqueue() {
        let broker = std::sync::Arc::new(EvalBroker::default());
        let waiter = {
            let broker = broker.clone();
            tokio::spawn(async move { broker.dequeue().await.0.id })
        };
        tokio::task::yield_now().await;
        broker.enqueue(eval("late", "job", 50, 1));
        let id = tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .expect("dequeue woke up")
            .expect("task finished");
        assert_eq!(id, "late");
    }
}
