//! The syntax of a cron expression as Nomad's cron library (`cronexpr`) reads it, turned into
//! an equivalent 7-field pattern that croner parses with the same meaning.
//!
//! What `cronexpr` takes, and so what this takes:
//! - the aliases `@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`, `@hourly`, replaced
//!   wherever they stand in the text (there is no `@midnight`);
//! - 5 fields (minute … day of week), 6 (… year) or 7 (second … year); fields beyond the
//!   seventh are ignored;
//! - in every field, comma-separated entries (empty ones skipped): `*` or `?` (every value: a
//!   field holding one is unrestricted), `v`, `a-b`, `*/n`, `v/n` (from v to the field's end)
//!   and `a-b/n`, with `n` from 1 to the field's largest value; numbers of one or two digits
//!   (`05`), years of four (1970–2099); months and days of week also by name, short or full,
//!   in any case; a day of week 7 is Sunday, and a range ending at 7 (or Sunday) ends at
//!   Saturday, as `cronexpr` reads it;
//! - in the day of month, `L` (last day), `LW` (last weekday) and `nW` (the weekday nearest
//!   day n); in the day of week, `nL` (the last such day of the month) and `n#k` (its k-th,
//!   1–5).
//!
//! The pattern made spells every value out, so croner's own readings of ranges, steps and
//! names never come into it. A field whose entries select nothing (`30-10`) is refused:
//! `cronexpr` takes it, but its next-launch search then fails, and Nomad never launches the job.
//!
//! Not here: finding launch times (see `cron`).

/// One field's rules, as `cronexpr`'s field descriptors give them.
struct Field {
    name: &'static str,
    min: u32,
    max: u32,
    /// The largest number a value may be written as (7 for a day of week, where 7 is Sunday).
    written_max: u32,
    /// Four-digit years rather than one- or two-digit numbers.
    year: bool,
    names: &'static [(&'static str, u32)],
}

const MONTH_NAMES: &[(&str, u32)] = &[
    ("jan", 1),
    ("january", 1),
    ("feb", 2),
    ("february", 2),
    ("mar", 3),
    ("march", 3),
    ("apr", 4),
    ("april", 4),
    ("may", 5),
    ("jun", 6),
    ("june", 6),
    ("jul", 7),
    ("july", 7),
    ("aug", 8),
    ("august", 8),
    ("sep", 9),
    ("september", 9),
    ("oct", 10),
    ("october", 10),
    ("nov", 11),
    ("november", 11),
    ("dec", 12),
    ("december", 12),
];

const DAY_NAMES: &[(&str, u32)] = &[
    ("sun", 0),
    ("sunday", 0),
    ("mon", 1),
    ("monday", 1),
    ("tue", 2),
    ("tuesday", 2),
    ("wed", 3),
    ("wednesday", 3),
    ("thu", 4),
    ("thursday", 4),
    ("fri", 5),
    ("friday", 5),
    ("sat", 6),
    ("saturday", 6),
];

const fn field(name: &'static str, min: u32, max: u32) -> Field {
    Field {
        name,
        min,
        max,
        written_max: max,
        year: false,
        names: &[],
    }
}

const SECOND: Field = field("second", 0, 59);
const MINUTE: Field = field("minute", 0, 59);
const HOUR: Field = field("hour", 0, 23);
const DAY_OF_MONTH: Field = field("day-of-month", 1, 31);
const MONTH: Field = Field {
    names: MONTH_NAMES,
    ..field("month", 1, 12)
};
const DAY_OF_WEEK: Field = Field {
    written_max: 7,
    names: DAY_NAMES,
    ..field("day-of-week", 0, 6)
};
const YEAR: Field = Field {
    year: true,
    ..field("year", 1970, 2099)
};

/// `cronexpr`'s aliases, in the order its replacer tries them.
const ALIASES: &[(&str, &str)] = &[
    ("@yearly", "0 0 0 1 1 * *"),
    ("@annually", "0 0 0 1 1 * *"),
    ("@monthly", "0 0 0 1 * * *"),
    ("@weekly", "0 0 0 * * 0 *"),
    ("@daily", "0 0 0 * * * *"),
    ("@hourly", "0 0 * * * * *"),
];

