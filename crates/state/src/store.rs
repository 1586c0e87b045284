//! The typed state store the server and the API use: jobs and their versions, evaluations,
//! allocations, nodes, job summaries and service registrations, with modify indexes set by the store, derived job status
//! and summary counters kept in the same write, blocking queries and the event stream.
//!
//! Every write goes through the group-commit [`Engine`]: it runs on the writer task against the
//! in-memory tables, is persisted with the other writes queued at the same time, and is
//! acknowledged only once durable. Reads never touch the disk. Times come from the caller
//! (`now_unix_ns`); the store reads no clock and makes no IDs.
//!
//! A service registration lives as long as its allocation runs: the write that makes an
//! allocation client-terminal (complete, failed, lost), marks its node down, purges its job or
//! collects it removes its registrations too, as Nomad's state store does.
//!
//! **Boundary**: no scheduling decisions. The store records what the server decided and derives
//! only what Nomad's state store derives (job status, summaries, indexes).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use drover_structs::{
    ALLOC_CLIENT_STATUS_LOST, ALLOC_CLIENT_STATUS_PENDING, ALLOC_CLIENT_STATUS_UNKNOWN, Allocation,
    DEFAULT_NAMESPACE, EVAL_STATUS_PENDING, Evaluation, Job, JobSummary, JobVersionTag,
    NODE_STATUS_DOWN, NODE_STATUS_READY, Node, NodeEvent, PeriodicLaunch, ServiceRegistration,
    Timestamp, VariableEncrypted, WrappedRootKey,
};

use crate::derive::{
    add_missing_groups, apply_alloc_to_summary, apply_queued_to_summary, count_child,
    derive_job_status, new_job_summary, recount_job_summary, same_job_spec,
};
use crate::embedded::EmbeddedKv;
use crate::engine::{
    CommitStats, Engine, EngineOptions, Indexes, Table, WatchOutcome, WriteContext, load_table,
};
use crate::error::StateError;
use crate::events::{Event, EventFilter, EventSubscription, EventType, Topic, payload};
use crate::kv::{Kv, MemoryKv};
use crate::tables::{
    AllocJobRef, JOB_TRACKED_VERSIONS, JobKey, ServiceKey, StateSnapshot, StateTables, pairs_under,
    triples_under,
};

/// The event a node's first registration leaves (Nomad's `NodeRegisterEventRegistered`).
pub const NODE_EVENT_REGISTERED: &str = "Node registered";
/// The event a node registering again after it was `down` leaves.
pub const NODE_EVENT_REREGISTERED: &str = "Node re-registered";

/// A "Cluster" node event stamped with the node's status time (whole seconds), as Nomad's
/// state store writes the registration ones.
fn registration_event(message: &str, status_updated_at_secs: i64) -> NodeEvent {
    NodeEvent {
        message: message.to_owned(),
        subsystem: "Cluster".to_owned(),
        timestamp: Timestamp::from_unix_nanos(status_updated_at_secs.saturating_mul(1_000_000_000)),
        ..NodeEvent::default()
    }
}

/// The outcome of [`StateStore::upsert_job`].
#[derive(Debug, Clone)]
pub struct JobRegistration {
    /// The job as stored (with its version, status and indexes).
    pub job: Arc<Job>,
    /// Whether the spec differed from the stored one (a new version was made).
    pub spec_changed: bool,
    /// The job's `JobModifyIndex` (the index of this write when the spec changed).
    pub job_modify_index: u64,
}

/// The outcome of [`StateStore::update_allocs_from_client`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientAllocUpdate {
    /// The index of the write, or the store's latest index when nothing changed.
    pub index: u64,
    /// Updates for allocations the store does not know (ignored).
    pub unknown_alloc_ids: Vec<String>,
}

/// An allocation a client update changed, handed to the caller of
/// [`StateStore::update_allocs_from_client_with_evals`] inside the write.
#[derive(Debug, Clone)]
pub struct ClientAllocChange {
    /// As it was before the update.
    pub before: Arc<Allocation>,
    /// As the update left it.
    pub after: Arc<Allocation>,
    /// Its job as stored now (`None`: purged).
    pub job: Option<Arc<Job>>,
}

/// What makes the evaluations a client update calls for: nothing (`()`), or the caller's
/// closure.
trait FollowUpEvals: Send + 'static {
    /// Whether the changes are wanted (collected only then).
    const WANTED: bool;
    fn evals(&mut self, changes: &[ClientAllocChange]) -> Vec<Evaluation>;
}

impl FollowUpEvals for () {
    const WANTED: bool = false;
    fn evals(&mut self, _changes: &[ClientAllocChange]) -> Vec<Evaluation> {
        Vec::new()
    }
}

impl<F> FollowUpEvals for F
where
    F: FnMut(&[ClientAllocChange]) -> Vec<Evaluation> + Send + 'static,
{
    const WANTED: bool = true;
    fn evals(&mut self, changes: &[ClientAllocChange]) -> Vec<Evaluation> {
        if changes.is_empty() {
            return Vec::new();
        }
        self(changes)
    }
}

/// The state store handle; cheap to clone, shared by the server, the API and the client.
#[derive(Debug, Clone)]
pub struct StateStore {
    pub(crate) engine: Arc<Engine<StateTables>>,
}

pub(crate) fn namespace_or_default(namespace: &mut String) {
    if namespace.is_empty() {
        namespace.push_str(DEFAULT_NAMESPACE);
    }
}

pub(crate) fn require_id(field: &'static str, value: &str) -> Result<(), StateError> {
    if value.is_empty() {
        return Err(StateError::Invalid {
            field,
            reason: "must not be empty".to_owned(),
        });
    }
    if value.contains('\0') {
        return Err(StateError::Invalid {
            field,
            reason: "must not contain a NUL byte".to_owned(),
        });
    }
    Ok(())
}

fn job_record_key(namespace: &str, job_id: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(namespace.len() + job_id.len() + 1);
    key.extend_from_slice(namespace.as_bytes());
    key.push(0);
    key.extend_from_slice(job_id.as_bytes());
    key
}

fn job_version_record_key(namespace: &str, job_id: &str, version: u64) -> Vec<u8> {
    let mut key = job_record_key(namespace, job_id);
    key.push(0);
    key.extend_from_slice(&version.to_be_bytes());
    key
}

fn alloc_job_record_key(job_ref: &AllocJobRef) -> Vec<u8> {
    let mut key = job_record_key(&job_ref.0, &job_ref.1);
    key.push(0);
    key.extend_from_slice(&job_ref.2.to_be_bytes());
    key.extend_from_slice(&job_ref.3.to_be_bytes());
    key
}

fn alloc_job_ref(alloc: &Allocation) -> Option<AllocJobRef> {
    alloc.job.as_deref().map(|job| {
        (
            alloc.namespace.clone(),
            alloc.job_id.clone(),
            job.create_index,
            job.job_modify_index,
        )
    })
}

/// An allocation as persisted: without its job, which is stored once per job version in
/// [`Table::AllocJobs`] and named here.
#[derive(serde::Serialize)]
#[serde(rename_all = "PascalCase")]
struct StoredAllocRef<'a> {
    job_ref: Option<AllocJobRef>,
    allocation: &'a Allocation,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
struct StoredAlloc {
    job_ref: Option<AllocJobRef>,
    allocation: Allocation,
}

/// Persists `alloc` (and its job copy, once per job version) and returns it unchanged.
fn persist_alloc(
    tables: &mut StateTables,
    context: &mut WriteContext,
    alloc: &mut Allocation,
) -> Result<(), StateError> {
    let job_ref = alloc_job_ref(alloc);
    if let (Some(job_ref), Some(job)) = (&job_ref, alloc.job.as_deref())
        && !tables.alloc_jobs.contains(job_ref)
    {
        context.put(Table::AllocJobs, &alloc_job_record_key(job_ref), job)?;
        tables.alloc_jobs.insert(job_ref.clone());
    }
    let job = alloc.job.take();
    let stored = StoredAllocRef {
        job_ref,
        allocation: alloc,
    };
    let result = context.put(Table::Allocs, alloc.id.as_bytes(), &stored);
    alloc.job = job;
    result
}

fn job_event(event_type: EventType, job: &Job) -> Result<Event, StateError> {
    Ok(Event {
        topic: Topic::Job,
        event_type,
        key: job.id.clone(),
        namespace: job.namespace.clone(),
        filter_keys: Vec::new(),
        index: 0,
        payload: payload("jobs", "Job", job)?,
    })
}

/// An allocation event; the payload leaves out the allocation's job, as Nomad's does.
fn alloc_event(event_type: EventType, alloc: &mut Allocation) -> Result<Event, StateError> {
    let job = alloc.job.take();
    let payload = payload("allocs", "Allocation", &*alloc);
    alloc.job = job;
    let mut filter_keys = vec![alloc.job_id.clone()];
    if !alloc.deployment_id.is_empty() {
        filter_keys.push(alloc.deployment_id.clone());
    }
    Ok(Event {
        topic: Topic::Allocation,
        event_type,
        key: alloc.id.clone(),
        namespace: alloc.namespace.clone(),
        filter_keys,
        index: 0,
        payload: payload?,
    })
}

fn eval_event(eval: &Evaluation) -> Result<Event, StateError> {
    Ok(Event {
        topic: Topic::Evaluation,
        event_type: EventType::EvaluationUpdated,
        key: eval.id.clone(),
        namespace: eval.namespace.clone(),
        filter_keys: vec![eval.job_id.clone()],
        index: 0,
        payload: payload("evals", "Evaluation", eval)?,
    })
}

fn node_event(event_type: EventType, node: &Node) -> Result<Event, StateError> {
    Ok(Event {
        topic: Topic::Node,
        event_type,
        key: node.id.clone(),
        namespace: String::new(),
        filter_keys: Vec::new(),
        index: 0,
        payload: payload("nodes", "Node", &node.sanitized())?,
    })
}

/// `{"Service": …}` on the `Service` topic, keyed by the registration's ID and filterable by
/// its job and service name, as Nomad's event stream sends it.
fn service_event(
    event_type: EventType,
    service: &ServiceRegistration,
) -> Result<Event, StateError> {
    Ok(Event {
        topic: Topic::Service,
        event_type,
        key: service.id.clone(),
        namespace: service.namespace.clone(),
        filter_keys: vec![service.job_id.clone(), service.service_name.clone()],
        index: 0,
        payload: payload("service_registrations", "Service", service)?,
    })
}

