//! End to end for the `docker` driver: a real Docker Engine (Debian's `dockerd`, started here
//! with its own data, exec root and socket under a temp dir) and a real registry on 127.0.0.1
//! (`docker-registry`), an image built locally from busybox-static and pushed there, and the
//! real agent running docker tasks from it: HTTP on the published port, logs, exec, signal,
//! stats, stop, re-attach after `kill -9` of the agent (and removal of a container whose
//! allocation the client does not have), an OOM kill, the task config keys and resources seen
//! from inside the container, pulls (auth, timeouts), `load`, the plugin's GC settings and the
//! driver conformance suite.
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
    /// `127.0.0.1:<port>/drover/pause:1`: the same rootfs, running `sleep` for ever (the
    /// pause container's image of group networks), pushed to the registry.
    pause_image: String,
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
            pause_image: format!("127.0.0.1:{port}/drover/pause:1"),
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
        // The pause image: the same layer with a command that stays.
        self.docker(&[
            "build",
            "-q",
            "-t",
            &self.pause_image,
            self.write_pause_dockerfile()?.to_str().ok_or("temp path")?,
        ]);
        for image in [&self.image, &self.pause_image] {
            wait_for(
                "the registry to take a push",
                Duration::from_secs(30),
                || {
                    Command::new("docker")
                        .args(["push", image])
                        .env("DOCKER_HOST", format!("unix://{}", self.socket().display()))
                        .output()
                        .ok()
                        .filter(|output| output.status.success())
                },
            );
            self.docker(&["rmi", image]);
        }
        Ok(())
    }

    /// A build context whose Dockerfile makes the pause image from `local/busybox:1`.
    fn write_pause_dockerfile(&self) -> Result<PathBuf, String> {
        let dir = self.temp.path().join("pause");
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        std::fs::write(
            dir.join("Dockerfile"),
            "FROM local/busybox:1\nCMD [\"/bin/sleep\", \"2147483647\"]\n",
        )
        .map_err(|e| e.to_string())?;
        Ok(dir)
    }
}

