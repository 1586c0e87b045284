//! Follows a container's stdout and stderr through the engine's log API into the allocation's
//! rotated log files (`<task>.stdout.N`, `<task>.stderr.N`), as the shim does for other drivers.
//!
//! Lines come with the engine's timestamps; after each line the follower records the last
//! timestamp it wrote in the run's state dir, so a follower started again after an agent
//! restart asks for the lines since then and skips those already written (at most the one line
//! being written when the agent died repeats).
//!
//! Not for: rotation itself (`drover_shim::logs::LogRotator`).

use std::path::Path;

use bollard::Docker;
use bollard::container::LogOutput;
use bollard::query_parameters::LogsOptions;
use drover_driver::LogSettings;
use drover_shim::logs::LogRotator;
use futures_util::StreamExt;

/// The file, in the run's state dir, holding the timestamp of the last line written.
const POSITION_FILE: &str = "log_position";

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = if year >= 0 { year } else { year - 399 } / 400;
    let year_of_era = year - era * 400;
    let month = i64::from(month);
    let day_of_year =
        (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// `2026-11-24T18:30:00.123456789Z` (RFC 3339 in UTC, as the engine writes it) → (Unix
/// seconds, nanoseconds).
pub(crate) fn parse_timestamp(text: &str) -> Option<(i64, u32)> {
    let text = text.trim().strip_suffix('Z')?;
    let (date, time) = text.split_once('T')?;
    let mut date_parts = date.split('-');
    let year: i64 = date_parts.next()?.parse().ok()?;
    let month: u32 = date_parts.next()?.parse().ok()?;
    let day: u32 = date_parts.next()?.parse().ok()?;
    let (clock, fraction) = match time.split_once('.') {
        Some((clock, fraction)) => (clock, fraction),
        None => (time, ""),
    };
    let mut clock_parts = clock.split(':');
    let hour: i64 = clock_parts.next()?.parse().ok()?;
    let minute: i64 = clock_parts.next()?.parse().ok()?;
    let second: i64 = clock_parts.next()?.parse().ok()?;
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || fraction.len() > 9 {
        return None;
    }
    let nanos: u32 = if fraction.is_empty() {
        0
    } else {
        format!("{fraction:0<9}").parse().ok()?
    };
    let seconds = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second;
    Some((seconds, nanos))
}

fn read_position(state_dir: &Path) -> Option<(i64, u32)> {
    std::fs::read_to_string(state_dir.join(POSITION_FILE))
        .ok()
        .and_then(|text| parse_timestamp(&text))
}

/// Follows the container's output until it ends (the container stopped or was removed).
pub(crate) async fn follow(
    engine: &Docker,
    container_id: &str,
    task_name: &str,
    logs: &LogSettings,
    state_dir: &Path,
) -> Result<(), String> {
    let open = |stream: &str| {
        LogRotator::open(
            &logs.dir,
            &format!("{task_name}.{stream}"),
            logs.max_files,
            logs.max_file_size_bytes,
        )
        .map_err(|error| {
            format!(
                "opening the {stream} log in {}: {error}",
                logs.dir.display()
            )
        })
    };
    let mut stdout = open("stdout")?;
    let mut stderr = open("stderr")?;
    let mut last = read_position(state_dir);
    let options = LogsOptions {
        follow: true,
        stdout: true,
        stderr: true,
        timestamps: true,
        since: last.map_or(0, |(seconds, _)| i32::try_from(seconds).unwrap_or(0)),
        ..LogsOptions::default()
    };
    let mut stream = engine.logs(container_id, Some(options));
    while let Some(item) = stream.next().await {
        let output = item.map_err(|error| format!("reading the container's logs: {error}"))?;
        let (rotator, message) = match &output {
            LogOutput::StdOut { message } | LogOutput::Console { message } => {
                (&mut stdout, message)
            }
            LogOutput::StdErr { message } => (&mut stderr, message),
            LogOutput::StdIn { .. } => continue,
        };
        let bytes: &[u8] = message.as_ref();
        let (stamp_text, line) = match bytes.iter().position(|byte| *byte == b' ') {
            Some(space) => (
                std::str::from_utf8(&bytes[..space]).unwrap_or_default(),
                &bytes[space + 1..],
            ),
            None => ("", bytes),
        };
        let stamp = parse_timestamp(stamp_text);
        if let (Some(stamp), Some(written)) = (stamp, last)
            && stamp <= written
        {
            continue;
        }
        rotator
            .write(line)
            .and_then(|()| rotator.flush_pending())
            .map_err(|error| format!("writing the task's log: {error}"))?;
        if stamp.is_some() {
            last = stamp;
            // Best effort: a lost position only means lines written again after a restart.
            let _ = std::fs::write(state_dir.join(POSITION_FILE), stamp_text);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn engine_timestamps_parse_to_unix_time() {
        assert_eq!(parse_timestamp("1970-01-01T00:00:00Z"), Some((0, 0)));
        assert_eq!(
            parse_timestamp("2021-06-01T12:30:15.5Z"),
            Some((1_622_550_615, 500_000_000))
        );
        assert_eq!(
            parse_timestamp("2026-11-24T18:30:00.123456789Z"),
            Some((1_795_545_000, 123_456_789))
        );
        assert_eq!(parse_timestamp("yesterday"), None);
        assert!(
            parse_timestamp("2021-06-01T12:30:15.1Z") > parse_timestamp("2021-06-01T12:30:15.09Z")
        );
    }
}
