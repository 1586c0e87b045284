//! Where new allocation and evaluation IDs come from. The scheduler never mints an ID from the
//! operating system: the caller passes an [`IdSource`] (the server's UUID generator, a list made
//! before the pass, or the seeded generator here for tests and replays).
//!
//! Not here: validating IDs.

use std::collections::VecDeque;

use crate::rng::SeededRng;

/// A source of fresh identifiers (UUID strings in Nomad's format). IDs must be unique across
/// passes, not only within one: two [`SeededIds`] with the same seed repeat each other, so the
/// server passes real UUIDs, and tests seed each pass differently.
pub trait IdSource {
    fn next_id(&mut self) -> String;
}

impl<F: FnMut() -> String> IdSource for F {
    fn next_id(&mut self) -> String {
        self()
    }
}

/// Deterministic UUID-v4-shaped identifiers from a seed.
#[derive(Debug, Clone)]
pub struct SeededIds {
    rng: SeededRng,
}

impl SeededIds {
    pub fn new(seed: u64) -> Self {
        // Offset the seed so IDs and node shuffles made from the same seed are unrelated.
        SeededIds {
            rng: SeededRng::new(seed ^ 0x6964_735f_7365_6564),
        }
    }
}

impl IdSource for SeededIds {
    fn next_id(&mut self) -> String {
        let high = self.rng.next_u64();
        let low = self.rng.next_u64();
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&high.to_be_bytes());
        bytes[8..].copy_from_slice(&low.to_be_bytes());
        bytes[6] = (bytes[6] & 0x0f) | 0x40;
        bytes[8] = (bytes[8] & 0x3f) | 0x80;
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        format!(
            "{}-{}-{}-{}-{}",
            &hex[0..8],
            &hex[8..12],
            &hex[12..16],
            &hex[16..20],
            &hex[20..32]
        )
    }
}

/// IDs generated ahead of the pass; once they run out, falls back to a seeded generator so a
/// pass never fails for want of IDs.
#[derive(Debug, Clone)]
pub struct PregeneratedIds {
    ids: VecDeque<String>,
    fallback: SeededIds,
}

impl PregeneratedIds {
    pub fn new(ids: impl IntoIterator<Item = String>, fallback_seed: u64) -> Self {
        PregeneratedIds {
            ids: ids.into_iter().collect(),
            fallback: SeededIds::new(fallback_seed),
        }
    }
}

impl IdSource for PregeneratedIds {
    fn next_id(&mut self) -> String {
        self.ids
            .pop_front()
            .unwrap_or_else(|| self.fallback.next_id())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_ids_are_uuid_v4_shaped_unique_and_repeatable() {
        let mut ids = SeededIds::new(3);
        let first: Vec<String> = (0..1000).map(|_| ids.next_id()).collect();
        let mut again = SeededIds::new(3);
        assert_eq!(first[0], again.next_id());
        let unique: std::collections::BTreeSet<&String> = first.iter().collect();
        assert_eq!(unique.len(), first.len());
        for id in &first {
            assert_eq!(id.len(), 36);
            assert_eq!(&id[14..15], "4");
            assert!(matches!(&id[19..20], "8" | "9" | "a" | "b"));
        }
    }

    #[test]
    fn pregenerated_then_fallback() {
        let mut ids = PregeneratedIds::new(["a".to_string(), "b".to_string()], 1);
        assert_eq!(ids.next_id(), "a");
        assert_eq!(ids.next_id(), "b");
        assert_eq!(ids.next_id().len(), 36);
        let mut counter = 0;
        let mut closure = || {
            counter += 1;
            format!("id-{counter}")
        };
        assert_eq!(IdSource::next_id(&mut closure), "id-1");
    }
}
