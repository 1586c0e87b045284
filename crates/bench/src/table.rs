//! `table`: the regression guard. One table of the figures that matter to a user of the agent
//! (start, idle memory, 100 and 1 000 tasks from register to running and from stop to gone,
//! per-task memory, exec round trip, catalog read, CPU of checks), each the median over
//! `--runs` rounds; the rounds alternate the scenarios, so the machine's load falls on all
//! figures alike. With `--compare` each median is set against a baseline file (written by
//! `--write-baseline`) as a ratio, and a figure more than 25 % worse fails the run.
//!
//! Every figure is lower-is-better (times, memory, CPU). Not here: the scenarios themselves
//! (`process`, `exec_attach`, `catalog`, `checks`); this module runs them once per round.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context as _, bail};

use crate::process::Bench;
use crate::stats::{Report, Summary, load_average};

/// A figure more than this ratio of its baseline is flagged (25 % worse).
pub const WORSE_LIMIT: f64 = 1.25;

/// One row of the table: a stable key (the baseline file's), what it is, and its unit.
struct Figure {
    key: &'static str,
    label: &'static str,
    unit: &'static str,
}

const FIGURES: &[Figure] = &[
    Figure {
        key: "ready_api",
        label: "spawn → API answers (`/v1/agent/self`)",
        unit: "ms",
    },
    Figure {
        key: "ready_node",
        label: "spawn → node registered and ready",
        unit: "ms",
    },
    Figure {
        key: "idle_pss",
        label: "idle agent PSS (2 s after ready)",
        unit: "MiB",
    },
    Figure {
        key: "run_100",
        label: "register → 100 `sleep` tasks running",
        unit: "ms",
    },
    Figure {
        key: "stop_100",
        label: "stop → 100 task processes gone",
        unit: "ms",
    },
    Figure {
        key: "task_pss_100",
        label: "per-task overhead PSS (agent + shim, 100 tasks)",
        unit: "KiB",
    },
    Figure {
        key: "run_1000",
        label: "register → 1 000 `sleep` tasks running",
        unit: "ms",
    },
    Figure {
        key: "stop_1000",
        label: "stop → 1 000 task processes gone",
        unit: "ms",
    },
    Figure {
        key: "exec_round_trip",
        label: "exec round trip (websocket connect → `echo hi` exited)",
        unit: "ms",
    },
    Figure {
        key: "catalog_read",
        label: "catalog read `GET /v1/service/<name>` p50 (1 000 registrations)",
        unit: "ms",
    },
    Figure {
        key: "check_cpu",
        label: "agent CPU with 1 000 http checks at 10 s",
        unit: "% of a core",
    },
];

/// What the table runs.
pub struct TableOptions {
    /// Leave out the 1 000-task figures (the longest part of a round).
    pub quick: bool,
    /// Compare with this baseline file.
    pub compare: Option<std::path::PathBuf>,
    /// Write the medians to this baseline file.
    pub write_baseline: Option<std::path::PathBuf>,
}

/// The median of a scenario report's figure, as one sample of a table figure.
fn take(report: &Report, figure: &str) -> anyhow::Result<f64> {
    report
        .samples(figure)
        .and_then(Summary::of)
        .map(|summary| summary.median)
        .with_context(|| format!("the scenario did not report {figure:?}"))
}

