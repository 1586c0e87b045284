//! The keyring on the wire and at rest: a root key's metadata as Nomad answers it
//! (`/v1/operator/keyring/keys`, `…/rotate`), and the record the state store keeps for each
//! root key (its metadata and its key material wrapped by the server's key-encryption key).
//!
//! Not here: any cryptography (the server's `keyring`), where the keys are stored (the state
//! store).

use crate::lenient::wire_struct;

/// `Algorithm` of a root key: AES-256 in GCM mode, Nomad's only algorithm.
pub const ENCRYPTION_ALGORITHM_AES256_GCM: &str = "aes256-gcm";

/// `State` of a root key, as Nomad spells them.
pub const ROOT_KEY_STATE_ACTIVE: &str = "active";
pub const ROOT_KEY_STATE_INACTIVE: &str = "inactive";
pub const ROOT_KEY_STATE_REKEYING: &str = "rekeying";
pub const ROOT_KEY_STATE_PREPUBLISHED: &str = "prepublished";

/// The version of [`WrappedRootKey`] records written now.
pub const WRAPPED_ROOT_KEY_VERSION: u32 = 1;

wire_struct! {
    /// A root key's metadata (Nomad's `RootKeyMeta`); the key itself is never on the wire.
    pub struct RootKeyMeta {
        #[serde(rename = "KeyID")]
        pub key_id: String,
        pub algorithm: String,
        /// Unix nanoseconds.
        pub create_time: i64,
        pub create_index: u64,
        pub modify_index: u64,
        pub state: String,
        /// Unix nanoseconds; 0 unless the key was prepublished.
        pub publish_time: i64,
    }
}

impl RootKeyMeta {
    /// Whether this key encrypts new data and signs new identities.
    pub fn is_active(&self) -> bool {
        self.state == ROOT_KEY_STATE_ACTIVE
    }
}

wire_struct! {
    /// The stored record of one root key: its metadata and its 32 key bytes sealed with the
    /// server's key-encryption key (base64 of nonce ‖ ciphertext ‖ tag), never the key in the
    /// clear.
    pub struct WrappedRootKey {
        /// The record's shape; see [`WRAPPED_ROOT_KEY_VERSION`].
        pub version: u32,
        pub meta: RootKeyMeta,
        /// Which key-encryption key sealed it (the file's key ID).
        #[serde(rename = "KEKID")]
        pub kek_id: String,
        pub wrapped_key: String,
    }
}

wire_struct! {
    /// `PUT /v1/operator/keyring/rotate`'s answer (Nomad's `KeyringRotateRootKeyResponse`).
    pub struct KeyringRotateResponse {
        pub key: Option<RootKeyMeta>,
        pub index: u64,
    }
}

wire_struct! {
    /// `DELETE /v1/operator/keyring/key/<id>`'s answer (Nomad's `KeyringDeleteRootKeyResponse`).
    pub struct KeyringDeleteResponse {
        pub index: u64,
    }
}
