//! End to end: `drover operator snapshot save | inspect | restore` between real agents. A
//! snapshot of one server (embedded state) restores into a fresh one, and a snapshot of a
//! cluster on a real 3-member etcd restores into a fresh cluster (sent to a follower, which
//! passes it to the leader; both servers then answer from it) and into an embedded server:
//! jobs, allocations, indexes and sealed variables (readable: the keyring comes along) survive.
//! Damaged and truncated files are refused and change nothing; the endpoints want a
//! management token when ACLs are on. The cluster's peers: `operator raft list-peers` (every
//! server a voter), `operator etcd members`, and the refused peer removal.
//!
//! The etcd tests need `etcd` (Debian's etcd-server); skipped without it, failed under
//! `CI=true`.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

#[path = "../../etcd/tests/common/mod.rs"]
mod etcd_cluster;
mod support;

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use support::{Agent, agent_config, http, wait_for, write_jobspec};

const LIMIT: Duration = Duration::from_secs(90);

const JOB: &str = r#"job "web" {
  datacenters = ["dc1"]
  group "g" {
    count = 2
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/sleep"
        args    = ["600"]
      }
      resources {
        cpu    = 10
        memory = 16
      }
    }
  }
}
"#;

/// Runs the job and a variable on `agent`; answers the job's allocation IDs once running.
fn populate(agent: &Agent) -> Vec<String> {
    let (_dir, jobspec) = write_jobspec("web.hcl", JOB);
    agent.cli_ok(&["job", "run", "-detach", jobspec.to_str().unwrap()]);
    agent.cli_ok(&["var", "put", "app/config", "user=alice", "password=s3cret"]);
    wait_for("both allocations running", LIMIT, || {
        let allocs = agent.get_json("/v1/job/web/allocations");
        let running: Vec<String> = allocs
            .as_array()?
            .iter()
            .filter(|alloc| alloc["ClientStatus"] == "running")
            .filter_map(|alloc| alloc["ID"].as_str().map(str::to_owned))
            .collect();
        (running.len() == 2).then_some(running)
    })
}

/// A server-only agent on its own data dir (embedded state).
fn embedded_server(dir: &Path) -> Agent {
    let config = agent_config(dir, "server.hcl", "client {\n  enabled = false\n}\n");
    Agent::start_server(&dir.join("data"), &[&format!("-config={config}")])
}

/// A server-only agent on `prefix` of the etcd cluster at `endpoints`.
fn etcd_server(dir: &Path, name: &str, endpoints: &[String], prefix: &str, client: bool) -> Agent {
    let endpoints: Vec<String> = endpoints.iter().map(|e| format!("\"{e}\"")).collect();
    let config = agent_config(
        &dir.join(name),
        "server.hcl",
        &format!(
            "name = \"{name}\"\nclient {{\n  enabled = {client}\n}}\netcd {{\n  endpoints = [{}]\n  prefix    = \"{prefix}\"\n}}\n",
            endpoints.join(", ")
        ),
    );
    let data = dir.join(name).join("data");
    if client {
        Agent::start_with(&data, &[&format!("-config={config}")])
    } else {
        Agent::start_server(&data, &[&format!("-config={config}")])
    }
}

/// What must survive a restore: the job (versions and indexes), its allocations, and the
/// variable's items.
fn assert_restored(agent: &Agent, source_job: &Value, allocs: &[String]) {
    let job = agent.get_json("/v1/job/web");
    for field in [
        "Version",
        "ModifyIndex",
        "JobModifyIndex",
        "CreateIndex",
        "SubmitTime",
    ] {
        assert_eq!(job[field], source_job[field], "{field}");
    }
    let restored: Vec<String> = agent
        .get_json("/v1/job/web/allocations")
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|alloc| alloc["ID"].as_str().map(str::to_owned))
        .collect();
    for alloc in allocs {
        assert!(restored.contains(alloc), "{alloc} in {restored:?}");
    }
    // Sealed with the source's root key, opened here.
    let variable: Value =
        serde_json::from_str(&agent.cli_ok(&["var", "get", "-out", "json", "app/config"])).unwrap();
    assert_eq!(variable["Items"]["user"], "alice");
    assert_eq!(variable["Items"]["password"], "s3cret");
}

