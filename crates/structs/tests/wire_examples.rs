//! Round trips of the JSON examples in the API reference: decode into drover's types, encode
//! again, and compare with the original. Nomad writes `null` for empty lists and maps where
//! drover writes `[]`/`{}`; the comparison treats those as equal and nothing else.

#![allow(clippy::expect_used, clippy::unwrap_used)] // a failed expectation is a failed test

use drover_structs::*;
use serde_json::{Value, json};

/// `[]`, `{}` and `null` become `null`, recursively, so the two encodings of "empty" compare equal.
fn normalize_empty(value: Value) -> Value {
    match value {
        Value::Array(items) if items.is_empty() => Value::Null,
        Value::Object(map) if map.is_empty() => Value::Null,
        Value::Array(items) => Value::Array(items.into_iter().map(normalize_empty).collect()),
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(key, value)| (key, normalize_empty(value)))
                .collect(),
        ),
        other => other,
    }
}

fn round_trip<T>(original: &Value) -> (T, Value)
where
    T: serde::de::DeserializeOwned + serde::Serialize,
{
    let decoded: T = serde_json::from_value(original.clone()).expect("decodes");
    let encoded = serde_json::to_value(&decoded).expect("encodes");
    (decoded, encoded)
}

fn assert_same_wire(original: &Value, encoded: &Value) {
    let left = normalize_empty(original.clone());
    let right = normalize_empty(encoded.clone());
    assert_eq!(
        left, right,
        "\noriginal: {original:#}\nencoded:  {encoded:#}"
    );
}

fn task_event_example() -> Value {
    json!({"Type":"Terminated","Time":1700000003400000000i64,"Message":"","DisplayMessage":"Exit Code: 0",
     "Details":{"exit_code":"0","signal":"0","oom_killed":"false"},
     "FailsTask":false,"RestartReason":"","SetupError":"","DriverError":"","ExitCode":0,"Signal":0,
     "KillTimeout":0,"KillError":"","KillReason":"","StartDelay":0,"DownloadError":"",
     "ValidationError":"","DiskLimit":0,"FailedSibling":"","VaultError":"","TaskSignalReason":"",
     "TaskSignal":"","DriverMessage":"","GenericSource":""})
}

fn task_state_example() -> Value {
    json!({"State":"dead","Failed":false,"Restarts":0,"LastRestart":"0001-01-01T00:00:00Z",
     "StartedAt":"2026-11-21T07:00:01.2Z","FinishedAt":"2026-11-21T07:00:03.4Z",
     "Events":[task_event_example()], "Paused":""})
}

