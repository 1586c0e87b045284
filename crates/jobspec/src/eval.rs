//! Evaluation of jobspec expressions: HCL2 `variable` and `locals` values, `var.x` / `local.x`
//! references, a small standard function library, and Nomad's rule that a reference to any
//! *other* root variable (`${attr.kernel.name}`, `${NOMAD_ALLOC_ID}`, `${meta.rack}`) stays in
//! the result as the literal text `${...}` for the client to interpolate at run time.
//!
//! Not a type checker for the job schema: it produces `hcl::Value`s, and the decoder decides
//! whether a value fits the field it is assigned to.

use std::collections::{BTreeMap, BTreeSet};

use hcl::eval::{Context, Evaluate, FuncArgs, FuncDef, ParamType};
use hcl::expr::{Expression, ObjectKey, TraversalOperator};
use hcl::template::{Directive, Element, Template};
use hcl::{Map, Value};

use crate::value_text::{describe_value_kind, format_go_style, value_as_text};

/// Roots evaluated from the jobspec itself; every other root variable is a runtime placeholder.
const INPUT_VARIABLES_ROOT: &str = "var";
const LOCALS_ROOT: &str = "local";

/// Values for input variables supplied from outside the jobspec (`-var`, `-var-file`,
/// `NOMAD_VAR_*`), applied over the `default` of each `variable` block.
#[derive(Debug, Clone, Default)]
pub struct VarValues {
    values: BTreeMap<String, VariableInput>,
    /// `NOMAD_VAR_<name>` values: lowest precedence, and ignored when the jobspec does not
    /// declare the variable (the environment holds values for many jobspecs).
    environment: BTreeMap<String, String>,
}

#[derive(Debug, Clone)]
pub(crate) enum VariableInput {
    /// Raw text (`-var name=text`, environment): converted according to the declared type.
    Text(String),
    /// An already evaluated value (from a var file).
    Value(Value),
}

impl VarValues {
    pub fn new() -> Self {
        VarValues::default()
    }

    /// Sets a variable from raw text, as `-var name=text` does. Later calls win.
    pub fn set_text(&mut self, name: impl Into<String>, text: impl Into<String>) {
        self.values
            .insert(name.into(), VariableInput::Text(text.into()));
    }

    /// Sets a variable from the environment (`NOMAD_VAR_name=text`); explicit values win over it.
    pub fn set_environment_text(&mut self, name: impl Into<String>, text: impl Into<String>) {
        self.environment.insert(name.into(), text.into());
    }

    /// Collects every `NOMAD_VAR_<name>` variable from an environment listing.
    pub fn add_environment(&mut self, environment: impl IntoIterator<Item = (String, String)>) {
        for (key, text) in environment {
            if let Some(name) = key.strip_prefix("NOMAD_VAR_")
                && !name.is_empty()
            {
                self.set_environment_text(name, text);
            }
        }
    }

    /// Sets a variable to a value, as a var file does. Later calls win.
    pub fn set_value(&mut self, name: impl Into<String>, value: Value) {
        self.values.insert(name.into(), VariableInput::Value(value));
    }

    /// Parses a `-var` argument of the form `name=text`.
    pub fn set_assignment(&mut self, assignment: &str) -> Result<(), String> {
        match assignment.split_once('=') {
            Some((name, text)) if !name.trim().is_empty() => {
                self.set_text(name.trim(), text);
                Ok(())
            }
            _ => Err(format!(
                "invalid variable assignment {assignment:?}: expected name=value"
            )),
        }
    }

