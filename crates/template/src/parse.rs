//! The parser: tokens into trees, one per template (`define`, `block` and the top one), as
//! Go's `text/template/parse` reads them, with its error texts.
//!
//! Identifiers must name a function and variables must be in scope when they are met, both
//! checked here as Go does. Controls (`if`, `with`, `range`, `block`) and parentheses nest at
//! most [`MAX_NESTING`] deep, so a hostile template cannot exhaust the stack of the recursive
//! descent or of the executor.

use std::collections::HashMap;

use crate::Error;
use crate::builtins::Builtin;
use crate::func::Func;
use crate::lex::{self, Kind, Token};
use crate::tree::{Arg, Callee, Command, Constant, Control, List, Node, Pipe};

/// Deepest nesting of controls and parentheses a template may have.
pub const MAX_NESTING: usize = 32;

/// What the parser found for a delimited item.
enum Item {
    Node(Node),
    End,
    /// `{{ else }}`; `true` for `{{ else if … }}` (the `if` not yet read).
    Else(bool),
}

impl std::fmt::Display for Item {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Item::End => f.write_str("{{end}}"),
            Item::Else(_) => f.write_str("{{else}}"),
            Item::Node(_) => f.write_str("node"),
        }
    }
}

/// Parses `text` into its templates by name; the top one is called `name`.
pub(crate) fn parse(
    name: &str,
    text: &str,
    left: &str,
    right: &str,
    funcs: &HashMap<String, Func>,
) -> Result<HashMap<String, List>, Error> {
    let left = if left.is_empty() { "{{" } else { left };
    let right = if right.is_empty() { "}}" } else { right };
    let mut parser = Parser {
        tokens: lex::lex(text, left, right),
        index: 0,
        furthest: 0,
        name,
        text,
        funcs,
        vars: vec!["$".to_string()],
        range_depth: 0,
        nesting: 0,
        action_line: 0,
        trees: HashMap::new(),
    };
    parser.parse_top()?;
    Ok(parser.trees)
}

struct Parser<'a, 'f> {
    tokens: Vec<Token<'a>>,
    index: usize,
    /// The furthest token read, whose line parse errors name (as Go's do).
    furthest: usize,
    name: &'a str,
    text: &'a str,
    funcs: &'f HashMap<String, Func>,
    vars: Vec<String>,
    range_depth: usize,
    nesting: usize,
    /// The line the current action started on.
    action_line: usize,
    trees: HashMap<String, List>,
}

type Parsed<T> = Result<T, Error>;

