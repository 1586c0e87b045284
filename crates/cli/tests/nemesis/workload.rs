//! The workload: one thread that keeps the cluster busy through the HTTP API while the faults
//! happen, each request to a server picked at random, and records every operation with its
//! outcome (acknowledged with the answer, refused with its status, or unknown: no answer or a
//! 5xx, so it may or may not have taken effect).
//!
//! Jobs are registered (service jobs with a rolling or a canary update, a Nomad service, and
//! `disconnect { stop_on_client_after }`), updated (destructively, or only their service tags),
//! scaled, stopped and purged; batch jobs are registered and a parameterized job dispatched; one
//! job's task fails and restarts all along; variables are written with check-and-set; one node
//! is drained and made eligible again. After an unknown outcome a job or variable is left
//! alone for a while, so that a write still in flight lands before the next one.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

use super::lab::{SERVERS, request, server_addr};

const TIMEOUT: Duration = Duration::from_secs(5);
/// How long a job or variable is left alone after an unknown outcome.
const QUARANTINE: Duration = Duration::from_secs(20);
pub const VARIABLES: usize = 3;
pub const PARAMETERIZED: &str = "param";
pub const FLAKY: &str = "flaky";

#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Ack(Value),
    Refused(u16, String),
    Unknown(String),
}

#[derive(Debug, Clone)]
pub enum Kind {
    /// A register or update carrying `marker` (its meta `op`), with `count` and its tags.
    Register {
        count: u64,
    },
    Scale {
        count: u64,
    },
    Stop,
    Purge,
    Dispatch,
    /// A variable write: the counter it writes and the modify index it expects.
    VarCas {
        counter: u64,
        cas: u64,
    },
    Drain {
        on: bool,
    },
}

#[derive(Debug, Clone)]
pub struct Op {
    pub seq: u64,
    pub at: Duration,
    pub target: String,
    pub kind: Kind,
    pub outcome: Outcome,
}

impl Op {
    pub fn acked(&self) -> bool {
        matches!(self.outcome, Outcome::Ack(_))
    }
    pub fn unknown(&self) -> bool {
        matches!(self.outcome, Outcome::Unknown(_))
    }
}

#[derive(Debug, Default)]
pub struct History {
    pub ops: Vec<Op>,
}

impl History {
    pub fn of(&self, target: &str) -> Vec<&Op> {
        self.ops.iter().filter(|op| op.target == target).collect()
    }
    pub fn acknowledged(&self) -> usize {
        self.ops.iter().filter(|op| op.acked()).count()
    }
}

pub fn var_path(index: usize) -> String {
    format!("nemesis/v{index}")
}

/// A service job `id` carrying `marker`; `canary` gives it a canary update, auto-promoted.
pub fn service_job(id: &str, marker: u64, count: u64, canary: bool, tags: &str) -> Value {
    let update = if canary {
        json!({"MaxParallel": 1, "Canary": 1, "AutoPromote": true,
               "MinHealthyTime": 1_000_000_000_u64, "HealthyDeadline": 60_000_000_000_u64,
               "ProgressDeadline": 120_000_000_000_u64, "HealthCheck": "task_states"})
    } else {
        json!({"MaxParallel": 1, "MinHealthyTime": 1_000_000_000_u64,
               "HealthyDeadline": 60_000_000_000_u64, "ProgressDeadline": 120_000_000_000_u64,
               "HealthCheck": "task_states"})
    };
    json!({"Job": {
        "ID": id, "Name": id, "Type": "service", "Datacenters": ["dc1"],
        "Meta": {"op": marker.to_string()},
        "Update": update,
        "TaskGroups": [{
            "Name": "app", "Count": count, "EphemeralDisk": {"SizeMB": 10},
            "Update": update,
            "Disconnect": {"StopOnClientAfter": 4_000_000_000_u64},
            "RestartPolicy": {"Attempts": 10, "Interval": 600_000_000_000_u64,
                              "Delay": 1_000_000_000_u64, "Mode": "delay"},
            "Services": [{"Name": id, "Provider": "nomad", "Tags": [tags]}],
            "Tasks": [{
                "Name": "main", "Driver": "raw_exec",
                "Env": {"OP": marker.to_string()},
                "KillTimeout": 1_000_000_000_u64,
                "LogConfig": {"MaxFiles": 1, "MaxFileSizeMB": 1},
                "Config": {"command": "/bin/sh", "args": ["-c", "sleep 3600"]},
                "Resources": {"CPU": 20, "MemoryMB": 16}
            }]
        }]
    }})
}

