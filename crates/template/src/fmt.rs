//! Go's `fmt` for template values: `Sprint`, `Sprintln` and `Sprintf` with Go's verbs, flags,
//! width and precision, and its in-band error texts (`%!d(string=x)`, `%!s(MISSING)`,
//! `%!(EXTRA int=1)`). Lists and maps print element by element with the same verb, as Go
//! prints slices and maps (`[a b]`, `map[k:v]`, keys sorted).

use std::fmt::Write as _;

use crate::Value;

/// `fmt.Sprint`: operands joined with a space where neither side is a string.
pub fn sprint(args: &[Value]) -> String {
    let mut out = String::new();
    let mut previous_string = false;
    for (index, arg) in args.iter().enumerate() {
        let is_string = matches!(arg, Value::String(_));
        if index > 0 && !is_string && !previous_string {
            out.push(' ');
        }
        format_value(&mut out, arg, 'v', &Spec::default(), true);
        previous_string = is_string;
    }
    out
}

/// `fmt.Sprintln`: operands joined with spaces, then a newline.
pub fn sprintln(args: &[Value]) -> String {
    let mut out = String::new();
    for (index, arg) in args.iter().enumerate() {
        if index > 0 {
            out.push(' ');
        }
        format_value(&mut out, arg, 'v', &Spec::default(), true);
    }
    out.push('\n');
    out
}

/// Flags, width and precision of one verb.
#[derive(Debug, Clone, Default)]
struct Spec {
    plus: bool,
    minus: bool,
    sharp: bool,
    space: bool,
    zero: bool,
    width: Option<usize>,
    precision: Option<usize>,
}

/// `fmt.Sprintf`.
pub fn sprintf(format: &str, args: &[Value]) -> String {
    let mut out = String::with_capacity(format.len() + 8 * args.len());
    let bytes = format.as_bytes();
    let mut next_arg = 0;
    let mut reordered = false;
    let mut i = 0;
    while i < bytes.len() {
        let Some(offset) = format[i..].find('%') else {
            out.push_str(&format[i..]);
            break;
        };
        out.push_str(&format[i..i + offset]);
        i += offset + 1;
        let mut spec = Spec::default();
        while i < bytes.len() {
            match bytes[i] {
                b'+' => spec.plus = true,
                b'-' => spec.minus = true,
                b'#' => spec.sharp = true,
                b' ' => spec.space = true,
                b'0' => spec.zero = true,
                _ => break,
            }
            i += 1;
        }
        let mut good_index = true;
        // An explicit argument index before the width.
        let mut index_arg = |i: &mut usize, next_arg: &mut usize, good: &mut bool| {
            if *i < bytes.len() && bytes[*i] == b'[' {
                reordered = true;
                let Some(close) = format[*i..].find(']') else {
                    *good = false;
                    *i = bytes.len();
                    return;
                };
                match format[*i + 1..*i + close].parse::<usize>() {
                    Ok(n) if n >= 1 && n <= args.len() => *next_arg = n - 1,
                    _ => *good = false,
                }
                *i += close + 1;
            }
        };
        index_arg(&mut i, &mut next_arg, &mut good_index);
        if i < bytes.len() && bytes[i] == b'*' {
            i += 1;
            match args.get(next_arg) {
                Some(Value::Int(width)) => {
                    if *width < 0 {
                        spec.minus = true;
                    }
                    spec.width = Some(width.unsigned_abs() as usize);
                }
                _ => out.push_str("%!(BADWIDTH)"),
            }
            next_arg += 1;
        } else {
            let start = i;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            if i > start {
                spec.width = format[start..i].parse().ok();
            }
        }
        if i < bytes.len() && bytes[i] == b'.' {
            i += 1;
            index_arg(&mut i, &mut next_arg, &mut good_index);
            if i < bytes.len() && bytes[i] == b'*' {
                i += 1;
                match args.get(next_arg) {
                    Some(Value::Int(precision)) if *precision >= 0 => {
                        spec.precision = Some(*precision as usize);
                    }
                    _ => out.push_str("%!(BADPREC)"),
                }
                next_arg += 1;
            } else {
                let start = i;
                while i < bytes.len() && bytes[i].is_ascii_digit() {
                    i += 1;
                }
                spec.precision = Some(format[start..i].parse().unwrap_or(0));
            }
        }
        index_arg(&mut i, &mut next_arg, &mut good_index);
        let Some(verb) = format[i..].chars().next() else {
            out.push_str("%!(NOVERB)");
            break;
        };
        i += verb.len_utf8();
        if spec.minus {
            spec.zero = false;
        }
        if verb == '%' {
            out.push('%');
            continue;
        }
        if !good_index {
            let _ = write!(out, "%!{verb}(BADINDEX)");
            continue;
        }
        let Some(arg) = args.get(next_arg) else {
            let _ = write!(out, "%!{verb}(MISSING)");
            continue;
        };
        next_arg += 1;
        match verb {
            'T' => pad(&mut out, arg.type_name(), &spec, false),
            'v' if spec.sharp => {
                let mut text = String::new();
                go_syntax(&mut text, arg, true);
                pad(&mut out, &text, &spec, false);
            }
            _ => format_value(&mut out, arg, verb, &spec, true),
        }
    }
    if !reordered && next_arg < args.len() {
        out.push_str("%!(EXTRA ");
        for (index, arg) in args[next_arg..].iter().enumerate() {
            if index > 0 {
                out.push_str(", ");
            }
            if matches!(arg, Value::Nil | Value::Missing) {
                out.push_str("<nil>");
            } else {
                let _ = write!(out, "{}=", arg.type_name());
                format_value(&mut out, arg, 'v', &Spec::default(), true);
            }
        }
        out.push(')');
    }
    out
}

