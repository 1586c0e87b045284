//! The executor: walks a parsed template over a value and writes the output, as Go's
//! `text/template` executes (variables in scope until the end of their control, `range` over
//! lists and maps in key order, `with` moving dot, pipelines handing their value on as the
//! last argument, missing map keys as `<no value>` or, with `missingkey=error`, an error).
//!
//! Bounds for hostile templates: `{{ template }}` calls nest at most [`MAX_TEMPLATE_DEPTH`]
//! deep, one execution walks at most [`MAX_STEPS`] nodes and iterations, and the output stops
//! at the template's `max_output` bytes.

use crate::builtins::Builtin;
use crate::tree::Template;
use crate::tree::{Arg, Callee, Command, Constant, Control, Node, NodeText, Pipe};
use crate::{Error, Value};

/// Deepest nesting of `{{ template }}` calls.
pub const MAX_TEMPLATE_DEPTH: usize = 16;

/// Most nodes and iterations one execution may walk.
pub const MAX_STEPS: u64 = 10_000_000;

static MISSING: Value = Value::Missing;

/// Whether a list ended normally or by `{{ break }}` / `{{ continue }}`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Flow {
    Normal,
    Break,
    Continue,
}

/// The node an error points at.
#[derive(Clone, Copy)]
enum At<'n> {
    Arg(&'n Arg),
    Command(&'n Command),
    Pipe(&'n Pipe),
    Node(&'n Node),
}

type Run<T> = Result<T, Error>;

pub(crate) struct Exec<'t> {
    template: &'t Template,
    /// The template being executed (a `define`d one inside `{{ template }}`).
    name: &'t str,
    vars: Vec<(&'t str, Value)>,
    out: String,
    steps: u64,
    depth: usize,
    /// Whether dot is an element of a `range`, which Go's errors type as `interface {}`.
    dot_interface: bool,
}

/// Executes the template called `name` of `template` over `data`.
pub(crate) fn execute(template: &Template, name: &str, data: &Value) -> Result<String, Error> {
    let Some((name, list)) = template.trees.get_key_value(name) else {
        return Err(Error::exec(
            name,
            format!(
                "{} is an incomplete or empty template",
                crate::fmt::quote(name, false)
            ),
        ));
    };
    // Go's `Execute(w, nil)` runs over no value at all, not over a nil inside an interface.
    let data = match data {
        Value::Nil => &Value::Missing,
        data => data,
    };
    let mut exec = Exec {
        template,
        name,
        vars: vec![("$", data.clone())],
        out: String::with_capacity(template.text.len()),
        steps: 0,
        depth: 0,
        dot_interface: false,
    };
    exec.walk_list(data, list)?;
    Ok(exec.out)
}

impl<'t> Exec<'t> {
    fn fail(&self, at: At<'_>, message: String) -> Error {
        let (pos, context) = match at {
            At::Arg(arg) => (arg.pos(), arg.to_string()),
            At::Command(command) => (command.pos, command.to_string()),
            At::Pipe(pipe) => (pipe.pos, pipe.to_string()),
            At::Node(node) => (
                node_pos(node),
                NodeText {
                    node,
                    text: &self.template.text,
                }
                .to_string(),
            ),
        };
        Error::exec_at(
            &self.template.name,
            self.name,
            &self.template.text,
            pos,
            &context,
            message,
        )
    }

    fn write(&mut self, text: &str) -> Run<()> {
        if self.out.len().saturating_add(text.len()) > self.template.max_output {
            return Err(Error::exec(
                self.name,
                format!("output exceeds {} bytes", self.template.max_output),
            ));
        }
        self.out.push_str(text);
        Ok(())
    }

    fn step(&mut self, node: &Node) -> Run<()> {
        self.steps += 1;
        if self.steps > MAX_STEPS {
            return Err(self.fail(
                At::Node(node),
                format!("execution exceeds {MAX_STEPS} steps"),
            ));
        }
        Ok(())
    }

    fn walk_list(&mut self, dot: &Value, list: &'t [Node]) -> Run<Flow> {
        for node in list {
            let flow = self.walk(dot, node)?;
            if flow != Flow::Normal {
                return Ok(flow);
            }
        }
        Ok(Flow::Normal)
    }

    fn walk(&mut self, dot: &Value, node: &'t Node) -> Run<Flow> {
        self.step(node)?;
        match node {
            Node::Text(range) => {
                let template = self.template;
                self.write(template.text.get(range.clone()).unwrap_or(""))?;
            }
            Node::Action(pipe) => {
                let value = self.eval_pipeline(dot, pipe)?;
                if pipe.decl.is_empty() {
                    self.print(&value)?;
                }
            }
            Node::If(control) => return self.walk_if_or_with(dot, control, false),
            Node::With(control) => return self.walk_if_or_with(dot, control, true),
            Node::Range(control) => return self.walk_range(dot, node, control),
            Node::Template { name, pipe, .. } => self.walk_template(dot, node, name, pipe)?,
            Node::Break(_) => return Ok(Flow::Break),
            Node::Continue(_) => return Ok(Flow::Continue),
        }
        Ok(Flow::Normal)
    }

    fn print(&mut self, value: &Value) -> Run<()> {
        match value {
            Value::Missing | Value::Nil => self.write("<no value>"),
            Value::String(text) => self.write(text),
            other => {
                let text = crate::fmt::sprint(std::slice::from_ref(other));
                self.write(&text)
            }
        }
    }

    fn walk_if_or_with(&mut self, dot: &Value, control: &'t Control, with: bool) -> Run<Flow> {
        let mark = self.vars.len();
        let value = self.eval_pipeline(dot, &control.pipe)?;
        let flow = if value.is_true() {
            if with {
                let outer = std::mem::replace(&mut self.dot_interface, false);
                let flow = self.walk_list(&value, &control.list);
                self.dot_interface = outer;
                flow?
            } else {
                self.walk_list(dot, &control.list)?
            }
        } else if let Some(else_list) = &control.else_list {
            self.walk_list(dot, else_list)?
        } else {
            Flow::Normal
        };
        self.vars.truncate(mark);
        Ok(flow)
    }

    fn walk_range(&mut self, dot: &Value, node: &'t Node, control: &'t Control) -> Run<Flow> {
        let mark = self.vars.len();
        let value = self.eval_pipeline(dot, &control.pipe)?;
        let mut ranged = false;
        match value {
            Value::List(items) => {
                for (index, item) in items.into_iter().enumerate() {
                    ranged = true;
                    let index = Value::Int(i64::try_from(index).unwrap_or(i64::MAX));
                    if self.iteration(node, control, index, item)? == Flow::Break {
                        break;
                    }
                }
            }
            Value::Map(map) => {
                for (key, item) in map {
                    ranged = true;
                    if self.iteration(node, control, Value::String(key), item)? == Flow::Break {
                        break;
                    }
                }
            }
            Value::Missing | Value::Nil => {}
            other => {
                let at = control.pipe.cmds.last().map_or(At::Node(node), At::Command);
                return Err(self.fail(
                    at,
                    format!(
                        "range can't iterate over {}",
                        crate::fmt::sprint(std::slice::from_ref(&other))
                    ),
                ));
            }
        }
        if !ranged && let Some(else_list) = &control.else_list {
            self.walk_list(dot, else_list)?;
        }
        self.vars.truncate(mark);
        Ok(Flow::Normal)
    }

    fn iteration(
        &mut self,
        node: &'t Node,
        control: &'t Control,
        index: Value,
        item: Value,
    ) -> Run<Flow> {
        self.step(node)?;
        let declared = control.pipe.decl.len();
        let top = self.vars.len();
        if declared > 0
            && let Some(slot) = self.vars.get_mut(top - 1)
        {
            slot.1 = item.clone();
        }
        if declared > 1
            && let Some(slot) = self.vars.get_mut(top - 2)
        {
            slot.1 = index;
        }
        let outer = std::mem::replace(&mut self.dot_interface, true);
        let flow = self.walk_list(&item, &control.list);
        self.dot_interface = outer;
        self.vars.truncate(top);
        flow
    }

    fn walk_template(
        &mut self,
        dot: &Value,
        node: &'t Node,
        name: &str,
        pipe: &'t Option<Pipe>,
    ) -> Run<()> {
        let template = self.template;
        let Some((name, list)) = template.trees.get_key_value(name) else {
            return Err(self.fail(
                At::Node(node),
                format!("template {} not defined", crate::fmt::quote(name, false)),
            ));
        };
        if self.depth >= MAX_TEMPLATE_DEPTH {
            return Err(self.fail(
                At::Node(node),
                format!("exceeded maximum template depth ({MAX_TEMPLATE_DEPTH})"),
            ));
        }
        let data = match pipe {
            Some(pipe) => self.eval_pipeline(dot, pipe)?,
            None => Value::Missing,
        };
        let vars = std::mem::replace(&mut self.vars, vec![("$", data.clone())]);
        let caller = std::mem::replace(&mut self.name, name);
        self.depth += 1;
        let outer = std::mem::replace(&mut self.dot_interface, false);
        let result = self.walk_list(&data, list);
        self.dot_interface = outer;
        self.depth -= 1;
        self.name = caller;
        self.vars = vars;
        result.map(|_| ())
    }

    fn eval_pipeline(&mut self, dot: &Value, pipe: &'t Pipe) -> Run<Value> {
        let mut value = None;
        for command in &pipe.cmds {
            value = Some(self.eval_command(dot, command, value)?);
        }
        // Go unwraps the interface a pipeline's value is in: a nil in it is no value at all.
        let value = match value {
            Some(Value::Nil) | None => Value::Missing,
            Some(value) => value,
        };
        for name in &pipe.decl {
            if pipe.is_assign {
                match self.vars.iter_mut().rev().find(|(var, _)| var == name) {
                    Some(slot) => slot.1 = value.clone(),
                    None => {
                        let at = pipe.cmds.last().map_or(At::Pipe(pipe), At::Command);
                        return Err(self.fail(at, format!("undefined variable: {name}")));
                    }
                }
            } else {
                self.vars.push((name, value.clone()));
            }
        }
        Ok(value)
    }

    fn not_a_function(&self, args: &[Arg], fin: &Option<Value>) -> Run<()> {
        if args.len() > 1 || fin.is_some() {
            return Err(self.fail(
                At::Arg(&args[0]),
                format!("can't give argument to non-function {}", args[0]),
            ));
        }
        Ok(())
    }

    fn eval_command(
        &mut self,
        dot: &Value,
        command: &'t Command,
        fin: Option<Value>,
    ) -> Run<Value> {
        let first = &command.args[0];
        match first {
            Arg::Field { names, .. } => {
                return self.field_chain(dot, first, names, &command.args, &fin);
            }
            Arg::Chain { node, fields, .. } => {
                if let Arg::Nil(_) = **node {
                    return Err(self.fail(
                        At::Arg(first),
                        format!("indirection through explicit nil in {first}"),
                    ));
                }
                let receiver = self.eval_arg(dot, node)?;
                return self.field_chain(&receiver, first, fields, &command.args, &fin);
            }
            Arg::Function { .. } => {
                return self.eval_function(dot, first, At::Command(command), &command.args, fin);
            }
            Arg::Pipe(pipe) => {
                self.not_a_function(&command.args, &fin)?;
                return self.eval_pipeline(dot, pipe);
            }
            Arg::Variable { name, fields, .. } => {
                let value = self.variable(first, name)?;
                if fields.is_empty() {
                    self.not_a_function(&command.args, &fin)?;
                    return Ok(value.clone());
                }
                let value = value.clone();
                return self.field_chain(&value, first, fields, &command.args, &fin);
            }
            _ => {}
        }
        self.not_a_function(&command.args, &fin)?;
        match first {
            Arg::Nil(_) => Err(self.fail(At::Arg(first), "nil is not a command".into())),
            Arg::Dot(_) => Ok(dot.clone()),
            other => self.literal(other),
        }
    }

    fn literal(&self, arg: &Arg) -> Run<Value> {
        Ok(match arg {
            Arg::Bool(_, flag) => Value::Bool(*flag),
            Arg::String { value, .. } => Value::String(value.clone()),
            Arg::Number { value, text, .. } => match value {
                Constant::Int(number) => Value::Int(*number),
                Constant::Float(number) => Value::Float(*number),
                Constant::Overflow => {
                    return Err(self.fail(At::Arg(arg), format!("{text} overflows int")));
                }
            },
            _ => Value::Nil,
        })
    }

    fn variable(&self, at: &Arg, name: &str) -> Run<&Value> {
        match self.vars.iter().rev().find(|(var, _)| *var == name) {
            Some((_, value)) => Ok(value),
            None => Err(self.fail(At::Arg(at), format!("undefined variable: {name}"))),
        }
    }

    /// `receiver.a.b…`; the last field gets the command's arguments (an error: maps have no
    /// methods).
    fn field_chain(
        &self,
        receiver: &Value,
        node: &Arg,
        names: &[String],
        args: &[Arg],
        fin: &Option<Value>,
    ) -> Run<Value> {
        let mut current = receiver;
        let last = names.len().saturating_sub(1);
        let receiver_is_dot = matches!(node, Arg::Field { .. });
        for (at, name) in names.iter().enumerate() {
            let has_args = at == last && (args.len() > 1 || fin.is_some());
            let interface = at > 0 || (receiver_is_dot && self.dot_interface);
            current = self.field(current, node, name, has_args, interface)?;
        }
        Ok(current.clone())
    }

    fn field<'v>(
        &self,
        receiver: &'v Value,
        node: &Arg,
        name: &str,
        has_args: bool,
        nested: bool,
    ) -> Run<&'v Value> {
        let quoted = || crate::fmt::quote(name, false);
        match receiver {
            Value::Missing => {
                if self.template.missing_key_error {
                    return Err(self.fail(
                        At::Arg(node),
                        format!("nil data; no entry for key {}", quoted()),
                    ));
                }
                Ok(&MISSING)
            }
            Value::Nil => Err(self.fail(
                At::Arg(node),
                format!("nil pointer evaluating interface {{}}.{name}"),
            )),
            Value::Map(map) => {
                if has_args {
                    return Err(self.fail(
                        At::Arg(node),
                        format!("{name} is not a method but has arguments"),
                    ));
                }
                match map.get(name) {
                    Some(value) => Ok(value),
                    None if self.template.missing_key_error => Err(self.fail(
                        At::Arg(node),
                        format!("map has no entry for key {}", quoted()),
                    )),
                    None => Ok(&MISSING),
                }
            }
            other => Err(self.fail(
                At::Arg(node),
                format!(
                    "can't evaluate field {name} in type {}",
                    if nested {
                        "interface {}"
                    } else {
                        other.type_name()
                    }
                ),
            )),
        }
    }

    /// An argument's value, as a function receives it.
    fn eval_arg(&mut self, dot: &Value, arg: &'t Arg) -> Run<Value> {
        let value = match arg {
            Arg::Dot(_) => dot.clone(),
            Arg::Nil(_) => Value::Nil,
            Arg::Field { names, .. } => self.field_chain(dot, arg, names, &[], &None)?,
            Arg::Variable { name, fields, .. } => {
                let value = self.variable(arg, name)?;
                if fields.is_empty() {
                    value.clone()
                } else {
                    let value = value.clone();
                    self.field_chain(&value, arg, fields, &[], &None)?
                }
            }
            Arg::Pipe(pipe) => self.eval_pipeline(dot, pipe)?,
            Arg::Function { .. } => {
                self.eval_function(dot, arg, At::Arg(arg), std::slice::from_ref(arg), None)?
            }
            Arg::Chain { node, fields, .. } => {
                if let Arg::Nil(_) = **node {
                    return Err(self.fail(
                        At::Arg(arg),
                        format!("indirection through explicit nil in {arg}"),
                    ));
                }
                let receiver = self.eval_arg(dot, node)?;
                self.field_chain(&receiver, arg, fields, &[], &None)?
            }
            other => self.literal(other)?,
        };
        Ok(value.into_argument())
    }

    fn eval_function(
        &mut self,
        dot: &Value,
        ident: &'t Arg,
        call: At<'t>,
        args: &'t [Arg],
        fin: Option<Value>,
    ) -> Run<Value> {
        let Arg::Function { name, callee, .. } = ident else {
            return Err(self.fail(At::Arg(ident), format!("can't evaluate command {ident}")));
        };
        let given = args.len() - 1;
        let count = given + usize::from(fin.is_some());
        let func = match callee {
            Callee::Builtin(builtin) => {
                let arity = builtin.arity();
                if arity.variadic && count < arity.fixed {
                    return Err(self.fail(
                        At::Arg(ident),
                        format!(
                            "wrong number of args for {name}: want at least {} got {given}",
                            arity.fixed
                        ),
                    ));
                }
                if !arity.variadic && count != arity.fixed {
                    return Err(self.fail(
                        At::Arg(ident),
                        format!(
                            "wrong number of args for {name}: want {} got {count}",
                            arity.fixed
                        ),
                    ));
                }
                if matches!(builtin, Builtin::And | Builtin::Or) {
                    let or = *builtin == Builtin::Or;
                    let mut value = Value::Missing;
                    for arg in &args[1..] {
                        value = self.eval_arg(dot, arg)?;
                        if value.is_true() == or {
                            return Ok(value);
                        }
                    }
                    if let Some(fin) = fin {
                        value = fin.into_argument();
                    }
                    return Ok(value);
                }
                None
            }
            Callee::User(func) => Some(*func),
        };
        let mut values = Vec::with_capacity(count);
        for arg in &args[1..] {
            values.push(self.eval_arg(dot, arg)?);
        }
        if let Some(fin) = fin {
            values.push(fin.into_argument());
        }
        if matches!(callee, Callee::Builtin(Builtin::Printf))
            && let (Some(format), Some(value)) = (args.get(1), values.first())
            && !matches!(value, Value::String(_))
        {
            let message = match (format, value) {
                (Arg::Number { .. } | Arg::Bool(..), _) => {
                    format!("expected string; found {format}")
                }
                (Arg::Nil(_), _) => "cannot assign nil to string".to_string(),
                (_, Value::Missing | Value::Nil) => "invalid value; expected string".to_string(),
                (_, other) => format!(
                    "wrong type for value; expected string; got {}",
                    other.type_name()
                ),
            };
            return Err(self.fail(At::Arg(format), message));
        }
        let result = match (func, callee) {
            (Some(func), _) => func(&values).map_err(|error| error.to_string()),
            (None, Callee::Builtin(builtin)) => builtin.call(values),
            (None, Callee::User(func)) => func(&values).map_err(|error| error.to_string()),
        };
        result.map_err(|error| self.fail(call, format!("error calling {name}: {error}")))
    }
}

fn node_pos(node: &Node) -> usize {
    match node {
        Node::Text(range) => range.start,
        Node::Action(pipe) => pipe.pos,
        Node::If(control) | Node::With(control) | Node::Range(control) => control.pipe.pos,
        Node::Template { pos, .. } => *pos,
        Node::Break(pos) | Node::Continue(pos) => *pos,
    }
}
