//! The nemesis: a fault schedule drawn from a seed (the same seed, the same schedule), and its
//! application to the lab. Faults come one after the other, each held for a while and then
//! healed: `kill -9` and restart of a server, a client, an etcd member or a task's shim; an
//! `iptables` partition between two groups of hosts, both ways or one way; SIGSTOP/SIGCONT of
//! any process; a full disk under a client's data dir.
//!
//! No clock jump: every agent reads the host's real-time clock (a time namespace offsets only
//! the monotonic and boot-time clocks), so a jump on one agent would have to move the whole
//! machine's clock.
//!
//! A client's agent is never down or paused for longer than its heartbeat TTL and grace allow
//! (a stopped agent cannot stop its tasks, so its node would be replaced while they still
//! run, as in Nomad); a partition may last longer: the jobs' `disconnect { stop_on_client_after }`
//! stops the cut-off client's allocations before the servers replace them.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use nix::sys::signal::Signal;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use super::lab::{CLIENTS, ETCD, Host, Lab, SERVERS};

/// One fault and how long it is held before it is healed.
#[derive(Debug, Clone)]
pub enum Fault {
    Kill(Host),
    KillShim(usize),
    Partition {
        from: Vec<Host>,
        to: Vec<Host>,
        one_way: bool,
    },
    Pause(Host),
    DiskFull(usize),
}

impl Fault {
    pub fn kind(&self) -> &'static str {
        match self {
            Fault::Kill(Host::Server(_)) => "kill -9 server",
            Fault::Kill(Host::Client(_)) => "kill -9 client",
            Fault::Kill(Host::Etcd(_)) => "kill -9 etcd member",
            Fault::KillShim(_) => "kill -9 task shim",
            Fault::Partition { one_way: false, .. } => "partition",
            Fault::Partition { one_way: true, .. } => "one-way partition",
            Fault::Pause(_) => "SIGSTOP/SIGCONT",
            Fault::DiskFull(_) => "full client disk",
        }
    }
}

fn names(hosts: &[Host]) -> String {
    hosts
        .iter()
        .map(|host| host.name())
        .collect::<Vec<_>>()
        .join(",")
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Kill(host) => write!(f, "kill -9 {}", host.name()),
            Fault::KillShim(client) => write!(f, "kill -9 a shim on c{client}"),
            Fault::Partition { from, to, one_way } => write!(
                f,
                "cut [{}] {} [{}]",
                names(from),
                if *one_way { "->" } else { "<->" },
                names(to)
            ),
            Fault::Pause(host) => write!(f, "SIGSTOP {}", host.name()),
            Fault::DiskFull(client) => write!(f, "fill c{client}'s disk"),
        }
    }
}

/// A fault at an offset from the start of the run, held for `hold`.
#[derive(Debug, Clone)]
pub struct Step {
    pub at: Duration,
    pub fault: Fault,
    pub hold: Duration,
}

/// The schedule of a run of `length` drawn from `seed`.
pub fn schedule(seed: u64, length: Duration) -> Vec<Step> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut steps = Vec::new();
    let mut at = Duration::from_secs(rng.gen_range(2..5));
    while at < length {
        let (fault, hold) = draw(&mut rng);
        steps.push(Step { at, fault, hold });
        at += hold + Duration::from_millis(rng.gen_range(1_500..5_000));
    }
    steps
}

fn millis(rng: &mut StdRng, range: std::ops::Range<u64>) -> Duration {
    Duration::from_millis(rng.gen_range(range))
}

fn draw(rng: &mut StdRng) -> (Fault, Duration) {
    let client = rng.gen_range(0..CLIENTS.len());
    match rng.gen_range(0..9) {
        0 => (
            Fault::Kill(Host::Server(rng.gen_range(0..SERVERS.len()))),
            millis(rng, 500..4_000),
        ),
        1 => (Fault::Kill(Host::Client(client)), millis(rng, 500..3_000)),
        2 => (
            Fault::Kill(Host::Etcd(rng.gen_range(0..ETCD.len()))),
            millis(rng, 500..5_000),
        ),
        3 => (Fault::KillShim(client), millis(rng, 1_000..3_000)),
        4 | 5 => {
            let mut hosts = Host::all();
            hosts.shuffle(rng);
            let split = rng.gen_range(1..hosts.len());
            let (from, rest) = hosts.split_at(split);
            let take = rng.gen_range(1..=rest.len());
            let mut from = from.to_vec();
            let mut to = rest[..take].to_vec();
            from.sort();
            to.sort();
            (
                Fault::Partition {
                    from,
                    to,
                    one_way: rng.gen_bool(0.4),
                },
                millis(rng, 2_000..15_000),
            )
        }
        6 | 7 => {
            let host = *Host::all().choose(rng).unwrap_or(&Host::Server(0));
            let hold = match host {
                Host::Client(_) => millis(rng, 500..4_000),
                _ => millis(rng, 500..8_000),
            };
            (Fault::Pause(host), hold)
        }
        _ => (Fault::DiskFull(client), millis(rng, 2_000..8_000)),
    }
}

pub fn print_schedule(seed: u64, steps: &[Step]) -> String {
    let mut text = format!("fault schedule of seed {seed}:\n");
    for step in steps {
        text.push_str(&format!(
            "  +{:>6.1}s  {} for {:.1}s\n",
            step.at.as_secs_f64(),
            step.fault,
            step.hold.as_secs_f64()
        ));
    }
    text
}

/// Applies `fault` to the lab; answers whether it could be (a shim to kill may not exist).
pub fn apply(lab: &mut Lab, fault: &Fault) -> bool {
    match fault {
        Fault::Kill(host) => {
            lab.process(*host).kill9();
            true
        }
        Fault::KillShim(client) => {
            let shims = shims_of(&lab.client_data_dir(*client));
            match shims.first() {
                Some(&pid) => {
                    let _ =
                        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), Signal::SIGKILL);
                    true
                }
                None => false,
            }
        }
        Fault::Partition { from, to, one_way } => {
            for &a in from {
                for &b in to {
                    lab.cut(a, b, *one_way);
                }
            }
            true
        }
        Fault::Pause(host) => {
            lab.process(*host).signal(Signal::SIGSTOP);
            true
        }
        Fault::DiskFull(client) => {
            lab.fill_disk(*client);
            true
        }
    }
}

/// Heals `fault`: restarts what was killed, continues what was paused, removes the rules and
/// the filler.
pub fn heal(lab: &mut Lab, fault: &Fault) {
    match fault {
        Fault::Kill(host) => lab.restart(*host),
        Fault::KillShim(_) => {}
        Fault::Partition { .. } => lab.heal(),
        Fault::Pause(host) => lab.process(*host).signal(Signal::SIGCONT),
        Fault::DiskFull(client) => {
            let _ = std::fs::remove_file(lab.client_data_dir(*client).join("nemesis-filler"));
        }
    }
}

/// The pids of the task shims of a client (by their command line or environment naming its
/// data dir), in pid order.
pub fn shims_of(data_dir: &std::path::Path) -> Vec<i32> {
    let needle = data_dir.to_string_lossy().into_owned();
    let mut pids = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return pids;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if comm.trim() != "drover-shim" {
            continue;
        }
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(&needle)
            || String::from_utf8_lossy(&environ).contains(&needle)
        {
            pids.push(pid);
        }
    }
    pids.sort_unstable();
    pids
}

/// Faults injected, by kind.
pub type Tally = BTreeMap<&'static str, usize>;
