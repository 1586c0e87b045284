//! Builders for jobs, nodes and allocations, for the scheduler's tests and for other crates'
//! tests and benchmarks that need a cluster to schedule on.
//!
//! Not here: assertions or anything that reads real state.

use std::collections::BTreeMap;

use drover_structs::{
    AllocatedCpuResources, AllocatedMemoryResources, AllocatedResources, AllocatedTaskResources,
    Allocation, Constraint, DriverInfo, EphemeralDisk, Job, Node, NodeCpuResources,
    NodeDiskResources, NodeMemoryResources, NodeReservedCpuResources, NodeReservedResources,
    NodeResources, Resources, Task, TaskGroup,
};
use serde_json::Value;

/// Builds a job: one call per group and task, each later call editing the last group or task.
#[derive(Debug, Clone)]
pub struct JobBuilder {
    job: Job,
}

impl JobBuilder {
    fn of_type(job_id: &str, job_type: &str) -> Self {
        let job = Job {
            id: job_id.to_string(),
            name: job_id.to_string(),
            namespace: drover_structs::DEFAULT_NAMESPACE.to_string(),
            region: drover_structs::DEFAULT_REGION.to_string(),
            r#type: job_type.to_string(),
            priority: 50,
            datacenters: vec!["dc1".to_string()],
            node_pool: drover_structs::DEFAULT_NODE_POOL.to_string(),
            status: drover_structs::JOB_STATUS_PENDING.to_string(),
            create_index: 10,
            modify_index: 10,
            job_modify_index: 10,
            ..Job::default()
        };
        JobBuilder { job }
    }

    /// A service job in `dc1`.
    pub fn service(job_id: &str) -> Self {
        Self::of_type(job_id, drover_structs::JOB_TYPE_SERVICE)
    }

    /// A batch job in `dc1`.
    pub fn batch(job_id: &str) -> Self {
        Self::of_type(job_id, drover_structs::JOB_TYPE_BATCH)
    }

    /// Adds a group with the default restart and reschedule policies for the job's type and a
    /// 300 MB ephemeral disk.
    pub fn group(mut self, name: &str, count: i64) -> Self {
        let job_type = self.job.r#type.clone();
        self.job.task_groups.push(TaskGroup {
            name: name.to_string(),
            count,
            restart_policy: Some(drover_structs::canonicalize::default_restart_policy(
                &job_type,
            )),
            reschedule_policy: drover_structs::canonicalize::default_reschedule_policy(&job_type),
            ephemeral_disk: Some(EphemeralDisk {
                size_mb: 300,
                ..EphemeralDisk::default()
            }),
            ..TaskGroup::default()
        });
        self
    }

    /// Adds a task (100 MHz, 256 MB) to the last group.
    pub fn task(mut self, name: &str, driver: &str) -> Self {
        if let Some(group) = self.job.task_groups.last_mut() {
            let mut config = serde_json::Map::new();
            config.insert("command".to_string(), Value::from("/bin/sleep"));
            config.insert("args".to_string(), Value::from(vec![Value::from("3600")]));
            group.tasks.push(Task {
                name: name.to_string(),
                driver: driver.to_string(),
                config,
                resources: Some(Resources {
                    cpu: 100,
                    memory_mb: 256,
                    ..Resources::default()
                }),
                ..Task::default()
            });
        }
        self
    }

    /// Sets the last task's CPU (MHz) and memory (MB).
    pub fn resources(mut self, cpu: i64, memory_mb: i64) -> Self {
        if let Some(task) = self
            .job
            .task_groups
            .last_mut()
            .and_then(|group| group.tasks.last_mut())
        {
            task.resources = Some(Resources {
                cpu,
                memory_mb,
                ..Resources::default()
            });
        }
        self
    }

    /// Sets the number of cores the last task reserves (its `cpu` is then ignored).
    pub fn cores(mut self, cores: i64) -> Self {
        if let Some(task) = self
            .job
            .task_groups
            .last_mut()
            .and_then(|group| group.tasks.last_mut())
        {
            task.resources.get_or_insert_with(Resources::default).cores = cores;
        }
        self
    }

    /// Adds a job-level constraint.
    pub fn constraint(mut self, left: &str, operand: &str, right: &str) -> Self {
        self.job.constraints.push(constraint(left, operand, right));
        self
    }

    /// Adds a constraint to the last group.
    pub fn group_constraint(mut self, left: &str, operand: &str, right: &str) -> Self {
        if let Some(group) = self.job.task_groups.last_mut() {
            group.constraints.push(constraint(left, operand, right));
        }
        self
    }

    /// Adds a constraint to the last task.
    pub fn task_constraint(mut self, left: &str, operand: &str, right: &str) -> Self {
        if let Some(task) = self
            .job
            .task_groups
            .last_mut()
            .and_then(|group| group.tasks.last_mut())
        {
            task.constraints.push(constraint(left, operand, right));
        }
        self
    }

