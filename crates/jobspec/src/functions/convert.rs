//! `convert(value, type)`: HCL's type conversion, whose second argument is a type expression
//! (`string`, `list(number)`, `object({a = string})`, …) rather than a value, so it is read
//! from the call's syntax before the call is resolved.
//!
//! The conversions follow go-cty's `convert` package for the values a jobspec can hold:
//! primitives convert to each other where cty allows it (a number or bool to a string, a
//! numeric string to a number, "true"/"false" to a bool), collections element by element, and
//! `any` keeps a value as it is (inside a list, set or map it first unifies the elements to one
//! primitive type, as cty does). Not here: unknown values and optional object attributes.

use hcl::{Map, Value};
use hcl_edit::expr::{Expression, ObjectKey};

/// A type expression.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum TypeSpec {
    String,
    Number,
    Bool,
    Any,
    List(Box<TypeSpec>),
    Set(Box<TypeSpec>),
    Map(Box<TypeSpec>),
    Tuple(Vec<TypeSpec>),
    Object(Vec<(String, TypeSpec)>),
}

fn describe(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "tuple",
        Value::Object(_) => "object",
    }
}

/// Reads a type expression.
pub(super) fn type_spec(expression: &Expression) -> Result<TypeSpec, String> {
    match expression {
        Expression::Variable(name) => match name.as_str() {
            "string" => Ok(TypeSpec::String),
            "number" => Ok(TypeSpec::Number),
            "bool" => Ok(TypeSpec::Bool),
            "any" => Ok(TypeSpec::Any),
            "list" | "set" | "map" | "tuple" | "object" => Err(format!(
                "the {} type constructor requires one argument specifying the element type",
                name.as_str()
            )),
            other => Err(format!(
                "the keyword {other:?} is not a valid type specification"
            )),
        },
        Expression::Parenthesis(inner) => type_spec(inner.inner()),
        Expression::FuncCall(call) if call.name.namespace.is_empty() => {
            let name = call.name.name.as_str();
            let arguments: Vec<&Expression> = call.args.iter().collect();
            let [argument] = arguments.as_slice() else {
                return Err(format!("the {name} type constructor requires one argument"));
            };
            match name {
                "list" => Ok(TypeSpec::List(Box::new(type_spec(argument)?))),
                "set" => Ok(TypeSpec::Set(Box::new(type_spec(argument)?))),
                "map" => Ok(TypeSpec::Map(Box::new(type_spec(argument)?))),
                "tuple" => match argument {
                    Expression::Array(items) => Ok(TypeSpec::Tuple(
                        items.iter().map(type_spec).collect::<Result<_, _>>()?,
                    )),
                    _ => Err(
                        "the tuple type constructor requires a list of element types".to_string(),
                    ),
                },
                "object" => match argument {
                    Expression::Object(attributes) => {
                        let mut fields = Vec::new();
                        for (key, value) in attributes.iter() {
                            let key = match key {
                                ObjectKey::Ident(ident) => ident.as_str().to_string(),
                                ObjectKey::Expression(Expression::String(text)) => {
                                    text.as_str().to_string()
                                }
                                ObjectKey::Expression(_) => {
                                    return Err("object type attribute names must be identifiers or strings".to_string());
                                }
                            };
                            fields.push((key, type_spec(value.expr())?));
                        }
                        Ok(TypeSpec::Object(fields))
                    }
                    _ => Err(
                        "the object type constructor requires an object of attribute types"
                            .to_string(),
                    ),
                },
                other => Err(format!(
                    "the keyword {other:?} is not a valid type constructor"
                )),
            }
        }
        _ => Err("a type specification must be a type keyword or constructor".to_string()),
    }
}

