//! The `grpc` check against a real gRPC server: tonic's server on 127.0.0.1 serving the
//! standard `grpc.health.v1.Health/Check` (per-service statuses, `NOT_FOUND` for a service it
//! does not know), in plain HTTP/2 and over TLS (a self-signed certificate made by the system's
//! `openssl` command).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use drover_client::checks::grpc::{GrpcTls, grpc};
use drover_client::checks::probe::ProbeResult;
use drover_client::checks::status::Outcome;
use drover_client::testing_grpc::{HealthService, health, serve_plain};

/// A TLS stream the server can take as a connection.
struct TlsConnection(tokio_native_tls::TlsStream<tokio::net::TcpStream>);

impl tonic::transport::server::Connected for TlsConnection {
    type ConnectInfo = ();
    fn connect_info(&self) {}
}

impl tokio::io::AsyncRead for TlsConnection {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for TlsConnection {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

async fn serve_tls(service: HealthService, dns_name: &str) -> (String, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    let made = std::process::Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
        .arg("ec_paramgen_curve:prime256v1")
        .args(["-nodes", "-days", "1", "-subj"])
        .arg(format!("/CN={dns_name}"))
        .arg("-addext")
        .arg(format!("subjectAltName=DNS:{dns_name}"))
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("the openssl command (package openssl) makes the test certificate");
    assert!(made.status.success(), "{made:?}");
    let identity = native_tls::Identity::from_pkcs8(
        &std::fs::read(&cert).unwrap(),
        &std::fs::read(&key).unwrap(),
    )
    .unwrap();
    let acceptor =
        tokio_native_tls::TlsAcceptor::from(native_tls::TlsAcceptor::new(identity).unwrap());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let incoming =
        futures_util::stream::unfold((listener, acceptor), |(listener, acceptor)| async move {
            loop {
                let (stream, _) = listener.accept().await.ok()?;
                // A client that refuses the certificate ends its handshake: wait for the next.
                if let Ok(stream) = acceptor.accept(stream).await {
                    return Some((
                        Ok::<_, std::io::Error>(TlsConnection(stream)),
                        (listener, acceptor),
                    ));
                }
            }
        });
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(incoming),
    );
    (address, dir)
}

const TIMEOUT: Duration = Duration::from_secs(5);

fn assert_result(result: &ProbeResult, outcome: Outcome, output: &str) {
    assert_eq!(result.outcome, outcome, "{result:?}");
    assert!(result.output.contains(output), "{result:?}");
}

#[tokio::test]
async fn a_grpc_check_asks_the_health_service_and_passes_only_on_serving() {
    let service = health(&[("", 1), ("db", 2)]);
    let statuses = service.statuses.clone();
    let address = serve_plain(service).await;

    let whole = grpc(&address, "", None, TIMEOUT).await;
    assert_result(
        &whole,
        Outcome::Success,
        &format!("gRPC check {address}: success"),
    );
    let db = grpc(&address, "db", None, TIMEOUT).await;
    assert_result(
        &db,
        Outcome::Failure,
        &format!("gRPC {address}/db serving status: NOT_SERVING"),
    );
    statuses.lock().unwrap().insert("db".to_string(), 1);
    let db = grpc(&address, "db", None, TIMEOUT).await;
    assert_result(&db, Outcome::Success, "success");
    let unknown = grpc(&address, "nope", None, TIMEOUT).await;
    assert_result(&unknown, Outcome::Failure, "NotFound");

    // Nothing listening: a failure naming the address.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().to_string()
    };
    let refused = grpc(&closed, "", None, TIMEOUT).await;
    assert_result(&refused, Outcome::Failure, &format!("gRPC check {closed}"));
}

#[tokio::test]
async fn a_grpc_check_with_grpc_use_tls_verifies_unless_told_to_skip() {
    let (address, _dir) = serve_tls(health(&[("", 1)]), "grpc.test").await;
    let skipping = GrpcTls {
        skip_verify: true,
        server_name: String::new(),
    };
    let passed = grpc(&address, "", Some(skipping), TIMEOUT).await;
    assert_result(&passed, Outcome::Success, "success");
    // The self-signed certificate is not trusted: the handshake fails.
    let verifying = GrpcTls {
        skip_verify: false,
        server_name: "grpc.test".to_string(),
    };
    let refused = grpc(&address, "", Some(verifying), TIMEOUT).await;
    assert_result(&refused, Outcome::Failure, &format!("gRPC check {address}"));
    // Plain HTTP/2 to a TLS port fails too.
    let plain = grpc(&address, "", None, Duration::from_secs(2)).await;
    assert_eq!(plain.outcome, Outcome::Failure, "{plain:?}");
}