/// Whether two registrations say the same (tags compared as sets, indexes ignored), as
/// Nomad's `Equal`: an upsert of an unchanged registration writes nothing.
fn same_registration(one: &ServiceRegistration, two: &ServiceRegistration) -> bool {
    let tags = |service: &ServiceRegistration| -> BTreeSet<String> {
        service.tags.iter().cloned().collect()
    };
    one.id == two.id
        && one.service_name == two.service_name
        && one.node_id == two.node_id
        && one.datacenter == two.datacenter
        && one.job_id == two.job_id
        && one.alloc_id == two.alloc_id
        && one.namespace == two.namespace
        && one.address == two.address
        && one.port == two.port
        && tags(one) == tags(two)
}

/// Removes the registrations `keys` (unknown ones are skipped), each with a
/// `ServiceDeregistration` event. Returns how many were removed.
fn remove_services(
    tables: &mut StateTables,
    context: &mut WriteContext,
    keys: Vec<ServiceKey>,
) -> Result<usize, StateError> {
    let mut removed = 0;
    for key in keys {
        let Some(existing) = tables.services.get(&key).cloned() else {
            continue;
        };
        context.index();
        context.delete(Table::ServiceRegistrations, &job_record_key(&key.0, &key.1));
        context.emit(service_event(EventType::ServiceDeregistration, &existing)?);
        tables.unindex_service(&existing);
        tables.services.remove(&key);
        removed += 1;
    }
    Ok(removed)
}

/// Removes the registrations of one allocation (what a terminal allocation leaves behind).
fn remove_services_of_alloc(
    tables: &mut StateTables,
    context: &mut WriteContext,
    alloc_id: &str,
) -> Result<usize, StateError> {
    let keys = StateTables::service_keys_under(&tables.services_by_alloc, alloc_id);
    remove_services(tables, context, keys)
}

async fn load_tables(kv: Arc<dyn Kv>) -> Result<StateTables, StateError> {
    let kv = kv.as_ref();
    let mut tables = StateTables::default();
    for (_, job) in load_table::<Job>(kv, Table::Jobs).await? {
        tables
            .jobs
            .insert((job.namespace.clone(), job.id.clone()), Arc::new(job));
    }
    for (_, job) in load_table::<Job>(kv, Table::JobVersions).await? {
        tables.job_versions.insert(
            (job.namespace.clone(), job.id.clone(), job.version),
            Arc::new(job),
        );
    }
    for (_, summary) in load_table::<JobSummary>(kv, Table::JobSummaries).await? {
        tables.job_summaries.insert(
            (summary.namespace.clone(), summary.job_id.clone()),
            Arc::new(summary),
        );
    }
    for (_, eval) in load_table::<Evaluation>(kv, Table::Evals).await? {
        tables.index_eval(&eval);
        tables.evals.insert(eval.id.clone(), Arc::new(eval));
    }
    let mut alloc_jobs: BTreeMap<AllocJobRef, Arc<Job>> = BTreeMap::new();
    for (_, job) in load_table::<Job>(kv, Table::AllocJobs).await? {
        // The namespace and ID come from the allocation side of the reference; a job copy
        // records its own, which are the same.
        alloc_jobs.insert(
            (
                job.namespace.clone(),
                job.id.clone(),
                job.create_index,
                job.job_modify_index,
            ),
            Arc::new(job),
        );
    }
    for (_, stored) in load_table::<StoredAlloc>(kv, Table::Allocs).await? {
        let mut alloc = stored.allocation;
        if let Some(job_ref) = &stored.job_ref {
            match alloc_jobs.get(job_ref) {
                Some(job) => alloc.job = Some(Arc::clone(job)),
                None => tracing::warn!(
                    alloc_id = %alloc.id,
                    job_id = %alloc.job_id,
                    "stored allocation refers to a job copy that is missing"
                ),
            }
        }
        tables.index_alloc(&alloc);
        tables.allocs.insert(alloc.id.clone(), Arc::new(alloc));
    }
    tables.alloc_jobs.extend(alloc_jobs.into_keys());
    for (_, node) in load_table::<Node>(kv, Table::Nodes).await? {
        tables.put_node(node);
    }
    for (_, launch) in load_table::<PeriodicLaunch>(kv, Table::PeriodicLaunches).await? {
        tables.periodic_launches.insert(
            (launch.namespace.clone(), launch.id.clone()),
            Arc::new(launch),
        );
    }
    for (_, key) in load_table::<WrappedRootKey>(kv, Table::RootKeys).await? {
        tables
            .root_keys
            .insert(key.meta.key_id.clone(), Arc::new(key));
    }
    for (_, variable) in load_table::<VariableEncrypted>(kv, Table::Variables).await? {
        tables.variables.insert(
            (variable.meta.namespace.clone(), variable.meta.path.clone()),
            Arc::new(variable),
        );
    }
    for (_, record) in load_table::<crate::acl_tables::AclRecord>(kv, Table::Acl).await? {
        Arc::make_mut(&mut tables.acl).insert_record(record);
    }
    crate::deployments_table::load_deployments(kv, &mut tables).await?;
    for (_, namespace) in
        load_table::<drover_structs::namespace::Namespace>(kv, Table::Namespaces).await?
    {
        tables
            .namespaces
            .insert(namespace.name.clone(), Arc::new(namespace));
    }
    crate::node_pools_table::load_node_pools(kv, &mut tables).await?;
    for (key, intention) in
        load_table::<drover_structs::intention::Intention>(kv, Table::Intentions).await?
    {
        tables.intentions.insert(
            String::from_utf8_lossy(&key).into_owned(),
            Arc::new(intention),
        );
    }
    crate::scaling_table::load_scaling(kv, &mut tables).await?;
    crate::job_submissions::load_job_submissions(kv, &mut tables).await?;
    for (_, service) in load_table::<ServiceRegistration>(kv, Table::ServiceRegistrations).await? {
        tables.index_service(&service);
        tables.services.insert(
            (service.namespace.clone(), service.id.clone()),
            Arc::new(service),
        );
    }
    Ok(tables)
}

/// The allocations of `job` that belong to this incarnation of it, not to an earlier job with
/// the same ID that was purged (told apart by the job's `CreateIndex`, as Nomad does).
fn allocs_of_incarnation<'a>(
    tables: &'a StateTables,
    job: &'a Job,
) -> impl Iterator<Item = &'a Arc<Allocation>> + 'a {
    tables
        .allocs_of_job(&job.namespace, &job.id)
        .filter(move |alloc| {
            alloc
                .job
                .as_deref()
                .is_none_or(|alloc_job| alloc_job.create_index == job.create_index)
        })
}

/// Recomputes the status of job `key` and stores it if it changed.
pub(crate) fn refresh_job_status(
    tables: &mut StateTables,
    context: &mut WriteContext,
    key: &JobKey,
) -> Result<(), StateError> {
    let Some(job) = tables.jobs.get(key) else {
        return Ok(());
    };
    let status = derive_job_status(
        job,
        allocs_of_incarnation(tables, job),
        tables.evals_of_job(&key.0, &key.1),
    );
    if job.status == status {
        return Ok(());
    }
    let mut updated = Job::clone(job);
    let previous = std::mem::replace(&mut updated.status, status.to_owned());
    updated.modify_index = context.index();
    context.put(Table::Jobs, &job_record_key(&key.0, &key.1), &updated)?;
    count_in_parent(tables, context, &updated, Some(&previous), Some(status))?;
    tables.jobs.insert(key.clone(), Arc::new(updated));
    Ok(())
}

/// Keeps a child job counted under its status in its parent's `Children` summary.
fn count_in_parent(
    tables: &mut StateTables,
    context: &mut WriteContext,
    child: &Job,
    old: Option<&str>,
    new: Option<&str>,
) -> Result<(), StateError> {
    if child.parent_id.is_empty() {
        return Ok(());
    }
    let parent: JobKey = (child.namespace.clone(), child.parent_id.clone());
    update_summary(tables, context, &parent, |summary| {
        count_child(summary, old.filter(|status| !status.is_empty()), new)
    })
}

/// Applies `change` to the summary of job `key` (if the job has one) and stores it if changed.
fn update_summary(
    tables: &mut StateTables,
    context: &mut WriteContext,
    key: &JobKey,
    change: impl FnOnce(&mut JobSummary) -> bool,
) -> Result<(), StateError> {
    let Some(existing) = tables.job_summaries.get(key) else {
        return Ok(());
    };
    let mut summary = JobSummary::clone(existing);
    if !change(&mut summary) {
        return Ok(());
    }
    summary.modify_index = context.index();
    context.put(
        Table::JobSummaries,
        &job_record_key(&key.0, &key.1),
        &summary,
    )?;
    tables.job_summaries.insert(key.clone(), Arc::new(summary));
    Ok(())
}

/// Stores evaluations (server side); returns the jobs they belong to.
/// Cancels the `lost_after` follow-up evaluations of allocations whose client reported them
/// back ("allocs reconnected", Nomad's `cancelFollowupEvalsForReconnect`), unless a live
/// allocation of the job still waits on the same evaluation.
fn cancel_reconnected_followups(
    tables: &mut StateTables,
    context: &mut WriteContext,
    followups: Vec<(String, String, String)>,
    now_unix_ns: i64,
    affected_jobs: &mut BTreeSet<JobKey>,
) -> Result<(), StateError> {
    let mut cancelled = Vec::new();
    for (namespace, job_id, eval_id) in followups {
        let still_awaited = tables
            .allocs_of_job(&namespace, &job_id)
            .any(|alloc| alloc.followup_eval_id == eval_id && !alloc.terminal_status());
        if still_awaited || cancelled.iter().any(|eval: &Evaluation| eval.id == eval_id) {
            continue;
        }
        let Some(eval) = tables.evals.get(&eval_id) else {
            continue;
        };
        if eval.status != EVAL_STATUS_PENDING {
            continue;
        }
        let mut eval = Evaluation::clone(eval);
        eval.status = drover_structs::EVAL_STATUS_CANCELLED.to_owned();
        eval.status_description = EVAL_DESC_ALLOCS_RECONNECTED.to_owned();
        cancelled.push(eval);
    }
    write_evals(tables, context, cancelled, now_unix_ns, affected_jobs)
}