/// Converts `value` to `target`, or says why it cannot.
pub(super) fn convert(value: Value, target: &TypeSpec) -> Result<Value, String> {
    if value.is_null() {
        return Ok(Value::Null);
    }
    match target {
        TypeSpec::Any => Ok(value),
        TypeSpec::String => match value {
            Value::String(_) => Ok(value),
            Value::Number(number) => Ok(Value::String(number.to_string())),
            Value::Bool(flag) => Ok(Value::String(flag.to_string())),
            other => Err(format!("string required, but have {}", describe(&other))),
        },
        TypeSpec::Number => match value {
            Value::Number(_) => Ok(value),
            Value::String(text) => text
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|number| number.is_finite() && !text.trim().is_empty())
                .and_then(hcl::Number::from_f64)
                .map(|number| Value::Number(integral(number)))
                .ok_or_else(|| "a number is required".to_string()),
            other => Err(format!("number required, but have {}", describe(&other))),
        },
        TypeSpec::Bool => match value {
            Value::Bool(_) => Ok(value),
            Value::String(text) if text == "true" => Ok(Value::Bool(true)),
            Value::String(text) if text == "false" => Ok(Value::Bool(false)),
            Value::String(_) => Err("a bool is required".to_string()),
            other => Err(format!("bool required, but have {}", describe(&other))),
        },
        TypeSpec::List(element) | TypeSpec::Set(element) => {
            let Value::Array(items) = value else {
                let kind = if matches!(target, TypeSpec::Set(_)) {
                    "set"
                } else {
                    "list"
                };
                return Err(format!("{kind} of {} required", describe_spec(element)));
            };
            let mut converted = convert_elements(items, element)?;
            if matches!(target, TypeSpec::Set(_)) {
                converted.sort_by(set_order);
                converted.dedup();
            }
            Ok(Value::Array(converted))
        }
        TypeSpec::Map(element) => {
            let Value::Object(attributes) = value else {
                return Err(format!("map of {} required", describe_spec(element)));
            };
            let (keys, values): (Vec<String>, Vec<Value>) = attributes.into_iter().unzip();
            let values = convert_elements(values, element)?;
            Ok(Value::Object(keys.into_iter().zip(values).collect()))
        }
        TypeSpec::Tuple(elements) => {
            let Value::Array(items) = value else {
                return Err("tuple required".to_string());
            };
            if items.len() != elements.len() {
                return Err(format!("tuple required with {} elements", elements.len()));
            }
            items
                .into_iter()
                .zip(elements)
                .enumerate()
                .map(|(index, (item, spec))| {
                    convert(item, spec).map_err(|problem| format!("element {index}: {problem}"))
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Value::Array)
        }
        TypeSpec::Object(fields) => {
            let Value::Object(mut attributes) = value else {
                return Err("object required".to_string());
            };
            let mut converted = Map::new();
            for (name, spec) in fields {
                let attribute = attributes
                    .swap_remove(name)
                    .ok_or_else(|| format!("attribute {name:?} is required"))?;
                let attribute = convert(attribute, spec)
                    .map_err(|problem| format!("attribute {name:?}: {problem}"))?;
                converted.insert(name.clone(), attribute);
            }
            converted.sort_keys();
            Ok(Value::Object(converted))
        }
    }
}

/// A whole number as an integer, as cty prints it.
fn integral(number: hcl::Number) -> hcl::Number {
    match number.as_f64() {
        Some(float) if float.fract() == 0.0 && float.abs() < 9.0e15 => {
            // Checked whole and within i64's exact range just above.
            #[allow(clippy::cast_possible_truncation)]
            hcl::Number::from(float as i64)
        }
        _ => number,
    }
}

fn describe_spec(spec: &TypeSpec) -> String {
    match spec {
        TypeSpec::String => "string".to_string(),
        TypeSpec::Number => "number".to_string(),
        TypeSpec::Bool => "bool".to_string(),
        TypeSpec::Any => "any".to_string(),
        TypeSpec::List(element) => format!("list of {}", describe_spec(element)),
        TypeSpec::Set(element) => format!("set of {}", describe_spec(element)),
        TypeSpec::Map(element) => format!("map of {}", describe_spec(element)),
        TypeSpec::Tuple(_) => "tuple".to_string(),
        TypeSpec::Object(_) => "object".to_string(),
    }
}

/// Converts every element to `element`; with `any`, first unifies primitive elements of mixed
/// types to strings, as cty finds one element type for a collection.
fn convert_elements(items: Vec<Value>, element: &TypeSpec) -> Result<Vec<Value>, String> {
    let target = if *element == TypeSpec::Any {
        let kinds: std::collections::BTreeSet<&str> = items
            .iter()
            .filter(|item| !item.is_null())
            .map(describe)
            .collect();
        let primitive = kinds
            .iter()
            .all(|kind| matches!(*kind, "string" | "number" | "bool"));
        if kinds.len() > 1 && primitive {
            TypeSpec::String
        } else if kinds.len() > 1 {
            return Err("all elements must be of the same type".to_string());
        } else {
            TypeSpec::Any
        }
    } else {
        element.clone()
    };
    items
        .into_iter()
        .enumerate()
        .map(|(index, item)| {
            convert(item, &target).map_err(|problem| format!("element {index}: {problem}"))
        })
        .collect()
}

/// cty's order of a set's elements: numbers by value, strings lexically, others as written.
fn set_order(left: &Value, right: &Value) -> std::cmp::Ordering {
    match (left, right) {
        (Value::Number(left), Value::Number(right)) => left
            .as_f64()
            .partial_cmp(&right.as_f64())
            .unwrap_or(std::cmp::Ordering::Equal),
        (Value::String(left), Value::String(right)) => left.cmp(right),
        (Value::Bool(left), Value::Bool(right)) => left.cmp(right),
        _ => std::cmp::Ordering::Equal,
    }
}
