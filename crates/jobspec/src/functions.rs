//! The HCL2 functions of Nomad's jobspec beyond the handful `eval` declares itself: numeric,
//! string, collection and encoding functions, and `can`/`try`, which need their argument's
//! failure rather than its value and so are resolved on the expression before it is evaluated.
//!
//! Each follows the behaviour of the function of the same name in Nomad's jobspec (go-cty's
//! standard library and go-cty-funcs). Submodules: `data` (dates, CIDR ranges, bcrypt, RSA),
//! `yaml` (yamlencode/yamldecode), `convert` (the type-taking `convert`). The filesystem
//! functions and `convert` are resolved on the expression before it is evaluated
//! ([`resolve_calls`]). Every function of Nomad's jobspec is here; `timestamp` is not one of
//! them (Nomad leaves it out so a jobspec parses the same twice).

use drover_structs::time::{civil_from_days, days_from_civil};
use hcl::eval::{Context, Evaluate, FuncArgs, FuncDef, ParamType};
use hcl::{Map, Value};
use hcl_edit::expr::Expression as EditExpression;
use hcl_edit::visit_mut::{VisitMut, visit_expr_mut};

use crate::value_text::describe_value_kind;

fn argument(arguments: &FuncArgs, index: usize) -> Result<&Value, String> {
    arguments
        .get(index)
        .ok_or_else(|| format!("missing argument {}", index + 1))
}

fn text(arguments: &FuncArgs, index: usize) -> Result<String, String> {
    match argument(arguments, index)? {
        Value::String(text) => Ok(text.clone()),
        Value::Number(number) => Ok(number.to_string()),
        Value::Bool(flag) => Ok(flag.to_string()),
        other => Err(format!(
            "argument {} must be a string, got {}",
            index + 1,
            describe_value_kind(other)
        )),
    }
}

fn number(arguments: &FuncArgs, index: usize) -> Result<f64, String> {
    match argument(arguments, index)? {
        Value::Number(number) => number
            .as_f64()
            .ok_or_else(|| format!("argument {} is not a usable number", index + 1)),
        Value::String(text) => text
            .trim()
            .parse::<f64>()
            .map_err(|_| format!("argument {} must be a number, got {text:?}", index + 1)),
        other => Err(format!(
            "argument {} must be a number, got {}",
            index + 1,
            describe_value_kind(other)
        )),
    }
}

fn whole_number(arguments: &FuncArgs, index: usize) -> Result<i64, String> {
    let value = number(arguments, index)?;
    if value.fract() != 0.0 || value.abs() > 9.0e15 {
        return Err(format!(
            "argument {} must be a whole number, got {value}",
            index + 1
        ));
    }
    Ok(value as i64)
}

fn list(arguments: &FuncArgs, index: usize) -> Result<Vec<Value>, String> {
    match argument(arguments, index)? {
        Value::Array(items) => Ok(items.clone()),
        other => Err(format!(
            "argument {} must be a list, got {}",
            index + 1,
            describe_value_kind(other)
        )),
    }
}

fn map(arguments: &FuncArgs, index: usize) -> Result<Map<String, Value>, String> {
    match argument(arguments, index)? {
        Value::Object(entries) => Ok(entries.clone()),
        other => Err(format!(
            "argument {} must be a map, got {}",
            index + 1,
            describe_value_kind(other)
        )),
    }
}

/// A number result: whole numbers stay integers.
fn number_value(value: f64) -> Result<Value, String> {
    if value.fract() == 0.0 && value.abs() < 9.0e15 {
        return Ok(Value::from(value as i64));
    }
    hcl::Number::from_f64(value)
        .map(Value::Number)
        .ok_or_else(|| format!("the result {value} is not a finite number"))
}

