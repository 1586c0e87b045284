//! What the nemesis watches while it runs, besides the workload's answers: the task processes
//! on every node (sampled from `/proc`: which allocation runs on which client, and when), and
//! the event stream of the Job and Variable topics (read from one server after another,
//! resuming after the last index seen whenever a connection ends).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::lab::{SERVERS, server_addr};

/// When an allocation's task processes were seen on a client.
#[derive(Debug, Clone)]
pub struct Sighting {
    pub client: usize,
    pub first: Duration,
    pub last: Duration,
}

/// A task process on this host: its pid, allocation and client.
#[derive(Debug, Clone)]
pub struct TaskProcess {
    pub pid: i32,
    pub alloc_id: String,
    pub client: usize,
}

/// Every task process of the clients whose data dirs are given (by `NOMAD_ALLOC_DIR`).
pub fn task_processes(data_dirs: &[PathBuf]) -> Vec<TaskProcess> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        let environ = String::from_utf8_lossy(&environ);
        let mut alloc_id = None;
        let mut alloc_dir = None;
        for var in environ.split('\0') {
            if let Some(value) = var.strip_prefix("NOMAD_ALLOC_ID=") {
                alloc_id = Some(value.to_owned());
            } else if let Some(value) = var.strip_prefix("NOMAD_ALLOC_DIR=") {
                alloc_dir = Some(value.to_owned());
            }
        }
        let (Some(alloc_id), Some(alloc_dir)) = (alloc_id, alloc_dir) else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z'))
        {
            continue;
        }
        if let Some(client) = data_dirs
            .iter()
            .position(|dir| alloc_dir.starts_with(&dir.display().to_string()))
        {
            found.push(TaskProcess {
                pid,
                alloc_id,
                client,
            });
        }
    }
    found
}

/// Samples the task processes every 500 ms until `stop`.
pub fn sample(
    data_dirs: Vec<PathBuf>,
    start: Instant,
    stop: Arc<AtomicBool>,
    sightings: Arc<Mutex<BTreeMap<String, Vec<Sighting>>>>,
) {
    while !stop.load(Ordering::Relaxed) {
        let now = start.elapsed();
        let seen: BTreeSet<(String, usize)> = task_processes(&data_dirs)
            .into_iter()
            .map(|process| (process.alloc_id, process.client))
            .collect();
        let mut sightings = sightings.lock().unwrap();
        for (alloc_id, client) in seen {
            let list = sightings.entry(alloc_id).or_default();
            match list.last_mut() {
                Some(last) if last.client == client => last.last = now,
                _ => list.push(Sighting {
                    client,
                    first: now,
                    last: now,
                }),
            }
        }
        drop(sightings);
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// What the event stream delivered: (topic, index, key) of every event, and the gaps each
/// connection showed (an index going backwards).
#[derive(Debug, Default)]
pub struct Events {
    pub seen: BTreeSet<(String, u64, String)>,
    pub regressions: Vec<String>,
    pub connections: usize,
}

/// Reads the event stream of the Job and Variable topics until `stop`, from one server after
/// another.
pub fn stream(prefix: String, stop: Arc<AtomicBool>, events: Arc<Mutex<Events>>) {
    super::lab::enter_probe(&prefix);
    let mut next = 1_u64;
    let mut server = 0;
    while !stop.load(Ordering::Relaxed) {
        server = (server + 1) % SERVERS.len();
        let Ok(address) = server_addr(server).parse::<SocketAddr>() else {
            return;
        };
        let Ok(mut connection) = TcpStream::connect_timeout(&address, Duration::from_secs(3))
        else {
            std::thread::sleep(Duration::from_millis(300));
            continue;
        };
        let _ = connection.set_read_timeout(Some(Duration::from_secs(15)));
        let path = format!("/v1/event/stream?topic=Job&topic=Variable&index={next}");
        if write!(
            connection,
            "GET {path} HTTP/1.0\r\nHost: {}\r\n\r\n",
            server_addr(server)
        )
        .is_err()
        {
            continue;
        }
        events.lock().unwrap().connections += 1;
        let mut reader = BufReader::new(connection);
        let mut line = String::new();
        let mut in_body = false;
        let mut last = 0_u64;
        while !stop.load(Ordering::Relaxed) {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            if !in_body {
                if line == "\r\n" {
                    in_body = true;
                } else if line.starts_with("HTTP/") && !line.contains(" 200") {
                    break;
                }
                continue;
            }
            let Ok(frame) = serde_json::from_str::<Value>(line.trim()) else {
                continue;
            };
            let Some(index) = frame["Index"].as_u64() else {
                continue;
            };
            let mut events = events.lock().unwrap();
            if index < last {
                events.regressions.push(format!(
                    "s{server} sent index {index} after {last} on one connection"
                ));
            }
            last = index;
            next = next.max(index + 1);
            for event in frame["Events"].as_array().into_iter().flatten() {
                events.seen.insert((
                    event["Topic"].as_str().unwrap_or_default().to_owned(),
                    event["Index"].as_u64().unwrap_or(index),
                    event["Key"].as_str().unwrap_or_default().to_owned(),
                ));
            }
        }
    }
}
