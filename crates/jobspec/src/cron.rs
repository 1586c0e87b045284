//! Cron schedules of `periodic` blocks, read as Nomad reads them (its `cronexpr`): 5 fields are
//! minute, hour, day of month, month, day of week; 6 fields add a year at the end (minute …
//! year); 7 fields put seconds first (second … year). The `@` aliases are Nomad's: `@yearly`,
//! `@annually`, `@monthly`, `@weekly`, `@daily`, `@hourly`. Years run from 1970 to 2099. A day
//! of month and a day of week that are both restricted match either (`OR`). `cron_syntax`
//! reads every form `cronexpr` takes (`?`, names, `L`, `W`, `#`, …).
//!
//! `cron_syntax` turns an expression into a 7-field pattern with every value spelled out, which
//! croner parses; it is walked as civil (wall-clock) times;
//! jiff maps each wall-clock time to instants in the job's IANA time zone (`time_zone`, UTC when
//! empty) from its bundled tz database. [`CronSchedule::next_after`] answers the first instant
//! after a given one whose wall-clock time in the zone matches, which is what `cronexpr` does
//! across a daylight-saving change: a time in the skipped hour does not fire that day, and a
//! time in the repeated hour fires at both of its instants.
//!
//! Not here: firing the schedule (the server's periodic dispatcher does), reading a clock.

use croner::Cron;
use croner::parser::CronParser;
use jiff::civil::DateTime;
use jiff::tz::{AmbiguousOffset, TimeZone};
use jiff::{SignedDuration, Timestamp};

/// The widest span by which wall-clock order and instant order can disagree around a change of
/// a zone's offset (a repeated hour is one hour almost everywhere; two in a few historical
/// cases). Three hours covers every case in the tz database.
const FOLD_WINDOW: SignedDuration = SignedDuration::from_hours(3);

/// What is wrong with a periodic schedule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CronError {
    /// A cron expression does not parse.
    #[error("invalid cron spec {spec:?}: {detail}")]
    Spec { spec: String, detail: String },
    /// The time zone is not in the tz database.
    #[error("invalid time zone {zone:?}: {detail}")]
    TimeZone { zone: String, detail: String },
    /// Neither `cron` nor `crons` holds an expression.
    #[error("must specify a spec")]
    NoSpec,
}

/// One or more cron expressions in one time zone: the schedule of a periodic job.
#[derive(Debug, Clone)]
pub struct CronSchedule {
    crons: Vec<Cron>,
    zone: TimeZone,
}

impl CronSchedule {
    /// Parses `specs` (a periodic block's `cron` and `crons`; empty ones are skipped) in
    /// `time_zone` (an IANA name; UTC when empty).
    pub fn new<'a>(
        specs: impl IntoIterator<Item = &'a str>,
        time_zone: &str,
    ) -> Result<CronSchedule, CronError> {
        let zone = time_zone_named(time_zone)?;
        let mut crons = Vec::new();
        for spec in specs {
            if spec.trim().is_empty() {
                continue;
            }
            crons.push(parse(spec).map_err(|detail| CronError::Spec {
                spec: spec.to_owned(),
                detail,
            })?);
        }
        if crons.is_empty() {
            return Err(CronError::NoSpec);
        }
        Ok(CronSchedule { crons, zone })
    }

    /// The schedule of a job's periodic block.
    pub fn of(periodic: &drover_structs::PeriodicConfig) -> Result<CronSchedule, CronError> {
        CronSchedule::new(
            std::iter::once(periodic.spec.as_str())
                .chain(periodic.specs.iter().map(String::as_str)),
            &periodic.time_zone,
        )
    }

    /// The first launch strictly after `after_unix_ns`, in whole Unix seconds (the earliest of
    /// the expressions), or `None` when no expression matches again (a year range in the past).
    pub fn next_after(&self, after_unix_ns: i64) -> Option<i64> {
        let first = after_unix_ns.div_euclid(1_000_000_000).checked_add(1)?;
        self.crons
            .iter()
            .filter_map(|cron| next_of(cron, &self.zone, first))
            .min()
    }

    /// `unix_s` as Go's `2006-01-02T15:04:05Z07:00` in the schedule's zone (what Nomad's CLI
    /// shows as "Next Periodic Launch").
    pub fn format_in_zone(&self, unix_s: i64) -> String {
        let Ok(at) = Timestamp::from_second(unix_s) else {
            return unix_s.to_string();
        };
        let zoned = at.to_zoned(self.zone.clone());
        let offset = zoned.offset().seconds();
        let wall = zoned.datetime().strftime("%Y-%m-%dT%H:%M:%S").to_string();
        if offset == 0 {
            return format!("{wall}Z");
        }
        let sign = if offset < 0 { '-' } else { '+' };
        let magnitude = offset.unsigned_abs();
        format!(
            "{wall}{sign}{:02}:{:02}",
            magnitude / 3600,
            (magnitude % 3600) / 60
        )
    }
}

