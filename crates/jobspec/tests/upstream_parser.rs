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
/// decode as the operator/value form. One difference from the current Go test, on purpose:
/// `distinct_hosts = true` leaves RTarget empty, as the reference Nomad 1.1 decodes it (Nomad
/// 1.6 and later write "true"; every scheduler reads both as on). `false` is "false" in both.
#[test]
fn constraint_shortcuts_equal_operator_and_value() {
    let mut as_operator_value = decode(CONSTRAINTS_OPERATOR_VALUE);
    let as_compact = decode(CONSTRAINTS_COMPACT);
    // The operator/value form keeps the "true" it was given; the shortcut leaves it empty.
    for pointer in ["/Constraints/0", "/TaskGroups/0/Tasks/0/Constraints/0"] {
        if let Some(Value::Object(constraint)) = as_operator_value.pointer_mut(pointer) {
            assert_eq!(constraint.remove("RTarget"), Some(json!("true")));
        }
    }
    assert_eq!(as_operator_value, as_compact);
    let constraint = |left: &str, right: &str, operand: &str| {
        let mut constraint = serde_json::Map::new();
        if !left.is_empty() {
            constraint.insert("LTarget".into(), json!(left));
        }
        if !right.is_empty() {
            constraint.insert("RTarget".into(), json!(right));
        }
        constraint.insert("Operand".into(), json!(operand));
        Value::Object(constraint)
    };
    let group = &as_compact["TaskGroups"][0];
    let task = &group["Tasks"][0];
    assert_eq!(
        as_compact["Constraints"][0],
        constraint("", "", "distinct_hosts")
    );
    assert_eq!(
        group["Constraints"][0],
        constraint("", "false", "distinct_hosts")
    );
    assert_eq!(task["Constraints"][0], constraint("", "", "distinct_hosts"));
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
    let parsed = parse_hcl(
        &fixture("identity-compat.nomad.hcl"),
        "id.hcl",
        &VarValues::new(),
    )
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
    values.add_environment(split(&[
        "NOMAD_VAR_count = 13",
        "GOPATH = /Users/jrasell/go",
    ]));
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

// Nomad's HCL1 parser tests (`jobspec/parse_test.go`, last at commit
// 4972b7382da24eb81d7eafb7e2cf1b2d1b853dd5, just before HCL1 was removed), whose fixtures the
// HCL2 parser was held equal to (`TestEquivalentToHCL1`): the cases and fields newer than
// 1.1.2, with the values `TestParse` asserts.

fn hcl1_era_fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/corpus/upstream/jobspec")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

fn decode_hcl1_era(name: &str) -> Value {
    match decode_hcl_to_json(&hcl1_era_fixture(name), name, &VarValues::new()) {
        Ok((job, _)) => job,
        Err(diagnostics) => panic!("{diagnostics}"),
    }
}

/// A missing key or an explicit zero value: Go's `false`/`""`/`0` behind a pointer reads the
/// same to the server as an absent one.
fn zero_or_absent(value: &Value) -> bool {
    matches!(value, Value::Null | Value::Bool(false))
        || value.as_str() == Some("")
        || value.as_i64() == Some(0)
}

/// `TestParse` "basic.hcl": its fields newer than 1.1.2. The job-level `consul_token` and
/// `vault_token` it still carried were removed from Nomad's jobspec since (1.10), and are
/// refused here as the current parser refuses them; the rest is read without those lines.
#[test]
fn hcl1_basic_newer_fields() {
    let source = hcl1_era_fixture("basic.hcl");
    let refused = decode_error(&source, &VarValues::new());
    assert!(refused.contains("consul_token"), "{refused}");
    assert!(refused.contains("vault_token"), "{refused}");
    let source: String = source
        .lines()
        .filter(|line| !line.contains("consul_token") && !line.contains("vault_token"))
        .map(|line| format!("{line}\n"))
        .collect();
    let job = decode(&source);
    assert_eq!(job["NodePool"], "dev");

    assert_eq!(job["TaskGroups"][0]["Name"], "outside");
    let group = &job["TaskGroups"][1];
    assert_eq!(group["Name"], "binsl");
    let bar = &group["Volumes"]["bar"];
    assert_eq!(bar["AccessMode"], "single-mode-writer");
    assert_eq!(bar["AttachmentMode"], "file-system");
    assert_eq!(bar["ReadOnly"], json!(true));
    assert_eq!(bar["MountOptions"]["FSType"], "ext4");
    let baz = &group["Volumes"]["baz"];
    assert_eq!(baz["PerAlloc"], json!(true));
    assert_eq!(baz["MountOptions"]["MountFlags"], json!(["ro"]));
    assert_eq!(group["RestartPolicy"]["RenderTemplates"], json!(false));
    assert_eq!(
        group["StopAfterClientDisconnect"],
        json!(120 * SECOND_NANOS)
    );
    assert_eq!(
        group["MaxClientDisconnect"],
        json!(120 * 3600 * SECOND_NANOS)
    );
    assert_eq!(
        group["Disconnect"],
        json!({
            "StopOnClientAfter": 120 * SECOND_NANOS,
            "LostAfter": 120 * 3600 * SECOND_NANOS,
            "Replace": true,
            "Reconcile": "best_score",
        })
    );

    let task = &group["Tasks"][0];
    assert_eq!(task["Name"], "binstore");
    assert!(zero_or_absent(&task["LogConfig"]["Disabled"]));
    assert_eq!(task["LogConfig"]["MaxFiles"], 14);
    assert_eq!(task["LogConfig"]["MaxFileSizeMB"], 101);
    assert!(zero_or_absent(&task["Vault"]["DisableFile"]));
    let templates = &task["Templates"];
    assert_eq!(templates[0]["ErrMissingKey"], json!(true));
    assert_eq!(templates[1]["ChangeMode"], "script");
    assert_eq!(templates[1]["ChangeScript"]["Command"], "/bin/foo");
    assert_eq!(
        templates[1]["ChangeScript"]["Args"],
        json!(["-debug", "-verbose"])
    );
    assert_eq!(
        templates[1]["ChangeScript"]["Timeout"],
        json!(5 * SECOND_NANOS)
    );
    assert!(zero_or_absent(&templates[1]["ChangeScript"]["FailOnError"]));
    assert_eq!(templates[1]["Uid"], 1001);
    assert_eq!(templates[1]["Gid"], 20);
    assert_eq!(templates[1]["Perms"], "777");
    assert!(zero_or_absent(&templates[1]["ErrMissingKey"]));

    let sidecar = &group["Tasks"][1];
    assert_eq!(sidecar["Name"], "storagelocker");
    assert_eq!(sidecar["Vault"]["ChangeMode"], "signal");
    assert_eq!(sidecar["Vault"]["ChangeSignal"], "SIGUSR1");
    assert_eq!(sidecar["Vault"]["Env"], json!(false));
    assert!(zero_or_absent(&sidecar["Vault"]["DisableFile"]));
}

/// `TestParse` "periodic-crons.hcl": several cron expressions.
#[test]
fn hcl1_periodic_crons() {
    let job = decode_hcl1_era("periodic-crons.hcl");
    let periodic = &job["Periodic"];
    assert_eq!(periodic["Specs"], json!(["*/5 * * *", "*/7 * * *"]));
    assert_eq!(periodic["ProhibitOverlap"], json!(true));
    assert_eq!(periodic["TimeZone"], "Europe/Minsk");
    assert!(matches!(periodic["SpecType"].as_str(), None | Some("cron")));
    assert!(zero_or_absent(&periodic["Spec"]));
}

/// `TestParse` "artifacts.hcl": an artifact's `headers`.
#[test]
fn hcl1_artifact_headers() {
    let job = decode_hcl1_era("artifacts.hcl");
    let artifacts = job["TaskGroups"][0]["Tasks"][0]["Artifacts"]
        .as_array()
        .unwrap();
    assert_eq!(artifacts.len(), 4);
    assert_eq!(artifacts[0]["GetterOptions"], json!({"foo": "bar"}));
    assert_eq!(artifacts[2]["RelativeDest"], "var/foo");
    assert_eq!(artifacts[3]["GetterSource"], "https://example.com/file.txt");
    assert_eq!(
        artifacts[3]["GetterHeaders"],
        json!({"User-Agent": "nomad", "X-Nomad-Alloc": "alloc"})
    );
}

/// `TestParse` "csi-plugin.hcl": the plugin's `health_timeout`.
#[test]
fn hcl1_csi_plugin_health_timeout() {
    let job = decode_hcl1_era("csi-plugin.hcl");
    let plugin = &job["TaskGroups"][0]["Tasks"][0]["CSIPluginConfig"];
    assert_eq!(plugin["ID"], "org.hashicorp.csi");
    assert_eq!(plugin["Type"], "monolith");
    assert_eq!(plugin["MountDir"], "/csi/test");
    assert_eq!(plugin["HealthTimeout"], json!(60 * SECOND_NANOS));
}

/// `TestParse` "service-check-pass-fail.hcl": `failures_before_warning`.
#[test]
fn hcl1_check_failures_before_warning() {
    let job = decode_hcl1_era("service-check-pass-fail.hcl");
    let check = &job["TaskGroups"][0]["Tasks"][0]["Services"][0]["Checks"][0];
    assert_eq!(check["SuccessBeforePassing"], 3);
    assert_eq!(check["FailuresBeforeCritical"], 4);
    assert_eq!(check["FailuresBeforeWarning"], 2);
    assert_eq!(check["InitialStatus"], "passing");
    assert_eq!(check["Method"], "POST");
}

/// `TestParse` "vault_inheritance.hcl": a task's own `vault { disable_file }`; the job's and
/// group's blocks are copied into tasks without one.
#[test]
fn hcl1_vault_disable_file_and_inheritance() {
    let job = decode_hcl1_era("vault_inheritance.hcl");
    let cache = &job["TaskGroups"][0];
    assert_eq!(cache["Tasks"][0]["Vault"]["Policies"], json!(["group"]));
    assert!(zero_or_absent(&cache["Tasks"][0]["Vault"]["DisableFile"]));
    assert_eq!(cache["Tasks"][1]["Vault"]["Policies"], json!(["task"]));
    assert_eq!(cache["Tasks"][1]["Vault"]["Env"], json!(false));
    assert_eq!(cache["Tasks"][1]["Vault"]["DisableFile"], json!(true));
    assert_eq!(
        job["TaskGroups"][1]["Tasks"][0]["Vault"]["Policies"],
        json!(["job"])
    );
}

/// `TestParse` "service-tagged-address.hcl".
#[test]
fn hcl1_service_tagged_addresses() {
    let job = decode_hcl1_era("service-tagged-address.hcl");
    assert_eq!(
        job["TaskGroups"][0]["Services"][0]["TaggedAddresses"],
        json!({"public_wan": "1.2.3.4"})
    );
}

/// `TestParse` "tg-network.hcl": an upstream's peer, partition, type, bind address and socket,
/// datacenter and mesh gateway; the network's `dns`; a port's `host_network`.
#[test]
fn hcl1_group_network_and_upstream() {
    let job = decode_hcl1_era("tg-network.hcl");
    let group = &job["TaskGroups"][0];
    assert_eq!(group["ShutdownDelay"], json!(14 * SECOND_NANOS));
    let network = &group["Networks"][0];
    assert_eq!(network["Mode"], "bridge");
    assert_eq!(
        network["ReservedPorts"],
        json!([{"Label": "http", "Value": 80, "To": 8080, "HostNetwork": "public"}])
    );
    assert_eq!(network["DNS"]["Servers"], json!(["8.8.8.8"]));
    assert_eq!(network["DNS"]["Options"], json!(["ndots:2", "edns0"]));
    let connect = &group["Services"][0]["Connect"];
    let upstream = &connect["SidecarService"]["Proxy"]["Upstreams"][0];
    assert_eq!(
        upstream,
        &json!({
            "DestinationName": "other-service",
            "DestinationPeer": "10.0.0.1:6379",
            "DestinationPartition": "infra",
            "DestinationType": "tcp",
            "LocalBindPort": 4567,
            "LocalBindAddress": "0.0.0.0",
            "LocalBindSocketPath": "/var/run/testsocket.sock",
            "LocalBindSocketMode": "0666",
            "Datacenter": "dc1",
            "MeshGateway": {"Mode": "local"},
        })
    );
    assert_eq!(connect["SidecarService"]["Proxy"]["LocalServicePort"], 8080);
    let sidecar_task = &connect["SidecarTask"];
    assert_eq!(sidecar_task["Resources"]["CPU"], 500);
    assert_eq!(sidecar_task["Resources"]["MemoryMB"], 1024);
    assert_eq!(sidecar_task["Env"], json!({"FOO": "abc"}));
    assert_eq!(sidecar_task["ShutdownDelay"], json!(5 * SECOND_NANOS));
}

/// `TestParse` "tg-service-check.hcl": `on_update` on a service and a check, a check's `body`.
#[test]
fn hcl1_group_service_check_on_update_and_body() {
    let job = decode_hcl1_era("tg-service-check.hcl");
    let service = &job["TaskGroups"][0]["Services"][0];
    assert_eq!(service["OnUpdate"], "ignore");
    let check = &service["Checks"][0];
    assert_eq!(check["Type"], "script");
    assert_eq!(check["Command"], "/bin/true");
    assert_eq!(check["TaskName"], "foo");
    assert_eq!(check["OnUpdate"], "ignore");
    assert_eq!(check["Body"], "post body");
}

/// `TestParse` "tg-service-connect-sidecar_meta.hcl": a sidecar service's `meta`.
#[test]
fn hcl1_sidecar_service_meta() {
    let job = decode_hcl1_era("tg-service-connect-sidecar_meta.hcl");
    assert_eq!(
        job["TaskGroups"][0]["Services"][0]["Connect"]["SidecarService"]["Meta"],
        json!({
            "test-key": "test-value",
            "test-key1": "test-value1",
            "test-key2": "test-value2",
        })
    );
}

/// `TestParse` "tg-service-connect-resources.hcl": a sidecar task's `memory_max`.
#[test]
fn hcl1_sidecar_task_resources() {
    let job = decode_hcl1_era("tg-service-connect-resources.hcl");
    assert_eq!(
        job["TaskGroups"][0]["Services"][0]["Connect"]["SidecarTask"]["Resources"],
        json!({"CPU": 111, "MemoryMB": 222, "MemoryMaxMB": 333})
    );
}

/// `TestParse` "tg-service-connect-proxy.hcl": the proxy's `transparent_proxy`.
#[test]
fn hcl1_transparent_proxy() {
    let job = decode_hcl1_era("tg-service-connect-proxy.hcl");
    let proxy = &job["TaskGroups"][0]["Services"][0]["Connect"]["SidecarService"]["Proxy"];
    assert_eq!(
        proxy["TransparentProxy"],
        json!({
            "UID": "101",
            "OutboundPort": 15001,
            "ExcludeInboundPorts": ["www", "9000"],
            "ExcludeOutboundPorts": [443, 80],
            "ExcludeOutboundCIDRs": ["10.0.0.0/8"],
            "ExcludeUIDs": ["10", "1001"],
            "NoDNS": true,
        })
    );
    assert_eq!(proxy["LocalServiceAddress"], "10.0.1.2");
    assert_eq!(proxy["Config"], json!({"foo": "bar"}));
    assert_eq!(proxy["Expose"]["Paths"][1]["ListenerPort"], "health");
    assert_eq!(proxy["Upstreams"][1]["LocalBindPort"], 2002);
}

/// `TestParse` "tg-service-connect-gateway-ingress.hcl": the gateway's TLS versions and
/// ciphers, and a listener service's TLS (SDS), header modifiers and connection limits.
#[test]
fn hcl1_ingress_gateway() {
    let job = decode_hcl1_era("tg-service-connect-gateway-ingress.hcl");
    let gateway = &job["TaskGroups"][0]["Services"][0]["Connect"]["Gateway"];
    assert_eq!(gateway["Proxy"]["ConnectTimeout"], json!(3 * SECOND_NANOS));
    assert_eq!(
        gateway["Proxy"]["EnvoyGatewayBindAddresses"]["listener2"],
        json!({"Name": "listener2", "Address": "10.0.0.2", "Port": 8889})
    );
    assert_eq!(gateway["Proxy"]["EnvoyGatewayNoDefaultBind"], json!(true));
    let ingress = &gateway["Ingress"];
    assert_eq!(
        ingress["TLS"],
        json!({
            "Enabled": true,
            "TLSMinVersion": "TLSv1_2",
            "CipherSuites": ["TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"],
        })
    );
    assert_eq!(
        ingress["Listeners"][0]["Services"][0]["Hosts"],
        json!(["127.0.0.1:8001", "[::1]:8001"])
    );
    let nginx = &ingress["Listeners"][1]["Services"][0];
    assert_eq!(nginx["Name"], "nginx");
    assert_eq!(
        nginx["TLS"],
        json!({"SDS": {"ClusterName": "foo", "CertResource": "bar"}})
    );
    assert_eq!(
        nginx["RequestHeaders"],
        json!({"Add": {"test": "testvalue"}})
    );
    assert_eq!(nginx["ResponseHeaders"], json!({"Remove": ["test2"]}));
    assert_eq!(nginx["MaxConnections"], 5120);
    assert_eq!(nginx["MaxPendingRequests"], 512);
    assert_eq!(nginx["MaxConcurrentRequests"], 2048);
}

/// `TestParse` "tg-service-connect-gateway-terminating.hcl": a terminating gateway's linked
/// services and the proxy's DNS discovery type.
#[test]
fn hcl1_terminating_gateway() {
    let job = decode_hcl1_era("tg-service-connect-gateway-terminating.hcl");
    let gateway = &job["TaskGroups"][0]["Services"][0]["Connect"]["Gateway"];
    assert_eq!(gateway["Proxy"]["EnvoyDNSDiscoveryType"], "LOGICAL_DNS");
    assert_eq!(
        gateway["Terminating"]["Services"],
        json!([
            {"Name": "service1", "CAFile": "ca.pem", "CertFile": "cert.pem", "KeyFile": "key.pem"},
            {"Name": "service2", "SNI": "myhost"},
        ])
    );
}

/// `TestParse` "tg-service-connect-gateway-mesh.hcl": a mesh gateway (an empty `mesh` block).
#[test]
fn hcl1_mesh_gateway() {
    let job = decode_hcl1_era("tg-service-connect-gateway-mesh.hcl");
    let gateway = &job["TaskGroups"][0]["Services"][0]["Connect"]["Gateway"];
    assert_eq!(gateway["Proxy"]["Config"], json!({"foo": "bar"}));
    assert_eq!(gateway["Mesh"], json!({}));
}

/// `TestParse` "consul-namespace.hcl": a group's `consul { namespace }`.
#[test]
fn hcl1_group_consul_namespace() {
    let job = decode_hcl1_era("consul-namespace.hcl");
    assert_eq!(job["TaskGroups"][0]["Consul"]["Namespace"], "foo");
}

/// `TestParse` "resources-cores.hcl".
#[test]
fn hcl1_resources_cores() {
    let job = decode_hcl1_era("resources-cores.hcl");
    let group = &job["TaskGroups"][0];
    assert_eq!(group["Count"], 5);
    assert_eq!(
        group["Tasks"][0]["Resources"],
        json!({"Cores": 4, "MemoryMB": 128})
    );
}

/// `TestParse` "service-provider.hcl".
#[test]
fn hcl1_service_provider() {
    let job = decode_hcl1_era("service-provider.hcl");
    let service = &job["TaskGroups"][0]["Tasks"][0]["Services"][0];
    assert_eq!(service["Name"], "service-provider");
    assert_eq!(service["Provider"], "nomad");
}

/// `TestBadPorts` (its `parse-ports.hcl` part): a static and a dynamic port.
#[test]
fn hcl1_parse_ports() {
    let job = decode_hcl1_era("parse-ports.hcl");
    let network = &job["TaskGroups"][0]["Networks"][0];
    assert_eq!(network["ReservedPorts"].as_array().unwrap().len(), 1);
    assert_eq!(network["DynamicPorts"].as_array().unwrap().len(), 1);
    assert_eq!(network["ReservedPorts"][0]["Value"], 9000);
    assert!(zero_or_absent(&network["DynamicPorts"][0]["Value"]));
}

/// "tg-network-with-hostname.hcl" (held equal across both parsers by `TestEquivalentToHCL1`):
/// a network's `hostname`.
#[test]
fn hcl1_network_hostname() {
    let job = decode_hcl1_era("tg-network-with-hostname.hcl");
    let network = &job["TaskGroups"][0]["Networks"][0];
    assert_eq!(network["Hostname"], "foobar");
    assert_eq!(network["Mode"], "bridge");
    assert_eq!(network["ReservedPorts"][0]["HostNetwork"], "public");
}

/// `api/tasks_test.go` `TestTask_Canonicalize_Vault` "empty": an empty `vault` block gets
/// Nomad's defaults (env on, file on, the default cluster, restart on change with SIGHUP).
#[test]
fn empty_vault_block_defaults() {
    let job = parse_hcl(
        r#"job "v" {
  group "g" {
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
      vault {}
    }
  }
}"#,
        "vault.hcl",
        &VarValues::new(),
    )
    .unwrap_or_else(|diagnostics| panic!("{diagnostics}"));
    let vault = job.task_groups[0].tasks[0].vault.as_ref().unwrap();
    assert!(vault.env);
    assert!(!vault.disable_file);
    assert_eq!(vault.namespace, "");
    assert_eq!(vault.cluster, "default");
    assert_eq!(vault.change_mode, "restart");
    assert_eq!(vault.change_signal, "SIGHUP");
    assert!(!vault.allow_token_expiration);
}
