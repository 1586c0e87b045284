//! drover's decoder against Nomad's own parser: each file under `tests/corpus/nomad-1.1.2` is
//! the answer Nomad 1.1.2's `/v1/jobs/parse` (canonicalize off) gave for a jobspec of the corpus
//! (`valid__minimal.json` for `valid/minimal.hcl`), and drover must decode that jobspec to the
//! same job, field by field. Fields at their zero value (null, "", 0, false, empty) are left out
//! on both sides: Go writes every field of its structs, the decoder only what was written.
//!
//! Where Nomad changed its answer after 1.1 the current answer is expected: renamed fields are
//! listed in `RENAMED_SINCE_1_1`, and the `distinct_hosts` shortcut's `RTarget` is not compared.
//! The jobspecs under `valid/` and `nomad/` were written for this corpus; those under `public/`
//! are real jobspecs taken unchanged from public repositories (source, commit and licence of
//! each in `public/SOURCES.md`). Nomad 1.1.2 was built from its public source (tag v1.1.2) to
//! record the answers.

#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a failure here is the assertion

use std::path::Path;

use drover_jobspec::{VarValues, decode_hcl_to_json};
use serde_json::{Map, Value};

/// `(1.1.2 field, current field)`: `api.ConsulProxy.ExposeConfig` became `Expose` and
/// `api.ConsulExposeConfig.Path` became `Paths`.
const RENAMED_SINCE_1_1: &[(&str, &str)] = &[("ExposeConfig", "Expose"), ("Path", "Paths")];

/// `(argument, 1.1.2 field)`: job arguments Nomad removed after 1.1 (the legacy token workflow
/// went in 1.10: a token is given at submission, `-consul-token` / `-vault-token`), which the
/// current parser refuses as drover does. A jobspec using one must be refused naming it; the
/// rest of the jobspec, without those lines, is then compared as usual.
const REMOVED_SINCE_1_1: &[(&str, &str)] = &[
    ("consul_token", "ConsulToken"),
    ("vault_token", "VaultToken"),
];

/// Checks that `source` is refused for each argument of `REMOVED_SINCE_1_1` Nomad 1.1.2 read
/// from it, and returns the source without those arguments and the answer without their fields.
fn without_removed_arguments(
    source: String,
    mut nomad: Value,
    name: &str,
    failures: &mut Vec<String>,
) -> (String, Value) {
    let used: Vec<_> = REMOVED_SINCE_1_1
        .iter()
        .filter(|(_, field)| {
            nomad
                .get(*field)
                .is_some_and(|value| prune(value.clone()).is_some())
        })
        .collect();
    if used.is_empty() {
        return (source, nomad);
    }
    match decode_hcl_to_json(&source, name, &VarValues::new()) {
        Ok(_) => failures.push(format!("{name}: decodes although it uses {used:?}")),
        Err(error) => {
            let error = error.to_string();
            for (argument, _) in &used {
                if !error.contains(&format!("\"{argument}\" is not supported")) {
                    failures.push(format!("{name}: {argument:?} is not refused:\n{error}"));
                }
            }
        }
    }
    let source = source
        .lines()
        .filter(|line| {
            !used.iter().any(|(argument, _)| {
                line.trim_start()
                    .strip_prefix(argument)
                    .is_some_and(|rest| rest.trim_start().starts_with('='))
            })
        })
        .collect::<Vec<_>>()
        .join("\n");
    if let Some(job) = nomad.as_object_mut() {
        for (_, field) in &used {
            job.remove(*field);
        }
    }
    (source, nomad)
}

fn prune(value: Value) -> Option<Value> {
    match value {
        Value::Null => None,
        Value::Bool(false) => None,
        Value::String(text) if text.is_empty() => None,
        Value::Number(number) if number.as_f64() == Some(0.0) => None,
        Value::Array(items) => {
            let items: Vec<Value> = items
                .into_iter()
                .map(|item| prune(item).unwrap_or(Value::Null))
                .collect();
            (!items.is_empty()).then_some(Value::Array(items))
        }
        Value::Object(mut entries) => {
            // Since 1.1 the `distinct_hosts = true` shortcut also writes `RTarget = "true"`.
            if entries.get("Operand").and_then(Value::as_str) == Some("distinct_hosts") {
                entries.remove("RTarget");
            }
            let entries: Map<String, Value> = entries
                .into_iter()
                .filter_map(|(key, value)| {
                    let key = match (
                        RENAMED_SINCE_1_1.iter().find(|(old, _)| *old == key),
                        &value,
                    ) {
                        // `Path` is renamed only where it holds the list of exposed paths.
                        (Some((_, new)), Value::Array(_) | Value::Object(_)) => new.to_string(),
                        _ => key,
                    };
                    prune(value).map(|value| (key, value))
                })
                .collect();
            (!entries.is_empty()).then_some(Value::Object(entries))
        }
        other => Some(other),
    }
}

fn differences(nomad: &Value, drover: &Value, path: &str, found: &mut Vec<String>) {
    match (nomad, drover) {
        (Value::Object(left), Value::Object(right)) => {
            for key in left
                .keys()
                .chain(right.keys().filter(|key| !left.contains_key(*key)))
            {
                differences(
                    left.get(key).unwrap_or(&Value::Null),
                    right.get(key).unwrap_or(&Value::Null),
                    &format!("{path}.{key}"),
                    found,
                );
            }
        }
        (Value::Array(left), Value::Array(right)) if left.len() == right.len() => {
            for (index, (left, right)) in left.iter().zip(right).enumerate() {
                differences(left, right, &format!("{path}[{index}]"), found);
            }
        }
        (left, right) if left == right => {}
        (left, right) => found.push(format!("{path}: nomad {left}, drover {right}")),
    }
}

#[test]
fn drover_decodes_jobspecs_as_nomad_1_1_2_parses_them() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
    let mut recorded: Vec<_> = std::fs::read_dir(corpus.join("nomad-1.1.2"))
        .unwrap()
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| {
            path.extension()
                .is_some_and(|extension| extension == "json")
        })
        .collect();
    recorded.sort();
    assert!(
        recorded.len() >= 20,
        "only {} recorded answers",
        recorded.len()
    );
    let public = recorded
        .iter()
        .filter(|path| {
            path.file_name()
                .is_some_and(|name| name.to_string_lossy().starts_with("public__"))
        })
        .count();
    assert!(public >= 60, "only {public} public jobspecs recorded");
    let mut failures = Vec::new();
    for answer_path in &recorded {
        let stem = answer_path
            .file_stem()
            .unwrap()
            .to_string_lossy()
            .to_string();
        let (directory, name) = stem.split_once("__").expect("named <dir>__<file>");
        let source =
            std::fs::read_to_string(corpus.join(directory).join(format!("{name}.hcl"))).unwrap();
        let nomad: Value =
            serde_json::from_str(&std::fs::read_to_string(answer_path).unwrap()).unwrap();
        let (source, nomad) = without_removed_arguments(source, nomad, name, &mut failures);
        let drover = match decode_hcl_to_json(&source, name, &VarValues::new()) {
            Ok((drover, _)) => drover,
            Err(error) => {
                failures.push(format!("{stem} does not decode:\n{error}"));
                continue;
            }
        };
        let mut found = Vec::new();
        differences(
            &prune(nomad).unwrap_or(Value::Null),
            &prune(drover).unwrap_or(Value::Null),
            "",
            &mut found,
        );
        if !found.is_empty() {
            failures.push(format!("{stem}:\n  {}", found.join("\n  ")));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
