//! The public corpus's Connect jobs at register: parsed, canonicalized as the server does
//! (which injects each sidecar task and port), validated, and checked against the support
//! table. The ones that need nothing beyond bridge mode and `connect { sidecar_service }`
//! register; every other use of Connect is refused by the name of what it needs.

#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a failure here is the assertion

use drover_jobspec::{VarValues, parse_hcl, support, validate};

/// Public Connect jobs that need only bridge mode and sidecars (their images aside).
const REGISTER: &[&str] = &[
    "hashicorp__nomad__command_assets_connect.hcl",
    "hashicorp__nomad__command_assets_connect-short.hcl",
    "hashicorp__nomad__e2e_connect_input_demo.hcl",
    "hashicorp__nomad__e2e_connect_input_multi-service.hcl",
];

fn registered(name: &str) -> drover_structs::Job {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/corpus/public")
        .join(name);
    let source = std::fs::read_to_string(&path).unwrap();
    let mut job = parse_hcl(&source, name, &VarValues::new()).unwrap();
    job.canonicalize();
    job
}

#[test]
fn public_connect_jobs_get_their_sidecars_and_validate() {
    for name in REGISTER {
        let job = registered(name);
        let problems = validate(&job);
        assert!(problems.is_empty(), "{name}: {problems:?}");
        for group in &job.task_groups {
            for service in &group.services {
                if !service
                    .connect
                    .as_ref()
                    .is_some_and(|connect| connect.has_sidecar())
                {
                    continue;
                }
                let sidecar = group
                    .tasks
                    .iter()
                    .find(|task| task.kind == format!("connect-proxy:{}", service.name))
                    .unwrap_or_else(|| panic!("{name}: no sidecar for {}", service.name));
                assert_eq!(sidecar.name, format!("connect-proxy-{}", service.name));
                assert!(
                    group.networks[0].dynamic_ports.iter().any(|port| port.label
                        == format!("connect-proxy-{}", service.name)
                        && port.to == -1),
                    "{name}: no proxy port for {}",
                    service.name
                );
            }
        }
    }
}

#[test]
fn public_connect_jobs_register() {
    for name in REGISTER {
        let job = registered(name);
        let report = support::check(&job);
        let features: Vec<&str> = report
            .refusals
            .iter()
            .map(|refusal| refusal.feature)
            .collect();
        assert!(features.is_empty(), "{name}: {features:?}");
    }
}

#[test]
fn a_connect_sidecar_outside_bridge_mode_is_refused_with_nomads_text() {
    let source = r#"
job "j" {
  group "g" {
    network {
      mode = "host"
    }
    service {
      name = "api"
      port = "9001"
      connect {
        sidecar_service {}
      }
    }
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
    }
  }
}
"#;
    let error = parse_hcl(source, "j.hcl", &VarValues::new()).unwrap_err();
    let problems: Vec<String> = error.0.iter().map(ToString::to_string).collect();
    assert!(
        problems.iter().any(|problem| problem.contains(
            r#"connect sidecar: invalid network mode for Consul Connect: group "g" uses network mode "host"; must be "bridge" or "cni/*""#
        )),
        "{problems:?}"
    );
}

#[test]
fn sidecar_task_driver_and_gateways_are_refused_by_name() {
    let source = r#"
job "j" {
  group "g" {
    network {
      mode = "bridge"
    }
    service {
      name = "api"
      port = "9001"
      connect {
        sidecar_service {}
        sidecar_task {
          driver = "docker"
          config {
            image = "envoyproxy/envoy:v1.29"
          }
        }
      }
    }
    service {
      name = "gw"
      connect {
        gateway {
          terminating {}
        }
      }
    }
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
    }
  }
}
"#;
    let mut job = parse_hcl(source, "j.hcl", &VarValues::new()).unwrap();
    job.canonicalize();
    let report = support::check(&job);
    let paths: Vec<&str> = report
        .refusals
        .iter()
        .map(|refusal| refusal.field_path.as_str())
        .collect();
    assert!(
        paths.contains(&"TaskGroups[0].Services[0].Connect.SidecarTask.Driver"),
        "{paths:?}"
    );
    assert!(
        paths.contains(&"TaskGroups[0].Services[0].Connect.SidecarTask.Config"),
        "{paths:?}"
    );
    assert!(
        paths.contains(&"TaskGroups[0].Services[1].Connect.Gateway"),
        "{paths:?}"
    );
}
