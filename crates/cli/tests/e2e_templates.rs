//! End to end: task templates through the real agent and real processes — a template using
//! `env`, `{{ range }}` and `env = true` renders before the task starts and the task sees its
//! variables; templates that read a file re-render when it changes and apply their change mode
//! (signal, restart, noop).

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
