//! `yamlencode` and `yamldecode` as Nomad's jobspec has them (go-cty-yaml): the text
//! `yamlencode` writes (block style, every string double-quoted unless it spans lines, which
//! a literal block holds; long double-quoted strings folded past column 80) and the values
//! `yamldecode` reads (YAML 1.1 scalars: `yes`/`no`/`on`/`off`/`y`/`n` are booleans, `~` is
//! null, hex and octal integers, timestamps become RFC 3339 strings; anchors, aliases and `<<`
//! merge keys; one document only).
//!
//! Parsing YAML's syntax is the `saphyr-parser` crate's work (events with each scalar's
//! style and tag); resolving scalars to values is here, because go-cty-yaml resolves them by
//! YAML 1.1's rules where the parser's own schema is YAML 1.2's.

use std::collections::HashMap;

use drover_structs::time::days_from_civil;
use hcl::{Map, Value};
use saphyr_parser::{Event, Parser, ScalarStyle, Tag};

use super::format_rfc3339;

/// go-yaml's preferred line width, past which a double-quoted string is folded at a space.
const BEST_WIDTH: usize = 80;
/// go-yaml's indentation step.
const INDENT: usize = 2;

pub(super) fn declare(context: &mut hcl::eval::Context<'_>) {
    use hcl::eval::{FuncDef, ParamType};
    context.declare_func(
        "yamlencode",
        FuncDef::builder().param(ParamType::Any).build(|arguments| {
            super::argument(&arguments, 0).map(|value| Value::String(encode(value)))
        }),
    );
    context.declare_func(
        "yamldecode",
        FuncDef::builder()
            .param(ParamType::String)
            .build(|arguments| {
                super::text(&arguments, 0)
                    .and_then(|source| decode(&source))
                    .map_err(|problem| format!("yamldecode: {problem}"))
            }),
    );
}

/// `yamlencode`.
pub(super) fn encode(value: &Value) -> String {
    let mut emitter = Emitter::default();
    match value {
        Value::Array(items) if !items.is_empty() => emitter.sequence(items, 0, true),
        Value::Object(map) if !map.is_empty() => emitter.mapping(map, 0, true),
        other => emitter.inline(other, INDENT),
    }
    if emitter.column != 0 {
        emitter.out.push('\n');
    }
    emitter.out
}

#[derive(Default)]
struct Emitter {
    out: String,
    /// Characters written since the last line break.
    column: usize,
}

