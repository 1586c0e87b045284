//! End to end: periodic and parameterized jobs through the real agent and the real CLI. A
//! 7-field every-second schedule launches children; `prohibit_overlap` holds launches while a
//! child runs; an agent killed with SIGKILL and restarted later catches up once and resumes;
//! `job periodic force` launches one now; `job dispatch` runs a child whose task reads a binary
//! payload byte-exact from `local/`, and a dispatch Nomad would refuse is a 400 naming why.
//!
//! Not here: cron arithmetic and time zones (unit tests in `drover_jobspec::cron`).

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::Value;
use support::{Agent, http, wait_for, write_jobspec};

/// Generous: tasks start slowly on a loaded 2-core machine.
const LIMIT: Duration = Duration::from_secs(120);

fn periodic_job(job_id: &str, cron: &str, prohibit_overlap: bool, command: &str) -> String {
    format!(
        r#"
job "{job_id}" {{
  datacenters = ["dc1"]
  type        = "batch"

  periodic {{
    crons            = ["{cron}"]
    prohibit_overlap = {prohibit_overlap}
    time_zone        = "Europe/Berlin"
  }}

  group "g" {{
    task "t" {{
      driver = "raw_exec"

      config {{
        command = "/bin/sh"
        args    = ["-c", "{command}"]
      }}

      resources {{
        cpu    = 10
        memory = 16
      }}
    }}
  }}
}}
"#
    )
}

/// The children of `parent` (ID → job list stub).
fn children(agent: &Agent, parent: &str) -> Vec<Value> {
    let list = agent.get_json(&format!("/v1/jobs?prefix={parent}/"));
    list.as_array()
        .unwrap()
        .iter()
        .filter(|job| job["ParentID"] == parent)
        .cloned()
        .collect()
}

/// The launch times (Unix seconds) of the periodic children of `parent`.
fn launches(agent: &Agent, parent: &str) -> Vec<i64> {
    let mut times: Vec<i64> = children(agent, parent)
        .iter()
        .filter_map(|child| {
            child["ID"]
                .as_str()?
                .rsplit_once("/periodic-")?
                .1
                .parse()
                .ok()
        })
        .collect();
    times.sort_unstable();
    times
}

fn run_job(agent: &Agent, name: &str, text: &str) {
    let (_dir, path) = write_jobspec(name, text);
    let output = agent.cli_ok(&["job", "run", "-detach", path.to_str().unwrap()]);
    assert!(output.contains("Job registration successful"), "{output}");
}

fn stop_job(agent: &Agent, job_id: &str) {
    agent.cli_ok(&["job", "stop", "-detach", "-purge", job_id]);
}