pub fn batch_job(id: &str, marker: u64, parameterized: bool) -> Value {
    let mut job = json!({"Job": {
        "ID": id, "Name": id, "Type": "batch", "Datacenters": ["dc1"],
        "Meta": {"op": marker.to_string()},
        "TaskGroups": [{
            "Name": "work", "Count": 1, "EphemeralDisk": {"SizeMB": 10},
            "RestartPolicy": {"Attempts": 3, "Interval": 600_000_000_000_u64,
                              "Delay": 1_000_000_000_u64, "Mode": "fail"},
            "Tasks": [{
                "Name": "main", "Driver": "raw_exec",
                "KillTimeout": 1_000_000_000_u64,
                "LogConfig": {"MaxFiles": 1, "MaxFileSizeMB": 1},
                "Config": {"command": "/bin/sh", "args": ["-c", "sleep 2"]},
                "Resources": {"CPU": 20, "MemoryMB": 16}
            }]
        }]
    }});
    if parameterized {
        job["Job"]["ParameterizedJob"] = json!({"Payload": "forbidden"});
    }
    job
}

/// A job whose task exits with an error every few seconds and is restarted.
pub fn flaky_job(marker: u64) -> Value {
    json!({"Job": {
        "ID": FLAKY, "Name": FLAKY, "Type": "service", "Datacenters": ["dc1"],
        "Meta": {"op": marker.to_string()},
        "TaskGroups": [{
            "Name": "app", "Count": 1, "EphemeralDisk": {"SizeMB": 10},
            "Disconnect": {"StopOnClientAfter": 4_000_000_000_u64},
            "RestartPolicy": {"Attempts": 100, "Interval": 600_000_000_000_u64,
                              "Delay": 2_000_000_000_u64, "Mode": "delay"},
            "Tasks": [{
                "Name": "main", "Driver": "raw_exec",
                "KillTimeout": 1_000_000_000_u64,
                "LogConfig": {"MaxFiles": 1, "MaxFileSizeMB": 1},
                "Config": {"command": "/bin/sh", "args": ["-c", "sleep 3; exit 3"]},
                "Resources": {"CPU": 20, "MemoryMB": 16}
            }]
        }]
    }})
}

/// The workload's own view of a job it manages.
#[derive(Debug, Clone)]
struct JobView {
    kind: &'static str,
    canary: bool,
    count: u64,
    stopped: bool,
    busy_until: Instant,
}

pub struct Workload {
    rng: StdRng,
    start: Instant,
    seq: u64,
    history: Arc<Mutex<History>>,
    jobs: BTreeMap<String, JobView>,
    var_busy: Vec<Instant>,
    nodes: Vec<String>,
    drained: Option<String>,
    next_job: u64,
}

impl Workload {
    pub fn new(
        seed: u64,
        start: Instant,
        history: Arc<Mutex<History>>,
        nodes: Vec<String>,
    ) -> Self {
        Self {
            rng: StdRng::seed_from_u64(seed ^ 0x005e_ed0f_7e57),
            start,
            seq: 0,
            history,
            jobs: BTreeMap::new(),
            var_busy: vec![Instant::now(); VARIABLES],
            nodes,
            drained: None,
            next_job: 0,
        }
    }

    fn call(&mut self, method: &str, path: &str, body: Option<&Value>) -> Outcome {
        let server = self.rng.gen_range(0..SERVERS.len());
        let body = body.map(Value::to_string);
        match request(method, &server_addr(server), path, body.as_deref(), TIMEOUT) {
            None => Outcome::Unknown(format!("no answer from s{server}")),
            Some(answer) if answer.status == 200 => Outcome::Ack(answer.json()),
            Some(answer) if answer.status >= 500 => {
                Outcome::Unknown(format!("{} from s{server}: {}", answer.status, answer.body))
            }
            Some(answer) => Outcome::Refused(answer.status, answer.body),
        }
    }