/// Declares the functions of this module in `context`.
pub(crate) fn declare(context: &mut Context<'_>) {
    data::declare(context);
    yaml::declare(context);
    declare_network_and_list_functions(context);
    let one_number = || FuncDef::builder().param(ParamType::Number);
    context.declare_func(
        "abs",
        one_number().build(|arguments| number_value(number(&arguments, 0)?.abs())),
    );
    context.declare_func(
        "ceil",
        one_number().build(|arguments| number_value(number(&arguments, 0)?.ceil())),
    );
    context.declare_func(
        "floor",
        one_number().build(|arguments| number_value(number(&arguments, 0)?.floor())),
    );
    context.declare_func(
        "signum",
        one_number().build(|arguments| {
            let value = number(&arguments, 0)?;
            number_value(if value == 0.0 { 0.0 } else { value.signum() })
        }),
    );
    context.declare_func(
        "log",
        FuncDef::builder()
            .param(ParamType::Number)
            .param(ParamType::Number)
            .build(|arguments| {
                number_value(number(&arguments, 0)?.ln() / number(&arguments, 1)?.ln())
            }),
    );
    context.declare_func(
        "pow",
        FuncDef::builder()
            .param(ParamType::Number)
            .param(ParamType::Number)
            .build(|arguments| number_value(number(&arguments, 0)?.powf(number(&arguments, 1)?))),
    );
    context.declare_func(
        "parseint",
        FuncDef::builder()
            .param(ParamType::Any)
            .param(ParamType::Number)
            .build(|arguments| {
                let digits = text(&arguments, 0)?;
                let base = whole_number(&arguments, 1)?;
                if !(2..=62).contains(&base) {
                    return Err(format!("the base must be between 2 and 62, got {base}"));
                }
                let (negative, digits) = match digits.strip_prefix('-') {
                    Some(rest) => (true, rest),
                    None => (false, digits.strip_prefix('+').unwrap_or(&digits)),
                };
                let mut value: i64 = 0;
                for character in digits.chars() {
                    let digit = match character {
                        '0'..='9' => character as i64 - '0' as i64,
                        'a'..='z' => character as i64 - 'a' as i64 + 10,
                        'A'..='Z' if base <= 36 => character as i64 - 'A' as i64 + 10,
                        'A'..='Z' => character as i64 - 'A' as i64 + 36,
                        _ => -1,
                    };
                    if digit < 0 || digit >= base {
                        return Err(format!("cannot parse {digits:?} as a base {base} integer"));
                    }
                    value = value
                        .checked_mul(base)
                        .and_then(|value| value.checked_add(digit))
                        .ok_or_else(|| format!("{digits:?} is too large"))?;
                }
                if digits.is_empty() {
                    return Err("cannot parse an empty string as an integer".into());
                }
                Ok(Value::from(if negative { -value } else { value }))
            }),
    );

    let one_string = || FuncDef::builder().param(ParamType::String);
    let two_strings = || {
        FuncDef::builder()
            .param(ParamType::String)
            .param(ParamType::String)
    };
    context.declare_func(
        "chomp",
        one_string().build(|arguments| {
            let mut value = text(&arguments, 0)?;
            while value.ends_with('\n') || value.ends_with('\r') {
                value.pop();
            }
            Ok(Value::String(value))
        }),
    );
    context.declare_func(
        "strlen",
        one_string()
            .build(|arguments| Ok(Value::from(text(&arguments, 0)?.chars().count() as u64))),
    );
    context.declare_func(
        "strrev",
        one_string()
            .build(|arguments| Ok(Value::String(text(&arguments, 0)?.chars().rev().collect()))),
    );
    context.declare_func(
        "title",
        one_string().build(|arguments| {
            let mut titled = String::new();
            let mut at_word_start = true;
            for character in text(&arguments, 0)?.chars() {
                if at_word_start {
                    titled.extend(character.to_uppercase());
                } else {
                    titled.push(character);
                }
                at_word_start = !character.is_alphanumeric();
            }
            Ok(Value::String(titled))
        }),
    );
    context.declare_func(
        "trim",
        two_strings().build(|arguments| {
            let cutset = text(&arguments, 1)?;
            Ok(Value::String(
                text(&arguments, 0)?
                    .trim_matches(|character| cutset.contains(character))
                    .to_string(),
            ))
        }),
    );
    context.declare_func(
        "trimprefix",
        two_strings().build(|arguments| {
            let value = text(&arguments, 0)?;
            let prefix = text(&arguments, 1)?;
            Ok(Value::String(
                value.strip_prefix(&prefix).unwrap_or(&value).to_string(),
            ))
        }),
    );
    context.declare_func(
        "trimsuffix",
        two_strings().build(|arguments| {
            let value = text(&arguments, 0)?;
            let suffix = text(&arguments, 1)?;
            Ok(Value::String(
                value.strip_suffix(&suffix).unwrap_or(&value).to_string(),
            ))
        }),
    );
    context.declare_func(
        "indent",
        FuncDef::builder()
            .param(ParamType::Number)
            .param(ParamType::String)
            .build(|arguments| {
                let spaces = " ".repeat(usize::try_from(whole_number(&arguments, 0)?).unwrap_or(0));
                let value = text(&arguments, 1)?;
                Ok(Value::String(value.replace('\n', &format!("\n{spaces}"))))
            }),
    );
    context.declare_func(
        "substr",
        FuncDef::builder()
            .param(ParamType::String)
            .param(ParamType::Number)
            .param(ParamType::Number)
            .build(|arguments| {
                let characters: Vec<char> = text(&arguments, 0)?.chars().collect();
                let count = characters.len() as i64;
                let mut offset = whole_number(&arguments, 1)?;
                let length = whole_number(&arguments, 2)?;
                if offset < 0 {
                    offset += count;
                }
                let offset = offset.clamp(0, count);
                let end = if length < 0 {
                    count
                } else {
                    (offset + length).min(count)
                };
                Ok(Value::String(
                    characters[offset as usize..end.max(offset) as usize]
                        .iter()
                        .collect(),
                ))
            }),
    );
    context.declare_func(
        "regex_replace",
        FuncDef::builder()
            .param(ParamType::String)
            .param(ParamType::String)
            .param(ParamType::String)
            .build(|arguments| {
                let pattern = regex::Regex::new(&text(&arguments, 1)?)
                    .map_err(|error| format!("invalid regular expression: {error}"))?;
                Ok(Value::String(
                    pattern
                        .replace_all(&text(&arguments, 0)?, text(&arguments, 2)?.as_str())
                        .into_owned(),
                ))
            }),
    );
    // go-cty-funcs' crypto functions: the lowercase hex digest of the string's UTF-8 bytes.
    fn hex_digest<D: sha2::Digest>(input: &str) -> Value {
        let digest = D::digest(input.as_bytes());
        Value::String(digest.iter().map(|byte| format!("{byte:02x}")).collect())
    }
    context.declare_func(
        "md5",
        one_string().build(|arguments| Ok(hex_digest::<md5::Md5>(&text(&arguments, 0)?))),
    );
    context.declare_func(
        "sha1",
        one_string().build(|arguments| Ok(hex_digest::<sha1::Sha1>(&text(&arguments, 0)?))),
    );
    context.declare_func(
        "sha256",
        one_string().build(|arguments| Ok(hex_digest::<sha2::Sha256>(&text(&arguments, 0)?))),
    );
    context.declare_func(
        "sha512",
        one_string().build(|arguments| Ok(hex_digest::<sha2::Sha512>(&text(&arguments, 0)?))),
    );
    context.declare_func(
        "uuidv4",
        FuncDef::builder().build(|_| Ok(Value::String(uuid::Uuid::new_v4().to_string()))),
    );
    context.declare_func(
        "uuidv5",
        FuncDef::builder()
            .param(ParamType::String)
            .param(ParamType::String)
            .build(|arguments| {
                // go-cty-funcs: a namespace is "dns", "url", "oid", "x500" or a UUID.
                let namespace = match text(&arguments, 0)?.as_str() {
                    "dns" => uuid::Uuid::NAMESPACE_DNS,
                    "url" => uuid::Uuid::NAMESPACE_URL,
                    "oid" => uuid::Uuid::NAMESPACE_OID,
                    "x500" => uuid::Uuid::NAMESPACE_X500,
                    other => uuid::Uuid::parse_str(other).map_err(|error| {
                        format!(
                            "uuidv5: namespace {other:?} must be dns, url, oid, x500 or a UUID: {error}"
                        )
                    })?,
                };
                use sha1::Digest as _;
                let mut hasher = sha1::Sha1::new();
                hasher.update(namespace.as_bytes());
                hasher.update(text(&arguments, 1)?.as_bytes());
                let digest = hasher.finalize();
                let mut bytes = [0u8; 16];
                bytes.copy_from_slice(&digest[..16]);
                Ok(Value::String(
                    uuid::Builder::from_sha1_bytes(bytes).into_uuid().to_string(),
                ))
            }),
    );
    context.declare_func(
        "timeadd",
        FuncDef::builder()
            .param(ParamType::String)
            .param(ParamType::String)
            .build(|arguments| {
                let timestamp = text(&arguments, 0)?;
                let duration = text(&arguments, 1)?;
                let (seconds, nanos, offset) = parse_rfc3339(&timestamp).ok_or_else(|| {
                    format!("timeadd: timestamp {timestamp:?} is not an RFC 3339 timestamp")
                })?;
                let added = drover_structs::go_duration::parse_signed_go_duration(&duration)
                    .map_err(|error| format!("timeadd: duration {duration:?}: {error}"))?;
                let total =
                    i128::from(seconds) * 1_000_000_000 + i128::from(nanos) + i128::from(added);
                let seconds = i64::try_from(total.div_euclid(1_000_000_000)).map_err(|_| {
                    format!("timeadd: {timestamp:?} + {duration:?} is out of range")
                })?;
                format_rfc3339(seconds, offset)
                    .map(Value::String)
                    .ok_or_else(|| format!("timeadd: {timestamp:?} + {duration:?} is out of range"))
            }),
    );
    context.declare_func(
        "csvdecode",
        one_string().build(|arguments| {
            let records = csv_records(&text(&arguments, 0)?)
                .map_err(|problem| format!("csvdecode: {problem}"))?;
            let mut records = records.into_iter();
            let (_, header) = records
                .next()
                .ok_or_else(|| "csvdecode: missing header line".to_string())?;
            let mut rows = Vec::new();
            for (line, record) in records {
                if record.len() != header.len() {
                    return Err(format!(
                        "csvdecode: record on line {line}: wrong number of fields"
                    ));
                }
                rows.push(Value::Object(
                    header
                        .iter()
                        .cloned()
                        .zip(record.into_iter().map(Value::String))
                        .collect(),
                ));
            }
            Ok(Value::Array(rows))
        }),
    );
    context.declare_func(
        "urlencode",
        one_string().build(|arguments| {
            let mut encoded = String::new();
            for byte in text(&arguments, 0)?.bytes() {
                match byte {
                    b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                        encoded.push(byte as char);
                    }
                    b' ' => encoded.push('+'),
                    other => encoded.push_str(&format!("%{other:02X}")),
                }
            }
            Ok(Value::String(encoded))
        }),
    );

    let one_list = || FuncDef::builder().param(ParamType::Any);
    context.declare_func(
        "chunklist",
        FuncDef::builder()
            .param(ParamType::Any)
            .param(ParamType::Number)
            .build(|arguments| {
                let items = list(&arguments, 0)?;
                let size = whole_number(&arguments, 1)?;
                if size < 0 {
                    return Err("the chunk size must not be negative".into());
                }
                if size == 0 {
                    return Ok(Value::Array(vec![Value::Array(items)]));
                }
                Ok(Value::Array(
                    items
                        .chunks(size as usize)
                        .map(|chunk| Value::Array(chunk.to_vec()))
                        .collect(),
                ))
            }),
    );
    context.declare_func(
        "coalescelist",
        FuncDef::builder()
            .variadic_param(ParamType::Any)
            .build(|arguments| {
                arguments
                    .iter()
                    .find(|value| matches!(value, Value::Array(items) if !items.is_empty()))
                    .cloned()
                    .ok_or_else(|| "no non-empty list".to_string())
            }),
    );
    context.declare_func(
        "compact",
        one_list().build(|arguments| {
            Ok(Value::Array(
                list(&arguments, 0)?
                    .into_iter()
                    .filter(|item| !matches!(item, Value::Null) && *item != Value::from(""))
                    .collect(),
            ))
        }),
    );
    context.declare_func(
        "distinct",
        one_list().build(|arguments| {
            let mut distinct: Vec<Value> = Vec::new();
            for item in list(&arguments, 0)? {
                if !distinct.contains(&item) {
                    distinct.push(item);
                }
            }
            Ok(Value::Array(distinct))
        }),
    );
    context.declare_func(
        "element",
        FuncDef::builder()
            .param(ParamType::Any)
            .param(ParamType::Number)
            .build(|arguments| {
                let items = list(&arguments, 0)?;
                let index = whole_number(&arguments, 1)?;
                if items.is_empty() {
                    return Err("cannot use element on an empty list".into());
                }
                if index < 0 {
                    return Err("the index must not be negative".into());
                }
                Ok(items[index as usize % items.len()].clone())
            }),
    );
    context.declare_func(
        "flatten",
        one_list().build(|arguments| {
            fn flatten_into(items: Vec<Value>, flat: &mut Vec<Value>) {
                for item in items {
                    match item {
                        Value::Array(inner) => flatten_into(inner, flat),
                        other => flat.push(other),
                    }
                }
            }
            let mut flat = Vec::new();
            flatten_into(list(&arguments, 0)?, &mut flat);
            Ok(Value::Array(flat))
        }),
    );
    // As go-cty's `index`: `collection[key]` as a function, not a search.
    context.declare_func(
        "index",
        FuncDef::builder()
            .param(ParamType::Any)
            .param(ParamType::Any)
            .build(|arguments| match argument(&arguments, 0)? {
                Value::Array(items) => {
                    let position = whole_number(&arguments, 1)?;
                    usize::try_from(position)
                        .ok()
                        .and_then(|position| items.get(position))
                        .cloned()
                        .ok_or_else(|| format!("index {position} is out of the list"))
                }
                Value::Object(entries) => {
                    let key = text(&arguments, 1)?;
                    entries
                        .get(&key)
                        .cloned()
                        .ok_or_else(|| format!("the map has no key {key:?}"))
                }
                other => Err(format!(
                    "index needs a list or a map, got {}",
                    describe_value_kind(other)
                )),
            }),
    );
    context.declare_func(
        "keys",
        one_list().build(|arguments| {
            let mut keys: Vec<String> = map(&arguments, 0)?.keys().cloned().collect();
            keys.sort();
            Ok(Value::Array(keys.into_iter().map(Value::String).collect()))
        }),
    );
    context.declare_func(
        "values",
        one_list().build(|arguments| {
            let entries = map(&arguments, 0)?;
            let mut keys: Vec<&String> = entries.keys().collect();
            keys.sort();
            Ok(Value::Array(
                keys.into_iter()
                    .filter_map(|key| entries.get(key).cloned())
                    .collect(),
            ))
        }),
    );
    context.declare_func(
        "range",
        FuncDef::builder()
            .variadic_param(ParamType::Number)
            .build(|arguments| {
                let (start, limit, step) = match arguments.len() {
                    1 => (0.0, number(&arguments, 0)?, 1.0),
                    2 => {
                        let start = number(&arguments, 0)?;
                        let limit = number(&arguments, 1)?;
                        (start, limit, if limit < start { -1.0 } else { 1.0 })
                    }
                    3 => (
                        number(&arguments, 0)?,
                        number(&arguments, 1)?,
                        number(&arguments, 2)?,
                    ),
                    _ => return Err("range takes one, two or three numbers".into()),
                };
                if step == 0.0 || (limit > start && step < 0.0) || (limit < start && step > 0.0) {
                    return Err("the step must move from the start towards the limit".into());
                }
                let mut values = Vec::new();
                let mut current = start;
                while (step > 0.0 && current < limit) || (step < 0.0 && current > limit) {
                    if values.len() >= 1024 {
                        return Err("range makes at most 1024 numbers".into());
                    }
                    values.push(number_value(current)?);
                    current += step;
                }
                Ok(Value::Array(values))
            }),
    );
    // As go-cty's `reverse` (which Nomad also names `strrev`): it reverses a string.
    context.declare_func(
        "reverse",
        one_string()
            .build(|arguments| Ok(Value::String(text(&arguments, 0)?.chars().rev().collect()))),
    );
    context.declare_func(
        "slice",
        FuncDef::builder()
            .param(ParamType::Any)
            .param(ParamType::Number)
            .param(ParamType::Number)
            .build(|arguments| {
                let items = list(&arguments, 0)?;
                let start = whole_number(&arguments, 1)?;
                let end = whole_number(&arguments, 2)?;
                if start < 0 || end < start || end as usize > items.len() {
                    return Err(format!(
                        "slice {start}..{end} is out of the list's {} items",
                        items.len()
                    ));
                }
                Ok(Value::Array(items[start as usize..end as usize].to_vec()))
            }),
    );
    context.declare_func(
        "sort",
        one_list().build(|arguments| {
            let mut texts = list(&arguments, 0)?
                .iter()
                .map(|item| match item {
                    Value::String(text) => Ok(text.clone()),
                    Value::Number(number) => Ok(number.to_string()),
                    other => Err(format!(
                        "sort needs a list of strings, got {}",
                        describe_value_kind(other)
                    )),
                })
                .collect::<Result<Vec<_>, _>>()?;
            texts.sort();
            Ok(Value::Array(texts.into_iter().map(Value::String).collect()))
        }),
    );
    context.declare_func(
        "zipmap",
        FuncDef::builder()
            .param(ParamType::Any)
            .param(ParamType::Any)
            .build(|arguments| {
                let keys = list(&arguments, 0)?;
                let values = list(&arguments, 1)?;
                if keys.len() != values.len() {
                    return Err(format!("{} keys but {} values", keys.len(), values.len()));
                }
                let mut zipped = Map::new();
                for (key, value) in keys.iter().zip(values) {
                    let Value::String(key) = key else {
                        return Err("the keys must be strings".into());
                    };
                    zipped.insert(key.clone(), value);
                }
                Ok(Value::Object(zipped))
            }),
    );
    context.declare_func(
        "setunion",
        FuncDef::builder()
            .variadic_param(ParamType::Any)
            .build(|arguments| {
                let mut union: Vec<Value> = Vec::new();
                for index in 0..arguments.len() {
                    for item in list(&arguments, index)? {
                        if !union.contains(&item) {
                            union.push(item);
                        }
                    }
                }
                Ok(Value::Array(union))
            }),
    );
    context.declare_func(
        "setintersection",
        FuncDef::builder()
            .variadic_param(ParamType::Any)
            .build(|arguments| {
                let mut common = list(&arguments, 0)?;
                common.dedup();
                for index in 1..arguments.len() {
                    let other = list(&arguments, index)?;
                    common.retain(|item| other.contains(item));
                }
                Ok(Value::Array(common))
            }),
    );

    context.declare_func(
        "base64encode",
        one_string().build(|arguments| {
            use base64::Engine as _;
            Ok(Value::String(
                base64::engine::general_purpose::STANDARD.encode(text(&arguments, 0)?),
            ))
        }),
    );
    context.declare_func(
        "base64decode",
        one_string().build(|arguments| {
            use base64::Engine as _;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(text(&arguments, 0)?)
                .map_err(|error| format!("invalid base64: {error}"))?;
            String::from_utf8(bytes)
                .map(Value::String)
                .map_err(|_| "the decoded bytes are not UTF-8 text".to_string())
        }),
    );
    context.declare_func(
        "jsonencode",
        FuncDef::builder().param(ParamType::Any).build(|arguments| {
            let encoded = serde_json::to_string(&to_json_sorted(argument(&arguments, 0)?))
                .map_err(|error| format!("cannot encode as JSON: {error}"))?;
            // As Go's encoder: <, > and & are escaped (they only occur inside strings).
            Ok(Value::String(
                encoded
                    .replace('<', "\\u003c")
                    .replace('>', "\\u003e")
                    .replace('&', "\\u0026"),
            ))
        }),
    );
    context.declare_func(
        "jsondecode",
        one_string().build(|arguments| {
            let decoded: serde_json::Value = serde_json::from_str(&text(&arguments, 0)?)
                .map_err(|error| format!("invalid JSON: {error}"))?;
            Ok(from_json(decoded))
        }),
    );
}

