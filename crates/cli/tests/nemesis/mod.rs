//! The nemesis suite: a real cluster (see [`lab`]), a workload that records what the cluster
//! acknowledged ([`workload`]), faults drawn from a seed ([`faults`]), what was watched while
//! they happened ([`observe`]), and the invariants checked once the faults stop and the cluster
//! settles ([`check`]). [`run`] does one run of one seed and answers its figures, or the seed,
//! the fault schedule and the first violated invariant.

pub mod check;
pub mod faults;
pub mod lab;
pub mod observe;
pub mod workload;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::wait_for;
use lab::{CLIENTS, ETCD, Lab, SERVERS};

/// The figures of a run that violated nothing.
#[derive(Debug, Default)]
pub struct Figures {
    pub faults: faults::Tally,
    pub operations: usize,
    pub acknowledged: usize,
    pub invariants: BTreeMap<&'static str, usize>,
}

fn nodes_ready() -> Option<Vec<String>> {
    let (_, nodes) = check::read("/v1/nodes")?;
    let ready: Vec<String> = nodes
        .as_array()?
        .iter()
        .filter(|node| node["Status"] == "ready")
        .filter_map(|node| node["ID"].as_str().map(str::to_owned))
        .collect();
    (ready.len() == CLIENTS.len()).then_some(ready)
}

fn leader_known() -> Option<()> {
    (0..SERVERS.len()).find_map(|server| {
        let answer = lab::request(
            "GET",
            &lab::server_addr(server),
            "/v1/status/leader",
            None,
            Duration::from_secs(3),
        )?;
        (answer.status == 200 && answer.body.len() > 4).then_some(())
    })
}