/// Writes `value` with `verb`; `top` is false inside lists and maps, where nil prints as
/// `<nil>` for any verb.
fn format_value(out: &mut String, value: &Value, verb: char, spec: &Spec, top: bool) {
    match value {
        Value::Missing | Value::Nil => {
            if verb == 'v' || !top {
                pad(out, "<nil>", spec, false);
            } else {
                let _ = write!(out, "%!{verb}(<nil>)");
            }
        }
        Value::Bool(flag) => match verb {
            'v' | 't' => pad(out, if *flag { "true" } else { "false" }, spec, false),
            _ => bad_verb(out, verb, value, spec),
        },
        Value::Int(number) => format_int(out, *number, verb, spec, value),
        Value::Float(number) => format_float(out, *number, verb, spec, value),
        Value::String(text) => format_string(out, text, verb, spec, value),
        Value::List(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(' ');
                }
                format_value(out, item, verb, spec, false);
            }
            out.push(']');
        }
        Value::Map(map) => {
            out.push_str("map[");
            for (index, (key, item)) in map.iter().enumerate() {
                if index > 0 {
                    out.push(' ');
                }
                format_string(out, key, verb, spec, &Value::String(key.clone()));
                out.push(':');
                format_value(out, item, verb, spec, false);
            }
            out.push(']');
        }
    }
}

/// Go's `%!verb(type=value)`, the value printed with `%v` and the verb's flags.
fn bad_verb(out: &mut String, verb: char, value: &Value, spec: &Spec) {
    let _ = write!(out, "%!{verb}({}=", value.type_name());
    format_value(out, value, 'v', spec, false);
    out.push(')');
}

/// Pads `text` to the width; `numeric` puts zero padding after the sign.
fn pad(out: &mut String, text: &str, spec: &Spec, numeric: bool) {
    let width = spec.width.unwrap_or(0);
    let length = text.chars().count();
    if length >= width {
        out.push_str(text);
        return;
    }
    let fill = width - length;
    if spec.minus {
        out.push_str(text);
        out.extend(std::iter::repeat_n(' ', fill));
    } else if spec.zero {
        let (sign, rest) = if numeric && text.starts_with(['+', '-', ' ']) {
            text.split_at(1)
        } else {
            ("", text)
        };
        out.push_str(sign);
        out.extend(std::iter::repeat_n('0', fill));
        out.push_str(rest);
    } else {
        out.extend(std::iter::repeat_n(' ', fill));
        out.push_str(text);
    }
}

fn sign(negative: bool, spec: &Spec) -> &'static str {
    if negative {
        "-"
    } else if spec.plus {
        "+"
    } else if spec.space {
        " "
    } else {
        ""
    }
}

fn format_int(out: &mut String, number: i64, verb: char, spec: &Spec, value: &Value) {
    let magnitude = number.unsigned_abs();
    let (digits, prefix) = match verb {
        'v' | 'd' => (magnitude.to_string(), ""),
        'b' => (format!("{magnitude:b}"), if spec.sharp { "0b" } else { "" }),
        'o' => (format!("{magnitude:o}"), if spec.sharp { "0" } else { "" }),
        'O' => (format!("{magnitude:o}"), "0o"),
        'x' => (format!("{magnitude:x}"), if spec.sharp { "0x" } else { "" }),
        'X' => (format!("{magnitude:X}"), if spec.sharp { "0X" } else { "" }),
        'c' => {
            let c = u32::try_from(number)
                .ok()
                .and_then(char::from_u32)
                .unwrap_or('\u{FFFD}');
            pad(out, &c.to_string(), spec, false);
            return;
        }
        'q' => {
            let c = u32::try_from(number)
                .ok()
                .and_then(char::from_u32)
                .unwrap_or('\u{FFFD}');
            pad(out, &quote_rune(c, spec.plus), spec, false);
            return;
        }
        'U' => {
            let mut text = format!("U+{magnitude:04X}");
            if spec.sharp
                && let Some(c) = u32::try_from(number).ok().and_then(char::from_u32)
                && !c.is_control()
            {
                let _ = write!(text, " '{c}'");
            }
            pad(out, &text, spec, false);
            return;
        }
        _ => return bad_verb(out, verb, value, spec),
    };
    let mut digits = digits;
    if let Some(precision) = spec.precision {
        if precision == 0 && number == 0 {
            digits.clear();
        }
        while digits.len() < precision {
            digits.insert(0, '0');
        }
    } else if spec.zero
        && !spec.minus
        && let Some(width) = spec.width
    {
        let room = width.saturating_sub(sign(number < 0, spec).len() + prefix.len());
        while digits.len() < room {
            digits.insert(0, '0');
        }
    }
    let prefix = if verb == 'o' && digits.starts_with('0') {
        ""
    } else {
        prefix
    };
    let text = format!("{}{prefix}{digits}", sign(number < 0, spec));
    let unzeroed = Spec {
        zero: false,
        ..spec.clone()
    };
    pad(out, &text, &unzeroed, false);
}

