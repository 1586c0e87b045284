//! End to end: single sign-on against a real OpenID provider (the `oidc-provider` package run
//! by node from `tests/fixtures/oidc`, installed by `scripts/test` and `.ci/run`) and JWTs the
//! test signs.
//! `drover login` gets an ACL token holding what the binding rules grant: through a JWT
//! method with static keys (RS256), through one reading a JWKS (ES256), and through an OIDC
//! method by the authorization code flow with PKCE, the test playing the browser (the
//! provider's login and consent forms, its redirects, the CLI's callback listener). A wrong
//! audience, issuer or algorithm, an expired token and an unmatched selector are refused with
//! Nomad's errors.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod support;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use support::{Agent, drover_bin, http_as};

/// The OpenID provider (and JWT signer) of the fixture, stopped when dropped.
struct Provider {
    child: Child,
    issuer: String,
}

impl Drop for Provider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn fixture_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/oidc")
}

fn start_provider(redirect_uri: &str) -> Provider {
    let dir = fixture_dir();
    assert!(
        dir.join("node_modules/oidc-provider").exists(),
        "the OpenID provider fixture is not installed: run `npm ci` in {} (.ci/run does)",
        dir.display()
    );
    let mut child = Command::new("node")
        .arg("provider.mjs")
        .arg(redirect_uri)
        .current_dir(&dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("node runs (it is needed for the OpenID provider fixture)");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let ready = lines
        .next()
        .expect("the provider prints READY")
        .expect("the provider's stdout");
    let issuer = ready
        .strip_prefix("READY ")
        .unwrap_or_else(|| panic!("unexpected provider output: {ready}"))
        .to_owned();
    // Whatever the provider prints later is read, so it never writes into a closed pipe.
    std::thread::spawn(move || lines.for_each(drop));
    Provider { child, issuer }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn sign(provider: &Provider, algorithm: &str, claims: Value) -> String {
    let (status, token) = support::http(
        "POST",
        &format!("{}/test/sign/{algorithm}", provider.issuer),
        Some(&claims.to_string()),
    );
    assert_eq!(status, 200, "{token}");
    token
}

fn call(
    agent: &Agent,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Value,
) -> (u16, String) {
    let body = (!body.is_null()).then(|| body.to_string());
    http_as(method, &agent.url(path), token, body.as_deref())
}

fn ok_json(answer: (u16, String)) -> Value {
    assert_eq!(answer.0, 200, "{}", answer.1);
    serde_json::from_str(&answer.1).unwrap()
}

fn cli(agent: &Agent, token: Option<&str>, args: &[&str]) -> std::process::Output {
    let mut command = Command::new(drover_bin());
    command
        .args(args)
        .env("NOMAD_ADDR", &agent.address)
        .env_remove("NOMAD_TOKEN")
        .stdin(Stdio::null());
    if let Some(token) = token {
        command.env("NOMAD_TOKEN", token);
    }
    command.output().unwrap()
}

/// An ACL-enabled agent, its root secret, and the policies and role the rules bind.
fn agent_with_policies(temp: &Path) -> (Agent, String) {
    let config = temp.join("acl.hcl");
    std::fs::write(&config, "acl {\n  enabled = true\n}\n").unwrap();
    let agent = Agent::start_with(
        &temp.join("data"),
        &[&format!("-config={}", config.display())],
    );
    let root = ok_json(call(&agent, "POST", "/v1/acl/bootstrap", None, Value::Null));
    let root = root["SecretID"].as_str().unwrap().to_owned();
    for (name, rules) in [
        (
            "engineering-read",
            r#"namespace "default" { policy = "read" }"#,
        ),
        ("ops-write", r#"namespace "default" { policy = "write" }"#),
    ] {
        let (status, body) = call(
            &agent,
            "PUT",
            &format!("/v1/acl/policy/{name}"),
            Some(&root),
            json!({"Name": name, "Rules": rules}),
        );
        assert_eq!(status, 200, "{body}");
    }
    ok_json(call(
        &agent,
        "PUT",
        "/v1/acl/role",
        Some(&root),
        json!({"Name": "operators", "Policies": [{"Name": "ops-write"}]}),
    ));
    (agent, root)
}

#[test]
fn jwt_login_binds_policies_roles_and_management_and_refuses_bad_tokens() {
    let provider = start_provider("http://127.0.0.1:1/oidc/callback");
    let temp = tempfile::tempdir().unwrap();
    let (agent, root) = agent_with_policies(temp.path());
    let (_, rsa_pem) = support::http("GET", &format!("{}/test/pem/RS256", provider.issuer), None);

    // Without a management token no method is written.
    let method = json!({
        "Name": "jwt-static", "Type": "JWT", "TokenLocality": "local", "MaxTokenTTL": "1h",
        "TokenNameFormat": "${auth_method_type}-${value.user}",
        "Config": {
            "JWTValidationPubKeys": [rsa_pem],
            "BoundAudiences": ["drover"], "BoundIssuer": ["https://issuer.test"],
            "ClaimMappings": {"sub": "user"}, "ListClaimMappings": {"groups": "groups"},
        },
    });
    assert_eq!(
        call(&agent, "PUT", "/v1/acl/auth-method", None, method.clone()).0,
        403
    );
    let written = ok_json(call(
        &agent,
        "PUT",
        "/v1/acl/auth-method",
        Some(&root),
        method,
    ));
    assert_eq!(written["MaxTokenTTL"], "1h0m0s");
    assert_eq!(written["Type"], "JWT");
    // Nomad's validation, in its words.
    let (status, body) = call(
        &agent,
        "PUT",
        "/v1/acl/auth-method",
        Some(&root),
        json!({"Name": "bad", "Type": "JWT", "TokenLocality": "local", "MaxTokenTTL": "1h", "Config": {}}),
    );
    assert_eq!(status, 400);
    assert!(
        body.contains("JWT auth method requires either OIDCDiscoveryURL, or JWKS URL, or JWTValidationPubKeys set"),
        "{body}"
    );
    ok_json(call(
        &agent,
        "PUT",
        "/v1/acl/auth-method",
        Some(&root),
        json!({
            "Name": "jwt-jwks", "Type": "JWT", "TokenLocality": "local", "MaxTokenTTL": "30m",
            "Config": {
                "JWKSURL": format!("{}/test/jwks", provider.issuer),
                "SigningAlgs": ["ES256"], "BoundAudiences": ["drover"],
                "ClaimMappings": {"sub": "user"}, "ListClaimMappings": {"groups": "groups"},
            },
        }),
    ));
    // The list is anyone's.
    let listed = ok_json(call(
        &agent,
        "GET",
        "/v1/acl/auth-methods",
        None,
        Value::Null,
    ));
    assert_eq!(listed.as_array().unwrap().len(), 2);

    for rule in [
        json!({"AuthMethod": "jwt-static", "Selector": "\"engineering\" in list.groups", "BindType": "policy", "BindName": "engineering-read"}),
        json!({"AuthMethod": "jwt-static", "Selector": "value.user == \"admin\"", "BindType": "management"}),
        json!({"AuthMethod": "jwt-jwks", "Selector": "\"ops\" in list.groups", "BindType": "role", "BindName": "${value.user}"}),
    ] {
        ok_json(call(
            &agent,
            "PUT",
            "/v1/acl/binding-rule",
            Some(&root),
            rule,
        ));
    }
    let (status, body) = call(
        &agent,
        "PUT",
        "/v1/acl/binding-rule",
        Some(&root),
        json!({"AuthMethod": "jwt-static", "BindType": "group", "BindName": "x"}),
    );
    assert_eq!(
        (status, body.contains("unsupported bind type: \"group\"")),
        (400, true),
        "{body}"
    );
    assert_eq!(
        call(&agent, "GET", "/v1/acl/binding-rules", None, Value::Null).0,
        403
    );
    assert_eq!(
        ok_json(call(
            &agent,
            "GET",
            "/v1/acl/binding-rules",
            Some(&root),
            Value::Null
        ))
        .as_array()
        .unwrap()
        .len(),
        3
    );

    let claims = |user: &str, groups: &[&str]| {
        json!({"sub": user, "groups": groups, "aud": "drover", "iss": "https://issuer.test",
               "iat": now(), "exp": now() + 300})
    };

    // RS256 with the static key, through the CLI: the bound policy, the method's TTL, its
    // token name format.
    let jwt = sign(&provider, "RS256", claims("alice", &["engineering"]));
    let login = cli(
        &agent,
        None,
        &[
            "login",
            "-method",
            "jwt-static",
            "-login-token",
            &jwt,
            "-json",
        ],
    );
    assert!(login.status.success(), "{login:?}");
    let token: Value = serde_json::from_slice(&login.stdout).unwrap();
    assert_eq!(token["Name"], "JWT-alice");
    assert_eq!(token["Type"], "client");
    assert_eq!(token["Policies"], json!(["engineering-read"]));
    assert_eq!(token["ExpirationTTL"], 3_600_000_000_000_i64);
    let secret = token["SecretID"].as_str().unwrap();
    assert_eq!(
        call(&agent, "GET", "/v1/jobs", Some(secret), Value::Null).0,
        200
    );
    let (status, _) = call(
        &agent,
        "POST",
        "/v1/job/x/evaluate",
        Some(secret),
        json!({}),
    );
    assert_eq!(status, 403, "read does not write");
    let text = cli(
        &agent,
        None,
        &["login", "-method", "jwt-static", "-login-token", &jwt],
    );
    assert!(
        String::from_utf8_lossy(&text.stdout)
            .starts_with("Successfully logged in via JWT and jwt-static\n"),
        "{text:?}"
    );

    // A management rule makes a management token.
    let jwt = sign(&provider, "RS256", claims("admin", &[]));
    let token = ok_json(call(
        &agent,
        "PUT",
        "/v1/acl/login",
        None,
        json!({"AuthMethodName": "jwt-static", "LoginToken": jwt}),
    ));
    assert_eq!(token["Type"], "management");

    // ES256 through the JWKS the test serves; the role named by a claim.
    let jwt = sign(&provider, "ES256", claims("operators", &["ops"]));
    let token = ok_json(call(
        &agent,
        "PUT",
        "/v1/acl/login",
        None,
        json!({"AuthMethodName": "jwt-jwks", "LoginToken": jwt}),
    ));
    assert_eq!(token["Roles"][0]["Name"], "operators");
    assert_eq!(token["ExpirationTTL"], 1_800_000_000_000_i64);

    // Refusals, in Nomad's words.
    let refused = |method: &str, jwt: String| {
        call(
            &agent,
            "PUT",
            "/v1/acl/login",
            None,
            json!({"AuthMethodName": method, "LoginToken": jwt}),
        )
    };
    let mut wrong_audience = claims("alice", &["engineering"]);
    wrong_audience["aud"] = json!("someone-else");
    assert_eq!(
        refused("jwt-static", sign(&provider, "RS256", wrong_audience)),
        (401, "unable to validate provided token: unable to verify signature of JWT token: invalid audience (aud) claim: audience claim does not match any expected audience".to_owned())
    );
    let mut wrong_issuer = claims("alice", &["engineering"]);
    wrong_issuer["iss"] = json!("https://evil.test");
    assert_eq!(
        refused("jwt-static", sign(&provider, "RS256", wrong_issuer)),
        (
            401,
            "unable to validate provided token: invalid JWT issuer: https://evil.test".to_owned()
        )
    );
    let mut expired = claims("alice", &["engineering"]);
    expired["iat"] = json!(now() - 7200);
    expired["exp"] = json!(now() - 3600);
    assert_eq!(
        refused("jwt-static", sign(&provider, "RS256", expired)),
        (401, "unable to validate provided token: unable to verify signature of JWT token: invalid expiration time (exp) claim: token is expired".to_owned())
    );
    // Within the default 60 s of clock skew an expiry just past still verifies.
    let mut skewed = claims("alice", &["engineering"]);
    skewed["exp"] = json!(now() - 10);
    skewed["iat"] = json!(now() - 100);
    assert_eq!(
        refused("jwt-static", sign(&provider, "RS256", skewed)).0,
        200
    );
    assert_eq!(
        refused(
            "jwt-static",
            sign(&provider, "RS256", claims("bob", &["sales"]))
        ),
        (400, "no role or policy bindings matched".to_owned())
    );
    // The JWKS method takes only ES256; the static key does not verify an ES256 token.
    assert!(
        refused(
            "jwt-jwks",
            sign(&provider, "RS256", claims("operators", &["ops"]))
        )
        .1
        .ends_with(
            "invalid algorithm (alg) header parameter: token signed with unexpected algorithm"
        )
    );
    assert_eq!(
        refused(
            "jwt-static",
            sign(&provider, "ES256", claims("alice", &["engineering"]))
        )
        .0,
        401
    );
    // A method that finds its keys by OIDC discovery reads the provider's JWKS: the provider's
    // keys did not sign the test's token.
    ok_json(call(
        &agent,
        "PUT",
        "/v1/acl/auth-method",
        Some(&root),
        json!({"Name": "jwt-discovery", "Type": "JWT", "TokenLocality": "local", "MaxTokenTTL": "1h",
               "Config": {"OIDCDiscoveryURL": provider.issuer}}),
    ));
    let (status, body) = refused(
        "jwt-discovery",
        sign(&provider, "RS256", claims("alice", &["engineering"])),
    );
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("error verifying token signature"), "{body}");
    assert_eq!(
        refused("nope", "x".to_owned()),
        (400, "auth-method \"nope\" not found".to_owned())
    );
}

/// A cookie jar and a raw HTTP/1.1 client, enough to walk the provider's pages.
#[derive(Default)]
struct Browser {
    cookies: BTreeMap<String, String>,
}

struct Page {
    status: u16,
    location: Option<String>,
    body: String,
}

impl Browser {
    fn request(&mut self, method: &str, url: &str, form: Option<&str>) -> Page {
        let rest = url.strip_prefix("http://").expect("http url");
        let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let path = if path.is_empty() { "/" } else { path };
        let mut stream = std::net::TcpStream::connect(host).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        let cookie = self
            .cookies
            .iter()
            .map(|(name, value)| format!("{name}={value}"))
            .collect::<Vec<_>>()
            .join("; ");
        let body = form.unwrap_or("");
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nCookie: {cookie}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).unwrap();
        let text = String::from_utf8_lossy(&raw).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
        let mut location = None;
        for line in head.lines().skip(1) {
            let Some((name, value)) = line.split_once(':') else {
                continue;
            };
            let value = value.trim();
            if name.eq_ignore_ascii_case("set-cookie") {
                let pair = value.split(';').next().unwrap();
                if let Some((name, value)) = pair.split_once('=') {
                    self.cookies.insert(name.to_owned(), value.to_owned());
                }
            } else if name.eq_ignore_ascii_case("location") {
                location = Some(if value.starts_with('/') {
                    format!("http://{host}{value}")
                } else {
                    value.to_owned()
                });
            }
        }
        Page {
            status,
            location,
            body: body.to_owned(),
        }
    }
}

/// Walks from the authorization URL to the redirect back to `redirect_uri`: follows
/// redirects, signs in as `user` on the login form and confirms the consent form.
fn play_browser(auth_url: &str, redirect_uri: &str, user: &str) -> String {
    let mut browser = Browser::default();
    let mut page = browser.request("GET", auth_url, None);
    for _ in 0..20 {
        if let Some(location) = page.location.clone() {
            if location.starts_with(redirect_uri) {
                return location;
            }
            eprintln!("browser: redirected to {location}");
            page = browser.request("GET", &location, None);
            continue;
        }
        assert_eq!(page.status, 200, "{}", page.body);
        let action = page
            .body
            .split("action=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .unwrap_or_else(|| panic!("no form on the page: {}", page.body))
            .to_owned();
        let action = if action.starts_with('/') {
            let origin: String = auth_url
                .splitn(4, '/')
                .take(3)
                .collect::<Vec<_>>()
                .join("/");
            format!("{origin}{action}")
        } else {
            action
        };
        let form = if page.body.contains("name=\"prompt\" value=\"login\"") {
            format!("prompt=login&login={user}&password=secret")
        } else {
            "prompt=consent".to_owned()
        };
        eprintln!("browser: posting {form} to {action}");
        page = browser.request("POST", &action, Some(&form));
    }
    panic!("the provider never redirected back");
}

#[test]
fn oidc_login_runs_the_code_flow_with_pkce_through_a_real_provider() {
    let callback_port = free_port();
    let callback_addr = format!("127.0.0.1:{callback_port}");
    let redirect_uri = format!("http://{callback_addr}/oidc/callback");
    let provider = start_provider(&redirect_uri);
    let temp = tempfile::tempdir().unwrap();
    let (agent, root) = agent_with_policies(temp.path());

    ok_json(call(
        &agent,
        "PUT",
        "/v1/acl/auth-method",
        Some(&root),
        json!({
            "Name": "example", "Type": "OIDC", "TokenLocality": "local", "MaxTokenTTL": "2h",
            "Default": true,
            "Config": {
                "OIDCDiscoveryURL": provider.issuer, "OIDCClientID": "drover",
                "OIDCClientSecret": "drover-secret", "OIDCEnablePKCE": true,
                "OIDCScopes": ["email", "groups"], "BoundAudiences": ["drover"],
                "AllowedRedirectURIs": [redirect_uri],
                "ClaimMappings": {"email": "email"}, "ListClaimMappings": {"groups": "groups"},
            },
        }),
    ));
    // The secret is never shown.
    let shown = ok_json(call(
        &agent,
        "GET",
        "/v1/acl/auth-method/example",
        Some(&root),
        Value::Null,
    ));
    assert_eq!(shown["Config"]["OIDCClientSecret"], "redacted");
    ok_json(call(
        &agent,
        "PUT",
        "/v1/acl/binding-rule",
        Some(&root),
        json!({"AuthMethod": "example", "Selector": "\"engineering\" in list.groups and value.email == \"carol@example.com\"",
               "BindType": "policy", "BindName": "engineering-read"}),
    ));

    // `drover login` with the default method: no browser opens here (no PATH), so it prints
    // the URL; the test is the browser.
    let mut login = Command::new(drover_bin())
        .args(["login", "-oidc-callback-addr", &callback_addr, "-json"])
        .env("NOMAD_ADDR", &agent.address)
        .env("PATH", "/nonexistent")
        .env_remove("NOMAD_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(login.stdout.take().unwrap());
    let mut auth_url = String::new();
    for _ in 0..20 {
        let mut line = String::new();
        if stdout.read_line(&mut line).unwrap() == 0 {
            break;
        }
        if line.starts_with("http") {
            auth_url = line.trim().to_owned();
            break;
        }
    }
    assert!(
        auth_url.contains("code_challenge_method=S256"),
        "{auth_url}"
    );
    assert!(auth_url.contains("client_id=drover"), "{auth_url}");
    let callback = play_browser(&auth_url, &redirect_uri, "carol");
    assert!(callback.contains("code="), "{callback}");
    // The provider's redirect lands on the CLI's listener, which completes the login.
    let page = Browser::default().request("GET", &callback, None);
    assert_eq!(page.status, 200);
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    let status = login.wait().unwrap();
    let mut errors = String::new();
    login
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut errors)
        .unwrap();
    assert!(status.success(), "{errors}\n{rest}");
    let token: Value = serde_json::from_str(rest.trim()).unwrap_or_else(|_| panic!("{rest}"));
    assert_eq!(token["Name"], "OIDC-example");
    assert_eq!(token["Policies"], json!(["engineering-read"]));
    assert_eq!(token["ExpirationTTL"], 7_200_000_000_000_i64);
    let secret = token["SecretID"].as_str().unwrap();
    assert_eq!(
        call(&agent, "GET", "/v1/jobs", Some(secret), Value::Null).0,
        200
    );

    // A second user, not in the selector: the flow completes at the provider, and the login
    // is refused.
    let nonce = "0123456789abcdef0123456789abcdef01234567";
    let url = ok_json(call(
        &agent,
        "PUT",
        "/v1/acl/oidc/auth-url",
        None,
        json!({"AuthMethodName": "example", "RedirectURI": redirect_uri, "ClientNonce": nonce}),
    ));
    let callback = play_browser(url["AuthURL"].as_str().unwrap(), &redirect_uri, "dave");
    let query: BTreeMap<String, String> = callback
        .split_once('?')
        .unwrap()
        .1
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(name, value)| {
            (
                name.to_owned(),
                value.replace("%3A", ":").replace("%2F", "/"),
            )
        })
        .collect();
    let (status, body) = call(
        &agent,
        "PUT",
        "/v1/acl/oidc/complete-auth",
        None,
        json!({"AuthMethodName": "example", "RedirectURI": redirect_uri, "ClientNonce": nonce,
               "Code": query["code"], "State": query["state"], "Iss": query["iss"]}),
    );
    assert_eq!(
        (status, body.as_str()),
        (400, "no role or policy bindings matched")
    );
    // A redirect URI the method does not allow gets no URL.
    let (status, body) = call(
        &agent,
        "PUT",
        "/v1/acl/oidc/auth-url",
        None,
        json!({"AuthMethodName": "example", "RedirectURI": "http://127.0.0.1:1/elsewhere", "ClientNonce": "other-nonce"}),
    );
    assert_eq!(
        (status, body.as_str()),
        (
            500,
            "failed to generate auth URL: Provider.AuthURL: unauthorized redirect_uri"
        )
    );
}
