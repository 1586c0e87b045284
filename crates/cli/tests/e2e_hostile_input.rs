//! End to end: hostile input at every `/v1` route of a real agent (server and client in one
//! process, a job running so real IDs exist). A property test sends each route, with real,
//! unknown and malformed IDs in its path, malformed, oversized, deeply nested and wrongly typed
//! bodies and query parameters; the agent must answer every request with a status below 500,
//! within a deadline (a streaming route: its headers within the deadline), and never drop a
//! connection without an answer (what a panicking handler does) or die.
//!
//! Bounded for CI by `DROVER_ROUTE_FUZZ_CASES` (default 300 requests); with
//! `DROVER_ROUTE_FUZZ_SECONDS` it runs for that long instead (the long form in CONTRIBUTING.md).
//! Next to it, one regression test per 500 a sweep of the routes found, named after it.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{Value, json};
use support::{Agent, http, wait_for, write_jobspec};

/// How long a request may take to answer (its headers, for a streaming route).
const DEADLINE: Duration = Duration::from_secs(10);

/// Every `/v1` route the agent serves, with placeholders for the IDs in its path.
const ROUTES: &[&str] = &[
    "/v1/jobs",
    "/v1/jobs/parse",
    "/v1/validate/job",
    "/v1/job/{job}",
    "/v1/job/{job}/allocations",
    "/v1/job/{job}/evaluations",
    "/v1/job/{job}/versions",
    "/v1/job/{job}/summary",
    "/v1/job/{job}/deployment",
    "/v1/job/{job}/deployments",
    "/v1/job/{job}/evaluate",
    "/v1/job/{job}/plan",
    "/v1/job/{job}/periodic/force",
    "/v1/job/{job}/dispatch",
    "/v1/job/{job}/revert",
    "/v1/job/{job}/stable",
    "/v1/job/{job}/services",
    "/v1/job/{job}/submission",
    "/v1/job/{job}/scale",
    "/v1/allocations",
    "/v1/allocation/{alloc}",
    "/v1/allocation/{alloc}/stop",
    "/v1/allocation/{alloc}/services",
    "/v1/evaluations",
    "/v1/evaluation/{eval}",
    "/v1/evaluation/{eval}/allocations",
    "/v1/nodes",
    "/v1/node/{node}",
    "/v1/node/{node}/allocations",
    "/v1/node/{node}/drain",
    "/v1/node/{node}/eligibility",
    "/v1/node/{node}/purge",
    "/v1/node/{node}/evaluate",
    "/v1/node/pools",
    "/v1/node/pool/{name}",
    "/v1/node/pool/{name}/jobs",
    "/v1/node/pool/{name}/nodes",
    "/v1/deployments",
    "/v1/deployment/{deployment}",
    "/v1/deployment/allocations/{deployment}",
    "/v1/deployment/promote/{deployment}",
    "/v1/deployment/fail/{deployment}",
    "/v1/deployment/pause/{deployment}",
    "/v1/deployment/allocation-health/{deployment}",
    "/v1/agent/self",
    "/v1/agent/members",
    "/v1/agent/force-leave",
    "/v1/agent/health",
    "/v1/agent/servers",
    "/v1/agent/monitor",
    "/v1/event/stream",
    "/v1/status/leader",
    "/v1/status/peers",
    "/v1/regions",
    "/v1/metrics",
    "/v1/services",
    "/v1/service/{name}",
    "/v1/service/{name}/{name}",
    "/v1/search",
    "/v1/search/fuzzy",
    "/v1/scaling/policies",
    "/v1/scaling/policy/{name}",
    "/v1/client/stats",
    "/v1/client/gc",
    "/v1/client/metadata",
    "/v1/client/allocation/{alloc}/restart",
    "/v1/client/allocation/{alloc}/signal",
    "/v1/client/allocation/{alloc}/gc",
    "/v1/client/allocation/{alloc}/stats",
    "/v1/client/allocation/{alloc}/checks",
    "/v1/client/allocation/{alloc}/exec",
    "/v1/client/fs/logs/{alloc}",
    "/v1/client/fs/stream/{alloc}",
    "/v1/client/fs/ls/{alloc}",
    "/v1/client/fs/stat/{alloc}",
    "/v1/client/fs/cat/{alloc}",
    "/v1/client/fs/readat/{alloc}",
    "/v1/internal/node/register",
    "/v1/internal/node/update-alloc",
    "/v1/internal/node/{node}/update-status",
    "/v1/internal/node/{node}/client-allocs",
    "/v1/internal/node/{node}/sign-identities",
    "/v1/internal/allocs/get",
    "/v1/internal/services/upsert",
    "/v1/internal/services/delete",
    "/v1/internal/acl/whoami",
    "/v1/internal/acl/bearer-policies",
    "/v1/acl/bootstrap",
    "/v1/acl/policies",
    "/v1/acl/policy/{name}",
    "/v1/acl/tokens",
    "/v1/acl/token",
    "/v1/acl/token/{name}",
    "/v1/acl/token/onetime",
    "/v1/acl/token/onetime/exchange",
    "/v1/acl/roles",
    "/v1/acl/role",
    "/v1/acl/role/{name}",
    "/v1/acl/role/name/{name}",
    "/v1/namespaces",
    "/v1/namespace",
    "/v1/namespace/{name}",
    "/v1/vars",
    "/v1/var/{name}",
    "/v1/operator/keyring/keys",
    "/v1/operator/keyring/rotate",
    "/v1/operator/keyring/key/{name}",
    "/v1/operator/raft/configuration",
    "/v1/operator/raft/peer",
    "/v1/operator/snapshot",
    "/v1/operator/etcd/members",
    "/v1/system/gc",
    "/v1/system/reconcile/summaries",
    "/v1/agent/connect/ca/roots",
    "/v1/agent/connect/ca/leaf/{name}",
    "/v1/agent/connect/proxy/stats",
    "/v1/connect/intentions",
    "/v1/connect/intentions/exact",
    "/v1/connect/intentions/match",
    "/v1/connect/intentions/check",
];

