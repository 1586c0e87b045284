//! The mesh CA: one root per keyring root key, and short-lived leaf certificates for services.
//!
//! A root's Ed25519 key is derived from its keyring root key (HKDF-SHA-256, see
//! `Keyring::derived_secrets`), and its self-signed certificate is made deterministically from
//! that key and the root key's metadata (validity from the root key's creation, ten years; the
//! serial from its ID). So the CA is made once per cluster without a second secret to store:
//! it is exactly as sealed as the keyring's root keys (by the KEK), every server of a cluster
//! makes the same certificate, and it rotates with the keyring: the active root key's CA
//! signs new leaves, and the roots of the other keys stay trusted until their keys are
//! removed, so leaves signed before a rotation keep verifying while they live.
//!
//! A new root signs leaves only once [`ROOT_PROPAGATION_NS`] has passed since its key was
//! made: until then the previous root signs, so a sidecar whose copy of the roots is not yet
//! the newest (they read them every few seconds) never meets a leaf it cannot verify.
//!
//! Leaves are ECDSA P-256, issued on request with a fresh key, for `ttl` (capped at the CA's
//! own expiry), with the service's SPIFFE ID as their only URI SAN and both TLS usages (a
//! sidecar is server to its downstreams and client to its upstreams).
//!
//! Not here: who may ask for which leaf (the agent's HTTP layer), the keyring itself.

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, PKCS_ECDSA_P256_SHA256, PKCS_ED25519, SanType, SerialNumber,
};
use rustls::pki_types::PrivatePkcs8KeyDer;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::error::MeshError;
use crate::spiffe::SpiffeId;

/// What HKDF binds a root key's mesh CA key to.
pub const CA_KEY_INFO: &[u8] = b"drover service mesh ca ed25519 key v1";

/// How long a root certificate is valid from its root key's creation.
const ROOT_VALIDITY_NS: i64 = 10 * 365 * 24 * 3600 * 1_000_000_000;

/// A leaf's validity starts this much before its issue, for clocks a little apart.
const LEAF_BACKDATE_NS: i64 = 60 * 1_000_000_000;

/// How long after its key was made a root starts signing leaves (three of the proxies'
/// reads of the roots).
pub const ROOT_PROPAGATION_NS: i64 = 15 * 1_000_000_000;

/// The default leaf TTL (`server { mesh_leaf_cert_ttl }`), as Consul's.
pub const DEFAULT_LEAF_TTL_NS: i64 = 72 * 3600 * 1_000_000_000;

/// One keyring root key as the CA needs it.
#[derive(Clone)]
pub struct RootKeyInput {
    pub key_id: String,
    /// Unix nanoseconds.
    pub create_time_ns: i64,
    /// The 32-byte secret derived for [`CA_KEY_INFO`].
    pub secret: [u8; 32],
    pub active: bool,
}

impl std::fmt::Debug for RootKeyInput {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("RootKeyInput")
            .field("key_id", &self.key_id)
            .field("active", &self.active)
            .finish_non_exhaustive()
    }
}

/// `GET /v1/agent/connect/ca/roots`, in Consul's shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct CaRoots {
    #[serde(rename = "ActiveRootID")]
    pub active_root_id: String,
    pub trust_domain: String,
    pub roots: Vec<CaRoot>,
}

/// One root certificate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct CaRoot {
    /// The keyring root key's ID.
    #[serde(rename = "ID")]
    pub id: String,
    pub name: String,
    pub serial_number: u64,
    pub not_before: String,
    pub not_after: String,
    pub root_cert: String,
    pub active: bool,
}

/// `GET /v1/agent/connect/ca/leaf/<service>`, in Consul's shape.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct LeafCert {
    pub serial_number: String,
    #[serde(rename = "CertPEM")]
    pub cert_pem: String,
    #[serde(rename = "PrivateKeyPEM")]
    pub private_key_pem: String,
    pub service: String,
    #[serde(rename = "ServiceURI")]
    pub service_uri: String,
    pub valid_after: String,
    pub valid_before: String,
}

impl std::fmt::Debug for LeafCert {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("LeafCert")
            .field("serial_number", &self.serial_number)
            .field("service_uri", &self.service_uri)
            .field("valid_before", &self.valid_before)
            .finish_non_exhaustive()
    }
}

