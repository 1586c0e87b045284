//! End to end: artifacts. A real HTTP server on 127.0.0.1 (spawned here, counting requests)
//! serves a tar.gz that jobs of the real agent fetch before their tasks start: a right sha256
//! unpacks it into `local/`, a wrong one fails the task with "Failed Artifact Download" naming
//! both digests and never starts it, many allocations of one job make one request, and an
//! agent killed mid-download starts the task once, with the artifact, after its restart.
//!
//! Not here: the archive formats, checksums and hostile archives (unit tests of
//! `drover_client::artifact`).

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod support;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use support::{Agent, wait_for, write_jobspec};

const LIMIT: Duration = Duration::from_secs(120);

/// A file server for the tests: serves fixed bodies by path, counts the requests for each, and
/// while `stall` is set sends only the first half of a body and holds the connection open.
struct FileServer {
    address: String,
    requests: Arc<Mutex<HashMap<String, usize>>>,
    started: Arc<AtomicUsize>,
    stall: Arc<AtomicBool>,
}

impl FileServer {
    fn start(files: HashMap<String, Vec<u8>>) -> FileServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let address = format!("http://{}", listener.local_addr().expect("address"));
        let requests = Arc::new(Mutex::new(HashMap::new()));
        let started = Arc::new(AtomicUsize::new(0));
        let stall = Arc::new(AtomicBool::new(false));
        let files = Arc::new(files);
        let (counts, started_count, stalling) = (requests.clone(), started.clone(), stall.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let (files, counts, started_count, stalling) = (
                    files.clone(),
                    counts.clone(),
                    started_count.clone(),
                    stalling.clone(),
                );
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
                    let mut request_line = String::new();
                    if reader.read_line(&mut request_line).is_err() {
                        return;
                    }
                    loop {
                        let mut header = String::new();
                        match reader.read_line(&mut header) {
                            Ok(0) | Err(_) => return,
                            Ok(_) if header == "\r\n" => break,
                            Ok(_) => {}
                        }
                    }
                    let path = request_line
                        .split_whitespace()
                        .nth(1)
                        .unwrap_or("/")
                        .to_string();
                    *counts.lock().unwrap().entry(path.clone()).or_insert(0) += 1;
                    started_count.fetch_add(1, Ordering::SeqCst);
                    let Some(body) = files.get(&path) else {
                        let _ = stream.write_all(
                            b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                        );
                        return;
                    };
                    let head = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = stream.write_all(head.as_bytes());
                    if stalling.load(Ordering::SeqCst) {
                        let _ = stream.write_all(&body[..body.len() / 2]);
                        let _ = stream.flush();
                        while stalling.load(Ordering::SeqCst) {
                            std::thread::sleep(Duration::from_millis(20));
                        }
                        return;
                    }
                    let _ = stream.write_all(body);
                });
            }
        });
        FileServer {
            address,
            requests,
            started,
            stall,
        }
    }

    fn requests_for(&self, path: &str) -> usize {
        self.requests
            .lock()
            .unwrap()
            .get(path)
            .copied()
            .unwrap_or(0)
    }
}

/// A tar.gz of `hello.txt` (plus a file big enough that a half-sent body is mid-archive) and
/// its sha256, made with the system's tar and sha256sum.
fn make_tarball(dir: &Path) -> (Vec<u8>, String) {
    let content = dir.join("content");
    std::fs::create_dir_all(content.join("conf")).expect("content dir");
    std::fs::write(content.join("hello.txt"), "hello from the artifact\n").expect("hello");
    let filler: Vec<u8> = (0..512 * 1024u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 24) as u8)
        .collect();
    std::fs::write(content.join("conf/filler.bin"), filler).expect("filler");
    let tarball = dir.join("app.tar.gz");
    let status = Command::new("tar")
        .arg("-czf")
        .arg(&tarball)
        .arg("-C")
        .arg(&content)
        .arg(".")
        .status()
        .expect("tar runs");
    assert!(status.success());
    let output = Command::new("sha256sum")
        .arg(&tarball)
        .output()
        .expect("sha256sum");
    let digest = String::from_utf8_lossy(&output.stdout)
        .split_whitespace()
        .next()
        .expect("digest")
        .to_string();
    (std::fs::read(&tarball).expect("read tarball"), digest)
}

