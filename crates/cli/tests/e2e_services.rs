//! End to end: a job's group and task services in the built-in catalog through the real agent —
//! registered with the task's real host address and port once it runs (an HTTP GET to them is
//! answered by the task), and gone from `GET /v1/service/<name>` as soon as the job is stopped,
//! while the group's `shutdown_delay` still keeps the task running.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod support;

use std::time::{Duration, Instant};

use serde_json::Value;
use support::{Agent, http, wait_for, write_jobspec};

const LIMIT: Duration = Duration::from_secs(60);
const SHUTDOWN_DELAY_SECS: u64 = 10;

/// The registrations of `name` (none while the catalog answers anything but a JSON array).
fn registrations(agent: &Agent, name: &str) -> Vec<Value> {
    let (status, body) = http("GET", &agent.url(&format!("/v1/service/{name}")), None);
    if status != 200 {
        return Vec::new();
    }
    serde_json::from_str::<Value>(&body)
        .ok()
        .and_then(|value| value.as_array().cloned())
        .unwrap_or_default()
}

/// Whether an HTTP server answers `GET /` on `address` with a 200.
fn answers(address: &str) -> bool {
    use std::io::{Read, Write};
    let Ok(socket) = address.parse() else {
        return false;
    };
    let Ok(mut stream) = std::net::TcpStream::connect_timeout(&socket, Duration::from_secs(2))
    else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    if write!(stream, "GET / HTTP/1.0\r\nHost: {address}\r\n\r\n").is_err() {
        return false;
    }
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response.starts_with("HTTP/1.0 200") || response.starts_with("HTTP/1.1 200")
}

#[test]
fn group_and_task_services_are_registered_while_running_and_gone_before_shutdown_delay() {
    let agent = Agent::start_dev();
    let suffix = std::process::id();
    let group_service = format!("e2e-front-{suffix}");
    let task_service = format!("e2e-http-{suffix}");
    let jobspec = format!(
        r#"
job "svc" {{
  group "web" {{
    shutdown_delay = "{SHUTDOWN_DELAY_SECS}s"
    network {{
      port "http" {{}}
    }}
    service {{
      name     = "{group_service}"
      port     = "http"
      provider = "nomad"
      tags     = ["group"]
    }}
    task "server" {{
      driver = "raw_exec"
      config {{
        command = "python3"
        args    = ["-m", "http.server", "${{NOMAD_PORT_http}}", "--bind", "${{NOMAD_IP_http}}"]
      }}
      service {{
        name = "{task_service}"
        port = "http"
        tags = ["index-${{NOMAD_ALLOC_INDEX}}"]
      }}
    }}
  }}
}}
"#
    );
    let (_dir, path) = write_jobspec("svc.hcl", &jobspec);
    agent.cli_ok(&["job", "run", "-detach", &path.to_string_lossy()]);

    let alloc = wait_for("a running alloc of svc", LIMIT, || {
        let allocs = agent.get_json("/v1/job/svc/allocations");
        let first = allocs.as_array()?.first()?.clone();
        (first["ClientStatus"] == "running").then_some(first)
    });
    let alloc_id = alloc["ID"].as_str().unwrap().to_owned();
    let full = agent.get_json(&format!("/v1/allocation/{alloc_id}"));
    let port = &full["AllocatedResources"]["Shared"]["Ports"][0];
    let host_ip = port["HostIP"].as_str().unwrap().to_owned();
    let host_port = port["Value"].as_i64().unwrap();

    for (name, tag, owner) in [
        (&group_service, "group", "group-web".to_owned()),
        (&task_service, "index-0", "server".to_owned()),
    ] {
        let found = wait_for(&format!("{name} in the catalog"), LIMIT, || {
            let found = registrations(&agent, name);
            (!found.is_empty()).then_some(found)
        });
        assert_eq!(found.len(), 1, "{found:?}");
        let registration = &found[0];
        assert_eq!(
            registration["ID"],
            format!("_nomad-task-{alloc_id}-{owner}-{name}-http")
        );
        assert_eq!(registration["AllocID"], alloc_id.as_str());
        assert_eq!(registration["JobID"], "svc");
        assert_eq!(registration["Namespace"], "default");
        assert_eq!(registration["Datacenter"], "dc1");
        assert_eq!(registration["Tags"], serde_json::json!([tag]));
        assert_eq!(registration["Address"], host_ip.as_str());
        assert_eq!(registration["Port"], host_port);
    }

    // The registered address is the task's.
    let task_address = format!("{host_ip}:{host_port}");
    wait_for("the task to answer on its service address", LIMIT, || {
        answers(&task_address).then_some(())
    });

    let stopped_at = Instant::now();
    agent.cli_ok(&["job", "stop", "-detach", "svc"]);
    wait_for("both services out of the catalog", LIMIT, || {
        (registrations(&agent, &group_service).is_empty()
            && registrations(&agent, &task_service).is_empty())
        .then_some(())
    });
    let gone_after = stopped_at.elapsed();
    assert!(
        gone_after < Duration::from_secs(SHUTDOWN_DELAY_SECS),
        "deregistered only after {gone_after:?}"
    );
    // The delay is still being waited: the task still answers.
    assert!(
        answers(&task_address),
        "the task runs during the shutdown delay"
    );

    let finished = wait_for("the alloc to stop", LIMIT, || {
        let alloc = agent.get_json(&format!("/v1/allocation/{alloc_id}"));
        (alloc["ClientStatus"] == "complete").then_some(alloc)
    });
    assert!(
        stopped_at.elapsed() >= Duration::from_secs(SHUTDOWN_DELAY_SECS),
        "the shutdown delay was waited: {finished}"
    );
    assert!(registrations(&agent, &group_service).is_empty());
}

