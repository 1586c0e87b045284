//! The service catalog table end to end: indexes set by the store, reads by name, job, alloc
//! and namespace, removal with the allocation, node, job or garbage collection that takes
//! them away, blocking queries, `Service` events and reload from disk.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use drover_state::{EventFilter, EventType, StateError, StateStore, Table, Topic};
use drover_structs::{Allocation, Node, ServiceRegistration};

mod fixtures;
use fixtures::{NOW, job};

fn alloc(id: &str, job_id: &str, node_id: &str) -> Allocation {
    Allocation {
        id: id.to_owned(),
        namespace: "default".to_owned(),
        job_id: job_id.to_owned(),
        node_id: node_id.to_owned(),
        eval_id: "e1".to_owned(),
        task_group: "g".to_owned(),
        name: format!("{job_id}.g[0]"),
        desired_status: "run".to_owned(),
        ..Allocation::default()
    }
}

fn node(id: &str) -> Node {
    Node {
        id: id.to_owned(),
        name: format!("node-{id}"),
        datacenter: "dc1".to_owned(),
        status: "ready".to_owned(),
        ..Node::default()
    }
}

fn service(
    id: &str,
    name: &str,
    alloc_id: &str,
    job_id: &str,
    node_id: &str,
) -> ServiceRegistration {
    ServiceRegistration {
        id: id.to_owned(),
        service_name: name.to_owned(),
        namespace: "default".to_owned(),
        node_id: node_id.to_owned(),
        datacenter: "dc1".to_owned(),
        job_id: job_id.to_owned(),
        alloc_id: alloc_id.to_owned(),
        tags: vec!["http".to_owned()],
        address: "127.0.0.1".to_owned(),
        port: 8080,
        ..ServiceRegistration::default()
    }
}

fn client_status(id: &str, status: &str) -> Allocation {
    Allocation {
        id: id.to_owned(),
        client_status: status.to_owned(),
        ..Allocation::default()
    }
}

fn ids(services: &[std::sync::Arc<ServiceRegistration>]) -> Vec<&str> {
    services.iter().map(|service| service.id.as_str()).collect()
}

/// A store with job `web` (allocs a1 on n1, a2 on n2) and job `api` (alloc b1 on n1), each
/// allocation with one registration.
async fn populated() -> StateStore {
    let store = StateStore::in_memory().await.unwrap();
    store.upsert_job(job("web", 2), NOW).await.unwrap();
    store.upsert_job(job("api", 2), NOW).await.unwrap();
    store.upsert_node(node("n1"), NOW).await.unwrap();
    store.upsert_node(node("n2"), NOW).await.unwrap();
    store
        .upsert_allocs(
            vec![
                alloc("a1", "web", "n1"),
                alloc("a2", "web", "n2"),
                alloc("b1", "api", "n1"),
            ],
            NOW,
        )
        .await
        .unwrap();
    store
        .upsert_service_registrations(vec![
            service("s-a1", "web-frontend", "a1", "web", "n1"),
            service("s-a2", "web-frontend", "a2", "web", "n2"),
            service("s-b1", "api", "b1", "api", "n1"),
        ])
        .await
        .unwrap();
    store
}

#[tokio::test]
async fn registrations_get_the_store_index_and_keep_their_create_index_on_replace() {
    let store = populated().await;
    let first = store.service_registration("default", "s-a1").unwrap();
    assert_eq!(first.create_index, first.modify_index);
    assert_eq!(
        store.indexes().table(Table::ServiceRegistrations),
        first.modify_index
    );
    // The three were one write.
    let b1 = store.service_registration("default", "s-b1").unwrap();
    assert_eq!(b1.create_index, first.create_index);

    // The same registration again (tags in another order) writes nothing.
    let mut same = service("s-a1", "web-frontend", "a1", "web", "n1");
    same.tags = vec!["http".to_owned()];
    let before = store.latest_index();
    assert_eq!(
        store
            .upsert_service_registrations(vec![same])
            .await
            .unwrap(),
        before
    );
    assert_eq!(store.latest_index(), before);

    let mut moved = service("s-a1", "web-frontend", "a1", "web", "n1");
    moved.port = 9090;
    let index = store
        .upsert_service_registrations(vec![moved])
        .await
        .unwrap();
    assert!(index > before);
    let replaced = store.service_registration("default", "s-a1").unwrap();
    assert_eq!(
        (replaced.create_index, replaced.modify_index, replaced.port),
        (first.create_index, index, 9090)
    );
}