/// Routes that may answer with a stream that does not end: their headers must come within the
/// deadline, their body may go on.
fn streams(path: &str) -> bool {
    [
        "/v1/event/stream",
        "/v1/agent/monitor",
        "/v1/client/fs/stream/",
        "/v1/client/fs/logs/",
    ]
    .iter()
    .any(|prefix| path.starts_with(prefix))
}

/// The IDs of what the agent holds, for paths that name something real.
#[derive(Debug, Clone)]
struct Known {
    job: String,
    alloc: String,
    node: String,
    eval: String,
    deployment: String,
}

/// One request: the route, what fills each placeholder, the query and the body.
#[derive(Debug, Clone)]
struct Hostile {
    method: &'static str,
    route: &'static str,
    /// Per placeholder: `None` for the real ID, else the (percent-encoded) text to use.
    ids: Vec<Option<String>>,
    query: Vec<(String, String)>,
    body: Option<Vec<u8>>,
}

/// Path segments that are not IDs: unknown, empty, traversal, NUL, invalid UTF-8, long.
fn hostile_segment() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        3 => Just(None),
        1 => Just(Some("0b3dc3c7-2b0e-4d40-8e35-2f5c0a3e4b3d".to_owned())),
        1 => Just(Some("%00".to_owned())),
        1 => Just(Some("a%00b".to_owned())),
        1 => Just(Some("..%2F..%2Fetc".to_owned())),
        1 => Just(Some("..".to_owned())),
        1 => Just(Some("%ff%fe".to_owned())),
        1 => Just(Some("%E2%98%83".to_owned())),
        1 => Just(Some("x".repeat(5000))),
        1 => Just(Some("%20".to_owned())),
        1 => Just(Some("*".to_owned())),
        1 => "[a-zA-Z0-9._~-]{1,40}".prop_map(Some),
    ]
}

