//! The scheduler for service and batch jobs (Nomad's generic scheduler): reconcile, then place
//! what is missing, and write it all into a [`Plan`]. Also the entry point, which sends system
//! and sysbatch jobs to `system`.
//!
//! Order of work, as in Nomad: allocations on down nodes already told to stop are marked lost;
//! the reconciler decides stops, in-place updates and placements; destructive updates are
//! placed first (their old allocation is stopped in the plan before the new one is fitted, so
//! its resources count as free), then the other placements. A group whose placement fails is
//! not tried again in the same pass: further failures are coalesced into its metric. When any
//! placement failed (and the evaluation is not itself a blocked one), a blocked evaluation is
//! returned for the server to park until capacity frees up.
//!
//! Not here: committing the plan, retrying after a partial commit (the server).

use std::collections::BTreeMap;
use std::sync::Arc;

use drover_structs::{AllocMetric, Allocation, Evaluation, Job, Node, Resources, TaskGroup};

use crate::error::SchedulerError;
use crate::ids::IdSource;
use crate::names::alloc_index_from_name;
use crate::plan::{Plan, PlanAnnotations, SchedulerOptions};
use crate::reconcile::{PlaceResult, ReconcileInput, STATUS_ALLOC_LOST, UpdateDecision, reconcile};
use crate::reschedule::{
    LAST_RESCHEDULE_FAILED_TO_PLACE, annotate_last_reschedule, replacement_tracker,
};
use crate::select::{
    RankedNode, SelectOptions, Stack, exhaust_resources, group_allocated_resources,
};
use crate::state::{SchedulerState, node_in_any_datacenter, node_in_pool};
use crate::update::destructive_change;

/// `StatusDescription` of a blocked evaluation made for failed placements.
pub const DESC_BLOCKED_EVAL_FAILED_PLACEMENTS: &str = "created to place remaining allocations";

/// Schedules one evaluation of a service or batch job.
///
/// Deterministic: the same snapshot, evaluation, options and ID sequence give the same plan.
pub fn schedule(
    state: &dyn SchedulerState,
    eval: &Evaluation,
    options: &SchedulerOptions,
    ids: &mut dyn IdSource,
) -> Result<Plan, SchedulerError> {
    let job = state.job(&eval.namespace, &eval.job_id);
    let job_type = job
        .as_deref()
        .map_or(eval.r#type.as_str(), |job| job.r#type.as_str());
    let kind = match job_type {
        drover_structs::JOB_TYPE_SERVICE => PassKind::Service,
        drover_structs::JOB_TYPE_BATCH => PassKind::Batch,
        drover_structs::JOB_TYPE_SYSTEM => PassKind::System,
        drover_structs::JOB_TYPE_SYSBATCH => PassKind::SysBatch,
        // A purged job of an unknown type: everything is stopped.
        _ if job.is_none() => PassKind::Service,
        other => {
            return Err(SchedulerError::UnsupportedJobType {
                job_type: other.to_string(),
                job_id: eval.job_id.clone(),
            });
        }
    };
    let batch = matches!(kind, PassKind::Batch | PassKind::SysBatch);
    let mut pass = Pass {
        state,
        eval,
        options,
        job: job.clone(),
        batch,
        plan: Plan::default(),
        stack: None,
        deployment_id: None,
    };
    pass.plan.eval_id = eval.id.clone();
    pass.plan.priority = eval.priority;
    pass.plan.job = job.as_deref().cloned();
    match kind {
        PassKind::Service | PassKind::Batch => pass.run(ids),
        PassKind::System | PassKind::SysBatch => pass.run_system(kind == PassKind::SysBatch, ids),
    }
    Ok(pass.plan)
}

/// Which scheduler a job gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PassKind {
    Service,
    Batch,
    System,
    SysBatch,
}

/// One scheduling pass over one evaluation; the service/batch flow is here, the system/sysbatch
/// flow in `system`.
pub(crate) struct Pass<'a> {
    pub(crate) state: &'a dyn SchedulerState,
    pub(crate) eval: &'a Evaluation,
    pub(crate) options: &'a SchedulerOptions,
    pub(crate) job: Option<Arc<Job>>,
    pub(crate) batch: bool,
    pub(crate) plan: Plan,
    /// Built on first use: the ready nodes of the job's datacenters and pool.
    pub(crate) stack: Option<Stack>,
    /// The deployment new allocations belong to, if any.
    pub(crate) deployment_id: Option<String>,
}

