//! The server's keyring: root keys that seal data at rest (AES-256-GCM, Nomad's `aes256-gcm`)
//! and sign workload identities (an Ed25519 key derived from each root key), as Nomad's
//! encrypter does.
//!
//! ```text
//!  <server dir>/keyring.kek (0600) ── seals ──► root keys in the state store (root_keys table)
//!  root key ── HKDF-SHA-256 ──► Ed25519 seed ── signs ──► JWTs (kid = key ID), JWKS
//!  root key ── AES-256-GCM ──► sealed data (nonce ‖ ciphertext ‖ tag)
//! ```
//!
//! The key-encryption key (KEK) is 32 random bytes made at the server's first start, kept in
//! the data dir readable by its owner only; the store holds root keys only sealed by it, so a
//! copy of the state file alone reveals no key. The first start also makes the first root key
//! (`active`); `rotate` makes a new active one, the previous one stays to open what it sealed
//! and to verify what it signed until it is removed.
//!
//! Not here: which claims an identity carries and when a token is still valid for its
//! allocation (`identity`), HTTP (the agent).

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use drover_state::{StateError, StateStore};
use drover_structs::keyring::{
    ENCRYPTION_ALGORITHM_AES256_GCM, ROOT_KEY_STATE_ACTIVE, WRAPPED_ROOT_KEY_VERSION,
};
use drover_structs::{RootKeyMeta, WrappedRootKey};
use ed25519_dalek::{Signer, SigningKey, Verifier, VerifyingKey};
use rand::RngCore;

use crate::clock::Clock;

/// The file in the server's data dir that holds the key-encryption key.
pub const KEK_FILE_NAME: &str = "keyring.kek";

/// What HKDF binds the derived signing seed to (so the same root key never serves two uses
/// with the same bytes).
const SIGNING_KEY_INFO: &[u8] = b"drover workload identity ed25519 signing key v1";

const NONCE_LEN: usize = 12;
const KEY_LEN: usize = 32;

/// Errors of the keyring.
#[derive(Debug, thiserror::Error)]
pub enum KeyringError {
    #[error("keyring file {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("keyring file {path}: {reason}")]
    KekFile { path: PathBuf, reason: String },
    #[error(transparent)]
    State(#[from] StateError),
    /// Nomad's message for an unknown key.
    #[error("root key not found")]
    KeyNotFound { key_id: String },
    #[error("no active root key")]
    NoActiveKey,
    /// Nomad's message for removing the active key.
    #[error("active root key cannot be deleted - call rotate first")]
    ActiveKey,
    #[error("root key in use, cannot delete")]
    KeyInUse { key_id: String },
    #[error("cannot open root key {key_id}: {reason}")]
    Unwrap { key_id: String, reason: String },
    #[error("cannot decrypt data sealed with root key {key_id}")]
    Decrypt { key_id: String },
    #[error("cannot encrypt: {0}")]
    Encrypt(String),
    /// A token that is malformed, not signed by a key of this keyring, or not valid now.
    #[error("invalid token: {0}")]
    InvalidToken(String),
}

/// The key-encryption key: seals root keys before they reach the store.
struct Kek {
    id: String,
    cipher: Aes256Gcm,
    /// The KEK file's text form (`<kek id>\n<base64 key>\n`), for a snapshot to carry.
    text: String,
}

impl std::fmt::Debug for Kek {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Kek").field("id", &self.id).finish()
    }
}

/// The KEK file: `<kek id>\n<base64 key>\n`, mode 0600.
fn load_or_create_kek(dir: &Path) -> Result<Kek, KeyringError> {
    let path = dir.join(KEK_FILE_NAME);
    let io = |source| KeyringError::Io {
        path: path.clone(),
        source,
    };
    let malformed = |reason: &str| KeyringError::KekFile {
        path: path.clone(),
        reason: reason.to_owned(),
    };
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let mode = std::fs::metadata(&path).map_err(io)?.permissions().mode();
            if mode & 0o077 != 0 {
                return Err(malformed(&format!(
                    "is readable by others (mode {:o}); it must be 0600",
                    mode & 0o777
                )));
            }
            parse_kek(&text).map_err(&malformed)
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            let id = uuid::Uuid::new_v4().to_string();
            let mut key = [0u8; KEY_LEN];
            rand::thread_rng().fill_bytes(&mut key);
            // Written under a temporary name created 0600, then renamed: the key is never in a
            // file others can read, and a crash leaves no half-written KEK.
            let temporary = dir.join(format!("{KEK_FILE_NAME}.tmp"));
            let _ = std::fs::remove_file(&temporary);
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&temporary)
                .map_err(io)?;
            let text = format!("{id}\n{}\n", STANDARD.encode(key));
            file.write_all(text.as_bytes())
                .and_then(|()| file.sync_all())
                .map_err(io)?;
            std::fs::rename(&temporary, &path).map_err(io)?;
            let cipher = Aes256Gcm::new_from_slice(&key)
                .map_err(|_| malformed("the key is not 32 bytes"))?;
            Ok(Kek { id, cipher, text })
        }
        Err(error) => Err(io(error)),
    }
}

