//! Results of the service checks a client runs, in Nomad's `CheckQueryResult` shape (what
//! `GET /v1/client/allocation/<id>/checks` answers, keyed by check ID), and Nomad's check ID.
//!
//! Not here: running checks or deciding their status (the client's `checks` module does).

use serde::{Deserialize, Serialize};

use crate::job::ServiceCheck;

/// A check that passed.
pub const CHECK_SUCCESS: &str = "success";
/// A check that failed (Consul's "critical").
pub const CHECK_FAILURE: &str = "failure";
/// A check that has not run yet.
pub const CHECK_PENDING: &str = "pending";
/// A check that warned (HTTP 429, or a script exiting 1). Nomad's own provider never reports
/// it; drover reports it for the checks it runs with Consul's semantics.
pub const CHECK_WARNING: &str = "warning";

/// A check whose failures hold back deployments (`on_update` other than `ignore`).
pub const CHECK_MODE_HEALTHINESS: &str = "healthiness";
/// A check that deployments ignore (`on_update = "ignore"`).
pub const CHECK_MODE_READINESS: &str = "readiness";

/// The latest outcome of one check of an allocation.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct CheckQueryResult {
    #[serde(rename = "ID")]
    pub id: String,
    pub mode: String,
    pub status: String,
    #[serde(skip_serializing_if = "is_zero")]
    pub status_code: i64,
    pub output: String,
    /// Unix seconds.
    pub timestamp: i64,
    pub group: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub task: String,
    pub service: String,
    pub check: String,
}

fn is_zero(value: &i64) -> bool {
    *value == 0
}

/// Nomad's mode of a check: `readiness` when `on_update = "ignore"`, else `healthiness`.
pub fn check_mode(check: &ServiceCheck) -> &'static str {
    if check.on_update == "ignore" {
        CHECK_MODE_READINESS
    } else {
        CHECK_MODE_HEALTHINESS
    }
}

/// Nomad's ID of a check of an allocation: the hex SHA-256 of the allocation ID, the group and
/// the check's defining fields, so it is stable across agent restarts and changes with the check.
pub fn check_id(alloc_id: &str, group: &str, check: &ServiceCheck) -> String {
    let mut input = Vec::with_capacity(256);
    for text in [
        alloc_id,
        group,
        &check.task_name,
        &check.name,
        &check.r#type,
        &check.port_label,
        &check.on_update,
        &check.address_mode,
    ] {
        input.extend_from_slice(text.as_bytes());
    }
    input.extend_from_slice(&check.interval.as_nanos().to_le_bytes());
    input.extend_from_slice(&check.timeout.as_nanos().to_le_bytes());
    for text in [&check.protocol, &check.path, &check.method] {
        input.extend_from_slice(text.as_bytes());
    }
    input.extend_from_slice(if check.tls_skip_verify {
        b"true"
    } else {
        b"false"
    });
    sha256(&input)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

const ROUND_CONSTANTS: [u32; 64] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
];

/// SHA-256 (FIPS 180-4) of `data`; small inputs only matter here, so it is written plainly.
fn sha256(data: &[u8]) -> [u8; 32] {
    let mut state: [u32; 8] = [
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
        0x5be0cd19,
    ];
    let mut message = data.to_vec();
    let bit_length = (data.len() as u64).wrapping_mul(8);
    message.push(0x80);
    while message.len() % 64 != 56 {
        message.push(0);
    }
    message.extend_from_slice(&bit_length.to_be_bytes());
    for block in message.chunks_exact(64) {
        let mut words = [0u32; 64];
        for (index, word) in block.chunks_exact(4).enumerate() {
            words[index] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for index in 16..64 {
            let s0 = words[index - 15].rotate_right(7)
                ^ words[index - 15].rotate_right(18)
                ^ (words[index - 15] >> 3);
            let s1 = words[index - 2].rotate_right(17)
                ^ words[index - 2].rotate_right(19)
                ^ (words[index - 2] >> 10);
            words[index] = words[index - 16]
                .wrapping_add(s0)
                .wrapping_add(words[index - 7])
                .wrapping_add(s1);
        }
        let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut h] = state;
        for index in 0..64 {
            let s1 = e.rotate_right(6) ^ e.rotate_right(11) ^ e.rotate_right(25);
            let choose = (e & f) ^ (!e & g);
            let t1 = h
                .wrapping_add(s1)
                .wrapping_add(choose)
                .wrapping_add(ROUND_CONSTANTS[index])
                .wrapping_add(words[index]);
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
        for (slot, value) in state.iter_mut().zip([a, b, c, d, e, f, g, h]) {
            *slot = slot.wrapping_add(value);
        }
    }
    let mut digest = [0u8; 32];
    for (chunk, word) in digest.chunks_exact_mut(4).zip(state) {
        chunk.copy_from_slice(&word.to_be_bytes());
    }
    digest
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|byte| format!("{byte:02x}")).collect()
    }

    #[test]
    fn sha256_matches_the_standard_vectors() {
        assert_eq!(
            hex(&sha256(b"")),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            hex(&sha256(b"abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            hex(&sha256(
                b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"
            )),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        );
    }

    #[test]
    fn check_ids_are_stable_and_follow_the_check() {
        let check = ServiceCheck {
            name: "alive".into(),
            r#type: "http".into(),
            path: "/health".into(),
            ..ServiceCheck::default()
        };
        let first = check_id("a1", "web", &check);
        assert_eq!(first.len(), 64);
        assert_eq!(first, check_id("a1", "web", &check));
        assert_ne!(first, check_id("a2", "web", &check));
        let moved = ServiceCheck {
            path: "/other".into(),
            ..check
        };
        assert_ne!(first, check_id("a1", "web", &moved));
    }

    #[test]
    fn results_have_nomads_keys_in_nomads_order() {
        let result = CheckQueryResult {
            id: "x".into(),
            mode: CHECK_MODE_HEALTHINESS.into(),
            status: CHECK_SUCCESS.into(),
            output: "nomad: http ok".into(),
            group: "web".into(),
            service: "web".into(),
            check: "alive".into(),
            ..CheckQueryResult::default()
        };
        let value = serde_json::to_value(&result).unwrap();
        let keys: Vec<_> = value.as_object().unwrap().keys().cloned().collect();
        assert_eq!(
            keys,
            [
                "ID",
                "Mode",
                "Status",
                "Output",
                "Timestamp",
                "Group",
                "Service",
                "Check"
            ]
        );
    }
}
