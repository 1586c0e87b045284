//! Evaluation of a parsed filter against an object's JSON, following go-bexpr's `evaluate.go`:
//! the literal is converted to the selected field's type (Go's `strconv` rules: base prefixes
//! for integers, `t`/`TRUE`/`0` for booleans) before comparing; `in`/`contains` looks for a
//! substring, a list element or a map key; a key missing from a map answers by operator (`!=`
//! and `not in` true, `==` false, `is empty` true); a field that does not exist, or a literal
//! that does not convert, is an error.
//!
//! Not here: parsing (`parse`).

use serde_json::Value;

use super::ast::{Binding, Expr, Match, MatchOp, Selector};

/// An object the filter cannot be evaluated against.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct EvalError(String);

fn error(message: impl Into<String>) -> EvalError {
    EvalError(message.into())
}

/// A name a collection expression binds: a path into the object (an element of a list, the
/// value of a map entry) or a value of its own (an index, a key).
pub(super) enum Local {
    Path(String, Vec<String>),
    Value(String, Value),
}

pub(super) fn evaluate(
    expr: &Expr,
    datum: &Value,
    locals: &mut Vec<Local>,
) -> Result<bool, EvalError> {
    match expr {
        Expr::Or(left, right) => {
            if evaluate(left, datum, locals)? {
                return Ok(true);
            }
            evaluate(right, datum, locals)
        }
        Expr::And(left, right) => {
            if !evaluate(left, datum, locals)? {
                return Ok(false);
            }
            evaluate(right, datum, locals)
        }
        Expr::Not(operand) => evaluate(operand, datum, locals).map(|result| !result),
        Expr::Match(matcher) => evaluate_match(matcher, datum, locals),
        Expr::Collection(collection) => {
            let value = get_value(datum, &collection.selector.path, locals)?;
            let Some(value) = value else {
                return Ok(collection.all);
            };
            if let Binding::IndexAndValue(index, value_name) = &collection.binding
                && index == value_name
            {
                return Err(error(format!(
                    "{index:?} cannot be used as a placeholder for both the index and the value"
                )));
            }
            let path = &collection.selector.path;
            let bindings: Vec<Vec<Local>> = match value {
                Value::Array(items) => (0..items.len())
                    .map(|index| {
                        let mut element = path.to_vec();
                        element.push(index.to_string());
                        let index_value = Value::from(index);
                        match &collection.binding {
                            Binding::Default(name) | Binding::Value(name) => {
                                vec![Local::Path(name.clone(), element)]
                            }
                            Binding::Index(name) => vec![Local::Value(name.clone(), index_value)],
                            Binding::IndexAndValue(index_name, value_name) => vec![
                                Local::Value(index_name.clone(), index_value),
                                Local::Path(value_name.clone(), element),
                            ],
                        }
                    })
                    .collect(),
                Value::Object(entries) => entries
                    .keys()
                    .map(|key| {
                        let mut entry = path.to_vec();
                        entry.push(key.clone());
                        let key_value = Value::from(key.clone());
                        match &collection.binding {
                            Binding::Default(name) | Binding::Index(name) => {
                                vec![Local::Value(name.clone(), key_value)]
                            }
                            Binding::Value(name) => vec![Local::Path(name.clone(), entry)],
                            Binding::IndexAndValue(index_name, value_name) => vec![
                                Local::Value(index_name.clone(), key_value),
                                Local::Path(value_name.clone(), entry),
                            ],
                        }
                    })
                    .collect(),
                _ => {
                    return Err(error(format!(
                        "{} is not a list or a map",
                        collection.selector.display()
                    )));
                }
            };
            for added in bindings {
                let count = added.len();
                locals.extend(added);
                let result = evaluate(&collection.inner, datum, locals);
                locals.truncate(locals.len() - count);
                let result = result?;
                if result != collection.all {
                    return Ok(result);
                }
            }
            Ok(collection.all)
        }
    }
}

