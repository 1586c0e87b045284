//! The support table against what it drives: the generated reference page `docs/jobspec.md`
//! (re-bless with `DROVER_BLESS_DOCS=1 cargo test -p drover-jobspec --test support`), and the
//! promise that no row is "accepted, not run": every row that does not simply run is found in a
//! real jobspec of the corpus, and says what would make it run.

#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a failure here is the assertion

use std::path::{Path, PathBuf};

use drover_jobspec::support::{FEATURES, Status, check, reference_markdown};
use drover_jobspec::{VarValues, parse_hcl, parse_json};

fn docs_page() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/jobspec.md")
}

#[test]
fn the_reference_page_is_generated_from_the_table() {
    let expected = reference_markdown();
    let path = docs_page();
    if std::env::var_os("DROVER_BLESS_DOCS").is_some() {
        std::fs::write(&path, &expected).expect("docs/jobspec.md is writable");
        return;
    }
    let actual = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        actual == expected,
        "docs/jobspec.md is not what the support table generates; re-bless with \
         DROVER_BLESS_DOCS=1 cargo test -p drover-jobspec --test support"
    );
    for feature in FEATURES {
        assert!(
            actual.contains(&format!("| `{}` |", feature.name)),
            "the page has no row for {}",
            feature.name
        );
    }
}

#[test]
fn no_row_is_accepted_but_not_run() {
    let mut names = std::collections::BTreeSet::new();
    for feature in FEATURES {
        assert!(names.insert(feature.name), "{} has two rows", feature.name);
        assert!(!feature.reason.is_empty(), "{} says nothing", feature.name);
        match feature.status {
            Status::Runs => assert!(
                feature.would_run.is_empty(),
                "{} runs, yet says what would make it run",
                feature.name
            ),
            Status::RunsDifferently | Status::NotYet | Status::NeedsMissing => {
                assert!(
                    feature.is_detectable(),
                    "{} is not plain \"runs\" but cannot be found in a job, so it would be accepted and not run",
                    feature.name
                );
                assert_eq!(
                    feature.status.is_refused(),
                    !feature.would_run.is_empty(),
                    "{}: a refused row says what would make it run, a warning row does not",
                    feature.name
                );
            }
        }
    }
}

fn corpus_jobs() -> Vec<(String, drover_structs::Job)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
    let mut jobs = Vec::new();
    for kind in ["valid", "register"] {
        for entry in std::fs::read_dir(root.join(kind)).expect("corpus directory") {
            let path = entry.expect("directory entry").path();
            let source = std::fs::read_to_string(&path).expect("corpus file");
            let name = path.display().to_string();
            let job = match path.extension().and_then(|extension| extension.to_str()) {
                Some("hcl") => parse_hcl(&source, &name, &VarValues::new()),
                Some("json") => parse_json(&source, &name),
                _ => continue,
            };
            jobs.push((name, job.expect("corpus file parses")));
        }
    }
    jobs
}

#[test]
fn every_row_that_is_not_plain_runs_is_found_in_a_real_jobspec() {
    let jobs = corpus_jobs();
    let reports: Vec<_> = jobs.iter().map(|(_, job)| check(job)).collect();
    for feature in FEATURES
        .iter()
        .filter(|feature| feature.status != Status::Runs)
    {
        let found = reports.iter().any(|report| {
            report
                .refusals
                .iter()
                .any(|refusal| refusal.feature == feature.name)
                || report
                    .warnings
                    .iter()
                    .any(|warning| warning.starts_with(&format!("{} in ", feature.name)))
        });
        assert!(
            found,
            "no corpus jobspec uses {:?}: add one under tests/corpus/register",
            feature.name
        );
    }
}