const QUERY_KEYS: &[&str] = &[
    "index",
    "source",
    "destination",
    "by",
    "name",
    "wait",
    "namespace",
    "region",
    "prefix",
    "filter",
    "per_page",
    "next_token",
    "reverse",
    "stale",
    "purge",
    "all",
    "path",
    "offset",
    "limit",
    "origin",
    "follow",
    "plain",
    "type",
    "task",
    "context",
    "diffs",
    "version",
    "force",
    "resources",
    "task_states",
    "address",
    "node_id",
    "topic",
    "command",
    "tty",
    "eval_priority",
    "global",
    "meta",
    "cas",
    "lock-acquire",
    "lock-release",
    "ttl",
    "format",
    "json",
    "pretty",
    "log_level",
    "choose",
    "verbose",
    "sort",
    "stable",
];

/// Query values, percent-encoded: numbers out of range, negative, not numbers, durations that
/// overflow, NUL, unbalanced filters, long text. No large valid `index` (a blocking query on
/// it would rightly wait out its `wait`).
fn hostile_query_value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("0".to_owned()),
        Just("-1".to_owned()),
        Just("1.5".to_owned()),
        Just("1e3".to_owned()),
        Just("99999999999999999999999".to_owned()),
        Just("0x10".to_owned()),
        Just("true".to_owned()),
        Just("yes".to_owned()),
        Just("%00".to_owned()),
        Just("%ff".to_owned()),
        Just("99999999999999h".to_owned()),
        Just("-5s".to_owned()),
        Just("1ns".to_owned()),
        Just("Job.ID%20%3D%3D".to_owned()),
        Just("((((((((((".to_owned()),
        Just("%22unterminated".to_owned()),
        Just("..%2F..%2F..%2Fetc%2Fpasswd".to_owned()),
        Just("%2Falloc%2Flogs".to_owned()),
        Just("start".to_owned()),
        Just("end".to_owned()),
        Just("stderr".to_owned()),
        Just("%2A".to_owned()),
        Just("x".repeat(9000)),
        // Not a number: `index=4983` past the store's index is a blocking query that rightly
        // waits out its `wait`.
        "[a-zA-Z][a-zA-Z0-9]{0,11}",
    ]
}

/// Field names of Nomad's request bodies, so generated bodies reach past the first decode.
const FIELD_NAMES: &[&str] = &[
    "Job",
    "ID",
    "Name",
    "Namespace",
    "Meta",
    "Eligibility",
    "DrainSpec",
    "Deadline",
    "MarkEligible",
    "Context",
    "Prefix",
    "Text",
    "Items",
    "Path",
    "Payload",
    "Count",
    "Target",
    "Policies",
    "Rules",
    "Type",
    "Description",
    "Capabilities",
    "TaskGroups",
    "Tasks",
    "Config",
    "Driver",
    "EnforceIndex",
    "JobModifyIndex",
    "Variables",
    "JobHCL",
    "Canonicalize",
    "Datacenters",
    "Region",
    "Priority",
    "Periodic",
    "ParameterizedJob",
    "Servers",
    "NodeID",
    "Alloc",
    "AllocIDs",
    "Services",
    "Status",
    "SecretID",
    "AccessorID",
    "Global",
    "ExpirationTTL",
    "Roles",
    "HealthyAllocationIDs",
    "UnhealthyAllocationIDs",
    "All",
    "Groups",
    "Pause",
    "Signal",
    "Task",
    "AllTasks",
    "JobVersion",
    "EnforcePriorVersion",
    "Stable",
    "NodePool",
    "OneTimeSecretID",
    "Lock",
    "Node",
    "Allocs",
    "Evals",
    "Submission",
    "PolicyOverride",
    "PreserveCounts",
];

fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        Just(json!(u64::MAX)),
        Just(json!(-1)),
        Just(json!(1.0e308)),
        Just(json!(-0.5)),
        Just(json!("")),
        Just(json!("\u{0}")),
        Just(json!("../../etc/passwd")),
        Just(json!("x".repeat(10_000))),
        "[a-zA-Z0-9 ${}.:*-]{0,20}".prop_map(Value::String),
    ]
}

