//! End to end through the real agent: `drover var put|get|list|purge` as Nomad's, variable
//! locks over HTTP (a held lock blocks writes and deletes without its ID, renew and release
//! by ID only, Nomad's errors), a lock not renewed released by the server after twice its TTL
//! and its delay, `drover var lock` running a command while holding the lock, and
//! `Variable` events on the event stream.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod support;

use std::io::{BufRead, BufReader, Write};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{Agent, http, wait_for};

fn put(agent: &Agent, path: &str, body: &Value) -> (u16, String) {
    http("PUT", &agent.url(path), Some(&body.to_string()))
}

fn json_of(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|error| panic!("{error}: {body}"))
}

#[test]
fn var_commands_and_locks_behave_as_nomads() {
    let agent = Agent::start_dev();

    // The CLI: put (check-and-set unless -force), get, list, purge.
    let created = agent.cli_ok(&[
        "var",
        "put",
        "-out",
        "none",
        "app/db",
        "user=app",
        "port=5432",
    ]);
    assert!(
        created.starts_with("Created variable \"app/db\" with modify index "),
        "{created}"
    );
    let again = agent.cli(&["var", "put", "-out", "none", "app/db", "user=other"]);
    assert!(!again.status.success());
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(stderr.contains("Check-and-Set conflict"), "{stderr}");
    assert!(stderr.contains("Your provided check-index (0)"), "{stderr}");
    agent.cli_ok(&[
        "var",
        "put",
        "-force",
        "-out",
        "none",
        "app/db",
        "user=forced",
    ]);
    assert_eq!(
        agent.cli_ok(&["var", "get", "-item", "user", "app/db"]),
        "forced"
    );
    let got = json_of(&agent.cli_ok(&["var", "get", "app/db"]));
    assert_eq!(got["Items"], json!({"user": "forced"}));
    assert_eq!(
        agent
            .cli_ok(&["var", "list", "-out", "terse", "app"])
            .trim(),
        "app/db"
    );
    // `var get -out hcl` writes a specification `var put @file.hcl` reads back; a path given
    // beside it makes a copy (indexes reset, so the copy is created with check index 0).
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("db.hcl");
    std::fs::write(
        &spec,
        agent.cli_ok(&["var", "get", "-out", "hcl", "app/db"]),
    )
    .unwrap();
    let copied = agent.cli_ok(&[
        "var",
        "put",
        "-out",
        "none",
        "app/copy",
        &format!("@{}", spec.display()),
        "extra=1",
    ]);
    assert!(
        copied.starts_with("Created variable \"app/copy\""),
        "{copied}"
    );
    let copy = json_of(&agent.cli_ok(&["var", "get", "app/copy"]));
    assert_eq!(copy["Items"], json!({"user": "forced", "extra": "1"}));
    let unknown = agent.cli(&[
        "var",
        "put",
        &format!("@{}", dir.path().join("db.txt").display()),
    ]);
    assert!(
        String::from_utf8_lossy(&unknown.stderr).contains("Unable to determine format of"),
        "{unknown:?}"
    );
    // Paging, filters and Go templates, as Nomad's `var list` and `var get`.
    let first = agent.cli(&["var", "list", "-out", "terse", "-per-page", "1", "app"]);
    assert_eq!(String::from_utf8_lossy(&first.stdout).trim(), "app/copy");
    let token = String::from_utf8_lossy(&first.stderr).trim().to_owned();
    assert_eq!(token, "Next page token: default.app/db");
    let second = agent.cli(&[
        "var",
        "list",
        "-out",
        "terse",
        "-per-page",
        "1",
        "-page-token",
        "default.app/db",
        "app",
    ]);
    assert_eq!(String::from_utf8_lossy(&second.stdout).trim(), "app/db");
    assert!(!String::from_utf8_lossy(&second.stderr).contains("Next page token"));
    let paged = json_of(&agent.cli_ok(&["var", "list", "-out", "json", "-per-page", "1", "app"]));
    assert_eq!(paged["Data"][0]["Path"], "app/copy");
    assert_eq!(paged["QueryMeta"]["NextToken"], "default.app/db");
    let filtered = agent.cli(&[
        "var",
        "list",
        "-out",
        "terse",
        "-filter",
        "Path == \"app/db\"",
    ]);
    assert_eq!(String::from_utf8_lossy(&filtered.stdout).trim(), "app/db");
    assert!(
        String::from_utf8_lossy(&filtered.stderr).contains("Filter queries require a full scan")
    );
    assert_eq!(
        agent
            .cli_ok(&[
                "var",
                "get",
                "-out",
                "go-template",
                "-template",
                "{{.Path}}: {{.Items.extra}}",
                "app/copy"
            ])
            .trim(),
        "app/copy: 1"
    );
    let no_template = agent.cli(&["var", "get", "-out", "go-template", "app/copy"]);
    assert!(String::from_utf8_lossy(&no_template.stderr).contains("A template must be supplied"));
    agent.cli_ok(&["var", "purge", "app/copy"]);
    let missing = agent.cli(&["var", "get", "nope"]);
    assert!(!missing.status.success());
    assert_eq!(
        String::from_utf8_lossy(&missing.stderr).trim(),
        "Variable not found"
    );
    assert_eq!(
        agent.cli_ok(&["var", "purge", "app/db"]).trim(),
        "Successfully purged variable \"app/db\"!"
    );

    // Acquire: the lock's ID is the server's, durations as Go writes them.
    let (status, body) = put(
        &agent,
        "/v1/var/app/leader?lock-acquire",
        &json!({"Items": {"holder": "a"}, "Lock": {"TTL": "10s", "LockDelay": "1s"}}),
    );
    assert_eq!(status, 200, "{body}");
    let held = json_of(&body);
    let lock_id = held["Lock"]["ID"].as_str().unwrap().to_owned();
    assert_eq!(held["Lock"]["TTL"], "10s");
    assert_eq!(held["Lock"]["LockDelay"], "1s");
    assert_eq!(held["Items"], json!({"holder": "a"}));

    // A second acquire, a write or a delete without the lock: 409 with namespace and path.
    let (status, body) = put(&agent, "/v1/var/app/leader?lock-acquire", &json!({}));
    assert_eq!(status, 409, "{body}");
    assert_eq!(json_of(&body)["Path"], "app/leader");
    let (status, body) = put(
        &agent,
        "/v1/var/app/leader",
        &json!({"Items": {"holder": "b"}}),
    );
    assert_eq!(status, 409, "{body}");
    assert!(json_of(&body).get("Items").is_none());
    let (status, _) = http("DELETE", &agent.url("/v1/var/app/leader"), None);
    assert_eq!(status, 409);
    let (status, body) = put(
        &agent,
        "/v1/var/app/leader",
        &json!({"Items": {"holder": "a2"}, "Lock": {"ID": lock_id}}),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(json_of(&body)["Lock"]["ID"], lock_id.as_str());
    let (status, body) = put(
        &agent,
        "/v1/var/app/other",
        &json!({"Items": {"a": "b"}, "Lock": {"TTL": "10s"}}),
    );
    assert_eq!(
        (status, body.as_str()),
        (400, "variable should not contain lock definition")
    );

    // Renew and release only by the holder.
    let (status, body) = put(
        &agent,
        "/v1/var/app/leader?lock-renew",
        &json!({"Lock": {"ID": lock_id}}),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(json_of(&body)["Lock"]["ID"], lock_id.as_str());
    let (status, body) = put(
        &agent,
        "/v1/var/app/leader?lock-renew",
        &json!({"Lock": {"ID": "someone-else"}}),
    );
    assert_eq!(
        (status, body.as_str()),
        (409, "attempting to modify locked variable")
    );
    let (status, body) = put(
        &agent,
        "/v1/var/app/leader?lock-release",
        &json!({"Lock": {"ID": "someone-else"}}),
    );
    assert_eq!(status, 409, "{body}");
    assert_eq!(
        json_of(&body)["Lock"],
        json!({"ID": "", "TTL": "", "LockDelay": ""})
    );
    let (status, body) = put(
        &agent,
        "/v1/var/app/leader?lock-release",
        &json!({"Lock": {"ID": lock_id}}),
    );
    assert_eq!(status, 200, "{body}");
    assert!(json_of(&body).get("Lock").is_none());
    let (status, body) = put(
        &agent,
        "/v1/var/app/leader?lock-renew",
        &json!({"Lock": {"ID": lock_id}}),
    );
    assert_eq!(
        (status, body.as_str()),
        (409, "variable doesn't hold a lock")
    );
    let (status, body) = put(
        &agent,
        "/v1/var/nope?lock-release",
        &json!({"Lock": {"ID": lock_id}}),
    );
    assert_eq!((status, body.as_str()), (404, "variable doesn't exist"));
    // The items survived the release.
    assert_eq!(
        agent.get_json("/v1/var/app/leader")["Items"],
        json!({"holder": "a2"})
    );

    // Not renewed, a lock is lost after twice its TTL and released after its delay.
    let taken = Instant::now();
    let (status, body) = put(
        &agent,
        "/v1/var/app/leader?lock-acquire",
        &json!({"Lock": {"TTL": "10s", "LockDelay": "1s"}}),
    );
    assert_eq!(status, 200, "{body}");
    wait_for(
        "the expired lock's release",
        Duration::from_secs(60),
        || {
            agent
                .get_json("/v1/var/app/leader")
                .get("Lock")
                .is_none()
                .then_some(())
        },
    );
    assert!(
        taken.elapsed() >= Duration::from_secs(20),
        "released after {:?}",
        taken.elapsed()
    );

    // `drover var lock` runs the command while it holds the lock, then gives it back.
    let marker = tempfile::tempdir().unwrap();
    let seen = marker.path().join("seen");
    let script = format!(
        "{} var get app/leader > {}",
        support::drover_bin().display(),
        seen.display()
    );
    let ran = agent.cli(&["var", "lock", "-ttl", "10s", "app/leader", &script]);
    assert!(ran.status.success(), "{ran:?}");
    let during = json_of(&std::fs::read_to_string(&seen).unwrap());
    assert!(during["Lock"]["ID"].is_string(), "{during}");
    assert!(agent.get_json("/v1/var/app/leader").get("Lock").is_none());
    let failed = agent.cli(&["var", "lock", "app/leader", "exit 3"]);
    assert!(!failed.status.success());
    assert!(
        String::from_utf8_lossy(&failed.stderr).contains("exit status 3"),
        "{failed:?}"
    );

    // Every write was a `Variable` event (those of `app/db` in order).
    let address = agent.address.trim_start_matches("http://").to_owned();
    let mut stream = std::net::TcpStream::connect(&address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "GET /v1/event/stream?topic=Variable&index=1 HTTP/1.1\r\nHost: {address}\r\n\r\n"
    )
    .unwrap();
    let mut reader = BufReader::new(stream);
    let mut kinds = Vec::new();
    let mut line = String::new();
    while kinds.len() < 3 && reader.read_line(&mut line).unwrap_or(0) > 0 {
        if let Ok(batch) = serde_json::from_str::<Value>(line.trim())
            && let Some(events) = batch["Events"].as_array()
        {
            for event in events {
                assert_eq!(event["Topic"], "Variable");
                assert_eq!(event["Type"], "VariableUpdated");
                if event["Key"] != "app/db" {
                    continue;
                }
                kinds.push((
                    event["Key"].as_str().unwrap().to_owned(),
                    event["Payload"]["Deleted"].as_bool().unwrap(),
                ));
            }
        }
        line.clear();
    }
    assert_eq!(
        kinds[..3],
        [
            ("app/db".to_owned(), false),
            ("app/db".to_owned(), false),
            ("app/db".to_owned(), true)
        ]
    );
}
