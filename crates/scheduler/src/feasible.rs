//! Node feasibility for one task group: the checks that depend only on the node and the job
//! (datacenter and pool are handled by the candidate list; here: job constraints, drivers, group
//! and task constraints), and the checks that depend on other placements (`distinct_hosts`,
//! `distinct_property`).
//!
//! A failed check yields the reason Nomad records in `AllocMetric.ConstraintFiltered`: the
//! constraint as `"<LTarget> <Operand> <RTarget>"`, `"missing drivers"`, `"distinct_hosts"`,
//! `"distinct_property: <target>=<value> used by <n> allocs"`, `"missing property <target>"` or
//! `"missing compatible host volumes"`.
//!
//! Not here: resources (`select`).

use std::collections::BTreeMap;

use drover_structs::{Constraint, Job, Node, TaskGroup, VOLUME_TYPE_HOST};

use crate::constraint::{
    ConstraintCache, check_operand, distinct_hosts_enabled, operand, parse_go_bool, resolve_target,
};

/// Filter reason for a node lacking a driver the group needs.
pub const FILTER_MISSING_DRIVERS: &str = "missing drivers";

/// Filter reason for a node lacking a host volume the group asks for (or offering it read-only
/// to a read-write request), Nomad's `FilterConstraintHostVolumes`.
pub const FILTER_MISSING_HOST_VOLUMES: &str = "missing compatible host volumes";

/// Whether the node offers every host volume the group asks for, as Nomad's
/// `HostVolumeChecker`: each source (with `per_alloc`, the source with the `[index]` suffix of
/// `alloc_name`) must be one of the node's `HostVolumes`, and a volume the node declares
/// read-only only takes read-only requests. CSI volumes are not checked here.
pub fn host_volumes_feasible(group: &TaskGroup, alloc_name: &str, node: &Node) -> bool {
    group
        .volumes
        .values()
        .filter(|request| request.r#type == VOLUME_TYPE_HOST)
        .all(|request| {
            node.host_volumes
                .get(&request.source_for(alloc_name))
                .is_some_and(|offered| !offered.read_only || request.read_only)
        })
}

/// The constraint as Nomad prints it in metrics.
pub fn constraint_label(constraint: &Constraint) -> String {
    format!(
        "{} {} {}",
        constraint.l_target, constraint.operand, constraint.r_target
    )
}

/// Whether the node runs `driver`: its driver info says detected and healthy, or (for nodes that
/// report no driver info) the attribute `driver.<name>` is a true boolean.
pub fn node_has_driver(node: &Node, driver: &str) -> bool {
    if let Some(info) = node.drivers.get(driver) {
        return info.detected && info.healthy;
    }
    node.attributes
        .get(&format!("driver.{driver}"))
        .and_then(|value| parse_go_bool(value))
        .unwrap_or(false)
}

/// Whether `constraint` holds on the node.
pub fn constraint_holds(cache: &mut ConstraintCache, constraint: &Constraint, node: &Node) -> bool {
    let left = resolve_target(&constraint.l_target, node);
    let right = resolve_target(&constraint.r_target, node);
    check_operand(cache, &constraint.operand, left, right)
}

/// The checks that depend only on the node, the job and the group, in Nomad's order: job
/// constraints, drivers, then group and task constraints. `Err` carries the filter reason.
pub fn static_feasibility(
    cache: &mut ConstraintCache,
    job: &Job,
    group: &TaskGroup,
    node: &Node,
) -> Result<(), String> {
    for constraint in &job.constraints {
        if !constraint_holds(cache, constraint, node) {
            return Err(constraint_label(constraint));
        }
    }
    if !group
        .tasks
        .iter()
        .all(|task| node_has_driver(node, &task.driver))
    {
        return Err(FILTER_MISSING_DRIVERS.to_string());
    }
    let task_constraints = group.tasks.iter().flat_map(|task| task.constraints.iter());
    for constraint in group.constraints.iter().chain(task_constraints) {
        if !constraint_holds(cache, constraint, node) {
            return Err(constraint_label(constraint));
        }
    }
    Ok(())
}

/// Which `distinct_hosts` constraints apply: at job level (no two allocations of the job on a
/// node) and at group level (no two of the group).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DistinctHosts {
    pub job_level: bool,
    pub group_level: bool,
}

impl DistinctHosts {
    pub fn of(job: &Job, group: &TaskGroup) -> Self {
        let enabled = |constraints: &[Constraint]| {
            constraints
                .iter()
                .find(|c| c.operand == operand::DISTINCT_HOSTS)
                .is_some_and(|c| distinct_hosts_enabled(&c.r_target))
        };
        DistinctHosts {
            job_level: enabled(&job.constraints),
            group_level: enabled(&group.constraints),
        }
    }

