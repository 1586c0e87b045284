//! The generic stack: walk the candidate nodes, drop the infeasible ones, fit the group next to
//! what each node runs and the plan adds, score, and take the best of the first few that fit.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use drover_structs::{
    Affinity, AllocMetric, Allocation, Job, NetworkResource, Node, NodeScoreMeta, TaskGroup,
};

use super::cores::{
    CoreAssignment, alloc_reserved_cores, apply_core_assignment, assign_cores, node_shares_per_core,
};
use super::spread::SpreadScoring;
use super::usage::{
    MAX_FIT_SCORE, Usage, allocated_disk_mb, allocated_usage, fit_score, group_allocated_resources,
    node_capacity, node_disk_capacity, resources_usage,
};
use crate::constraint::ConstraintCache;
use crate::feasible::{
    DistinctHosts, DistinctProperty, FILTER_MISSING_HOST_VOLUMES, host_volumes_feasible,
    static_feasibility,
};
use crate::plan::{Plan, ScoringAlgorithm};
use crate::rng::SeededRng;
use crate::state::SchedulerState;

/// Up to this many low-scoring nodes are passed over before they count toward the limit.
const MAX_SKIP: usize = 3;
/// Nodes scoring at or below this are passed over while others remain.
const SKIP_SCORE_THRESHOLD: f64 = 0.0;
/// How many of the best-scoring nodes are kept in `AllocMetric.ScoreMetaData`.
const SCORE_META_TOP_K: usize = 5;
/// How many fitting nodes a placement looks at when the group has affinities (Nomad's default
/// `NodeLimitForFeasibilityChecks`), unless its count is larger.
const AFFINITY_NODE_LIMIT: usize = 100;

/// An allocation as placement sees it on a node.
#[derive(Debug, Clone)]
struct ProposedAlloc {
    id: String,
    namespace: String,
    job_id: String,
    task_group: String,
    usage: Usage,
    /// Ephemeral disk it holds (MB).
    disk_mb: i64,
    /// Host ports it holds.
    ports: Vec<i64>,
    /// Bandwidth its task networks hold, per node network device (MBits).
    bandwidth: BTreeMap<String, i64>,
    /// Cores it holds exclusively (every task's, whatever its lifecycle).
    reserved_cores: Vec<u16>,
}

impl ProposedAlloc {
    fn of(alloc: &Allocation) -> Self {
        ProposedAlloc {
            id: alloc.id.clone(),
            namespace: alloc.namespace.clone(),
            job_id: alloc.job_id.clone(),
            task_group: alloc.task_group.clone(),
            usage: allocated_usage(alloc),
            disk_mb: allocated_disk_mb(alloc),
            ports: crate::network::alloc_ports(alloc),
            bandwidth: crate::network::alloc_bandwidth(alloc),
            reserved_cores: alloc_reserved_cores(alloc),
        }
    }
}

/// Options for one placement.
#[derive(Debug, Clone, Default)]
pub struct SelectOptions {
    /// Nodes to score down (where the allocation being replaced failed).
    pub penalty_node_ids: BTreeSet<String>,
    /// A node to try first (sticky or migrating ephemeral disk).
    pub preferred_node: Option<Arc<Node>>,
    /// An allocation to leave out of the accounting (the one being updated in place).
    pub ignored_alloc_id: Option<String>,
    /// The name of the allocation being placed (`<job>.<group>[<index>]`): a `per_alloc` host
    /// volume asks for the source with its index.
    pub alloc_name: String,
}

/// The chosen node with the scores that chose it.
#[derive(Debug, Clone)]
pub struct RankedNode {
    pub node: Arc<Node>,
    pub final_score: f64,
    /// Host ports assigned for the group's networks, when it has any.
    pub ports: Option<crate::network::PortOffer>,
    /// Task name → the network assigned for the task's own (deprecated) network ask.
    pub task_networks: BTreeMap<String, NetworkResource>,
    /// Cores reserved for the tasks that ask for `cores` (empty when none do).
    pub reserved_cores: CoreAssignment,
    /// The MHz each reserved core is charged on this node.
    pub shares_per_core: i64,
}

