//! The HCL decoder: walks an `hcl-edit` body against the schema tables, evaluates each
//! argument, and builds the job in Nomad's JSON shape (`{"ID": ..., "TaskGroups": [...]}`),
//! together with the source offset of every field it filled.
//!
//! Every problem is collected (unknown names with a "did you mean" hint, refused blocks, wrong
//! types, bad durations, duplicates) rather than stopping at the first. Not the validator: a
//! well-typed but meaningless value (`memory = 1`) passes here and is caught by `validate`.

use std::collections::{BTreeMap, BTreeSet};

use hcl::Value as HclValue;
use hcl_edit::Span;
use hcl_edit::expr::Expression as EditExpression;
use hcl_edit::structure::{Attribute, Block, BlockLabel, Body, Structure};
use serde_json::{Map as JsonMap, Value as JsonValue};

use crate::diagnostic::{Diagnostic, SourceMap};
use crate::eval::{Evaluator, VarValues, VariableInput, VariableType};
use crate::schema::{self, BlockSpec, BodyKind, BodySchema, Placement, Repetition, ValueKind};
use crate::suggest::closest_name;
use crate::value_text::describe_value_kind;

/// The outcome of decoding: the job as Nomad JSON and where each field came from.
#[derive(Debug)]
pub(crate) struct DecodedJob {
    pub job: JsonValue,
    /// JSON field path (`TaskGroups[0].Tasks[1].Resources.MemoryMB`) → byte offset.
    pub locations: BTreeMap<String, usize>,
    /// Errors in the job body. The job holds everything that did decode, so validation can
    /// still report the problems of the rest.
    pub errors: Vec<Diagnostic>,
}

/// Where the walker is, for messages and field paths.
#[derive(Debug, Clone, Default)]
struct Scope {
    /// `job "web"`, or `group "app" task "server"` below the job.
    context: String,
    /// The HCL path below the context, such as `resources` or `service[0].check[1]`.
    hcl_path: String,
    /// The JSON path of the object being filled.
    json_path: String,
}

impl Scope {
    fn hcl_name(&self, name: &str) -> String {
        if self.hcl_path.is_empty() {
            name.to_string()
        } else {
            format!("{}.{name}", self.hcl_path)
        }
    }

    fn json_field(&self, field: &str) -> String {
        if self.json_path.is_empty() {
            field.to_string()
        } else {
            format!("{}.{field}", self.json_path)
        }
    }
}

struct Walker<'source> {
    filename: &'source str,
    source_map: &'source SourceMap<'source>,
    evaluator: Evaluator,
    diagnostics: Vec<Diagnostic>,
    locations: BTreeMap<String, usize>,
    /// Inside the blocks a `dynamic` block makes (which have no source span of their own):
    /// the `dynamic` block's span, used for problems that have no other place.
    expansion_span: Option<std::ops::Range<usize>>,
}

/// Decodes a parsed jobspec body into Nomad JSON.
pub(crate) fn decode_job_file(
    body: &Body,
    filename: &str,
    source_map: &SourceMap<'_>,
    variable_values: &VarValues,
    files: Option<&std::path::Path>,
) -> Result<DecodedJob, Vec<Diagnostic>> {
    let mut diagnostics = Vec::new();
    let locate = |span: Option<std::ops::Range<usize>>| source_map.position_of_span(&span);

    let mut job_blocks = Vec::new();
    let mut variable_blocks = Vec::new();
    let mut variables_shorthand_attributes = Vec::new();
    let mut local_attributes = Vec::new();
    for structure in body.iter() {
        match structure {
            Structure::Block(block) => match block.ident.as_str() {
                "job" => job_blocks.push(block),
                "variable" => variable_blocks.push(block),
                "variables" => variables_shorthand_attributes.extend(block_attributes(
                    block,
                    "variables",
                    filename,
                    source_map,
                    &mut diagnostics,
                )),
                "locals" => local_attributes.extend(block_attributes(
                    block,
                    "locals",
                    filename,
                    source_map,
                    &mut diagnostics,
                )),
                other => diagnostics.push(Diagnostic::new(
                    filename,
                    locate(block.span()),
                    unknown_name_message(
                        "block",
                        other,
                        "at the top level",
                        ["job", "variable", "variables", "locals"],
                    ),
                )),
            },
            Structure::Attribute(attribute) => diagnostics.push(Diagnostic::new(
                filename,
                locate(attribute.span()),
                format!(
                    "unexpected argument {:?} at the top level; only job, variable, variables and locals blocks may appear here",
                    attribute.key.as_str()
                ),
            )),
        }
    }

    let input_variables = resolve_input_variables(
        &variable_blocks,
        &variables_shorthand_attributes,
        variable_values,
        filename,
        source_map,
        &mut diagnostics,
    );
    let locals = resolve_locals(
        &local_attributes,
        &input_variables,
        files,
        filename,
        source_map,
        &mut diagnostics,
    );

    if job_blocks.is_empty() {
        diagnostics.push(Diagnostic::new(
            filename,
            None,
            "missing job block: a jobspec needs exactly one job \"name\" { ... } block",
        ));
    }
    // Errors in variables or locals would only cascade into the job body: stop here.
    if !diagnostics.is_empty() {
        return Err(diagnostics);
    }
    let job_block = match job_blocks.as_slice() {
        [] => return Err(diagnostics),
        [first, rest @ ..] => {
            for extra in rest {
                diagnostics.push(Diagnostic::new(
                    filename,
                    locate(extra.span()),
                    format!(
                        "duplicate job block; a jobspec holds exactly one job (the first is at line {})",
                        locate(first.span()).map_or(0, |position| position.line)
                    ),
                ));
            }
            *first
        }
    };

    let mut walker = Walker {
        filename,
        source_map,
        evaluator: Evaluator::new(HclValue::Object(input_variables), locals).with_files(files),
        diagnostics,
        locations: BTreeMap::new(),
        expansion_span: None,
    };
    let job_label = match job_block.labels.as_slice() {
        [label] => label.as_str().to_string(),
        _ => {
            walker.error_at(
                job_block.span(),
                "a job block needs exactly one label, the job ID: job \"example\" { ... }",
            );
            return Err(walker.diagnostics);
        }
    };
    if let Some(span) = job_block.span() {
        walker.locations.insert(String::new(), span.start);
    }
    let scope = Scope {
        context: format!("job {job_label:?}"),
        hcl_path: String::new(),
        json_path: String::new(),
    };
    let mut job = walker.walk_body(&job_block.body, &schema::JOB, &scope);
    if let Some(JsonValue::Array(tasks)) = job.remove("Tasks") {
        give_lone_tasks_their_groups(&mut job, tasks, &mut walker.locations);
    }
    job.entry("ID")
        .or_insert_with(|| JsonValue::String(job_label.clone()));
    job.entry("Name")
        .or_insert_with(|| JsonValue::String(job_label.clone()));

    Ok(DecodedJob {
        job: JsonValue::Object(job),
        locations: walker.locations,
        errors: walker.diagnostics,
    })
}

