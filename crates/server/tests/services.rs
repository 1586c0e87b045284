//! The server's service catalog calls over a real (in-memory) store: validation that names the
//! field, registration against known allocations, deregistration by ID and by hand.

#![allow(clippy::expect_used, clippy::unwrap_used)] // a failed expectation is a failed test

use std::sync::Arc;

use drover_server::{Server, ServerConfig, ServerError, SystemClock};
use drover_state::StateStore;
use drover_structs::{Allocation, ServiceRegistration};

const NOW: i64 = 1_700_000_000_000_000_000;

async fn server_with_alloc() -> Server {
    let state = StateStore::in_memory().await.expect("store");
    state
        .upsert_allocs(
            vec![Allocation {
                id: "a1".to_owned(),
                namespace: "default".to_owned(),
                job_id: "web".to_owned(),
                node_id: "n1".to_owned(),
                task_group: "g".to_owned(),
                desired_status: "run".to_owned(),
                ..Allocation::default()
            }],
            NOW,
        )
        .await
        .expect("alloc stored");
    Server::start(ServerConfig::default(), state, Arc::new(SystemClock))
}

fn registration(id: &str, alloc_id: &str) -> ServiceRegistration {
    ServiceRegistration {
        id: id.to_owned(),
        service_name: "web-frontend".to_owned(),
        node_id: "n1".to_owned(),
        datacenter: "dc1".to_owned(),
        job_id: "web".to_owned(),
        alloc_id: alloc_id.to_owned(),
        address: "127.0.0.1".to_owned(),
        port: 8080,
        ..ServiceRegistration::default()
    }
}

fn bad_request(result: Result<u64, ServerError>) -> String {
    match result {
        Err(ServerError::BadRequest(message)) => message,
        other => panic!("expected a bad request, got {other:?}"),
    }
}

#[tokio::test]
async fn registrations_are_validated_field_by_field() {
    let server = server_with_alloc().await;
    let message = bad_request(
        server
            .upsert_service_registrations(vec![registration("", "a1")])
            .await,
    );
    assert!(message.contains("ID"), "{message}");

    let mut nameless = registration("s1", "a1");
    nameless.service_name.clear();
    let message = bad_request(server.upsert_service_registrations(vec![nameless]).await);
    assert!(message.contains("ServiceName"), "{message}");

    let message = bad_request(
        server
            .upsert_service_registrations(vec![registration("s1", "")])
            .await,
    );
    assert!(message.contains("AllocID"), "{message}");

    // One unknown allocation refuses the whole batch.
    let message = bad_request(
        server
            .upsert_service_registrations(vec![
                registration("s1", "a1"),
                registration("s2", "no-such-alloc"),
            ])
            .await,
    );
    assert!(
        message.contains("AllocID") && message.contains("no-such-alloc"),
        "{message}"
    );
    assert!(server.state().service_registrations(None).is_empty());

    let mut anywhere = registration("s1", "a1");
    anywhere.address = "0.0.0.0".to_owned();
    let message = bad_request(server.upsert_service_registrations(vec![anywhere]).await);
    assert!(message.contains("Address"), "{message}");
    server.shutdown().await;
}

#[tokio::test]
async fn a_client_registers_and_deregisters_by_id() {
    let server = server_with_alloc().await;
    let index = server
        .upsert_service_registrations(vec![registration("s1", "a1"), registration("s2", "a1")])
        .await
        .expect("registered");
    let stored = server
        .state()
        .service_registration("default", "s1")
        .expect("stored in the default namespace");
    assert_eq!((stored.create_index, stored.modify_index), (index, index));

    server
        .delete_service_registrations(vec!["s1".to_owned(), "gone-already".to_owned()])
        .await
        .expect("deregistered");
    let left: Vec<String> = server
        .state()
        .service_registrations(None)
        .iter()
        .map(|service| service.id.clone())
        .collect();
    assert_eq!(left, ["s2"]);

    match server.delete_service_registration("default", "s1").await {
        Err(ServerError::NotFound(message)) => {
            assert_eq!(message, "service registration not found");
        }
        other => panic!("expected a not-found error in Nomad's words, got {other:?}"),
    }
    server
        .delete_service_registration("default", "s2")
        .await
        .expect("removed by hand");
    assert!(server.state().service_registrations(None).is_empty());
    server.shutdown().await;
}
