//! An operator's node writes, as Nomad's `Node.UpdateDrain`, `Node.UpdateEligibility`,
//! `Node.Deregister` (purge) and `Node.Evaluate`: a drain strategy set, updated or cancelled
//! (`LastDrain` kept as Nomad's state store keeps it), eligibility toggled (refused while the
//! node drains), a node removed, node evaluations made. Each change appends Nomad's node event
//! (`Drain` or `Cluster` subsystem) and emits `NodeDrain` / `NodeEligibility` on the event
//! stream.
//!
//! Errors are Nomad's RPC errors, which its HTTP layer answers with 500 and the message.
//!
//! Not here: moving allocations off a draining node (`drainer`).

use std::collections::{BTreeMap, BTreeSet};

use drover_state::EventType;
use drover_structs::{
    DRAIN_STATUS_CANCELED, DRAIN_STATUS_COMPLETE, DRAIN_STATUS_DRAINING, DrainMetadata, DrainSpec,
    DrainStrategy, EVAL_TRIGGER_NODE_UPDATE, Evaluation, JOB_TYPE_SYSBATCH, JOB_TYPE_SYSTEM,
    NODE_SCHEDULING_ELIGIBLE, NODE_SCHEDULING_INELIGIBLE, Node, NodeDrainUpdateResponse, NodeEvent,
    NodeUpdateResponse, Timestamp,
};

use crate::{Server, ServerError, ServerInner};

/// Node event messages, Nomad's words (its "stategy" typo included).
pub const NODE_DRAIN_EVENT_SET: &str = "Node drain strategy set";
pub const NODE_DRAIN_EVENT_UPDATED: &str = "Node drain stategy updated";
pub const NODE_DRAIN_EVENT_DISABLED: &str = "Node drain disabled";
pub const NODE_DRAIN_EVENT_COMPLETE: &str = "Node drain complete";
pub const NODE_ELIGIBILITY_EVENT_ELIGIBLE: &str = "Node marked as eligible for scheduling";
pub const NODE_ELIGIBILITY_EVENT_INELIGIBLE: &str = "Node marked as ineligible for scheduling";

const SUBSYSTEM_DRAIN: &str = "Drain";
const SUBSYSTEM_CLUSTER: &str = "Cluster";

/// An operator's write to a node the server does not have: 404 with Nomad's words (Nomad's
/// RPC error makes it a 500, but the caller named something that is not there).
fn node_not_found() -> ServerError {
    ServerError::NotFound("node not found".into())
}

fn event(subsystem: &str, message: &str, now_unix_ns: i64) -> NodeEvent {
    NodeEvent {
        message: message.to_owned(),
        subsystem: subsystem.to_owned(),
        timestamp: Timestamp::from_unix_nanos(now_unix_ns),
        ..NodeEvent::default()
    }
}

/// A drain change as Nomad's state store applies it: the strategy (a drain makes the node
/// ineligible; cancelling it with `mark_eligible` makes it eligible again) and `LastDrain`
/// (a new record when a drain starts, then updated; its status `draining`, `complete` when the
/// drainer finished, `canceled` otherwise).
pub(crate) struct DrainChange {
    pub strategy: Option<DrainStrategy>,
    pub mark_eligible: bool,
    pub meta: BTreeMap<String, String>,
    pub event: Option<NodeEvent>,
    pub completed: bool,
    pub now_unix_ns: i64,
}

impl DrainChange {
    pub(crate) fn apply(self, node: &mut Node, index: u64) {
        let was_draining = node.drain_strategy.is_some();
        node.status_updated_at = self.now_unix_ns / 1_000_000_000;
        if let Some(event) = self.event {
            node.append_event(event, index);
        }
        node.drain_strategy = self.strategy;
        node.drain = node.drain_strategy.is_some();
        if node.drain_strategy.is_some() {
            NODE_SCHEDULING_INELIGIBLE.clone_into(&mut node.scheduling_eligibility);
        } else if self.mark_eligible {
            NODE_SCHEDULING_ELIGIBLE.clone_into(&mut node.scheduling_eligibility);
        }
        if !was_draining && node.drain_strategy.is_none() {
            return;
        }
        // LastDrain has second precision, as Nomad's.
        let updated = Timestamp::from_unix_nanos(self.now_unix_ns / 1_000_000_000 * 1_000_000_000);
        let meta = (!self.meta.is_empty()).then_some(self.meta);
        let last = match node.last_drain.take() {
            Some(last) if was_draining => last,
            _ => DrainMetadata {
                started_at: updated,
                meta: meta.clone(),
                ..DrainMetadata::default()
            },
        };
        let mut last = last;
        last.updated_at = updated;
        if meta.is_some() {
            last.meta = meta;
        }
        last.status = if node.drain_strategy.is_some() {
            DRAIN_STATUS_DRAINING
        } else if self.completed {
            DRAIN_STATUS_COMPLETE
        } else {
            DRAIN_STATUS_CANCELED
        }
        .to_owned();
        node.last_drain = Some(last);
    }
}

