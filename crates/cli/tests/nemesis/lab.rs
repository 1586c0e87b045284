//! The nemesis's cluster: a 3-member etcd, three server agents and three client agents, each a
//! real process in a network namespace of its own on a bridge (as `e2e_cluster_netns` builds
//! it), every client's data dir on a small tmpfs of its own so that it can be filled. The lab
//! starts, kills, pauses and restarts its processes and adds and removes `iptables` rules; it
//! knows nothing of faults chosen at random or of the workload.

use std::fs::File;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{clean_up_after, drover_bin, process_alive, wait_for};

pub const LIMIT: Duration = Duration::from_secs(120);
const SUBNET: &str = "10.223.0";
const PROBE: u8 = 2;
pub const ETCD: [u8; 3] = [11, 12, 13];
pub const SERVERS: [u8; 3] = [21, 22, 23];
pub const CLIENTS: [u8; 3] = [31, 32, 33];
pub const HTTP_PORT: u16 = 4646;
/// The size of each client's data-dir file system (the jobs ask for 10 MB of ephemeral disk
/// per allocation).
const CLIENT_DISK: &str = "512m";
const PREFIX: &str = "drn";

pub fn address(host: u8) -> String {
    format!("{SUBNET}.{host}")
}

pub fn server_addr(index: usize) -> String {
    format!("{}:{HTTP_PORT}", address(SERVERS[index]))
}

/// A process of the lab, by role and index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Host {
    Etcd(usize),
    Server(usize),
    Client(usize),
}

impl Host {
    pub fn all() -> Vec<Host> {
        let mut hosts: Vec<Host> = (0..ETCD.len()).map(Host::Etcd).collect();
        hosts.extend((0..SERVERS.len()).map(Host::Server));
        hosts.extend((0..CLIENTS.len()).map(Host::Client));
        hosts
    }

    pub fn name(self) -> String {
        match self {
            Host::Etcd(i) => format!("e{i}"),
            Host::Server(i) => format!("s{i}"),
            Host::Client(i) => format!("c{i}"),
        }
    }

    pub fn ip(self) -> String {
        address(match self {
            Host::Etcd(i) => ETCD[i],
            Host::Server(i) => SERVERS[i],
            Host::Client(i) => CLIENTS[i],
        })
    }
}

/// Whether every tool the lab needs runs; panics under `CI=true` when one does not.
pub fn tools_available() -> bool {
    let runs = |program: &str, arg: &str| {
        Command::new(program)
            .arg(arg)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
    };
    let mut missing = Vec::new();
    for (program, arg, package) in [
        ("ip", "-V", "iproute2"),
        ("iptables", "--version", "iptables"),
        ("nsenter", "--version", "util-linux"),
        ("mount", "--version", "mount"),
        ("etcd", "--version", "etcd-server"),
    ] {
        if !runs(program, arg) {
            missing.push(format!("{program} ({package})"));
        }
    }
    if !nix::unistd::geteuid().is_root() {
        missing.push("root".to_owned());
    }
    if missing.is_empty() {
        return true;
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "missing {}; required under CI=true",
        missing.join(", ")
    );
    eprintln!("skipping: missing {}", missing.join(", "));
    false
}

fn run(program: &str, args: &[&str]) {
    let output = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|error| panic!("{program} {args:?}: {error}"));
    assert!(
        output.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// An HTTP answer: status and body.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub body: String,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
}

/// One HTTP/1.0 request to `host_port` within `timeout`; `None` when nothing answered.
pub fn request(
    method: &str,
    host_port: &str,
    path: &str,
    body: Option<&str>,
    timeout: Duration,
) -> Option<Answer> {
    let address: SocketAddr = host_port.parse().ok()?;
    let deadline = Instant::now() + timeout;
    let mut stream = TcpStream::connect_timeout(&address, timeout).ok()?;
    stream.set_write_timeout(Some(timeout)).ok()?;
    let body = body.unwrap_or("");
    write!(
        stream,
        "{method} {path} HTTP/1.0\r\nHost: {host_port}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .ok()?;
    let mut raw = Vec::new();
    let mut buffer = [0_u8; 16 * 1024];
    loop {
        let left = deadline.checked_duration_since(Instant::now())?;
        stream
            .set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .ok()?;
        match stream.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&buffer[..n]),
            Err(_) => return None,
        }
    }
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some(Answer {
        status,
        body: body.to_owned(),
    })
}