/// The candidate nodes of one pass and what has been learnt about them.
pub struct Stack {
    candidates: Vec<Arc<Node>>,
    offset: usize,
    limit: usize,
    scoring: ScoringAlgorithm,
    /// Group name → per candidate: `None` not yet checked, `Some(Ok)` feasible, `Some(Err)` the
    /// filter reason. Static checks depend only on node, job and group, so they run once.
    static_checks: BTreeMap<String, Vec<Option<Result<(), String>>>>,
    constraint_cache: ConstraintCache,
    /// Node ID → its non-terminal allocations in the snapshot.
    node_allocs: BTreeMap<String, Arc<Vec<Arc<ProposedAlloc>>>>,
    /// Allocation ID → summary, for allocations the plan adds (an ID's content is fixed within
    /// a pass).
    planned_allocs: BTreeMap<String, Arc<ProposedAlloc>>,
    /// Node ID → node, for nodes looked up while counting `distinct_property`.
    node_lookup: BTreeMap<String, Option<Arc<Node>>>,
    nodes_available: BTreeMap<String, i64>,
    /// Picks dynamic ports.
    port_rng: SeededRng,
}

impl Stack {
    /// A stack over `nodes` (the ready nodes of the job's datacenters and pool), shuffled with
    /// `seed`.
    pub fn new(
        mut nodes: Vec<Arc<Node>>,
        seed: u64,
        batch: bool,
        scoring: ScoringAlgorithm,
    ) -> Self {
        let mut nodes_available = BTreeMap::new();
        for node in &nodes {
            *nodes_available.entry(node.datacenter.clone()).or_insert(0) += 1;
        }
        SeededRng::new(seed).shuffle(&mut nodes);
        let mut limit = 2;
        if !batch && !nodes.is_empty() {
            let log_limit = (nodes.len() as f64).log2().ceil() as usize;
            limit = limit.max(log_limit);
        }
        Stack {
            candidates: nodes,
            offset: 0,
            limit,
            scoring,
            static_checks: BTreeMap::new(),
            constraint_cache: ConstraintCache::default(),
            node_allocs: BTreeMap::new(),
            planned_allocs: BTreeMap::new(),
            node_lookup: BTreeMap::new(),
            nodes_available,
            port_rng: SeededRng::new(seed ^ 0x706f_7274_735f_726e),
        }
    }

    /// Ready nodes per datacenter (`AllocMetric.NodesAvailable`).
    pub fn nodes_available(&self) -> &BTreeMap<String, i64> {
        &self.nodes_available
    }

    pub fn candidate_count(&self) -> usize {
        self.candidates.len()
    }

    /// Chooses a node for one allocation of `group`, or `None`; the metric says what was seen.
    pub fn select(
        &mut self,
        state: &dyn SchedulerState,
        plan: &Plan,
        job: &Job,
        group: &TaskGroup,
        options: &SelectOptions,
    ) -> (Option<RankedNode>, AllocMetric) {
        if let Some(preferred) = options.preferred_node.clone() {
            let (choice, metric) = self.select_among(
                state,
                plan,
                job,
                group,
                options,
                Candidates::Given(std::slice::from_ref(&preferred)),
            );
            if choice.is_some() {
                return (choice, metric);
            }
        }
        self.select_among(state, plan, job, group, options, Candidates::Shuffled)
    }

    /// Checks whether `group` fits on `node` alone (an in-place update), leaving out
    /// `options.ignored_alloc_id`.
    pub fn select_on_node(
        &mut self,
        state: &dyn SchedulerState,
        plan: &Plan,
        job: &Job,
        group: &TaskGroup,
        node: Arc<Node>,
        options: &SelectOptions,
    ) -> (Option<RankedNode>, AllocMetric) {
        self.select_among(
            state,
            plan,
            job,
            group,
            options,
            Candidates::Given(std::slice::from_ref(&node)),
        )
    }