/// The shortest (or `significant`-digit) decimal digits of `number` and its exponent:
/// `digits` = d₁d₂…, value = 0.d₁d₂… × 10^`point`.
fn decimal(number: f64, significant: Option<usize>) -> (String, i32) {
    let text = match significant {
        None => format!("{:e}", number.abs()),
        Some(count) => format!("{:.*e}", count.max(1) - 1, number.abs()),
    };
    let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let mut digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    while digits.len() > 1 && digits.ends_with('0') {
        digits.pop();
    }
    if digits == "0" {
        return (digits, 1);
    }
    (digits, exponent + 1)
}

/// `d.ddde±XX` from digits, with `fraction` digits after the point.
fn exponent_form(digits: &str, point: i32, fraction: usize, upper: bool) -> String {
    let mut out = String::new();
    out.push_str(&digits[..1]);
    if fraction > 0 {
        out.push('.');
        let rest = &digits[1..];
        out.push_str(&rest[..rest.len().min(fraction)]);
        for _ in rest.len()..fraction {
            out.push('0');
        }
    }
    let exponent = if digits == "0" { 0 } else { point - 1 };
    let _ = write!(
        out,
        "{}{}{:02}",
        if upper { 'E' } else { 'e' },
        if exponent < 0 { '-' } else { '+' },
        exponent.unsigned_abs()
    );
    out
}

/// `ddd.ddd` from digits, with `fraction` digits after the point.
fn fixed_form(digits: &str, point: i32, fraction: usize) -> String {
    let mut out = String::new();
    if point <= 0 {
        out.push('0');
    } else {
        for index in 0..point as usize {
            out.push(digits.as_bytes().get(index).map_or('0', |b| *b as char));
        }
    }
    if fraction > 0 {
        out.push('.');
        for index in 0..fraction as i64 {
            let at = i64::from(point) + index;
            let digit = if at < 0 {
                '0'
            } else {
                digits
                    .as_bytes()
                    .get(at as usize)
                    .map_or('0', |b| *b as char)
            };
            out.push(digit);
        }
    }
    out
}

/// Go's `%g`: `precision` significant digits, or the shortest that round-trips.
fn general(number: f64, precision: Option<usize>, upper: bool) -> String {
    let (digits, point) = decimal(number, precision.map(|p| p.max(1)));
    let count = digits.len();
    let mut eprec = precision.map_or(6, |p| p.max(1));
    if precision.is_some() && eprec > count && count as i32 >= point {
        eprec = count;
    }
    let exponent = point - 1;
    if exponent < -4 || exponent >= eprec as i32 {
        return exponent_form(&digits, point, count - 1, upper);
    }
    fixed_form(&digits, point, (count as i32 - point).max(0) as usize)
}

fn format_float(out: &mut String, number: f64, verb: char, spec: &Spec, value: &Value) {
    let body = if number.is_nan() {
        "NaN".to_string()
    } else if number.is_infinite() {
        "Inf".to_string()
    } else {
        match verb {
            'v' | 'g' => general(number, spec.precision, false),
            'G' => general(number, spec.precision, true),
            'e' | 'E' => {
                let precision = spec.precision.unwrap_or(6);
                let (digits, point) = decimal(number, Some(precision + 1));
                exponent_form(&digits, point, precision, verb == 'E')
            }
            'f' | 'F' => format!("{:.*}", spec.precision.unwrap_or(6), number.abs()),
            _ => return bad_verb(out, verb, value, spec),
        }
    };
    let negative = number.is_sign_negative() && !number.is_nan();
    let sign = if number.is_nan() {
        if spec.plus {
            "+"
        } else if spec.space {
            " "
        } else {
            ""
        }
    } else if number.is_infinite() && !negative {
        "+"
    } else {
        sign(negative, spec)
    };
    let text = format!("{sign}{body}");
    let spec = if number.is_finite() {
        spec.clone()
    } else {
        Spec {
            zero: false,
            ..spec.clone()
        }
    };
    pad(out, &text, &spec, true);
}

