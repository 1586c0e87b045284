//! Focused decoding rules taken from Nomad's jobspec parser, checked on the JSON it produces.
#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a failure here is the assertion

use drover_jobspec::{VarValues, decode_hcl_to_json, parse_hcl};

fn decode(source: &str) -> serde_json::Value {
    decode_hcl_to_json(source, "test.hcl", &VarValues::new())
        .unwrap()
        .0
}

#[test]
fn a_port_is_reserved_only_with_a_static_value_above_zero() {
    let job = decode(
        r#"job "j" {
  group "g" {
    network {
      port "zero" {
        static = 0
      }
      port "fixed" {
        static = 80
      }
      port "free" {}
    }
  }
}"#,
    );
    let network = &job["TaskGroups"][0]["Networks"][0];
    assert_eq!(
        network["ReservedPorts"],
        serde_json::json!([{"Label": "fixed", "Value": 80}])
    );
    assert_eq!(
        network["DynamicPorts"],
        serde_json::json!([{"Label": "zero", "Value": 0}, {"Label": "free"}])
    );
}

#[test]
fn the_default_identity_is_the_unnamed_or_default_one() {
    let job = decode(
        r#"job "j" {
  group "g" {
    task "t" {
      identity {
        name = "default"
        env  = true
      }
      identity {
        name = "other"
        aud  = ["x"]
      }
    }
  }
}"#,
    );
    let task = &job["TaskGroups"][0]["Tasks"][0];
    assert_eq!(
        task["Identity"],
        serde_json::json!({"Name": "default", "Env": true})
    );
    assert_eq!(
        task["Identities"],
        serde_json::json!([{"Name": "other", "Audience": ["x"]}])
    );
}

#[test]
fn every_problem_in_a_file_is_reported_in_source_order() {
    let source = r#"job "j" {
  group "g" {
    cont = 1
    task "t" {
      driver = 3
      resources {
        memory = "lots"
      }
      kill_timeout = "5 seconds"
    }
  }
}"#;
    let error = parse_hcl(source, "j.hcl", &VarValues::new()).unwrap_err();
    assert_eq!(
        error.to_string(),
        "j.hcl:3:5: group \"g\": unknown argument \"cont\" in the group block; did you mean \"count\"?\n\
         j.hcl:7:18: group \"g\" task \"t\": resources.memory: must be a whole number, got \"lots\"\n\
         j.hcl:9:22: group \"g\" task \"t\": kill_timeout: invalid duration \"5 seconds\": unknown unit \" seconds\" (one of ns, us, µs, ms, s, m, h)"
    );
}

#[test]
fn runtime_references_are_kept_exactly_and_escapes_are_unescaped() {
    let job = decode(
        r#"job "j" {
  group "g" {
    task "t" {
      env {
        A = "${attr.kernel.name}/${NOMAD_TASK_DIR}"
        B = "$${NOT_EVALUATED}"
        C = "%{ if true }yes%{ endif }"
        D = "${meta["rack-id"]}"
      }
    }
  }
}"#,
    );
    assert_eq!(
        job["TaskGroups"][0]["Tasks"][0]["Env"],
        serde_json::json!({
            "A": "${attr.kernel.name}/${NOMAD_TASK_DIR}",
            "B": "${NOT_EVALUATED}",
            "C": "yes",
            "D": "${meta[\"rack-id\"]}",
        })
    );
}

#[test]
fn every_refused_block_is_reported_as_unsupported_where_nomad_allows_it() {
    let refused = drover_jobspec::refused_blocks();
    assert!(
        refused
            .iter()
            .any(|(parent, name, _)| *parent == "task" && *name == "secret")
    );
    for (parent, name, reason) in refused {
        let block = format!("{name} {{\n}}");
        let body = match parent {
            "job" => block,
            "group" => format!("group \"g\" {{\n{block}\n}}"),
            "task" => format!("group \"g\" {{\ntask \"t\" {{\n{block}\n}}\n}}"),
            "resources" | "identity" | "template" => {
                format!("group \"g\" {{\ntask \"t\" {{\n{parent} {{\n{block}\n}}\n}}\n}}")
            }
            "network" | "service" => format!("group \"g\" {{\n{parent} {{\n{block}\n}}\n}}"),
            "check" => format!("group \"g\" {{\nservice {{\ncheck {{\n{block}\n}}\n}}\n}}"),
            "port" => format!("group \"g\" {{\nnetwork {{\nport \"p\" {{\n{block}\n}}\n}}\n}}"),
            other => panic!("no template for parent {other}"),
        };
        let source = format!("job \"j\" {{\n{body}\n}}\n");
        let error = decode_hcl_to_json(&source, "refused.hcl", &VarValues::new())
            .expect_err(&format!("{parent} {name} must be refused"));
        let text = error.to_string();
        assert!(
            text.contains(name)
                && text.contains("is not supported by drover")
                && text.contains(reason),
            "{parent} {name}: {text}"
        );
    }
}

#[test]
fn nested_blocks_in_free_form_bodies_are_lists_as_nomad_writes_them() {
    // Nomad 1.1.2's /v1/jobs/parse answer for this jobspec, recorded.
    let (job, _) = decode_hcl_to_json(
        r#"job "x" {
  group "g" {
    scaling {
      min = 2
      max = 10
      policy {
        cooldown = "1m"
        check "cpu" {
          source = "nomad-apm"
          strategy "target-value" {
            target = 70
          }
        }
      }
    }
    task "t" {
      driver = "docker"
      config {
        image = "x"
        logging {
          type = "syslog"
          config {
            tag = "a"
          }
        }
        mount {
          type = "bind"
        }
        mount {
          type = "volume"
        }
      }
    }
  }
}"#,
        "free_form.hcl",
        &VarValues::new(),
    )
    .expect("the jobspec decodes");
    assert_eq!(
        job["TaskGroups"][0]["Scaling"]["Policy"],
        serde_json::json!({"check": [{"cpu": [{"source": "nomad-apm", "strategy": [{"target-value": [{"target": 70}]}]}]}], "cooldown": "1m"})
    );
    assert_eq!(
        job["TaskGroups"][0]["Tasks"][0]["Config"],
        serde_json::json!({"mount": [{"type": "bind"}, {"type": "volume"}], "image": "x", "logging": [{"config": [{"tag": "a"}], "type": "syslog"}]})
    );
}

#[test]
fn object_arguments_in_free_form_bodies_are_lists_of_one_object_as_nomad_writes_them() {
    // Nomad 1.1.2's /v1/jobs/parse answer for this jobspec, recorded: an argument written
    // as `{ ... }` becomes a list of one object at any block depth; objects from other
    // expressions, inside lists or inside other objects stay objects.
    let job = decode(
        r#"locals {
  labels = { a = "b" }
}
job "j" {
  group "g" {
    task "t" {
      driver = "docker"
      config {
        m = { a = "b" }
        e = {}
        l = [{ a = 1 }, { b = 2 }]
        n = { x = { y = 1 } }
        from_local = local.labels
        merged = merge({ a = 1 }, { b = 2 })
        blk {
          m2 = { c = "d" }
        }
      }
    }
  }
}"#,
    );
    assert_eq!(
        job["TaskGroups"][0]["Tasks"][0]["Config"],
        serde_json::json!({
            "m": [{"a": "b"}],
            "e": [{}],
            "l": [{"a": 1}, {"b": 2}],
            "n": [{"x": {"y": 1}}],
            "from_local": {"a": "b"},
            "merged": {"a": 1, "b": 2},
            "blk": [{"m2": [{"c": "d"}]}],
        })
    );
}
