//! Crash safety of the group-commit writer on the embedded backend: a child process writes from
//! many concurrent tasks and prints every acknowledged write; it is killed with SIGKILL in the
//! middle of the burst; reopening the file must work and hold every acknowledged write.
//!
//! The child is this test binary itself, started on the `crash_child_writer` entry point.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use drover_state::{EmbeddedKv, Engine, EngineOptions, Kv, StateError, Table, load_table};

const CHILD_DIR_VARIABLE: &str = "DROVER_STATE_CRASH_CHILD_DIR";
const CHILD_ROUND_VARIABLE: &str = "DROVER_STATE_CRASH_CHILD_ROUND";
const WRITERS: u64 = 16;

type Records = Arc<BTreeMap<String, u64>>;

async fn load_records(kv: Arc<dyn Kv>) -> Result<Records, StateError> {
    let records = load_table::<u64>(kv.as_ref(), Table::Allocs).await?;
    Ok(Arc::new(
        records
            .into_iter()
            .map(|(key, value)| (String::from_utf8(key).unwrap(), value))
            .collect(),
    ))
}

async fn open_engine(directory: &Path) -> Engine<Records> {
    let kv = Arc::new(EmbeddedKv::open_in_dir(directory).await.unwrap());
    Engine::start(kv, EngineOptions::default(), load_records)
        .await
        .unwrap()
}

/// The child's entry point: does nothing unless started by `acknowledged_writes_survive_sigkill`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_child_writer() {
    let Ok(directory) = std::env::var(CHILD_DIR_VARIABLE) else {
        return;
    };
    let round: u64 = std::env::var(CHILD_ROUND_VARIABLE)
        .unwrap()
        .parse()
        .unwrap();
    let engine = Arc::new(open_engine(Path::new(&directory)).await);
    let (acks, mut acked) = tokio::sync::mpsc::unbounded_channel::<(String, u64, u64)>();
    for writer in 0..WRITERS {
        let engine = Arc::clone(&engine);
        let acks = acks.clone();
        tokio::spawn(async move {
            for sequence in 0_u64.. {
                let key = format!("r{round}-w{writer}-{sequence}");
                let value = round * 1_000_000 + sequence;
                let record_key = key.clone();
                let index = engine
                    .write(move |records: &mut Records, context| {
                        let index = context.index();
                        context.put(Table::Allocs, record_key.as_bytes(), &value)?;
                        Arc::make_mut(records).insert(record_key, value);
                        Ok(index)
                    })
                    .await
                    .unwrap();
                if acks.send((key, value, index)).is_err() {
                    return;
                }
            }
        });
    }
    drop(acks);
    let mut stdout = std::io::stdout().lock();
    while let Some((key, value, index)) = acked.recv().await {
        writeln!(stdout, "ack {key} {value} {index}").unwrap();
        stdout.flush().unwrap();
    }
}

#[tokio::test]
async fn acknowledged_writes_survive_sigkill() {
    let directory = tempfile::tempdir().unwrap();
    let mut acknowledged: Vec<(String, u64, u64)> = Vec::new();
    for round in 0..3_u64 {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "crash_child_writer",
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_DIR_VARIABLE, directory.path())
            .env(CHILD_ROUND_VARIABLE, round.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let mut acked_this_round = 0;
        // Kill at a different point each round, while writes are in flight.
        let kill_after = 300 + round * 700;
        while acked_this_round < kill_after {
            let line = lines
                .next()
                .expect("the child stopped before acknowledging enough writes")
                .unwrap();
            let mut fields = line.split_whitespace();
            if fields.next() != Some("ack") {
                continue;
            }
            let key = fields.next().unwrap().to_owned();
            let value: u64 = fields.next().unwrap().parse().unwrap();
            let index: u64 = fields.next().unwrap().parse().unwrap();
            acknowledged.push((key, value, index));
            acked_this_round += 1;
        }
        // std's Child::kill sends SIGKILL on Unix.
        child.kill().unwrap();
        let status = child.wait().unwrap();
        assert!(!status.success(), "the child must have been killed");
        // Acks printed between our last read and the kill are not counted: only what we saw.

        let engine = open_engine(directory.path()).await;
        let snapshot = engine.snapshot();
        for (key, value, index) in &acknowledged {
            assert_eq!(
                snapshot.data.get(key),
                Some(value),
                "acknowledged write {key} (index {index}) lost after SIGKILL in round {round}"
            );
            assert!(snapshot.indexes.latest() >= *index);
        }
        assert!(snapshot.indexes.table(Table::Allocs) >= acknowledged.len() as u64);
        engine.shutdown().await;
    }
}
