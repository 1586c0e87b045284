//! TLS to etcd: the trusted CA and the client certificate of [`crate::config::EtcdTls`], read and
//! checked once when the backend is configured (a missing or unreadable file is named then,
//! not at the first request), and handed to etcd-client's OpenSSL transport for every member.
//!
//! Not here: which endpoints use TLS (the agent's config: every one is `https://`).

use std::path::Path;

use etcd_client::{ConnectOptions, OpenSslClientConfig};

use drover_state::KvError;

use crate::config::{EtcdConfig, EtcdTls};

/// The PEM contents of the TLS files, checked to parse.
#[derive(Clone)]
pub(crate) struct TlsMaterial {
    ca: Option<Vec<u8>>,
    client: Option<(Vec<u8>, Vec<u8>)>,
}

fn read(role: &str, path: &Path) -> Result<Vec<u8>, KvError> {
    std::fs::read(path).map_err(|error| KvError::Backend {
        operation: "connect",
        reason: format!("reading the etcd {role} {}: {error}", path.display()),
    })
}

fn invalid(role: &str, path: &Path, error: &openssl::error::ErrorStack) -> KvError {
    KvError::Backend {
        operation: "connect",
        reason: format!(
            "the etcd {role} {} is not valid PEM: {error}",
            path.display()
        ),
    }
}

impl TlsMaterial {
    /// Reads and checks the files `tls` names.
    pub(crate) fn load(tls: &EtcdTls) -> Result<Self, KvError> {
        let ca = match &tls.ca_file {
            Some(path) => {
                let pem = read("CA file", path)?;
                let certificates = openssl::x509::X509::stack_from_pem(&pem)
                    .map_err(|error| invalid("CA file", path, &error))?;
                if certificates.is_empty() {
                    return Err(KvError::Backend {
                        operation: "connect",
                        reason: format!(
                            "the etcd CA file {} holds no PEM certificate",
                            path.display()
                        ),
                    });
                }
                Some(pem)
            }
            None => None,
        };
        let client = match (&tls.cert_file, &tls.key_file) {
            (Some(cert_path), Some(key_path)) => {
                let cert = read("certificate file", cert_path)?;
                openssl::x509::X509::from_pem(&cert)
                    .map_err(|error| invalid("certificate file", cert_path, &error))?;
                let key = read("key file", key_path)?;
                openssl::pkey::PKey::private_key_from_pem(&key)
                    .map_err(|error| invalid("key file", key_path, &error))?;
                Some((cert, key))
            }
            (None, None) => None,
            _ => {
                return Err(KvError::Backend {
                    operation: "connect",
                    reason: "a client certificate for etcd needs both its certificate and its \
                             key file"
                        .to_owned(),
                });
            }
        };
        Ok(Self { ca, client })
    }
}

/// `options` with the TLS settings of `config` (`material` loaded from its files).
pub(crate) fn apply(
    config: &EtcdConfig,
    material: Option<&TlsMaterial>,
    options: ConnectOptions,
) -> ConnectOptions {
    let (Some(_), Some(material)) = (&config.tls, material) else {
        return options;
    };
    let mut tls = OpenSslClientConfig::default();
    if let Some(ca) = &material.ca {
        // Every certificate of the file is trusted (a bundle of CAs works as well as one).
        let ca = ca.clone();
        tls = tls.manually(move |builder| {
            for certificate in openssl::x509::X509::stack_from_pem(&ca)? {
                builder.cert_store_mut().add_cert(certificate)?;
            }
            Ok(())
        });
    }
    if let Some((cert, key)) = &material.client {
        tls = tls.client_cert_pem_and_key(cert, key);
    }
    options.with_openssl_tls(tls)
}