fn is_break(character: char) -> bool {
    matches!(character, '\r' | '\n' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

/// go-yaml's `is_printable` (with Unicode output on).
fn is_printable(character: char) -> bool {
    matches!(character,
        '\n' | '\u{20}'..='\u{7e}' | '\u{85}' | '\u{a0}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}'
        | '\u{10000}'..='\u{10ffff}')
        && character != '\u{feff}'
}

/// Whether a multi-line string may be written as a literal block (go-yaml's
/// `block_allowed`): no unprintable character, no space before a line break, no trailing
/// space.
fn literal_allowed(text: &str) -> bool {
    let mut previous_space = false;
    for character in text.chars() {
        if !is_printable(character) && !is_break(character) {
            return false;
        }
        if character == '\r' {
            return false;
        }
        if is_break(character) && previous_space {
            return false;
        }
        previous_space = character == ' ';
    }
    !text.ends_with(' ')
}

impl Emitter {
    fn push(&mut self, text: &str) {
        for character in text.chars() {
            self.out.push(character);
            if is_break(character) {
                self.column = 0;
            } else {
                self.column += 1;
            }
        }
    }

    /// Starts a line at `indent` unless the output already stands at its start.
    fn indent_to(&mut self, indent: usize) {
        if self.column != 0 {
            self.out.push('\n');
            self.column = 0;
        }
        while self.column < indent {
            self.push(" ");
        }
    }

    fn mapping(&mut self, map: &Map<String, Value>, indent: usize, inline_first: bool) {
        let mut keys: Vec<&String> = map.keys().collect();
        keys.sort();
        for (index, key) in keys.into_iter().enumerate() {
            if index > 0 || !inline_first {
                self.indent_to(indent);
            }
            if key.contains(is_break) || key.chars().count() > 128 {
                // Not a simple key (go-yaml's rule): `? key` on its own, then `: value`.
                self.push("? ");
                self.inline(&Value::String(key.to_string()), indent + INDENT);
                self.indent_to(indent);
            } else {
                self.double_quoted(key, indent + INDENT, false);
            }
            self.push(":");
            let value = &map[key.as_str()];
            match value {
                Value::Array(items) if !items.is_empty() => self.sequence(items, indent, false),
                Value::Object(inner) if !inner.is_empty() => {
                    self.mapping(inner, indent + INDENT, false);
                }
                other => {
                    self.push(" ");
                    self.inline(other, indent + INDENT);
                }
            }
        }
    }

    fn sequence(&mut self, items: &[Value], indent: usize, inline_first: bool) {
        for (index, item) in items.iter().enumerate() {
            if index > 0 || !inline_first {
                self.indent_to(indent);
            }
            self.push("- ");
            match item {
                Value::Array(inner) if !inner.is_empty() => {
                    self.sequence(inner, indent + INDENT, true);
                }
                Value::Object(inner) if !inner.is_empty() => {
                    self.mapping(inner, indent + INDENT, true);
                }
                other => self.inline(other, indent + INDENT),
            }
        }
    }

    /// A scalar or an empty collection, where the output stands; `indent` is where the lines of
    /// a literal block or of a folded string go.
    fn inline(&mut self, value: &Value, indent: usize) {
        match value {
            Value::Null => self.push("null"),
            Value::Bool(flag) => self.push(if *flag { "true" } else { "false" }),
            Value::Number(number) => self.push(&number.to_string()),
            Value::String(text) if text.contains('\n') && literal_allowed(text) => {
                self.literal(text, indent);
            }
            Value::String(text) => self.double_quoted(text, indent, true),
            Value::Array(_) => self.push("[]"),
            Value::Object(_) => self.push("{}"),
        }
    }

    /// go-yaml's literal block: `|`, an indentation digit when the text starts with a space or
    /// a break, the chomping indicator, then the lines at `indent`.
    fn literal(&mut self, text: &str, indent: usize) {
        self.push("|");
        if text.starts_with(' ') || text.starts_with(is_break) {
            self.push(&INDENT.to_string());
        }
        let mut reversed = text.chars().rev();
        let chomp = match (reversed.next(), reversed.next()) {
            (Some(last), _) if !is_break(last) => "-",
            (Some(_), None) => "+",
            (Some(_), Some(before)) if is_break(before) => "+",
            _ => "",
        };
        self.push(chomp);
        self.out.push('\n');
        self.column = 0;
        let mut at_line_start = true;
        for character in text.chars() {
            if is_break(character) {
                self.out.push('\n');
                self.column = 0;
                at_line_start = true;
            } else {
                if at_line_start {
                    while self.column < indent {
                        self.push(" ");
                    }
                    at_line_start = false;
                }
                self.push(&character.to_string());
            }
        }
    }

    /// go-yaml's double-quoted scalar: escapes for quotes, backslashes, breaks and unprintable
    /// characters; past column 80 a single space becomes a line break (when `allow_breaks`:
    /// never in a key).
    fn double_quoted(&mut self, text: &str, indent: usize, allow_breaks: bool) {
        self.push("\"");
        let characters: Vec<char> = text.chars().collect();
        let mut previous_space = false;
        for (index, &character) in characters.iter().enumerate() {
            let needs_escape = !is_printable(character)
                || is_break(character)
                || character == '"'
                || character == '\\';
            if needs_escape {
                let escaped = match character {
                    '\0' => "\\0".to_string(),
                    '\u{7}' => "\\a".to_string(),
                    '\u{8}' => "\\b".to_string(),
                    '\t' => "\\t".to_string(),
                    '\n' => "\\n".to_string(),
                    '\u{b}' => "\\v".to_string(),
                    '\u{c}' => "\\f".to_string(),
                    '\r' => "\\r".to_string(),
                    '\u{1b}' => "\\e".to_string(),
                    '"' => "\\\"".to_string(),
                    '\\' => "\\\\".to_string(),
                    '\u{85}' => "\\N".to_string(),
                    '\u{a0}' => "\\_".to_string(),
                    '\u{2028}' => "\\L".to_string(),
                    '\u{2029}' => "\\P".to_string(),
                    other if u32::from(other) <= 0xff => format!("\\x{:02X}", u32::from(other)),
                    other if u32::from(other) <= 0xffff => format!("\\u{:04X}", u32::from(other)),
                    other => format!("\\U{:08X}", u32::from(other)),
                };
                self.push(&escaped);
                previous_space = false;
            } else if character == ' ' {
                if allow_breaks
                    && !previous_space
                    && self.column > BEST_WIDTH
                    && index != 0
                    && index != characters.len() - 1
                {
                    self.indent_to(indent);
                    if characters.get(index + 1) == Some(&' ') {
                        self.push("\\");
                    }
                } else {
                    self.push(" ");
                }
                previous_space = true;
            } else {
                self.push(&character.to_string());
                previous_space = false;
            }
        }
        self.push("\"");
    }
}

/// `yamldecode`.
pub(super) fn decode(source: &str) -> Result<Value, String> {
    let source = if source.is_empty() { "\n" } else { source };
    let mut decoder = Decoder {
        events: Parser::new_from_str(source),
        anchors: HashMap::new(),
    };
    match decoder.next()? {
        Event::StreamStart => {}
        _ => return Err("missing stream start token".to_string()),
    }
    let value = match decoder.next()? {
        Event::DocumentStart(_) => {
            let event = decoder.next()?;
            decoder.node(event)?
        }
        // A stream without a document (an empty or comment-only text) has no value, as
        // go-cty-yaml answers.
        _ => return Err("missing start of document".to_string()),
    };
    match decoder.next()? {
        Event::DocumentEnd => {}
        Event::DocumentStart(_) => return Err("only a single document is allowed".to_string()),
        _ => return Err("unexpected extra content after value".to_string()),
    }
    match decoder.next()? {
        Event::StreamEnd => Ok(value),
        Event::DocumentStart(_) => Err("only a single document is allowed".to_string()),
        _ => Err("unexpected extra content after value".to_string()),
    }
}

struct Decoder<'input> {
    events: Parser<'input, saphyr_parser::StrInput<'input>>,
    anchors: HashMap<usize, Value>,
}

/// A resolved mapping key: a string, or the `<<` merge key.
enum Key {
    Text(String),
    Merge,
}

impl<'input> Decoder<'input> {
    fn next(&mut self) -> Result<Event<'input>, String> {
        match self.events.next() {
            Some(Ok((event, _))) => Ok(event),
            Some(Err(error)) => Err(error.to_string()),
            None => Err("unexpected end of the YAML stream".to_string()),
        }
    }

    fn remember(&mut self, anchor: usize, value: &Value) {
        if anchor != 0 {
            self.anchors.insert(anchor, value.clone());
        }
    }

    fn node(&mut self, event: Event<'input>) -> Result<Value, String> {
        match event {
            Event::Scalar(text, style, anchor, tag) => {
                let value = resolve_scalar(&text, style, tag.as_deref())?;
                self.remember(anchor, &value);
                Ok(value)
            }
            Event::Alias(anchor) => self
                .anchors
                .get(&anchor)
                .cloned()
                .ok_or_else(|| "reference to an undefined anchor".to_string()),
            Event::SequenceStart(anchor, tag) => {
                check_collection_tag(tag.as_deref(), "seq", "sequence")?;
                let mut items = Vec::new();
                loop {
                    match self.next()? {
                        Event::SequenceEnd => break,
                        event => items.push(self.node(event)?),
                    }
                }
                let value = Value::Array(items);
                self.remember(anchor, &value);
                Ok(value)
            }
            Event::MappingStart(anchor, tag) => {
                check_collection_tag(tag.as_deref(), "map", "mapping")?;
                let mut map = Map::new();
                loop {
                    let key = match self.next()? {
                        Event::MappingEnd => break,
                        Event::Scalar(text, style, _, tag) => {
                            mapping_key(&text, style, tag.as_deref())?
                        }
                        _ => return Err("only strings are allowed as mapping keys".to_string()),
                    };
                    let event = self.next()?;
                    let value = self.node(event)?;
                    match key {
                        Key::Text(key) => {
                            map.insert(key, value);
                        }
                        Key::Merge => match value {
                            Value::Object(merged) => map.extend(merged),
                            _ => {
                                return Err("cannot merge a non-mapping into a mapping".to_string());
                            }
                        },
                    }
                }
                map.sort_keys();
                let value = Value::Object(map);
                self.remember(anchor, &value);
                Ok(value)
            }
            _ => Err("expecting a value".to_string()),
        }
    }
}