/// A KEK in the KEK file's text form (`<kek id>\n<base64 key>\n`).
fn parse_kek(text: &str) -> Result<Kek, &'static str> {
    let mut lines = text.lines();
    let id = lines.next().unwrap_or_default().trim().to_owned();
    let key = STANDARD
        .decode(lines.next().unwrap_or_default().trim())
        .map_err(|_| "the key is not base64")?;
    if id.is_empty() || key.len() != KEY_LEN {
        return Err("expected a key ID line and a 32-byte key line");
    }
    let cipher = Aes256Gcm::new_from_slice(&key).map_err(|_| "the key is not 32 bytes")?;
    Ok(Kek {
        text: format!("{id}\n{}\n", STANDARD.encode(&key)),
        id,
        cipher,
    })
}

/// A new random KEK in the KEK file's text form: servers that share their state (on etcd)
/// share one, kept beside that state, so a root key one sealed opens on every other.
pub fn new_kek_text() -> String {
    let mut key = [0u8; KEY_LEN];
    rand::thread_rng().fill_bytes(&mut key);
    format!("{}\n{}\n", uuid::Uuid::new_v4(), STANDARD.encode(key))
}

/// AES-256-GCM with a random nonce: nonce ‖ ciphertext ‖ tag.
fn seal(cipher: &Aes256Gcm, aad: &[u8], plaintext: &[u8]) -> Result<Vec<u8>, KeyringError> {
    let mut nonce_bytes = [0u8; NONCE_LEN];
    rand::thread_rng().fill_bytes(&mut nonce_bytes);
    let nonce = Nonce::from(nonce_bytes);
    let sealed = cipher
        .encrypt(
            &nonce,
            Payload {
                msg: plaintext,
                aad,
            },
        )
        .map_err(|_| KeyringError::Encrypt("the plaintext is too long".to_owned()))?;
    let mut out = Vec::with_capacity(NONCE_LEN + sealed.len());
    out.extend_from_slice(&nonce_bytes);
    out.extend_from_slice(&sealed);
    Ok(out)
}

/// Opens what [`seal`] made; `None` when it is not authentic.
fn open(cipher: &Aes256Gcm, aad: &[u8], sealed: &[u8]) -> Option<Vec<u8>> {
    if sealed.len() < NONCE_LEN {
        return None;
    }
    let (nonce_bytes, ciphertext) = sealed.split_at(NONCE_LEN);
    let nonce_bytes: [u8; NONCE_LEN] = nonce_bytes.try_into().ok()?;
    cipher
        .decrypt(
            &Nonce::from(nonce_bytes),
            Payload {
                msg: ciphertext,
                aad,
            },
        )
        .ok()
}

/// One root key, opened: its data cipher and its signing key.
struct RootKey {
    meta: RootKeyMeta,
    cipher: Aes256Gcm,
    signing: SigningKey,
    /// HKDF-SHA-256 over the root key: derives the other secrets bound to this key
    /// ([`Keyring::derived_secrets`]).
    derive: hkdf::Hkdf<sha2::Sha256>,
}