impl<'a> Parser<'a, '_> {
    fn fail<T>(&self, message: String) -> Parsed<T> {
        let token = self.tokens.get(self.furthest).or(self.tokens.last());
        let (line, pos) = token.map_or((1, 0), |token| (token.line, token.pos));
        Err(Error::parse(self.name, self.text, line, pos, message))
    }

    fn next(&mut self) -> Token<'a> {
        let last = self.tokens.len().saturating_sub(1);
        let index = self.index.min(last);
        self.index = index + 1;
        self.furthest = self.furthest.max(index);
        self.tokens.get(index).cloned().unwrap_or_else(|| Token {
            kind: Kind::Eof,
            pos: self.text.len(),
            line: 1,
            text: "".into(),
        })
    }

    fn backup(&mut self) {
        self.index = self.index.saturating_sub(1);
    }

    fn peek(&mut self) -> Token<'a> {
        let token = self.next();
        self.backup();
        token
    }

    fn next_non_space(&mut self) -> Token<'a> {
        loop {
            let token = self.next();
            if token.kind != Kind::Space {
                return token;
            }
        }
    }

    fn peek_non_space(&mut self) -> Token<'a> {
        let token = self.next_non_space();
        self.backup();
        token
    }

    fn expect(&mut self, kind: Kind, context: &str) -> Parsed<Token<'a>> {
        let token = self.next_non_space();
        if token.kind != kind {
            return self.unexpected(&token, context);
        }
        Ok(token)
    }

    fn unexpected<T>(&self, token: &Token<'_>, context: &str) -> Parsed<T> {
        if token.kind == Kind::Error {
            let mut extra = String::new();
            if self.action_line != 0 && self.action_line != token.line {
                extra = format!(" in action started at {}:{}", self.name, self.action_line);
                if token.text.ends_with(" action") {
                    extra = extra[" in action".len()..].to_string();
                }
            }
            return self.fail(format!("{token}{extra}"));
        }
        self.fail(format!("unexpected {token} in {context}"))
    }

    fn nest(&mut self) -> Parsed<()> {
        self.nesting += 1;
        if self.nesting > MAX_NESTING {
            return self.fail(format!(
                "controls and parentheses nested deeper than {MAX_NESTING} levels"
            ));
        }
        Ok(())
    }

    fn add(&mut self, name: String, list: List) -> Parsed<()> {
        match self.trees.get(&name) {
            Some(existing) if !is_empty(existing, self.text) => {
                if !is_empty(&list, self.text) {
                    return self.fail(format!(
                        "template: multiple definition of template {}",
                        crate::fmt::quote(&name, false)
                    ));
                }
            }
            _ => {
                self.trees.insert(name, list);
            }
        }
        Ok(())
    }

    fn parse_top(&mut self) -> Parsed<()> {
        let mut root = List::new();
        loop {
            let token = self.peek();
            match token.kind {
                Kind::Eof => break,
                Kind::LeftDelim => {
                    let delim = self.index;
                    self.next();
                    if self.next_non_space().kind == Kind::Define {
                        self.definition()?;
                        continue;
                    }
                    self.index = delim;
                }
                _ => {}
            }
            match self.text_or_action()? {
                Item::Node(node) => root.push(node),
                other => return self.fail(format!("unexpected {other}")),
            }
        }
        self.add(self.name.to_string(), root)
    }

    fn definition(&mut self) -> Parsed<()> {
        const CONTEXT: &str = "define clause";
        let token = self.next_non_space();
        let name = self.template_name(&token, CONTEXT)?;
        self.expect(Kind::RightDelim, CONTEXT)?;
        let vars = std::mem::replace(&mut self.vars, vec!["$".to_string()]);
        let (list, end) = self.item_list()?;
        self.vars = vars;
        if !matches!(end, Item::End) {
            return self.fail(format!("unexpected {end} in {CONTEXT}"));
        }
        self.add(name, list)
    }

    fn template_name(&self, token: &Token<'_>, context: &str) -> Parsed<String> {
        match token.kind {
            Kind::String | Kind::RawString => match unquote(&token.text) {
                Some(name) => Ok(name),
                None => self.fail("invalid syntax".into()),
            },
            _ => self.unexpected(token, context),
        }
    }

    /// Nodes up to an `{{ end }}` or `{{ else }}`, which is returned with them.
    fn item_list(&mut self) -> Parsed<(List, Item)> {
        let mut list = List::new();
        while self.peek_non_space().kind != Kind::Eof {
            match self.text_or_action()? {
                Item::Node(node) => list.push(node),
                end => return Ok((list, end)),
            }
        }
        self.fail("unexpected EOF".into())
    }

    fn text_or_action(&mut self) -> Parsed<Item> {
        let token = self.next_non_space();
        match token.kind {
            Kind::Text => Ok(Item::Node(Node::Text(
                token.pos..token.pos + token.text.len(),
            ))),
            Kind::LeftDelim => {
                self.action_line = token.line;
                let item = self.action();
                self.action_line = 0;
                item
            }
            _ => self.unexpected(&token, "input"),
        }
    }

    fn action(&mut self) -> Parsed<Item> {
        let token = self.next_non_space();
        match token.kind {
            Kind::Block => return self.block().map(Item::Node),
            Kind::Break | Kind::Continue => return self.break_or_continue(&token).map(Item::Node),
            Kind::Else => return self.else_control(),
            Kind::End => {
                self.expect(Kind::RightDelim, "end")?;
                return Ok(Item::End);
            }
            Kind::If => return self.if_control().map(Item::Node),
            Kind::Range => {
                return self
                    .control(false, "range")
                    .map(|c| Item::Node(Node::Range(c)));
            }
            Kind::Template => return self.template_call().map(Item::Node),
            Kind::With => {
                return self
                    .control(false, "with")
                    .map(|c| Item::Node(Node::With(c)));
            }
            _ => {}
        }
        self.backup();
        let pipe = self.pipeline("command", Kind::RightDelim)?;
        Ok(Item::Node(Node::Action(pipe)))
    }

    fn break_or_continue(&mut self, keyword: &Token<'_>) -> Parsed<Node> {
        let word = if keyword.kind == Kind::Break {
            "break"
        } else {
            "continue"
        };
        let token = self.next_non_space();
        if token.kind != Kind::RightDelim {
            return self.unexpected(&token, &format!("{{{{{word}}}}}"));
        }
        if self.range_depth == 0 {
            return self.fail(format!("{{{{{word}}}}} outside {{{{range}}}}"));
        }
        Ok(if keyword.kind == Kind::Break {
            Node::Break(keyword.pos)
        } else {
            Node::Continue(keyword.pos)
        })
    }

    fn else_control(&mut self) -> Parsed<Item> {
        if self.peek_non_space().kind == Kind::If {
            return Ok(Item::Else(true));
        }
        self.expect(Kind::RightDelim, "else")?;
        Ok(Item::Else(false))
    }

    fn if_control(&mut self) -> Parsed<Node> {
        self.control(true, "if").map(Node::If)
    }

    fn control(&mut self, allow_else_if: bool, context: &str) -> Parsed<Control> {
        self.nest()?;
        let mark = self.vars.len();
        let pipe = self.pipeline(context, Kind::RightDelim)?;
        let is_range = context == "range";
        if is_range {
            self.range_depth += 1;
        }
        let (list, next) = self.item_list()?;
        if is_range {
            self.range_depth -= 1;
        }
        let else_list = match next {
            Item::Else(true) if allow_else_if => {
                self.next_non_space();
                Some(vec![self.if_control()?])
            }
            Item::Else(_) => {
                let (else_list, next) = self.item_list()?;
                if !matches!(next, Item::End) {
                    return self.fail(format!("expected end; found {next}"));
                }
                Some(else_list)
            }
            _ => None,
        };
        self.vars.truncate(mark);
        self.nesting -= 1;
        Ok(Control {
            pipe,
            list,
            else_list,
        })
    }

    fn template_call(&mut self) -> Parsed<Node> {
        const CONTEXT: &str = "template clause";
        let token = self.next_non_space();
        let name = self.template_name(&token, CONTEXT)?;
        let mut pipe = None;
        if self.next_non_space().kind != Kind::RightDelim {
            self.backup();
            pipe = Some(self.pipeline(CONTEXT, Kind::RightDelim)?);
        }
        Ok(Node::Template {
            pos: token.pos,
            name,
            pipe,
        })
    }

    fn block(&mut self) -> Parsed<Node> {
        const CONTEXT: &str = "block clause";
        self.nest()?;
        let token = self.next_non_space();
        let name = self.template_name(&token, CONTEXT)?;
        let pipe = self.pipeline(CONTEXT, Kind::RightDelim)?;
        let vars = std::mem::replace(&mut self.vars, vec!["$".to_string()]);
        let range_depth = std::mem::take(&mut self.range_depth);
        let (list, end) = self.item_list()?;
        self.vars = vars;
        self.range_depth = range_depth;
        if !matches!(end, Item::End) {
            return self.fail(format!("unexpected {end} in {CONTEXT}"));
        }
        self.add(name.clone(), list)?;
        self.nesting -= 1;
        Ok(Node::Template {
            pos: token.pos,
            name,
            pipe: Some(pipe),
        })
    }

    fn pipeline(&mut self, context: &str, end: Kind) -> Parsed<Pipe> {
        let first = self.peek_non_space();
        let mut pipe = Pipe {
            pos: first.pos,
            decl: Vec::new(),
            is_assign: false,
            cmds: Vec::new(),
        };
        while self.peek_non_space().kind == Kind::Variable {
            let start = self.index;
            let variable = self.next();
            let next = self.peek_non_space();
            match next.kind {
                Kind::Assign | Kind::Declare => {
                    pipe.is_assign = next.kind == Kind::Assign;
                    self.next_non_space();
                    pipe.decl.push(variable.text.to_string());
                    self.vars.push(variable.text.to_string());
                    break;
                }
                Kind::Char if next.text == "," => {
                    self.next_non_space();
                    pipe.decl.push(variable.text.to_string());
                    self.vars.push(variable.text.to_string());
                    if context == "range" && pipe.decl.len() < 2 {
                        match self.peek_non_space().kind {
                            Kind::Variable | Kind::RightDelim | Kind::RightParen => continue,
                            _ => return self.fail("range can only initialize variables".into()),
                        }
                    }
                    return self.fail(format!("too many declarations in {context}"));
                }
                _ => {
                    self.index = start;
                    break;
                }
            }
        }
        loop {
            let token = self.next_non_space();
            match token.kind {
                kind if kind == end => {
                    self.check_pipeline(&pipe, context)?;
                    return Ok(pipe);
                }
                Kind::Bool
                | Kind::CharConstant
                | Kind::Dot
                | Kind::Field
                | Kind::Identifier
                | Kind::Number
                | Kind::Nil
                | Kind::RawString
                | Kind::String
                | Kind::Variable
                | Kind::LeftParen => {
                    self.backup();
                    let command = self.command()?;
                    pipe.cmds.push(command);
                }
                _ => return self.unexpected(&token, context),
            }
        }
    }

    fn check_pipeline(&self, pipe: &Pipe, context: &str) -> Parsed<()> {
        if pipe.cmds.is_empty() {
            return self.fail(format!("missing value for {context}"));
        }
        for (index, command) in pipe.cmds.iter().enumerate().skip(1) {
            if matches!(
                command.args.first(),
                Some(
                    Arg::Bool(..)
                        | Arg::Dot(_)
                        | Arg::Nil(_)
                        | Arg::Number { .. }
                        | Arg::String { .. }
                )
            ) {
                return self.fail(format!(
                    "non executable command in pipeline stage {}",
                    index + 1
                ));
            }
        }
        Ok(())
    }

    fn command(&mut self) -> Parsed<Command> {
        let pos = self.peek_non_space().pos;
        let mut args = Vec::new();
        loop {
            self.peek_non_space();
            if let Some(operand) = self.operand()? {
                args.push(operand);
            }
            let token = self.next();
            match token.kind {
                Kind::Space => continue,
                Kind::RightDelim | Kind::RightParen => self.backup(),
                Kind::Pipe => {}
                _ => return self.unexpected(&token, "operand"),
            }
            break;
        }
        if args.is_empty() {
            return self.fail("empty command".into());
        }
        Ok(Command { pos, args })
    }

    fn operand(&mut self) -> Parsed<Option<Arg>> {
        let Some(node) = self.term()? else {
            return Ok(None);
        };
        if self.peek().kind != Kind::Field {
            return Ok(Some(node));
        }
        let pos = self.peek().pos;
        let mut fields = Vec::new();
        while self.peek().kind == Kind::Field {
            let token = self.next();
            fields.push(token.text[1..].to_string());
        }
        Ok(Some(match node {
            Arg::Field { mut names, .. } => {
                names.extend(fields);
                Arg::Field { pos, names }
            }
            Arg::Variable {
                name, fields: _, ..
            } => Arg::Variable { pos, name, fields },
            Arg::Bool(..) | Arg::String { .. } | Arg::Number { .. } | Arg::Nil(_) | Arg::Dot(_) => {
                return self.fail(format!(
                    "unexpected . after term {}",
                    crate::fmt::quote(&node.to_string(), false)
                ));
            }
            node => Arg::Chain {
                pos,
                node: Box::new(node),
                fields,
            },
        }))
    }

    fn term(&mut self) -> Parsed<Option<Arg>> {
        let token = self.next_non_space();
        let pos = token.pos;
        Ok(Some(match token.kind {
            Kind::Identifier => {
                let name = token.text.to_string();
                let callee = match self.funcs.get(&name) {
                    Some(func) => Callee::User(*func),
                    None => match Builtin::named(&name) {
                        Some(builtin) => Callee::Builtin(builtin),
                        None => {
                            return self.fail(format!(
                                "function {} not defined",
                                crate::fmt::quote(&name, false)
                            ));
                        }
                    },
                };
                Arg::Function { pos, name, callee }
            }
            Kind::Dot => Arg::Dot(pos),
            Kind::Nil => Arg::Nil(pos),
            Kind::Variable => {
                if !self.vars.iter().any(|name| name == token.text.as_ref()) {
                    return self.fail(format!(
                        "undefined variable {}",
                        crate::fmt::quote(&token.text, false)
                    ));
                }
                Arg::Variable {
                    pos,
                    name: token.text.to_string(),
                    fields: Vec::new(),
                }
            }
            Kind::Field => Arg::Field {
                pos,
                names: vec![token.text[1..].to_string()],
            },
            Kind::Bool => Arg::Bool(pos, token.text == "true"),
            Kind::Number | Kind::CharConstant => {
                let value = match number(&token) {
                    Ok(value) => value,
                    Err(message) => return self.fail(message),
                };
                Arg::Number {
                    pos,
                    text: token.text.to_string(),
                    value,
                }
            }
            Kind::LeftParen => {
                self.nest()?;
                let pipe = self.pipeline("parenthesized pipeline", Kind::RightParen)?;
                self.nesting -= 1;
                Arg::Pipe(Box::new(pipe))
            }
            Kind::String | Kind::RawString => match unquote(&token.text) {
                Some(value) => Arg::String {
                    pos,
                    quoted: token.text.to_string(),
                    value,
                },
                None => return self.fail("invalid syntax".into()),
            },
            _ => {
                self.backup();
                return Ok(None);
            }
        }))
    }
}

