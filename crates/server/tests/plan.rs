//! `job plan` through the real server: the submitted job is planned over the store by the real
//! scheduler and nothing is committed; the answer's counts, failures, index and annotated diff;
//! and `EnforceIndex` on register with Nomad's three errors.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a failed expectation is a failed test

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use drover_scheduler::testing::{JobBuilder, NodeBuilder};
use drover_server::{Server, ServerConfig, ServerError, SystemClock};
use drover_state::StateStore;
use drover_structs::job_diff::DiffType;
use drover_structs::{EVAL_STATUS_BLOCKED, Job, JobPlanRequest, JobRegisterRequest};
use serde_json::Value;

async fn server_with_node() -> Server {
    let server = Server::start(
        ServerConfig::default(),
        StateStore::in_memory().await.expect("store"),
        Arc::new(SystemClock),
    );
    server
        .register_node(NodeBuilder::new("node-1").build())
        .await
        .expect("node registers");
    server
}

fn web(count: i64) -> Job {
    JobBuilder::service("web")
        .group("app", count)
        .task("server", "raw_exec")
        .resources(100, 64)
        .build()
}

fn plan(job: Job, diff: bool) -> JobPlanRequest {
    JobPlanRequest {
        job: Some(job),
        diff,
        ..JobPlanRequest::default()
    }
}