#[test]
fn an_every_second_schedule_launches_children_and_force_launches_one_now() {
    let agent = Agent::start_dev();
    run_job(
        &agent,
        "tick.hcl",
        &periodic_job("tick", "* * * * * * *", false, "exit 0"),
    );
    let seen = wait_for("three periodic children", LIMIT, || {
        let times = launches(&agent, "tick");
        (times.len() >= 3).then_some(times)
    });
    assert_eq!(
        seen.len(),
        seen.iter().collect::<BTreeSet<_>>().len(),
        "{seen:?}"
    );
    // A child is the parent without its periodic block, with ParentID, and runs.
    let child_id = format!("tick/periodic-{}", seen[0]);
    let child = agent.get_json(&format!("/v1/job/{}", support::percent_encode(&child_id)));
    assert_eq!(child["ParentID"], "tick");
    assert_eq!(child["Name"], child_id.as_str());
    assert!(child["Periodic"].is_null(), "{child}");
    wait_for("the first child completes", LIMIT, || {
        let child = agent.get_json(&format!("/v1/job/{}", support::percent_encode(&child_id)));
        (child["Status"] == "dead").then_some(())
    });
    let status = agent.cli_ok(&["job", "status", "tick"]);
    assert!(status.contains("Periodic             = true"), "{status}");
    assert!(status.contains("Next Periodic Launch = "), "{status}");
    assert!(status.contains("from now)"), "{status}");
    assert!(status.contains("\nChildren Job Summary\n"), "{status}");
    assert!(
        status.contains("\nPreviously Launched Jobs\nID"),
        "{status}"
    );
    assert!(status.contains(&format!("{child_id}  dead")), "{status}");
    stop_job(&agent, "tick");

    // Force: a schedule that never fires in this test launches exactly one child now.
    run_job(
        &agent,
        "yearly.hcl",
        &periodic_job("yearly", "0 0 0 1 1 * 2099", false, "exit 0"),
    );
    assert!(children(&agent, "yearly").is_empty());
    let forced = agent.cli_ok(&["job", "periodic", "force", "-detach", "yearly"]);
    assert!(
        forced.starts_with("Force periodic successful\nEvaluation ID: "),
        "{forced}"
    );
    let launched = children(&agent, "yearly");
    assert_eq!(launched.len(), 1, "{launched:?}");
    let (status, body) = http(
        "POST",
        &agent.url("/v1/job/yearly/periodic/force"),
        Some("{}"),
    );
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert!(
        answer["EvalID"].as_str().is_some_and(|id| id.len() == 36),
        "{body}"
    );
    assert!(answer["EvalCreateIndex"].as_u64().unwrap() > 0, "{body}");
    assert_eq!(answer["Index"], answer["EvalCreateIndex"], "{body}");

    // A job that is not periodic is refused with Nomad's message.
    run_job(
        &agent,
        "once.hcl",
        r#"
job "once" {
  datacenters = ["dc1"]
  type        = "batch"
  group "g" {
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
    }
  }
}
"#,
    );
    let (status, body) = http("POST", &agent.url("/v1/job/once/periodic/force"), None);
    assert_eq!(status, 400, "{body}");
    assert!(
        body.contains("can't force launch non-periodic job"),
        "{body}"
    );
}

#[test]
fn prohibit_overlap_holds_launches_while_a_child_runs() {
    let agent = Agent::start_dev();
    run_job(
        &agent,
        "slow.hcl",
        &periodic_job("slow", "* * * * * * *", true, "sleep 3"),
    );
    // Until a second child has launched after the first finished, at most one child is ever
    // not dead.
    wait_for("two children, one after the other", LIMIT, || {
        let all = children(&agent, "slow");
        let alive = all.iter().filter(|child| child["Status"] != "dead").count();
        assert!(alive <= 1, "two children at once: {all:?}");
        (all.len() >= 2).then_some(())
    });
    let all = children(&agent, "slow");
    let alive = all.iter().filter(|child| child["Status"] != "dead").count();
    assert!(alive <= 1, "{all:?}");
    // Every child ran to completion for about 3 s: none was launched while one was running.
    let times = launches(&agent, "slow");
    for pair in times.windows(2) {
        assert!(
            pair[1] - pair[0] >= 3,
            "launched too close together: {times:?}"
        );
    }
    stop_job(&agent, "slow");
}