/// `StatusDescription` of a `lost_after` follow-up evaluation made needless by a reconnect.
pub const EVAL_DESC_ALLOCS_RECONNECTED: &str = "allocs reconnected";

/// Records the index of an allocation report on each reporting node that is not `ready`
/// (`LastAllocUpdateIndex`), which lets an `initializing` node become ready.
fn record_alloc_reports(
    tables: &mut StateTables,
    context: &mut WriteContext,
    node_ids: &BTreeSet<String>,
) -> Result<(), StateError> {
    for node_id in node_ids {
        let Some(existing) = tables.nodes.get(node_id) else {
            continue;
        };
        if existing.status == NODE_STATUS_READY {
            continue;
        }
        let mut node = Node::clone(existing);
        node.last_alloc_update_index = context.index();
        context.put(Table::Nodes, node.id.as_bytes(), &node)?;
        tables.put_node(node);
    }
    Ok(())
}

/// The evaluations a change of a node calls for (`node-update` ones for the jobs on it),
/// written in the change's own write: a server that dies after the write leaves the node
/// changed with its evaluations, or neither (a node marked down without them would keep its
/// allocations forever: a new leader times no down node). An evaluation of this node that
/// names no `NodeModifyIndex` gets the node's after the write.
struct NodeEvals(Vec<Evaluation>);

impl NodeEvals {
    fn new(mut evals: Vec<Evaluation>) -> Result<Self, StateError> {
        validate_evals(&mut evals)?;
        Ok(Self(evals))
    }

    /// Writes them; the index of the write, or 0 when there were none.
    fn write(
        &mut self,
        tables: &mut StateTables,
        context: &mut WriteContext,
        node_id: &str,
        node_modify_index: u64,
        now_unix_ns: i64,
    ) -> Result<u64, StateError> {
        let mut evals = std::mem::take(&mut self.0);
        if evals.is_empty() {
            return Ok(0);
        }
        for eval in &mut evals {
            if eval.node_id == node_id && eval.node_modify_index == 0 {
                eval.node_modify_index = node_modify_index;
            }
        }
        let mut affected_jobs = BTreeSet::new();
        write_evals(tables, context, evals, now_unix_ns, &mut affected_jobs)?;
        for key in &affected_jobs {
            refresh_job_status(tables, context, key)?;
        }
        Ok(context.index())
    }
}

pub(crate) fn write_evals(
    tables: &mut StateTables,
    context: &mut WriteContext,
    evals: Vec<Evaluation>,
    now_unix_ns: i64,
    affected_jobs: &mut BTreeSet<JobKey>,
) -> Result<(), StateError> {
    for mut eval in evals {
        let index = context.index();
        let existing = tables.evals.get(&eval.id).cloned();
        match &existing {
            Some(existing) => {
                eval.create_index = existing.create_index;
                eval.create_time = existing.create_time;
                tables.unindex_eval(existing);
            }
            None => {
                eval.create_index = index;
                if eval.create_time == 0 {
                    eval.create_time = now_unix_ns;
                }
            }
        }
        eval.modify_index = index;
        eval.modify_time = now_unix_ns;
        context.put(Table::Evals, eval.id.as_bytes(), &eval)?;
        context.emit(eval_event(&eval)?);
        let job_key = (eval.namespace.clone(), eval.job_id.clone());
        if eval.status != EVAL_STATUS_PENDING && !eval.queued_allocations.is_empty() {
            update_summary(tables, context, &job_key, |summary| {
                apply_queued_to_summary(summary, &eval)
            })?;
        }
        tables.index_eval(&eval);
        tables.evals.insert(eval.id.clone(), Arc::new(eval));
        affected_jobs.insert(job_key);
    }
    Ok(())
}

/// `allocs` in consecutive parts of at most `per_write` (one empty part when there are none).
pub(crate) fn split_allocs(allocs: Vec<Allocation>, per_write: usize) -> Vec<Vec<Allocation>> {
    if allocs.len() <= per_write {
        return vec![allocs];
    }
    let mut parts = Vec::with_capacity(allocs.len().div_ceil(per_write));
    let mut rest = allocs.into_iter().peekable();
    while rest.peek().is_some() {
        parts.push(rest.by_ref().take(per_write).collect());
    }
    parts
}

/// Stores allocations from the plan applier (server side); returns the jobs they belong to.
pub(crate) fn write_server_allocs(
    tables: &mut StateTables,
    context: &mut WriteContext,
    allocs: Vec<Allocation>,
    now_unix_ns: i64,
    affected_jobs: &mut BTreeSet<JobKey>,
) -> Result<(), StateError> {
    for mut alloc in allocs {
        let index = context.index();
        let existing = tables.allocs.get(&alloc.id).cloned();
        let event_type = match &existing {
            Some(existing) => {
                alloc.create_index = existing.create_index;
                alloc.create_time = existing.create_time;
                // The client owns its status and task states; the server may only mark an
                // allocation lost or unknown.
                alloc.task_states.clone_from(&existing.task_states);
                if alloc.client_status != ALLOC_CLIENT_STATUS_LOST
                    && alloc.client_status != ALLOC_CLIENT_STATUS_UNKNOWN
                {
                    alloc.client_status.clone_from(&existing.client_status);
                    alloc
                        .client_description
                        .clone_from(&existing.client_description);
                }
                if alloc.job.is_none() {
                    alloc.job.clone_from(&existing.job);
                }
                // A replacement, once named, stays named (Nomad carries it over).
                if !existing.next_allocation.is_empty() {
                    alloc.next_allocation.clone_from(&existing.next_allocation);
                }
                tables.unindex_alloc(existing);
                if existing.desired_status != alloc.desired_status {
                    EventType::AllocationUpdateDesiredStatus
                } else {
                    EventType::AllocationUpdated
                }
            }
            None => {
                alloc.create_index = index;
                if alloc.create_time == 0 {
                    alloc.create_time = now_unix_ns;
                }
                if alloc.client_status.is_empty() {
                    alloc.client_status = ALLOC_CLIENT_STATUS_PENDING.to_owned();
                }
                if alloc.job.is_none() {
                    alloc.job = tables.job(&alloc.namespace, &alloc.job_id).cloned();
                }
                EventType::AllocationCreated
            }
        };
        alloc.modify_index = index;
        alloc.alloc_modify_index = index;
        alloc.modify_time = now_unix_ns;
        if alloc.client_terminal_status() {
            // A lost allocation's services go with it, even though its client never said so.
            remove_services_of_alloc(tables, context, &alloc.id)?;
        }
        crate::deployments_table::count_alloc_in_deployment(
            tables,
            context,
            existing.as_deref(),
            &alloc,
        )?;
        persist_alloc(tables, context, &mut alloc)?;
        context.emit(alloc_event(event_type, &mut alloc)?);
        let job_key = (alloc.namespace.clone(), alloc.job_id.clone());
        update_summary(tables, context, &job_key, |summary| {
            apply_alloc_to_summary(summary, existing.as_deref(), &alloc)
        })?;
        tables.index_alloc(&alloc);
        let previous_id = (existing.is_none() && !alloc.previous_allocation.is_empty())
            .then(|| alloc.previous_allocation.clone());
        let next_id = alloc.id.clone();
        tables.allocs.insert(alloc.id.clone(), Arc::new(alloc));
        affected_jobs.insert(job_key);
        // As Nomad's store: the allocation a new one replaces names it as its next.
        if let Some(previous_id) = previous_id {
            name_next_allocation(tables, context, &previous_id, next_id, now_unix_ns)?;
        }
    }
    Ok(())
}

/// Records `next_id` as the `NextAllocation` of the allocation `previous_id` (when it is still
/// stored), in the same write.
fn name_next_allocation(
    tables: &mut StateTables,
    context: &mut WriteContext,
    previous_id: &str,
    next_id: String,
    now_unix_ns: i64,
) -> Result<(), StateError> {
    let Some(previous) = tables.allocs.get(previous_id).cloned() else {
        return Ok(());
    };
    if previous.next_allocation == next_id {
        return Ok(());
    }
    let mut updated = Allocation::clone(&previous);
    updated.next_allocation = next_id;
    updated.modify_index = context.index();
    updated.modify_time = now_unix_ns;
    tables.unindex_alloc(&previous);
    persist_alloc(tables, context, &mut updated)?;
    context.emit(alloc_event(EventType::AllocationUpdated, &mut updated)?);
    tables.index_alloc(&updated);
    tables.allocs.insert(updated.id.clone(), Arc::new(updated));
    Ok(())
}

pub(crate) fn validate_allocs(allocs: &mut [Allocation]) -> Result<(), StateError> {
    for alloc in allocs {
        require_id("Allocation.ID", &alloc.id)?;
        require_id("Allocation.JobID", &alloc.job_id)?;
        namespace_or_default(&mut alloc.namespace);
    }
    Ok(())
}

pub(crate) fn validate_evals(evals: &mut [Evaluation]) -> Result<(), StateError> {
    for eval in evals {
        require_id("Evaluation.ID", &eval.id)?;
        namespace_or_default(&mut eval.namespace);
    }
    Ok(())
}

/// Removes the job copies of job `key` that no allocation refers to any more.
fn remove_unused_alloc_jobs(tables: &mut StateTables, context: &mut WriteContext, key: &JobKey) {
    let in_use: BTreeSet<AllocJobRef> = tables
        .allocs_of_job(&key.0, &key.1)
        .filter_map(|alloc| alloc_job_ref(alloc))
        .collect();
    let start: AllocJobRef = (key.0.clone(), key.1.clone(), 0, 0);
    let unused: Vec<AllocJobRef> = tables
        .alloc_jobs
        .range(start..)
        .take_while(|(namespace, job_id, _, _)| namespace == &key.0 && job_id == &key.1)
        .filter(|job_ref| !in_use.contains(*job_ref))
        .cloned()
        .collect();
    for job_ref in unused {
        context.delete(Table::AllocJobs, &alloc_job_record_key(&job_ref));
        tables.alloc_jobs.remove(&job_ref);
    }
}

