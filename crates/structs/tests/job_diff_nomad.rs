//! The job diff against Nomad 1.1.2's own answers: `fixtures/job_diff` holds three versions of a
//! job (`vN.hcl`, and `vN.json` as `nomad job run -output` encodes it) and the `Diff` Nomad's
//! `POST /v1/job/web/plan` answered for each, as a new job (`nomad-plan-new-vN.json`) and over
//! a registered `v1` (`nomad-plan-upd-vN.json`).
//!
//! The planner's annotations (`forces create`, update counts) are the server's and are compared
//! in its tests; here they are cleared on both sides.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a failed expectation is a failed test

use std::path::PathBuf;

use drover_structs::Job;
use drover_structs::job_diff::diff_jobs;
use serde_json::Value;

fn fixture(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/job_diff")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// A job as the server stores it after a register of `vN.json`.
fn stored_job(version: &str) -> Job {
    let body = fixture(&format!("{version}.json"));
    let mut job: Job =
        drover_structs::lenient::from_value_ignoring_key_case(body["Job"].clone()).unwrap();
    job.canonicalize();
    job
}

/// Clears what the planner adds, and the fields drover's job has from Nomad releases after
/// 1.1.2 (`NodePool`, `PreventRescheduleOnLost`, `SecretsMB`, the log config's `Disabled`, the restart
/// policy's `RenderTemplates`), which
/// newer Nomads compare as well.
fn comparable(mut value: Value) -> Value {
    const NEWER: &[&str] = &[
        "NodePool",
        "PreventRescheduleOnLost",
        "SecretsMB",
        "Disabled",
        "RenderTemplates",
    ];
    match &mut value {
        Value::Object(map) => {
            if map.contains_key("Annotations") {
                map.insert("Annotations".into(), Value::Null);
            }
            if map.contains_key("Updates") {
                map.insert("Updates".into(), Value::Null);
            }
            for key in ["Fields", "Objects", "TaskGroups", "Tasks"] {
                if let Some(Value::Array(items)) = map.get_mut(key) {
                    items
                        .retain(|item| !NEWER.contains(&item["Name"].as_str().unwrap_or_default()));
                    if items.is_empty() {
                        map.insert(key.into(), Value::Null);
                    }
                }
            }
            // Keys in one order on both sides.
            let mut sorted: Vec<(String, Value)> = std::mem::take(map).into_iter().collect();
            sorted.sort_by(|a, b| a.0.cmp(&b.0));
            for (key, item) in sorted {
                map.insert(key, comparable(item));
            }
        }
        Value::Array(items) => {
            for item in items.iter_mut() {
                *item = comparable(item.take());
            }
        }
        _ => {}
    }
    value
}

fn assert_same_diff(old: Option<&Job>, new: &Job, nomad_answer: &str) {
    let ours = serde_json::to_value(diff_jobs(old, Some(new), true).unwrap()).unwrap();
    let nomads = fixture(nomad_answer)["Diff"].clone();
    let (ours, nomads) = (comparable(ours), comparable(nomads));
    let (ours, nomads) = (
        serde_json::to_string_pretty(&ours).unwrap(),
        serde_json::to_string_pretty(&nomads).unwrap(),
    );
    if ours != nomads {
        let first = ours
            .lines()
            .zip(nomads.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(0);
        let context = |text: &str| {
            text.lines()
                .skip(first.saturating_sub(8))
                .take(16)
                .collect::<Vec<_>>()
                .join("\n")
        };
        panic!(
            "{nomad_answer} differs at line {first}:\nours:\n{}\nnomad's:\n{}",
            context(&ours),
            context(&nomads)
        );
    }
}

#[test]
fn a_new_job_is_all_added_as_nomad_reports_it() {
    for version in ["v1", "v2", "v3"] {
        assert_same_diff(
            None,
            &stored_job(version),
            &format!("nomad-plan-new-{version}.json"),
        );
    }
}

#[test]
fn edits_over_a_registered_job_are_reported_as_nomad_reports_them() {
    let registered = stored_job("v1");
    for version in ["v1", "v2", "v3"] {
        assert_same_diff(
            Some(&registered),
            &stored_job(version),
            &format!("nomad-plan-upd-{version}.json"),
        );
    }
}
