//! The Golang Templating Language for Rust: Go's `text/template` (lexer, parser, executor,
//! built-in functions) over `gtmpl_value` values. drover's task templates render with it; the
//! functions Nomad adds (consul-template's and sprig's) are registered by the client, not here.
//!
//! A fork of gtmpl 0.7.1; `UPSTREAM.md` lists what changed. **Not** drover code in style: the
//! upstream code is kept close to its original so fixes can be compared, and the lints below
//! are allowed for that reason only.
//!
//! ## Example
//! ```rust
//! use gtmpl;
//!
//! let output = gtmpl::template("Finally! Some {{ . }} for Rust", "gtmpl");
//! assert_eq!(&output.unwrap(), "Finally! Some gtmpl for Rust");
//! ```
// Upstream style kept as it was (see the crate docs); each is a style lint, none a bug class.
#![allow(
    clippy::result_large_err,
    clippy::needless_borrowed_reference,
    clippy::question_mark,
    clippy::redundant_closure,
    clippy::cast_abs_to_unsigned,
    clippy::cloned_ref_to_slice_refs,
    clippy::double_ended_iterator_last,
    clippy::explicit_auto_deref,
    clippy::is_digit_ascii_radix,
    clippy::iter_overeager_cloned,
    clippy::to_string_in_format_args,
    clippy::unnecessary_lazy_evaluations,
    clippy::useless_conversion
)]

pub mod error;
mod exec;
pub mod funcs;
mod lexer;
mod node;
mod parse;
mod print_verb;
mod printf;
mod template;
mod utils;

#[doc(inline)]
pub use crate::template::Template;

#[doc(inline)]
pub use crate::exec::Context;

#[doc(inline)]
pub use gtmpl_value::Func;

pub use gtmpl_value::FuncError;

#[doc(inline)]
pub use gtmpl_value::from_value;

pub use error::{column_of, line_of, TemplateError};
pub use exec::{MAX_STEPS, MAX_TEMPLATE_DEPTH};
pub use gtmpl_value::Value;
pub use parse::MAX_NESTING;

/// JSON as a template value: objects become maps (so `.Field` reads a key), numbers stay
/// integers where they are whole.
pub fn value_from_json(json: &serde_json::Value) -> Value {
    match json {
        serde_json::Value::Null => Value::Nil,
        serde_json::Value::Bool(flag) => Value::Bool(*flag),
        serde_json::Value::String(text) => Value::String(text.clone()),
        serde_json::Value::Number(number) => {
            if let Some(integer) = number.as_i64() {
                Value::from(integer)
            } else if let Some(unsigned) = number.as_u64() {
                Value::from(unsigned)
            } else {
                Value::from(number.as_f64().unwrap_or_default())
            }
        }
        serde_json::Value::Array(items) => {
            Value::Array(items.iter().map(value_from_json).collect())
        }
        serde_json::Value::Object(map) => Value::Map(
            map.iter()
                .map(|(key, value)| (key.clone(), value_from_json(value)))
                .collect::<std::collections::HashMap<_, _>>(),
        ),
    }
}

/// Provides simple basic templating given just a template sting and context.
///
/// ## Example
/// ```rust
/// let output = gtmpl::template("Finally! Some {{ . }} for Rust", "gtmpl");
/// assert_eq!(&output.unwrap(), "Finally! Some gtmpl for Rust");
/// ```
/// Parses and renders `template_str` with the built-in functions only.
pub fn template<T: Into<Value>>(template_str: &str, context: T) -> Result<String, TemplateError> {
    let mut tmpl = Template::default();
    tmpl.parse(template_str)?;
    tmpl.render(&Context::from(context)).map_err(Into::into)
}
