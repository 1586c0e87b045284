//! The real public jobs of the corpus (Nomad's end-to-end jobs, demos and examples, not its
//! parser fixtures, which are not meant to be whole valid jobs) pass drover's parse and
//! validation, as they pass Nomad's. Register-time refusals of the support table are not part
//! of this: a job using Consul Connect validates and is then refused at register by name.

#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a failure here is the assertion

use drover_jobspec::{VarValues, parse_hcl};

/// Public jobs that break validation rules Nomad added after the release they were written
/// for, and the ones written to be refused (Nomad's scaling e2e registers them to see them
/// fail), with the rules.
const BREAK_NEWER_RULES: &[(&str, &[&str])] = &[
    (
        "hashicorp__nomad__e2e_scaling_input_namespace_default_2.hcl",
        &["task group count must not be greater than maximum count in scaling policy"],
    ),
    (
        "hashicorp__nomad__e2e_scaling_input_namespace_default_3.hcl",
        &["task group count must not be less than minimum count in scaling policy"],
    ),
    (
        "hashicorp__nomad__e2e_rescheduling_input_rescheduling_canary_autorevert.hcl",
        &["kill_timeout (5s) is longer than the group's update.progress_deadline (3s)"],
    ),
    (
        "hashicorp__nomad__e2e_rescheduling_input_rescheduling_maxp_autorevert.hcl",
        &["kill_timeout (5s) is longer than the group's update.progress_deadline (3s)"],
    ),
    // Written for Nomad 0.11; since 1.1 a CSI volume request names both modes.
    (
        "hashicorp__nomad__demo_csi_digitalocean_volume-job.hcl",
        &[
            "CSI volumes must have an attachment mode",
            "CSI volumes must have an access mode",
        ],
    ),
];

fn is_parser_fixture(name: &str) -> bool {
    name.contains("__jobspec_test-fixtures_") || name.contains("__jobspec2_test-fixtures_")
}

#[test]
fn public_jobs_pass_validation_as_in_nomad() {
    let directory = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/public");
    let mut paths: Vec<_> = std::fs::read_dir(&directory)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|extension| extension == "hcl"))
        .collect();
    paths.sort();
    let mut checked = 0;
    let mut failures = Vec::new();
    for path in paths {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if is_parser_fixture(&name) {
            continue;
        }
        checked += 1;
        let source = std::fs::read_to_string(&path).unwrap();
        let expected = BREAK_NEWER_RULES
            .iter()
            .find(|(file, _)| *file == name)
            .map(|(_, messages)| *messages);
        match (parse_hcl(&source, &name, &VarValues::new()), expected) {
            (Ok(_), None) => {}
            (Ok(_), Some(messages)) => {
                failures.push(format!(
                    "{name}: expected the errors {messages:?}, it validates"
                ));
            }
            (Err(error), Some(messages))
                if messages
                    .iter()
                    .all(|message| error.to_string().contains(message)) =>
            {
                assert_eq!(
                    error.0.len(),
                    messages.len(),
                    "{name}: only the newer rules fail:\n{error}"
                );
            }
            (Err(error), _) => failures.push(format!("{name}:\n{error}")),
        }
    }
    assert!(checked >= 100, "only {checked} public jobs checked");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
