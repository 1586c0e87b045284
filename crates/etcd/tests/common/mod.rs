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

/// The files of a test CA, a server certificate for 127.0.0.1 and a client certificate, made
/// with the `openssl` CLI.
#[derive(Debug, Clone)]
pub struct TestCerts {
    pub ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
}

impl TestCerts {
    /// Makes them in `directory`; the client certificate's common name is `client_name`.
    pub fn make(directory: &std::path::Path, client_name: &str) -> Self {
        let openssl = |args: &[&str]| {
            let output = Command::new("openssl")
                .args(args)
                .current_dir(directory)
                .output()
                .expect("openssl runs (Debian's openssl package)");
            assert!(
                output.status.success(),
                "openssl {args:?}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        };
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ];
        let mut ca = vec!["req", "-x509"];
        ca.extend(ec);
        ca.extend([
            "-keyout",
            "ca-key.pem",
            "-out",
            "ca.pem",
            "-days",
            "2",
            "-subj",
            "/CN=drover-test-ca",
        ]);
        openssl(&ca);
        std::fs::write(
            directory.join("server.ext"),
            "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n",
        )
        .unwrap();
        std::fs::write(
            directory.join("client.ext"),
            "extendedKeyUsage=clientAuth\n",
        )
        .unwrap();
        for (name, subject) in [
            ("server", "/CN=etcd".to_owned()),
            ("client", format!("/CN={client_name}")),
        ] {
            let mut request = vec!["req"];
            request.extend(ec);
            let (key, csr, cert, ext) = (
                format!("{name}-key.pem"),
                format!("{name}.csr"),
                format!("{name}.pem"),
                format!("{name}.ext"),
            );
            request.extend(["-keyout", &key, "-out", &csr, "-subj", &subject]);
            openssl(&request);
            openssl(&[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca-key.pem",
                "-CAcreateserial",
                "-out",
                &cert,
                "-days",
                "2",
                "-extfile",
                &ext,
            ]);
        }
        Self {
            ca: directory.join("ca.pem"),
            server_cert: directory.join("server.pem"),
            server_key: directory.join("server-key.pem"),
            client_cert: directory.join("client.pem"),
            client_key: directory.join("client-key.pem"),
        }
    }

    /// The client side's settings: the CA and the client certificate.
    pub fn client_tls(&self) -> drover_etcd::EtcdTls {
        drover_etcd::EtcdTls {
            ca_file: Some(self.ca.clone()),
            cert_file: Some(self.client_cert.clone()),
            key_file: Some(self.client_key.clone()),
        }
    }
}

/// A running cluster.
pub struct EtcdCluster {
    _directory: tempfile::TempDir,
    members: Vec<Member>,
    initial_cluster: String,
    token: String,
    /// Clients must present a certificate signed by the test CA (`https://` client URLs).
    tls: Option<TestCerts>,
}

impl EtcdCluster {
    /// Starts `size` members and waits until the cluster answers writes.
    pub async fn start(size: usize) -> Self {
        Self::start_with(size, None).await
    }

    /// Starts `size` members serving clients over TLS only, with etcd's
    /// `--client-cert-auth`: a client needs a certificate `certs`' CA signed.
    pub async fn start_tls(size: usize, certs: TestCerts) -> Self {
        Self::start_with(size, Some(certs)).await
    }

    async fn start_with(size: usize, tls: Option<TestCerts>) -> Self {
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
            tls,
        };
        for number in 0..size {
            cluster.spawn(number);
        }
        cluster.wait_writable().await;
        cluster
    }

    fn spawn(&mut self, number: usize) {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let member = &mut self.members[number];
        let client_url = format!("{scheme}://127.0.0.1:{}", member.client_port);
        let peer_url = format!("http://127.0.0.1:{}", member.peer_port);
        let log = std::fs::File::create(member.data_dir.with_extension("log")).unwrap();
        let mut command = Command::new("etcd");
        if let Some(certs) = &self.tls {
            command
                .arg("--cert-file")
                .arg(&certs.server_cert)
                .arg("--key-file")
                .arg(&certs.server_key)
                .arg("--trusted-ca-file")
                .arg(&certs.ca)
                .arg("--client-cert-auth");
        }
        let child = command
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
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        self.members
            .iter()
            .map(|member| format!("{scheme}://127.0.0.1:{}", member.client_port))
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
        self.wait_writable_through(self.endpoints()).await;
    }

