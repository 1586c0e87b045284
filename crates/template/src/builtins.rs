//! Go's predefined template functions with Go's argument rules and error texts (which the
//! executor wraps as `error calling <name>: …`). `and` and `or` short-circuit, so the executor
//! evaluates them itself; everything else takes evaluated arguments here.
//!
//! Comparison follows Go's basic kinds: bool, int, float, string. Values of different kinds
//! are incompatible (an int is not compared with a float), except that `eq` and `ne` find
//! nil unequal to anything but nil.

use std::fmt::Write as _;

use crate::Value;
use crate::fmt::{sprint, sprintf, sprintln};

/// A predefined function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Builtin {
    And,
    Or,
    Not,
    Len,
    Index,
    Slice,
    Print,
    Printf,
    Println,
    Html,
    Js,
    Urlquery,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Call,
}

/// How many arguments a function takes: exactly `fixed`, or at least `fixed` if variadic.
pub(crate) struct Arity {
    pub fixed: usize,
    pub variadic: bool,
}

impl Builtin {
    pub fn named(name: &str) -> Option<Builtin> {
        Some(match name {
            "and" => Builtin::And,
            "or" => Builtin::Or,
            "not" => Builtin::Not,
            "len" => Builtin::Len,
            "index" => Builtin::Index,
            "slice" => Builtin::Slice,
            "print" => Builtin::Print,
            "printf" => Builtin::Printf,
            "println" => Builtin::Println,
            "html" => Builtin::Html,
            "js" => Builtin::Js,
            "urlquery" => Builtin::Urlquery,
            "eq" => Builtin::Eq,
            "ne" => Builtin::Ne,
            "lt" => Builtin::Lt,
            "le" => Builtin::Le,
            "gt" => Builtin::Gt,
            "ge" => Builtin::Ge,
            "call" => Builtin::Call,
            _ => return None,
        })
    }

    pub fn arity(self) -> Arity {
        let (fixed, variadic) = match self {
            Builtin::And
            | Builtin::Or
            | Builtin::Index
            | Builtin::Slice
            | Builtin::Printf
            | Builtin::Eq
            | Builtin::Call => (1, true),
            Builtin::Print | Builtin::Println | Builtin::Html | Builtin::Js | Builtin::Urlquery => {
                (0, true)
            }
            Builtin::Not | Builtin::Len => (1, false),
            Builtin::Ne | Builtin::Lt | Builtin::Le | Builtin::Gt | Builtin::Ge => (2, false),
        };
        Arity { fixed, variadic }
    }

    /// Calls the function on evaluated arguments (arity already checked).
    pub fn call(self, args: Vec<Value>) -> Result<Value, String> {
        let first = args.first().unwrap_or(&Value::Nil);
        let second = args.get(1).unwrap_or(&Value::Nil);
        Ok(match self {
            // The executor short-circuits these; this is their plain meaning.
            Builtin::And => args
                .iter()
                .find(|arg| !arg.is_true())
                .or(args.last())
                .cloned()
                .unwrap_or_default(),
            Builtin::Or => args
                .iter()
                .find(|arg| arg.is_true())
                .or(args.last())
                .cloned()
                .unwrap_or_default(),
            Builtin::Not => Value::Bool(!first.is_true()),
            Builtin::Len => Value::Int(length(first)?),
            Builtin::Index => index(first, &args[1.min(args.len())..])?,
            Builtin::Slice => slice(first, &args[1.min(args.len())..])?,
            Builtin::Print => Value::String(sprint(&args)),
            Builtin::Println => Value::String(sprintln(&args)),
            Builtin::Printf => match first {
                Value::String(format) => Value::String(sprintf(format, &args[1..])),
                other => {
                    return Err(format!(
                        "wrong type for value; expected string; got {}",
                        other.type_name()
                    ));
                }
            },
            Builtin::Html => Value::String(html(&text_of(&args))),
            Builtin::Js => Value::String(js(&text_of(&args))),
            Builtin::Urlquery => Value::String(urlquery(&text_of(&args))),
            Builtin::Eq => Value::Bool(eq(first, &args[1..])?),
            Builtin::Ne => Value::Bool(!eq(first, &args[1..])?),
            Builtin::Lt => Value::Bool(lt(first, second)?),
            Builtin::Le => Value::Bool(le(first, second)?),
            Builtin::Gt => Value::Bool(!le(first, second)?),
            Builtin::Ge => Value::Bool(!lt(first, second)?),
            Builtin::Call => {
                return Err(match first {
                    Value::Missing | Value::Nil => "call of nil".to_string(),
                    other => format!("non-function of type {}", other.type_name()),
                });
            }
        })
    }
}

