//! End to end: the group `reschedule` block through the real agent. A service task that exits 1
//! with no restarts left is replaced by the policy (two attempts in an hour, a constant 5 s
//! delay, the shortest Nomad allows) and then left failed; the replacements link to each other (`PreviousAllocation`,
//! `NextAllocation`) and carry the `RescheduleTracker`, through the API and `alloc status`. A
//! longer delay is waited out by a follow-up evaluation with `WaitUntil` (`FollowupEvalID`).
//!
//! A batch allocation that runs past its group's `max_run_duration` is stopped by its client,
//! complete with Nomad's reason, and not replaced.
//!
//! Not here: delay functions and the attempts window (unit tests in
//! `drover_scheduler::reschedule`).

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod support;

use std::time::Duration;

use serde_json::Value;
use support::{Agent, pids_with_cmdline, wait_for, write_jobspec};

/// Generous: tasks start slowly on a loaded 2-core machine.
const LIMIT: Duration = Duration::from_secs(120);

fn failing_job(job_id: &str, delay: &str) -> String {
    format!(
        r#"
job "{job_id}" {{
  datacenters = ["dc1"]

  group "g" {{
    restart {{
      attempts = 0
      mode     = "fail"
    }}

    reschedule {{
      delay          = "{delay}"
      delay_function = "constant"
      unlimited      = false
      attempts       = 2
      interval       = "1h"
    }}

    task "t" {{
      driver = "raw_exec"

      config {{
        command = "/bin/sh"
        args    = ["-c", "exit 1"]
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

fn run_job(agent: &Agent, name: &str, text: &str) {
    let (_dir, path) = write_jobspec(name, text);
    let output = agent.cli_ok(&["job", "run", "-detach", path.to_str().unwrap()]);
    assert!(output.contains("Job registration successful"), "{output}");
}

/// The job's allocations, full, oldest first.
fn allocations(agent: &Agent, job_id: &str) -> Vec<Value> {
    let stubs = agent.get_json(&format!("/v1/job/{job_id}/allocations"));
    let mut full: Vec<Value> = stubs
        .as_array()
        .unwrap()
        .iter()
        .map(|stub| agent.get_json(&format!("/v1/allocation/{}", stub["ID"].as_str().unwrap())))
        .collect();
    full.sort_by_key(|alloc| alloc["CreateIndex"].as_u64().unwrap());
    full
}

fn events(alloc: &Value) -> &Vec<Value> {
    alloc["RescheduleTracker"]["Events"]
        .as_array()
        .unwrap_or_else(|| panic!("no reschedule events: {alloc}"))
}

#[test]
fn a_failing_service_is_replaced_twice_then_left_failed() {
    let agent = Agent::start_dev();
    run_job(&agent, "flaky.hcl", &failing_job("flaky", "5s"));

    let allocs = wait_for("three failed allocations", LIMIT, || {
        let allocs = allocations(&agent, "flaky");
        (allocs.len() == 3 && allocs.iter().all(|alloc| alloc["ClientStatus"] == "failed"))
            .then_some(allocs)
    });
    let (first, second, third) = (&allocs[0], &allocs[1], &allocs[2]);
    let id = |alloc: &Value| alloc["ID"].as_str().unwrap().to_string();

    assert_eq!(first["NextAllocation"], id(second).as_str(), "{first}");
    assert_eq!(second["PreviousAllocation"], id(first).as_str(), "{second}");
    assert_eq!(second["NextAllocation"], id(third).as_str(), "{second}");
    assert_eq!(third["PreviousAllocation"], id(second).as_str(), "{third}");
    // The replaced allocation's tracker only says its reschedule went through (as Nomad 1.4+).
    assert_eq!(
        first["RescheduleTracker"]["LastReschedule"], "ok",
        "{first}"
    );
    assert!(
        first["RescheduleTracker"]["Events"]
            .as_array()
            .is_none_or(Vec::is_empty),
        "{first}"
    );

    let second_events = events(second);
    assert_eq!(second_events.len(), 1, "{second}");
    assert_eq!(second_events[0]["PrevAllocID"], id(first).as_str());
    assert_eq!(second_events[0]["PrevNodeID"], first["NodeID"]);
    assert_eq!(second_events[0]["Delay"], 5_000_000_000_i64);
    assert!(second_events[0]["RescheduleTime"].as_i64().unwrap() > 0);

    let third_events = events(third);
    assert_eq!(third_events.len(), 2, "{third}");
    assert_eq!(third_events[0], second_events[0]);
    assert_eq!(third_events[1]["PrevAllocID"], id(second).as_str());
    assert_eq!(third_events[1]["Delay"], 5_000_000_000_i64);

    // Both attempts are used: the last one stays failed, with no replacement (a third would
    // come 5 s after the failure).
    std::thread::sleep(Duration::from_secs(8));
    let settled = allocations(&agent, "flaky");
    assert_eq!(settled.len(), 3, "no third replacement: {settled:?}");
    let last = &settled[2];
    assert_eq!(last["NextAllocation"], "", "{last}");
    assert_eq!(last["FollowupEvalID"], "", "{last}");
    assert_eq!(last["DesiredStatus"], "run", "{last}");

    let status = agent.cli_ok(&["alloc", "status", &id(third)]);
    assert!(
        status
            .lines()
            .any(|line| line.starts_with("Reschedule Attempts") && line.ends_with("= 2/2")),
        "{status}"
    );
    let status = agent.cli_ok(&["alloc", "status", &id(first)]);
    let short = &id(second)[..8];
    assert!(
        status
            .lines()
            .any(|line| line.starts_with("Replacement Alloc ID")
                && line.ends_with(&format!("= {short}"))),
        "{status}"
    );
}

#[test]
fn a_later_replacement_waits_for_its_follow_up_evaluation() {
    let agent = Agent::start_dev();
    run_job(&agent, "later.hcl", &failing_job("later", "10s"));

    let failed = wait_for("the first allocation fails", LIMIT, || {
        let allocs = allocations(&agent, "later");
        allocs
            .first()
            .filter(|alloc| alloc["FollowupEvalID"] != "")
            .cloned()
    });
    assert_eq!(failed["ClientStatus"], "failed");
    assert_eq!(failed["NextAllocation"], "", "not replaced yet: {failed}");
    let followup = agent.get_json(&format!(
        "/v1/evaluation/{}",
        failed["FollowupEvalID"].as_str().unwrap()
    ));
    assert_eq!(followup["TriggeredBy"], "alloc-reschedule", "{followup}");
    assert_eq!(followup["Status"], "pending", "{followup}");
    let finished = failed["TaskStates"]["t"]["FinishedAt"].as_str().unwrap();
    assert!(!finished.starts_with("0001"), "{failed}");
    assert!(
        followup["WaitUntil"]
            .as_str()
            .is_some_and(|wait| !wait.starts_with("0001")),
        "{followup}"
    );

    let status = agent.cli_ok(&["alloc", "status", failed["ID"].as_str().unwrap()]);
    assert!(
        status
            .lines()
            .any(|line| line.starts_with("Reschedule Eligibility") && line.ends_with("from now")),
        "{status}"
    );
    let status = agent.cli_ok(&["job", "status", "later"]);
    assert!(status.contains("Future Rescheduling Attempts"), "{status}");

    // The follow-up evaluation runs at WaitUntil and places the replacement.
    let replaced = wait_for("the replacement", LIMIT, || {
        let allocs = allocations(&agent, "later");
        (allocs.len() >= 2).then_some(allocs)
    });
    assert_eq!(replaced[0]["NextAllocation"], replaced[1]["ID"]);
    assert_eq!(replaced[1]["PreviousAllocation"], replaced[0]["ID"]);
    assert_eq!(events(&replaced[1])[0]["Delay"], 10_000_000_000_i64);
    wait_for("the follow-up evaluation completes", LIMIT, || {
        let evaluation = agent.get_json(&format!(
            "/v1/evaluation/{}",
            failed["FollowupEvalID"].as_str().unwrap()
        ));
        (evaluation["Status"] == "complete").then_some(())
    });
}

#[test]
fn a_batch_alloc_past_its_max_run_duration_is_stopped_complete_and_not_replaced() {
    let agent = Agent::start_dev();
    let marker = format!("run-limit-{}", std::process::id());
    let job = format!(
        r#"
job "limited" {{
  datacenters = ["dc1"]
  type        = "batch"

  group "g" {{
    max_run_duration = "3s"

    task "t" {{
      driver = "raw_exec"

      config {{
        command = "/bin/sh"
        args    = ["-c", "exec -a {marker} sleep 300"]
      }}

      resources {{
        cpu    = 10
        memory = 16
      }}
    }}
  }}
}}
"#
    );
    run_job(&agent, "limited.hcl", &job);
    let alloc = wait_for("the allocation to time out", LIMIT, || {
        allocations(&agent, "limited")
            .into_iter()
            .find(|alloc| alloc["ClientStatus"] == "complete")
    });
    assert_eq!(
        alloc["ClientDescription"], "allocation exceeded max_run_duration",
        "{alloc}"
    );
    let state = &alloc["TaskStates"]["t"];
    assert_eq!(state["Failed"], false, "{state}");
    let killing: Vec<&Value> = state["Events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|event| event["Type"] == "Killing")
        .collect();
    assert_eq!(killing.len(), 1, "{state}");
    assert_eq!(
        killing[0]["DisplayMessage"],
        "allocation exceeded max_run_duration"
    );
    let created = alloc["CreateTime"].as_i64().unwrap();
    assert!(
        killing[0]["Time"].as_i64().unwrap() >= created + 3_000_000_000,
        "killed before its deadline: {alloc}"
    );
    wait_for("the task to be gone", LIMIT, || {
        pids_with_cmdline(&marker).is_empty().then_some(())
    });
    wait_for("the task to be dead", LIMIT, || {
        let alloc = agent.get_json(&format!("/v1/allocation/{}", alloc["ID"].as_str().unwrap()));
        (alloc["TaskStates"]["t"]["State"] == "dead").then_some(())
    });
    // Complete, so not rescheduled: still one allocation a while later.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(allocations(&agent, "limited").len(), 1);
    let status = agent.cli_ok(&["alloc", "status", alloc["ID"].as_str().unwrap()]);
    assert!(
        status.contains("allocation exceeded max_run_duration"),
        "{status}"
    );
}