/// One run: the cluster, `length` of faults from `seed` under the workload, then the checks.
/// The figures are answered whether or not an invariant was violated.
pub fn run(seed: u64, length: Duration) -> (Figures, Result<(), String>) {
    let steps = faults::schedule(seed, length);
    let schedule = faults::print_schedule(seed, &steps);
    eprintln!("{schedule}");
    let mut lab = Lab::new();
    for member in 0..ETCD.len() {
        lab.start_etcd(member);
    }
    for member in 0..ETCD.len() {
        Lab::wait_etcd_healthy(member);
    }
    for server in 0..SERVERS.len() {
        lab.start_server(server);
    }
    for server in 0..SERVERS.len() {
        Lab::wait_server_answers(server);
    }
    wait_for("a leader", lab::LIMIT, leader_known);
    for client in 0..CLIENTS.len() {
        lab.start_client(client);
    }
    let nodes = wait_for("every node ready", lab::LIMIT, nodes_ready);
    let data_dirs: Vec<_> = (0..CLIENTS.len()).map(|c| lab.client_data_dir(c)).collect();

    let start = Instant::now();
    let history = Arc::new(Mutex::new(workload::History::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let stop_watching = Arc::new(AtomicBool::new(false));
    let sightings = Arc::new(Mutex::new(BTreeMap::new()));
    let events = Arc::new(Mutex::new(observe::Events::default()));
    let sampler = {
        let (dirs, stop, sightings) = (data_dirs.clone(), stop_watching.clone(), sightings.clone());
        std::thread::spawn(move || observe::sample(dirs, start, stop, sightings))
    };
    let streamer = {
        let (prefix, stop, events) = (lab.prefix.clone(), stop_watching.clone(), events.clone());
        std::thread::spawn(move || observe::stream(prefix, stop, events))
    };
    let worker = {
        let (prefix, stop, history) = (lab.prefix.clone(), stop.clone(), history.clone());
        std::thread::spawn(move || {
            lab::enter_probe(&prefix);
            let mut workload = workload::Workload::new(seed, start, history, nodes);
            workload.set_up(&stop);
            workload.run(&stop, length / 3);
        })
    };

    let mut figures = Figures::default();
    for step in &steps {
        if let Some(wait) = step.at.checked_sub(start.elapsed()) {
            std::thread::sleep(wait);
        }
        eprintln!("+{:.1}s {}", start.elapsed().as_secs_f64(), step.fault);
        if faults::apply(&mut lab, &step.fault) {
            *figures.faults.entry(step.fault.kind()).or_default() += 1;
        }
        std::thread::sleep(step.hold);
        faults::heal(&mut lab, &step.fault);
    }
    if let Some(wait) = length.checked_sub(start.elapsed()) {
        std::thread::sleep(wait);
    }
    lab.heal_all();
    eprintln!(
        "+{:.1}s faults over, every process running",
        start.elapsed().as_secs_f64()
    );
    stop.store(true, Ordering::Relaxed);
    let _ = worker.join();
    eprintln!(
        "+{:.1}s workload over; settling",
        start.elapsed().as_secs_f64()
    );

    let outcome = settle_and_check(
        &history,
        &events,
        &sightings,
        &data_dirs,
        &stop_watching,
        &mut figures,
    );
    stop_watching.store(true, Ordering::Relaxed);
    let _ = sampler.join();
    let _ = streamer.join();
    let history = history.lock().unwrap();
    let unknown = history.ops.iter().filter(|op| op.unknown()).count();
    eprintln!(
        "operations: {} acknowledged, {unknown} unknown, {} refused",
        history.acknowledged(),
        history.ops.len() - history.acknowledged() - unknown
    );
    figures.operations = history.ops.len();
    figures.acknowledged = history.acknowledged();
    let outcome = outcome.map_err(|violation| {
        lab.keep = true;
        format!(
            "seed {seed}: invariant violated: {violation}\n{schedule}operations: {} ({} acknowledged)",
            figures.operations, figures.acknowledged
        )
    });
    (figures, outcome)
}

fn settle_and_check(
    history: &Mutex<workload::History>,
    events: &Mutex<observe::Events>,
    sightings: &Mutex<BTreeMap<String, Vec<observe::Sighting>>>,
    data_dirs: &[std::path::PathBuf],
    stop_watching: &AtomicBool,
    figures: &mut Figures,
) -> Result<(), String> {
    let settle = Duration::from_secs(180);
    let deadline = Instant::now() + settle;
    while leader_known().is_none() || nodes_ready().is_none() {
        if Instant::now() >= deadline {
            return Err(format!(
                "the cluster did not settle within {settle:?} of the faults stopping: leader known: {}, every node ready: {}",
                leader_known().is_some(),
                nodes_ready().is_some()
            ));
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    let history = history.lock().unwrap();
    let mut note = |name: &'static str, result: Result<usize, String>| -> Result<(), String> {
        eprintln!("checked: {name}: {result:?}");
        let count = result.map_err(|violation| format!("{name}: {violation}"))?;
        *figures.invariants.entry(name).or_default() += count;
        Ok(())
    };
    note(
        "the cluster takes writes again",
        check::cluster_takes_writes_again(Duration::from_secs(120)),
    )?;
    note(
        "jobs converge to their desired count",
        check::jobs_converge(&history, Duration::from_secs(180)),
    )?;
    // The stream gets a moment to catch up with the last writes.
    std::thread::sleep(Duration::from_secs(3));
    stop_watching.store(true, Ordering::Relaxed);
    note(
        "every acknowledged job write is there",
        check::jobs_hold_every_acknowledged_write(&history),
    )?;
    note(
        "every acknowledged CAS write is there, none took effect twice",
        check::variables_hold_every_cas_write(&history),
    )?;
    note(
        "the event stream skipped no index",
        check::event_stream_skipped_nothing(&history, &events.lock().unwrap()),
    )?;
    note(
        "a drain ended leaves every node eligible",
        check::drains_ended(&history),
    )?;
    let allocs = check::allocations()?;
    note(
        "no allocation ran on two nodes at once",
        check::nothing_ran_twice(&allocs, &sightings.lock().unwrap()),
    )?;
    note(
        "no Started after a final Killed",
        check::task_events_are_consistent(&allocs),
    )?;
    note(
        "no orphaned task process",
        check::no_orphans_while_running(&allocs, data_dirs),
    )?;
    let allocs = check::allocations()?;
    note(
        "nothing left on a node once every job is purged",
        check::nothing_left_after_stop(&history, &allocs, data_dirs, Duration::from_secs(90)),
    )?;
    Ok(())
}