/// Whether a tree holds nothing but white space (Go's `IsEmptyTree`).
fn is_empty(list: &List, text: &str) -> bool {
    list.iter().all(|node| match node {
        Node::Text(range) => text.get(range.clone()).unwrap_or("").trim().is_empty(),
        _ => false,
    })
}

/// A number or character literal as the value Go's executor makes of it.
fn number(token: &Token<'_>) -> Result<Constant, String> {
    let text: &str = &token.text;
    if token.kind == Kind::CharConstant {
        let inner = &text[1..];
        let (c, tail) = unquote_char(inner, '\'').ok_or_else(|| "invalid syntax".to_string())?;
        if tail != "'" {
            return Err(format!("malformed character constant: {text}"));
        }
        return Ok(Constant::Int(i64::from(u32::from(c))));
    }
    let quoted = || crate::fmt::quote(text, false);
    if text.ends_with('i') {
        return Err(format!("illegal number syntax: {}", quoted()));
    }
    match parse_integer(text) {
        Some(Ok(value)) => return Ok(Constant::Int(value)),
        Some(Err(())) => return Ok(Constant::Overflow),
        None => {}
    }
    let plain = text.replace('_', "");
    let is_hex = plain
        .trim_start_matches(['+', '-'])
        .to_ascii_lowercase()
        .starts_with("0x");
    match plain.parse::<f64>() {
        Ok(value) if !is_hex => {
            if !text.contains(['.', 'e', 'E', 'p', 'P']) {
                return Err(format!("integer overflow: {}", quoted()));
            }
            Ok(Constant::Float(value))
        }
        _ => Err(format!("illegal number syntax: {}", quoted())),
    }
}

