//! The in-memory tables of the typed store and the read API over a consistent snapshot.
//!
//! Every table is a persistent ordered map or set ([`Map`], [`Set`]: `imbl`'s B-trees with
//! shared nodes), so a snapshot is a clone of a few pointers and a write while a snapshot is
//! alive copies only the nodes on the path to what it changes: O(log n), not the whole table.
//! Iteration is in key order, as with `BTreeMap`. Secondary indexes (allocs by job, node and eval; evals by job) are
//! kept here in memory and rebuilt at load; only primary records are persisted. Service
//! registrations are keyed by (namespace, ID) and indexed by service name, job, allocation, node
//! and bare ID.
//!
//! **Boundary**: reads only. Writes live in [`crate::store`], derived data in
//! [`crate::derive`].

use std::ops::Bound;
use std::sync::Arc;

use drover_structs::{
    Allocation, Deployment, Evaluation, Job, JobSummary, Node, PeriodicLaunch, ServiceRegistration,
    VariableEncrypted, WrappedRootKey,
};

use crate::engine::{Committed, Indexes, Table};

/// The ordered map every table is: persistent, so a clone (a snapshot, the writer's working
/// copy) shares all its nodes and a write then copies only the O(log n) nodes on its path.
pub(crate) type Map<K, V> = imbl::OrdMap<K, V>;

/// The ordered set every secondary index is (see [`Map`]).
pub(crate) type Set<T> = imbl::OrdSet<T>;

/// A job's identity: namespace and ID.
pub type JobKey = (String, String);

/// How many versions of a job are kept (Nomad's `JobTrackedVersions`).
pub const JOB_TRACKED_VERSIONS: usize = 6;

/// The tables held in memory.
#[derive(Debug, Clone, Default)]
pub struct StateTables {
    pub(crate) jobs: Map<JobKey, Arc<Job>>,
    pub(crate) job_versions: Map<(String, String, u64), Arc<Job>>,
    pub(crate) job_summaries: Map<JobKey, Arc<JobSummary>>,
    pub(crate) evals: Map<String, Arc<Evaluation>>,
    pub(crate) evals_by_job: Set<(String, String, String)>,
    pub(crate) allocs: Map<String, Arc<Allocation>>,
    pub(crate) allocs_by_job: Set<(String, String, String)>,
    pub(crate) allocs_by_node: Set<(String, String)>,
    pub(crate) allocs_by_eval: Set<(String, String)>,
    pub(crate) nodes: Map<String, Arc<Node>>,
    /// Node ID by secret ID: a client's calls name their node by its secret, so each is found
    /// without a walk over every node. Kept by [`StateTables::put_node`] and
    /// [`StateTables::remove_node`], the only writers of `nodes`.
    pub(crate) nodes_by_secret: Map<String, String>,
    /// Which job copies of allocations are persisted (see [`AllocJobRef`]).
    pub(crate) alloc_jobs: Set<AllocJobRef>,
    /// Service registrations by (namespace, ID).
    pub(crate) services: Map<ServiceKey, Arc<ServiceRegistration>>,
    /// (namespace, service name, ID).
    pub(crate) services_by_name: Set<(String, String, String)>,
    /// (namespace, job ID, ID).
    pub(crate) services_by_job: Set<(String, String, String)>,
    /// (alloc ID, namespace, ID).
    pub(crate) services_by_alloc: Set<(String, String, String)>,
    /// (node ID, namespace, ID).
    pub(crate) services_by_node: Set<(String, String, String)>,
    /// (ID, namespace): an ID without its namespace, as a client deregisters.
    pub(crate) services_by_id: Set<(String, String)>,
    /// The last launch of each periodic job.
    pub(crate) periodic_launches: Map<JobKey, Arc<PeriodicLaunch>>,
    /// The keyring's root keys (wrapped), by key ID.
    pub(crate) root_keys: Map<String, Arc<WrappedRootKey>>,
    /// Variables (items sealed) by (namespace, path).
    pub(crate) variables: Map<(String, String), Arc<VariableEncrypted>>,
    /// ACL policies and tokens.
    pub(crate) acl: Arc<crate::acl_tables::AclTables>,
    /// Deployments by ID.
    pub(crate) deployments: Map<String, Arc<Deployment>>,
    /// (namespace, job ID, deployment ID).
    pub(crate) deployments_by_job: Set<(String, String, String)>,
    /// Namespaces by name (`default` only once written; see `crate::namespaces`).
    pub(crate) namespaces: Map<String, Arc<drover_structs::namespace::Namespace>>,
    /// Node pools by name (not the built-in ones).
    pub(crate) node_pools: Map<String, Arc<drover_structs::NodePool>>,
    /// The scaling events of each job.
    pub(crate) scaling_events: Map<JobKey, Arc<drover_structs::JobScalingEvents>>,
    /// Scaling policies by ID.
    pub(crate) scaling_policies: Map<String, Arc<drover_structs::ScalingPolicy>>,
    /// The jobspec each job version was registered from, by (namespace, job ID, version).
    pub(crate) job_submissions: Map<(String, String, u64), Arc<drover_structs::JobSubmission>>,
    /// Service mesh intentions by [`intention_key`].
    pub(crate) intentions: Map<String, Arc<drover_structs::intention::Intention>>,
}