/// `examples/web.hcl` runs as its comment says: both instances are in the catalog under
/// `web-frontend` with their real address and port, each answers an HTTP GET there, and each
/// one's check reaches `success` in `/v1/client/allocation/<id>/checks`.
#[test]
fn the_web_example_registers_both_instances_and_their_checks_pass() {
    let agent = Agent::start_dev();
    let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/web.hcl");
    agent.cli_ok(&["job", "run", "-detach", &example.to_string_lossy()]);

    let allocs = wait_for("two running allocations of web", LIMIT, || {
        let allocs = agent.get_json("/v1/job/web/allocations");
        let running: Vec<String> = allocs
            .as_array()?
            .iter()
            .filter(|alloc| alloc["ClientStatus"] == "running")
            .map(|alloc| alloc["ID"].as_str().unwrap_or_default().to_owned())
            .collect();
        (running.len() == 2).then_some(running)
    });
    let found = wait_for("both instances in the catalog", LIMIT, || {
        let found = registrations(&agent, "web-frontend");
        (found.len() == 2).then_some(found)
    });
    for alloc_id in &allocs {
        let full = agent.get_json(&format!("/v1/allocation/{alloc_id}"));
        let port = &full["AllocatedResources"]["Shared"]["Ports"][0];
        let address = format!(
            "{}:{}",
            port["HostIP"].as_str().unwrap(),
            port["Value"].as_i64().unwrap()
        );
        let registration = found
            .iter()
            .find(|registration| registration["AllocID"] == alloc_id.as_str())
            .unwrap_or_else(|| panic!("no registration of {alloc_id}: {found:?}"));
        assert_eq!(
            format!(
                "{}:{}",
                registration["Address"].as_str().unwrap(),
                registration["Port"]
            ),
            address
        );
        assert_eq!(
            registration["Tags"],
            serde_json::json!(["web", "team-platform"])
        );
        wait_for("the instance to answer on its address", LIMIT, || {
            answers(&address).then_some(())
        });
        // The first check runs within half its 10 s interval.
        wait_for("the instance's check to pass", LIMIT, || {
            let checks = agent.get_json(&format!("/v1/client/allocation/{alloc_id}/checks"));
            let results: Vec<&Value> = checks.as_object()?.values().collect();
            (results.len() == 1 && results[0]["Status"] == "success").then_some(())
        });
    }
    agent.cli_ok(&["job", "stop", "-purge", "web"]);
    wait_for("the catalog to empty", LIMIT, || {
        registrations(&agent, "web-frontend")
            .is_empty()
            .then_some(())
    });
}

/// A `grpc` check asks a real gRPC health server (tonic's, in this test, on a static port of
/// the group's network): `success` while it answers `SERVING` for the check's `grpc_service`,
/// `failure` with the status once it answers `NOT_SERVING`.
#[test]
fn a_grpc_check_follows_the_health_service_it_asks() {
    let agent = Agent::start_dev();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let service = drover_client::testing_grpc::health(&[("app", 1)]);
    let statuses = service.statuses.clone();
    let address = runtime.block_on(drover_client::testing_grpc::serve_plain_on(
        service,
        "0.0.0.0:0",
    ));
    let port = address.rsplit_once(':').unwrap().1.to_owned();
    let jobspec = format!(
        r#"
job "grpccheck" {{
  group "g" {{
    network {{
      port "grpc" {{
        static = {port}
      }}
    }}
    service {{
      name     = "grpc-app-{port}"
      port     = "grpc"
      # Nomad runs grpc checks only for Consul services; without Consul, drover runs them.
      provider = "consul"
      check {{
        type         = "grpc"
        grpc_service = "app"
        interval     = "1s"
        timeout      = "2s"
      }}
    }}
    task "t" {{
      driver = "raw_exec"
      config {{
        command = "/bin/sleep"
        args    = ["3600"]
      }}
    }}
  }}
}}
"#
    );
    let (_dir, path) = write_jobspec("grpccheck.hcl", &jobspec);
    agent.cli_ok(&["job", "run", "-detach", &path.to_string_lossy()]);
    let alloc_id = wait_for("a running allocation", LIMIT, || {
        let allocs = agent.get_json("/v1/job/grpccheck/allocations");
        allocs
            .as_array()?
            .iter()
            .find(|alloc| alloc["ClientStatus"] == "running")
            .and_then(|alloc| alloc["ID"].as_str().map(str::to_owned))
    });
    let check = |status: &str| {
        wait_for(&format!("the grpc check to be {status}"), LIMIT, || {
            let checks = agent.get_json(&format!("/v1/client/allocation/{alloc_id}/checks"));
            let results: Vec<Value> = checks.as_object()?.values().cloned().collect();
            (results.len() == 1 && results[0]["Status"] == status).then(|| results[0].clone())
        })
    };
    let passing = check("success");
    assert!(
        passing["Output"]
            .as_str()
            .unwrap()
            .ends_with(&format!(":{port}/app: success")),
        "{passing}"
    );
    statuses.lock().unwrap().insert("app".to_owned(), 2);
    let failing = check("failure");
    assert!(
        failing["Output"]
            .as_str()
            .unwrap()
            .ends_with(&format!(":{port}/app serving status: NOT_SERVING")),
        "{failing}"
    );
    agent.cli_ok(&["job", "stop", "-purge", "grpccheck"]);
}

