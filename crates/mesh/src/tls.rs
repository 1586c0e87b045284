//! TLS between sidecars: TLS 1.3 only, on rustls with the ring provider, both sides
//! authenticated by certificates chained to the mesh roots.
//!
//! - A sidecar's public listener ([`server_config`]) requires a client certificate chained to
//!   the roots; which service it names (its SPIFFE ID) is read after the handshake and checked
//!   against the intentions before a byte is passed on.
//! - A sidecar dialling an upstream ([`client_config`]) accepts a server certificate chained to
//!   the roots and carrying a SPIFFE ID of the mesh's trust domain; that it names the
//!   destination service is checked after the handshake ([`peer_spiffe_id`]), before a byte
//!   of the downstream's is sent.
//!
//! Configs are immutable: a renewed leaf or changed roots make new ones, used by new
//! connections while the open ones carry on with theirs.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::{ParsedCertificate, WebPkiClientVerifier};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme};

use crate::ca::{CaRoots, LeafCert};
use crate::error::MeshError;
use crate::spiffe::{SpiffeId, certificate_spiffe_id};

/// The ring provider: the workspace builds no other (no aws-lc C build). rustls marks it
/// deprecated only because ring has no post-quantum key exchange.
#[allow(deprecated)]
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn tls_error(error: impl std::fmt::Display) -> MeshError {
    MeshError::Tls(error.to_string())
}

/// The certificates of a PEM text.
pub fn pem_certificates(pem: &str) -> Result<Vec<CertificateDer<'static>>, MeshError> {
    CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| MeshError::Certificate(format!("cannot read PEM: {error}")))
}

/// The roots as a trust store.
pub fn root_store(roots: &CaRoots) -> Result<Arc<RootCertStore>, MeshError> {
    let mut store = RootCertStore::empty();
    for root in &roots.roots {
        for certificate in pem_certificates(&root.root_cert)? {
            store
                .add(certificate)
                .map_err(|error| MeshError::Certificate(format!("root {}: {error}", root.id)))?;
        }
    }
    if store.is_empty() {
        return Err(MeshError::Certificate("the CA has no roots".to_owned()));
    }
    Ok(Arc::new(store))
}

fn leaf_chain(
    leaf: &LeafCert,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), MeshError> {
    let chain = pem_certificates(&leaf.cert_pem)?;
    let key = PrivateKeyDer::from_pem_slice(leaf.private_key_pem.as_bytes())
        .map_err(|error| MeshError::Certificate(format!("cannot read the leaf's key: {error}")))?;
    Ok((chain, key))
}

/// The public listener's config: this leaf, and a client certificate chained to `roots`
/// required.
pub fn server_config(roots: &CaRoots, leaf: &LeafCert) -> Result<Arc<ServerConfig>, MeshError> {
    let provider = provider();
    let verifier =
        WebPkiClientVerifier::builder_with_provider(root_store(roots)?, provider.clone())
            .build()
            .map_err(tls_error)?;
    let (chain, key) = leaf_chain(leaf)?;
    let config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(tls_error)?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(tls_error)?;
    Ok(Arc::new(config))
}

/// An upstream connection's config: this leaf as the client certificate, the server's chained
/// to `roots` and of the mesh's trust domain.
pub fn client_config(roots: &CaRoots, leaf: &LeafCert) -> Result<Arc<ClientConfig>, MeshError> {
    let provider = provider();
    let verifier = MeshServerVerifier {
        roots: root_store(roots)?,
        trust_domain: roots.trust_domain.clone(),
        provider: provider.clone(),
    };
    let (chain, key) = leaf_chain(leaf)?;
    let config = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(tls_error)?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_client_auth_cert(chain, key)
        .map_err(tls_error)?;
    Ok(Arc::new(config))
}

/// The server name an upstream connection is made with: its address (no SNI is sent; the
/// peer is identified by its SPIFFE ID, not a host name).
pub fn server_name(address: std::net::SocketAddr) -> ServerName<'static> {
    ServerName::IpAddress(address.ip().into())
}