/// `expression` as a 7-field croner pattern (second … year) with `cronexpr`'s meaning, or
/// what is wrong with it.
pub(crate) fn to_croner_pattern(expression: &str) -> Result<String, String> {
    let expanded = expand_aliases(expression);
    // Go's `\S+`: fields are separated by ASCII spaces, tabs and line breaks.
    let fields: Vec<&str> = expanded
        .split([' ', '\t', '\n', '\r', '\x0c'])
        .filter(|field| !field.is_empty())
        .collect();
    if let Some(alias) = fields.iter().find(|field| field.starts_with('@')) {
        return Err(format!(
            "unknown alias {alias} (Nomad's are @yearly, @annually, @monthly, @weekly, @daily \
             and @hourly)"
        ));
    }
    if fields.len() < 5 {
        return Err(format!(
            "missing field(s): expected 5 to 7 fields, got {}",
            fields.len()
        ));
    }
    let (second, rest) = if fields.len() >= 7 {
        (Some(fields[0]), &fields[1..7])
    } else {
        (None, &fields[..])
    };
    let second = match second {
        Some(text) => plain_field(text, &SECOND)?,
        None => "0".to_owned(),
    };
    let minute = plain_field(rest[0], &MINUTE)?;
    let hour = plain_field(rest[1], &HOUR)?;
    let day_of_month = day_of_month_field(rest[2])?;
    let month = plain_field(rest[3], &MONTH)?;
    let day_of_week = day_of_week_field(rest[4])?;
    let year = match rest.get(5) {
        Some(text) => plain_field(text, &YEAR)?,
        None => "*".to_owned(),
    };
    Ok(format!(
        "{second} {minute} {hour} {day_of_month} {month} {day_of_week} {year}"
    ))
}

/// Replaces each alias where it stands, left to right, as Go's `strings.Replacer` does.
fn expand_aliases(expression: &str) -> String {
    let mut out = String::with_capacity(expression.len());
    let mut rest = expression;
    'scan: while let Some(first) = rest.chars().next() {
        for (alias, pattern) in ALIASES {
            if let Some(after) = rest.strip_prefix(alias) {
                out.push_str(pattern);
                rest = after;
                continue 'scan;
            }
        }
        out.push(first);
        rest = &rest[first.len_utf8()..];
    }
    out
}

/// One entry of a field, as `cronexpr` classifies it.
enum Entry {
    /// `*` or `?`.
    Every,
    /// The values from `first` to `last` by `step` (one value: `first == last`).
    Span { first: u32, last: u32, step: u32 },
    /// Anything else: a day field's special forms, or an error.
    Other(String),
}

/// The entries of a field (lowercased, empty ones skipped), or `cronexpr`'s error for none.
fn entries(text: &str, field: &Field) -> Result<Vec<Entry>, String> {
    let entries: Vec<Entry> = text
        .split(',')
        .filter(|entry| !entry.is_empty())
        .map(|entry| entry_of(&entry.to_lowercase(), field))
        .collect::<Result<_, _>>()?;
    if entries.is_empty() {
        return Err(format!("{} field: missing directive", field.name));
    }
    Ok(entries)
}

fn entry_of(entry: &str, field: &Field) -> Result<Entry, String> {
    if entry == "*" || entry == "?" {
        return Ok(Entry::Every);
    }
    let (range, step) = match entry.split_once('/') {
        Some((range, step)) => (range, Some(step)),
        None => (entry, None),
    };
    let step = match step {
        None => 1,
        Some(text) => match interval(text) {
            Some(step) if (1..=field.max).contains(&step) => step,
            _ if text.chars().all(|c| c.is_ascii_digit()) && !text.is_empty() => {
                return Err(format!("invalid interval {entry}"));
            }
            _ => return Ok(Entry::Other(entry.to_owned())),
        },
    };
    if range == "*" {
        // `*/n` only; `?/n` is no form of cronexpr's.
        return Ok(Entry::Span {
            first: field.min,
            last: field.max,
            step,
        });
    }
    let (first, last) = match range.split_once('-') {
        Some((first, last)) => match (value(first, field), value(last, field)) {
            (Some(first), Some(last)) => (first, Some(last)),
            _ => return Ok(Entry::Other(entry.to_owned())),
        },
        None => match value(range, field) {
            Some(first) => (first, None),
            None => return Ok(Entry::Other(entry.to_owned())),
        },
    };
    let last = match (last, entry.contains('/')) {
        (Some(last), _) => last,
        // `v/n` runs from v to the field's end; `v` is the one value.
        (None, true) => field.max,
        (None, false) => first,
    };
    Ok(Entry::Span {
        first: wrap(first, field),
        last: range_end(last, field, entry.contains('-')),
        step,
    })
}

/// A day of week written 7 is Sunday (0).
fn wrap(value: u32, field: &Field) -> u32 {
    if value > field.max { field.min } else { value }
}

/// The end of a range: a day-of-week range ending on Sunday (7, or 0) ends at Saturday, as
/// `cronexpr` reads it.
fn range_end(value: u32, field: &Field, is_range: bool) -> u32 {
    let value = wrap(value, field);
    if is_range && field.written_max > field.max && value == 0 {
        field.max
    } else {
        value
    }
}

