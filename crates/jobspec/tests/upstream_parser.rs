//! Nomad's own parser tests for what is newer than the reference binary (Nomad 1.1.2): the
//! cases of the current `jobspec2/parse_test.go` that 1.1.2 did not have, ported with the
//! values the upstream test asserts. Fixtures are copied unchanged under
//! `tests/corpus/upstream` (source and commit in its `SOURCES.md`).
//!
//! Nomad's `Parse` decodes without validating, so most cases read the decoded job JSON
//! (`decode_hcl_to_json`), which is what `/v1/jobs/parse` answers; the cases that need a
//! runnable job go through `parse_hcl`.
#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a failure here is the assertion

use std::path::Path;

use drover_jobspec::{VarValues, decode_hcl_to_json, parse_hcl};
use serde_json::{Value, json};

fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/corpus/upstream/jobspec2")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

fn decode_with(source: &str, values: &VarValues) -> Value {
    match decode_hcl_to_json(source, "input.hcl", values) {
        Ok((job, _)) => job,
        Err(diagnostics) => panic!("{diagnostics}"),
    }
}

fn decode(source: &str) -> Value {
    decode_with(source, &VarValues::new())
}

fn decode_error(source: &str, values: &VarValues) -> String {
    match decode_hcl_to_json(source, "input.hcl", values) {
        Ok((job, _)) => panic!("expected an error, decoded {job:#}"),
        Err(diagnostics) => diagnostics.to_string(),
    }
}

const SECOND_NANOS: i64 = 1_000_000_000;

/// `TestParse_ConnectJob`: an upstream's opaque `config` block keeps its typed values.
#[test]
fn connect_upstream_config_block() {
    let job = decode(&fixture("connect-example.hcl"));
    let upstream =
        &job["TaskGroups"][0]["Services"][0]["Connect"]["SidecarService"]["Proxy"]["Upstreams"][0];
    assert_eq!(upstream["Config"]["connect_timeout_ms"], json!(9999));
    assert_eq!(upstream["DestinationName"], "database");
    assert_eq!(upstream["LocalBindPort"], 5432);
}

/// `TestParse_InvalidHCL` "invalid body".
#[test]
fn invalid_body_is_an_error() {
    let message = decode_error("invalid{hcl", &VarValues::new());
    assert!(message.contains("input.hcl:1:"), "{message}");
}

/// `TestParse_InvalidHCL` "invalid vars file".
#[test]
fn invalid_var_file_is_an_error() {
    let mut values = VarValues::new();
    let error = values.add_var_file("invalid{hcl", "vars.hcl").unwrap_err();
    assert!(error.to_string().contains("vars.hcl:1:"), "{error}");
}

const CONSTRAINTS_OPERATOR_VALUE: &str = r#"
job "example" {
  constraint {
    operator = "distinct_hosts"
    value    = "true"
  }
  constraint {
    operator  = "distinct_property"
    attribute = "${meta.rack}"
    value     = "1"
  }
  group "group" {
    constraint {
      operator = "distinct_hosts"
      value    = "false"
    }
    constraint {
      operator  = "distinct_property"
      attribute = "${meta.rack}"
      value     = "2"
    }
    task "task" {
      constraint {
        operator = "distinct_hosts"
        value    = "true"
      }
      constraint {
        operator  = "distinct_property"
        attribute = "${meta.rack}"
        value     = "3"
      }
      driver = "config"
      config {}
    }
  }
}
"#;

const CONSTRAINTS_COMPACT: &str = r#"
job "example" {
  constraint {
    distinct_hosts = true
  }
  constraint {
    distinct_property = "${meta.rack}"
    value     = "1"
  }
  group "group" {
    constraint {
      distinct_hosts = false
    }
    constraint {
      distinct_property = "${meta.rack}"
      value     = "2"
    }
    task "task" {
      constraint {
        distinct_hosts = true
      }
      constraint {
        distinct_property = "${meta.rack}"
        value     = "3"
      }
      driver = "config"
      config {}
    }
  }
}
"#;

