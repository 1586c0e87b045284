use std::collections::HashMap;

use crate::error::{ParseError, TemplateError};
use crate::funcs::BUILTINS;
use crate::lexer::{DEFAULT_LEFT_DELIM, DEFAULT_RIGHT_DELIM};
use crate::parse::{parse, Tree};

use gtmpl_value::Func;

/// The main template structure.
pub struct Template {
    pub name: String,
    pub text: String,
    pub funcs: HashMap<String, Func>,
    pub tree_set: HashMap<String, Tree>,
    /// The action delimiters `parse` and `add_template` read (Go's `Delims`).
    pub left_delim: String,
    pub right_delim: String,
    /// A missing map key is an error rather than no value (Go's `missingkey=error`).
    pub missing_key_error: bool,
}

impl Default for Template {
    fn default() -> Template {
        Template {
            name: String::default(),
            text: String::from(""),
            funcs: BUILTINS.iter().map(|&(k, v)| (k.to_owned(), v)).collect(),
            tree_set: HashMap::default(),
            left_delim: DEFAULT_LEFT_DELIM.to_owned(),
            right_delim: DEFAULT_RIGHT_DELIM.to_owned(),
            missing_key_error: false,
        }
    }
}

impl Template {
    /// Sets the action delimiters; an empty one keeps the default (`{{`, `}}`), as in Go.
    pub fn delims(&mut self, left: &str, right: &str) {
        self.left_delim = if left.is_empty() {
            DEFAULT_LEFT_DELIM
        } else {
            left
        }
        .to_owned();
        self.right_delim = if right.is_empty() {
            DEFAULT_RIGHT_DELIM
        } else {
            right
        }
        .to_owned();
    }

    /// Creates a new empty template with a given `name`.
    pub fn with_name<T: Into<String>>(name: T) -> Template {
        Template {
            name: name.into(),
            ..Default::default()
        }
    }

    /// Adds a single custom function to the template.
    ///
    /// ## Example
    ///
    /// ```rust
    /// use gtmpl::{Context, Func, FuncError, Value};
    ///
    /// fn hello_world(_args: &[Value]) -> Result<Value, FuncError> {
    ///   Ok(Value::from("Hello World!"))
    /// }
    ///
    /// let mut tmpl = gtmpl::Template::default();
    /// tmpl.add_func("helloWorld", hello_world);
    /// tmpl.parse("{{ helloWorld }}").unwrap();
    /// let output = tmpl.render(&Context::empty());
    /// assert_eq!(&output.unwrap(), "Hello World!");
    /// ```
    pub fn add_func(&mut self, name: &str, func: Func) {
        self.funcs.insert(name.to_owned(), func);
    }

    /// Adds custom functions to the template.
    ///
    /// ## Example
    ///
    /// ```rust
    /// use std::collections::HashMap;
    ///
    /// use gtmpl::{Context, Func, FuncError, Value};
    ///
    /// fn hello_world(_args: &[Value]) -> Result<Value, FuncError> {
    ///   Ok(Value::from("Hello World!"))
    /// }
    ///
    /// let funcs = vec![("helloWorld", hello_world as Func)];
    /// let mut tmpl = gtmpl::Template::default();
    /// tmpl.add_funcs(&funcs);
    /// tmpl.parse("{{ helloWorld }}").unwrap();
    /// let output = tmpl.render(&Context::empty());
    /// assert_eq!(&output.unwrap(), "Hello World!");
    /// ```
    pub fn add_funcs<T: Into<String> + Clone>(&mut self, funcs: &[(T, Func)]) {
        self.funcs
            .extend(funcs.iter().cloned().map(|(k, v)| (k.into(), v)));
    }

    /// Parse the given `text` as template body.
    ///
    /// ## Example
    ///
    /// ```rust
    /// let mut tmpl = gtmpl::Template::default();
    /// tmpl.parse("Hello World!").unwrap();
    /// ```
    pub fn parse<T: Into<String>>(&mut self, text: T) -> Result<(), ParseError> {
        let tree_set = parse(
            self.name.clone(),
            text.into(),
            self.funcs.keys().cloned().collect(),
            &self.left_delim,
            &self.right_delim,
        )?;
        self.tree_set.extend(tree_set);
        Ok(())
    }

    /// Add the given `text` as a template with a `name`.
    ///
    /// ## Example
    ///
    /// ```rust
    /// use gtmpl::Context;
    ///
    /// let mut tmpl = gtmpl::Template::default();
    /// tmpl.add_template("fancy", "{{ . }}");
    /// tmpl.parse(r#"{{ template "fancy" . }}!"#).unwrap();
    /// let output = tmpl.render(&Context::from("Hello World"));
    /// assert_eq!(&output.unwrap(), "Hello World!");
    /// ```
    pub fn add_template<N: Into<String>, T: Into<String>>(
        &mut self,
        name: N,
        text: T,
    ) -> Result<(), TemplateError> {
        let tree_set = parse(
            name.into(),
            text.into(),
            self.funcs.keys().cloned().collect(),
            &self.left_delim,
            &self.right_delim,
        )?;
        self.tree_set.extend(tree_set);
        Ok(())
    }
}

#[cfg(test)]
mod tests_mocked {
    use super::*;

    #[test]
    fn test_parse() {
        let mut t = Template::with_name("foo");
        assert!(t.parse(r#"{{ if eq "bar" "bar" }} 2000 {{ end }}"#).is_ok());
        assert!(t.tree_set.contains_key("foo"));
    }

    #[test]
    fn parse_errors_read_as_gos() {
        // Each as Go 1.19's text/template answers `template.New("").Parse(text)`.
        for (text, go) in [
            ("{{.Name", "template: :1: unclosed action"),
            ("{{.Name#}}", "template: :1: bad character U+0023 '#'"),
            ("{{range .}}{{.Name}}", "template: :1: unexpected EOF"),
            ("{{nope}}", "template: :1: function \"nope\" not defined"),
        ] {
            let error = Template::default().parse(text).expect_err(text);
            assert_eq!(error.to_string(), go, "{text}");
        }
    }
}
