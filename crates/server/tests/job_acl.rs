//! Nomad's `JobACL` on workload identities (`ResolvePoliciesForClaims`), through the server's
//! public ACL resolution and a real state store.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use drover_server::acl::workload_acl;
use drover_server::identity::WorkloadIdentity;
use drover_server::{Clock, SystemClock};
use drover_state::StateStore;
use drover_structs::acl::{AclPolicy, JobAcl};
use drover_structs::{Allocation, Job, Task, TaskGroup};

fn alloc() -> Allocation {
    let job = Job {
        id: "web".to_owned(),
        namespace: "default".to_owned(),
        region: "global".to_owned(),
        task_groups: vec![TaskGroup {
            name: "frontend".to_owned(),
            tasks: vec![Task {
                name: "server".to_owned(),
                ..Task::default()
            }],
            ..TaskGroup::default()
        }],
        ..Job::default()
    };
    Allocation {
        id: "8a0c1c5e-0000-4000-8000-000000000001".to_owned(),
        namespace: "default".to_owned(),
        job_id: "web".to_owned(),
        task_group: "frontend".to_owned(),
        desired_status: "run".to_owned(),
        client_status: "running".to_owned(),
        job: Some(Arc::new(job)),
        ..Allocation::default()
    }
}

/// Nomad's `ResolvePoliciesForClaims`: policies bound by `JobACL` to the workload's
/// namespace, job, group or task are its; others (another job, group or task, another
/// namespace) are not; a dispatched child holds its parent's.
#[tokio::test]
async fn a_workload_holds_the_policies_attached_to_its_job_group_or_task() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateStore::open(dir.path()).await.unwrap();
    let now = SystemClock.now_unix_ns();
    let mut child = alloc();
    child.id = "8a0c1c5e-0000-4000-8000-000000000002".to_owned();
    child.job_id = "web/dispatch-1".to_owned();
    let mut child_job = (**child.job.as_ref().unwrap()).clone();
    child_job.id = "web/dispatch-1".to_owned();
    child_job.parent_id = "web".to_owned();
    child.job = Some(Arc::new(child_job));
    state
        .upsert_allocs(vec![alloc(), child.clone()], now)
        .await
        .unwrap();
    let bound = |name: &str, namespace: &str, job: &str, group: &str, task: &str| AclPolicy {
        name: name.to_owned(),
        rules: format!(
            "namespace \"default\" {{\n  variables {{\n    path \"{name}/*\" {{\n      capabilities = [\"read\"]\n    }}\n  }}\n}}\n"
        ),
        job_acl: Some(JobAcl {
            namespace: namespace.to_owned(),
            job_id: job.to_owned(),
            group: group.to_owned(),
            task: task.to_owned(),
        }),
        ..AclPolicy::default()
    };
    state
        .upsert_acl_policies(vec![
            bound("ns", "default", "", "", ""),
            bound("job", "default", "web", "", ""),
            bound("group", "default", "web", "frontend", ""),
            bound("task", "default", "web", "frontend", "server"),
            bound("othertask", "default", "web", "frontend", "sidecar"),
            bound("othergroup", "default", "web", "backend", ""),
            bound("otherjob", "default", "api", "", ""),
            bound("otherns", "prod", "", "", ""),
            AclPolicy {
                job_acl: None,
                ..bound("unbound", "", "", "", "")
            },
        ])
        .await
        .unwrap();
    let workload = |alloc_id: &str| WorkloadIdentity {
        namespace: "default".to_owned(),
        job_id: "web".to_owned(),
        alloc_id: alloc_id.to_owned(),
        group: "frontend".to_owned(),
        task: "server".to_owned(),
        key_id: String::new(),
        claims: serde_json::Value::Null,
    };
    for alloc_id in [alloc().id, child.id.clone()] {
        let acl = workload_acl(&state, &workload(&alloc_id));
        for held in ["ns", "job", "group", "task"] {
            assert!(
                acl.allow_variable_operation("default", &format!("{held}/x"), "read"),
                "{alloc_id} {held}"
            );
        }
        for other in ["othertask", "othergroup", "otherjob", "otherns", "unbound"] {
            assert!(
                !acl.allow_variable_operation("default", &format!("{other}/x"), "read"),
                "{alloc_id} {other}"
            );
        }
    }
    let gone = workload_acl(&state, &workload("8a0c1c5e-0000-4000-8000-0000000000ff"));
    assert!(!gone.allow_variable_operation("default", "ns/x", "read"));
}