/// The value a path names: `Ok(None)` for a key missing from a map (go-bexpr's "not present").
fn get_value<'v>(
    datum: &'v Value,
    path: &[String],
    locals: &'v [Local],
) -> Result<Option<&'v Value>, EvalError> {
    let mut path = path.to_vec();
    for local in locals.iter().rev() {
        let Some(first) = path.first() else { break };
        match local {
            Local::Value(name, value) if name == first => {
                if path.len() > 1 {
                    return Err(error(format!(
                        "/{name} references a {} so /{} is invalid",
                        go_kind(value),
                        path.join("/")
                    )));
                }
                return Ok(Some(value));
            }
            Local::Path(name, prefix) if name == first => {
                let mut replaced = prefix.clone();
                replaced.extend(path.drain(1..));
                path = replaced;
            }
            _ => {}
        }
    }
    let mut current = datum;
    for (depth, part) in path.iter().enumerate() {
        let next = match current {
            Value::Object(entries) => match entries.get(part) {
                Some(next) => Some(next),
                None if depth == 0 => {
                    return Err(error(format!(
                        "error finding value in datum: /{} at part 0: couldn't find struct field with name {part:?}",
                        path.join("/")
                    )));
                }
                None => None,
            },
            // A nil map or slice: nothing in it.
            Value::Null => None,
            Value::Array(items) => match part.parse::<usize>() {
                Ok(index) if index < items.len() => Some(&items[index]),
                Ok(index) => {
                    return Err(error(format!(
                        "error finding value in datum: /{} at part {depth}: index out of range: {index}",
                        path.join("/")
                    )));
                }
                Err(_) => {
                    return Err(error(format!(
                        "error finding value in datum: /{} at part {depth}: couldn't parse index {part:?}",
                        path.join("/")
                    )));
                }
            },
            scalar => {
                return Err(error(format!(
                    "error finding value in datum: /{} at part {depth}: invalid value kind: {}",
                    path.join("/"),
                    go_kind(scalar)
                )));
            }
        };
        match next {
            Some(next) => current = next,
            None => {
                // A missing key in a map (or in a nil one): not present; the last part only,
                // as go-bexpr looks at the missing leaf's parent.
                if depth + 1 == path.len() {
                    return Ok(None);
                }
                return Err(error(format!(
                    "error finding value in datum: /{} at part {depth}: couldn't find key {part:?}",
                    path.join("/")
                )));
            }
        }
    }
    Ok(Some(current))
}

fn not_present(operator: MatchOp) -> bool {
    matches!(
        operator,
        MatchOp::NotEqual
            | MatchOp::NotIn
            | MatchOp::IsEmpty
            | MatchOp::NotMatches
            | MatchOp::IsNil
    )
}

fn evaluate_match(matcher: &Match, datum: &Value, locals: &[Local]) -> Result<bool, EvalError> {
    let Some(value) = get_value(datum, &matcher.selector.path, locals)? else {
        return Ok(not_present(matcher.operator));
    };
    let raw = matcher.value.as_deref().unwrap_or("");
    match matcher.operator {
        MatchOp::Equal => equal(raw, value),
        MatchOp::NotEqual => equal(raw, value).map(|result| !result),
        MatchOp::In => contains(matcher, raw, value),
        MatchOp::NotIn => contains(matcher, raw, value).map(|result| !result),
        MatchOp::IsEmpty => is_empty(&matcher.selector, value),
        MatchOp::IsNotEmpty => is_empty(&matcher.selector, value).map(|result| !result),
        MatchOp::Matches => matches(matcher, raw, value),
        MatchOp::NotMatches => matches(matcher, raw, value).map(|result| !result),
        MatchOp::IsNil => is_nil(&matcher.selector, value),
        MatchOp::IsNotNil => is_nil(&matcher.selector, value).map(|result| !result),
    }
}

/// A scalar of the object, as Go's reflection would see the field.
enum Scalar<'v> {
    Bool(bool),
    Int(i64),
    Uint(u64),
    Float(f64),
    Str(&'v str),
}

fn scalar(value: &Value) -> Option<Scalar<'_>> {
    match value {
        Value::Bool(flag) => Some(Scalar::Bool(*flag)),
        Value::String(text) => Some(Scalar::Str(text)),
        Value::Number(number) => Some(if let Some(int) = number.as_i64() {
            Scalar::Int(int)
        } else if let Some(uint) = number.as_u64() {
            Scalar::Uint(uint)
        } else {
            Scalar::Float(number.as_f64().unwrap_or(f64::NAN))
        }),
        _ => None,
    }
}

/// Whether the literal, converted to the scalar's type, equals it; the conversion's error
/// worded as Go's `strconv` words it.
fn scalar_equal(raw: &str, scalar: &Scalar<'_>) -> Result<bool, String> {
    Ok(match scalar {
        Scalar::Bool(flag) => {
            crate::params::parse_go_bool(raw)
                .ok_or_else(|| format!("strconv.ParseBool: parsing {raw:?}: invalid syntax"))?
                == *flag
        }
        Scalar::Int(int) => go_parse_int(raw)? == i128::from(*int),
        Scalar::Uint(uint) => {
            let parsed = go_parse_int(raw)?;
            if parsed < 0 {
                return Err(format!(
                    "strconv.ParseUint: parsing {raw:?}: invalid syntax"
                ));
            }
            parsed == i128::from(*uint)
        }
        Scalar::Float(float) => {
            raw.parse::<f64>()
                .map_err(|_| format!("strconv.ParseFloat: parsing {raw:?}: invalid syntax"))?
                == *float
        }
        Scalar::Str(text) => raw == *text,
    })
}

fn equal(raw: &str, value: &Value) -> Result<bool, EvalError> {
    let Some(scalar) = scalar(value) else {
        return Err(error(
            "unable to find suitable primitive comparison function for matching",
        ));
    };
    scalar_equal(raw, &scalar).map_err(|message| {
        error(format!(
            "error getting match value in expression: {message}"
        ))
    })
}