/// The arguments of a `locals` or `variables` block, which may hold nothing else.
fn block_attributes<'body>(
    block: &'body Block,
    block_name: &str,
    filename: &str,
    source_map: &SourceMap<'_>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<&'body Attribute> {
    if !block.labels.is_empty() {
        diagnostics.push(Diagnostic::new(
            filename,
            source_map.position_of_span(&block.span()),
            format!("a {block_name} block takes no labels"),
        ));
    }
    let mut attributes = Vec::new();
    for structure in block.body.iter() {
        match structure {
            Structure::Attribute(attribute) => attributes.push(attribute),
            Structure::Block(inner) => diagnostics.push(Diagnostic::new(
                filename,
                source_map.position_of_span(&inner.span()),
                format!(
                    "a {block_name} block holds only arguments, not a {:?} block",
                    inner.ident.as_str()
                ),
            )),
        }
    }
    attributes
}

/// Declared input variables with their final values (default, then values passed in).
fn resolve_input_variables(
    variable_blocks: &[&Block],
    shorthand_attributes: &[&Attribute],
    variable_values: &VarValues,
    filename: &str,
    source_map: &SourceMap<'_>,
    diagnostics: &mut Vec<Diagnostic>,
) -> hcl::Map<String, HclValue> {
    let constant_evaluator = Evaluator::new(HclValue::Object(hcl::Map::new()), hcl::Map::new());
    let locate = |span: Option<std::ops::Range<usize>>| source_map.position_of_span(&span);
    let mut resolved = hcl::Map::new();
    let mut declared = BTreeSet::new();

    struct Declaration {
        name: String,
        variable_type: VariableType,
        default: Option<HclValue>,
        span: Option<std::ops::Range<usize>>,
        validations: Vec<Validation>,
    }
    /// A `validation { condition, error_message }` block of a variable.
    struct Validation {
        condition: EditExpression,
        error_message: String,
        span: Option<std::ops::Range<usize>>,
    }
    let mut declarations = Vec::new();

    for attribute in shorthand_attributes {
        let default = match constant_evaluator.evaluate(&attribute.value) {
            Ok(value) => Some(value),
            Err(message) => {
                diagnostics.push(Diagnostic::new(
                    filename,
                    locate(attribute.value.span()),
                    format!(
                        "variable {:?}: the default cannot be evaluated: {message}",
                        attribute.key.as_str()
                    ),
                ));
                None
            }
        };
        declarations.push(Declaration {
            name: attribute.key.as_str().to_string(),
            variable_type: VariableType::Any,
            default,
            span: attribute.span(),
            validations: Vec::new(),
        });
    }

    for block in variable_blocks {
        let name = match block.labels.as_slice() {
            [label] => label.as_str().to_string(),
            _ => {
                diagnostics.push(Diagnostic::new(
                    filename,
                    locate(block.span()),
                    "a variable block needs exactly one label, the variable name",
                ));
                continue;
            }
        };
        let mut variable_type = VariableType::Any;
        let mut default = None;
        let mut validations = Vec::new();
        for structure in block.body.iter() {
            match structure {
                Structure::Attribute(attribute) => match attribute.key.as_str() {
                    "type" => match VariableType::from_expression(&attribute.value) {
                        Some(parsed) => variable_type = parsed,
                        None => diagnostics.push(Diagnostic::new(
                            filename,
                            locate(attribute.value.span()),
                            format!(
                                "variable {name:?}: unknown type; use string, number, bool, any, list(...), set(...) or map(...)"
                            ),
                        )),
                    },
                    "default" => match constant_evaluator.evaluate(&attribute.value) {
                        Ok(value) => default = Some(value),
                        Err(message) => diagnostics.push(Diagnostic::new(
                            filename,
                            locate(attribute.value.span()),
                            format!("variable {name:?}: the default cannot be evaluated: {message}"),
                        )),
                    },
                    "description" | "sensitive" => {}
                    other => diagnostics.push(Diagnostic::new(
                        filename,
                        locate(attribute.span()),
                        format!(
                            "variable {name:?}: {}",
                            unknown_name_message(
                                "argument",
                                other,
                                "in a variable block",
                                ["type", "default", "description", "sensitive"],
                            )
                        ),
                    )),
                },
                Structure::Block(inner) if inner.ident.as_str() == "validation" => {
                    let mut condition = None;
                    let mut error_message = None;
                    let mut problem = |span: Option<std::ops::Range<usize>>, detail: String| {
                        diagnostics.push(Diagnostic::new(
                            filename,
                            locate(span),
                            format!("variable {name:?}: validation: {detail}"),
                        ));
                    };
                    for structure in inner.body.iter() {
                        match structure {
                            Structure::Attribute(attribute) => match attribute.key.as_str() {
                                "condition" => {
                                    let text = attribute.value.to_string();
                                    if text.contains(&format!("var.{name}")) {
                                        condition = Some(attribute.value.clone());
                                    } else {
                                        problem(
                                            attribute.value.span(),
                                            format!(
                                                "the condition must refer to var.{name} to test the value"
                                            ),
                                        );
                                    }
                                }
                                "error_message" => {
                                    match constant_evaluator.evaluate(&attribute.value) {
                                        Ok(HclValue::String(text)) if !text.trim().is_empty() => {
                                            error_message = Some(text);
                                        }
                                        Ok(HclValue::String(_)) => problem(
                                            attribute.value.span(),
                                            "error_message must not be empty".to_string(),
                                        ),
                                        Ok(other) => problem(
                                            attribute.value.span(),
                                            format!(
                                                "error_message must be a string, got {}",
                                                describe_value_kind(&other)
                                            ),
                                        ),
                                        Err(message) => problem(
                                            attribute.value.span(),
                                            format!("error_message must be a constant string: {message}"),
                                        ),
                                    }
                                }
                                other => problem(
                                    attribute.span(),
                                    unknown_name_message(
                                        "argument",
                                        other,
                                        "in a validation block",
                                        ["condition", "error_message"],
                                    ),
                                ),
                            },
                            Structure::Block(nested) => problem(
                                nested.span(),
                                format!(
                                    "a validation block holds condition and error_message, not a {:?} block",
                                    nested.ident.as_str()
                                ),
                            ),
                        }
                    }
                    match (condition, error_message) {
                        (Some(condition), Some(error_message)) => validations.push(Validation {
                            condition,
                            error_message,
                            span: inner.span(),
                        }),
                        (None, _) | (_, None) => problem(
                            inner.span(),
                            "needs a condition and an error_message".to_string(),
                        ),
                    }
                }
                Structure::Block(inner) => {
                    diagnostics.push(Diagnostic::new(
                        filename,
                        locate(inner.span()),
                        format!(
                            "variable {name:?}: unexpected block {:?} in a variable block",
                            inner.ident.as_str()
                        ),
                    ));
                }
            }
        }
        declarations.push(Declaration {
            name,
            variable_type,
            default,
            span: block.span(),
            validations,
        });
    }

    for declaration in declarations {
        let position = locate(declaration.span.clone());
        if !declared.insert(declaration.name.clone()) {
            diagnostics.push(Diagnostic::new(
                filename,
                position,
                format!("duplicate variable {:?}", declaration.name),
            ));
            continue;
        }
        let supplied = variable_values
            .get(&declaration.name)
            .map(|input| match input {
                VariableInput::Text(text) => declaration.variable_type.convert_text(&text),
                VariableInput::Value(value) => declaration.variable_type.convert(value),
            });
        let value = match (supplied, declaration.default) {
            (Some(Ok(value)), _) => value,
            (Some(Err(message)), _) => {
                diagnostics.push(Diagnostic::new(
                    filename,
                    position,
                    format!(
                        "variable {:?}: the value given is not valid: {message}",
                        declaration.name
                    ),
                ));
                continue;
            }
            (None, Some(default)) => match declaration.variable_type.convert(default) {
                Ok(value) => value,
                Err(message) => {
                    diagnostics.push(Diagnostic::new(
                        filename,
                        position,
                        format!(
                            "variable {:?}: the default does not match the type: {message}",
                            declaration.name
                        ),
                    ));
                    continue;
                }
            },
            (None, None) => {
                diagnostics.push(Diagnostic::new(
                    filename,
                    position,
                    format!(
                        "variable {:?} has no default and no value was given (use -var {}=...)",
                        declaration.name, declaration.name
                    ),
                ));
                continue;
            }
        };
        for validation in &declaration.validations {
            let mut bound = hcl::Map::new();
            bound.insert(declaration.name.clone(), value.clone());
            let evaluator = Evaluator::new(HclValue::Object(bound), hcl::Map::new());
            let problem = match evaluator.evaluate(&validation.condition) {
                Ok(HclValue::Bool(true)) => None,
                Ok(HclValue::Bool(false)) => Some((
                    validation.span.clone(),
                    format!(
                        "variable {:?}: invalid value: {}",
                        declaration.name, validation.error_message
                    ),
                )),
                Ok(other) => Some((
                    validation.condition.span(),
                    format!(
                        "variable {:?}: the validation condition must be true or false, got {}",
                        declaration.name,
                        describe_value_kind(&other)
                    ),
                )),
                Err(message) => Some((
                    validation.condition.span(),
                    format!(
                        "variable {:?}: the validation condition cannot be evaluated: {message}",
                        declaration.name
                    ),
                )),
            };
            if let Some((span, message)) = problem {
                diagnostics.push(Diagnostic::new(filename, locate(span), message));
            }
        }
        resolved.insert(declaration.name, value);
    }

    for supplied_name in variable_values.names() {
        if !declared.contains(supplied_name) {
            diagnostics.push(Diagnostic::new(
                filename,
                None,
                format!(
                    "a value was given for variable {supplied_name:?}, which the jobspec does not declare"
                ),
            ));
        }
    }
    resolved
}