fn artifact_job(job_id: &str, count: u32, url: &str, checksum: &str) -> String {
    format!(
        r#"
job "{job_id}" {{
  datacenters = ["dc1"]
  type        = "service"

  group "app" {{
    count = {count}

    # Nomad's default asks 300 MB of the node's disk per allocation; a hundred of them would
    # need 30 GB free under the data dir, which says nothing about what is tested here.
    ephemeral_disk {{
      size = 10
    }}

    restart {{
      attempts = 0
      mode     = "fail"
    }}

    reschedule {{
      attempts  = 0
      unlimited = false
    }}

    task "server" {{
      driver       = "raw_exec"
      kill_timeout = "1s"

      # Its logs must fit in the small ephemeral disk (Nomad's rule).
      logs {{
        max_files     = 2
        max_file_size = 2
      }}

      artifact {{
        source      = "{url}"
        destination = "local/app"
        options {{
          checksum = "sha256:{checksum}"
        }}
      }}

      config {{
        command = "/bin/sh"
        args    = ["-c", "cat local/app/hello.txt; exec sleep 300"]
      }}

      # Small, so a hundred fit on a small node.
      resources {{
        cpu    = 1
        memory = 10
      }}
    }}
  }}
}}
"#
    )
}

fn allocs(agent: &Agent, job_id: &str) -> Vec<Value> {
    agent
        .get_json(&format!("/v1/job/{job_id}/allocations"))
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn events_of<'a>(alloc: &'a Value, event_type: &str) -> Vec<&'a Value> {
    alloc["TaskStates"]["server"]["Events"]
        .as_array()
        .map(|events| {
            events
                .iter()
                .filter(|event| event["Type"] == event_type)
                .collect()
        })
        .unwrap_or_default()
}

