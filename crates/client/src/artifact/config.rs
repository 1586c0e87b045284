//! The client's `artifact { … }` settings as the artifact fetcher reads them, with Nomad's
//! defaults, and the byte-size notation (`"100GB"`, `"1MiB"`) those settings are written in.
//!
//! **Not** the agent config file: the agent decodes its HCL and hands the validated values here.

use std::time::Duration;

/// Nomad's default `http_read_timeout`, `git_timeout` (and the timeouts of the getters drover
/// lacks).
pub const DEFAULT_GETTER_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// Nomad's default `http_max_size` and `decompression_size_limit`: 100 GB.
pub const DEFAULT_SIZE_LIMIT: u64 = 100_000_000_000;

/// Nomad's default `decompression_file_count_limit`.
pub const DEFAULT_FILE_COUNT_LIMIT: u64 = 4096;

/// Limits that apply to every artifact the client fetches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactConfig {
    /// Longest wait for the next bytes of an HTTP response (`http_read_timeout`).
    pub http_read_timeout: Duration,
    /// Largest HTTP download (`http_max_size`); zero is no limit.
    pub http_max_size: u64,
    /// Longest a `git` clone and checkout may take (`git_timeout`).
    pub git_timeout: Duration,
    /// Most bytes an archive may unpack to (`decompression_size_limit`); zero is no limit.
    pub decompression_size_limit: u64,
    /// Most entries an archive may unpack (`decompression_file_count_limit`); zero is no limit.
    pub decompression_file_count_limit: u64,
    /// A cache entry unused for longer is removed (`cache_max_age`); zero keeps entries.
    pub cache_max_age: Duration,
    /// While the cache holds more bytes, its least recently used entries are removed
    /// (`cache_max_size`); zero is no cap.
    pub cache_max_size: u64,
}

/// The default `cache_max_age`: three days.
pub const DEFAULT_CACHE_MAX_AGE: Duration = Duration::from_secs(72 * 3600);

impl Default for ArtifactConfig {
    fn default() -> Self {
        ArtifactConfig {
            http_read_timeout: DEFAULT_GETTER_TIMEOUT,
            http_max_size: DEFAULT_SIZE_LIMIT,
            git_timeout: DEFAULT_GETTER_TIMEOUT,
            decompression_size_limit: DEFAULT_SIZE_LIMIT,
            decompression_file_count_limit: DEFAULT_FILE_COUNT_LIMIT,
            cache_max_age: DEFAULT_CACHE_MAX_AGE,
            cache_max_size: 0,
        }
    }
}

/// Parses a byte size as Nomad's artifact settings take it: a number, optionally with a
/// decimal part, followed by an optional unit — `B`, SI `KB MB GB TB PB` (powers of 1000, also
/// written `K M G T P`) or IEC `KiB MiB GiB TiB PiB` (powers of 1024), case-insensitive,
/// with or without a space before it.
pub fn parse_byte_size(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    let split = trimmed
        .find(|character: char| !(character.is_ascii_digit() || character == '.'))
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(split);
    let number: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a size such as \"100MB\" or \"1GiB\""))?;
    let multiplier: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1_000,
        "m" | "mb" => 1_000_000,
        "g" | "gb" => 1_000_000_000,
        "t" | "tb" => 1_000_000_000_000,
        "p" | "pb" => 1_000_000_000_000_000,
        "ki" | "kib" => 1 << 10,
        "mi" | "mib" => 1 << 20,
        "gi" | "gib" => 1 << 30,
        "ti" | "tib" => 1 << 40,
        "pi" | "pib" => 1 << 50,
        other => {
            return Err(format!(
                "{other:?} is not a size unit (B, KB, MB, GB, KiB, MiB, …)"
            ));
        }
    };
    let bytes = number * multiplier as f64;
    if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 {
        return Err(format!("{text:?} is out of range"));
    }
    Ok(bytes as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_sizes_in_si_and_iec_units() {
        assert_eq!(parse_byte_size("100GB"), Ok(100_000_000_000));
        assert_eq!(parse_byte_size("1MiB"), Ok(1 << 20));
        assert_eq!(parse_byte_size("1.5 kb"), Ok(1500));
        assert_eq!(parse_byte_size("42"), Ok(42));
        assert!(parse_byte_size("lots").is_err());
        assert!(parse_byte_size("5 parsecs").is_err());
    }
}
