//! Time on the wire: Go's `time.Duration` (integer nanoseconds) and `time.Time` (an RFC 3339
//! string with up to nine fractional digits, whose zero value is `"0001-01-01T00:00:00Z"`).
//!
//! [`Timestamp`] carries Unix nanoseconds and formats and parses RFC 3339 itself (no calendar
//! crate). [`DurationNs`] carries signed nanoseconds, prints like Go's `Duration.String()` ("15s",
//! "1m30s", "500ms") and parses Go duration syntax ("5m", "1h30m", "250ms").
//!
//! Not here: reading the clock. Callers pass times in.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Errors from parsing times and durations.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimeParseError {
    #[error("invalid timestamp {0:?}: expected RFC 3339, like 2006-01-02T15:04:05.999999999Z")]
    InvalidTimestamp(String),
    #[error("timestamp {0:?} is outside the range of nanosecond Unix time (1677 to 2262)")]
    TimestampOutOfRange(String),
    #[error("invalid duration {0:?}: expected Go syntax, like 300ms, 1.5h or 2h45m")]
    InvalidDuration(String),
}

const NANOS_PER_SECOND: i64 = 1_000_000_000;
const SECONDS_PER_DAY: i64 = 86_400;

/// A point in time as Unix nanoseconds, encoded as RFC 3339 with nanoseconds (Go's
/// `time.RFC3339Nano`) in UTC. The Go zero time (`0001-01-01T00:00:00Z`) is [`Timestamp::ZERO`],
/// which is also the default; it is not representable as Unix nanoseconds, so it is a sentinel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

impl Timestamp {
    /// Go's zero `time.Time`, printed as `0001-01-01T00:00:00Z`.
    pub const ZERO: Timestamp = Timestamp(i64::MIN);

    /// A timestamp from Unix nanoseconds. `i64::MIN` is the zero time.
    pub const fn from_unix_nanos(unix_nanos: i64) -> Self {
        Timestamp(unix_nanos)
    }

    /// Unix nanoseconds, or `None` for the zero time.
    pub const fn unix_nanos(self) -> Option<i64> {
        if self.is_zero() { None } else { Some(self.0) }
    }

    /// Whether this is Go's zero time (unset).
    pub const fn is_zero(self) -> bool {
        self.0 == i64::MIN
    }

    /// Formats as Go's `time.RFC3339Nano` in UTC: fractional seconds with trailing zeros trimmed,
    /// and no fraction at all when it is zero.
    pub fn to_rfc3339_nanos(self) -> String {
        if self.is_zero() {
            return "0001-01-01T00:00:00Z".to_string();
        }
        let seconds = self.0.div_euclid(NANOS_PER_SECOND);
        let nanos = self.0.rem_euclid(NANOS_PER_SECOND);
        let days = seconds.div_euclid(SECONDS_PER_DAY);
        let second_of_day = seconds.rem_euclid(SECONDS_PER_DAY);
        let (year, month, day) = civil_from_days(days);
        let mut text = format!(
            "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}",
            second_of_day / 3600,
            (second_of_day / 60) % 60,
            second_of_day % 60
        );
        if nanos != 0 {
            let fraction = format!("{nanos:09}");
            text.push('.');
            text.push_str(fraction.trim_end_matches('0'));
        }
        text.push('Z');
        text
    }

