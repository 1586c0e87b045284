//! What the interop tests and the in-task program share: a `nomad-client-rs` client whose
//! TLS stack has a crypto provider (the client is built without its default one).

/// Installs rustls' `ring` provider once per process; `NomadClient` cannot be built without
/// a provider, even for plain HTTP.
pub fn install_crypto_provider() {
    // A second install (another test of the same process) is refused, which is fine.
    let _ = rustls::crypto::ring::default_provider().install_default();
}