/// The zone named `name` (UTC when empty), from the bundled tz database.
fn time_zone_named(name: &str) -> Result<TimeZone, CronError> {
    if name.is_empty() || name == "UTC" {
        return Ok(TimeZone::UTC);
    }
    TimeZone::get(name).map_err(|error| CronError::TimeZone {
        zone: name.to_owned(),
        detail: format!("unknown time zone {name}: {error}"),
    })
}

/// The first instant at or after `first` (Unix seconds) whose wall-clock time in `zone`
/// matches `cron`.
fn next_of(cron: &Cron, zone: &TimeZone, first: i64) -> Option<i64> {
    let first_at = Timestamp::from_second(first).ok()?;
    // Start one fold window early in wall-clock time: the second pass through a repeated hour
    // has an earlier wall-clock time than instants before it.
    let mut cursor = zone.to_datetime(first_at).checked_sub(FOLD_WINDOW).ok()?;
    let mut inclusive = true;
    let mut best: Option<Timestamp> = None;
    loop {
        let candidate: DateTime = cron.find_next_occurrence(&cursor, inclusive).ok()?;
        if let Some(best) = best {
            let best_wall = zone.to_datetime(best);
            if candidate > best_wall.checked_add(FOLD_WINDOW).ok()? {
                break;
            }
        }
        for instant in instants(zone, candidate) {
            if instant >= first_at && best.is_none_or(|best| instant < best) {
                best = Some(instant);
            }
        }
        if let Some(found) = best
            && !offset_changes_between(zone, first_at, found)
        {
            break;
        }
        cursor = candidate;
        inclusive = false;
    }
    best.map(Timestamp::as_second)
}

/// Whether `zone` changes its offset anywhere within a fold window of `from` … `to`: only then
/// can wall-clock order differ from instant order.
fn offset_changes_between(zone: &TimeZone, from: Timestamp, to: Timestamp) -> bool {
    let (Ok(start), Ok(end)) = (from.checked_sub(FOLD_WINDOW), to.checked_add(FOLD_WINDOW)) else {
        return true;
    };
    zone.following(start)
        .next()
        .is_some_and(|transition| transition.timestamp() <= end)
}

/// The instants at which the wall clock of `zone` shows `wall`: none in a skipped hour, two in
/// a repeated one.
fn instants(zone: &TimeZone, wall: DateTime) -> Vec<Timestamp> {
    match zone.to_ambiguous_timestamp(wall).offset() {
        AmbiguousOffset::Unambiguous { offset } => offset.to_timestamp(wall).into_iter().collect(),
        AmbiguousOffset::Gap { .. } => Vec::new(),
        AmbiguousOffset::Fold { before, after } => [before, after]
            .into_iter()
            .filter_map(|offset| offset.to_timestamp(wall).ok())
            .collect(),
    }
}

/// Parses one expression with Nomad's field rules (see `cron_syntax`).
fn parse(expression: &str) -> Result<Cron, String> {
    let pattern = crate::cron_syntax::to_croner_pattern(expression)?;
    CronParser::builder()
        .seconds(croner::parser::Seconds::Required)
        .year(croner::parser::Year::Required)
        .build()
        .parse(&pattern)
        .map_err(|error| error.to_string().trim_end_matches('.').to_lowercase())
}

/// Checks one cron expression; the error says what is wrong with it.
pub(crate) fn check(expression: &str) -> Result<(), String> {
    parse(expression).map(|_| ())
}

