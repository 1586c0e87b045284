//! End to end: task templates through the real agent and real processes — a template using
//! `env`, `{{ range }}` and `env = true` renders before the task starts and the task sees its
//! variables; templates that read a file re-render when it changes and apply their change mode
//! (signal, restart, noop, script); `error_on_missing_key` fails the task; `nomadService` and
//! `nomadServices` render the built-in catalog and render again when it changes.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod support;

use std::time::{Duration, Instant};

use serde_json::Value;
use support::{Agent, wait_for, write_jobspec};

const LIMIT: Duration = Duration::from_secs(60);

fn only_alloc(agent: &Agent, job_id: &str) -> Value {
    wait_for(&format!("an alloc of {job_id}"), LIMIT, || {
        agent
            .get_json(&format!("/v1/job/{job_id}/allocations"))
            .as_array()
            .and_then(|allocs| allocs.first().cloned())
    })
}

fn running_alloc_id(agent: &Agent, job_id: &str) -> String {
    wait_for("a running alloc", LIMIT, || {
        let alloc = only_alloc(agent, job_id);
        assert_ne!(alloc["ClientStatus"], "failed", "{alloc}");
        (alloc["ClientStatus"] == "running").then(|| alloc["ID"].as_str().unwrap().to_owned())
    })
}

fn started_count(agent: &Agent, alloc_id: &str, task: &str) -> usize {
    agent.get_json(&format!("/v1/allocation/{alloc_id}"))["TaskStates"][task]["Events"]
        .as_array()
        .map(|events| {
            events
                .iter()
                .filter(|event| event["Type"] == "Started")
                .count()
        })
        .unwrap_or_default()
}

#[test]
fn an_env_template_renders_before_start_and_the_task_sees_its_variables() {
    let agent = Agent::start_dev();
    let jobspec = r#"
job "tmplenv" {
  group "g" {
    task "t" {
      driver = "raw_exec"
      env {
        GREETING = "hello"
      }
      config {
        command = "/bin/sh"
        args    = ["-c", "echo \"seen A=$VAR_A C=$VAR_C greeting=$SAID index=$INDEX\"; sleep 3600"]
      }
      template {
        data        = <<EOT
{{ range $i, $v := split "," "a,b,c" -}}
VAR_{{ $v | toUpper }}={{ $i }}
{{ end -}}
SAID={{ env "GREETING" }}
INDEX={{ env "NOMAD_ALLOC_INDEX" }}
EOT
        destination = "secrets/vars.env"
        env         = true
        perms       = "0600"
      }
    }
  }
}
"#;
    let (_dir, path) = write_jobspec("tmplenv.hcl", jobspec);
    agent.cli_ok(&["job", "run", "-detach", &path.to_string_lossy()]);
    let alloc_id = running_alloc_id(&agent, "tmplenv");
    wait_for("the task to print its variables", LIMIT, || {
        agent
            .cli_ok(&["alloc", "logs", &alloc_id, "t"])
            .contains("seen A=0 C=2 greeting=hello index=0")
            .then_some(())
    });
    let rendered = agent
        .data_dir
        .join("alloc")
        .join(&alloc_id)
        .join("t/secrets/vars.env");
    assert_eq!(
        std::fs::read_to_string(&rendered).unwrap(),
        "VAR_A=0\nVAR_B=1\nVAR_C=2\nSAID=hello\nINDEX=0\n"
    );
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(&rendered).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn a_template_failing_to_render_fails_the_task_naming_destination_and_position() {
    let agent = Agent::start_dev();
    let jobspec = r#"
job "tmplbad" {
  type = "batch"
  group "g" {
    restart {
      attempts = 0
      mode     = "fail"
    }
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
      template {
        data        = "ok\n{{ parseInt \"x\" }}"
        destination = "local/bad.txt"
      }
    }
  }
}
"#;
    let (_dir, path) = write_jobspec("tmplbad.hcl", jobspec);
    agent.cli_ok(&["job", "run", "-detach", &path.to_string_lossy()]);
    let alloc = wait_for("the alloc to fail", LIMIT, || {
        let alloc = only_alloc(&agent, "tmplbad");
        (alloc["ClientStatus"] == "failed").then_some(alloc)
    });
    let events = alloc["TaskStates"]["t"]["Events"].to_string();
    assert!(events.contains("local/bad.txt at 2:4"), "{events}");
    assert!(!events.contains("\"Started\""), "{events}");
}

