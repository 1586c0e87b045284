//! Nomad's `JobSubmission` (1.6+): the jobspec a job version was registered from, as its
//! submitter sent it — the source text, its format (`hcl2` or `json`), the `-var` flags and
//! the variable file contents — kept by the server per (namespace, job, version) and read back
//! at `GET /v1/job/<id>/submission?version=N` (`nomad job inspect -hcl`).
//!
//! `VariableFlags` values are kept query-escaped, as Nomad's agent stores them (its API
//! canonicalization escapes them so a multi-line value survives the web UI's round trip) and
//! unescaped on the way out; [`query_escape`] and [`query_unescape`] are Go's
//! `url.QueryEscape` and `url.QueryUnescape`.
//!
//! Not here: where submissions are stored or pruned (the state store), the size limit (the
//! server).

use std::collections::BTreeMap;

use crate::lenient::wire_struct;

/// `Format` of a submission read from an HCL2 jobspec.
pub const JOB_SUBMISSION_FORMAT_HCL2: &str = "hcl2";
/// `Format` of a submission read from a JSON jobspec.
pub const JOB_SUBMISSION_FORMAT_JSON: &str = "json";

wire_struct! {
    /// Nomad's `JobSubmission`. A register request carries the first four fields; the server
    /// sets the other four when it stores the submission.
    pub struct JobSubmission {
        /// The jobspec as submitted.
        pub source: String,
        /// `hcl2` or `json` (Nomad also knows `hcl1`, which it no longer parses).
        pub format: String,
        /// The `-var` flags (and `NOMAD_VAR_*` values), name → value.
        pub variable_flags: Option<BTreeMap<String, String>>,
        /// The contents of the variable files (or the web UI's variables), as one text.
        pub variables: String,
        pub namespace: String,
        #[serde(rename = "JobID")]
        pub job_id: String,
        pub version: u64,
        /// The `JobModifyIndex` of the job version this submission belongs to.
        pub job_modify_index: u64,
    }
}

impl JobSubmission {
    /// Nomad's API canonicalization of a submission, as the agent applies it before the
    /// server sees it: no flags is `null`, and every flag value is query-escaped.
    pub fn canonicalize(&mut self) {
        match &mut self.variable_flags {
            Some(flags) if flags.is_empty() => self.variable_flags = None,
            Some(flags) => {
                for value in flags.values_mut() {
                    *value = query_escape(value);
                }
            }
            None => {}
        }
    }

    /// The submission as a read answers it: flag values unescaped. An escape that does not
    /// decode is an error naming it, as Go's `url.QueryUnescape`.
    pub fn with_flags_unescaped(mut self) -> Result<Self, String> {
        if let Some(flags) = &mut self.variable_flags {
            for value in flags.values_mut() {
                *value = query_unescape(value)?;
            }
        }
        Ok(self)
    }

    /// What Nomad's submission controller counts against `job_max_source_size`: the source,
    /// the variables and every flag's name and value.
    pub fn size(&self) -> usize {
        let flags: usize = self
            .variable_flags
            .iter()
            .flatten()
            .map(|(name, value)| name.len() + value.len())
            .sum();
        self.source.len() + self.variables.len() + flags
    }
}

/// Go's `url.QueryEscape`: letters, digits and `-_.~` stay, a space becomes `+`, every other
/// byte `%XX` (upper-case hex).
pub fn query_escape(text: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut escaped = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                escaped.push(char::from(byte));
            }
            b' ' => escaped.push('+'),
            other => {
                escaped.push('%');
                escaped.push(char::from(HEX[usize::from(other >> 4)]));
                escaped.push(char::from(HEX[usize::from(other & 0x0f)]));
            }
        }
    }
    escaped
}

/// Go's `url.QueryUnescape`: `+` is a space, `%XX` a byte; a `%` not followed by two hex
/// digits is Go's error (`invalid URL escape "%zz"`), as is a result that is not UTF-8.
pub fn query_unescape(text: &str) -> Result<String, String> {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut position = 0;
    while position < bytes.len() {
        match bytes[position] {
            b'%' => {
                let hex = |offset: usize| {
                    bytes
                        .get(position + offset)
                        .and_then(|digit| char::from(*digit).to_digit(16))
                };
                match (hex(1), hex(2)) {
                    (Some(high), Some(low)) => {
                        // Two hex digits make at most 0xff.
                        decoded.push(u8::try_from(high * 16 + low).unwrap_or(u8::MAX));
                        position += 3;
                    }
                    _ => {
                        let end = (position + 3).min(bytes.len());
                        let escape = String::from_utf8_lossy(&bytes[position..end]);
                        return Err(format!("invalid URL escape {escape:?}"));
                    }
                }
            }
            b'+' => {
                decoded.push(b' ');
                position += 1;
            }
            other => {
                decoded.push(other);
                position += 1;
            }
        }
    }
    String::from_utf8(decoded).map_err(|_| format!("invalid URL escape in {text:?}"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed expectation is a failed test
mod tests {
    use super::*;

    #[test]
    fn escaping_is_gos_query_escape_and_round_trips() {
        assert_eq!(query_escape("a b\nc=d&e/~_.-"), "a+b%0Ac%3Dd%26e%2F~_.-");
        assert_eq!(query_escape("héllo"), "h%C3%A9llo");
        for text in ["", "plain", "two\nlines", "100% + more", "ünïcode ✓"] {
            assert_eq!(query_unescape(&query_escape(text)).unwrap(), text);
        }
        assert_eq!(query_unescape("a+b%41").unwrap(), "a bA");
        assert_eq!(
            query_unescape("bad%zzescape").unwrap_err(),
            "invalid URL escape \"%zz\""
        );
        assert_eq!(
            query_unescape("tail%4").unwrap_err(),
            "invalid URL escape \"%4\""
        );
    }

    #[test]
    fn canonicalize_drops_empty_flags_and_escapes_values() {
        let mut empty = JobSubmission {
            variable_flags: Some(BTreeMap::new()),
            ..JobSubmission::default()
        };
        empty.canonicalize();
        assert_eq!(empty.variable_flags, None);

        let mut submission = JobSubmission {
            source: "job \"x\" {}".into(),
            variable_flags: Some(BTreeMap::from([("motd".into(), "hi\nthere".into())])),
            variables: "a = 1\n".into(),
            ..JobSubmission::default()
        };
        assert_eq!(
            submission.size(),
            "job \"x\" {}".len() + "a = 1\n".len() + 4 + 8
        );
        submission.canonicalize();
        assert_eq!(
            submission.variable_flags.as_ref().unwrap()["motd"],
            "hi%0Athere"
        );
        let read = submission.with_flags_unescaped().unwrap();
        assert_eq!(read.variable_flags.unwrap()["motd"], "hi\nthere");
    }

    #[test]
    fn the_wire_shape_is_nomads() {
        let submission = JobSubmission {
            source: "s".into(),
            format: JOB_SUBMISSION_FORMAT_HCL2.into(),
            namespace: "default".into(),
            job_id: "web".into(),
            version: 2,
            job_modify_index: 17,
            ..JobSubmission::default()
        };
        assert_eq!(
            serde_json::to_value(&submission).unwrap(),
            serde_json::json!({
                "Source": "s", "Format": "hcl2", "VariableFlags": null, "Variables": "",
                "Namespace": "default", "JobID": "web", "Version": 2, "JobModifyIndex": 17
            })
        );
    }
}