/// `TestParse_Constraint_Alternatives`: the `distinct_hosts` / `distinct_property` shortcuts
/// decode exactly as the operator/value form, the boolean kept as the right target.
#[test]
fn constraint_shortcuts_equal_operator_and_value() {
    let as_operator_value = decode(CONSTRAINTS_OPERATOR_VALUE);
    let as_compact = decode(CONSTRAINTS_COMPACT);
    assert_eq!(as_operator_value, as_compact);
    let constraint = |left: &str, right: &str, operand: &str| {
        let mut constraint = serde_json::Map::new();
        if !left.is_empty() {
            constraint.insert("LTarget".into(), json!(left));
        }
        constraint.insert("RTarget".into(), json!(right));
        constraint.insert("Operand".into(), json!(operand));
        Value::Object(constraint)
    };
    let group = &as_compact["TaskGroups"][0];
    let task = &group["Tasks"][0];
    assert_eq!(
        as_compact["Constraints"][0],
        constraint("", "true", "distinct_hosts")
    );
    assert_eq!(
        group["Constraints"][0],
        constraint("", "false", "distinct_hosts")
    );
    assert_eq!(
        task["Constraints"][0],
        constraint("", "true", "distinct_hosts")
    );
    assert_eq!(
        as_compact["Constraints"][1],
        constraint("${meta.rack}", "1", "distinct_property")
    );
    assert_eq!(
        group["Constraints"][1],
        constraint("${meta.rack}", "2", "distinct_property")
    );
    assert_eq!(
        task["Constraints"][1],
        constraint("${meta.rack}", "3", "distinct_property")
    );
}

/// `TestWaitConfig`: a template's `wait` block.
#[test]
fn template_wait_block() {
    let job = decode(&fixture("template-wait-config.hcl"));
    let wait = &job["TaskGroups"][0]["Tasks"][0]["Templates"][0]["Wait"];
    assert_eq!(wait["Min"], json!(5 * SECOND_NANOS));
    assert_eq!(wait["Max"], json!(60 * SECOND_NANOS));
}

/// `TestErrMissingKey`: a template's `error_on_missing_key`.
#[test]
fn template_error_on_missing_key() {
    let job = decode(&fixture("template-err-missing-key.hcl"));
    let template = &job["TaskGroups"][0]["Tasks"][0]["Templates"][0];
    assert_eq!(template["ErrMissingKey"], json!(true));
}

/// `TestRestartRenderTemplates`: `restart { render_templates }` in a group and a task; a task
/// without a `restart` block has none of its own, and an explicit `false` is kept.
#[test]
fn restart_render_templates() {
    let job = decode(&fixture("restart-render-templates.hcl"));
    let group = &job["TaskGroups"][0];
    assert_eq!(group["RestartPolicy"]["RenderTemplates"], json!(true));
    assert!(group["Tasks"][0]["RestartPolicy"].is_null());
    assert_eq!(
        group["Tasks"][1]["RestartPolicy"]["RenderTemplates"],
        json!(false)
    );
}

/// `TestIdentity`: the unnamed identity is the task's default `Identity`; a named one goes
/// into `Identities` with its audience, file, TTL and change mode.
#[test]
fn default_and_named_identities() {
    let job = decode(&fixture("identity-compat.nomad.hcl"));
    let task = &job["TaskGroups"][0]["Tasks"][0];
    assert_eq!(task["Identity"]["Env"], json!(true));
    assert_eq!(task["Identity"]["File"], json!(true));
    let identities = task["Identities"].as_array().unwrap();
    assert_eq!(identities.len(), 1);
    let named = &identities[0];
    assert_eq!(named["Name"], "foo");
    assert_eq!(named["Audience"], json!(["bar"]));
    assert_eq!(named["File"], json!(true));
    assert!(matches!(named.get("Env"), None | Some(Value::Bool(false))));
    assert_eq!(named["ChangeMode"], "signal");
    assert_eq!(named["ChangeSignal"], "sighup");
    assert_eq!(named["TTL"], json!(2 * 3600 * SECOND_NANOS));

    // The same job through the whole pipeline (defaults, validation) keeps both identities.
    let parsed = parse_hcl(&fixture("identity-compat.nomad.hcl"), "id.hcl", &VarValues::new())
        .unwrap_or_else(|diagnostics| panic!("{diagnostics}"));
    let task = &parsed.task_groups[0].tasks[0];
    let parsed_json = serde_json::to_value(task).unwrap();
    assert_eq!(parsed_json["Identity"]["Env"], json!(true));
    assert_eq!(parsed_json["Identity"]["File"], json!(true));
    assert_eq!(parsed_json["Identities"][0]["Name"], "foo");
    assert_eq!(
        parsed_json["Identities"][0]["TTL"],
        json!(2 * 3600 * SECOND_NANOS)
    );
}

