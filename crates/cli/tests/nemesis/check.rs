//! The checker: after the faults stop and the cluster settles, the history of acknowledged
//! operations, what was sampled while it ran, and the final state are held against the
//! invariants. Each check answers the first violation it finds, as text.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use super::lab::{SERVERS, request, server_addr};
use super::observe::{Events, Sighting, TaskProcess, task_processes};
use super::workload::{History, Kind, Op, Outcome, PARAMETERIZED, VARIABLES, var_path};

/// A GET answered 200 by some server (each tried in turn, a few rounds).
pub fn read(path: &str) -> Option<(u16, Value)> {
    for round in 0..6 {
        for server in 0..SERVERS.len() {
            if let Some(answer) = request(
                "GET",
                &server_addr(server),
                path,
                None,
                Duration::from_secs(4),
            ) && (answer.status == 200 || answer.status == 404)
            {
                return Some((answer.status, answer.json()));
            }
        }
        std::thread::sleep(Duration::from_millis(500 * (round + 1)));
    }
    None
}

/// A job as the model sees it: (exists, stopped, marker, count).
type JobState = (bool, bool, u64, u64);

fn apply(state: JobState, op: &Op) -> JobState {
    let (exists, stopped, marker, count) = state;
    match op.kind {
        Kind::Register { count } => (true, false, op.seq, count),
        Kind::Scale { count } if exists => (exists, stopped, marker, count),
        Kind::Stop if exists => (exists, true, marker, count),
        Kind::Purge => (false, false, 0, 0),
        _ => state,
    }
}

/// Every acknowledged job write is there: the final job is what the acknowledged writes, and
/// some of the writes whose outcome is unknown, make of it (in the order they were made).
pub fn jobs_hold_every_acknowledged_write(history: &History) -> Result<usize, String> {
    let targets: BTreeSet<&str> = history
        .ops
        .iter()
        .filter(|op| {
            matches!(
                op.kind,
                Kind::Register { .. } | Kind::Scale { .. } | Kind::Stop | Kind::Purge
            )
        })
        .map(|op| op.target.as_str())
        .collect();
    let mut checked = 0;
    for target in targets {
        let ops: Vec<&Op> = history
            .of(target)
            .into_iter()
            .filter(|op| !matches!(op.outcome, Outcome::Refused(..)))
            .collect();
        let unknown: Vec<usize> = (0..ops.len()).filter(|&i| ops[i].unknown()).collect();
        if unknown.len() > 12 {
            continue;
        }
        let (status, job) = read(&format!("/v1/job/{target}"))
            .ok_or_else(|| format!("no server answered for job {target}"))?;
        let actual: JobState = if status == 404 {
            (false, false, 0, 0)
        } else {
            (
                true,
                job["Stop"].as_bool().unwrap_or(false),
                job["Meta"]["op"]
                    .as_str()
                    .and_then(|op| op.parse().ok())
                    .unwrap_or(0),
                job["TaskGroups"][0]["Count"].as_u64().unwrap_or(0),
            )
        };
        let mut possible = BTreeSet::new();
        for mask in 0..(1_u32 << unknown.len()) {
            let mut state: JobState = (false, false, 0, 0);
            for (i, op) in ops.iter().enumerate() {
                let taken = match unknown.iter().position(|&u| u == i) {
                    Some(bit) => mask & (1 << bit) != 0,
                    None => true,
                };
                if taken {
                    state = apply(state, op);
                }
            }
            possible.insert(state);
        }
        checked += 1;
        if !possible.contains(&actual) {
            let ops: Vec<String> = ops
                .iter()
                .map(|op| {
                    format!(
                        "#{} +{:.1}s {:?} {}",
                        op.seq,
                        op.at.as_secs_f64(),
                        op.kind,
                        outcome_word(&op.outcome)
                    )
                })
                .collect();
            return Err(format!(
                "job {target} is (exists, stopped, op, count) = {actual:?}, none of {possible:?} \
                 its history allows:\n    {}",
                ops.join("\n    ")
            ));
        }
    }
    Ok(checked)
}

fn outcome_word(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Ack(_) => "acknowledged".to_owned(),
        Outcome::Refused(status, body) => format!("refused {status}: {}", body.trim()),
        Outcome::Unknown(why) => format!("unknown ({})", why.trim()),
    }
}

