//! How the built-in service catalog answers reads, with Nomad's wire shapes: the list of
//! service names per namespace with the union of their tags ([`service_list`]), and the
//! `choose=<n>|<key>` selection of `GET /v1/service/<name>` ([`choose_services`]), Nomad's
//! rendezvous hashing (SHA-256 over the registration and the caller's key), so that one caller
//! keeps getting the same subset while the registrations stay the same.
//!
//! Not here: storing registrations (the state store) or routing requests (the API).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::ServiceRegistration;
use crate::lenient::wire_struct;
use sha2::{Digest, Sha256};

wire_struct! {
    /// One service name of a namespace and every tag its registrations carry (Nomad's
    /// `ServiceRegistrationStub`).
    pub struct ServiceRegistrationStub {
        pub service_name: String,
        pub tags: Vec<String>,
    }
}

wire_struct! {
    /// The services of one namespace (Nomad's `ServiceRegistrationListStub`), an item of
    /// `GET /v1/services`.
    pub struct ServiceRegistrationListStub {
        pub namespace: String,
        pub services: Vec<ServiceRegistrationStub>,
    }
}

/// Groups registrations by namespace, then by service name, with the union of their tags.
/// Namespaces, names and tags come out sorted; a namespace without registrations is absent.
pub fn service_list<'a>(
    registrations: impl IntoIterator<Item = &'a ServiceRegistration>,
) -> Vec<ServiceRegistrationListStub> {
    let mut grouped: BTreeMap<&str, BTreeMap<&str, BTreeSet<&str>>> = BTreeMap::new();
    for registration in registrations {
        grouped
            .entry(registration.namespace.as_str())
            .or_default()
            .entry(registration.service_name.as_str())
            .or_default()
            .extend(registration.tags.iter().map(String::as_str));
    }
    grouped
        .into_iter()
        .map(|(namespace, services)| ServiceRegistrationListStub {
            namespace: namespace.to_owned(),
            services: services
                .into_iter()
                .map(|(name, tags)| ServiceRegistrationStub {
                    service_name: name.to_owned(),
                    tags: tags.into_iter().map(str::to_owned).collect(),
                })
                .collect(),
        })
        .collect()
}

/// A `choose` parameter that is not `<number>|<key>` with a non-empty key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MalformedChoose;

impl fmt::Display for MalformedChoose {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("choose parameter is not formatted correctly")
    }
}

impl std::error::Error for MalformedChoose {}

/// Picks at most `n` registrations for the caller named by `key`, given `parameter` as
/// `<n>|<key>`: each registration is ranked by the hash of itself and the key, lowest first.
pub fn choose_services(
    services: Vec<ServiceRegistration>,
    parameter: &str,
) -> Result<Vec<ServiceRegistration>, MalformedChoose> {
    let (count, key) = parameter.split_once('|').ok_or(MalformedChoose)?;
    let count: i64 = count.parse().map_err(|_| MalformedChoose)?;
    if key.is_empty() {
        return Err(MalformedChoose);
    }
    let mut ranked: Vec<(String, ServiceRegistration)> = services
        .into_iter()
        .map(|service| (rendezvous_hash(&service, key), service))
        .collect();
    // Stable, as Nomad's sort: equal hashes keep the catalog's order.
    ranked.sort_by(|one, two| one.0.cmp(&two.0));
    let count = usize::try_from(count.max(0)).unwrap_or(usize::MAX);
    Ok(ranked
        .into_iter()
        .take(count)
        .map(|(_, service)| service)
        .collect())
}

/// The hex SHA-256 of the port (8 bytes, big-endian), the alloc ID, ID, namespace, address,
/// service name, each tag and `key`, as Nomad's `HashWith`.
pub fn rendezvous_hash(service: &ServiceRegistration, key: &str) -> String {
    let mut hasher = Sha256::new();
    // Go converts the int port to uint64: a negative port is its two's complement.
    hasher.update(service.port.to_be_bytes());
    hasher.update(service.alloc_id.as_bytes());
    hasher.update(service.id.as_bytes());
    hasher.update(service.namespace.as_bytes());
    hasher.update(service.address.as_bytes());
    hasher.update(service.service_name.as_bytes());
    for tag in &service.tags {
        hasher.update(tag.as_bytes());
    }
    hasher.update(key.as_bytes());
    hasher
        .finalize()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed expectation is a failed test
mod tests {
    use super::*;

    fn registration(id: &str, port: i64) -> ServiceRegistration {
        ServiceRegistration {
            id: id.to_owned(),
            service_name: "web".to_owned(),
            namespace: "default".to_owned(),
            alloc_id: format!("alloc-{id}"),
            address: "10.0.0.1".to_owned(),
            port,
            tags: vec!["a".to_owned()],
            ..ServiceRegistration::default()
        }
    }

    #[test]
    fn choose_ranks_by_the_hash_of_each_registration_and_the_key() {
        let services: Vec<ServiceRegistration> = (0..5)
            .map(|i| registration(&format!("s{i}"), 8000 + i))
            .collect();
        let chosen = choose_services(services.clone(), "3|caller-1").unwrap();
        assert_eq!(chosen.len(), 3);
        let mut hashes: Vec<(String, String)> = services
            .iter()
            .map(|s| (rendezvous_hash(s, "caller-1"), s.id.clone()))
            .collect();
        hashes.sort();
        let expected: Vec<String> = hashes.into_iter().take(3).map(|(_, id)| id).collect();
        let got: Vec<String> = chosen.iter().map(|s| s.id.clone()).collect();
        assert_eq!(got, expected);
        // Stable for the same key, whatever the input order.
        let mut reversed = services.clone();
        reversed.reverse();
        let again: Vec<String> = choose_services(reversed, "3|caller-1")
            .unwrap()
            .iter()
            .map(|s| s.id.clone())
            .collect();
        assert_eq!(again, got);
        // More than there are: all of them.
        assert_eq!(choose_services(services, "9|k").unwrap().len(), 5);
    }

    #[test]
    fn choose_refuses_a_malformed_parameter() {
        for bad in ["3", "x|key", "3|", ""] {
            assert_eq!(
                choose_services(vec![registration("a", 1)], bad),
                Err(MalformedChoose),
                "{bad}"
            );
        }
    }

    #[test]
    fn the_list_groups_names_per_namespace_with_the_union_of_tags() {
        let mut one = registration("1", 1);
        one.tags = vec!["b".to_owned(), "a".to_owned()];
        let mut two = registration("2", 2);
        two.tags = vec!["c".to_owned(), "a".to_owned()];
        let mut other = registration("3", 3);
        other.namespace = "prod".to_owned();
        other.service_name = "db".to_owned();
        other.tags = Vec::new();
        let list = service_list([&one, &two, &other]);
        assert_eq!(
            serde_json::to_value(&list).unwrap(),
            serde_json::json!([
                {"Namespace": "default", "Services": [{"ServiceName": "web", "Tags": ["a", "b", "c"]}]},
                {"Namespace": "prod", "Services": [{"ServiceName": "db", "Tags": []}]}
            ])
        );
    }
}
