//! Validated identifiers that are safe to build file-system paths from: allocation IDs (UUIDs)
//! and task names. Anything that joins an ID or a name onto a directory must go through these.
//!
//! Not here: generating IDs (callers pass them in; this crate has no randomness).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Longest task name accepted (a path component must fit in 255 bytes with the log suffixes).
pub const MAX_TASK_NAME_BYTES: usize = 200;

/// Why an identifier was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    #[error(
        "invalid allocation id {0:?}: expected a UUID like 8e3a1f0c-0b1d-4c1e-9f0a-1b2c3d4e5f60"
    )]
    InvalidAllocId(String),
    #[error("invalid task name {name:?}: {reason}")]
    InvalidTaskName { name: String, reason: &'static str },
}

/// Whether `text` is a UUID in the 8-4-4-4-12 hex form (either case).
pub fn is_uuid(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() == 36
        && bytes
            .iter()
            .enumerate()
            .all(|(position, byte)| match position {
                8 | 13 | 18 | 23 => *byte == b'-',
                _ => byte.is_ascii_hexdigit(),
            })
}

/// An allocation ID: a UUID, so it never contains `/`, `..` or anything a path could misuse.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AllocId(String);

impl AllocId {
    pub fn parse(text: &str) -> Result<Self, IdError> {
        if is_uuid(text) {
            Ok(AllocId(text.to_string()))
        } else {
            Err(IdError::InvalidAllocId(text.to_string()))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The first eight characters, as the CLI shows IDs.
    pub fn short(&self) -> &str {
        // A parsed AllocId is 36 ASCII characters, so byte 8 is in range and a char boundary.
        &self.0[..8]
    }
}

/// A task name that is a single, harmless path component: not empty, not `.` or `..`, no `/`, no
/// NUL or other control characters, at most [`MAX_TASK_NAME_BYTES`] bytes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TaskName(String);

impl TaskName {
    pub fn parse(text: &str) -> Result<Self, IdError> {
        let refuse = |reason| {
            Err(IdError::InvalidTaskName {
                name: text.to_string(),
                reason,
            })
        };
        if text.is_empty() {
            return refuse("must not be empty");
        }
        if text == "." || text == ".." {
            return refuse("must not be . or ..");
        }
        if text.contains('/') || text.contains('\\') {
            return refuse("must not contain a slash");
        }
        if text.chars().any(char::is_control) {
            return refuse("must not contain control characters");
        }
        if text.len() > MAX_TASK_NAME_BYTES {
            return refuse("is too long");
        }
        Ok(TaskName(text.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

macro_rules! string_identifier_impls {
    ($identifier:ident) => {
        impl fmt::Display for $identifier {
            fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                formatter.write_str(&self.0)
            }
        }
        impl AsRef<str> for $identifier {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }
        impl std::str::FromStr for $identifier {
            type Err = IdError;
            fn from_str(text: &str) -> Result<Self, IdError> {
                $identifier::parse(text)
            }
        }
        impl Serialize for $identifier {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(&self.0)
            }
        }
        impl<'de> Deserialize<'de> for $identifier {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let text = String::deserialize(deserializer)?;
                $identifier::parse(&text).map_err(serde::de::Error::custom)
            }
        }
    };
}

string_identifier_impls!(AllocId);
string_identifier_impls!(TaskName);