/// JSON of any shape, objects mostly keyed by Nomad's field names.
fn json_value() -> impl Strategy<Value = Value> {
    json_leaf().prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec(
                (
                    prop_oneof![
                        4 => prop::sample::select(FIELD_NAMES).prop_map(str::to_owned),
                        1 => "[a-zA-Z]{1,8}",
                    ],
                    inner
                ),
                0..6
            )
            .prop_map(|fields| Value::Object(fields.into_iter().collect())),
        ]
    })
}

fn nested(depth: usize, open: &str, close: &str) -> Vec<u8> {
    let mut text = open.repeat(depth);
    text.push_str(&close.repeat(depth));
    text.into_bytes()
}

fn hostile_body() -> impl Strategy<Value = Option<Vec<u8>>> {
    prop_oneof![
        2 => Just(None),
        1 => prop::sample::select(vec![
            "{", "{\"Job\":", "[1,2", "nul", "{\"a\":1}}", "\"", "{\"Job\":{\"ID\":}}", "\u{0}",
            "{\"ID\":\"x\",\"ID\":3}", "Job = {}", "<xml/>",
        ])
        .prop_map(|text| Some(text.as_bytes().to_vec())),
        1 => prop::collection::vec(any::<u8>(), 0..512).prop_map(Some),
        1 => prop::sample::select(vec![64usize, 1_000, 100_000]).prop_flat_map(|depth| {
            prop_oneof![
                Just(Some(nested(depth, "[", "]"))),
                Just(Some(nested(depth, "{\"Job\":", "}"))),
                Just(Some({
                    let mut body = b"{\"Job\":{\"ID\":\"deep\",\"TaskGroups\":".to_vec();
                    body.extend(nested(depth, "[", "]"));
                    body.extend(b"}}");
                    body
                })),
            ]
        }),
        // Just over the API's body limit (2 MiB).
        1 => Just(()).prop_map(|()| {
            let mut body = b"{\"Job\":{\"ID\":\"".to_vec();
            body.extend(std::iter::repeat_n(b'a', drover_api::MAX_REQUEST_BODY + 1));
            body.extend(b"\"}}");
            Some(body)
        }),
        6 => json_value().prop_map(|value| Some(value.to_string().into_bytes())),
    ]
}

fn hostile_request() -> impl Strategy<Value = Hostile> {
    (
        prop::sample::select(vec!["GET", "PUT", "POST", "DELETE", "GET", "PUT", "PATCH"]),
        prop::sample::select(ROUTES),
        prop::collection::vec(hostile_segment(), 2),
        prop::collection::vec(
            (
                prop::sample::select(QUERY_KEYS).prop_map(str::to_owned),
                hostile_query_value(),
            ),
            0..4,
        ),
        hostile_body(),
    )
        .prop_map(|(method, route, ids, query, body)| Hostile {
            method,
            route,
            ids,
            query,
            body,
        })
}

/// The request's path and query, its placeholders filled.
fn target(request: &Hostile, known: &Known) -> String {
    let mut path = String::new();
    let mut rest = request.route;
    let mut slot = 0;
    while let Some(open) = rest.find('{') {
        path.push_str(&rest[..open]);
        let close = rest[open..].find('}').unwrap() + open;
        let real = match &rest[open + 1..close] {
            "job" => known.job.clone(),
            "alloc" => known.alloc.clone(),
            "node" => known.node.clone(),
            "eval" => known.eval.clone(),
            "deployment" => known.deployment.clone(),
            _ => "default".to_owned(),
        };
        path.push_str(
            request
                .ids
                .get(slot)
                .cloned()
                .flatten()
                .as_deref()
                .unwrap_or(&real),
        );
        slot += 1;
        rest = &rest[close + 1..];
    }
    path.push_str(rest);
    if !request.query.is_empty() {
        let query: Vec<String> = request
            .query
            .iter()
            .map(|(key, value)| format!("{key}={value}"))
            .collect();
        path.push('?');
        path.push_str(&query.join("&"));
    }
    path
}