impl Pass<'_> {
    fn run(&mut self, ids: &mut dyn IdSource) {
        let existing = self
            .state
            .allocs_by_job(&self.eval.namespace, &self.eval.job_id);
        let tainted = self.tainted_nodes(&existing);
        self.mark_lost_stops(&existing, &tainted);

        let job = self.job.clone();
        let latest_deployment = self
            .state
            .latest_deployment(&self.eval.namespace, &self.eval.job_id);
        let input = ReconcileInput {
            job: job.as_deref(),
            batch: self.batch,
            existing: &existing,
            tainted_nodes: &tainted,
            eval: self.eval,
            now_unix_nanos: self.options.now_unix_nanos,
            deployment: latest_deployment.as_deref(),
            deployments: self.options.deployments,
        };
        let result = {
            let mut update_fn = |alloc: &Allocation, job: &Job, group: &TaskGroup| {
                self.update_decision(alloc, job, group)
            };
            reconcile(&input, &mut update_fn, ids)
        };

        self.plan.annotations = PlanAnnotations {
            desired_tg_updates: result.desired_tg_updates.clone(),
            preempted_allocs: None,
        };
        for stop in &result.stop {
            let stopped = self.stopped_copy(
                &stop.alloc,
                stop.description,
                stop.client_status,
                &stop.followup_eval_id,
            );
            self.plan.append_stop(stopped);
        }
        // An allocation updated in place joins the deployment the plan creates or changes,
        // with its health judged again (Nomad's `computeJobAllocs`).
        let plan_deployment_id = result
            .deployment
            .as_ref()
            .map(|deployment| deployment.id.clone())
            .unwrap_or_default();
        for mut updated in result.inplace {
            if updated.deployment_id != plan_deployment_id {
                updated.deployment_id.clone_from(&plan_deployment_id);
                updated.deployment_status = None;
            }
            self.plan.append_alloc(updated);
        }
        for updated in result.attribute_updates {
            self.plan.append_alloc(updated);
        }
        for unknown in result.disconnect_updates {
            self.plan.append_alloc(unknown);
        }
        for reconnected in result.reconnect_updates {
            self.plan.append_alloc(reconnected);
        }
        self.plan.follow_up_evals = result.follow_up_evals;
        self.plan.deployment_id = result
            .deployment
            .as_ref()
            .map(|deployment| deployment.id.clone())
            .or_else(|| latest_deployment.as_ref().map(|latest| latest.id.clone()))
            .unwrap_or_default();
        self.plan.deployment = result.deployment;
        self.plan.deployment_updates = result.deployment_updates;
        self.deployment_id = result.deployment_id;

        let mut queued: BTreeMap<String, i64> = BTreeMap::new();
        if let Some(job) = job.as_deref() {
            // Every group of a known job is listed, stopped or not, as Nomad does.
            for group in &job.task_groups {
                queued.insert(group.name.clone(), 0);
            }
            let mut name_indexes = result.name_indexes;
            for placement in result.destructive.iter().chain(result.place.iter()) {
                if self.place(job, placement, &mut name_indexes, ids) {
                    continue;
                }
                *queued.entry(placement.group.clone()).or_insert(0) += 1;
            }
        }
        self.plan.queued_allocations = queued;

        if !self.plan.failed_tg_allocs.is_empty()
            && self.eval.status != drover_structs::EVAL_STATUS_BLOCKED
        {
            self.plan.blocked_eval = Some(self.blocked_eval(ids));
        }
    }

    /// Nodes that allocations must leave: gone, down, disconnected or draining.
    pub(crate) fn tainted_nodes(
        &self,
        allocs: &[Arc<Allocation>],
    ) -> BTreeMap<String, Option<Arc<Node>>> {
        let mut tainted = BTreeMap::new();
        let mut checked = std::collections::BTreeSet::new();
        for alloc in allocs {
            if !checked.insert(alloc.node_id.clone()) {
                continue;
            }
            match self.state.node(&alloc.node_id) {
                None => {
                    tainted.insert(alloc.node_id.clone(), None);
                }
                Some(node) => {
                    let must_leave = node.status == drover_structs::NODE_STATUS_DOWN
                        || node.status == drover_structs::NODE_STATUS_DISCONNECTED
                        || node.drain_strategy.is_some();
                    if must_leave {
                        tainted.insert(alloc.node_id.clone(), Some(node));
                    }
                }
            }
        }
        tainted
    }

    /// Allocations already told to stop whose node went down (or away) while they still ran
    /// become `lost`.
    pub(crate) fn mark_lost_stops(
        &mut self,
        allocs: &[Arc<Allocation>],
        tainted: &BTreeMap<String, Option<Arc<Node>>>,
    ) {
        for alloc in allocs {
            let Some(node) = tainted.get(&alloc.node_id) else {
                continue;
            };
            if node
                .as_ref()
                .is_some_and(|node| node.status != drover_structs::NODE_STATUS_DOWN)
            {
                continue;
            }
            let running = alloc.client_status == drover_structs::ALLOC_CLIENT_STATUS_RUNNING
                || alloc.client_status == drover_structs::ALLOC_CLIENT_STATUS_PENDING;
            if alloc.server_terminal_status() && running {
                let stopped = self.stopped_copy(
                    alloc,
                    STATUS_ALLOC_LOST,
                    Some(drover_structs::ALLOC_CLIENT_STATUS_LOST),
                    "",
                );
                self.plan.append_stop(stopped);
            }
        }
    }

    /// The copy of an allocation the plan stops.
    pub(crate) fn stopped_copy(
        &self,
        alloc: &Allocation,
        description: &str,
        client_status: Option<&str>,
        followup_eval_id: &str,
    ) -> Allocation {
        let mut stopped = alloc.clone();
        stopped.desired_status = drover_structs::ALLOC_DESIRED_STATUS_STOP.to_string();
        stopped.desired_description = description.to_string();
        if let Some(client_status) = client_status {
            stopped.client_status = client_status.to_string();
            stopped.alloc_states.push(serde_json::json!({
                "Field": "ClientStatus",
                "Value": client_status,
                "Time": drover_structs::Timestamp::from_unix_nanos(self.options.now_unix_nanos),
            }));
        }
        if !followup_eval_id.is_empty() {
            stopped.followup_eval_id = followup_eval_id.to_string();
        }
        stopped.modify_time = self.options.now_unix_nanos;
        stopped
    }

    pub(crate) fn stack(&mut self) -> &mut Stack {
        let (state, job, seed, batch, scoring) = (
            self.state,
            self.job.clone(),
            self.options.seed,
            self.batch,
            self.options.scoring,
        );
        self.stack.get_or_insert_with(|| {
            let nodes = job
                .as_deref()
                .map(|job| state.ready_nodes(&job.datacenters, &job.node_pool))
                .unwrap_or_default();
            Stack::new(nodes, seed, batch, scoring)
        })
    }

    /// Nomad's update rule: same job modify index → nothing; a destructive change → replace;
    /// otherwise update in place if the group still fits on the same node.
    pub(crate) fn update_decision(
        &mut self,
        alloc: &Allocation,
        job: &Job,
        group: &TaskGroup,
    ) -> UpdateDecision {
        let Some(existing_job) = alloc.job.as_deref() else {
            return UpdateDecision::Destructive;
        };
        if existing_job.job_modify_index == job.job_modify_index {
            return UpdateDecision::Ignore;
        }
        if destructive_change(job, existing_job, &group.name).is_some() {
            return UpdateDecision::Destructive;
        }
        if alloc.terminal_status() {
            return UpdateDecision::Ignore;
        }
        let Some(node) = self.state.node(&alloc.node_id) else {
            return UpdateDecision::Destructive;
        };
        if !node_in_any_datacenter(&node, &job.datacenters) || !node_in_pool(&node, &job.node_pool)
        {
            return UpdateDecision::Destructive;
        }
        let options = SelectOptions {
            ignored_alloc_id: Some(alloc.id.clone()),
            alloc_name: alloc.name.clone(),
            ..SelectOptions::default()
        };
        let state = self.state;
        let plan = std::mem::take(&mut self.plan);
        let (choice, _) = self
            .stack()
            .select_on_node(state, &plan, job, group, node, &options);
        self.plan = plan;
        if choice.is_none() {
            return UpdateDecision::Destructive;
        }
        let mut updated = alloc.clone();
        updated.eval_id = self.eval.id.clone();
        updated.job = Some(self.shared_job(job));
        let mut allocated = group_allocated_resources(group);
        if let Some(previous) = alloc.allocated_resources.as_ref() {
            // Networks, devices and reserved cores are kept from the running allocation.
            for (task_name, task) in allocated.tasks.iter_mut() {
                if let Some(previous_task) = previous.tasks.get(task_name) {
                    task.networks = previous_task.networks.clone();
                    task.devices = previous_task.devices.clone();
                    if previous_task.cpu.reserved_cores.is_some() {
                        // The cores (and the CPU they stand for) stay; a change of `cores`
                        // is destructive, so the count still matches.
                        task.cpu.reserved_cores = previous_task.cpu.reserved_cores.clone();
                        task.cpu.cpu_shares = previous_task.cpu.cpu_shares;
                    }
                }
            }
            allocated.shared.networks = previous.shared.networks.clone();
            allocated.shared.ports = previous.shared.ports.clone();
        }
        updated.task_resources = legacy_task_resources(&allocated);
        updated.allocated_resources = Some(allocated);
        updated.fill_legacy_total_resources();
        updated.modify_time = self.options.now_unix_nanos;
        UpdateDecision::InPlace(Box::new(updated))
    }

    /// Places one allocation; false when no node could take it.
    fn place(
        &mut self,
        job: &Job,
        placement: &PlaceResult,
        name_indexes: &mut BTreeMap<String, crate::names::AllocNameIndex>,
        ids: &mut dyn IdSource,
    ) -> bool {
        let Some(group) = job.lookup_task_group(&placement.group) else {
            return false;
        };
        if let Some(metric) = self.plan.failed_tg_allocs.get_mut(&group.name) {
            metric.coalesced_failures += 1;
            exhaust_resources(metric, group);
            return false;
        }

        let previous = placement.previous.clone();
        if let (Some(description), Some(previous)) = (placement.stop_previous, previous.as_ref()) {
            let stopped = self.stopped_copy(previous, description, None, "");
            self.plan.append_stop(stopped);
        }

        let mut options = SelectOptions {
            alloc_name: placement.name.clone(),
            ..SelectOptions::default()
        };
        if let Some(previous) = previous.as_ref() {
            if previous.client_status == drover_structs::ALLOC_CLIENT_STATUS_FAILED {
                options.penalty_node_ids.insert(previous.node_id.clone());
            }
            if let Some(tracker) = previous.reschedule_tracker.as_ref() {
                options.penalty_node_ids.extend(
                    tracker
                        .events
                        .iter()
                        .map(|event| event.prev_node_id.clone()),
                );
            }
            options.preferred_node = self.preferred_node(job, group, previous);
        }

        let state = self.state;
        let plan = std::mem::take(&mut self.plan);
        let (choice, mut metric) = self.stack().select(state, &plan, job, group, &options);
        self.plan = plan;

        let Some(choice) = choice else {
            exhaust_resources(&mut metric, group);
            self.plan
                .failed_tg_allocs
                .insert(group.name.clone(), metric);
            if let (Some(_), Some(previous)) = (placement.stop_previous, previous.as_ref()) {
                self.plan.pop_stop(&previous.node_id, &previous.id);
            }
            // Keep a finished allocation (and its tracker) for the blocked evaluation. One still
            // running (a batch allocation stopped with `-reschedule`) stays stopped: other
            // placements may already use what its stop freed.
            if let (true, Some(previous)) = (placement.reschedule, previous.as_ref())
                && previous.client_terminal_status()
            {
                self.plan.pop_stop(&previous.node_id, &previous.id);
                let mut annotated = Allocation::clone(previous);
                annotate_last_reschedule(&mut annotated, LAST_RESCHEDULE_FAILED_TO_PLACE);
                self.plan.append_alloc(annotated);
            }
            return false;
        };

        let mut name = placement.name.clone();
        if let Some(index) = name_indexes.get_mut(&group.name) {
            let position = alloc_index_from_name(&name, &job.id, &group.name);
            if index.is_duplicate(position) {
                if let Some(fresh) = index.next(1).pop() {
                    name = fresh;
                }
                index.unset(position);
            }
        }

        let mut alloc = self.new_allocation(job, group, name, &choice, metric, ids);
        if let Some(deployment_id) = self.deployment_id.as_ref() {
            alloc.deployment_id = deployment_id.clone();
        }
        if placement.canary {
            alloc.deployment_status = Some(drover_structs::AllocDeploymentStatus {
                canary: true,
                ..Default::default()
            });
        }
        let now = self.options.now_unix_nanos;
        if let Some(previous) = previous.as_ref() {
            alloc.previous_allocation = previous.id.clone();
            if placement.reschedule {
                alloc.reschedule_tracker = Some(replacement_tracker(previous, now));
                if let Some(stop) = self.plan.stop_mut(&previous.node_id, &previous.id) {
                    annotate_last_reschedule(stop, crate::reschedule::LAST_RESCHEDULE_SUCCESS);
                    stop.next_allocation = alloc.id.clone();
                } else if previous.client_status == drover_structs::ALLOC_CLIENT_STATUS_UNKNOWN {
                    // The allocation of a disconnected node stays until it reconnects or is
                    // lost; it names its replacement, so a reconnect can find it.
                    match self.plan.alloc_mut(&previous.node_id, &previous.id) {
                        Some(update) => update.next_allocation = alloc.id.clone(),
                        None => {
                            let mut update = Allocation::clone(previous);
                            update.next_allocation = alloc.id.clone();
                            self.plan.append_alloc(update);
                        }
                    }
                }
            }
        }
        self.plan.append_alloc(alloc);
        true
    }

    /// `job` as the allocations of this pass hold it: the pass's own copy, shared, when `job`
    /// is that copy (every placement of a pass is), else a copy of its own.
    fn shared_job(&self, job: &Job) -> Arc<Job> {
        match &self.job {
            Some(shared) if std::ptr::eq(shared.as_ref(), job) => Arc::clone(shared),
            _ => Arc::new(job.clone()),
        }
    }

    /// A new allocation of `group` on the chosen node.
    pub(crate) fn new_allocation(
        &self,
        job: &Job,
        group: &TaskGroup,
        name: String,
        choice: &RankedNode,
        metric: AllocMetric,
        ids: &mut dyn IdSource,
    ) -> Allocation {
        let mut allocated = group_allocated_resources(group);
        crate::select::apply_core_assignment(
            &mut allocated,
            &choice.reserved_cores,
            choice.shares_per_core,
        );
        if let Some(offer) = choice.ports.clone() {
            allocated.shared.ports = offer.ports;
            allocated.shared.networks = offer.networks;
        }
        for (task_name, network) in &choice.task_networks {
            if let Some(task) = allocated.tasks.get_mut(task_name) {
                task.networks = vec![network.clone()];
            }
        }
        let now = self.options.now_unix_nanos;
        let mut allocation = Allocation {
            id: ids.next_id(),
            namespace: job.namespace.clone(),
            eval_id: self.eval.id.clone(),
            name,
            node_id: choice.node.id.clone(),
            node_name: choice.node.name.clone(),
            job_id: job.id.clone(),
            job: Some(self.shared_job(job)),
            task_group: group.name.clone(),
            task_resources: legacy_task_resources(&allocated),
            shared_resources: Some(Resources {
                disk_mb: allocated.shared.disk_mb,
                networks: allocated.shared.networks.clone(),
                ..Resources::default()
            }),
            allocated_resources: Some(allocated),
            metrics: Some(metric),
            desired_status: drover_structs::ALLOC_DESIRED_STATUS_RUN.to_string(),
            client_status: drover_structs::ALLOC_CLIENT_STATUS_PENDING.to_string(),
            create_time: now,
            modify_time: now,
            ..Allocation::default()
        };
        allocation.fill_legacy_total_resources();
        allocation
    }

    /// The previous allocation's node, when the group keeps its ephemeral disk (sticky or
    /// migrating) and the node is still ready in the job's datacenters and pool.
    fn preferred_node(
        &self,
        job: &Job,
        group: &TaskGroup,
        previous: &Allocation,
    ) -> Option<Arc<Node>> {
        let disk = group.ephemeral_disk.as_ref()?;
        if !(disk.sticky || disk.migrate) {
            return None;
        }
        if let Some(previous_job) = previous.job.as_deref()
            && (previous_job.node_pool != job.node_pool
                || previous_job.datacenters != job.datacenters)
        {
            return None;
        }
        let node = self.state.node(&previous.node_id)?;
        node.ready_for_scheduling().then_some(node)
    }

    pub(crate) fn blocked_eval(&self, ids: &mut dyn IdSource) -> Evaluation {
        let now = self.options.now_unix_nanos;
        Evaluation {
            id: ids.next_id(),
            namespace: self.eval.namespace.clone(),
            priority: self.eval.priority,
            r#type: self.eval.r#type.clone(),
            triggered_by: drover_structs::EVAL_TRIGGER_QUEUED_ALLOCS.to_string(),
            job_id: self.eval.job_id.clone(),
            job_modify_index: self.eval.job_modify_index,
            status: drover_structs::EVAL_STATUS_BLOCKED.to_string(),
            status_description: DESC_BLOCKED_EVAL_FAILED_PLACEMENTS.to_string(),
            previous_eval: self.eval.id.clone(),
            failed_tg_allocs: self.plan.failed_tg_allocs.clone(),
            create_time: now,
            modify_time: now,
            ..Evaluation::default()
        }
    }
}

/// The legacy per-task `TaskResources` Nomad still fills for older clients.
fn legacy_task_resources(
    allocated: &drover_structs::AllocatedResources,
) -> BTreeMap<String, Resources> {
    allocated
        .tasks
        .iter()
        .map(|(name, task)| {
            (
                name.clone(),
                Resources {
                    cpu: task.cpu.cpu_shares,
                    memory_mb: task.memory.memory_mb,
                    memory_max_mb: task.memory.memory_max_mb,
                    networks: task.networks.clone(),
                    ..Resources::default()
                },
            )
        })
        .collect()
}