/// `kill -9` of the agent and a restart on its data dir: the task keeps running, and neither
/// the catalog nor the checks flap — the registration keeps its ID and ModifyIndex (it is never
/// removed and added again), and every read of the check from the restart until its first new
/// result says `success` (the restored result, then the new one).
#[test]
fn a_killed_agent_restarts_with_the_same_registration_and_no_flapping_check() {
    let temp = tempfile::tempdir().unwrap();
    let data_dir = temp.path().join("data");
    let mut agent = Agent::start_with(&data_dir, &[]);
    let name = format!("e2e-restart-{}", std::process::id());
    let jobspec = format!(
        r#"
job "restart-svc" {{
  group "web" {{
    network {{
      port "http" {{}}
    }}
    service {{
      name     = "{name}"
      port     = "http"
      provider = "nomad"
      check {{
        name     = "index"
        type     = "http"
        path     = "/"
        interval = "4s"
        timeout  = "2s"
      }}
    }}
    task "server" {{
      driver = "raw_exec"
      config {{
        command = "python3"
        args    = ["-m", "http.server", "${{NOMAD_PORT_http}}", "--bind", "${{NOMAD_IP_http}}"]
      }}
    }}
  }}
}}
"#
    );
    let (_dir, path) = write_jobspec("restart-svc.hcl", &jobspec);
    agent.cli_ok(&["job", "run", "-detach", &path.to_string_lossy()]);
    let alloc_id = wait_for("a running alloc", LIMIT, || {
        let allocs = agent.get_json("/v1/job/restart-svc/allocations");
        let first = allocs.as_array()?.first()?.clone();
        (first["ClientStatus"] == "running").then(|| first["ID"].as_str().unwrap().to_owned())
    });
    let checks_path = format!("/v1/client/allocation/{alloc_id}/checks");
    let check = |agent: &Agent| -> Option<Value> {
        let (status, body) = http("GET", &agent.url(&checks_path), None);
        if status != 200 {
            return None;
        }
        let checks: Value = serde_json::from_str(&body).ok()?;
        checks.as_object()?.values().next().cloned()
    };
    let before_check = wait_for("the check to pass", LIMIT, || {
        check(&agent).filter(|result| result["Status"] == "success")
    });
    let before = wait_for("the registration", LIMIT, || {
        let found = registrations(&agent, &name);
        (found.len() == 1).then(|| found[0].clone())
    });
    let task_address = format!("{}:{}", before["Address"].as_str().unwrap(), before["Port"]);

    agent.kill9();
    assert!(answers(&task_address), "the task runs without its agent");
    let agent = Agent::start_with(&data_dir, &[]);

    // From the restart until the check's first new result, every read is a success.
    let mut reads = 0;
    let after_check = wait_for("a new result of the check", LIMIT, || {
        let result = check(&agent)?;
        reads += 1;
        assert_eq!(
            result["Status"], "success",
            "read {reads} after the restart: {result}"
        );
        (result["Timestamp"] != before_check["Timestamp"]).then_some(result)
    });
    assert_eq!(after_check["ID"], before_check["ID"]);
    let after = registrations(&agent, &name);
    assert_eq!(after.len(), 1, "{after:?}");
    for field in [
        "ID",
        "AllocID",
        "Address",
        "Port",
        "CreateIndex",
        "ModifyIndex",
    ] {
        assert_eq!(
            after[0][field], before[field],
            "{field}: {after:?} / {before}"
        );
    }
    assert!(answers(&task_address), "the same task still answers");
    agent.cli_ok(&["job", "stop", "-purge", "restart-svc"]);
    wait_for("the catalog to empty", LIMIT, || {
        registrations(&agent, &name).is_empty().then_some(())
    });
}
