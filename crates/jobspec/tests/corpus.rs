//! Data-driven jobspec tests: every file under `tests/corpus/valid` must parse to the Job JSON
//! in its snapshot, and every file under `tests/corpus/invalid` must fail with exactly the
//! diagnostics in its snapshot, and every file under `tests/corpus/register` must parse and then
//! get exactly the register-time refusals and warnings of the support table in its snapshot.
//! Re-bless with `INSTA_UPDATE=always cargo test -p drover-jobspec`.

#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a failure here is the assertion

use std::path::{Path, PathBuf};

use drover_jobspec::{
    Diagnostics, JobLocations, VarValues, parse_hcl_located, parse_json, support,
};

fn corpus_files(kind: &str) -> Vec<PathBuf> {
    let directory = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/corpus")
        .join(kind);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&directory)
        .unwrap_or_else(|error| panic!("cannot read {}: {error}", directory.display()))
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| {
            path.extension()
                .is_some_and(|extension| extension == "hcl" || extension == "json")
        })
        .collect();
    files.sort();
    files
}

fn parse_file(path: &Path) -> Result<drover_structs::Job, Diagnostics> {
    parse_file_located(path).map(|(job, _)| job)
}

fn parse_file_located(path: &Path) -> Result<(drover_structs::Job, JobLocations), Diagnostics> {
    let source = std::fs::read_to_string(path).expect("corpus file is readable");
    let filename = path
        .file_name()
        .map(|name| name.to_string_lossy().to_string())
        .unwrap_or_default();
    if path
        .extension()
        .is_some_and(|extension| extension == "json")
    {
        parse_json(&source, &filename).map(|job| (job, JobLocations::without_source(&filename)))
    } else {
        parse_hcl_located(&source, &filename, &VarValues::new())
    }
}

fn snapshot_name(path: &Path) -> String {
    path.file_name()
        .map(|name| name.to_string_lossy().replace('.', "_"))
        .unwrap_or_default()
}

#[test]
fn valid_jobspecs_parse_to_the_expected_job() {
    let files = corpus_files("valid");
    assert!(
        files.len() >= 30,
        "the valid corpus has only {} files",
        files.len()
    );
    let mut failures = Vec::new();
    for path in &files {
        match parse_file(path) {
            Ok(job) => {
                let json = serde_json::to_value(&job).expect("a job encodes");
                insta::with_settings!({ prepend_module_to_snapshot => false, snapshot_path => "corpus/snapshots/valid" }, {
                    insta::assert_json_snapshot!(snapshot_name(path), json);
                });
            }
            Err(diagnostics) => failures.push(format!("{}:\n{diagnostics}", path.display())),
        }
    }
    assert!(
        failures.is_empty(),
        "valid jobspecs were rejected:\n{}",
        failures.join("\n\n")
    );
}

#[test]
fn invalid_jobspecs_fail_with_the_expected_messages() {
    let files = corpus_files("invalid");
    assert!(
        files.len() >= 25,
        "the invalid corpus has only {} files",
        files.len()
    );
    let mut accepted = Vec::new();
    for path in &files {
        match parse_file(path) {
            Ok(_) => accepted.push(path.display().to_string()),
            Err(diagnostics) => {
                insta::with_settings!({ prepend_module_to_snapshot => false, snapshot_path => "corpus/snapshots/invalid" }, {
                    insta::assert_snapshot!(snapshot_name(path), diagnostics.to_string());
                });
            }
        }
    }
    assert!(
        accepted.is_empty(),
        "invalid jobspecs were accepted: {accepted:?}"
    );
}

#[test]
fn register_corpus_gets_the_expected_refusals_and_warnings() {
    let files = corpus_files("register");
    assert!(
        files.len() >= 4,
        "the register corpus has only {} files",
        files.len()
    );
    for path in &files {
        let (job, locations) = parse_file_located(path).unwrap_or_else(|diagnostics| {
            panic!("{} does not parse:\n{diagnostics}", path.display())
        });
        let report = support::check(&job);
        assert!(
            !report.refusals.is_empty() || !report.warnings.is_empty(),
            "{}: the support table finds nothing to refuse or warn about",
            path.display()
        );
        let text = format!(
            "refusals:\n{}\n\nwarnings:\n{}\n",
            locations.refusal_diagnostics(&report),
            report.warnings_text()
        );
        insta::with_settings!({ prepend_module_to_snapshot => false, snapshot_path => "corpus/snapshots/register" }, {
            insta::assert_snapshot!(snapshot_name(path), text);
        });
    }
}

/// Every example parses; one whose opening comment says it is "refused at register" is
/// refused by the support table, and every other one registers without a refusal.
#[test]
fn every_example_does_what_its_comment_says() {
    let directory = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut count = 0;
    let mut refused = 0;
    for entry in std::fs::read_dir(&directory).expect("examples directory exists") {
        let path = entry.expect("directory entry").path();
        if path.extension().is_none_or(|extension| extension != "hcl") {
            continue;
        }
        count += 1;
        let job = parse_file(&path).unwrap_or_else(|diagnostics| {
            panic!("{} does not validate:\n{diagnostics}", path.display())
        });
        let source = std::fs::read_to_string(&path).expect("example is readable");
        let header: String = source
            .lines()
            .take_while(|line| line.starts_with('#'))
            .collect::<Vec<_>>()
            .join(" ");
        let report = support::check(&job);
        if header.contains("refused at register") {
            refused += 1;
            assert!(
                !report.refusals.is_empty(),
                "{} says it is refused at register, but nothing in it is refused",
                path.display()
            );
        } else {
            assert!(
                report.refusals.is_empty(),
                "{} would be refused at register: {:?}",
                path.display(),
                report.refusals
            );
        }
    }
    assert!(count >= 6, "expected at least six examples, found {count}");
    // Refusals are shown in the docs (docs/vault.md), not by examples that cannot run.
    assert_eq!(refused, 0, "an example only shows a refusal");
}

/// docs/vault.md shows a job asking for Vault and the refusal its register gets: the job is
/// refused, in the words the page quotes.
#[test]
fn the_vault_page_quotes_the_refusal_its_job_gets() {
    let page =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/vault.md"))
            .expect("docs/vault.md is readable");
    let hcl = page
        .split("```hcl\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the page has an hcl block");
    let job = drover_jobspec::parse_hcl(hcl, "secret-web.hcl", &VarValues::new())
        .unwrap_or_else(|diagnostics| panic!("the page's job does not parse:\n{diagnostics}"));
    let report = support::check(&job);
    assert_eq!(report.refusals.len(), 1, "{:?}", report.refusals);
    let quoted = format!("\t* {}\n", report.refusals[0].message);
    assert!(
        page.contains(&quoted),
        "docs/vault.md does not quote the refusal {quoted:?}"
    );
}