#[tokio::test]
async fn registrations_are_read_by_name_job_alloc_and_namespace() {
    let store = populated().await;
    let mut other = service("s-x", "web-frontend", "a1", "web", "n1");
    other.namespace = "prod".to_owned();
    store
        .upsert_service_registrations(vec![other])
        .await
        .unwrap();

    assert_eq!(
        ids(&store.service_registrations_by_name("default", "web-frontend")),
        ["s-a1", "s-a2"]
    );
    assert_eq!(
        ids(&store.service_registrations_by_name("prod", "web-frontend")),
        ["s-x"]
    );
    assert!(
        store
            .service_registrations_by_name("default", "web")
            .is_empty()
    );
    assert_eq!(
        ids(&store.service_registrations_by_job("default", "web")),
        ["s-a1", "s-a2"]
    );
    assert_eq!(
        ids(&store.service_registrations_by_alloc("a1")),
        ["s-a1", "s-x"]
    );
    assert_eq!(
        ids(&store.service_registrations(Some("default"))),
        ["s-a1", "s-a2", "s-b1"]
    );
    assert_eq!(store.service_registrations(None).len(), 4);
}

#[tokio::test]
async fn an_invalid_registration_is_refused_naming_the_field() {
    let store = StateStore::in_memory().await.unwrap();
    let mut nameless = service("s", "", "a1", "web", "n1");
    let error = store
        .upsert_service_registrations(vec![nameless.clone()])
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            StateError::Invalid {
                field: "ServiceRegistration.ServiceName",
                ..
            }
        ),
        "{error}"
    );
    nameless.service_name = "x".to_owned();
    nameless.id.clear();
    let error = store
        .upsert_service_registrations(vec![nameless])
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("ServiceRegistration.ID"),
        "{error}"
    );
}

#[tokio::test]
async fn delete_by_id_and_by_namespace_and_id() {
    let store = populated().await;
    let error = store
        .delete_service_registration("default", "nope")
        .await
        .unwrap_err();
    assert!(matches!(error, StateError::NotFound { .. }), "{error}");
    let index = store
        .delete_service_registration("default", "s-b1")
        .await
        .unwrap();
    assert_eq!(store.indexes().table(Table::ServiceRegistrations), index);
    assert!(store.service_registration("default", "s-b1").is_none());
    assert!(store.service_registrations_by_alloc("b1").is_empty());

    // A client deregisters by ID alone; unknown IDs are skipped.
    let latest = store.latest_index();
    assert_eq!(
        store
            .delete_service_registrations_by_id(vec!["unknown".to_owned()])
            .await
            .unwrap(),
        latest
    );
    store
        .delete_service_registrations_by_id(vec!["s-a1".to_owned(), "unknown".to_owned()])
        .await
        .unwrap();
    assert_eq!(ids(&store.service_registrations(None)), ["s-a2"]);
}

#[tokio::test]
async fn a_terminal_allocation_takes_its_registrations_with_it_in_the_same_write() {
    let store = populated().await;
    // From the next write on (without an index the buffered history would come first).
    let mut events = store.subscribe_events(store.latest_index() + 1, EventFilter::default());
    // Running keeps them.
    store
        .update_allocs_from_client(vec![client_status("a1", "running")], NOW)
        .await
        .unwrap();
    assert_eq!(store.service_registrations_by_alloc("a1").len(), 1);
    events.next_batch().await.unwrap();

    let update = store
        .update_allocs_from_client(vec![client_status("a1", "complete")], NOW)
        .await
        .unwrap();
    assert!(store.service_registrations_by_alloc("a1").is_empty());
    assert_eq!(
        store.indexes().table(Table::ServiceRegistrations),
        update.index
    );
    let batch = events.next_batch().await.unwrap();
    assert_eq!(batch.index, update.index);
    let deregistration = batch
        .events
        .iter()
        .find(|event| event.topic == Topic::Service)
        .expect("a Service event in the alloc update's write");
    assert_eq!(deregistration.event_type, EventType::ServiceDeregistration);

    // Failed, from the client, too.
    store
        .update_allocs_from_client(vec![client_status("b1", "failed")], NOW)
        .await
        .unwrap();
    assert!(store.service_registrations_by_alloc("b1").is_empty());

    // Lost, marked by the server's plan.
    let mut lost = alloc("a2", "web", "n2");
    lost.desired_status = "stop".to_owned();
    lost.client_status = "lost".to_owned();
    store.upsert_allocs(vec![lost], NOW).await.unwrap();
    assert!(store.service_registrations(None).is_empty());
}

