//! End to end through the real agent with `acl { enabled = true }`: one-time tokens (Nomad's
//! `ACL.UpsertOneTimeToken` / `ExchangeOneTimeToken`). Any ACL token asks for one for itself
//! (no token, or an unknown one, is 403), it is exchanged once for that token (a second
//! exchange is 403), a new one replaces the caller's previous one, one whose token was deleted
//! exchanges for nothing, and with ACLs off both routes answer `ACL support disabled`.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod support;

use serde_json::{Value, json};
use support::Agent;

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

fn exchange(agent: &Agent, secret: &str) -> (u16, String) {
    call(
        "POST",
        &agent.url("/v1/acl/token/onetime/exchange"),
        None,
        Some(&json!({ "OneTimeSecretID": secret }).to_string()),
    )
}

#[test]
fn one_time_tokens_are_asked_for_by_a_token_and_exchanged_once_for_it() {
    let temp = tempfile::tempdir().unwrap();
    let data_dir = temp.path().join("data");
    let config = temp.path().join("acl.hcl");
    std::fs::write(&config, "acl {\n  enabled = true\n}\n").unwrap();
    let agent = Agent::start_with(&data_dir, &[&format!("-config={}", config.display())]);
    let url = |path: &str| agent.url(path);

    let (status, body) = call("POST", &url("/v1/acl/bootstrap"), None, None);
    assert_eq!(status, 200, "{body}");
    let management = json_of(&body)["SecretID"].as_str().unwrap().to_owned();

    // A client token with a read-only policy may ask for one too: no capability is needed.
    let policy =
        json!({"Name": "readonly", "Rules": "namespace \"default\" { policy = \"read\" }"});
    let (status, body) = call(
        "POST",
        &url("/v1/acl/policy/readonly"),
        Some(&management),
        Some(&policy.to_string()),
    );
    assert_eq!(status, 200, "{body}");
    let (status, body) = call(
        "POST",
        &url("/v1/acl/token"),
        Some(&management),
        Some(&json!({"Name": "reader", "Type": "client", "Policies": ["readonly"]}).to_string()),
    );
    assert_eq!(status, 200, "{body}");
    let reader = json_of(&body);
    let reader_secret = reader["SecretID"].as_str().unwrap().to_owned();
    let reader_accessor = reader["AccessorID"].as_str().unwrap().to_owned();

    // Without a token, or with one that does not exist: refused.
    let onetime = url("/v1/acl/token/onetime");
    assert_eq!(
        call("POST", &onetime, None, None),
        (403, "Permission denied".to_owned())
    );
    assert_eq!(
        call(
            "POST",
            &onetime,
            Some("00000000-0000-0000-0000-000000000000"),
            None
        ),
        (403, "Permission denied".to_owned())
    );
    assert_eq!(call("GET", &onetime, Some(&reader_secret), None).0, 405);

    let (status, body) = call("PUT", &onetime, Some(&reader_secret), None);
    assert_eq!(status, 200, "{body}");
    let answer = json_of(&body);
    let first = &answer["OneTimeToken"];
    assert_eq!(first["AccessorID"], reader_accessor.as_str());
    assert_eq!(first["CreateIndex"], answer["Index"]);
    assert_eq!(first["ModifyIndex"], answer["Index"]);
    let expires: drover_structs::Timestamp =
        serde_json::from_value(first["ExpiresAt"].clone()).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let left = expires.unix_nanos().unwrap() / 1_000_000_000 - now;
    assert!((590..=600).contains(&left), "expires in {left}s");
    let first_secret = first["OneTimeSecretID"].as_str().unwrap().to_owned();

    // A second request replaces the first: the first no longer exchanges.
    let (status, body) = call("POST", &onetime, Some(&reader_secret), None);
    assert_eq!(status, 200, "{body}");
    let second_secret = json_of(&body)["OneTimeToken"]["OneTimeSecretID"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_ne!(second_secret, first_secret);
    assert_eq!(
        exchange(&agent, &first_secret),
        (403, "Permission denied".to_owned())
    );

    // The exchange needs no token and answers the token behind the secret, once.
    let (status, body) = exchange(&agent, &second_secret);
    assert_eq!(status, 200, "{body}");
    let exchanged = json_of(&body);
    assert_eq!(exchanged["Token"]["AccessorID"], reader_accessor.as_str());
    assert_eq!(exchanged["Token"]["SecretID"], reader_secret.as_str());
    assert_eq!(exchanged["Token"]["Policies"], json!(["readonly"]));
    assert!(exchanged["Index"].as_u64().unwrap() > 0);
    assert_eq!(
        exchange(&agent, &second_secret),
        (403, "Permission denied".to_owned())
    );
    assert_eq!(exchange(&agent, "").0, 400);
    assert_eq!(
        call(
            "POST",
            &url("/v1/acl/token/onetime/exchange"),
            None,
            Some("{not json")
        )
        .0,
        400
    );

    // One whose token is deleted before the exchange gives nothing.
    let (status, body) = call("POST", &onetime, Some(&reader_secret), None);
    assert_eq!(status, 200, "{body}");
    let orphan = json_of(&body)["OneTimeToken"]["OneTimeSecretID"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, body) = call(
        "DELETE",
        &url(&format!("/v1/acl/token/{reader_accessor}")),
        Some(&management),
        None,
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        exchange(&agent, &orphan),
        (403, "Permission denied".to_owned())
    );
}

#[test]
fn without_acls_one_time_tokens_are_refused_as_nomad_refuses_them() {
    let agent = Agent::start_dev();
    for path in ["/v1/acl/token/onetime", "/v1/acl/token/onetime/exchange"] {
        assert_eq!(
            call("POST", &agent.url(path), None, Some("{}")),
            (400, "ACL support disabled".to_owned()),
            "{path}"
        );
    }
}