impl Server {
    /// `POST /v1/node/<id>/drain`: sets (`Some` spec), updates or cancels (`None`) a drain.
    /// Cancelling with `mark_eligible` on an ineligible node makes node evaluations.
    pub async fn update_node_drain(
        &self,
        node_id: &str,
        spec: Option<DrainSpec>,
        mark_eligible: bool,
        meta: BTreeMap<String, String>,
    ) -> Result<NodeDrainUpdateResponse, ServerError> {
        if node_id.is_empty() {
            return Err(ServerError::BadRequest(
                "missing node ID for drain update".into(),
            ));
        }
        let inner = &self.inner;
        let Some(node) = inner.state.node(node_id) else {
            return Err(node_not_found());
        };
        let now = inner.clock.now_unix_ns();
        let strategy = spec.map(|spec| DrainStrategy {
            deadline: spec.deadline,
            ignore_system_jobs: spec.ignore_system_jobs,
            force_deadline: if spec.deadline.as_nanos() > 0 {
                Timestamp::from_unix_nanos(now.saturating_add(spec.deadline.as_nanos()))
            } else {
                Timestamp::ZERO
            },
            started_at: node
                .drain_strategy
                .as_ref()
                .map_or(Timestamp::from_unix_nanos(now), |existing| {
                    existing.started_at
                }),
        });
        let message = match (&node.drain_strategy, &strategy) {
            (None, Some(_)) => Some(NODE_DRAIN_EVENT_SET),
            (Some(_), Some(_)) => Some(NODE_DRAIN_EVENT_UPDATED),
            (Some(_), None) => Some(NODE_DRAIN_EVENT_DISABLED),
            (None, None) => None,
        };
        let turns_eligible = node.scheduling_eligibility == NODE_SCHEDULING_INELIGIBLE
            && mark_eligible
            && strategy.is_none();
        let change = DrainChange {
            strategy,
            mark_eligible,
            meta,
            event: message.map(|message| event(SUBSYSTEM_DRAIN, message, now)),
            completed: false,
            now_unix_ns: now,
        };
        // A node turning eligible and its evaluations commit in one write.
        let evals = if turns_eligible {
            inner.all_node_evals(node_id)
        } else {
            Vec::new()
        };
        let eval_ids = crate::eval_ids(&evals);
        let (index, eval_index) = inner
            .state
            .update_node_with_evals(
                node_id,
                EventType::NodeDrain,
                move |node, index| {
                    change.apply(node, index);
                    true
                },
                evals,
                now,
            )
            .await?;
        inner.drainer_wake();
        let mut response = NodeDrainUpdateResponse {
            node_modify_index: index,
            index,
            ..NodeDrainUpdateResponse::default()
        };
        if turns_eligible {
            inner.enqueue_stored(&eval_ids);
            response.eval_ids = Some(eval_ids);
            response.eval_create_index = eval_index;
            inner.capacity_changed().await;
        }
        Ok(response)
    }

    /// `POST /v1/node/<id>/eligibility`: `eligible` or `ineligible`; refused while the node
    /// drains. Turning eligible makes node evaluations.
    pub async fn update_node_eligibility(
        &self,
        node_id: &str,
        eligibility: &str,
    ) -> Result<NodeDrainUpdateResponse, ServerError> {
        let inner = &self.inner;
        if node_id.is_empty() {
            return Err(ServerError::BadRequest(
                "missing node ID for setting scheduling eligibility".into(),
            ));
        }
        let invalid =
            || ServerError::BadRequest(format!("invalid scheduling eligibility {eligibility:?}"));
        if eligibility != NODE_SCHEDULING_ELIGIBLE && eligibility != NODE_SCHEDULING_INELIGIBLE {
            return Err(invalid());
        }
        let Some(node) = inner.state.node(node_id) else {
            return Err(node_not_found());
        };
        if node.drain_strategy.is_some() && eligibility == NODE_SCHEDULING_ELIGIBLE {
            return Err(ServerError::BadRequest(
                "can not set node's scheduling eligibility to eligible while it is draining".into(),
            ));
        }
        if node.scheduling_eligibility == eligibility {
            // Nothing to do: Nomad answers an empty response.
            return Ok(NodeDrainUpdateResponse::default());
        }
        let now = inner.clock.now_unix_ns();
        let message = if eligibility == NODE_SCHEDULING_ELIGIBLE {
            NODE_ELIGIBILITY_EVENT_ELIGIBLE
        } else {
            NODE_ELIGIBILITY_EVENT_INELIGIBLE
        };
        let new_event = event(SUBSYSTEM_CLUSTER, message, now);
        let value = eligibility.to_owned();
        // A node turning eligible and its evaluations commit in one write.
        let turns_eligible = node.scheduling_eligibility == NODE_SCHEDULING_INELIGIBLE
            && eligibility == NODE_SCHEDULING_ELIGIBLE;
        let evals = if turns_eligible {
            inner.all_node_evals(node_id)
        } else {
            Vec::new()
        };
        let eval_ids = crate::eval_ids(&evals);
        let (index, eval_index) = inner
            .state
            .update_node_with_evals(
                node_id,
                EventType::NodeEligibility,
                move |node, index| {
                    node.scheduling_eligibility = value;
                    node.status_updated_at = now / 1_000_000_000;
                    node.append_event(new_event, index);
                    true
                },
                evals,
                now,
            )
            .await?;
        let mut response = NodeDrainUpdateResponse {
            node_modify_index: index,
            index,
            ..NodeDrainUpdateResponse::default()
        };
        if turns_eligible {
            inner.enqueue_stored(&eval_ids);
            response.eval_ids = Some(eval_ids);
            response.eval_create_index = eval_index;
            inner.capacity_changed().await;
        }
        Ok(response)
    }

