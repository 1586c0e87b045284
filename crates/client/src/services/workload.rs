//! One workload's services as catalog registrations: a workload is a task (its `service` blocks)
//! or a group (the group's `service` blocks, owned by `group-<name>`), as in Nomad's
//! `serviceregistration.WorkloadServices`.
//!
//! Nomad's rules, applied in order: every `${…}` of a service's name, port, address, tags,
//! canary tags, meta, canary meta and tagged addresses is interpolated with the workload's
//! environment (`NOMAD_*`, `node.*`, `attr.*`, `meta.*`, `env[…]`); a canary allocation
//! advertises `canary_tags` when it has any, else `tags`; the address and port follow
//! `address_mode` ([`resolve_service_address`]), a host-mode numeric port taking the node's
//! address. `enable_tag_override` only tells Consul that others may rewrite the tags; the native
//! catalog has nothing of the kind, so it is accepted and changes nothing (as in Nomad).
//!
//! **Not** here: sending the registrations ([`super::sync`]), checks.

use drover_structs::service_registration::{
    AddressError, DriverNetwork, resolve_service_address, service_registration_id,
};
use drover_structs::{Allocation, Node, Service, ServiceRegistration};

use crate::taskenv::TaskEnv;

/// The node attribute holding the node's address (the address of a host-mode numeric port).
pub const NODE_ADDRESS_ATTRIBUTE: &str = "unique.network.ip-address";

/// Why a workload's registrations cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServiceBuildError {
    #[error("service {service:?}: {source}")]
    Address {
        service: String,
        #[source]
        source: AddressError,
    },
}

/// The owner of a group's services in their registration IDs.
pub fn group_owner(group: &str) -> String {
    format!("group-{group}")
}

/// One workload and what its registrations are built from.
#[derive(Debug, Clone, Copy)]
pub struct ServiceWorkload<'a> {
    pub alloc: &'a Allocation,
    pub node: &'a Node,
    /// The task whose services these are; `None` for the group's.
    pub task: Option<&'a str>,
    pub services: &'a [Service],
    /// The environment `${…}` is interpolated with.
    pub env: &'a TaskEnv,
    /// The driver's own network, for `address_mode = "driver"` (none for raw_exec and exec).
    pub driver_network: Option<&'a DriverNetwork>,
}

impl ServiceWorkload<'_> {
    /// The task's name, or `group-<group>`.
    pub fn owner(&self) -> String {
        match self.task {
            Some(task) => task.to_owned(),
            None => group_owner(&self.alloc.task_group),
        }
    }

    /// Whether the allocation is a canary of a deployment.
    pub fn is_canary(&self) -> bool {
        self.alloc
            .deployment_status
            .as_ref()
            .is_some_and(|status| status.canary)
    }

    /// The registration IDs of the workload's services. Never fails, so a deregistration can
    /// always name what a registration of the same definition would have written.
    pub fn registration_ids(&self) -> Vec<String> {
        let owner = self.owner();
        self.services
            .iter()
            .map(|service| {
                service_registration_id(
                    &self.alloc.id,
                    &owner,
                    &self.env.interpolate(&service.name),
                    &self.env.interpolate(&service.port_label),
                )
            })
            .collect()
    }

    /// The catalog registrations of the workload's services.
    pub fn registrations(&self) -> Result<Vec<ServiceRegistration>, ServiceBuildError> {
        let owner = self.owner();
        let canary = self.is_canary();
        self.services
            .iter()
            .map(|service| {
                let service = interpolate_service(self.env, service);
                let resolved = resolve_service_address(
                    self.alloc,
                    self.task,
                    &service.port_label,
                    &service.address_mode,
                    &service.address,
                    self.driver_network,
                )
                .map_err(|source| ServiceBuildError::Address {
                    service: service.name.clone(),
                    source,
                })?;
                let address = if resolved.address.is_empty() {
                    self.node
                        .attributes
                        .get(NODE_ADDRESS_ATTRIBUTE)
                        .cloned()
                        .unwrap_or_default()
                } else {
                    resolved.address
                };
                let tags = if canary && !service.canary_tags.is_empty() {
                    service.canary_tags.clone()
                } else {
                    service.tags.clone()
                };
                Ok(ServiceRegistration {
                    id: service_registration_id(
                        &self.alloc.id,
                        &owner,
                        &service.name,
                        &service.port_label,
                    ),
                    service_name: service.name.clone(),
                    namespace: self.alloc.namespace.clone(),
                    node_id: self.node.id.clone(),
                    datacenter: self.node.datacenter.clone(),
                    job_id: self.alloc.job_id.clone(),
                    alloc_id: self.alloc.id.clone(),
                    tags,
                    address,
                    port: resolved.port,
                    ..ServiceRegistration::default()
                })
            })
            .collect()
    }
}