impl RootKey {
    fn from_bytes(meta: RootKeyMeta, key: &[u8; KEY_LEN]) -> Result<Self, KeyringError> {
        let cipher = Aes256Gcm::new_from_slice(key).map_err(|_| KeyringError::Unwrap {
            key_id: meta.key_id.clone(),
            reason: "not 32 bytes".to_owned(),
        })?;
        let mut seed = [0u8; KEY_LEN];
        let derive = hkdf::Hkdf::<sha2::Sha256>::new(None, key);
        derive
            .expand(SIGNING_KEY_INFO, &mut seed)
            .map_err(|_| KeyringError::Unwrap {
                key_id: meta.key_id.clone(),
                reason: "cannot derive the signing key".to_owned(),
            })?;
        Ok(Self {
            meta,
            cipher,
            signing: SigningKey::from_bytes(&seed),
            derive,
        })
    }
}

/// One public signing key, for a JWKS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicSigningKey {
    pub key_id: String,
    /// The Ed25519 public key.
    pub public_key: [u8; 32],
    /// Unix nanoseconds.
    pub create_time: i64,
}

/// A signed token's header and claims, once verified.
#[derive(Debug, Clone, PartialEq)]
pub struct VerifiedToken {
    /// The key that signed it.
    pub key_id: String,
    pub claims: serde_json::Value,
}

/// The keyring; cheap to share behind an `Arc`.
pub struct Keyring {
    state: StateStore,
    kek: Kek,
    clock: Arc<dyn Clock>,
    /// Opened root keys by ID (filled from the store on first use).
    opened: Mutex<BTreeMap<String, Arc<RootKey>>>,
    /// `server { oidc_issuer }`: the `iss` of every token signed, as Nomad's `SignClaims`.
    issuer: Option<String>,
}

impl std::fmt::Debug for Keyring {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Keyring")
            .field("kek", &self.kek)
            .finish_non_exhaustive()
    }
}

impl Keyring {
    /// The keyring that names `issuer` (`server { oidc_issuer }`) as the `iss` of every token
    /// it signs; none is named without one.
    pub fn with_issuer(mut self, issuer: Option<String>) -> Self {
        self.issuer = issuer;
        self
    }

