//! Values of the docker plugin and task configuration as HCL decoding leaves them: single
//! blocks, booleans and Go durations. A leaf module, so `config`, `gc` and `task` share it
//! without importing each other.

use std::time::Duration;

use serde_json::{Map, Value};

use crate::error::DockerError;

/// A single block as HCL decoding leaves it: an object, or a list holding one.
pub(crate) fn single_block<'a>(
    value: &'a Value,
    key: &str,
) -> Result<&'a Map<String, Value>, DockerError> {
    match value {
        Value::Object(map) => Ok(map),
        Value::Array(items) if items.len() == 1 => single_block(&items[0], key),
        _ => Err(DockerError::Config(format!("{key} must be a single block"))),
    }
}

pub(crate) fn bool_value(value: &Value, key: &str) -> Result<bool, DockerError> {
    match value {
        Value::Bool(flag) => Ok(*flag),
        Value::String(text) if text == "true" => Ok(true),
        Value::String(text) if text == "false" => Ok(false),
        _ => Err(DockerError::Config(format!("{key} must be true or false"))),
    }
}

/// A Go duration (`90s`, `5m`, `1h30m`) through the project's one Go duration parser.
pub(crate) fn parse_duration(text: &str, key: &str) -> Result<Duration, DockerError> {
    drover_structs::parse_go_duration(text.trim())
        .map(Duration::from_nanos)
        .map_err(|error| {
            DockerError::Config(format!(
                "{key} {text:?} is not a duration such as \"5m\": {error}"
            ))
        })
}