    fn select_among(
        &mut self,
        state: &dyn SchedulerState,
        plan: &Plan,
        job: &Job,
        group: &TaskGroup,
        options: &SelectOptions,
        candidates: Candidates<'_>,
    ) -> (Option<RankedNode>, AllocMetric) {
        let mut metric = AllocMetric {
            nodes_available: self.nodes_available.clone(),
            nodes_in_pool: self.candidates.len() as i64,
            ..AllocMetric::default()
        };
        let group_resources = group_allocated_resources(group);
        let group_ask = resources_usage(&group_resources);
        let wants_cores = group.tasks.iter().any(|task| {
            task.resources
                .as_ref()
                .is_some_and(|resources| resources.cores > 0)
        });
        let distinct_hosts = DistinctHosts::of(job, group);
        let distinct_properties = DistinctProperty::of(job, group);
        let property_use: Vec<BTreeMap<String, u64>> = distinct_properties
            .iter()
            .map(|property| {
                self.property_use(
                    state,
                    plan,
                    job,
                    group,
                    &property.target,
                    property.group_level,
                    options,
                )
            })
            .collect();
        let spreads = SpreadScoring::new(job, group, |attribute| {
            self.property_use(state, plan, job, group, attribute, true, options)
        });
        let desired_count = group.count.max(1) as f64;
        let ask_disk_mb = group.ephemeral_disk.as_ref().map_or(0, |disk| disk.size_mb);
        let affinities: Vec<&Affinity> = job
            .affinities
            .iter()
            .chain(group.affinities.iter())
            .chain(group.tasks.iter().flat_map(|task| task.affinities.iter()))
            .collect();
        let affinity_weight: f64 = affinities
            .iter()
            .map(|affinity| (affinity.weight as f64).abs())
            .sum();
        // With affinities, look at many more nodes so the preferred ones are found.
        let limit = if affinities.is_empty() && spreads.is_empty() {
            self.limit
        } else {
            AFFINITY_NODE_LIMIT.max(group.count.max(0) as usize)
        };

        let (pool, cyclic): (Vec<Arc<Node>>, bool) = match candidates {
            Candidates::Shuffled => (Vec::new(), true),
            Candidates::Given(nodes) => (nodes.to_vec(), false),
        };
        let total = if cyclic {
            self.candidates.len()
        } else {
            pool.len()
        };
        let mut visited = 0;
        let mut seen = 0;
        let mut deferred: Vec<RankedNode> = Vec::new();
        let mut best: Option<RankedNode> = None;
        let mut scored: Vec<ScoreParts> = Vec::new();

        let consider = |option: RankedNode, best: &mut Option<RankedNode>| {
            if best
                .as_ref()
                .is_none_or(|current| option.final_score > current.final_score)
            {
                *best = Some(option);
            }
        };

        while seen < limit && visited < total {
            let (node, position) = if cyclic {
                let position = self.offset;
                self.offset = (self.offset + 1) % total;
                (self.candidates[position].clone(), Some(position))
            } else {
                (pool[visited].clone(), None)
            };
            visited += 1;
            metric.nodes_evaluated += 1;

            if let Err(reason) = self.static_check(job, group, &node, position) {
                filter_node(&mut metric, &node, reason);
                continue;
            }
            if !host_volumes_feasible(group, &options.alloc_name, &node) {
                filter_node(&mut metric, &node, FILTER_MISSING_HOST_VOLUMES.to_string());
                continue;
            }
            let proposed =
                self.proposed_allocs(state, plan, &node.id, options.ignored_alloc_id.as_deref());
            if distinct_hosts.any() {
                let same_job: Vec<&Arc<ProposedAlloc>> = proposed
                    .iter()
                    .filter(|alloc| alloc.job_id == job.id && alloc.namespace == job.namespace)
                    .collect();
                let same_group = same_job
                    .iter()
                    .filter(|alloc| alloc.task_group == group.name)
                    .count();
                if !distinct_hosts.allows(same_job.len(), same_group) {
                    filter_node(
                        &mut metric,
                        &node,
                        crate::constraint::operand::DISTINCT_HOSTS.to_string(),
                    );
                    continue;
                }
            }
            if let Some(reason) = distinct_properties
                .iter()
                .zip(&property_use)
                .find_map(|(property, used)| property.check(&node, used).err())
            {
                filter_node(&mut metric, &node, reason);
                continue;
            }

            // Cores first, as in Nomad: a task's CPU follows from the cores it gets.
            let mut reserved_cores = CoreAssignment::new();
            let shares_per_core = node_shares_per_core(&node);
            let mut ask = group_ask;
            if wants_cores {
                let held: BTreeSet<u16> = proposed
                    .iter()
                    .flat_map(|alloc| alloc.reserved_cores.iter().copied())
                    .collect();
                match assign_cores(&node, group, &held) {
                    Ok(assignment) => {
                        let mut allocated = group_resources.clone();
                        apply_core_assignment(&mut allocated, &assignment, shares_per_core);
                        ask = resources_usage(&allocated);
                        reserved_cores = assignment;
                    }
                    Err(dimension) => {
                        exhaust_node(&mut metric, &node, dimension);
                        continue;
                    }
                }
            }
            let mut used = ask;
            for alloc in &proposed {
                used.add(alloc.usage);
            }
            let capacity = node_capacity(&node);
            if used.cpu > capacity.cpu {
                exhaust_node(&mut metric, &node, "cpu");
                continue;
            }
            if used.memory_mb > capacity.memory_mb {
                exhaust_node(&mut metric, &node, "memory");
                continue;
            }
            if let Some(disk_capacity) = node_disk_capacity(&node) {
                let disk_used: i64 =
                    ask_disk_mb + proposed.iter().map(|alloc| alloc.disk_mb).sum::<i64>();
                if disk_used > disk_capacity {
                    exhaust_node(&mut metric, &node, "disk");
                    continue;
                }
            }
            let mut ports = None;
            if !group.networks.is_empty() {
                let used_ports: BTreeSet<i64> = proposed
                    .iter()
                    .flat_map(|alloc| alloc.ports.iter().copied())
                    .collect();
                match crate::network::assign_ports(
                    &node,
                    &group.networks,
                    &used_ports,
                    &mut self.port_rng,
                ) {
                    Ok(offer) => ports = Some(offer),
                    Err(dimension) => {
                        exhaust_node(&mut metric, &node, &dimension);
                        continue;
                    }
                }
            }
            let task_networks = match self.assign_task_networks(group, &node, &proposed, &ports) {
                Ok(task_networks) => task_networks,
                Err(dimension) => {
                    exhaust_node(&mut metric, &node, &dimension);
                    continue;
                }
            };

            let fit = fit_score(self.scoring, capacity, used) / MAX_FIT_SCORE;
            let mut scores = vec![fit];
            let collisions = proposed
                .iter()
                .filter(|alloc| {
                    alloc.job_id == job.id
                        && alloc.namespace == job.namespace
                        && alloc.task_group == group.name
                })
                .count();
            let anti_affinity = if collisions > 0 {
                -((collisions + 1) as f64) / desired_count
            } else {
                0.0
            };
            if collisions > 0 {
                scores.push(anti_affinity);
            }
            let penalty = if options.penalty_node_ids.contains(&node.id) {
                -1.0
            } else {
                0.0
            };
            if penalty != 0.0 {
                scores.push(penalty);
            }
            let mut affinity_score = 0.0;
            if affinity_weight > 0.0 {
                let matched: f64 = affinities
                    .iter()
                    .filter(|affinity| {
                        let left = crate::constraint::resolve_target(&affinity.l_target, &node);
                        let right = crate::constraint::resolve_target(&affinity.r_target, &node);
                        crate::constraint::check_operand(
                            &mut self.constraint_cache,
                            &affinity.operand,
                            left,
                            right,
                        )
                    })
                    .map(|affinity| affinity.weight as f64)
                    .sum();
                affinity_score = matched / affinity_weight;
                if matched != 0.0 {
                    scores.push(affinity_score);
                }
            }
            let mut spread_score = None;
            if !spreads.is_empty() {
                let score = spreads.score(&node);
                if score != 0.0 {
                    scores.push(score);
                }
                spread_score = Some(score);
            }
            let final_score = scores.iter().sum::<f64>() / scores.len() as f64;
            scored.push(ScoreParts {
                node: node.clone(),
                binpack: fit,
                anti_affinity,
                penalty,
                affinity: affinity_score,
                spread: spread_score,
                final_score,
            });

            let option = RankedNode {
                node,
                final_score,
                ports,
                task_networks,
                reserved_cores,
                shares_per_core,
            };
            if option.final_score <= SKIP_SCORE_THRESHOLD && deferred.len() < MAX_SKIP {
                deferred.push(option);
                continue;
            }
            seen += 1;
            consider(option, &mut best);
        }
        for option in deferred {
            if seen >= limit {
                break;
            }
            seen += 1;
            consider(option, &mut best);
        }

        scored.sort_by(|a, b| {
            b.final_score
                .total_cmp(&a.final_score)
                .then_with(|| a.node.id.cmp(&b.node.id))
        });
        scored.truncate(SCORE_META_TOP_K);
        metric.score_meta_data = scored.iter().map(ScoreParts::meta).collect();
        (best, metric)
    }