fn restore_refused(agent: &Agent, file: &Path) -> String {
    let output = agent.cli(&["operator", "snapshot", "restore", file.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("failed to restore from snapshot"),
        "{stderr}"
    );
    stderr
}

/// Copies of `file` cut short and with one byte changed.
fn damaged_copies(dir: &Path, file: &Path) -> (PathBuf, PathBuf) {
    let bytes = std::fs::read(file).unwrap();
    let truncated = dir.join("truncated.snap");
    std::fs::write(&truncated, &bytes[..bytes.len() * 2 / 3]).unwrap();
    let mut flipped_bytes = bytes.clone();
    let middle = bytes.len() / 2;
    flipped_bytes[middle] ^= 0x20;
    let flipped = dir.join("flipped.snap");
    std::fs::write(&flipped, flipped_bytes).unwrap();
    (truncated, flipped)
}

#[test]
fn a_snapshot_of_a_server_restores_into_a_fresh_one_and_damaged_files_change_nothing() {
    let temp = tempfile::tempdir().unwrap();
    let source = Agent::start_dev();
    let allocs = populate(&source);
    let source_job = source.get_json("/v1/job/web");

    let file = temp.path().join("backup.snap");
    let output = source.cli_ok(&["operator", "snapshot", "save", file.to_str().unwrap()]);
    assert_eq!(
        output.trim(),
        format!("State file written to {}", file.display())
    );
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "the file carries the keyring's key");
    // Nomad's refusal to overwrite.
    let again = source.cli(&["operator", "snapshot", "save", file.to_str().unwrap()]);
    assert_eq!(again.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("Destination file already exists"),
        "{again:?}"
    );

    let inspected = source.cli_ok(&["operator", "snapshot", "inspect", file.to_str().unwrap()]);
    assert!(inspected.contains("Backend = embedded"), "{inspected}");
    assert!(inspected.contains("Keyring = included"), "{inspected}");
    let job_row = inspected
        .lines()
        .find(|line| line.starts_with("jobs "))
        .unwrap_or_else(|| panic!("no jobs row in:\n{inspected}"));
    assert_eq!(job_row.split_whitespace().nth(1), Some("1"), "{job_row}");
    assert!(inspected.contains("allocs"), "{inspected}");

    let target = embedded_server(&temp.path().join("target"));
    let (truncated, flipped) = damaged_copies(temp.path(), &file);
    let index_before = target.get_json("/v1/jobs");
    let stderr = restore_refused(&target, &truncated);
    assert!(stderr.contains("damaged or truncated"), "{stderr}");
    restore_refused(&target, &flipped);
    let (status, body) = http("GET", &target.url("/v1/job/web"), None);
    assert_eq!(status, 404, "nothing was restored: {body}");
    assert_eq!(target.get_json("/v1/jobs"), index_before);

    let output = target.cli_ok(&["operator", "snapshot", "restore", file.to_str().unwrap()]);
    assert_eq!(output.trim(), "Snapshot Restored");
    assert_restored(&target, &source_job, &allocs);
    // The restored keyring is the source's (its keys, sealed here).
    let keys = |agent: &Agent| -> Vec<Value> {
        agent
            .get_json("/v1/operator/keyring/keys")
            .as_array()
            .unwrap()
            .iter()
            .map(|key| key["KeyID"].clone())
            .collect()
    };
    assert_eq!(keys(&target), keys(&source));
    // The leader's work runs on the restored state: a new job is placed as usual (no client
    // here, so it waits as blocked), and its index comes after the snapshot's.
    let (_dir, jobspec) = write_jobspec("other.hcl", &JOB.replace("\"web\"", "\"other\""));
    target.cli_ok(&["job", "run", "-detach", jobspec.to_str().unwrap()]);
    let other = target.get_json("/v1/job/other");
    assert!(other["ModifyIndex"].as_u64().unwrap() > source_job["ModifyIndex"].as_u64().unwrap());
}