/// The text `html`, `js` and `urlquery` escape: a lone string as is, else `fmt.Sprint`.
fn text_of(args: &[Value]) -> String {
    match args {
        [Value::String(text)] => text.clone(),
        _ => sprint(args),
    }
}

fn length(value: &Value) -> Result<i64, String> {
    let length = match value {
        Value::Missing | Value::Nil => return Err("len of nil pointer".into()),
        Value::String(text) => text.len(),
        Value::List(items) => items.len(),
        Value::Map(map) => map.len(),
        other => return Err(format!("len of type {}", other.type_name())),
    };
    Ok(i64::try_from(length).unwrap_or(i64::MAX))
}

/// An index into something of `length` items (Go's `indexArg`).
fn index_arg(index: &Value, length: usize) -> Result<usize, String> {
    let number = match index {
        Value::Int(number) => *number,
        Value::Missing | Value::Nil => return Err("cannot index slice/array with nil".into()),
        other => {
            return Err(format!(
                "cannot index slice/array with type {}",
                other.type_name()
            ));
        }
    };
    match usize::try_from(number) {
        Ok(at) if at <= length => Ok(at),
        _ => Err(format!("index out of range: {number}")),
    }
}

fn index(item: &Value, indexes: &[Value]) -> Result<Value, String> {
    if matches!(item, Value::Missing | Value::Nil) {
        return Err("index of untyped nil".into());
    }
    let mut item = item;
    let nil = Value::Nil;
    for index in indexes {
        item = match item {
            Value::Missing | Value::Nil => return Err("index of nil pointer".into()),
            Value::List(items) => {
                let at = index_arg(index, items.len())?;
                items
                    .get(at)
                    .ok_or_else(|| "reflect: slice index out of range".to_string())?
            }
            Value::String(text) => {
                let at = index_arg(index, text.len())?;
                let byte = text
                    .as_bytes()
                    .get(at)
                    .ok_or_else(|| "reflect: string index out of range".to_string())?;
                return Ok(Value::Int(i64::from(*byte)));
            }
            Value::Map(map) => match index {
                Value::String(key) => map.get(key).unwrap_or(&nil),
                Value::Missing | Value::Nil => {
                    return Err("value is nil; should be of type string".into());
                }
                other => {
                    return Err(format!(
                        "value has type {}; should be string",
                        other.type_name()
                    ));
                }
            },
            other => return Err(format!("can't index item of type {}", other.type_name())),
        };
    }
    Ok(item.clone())
}

fn slice(item: &Value, indexes: &[Value]) -> Result<Value, String> {
    if matches!(item, Value::Missing | Value::Nil) {
        return Err("slice of untyped nil".into());
    }
    if indexes.len() > 3 {
        return Err(format!("too many slice indexes: {}", indexes.len()));
    }
    let length = match item {
        Value::String(text) => {
            if indexes.len() == 3 {
                return Err("cannot 3-index slice a string".into());
            }
            text.len()
        }
        Value::List(items) => items.len(),
        other => return Err(format!("can't slice item of type {}", other.type_name())),
    };
    let mut bounds = [0, length, length];
    for (at, index) in indexes.iter().enumerate() {
        bounds[at] = index_arg(index, length)?;
    }
    if bounds[0] > bounds[1] {
        return Err(format!(
            "invalid slice index: {} > {}",
            bounds[0], bounds[1]
        ));
    }
    if indexes.len() == 3 && bounds[1] > bounds[2] {
        return Err(format!(
            "invalid slice index: {} > {}",
            bounds[1], bounds[2]
        ));
    }
    Ok(match item {
        Value::String(text) => Value::String(
            text.get(bounds[0]..bounds[1])
                .ok_or_else(|| "slice is not on a character boundary".to_string())?
                .to_string(),
        ),
        Value::List(items) => Value::List(items[bounds[0]..bounds[1]].to_vec()),
        _ => Value::Nil,
    })
}

