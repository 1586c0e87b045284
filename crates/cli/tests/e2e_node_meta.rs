//! End to end through real agents: dynamic node metadata (Nomad 1.5+). A job constrained on
//! `${meta.rack}` waits until `drover node meta apply rack=r1` gives the node that key, then
//! runs there; `-unset` removes a static key; `node meta read` and `GET /v1/client/metadata`
//! answer the merged, dynamic and static metadata, which a restarted agent keeps and registers
//! again. With a server and two client-only agents, a request naming a node (`?node_id=`, or
//! an apply's `NodeID`) reaches that node through whichever agent was asked.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::{Agent, agent_config, http, server_and_two_clients, wait_for, write_jobspec};

const LIMIT: Duration = Duration::from_secs(60);

const RACKED: &str = r#"
job "racked" {
  group "g" {
    constraint {
      attribute = "${meta.rack}"
      value     = "r1"
    }
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "sleep 300"]
      }
      resources {
        cpu    = 20
        memory = 16
      }
    }
  }
}
"#;

/// The agent's node, once its client has registered (the agent prints its address first).
fn node_id(agent: &Agent) -> String {
    wait_for("the node to register", Duration::from_secs(30), || {
        let nodes = agent.get_json("/v1/nodes");
        nodes[0]["ID"].as_str().map(str::to_owned)
    })
}

fn running(agent: &Agent, job: &str) -> usize {
    agent
        .get_json(&format!("/v1/job/{job}/allocations"))
        .as_array()
        .unwrap()
        .iter()
        .filter(|allocation| allocation["ClientStatus"] == "running")
        .count()
}

fn post(agent: &Agent, path: &str, body: &Value) -> (u16, String) {
    http("POST", &agent.url(path), Some(&body.to_string()))
}

#[test]
fn applied_metadata_is_scheduled_on_and_survives_a_restart() {
    let temp = tempfile::tempdir().unwrap();
    let data_dir = temp.path().join("data");
    let config = agent_config(
        temp.path(),
        "client.hcl",
        "client {\n  meta {\n    tier = \"web\"\n  }\n}\n",
    );
    let config_flag = format!("-config={config}");
    let mut agent = Agent::start_with(&data_dir, &[&config_flag]);
    let node = node_id(&agent);

    // No node has `rack`: the job's evaluation is blocked, nothing runs.
    let (_dir, jobspec) = write_jobspec("racked.hcl", RACKED);
    agent.cli_ok(&["job", "run", "-detach", jobspec.to_str().unwrap()]);
    wait_for("a blocked evaluation", LIMIT, || {
        let evaluations = agent.get_json("/v1/job/racked/evaluations");
        evaluations
            .as_array()
            .unwrap()
            .iter()
            .any(|evaluation| evaluation["Status"] == "blocked")
            .then_some(())
    });
    assert_eq!(running(&agent, "racked"), 0);

    // Applying the key (and unsetting the static `tier`) re-registers the node; the job runs.
    agent.cli_ok(&["node", "meta", "apply", "-unset", "tier", "rack=r1"]);
    wait_for("the racked job to run", LIMIT, || {
        (running(&agent, "racked") == 1).then_some(())
    });
    let registered = agent.get_json(&format!("/v1/node/{node}"));
    assert_eq!(registered["Meta"], json!({"rack": "r1"}));

    let expected = json!({
        "Meta": {"rack": "r1"},
        "Dynamic": {"rack": "r1", "tier": null},
        "Static": {"tier": "web"},
    });
    assert_eq!(agent.get_json("/v1/client/metadata"), expected);
    let read = agent.cli_ok(&["node", "meta", "read"]);
    assert_eq!(
        read,
        "All Meta\nrack = r1\n\nDynamic Meta\nrack = r1\ntier = <unset>\n\nStatic Meta\ntier = web\n"
    );
    let read = agent.cli_ok(&["node", "meta", "read", "-node-id", &node[..8], "-json"]);
    assert_eq!(serde_json::from_str::<Value>(&read).unwrap(), expected);

    // Nomad's refusals.
    for (body, message) in [
        (json!({}), "missing required Meta object"),
        (
            json!({"Meta": {"9lives": "x"}}),
            "\"9lives\" is invalid; metadata keys must be valid dotted hcl identifiers",
        ),
        (
            json!({"Meta": {"": "x"}}),
            "metadata keys must not be empty",
        ),
    ] {
        assert_eq!(
            post(&agent, "/v1/client/metadata", &body),
            (400, message.to_owned())
        );
    }
    assert_eq!(
        http("PUT", &agent.url("/v1/client/metadata"), Some("{}")),
        (405, "Invalid method".to_owned())
    );
    let output = agent.cli(&["node", "meta", "apply"]);
    assert!(!output.status.success());
    assert_eq!(
        String::from_utf8_lossy(&output.stderr),
        "Must specify -unset or at least 1 key=value pair\n"
    );

    // A restarted agent keeps what was applied and registers it again.
    agent.terminate();
    let agent = Agent::start_with(&data_dir, &[&config_flag]);
    assert_eq!(agent.get_json("/v1/client/metadata"), expected);
    wait_for("the node to register its metadata again", LIMIT, || {
        let registered = agent.get_json(&format!("/v1/node/{node}"));
        (registered["Status"] == "ready" && registered["Meta"] == json!({"rack": "r1"}))
            .then_some(())
    });

    // Unsetting a key that is only dynamic forgets it.
    let (status, body) = post(
        &agent,
        "/v1/client/metadata",
        &json!({"Meta": {"rack": null, "tier": "api"}}),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap(),
        json!({"Meta": {"tier": "api"}, "Dynamic": {"tier": "api"}, "Static": {"tier": "web"}})
    );
    wait_for("the node's Meta to follow", LIMIT, || {
        (agent.get_json(&format!("/v1/node/{node}"))["Meta"] == json!({"tier": "api"}))
            .then_some(())
    });
    agent.cli_ok(&["job", "stop", "-purge", "-detach", "racked"]);
}

