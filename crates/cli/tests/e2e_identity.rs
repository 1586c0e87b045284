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
    assert_eq!(
        http("PUT", &agent.url("/v1/var/app/x?lock-acquire"), Some(&body)).0,
        400
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
    assert_eq!(status, 500);
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
