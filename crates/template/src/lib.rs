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

mod builtins;
mod error;
mod exec;
pub mod fmt;
mod lex;
mod parse;
mod tree;
mod value;

use std::collections::HashMap;

pub use error::{Error, ErrorKind};
pub use exec::{MAX_STEPS, MAX_TEMPLATE_DEPTH};
pub use parse::MAX_NESTING;
pub use value::Value;

/// A function a template may call: the evaluated arguments (the piped value last) in, a value
/// or an error (shown as `error calling <name>: <error>`) out.
pub type Func = fn(&[Value]) -> Result<Value, FuncError>;

/// Why a [`Func`] failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FuncError(pub String);

impl FuncError {
    pub fn new(message: impl Into<String>) -> Self {
        FuncError(message.into())
    }
}

/// A named template: its text, functions, delimiters and options, and once parsed the trees
/// of it and of the templates it defines.
#[derive(Debug, Clone)]
pub struct Template {
    name: String,
    text: String,
    left: String,
    right: String,
    funcs: HashMap<String, Func>,
    trees: HashMap<String, tree::List>,
    /// A missing map key fails the execution (Go's `missingkey=error`) instead of printing
    /// `<no value>`.
    pub missing_key_error: bool,
    /// Largest output an execution may write, in bytes.
    pub max_output: usize,
}

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