#[tokio::test]
async fn a_stopped_allocation_still_running_keeps_its_registrations() {
    let store = populated().await;
    let mut stopping = alloc("a1", "web", "n1");
    stopping.desired_status = "stop".to_owned();
    store.upsert_allocs(vec![stopping], NOW).await.unwrap();
    // The client deregisters before its shutdown delay; until then the service answers.
    assert_eq!(store.service_registrations_by_alloc("a1").len(), 1);
}

#[tokio::test]
async fn a_down_node_loses_its_registrations() {
    let store = populated().await;
    store.update_node_status("n1", "down", NOW).await.unwrap();
    assert_eq!(ids(&store.service_registrations(None)), ["s-a2"]);
}

#[tokio::test]
async fn purging_a_job_or_collecting_an_alloc_removes_their_registrations() {
    let store = populated().await;
    store.delete_job("default", "web").await.unwrap();
    assert_eq!(ids(&store.service_registrations(None)), ["s-b1"]);
    store
        .delete_evals_and_allocs(Vec::new(), vec!["b1".to_owned()])
        .await
        .unwrap();
    assert!(store.service_registrations(None).is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_blocking_query_on_the_catalog_wakes_on_a_registration() {
    let store = populated().await;
    let seen = store.indexes().table(Table::ServiceRegistrations);
    let waiter = {
        let store = store.clone();
        tokio::spawn(async move {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(300);
            store
                .wait_for_change(&[Table::ServiceRegistrations], seen, deadline)
                .await
        })
    };
    // A job write does not wake it.
    store.upsert_job(job("other", 2), NOW).await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!waiter.is_finished());
    let index = store
        .upsert_service_registrations(vec![service("s-new", "db", "a1", "web", "n1")])
        .await
        .unwrap();
    let outcome = waiter.await.unwrap();
    assert!(outcome.changed);
    assert_eq!(outcome.index, index);
}

#[tokio::test]
async fn registrations_produce_service_events() {
    let store = StateStore::in_memory().await.unwrap();
    let mut events = store.subscribe_events(0, EventFilter::default());
    let index = store
        .upsert_service_registrations(vec![service("s1", "web-frontend", "a1", "web", "n1")])
        .await
        .unwrap();
    let batch = events.next_batch().await.unwrap();
    assert_eq!(batch.index, index);
    let event = &batch.events[0];
    assert_eq!(
        (event.topic, event.event_type),
        (Topic::Service, EventType::ServiceRegistration)
    );
    assert_eq!(event.key, "s1");
    assert_eq!(event.namespace, "default");
    assert_eq!(
        event.filter_keys,
        vec!["web".to_owned(), "web-frontend".to_owned()]
    );
    let payload = event.payload.to_value();
    assert_eq!(payload["Service"]["ServiceName"], "web-frontend");
    assert_eq!(payload["Service"]["CreateIndex"], index);

    store
        .delete_service_registration("default", "s1")
        .await
        .unwrap();
    let batch = events.next_batch().await.unwrap();
    assert_eq!(batch.events[0].event_type, EventType::ServiceDeregistration);
    assert_eq!(batch.events[0].payload.to_value()["Service"]["ID"], "s1");
    let value = serde_json::to_value(&batch.events[0]).unwrap();
    assert_eq!(value["Topic"], "Service");
    assert_eq!(value["Type"], "ServiceDeregistration");
}

#[tokio::test]
async fn registrations_are_reloaded_from_the_data_dir() {
    let directory = tempfile::tempdir().unwrap();
    let (before, indexes) = {
        let store = StateStore::open(directory.path()).await.unwrap();
        store
            .upsert_service_registrations(vec![
                service("s1", "web-frontend", "a1", "web", "n1"),
                service("s2", "api", "a2", "api", "n1"),
            ])
            .await
            .unwrap();
        let before = store.service_registrations(None);
        let indexes = store.indexes();
        store.close().await;
        (before, indexes)
    };
    let store = StateStore::open(directory.path()).await.unwrap();
    assert_eq!(store.indexes(), indexes);
    assert_eq!(store.service_registrations(None), before);
    assert_eq!(
        ids(&store.service_registrations_by_name("default", "api")),
        ["s2"]
    );
    assert_eq!(ids(&store.service_registrations_by_alloc("a1")), ["s1"]);
}
