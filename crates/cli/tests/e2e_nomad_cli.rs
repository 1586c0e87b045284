//! End to end: the wire answers the unchanged Nomad CLI reads, against the real agent. Each
//! assertion names the `nomad` command that needs it: `job plan` prints a periodic job's next
//! launch from the plan's `NextPeriodicLaunch`; `node status` lists the node's events, the
//! first of them its registration; `alloc fs -tail` reads a file with `limit=-1`.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod support;

use std::time::Duration;

use serde_json::Value;
use support::{Agent, http, wait_for, write_jobspec};

const LIMIT: Duration = Duration::from_secs(60);

const PERIODIC: &str = r#"job "nightly" {
  datacenters = ["dc1"]
  type        = "batch"
  periodic {
    cron             = "0 3 * * *"
    prohibit_overlap = true
  }
  group "g" {
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
      resources {
        cpu    = 20
        memory = 16
      }
    }
  }
}
"#;

const WRITER: &str = r#"job "writer" {
  datacenters = ["dc1"]
  type        = "batch"
  group "g" {
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "printf 'first\nsecond\n'"]
      }
      resources {
        cpu    = 20
        memory = 16
      }
    }
  }
}
"#;

fn plan(agent: &Agent, job_id: &str) -> Value {
    let job = agent.get_json(&format!("/v1/job/{job_id}"));
    let body = serde_json::json!({ "Job": job, "Diff": true }).to_string();
    let (status, answer) = http(
        "POST",
        &agent.url(&format!("/v1/job/{job_id}/plan")),
        Some(&body),
    );
    assert_eq!(status, 200, "{answer}");
    serde_json::from_str(&answer).unwrap()
}

#[test]
fn the_answers_the_nomad_cli_reads_are_there() {
    let agent = Agent::start_dev();

    // `nomad node status <node>`: "Node registered" is the node's first event.
    // The API answers before the client has registered its node.
    let node_id = wait_for("the node to register", LIMIT, || {
        agent.get_json("/v1/nodes")[0]["ID"]
            .as_str()
            .map(str::to_owned)
    });
    let node = agent.get_json(&format!("/v1/node/{node_id}"));
    assert_eq!(node["Events"][0]["Subsystem"], "Cluster", "{node}");
    assert_eq!(node["Events"][0]["Message"], "Node registered", "{node}");
    assert!(node["Events"][0]["CreateIndex"].as_u64().unwrap() > 0);

    // `nomad job plan`: a periodic job's next launch, in the future, at 03:00 UTC; any
    // other job answers null.
    let (_dir, periodic) = write_jobspec("nightly.hcl", PERIODIC);
    agent.cli_ok(&["job", "run", "-detach", periodic.to_str().unwrap()]);
    let answer = plan(&agent, "nightly");
    let next = answer["NextPeriodicLaunch"].as_str().unwrap_or_default();
    assert!(next.ends_with("T03:00:00Z"), "{answer}");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    // Today's 03:00 unless it has passed (then tomorrow's).
    let next_day = now / 86_400 + u64::from(now % 86_400 >= 3 * 3600);
    assert_eq!(next.len(), "2026-01-01T03:00:00Z".len(), "{next}");
    // Days since the epoch of the launch date, from its civil date.
    let days = days_from_civil(
        next[0..4].parse().unwrap(),
        next[5..7].parse().unwrap(),
        next[8..10].parse().unwrap(),
    );
    assert_eq!(days, next_day as i64, "{next}");

    let (_dir2, writer) = write_jobspec("writer.hcl", WRITER);
    agent.cli_ok(&["job", "run", "-detach", writer.to_str().unwrap()]);
    assert_eq!(plan(&agent, "writer")["NextPeriodicLaunch"], Value::Null);

    // `nomad alloc fs -tail <alloc> <file>` reads from an offset with `limit=-1`: to the end.
    let alloc_id = wait_for("the writer to complete", LIMIT, || {
        let allocs = agent.get_json("/v1/job/writer/allocations");
        allocs.as_array()?.iter().find_map(|alloc| {
            (alloc["ClientStatus"] == "complete").then(|| alloc["ID"].as_str().unwrap().to_owned())
        })
    });
    let (status, body) = http(
        "GET",
        &agent.url(&format!(
            "/v1/client/fs/readat/{alloc_id}?path=alloc/logs/t.stdout.0&offset=6&limit=-1"
        )),
        None,
    );
    assert_eq!((status, body.as_str()), (200, "second\n"));
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let shifted_month = (month + 9) % 12;
    let day_of_year = (153 * shifted_month + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}