/// Evaluates `locals`, in as many passes as their references to each other need.
fn resolve_locals(
    local_attributes: &[&Attribute],
    input_variables: &hcl::Map<String, HclValue>,
    files: Option<&std::path::Path>,
    filename: &str,
    source_map: &SourceMap<'_>,
    diagnostics: &mut Vec<Diagnostic>,
) -> hcl::Map<String, HclValue> {
    let mut resolved = hcl::Map::new();
    let mut seen = BTreeSet::new();
    let mut pending: Vec<&Attribute> = Vec::new();
    for attribute in local_attributes {
        if seen.insert(attribute.key.as_str().to_string()) {
            pending.push(attribute);
        } else {
            diagnostics.push(Diagnostic::new(
                filename,
                source_map.position_of_span(&attribute.span()),
                format!("duplicate local {:?}", attribute.key.as_str()),
            ));
        }
    }
    loop {
        let evaluator = Evaluator::new(HclValue::Object(input_variables.clone()), resolved.clone())
            .with_files(files);
        let pending_before = pending.len();
        let mut still_pending = Vec::new();
        let mut failures = Vec::new();
        for attribute in pending {
            match evaluator.evaluate(&attribute.value) {
                Ok(value) => {
                    resolved.insert(attribute.key.as_str().to_string(), value);
                }
                Err(message) => {
                    still_pending.push(attribute);
                    failures.push((attribute, message));
                }
            }
        }
        if still_pending.is_empty() {
            break;
        }
        if still_pending.len() == pending_before {
            for (attribute, message) in failures {
                diagnostics.push(Diagnostic::new(
                    filename,
                    source_map.position_of_span(&attribute.value.span()),
                    format!(
                        "local {:?} cannot be evaluated: {message}",
                        attribute.key.as_str()
                    ),
                ));
            }
            break;
        }
        pending = still_pending;
    }
    resolved
}

fn unknown_name_message<'candidate>(
    what: &str,
    name: &str,
    place: &str,
    candidates: impl IntoIterator<Item = &'candidate str>,
) -> String {
    match closest_name(name, candidates) {
        Some(suggestion) => {
            format!("unknown {what} {name:?} {place}; did you mean {suggestion:?}?")
        }
        None => format!("unknown {what} {name:?} {place}"),
    }
}

