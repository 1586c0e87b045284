//! A small benchmark of the store's write path: what one job register costs as the job table
//! grows, with a reader's snapshot held across the writes (as the scheduler, a blocking query
//! or the API holds one) and with a fresh snapshot taken before each write.
//!
//! `cargo run --release -p drover-state --example write_with_snapshot [SIZE…]`
//! (default sizes 1000 5000 20000). The store is in memory (no fsync), so the figure is the
//! in-memory tables' cost plus the record encoding. Printed, not asserted; BENCHMARKS.md keeps
//! the figures.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;

use drover_state::StateStore;
use drover_structs::{Job, TaskGroup};

const NOW: i64 = 1_700_000_000_000_000_000;
/// Writes timed at each size.
const TIMED_WRITES: usize = 300;
/// Registers sent at once while filling the store (the writer commits them in groups).
const FILL_CONCURRENCY: usize = 256;

fn job(id: String) -> Job {
    Job {
        name: id.clone(),
        id,
        namespace: "default".to_owned(),
        r#type: "batch".to_owned(),
        priority: 50,
        datacenters: vec!["dc1".to_owned()],
        task_groups: vec![TaskGroup {
            name: "g".to_owned(),
            count: 1,
            ..TaskGroup::default()
        }],
        ..Job::default()
    }
}

async fn fill(store: &StateStore, from: usize, to: usize) {
    let mut next = from;
    while next < to {
        let end = (next + FILL_CONCURRENCY).min(to);
        let writes = (next..end).map(|n| store.upsert_job(job(format!("fill-{n:06}")), NOW));
        for result in futures_util::future::join_all(writes).await {
            result.expect("fill register");
        }
        next = end;
    }
}

/// Microseconds per register of a new job, one write at a time.
async fn time_writes(store: &StateStore, tag: &str, fresh_snapshot_each: bool) -> f64 {
    let held = store.snapshot();
    let started = Instant::now();
    for n in 0..TIMED_WRITES {
        let _reader = fresh_snapshot_each.then(|| store.snapshot());
        store
            .upsert_job(job(format!("timed-{tag}-{n:04}")), NOW)
            .await
            .expect("timed register");
    }
    let per_write = started.elapsed().as_secs_f64() * 1e6 / TIMED_WRITES as f64;
    drop(held);
    per_write
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut sizes: Vec<usize> = std::env::args()
        .skip(1)
        .map(|size| size.parse().expect("a size is a number of jobs"))
        .collect();
    if sizes.is_empty() {
        sizes = vec![1000, 5000, 20000];
    }
    sizes.sort_unstable();
    let store = StateStore::in_memory().await.expect("in-memory store");
    let mut filled = 0;
    println!("jobs stored | µs per register, snapshot held | µs per register, snapshot per write");
    for size in sizes {
        let fill_started = Instant::now();
        fill(&store, filled, size).await;
        let fill_ms = fill_started.elapsed().as_millis();
        filled = size;
        let stored = store.jobs(None, "").len();
        let held = time_writes(&store, &format!("{size}-held"), false).await;
        let fresh = time_writes(&store, &format!("{size}-fresh"), true).await;
        println!("{stored} | {held:.0} | {fresh:.0}   (filled in {fill_ms} ms)");
    }
}
