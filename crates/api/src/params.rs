//! Query parameters as Nomad's HTTP agent reads them: Go's `strconv.ParseBool` for booleans,
//! `index`/`wait` for blocking queries (default and cap 5 minutes), `namespace`, `prefix` and
//! `pretty`.
//!
//! Not here: what a route does with them.

use std::time::Duration;

use crate::error::ApiError;

/// The longest a blocking query may wait, and the wait when none is given
/// (`MaxBlockingRPCQueryTime` in Nomad).
pub const MAX_BLOCKING_WAIT: Duration = Duration::from_secs(300);

/// Parses a boolean the way Go's `strconv.ParseBool` does.
pub fn parse_go_bool(value: &str) -> Option<bool> {
    match value {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// The decoded query string of one request, in order, repeated keys kept.
#[derive(Debug, Clone, Default)]
pub struct QueryParams {
    pairs: Vec<(String, String)>,
}

impl QueryParams {
    /// Decodes a raw query string (`a=1&b=%2F`); `+` is a space, as in HTML forms and Go.
    pub fn parse(raw_query: Option<&str>) -> Self {
        let mut pairs = Vec::new();
        for piece in raw_query.unwrap_or("").split('&') {
            if piece.is_empty() {
                continue;
            }
            let (key, value) = piece.split_once('=').unwrap_or((piece, ""));
            pairs.push((decode_component(key), decode_component(value)));
        }
        QueryParams { pairs }
    }

    /// The first value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(name, _)| name == key)
            .map(|(_, value)| value.as_str())
    }

    /// Every value of a repeated `key`.
    pub fn get_all<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.pairs
            .iter()
            .filter(move |(name, _)| name == key)
            .map(|(_, value)| value.as_str())
    }

    /// A non-empty value of `key`, or `None`.
    pub fn non_empty(&self, key: &str) -> Option<&str> {
        self.get(key).filter(|value| !value.is_empty())
    }

    /// A boolean parameter in Go's syntax; absent or empty gives `default`.
    pub fn bool(&self, key: &str, default: bool) -> Result<bool, ApiError> {
        match self.non_empty(key) {
            None => Ok(default),
            Some(value) => parse_go_bool(value).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "Failed to parse value of {key:?} ({value}) as a bool"
                ))
            }),
        }
    }

    /// An unsigned integer parameter; absent or empty gives `default`.
    pub fn u64(&self, key: &str, default: u64) -> Result<u64, ApiError> {
        match self.non_empty(key) {
            None => Ok(default),
            Some(value) => value.parse::<u64>().map_err(|_| {
                ApiError::bad_request(format!(
                    "Failed to parse value of {key:?} ({value}) as an integer"
                ))
            }),
        }
    }

    /// A signed integer parameter; absent or empty gives `default`.
    pub fn i64(&self, key: &str, default: i64) -> Result<i64, ApiError> {
        match self.non_empty(key) {
            None => Ok(default),
            Some(value) => value.parse::<i64>().map_err(|_| {
                ApiError::bad_request(format!(
                    "Failed to parse value of {key:?} ({value}) as an integer"
                ))
            }),
        }
    }

    /// The namespace to read from: `namespace`, else `default`. `*` means all namespaces.
    pub fn namespace(&self) -> &str {
        self.non_empty("namespace").unwrap_or("default")
    }

    /// The ID prefix to filter lists by (empty matches everything).
    pub fn prefix(&self) -> &str {
        self.get("prefix").unwrap_or("")
    }

    /// Whether JSON answers are indented. Nomad turns pretty printing on for `?pretty` with no
    /// value as well as for a true value.
    pub fn pretty(&self) -> bool {
        match self.get("pretty") {
            None => false,
            Some("") => true,
            Some(value) => parse_go_bool(value).unwrap_or(false),
        }
    }

    /// The blocking-query options of a read.
    pub fn blocking(&self) -> Result<BlockingOptions, ApiError> {
        let min_index = match self.non_empty("index") {
            None => 0,
            Some(value) => value
                .parse::<u64>()
                .map_err(|_| ApiError::bad_request("Invalid index"))?,
        };
        let wait = match self.non_empty("wait") {
            None => MAX_BLOCKING_WAIT,
            Some(value) => {
                let nanos = drover_jobspec::parse_go_duration(value)
                    .map_err(|_| ApiError::bad_request("Invalid wait time"))?;
                let requested = Duration::from_nanos(nanos);
                if requested.is_zero() || requested > MAX_BLOCKING_WAIT {
                    MAX_BLOCKING_WAIT
                } else {
                    requested
                }
            }
        };
        Ok(BlockingOptions { min_index, wait })
    }
}