/// The network functions (`cidrhost`, `cidrnetmask`, `cidrsubnet`), `formatlist` and
/// `setproduct`.
fn declare_network_and_list_functions(context: &mut Context<'_>) {
    context.declare_func(
        "cidrhost",
        FuncDef::builder()
            .param(ParamType::String)
            .param(ParamType::Number)
            .build(|arguments| {
                let prefix = Prefix::parse(&text(&arguments, 0)?)?;
                let host_bits = prefix.total_bits - prefix.length;
                let host_count: i128 = if host_bits >= 127 {
                    i128::MAX
                } else {
                    1 << host_bits
                };
                let given = whole_number(&arguments, 1)?;
                let mut host = i128::from(given);
                if host < 0 {
                    host += host_count;
                }
                if host < 0 || host >= host_count {
                    return Err(format!(
                        "host number {given} does not fit in {host_bits} bits"
                    ));
                }
                Ok(Value::String(
                    prefix.address_text(prefix.network | host as u128),
                ))
            }),
    );
    context.declare_func(
        "cidrnetmask",
        FuncDef::builder()
            .param(ParamType::String)
            .build(|arguments| {
                let prefix = Prefix::parse(&text(&arguments, 0)?)?;
                if prefix.total_bits != 32 {
                    return Err("cidrnetmask is only for IPv4 prefixes".into());
                }
                Ok(Value::String(prefix.address_text(prefix.mask())))
            }),
    );
    context.declare_func(
        "cidrsubnet",
        FuncDef::builder()
            .param(ParamType::String)
            .param(ParamType::Number)
            .param(ParamType::Number)
            .build(|arguments| {
                let prefix = Prefix::parse(&text(&arguments, 0)?)?;
                let new_bits = whole_number(&arguments, 1)?;
                let number = whole_number(&arguments, 2)?;
                let length = i64::from(prefix.length) + new_bits;
                if new_bits < 0 || length > i64::from(prefix.total_bits) {
                    return Err(format!(
                        "cannot extend a /{} prefix by {new_bits} bits",
                        prefix.length
                    ));
                }
                if number < 0 || (new_bits < 63 && number >= 1 << new_bits) {
                    return Err(format!(
                        "network number {number} does not fit in {new_bits} bits"
                    ));
                }
                let shift = i64::from(prefix.total_bits) - length;
                let network =
                    prefix.network | (number as u128).checked_shl(shift as u32).unwrap_or(0);
                Ok(Value::String(format!(
                    "{}/{length}",
                    prefix.address_text(network)
                )))
            }),
    );
    context.declare_func(
        "formatlist",
        FuncDef::builder()
            .param(ParamType::String)
            .variadic_param(ParamType::Any)
            .build(|arguments| {
                let format = text(&arguments, 0)?;
                let rest = &arguments[1..];
                let mut length: Option<usize> = None;
                for value in rest {
                    if let Value::Array(items) = value {
                        match length {
                            Some(known) if known != items.len() => {
                                return Err("the list arguments must have the same length".into());
                            }
                            _ => length = Some(items.len()),
                        }
                    }
                }
                let mut formatted = Vec::new();
                for row in 0..length.unwrap_or(1) {
                    let row_arguments: Vec<Value> = rest
                        .iter()
                        .map(|value| match value {
                            Value::Array(items) => items[row].clone(),
                            other => other.clone(),
                        })
                        .collect();
                    formatted.push(Value::String(crate::value_text::format_go_style(
                        &format,
                        &row_arguments,
                    )?));
                }
                Ok(Value::Array(formatted))
            }),
    );
    context.declare_func(
        "setproduct",
        FuncDef::builder()
            .variadic_param(ParamType::Any)
            .build(|arguments| {
                if arguments.len() < 2 {
                    return Err("setproduct needs at least two lists".into());
                }
                let mut product: Vec<Vec<Value>> = vec![Vec::new()];
                for index in 0..arguments.len() {
                    let items = list(&arguments, index)?;
                    product = product
                        .into_iter()
                        .flat_map(|prefix| {
                            items.iter().map(move |item| {
                                let mut row = prefix.clone();
                                row.push(item.clone());
                                row
                            })
                        })
                        .collect();
                }
                Ok(Value::Array(
                    product.into_iter().map(Value::Array).collect(),
                ))
            }),
    );
}