/// Go's `strconv.ParseInt(text, 0, 64)`: `Some(Err)` when it is an unsigned integer too large
/// for `int` (Go's `IsUint` only), `None` when it is no integer.
fn parse_integer(text: &str) -> Option<Result<i64, ()>> {
    let (negative, digits) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let lower = digits.to_ascii_lowercase();
    let (radix, body) = if let Some(rest) = lower.strip_prefix("0x") {
        (16, rest.to_string())
    } else if let Some(rest) = lower.strip_prefix("0o") {
        (8, rest.to_string())
    } else if let Some(rest) = lower.strip_prefix("0b") {
        (2, rest.to_string())
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, lower[1..].to_string())
    } else {
        (10, lower.clone())
    };
    let body = body.replace('_', "");
    if body.is_empty() || !body.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let magnitude = u128::from_str_radix(&body, radix).ok()?;
    let signed = if negative {
        -(magnitude as i128)
    } else {
        magnitude as i128
    };
    match i64::try_from(signed) {
        Ok(value) => Some(Ok(value)),
        Err(_) if !negative && u64::try_from(magnitude).is_ok() => Some(Err(())),
        Err(_) => None,
    }
}

/// Go's `strconv.Unquote` for `"…"` and `` `…` `` literals.
pub(crate) fn unquote(text: &str) -> Option<String> {
    if let Some(raw) = text.strip_prefix('`') {
        let raw = raw.strip_suffix('`')?;
        return Some(raw.replace('\r', ""));
    }
    let mut rest = text.strip_prefix('"')?.strip_suffix('"')?;
    let mut out = String::with_capacity(rest.len());
    while !rest.is_empty() {
        let (c, tail) = unquote_char(rest, '"')?;
        out.push(c);
        rest = tail;
    }
    Some(out)
}

