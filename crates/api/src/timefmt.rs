//! Small UTC time formatting for the wire (`RFC3339Nano` as Go prints it) and for people
//! (`2026-11-21T07:00:00Z`, `5m ago`), without a calendar crate.
//!
//! Not here: parsing, time zones other than UTC.

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian calendar.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let shifted = days + 719_468;
    let era = shifted.div_euclid(146_097);
    let day_of_era = shifted.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * month_index + 2) / 5 + 1) as u32;
    let month = if month_index < 10 { month_index + 3 } else { month_index - 9 } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn split_seconds(unix_seconds: i64) -> (i64, u32, u32, u32, u32, u32) {
    let days = unix_seconds.div_euclid(86_400);
    let second_of_day = unix_seconds.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    (
        year,
        month,
        day,
        (second_of_day / 3600) as u32,
        ((second_of_day % 3600) / 60) as u32,
        (second_of_day % 60) as u32,
    )
}

/// Go's `time.RFC3339Nano` in UTC: fractional seconds with trailing zeros dropped.
pub fn rfc3339_nanos(unix_seconds: i64, nanos: u32) -> String {
    let (year, month, day, hour, minute, second) = split_seconds(unix_seconds);
    let mut text = format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}");
    if nanos > 0 {
        let fraction = format!("{nanos:09}");
        text.push('.');
        text.push_str(fraction.trim_end_matches('0'));
    }
    text.push('Z');
    text
}

/// Whole-second RFC3339 in UTC from Unix nanoseconds, as the CLI shows dates.
pub fn rfc3339_from_unix_nanos(unix_nanos: i64) -> String {
    rfc3339_nanos(unix_nanos.div_euclid(1_000_000_000), 0)
}

/// A short age such as `5s ago`, `3m12s ago`, `2h5m ago`, `4d3h ago`, as Nomad's CLI prints
/// creation and modification times.
pub fn pretty_age(then_unix_nanos: i64, now_unix_nanos: i64) -> String {
    let seconds = (now_unix_nanos - then_unix_nanos).max(0) / 1_000_000_000;
    let (days, hours, minutes, secs) = (
        seconds / 86_400,
        (seconds % 86_400) / 3600,
        (seconds % 3600) / 60,
        seconds % 60,
    );
    let text = if days > 0 {
        format!("{days}d{hours}h")
    } else if hours > 0 {
        format!("{hours}h{minutes}m")
    } else if minutes > 0 {
        format!("{minutes}m{secs}s")
    } else {
        format!("{secs}s")
    };
    format!("{text} ago")
}

/// The current time as Unix nanoseconds.
pub fn now_unix_nanos() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|since| i64::try_from(since.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_like_go_rfc3339nano() {
        assert_eq!(rfc3339_nanos(0, 0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339_nanos(1_700_000_000, 0), "2023-11-14T22:13:20Z");
        assert_eq!(rfc3339_nanos(1_700_000_000, 120_000_000), "2023-11-14T22:13:20.12Z");
        assert_eq!(rfc3339_nanos(951_782_400, 0), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn ages_read_like_nomad() {
        let second = 1_000_000_000;
        assert_eq!(pretty_age(0, 5 * second), "5s ago");
        assert_eq!(pretty_age(0, 192 * second), "3m12s ago");
        assert_eq!(pretty_age(0, 7500 * second), "2h5m ago");
        assert_eq!(pretty_age(0, (4 * 86_400 + 3 * 3600) * second), "4d3h ago");
        assert_eq!(pretty_age(10 * second, 0), "0s ago");
    }
}
