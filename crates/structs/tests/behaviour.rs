//! Behaviour of the model beyond shapes: lenient decoding, canonicalization defaults per job type,
//! client status derivation, display messages, the bounded event list, and time formatting.

#![allow(clippy::expect_used, clippy::unwrap_used)] // a failed expectation is a failed test

use std::collections::BTreeMap;

use drover_structs::canonicalize::{default_migrate_strategy, default_update_strategy};
use drover_structs::lenient::from_value_ignoring_key_case;
use drover_structs::*;
use serde_json::json;

// ---- lenient decoding ----------------------------------------------------------------------

#[test]
fn null_is_accepted_for_every_kind_of_field() {
    let body = json!({"Job":{"ID":"x","Name":null,"Priority":null,"Datacenters":null,"Meta":null,
        "Periodic":null,"Update":null,"Payload":null,"Stop":null,"SubmitTime":null,
        "TaskGroups":[{"Name":"g","Networks":null,"RestartPolicy":null,"Tasks":[{"Name":"t",
            "Driver":"raw_exec","Config":null,"Env":null,"Resources":null,"KillTimeout":null,
            "Lifecycle":null,"Templates":null,"Artifacts":null,"LogConfig":null}]}]},
        "EnforceIndex":null,"Submission":null});
    let request: JobRegisterRequest = serde_json::from_value(body).expect("nulls accepted");
    let job = request.job.expect("job");
    assert_eq!(job.name, "");
    assert_eq!(job.priority, 0);
    assert!(job.datacenters.is_empty());
    let task = &job.task_groups[0].tasks[0];
    assert!(task.config.is_empty());
    assert!(task.resources.is_none());
    assert_eq!(task.kill_timeout, DurationNs::ZERO);
}

#[test]
fn python_style_optional_nulls_decode() {
    let signal: AllocSignalRequest =
        serde_json::from_value(json!({"Signal":"SIGHUP","Task":null})).expect("decodes");
    assert_eq!(signal.signal, "SIGHUP");
    assert_eq!(signal.task, "");
    let dispatch: JobDispatchRequest = serde_json::from_value(json!({"Meta":null,
        "Payload":null,"idempotency_token":null,"IdPrefixTemplate":null}))
    .expect("decodes");
    assert!(dispatch.meta.is_empty());
    assert!(dispatch.payload.0.is_empty());
}

#[test]
fn unknown_keys_are_ignored_and_absent_body_fields_default() {
    let restart: AllocRestartRequest =
        serde_json::from_value(json!({"Frobnicate":true,"TaskName":"t"})).expect("decodes");
    assert_eq!(restart.task_name, "t");
    assert!(!restart.all_tasks);
    let empty: AllocRestartRequest = serde_json::from_value(json!({})).expect("decodes");
    assert_eq!(empty, AllocRestartRequest::default());
}

#[test]
fn absent_count_is_one_but_explicit_zero_is_kept() {
    let absent: TaskGroup = serde_json::from_value(json!({"Name":"g"})).expect("decodes");
    assert_eq!(absent.count, 1);
    let zero: TaskGroup = serde_json::from_value(json!({"Name":"g","Count":0})).expect("decodes");
    assert_eq!(zero.count, 0);
}

/// Regression: the Nomad CLI sends `null` for every default, and `"Count": null` decoded as 0.
#[test]
fn a_null_field_of_a_request_body_reads_as_an_absent_one() {
    let group: TaskGroup = from_value_ignoring_key_case(json!({"Name":"g","Count":null,
        "RestartPolicy":{"Attempts":null,"Delay":null,"Mode":null,"Interval":null},
        "Update":{"MaxParallel":null}}))
    .expect("decodes");
    assert_eq!(group.count, 1);
    let restart = group.restart_policy.expect("restart");
    assert_eq!(restart.attempts, RESTART_ATTEMPTS_UNSET);
    assert_eq!(restart.delay, DurationNs::from_secs(15));
    assert_eq!(restart.mode, "fail");
    assert_eq!(group.update.expect("update").max_parallel, 1);
    let periodic: PeriodicConfig =
        from_value_ignoring_key_case(json!({"Spec":"x","Enabled":null})).expect("decodes");
    assert!(periodic.enabled);
    // Explicit zeros stay zeros; a null inside a map is the map's business.
    let zero: TaskGroup =
        from_value_ignoring_key_case(json!({"Name":"g","Count":0})).expect("decodes");
    assert_eq!(zero.count, 0);
    let task: Task =
        from_value_ignoring_key_case(json!({"Name":"t","Meta":{"a":"1"},"Config":{"x":null}}))
            .expect("decodes");
    assert_eq!(task.config.get("x"), Some(&serde_json::Value::Null));
}

#[test]
fn periodic_enabled_defaults_to_true_when_absent() {
    let periodic: PeriodicConfig =
        serde_json::from_value(json!({"Spec":"*/5 * * * *"})).expect("decodes");
    assert!(periodic.enabled);
    let disabled: PeriodicConfig =
        serde_json::from_value(json!({"Spec":"x","Enabled":false})).expect("decodes");
    assert!(!disabled.enabled);
}

