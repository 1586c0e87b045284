//! End to end through the real agent with ACLs on: namespaces created and shown with the CLI,
//! a job running in one, lists across namespaces (`namespace=*`), a job in an unknown
//! namespace refused with Nomad's error, a delete refused while a job runs and a variable
//! lives there, `default` never deleted, and a token whose policy names one namespace seeing
//! only that one.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::{Agent, drover_bin, wait_for, write_jobspec};

const LIMIT: Duration = Duration::from_secs(60);

fn json_of(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|error| panic!("{error}: {body}"))
}

/// One HTTP request with an optional token and body: (status, body).
fn call(method: &str, url: &str, token: Option<&str>, body: Option<&str>) -> (u16, String) {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_at(rest.find('/').unwrap());
    let mut stream = std::net::TcpStream::connect(host).unwrap();
    let token_header = token
        .map(|token| format!("X-Nomad-Token: {token}\r\n"))
        .unwrap_or_default();
    let body = body.unwrap_or("");
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n{token_header}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).unwrap();
    let status = raw.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, raw.split_once("\r\n\r\n").unwrap().1.to_owned())
}

fn cli(agent: &Agent, token: &str, args: &[&str]) -> std::process::Output {
    std::process::Command::new(drover_bin())
        .args(args)
        .env("NOMAD_ADDR", &agent.address)
        .env("NOMAD_TOKEN", token)
        .env_remove("NOMAD_NAMESPACE")
        .output()
        .unwrap()
}