    /// Reads a var file (HCL attributes `name = value`), evaluated without variables.
    pub fn add_var_file(
        &mut self,
        source: &str,
        filename: &str,
    ) -> Result<(), crate::diagnostic::Diagnostics> {
        let source_map = crate::diagnostic::SourceMap::new(source);
        let body = crate::hcl_parse::parse_body(source, filename, &source_map)?;
        let mut diagnostics = Vec::new();
        let evaluator = Evaluator::new(Value::Object(Map::new()), Map::new());
        for structure in body.iter() {
            match structure {
                hcl_edit::structure::Structure::Attribute(attribute) => {
                    match evaluator.evaluate(&attribute.value) {
                        Ok(value) => self.set_value(attribute.key.as_str(), value),
                        Err(message) => diagnostics.push(crate::diagnostic::Diagnostic::new(
                            filename,
                            source_map.position_of_span(&hcl_edit::Span::span(&attribute.value)),
                            message,
                        )),
                    }
                }
                hcl_edit::structure::Structure::Block(block) => {
                    diagnostics.push(crate::diagnostic::Diagnostic::new(
                        filename,
                        source_map.position_of_span(&hcl_edit::Span::span(block)),
                        format!(
                            "a variables file may only contain assignments, not a {:?} block",
                            block.ident.as_str()
                        ),
                    ))
                }
            }
        }
        if diagnostics.is_empty() {
            Ok(())
        } else {
            Err(crate::diagnostic::Diagnostics(diagnostics))
        }
    }

    pub(crate) fn get(&self, name: &str) -> Option<VariableInput> {
        self.values.get(name).cloned().or_else(|| {
            self.environment
                .get(name)
                .map(|text| VariableInput::Text(text.clone()))
        })
    }

    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        self.values.keys().map(String::as_str)
    }
}

/// The declared type of an input variable (`type = list(string)`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum VariableType {
    Any,
    String,
    Number,
    Bool,
    List(Box<VariableType>),
    Map(Box<VariableType>),
}