#[test]
fn keys_match_case_insensitively_when_asked_but_driver_config_keys_are_untouched() {
    let body = json!({"job":{"id":"web","TYPE":"service","taskgroups":[{"name":"g","count":2,
        "tasks":[{"name":"t","driver":"raw_exec","killtimeout":"10s",
            "config":{"Command":"/bin/true","args":[]},
            "resources":{"cpu":250,"memorymb":64}}]}]}});
    let request: JobRegisterRequest = from_value_ignoring_key_case(body).expect("decodes");
    let job = request.job.expect("job");
    assert_eq!(job.id, "web");
    assert_eq!(job.r#type, JOB_TYPE_SERVICE);
    let group = &job.task_groups[0];
    assert_eq!(group.count, 2);
    let task = &group.tasks[0];
    assert_eq!(task.kill_timeout, DurationNs::from_secs(10));
    let resources = task.resources.as_ref().expect("resources");
    assert_eq!((resources.cpu, resources.memory_mb), (250, 64));
    assert!(
        task.config.contains_key("Command"),
        "config keys keep their case"
    );
    assert!(!task.config.contains_key("command"));
}

#[test]
fn exact_key_wins_over_case_folded_duplicate() {
    let request: AllocSignalRequest =
        from_value_ignoring_key_case(json!({"signal":"SIGTERM","Signal":"SIGHUP"}))
            .expect("decodes");
    assert_eq!(request.signal, "SIGHUP");
    let request: AllocSignalRequest =
        from_value_ignoring_key_case(json!({"Signal":"SIGHUP","signal":"SIGTERM"}))
            .expect("decodes");
    assert_eq!(request.signal, "SIGHUP");
}

#[test]
fn strict_decoding_does_not_fold_case() {
    let request: AllocSignalRequest =
        serde_json::from_value(json!({"signal":"SIGTERM"})).expect("decodes");
    assert_eq!(request.signal, "");
}

#[test]
fn payload_is_base64_and_empty_payload_is_null() {
    let dispatch: JobDispatchRequest =
        serde_json::from_value(json!({"Payload":"aGVsbG8K"})).expect("decodes");
    assert_eq!(dispatch.payload.0, b"hello\n");
    let encoded = serde_json::to_value(&dispatch).expect("encodes");
    assert_eq!(encoded["Payload"], "aGVsbG8K");
    let empty = serde_json::to_value(JobDispatchRequest::default()).expect("encodes");
    assert!(empty["Payload"].is_null());
    assert!(serde_json::from_value::<JobDispatchRequest>(json!({"Payload":"%%%"})).is_err());
}

// ---- canonicalize ---------------------------------------------------------------------------

fn minimal_job(job_type: &str) -> Job {
    serde_json::from_value(json!({"ID":"example","Type":job_type,
        "TaskGroups":[{"Name":"g","Tasks":[{"Name":"t","Driver":"raw_exec"}]}]}))
    .expect("decodes")
}

#[test]
fn canonicalize_fills_job_group_and_task_defaults() {
    let mut job: Job = serde_json::from_value(json!({"ID":"example","TaskGroups":[{"Name":"g",
            "Tasks":[{"Name":"t","Driver":"raw_exec"}]}]}))
    .expect("decodes");
    job.canonicalize();
    assert_eq!(job.name, "example");
    assert_eq!(job.namespace, "default");
    assert_eq!(job.region, "global");
    assert_eq!(job.r#type, "service");
    assert_eq!(job.priority, 50);
    assert_eq!(job.node_pool, "default");
    let group = &job.task_groups[0];
    assert_eq!(group.count, 1);
    assert_eq!(
        group.ephemeral_disk.as_ref().map(|disk| disk.size_mb),
        Some(300)
    );
    let task = &group.tasks[0];
    let resources = task.resources.as_ref().expect("resources");
    assert_eq!((resources.cpu, resources.memory_mb), (100, 300));
    assert_eq!(task.kill_timeout, DurationNs::from_secs(5));
    let log_config = task.log_config.as_ref().expect("log config");
    assert_eq!(
        (log_config.max_files, log_config.max_file_size_mb),
        (10, 10)
    );
    assert_eq!(
        task.restart_policy, group.restart_policy,
        "task inherits the group policy"
    );
}

#[test]
fn canonicalize_names_services_as_nomad_does() {
    let mut job: Job = serde_json::from_value(json!({"ID":"web","Name":"site","TaskGroups":[{
            "Name":"g","Services":[{},{"Name":"${BASE}-x"}],
            "Tasks":[{"Name":"t","Driver":"raw_exec",
                "Services":[{},{"Name":"${JOB}-${TASKGROUP}-${TASK}-y"},{"Name":"${NOMAD_TASK_NAME}"}]}]}]}))
    .expect("decodes");
    job.canonicalize();
    let group_names: Vec<&str> = job.task_groups[0]
        .services
        .iter()
        .map(|service| service.name.as_str())
        .collect();
    assert_eq!(group_names, ["site-g", "site-g-group-x"]);
    let task_names: Vec<&str> = job.task_groups[0].tasks[0]
        .services
        .iter()
        .map(|service| service.name.as_str())
        .collect();
    assert_eq!(
        task_names,
        ["site-g-t", "site-g-t-y", "${NOMAD_TASK_NAME}"],
        "the client interpolates the rest"
    );
}

#[test]
fn canonicalize_gives_service_groups_nomads_update_and_migrate_strategies() {
    let mut service = minimal_job("service");
    service.canonicalize();
    let job_update = service.update.clone().expect("job update");
    assert_eq!(
        (job_update.stagger, job_update.max_parallel),
        (DurationNs::from_secs(30), 1)
    );
    assert_eq!(
        job_update.health_check, "",
        "the job keeps only stagger and parallelism"
    );
    let group = &service.task_groups[0];
    assert_eq!(group.update, Some(default_update_strategy()));
    assert_eq!(group.migrate, Some(default_migrate_strategy()));
    for job_type in ["batch", "system", "sysbatch"] {
        let mut job = minimal_job(job_type);
        job.canonicalize();
        assert_eq!(job.update, None, "{job_type}");
        assert_eq!(job.task_groups[0].update, None, "{job_type}");
        assert_eq!(job.task_groups[0].migrate, None, "{job_type}");
    }
    let mut partial: Job = serde_json::from_value(json!({"ID":"x","TaskGroups":[{"Name":"g",
        "Migrate":{"MaxParallel":3},"Tasks":[{"Name":"t","Driver":"raw_exec"}]}]}))
    .expect("decodes");
    partial.canonicalize();
    let migrate = partial.task_groups[0].migrate.clone().expect("migrate");
    assert_eq!(migrate.max_parallel, 3);
    assert_eq!(migrate.health_check, "checks");
}

#[test]
fn legacy_alloc_resources_are_the_tasks_and_shared_resources_summed_as_nomad_does() {
    let mut alloc = Allocation {
        task_resources: [("a", 100, 300, 0), ("b", 250, 128, 512)]
            .into_iter()
            .map(|(name, cpu, memory_mb, memory_max_mb)| {
                (
                    name.to_string(),
                    Resources {
                        cpu,
                        memory_mb,
                        memory_max_mb,
                        ..Resources::default()
                    },
                )
            })
            .collect(),
        shared_resources: Some(Resources {
            disk_mb: 300,
            ..Resources::default()
        }),
        ..Allocation::default()
    };
    alloc.fill_legacy_total_resources();
    let total = alloc.resources.expect("resources");
    assert_eq!(
        (
            total.cpu,
            total.memory_mb,
            total.memory_max_mb,
            total.disk_mb
        ),
        (350, 428, 812, 300)
    );
}

#[test]
fn canonicalize_restart_policy_per_job_type() {
    for (job_type, attempts, interval) in [
        (JOB_TYPE_SERVICE, 2, DurationNs::from_mins(30)),
        (JOB_TYPE_SYSTEM, 2, DurationNs::from_mins(30)),
        (JOB_TYPE_BATCH, 3, DurationNs::from_hours(24)),
        (JOB_TYPE_SYSBATCH, 3, DurationNs::from_hours(24)),
    ] {
        let mut job = minimal_job(job_type);
        job.canonicalize();
        let policy = job.task_groups[0]
            .restart_policy
            .clone()
            .expect("restart policy");
        assert_eq!(policy.attempts, attempts, "{job_type}");
        assert_eq!(policy.interval, interval, "{job_type}");
        assert_eq!(policy.delay, DurationNs::from_secs(15), "{job_type}");
        assert_eq!(policy.mode, "fail", "{job_type}");
    }
}

#[test]
fn canonicalize_reschedule_policy_per_job_type() {
    let mut service = minimal_job(JOB_TYPE_SERVICE);
    service.canonicalize();
    let policy = service.task_groups[0]
        .reschedule_policy
        .clone()
        .expect("service policy");
    assert!(policy.unlimited);
    assert_eq!(policy.delay, DurationNs::from_secs(30));
    assert_eq!(policy.delay_function, "exponential");
    assert_eq!(policy.max_delay, DurationNs::from_hours(1));

    let mut batch = minimal_job(JOB_TYPE_BATCH);
    batch.canonicalize();
    let policy = batch.task_groups[0]
        .reschedule_policy
        .clone()
        .expect("batch policy");
    assert!(!policy.unlimited);
    assert_eq!(policy.attempts, 1);
    assert_eq!(policy.interval, DurationNs::from_hours(24));
    assert_eq!(policy.delay, DurationNs::from_secs(5));
    assert_eq!(policy.delay_function, "constant");

    for job_type in [JOB_TYPE_SYSTEM, JOB_TYPE_SYSBATCH] {
        let mut job = minimal_job(job_type);
        job.canonicalize();
        assert!(job.task_groups[0].reschedule_policy.is_none(), "{job_type}");
    }
}

#[test]
fn canonicalize_keeps_what_the_user_gave() {
    let mut job: Job = serde_json::from_value(json!({"ID":"x","Name":"named","Type":"batch",
        "Priority":70,"Datacenters":["dc1"],"TaskGroups":[{"Name":"g","Count":0,
        "RestartPolicy":{"Attempts":0,"Delay":0,"Mode":"delay","Interval":60000000000i64},
        "Tasks":[{"Name":"t","Resources":{"CPU":500,"MemoryMB":64},"KillTimeout":1000000000,
            "Lifecycle":{"Hook":"","Sidecar":false}}]}]}))
    .expect("decodes");
    job.canonicalize();
    assert_eq!(job.name, "named");
    assert_eq!(job.priority, 70);
    assert_eq!(job.datacenters, ["dc1"]);
    let group = &job.task_groups[0];
    assert_eq!(group.count, 0);
    let policy = group.restart_policy.as_ref().expect("policy");
    assert_eq!(
        (
            policy.attempts,
            policy.delay,
            policy.mode.as_str(),
            policy.interval
        ),
        (0, DurationNs::ZERO, "delay", DurationNs::from_mins(1))
    );
    let task = &group.tasks[0];
    let resources = task.resources.as_ref().expect("resources");
    assert_eq!((resources.cpu, resources.memory_mb), (500, 64));
    assert_eq!(task.kill_timeout, DurationNs::from_secs(1));
    assert!(
        task.lifecycle.is_none(),
        "an empty lifecycle block is dropped"
    );
}

#[test]
fn canonicalize_is_idempotent() {
    let mut once = minimal_job(JOB_TYPE_SERVICE);
    once.canonicalize();
    let mut twice = once.clone();
    twice.canonicalize();
    assert_eq!(once, twice);
}

// ---- client status ------------------------------------------------------------------------

fn task_state(state: &str, failed: bool) -> TaskState {
    TaskState {
        state: state.to_string(),
        failed,
        ..TaskState::default()
    }
}

fn states(list: &[(&str, TaskState)]) -> BTreeMap<String, TaskState> {
    list.iter()
        .map(|(name, state)| (name.to_string(), state.clone()))
        .collect()
}

#[test]
fn client_status_is_derived_in_nomads_order() {
    let failed = task_state(TASK_STATE_DEAD, true);
    let running = task_state(TASK_STATE_RUNNING, false);
    let pending = task_state(TASK_STATE_PENDING, false);
    let complete = task_state(TASK_STATE_DEAD, false);

    let all = states(&[
        ("a", failed.clone()),
        ("b", running.clone()),
        ("c", pending.clone()),
    ]);
    assert_eq!(derive_client_status(&all), ("failed", "Failed tasks"));
    let running_and_pending = states(&[("b", running.clone()), ("c", pending.clone())]);
    assert_eq!(
        derive_client_status(&running_and_pending),
        ("running", "Tasks are running")
    );
    let pending_and_done = states(&[("c", pending), ("d", complete.clone())]);
    assert_eq!(
        derive_client_status(&pending_and_done),
        ("pending", "No tasks have started")
    );
    let done = states(&[("d", complete.clone()), ("e", complete)]);
    assert_eq!(
        derive_client_status(&done),
        ("complete", "All tasks have completed")
    );
    assert_eq!(derive_client_status(&BTreeMap::new()), ("", ""));
}

#[test]
fn new_task_state_is_pending() {
    assert_eq!(TaskState::default().state, TASK_STATE_PENDING);
    let decoded: TaskState = serde_json::from_value(json!({})).expect("decodes");
    assert_eq!(decoded.state, TASK_STATE_PENDING);
}

// ---- task events --------------------------------------------------------------------------

fn display(event: TaskEvent) -> String {
    let mut event = event;
    event.populate_display_message();
    event.display_message
}

#[test]
fn display_messages_follow_nomads_rules() {
    let at = 1_700_000_000_000_000_000;
    assert_eq!(
        display(TaskEvent::new(TASK_RECEIVED, at)),
        "Task received by client"
    );
    assert_eq!(
        display(TaskEvent::new(TASK_STARTED, at)),
        "Task started by client"
    );
    assert_eq!(
        display(
            TaskEvent::new(TASK_TERMINATED, at)
                .with_exit_code(0)
                .with_signal(0)
        ),
        "Exit Code: 0"
    );
    assert_eq!(
        display(
            TaskEvent::new(TASK_TERMINATED, at)
                .with_exit_code(137)
                .with_signal(9)
                .with_exit_message("OOM \"killed\"")
        ),
        "Exit Code: 137, Signal: 9, Exit Message: \"OOM \\\"killed\\\"\""
    );
    let restarting =
        TaskEvent::new(TASK_RESTARTING, at).with_restart_delay(DurationNs::from_secs(15));
    assert_eq!(
        display(
            restarting
                .clone()
                .with_restart_reason(RESTART_REASON_WITHIN_POLICY)
        ),
        "Task restarting in 15s"
    );
    assert_eq!(
        display(restarting.with_restart_reason("Restart unnecessary")),
        "Restart unnecessary - Task restarting in 15s"
    );
    assert_eq!(
        display(TaskEvent::new(TASK_NOT_RESTARTING, at)),
        "Task exceeded restart policy"
    );
    assert_eq!(
        display(TaskEvent::new(TASK_NOT_RESTARTING, at).with_restart_reason(
            "Exceeded allowed attempts 2 in interval 30m0s and mode is \"fail\""
        )),
        "Exceeded allowed attempts 2 in interval 30m0s and mode is \"fail\""
    );
    assert_eq!(
        display(
            TaskEvent::new(TASK_KILLING, at)
                .with_kill_timeout(DurationNs::from_secs(5), DurationNs::from_secs(30))
        ),
        "Sent interrupt. Waiting 5s before force killing"
    );
    assert_eq!(
        display(TaskEvent::new(TASK_KILLING, at).with_kill_reason("alloc stopped")),
        "alloc stopped"
    );
    assert_eq!(
        display(TaskEvent::new(TASK_KILLED, at)),
        "Task successfully killed"
    );
    assert_eq!(
        display(TaskEvent::new(TASK_SIBLING_FAILED, at).with_failed_sibling("web")),
        "Task's sibling \"web\" failed"
    );
    assert_eq!(
        display(TaskEvent::new(TASK_DRIVER_FAILURE, at).with_driver_error("no such file")),
        "no such file"
    );
    assert_eq!(
        display(TaskEvent::new(TASK_SETUP, at).with_message(TASK_BUILDING_TASK_DIR)),
        "Building Task Directory"
    );
    assert_eq!(
        display(TaskEvent::new(TASK_SIGNALING, at).with_task_signal("SIGHUP")),
        "Task being sent signal SIGHUP"
    );
    assert_eq!(
        display(TaskEvent::new(TASK_HOOK_MESSAGE, at).with_message("fetched")),
        "fetched"
    );
    // An explicit display message is left alone.
    assert_eq!(
        display(TaskEvent::new(TASK_STARTED, at).with_display_message("custom")),
        "custom"
    );
}

#[test]
fn builders_fill_flat_fields_and_details_alike() {
    let event = TaskEvent::new(TASK_TERMINATED, 5)
        .with_exit_code(3)
        .with_signal(15)
        .with_oom_killed(true)
        .with_fails_task();
    assert_eq!(
        (event.exit_code, event.signal, event.fails_task),
        (3, 15, true)
    );
    assert_eq!(event.details["exit_code"], "3");
    assert_eq!(event.details["signal"], "15");
    assert_eq!(event.details["oom_killed"], "true");
    assert_eq!(event.details["fails_task"], "true");
    let restarting =
        TaskEvent::new(TASK_RESTARTING, 5).with_restart_delay(DurationNs::from_secs(15));
    assert_eq!(restarting.start_delay, 15_000_000_000);
    assert_eq!(restarting.details["start_delay"], "15000000000");
    let killing = TaskEvent::new(TASK_KILLING, 5)
        .with_kill_timeout(DurationNs::from_mins(10), DurationNs::from_secs(30));
    assert_eq!(
        killing.kill_timeout,
        DurationNs::from_secs(30),
        "capped by the client maximum"
    );
    assert_eq!(killing.details["kill_timeout"], "30s");
}

#[test]
fn task_state_keeps_the_last_ten_events_and_failure_is_sticky() {
    let mut state = TaskState::default();
    for time in 0..15 {
        let event = TaskEvent::new(TASK_DRIVER_MESSAGE, time);
        let event = if time == 3 {
            event.with_fails_task()
        } else {
            event
        };
        state.push_event(event);
    }
    assert_eq!(state.events.len(), MAX_TASK_EVENTS);
    let times: Vec<i64> = state.events.iter().map(|event| event.time).collect();
    assert_eq!(
        times,
        (5..15).collect::<Vec<i64>>(),
        "oldest first, oldest dropped"
    );
    assert!(state.failed, "failure stays after its event is dropped");
}

#[test]
fn every_event_type_string_is_nomads() {
    assert_eq!(ALL_TASK_EVENT_TYPES.len(), 31);
    assert!(ALL_TASK_EVENT_TYPES.contains(&"Restart Signaled"));
    assert!(ALL_TASK_EVENT_TYPES.contains(&"Failed Artifact Download"));
    assert!(ALL_TASK_EVENT_TYPES.contains(&"Waiting for shutdown delay"));
}

// ---- allocations --------------------------------------------------------------------------

#[test]
fn allocation_stub_respects_task_states_and_resources_flags() {
    let mut allocation = Allocation {
        id: "8e3a".into(),
        name: "example.g[3]".into(),
        job: Some(std::sync::Arc::new(Job {
            r#type: "batch".into(),
            version: 4,
            ..Job::default()
        })),
        allocated_resources: Some(AllocatedResources::default()),
        ..Allocation::default()
    };
    allocation
        .task_states
        .insert("t".into(), TaskState::default());
    assert_eq!(allocation.index(), Some(3));
    let stub = allocation.stub();
    assert_eq!((stub.job_type.as_str(), stub.job_version), ("batch", 4));
    assert!(stub.task_states.is_some());
    assert!(stub.allocated_resources.is_none());
    let bare = serde_json::to_value(allocation.stub_with(false, true)).expect("encodes");
    assert!(bare["TaskStates"].is_null());
    assert!(bare["AllocatedResources"].is_object());
}

#[test]
fn allocation_terminal_status() {
    let mut allocation = Allocation {
        desired_status: ALLOC_DESIRED_STATUS_RUN.into(),
        client_status: ALLOC_CLIENT_STATUS_RUNNING.into(),
        ..Allocation::default()
    };
    assert!(!allocation.terminal_status());
    allocation.client_status = "complete".into();
    assert!(allocation.terminal_status());
    allocation.client_status = ALLOC_CLIENT_STATUS_RUNNING.into();
    allocation.desired_status = ALLOC_DESIRED_STATUS_STOP.into();
    assert!(allocation.terminal_status());
}

// ---- time ---------------------------------------------------------------------------------

#[test]
fn zero_timestamp_is_gos_zero_time_both_ways() {
    assert_eq!(Timestamp::ZERO.to_rfc3339_nanos(), "0001-01-01T00:00:00Z");
    assert_eq!(Timestamp::default(), Timestamp::ZERO);
    assert_eq!(
        Timestamp::parse_rfc3339("0001-01-01T00:00:00Z"),
        Ok(Timestamp::ZERO)
    );
    let decoded: Timestamp = serde_json::from_value(json!(null)).expect("decodes");
    assert!(decoded.is_zero());
    assert_eq!(
        serde_json::to_value(Timestamp::ZERO).expect("encodes"),
        "0001-01-01T00:00:00Z"
    );
}

#[test]
fn timestamps_format_like_rfc3339_nano() {
    let cases = [
        (1_700_000_000_000_000_000, "2023-11-14T22:13:20Z"),
        (1_700_000_000_200_000_000, "2023-11-14T22:13:20.2Z"),
        (1_700_000_000_000_000_001, "2023-11-14T22:13:20.000000001Z"),
        (1_709_208_000_123_456_789, "2024-02-29T12:00:00.123456789Z"),
        (951_868_800_000_000_000, "2000-03-01T00:00:00Z"),
        (0, "1970-01-01T00:00:00Z"),
        (-1, "1969-12-31T23:59:59.999999999Z"),
        (-2_208_988_800_000_000_000, "1900-01-01T00:00:00Z"),
    ];
    for (unix_nanos, text) in cases {
        let timestamp = Timestamp::from_unix_nanos(unix_nanos);
        assert_eq!(timestamp.to_rfc3339_nanos(), text);
        assert_eq!(Timestamp::parse_rfc3339(text), Ok(timestamp), "{text}");
    }
}

#[test]
fn timestamps_parse_offsets_and_round_trip_over_a_range() {
    assert_eq!(
        Timestamp::parse_rfc3339("2023-11-15T00:13:20.5+02:00"),
        Ok(Timestamp::from_unix_nanos(1_700_000_000_500_000_000))
    );
    for text in [
        "2023-13-01T00:00:00Z",
        "2023-02-29T00:00:00Z",
        "2023-01-01 00:00",
        "garbage!",
        "2023-01-01T00:00:00.Z",
        "2023-01-01T00:00:00+0200",
    ] {
        assert!(Timestamp::parse_rfc3339(text).is_err(), "{text}");
    }
    // Every ~3.7 days across two centuries, with a changing fraction.
    let mut unix_nanos: i64 = -2_000_000_000_000_000_000;
    while unix_nanos < 4_000_000_000_000_000_000 {
        let timestamp = Timestamp::from_unix_nanos(unix_nanos);
        let text = timestamp.to_rfc3339_nanos();
        assert_eq!(Timestamp::parse_rfc3339(&text), Ok(timestamp), "{text}");
        unix_nanos += 321_987_654_321_017;
    }
}

#[test]
fn durations_print_like_go() {
    let cases = [
        (0, "0s"),
        (1, "1ns"),
        (1_500, "1.5µs"),
        (500_000, "500µs"),
        (999_999, "999.999µs"),
        (500_000_000, "500ms"),
        (1_500_000_000, "1.5s"),
        (15_000_000_000, "15s"),
        (90_000_000_000, "1m30s"),
        (1_800_000_000_000, "30m0s"),
        (3_600_000_000_000, "1h0m0s"),
        (259_380_500_000_000, "72h3m0.5s"),
        (-2_000_000_000, "-2s"),
    ];
    for (nanos, text) in cases {
        assert_eq!(DurationNs(nanos).to_string(), text);
    }
}

#[test]
fn durations_parse_go_syntax() {
    let cases = [
        ("0", 0),
        ("5s", 5_000_000_000),
        ("5m", 300_000_000_000),
        ("1h30m", 5_400_000_000_000),
        ("1.5h", 5_400_000_000_000),
        ("1.h", 3_600_000_000_000),
        (".5s", 500_000_000),
        ("250ms", 250_000_000),
        ("10us", 10_000),
        ("10µs", 10_000),
        ("-2s", -2_000_000_000),
        ("72h3m0.5s", 259_380_500_000_000),
        ("2000ms", 2_000_000_000),
    ];
    for (text, nanos) in cases {
        assert_eq!(DurationNs::parse_go(text), Ok(DurationNs(nanos)), "{text}");
    }
    for text in ["", "5", "s", "5x", ".h", "-", "99999999999h"] {
        assert!(DurationNs::parse_go(text).is_err(), "{text}");
    }
    let decoded: DurationNs = serde_json::from_value(json!("10s")).expect("decodes");
    assert_eq!(decoded, DurationNs::from_secs(10));
    assert_eq!(
        serde_json::to_value(decoded).expect("encodes"),
        10_000_000_000i64
    );
}

// ---- identifiers --------------------------------------------------------------------------

#[test]
fn alloc_ids_must_be_uuids() {
    let id = AllocId::parse("8e3a1f0c-0b1d-4c1e-9f0a-1b2c3d4e5f60").expect("valid");
    assert_eq!(id.short(), "8e3a1f0c");
    for bad in [
        "",
        "../etc",
        "8e3a1f0c-0b1d-4c1e-9f0a-1b2c3d4e5f6",
        "8e3a1f0c/0b1d-4c1e-9f0a-1b2c3d4e5f60",
        "8e3a1f0c-0b1d-4c1e-9f0a-1b2c3d4e5f6g",
    ] {
        assert!(AllocId::parse(bad).is_err(), "{bad}");
    }
    assert!(serde_json::from_value::<AllocId>(json!("../../x")).is_err());
}

#[test]
fn task_names_are_single_safe_path_components() {
    for good in ["web", "redis cache", "init-1.2"] {
        assert_eq!(TaskName::parse(good).expect("valid").as_str(), good);
    }
    for bad in ["", ".", "..", "a/b", "a\\b", "nul\0byte", "line\nbreak"] {
        assert!(TaskName::parse(bad).is_err(), "{bad:?}");
    }
    assert!(TaskName::parse(&"x".repeat(MAX_TASK_NAME_BYTES + 1)).is_err());
}

// ---- helpers for the scheduler and server --------------------------------------------------

#[test]
fn allocated_resources_follow_the_canonical_group() {
    let mut job: Job = serde_json::from_value(json!({"ID":"web","TaskGroups":[{"Name":"g",
        "EphemeralDisk":{"SizeMB":500},"Tasks":[
            {"Name":"init","Lifecycle":{"Hook":"prestart"},"Resources":{"CPU":50,"MemoryMB":32}},
            {"Name":"main","Resources":{"CPU":200,"MemoryMB":128,"MemoryMaxMB":256}}]}]}))
    .expect("decodes");
    job.canonicalize();
    let allocated = AllocatedResources::for_task_group(&job.task_groups[0]);
    assert_eq!(allocated.total_cpu_shares(), 250);
    assert_eq!(allocated.total_memory_mb(), 160);
    assert_eq!(allocated.tasks["main"].memory.memory_max_mb, 256);
    assert_eq!(allocated.shared.disk_mb, 500);
    assert!(allocated.task_lifecycles["main"].is_none());
    assert_eq!(
        allocated.task_lifecycles["init"]
            .as_ref()
            .map(|lifecycle| lifecycle.hook.as_str()),
        Some("prestart")
    );
    assert_eq!(alloc_name("web", "g", 2), "web.g[2]");
}

#[test]
fn job_summary_starts_at_zero_per_group_and_counts_by_client_status() {
    let job = minimal_job(JOB_TYPE_BATCH);
    let mut summary = JobSummary::new_for_job(&job);
    assert_eq!(summary.summary.keys().collect::<Vec<_>>(), ["g"]);
    assert!(summary.children.is_none());
    let group = summary.summary.get_mut("g").expect("group");
    *group.counter_for_client_status("pending").expect("known") += 1;
    *group.counter_for_client_status("running").expect("known") += 2;
    assert!(group.counter_for_client_status("bogus").is_none());
    assert_eq!((group.starting, group.running), (1, 2));
}

#[test]
fn job_status_follows_nomads_rules() {
    let batch = minimal_job(JOB_TYPE_BATCH);
    let none = JobStatusInputs::default();
    assert_eq!(derive_job_status(&batch, none), "pending");
    let live_eval = JobStatusInputs {
        any_eval: true,
        any_non_terminal_eval: true,
        ..none
    };
    assert_eq!(derive_job_status(&batch, live_eval), "pending");
    let live_alloc = JobStatusInputs {
        any_alloc: true,
        any_non_terminal_alloc: true,
        ..live_eval
    };
    assert_eq!(derive_job_status(&batch, live_alloc), "running");
    let finished = JobStatusInputs {
        any_alloc: true,
        any_eval: true,
        ..none
    };
    assert_eq!(derive_job_status(&batch, finished), "dead");

    let mut system = minimal_job(JOB_TYPE_SYSTEM);
    assert_eq!(derive_job_status(&system, none), "running");
    system.stop = true;
    assert_eq!(derive_job_status(&system, live_alloc), "dead");
}

#[test]
fn exceeded_attempts_reason_is_worded_like_nomad() {
    let reason = restart_reason_exceeded_attempts(2, DurationNs::from_mins(30), "fail");
    assert_eq!(
        reason,
        "Exceeded allowed attempts 2 in interval 30m0s and mode is \"fail\""
    );
    let event = TaskEvent::new(TASK_NOT_RESTARTING, 1)
        .with_restart_reason(&reason)
        .with_fails_task();
    assert_eq!(display(event), reason);
}

#[test]
fn partial_restart_block_is_completed_like_nomads_merge() {
    let mut job: Job = serde_json::from_value(json!({"ID":"x","Type":"batch","TaskGroups":[{
        "Name":"g","RestartPolicy":{"Attempts":5},
        "Tasks":[{"Name":"a"},{"Name":"b","RestartPolicy":{"Mode":"delay"}}]}]}))
    .expect("decodes");
    job.canonicalize();
    let group = &job.task_groups[0];
    let group_policy = group.restart_policy.as_ref().expect("group policy");
    assert_eq!(group_policy.attempts, 5);
    assert_eq!(
        group_policy.interval,
        DurationNs::from_hours(24),
        "batch interval"
    );
    assert_eq!(group_policy.delay, DurationNs::from_secs(15));
    assert_eq!(group_policy.mode, RESTART_POLICY_MODE_FAIL);
    assert_eq!(group.tasks[0].restart_policy.as_ref(), Some(group_policy));
    let task_policy = group.tasks[1].restart_policy.as_ref().expect("task policy");
    assert_eq!(task_policy.mode, RESTART_POLICY_MODE_DELAY);
    assert_eq!(
        task_policy.attempts, 5,
        "unset attempts come from the group"
    );
    assert_eq!(task_policy.interval, DurationNs::from_hours(24));
}

#[test]
fn partial_update_block_gets_max_parallel_one_but_explicit_zero_stays() {
    let mut job: Job = serde_json::from_value(json!({"ID":"x","Update":{"Canary":1},
        "TaskGroups":[{"Name":"g","Tasks":[{"Name":"t"}]},
                      {"Name":"h","Update":{"MaxParallel":0},"Tasks":[{"Name":"t"}]}]}))
    .expect("decodes");
    job.canonicalize();
    let inherited = job.task_groups[0]
        .update
        .as_ref()
        .expect("inherited from the job");
    assert_eq!((inherited.max_parallel, inherited.canary), (1, 1));
    assert_eq!(inherited.min_healthy_time, DurationNs::from_secs(10));
    assert_eq!(inherited.healthy_deadline, DurationNs::from_mins(5));
    let own = job.task_groups[1].update.as_ref().expect("own");
    assert_eq!(own.max_parallel, 0);
}

#[test]
fn malformed_times_and_durations_are_errors_not_panics() {
    let samples = [
        "1.2.3s",
        "..s",
        "1..s",
        "5m5",
        "µs",
        "1µ",
        "-",
        "+",
        "9223372036854775807ns",
        "9223372036854775808ns",
        "2023-01-01T00:00:00.1234567890Z",
        "2023-01-01T00:00:00é",
        "2023-01-01T00:00:00+é:00",
        "2023-01-01T24:00:00Z",
        "0000-00-00T00:00:00Z",
        "é",
        "2023-01-01T00:00:00+01:0é",
        "",
    ];
    for sample in samples {
        let _ = DurationNs::parse_go(sample);
        let _ = Timestamp::parse_rfc3339(sample);
    }
    assert!(DurationNs::parse_go("1.2.3s").is_err());
    assert_eq!(
        DurationNs::parse_go("9223372036854775807ns"),
        Ok(DurationNs(i64::MAX))
    );
    assert!(DurationNs::parse_go("9223372036854775808ns").is_err());
    assert!(Timestamp::parse_rfc3339("2023-01-01T00:00:00.1234567890Z").is_err());
    assert!(Timestamp::parse_rfc3339("2023-01-01T24:00:00Z").is_err());
}

/// Regression: the 1.1 CLI's `node status <id>` dereferences the legacy `Resources` and
/// `Reserved` of a node and panicked on their absence.
#[test]
fn the_api_view_of_a_node_has_the_legacy_resources_and_reserved() {
    let node: Node = serde_json::from_value(json!({"ID":"n","SecretID":"s",
        "NodeResources":{"Cpu":{"CpuShares":4000},"Memory":{"MemoryMB":8192},
            "Disk":{"DiskMB":1000}},
        "ReservedResources":{"Cpu":{"CpuShares":100},"Memory":{"MemoryMB":256},
            "Disk":{"DiskMB":10}}}))
    .expect("decodes");
    let shown = serde_json::to_value(node.sanitized()).expect("encodes");
    assert_eq!(shown["SecretID"], "");
    assert_eq!(
        (
            &shown["Resources"]["CPU"],
            &shown["Resources"]["MemoryMB"],
            &shown["Resources"]["DiskMB"]
        ),
        (&json!(4000), &json!(8192), &json!(1000))
    );
    assert_eq!(
        (
            &shown["Reserved"]["CPU"],
            &shown["Reserved"]["MemoryMB"],
            &shown["Reserved"]["DiskMB"]
        ),
        (&json!(100), &json!(256), &json!(10))
    );
    let stored = serde_json::to_value(&node).expect("encodes");
    assert_eq!(
        stored["Resources"],
        serde_json::Value::Null,
        "derived, never stored"
    );
}

#[test]
fn a_spread_without_a_weight_gets_fifty_as_the_api_gives_it() {
    let absent: drover_structs::Spread =
        serde_json::from_value(serde_json::json!({"Attribute": "${node.datacenter}"})).unwrap();
    assert_eq!(absent.weight, 50);
    let explicit: drover_structs::Spread =
        serde_json::from_value(serde_json::json!({"Attribute": "x", "Weight": 0})).unwrap();
    assert_eq!(
        explicit.weight, 0,
        "an explicit weight is kept for validation to judge"
    );
}

// ---- client reports ------------------------------------------------------------------------

#[test]
fn a_client_report_sets_only_deployment_health_and_timestamp_when_they_are_news() {
    let health = |healthy: Option<bool>, canary: bool, at: i64| AllocDeploymentStatus {
        healthy,
        timestamp: Timestamp::from_unix_nanos(at),
        canary,
        modify_index: 0,
    };
    let report = |status: Option<AllocDeploymentStatus>| Allocation {
        client_status: "running".into(),
        deployment_status: status,
        ..Allocation::default()
    };
    // First health: taken whole, at the write's index.
    let mut stored = Allocation::default();
    stored.merge_client_update(report(Some(health(Some(true), false, 5))), 10);
    assert_eq!(
        stored.deployment_status,
        Some(AllocDeploymentStatus {
            modify_index: 10,
            ..health(Some(true), false, 5)
        })
    );

    // The server's canary flag stays; the same health again changes nothing.
    let mut stored = Allocation {
        deployment_status: Some(health(None, true, 0)),
        ..Allocation::default()
    };
    stored.merge_client_update(report(Some(health(Some(false), false, 7))), 11);
    assert_eq!(
        stored.deployment_status,
        Some(AllocDeploymentStatus {
            modify_index: 11,
            ..health(Some(false), true, 7)
        })
    );
    stored.merge_client_update(report(Some(health(Some(false), false, 9))), 12);
    assert_eq!(stored.deployment_status.as_ref().unwrap().modify_index, 11);
    // No health in the report, or no status at all: kept.
    stored.merge_client_update(report(Some(health(None, false, 0))), 13);
    stored.merge_client_update(report(None), 14);
    assert_eq!(
        stored.deployment_status,
        Some(AllocDeploymentStatus {
            modify_index: 11,
            ..health(Some(false), true, 7)
        })
    );
    assert_eq!(stored.client_status, "running");
}