/// The long form of a tag, as go-yaml compares them.
fn long_tag(tag: &Tag) -> String {
    if tag.handle == "!!" {
        format!("tag:yaml.org,2002:{}", tag.suffix)
    } else {
        format!("{}{}", tag.handle, tag.suffix)
    }
}

fn check_collection_tag(tag: Option<&Tag>, name: &str, kind: &str) -> Result<(), String> {
    match tag.map(long_tag) {
        None => Ok(()),
        Some(tag) if tag == format!("tag:yaml.org,2002:{name}") => Ok(()),
        Some(tag) => Err(format!("can't interpret {kind} as {tag}")),
    }
}

fn mapping_key(text: &str, style: ScalarStyle, tag: Option<&Tag>) -> Result<Key, String> {
    if tag.is_none() && style == ScalarStyle::Plain && text == "<<" {
        return Ok(Key::Merge);
    }
    match resolve_scalar(text, style, tag)? {
        Value::Null => Err("mapping key cannot be null".to_string()),
        Value::String(text) => Ok(Key::Text(text)),
        Value::Bool(flag) => Ok(Key::Text(flag.to_string())),
        Value::Number(number) => Ok(Key::Text(number.to_string())),
        _ => Err("only strings are allowed as mapping keys".to_string()),
    }
}

