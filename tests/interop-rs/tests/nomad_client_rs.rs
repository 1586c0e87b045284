//! The unchanged third-party Rust client `nomad-client-rs` against a real drover agent: each
//! test starts `drover agent -dev` ($DROVER_BIN) and drives it only through the client's typed
//! API, checking the values that come back (what a Nomad user's program would rely on).

mod support;

use std::collections::HashMap;

use nomad_client_rs::ClientError;
use nomad_client_rs::NomadClient;
use nomad_client_rs::acl::{
    AclPolicy, AclTokenType, CreateAclTokenRequest, ExchangeOneTimeTokenRequest,
    ListAclTokensOptions,
};
use nomad_client_rs::allocation::{Allocation, ReadAllocationOptions};
use nomad_client_rs::deployment::ListDeploymentsOptions;
use nomad_client_rs::event::{EventTopic, SubscribeToEventsOptions};
use nomad_client_rs::job::{
    CreateJobRequest, DispatchJobRequest, Job, ListJobAllocationsOptions, ListJobsOptions,
    ParseJobRequest, ReadJobOptions, ReadJobSubmissionOptions, StopJobOptions, Submission,
};
use nomad_client_rs::namespace::{CreateNamespaceRequest, ListNamespacesOptions};
use nomad_client_rs::node::{
    ListNodeAllocationsOptions, ListNodesOptions, ReadNodeMetadataOptions,
    UpdateNodeMetadataRequest,
};
use nomad_client_rs::service::{ListServicesOptions, ReadServiceOptions};
use nomad_client_rs::variable::{
    CreateVariableRequest, DeleteVariableOptions, ListVariablesOptions, ReadVariableOptions,
};
use support::{Agent, wait_for};

const WEB: &str = r#"
job "rsweb" {
  datacenters = ["dc1"]
  group "g" {
    network {
      port "http" {}
    }
    service {
      name     = "rsweb"
      port     = "http"
      provider = "nomad"
      tags     = ["interop"]
    }
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "echo hello from ${NOMAD_JOB_NAME} on ${NOMAD_PORT_http}; exec sleep 300"]
      }
      resources {
        cpu    = 20
        memory = 32
      }
    }
  }
}
"#;

fn rejected<T: std::fmt::Debug>(result: Result<T, ClientError>) -> (u16, String) {
    match result {
        Err(ClientError::NomadRejected { status, message }) => (status, message),
        other => panic!("expected Nomad to reject the call, got {other:?}"),
    }
}

async fn parse(client: &NomadClient, hcl: &str) -> Job {
    client
        .parse_job(&ParseJobRequest {
            job_hcl: Some(hcl.to_owned()),
            canonicalize: Some(true),
            ..ParseJobRequest::default()
        })
        .await
        .expect("the jobspec parses")
}