/// Moves the calling thread into the probe's namespace (every thread that talks to the lab).
pub fn enter_probe(prefix: &str) {
    let probe = File::open(format!("/run/netns/{prefix}-probe")).unwrap();
    nix::sched::setns(probe.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
}

/// A process started in one of the lab's namespaces, its stderr in a log file.
pub struct NsProcess {
    child: Option<Child>,
    pub data_dir: PathBuf,
    pub paused: bool,
}

impl NsProcess {
    fn start(netns: &str, program: &Path, args: &[String], data_dir: &Path, log: &Path) -> Self {
        std::fs::create_dir_all(data_dir).unwrap();
        let stderr = File::options().create(true).append(true).open(log).unwrap();
        let child = Command::new("nsenter")
            .arg(format!("--net=/run/netns/{netns}"))
            .arg("--")
            .arg(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .unwrap();
        Self {
            child: Some(child),
            data_dir: data_dir.to_owned(),
            paused: false,
        }
    }

    fn pid(&self) -> Option<nix::unistd::Pid> {
        self.child
            .as_ref()
            .map(|child| nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap()))
    }

    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.paused = false;
    }

    pub fn signal(&mut self, signal: nix::sys::signal::Signal) {
        if let Some(pid) = self.pid() {
            let _ = nix::sys::signal::kill(pid, signal);
        }
        self.paused = signal == nix::sys::signal::Signal::SIGSTOP;
    }

    /// SIGCONT (if paused), SIGTERM, then SIGKILL if it has not gone within 20 s.
    fn stop(&mut self) {
        self.signal(nix::sys::signal::Signal::SIGCONT);
        let Some(mut child) = self.child.take() else {
            return;
        };
        let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// The lab's network, etcd members and agents; everything goes on drop.
pub struct Lab {
    pub prefix: String,
    pub dir: tempfile::TempDir,
    namespaces: Vec<String>,
    home: Option<File>,
    pub etcd: Vec<NsProcess>,
    pub servers: Vec<NsProcess>,
    pub clients: Vec<NsProcess>,
    /// `iptables` rules in force, as (namespace, rule arguments).
    rules: Vec<(String, Vec<String>)>,
    /// The tmpfs mounted on each client's data dir.
    disks: Vec<PathBuf>,
    /// Kept when the run failed.
    pub keep: bool,
}

impl Lab {
    pub fn netns(&self, name: &str) -> String {
        format!("{}-{name}", self.prefix)
    }

    /// The bridge, a namespace per process, and the calling thread in the probe's.
    pub fn new() -> Self {
        remove_namespaces_of_dead_runs();
        let prefix = format!("{PREFIX}-{}", std::process::id());
        let mut lab = Lab {
            prefix,
            dir: tempfile::tempdir().unwrap(),
            namespaces: Vec::new(),
            home: None,
            etcd: Vec::new(),
            servers: Vec::new(),
            clients: Vec::new(),
            rules: Vec::new(),
            disks: Vec::new(),
            keep: false,
        };
        let bridge = lab.netns("br");
        run("ip", &["netns", "add", &bridge]);
        lab.namespaces.push(bridge.clone());
        run(
            "ip",
            &["-n", &bridge, "link", "add", "br0", "type", "bridge"],
        );
        run("ip", &["-n", &bridge, "link", "set", "br0", "up"]);
        let mut hosts = vec![("probe".to_owned(), address(PROBE))];
        hosts.extend(Host::all().into_iter().map(|host| (host.name(), host.ip())));
        for (name, ip) in hosts {
            let netns = lab.netns(&name);
            run("ip", &["netns", "add", &netns]);
            lab.namespaces.push(netns.clone());
            let veth = format!("v{name}");
            run(
                "ip",
                &[
                    "-n", &bridge, "link", "add", &veth, "type", "veth", "peer", "name", "eth0",
                    "netns", &netns,
                ],
            );
            run(
                "ip",
                &["-n", &bridge, "link", "set", &veth, "master", "br0", "up"],
            );
            run(
                "ip",
                &[
                    "-n",
                    &netns,
                    "addr",
                    "add",
                    &format!("{ip}/24"),
                    "dev",
                    "eth0",
                ],
            );
            run("ip", &["-n", &netns, "link", "set", "eth0", "up"]);
            run("ip", &["-n", &netns, "link", "set", "lo", "up"]);
        }
        lab.home = Some(File::open("/proc/thread-self/ns/net").unwrap());
        enter_probe(&lab.prefix);
        lab
    }

    fn etcd_cluster() -> String {
        (0..ETCD.len())
            .map(|i| format!("e{i}=http://{}:2380", Host::Etcd(i).ip()))
            .collect::<Vec<_>>()
            .join(",")
    }

    pub fn start_etcd(&mut self, member: usize) {
        let url = |port: u16| format!("http://{}:{port}", Host::Etcd(member).ip());
        let name = format!("e{member}");
        let data_dir = self.dir.path().join(&name);
        let args: Vec<String> = [
            "--name",
            &name,
            "--data-dir",
            &data_dir.display().to_string(),
            "--listen-client-urls",
            &url(2379),
            "--advertise-client-urls",
            &url(2379),
            "--listen-peer-urls",
            &url(2380),
            "--initial-advertise-peer-urls",
            &url(2380),
            "--initial-cluster",
            &Self::etcd_cluster(),
            "--initial-cluster-state",
            "new",
            "--initial-cluster-token",
            &self.prefix,
            "--heartbeat-interval",
            "100",
            "--election-timeout",
            "1000",
        ]
        .iter()
        .map(|arg| (*arg).to_owned())
        .collect();
        let process = NsProcess::start(
            &self.netns(&name),
            Path::new("etcd"),
            &args,
            &data_dir,
            &self.dir.path().join(format!("{name}.log")),
        );
        put(&mut self.etcd, member, process);
    }

    pub fn wait_etcd_healthy(member: usize) {
        let host_port = format!("{}:2379", Host::Etcd(member).ip());
        wait_for(&format!("etcd member {member} healthy"), LIMIT, || {
            let answer = request("GET", &host_port, "/health", None, Duration::from_secs(5))?;
            (answer.json()["health"] == "true").then_some(())
        });
    }

    pub fn start_server(&mut self, index: usize) {
        let name = format!("s{index}");
        let dir = self.dir.path().join(&name);
        std::fs::create_dir_all(&dir).unwrap();
        let endpoints: Vec<String> = (0..ETCD.len())
            .map(|i| format!("\"http://{}:2379\"", Host::Etcd(i).ip()))
            .collect();
        let config = dir.join("server.hcl");
        std::fs::write(
            &config,
            format!(
                "name = \"{name}\"\nbind_addr = \"{}\"\nserver {{\n  enabled = true\n  min_heartbeat_ttl = \"5s\"\n  heartbeat_grace = \"5s\"\n}}\nclient {{\n  enabled = false\n}}\netcd {{\n  endpoints = [{}]\n  prefix    = \"drover/\"\n}}\n",
                Host::Server(index).ip(),
                endpoints.join(", ")
            ),
        )
        .unwrap();
        let process = self.start_agent(&name, &config);
        put(&mut self.servers, index, process);
    }

    pub fn wait_server_answers(index: usize) {
        wait_for(&format!("server s{index} answering"), LIMIT, || {
            request(
                "GET",
                &server_addr(index),
                "/v1/agent/self",
                None,
                Duration::from_secs(5),
            )
            .filter(|answer| answer.status == 200)
        });
    }

    /// Client `index`, knowing every server; its data dir a tmpfs of its own.
    pub fn start_client(&mut self, index: usize) {
        let name = format!("c{index}");
        let dir = self.dir.path().join(&name);
        let data_dir = dir.join("data");
        if index >= self.disks.len() {
            std::fs::create_dir_all(&data_dir).unwrap();
            run(
                "mount",
                &[
                    "-t",
                    "tmpfs",
                    "-o",
                    &format!("size={CLIENT_DISK}"),
                    "tmpfs",
                    &data_dir.display().to_string(),
                ],
            );
            self.disks.push(data_dir.clone());
        }
        let servers: Vec<String> = (0..SERVERS.len())
            .map(|server| format!("\"{}\"", server_addr((server + index) % SERVERS.len())))
            .collect();
        let config = dir.join("client.hcl");
        std::fs::write(
            &config,
            format!(
                "name = \"{name}\"\nbind_addr = \"{}\"\nserver {{\n  enabled = false\n}}\nclient {{\n  enabled = true\n  servers = [{}]\n}}\n",
                Host::Client(index).ip(),
                servers.join(", ")
            ),
        )
        .unwrap();
        let process = self.start_agent(&name, &config);
        put(&mut self.clients, index, process);
    }

    fn start_agent(&self, name: &str, config: &Path) -> NsProcess {
        let dir = self.dir.path().join(name);
        let data_dir = dir.join("data");
        let args = vec![
            "agent".to_owned(),
            format!("-config={}", config.display()),
            format!("-data-dir={}", data_dir.display()),
            format!("-http-port={HTTP_PORT}"),
            "-log-json".to_owned(),
        ];
        NsProcess::start(
            &self.netns(name),
            &drover_bin(),
            &args,
            &data_dir,
            &dir.join("agent.log"),
        )
    }

    pub fn process(&mut self, host: Host) -> &mut NsProcess {
        match host {
            Host::Etcd(i) => &mut self.etcd[i],
            Host::Server(i) => &mut self.servers[i],
            Host::Client(i) => &mut self.clients[i],
        }
    }

    pub fn restart(&mut self, host: Host) {
        match host {
            Host::Etcd(i) => self.start_etcd(i),
            Host::Server(i) => self.start_server(i),
            Host::Client(i) => self.start_client(i),
        }
    }

    /// Drops packets `from` → `to` (in `from`'s namespace), and `to` → `from` too unless
    /// `one_way` (in `from`'s namespace as well: its INPUT chain).
    pub fn cut(&mut self, from: Host, to: Host, one_way: bool) {
        let netns = self.netns(&from.name());
        let mut rules = vec![vec!["OUTPUT".to_owned(), "-d".to_owned(), to.ip()]];
        if !one_way {
            rules.push(vec!["INPUT".to_owned(), "-s".to_owned(), to.ip()]);
        }
        for mut rule in rules {
            rule.extend(["-j".to_owned(), "DROP".to_owned()]);
            let mut args = vec!["netns", "exec", &netns, "iptables", "-A"];
            args.extend(rule.iter().map(String::as_str));
            run("ip", &args);
            self.rules.push((netns.clone(), rule));
        }
    }

    pub fn heal(&mut self) {
        for (netns, rule) in self.rules.drain(..) {
            let mut args = vec!["netns", "exec", netns.as_str(), "iptables", "-D"];
            args.extend(rule.iter().map(String::as_str));
            run("ip", &args);
        }
    }

    /// Fills client `index`'s data dir until its file system is full; answers the filler's path.
    pub fn fill_disk(&self, index: usize) -> PathBuf {
        let path = self.disks[index].join("nemesis-filler");
        let mut file = File::create(&path).unwrap();
        let chunk = vec![0_u8; 1 << 20];
        while file.write_all(&chunk).is_ok() {}
        let _ = file.sync_all();
        path
    }

    pub fn client_data_dir(&self, index: usize) -> PathBuf {
        self.dir.path().join(format!("c{index}")).join("data")
    }

    /// Every process back and running: paused ones continued, rules removed.
    pub fn heal_all(&mut self) {
        self.heal();
        for host in Host::all() {
            let process = self.process(host);
            if process.paused {
                process.signal(nix::sys::signal::Signal::SIGCONT);
            }
            if process.child.is_none() {
                self.restart(host);
            }
        }
        for index in 0..CLIENTS.len() {
            let _ = std::fs::remove_file(self.disks[index].join("nemesis-filler"));
        }
    }
}

fn put(processes: &mut Vec<NsProcess>, index: usize, process: NsProcess) {
    if index < processes.len() {
        processes[index] = process;
    } else {
        processes.push(process);
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for process in self.clients.iter_mut().chain(self.servers.iter_mut()) {
            process.stop();
            clean_up_after(&process.data_dir);
        }
        for process in &mut self.etcd {
            process.signal(nix::sys::signal::Signal::SIGCONT);
            process.kill9();
        }
        for (netns, rule) in self.rules.drain(..) {
            let mut args = vec!["netns", "exec", netns.as_str(), "iptables", "-D"];
            args.extend(rule.iter().map(String::as_str));
            let _ = Command::new("ip").args(&args).output();
        }
        for disk in self.disks.drain(..) {
            let _ = nix::mount::umount2(&disk, nix::mount::MntFlags::MNT_DETACH);
        }
        if let Some(home) = self.home.take() {
            let _ = nix::sched::setns(home.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET);
        }
        for netns in self.namespaces.drain(..).rev() {
            let _ = Command::new("ip").args(["netns", "del", &netns]).output();
        }
        if self.keep || std::thread::panicking() {
            let dir = std::mem::replace(&mut self.dir, tempfile::tempdir().unwrap());
            eprintln!("the logs are kept in {}", dir.keep().display());
        }
    }
}

/// Namespaces left by runs that were killed before they could clean up.
fn remove_namespaces_of_dead_runs() {
    let Ok(entries) = std::fs::read_dir("/run/netns") else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(&format!("{PREFIX}-"))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<i32>().ok())
        else {
            continue;
        };
        if !process_alive(pid) {
            let _ = Command::new("ip").args(["netns", "del", &name]).output();
        }
    }
}
