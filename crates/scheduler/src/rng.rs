//! The scheduler's only source of randomness: a small, seeded generator (SplitMix64) whose output
//! depends on nothing but the seed, so a plan can be replayed exactly. Used to shuffle candidate
//! nodes and to mint identifiers in tests and tools.
//!
//! Not here: anything cryptographic.

/// SplitMix64: fast, statistically decent, and stable across library upgrades (unlike a generic
/// `StdRng`, whose algorithm may change between versions).
#[derive(Debug, Clone)]
pub struct SeededRng {
    state: u64,
}

impl SeededRng {
    pub fn new(seed: u64) -> Self {
        SeededRng { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut mixed = self.state;
        mixed = (mixed ^ (mixed >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        mixed = (mixed ^ (mixed >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        mixed ^ (mixed >> 31)
    }

    /// A value in `0..bound` (`bound` > 0), without modulo bias worth caring about for shuffles.
    pub fn below(&mut self, bound: usize) -> usize {
        let wide = u128::from(self.next_u64()) * (bound as u128);
        (wide >> 64) as usize
    }

    /// Fisher–Yates shuffle.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for index in (1..items.len()).rev() {
            let other = self.below(index + 1);
            items.swap(index, other);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence_different_seed_different_sequence() {
        let first: Vec<u64> = {
            let mut rng = SeededRng::new(7);
            (0..5).map(|_| rng.next_u64()).collect()
        };
        let again: Vec<u64> = {
            let mut rng = SeededRng::new(7);
            (0..5).map(|_| rng.next_u64()).collect()
        };
        let other: Vec<u64> = {
            let mut rng = SeededRng::new(8);
            (0..5).map(|_| rng.next_u64()).collect()
        };
        assert_eq!(first, again);
        assert_ne!(first, other);
    }

    #[test]
    fn shuffle_is_a_permutation() {
        let mut items: Vec<u32> = (0..100).collect();
        SeededRng::new(1).shuffle(&mut items);
        assert_ne!(items, (0..100).collect::<Vec<_>>());
        items.sort_unstable();
        assert_eq!(items, (0..100).collect::<Vec<_>>());
        for bound in [1, 2, 3, 1000] {
            let mut rng = SeededRng::new(bound as u64);
            assert!((0..100).all(|_| rng.below(bound) < bound));
        }
    }
}
