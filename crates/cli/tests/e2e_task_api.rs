//! The task API of a client-only agent, end to end: a server-only agent and a client-only
//! agent, each its own process, and real tasks calling their `secrets/api.sock` with their
//! `NOMAD_TOKEN`. The client has no keyring: it asks its servers who a token is and what it
//! holds, keeps their answers for `acl { token_ttl, policy_ttl }`, and refuses at once the
//! token of an allocation it has stopped. With ACLs on, policies bound to a job through
//! `JobACL` let its tasks list jobs (checked by the server) and read their allocation's
//! stats (checked by the client).

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use support::{Agent, agent_config, wait_for, write_jobspec};

const LIMIT: Duration = Duration::from_secs(90);

fn json_of(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|error| panic!("{error}: {body}"))
}

/// Writes an HTTP/1.1 request with an optional token and body to `stream`; answers (status,
/// body).
fn exchange(
    mut stream: impl std::io::Read + std::io::Write,
    host: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&str>,
) -> (u16, String) {
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

/// One request to an agent's HTTP API.
fn call(
    agent: &Agent,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&str>,
) -> (u16, String) {
    let host = agent.address.trim_start_matches("http://").to_owned();
    let stream = std::net::TcpStream::connect(&host).unwrap();
    exchange(stream, &host, method, path, token, body)
}

/// One request over a task's API socket, as the task makes it.
fn over_socket(socket: &Path, path: &str, token: Option<&str>) -> (u16, String) {
    let stream = std::os::unix::net::UnixStream::connect(socket).unwrap();
    exchange(stream, "localhost", "GET", path, token, None)
}

/// A server-only agent and a client-only agent (its own process, pointed at the server),
/// both with `server_acl` / `client_acl` as their `acl` block; answers them once the client's
/// node is ready.
fn server_and_client(temp: &Path, acl: &str, client_acl: &str) -> (Agent, Agent) {
    let server_dir = temp.join("server");
    let server_config = agent_config(
        &server_dir,
        "server.hcl",
        &format!("client {{\n  enabled = false\n}}\n{acl}"),
    );
    let server = Agent::start_server(
        &server_dir.join("data"),
        &[&format!("-config={server_config}")],
    );
    let server_addr = server.address.trim_start_matches("http://").to_owned();
    let client_dir = temp.join("client");
    let client_config = agent_config(
        &client_dir,
        "client.hcl",
        &format!("name = \"api-node\"\nserver {{\n  enabled = false\n}}\n{client_acl}"),
    );
    let client = Agent::start_with(
        &client_dir.join("data"),
        &[
            "-client",
            &format!("-servers={server_addr}"),
            &format!("-config={client_config}"),
        ],
    );
    (server, client)
}

/// The ID of the running allocation of `job_id`, read with `token`.
fn running_alloc(server: &Agent, job_id: &str, token: Option<&str>) -> String {
    wait_for(&format!("a running alloc of {job_id}"), LIMIT, || {
        let (status, body) = call(
            server,
            "GET",
            &format!("/v1/job/{job_id}/allocations"),
            token,
            None,
        );
        assert_eq!(status, 200, "{body}");
        let allocs = json_of(&body);
        let alloc = allocs.as_array()?.first()?.clone();
        assert_ne!(alloc["ClientStatus"], "failed", "{alloc}");
        (alloc["ClientStatus"] == "running").then(|| alloc["ID"].as_str().unwrap().to_owned())
    })
}

/// A task's directory on the client.
fn task_dir(client: &Agent, alloc_id: &str, task: &str) -> PathBuf {
    client.data_dir.join("alloc").join(alloc_id).join(task)
}

/// What the task wrote into `local/<name>` (written whole through a rename).
fn task_report(dir: &Path, name: &str) -> String {
    wait_for(name, LIMIT, || {
        std::fs::read_to_string(dir.join("local").join(name)).ok()
    })
}

/// The last round a looping task wrote into `local/<name>`: its number and status code.
fn last_round(dir: &Path, name: &str) -> Option<(u64, String)> {
    let text = std::fs::read_to_string(dir.join("local").join(name)).ok()?;
    let (round, code) = text.split_once(' ')?;
    Some((round.parse().ok()?, code.to_owned()))
}

/// The status code of the next round the task writes into `local/<name>`.
fn next_code(dir: &Path, name: &str) -> String {
    let seen = last_round(dir, name).map_or(0, |(round, _)| round);
    wait_for(&format!("another round of {name}"), LIMIT, || {
        last_round(dir, name).filter(|(round, _)| *round > seen)
    })
    .1
}

/// A raw_exec task that reads its own job's variable, another job's, and its own without a
/// token through its socket once, then keeps asking for the job list (the server's check)
/// and its allocation's stats (the client's), writing each status code after the round's
/// number.
const RAW_EXEC_READER: &str = r#"
job "JOB" {
  group "g" {
    task "reader" {
      driver = "raw_exec"
      identity {
        env  = true
        file = true
      }
      config {
        command = "/bin/sh"
        args = ["-c", <<EOT
sock="$NOMAD_SECRETS_DIR/api.sock"
out="$NOMAD_TASK_DIR"
put() { printf '%s' "$2" > "$out/$1.tmp" && mv "$out/$1.tmp" "$out/$1"; }
code() { curl -s -o /dev/null -w '%%{http_code}' --unix-socket "$sock" "$@"; }
put own "$(curl -s --unix-socket "$sock" -H "X-Nomad-Token: $NOMAD_TOKEN" http://localhost/v1/var/nomad/jobs/JOB)"
put other "$(code -H "X-Nomad-Token: $NOMAD_TOKEN" http://localhost/v1/var/nomad/jobs/other)"
put none "$(code http://localhost/v1/var/nomad/jobs/JOB)"
i=0
while true; do
  i=$((i + 1))
  put jobs "$i $(code -H "X-Nomad-Token: $NOMAD_TOKEN" http://localhost/v1/jobs)"
  put stats "$i $(code -H "X-Nomad-Token: $NOMAD_TOKEN" http://localhost/v1/client/allocation/$NOMAD_ALLOC_ID/stats)"
  sleep 0.3
done
EOT
        ]
      }
    }
  }
}
"#;

/// Bootstraps the server's ACLs and waits, with the management token it returns, for the
/// client node `api-node` to be ready; returns the token's secret.
fn bootstrap_and_wait_for_client(server: &Agent) -> String {
    let (status, body) = call(server, "POST", "/v1/acl/bootstrap", None, None);
    assert_eq!(status, 200, "{body}");
    let root_secret = json_of(&body)["SecretID"].as_str().unwrap().to_owned();
    wait_for("the client node to be ready", LIMIT, || {
        let (_, body) = call(server, "GET", "/v1/nodes", Some(&root_secret), None);
        json_of(&body)
            .as_array()?
            .iter()
            .any(|node| node["Name"] == "api-node" && node["Status"] == "ready")
            .then_some(())
    });
    root_secret
}

#[test]
fn a_client_only_agents_task_api_checks_tokens_with_its_servers_and_applies_job_acls() {
    let temp = tempfile::tempdir().unwrap();
    // The client asks again for a token's policies after 1 s, for its identity after an hour.
    let (server, client) = server_and_client(
        temp.path(),
        "acl {\n  enabled = true\n}\n",
        "acl {\n  enabled    = true\n  token_ttl  = \"1h\"\n  policy_ttl = \"1s\"\n}\n",
    );
    let root_secret = bootstrap_and_wait_for_client(&server);
    let root = Some(root_secret.as_str());
    for (path, value) in [
        ("nomad/jobs/apireader", "own-secret-31f"),
        ("nomad/jobs/other", "other-secret-a08"),
    ] {
        let body = json!({"Items": {"value": value}}).to_string();
        let (status, answer) = call(
            &server,
            "PUT",
            &format!("/v1/var/{path}"),
            root,
            Some(&body),
        );
        assert_eq!(status, 200, "{answer}");
    }
    for job in ["apireader", "apiwitness"] {
        let (_dir, path) =
            write_jobspec(&format!("{job}.hcl"), &RAW_EXEC_READER.replace("JOB", job));
        let output = std::process::Command::new(support::drover_bin())
            .args(["job", "run", "-detach", &path.to_string_lossy()])
            .env("NOMAD_ADDR", &server.address)
            .env("NOMAD_TOKEN", &root_secret)
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
    }
    let alloc_id = running_alloc(&server, "apireader", root);
    let witness_alloc = running_alloc(&server, "apiwitness", root);
    let dir = task_dir(&client, &alloc_id, "reader");

    // The task, through its socket with its NOMAD_TOKEN: its own job's variable, not
    // another job's, nothing without a token (401, as Nomad's task API).
    let own = json_of(&task_report(&dir, "own"));
    assert_eq!(own["Items"]["value"], "own-secret-31f", "{own}");
    assert_eq!(task_report(&dir, "other"), "403");
    assert_eq!(task_report(&dir, "none"), "401");
    // No policy is bound to its job yet: the server refuses the job list, the client its
    // allocation's stats.
    assert_eq!(next_code(&dir, "jobs"), "403");
    assert_eq!(next_code(&dir, "stats"), "403");

    // A policy bound to the job (Nomad's JobACL): both are let through, the client's check
    // once its kept policies are older than policy_ttl.
    let policy = json!({
        "Name": "apireader-read",
        "Rules": "namespace \"default\" { policy = \"read\" }",
        "JobACL": {"Namespace": "default", "JobID": "apireader"}
    })
    .to_string();
    let (status, body) = call(
        &server,
        "PUT",
        "/v1/acl/policy/apireader-read",
        root,
        Some(&policy),
    );
    assert_eq!(status, 200, "{body}");
    wait_for("the task to list jobs and read its stats", LIMIT, || {
        let (_, jobs) = last_round(&dir, "jobs")?;
        let (_, stats) = last_round(&dir, "stats")?;
        (jobs == "200" && stats == "200").then_some(())
    });
    // The other job holds no such policy.
    let witness_dir = task_dir(&client, &witness_alloc, "reader");
    assert_eq!(next_code(&witness_dir, "jobs"), "403");
    assert_eq!(next_code(&witness_dir, "stats"), "403");

    // The workload lists the policies bound to it, as Nomad's ACL.ListPolicies and
    // /v1/acl/policy/self answer a workload identity.
    let socket = dir.join("secrets/api.sock");
    let token = std::fs::read_to_string(dir.join("secrets/nomad_token")).unwrap();
    for path in ["/v1/acl/policies", "/v1/acl/policy/self"] {
        let (status, body) = over_socket(&socket, path, Some(&token));
        assert_eq!(status, 200, "{path}: {body}");
        let names: Vec<Value> = json_of(&body)
            .as_array()
            .unwrap()
            .iter()
            .map(|stub| stub["Name"].clone())
            .collect();
        assert_eq!(names, vec![json!("apireader-read")], "{path}: {body}");
    }
    // From outside too: a token the servers do not know is 403, none is 401.
    assert_eq!(
        over_socket(&socket, "/v1/jobs", Some("not.a.jwt")),
        (403, "Forbidden".to_owned())
    );
    assert_eq!(
        over_socket(&socket, "/v1/jobs", None),
        (401, "Unauthorized".to_owned())
    );
    // The client's own endpoints, with ACLs on: nothing without a token.
    assert_eq!(
        call(&client, "GET", "/v1/client/stats", None, None),
        (403, "Permission denied".to_owned())
    );

    // The client keeps a token's identity for token_ttl: a management token deleted on the
    // server is refused there at once, and by the client once its answer is that old.
    let (status, body) = call(
        &server,
        "PUT",
        "/v1/acl/token",
        root,
        Some(r#"{"Name": "short-lived", "Type": "management"}"#),
    );
    assert_eq!(status, 200, "{body}");
    let created = json_of(&body);
    let secret = created["SecretID"].as_str().unwrap().to_owned();
    let accessor = created["AccessorID"].as_str().unwrap().to_owned();
    assert_eq!(
        call(&client, "GET", "/v1/client/stats", Some(&secret), None).0,
        200
    );
    // The node's metadata on the client-only agent: node read to read it, node write to
    // apply, checked there with the policies its servers hold.
    let (status, body) = call(
        &server,
        "PUT",
        "/v1/acl/policy/node-reader",
        root,
        Some(r#"{"Name": "node-reader", "Rules": "node { policy = \"read\" }"}"#),
    );
    assert_eq!(status, 200, "{body}");
    let (status, body) = call(
        &server,
        "PUT",
        "/v1/acl/token",
        root,
        Some(r#"{"Name": "reader", "Type": "client", "Policies": ["node-reader"]}"#),
    );
    assert_eq!(status, 200, "{body}");
    let reader = json_of(&body)["SecretID"].as_str().unwrap().to_owned();
    let apply = r#"{"Meta": {"rack": "r7"}}"#;
    assert_eq!(
        call(&client, "GET", "/v1/client/metadata", None, None),
        (403, "Permission denied".to_owned())
    );
    let (status, body) = call(&client, "GET", "/v1/client/metadata", Some(&reader), None);
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        call(
            &client,
            "POST",
            "/v1/client/metadata",
            Some(&reader),
            Some(apply)
        ),
        (403, "Permission denied".to_owned())
    );
    let (status, body) = call(
        &client,
        "POST",
        "/v1/client/metadata",
        Some(&secret),
        Some(apply),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(json_of(&body)["Dynamic"]["rack"], "r7", "{body}");
    let (status, _) = call(
        &server,
        "DELETE",
        &format!("/v1/acl/token/{accessor}"),
        root,
        None,
    );
    assert_eq!(status, 200);
    assert_eq!(
        call(&server, "GET", "/v1/jobs", Some(&secret), None),
        (403, "ACL token not found".to_owned())
    );
    assert_eq!(
        call(&client, "GET", "/v1/client/stats", Some(&secret), None).0,
        200
    );

    // Once the allocation stops, its token is refused everywhere at once: by the client,
    // through another task's socket and on its own endpoints (the cached identity is an
    // hour old at most, but this node stopped the allocation), and by the server.
    let (status, body) = call(&server, "DELETE", "/v1/job/apireader", root, None);
    assert_eq!(status, 200, "{body}");
    wait_for("the alloc to stop", LIMIT, || {
        let (_, body) = call(
            &server,
            "GET",
            &format!("/v1/allocation/{alloc_id}"),
            root,
            None,
        );
        (json_of(&body)["ClientStatus"] == "complete").then_some(())
    });
    let witness_socket = witness_dir.join("secrets/api.sock");
    assert_eq!(
        over_socket(
            &witness_socket,
            "/v1/var/nomad/jobs/apireader",
            Some(&token)
        ),
        (403, "Forbidden".to_owned())
    );
    assert_eq!(
        call(
            &client,
            "GET",
            &format!("/v1/client/allocation/{alloc_id}/stats"),
            Some(&token),
            None
        )
        .0,
        403
    );
    assert_eq!(
        call(
            &client,
            "GET",
            "/v1/var/nomad/jobs/apireader",
            Some(&token),
            None
        ),
        (403, "Permission denied".to_owned())
    );
    assert!(!socket.exists(), "the stopped task's socket is removed");

    // While no server answers, what the client holds stands in: the other task, once a
    // policy is bound to its job too, keeps reading its stats (its policies kept past
    // policy_ttl) while its job list, which only a server answers, fails.
    let policy = json!({
        "Name": "apiwitness-read",
        "Rules": "namespace \"default\" { policy = \"read\" }",
        "JobACL": {"Namespace": "default", "JobID": "apiwitness"}
    })
    .to_string();
    let (status, body) = call(
        &server,
        "PUT",
        "/v1/acl/policy/apiwitness-read",
        root,
        Some(&policy),
    );
    assert_eq!(status, 200, "{body}");
    wait_for("the other task to read its stats", LIMIT, || {
        let (_, stats) = last_round(&witness_dir, "stats")?;
        (stats == "200").then_some(())
    });
    drop(server);
    let (gone_at, _) = wait_for("the job list to fail without a server", LIMIT, || {
        last_round(&witness_dir, "jobs").filter(|(_, code)| code == "502")
    });
    // Four rounds later (over a second at 0.3 s a round), the kept policies are stale.
    let (round, stats) = wait_for("four more rounds", LIMIT, || {
        last_round(&witness_dir, "stats").filter(|(round, _)| *round >= gone_at + 4)
    });
    assert_eq!(stats, "200", "round {round}");
}

#[test]
fn with_acls_off_an_exec_tasks_socket_on_a_client_only_agent_still_requires_a_valid_token() {
    let temp = tempfile::tempdir().unwrap();
    let (server, client) = server_and_client(temp.path(), "", "");
    wait_for("the client node to be ready", LIMIT, || {
        let nodes = server.get_json("/v1/nodes");
        nodes
            .as_array()?
            .iter()
            .any(|node| node["Name"] == "api-node" && node["Status"] == "ready")
            .then_some(())
    });
    for (path, value) in [
        ("nomad/jobs/execapi", "from-inside-e4d"),
        ("nomad/jobs/other", "not-yours-0b2"),
    ] {
        let body = json!({"Items": {"value": value}}).to_string();
        let (status, answer) = call(
            &server,
            "PUT",
            &format!("/v1/var/{path}"),
            None,
            Some(&body),
        );
        assert_eq!(status, 200, "{answer}");
    }
    let probe = r#"put() { printf '%s' "$2" > "/local/$1.tmp" && mv "/local/$1.tmp" "/local/$1"; }
code() { curl -s -o /dev/null -w '%%{http_code}' --unix-socket /secrets/api.sock "$@"; }
put own "$(curl -s --unix-socket /secrets/api.sock -H "X-Nomad-Token: $NOMAD_TOKEN" http://localhost/v1/var/nomad/jobs/execapi)"
put other "$(code -H "X-Nomad-Token: $NOMAD_TOKEN" http://localhost/v1/var/nomad/jobs/other)"
put jobs "$(code -H "X-Nomad-Token: $NOMAD_TOKEN" http://localhost/v1/jobs)"
put none "$(code http://localhost/v1/jobs)"
exec sleep 3600
"#;
    let hcl = format!(
        r#"
job "execapi" {{
  group "g" {{
    task "probe" {{
      driver = "exec"
      identity {{
        env  = true
        file = true
      }}
      config {{
        command = "/bin/sh"
        args    = ["-c", {probe:?}]
      }}
    }}
  }}
}}
"#
    );
    let (_dir, path) = write_jobspec("execapi.hcl", &hcl);
    server.cli_ok(&["job", "run", "-detach", &path.to_string_lossy()]);
    let alloc_id = running_alloc(&server, "execapi", None);
    let dir = task_dir(&client, &alloc_id, "probe");

    // ACLs off: the token is still checked (with the servers), then anything goes but
    // another job's variables, which a workload identity may not read.
    let own = json_of(&task_report(&dir, "own"));
    assert_eq!(own["Items"]["value"], "from-inside-e4d", "{own}");
    assert_eq!(task_report(&dir, "other"), "403");
    assert_eq!(task_report(&dir, "jobs"), "200");
    assert_eq!(task_report(&dir, "none"), "401");
    let socket = dir.join("secrets/api.sock");
    assert_eq!(
        over_socket(
            &socket,
            "/v1/jobs",
            Some("8c9d0e1f-0000-4000-8000-000000000000")
        ),
        (403, "Forbidden".to_owned())
    );

    // A stopped allocation's token is refused by the servers the client forwards to.
    let token = std::fs::read_to_string(dir.join("secrets/nomad_token")).unwrap();
    server.cli_ok(&["job", "stop", "execapi"]);
    wait_for("the alloc to stop", LIMIT, || {
        let alloc = server.get_json(&format!("/v1/allocation/{alloc_id}"));
        (alloc["ClientStatus"] == "complete").then_some(())
    });
    assert_eq!(
        call(
            &client,
            "GET",
            "/v1/var/nomad/jobs/execapi",
            Some(&token),
            None
        ),
        (403, "Permission denied".to_owned())
    );
    assert!(!socket.exists(), "the stopped task's socket is removed");
}

/// A browser's exec session (Nomad's web UI): no token header, `ws_handshake=true`, the token
/// in the first message. A client-only agent used to refuse it with 403 before the upgrade,
/// on its own address and behind a server agent that forwards it, because only a server's
/// ACL layer knew the handshake.
#[test]
fn a_browsers_exec_handshake_token_is_checked_by_a_client_only_agent_through_its_servers() {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;

    let temp = tempfile::tempdir().unwrap();
    let (server, client) = server_and_client(
        temp.path(),
        "acl {\n  enabled = true\n}\n",
        "acl {\n  enabled = true\n}\n",
    );
    let root_secret = bootstrap_and_wait_for_client(&server);
    let root = Some(root_secret.as_str());
    let (_dir, path) = write_jobspec(
        "handshake.hcl",
        &RAW_EXEC_READER.replace("JOB", "handshake"),
    );
    let output = std::process::Command::new(support::drover_bin())
        .args(["job", "run", "-detach", &path.to_string_lossy()])
        .env("NOMAD_ADDR", &server.address)
        .env("NOMAD_TOKEN", &root_secret)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let alloc_id = running_alloc(&server, "handshake", root);

    let url = |agent: &Agent| {
        format!(
            "{}/v1/client/allocation/{alloc_id}/exec?task=reader&tty=false&ws_handshake=true&command={}",
            agent.address.replacen("http", "ws", 1),
            support::percent_encode(&json!(["echo", "through-the-handshake"]).to_string())
        )
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    for agent in [&client, &server] {
        let handshake = json!({"version": 1, "auth_token": root_secret});
        let outcome = runtime.block_on(support::exec_websocket_outcome(
            &url(agent),
            vec![handshake],
        ));
        assert_eq!(outcome.stdout, "through-the-handshake\n", "{outcome:?}");
        assert_eq!(outcome.exit_code, 0);

        // A token the servers do not know: the session closes with a policy violation.
        let (code, reason) = runtime.block_on(async {
            let (mut socket, _) = tokio_tungstenite::connect_async(url(agent)).await.unwrap();
            let handshake =
                json!({"version": 1, "auth_token": "00000000-0000-0000-0000-000000000000"});
            socket
                .send(Message::Text(handshake.to_string().into()))
                .await
                .unwrap();
            while let Some(message) = socket.next().await {
                match message {
                    Ok(Message::Close(Some(frame))) => {
                        return (u16::from(frame.code), frame.reason.as_str().to_owned());
                    }
                    Ok(Message::Close(None)) | Err(_) => break,
                    Ok(_) => {}
                }
            }
            panic!("the session ended without a close frame");
        });
        assert_eq!(code, 1008, "{reason}");
        assert!(reason.contains("ACL token not found"), "{reason}");
    }
}