/// `?index=&wait=` of a read: hold the answer until the watched data's index passes
/// `min_index`, or `wait` (plus jitter of up to wait/16) runs out. `min_index` 0 answers at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockingOptions {
    pub min_index: u64,
    pub wait: Duration,
}

impl BlockingOptions {
    /// The wait with Nomad's jitter added: a random extra of up to wait/16, so that many
    /// clients blocked at once do not all come back together.
    pub fn wait_with_jitter(&self, random_fraction: f64) -> Duration {
        let fraction = random_fraction.clamp(0.0, 1.0);
        self.wait + self.wait.div_f64(16.0).mul_f64(fraction)
    }
}

fn decode_component(raw: &str) -> String {
    let spaced = raw.replace('+', " ");
    percent_encoding::percent_decode_str(&spaced)
        .decode_utf8_lossy()
        .into_owned()
}

#[cfg(test)]
#[allow(clippy::expect_used, clippy::unwrap_used)] // a failed expectation is a failed test
mod tests {
    use super::*;

    #[test]
    fn go_booleans_accept_every_spelling_strconv_accepts() {
        for truthy in ["1", "t", "T", "TRUE", "true", "True"] {
            assert_eq!(parse_go_bool(truthy), Some(true), "{truthy}");
        }
        for falsy in ["0", "f", "F", "FALSE", "false", "False"] {
            assert_eq!(parse_go_bool(falsy), Some(false), "{falsy}");
        }
        for junk in ["yes", "tRuE", "2", " true", ""] {
            assert_eq!(parse_go_bool(junk), None, "{junk}");
        }
    }

    #[test]
    fn query_values_are_percent_decoded_and_plus_is_space() {
        let params = QueryParams::parse(Some("path=%2e%2e%2Fetc&prefix=a+b&flag&topic=A&topic=B"));
        assert_eq!(params.get("path"), Some("../etc"));
        assert_eq!(params.get("prefix"), Some("a b"));
        assert_eq!(params.get("flag"), Some(""));
        assert_eq!(params.get_all("topic").collect::<Vec<_>>(), vec!["A", "B"]);
    }

    #[test]
    fn wait_defaults_to_and_is_capped_at_five_minutes() {
        let none = QueryParams::parse(Some("index=3")).blocking();
        assert_eq!(
            none,
            Ok(BlockingOptions {
                min_index: 3,
                wait: MAX_BLOCKING_WAIT
            })
        );
        let huge = QueryParams::parse(Some("index=3&wait=1h")).blocking();
        assert_eq!(huge.map(|options| options.wait), Ok(MAX_BLOCKING_WAIT));
        let short = QueryParams::parse(Some("index=3&wait=150ms")).blocking();
        assert_eq!(
            short.map(|options| options.wait),
            Ok(Duration::from_millis(150))
        );
    }

    #[test]
    fn bad_wait_and_bad_index_are_named_as_nomad_names_them() {
        let bad_wait = QueryParams::parse(Some("index=1&wait=soon")).blocking();
        assert_eq!(bad_wait, Err(ApiError::bad_request("Invalid wait time")));
        let bad_index = QueryParams::parse(Some("index=-4")).blocking();
        assert_eq!(bad_index, Err(ApiError::bad_request("Invalid index")));
    }

    #[test]
    fn jitter_adds_at_most_a_sixteenth() {
        let options = BlockingOptions {
            min_index: 1,
            wait: Duration::from_secs(160),
        };
        assert_eq!(options.wait_with_jitter(0.0), Duration::from_secs(160));
        assert_eq!(options.wait_with_jitter(1.0), Duration::from_secs(170));
        assert_eq!(options.wait_with_jitter(7.0), Duration::from_secs(170));
    }
}
