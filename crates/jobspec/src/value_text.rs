//! How HCL values read as text: the kind of a value in an error message, a value printed as
//! Go's `fmt` prints it, and the `format` function's verbs. Shared by the evaluator and the
//! function library, which is why it is neither of them.

use hcl::Value;

/// The kind of a value as an error message names it ("a string", "a list", ...).
pub(crate) fn describe_value_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a bool",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// A value as text: strings as they are, null as nothing, anything else as JSON.
pub(crate) fn value_as_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        Value::Bool(flag) => flag.to_string(),
        Value::Number(number) => number.to_string(),
        other => serde_json::to_string(other).unwrap_or_default(),
    }
}

/// A subset of Go's `fmt` verbs: `%s`, `%d`, `%v`, `%q` and `%%`.
pub(crate) fn format_go_style(format: &str, arguments: &[Value]) -> Result<String, String> {
    let mut output = String::new();
    let mut remaining_arguments = arguments.iter();
    let mut characters = format.chars();
    while let Some(character) = characters.next() {
        if character != '%' {
            output.push(character);
            continue;
        }
        let verb = characters.next().ok_or("format ends with a lone %")?;
        if verb == '%' {
            output.push('%');
            continue;
        }
        let argument = remaining_arguments
            .next()
            .ok_or_else(|| format!("not enough arguments for %{verb}"))?;
        match verb {
            's' | 'v' => output.push_str(&value_as_text(argument)),
            'd' => match argument {
                Value::Number(number) => output.push_str(&number.to_string()),
                other => {
                    return Err(format!(
                        "%d needs a number, got {}",
                        describe_value_kind(other)
                    ));
                }
            },
            'q' => output.push_str(&format!("{:?}", value_as_text(argument))),
            other => return Err(format!("unsupported format verb %{other}")),
        }
    }
    Ok(output)
}