/// An IP prefix (`10.0.0.0/8`, `fd00::/8`) as numbers.
struct Prefix {
    network: u128,
    length: u32,
    total_bits: u32,
}

impl Prefix {
    fn parse(text: &str) -> Result<Prefix, String> {
        let (address, length) = text
            .split_once('/')
            .ok_or_else(|| format!("{text:?} is not a prefix such as 10.0.0.0/8"))?;
        let address: std::net::IpAddr = address
            .parse()
            .map_err(|_| format!("{text:?} does not start with an IP address"))?;
        let (value, total_bits) = match address {
            std::net::IpAddr::V4(v4) => (u128::from(u32::from(v4)), 32),
            std::net::IpAddr::V6(v6) => (u128::from(v6), 128),
        };
        let length: u32 = length
            .parse()
            .ok()
            .filter(|length| *length <= total_bits)
            .ok_or_else(|| format!("{text:?} has an invalid prefix length"))?;
        let mut prefix = Prefix {
            network: 0,
            length,
            total_bits,
        };
        prefix.network = value & prefix.mask();
        Ok(prefix)
    }

    /// The prefix's netmask: `length` one bits, then zeros.
    fn mask(&self) -> u128 {
        let all = if self.total_bits == 128 {
            u128::MAX
        } else {
            (1u128 << self.total_bits) - 1
        };
        if self.length == 0 {
            0
        } else {
            all & !((1u128 << (self.total_bits - self.length)) - 1)
        }
    }

