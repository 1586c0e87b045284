//! End to end through the real agent: Nomad 1.8's jobs index `/v1/jobs/statuses` (its shape,
//! newest change first, paging by modify index, a body naming jobs, children left out, a
//! blocking query woken by a change on the page), and Nomad 1.9's job version tags through the
//! CLI (`job tag apply|unset`, `job history`, `job revert <job> <tag>`) and their routes'
//! refusals in Nomad's words.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{Agent, http, wait_for, write_jobspec};

const LIMIT: Duration = Duration::from_secs(60);

fn jobspec(job: &str, sleep: &str) -> String {
    format!(
        r#"
job "{job}" {{
  type = "batch"
  group "g" {{
    count = 2
    task "t" {{
      driver = "raw_exec"
      config {{
        command = "/bin/sh"
        args    = ["-c", "sleep {sleep}"]
      }}
      resources {{
        cpu    = 20
        memory = 16
      }}
    }}
  }}
}}
"#
    )
}

/// A GET with its headers: (status, `X-Nomad-Index`, `X-Nomad-NextToken`, body).
fn get_with_meta(url: &str) -> (u16, u64, String, Value) {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_at(rest.find('/').unwrap());
    let mut stream = std::net::TcpStream::connect(host).unwrap();
    stream.set_read_timeout(Some(LIMIT)).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let header = |name: &str| {
        head.lines()
            .find_map(|line| {
                let (key, value) = line.split_once(':')?;
                key.eq_ignore_ascii_case(name)
                    .then(|| value.trim().to_owned())
            })
            .unwrap_or_default()
    };
    let status: u16 = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    let body = if header("Transfer-Encoding").eq_ignore_ascii_case("chunked") {
        let mut out = String::new();
        let mut rest = body;
        while let Some((size, after)) = rest.split_once("\r\n") {
            let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            if size == 0 {
                break;
            }
            out.push_str(&after[..size]);
            rest = after[size..].trim_start_matches("\r\n");
        }
        out
    } else {
        body.to_owned()
    };
    let index = header("X-Nomad-Index").parse().unwrap_or(0);
    let value = serde_json::from_str(&body).unwrap_or(Value::String(body));
    (status, index, header("X-Nomad-NextToken"), value)
}

fn statuses(agent: &Agent, query: &str) -> (Value, String, u64) {
    let (status, index, next, body) =
        get_with_meta(&agent.url(&format!("/v1/jobs/statuses{query}")));
    assert_eq!(status, 200, "{body}");
    (body, next, index)
}

fn ids(list: &Value) -> Vec<&str> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|job| job["ID"].as_str().unwrap())
        .collect()
}