/// Registers and waits until the job's allocations are placed.
async fn register_and_place(server: &Server, job: Job) -> u64 {
    let count: i64 = job.task_groups.iter().map(|group| group.count).sum();
    let response = server
        .register_job(JobRegisterRequest {
            job: Some(job),
            ..JobRegisterRequest::default()
        })
        .await
        .expect("registered");
    for _ in 0..500 {
        if server.state().allocs_by_job("default", "web").len() as i64 >= count {
            return response.job_modify_index;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the allocations were not placed");
}

#[tokio::test]
async fn planning_a_new_job_places_its_count_and_commits_nothing() {
    let server = server_with_node().await;
    let index_before = server.state().latest_index();
    let answer = server.plan_job(plan(web(3), true)).await.expect("planned");

    let updates = &answer.annotations.as_ref().unwrap().desired_tg_updates["app"];
    assert_eq!(updates.place, 3);
    assert_eq!(answer.job_modify_index, 0);
    assert!(answer.failed_tg_allocs.is_none());
    let diff = answer.diff.expect("a diff was asked for");
    assert_eq!(diff.r#type, DiffType::Added);
    assert_eq!(diff.task_groups[0].updates.as_ref().unwrap()["create"], 3);

    assert_eq!(
        server.state().latest_index(),
        index_before,
        "nothing was written"
    );
    assert!(server.state().job("default", "web").is_none());
    assert!(server.state().allocs_by_job("default", "web").is_empty());
}

#[tokio::test]
async fn planning_an_edited_job_counts_destructive_updates_and_annotates_the_diff() {
    let server = server_with_node().await;
    let job_modify_index = register_and_place(&server, web(2)).await;

    let mut edited = web(3);
    edited.task_groups[0].tasks[0]
        .env
        .insert("VERSION".into(), "2".into());
    let answer = server.plan_job(plan(edited, true)).await.expect("planned");

    assert_eq!(answer.job_modify_index, job_modify_index);
    assert_eq!(answer.index, job_modify_index);
    let updates = &answer.annotations.as_ref().unwrap().desired_tg_updates["app"];
    // Nomad's default update block: the new allocation takes the one slot max_parallel gives,
    // so the two changed ones wait (as Nomad 1.1.2 plans it).
    assert_eq!(
        (updates.place, updates.destructive_update, updates.ignore),
        (1, 0, 2)
    );
    let diff = answer.diff.unwrap();
    assert_eq!(diff.r#type, DiffType::Edited);
    let group = &diff.task_groups[0];
    let count = group
        .fields
        .iter()
        .find(|field| field.name == "Count")
        .unwrap();
    assert_eq!((count.old.as_str(), count.new.as_str()), ("2", "3"));
    assert_eq!(count.annotations, ["forces create"]);
    assert_eq!(group.tasks[0].annotations, ["forces create/destroy update"]);
    let updates = group.updates.as_ref().unwrap();
    assert_eq!(updates["create"], 1);
    assert_eq!(updates["ignore"], 2);

    // The stored job is still the registered one.
    let stored = server.state().job("default", "web").unwrap();
    assert_eq!(stored.job_modify_index, job_modify_index);
    assert_eq!(stored.task_groups[0].count, 2);
}

#[tokio::test]
async fn planning_the_registered_job_again_changes_nothing() {
    let server = server_with_node().await;
    register_and_place(&server, web(2)).await;
    let answer = server.plan_job(plan(web(2), true)).await.expect("planned");
    let updates = &answer.annotations.as_ref().unwrap().desired_tg_updates["app"];
    assert_eq!((updates.ignore, updates.place), (2, 0));
    let diff = answer.diff.unwrap();
    assert_eq!(diff.r#type, DiffType::None);
    assert!(diff.task_groups[0].tasks[0].annotations.is_empty());
}

#[tokio::test]
async fn a_job_that_does_not_fit_reports_failed_placements_and_a_blocked_eval() {
    let server = server_with_node().await;
    let huge = JobBuilder::service("web")
        .group("app", 1)
        .task("server", "raw_exec")
        .resources(1_000_000, 64)
        .build();
    let answer = server.plan_job(plan(huge, false)).await.expect("planned");
    let failed = answer.failed_tg_allocs.expect("the group failed to place");
    assert!(failed.contains_key("app"));
    let created = answer.created_evals.expect("a blocked evaluation");
    assert_eq!(created[0].status, EVAL_STATUS_BLOCKED);
    assert!(answer.diff.is_none());
    assert!(server.state().evals_by_job("default", "web").is_empty());
}

fn fixture(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../structs/tests/fixtures/job_diff")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn fixture_job(version: &str) -> Job {
    drover_structs::lenient::from_value_ignoring_key_case(
        fixture(&format!("{version}.json"))["Job"].clone(),
    )
    .unwrap()
}

/// The annotated diff as Nomad 1.1.2 answered it for the same two versions, update counts
/// included: Nomad's default `update` block limits them by the deployment.
#[tokio::test]
async fn the_annotated_diff_is_the_one_nomad_answers() {
    let server = server_with_node().await;
    let mut v1 = fixture_job("v1");
    v1.canonicalize();
    register_and_place(&server, v1).await;
    for version in ["v2", "v3"] {
        let answer = server
            .plan_job(plan(fixture_job(version), true))
            .await
            .expect("planned");
        let ours = serde_json::to_value(answer.diff.unwrap()).unwrap();
        let nomads = fixture(&format!("nomad-plan-upd-{version}.json"))["Diff"].clone();
        // serde_json keeps key order here; compare as canonical text.
        let canonical =
            |value: &Value| -> Value { serde_json::from_str(&value.to_string()).unwrap() };
        assert_eq!(
            sorted(canonical(&ours)),
            sorted(canonical(&nomads)),
            "{version}"
        );
    }
}

/// Keys in one order, and without the fields drover's job has from Nomad releases after 1.1.2
/// (`SecretsMB`, `RenderTemplates`), which newer Nomads compare as well.
fn sorted(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            for (key, value) in &mut entries {
                if key == "Fields"
                    && let Value::Array(fields) = value
                {
                    fields.retain(|field| {
                        !["SecretsMB", "RenderTemplates"]
                            .contains(&field["Name"].as_str().unwrap_or_default())
                    });
                }
            }
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(key, value)| (key, sorted(value)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sorted).collect()),
        other => other,
    }
}

#[tokio::test]
async fn enforce_index_refuses_with_nomads_errors() {
    let server = server_with_node().await;
    let enforced = |job_modify_index: u64| JobRegisterRequest {
        job: Some(web(1)),
        enforce_index: true,
        job_modify_index,
        ..JobRegisterRequest::default()
    };
    let error = server.register_job(enforced(3)).await.unwrap_err();
    assert!(matches!(error, ServerError::IndexConflict(_)));
    assert_eq!(
        error.to_string(),
        "Enforcing job modify index 3: job does not exist"
    );

    let created = server
        .register_job(enforced(0))
        .await
        .expect("0 creates a new job");
    let current = created.job_modify_index;

    let error = server.register_job(enforced(0)).await.unwrap_err();
    assert_eq!(
        error.to_string(),
        "Enforcing job modify index 0: job already exists"
    );
    let stale = current + 5;
    let error = server.register_job(enforced(stale)).await.unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "Enforcing job modify index {stale}: job exists with conflicting job modify index: {current}"
        )
    );
    let mut changed = web(2);
    changed.meta.insert("k".into(), "v".into());
    let accepted = server
        .register_job(JobRegisterRequest {
            job: Some(changed),
            enforce_index: true,
            job_modify_index: current,
            ..JobRegisterRequest::default()
        })
        .await
        .expect("the current index is accepted");
    assert!(accepted.job_modify_index > current);
}