/// The data a template re-renders from is a file in the task dir that the test rewrites: an
/// honest stand-in for a Nomad variable until variables reach the client.
#[test]
fn templates_reading_a_changed_file_re_render_and_apply_their_change_mode() {
    let agent = Agent::start_dev();
    let task = |name: &str, mode: &str| {
        r#"
    task "NAME" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "trap 'echo got-usr1' USR1; echo started; while true; do sleep 0.1; done"]
      }
      template {
        data          = "value={{ file \"local/in.txt\" }}"
        destination   = "local/out.txt"
        MODE
      }
    }
"#
        .replace("NAME", name)
        .replace("MODE", mode)
    };
    let jobspec = format!(
        r#"
job "tmplwatch" {{
  group "g" {{
    task "seed" {{
      driver = "raw_exec"
      lifecycle {{
        hook = "prestart"
      }}
      config {{
        command = "/bin/sh"
        args    = ["-c", "for t in noop sig rst; do mkdir -p $NOMAD_ALLOC_DIR/../$t/local; echo -n one > $NOMAD_ALLOC_DIR/../$t/local/in.txt; done"]
      }}
    }}
{}{}{}
  }}
}}
"#,
        task("noop", "change_mode = \"noop\""),
        task(
            "sig",
            "change_mode = \"signal\"\n        change_signal = \"SIGUSR1\""
        ),
        task("rst", "change_mode = \"restart\""),
    );
    let (_dir, path) = write_jobspec("tmplwatch.hcl", &jobspec);
    agent.cli_ok(&["job", "run", "-detach", &path.to_string_lossy()]);
    let alloc_id = running_alloc_id(&agent, "tmplwatch");
    let task_dir = |task: &str| agent.data_dir.join("alloc").join(&alloc_id).join(task);
    // The alloc runs once its prestart task does; the main tasks render and start after it.
    for task in ["noop", "sig", "rst"] {
        wait_for(&format!("{task} to start"), LIMIT, || {
            (started_count(&agent, &alloc_id, task) == 1).then_some(())
        });
        let out = task_dir(task).join("local/out.txt");
        assert_eq!(
            std::fs::read_to_string(&out).unwrap(),
            "value=one",
            "{task}"
        );
    }

    for task in ["noop", "sig", "rst"] {
        std::fs::write(task_dir(task).join("local/in.txt"), "two").unwrap();
    }
    let changed_at = Instant::now();
    for task in ["noop", "sig", "rst"] {
        let out = task_dir(task).join("local/out.txt");
        wait_for(&format!("{task} to re-render"), LIMIT, || {
            (std::fs::read_to_string(&out).ok()? == "value=two").then_some(())
        });
        eprintln!(
            "{task}: re-rendered within {:?} of the change",
            changed_at.elapsed()
        );
    }

    wait_for("the signal to reach sig", LIMIT, || {
        agent
            .cli_ok(&["alloc", "logs", &alloc_id, "sig"])
            .contains("got-usr1")
            .then_some(())
    });
    wait_for("rst to restart", LIMIT, || {
        (started_count(&agent, &alloc_id, "rst") == 2).then_some(())
    });
    // The restart re-rendered from the same data: no loop of restarts.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(started_count(&agent, &alloc_id, "rst"), 2);
    assert_eq!(started_count(&agent, &alloc_id, "sig"), 1);
    assert_eq!(started_count(&agent, &alloc_id, "noop"), 1);
    assert!(
        !agent
            .cli_ok(&["alloc", "logs", &alloc_id, "noop"])
            .contains("got-usr1"),
        "noop only rewrites the file"
    );
}