impl VariableType {
    /// Reads a type expression; `None` when it is not a type this parser knows.
    pub(crate) fn from_expression(expression: &hcl_edit::expr::Expression) -> Option<Self> {
        use hcl_edit::expr::Expression as EditExpression;
        match expression {
            EditExpression::Variable(variable) => match variable.as_str() {
                "any" => Some(VariableType::Any),
                "string" => Some(VariableType::String),
                "number" => Some(VariableType::Number),
                "bool" => Some(VariableType::Bool),
                "list" | "set" | "tuple" => Some(VariableType::List(Box::new(VariableType::Any))),
                "map" | "object" => Some(VariableType::Map(Box::new(VariableType::Any))),
                _ => None,
            },
            EditExpression::FuncCall(call) => {
                let name = call.name.name.as_str();
                let arguments: Vec<_> = call.args.iter().collect();
                match (name, arguments.as_slice()) {
                    ("list" | "set", [element]) => Some(VariableType::List(Box::new(
                        VariableType::from_expression(element)?,
                    ))),
                    ("map", [element]) => Some(VariableType::Map(Box::new(
                        VariableType::from_expression(element)?,
                    ))),
                    // Structural types are accepted and checked only loosely.
                    ("object", [_]) => Some(VariableType::Map(Box::new(VariableType::Any))),
                    ("tuple", [_]) => Some(VariableType::List(Box::new(VariableType::Any))),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    fn describe(&self) -> String {
        match self {
            VariableType::Any => "any".into(),
            VariableType::String => "string".into(),
            VariableType::Number => "number".into(),
            VariableType::Bool => "bool".into(),
            VariableType::List(element) => format!("list({})", element.describe()),
            VariableType::Map(element) => format!("map({})", element.describe()),
        }
    }

    /// Converts a value to this type the way HCL's type conversion does for the cases that
    /// matter in jobspecs (numbers and bools to strings and back).
    pub(crate) fn convert(&self, value: Value) -> Result<Value, String> {
        let mismatch = |value: &Value| {
            format!(
                "a {} is required, got {}",
                self.describe(),
                describe_value_kind(value)
            )
        };
        match (self, value) {
            (VariableType::Any, value) => Ok(value),
            (_, Value::Null) => Ok(Value::Null),
            (VariableType::String, Value::String(text)) => Ok(Value::String(text)),
            (VariableType::String, Value::Number(number)) => Ok(Value::String(number.to_string())),
            (VariableType::String, Value::Bool(flag)) => Ok(Value::String(flag.to_string())),
            (VariableType::Number, Value::Number(number)) => Ok(Value::Number(number)),
            (VariableType::Number, Value::String(text)) => parse_number(&text)
                .map(Value::Number)
                .ok_or_else(|| format!("a number is required, got {text:?}")),
            (VariableType::Bool, Value::Bool(flag)) => Ok(Value::Bool(flag)),
            (VariableType::Bool, Value::String(text)) => match text.as_str() {
                "true" => Ok(Value::Bool(true)),
                "false" => Ok(Value::Bool(false)),
                _ => Err(format!("a bool is required, got {text:?}")),
            },
            (VariableType::List(element), Value::Array(items)) => items
                .into_iter()
                .map(|item| element.convert(item))
                .collect::<Result<Vec<_>, _>>()
                .map(Value::Array),
            (VariableType::Map(element), Value::Object(entries)) => entries
                .into_iter()
                .map(|(key, item)| element.convert(item).map(|item| (key, item)))
                .collect::<Result<Map<_, _>, _>>()
                .map(Value::Object),
            (_, other) => Err(mismatch(&other)),
        }
    }

    /// Converts raw text (`-var name=text`) to this type: primitives are read as they are,
    /// collections are parsed as an HCL expression.
    pub(crate) fn convert_text(&self, text: &str) -> Result<Value, String> {
        match self {
            VariableType::Any | VariableType::String => Ok(Value::String(text.to_string())),
            VariableType::Number | VariableType::Bool => {
                self.convert(Value::String(text.to_string()))
            }
            VariableType::List(_) | VariableType::Map(_) => {
                let expression = hcl_edit::parser::parse_expr(text)
                    .map_err(|error| format!("cannot parse {text:?}: {}", error.message()))?;
                let value =
                    Evaluator::new(Value::Object(Map::new()), Map::new()).evaluate(&expression)?;
                self.convert(value)
            }
        }
    }
}

fn parse_number(text: &str) -> Option<hcl::Number> {
    let trimmed = text.trim();
    if let Ok(integer) = trimmed.parse::<i64>() {
        return Some(hcl::Number::from(integer));
    }
    trimmed.parse::<f64>().ok().and_then(hcl::Number::from_f64)
}

/// Evaluates expressions with `var` and `local` bound and runtime variables kept as text.
#[derive(Debug, Clone)]
pub(crate) struct Evaluator {
    base_context: Context<'static>,
    /// Names bound besides `var` and `local` (a `dynamic` block's iterator, a validated
    /// variable), which are not runtime references.
    bound: BTreeSet<String>,
    /// The directory `file(...)` and its kin read relative to, or `None` where filesystem
    /// functions are disabled (as Nomad disables them when its API parses a jobspec).
    files: Option<std::path::PathBuf>,
}

impl Evaluator {
    pub(crate) fn new(input_variables: Value, locals: Map<String, Value>) -> Self {
        let mut base_context = Context::new();
        base_context.declare_var(INPUT_VARIABLES_ROOT, input_variables);
        base_context.declare_var(LOCALS_ROOT, Value::Object(locals));
        declare_functions(&mut base_context);
        Evaluator {
            base_context,
            bound: BTreeSet::new(),
            files: None,
        }
    }

    /// This evaluator with filesystem functions reading relative to `base` (or disabled).
    pub(crate) fn with_files(mut self, base: Option<&std::path::Path>) -> Evaluator {
        self.files = base.map(std::path::Path::to_path_buf);
        self
    }

    /// This evaluator with one more name bound (a `dynamic` block's iterator).
    pub(crate) fn with_variable(&self, name: &str, value: Value) -> Evaluator {
        let mut child = self.clone();
        child.base_context.declare_var(name.to_string(), value);
        child.bound.insert(name.to_string());
        child
    }

    /// Evaluates one expression. Errors are lowercase messages without position; the caller
    /// knows where the expression is.
    pub(crate) fn evaluate(
        &self,
        expression: &hcl_edit::expr::Expression,
    ) -> Result<Value, String> {
        let mut edited = expression.clone();
        let expression: Expression = edited.clone().into();
        let mut placeholders = PlaceholderTree::default();
        collect_runtime_references(&expression, &mut placeholders);
        let mut context = self.base_context.clone();
        for (root, node) in placeholders.children {
            if root == INPUT_VARIABLES_ROOT || root == LOCALS_ROOT || self.bound.contains(&root) {
                continue;
            }
            context.declare_var(root.clone(), node.into_value(&root));
        }
        let file_problem =
            crate::functions::resolve_calls(&mut edited, &context, self.files.as_deref())?;
        let expression: Expression = edited.into();
        expression.evaluate(&context).map_err(|error| {
            // A filesystem call left in place failed: its own reason says more.
            file_problem.unwrap_or_else(|| error.kind().to_string())
        })
    }
}

/// The runtime references seen in one expression, as a tree of attribute names; a leaf
/// becomes the text `${root.a.b}`.
#[derive(Debug, Default)]
struct PlaceholderTree {
    children: BTreeMap<String, PlaceholderTree>,
    /// Whether this node was reached with an index (`env["PATH"]`) rather than an attribute
    /// (`attr.kernel`), so the text keeps the form the user wrote.
    reached_by_index: bool,
}

impl PlaceholderTree {
    fn into_value(self, text_so_far: &str) -> Value {
        if self.children.is_empty() {
            return Value::String(format!("${{{text_so_far}}}"));
        }
        let mut object = Map::new();
        for (name, child) in self.children {
            let text = if child.reached_by_index || !is_identifier(&name) {
                format!("{text_so_far}[{name:?}]")
            } else {
                format!("{text_so_far}.{name}")
            };
            object.insert(name, child.into_value(&text));
        }
        Value::Object(object)
    }
}

fn is_identifier(name: &str) -> bool {
    let mut characters = name.chars();
    characters
        .next()
        .is_some_and(|first| first.is_alphabetic() || first == '_')
        && characters
            .all(|character| character.is_alphanumeric() || character == '_' || character == '-')
}

fn collect_runtime_references(expression: &Expression, tree: &mut PlaceholderTree) {
    match expression {
        Expression::Variable(variable) => {
            tree.children
                .entry(variable.as_str().to_string())
                .or_default();
        }
        Expression::Traversal(traversal) => {
            if let Expression::Variable(root) = &traversal.expr {
                let mut node = tree.children.entry(root.as_str().to_string()).or_default();
                for operator in &traversal.operators {
                    let (key, reached_by_index) = match operator {
                        TraversalOperator::GetAttr(name) => (name.as_str().to_string(), false),
                        TraversalOperator::Index(Expression::String(key)) => (key.clone(), true),
                        _ => break,
                    };
                    node = node.children.entry(key).or_default();
                    node.reached_by_index |= reached_by_index;
                }
            } else {
                collect_runtime_references(&traversal.expr, tree);
            }
            for operator in &traversal.operators {
                if let TraversalOperator::Index(index) = operator {
                    collect_runtime_references(index, tree);
                }
            }
        }
        Expression::Array(items) => {
            for item in items {
                collect_runtime_references(item, tree);
            }
        }
        Expression::Object(entries) => {
            for (key, value) in entries {
                if let ObjectKey::Expression(key) = key {
                    collect_runtime_references(key, tree);
                }
                collect_runtime_references(value, tree);
            }
        }
        Expression::TemplateExpr(template_expression) => {
            if let Ok(template) = Template::from_expr(template_expression) {
                collect_template_references(&template, tree);
            }
        }
        Expression::FuncCall(call) => {
            for argument in &call.args {
                collect_runtime_references(argument, tree);
            }
        }
        Expression::Parenthesis(inner) => collect_runtime_references(inner, tree),
        Expression::Conditional(conditional) => {
            collect_runtime_references(&conditional.cond_expr, tree);
            collect_runtime_references(&conditional.true_expr, tree);
            collect_runtime_references(&conditional.false_expr, tree);
        }
        Expression::Operation(operation) => match operation.as_ref() {
            hcl::expr::Operation::Unary(unary) => collect_runtime_references(&unary.expr, tree),
            hcl::expr::Operation::Binary(binary) => {
                collect_runtime_references(&binary.lhs_expr, tree);
                collect_runtime_references(&binary.rhs_expr, tree);
            }
        },
        Expression::ForExpr(for_expression) => {
            // The iteration variables are bound by the for expression itself (and shadow any
            // placeholder of the same name), so only the collection needs a placeholder.
            collect_runtime_references(&for_expression.collection_expr, tree);
        }
        _ => {}
    }
}

fn collect_template_references(template: &Template, tree: &mut PlaceholderTree) {
    for element in template.elements() {
        match element {
            Element::Literal(_) => {}
            Element::Interpolation(interpolation) => {
                collect_runtime_references(&interpolation.expr, tree);
            }
            Element::Directive(directive) => match directive.as_ref() {
                Directive::If(if_directive) => {
                    collect_runtime_references(&if_directive.cond_expr, tree);
                    collect_template_references(&if_directive.true_template, tree);
                    if let Some(false_template) = &if_directive.false_template {
                        collect_template_references(false_template, tree);
                    }
                }
                Directive::For(for_directive) => {
                    collect_runtime_references(&for_directive.collection_expr, tree);
                }
            },
        }
    }
}

fn string_argument(arguments: &FuncArgs, index: usize) -> Result<String, String> {
    match arguments.get(index) {
        Some(Value::String(text)) => Ok(text.clone()),
        Some(Value::Number(number)) => Ok(number.to_string()),
        Some(Value::Bool(flag)) => Ok(flag.to_string()),
        Some(other) => Err(format!(
            "expected a string, got {}",
            describe_value_kind(other)
        )),
        None => Err("missing argument".into()),
    }
}

fn declare_functions(context: &mut Context<'_>) {
    crate::functions::declare(context);
    let string_to_string =
        |function: hcl::eval::Func| FuncDef::builder().param(ParamType::String).build(function);
    context.declare_func(
        "upper",
        string_to_string(|arguments| {
            Ok(Value::String(
                string_argument(&arguments, 0)?.to_uppercase(),
            ))
        }),
    );
    context.declare_func(
        "lower",
        string_to_string(|arguments| {
            Ok(Value::String(
                string_argument(&arguments, 0)?.to_lowercase(),
            ))
        }),
    );
    context.declare_func(
        "trimspace",
        string_to_string(|arguments| {
            Ok(Value::String(
                string_argument(&arguments, 0)?.trim().to_string(),
            ))
        }),
    );
    context.declare_func(
        "tostring",
        FuncDef::builder().param(ParamType::Any).build(|arguments| {
            Ok(Value::String(
                arguments.first().map(value_as_text).unwrap_or_default(),
            ))
        }),
    );
    context.declare_func(
        "tonumber",
        FuncDef::builder()
            .param(ParamType::Any)
            .build(|arguments| match arguments.first() {
                Some(Value::Number(number)) => Ok(Value::Number(*number)),
                Some(Value::String(text)) => parse_number(text)
                    .map(Value::Number)
                    .ok_or_else(|| format!("cannot convert {text:?} to a number")),
                _ => Err("expected a number or a numeric string".into()),
            }),
    );
    context.declare_func(
        "join",
        FuncDef::builder()
            .param(ParamType::String)
            .param(ParamType::array_of(ParamType::Any))
            .build(|arguments| {
                let separator = string_argument(&arguments, 0)?;
                let items = arguments
                    .get(1)
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                Ok(Value::String(
                    items
                        .iter()
                        .map(value_as_text)
                        .collect::<Vec<_>>()
                        .join(&separator),
                ))
            }),
    );
    context.declare_func(
        "split",
        FuncDef::builder()
            .param(ParamType::String)
            .param(ParamType::String)
            .build(|arguments| {
                let separator = string_argument(&arguments, 0)?;
                let text = string_argument(&arguments, 1)?;
                if separator.is_empty() {
                    return Err("the separator must not be empty".into());
                }
                Ok(Value::Array(
                    text.split(separator.as_str())
                        .map(|part| Value::String(part.to_string()))
                        .collect(),
                ))
            }),
    );
    context.declare_func(
        "replace",
        FuncDef::builder()
            .param(ParamType::String)
            .param(ParamType::String)
            .param(ParamType::String)
            .build(|arguments| {
                let text = string_argument(&arguments, 0)?;
                let search = string_argument(&arguments, 1)?;
                let replacement = string_argument(&arguments, 2)?;
                if search.is_empty() {
                    return Ok(Value::String(text));
                }
                Ok(Value::String(text.replace(&search, &replacement)))
            }),
    );
    context.declare_func(
        "length",
        FuncDef::builder().param(ParamType::Any).build(|arguments| {
            let length = match arguments.first() {
                Some(Value::String(text)) => text.chars().count(),
                Some(Value::Array(items)) => items.len(),
                Some(Value::Object(entries)) => entries.len(),
                _ => return Err("length needs a string, a list or a map".into()),
            };
            Ok(Value::from(length as u64))
        }),
    );
    context.declare_func(
        "concat",
        FuncDef::builder()
            .variadic_param(ParamType::array_of(ParamType::Any))
            .build(|arguments| {
                Ok(Value::Array(
                    arguments
                        .iter()
                        .filter_map(Value::as_array)
                        .flat_map(|items| items.iter().cloned())
                        .collect(),
                ))
            }),
    );
    context.declare_func(
        "contains",
        FuncDef::builder()
            .param(ParamType::array_of(ParamType::Any))
            .param(ParamType::Any)
            .build(|arguments| {
                let items = arguments
                    .first()
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                Ok(Value::Bool(
                    arguments
                        .get(1)
                        .is_some_and(|needle| items.contains(needle)),
                ))
            }),
    );
    context.declare_func(
        "lookup",
        FuncDef::builder()
            .param(ParamType::object_of(ParamType::Any))
            .param(ParamType::String)
            .variadic_param(ParamType::Any)
            .build(|arguments| {
                let key = string_argument(&arguments, 1)?;
                let found = arguments
                    .first()
                    .and_then(Value::as_object)
                    .and_then(|entries| entries.get(&key).cloned());
                match (found, arguments.get(2)) {
                    (Some(value), _) => Ok(value),
                    (None, Some(default)) => Ok(default.clone()),
                    (None, None) => Err(format!("no key {key:?} and no default given")),
                }
            }),
    );
    context.declare_func(
        "merge",
        FuncDef::builder()
            .variadic_param(ParamType::object_of(ParamType::Any))
            .build(|arguments| {
                let mut merged = Map::new();
                for entries in arguments.iter().filter_map(Value::as_object) {
                    for (key, value) in entries {
                        merged.insert(key.clone(), value.clone());
                    }
                }
                Ok(Value::Object(merged))
            }),
    );
    context.declare_func(
        "coalesce",
        FuncDef::builder()
            .variadic_param(ParamType::Any)
            .build(|arguments| {
                arguments
                    .iter()
                    .find(|value| {
                        !matches!(value, Value::Null) && **value != Value::String(String::new())
                    })
                    .cloned()
                    .ok_or_else(|| "no non-null, non-empty argument".to_string())
            }),
    );
    context.declare_func(
        "format",
        FuncDef::builder()
            .param(ParamType::String)
            .variadic_param(ParamType::Any)
            .build(|arguments| {
                let format = string_argument(&arguments, 0)?;
                format_go_style(&format, &arguments[1..]).map(Value::String)
            }),
    );
    context.declare_func(
        "min",
        FuncDef::builder()
            .variadic_param(ParamType::Number)
            .build(|arguments| fold_numbers(&arguments, f64::min)),
    );
    context.declare_func(
        "max",
        FuncDef::builder()
            .variadic_param(ParamType::Number)
            .build(|arguments| fold_numbers(&arguments, f64::max)),
    );
}

fn fold_numbers(arguments: &FuncArgs, combine: fn(f64, f64) -> f64) -> Result<Value, String> {
    let numbers: Vec<&hcl::Number> = arguments
        .iter()
        .filter_map(|value| match value {
            Value::Number(number) => Some(number),
            _ => None,
        })
        .collect();
    let Some(first) = numbers.first() else {
        return Err("at least one number is required".into());
    };
    let mut best = **first;
    let mut best_float = best.as_f64().unwrap_or(0.0);
    for number in &numbers[1..] {
        let candidate = number.as_f64().unwrap_or(0.0);
        if combine(best_float, candidate) != best_float {
            best = **number;
            best_float = candidate;
        }
    }
    Ok(Value::Number(best))
}

/// The function library (`crate::functions`) as a jobspec evaluates it: here, because the
/// evaluator sits above the functions it calls.
#[cfg(test)]
#[allow(clippy::expect_used, clippy::unwrap_used)] // test code: a failure is the assertion
mod function_tests;

#[cfg(test)]
mod tests {
    use super::*;

    fn evaluate_text(source: &str, evaluator: &Evaluator) -> Result<Value, String> {
        let expression = hcl_edit::parser::parse_expr(source).map_err(|error| error.to_string())?;
        evaluator.evaluate(&expression)
    }

    fn evaluator_with_image() -> Evaluator {
        let mut variables = Map::new();
        variables.insert("image".to_string(), Value::String("busybox".into()));
        variables.insert("count".to_string(), Value::from(3u64));
        let mut locals = Map::new();
        locals.insert("greeting".to_string(), Value::String("hello".into()));
        Evaluator::new(Value::Object(variables), locals)
    }

    #[test]
    fn runtime_variables_stay_as_text() {
        let evaluator = evaluator_with_image();
        let cases = [
            (r#""${NOMAD_PORT_http}""#, "${NOMAD_PORT_http}"),
            (r#""${attr.kernel.name}""#, "${attr.kernel.name}"),
            (
                r#""echo ${NOMAD_ALLOC_ID} ${var.image} $${LITERAL} X""#,
                "echo ${NOMAD_ALLOC_ID} busybox ${LITERAL} X",
            ),
            (
                r#""${meta.rack}-${node.unique.name}""#,
                "${meta.rack}-${node.unique.name}",
            ),
            (r#"attr.kernel.name"#, "${attr.kernel.name}"),
            (r#""${env["PATH"]}""#, "${env[\"PATH\"]}"),
            (
                r#""${local.greeting} ${upper(var.image)}""#,
                "hello BUSYBOX",
            ),
            (
                r#""%{ if var.count > 2 }many%{ else }few%{ endif }""#,
                "many",
            ),
            (r#"format("%s:%d", var.image, var.count)"#, "busybox:3"),
            (
                r#"join(",", [for name in ["a", "b"] : upper(name)])"#,
                "A,B",
            ),
        ];
        for (source, expected) in cases {
            assert_eq!(
                evaluate_text(source, &evaluator),
                Ok(Value::String(expected.to_string())),
                "source {source}"
            );
        }
    }

    #[test]
    fn heredocs_keep_runtime_text_and_dedent() {
        let evaluator = evaluator_with_image();
        let source = "<<-EOT\n    PORT={{ env \"NOMAD_PORT_http\" }}\n    ALLOC=${NOMAD_ALLOC_ID}\n    IMAGE=${var.image}\n  EOT";
        assert_eq!(
            evaluate_text(source, &evaluator),
            Ok(Value::String(
                "PORT={{ env \"NOMAD_PORT_http\" }}\nALLOC=${NOMAD_ALLOC_ID}\nIMAGE=busybox\n"
                    .into()
            ))
        );
    }

    #[test]
    fn undeclared_input_variable_is_an_error() {
        let evaluator = evaluator_with_image();
        let error = evaluate_text("var.nope", &evaluator)
            .err()
            .unwrap_or_default();
        assert!(error.contains("nope"), "{error}");
    }

    #[test]
    fn variable_types_convert_text() {
        assert_eq!(
            VariableType::Number.convert_text("3"),
            Ok(Value::from(3u64))
        );
        assert!(VariableType::Number.convert_text("three").is_err());
        assert_eq!(
            VariableType::Bool.convert_text("true"),
            Ok(Value::Bool(true))
        );
        assert_eq!(
            VariableType::List(Box::new(VariableType::String)).convert_text(r#"["a", 1]"#),
            Ok(Value::Array(vec![
                Value::String("a".into()),
                Value::String("1".into())
            ]))
        );
    }
}