fn contains(matcher: &Match, raw: &str, value: &Value) -> Result<bool, EvalError> {
    match value {
        Value::String(text) => Ok(text.contains(raw)),
        Value::Object(entries) => Ok(entries.contains_key(raw)),
        Value::Null => Ok(false),
        Value::Array(items) => {
            for item in items {
                let Some(scalar) = scalar(item) else {
                    if item.is_null() {
                        continue;
                    }
                    return Err(error(format!(
                        "unable to find suitable primitive comparison function for \"in\" comparison in interface slice: {}",
                        go_kind(item)
                    )));
                };
                match scalar_equal(raw, &scalar) {
                    Ok(true) => return Ok(true),
                    Ok(false) => {}
                    // A literal that is not of this element's type matches nothing.
                    Err(_) => {}
                }
            }
            Ok(false)
        }
        other => Err(error(format!(
            "cannot perform in/contains operations on type {} for selector: {:?}",
            go_kind(other),
            matcher.selector.display()
        ))),
    }
}

fn is_empty(selector: &Selector, value: &Value) -> Result<bool, EvalError> {
    match value {
        Value::String(text) => Ok(text.is_empty()),
        Value::Array(items) => Ok(items.is_empty()),
        Value::Object(entries) => Ok(entries.is_empty()),
        Value::Null => Ok(true),
        other => Err(error(format!(
            "cannot perform is-empty operations on type {} for selector: {:?}",
            go_kind(other),
            selector.display()
        ))),
    }
}

fn is_nil(selector: &Selector, value: &Value) -> Result<bool, EvalError> {
    match value {
        Value::Null => Ok(true),
        Value::Array(_) | Value::Object(_) => Ok(false),
        other => Err(error(format!(
            "cannot perform is-nil operations on type {} for selector: {:?}",
            go_kind(other),
            selector.display()
        ))),
    }
}

fn matches(matcher: &Match, raw: &str, value: &Value) -> Result<bool, EvalError> {
    let Value::String(text) = value else {
        return Err(error(format!(
            "value of type {} is not convertible to []byte",
            go_kind(value)
        )));
    };
    let compiled = matcher.regex.get_or_init(|| {
        regex::Regex::new(raw)
            .map_err(|cause| format!("failed to compile regular expression {raw:?}: {cause}"))
    });
    match compiled {
        Ok(regex) => Ok(regex.is_match(text)),
        Err(message) => Err(error(message.clone())),
    }
}

/// Go's reflect kind name of a JSON value's Go counterpart.
fn go_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "invalid",
        Value::Bool(_) => "bool",
        Value::Number(number) if number.is_i64() => "int64",
        Value::Number(number) if number.is_u64() => "uint64",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Array(_) => "slice",
        Value::Object(_) => "map",
    }
}

/// Go's `strconv.ParseInt(raw, 0, 64)`: an optional sign, then decimal, `0x`, `0o`/`0`, or `0b`
/// digits, underscores allowed between digits when a base prefix is given. Widened to i128 so
/// the same parse serves unsigned fields.
fn go_parse_int(raw: &str) -> Result<i128, String> {
    let syntax = || format!("strconv.ParseInt: parsing {raw:?}: invalid syntax");
    let (negative, unsigned) = match raw.as_bytes().first() {
        Some(b'-') => (true, &raw[1..]),
        Some(b'+') => (false, &raw[1..]),
        _ => (false, raw),
    };
    let lower = unsigned.to_ascii_lowercase();
    let (radix, digits, prefixed) = if let Some(rest) = lower.strip_prefix("0x") {
        (16, rest.to_string(), true)
    } else if let Some(rest) = lower.strip_prefix("0o") {
        (8, rest.to_string(), true)
    } else if let Some(rest) = lower.strip_prefix("0b") {
        (2, rest.to_string(), true)
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, lower[1..].to_string(), true)
    } else {
        (10, lower.clone(), false)
    };
    let digits = if prefixed {
        if digits.starts_with('_') && radix == 8 && !lower.starts_with("0o") {
            // `0_7` is octal 7 in Go.
            digits.replacen('_', "", 1)
        } else {
            digits
        }
    } else {
        digits
    };
    if digits.is_empty()
        || digits.starts_with('_')
        || digits.ends_with('_')
        || digits.contains("__")
        || (!prefixed && digits.contains('_'))
    {
        return Err(syntax());
    }
    let cleaned = digits.replace('_', "");
    let magnitude = u64::from_str_radix(&cleaned, radix).map_err(|cause| {
        if matches!(
            cause.kind(),
            std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow
        ) {
            format!("strconv.ParseInt: parsing {raw:?}: value out of range")
        } else {
            syntax()
        }
    })?;
    let value = if negative {
        -i128::from(magnitude)
    } else {
        i128::from(magnitude)
    };
    if value > i128::from(u64::MAX) || value < i128::from(i64::MIN) {
        return Err(format!(
            "strconv.ParseInt: parsing {raw:?}: value out of range"
        ));
    }
    Ok(value)
}
