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
    hasher.update(&service.port.to_be_bytes());
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
        .finish()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// SHA-256 (FIPS 180-4), enough for ranking; no other use.
struct Sha256 {
    state: [u32; 8],
    buffer: Vec<u8>,
    length: u64,
}

const SHA256_K: [u32; 64] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
];

impl Sha256 {
    fn new() -> Self {
        Self {
            state: [
                0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
                0x5be0cd19,
            ],
            buffer: Vec::with_capacity(64),
            length: 0,
        }
    }

    fn update(&mut self, data: &[u8]) {
        self.length = self.length.wrapping_add(data.len() as u64);
        self.buffer.extend_from_slice(data);
        let whole = self.buffer.len() / 64 * 64;
        let blocks: Vec<u8> = self.buffer.drain(..whole).collect();
        for block in blocks.chunks_exact(64) {
            self.compress(block);
        }
    }

    fn finish(mut self) -> [u8; 32] {
        let bit_length = self.length.wrapping_mul(8);
        let mut tail = vec![0x80u8];
        while (self.buffer.len() + tail.len()) % 64 != 56 {
            tail.push(0);
        }
        tail.extend_from_slice(&bit_length.to_be_bytes());
        self.buffer.extend_from_slice(&tail);
        let blocks = std::mem::take(&mut self.buffer);
        for block in blocks.chunks_exact(64) {
            self.compress(block);
        }
        let mut digest = [0u8; 32];
        for (out, word) in digest.chunks_exact_mut(4).zip(self.state) {
            out.copy_from_slice(&word.to_be_bytes());
        }
        digest
    }

    fn compress(&mut self, block: &[u8]) {
        let mut schedule = [0u32; 64];
        for (word, bytes) in schedule.iter_mut().zip(block.chunks_exact(4)) {
            *word = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        }
        for i in 16..64 {
            let s0 = schedule[i - 15].rotate_right(7)
                ^ schedule[i - 15].rotate_right(18)
                ^ (schedule[i - 15] >> 3);
            let s1 = schedule[i - 2].rotate_right(17)
                ^ schedule[i - 2].rotate_right(19)
                ^ (schedule[i - 2] >> 10);
            schedule[i] = schedule[i - 16]
                .wrapping_add(s0)
                .wrapping_add(schedule[i - 7])
                .wrapping_add(s1);
        }
        let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut h] = self.state;
        for (round_constant, word) in SHA256_K.iter().zip(schedule) {
            let s1 = e.rotate_right(6) ^ e.rotate_right(11) ^ e.rotate_right(25);
            let choice = (e & f) ^ (!e & g);
            let t1 = h
                .wrapping_add(s1)
                .wrapping_add(choice)
                .wrapping_add(*round_constant)
                .wrapping_add(word);
            let s0 = a.rotate_right(2) ^ a.rotate_right(13) ^ a.rotate_right(22);
            let majority = (a & b) ^ (a & c) ^ (b & c);
            let t2 = s0.wrapping_add(majority);
            h = g;
            g = f;
            f = e;
            e = d.wrapping_add(t1);
            d = c;
            c = b;
            b = a;
            a = t1.wrapping_add(t2);
        }
        for (state, value) in self.state.iter_mut().zip([a, b, c, d, e, f, g, h]) {
            *state = state.wrapping_add(value);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed expectation is a failed test
mod tests {
    use super::*;

    fn sha256_hex(data: &[u8]) -> String {
        let mut hasher = Sha256::new();
        hasher.update(data);
        hasher
            .finish()
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect()
    }

    #[test]
    fn sha256_matches_the_standard_vectors() {
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            sha256_hex(b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        );
        let million_a = vec![b'a'; 1_000_000];
        assert_eq!(
            sha256_hex(&million_a),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"
        );
    }

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