/// Stores a job registration (see [`StateStore::upsert_job`]).
///
/// `submission` is the jobspec source the registration carried, if any (see
/// [`crate::job_submissions`] for which one a new version keeps).
pub(crate) fn write_job(
    tables: &mut StateTables,
    context: &mut WriteContext,
    mut job: Job,
    submission: Option<drover_structs::JobSubmission>,
    now_unix_ns: i64,
) -> Result<JobRegistration, StateError> {
    let key: JobKey = (job.namespace.clone(), job.id.clone());
    let existing = tables.jobs.get(&key).cloned();
    crate::scaling_table::adopt_policy_indexes(tables, &mut job);
    if let Some(existing) = &existing
        && same_job_spec(existing, &job)
    {
        return Ok(JobRegistration {
            job: Arc::clone(existing),
            spec_changed: false,
            job_modify_index: existing.job_modify_index,
        });
    }
    let submission = crate::job_submissions::submission_for_new_version(
        tables,
        &key,
        submission,
        job.version,
        existing.as_ref().map(|existing| existing.version),
    );
    let index = context.index();
    match &existing {
        Some(existing) => {
            job.version = existing.version + 1;
            job.create_index = existing.create_index;
        }
        None => {
            job.version = 0;
            job.create_index = index;
        }
    }
    job.modify_index = index;
    job.job_modify_index = index;
    job.submit_time = now_unix_ns;
    job.stable = false;
    job.status = derive_job_status(
        &job,
        allocs_of_incarnation(tables, &job),
        tables.evals_of_job(&key.0, &key.1),
    )
    .to_owned();
    job.status_description.clear();
    crate::scaling_table::write_job_scaling_policies(tables, context, &mut job)?;
    if let Some(submission) = submission {
        crate::job_submissions::write_job_submission(
            tables,
            context,
            &key,
            job.version,
            submission,
        )?;
    }

    let record_key = job_record_key(&key.0, &key.1);
    context.put(Table::Jobs, &record_key, &job)?;
    context.put(
        Table::JobVersions,
        &job_version_record_key(&key.0, &key.1, job.version),
        &job,
    )?;
    // Tagged versions are always kept and not counted (Nomad's `upsertJobVersion`).
    let versions: Vec<u64> = tables
        .version_keys_of_job(&key.0, &key.1)
        .into_iter()
        .filter(|version| {
            tables
                .job_versions
                .get(&(key.0.clone(), key.1.clone(), *version))
                .is_none_or(|stored| stored.version_tag.is_none())
        })
        .collect();
    let kept = JOB_TRACKED_VERSIONS.saturating_sub(1);
    let drop_count = versions.len().saturating_sub(kept);
    for version in versions.into_iter().take(drop_count) {
        context.delete(
            Table::JobVersions,
            &job_version_record_key(&key.0, &key.1, version),
        );
        tables
            .job_versions
            .remove(&(key.0.clone(), key.1.clone(), version));
    }

    let summary = match tables.job_summaries.get(&key) {
        Some(existing_summary) => {
            let mut summary = JobSummary::clone(existing_summary);
            add_missing_groups(&mut summary, &job).then_some(summary)
        }
        None => {
            let mut summary = new_job_summary(&job);
            summary.create_index = index;
            Some(summary)
        }
    };
    if let Some(mut summary) = summary {
        summary.modify_index = index;
        context.put(Table::JobSummaries, &record_key, &summary)?;
        tables.job_summaries.insert(key.clone(), Arc::new(summary));
    }

    record_periodic_launch(tables, context, &job, now_unix_ns)?;
    count_in_parent(
        tables,
        context,
        &job,
        existing.as_ref().map(|existing| existing.status.as_str()),
        Some(job.status.as_str()),
    )?;
    context.emit(job_event(EventType::JobRegistered, &job)?);
    let job = Arc::new(job);
    tables.job_versions.insert(
        (key.0.clone(), key.1.clone(), job.version),
        Arc::clone(&job),
    );
    tables.jobs.insert(key, Arc::clone(&job));
    Ok(JobRegistration {
        job,
        spec_changed: true,
        job_modify_index: index,
    })
}

/// Keeps the periodic launch table as Nomad's does on a job register: an active periodic job
/// gets its register time as a first "launch" (so a launch missed while no server ran is
/// caught up), and a periodic child records its launch time (from its ID) on its parent.
fn record_periodic_launch(
    tables: &mut StateTables,
    context: &mut WriteContext,
    job: &Job,
    now_unix_ns: i64,
) -> Result<(), StateError> {
    let mut launches = Vec::new();
    let key: JobKey = (job.namespace.clone(), job.id.clone());
    if job.is_periodic_active() && !tables.periodic_launches.contains_key(&key) {
        launches.push((key, now_unix_ns));
    }
    if !job.parent_id.is_empty() {
        let parent_key: JobKey = (job.namespace.clone(), job.parent_id.clone());
        if let Some(parent) = tables.jobs.get(&parent_key)
            && parent.is_periodic()
            && !parent.is_parameterized()
            && let Some(launch) = drover_structs::periodic_launch_time(&job.id)
        {
            launches.push((parent_key, launch.saturating_mul(1_000_000_000)));
        }
    }
    for ((namespace, id), launch_unix_ns) in launches {
        let index = context.index();
        let key = (namespace.clone(), id.clone());
        let create_index = tables
            .periodic_launches
            .get(&key)
            .map_or(index, |existing| existing.create_index);
        let launch = PeriodicLaunch {
            id,
            namespace,
            launch: Timestamp::from_unix_nanos(launch_unix_ns),
            create_index,
            modify_index: index,
        };
        context.put(
            Table::PeriodicLaunches,
            &job_record_key(&key.0, &key.1),
            &launch,
        )?;
        tables.periodic_launches.insert(key, Arc::new(launch));
    }
    Ok(())
}

/// Removes a job, its versions and its summary (see [`StateStore::delete_job`]).
fn remove_job(
    tables: &mut StateTables,
    context: &mut WriteContext,
    key: &JobKey,
) -> Result<u64, StateError> {
    let Some(job) = tables.jobs.get(key).cloned() else {
        return Err(StateError::NotFound {
            kind: "job",
            id: key.1.clone(),
        });
    };
    let index = context.index();
    let record_key = job_record_key(&key.0, &key.1);
    context.delete(Table::Jobs, &record_key);
    for version in tables.version_keys_of_job(&key.0, &key.1) {
        context.delete(
            Table::JobVersions,
            &job_version_record_key(&key.0, &key.1, version),
        );
        tables
            .job_versions
            .remove(&(key.0.clone(), key.1.clone(), version));
    }
    if tables.job_summaries.contains_key(key) {
        context.delete(Table::JobSummaries, &record_key);
        tables.job_summaries.remove(key);
    }
    if tables.periodic_launches.contains_key(key) {
        context.delete(Table::PeriodicLaunches, &record_key);
        tables.periodic_launches.remove(key);
    }
    let services: Vec<ServiceKey> = triples_under(&tables.services_by_job, &key.0, &key.1)
        .map(|id| (key.0.clone(), id.to_owned()))
        .collect();
    remove_services(tables, context, services)?;
    crate::scaling_table::remove_job_scaling(tables, context, key);
    crate::job_submissions::remove_job_submissions(tables, context, key);
    count_in_parent(tables, context, &job, Some(job.status.as_str()), None)?;
    context.emit(job_event(EventType::JobDeregistered, &job)?);
    tables.jobs.remove(key);
    Ok(index)
}

/// Marks one version of a job stable or not inside a write (see
/// [`StateStore::update_job_stability`]).
pub(crate) fn write_job_stability(
    tables: &mut StateTables,
    context: &mut WriteContext,
    version_key: (String, String, u64),
    stable: bool,
) -> Result<(), StateError> {
    let index = context.index();
    let Some(existing) = tables.job_versions.get(&version_key).cloned() else {
        return Err(StateError::NotFound {
            kind: "job version",
            id: format!("{}@{}", version_key.1, version_key.2),
        });
    };
    if existing.stable == stable {
        return Ok(());
    }
    let (namespace, job_id, version) = version_key;
    let mut job = Job::clone(&existing);
    job.stable = stable;
    let key: JobKey = (namespace, job_id);
    let current = tables
        .jobs
        .get(&key)
        .filter(|current| current.version == version)
        .cloned();
    if let Some(current) = current {
        let mut current = Job::clone(&current);
        current.stable = stable;
        current.modify_index = index;
        context.put(Table::Jobs, &job_record_key(&key.0, &key.1), &current)?;
        context.emit(job_event(EventType::JobRegistered, &current)?);
        job = current.clone();
        tables.jobs.insert(key.clone(), Arc::new(current));
    }
    context.put(
        Table::JobVersions,
        &job_version_record_key(&key.0, &key.1, version),
        &job,
    )?;
    tables
        .job_versions
        .insert((key.0, key.1, version), Arc::new(job));
    Ok(())
}

/// Applies (`Some`) or removes (`None`, found by `name`) a job version's tag, as Nomad's
/// `UpdateJobVersionTag`: the version's record, and the job itself when that version is the
/// current one (its `ModifyIndex` moves). A name on another version, an unknown version or an
/// unknown tag is refused in Nomad's words.
pub(crate) fn write_job_version_tag(
    tables: &mut StateTables,
    context: &mut WriteContext,
    key: JobKey,
    version: Option<u64>,
    name: &str,
    tag: Option<JobVersionTag>,
) -> Result<(), StateError> {
    let index = context.index();
    let Some(current) = tables.jobs.get(&key).cloned() else {
        return Err(StateError::Refused(format!("job {:?} not found", key.1)));
    };
    let versions: Vec<Arc<Job>> = tables
        .version_keys_of_job(&key.0, &key.1)
        .into_iter()
        .filter_map(|number| {
            tables
                .job_versions
                .get(&(key.0.clone(), key.1.clone(), number))
                .cloned()
        })
        .collect();
    let target = match &tag {
        Some(tag) => {
            let wanted = version.unwrap_or(current.version);
            let mut found = None;
            for stored in &versions {
                if stored
                    .version_tag
                    .as_ref()
                    .is_some_and(|existing| existing.name == tag.name)
                    && stored.version != wanted
                {
                    return Err(StateError::Refused(format!(
                        "tag {:?} already exists on a different version of job {:?}",
                        tag.name, key.1
                    )));
                }
                if stored.version == wanted {
                    found = Some(Arc::clone(stored));
                }
            }
            found.ok_or_else(|| {
                StateError::Refused(format!("job {:?} version {wanted} not found", key.1))
            })?
        }
        None => versions
            .iter()
            .find(|stored| {
                stored
                    .version_tag
                    .as_ref()
                    .is_some_and(|existing| existing.name == name)
            })
            .cloned()
            .ok_or_else(|| {
                StateError::Refused(format!("tag {name:?} not found on job {:?}", key.1))
            })?,
    };
    let mut job = Job::clone(&target);
    job.version_tag = tag;
    job.modify_index = index;
    if job.version == current.version {
        let mut latest = Job::clone(&current);
        latest.version_tag.clone_from(&job.version_tag);
        latest.modify_index = index;
        context.put(Table::Jobs, &job_record_key(&key.0, &key.1), &latest)?;
        context.emit(job_event(EventType::JobRegistered, &latest)?);
        tables.jobs.insert(key.clone(), Arc::new(latest));
    }
    context.put(
        Table::JobVersions,
        &job_version_record_key(&key.0, &key.1, job.version),
        &job,
    )?;
    let version_key = (key.0, key.1, job.version);
    tables.job_versions.insert(version_key, Arc::new(job));
    Ok(())
}

