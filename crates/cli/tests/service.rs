//! `drover service list|info|delete` through `drover::run` against the real HTTP layer on
//! 127.0.0.1:0 over the in-memory backend: Nomad's tables, prefix resolution, exit codes.

#![allow(clippy::expect_used, clippy::unwrap_used)] // a failed expectation is a failed test

use std::ffi::OsString;
use std::sync::Arc;

use drover_api::memory::MemoryBackend;
use drover_api::{AgentOperations, StateReads};
use drover_structs::ServiceRegistration;

struct Outcome {
    code: i32,
    stdout: String,
    stderr: String,
}

async fn drover(arguments: &[&str]) -> Outcome {
    let mut argv: Vec<OsString> = vec!["drover".into()];
    argv.extend(arguments.iter().map(OsString::from));
    let mut out = Vec::new();
    let mut err = Vec::new();
    let code = drover::run(argv, &mut out, &mut err).await;
    Outcome {
        code,
        stdout: String::from_utf8(out).unwrap(),
        stderr: String::from_utf8(err).unwrap(),
    }
}

fn registration(
    id: &str,
    name: &str,
    namespace: &str,
    job_id: &str,
    alloc_id: &str,
    tags: &[&str],
    port: i64,
) -> ServiceRegistration {
    ServiceRegistration {
        id: id.to_owned(),
        service_name: name.to_owned(),
        namespace: namespace.to_owned(),
        node_id: "f1d90000-1111-2222-3333-444455556666".to_owned(),
        datacenter: "dc1".to_owned(),
        job_id: job_id.to_owned(),
        alloc_id: alloc_id.to_owned(),
        tags: tags.iter().map(|tag| (*tag).to_owned()).collect(),
        address: "10.0.0.7".to_owned(),
        port,
        ..ServiceRegistration::default()
    }
}

async fn agent() -> (Arc<MemoryBackend>, String) {
    let backend = Arc::new(MemoryBackend::dev());
    backend
        .upsert_service_registrations(vec![
            registration(
                "s1",
                "web-frontend",
                "default",
                "web",
                "8e3a5f1c-aaaa",
                &["v2", "http"],
                21001,
            ),
            registration(
                "s2",
                "web-frontend",
                "default",
                "api",
                "9b7c0000-bbbb",
                &["http"],
                21002,
            ),
            registration(
                "s3",
                "web-admin",
                "default",
                "web",
                "8e3a5f1c-aaaa",
                &[],
                9000,
            ),
            registration(
                "s4",
                "db",
                "prod",
                "db",
                "77770000-cccc",
                &["primary"],
                5432,
            ),
        ])
        .await
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    let router = drover_api::app(Arc::clone(&backend));
    tokio::spawn(async move {
        axum::serve(listener, router).await.unwrap();
    });
    (backend, address)
}

#[tokio::test]
async fn service_list_prints_names_and_tags_and_namespaces_for_star() {
    let (_backend, address) = agent().await;
    let outcome = drover(&["service", "list", "-address", &address]).await;
    assert_eq!(outcome.code, 0, "{}", outcome.stderr);
    assert_eq!(
        outcome.stdout,
        "Service Name  Tags\nweb-admin     []\nweb-frontend  [http,v2]\n"
    );
    let outcome = drover(&["service", "list", "-address", &address, "-namespace", "*"]).await;
    assert_eq!(
        outcome.stdout,
        "Service Name  Namespace  Tags\n\
         web-admin     default    []\n\
         web-frontend  default    [http,v2]\n\
         db            prod       [primary]\n"
    );
    let outcome = drover(&[
        "service",
        "list",
        "-address",
        &address,
        "-namespace",
        "empty",
    ])
    .await;
    assert_eq!(
        (outcome.code, outcome.stdout.as_str()),
        (0, "No service registrations found\n")
    );
    let outcome = drover(&["service", "list", "-address", &address, "-json"]).await;
    let json: serde_json::Value = serde_json::from_str(&outcome.stdout).unwrap();
    assert_eq!(json[0]["Services"][1]["ServiceName"], "web-frontend");
}

