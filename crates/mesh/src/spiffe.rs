//! SPIFFE identities as Consul writes them for services:
//! `spiffe://<trust domain>/ns/<namespace>/dc/<datacenter>/svc/<service>`, and reading the one
//! a certificate carries (its URI subject alternative name).
//!
//! The trust domain is `<cluster ID>.consul`, Consul's own form (its cluster ID is a UUID, as
//! drover's is), so tools that read Consul's SPIFFE IDs read drover's.

use std::fmt;

use x509_cert::der::Decode as _;
use x509_cert::der::oid::AssociatedOid as _;
use x509_cert::ext::pkix::SubjectAltName;
use x509_cert::ext::pkix::name::GeneralName;

use crate::error::MeshError;

/// The trust domain of the cluster `cluster_id`.
pub fn trust_domain(cluster_id: &str) -> String {
    format!("{cluster_id}.consul")
}

/// A service's SPIFFE ID.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SpiffeId {
    pub trust_domain: String,
    pub namespace: String,
    pub datacenter: String,
    pub service: String,
}

impl fmt::Display for SpiffeId {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            formatter,
            "spiffe://{}/ns/{}/dc/{}/svc/{}",
            self.trust_domain, self.namespace, self.datacenter, self.service
        )
    }
}

/// Whether `part` may stand in a SPIFFE path segment or trust domain: the characters
/// namespaces, datacenters and service names may hold.
fn valid_part(part: &str) -> bool {
    !part.is_empty()
        && part
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.'))
}

impl SpiffeId {
    /// The ID of `service`, checking every part.
    pub fn service(
        trust_domain: &str,
        namespace: &str,
        datacenter: &str,
        service: &str,
    ) -> Result<Self, MeshError> {
        let id = SpiffeId {
            trust_domain: trust_domain.to_owned(),
            namespace: namespace.to_owned(),
            datacenter: datacenter.to_owned(),
            service: service.to_owned(),
        };
        for part in [trust_domain, namespace, datacenter, service] {
            if !valid_part(part) {
                return Err(MeshError::SpiffeId {
                    id: id.to_string(),
                    reason: "a part is empty or holds a character other than letters, digits, '-', '_' and '.'",
                });
            }
        }
        Ok(id)
    }

    /// Reads a service's SPIFFE ID.
    pub fn parse(uri: &str) -> Result<Self, MeshError> {
        let error = |reason| MeshError::SpiffeId {
            id: uri.to_owned(),
            reason,
        };
        let rest = uri
            .strip_prefix("spiffe://")
            .ok_or_else(|| error("it does not start with spiffe://"))?;
        let parts: Vec<&str> = rest.split('/').collect();
        match parts.as_slice() {
            [
                trust_domain,
                "ns",
                namespace,
                "dc",
                datacenter,
                "svc",
                service,
            ] => Self::service(trust_domain, namespace, datacenter, service)
                .map_err(|_| error("a part is empty or holds a character not allowed")),
            _ => Err(error(
                "expected spiffe://<trust domain>/ns/<namespace>/dc/<dc>/svc/<service>",
            )),
        }
    }
}

/// The URIs of a DER certificate's subject alternative names.
pub fn certificate_uris(der: &[u8]) -> Result<Vec<String>, MeshError> {
    let certificate = x509_cert::Certificate::from_der(der)
        .map_err(|error| MeshError::Certificate(format!("cannot parse: {error}")))?;
    let mut uris = Vec::new();
    for extension in certificate
        .tbs_certificate()
        .extensions()
        .map(|extensions| extensions.as_slice())
        .unwrap_or_default()
    {
        if extension.extn_id != SubjectAltName::OID {
            continue;
        }
        let names = SubjectAltName::from_der(extension.extn_value.as_bytes()).map_err(|error| {
            MeshError::Certificate(format!(
                "cannot parse its subject alternative names: {error}"
            ))
        })?;
        for name in names.0 {
            if let GeneralName::UniformResourceIdentifier(uri) = name {
                uris.push(uri.to_string());
            }
        }
    }
    Ok(uris)
}

/// The one service SPIFFE ID a DER certificate carries.
pub fn certificate_spiffe_id(der: &[u8]) -> Result<SpiffeId, MeshError> {
    let uris = certificate_uris(der)?;
    let mut spiffe = uris.iter().filter(|uri| uri.starts_with("spiffe://"));
    match (spiffe.next(), spiffe.next()) {
        (Some(uri), None) => SpiffeId::parse(uri),
        (None, _) => Err(MeshError::Certificate(
            "the certificate carries no SPIFFE ID".to_owned(),
        )),
        (Some(_), Some(_)) => Err(MeshError::Certificate(
            "the certificate carries more than one SPIFFE ID".to_owned(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_written_and_read_as_consul_writes_it() {
        let id = SpiffeId::service("c0ffee.consul", "default", "dc1", "api").unwrap();
        assert_eq!(
            id.to_string(),
            "spiffe://c0ffee.consul/ns/default/dc/dc1/svc/api"
        );
        assert_eq!(SpiffeId::parse(&id.to_string()).unwrap(), id);
    }

    #[test]
    fn malformed_ids_are_refused_naming_what_is_wrong() {
        for bad in [
            "http://c.consul/ns/default/dc/dc1/svc/api",
            "spiffe://c.consul/ns/default/dc/dc1/svc",
            "spiffe://c.consul/ns/default/dc/dc1/svc/api/extra",
            "spiffe://c.consul/ns//dc/dc1/svc/api",
            "spiffe://c.consul/ns/default/dc/dc1/svc/a b",
            "spiffe://c.consul/ns/default/dc/dc1/agent/api",
        ] {
            let error = SpiffeId::parse(bad).unwrap_err().to_string();
            assert!(error.contains(bad), "{error}");
        }
    }
}
