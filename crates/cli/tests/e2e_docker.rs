//! End to end for the `docker` driver: a real Docker Engine (Debian's `dockerd`, started here
//! with its own data, exec root and socket under a temp dir) and a real registry on 127.0.0.1
//! (`docker-registry`), an image built locally from busybox-static and pushed there, and the
//! real agent running docker tasks from it: HTTP on the published port, logs, exec, signal,
//! stats, stop, re-attach after `kill -9` of the agent (and removal of a container whose
//! allocation the client does not have), and an OOM kill.
//!
//! One engine per test binary, shared by its tests and stopped (with the `docker0` bridge, nft
//! tables and forwarding it turned on) when the last test is done. The tests are skipped with
//! a printed reason only when the engine cannot start and `CI` is not set; under `CI=true`
//! they fail.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde_json::Value;
use support::{Agent, wait_for, write_jobspec};

const LIMIT: Duration = Duration::from_secs(120);

/// The engine, the registry and the test image, shared by the tests of this binary.
struct Engine {
    temp: tempfile::TempDir,
    dockerd: Mutex<Child>,
    registry: Mutex<Child>,
    /// `127.0.0.1:<port>/drover/busybox:1`, pushed to the registry (not in the engine's store).
    image: String,
    /// What existed before the engine started, so only what it created is removed.
    had_docker0: bool,
    nft_tables_before: BTreeSet<String>,
    ip_forward_before: String,
}

static ENGINE: Mutex<Weak<Engine>> = Mutex::new(Weak::new());

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|value| value == "true" || value == "1")
}

