//! Nomad's `spread` scoring: a node scores up when its attribute value is below its target share
//! of the group's allocations.

use std::collections::BTreeMap;

use drover_structs::{Job, Node, TaskGroup};

/// The target spelled `*` in a spread: every value not named.
const IMPLICIT_SPREAD_TARGET: &str = "*";

/// One `spread` block prepared for a placement.
struct SpreadInfo {
    attribute: String,
    /// The share of the total spread weight this block carries.
    weight_fraction: f64,
    /// Value → desired allocations (empty: spread evenly).
    desired: BTreeMap<String, f64>,
    /// Value → allocations of the group using it now (named targets start at zero).
    used: BTreeMap<String, u64>,
}

/// Nomad's spread scoring: a node scores up when its attribute value has fewer allocations of
/// the group than its target share (or, without targets, than the least used value).
pub(super) struct SpreadScoring {
    spreads: Vec<SpreadInfo>,
}

impl SpreadScoring {
    /// Prepares the group's and the job's spread blocks; `property_use` counts the group's
    /// allocations per value of an attribute.
    pub(super) fn new(
        job: &Job,
        group: &TaskGroup,
        mut property_use: impl FnMut(&str) -> BTreeMap<String, u64>,
    ) -> Self {
        let blocks: Vec<&drover_structs::Spread> =
            group.spreads.iter().chain(job.spreads.iter()).collect();
        let total_weight: i64 = blocks.iter().map(|spread| spread.weight).sum();
        let count = group.count.max(0) as f64;
        let mut spreads = Vec::new();
        for spread in blocks {
            let mut desired = BTreeMap::new();
            let mut desired_sum = 0.0;
            for target in &spread.spread_target {
                let share = target.percent as f64 / 100.0 * count;
                desired.insert(target.value.clone(), share);
                desired_sum += share;
            }
            if desired_sum > 0.0 && desired_sum < count {
                desired.insert(IMPLICIT_SPREAD_TARGET.to_string(), count - desired_sum);
            }
            let mut used = property_use(&spread.attribute);
            for target in &spread.spread_target {
                used.entry(target.value.clone()).or_insert(0);
            }
            let weight_fraction = if total_weight > 0 {
                spread.weight as f64 / total_weight as f64
            } else {
                0.0
            };
            spreads.push(SpreadInfo {
                attribute: spread.attribute.clone(),
                weight_fraction,
                desired,
                used,
            });
        }
        SpreadScoring { spreads }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.spreads.is_empty()
    }

    pub(super) fn score(&self, node: &Node) -> f64 {
        let mut total = 0.0;
        let mut lowest_boost = -1.0_f64;
        for spread in &self.spreads {
            let Some(value) = crate::constraint::resolve_target(&spread.attribute, node) else {
                total -= 1.0;
                continue;
            };
            if spread.desired.is_empty() {
                total += even_spread_boost(&spread.used, value);
                continue;
            }
            let Some(desired) = spread
                .desired
                .get(value)
                .or_else(|| spread.desired.get(IMPLICIT_SPREAD_TARGET))
                .copied()
            else {
                total -= 1.0;
                continue;
            };
            if desired == 0.0 {
                total += lowest_boost;
                continue;
            }
            let used_with_this = spread.used.get(value).copied().unwrap_or(0) as f64 + 1.0;
            let boost = (desired - used_with_this) / desired * spread.weight_fraction;
            total += boost;
            lowest_boost = lowest_boost.min(boost);
        }
        total
    }
}

/// Without targets: favour the least used values (Nomad's `evenSpreadScoreBoost`).
fn even_spread_boost(used: &BTreeMap<String, u64>, value: &str) -> f64 {
    if used.is_empty() {
        return 0.0;
    }
    let current = used.get(value).copied().unwrap_or(0);
    let min = used.values().copied().min().unwrap_or(0);
    let max = used.values().copied().max().unwrap_or(0);
    if current != min {
        return if min == 0 {
            -1.0
        } else {
            (min as f64 - current as f64) / min as f64
        };
    }
    if min == max {
        return -1.0;
    }
    if min == 0 {
        return 1.0;
    }
    (max - min) as f64 / min as f64
}