/// Every variable holds its last acknowledged check-and-set write (or a later one whose
/// outcome is unknown); no two acknowledged writes took effect on the same modify index; no
/// write answered with a conflict took effect.
pub fn variables_hold_every_cas_write(history: &History) -> Result<usize, String> {
    let mut checked = 0;
    for index in 0..VARIABLES {
        let path = var_path(index);
        let ops = history.of(&path);
        if ops.is_empty() {
            continue;
        }
        let (status, var) = read(&format!("/v1/var/{path}"))
            .ok_or_else(|| format!("no server answered for {path}"))?;
        let counter = if status == 404 {
            0
        } else {
            var["Items"]["n"]
                .as_str()
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or(0)
        };
        let writer = var["Items"]["w"].as_str().unwrap_or_default().to_owned();
        let mut bases = BTreeMap::new();
        let mut indexes = BTreeMap::new();
        let mut last_acked: Option<&Op> = None;
        for op in &ops {
            let Kind::VarCas {
                counter: wrote,
                cas,
            } = op.kind
            else {
                continue;
            };
            match &op.outcome {
                Outcome::Ack(answer) => {
                    if let Some(other) = bases.insert(cas, op.seq) {
                        return Err(format!(
                            "{path}: writes #{other} and #{} both took effect with cas={cas}",
                            op.seq
                        ));
                    }
                    if let Some(modify) = answer["ModifyIndex"].as_u64()
                        && let Some(other) = indexes.insert(modify, op.seq)
                    {
                        return Err(format!(
                            "{path}: writes #{other} and #{} were both acknowledged at modify index {modify}",
                            op.seq
                        ));
                    }
                    let _ = wrote;
                    last_acked = Some(op);
                }
                Outcome::Refused(409, body) => {
                    let current: Value = serde_json::from_str(body).unwrap_or(Value::Null);
                    if current["Items"]["w"].as_str() == Some(op.seq.to_string().as_str()) {
                        return Err(format!(
                            "{path}: write #{} was refused as a conflict, yet it is the value the conflict answer holds",
                            op.seq
                        ));
                    }
                }
                _ => {}
            }
        }
        checked += 1;
        if let Some(last) = last_acked {
            let Kind::VarCas { counter: wrote, .. } = last.kind else {
                continue;
            };
            let later_unknown: Vec<u64> = ops
                .iter()
                .filter(|op| op.seq > last.seq && op.unknown())
                .map(|op| op.seq)
                .collect();
            let holds_last = writer == last.seq.to_string() && counter == wrote;
            let holds_later =
                later_unknown.iter().any(|seq| writer == seq.to_string()) && counter > wrote;
            if !holds_last && !holds_later {
                return Err(format!(
                    "{path} holds n={counter} from write #{writer}; the last acknowledged write is #{} (n={wrote}), \
                     later writes of unknown outcome {later_unknown:?}",
                    last.seq
                ));
            }
        }
    }
    Ok(checked)
}

/// Every acknowledged job and variable write shows in the event stream at the index its answer
/// gave, and no connection's indexes went backwards.
pub fn event_stream_skipped_nothing(history: &History, events: &Events) -> Result<usize, String> {
    if let Some(regression) = events.regressions.first() {
        return Err(format!("event stream: {regression}"));
    }
    let mut checked = 0;
    for op in &history.ops {
        let Outcome::Ack(answer) = &op.outcome else {
            continue;
        };
        let (topic, index, key) = match op.kind {
            Kind::Register { .. } | Kind::Scale { .. } | Kind::Stop | Kind::Purge => {
                ("Job", answer["JobModifyIndex"].as_u64(), op.target.clone())
            }
            Kind::VarCas { .. } => (
                "Variable",
                answer["ModifyIndex"].as_u64(),
                op.target.clone(),
            ),
            _ => continue,
        };
        let Some(index) = index.filter(|&index| index > 0) else {
            continue;
        };
        checked += 1;
        if !events
            .seen
            .contains(&(topic.to_owned(), index, key.clone()))
        {
            let near: Vec<&(String, u64, String)> = events
                .seen
                .iter()
                .filter(|(_, i, k)| *k == key || i.abs_diff(index) <= 2)
                .take(8)
                .collect();
            return Err(format!(
                "event stream: acknowledged write #{} ({:?} of {key}) at index {index} has no {topic} event there; \
                 near it the stream had {near:?}",
                op.seq, op.kind
            ));
        }
    }
    Ok(checked)
}

/// Every allocation, from the final state.
pub fn allocations() -> Result<Vec<Value>, String> {
    let (_, allocs) = read("/v1/allocations?task_states=true")
        .ok_or_else(|| "no server listed the allocations".to_owned())?;
    allocs
        .as_array()
        .cloned()
        .ok_or_else(|| format!("the allocation list is not a list: {allocs}"))
}