impl Walker<'_> {
    fn error_at(&mut self, span: Option<std::ops::Range<usize>>, message: impl Into<String>) {
        let span = span.or_else(|| self.expansion_span.clone());
        self.diagnostics.push(Diagnostic::new(
            self.filename,
            self.source_map.position_of_span(&span),
            message,
        ));
    }

    fn scoped_error(
        &mut self,
        scope: &Scope,
        span: Option<std::ops::Range<usize>>,
        detail: impl AsRef<str>,
    ) {
        let message = if scope.context.is_empty() {
            detail.as_ref().to_string()
        } else {
            format!("{}: {}", scope.context, detail.as_ref())
        };
        self.error_at(span, message);
    }

    fn place_description(scope: &Scope, schema: &BodySchema) -> String {
        if scope.hcl_path.is_empty() {
            format!("in the {} block", schema.name)
        } else {
            format!("in {}", scope.hcl_path)
        }
    }

    fn record_location(&mut self, json_path: String, span: Option<std::ops::Range<usize>>) {
        if let Some(span) = span.or_else(|| self.expansion_span.clone()) {
            self.locations.entry(json_path).or_insert(span.start);
        }
    }

    fn walk_body(
        &mut self,
        body: &Body,
        schema: &BodySchema,
        scope: &Scope,
    ) -> JsonMap<String, JsonValue> {
        let mut object = JsonMap::new();
        let mut seen_arguments: BTreeMap<String, Option<std::ops::Range<usize>>> = BTreeMap::new();
        for structure in body.iter() {
            match structure {
                Structure::Attribute(attribute) => {
                    let name = attribute.key.as_str();
                    if let Some(first) = seen_arguments.get(name) {
                        let first_line = self
                            .source_map
                            .position_of_span(first)
                            .map_or(0, |position| position.line);
                        self.scoped_error(
                            scope,
                            attribute.span(),
                            format!(
                                "duplicate argument {:?}; it is already set at line {first_line}",
                                scope.hcl_name(name)
                            ),
                        );
                        continue;
                    }
                    seen_arguments.insert(name.to_string(), attribute.span());
                    self.walk_attribute(attribute, schema, scope, &mut object);
                }
                Structure::Block(block)
                    if block.ident.as_str() == "dynamic" && schema.block("dynamic").is_none() =>
                {
                    for (evaluator, expanded) in self.dynamic_instances(block, scope) {
                        self.within_expansion(evaluator, block, |walker| {
                            walker.walk_block(&expanded, schema, scope, &mut object);
                        });
                    }
                }
                Structure::Block(block) => self.walk_block(block, schema, scope, &mut object),
            }
        }
        finish_object(schema, &mut object);
        object
    }

    fn walk_attribute(
        &mut self,
        attribute: &Attribute,
        schema: &BodySchema,
        scope: &Scope,
        object: &mut JsonMap<String, JsonValue>,
    ) {
        let name = attribute.key.as_str();
        if let Some(argument) = schema.argument(name) {
            let Some(value) = self.evaluate(&attribute.value, scope, name) else {
                return;
            };
            if value == HclValue::Null {
                return;
            }
            match convert_value(value, argument.kind) {
                Ok(json) => {
                    self.record_location(scope.json_field(argument.json_field), attribute.span());
                    object.insert(argument.json_field.to_string(), json);
                }
                Err(detail) => self.scoped_error(
                    scope,
                    attribute.value.span(),
                    format!("{}: {detail}", scope.hcl_name(name)),
                ),
            }
            return;
        }
        if let Some(block_spec) = schema.block(name) {
            if block_spec.also_as_argument
                && let Placement::Field(json_field) = block_spec.placement
            {
                if object.contains_key(json_field) {
                    self.scoped_error(
                        scope,
                        attribute.span(),
                        format!("{:?} is set more than once", scope.hcl_name(name)),
                    );
                    return;
                }
                let Some(value) = self.evaluate(&attribute.value, scope, name) else {
                    return;
                };
                let converted = match block_spec.body {
                    BodyKind::StringMap => convert_string_map(value),
                    _ => match hcl_to_json(value) {
                        JsonValue::Object(map) => Ok(JsonValue::Object(map)),
                        other => Err(format!("must be an object, got {}", json_kind(&other))),
                    },
                };
                match converted {
                    Ok(json) => {
                        self.record_location(scope.json_field(json_field), attribute.span());
                        object.insert(json_field.to_string(), json);
                    }
                    Err(detail) => self.scoped_error(
                        scope,
                        attribute.value.span(),
                        format!("{}: {detail}", scope.hcl_name(name)),
                    ),
                }
                return;
            }
            self.scoped_error(
                scope,
                attribute.span(),
                format!(
                    "{:?} is a block, not an argument; write {name} {{ ... }}",
                    scope.hcl_name(name)
                ),
            );
            return;
        }
        if let Some(reason) = schema.refusal(name) {
            self.scoped_error(
                scope,
                attribute.span(),
                format!(
                    "{:?} is not supported by drover ({reason})",
                    scope.hcl_name(name)
                ),
            );
            return;
        }
        let place = Self::place_description(scope, schema);
        self.scoped_error(
            scope,
            attribute.span(),
            unknown_name_message("argument", name, &place, schema.known_names()),
        );
    }

    fn walk_block(
        &mut self,
        block: &Block,
        schema: &BodySchema,
        scope: &Scope,
        object: &mut JsonMap<String, JsonValue>,
    ) {
        let name = block.ident.as_str();
        let Some(spec) = schema.block(name) else {
            if schema.argument(name).is_some() {
                self.scoped_error(
                    scope,
                    block.span(),
                    format!(
                        "{:?} is an argument, not a block; write {name} = ...",
                        scope.hcl_name(name)
                    ),
                );
            } else if let Some(reason) = schema.refusal(name) {
                self.scoped_error(
                    scope,
                    block.span(),
                    format!(
                        "the {:?} block is not supported by drover ({reason})",
                        scope.hcl_name(name)
                    ),
                );
            } else {
                let place = Self::place_description(scope, schema);
                self.scoped_error(
                    scope,
                    block.span(),
                    unknown_name_message("block", name, &place, schema.known_names()),
                );
            }
            return;
        };

        let label = match (spec.label_field, block.labels.as_slice()) {
            (Some(_), [label]) => Some(label.as_str().to_string()),
            (Some(_), _) => {
                self.scoped_error(
                    scope,
                    block.span(),
                    format!(
                        "a {name} block needs exactly one label, {}: {name} \"example\" {{ ... }}",
                        spec.label_meaning
                    ),
                );
                return;
            }
            (None, []) => None,
            (None, _) => {
                self.scoped_error(
                    scope,
                    block.span(),
                    format!("a {:?} block takes no labels", scope.hcl_name(name)),
                );
                return;
            }
        };

        let (json_field, repetition) = self.placement(spec, block);
        let map_key = match (spec.placement, &label) {
            (Placement::MapByLabel(_), Some(label)) => {
                let taken = object
                    .get(json_field)
                    .and_then(JsonValue::as_object)
                    .is_some_and(|entries| entries.contains_key(label));
                if taken {
                    self.scoped_error(
                        scope,
                        block.span(),
                        format!("duplicate {name} {label:?} block; each {name} needs its own name"),
                    );
                    return;
                }
                Some(label.clone())
            }
            _ => None,
        };
        if spec.placement == Placement::TaskScaling
            && let Some(label) = &label
        {
            let already = object
                .get(json_field)
                .and_then(JsonValue::as_array)
                .is_some_and(|policies| {
                    policies.iter().any(|policy| {
                        policy.get("Type").and_then(JsonValue::as_str) == scaling_policy_type(label)
                    })
                });
            if scaling_policy_type(label).is_none() {
                self.scoped_error(
                    scope,
                    block.span(),
                    format!("a task scaling block is named \"cpu\" or \"mem\", not {label:?}"),
                );
                return;
            }
            if already {
                self.scoped_error(
                    scope,
                    block.span(),
                    format!("duplicate scaling {label:?} block; only one is allowed per task"),
                );
                return;
            }
        }
        let index = match repetition {
            _ if map_key.is_some() => None,
            Repetition::Single => {
                if object.contains_key(json_field) {
                    self.scoped_error(
                        scope,
                        block.span(),
                        format!(
                            "duplicate {:?} block; only one is allowed here",
                            scope.hcl_name(name)
                        ),
                    );
                    return;
                }
                None
            }
            Repetition::List => Some(
                object
                    .get(json_field)
                    .and_then(JsonValue::as_array)
                    .map_or(0, Vec::len),
            ),
        };

        let json_path = match (index, &map_key) {
            (Some(index), _) => format!("{}[{index}]", scope.json_field(json_field)),
            (None, Some(key)) => format!("{}.{key}", scope.json_field(json_field)),
            (None, None) => scope.json_field(json_field),
        };
        let hcl_segment = match (index, &label) {
            (_, Some(label)) => format!("{name} {label:?}"),
            (Some(index), None) => format!("{name}[{index}]"),
            (None, None) => name.to_string(),
        };
        let inner_scope = if spec.names_context {
            let context = if scope.context.starts_with("job ") {
                hcl_segment.clone()
            } else {
                format!("{} {hcl_segment}", scope.context)
            };
            Scope {
                context,
                hcl_path: String::new(),
                json_path: json_path.clone(),
            }
        } else {
            Scope {
                context: scope.context.clone(),
                hcl_path: scope.hcl_name(&hcl_segment),
                json_path: json_path.clone(),
            }
        };
        self.record_location(json_path.clone(), block.span());
        if index.is_some() || map_key.is_some() {
            self.record_location(scope.json_field(json_field), block.span());
        }

        let mut decoded = match spec.body {
            BodyKind::Schema(inner_schema) => {
                self.walk_body(&block.body, inner_schema, &inner_scope)
            }
            BodyKind::StringMap => self.walk_map_body(&block.body, &inner_scope, ValueKind::String),
            BodyKind::StringListMap => {
                self.walk_map_body(&block.body, &inner_scope, ValueKind::StringList)
            }
            BodyKind::FreeForm => self.walk_free_form(&block.body, &inner_scope),
        };
        if spec.placement == Placement::TaskScaling
            && let Some(label) = &label
            && let Some(policy_type) = scaling_policy_type(label)
        {
            let written = decoded
                .get("Type")
                .and_then(JsonValue::as_str)
                .map(str::to_string);
            match written {
                Some(written) if written != policy_type => {
                    self.scoped_error(
                        scope,
                        block.span(),
                        format!(
                            "scaling {label:?}: type must be {policy_type:?} (or left out), got {written:?}"
                        ),
                    );
                    return;
                }
                _ => {
                    decoded.insert("Type".into(), JsonValue::String(policy_type.into()));
                }
            }
        } else if let (Some(label_field), Some(label)) = (spec.label_field, label) {
            let mut labelled = JsonMap::new();
            labelled.insert(label_field.to_string(), JsonValue::String(label));
            labelled.append(&mut decoded);
            decoded = labelled;
        }

        if let Some(key) = map_key {
            let entry = object
                .entry(json_field.to_string())
                .or_insert_with(|| JsonValue::Object(JsonMap::new()));
            if let JsonValue::Object(entries) = entry {
                entries.insert(key, JsonValue::Object(decoded));
            }
            return;
        }
        match repetition {
            Repetition::Single => {
                object.insert(json_field.to_string(), JsonValue::Object(decoded));
            }
            Repetition::List => {
                let entry = object
                    .entry(json_field.to_string())
                    .or_insert_with(|| JsonValue::Array(Vec::new()));
                if let JsonValue::Array(items) = entry {
                    items.push(JsonValue::Object(decoded));
                }
            }
        }
    }

    /// The JSON field and repetition of a block, which for `port` and `identity` depends on
    /// what the block holds.
    fn placement(&self, spec: &BlockSpec, block: &Block) -> (&'static str, Repetition) {
        match spec.placement {
            Placement::Field(field) | Placement::MapByLabel(field) => (field, spec.repetition),
            Placement::TaskScaling => ("ScalingPolicies", Repetition::List),
            Placement::PortByStatic => {
                // As Nomad's parser: a port with a static value above zero is reserved, any
                // other is dynamic.
                let static_value = block.body.iter().find_map(|structure| match structure {
                    Structure::Attribute(attribute) if attribute.key.as_str() == "static" => {
                        self.evaluator.evaluate(&attribute.value).ok()
                    }
                    _ => None,
                });
                let is_reserved = match static_value {
                    Some(HclValue::Number(number)) => {
                        number.as_f64().is_some_and(|value| value > 0.0)
                    }
                    Some(HclValue::String(text)) => {
                        text.trim().parse::<i64>().is_ok_and(|value| value > 0)
                    }
                    Some(HclValue::Null) | None => false,
                    // Anything else fails conversion later, where the error is reported.
                    Some(_) => true,
                };
                if is_reserved {
                    ("ReservedPorts", Repetition::List)
                } else {
                    ("DynamicPorts", Repetition::List)
                }
            }
            Placement::IdentityByName => {
                let name = block.body.iter().find_map(|structure| match structure {
                    Structure::Attribute(attribute) if attribute.key.as_str() == "name" => {
                        self.evaluator.evaluate(&attribute.value).ok()
                    }
                    _ => None,
                });
                match name {
                    None => ("Identity", Repetition::Single),
                    Some(HclValue::String(name)) if name.is_empty() || name == "default" => {
                        ("Identity", Repetition::Single)
                    }
                    Some(_) => ("Identities", Repetition::List),
                }
            }
        }
    }

    fn walk_map_body(
        &mut self,
        body: &Body,
        scope: &Scope,
        kind: ValueKind,
    ) -> JsonMap<String, JsonValue> {
        let mut object = JsonMap::new();
        for structure in body.iter() {
            match structure {
                Structure::Attribute(attribute) => {
                    let key = attribute.key.as_str();
                    if object.contains_key(key) {
                        self.scoped_error(
                            scope,
                            attribute.span(),
                            format!("duplicate key {:?}", scope.hcl_name(key)),
                        );
                        continue;
                    }
                    let Some(value) = self.evaluate(&attribute.value, scope, key) else {
                        continue;
                    };
                    match convert_value(value, kind) {
                        Ok(json) => {
                            self.record_location(scope.json_field(key), attribute.span());
                            object.insert(key.to_string(), json);
                        }
                        Err(detail) => self.scoped_error(
                            scope,
                            attribute.value.span(),
                            format!("{}: {detail}", scope.hcl_name(key)),
                        ),
                    }
                }
                Structure::Block(block) => self.scoped_error(
                    scope,
                    block.span(),
                    format!(
                        "{} holds only key = value pairs, not a {:?} block",
                        scope.hcl_path,
                        block.ident.as_str()
                    ),
                ),
            }
        }
        object
    }

    fn walk_free_form(&mut self, body: &Body, scope: &Scope) -> JsonMap<String, JsonValue> {
        let mut object = JsonMap::new();
        // Names filled by blocks (each a list of objects), as opposed to arguments.
        let mut block_names = std::collections::BTreeSet::new();
        for structure in body.iter() {
            match structure {
                Structure::Attribute(attribute) => {
                    let key = attribute.key.as_str();
                    if object.contains_key(key) {
                        self.scoped_error(
                            scope,
                            attribute.span(),
                            format!("duplicate argument {:?}", scope.hcl_name(key)),
                        );
                        continue;
                    }
                    if let Some(value) = self.evaluate(&attribute.value, scope, key) {
                        self.record_location(scope.json_field(key), attribute.span());
                        let mut value = hcl_to_json(value);
                        // Nomad reads an argument written as an object constructor (`port_map
                        // = { http = 80 }`) as it reads the block of that name, a list of one
                        // object (`"port_map": [{"http": 80}]`); an object that comes from any
                        // other expression (a variable, `merge(...)`, an object inside a list
                        // or inside another object) is kept as it is (jobspec2's
                        // `hclutil.attrExpr`, unchanged since 1.1).
                        if matches!(attribute.value, EditExpression::Object(_)) {
                            value = JsonValue::Array(vec![value]);
                        }
                        object.insert(key.to_string(), value);
                    }
                }
                // A `dynamic` block here is not expanded: Nomad keeps free-form bodies as
                // written, `dynamic` included.
                Structure::Block(block) => {
                    // Nomad reads a block inside a free-form body (driver config, a scaling
                    // policy) as a list of objects, one per block of that name (`port_map {
                    // http = 80 }` → `"port_map": [{"http": 80}]`), whatever its nesting
                    // depth, each label nesting one more list (`check "cpu" { ... }` →
                    // `"check": [{"cpu": [{...}]}]`), as Nomad 1.1.2 answers.
                    let key = block.ident.as_str().to_string();
                    let index = match object.get(&key) {
                        None => 0,
                        Some(JsonValue::Array(items)) if block_names.contains(&key) => items.len(),
                        Some(_) => {
                            self.scoped_error(
                                scope,
                                block.ident.span(),
                                format!(
                                    "{:?} is both an argument and a block",
                                    scope.hcl_name(&key)
                                ),
                            );
                            continue;
                        }
                    };
                    let inner_scope = Scope {
                        context: scope.context.clone(),
                        hcl_path: scope.hcl_name(&key),
                        json_path: format!("{}[{index}]", scope.json_field(&key)),
                    };
                    self.record_location(inner_scope.json_path.clone(), block.span());
                    let mut inner = self.walk_free_form(&block.body, &inner_scope);
                    for label in block.labels.iter().rev() {
                        let mut wrapper = JsonMap::new();
                        wrapper.insert(
                            label.as_str().to_string(),
                            JsonValue::Array(vec![JsonValue::Object(inner)]),
                        );
                        inner = wrapper;
                    }
                    block_names.insert(key.clone());
                    if let JsonValue::Array(items) = object
                        .entry(key)
                        .or_insert_with(|| JsonValue::Array(Vec::new()))
                    {
                        items.push(JsonValue::Object(inner));
                    }
                }
            }
        }
        object
    }

    /// Runs `walk` with `evaluator` (an iterator bound) and problems without a place of their
    /// own located at the `dynamic` block.
    fn within_expansion(
        &mut self,
        evaluator: Evaluator,
        dynamic_block: &Block,
        walk: impl FnOnce(&mut Self),
    ) {
        let saved_evaluator = std::mem::replace(&mut self.evaluator, evaluator);
        let span = dynamic_block.span().or_else(|| self.expansion_span.clone());
        let saved_span = std::mem::replace(&mut self.expansion_span, span);
        walk(self);
        self.evaluator = saved_evaluator;
        self.expansion_span = saved_span;
    }

    /// The blocks a `dynamic "name" { for_each, iterator, labels, content { ... } }` block
    /// makes, one per element of `for_each`, each with the evaluator that binds the iterator
    /// (the block name unless `iterator` names another) to `{ key, value }`.
    fn dynamic_instances(&mut self, block: &Block, scope: &Scope) -> Vec<(Evaluator, Block)> {
        let block_type = match block.labels.as_slice() {
            [label] => label.as_str().to_string(),
            _ => {
                self.scoped_error(
                    scope,
                    block.span(),
                    "a dynamic block needs exactly one label, the type of the blocks it makes: dynamic \"port\" { ... }",
                );
                return Vec::new();
            }
        };
        let Ok(block_ident) = hcl_edit::Ident::try_new(block_type.clone()) else {
            self.scoped_error(
                scope,
                block.span(),
                format!("dynamic {block_type:?}: {block_type:?} is not a block name"),
            );
            return Vec::new();
        };
        let mut for_each = None;
        let mut iterator = block_type.clone();
        let mut labels = None;
        let mut content: Option<&Block> = None;
        for structure in block.body.iter() {
            match structure {
                Structure::Attribute(attribute) => match attribute.key.as_str() {
                    "for_each" => for_each = Some(attribute),
                    "labels" => labels = Some(attribute),
                    "iterator" => match &attribute.value {
                        EditExpression::Variable(name) => iterator = name.as_str().to_string(),
                        _ => self.scoped_error(
                            scope,
                            attribute.value.span(),
                            format!(
                                "dynamic {block_type:?}: iterator must be a name, such as iterator = item"
                            ),
                        ),
                    },
                    other => self.scoped_error(
                        scope,
                        attribute.span(),
                        format!(
                            "dynamic {block_type:?}: {}",
                            unknown_name_message(
                                "argument",
                                other,
                                "in a dynamic block",
                                ["for_each", "iterator", "labels", "content"],
                            )
                        ),
                    ),
                },
                Structure::Block(inner) if inner.ident.as_str() == "content" => {
                    if content.is_some() {
                        self.scoped_error(
                            scope,
                            inner.span(),
                            format!("dynamic {block_type:?}: only one content block is allowed"),
                        );
                    } else {
                        content = Some(inner);
                    }
                }
                Structure::Block(inner) => self.scoped_error(
                    scope,
                    inner.span(),
                    format!(
                        "dynamic {block_type:?}: a dynamic block holds for_each, iterator, labels and one content block, not a {:?} block",
                        inner.ident.as_str()
                    ),
                ),
            }
        }
        let (Some(for_each), Some(content)) = (for_each, content) else {
            self.scoped_error(
                scope,
                block.span(),
                format!("dynamic {block_type:?}: needs for_each and a content block"),
            );
            return Vec::new();
        };
        let elements: Vec<(HclValue, HclValue)> = match self.evaluator.evaluate(&for_each.value) {
            Ok(HclValue::Array(items)) => items
                .into_iter()
                .enumerate()
                .map(|(index, item)| (HclValue::from(index as u64), item))
                .collect(),
            Ok(HclValue::Object(entries)) => entries
                .into_iter()
                .map(|(key, value)| (HclValue::String(key), value))
                .collect(),
            Ok(other) => {
                self.scoped_error(
                    scope,
                    for_each.value.span(),
                    format!(
                        "dynamic {block_type:?}: for_each must be a list, a set or a map, got {}",
                        describe_value_kind(&other)
                    ),
                );
                return Vec::new();
            }
            Err(message) => {
                self.scoped_error(
                    scope,
                    for_each.value.span(),
                    format!("dynamic {block_type:?}: for_each cannot be evaluated: {message}"),
                );
                return Vec::new();
            }
        };
        let mut instances = Vec::new();
        for (key, value) in elements {
            let mut element = hcl::Map::new();
            element.insert("key".to_string(), key);
            element.insert("value".to_string(), value);
            let evaluator = self
                .evaluator
                .with_variable(&iterator, HclValue::Object(element));
            let mut expanded = Block::new(block_ident.clone());
            if let Some(labels) = labels {
                let evaluated = evaluator
                    .evaluate(&labels.value)
                    .and_then(|value| match value {
                        HclValue::Array(items) => items
                            .into_iter()
                            .map(scalar_to_string)
                            .collect::<Result<Vec<String>, String>>(),
                        other => Err(format!(
                            "must be a list of strings, got {}",
                            describe_value_kind(&other)
                        )),
                    });
                match evaluated {
                    Ok(texts) => {
                        expanded.labels = texts.into_iter().map(BlockLabel::from).collect();
                    }
                    Err(message) => {
                        self.scoped_error(
                            scope,
                            labels.value.span(),
                            format!("dynamic {block_type:?}: labels: {message}"),
                        );
                        return Vec::new();
                    }
                }
            }
            expanded.body = content.body.clone();
            instances.push((evaluator, expanded));
        }
        instances
    }

    fn evaluate(
        &mut self,
        expression: &EditExpression,
        scope: &Scope,
        name: &str,
    ) -> Option<HclValue> {
        match self.evaluator.evaluate(expression) {
            Ok(value) => Some(value),
            Err(message) => {
                self.scoped_error(
                    scope,
                    expression.span(),
                    format!("{}: cannot evaluate: {message}", scope.hcl_name(name)),
                );
                None
            }
        }
    }
}