fn stdout_ok(output: &std::process::Output) -> String {
    assert!(output.status.success(), "{output:?}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn sleeper(job_id: &str) -> String {
    format!(
        r#"
job "{job_id}" {{
  datacenters = ["dc1"]
  group "app" {{
    task "sleep" {{
      driver = "raw_exec"
      config {{
        command = "/bin/sleep"
        args    = ["3600"]
      }}
      resources {{
        cpu    = 50
        memory = 32
      }}
    }}
  }}
}}
"#
    )
}

/// A job that registers but never places (no node is named `nowhere`).
fn unplaceable_job(job_id: &str, namespace: &str) -> String {
    json!({"Job": {
        "ID": job_id, "Name": job_id, "Namespace": namespace, "Type": "service",
        "Datacenters": ["dc1"],
        "TaskGroups": [{
            "Name": "app", "Count": 1,
            "Constraints": [{
                "LTarget": "${node.unique.name}", "RTarget": "nowhere", "Operand": "="
            }],
            "Tasks": [{
                "Name": "server", "Driver": "raw_exec",
                "Config": {"command": "/bin/sleep", "args": ["3600"]},
                "Resources": {"CPU": 50, "MemoryMB": 32}
            }]
        }]
    }})
    .to_string()
}

fn ids(list: &Value, field: &str) -> Vec<String> {
    let mut ids: Vec<String> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item[field].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    ids
}

#[test]
fn namespaces_isolate_jobs_and_tokens_see_only_their_namespaces() {
    let temp = tempfile::tempdir().unwrap();
    let config = temp.path().join("acl.hcl");
    std::fs::write(&config, "acl {\n  enabled = true\n}\n").unwrap();
    let agent = Agent::start_with(
        &temp.path().join("data"),
        &[&format!("-config={}", config.display())],
    );
    let url = |path: &str| agent.url(path);
    let (status, body) = call("POST", &url("/v1/acl/bootstrap"), None, None);
    assert_eq!(status, 200, "{body}");
    let root = json_of(&body)["SecretID"].as_str().unwrap().to_owned();

    // `default` is there from the start; writing a namespace needs management.
    let listed = json_of(&call("GET", &url("/v1/namespaces"), Some(&root), None).1);
    assert_eq!(listed[0]["Name"], "default");
    assert_eq!(listed[0]["Description"], "Default shared namespace");
    assert_eq!(
        call(
            "PUT",
            &url("/v1/namespace/web"),
            None,
            Some(r#"{"Name": "web"}"#)
        ),
        (403, "Permission denied".to_owned())
    );

    // The CLI creates, lists and shows namespaces as Nomad's.
    assert_eq!(
        stdout_ok(&cli(
            &agent,
            &root,
            &["namespace", "apply", "-description", "Web team", "web"]
        ))
        .trim(),
        "Successfully applied namespace \"web\"!"
    );
    assert_eq!(
        stdout_ok(&cli(&agent, &root, &["namespace", "list"])),
        "Name     Description\ndefault  Default shared namespace\nweb      Web team\n"
    );
    assert_eq!(
        stdout_ok(&cli(&agent, &root, &["namespace", "status", "we"])),
        "Name                   = web\nDescription            = Web team\nQuota                  =\nEnabled Drivers        = *\nDisabled Drivers       =\nEnabled Network Modes  = *\nDisabled Network Modes =\n"
    );
    let inspected = json_of(&stdout_ok(&cli(
        &agent,
        &root,
        &["namespace", "inspect", "web"],
    )));
    assert_eq!(inspected["Name"], "web");
    assert!(inspected["CreateIndex"].as_u64().unwrap() > 1);
    let (status, body) = call("GET", &url("/v1/namespace/nope"), Some(&root), None);
    assert_eq!((status, body.as_str()), (404, "Namespace not found"));
    let (status, body) = call(
        "PUT",
        &url("/v1/namespace/web"),
        Some(&root),
        Some(r#"{"Name": "other"}"#),
    );
    assert_eq!(
        (status, body.as_str()),
        (400, "Namespace name does not match request path")
    );
    let (status, body) = call(
        "PUT",
        &url("/v1/namespace"),
        Some(&root),
        Some(r#"{"Name": "bad name"}"#),
    );
    assert_eq!(status, 400);
    assert_eq!(
        body,
        "Invalid namespace \"bad name\": 1 error occurred:\n\t* invalid name \"bad name\". Must match regex ^[a-zA-Z0-9-]{1,128}$\n\n"
    );

    // A job runs in `web` (`-namespace`), another waits in `default`.
    let (_dir, path) = write_jobspec("web.hcl", &sleeper("web-app"));
    stdout_ok(&cli(
        &agent,
        &root,
        &[
            "job",
            "run",
            "-detach",
            "-namespace",
            "web",
            path.to_str().unwrap(),
        ],
    ));
    let (status, body) = call(
        "PUT",
        &url("/v1/jobs"),
        Some(&root),
        Some(&unplaceable_job("default-app", "default")),
    );
    assert_eq!(status, 200, "{body}");
    wait_for("web-app running in web", LIMIT, || {
        let (_, body) = call(
            "GET",
            &url("/v1/job/web-app/allocations?namespace=web"),
            Some(&root),
            None,
        );
        serde_json::from_str::<Value>(&body)
            .ok()
            .filter(|allocs| allocs[0]["ClientStatus"] == "running")
    });
    // Not found in `default`; both across namespaces.
    assert_eq!(
        call("GET", &url("/v1/job/web-app"), Some(&root), None).0,
        404
    );
    let everywhere = json_of(&call("GET", &url("/v1/jobs?namespace=*"), Some(&root), None).1);
    assert_eq!(ids(&everywhere, "ID"), ["default-app", "web-app"]);
    let allocs = json_of(
        &call(
            "GET",
            &url("/v1/allocations?namespace=*"),
            Some(&root),
            None,
        )
        .1,
    );
    assert_eq!(ids(&allocs, "Namespace"), ["web"]);

    // A job in a namespace that does not exist is refused, over HTTP and by the CLI.
    let (status, body) = call(
        "PUT",
        &url("/v1/jobs"),
        Some(&root),
        Some(&unplaceable_job("lost", "nope")),
    );
    assert_eq!(
        (status, body.as_str()),
        (
            400,
            "1 error occurred:\n\t* job \"lost\" is in nonexistent namespace \"nope\"\n\n"
        )
    );
    let refused = cli(
        &agent,
        &root,
        &["job", "run", "-namespace", "nope", path.to_str().unwrap()],
    );
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr)
            .contains("job \\\"web-app\\\" is in nonexistent namespace \\\"nope\\\"")
            || String::from_utf8_lossy(&refused.stderr)
                .contains("job \"web-app\" is in nonexistent namespace \"nope\""),
        "{refused:?}"
    );

    // A namespace holding a running job and a variable is not deleted; default never is.
    let (status, body) = call(
        "PUT",
        &url("/v1/var/app/config?namespace=web"),
        Some(&root),
        Some(r#"{"Items": {"port": "8080"}}"#),
    );
    assert_eq!(status, 200, "{body}");
    let (status, body) = call("DELETE", &url("/v1/namespace/web"), Some(&root), None);
    assert_eq!(
        (status, body.as_str()),
        (
            400,
            "3 errors occurred:\n\t* namespace \"web\" has non-terminal jobs in regions: [global]\n\t* namespace \"web\" has non-terminal allocations in regions: [global]\n\t* namespace \"web\" has variables associated with it in regions: [global]\n\n"
        )
    );
    let refused = cli(&agent, &root, &["namespace", "delete", "web"]);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).starts_with("Error deleting namespace:"),
        "{refused:?}"
    );
    let (status, body) = call("DELETE", &url("/v1/namespace/default"), Some(&root), None);
    assert_eq!(
        (status, body.as_str()),
        (400, "can not delete default namespace")
    );

    // A token whose policy names only `web` sees only `web`.
    let (status, body) = call(
        "PUT",
        &url("/v1/acl/policy/web-read"),
        Some(&root),
        Some(
            &json!({"Name": "web-read", "Rules": "namespace \"web\" { policy = \"read\" }"})
                .to_string(),
        ),
    );
    assert_eq!(status, 200, "{body}");
    let (status, body) = call(
        "POST",
        &url("/v1/acl/token"),
        Some(&root),
        Some(r#"{"Name": "web reader", "Type": "client", "Policies": ["web-read"]}"#),
    );
    assert_eq!(status, 200, "{body}");
    let reader = json_of(&body)["SecretID"].as_str().unwrap().to_owned();
    let seen = json_of(&call("GET", &url("/v1/jobs?namespace=*"), Some(&reader), None).1);
    assert_eq!(ids(&seen, "ID"), ["web-app"]);
    let seen = json_of(&call("GET", &url("/v1/namespaces"), Some(&reader), None).1);
    assert_eq!(ids(&seen, "Name"), ["web"]);
    assert_eq!(
        call("GET", &url("/v1/jobs"), Some(&reader), None),
        (403, "Permission denied".to_owned())
    );
    assert_eq!(
        call("GET", &url("/v1/jobs?namespace=web"), Some(&reader), None).0,
        200
    );
    assert_eq!(
        call("GET", &url("/v1/namespace/default"), Some(&reader), None),
        (403, "Permission denied".to_owned())
    );
    assert_eq!(
        call("GET", &url("/v1/namespace/web"), Some(&reader), None).0,
        200
    );
    let seen = json_of(&call("GET", &url("/v1/vars?namespace=*"), Some(&reader), None).1);
    assert_eq!(ids(&seen, "Path"), ["app/config"]);

    // Emptied, the namespace goes.
    stdout_ok(&cli(
        &agent,
        &root,
        &["job", "stop", "-purge", "-namespace", "web", "web-app"],
    ));
    let (status, _) = call(
        "DELETE",
        &url("/v1/var/app/config?namespace=web"),
        Some(&root),
        None,
    );
    assert_eq!(status, 204);
    wait_for("web's allocation stops", LIMIT, || {
        let (status, body) = call("DELETE", &url("/v1/namespace/web"), Some(&root), None);
        (status == 200).then_some(()).or_else(|| {
            assert!(body.contains("non-terminal allocations"), "{body}");
            None
        })
    });
    assert_eq!(
        stdout_ok(&cli(&agent, &root, &["namespace", "list"])),
        "Name     Description\ndefault  Default shared namespace\n"
    );
}
