//! The conformance table: every case in `fixtures/conformance.jsonl` rendered as Go 1.19's
//! `text/template` rendered it (the fixture's header names the command that made it), output
//! and error text alike.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use drover_template::{Template, Value};

#[derive(serde::Deserialize)]
struct Case {
    name: String,
    template: String,
    #[serde(default)]
    left: String,
    #[serde(default)]
    right: String,
    #[serde(default)]
    missingkey_error: bool,
    output: String,
    #[serde(default)]
    error: String,
}

fn run(case: &Case, data: &Value) -> Result<String, String> {
    let mut template = Template::new("t");
    template.delims(&case.left, &case.right);
    template.missing_key_error = case.missingkey_error;
    template
        .parse(&case.template)
        .map_err(|error| error.to_string())?;
    template.execute(data).map_err(|error| error.to_string())
}

#[test]
fn every_case_renders_as_go_does() {
    let fixture = include_str!("fixtures/conformance.jsonl");
    let mut data = None;
    let mut failures = Vec::new();
    let mut count = 0;
    for line in fixture.lines() {
        if let Some(json) = line.strip_prefix("# data: ") {
            data = Some(Value::from_json(&serde_json::from_str(json).unwrap()));
            continue;
        }
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let case: Case = serde_json::from_str(line).unwrap();
        let data = data.as_ref().expect("the data line comes before the cases");
        count += 1;
        let got = run(&case, data);
        let matches = match &got {
            Ok(output) => case.error.is_empty() && *output == case.output,
            Err(error) => *error == case.error,
        };
        if !matches {
            failures.push(format!(
                "{}: {:?}\n  go:   {:?}\n  ours: {:?}",
                case.name,
                case.template,
                if case.error.is_empty() {
                    &case.output
                } else {
                    &case.error
                },
                got
            ));
        }
    }
    assert!(count > 100, "only {count} cases read");
    assert!(
        failures.is_empty(),
        "{} of {count} cases differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Every prefix of every case (cut templates: unclosed actions, strings, comments, parens)
/// ends in an output or an error, never a panic.
#[test]
fn truncated_templates_fail_cleanly() {
    let fixture = include_str!("fixtures/conformance.jsonl");
    let data = Value::List(vec![Value::Int(1), Value::from("x")]);
    let mut runs = 0;
    for line in fixture.lines().filter(|line| line.starts_with('{')) {
        let case: Case = serde_json::from_str(line).unwrap();
        for (cut, _) in case.template.char_indices() {
            let prefix = Case {
                template: case.template[..cut].to_string(),
                ..serde_json::from_str(line).unwrap()
            };
            let _ = run(&prefix, &data);
            runs += 1;
        }
    }
    assert!(runs > 1000, "only {runs} prefixes run");
}