/// No allocation ran on two nodes at once: an allocation replaced because its node was lost
/// (the jobs stop theirs on a cut-off client with `stop_on_client_after`) never ran while its
/// replacement did (2 s of slack for the sampling).
pub fn nothing_ran_twice(
    allocs: &[Value],
    sightings: &BTreeMap<String, Vec<Sighting>>,
) -> Result<usize, String> {
    let by_id: BTreeMap<&str, &Value> = allocs
        .iter()
        .filter_map(|alloc| Some((alloc["ID"].as_str()?, alloc)))
        .collect();
    let mut checked = 0;
    for alloc in allocs {
        let Some(previous) = alloc["PreviousAllocation"]
            .as_str()
            .filter(|p| !p.is_empty())
        else {
            continue;
        };
        let Some(old) = by_id.get(previous) else {
            continue;
        };
        if !matches!(old["ClientStatus"].as_str(), Some("lost" | "unknown")) {
            continue;
        }
        checked += 1;
        let id = alloc["ID"].as_str().unwrap_or_default();
        let (Some(new_runs), Some(old_runs)) = (sightings.get(id), sightings.get(previous)) else {
            continue;
        };
        for new_run in new_runs {
            for old_run in old_runs {
                if new_run.client == old_run.client {
                    continue;
                }
                let slack = Duration::from_secs(2);
                if new_run.first + slack < old_run.last && old_run.first + slack < new_run.last {
                    return Err(format!(
                        "allocation {previous} ({}, lost) ran on c{} until +{:.1}s while its replacement {id} \
                         ran on c{} from +{:.1}s",
                        old["Name"].as_str().unwrap_or_default(),
                        old_run.client,
                        old_run.last.as_secs_f64(),
                        new_run.client,
                        new_run.first.as_secs_f64()
                    ));
                }
            }
        }
    }
    Ok(checked)
}

/// No task event stream has a `Started` after a `Killed`.
pub fn task_events_are_consistent(allocs: &[Value]) -> Result<usize, String> {
    let mut checked = 0;
    for alloc in allocs {
        let Some(states) = alloc["TaskStates"].as_object() else {
            continue;
        };
        for (task, state) in states {
            checked += 1;
            let mut killed = false;
            for event in state["Events"].as_array().into_iter().flatten() {
                match event["Type"].as_str() {
                    Some("Killed") => killed = true,
                    Some("Started") if killed => {
                        return Err(format!(
                            "task {task} of allocation {} ({}) started again after it was killed: {}",
                            alloc["ID"], alloc["Name"], state["Events"]
                        ));
                    }
                    _ => {}
                }
            }
        }
    }
    Ok(checked)
}

/// The service jobs the workload made.
fn service_jobs(history: &History) -> BTreeSet<String> {
    history
        .ops
        .iter()
        .map(|op| op.target.clone())
        .filter(|target| target.starts_with("svc-"))
        .collect()
}

/// Every service job converges to its desired count (the count the final job says, all
/// running, on the final job's version), every batch job finishes, within `limit`.
pub fn jobs_converge(history: &History, limit: Duration) -> Result<usize, String> {
    let deadline = std::time::Instant::now() + limit;
    let targets = service_jobs(history);
    loop {
        let mut pending = None;
        let mut checked = 0;
        let (_, jobs) = read("/v1/jobs").ok_or_else(|| "no server listed the jobs".to_owned())?;
        for job in jobs.as_array().into_iter().flatten() {
            let id = job["ID"].as_str().unwrap_or_default();
            let kind = job["Type"].as_str().unwrap_or_default();
            if job["Stop"].as_bool() == Some(true)
                || job["ParameterizedJob"].as_bool() == Some(true)
            {
                continue;
            }
            checked += 1;
            if kind == "batch" {
                if job["Status"] != "dead" {
                    pending = Some(format!("batch job {id} is {}", job["Status"]));
                }
                continue;
            }
            if !targets.contains(id) {
                continue;
            }
            let Some((_, full)) = read(&format!("/v1/job/{id}")) else {
                continue;
            };
            let count = full["TaskGroups"][0]["Count"].as_u64().unwrap_or(0);
            let version = full["Version"].as_u64().unwrap_or(0);
            let Some((_, allocs)) = read(&format!("/v1/job/{id}/allocations")) else {
                continue;
            };
            let running = allocs
                .as_array()
                .into_iter()
                .flatten()
                .filter(|alloc| {
                    alloc["ClientStatus"] == "running"
                        && alloc["DesiredStatus"] == "run"
                        && alloc["JobVersion"].as_u64() == Some(version)
                })
                .count() as u64;
            let others = allocs
                .as_array()
                .into_iter()
                .flatten()
                .filter(|alloc| {
                    alloc["DesiredStatus"] == "run"
                        && matches!(alloc["ClientStatus"].as_str(), Some("running" | "pending"))
                })
                .count() as u64;
            if running != count || others != count {
                pending = Some(format!(
                    "job {id} (version {version}) wants {count}, has {running} running on that version and {others} meant to run"
                ));
            }
        }
        match pending {
            None => return Ok(checked),
            Some(what) if std::time::Instant::now() >= deadline => {
                return Err(format!("not converged after {limit:?}: {what}"));
            }
            Some(_) => std::thread::sleep(Duration::from_secs(2)),
        }
    }
}

