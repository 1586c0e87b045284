//! The values a template works on: what JSON holds (Go's `interface{}` after
//! `encoding/json`, with integers kept as integers), plus `Missing`, Go's invalid
//! `reflect.Value` (a map key that is not there), which prints as `<no value>`.
//!
//! Maps are ordered by key, as Go's `fmt` prints them and `range` visits them.

use std::collections::BTreeMap;

/// A template value.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Value {
    /// No value at all: a missing map key, `{{ template }}` without data.
    #[default]
    Missing,
    /// JSON's `null`, Go's `nil`.
    Nil,
    Bool(bool),
    Int(i64),
    Float(f64),
    String(String),
    List(Vec<Value>),
    Map(BTreeMap<String, Value>),
}

impl Value {
    /// Go's truth: false, 0, nil, and empty strings, lists and maps are false.
    pub fn is_true(&self) -> bool {
        match self {
            Value::Missing | Value::Nil => false,
            Value::Bool(flag) => *flag,
            Value::Int(number) => *number != 0,
            Value::Float(number) => *number != 0.0,
            Value::String(text) => !text.is_empty(),
            Value::List(items) => !items.is_empty(),
            Value::Map(map) => !map.is_empty(),
        }
    }

    /// The Go type `%T` and error texts name (as `encoding/json` decodes into `interface{}`).
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Missing | Value::Nil => "<nil>",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Float(_) => "float64",
            Value::String(_) => "string",
            Value::List(_) => "[]interface {}",
            Value::Map(_) => "map[string]interface {}",
        }
    }

    /// The value as a function argument: Go hands a function `nil` for a missing value.
    pub(crate) fn into_argument(self) -> Value {
        match self {
            Value::Missing => Value::Nil,
            other => other,
        }
    }

    /// JSON as a value: integers that fit `i64` stay integers, other numbers are floats.
    pub fn from_json(json: &serde_json::Value) -> Value {
        match json {
            serde_json::Value::Null => Value::Nil,
            serde_json::Value::Bool(flag) => Value::Bool(*flag),
            serde_json::Value::Number(number) => match number.as_i64() {
                Some(integer) => Value::Int(integer),
                None => Value::Float(number.as_f64().unwrap_or(f64::NAN)),
            },
            serde_json::Value::String(text) => Value::String(text.clone()),
            serde_json::Value::Array(items) => {
                Value::List(items.iter().map(Value::from_json).collect())
            }
            serde_json::Value::Object(map) => Value::Map(
                map.iter()
                    .map(|(key, value)| (key.clone(), Value::from_json(value)))
                    .collect(),
            ),
        }
    }
}

impl From<bool> for Value {
    fn from(flag: bool) -> Self {
        Value::Bool(flag)
    }
}

impl From<i64> for Value {
    fn from(number: i64) -> Self {
        Value::Int(number)
    }
}

impl From<f64> for Value {
    fn from(number: f64) -> Self {
        Value::Float(number)
    }
}

impl From<String> for Value {
    fn from(text: String) -> Self {
        Value::String(text)
    }
}

impl From<&str> for Value {
    fn from(text: &str) -> Self {
        Value::String(text.to_string())
    }
}

impl From<Vec<Value>> for Value {
    fn from(items: Vec<Value>) -> Self {
        Value::List(items)
    }
}

impl From<BTreeMap<String, Value>> for Value {
    fn from(map: BTreeMap<String, Value>) -> Self {
        Value::Map(map)
    }
}
