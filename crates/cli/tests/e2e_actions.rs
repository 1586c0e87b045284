//! End to end: a task's `action` blocks run through `drover job action` and the
//! `/v1/job/<id>/action` websocket against the real agent (the command runs in the task as
//! `alloc exec` runs it), `/v1/job/<id>/actions` lists them, and with ACLs on the
//! `alloc-exec` capability decides who may run one.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod support;

use std::time::Duration;

use serde_json::json;
use support::{
    Agent, drover_bin, exec_websocket_close, exec_websocket_outcome, http_as, percent_encode,
    wait_for, write_jobspec,
};

const LIMIT: Duration = Duration::from_secs(60);

fn job_with_actions(job_id: &str) -> String {
    format!(
        r#"
job "{job_id}" {{
  datacenters = ["dc1"]

  group "app" {{
    task "server" {{
      driver = "raw_exec"

      config {{
        command = "/bin/sleep"
        args    = ["3600"]
      }}

      action "hello" {{
        command = "/bin/sh"
        args    = ["-c", "echo action in $NOMAD_TASK_NAME of $NOMAD_ALLOC_ID; exit 3"]
      }}

      action "cgroup" {{
        command = "/bin/cat"
        args    = ["/proc/self/cgroup"]
      }}

      resources {{
        cpu    = 50
        memory = 64
      }}
    }}
  }}
}}
"#
    )
}

/// Runs the job and answers its running allocation's ID.
fn run_job(agent: &Agent, token: Option<&str>, job_id: &str) -> String {
    let (_dir, path) = write_jobspec("actions.hcl", &job_with_actions(job_id));
    let ran = cli(
        agent,
        token,
        &["job", "run", "-detach", &path.to_string_lossy()],
    );
    assert!(ran.status.success(), "{ran:?}");
    wait_for("a running allocation", LIMIT, || {
        let (_, body) = http_as(
            "GET",
            &agent.url(&format!("/v1/job/{job_id}/allocations")),
            token,
            None,
        );
        let allocs: serde_json::Value = serde_json::from_str(&body).ok()?;
        allocs.as_array()?.iter().find_map(|alloc| {
            (alloc["ClientStatus"] == "running")
                .then(|| alloc["ID"].as_str().map(str::to_string))
                .flatten()
        })
    })
}

fn cli(agent: &Agent, token: Option<&str>, args: &[&str]) -> std::process::Output {
    let mut command = std::process::Command::new(drover_bin());
    command
        .args(args)
        .env("NOMAD_ADDR", &agent.address)
        .env_remove("NOMAD_TOKEN")
        .stdin(std::process::Stdio::null());
    if let Some(token) = token {
        command.env("NOMAD_TOKEN", token);
    }
    command.output().unwrap()
}

fn action_url(agent: &Agent, job_id: &str, action: &str, alloc_id: &str) -> String {
    format!(
        "{}/v1/job/{job_id}/action?action={}&allocID={alloc_id}&task=server&tty=false",
        agent.address.replacen("http", "ws", 1),
        percent_encode(action)
    )
}