/// Every task process on a node belongs to an allocation the servers have running there.
pub fn no_orphans_while_running(allocs: &[Value], data_dirs: &[PathBuf]) -> Result<usize, String> {
    let nodes = node_names()?;
    let by_id: BTreeMap<&str, &Value> = allocs
        .iter()
        .filter_map(|alloc| Some((alloc["ID"].as_str()?, alloc)))
        .collect();
    let processes = task_processes(data_dirs);
    for TaskProcess {
        pid,
        alloc_id,
        client,
    } in &processes
    {
        let fine = by_id.get(alloc_id.as_str()).is_some_and(|alloc| {
            alloc["DesiredStatus"] == "run"
                && matches!(alloc["ClientStatus"].as_str(), Some("running" | "pending"))
                && nodes.get(alloc["NodeID"].as_str().unwrap_or_default())
                    == Some(&format!("c{client}"))
        });
        if !fine {
            let alloc = by_id.get(alloc_id.as_str());
            return Err(format!(
                "orphan: pid {pid} on c{client} runs for allocation {alloc_id}, which the servers have as {}",
                alloc.map_or("nothing".to_owned(), |alloc| format!(
                    "{} {} desired {} on {}",
                    alloc["Name"], alloc["ClientStatus"], alloc["DesiredStatus"], alloc["NodeName"]
                ))
            ));
        }
    }
    Ok(processes.len())
}