    pub fn any(self) -> bool {
        self.job_level || self.group_level
    }

    /// Whether a node whose proposed allocations include `same_job` of this job, `same_group` of
    /// them in this group, may take another.
    pub fn allows(self, same_job: usize, same_group: usize) -> bool {
        !((self.job_level && same_job > 0) || same_group > 0 && self.any())
    }
}

/// One `distinct_property` constraint: at most `allowed` allocations (of the job, or of the
/// group for a group-level constraint) per value of a node property.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DistinctProperty {
    pub target: String,
    pub allowed: u64,
    pub group_level: bool,
}

impl DistinctProperty {
    /// The job's and the group's `distinct_property` constraints. An unreadable limit allows
    /// nothing, so a mistake never over-places.
    pub fn of(job: &Job, group: &TaskGroup) -> Vec<DistinctProperty> {
        let build = |constraint: &Constraint, group_level: bool| DistinctProperty {
            target: constraint.l_target.clone(),
            allowed: if constraint.r_target.is_empty() {
                1
            } else {
                constraint.r_target.parse::<u64>().unwrap_or(0)
            },
            group_level,
        };
        let job_level = job
            .constraints
            .iter()
            .filter(|c| c.operand == operand::DISTINCT_PROPERTY)
            .map(|c| build(c, false));
        let group_level = group
            .constraints
            .iter()
            .filter(|c| c.operand == operand::DISTINCT_PROPERTY)
            .map(|c| build(c, true));
        job_level.chain(group_level).collect()
    }