/// The job's allocations once `count` of them run.
async fn running_allocations(client: &NomadClient, job: &str, count: usize) -> Vec<Allocation> {
    wait_for(&format!("{count} running allocations of {job}"), || async {
        let allocations = client
            .list_job_allocations(job, &ListJobAllocationsOptions::default())
            .await
            .ok()?;
        let running: Vec<Allocation> = allocations
            .into_iter()
            .filter(|allocation| allocation.client_status.as_deref() == Some("running"))
            .collect();
        (running.len() == count).then_some(running)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_round_trips_and_its_allocation_files_nodes_services_and_events_answer() {
    let agent = Agent::start("");
    let client = agent.client(None);
    assert_eq!(
        client.read_leader().await.unwrap(),
        agent.address.trim_start_matches("http://")
    );

    // Parse, then register the typed job with its source, as `nomad job run` does.
    let job = parse(&client, WEB).await;
    assert_eq!(job.id.as_deref(), Some("rsweb"));
    assert_eq!(job.r#type.as_deref(), Some("service"));
    let groups = job.task_groups.clone().unwrap();
    assert_eq!(groups[0].count, Some(1));
    let submission = Submission {
        source: Some(WEB.to_owned()),
        format: Some("hcl2".to_owned()),
        variable_flags: Some(HashMap::from([(
            "motd".to_owned(),
            "two\nlines".to_owned(),
        )])),
        ..Submission::default()
    };
    let created = client
        .create_job(&CreateJobRequest {
            job: Some(job.clone()),
            submission: Some(submission),
            ..CreateJobRequest::default()
        })
        .await
        .unwrap();
    assert!(!created.eval_id.clone().unwrap().is_empty());
    assert_eq!(created.warnings.as_deref(), Some(""));

    // The job reads back as it was sent, with what the server set.
    let read = client
        .read_job("rsweb", &ReadJobOptions::default())
        .await
        .unwrap();
    assert_eq!(read.version, Some(0));
    assert_eq!(read.job_modify_index, created.job_modify_index);
    let read_groups = read.task_groups.unwrap();
    assert_eq!(read_groups[0].name.as_deref(), Some("g"));
    let task = &read_groups[0].tasks.as_ref().unwrap()[0];
    assert_eq!(task.driver.as_deref(), Some("raw_exec"));
    assert_eq!(task.config.as_ref().unwrap()["command"], "/bin/sh");
    let listed = client.list_jobs(&ListJobsOptions::default()).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].id.as_deref(), Some("rsweb"));

    // The submission comes back, its flag unescaped; without a version it is Nomad's 400.
    let stored = client
        .read_job_submission(
            "rsweb",
            &ReadJobSubmissionOptions {
                version: Some(0),
                ..ReadJobSubmissionOptions::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(stored.source.as_deref(), Some(WEB));
    assert_eq!(stored.format.as_deref(), Some("hcl2"));
    assert_eq!(stored.job_id.as_deref(), Some("rsweb"));
    assert_eq!(stored.version, Some(0));
    assert_eq!(stored.job_modify_index, created.job_modify_index);
    assert_eq!(stored.variable_flags.unwrap()["motd"], "two\nlines");
    assert_eq!(
        rejected(
            client
                .read_job_submission("rsweb", &ReadJobSubmissionOptions::default())
                .await
        ),
        (
            400,
            "Unable to parse job submission version parameter".to_owned()
        )
    );

    // The allocation runs; its files and logs are there.
    let allocations = running_allocations(&client, "rsweb", 1).await;
    let id = allocations[0].id.clone().unwrap();
    let allocation = client
        .read_allocation(&id, &ReadAllocationOptions::default())
        .await
        .unwrap();
    assert_eq!(allocation.job_id.as_deref(), Some("rsweb"));
    assert_eq!(allocation.task_group.as_deref(), Some("g"));
    assert_eq!(
        allocation.task_states.as_ref().unwrap()["t"]
            .state
            .as_deref(),
        Some("running")
    );
    let port = allocation
        .allocated_resources
        .as_ref()
        .and_then(|resources| resources.shared.as_ref())
        .and_then(|shared| shared.networks.as_ref())
        .and_then(|networks| networks[0].dynamic_ports.as_ref())
        .map(|ports| (ports[0].label.clone(), ports[0].value))
        .unwrap();
    assert_eq!(port.0.as_deref(), Some("http"));
    let port = port.1.unwrap();
    let root: Vec<String> = client
        .list_allocation_files(&id, "/")
        .await
        .unwrap()
        .into_iter()
        .filter_map(|file| file.name)
        .collect();
    assert!(
        root.contains(&"alloc".to_owned()) && root.contains(&"t".to_owned()),
        "{root:?}"
    );
    let stdout = wait_for("the task's output", || async {
        let text = client
            .read_allocation_file(&id, "alloc/logs/t.stdout.0")
            .await
            .ok()?;
        (!text.is_empty()).then_some(text)
    })
    .await;
    assert_eq!(stdout, format!("hello from rsweb on {port}\n"));
    let logs = client
        .read_allocation_file_metadata(&id, "alloc/logs")
        .await
        .unwrap();
    assert_eq!(logs.is_dir, Some(true));
    assert_eq!(logs.name.as_deref(), Some("logs"));
    assert_eq!(
        rejected(
            client
                .read_allocation_file(&id, "alloc/logs/nothing-here")
                .await
        )
        .0,
        404
    );

    // The node that runs it.
    let nodes = client
        .list_nodes(&ListNodesOptions::default())
        .await
        .unwrap();
    assert_eq!(nodes.len(), 1);
    assert_eq!(nodes[0].id, allocation.node_id);
    assert_eq!(nodes[0].status.as_deref(), Some("ready"));
    let node = client
        .read_node(nodes[0].id.as_deref().unwrap())
        .await
        .unwrap();
    assert_eq!(node.attributes.unwrap()["driver.raw_exec"], "1");
    let node_allocations = client
        .list_node_allocations(
            nodes[0].id.as_deref().unwrap(),
            &ListNodeAllocationsOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(node_allocations[0].id.as_deref(), Some(id.as_str()));

    // Its service, registered with the allocation's port.
    let registrations = wait_for("the service registration", || async {
        let registrations = client
            .read_service("rsweb", &ReadServiceOptions::default())
            .await
            .ok()?;
        (!registrations.is_empty()).then_some(registrations)
    })
    .await;
    assert_eq!(registrations[0].port, Some(port));
    assert_eq!(registrations[0].alloc_id.as_deref(), Some(id.as_str()));
    assert_eq!(registrations[0].tags, Some(vec!["interop".to_owned()]));
    let services = client
        .list_services(&ListServicesOptions::default())
        .await
        .unwrap();
    assert_eq!(services[0].namespace.as_deref(), Some("default"));
    assert_eq!(
        services[0].services[0].service_name.as_deref(),
        Some("rsweb")
    );

    // Stopping the job is a Job event on the stream.
    let mut options = SubscribeToEventsOptions::default();
    options.add_topic(EventTopic::Job);
    let (stream, mut events) = client.subscribe_to_events(&options);
    let stopped = client
        .stop_job("rsweb", &StopJobOptions::default())
        .await
        .unwrap();
    let event = tokio::time::timeout(support::LIMIT, async {
        loop {
            let event = events.recv().await.expect("the stream stays open");
            let stopped_job = event
                .payload
                .as_ref()
                .and_then(|payload| payload.job.as_ref())
                .is_some_and(|job| job.stop == Some(true));
            if event.key == "rsweb" && stopped_job {
                return event;
            }
        }
    })
    .await
    .expect("the job's deregistration event");
    assert_eq!(event.topic, Some(EventTopic::Job));
    assert_eq!(event.namespace, "default");
    assert!(event.index >= stopped.job_modify_index.unwrap());
    drop(events);
    stream.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn variables_namespaces_deployments_and_dispatch_answer_as_nomad() {
    let agent = Agent::start("");
    let client = agent.client(None);

    // Variables.
    let items = HashMap::from([("user".to_owned(), "admin".to_owned())]);
    let created = client
        .create_variable(
            "app/config",
            &CreateVariableRequest {
                namespace: "default".to_owned(),
                path: "app/config".to_owned(),
                items: items.clone(),
            },
        )
        .await
        .unwrap();
    assert_eq!(created.path.as_deref(), Some("app/config"));
    let read = client
        .read_variable("app/config", &ReadVariableOptions::default())
        .await
        .unwrap();
    assert_eq!(read.items, Some(items));
    assert_eq!(read.modify_index, created.modify_index);
    let listed = client
        .list_variables(&ListVariablesOptions {
            prefix: Some("app".to_owned()),
            ..ListVariablesOptions::default()
        })
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].items, None, "a listing carries no items");
    client
        .delete_variable("app/config", &DeleteVariableOptions::default())
        .await
        .unwrap();
    assert_eq!(
        rejected(
            client
                .read_variable("app/config", &ReadVariableOptions::default())
                .await
        ),
        (404, "variable not found".to_owned())
    );

    // Namespaces.
    client
        .create_namespace(&CreateNamespaceRequest {
            name: "team".to_owned(),
            description: Some("the team's".to_owned()),
            ..CreateNamespaceRequest::default()
        })
        .await
        .unwrap();
    let namespaces: Vec<String> = client
        .list_namespaces(&ListNamespacesOptions::default())
        .await
        .unwrap()
        .into_iter()
        .filter_map(|namespace| namespace.name)
        .collect();
    assert_eq!(namespaces, vec!["default".to_owned(), "team".to_owned()]);
    let team = client.read_namespace("team").await.unwrap();
    assert_eq!(team.description.as_deref(), Some("the team's"));
    client.delete_namespace("team").await.unwrap();
    assert_eq!(rejected(client.read_namespace("team").await).0, 404);

    // A service job with an update block rolls out through a deployment.
    let job = parse(
        &client,
        &WEB.replace(
            "group \"g\" {",
            "update {\n  min_healthy_time = \"1s\"\n  healthy_deadline = \"30s\"\n}\ngroup \"g\" {",
        ),
    )
    .await;
    client
        .create_job(&CreateJobRequest {
            job: Some(job),
            ..CreateJobRequest::default()
        })
        .await
        .unwrap();
    let deployment = wait_for("a successful deployment", || async {
        let deployments = client
            .list_deployments(&ListDeploymentsOptions::default())
            .await
            .ok()?;
        deployments
            .into_iter()
            .find(|deployment| deployment.status.as_deref() == Some("successful"))
    })
    .await;
    assert_eq!(deployment.job_id.as_deref(), Some("rsweb"));
    assert_eq!(deployment.job_version, Some(0));
    let state = &deployment.task_groups.as_ref().unwrap()["g"];
    assert_eq!(state.desired_total, Some(1));
    assert_eq!(state.healthy_allocs, Some(1));
    let id = deployment.id.clone().unwrap();
    assert_eq!(
        client.read_deployment(&id).await.unwrap().id,
        Some(id.clone())
    );
    let allocations = client.list_deployment_allocations(&id).await.unwrap();
    assert_eq!(allocations.len(), 1);
    assert_eq!(
        allocations[0]
            .deployment_status
            .as_ref()
            .and_then(|status| status.healthy),
        Some(true)
    );

    // A parameterized job is dispatched with its meta; the child sees it.
    let template = parse(
        &client,
        r#"
job "rsparam" {
  datacenters = ["dc1"]
  type = "batch"
  parameterized {
    payload       = "optional"
    meta_required = ["who"]
  }
  group "g" {
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "echo hello $NOMAD_META_who"]
      }
    }
  }
}
"#,
    )
    .await;
    client
        .create_job(&CreateJobRequest {
            job: Some(template),
            ..CreateJobRequest::default()
        })
        .await
        .unwrap();
    let missing = client
        .dispatch_job("rsparam", &DispatchJobRequest::default())
        .await;
    assert_eq!(rejected(missing).0, 400);
    let dispatched = client
        .dispatch_job(
            "rsparam",
            &DispatchJobRequest {
                job_id: Some("rsparam".to_owned()),
                meta: Some(HashMap::from([("who".to_owned(), "interop".to_owned())])),
                payload: None,
            },
        )
        .await
        .unwrap();
    let child = dispatched.dispatched_job_id.unwrap();
    assert!(child.starts_with("rsparam/dispatch-"), "{child}");
    let output = wait_for("the dispatched child's output", || async {
        let allocations = client
            .list_job_allocations(&child, &ListJobAllocationsOptions::default())
            .await
            .ok()?;
        let allocation = allocations
            .into_iter()
            .find(|allocation| allocation.client_status.as_deref() == Some("complete"))?;
        client
            .read_allocation_file(allocation.id.as_deref()?, "alloc/logs/t.stdout.0")
            .await
            .ok()
    })
    .await;
    assert_eq!(output, "hello interop\n");
    let child_job = client
        .read_job(&child, &ReadJobOptions::default())
        .await
        .unwrap();
    assert_eq!(child_job.parent_id.as_deref(), Some("rsparam"));
    assert_eq!(child_job.dispatched, Some(true));
    assert_eq!(child_job.meta.unwrap()["who"], "interop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_acls_one_time_tokens_exchange_once_for_their_token() {
    let agent = Agent::start("acl {\n  enabled = true\n}\n");
    let (status, body) = support::request(&agent.address, "POST", "/v1/acl/bootstrap", "");
    assert_eq!(status, 200, "{body}");
    let bootstrap: serde_json::Value = serde_json::from_str(&body).unwrap();
    let management = bootstrap["SecretID"].as_str().unwrap().to_owned();

    let anonymous = agent.client(None);
    assert_eq!(
        rejected(anonymous.list_jobs(&ListJobsOptions::default()).await),
        (403, "Permission denied".to_owned())
    );
    let admin = agent.client(Some(&management));
    let own = admin.read_own_acl_token().await.unwrap();
    assert_eq!(own.accessor_id.as_deref(), bootstrap["AccessorID"].as_str());
    assert_eq!(own.name.as_deref(), Some("Bootstrap Token"));

    admin
        .write_acl_policy(
            "readonly",
            &AclPolicy {
                name: Some("readonly".to_owned()),
                rules: Some("namespace \"default\" { policy = \"read\" }".to_owned()),
                ..AclPolicy::default()
            },
        )
        .await
        .unwrap();
    let reader = admin
        .create_acl_token(&CreateAclTokenRequest {
            name: Some("reader".to_owned()),
            r#type: AclTokenType::Client,
            policies: vec!["readonly".to_owned()],
            ..CreateAclTokenRequest::default()
        })
        .await
        .unwrap();
    let tokens = admin
        .list_acl_tokens(&ListAclTokensOptions::default())
        .await
        .unwrap();
    assert_eq!(tokens.len(), 2);

    // The reader asks for a one-time token for itself; anyone may exchange it, once.
    let reader_client = agent.client(reader.secret_id.as_deref());
    let created = reader_client.create_one_time_token().await.unwrap();
    let one_time = created.one_time_token.unwrap();
    assert_eq!(one_time.accessor_id, reader.accessor_id);
    assert_eq!(one_time.create_index, created.index);
    assert!(one_time.expires_at.unwrap().starts_with("20"));
    let secret = one_time.one_time_secret_id.unwrap();
    let exchanged = anonymous
        .exchange_one_time_token(&ExchangeOneTimeTokenRequest {
            one_time_secret_id: secret.clone(),
        })
        .await
        .unwrap();
    let token = exchanged.token.unwrap();
    assert_eq!(token.accessor_id, reader.accessor_id);
    assert_eq!(token.secret_id, reader.secret_id);
    assert_eq!(token.policies, Some(vec!["readonly".to_owned()]));
    assert!(exchanged.index.unwrap() > created.index.unwrap());
    assert_eq!(
        rejected(
            anonymous
                .exchange_one_time_token(&ExchangeOneTimeTokenRequest {
                    one_time_secret_id: secret,
                })
                .await
        ),
        (403, "Permission denied".to_owned())
    );
    // Without a token of its own, nobody gets one.
    assert_eq!(
        rejected(anonymous.create_one_time_token().await),
        (403, "Permission denied".to_owned())
    );
    // Node metadata takes node read (and write to apply): management has it, the reader not.
    assert!(
        admin
            .read_node_metadata(&ReadNodeMetadataOptions::default())
            .await
            .unwrap()
            .meta
            .is_some()
    );
    assert_eq!(
        rejected(
            reader_client
                .read_node_metadata(&ReadNodeMetadataOptions::default())
                .await
        ),
        (403, "Permission denied".to_owned())
    );
    // The exchanged token works: it reads jobs and cannot write a policy.
    let exchanged_client = agent.client(token.secret_id.as_deref());
    assert!(
        exchanged_client
            .list_jobs(&ListJobsOptions::default())
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        rejected(exchanged_client.delete_acl_policy("readonly").await).0,
        403
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_metadata_applied_through_the_client_is_what_the_node_registers() {
    let agent = Agent::start("client {\n  meta {\n    tier = \"web\"\n  }\n}\n");
    let client = agent.client(None);
    let node_id = client
        .list_nodes(&ListNodesOptions::default())
        .await
        .unwrap()[0]
        .id
        .clone()
        .unwrap();
    let before = client
        .read_node_metadata(&ReadNodeMetadataOptions::default())
        .await
        .unwrap();
    assert_eq!(before.r#static.unwrap()["tier"], Some("web".to_owned()));
    assert!(before.dynamic.unwrap().is_empty());

    let applied = client
        .update_node_metadata(&UpdateNodeMetadataRequest {
            node_id: Some(node_id.clone()),
            meta: HashMap::from([
                ("rack".to_owned(), Some("r1".to_owned())),
                ("tier".to_owned(), None),
            ]),
        })
        .await
        .unwrap();
    assert_eq!(
        applied.meta.unwrap(),
        HashMap::from([("rack".to_owned(), Some("r1".to_owned()))])
    );
    assert_eq!(
        applied.dynamic.unwrap(),
        HashMap::from([
            ("rack".to_owned(), Some("r1".to_owned())),
            ("tier".to_owned(), None)
        ])
    );
    let read = client
        .read_node_metadata(&ReadNodeMetadataOptions {
            node_id: Some(node_id.clone()),
        })
        .await
        .unwrap();
    assert_eq!(
        read.meta.unwrap(),
        HashMap::from([("rack".to_owned(), Some("r1".to_owned()))])
    );
    // The servers see it on the node.
    wait_for("the node's new meta", || async {
        let node = client.read_node(&node_id).await.ok()?;
        (node.meta? == HashMap::from([("rack".to_owned(), "r1".to_owned())])).then_some(())
    })
    .await;
    let (status, message) = rejected(
        client
            .update_node_metadata(&UpdateNodeMetadataRequest {
                node_id: None,
                meta: HashMap::from([("not valid".to_owned(), Some("x".to_owned()))]),
            })
            .await,
    );
    assert_eq!(status, 400);
    assert_eq!(
        message,
        "\"not valid\" is invalid; metadata keys must be valid dotted hcl identifiers"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inside_a_task_the_client_finds_the_task_api_on_its_own() {
    let agent = Agent::start("");
    let client = agent.client(None);
    client
        .create_variable(
            "nomad/jobs/rstask",
            &CreateVariableRequest {
                namespace: "default".to_owned(),
                path: "nomad/jobs/rstask".to_owned(),
                items: HashMap::from([("greeting".to_owned(), "hello".to_owned())]),
            },
        )
        .await
        .unwrap();
    // Registered as JSON: the client's typed `Task` has no `Identity`, which the task needs
    // for its token.
    let program = env!("CARGO_BIN_EXE_in_task");
    let job = serde_json::json!({"Job": {
        "ID": "rstask", "Name": "rstask", "Type": "batch", "Datacenters": ["dc1"],
        "TaskGroups": [{
            "Name": "g", "Count": 1,
            "Tasks": [{
                "Name": "t", "Driver": "raw_exec",
                "Config": {"command": program},
                "Identity": {"Env": true},
                "Resources": {"CPU": 50, "MemoryMB": 64}
            }]
        }]
    }});
    let (status, body) = support::request(&agent.address, "PUT", "/v1/jobs", &job.to_string());
    assert_eq!(status, 200, "{body}");
    let report = wait_for("the in-task program's report", || async {
        let allocations = client
            .list_job_allocations("rstask", &ListJobAllocationsOptions::default())
            .await
            .ok()?;
        let allocation = allocations
            .into_iter()
            .find(|allocation| allocation.client_status.as_deref() == Some("complete"))?;
        let text = client
            .read_allocation_file(allocation.id.as_deref()?, "alloc/logs/t.stdout.0")
            .await
            .ok()?;
        serde_json::from_str::<serde_json::Value>(text.trim()).ok()
    })
    .await;
    assert_eq!(report["uses_task_api"], true, "{report}");
    assert_eq!(
        report["own_variable"]["ok"]["greeting"], "hello",
        "{report}"
    );
    // A workload identity reads only its own job's variables; with ACLs off the rest of the
    // API answers it as it answers anyone.
    assert_eq!(report["other_variable"]["status"], 403, "{report}");
    assert_eq!(
        report["other_variable"]["message"], "Permission denied",
        "{report}"
    );
    assert_eq!(report["list_jobs"]["ok"], 1, "{report}");
    assert_eq!(report["read_own_job"]["ok"], "rstask", "{report}");
}
