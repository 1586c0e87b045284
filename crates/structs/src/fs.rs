//! Shapes of the alloc filesystem endpoints (`/v1/client/fs/…`): file info and the stream frames
//! of `stream` and `logs` (Nomad's `client/lib/streamframer`).
//!
//! Not here: reading files or framing a stream in time (the API and client crates do that).

use crate::bytes::Bytes;
use crate::lenient::wire_struct;
use crate::time::Timestamp;

/// `FileEvent` values of a stream frame.
pub const FILE_EVENT_DELETED: &str = "file deleted";
pub const FILE_EVENT_TRUNCATED: &str = "file truncated";

wire_struct! {
    /// One entry of `ls`, or the answer of `stat`.
    pub struct AllocFileInfo {
        pub name: String,
        pub is_dir: bool,
        pub size: i64,
        /// Like `-rw-r--r--` or `drwxr-xr-x` (Go's `FileMode.String()`).
        pub file_mode: String,
        pub mod_time: Timestamp,
        #[serde(skip_serializing_if = "String::is_empty")]
        pub content_type: String,
    }
}

wire_struct! {
    /// One frame of a file or log stream. Every field is left out when empty, so a heartbeat
    /// encodes as `{}`. `Offset` is the position in `File` just after `Data`.
    pub struct StreamFrame {
        #[serde(skip_serializing_if = "is_zero")]
        pub offset: i64,
        #[serde(skip_serializing_if = "Bytes::is_empty")]
        pub data: Bytes,
        #[serde(skip_serializing_if = "String::is_empty")]
        pub file: String,
        #[serde(skip_serializing_if = "String::is_empty")]
        pub file_event: String,
    }
}

fn is_zero(value: &i64) -> bool {
    *value == 0
}

impl StreamFrame {
    /// The empty frame sent to keep an idle stream alive.
    pub fn heartbeat() -> Self {
        StreamFrame::default()
    }

    pub fn is_heartbeat(&self) -> bool {
        *self == StreamFrame::default()
    }
}

/// Go's `os.FileMode.String()` for the permission bits of a Unix mode and whether it is a
/// directory or a symlink: `-rw-r--r--`, `drwxr-xr-x`, `Lrwxrwxrwx`.
pub fn go_file_mode_string(permission_bits: u32, is_dir: bool, is_symlink: bool) -> String {
    let mut text = String::with_capacity(10);
    text.push(if is_dir {
        'd'
    } else if is_symlink {
        'L'
    } else {
        '-'
    });
    for (bit, letter) in [
        (0o400, 'r'),
        (0o200, 'w'),
        (0o100, 'x'),
        (0o040, 'r'),
        (0o020, 'w'),
        (0o010, 'x'),
        (0o004, 'r'),
        (0o002, 'w'),
        (0o001, 'x'),
    ] {
        text.push(if permission_bits & bit != 0 {
            letter
        } else {
            '-'
        });
    }
    text
}