    /// Parses RFC 3339 (`Z` or a `±hh:mm` offset, any number of fractional digits up to nine).
    /// `0001-01-01T00:00:00Z` (at any offset) gives [`Timestamp::ZERO`].
    pub fn parse_rfc3339(text: &str) -> Result<Self, TimeParseError> {
        let invalid = || TimeParseError::InvalidTimestamp(text.to_string());
        let bytes = text.as_bytes();
        if bytes.len() < 20
            || bytes[4] != b'-'
            || bytes[7] != b'-'
            || !matches!(bytes[10], b'T' | b't' | b' ')
            || bytes[13] != b':'
            || bytes[16] != b':'
        {
            return Err(invalid());
        }
        let number = |range: std::ops::Range<usize>| -> Result<i64, TimeParseError> {
            let digits = text.get(range).ok_or_else(invalid)?;
            if !digits.bytes().all(|byte| byte.is_ascii_digit()) {
                return Err(invalid());
            }
            digits.parse::<i64>().map_err(|_| invalid())
        };
        let year = number(0..4)?;
        let month = number(5..7)?;
        let day = number(8..10)?;
        let hour = number(11..13)?;
        let minute = number(14..16)?;
        let second = number(17..19)?;
        if !(1..=12).contains(&month)
            || day < 1
            || day > days_in_month(year, month)
            || hour > 23
            || minute > 59
            || second > 60
        {
            return Err(invalid());
        }
        let mut position = 19;
        let mut nanos: i64 = 0;
        if bytes.get(position) == Some(&b'.') {
            position += 1;
            let start = position;
            while position < bytes.len() && bytes[position].is_ascii_digit() {
                position += 1;
            }
            let digits = &text[start..position];
            if digits.is_empty() || digits.len() > 9 {
                return Err(invalid());
            }
            let padded = format!("{digits:0<9}");
            nanos = padded.parse::<i64>().map_err(|_| invalid())?;
        }
        let offset_seconds = match &text[position..] {
            "Z" | "z" => 0,
            zone if zone.len() == 6
                && matches!(zone.as_bytes()[0], b'+' | b'-')
                && zone.as_bytes()[3] == b':' =>
            {
                let hours = number(position + 1..position + 3)?;
                let minutes = number(position + 4..position + 6)?;
                let magnitude = hours * 3600 + minutes * 60;
                if zone.starts_with('-') {
                    -magnitude
                } else {
                    magnitude
                }
            }
            _ => return Err(invalid()),
        };
        let local_seconds = days_from_civil(year, month, day) * SECONDS_PER_DAY
            + hour * 3600
            + minute * 60
            + second;
        let utc_seconds = local_seconds - offset_seconds;
        // The Go zero time is year 1, 00:00:00 UTC.
        if utc_seconds == days_from_civil(1, 1, 1) * SECONDS_PER_DAY && nanos == 0 {
            return Ok(Timestamp::ZERO);
        }
        let unix_nanos = utc_seconds
            .checked_mul(NANOS_PER_SECOND)
            .and_then(|value| value.checked_add(nanos))
            .filter(|value| *value != i64::MIN)
            .ok_or_else(|| TimeParseError::TimestampOutOfRange(text.to_string()))?;
        Ok(Timestamp(unix_nanos))
    }
}

impl Default for Timestamp {
    fn default() -> Self {
        Timestamp::ZERO
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.to_rfc3339_nanos())
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_rfc3339_nanos())
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    /// Accepts an RFC 3339 string, `null` or `""` (the zero time), or an integer of Unix
    /// nanoseconds (lenient; Go would refuse it).
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum TimestampInput {
            Text(String),
            UnixNanos(i64),
        }
        match Option::<TimestampInput>::deserialize(deserializer)? {
            None => Ok(Timestamp::ZERO),
            Some(TimestampInput::Text(text)) if text.is_empty() => Ok(Timestamp::ZERO),
            Some(TimestampInput::Text(text)) => {
                Timestamp::parse_rfc3339(&text).map_err(serde::de::Error::custom)
            }
            Some(TimestampInput::UnixNanos(unix_nanos)) => Ok(Timestamp(unix_nanos)),
        }
    }
}

fn is_leap_year(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if is_leap_year(year) => 29,
        _ => 28,
    }
}

/// Days since 1970-01-01 for a proleptic Gregorian date (Howard Hinnant's algorithm).
pub fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let shifted_month = (month + 9) % 12;
    let day_of_year = (153 * shifted_month + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The proleptic Gregorian date of a day count since 1970-01-01.
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let shifted = days + 719_468;
    let era = shifted.div_euclid(146_097);
    let day_of_era = shifted - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    };
    let year = year_of_era + era * 400 + if month <= 2 { 1 } else { 0 };
    (year, month, day)
}

/// A Go `time.Duration`: signed nanoseconds, encoded as a JSON integer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct DurationNs(pub i64);

impl DurationNs {
    pub const ZERO: DurationNs = DurationNs(0);