#[test]
fn jobs_statuses_index_and_version_tags() {
    let agent = Agent::start_dev();
    for (job, sleep) in [("alpha", "300"), ("beta", "300"), ("gamma", "300")] {
        let (_dir, path) = write_jobspec(&format!("{job}.hcl"), &jobspec(job, sleep));
        agent.cli_ok(&["job", "run", "-detach", path.to_str().unwrap()]);
    }
    let (_dir, path) = write_jobspec(
        "periodic.hcl",
        r#"
job "cron" {
  type = "batch"
  periodic {
    cron             = "0 0 1 1 *"
    prohibit_overlap = true
  }
  group "g" {
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
    }
  }
}
"#,
    );
    agent.cli_ok(&["job", "run", "-detach", path.to_str().unwrap()]);
    agent.cli_ok(&["job", "periodic", "force", "-detach", "cron"]);
    wait_for("two running allocations per job", LIMIT, || {
        let (list, _, _) = statuses(&agent, "");
        list.as_array()
            .unwrap()
            .iter()
            .filter(|job| job["Type"] == "batch" && job["ChildStatuses"].is_null())
            .all(|job| {
                job["Allocs"].as_array().is_some_and(|allocs| {
                    allocs.len() == 2
                        && allocs
                            .iter()
                            .all(|alloc| alloc["ClientStatus"] == "running")
                })
            })
            .then_some(())
    });

    // The shape, newest change first, children left out.
    let (list, next, _) = statuses(&agent, "");
    assert!(next.is_empty());
    assert_eq!(list.as_array().unwrap().len(), 4, "{list:#}");
    let modify: Vec<u64> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|job| job["ModifyIndex"].as_u64().unwrap())
        .collect();
    assert!(
        modify.windows(2).all(|pair| pair[0] >= pair[1]),
        "{modify:?}"
    );
    let alpha = list
        .as_array()
        .unwrap()
        .iter()
        .find(|job| job["ID"] == "alpha")
        .unwrap();
    for key in [
        "ID",
        "Namespace",
        "Name",
        "Type",
        "NodePool",
        "Datacenters",
        "Priority",
        "Version",
        "SubmitTime",
        "ModifyIndex",
        "Allocs",
        "GroupCountSum",
        "ChildStatuses",
        "ParentID",
        "LatestDeployment",
        "Stop",
        "IsPack",
        "Status",
    ] {
        assert!(alpha.get(key).is_some(), "{key} missing: {alpha:#}");
    }
    assert_eq!(alpha["GroupCountSum"], 2);
    assert_eq!(alpha["Namespace"], "default");
    assert!(alpha["ChildStatuses"].is_null());
    assert!(alpha["LatestDeployment"].is_null());
    let alloc = &alpha["Allocs"][0];
    for key in [
        "ID",
        "Group",
        "ClientStatus",
        "NodeID",
        "DeploymentStatus",
        "JobVersion",
        "FollowupEvalID",
        "HasPausedTask",
    ] {
        assert!(alloc.get(key).is_some(), "{key} missing: {alloc:#}");
    }
    assert_eq!(
        alloc["DeploymentStatus"],
        json!({"Canary": false, "Healthy": null})
    );
    let cron = list
        .as_array()
        .unwrap()
        .iter()
        .find(|job| job["ID"] == "cron")
        .unwrap();
    assert_eq!(
        cron["ChildStatuses"].as_array().unwrap().len(),
        1,
        "{cron:#}"
    );
    assert!(cron["Allocs"].is_null());

    // Children on request.
    let (with_children, _, _) = statuses(&agent, "?include_children=true");
    assert_eq!(with_children.as_array().unwrap().len(), 5);
    let response = http(
        "GET",
        &agent.url("/v1/jobs/statuses?include_children=maybe"),
        None,
    );
    assert_eq!(response.0, 400, "{}", response.1);

    // Pages of two, then the rest from the token; reverse lists oldest first.
    let (first, next, _) = statuses(&agent, "?per_page=2");
    assert_eq!(ids(&first), ids(&list)[..2].to_vec());
    assert_eq!(next, list[2]["ModifyIndex"].as_u64().unwrap().to_string());
    let (second, next, _) = statuses(&agent, &format!("?per_page=2&next_token={next}"));
    assert_eq!(ids(&second), ids(&list)[2..].to_vec());
    assert!(next.is_empty());
    let (reversed, _, _) = statuses(&agent, "?reverse=true");
    let mut expected = ids(&list);
    expected.reverse();
    assert_eq!(ids(&reversed), expected);
    let (filtered, _, _) = statuses(&agent, "?filter=ID%20%3D%3D%20%22beta%22");
    assert_eq!(ids(&filtered), ["beta"]);

    // A body naming jobs answers those only; an empty list is refused.
    let (status, body) = http(
        "POST",
        &agent.url("/v1/jobs/statuses"),
        Some(r#"{"Jobs":[{"ID":"gamma","Namespace":"default"},{"ID":"alpha"}]}"#),
    );
    assert_eq!(status, 200, "{body}");
    let named: Value = serde_json::from_str(&body).unwrap();
    let mut named_ids = ids(&named);
    named_ids.sort();
    assert_eq!(named_ids, ["alpha", "gamma"]);
    let (status, body) = http(
        "POST",
        &agent.url("/v1/jobs/statuses"),
        Some(r#"{"Jobs":[]}"#),
    );
    assert_eq!((status, body.as_str()), (400, "no jobs in request"));
    let (status, _) = http("DELETE", &agent.url("/v1/jobs/statuses"), None);
    assert_eq!(status, 405);

    // A blocking query on a page of the two newest jobs wakes when one of them changes.
    let (page, _, index) = statuses(&agent, "?per_page=2");
    let newest = page[0]["ID"].as_str().unwrap().to_owned();
    let url = agent.url(&format!(
        "/v1/jobs/statuses?per_page=2&index={index}&wait=30s"
    ));
    let started = Instant::now();
    let waiter = std::thread::spawn(move || {
        let (_, index, _, body) = get_with_meta(&url);
        (index, body)
    });
    std::thread::sleep(Duration::from_millis(300));
    agent.cli_ok(&["job", "stop", "-detach", &newest]);
    let (mut woken_index, mut woken) = waiter.join().unwrap();
    assert!(woken_index > index);
    assert!(started.elapsed() < Duration::from_secs(25));
    // Other changes on the page (a child finishing, an allocation's report) may wake it
    // first; each answer moves the index on, and the stop shows within a few.
    let deadline = Instant::now() + LIMIT;
    while !woken
        .as_array()
        .unwrap()
        .iter()
        .any(|job| job["ID"] == newest && job["Stop"] == true)
    {
        assert!(Instant::now() < deadline, "{woken:#}");
        let (_, next_index, _, body) = get_with_meta(&agent.url(&format!(
            "/v1/jobs/statuses?per_page=2&index={woken_index}&wait=30s"
        )));
        assert!(next_index > woken_index);
        (woken_index, woken) = (next_index, body);
    }

    // Version tags: alpha gets a second version, version 0 is tagged, shown, and reverted to.
    let (_dir, path) = write_jobspec("alpha.hcl", &jobspec("alpha", "301"));
    agent.cli_ok(&["job", "run", "-detach", path.to_str().unwrap()]);
    let text = agent.cli_ok(&[
        "job",
        "tag",
        "apply",
        "-version=0",
        "-name=golden",
        "-description=the first",
        "alpha",
    ]);
    assert_eq!(text.trim(), "Job version 0 tagged with name \"golden\"");
    let text = agent.cli_ok(&["job", "tag", "apply", "-name=latest-one", "alpha"]);
    assert_eq!(text.trim(), "Job version 1 tagged with name \"latest-one\"");
    let versions = agent.get_json("/v1/job/alpha/versions");
    let tag_of = |versions: &Value, version: u64| {
        versions["Versions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|job| job["Version"] == version)
            .unwrap()["VersionTag"]
            .clone()
    };
    assert_eq!(tag_of(&versions, 0)["Name"], "golden");
    assert_eq!(tag_of(&versions, 0)["Description"], "the first");
    assert!(tag_of(&versions, 0)["TaggedTime"].as_i64().unwrap() > 0);
    assert_eq!(
        agent.get_json("/v1/job/alpha")["VersionTag"]["Name"],
        "latest-one"
    );
    let history = agent.cli_ok(&["job", "history", "alpha"]);
    assert!(history.contains("Tag Name        = golden"), "{history}");
    assert!(history.contains("Tag Description = the first"), "{history}");

    // Refusals in Nomad's words.
    let output = agent.cli(&["job", "tag", "apply", "-version=1", "-name=golden", "alpha"]);
    assert!(
        String::from_utf8_lossy(&output.stderr)
            .contains("tag \"golden\" already exists on a different version of job \"alpha\""),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let output = agent.cli(&["job", "tag", "apply", "-version=9", "-name=x", "alpha"]);
    assert!(String::from_utf8_lossy(&output.stderr).contains("job \"alpha\" version 9 not found"));
    let output = agent.cli(&["job", "tag", "apply", "alpha"]);
    assert!(String::from_utf8_lossy(&output.stderr).contains("A version tag name is required"));
    let (status, body) = http(
        "PUT",
        &agent.url("/v1/job/alpha/versions/x/tag"),
        Some(r#"{"Version":1,"Latest":true}"#),
    );
    assert_eq!(
        (status, body.as_str()),
        (400, "version must be zero when tagging latest, got: 1")
    );
    let (status, body) = http("PUT", &agent.url("/v1/job/alpha/x/tag"), None);
    assert_eq!((status, body.as_str()), (404, "invalid job tag endpoint"));

    // Revert to the tag: a new version from version 0, not itself tagged.
    agent.cli_ok(&["job", "revert", "-detach", "alpha", "golden"]);
    let job = agent.get_json("/v1/job/alpha");
    assert_eq!(job["Version"], 2);
    assert!(job.get("VersionTag").is_none_or(Value::is_null), "{job:#}");
    assert_eq!(
        job["TaskGroups"][0]["Tasks"][0]["Config"]["args"][1],
        "sleep 300"
    );
    let output = agent.cli(&["job", "revert", "alpha", "nonesuch"]);
    assert!(
        String::from_utf8_lossy(&output.stderr)
            .contains("version tag nonesuch not found for job alpha")
    );

    // Unset: the tag goes, an unknown one is refused.
    let text = agent.cli_ok(&["job", "tag", "unset", "-name=golden", "alpha"]);
    assert_eq!(text.trim(), "Tag \"golden\" removed from job \"alpha\"");
    assert!(tag_of(&agent.get_json("/v1/job/alpha/versions"), 0).is_null());
    let output = agent.cli(&["job", "tag", "unset", "-name=golden", "alpha"]);
    assert!(
        String::from_utf8_lossy(&output.stderr)
            .contains("tag \"golden\" not found on job \"alpha\"")
    );
}

#[test]
fn job_history_diffs_every_version_against_a_tag_or_a_version() {
    let agent = Agent::start_dev();
    // Three versions: sleep 300, 301, 302; version 0 tagged.
    for sleep in ["300", "301", "302"] {
        let (_dir, path) = write_jobspec("beta.hcl", &jobspec("beta", sleep));
        agent.cli_ok(&["job", "run", "-detach", path.to_str().unwrap()]);
    }
    agent.cli_ok(&["job", "tag", "apply", "-version=0", "-name=golden", "beta"]);

    // Against the tag: each version's diff is from version 0, and version 0 has none.
    let history = agent.cli_ok(&["job", "history", "-p", "-diff-tag", "golden", "beta"]);
    let blocks: Vec<&str> = history.split("\n\nVersion").collect();
    assert_eq!(blocks.len(), 3, "{history}");
    assert!(blocks[0].starts_with("Version     = 2"), "{history}");
    assert!(
        blocks[0].contains("+/- args[1]: \"sleep 300\" => \"sleep 302\""),
        "{history}"
    );
    assert!(
        blocks[1].contains("+/- args[1]: \"sleep 300\" => \"sleep 301\""),
        "{history}"
    );
    assert!(blocks[2].contains("Tag Name"), "{history}");
    assert!(!blocks[2].contains("Diff"), "{history}");

    // Against a version number: version 0 now shows what differs from version 1.
    let history = agent.cli_ok(&["job", "history", "-p", "-diff-version=1", "beta"]);
    let blocks: Vec<&str> = history.split("\n\nVersion").collect();
    assert!(
        blocks[0].contains("+/- args[1]: \"sleep 301\" => \"sleep 302\""),
        "{history}"
    );
    assert!(!blocks[1].contains("Diff"), "{history}");
    assert!(
        blocks[2].contains("+/- args[1]: \"sleep 301\" => \"sleep 300\""),
        "{history}"
    );

    // The API: every version diffed against the one named, in Nomad's shape.
    let versions = agent.get_json("/v1/job/beta/versions?diffs=true&diff_version=2");
    let diffs = versions["Diffs"].as_array().unwrap();
    assert_eq!(diffs.len(), 3);
    assert_eq!(diffs[0]["Type"], "None");
    assert_eq!(diffs[1]["Type"], "Edited");

    // Refusals in Nomad's words.
    for (args, expected) in [
        (
            &["job", "history", "-diff-tag", "golden", "beta"][..],
            "-diff-tag and -diff-version can only be used with -p",
        ),
        (
            &[
                "job",
                "history",
                "-p",
                "-diff-tag",
                "golden",
                "-diff-version",
                "1",
                "beta",
            ][..],
            "-diff-tag and -diff-version are mutually exclusive",
        ),
        (
            &["job", "history", "-p", "-diff-version", "x", "beta"][..],
            "Error parsing -diff-version",
        ),
        (
            &["job", "history", "-p", "-diff-tag", "nope", "beta"][..],
            "tag \"nope\" not found",
        ),
        (
            &["job", "history", "-p", "-diff-version", "9", "beta"][..],
            "version 9 not found",
        ),
    ] {
        let output = agent.cli(args);
        assert_eq!(output.status.code(), Some(1), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
    let (status, body) = http(
        "GET",
        &agent.url("/v1/job/beta/versions?diffs=true&diff_tag=nope"),
        None,
    );
    assert_eq!((status, body.as_str()), (500, "tag \"nope\" not found"));
    let (status, body) = http(
        "GET",
        &agent.url("/v1/job/beta/versions?diffs=true&diff_version=x"),
        None,
    );
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("Failed to parse value of \"diff_version\" (x) as a uint64"));
}