    fn address_text(&self, value: u128) -> String {
        if self.total_bits == 32 {
            // An IPv4 value has only its low 32 bits set (masked by `mask`).
            std::net::Ipv4Addr::from(value as u32).to_string()
        } else {
            std::net::Ipv6Addr::from(value).to_string()
        }
    }
}

/// JSON with object keys sorted, as go-cty encodes objects.
fn to_json_sorted(value: &Value) -> serde_json::Value {
    match value {
        Value::Null => serde_json::Value::Null,
        Value::Bool(flag) => serde_json::Value::Bool(*flag),
        Value::Number(number) => number
            .as_i64()
            .map(serde_json::Value::from)
            .or_else(|| number.as_f64().map(serde_json::Value::from))
            .unwrap_or(serde_json::Value::Null),
        Value::String(text) => serde_json::Value::String(text.clone()),
        Value::Array(items) => serde_json::Value::Array(items.iter().map(to_json_sorted).collect()),
        Value::Object(entries) => {
            let mut keys: Vec<&String> = entries.keys().collect();
            keys.sort();
            serde_json::Value::Object(
                keys.into_iter()
                    .filter_map(|key| {
                        entries
                            .get(key)
                            .map(|value| (key.clone(), to_json_sorted(value)))
                    })
                    .collect(),
            )
        }
    }
}