#[test]
fn an_agent_killed_and_restarted_catches_up_once_and_resumes() {
    let temp = tempfile::tempdir().unwrap();
    let data_dir = temp.path().join("data");
    let mut first = Agent::start_with(&data_dir, &[]);
    run_job(
        &first,
        "tick.hcl",
        &periodic_job("tick", "* * * * * * *", false, "exit 0"),
    );
    wait_for("two periodic children", LIMIT, || {
        (launches(&first, "tick").len() >= 2).then_some(())
    });
    first.kill9();
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64
    };
    let killed_at = now();
    std::thread::sleep(Duration::from_secs(5));
    let restart_at = now();
    let agent = Agent::start_with(&data_dir, &[]);
    let after = wait_for("the schedule resumes", LIMIT, || {
        let times = launches(&agent, "tick");
        (times.iter().filter(|time| **time > restart_at + 1).count() >= 3).then_some(times)
    });
    // No launch twice, and nothing for the seconds in which no agent ran (a catch-up launches
    // once, at the restart).
    assert_eq!(
        after.len(),
        after.iter().collect::<BTreeSet<_>>().len(),
        "{after:?}"
    );
    let in_gap: Vec<&i64> = after
        .iter()
        .filter(|time| **time > killed_at && **time < restart_at)
        .collect();
    assert!(
        in_gap.is_empty(),
        "launched while no agent ran: {in_gap:?} of {after:?}"
    );
    // The catch-up: one launch at the restart, before the schedule's next second.
    assert!(after.iter().any(|time| *time >= restart_at), "{after:?}");
    for child in after {
        let id = support::percent_encode(&format!("tick/periodic-{child}"));
        let evals = agent.get_json(&format!("/v1/job/{id}/evaluations"));
        assert_eq!(evals.as_array().unwrap().len(), 1, "{child}: {evals}");
    }
    stop_job(&agent, "tick");
}

fn parameterized_job(job_id: &str, payload: &str) -> String {
    format!(
        r#"
job "{job_id}" {{
  datacenters = ["dc1"]
  type        = "batch"

  parameterized {{
    payload       = "{payload}"
    meta_required = ["customer"]
  }}

  group "g" {{
    task "t" {{
      driver = "raw_exec"

      dispatch_payload {{
        file = "input.bin"
      }}

      config {{
        command = "/bin/sh"
        args    = ["-c", "echo customer=$NOMAD_META_customer; if [ -e $NOMAD_TASK_DIR/input.bin ]; then od -An -v -tx1 $NOMAD_TASK_DIR/input.bin | tr -d ' \\n'; fi; echo"]
      }}

      resources {{
        cpu    = 10
        memory = 16
      }}
    }}
  }}
}}
"#
    )
}

/// The allocation of a job once it is complete, and its task's stdout.
fn completed_stdout(agent: &Agent, job_id: &str, task: &str) -> String {
    let encoded = support::percent_encode(job_id);
    let alloc_id = wait_for("the dispatched child completes", LIMIT, || {
        let allocs = agent.get_json(&format!("/v1/job/{encoded}/allocations"));
        allocs.as_array()?.iter().find_map(|alloc| {
            (alloc["ClientStatus"] == "complete").then(|| alloc["ID"].as_str().unwrap().to_owned())
        })
    });
    agent.cli_ok(&["alloc", "logs", &alloc_id, task])
}