/// An intention's key: `<source ns>/<source name>/<destination ns>/<destination name>` (no
/// part holds a `/`).
pub fn intention_key(source: (&str, &str), destination: (&str, &str)) -> String {
    format!(
        "{}/{}/{}/{}",
        source.0, source.1, destination.0, destination.1
    )
}

/// A service registration's identity: namespace and ID.
pub type ServiceKey = (String, String);

/// Names the copy of a job an allocation carries: namespace, job ID, the job's `CreateIndex`
/// and `JobModifyIndex` (together they name one version of one incarnation of the job).
pub(crate) type AllocJobRef = (String, String, u64, u64);

/// Values of `map` whose key starts with `prefix`, in key order.
fn by_string_prefix<V: Clone>(map: &Map<String, V>, prefix: &str) -> Vec<V> {
    map.range::<_, str>((Bound::Included(prefix), Bound::Unbounded))
        .take_while(|(key, _)| key.starts_with(prefix))
        .map(|(_, value)| value.clone())
        .collect()
}

/// The third element of every triple in `set` whose first two elements are `(first, second)`.
pub(crate) fn triples_under<'a>(
    set: &'a Set<(String, String, String)>,
    first: &'a str,
    second: &'a str,
) -> impl Iterator<Item = &'a str> + 'a {
    let start = (first.to_owned(), second.to_owned(), String::new());
    set.range(start..)
        .take_while(move |(one, two, _)| one == first && two == second)
        .map(|(_, _, third)| third.as_str())
}

/// The second element of every pair in `set` whose first element is `first`.
pub(crate) fn pairs_under<'a>(
    set: &'a Set<(String, String)>,
    first: &'a str,
) -> impl Iterator<Item = &'a str> + 'a {
    let start = (first.to_owned(), String::new());
    set.range(start..)
        .take_while(move |(one, _)| one == first)
        .map(|(_, second)| second.as_str())
}

impl StateTables {
    pub(crate) fn job(&self, namespace: &str, job_id: &str) -> Option<&Arc<Job>> {
        self.jobs.get(&(namespace.to_owned(), job_id.to_owned()))
    }