    fn record(&mut self, target: &str, kind: Kind, outcome: Outcome) -> Outcome {
        let op = Op {
            seq: self.seq,
            at: self.start.elapsed(),
            target: target.to_owned(),
            kind,
            outcome: outcome.clone(),
        };
        if op.unknown()
            && let Some(job) = self.jobs.get_mut(target)
        {
            job.busy_until = Instant::now() + QUARANTINE;
        }
        self.history.lock().unwrap().ops.push(op);
        outcome
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Registers the standing jobs (the parameterized one and the flaky one) until accepted
    /// (or `stop`).
    pub fn set_up(&mut self, stop: &AtomicBool) {
        for (id, body) in [
            (PARAMETERIZED, batch_job(PARAMETERIZED, 0, true)),
            (FLAKY, flaky_job(0)),
        ] {
            let seq = self.next_seq();
            let mut body = body;
            body["Job"]["Meta"]["op"] = json!(seq.to_string());
            loop {
                let outcome = self.call("PUT", "/v1/jobs", Some(&body));
                let acked = matches!(outcome, Outcome::Ack(_));
                if let Outcome::Refused(status, body) = &outcome {
                    panic!("the workload's job {id} was refused ({status}): {body}");
                }
                self.record(id, Kind::Register { count: 1 }, outcome);
                if acked || stop.load(Ordering::Relaxed) {
                    break;
                }
                std::thread::sleep(Duration::from_secs(1));
            }
        }
    }

    /// Runs operations until `stop`.
    pub fn run(&mut self, stop: &AtomicBool, drain_at: Duration) {
        while !stop.load(Ordering::Relaxed) {
            if self.drained.is_none() && self.start.elapsed() >= drain_at {
                self.drain(true, stop);
            } else if self.drained.is_some() && self.start.elapsed() >= drain_at * 2 {
                self.drain(false, stop);
            } else {
                self.one();
            }
            std::thread::sleep(Duration::from_millis(self.rng.gen_range(100..400)));
        }
        if self.drained.is_some() {
            // The drain is ended after the faults, with the cluster whole again.
            let never = AtomicBool::new(false);
            self.drain(false, &never);
        }
    }

    fn idle_job(&mut self, kind: &str, running: bool) -> Option<String> {
        let now = Instant::now();
        let ids: Vec<String> = self
            .jobs
            .iter()
            .filter(|(_, job)| job.kind == kind && job.busy_until <= now && job.stopped != running)
            .map(|(id, _)| id.clone())
            .collect();
        ids.choose(&mut self.rng).cloned()
    }

    fn one(&mut self) {
        let services = self
            .jobs
            .values()
            .filter(|job| job.kind == "service" && !job.stopped)
            .count();
        match self.rng.gen_range(0..100) {
            0..=14 if services < 6 => self.register_new(),
            0..=29 => self.update(),
            30..=39 => self.scale(),
            40..=44 => self.stop(),
            45..=49 => self.purge(),
            50..=56 => self.batch(),
            57..=64 => self.dispatch(),
            _ => self.var_write(),
        }
    }

    fn register_new(&mut self) {
        self.next_job += 1;
        let id = format!("svc-{}", self.next_job);
        let canary = self.rng.gen_bool(0.3);
        let count = self.rng.gen_range(1..=3);
        let seq = self.next_seq();
        self.jobs.insert(
            id.clone(),
            JobView {
                kind: "service",
                canary,
                count,
                stopped: false,
                busy_until: Instant::now(),
            },
        );
        let body = service_job(&id, seq, count, canary, &format!("t{seq}"));
        let outcome = self.call("PUT", "/v1/jobs", Some(&body));
        self.record(&id, Kind::Register { count }, outcome);
    }

    /// A destructive update (a new `OP` in the task's environment), or only new service tags.
    fn update(&mut self) {
        let Some(id) = self.idle_job("service", true) else {
            return self.register_new();
        };
        let view = self.jobs[&id].clone();
        let seq = self.next_seq();
        let body = service_job(&id, seq, view.count, view.canary, &format!("t{seq}"));
        let outcome = self.call("PUT", "/v1/jobs", Some(&body));
        self.record(&id, Kind::Register { count: view.count }, outcome);
    }

    fn scale(&mut self) {
        let Some(id) = self.idle_job("service", true) else {
            return;
        };
        let count = self.rng.gen_range(1..=3);
        let body = json!({"Count": count, "Target": {"Group": "app"}, "Message": "nemesis"});
        self.next_seq();
        let outcome = self.call("POST", &format!("/v1/job/{id}/scale"), Some(&body));
        if matches!(outcome, Outcome::Ack(_))
            && let Some(job) = self.jobs.get_mut(&id)
        {
            job.count = count;
        }
        self.record(&id, Kind::Scale { count }, outcome);
    }

    fn stop(&mut self) {
        let Some(id) = self.idle_job("service", true) else {
            return;
        };
        self.next_seq();
        let outcome = self.call("DELETE", &format!("/v1/job/{id}"), None);
        if let Some(job) = self.jobs.get_mut(&id) {
            job.stopped = true;
        }
        self.record(&id, Kind::Stop, outcome);
    }

    fn purge(&mut self) {
        let Some(id) = self.idle_job("service", false) else {
            return self.stop();
        };
        self.next_seq();
        let outcome = self.call("DELETE", &format!("/v1/job/{id}?purge=true"), None);
        // A purged job's ID is never used again; the job is left alone from now on.
        if let Some(job) = self.jobs.get_mut(&id) {
            job.kind = "purged";
        }
        self.record(&id, Kind::Purge, outcome);
    }

    fn batch(&mut self) {
        self.next_job += 1;
        let id = format!("bat-{}", self.next_job);
        let seq = self.next_seq();
        self.jobs.insert(
            id.clone(),
            JobView {
                kind: "batch",
                canary: false,
                count: 1,
                stopped: false,
                busy_until: Instant::now(),
            },
        );
        let outcome = self.call("PUT", "/v1/jobs", Some(&batch_job(&id, seq, false)));
        self.record(&id, Kind::Register { count: 1 }, outcome);
    }

    fn dispatch(&mut self) {
        self.next_seq();
        let outcome = self.call(
            "POST",
            &format!("/v1/job/{PARAMETERIZED}/dispatch"),
            Some(&json!({"Meta": {}})),
        );
        self.record(
            &format!("{PARAMETERIZED}/dispatch"),
            Kind::Dispatch,
            outcome,
        );
    }

    fn var_write(&mut self) {
        let index = self.rng.gen_range(0..VARIABLES);
        if self.var_busy[index] > Instant::now() {
            return;
        }
        let path = var_path(index);
        let server = self.rng.gen_range(0..SERVERS.len());
        let Some(current) = request(
            "GET",
            &server_addr(server),
            &format!("/v1/var/{path}"),
            None,
            TIMEOUT,
        ) else {
            return;
        };
        let (counter, cas) = match current.status {
            404 => (0, 0),
            200 => {
                let var = current.json();
                let counter = var["Items"]["n"]
                    .as_str()
                    .and_then(|n| n.parse::<u64>().ok())
                    .unwrap_or(0);
                (counter, var["ModifyIndex"].as_u64().unwrap_or(0))
            }
            _ => return,
        };
        let seq = self.next_seq();
        let body = json!({"Namespace": "default", "Path": path,
                          "Items": {"n": (counter + 1).to_string(), "w": seq.to_string()}});
        let outcome = self.call("PUT", &format!("/v1/var/{path}?cas={cas}"), Some(&body));
        if matches!(outcome, Outcome::Unknown(_)) {
            self.var_busy[index] = Instant::now() + QUARANTINE;
        }
        self.record(
            &path,
            Kind::VarCas {
                counter: counter + 1,
                cas,
            },
            outcome,
        );
    }

    fn drain(&mut self, on: bool, stop: &AtomicBool) {
        let node = match &self.drained {
            Some(node) => node.clone(),
            None => match self.nodes.choose(&mut self.rng) {
                Some(node) => node.clone(),
                None => return,
            },
        };
        self.next_seq();
        let body = if on {
            json!({"NodeID": node, "DrainSpec": {"Deadline": 15_000_000_000_u64, "IgnoreSystemJobs": false}})
        } else {
            json!({"NodeID": node, "DrainSpec": null, "MarkEligible": true})
        };
        // Drains are retried until acknowledged: the run must end with every node eligible.
        for _ in 0..30 {
            let outcome = self.call("POST", &format!("/v1/node/{node}/drain"), Some(&body));
            let acked = matches!(outcome, Outcome::Ack(_));
            self.record(&format!("node/{node}"), Kind::Drain { on }, outcome);
            if acked || stop.load(Ordering::Relaxed) {
                break;
            }
            std::thread::sleep(Duration::from_secs(1));
        }
        self.drained = on.then_some(node);
    }
}
