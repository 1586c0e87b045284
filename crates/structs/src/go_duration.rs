//! Go-style duration strings (`"30s"`, `"1h30m"`, `"1.5h"`, `"300ms"`), parsed with the same
//! grammar as Go's `time.ParseDuration`, returned as nanoseconds: the one parser of the
//! workspace, behind [`crate::DurationNs::parse_go`] (signed, for wire values) and
//! [`parse_go_duration`] (non-negative, for jobspecs, agent configuration and `?wait=`).
//!
//! Not for human-friendly extensions: `"1d"`, `"1h 30m"` and bare numbers other than `"0"` are
//! rejected, exactly as Nomad rejects them.

/// Why a duration string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("invalid duration {input:?}: empty string")]
    Empty { input: String },
    #[error("invalid duration {input:?}: expected a number")]
    ExpectedNumber { input: String },
    #[error("invalid duration {input:?}: missing unit (one of ns, us, µs, ms, s, m, h)")]
    MissingUnit { input: String },
    #[error("invalid duration {input:?}: unknown unit {unit:?} (one of ns, us, µs, ms, s, m, h)")]
    UnknownUnit { input: String, unit: String },
    #[error("invalid duration {input:?}: out of range")]
    Overflow { input: String },
    #[error("invalid duration {input:?}: must not be negative")]
    Negative { input: String },
}

const NANOS_PER_MICROSECOND: u64 = 1_000;
const NANOS_PER_MILLISECOND: u64 = 1_000_000;
const NANOS_PER_SECOND: u64 = 1_000_000_000;
const NANOS_PER_MINUTE: u64 = 60 * NANOS_PER_SECOND;
const NANOS_PER_HOUR: u64 = 60 * NANOS_PER_MINUTE;

/// The largest duration Go can represent (`math.MaxInt64` nanoseconds); larger inputs overflow.
const MAX_DURATION_NANOS: u64 = i64::MAX as u64;

fn unit_nanos(unit: &str) -> Option<u64> {
    match unit {
        "ns" => Some(1),
        // Go accepts the micro sign (U+00B5) and the Greek small letter mu (U+03BC).
        "us" | "\u{00b5}s" | "\u{03bc}s" => Some(NANOS_PER_MICROSECOND),
        "ms" => Some(NANOS_PER_MILLISECOND),
        "s" => Some(NANOS_PER_SECOND),
        "m" => Some(NANOS_PER_MINUTE),
        "h" => Some(NANOS_PER_HOUR),
        _ => None,
    }
}

/// Parses a Go duration string into non-negative nanoseconds: every duration in a jobspec, an
/// agent configuration or a `?wait=` is a span, so a negative one is refused.
pub fn parse_go_duration(input: &str) -> Result<u64, DurationError> {
    let (negative, magnitude) = parse_magnitude(input)?;
    if negative && magnitude != 0 {
        return Err(DurationError::Negative {
            input: input.to_string(),
        });
    }
    Ok(magnitude)
}

/// Parses a Go duration string into signed nanoseconds, as `time.ParseDuration` does.
pub fn parse_signed_go_duration(input: &str) -> Result<i64, DurationError> {
    let (negative, magnitude) = parse_magnitude(input)?;
    // `parse_magnitude` keeps the magnitude within `i64::MAX`.
    let magnitude = i64::try_from(magnitude).map_err(|_| DurationError::Overflow {
        input: input.to_string(),
    })?;
    Ok(if negative { -magnitude } else { magnitude })
}

