//! Task templates: rendering one template (Go `text/template` through the `drover-template` engine with
//! consul-template's functions, [`funcs`]), the files it reads and writes beneath the task dir
//! ([`beneath`]), and the `env = true` file format ([`parse_env_file`]).
//!
//! **Not** here: when templates render, re-render or what a change does to the task — the
//! template hook (`taskrunner::hooks::template`) decides that.

pub mod beneath;
pub mod funcs;

use std::collections::BTreeMap;

pub use funcs::RenderScope;

/// Largest output one template may render.
pub const MAX_OUTPUT_BYTES: usize = 64 * 1024 * 1024;

/// What to render.
#[derive(Debug, Clone, Copy)]
pub struct TemplateText<'a> {
    /// The destination, which names the template in errors.
    pub destination: &'a str,
    pub text: &'a str,
    pub left_delimiter: &'a str,
    pub right_delimiter: &'a str,
    /// A missing map key fails the render (`error_on_missing_key`) instead of rendering
    /// `<no value>`.
    pub error_on_missing_key: bool,
}

/// A template that could not be rendered: its destination, the line:column inside it where
/// known, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("template {destination}{}: {message}", position_suffix(*.line, *.column))]
pub struct RenderError {
    pub destination: String,
    pub line: Option<usize>,
    pub column: Option<usize>,
    pub message: String,
}

fn position_suffix(line: Option<usize>, column: Option<usize>) -> String {
    match (line, column) {
        (Some(line), Some(column)) => format!(" at {line}:{column}"),
        _ => String::new(),
    }
}

/// Renders `template` with the functions of [`funcs`] and `scope` for `env` and `file`; returns
/// the output and the scope (which records the files read).
pub fn render(
    template: TemplateText<'_>,
    scope: RenderScope,
) -> (Result<String, RenderError>, RenderScope) {
    let fail = |error: drover_template::Error| RenderError {
        destination: template.destination.to_string(),
        line: error.line,
        column: error.column,
        message: error.message,
    };
    let mut engine = drover_template::Template::new(template.destination);
    engine
        .funcs(&funcs::all())
        .delims(template.left_delimiter, template.right_delimiter);
    engine.missing_key_error = template.error_on_missing_key;
    engine.max_output = MAX_OUTPUT_BYTES;
    if let Err(error) = engine.parse(template.text) {
        return (Err(fail(error)), scope);
    }
    let (result, scope) =
        funcs::with_scope(scope, || engine.execute(&drover_template::Value::Missing));
    (result.map_err(fail), scope)
}

/// Parses a rendered `env = true` file: `KEY=VALUE` lines, blank lines and `#` comments
/// skipped, an optional `export ` prefix, values optionally in single quotes (literal) or double
/// quotes (with `\n`, `\t`, `\"`, `\\` escapes); an unquoted value ends at a ` #` comment.
pub fn parse_env_file(contents: &str) -> Result<BTreeMap<String, String>, String> {
    let mut variables = BTreeMap::new();
    for (index, line) in contents.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line).trim_start();
        let Some((key, value)) = line.split_once('=') else {
            return Err(format!("line {}: expected KEY=VALUE", index + 1));
        };
        let key = key.trim();
        let valid_key = !key.is_empty()
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '-')
            && !key.starts_with(|c: char| c.is_ascii_digit());
        if !valid_key {
            return Err(format!("line {}: invalid variable name {key:?}", index + 1));
        }
        let value = value.trim();
        let value = if let Some(inner) = value.strip_prefix('\'') {
            inner
                .strip_suffix('\'')
                .ok_or_else(|| format!("line {}: unterminated single quote", index + 1))?
                .to_string()
        } else if let Some(inner) = value.strip_prefix('"') {
            let inner = inner
                .strip_suffix('"')
                .ok_or_else(|| format!("line {}: unterminated double quote", index + 1))?;
            let mut out = String::new();
            let mut chars = inner.chars();
            while let Some(c) = chars.next() {
                if c != '\\' {
                    out.push(c);
                    continue;
                }
                match chars.next() {
                    Some('n') => out.push('\n'),
                    Some('t') => out.push('\t'),
                    Some('r') => out.push('\r'),
                    Some(other) => out.push(other),
                    None => out.push('\\'),
                }
            }
            out
        } else {
            value
                .split_once(" #")
                .map_or(value, |(before, _)| before)
                .trim_end()
                .to_string()
        };
        variables.insert(key.to_string(), value);
    }
    Ok(variables)
}

#[cfg(test)]
mod tests;