    /// The networks of the group's tasks that ask for one of their own (Nomad's deprecated
    /// task network), each clear of the ports and bandwidth the node's allocations, the
    /// group's `ports` offer and the earlier tasks hold; `Err` is the metric dimension.
    fn assign_task_networks(
        &mut self,
        group: &TaskGroup,
        node: &Node,
        proposed: &[Arc<ProposedAlloc>],
        group_offer: &Option<crate::network::PortOffer>,
    ) -> Result<BTreeMap<String, NetworkResource>, String> {
        let mut assigned = BTreeMap::new();
        let asks: Vec<(&str, &NetworkResource)> = group
            .tasks
            .iter()
            .filter_map(|task| {
                let ask = task.resources.as_ref()?.networks.first()?;
                Some((task.name.as_str(), ask))
            })
            .collect();
        if asks.is_empty() {
            return Ok(assigned);
        }
        let mut used_ports: BTreeSet<i64> = proposed
            .iter()
            .flat_map(|alloc| alloc.ports.iter().copied())
            .collect();
        if let Some(offer) = group_offer {
            used_ports.extend(offer.ports.iter().map(|port| port.value));
        }
        let mut used_bandwidth: BTreeMap<String, i64> = BTreeMap::new();
        for alloc in proposed {
            for (device, mbits) in &alloc.bandwidth {
                *used_bandwidth.entry(device.clone()).or_insert(0) += mbits;
            }
        }
        for (task, ask) in asks {
            let offer = crate::network::assign_task_network(
                node,
                ask,
                &used_ports,
                &used_bandwidth,
                &mut self.port_rng,
            )?;
            used_ports.extend(crate::network::network_ports(&offer));
            *used_bandwidth.entry(offer.device.clone()).or_insert(0) += offer.mbits;
            assigned.insert(task.to_string(), offer);
        }
        Ok(assigned)
    }