const STR_TAG: &str = "tag:yaml.org,2002:str";
const BINARY_TAG: &str = "tag:yaml.org,2002:binary";
const BOOL_TAG: &str = "tag:yaml.org,2002:bool";
const INT_TAG: &str = "tag:yaml.org,2002:int";
const FLOAT_TAG: &str = "tag:yaml.org,2002:float";
const NULL_TAG: &str = "tag:yaml.org,2002:null";
const TIMESTAMP_TAG: &str = "tag:yaml.org,2002:timestamp";

/// YAML 1.1's plain words with a value.
fn resolve_word(text: &str) -> Option<Value> {
    match text {
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            Some(Value::Bool(true))
        }
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            Some(Value::Bool(false))
        }
        "" | "~" | "null" | "Null" | "NULL" => Some(Value::Null),
        _ => None,
    }
}

fn is_integer_literal(text: &str) -> bool {
    let body = text.strip_prefix(['-', '+']).unwrap_or(text);
    if let Some(octal) = body.strip_prefix("0o") {
        return !octal.is_empty() && octal.bytes().all(|byte| matches!(byte, b'0'..=b'7' | b'_'));
    }
    if let Some(hex) = body.strip_prefix("0x") {
        return !hex.is_empty()
            && hex
                .bytes()
                .all(|byte| byte.is_ascii_hexdigit() || byte == b'_');
    }
    body.bytes()
        .all(|byte| byte.is_ascii_digit() || byte == b'_')
}

