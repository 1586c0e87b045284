//! The parse tree: what the parser builds and the executor walks.
//!
//! Every node keeps its byte offset in the template text, from which errors derive line and
//! column, and prints (`Display`) as Go's `parse` package prints it, which execution errors
//! quote as their context (`at <.Values.x>`). Functions are resolved while parsing, so
//! executing a call does no lookup by name.

use std::collections::HashMap;
use std::fmt::{self, Display, Formatter, Write as _};
use std::ops::Range;

use crate::builtins::Builtin;
use crate::func::Func;

/// A sequence of nodes: a template's body or a branch of a control.
pub(crate) type List = Vec<Node>;

#[derive(Debug, Clone)]
pub(crate) enum Node {
    /// Text to copy, as a range of the template text.
    Text(Range<usize>),
    /// `{{ pipeline }}`: prints the value unless the pipeline declares variables.
    Action(Pipe),
    If(Control),
    With(Control),
    Range(Control),
    /// `{{ template "name" pipeline }}` (and the call half of `{{ block }}`).
    Template {
        pos: usize,
        name: String,
        pipe: Option<Pipe>,
    },
    Break(usize),
    Continue(usize),
}

/// `if`, `with` and `range`: the pipeline, the body and the `else` branch.
#[derive(Debug, Clone)]
pub(crate) struct Control {
    pub pipe: Pipe,
    pub list: List,
    pub else_list: Option<List>,
}

/// Commands joined by `|`, with the variables it declares or assigns.
#[derive(Debug, Clone)]
pub(crate) struct Pipe {
    pub pos: usize,
    /// Variable names, `$` included.
    pub decl: Vec<String>,
    /// `=` rather than `:=`.
    pub is_assign: bool,
    pub cmds: Vec<Command>,
}

/// One stage of a pipeline: an operand or a function call with its arguments.
#[derive(Debug, Clone)]
pub(crate) struct Command {
    pub pos: usize,
    pub args: Vec<Arg>,
}

/// What a function to call is.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Callee {
    Builtin(Builtin),
    User(Func),
}

/// A number literal as Go's executor turns it into a value.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Constant {
    Int(i64),
    Float(f64),
    /// An integer that does not fit `int`: an error when used.
    Overflow,
}

/// An operand.
#[derive(Debug, Clone)]
pub(crate) enum Arg {
    Dot(usize),
    Nil(usize),
    Bool(usize, bool),
    Number {
        pos: usize,
        text: String,
        value: Constant,
    },
    String {
        pos: usize,
        quoted: String,
        value: String,
    },
    /// `.A.B`.
    Field {
        pos: usize,
        names: Vec<String>,
    },
    /// `$x.A.B`.
    Variable {
        pos: usize,
        name: String,
        fields: Vec<String>,
    },
    Function {
        pos: usize,
        name: String,
        callee: Callee,
    },
    /// `( pipeline )`.
    Pipe(Box<Pipe>),
    /// `( pipeline ).A.B`.
    Chain {
        pos: usize,
        node: Box<Arg>,
        fields: Vec<String>,
    },
}

impl Arg {
    pub fn pos(&self) -> usize {
        match self {
            Arg::Dot(pos) | Arg::Nil(pos) | Arg::Bool(pos, _) => *pos,
            Arg::Number { pos, .. }
            | Arg::String { pos, .. }
            | Arg::Field { pos, .. }
            | Arg::Variable { pos, .. }
            | Arg::Function { pos, .. }
            | Arg::Chain { pos, .. } => *pos,
            Arg::Pipe(pipe) => pipe.pos,
        }
    }
}

fn write_fields(f: &mut Formatter<'_>, fields: &[String]) -> fmt::Result {
    for field in fields {
        write!(f, ".{field}")?;
    }
    Ok(())
}

impl Display for Arg {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Arg::Dot(_) => f.write_char('.'),
            Arg::Nil(_) => f.write_str("nil"),
            Arg::Bool(_, flag) => write!(f, "{flag}"),
            Arg::Number { text, .. } => f.write_str(text),
            Arg::String { quoted, .. } => f.write_str(quoted),
            Arg::Field { names, .. } => write_fields(f, names),
            Arg::Variable { name, fields, .. } => {
                f.write_str(name)?;
                write_fields(f, fields)
            }
            Arg::Function { name, .. } => f.write_str(name),
            Arg::Pipe(pipe) => pipe.fmt(f),
            Arg::Chain { node, fields, .. } => {
                if let Arg::Pipe(pipe) = &**node {
                    write!(f, "({pipe})")?;
                } else {
                    node.fmt(f)?;
                }
                write_fields(f, fields)
            }
        }
    }
}

impl Display for Command {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        for (index, arg) in self.args.iter().enumerate() {
            if index > 0 {
                f.write_char(' ')?;
            }
            if let Arg::Pipe(pipe) = arg {
                write!(f, "({pipe})")?;
            } else {
                arg.fmt(f)?;
            }
        }
        Ok(())
    }
}

impl Display for Pipe {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        if !self.decl.is_empty() {
            f.write_str(&self.decl.join(", "))?;
            f.write_str(" := ")?;
        }
        for (index, cmd) in self.cmds.iter().enumerate() {
            if index > 0 {
                f.write_str(" | ")?;
            }
            cmd.fmt(f)?;
        }
        Ok(())
    }
}

fn write_list(f: &mut Formatter<'_>, list: &List, text: &str) -> fmt::Result {
    for node in list {
        write!(f, "{}", NodeText { node, text })?;
    }
    Ok(())
}

/// A node as Go prints it, its text nodes read from the template text.
pub(crate) struct NodeText<'a> {
    pub node: &'a Node,
    pub text: &'a str,
}

impl Display for NodeText<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let control = |f: &mut Formatter<'_>, word: &str, control: &Control| {
            write!(f, "{{{{{word} {}}}}}", control.pipe)?;
            write_list(f, &control.list, self.text)?;
            if let Some(else_list) = &control.else_list {
                f.write_str("{{else}}")?;
                write_list(f, else_list, self.text)?;
            }
            f.write_str("{{end}}")
        };
        match self.node {
            Node::Text(range) => write!(
                f,
                "{}",
                crate::fmt::quote(self.text.get(range.clone()).unwrap_or(""), false)
            ),
            Node::Action(pipe) => write!(f, "{{{{{pipe}}}}}"),
            Node::If(c) => control(f, "if", c),
            Node::With(c) => control(f, "with", c),
            Node::Range(c) => control(f, "range", c),
            Node::Template { name, pipe, .. } => {
                write!(f, "{{{{template {}", crate::fmt::quote(name, false))?;
                if let Some(pipe) = pipe {
                    write!(f, " {pipe}")?;
                }
                f.write_str("}}")
            }
            Node::Break(_) => f.write_str("{{break}}"),
            Node::Continue(_) => f.write_str("{{continue}}"),
        }
    }
}

/// A named template: its text, functions, delimiters and options, and once parsed the trees
/// of it and of the templates it defines.
#[derive(Debug, Clone)]
pub struct Template {
    pub(crate) name: String,
    pub(crate) text: String,
    pub(crate) left: String,
    pub(crate) right: String,
    pub(crate) funcs: HashMap<String, Func>,
    pub(crate) trees: HashMap<String, List>,
    /// A missing map key fails the execution (Go's `missingkey=error`) instead of printing
    /// `<no value>`.
    pub missing_key_error: bool,
    /// Largest output an execution may write, in bytes.
    pub max_output: usize,
}