fn from_json(value: serde_json::Value) -> Value {
    match value {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(flag) => Value::Bool(flag),
        serde_json::Value::Number(number) => number
            .as_i64()
            .map(Value::from)
            .or_else(|| {
                number
                    .as_f64()
                    .and_then(hcl::Number::from_f64)
                    .map(Value::Number)
            })
            .unwrap_or(Value::Null),
        serde_json::Value::String(text) => Value::String(text),
        serde_json::Value::Array(items) => Value::Array(items.into_iter().map(from_json).collect()),
        serde_json::Value::Object(entries) => Value::Object(
            entries
                .into_iter()
                .map(|(key, value)| (key, from_json(value)))
                .collect(),
        ),
    }
}

/// Replaces, innermost first, each call whose answer is not a plain function of its
/// arguments' values: `can(x)` with whether `x` evaluates, `try(a, b, ...)` with the value of
/// its first argument that evaluates, and the filesystem functions (`file`, `filebase64`,
/// `fileexists`, `basename`, `dirname`, `abspath`, `pathexpand`) with their answer, reading relative to
/// `files` (`None`: they are disabled). A `try` none of whose arguments evaluate is an error;
/// a filesystem call that fails stays in place (so `can` and `try` see it fail) and its reason
/// is answered, for the caller to report if the whole expression then fails.
pub(crate) fn resolve_calls(
    expression: &mut EditExpression,
    context: &Context<'_>,
    files: Option<&std::path::Path>,
) -> Result<Option<String>, String> {
    let mut resolver = CallResolver {
        context,
        files,
        error: None,
        file_problem: None,
    };
    resolver.visit_expr_mut(expression);
    match resolver.error {
        Some(error) => Err(error),
        None => Ok(resolver.file_problem),
    }
}

struct CallResolver<'context, 'inner> {
    context: &'context Context<'inner>,
    files: Option<&'context std::path::Path>,
    error: Option<String>,
    file_problem: Option<String>,
}