#[test]
fn dispatch_runs_a_child_with_meta_and_a_binary_payload_and_refuses_what_nomad_refuses() {
    let agent = Agent::start_dev();
    run_job(
        &agent,
        "convert.hcl",
        &parameterized_job("convert", "required"),
    );
    let dir = tempfile::tempdir().unwrap();
    let payload: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
    let payload_path = dir.path().join("payload.bin");
    std::fs::write(&payload_path, &payload).unwrap();
    let output = agent.cli_ok(&[
        "job",
        "dispatch",
        "-meta",
        "customer=acme",
        "convert",
        payload_path.to_str().unwrap(),
    ]);
    assert!(
        output.starts_with("Dispatched Job ID = convert/dispatch-"),
        "{output}"
    );
    assert!(output.contains("\nEvaluation ID     = "), "{output}");
    let child_id = output
        .lines()
        .next()
        .unwrap()
        .split(" = ")
        .nth(1)
        .unwrap()
        .to_owned();
    let suffix = child_id.strip_prefix("convert/dispatch-").unwrap();
    let (seconds, hex) = suffix.split_once('-').unwrap();
    assert!(seconds.parse::<i64>().is_ok(), "{child_id}");
    assert_eq!(hex.len(), 8, "{child_id}");
    let child = agent.get_json(&format!("/v1/job/{}", support::percent_encode(&child_id)));
    assert_eq!(child["ParentID"], "convert");
    assert_eq!(child["Dispatched"], true);
    assert_eq!(child["Meta"]["customer"], "acme");
    let logs = completed_stdout(&agent, &child_id, "t");
    let expected: String = payload.iter().map(|byte| format!("{byte:02x}")).collect();
    assert_eq!(logs, format!("customer=acme\n{expected}\n"));

    // -id-prefix-template and the idempotency token.
    let first = agent.cli_ok(&[
        "job",
        "dispatch",
        "-detach",
        "-meta",
        "customer=acme",
        "-id-prefix-template",
        "nightly",
        "-idempotency-token",
        "once",
        "convert",
        payload_path.to_str().unwrap(),
    ]);
    assert!(
        first.starts_with("Dispatched Job ID = convert/dispatch-nightly-"),
        "{first}"
    );
    let again = agent.cli_ok(&[
        "job",
        "dispatch",
        "-detach",
        "-meta",
        "customer=acme",
        "-idempotency-token",
        "once",
        "convert",
        payload_path.to_str().unwrap(),
    ]);
    assert_eq!(
        first.lines().next(),
        again.lines().next(),
        "a retried dispatch names the same child"
    );

    // Refusals, each a 400 naming the problem.
    let body = |payload: &[u8], meta: &str| {
        use base64::Engine as _;
        format!(
            r#"{{"Payload": "{}", "Meta": {meta}}}"#,
            base64::engine::general_purpose::STANDARD.encode(payload)
        )
    };
    let dispatch = |job: &str, text: String| {
        http(
            "POST",
            &agent.url(&format!("/v1/job/{job}/dispatch")),
            Some(&text),
        )
    };
    let (status, text) = dispatch("convert", body(&[7; 17 * 1024], r#"{"customer": "a"}"#));
    assert_eq!(status, 400, "{text}");
    assert!(
        text.contains("Payload exceeds maximum size; 17408 > 16384"),
        "{text}"
    );
    let (status, text) = dispatch("convert", body(b"x", "{}"));
    assert_eq!(status, 400, "{text}");
    assert!(
        text.contains("Dispatch did not provide required meta keys: [customer]"),
        "{text}"
    );
    run_job(&agent, "bare.hcl", &parameterized_job("bare", "forbidden"));
    let (status, text) = dispatch("bare", body(b"x", r#"{"customer": "a"}"#));
    assert_eq!(status, 400, "{text}");
    assert!(
        text.contains("Payload provided but forbidden by parameterized job"),
        "{text}"
    );

    // `job status` of the parameterized job lists its children as Nomad does.
    let status = agent.cli_ok(&["job", "status", "convert"]);
    assert!(
        status.contains("Parameterized        = true") || status.contains("Parameterized = true"),
        "{status}"
    );
    assert!(
        status.contains("\nParameterized Job\nPayload           = required\n"),
        "{status}"
    );
    assert!(status.contains("\nDispatched Jobs\nID"), "{status}");
    assert!(status.contains(&child_id), "{status}");
}

#[test]
fn the_parameterized_example_runs_as_its_comment_says() {
    let agent = Agent::start_dev();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let example = root.join("parameterized.hcl");
    let input = root.join("resize-input.txt");
    let output = agent.cli_ok(&["job", "run", example.to_str().unwrap()]);
    assert!(output.contains("Job registration successful"), "{output}");
    let output = agent.cli_ok(&[
        "job",
        "dispatch",
        "-meta",
        "customer=acme",
        "resize",
        input.to_str().unwrap(),
    ]);
    let child_id = output
        .lines()
        .next()
        .and_then(|line| line.strip_prefix("Dispatched Job ID = "))
        .unwrap()
        .to_owned();
    let size = std::fs::metadata(&input).unwrap().len();
    let logs = completed_stdout(&agent, &child_id, "resize");
    assert_eq!(logs, format!("resizing for acme\n{size}\n"));
}