fn is_float_literal(text: &str) -> bool {
    let body = text.strip_prefix(['-', '+']).unwrap_or(text);
    let (mantissa, exponent) = match body.find(['e', 'E']) {
        Some(at) => (&body[..at], Some(&body[at + 1..])),
        None => (body, None),
    };
    let mantissa_ok = match mantissa.split_once('.') {
        Some(("", fraction)) => {
            !fraction.is_empty() && fraction.bytes().all(|b| b.is_ascii_digit())
        }
        Some((whole, fraction)) => {
            !whole.is_empty()
                && whole.bytes().all(|b| b.is_ascii_digit())
                && fraction.bytes().all(|b| b.is_ascii_digit())
        }
        None => !mantissa.is_empty() && mantissa.bytes().all(|b| b.is_ascii_digit()),
    };
    let exponent_ok = exponent.is_none_or(|exponent| {
        let digits = exponent.strip_prefix(['-', '+']).unwrap_or(exponent);
        !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
    });
    mantissa_ok && exponent_ok
}

/// A number as cty parses one: decimal integers and floats first, then Go's `0x`/`0o`/`0`
/// prefixed integers.
fn parse_number(text: &str) -> Option<Value> {
    let plain = text.replace('_', "");
    let decimal = plain.strip_prefix('+').unwrap_or(&plain);
    if let Ok(integer) = decimal.parse::<i64>() {
        return Some(Value::from(integer));
    }
    if let Ok(integer) = decimal.parse::<u64>() {
        return Some(Value::from(integer));
    }
    if is_float_literal(decimal)
        && let Ok(float) = decimal.parse::<f64>()
        && float.is_finite()
    {
        return hcl::Number::from_f64(float).map(Value::Number);
    }
    let (negative, body) = match decimal.strip_prefix('-') {
        Some(body) => (true, body),
        None => (false, decimal),
    };
    let parsed = if let Some(hex) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        i64::from_str_radix(hex, 16).ok()
    } else if let Some(octal) = body.strip_prefix("0o").or_else(|| body.strip_prefix("0O")) {
        i64::from_str_radix(octal, 8).ok()
    } else if let Some(binary) = body.strip_prefix("0b").or_else(|| body.strip_prefix("0B")) {
        i64::from_str_radix(binary, 2).ok()
    } else if body.len() > 1 && body.starts_with('0') {
        i64::from_str_radix(&body[1..], 8).ok()
    } else {
        None
    }?;
    Some(Value::from(if negative { -parsed } else { parsed }))
}

/// go-cty-yaml's timestamps: `YYYY-M-D`, `YYYY-M-D[Tt]H:M:S[.f](Z|±hh:mm)` or
/// `YYYY-M-D H:M:S[.f]` (UTC), written back as RFC 3339.
fn parse_timestamp(text: &str) -> Option<String> {
    let year_digits = text.bytes().take_while(u8::is_ascii_digit).count();
    if year_digits != 4 || text.as_bytes().get(4) != Some(&b'-') {
        return None;
    }
    let number = |part: &str, max_digits: usize| -> Option<i64> {
        (!part.is_empty() && part.len() <= max_digits && part.bytes().all(|b| b.is_ascii_digit()))
            .then(|| part.parse().ok())?
    };
    let (date, time) = match text.find(['T', 't', ' ']) {
        Some(at) => (&text[..at], Some((&text[at..at + 1], &text[at + 1..]))),
        None => (text, None),
    };
    let mut date_parts = date.split('-');
    let year = number(date_parts.next()?, 4)?;
    let month = number(date_parts.next()?, 2)?;
    let day = number(date_parts.next()?, 2)?;
    if date_parts.next().is_some() || !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    let days = days_from_civil(year, month, day);
    let Some((separator, time)) = time else {
        return format_rfc3339(days * 86_400, 0);
    };
    let (clock, offset) = if separator == " " {
        (time, 0)
    } else if let Some(clock) = time.strip_suffix(['Z', 'z']) {
        (clock, 0)
    } else {
        let at = time.rfind(['+', '-'])?;
        let zone = &time[at..];
        let sign = if zone.starts_with('-') { -1 } else { 1 };
        let (hours, minutes) = zone[1..].split_once(':')?;
        let (hours, minutes) = (number(hours, 2)?, number(minutes, 2)?);
        (&time[..at], sign * (hours * 3600 + minutes * 60))
    };
    let clock = clock.split_once('.').map_or(clock, |(whole, fraction)| {
        if fraction.bytes().all(|b| b.is_ascii_digit()) && !fraction.is_empty() {
            whole
        } else {
            ""
        }
    });
    let mut clock_parts = clock.split(':');
    let hour = number(clock_parts.next()?, 2)?;
    let minute = number(clock_parts.next()?, 2)?;
    let second = number(clock_parts.next()?, 2)?;
    if clock_parts.next().is_some() || hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset;
    format_rfc3339(seconds, offset)
}