/// Go's basic kinds, which comparison is defined on.
#[derive(PartialEq, Eq, Clone, Copy)]
enum Kind {
    Bool,
    Int,
    Float,
    String,
}

fn kind(value: &Value) -> Option<Kind> {
    match value {
        Value::Bool(_) => Some(Kind::Bool),
        Value::Int(_) => Some(Kind::Int),
        Value::Float(_) => Some(Kind::Float),
        Value::String(_) => Some(Kind::String),
        _ => None,
    }
}

const BAD_COMPARISON: &str = "incompatible types for comparison";
const BAD_COMPARISON_TYPE: &str = "invalid type for comparison";

fn is_nil(value: &Value) -> bool {
    matches!(value, Value::Missing | Value::Nil)
}

fn eq(first: &Value, others: &[Value]) -> Result<bool, String> {
    if others.is_empty() {
        return Err("missing argument for comparison".into());
    }
    for other in others {
        let truth = match (kind(first), kind(other)) {
            (Some(left), Some(right)) if left == right => first == other,
            (Some(_), Some(_)) => return Err(BAD_COMPARISON.into()),
            (None, None) if is_nil(first) || is_nil(other) => is_nil(first) && is_nil(other),
            (None, None) => {
                return Err(format!(
                    "non-comparable type {}: {}",
                    crate::fmt::sprint(std::slice::from_ref(first)),
                    first.type_name()
                ));
            }
            _ if is_nil(first) || is_nil(other) => false,
            _ => return Err(BAD_COMPARISON.into()),
        };
        if truth {
            return Ok(true);
        }
    }
    Ok(false)
}

fn lt(first: &Value, second: &Value) -> Result<bool, String> {
    let (Some(left), Some(right)) = (kind(first), kind(second)) else {
        return Err(BAD_COMPARISON_TYPE.into());
    };
    if left != right {
        return Err(BAD_COMPARISON.into());
    }
    Ok(match (first, second) {
        (Value::Int(a), Value::Int(b)) => a < b,
        (Value::Float(a), Value::Float(b)) => a < b,
        (Value::String(a), Value::String(b)) => a < b,
        _ => return Err(BAD_COMPARISON_TYPE.into()),
    })
}

fn le(first: &Value, second: &Value) -> Result<bool, String> {
    if lt(first, second)? {
        return Ok(true);
    }
    eq(first, std::slice::from_ref(second))
}

/// Go's `template.HTMLEscapeString`.
pub(crate) fn html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '"' => out.push_str("&#34;"),
            '\'' => out.push_str("&#39;"),
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\0' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// Go's `template.JSEscapeString`.
pub(crate) fn js(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '"' => out.push_str("\\\""),
            '<' => out.push_str("\\u003C"),
            '>' => out.push_str("\\u003E"),
            '&' => out.push_str("\\u0026"),
            '=' => out.push_str("\\u003D"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c if c.is_ascii() || crate::fmt::is_print(c) => out.push(c),
            c => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
        }
    }
    out
}

/// Go's `url.QueryEscape`.
pub(crate) fn urlquery(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(byte as char)
            }
            b' ' => out.push('+'),
            byte => {
                let _ = write!(out, "%{byte:02X}");
            }
        }
    }
    out
}
