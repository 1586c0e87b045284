//! Input variables from outside the jobspec: `-var` text, var files and `NOMAD_VAR_*`, with
//! their precedence, type conversion and errors.
#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a failure here is the assertion

use drover_jobspec::{VarValues, parse_hcl};

const JOBSPEC: &str = r#"
variable "replicas" {
  type    = number
  default = 1
}

variable "message" {
  type    = string
  default = "from default"
}

variable "zones" {
  type    = list(string)
  default = []
}

job "vars" {
  datacenters = length(var.zones) > 0 ? var.zones : ["*"]
  group "app" {
    count = var.replicas
    task "app" {
      driver = "raw_exec"
      config {
        command = "/bin/echo"
        args    = [var.message]
      }
    }
  }
}
"#;

fn first_arg(job: &drover_structs::Job) -> String {
    let config = &job.task_groups[0].tasks[0].config;
    config["args"][0].as_str().unwrap_or_default().to_string()
}

#[test]
fn defaults_apply_when_nothing_is_passed() {
    let job = parse_hcl(JOBSPEC, "vars.hcl", &VarValues::new()).unwrap();
    assert_eq!(job.task_groups[0].count, 1);
    assert_eq!(first_arg(&job), "from default");
    assert_eq!(job.datacenters, vec!["*".to_string()]);
}

#[test]
fn command_line_text_is_converted_to_the_declared_type() {
    let mut values = VarValues::new();
    values.set_assignment("replicas=3").unwrap();
    values.set_assignment("message=hello=world").unwrap();
    values.set_text("zones", r#"["dc1", "dc2"]"#);
    let job = parse_hcl(JOBSPEC, "vars.hcl", &values).unwrap();
    assert_eq!(job.task_groups[0].count, 3);
    assert_eq!(first_arg(&job), "hello=world");
    assert_eq!(job.datacenters, vec!["dc1".to_string(), "dc2".to_string()]);
}

#[test]
fn explicit_values_beat_var_files_read_earlier_and_the_environment() {
    let mut values = VarValues::new();
    values.add_environment([
        (
            "NOMAD_VAR_message".to_string(),
            "from environment".to_string(),
        ),
        ("NOMAD_VAR_undeclared".to_string(), "ignored".to_string()),
        ("PATH".to_string(), "/bin".to_string()),
    ]);
    let job = parse_hcl(JOBSPEC, "vars.hcl", &values).unwrap();
    assert_eq!(first_arg(&job), "from environment");

    values
        .add_var_file("message = \"from file\"\nreplicas = 4\n", "prod.vars.hcl")
        .unwrap();
    let job = parse_hcl(JOBSPEC, "vars.hcl", &values).unwrap();
    assert_eq!(first_arg(&job), "from file");
    assert_eq!(job.task_groups[0].count, 4);

    values.set_text("message", "from flag");
    let job = parse_hcl(JOBSPEC, "vars.hcl", &values).unwrap();
    assert_eq!(first_arg(&job), "from flag");
}

#[test]
fn bad_values_and_undeclared_names_are_reported_together() {
    let mut values = VarValues::new();
    values.set_text("replicas", "three");
    values.set_text("colour", "blue");
    let error = parse_hcl(JOBSPEC, "vars.hcl", &values).unwrap_err();
    assert_eq!(
        error.to_string(),
        "vars.hcl:2:1: variable \"replicas\": the value given is not valid: a number is required, got \"three\"\n\
         vars.hcl: a value was given for variable \"colour\", which the jobspec does not declare"
    );
}

#[test]
fn var_files_hold_only_assignments() {
    let mut values = VarValues::new();
    let error = values
        .add_var_file("replicas = 2\nblock {\n}\n", "bad.vars.hcl")
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "bad.vars.hcl:2:1: a variables file may only contain assignments, not a \"block\" block"
    );
    assert!(VarValues::new().set_assignment("no-equals-sign").is_err());
}

#[test]
fn variable_validation_blocks_check_the_value_given() {
    let source = r#"variable "count" {
  type    = number
  default = 2
  validation {
    condition     = var.count > 0 && var.count <= 5
    error_message = "The count must be between 1 and 5."
  }
}
variable "region" {
  default = "eu-west"
  validation {
    condition     = substr(var.region, 0, 3) == "eu-"
    error_message = "Only EU regions."
  }
}
job "v" {
  group "g" {
    count = var.count
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
    }
  }
}
"#;
    let job = drover_jobspec::parse_hcl(source, "v.hcl", &VarValues::new())
        .expect("the defaults pass their validations");
    assert_eq!(job.task_groups[0].count, 2);

    let mut values = VarValues::new();
    values.set_text("count", "9");
    let error = drover_jobspec::parse_hcl(source, "v.hcl", &values)
        .expect_err("9 fails the validation")
        .to_string();
    assert_eq!(
        error,
        "v.hcl:4:3: variable \"count\": invalid value: The count must be between 1 and 5."
    );

    let bad = source.replace("var.count > 0 && var.count <= 5", "var.region != \"\"");
    let error = drover_jobspec::parse_hcl(&bad, "v.hcl", &VarValues::new())
        .expect_err("a condition must test its own variable")
        .to_string();
    assert!(
        error.contains(
            "v.hcl:5:21: variable \"count\": validation: the condition must refer to var.count"
        ),
        "{error}"
    );
}