#[test]
fn a_snapshot_of_an_etcd_cluster_restores_into_a_fresh_cluster_and_into_an_embedded_server() {
    if !etcd_cluster::etcd_available() {
        return;
    }
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let etcd = runtime.block_on(etcd_cluster::EtcdCluster::start(3));
    let endpoints = etcd.endpoints();
    let temp = tempfile::tempdir().unwrap();

    let source = etcd_server(temp.path(), "source", &endpoints, "snap-source/", true);
    let allocs = populate(&source);
    let source_job = source.get_json("/v1/job/web");
    let file = temp.path().join("cluster.snap");
    source.cli_ok(&["operator", "snapshot", "save", file.to_str().unwrap()]);
    let inspected = source.cli_ok(&["operator", "snapshot", "inspect", file.to_str().unwrap()]);
    assert!(inspected.contains("Backend = etcd"), "{inspected}");
    // A stale snapshot (any member answers from its copy) holds the same state.
    let stale = temp.path().join("stale.snap");
    source.cli_ok(&[
        "operator",
        "snapshot",
        "save",
        "-stale",
        stale.to_str().unwrap(),
    ]);

    // A fresh cluster of two servers on another prefix.
    let one = etcd_server(temp.path(), "one", &endpoints, "snap-target/", false);
    let two = etcd_server(temp.path(), "two", &endpoints, "snap-target/", false);
    let leader = wait_for("the target servers to agree on a leader", LIMIT, || {
        let named: Vec<String> = [&one, &two]
            .iter()
            .map(|agent| {
                agent
                    .get_json("/v1/status/leader")
                    .as_str()
                    .unwrap_or("")
                    .to_owned()
            })
            .collect();
        (!named[0].is_empty() && named[0] == named[1]).then(|| named[0].clone())
    });
    let (leading, following) = if one.address.ends_with(&leader) {
        (&one, &two)
    } else {
        (&two, &one)
    };

    // The peers: every server a voter (each takes part in the election on etcd).
    let peers = following.cli_ok(&["operator", "raft", "list-peers"]);
    let lines: Vec<&str> = peers.lines().collect();
    assert_eq!(lines.len(), 3, "{peers}");
    assert!(lines[0].starts_with("Node"), "{peers}");
    let leader_row = lines
        .iter()
        .find(|line| line.contains("leader"))
        .unwrap_or_else(|| panic!("{peers}"));
    assert!(leader_row.contains(&leader), "{peers}");
    assert!(
        lines[1..].iter().all(|line| line.contains("true   etcd")),
        "{peers}"
    );
    let members = following.cli_ok(&["operator", "etcd", "members"]);
    let rows: Vec<&str> = members.lines().skip(1).collect();
    assert_eq!(rows.len(), 3, "{members}");
    assert_eq!(
        rows.iter().filter(|row| row.contains(" leader ")).count(),
        1,
        "{members}"
    );
    assert!(rows.iter().all(|row| row.contains("true")), "{members}");
    let (status, body) = http(
        "DELETE",
        &following.url("/v1/operator/raft/peer?id=one"),
        None,
    );
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("not raft peers"), "{body}");
    // A peer that is not a server: Nomad's error text, as a 404.
    let (status, body) = http(
        "DELETE",
        &following.url("/v1/operator/raft/peer?address=nope"),
        None,
    );
    assert_eq!(
        (status, body.as_str()),
        (
            404,
            "address \"nope\" was not found in the Raft configuration"
        )
    );

    // Restored through the follower: it passes the request to the leader, and answers once
    // its own store holds the result.
    let output = following.cli_ok(&["operator", "snapshot", "restore", file.to_str().unwrap()]);
    assert_eq!(output.trim(), "Snapshot Restored");
    assert_restored(following, &source_job, &allocs);
    wait_for("the leader answers from the restored state", LIMIT, || {
        (leading.get_json("/v1/job/web")["ModifyIndex"] == source_job["ModifyIndex"]).then_some(())
    });
    assert_restored(leading, &source_job, &allocs);

    // A damaged copy is refused by the cluster too, and nothing moves.
    let (truncated, _) = damaged_copies(temp.path(), &file);
    let jobs_before = leading.get_json("/v1/jobs");
    restore_refused(following, &truncated);
    assert_eq!(leading.get_json("/v1/jobs"), jobs_before);

    // Across backends: the etcd cluster's snapshot restores into an embedded server.
    let embedded = embedded_server(&temp.path().join("embedded"));
    embedded.cli_ok(&["operator", "snapshot", "restore", stale.to_str().unwrap()]);
    assert_restored(&embedded, &source_job, &allocs);
}