    pub(crate) fn allocs_of_job<'a>(
        &'a self,
        namespace: &'a str,
        job_id: &'a str,
    ) -> impl Iterator<Item = &'a Arc<Allocation>> + 'a {
        triples_under(&self.allocs_by_job, namespace, job_id)
            .filter_map(|alloc_id| self.allocs.get(alloc_id))
    }

    pub(crate) fn evals_of_job<'a>(
        &'a self,
        namespace: &'a str,
        job_id: &'a str,
    ) -> impl Iterator<Item = &'a Arc<Evaluation>> + 'a {
        triples_under(&self.evals_by_job, namespace, job_id)
            .filter_map(|eval_id| self.evals.get(eval_id))
    }

    pub(crate) fn version_keys_of_job(&self, namespace: &str, job_id: &str) -> Vec<u64> {
        let start = (namespace.to_owned(), job_id.to_owned(), 0);
        self.job_versions
            .range(start..)
            .take_while(|((one, two, _), _)| one == namespace && two == job_id)
            .map(|((_, _, version), _)| *version)
            .collect()
    }

    /// Inserts or replaces `node`, keeping the secret index.
    pub(crate) fn put_node(&mut self, node: Node) {
        if let Some(previous) = self.nodes.get(&node.id)
            && previous.secret_id != node.secret_id
        {
            let previous_secret = previous.secret_id.clone();
            self.nodes_by_secret.remove(&previous_secret);
        }
        if !node.secret_id.is_empty() {
            self.nodes_by_secret
                .insert(node.secret_id.clone(), node.id.clone());
        }
        self.nodes.insert(node.id.clone(), Arc::new(node));
    }

    /// Removes the node `node_id`, keeping the secret index.
    pub(crate) fn remove_node(&mut self, node_id: &str) {
        if let Some(removed) = self.nodes.remove(node_id) {
            self.nodes_by_secret.remove(&removed.secret_id);
        }
    }

    /// Adds `alloc` to the secondary indexes.
    pub(crate) fn index_alloc(&mut self, alloc: &Allocation) {
        self.allocs_by_job.insert((
            alloc.namespace.clone(),
            alloc.job_id.clone(),
            alloc.id.clone(),
        ));
        if !alloc.node_id.is_empty() {
            self.allocs_by_node
                .insert((alloc.node_id.clone(), alloc.id.clone()));
        }
        if !alloc.eval_id.is_empty() {
            self.allocs_by_eval
                .insert((alloc.eval_id.clone(), alloc.id.clone()));
        }
    }

    /// Removes `alloc` from the secondary indexes.
    pub(crate) fn unindex_alloc(&mut self, alloc: &Allocation) {
        self.allocs_by_job.remove(&(
            alloc.namespace.clone(),
            alloc.job_id.clone(),
            alloc.id.clone(),
        ));
        self.allocs_by_node
            .remove(&(alloc.node_id.clone(), alloc.id.clone()));
        self.allocs_by_eval
            .remove(&(alloc.eval_id.clone(), alloc.id.clone()));
    }

    /// Adds `service` to the secondary indexes.
    pub(crate) fn index_service(&mut self, service: &ServiceRegistration) {
        let (namespace, id) = (&service.namespace, &service.id);
        self.services_by_name
            .insert((namespace.clone(), service.service_name.clone(), id.clone()));
        self.services_by_job
            .insert((namespace.clone(), service.job_id.clone(), id.clone()));
        self.services_by_alloc
            .insert((service.alloc_id.clone(), namespace.clone(), id.clone()));
        self.services_by_node
            .insert((service.node_id.clone(), namespace.clone(), id.clone()));
        self.services_by_id.insert((id.clone(), namespace.clone()));
    }

    /// Removes `service` from the secondary indexes.
    pub(crate) fn unindex_service(&mut self, service: &ServiceRegistration) {
        let (namespace, id) = (&service.namespace, &service.id);
        self.services_by_name.remove(&(
            namespace.clone(),
            service.service_name.clone(),
            id.clone(),
        ));
        self.services_by_job
            .remove(&(namespace.clone(), service.job_id.clone(), id.clone()));
        self.services_by_alloc
            .remove(&(service.alloc_id.clone(), namespace.clone(), id.clone()));
        self.services_by_node
            .remove(&(service.node_id.clone(), namespace.clone(), id.clone()));
        self.services_by_id.remove(&(id.clone(), namespace.clone()));
    }

    /// The keys of the registrations whose index triple starts with `first`.
    pub(crate) fn service_keys_under(
        set: &Set<(String, String, String)>,
        first: &str,
    ) -> Vec<ServiceKey> {
        let start = (first.to_owned(), String::new(), String::new());
        set.range(start..)
            .take_while(|(one, _, _)| one == first)
            .map(|(_, namespace, id)| (namespace.clone(), id.clone()))
            .collect()
    }

    fn services_at<'a>(
        &'a self,
        keys: impl Iterator<Item = ServiceKey> + 'a,
    ) -> impl Iterator<Item = &'a Arc<ServiceRegistration>> + 'a {
        keys.filter_map(|key| self.services.get(&key))
    }

    pub(crate) fn index_eval(&mut self, eval: &Evaluation) {
        self.evals_by_job
            .insert((eval.namespace.clone(), eval.job_id.clone(), eval.id.clone()));
    }

    pub(crate) fn unindex_eval(&mut self, eval: &Evaluation) {
        self.evals_by_job
            .remove(&(eval.namespace.clone(), eval.job_id.clone(), eval.id.clone()));
    }
}