/// Checks a time zone name; the error says what is wrong with it.
pub(crate) fn check_time_zone(name: &str) -> Result<(), String> {
    time_zone_named(name)
        .map(|_| ())
        .map_err(|error| match error {
            CronError::TimeZone { detail, .. } => detail,
            other => other.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::{CronError, CronSchedule, check, check_time_zone};

    const NS: i64 = 1_000_000_000;

    /// Unix seconds of a UTC date and time.
    fn utc(text: &str) -> i64 {
        text.parse::<jiff::Timestamp>()
            .expect("a timestamp")
            .as_second()
    }

    fn next(spec: &str, zone: &str, after: &str) -> Option<i64> {
        CronSchedule::new([spec], zone)
            .expect("a schedule")
            .next_after(utc(after) * NS)
    }

    #[test]
    fn five_six_and_seven_fields_read_as_nomad_reads_them() {
        assert_eq!(check("*/15 * * * *"), Ok(()));
        // Six fields end with a year, as in Nomad: 2030 is a year, not a day of week.
        assert_eq!(check("0 0 * * 1-5 2030"), Ok(()));
        // Seven fields start with seconds.
        assert_eq!(check("30 0 0 * * * 2030"), Ok(()));
        assert_eq!(check("0 9 * * MON-FRI"), Ok(()));
        assert_eq!(check("0 0 L * *"), Ok(()));
        assert_eq!(check("@daily"), Ok(()));
        assert_eq!(check("0/10 * * * *"), Ok(()));
    }

    /// Next launches of the forms in Nomad's cron library's own tests (`cronexpr_test.go`:
    /// `crontests`, `TestZero`, `TestNextN`), each `(expression, after, next)` in UTC, plus
    /// the forms it takes that those tests leave out (`?`, aliases, fields past the seventh).
    #[test]
    fn the_forms_of_nomads_cron_library_launch_as_it_launches_them() {
        let table: &[(&str, &str, Option<&str>)] = &[
            // Seconds.
            (
                "* * * * * * *",
                "2013-01-01T00:00:00Z",
                Some("2013-01-01T00:00:01Z"),
            ),
            (
                "* * * * * * *",
                "2013-01-01T23:59:59Z",
                Some("2013-01-02T00:00:00Z"),
            ),
            (
                "* * * * * * *",
                "2016-02-28T23:59:59Z",
                Some("2016-02-29T00:00:00Z"),
            ),
            (
                "*/5 * * * * * *",
                "2013-01-01T00:00:00Z",
                Some("2013-01-01T00:00:05Z"),
            ),
            (
                "*/5 * * * * * *",
                "2013-01-01T00:00:59Z",
                Some("2013-01-01T00:01:00Z"),
            ),
            (
                "*/5 * * * * * *",
                "2012-12-31T23:59:59Z",
                Some("2013-01-01T00:00:00Z"),
            ),
            // Minutes.
            (
                "* * * * *",
                "2013-01-01T00:00:59Z",
                Some("2013-01-01T00:01:00Z"),
            ),
            (
                "* * * * *",
                "2013-02-28T23:59:00Z",
                Some("2013-03-01T00:00:00Z"),
            ),
            // Minutes with an interval; an interval and a list.
            (
                "17-43/5 * * * *",
                "2013-01-01T00:00:00Z",
                Some("2013-01-01T00:17:00Z"),
            ),
            (
                "17-43/5 * * * *",
                "2013-01-01T00:30:00Z",
                Some("2013-01-01T00:32:00Z"),
            ),
            (
                "17-43/5 * * * *",
                "2013-01-01T00:50:00Z",
                Some("2013-01-01T01:17:00Z"),
            ),
            (
                "15-30/4,55 * * * *",
                "2013-01-01T00:16:00Z",
                Some("2013-01-01T00:19:00Z"),
            ),
            (
                "15-30/4,55 * * * *",
                "2013-01-01T00:30:00Z",
                Some("2013-01-01T00:55:00Z"),
            ),
            (
                "15-30/4,55 * * * *",
                "2012-12-31T23:55:00Z",
                Some("2013-01-01T00:15:00Z"),
            ),
            // Days of week: by short name, by full name in any case, 7 as Sunday, and a range
            // to 7 (which ends on Saturday).
            (
                "0 0 * * MON",
                "2013-01-01T00:00:00Z",
                Some("2013-01-07T00:00:00Z"),
            ),
            (
                "0 0 * * MON",
                "2013-12-30T00:30:00Z",
                Some("2014-01-06T00:00:00Z"),
            ),
            (
                "0 0 * * friday",
                "2013-01-28T00:00:00Z",
                Some("2013-02-01T00:00:00Z"),
            ),
            (
                "0 0 * * 6,7",
                "2013-01-01T00:00:00Z",
                Some("2013-01-05T00:00:00Z"),
            ),
            (
                "0 0 * * 6,7",
                "2013-01-05T00:00:00Z",
                Some("2013-01-06T00:00:00Z"),
            ),
            (
                "0 0 * * 5-7",
                "2013-12-30T00:30:00Z",
                Some("2014-01-03T00:00:00Z"),
            ),
            (
                "0 0 * * 5-7",
                "2013-01-05T00:00:00Z",
                Some("2013-01-11T00:00:00Z"),
            ),
            // The fifth Saturday of a month.
            (
                "0 0 * * 6#5",
                "2013-09-02T00:00:00Z",
                Some("2013-11-30T00:00:00Z"),
            ),
            (
                "0 0 * * 6#5",
                "2013-11-30T00:00:00Z",
                Some("2014-03-29T00:00:00Z"),
            ),
            (
                "0 0 * * 6#5",
                "2014-03-29T00:00:00Z",
                Some("2014-05-31T00:00:00Z"),
            ),
            // The weekday nearest a day of month; near the end of the month.
            (
                "0 0 14W * *",
                "2013-03-31T00:00:00Z",
                Some("2013-04-15T00:00:00Z"),
            ),
            (
                "0 0 14W * *",
                "2013-08-31T00:00:00Z",
                Some("2013-09-13T00:00:00Z"),
            ),
            (
                "0 0 30W * *",
                "2013-03-02T00:00:00Z",
                Some("2013-03-29T00:00:00Z"),
            ),
            (
                "0 0 30W * *",
                "2013-09-02T00:00:00Z",
                Some("2013-09-30T00:00:00Z"),
            ),
            (
                "0 0 30W * *",
                "2013-11-02T00:00:00Z",
                Some("2013-11-29T00:00:00Z"),
            ),
            // The last day, and the last weekday, of the month.
            (
                "0 0 L * *",
                "2014-02-01T00:00:00Z",
                Some("2014-02-28T00:00:00Z"),
            ),
            (
                "0 0 L * *",
                "2016-02-15T00:00:00Z",
                Some("2016-02-29T00:00:00Z"),
            ),
            (
                "0 0 LW * *",
                "2013-11-02T00:00:00Z",
                Some("2013-11-29T00:00:00Z"),
            ),
            (
                "0 0 LW * *",
                "2014-08-15T00:00:00Z",
                Some("2014-08-29T00:00:00Z"),
            ),
            // A zero-padded month in six fields (the sixth is the year).
            (
                "0 0 * 04 * *",
                "2013-09-02T00:00:00Z",
                Some("2014-04-01T00:00:00Z"),
            ),
            (
                "0 0 * 04 * *",
                "2014-04-03T03:00:00Z",
                Some("2014-04-04T00:00:00Z"),
            ),
            // Years: one in the past never launches again, one ahead does.
            ("* * * * * 1980", "2013-08-31T00:00:00Z", None),
            (
                "* * * * * 2050",
                "2013-08-31T00:00:00Z",
                Some("2050-01-01T00:00:00Z"),
            ),
            (
                "*/5 * * * *",
                "2013-09-02T08:44:32Z",
                Some("2013-09-02T08:45:00Z"),
            ),
            // `?` is every value, in any field (here the year of a 7-field spec).
            (
                "*/5 * * * * * ?",
                "2026-03-01T10:00:02Z",
                Some("2026-03-01T10:00:05Z"),
            ),
            (
                "0 12 ? * MON-FRI",
                "2026-03-07T00:00:00Z",
                Some("2026-03-09T12:00:00Z"),
            ),
            (
                "0 0 ? * ?",
                "2026-03-07T10:00:00Z",
                Some("2026-03-08T00:00:00Z"),
            ),
            // The aliases, and text around them.
            (
                "@yearly",
                "2026-03-07T10:00:00Z",
                Some("2027-01-01T00:00:00Z"),
            ),
            (
                "@annually",
                "2026-03-07T10:00:00Z",
                Some("2027-01-01T00:00:00Z"),
            ),
            (
                "@monthly",
                "2026-03-07T10:00:00Z",
                Some("2026-04-01T00:00:00Z"),
            ),
            (
                "@weekly",
                "2026-03-07T10:00:00Z",
                Some("2026-03-08T00:00:00Z"),
            ),
            (
                "@daily",
                "2026-03-07T10:00:00Z",
                Some("2026-03-08T00:00:00Z"),
            ),
            (
                "@hourly",
                "2026-03-07T10:00:00Z",
                Some("2026-03-07T11:00:00Z"),
            ),
            (
                "  @hourly  ",
                "2026-03-07T10:00:00Z",
                Some("2026-03-07T11:00:00Z"),
            ),
            // Fields past the seventh are ignored.
            (
                "0 0 0 1 1 * 2030 extra",
                "2026-03-07T10:00:00Z",
                Some("2030-01-01T00:00:00Z"),
            ),
            // Month names, short and full; a value with a step runs to the field's end.
            (
                "0 0 1 jan,JULY *",
                "2026-03-07T10:00:00Z",
                Some("2026-07-01T00:00:00Z"),
            ),
            (
                "0 22/1 * * *",
                "2026-03-07T10:00:00Z",
                Some("2026-03-07T22:00:00Z"),
            ),
            // The last Friday of the month.
            (
                "0 0 * * 5L",
                "2026-03-07T10:00:00Z",
                Some("2026-03-27T00:00:00Z"),
            ),
        ];
        let mut wrong = Vec::new();
        for (spec, after, expected) in table {
            let found =
                CronSchedule::new([*spec], "").map(|schedule| schedule.next_after(utc(after) * NS));
            let expected = expected.map(utc);
            if found != Ok(expected) {
                wrong.push(format!(
                    "{spec:?} after {after}: {found:?}, not {expected:?}"
                ));
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    /// What Nomad's cron library refuses is refused.
    #[test]
    fn what_nomads_cron_library_refuses_is_refused() {
        for bad in [
            "* * * *",
            "*/0 * * * *",
            "*/60 * * * *",
            "0 0 * * */7",
            "0 0 0 * *",
            "0 0 32 * *",
            "0 0 * 0 *",
            "0 0 * * 8",
            "0 0 * * 5#6",
            "0 0 * * L",
            "005 * * * *",
            "0 0 * * * 1969",
            "0 0 * * * 2100",
            "0 0 * * * 30",
            "?/5 * * * *",
            "0 0 W * *",
            "0 0 * * mon#1#2",
            "0 0 , * *",
            "x * * * *",
        ] {
            assert!(check(bad).is_err(), "{bad} was accepted");
        }
    }

    #[test]
    fn out_of_range_values_and_bad_shapes_are_errors() {
        for bad in [
            "99 * * * *",
            "* 24 * * *",
            "* * 32 * *",
            "* * * 13 *",
            "0 0 * * * 1-5",
            "* * *",
            "* * * * * ; rm",
            "@sometimes",
            // Not one of cronexpr's aliases: Nomad refuses it.
            "@midnight",
            "61 * * * * * *",
        ] {
            assert!(check(bad).is_err(), "{bad} was accepted");
        }
    }

    #[test]
    fn next_launches_follow_the_fields() {
        // Every second: the next whole second after the instant.
        let every_second = CronSchedule::new(["* * * * * * *"], "").expect("a schedule");
        let at = utc("2026-03-01T10:00:00Z");
        assert_eq!(every_second.next_after(at * NS), Some(at + 1));
        assert_eq!(every_second.next_after(at * NS + 400_000_000), Some(at + 1));
        // Five fields: minute resolution.
        assert_eq!(
            next("*/15 * * * *", "", "2026-03-01T10:07:30Z"),
            Some(utc("2026-03-01T10:15:00Z"))
        );
        // Six fields end with a year.
        assert_eq!(
            next("0 12 1 1 * 2030", "", "2026-03-01T00:00:00Z"),
            Some(utc("2030-01-01T12:00:00Z"))
        );
        assert_eq!(next("0 12 1 1 * 2025", "", "2026-03-01T00:00:00Z"), None);
        // Seven fields start with seconds.
        assert_eq!(
            next("30 5 * * * * *", "", "2026-03-01T10:07:30Z"),
            Some(utc("2026-03-01T11:05:30Z"))
        );
        // Both day fields restricted: either matches (Sunday 1 March 2026 is not the 15th).
        assert_eq!(
            next("0 0 15 * SUN", "", "2026-02-28T12:00:00Z"),
            Some(utc("2026-03-01T00:00:00Z"))
        );
        assert_eq!(
            next("@weekly", "", "2026-03-02T00:00:00Z"),
            Some(utc("2026-03-08T00:00:00Z"))
        );
        // Several expressions: the earliest wins.
        let both = CronSchedule::new(["0 9 * * *", "0 7 * * *"], "").expect("a schedule");
        assert_eq!(
            both.next_after(utc("2026-03-01T06:00:00Z") * NS),
            Some(utc("2026-03-01T07:00:00Z"))
        );
    }

    #[test]
    fn launches_follow_the_time_zone_across_daylight_saving_changes() {
        // New York springs forward at 02:00 EST on 8 March 2026 (to 03:00 EDT).
        let zone = "America/New_York";
        assert_eq!(
            next("30 1 * * *", zone, "2026-03-07T12:00:00Z"),
            Some(utc("2026-03-08T06:30:00Z")) // 01:30 EST
        );
        assert_eq!(
            next("30 1 * * *", zone, "2026-03-08T12:00:00Z"),
            Some(utc("2026-03-09T05:30:00Z")) // 01:30 EDT the next day
        );
        // 02:30 does not exist on the 8th: the launch skips to the 9th.
        assert_eq!(
            next("30 2 * * *", zone, "2026-03-07T12:00:00Z"),
            Some(utc("2026-03-09T06:30:00Z")) // 02:30 EDT
        );
        // It falls back at 02:00 EDT on 1 November 2026: 01:30 happens twice, and both fire.
        let first = next("30 1 * * *", zone, "2026-10-31T12:00:00Z");
        assert_eq!(first, Some(utc("2026-11-01T05:30:00Z"))); // 01:30 EDT
        let second = next("30 1 * * *", zone, "2026-11-01T05:30:00Z");
        assert_eq!(second, Some(utc("2026-11-01T06:30:00Z"))); // 01:30 EST
        let third = next("30 1 * * *", zone, "2026-11-01T06:30:00Z");
        assert_eq!(third, Some(utc("2026-11-02T06:30:00Z")));
        // An hourly job runs once per real hour through the change.
        let hourly = CronSchedule::new(["@hourly"], zone).expect("a schedule");
        let mut at = utc("2026-11-01T03:30:00Z") * NS;
        let mut launches = Vec::new();
        for _ in 0..4 {
            let launch = hourly.next_after(at).expect("a launch");
            launches.push(launch);
            at = launch * NS;
        }
        let start = utc("2026-11-01T04:00:00Z");
        assert_eq!(
            launches,
            vec![start, start + 3_600, start + 7_200, start + 10_800]
        );
    }

    #[test]
    fn unknown_zones_and_empty_specs_are_refused() {
        assert!(matches!(
            CronSchedule::new(["* * * * *"], "Mars/Olympus"),
            Err(CronError::TimeZone { .. })
        ));
        assert!(check_time_zone("Europe/Berlin").is_ok());
        assert!(check_time_zone("Nowhere/Else").is_err());
        assert!(matches!(
            CronSchedule::new([""], ""),
            Err(CronError::NoSpec)
        ));
        let new_york = CronSchedule::new(["@daily"], "America/New_York").expect("a schedule");
        assert_eq!(
            new_york.format_in_zone(utc("2026-11-02T05:00:00Z")),
            "2026-11-02T00:00:00-05:00"
        );
        let utc_zone = CronSchedule::new(["@daily"], "").expect("a schedule");
        assert_eq!(
            utc_zone.format_in_zone(utc("2026-11-02T05:00:00Z")),
            "2026-11-02T05:00:00Z"
        );
    }
}