/// A value as the field's pattern allows it: 1–2 digits (4 for a year) within range, or a name.
fn value(text: &str, field: &Field) -> Option<u32> {
    if let Some((_, number)) = field.names.iter().find(|(name, _)| *name == text) {
        return Some(*number);
    }
    let digits = text.len();
    let shape_fits = text.chars().all(|c| c.is_ascii_digit())
        && if field.year {
            digits == 4
        } else {
            (1..=2).contains(&digits)
        };
    if !shape_fits {
        return None;
    }
    let number: u32 = text.parse().ok()?;
    (field.min..=field.written_max)
        .contains(&number)
        .then_some(number)
}

/// An interval as `cronexpr` reads it: a number it knows (0–59 in one or two digits, or a year
/// 1970–2099), anything else none (so out of range).
fn interval(text: &str) -> Option<u32> {
    if !text.chars().all(|c| c.is_ascii_digit()) || text.is_empty() {
        return None;
    }
    let number: u32 = text.parse().ok()?;
    match text.len() {
        1 => Some(number),
        2 if number <= 59 => Some(number),
        4 if (1970..=2099).contains(&number) => Some(number),
        _ => None,
    }
}

/// The values a span selects.
fn span_values(first: u32, last: u32, step: u32) -> impl Iterator<Item = u32> {
    (first..=last).step_by(step as usize)
}

/// A field without special forms: `*` when any entry is every value, else the values.
fn plain_field(text: &str, field: &Field) -> Result<String, String> {
    let mut values = std::collections::BTreeSet::new();
    for entry in entries(text, field)? {
        match entry {
            Entry::Every => return Ok("*".to_owned()),
            Entry::Span { first, last, step } => values.extend(span_values(first, last, step)),
            Entry::Other(entry) => {
                return Err(format!("syntax error in {} field: '{entry}'", field.name));
            }
        }
    }
    listed(values, field)
}

fn listed(values: std::collections::BTreeSet<u32>, field: &Field) -> Result<String, String> {
    if values.is_empty() {
        return Err(format!(
            "the {} field selects no {} (a range that runs backwards?)",
            field.name, field.name
        ));
    }
    Ok(values
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(","))
}

/// The day of month: values, `L`, `LW` and `nW`.
fn day_of_month_field(text: &str) -> Result<String, String> {
    let field = &DAY_OF_MONTH;
    let mut values = std::collections::BTreeSet::new();
    let mut special = Vec::new();
    let mut every = false;
    for entry in entries(text, field)? {
        match entry {
            Entry::Every => every = true,
            Entry::Span { first, last, step } => values.extend(span_values(first, last, step)),
            Entry::Other(entry) => {
                if entry == "l" {
                    special.push("L".to_owned());
                } else if entry == "lw" {
                    special.push("LW".to_owned());
                } else if let Some(day) = entry.strip_suffix('w').and_then(|d| value(d, field)) {
                    special.push(format!("{day}W"));
                } else {
                    return Err(format!("syntax error in day-of-month field: '{entry}'"));
                }
            }
        }
    }
    if every {
        return Ok("*".to_owned());
    }
    with_special(values, special, field)
}

/// The day of week: values, `nL` and `n#k`.
fn day_of_week_field(text: &str) -> Result<String, String> {
    let field = &DAY_OF_WEEK;
    let mut values = std::collections::BTreeSet::new();
    let mut special = Vec::new();
    let mut every = false;
    for entry in entries(text, field)? {
        match entry {
            Entry::Every => every = true,
            Entry::Span { first, last, step } => values.extend(span_values(first, last, step)),
            Entry::Other(entry) => {
                if let Some(day) = entry.strip_suffix('l').and_then(|d| value(d, field)) {
                    special.push(format!("{}#L", wrap(day, field)));
                } else if let Some((day, nth)) = entry.split_once('#')
                    && let Some(day) = value(day, field)
                    && let Some(nth @ 1..=5) = nth.parse::<u32>().ok().filter(|_| nth.len() == 1)
                {
                    special.push(format!("{}#{nth}", wrap(day, field)));
                } else {
                    return Err(format!("syntax error in day-of-week field: '{entry}'"));
                }
            }
        }
    }
    if every {
        return Ok("*".to_owned());
    }
    with_special(values, special, field)
}

fn with_special(
    values: std::collections::BTreeSet<u32>,
    special: Vec<String>,
    field: &Field,
) -> Result<String, String> {
    if special.is_empty() {
        return listed(values, field);
    }
    let mut parts: Vec<String> = values.iter().map(u32::to_string).collect();
    parts.extend(special);
    Ok(parts.join(","))
}