/// The sign and the magnitude in nanoseconds of a Go duration string
/// (`time.ParseDuration` grammar): an optional sign followed by one or more
/// `<decimal><unit>` pairs, such as `"300ms"`, `"1.5h"` or `"2h45m"`. The lone string `"0"` needs
/// no unit.
fn parse_magnitude(input: &str) -> Result<(bool, u64), DurationError> {
    let owned = || input.to_string();
    let mut rest = input;
    let mut negative = false;
    if let Some(stripped) = rest.strip_prefix('-') {
        negative = true;
        rest = stripped;
    } else if let Some(stripped) = rest.strip_prefix('+') {
        rest = stripped;
    }
    if rest == "0" {
        return Ok((negative, 0));
    }
    if rest.is_empty() {
        return Err(DurationError::Empty { input: owned() });
    }

    let mut total: u64 = 0;
    while !rest.is_empty() {
        let integer_digits_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let integer_digits = &rest[..integer_digits_len];
        rest = &rest[integer_digits_len..];

        let mut fraction_digits = "";
        if let Some(after_dot) = rest.strip_prefix('.') {
            let fraction_len = after_dot.bytes().take_while(u8::is_ascii_digit).count();
            fraction_digits = &after_dot[..fraction_len];
            rest = &after_dot[fraction_len..];
            if integer_digits.is_empty() && fraction_digits.is_empty() {
                return Err(DurationError::ExpectedNumber { input: owned() });
            }
        } else if integer_digits.is_empty() {
            return Err(DurationError::ExpectedNumber { input: owned() });
        }

        let unit_len = rest
            .char_indices()
            .find(|(_, character)| *character == '.' || character.is_ascii_digit())
            .map_or(rest.len(), |(index, _)| index);
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        if unit.is_empty() {
            return Err(DurationError::MissingUnit { input: owned() });
        }
        let Some(nanos_per_unit) = unit_nanos(unit) else {
            return Err(DurationError::UnknownUnit {
                input: owned(),
                unit: unit.to_string(),
            });
        };

        let overflow = || DurationError::Overflow { input: owned() };
        let mut integer_value: u64 = 0;
        for digit in integer_digits.bytes() {
            integer_value = integer_value
                .checked_mul(10)
                .and_then(|value| value.checked_add(u64::from(digit - b'0')))
                .ok_or_else(overflow)?;
        }
        let mut component = integer_value
            .checked_mul(nanos_per_unit)
            .ok_or_else(overflow)?;

        // The fractional part: keep at most 18 digits (more cannot change a nanosecond count
        // of a unit no larger than an hour) and scale exactly in 128-bit arithmetic.
        let kept_fraction = &fraction_digits[..fraction_digits.len().min(18)];
        if !kept_fraction.is_empty() {
            let mut fraction_value: u128 = 0;
            let mut scale: u128 = 1;
            for digit in kept_fraction.bytes() {
                fraction_value = fraction_value * 10 + u128::from(digit - b'0');
                scale *= 10;
            }
            let fraction_nanos = fraction_value * u128::from(nanos_per_unit) / scale;
            let fraction_nanos = u64::try_from(fraction_nanos).map_err(|_| overflow())?;
            component = component.checked_add(fraction_nanos).ok_or_else(overflow)?;
        }

        total = total.checked_add(component).ok_or_else(overflow)?;
        if total > MAX_DURATION_NANOS {
            return Err(overflow());
        }
    }

    Ok((negative, total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_forms_go_accepts() {
        let cases: &[(&str, u64)] = &[
            ("0", 0),
            ("-0", 0),
            ("+0", 0),
            ("30s", 30 * NANOS_PER_SECOND),
            ("1h30m", 90 * NANOS_PER_MINUTE),
            ("1.5h", 90 * NANOS_PER_MINUTE),
            ("300ms", 300 * NANOS_PER_MILLISECOND),
            ("10us", 10_000),
            ("10\u{00b5}s", 10_000),
            ("10\u{03bc}s", 10_000),
            ("1ns", 1),
            ("0s", 0),
            (
                "2h45m30.5s",
                2 * NANOS_PER_HOUR + 45 * NANOS_PER_MINUTE + 30_500_000_000,
            ),
            (".5s", 500_000_000),
            ("5.s", 5 * NANOS_PER_SECOND),
            ("1.0000000001s", 1_000_000_000),
            ("24h", 24 * NANOS_PER_HOUR),
            ("9223372036854775807ns", i64::MAX as u64),
            ("1m1m", 2 * NANOS_PER_MINUTE),
        ];
        for (input, expected) in cases {
            assert_eq!(parse_go_duration(input), Ok(*expected), "input {input:?}");
        }
    }

    #[test]
    fn rejects_what_go_rejects() {
        for input in [
            "",
            "1d",
            "1h 30m",
            "30",
            "s",
            ".s",
            "1.2.3s",
            "-",
            "1w",
            " 1s",
            "1s ",
            "1S",
            "-1s",
            "9223372036854775808ns",
            "99999999999999999999h",
            "3000000h",
        ] {
            assert!(
                parse_go_duration(input).is_err(),
                "input {input:?} should fail"
            );
        }
    }

    #[test]
    fn signed_durations_keep_their_sign() {
        assert_eq!(parse_signed_go_duration("-1.5s"), Ok(-1_500_000_000));
        assert_eq!(
            parse_signed_go_duration("+2m"),
            Ok(2 * NANOS_PER_MINUTE as i64)
        );
        assert_eq!(
            parse_go_duration("-1s").map_err(|error| error.to_string()),
            Err("invalid duration \"-1s\": must not be negative".into())
        );
    }

    #[test]
    fn error_messages_name_the_problem() {
        assert_eq!(
            parse_go_duration("1d").map_err(|error| error.to_string()),
            Err(
                "invalid duration \"1d\": unknown unit \"d\" (one of ns, us, µs, ms, s, m, h)"
                    .into()
            )
        );
        assert_eq!(
            parse_go_duration("30").map_err(|error| error.to_string()),
            Err("invalid duration \"30\": missing unit (one of ns, us, µs, ms, s, m, h)".into())
        );
    }
}