/// Block-specific normalisation done by Nomad's HCL parser (not API defaults).
fn finish_object(schema: &BodySchema, object: &mut JsonMap<String, JsonValue>) {
    match schema.name {
        "constraint" | "affinity" => fold_constraint_shortcuts(object),
        "periodic" if object.contains_key("Spec") || object.contains_key("Specs") => {
            object.insert("SpecType".into(), JsonValue::String("cron".into()));
        }
        "template" => {
            let defaults: [(&str, JsonValue); 4] = [
                ("ChangeMode", JsonValue::String("restart".into())),
                ("Perms", JsonValue::String("0644".into())),
                ("Splay", JsonValue::from(5_000_000_000u64)),
                ("ErrMissingKey", JsonValue::Bool(false)),
            ];
            for (field, value) in defaults {
                object.entry(field).or_insert(value);
            }
        }
        "vault" => {
            let defaults: [(&str, JsonValue); 3] = [
                ("Env", JsonValue::Bool(true)),
                ("DisableFile", JsonValue::Bool(false)),
                ("ChangeMode", JsonValue::String("restart".into())),
            ];
            for (field, value) in defaults {
                object.entry(field).or_insert(value);
            }
        }
        "group" => {
            if let Some(JsonValue::Object(scaling)) = object.get_mut("Scaling") {
                scaling
                    .entry("Type")
                    .or_insert_with(|| JsonValue::String("horizontal".into()));
            }
            if let Some(vault) = object.remove("Vault") {
                give_tasks_vault(object, &vault);
            }
        }
        "job" => {
            if let Some(vault) = object.remove("Vault")
                && let Some(JsonValue::Array(groups)) = object.get_mut("TaskGroups")
            {
                for group in groups.iter_mut().filter_map(JsonValue::as_object_mut) {
                    give_tasks_vault(group, &vault);
                }
            }
        }
        "change_script" => {
            let defaults: [(&str, JsonValue); 4] = [
                ("Args", JsonValue::Array(Vec::new())),
                ("Timeout", JsonValue::from(5_000_000_000u64)),
                ("FailOnError", JsonValue::Bool(false)),
                ("RunOnFirstRender", JsonValue::Bool(false)),
            ];
            for (field, value) in defaults {
                object.entry(field).or_insert(value);
            }
        }
        _ => {}
    }
}