/// A job summary that differs between two snapshots (see [`StateSnapshot::job_summary_changes`]).
#[derive(Debug, Clone, PartialEq)]
pub struct JobSummaryChange {
    /// As it was; `None`: the job was not there.
    pub before: Option<Arc<JobSummary>>,
    /// As it is; `None`: the job is gone (purged).
    pub after: Option<Arc<JobSummary>>,
}

/// A consistent, immutable view of the whole store at one index (what the scheduler plans on).
#[derive(Debug, Clone)]
pub struct StateSnapshot {
    pub(crate) committed: Arc<Committed<StateTables>>,
}

impl StateSnapshot {
    pub(crate) fn tables(&self) -> &StateTables {
        &self.committed.data
    }

    /// The modify indexes as of this snapshot.
    pub fn indexes(&self) -> Indexes {
        self.committed.indexes
    }

    /// The index of the last write in this snapshot.
    pub fn latest_index(&self) -> u64 {
        self.committed.indexes.latest()
    }

    /// The index of the last write that touched `table`.
    pub fn table_index(&self, table: Table) -> u64 {
        self.committed.indexes.table(table)
    }

    /// The ACL tables (policies, roles, tokens, one-time tokens) as of this snapshot.
    pub fn acl(&self) -> Arc<crate::acl_tables::AclTables> {
        Arc::clone(&self.tables().acl)
    }

    /// The job `job_id` in `namespace`.
    pub fn job(&self, namespace: &str, job_id: &str) -> Option<Arc<Job>> {
        self.tables().job(namespace, job_id).cloned()
    }

    /// The last launch of the periodic job `job_id` in `namespace` (its register time until it
    /// first launches).
    pub fn periodic_launch(&self, namespace: &str, job_id: &str) -> Option<Arc<PeriodicLaunch>> {
        self.tables()
            .periodic_launches
            .get(&(namespace.to_owned(), job_id.to_owned()))
            .cloned()
    }

    /// Jobs whose ID starts with `id_prefix`, in `namespace` (`None`: every namespace), ordered
    /// by namespace then ID.
    pub fn jobs(&self, namespace: Option<&str>, id_prefix: &str) -> Vec<Arc<Job>> {
        match namespace {
            Some(namespace) => {
                let start = (namespace.to_owned(), id_prefix.to_owned());
                self.tables()
                    .jobs
                    .range(start..)
                    .take_while(|((job_namespace, job_id), _)| {
                        job_namespace == namespace && job_id.starts_with(id_prefix)
                    })
                    .map(|(_, job)| Arc::clone(job))
                    .collect()
            }
            None => self
                .tables()
                .jobs
                .iter()
                .filter(|((_, job_id), _)| job_id.starts_with(id_prefix))
                .map(|(_, job)| Arc::clone(job))
                .collect(),
        }
    }