#[test]
fn a_request_naming_a_node_reaches_it_through_any_agent() {
    let temp = tempfile::tempdir().unwrap();
    let (server, clients, node_a, node_b) = server_and_two_clients(temp.path(), LIMIT);
    let (client_a, client_b) = (&clients[0], &clients[1]);

    // Through the server, to node b, naming it in the body.
    let (status, body) = post(
        &server,
        "/v1/client/metadata",
        &json!({"NodeID": node_b, "Meta": {"rack": "rb"}}),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        client_b.get_json("/v1/client/metadata")["Dynamic"],
        json!({"rack": "rb"})
    );
    // Through client a, to node b, naming it in the query: client a → its server → node b.
    let read = client_a.get_json(&format!("/v1/client/metadata?node_id={node_b}"));
    assert_eq!(read["Meta"], json!({"rack": "rb"}));
    let (status, body) = post(
        client_a,
        &format!("/v1/client/metadata?node_id={node_b}"),
        &json!({"NodeID": node_a, "Meta": {"zone": "z2"}}),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        client_b.get_json("/v1/client/metadata")["Meta"],
        json!({"rack": "rb", "zone": "z2"})
    );
    // Node a's own, through the server and through itself; it was never touched.
    assert_eq!(
        server.get_json(&format!("/v1/client/metadata?node_id={node_a}"))["Meta"],
        json!({})
    );
    let (status, body) = post(
        client_a,
        "/v1/client/metadata",
        &json!({"Meta": {"own": "1"}}),
    );
    assert_eq!(status, 200, "{body}");
    wait_for("node a's Meta on the server", LIMIT, || {
        (server.get_json(&format!("/v1/node/{node_a}"))["Meta"] == json!({"own": "1"}))
            .then_some(())
    });
    wait_for("node b's Meta on the server", LIMIT, || {
        (server.get_json(&format!("/v1/node/{node_b}"))["Meta"]
            == json!({"rack": "rb", "zone": "z2"}))
        .then_some(())
    });

    // A server without a client needs a node; an unknown node is Nomad's error.
    assert_eq!(
        http("GET", &server.url("/v1/client/metadata"), None),
        (400, "No local Node and node_id not provided".to_owned())
    );
    assert_eq!(
        http(
            "GET",
            &server.url("/v1/client/metadata?node_id=00000000-0000-0000-0000-000000000000"),
            None
        ),
        (
            404,
            "Unknown node 00000000-0000-0000-0000-000000000000".to_owned()
        )
    );
}