fn nft_tables() -> BTreeSet<String> {
    Command::new("nft")
        .args(["list", "tables"])
        .output()
        .map(|output| {
            String::from_utf8_lossy(&output.stdout)
                .lines()
                .map(|line| line.trim().trim_start_matches("table ").to_string())
                .filter(|line| !line.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Engine {
    fn socket(&self) -> PathBuf {
        self.temp.path().join("docker.sock")
    }

    /// Runs the docker CLI against this engine (test setup and inspection only).
    fn docker(&self, args: &[&str]) -> String {
        let output = Command::new("docker")
            .args(args)
            .env("DOCKER_HOST", format!("unix://{}", self.socket().display()))
            .stdin(Stdio::null())
            .output()
            .expect("docker CLI runs");
        assert!(
            output.status.success(),
            "docker {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// The IDs of the containers of a job's allocations (by Nomad's alloc label).
    fn containers_of(&self, alloc_ids: &[String]) -> BTreeSet<String> {
        alloc_ids
            .iter()
            .flat_map(|alloc| {
                self.docker(&[
                    "ps",
                    "-aq",
                    "--no-trunc",
                    "--filter",
                    &format!("label=com.hashicorp.nomad.alloc_id={alloc}"),
                ])
                .lines()
                .map(str::to_string)
                .collect::<Vec<_>>()
            })
            .collect()
    }

    /// The agent config naming this engine.
    fn agent_config(&self) -> PathBuf {
        let path = self.temp.path().join("agent.hcl");
        std::fs::write(
            &path,
            format!(
                "plugin \"docker\" {{\n  config {{\n    endpoint = \"unix://{}\"\n  }}\n}}\n",
                self.socket().display()
            ),
        )
        .unwrap();
        path
    }

    fn start() -> Result<Engine, String> {
        if !nix::unistd::geteuid().is_root() {
            return Err("not root".into());
        }
        let temp = tempfile::tempdir().map_err(|error| error.to_string())?;
        let root = temp.path();
        let had_docker0 = Path::new("/sys/class/net/docker0").exists();
        let nft_tables_before = nft_tables();
        let ip_forward_before = std::fs::read_to_string("/proc/sys/net/ipv4/ip_forward")
            .unwrap_or_default()
            .trim()
            .to_string();
        let log = std::fs::File::create(root.join("dockerd.log")).map_err(|e| e.to_string())?;
        let dockerd = Command::new("dockerd")
            .arg("--storage-driver=overlay2")
            .arg(format!("--data-root={}", root.join("data").display()))
            .arg(format!("--exec-root={}", root.join("exec").display()))
            .arg(format!("--pidfile={}", root.join("dockerd.pid").display()))
            .arg(format!(
                "--host=unix://{}",
                root.join("docker.sock").display()
            ))
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .spawn()
            .map_err(|error| format!("dockerd: {error}"))?;
        let port = free_port();
        let config = root.join("registry.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:{port}\n",
                root.join("registry").display()
            ),
        )
        .map_err(|e| e.to_string())?;
        let registry = Command::new("docker-registry")
            .arg("serve")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|error| format!("docker-registry: {error}"))?;
        let engine = Engine {
            image: format!("127.0.0.1:{port}/drover/busybox:1"),
            temp,
            dockerd: Mutex::new(dockerd),
            registry: Mutex::new(registry),
            had_docker0,
            nft_tables_before,
            ip_forward_before,
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let answered = Command::new("docker")
                .args(["version", "--format", "{{.Server.Version}}"])
                .env(
                    "DOCKER_HOST",
                    format!("unix://{}", engine.socket().display()),
                )
                .output()
                .is_ok_and(|output| output.status.success());
            if answered {
                break;
            }
            if let Ok(Some(status)) = engine.dockerd.lock().unwrap().try_wait() {
                let log = std::fs::read_to_string(engine.temp.path().join("dockerd.log"))
                    .unwrap_or_default();
                return Err(format!("dockerd exited ({status}): {log}"));
            }
            if std::time::Instant::now() > deadline {
                return Err("dockerd did not answer within 60s".into());
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        engine.build_image()?;
        Ok(engine)
    }

    /// A busybox rootfs (busybox-static) imported as `local/busybox:1` and pushed to the
    /// registry, then removed from the engine so tasks pull it.
    fn build_image(&self) -> Result<(), String> {
        let rootfs = self.temp.path().join("rootfs");
        std::fs::create_dir_all(rootfs.join("bin")).map_err(|e| e.to_string())?;
        std::fs::create_dir_all(rootfs.join("www")).map_err(|e| e.to_string())?;
        std::fs::create_dir_all(rootfs.join("tmp")).map_err(|e| e.to_string())?;
        std::fs::copy("/bin/busybox", rootfs.join("bin/busybox"))
            .map_err(|error| format!("busybox-static: {error}"))?;
        for applet in [
            "sh", "sleep", "echo", "cat", "httpd", "nc", "kill", "ls", "id", "hostname",
        ] {
            std::os::unix::fs::symlink("busybox", rootfs.join("bin").join(applet))
                .map_err(|e| e.to_string())?;
        }
        std::fs::write(rootfs.join("www/index.html"), "hello from drover\n")
            .map_err(|e| e.to_string())?;
        let tar = Command::new("tar")
            .arg("-C")
            .arg(&rootfs)
            .args(["-c", "."])
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| e.to_string())?;
        let imported = Command::new("docker")
            .args(["import", "-c", "ENV PATH=/bin", "-", "local/busybox:1"])
            .env("DOCKER_HOST", format!("unix://{}", self.socket().display()))
            .stdin(tar.stdout.ok_or("tar stdout")?)
            .output()
            .map_err(|e| e.to_string())?;
        if !imported.status.success() {
            return Err(format!(
                "docker import: {}",
                String::from_utf8_lossy(&imported.stderr)
            ));
        }
        self.docker(&["tag", "local/busybox:1", &self.image]);
        wait_for(
            "the registry to take a push",
            Duration::from_secs(30),
            || {
                Command::new("docker")
                    .args(["push", &self.image])
                    .env("DOCKER_HOST", format!("unix://{}", self.socket().display()))
                    .output()
                    .ok()
                    .filter(|output| output.status.success())
            },
        );
        self.docker(&["rmi", &self.image]);
        Ok(())
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let leftover = Command::new("docker")
            .args(["ps", "-aq"])
            .env("DOCKER_HOST", format!("unix://{}", self.socket().display()))
            .output()
            .map(|output| String::from_utf8_lossy(&output.stdout).into_owned())
            .unwrap_or_default();
        let ids: Vec<&str> = leftover.split_whitespace().collect();
        if !ids.is_empty() {
            let _ = Command::new("docker")
                .args(["rm", "-f"])
                .args(&ids)
                .env("DOCKER_HOST", format!("unix://{}", self.socket().display()))
                .output();
        }
        for child in [&self.registry, &self.dockerd] {
            let mut child = child.lock().unwrap();
            let pid = nix::unistd::Pid::from_raw(child.id() as i32);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
            let deadline = std::time::Instant::now() + Duration::from_secs(20);
            while child.try_wait().ok().flatten().is_none() {
                if std::time::Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        if !self.had_docker0 {
            let _ = Command::new("ip").args(["link", "del", "docker0"]).output();
        }
        for table in nft_tables().difference(&self.nft_tables_before) {
            let mut args = vec!["delete", "table"];
            args.extend(table.split_whitespace());
            let _ = Command::new("nft").args(&args).output();
        }
        let _ = std::fs::write("/proc/sys/net/ipv4/ip_forward", &self.ip_forward_before);
        if let Ok(entries) = std::fs::read_dir("/sys/fs/cgroup") {
            for entry in entries.flatten() {
                let _ = std::fs::remove_dir(entry.path().join("docker"));
            }
        }
        // The engine's overlay mounts are gone with it; what is left is plain files.
        let _ = Command::new("umount")
            .arg("-R")
            .arg(self.temp.path().join("data"))
            .output();
    }
}

/// The shared engine, started on first use; `None` (after printing why) when it cannot start
/// outside CI.
fn engine() -> Option<Arc<Engine>> {
    let mut shared = ENGINE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(engine) = shared.upgrade() {
        return Some(engine);
    }
    match Engine::start() {
        Ok(engine) => {
            let engine = Arc::new(engine);
            *shared = Arc::downgrade(&engine);
            Some(engine)
        }
        Err(reason) if !in_ci() => {
            eprintln!("skipping: the Docker Engine cannot start here: {reason}");
            None
        }
        Err(reason) => panic!("the Docker Engine must start under CI: {reason}"),
    }
}

fn run_job(agent: &Agent, name: &str, hcl: &str) {
    let (_dir, path) = write_jobspec(name, hcl);
    agent.cli_ok(&["job", "run", "-detach", &path.to_string_lossy()]);
}

fn allocs(agent: &Agent, job_id: &str) -> Vec<Value> {
    agent
        .get_json(&format!("/v1/job/{job_id}/allocations"))
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn events_of(alloc: &Value, task: &str) -> Vec<Value> {
    alloc["TaskStates"][task]["Events"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn running_allocs(agent: &Agent, job_id: &str, count: usize) -> Vec<Value> {
    wait_for(
        &format!("{count} running allocations of {job_id}"),
        LIMIT,
        || {
            let list = allocs(agent, job_id);
            let running: Vec<Value> = list
                .iter()
                .filter(|alloc| alloc["ClientStatus"] == "running")
                .cloned()
                .collect();
            if let Some(failed) = list.iter().find(|alloc| alloc["ClientStatus"] == "failed") {
                panic!("an allocation failed: {failed}");
            }
            (running.len() == count).then_some(running)
        },
    )
}

fn http_get(address: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(address).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    stream
        .write_all(b"GET /index.html HTTP/1.0\r\nHost: x\r\n\r\n")
        .ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    Some(answer)
}

#[test]
fn a_docker_task_pulls_its_image_serves_on_its_port_and_answers_logs_exec_signal_stats_and_stop() {
    let Some(engine) = engine() else { return };
    let temp = tempfile::tempdir().unwrap();
    let config = engine.agent_config();
    let agent = Agent::start_with(
        &temp.path().join("data"),
        &[&format!("-config={}", config.display())],
    );
    let node_id = wait_for("the node registered", LIMIT, || {
        agent.get_json("/v1/nodes")[0]["ID"]
            .as_str()
            .map(str::to_string)
    });
    let node = agent.get_json(&format!("/v1/node/{node_id}"));
    assert_eq!(node["Attributes"]["driver.docker"], "1", "{node}");
    assert_eq!(node["Drivers"]["docker"]["Healthy"], true, "{node}");

    let job = format!(
        r#"
job "web" {{
  datacenters = ["dc1"]
  group "g" {{
    network {{
      port "http" {{
        to = 8080
      }}
    }}
    task "server" {{
      driver = "docker"
      kill_timeout = "3s"
      config {{
        image   = "{image}"
        command = "/bin/sh"
        args    = ["-c", "trap 'echo got-usr1' USR1; httpd -p 8080 -h /www; echo started-in-$NOMAD_ALLOC_DIR; echo to-stderr >&2; while true; do sleep 1; done"]
        ports   = ["http"]
        labels {{
          team = "web"
        }}
      }}
      resources {{
        cpu    = 100
        memory = 64
      }}
    }}
  }}
}}
"#,
        image = engine.image
    );
    run_job(&agent, "web.hcl", &job);
    let alloc = running_allocs(&agent, "web", 1).remove(0);
    let alloc_id = alloc["ID"].as_str().unwrap().to_string();
    let full = agent.get_json(&format!("/v1/allocation/{alloc_id}"));
    let port = &full["AllocatedResources"]["Shared"]["Ports"][0];
    let address = format!(
        "{}:{}",
        port["HostIP"]
            .as_str()
            .unwrap_or_else(|| panic!("no port in {}", full["AllocatedResources"])),
        port["Value"].as_u64().unwrap()
    );
    assert_eq!(port["To"], 8080, "{port}");

    let answer = wait_for("httpd on the published port", LIMIT, || {
        http_get(&address).filter(|answer| answer.contains("hello from drover"))
    });
    assert!(answer.starts_with("HTTP/1."), "{answer}");

    let containers = engine.containers_of(std::slice::from_ref(&alloc_id));
    assert_eq!(containers.len(), 1, "{containers:?}");
    let inspect: Value =
        serde_json::from_str(&engine.docker(&["inspect", containers.iter().next().unwrap()]))
            .unwrap();
    assert_eq!(inspect[0]["Config"]["Labels"]["team"], "web");
    assert_eq!(inspect[0]["Name"], format!("/server-{alloc_id}"));
    assert_eq!(inspect[0]["HostConfig"]["Memory"], 64 * 1024 * 1024);

    let logs = wait_for("the task's stdout in alloc logs", LIMIT, || {
        let logs = agent.cli_ok(&["alloc", "logs", &alloc_id, "server"]);
        logs.contains("started-in-/alloc").then_some(logs)
    });
    assert!(logs.contains("started-in-/alloc"), "{logs}");
    let stderr = agent.cli_ok(&["alloc", "logs", "-stderr", &alloc_id, "server"]);
    assert!(stderr.contains("to-stderr"), "{stderr}");

    let output = agent.cli(&["alloc", "exec", &alloc_id, "/bin/cat", "/www/index.html"]);
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "hello from drover\n",
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(output.status.code(), Some(0));

    agent.cli_ok(&["alloc", "signal", "-s", "SIGUSR1", &alloc_id, "server"]);
    wait_for("the trapped USR1 in the logs", LIMIT, || {
        agent
            .cli_ok(&["alloc", "logs", &alloc_id, "server"])
            .contains("got-usr1")
            .then_some(())
    });

    let stats = agent.get_json(&format!("/v1/client/allocation/{alloc_id}/stats"));
    let memory = &stats["Tasks"]["server"]["ResourceUsage"]["MemoryStats"];
    assert!(memory["Usage"].as_u64().unwrap() > 0, "{stats}");
    assert!(
        memory["Measured"]
            .as_array()
            .unwrap()
            .iter()
            .any(|name| name == "Usage"),
        "{stats}"
    );
    let status = agent.cli_ok(&["alloc", "status", &alloc_id]);
    assert!(
        status.contains("server") && status.contains("running"),
        "{status}"
    );

    agent.cli_ok(&["job", "stop", "web"]);
    wait_for("the container removed after job stop", LIMIT, || {
        engine
            .containers_of(std::slice::from_ref(&alloc_id))
            .is_empty()
            .then_some(())
    });
}

#[test]
fn a_killed_agent_reattaches_to_its_containers_without_starting_new_ones() {
    let Some(engine) = engine() else { return };
    let temp = tempfile::tempdir().unwrap();
    let data_dir = temp.path().join("data");
    let config = engine.agent_config();
    let config_flag = format!("-config={}", config.display());
    let mut agent = Agent::start_with(&data_dir, &[&config_flag]);
    let count = 4;
    let job = format!(
        r#"
job "sleepers" {{
  datacenters = ["dc1"]
  group "g" {{
    count = {count}
    task "sleeper" {{
      driver = "docker"
      kill_timeout = "1s"
      config {{
        image   = "{image}"
        command = "/bin/sh"
        args    = ["-c", "i=0; while true; do echo tick-$i; i=$((i+1)); sleep 1; done"]
      }}
      resources {{
        cpu    = 20
        memory = 32
      }}
    }}
  }}
}}
"#,
        image = engine.image
    );
    run_job(&agent, "sleepers.hcl", &job);
    let alloc_ids: Vec<String> = running_allocs(&agent, "sleepers", count)
        .iter()
        .map(|alloc| alloc["ID"].as_str().unwrap().to_string())
        .collect();
    let before = engine.containers_of(&alloc_ids);
    assert_eq!(before.len(), count, "{before:?}");

    // A container of this node whose allocation the client does not have (as one left by an
    // allocation whose state is gone): removed when the agent comes back.
    let node_id = agent.get_json("/v1/nodes")[0]["ID"]
        .as_str()
        .unwrap()
        .to_string();
    let orphan = engine
        .docker(&[
            "run",
            "-d",
            "--label",
            "com.hashicorp.nomad.alloc_id=00000000-0000-0000-0000-00000000dead",
            "--label",
            &format!("drover.node_id={node_id}"),
            "local/busybox:1",
            "sleep",
            "1000",
        ])
        .trim()
        .to_string();

    agent.kill9();
    std::thread::sleep(Duration::from_secs(2));
    let agent = Agent::start_with(&data_dir, &[&config_flag]);
    let after_restart = running_allocs(&agent, "sleepers", count);
    // Logs carry on in the same files: the ticks keep coming after the restart.
    let first = &alloc_ids[0];
    let ticks_before = agent
        .cli_ok(&["alloc", "logs", first, "sleeper"])
        .lines()
        .count();
    wait_for("more ticks after the restart", LIMIT, || {
        let logs = agent.cli_ok(&["alloc", "logs", first, "sleeper"]);
        (logs.lines().count() > ticks_before + 2).then_some(())
    });
    let logs = agent.cli_ok(&["alloc", "logs", first, "sleeper"]);
    let ticks: Vec<&str> = logs.lines().collect();
    let unique: BTreeSet<&&str> = ticks.iter().collect();
    assert!(
        ticks.len() <= unique.len() + 1,
        "at most the line in flight repeats: {logs}"
    );
    assert_eq!(engine.containers_of(&alloc_ids), before);
    wait_for("the orphaned container removed", LIMIT, || {
        (!engine
            .docker(&["ps", "-aq", "--no-trunc"])
            .contains(&orphan))
        .then_some(())
    });
    for alloc in after_restart {
        let started = events_of(&alloc, "sleeper")
            .iter()
            .filter(|event| event["Type"] == "Started")
            .count();
        assert_eq!(started, 1, "{alloc}");
    }
    agent.cli_ok(&["job", "stop", "sleepers"]);
    wait_for("the containers removed", LIMIT, || {
        engine.containers_of(&alloc_ids).is_empty().then_some(())
    });
}

#[test]
fn a_memory_hog_in_a_container_is_reported_oom_killed() {
    let Some(engine) = engine() else { return };
    let temp = tempfile::tempdir().unwrap();
    let config = engine.agent_config();
    let agent = Agent::start_with(
        &temp.path().join("data"),
        &[&format!("-config={}", config.display())],
    );
    let job = format!(
        r#"
job "oom" {{
  datacenters = ["dc1"]
  type        = "batch"
  group "g" {{
    restart {{
      attempts = 0
      mode     = "fail"
    }}
    task "hog" {{
      driver = "docker"
      config {{
        image   = "{image}"
        command = "/bin/sh"
        args    = ["-c", "a=xxxxxxxxxxxxxxxx; while true; do a=$a$a; done"]
      }}
      resources {{
        cpu    = 50
        memory = 24
      }}
    }}
  }}
}}
"#,
        image = engine.image
    );
    run_job(&agent, "oom.hcl", &job);
    let alloc = wait_for("the hog to be OOM killed", LIMIT, || {
        allocs(&agent, "oom").into_iter().find(|alloc| {
            events_of(alloc, "hog")
                .iter()
                .any(|event| event["Type"] == "Terminated")
        })
    });
    let terminated = events_of(&alloc, "hog")
        .into_iter()
        .find(|event| event["Type"] == "Terminated")
        .unwrap();
    assert_eq!(terminated["Details"]["oom_killed"], "true", "{terminated}");
    assert_eq!(
        terminated["Details"]["exit_message"], "OOM Killed",
        "{terminated}"
    );
}

/// A group's per_alloc host volumes bound into containers: each allocation writes its own
/// `data[<index>]`, and a read-only request is read-only inside the container.
#[test]
fn docker_tasks_mount_their_per_alloc_host_volumes() {
    let Some(engine) = engine() else { return };
    let temp = tempfile::tempdir().unwrap();
    let mut config = std::fs::read_to_string(engine.agent_config()).unwrap();
    config.push_str("client {\n");
    for index in 0..2 {
        let dir = temp.path().join(format!("vol{index}"));
        std::fs::create_dir_all(&dir).unwrap();
        config.push_str(&format!(
            "  host_volume \"data[{index}]\" {{\n    path = {:?}\n  }}\n",
            dir.display().to_string()
        ));
    }
    config.push_str("}\n");
    let config_path = temp.path().join("volumes.hcl");
    std::fs::write(&config_path, config).unwrap();
    let agent = Agent::start_with(
        &temp.path().join("data"),
        &[&format!("-config={}", config_path.display())],
    );
    let job = format!(
        r#"
job "dvol" {{
  datacenters = ["dc1"]
  type        = "batch"
  group "g" {{
    count = 2
    restart {{
      attempts = 0
      mode     = "fail"
    }}
    volume "data" {{
      type      = "host"
      source    = "data"
      per_alloc = true
    }}
    volume "view" {{
      type      = "host"
      source    = "data"
      per_alloc = true
      read_only = true
    }}
    task "t" {{
      driver = "docker"
      config {{
        image      = "{image}"
        force_pull = true
        command    = "/bin/sh"
        args       = ["-c", "echo $NOMAD_ALLOC_INDEX > /data/index; if touch /view/x 2>/dev/null; then echo yes; else echo no; fi > /data/view_write"]
      }}
      volume_mount {{
        volume      = "data"
        destination = "/data"
      }}
      volume_mount {{
        volume      = "view"
        destination = "/view"
      }}
      resources {{
        cpu    = 50
        memory = 32
      }}
    }}
  }}
}}
"#,
        image = engine.image
    );
    run_job(&agent, "dvol.hcl", &job);
    let done = wait_for("both allocations to finish", LIMIT, || {
        let allocs = allocs(&agent, "dvol");
        (allocs.len() == 2
            && allocs.iter().all(|alloc| {
                alloc["ClientStatus"] == "complete" || alloc["ClientStatus"] == "failed"
            }))
        .then_some(allocs)
    });
    for alloc in &done {
        assert_eq!(
            alloc["ClientStatus"],
            "complete",
            "{:?}",
            events_of(alloc, "t")
        );
        // force_pull: each start pulls, and says so first as Nomad's "Driver" event.
        let full = agent.get_json(&format!("/v1/allocation/{}", alloc["ID"].as_str().unwrap()));
        let events = events_of(&full, "t");
        let downloading = events
            .iter()
            .find(|event| event["Type"] == "Driver")
            .unwrap_or_else(|| panic!("no Driver event in {events:?}"));
        assert_eq!(
            downloading["DriverMessage"], "Downloading image",
            "{downloading}"
        );
        assert_eq!(
            downloading["DisplayMessage"], "Downloading image",
            "{downloading}"
        );
        assert_eq!(
            downloading["Details"]["image"],
            engine.image.as_str(),
            "{downloading}"
        );
    }
    for index in 0..2 {
        let dir = temp.path().join(format!("vol{index}"));
        let written = std::fs::read_to_string(dir.join("index")).unwrap();
        assert_eq!(written.trim(), index.to_string());
        let view_write = std::fs::read_to_string(dir.join("view_write")).unwrap();
        assert_eq!(
            view_write.trim(),
            "no",
            "the read-only mount refused the write"
        );
        assert!(!dir.join("x").exists());
    }
}

#[test]
fn docker_config_keys_drover_does_not_run_are_refused_by_name() {
    // No engine needed: the register refuses before anything is placed.
    let agent = Agent::start_dev();
    let (_dir, path) = write_jobspec(
        "refused.hcl",
        r#"
job "refused" {
  datacenters = ["dc1"]
  group "g" {
    task "t" {
      driver = "docker"
      config {
        image = "busybox"
        logging {
          type = "syslog"
        }
      }
    }
  }
}
"#,
    );
    let output = agent.cli(&["job", "run", "-detach", &path.to_string_lossy()]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(!output.status.success(), "{text}");
    assert!(text.contains("config.logging"), "{text}");
}
