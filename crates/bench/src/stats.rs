//! Figures from repeated runs: min/median/max, percentiles, and the load average printed next
//! to each figure (the machine is shared, so a figure without its load is meaningless).
//!
//! Not here: measuring anything; callers hand in samples.

use std::fmt::Write as _;

/// One figure over repeated runs.
#[derive(Debug, Clone)]
pub struct Summary {
    pub min: f64,
    pub median: f64,
    pub max: f64,
    pub runs: usize,
}

impl Summary {
    /// Summarizes samples; `None` when there are none.
    pub fn of(samples: &[f64]) -> Option<Summary> {
        let sorted = sorted(samples);
        Some(Summary {
            min: *sorted.first()?,
            median: percentile_of_sorted(&sorted, 50.0)?,
            max: *sorted.last()?,
            runs: sorted.len(),
        })
    }
}

fn sorted(samples: &[f64]) -> Vec<f64> {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted
}

/// Nearest-rank percentile of already sorted samples.
pub fn percentile_of_sorted(sorted: &[f64], percent: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (percent / 100.0 * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.clamp(1, sorted.len()) - 1).copied()
}

/// Nearest-rank percentile of unsorted samples.
pub fn percentile(samples: &[f64], percent: f64) -> Option<f64> {
    percentile_of_sorted(&sorted(samples), percent)
}

/// The 1, 5 and 15 minute load averages, as `/proc/loadavg` prints them.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|| "unknown".to_string())
}

/// Collects the samples of each named figure across runs, then prints one line per figure.
#[derive(Debug, Default)]
pub struct Report {
    figures: Vec<(String, String, Vec<f64>)>,
    loads: Vec<String>,
    notes: Vec<String>,
}

impl Report {
    /// Adds one sample of `figure` (in `unit`).
    pub fn add(&mut self, figure: &str, unit: &str, value: f64) {
        match self.figures.iter_mut().find(|(name, _, _)| name == figure) {
            Some((_, _, samples)) => samples.push(value),
            None => self
                .figures
                .push((figure.to_string(), unit.to_string(), vec![value])),
        }
    }

    /// The samples of `figure`, if it was reported.
    pub fn samples(&self, figure: &str) -> Option<&[f64]> {
        self.figures
            .iter()
            .find(|(name, _, _)| name == figure)
            .map(|(_, _, samples)| samples.as_slice())
    }

    /// Records the load average at the end of a run.
    pub fn record_load(&mut self) {
        self.loads.push(load_average());
    }

    /// A line printed under the figures.
    pub fn note(&mut self, note: impl Into<String>) {
        self.notes.push(note.into());
    }

    /// Prints the figures of a scenario.
    pub fn print(&self, scenario: &str) {
        println!("== {scenario}");
        for (figure, unit, samples) in &self.figures {
            if let Some(summary) = Summary::of(samples) {
                println!(
                    "{figure:<44} min {:>10} | median {:>10} | max {:>10} {unit}  (runs {})",
                    format_value(summary.min),
                    format_value(summary.median),
                    format_value(summary.max),
                    summary.runs
                );
            }
        }
        let mut loads = String::new();
        for (run, load) in self.loads.iter().enumerate() {
            let _ = write!(
                loads,
                "{}run {}: {load}",
                if run == 0 { "" } else { "; " },
                run + 1
            );
        }
        if !loads.is_empty() {
            println!("load average (1/5/15 min) after each run: {loads}");
        }
        for note in &self.notes {
            println!("note: {note}");
        }
    }
}

fn format_value(value: f64) -> String {
    if value.abs() >= 100.0 {
        format!("{value:.0}")
    } else if value.abs() >= 10.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles_pick_real_samples() {
        let samples: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&samples, 50.0), Some(50.0));
        assert_eq!(percentile(&samples, 99.0), Some(99.0));
        assert_eq!(percentile(&samples, 100.0), Some(100.0));
        assert_eq!(percentile(&[3.0, 1.0, 2.0], 50.0), Some(2.0));
        assert_eq!(percentile(&[], 50.0), None);
        let summary = Summary::of(&[5.0, 1.0, 9.0]).map(|s| (s.min, s.median, s.max));
        assert_eq!(summary, Some((1.0, 5.0, 9.0)));
    }
}