/// An engine stopped by a signal leaves its own network namespace bound at
/// `<exec-root>/netns/default` (one per start, stacked): unmounted here, so the test's temp dir
/// goes with it.
fn unmount_engine_namespaces(root: &Path) {
    let bound = root.join("exec").join("netns").join("default");
    for _ in 0..16 {
        let unmounted = nix::mount::umount2(&bound, nix::mount::MntFlags::MNT_DETACH);
        if unmounted.is_err() {
            break;
        }
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
        unmount_engine_namespaces(self.temp.path());
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

/// Nomad's deprecated task network with docker's `port_map`: the container listens on 8080,
/// the scheduler gives the task a host port, and the engine publishes that port to 8080; the
/// container's `NOMAD_PORT_http` is 8080. Without a task network, `port_map` fails the task
/// with Nomad's error.
#[test]
fn port_map_publishes_a_task_network_port_to_the_container_port() {
    let Some(engine) = engine() else { return };
    let temp = tempfile::tempdir().unwrap();
    let config = engine.agent_config();
    let agent = Agent::start_with(
        &temp.path().join("data"),
        &[&format!("-config={}", config.display())],
    );
    let job = format!(
        r#"
job "mapped" {{
  datacenters = ["dc1"]
  group "g" {{
    task "server" {{
      driver = "docker"
      kill_timeout = "3s"
      config {{
        image   = "{image}"
        command = "/bin/sh"
        args    = ["-c", "httpd -p 8080 -h /www; while true; do sleep 1; done"]
        port_map {{
          http = 8080
        }}
      }}
      resources {{
        cpu    = 100
        memory = 64
        network {{
          mbits = 10
          port "http" {{}}
        }}
      }}
    }}
  }}
}}
"#,
        image = engine.image
    );
    run_job(&agent, "mapped.hcl", &job);
    let alloc = running_allocs(&agent, "mapped", 1).remove(0);
    let alloc_id = alloc["ID"].as_str().unwrap().to_string();
    let full = agent.get_json(&format!("/v1/allocation/{alloc_id}"));
    let network = &full["AllocatedResources"]["Tasks"]["server"]["Networks"][0];
    let host_port = network["DynamicPorts"][0]["Value"].as_u64().unwrap();
    let address = format!("{}:{host_port}", network["IP"].as_str().unwrap());
    assert_ne!(host_port, 8080);

    let answer = wait_for("httpd on the task network's host port", LIMIT, || {
        http_get(&address).filter(|answer| answer.contains("hello from drover"))
    });
    assert!(answer.starts_with("HTTP/1."), "{answer}");

    let containers = engine.containers_of(std::slice::from_ref(&alloc_id));
    let inspect: Value =
        serde_json::from_str(&engine.docker(&["inspect", containers.iter().next().unwrap()]))
            .unwrap();
    let bindings = &inspect[0]["HostConfig"]["PortBindings"]["8080/tcp"];
    assert_eq!(bindings[0]["HostPort"], host_port.to_string(), "{bindings}");
    let env: Vec<&str> = inspect[0]["Config"]["Env"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(env.contains(&"NOMAD_PORT_http=8080"), "{env:?}");
    assert!(
        env.contains(&format!("NOMAD_HOST_PORT_http={host_port}").as_str()),
        "{env:?}"
    );
    agent.cli_ok(&["job", "stop", "-purge", "mapped"]);

    // port_map without a task network: the task fails as under Nomad.
    let group_ports = format!(
        r#"
job "unmapped" {{
  datacenters = ["dc1"]
  group "g" {{
    restart {{
      attempts = 0
      mode     = "fail"
    }}
    reschedule {{
      attempts  = 0
      unlimited = false
    }}
    network {{
      port "http" {{}}
    }}
    task "server" {{
      driver = "docker"
      config {{
        image   = "{image}"
        command = "/bin/true"
        port_map {{
          http = 8080
        }}
      }}
    }}
  }}
}}
"#,
        image = engine.image
    );
    run_job(&agent, "unmapped.hcl", &group_ports);
    let failure = driver_failure(&agent, "unmapped", "server");
    assert!(
        failure.contains("'port_map' cannot map group network ports, use 'ports' instead"),
        "{failure}"
    );
}

#[test]
fn a_killed_agent_reattaches_to_its_containers_without_starting_new_ones() {
    let Some(engine) = engine() else { return };
    let temp = tempfile::tempdir().unwrap();
    let data_dir = temp.path().join("data");
    let config = engine.agent_config();
    let config_flag = format!("-config={}", config.display());
    let mut agent = Agent::start_with(&data_dir, &[&config_flag]);
    let count = 10;
    let job = ticker_job("sleepers", "sleeper", count, &engine.image);
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

/// The lines `key=value` a probe task printed before `probe-done`.
fn probe_report(agent: &Agent, alloc_id: &str, task: &str) -> ProbeReport {
    let deadline = std::time::Instant::now() + LIMIT;
    let logs = loop {
        let logs = agent.cli_ok(&["alloc", "logs", alloc_id, task]);
        if logs.contains("probe-done") {
            break logs;
        }
        if std::time::Instant::now() > deadline {
            let alloc = agent.get_json(&format!("/v1/allocation/{alloc_id}"));
            let stderr = agent.cli(&["alloc", "logs", "-stderr", alloc_id, task]);
            panic!(
                "no probe report from {task}: {logs}\nstderr: {}\n{}",
                String::from_utf8_lossy(&stderr.stdout),
                alloc["TaskStates"][task]
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let stderr = agent.cli(&["alloc", "logs", "-stderr", alloc_id, task]);
    ProbeReport {
        fields: logs
            .lines()
            .filter_map(|line| line.split_once('='))
            .map(|(key, value)| (key.trim().to_string(), value.trim().to_string()))
            .collect(),
        logs,
        stderr: String::from_utf8_lossy(&stderr.stdout).into_owned(),
    }
}

/// What a probe printed (`key=value` lines), with its whole output to show when a key is
/// missing.
struct ProbeReport {
    fields: std::collections::BTreeMap<String, String>,
    logs: String,
    stderr: String,
}

impl std::ops::Index<&str> for ProbeReport {
    type Output = String;

    fn index(&self, key: &str) -> &String {
        self.fields.get(key).unwrap_or_else(|| {
            panic!(
                "the probe reported no {key}; its stdout:\n{}\nits stderr:\n{}",
                self.logs, self.stderr
            )
        })
    }
}

impl std::fmt::Debug for ProbeReport {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.fields.fmt(formatter)
    }
}

/// `/proc/self/status`'s `CapEff` as a bit set.
fn effective_caps(report: &ProbeReport) -> u64 {
    u64::from_str_radix(&report["caps"], 16).unwrap()
}

/// The task config keys Nomad users write, seen from inside the container (and, for the
/// cgroup, from the host): each one set in the jobspec takes effect in the engine, and each
/// `network_mode` (bridge, none, host, container:) gives the network namespace it names, `tty`
/// and `interactive` a terminal; a named-volume `mount` needs the client's `volumes { enabled }`.
/// Not here:
/// `privileged`, which runc cannot grant on a host whose bounding set lacks a capability
/// (this machine's lacks `CAP_SYS_RESOURCE`); its client gate is a unit test of the driver.
#[test]
fn docker_config_keys_take_effect_in_the_container() {
    let Some(engine) = engine() else { return };
    let temp = tempfile::tempdir().unwrap();
    let config = temp.path().join("agent.hcl");
    std::fs::write(
        &config,
        format!(
            "plugin \"docker\" {{\n  config {{\n    endpoint = \"unix://{}\"\n    allow_caps = [\"all\"]\n    volumes {{\n      enabled = true\n    }}\n    allowed_modes {{\n      pid = [\"host\"]\n      ipc = [\"host\"]\n      uts = [\"host\"]\n    }}\n  }}\n}}\n",
            engine.socket().display()
        ),
    )
    .unwrap();
    let agent = Agent::start_with(
        &temp.path().join("data"),
        &[&format!("-config={}", config.display())],
    );
    let probe = [
        "echo pwd=$(pwd)",
        "echo hostname=$(hostname)",
        "echo pid1=$(busybox tr '\\0' ' ' < /proc/1/cmdline)",
        "echo caps=$(busybox awk '/^CapEff/ {print $2}' /proc/self/status)",
        "echo no_new_privs=$(busybox awk '/^NoNewPrivs/ {print $2}' /proc/self/status)",
        "echo nofile=$(ulimit -n):$(ulimit -Hn)",
        "echo somaxconn=$(cat /proc/sys/net/core/somaxconn)",
        "echo extra_host=$(busybox awk '/probe.example/ {print $1}' /etc/hosts)",
        "echo nameserver=$(busybox awk '/^nameserver/ {print $2}' /etc/resolv.conf)",
        "echo search=$(busybox awk '/^search/ {print $2}' /etc/resolv.conf)",
        "echo dns_options=$(busybox awk '/^options/ {print $2}' /etc/resolv.conf)",
        "echo groups=$(id -G)",
        "if busybox touch /opt/tools/x 2>/dev/null; then echo tools=writable; else echo tools=read-only; fi",
        "echo tools_file=$(cat /opt/tools/tool.txt)",
        "if busybox touch /written 2>/dev/null; then echo rootfs=writable; else echo rootfs=read-only; fi",
        "echo shm_kb=$(busybox df -k /dev/shm | busybox awk 'NR == 2 {print $2}')",
        "echo scratch_kb=$(busybox df -k /scratch | busybox awk 'NR == 2 {print $2}')",
        "echo in-tmpfs > /scratch/file && echo scratch=$(cat /scratch/file)",
        "echo bound > /data/from-container && echo bind=ok",
        "echo in-volume > /named/file && echo named=$(cat /named/file)",
        "if [ -c /dev/probe-null ]; then echo device=char; else echo device=missing; fi",
        "echo net=$(busybox readlink /proc/self/ns/net)",
        "echo probe-done",
        "while true; do sleep 1; done",
    ]
    .join("; ");
    let net_probe = [
        "echo net=$(busybox readlink /proc/self/ns/net)",
        "echo probe-done",
        "while true; do sleep 1; done",
    ]
    .join("; ");
    let terminal_probe = [
        "if [ -t 1 ]; then echo stdout=terminal; else echo stdout=pipe; fi",
        "if [ -t 0 ]; then echo stdin=terminal; else echo stdin=other; fi",
        "echo probe-done",
        "while true; do sleep 1; done",
    ]
    .join("; ");
    let host_probe = [
        "echo netdevs=$(ls /sys/class/net | busybox tr '\\n' ' ')",
        "echo ipc=$(busybox readlink /proc/self/ns/ipc)",
        "echo pid=$(busybox readlink /proc/self/ns/pid)",
        "echo uts=$(busybox readlink /proc/self/ns/uts)",
        "echo caps=$(busybox awk '/^CapEff/ {print $2}' /proc/self/status)",
        "echo probe-done",
        "while true; do sleep 1; done",
    ]
    .join("; ");
    // As an HCL string: backslashes and quotes escaped.
    let hcl = |text: &str| text.replace('\\', "\\\\").replace('"', "\\\"");
    let (probe, host_probe, net_probe, terminal_probe) = (
        hcl(&probe),
        hcl(&host_probe),
        hcl(&net_probe),
        hcl(&terminal_probe),
    );
    let volume = format!("drover-probe-{}", std::process::id());
    let job = format!(
        r#"
job "keys" {{
  datacenters = ["dc1"]
  group "g" {{
    task "inside" {{
      driver = "docker"
      kill_timeout = "1s"
      # Running before the main tasks, so that "joined" can share its network.
      lifecycle {{
        hook    = "prestart"
        sidecar = true
      }}
      template {{
        data        = "from-the-task-dir"
        destination = "local/tools/tool.txt"
      }}
      config {{
        image           = "{image}"
        entrypoint      = ["/bin/sh", "-c"]
        args            = ["{probe}"]
        work_dir        = "/tmp"
        hostname        = "probe-host"
        dns_servers     = ["192.0.2.53"]
        dns_search_domains = ["probe.example"]
        dns_options     = ["ndots:3"]
        group_add       = ["4242"]
        extra_hosts     = ["probe.example:192.0.2.7"]
        init            = true
        readonly_rootfs = true
        shm_size        = 8388608
        pids_limit      = 64
        cap_add         = ["net_admin"]
        cap_drop        = ["chown"]
        security_opt    = ["no-new-privileges"]
        sysctl = {{
          "net.core.somaxconn" = "512"
        }}
        ulimit {{
          nofile = "1024:2048"
        }}
        devices = [
          {{
            host_path      = "/dev/null"
            container_path = "/dev/probe-null"
          }}
        ]
        volumes         = ["local/data:/data"]
        mount {{
          type   = "tmpfs"
          target = "/scratch"
          tmpfs_options {{
            size = 1048576
          }}
        }}
        mount {{
          type   = "volume"
          target = "/named"
          source = "{volume}"
        }}
        # Nomad's pre-1.0 list form.
        mounts = [
          {{
            type     = "bind"
            source   = "local/tools"
            target   = "/opt/tools"
            readonly = true
          }}
        ]
      }}
      resources {{
        cpu    = 20
        memory = 32
      }}
    }}
    task "joined" {{
      driver = "docker"
      kill_timeout = "1s"
      config {{
        image        = "{image}"
        command      = "/bin/sh"
        args         = ["-c", "{net_probe}"]
        network_mode = "container:inside-${{NOMAD_ALLOC_ID}}"
      }}
      resources {{
        cpu    = 20
        memory = 32
      }}
    }}
    task "terminal" {{
      driver = "docker"
      kill_timeout = "1s"
      config {{
        image             = "{image}"
        command           = "/bin/sh"
        args              = ["-c", "{terminal_probe}"]
        tty               = true
        interactive       = true
        cpuset_cpus       = "0"
        memory_hard_limit = 64
      }}
      resources {{
        cpu    = 20
        memory = 32
      }}
    }}
    task "hostnet" {{
      driver = "docker"
      kill_timeout = "1s"
      config {{
        image        = "{image}"
        command      = "/bin/sh"
        args         = ["-c", "{net_probe}"]
        network_mode = "host"
      }}
      resources {{
        cpu    = 20
        memory = 32
      }}
    }}
    task "host" {{
      driver = "docker"
      kill_timeout = "1s"
      config {{
        image        = "{image}"
        command      = "/bin/sh"
        args         = ["-c", "{host_probe}"]
        network_mode = "none"
        ipc_mode     = "host"
        pid_mode     = "host"
        uts_mode     = "host"
        cap_add      = ["sys_admin"]
      }}
      resources {{
        cpu    = 20
        memory = 32
      }}
    }}
  }}
}}
"#,
        image = engine.image,
        volume = volume,
    );
    run_job(&agent, "keys.hcl", &job);
    let alloc_id = running_allocs(&agent, "keys", 1)[0]["ID"]
        .as_str()
        .unwrap()
        .to_string();

    let inside = probe_report(&agent, &alloc_id, "inside");
    assert_eq!(inside["pwd"], "/tmp", "{inside:?}");
    assert_eq!(inside["hostname"], "probe-host", "{inside:?}");
    assert!(inside["pid1"].contains("docker-init"), "{inside:?}");
    let caps = effective_caps(&inside);
    const CAP_CHOWN: u32 = 0;
    const CAP_KILL: u32 = 5;
    const CAP_NET_ADMIN: u32 = 12;
    const CAP_SYS_ADMIN: u32 = 21;
    assert_eq!(caps >> CAP_CHOWN & 1, 0, "chown dropped: {inside:?}");
    assert_eq!(caps >> CAP_KILL & 1, 1, "kill kept: {inside:?}");
    assert_eq!(caps >> CAP_NET_ADMIN & 1, 1, "net_admin added: {inside:?}");
    assert_eq!(inside["no_new_privs"], "1", "{inside:?}");
    assert_eq!(inside["nofile"], "1024:2048", "{inside:?}");
    assert_eq!(inside["somaxconn"], "512", "{inside:?}");
    assert_eq!(inside["extra_host"], "192.0.2.7", "{inside:?}");
    assert_eq!(inside["nameserver"], "192.0.2.53", "{inside:?}");
    assert_eq!(inside["search"], "probe.example", "{inside:?}");
    assert_eq!(inside["dns_options"], "ndots:3", "{inside:?}");
    assert!(
        inside["groups"]
            .split_whitespace()
            .any(|group| group == "4242"),
        "{inside:?}"
    );
    assert_eq!(inside["tools"], "read-only", "{inside:?}");
    assert_eq!(inside["tools_file"], "from-the-task-dir", "{inside:?}");
    assert_eq!(inside["rootfs"], "read-only", "{inside:?}");
    assert_eq!(inside["shm_kb"], "8192", "{inside:?}");
    assert_eq!(inside["scratch_kb"], "1024", "{inside:?}");
    assert_eq!(inside["scratch"], "in-tmpfs", "{inside:?}");
    assert_eq!(inside["device"], "char", "{inside:?}");
    // volumes: a path of the task's directory, bound; mount type volume: a named volume.
    assert_eq!(inside["bind"], "ok", "{inside:?}");
    let bound = temp.path().join(format!(
        "data/alloc/{alloc_id}/inside/local/data/from-container"
    ));
    assert_eq!(std::fs::read_to_string(&bound).unwrap(), "bound\n");
    assert_eq!(inside["named"], "in-volume", "{inside:?}");
    let named: Value =
        serde_json::from_str(&engine.docker(&["volume", "inspect", &volume])).unwrap();
    assert_eq!(named[0]["Name"], volume.as_str(), "{named}");
    // pids_limit, from the host: the pids cgroup the engine put the container in.
    let container = engine
        .docker(&[
            "ps",
            "-q",
            "--no-trunc",
            "--filter",
            &format!("label=com.hashicorp.nomad.alloc_id={alloc_id}"),
            "--filter",
            "label=com.hashicorp.nomad.task_name=inside",
        ])
        .trim()
        .to_string();
    let pid = engine
        .docker(&["inspect", "--format", "{{.State.Pid}}", &container])
        .trim()
        .to_string();
    let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    let pids_max = cgroups
        .lines()
        .find_map(|line| {
            let mut fields = line.splitn(3, ':');
            let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
            if controllers.split(',').any(|name| name == "pids") {
                std::fs::read_to_string(format!("/sys/fs/cgroup/pids{path}/pids.max")).ok()
            } else if controllers.is_empty() {
                std::fs::read_to_string(format!("/sys/fs/cgroup/unified{path}/pids.max"))
                    .or_else(|_| std::fs::read_to_string(format!("/sys/fs/cgroup{path}/pids.max")))
                    .ok()
            } else {
                None
            }
        })
        .unwrap_or_else(|| panic!("no pids cgroup for {pid}: {cgroups}"));
    assert_eq!(pids_max.trim(), "64");

    let host = probe_report(&agent, &alloc_id, "host");
    assert_eq!(host["netdevs"], "lo", "network_mode none: {host:?}");
    let own_namespace = |kind: &str| {
        std::fs::read_link(format!("/proc/self/ns/{kind}"))
            .unwrap()
            .display()
            .to_string()
    };
    assert_eq!(host["ipc"], own_namespace("ipc"), "{host:?}");
    assert_eq!(host["pid"], own_namespace("pid"), "{host:?}");
    assert_eq!(host["uts"], own_namespace("uts"), "{host:?}");
    assert_eq!(
        effective_caps(&host) >> CAP_SYS_ADMIN & 1,
        1,
        "sys_admin added: {host:?}"
    );
    // tty and interactive: a terminal on both ends, its output still in alloc logs;
    // cpuset_cpus and memory_hard_limit in the host's cgroups.
    let terminal = probe_report(&agent, &alloc_id, "terminal");
    assert_eq!(terminal["stdout"], "terminal", "{terminal:?}");
    assert_eq!(terminal["stdin"], "terminal", "{terminal:?}");
    let terminal_pid = engine
        .docker(&[
            "inspect",
            "--format",
            "{{.State.Pid}}",
            &format!("terminal-{alloc_id}"),
        ])
        .trim()
        .to_string();
    assert_eq!(cgroup_file(&terminal_pid, "cpuset", "cpuset.cpus"), "0");
    assert_eq!(
        cgroup_file(&terminal_pid, "memory", "memory.limit_in_bytes"),
        (64 * 1024 * 1024).to_string()
    );
    assert_eq!(
        cgroup_file(&terminal_pid, "memory", "memory.soft_limit_in_bytes"),
        (32 * 1024 * 1024).to_string()
    );
    // network_mode: bridge (the default) is a network of the container's own, container:
    // shares another's, host is the host's.
    let joined = probe_report(&agent, &alloc_id, "joined");
    let hostnet = probe_report(&agent, &alloc_id, "hostnet");
    assert_ne!(inside["net"], own_namespace("net"), "{inside:?}");
    assert_eq!(joined["net"], inside["net"], "{joined:?}");
    assert_eq!(hostnet["net"], own_namespace("net"), "{hostnet:?}");

    agent.cli_ok(&["job", "stop", "keys"]);
    wait_for("the containers removed", LIMIT, || {
        engine
            .containers_of(std::slice::from_ref(&alloc_id))
            .is_empty()
            .then_some(())
    });
    // A named volume outlives its containers, as in Nomad.
    engine.docker(&["volume", "rm", &volume]);
}

/// The line of `/proc/<pid>/cgroup` for a v1 controller, read in that controller's hierarchy.
fn cgroup_file(pid: &str, controller: &str, file: &str) -> String {
    let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    let path = cgroups
        .lines()
        .find_map(|line| {
            let mut fields = line.splitn(3, ':');
            let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
            controllers
                .split(',')
                .any(|name| name == controller)
                .then(|| path.to_string())
        })
        .unwrap_or_else(|| panic!("no {controller} cgroup for {pid}: {cgroups}"));
    let mount = std::fs::read_dir("/sys/fs/cgroup")
        .unwrap()
        .flatten()
        .map(|entry| entry.path())
        .find(|dir| {
            dir.file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| name.split(',').any(|name| name == controller))
        })
        .unwrap_or_else(|| panic!("no {controller} hierarchy under /sys/fs/cgroup"));
    std::fs::read_to_string(format!("{}{path}/{file}", mount.display()))
        .unwrap()
        .trim()
        .to_string()
}

/// `kill_signal` stops the container with the task's signal; `cpu` becomes the container's
/// CPU shares and `cores` its cpuset, as Nomad sets them; the client's `gc { container =
/// false }` keeps a stopped task's container.
#[test]
fn kill_signal_cpu_and_cores_reach_the_container_and_gc_container_false_keeps_it() {
    let Some(engine) = engine() else { return };
    let temp = tempfile::tempdir().unwrap();
    let config = temp.path().join("agent.hcl");
    std::fs::write(
        &config,
        format!(
            "plugin \"docker\" {{\n  config {{\n    endpoint = \"unix://{}\"\n    gc {{\n      container = false\n    }}\n  }}\n}}\n",
            engine.socket().display()
        ),
    )
    .unwrap();
    let agent = Agent::start_with(
        &temp.path().join("data"),
        &[&format!("-config={}", config.display())],
    );
    let job = format!(
        r#"
job "limits" {{
  datacenters = ["dc1"]
  group "g" {{
    task "cores" {{
      driver       = "docker"
      kill_signal  = "SIGUSR1"
      kill_timeout = "30s"
      config {{
        image   = "{image}"
        command = "/bin/sh"
        args    = ["-c", "trap 'echo stopping-on-usr1; exit 0' USR1; echo up; while true; do sleep 1; done"]
      }}
      resources {{
        cores  = 1
        memory = 32
      }}
    }}
    task "shares" {{
      driver       = "docker"
      kill_timeout = "1s"
      config {{
        image   = "{image}"
        command = "/bin/sh"
        args    = ["-c", "while true; do sleep 1; done"]
      }}
      resources {{
        cpu    = 250
        memory = 32
      }}
    }}
  }}
}}
"#,
        image = engine.image
    );
    run_job(&agent, "limits.hcl", &job);
    let alloc_id = running_allocs(&agent, "limits", 1)[0]["ID"]
        .as_str()
        .unwrap()
        .to_string();
    let alloc = agent.get_json(&format!("/v1/allocation/{alloc_id}"));
    let tasks = &alloc["AllocatedResources"]["Tasks"];
    let cores: Vec<String> = tasks["cores"]["Cpu"]["ReservedCores"]
        .as_array()
        .unwrap_or_else(|| panic!("no reserved cores: {tasks}"))
        .iter()
        .map(|core| core.to_string())
        .collect();
    assert_eq!(cores.len(), 1, "{tasks}");
    let container_of_task = |task: &str| {
        engine
            .docker(&[
                "ps",
                "-aq",
                "--no-trunc",
                "--filter",
                &format!("label=com.hashicorp.nomad.alloc_id={alloc_id}"),
                "--filter",
                &format!("label=com.hashicorp.nomad.task_name={task}"),
            ])
            .trim()
            .to_string()
    };
    let pid_of = |container: &str| {
        engine
            .docker(&["inspect", "--format", "{{.State.Pid}}", container])
            .trim()
            .to_string()
    };
    let cores_container = container_of_task("cores");
    assert_eq!(
        cgroup_file(&pid_of(&cores_container), "cpuset", "cpuset.cpus"),
        cores[0],
        "{tasks}"
    );
    let shares_container = container_of_task("shares");
    assert_eq!(
        cgroup_file(&pid_of(&shares_container), "cpu", "cpu.shares"),
        "250"
    );
    wait_for("the task up", LIMIT, || {
        agent
            .cli_ok(&["alloc", "logs", &alloc_id, "cores"])
            .contains("up")
            .then_some(())
    });

    let stopping = std::time::Instant::now();
    agent.cli_ok(&["job", "stop", "limits"]);
    wait_for("the allocation stopped", LIMIT, || {
        let alloc = agent.get_json(&format!("/v1/allocation/{alloc_id}"));
        (alloc["ClientStatus"] == "complete").then_some(())
    });
    // The task's own signal ended it, long before its 30 s kill_timeout.
    assert!(
        stopping.elapsed() < Duration::from_secs(20),
        "{:?}",
        stopping.elapsed()
    );
    let logs = agent.cli_ok(&["alloc", "logs", &alloc_id, "cores"]);
    assert!(logs.contains("stopping-on-usr1"), "{logs}");
    // gc { container = false }: both containers are kept, stopped.
    for container in [&cores_container, &shares_container] {
        let running = engine.docker(&["inspect", "--format", "{{.State.Running}}", container]);
        assert_eq!(running.trim(), "false", "{container}");
    }
    engine.docker(&["rm", "-f", &cores_container, &shares_container]);
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
        image       = "busybox"
        userns_mode = "host"
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
    assert!(text.contains("config.userns_mode"), "{text}");
}

/// A second engine of the test's own, started with `--live-restore` (its containers outlive
/// it) on a bridge the test creates (an engine told `--bridge=none` deletes `docker0`, which
/// the shared engine uses) and without firewall rules of its own, which a test stops and
/// starts again. It pulls from the shared engine's registry.
struct RestartableEngine {
    dir: tempfile::TempDir,
    dockerd: Option<Child>,
    bridge: String,
}

impl RestartableEngine {
    fn start() -> RestartableEngine {
        let mut engine = RestartableEngine::prepare();
        engine.launch();
        engine
    }

    /// Its bridge and directory, without starting the engine.
    fn prepare() -> RestartableEngine {
        // A bridge and subnet per engine: two tests of this binary may run one each at once.
        static ENGINES: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let number = ENGINES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let bridge = format!("drvr{}x{number}", std::process::id() % 100_000);
        let run = |args: &[&str]| {
            let status = Command::new("ip").args(args).status().unwrap();
            assert!(status.success(), "ip {args:?}");
        };
        run(&["link", "add", &bridge, "type", "bridge"]);
        let address = format!("10.213.{}.1/24", 77 + number % 100);
        run(&["addr", "add", &address, "dev", &bridge]);
        run(&["link", "set", &bridge, "up"]);
        RestartableEngine {
            dir: tempfile::tempdir().unwrap(),
            dockerd: None,
            bridge,
        }
    }

    fn socket(&self) -> PathBuf {
        self.dir.path().join("docker.sock")
    }

    fn launch(&mut self) {
        let root = self.dir.path();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(root.join("dockerd.log"))
            .unwrap();
        let child = Command::new("dockerd")
            .arg("--storage-driver=overlay2")
            .arg(format!("--data-root={}", root.join("data").display()))
            .arg(format!("--exec-root={}", root.join("exec").display()))
            .arg(format!("--pidfile={}", root.join("dockerd.pid").display()))
            .arg(format!("--host=unix://{}", self.socket().display()))
            .arg(format!("--bridge={}", self.bridge))
            .args([
                "--iptables=false",
                "--ip-forward=false",
                "--ip-masq=false",
                "--live-restore",
            ])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("dockerd starts");
        self.dockerd = Some(child);
        wait_for("the second engine to answer", LIMIT, || {
            Command::new("docker")
                .args(["version", "--format", "{{.Server.Version}}"])
                .env("DOCKER_HOST", format!("unix://{}", self.socket().display()))
                .output()
                .ok()
                .filter(|output| output.status.success())
        });
    }

    /// Stops the engine (SIGTERM); with live-restore its containers keep running.
    fn stop(&mut self) {
        if let Some(mut child) = self.dockerd.take() {
            let pid = nix::unistd::Pid::from_raw(child.id() as i32);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
            let deadline = std::time::Instant::now() + Duration::from_secs(30);
            while child.try_wait().ok().flatten().is_none() {
                if std::time::Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }

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

    fn containers_of(&self, alloc_ids: &[String]) -> BTreeSet<String> {
        alloc_ids
            .iter()
            .flat_map(|alloc| {
                self.docker(&[
                    "ps",
                    "-q",
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

    fn agent_config(&self) -> PathBuf {
        let path = self.dir.path().join("agent.hcl");
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
}

impl Drop for RestartableEngine {
    fn drop(&mut self) {
        if self.dockerd.is_some() {
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
        }
        self.stop();
        unmount_engine_namespaces(self.dir.path());
        let _ = Command::new("umount")
            .arg("-R")
            .arg(self.dir.path().join("data"))
            .output();
        let _ = Command::new("ip")
            .args(["link", "del", &self.bridge])
            .output();
    }
}

/// The agent killed and the engine stopped (its containers kept running): the restarted agent
/// says it waits for the engine, and once the engine is back re-attaches to the same
/// containers, starting none.
#[test]
fn a_restored_task_waits_for_a_stopped_engine_and_reattaches_to_its_container() {
    let Some(shared) = engine() else { return };
    let mut engine = RestartableEngine::start();
    let temp = tempfile::tempdir().unwrap();
    let data_dir = temp.path().join("data");
    let config_flag = format!("-config={}", engine.agent_config().display());
    let mut agent = Agent::start_with(&data_dir, &[&config_flag]);
    let count = 2;
    let job = ticker_job("patient", "ticker", count, &shared.image);
    run_job(&agent, "patient.hcl", &job);
    let alloc_ids: Vec<String> = running_allocs(&agent, "patient", count)
        .iter()
        .map(|alloc| alloc["ID"].as_str().unwrap().to_string())
        .collect();
    let before = engine.containers_of(&alloc_ids);
    assert_eq!(before.len(), count, "{before:?}");

    agent.kill9();
    engine.stop();
    let agent = Agent::start_with(&data_dir, &[&config_flag]);
    let first = &alloc_ids[0];
    let waiting = wait_for("the wait for the engine as a task event", LIMIT, || {
        let alloc = agent.get_json(&format!("/v1/allocation/{first}"));
        events_of(&alloc, "ticker").into_iter().find(|event| {
            event["Type"] == "Driver"
                && event["DriverMessage"]
                    .as_str()
                    .is_some_and(|message| message.starts_with("Docker engine unreachable"))
        })
    });
    assert!(
        waiting["DriverMessage"]
            .as_str()
            .unwrap()
            .contains("waiting up to 5m0s to re-attach to container"),
        "{waiting}"
    );
    assert!(
        before.contains(waiting["Details"]["container_id"].as_str().unwrap()),
        "{waiting}"
    );

    engine.launch();
    wait_for("every task re-attached", LIMIT, || {
        alloc_ids
            .iter()
            .all(|alloc_id| {
                let alloc = agent.get_json(&format!("/v1/allocation/{alloc_id}"));
                events_of(&alloc, "ticker").iter().any(|event| {
                    event["DriverMessage"]
                        .as_str()
                        .is_some_and(|message| message.starts_with("Docker engine answering again"))
                })
            })
            .then_some(())
    });
    let after = running_allocs(&agent, "patient", count);
    assert_eq!(engine.containers_of(&alloc_ids), before);
    for alloc in &after {
        let alloc = agent.get_json(&format!("/v1/allocation/{}", alloc["ID"].as_str().unwrap()));
        let events = events_of(&alloc, "ticker");
        let started = events
            .iter()
            .filter(|event| event["Type"] == "Started")
            .count();
        assert_eq!(started, 1, "{events:?}");
        assert!(
            !events
                .iter()
                .any(|event| event["Type"] == "Failed Restoring Task"),
            "{events:?}"
        );
    }
    // The logs carry on from the same container.
    let ticks_before = agent
        .cli_ok(&["alloc", "logs", first, "ticker"])
        .lines()
        .count();
    wait_for("more ticks after the engine came back", LIMIT, || {
        let logs = agent.cli_ok(&["alloc", "logs", first, "ticker"]);
        (logs.lines().count() > ticks_before + 2).then_some(())
    });
    agent.cli_ok(&["job", "stop", "patient"]);
    wait_for("the containers removed", LIMIT, || {
        engine.containers_of(&alloc_ids).is_empty().then_some(())
    });
}

/// An agent started while its engine is down: docker undetected in the node, a docker job
/// not placed. The engine starts: the next fingerprint (every 30 s) finds it, the node
/// registers again with docker healthy, and the blocked job is placed and runs.
#[test]
fn an_engine_started_after_the_agent_is_fingerprinted_and_a_docker_job_placed() {
    let Some(shared) = engine() else { return };
    let mut engine = RestartableEngine::prepare();
    let temp = tempfile::tempdir().unwrap();
    let data_dir = temp.path().join("data");
    let config_flag = format!("-config={}", engine.agent_config().display());
    let agent = Agent::start_with(&data_dir, &[&config_flag]);
    let node_id = wait_for("the node registered", LIMIT, || {
        agent.get_json("/v1/nodes").as_array()?.first()?["ID"]
            .as_str()
            .map(str::to_string)
    });
    let node = agent.get_json(&format!("/v1/node/{node_id}"));
    let docker = &node["Drivers"]["docker"];
    assert_eq!(docker["Detected"], false, "{docker}");
    assert_eq!(docker["Healthy"], false, "{docker}");
    assert_eq!(
        docker["HealthDescription"], "Failed to connect to docker daemon",
        "{docker}"
    );
    assert!(node["Attributes"]["driver.docker"].is_null(), "{node}");

    let job = format!(
        r#"
job "late" {{
  datacenters = ["dc1"]
  group "g" {{
    task "t" {{
      driver = "docker"
      config {{
        image   = "{image}"
        command = "/bin/sh"
        args    = ["-c", "echo late-engine; sleep 600"]
      }}
      resources {{
        cpu    = 20
        memory = 32
      }}
    }}
  }}
}}
"#,
        image = shared.image
    );
    run_job(&agent, "late.hcl", &job);
    let status = agent.cli_ok(&["job", "status", "late"]);
    assert!(allocs(&agent, "late").is_empty(), "{status}");
    let blocked = wait_for("the evaluation blocked", LIMIT, || {
        agent
            .get_json("/v1/job/late/evaluations")
            .as_array()?
            .iter()
            .find(|eval| eval["Status"] == "blocked")
            .cloned()
    });
    assert_eq!(blocked["JobID"], "late", "{blocked}");

    engine.launch();
    let running = running_allocs(&agent, "late", 1);
    let node = agent.get_json(&format!("/v1/node/{node_id}"));
    let docker = &node["Drivers"]["docker"];
    assert_eq!(docker["Detected"], true, "{docker}");
    assert_eq!(docker["Healthy"], true, "{docker}");
    assert_eq!(docker["HealthDescription"], "Healthy", "{docker}");
    // The health change is a "Driver" node event, as Nomad's client emits one.
    let driver_events: Vec<&Value> = node["Events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|event| event["Subsystem"] == "Driver")
        .collect();
    assert_eq!(driver_events.len(), 1, "{node}");
    assert_eq!(driver_events[0]["Message"], "Healthy", "{node}");
    assert_eq!(driver_events[0]["Details"]["driver"], "docker", "{node}");
    assert_eq!(node["Attributes"]["driver.docker"], "1", "{node}");
    assert!(
        node["Attributes"]["driver.docker.version"]
            .as_str()
            .is_some_and(|version| !version.is_empty()),
        "{node}"
    );
    assert!(
        node["Attributes"]["driver.docker.runtimes"]
            .as_str()
            .is_some_and(|runtimes| runtimes.split(',').any(|name| name == "runc")),
        "{node}"
    );
    let alloc_ids: Vec<String> = running
        .iter()
        .map(|alloc| alloc["ID"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(engine.containers_of(&alloc_ids).len(), 1);
    wait_for("the task's output", LIMIT, || {
        agent
            .cli_ok(&["alloc", "logs", &alloc_ids[0], "t"])
            .contains("late-engine")
            .then_some(())
    });
    agent.cli_ok(&["job", "stop", "late"]);
    wait_for("the container removed", LIMIT, || {
        engine.containers_of(&alloc_ids).is_empty().then_some(())
    });
}

/// The plugin's `extra_labels` (globs), a task's `runtime` within `allow_runtimes`, and the
/// dangling-container reconciler: a running container labelled by this node's allocation that
/// no task owns is removed once older than `creation_grace`; the task's own container and
/// another node's stay.
#[test]
fn extra_labels_runtimes_and_dangling_containers_as_the_plugin_config_says() {
    let Some(engine) = engine() else { return };
    let temp = tempfile::tempdir().unwrap();
    let config = temp.path().join("agent.hcl");
    std::fs::write(
        &config,
        format!(
            r#"plugin "docker" {{
  config {{
    endpoint       = "unix://{}"
    extra_labels   = ["job_name", "task*", "node_*"]
    allow_runtimes = ["runc"]
    gc {{
      dangling_containers {{
        period         = "2s"
        creation_grace = "1m"
      }}
    }}
  }}
}}
"#,
            engine.socket().display()
        ),
    )
    .unwrap();
    let config_flag = format!("-config={}", config.display());
    let agent = Agent::start_with(&temp.path().join("data"), &[&config_flag]);
    let node = wait_for("the node registered", LIMIT, || {
        agent.get_json("/v1/nodes").as_array()?.first().cloned()
    });
    let node_id = node["ID"].as_str().unwrap().to_string();
    let job = |name: &str, runtime: &str| {
        format!(
            r#"
job "{name}" {{
  datacenters = ["dc1"]
  group "g" {{
    restart {{
      attempts = 0
      mode     = "fail"
    }}
    task "t" {{
      driver = "docker"
      kill_timeout = "1s"
      config {{
        image   = "{image}"
        command = "/bin/sleep"
        args    = ["600"]
        runtime = "{runtime}"
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
        )
    };
    run_job(&agent, "labelled.hcl", &job("labelled", "runc"));
    let alloc_id = running_allocs(&agent, "labelled", 1)[0]["ID"]
        .as_str()
        .unwrap()
        .to_string();
    let ours = engine.containers_of(std::slice::from_ref(&alloc_id));
    let container = ours.iter().next().unwrap().clone();
    let inspect: Value = serde_json::from_str(&engine.docker(&["inspect", &container])).unwrap();
    let labels = &inspect[0]["Config"]["Labels"];
    assert_eq!(labels["com.hashicorp.nomad.alloc_id"], alloc_id.as_str());
    assert_eq!(labels["com.hashicorp.nomad.job_name"], "labelled");
    assert_eq!(labels["com.hashicorp.nomad.task_name"], "t");
    assert_eq!(labels["com.hashicorp.nomad.task_group_name"], "g");
    assert_eq!(labels["com.hashicorp.nomad.node_id"], node_id.as_str());
    assert_eq!(labels["com.hashicorp.nomad.node_name"], node["Name"]);
    assert!(labels["com.hashicorp.nomad.job_id"].is_null(), "{labels}");
    assert!(
        labels["com.hashicorp.nomad.namespace"].is_null(),
        "{labels}"
    );
    assert_eq!(inspect[0]["HostConfig"]["Runtime"], "runc");

    run_job(
        &agent,
        "refused-runtime.hcl",
        &job("refused-runtime", "runsc"),
    );
    let error = driver_failure(&agent, "refused-runtime", "t");
    assert!(
        error.contains("requested runtime \"runsc\" is not allowed"),
        "{error}"
    );

    // Containers no task owns: one of this node's allocations, one of another node's.
    let dangling = |node: &str| {
        engine
            .docker(&[
                "run",
                "-d",
                "--label",
                "com.hashicorp.nomad.alloc_id=00000000-0000-0000-0000-000000000000",
                "--label",
                &format!("drover.node_id={node}"),
                &engine.image,
                "/bin/sleep",
                "600",
            ])
            .trim()
            .to_string()
    };
    let mine = dangling(&node_id);
    let theirs = dangling("another-node");
    let running = || engine.docker(&["ps", "-q", "--no-trunc"]);
    wait_for("the dangling container removed", LIMIT, || {
        (!running().contains(&mine)).then_some(())
    });
    let now = running();
    assert!(now.contains(&theirs), "{now}");
    assert!(now.contains(&container), "{now}");
    engine.docker(&["rm", "-f", &theirs]);
    agent.cli_ok(&["job", "stop", "labelled"]);
    agent.cli_ok(&["job", "stop", "refused-runtime"]);
    wait_for("the task's container removed", LIMIT, || {
        engine
            .containers_of(std::slice::from_ref(&alloc_id))
            .is_empty()
            .then_some(())
    });
}

/// A registry that asks for a password (htpasswd, bcrypt), serving the shared registry's
/// storage, so the test image is there without a push. Stopped when dropped.
struct AuthRegistry {
    _dir: tempfile::TempDir,
    child: Child,
    /// `127.0.0.1:<port>/drover/busybox:1` on this registry.
    image: String,
    address: String,
}

impl AuthRegistry {
    fn start(engine: &Engine, user: &str, password: &str) -> AuthRegistry {
        let dir = tempfile::tempdir().unwrap();
        let hash = bcrypt::hash(password, 4).unwrap();
        let htpasswd = dir.path().join("htpasswd");
        std::fs::write(&htpasswd, format!("{user}:{hash}\n")).unwrap();
        let port = free_port();
        let config = dir.path().join("registry.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:{port}\nauth:\n  htpasswd:\n    realm: drover-test\n    path: {}\n",
                engine.temp.path().join("registry").display(),
                htpasswd.display()
            ),
        )
        .unwrap();
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("docker-registry starts");
        let address = format!("127.0.0.1:{port}");
        wait_for("the password registry to listen", LIMIT, || {
            std::net::TcpStream::connect(&address).ok()
        });
        AuthRegistry {
            _dir: dir,
            child,
            image: format!("{address}/drover/busybox:1"),
            address,
        }
    }
}

impl Drop for AuthRegistry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The first "Driver Failure" of a task of a job that failed, as its driver error.
fn driver_failure(agent: &Agent, job_id: &str, task: &str) -> String {
    wait_for(&format!("{job_id} to fail"), LIMIT, || {
        allocs(agent, job_id).into_iter().find_map(|alloc| {
            events_of(&alloc, task).into_iter().find_map(|event| {
                (event["Type"] == "Driver Failure").then(|| {
                    event["DriverError"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string()
                })
            })
        })
    })
}

fn complete(agent: &Agent, job_id: &str, task: &str) {
    let alloc = wait_for(&format!("{job_id} to finish"), LIMIT, || {
        allocs(agent, job_id)
            .into_iter()
            .find(|alloc| alloc["ClientStatus"] == "complete" || alloc["ClientStatus"] == "failed")
    });
    assert_eq!(
        alloc["ClientStatus"],
        "complete",
        "{:?}",
        events_of(&alloc, task)
    );
}

fn pull_job(name: &str, image: &str, extra: &str) -> String {
    format!(
        r#"
job "{name}" {{
  datacenters = ["dc1"]
  type        = "batch"
  group "g" {{
    restart {{
      attempts = 0
      mode     = "fail"
    }}
    reschedule {{
      attempts  = 0
      unlimited = false
    }}
    task "t" {{
      driver = "docker"
      config {{
        image      = "{image}"
        force_pull = true
        command    = "/bin/echo"
        args       = ["pulled"]
{extra}
      }}
      resources {{
        cpu    = 20
        memory = 32
      }}
    }}
  }}
}}
"#
    )
}

/// Pulls from a registry that wants a password: a wrong one fails with Nomad's message, the
/// right one (from the task's `auth`, or from the client's docker config file) pulls; a
/// credential helper that cannot answer fails the pull unless the task says `auth_soft_fail`.
#[test]
fn pulls_use_the_task_auth_or_the_client_auth_config_and_auth_soft_fail() {
    let Some(engine) = engine() else { return };
    let registry = AuthRegistry::start(&engine, "drover", "s3cret");
    let temp = tempfile::tempdir().unwrap();
    let credentials = temp.path().join("docker-config.json");
    std::fs::write(
        &credentials,
        format!(
            r#"{{"auths": {{"{}": {{"auth": "{}"}}}}}}"#,
            registry.address,
            base64::Engine::encode(&base64::engine::general_purpose::STANDARD, "drover:s3cret")
        ),
    )
    .unwrap();
    let config = temp.path().join("agent.hcl");
    std::fs::write(
        &config,
        format!(
            "plugin \"docker\" {{\n  config {{\n    endpoint = \"unix://{}\"\n    auth {{\n      config = {:?}\n    }}\n  }}\n}}\n",
            engine.socket().display(),
            credentials.display().to_string()
        ),
    )
    .unwrap();
    let agent = Agent::start_with(
        &temp.path().join("data"),
        &[&format!("-config={}", config.display())],
    );

    let wrong = "        auth {\n          username = \"drover\"\n          password = \"wrong\"\n        }";
    run_job(
        &agent,
        "wrong.hcl",
        &pull_job("wrong", &registry.image, wrong),
    );
    let failure = driver_failure(&agent, "wrong", "t");
    assert!(
        failure.starts_with(&format!("Failed to pull `{}`: ", registry.image)),
        "{failure}"
    );
    assert!(
        failure.contains("unauthorized") || failure.contains("authentication required"),
        "{failure}"
    );

    let right = "        auth {\n          username = \"drover\"\n          password = \"s3cret\"\n        }";
    run_job(
        &agent,
        "right.hcl",
        &pull_job("right", &registry.image, right),
    );
    complete(&agent, "right", "t");
    let filed = pull_job("filed", &registry.image, "");
    run_job(&agent, "filed.hcl", &filed);
    complete(&agent, "filed", "t");

    // A client whose credential helper cannot answer.
    let helper_config = temp.path().join("helper.hcl");
    std::fs::write(
        &helper_config,
        format!(
            "plugin \"docker\" {{\n  config {{\n    endpoint = \"unix://{}\"\n    auth {{\n      helper = \"drover-test-missing\"\n    }}\n  }}\n}}\n",
            engine.socket().display()
        ),
    )
    .unwrap();
    let helped = Agent::start_with(
        &temp.path().join("data2"),
        &[&format!("-config={}", helper_config.display())],
    );
    run_job(&helped, "hard.hcl", &pull_job("hard", &engine.image, ""));
    let failure = driver_failure(&helped, "hard", "t");
    let repo = engine.image.trim_end_matches(":1");
    assert!(
        failure.starts_with(&format!("Failed to find docker auth for repo \"{repo}\": ")),
        "{failure}"
    );
    assert!(
        failure.contains("docker-credential-drover-test-missing"),
        "{failure}"
    );
    run_job(
        &helped,
        "soft.hcl",
        &pull_job("soft", &engine.image, "        auth_soft_fail = true"),
    );
    complete(&helped, "soft", "t");
}

/// `image_pull_timeout`: a pull from a registry that accepts connections and never answers is
/// given up after the task's timeout, with Nomad's message.
#[test]
fn a_pull_longer_than_image_pull_timeout_fails_the_task() {
    let Some(engine) = engine() else { return };
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = silent.local_addr().unwrap();
    std::thread::spawn(move || {
        // Connections are held open, unanswered, until the test process ends.
        let mut held = Vec::new();
        for stream in silent.incoming() {
            held.extend(stream.ok());
        }
    });
    let temp = tempfile::tempdir().unwrap();
    let agent = Agent::start_with(
        &temp.path().join("data"),
        &[&format!("-config={}", engine.agent_config().display())],
    );
    let image = format!("{address}/drover/silent:1");
    let started = std::time::Instant::now();
    run_job(
        &agent,
        "slow.hcl",
        &pull_job("slow", &image, "        image_pull_timeout = \"2s\""),
    );
    let failure = driver_failure(&agent, "slow", "t");
    assert_eq!(
        failure,
        format!("Failed to pull `{image}`: context deadline exceeded")
    );
    // Well before the engine's own timeouts would have ended the pull.
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
}

/// Serves one file over HTTP on 127.0.0.1 (for an artifact) until the test ends.
fn serve_file(body: Vec<u8>) -> String {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|read| read > 2) {
                line.clear();
            }
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nContent-Type: application/x-tar\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(&body);
        }
    });
    format!("http://{address}")
}

/// `load`: an image archive fetched by an artifact (not unpacked) into `local/` is loaded into
/// the engine and run, with no registry involved; `logging` picks the engine's log driver and
/// `alloc logs` still shows the task's output.
#[test]
fn a_task_loads_its_image_from_an_artifact_and_logs_through_its_log_driver() {
    let Some(engine) = engine() else { return };
    let temp = tempfile::tempdir().unwrap();
    let name = format!("drover/loaded-{}:1", std::process::id());
    engine.docker(&["tag", "local/busybox:1", &name]);
    let archive = temp.path().join("image.tar");
    engine.docker(&["save", "-o", &archive.display().to_string(), &name]);
    engine.docker(&["rmi", &name]);
    let url = serve_file(std::fs::read(&archive).unwrap());
    let agent = Agent::start_with(
        &temp.path().join("data"),
        &[&format!("-config={}", engine.agent_config().display())],
    );
    let job = format!(
        r#"
job "loaded" {{
  datacenters = ["dc1"]
  group "g" {{
    task "t" {{
      driver = "docker"
      artifact {{
        source = "{url}/image.tar"
        options {{
          archive = false
        }}
      }}
      config {{
        image   = "{name}"
        load    = "image.tar"
        command = "/bin/sh"
        args    = ["-c", "echo loaded-and-running; while true; do sleep 1; done"]
        logging {{
          type = "local"
          config {{
            max-size = "1m"
          }}
        }}
      }}
      resources {{
        cpu    = 20
        memory = 32
      }}
    }}
  }}
}}
"#
    );
    run_job(&agent, "loaded.hcl", &job);
    let alloc_id = running_allocs(&agent, "loaded", 1)[0]["ID"]
        .as_str()
        .unwrap()
        .to_string();
    wait_for("the task's output in alloc logs", LIMIT, || {
        agent
            .cli_ok(&["alloc", "logs", &alloc_id, "t"])
            .contains("loaded-and-running")
            .then_some(())
    });
    let containers = engine.containers_of(std::slice::from_ref(&alloc_id));
    let inspect: Value =
        serde_json::from_str(&engine.docker(&["inspect", containers.iter().next().unwrap()]))
            .unwrap();
    assert_eq!(inspect[0]["Config"]["Image"], name.as_str());
    assert_eq!(inspect[0]["HostConfig"]["LogConfig"]["Type"], "local");
    assert_eq!(
        inspect[0]["HostConfig"]["LogConfig"]["Config"]["max-size"],
        "1m"
    );
    // No pull: nothing said "Downloading image".
    let alloc = agent.get_json(&format!("/v1/allocation/{alloc_id}"));
    assert!(
        !events_of(&alloc, "t")
            .iter()
            .any(|event| event["DriverMessage"] == "Downloading image"),
        "{alloc}"
    );
    agent.cli_ok(&["job", "stop", "loaded"]);
    wait_for("the container removed", LIMIT, || {
        engine
            .containers_of(std::slice::from_ref(&alloc_id))
            .is_empty()
            .then_some(())
    });
}

/// `gc { image_delay }`: an image no task uses any more is removed from the engine after the
/// delay.
#[test]
fn an_image_no_task_uses_is_removed_after_the_gc_delay() {
    let Some(engine) = engine() else { return };
    let temp = tempfile::tempdir().unwrap();
    // An image of its own (its own ID: removing it touches no other test's image).
    let repository = engine.image.replace("drover/busybox:1", "drover/gc");
    let image = format!("{repository}:1");
    let mut tar = Command::new("tar")
        .arg("-C")
        .arg(engine.temp.path().join("rootfs"))
        .args(["-c", "."])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let tar_out = tar.stdout.take().unwrap();
    let imported = Command::new("docker")
        .args([
            "import",
            "-c",
            "ENV PATH=/bin",
            "-c",
            "ENV DROVER_GC_TEST=1",
            "-",
            &image,
        ])
        .env(
            "DOCKER_HOST",
            format!("unix://{}", engine.socket().display()),
        )
        .stdin(tar_out)
        .output()
        .unwrap();
    assert!(tar.wait().unwrap().success());
    assert!(imported.status.success(), "{imported:?}");
    engine.docker(&["push", &image]);
    engine.docker(&["rmi", &image]);

    let config = temp.path().join("agent.hcl");
    std::fs::write(
        &config,
        format!(
            "plugin \"docker\" {{\n  config {{\n    endpoint = \"unix://{}\"\n    gc {{\n      image_delay = \"2s\"\n    }}\n  }}\n}}\n",
            engine.socket().display()
        ),
    )
    .unwrap();
    let agent = Agent::start_with(
        &temp.path().join("data"),
        &[&format!("-config={}", config.display())],
    );
    run_job(&agent, "gc.hcl", &pull_job("gc", &image, ""));
    complete(&agent, "gc", "t");
    wait_for("the unused image removed", LIMIT, || {
        Command::new("docker")
            .args(["image", "inspect", &image])
            .env(
                "DOCKER_HOST",
                format!("unix://{}", engine.socket().display()),
            )
            .output()
            .ok()
            .filter(|output| !output.status.success())
    });
}

/// Ten containers of one job: all run, each answers `alloc exec` and `alloc logs`, each runs
/// with Nomad's default log driver settings, and `job stop` removes every one.
#[test]
fn ten_containers_of_one_job_run_answer_exec_and_logs_and_stop_cleanly() {
    let Some(engine) = engine() else { return };
    let temp = tempfile::tempdir().unwrap();
    let agent = Agent::start_with(
        &temp.path().join("data"),
        &[&format!("-config={}", engine.agent_config().display())],
    );
    let count = 10;
    let job = format!(
        r#"
job "ten" {{
  datacenters = ["dc1"]
  group "g" {{
    count = {count}
    task "t" {{
      driver = "docker"
      kill_timeout = "1s"
      config {{
        image   = "{image}"
        command = "/bin/sh"
        args    = ["-c", "echo index-$NOMAD_ALLOC_INDEX; while true; do sleep 1; done"]
      }}
      resources {{
        cpu    = 20
        memory = 24
      }}
    }}
  }}
}}
"#,
        image = engine.image
    );
    let started = std::time::Instant::now();
    run_job(&agent, "ten.hcl", &job);
    let allocs = running_allocs(&agent, "ten", count);
    eprintln!(
        "register -> {count} docker tasks running: {:?}",
        started.elapsed()
    );
    let alloc_ids: Vec<String> = allocs
        .iter()
        .map(|alloc| alloc["ID"].as_str().unwrap().to_string())
        .collect();
    let containers = engine.containers_of(&alloc_ids);
    assert_eq!(containers.len(), count, "{containers:?}");
    let mut indexes = BTreeSet::new();
    for alloc in &allocs {
        let alloc_id = alloc["ID"].as_str().unwrap();
        let logs = wait_for("the task's first line", LIMIT, || {
            let logs = agent.cli_ok(&["alloc", "logs", alloc_id, "t"]);
            logs.contains("index-").then_some(logs)
        });
        indexes.insert(logs.trim().to_string());
        let output = agent.cli(&[
            "alloc",
            "exec",
            alloc_id,
            "/bin/sh",
            "-c",
            "echo in-$NOMAD_ALLOC_ID",
        ]);
        assert_eq!(
            String::from_utf8_lossy(&output.stdout).trim(),
            format!("in-{alloc_id}"),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    assert_eq!(
        indexes,
        (0..count).map(|index| format!("index-{index}")).collect()
    );
    for container in &containers {
        let inspect: Value = serde_json::from_str(&engine.docker(&["inspect", container])).unwrap();
        let log_config = &inspect[0]["HostConfig"]["LogConfig"];
        assert_eq!(log_config["Type"], "json-file", "{log_config}");
        assert_eq!(log_config["Config"]["max-file"], "2", "{log_config}");
        assert_eq!(log_config["Config"]["max-size"], "2m", "{log_config}");
    }
    agent.cli_ok(&["job", "stop", "ten"]);
    wait_for("every container removed", LIMIT, || {
        engine.containers_of(&alloc_ids).is_empty().then_some(())
    });
}

/// The docker driver, straight through the driver API, passes the suite every driver passes.
#[test]
fn docker_passes_the_conformance_suite() {
    use drover_driver::conformance::{Scenario, run_conformance_suite};

    let Some(engine) = engine() else { return };
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path().to_path_buf();
    let config = drover_docker::DockerConfig {
        endpoint: format!("unix://{}", engine.socket().display()),
        ..drover_docker::DockerConfig::default()
    };
    let driver = drover_docker::DockerDriver::new(config);
    let image = engine.image.clone();
    let suite = std::process::id();
    let make_task = |scenario: Scenario, name: &str| {
        let script = match scenario {
            Scenario::ExitWith(code) => format!("exit {code}"),
            // pid 1 of the container ignores the SIGTERM it has no handler for: the SIGKILL
            // after the grace period ends it.
            Scenario::RunUntilKilled => "exec sleep 600".to_string(),
        };
        let alloc_dir = root.join(name);
        let task_dir = alloc_dir.join("t");
        for dir in [
            alloc_dir.join("alloc/logs"),
            task_dir.join("local"),
            task_dir.join("secrets"),
        ] {
            std::fs::create_dir_all(dir).unwrap();
        }
        drover_driver::TaskLaunch {
            task_id: format!("conformance-{suite}-{name}"),
            alloc_id: format!("conformance-{suite}-{name}"),
            task_name: "t".into(),
            driver_config: serde_json::json!({
                "image": image,
                "command": "/bin/sh",
                "args": ["-c", script],
            }),
            state_dir: root.join(format!("{name}-state")),
            logs: drover_driver::LogSettings {
                dir: alloc_dir.join("alloc/logs"),
                max_files: 2,
                max_file_size_bytes: 1024 * 1024,
            },
            task_dir: Some(task_dir),
            shared_alloc_dir: Some(alloc_dir.join("alloc")),
            ..drover_driver::TaskLaunch::default()
        }
    };
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(run_conformance_suite(&driver, &make_task))
        .unwrap();
}

/// A service job of `count` docker tasks printing `tick-<n>` every second.
fn ticker_job(job_id: &str, task: &str, count: usize, image: &str) -> String {
    format!(
        r#"
job "{job_id}" {{
  datacenters = ["dc1"]
  group "g" {{
    count = {count}
    task "{task}" {{
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
"#
    )
}

/// The first "Setup Failure" or "Driver Failure" of a task of a job, as (type, message).
fn task_failure(agent: &Agent, job_id: &str, task: &str) -> (String, String) {
    wait_for(&format!("{job_id} to fail"), LIMIT, || {
        allocs(agent, job_id).into_iter().find_map(|alloc| {
            events_of(&alloc, task).into_iter().find_map(|event| {
                let kind = event["Type"].as_str()?.to_string();
                let message = match kind.as_str() {
                    "Driver Failure" => event["DriverError"].as_str()?,
                    "Setup Failure" => event["SetupError"]
                        .as_str()
                        .filter(|text| !text.is_empty())
                        .or(event["DisplayMessage"].as_str())?,
                    _ => return None,
                };
                Some((kind, message.to_string()))
            })
        })
    })
}

/// An agent on the shared engine with `extra` in its docker plugin config.
fn agent_with_plugin_config(engine: &Engine, temp: &Path, extra: &str) -> Agent {
    let config = agent_config_with(engine, temp, extra);
    let config_flag = format!("-config={}", config.display());
    Agent::start_with(&temp.join("data"), &[&config_flag])
}

/// An agent config naming the engine, with `extra` in the plugin's config block.
fn agent_config_with(engine: &Engine, temp: &Path, extra: &str) -> PathBuf {
    let config = temp.join("agent.hcl");
    std::fs::write(
        &config,
        format!(
            "plugin \"docker\" {{\n  config {{\n    endpoint = \"unix://{}\"\n{extra}\n  }}\n}}\n",
            engine.socket().display()
        ),
    )
    .unwrap();
    config
}

/// A batch job whose raw_exec prestart task runs `plant` (with the host dir in `$HOST_DIR`)
/// before its docker task `main` runs with `main_config` and prints what `/x` shows.
fn planted_job(
    job_id: &str,
    host_dir: &Path,
    plant: &str,
    image: &str,
    main_config: &str,
) -> String {
    format!(
        r#"
job "{job_id}" {{
  datacenters = ["dc1"]
  type        = "batch"
  group "g" {{
    restart {{
      attempts = 0
      mode     = "fail"
    }}
    task "plant" {{
      driver = "raw_exec"
      lifecycle {{
        hook = "prestart"
      }}
      env {{
        HOST_DIR = "{host}"
      }}
      config {{
        command = "/bin/sh"
        args    = ["-c", <<EOT
{plant}
EOT
        ]
      }}
    }}
    task "main" {{
      driver = "docker"
      config {{
        image   = "{image}"
        command = "/bin/sh"
        args    = ["-c", "cat /x/marker /local/marker; ls /x /local"]
{main_config}
      }}
      resources {{
        cpu    = 20
        memory = 32
      }}
    }}
  }}
}}
"#,
        host = host_dir.display()
    )
}

/// GH-28177 from outside, three ways: a prestart task plants a symlink to a host directory
/// where the docker task's bind source is (its `local/` named by `volumes`, `alloc/data` named
/// by a bind `mount`, or its whole `local/`, which the automatic `/local` bind follows). Each
/// is refused when the container is created, naming the setting and the path, and the host
/// directory is never seen; a symlink that stays inside the allocation still works.
#[test]
fn planted_symlinks_cannot_bind_a_host_directory_into_a_container() {
    let Some(engine) = engine() else { return };
    let temp = tempfile::tempdir().unwrap();
    let host_dir = temp.path().join("host-secret");
    std::fs::create_dir(&host_dir).unwrap();
    std::fs::write(host_dir.join("marker"), "HOST-SECRET-MARKER\n").unwrap();
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&host_dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    let agent = agent_with_plugin_config(&engine, temp.path(), "");
    let main_local = r#"$NOMAD_ALLOC_DIR/../main/local"#;
    let cases = [
        (
            "escape-volumes",
            format!("mkdir -p {main_local} && ln -s \"$HOST_DIR\" {main_local}/x"),
            r#"        volumes = ["local/x:/x"]"#.to_string(),
            "volumes: host path \"local/x\" resolves outside the allocation directory",
        ),
        (
            "escape-mount",
            "ln -s \"$HOST_DIR\" \"$NOMAD_ALLOC_DIR/data/y\"".to_string(),
            r#"        mount {
          type   = "bind"
          source = "../alloc/data/y"
          target = "/x"
        }"#
            .to_string(),
            "mount: host path \"../alloc/data/y\" resolves outside the allocation directory",
        ),
        (
            "escape-local",
            format!(
                "mkdir -p \"$NOMAD_ALLOC_DIR/../main\" && rm -rf {main_local} && ln -s \"$HOST_DIR\" {main_local}"
            ),
            String::new(),
            "main/local\" is a symlink or not a directory",
        ),
    ];
    for (job_id, plant, main_config, refusal) in &cases {
        run_job(
            &agent,
            job_id,
            &planted_job(job_id, &host_dir, plant, &engine.image, main_config),
        );
        // The first refusal: the task dir hook's (a task dir that is a symlink, before the
        // driver runs) or the driver's (a bind source that resolves outside).
        let (kind, message) = task_failure(&agent, job_id, "main");
        assert!(message.contains(refusal), "{job_id}: {kind}: {message}");
        if kind == "Driver Failure" {
            assert!(
                message.contains("volumes { enabled = true }"),
                "{job_id}: the refusal names the setting: {message}"
            );
        }
        let alloc = allocs(&agent, job_id).remove(0);
        assert_eq!(alloc["ClientStatus"], "failed", "{job_id}");
        let alloc_id = alloc["ID"].as_str().unwrap();
        let logs = agent.cli(&["alloc", "logs", alloc_id, "main"]).stdout;
        assert!(
            !String::from_utf8_lossy(&logs).contains("HOST-SECRET-MARKER"),
            "{job_id}: the host directory was seen"
        );
        // Nothing was done to the host directory through the link either.
        use std::os::unix::fs::PermissionsExt as _;
        assert_eq!(
            std::fs::metadata(&host_dir).unwrap().permissions().mode() & 0o777,
            0o700,
            "{job_id}: the host directory's mode changed"
        );
    }
    // A symlink that stays inside the allocation is followed, as in Nomad.
    run_job(
        &agent,
        "inside-link",
        &planted_job(
            "inside-link",
            &host_dir,
            &format!(
                "mkdir -p \"$NOMAD_ALLOC_DIR/data/real\" {main_local} && echo ALLOC-MARKER > \"$NOMAD_ALLOC_DIR/data/real/marker\" && ln -s ../../alloc/data/real {main_local}/x"
            ),
            &engine.image,
            r#"        volumes = ["local/x:/x"]"#,
        ),
    );
    complete(&agent, "inside-link", "main");
    let alloc_id = allocs(&agent, "inside-link")[0]["ID"]
        .as_str()
        .unwrap()
        .to_string();
    let logs = agent.cli_ok(&["alloc", "logs", &alloc_id, "main"]);
    assert!(logs.contains("ALLOC-MARKER"), "{logs}");
    // The private mounts were detached once the container started.
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let data = temp.path().join("data").display().to_string();
    assert!(
        !mounts
            .lines()
            .any(|line| line.contains(&data) && line.contains("/binds/")),
        "staged binds left mounted: {mounts}"
    );
}

/// GH-28190: `pid_mode`, `ipc_mode` and `uts_mode` run only where the client's
/// `allowed_modes` (or `allow_privileged`) allows them; refused otherwise, naming the setting.
#[test]
fn docker_namespace_modes_run_only_where_the_client_allows_them() {
    let Some(engine) = engine() else { return };
    let job = |job_id: &str, modes: &str| {
        format!(
            r#"
job "{job_id}" {{
  datacenters = ["dc1"]
  type        = "batch"
  group "g" {{
    restart {{
      attempts = 0
      mode     = "fail"
    }}
    task "t" {{
      driver = "docker"
      config {{
        image   = "{image}"
        command = "/bin/sh"
        args    = ["-c", "ls -l /proc/self/ns/pid /proc/self/ns/uts"]
{modes}
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
        )
    };
    let closed_temp = tempfile::tempdir().unwrap();
    let closed = agent_with_plugin_config(&engine, closed_temp.path(), "");
    for (key, job_id) in [
        ("pid_mode", "pid-host"),
        ("ipc_mode", "ipc-host"),
        ("uts_mode", "uts-host"),
    ] {
        run_job(
            &closed,
            job_id,
            &job(job_id, &format!("        {key} = \"host\"")),
        );
        let error = driver_failure(&closed, job_id, "t");
        assert!(
            error.contains(&format!("cannot apply \"{key}\" configuration")),
            "{error}"
        );
        assert!(error.contains("allowed_modes"), "{error}");
    }
    drop(closed);

    let open_temp = tempfile::tempdir().unwrap();
    let open = agent_with_plugin_config(
        &engine,
        open_temp.path(),
        "    allowed_modes {\n      pid = [\"host\"]\n      ipc = [\"host\"]\n      uts = [\"host\"]\n    }",
    );
    run_job(
        &open,
        "host-modes",
        &job(
            "host-modes",
            "        pid_mode = \"host\"\n        ipc_mode = \"host\"\n        uts_mode = \"host\"",
        ),
    );
    complete(&open, "host-modes", "t");
    let alloc_id = allocs(&open, "host-modes")[0]["ID"]
        .as_str()
        .unwrap()
        .to_string();
    let logs = open.cli_ok(&["alloc", "logs", &alloc_id, "t"]);
    for ns in ["pid", "uts"] {
        let host = std::fs::read_link(format!("/proc/self/ns/{ns}")).unwrap();
        assert!(
            logs.contains(&host.display().to_string()),
            "the container is in the host's {ns} namespace ({}): {logs}",
            host.display()
        );
    }
}

/// Whether the group-network tests can run: the CNI reference plugins and iptables (under CI
/// a missing one fails the test).
fn cni_prerequisites() -> bool {
    let mut missing = Vec::new();
    for plugin in ["bridge", "host-local", "loopback", "firewall", "portmap"] {
        if !Path::new("/usr/lib/cni").join(plugin).is_file() {
            missing.push(format!(
                "/usr/lib/cni/{plugin} (containernetworking-plugins)"
            ));
        }
    }
    if Command::new("iptables").arg("--version").output().is_err() {
        missing.push("iptables".to_string());
    }
    if missing.is_empty() {
        return true;
    }
    assert!(!in_ci(), "group network tests need {}", missing.join(", "));
    eprintln!("skipping: group network tests need {}", missing.join(", "));
    false
}

/// Host-local reservations naming the allocation (Nomad's bridge network `nomad`).
fn ipam_reservations(alloc_id: &str) -> usize {
    std::fs::read_dir("/var/run/cni/nomad")
        .map(|entries| {
            entries
                .flatten()
                .filter(|entry| {
                    std::fs::read_to_string(entry.path()).is_ok_and(|text| text.contains(alloc_id))
                })
                .count()
        })
        .unwrap_or(0)
}

/// Nomad's shared group network with docker: a pause container from the client's
/// `infra_image` (pulled from the registry) owns the namespace; two docker tasks and an exec
/// task of one bridge group reach each other on localhost; the mapped port reaches the
/// container from the host; a `kill -9` of the agent keeps the same pause container (no second
/// one); stop removes it with the namespace and the address.
#[test]
fn docker_and_exec_tasks_of_a_bridge_group_share_the_pause_containers_namespace() {
    if !cni_prerequisites() {
        return;
    }
    let Some(engine) = engine() else { return };
    let temp = tempfile::tempdir().unwrap();
    let data_dir = temp.path().join("data");
    let config = agent_config_with(
        &engine,
        temp.path(),
        &format!("infra_image = \"{}\"", engine.pause_image),
    );
    let config_flag = format!("-config={}", config.display());
    let mut agent = Agent::start_with(&data_dir, &[&config_flag]);
    let image = &engine.image;
    let probe = |name: &str| {
        format!(
            "while :; do printf 'GET /index.html HTTP/1.0\\r\\n\\r\\n' | nc 127.0.0.1 8080 > /alloc/data/{name}.tmp 2>&1; mv /alloc/data/{name}.tmp /alloc/data/{name}.out; sleep 1; done"
        )
    };
    let job = format!(
        r#"
job "duo" {{
  datacenters = ["dc1"]
  group "g" {{
    network {{
      mode     = "bridge"
      hostname = "duo-${{NOMAD_ALLOC_INDEX}}"
      port "http" {{
        to = 8080
      }}
    }}
    task "web" {{
      driver = "docker"
      config {{
        image   = "{image}"
        command = "/bin/httpd"
        args    = ["-f", "-p", "8080", "-h", "/www"]
        ports   = ["http"]
      }}
      service {{
        name         = "duo-web"
        provider     = "nomad"
        port         = "http"
        address_mode = "driver"
      }}
    }}
    task "client" {{
      driver = "docker"
      config {{
        image   = "{image}"
        command = "/bin/sh"
        args    = ["-c", "hostname > /alloc/data/hostname; {docker_probe}"]
      }}
    }}
    task "side" {{
      driver = "exec"
      config {{
        command = "/bin/sh"
        args    = ["-c", "PATH=/bin:/usr/bin; readlink /proc/self/ns/net > /alloc/data/side.netns; while :; do printf 'GET /index.html HTTP/1.0\r\n\r\n' | /bin/busybox nc 127.0.0.1 8080 > /alloc/data/side.tmp 2>&1; mv /alloc/data/side.tmp /alloc/data/side.out; sleep 1; done"]
      }}
    }}
  }}
}}
"#,
        docker_probe = probe("client")
    );
    run_job(&agent, "duo.hcl", &job);
    let alloc_id = running_allocs(&agent, "duo", 1)[0]["ID"]
        .as_str()
        .unwrap()
        .to_string();
    let alloc = agent.get_json(&format!("/v1/allocation/{alloc_id}"));
    let data = data_dir.join("alloc").join(&alloc_id).join("alloc/data");
    for name in ["client", "side"] {
        let path = data.join(format!("{name}.out"));
        wait_for(
            &format!("the {name} task reaching the web container on localhost"),
            LIMIT,
            || {
                std::fs::read_to_string(&path)
                    .ok()
                    .filter(|text| text.contains("hello from drover"))
            },
        );
    }
    // One namespace: the pause container's, bound at the allocation's path, entered by all.
    let pause = engine
        .docker(&[
            "inspect",
            "--format",
            "{{.Id}} {{.State.Pid}} {{.Config.Image}} {{.HostConfig.NetworkMode}} {{.Config.Hostname}}",
            &format!("nomad_init_{alloc_id}"),
        ])
        .trim()
        .to_string();
    let fields: Vec<&str> = pause.split(' ').collect();
    assert_eq!(fields[2], engine.pause_image, "{pause}");
    assert_eq!(fields[3], "none", "{pause}");
    assert_eq!(fields[4], "duo-0", "{pause}");
    let (pause_id, pause_pid) = (fields[0].to_string(), fields[1].to_string());
    let pause_netns = std::fs::read_link(format!("/proc/{pause_pid}/ns/net")).unwrap();
    let side_netns = std::fs::read_to_string(data.join("side.netns")).unwrap();
    assert_eq!(
        side_netns.trim(),
        pause_netns.to_string_lossy(),
        "exec task's namespace"
    );
    assert_ne!(
        std::fs::read_link("/proc/self/ns/net").unwrap(),
        pause_netns,
        "the group's namespace is not the host's"
    );
    for task in ["web", "client"] {
        let mode = engine.docker(&[
            "inspect",
            "--format",
            "{{.HostConfig.NetworkMode}}",
            &format!("{task}-{alloc_id}"),
        ]);
        assert_eq!(mode.trim(), format!("container:{pause_id}"), "{task}");
    }
    let hostname = std::fs::read_to_string(data.join("hostname")).unwrap();
    assert_eq!(hostname.trim(), "duo-0");
    // The mapped port reaches the web container from the host, through the bridge's portmap.
    let port = &alloc["AllocatedResources"]["Shared"]["Ports"][0];
    let address = format!(
        "{}:{}",
        port["HostIP"].as_str().unwrap(),
        port["Value"].as_u64().unwrap()
    );
    wait_for(&format!("the web container on {address}"), LIMIT, || {
        http_get(&address).filter(|answer| answer.contains("hello from drover"))
    });
    assert!(
        alloc["NetworkStatus"]["Address"]
            .as_str()
            .is_some_and(|address| address.starts_with("172.26.")),
        "{}",
        alloc["NetworkStatus"]
    );

    // address_mode = "driver": the container's address (the group's) and the port inside.
    let registered = wait_for("the driver-mode service registered", LIMIT, || {
        agent
            .get_json("/v1/service/duo-web")
            .as_array()?
            .first()
            .cloned()
    });
    assert_eq!(
        registered["Address"], alloc["NetworkStatus"]["Address"],
        "{registered}"
    );
    assert_eq!(registered["Port"], 8080, "{registered}");

    // A killed agent finds the same pause container and namespace again.
    agent.kill9();
    std::thread::sleep(Duration::from_secs(1));
    let agent = Agent::start_with(&data_dir, &[&config_flag]);
    running_allocs(&agent, "duo", 1);
    wait_for(
        &format!("the web container on {address} after a restart"),
        LIMIT,
        || http_get(&address).filter(|answer| answer.contains("hello from drover")),
    );
    let pauses = engine.docker(&[
        "ps",
        "-aq",
        "--no-trunc",
        "--filter",
        &format!("name=nomad_init_{alloc_id}"),
    ]);
    assert_eq!(pauses.trim(), pause_id, "one pause container, the same");
    assert_eq!(ipam_reservations(&alloc_id), 1, "one address");

    agent.cli_ok(&["job", "stop", "-purge", "duo"]);
    wait_for(
        "the pause container, namespace and address removed",
        LIMIT,
        || {
            (engine
                .containers_of(std::slice::from_ref(&alloc_id))
                .is_empty()
                && !Path::new("/var/run/netns").join(&alloc_id).exists()
                && ipam_reservations(&alloc_id) == 0)
                .then_some(())
        },
    );
    let rules = Command::new("iptables-save").output().unwrap();
    let rules = String::from_utf8_lossy(&rules.stdout);
    assert!(!rules.contains(&alloc_id), "iptables rules left: {rules}");
}