fn task_events(agent: &Agent, alloc_id: &str, task: &str) -> Vec<Value> {
    agent.get_json(&format!("/v1/allocation/{alloc_id}"))["TaskStates"][task]["Events"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[test]
fn a_change_script_runs_inside_the_task_and_a_failing_one_kills_it_under_fail_on_error() {
    let agent = Agent::start_dev();
    let jobspec = r#"
job "tmplscript" {
  group "g" {
    restart {
      attempts = 0
      mode     = "fail"
    }
    task "seed" {
      driver = "raw_exec"
      lifecycle {
        hook = "prestart"
      }
      config {
        command = "/bin/sh"
        args    = ["-c", "mkdir -p $NOMAD_ALLOC_DIR/../t/local; cd $NOMAD_ALLOC_DIR/../t/local; echo -n one > in.txt; echo -n one > fail.txt"]
      }
    }
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/sleep"
        args    = ["3600"]
      }
      template {
        data        = "value={{ file \"local/in.txt\" }}"
        destination = "local/out.txt"
        change_mode = "script"
        change_script {
          command = "/bin/sh"
          args    = ["-c", "echo \"ran $NOMAD_TASK_NAME $(cat local/out.txt)\" >> local/script.log"]
        }
      }
      template {
        data        = "{{ file \"local/fail.txt\" }}"
        destination = "local/fail.out"
        change_mode = "script"
        change_script {
          command       = "/bin/sh"
          args          = ["-c", "exit 3"]
          fail_on_error = true
        }
      }
    }
  }
}
"#;
    let (_dir, path) = write_jobspec("tmplscript.hcl", jobspec);
    agent.cli_ok(&["job", "run", "-detach", &path.to_string_lossy()]);
    let alloc_id = running_alloc_id(&agent, "tmplscript");
    wait_for("t to start", LIMIT, || {
        (started_count(&agent, &alloc_id, "t") == 1).then_some(())
    });
    let task_dir = agent.data_dir.join("alloc").join(&alloc_id).join("t");
    std::fs::write(task_dir.join("local/in.txt"), "two").unwrap();
    let log = task_dir.join("local/script.log");
    let logged = wait_for("the change script to run", LIMIT, || {
        std::fs::read_to_string(&log).ok()
    });
    assert_eq!(logged, "ran t value=two\n");
    let message = wait_for("the script's event", LIMIT, || {
        task_events(&agent, &alloc_id, "t")
            .into_iter()
            .find(|event| event["Type"] == "Task hook message")
    });
    assert_eq!(
        message["DisplayMessage"],
        "Template successfully ran script /bin/sh with arguments: [-c echo \"ran $NOMAD_TASK_NAME $(cat local/out.txt)\" >> local/script.log]. Exit code: 0"
    );
    assert_eq!(started_count(&agent, &alloc_id, "t"), 1);

    std::fs::write(task_dir.join("local/fail.txt"), "two").unwrap();
    let alloc = wait_for("the failing script to fail the task", LIMIT, || {
        let alloc = only_alloc(&agent, "tmplscript");
        (alloc["ClientStatus"] == "failed").then_some(alloc)
    });
    let events = alloc["TaskStates"]["t"]["Events"].to_string();
    assert!(
        events.contains(
            "Template ran script /bin/sh with arguments [-c exit 3] on change but it exited with code: 3"
        ),
        "{events}"
    );
    assert!(
        events.contains("Template script failed, task is being killed"),
        "{events}"
    );
}

#[test]
fn error_on_missing_key_fails_the_task_naming_the_key() {
    let agent = Agent::start_dev();
    let jobspec = r#"
job "tmplkey" {
  type = "batch"
  group "g" {
    restart {
      attempts = 0
      mode     = "fail"
    }
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
      template {
        data                 = "{{ with parseJSON \"{\\\"a\\\": 1}\" }}{{ .a }}{{ .b }}{{ end }}"
        destination          = "local/key.txt"
        error_on_missing_key = true
      }
    }
  }
}
"#;
    let (_dir, path) = write_jobspec("tmplkey.hcl", jobspec);
    agent.cli_ok(&["job", "run", "-detach", &path.to_string_lossy()]);
    let alloc = wait_for("the alloc to fail", LIMIT, || {
        let alloc = only_alloc(&agent, "tmplkey");
        (alloc["ClientStatus"] == "failed").then_some(alloc)
    });
    let events = alloc["TaskStates"]["t"]["Events"].to_string();
    assert!(
        events.contains("map has no entry for key \\\"b\\\""),
        "{events}"
    );
    assert!(!events.contains("\"Started\""), "{events}");
}