/// Tasks written outside any group each get a group of their own, named after the task and
/// placed before the written groups, as Nomad's parser does; their source locations move with
/// them.
fn give_lone_tasks_their_groups(
    job: &mut JsonMap<String, JsonValue>,
    tasks: Vec<JsonValue>,
    locations: &mut BTreeMap<String, usize>,
) {
    let lone = tasks.len();
    let relocated: BTreeMap<String, usize> = std::mem::take(locations)
        .into_iter()
        .map(|(path, offset)| {
            let moved = if let Some(rest) = path.strip_prefix("TaskGroups[") {
                match rest.split_once(']') {
                    Some((index, tail)) => match index.parse::<usize>() {
                        Ok(index) => format!("TaskGroups[{}]{tail}", index + lone),
                        Err(_) => path.clone(),
                    },
                    None => path.clone(),
                }
            } else if let Some(rest) = path.strip_prefix("Tasks[") {
                match rest.split_once(']') {
                    Some((index, tail)) => format!("TaskGroups[{index}].Tasks[0]{tail}"),
                    None => path.clone(),
                }
            } else if path == "Tasks" {
                "TaskGroups".to_string()
            } else {
                path.clone()
            };
            (moved, offset)
        })
        .collect();
    *locations = relocated;
    let mut groups: Vec<JsonValue> = tasks
        .into_iter()
        .map(|task| {
            let mut group = JsonMap::new();
            group.insert(
                "Name".into(),
                task.get("Name").cloned().unwrap_or(JsonValue::Null),
            );
            group.insert("Tasks".into(), JsonValue::Array(vec![task]));
            JsonValue::Object(group)
        })
        .collect();
    if let Some(JsonValue::Array(written)) = job.remove("TaskGroups") {
        groups.extend(written);
    }
    job.insert("TaskGroups".into(), JsonValue::Array(groups));
}

