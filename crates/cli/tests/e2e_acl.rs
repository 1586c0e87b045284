//! End to end through the real agent with `acl { enabled = true }`: the one bootstrap (a
//! second is 400 with the reset index; the data dir's `acl-bootstrap-reset` allows one more),
//! no token is 403 on `GET /v1/jobs`, a read-only policy on namespace default lists jobs and
//! cannot register, management can, policies and tokens over HTTP and the CLI, token self,
//! an unknown token refused; an expired token listed until a GC removes it, token TTLs within
//! the configured bounds; `-json` and `-t` on the ACL commands; single-object reads (ACL
//! objects, namespaces, node pools, scaling policies) answering and blocking on their own
//! ModifyIndex, the ACL lists blocking on their own tables; the `Variable` event topic
//! filtered by the token's variables rules.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::{Agent, drover_bin, get_indexed, wait_for};

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

/// A job that registers but never places (no node is named `nowhere`).
fn unplaceable_job(job_id: &str) -> String {
    json!({"Job": {
        "ID": job_id, "Name": job_id, "Type": "service", "Datacenters": ["dc1"],
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

fn cli(agent: &Agent, token: Option<&str>, args: &[&str]) -> std::process::Output {
    let mut command = std::process::Command::new(drover_bin());
    command
        .args(args)
        .env("NOMAD_ADDR", &agent.address)
        .env_remove("NOMAD_TOKEN");
    if let Some(token) = token {
        command.env("NOMAD_TOKEN", token);
    }
    command.output().unwrap()
}

#[test]
fn with_acls_on_bootstrap_happens_once_and_policies_decide_who_reads_and_registers() {
    let temp = tempfile::tempdir().unwrap();
    let data_dir = temp.path().join("data");
    let config = temp.path().join("acl.hcl");
    std::fs::write(&config, "acl {\n  enabled = true\n}\n").unwrap();
    let agent = Agent::start_with(&data_dir, &[&format!("-config={}", config.display())]);
    let url = |path: &str| agent.url(path);

    // Without a token nothing namespaced is allowed; health still answers.
    assert_eq!(
        call("GET", &url("/v1/jobs"), None, None),
        (403, "Permission denied".to_owned())
    );
    assert_eq!(call("GET", &url("/v1/status/leader"), None, None).0, 200);
    assert_eq!(
        call(
            "GET",
            &url("/v1/jobs"),
            Some("9b1c3f7e-0000-4000-8000-000000000000"),
            None
        ),
        (403, "ACL token not found".to_owned())
    );

    // The bootstrap answers a management token once.
    let (status, body) = call("POST", &url("/v1/acl/bootstrap"), None, None);
    assert_eq!(status, 200, "{body}");
    let root = json_of(&body);
    assert_eq!(root["Type"], "management");
    assert_eq!(root["Name"], "Bootstrap Token");
    assert_eq!(root["Global"], true);
    // Nomad's hash of a bootstrap token: BLAKE2b-256 of its name, type and "global".
    assert_eq!(root["Hash"], "BUJ3BerTfrqFVm1P+vZr1gz9ubOkd+JAvYjNAJyaU9Y=");
    let root_secret = root["SecretID"].as_str().unwrap().to_owned();
    let bootstrap_index = root["CreateIndex"].as_u64().unwrap();
    let (status, body) = call("POST", &url("/v1/acl/bootstrap"), None, None);
    assert_eq!(
        (status, body.as_str()),
        (
            400,
            format!("ACL bootstrap already done (reset index: {bootstrap_index})").as_str()
        )
    );
    // The reset file in the server's data dir allows exactly one more, with a chosen secret.
    std::fs::write(
        data_dir.join("server").join("acl-bootstrap-reset"),
        bootstrap_index.to_string(),
    )
    .unwrap();
    let chosen = "2b778dd9-f5f1-6f29-b4b4-9a5fa948757a";
    let (status, body) = call(
        "POST",
        &url("/v1/acl/bootstrap"),
        None,
        Some(&json!({"BootstrapSecret": chosen}).to_string()),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(json_of(&body)["SecretID"], chosen);
    assert_eq!(call("POST", &url("/v1/acl/bootstrap"), None, None).0, 400);

    // Management may do everything.
    let (status, body) = call(
        "PUT",
        &url("/v1/jobs"),
        Some(&root_secret),
        Some(&unplaceable_job("by-root")),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(call("GET", &url("/v1/jobs"), Some(chosen), None).0, 200);

    // A read-only policy on namespace default, through the CLI.
    let rules = temp.path().join("readonly.hcl");
    std::fs::write(&rules, "namespace \"default\" {\n  policy = \"read\"\n}\n").unwrap();
    let applied = cli(
        &agent,
        Some(&root_secret),
        &[
            "acl",
            "policy",
            "apply",
            "-description",
            "read only",
            "readonly",
            rules.to_str().unwrap(),
        ],
    );
    assert!(applied.status.success(), "{applied:?}");
    assert_eq!(
        String::from_utf8_lossy(&applied.stdout).trim(),
        "Successfully wrote \"readonly\" ACL policy!"
    );
    let (status, body) = call(
        "PUT",
        &url("/v1/acl/policy/bad"),
        Some(&root_secret),
        Some(r#"{"Name": "bad", "Rules": "namespace \"default\" { policy = \"root\" }"}"#),
    );
    assert_eq!(status, 400);
    assert!(
        body.starts_with("policy 0 invalid: Invalid namespace policy"),
        "{body}"
    );

    let (status, body) = call(
        "POST",
        &url("/v1/acl/token"),
        Some(&root_secret),
        Some(r#"{"Name": "reader", "Type": "client", "Policies": ["readonly"]}"#),
    );
    assert_eq!(status, 200, "{body}");
    let reader = json_of(&body);
    let reader_secret = reader["SecretID"].as_str().unwrap().to_owned();
    let reader_accessor = reader["AccessorID"].as_str().unwrap().to_owned();
    assert_eq!(reader["Policies"], json!(["readonly"]));

    let (status, body) = call("GET", &url("/v1/jobs"), Some(&reader_secret), None);
    assert_eq!(status, 200, "{body}");
    assert_eq!(json_of(&body)[0]["ID"], "by-root");
    assert_eq!(
        call("GET", &url("/v1/job/by-root"), Some(&reader_secret), None).0,
        200
    );
    assert_eq!(
        call(
            "PUT",
            &url("/v1/jobs"),
            Some(&reader_secret),
            Some(&unplaceable_job("by-reader"))
        ),
        (403, "Permission denied".to_owned())
    );
    assert_eq!(
        call(
            "DELETE",
            &url("/v1/job/by-root"),
            Some(&reader_secret),
            None
        )
        .0,
        403
    );
    assert_eq!(
        call(
            "GET",
            &url("/v1/jobs?namespace=other"),
            Some(&reader_secret),
            None
        )
        .0,
        403
    );
    assert_eq!(
        call("GET", &url("/v1/nodes"), Some(&reader_secret), None).0,
        403
    );
    // A client token reads itself and its own policy, not the token list.
    let (status, body) = call(
        "GET",
        &url("/v1/acl/token/self"),
        Some(&reader_secret),
        None,
    );
    assert_eq!(status, 200);
    assert_eq!(json_of(&body)["AccessorID"], reader_accessor.as_str());
    assert_eq!(
        call(
            "GET",
            &url("/v1/acl/policy/readonly"),
            Some(&reader_secret),
            None
        )
        .0,
        200
    );
    assert_eq!(
        call("GET", &url("/v1/acl/tokens"), Some(&reader_secret), None).0,
        403
    );

    // The anonymous policy applies to requests without a token.
    let (status, _) = call(
        "PUT",
        &url("/v1/acl/policy/anonymous"),
        Some(&root_secret),
        Some(
            r#"{"Name": "anonymous", "Rules": "namespace \"default\" { capabilities = [\"list-jobs\"] }"}"#,
        ),
    );
    assert_eq!(status, 200);
    assert_eq!(call("GET", &url("/v1/jobs"), None, None).0, 200);
    assert_eq!(call("GET", &url("/v1/job/by-root"), None, None).0, 403);

    // The CLI lists tokens and deletes one; the deleted token is refused.
    let listed = cli(&agent, Some(&root_secret), &["acl", "token", "list"]);
    let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
    assert!(listed.contains("reader"), "{listed}");
    assert!(listed.contains("Bootstrap Token"), "{listed}");
    let deleted = cli(
        &agent,
        Some(&root_secret),
        &["acl", "token", "delete", &reader_accessor],
    );
    assert!(deleted.status.success(), "{deleted:?}");
    assert_eq!(
        call("GET", &url("/v1/jobs"), Some(&reader_secret), None),
        (403, "ACL token not found".to_owned())
    );
}

#[test]
fn node_calls_need_the_node_secret_and_may_only_report_the_nodes_own_allocations() {
    // ACLs off: the node's calls are authenticated all the same.
    let temp = tempfile::tempdir().unwrap();
    let data_dir = temp.path().join("data");
    let agent = Agent::start_with(&data_dir, &[]);
    let url = |path: &str| agent.url(path);
    let node_id = std::fs::read_to_string(data_dir.join("client").join("node-id")).unwrap();
    let secret = std::fs::read_to_string(data_dir.join("client").join("secret-id")).unwrap();
    let (node_id, secret) = (node_id.trim(), secret.trim());
    support::wait_for(
        "the node to register",
        std::time::Duration::from_secs(60),
        || {
            let (status, body) = call("GET", &url(&format!("/v1/node/{node_id}")), None, None);
            (status == 200).then_some(body)
        },
    );

    // A job placed on this node gives an allocation this node may report.
    let (status, body) = call(
        "PUT",
        &url("/v1/jobs"),
        None,
        Some(&unplaceable_job("other")),
    );
    assert_eq!(status, 200, "{body}");
    let update =
        |alloc_id: &str| json!({"Alloc": [{"ID": alloc_id, "ClientStatus": "failed"}]}).to_string();
    let stranger = "5d1c6f0e-0000-4000-8000-0000000000aa";
    for token in [None, Some(stranger)] {
        assert_eq!(
            call(
                "PUT",
                &url("/v1/internal/node/update-alloc"),
                token,
                Some(&update("8a0c1c5e-0000-4000-8000-000000000001"))
            ),
            (403, "Permission denied".to_owned()),
            "{token:?}"
        );
        assert_eq!(
            call(
                "PUT",
                &url(&format!("/v1/internal/node/{node_id}/update-status")),
                token,
                Some(r#"{"Status": "down"}"#)
            )
            .0,
            403
        );
    }
    // With the node's own secret, an allocation the servers do not know is skipped, as Nomad's
    // `Node.UpdateAlloc` skips it (a refusal made the client drop its whole report); nothing
    // comes of it.
    let (status, body) = call(
        "PUT",
        &url("/v1/internal/node/update-alloc"),
        Some(secret),
        Some(&update("8a0c1c5e-0000-4000-8000-000000000001")),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        call(
            "GET",
            &url("/v1/allocation/8a0c1c5e-0000-4000-8000-000000000001"),
            None,
            None
        )
        .0,
        404
    );
    // The node still is what it reported.
    let node = agent.get_json(&format!("/v1/node/{node_id}"));
    assert_eq!(node["Status"], "ready");
}

fn stdout(output: &std::process::Output) -> String {
    assert!(output.status.success(), "{output:?}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The value of `key = value` in Nomad's key/value CLI output.
fn kv_value(text: &str, key: &str) -> String {
    text.lines()
        .find_map(|line| {
            let (name, value) = line.split_once(" = ")?;
            (name.trim() == key).then(|| value.trim().to_owned())
        })
        .unwrap_or_else(|| panic!("no {key} in {text}"))
}

#[test]
fn acl_roles_group_policies_that_tokens_link_to_by_name_or_id() {
    let temp = tempfile::tempdir().unwrap();
    let data_dir = temp.path().join("data");
    let config = temp.path().join("acl.hcl");
    std::fs::write(&config, "acl {\n  enabled = true\n}\n").unwrap();
    let config_flag = format!("-config={}", config.display());
    let mut agent = Agent::start_with(&data_dir, &[&config_flag]);
    let url = |agent: &Agent, path: &str| agent.url(path);
    let (status, body) = call("POST", &url(&agent, "/v1/acl/bootstrap"), None, None);
    assert_eq!(status, 200, "{body}");
    let root = json_of(&body)["SecretID"].as_str().unwrap().to_owned();
    let root = Some(root.as_str());
    for (name, rules) in [
        (
            "readonly",
            "namespace \"default\" {\n  policy = \"read\"\n}\n",
        ),
        ("nodes", "node {\n  policy = \"read\"\n}\n"),
    ] {
        let file = temp.path().join(format!("{name}.hcl"));
        std::fs::write(&file, rules).unwrap();
        stdout(&cli(
            &agent,
            root,
            &["acl", "policy", "apply", name, file.to_str().unwrap()],
        ));
    }

    // A role through the CLI; a repeated policy is linked once.
    let created = stdout(&cli(
        &agent,
        root,
        &[
            "acl",
            "role",
            "create",
            "-name=readers",
            "-description=read jobs",
            "-policy=readonly",
            "-policy=readonly",
        ],
    ));
    let role_id = kv_value(&created, "ID");
    assert_eq!(kv_value(&created, "Name"), "readers");
    assert_eq!(kv_value(&created, "Description"), "read jobs");
    assert_eq!(kv_value(&created, "Policies"), "readonly");
    let (status, body) = call(
        "GET",
        &url(&agent, &format!("/v1/acl/role/{role_id}")),
        root,
        None,
    );
    assert_eq!(status, 200, "{body}");
    let role = json_of(&body);
    assert_eq!(role["Policies"], json!([{"Name": "readonly"}]));
    assert!(role["Hash"].as_str().is_some_and(|hash| !hash.is_empty()));
    assert_eq!(role["CreateIndex"], role["ModifyIndex"]);

    // Nomad's refusals.
    let role_body =
        |name: &str, policies: Value| json!({"Name": name, "Policies": policies}).to_string();
    for (body, expected) in [
        (
            role_body("readers", json!([{"Name": "readonly"}])),
            "role with name readers already exists".to_owned(),
        ),
        (
            role_body("bad name", json!([])),
            "role 0 invalid: 2 errors occurred:\n\t* invalid name 'bad name'\n\t* at least one policy should be specified\n\n".to_owned(),
        ),
        (
            role_body("ghost", json!([{"Name": "nope"}])),
            "cannot find policy nope".to_owned(),
        ),
    ] {
        assert_eq!(
            call("PUT", &url(&agent, "/v1/acl/role"), root, Some(&body)),
            (400, expected)
        );
    }
    assert_eq!(
        call(
            "POST",
            &url(&agent, &format!("/v1/acl/role/{role_id}")),
            root,
            Some(&role_body("readers", json!([{"Name": "readonly"}])))
        ),
        (400, "ACL role ID does not match request path".to_owned())
    );
    assert_eq!(
        call("GET", &url(&agent, "/v1/acl/role/name/"), root, None),
        (400, "missing ACL role name".to_owned())
    );
    assert_eq!(
        call("GET", &url(&agent, "/v1/acl/role/by/readers"), root, None),
        (400, "invalid URI".to_owned())
    );
    assert_eq!(
        call("GET", &url(&agent, "/v1/acl/role/name/nobody"), root, None),
        (404, "ACL role not found".to_owned())
    );

    // A token linked by role name holds the role's policies, and prints the link.
    let token_out = stdout(&cli(
        &agent,
        root,
        &[
            "acl",
            "token",
            "create",
            "-name=via-role",
            "-role-name=readers",
        ],
    ));
    let secret = kv_value(&token_out, "Secret ID");
    let accessor = kv_value(&token_out, "Accessor ID");
    assert_eq!(kv_value(&token_out, "Policies"), "[]");
    assert!(
        token_out.contains(&format!(
            "Roles\nID{}Name\n{role_id}  readers",
            " ".repeat(role_id.len())
        )),
        "{token_out}"
    );
    let token = Some(secret.as_str());
    assert_eq!(call("GET", &url(&agent, "/v1/jobs"), token, None).0, 200);
    assert_eq!(
        call(
            "PUT",
            &url(&agent, "/v1/jobs"),
            token,
            Some(&unplaceable_job("nope"))
        ),
        (403, "Permission denied".to_owned())
    );
    assert_eq!(call("GET", &url(&agent, "/v1/nodes"), token, None).0, 403);
    assert_eq!(
        call("GET", &url(&agent, "/v1/acl/policy/readonly"), token, None).0,
        200
    );
    assert_eq!(
        call("GET", &url(&agent, "/v1/acl/policy/nodes"), token, None).0,
        403
    );
    // Stored by ID, answered with the role's name.
    let (status, body) = call(
        "GET",
        &url(&agent, &format!("/v1/acl/token/{accessor}")),
        root,
        None,
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        json_of(&body)["Roles"],
        json!([{"ID": role_id, "Name": "readers"}])
    );

    // Updating the role (merging a policy in) widens every linked token.
    let updated = stdout(&cli(
        &agent,
        root,
        &[
            "acl",
            "role",
            "update",
            "-policy=nodes",
            "-name=watchers",
            &role_id,
        ],
    ));
    assert_eq!(kv_value(&updated, "Policies"), "nodes,readonly");
    assert_eq!(kv_value(&updated, "Name"), "watchers");
    assert_eq!(call("GET", &url(&agent, "/v1/nodes"), token, None).0, 200);
    let (_, body) = call("GET", &url(&agent, "/v1/acl/token/self"), token, None);
    assert_eq!(
        json_of(&body)["Roles"],
        json!([{"ID": role_id, "Name": "watchers"}])
    );

    // A client token lists and reads only the roles it links to, and writes none.
    let other = stdout(&cli(
        &agent,
        root,
        &["acl", "role", "create", "-name=other", "-policy=nodes"],
    ));
    let other_id = kv_value(&other, "ID");
    let (status, body) = call("GET", &url(&agent, "/v1/acl/roles"), root, None);
    assert_eq!(status, 200);
    assert_eq!(json_of(&body).as_array().unwrap().len(), 2);
    let (status, body) = call("GET", &url(&agent, "/v1/acl/roles"), token, None);
    assert_eq!(status, 200);
    let listed = json_of(&body);
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed[0]["ID"], role_id.as_str());
    let prefix = &other_id[..4];
    let (_, body) = call(
        "GET",
        &url(&agent, &format!("/v1/acl/roles?prefix={prefix}")),
        root,
        None,
    );
    assert_eq!(json_of(&body)[0]["ID"], other_id.as_str());
    assert_eq!(
        call(
            "GET",
            &url(&agent, &format!("/v1/acl/role/{role_id}")),
            token,
            None
        )
        .0,
        200
    );
    assert_eq!(
        call(
            "GET",
            &url(&agent, "/v1/acl/role/name/watchers"),
            token,
            None
        )
        .0,
        200
    );
    assert_eq!(
        call(
            "GET",
            &url(&agent, &format!("/v1/acl/role/{other_id}")),
            token,
            None
        ),
        (403, "Permission denied".to_owned())
    );
    assert_eq!(
        call(
            "DELETE",
            &url(&agent, &format!("/v1/acl/role/{other_id}")),
            token,
            None
        ),
        (403, "Permission denied".to_owned())
    );
    let listed = stdout(&cli(&agent, root, &["acl", "role", "list"]));
    assert!(listed.starts_with("ID"), "{listed}");
    assert!(
        listed.contains("watchers") && listed.contains("other"),
        "{listed}"
    );
    let info = stdout(&cli(
        &agent,
        root,
        &["acl", "role", "info", "-by-name", "other"],
    ));
    assert_eq!(kv_value(&info, "ID"), other_id);

    // Linking by ID; an unknown role is refused; links are de-duplicated.
    let (status, body) = call(
        "POST",
        &url(&agent, "/v1/acl/token"),
        root,
        Some(
            &json!({"Type": "client", "Roles": [{"ID": other_id}, {"Name": "other"}]}).to_string(),
        ),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        json_of(&body)["Roles"],
        json!([{"ID": other_id, "Name": "other"}])
    );
    let failed = cli(
        &agent,
        root,
        &[
            "acl",
            "token",
            "create",
            "-role-id=0c0ffee0-0000-4000-8000-000000000000",
        ],
    );
    assert!(!failed.status.success());
    assert!(
        String::from_utf8_lossy(&failed.stderr)
            .contains("cannot find role 0c0ffee0-0000-4000-8000-000000000000"),
        "{failed:?}"
    );
    assert_eq!(
        call(
            "POST",
            &url(&agent, "/v1/acl/token"),
            root,
            Some(r#"{"Type": "client"}"#)
        ),
        (400, "client token missing policies or roles".to_owned())
    );

    // Roles outlive a restart.
    agent.terminate();
    drop(agent);
    let agent = Agent::start_with(&data_dir, &[&config_flag]);
    assert_eq!(call("GET", &url(&agent, "/v1/nodes"), token, None).0, 200);

    // Deleting the role takes its policies from the token; the link disappears.
    let deleted = stdout(&cli(&agent, root, &["acl", "role", "delete", &role_id]));
    assert_eq!(
        deleted.trim(),
        format!("ACL role {role_id} successfully deleted")
    );
    assert_eq!(call("GET", &url(&agent, "/v1/jobs"), token, None).0, 403);
    let (_, body) = call("GET", &url(&agent, "/v1/acl/token/self"), token, None);
    assert_eq!(json_of(&body)["Roles"], json!([]));
    assert_eq!(
        call(
            "DELETE",
            &url(&agent, &format!("/v1/acl/role/{role_id}")),
            root,
            None
        ),
        (400, "ACL role not found".to_owned())
    );
}

#[test]
fn acl_endpoints_answer_their_method_and_path_errors_before_the_token_as_nomad() {
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
    let root = Some(root.as_str());
    for (name, rules) in [
        ("readonly", r#"namespace "default" { policy = "read" }"#),
        (
            "anonymous",
            r#"namespace "default" { capabilities = ["list-jobs"] }"#,
        ),
    ] {
        let policy = json!({"Name": name, "Rules": rules}).to_string();
        let (status, body) = call(
            "PUT",
            &url(&format!("/v1/acl/policy/{name}")),
            root,
            Some(&policy),
        );
        assert_eq!(status, 200, "{body}");
    }
    let (status, body) = call(
        "PUT",
        &url("/v1/acl/token"),
        root,
        Some(r#"{"Name": "reader", "Type": "client", "Policies": ["readonly"]}"#),
    );
    assert_eq!(status, 200, "{body}");
    let reader = json_of(&body)["SecretID"].as_str().unwrap().to_owned();
    let reader = Some(reader.as_str());

    // A client token gets the handler's answer to a method or path it does not take, not
    // the 403 of an endpoint it may not use.
    for (method, path, status, message) in [
        ("GET", "/v1/acl/role", 405, "Invalid method"),
        ("GET", "/v1/acl/token", 405, "Invalid method"),
        ("POST", "/v1/acl/tokens", 405, "Invalid method"),
        ("PATCH", "/v1/acl/policy/readonly", 405, "Invalid method"),
        ("POST", "/v1/acl/role/name/ops", 405, "Invalid method"),
        ("PUT", "/v1/acl/token/self", 405, "Invalid method"),
        ("GET", "/v1/acl/policy/", 400, "Missing Policy Name"),
        ("DELETE", "/v1/acl/token/", 400, "Missing Token Accessor"),
        ("GET", "/v1/acl/role/", 400, "missing ACL role ID"),
        ("GET", "/v1/acl/role/ops/more", 400, "invalid URI"),
        ("GET", "/v1/acl/role/name/", 400, "missing ACL role name"),
        // What only management may do stays 403.
        ("PUT", "/v1/acl/role", 403, "Permission denied"),
        ("GET", "/v1/acl/tokens", 403, "Permission denied"),
        (
            "DELETE",
            "/v1/acl/policy/readonly",
            403,
            "Permission denied",
        ),
    ] {
        let body = (method == "PUT").then_some("{}");
        assert_eq!(
            call(method, &url(path), reader, body),
            (status, message.to_owned()),
            "{method} {path}"
        );
    }

    // The anonymous policy is anyone's to read; a request without a token holds it.
    let (status, body) = call("GET", &url("/v1/acl/policy/anonymous"), reader, None);
    assert_eq!(status, 200, "{body}");
    let names = |body: &str| -> Vec<String> {
        json_of(body)
            .as_array()
            .unwrap()
            .iter()
            .map(|stub| stub["Name"].as_str().unwrap().to_owned())
            .collect()
    };
    let (status, body) = call("GET", &url("/v1/acl/policies"), None, None);
    assert_eq!(status, 200, "{body}");
    assert_eq!(names(&body), ["anonymous"]);
    let (status, body) = call("GET", &url("/v1/acl/policy/self"), reader, None);
    assert_eq!(status, 200, "{body}");
    assert_eq!(names(&body), ["readonly"]);
    assert_eq!(
        call("GET", &url("/v1/acl/policy/self"), None, None),
        (403, "Permission denied".to_owned())
    );
    // And `acl policy self`, as Nomad's prints them.
    let output = cli(&agent, reader, &["acl", "policy", "self"]);
    assert!(output.status.success(), "{output:?}");
    let lines: Vec<Vec<String>> = stdout(&output)
        .lines()
        .map(|line| line.split_whitespace().map(str::to_owned).collect())
        .collect();
    assert_eq!(
        lines,
        [
            vec!["Name", "Job", "ID", "Group", "Name", "Task", "Name"],
            vec![
                "readonly",
                "<unavailable>",
                "<unavailable>",
                "<unavailable>"
            ],
        ]
    );
    let output = cli(&agent, root, &["acl", "policy", "self"]);
    assert_eq!(
        stdout(&output).trim(),
        "This is a management token. No individual policies are assigned."
    );
}

#[test]
fn node_pool_policies_decide_which_pools_a_token_reads_writes_and_deletes() {
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
    let root = Some(root.as_str());
    for pool in ["prod-api", "prod-db", "dev"] {
        let body = json!({"Name": pool}).to_string();
        let (status, answer) = call("PUT", &url("/v1/node/pools"), root, Some(&body));
        assert_eq!(status, 200, "{pool}: {answer}");
    }
    let rules = "node_pool \"prod-*\" {\n  policy = \"read\"\n}\nnode_pool \"dev\" {\n  policy = \"write\"\n}\nnode_pool \"prod-db\" {\n  policy = \"deny\"\n}\n";
    let policy = json!({"Name": "pools", "Rules": rules}).to_string();
    let (status, body) = call("PUT", &url("/v1/acl/policy/pools"), root, Some(&policy));
    assert_eq!(status, 200, "{body}");
    let (status, body) = call(
        "PUT",
        &url("/v1/acl/token"),
        root,
        Some(r#"{"Name": "pools", "Type": "client", "Policies": ["pools"]}"#),
    );
    assert_eq!(status, 200, "{body}");
    let token = json_of(&body)["SecretID"].as_str().unwrap().to_owned();
    let token = Some(token.as_str());

    // The list keeps the pools the token may read (not the built-in ones, nor a denied one).
    let (status, body) = call("GET", &url("/v1/node/pools"), token, None);
    assert_eq!(status, 200, "{body}");
    let names: Vec<String> = json_of(&body)
        .as_array()
        .unwrap()
        .iter()
        .map(|pool| pool["Name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["dev", "prod-api"]);
    for (method, path, body, status) in [
        ("GET", "/v1/node/pool/prod-api", None, 200),
        ("GET", "/v1/node/pool/prod-db", None, 403),
        ("GET", "/v1/node/pool/default", None, 403),
        ("GET", "/v1/node/pool/prod-api/jobs", None, 200),
        // A pool's nodes also need node read, which the policy does not grant.
        ("GET", "/v1/node/pool/prod-api/nodes", None, 403),
        (
            "PUT",
            "/v1/node/pool/prod-api",
            Some(r#"{"Name": "prod-api", "Description": "mine"}"#),
            403,
        ),
        (
            "PUT",
            "/v1/node/pools",
            Some(r#"{"Name": "dev", "Description": "ours"}"#),
            200,
        ),
        ("DELETE", "/v1/node/pool/prod-api", None, 403),
        ("DELETE", "/v1/node/pool/dev", None, 200),
    ] {
        let (answer_status, answer) = call(method, &url(path), token, body);
        assert_eq!(answer_status, status, "{method} {path}: {answer}");
    }
}

/// Nomad's api suite creates a token naming a policy before writing the policy: accepted, and
/// the token holds the policy once it exists.
#[test]
fn a_token_naming_a_policy_not_yet_written_is_accepted_and_holds_it_once_written() {
    let temp = tempfile::tempdir().unwrap();
    let (agent, root) = acl_agent(temp.path(), "", "");
    let root = Some(root.as_str());
    let (status, body) = call(
        "PUT",
        &agent.url("/v1/acl/token"),
        root,
        Some(r#"{"Name": "early", "Type": "client", "Policies": ["later"]}"#),
    );
    assert_eq!(status, 200, "{body}");
    let created = json_of(&body);
    assert_eq!(created["Policies"], json!(["later"]));
    let secret = created["SecretID"].as_str().unwrap().to_owned();
    let token = Some(secret.as_str());
    let (status, _) = call("GET", &agent.url("/v1/jobs"), token, None);
    assert_eq!(status, 403, "the policy does not exist yet");
    let rules = "namespace \"default\" {\n  policy = \"read\"\n}\n";
    let policy = json!({"Name": "later", "Rules": rules}).to_string();
    let (status, body) = call(
        "PUT",
        &agent.url("/v1/acl/policy/later"),
        root,
        Some(&policy),
    );
    assert_eq!(status, 200, "{body}");
    let (status, body) = call("GET", &agent.url("/v1/jobs"), token, None);
    assert_eq!(
        status, 200,
        "the token holds the policy once written: {body}"
    );
}

/// An agent with ACLs on, the extra `acl` and `server` keys given, and its management secret.
fn acl_agent(temp: &std::path::Path, acl_keys: &str, server_keys: &str) -> (Agent, String) {
    let config = temp.join("acl.hcl");
    std::fs::write(
        &config,
        format!("acl {{\n  enabled = true\n{acl_keys}}}\nserver {{\n{server_keys}}}\n"),
    )
    .unwrap();
    let agent = Agent::start_with(
        &temp.join("data"),
        &[&format!("-config={}", config.display())],
    );
    // `-t` on the bootstrap prints just what the template asks for.
    let root = stdout(&cli(
        &agent,
        None,
        &["acl", "bootstrap", "-t", "{{.SecretID}}"],
    ));
    let root = root.trim().to_owned();
    assert_eq!(root.len(), 36, "{root}");
    (agent, root)
}

fn apply_policy(agent: &Agent, root: &str, dir: &std::path::Path, name: &str, rules: &str) {
    let file = dir.join(format!("{name}.hcl"));
    std::fs::write(&file, rules).unwrap();
    stdout(&cli(
        agent,
        Some(root),
        &["acl", "policy", "apply", name, file.to_str().unwrap()],
    ));
}

fn listed_accessors(agent: &Agent, root: &str) -> Vec<String> {
    let (status, body) = call("GET", &agent.url("/v1/acl/tokens"), Some(root), None);
    assert_eq!(status, 200, "{body}");
    json_of(&body)
        .as_array()
        .unwrap()
        .iter()
        .map(|token| token["AccessorID"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn an_expired_token_is_listed_until_a_gc_removes_it_and_ttls_keep_the_configured_bounds() {
    let temp = tempfile::tempdir().unwrap();
    let (agent, root) = acl_agent(
        temp.path(),
        "  token_min_expiration_ttl = \"1s\"\n  token_max_expiration_ttl = \"2h\"\n",
        "  acl_token_gc_threshold = \"1s\"\n",
    );
    apply_policy(
        &agent,
        &root,
        temp.path(),
        "readonly",
        "namespace \"default\" {\n  policy = \"read\"\n}\n",
    );
    let create = |name: &str, ttl: Option<&str>| {
        let mut args = vec![
            "acl",
            "token",
            "create",
            "-policy=readonly",
            "-t",
            "{{.AccessorID}} {{.SecretID}}",
        ];
        let name_flag = format!("-name={name}");
        args.push(&name_flag);
        let ttl_flag = ttl.map(|ttl| format!("-ttl={ttl}"));
        args.extend(ttl_flag.as_deref());
        let out = stdout(&cli(&agent, Some(&root), &args));
        let (accessor, secret) = out.trim().split_once(' ').unwrap();
        (accessor.to_owned(), secret.to_owned())
    };

    // The configured bounds, not Nomad's default 1m and 24h, decide.
    for (ttl, says) in [
        (
            "500ms",
            "expiration time cannot be less than 1s in the future (was 500ms)",
        ),
        (
            "3h",
            "expiration time cannot be more than 2h0m0s in the future (was 3h0m0s)",
        ),
    ] {
        let refused = cli(
            &agent,
            Some(&root),
            &["acl", "token", "create", "-policy=readonly", "-ttl", ttl],
        );
        assert!(!refused.status.success());
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(stderr.contains(says), "{ttl}: {stderr}");
    }

    let (short, short_secret) = create("short", Some("2s"));
    let (day, _) = create("hour", Some("1h"));
    let (forever, _) = create("forever", None);

    // Once expired the token is refused, and still listed: nothing but the GC removes it.
    wait_for("the 2s token to expire", Duration::from_secs(30), || {
        let answer = call(
            "GET",
            &agent.url("/v1/acl/token/self"),
            Some(&short_secret),
            None,
        );
        (answer == (403, "ACL token expired".to_owned())).then_some(())
    });
    assert!(listed_accessors(&agent, &root).contains(&short));

    // A forced GC (`nomad system gc`) takes every expired token; the others stay.
    let (status, body) = call("PUT", &agent.url("/v1/system/gc"), Some(&root), None);
    assert_eq!(status, 200, "{body}");
    let listed = listed_accessors(&agent, &root);
    assert!(!listed.contains(&short), "{listed:?}");
    assert!(
        listed.contains(&day) && listed.contains(&forever),
        "{listed:?}"
    );
    assert_eq!(
        call(
            "GET",
            &agent.url(&format!("/v1/acl/token/{short}")),
            Some(&root),
            None
        ),
        (404, "ACL token not found".to_owned())
    );
    assert_eq!(
        call(
            "GET",
            &agent.url("/v1/acl/token/self"),
            Some(&short_secret),
            None
        ),
        (403, "ACL token not found".to_owned())
    );
}

#[test]
fn acl_commands_format_with_json_and_go_templates_as_nomad() {
    let temp = tempfile::tempdir().unwrap();
    let (agent, root_secret) = acl_agent(temp.path(), "", "");
    apply_policy(
        &agent,
        &root_secret,
        temp.path(),
        "readonly",
        "namespace \"default\" {\n  policy = \"read\"\n}\n",
    );
    apply_policy(
        &agent,
        &root_secret,
        temp.path(),
        "ops",
        "node {\n  policy = \"read\"\n}\n",
    );
    let root = Some(root_secret.as_str());
    let ok = |token: Option<&str>, args: &[&str]| stdout(&cli(&agent, token, args));

    assert_eq!(
        ok(
            root,
            &[
                "acl",
                "policy",
                "list",
                "-t",
                "{{range .}}{{.Name}} {{end}}"
            ]
        ),
        "ops readonly \n"
    );
    assert_eq!(
        ok(
            root,
            &[
                "acl",
                "role",
                "create",
                "-name=operators",
                "-policy=ops",
                "-t",
                "{{.Name}}"
            ]
        ),
        "operators\n"
    );
    assert_eq!(
        ok(
            root,
            &["acl", "role", "list", "-t", "{{range .}}{{.Name}}{{end}}"]
        ),
        "operators\n"
    );
    assert_eq!(
        ok(
            root,
            &[
                "acl",
                "role",
                "info",
                "-by-name",
                "-t",
                "{{range .Policies}}{{.Name}}{{end}}",
                "operators"
            ]
        ),
        "ops\n"
    );
    let reader = ok(
        root,
        &[
            "acl",
            "token",
            "create",
            "-name=reader",
            "-policy=readonly",
            "-role-name=operators",
            "-t",
            "{{.Name}} {{.Type}} {{.SecretID}}",
        ],
    );
    let fields: Vec<&str> = reader.split_whitespace().collect();
    assert_eq!(fields[..2], ["reader", "client"], "{reader}");
    let reader_secret = fields[2];
    assert_eq!(
        ok(
            root,
            &["acl", "token", "list", "-t", "{{range .}}{{.Name}},{{end}}"]
        ),
        "Bootstrap Token,reader,\n"
    );
    assert_eq!(
        ok(
            Some(reader_secret),
            &[
                "acl",
                "policy",
                "self",
                "-t",
                "{{range .}}{{.Name}} {{end}}"
            ]
        ),
        "ops readonly \n"
    );

    // `-json` is Nomad's: indented by four spaces.
    let listed = ok(root, &["acl", "token", "list", "-json"]);
    assert!(listed.starts_with("[\n    {\n        \""), "{listed}");
    assert_eq!(json_of(&listed).as_array().unwrap().len(), 2);

    // A template that does not parse, and both flags at once, are Nomad's errors.
    let bad = cli(&agent, root, &["acl", "token", "list", "-t", "{{.Name"]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(bad.stdout.is_empty());
    assert_eq!(
        String::from_utf8_lossy(&bad.stderr),
        "Error formatting the data: template: :1: unclosed action\n"
    );
    let both = cli(
        &agent,
        root,
        &["acl", "policy", "list", "-json", "-t", "{{.}}"],
    );
    assert_eq!(both.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&both.stderr),
        "Both json and template formatting are not allowed\n"
    );
}

/// Policies, tokens and roles each have their own index, as Nomad's tables: after the
/// bootstrap (a token) the policies list answers index 1, Nomad's floor for a table never
/// written, not the bootstrap's; a policy's write moves it, a token's does not.
#[test]
fn the_acl_policies_list_answers_the_policies_tables_own_index() {
    let temp = tempfile::tempdir().unwrap();
    let (agent, root) = acl_agent(temp.path(), "", "");
    let (status, index, body) = get_indexed(&agent.url("/v1/acl/policies"), Some(&root));
    assert_eq!((status, index, body.as_str()), (200, 1, "[]"));
    let (_, tokens_index, _) = get_indexed(&agent.url("/v1/acl/tokens"), Some(&root));
    assert!(tokens_index > 1, "the bootstrap wrote the tokens table");

    apply_policy(
        &agent,
        &root,
        temp.path(),
        "readonly",
        "namespace \"default\" {\n  policy = \"read\"\n}\n",
    );
    let (_, policies_index, body) = get_indexed(&agent.url("/v1/acl/policies"), Some(&root));
    assert!(policies_index > tokens_index, "{policies_index}: {body}");
    let (status, created) = call(
        "POST",
        &agent.url("/v1/acl/token"),
        Some(&root),
        Some(r#"{"Type": "client", "Policies": ["readonly"]}"#),
    );
    assert_eq!(status, 200, "{created}");
    let (_, after_token, _) = get_indexed(&agent.url("/v1/acl/policies"), Some(&root));
    assert_eq!(
        after_token, policies_index,
        "a token's write moved the policies index"
    );
    let (_, tokens_after, _) = get_indexed(&agent.url("/v1/acl/tokens"), Some(&root));
    assert!(tokens_after > policies_index);
    let (_, roles_index, _) = get_indexed(&agent.url("/v1/acl/roles"), Some(&root));
    assert_eq!(roles_index, 1, "no role was ever written");
}

/// `/v1/agent/pprof` with ACLs on wants agent:write, as Nomad's `Agent.Profile`: no token or
/// a token without it is 403, management gets the profile.
#[test]
fn agent_pprof_with_acls_wants_agent_write() {
    let temp = tempfile::tempdir().unwrap();
    let (agent, root) = acl_agent(temp.path(), "", "");
    // The text form: `call` reads its answer as text.
    let url = agent.url("/v1/agent/pprof/heap?debug=1");
    assert_eq!(call("GET", &url, None, None).0, 403);
    apply_policy(
        &agent,
        &root,
        temp.path(),
        "agent-read",
        "agent {\n  policy = \"read\"\n}\n",
    );
    let (status, created) = call(
        "POST",
        &agent.url("/v1/acl/token"),
        Some(&root),
        Some(r#"{"Type": "client", "Policies": ["agent-read"]}"#),
    );
    assert_eq!(status, 200, "{created}");
    let reader = json_of(&created)["SecretID"].as_str().unwrap().to_owned();
    assert_eq!(call("GET", &url, Some(&reader), None).0, 403);
    assert_eq!(call("GET", &url, Some(&root), None).0, 200);
}

/// A write that must succeed, as the management token: its answer as JSON (`null` when empty).
fn write_ok(agent: &Agent, root: &str, method: &str, path: &str, body: &Value) -> Value {
    let (status, answer) = call(
        method,
        &agent.url(path),
        Some(root),
        Some(&body.to_string()),
    );
    assert_eq!(status, 200, "{method} {path}: {answer}");
    if answer.trim().is_empty() {
        Value::Null
    } else {
        json_of(&answer)
    }
}

/// Something new each call, so a rewrite always changes the object.
fn fresh() -> String {
    format!(
        "{:?}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
    )
}

/// Nomad's `Get…` index semantics for one object, read at `read` as the management token: the
/// answer's index is the object's own ModifyIndex, which a write of another object of its table
/// (`write_other`) leaves where it was; `absent` (an object that does not exist) is a 404 with
/// the table's index, the one `list` answers; and a blocking query on the object's index is not
/// answered by `write_other` but by `write_self`, with the object's new ModifyIndex.
fn assert_own_index_and_blocking(
    agent: &Agent,
    root: &str,
    read: &str,
    absent: &str,
    list: &str,
    write_self: &dyn Fn(),
    write_other: &dyn Fn(),
) {
    let (status, index, body) = get_indexed(&agent.url(read), Some(root));
    assert_eq!(status, 200, "{read}: {body}");
    assert_eq!(
        json_of(&body)["ModifyIndex"],
        json!(index),
        "{read}: {body}"
    );
    write_other();
    let (_, again, _) = get_indexed(&agent.url(read), Some(root));
    assert_eq!(
        again, index,
        "{read}: another object's write moved the index"
    );
    let (status, absent_index, body) = get_indexed(&agent.url(absent), Some(root));
    assert_eq!(status, 404, "{absent}: {body}");
    let (_, table_index, _) = get_indexed(&agent.url(list), Some(root));
    assert_eq!(absent_index, table_index, "{absent}: not the table's index");
    assert!(absent_index > index, "{absent}: {absent_index} <= {index}");

    let separator = if read.contains('?') { '&' } else { '?' };
    let url = agent.url(&format!("{read}{separator}index={index}&wait=60s"));
    let (status, new_index, body) =
        answered_only_by_its_own_write(&url, root, read, write_other, write_self);
    assert_eq!(status, 200, "{read}: {body}");
    assert!(new_index > index, "{read}: {new_index} <= {index}");
    assert_eq!(
        json_of(&body)["ModifyIndex"],
        json!(new_index),
        "{read}: {body}"
    );
}

/// A job whose group declares a scaling policy (its `Max` given) and is never placed.
fn scaled_job(job_id: &str, max: u64) -> Value {
    let mut job = json_of(&unplaceable_job(job_id));
    job["Job"]["TaskGroups"][0]["Scaling"] = json!({"Min": 1, "Max": max, "Enabled": true});
    job
}

/// Single-object reads of the ACL endpoints, namespaces, node pools and scaling policies
/// answer the object's own ModifyIndex (the table's while it is absent, on the 404 too) and a
/// blocking query on one is answered by its own write, never by another object's, as Nomad's
/// `GetPolicy`, `GetToken`, `GetRoleByID`/`ByName`, `GetAuthMethod`, `GetBindingRule`,
/// `GetNamespace`, `GetNodePool` and `Scaling.GetPolicy`. They answered the table's index (or
/// did not block at all, or woke on any write of the table); auth methods and binding rules
/// answered the index of every ACL write.
#[test]
fn single_object_reads_answer_their_own_modify_index_and_block_on_it_alone() {
    let temp = tempfile::tempdir().unwrap();
    let (agent, root) = acl_agent(temp.path(), "", "");
    let (agent, root) = (&agent, root.as_str());
    let rules = "namespace \"default\" {\n  policy = \"read\"\n}\n";
    let policy = |name: &str| {
        let body = json!({"Name": name, "Description": fresh(), "Rules": rules});
        write_ok(agent, root, "PUT", &format!("/v1/acl/policy/{name}"), &body);
    };
    policy("first");
    policy("second");
    assert_own_index_and_blocking(
        agent,
        root,
        "/v1/acl/policy/first",
        "/v1/acl/policy/absent",
        "/v1/acl/policies",
        &|| policy("first"),
        &|| policy("second"),
    );

    let token = |name: &str| {
        let body = json!({"Name": name, "Type": "client", "Policies": ["first"]});
        write_ok(agent, root, "POST", "/v1/acl/token", &body)["AccessorID"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let first_token = token("first");
    let rename_token = |accessor: &str| {
        let body = json!({
            "AccessorID": accessor, "Name": fresh(), "Type": "client", "Policies": ["first"]
        });
        write_ok(
            agent,
            root,
            "POST",
            &format!("/v1/acl/token/{accessor}"),
            &body,
        );
    };
    let second_token = token("second");
    assert_own_index_and_blocking(
        agent,
        root,
        &format!("/v1/acl/token/{first_token}"),
        "/v1/acl/token/00000000-0000-0000-0000-000000000000",
        "/v1/acl/tokens",
        &|| rename_token(&first_token),
        &|| rename_token(&second_token),
    );

    let role = |name: &str| {
        let body = json!({"Name": name, "Policies": [{"Name": "first"}]});
        write_ok(agent, root, "POST", "/v1/acl/role", &body)["ID"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let (first_role, second_role) = (role("first-role"), role("second-role"));
    let describe_role = |id: &str, name: &str| {
        let body = json!({
            "ID": id, "Name": name, "Description": fresh(), "Policies": [{"Name": "first"}]
        });
        write_ok(agent, root, "POST", &format!("/v1/acl/role/{id}"), &body);
    };
    for (read, absent) in [
        (
            format!("/v1/acl/role/{first_role}"),
            "/v1/acl/role/00000000-0000-0000-0000-000000000000",
        ),
        (
            "/v1/acl/role/name/first-role".to_owned(),
            "/v1/acl/role/name/absent",
        ),
    ] {
        assert_own_index_and_blocking(
            agent,
            root,
            &read,
            absent,
            "/v1/acl/roles",
            &|| describe_role(&first_role, "first-role"),
            &|| describe_role(&second_role, "second-role"),
        );
    }

    let method = |name: &str| {
        let body = json!({
            "Name": name, "Type": "JWT", "TokenLocality": "local", "MaxTokenTTL": "1h",
            "Config": {
                "JWKSURL": "http://127.0.0.1:1/jwks", "BoundAudiences": [fresh()],
            },
        });
        write_ok(
            agent,
            root,
            "PUT",
            &format!("/v1/acl/auth-method/{name}"),
            &body,
        );
    };
    method("first-method");
    method("second-method");
    assert_own_index_and_blocking(
        agent,
        root,
        "/v1/acl/auth-method/first-method",
        "/v1/acl/auth-method/absent",
        "/v1/acl/auth-methods",
        &|| method("first-method"),
        &|| method("second-method"),
    );

    let rule = || {
        let body = json!({"AuthMethod": "first-method", "BindType": "management"});
        write_ok(agent, root, "PUT", "/v1/acl/binding-rule", &body)["ID"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let (first_rule, second_rule) = (rule(), rule());
    let describe_rule = |id: &str| {
        let body = json!({
            "ID": id, "AuthMethod": "first-method", "BindType": "management",
            "Description": fresh(),
        });
        write_ok(
            agent,
            root,
            "PUT",
            &format!("/v1/acl/binding-rule/{id}"),
            &body,
        );
    };
    assert_own_index_and_blocking(
        agent,
        root,
        &format!("/v1/acl/binding-rule/{first_rule}"),
        "/v1/acl/binding-rule/00000000-0000-0000-0000-000000000000",
        "/v1/acl/binding-rules",
        &|| describe_rule(&first_rule),
        &|| describe_rule(&second_rule),
    );
    // Auth methods and binding rules each have their own table's index (Nomad's
    // `acl_auth_methods`, `acl_binding_rules`): another ACL write moves neither.
    let index_of = |path: &str| get_indexed(&agent.url(path), Some(root)).1;
    let (methods_index, rules_index) = (
        index_of("/v1/acl/auth-methods"),
        index_of("/v1/acl/binding-rules"),
    );
    assert!(methods_index < rules_index);
    policy("second");
    assert_eq!(index_of("/v1/acl/auth-methods"), methods_index);
    assert_eq!(index_of("/v1/acl/binding-rules"), rules_index);

    let namespace = |name: &str| {
        let body = json!({"Name": name, "Description": fresh()});
        write_ok(agent, root, "PUT", &format!("/v1/namespace/{name}"), &body);
    };
    namespace("first-ns");
    namespace("second-ns");
    assert_own_index_and_blocking(
        agent,
        root,
        "/v1/namespace/first-ns",
        "/v1/namespace/absent",
        "/v1/namespaces",
        &|| namespace("first-ns"),
        &|| namespace("second-ns"),
    );

    let pool = |name: &str| {
        let body = json!({"Name": name, "Description": fresh()});
        write_ok(agent, root, "PUT", "/v1/node/pools", &body);
    };
    pool("first-pool");
    pool("second-pool");
    assert_own_index_and_blocking(
        agent,
        root,
        "/v1/node/pool/first-pool",
        "/v1/node/pool/absent",
        "/v1/node/pools",
        &|| pool("first-pool"),
        &|| pool("second-pool"),
    );

    let max = std::sync::atomic::AtomicU64::new(3);
    let scaled = |job_id: &str| {
        let body = scaled_job(
            job_id,
            max.fetch_add(1, std::sync::atomic::Ordering::SeqCst),
        );
        write_ok(agent, root, "PUT", "/v1/jobs", &body);
    };
    scaled("first-scaled");
    scaled("second-scaled");
    let (status, listed) = call(
        "GET",
        &agent.url("/v1/scaling/policies?job=first-scaled"),
        Some(root),
        None,
    );
    assert_eq!(status, 200, "{listed}");
    let policy_id = json_of(&listed)[0]["ID"].as_str().unwrap().to_owned();
    assert_own_index_and_blocking(
        agent,
        root,
        &format!("/v1/scaling/policy/{policy_id}"),
        "/v1/scaling/policy/absent",
        "/v1/scaling/policies",
        &|| scaled("first-scaled"),
        &|| scaled("second-scaled"),
    );
}

/// An open `/v1/event/stream` of the `Variable` topic, read line by line.
struct VariableEvents {
    reader: std::io::BufReader<std::net::TcpStream>,
}

impl VariableEvents {
    /// Opens the stream as `token` in `namespace` and waits for its first heartbeat, so the
    /// subscription exists before the caller writes.
    fn open(agent: &Agent, token: &str, namespace: &str) -> Self {
        use std::io::{BufRead, Write};
        let address = agent.address.trim_start_matches("http://").to_owned();
        let mut stream = std::net::TcpStream::connect(&address).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        write!(
            stream,
            "GET /v1/event/stream?topic=Variable&namespace={namespace} HTTP/1.1\r\nHost: {address}\r\nX-Nomad-Token: {token}\r\n\r\n"
        )
        .unwrap();
        let mut reader = std::io::BufReader::new(stream);
        let mut status = String::new();
        reader.read_line(&mut status).unwrap();
        assert!(status.contains(" 200 "), "{status}");
        let mut line = String::new();
        while line.trim() != "{}" {
            line.clear();
            assert!(reader.read_line(&mut line).unwrap() > 0, "the stream ended");
        }
        Self { reader }
    }

    /// The (namespace, path) of each variable event received, up to `last`'s.
    fn until(&mut self, last: (&str, &str)) -> Vec<(String, String)> {
        use std::io::BufRead;
        let mut seen = Vec::new();
        let mut line = String::new();
        loop {
            line.clear();
            let read = self
                .reader
                .read_line(&mut line)
                .unwrap_or_else(|error| panic!("no event of {last:?} ({error}); saw {seen:?}"));
            assert!(read > 0, "the stream ended; saw {seen:?}");
            let Ok(batch) = serde_json::from_str::<Value>(line.trim()) else {
                continue; // a chunk's size line
            };
            for event in batch["Events"].as_array().into_iter().flatten() {
                assert_eq!(event["Topic"], "Variable", "{event}");
                seen.push((
                    event["Namespace"].as_str().unwrap().to_owned(),
                    event["Key"].as_str().unwrap().to_owned(),
                ));
            }
            if seen
                .last()
                .is_some_and(|(namespace, path)| (namespace.as_str(), path.as_str()) == last)
            {
                return seen;
            }
        }
    }
}

fn put_variable(agent: &Agent, root: &str, namespace: &str, path: &str) {
    let body = json!({"Namespace": namespace, "Path": path, "Items": {"value": fresh()}});
    write_ok(
        agent,
        root,
        "PUT",
        &format!("/v1/var/{path}?namespace={namespace}"),
        &body,
    );
}

/// The `Variable` topic of the event stream with a token whose policy reads `a/*` in the
/// default namespace: only the events of variables under `a/` in that namespace reach it
/// (Nomad's subscription filter: `list` on each event's namespace and path), none of another
/// path or namespace, and it may not stream `namespace=*`; a change of its policy applies to
/// the events that follow; management receives every one.
#[test]
fn a_variable_event_reaches_a_token_only_where_its_policy_reads_the_path() {
    let temp = tempfile::tempdir().unwrap();
    let (agent, root) = acl_agent(temp.path(), "", "");
    let rules = |paths: &[&str]| {
        let mut rules = "namespace \"default\" {\n  variables {\n".to_owned();
        for path in paths {
            rules.push_str(&format!(
                "    path \"{path}\" {{\n      capabilities = [\"read\"]\n    }}\n"
            ));
        }
        rules + "  }\n}\n"
    };
    apply_policy(&agent, &root, temp.path(), "vars-a", &rules(&["a/*"]));
    let body = json!({"Name": "other"});
    write_ok(&agent, &root, "PUT", "/v1/namespace/other", &body);
    let body = json!({"Type": "client", "Policies": ["vars-a"]});
    let created = write_ok(&agent, &root, "POST", "/v1/acl/token", &body);
    let token = created["SecretID"].as_str().unwrap().to_owned();

    // `namespace=*` is every namespace there is, each checked as Nomad's `validateACL`: the
    // token has no variables rule in `other`.
    let every = agent.url("/v1/event/stream?topic=Variable&namespace=*");
    assert_eq!(call("GET", &every, Some(&token), None).0, 403);
    let mut reader = VariableEvents::open(&agent, &token, "default");
    let mut manager = VariableEvents::open(&agent, &root, "*");
    put_variable(&agent, &root, "default", "b/secret");
    put_variable(&agent, &root, "other", "a/elsewhere");
    put_variable(&agent, &root, "default", "a/one");
    put_variable(&agent, &root, "default", "a/last");
    let pairs = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(namespace, path)| ((*namespace).to_owned(), (*path).to_owned()))
            .collect()
    };
    assert_eq!(
        manager.until(("default", "a/last")),
        pairs(&[
            ("default", "b/secret"),
            ("other", "a/elsewhere"),
            ("default", "a/one"),
            ("default", "a/last"),
        ])
    );
    assert_eq!(
        reader.until(("default", "a/last")),
        pairs(&[("default", "a/one"), ("default", "a/last")])
    );

    // The policy now reads `b/*` too: the events that follow show it.
    apply_policy(
        &agent,
        &root,
        temp.path(),
        "vars-a",
        &rules(&["a/*", "b/*"]),
    );
    put_variable(&agent, &root, "default", "b/after");
    put_variable(&agent, &root, "default", "c/never");
    put_variable(&agent, &root, "default", "a/final");
    assert_eq!(
        reader.until(("default", "a/final")),
        pairs(&[("default", "b/after"), ("default", "a/final")])
    );
}

/// A blocking query on `list` from the index it answers: `write_other` (a write of another
/// table) does not answer it, `write_own` does, with a higher index.
fn assert_list_blocks_on_its_table(
    agent: &Agent,
    root: &str,
    list: &str,
    write_own: &dyn Fn(),
    write_other: &dyn Fn(),
) {
    let (status, index, body) = get_indexed(&agent.url(list), Some(root));
    assert_eq!(status, 200, "{list}: {body}");
    let url = agent.url(&format!("{list}?index={index}&wait=60s"));
    let (status, new_index, body) =
        answered_only_by_its_own_write(&url, root, list, write_other, write_own);
    assert_eq!(status, 200, "{list}: {body}");
    assert!(new_index > index, "{list}: {new_index} <= {index}");
}

/// The ACL lists are blocking queries on their own tables, as Nomad's `List…` endpoints:
/// `?index=` was accepted and ignored (they answered at once).
#[test]
fn the_acl_lists_are_blocking_queries_on_their_own_tables() {
    let temp = tempfile::tempdir().unwrap();
    let (agent, root) = acl_agent(temp.path(), "", "");
    let (agent, root) = (&agent, root.as_str());
    let policy = || {
        let rules = "namespace \"default\" {\n  policy = \"read\"\n}\n";
        let body = json!({"Name": "reader", "Description": fresh(), "Rules": rules});
        write_ok(agent, root, "PUT", "/v1/acl/policy/reader", &body);
    };
    policy();
    let token = || {
        let body = json!({"Type": "client", "Policies": ["reader"]});
        write_ok(agent, root, "POST", "/v1/acl/token", &body);
    };
    let role = || {
        let body =
            json!({"Name": format!("role-{}", uuid_like()), "Policies": [{"Name": "reader"}]});
        write_ok(agent, root, "POST", "/v1/acl/role", &body);
    };
    let method = || {
        let body = json!({
            "Name": "method", "Type": "JWT", "TokenLocality": "local", "MaxTokenTTL": "1h",
            "Config": {"JWKSURL": "http://127.0.0.1:1/jwks", "BoundAudiences": [fresh()]},
        });
        write_ok(agent, root, "PUT", "/v1/acl/auth-method/method", &body);
    };
    method();
    let rule = || {
        let body = json!({"AuthMethod": "method", "BindType": "management"});
        write_ok(agent, root, "PUT", "/v1/acl/binding-rule", &body);
    };
    assert_list_blocks_on_its_table(agent, root, "/v1/acl/policies", &policy, &token);
    assert_list_blocks_on_its_table(agent, root, "/v1/acl/tokens", &token, &policy);
    assert_list_blocks_on_its_table(agent, root, "/v1/acl/roles", &role, &policy);
    assert_list_blocks_on_its_table(agent, root, "/v1/acl/auth-methods", &method, &rule);
    assert_list_blocks_on_its_table(agent, root, "/v1/acl/binding-rules", &rule, &method);
}

/// A name no other call of this test run gives.
fn uuid_like() -> String {
    fresh()
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect()
}

/// Sends the blocking query `url` (named `what`) and checks that `write_other` does not
/// answer it and `write_own` does; returns the answer.
fn answered_only_by_its_own_write(
    url: &str,
    root: &str,
    what: &str,
    write_other: &dyn Fn(),
    write_own: &dyn Fn(),
) -> (u16, u64, String) {
    let url = url.to_owned();
    let token = root.to_owned();
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = sender.send(get_indexed(&url, Some(&token)));
    });
    std::thread::sleep(Duration::from_millis(300));
    write_other();
    assert!(
        receiver.recv_timeout(Duration::from_secs(2)).is_err(),
        "{what}: another write answered the blocking query"
    );
    write_own();
    receiver
        .recv_timeout(Duration::from_secs(30))
        .unwrap_or_else(|_| panic!("{what}: its own write did not answer"))
}
