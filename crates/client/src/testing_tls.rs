//! Test support: an HTTPS server on 127.0.0.1 with a self-signed certificate for one DNS name
//! (made by the system's `openssl` command), answering every request with one fixed response.
//! Used by the checks' and the artifacts' TLS tests; not built outside tests.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A running server; it stops when the test's runtime ends.
pub struct TlsServer {
    /// Holds the certificate and key.
    _dir: tempfile::TempDir,
    /// The self-signed certificate (PEM), which a client may trust as its root.
    pub cert_pem: PathBuf,
    pub address: SocketAddr,
}

/// Starts a server whose certificate names `dns_name`, answering `status_line` with `body`.
pub async fn serve(dns_name: &str, status_line: &'static str, body: Vec<u8>) -> TlsServer {
    let dir = tempfile::tempdir().expect("tempdir");
    let cert_pem = dir.path().join("cert.pem");
    let key_pem = dir.path().join("key.pem");
    let made = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
        .arg("ec_paramgen_curve:prime256v1")
        .args(["-nodes", "-days", "1", "-subj"])
        .arg(format!("/CN={dns_name}"))
        .arg("-addext")
        .arg(format!("subjectAltName=DNS:{dns_name}"))
        .arg("-keyout")
        .arg(&key_pem)
        .arg("-out")
        .arg(&cert_pem)
        .output()
        .expect("the openssl command (package openssl) makes the test certificate");
    assert!(
        made.status.success(),
        "openssl req: {}",
        String::from_utf8_lossy(&made.stderr)
    );
    let identity = native_tls::Identity::from_pkcs8(
        &std::fs::read(&cert_pem).expect("cert"),
        &std::fs::read(&key_pem).expect("key"),
    )
    .expect("identity");
    let acceptor = tokio_native_tls::TlsAcceptor::from(
        native_tls::TlsAcceptor::new(identity).expect("acceptor"),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            let body = body.clone();
            tokio::spawn(async move {
                // A client that refuses the certificate ends the handshake: nothing to answer.
                let Ok(mut stream) = acceptor.accept(stream).await else {
                    return;
                };
                let mut request = [0u8; 4096];
                let _ = stream.read(&mut request).await;
                let head = format!(
                    "HTTP/1.1 {status_line}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = stream.write_all(head.as_bytes()).await;
                let _ = stream.write_all(&body).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    TlsServer {
        _dir: dir,
        cert_pem,
        address,
    }
}