/// A `vault` block of a group or job applies to each of its tasks that has none of its own.
fn give_tasks_vault(group: &mut JsonMap<String, JsonValue>, vault: &JsonValue) {
    if let Some(JsonValue::Array(tasks)) = group.get_mut("Tasks") {
        for task in tasks.iter_mut().filter_map(JsonValue::as_object_mut) {
            task.entry("Vault").or_insert_with(|| vault.clone());
        }
    }
}

/// `distinct_hosts = true`, `version = ">= 1.2"`, ... become Operand/RTarget (or LTarget) as
/// Nomad's decoder does; a constraint with no operator means `=`.
fn fold_constraint_shortcuts(object: &mut JsonMap<String, JsonValue>) {
    for shortcut in [
        "version",
        "semver",
        "regexp",
        "set_contains_any",
        "set_contains_all",
        "set_contains",
    ] {
        if let Some(value) = object.remove(shortcut)
            && value.as_str().is_some_and(|text| !text.is_empty())
        {
            object.insert("Operand".into(), JsonValue::String(shortcut.into()));
            object.insert("RTarget".into(), value);
        }
    }
    // `distinct_hosts = true` leaves RTarget empty, as the reference Nomad (1.1) decodes it and
    // as every Nomad scheduler reads as "on"; `false` is kept as RTarget "false", which later
    // Nomad versions (and drover's scheduler) honour as "off". (Nomad since 1.6 also writes
    // "true" for `true`; both mean the same to every scheduler.)
    if let Some(value) = object.remove("distinct_hosts") {
        object.insert("Operand".into(), JsonValue::String("distinct_hosts".into()));
        if !value.as_bool().unwrap_or(false) {
            object.insert("RTarget".into(), JsonValue::String("false".into()));
        }
    }
    if let Some(value) = object.remove("distinct_property")
        && value.as_str().is_some_and(|text| !text.is_empty())
    {
        object.insert(
            "Operand".into(),
            JsonValue::String("distinct_property".into()),
        );
        object.insert("LTarget".into(), value);
    }
    for (shortcut, operand) in [("is_set", "is_set"), ("is_not_set", "is_not_set")] {
        if let Some(value) = object.remove(shortcut)
            && value.as_str().is_some_and(|text| !text.is_empty())
        {
            object.insert("Operand".into(), JsonValue::String(operand.into()));
            object.insert("LTarget".into(), value);
        }
    }
    let operand_missing = object
        .get("Operand")
        .and_then(JsonValue::as_str)
        .is_none_or(str::is_empty);
    if operand_missing {
        object.insert("Operand".into(), JsonValue::String("=".into()));
    }
}