#[test]
fn task_event_example_round_trips_exactly() {
    let original = task_event_example();
    let (event, encoded): (TaskEvent, _) = round_trip(&original);
    assert_eq!(event.r#type, TASK_TERMINATED);
    assert_eq!(event.time, 1_700_000_003_400_000_000);
    assert_eq!(
        event.details.get("oom_killed").map(String::as_str),
        Some("false")
    );
    // Same keys, same values, nothing normalized away.
    assert_eq!(original, encoded);
}

#[test]
fn task_state_example_round_trips_exactly() {
    let original = task_state_example();
    let (state, encoded): (TaskState, _) = round_trip(&original);
    assert_eq!(state.state, TASK_STATE_DEAD);
    assert!(state.last_restart.is_zero());
    assert_eq!(
        state.started_at,
        Timestamp::parse_rfc3339("2026-11-21T07:00:01.200Z").expect("parses")
    );
    assert_eq!(state.events.len(), 1);
    assert_eq!(original, encoded);
}

#[test]
fn register_body_decodes_and_keeps_what_it_was_given() {
    let body = json!({"Job":{"ID":"example","Name":"example","Type":"batch","Datacenters":["dc1"],
     "TaskGroups":[{"Name":"g","Count":1,
       "RestartPolicy":{"Attempts":0,"Mode":"fail","Interval":1800000000000i64,"Delay":15000000000i64},
       "Tasks":[{"Name":"t","Driver":"raw_exec",
         "Config":{"command":"/bin/sh","args":["-c","echo hi"]},
         "Env":{"FOO":"bar"},"Resources":{"CPU":100,"MemoryMB":128},
         "KillTimeout":5000000000i64}]}]}});
    let request: JobRegisterRequest = serde_json::from_value(body.clone()).expect("decodes");
    let job = request.job.expect("job present");
    assert_eq!(job.id, "example");
    assert_eq!(job.r#type, JOB_TYPE_BATCH);
    let group = &job.task_groups[0];
    let restart = group.restart_policy.as_ref().expect("restart policy");
    assert_eq!(restart.attempts, 0);
    assert_eq!(restart.interval, DurationNs::from_mins(30));
    let task = &group.tasks[0];
    assert_eq!(task.kill_timeout, DurationNs::from_secs(5));
    assert_eq!(
        task.resources.as_ref().map(|resources| resources.memory_mb),
        Some(128)
    );
    // Driver config keeps its key order.
    let config_keys: Vec<&str> = task.config.keys().map(String::as_str).collect();
    assert_eq!(config_keys, ["command", "args"]);

    // Every key given comes back out with the same value.
    let encoded = serde_json::to_value(&job).expect("encodes");
    let given_task = &body["Job"]["TaskGroups"][0]["Tasks"][0];
    let encoded_task = &encoded["TaskGroups"][0]["Tasks"][0];
    for (key, value) in given_task.as_object().expect("object") {
        if key == "Resources" {
            assert_eq!(encoded_task["Resources"]["CPU"], value["CPU"]);
            assert_eq!(encoded_task["Resources"]["MemoryMB"], value["MemoryMB"]);
        } else {
            assert_eq!(&encoded_task[key], value, "task key {key}");
        }
    }
    assert_eq!(
        encoded["TaskGroups"][0]["RestartPolicy"]["Interval"],
        body["Job"]["TaskGroups"][0]["RestartPolicy"]["Interval"]
    );
    for key in ["ID", "Name", "Type", "Datacenters"] {
        assert_eq!(encoded[key], body["Job"][key], "job key {key}");
    }
}

#[test]
fn register_response_example_round_trips_exactly() {
    let original = json!({"EvalID":"2f4c","EvalCreateIndex":57,"JobModifyIndex":57,"Warnings":"",
     "Index":57,"LastContact":0,"KnownLeader":false,"NextToken":""});
    let (response, encoded): (JobRegisterResponse, _) = round_trip(&original);
    assert_eq!(response.eval_id, "2f4c");
    assert_eq!(original, encoded);
}

#[test]
fn job_list_stub_example_round_trips_exactly() {
    let original = json!({"ID":"example","ParentID":"","Name":"example","Namespace":"default","Datacenters":["dc1"],
      "NodePool":"default","Multiregion":null,"Type":"batch","Priority":50,"Periodic":false,
      "ParameterizedJob":false,"Stop":false,"Status":"running","StatusDescription":"",
      "JobSummary":{"JobID":"example","Namespace":"default","Summary":{"g":{"Queued":0,
      "Complete":0,"Failed":0,"Running":1,"Starting":0,"Lost":0,"Unknown":0}},"Children":
      {"Pending":0,"Running":0,"Dead":0},"CreateIndex":10,"ModifyIndex":12},
      "CreateIndex":10,"ModifyIndex":12,"JobModifyIndex":10,"SubmitTime":1700000000000000000i64});
    let (stub, encoded): (JobListStub, _) = round_trip(&original);
    assert_eq!(
        stub.job_summary
            .as_ref()
            .map(|summary| summary.summary["g"].running),
        Some(1)
    );
    assert_eq!(original, encoded);
}

#[test]
fn job_list_stub_omits_empty_namespace_and_unrequested_meta() {
    let job = Job {
        id: "web".into(),
        ..Job::default()
    };
    let encoded = serde_json::to_value(job.stub(None, false)).expect("encodes");
    assert!(encoded.get("Namespace").is_none());
    assert!(encoded.get("Meta").is_none());
    let with_meta = serde_json::to_value(job.stub(None, true)).expect("encodes");
    assert_eq!(with_meta["Meta"], json!({}));
}

#[test]
fn alloc_list_stub_example_round_trips() {
    let original = json!({"ID":"8e3a","EvalID":"2f4c","Name":"example.g[0]","Namespace":"default",
      "NodeID":"f1d9","NodeName":"node1","JobID":"example","JobType":"batch","JobVersion":0,
      "TaskGroup":"g","DesiredStatus":"run","DesiredDescription":"","ClientStatus":"running",
      "ClientDescription":"Tasks are running","DesiredTransition":{"Migrate":null,
      "Reschedule":null,"ForceReschedule":null,"NoShutdownDelay":null,"MigrateDisablePlacement":null},
      "TaskStates":{"t":task_state_example()},"DeploymentStatus":null,"FollowupEvalID":"",
      "NextAllocation":"","RescheduleTracker":null,"PreemptedAllocations":null,
      "PreemptedByAllocation":"","CreateIndex":14,"ModifyIndex":16,
      "CreateTime":1700000000000000000i64,"ModifyTime":1700000001000000000i64});
    let (stub, encoded): (AllocListStub, _) = round_trip(&original);
    assert_eq!(
        stub.task_states.as_ref().map(|states| states.len()),
        Some(1)
    );
    assert_eq!(stub.desired_transition, DesiredTransition::default());
    assert!(encoded.get("AllocatedResources").is_none());
    assert_same_wire(&original, &encoded);
}

#[test]
fn allocation_with_allocated_resources_example_round_trips() {
    let allocated = json!({"Tasks":{"t":{"Cpu":{"CpuShares":100,"ReservedCores":null},
      "Memory":{"MemoryMB":128,"MemoryMaxMB":0},"Networks":null,"Devices":null}},
      "TaskLifecycles":{"t":null},"Shared":{"Networks":null,"DiskMB":300,"Ports":null}});
    let (resources, encoded): (AllocatedResources, _) = round_trip(&allocated);
    assert_eq!(resources.tasks["t"].cpu.cpu_shares, 100);
    assert_eq!(resources.task_lifecycles.get("t"), Some(&None));
    assert_same_wire(&allocated, &encoded);
    // A lifecycle that is present survives.
    let with_lifecycle = json!({"TaskLifecycles":{"init":{"Hook":"prestart","Sidecar":false}}});
    let resources: AllocatedResources = serde_json::from_value(with_lifecycle).expect("decodes");
    assert_eq!(
        resources.task_lifecycles["init"]
            .as_ref()
            .map(|lifecycle| lifecycle.hook.as_str()),
        Some(LIFECYCLE_HOOK_PRESTART)
    );
}

#[test]
fn evaluation_example_round_trips() {
    let original = json!({"ID":"2f4c","Namespace":"default","Priority":50,"Type":"batch","TriggeredBy":"job-register",
     "JobID":"example","JobModifyIndex":10,"NodeID":"","NodeModifyIndex":0,"DeploymentID":"",
     "Status":"complete","StatusDescription":"","Wait":0,"WaitUntil":"0001-01-01T00:00:00Z",
     "NextEval":"","PreviousEval":"","BlockedEval":"","RelatedEvals":null,"FailedTGAllocs":null,
     "ClassEligibility":null,"QuotaLimitReached":"","EscapedComputedClass":false,"AnnotatePlan":false,
     "QueuedAllocations":{"g":0},"SnapshotIndex":11,"CreateIndex":10,"ModifyIndex":12,
     "CreateTime":1700000000000000000i64,"ModifyTime":1700000000100000000i64});
    let (evaluation, encoded): (Evaluation, _) = round_trip(&original);
    assert!(evaluation.terminal_status());
    assert_eq!(evaluation.triggered_by, EVAL_TRIGGER_JOB_REGISTER);
    assert!(evaluation.wait_until.is_zero());
    assert_same_wire(&original, &encoded);
}

#[test]
fn node_list_stub_example_round_trips() {
    let original = json!({"Address":"127.0.0.1","ID":"f1d9","Datacenter":"dc1","Name":"node1","NodePool":"default",
      "NodeClass":"","Version":"1.7.0","Drain":false,"SchedulingEligibility":"eligible",
      "Status":"ready","StatusDescription":"","Drivers":{"raw_exec":{"Attributes":{},"Detected":true,
      "Healthy":true,"HealthDescription":"Healthy","UpdateTime":"2026-11-21T07:00:00.123456789Z"}},"HostVolumes":null,
      "LastDrain":null,"CreateIndex":7,"ModifyIndex":9});
    let (stub, encoded): (NodeListStub, _) = round_trip(&original);
    assert!(stub.drivers["raw_exec"].healthy);
    assert!(encoded.get("Attributes").is_none());
    assert!(encoded.get("NodeResources").is_none());
    assert_same_wire(&original, &encoded);
}

#[test]
fn node_read_blanks_secret_and_keeps_http_addr() {
    let node: Node = serde_json::from_value(json!({"ID":"n1","SecretID":"s3cret",
        "HTTPAddr":"127.0.0.1:4646","TLSEnabled":false,"Status":"ready",
        "SchedulingEligibility":"eligible","Attributes":{"nomad.version":"1.7.0",
        "unique.network.ip-address":"127.0.0.1"}}))
    .expect("decodes");
    assert!(node.ready_for_scheduling());
    let encoded = serde_json::to_value(node.sanitized()).expect("encodes");
    assert_eq!(encoded["SecretID"], "");
    assert_eq!(encoded["HTTPAddr"], "127.0.0.1:4646");
    assert_eq!(encoded["TLSEnabled"], false);
    let stub = node.stub_with(true, false);
    assert_eq!(stub.version, "1.7.0");
    assert_eq!(stub.address, "127.0.0.1");
    // `os=true` lists the one attribute Nomad's stub carries, empty when unknown.
    assert_eq!(
        serde_json::to_value(&stub.attributes).expect("encodes"),
        json!({"os.name": ""})
    );
}

#[test]
fn alloc_resource_usage_example_round_trips_exactly() {
    let usage = json!({"MemoryStats":{"RSS":6774784,"Cache":0,"Swap":0,"MappedFile":0,"Usage":7954432,
      "MaxUsage":9420800,"KernelUsage":0,"KernelMaxUsage":0,"Measured":["RSS","Usage","Max Usage"]},
      "CpuStats":{"SystemMode":1.2,"UserMode":3.4,"TotalTicks":12.5,"ThrottledPeriods":0,
      "ThrottledTime":0,"Percent":0.41,"Measured":["System Mode","User Mode","Percent"]},
      "DeviceStats":null});
    let original = json!({"ResourceUsage":usage.clone(),
     "Tasks":{"t":{"ResourceUsage":usage,"Timestamp":1700000000000000000i64,"Pids":null}},
     "Timestamp":1700000000000000000i64});
    let (decoded, encoded): (AllocResourceUsage, _) = round_trip(&original);
    assert_eq!(
        decoded.tasks["t"].resource_usage.memory_stats.rss,
        6_774_784
    );
    assert_eq!(original, encoded);
}

#[test]
fn alloc_file_info_example_round_trips_and_omits_empty_content_type() {
    let original = json!({"Name":"t.stdout.0","IsDir":false,"Size":123,"FileMode":"-rw-r--r--",
        "ModTime":"2026-11-21T07:00:00.5Z","ContentType":"text/plain; charset=utf-8"});
    let (info, encoded): (AllocFileInfo, _) = round_trip(&original);
    assert_eq!(info.size, 123);
    assert_eq!(original, encoded);
    let directory = AllocFileInfo {
        name: "alloc".into(),
        is_dir: true,
        ..AllocFileInfo::default()
    };
    let encoded = serde_json::to_value(directory).expect("encodes");
    assert!(encoded.get("ContentType").is_none());
    assert_eq!(go_file_mode_string(0o644, false, false), "-rw-r--r--");
    assert_eq!(go_file_mode_string(0o755, true, false), "drwxr-xr-x");
}

#[test]
fn stream_frames_match_the_reference_and_heartbeat_is_empty_object() {
    let data_frame = json!({"Offset":65536,"Data":"aGVsbG8K","File":"alloc/logs/t.stdout.0"});
    let (frame, encoded): (StreamFrame, _) = round_trip(&data_frame);
    assert_eq!(frame.data.0, b"hello\n");
    assert_eq!(data_frame, encoded);
    let deleted = json!({"File":"alloc/logs/t.stdout.0","FileEvent":"file deleted","Offset":65536});
    let (frame, encoded): (StreamFrame, _) = round_trip(&deleted);
    assert_eq!(frame.file_event, FILE_EVENT_DELETED);
    assert_eq!(deleted, encoded);
    assert_eq!(
        serde_json::to_string(&StreamFrame::heartbeat()).expect("encodes"),
        "{}"
    );
    let (frame, _): (StreamFrame, _) = round_trip(&json!({}));
    assert!(frame.is_heartbeat());
}