fn wait_running(agent: &Agent, job_id: &str, count: usize) -> Vec<Value> {
    // Generous: a hundred tasks unpacking an archive on a loaded 2-core machine.
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    loop {
        let list = allocs(agent, job_id);
        let running = list
            .iter()
            .filter(|alloc| alloc["ClientStatus"] == "running")
            .count();
        if running == count {
            return list;
        }
        if std::time::Instant::now() > deadline {
            let mut statuses: HashMap<String, usize> = HashMap::new();
            for alloc in &list {
                *statuses
                    .entry(alloc["ClientStatus"].as_str().unwrap_or("?").to_string())
                    .or_insert(0) += 1;
            }
            let not_running: Vec<&Value> = list
                .iter()
                .filter(|alloc| alloc["ClientStatus"] != "running")
                .take(1)
                .collect();
            panic!(
                "{job_id}: {statuses:?} of {count} allocations; first not running: {not_running:#?}"
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn local_file(agent: &Agent, alloc: &Value, name: &str) -> PathBuf {
    agent
        .data_dir
        .join("alloc")
        .join(alloc["ID"].as_str().expect("alloc id"))
        .join("server/local/app")
        .join(name)
}

fn run_job(agent: &Agent, name: &str, spec: &str) {
    let (_dir, path) = write_jobspec(name, spec);
    agent.cli_ok(&["job", "run", "-detach", &path.to_string_lossy()]);
}

#[test]
fn a_checksummed_tar_gz_is_unpacked_before_start_and_a_wrong_checksum_never_starts() {
    let temp = tempfile::tempdir().expect("tempdir");
    let (tarball, digest) = make_tarball(temp.path());
    let server = FileServer::start(HashMap::from([("/app.tar.gz".to_string(), tarball)]));
    let agent = Agent::start_dev();
    let url = format!("{}/app.tar.gz", server.address);

    run_job(&agent, "good", &artifact_job("good", 1, &url, &digest));
    let list = wait_running(&agent, "good", 1);
    let alloc = &list[0];
    assert_eq!(
        std::fs::read_to_string(local_file(&agent, alloc, "hello.txt")).expect("unpacked"),
        "hello from the artifact\n"
    );
    assert!(local_file(&agent, alloc, "conf/filler.bin").is_file());
    assert_eq!(events_of(alloc, "Downloading Artifacts").len(), 1);
    let started = &events_of(alloc, "Started");
    assert_eq!(started.len(), 1);

    let wrong: String = digest.chars().rev().collect();
    run_job(&agent, "bad", &artifact_job("bad", 1, &url, &wrong));
    let alloc = wait_for("the bad job's task fails", LIMIT, || {
        allocs(&agent, "bad")
            .into_iter()
            .find(|alloc| alloc["ClientStatus"] == "failed")
    });
    let failed = events_of(&alloc, "Failed Artifact Download");
    assert_eq!(failed.len(), 1, "{alloc:#}");
    let message = failed[0]["DisplayMessage"].as_str().unwrap_or_default();
    assert!(message.contains(&format!("sha256:{wrong}")), "{message}");
    assert!(message.contains(&format!("sha256:{digest}")), "{message}");
    assert!(events_of(&alloc, "Started").is_empty(), "{alloc:#}");
    assert!(!local_file(&agent, &alloc, "hello.txt").exists());
}

#[test]
fn many_allocations_of_one_job_fetch_their_artifact_once() {
    let temp = tempfile::tempdir().expect("tempdir");
    let (tarball, digest) = make_tarball(temp.path());
    let server = FileServer::start(HashMap::from([("/app.tar.gz".to_string(), tarball)]));
    let agent = Agent::start_dev();
    let url = format!("{}/app.tar.gz", server.address);
    let count = 100;
    run_job(&agent, "many", &artifact_job("many", count, &url, &digest));
    let list = wait_running(&agent, "many", count as usize);
    for alloc in &list {
        assert!(local_file(&agent, alloc, "hello.txt").is_file());
    }
    assert_eq!(server.requests_for("/app.tar.gz"), 1);
}

#[test]
fn an_agent_killed_mid_download_starts_the_task_once_with_the_artifact() {
    let temp = tempfile::tempdir().expect("tempdir");
    let (tarball, digest) = make_tarball(temp.path());
    let server = FileServer::start(HashMap::from([("/app.tar.gz".to_string(), tarball)]));
    server.stall.store(true, Ordering::SeqCst);
    let mut first = Agent::start_dev();
    let data_dir = first.data_dir.clone();
    let url = format!("{}/app.tar.gz", server.address);
    run_job(&first, "crash", &artifact_job("crash", 1, &url, &digest));
    wait_for("the download begins", LIMIT, || {
        (server.started.load(Ordering::SeqCst) >= 1).then_some(())
    });
    first.kill9();
    server.stall.store(false, Ordering::SeqCst);
    // The dead agent's half download is left aside, never in the cache.
    let cache = data_dir.join("client/artifacts");
    let entries: Vec<_> = std::fs::read_dir(&cache)
        .map(|list| list.flatten().map(|entry| entry.file_name()).collect())
        .unwrap_or_default();
    assert!(
        entries.iter().all(|name| name == ".partial"),
        "cache holds {entries:?}"
    );

    let second = Agent::start_with(&data_dir, &[]);
    let list = wait_running(&second, "crash", 1);
    let alloc = &list[0];
    assert_eq!(
        std::fs::read_to_string(local_file(&second, alloc, "hello.txt")).expect("unpacked"),
        "hello from the artifact\n"
    );
    assert_eq!(events_of(alloc, "Started").len(), 1, "{alloc:#}");
    assert_eq!(server.requests_for("/app.tar.gz"), 2);
    second.cli_ok(&["job", "stop", "crash"]);
    drop(second);
    first.data_dir = PathBuf::new();
}

/// A tar.gz made with the system's tar holding one hostile entry, and its sha256.
fn hostile_tarball(dir: &Path, name: &str, make: &str) -> (Vec<u8>, String) {
    let archive = dir.join(name);
    let status = Command::new("/bin/sh")
        .arg("-c")
        .arg(make)
        .current_dir(dir)
        .status()
        .expect("tar runs");
    assert!(status.success(), "{make}");
    let output = Command::new("sha256sum")
        .arg(&archive)
        .output()
        .expect("sha256sum");
    let digest = String::from_utf8_lossy(&output.stdout)
        .split_whitespace()
        .next()
        .expect("digest")
        .to_string();
    (std::fs::read(&archive).expect("read archive"), digest)
}

#[test]
fn hostile_archives_are_refused_naming_the_entry_and_write_nothing_outside() {
    let temp = tempfile::tempdir().expect("tempdir");
    std::fs::write(temp.path().join("hello.txt"), "pwned\n").expect("file");
    let (climbing, climbing_sha) = hostile_tarball(
        temp.path(),
        "climb.tar.gz",
        "tar -czPf climb.tar.gz --transform='s,^hello.txt,../../etc/x,' hello.txt",
    );
    std::os::unix::fs::symlink("/etc", temp.path().join("outlink")).expect("symlink");
    let (linking, linking_sha) =
        hostile_tarball(temp.path(), "link.tar.gz", "tar -czPf link.tar.gz outlink");
    let server = FileServer::start(HashMap::from([
        ("/climb.tar.gz".to_string(), climbing),
        ("/link.tar.gz".to_string(), linking),
    ]));
    let agent = Agent::start_dev();
    for (job_id, path, digest, entry) in [
        ("climb", "/climb.tar.gz", &climbing_sha, "../../etc/x"),
        ("link", "/link.tar.gz", &linking_sha, "outlink"),
    ] {
        let url = format!("{}{path}", server.address);
        run_job(&agent, job_id, &artifact_job(job_id, 1, &url, digest));
        let alloc = wait_for(&format!("the {job_id} job's task fails"), LIMIT, || {
            allocs(&agent, job_id)
                .into_iter()
                .find(|alloc| alloc["ClientStatus"] == "failed")
        });
        let failed = events_of(&alloc, "Failed Artifact Download");
        assert_eq!(failed.len(), 1, "{alloc:#}");
        let message = failed[0]["DisplayMessage"].as_str().unwrap_or_default();
        assert!(message.contains(&format!("{entry:?}")), "{message}");
        assert!(events_of(&alloc, "Started").is_empty(), "{alloc:#}");
        let alloc_dir = agent
            .data_dir
            .join("alloc")
            .join(alloc["ID"].as_str().expect("alloc id"));
        assert!(!alloc_dir.join("server/etc").exists());
        assert!(!alloc_dir.join("etc").exists());
        assert!(
            std::fs::symlink_metadata(alloc_dir.join("server/local/app/outlink")).is_err(),
            "the outward link was not created"
        );
    }
    assert!(
        !Path::new("/etc/x").exists() || std::fs::read("/etc/x").ok() != Some(b"pwned\n".to_vec())
    );
}

/// `URL//conf` places only `conf/` of the served tar.gz; its digest comes from a
/// `SHA256SUMS` checksum file the same server serves (`checksum = "file:…"`); with `chown`
/// (the agent runs as root here) what was placed belongs to the task's user.
#[test]
fn a_subdirectory_checked_against_a_checksum_file_is_placed_and_given_to_the_task_user() {
    let temp = tempfile::tempdir().expect("tempdir");
    let (tarball, digest) = make_tarball(temp.path());
    let sums = format!("{}  other.tar.gz\n{digest}  app.tar.gz\n", "0".repeat(64));
    let server = FileServer::start(HashMap::from([
        ("/app.tar.gz".to_string(), tarball),
        ("/SHA256SUMS".to_string(), sums.into_bytes()),
    ]));
    let agent = Agent::start_dev();
    let as_root = nix::unistd::geteuid().is_root();
    let spec = artifact_job(
        "subdir",
        1,
        &format!("{}/app.tar.gz//conf", server.address),
        "",
    )
    .replace(
        "checksum = \"sha256:\"",
        &format!("checksum = \"file:{}/SHA256SUMS\"", server.address),
    )
    .replace(
        "destination = \"local/app\"",
        "destination = \"local/app\"\n        chown       = true",
    )
    .replace("cat local/app/hello.txt; ", "")
    .replace(
        "driver       = \"raw_exec\"",
        &format!(
            "driver       = \"raw_exec\"{}",
            if as_root {
                "\n      user = \"nobody\""
            } else {
                ""
            }
        ),
    );
    run_job(&agent, "subdir.hcl", &spec);
    let list = wait_running(&agent, "subdir", 1);
    let alloc = &list[0];
    let filler = local_file(&agent, alloc, "filler.bin");
    assert!(filler.is_file(), "conf/ is placed as the destination");
    assert!(!local_file(&agent, alloc, "hello.txt").exists());
    assert!(!local_file(&agent, alloc, "conf").exists());
    assert_eq!(server.requests_for("/SHA256SUMS"), 1);
    if as_root {
        use std::os::unix::fs::MetadataExt as _;
        let nobody = nix::unistd::User::from_name("nobody")
            .expect("user lookup")
            .expect("nobody exists");
        assert_eq!(
            std::fs::metadata(&filler).expect("filler").uid(),
            nobody.uid.as_raw()
        );
    } else {
        assert!(
            std::env::var("CI").is_err(),
            "CI runs the e2e tests as root"
        );
    }
}

/// Runs `program` with `args`, failing the test with its output when it fails.
fn run_ok(program: &str, args: &[&str]) {
    let output = Command::new(program).args(args).output().expect(program);
    assert!(output.status.success(), "{program} {args:?}: {output:?}");
}

/// An `sshd` on a free port of 127.0.0.1, with a host key and one authorized key made for the
/// test, killed when dropped.
struct SshServer {
    child: std::process::Child,
    port: u16,
}

impl Drop for SshServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl SshServer {
    fn start(dir: &Path, authorized_key: &Path) -> SshServer {
        let host_key = dir.join("host_key");
        run_ok(
            "ssh-keygen",
            &[
                "-q",
                "-t",
                "ed25519",
                "-N",
                "",
                "-f",
                &host_key.to_string_lossy(),
            ],
        );
        let port = TcpListener::bind("127.0.0.1:0")
            .expect("bind")
            .local_addr()
            .expect("address")
            .port();
        let config = dir.join("sshd_config");
        std::fs::write(
            &config,
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {}\nAuthorizedKeysFile {}\n\
                 PidFile {}\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n\
                 PubkeyAuthentication yes\nPermitRootLogin prohibit-password\nStrictModes no\n\
                 UsePAM no\n",
                host_key.display(),
                authorized_key.display(),
                dir.join("sshd.pid").display(),
            ),
        )
        .expect("sshd config");
        // sshd wants its privilege separation directory.
        std::fs::create_dir_all("/run/sshd").expect("/run/sshd");
        let child = Command::new("/usr/sbin/sshd")
            .args(["-D", "-e", "-f"])
            .arg(&config)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .expect("sshd starts");
        wait_for("sshd to listen", LIMIT, || {
            std::net::TcpStream::connect(("127.0.0.1", port))
                .ok()
                .map(|_| ())
        });
        SshServer { child, port }
    }
}

/// Root only (sshd logs in as the test's user, root): under `CI=true` a missing sshd fails.
#[test]
fn a_git_artifact_is_cloned_over_ssh_with_its_sshkey() {
    use base64::Engine as _;
    if !nix::unistd::geteuid().is_root() || !Path::new("/usr/sbin/sshd").exists() {
        assert!(
            std::env::var("CI").is_err(),
            "CI runs this test as root with openssh-server installed"
        );
        return;
    }
    let temp = tempfile::tempdir().expect("temp dir");
    let dir = temp.path();
    // The task's key, authorized on the server; the agent's ssh trusts only the test host key.
    let key = dir.join("task_key");
    run_ok(
        "ssh-keygen",
        &[
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-f",
            &key.to_string_lossy(),
        ],
    );
    let server = SshServer::start(dir, &key.with_extension("pub"));
    let host_public = std::fs::read_to_string(dir.join("host_key.pub")).expect("host key");
    let known_hosts = dir.join("known_hosts");
    std::fs::write(
        &known_hosts,
        format!("[127.0.0.1]:{} {host_public}", server.port),
    )
    .expect("known_hosts");

    // A bare repository with one commit, served by sshd's git-upload-pack.
    let work = dir.join("work");
    std::fs::create_dir_all(&work).expect("work");
    std::fs::write(work.join("hello.txt"), "over ssh\n").expect("file");
    for args in [
        &["init", "--quiet"][..],
        &["add", "hello.txt"],
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "--quiet",
            "-m",
            "one",
        ],
    ] {
        let mut full = vec!["-C", work.to_str().expect("utf-8")];
        full.extend_from_slice(args);
        run_ok("git", &full);
    }
    let bare = dir.join("repo.git");
    run_ok(
        "git",
        &[
            "clone",
            "--quiet",
            "--bare",
            work.to_str().expect("utf-8"),
            bare.to_str().expect("utf-8"),
        ],
    );

    // The agent's own GIT_SSH_COMMAND is kept, with the task's key file added, as go-getter
    // does; the agent has no key of its own.
    let ssh = format!(
        "ssh -o UserKnownHostsFile={} -o StrictHostKeyChecking=yes -o IdentitiesOnly=yes \
         -o BatchMode=yes",
        known_hosts.display()
    );
    let agent = Agent::start_dev_with_env(&[("GIT_SSH_COMMAND", &ssh)]);
    let encoded =
        base64::engine::general_purpose::STANDARD.encode(std::fs::read(&key).expect("private key"));
    let source = format!(
        "git::ssh://root@127.0.0.1:{}{}",
        server.port,
        bare.display()
    );
    let spec = format!(
        r#"
job "sshgit" {{
  type = "batch"
  group "g" {{
    task "server" {{
      driver = "raw_exec"
      config {{
        command = "/bin/sleep"
        args    = ["3600"]
      }}
      artifact {{
        source      = "{source}"
        destination = "local/app"
        options {{
          sshkey = "{encoded}"
        }}
      }}
    }}
  }}
}}
"#
    );
    run_job(&agent, "sshgit.hcl", &spec);
    let list = wait_running(&agent, "sshgit", 1);
    assert_eq!(
        std::fs::read_to_string(local_file(&agent, &list[0], "hello.txt")).expect("cloned file"),
        "over ssh\n"
    );

    // Without the key the same clone is refused by the server.
    let refused = spec
        .replace("sshgit", "sshnokey")
        .replace(&format!("sshkey = \"{encoded}\""), "ref = \"HEAD\"");
    run_job(&agent, "sshnokey.hcl", &refused);
    let alloc = wait_for("the keyless download to fail", LIMIT, || {
        let alloc = allocs(&agent, "sshnokey").into_iter().next()?;
        (!events_of(&alloc, "Failed Artifact Download").is_empty()).then_some(alloc)
    });
    let failed = events_of(&alloc, "Failed Artifact Download")[0].to_string();
    assert!(failed.contains("Permission denied"), "{failed}");
    agent.cli_ok(&["job", "stop", "sshgit"]);
}