/// A service with every `${…}` of its advertised values interpolated (Nomad's
/// `InterpolateServices`, without the checks: they are run, and interpolated, by the check
/// runner).
pub fn interpolate_service(env: &TaskEnv, service: &Service) -> Service {
    let list = |values: &[String]| -> Vec<String> {
        values.iter().map(|value| env.interpolate(value)).collect()
    };
    let map = |values: &std::collections::BTreeMap<String, String>| {
        values
            .iter()
            .map(|(key, value)| (env.interpolate(key), env.interpolate(value)))
            .collect()
    };
    Service {
        name: env.interpolate(&service.name),
        port_label: env.interpolate(&service.port_label),
        address: env.interpolate(&service.address),
        tags: list(&service.tags),
        canary_tags: list(&service.canary_tags),
        meta: map(&service.meta),
        canary_meta: map(&service.canary_meta),
        tagged_addresses: map(&service.tagged_addresses),
        ..service.clone()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use drover_structs::{
        AllocDeploymentStatus, AllocatedPortMapping, AllocatedResources, Job, TaskGroup,
    };

    use super::*;

    fn alloc() -> Allocation {
        let mut resources = AllocatedResources::default();
        resources.shared.ports.push(AllocatedPortMapping {
            label: "http".into(),
            value: 25123,
            to: 0,
            host_ip: "192.168.1.7".into(),
        });
        Allocation {
            id: "a1b2".into(),
            namespace: "prod".into(),
            job_id: "web".into(),
            task_group: "frontend".into(),
            allocated_resources: Some(resources),
            job: Some(std::sync::Arc::new(Job {
                id: "web".into(),
                task_groups: vec![TaskGroup {
                    name: "frontend".into(),
                    ..TaskGroup::default()
                }],
                ..Job::default()
            })),
            ..Allocation::default()
        }
    }

    fn node() -> Node {
        Node {
            id: "node-1".into(),
            datacenter: "dc2".into(),
            attributes: BTreeMap::from([
                (NODE_ADDRESS_ATTRIBUTE.to_owned(), "10.1.1.1".to_owned()),
                ("kernel.name".to_owned(), "linux".to_owned()),
            ]),
            meta: BTreeMap::from([("rack".to_owned(), "r7".to_owned())]),
            ..Node::default()
        }
    }

    fn env() -> TaskEnv {
        TaskEnv {
            env: BTreeMap::from([
                ("NOMAD_JOB_NAME".to_owned(), "web".to_owned()),
                ("NOMAD_ALLOC_INDEX".to_owned(), "3".to_owned()),
                ("NOMAD_PORT_label".to_owned(), "http".to_owned()),
            ]),
            node_values: BTreeMap::from([
                ("attr.kernel.name".to_owned(), "linux".to_owned()),
                ("meta.rack".to_owned(), "r7".to_owned()),
                ("node.datacenter".to_owned(), "dc2".to_owned()),
            ]),
        }
    }

    fn service(name: &str, port: &str) -> Service {
        Service {
            name: name.into(),
            port_label: port.into(),
            ..Service::default()
        }
    }

    #[test]
    fn a_task_service_is_interpolated_and_filled_from_the_alloc_and_node() {
        let (alloc, node, env) = (alloc(), node(), env());
        let services = [Service {
            tags: vec![
                "idx-${NOMAD_ALLOC_INDEX}".into(),
                "${attr.kernel.name}".into(),
                "${meta.rack}".into(),
                "${env[\"NOMAD_JOB_NAME\"]}".into(),
                "${unknown.thing}".into(),
            ],
            enable_tag_override: true,
            provider: "nomad".into(),
            ..service("${NOMAD_JOB_NAME}-api", "${NOMAD_PORT_label}")
        }];
        let workload = ServiceWorkload {
            alloc: &alloc,
            node: &node,
            task: Some("server"),
            services: &services,
            env: &env,
            driver_network: None,
        };
        let registrations = workload.registrations().unwrap();
        assert_eq!(
            registrations,
            vec![ServiceRegistration {
                id: "_nomad-task-a1b2-server-web-api-http".into(),
                service_name: "web-api".into(),
                namespace: "prod".into(),
                node_id: "node-1".into(),
                datacenter: "dc2".into(),
                job_id: "web".into(),
                alloc_id: "a1b2".into(),
                tags: vec![
                    "idx-3".into(),
                    "linux".into(),
                    "r7".into(),
                    "web".into(),
                    "${unknown.thing}".into()
                ],
                address: "192.168.1.7".into(),
                port: 25123,
                ..ServiceRegistration::default()
            }]
        );
        assert_eq!(
            workload.registration_ids(),
            vec!["_nomad-task-a1b2-server-web-api-http".to_owned()]
        );
    }

    #[test]
    fn group_services_are_owned_by_the_group_and_a_numeric_port_takes_the_node_address() {
        let (alloc, node, env) = (alloc(), node(), env());
        let services = [service("frontend", "8080")];
        let workload = ServiceWorkload {
            alloc: &alloc,
            node: &node,
            task: None,
            services: &services,
            env: &env,
            driver_network: None,
        };
        let registrations = workload.registrations().unwrap();
        assert_eq!(
            registrations[0].id,
            "_nomad-task-a1b2-group-frontend-frontend-8080"
        );
        assert_eq!(
            (registrations[0].address.as_str(), registrations[0].port),
            ("10.1.1.1", 8080)
        );
    }

    #[test]
    fn a_canary_advertises_its_canary_tags_when_it_has_some() {
        let (mut alloc, node, env) = (alloc(), node(), env());
        let services = [
            Service {
                tags: vec!["live".into()],
                canary_tags: vec!["canary-${NOMAD_ALLOC_INDEX}".into()],
                ..service("a", "http")
            },
            Service {
                tags: vec!["live".into()],
                ..service("b", "http")
            },
        ];
        let tags = |alloc: &Allocation| -> Vec<Vec<String>> {
            ServiceWorkload {
                alloc,
                node: &node,
                task: Some("t"),
                services: &services,
                env: &env,
                driver_network: None,
            }
            .registrations()
            .unwrap()
            .into_iter()
            .map(|registration| registration.tags)
            .collect()
        };
        assert_eq!(tags(&alloc), vec![vec!["live"], vec!["live"]]);
        alloc.deployment_status = Some(AllocDeploymentStatus {
            canary: true,
            ..AllocDeploymentStatus::default()
        });
        assert_eq!(tags(&alloc), vec![vec!["canary-3"], vec!["live"]]);
    }

    #[test]
    fn an_unknown_port_label_names_the_service() {
        let (alloc, node, env) = (alloc(), node(), env());
        let services = [service("api", "grpc")];
        let workload = ServiceWorkload {
            alloc: &alloc,
            node: &node,
            task: Some("t"),
            services: &services,
            env: &env,
            driver_network: None,
        };
        let error = workload.registrations().unwrap_err();
        assert_eq!(
            error.to_string(),
            "service \"api\": invalid port \"grpc\": port label not found"
        );
        // The IDs are still known, for a deregistration.
        assert_eq!(
            workload.registration_ids(),
            vec!["_nomad-task-a1b2-t-api-grpc".to_owned()]
        );
    }

    #[test]
    fn interpolation_covers_meta_and_tagged_addresses() {
        let env = env();
        let interpolated = interpolate_service(
            &env,
            &Service {
                address: "${attr.kernel.name}.internal".into(),
                meta: BTreeMap::from([("rack".into(), "${meta.rack}".into())]),
                canary_meta: BTreeMap::from([("i".into(), "${NOMAD_ALLOC_INDEX}".into())]),
                tagged_addresses: BTreeMap::from([("lan".into(), "${node.datacenter}".into())]),
                ..service("x", "http")
            },
        );
        assert_eq!(interpolated.address, "linux.internal");
        assert_eq!(interpolated.meta["rack"], "r7");
        assert_eq!(interpolated.canary_meta["i"], "3");
        assert_eq!(interpolated.tagged_addresses["lan"], "dc2");
    }
}