    /// `POST /v1/node/<id>/purge`: removes the node (Nomad's `Node.Deregister`); its
    /// allocations are then lost and replaced by the evaluations made here.
    pub async fn purge_node(&self, node_id: &str) -> Result<NodeUpdateResponse, ServerError> {
        let inner = &self.inner;
        if node_id.is_empty() {
            return Err(ServerError::BadRequest(
                "missing node ID for client deregistration".into(),
            ));
        }
        if inner.state.node(node_id).is_none() {
            return Err(node_not_found());
        }
        // The node goes with the evaluations that replace its allocations, in one write.
        let evals = inner.all_node_evals(node_id);
        let eval_ids = crate::eval_ids(&evals);
        let now = inner.clock.now_unix_ns();
        let (index, eval_index) = inner
            .state
            .delete_node_with_evals(node_id, evals, now)
            .await?;
        inner.heartbeats.clear(node_id);
        inner.drainer_wake();
        inner.enqueue_stored(&eval_ids);
        Ok(NodeUpdateResponse {
            eval_ids: Some(eval_ids),
            eval_create_index: eval_index,
            node_modify_index: index,
            index,
            ..NodeUpdateResponse::default()
        })
    }

    /// `POST /v1/node/<id>/evaluate`: node evaluations for every job on the node and every
    /// system job.
    pub async fn evaluate_node(&self, node_id: &str) -> Result<NodeUpdateResponse, ServerError> {
        let inner = &self.inner;
        if node_id.is_empty() {
            return Err(ServerError::BadRequest(
                "missing node ID for evaluation".into(),
            ));
        }
        let Some(node) = inner.state.node(node_id) else {
            return Err(node_not_found());
        };
        let (eval_ids, eval_index) = inner
            .create_all_node_evals(node_id, node.modify_index)
            .await?;
        Ok(NodeUpdateResponse {
            eval_ids: Some(eval_ids),
            eval_create_index: eval_index,
            node_modify_index: node.modify_index,
            index: eval_index,
            ..NodeUpdateResponse::default()
        })
    }
}

impl ServerInner {
    /// Nomad's `createNodeEvals`: a `node-update` evaluation for every job with an allocation
    /// on the node (finished ones included) and for every system and sysbatch job. Answers
    /// their IDs and the index of the write (0 when there were none).
    pub(crate) async fn create_all_node_evals(
        &self,
        node_id: &str,
        node_modify_index: u64,
    ) -> Result<(Vec<String>, u64), ServerError> {
        let mut evals = self.all_node_evals(node_id);
        for eval in &mut evals {
            eval.node_modify_index = node_modify_index;
        }
        if evals.is_empty() {
            return Ok((Vec::new(), 0));
        }
        let ids = crate::eval_ids(&evals);
        let index = self.store_and_enqueue(evals).await?;
        Ok((ids, index))
    }