fn resolve_scalar(text: &str, style: ScalarStyle, tag: Option<&Tag>) -> Result<Value, String> {
    let tag = tag.map(long_tag).unwrap_or_default();
    let known = [
        "",
        STR_TAG,
        BOOL_TAG,
        INT_TAG,
        FLOAT_TAG,
        NULL_TAG,
        TIMESTAMP_TAG,
        BINARY_TAG,
    ];
    if !known.contains(&tag.as_str()) {
        return Err(format!("unsupported tag {tag:?}"));
    }
    let quoted = matches!(style, ScalarStyle::SingleQuoted | ScalarStyle::DoubleQuoted);
    let block = matches!(style, ScalarStyle::Literal | ScalarStyle::Folded);
    let mut tag = tag;
    if tag != STR_TAG && tag != BINARY_TAG {
        if quoted || block {
            return Ok(Value::String(text.to_string()));
        }
        if let Some(value) = resolve_word(text) {
            return Ok(value);
        }
        if tag.is_empty() && matches!(text, ".nan" | ".NaN" | ".NAN") {
            return Err("floating point NaN is not supported".to_string());
        }
        if matches!(
            text,
            ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" | "-.inf" | "-.Inf" | "-.INF"
        ) {
            return Err("infinity is not supported".to_string());
        }
        match text.as_bytes().first() {
            Some(b'.') => {
                if let Some(number) = parse_number(text) {
                    return Ok(number);
                }
            }
            Some(b'0'..=b'9' | b'+' | b'-') => {
                if (tag.is_empty() || tag == TIMESTAMP_TAG)
                    && let Some(timestamp) = parse_timestamp(text)
                {
                    return Ok(Value::String(timestamp));
                }
                if is_integer_literal(text) {
                    tag = INT_TAG.to_string();
                } else if is_float_literal(text) {
                    tag = FLOAT_TAG.to_string();
                }
            }
            _ => {}
        }
    }
    match tag.as_str() {
        STR_TAG | "" => Ok(Value::String(text.to_string())),
        BINARY_TAG => {
            use base64::Engine as _;
            base64::engine::general_purpose::STANDARD
                .decode(text)
                .map_err(|_| format!("cannot parse {text:?} as {tag}: not valid base64"))?;
            Ok(Value::String(text.to_string()))
        }
        BOOL_TAG => match resolve_word(text) {
            Some(Value::Bool(flag)) => Ok(Value::Bool(flag)),
            _ => Err(format!("cannot parse {text:?} as {tag}")),
        },
        INT_TAG | FLOAT_TAG => {
            parse_number(text).ok_or_else(|| format!("cannot parse {text:?} as {tag}"))
        }
        TIMESTAMP_TAG => parse_timestamp(text)
            .map(Value::String)
            .ok_or_else(|| format!("cannot parse {text:?} as {tag}")),
        _ => Ok(Value::Null),
    }
}