impl StateStore {
    /// Applies or removes a job version's tag ([`write_job_version_tag`]); the write's index.
    pub async fn update_job_version_tag(
        &self,
        namespace: &str,
        job_id: &str,
        version: Option<u64>,
        name: &str,
        tag: Option<JobVersionTag>,
    ) -> Result<u64, StateError> {
        let key: JobKey = (namespace.to_owned(), job_id.to_owned());
        let name = name.to_owned();
        self.engine
            .write(move |tables, context| {
                write_job_version_tag(tables, context, key, version, &name, tag)?;
                Ok(context.index())
            })
            .await
    }

    /// Opens (or creates) the embedded store `<data_dir>/state.redb` and loads it into memory.
    pub async fn open(data_dir: &Path) -> Result<Self, StateError> {
        let kv = EmbeddedKv::open_in_dir(data_dir).await?;
        Self::open_with_kv(Arc::new(kv), EngineOptions::default()).await
    }

    /// A store over any [`Kv`] backend.
    pub async fn open_with_kv(kv: Arc<dyn Kv>, options: EngineOptions) -> Result<Self, StateError> {
        let engine = Engine::start(kv, options, load_tables).await?;
        Ok(Self {
            engine: Arc::new(engine),
        })
    }

    /// Catches up with writes another store made to the shared backend (etcd): reloads the
    /// tables and indexes and wakes blocking queries whose tables moved. See [`Engine::reload`].
    pub async fn reload_from_backend(&self) -> Result<(), StateError> {
        self.engine.reload().await
    }

    /// A store kept only in memory (tests, `-dev` without a data dir).
    pub async fn in_memory() -> Result<Self, StateError> {
        Self::open_with_kv(Arc::new(MemoryKv::new()), EngineOptions::default()).await
    }

    /// Commits what is queued and closes the backend; later writes fail with
    /// [`StateError::Closed`], reads keep answering from the last state.
    pub async fn close(&self) {
        self.engine.shutdown().await;
    }

    /// Whether the store still takes writes (its writer runs and it was not closed).
    pub fn is_writable(&self) -> bool {
        self.engine.is_writable()
    }

    /// A consistent read view of everything at one index.
    pub fn snapshot(&self) -> StateSnapshot {
        StateSnapshot {
            committed: self.engine.snapshot(),
        }
    }

    /// The current modify indexes.
    pub fn indexes(&self) -> Indexes {
        self.engine.indexes()
    }

    /// The index of the last write.
    pub fn latest_index(&self) -> u64 {
        self.engine.indexes().latest()
    }

    /// Blocking query support: waits until one of `tables` moves past `min_index` or until
    /// `deadline`, and reports the tables' largest index.
    pub async fn wait_for_change(
        &self,
        tables: &[Table],
        min_index: u64,
        deadline: tokio::time::Instant,
    ) -> WatchOutcome {
        self.engine
            .wait_for_change(tables, min_index, deadline)
            .await
    }

    /// Publishes the events another server's store shared with its writes (see
    /// `Kv::shares_events`), after [`StateStore::reload_from_backend`] caught up with them.
    pub fn publish_shared_events(&self, encoded: &[u8]) -> Result<(), StateError> {
        self.engine
            .publish_shared_events(encoded)
            .map_err(|error| StateError::Reload(format!("decoding shared events: {error}")))
    }

    /// The event stream from `from_index` (0: the newest batches still buffered, then new ones).
    pub fn subscribe_events(&self, from_index: u64, filter: EventFilter) -> EventSubscription {
        self.engine.subscribe_events(from_index, filter)
    }

    /// The whole keyspace at one backend revision, as a snapshot archive holds it
    /// ([`crate::archive`]). `stale`: a replica that may lag may answer (etcd).
    pub async fn read_all(&self, stale: bool) -> Result<crate::kv::KvContents, StateError> {
        self.engine.read_all(stale).await
    }

    /// Replaces everything with a snapshot's records (see [`Engine::restore`]): refused before
    /// anything changes when a record does not decode; answers the new latest index.
    pub async fn restore(&self, pairs: Vec<crate::kv::KvPair>) -> Result<u64, StateError> {
        self.engine.restore(pairs).await
    }

    /// Counters of the group-commit writer.
    pub fn commit_stats(&self) -> CommitStats {
        self.engine.stats()
    }

    /// Registers or updates a job.
    ///
    /// A new job starts at version 0. A changed spec (anything but the fields the server sets)
    /// makes version N+1 with `JobModifyIndex` and `SubmitTime` of this write; an unchanged
    /// spec writes nothing and returns the stored job. Versions beyond the last
    /// [`JOB_TRACKED_VERSIONS`] are dropped. The summary gains entries for new groups. A
    /// deregistration without purge is a registration of the job with `Stop` set.
    pub async fn upsert_job(
        &self,
        job: Job,
        now_unix_ns: i64,
    ) -> Result<JobRegistration, StateError> {
        self.upsert_job_with_submission(job, None, now_unix_ns)
            .await
    }

    /// Registers or updates a job as [`StateStore::upsert_job`] does, keeping `submission`
    /// (the jobspec source the registration carried) for the new version when the spec
    /// changed (see [`crate::job_submissions`]).
    pub async fn upsert_job_with_submission(
        &self,
        job: Job,
        submission: Option<drover_structs::JobSubmission>,
        now_unix_ns: i64,
    ) -> Result<JobRegistration, StateError> {
        let (registration, _) = self
            .write_job_and_evals(job, submission, Vec::new(), now_unix_ns)
            .await?;
        Ok(registration)
    }

    /// Registers a job and creates its evaluations in one write (Nomad's job register applies
    /// both together), so the eval is never seen without its job version. Returns the
    /// registration and the index of the evaluations (0 when there were none).
    pub async fn upsert_job_with_evals(
        &self,
        job: Job,
        evals: Vec<Evaluation>,
        now_unix_ns: i64,
    ) -> Result<(JobRegistration, u64), StateError> {
        self.write_job_and_evals(job, None, evals, now_unix_ns)
            .await
    }

    /// Registers a job as [`StateStore::upsert_job_with_submission`] does and creates its
    /// evaluations in the same write (see [`StateStore::upsert_job_with_evals`]).
    pub async fn upsert_job_with_submission_and_evals(
        &self,
        job: Job,
        submission: Option<drover_structs::JobSubmission>,
        evals: Vec<Evaluation>,
        now_unix_ns: i64,
    ) -> Result<(JobRegistration, u64), StateError> {
        self.write_job_and_evals(job, submission, evals, now_unix_ns)
            .await
    }

    async fn write_job_and_evals(
        &self,
        mut job: Job,
        submission: Option<drover_structs::JobSubmission>,
        mut evals: Vec<Evaluation>,
        now_unix_ns: i64,
    ) -> Result<(JobRegistration, u64), StateError> {
        require_id("Job.ID", &job.id)?;
        namespace_or_default(&mut job.namespace);
        validate_evals(&mut evals)?;
        self.engine
            .write(move |tables, context| {
                let key: JobKey = (job.namespace.clone(), job.id.clone());
                let mut registration = write_job(tables, context, job, submission, now_unix_ns)?;
                if evals.is_empty() {
                    return Ok((registration, 0));
                }
                // An evaluation made with its job names the job version of this write.
                for eval in &mut evals {
                    if eval.job_modify_index == 0 && eval.job_id == key.1 {
                        eval.job_modify_index = registration.job_modify_index;
                    }
                }
                let mut affected_jobs = BTreeSet::new();
                write_evals(tables, context, evals, now_unix_ns, &mut affected_jobs)?;
                affected_jobs.insert(key.clone());
                for affected in &affected_jobs {
                    refresh_job_status(tables, context, affected)?;
                }
                if let Some(job) = tables.jobs.get(&key) {
                    registration.job = Arc::clone(job);
                }
                Ok((registration, context.index()))
            })
            .await
    }

    /// Purges a job: removes it, its versions and its summary (its evaluations and allocations
    /// stay until garbage collection). Returns the index of the write.
    pub async fn delete_job(&self, namespace: &str, job_id: &str) -> Result<u64, StateError> {
        self.delete_job_with_evals(namespace, job_id, Vec::new(), 0)
            .await
    }

    /// Purges a job and creates its deregistration evaluations in one write.
    pub async fn delete_job_with_evals(
        &self,
        namespace: &str,
        job_id: &str,
        mut evals: Vec<Evaluation>,
        now_unix_ns: i64,
    ) -> Result<u64, StateError> {
        validate_evals(&mut evals)?;
        let key: JobKey = (namespace.to_owned(), job_id.to_owned());
        self.engine
            .write(move |tables, context| {
                let index = remove_job(tables, context, &key)?;
                // An evaluation made with the purge names the purge's index as its job's.
                for eval in &mut evals {
                    if eval.job_modify_index == 0 && eval.job_id == key.1 {
                        eval.job_modify_index = index;
                    }
                }
                let mut affected_jobs = BTreeSet::new();
                write_evals(tables, context, evals, now_unix_ns, &mut affected_jobs)?;
                Ok(index)
            })
            .await
    }

    /// Marks one version of a job stable or not (Nomad's `UpdateJobStability`): the version's
    /// record, and the job itself when that version is the current one (its `ModifyIndex`
    /// moves, its `JobModifyIndex` and version do not). Returns the index of the write.
    pub async fn update_job_stability(
        &self,
        namespace: &str,
        job_id: &str,
        version: u64,
        stable: bool,
    ) -> Result<u64, StateError> {
        let version_key = (namespace.to_owned(), job_id.to_owned(), version);
        self.engine
            .write(move |tables, context| {
                write_job_stability(tables, context, version_key, stable)?;
                Ok(context.index())
            })
            .await
    }