    /// The evaluations of [`ServerInner::create_all_node_evals`], to commit with a change of
    /// the node (the store names the node's index in them).
    pub(crate) fn all_node_evals(&self, node_id: &str) -> Vec<Evaluation> {
        let snapshot = self.state.snapshot();
        let mut jobs = BTreeSet::new();
        for alloc in snapshot.allocs_by_node(node_id) {
            jobs.insert((alloc.namespace.clone(), alloc.job_id.clone()));
        }
        for job in snapshot.jobs(None, "") {
            if (job.r#type == JOB_TYPE_SYSTEM || job.r#type == JOB_TYPE_SYSBATCH) && !job.stop {
                jobs.insert((job.namespace.clone(), job.id.clone()));
            }
        }
        let mut evals: Vec<Evaluation> = Vec::new();
        for (namespace, job_id) in jobs {
            if let Some(job) = snapshot.job(&namespace, &job_id) {
                let mut eval = self.new_eval(&job, EVAL_TRIGGER_NODE_UPDATE, job.job_modify_index);
                node_id.clone_into(&mut eval.node_id);
                evals.push(eval);
            }
        }
        evals
    }

    /// Marks a node's drain complete (the drainer's last step): the strategy cleared, the node
    /// left ineligible, `LastDrain.Status` `complete`.
    pub(crate) async fn complete_drain(&self, node_id: &str) -> Result<u64, ServerError> {
        let now = self.clock.now_unix_ns();
        let change = DrainChange {
            strategy: None,
            mark_eligible: false,
            meta: BTreeMap::new(),
            event: Some(event(SUBSYSTEM_DRAIN, NODE_DRAIN_EVENT_COMPLETE, now)),
            completed: true,
            now_unix_ns: now,
        };
        Ok(self
            .state
            .update_node_with(node_id, EventType::NodeDrain, move |node, index| {
                if node.drain_strategy.is_none() {
                    return false;
                }
                change.apply(node, index);
                true
            })
            .await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain_at(now: i64) -> DrainChange {
        DrainChange {
            strategy: Some(DrainStrategy {
                deadline: drover_structs::DurationNs::from_secs(30),
                ..DrainStrategy::default()
            }),
            mark_eligible: false,
            meta: BTreeMap::from([("reason".to_owned(), "kernel".to_owned())]),
            event: None,
            completed: false,
            now_unix_ns: now,
        }
    }

    #[test]
    fn a_drain_makes_the_node_ineligible_and_starts_last_drain() {
        let mut node = Node {
            scheduling_eligibility: NODE_SCHEDULING_ELIGIBLE.into(),
            ..Node::default()
        };
        drain_at(5_500_000_000).apply(&mut node, 7);
        assert!(node.drain);
        assert_eq!(node.scheduling_eligibility, NODE_SCHEDULING_INELIGIBLE);
        let last = node.last_drain.clone().expect("last drain");
        assert_eq!(last.status, DRAIN_STATUS_DRAINING);
        assert_eq!(last.started_at, Timestamp::from_unix_nanos(5_000_000_000));
        assert_eq!(
            last.meta
                .as_ref()
                .and_then(|m| m.get("reason"))
                .map(String::as_str),
            Some("kernel")
        );

        // Cancelled with mark_eligible: eligible, canceled, the meta kept.
        DrainChange {
            strategy: None,
            mark_eligible: true,
            meta: BTreeMap::new(),
            event: None,
            completed: false,
            now_unix_ns: 9_000_000_000,
        }
        .apply(&mut node, 8);
        assert!(!node.drain && node.drain_strategy.is_none());
        assert_eq!(node.scheduling_eligibility, NODE_SCHEDULING_ELIGIBLE);
        let last = node.last_drain.expect("last drain");
        assert_eq!(last.status, DRAIN_STATUS_CANCELED);
        assert_eq!(last.started_at, Timestamp::from_unix_nanos(5_000_000_000));
        assert_eq!(last.updated_at, Timestamp::from_unix_nanos(9_000_000_000));
        assert!(last.meta.is_some());
    }

    #[test]
    fn completion_keeps_the_node_ineligible() {
        let mut node = Node::default();
        drain_at(1_000_000_000).apply(&mut node, 1);
        DrainChange {
            strategy: None,
            mark_eligible: false,
            meta: BTreeMap::new(),
            event: Some(event(
                SUBSYSTEM_DRAIN,
                NODE_DRAIN_EVENT_COMPLETE,
                2_000_000_000,
            )),
            completed: true,
            now_unix_ns: 2_000_000_000,
        }
        .apply(&mut node, 2);
        assert_eq!(node.scheduling_eligibility, NODE_SCHEDULING_INELIGIBLE);
        assert_eq!(node.last_drain.expect("last").status, DRAIN_STATUS_COMPLETE);
        assert_eq!(node.events.last().map(|e| e.create_index), Some(2));
    }

    #[test]
    fn only_ten_events_are_kept() {
        let mut node = Node::default();
        for index in 0..15 {
            node.append_event(event(SUBSYSTEM_CLUSTER, "x", 0), index);
        }
        assert_eq!(node.events.len(), 10);
        assert_eq!(node.events[0].create_index, 5);
    }
}