/// What came back: the status, or how the exchange failed.
#[derive(Debug)]
enum Outcome {
    Answered {
        status: u16,
        head: String,
    },
    /// The connection closed before a status line: a panicking handler, or a dead agent.
    Dropped(String),
    /// Nothing (or not all of a body that should end) within the deadline.
    TimedOut(String),
}

fn send(
    address: &str,
    method: &str,
    target: &str,
    body: Option<&[u8]>,
    streaming: bool,
) -> Outcome {
    let host = address.strip_prefix("http://").unwrap();
    let started = Instant::now();
    // Every step is bounded: an agent that no longer accepts is a finding, not a hung run.
    let socket: std::net::SocketAddr = host.parse().expect("the agent's address is an IP:port");
    let mut stream = match TcpStream::connect_timeout(&socket, DEADLINE) {
        Ok(stream) => stream,
        Err(error) => return Outcome::Dropped(format!("connecting: {error}")),
    };
    stream.set_read_timeout(Some(DEADLINE)).unwrap();
    stream.set_write_timeout(Some(DEADLINE)).unwrap();
    let mut head = format!("{method} {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    if let Some(body) = body {
        head.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    head.push_str("\r\n");
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(body.unwrap_or_default());
    // The agent may answer (413) and close before it read a large body: what it answered counts.
    let _ = stream.write_all(&bytes);
    let mut received = Vec::new();
    let mut buffer = [0u8; 16 * 1024];
    loop {
        if started.elapsed() > DEADLINE {
            return Outcome::TimedOut(String::from_utf8_lossy(&received).into_owned());
        }
        match stream.read(&mut buffer) {
            Ok(0) => break,
            Ok(read) => {
                received.extend_from_slice(&buffer[..read]);
                if streaming && received.windows(4).any(|window| window == b"\r\n\r\n") {
                    break;
                }
            }
            Err(error)
                if matches!(
                    error.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Outcome::TimedOut(String::from_utf8_lossy(&received).into_owned());
            }
            Err(error) => {
                if received.is_empty() {
                    return Outcome::Dropped(error.to_string());
                }
                break;
            }
        }
    }
    let text = String::from_utf8_lossy(&received).into_owned();
    let head = text.split("\r\n\r\n").next().unwrap_or_default().to_owned();
    match head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse::<u16>().ok())
    {
        Some(status) => Outcome::Answered {
            status,
            head: text.chars().take(600).collect(),
        },
        None => Outcome::Dropped(format!("no status line in {text:?}")),
    }
}

/// The checks of one request.
fn exchange(agent: &Agent, known: &Known, request: &Hostile) -> Result<(), TestCaseError> {
    let target = target(request, known);
    let path = target.split('?').next().unwrap_or_default().to_owned();
    let outcome = send(
        &agent.address,
        request.method,
        &target,
        request.body.as_deref(),
        streams(&path),
    );
    let shown: String = target.chars().take(300).collect();
    match outcome {
        Outcome::Answered { status, head } => {
            prop_assert!(
                status < 500,
                "{} {shown} answered {status}:\n{head}",
                request.method
            );
        }
        Outcome::Dropped(why) => {
            return Err(TestCaseError::fail(format!(
                "{} {shown}: the connection closed without an answer ({why})",
                request.method
            )));
        }
        Outcome::TimedOut(partial) => {
            return Err(TestCaseError::fail(format!(
                "{} {shown}: no whole answer within {DEADLINE:?}; got {:?}",
                request.method,
                partial.chars().take(300).collect::<String>()
            )));
        }
    }
    Ok(())
}