    fn static_check(
        &mut self,
        job: &Job,
        group: &TaskGroup,
        node: &Node,
        position: Option<usize>,
    ) -> Result<(), String> {
        let Some(position) = position else {
            return static_feasibility(&mut self.constraint_cache, job, group, node);
        };
        let candidate_count = self.candidates.len();
        if !self.static_checks.contains_key(&group.name) {
            self.static_checks
                .insert(group.name.clone(), vec![None; candidate_count]);
        }
        let known = self
            .static_checks
            .get(&group.name)
            .and_then(|memo| memo.get(position))
            .cloned()
            .flatten();
        if let Some(known) = known {
            return known;
        }
        let outcome = static_feasibility(&mut self.constraint_cache, job, group, node);
        if let Some(slot) = self
            .static_checks
            .get_mut(&group.name)
            .and_then(|memo| memo.get_mut(position))
        {
            *slot = Some(outcome.clone());
        }
        outcome
    }

    /// The non-terminal allocations on the node once the plan so far is applied: the snapshot's,
    /// minus those the plan stops, with the plan's new and updated ones.
    fn proposed_allocs(
        &mut self,
        state: &dyn SchedulerState,
        plan: &Plan,
        node_id: &str,
        ignored_alloc_id: Option<&str>,
    ) -> Vec<Arc<ProposedAlloc>> {
        let base = match self.node_allocs.get(node_id) {
            Some(base) => base.clone(),
            None => {
                let base: Arc<Vec<Arc<ProposedAlloc>>> = Arc::new(
                    state
                        .allocs_by_node(node_id)
                        .iter()
                        .filter(|alloc| !alloc.terminal_status())
                        .map(|alloc| Arc::new(ProposedAlloc::of(alloc)))
                        .collect(),
                );
                self.node_allocs.insert(node_id.to_string(), base.clone());
                base
            }
        };
        let stops = plan.node_update.get(node_id);
        let planned = plan.node_allocation.get(node_id);
        if stops.is_none() && planned.is_none() && ignored_alloc_id.is_none() {
            return base.as_ref().clone();
        }
        // A node's share of the plan is small: linear scans beat building sets.
        let stops: &[Allocation] = stops.map_or(&[], Vec::as_slice);
        let planned: &[Allocation] = planned.map_or(&[], Vec::as_slice);
        let mut proposed: Vec<Arc<ProposedAlloc>> = base
            .iter()
            .filter(|alloc| {
                Some(alloc.id.as_str()) != ignored_alloc_id
                    && !stops.iter().any(|stop| stop.id == alloc.id)
                    && !planned.iter().any(|update| update.id == alloc.id)
            })
            .cloned()
            .collect();
        for alloc in planned {
            if alloc.terminal_status() || Some(alloc.id.as_str()) == ignored_alloc_id {
                continue;
            }
            let summary = match self.planned_allocs.get(&alloc.id) {
                Some(summary) => summary.clone(),
                None => {
                    let summary = Arc::new(ProposedAlloc::of(alloc));
                    self.planned_allocs
                        .insert(alloc.id.clone(), summary.clone());
                    summary
                }
            };
            proposed.push(summary);
        }
        proposed
    }