pub fn node_names() -> Result<BTreeMap<String, String>, String> {
    let (_, nodes) = read("/v1/nodes").ok_or_else(|| "no server listed the nodes".to_owned())?;
    Ok(nodes
        .as_array()
        .into_iter()
        .flatten()
        .map(|node| {
            (
                node["ID"].as_str().unwrap_or_default().to_owned(),
                node["Name"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect())
}

/// Once every job is stopped, nothing of any allocation is left on any node: no task process,
/// no shim, no mount under an allocation dir, no task cgroup.
pub fn nothing_left_after_stop(
    history: &History,
    allocs: &[Value],
    data_dirs: &[PathBuf],
    limit: Duration,
) -> Result<usize, String> {
    let mut ids: BTreeSet<String> = history
        .ops
        .iter()
        .map(|op| op.target.clone())
        .filter(|target| !target.contains('/'))
        .collect();
    ids.insert(PARAMETERIZED.to_owned());
    if let Some((_, jobs)) = read("/v1/jobs") {
        for job in jobs.as_array().into_iter().flatten() {
            if let Some(id) = job["ID"].as_str() {
                ids.insert(id.to_owned());
            }
        }
    }
    for id in &ids {
        let mut done = false;
        for round in 0..20 {
            let server = round % SERVERS.len();
            if let Some(answer) = request(
                "DELETE",
                &server_addr(server),
                &format!("/v1/job/{id}?purge=true"),
                None,
                Duration::from_secs(10),
            ) && (answer.status == 200 || answer.status == 404)
            {
                done = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        if !done {
            return Err(format!("job {id} could not be purged"));
        }
    }
    let alloc_ids: BTreeSet<String> = allocs
        .iter()
        .filter_map(|alloc| alloc["ID"].as_str().map(str::to_owned))
        .collect();
    let deadline = std::time::Instant::now() + limit;
    loop {
        let left = leftovers(&alloc_ids, data_dirs);
        match left {
            None => return Ok(alloc_ids.len()),
            Some(what) if std::time::Instant::now() >= deadline => {
                return Err(format!(
                    "left behind {limit:?} after every job was purged: {what}"
                ));
            }
            Some(_) => std::thread::sleep(Duration::from_secs(1)),
        }
    }
}

fn leftovers(alloc_ids: &BTreeSet<String>, data_dirs: &[PathBuf]) -> Option<String> {
    if let Some(process) = task_processes(data_dirs).first() {
        return Some(format!(
            "task process {} of allocation {} on c{}",
            process.pid, process.alloc_id, process.client
        ));
    }
    for (client, dir) in data_dirs.iter().enumerate() {
        if let Some(pid) = super::faults::shims_of(dir).first() {
            return Some(format!("shim {pid} on c{client}"));
        }
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let alloc_root = dir.join("alloc").display().to_string();
        if let Some(target) = mounts
            .lines()
            .filter_map(|line| line.split(' ').nth(4))
            .find(|target| target.starts_with(&alloc_root))
        {
            return Some(format!("mount {target} on c{client}"));
        }
    }
    let mut parents = vec![PathBuf::from("/sys/fs/cgroup/drover")];
    parents.push(PathBuf::from("/sys/fs/cgroup/drover/reserved"));
    for parent in parents {
        for entry in std::fs::read_dir(&parent).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some((alloc, _)) = name.split_once('.')
                && alloc_ids.contains(alloc)
            {
                return Some(format!("cgroup {}", entry.path().display()));
            }
        }
    }
    for entry in std::fs::read_dir("/run/netns")
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        if alloc_ids.iter().any(|alloc| name.contains(alloc.as_str())) {
            return Some(format!("network namespace {name}"));
        }
    }
    None
}

/// A drain the workload ended (its last acknowledged drain write turned it off) is over: every
/// node is eligible and none drains.
pub fn drains_ended(history: &History) -> Result<usize, String> {
    let last = history
        .ops
        .iter()
        .filter(|op| op.acked())
        .filter_map(|op| match op.kind {
            Kind::Drain { on } => Some((op.target.clone(), on)),
            _ => None,
        })
        .next_back();
    let Some((target, false)) = last else {
        return Ok(0);
    };
    let (_, nodes) = read("/v1/nodes").ok_or_else(|| "no server listed the nodes".to_owned())?;
    for node in nodes.as_array().into_iter().flatten() {
        if node["Drain"].as_bool() == Some(true) || node["SchedulingEligibility"] != "eligible" {
            return Err(format!(
                "node {} drains ({}) or is {} after the drain of {target} was ended",
                node["Name"], node["Drain"], node["SchedulingEligibility"]
            ));
        }
    }
    Ok(1)
}

/// Once the faults are over the cluster takes writes again: a new job is acknowledged and its
/// allocation runs, within `limit`.
pub fn cluster_takes_writes_again(limit: Duration) -> Result<usize, String> {
    let deadline = std::time::Instant::now() + limit;
    let body = super::workload::service_job("after-faults", 0, 1, false, "after").to_string();
    let mut last = String::new();
    let mut acknowledged = false;
    while std::time::Instant::now() < deadline {
        let server = (deadline - std::time::Instant::now()).as_secs() as usize % SERVERS.len();
        if !acknowledged {
            match request(
                "PUT",
                &server_addr(server),
                "/v1/jobs",
                Some(&body),
                Duration::from_secs(5),
            ) {
                Some(answer) if answer.status == 200 => acknowledged = true,
                Some(answer) => {
                    last = format!(
                        "s{server} answered {}: {}",
                        answer.status,
                        answer.body.trim()
                    )
                }
                None => last = format!("s{server} did not answer"),
            }
        }
        if acknowledged {
            if let Some((_, allocs)) = read("/v1/job/after-faults/allocations")
                && allocs
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|alloc| alloc["ClientStatus"] == "running")
            {
                return Ok(1);
            }
            last = "the job was acknowledged, its allocation does not run".to_owned();
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    Err(format!(
        "no new job ran within {limit:?} of the faults ending: {last}\n{}",
        servers_view()
    ))
}

/// What each server says of the leader and the nodes (for a failure's message).
pub fn servers_view() -> String {
    let mut text = String::new();
    for server in 0..SERVERS.len() {
        let ask = |path: &str| {
            request(
                "GET",
                &server_addr(server),
                path,
                None,
                Duration::from_secs(4),
            )
            .map_or("no answer".to_owned(), |answer| answer.body)
        };
        let nodes: Vec<String> = serde_json::from_str::<Value>(&ask("/v1/nodes?stale=true"))
            .ok()
            .and_then(|nodes| nodes.as_array().cloned())
            .unwrap_or_default()
            .iter()
            .map(|node| {
                format!(
                    "{} {} {} drain={}",
                    node["Name"].as_str().unwrap_or_default(),
                    node["Status"].as_str().unwrap_or_default(),
                    node["SchedulingEligibility"].as_str().unwrap_or_default(),
                    node["Drain"]
                )
            })
            .collect();
        text.push_str(&format!(
            "  s{server}: leader {}, nodes [{}]\n",
            ask("/v1/status/leader").trim(),
            nodes.join("; ")
        ));
    }
    text
}