impl CallResolver<'_, '_> {
    /// The answer of a filesystem function, `None` if `name` is not one.
    fn filesystem_call(&self, name: &str, arguments: &[Value]) -> Option<Result<Value, String>> {
        const NAMES: [&str; 7] = [
            "pathexpand",
            "file",
            "filebase64",
            "fileexists",
            "basename",
            "dirname",
            "abspath",
        ];
        if !NAMES.contains(&name) {
            return None;
        }
        let Some(base) = self.files else {
            return Some(Err(format!(
                "{name}: filesystem functions are disabled here (as when Nomad's API parses a jobspec); run the jobspec from a file"
            )));
        };
        let path = match arguments {
            [Value::String(path)] => std::path::PathBuf::from(path),
            _ => return Some(Err(format!("{name} takes one string, a path"))),
        };
        if name == "pathexpand" {
            return Some(path_expand(
                &path.to_string_lossy(),
                std::env::var_os("HOME"),
            ));
        }
        let resolved = if path.is_absolute() {
            path.clone()
        } else {
            base.join(&path)
        };
        let answer = match name {
            "file" => std::fs::read_to_string(&resolved)
                .map(Value::String)
                .map_err(|error| format!("file: cannot read {}: {error}", resolved.display())),
            "filebase64" => std::fs::read(&resolved)
                .map(|bytes| {
                    use base64::Engine as _;
                    Value::String(base64::engine::general_purpose::STANDARD.encode(bytes))
                })
                .map_err(|error| {
                    format!("filebase64: cannot read {}: {error}", resolved.display())
                }),
            "fileexists" => match std::fs::metadata(&resolved) {
                Ok(metadata) if metadata.is_file() => Ok(Value::Bool(true)),
                Ok(_) => Err(format!("fileexists: {} is not a file", resolved.display())),
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                    Ok(Value::Bool(false))
                }
                Err(error) => Err(format!("fileexists: {}: {error}", resolved.display())),
            },
            "basename" => Ok(Value::String(
                path.file_name()
                    .map(|name| name.to_string_lossy().to_string())
                    .unwrap_or_else(|| path.display().to_string()),
            )),
            "dirname" => Ok(Value::String(
                match path.parent().map(|parent| parent.display().to_string()) {
                    Some(parent) if !parent.is_empty() => parent,
                    _ => ".".to_string(),
                },
            )),
            _ => std::path::absolute(&resolved)
                .map(|absolute| Value::String(absolute.display().to_string()))
                .map_err(|error| format!("abspath: {error}")),
        };
        Some(answer)
    }

    /// go-cty-funcs' `fileset(path, pattern)`: the regular files under `path` whose path
    /// matches the glob `pattern` (`*`, `?`, `[…]`, `{a,b}`, and `**` across directories),
    /// relative to `path` with `/` separators, sorted.
    fn file_set(&self, arguments: &[Value]) -> Result<Value, String> {
        let Some(base) = self.files else {
            return Err("fileset: filesystem functions are disabled here (as when Nomad's API parses a jobspec); run the jobspec from a file".to_string());
        };
        let [Value::String(path), Value::String(pattern)] = arguments else {
            return Err("fileset takes two strings, a path and a pattern".to_string());
        };
        let root = base.join(path);
        // filepath.Join cleans the pattern: `./` and empty components go.
        let pattern: Vec<&str> = pattern
            .split('/')
            .filter(|part| !part.is_empty() && *part != ".")
            .collect();
        let matcher = globset::GlobBuilder::new(&pattern.join("/"))
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|error| format!("fileset: failed to glob pattern {pattern:?}: {error}"))?
            .compile_matcher();
        let mut found = Vec::new();
        let mut directories = vec![(root.clone(), String::new())];
        while let Some((directory, relative)) = directories.pop() {
            let entries = match std::fs::read_dir(&directory) {
                Ok(entries) => entries,
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => continue,
                Err(error) => {
                    return Err(format!(
                        "fileset: cannot read {}: {error}",
                        directory.display()
                    ));
                }
            };
            for entry in entries {
                let entry = entry.map_err(|error| {
                    format!("fileset: cannot read {}: {error}", directory.display())
                })?;
                let name = entry.file_name().to_string_lossy().to_string();
                let child = if relative.is_empty() {
                    name
                } else {
                    format!("{relative}/{name}")
                };
                let file_type = entry.file_type().map_err(|error| {
                    format!("fileset: cannot read {}: {error}", entry.path().display())
                })?;
                if file_type.is_dir() {
                    directories.push((entry.path(), child));
                } else if std::fs::metadata(entry.path()).is_ok_and(|meta| meta.is_file())
                    && matcher.is_match(&child)
                {
                    found.push(child);
                }
            }
        }
        found.sort();
        Ok(Value::Array(found.into_iter().map(Value::String).collect()))
    }

    fn evaluate(&self, expression: &EditExpression) -> Result<Value, String> {
        let expression: hcl::Expression = expression.clone().into();
        expression
            .evaluate(self.context)
            .map_err(|error| error.kind().to_string())
    }
}

impl VisitMut for CallResolver<'_, '_> {
    fn visit_expr_mut(&mut self, expression: &mut EditExpression) {
        visit_expr_mut(self, expression);
        let EditExpression::FuncCall(call) = expression else {
            return;
        };
        if !call.name.namespace.is_empty() {
            return;
        }
        let name = call.name.name.as_str().to_string();
        let resolved = match name.as_str() {
            "file" | "filebase64" | "fileexists" | "basename" | "dirname" | "abspath" => {
                let arguments: Result<Vec<Value>, String> = call
                    .args
                    .iter()
                    .map(|argument| self.evaluate(argument))
                    .collect();
                let answer = arguments.and_then(|arguments| {
                    self.filesystem_call(&name, &arguments)
                        .unwrap_or_else(|| Err(format!("{name} is not a filesystem function")))
                });
                match answer {
                    Ok(value) => value,
                    Err(problem) => {
                        self.file_problem.get_or_insert(problem);
                        return;
                    }
                }
            }
            "convert" => {
                let arguments: Vec<&EditExpression> = call.args.iter().collect();
                let answer = match arguments.as_slice() {
                    [value, type_expression] => convert::type_spec(type_expression)
                        .and_then(|target| {
                            let value = self.evaluate(value)?;
                            convert::convert(value, &target)
                        })
                        .map_err(|problem| format!("convert: {problem}")),
                    _ => Err("convert takes two arguments, a value and a type".to_string()),
                };
                match answer {
                    Ok(value) => value,
                    Err(problem) => {
                        self.file_problem.get_or_insert(problem);
                        return;
                    }
                }
            }
            "fileset" => {
                let arguments: Result<Vec<Value>, String> = call
                    .args
                    .iter()
                    .map(|argument| self.evaluate(argument))
                    .collect();
                match arguments.and_then(|arguments| self.file_set(&arguments)) {
                    Ok(value) => value,
                    Err(problem) => {
                        self.file_problem.get_or_insert(problem);
                        return;
                    }
                }
            }
            "can" => {
                if call.args.len() != 1 {
                    self.error
                        .get_or_insert_with(|| "can takes exactly one argument".to_string());
                    return;
                }
                Value::Bool(
                    call.args
                        .iter()
                        .all(|argument| self.evaluate(argument).is_ok()),
                )
            }
            "try" => {
                let mut last_error = "try needs at least one argument".to_string();
                let mut found = None;
                for argument in call.args.iter() {
                    match self.evaluate(argument) {
                        Ok(value) => {
                            found = Some(value);
                            break;
                        }
                        Err(message) => last_error = message,
                    }
                }
                match found {
                    Some(value) => value,
                    None => {
                        self.error.get_or_insert(format!(
                            "no argument of try could be evaluated; the last: {last_error}"
                        ));
                        return;
                    }
                }
            }
            _ => return,
        };
        *expression = EditExpression::from(hcl::Expression::from(resolved));
    }
}

mod convert;
mod data;
mod yaml;