/// Runs one round: every scenario once.
fn round(
    bench: &Bench,
    quick: bool,
    runtime: &tokio::runtime::Runtime,
    samples: &mut BTreeMap<&'static str, Vec<f64>>,
) -> anyhow::Result<()> {
    let mut add = |key: &'static str, value: f64| samples.entry(key).or_default().push(value);
    let start = crate::process::agent_start(bench)?;
    add(
        "ready_api",
        take(&start, "spawn -> /v1/agent/self answers")?,
    );
    add(
        "ready_node",
        take(&start, "spawn -> node registered and ready")?,
    );
    let idle = crate::process::idle_rss(bench)?;
    add("idle_pss", take(&idle, "idle agent PSS")?);
    let hundred = crate::process::run_sleep(bench, 100, "host")?;
    add("run_100", take(&hundred, "register -> 100 allocs running")?);
    add(
        "stop_100",
        take(&hundred, "stop -> all task processes gone")?,
    );
    let overhead = crate::process::overhead(bench, 100)?;
    add(
        "task_pss_100",
        take(&overhead, "per-task overhead (agent + shims - idle)")? * 1024.0,
    );
    if !quick {
        let thousand = crate::process::run_sleep(bench, 1000, "host")?;
        add(
            "run_1000",
            take(&thousand, "register -> 1000 allocs running")?,
        );
        add(
            "stop_1000",
            take(&thousand, "stop -> all task processes gone")?,
        );
    }
    let exec = crate::exec_attach::exec_attach_sessions(bench, 10, false)?;
    add(
        "exec_round_trip",
        take(&exec, "websocket connect -> exited frame (median of run)")?,
    );
    let catalog = runtime.block_on(crate::catalog::catalog_read(bench, 1000, 100, 20))?;
    add(
        "catalog_read",
        take(&catalog, "GET /v1/service/<name> p50")?,
    );
    // Not every run gets all 1 000 checks passing (see BENCHMARKS.md): a round without them
    // leaves this figure out, says why, and measures the rest.
    match crate::checks::check_cpu(bench, 1000) {
        Ok(checks) => add("check_cpu", take(&checks, crate::checks::CPU_FIGURE)?),
        Err(error) => eprintln!("check CPU not measured this round: {error:#}"),
    }
    Ok(())
}

/// Runs `rounds` rounds and prints the table (with the comparison when asked).
pub fn table(bench: &Bench, rounds: usize, options: &TableOptions) -> anyhow::Result<()> {
    let one_run = Bench {
        drover: bench.drover.clone(),
        runs: 1,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let mut samples: BTreeMap<&'static str, Vec<f64>> = BTreeMap::new();
    let mut loads = Vec::new();
    for number in 1..=rounds {
        eprintln!(
            "round {number} of {rounds} (load average {})",
            load_average()
        );
        round(&one_run, options.quick, &runtime, &mut samples)?;
        loads.push(load_average());
    }
    let medians: BTreeMap<&'static str, Summary> = samples
        .iter()
        .filter_map(|(key, values)| Some((*key, Summary::of(values)?)))
        .collect();
    let baseline = match &options.compare {
        Some(path) => Some(read_baseline(path)?),
        None => None,
    };
    let (text, worse) = render(&medians, baseline.as_ref());
    print!("{text}");
    println!(
        "\nmedians of {rounds} rounds; load average (1/5/15 min) after each round: {}",
        loads.join("; ")
    );
    if let Some(path) = &options.write_baseline {
        write_baseline(path, &medians)?;
        println!("baseline written to {}", path.display());
    }
    if !worse.is_empty() {
        bail!(
            "{} figure(s) more than {:.0} % worse than the baseline: {}",
            worse.len(),
            (WORSE_LIMIT - 1.0) * 100.0,
            worse.join(", ")
        );
    }
    Ok(())
}

/// The table as markdown, and the keys of the figures worse than the limit.
fn render(
    medians: &BTreeMap<&'static str, Summary>,
    baseline: Option<&BTreeMap<String, f64>>,
) -> (String, Vec<&'static str>) {
    let mut text = String::new();
    let mut worse = Vec::new();
    match baseline {
        Some(_) => {
            text.push_str("| figure | median | min–max | unit | baseline | ratio | |\n");
            text.push_str("|---|---|---|---|---|---|---|\n");
        }
        None => {
            text.push_str("| figure | median | min–max | unit |\n");
            text.push_str("|---|---|---|---|\n");
        }
    }
    for figure in FIGURES {
        let Some(summary) = medians.get(figure.key) else {
            // A figure the baseline holds but this run did not measure is named, not dropped:
            // the comparison reports every figure of the baseline.
            if let Some(base) = baseline.and_then(|baseline| baseline.get(figure.key)) {
                let _ = writeln!(
                    text,
                    "| {} | — | — | {} | {} | — | not measured this run |",
                    figure.label,
                    figure.unit,
                    format_value(*base)
                );
            }
            continue;
        };
        let _ = write!(
            text,
            "| {} | {} | {}–{} | {} |",
            figure.label,
            format_value(summary.median),
            format_value(summary.min),
            format_value(summary.max),
            figure.unit
        );
        if let Some(baseline) = baseline {
            match baseline.get(figure.key) {
                Some(base) if *base > 0.0 => {
                    let ratio = summary.median / base;
                    let flag = if ratio > WORSE_LIMIT {
                        worse.push(figure.key);
                        "**worse**"
                    } else if ratio < 1.0 / WORSE_LIMIT {
                        "better"
                    } else {
                        ""
                    };
                    let _ = write!(text, " {} | {ratio:.2} | {flag} |", format_value(*base));
                }
                _ => text.push_str(" — | — | not in the baseline |"),
            }
        }
        text.push('\n');
    }
    (text, worse)
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

/// Reads a baseline: `key value` per line; `#` starts a comment.
pub fn read_baseline(path: &Path) -> anyhow::Result<BTreeMap<String, f64>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the baseline {}", path.display()))?;
    parse_baseline(&text).with_context(|| format!("in the baseline {}", path.display()))
}

fn parse_baseline(text: &str) -> anyhow::Result<BTreeMap<String, f64>> {
    let mut figures = BTreeMap::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or_default().trim();
        if line.is_empty() {
            continue;
        }
        let mut fields = line.split_whitespace();
        let (Some(key), Some(value), None) = (fields.next(), fields.next(), fields.next()) else {
            bail!("line {}: expected `key value`, got {line:?}", number + 1);
        };
        let value: f64 = value
            .parse()
            .with_context(|| format!("line {}: {value:?} is not a number", number + 1))?;
        if !FIGURES.iter().any(|figure| figure.key == key) {
            bail!("line {}: no figure is called {key:?}", number + 1);
        }
        figures.insert(key.to_owned(), value);
    }
    Ok(figures)
}