/// The SPIFFE ID of the peer's end-entity certificate.
pub fn peer_spiffe_id(peer: Option<&[CertificateDer<'_>]>) -> Result<SpiffeId, MeshError> {
    let certificate = peer
        .and_then(|chain| chain.first())
        .ok_or_else(|| MeshError::Tls("the peer presented no certificate".to_owned()))?;
    certificate_spiffe_id(certificate)
}

/// Accepts a server certificate chained to the mesh roots whose SPIFFE ID is of the trust
/// domain; the host name is not checked (there is none).
#[derive(Debug)]
struct MeshServerVerifier {
    roots: Arc<RootCertStore>,
    trust_domain: String,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for MeshServerVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let parsed = ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_cert_signed_by_trust_anchor(
            &parsed,
            &self.roots,
            intermediates,
            now,
            self.provider.signature_verification_algorithms.all,
        )?;
        let id = certificate_spiffe_id(end_entity)
            .map_err(|error| rustls::Error::General(error.to_string()))?;
        if id.trust_domain != self.trust_domain {
            return Err(rustls::Error::General(format!(
                "the server's SPIFFE ID {id} is not of trust domain {}",
                self.trust_domain
            )));
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use std::time::{SystemTime, UNIX_EPOCH};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};
    use tokio_rustls::{TlsAcceptor, TlsConnector};

    use super::*;
    use crate::ca::{MeshCa, RootKeyInput};

    fn now_ns() -> i64 {
        i64::try_from(
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_nanos(),
        )
        .unwrap()
    }

    fn key(id: &str, byte: u8, active: bool) -> RootKeyInput {
        RootKeyInput {
            key_id: id.to_owned(),
            create_time_ns: now_ns() - 3_600_000_000_000,
            secret: [byte; 32],
            active,
        }
    }

    const HOUR: i64 = 3_600_000_000_000;

    /// What each side of a failed exchange saw (`None`: that side did not fail).
    #[derive(Debug)]
    struct Failed {
        server: Option<String>,
        client: Option<String>,
    }

    impl Failed {
        /// The server refused the client itself (it did not merely hear the client's alert).
        fn server_refused(&self) -> bool {
            self.server
                .as_deref()
                .is_some_and(|error| !error.contains("received fatal alert"))
        }

        /// The client refused the server during the handshake.
        fn client_refused(&self) -> bool {
            self.client
                .as_deref()
                .is_some_and(|error| error.starts_with("client:"))
        }
    }

    /// A real handshake and one byte each way on 127.0.0.1: the server's view of the
    /// client's ID and the client's of the server's, or what each side saw fail.
    async fn handshake(
        server: Arc<ServerConfig>,
        client: Arc<ClientConfig>,
    ) -> Result<(SpiffeId, SpiffeId), Failed> {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let serving = tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            let mut tls = TlsAcceptor::from(server)
                .accept(stream)
                .await
                .map_err(|error| format!("server: {error}"))?;
            let client_id = peer_spiffe_id(tls.get_ref().1.peer_certificates())
                .map_err(|error| error.to_string())?;
            let mut byte = [0u8; 1];
            tls.read_exact(&mut byte)
                .await
                .map_err(|error| format!("server read: {error}"))?;
            tls.write_all(&byte)
                .await
                .map_err(|error| format!("server write: {error}"))?;
            tls.flush().await.map_err(|error| error.to_string())?;
            Ok::<_, String>(client_id)
        });
        let stream = TcpStream::connect(address).await.unwrap();
        let client_side = async {
            let mut tls = TlsConnector::from(client)
                .connect(server_name(address), stream)
                .await
                .map_err(|error| format!("client: {error}"))?;
            let server_id = peer_spiffe_id(tls.get_ref().1.peer_certificates())
                .map_err(|error| error.to_string())?;
            tls.write_all(b"x")
                .await
                .map_err(|error| format!("client write: {error}"))?;
            let mut byte = [0u8; 1];
            tls.read_exact(&mut byte)
                .await
                .map_err(|error| format!("client read: {error}"))?;
            Ok::<_, String>(server_id)
        };
        let client_result = client_side.await;
        let server_result = serving.await.unwrap();
        match (server_result, client_result) {
            (Ok(client_id), Ok(server_id)) => Ok((client_id, server_id)),
            (server, client) => Err(Failed {
                server: server.err(),
                client: client.err(),
            }),
        }
    }

    #[tokio::test]
    async fn sidecars_with_leaves_of_the_mesh_see_each_others_spiffe_ids() {
        let ca = MeshCa::new("c1.consul", &[key("k1", 1, true)]).unwrap();
        let roots = ca.roots();
        let api = ca
            .issue_leaf("default", "dc1", "api", now_ns(), HOUR)
            .unwrap();
        let web = ca
            .issue_leaf("default", "dc1", "web", now_ns(), HOUR)
            .unwrap();
        let (client_id, server_id) = handshake(
            server_config(&roots, &api).unwrap(),
            client_config(&roots, &web).unwrap(),
        )
        .await
        .unwrap();
        assert_eq!(
            client_id.to_string(),
            "spiffe://c1.consul/ns/default/dc/dc1/svc/web"
        );
        assert_eq!(server_id.service, "api");
    }

    #[tokio::test]
    async fn a_client_of_another_ca_or_without_a_certificate_is_refused() {
        let ca = MeshCa::new("c1.consul", &[key("k1", 1, true)]).unwrap();
        let roots = ca.roots();
        let api = ca
            .issue_leaf("default", "dc1", "api", now_ns(), HOUR)
            .unwrap();
        // Same trust domain and names, another keyring's CA.
        let foreign = MeshCa::new("c1.consul", &[key("k1", 9, true)]).unwrap();
        let intruder = foreign
            .issue_leaf("default", "dc1", "web", now_ns(), HOUR)
            .unwrap();
        let error = handshake(
            server_config(&roots, &api).unwrap(),
            client_config(&roots, &intruder).unwrap(),
        )
        .await
        .unwrap_err();
        assert!(error.server_refused(), "{error:?}");

        let no_certificate = ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(MeshServerVerifier {
                roots: root_store(&roots).unwrap(),
                trust_domain: roots.trust_domain.clone(),
                provider: provider(),
            }))
            .with_no_client_auth();
        let error = handshake(
            server_config(&roots, &api).unwrap(),
            Arc::new(no_certificate),
        )
        .await
        .unwrap_err();
        assert!(error.server_refused(), "{error:?}");
    }

    #[tokio::test]
    async fn a_server_of_another_ca_or_trust_domain_is_refused_by_the_client() {
        let ca = MeshCa::new("c1.consul", &[key("k1", 1, true)]).unwrap();
        let web = ca
            .issue_leaf("default", "dc1", "web", now_ns(), HOUR)
            .unwrap();
        let foreign = MeshCa::new("c1.consul", &[key("k1", 9, true)]).unwrap();
        let fake_api = foreign
            .issue_leaf("default", "dc1", "api", now_ns(), HOUR)
            .unwrap();
        let error = handshake(
            server_config(&foreign.roots(), &fake_api).unwrap(),
            client_config(&ca.roots(), &web).unwrap(),
        )
        .await
        .unwrap_err();
        assert!(error.client_refused(), "{error:?}");

        // The same key under another trust domain: chained, but not of this mesh.
        let other_domain = MeshCa::new("c2.consul", &[key("k1", 1, true)]).unwrap();
        let api_elsewhere = other_domain
            .issue_leaf("default", "dc1", "api", now_ns(), HOUR)
            .unwrap();
        let error = handshake(
            server_config(&other_domain.roots(), &api_elsewhere).unwrap(),
            client_config(&ca.roots(), &web).unwrap(),
        )
        .await
        .unwrap_err();
        assert!(error.client_refused(), "{error:?}");
        assert!(
            error
                .client
                .as_deref()
                .unwrap_or_default()
                .contains("trust domain"),
            "{error:?}"
        );
    }

    #[tokio::test]
    async fn an_expired_leaf_is_refused_and_a_leaf_of_the_previous_root_still_verifies() {
        let before = MeshCa::new("c1.consul", &[key("k1", 1, true)]).unwrap();
        let old_api = before
            .issue_leaf("default", "dc1", "api", now_ns(), HOUR)
            .unwrap();
        // After a rotation: k1 stays as a root, k2 signs.
        let after = MeshCa::new("c1.consul", &[key("k1", 1, false), key("k2", 2, true)]).unwrap();
        let roots = after.roots();
        let web = after
            .issue_leaf("default", "dc1", "web", now_ns(), HOUR)
            .unwrap();
        handshake(
            server_config(&roots, &old_api).unwrap(),
            client_config(&roots, &web).unwrap(),
        )
        .await
        .unwrap();
        // A leaf that ended ten minutes ago.
        let expired = after
            .issue_leaf(
                "default",
                "dc1",
                "web",
                now_ns() - 11 * 60_000_000_000,
                60_000_000_000,
            )
            .unwrap();
        let error = handshake(
            server_config(&roots, &old_api).unwrap(),
            client_config(&roots, &expired).unwrap(),
        )
        .await
        .unwrap_err();
        assert!(error.server_refused(), "{error:?}");
    }
}