    /// Checks a node given how many allocations use each property value.
    pub fn check(&self, node: &Node, used_by_value: &BTreeMap<String, u64>) -> Result<(), String> {
        let Some(value) = resolve_target(&self.target, node) else {
            return Err(format!("missing property {:?}", self.target));
        };
        let used = used_by_value.get(value).copied().unwrap_or(0);
        if used >= self.allowed {
            return Err(format!(
                "distinct_property: {}={} used by {} allocs",
                self.target, value, used
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{JobBuilder, NodeBuilder};

    #[test]
    fn drivers_from_info_or_attribute() {
        let node = NodeBuilder::new("n").build();
        assert!(node_has_driver(&node, "raw_exec"));
        assert!(!node_has_driver(&node, "docker"));
        let mut unhealthy = NodeBuilder::new("n").build();
        if let Some(info) = unhealthy.drivers.get_mut("raw_exec") {
            info.healthy = false;
        }
        assert!(
            !node_has_driver(&unhealthy, "raw_exec"),
            "driver info wins over the attribute"
        );
        let attribute_only = NodeBuilder::new("n")
            .without_driver("raw_exec")
            .attribute("driver.exec", "true")
            .build();
        assert!(node_has_driver(&attribute_only, "exec"));
        let disabled = NodeBuilder::new("n")
            .without_driver("raw_exec")
            .attribute("driver.exec", "0")
            .build();
        assert!(!node_has_driver(&disabled, "exec"));
    }

    #[test]
    fn static_checks_name_the_failing_constraint() {
        let job = JobBuilder::service("web")
            .constraint("${attr.kernel.name}", "=", "linux")
            .group("g", 1)
            .task("t", "raw_exec")
            .group_constraint("${meta.rack}", "set_contains_any", "r1,r2")
            .task_constraint("${attr.cpu.arch}", "regexp", "^amd")
            .build();
        let group = &job.task_groups[0];
        let mut cache = ConstraintCache::default();
        let good = NodeBuilder::new("a").meta("rack", "r2").build();
        assert_eq!(static_feasibility(&mut cache, &job, group, &good), Ok(()));
        let no_rack = NodeBuilder::new("b").build();
        assert_eq!(
            static_feasibility(&mut cache, &job, group, &no_rack),
            Err("${meta.rack} set_contains_any r1,r2".to_string())
        );
        let darwin = NodeBuilder::new("c")
            .attribute("kernel.name", "darwin")
            .meta("rack", "r1")
            .build();
        assert_eq!(
            static_feasibility(&mut cache, &job, group, &darwin),
            Err("${attr.kernel.name} = linux".to_string())
        );
        let arm = NodeBuilder::new("d")
            .attribute("cpu.arch", "arm64")
            .meta("rack", "r1")
            .build();
        assert_eq!(
            static_feasibility(&mut cache, &job, group, &arm),
            Err("${attr.cpu.arch} regexp ^amd".to_string())
        );
        let no_driver = NodeBuilder::new("e")
            .without_driver("raw_exec")
            .meta("rack", "r1")
            .build();
        assert_eq!(
            static_feasibility(&mut cache, &job, group, &no_driver),
            Err(FILTER_MISSING_DRIVERS.to_string())
        );
    }

    #[test]
    fn host_volumes_need_the_source_and_a_writable_one_for_writers() {
        use drover_structs::{ClientHostVolumeConfig, VolumeRequest};
        let mut job = JobBuilder::service("web")
            .group("g", 2)
            .task("t", "exec")
            .build();
        let request = |source: &str, read_only: bool, per_alloc: bool| VolumeRequest {
            name: "v".to_string(),
            r#type: VOLUME_TYPE_HOST.to_string(),
            source: source.to_string(),
            read_only,
            per_alloc,
            ..VolumeRequest::default()
        };
        let offered = |names: &[(&str, bool)]| {
            let mut node = NodeBuilder::new("a").build();
            for (name, read_only) in names {
                node.host_volumes.insert(
                    name.to_string(),
                    ClientHostVolumeConfig {
                        name: name.to_string(),
                        path: format!("/srv/{name}"),
                        read_only: *read_only,
                    },
                );
            }
            node
        };
        let group = &mut job.task_groups[0];
        group
            .volumes
            .insert("v".to_string(), request("data", false, false));
        assert!(host_volumes_feasible(
            group,
            "web.g[0]",
            &offered(&[("data", false)])
        ));
        assert!(!host_volumes_feasible(
            group,
            "web.g[0]",
            &offered(&[("other", false)])
        ));
        assert!(!host_volumes_feasible(
            group,
            "web.g[0]",
            &offered(&[("data", true)])
        ));
        group
            .volumes
            .insert("v".to_string(), request("data", true, false));
        assert!(host_volumes_feasible(
            group,
            "web.g[0]",
            &offered(&[("data", true)])
        ));
        group
            .volumes
            .insert("v".to_string(), request("data", false, true));
        let both = offered(&[("data[0]", false), ("data[1]", false)]);
        assert!(host_volumes_feasible(group, "web.g[1]", &both));
        assert!(!host_volumes_feasible(group, "web.g[2]", &both));
        assert!(!host_volumes_feasible(
            group,
            "web.g[0]",
            &offered(&[("data", false)])
        ));
        // A CSI volume is not the host checker's business.
        let mut csi = request("ebs", false, false);
        csi.r#type = "csi".to_string();
        group.volumes.insert("v".to_string(), csi);
        assert!(host_volumes_feasible(group, "web.g[0]", &offered(&[])));
    }

    #[test]
    fn node_interpolations() {
        let job = JobBuilder::service("web")
            .group("g", 1)
            .task("t", "raw_exec")
            .group_constraint("${node.datacenter}", "=", "dc2")
            .group_constraint("${node.class}", "!=", "gpu")
            .group_constraint("${node.unique.name}", "regexp", "^node-")
            .group_constraint("${node.unique.id}", "is_set", "")
            .group_constraint("${node.pool}", "=", "default")
            .build();
        let group = &job.task_groups[0];
        let mut cache = ConstraintCache::default();
        assert!(
            static_feasibility(
                &mut cache,
                &job,
                group,
                &NodeBuilder::new("a").datacenter("dc2").build()
            )
            .is_ok()
        );
        assert!(
            static_feasibility(
                &mut cache,
                &job,
                group,
                &NodeBuilder::new("a").datacenter("dc1").build()
            )
            .is_err()
        );
        assert!(
            static_feasibility(
                &mut cache,
                &job,
                group,
                &NodeBuilder::new("a").datacenter("dc2").class("gpu").build()
            )
            .is_err()
        );
    }

    #[test]
    fn distinct_property_counts_per_value() {
        let job = JobBuilder::service("web")
            .constraint("${meta.rack}", "distinct_property", "2")
            .group("g", 4)
            .task("t", "raw_exec")
            .build();
        let properties = DistinctProperty::of(&job, &job.task_groups[0]);
        assert_eq!(properties.len(), 1);
        let node = NodeBuilder::new("a").meta("rack", "r1").build();
        let mut used = BTreeMap::new();
        assert!(properties[0].check(&node, &used).is_ok());
        used.insert("r1".to_string(), 2);
        assert_eq!(
            properties[0].check(&node, &used),
            Err("distinct_property: ${meta.rack}=r1 used by 2 allocs".to_string())
        );
        assert_eq!(
            properties[0].check(&NodeBuilder::new("b").build(), &used),
            Err("missing property \"${meta.rack}\"".to_string())
        );
    }
}
