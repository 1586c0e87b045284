//! Jobspecs using blocks drover decodes but does not run (Connect, volumes, Vault, scaling,
//! devices, multiregion, ...): each file under `tests/corpus/decoded` must decode to the Nomad
//! job JSON in its snapshot (what `/v1/jobs/parse` answers), every decoded field must survive
//! the `Job` model and its defaults, and the support table must then refuse it at register.
//! Re-bless with `INSTA_UPDATE=always cargo test -p drover-jobspec --test decoded`.

#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a failure here is the assertion

use std::path::{Path, PathBuf};

use drover_jobspec::{VarValues, decode_hcl_to_json};
use serde_json::Value;

fn corpus_files() -> Vec<PathBuf> {
    let directory = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/decoded");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&directory)
        .unwrap()
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.extension().is_some_and(|extension| extension == "hcl"))
        .collect();
    files.sort();
    files
}

/// Every leaf of `written` (not null) is found, equal, at the same place in `kept`.
fn missing_leaves(written: &Value, kept: &Value, path: String, missing: &mut Vec<String>) {
    match written {
        Value::Null => {}
        Value::Object(entries) => {
            for (key, value) in entries {
                let inner = kept.get(key).unwrap_or(&Value::Null);
                missing_leaves(value, inner, format!("{path}.{key}"), missing);
            }
        }
        Value::Array(items) => {
            for (index, value) in items.iter().enumerate() {
                let inner = kept.get(index).unwrap_or(&Value::Null);
                missing_leaves(value, inner, format!("{path}[{index}]"), missing);
            }
        }
        leaf => {
            if leaf != kept {
                missing.push(format!("{path}: wrote {leaf}, kept {kept}"));
            }
        }
    }
}

#[test]
fn decoded_jobspecs_match_nomads_job_json_and_survive_the_job_model() {
    let files = corpus_files();
    assert!(
        files.len() >= 4,
        "the decoded corpus has {} files",
        files.len()
    );
    for path in &files {
        let source = std::fs::read_to_string(path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let (written, _) = decode_hcl_to_json(&source, &name, &VarValues::new())
            .unwrap_or_else(|error| panic!("{name} does not decode:\n{error}"));
        insta::with_settings!({ prepend_module_to_snapshot => false, snapshot_path => "corpus/snapshots/decoded" }, {
            insta::assert_json_snapshot!(name.replace('.', "_"), written);
        });

        // The job the API builds from `/v1/jobs/parse` output: the model, then its defaults.
        // (Not `parse_hcl`: Nomad's validation wants a task in a gateway group, which Nomad
        // injects when it registers the job.)
        // (The job's `migrate` is merged into each group's by canonicalization.)
        let mut job: drover_structs::Job =
            drover_structs::lenient::from_value_ignoring_key_case(written.clone()).unwrap();
        job.canonicalize();
        let kept = serde_json::to_value(&job).unwrap();
        // A job's `migrate` and `reschedule` are laid under each group's, as the API does.
        let mut written_per_group = written.clone();
        if let Some(job_object) = written_per_group.as_object_mut() {
            job_object.remove("Migrate");
            job_object.remove("Reschedule");
        }
        let mut missing = Vec::new();
        missing_leaves(&written_per_group, &kept, String::new(), &mut missing);
        // Defaults may fill what was absent, never change what was written.
        assert!(
            missing.is_empty(),
            "{name} lost fields:\n{}",
            missing.join("\n")
        );

        if let Some(max_parallel) = written.pointer("/Migrate/MaxParallel") {
            for group in kept["TaskGroups"].as_array().unwrap() {
                assert_eq!(&group["Migrate"]["MaxParallel"], max_parallel, "{name}");
            }
        }

        let report = drover_jobspec::support::check(&job);
        assert!(
            !report.refusals.is_empty(),
            "{name} uses features drover does not run, yet registers"
        );
    }
}