const SUBMISSION_JOBSPEC: &str = r#"
# will come from -var args, overriding env
variable "region" {
  type = string
}

# will come from env
variable "pool" {
  type = string
}

# will come from var content
variable "datacenters" {
  type = list(string)
}

# will come from var file
variable "ns" {
  type = string
}

job "example" {
  datacenters = var.datacenters
  region      = var.region
  node_pool   = var.pool
  namespace   = var.ns
}
"#;

/// `TestParse_VariablesSubmission`, its parse: `-var` wins over `NOMAD_VAR_*`, and variables
/// also come from var content (the API's `Variables` text) and var files.
#[test]
fn variables_from_every_source() {
    let mut values = VarValues::new();
    values.add_environment([("NOMAD_VAR_region".to_string(), "seattle".to_string())]);
    values.set_assignment("region=philly").unwrap();
    values.set_assignment("pool=prod").unwrap();
    values
        .add_var_file(r#"datacenters = ["dc1", "dc2"]"#, "content.hcl")
        .unwrap();
    values.add_var_file(r#"ns = "infra""#, "vars.hcl").unwrap();
    let job = decode_with(SUBMISSION_JOBSPEC, &values);
    assert_eq!(job["Namespace"], "infra");
    assert_eq!(job["NodePool"], "prod");
    assert_eq!(job["Datacenters"], json!(["dc1", "dc2"]));
    assert_eq!(job["Region"], "philly");
}

/// `Test_extractJobSpecEnvVars`: only `NOMAD_VAR_<name>` with a non-empty name is a variable,
/// whitespace included in name and value as written, an empty value kept.
#[test]
fn environment_variables_are_taken_as_written() {
    let jobspec = |name: &str| {
        format!(
            "variable {name:?} {{\n  type = string\n}}\njob \"e\" {{\n  region = var.{name}\n}}\n"
        )
    };
    let split = |entries: &[&str]| -> Vec<(String, String)> {
        entries
            .iter()
            .filter_map(|entry| entry.split_once('='))
            .map(|(key, value)| (key.to_string(), value.to_string()))
            .collect()
    };

    let mut values = VarValues::new();
    values.add_environment(split(&[
        "NOMAD_VAR_count=13",
        "GOPATH=/Users/jrasell/go",
        "NOMAD_VAR_image=redis:7",
    ]));
    assert_eq!(decode_with(&jobspec("count"), &values)["Region"], "13");
    assert_eq!(decode_with(&jobspec("image"), &values)["Region"], "redis:7");
    let message = decode_error(&jobspec("GOPATH"), &values);
    assert!(message.contains("GOPATH"), "{message}");

    // "whitespace": `NOMAD_VAR_count = 13` names the variable `count ` (not an identifier a
    // jobspec can declare), so `count` stays unset.
    let mut values = VarValues::new();
    values.add_environment(split(&["NOMAD_VAR_count = 13", "GOPATH = /Users/jrasell/go"]));
    let message = decode_error(&jobspec("count"), &values);
    assert!(message.contains("count"), "{message}");

    // "empty value".
    let mut values = VarValues::new();
    values.add_environment(split(&["NOMAD_VAR_count=", "GOPATH="]));
    assert_eq!(decode_with(&jobspec("count"), &values)["Region"], "");
}

fn job_with_validation_message(message: &str) -> String {
    format!(
        r#"
variable "build_id" {{
  type    = string
  default = "12345"
  validation {{
    condition     = var.build_id != ""
    error_message = "{message}"
  }}
}}

job "example" {{
  datacenters = ["dc1"]
}}
"#
    )
}

/// `TestParse_VariableValidationErrorMessage`: any non-blank message is accepted (non-English,
/// no trailing period); an empty or blank one is an error.
#[test]
fn variable_validation_error_messages() {
    for accepted in ["ビルド番号を確認してください", "build id is required"] {
        decode(&job_with_validation_message(accepted));
    }
    for rejected in ["", "   "] {
        let message = decode_error(&job_with_validation_message(rejected), &VarValues::new());
        assert!(message.contains("error_message"), "{rejected:?}: {message}");
    }
}