    /// Adds a host network to the last group with static (`reserved`) and dynamic ports.
    pub fn network(mut self, reserved: &[(&str, i64)], dynamic: &[&str]) -> Self {
        if let Some(group) = self.job.task_groups.last_mut() {
            group.networks.push(drover_structs::NetworkResource {
                mode: "host".to_string(),
                reserved_ports: reserved
                    .iter()
                    .map(|(label, value)| drover_structs::Port {
                        label: label.to_string(),
                        value: *value,
                        ..drover_structs::Port::default()
                    })
                    .collect(),
                dynamic_ports: dynamic
                    .iter()
                    .map(|label| drover_structs::Port {
                        label: label.to_string(),
                        ..drover_structs::Port::default()
                    })
                    .collect(),
                ..drover_structs::NetworkResource::default()
            });
        }
        self
    }

    /// Gives the last task a network of its own (Nomad's deprecated task network) with static
    /// (`reserved`) and dynamic ports and `mbits` of bandwidth.
    pub fn task_network(mut self, reserved: &[(&str, i64)], dynamic: &[&str], mbits: i64) -> Self {
        let network = drover_structs::NetworkResource {
            mbits,
            reserved_ports: reserved
                .iter()
                .map(|(label, value)| drover_structs::Port {
                    label: label.to_string(),
                    value: *value,
                    ..drover_structs::Port::default()
                })
                .collect(),
            dynamic_ports: dynamic
                .iter()
                .map(|label| drover_structs::Port {
                    label: label.to_string(),
                    ..drover_structs::Port::default()
                })
                .collect(),
            ..drover_structs::NetworkResource::default()
        };
        if let Some(task) = self
            .job
            .task_groups
            .last_mut()
            .and_then(|group| group.tasks.last_mut())
        {
            task.resources
                .get_or_insert_with(Resources::default)
                .networks
                .push(network);
        }
        self
    }

    pub fn datacenters(mut self, datacenters: &[&str]) -> Self {
        self.job.datacenters = datacenters.iter().map(|dc| dc.to_string()).collect();
        self
    }

    /// Sets the last group's reschedule policy attempts (0 disables rescheduling).
    pub fn reschedule_attempts(mut self, attempts: i64) -> Self {
        if let Some(policy) = self
            .job
            .task_groups
            .last_mut()
            .and_then(|group| group.reschedule_policy.as_mut())
        {
            policy.attempts = attempts;
            policy.unlimited = false;
            policy.delay = drover_structs::DurationNs::ZERO;
            if policy.interval.is_zero() {
                policy.interval = drover_structs::DurationNs::from_hours(1);
            }
        }
        self
    }

    pub fn build(self) -> Job {
        self.job
    }
}

/// A constraint `left operand right`.
pub fn constraint(left: &str, operand: &str, right: &str) -> Constraint {
    Constraint {
        l_target: left.to_string(),
        operand: operand.to_string(),
        r_target: right.to_string(),
    }
}

/// Builds a ready, eligible Linux node in `dc1` with 4000 MHz, 8192 MB and the `raw_exec` driver.
#[derive(Debug, Clone)]
pub struct NodeBuilder {
    node: Node,
}

impl NodeBuilder {
    pub fn new(node_id: &str) -> Self {
        let mut attributes = BTreeMap::new();
        attributes.insert("kernel.name".to_string(), "linux".to_string());
        attributes.insert("cpu.arch".to_string(), "amd64".to_string());
        attributes.insert("driver.raw_exec".to_string(), "1".to_string());
        attributes.insert("unique.hostname".to_string(), format!("host-{node_id}"));
        let mut drivers = BTreeMap::new();
        drivers.insert(
            "raw_exec".to_string(),
            DriverInfo {
                detected: true,
                healthy: true,
                health_description: "Healthy".to_string(),
                ..DriverInfo::default()
            },
        );
        let node = Node {
            id: node_id.to_string(),
            name: format!("node-{node_id}"),
            datacenter: "dc1".to_string(),
            node_pool: drover_structs::DEFAULT_NODE_POOL.to_string(),
            attributes,
            drivers,
            node_resources: Some(NodeResources {
                cpu: NodeCpuResources {
                    cpu_shares: 4000,
                    total_cpu_cores: 4,
                    reservable_cpu_cores: vec![0, 1, 2, 3],
                },
                memory: NodeMemoryResources { memory_mb: 8192 },
                disk: NodeDiskResources { disk_mb: 100_000 },
                ..NodeResources::default()
            }),
            reserved_resources: Some(NodeReservedResources::default()),
            scheduling_eligibility: drover_structs::NODE_SCHEDULING_ELIGIBLE.to_string(),
            status: drover_structs::NODE_STATUS_READY.to_string(),
            ..Node::default()
        };
        NodeBuilder { node }
    }

    pub fn datacenter(mut self, datacenter: &str) -> Self {
        self.node.datacenter = datacenter.to_string();
        self
    }

    pub fn status(mut self, status: &str) -> Self {
        self.node.status = status.to_string();
        self
    }

    pub fn ineligible(mut self) -> Self {
        self.node.scheduling_eligibility = drover_structs::NODE_SCHEDULING_INELIGIBLE.to_string();
        self
    }