/// One root, made.
struct Root {
    key_id: String,
    active: bool,
    params: CertificateParams,
    key: KeyPair,
    pem: String,
    serial: u64,
    not_before_ns: i64,
    not_after_ns: i64,
}

/// The mesh CA of one keyring state.
pub struct MeshCa {
    trust_domain: String,
    roots: Vec<Root>,
}

impl std::fmt::Debug for MeshCa {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("MeshCa")
            .field("trust_domain", &self.trust_domain)
            .field(
                "roots",
                &self
                    .roots
                    .iter()
                    .map(|root| &root.key_id)
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

fn datetime(unix_ns: i64) -> Result<OffsetDateTime, MeshError> {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(unix_ns))
        .map_err(|error| MeshError::Certificate(format!("time out of range: {error}")))
}

/// RFC 3339 in UTC, as Consul prints certificate times.
pub fn rfc3339(unix_ns: i64) -> String {
    drover_structs::time::Timestamp::from_unix_nanos(unix_ns - unix_ns.rem_euclid(1_000_000_000))
        .to_rfc3339_nanos()
}

/// A PKCS#8 v1 document of an Ed25519 key with this seed (RFC 8410's fixed prefix).
fn ed25519_pkcs8(seed: &[u8; 32]) -> Vec<u8> {
    const PREFIX: [u8; 16] = [
        0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04,
        0x20,
    ];
    let mut document = PREFIX.to_vec();
    document.extend_from_slice(seed);
    document
}

/// Colon-separated hex, as Consul prints serial numbers.
fn colon_hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

impl MeshCa {
    /// The CA of `keys` (every keyring root key) for `trust_domain`.
    pub fn new(trust_domain: &str, keys: &[RootKeyInput]) -> Result<Self, MeshError> {
        let mut roots = Vec::with_capacity(keys.len());
        for input in keys {
            let pkcs8 = ed25519_pkcs8(&input.secret);
            let key = KeyPair::from_pkcs8_der_and_sign_algo(
                &PrivatePkcs8KeyDer::from(pkcs8.as_slice()),
                &PKCS_ED25519,
            )?;
            // The serial: the first 8 bytes of the key ID's SHA-256, top bit clear (positive).
            let digest = <sha2::Sha256 as sha2::Digest>::digest(input.key_id.as_bytes());
            let mut serial_bytes = [0u8; 8];
            serial_bytes.copy_from_slice(&digest[..8]);
            serial_bytes[0] &= 0x7f;
            let serial = u64::from_be_bytes(serial_bytes);
            let not_before_ns = input.create_time_ns;
            let not_after_ns = input.create_time_ns.saturating_add(ROOT_VALIDITY_NS);
            let mut params = CertificateParams::default();
            params.not_before = datetime(not_before_ns)?;
            params.not_after = datetime(not_after_ns)?;
            params.serial_number = Some(SerialNumber::from_slice(&serial_bytes));
            params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            params.key_usages = vec![
                KeyUsagePurpose::KeyCertSign,
                KeyUsagePurpose::CrlSign,
                KeyUsagePurpose::DigitalSignature,
            ];
            let mut name = DistinguishedName::new();
            name.push(
                DnType::CommonName,
                format!(
                    "drover mesh CA {}",
                    input.key_id.get(..8).unwrap_or(&input.key_id)
                ),
            );
            params.distinguished_name = name;
            params.subject_alt_names = vec![SanType::URI(
                format!("spiffe://{trust_domain}")
                    .try_into()
                    .map_err(|_| MeshError::Certificate("trust domain is not ASCII".to_owned()))?,
            )];
            let pem = params.self_signed(&key)?.pem();
            roots.push(Root {
                key_id: input.key_id.clone(),
                active: input.active,
                params,
                key,
                pem,
                serial,
                not_before_ns,
                not_after_ns,
            });
        }
        Ok(MeshCa {
            trust_domain: trust_domain.to_owned(),
            roots,
        })
    }

    pub fn trust_domain(&self) -> &str {
        &self.trust_domain
    }