    pub const fn from_nanos(nanos: i64) -> Self {
        DurationNs(nanos)
    }
    pub const fn from_millis(millis: i64) -> Self {
        DurationNs(millis.saturating_mul(1_000_000))
    }
    pub const fn from_secs(seconds: i64) -> Self {
        DurationNs(seconds.saturating_mul(NANOS_PER_SECOND))
    }
    pub const fn from_mins(minutes: i64) -> Self {
        DurationNs::from_secs(minutes.saturating_mul(60))
    }
    pub const fn from_hours(hours: i64) -> Self {
        DurationNs::from_secs(hours.saturating_mul(3600))
    }
    pub const fn as_nanos(self) -> i64 {
        self.0
    }
    pub const fn is_zero(self) -> bool {
        self.0 == 0
    }

    /// As a `std::time::Duration`; negative durations become zero.
    pub fn to_std(self) -> std::time::Duration {
        std::time::Duration::from_nanos(u64::try_from(self.0).unwrap_or(0))
    }

    /// From a `std::time::Duration`, saturating at `i64::MAX` nanoseconds (about 292 years).
    pub fn from_std(duration: std::time::Duration) -> Self {
        DurationNs(i64::try_from(duration.as_nanos()).unwrap_or(i64::MAX))
    }

    /// Parses Go's duration syntax: an optional sign, then one or more decimal numbers each with a
    /// unit (`ns`, `us`, `µs`, `ms`, `s`, `m`, `h`), like `300ms`, `-1.5h` or `2h45m`. A bare `0`
    /// is allowed.
    pub fn parse_go(text: &str) -> Result<Self, TimeParseError> {
        crate::go_duration::parse_signed_go_duration(text)
            .map(DurationNs)
            .map_err(|_| TimeParseError::InvalidDuration(text.to_string()))
    }

    /// Go's `Duration.String()`: `0s`, `1.5µs`, `500ms`, `15s`, `1m30s`, `72h3m0.5s`.
    pub fn to_go_string(self) -> String {
        let negative = self.0 < 0;
        let magnitude = self.0.unsigned_abs();
        let mut text = String::new();
        if magnitude == 0 {
            return "0s".to_string();
        }
        if magnitude < 1_000_000_000 {
            let (unit, unit_nanos) = if magnitude < 1_000 {
                ("ns", 1)
            } else if magnitude < 1_000_000 {
                ("µs", 1_000)
            } else {
                ("ms", 1_000_000)
            };
            text.push_str(&format_fraction(magnitude, unit_nanos));
            text.push_str(unit);
        } else {
            let hours = magnitude / 3_600_000_000_000;
            let minutes = (magnitude / 60_000_000_000) % 60;
            let second_nanos = magnitude % 60_000_000_000;
            if hours > 0 {
                text.push_str(&format!("{hours}h"));
            }
            if hours > 0 || minutes > 0 {
                text.push_str(&format!("{minutes}m"));
            }
            text.push_str(&format_fraction(second_nanos, 1_000_000_000));
            text.push('s');
        }
        if negative { format!("-{text}") } else { text }
    }
}

/// `value / unit` with the remainder as trimmed decimal digits ("1.5", "15", "0.25").
fn format_fraction(value: u64, unit: u64) -> String {
    let whole = value / unit;
    let remainder = value % unit;
    if remainder == 0 {
        return whole.to_string();
    }
    let width = unit.to_string().len() - 1;
    let fraction = format!("{remainder:0width$}");
    format!("{whole}.{}", fraction.trim_end_matches('0'))
}

impl fmt::Display for DurationNs {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.to_go_string())
    }
}

impl From<std::time::Duration> for DurationNs {
    fn from(duration: std::time::Duration) -> Self {
        DurationNs::from_std(duration)
    }
}

impl Serialize for DurationNs {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_i64(self.0)
    }
}

impl<'de> Deserialize<'de> for DurationNs {
    /// Accepts integer nanoseconds or `null` (zero), and leniently a Go duration string ("5s")
    /// or a float of nanoseconds.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum DurationInput {
            Nanos(i64),
            Float(f64),
            Text(String),
        }
        match Option::<DurationInput>::deserialize(deserializer)? {
            None => Ok(DurationNs::ZERO),
            Some(DurationInput::Nanos(nanos)) => Ok(DurationNs(nanos)),
            // Saturating float-to-int cast is the intended rounding for a lenient input.
            Some(DurationInput::Float(nanos)) => Ok(DurationNs(nanos as i64)),
            Some(DurationInput::Text(text)) => {
                DurationNs::parse_go(&text).map_err(serde::de::Error::custom)
            }
        }
    }
}