    /// The kept versions of a job, newest first.
    pub fn job_versions(&self, namespace: &str, job_id: &str) -> Vec<Arc<Job>> {
        let start = (namespace.to_owned(), job_id.to_owned(), 0);
        let mut versions: Vec<Arc<Job>> = self
            .tables()
            .job_versions
            .range(start..)
            .take_while(|((one, two, _), _)| one == namespace && two == job_id)
            .map(|(_, job)| Arc::clone(job))
            .collect();
        versions.reverse();
        versions
    }

    /// One version of a job, if still kept.
    pub fn job_version(&self, namespace: &str, job_id: &str, version: u64) -> Option<Arc<Job>> {
        self.tables()
            .job_versions
            .get(&(namespace.to_owned(), job_id.to_owned(), version))
            .cloned()
    }

    /// The allocation counters of a job.
    pub fn job_summary(&self, namespace: &str, job_id: &str) -> Option<Arc<JobSummary>> {
        self.tables()
            .job_summaries
            .get(&(namespace.to_owned(), job_id.to_owned()))
            .cloned()
    }

    /// The job summaries that differ between `previous` (`None`: an empty store) and this
    /// snapshot, by namespace and job ID. Only what the two snapshots do not share is walked,
    /// so a round in which few summaries changed costs little however many jobs are stored.
    pub fn job_summary_changes(&self, previous: Option<&StateSnapshot>) -> Vec<JobSummaryChange> {
        let empty = Map::new();
        let before = previous.map_or(&empty, |previous| &previous.tables().job_summaries);
        before
            .diff(&self.tables().job_summaries)
            .map(|item| match item {
                imbl::ordmap::DiffItem::Add(_, after) => JobSummaryChange {
                    before: None,
                    after: Some(Arc::clone(after)),
                },
                imbl::ordmap::DiffItem::Update {
                    old: (_, before),
                    new: (_, after),
                } => JobSummaryChange {
                    before: Some(Arc::clone(before)),
                    after: Some(Arc::clone(after)),
                },
                imbl::ordmap::DiffItem::Remove(_, before) => JobSummaryChange {
                    before: Some(Arc::clone(before)),
                    after: None,
                },
            })
            .collect()
    }

    /// The evaluation `eval_id`.
    pub fn eval(&self, eval_id: &str) -> Option<Arc<Evaluation>> {
        self.tables().evals.get(eval_id).cloned()
    }

    /// Evaluations whose ID starts with `id_prefix` (all of them for `""`), by ID.
    pub fn evals(&self, id_prefix: &str) -> Vec<Arc<Evaluation>> {
        by_string_prefix(&self.tables().evals, id_prefix)
    }

    /// The evaluations of a job, by eval ID.
    pub fn evals_by_job(&self, namespace: &str, job_id: &str) -> Vec<Arc<Evaluation>> {
        self.tables()
            .evals_of_job(namespace, job_id)
            .cloned()
            .collect()
    }

    /// The allocation `alloc_id`.
    pub fn alloc(&self, alloc_id: &str) -> Option<Arc<Allocation>> {
        self.tables().allocs.get(alloc_id).cloned()
    }

    /// Allocations whose ID starts with `id_prefix` (all of them for `""`), by ID.
    pub fn allocs(&self, id_prefix: &str) -> Vec<Arc<Allocation>> {
        by_string_prefix(&self.tables().allocs, id_prefix)
    }

    /// The allocations of a job (every version of it), by alloc ID.
    pub fn allocs_by_job(&self, namespace: &str, job_id: &str) -> Vec<Arc<Allocation>> {
        self.tables()
            .allocs_of_job(namespace, job_id)
            .cloned()
            .collect()
    }