/// Go's `time.Parse(time.RFC3339, ...)`: `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`, as
/// (Unix seconds, nanoseconds, offset in seconds east of UTC).
fn parse_rfc3339(text: &str) -> Option<(i64, u32, i64)> {
    let bytes = text.as_bytes();
    let digits = |range: std::ops::Range<usize>| -> Option<i64> {
        let part = text.get(range)?;
        part.bytes()
            .all(|byte| byte.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    if bytes.len() < 20
        || bytes[4] != b'-'
        || bytes[7] != b'-'
        || !matches!(bytes[10], b'T' | b't')
        || bytes[13] != b':'
        || bytes[16] != b':'
    {
        return None;
    }
    let (year, month, day) = (digits(0..4)?, digits(5..7)?, digits(8..10)?);
    let (hour, minute, second) = (digits(11..13)?, digits(14..16)?, digits(17..19)?);
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let month_days = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if !(1..=12).contains(&month)
        || day < 1
        || day > month_days[usize::try_from(month - 1).ok()?]
        || hour > 23
        || minute > 59
        || second > 59
    {
        return None;
    }
    let mut rest = &text[19..];
    let mut nanos = 0u32;
    if let Some(fraction) = rest.strip_prefix('.') {
        let length = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if length == 0 {
            return None;
        }
        for (position, digit) in fraction[..length].bytes().take(9).enumerate() {
            nanos += u32::from(digit - b'0') * 10u32.pow(8 - u32::try_from(position).ok()?);
        }
        rest = &fraction[length..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ => {
            let sign = match rest.as_bytes().first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            if rest.len() != 6 || rest.as_bytes()[3] != b':' {
                return None;
            }
            let hours: i64 = rest[1..3].parse().ok()?;
            let minutes: i64 = rest[4..6].parse().ok()?;
            if hours > 23 || minutes > 59 {
                return None;
            }
            sign * (hours * 3600 + minutes * 60)
        }
    };
    let seconds =
        days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offset;
    Some((seconds, nanos, offset))
}

/// Go's `Format(time.RFC3339)` of Unix seconds in the zone `offset` seconds east of UTC: no
/// fraction of a second, `Z` for UTC. `None` for a year Go cannot write in four digits.
fn format_rfc3339(seconds: i64, offset: i64) -> Option<String> {
    let local = seconds.checked_add(offset)?;
    let (year, month, day) = civil_from_days(local.div_euclid(86_400));
    if !(0..=9999).contains(&year) {
        return None;
    }
    let of_day = local.rem_euclid(86_400);
    let zone = if offset == 0 {
        "Z".to_string()
    } else {
        let sign = if offset < 0 { '-' } else { '+' };
        format!(
            "{sign}{:02}:{:02}",
            offset.abs() / 3600,
            offset.abs() % 3600 / 60
        )
    };
    Some(format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}{zone}",
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60
    ))
}

/// go-cty-funcs' `pathexpand` (`homedir.Expand`): a leading `~` becomes the home directory,
/// joined and cleaned as Go's `filepath.Join` does; `~user` is refused; other paths are kept.
pub(crate) fn path_expand(path: &str, home: Option<std::ffi::OsString>) -> Result<Value, String> {
    let Some(rest) = path.strip_prefix('~') else {
        return Ok(Value::String(path.to_string()));
    };
    if !(rest.is_empty() || rest.starts_with('/')) {
        return Err(format!(
            "pathexpand: cannot expand user-specific home dir in {path:?}"
        ));
    }
    let home = home
        .filter(|home| !home.is_empty())
        .ok_or_else(|| "pathexpand: HOME is not set, so ~ cannot be expanded".to_string())?;
    Ok(Value::String(clean_path(&format!(
        "{}/{rest}",
        home.to_string_lossy()
    ))))
}

/// Go's `filepath.Clean` on a Unix path: one `/` between parts, no `.` parts, `..` removing
/// the part before it (or kept at the start of a relative path, dropped at the root).
fn clean_path(path: &str) -> String {
    let rooted = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => match parts.last() {
                Some(&last) if last != ".." => {
                    parts.pop();
                }
                _ if rooted => {}
                _ => parts.push(".."),
            },
            other => parts.push(other),
        }
    }
    let joined = parts.join("/");
    match (rooted, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".to_string(),
        (false, false) => joined,
    }
}

/// The records of a CSV text as Go's `encoding/csv` reads them with its defaults (the parser of
/// go-cty's `csvdecode`): comma-separated, `"` quoting with `""` for a quote, quoted fields may
/// span lines, `\r\n` read as `\n`, blank lines skipped. Each record with its first line.
fn csv_records(input: &str) -> Result<Vec<(usize, Vec<String>)>, String> {
    let input = input.replace("\r\n", "\n");
    let mut records = Vec::new();
    let mut characters = input.chars().peekable();
    let mut line = 1;
    while characters.peek().is_some() {
        if characters.peek() == Some(&'\n') {
            characters.next();
            line += 1;
            continue;
        }
        let first_line = line;
        let mut record = Vec::new();
        loop {
            let mut field = String::new();
            if characters.peek() == Some(&'"') {
                characters.next();
                loop {
                    match characters.next() {
                        Some('"') if characters.peek() == Some(&'"') => {
                            characters.next();
                            field.push('"');
                        }
                        Some('"') => break,
                        Some(character) => {
                            if character == '\n' {
                                line += 1;
                            }
                            field.push(character);
                        }
                        None => {
                            return Err(format!(
                                "parse error on line {line}: extraneous or missing \" in quoted-field"
                            ));
                        }
                    }
                }
                if !matches!(characters.peek(), None | Some(',' | '\n')) {
                    return Err(format!(
                        "parse error on line {line}: extraneous or missing \" in quoted-field"
                    ));
                }
            } else {
                while let Some(&character) = characters.peek() {
                    if character == ',' || character == '\n' {
                        break;
                    }
                    if character == '"' {
                        return Err(format!(
                            "parse error on line {line}: bare \" in non-quoted-field"
                        ));
                    }
                    field.push(character);
                    characters.next();
                }
            }
            record.push(field);
            match characters.next() {
                Some(',') => continue,
                Some(_) => {
                    line += 1;
                    break;
                }
                None => break,
            }
        }
        records.push((first_line, record));
    }
    Ok(records)
}