#[test]
fn a_redacted_snapshot_restores_only_where_its_key_is_held() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("source");
    let mut source = embedded_server(&dir);
    source.cli_ok(&["var", "put", "app/config", "user=alice", "password=s3cret"]);
    let file = temp.path().join("redacted.snap");
    let output = source.cli_ok(&[
        "operator",
        "snapshot",
        "save",
        "-redact",
        file.to_str().unwrap(),
    ]);
    assert!(
        output.contains("Redacting key material from snapshot"),
        "{output}"
    );
    let inspected = source.cli_ok(&["operator", "snapshot", "inspect", file.to_str().unwrap()]);
    assert!(inspected.contains("Keyring = redacted"), "{inspected}");

    // Elsewhere the key that sealed the root keys is missing: refused, saying what is needed.
    let elsewhere = embedded_server(&temp.path().join("elsewhere"));
    let stderr = restore_refused(&elsewhere, &file);
    assert!(stderr.contains("saved with -redact"), "{stderr}");
    assert_eq!(
        http("GET", &elsewhere.url("/v1/var/app/config"), None).0,
        404
    );

    // The same server (same key-encryption key) takes it back, after the variable changed.
    source.cli_ok(&["var", "put", "-force", "app/config", "user=bob"]);
    source.cli_ok(&["operator", "snapshot", "restore", file.to_str().unwrap()]);
    let variable: Value =
        serde_json::from_str(&source.cli_ok(&["var", "get", "-out", "json", "app/config"]))
            .unwrap();
    assert_eq!(variable["Items"]["user"], "alice");
    source.terminate();
}

#[test]
fn snapshots_want_a_management_token_when_acls_are_on() {
    let temp = tempfile::tempdir().unwrap();
    let config = agent_config(temp.path(), "acl.hcl", "acl {\n  enabled = true\n}\n");
    let agent = Agent::start_with(&temp.path().join("data"), &[&format!("-config={config}")]);
    let (status, body) = http("POST", &agent.url("/v1/acl/bootstrap"), None);
    assert_eq!(status, 200, "{body}");
    let root: Value = serde_json::from_str(&body).unwrap();
    let secret = root["SecretID"].as_str().unwrap();
    let file = temp.path().join("acl.snap");
    let refused = agent.cli(&["operator", "snapshot", "save", file.to_str().unwrap()]);
    assert_eq!(refused.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("403"), "{stderr}");
    assert!(!file.exists());
    let (status, _) = http("GET", &agent.url("/v1/operator/raft/configuration"), None);
    assert_eq!(status, 403);
    agent.cli_ok(&[
        "operator",
        "snapshot",
        "save",
        "-token",
        secret,
        file.to_str().unwrap(),
    ]);
    let refused = agent.cli(&["operator", "snapshot", "restore", file.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&refused.stderr).contains("403"));
    agent.cli_ok(&[
        "operator",
        "snapshot",
        "restore",
        "-token",
        secret,
        file.to_str().unwrap(),
    ]);
}
