//! The etcd backend against a real 3-member etcd serving clients over TLS only with
//! `--client-cert-auth`, and with etcd auth enabled: drover connects with the CA, its client
//! certificate and its etcd user, writes, leads, and keeps the cluster's keyring key there;
//! a client without a certificate, with a wrong password, or without a user gets nothing (so
//! the keyring key in etcd is protected).
//!
//! Needs `etcd` (Debian's etcd-server) and `openssl`; skipped without etcd, failed under
//! `CI=true`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use drover_etcd::{Credentials, EtcdConfig, EtcdKv, EtcdTls};
use drover_state::{EngineOptions, StateStore};
use etcd_client::{Client, ConnectOptions, OpenSslClientConfig, Permission};

const PREFIX: &str = "drover-tls/";

fn config(cluster: &common::EtcdCluster, tls: EtcdTls, user: Option<(&str, &str)>) -> EtcdConfig {
    EtcdConfig {
        request_timeout: Duration::from_secs(2),
        tls: Some(tls),
        credentials: user.map(|(username, password)| Credentials {
            username: username.to_owned(),
            password: password.to_owned(),
        }),
        ..EtcdConfig::new(cluster.endpoints(), PREFIX)
    }
}

/// etcd auth on: a root user, and user `drover` whose role may read and write `PREFIX` only.
async fn enable_auth(cluster: &common::EtcdCluster, certs: &common::TestCerts) {
    let tls = OpenSslClientConfig::default()
        .ca_cert_pem(&std::fs::read(&certs.ca).unwrap())
        .client_cert_pem_and_key(
            &std::fs::read(&certs.client_cert).unwrap(),
            &std::fs::read(&certs.client_key).unwrap(),
        );
    let mut admin = Client::connect(
        cluster.endpoints(),
        Some(ConnectOptions::new().with_openssl_tls(tls)),
    )
    .await
    .unwrap();
    admin.role_add("root").await.unwrap();
    admin.user_add("root", "root-password", None).await.unwrap();
    admin.user_grant_role("root", "root").await.unwrap();
    admin.role_add("drover").await.unwrap();
    admin
        .role_grant_permission("drover", Permission::read_write(PREFIX).with_prefix())
        .await
        .unwrap();
    admin
        .user_add("drover", "drover-password", None)
        .await
        .unwrap();
    admin.user_grant_role("drover", "drover").await.unwrap();
    admin.auth_enable().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drover_reaches_etcd_over_tls_with_its_user_and_nobody_else_reads_its_keys() {
    if !common::etcd_available() {
        return;
    }
    let directory = tempfile::tempdir().unwrap();
    // The client certificate's name is no etcd user: without a password it is nobody.
    let certs = common::TestCerts::make(directory.path(), "drover-client");
    let cluster = common::EtcdCluster::start_tls(3, certs.clone()).await;
    enable_auth(&cluster, &certs).await;

    // drover, with the CA, its certificate and its user: a store that writes, a leader, and
    // the cluster's keyring key made once.
    let kv = Arc::new(
        EtcdKv::connect(&config(
            &cluster,
            certs.client_tls(),
            Some(("drover", "drover-password")),
        ))
        .await
        .unwrap(),
    );
    let store = StateStore::open_with_kv(kv.clone(), EngineOptions::default())
        .await
        .unwrap();
    let index = store
        .upsert_node(
            drover_structs::Node {
                id: "over-tls".to_owned(),
                name: "over-tls".to_owned(),
                status: "ready".to_owned(),
                ..drover_structs::Node::default()
            },
            1,
        )
        .await
        .unwrap();
    assert!(index > 0);
    let kek = kv
        .shared_value("keyring_kek", || b"the-kek".to_vec())
        .await
        .unwrap();
    assert_eq!(kek, b"the-kek");
    let election = kv
        .campaign(drover_etcd::election::Candidate::new(
            "server-a",
            b"server-a".to_vec(),
        ))
        .await
        .unwrap();
    let mut view = election.watch();
    tokio::time::timeout(Duration::from_secs(20), async {
        while !view.borrow_and_update().is_leader {
            view.changed().await.unwrap();
        }
    })
    .await
    .expect("leads over TLS");

    let read_kek = |config: EtcdConfig| async move {
        let kv = EtcdKv::connect(&config).await?;
        kv.shared_value("keyring_kek", || b"another".to_vec()).await
    };
    // A wrong password: refused.
    let error = read_kek(config(
        &cluster,
        certs.client_tls(),
        Some(("drover", "wrong")),
    ))
    .await
    .unwrap_err();
    assert!(
        error.to_string().contains("authentication failed"),
        "{error}"
    );
    // A certificate but no user: refused.
    let error = read_kek(config(&cluster, certs.client_tls(), None))
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("permission denied")
            || error.to_string().contains("user name not found")
            || error.to_string().contains("user name is empty"),
        "{error}"
    );
    // The right user but no client certificate: the TLS handshake is refused.
    let without_certificate = EtcdTls {
        ca_file: Some(certs.ca.clone()),
        cert_file: None,
        key_file: None,
    };
    assert!(
        read_kek(config(
            &cluster,
            without_certificate,
            Some(("drover", "drover-password")),
        ))
        .await
        .is_err()
    );
    // A CA file that is not PEM is named when the backend is configured.
    let not_pem = directory.path().join("not-a-ca.pem");
    std::fs::write(&not_pem, "not a certificate").unwrap();
    let error = EtcdKv::connect(&config(
        &cluster,
        EtcdTls {
            ca_file: Some(not_pem.clone()),
            ..certs.client_tls()
        },
        None,
    ))
    .await
    .unwrap_err();
    assert!(error.to_string().contains("not-a-ca.pem"), "{error}");
    assert!(kv.members().await.is_ok());
}