fn format_string(out: &mut String, text: &str, verb: char, spec: &Spec, value: &Value) {
    let truncated = |text: &str| -> String {
        match spec.precision {
            Some(precision) => text.chars().take(precision).collect(),
            None => text.to_string(),
        }
    };
    match verb {
        'v' | 's' => {
            if spec.precision.is_none() && spec.width.is_none() {
                out.push_str(text);
            } else {
                pad(out, &truncated(text), spec, false);
            }
        }
        'q' => {
            let text = truncated(text);
            let quoted = if spec.sharp && can_backquote(&text) {
                format!("`{text}`")
            } else {
                quote(&text, spec.plus)
            };
            pad(out, &quoted, spec, false);
        }
        'x' | 'X' => {
            let bytes = text.as_bytes();
            let bytes = match spec.precision {
                Some(precision) => &bytes[..bytes.len().min(precision)],
                None => bytes,
            };
            let mut hex = String::new();
            for (index, byte) in bytes.iter().enumerate() {
                if spec.space && index > 0 {
                    hex.push(' ');
                }
                if spec.sharp && (spec.space || index == 0) {
                    hex.push_str(if verb == 'x' { "0x" } else { "0X" });
                }
                if verb == 'x' {
                    let _ = write!(hex, "{byte:02x}");
                } else {
                    let _ = write!(hex, "{byte:02X}");
                }
            }
            pad(out, &hex, spec, false);
        }
        _ => bad_verb(out, verb, value, spec),
    }
}

fn can_backquote(text: &str) -> bool {
    !text
        .chars()
        .any(|c| c == '`' || (c != '\t' && !is_print(c)))
}

fn escape_into(out: &mut String, c: char, quote: char, ascii_only: bool) {
    match c {
        '\u{7}' => out.push_str("\\a"),
        '\u{8}' => out.push_str("\\b"),
        '\u{c}' => out.push_str("\\f"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\u{b}' => out.push_str("\\v"),
        '\\' => out.push_str("\\\\"),
        c if c == quote => {
            out.push('\\');
            out.push(c);
        }
        c if (c as u32) < 0x20 || c == '\u{7f}' => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c if !is_print(c) || (ascii_only && !c.is_ascii()) => {
            if (c as u32) < 0x10000 {
                let _ = write!(out, "\\u{:04x}", c as u32);
            } else {
                let _ = write!(out, "\\U{:08x}", c as u32);
            }
        }
        c => out.push(c),
    }
}

/// Go's `strconv.IsPrint`, as near as the standard library allows: no control characters,
/// no spaces but U+0020, no byte order mark.
pub(crate) fn is_print(c: char) -> bool {
    !(c.is_control() || (c.is_whitespace() && c != ' ') || c == '\u{FEFF}')
}

/// Go's `strconv.Quote` (`QuoteToASCII` when `ascii_only`).
pub fn quote(text: &str, ascii_only: bool) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        escape_into(&mut out, c, '"', ascii_only);
    }
    out.push('"');
    out
}

fn quote_rune(c: char, ascii_only: bool) -> String {
    let mut out = String::from("'");
    escape_into(&mut out, c, '\'', ascii_only);
    out.push('\'');
    out
}

/// `%#v`: Go syntax for the value (`interface {}` elements inside lists and maps).
fn go_syntax(out: &mut String, value: &Value, top: bool) {
    match value {
        Value::Missing | Value::Nil => {
            out.push_str(if top { "<nil>" } else { "interface {}(nil)" })
        }
        Value::Bool(flag) => {
            let _ = write!(out, "{flag}");
        }
        Value::Int(number) => {
            let _ = write!(out, "{number}");
        }
        Value::Float(number) => out.push_str(&general(*number, None, false)),
        Value::String(text) => out.push_str(&quote(text, false)),
        Value::List(items) => {
            out.push_str("[]interface {}{");
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push_str(", ");
                }
                go_syntax(out, item, false);
            }
            out.push('}');
        }
        Value::Map(map) => {
            out.push_str("map[string]interface {}{");
            for (index, (key, item)) in map.iter().enumerate() {
                if index > 0 {
                    out.push_str(", ");
                }
                out.push_str(&quote(key, false));
                out.push(':');
                go_syntax(out, item, false);
            }
            out.push('}');
        }
    }
}

impl std::fmt::Display for Value {
    /// Go's `fmt.Sprint` of one value.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&sprint(std::slice::from_ref(self)))
    }
}
