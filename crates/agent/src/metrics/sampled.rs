//! Counters and samples (timings in milliseconds), kept the two ways Nomad's sinks keep them:
//! per 10-second interval as go-metrics' in-memory sink aggregates them (count, sum, min, max,
//! mean, standard deviation and rate of each series; a minute of intervals), which is what
//! `/v1/metrics` shows, and cumulatively as its Prometheus sink does (a counter's total; a
//! sample's count and sum with the 0.5, 0.9 and 0.99 quantiles of the last 10 seconds), a
//! series not updated for a minute dropped.
//!
//! Callers pass the time in; nothing here reads a clock. Not here: gauges, HTTP, naming.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Mutex, MutexGuard};

use prometheus::proto::{Counter, LabelPair, Metric, MetricFamily, MetricType, Quantile, Summary};

/// go-metrics' in-memory sink as Nomad sets it up: 10-second intervals, a minute kept.
const INTERVAL_NS: i64 = 10_000_000_000;
const RETAINED_INTERVALS: usize = 6;
/// go-metrics' Prometheus sink drops a series not updated for this long.
const PROMETHEUS_EXPIRATION_NS: i64 = 60_000_000_000;
/// Its summaries' quantiles cover this much of the past (`MaxAge`).
const SUMMARY_MAX_AGE_NS: i64 = 10_000_000_000;
/// Observations kept per summary series for its quantiles (the newest).
const SUMMARY_WINDOW: usize = 1024;
/// The quantiles of go-metrics' Prometheus summaries.
const QUANTILES: [f64; 3] = [0.5, 0.9, 0.99];

/// A counter or a sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Counter,
    Sample,
}

/// go-metrics' `AggregateSample`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Aggregate {
    count: u64,
    sum: f64,
    sum_sq: f64,
    min: f64,
    max: f64,
}

impl Aggregate {
    fn ingest(&mut self, value: f64) {
        self.count += 1;
        self.sum += value;
        self.sum_sq += value * value;
        if self.count == 1 || value < self.min {
            self.min = value;
        }
        if self.count == 1 || value > self.max {
            self.max = value;
        }
    }

    fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum / self.count as f64
        }
    }

    fn stddev(&self) -> f64 {
        let count = self.count as f64;
        let divisor = count * (count - 1.0);
        if divisor <= 0.0 {
            return 0.0;
        }
        ((count * self.sum_sq - self.sum * self.sum) / divisor)
            .max(0.0)
            .sqrt()
    }
}