/// Go's `strconv.UnquoteChar`: the first (possibly escaped) character of `text` and the rest.
fn unquote_char(text: &str, quote: char) -> Option<(char, &str)> {
    let mut chars = text.chars();
    let c = chars.next()?;
    if c == quote && (quote == '\'' || quote == '"') {
        return None;
    }
    if c != '\\' {
        return Some((c, chars.as_str()));
    }
    let escape = chars.next()?;
    let rest = chars.as_str();
    let simple = match escape {
        'a' => Some('\u{7}'),
        'b' => Some('\u{8}'),
        'f' => Some('\u{c}'),
        'n' => Some('\n'),
        'r' => Some('\r'),
        't' => Some('\t'),
        'v' => Some('\u{b}'),
        '\\' => Some('\\'),
        '\'' | '"' if escape == quote => Some(escape),
        _ => None,
    };
    if let Some(c) = simple {
        return Some((c, rest));
    }
    let (count, radix) = match escape {
        'x' => (2, 16),
        'u' => (4, 16),
        'U' => (8, 16),
        '0'..='7' => (2, 8),
        _ => return None,
    };
    let digits = rest.get(..count)?;
    let value = if radix == 8 {
        let value = u32::from_str_radix(&format!("{escape}{digits}"), 8).ok()?;
        if value > 255 {
            return None;
        }
        value
    } else {
        u32::from_str_radix(digits, 16).ok()?
    };
    Some((char::from_u32(value)?, &rest[count..]))
}