#[test]
fn nomad_service_templates_render_the_catalog_and_follow_its_changes() {
    let agent = Agent::start_dev();
    let suffix = std::process::id();
    let name = format!("tmplsvc-{suffix}");
    let provider = format!(
        r#"
job "tmplprovider" {{
  group "web" {{
    count = 2
    network {{
      port "http" {{}}
    }}
    service {{
      name     = "{name}"
      port     = "http"
      provider = "nomad"
      tags     = ["web", "index-${{NOMAD_ALLOC_INDEX}}"]
    }}
    task "server" {{
      driver = "raw_exec"
      config {{
        command = "/bin/sleep"
        args    = ["3600"]
      }}
    }}
  }}
}}
"#
    );
    let (_dir, provider_path) = write_jobspec("tmplprovider.hcl", &provider);
    agent.cli_ok(&["job", "run", "-detach", &provider_path.to_string_lossy()]);
    let registered = wait_for("both registrations", LIMIT, || {
        let services = agent.get_json(&format!("/v1/service/{name}"));
        let services = services.as_array()?.clone();
        (services.len() == 2).then_some(services)
    });
    let mut expected: Vec<String> = registered
        .iter()
        .map(|service| {
            format!(
                "{}:{}",
                service["Address"].as_str().unwrap(),
                service["Port"]
            )
        })
        .collect();
    expected.sort();
    let index0 = registered
        .iter()
        .find(|service| service["Tags"].to_string().contains("index-0"))
        .map(|service| {
            format!(
                "{}:{}",
                service["Address"].as_str().unwrap(),
                service["Port"]
            )
        })
        .unwrap();

    let consumer = r#"
job "tmplconsumer" {
  group "g" {
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/sleep"
        args    = ["3600"]
      }
      template {
        data        = <<EOT
{{ range nomadService "NAME" }}all={{ .Address }}:{{ .Port }}
{{ end }}{{ range nomadService "index-0.NAME" }}tagged={{ .Address }}:{{ .Port }}
{{ end }}{{ range nomadService 1 "some-key" "NAME" }}chosen={{ .Name }}
{{ end }}{{ range nomadServices }}{{ if eq .Name "NAME" }}listed={{ .Name }} {{ join "," .Tags }}
{{ end }}{{ end }}
EOT
        destination = "local/services.txt"
        change_mode = "noop"
      }
    }
  }
}
"#
    .replace("NAME", &name);
    let (_dir2, consumer_path) = write_jobspec("tmplconsumer.hcl", &consumer);
    agent.cli_ok(&["job", "run", "-detach", &consumer_path.to_string_lossy()]);
    let alloc_id = running_alloc_id(&agent, "tmplconsumer");
    let out = agent
        .data_dir
        .join("alloc")
        .join(&alloc_id)
        .join("t/local/services.txt");
    let text = std::fs::read_to_string(&out).unwrap();
    let mut all: Vec<&str> = text
        .lines()
        .filter_map(|line| line.strip_prefix("all="))
        .collect();
    all.sort_unstable();
    assert_eq!(all, expected, "{text}");
    assert!(text.contains(&format!("tagged={index0}\n")), "{text}");
    assert_eq!(text.matches("chosen=").count(), 1, "{text}");
    assert!(
        text.contains(&format!("listed={name} index-0,index-1,web\n")),
        "{text}"
    );

    // The catalog changes: the template renders again.
    agent.cli_ok(&["job", "stop", "tmplprovider"]);
    wait_for("the template to render the emptied catalog", LIMIT, || {
        let text = std::fs::read_to_string(&out).ok()?;
        (!text.contains("all=") && !text.contains("listed=")).then_some(())
    });
}