type Labels = Vec<(&'static str, String)>;

struct IntervalSeries {
    name: &'static str,
    labels: Labels,
    aggregate: Aggregate,
}

/// One interval of the in-memory sink; series by go-metrics' key (`name;label=value…`).
struct Interval {
    start_ns: i64,
    series: BTreeMap<(Kind, String), IntervalSeries>,
}

/// One series of the Prometheus sink.
#[derive(Default)]
struct CumulativeSeries {
    count: u64,
    sum: f64,
    updated_ns: i64,
    /// The newest observations (time, value), for a summary's quantiles.
    window: VecDeque<(i64, f64)>,
}

#[derive(Default)]
struct Inner {
    intervals: VecDeque<Interval>,
    cumulative: BTreeMap<(Kind, &'static str), BTreeMap<Labels, CumulativeSeries>>,
}

/// The agent's counters and samples.
#[derive(Default)]
pub struct Sampled {
    inner: Mutex<Inner>,
}

impl Sampled {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Every update leaves the maps consistent, so a poisoned lock is still usable.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Adds `value` to the counter `name`, or records it as a sample of `name`, at `now_ns`.
    pub fn record(&self, kind: Kind, name: &'static str, labels: Labels, value: f64, now_ns: i64) {
        let mut key = name.to_owned();
        for (label, label_value) in &labels {
            key.push_str(&format!(";{label}={label_value}"));
        }
        let start_ns = now_ns.div_euclid(INTERVAL_NS) * INTERVAL_NS;
        let mut inner = self.lock();
        if inner
            .intervals
            .back()
            .is_none_or(|interval| interval.start_ns != start_ns)
        {
            inner.intervals.push_back(Interval {
                start_ns,
                series: BTreeMap::new(),
            });
            while inner.intervals.len() > RETAINED_INTERVALS {
                inner.intervals.pop_front();
            }
        }
        if let Some(interval) = inner.intervals.back_mut() {
            interval
                .series
                .entry((kind, key))
                .or_insert_with(|| IntervalSeries {
                    name,
                    labels: labels.clone(),
                    aggregate: Aggregate::default(),
                })
                .aggregate
                .ingest(value);
        }
        let series = inner
            .cumulative
            .entry((kind, name))
            .or_default()
            .entry(labels)
            .or_default();
        series.count += 1;
        series.sum += value;
        series.updated_ns = now_ns;
        if kind == Kind::Sample {
            series.window.push_back((now_ns, value));
            while series.window.len() > SUMMARY_WINDOW {
                series.window.pop_front();
            }
        }
    }

    /// The `Counters` and `Samples` of go-metrics' `MetricsSummary` at `now_ns`: those of the
    /// last finished interval (the current one while it is the only one), each series as a
    /// `SampledValue`, ordered by key.
    pub fn summary(&self, now_ns: i64) -> (Vec<serde_json::Value>, Vec<serde_json::Value>) {
        let current_ns = now_ns.div_euclid(INTERVAL_NS) * INTERVAL_NS;
        let inner = self.lock();
        let intervals = &inner.intervals;
        // go-metrics makes the current interval before it picks one to show.
        let shown = match intervals.back() {
            None => None,
            Some(last) if last.start_ns != current_ns => Some(last),
            Some(last) => intervals
                .len()
                .checked_sub(2)
                .and_then(|index| intervals.get(index))
                .or(Some(last)),
        };
        let (mut counters, mut samples) = (Vec::new(), Vec::new());
        let seconds = INTERVAL_NS as f64 / 1e9;
        for ((kind, _), series) in shown.into_iter().flat_map(|interval| &interval.series) {
            let aggregate = &series.aggregate;
            let labels: serde_json::Map<String, serde_json::Value> = series
                .labels
                .iter()
                .map(|(label, value)| ((*label).to_owned(), value.as_str().into()))
                .collect();
            let value = serde_json::json!({
                "Name": series.name,
                "Count": aggregate.count,
                "Rate": aggregate.sum / seconds,
                "Sum": aggregate.sum,
                "Min": aggregate.min,
                "Max": aggregate.max,
                "Mean": aggregate.mean(),
                "Stddev": aggregate.stddev(),
                "Labels": labels,
            });
            match kind {
                Kind::Counter => counters.push(value),
                Kind::Sample => samples.push(value),
            }
        }
        (counters, samples)
    }

    /// The Prometheus families at `now_ns`: counters as counters, samples as summaries, with
    /// the Prometheus name `prometheus_name` gives and the Nomad name as help. Series not
    /// updated for a minute are dropped first.
    pub fn families(
        &self,
        now_ns: i64,
        prometheus_name: impl Fn(&str) -> String,
    ) -> Vec<MetricFamily> {
        let mut inner = self.lock();
        for series in inner.cumulative.values_mut() {
            series.retain(|_, series| now_ns - series.updated_ns < PROMETHEUS_EXPIRATION_NS);
        }
        inner.cumulative.retain(|_, series| !series.is_empty());
        let mut families = Vec::new();
        for ((kind, name), all) in &inner.cumulative {
            let mut family = MetricFamily::default();
            family.set_name(prometheus_name(name));
            family.set_help((*name).to_owned());
            family.set_field_type(match kind {
                Kind::Counter => MetricType::COUNTER,
                Kind::Sample => MetricType::SUMMARY,
            });
            let mut metrics = Vec::new();
            for (labels, series) in all {
                let mut metric = Metric::default();
                metric.set_label(
                    labels
                        .iter()
                        .map(|(label, value)| {
                            let mut pair = LabelPair::default();
                            pair.set_name((*label).to_owned());
                            pair.set_value(value.clone());
                            pair
                        })
                        .collect(),
                );
                match kind {
                    Kind::Counter => {
                        let mut counter = Counter::default();
                        counter.set_value(series.sum);
                        metric.set_counter(counter);
                    }
                    Kind::Sample => {
                        let mut recent: Vec<f64> = series
                            .window
                            .iter()
                            .filter(|(at, _)| now_ns - at < SUMMARY_MAX_AGE_NS)
                            .map(|(_, value)| *value)
                            .collect();
                        recent.sort_by(f64::total_cmp);
                        let mut summary = Summary::default();
                        summary.set_sample_count(series.count);
                        summary.set_sample_sum(series.sum);
                        summary.set_quantile(
                            QUANTILES
                                .iter()
                                .map(|quantile| {
                                    let mut entry = Quantile::default();
                                    entry.set_quantile(*quantile);
                                    entry.set_value(nearest_rank(&recent, *quantile));
                                    entry
                                })
                                .collect(),
                        );
                        metric.set_summary(summary);
                    }
                }
                metrics.push(metric);
            }
            family.set_metric(metrics);
            families.push(family);
        }
        families
    }
}

/// The `quantile` of sorted `values` by nearest rank; NaN without values (as a Prometheus
/// summary with no recent observations reports).
fn nearest_rank(values: &[f64], quantile: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let rank = (quantile * values.len() as f64).ceil() as usize;
    values[rank.clamp(1, values.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: i64 = 1_000_000_000;

    fn labels(pairs: &[(&'static str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(label, value)| (*label, (*value).to_owned()))
            .collect()
    }

    #[test]
    fn the_summary_shows_the_last_finished_interval_as_go_metrics_aggregates_it() {
        let sampled = Sampled::default();
        let start = 1_700_000_000 * SECOND;
        for value in [2.0, 4.0, 9.0] {
            sampled.record(
                Kind::Sample,
                "nomad.nomad.job.list",
                labels(&[]),
                value,
                start,
            );
        }
        sampled.record(
            Kind::Counter,
            "nomad.client.allocs.restart",
            labels(&[("task", "web")]),
            1.0,
            start + SECOND,
        );
        // While the first interval is the only one, it is shown.
        let (counters, samples) = sampled.summary(start + 2 * SECOND);
        assert_eq!(counters.len(), 1);
        assert_eq!(counters[0]["Name"], "nomad.client.allocs.restart");
        assert_eq!(counters[0]["Count"], 1);
        assert_eq!(counters[0]["Labels"]["task"], "web");
        assert_eq!(samples[0]["Count"], 3);
        assert_eq!(samples[0]["Sum"], 15.0);
        assert_eq!(samples[0]["Min"], 2.0);
        assert_eq!(samples[0]["Max"], 9.0);
        assert_eq!(samples[0]["Mean"], 5.0);
        assert_eq!(samples[0]["Rate"], 1.5);
        let stddev = samples[0]["Stddev"].as_f64().unwrap_or_default();
        assert!((stddev - 13f64.sqrt()).abs() < 1e-9, "{stddev}");
        // A new interval with data: the finished one is still shown, not the current one.
        sampled.record(
            Kind::Sample,
            "nomad.nomad.job.list",
            labels(&[]),
            1.0,
            start + 11 * SECOND,
        );
        let (_, samples) = sampled.summary(start + 12 * SECOND);
        assert_eq!(samples[0]["Count"], 3);
        // Later, with nothing new, the last interval with data is the finished one shown.
        let (_, samples) = sampled.summary(start + 25 * SECOND);
        assert_eq!(samples[0]["Count"], 1);
        // Older than the kept minute of intervals, it is gone once six newer ones exist.
        for step in 2..8 {
            sampled.record(
                Kind::Counter,
                "c",
                labels(&[]),
                1.0,
                start + step * 10 * SECOND,
            );
        }
        let (_, samples) = sampled.summary(start + 100 * SECOND);
        assert!(samples.is_empty(), "{samples:?}");
    }

    #[test]
    fn prometheus_keeps_totals_recent_quantiles_and_drops_a_series_idle_for_a_minute() {
        let sampled = Sampled::default();
        let start = 1_700_000_000 * SECOND;
        let name = |dotted: &str| dotted.replace('.', "_");
        for value in 1..=100 {
            sampled.record(
                Kind::Sample,
                "nomad.nomad.job.register",
                labels(&[("host", "h")]),
                f64::from(value),
                start,
            );
        }
        sampled.record(
            Kind::Counter,
            "nomad.client.allocs.start",
            labels(&[]),
            1.0,
            start,
        );
        sampled.record(
            Kind::Counter,
            "nomad.client.allocs.start",
            labels(&[]),
            1.0,
            start + 30 * SECOND,
        );
        let families = sampled.families(start + SECOND, name);
        let summary = families
            .iter()
            .find(|family| family.name() == "nomad_nomad_job_register")
            .map(|family| family.get_metric()[0].get_summary().clone());
        let summary = summary.unwrap_or_default();
        assert_eq!(summary.sample_count(), 100);
        assert_eq!(summary.sample_sum(), 5050.0);
        let quantiles: Vec<f64> = summary.get_quantile().iter().map(Quantile::value).collect();
        assert_eq!(quantiles, vec![50.0, 90.0, 99.0]);
        // Past the quantiles' window the totals stay and the quantiles are NaN.
        let families = sampled.families(start + 20 * SECOND, name);
        let summary = families[1].get_metric()[0].get_summary();
        assert_eq!(summary.sample_count(), 100);
        assert!(summary.get_quantile()[0].value().is_nan());
        // A minute idle: the summary is dropped; the counter, updated at +30 s, stays.
        let families = sampled.families(start + 61 * SECOND, name);
        let names: Vec<&str> = families.iter().map(MetricFamily::name).collect();
        assert_eq!(names, vec!["nomad_client_allocs_start"]);
        assert_eq!(families[0].get_metric()[0].get_counter().get_value(), 2.0);
    }
}