    /// Creates or updates evaluations (one write, one index). `CreateIndex`/`ModifyIndex` and
    /// `ModifyTime` are set here; `CreateTime` is kept if given. A finished evaluation's
    /// `QueuedAllocations` set the job summary's `Queued` counters.
    pub async fn upsert_evals(
        &self,
        mut evals: Vec<Evaluation>,
        now_unix_ns: i64,
    ) -> Result<u64, StateError> {
        validate_evals(&mut evals)?;
        self.upsert_allocs_and_evals(Vec::new(), evals, now_unix_ns)
            .await
    }

    /// Stores allocations from the plan applier (one write, one index). New ones get
    /// `CreateIndex`, `ClientStatus` `pending` when unset, and the current job when `Job` is
    /// unset; existing ones keep the client's status and task states unless the server marks
    /// them `lost` or `unknown`.
    pub async fn upsert_allocs(
        &self,
        allocs: Vec<Allocation>,
        now_unix_ns: i64,
    ) -> Result<u64, StateError> {
        self.upsert_allocs_and_evals(allocs, Vec::new(), now_unix_ns)
            .await
    }

    /// How many allocations one write may carry: all of them on a backend without a cap on
    /// operations per transaction; on etcd (128 by default) a share that stays within it even
    /// when each allocation also removes its service registrations. A write of more splits
    /// into consecutive writes of that many, each a consistent state (as a plan the applier
    /// committed in part); the last one carries the evaluations.
    pub(crate) fn allocs_per_write(&self) -> usize {
        const OPS_PER_ALLOC: usize = 4;
        const OPS_BESIDES: usize = 16;
        self.engine.max_ops_per_batch().map_or(usize::MAX, |cap| {
            (cap.saturating_sub(OPS_BESIDES) / OPS_PER_ALLOC).max(1)
        })
    }

    /// Stores allocations (a migration's marks, a stop's) and the evaluations that act on
    /// them, at one index (in consecutive writes of [`StateStore::allocs_per_write`]
    /// allocations on a backend with a cap, the evaluations with the first: a server that
    /// dies between the writes leaves every allocation already written with a pending
    /// evaluation that acts on it, which the next leader schedules).
    pub async fn upsert_allocs_and_evals(
        &self,
        mut allocs: Vec<Allocation>,
        mut evals: Vec<Evaluation>,
        now_unix_ns: i64,
    ) -> Result<u64, StateError> {
        validate_allocs(&mut allocs)?;
        validate_evals(&mut evals)?;
        let mut index = 0;
        let mut evals = Some(evals);
        for allocs in split_allocs(allocs, self.allocs_per_write()) {
            let evals = evals.take().unwrap_or_default();
            index = self
                .write_allocs_and_evals(allocs, evals, now_unix_ns)
                .await?;
        }
        Ok(index)
    }

    async fn write_allocs_and_evals(
        &self,
        allocs: Vec<Allocation>,
        evals: Vec<Evaluation>,
        now_unix_ns: i64,
    ) -> Result<u64, StateError> {
        self.engine
            .write(move |tables, context| {
                if allocs.is_empty() && evals.is_empty() {
                    return Ok(context.latest_committed_index());
                }
                let mut affected_jobs = BTreeSet::new();
                write_server_allocs(tables, context, allocs, now_unix_ns, &mut affected_jobs)?;
                write_evals(tables, context, evals, now_unix_ns, &mut affected_jobs)?;
                for key in &affected_jobs {
                    refresh_job_status(tables, context, key)?;
                }
                Ok(context.index())
            })
            .await
    }

    /// Applies allocation updates reported by clients: only `ClientStatus`,
    /// `ClientDescription`, `TaskStates`, `NetworkStatus` when given, and a deployment health
    /// that is news (`Allocation::merge_client_update`); every server-owned field is kept. When an allocation turns terminal, tasks without a
    /// `FinishedAt` get `now_unix_ns`.
    pub async fn update_allocs_from_client(
        &self,
        updates: Vec<Allocation>,
        now_unix_ns: i64,
    ) -> Result<ClientAllocUpdate, StateError> {
        // Each allocation's update stands alone: a batch larger than one write allows is
        // applied in consecutive writes.
        let mut answer = ClientAllocUpdate {
            index: 0,
            unknown_alloc_ids: Vec::new(),
        };
        for updates in split_allocs(updates, self.allocs_per_write()) {
            let (part, ()) = self.write_client_updates(updates, now_unix_ns, ()).await?;
            answer.index = part.index;
            answer.unknown_alloc_ids.extend(part.unknown_alloc_ids);
        }
        Ok(answer)
    }

    /// Applies client updates as [`StateStore::update_allocs_from_client`] does, and the
    /// evaluations they call for in the same write: `follow_up` is handed the allocations each
    /// write changed (as they were and as they are, with their job) and answers the
    /// evaluations to create with them (Nomad's `Node.UpdateAlloc` commits the updates and
    /// their evaluations in one Raft entry). A server that dies after the write leaves a
    /// failed allocation with the evaluation that replaces it, never without.
    pub async fn update_allocs_from_client_with_evals<F>(
        &self,
        updates: Vec<Allocation>,
        now_unix_ns: i64,
        mut follow_up: F,
    ) -> Result<ClientAllocUpdate, StateError>
    where
        F: FnMut(&[ClientAllocChange]) -> Vec<Evaluation> + Send + 'static,
    {
        let mut answer = ClientAllocUpdate {
            index: 0,
            unknown_alloc_ids: Vec::new(),
        };
        for updates in split_allocs(updates, self.allocs_per_write()) {
            let (part, returned) = self
                .write_client_updates(updates, now_unix_ns, follow_up)
                .await?;
            follow_up = returned;
            answer.index = part.index;
            answer.unknown_alloc_ids.extend(part.unknown_alloc_ids);
        }
        Ok(answer)
    }

    async fn write_client_updates<F: FollowUpEvals>(
        &self,
        updates: Vec<Allocation>,
        now_unix_ns: i64,
        mut follow_up: F,
    ) -> Result<(ClientAllocUpdate, F), StateError> {
        self.engine
            .write(move |tables, context| {
                let mut changes = Vec::new();
                let mut unknown_alloc_ids = Vec::new();
                let mut affected_jobs = BTreeSet::new();
                let mut reporting_nodes = BTreeSet::new();
                let mut reconnected_followups = Vec::new();
                for update in updates {
                    let Some(existing) = tables.allocs.get(&update.id).cloned() else {
                        unknown_alloc_ids.push(update.id);
                        continue;
                    };
                    let index = context.index();
                    let mut alloc = Allocation::clone(&existing);
                    let followup = existing.followup_eval_for_reconnect(&update.client_status);
                    alloc.merge_client_update(update, index);
                    reporting_nodes.insert(alloc.node_id.clone());
                    if let Some(eval_id) = followup {
                        alloc.followup_eval_id.clear();
                        reconnected_followups.push((
                            alloc.namespace.clone(),
                            alloc.job_id.clone(),
                            eval_id,
                        ));
                    }
                    if alloc.client_terminal_status() {
                        for task_state in alloc.task_states.values_mut() {
                            if task_state.finished_at.is_zero() {
                                task_state.finished_at = Timestamp::from_unix_nanos(now_unix_ns);
                            }
                        }
                    }
                    alloc.modify_index = index;
                    alloc.modify_time = now_unix_ns;
                    if alloc.client_terminal_status() {
                        remove_services_of_alloc(tables, context, &alloc.id)?;
                    }
                    crate::deployments_table::count_alloc_in_deployment(
                        tables,
                        context,
                        Some(&existing),
                        &alloc,
                    )?;
                    persist_alloc(tables, context, &mut alloc)?;
                    context.emit(alloc_event(EventType::AllocationUpdated, &mut alloc)?);
                    let job_key = (alloc.namespace.clone(), alloc.job_id.clone());
                    update_summary(tables, context, &job_key, |summary| {
                        apply_alloc_to_summary(summary, Some(&existing), &alloc)
                    })?;
                    let alloc = Arc::new(alloc);
                    if F::WANTED {
                        changes.push(ClientAllocChange {
                            before: existing,
                            after: Arc::clone(&alloc),
                            job: tables.jobs.get(&job_key).cloned(),
                        });
                    }
                    tables.allocs.insert(alloc.id.clone(), alloc);
                    affected_jobs.insert(job_key);
                }
                let mut evals = follow_up.evals(&changes);
                // The allocations are changed already, so nothing may fail from here on: an
                // evaluation without an ID (the caller always makes one) is left out rather
                // than refused.
                evals.retain(|eval| !eval.id.is_empty());
                for eval in &mut evals {
                    namespace_or_default(&mut eval.namespace);
                }
                write_evals(tables, context, evals, now_unix_ns, &mut affected_jobs)?;
                cancel_reconnected_followups(
                    tables,
                    context,
                    reconnected_followups,
                    now_unix_ns,
                    &mut affected_jobs,
                )?;
                for key in &affected_jobs {
                    refresh_job_status(tables, context, key)?;
                }
                let index = if affected_jobs.is_empty() {
                    context.latest_committed_index()
                } else {
                    record_alloc_reports(tables, context, &reporting_nodes)?;
                    context.index()
                };
                Ok((
                    ClientAllocUpdate {
                        index,
                        unknown_alloc_ids,
                    },
                    follow_up,
                ))
            })
            .await
    }

    /// Registers or updates a node. `StatusUpdatedAt` (Unix seconds) moves when the status
    /// changes or the node is new. A re-registration without events, eligibility or drain keeps
    /// the stored ones (the server owns those), and a driver whose health changed since the
    /// stored record adds a "Driver" event ([`Node::driver_health_events`]). Returns the index
    /// of the write.
    pub async fn upsert_node(&self, node: Node, now_unix_ns: i64) -> Result<u64, StateError> {
        Ok(self
            .upsert_node_with_evals(node, Vec::new(), now_unix_ns)
            .await?
            .0)
    }

