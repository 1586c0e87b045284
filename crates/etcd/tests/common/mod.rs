//! A real 3-member etcd cluster on 127.0.0.1 for tests: its own free ports and data dirs in a
//! temp dir, members killed (and their dirs removed) when the cluster is dropped.
//!
//! `etcd` comes from Debian's `etcd-server` (installed by `.ci/run`). Without it the tests skip
//! with a message, except under `CI=true`, where they fail.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Whether `etcd` is on the PATH; panics under `CI=true` when it is not.
pub fn etcd_available() -> bool {
    let found = Command::new("etcd")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !found {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "etcd is not installed (apt-get install etcd-server); required under CI=true"
        );
        eprintln!("skipping: etcd is not installed (apt-get install etcd-server)");
    }
    found
}

/// A port nothing listens on and that no cluster of this process was given before. The kernel
/// may hand a just-released port out again; two clusters sharing a peer port would join each
/// other, so every port is given out once per process.
fn free_port() -> u16 {
    static GIVEN: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .map(|address| address.port())
            .unwrap();
        if GIVEN.lock().unwrap().insert(port) {
            return port;
        }
    }
}

struct Member {
    name: String,
    client_port: u16,
    peer_port: u16,
    data_dir: PathBuf,
    child: Option<Child>,
}

/// A running cluster.
pub struct EtcdCluster {
    _directory: tempfile::TempDir,
    members: Vec<Member>,
    initial_cluster: String,
    token: String,
}

impl EtcdCluster {
    /// Starts `size` members and waits until the cluster answers writes.
    pub async fn start(size: usize) -> Self {
        let directory = tempfile::tempdir().unwrap();
        let members: Vec<Member> = (0..size)
            .map(|number| Member {
                name: format!("e{number}"),
                client_port: free_port(),
                peer_port: free_port(),
                data_dir: directory.path().join(format!("e{number}")),
                child: None,
            })
            .collect();
        let initial_cluster = members
            .iter()
            .map(|member| format!("{}=http://127.0.0.1:{}", member.name, member.peer_port))
            .collect::<Vec<_>>()
            .join(",");
        // A token per cluster: members of two clusters never take each other as peers.
        static CLUSTERS: AtomicUsize = AtomicUsize::new(0);
        let token = format!(
            "drover-test-{}-{}",
            std::process::id(),
            CLUSTERS.fetch_add(1, Ordering::Relaxed)
        );
        let mut cluster = Self {
            _directory: directory,
            members,
            initial_cluster,
            token,
        };
        for number in 0..size {
            cluster.spawn(number);
        }
        cluster.wait_writable().await;
        cluster
    }

    fn spawn(&mut self, number: usize) {
        let member = &mut self.members[number];
        let client_url = format!("http://127.0.0.1:{}", member.client_port);
        let peer_url = format!("http://127.0.0.1:{}", member.peer_port);
        let log = std::fs::File::create(member.data_dir.with_extension("log")).unwrap();
        let child = Command::new("etcd")
            .args(["--name", &member.name])
            .arg("--data-dir")
            .arg(&member.data_dir)
            .args(["--listen-client-urls", &client_url])
            .args(["--advertise-client-urls", &client_url])
            .args(["--listen-peer-urls", &peer_url])
            .args(["--initial-advertise-peer-urls", &peer_url])
            .args(["--initial-cluster", &self.initial_cluster])
            .args(["--initial-cluster-state", "new"])
            .args(["--initial-cluster-token", &self.token])
            .args(["--heartbeat-interval", "100", "--election-timeout", "1000"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        member.child = Some(child);
    }

    /// The client URLs of every member.
    pub fn endpoints(&self) -> Vec<String> {
        self.members
            .iter()
            .map(|member| format!("http://127.0.0.1:{}", member.client_port))
            .collect()
    }

    /// Kills member `number` (SIGKILL).
    pub fn kill(&mut self, number: usize) {
        if let Some(mut child) = self.members[number].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts member `number` again on its data dir.
    pub fn restart(&mut self, number: usize) {
        self.spawn(number);
    }

    /// Waits until a write through any member succeeds (the cluster has a leader and quorum).
    pub async fn wait_writable(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        let config = drover_etcd::EtcdConfig {
            request_timeout: Duration::from_secs(2),
            ..drover_etcd::EtcdConfig::new(self.endpoints(), "drover-test-probe/")
        };
        loop {
            if let Ok(kv) = drover_etcd::EtcdKv::connect(&config).await {
                let mut probe = drover_state::WriteBatch::new();
                probe.put(b"probe".to_vec(), b"1".to_vec());
                if drover_state::Kv::apply(&kv, probe).await.is_ok() {
                    return;
                }
            }
            assert!(
                Instant::now() < deadline,
                "the etcd cluster did not become writable"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for number in 0..self.members.len() {
            self.kill(number);
        }
    }
}