    /// How many allocations (of the job, or of the group) use each value of the property, once
    /// the plan so far is applied.
    #[allow(clippy::too_many_arguments)]
    fn property_use(
        &mut self,
        state: &dyn SchedulerState,
        plan: &Plan,
        job: &Job,
        group: &TaskGroup,
        target: &str,
        group_level: bool,
        options: &SelectOptions,
    ) -> BTreeMap<String, u64> {
        let stopped: BTreeSet<&str> = plan.stops().map(|alloc| alloc.id.as_str()).collect();
        let planned: BTreeMap<&str, &Allocation> = plan
            .allocations()
            .filter(|alloc| alloc.job_id == job.id && alloc.namespace == job.namespace)
            .map(|alloc| (alloc.id.as_str(), alloc))
            .collect();
        let existing = state.allocs_by_job(&job.namespace, &job.id);
        let mut counted: Vec<(String, String)> = Vec::new();
        for alloc in existing
            .iter()
            .map(Arc::as_ref)
            .filter(|alloc| !planned.contains_key(alloc.id.as_str()))
            .chain(planned.values().copied())
        {
            if alloc.terminal_status()
                || stopped.contains(alloc.id.as_str())
                || Some(alloc.id.as_str()) == options.ignored_alloc_id.as_deref()
            {
                continue;
            }
            if group_level && alloc.task_group != group.name {
                continue;
            }
            counted.push((alloc.node_id.clone(), alloc.id.clone()));
        }
        let mut use_by_value = BTreeMap::new();
        for (node_id, _) in counted {
            let node = self
                .node_lookup
                .entry(node_id.clone())
                .or_insert_with(|| state.node(&node_id))
                .clone();
            if let Some(value) = node
                .as_deref()
                .and_then(|node| crate::constraint::resolve_target(target, node))
            {
                *use_by_value.entry(value.to_string()).or_insert(0) += 1;
            }
        }
        use_by_value
    }
}