    /// Registers or updates a node as [`StateStore::upsert_node`] does, and creates the
    /// evaluations the change calls for in the same write ([`NodeEvals`]). Returns the index
    /// of the write and the evaluations' (0 when there were none).
    pub async fn upsert_node_with_evals(
        &self,
        mut node: Node,
        evals: Vec<Evaluation>,
        now_unix_ns: i64,
    ) -> Result<(u64, u64), StateError> {
        require_id("Node.ID", &node.id)?;
        let mut evals = NodeEvals::new(evals)?;
        self.engine
            .write(move |tables, context| {
                let index = context.index();
                let existing = tables.nodes.get(&node.id).cloned();
                match &existing {
                    Some(existing) => {
                        node.create_index = existing.create_index;
                        // What the server decided about the node survives a re-registration.
                        if node.events.is_empty() {
                            node.events.clone_from(&existing.events);
                        }
                        for event in node.driver_health_events(existing, now_unix_ns) {
                            node.append_event(event, index);
                        }
                        // Eligibility and drain are the server's (a client registers
                        // itself eligible); a re-registration never undoes a drain.
                        if !existing.scheduling_eligibility.is_empty() {
                            node.scheduling_eligibility
                                .clone_from(&existing.scheduling_eligibility);
                        }
                        node.drain_strategy.clone_from(&existing.drain_strategy);
                        node.drain = node.drain_strategy.is_some();
                        node.last_drain.clone_from(&existing.last_drain);
                        node.last_missed_heartbeat_index = node
                            .last_missed_heartbeat_index
                            .max(existing.last_missed_heartbeat_index);
                        node.last_alloc_update_index = node
                            .last_alloc_update_index
                            .max(existing.last_alloc_update_index);
                        if existing.status == node.status {
                            node.status_updated_at = existing.status_updated_at;
                        } else {
                            node.status_updated_at = now_unix_ns / 1_000_000_000;
                        }
                        // Back from `down`: Nomad's state store records the return.
                        if existing.status == NODE_STATUS_DOWN && node.status != NODE_STATUS_DOWN {
                            let event =
                                registration_event(NODE_EVENT_REREGISTERED, node.status_updated_at);
                            node.append_event(event, index);
                        }
                    }
                    None => {
                        node.create_index = index;
                        node.status_updated_at = now_unix_ns / 1_000_000_000;
                        // The first registration is the node's first event, as Nomad's.
                        node.events = Vec::new();
                        let event =
                            registration_event(NODE_EVENT_REGISTERED, node.status_updated_at);
                        node.append_event(event, index);
                    }
                }
                node.modify_index = index;
                crate::node_pools_table::ensure_node_pool(tables, context, &node.node_pool)?;
                context.put(Table::Nodes, node.id.as_bytes(), &node)?;
                context.emit(node_event(EventType::NodeRegistration, &node)?);
                let node_id = node.id.clone();
                tables.put_node(node);
                let eval_index = evals.write(tables, context, &node_id, index, now_unix_ns)?;
                Ok((index, eval_index))
            })
            .await
    }

    /// Sets a node's status (`ready`, `down`, …). An unchanged status writes nothing and returns
    /// the node's `ModifyIndex`.
    pub async fn update_node_status(
        &self,
        node_id: &str,
        status: &str,
        now_unix_ns: i64,
    ) -> Result<u64, StateError> {
        Ok(self
            .update_node_status_with_evals(node_id, status, Vec::new(), now_unix_ns)
            .await?
            .0)
    }

    /// Sets a node's status as [`StateStore::update_node_status`] does, and creates the
    /// evaluations the change calls for in the same write ([`NodeEvals`]; also when the status
    /// was already `status`). Returns the node's `ModifyIndex` and the evaluations' index (0
    /// when there were none).
    pub async fn update_node_status_with_evals(
        &self,
        node_id: &str,
        status: &str,
        evals: Vec<Evaluation>,
        now_unix_ns: i64,
    ) -> Result<(u64, u64), StateError> {
        let node_id = node_id.to_owned();
        let status = status.to_owned();
        let mut evals = NodeEvals::new(evals)?;
        self.engine
            .write(move |tables, context| {
                let Some(existing) = tables.nodes.get(&node_id).cloned() else {
                    return Err(StateError::NotFound {
                        kind: "node",
                        id: node_id,
                    });
                };
                if existing.status == status {
                    let index = existing.modify_index;
                    let eval_index = evals.write(tables, context, &node_id, index, now_unix_ns)?;
                    return Ok((index, eval_index));
                }
                let index = context.index();
                let mut node = Node::clone(&existing);
                node.status = status;
                node.status_updated_at = now_unix_ns / 1_000_000_000;
                node.modify_index = index;
                if !existing.unresponsive() && node.unresponsive() {
                    node.last_missed_heartbeat_index = index;
                } else if node.status == NODE_STATUS_READY {
                    node.last_missed_heartbeat_index = 0;
                }
                if node.status == NODE_STATUS_DOWN {
                    // A down node's services answer no more; its allocations turn lost next.
                    let keys = StateTables::service_keys_under(&tables.services_by_node, &node.id);
                    remove_services(tables, context, keys)?;
                }
                context.put(Table::Nodes, node.id.as_bytes(), &node)?;
                context.emit(node_event(EventType::NodeStreamEvent, &node)?);
                tables.put_node(node);
                let eval_index = evals.write(tables, context, &node_id, index, now_unix_ns)?;
                Ok((index, eval_index))
            })
            .await
    }

    /// Sets a node's scheduling eligibility (`eligible` or `ineligible`). An unchanged value
    /// writes nothing and returns the node's `ModifyIndex`.
    pub async fn update_node_eligibility(
        &self,
        node_id: &str,
        eligibility: &str,
    ) -> Result<u64, StateError> {
        let node_id = node_id.to_owned();
        let eligibility = eligibility.to_owned();
        self.engine
            .write(move |tables, context| {
                let Some(existing) = tables.nodes.get(&node_id).cloned() else {
                    return Err(StateError::NotFound {
                        kind: "node",
                        id: node_id,
                    });
                };
                if existing.scheduling_eligibility == eligibility {
                    return Ok(existing.modify_index);
                }
                let index = context.index();
                let mut node = Node::clone(&existing);
                node.scheduling_eligibility = eligibility;
                node.modify_index = index;
                context.put(Table::Nodes, node.id.as_bytes(), &node)?;
                context.emit(node_event(EventType::NodeEligibility, &node)?);
                tables.put_node(node);
                Ok(index)
            })
            .await
    }

    /// A server-side change of a node (drain, eligibility) in one write: `change` edits a copy
    /// given the write's index and says whether anything changed; nothing is written when it
    /// did not (the node's `ModifyIndex` is returned). Emits `event_type` on the `Node` topic.
    pub async fn update_node_with<F>(
        &self,
        node_id: &str,
        event_type: EventType,
        change: F,
    ) -> Result<u64, StateError>
    where
        F: FnOnce(&mut Node, u64) -> bool + Send + 'static,
    {
        Ok(self
            .update_node_with_evals(node_id, event_type, change, Vec::new(), 0)
            .await?
            .0)
    }

    /// A server-side change of a node as [`StateStore::update_node_with`] makes it, and the
    /// evaluations it calls for, in one write ([`NodeEvals`]; written also when `change`
    /// changed nothing). Returns the node's `ModifyIndex` and the evaluations' index (0 when
    /// there were none).
    pub async fn update_node_with_evals<F>(
        &self,
        node_id: &str,
        event_type: EventType,
        change: F,
        evals: Vec<Evaluation>,
        now_unix_ns: i64,
    ) -> Result<(u64, u64), StateError>
    where
        F: FnOnce(&mut Node, u64) -> bool + Send + 'static,
    {
        let node_id = node_id.to_owned();
        let mut evals = NodeEvals::new(evals)?;
        self.engine
            .write(move |tables, context| {
                let Some(existing) = tables.nodes.get(&node_id).cloned() else {
                    return Err(StateError::NotFound {
                        kind: "node",
                        id: node_id,
                    });
                };
                let index = context.index();
                let mut node = Node::clone(&existing);
                if !change(&mut node, index) {
                    let index = existing.modify_index;
                    let eval_index = evals.write(tables, context, &node_id, index, now_unix_ns)?;
                    return Ok((index, eval_index));
                }
                node.modify_index = index;
                context.put(Table::Nodes, node.id.as_bytes(), &node)?;
                context.emit(node_event(event_type, &node)?);
                tables.put_node(node);
                let eval_index = evals.write(tables, context, &node_id, index, now_unix_ns)?;
                Ok((index, eval_index))
            })
            .await
    }

    /// Garbage collection: removes evaluations and allocations by ID (unknown IDs are
    /// skipped) and refreshes the status of their jobs. Summaries are left as they are, as
    /// Nomad leaves them. Returns the index of the write, or the latest index when nothing was
    /// removed.
    pub async fn delete_evals_and_allocs(
        &self,
        eval_ids: Vec<String>,
        alloc_ids: Vec<String>,
    ) -> Result<u64, StateError> {
        self.engine
            .write(move |tables, context| {
                let mut affected_jobs = BTreeSet::new();
                for alloc_id in alloc_ids {
                    let Some(alloc) = tables.allocs.get(&alloc_id).cloned() else {
                        continue;
                    };
                    context.delete(Table::Allocs, alloc_id.as_bytes());
                    remove_services_of_alloc(tables, context, &alloc_id)?;
                    tables.unindex_alloc(&alloc);
                    tables.allocs.remove(&alloc_id);
                    affected_jobs.insert((alloc.namespace.clone(), alloc.job_id.clone()));
                }
                for eval_id in eval_ids {
                    let Some(eval) = tables.evals.get(&eval_id).cloned() else {
                        continue;
                    };
                    context.delete(Table::Evals, eval_id.as_bytes());
                    tables.unindex_eval(&eval);
                    tables.evals.remove(&eval_id);
                    affected_jobs.insert((eval.namespace.clone(), eval.job_id.clone()));
                }
                if affected_jobs.is_empty() {
                    return Ok(context.latest_committed_index());
                }
                for key in &affected_jobs {
                    remove_unused_alloc_jobs(tables, context, key);
                    refresh_job_status(tables, context, key)?;
                }
                Ok(context.index())
            })
            .await
    }