    pub fn draining(mut self) -> Self {
        self.node.drain_strategy = Some(drover_structs::DrainStrategy {
            deadline: drover_structs::DurationNs::from_hours(1),
            ..Default::default()
        });
        self.node.drain = true;
        self
    }

    /// A fingerprinted host network, as a client reports it: `device` with the single
    /// address `ip` and `mbits` of bandwidth.
    pub fn network(mut self, device: &str, ip: &str, mbits: i64) -> Self {
        if let Some(resources) = self.node.node_resources.as_mut() {
            resources.networks.push(drover_structs::NetworkResource {
                mode: "host".to_string(),
                device: device.to_string(),
                cidr: format!("{ip}/32"),
                ip: ip.to_string(),
                mbits,
                ..drover_structs::NetworkResource::default()
            });
        }
        self
    }

    /// Total CPU (MHz) and memory (MB).
    pub fn resources(mut self, cpu: i64, memory_mb: i64) -> Self {
        if let Some(resources) = self.node.node_resources.as_mut() {
            resources.cpu.cpu_shares = cpu;
            resources.memory.memory_mb = memory_mb;
        }
        self
    }

    /// CPU (MHz) and memory (MB) kept back from scheduling.
    pub fn reserved(mut self, cpu: i64, memory_mb: i64) -> Self {
        self.node.reserved_resources = Some(NodeReservedResources {
            cpu: NodeReservedCpuResources {
                cpu_shares: cpu,
                ..NodeReservedCpuResources::default()
            },
            memory: NodeMemoryResources { memory_mb },
            ..NodeReservedResources::default()
        });
        self
    }

    /// The node's total cores and the core IDs it lets tasks reserve.
    pub fn cores(mut self, total: i64, reservable: &[u16]) -> Self {
        if let Some(resources) = self.node.node_resources.as_mut() {
            resources.cpu.total_cpu_cores = total;
            resources.cpu.reservable_cpu_cores = reservable.to_vec();
        }
        self
    }

    /// Core IDs the client keeps back from reservation (`reserved { cores = … }`).
    pub fn reserved_cores(mut self, cores: &[u16]) -> Self {
        if let Some(reserved) = self.node.reserved_resources.as_mut() {
            reserved.cpu.reserved_cpu_cores = cores.to_vec();
        }
        self
    }

    pub fn attribute(mut self, key: &str, value: &str) -> Self {
        self.node
            .attributes
            .insert(key.to_string(), value.to_string());
        self
    }

    pub fn meta(mut self, key: &str, value: &str) -> Self {
        self.node.meta.insert(key.to_string(), value.to_string());
        self
    }

    pub fn class(mut self, class: &str) -> Self {
        self.node.node_class = class.to_string();
        self
    }

    /// Removes a driver (both its driver info and its `driver.<name>` attribute).
    pub fn without_driver(mut self, driver: &str) -> Self {
        self.node.drivers.remove(driver);
        self.node.attributes.remove(&format!("driver.{driver}"));
        self
    }

    /// Adds a detected, healthy driver.
    pub fn with_driver(mut self, driver: &str) -> Self {
        self.node.drivers.insert(
            driver.to_string(),
            DriverInfo {
                detected: true,
                healthy: true,
                ..DriverInfo::default()
            },
        );
        self
    }

    pub fn build(self) -> Node {
        self.node
    }
}

/// A running allocation of `job`'s group at `index` on `node`, as if an earlier pass had placed
/// it and the client had started it.
pub fn running_alloc(
    alloc_id: &str,
    job: &Job,
    group_name: &str,
    index: u64,
    node: &Node,
) -> Allocation {
    let mut tasks = BTreeMap::new();
    let mut task_lifecycles = BTreeMap::new();
    if let Some(group) = job.lookup_task_group(group_name) {
        for task in &group.tasks {
            let resources = task.resources.clone().unwrap_or_default();
            tasks.insert(
                task.name.clone(),
                AllocatedTaskResources {
                    cpu: AllocatedCpuResources {
                        cpu_shares: resources.cpu,
                        reserved_cores: None,
                    },
                    memory: AllocatedMemoryResources {
                        memory_mb: resources.memory_mb,
                        memory_max_mb: resources.memory_max_mb,
                    },
                    ..AllocatedTaskResources::default()
                },
            );
            task_lifecycles.insert(task.name.clone(), task.lifecycle.clone());
        }
    }
    Allocation {
        id: alloc_id.to_string(),
        namespace: job.namespace.clone(),
        eval_id: "eval-before".to_string(),
        name: crate::names::alloc_name(&job.id, group_name, index),
        node_id: node.id.clone(),
        node_name: node.name.clone(),
        job_id: job.id.clone(),
        job: Some(std::sync::Arc::new(job.clone())),
        task_group: group_name.to_string(),
        allocated_resources: Some(AllocatedResources {
            tasks,
            task_lifecycles,
            ..AllocatedResources::default()
        }),
        desired_status: drover_structs::ALLOC_DESIRED_STATUS_RUN.to_string(),
        client_status: drover_structs::ALLOC_CLIENT_STATUS_RUNNING.to_string(),
        create_time: 1,
        modify_time: 1,
        ..Allocation::default()
    }
}