const JOB: &str = r#"
job "fuzzed" {
  type = "service"
  group "web" {
    task "server" {
      driver = "raw_exec"
      config {
        command = "/bin/sleep"
        args    = ["600"]
      }
      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}
"#;

/// Starts a dev agent and runs a job on it, so that paths can name real things.
fn agent_with_a_job() -> (Agent, Known) {
    let agent = Agent::start_dev();
    let (_dir, path) = write_jobspec("fuzzed.hcl", JOB);
    agent.cli_ok(&["job", "run", "-detach", path.to_str().unwrap()]);
    let alloc = wait_for("the job's allocation runs", Duration::from_secs(60), || {
        let allocs = agent.get_json("/v1/job/fuzzed/allocations");
        allocs
            .as_array()?
            .iter()
            .find_map(|alloc| (alloc["ClientStatus"] == "running").then(|| alloc.clone()))
    });
    let deployment = agent.get_json("/v1/job/fuzzed/deployment");
    let known = Known {
        job: "fuzzed".to_owned(),
        alloc: alloc["ID"].as_str().unwrap().to_owned(),
        node: alloc["NodeID"].as_str().unwrap().to_owned(),
        eval: alloc["EvalID"].as_str().unwrap().to_owned(),
        deployment: deployment["ID"].as_str().unwrap_or("none").to_owned(),
    };
    (agent, known)
}

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|text| text.parse().ok())
}

#[test]
fn no_route_answers_hostile_input_with_a_5xx_a_hang_or_a_dropped_connection() {
    let (mut agent, known) = agent_with_a_job();
    let seconds = env_number("DROVER_ROUTE_FUZZ_SECONDS");
    let cases = env_number("DROVER_ROUTE_FUZZ_CASES").unwrap_or(300);
    let mut runner = TestRunner::new(Config {
        failure_persistence: None,
        max_shrink_iters: 200,
        // A hang costs a deadline per shrinking step: report it within a minute.
        max_shrink_time: 60_000,
        ..Config::default()
    });
    let started = Instant::now();
    let budget = seconds.map(Duration::from_secs);
    // Cases are drawn here, one at a time, until the count or the time is reached: the runner's
    // own loop (`TestRunner::run`) goes on drawing its configured number of cases, so a time
    // budget that only skipped the requests kept it drawing for ever, and the long form never
    // finished.
    let strategy = hostile_request();
    let mut sent: u64 = 0;
    let result = loop {
        let done = match budget {
            Some(budget) => started.elapsed() >= budget,
            None => sent >= cases,
        };
        if done {
            break Ok(());
        }
        let case = strategy
            .new_tree(&mut runner)
            .expect("hostile requests are drawn without rejection");
        sent += 1;
        if let Err(failure) = runner.run_one(case, |request| exchange(&agent, &known, &request)) {
            break Err(failure);
        }
    };
    eprintln!(
        "hostile input: {} requests in {:.1}s",
        sent,
        started.elapsed().as_secs_f64()
    );
    if let Err(failure) = result {
        panic!("{failure}");
    }
    let child = agent.child.as_mut().expect("the agent runs");
    assert!(
        child.try_wait().expect("the agent's status").is_none(),
        "the agent died during the run"
    );
}

// Regression tests: each a 500 (or worse) a sweep of the routes got for bad input.

/// Sends one request and returns its status and body.
fn call(agent: &Agent, method: &str, path: &str, body: Option<&str>) -> (u16, String) {
    http(method, &agent.url(path), body)
}

#[test]
fn node_purge_and_evaluate_of_an_unknown_node_are_404_not_500() {
    let agent = Agent::start_dev();
    for suffix in ["purge", "evaluate"] {
        let (status, body) = call(
            &agent,
            "POST",
            &format!("/v1/node/0b3dc3c7-2b0e-4d40-8e35-2f5c0a3e4b3d/{suffix}"),
            None,
        );
        assert_eq!((status, body.as_str()), (404, "node not found"), "{suffix}");
    }
}

