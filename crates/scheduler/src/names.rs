//! Allocation names `<job>.<group>[<index>]` and the index bookkeeping the reconciler uses to
//! choose which indexes to place (lowest free first) and which to stop (highest first).
//!
//! Not here: deciding *how many* to place or stop.

use std::collections::{BTreeMap, BTreeSet};

/// The name of allocation `index` of `group` in `job`.
pub fn alloc_name(job_id: &str, group: &str, index: u64) -> String {
    format!("{job_id}.{group}[{index}]")
}

/// The index in an allocation name, or 0 when the name does not have the expected shape (as
/// Nomad reads it).
pub fn alloc_index_from_name(name: &str, job_id: &str, group: &str) -> u64 {
    let prefix_length = job_id.len() + group.len() + 2;
    if name.len() <= 3 || name.len() <= prefix_length {
        return 0;
    }
    name.get(prefix_length..name.len() - 1)
        .and_then(|digits| digits.parse::<u64>().ok())
        .unwrap_or(0)
}

/// Which indexes of a group are taken. Built from the allocations that keep their name; then
/// [`AllocNameIndex::next`] hands out free ones and [`AllocNameIndex::highest`] releases the top.
#[derive(Debug, Clone)]
pub struct AllocNameIndex {
    job_id: String,
    group: String,
    count: u64,
    taken: BTreeSet<u64>,
    /// Indexes held by more than one allocation, with the number of extra holders.
    duplicates: BTreeMap<u64, u64>,
}

impl AllocNameIndex {
    /// An index for `group` with desired `count`, seeded with the indexes of `taken_indexes`.
    pub fn new(
        job_id: &str,
        group: &str,
        count: u64,
        taken_indexes: impl IntoIterator<Item = u64>,
    ) -> Self {
        let mut index = AllocNameIndex {
            job_id: job_id.to_string(),
            group: group.to_string(),
            count,
            taken: BTreeSet::new(),
            duplicates: BTreeMap::new(),
        };
        for taken in taken_indexes {
            if !index.taken.insert(taken) {
                *index.duplicates.entry(taken).or_insert(0) += 1;
            }
        }
        index
    }

    /// Releases and returns the names of the `n` highest taken indexes (fewer if fewer are taken).
    pub fn highest(&mut self, n: usize) -> BTreeSet<String> {
        let mut names = BTreeSet::new();
        while names.len() < n {
            let Some(top) = self.taken.pop_last() else {
                break;
            };
            names.insert(alloc_name(&self.job_id, &self.group, top));
        }
        names
    }

    /// Whether more than one allocation holds `index`.
    pub fn is_duplicate(&self, index: u64) -> bool {
        self.duplicates.get(&index).is_some_and(|extra| *extra > 0)
    }

    /// Releases one holder of `index`.
    pub fn unset(&mut self, index: u64) {
        match self.duplicates.get_mut(&index) {
            Some(extra) => {
                *extra -= 1;
                if *extra == 0 {
                    self.duplicates.remove(&index);
                }
            }
            None => {
                self.taken.remove(&index);
            }
        }
    }

    /// Takes and returns `n` names: the free indexes below the desired count, lowest first; when
    /// those run out, indexes from 0 upwards again (names then repeat, as in Nomad).
    pub fn next(&mut self, n: usize) -> Vec<String> {
        let mut names = Vec::with_capacity(n);
        let mut candidate = 0;
        while names.len() < n && candidate < self.count {
            if self.taken.insert(candidate) {
                names.push(alloc_name(&self.job_id, &self.group, candidate));
            }
            candidate += 1;
        }
        let mut overlap = 0;
        while names.len() < n {
            self.taken.insert(overlap);
            names.push(alloc_name(&self.job_id, &self.group, overlap));
            overlap += 1;
        }
        names
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        assert_eq!(alloc_name("web", "frontend", 3), "web.frontend[3]");
        assert_eq!(
            alloc_index_from_name("web.frontend[12]", "web", "frontend"),
            12
        );
        assert_eq!(
            alloc_index_from_name("a.b.c[4]", "a.b", "c"),
            4,
            "dots in the job id"
        );
        assert_eq!(alloc_index_from_name("x", "web", "frontend"), 0);
    }

    #[test]
    fn next_fills_lowest_free_indexes_first() {
        let mut index = AllocNameIndex::new("j", "g", 5, [0, 2]);
        assert_eq!(index.next(2), vec!["j.g[1]", "j.g[3]"]);
        assert_eq!(index.next(1), vec!["j.g[4]"]);
        // Exhausted: overlap from zero.
        assert_eq!(index.next(2), vec!["j.g[0]", "j.g[1]"]);
    }

    #[test]
    fn highest_releases_top_indexes() {
        let mut index = AllocNameIndex::new("j", "g", 2, [0, 1, 2, 3, 7]);
        let released = index.highest(2);
        assert_eq!(
            released,
            BTreeSet::from(["j.g[7]".to_string(), "j.g[3]".to_string()])
        );
        assert_eq!(index.highest(10).len(), 3);
        assert!(index.highest(1).is_empty());
    }

    #[test]
    fn duplicates_are_tracked() {
        let mut index = AllocNameIndex::new("j", "g", 3, [1, 1, 2]);
        assert!(index.is_duplicate(1));
        index.unset(1);
        assert!(!index.is_duplicate(1));
        assert_eq!(index.next(1), vec!["j.g[0]"]);
        index.unset(1);
        assert_eq!(index.next(1), vec!["j.g[1]"]);
    }
}