#[tokio::test]
async fn service_info_prints_nomads_table_grouped_by_job() {
    let (_backend, address) = agent().await;
    let outcome = drover(&["service", "info", "-address", &address, "web-frontend"]).await;
    assert_eq!(outcome.code, 0, "{}", outcome.stderr);
    assert_eq!(
        outcome.stdout,
        "Job ID  Address         Tags       Node ID   Alloc ID\n\
         api     10.0.0.7:21002  [http]     f1d90000  9b7c0000\n\
         web     10.0.0.7:21001  [v2,http]  f1d90000  8e3a5f1c\n"
    );
}

#[tokio::test]
async fn service_info_verbose_prints_every_field() {
    let (_backend, address) = agent().await;
    let outcome = drover(&[
        "service",
        "info",
        "-address",
        &address,
        "-verbose",
        "web-admin",
    ])
    .await;
    assert_eq!(outcome.code, 0, "{}", outcome.stderr);
    assert_eq!(
        outcome.stdout,
        "ID           = s3\n\
         Service Name = web-admin\n\
         Namespace    = default\n\
         Job ID       = web\n\
         Alloc ID     = 8e3a5f1c-aaaa\n\
         Node ID      = f1d90000-1111-2222-3333-444455556666\n\
         Datacenter   = dc1\n\
         Address      = 10.0.0.7:9000\n\
         Tags         = []\n\n\n"
    );
}

#[tokio::test]
async fn service_info_resolves_a_prefix_or_says_why_not() {
    let (_backend, address) = agent().await;
    let outcome = drover(&["service", "info", "-address", &address, "web-adm"]).await;
    assert_eq!(outcome.code, 0, "{}", outcome.stderr);
    assert!(outcome.stdout.contains("10.0.0.7:9000"));

    let outcome = drover(&["service", "info", "-address", &address, "web"]).await;
    assert_eq!(outcome.code, 1);
    assert_eq!(
        outcome.stderr,
        "Prefix matched multiple services\n\n\
         Service Name  Tags\n\
         web-admin     []\n\
         web-frontend  [http,v2]\n"
    );
    let outcome = drover(&["service", "info", "-address", &address, "nope"]).await;
    assert_eq!(outcome.code, 1);
    assert_eq!(
        outcome.stderr,
        "Error listing service registrations: No service registrations with prefix \"nope\" found\n"
    );
    // Another namespace, found through `*`.
    let outcome = drover(&[
        "service",
        "info",
        "-address",
        &address,
        "-namespace",
        "*",
        "db",
    ])
    .await;
    assert_eq!(outcome.code, 0, "{}", outcome.stderr);
    assert!(
        outcome.stdout.contains("10.0.0.7:5432"),
        "{}",
        outcome.stdout
    );
}

#[tokio::test]
async fn service_delete_removes_a_registration_or_fails_with_the_reason() {
    let (backend, address) = agent().await;
    let outcome = drover(&["service", "delete", "-address", &address, "web-admin", "s3"]).await;
    assert_eq!(
        (outcome.code, outcome.stdout.as_str()),
        (0, "Successfully deleted service registration\n")
    );
    assert!(
        backend
            .service_registrations_by_name("default", "web-admin")
            .unwrap()
            .is_empty()
    );
    let outcome = drover(&["service", "delete", "-address", &address, "web-admin", "s3"]).await;
    assert_eq!(outcome.code, 1);
    assert_eq!(
        outcome.stderr,
        "Error deleting service registration: Unexpected response code: 404 (service registration not found)\n"
    );
    let outcome = drover(&[
        "service",
        "delete",
        "-address",
        &address,
        "only-one-argument",
    ])
    .await;
    assert_eq!(outcome.code, 1);
}