#[test]
fn job_action_runs_the_tasks_action_through_the_cli_and_the_websocket() {
    let agent = Agent::start_dev();
    let alloc_id = run_job(&agent, None, "act");

    // By group and task: an allocation of the group is picked; the action's exit code is the
    // command's.
    let ran = cli(
        &agent,
        None,
        &[
            "job", "action", "-job", "act", "-group", "app", "-task", "server", "hello",
        ],
    );
    assert_eq!(
        String::from_utf8_lossy(&ran.stdout),
        format!("action in server of {alloc_id}\n"),
        "{ran:?}"
    );
    assert_eq!(ran.status.code(), Some(3));

    // By allocation prefix (the task is the group's only one).
    let ran = cli(
        &agent,
        None,
        &[
            "job",
            "action",
            "-job",
            "act",
            "-alloc",
            &alloc_id[..8],
            "cgroup",
        ],
    );
    assert!(ran.status.success(), "{ran:?}");
    let task_pid = support::pids_with_cmdline("3600")
        .into_iter()
        .find(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.contains(&alloc_id))
        })
        .expect("the task's process");
    assert_eq!(
        String::from_utf8_lossy(&ran.stdout),
        std::fs::read_to_string(format!("/proc/{task_pid}/cgroup")).unwrap(),
        "the action runs in the task's cgroup"
    );

    // Nomad's usage errors.
    let refused = cli(&agent, None, &["job", "action", "-job", "act", "hello"]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&refused.stderr)
            .contains("A group name is required if no allocation is provided"),
        "{refused:?}"
    );
    let refused = cli(&agent, None, &["job", "action", "-group", "app", "hello"]);
    assert!(String::from_utf8_lossy(&refused.stderr).contains("A job ID is required"));

    // An action the task does not define ends the session with Nomad's error.
    let refused = cli(
        &agent,
        None,
        &["job", "action", "-job", "act", "-alloc", &alloc_id, "nope"],
    );
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("action nope not found in task server"),
        "{refused:?}"
    );

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        // The websocket itself, as Nomad's API client opens it.
        let outcome = exec_websocket_outcome(
            &action_url(&agent, "act", "hello", &alloc_id),
            vec![json!({"stdin": {"close": true}})],
        )
        .await;
        assert_eq!(outcome.stdout, format!("action in server of {alloc_id}\n"));
        assert_eq!(outcome.exit_code, 3);
        assert_eq!(outcome.close_code, Some(1000));

        assert_eq!(
            exec_websocket_close(&action_url(&agent, "act", "nope", &alloc_id)).await,
            (1008, "action nope not found in task server".to_owned())
        );
        assert_eq!(
            exec_websocket_close(&action_url(&agent, "other", "hello", &alloc_id)).await,
            (
                1008,
                format!("job other does not have allocation {alloc_id}")
            )
        );
        let unknown = "00000000-0000-4000-8000-000000000000";
        assert_eq!(
            exec_websocket_close(&action_url(&agent, "act", "hello", unknown)).await,
            (1008, format!("Unknown allocation \"{unknown}\""))
        );
    });

    // The job's actions, flattened with their task and group.
    let actions = agent.get_json("/v1/job/act/actions");
    assert_eq!(
        actions,
        json!([
            {"Name": "hello", "Command": "/bin/sh",
             "Args": ["-c", "echo action in $NOMAD_TASK_NAME of $NOMAD_ALLOC_ID; exit 3"],
             "TaskName": "server", "TaskGroupName": "app"},
            {"Name": "cgroup", "Command": "/bin/cat", "Args": ["/proc/self/cgroup"],
             "TaskName": "server", "TaskGroupName": "app"},
        ])
    );

    // An action without a command is refused at register, as Nomad validates it.
    let bad = job_with_actions("bad").replace("command = \"/bin/cat\"", "");
    let (_dir, path) = write_jobspec("bad.hcl", &bad);
    let refused = cli(
        &agent,
        None,
        &["job", "run", "-detach", &path.to_string_lossy()],
    );
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr)
            .contains("Action cgroup validation failed: command cannot be empty"),
        "{refused:?}"
    );
}

#[test]
fn with_acls_on_a_task_action_needs_alloc_exec() {
    let temp = tempfile::tempdir().unwrap();
    let config = temp.path().join("acl.hcl");
    std::fs::write(&config, "acl {\n  enabled = true\n}\n").unwrap();
    let agent = Agent::start_with(
        &temp.path().join("data"),
        &[&format!("-config={}", config.display())],
    );
    let (status, body) = http_as("POST", &agent.url("/v1/acl/bootstrap"), None, None);
    assert_eq!(status, 200, "{body}");
    let root: serde_json::Value = serde_json::from_str(&body).unwrap();
    let root = root["SecretID"].as_str().unwrap().to_owned();
    let alloc_id = run_job(&agent, Some(&root), "guarded");

    let mut secrets = Vec::new();
    for (name, rules) in [
        ("reader", r#"namespace "default" { policy = "read" }"#),
        (
            "actor",
            r#"namespace "default" { capabilities = ["alloc-exec", "read-job", "list-jobs"] }"#,
        ),
    ] {
        let body = json!({"Name": name, "Rules": rules}).to_string();
        let (status, answer) = http_as(
            "PUT",
            &agent.url(&format!("/v1/acl/policy/{name}")),
            Some(&root),
            Some(&body),
        );
        assert_eq!(status, 200, "{answer}");
        let body = json!({"Name": name, "Type": "client", "Policies": [name]}).to_string();
        let (status, answer) = http_as(
            "POST",
            &agent.url("/v1/acl/token"),
            Some(&root),
            Some(&body),
        );
        assert_eq!(status, 200, "{answer}");
        let token: serde_json::Value = serde_json::from_str(&answer).unwrap();
        secrets.push(token["SecretID"].as_str().unwrap().to_owned());
    }
    let arguments = [
        "job", "action", "-job", "guarded", "-group", "app", "-task", "server", "hello",
    ];

    // Reading the job is not enough.
    let refused = cli(&agent, Some(&secrets[0]), &arguments);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("Permission denied"),
        "{refused:?}"
    );
    // Nor is no token at all, on the websocket itself.
    let (status, _) = http_as(
        "GET",
        &agent.url(&format!(
            "/v1/job/guarded/action?action=hello&allocID={alloc_id}&task=server"
        )),
        None,
        None,
    );
    assert_eq!(status, 403);

    // alloc-exec runs it.
    let ran = cli(&agent, Some(&secrets[1]), &arguments);
    assert_eq!(ran.status.code(), Some(3), "{ran:?}");
    assert_eq!(
        String::from_utf8_lossy(&ran.stdout),
        format!("action in server of {alloc_id}\n")
    );
}
