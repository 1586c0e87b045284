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