/// The score components of one node, kept as numbers until the best few are reported.
struct ScoreParts {
    node: Arc<Node>,
    binpack: f64,
    anti_affinity: f64,
    penalty: f64,
    affinity: f64,
    spread: Option<f64>,
    final_score: f64,
}

impl ScoreParts {
    /// Nomad's `NodeScoreMeta`, with its score names.
    fn meta(&self) -> NodeScoreMeta {
        let mut scores = BTreeMap::new();
        scores.insert("binpack".to_string(), self.binpack);
        scores.insert("job-anti-affinity".to_string(), self.anti_affinity);
        scores.insert("node-reschedule-penalty".to_string(), self.penalty);
        scores.insert("node-affinity".to_string(), self.affinity);
        if let Some(spread) = self.spread {
            scores.insert("allocation-spread".to_string(), spread);
        }
        NodeScoreMeta {
            node_id: self.node.id.clone(),
            scores,
            norm_score: self.final_score,
        }
    }
}

enum Candidates<'a> {
    Shuffled,
    Given(&'a [Arc<Node>]),
}

fn filter_node(metric: &mut AllocMetric, node: &Node, reason: String) {
    metric.nodes_filtered += 1;
    if !node.node_class.is_empty() {
        *metric
            .class_filtered
            .entry(node.node_class.clone())
            .or_insert(0) += 1;
    }
    *metric.constraint_filtered.entry(reason).or_insert(0) += 1;
}

fn exhaust_node(metric: &mut AllocMetric, node: &Node, dimension: &str) {
    metric.nodes_exhausted += 1;
    if !node.node_class.is_empty() {
        *metric
            .class_exhausted
            .entry(node.node_class.clone())
            .or_insert(0) += 1;
    }
    *metric
        .dimension_exhausted
        .entry(dimension.to_string())
        .or_insert(0) += 1;
}

/// Records, per task, the resources that could not be found (Nomad's `ExhaustResources`), once
/// a placement failed for lack of CPU or memory.
pub fn exhaust_resources(metric: &mut AllocMetric, group: &TaskGroup) {
    if metric.dimension_exhausted.is_empty() {
        return;
    }
    let memory = metric
        .dimension_exhausted
        .get("memory")
        .is_some_and(|count| *count > 0);
    let cpu = metric
        .dimension_exhausted
        .get("cpu")
        .is_some_and(|count| *count > 0);
    for task in &group.tasks {
        let resources = task.resources.clone().unwrap_or_default();
        let entry = metric
            .resources_exhausted
            .entry(task.name.clone())
            .or_insert_with(|| serde_json::json!({"CPU": 0, "MemoryMB": 0}));
        let add = |entry: &mut serde_json::Value, key: &str, amount: i64| {
            let current = entry
                .get(key)
                .and_then(serde_json::Value::as_i64)
                .unwrap_or(0);
            if let Some(object) = entry.as_object_mut() {
                object.insert(key.to_string(), serde_json::Value::from(current + amount));
            }
        };
        if memory {
            add(entry, "MemoryMB", resources.memory_mb);
        }
        if cpu {
            add(entry, "CPU", resources.cpu);
        }
    }
}
