//! Go `[]byte` on the wire: base64 text (standard alphabet, padded), `null` when empty. Used for
//! dispatch payloads. Not here: any interpretation of the bytes.

use base64::Engine as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A Go `[]byte`: base64 (standard alphabet, padded) on the wire, `null` when empty.
#[derive(Debug, Clone, PartialEq, Eq, Default, Hash)]
pub struct Bytes(pub Vec<u8>);

impl Serialize for Bytes {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if self.0.is_empty() {
            serializer.serialize_none()
        } else {
            serializer.serialize_str(&base64::engine::general_purpose::STANDARD.encode(&self.0))
        }
    }
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match Option::<String>::deserialize(deserializer)? {
            None => Ok(Bytes::default()),
            Some(text) => base64::engine::general_purpose::STANDARD
                .decode(text.as_bytes())
                .map(Bytes)
                .map_err(serde::de::Error::custom),
        }
    }
}

impl Bytes {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl From<Vec<u8>> for Bytes {
    fn from(bytes: Vec<u8>) -> Self {
        Bytes(bytes)
    }
}
