//! End to end through the real agent: job submissions (Nomad 1.6+). `drover job run` sends the
//! jobspec's source with its `-var` flags, `NOMAD_VAR_*` values and variable files;
//! `GET /v1/job/<id>/submission?version=N` answers it (Nomad's 400/404/405 otherwise, a
//! blocking query on the submission's index), `drover job inspect -hcl` prints it, a stop
//! carries it to the next version, it survives an agent restart and goes with a purge, and a
//! submission over the server's `job_max_source_size` is dropped with Nomad's warning.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod support;

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use support::{Agent, agent_config, drover_bin, http, percent_encode, wait_for};

const JOBSPEC: &str = r#"variable "motd" {
  type    = string
  default = "none"
}

variable "count" {
  type    = number
  default = 1
}

variable "region_name" {
  type    = string
  default = "nowhere"
}

job "greeter" {
  type = "batch"
  group "g" {
    count = var.count
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/echo"
        args    = [var.motd, var.region_name]
      }
      resources {
        cpu    = 20
        memory = 16
      }
    }
  }
}
"#;

fn run(agent: &Agent, args: &[&str], env: &[(&str, &str)]) -> (bool, String, String) {
    let output = Command::new(drover_bin())
        .args(args)
        .env("NOMAD_ADDR", &agent.address)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("cli runs");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn submission(agent: &Agent, job: &str, version: u64) -> (u16, String) {
    http(
        "GET",
        &agent.url(&format!("/v1/job/{job}/submission?version={version}")),
        None,
    )
}

#[test]
fn job_submissions_are_kept_read_back_and_dropped_past_the_limit() {
    let temp = tempfile::tempdir().unwrap();
    let data_dir = temp.path().join("data");
    let config = agent_config(
        temp.path(),
        "server.hcl",
        "server {\n  job_max_source_size = \"2KB\"\n}\n",
    );
    let config_flag = format!("-config={config}");
    let mut agent = Agent::start_with(&data_dir, &[&config_flag]);

    let jobspec = temp.path().join("greeter.nomad.hcl");
    std::fs::write(&jobspec, JOBSPEC).unwrap();
    let var_file = temp.path().join("greeter.vars.hcl");
    std::fs::write(&var_file, "count = 2\n").unwrap();
    let (ok, stdout, stderr) = run(
        &agent,
        &[
            "job",
            "run",
            "-detach",
            "-var",
            "motd=hello world\nsecond line",
            "-var-file",
            var_file.to_str().unwrap(),
            jobspec.to_str().unwrap(),
        ],
        &[("NOMAD_VAR_region_name", "emea")],
    );
    assert!(ok, "job run failed:\n{stdout}\n{stderr}");
    assert!(!stdout.contains("Job Warnings"), "{stdout}");
    let job = agent.get_json("/v1/job/greeter");
    assert_eq!(job["TaskGroups"][0]["Count"], 2);

    // The submission of version 0, as the CLI sent it (the flag values unescaped again).
    let (status, body) = submission(&agent, "greeter", 0);
    assert_eq!(status, 200, "{body}");
    let first: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(first["Source"], JOBSPEC);
    assert_eq!(first["Format"], "hcl2");
    assert_eq!(
        first["VariableFlags"],
        json!({"motd": "hello world\nsecond line", "region_name": "emea"})
    );
    assert_eq!(first["Variables"], "count = 2\n\n");
    assert_eq!(first["Namespace"], "default");
    assert_eq!(first["JobID"], "greeter");
    assert_eq!(first["Version"], 0);
    assert_eq!(first["JobModifyIndex"], job["JobModifyIndex"]);

    // `job inspect -hcl` prints the source; `-with-vars` says how to run it again.
    let (ok, stdout, stderr) = run(
        &agent,
        &["job", "inspect", "-hcl", "-with-vars", "gree"],
        &[],
    );
    assert!(ok, "{stderr}");
    assert_eq!(stdout, format!("{JOBSPEC}\n"));
    assert!(
        stderr.contains(
            "drover job run -namespace default -var motd=hello world\nsecond line -var region_name=emea -var count = 2 -"
        ),
        "{stderr}"
    );
    let (ok, _, stderr) = run(&agent, &["job", "inspect", "-hcl", "-json", "greeter"], &[]);
    assert!(!ok);
    assert_eq!(stderr, "can only use one of -hcl or -json\n");

    // Nomad's refusals: no version, another method, a version without a submission.
    let url = agent.url("/v1/job/greeter/submission");
    assert_eq!(
        http("GET", &url, None),
        (
            400,
            "Unable to parse job submission version parameter".to_owned()
        )
    );
    assert_eq!(
        http("PUT", &format!("{url}?version=0"), None),
        (405, "Invalid method".to_owned())
    );
    assert_eq!(
        submission(&agent, "greeter", 9),
        (404, "job source not found".to_owned())
    );

    // A blocking read of version 1 answers once a register makes it, with its index.
    let blocked = {
        let url = agent.url(&format!(
            "/v1/job/greeter/submission?version=1&index={}&wait=60s",
            first["JobModifyIndex"]
        ));
        std::thread::spawn(move || http("GET", &url, None))
    };
    // A register through the API with a submission of its own: flags escaped on the way in
    // and unescaped on the way out.
    let mut job_v1 = job.clone();
    job_v1["TaskGroups"][0]["Count"] = json!(3);
    let request = json!({
        "Job": job_v1,
        "Submission": {
            "Source": "job \"greeter\" {}",
            "Format": "hcl2",
            "VariableFlags": {"spaced": "a b+c%d"},
            "Variables": ""
        }
    });
    let (status, body) = http(
        "POST",
        &agent.url("/v1/job/greeter"),
        Some(&request.to_string()),
    );
    assert_eq!(status, 200, "{body}");
    let registered: Value = serde_json::from_str(&body).unwrap();
    let (status, body) = blocked.join().unwrap();
    assert_eq!(status, 200, "{body}");
    let second: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(second["Version"], 1);
    assert_eq!(second["JobModifyIndex"], registered["JobModifyIndex"]);
    assert_eq!(second["VariableFlags"], json!({"spaced": "a b+c%d"}));

    // A stop sends the job as stored: its version's submission comes along to the next.
    // Its evaluation takes `eval_priority`, refused above 100 or when not a number.
    let stop_url = agent.url("/v1/job/greeter");
    assert_eq!(
        http("DELETE", &format!("{stop_url}?eval_priority=101"), None),
        (
            400,
            "Eval priority must be between 1 and 100 inclusively".to_owned()
        )
    );
    // Nomad answers a priority that is not a number with a 500; bad input is a 400 here.
    assert_eq!(
        http("DELETE", &format!("{stop_url}?eval_priority=high"), None).0,
        400
    );
    // Skipping shutdown delays is something drover's client does not do: refused by name.
    let (status, body) = http(
        "DELETE",
        &format!("{stop_url}?no_shutdown_delay=true"),
        None,
    );
    assert_eq!(status, 400);
    assert!(
        body.starts_with("no_shutdown_delay is not supported"),
        "{body}"
    );
    let (status, body) = http("DELETE", &format!("{stop_url}?eval_priority=80"), None);
    assert_eq!(status, 200, "{body}");
    let stop: Value = serde_json::from_str(&body).unwrap();
    let eval = agent.get_json(&format!(
        "/v1/evaluation/{}",
        stop["EvalID"].as_str().unwrap()
    ));
    assert_eq!(eval["Priority"], 80);
    assert_eq!(eval["TriggeredBy"], "job-deregister");
    let (status, body) = submission(&agent, "greeter", 2);
    assert_eq!(status, 200, "{body}");
    let stopped: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(stopped["Source"], "job \"greeter\" {}");
    assert_eq!(stopped["Version"], 2);

    // A source over the server's 2 KB is not kept, and the register says so.
    let big = format!("# {}\n{JOBSPEC}", "x".repeat(2400));
    let big_path = temp.path().join("big.nomad.hcl");
    std::fs::write(&big_path, &big).unwrap();
    let (ok, stdout, stderr) = run(
        &agent,
        &["job", "run", "-detach", big_path.to_str().unwrap()],
        &[],
    );
    assert!(ok, "{stdout}\n{stderr}");
    let size = big.len();
    assert!(
        stdout.contains(&format!(
            "Job Warnings:\n1 warning:\n\n* job source size of {}.{} kB exceeds maximum of 2.0 kB and will be discarded",
            size / 1000,
            (size % 1000 + 50) / 100
        )),
        "{stdout}"
    );
    let version = agent.get_json("/v1/job/greeter")["Version"]
        .as_u64()
        .unwrap();
    assert_eq!(version, 3);
    // Without a submission of its own, version 3 takes that of the version its job named —
    // 0, as a parsed jobspec does — exactly as Nomad's state store does.
    let (status, body) = submission(&agent, "greeter", 3);
    assert_eq!(status, 200, "{body}");
    let kept: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(kept["Source"], JOBSPEC);
    assert_eq!(kept["Version"], 3);

    // An evaluation priority outside Nomad's bounds is refused before anything is stored.
    let refused = json!({"Job": job, "EvalPriority": 101});
    assert_eq!(
        http("PUT", &agent.url("/v1/jobs"), Some(&refused.to_string())),
        (
            400,
            "Eval priority must be between 1 and 100 inclusively".to_owned()
        )
    );

    // Kept across a restart of the agent; gone with a purge.
    agent.terminate();
    let agent = Agent::start_with(&data_dir, &[&config_flag]);
    wait_for(
        "the restarted agent to answer",
        Duration::from_secs(30),
        || (submission(&agent, "greeter", 0).0 == 200).then_some(()),
    );
    assert_eq!(
        serde_json::from_str::<Value>(&submission(&agent, "greeter", 0).1).unwrap(),
        first
    );
    let (ok, _, stderr) = run(
        &agent,
        &["job", "stop", "-purge", "-detach", "greeter"],
        &[],
    );
    assert!(ok, "{stderr}");
    for version in 0..=3 {
        assert_eq!(
            submission(&agent, "greeter", version),
            (404, "job source not found".to_owned())
        );
    }
    // An ID with a slash is routed to its own submission.
    let (status, _) = http(
        "GET",
        &agent.url(&format!(
            "/v1/job/{}/submission?version=0",
            percent_encode("a/b")
        )),
        None,
    );
    assert_eq!(status, 404);
}