    /// The allocations placed on a node, by alloc ID.
    pub fn allocs_by_node(&self, node_id: &str) -> Vec<Arc<Allocation>> {
        let tables = self.tables();
        pairs_under(&tables.allocs_by_node, node_id)
            .filter_map(|alloc_id| tables.allocs.get(alloc_id).cloned())
            .collect()
    }

    /// The allocations an evaluation created or changed, by alloc ID.
    pub fn allocs_by_eval(&self, eval_id: &str) -> Vec<Arc<Allocation>> {
        let tables = self.tables();
        pairs_under(&tables.allocs_by_eval, eval_id)
            .filter_map(|alloc_id| tables.allocs.get(alloc_id).cloned())
            .collect()
    }

    /// The node `node_id`.
    pub fn node(&self, node_id: &str) -> Option<Arc<Node>> {
        self.tables().nodes.get(node_id).cloned()
    }

    /// Nodes whose ID starts with `id_prefix` (all of them for `""`), by ID.
    pub fn nodes(&self, id_prefix: &str) -> Vec<Arc<Node>> {
        by_string_prefix(&self.tables().nodes, id_prefix)
    }

    /// The node whose secret ID is `secret` (none for an empty one).
    pub fn node_by_secret(&self, secret: &str) -> Option<Arc<Node>> {
        let tables = self.tables();
        let node_id = tables.nodes_by_secret.get(secret)?;
        tables.nodes.get(node_id).cloned()
    }

    /// The service registration `id` in `namespace`.
    pub fn service_registration(
        &self,
        namespace: &str,
        id: &str,
    ) -> Option<Arc<ServiceRegistration>> {
        self.tables()
            .services
            .get(&(namespace.to_owned(), id.to_owned()))
            .cloned()
    }

    /// Every service registration in `namespace` (`None`: every namespace), by namespace and ID.
    pub fn service_registrations(&self, namespace: Option<&str>) -> Vec<Arc<ServiceRegistration>> {
        let services = &self.tables().services;
        match namespace {
            Some(namespace) => services
                .range((namespace.to_owned(), String::new())..)
                .take_while(|((one, _), _)| one == namespace)
                .map(|(_, service)| Arc::clone(service))
                .collect(),
            None => services.values().cloned().collect(),
        }
    }

    /// The registrations of service `name` in `namespace`, by ID.
    pub fn service_registrations_by_name(
        &self,
        namespace: &str,
        name: &str,
    ) -> Vec<Arc<ServiceRegistration>> {
        let tables = self.tables();
        let keys = triples_under(&tables.services_by_name, namespace, name)
            .map(|id| (namespace.to_owned(), id.to_owned()));
        tables.services_at(keys).cloned().collect()
    }

    /// The registrations of a job's allocations, by ID.
    pub fn service_registrations_by_job(
        &self,
        namespace: &str,
        job_id: &str,
    ) -> Vec<Arc<ServiceRegistration>> {
        let tables = self.tables();
        let keys = triples_under(&tables.services_by_job, namespace, job_id)
            .map(|id| (namespace.to_owned(), id.to_owned()));
        tables.services_at(keys).cloned().collect()
    }

    /// The registrations of one allocation, by namespace and ID.
    pub fn service_registrations_by_alloc(&self, alloc_id: &str) -> Vec<Arc<ServiceRegistration>> {
        let tables = self.tables();
        let keys = StateTables::service_keys_under(&tables.services_by_alloc, alloc_id);
        tables.services_at(keys.into_iter()).cloned().collect()
    }

    /// The registrations of the allocations on one node, by namespace and ID.
    pub fn service_registrations_by_node(&self, node_id: &str) -> Vec<Arc<ServiceRegistration>> {
        let tables = self.tables();
        let keys = StateTables::service_keys_under(&tables.services_by_node, node_id);
        tables.services_at(keys.into_iter()).cloned().collect()
    }
}
