//! drover's Go `text/template` engine: the language of task templates and of the CLI's `-t`.
//!
//! A template goes through three stages, one module each: the lexer ([`lex`]) cuts the text
//! into tokens, the parser ([`parse`]) builds a tree ([`tree`]) per template (the top one and
//! each `define`/`block`), and the executor ([`exec`]) walks a tree over a [`Value`], calling
//! Go's built-in functions ([`builtins`], printing through Go's `fmt` rules in [`fmt`]) and
//! the functions the caller registers ([`Func`]: the client adds consul-template's).
//!
//! Errors carry Go's texts, line and column ([`Error`]). Hostile templates are bounded:
//! nesting ([`MAX_NESTING`]), `{{ template }}` depth ([`MAX_TEMPLATE_DEPTH`]), steps
//! ([`MAX_STEPS`]) and output size ([`Template::max_output`]).
//!
//! ```
//! let mut template = drover_template::Template::new("t");
//! template.parse("{{ range . }}<{{ . }}>{{ end }}").unwrap();
//! let data = drover_template::Value::List(vec!["a".into(), "b".into()]);
//! assert_eq!(template.execute(&data).unwrap(), "<a><b>");
//! ```
//!
//! **Not** here: the functions task templates add (`crates/client/src/template/funcs.rs`).
//!
//! # Layers
//!
//! Each module directly under `src/` uses only modules on the lines below its own (`error`
//! modules aside), as `crates/structs/tests/module_cycles.rs` checks; top first:
//!
//! - `exec`, `parse`
//! - `tree`
//! - `builtins`, `lex`
//! - `fmt`, `func`
//! - `value`
//!
//! # Design notes
//!
//! A conformance table (`tests/fixtures/conformance.jsonl`, made by Go 1.19 itself with
//! `tests/fixtures/gen`) holds the output Go gives for each construct. Bounds for hostile
//! templates: nesting 32, `template` depth 16 (Go allows 100 000), 10 million steps, the
//! caller's output limit. Values are JSON's (`Value::from_json`). **Limits**: data holds no
//! functions, so `call` always fails as Go's does on a non-function; no `range` over an integer
//! (Go 1.22). Functions are `fn` pointers, so the client hands `env` and `file` their task
//! through a thread-local scope for the length of one render.

mod builtins;
mod error;
mod exec;
pub mod fmt;
mod func;
mod lex;
mod parse;
mod tree;
mod value;

use std::collections::HashMap;

pub use error::{Error, ErrorKind};
pub use exec::{MAX_STEPS, MAX_TEMPLATE_DEPTH};
pub use func::{Func, FuncError};
pub use parse::MAX_NESTING;
pub use tree::Template;
pub use value::Value;

impl Template {
    /// An empty template called `name` (the name errors give).
    pub fn new(name: &str) -> Self {
        Template {
            name: name.to_string(),
            text: String::new(),
            left: String::new(),
            right: String::new(),
            funcs: HashMap::new(),
            trees: HashMap::new(),
            missing_key_error: false,
            max_output: usize::MAX,
        }
    }

    /// Action delimiters other than `{{` and `}}` (an empty one stays the default).
    pub fn delims(&mut self, left: &str, right: &str) -> &mut Self {
        self.left = left.to_string();
        self.right = right.to_string();
        self
    }

    /// Adds functions the template may call; they must be added before [`Template::parse`].
    pub fn funcs(&mut self, funcs: &[(&str, Func)]) -> &mut Self {
        self.funcs
            .extend(funcs.iter().map(|(name, func)| (name.to_string(), *func)));
        self
    }

    /// Parses `text` as the template's body.
    pub fn parse(&mut self, text: &str) -> Result<&mut Self, Error> {
        self.text = text.to_string();
        self.trees = parse::parse(&self.name, text, &self.left, &self.right, &self.funcs)?;
        Ok(self)
    }

    /// Runs the template over `data` (dot, and `$`) and returns what it wrote.
    pub fn execute(&self, data: &Value) -> Result<String, Error> {
        exec::execute(self, &self.name, data)
    }

    /// Runs the template `name` defined in this one.
    pub fn execute_named(&self, name: &str, data: &Value) -> Result<String, Error> {
        exec::execute(self, name, data)
    }
}

/// Parses and runs `text` over `data` as a template called `name` with Go's functions only.
pub fn render(name: &str, text: &str, data: &Value) -> Result<String, Error> {
    Template::new(name).parse(text)?.execute(data)
}