    /// Waits until a write through member `number` itself succeeds (after a restart: it has
    /// rejoined and knows the leader).
    pub async fn wait_member_ready(&self, number: usize) {
        self.wait_writable_through(vec![self.endpoints()[number].clone()])
            .await;
    }

    async fn wait_writable_through(&self, endpoints: Vec<String>) {
        let deadline = Instant::now() + Duration::from_secs(30);
        let config = drover_etcd::EtcdConfig {
            request_timeout: Duration::from_secs(2),
            tls: self.tls.as_ref().map(TestCerts::client_tls),
            ..drover_etcd::EtcdConfig::new(endpoints, "drover-test-probe/")
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

/// What a [`LinkProxy`] does with the traffic between a client and its etcd member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkMode {
    /// Both ways, as a direct connection.
    Pass,
    /// Requests reach the member; its answers are dropped (a member that commits and then
    /// hangs, or a reply lost on the way back).
    SwallowReplies,
    /// Every connection is closed and new ones are refused (the client's link to the member
    /// is cut).
    Cut,
}

/// A TCP relay between a client and one etcd member, which a test can cut or make lose
/// replies: a real etcd behind it, a real broken link in front.
pub struct LinkProxy {
    address: std::net::SocketAddr,
    mode: tokio::sync::watch::Sender<LinkMode>,
    task: tokio::task::JoinHandle<()>,
}

impl LinkProxy {
    /// Relays to `upstream` (`http://127.0.0.1:<port>`).
    pub async fn start(upstream: &str) -> Self {
        let upstream = upstream.trim_start_matches("http://").to_owned();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let (mode, _) = tokio::sync::watch::channel(LinkMode::Pass);
        let modes = mode.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    return;
                };
                let mut mode = modes.subscribe();
                if *mode.borrow_and_update() == LinkMode::Cut {
                    continue;
                }
                let upstream = upstream.clone();
                tokio::spawn(async move {
                    let Ok(server) = tokio::net::TcpStream::connect(&upstream).await else {
                        return;
                    };
                    let (mut client_read, mut client_write) = client.into_split();
                    let (mut server_read, mut server_write) = server.into_split();
                    let up = tokio::io::copy(&mut client_read, &mut server_write);
                    let replies = mode.clone();
                    let down = async move {
                        let mut buffer = vec![0_u8; 64 * 1024];
                        loop {
                            let read = tokio::io::AsyncReadExt::read(&mut server_read, &mut buffer)
                                .await
                                .unwrap_or(0);
                            if read == 0 {
                                return;
                            }
                            // Checked after every read: bytes the member sends once the link
                            // is cut never reach the client, even before the cut task has run.
                            match *replies.borrow() {
                                LinkMode::SwallowReplies => continue,
                                LinkMode::Cut => return,
                                LinkMode::Pass => {}
                            }
                            if tokio::io::AsyncWriteExt::write_all(
                                &mut client_write,
                                &buffer[..read],
                            )
                            .await
                            .is_err()
                            {
                                return;
                            }
                        }
                    };
                    let cut = async move {
                        while *mode.borrow_and_update() != LinkMode::Cut {
                            if mode.changed().await.is_err() {
                                return;
                            }
                        }
                    };
                    tokio::select! {
                        _ = up => {}
                        () = down => {}
                        () = cut => {}
                    }
                });
            }
        });
        Self {
            address,
            mode,
            task,
        }
    }

    /// The client URL to give instead of the member's.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.address)
    }

    pub fn set(&self, mode: LinkMode) {
        self.mode.send_replace(mode);
    }
}

impl Drop for LinkProxy {
    fn drop(&mut self) {
        self.set(LinkMode::Cut);
        self.task.abort();
    }
}
