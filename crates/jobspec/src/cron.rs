//! Cron expressions of `periodic` blocks, checked by a real cron parser (croner) with Nomad's
//! field rules (its `cronexpr`): 5 fields are minute, hour, day of month, month, day of week;
//! 6 fields add a year at the end (minute … year); 7 fields put seconds first (second … year).
//! croner reads 6 fields as second … day of week, so a 6-field spec gets a `0` seconds field
//! before it is parsed. The `@` aliases are Nomad's: `@yearly`, `@annually`, `@monthly`,
//! `@weekly`, `@daily`, `@midnight`, `@hourly`.
//!
//! Not here: firing the schedule (drover does not launch periodic jobs yet).

use croner::parser::CronParser;

/// Checks one cron expression; the error says what is wrong with it.
pub(crate) fn check(expression: &str) -> Result<(), String> {
    let trimmed = expression.trim();
    if let Some(alias) = trimmed.strip_prefix('@') {
        return match alias {
            "yearly" | "annually" | "monthly" | "weekly" | "daily" | "midnight" | "hourly" => {
                Ok(())
            }
            other => Err(format!("unknown alias @{other}")),
        };
    }
    let field_count = trimmed.split_whitespace().count();
    let pattern = match field_count {
        5 | 7 => trimmed.to_string(),
        6 => format!("0 {trimmed}"),
        other => return Err(format!("expected 5 to 7 fields, got {other}")),
    };
    if field_count > 5
        && let Some(year) = trimmed.split_whitespace().last()
    {
        check_years(year)?;
    }
    CronParser::new()
        .parse(&pattern)
        .map(|_| ())
        .map_err(|error| error.to_string().trim_end_matches(".").to_lowercase())
}

/// Nomad's cron years run from 1970 to 2099 (croner would take any year).
fn check_years(field: &str) -> Result<(), String> {
    const YEARS: std::ops::RangeInclusive<u32> = 1970..=2099;
    for part in field.split(',') {
        let range = part.split_once('/').map_or(part, |(range, _)| range);
        if range == "*" || range == "?" {
            continue;
        }
        for bound in range.split('-') {
            match bound.parse::<u32>() {
                Ok(year) if YEARS.contains(&year) => {}
                _ => {
                    return Err(format!("year {bound:?} is not a year from 1970 to 2099"));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check;

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
        assert_eq!(check("@midnight"), Ok(()));
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
            "61 * * * * * *",
        ] {
            assert!(check(bad).is_err(), "{bad} was accepted");
        }
    }
}