    /// Opens the keyring of the server whose data dir is `server_dir`: loads (or makes, 0600)
    /// its KEK, and makes the first root key when the store has none.
    pub async fn open(
        server_dir: &Path,
        state: StateStore,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, KeyringError> {
        let kek = load_or_create_kek(server_dir)?;
        let keyring = Self {
            state,
            kek,
            clock,
            opened: Mutex::new(BTreeMap::new()),
            issuer: None,
        };
        keyring.ensure_root_key().await?;
        keyring.check_stored_keys()?;
        Ok(keyring)
    }

    /// Opens the keyring of a server of a cluster with the cluster's KEK (made by
    /// [`new_kek_text`]). Makes no root key: the leader does ([`Keyring::ensure_root_key`]).
    pub fn open_shared(
        kek_text: &str,
        state: StateStore,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, KeyringError> {
        let kek = parse_kek(kek_text).map_err(|reason| KeyringError::KekFile {
            path: PathBuf::from("<the cluster's shared KEK>"),
            reason: reason.to_owned(),
        })?;
        let keyring = Self {
            state,
            kek,
            clock,
            opened: Mutex::new(BTreeMap::new()),
            issuer: None,
        };
        keyring.check_stored_keys()?;
        Ok(keyring)
    }

    /// Makes the first root key when the store has none.
    pub async fn ensure_root_key(&self) -> Result<(), KeyringError> {
        if self.state.root_keys().is_empty() {
            self.rotate().await?;
        }
        Ok(())
    }

    /// Every stored key must open with this KEK: a wrong or replaced KEK is found at start,
    /// not at the first read of a variable.
    fn check_stored_keys(&self) -> Result<(), KeyringError> {
        for stored in self.state.root_keys() {
            self.opened_key(&stored.meta.key_id)?;
        }
        Ok(())
    }

    /// The ID of the key-encryption key that seals this keyring's root keys.
    pub fn kek_id(&self) -> &str {
        &self.kek.id
    }

    /// The key-encryption key in its file's text form, for a snapshot to carry: whoever holds
    /// it and the store opens every root key, so it is as secret as the data dir.
    pub fn kek_text(&self) -> &str {
        &self.kek.text
    }

    /// `stored` (a root key from a snapshot, sealed by the key-encryption key `kek_text`)
    /// sealed by this keyring's key-encryption key instead, so it opens here.
    pub fn reseal_from(
        &self,
        kek_text: &str,
        stored: &WrappedRootKey,
    ) -> Result<WrappedRootKey, KeyringError> {
        let unwrap_error = |reason: String| KeyringError::Unwrap {
            key_id: stored.meta.key_id.clone(),
            reason,
        };
        let other = parse_kek(kek_text).map_err(|reason| {
            unwrap_error(format!("the snapshot's key-encryption key: {reason}"))
        })?;
        if stored.kek_id != other.id {
            return Err(unwrap_error(format!(
                "it was sealed with key-encryption key {}, and the snapshot carries {}",
                stored.kek_id, other.id
            )));
        }
        let sealed = STANDARD
            .decode(&stored.wrapped_key)
            .map_err(|_| unwrap_error("the stored key is not base64".to_owned()))?;
        let key_id = stored.meta.key_id.as_bytes();
        let key = open(&other.cipher, key_id, &sealed).ok_or_else(|| {
            unwrap_error("the snapshot's key-encryption key does not open it".to_owned())
        })?;
        let resealed = seal(&self.kek.cipher, key_id, &key)?;
        Ok(WrappedRootKey {
            kek_id: self.kek.id.clone(),
            wrapped_key: STANDARD.encode(resealed),
            ..stored.clone()
        })
    }

    /// Drops every opened root key, so each is opened again from the store (after the store's
    /// contents were replaced by a snapshot's).
    pub fn forget_opened(&self) {
        self.lock_opened().clear();
    }

    /// Every root key's metadata.
    pub fn list(&self) -> Vec<RootKeyMeta> {
        self.state
            .root_keys()
            .iter()
            .map(|key| key.meta.clone())
            .collect()
    }

    /// The index of the last write to the keyring.
    pub fn index(&self) -> u64 {
        self.state.indexes().table(drover_state::Table::RootKeys)
    }

    /// Makes a new root key and makes it the active one; the previous one becomes inactive.
    pub async fn rotate(&self) -> Result<RootKeyMeta, KeyringError> {
        let mut key = [0u8; KEY_LEN];
        rand::thread_rng().fill_bytes(&mut key);
        let meta = RootKeyMeta {
            key_id: uuid::Uuid::new_v4().to_string(),
            algorithm: ENCRYPTION_ALGORITHM_AES256_GCM.to_owned(),
            create_time: self.clock.now_unix_ns(),
            state: ROOT_KEY_STATE_ACTIVE.to_owned(),
            ..RootKeyMeta::default()
        };
        let wrapped = seal(&self.kek.cipher, meta.key_id.as_bytes(), &key)?;
        let stored = self
            .state
            .insert_root_key(WrappedRootKey {
                version: WRAPPED_ROOT_KEY_VERSION,
                meta: meta.clone(),
                kek_id: self.kek.id.clone(),
                wrapped_key: STANDARD.encode(wrapped),
            })
            .await?;
        let opened = RootKey::from_bytes(stored.meta.clone(), &key)?;
        self.lock_opened()
            .insert(stored.meta.key_id.clone(), Arc::new(opened));
        Ok(stored.meta.clone())
    }

    /// Removes an inactive root key; what it signed no longer verifies. `in_use` says whether
    /// data sealed with it is still stored (refused unless `force`, as Nomad).
    pub async fn delete(
        &self,
        key_id: &str,
        in_use: bool,
        force: bool,
    ) -> Result<u64, KeyringError> {
        let Some(stored) = self.state.root_key(key_id) else {
            return Err(KeyringError::KeyNotFound {
                key_id: key_id.to_owned(),
            });
        };
        if stored.meta.is_active() {
            return Err(KeyringError::ActiveKey);
        }
        if in_use && !force {
            return Err(KeyringError::KeyInUse {
                key_id: key_id.to_owned(),
            });
        }
        let index = self.state.delete_root_key(key_id).await?;
        self.lock_opened().remove(key_id);
        Ok(index)
    }

    fn lock_opened(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Arc<RootKey>>> {
        // A poisoned lock only means a panic elsewhere while holding it; the map of opened
        // keys is still consistent (every insert is one call).
        self.opened
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The root key `key_id`, opened (from the cache, or unsealed from the store). A key the
    /// store no longer holds is not found, even if it was opened before.
    fn opened_key(&self, key_id: &str) -> Result<Arc<RootKey>, KeyringError> {
        let Some(stored) = self.state.root_key(key_id) else {
            self.lock_opened().remove(key_id);
            return Err(KeyringError::KeyNotFound {
                key_id: key_id.to_owned(),
            });
        };
        if let Some(opened) = self.lock_opened().get(key_id)
            && opened.meta.state == stored.meta.state
        {
            return Ok(Arc::clone(opened));
        }
        let unwrap_error = |reason: &str| KeyringError::Unwrap {
            key_id: key_id.to_owned(),
            reason: reason.to_owned(),
        };
        if stored.kek_id != self.kek.id {
            return Err(unwrap_error(&format!(
                "it was sealed with key-encryption key {}, and {KEK_FILE_NAME} holds {}",
                stored.kek_id, self.kek.id
            )));
        }
        let sealed = STANDARD
            .decode(&stored.wrapped_key)
            .map_err(|_| unwrap_error("the stored key is not base64"))?;
        let key = open(&self.kek.cipher, key_id.as_bytes(), &sealed)
            .ok_or_else(|| unwrap_error("the key-encryption key does not open it"))?;
        let key: [u8; KEY_LEN] = key
            .as_slice()
            .try_into()
            .map_err(|_| unwrap_error("the stored key is not 32 bytes"))?;
        let opened = Arc::new(RootKey::from_bytes(stored.meta.clone(), &key)?);
        self.lock_opened()
            .insert(key_id.to_owned(), Arc::clone(&opened));
        Ok(opened)
    }

    fn active_key(&self) -> Result<Arc<RootKey>, KeyringError> {
        let active = self
            .state
            .root_keys()
            .into_iter()
            .find(|key| key.meta.is_active())
            .ok_or(KeyringError::NoActiveKey)?;
        self.opened_key(&active.meta.key_id)
    }

    /// Seals `plaintext` with the active root key, bound to `aad`. Returns the key's ID and
    /// nonce ‖ ciphertext ‖ tag.
    pub fn encrypt(&self, aad: &[u8], plaintext: &[u8]) -> Result<(String, Vec<u8>), KeyringError> {
        let key = self.active_key()?;
        Ok((key.meta.key_id.clone(), seal(&key.cipher, aad, plaintext)?))
    }

    /// Opens what [`Keyring::encrypt`] sealed with root key `key_id`, bound to `aad`.
    pub fn decrypt(
        &self,
        key_id: &str,
        aad: &[u8],
        sealed: &[u8],
    ) -> Result<Vec<u8>, KeyringError> {
        let key = self.opened_key(key_id)?;
        open(&key.cipher, aad, sealed).ok_or_else(|| KeyringError::Decrypt {
            key_id: key_id.to_owned(),
        })
    }

    /// The public signing key of every root key, for `/.well-known/jwks.json`.
    pub fn public_keys(&self) -> Result<Vec<PublicSigningKey>, KeyringError> {
        self.state
            .root_keys()
            .iter()
            .map(|stored| {
                let key = self.opened_key(&stored.meta.key_id)?;
                Ok(PublicSigningKey {
                    key_id: key.meta.key_id.clone(),
                    public_key: key.signing.verifying_key().to_bytes(),
                    create_time: key.meta.create_time,
                })
            })
            .collect()
    }

    /// A 32-byte secret derived (HKDF-SHA-256, bound to `info`) from every root key, with the
    /// key's metadata: what is derived is as sealed as the root key, and rotates with it.
    /// The service mesh's CA keys are made so, one per root key.
    pub fn derived_secrets(
        &self,
        info: &[u8],
    ) -> Result<Vec<(RootKeyMeta, [u8; KEY_LEN])>, KeyringError> {
        self.state
            .root_keys()
            .iter()
            .map(|stored| {
                let key = self.opened_key(&stored.meta.key_id)?;
                let mut secret = [0u8; KEY_LEN];
                key.derive
                    .expand(info, &mut secret)
                    .map_err(|_| KeyringError::Unwrap {
                        key_id: key.meta.key_id.clone(),
                        reason: "cannot derive a secret".to_owned(),
                    })?;
                Ok((key.meta.clone(), secret))
            })
            .collect()
    }

    /// A compact JWS (`EdDSA`, `kid` = the active key's ID) over `claims`, with the
    /// keyring's issuer as `iss` when it names one.
    pub fn sign(&self, claims: &serde_json::Value) -> Result<String, KeyringError> {
        let key = self.active_key()?;
        let mut claims = claims.clone();
        if let (Some(issuer), Some(object)) = (&self.issuer, claims.as_object_mut()) {
            object.insert("iss".to_owned(), serde_json::json!(issuer));
        }
        let header = serde_json::json!({
            "alg": "EdDSA",
            "kid": key.meta.key_id,
            "typ": "JWT",
        });
        let signing_input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let signature = key.signing.sign(signing_input.as_bytes());
        Ok(format!(
            "{signing_input}.{}",
            URL_SAFE_NO_PAD.encode(signature.to_bytes())
        ))
    }

    /// Checks a token's signature against the key its `kid` names (a removed key verifies
    /// nothing) and its `nbf` and `exp` against the clock; answers its claims.
    pub fn verify(&self, token: &str) -> Result<VerifiedToken, KeyringError> {
        let invalid = |reason: &str| KeyringError::InvalidToken(reason.to_owned());
        let mut parts = token.trim().split('.');
        let (Some(header_b64), Some(claims_b64), Some(signature_b64), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(invalid("not a compact JWS"));
        };
        let decode_json = |part: &str| -> Result<serde_json::Value, KeyringError> {
            let bytes = URL_SAFE_NO_PAD
                .decode(part)
                .map_err(|_| invalid("a part is not base64url"))?;
            serde_json::from_slice(&bytes).map_err(|_| invalid("a part is not JSON"))
        };
        let header = decode_json(header_b64)?;
        if header.get("alg").and_then(|alg| alg.as_str()) != Some("EdDSA") {
            return Err(invalid("alg is not EdDSA"));
        }
        let key_id = header
            .get("kid")
            .and_then(|kid| kid.as_str())
            .ok_or_else(|| invalid("no kid"))?;
        let key = self.opened_key(key_id).map_err(|error| match error {
            KeyringError::KeyNotFound { .. } => invalid("signed by an unknown key"),
            other => other,
        })?;
        let signature = URL_SAFE_NO_PAD
            .decode(signature_b64)
            .ok()
            .and_then(|bytes| ed25519_dalek::Signature::from_slice(&bytes).ok())
            .ok_or_else(|| invalid("malformed signature"))?;
        let verifying: VerifyingKey = key.signing.verifying_key();
        let signing_input_len = header_b64.len() + 1 + claims_b64.len();
        let signing_input = token.trim().get(..signing_input_len).unwrap_or_default();
        verifying
            .verify(signing_input.as_bytes(), &signature)
            .map_err(|_| invalid("bad signature"))?;
        let claims = decode_json(claims_b64)?;
        let now_seconds = self.clock.now_unix_ns() / 1_000_000_000;
        if let Some(not_before) = claims.get("nbf").and_then(|nbf| nbf.as_i64())
            && now_seconds < not_before
        {
            return Err(invalid("not valid yet"));
        }
        if let Some(expiry) = claims.get("exp").and_then(|exp| exp.as_i64())
            && now_seconds >= expiry
        {
            return Err(invalid("expired"));
        }
        Ok(VerifiedToken {
            key_id: key_id.to_owned(),
            claims,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicI64, Ordering};

    use super::*;

    #[derive(Debug, Default)]
    struct ManualClock(AtomicI64);

    impl Clock for ManualClock {
        fn now_unix_ns(&self) -> i64 {
            self.0.load(Ordering::SeqCst)
        }
    }

    async fn open_keyring(dir: &Path, clock: Arc<ManualClock>) -> (StateStore, Keyring) {
        let state = StateStore::open(dir).await.unwrap();
        let keyring = Keyring::open(dir, state.clone(), clock).await.unwrap();
        (state, keyring)
    }

    #[tokio::test]
    async fn the_first_start_makes_a_0600_kek_and_an_active_key_kept_sealed_in_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::default());
        let (state, keyring) = open_keyring(dir.path(), clock.clone()).await;
        let mode = std::fs::metadata(dir.path().join(KEK_FILE_NAME))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let keys = keyring.list();
        assert_eq!(keys.len(), 1);
        assert_eq!(keys[0].state, "active");
        assert_eq!(keys[0].algorithm, "aes256-gcm");
        let (key_id, sealed) = keyring.encrypt(b"ns/path", b"hunter2").unwrap();
        assert_eq!(key_id, keys[0].key_id);
        assert_eq!(
            keyring.decrypt(&key_id, b"ns/path", &sealed).unwrap(),
            b"hunter2"
        );
        assert!(keyring.decrypt(&key_id, b"other", &sealed).is_err());
        state.close().await;
        drop((state, keyring));

        // A restart opens the same key with the same KEK.
        let (state, keyring) = open_keyring(dir.path(), clock.clone()).await;
        assert_eq!(keyring.list()[0].key_id, key_id);
        assert_eq!(
            keyring.decrypt(&key_id, b"ns/path", &sealed).unwrap(),
            b"hunter2"
        );
        state.close().await;
        drop((state, keyring));

        // The store alone does not open: another KEK is refused at start.
        std::fs::remove_file(dir.path().join(KEK_FILE_NAME)).unwrap();
        let state = StateStore::open(dir.path()).await.unwrap();
        let error = Keyring::open(dir.path(), state, clock).await.unwrap_err();
        assert!(error.to_string().contains("key-encryption key"), "{error}");
    }

    #[tokio::test]
    async fn a_kek_file_others_can_read_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::default());
        drop(open_keyring(dir.path(), clock.clone()).await);
        let path = dir.path().join(KEK_FILE_NAME);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(
            load_or_create_kek(dir.path())
                .unwrap_err()
                .to_string()
                .contains("0600")
        );
    }

    #[tokio::test]
    async fn a_keyring_with_an_issuer_names_it_in_every_token() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock(AtomicI64::new(1_000 * 1_000_000_000)));
        let (_state, keyring) = open_keyring(dir.path(), clock.clone()).await;
        let claims = serde_json::json!({"sub": "x", "iat": 1000, "nbf": 1000});
        let plain = keyring.verify(&keyring.sign(&claims).unwrap()).unwrap();
        assert!(plain.claims.get("iss").is_none(), "{:?}", plain.claims);
        let keyring = keyring.with_issuer(Some("https://nomad.example.com".to_owned()));
        let named = keyring.verify(&keyring.sign(&claims).unwrap()).unwrap();
        assert_eq!(named.claims["iss"], "https://nomad.example.com");
        assert_eq!(named.claims["sub"], "x");
    }