/// The policy type a task `scaling` block's label names (Nomad compares it ignoring case).
fn scaling_policy_type(label: &str) -> Option<&'static str> {
    match label.to_ascii_lowercase().as_str() {
        "cpu" => Some("vertical_cpu"),
        "mem" => Some("vertical_mem"),
        _ => None,
    }
}

fn json_kind(value: &JsonValue) -> &'static str {
    match value {
        JsonValue::Null => "null",
        JsonValue::Bool(_) => "a bool",
        JsonValue::Number(_) => "a number",
        JsonValue::String(_) => "a string",
        JsonValue::Array(_) => "a list",
        JsonValue::Object(_) => "an object",
    }
}

pub(crate) fn hcl_to_json(value: HclValue) -> JsonValue {
    match value {
        HclValue::Null => JsonValue::Null,
        HclValue::Bool(flag) => JsonValue::Bool(flag),
        HclValue::Number(number) => number_to_json(&number),
        HclValue::String(text) => JsonValue::String(text),
        HclValue::Array(items) => JsonValue::Array(items.into_iter().map(hcl_to_json).collect()),
        HclValue::Object(entries) => JsonValue::Object(
            entries
                .into_iter()
                .map(|(key, value)| (key, hcl_to_json(value)))
                .collect(),
        ),
    }
}

fn number_to_json(number: &hcl::Number) -> JsonValue {
    if let Some(integer) = number.as_i64() {
        JsonValue::from(integer)
    } else if let Some(integer) = number.as_u64() {
        JsonValue::from(integer)
    } else {
        number
            .as_f64()
            .and_then(serde_json::Number::from_f64)
            .map_or(JsonValue::Null, JsonValue::Number)
    }
}

fn scalar_to_string(value: HclValue) -> Result<String, String> {
    match value {
        HclValue::String(text) => Ok(text),
        HclValue::Number(number) => Ok(number.to_string()),
        HclValue::Bool(flag) => Ok(flag.to_string()),
        other => Err(format!(
            "must be a string, got {}",
            describe_value_kind(&other)
        )),
    }
}

fn convert_string_map(value: HclValue) -> Result<JsonValue, String> {
    match value {
        HclValue::Object(entries) => {
            let mut object = JsonMap::new();
            for (key, value) in entries {
                let text =
                    scalar_to_string(value).map_err(|detail| format!("key {key:?} {detail}"))?;
                object.insert(key, JsonValue::String(text));
            }
            Ok(JsonValue::Object(object))
        }
        other => Err(format!(
            "must be an object of strings, got {}",
            describe_value_kind(&other)
        )),
    }
}

/// Converts an evaluated argument to the JSON the schema wants.
fn convert_value(value: HclValue, kind: ValueKind) -> Result<JsonValue, String> {
    match kind {
        ValueKind::String => scalar_to_string(value).map(JsonValue::String),
        ValueKind::Integer => match value {
            HclValue::Number(number) => match (number.as_i64(), number.as_f64()) {
                (Some(integer), _) => Ok(JsonValue::from(integer)),
                (None, Some(float)) if float.fract() == 0.0 && float.abs() < 9.0e15 => {
                    Ok(JsonValue::from(float as i64))
                }
                _ => Err(format!("must be a whole number, got {number}")),
            },
            HclValue::String(text) => text
                .trim()
                .parse::<i64>()
                .map(JsonValue::from)
                .map_err(|_| format!("must be a whole number, got {text:?}")),
            other => Err(format!(
                "must be a whole number, got {}",
                describe_value_kind(&other)
            )),
        },
        ValueKind::Number => match value {
            HclValue::Number(number) => number
                .as_f64()
                .filter(|float| float.is_finite())
                .map(JsonValue::from)
                .ok_or_else(|| format!("must be a number, got {number}")),
            HclValue::String(text) => text
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|float| float.is_finite())
                .map(JsonValue::from)
                .ok_or_else(|| format!("must be a number, got {text:?}")),
            other => Err(format!(
                "must be a number, got {}",
                describe_value_kind(&other)
            )),
        },
        ValueKind::Bool => match value {
            HclValue::Bool(flag) => Ok(JsonValue::Bool(flag)),
            HclValue::String(text) if text == "true" || text == "false" => {
                Ok(JsonValue::Bool(text == "true"))
            }
            other => Err(format!(
                "must be true or false, got {}",
                describe_value_kind(&other)
            )),
        },
        ValueKind::Duration => match value {
            HclValue::String(text) => drover_structs::go_duration::parse_go_duration(&text)
                .map(JsonValue::from)
                .map_err(|error| error.to_string()),
            HclValue::Number(number) => match number.as_u64() {
                Some(nanoseconds) if nanoseconds <= i64::MAX as u64 => {
                    Ok(JsonValue::from(nanoseconds))
                }
                _ => Err(format!(
                    "a duration must be a string such as \"30s\" or a non-negative number of nanoseconds, got {number}"
                )),
            },
            other => Err(format!(
                "a duration must be a string such as \"30s\", got {}",
                describe_value_kind(&other)
            )),
        },
        ValueKind::StringList => match value {
            HclValue::Array(items) => items
                .into_iter()
                .enumerate()
                .map(|(index, item)| {
                    scalar_to_string(item)
                        .map(JsonValue::String)
                        .map_err(|detail| format!("item {index} {detail}"))
                })
                .collect::<Result<Vec<_>, _>>()
                .map(JsonValue::Array),
            other => Err(format!(
                "must be a list of strings, got {}",
                describe_value_kind(&other)
            )),
        },
        ValueKind::IntegerList => match value {
            HclValue::Array(items) => items
                .into_iter()
                .enumerate()
                .map(|(index, item)| {
                    convert_value(item, ValueKind::Integer)
                        .map_err(|detail| format!("item {index} {detail}"))
                })
                .collect::<Result<Vec<_>, _>>()
                .map(JsonValue::Array),
            other => Err(format!(
                "must be a list of whole numbers, got {}",
                describe_value_kind(&other)
            )),
        },
        ValueKind::StringMap => convert_string_map(value),
    }
}