    /// Every root, the active one named.
    pub fn roots(&self) -> CaRoots {
        CaRoots {
            active_root_id: self
                .roots
                .iter()
                .find(|root| root.active)
                .map(|root| root.key_id.clone())
                .unwrap_or_default(),
            trust_domain: self.trust_domain.clone(),
            roots: self
                .roots
                .iter()
                .map(|root| CaRoot {
                    id: root.key_id.clone(),
                    name: format!("drover mesh CA {}", root.key_id),
                    serial_number: root.serial,
                    not_before: rfc3339(root.not_before_ns),
                    not_after: rfc3339(root.not_after_ns),
                    root_cert: root.pem.clone(),
                    active: root.active,
                })
                .collect(),
        }
    }

    /// A new leaf for `service` in `namespace`/`datacenter`, signed by the active root, valid
    /// from a minute before `now_ns` for `ttl_ns` (no longer than the root).
    pub fn issue_leaf(
        &self,
        namespace: &str,
        datacenter: &str,
        service: &str,
        now_ns: i64,
        ttl_ns: i64,
    ) -> Result<LeafCert, MeshError> {
        let active = self
            .roots
            .iter()
            .find(|root| root.active)
            .ok_or(MeshError::NoActiveRoot)?;
        // A root made a moment ago may not have reached every sidecar yet: the newest of the
        // others signs meanwhile (the active one when there is none).
        let root = if now_ns.saturating_sub(active.not_before_ns) < ROOT_PROPAGATION_NS {
            self.roots
                .iter()
                .filter(|root| !root.active && root.not_before_ns <= now_ns)
                .max_by_key(|root| root.not_before_ns)
                .unwrap_or(active)
        } else {
            active
        };
        let id = SpiffeId::service(&self.trust_domain, namespace, datacenter, service)?;
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
        let mut serial = [0u8; 16];
        rand::RngCore::fill_bytes(&mut rand::thread_rng(), &mut serial);
        serial[0] &= 0x7f;
        let valid_after_ns = now_ns
            .saturating_sub(LEAF_BACKDATE_NS)
            .max(root.not_before_ns);
        let valid_before_ns = now_ns.saturating_add(ttl_ns.max(1)).min(root.not_after_ns);
        let mut params = CertificateParams::default();
        params.not_before = datetime(valid_after_ns)?;
        params.not_after = datetime(valid_before_ns)?;
        params.serial_number = Some(SerialNumber::from_slice(&serial));
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyAgreement,
        ];
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        params.use_authority_key_identifier_extension = true;
        let mut name = DistinguishedName::new();
        name.push(DnType::CommonName, service);
        params.distinguished_name = name;
        params.subject_alt_names =
            vec![SanType::URI(id.to_string().try_into().map_err(|_| {
                MeshError::Certificate("SPIFFE ID is not ASCII".to_owned())
            })?)];
        let issuer = Issuer::from_params(&root.params, &root.key);
        let certificate = params.signed_by(&key, &issuer)?;
        Ok(LeafCert {
            serial_number: colon_hex(&serial),
            cert_pem: certificate.pem(),
            private_key_pem: key.serialize_pem(),
            service: service.to_owned(),
            service_uri: id.to_string(),
            valid_after: rfc3339(valid_after_ns),
            valid_before: rfc3339(valid_before_ns),
        })
    }
}

#[cfg(test)]
mod tests {
    use x509_cert::der::Decode as _;

    use super::*;
    use crate::spiffe::certificate_spiffe_id;