fn write_baseline(path: &Path, medians: &BTreeMap<&'static str, Summary>) -> anyhow::Result<()> {
    let mut text = String::from(
        "# The regression guard's baseline: medians written by `scripts/bench --write-baseline`;\n\
         # `scripts/bench --compare` flags a figure more than 25 % above its value here.\n",
    );
    for figure in FIGURES {
        if let Some(summary) = medians.get(figure.key) {
            let _ = writeln!(
                text,
                "# {} ({})\n{} {:.3}",
                figure.label, figure.unit, figure.key, summary.median
            );
        }
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(value: f64) -> Summary {
        Summary {
            min: value,
            median: value,
            max: value,
            runs: 1,
        }
    }

    #[test]
    fn a_figure_more_than_a_quarter_worse_is_flagged_and_one_within_it_is_not() {
        let medians = BTreeMap::from([
            ("ready_api", summary(12.6)),
            ("idle_pss", summary(12.4)),
            ("run_100", summary(200.0)),
        ]);
        let baseline = parse_baseline("ready_api 10\nidle_pss 10 # comment\nrun_100 400\n")
            .expect("a valid baseline");
        let (text, worse) = render(&medians, Some(&baseline));
        assert_eq!(worse, vec!["ready_api"]);
        assert!(text.contains("| 1.26 | **worse** |"), "{text}");
        assert!(text.contains("| 1.24 |  |"), "{text}");
        assert!(text.contains("| 0.50 | better |"), "{text}");
    }

    #[test]
    fn a_baseline_figure_this_run_did_not_measure_is_reported_not_dropped() {
        let medians = BTreeMap::from([("ready_api", summary(10.0))]);
        let baseline = parse_baseline("ready_api 10\ncheck_cpu 1.5\n").expect("a valid baseline");
        let (text, worse) = render(&medians, Some(&baseline));
        assert!(worse.is_empty(), "{worse:?}");
        assert!(
            text.contains("| agent CPU with 1 000 http checks at 10 s | — | — | % of a core | 1.50 | — | not measured this run |"),
            "{text}"
        );
    }

    #[test]
    fn a_baseline_with_an_unknown_figure_or_a_bad_number_is_refused() {
        let unknown = parse_baseline("ready_sometime 10\n").expect_err("unknown key");
        assert!(unknown.to_string().contains("ready_sometime"), "{unknown}");
        let bad = parse_baseline("ready_api ten\n").expect_err("not a number");
        assert!(bad.to_string().contains("\"ten\""), "{bad}");
    }

    #[test]
    fn a_written_baseline_reads_back() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("baseline");
        let medians = BTreeMap::from([("ready_api", summary(12.25)), ("check_cpu", summary(1.5))]);
        write_baseline(&path, &medians).expect("written");
        let read = read_baseline(&path).expect("read back");
        assert_eq!(read.get("ready_api"), Some(&12.25));
        assert_eq!(read.get("check_cpu"), Some(&1.5));
    }
}