    #[tokio::test]
    async fn rotated_keys_verify_until_expiry_or_removal_and_new_tokens_use_the_new_key() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock(AtomicI64::new(1_000 * 1_000_000_000)));
        let (_state, keyring) = open_keyring(dir.path(), clock.clone()).await;
        let first_key = keyring.list()[0].key_id.clone();
        let claims = serde_json::json!({"sub": "x", "iat": 1000, "nbf": 1000, "exp": 1100});
        let old_token = keyring.sign(&claims).unwrap();
        let verified = keyring.verify(&old_token).unwrap();
        assert_eq!(verified.key_id, first_key);
        assert_eq!(verified.claims, claims);

        let second = keyring.rotate().await.unwrap();
        assert_ne!(second.key_id, first_key);
        assert_eq!(keyring.verify(&old_token).unwrap().key_id, first_key);
        let new_token = keyring.sign(&claims).unwrap();
        assert_eq!(keyring.verify(&new_token).unwrap().key_id, second.key_id);
        assert_eq!(keyring.public_keys().unwrap().len(), 2);

        // Tampering, expiry and removal.
        let mut tampered = new_token.clone();
        tampered.insert(new_token.find('.').unwrap() + 2, 'A');
        assert!(keyring.verify(&tampered).is_err());
        clock.0.store(1_100 * 1_000_000_000, Ordering::SeqCst);
        assert!(
            keyring
                .verify(&new_token)
                .unwrap_err()
                .to_string()
                .contains("expired")
        );
        clock.0.store(1_050 * 1_000_000_000, Ordering::SeqCst);
        assert!(keyring.delete(&second.key_id, false, false).await.is_err());
        assert!(matches!(
            keyring.delete(&first_key, true, false).await,
            Err(KeyringError::KeyInUse { .. })
        ));
        keyring.delete(&first_key, false, false).await.unwrap();
        assert!(keyring.verify(&old_token).is_err());
        assert!(keyring.verify(&new_token).is_ok());
        assert!(matches!(
            keyring.delete(&first_key, false, false).await,
            Err(KeyringError::KeyNotFound { .. })
        ));
    }
}