#[test]
fn failing_an_unknown_deployment_is_404_not_500() {
    let agent = Agent::start_dev();
    let unknown = "0b3dc3c7-2b0e-4d40-8e35-2f5c0a3e4b3d";
    for route in ["fail", "pause", "promote"] {
        let (status, body) = call(
            &agent,
            "POST",
            &format!("/v1/deployment/{route}/{unknown}"),
            Some(&format!(r#"{{"DeploymentID": "{unknown}"}}"#)),
        );
        assert_eq!(
            (status, body.as_str()),
            (404, "deployment not found"),
            "{route}"
        );
    }
}

#[test]
fn a_snapshot_restore_of_a_body_that_is_no_snapshot_is_400_not_500() {
    let agent = Agent::start_dev();
    let (status, body) = call(
        &agent,
        "PUT",
        "/v1/operator/snapshot",
        Some("not a snapshot"),
    );
    assert_eq!(status, 400, "{body}");
}

#[test]
fn node_eligibility_without_its_field_is_400_not_500() {
    let (agent, known) = agent_with_a_job();
    let (status, body) = call(
        &agent,
        "POST",
        &format!("/v1/node/{}/eligibility", known.node),
        Some("{}"),
    );
    assert_eq!(status, 400, "{body}");
}

#[test]
fn search_with_an_unknown_context_is_400_not_500() {
    let agent = Agent::start_dev();
    for path in ["/v1/search", "/v1/search/fuzzy"] {
        let (status, body) = call(
            &agent,
            "PUT",
            path,
            Some(r#"{"Prefix":"a","Text":"a","Context":"nonsense"}"#),
        );
        assert_eq!(status, 400, "{path}: {body}");
    }
}

#[test]
fn a_namespace_write_with_malformed_json_is_400_not_500() {
    let agent = Agent::start_dev();
    let (status, body) = call(&agent, "PUT", "/v1/namespace/x", Some("{\"Name\":"));
    assert_eq!(status, 400, "{body}");
}

#[test]
fn deleting_an_unknown_service_registration_is_404_not_500() {
    let agent = Agent::start_dev();
    let (status, body) = call(&agent, "DELETE", "/v1/service/nothing/nothing-id", None);
    assert_eq!(
        (status, body.as_str()),
        (404, "service registration not found")
    );
}

#[test]
fn client_fs_paths_with_a_nul_are_400_not_500() {
    let (agent, known) = agent_with_a_job();
    for operation in ["ls", "stat", "cat", "readat", "stream"] {
        let (status, body) = call(
            &agent,
            "GET",
            &format!(
                "/v1/client/fs/{operation}/{}?path=/alloc%00/x&offset=0&limit=1",
                known.alloc
            ),
            None,
        );
        assert_eq!(status, 400, "{operation}: {body}");
    }
}

/// The mesh's routes: a leaf asked for with odd service names (by a real sidecar's identity,
/// by none), intentions written with bad bodies and parameters: each a 4xx that says what is
/// wrong, never a 500, a panic or a write.
#[test]
fn mesh_leaf_with_odd_service_names_and_intentions_with_bad_bodies_are_4xx() {
    let agent = Agent::start_dev();
    let (_dir, path) = write_jobspec(
        "mesh.hcl",
        r#"
job "mesh" {
  group "web" {
    task "connect-proxy-web" {
      driver = "raw_exec"
      identity {
        file = true
      }
      config {
        command = "sleep"
        args    = ["3600"]
      }
    }
  }
}
"#,
    );
    agent.cli_ok(&["job", "run", "-detach", &path.to_string_lossy()]);
    let alloc = wait_for("a running mesh allocation", Duration::from_secs(60), || {
        let allocs = agent.get_json("/v1/job/mesh/allocations");
        allocs
            .as_array()?
            .iter()
            .find(|alloc| alloc["ClientStatus"] == "running")
            .and_then(|alloc| alloc["ID"].as_str().map(str::to_owned))
    });
    let token_file = agent
        .data_dir
        .join("alloc")
        .join(&alloc)
        .join("connect-proxy-web/secrets/nomad_token");
    let token = wait_for("the sidecar's identity", Duration::from_secs(60), || {
        std::fs::read_to_string(&token_file).ok()
    });
    let leaf = |service: &str, token: Option<&str>| {
        support::http_as(
            "GET",
            &agent.url(&format!("/v1/agent/connect/ca/leaf/{service}")),
            token,
            None,
        )
    };
    // The identity is good: its own service's leaf is issued.
    let (status, body) = leaf("web", Some(&token));
    assert_eq!(status, 200, "{body}");
    let long = "w".repeat(5000);
    for odd in [
        "web%2F..%2Fapi",
        "..",
        "web%00",
        "%FF%FE",
        "w%C3%A9b",
        "web%20",
        "*",
        "web.",
        long.as_str(),
    ] {
        // A path with a `..` segment is cleaned first, as Nomad's router does: a 301 to
        // the clean path.
        let refused =
            |status: u16| status == 403 || status == 400 || (odd.contains("..") && status == 301);
        let (status, body) = leaf(odd, Some(&token));
        assert!(refused(status), "leaf {odd:.40}: {status} {body}");
        let (status, body) = leaf(odd, None);
        assert!(
            refused(status),
            "leaf {odd:.40} without a token: {status} {body}"
        );
    }
    let (status, _) = leaf("", Some(&token));
    assert_eq!(status, 404, "a leaf of no service");
    let (status, _) = support::http_as(
        "PUT",
        &agent.url("/v1/agent/connect/ca/leaf/web"),
        Some(&token),
        Some("{}"),
    );
    assert_eq!(status, 405);

    let exact = "/v1/connect/intentions/exact?source=web&destination=api";
    for (body, says) in [
        ("not json", "Failed to decode request body"),
        ("{\"Action\":", "Failed to decode request body"),
        ("[]", "Action is required"),
        ("{}", "Action is required"),
        ("{\"Action\":null}", "Action is required"),
        ("{\"Action\":\"maybe\"}", "maybe"),
        ("{\"Action\":5}", "Action must be"),
        ("{\"Action\":[\"allow\"]}", "Action must be"),
        (
            "{\"Action\":\"allow\",\"Description\":7}",
            "Description must be a string",
        ),
        ("{\"Action\":\"allow\",\"Meta\":{\"a\":1}}", "Meta"),
        ("{\"Action\":\"allow\",\"Meta\":[]}", "Meta"),
        ("{\"Action\":\"allow\",\"Permissions\":[]}", "Permissions"),
    ] {
        let (status, answer) = call(&agent, "PUT", exact, Some(body));
        assert_eq!(status, 400, "{body}: {answer}");
        assert!(answer.contains(says), "{body}: {answer}");
    }
    let good = Some("{\"Action\":\"deny\"}");
    for (path, says) in [
        ("/v1/connect/intentions/exact?destination=api", "source"),
        ("/v1/connect/intentions/exact?source=web", "destination"),
        (
            "/v1/connect/intentions/exact?source=a/b/c&destination=api",
            "source",
        ),
        (
            "/v1/connect/intentions/exact?source=&destination=api",
            "source",
        ),
        (
            "/v1/connect/intentions/exact?source=w%20b&destination=api",
            "source",
        ),
        (
            "/v1/connect/intentions/exact?source=web&destination=%FF",
            "destination",
        ),
    ] {
        let (status, answer) = call(&agent, "PUT", path, good);
        assert_eq!(status, 400, "{path}: {answer}");
        assert!(answer.contains(says), "{path}: {answer}");
    }
    for (path, says) in [
        ("/v1/connect/intentions/match?name=web", "by"),
        ("/v1/connect/intentions/match?by=sideways&name=web", "by"),
        ("/v1/connect/intentions/match?by=source", "name"),
        ("/v1/connect/intentions/match?by=source&name=a/b/c", "name"),
        ("/v1/connect/intentions/check?source=web", "destination"),
        ("/v1/connect/intentions?filter=x", "filter"),
        ("/v1/connect/intentions?index=abc", "index"),
    ] {
        let (status, answer) = call(&agent, "GET", path, None);
        assert_eq!(status, 400, "{path}: {answer}");
        assert!(answer.contains(says), "{path}: {answer}");
    }
    // Nothing of that was written.
    let listed = agent.get_json("/v1/connect/intentions");
    assert_eq!(listed, json!([]), "{listed}");
    let (status, answer) = call(&agent, "DELETE", exact, None);
    assert!(status == 404 || status == 200, "{answer}");
    let (status, answer) = call(&agent, "PUT", "/v1/agent/connect/proxy/stats", Some("[1,2"));
    assert_eq!(status, 400, "{answer}");
}
