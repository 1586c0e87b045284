//! End to end through the real agent: the keyring (a root key made at first start, listed,
//! rotated, removed; its KEK file 0600; the JWKS) and Nomad Variables (put/get/list/delete,
//! `cas` conflicts answered 409 with the current variable, items never in the clear in the
//! state file, readable again after a restart, a credential that does not resolve refused).

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod support;

use std::os::unix::fs::PermissionsExt;

use serde_json::Value;
use support::{Agent, http};

const SECRET: &str = "correct-horse-battery-staple-4f1d";

fn json(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|error| panic!("{error}: {body}"))
}

fn request_with_token(method: &str, url: &str, token: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_at(rest.find('/').unwrap());
    let mut stream = std::net::TcpStream::connect(host).unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nX-Nomad-Token: {token}\r\nContent-Length: 0\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).unwrap();
    let status = raw.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, raw.split_once("\r\n\r\n").unwrap().1.to_owned())
}

#[test]
fn the_keyring_seals_variables_and_rotates_and_cas_conflicts_answer_the_current_variable() {
    let temp = tempfile::tempdir().unwrap();
    let data_dir = temp.path().join("data");
    let mut agent = Agent::start_with(&data_dir, &[]);

    // The first start made a KEK only its owner reads, and one active root key.
    let kek = data_dir.join("server").join("keyring.kek");
    assert_eq!(
        std::fs::metadata(&kek).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let keys = agent.get_json("/v1/operator/keyring/keys");
    let keys = keys.as_array().unwrap();
    assert_eq!(keys.len(), 1, "{keys:?}");
    assert_eq!(keys[0]["State"], "active");
    assert_eq!(keys[0]["Algorithm"], "aes256-gcm");
    let first_key = keys[0]["KeyID"].as_str().unwrap().to_owned();
    let jwks = agent.get_json("/.well-known/jwks.json");
    assert_eq!(jwks["keys"][0]["kid"], first_key.as_str());
    assert_eq!(jwks["keys"][0]["kty"], "OKP");
    assert_eq!(jwks["keys"][0]["crv"], "Ed25519");
    assert_eq!(jwks["keys"][0]["alg"], "EdDSA");
    let (status, body) = http("GET", &agent.url("/.well-known/openid-configuration"), None);
    assert_eq!(
        (status, body.as_str()),
        (404, "OIDC Discovery endpoint disabled")
    );

    // Put, read, list.
    let body = format!(r#"{{"Items": {{"password": "{SECRET}", "user": "app"}}}}"#);
    let (status, put) = http("PUT", &agent.url("/v1/var/app/db"), Some(&body));
    assert_eq!(status, 200, "{put}");
    let put = json(&put);
    assert_eq!(put["Path"], "app/db");
    assert_eq!(put["Namespace"], "default");
    assert_eq!(put["Items"]["password"], SECRET);
    let modify_index = put["ModifyIndex"].as_u64().unwrap();
    assert!(modify_index > 0);
    let read = agent.get_json("/v1/var/app/db");
    assert_eq!(read["Items"]["user"], "app");
    assert_eq!(read["CreateIndex"], put["CreateIndex"]);
    let listed = agent.get_json("/v1/vars?prefix=app/");
    assert_eq!(listed.as_array().unwrap().len(), 1);
    assert_eq!(listed[0]["Path"], "app/db");
    assert!(listed[0].get("Items").is_none(), "{listed}");
    assert_eq!(
        http("GET", &agent.url("/v1/var/app/none"), None),
        (404, "variable not found".to_owned())
    );

    // A stale cas is 409 with the current variable; a current one applies.
    let (status, conflict) = http(
        "PUT",
        &agent.url(&format!("/v1/var/app/db?cas={}", modify_index - 1)),
        Some(&body),
    );
    assert_eq!(status, 409, "{conflict}");
    let conflict = json(&conflict);
    assert_eq!(conflict["ModifyIndex"].as_u64(), Some(modify_index));
    assert_eq!(conflict["Items"]["password"], SECRET);
    let (status, _) = http(
        "PUT",
        &agent.url(&format!("/v1/var/app/db?cas={modify_index}")),
        Some(&body),
    );
    assert_eq!(status, 200);
    assert_eq!(
        http("PUT", &agent.url("/v1/var/nomad"), Some(&body)).0,
        400,
        "the reserved path is refused"
    );
    // Locks run (e2e_variable_locks covers them); a sealed variable takes one.
    let (status, locked) = http("PUT", &agent.url("/v1/var/app/x?lock-acquire"), Some(&body));
    assert_eq!(status, 200, "{locked}");
    assert!(
        json(&locked)["Lock"]["ID"]
            .as_str()
            .is_some_and(|id| !id.is_empty())
    );

    // A credential that resolves to nothing is refused.
    let (status, refused) = request_with_token("GET", &agent.url("/v1/var/app/db"), "not.a.jwt");
    assert_eq!((status, refused.as_str()), (403, "Permission denied"));

    // Rotation: a new active key, both in the JWKS; a full rotation re-seals the variable, so
    // the old key is no longer in use and can go; the active key cannot.
    let (status, rotated) = http("PUT", &agent.url("/v1/operator/keyring/rotate?full"), None);
    assert_eq!(status, 200, "{rotated}");
    let rotated = json(&rotated);
    let second_key = rotated["Key"]["KeyID"].as_str().unwrap().to_owned();
    assert_ne!(second_key, first_key);
    assert_eq!(rotated["Key"]["State"], "active");
    assert_eq!(
        agent.get_json("/.well-known/jwks.json")["keys"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let (status, _) = http(
        "DELETE",
        &agent.url(&format!("/v1/operator/keyring/key/{second_key}")),
        None,
    );
    assert_eq!(status, 400);
    let (status, deleted) = http(
        "DELETE",
        &agent.url(&format!("/v1/operator/keyring/key/{first_key}")),
        None,
    );
    assert_eq!(status, 200, "{deleted}");
    assert_eq!(
        agent.get_json("/v1/var/app/db")["Items"]["password"],
        SECRET
    );

    // After a restart the variable opens again; the state file never held it in the clear.
    agent.terminate();
    let state_file = std::fs::read(data_dir.join("server").join("state.redb")).unwrap();
    assert!(
        !state_file
            .windows(SECRET.len())
            .any(|window| window == SECRET.as_bytes()),
        "the state file holds the plaintext"
    );
    let agent = Agent::start_with(&data_dir, &[]);
    assert_eq!(
        agent.get_json("/v1/var/app/db")["Items"]["password"],
        SECRET
    );
    let (status, _) = http("DELETE", &agent.url("/v1/var/app/db"), None);
    assert_eq!(status, 204);
    assert_eq!(http("GET", &agent.url("/v1/var/app/db"), None).0, 404);
}

fn claims_of(jwt: &str) -> Value {
    use base64::Engine as _;
    let payload = jwt.split('.').nth(1).unwrap();
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

fn kid_of(jwt: &str) -> String {
    use base64::Engine as _;
    let header = jwt.split('.').next().unwrap();
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(header)
        .unwrap();
    let header: Value = serde_json::from_slice(&bytes).unwrap();
    header["kid"].as_str().unwrap().to_owned()
}

fn running_alloc_id(agent: &Agent, job_id: &str) -> String {
    support::wait_for(
        &format!("a running alloc of {job_id}"),
        std::time::Duration::from_secs(60),
        || {
            let allocs = agent.get_json(&format!("/v1/job/{job_id}/allocations"));
            let alloc = allocs.as_array()?.first()?.clone();
            assert_ne!(alloc["ClientStatus"], "failed", "{alloc}");
            (alloc["ClientStatus"] == "running").then(|| alloc["ID"].as_str().unwrap().to_owned())
        },
    )
}

/// One request over a unix socket, as a task makes it; answers (status, body).
fn over_socket(socket: &std::path::Path, path: &str, token: Option<&str>) -> (u16, String) {
    use std::io::{Read, Write};
    let mut stream = std::os::unix::net::UnixStream::connect(socket).unwrap();
    let token_header = token
        .map(|token| format!("X-Nomad-Token: {token}\r\n"))
        .unwrap_or_default();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{token_header}\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).unwrap();
    let status = raw.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, raw.split_once("\r\n\r\n").unwrap().1.to_owned())
}

const READER_JOB: &str = r#"
job "JOB" {
  group "g" {
    task "reader" {
      driver = "raw_exec"
      identity {
        env  = true
        file = true
      }
      identity {
        name = "extra"
        aud  = ["example.com"]
        file = true
        env  = true
        ttl  = "1h"
      }
      config {
        command = "/bin/sh"
        args = ["-c", <<EOT
sock="$NOMAD_SECRETS_DIR/api.sock"
out="$NOMAD_TASK_DIR"
curl -s --unix-socket "$sock" -H "X-Nomad-Token: $NOMAD_TOKEN" http://localhost/v1/var/nomad/jobs/JOB > "$out/own.tmp" && mv "$out/own.tmp" "$out/own"
curl -s -o /dev/null -w '%%{http_code}' --unix-socket "$sock" -H "X-Nomad-Token: $NOMAD_TOKEN" http://localhost/v1/var/nomad/jobs/other > "$out/other.tmp" && mv "$out/other.tmp" "$out/other"
curl -s -o /dev/null -w '%%{http_code}' --unix-socket "$sock" http://localhost/v1/jobs > "$out/none.tmp" && mv "$out/none.tmp" "$out/none"
echo "$NOMAD_UNIX_ADDR" > "$out/unix_addr.tmp" && mv "$out/unix_addr.tmp" "$out/unix_addr"
test -n "$NOMAD_TOKEN_extra" && echo yes > "$out/extra_env.tmp" && mv "$out/extra_env.tmp" "$out/extra_env"
exec sleep 3600
EOT
        ]
      }
    }
  }
}
"#;

#[test]
fn a_task_reads_its_variables_through_the_task_api_with_its_identity() {
    let agent = Agent::start_dev();
    for (path, value) in [
        ("nomad/jobs/idreader", "own-secret-5e1"),
        ("nomad/jobs/other", "other-secret-77a"),
    ] {
        let body = format!(r#"{{"Items": {{"value": "{value}"}}}}"#);
        let (status, answer) = http("PUT", &agent.url(&format!("/v1/var/{path}")), Some(&body));
        assert_eq!(status, 200, "{answer}");
    }
    let jobspec = READER_JOB.replace("JOB", "idreader");
    let (_dir, path) = support::write_jobspec("idreader.hcl", &jobspec);
    agent.cli_ok(&["job", "run", "-detach", &path.to_string_lossy()]);
    let alloc_id = running_alloc_id(&agent, "idreader");
    let task_dir = agent.data_dir.join("alloc").join(&alloc_id).join("reader");
    let read = |name: &str| {
        support::wait_for(name, std::time::Duration::from_secs(60), || {
            std::fs::read_to_string(task_dir.join("local").join(name)).ok()
        })
    };

    // Inside the task: its own job's variable through the socket with its NOMAD_TOKEN; not
    // another job's, and nothing without a token.
    let own = json(&read("own"));
    assert_eq!(own["Path"], "nomad/jobs/idreader");
    assert_eq!(own["Items"]["value"], "own-secret-5e1");
    assert_eq!(read("other"), "403");
    assert_eq!(read("none"), "401");
    let socket = task_dir.join("secrets").join("api.sock");
    assert_eq!(
        read("unix_addr").trim(),
        format!("unix://{}", socket.display())
    );
    assert_eq!(read("extra_env").trim(), "yes");

    // The files: the default identity and the named one, each with Nomad's claims.
    let token = std::fs::read_to_string(task_dir.join("secrets").join("nomad_token")).unwrap();
    let claims = claims_of(&token);
    assert_eq!(claims["nomad_namespace"], "default");
    assert_eq!(claims["nomad_job_id"], "idreader");
    assert_eq!(claims["nomad_allocation_id"], alloc_id.as_str());
    assert_eq!(claims["nomad_task"], "reader");
    assert_eq!(claims["aud"], serde_json::json!(["nomadproject.io"]));
    assert_eq!(claims["sub"], "global:default:idreader:g:reader:default");
    assert!(claims.get("exp").is_none(), "{claims}");
    let extra = std::fs::read_to_string(task_dir.join("secrets").join("nomad_extra.jwt")).unwrap();
    let extra_claims = claims_of(&extra);
    assert_eq!(extra_claims["aud"], serde_json::json!(["example.com"]));
    assert_eq!(
        extra_claims["exp"].as_i64().unwrap() - extra_claims["iat"].as_i64().unwrap(),
        3600
    );
    let first_key = kid_of(&token);
    assert_eq!(
        agent.get_json("/v1/operator/keyring/keys")[0]["KeyID"],
        first_key.as_str()
    );

    // From outside too: the socket refuses a missing (401) or a bad (403) token, as Nomad's
    // task API, and serves a good one.
    assert_eq!(
        over_socket(&socket, "/v1/jobs", None),
        (401, "Unauthorized".to_owned())
    );
    assert_eq!(
        over_socket(&socket, "/v1/jobs", Some("not.a.jwt")),
        (403, "Forbidden".to_owned())
    );
    let (status, jobs) = over_socket(&socket, "/v1/jobs", Some(&token));
    assert_eq!(status, 200, "{jobs}");
    assert_eq!(json(&jobs)[0]["ID"], "idreader");

    // A rotation: the old identity still verifies, a new task's identity uses the new key.
    let (status, rotated) = http("PUT", &agent.url("/v1/operator/keyring/rotate"), None);
    assert_eq!(status, 200, "{rotated}");
    let second_key = json(&rotated)["Key"]["KeyID"].as_str().unwrap().to_owned();
    assert_eq!(
        over_socket(&socket, "/v1/var/nomad/jobs/idreader", Some(&token)).0,
        200
    );
    let second_spec = READER_JOB.replace("JOB", "idsecond");
    let (_dir2, path2) = support::write_jobspec("idsecond.hcl", &second_spec);
    agent.cli_ok(&["job", "run", "-detach", &path2.to_string_lossy()]);
    let second_alloc = running_alloc_id(&agent, "idsecond");
    let second_token = support::wait_for(
        "the second task's token",
        std::time::Duration::from_secs(60),
        || {
            std::fs::read_to_string(
                agent
                    .data_dir
                    .join("alloc")
                    .join(&second_alloc)
                    .join("reader")
                    .join("secrets")
                    .join("nomad_token"),
            )
            .ok()
        },
    );
    assert_eq!(kid_of(&second_token), second_key);

    // Once the allocation stops, its token is refused everywhere.
    agent.cli_ok(&["job", "stop", "idreader"]);
    support::wait_for(
        "the alloc to stop",
        std::time::Duration::from_secs(60),
        || {
            let alloc = agent.get_json(&format!("/v1/allocation/{alloc_id}"));
            (alloc["ClientStatus"] == "complete").then_some(())
        },
    );
    let (status, refused) =
        request_with_token("GET", &agent.url("/v1/var/nomad/jobs/idreader"), &token);
    assert_eq!((status, refused.as_str()), (403, "Permission denied"));
    assert!(!socket.exists(), "the stopped task's socket is removed");
    agent.cli_ok(&["job", "stop", "-purge", "idsecond"]);
}

#[test]
fn a_template_renders_a_variable_and_renders_again_when_it_changes() {
    let agent = Agent::start_dev();
    let put = |value: &str| {
        let body = format!(r#"{{"Items": {{"greeting": "{value}"}}}}"#);
        let (status, answer) = http("PUT", &agent.url("/v1/var/nomad/jobs/tmplvar"), Some(&body));
        assert_eq!(status, 200, "{answer}");
    };
    put("hello-1");
    let jobspec = r#"
job "tmplvar" {
  group "g" {
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/sleep"
        args    = ["3600"]
      }
      template {
        data        = <<EOT
{{ with nomadVar "nomad/jobs/tmplvar" }}greeting={{ .greeting }}{{ end }}
exists={{ nomadVarExists "nomad/jobs/tmplvar/g" }}
{{ range nomadVarList "nomad/jobs" }}listed={{ .Path }}
{{ end }}
EOT
        destination = "local/out.txt"
        change_mode = "noop"
      }
    }
  }
}
"#;
    let (_dir, path) = support::write_jobspec("tmplvar.hcl", jobspec);
    agent.cli_ok(&["job", "run", "-detach", &path.to_string_lossy()]);
    let alloc_id = running_alloc_id(&agent, "tmplvar");
    let out = agent
        .data_dir
        .join("alloc")
        .join(&alloc_id)
        .join("t/local/out.txt");
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("greeting=hello-1"), "{text}");
    assert!(text.contains("exists=false"), "{text}");
    assert!(text.contains("listed=nomad/jobs/tmplvar"), "{text}");
    put("hello-2");
    support::wait_for(
        "the template to render the new value",
        std::time::Duration::from_secs(30),
        || {
            std::fs::read_to_string(&out)
                .ok()
                .filter(|text| text.contains("greeting=hello-2"))
        },
    );
}

#[test]
fn an_oidc_issuer_is_named_by_the_discovery_document_and_by_every_identity() {
    let temp = tempfile::tempdir().unwrap();
    let config = support::agent_config(
        temp.path(),
        "issuer.hcl",
        "server {\n  oidc_issuer = \"https://nomad.example.com\"\n}\n",
    );
    let agent = Agent::start_with(&temp.path().join("data"), &[&format!("-config={config}")]);
    let discovery = agent.get_json("/.well-known/openid-configuration");
    assert_eq!(discovery["issuer"], "https://nomad.example.com");
    let jobspec = r#"
job "issued" {
  group "g" {
    task "t" {
      driver = "raw_exec"
      identity {
        file = true
      }
      config {
        command = "/bin/sleep"
        args    = ["3600"]
      }
    }
  }
}
"#;
    let (_dir, path) = support::write_jobspec("issued.hcl", jobspec);
    agent.cli_ok(&["job", "run", "-detach", &path.to_string_lossy()]);
    let alloc_id = running_alloc_id(&agent, "issued");
    let token = support::wait_for("the token file", std::time::Duration::from_secs(60), || {
        std::fs::read_to_string(
            agent
                .data_dir
                .join("alloc")
                .join(&alloc_id)
                .join("t/secrets/nomad_token"),
        )
        .ok()
    });
    assert_eq!(claims_of(&token)["iss"], "https://nomad.example.com");
    agent.cli_ok(&["job", "stop", "-purge", "issued"]);
}