    /// Nomad's `ReconcileJobSummaries` (`PUT /v1/system/reconcile/summaries`): the summary of
    /// every job that is neither periodic nor parameterized is counted again from its
    /// allocations ([`recount_job_summary`]) and written, keeping its `CreateIndex`, in one
    /// write. Returns the index of the write, or the latest index when there is no such job.
    pub async fn reconcile_job_summaries(&self) -> Result<u64, StateError> {
        self.engine
            .write(move |tables, context| {
                let jobs: Vec<Arc<Job>> = tables
                    .jobs
                    .values()
                    .filter(|job| !job.is_periodic() && !job.is_parameterized())
                    .cloned()
                    .collect();
                if jobs.is_empty() {
                    return Ok(context.latest_committed_index());
                }
                for job in jobs {
                    let mut summary =
                        recount_job_summary(&job, tables.allocs_of_job(&job.namespace, &job.id));
                    summary.create_index = job.create_index;
                    summary.modify_index = context.index();
                    context.put(
                        Table::JobSummaries,
                        &job_record_key(&job.namespace, &job.id),
                        &summary,
                    )?;
                    tables
                        .job_summaries
                        .insert((job.namespace.clone(), job.id.clone()), Arc::new(summary));
                }
                Ok(context.index())
            })
            .await
    }

    /// Removes a node. Its allocations stay (the server marks them lost first).
    pub async fn delete_node(&self, node_id: &str) -> Result<u64, StateError> {
        Ok(self.delete_node_with_evals(node_id, Vec::new(), 0).await?.0)
    }

    /// Removes a node and creates the evaluations that replace its allocations in one write
    /// ([`NodeEvals`]). Returns the index of the write and the evaluations' (0 when there were
    /// none).
    pub async fn delete_node_with_evals(
        &self,
        node_id: &str,
        evals: Vec<Evaluation>,
        now_unix_ns: i64,
    ) -> Result<(u64, u64), StateError> {
        let node_id = node_id.to_owned();
        let mut evals = NodeEvals::new(evals)?;
        self.engine
            .write(move |tables, context| {
                let Some(existing) = tables.nodes.get(&node_id).cloned() else {
                    return Err(StateError::NotFound {
                        kind: "node",
                        id: node_id,
                    });
                };
                let index = context.index();
                context.delete(Table::Nodes, node_id.as_bytes());
                context.emit(node_event(EventType::NodeDeregistration, &existing)?);
                tables.remove_node(&node_id);
                let eval_index = evals.write(tables, context, &node_id, index, now_unix_ns)?;
                Ok((index, eval_index))
            })
            .await
    }

    /// Creates or replaces service registrations (one write, one index), keyed by namespace and
    /// ID. A new one gets `CreateIndex`; a replaced one keeps its `CreateIndex`; both get
    /// `ModifyIndex` of this write. An unchanged registration writes nothing. Returns the index
    /// of the write, or the latest index when nothing changed.
    pub async fn upsert_service_registrations(
        &self,
        mut services: Vec<ServiceRegistration>,
    ) -> Result<u64, StateError> {
        for service in &mut services {
            require_id("ServiceRegistration.ID", &service.id)?;
            require_id("ServiceRegistration.ServiceName", &service.service_name)?;
            require_id("ServiceRegistration.AllocID", &service.alloc_id)?;
            namespace_or_default(&mut service.namespace);
        }
        self.engine
            .write(move |tables, context| {
                let mut changed = false;
                for mut service in services {
                    let key: ServiceKey = (service.namespace.clone(), service.id.clone());
                    let existing = tables.services.get(&key).cloned();
                    if let Some(existing) = &existing {
                        if same_registration(existing, &service) {
                            continue;
                        }
                        service.create_index = existing.create_index;
                        tables.unindex_service(existing);
                    }
                    let index = context.index();
                    if existing.is_none() {
                        service.create_index = index;
                    }
                    service.modify_index = index;
                    context.put(
                        Table::ServiceRegistrations,
                        &job_record_key(&key.0, &key.1),
                        &service,
                    )?;
                    context.emit(service_event(EventType::ServiceRegistration, &service)?);
                    tables.index_service(&service);
                    tables.services.insert(key, Arc::new(service));
                    changed = true;
                }
                Ok(if changed {
                    context.index()
                } else {
                    context.latest_committed_index()
                })
            })
            .await
    }

    /// Removes the registration `id` in `namespace`; an unknown one is `NotFound`. Returns the
    /// index of the write.
    pub async fn delete_service_registration(
        &self,
        namespace: &str,
        id: &str,
    ) -> Result<u64, StateError> {
        let key: ServiceKey = (namespace.to_owned(), id.to_owned());
        self.engine
            .write(move |tables, context| {
                if !tables.services.contains_key(&key) {
                    return Err(StateError::NotFound {
                        kind: "service registration",
                        id: key.1,
                    });
                }
                remove_services(tables, context, vec![key])?;
                Ok(context.index())
            })
            .await
    }

    /// Removes the registrations with these IDs, in whatever namespace (a client deregisters
    /// by ID; the ID names the allocation). Unknown IDs are skipped. Returns the index of the
    /// write, or the latest index when nothing was removed.
    pub async fn delete_service_registrations_by_id(
        &self,
        ids: Vec<String>,
    ) -> Result<u64, StateError> {
        self.engine
            .write(move |tables, context| {
                let keys: Vec<ServiceKey> = ids
                    .iter()
                    .flat_map(|id| {
                        pairs_under(&tables.services_by_id, id)
                            .map(|namespace| (namespace.to_owned(), id.clone()))
                            .collect::<Vec<_>>()
                    })
                    .collect();
                if remove_services(tables, context, keys)? == 0 {
                    return Ok(context.latest_committed_index());
                }
                Ok(context.index())
            })
            .await
    }

    /// The job `job_id` in `namespace`.
    pub fn job(&self, namespace: &str, job_id: &str) -> Option<Arc<Job>> {
        self.snapshot().job(namespace, job_id)
    }

    /// Jobs whose ID starts with `id_prefix` in `namespace` (`None`: all namespaces).
    pub fn jobs(&self, namespace: Option<&str>, id_prefix: &str) -> Vec<Arc<Job>> {
        self.snapshot().jobs(namespace, id_prefix)
    }

    /// The kept versions of a job, newest first.
    pub fn job_versions(&self, namespace: &str, job_id: &str) -> Vec<Arc<Job>> {
        self.snapshot().job_versions(namespace, job_id)
    }

    /// The jobspec source version `version` of a job was registered from, as stored.
    pub fn job_submission(
        &self,
        namespace: &str,
        job_id: &str,
        version: u64,
    ) -> Option<Arc<drover_structs::JobSubmission>> {
        self.snapshot().job_submission(namespace, job_id, version)
    }

    /// The last launch of a periodic job (see [`StateSnapshot::periodic_launch`]).
    pub fn periodic_launch(&self, namespace: &str, job_id: &str) -> Option<Arc<PeriodicLaunch>> {
        self.snapshot().periodic_launch(namespace, job_id)
    }

    /// The allocation counters of a job.
    pub fn job_summary(&self, namespace: &str, job_id: &str) -> Option<Arc<JobSummary>> {
        self.snapshot().job_summary(namespace, job_id)
    }

    /// The evaluation `eval_id`.
    pub fn eval(&self, eval_id: &str) -> Option<Arc<Evaluation>> {
        self.snapshot().eval(eval_id)
    }

    /// Evaluations whose ID starts with `id_prefix`.
    pub fn evals(&self, id_prefix: &str) -> Vec<Arc<Evaluation>> {
        self.snapshot().evals(id_prefix)
    }

    /// The evaluations of a job.
    pub fn evals_by_job(&self, namespace: &str, job_id: &str) -> Vec<Arc<Evaluation>> {
        self.snapshot().evals_by_job(namespace, job_id)
    }

    /// The allocation `alloc_id`.
    pub fn alloc(&self, alloc_id: &str) -> Option<Arc<Allocation>> {
        self.snapshot().alloc(alloc_id)
    }

    /// Allocations whose ID starts with `id_prefix`.
    pub fn allocs(&self, id_prefix: &str) -> Vec<Arc<Allocation>> {
        self.snapshot().allocs(id_prefix)
    }

    /// The allocations of a job.
    pub fn allocs_by_job(&self, namespace: &str, job_id: &str) -> Vec<Arc<Allocation>> {
        self.snapshot().allocs_by_job(namespace, job_id)
    }

    /// The allocations on a node.
    pub fn allocs_by_node(&self, node_id: &str) -> Vec<Arc<Allocation>> {
        self.snapshot().allocs_by_node(node_id)
    }

    /// The allocations of an evaluation.
    pub fn allocs_by_eval(&self, eval_id: &str) -> Vec<Arc<Allocation>> {
        self.snapshot().allocs_by_eval(eval_id)
    }

    /// The node `node_id`.
    pub fn node(&self, node_id: &str) -> Option<Arc<Node>> {
        self.snapshot().node(node_id)
    }

    /// Nodes whose ID starts with `id_prefix`.
    pub fn nodes(&self, id_prefix: &str) -> Vec<Arc<Node>> {
        self.snapshot().nodes(id_prefix)
    }

    /// The node whose secret ID is `secret`, from the secret index.
    pub fn node_by_secret(&self, secret: &str) -> Option<Arc<Node>> {
        self.snapshot().node_by_secret(secret)
    }

    /// The service registration `id` in `namespace`.
    pub fn service_registration(
        &self,
        namespace: &str,
        id: &str,
    ) -> Option<Arc<ServiceRegistration>> {
        self.snapshot().service_registration(namespace, id)
    }

    /// Every service registration in `namespace` (`None`: every namespace).
    pub fn service_registrations(&self, namespace: Option<&str>) -> Vec<Arc<ServiceRegistration>> {
        self.snapshot().service_registrations(namespace)
    }

    /// The registrations of service `name` in `namespace`.
    pub fn service_registrations_by_name(
        &self,
        namespace: &str,
        name: &str,
    ) -> Vec<Arc<ServiceRegistration>> {
        self.snapshot()
            .service_registrations_by_name(namespace, name)
    }

    /// The registrations of a job's allocations.
    pub fn service_registrations_by_job(
        &self,
        namespace: &str,
        job_id: &str,
    ) -> Vec<Arc<ServiceRegistration>> {
        self.snapshot()
            .service_registrations_by_job(namespace, job_id)
    }

    /// The registrations of one allocation.
    pub fn service_registrations_by_alloc(&self, alloc_id: &str) -> Vec<Arc<ServiceRegistration>> {
        self.snapshot().service_registrations_by_alloc(alloc_id)
    }
}