    fn pem_certificates(
        pem: &str,
    ) -> Result<Vec<rustls::pki_types::CertificateDer<'static>>, String> {
        use rustls::pki_types::pem::PemObject as _;
        rustls::pki_types::CertificateDer::pem_slice_iter(pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|error| error.to_string())
    }

    pub(crate) fn key(id: &str, byte: u8, active: bool) -> RootKeyInput {
        RootKeyInput {
            key_id: id.to_owned(),
            create_time_ns: 1_700_000_000_000_000_000,
            secret: [byte; 32],
            active,
        }
    }

    #[test]
    fn the_same_root_keys_make_the_same_roots_on_every_server() {
        let keys = [key("k1", 1, false), key("k2", 2, true)];
        let one = MeshCa::new("c1.consul", &keys).unwrap().roots();
        let two = MeshCa::new("c1.consul", &keys).unwrap().roots();
        assert_eq!(one, two);
        assert_eq!(one.active_root_id, "k2");
        assert_eq!(one.trust_domain, "c1.consul");
        assert_eq!(one.roots.len(), 2);
        assert_ne!(one.roots[0].root_cert, one.roots[1].root_cert);
        // Another secret (another cluster's keyring) makes another root.
        let other = MeshCa::new("c1.consul", &[key("k2", 3, true)])
            .unwrap()
            .roots();
        assert_ne!(other.roots[0].root_cert, one.roots[1].root_cert);
    }

    #[test]
    fn a_leaf_names_its_service_and_lives_for_its_ttl() {
        let ca = MeshCa::new("c1.consul", &[key("k1", 1, true)]).unwrap();
        let now = 1_800_000_000_000_000_000;
        let leaf = ca
            .issue_leaf("default", "dc1", "api", now, 30_000_000_000)
            .unwrap();
        assert_eq!(
            leaf.service_uri,
            "spiffe://c1.consul/ns/default/dc/dc1/svc/api"
        );
        assert_eq!(leaf.valid_before, rfc3339(now + 30_000_000_000));
        assert_eq!(leaf.valid_after, rfc3339(now - LEAF_BACKDATE_NS));
        let chain = pem_certificates(&leaf.cert_pem).unwrap();
        assert_eq!(chain.len(), 1);
        let id = certificate_spiffe_id(&chain[0]).unwrap();
        assert_eq!(id.service, "api");
        assert_eq!(id.datacenter, "dc1");
        assert!(leaf.private_key_pem.contains("PRIVATE KEY"));
        // Two leaves never share a key or a serial.
        let again = ca
            .issue_leaf("default", "dc1", "api", now, 30_000_000_000)
            .unwrap();
        assert_ne!(again.serial_number, leaf.serial_number);
        assert_ne!(again.private_key_pem, leaf.private_key_pem);
    }

    #[test]
    fn a_new_root_signs_only_once_the_sidecars_can_have_read_it() {
        let made = 1_800_000_000_000_000_000;
        let old = RootKeyInput {
            create_time_ns: made - 3_600_000_000_000,
            ..key("old", 1, false)
        };
        let new = RootKeyInput {
            create_time_ns: made,
            ..key("new", 2, true)
        };
        let ca = MeshCa::new("c1.consul", &[old.clone(), new.clone()]).unwrap();
        let roots = ca.roots();
        let signer = |now: i64| {
            let leaf = ca
                .issue_leaf("default", "dc1", "api", now, 60_000_000_000)
                .unwrap();
            let chain = pem_certificates(&leaf.cert_pem).unwrap();
            let issued = x509_cert::Certificate::from_der(&chain[0]).unwrap();
            roots
                .roots
                .iter()
                .find(|root| {
                    let root_der = pem_certificates(&root.root_cert).unwrap();
                    let root_cert = x509_cert::Certificate::from_der(&root_der[0]).unwrap();
                    root_cert.tbs_certificate().subject() == issued.tbs_certificate().issuer()
                })
                .unwrap()
                .id
                .clone()
        };
        assert_eq!(signer(made + 1_000_000_000), "old");
        assert_eq!(signer(made + ROOT_PROPAGATION_NS), "new");
        // The first root of a cluster signs at once.
        let first = MeshCa::new("c1.consul", &[new]).unwrap();
        assert!(first.issue_leaf("default", "dc1", "api", made, 1).is_ok());
    }

    #[test]
    fn a_leaf_is_refused_without_an_active_root_or_with_a_bad_name() {
        let ca = MeshCa::new("c1.consul", &[key("k1", 1, false)]).unwrap();
        assert!(matches!(
            ca.issue_leaf("default", "dc1", "api", 0, 1),
            Err(MeshError::NoActiveRoot)
        ));
        let ca = MeshCa::new("c1.consul", &[key("k1", 1, true)]).unwrap();
        let error = ca
            .issue_leaf("default", "dc1", "a/b", 1_800_000_000_000_000_000, 1)
            .unwrap_err();
        assert!(error.to_string().contains("svc/a/b"), "{error}");
    }
}
